#!/usr/bin/env bash
# Do two punctual binaries simulate byte for byte alike? Speed work on the
# simulator (issue 3) must not change what it computes unless it says so;
# this is the check behind "outputs byte-identical" in the README.
#
# Usage: bench/sim-identity.sh BIN_A BIN_B
# Runs both on every scenarios/*.toml (2 s; JSON record, Perfetto trace and
# stdout), the fuzz corpus (2 s, seeds 1-3), the sim-speed bench scenario
# (60 s) and both SimSo task sets (100 s), then again with late jobs
# aborted (scenarios and SimSo sets, with two overloaded sets), then
# compares every file.
# Wall-time figures are removed from stdout first. Exit 0 when all match,
# 1 when any differ (each is named).
set -euo pipefail
cd "$(dirname "$0")/.."
[[ $# -eq 2 ]] || { echo "usage: bench/sim-identity.sh BIN_A BIN_B" >&2; exit 2; }
for b in "$1" "$2"; do
  [[ -x "$b" ]] || { echo "sim-identity.sh: '$b' is not an executable" >&2; exit 2; }
done
WORK="$(mktemp -d)"
[[ -n "${KEEP:-}" ]] || trap 'rm -rf "$WORK"' EXIT
mkdir -p "$WORK/in/sets"
# The bench scenario is the one bench/sim-speed.sh writes; keep them in step.
sed -n "/^cat >\"\$SCN\" <<'TOML'/,/^TOML/p" bench/sim-speed.sh | sed '1d;$d' >"$WORK/in/bench.toml"
python3 bench/simso/gen_taskset.py "$WORK/in/sets" >/dev/null 2>&1
# An overloaded set (U = 1.15, 30 tasks) under EDF and RM, for the runs
# with late jobs aborted.
python3 -c 'import sys; sys.path.insert(0, "bench/simso")
from gen_taskset import twenty_task, write
ts = twenty_task(7, 30, 1.15)
for p in ("edf", "rm"):
    write(sys.argv[1], "over-" + p, ts, 10, "overload", p)' "$WORK/in/sets"

gen() { # gen BIN OUTDIR
  local bin="$1" out="$2" f b s
  mkdir -p "$out"
  run() { # run NAME ARGS...
    local name="$1"; shift
    "$bin" simulate "$@" --json "$out/$name.json" --trace "$out/$name.trace.json" \
      >"$out/$name.stdout" 2>&1 || echo "exit $?" >>"$out/$name.stdout"
  }
  for f in scenarios/*.toml; do
    run "$(basename "$f" .toml)" "$f" --duration 2s
  done
  for f in crates/sim/tests/corpus/*.toml; do
    b="corpus-$(basename "$f" .toml)"
    for s in 1 2 3; do run "$b-$s" "$f" --duration 2s --seed "$s"; done
  done
  run bench "$WORK/in/bench.toml" --duration 60s
  for s in edf3 edf20; do run "$s" "$WORK/in/sets/$s.toml" --duration 100s; done
  # Late jobs aborted (sim.on_miss = "abort"): every scenario that allows
  # it, and the SimSo sets with the overloaded ones.
  for f in scenarios/*.toml; do
    run "abort-$(basename "$f" .toml)" "$f" --duration 2s --set sim.on_miss=abort
  done
  for s in edf3 edf20 over-edf over-rm; do
    run "abort-$s" "$WORK/in/sets/$s.toml" --duration 100s --set sim.on_miss=abort
  done
  # Wall time and rates differ run to run; paths differ per side.
  sed -i -E 's/[0-9.]+ ?(s|ms|µs)\b.*events\/s.*//; s/in [0-9.]+ (s|ms)//g' "$out"/*.stdout
  sed -i "s#$out/#OUT/#g" "$out"/*.stdout "$out"/*.json
}
gen "$1" "$WORK/a"
gen "$2" "$WORK/b"
n=0; total=0
for f in "$WORK"/a/*; do
  total=$((total + 1))
  cmp -s "$f" "$WORK/b/$(basename "$f")" || { echo "differs: $(basename "$f")"; n=$((n + 1)); }
done
echo "$n of $total files differ"
[[ $n -eq 0 ]]
