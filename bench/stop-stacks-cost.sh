#!/bin/sh
# What `--stop-stacks` costs the probe it watches: the `stacktrace` trigger
# unwinds the stack of every task that gives up a probed CPU, inside the
# switch, i.e. on the probe's wake-up path when the probe is what gets the
# CPU. Timer probe, 1 kHz, `--cause --stop-at` (a threshold no wake-up
# crosses, so both runs last their whole time) with and without
# `--stop-stacks`, alternating rounds on the same CPU. Run as root.
#
#   bench/stop-stacks-cost.sh [rounds] [seconds-per-run] [cpu]
#
# Prints per-round p50/p99, then the medians and
# their with/without ratios, with the load average before and after: the
# cost scales with how often another task holds the CPU when the probe
# wakes, so a busy machine shows more of it than an idle one.
set -eu
ROUNDS=${1:-5}
SECS=${2:-10}
CPU=${3:-1}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
TARGET=${CARGO_TARGET_DIR:-$ROOT/target}
command -v python3 >/dev/null || { apt-get install -y python3 >/dev/null; }
# NO_BUILD=1 reuses the binary already in $TARGET/release.
[ -n "${NO_BUILD:-}" ] || (cd "$ROOT" && CARGO_TARGET_DIR=$TARGET cargo build --release -q -p punctual)
BIN=$TARGET/release/punctual
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)
i=1
while [ "$i" -le "$ROUNDS" ]; do
  if [ $((i % 2)) -eq 1 ]; then order="off on"; else order="on off"; fi
  for mode in $order; do
    flag=""
    [ "$mode" = on ] && flag="--stop-stacks"
    "$BIN" timer --cpus "$CPU" --duration "${SECS}s" --cause --stop-at 10s $flag \
      --json "$OUT/$mode.$i.json" >/dev/null 2>&1
  done
  i=$((i + 1))
done
LOAD_AFTER=$(cut -d' ' -f1-3 /proc/loadavg)
python3 - "$OUT" "$ROUNDS" "$SECS" "$LOAD_BEFORE" "$LOAD_AFTER" "$CPU" <<'PY'
import json, sys, statistics as st
out, rounds, secs, lb, la, cpu = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5], sys.argv[6]
q = {m: {"p50": [], "p99": []} for m in ("off", "on")}
for i in range(1, rounds + 1):
    line = []
    for m in ("off", "on"):
        r = json.load(open(f"{out}/{m}.{i}.json"))
        s = next(s for s in r["series"] if s["metric"] == "latency")
        for k in ("p50", "p99"):
            q[m][k].append(s["percentiles"][k] / 1000)
        line.append(f"{m} p50 {q[m]['p50'][-1]:.2f} us p99 {q[m]['p99'][-1]:.2f} us")
    print(f"round {i}: " + "; ".join(line))
print()
print(f"| timer probe, CPU {cpu}, {rounds} rounds x {secs} s | without --stop-stacks | with | ratio |")
print("|---|---|---|---|")
for k in ("p50", "p99"):
    a, b = st.median(q["off"][k]), st.median(q["on"][k])
    print(f"| {k} (median of rounds) | {a:.2f} us | {b:.2f} us | {b / a:.3f} |")
print(f"load average before {lb}, after {la}")
PY
