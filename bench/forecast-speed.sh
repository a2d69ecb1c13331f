#!/usr/bin/env bash
# Wall time of `punctual forecast` and `punctual advise` on a check record
# whose FIFO 99 thread repeats every 10 steps of ADSL's 2 ms, so its
# forecasts go through the periodic phase chain (docs/forecast.md §3.3),
# for two binaries side by side: alternating rounds, the median of each,
# old ÷ new, and whether their printed outputs are identical.
#
#   bench/forecast-speed.sh OLD_BIN [NEW_BIN] [ROUNDS=5]
#
# NEW_BIN defaults to target/release/punctual (built). RECORD=path picks
# another record (default: the CLI tests' advise fixture).
set -euo pipefail
cd "$(dirname "$0")/.."
OLD=${1:?usage: bench/forecast-speed.sh OLD_BIN [NEW_BIN] [ROUNDS=5]}
NEW=${2:-}
ROUNDS=${3:-5}
if [ -z "$NEW" ]; then
  cargo build --release -q -p punctual
  NEW=${CARGO_TARGET_DIR:-target}/release/punctual
fi
for b in "$OLD" "$NEW"; do
  [ -x "$b" ] || { echo "forecast-speed.sh: '$b' is not an executable binary" >&2; exit 2; }
done
[[ "$ROUNDS" =~ ^[1-9][0-9]*$ ]] || { echo "forecast-speed.sh: ROUNDS is a whole number above 0 (got '$ROUNDS')" >&2; exit 2; }
RECORD=${RECORD:-crates/cli/tests/fixtures/advise-check-fifo99.json}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
python3 - "$OLD" "$NEW" "$ROUNDS" "$RECORD" "$WORK" <<'PY'
import statistics, subprocess, sys, time
old, new, rounds, record, work = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5]
print(f"{'verb':<9} {'old s':>8} {'new s':>8} {'old/new':>8}  output")
for verb in ("forecast", "advise"):
    times = {old: [], new: []}
    outs = {}
    for _ in range(rounds):
        for b in (old, new):
            t0 = time.perf_counter()
            p = subprocess.run([b, verb, record], capture_output=True, text=True)
            times[b].append(time.perf_counter() - t0)
            if p.returncode != 0:
                sys.exit(f"forecast-speed.sh: {b} {verb} exited {p.returncode}: {p.stderr.strip()}")
            outs[b] = p.stdout
    mo, mn = statistics.median(times[old]), statistics.median(times[new])
    same = "identical" if outs[old] == outs[new] else "differs"
    print(f"{verb:<9} {mo:8.2f} {mn:8.2f} {mo / mn:8.2f}  {same}")
PY
