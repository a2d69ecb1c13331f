#!/usr/bin/env bash
# Simulator memory and speed against the number of tasks (issue 21): N
# periodic tasks (period 100-149 ms, exec 10 µs, priorities 1-31, so many
# share a priority) on one CPU for 2 s simulated, run once per N under
# /usr/bin/time -v. A benchmark, not a test: it prints figures and checks
# nothing.
#
# Usage: bench/sim-tasks.sh [--bin BINARY] [N...]   (default N: 10 100 1000 2500 10000)
# Without --bin, builds and runs the release binary of this tree.
# The scenario is deterministic: task i has period 100 + i mod 50 ms and
# priority 1 + i mod 31; the file is regenerated identically for each N.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=""
if [[ "${1:-}" == "--bin" ]]; then
  BIN="$2"; shift 2
  [[ -x "$BIN" ]] || { echo "sim-tasks.sh: '$BIN' is not an executable" >&2; exit 2; }
fi
ns=("$@")
[[ ${#ns[@]} -gt 0 ]] || ns=(10 100 1000 2500 10000)
for n in "${ns[@]}"; do
  [[ "$n" =~ ^[1-9][0-9]*$ ]] || { echo "sim-tasks.sh: '$n' is not a task count" >&2; exit 2; }
done
if [[ -z "$BIN" ]]; then
  cargo build --release -q -p punctual
  BIN="${CARGO_TARGET_DIR:-target}/release/punctual"
fi
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT

gen() { # gen N FILE
  {
    printf '[sim]\ndescription = "%s periodic tasks, shared priorities"\nduration = "2s"\n' "$1"
    awk -v n="$1" 'BEGIN {
      for (i = 0; i < n; i++)
        printf "\n[[task]]\nname = \"t%d\"\nkind = \"periodic\"\npriority = %d\nperiod = \"%dms\"\nexec = \"10us\"\n",
          i, 1 + i % 31, 100 + i % 50
    }'
  } >"$2"
}

printf '%7s %12s %9s %10s %12s %12s\n' tasks events wall_s Mev_s rss_MB rss_KB/task
for n in "${ns[@]}"; do
  scn="$WORK/tasks-$n.toml"
  gen "$n" "$scn"
  /usr/bin/time -v "$BIN" simulate "$scn" --duration 2s >"$WORK/out" 2>"$WORK/time" || {
    echo "sim-tasks.sh: simulate failed for N=$n:" >&2; cat "$WORK/out" "$WORK/time" >&2; exit 1; }
  ev=$(sed -n 's/^\([0-9]*\) events in .*/\1/p' "$WORK/out")
  rss=$(sed -n 's/^[[:space:]]*Maximum resident set size (kbytes): //p' "$WORK/time")
  wall=$(sed -n 's/^[[:space:]]*Elapsed (wall clock) time.*: //p' "$WORK/time" |
    awk -F: '{s = 0; for (i = 1; i <= NF; i++) s = s * 60 + $i; print s}')
  awk -v n="$n" -v e="$ev" -v w="$wall" -v r="$rss" 'BEGIN {
    printf "%7d %12d %9.2f %10.3f %12.1f %12.1f\n", n, e, w, e / (w > 0 ? w : 0.01) / 1e6, r / 1024, r / n }'
done
echo "(one run per N; wall and rss from /usr/bin/time -v; events as simulate counts them)"
