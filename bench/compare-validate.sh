#!/usr/bin/env bash
# `punctual compare` against the two answers it must give on this machine:
#   - two idle `timer` runs: "no difference" (exit 0) in >= 9 of 10 pairs;
#   - an idle run against one with a noisy thread on the probed CPU
#     (a SCHED_FIFO 99 busy thread, 2 ms bursts every 20 ms, run by
#     `timer --load`): "regressed" (exit 1) in 10 of 10.
# Default quantiles (p99, p99.9); p99.9 needs 10,000 samples, and a 10 s
# run at 1 kHz holds at most 9,999 wake-ups (fewer with missed periods),
# so runs last 11 s unless told otherwise.
# Each pair is measured back to back (idle, idle, noisy) so that both
# answers see the same state of the machine. Needs root (SCHED_FIFO).
#
# Each run's missed periods are printed: an "idle" run that missed many
# periods met stalls from outside (the host, other tenants' real-time
# work), and its comparison says so rather than the method.
#
# The records' latency series carry per-window counts, and compare
# resamples blocks of consecutive windows of each run, as many per block
# as the run's neighbouring windows are alike. BLOCK_WINDOWS=N fixes the
# block length (1: windows one by one); NO_WINDOWS=1 compares copies with
# the windows taken out, so that compare falls back to resampling sample
# by sample: the same records under each method.
#
# After the counts, bench/compare-spread.py measures the run-to-run
# spread of the idle pairs: for each pair and quantile, the ratio and the
# smallest --min-change under which it would be "no difference"; the
# smallest --min-change that makes >= 90% of the idle pairs "no
# difference" (the figure to pass to compare on this machine); and, at
# that setting, the idle/idle and idle/noisy counts again. Several kept
# directories pool: bench/compare-spread.py target/release/punctual DIR...
#
# usage: bench/compare-validate.sh [PAIRS=10] [SECONDS=11] [CPU=0]
#        bench/compare-validate.sh --records DIR [PAIRS=10]
#          (compare again the records a previous run kept in DIR)
#        NO_WINDOWS=1 bench/compare-validate.sh --records DIR [PAIRS=10]
#        BLOCK_WINDOWS=1 bench/compare-validate.sh --records DIR [PAIRS=10]
set -euo pipefail
REUSE=
if [ "${1:-}" = "--records" ]; then REUSE=$2; shift 2; fi
PAIRS=${1:-10}; SECS=${2:-11}; CPU=${3:-0}
cd "$(dirname "$0")/.."
cargo build --release -q -p punctual
BIN=${CARGO_TARGET_DIR:-target}/release/punctual
HOW=()
if [ -n "${BLOCK_WINDOWS:-}" ]; then HOW=(--block-windows "$BLOCK_WINDOWS"); fi
LOAD="cpu:policy=fifo,priority=99,cpus=$CPU,duty=0.1,period=20ms"
OUT=${REUSE:-$(mktemp -d)}
missed() {
  python3 -c 'import json,sys; print(sum(s["missed"] for s in json.load(open(sys.argv[1]))["series"] if s["metric"] == "latency"))' "$1"
}
same=0; regressed=0
for i in $(seq 1 "$PAIRS"); do
  if [ -z "$REUSE" ]; then
    "$BIN" timer --cpus "$CPU" --duration "${SECS}s" --json "$OUT/a$i.json" >/dev/null 2>&1
    "$BIN" timer --cpus "$CPU" --duration "${SECS}s" --json "$OUT/b$i.json" >/dev/null 2>&1
    "$BIN" timer --cpus "$CPU" --duration "${SECS}s" --load "$LOAD" --json "$OUT/n$i.json" >/dev/null 2>&1
  fi
  A=$OUT/a$i.json; B=$OUT/b$i.json; N=$OUT/n$i.json
  if [ -n "${NO_WINDOWS:-}" ]; then
    for f in "$A" "$B" "$N"; do
      python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); [s.pop("windows", None) for s in r["series"]]; json.dump(r, open(sys.argv[2], "w"))' "$f" "$f.nowin"
    done
    A=$A.nowin; B=$B.nowin; N=$N.nowin
  fi
  set +e
  "$BIN" compare "${HOW[@]}" "$A" "$B" >"$OUT/ab$i.txt" 2>&1; ab=$?
  "$BIN" compare "${HOW[@]}" "$A" "$N" >"$OUT/an$i.txt" 2>&1; an=$?
  set -e
  # Exit 0 is also "improved": only "no difference" counts for idle/idle.
  [ "$ab" -eq 0 ] && ! grep -qw improved "$OUT/ab$i.txt" && same=$((same + 1))
  [ "$an" -eq 1 ] && regressed=$((regressed + 1))
  # The p99 ratio NEW/BASE and its interval, for the log.
  printf 'pair %2d  idle/idle exit %d  %-22s missed periods %s / %s\n' "$i" "$ab" \
    "$(grep -E '^cpu[0-9]+\.latency +p99 ' "$OUT/ab$i.txt" | awk '{print $5, $6, $7, $8}')" \
    "$(missed "$OUT/a$i.json")" "$(missed "$OUT/b$i.json")"
  printf '         idle/noisy exit %d  %-22s missed periods %s / %s\n' "$an" \
    "$(grep -E '^cpu[0-9]+\.latency +p99 ' "$OUT/an$i.txt" | awk '{print $5, $6, $7, $8}')" \
    "$(missed "$OUT/a$i.json")" "$(missed "$OUT/n$i.json")"
done
echo "idle vs idle:  no difference in $same of $PAIRS pairs (goal: >= 9 of 10)"
echo "idle vs noisy: regressed in $regressed of $PAIRS pairs (goal: 10 of 10)"
python3 bench/compare-spread.py "$BIN" "$OUT"
echo "records and comparisons kept in $OUT"
