#!/usr/bin/env bash
# A stall longer than the probe's period, forecast against a real
# consumer (docs/forecast.md §3.5): a SCHED_FIFO 99 neighbor spinning
# 2 ms every 23.1 ms on the probed CPU, a 1 ms timer record taken under
# it and forecast for 2 × 3 ms buffers with 1 ms of compute (what
# `punctual forecast` makes of a timer record alone: the 2 ms bursts show
# as one wake-up late by 1-2 ms and one swallowed period each), beside
# `punctual validate` running that consumer for real under the same
# neighbor (its own forecasts: S from a busy loop's stolen gaps, and S
# inferred from its 3 ms timer phase). Timer run and validate alternate
# in ROUNDS rounds; per round and as medians it prints underruns per
# second, forecast and observed, and their ratio.
# Needs root (SCHED_FIFO). No peer tool answers this; reality is the
# comparison.
#
# usage: bench/long-stall.sh [SECONDS=20] [CPU=1] [ROUNDS=3]
set -euo pipefail
SECS=${1:-20}; CPU=${2:-1}; ROUNDS=${3:-3}
cd "$(dirname "$0")/.."
cargo build --release -q -p punctual
cargo build --release -q -p punctual-live --example inject
BIN=${CARGO_TARGET_DIR:-target}/release/punctual
INJ=${CARGO_TARGET_DIR:-target}/release/examples/inject
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
for r in $(seq 1 "$ROUNDS"); do
  # The injector validate runs (it spins 2 ms from when it actually
  # starts; `timer --load cpu:…` spins to a fixed deadline, shorter by
  # its own wake-up latency, and 2 ms + 1 ms of compute is exactly the
  # 3 ms deadline: a few µs decide). Every wake-up later than 100 us is
  # kept, so the periods a burst swallowed can be placed (§3.2).
  "$INJ" "$CPU" $((SECS + 2)) 23100 2000 2>/dev/null & IP=$!
  sleep 0.5
  "$BIN" timer --cpus "$CPU" --interval 1ms --policy fifo --priority 95 \
    --duration "${SECS}s" --threshold 100us --max-spikes 100000 \
    --json "$OUT/timer$r.json" >/dev/null 2>&1
  wait $IP
  "$BIN" forecast "$OUT/timer$r.json" --buffers 2 --buffer-len 3ms --compute 1ms \
    --json "$OUT/forecast$r.json" >/dev/null 2>&1
  "$BIN" validate --cpu "$CPU" --buffers 2 --buffer-len 3ms --compute 1ms \
    --load injector --injector-period 23.1ms --injector-spin 2ms \
    --duration "${SECS}s" --rounds 2 --json "$OUT/validate$r.json" >/dev/null 2>&1
done
python3 - "$OUT" "$ROUNDS" <<'PY'
import json, os, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
rows = []
print("round | 1 ms timer forecast /s (95% CI) | consumer observed /s | ratio obs/forecast"
      " | validate noise-gap forecast /s | validate 3 ms timer forecast /s")
for r in range(1, rounds + 1):
    f = json.load(open(os.path.join(out, f"forecast{r}.json")))
    s = next(x for x in f["series"] if x["metric"] == "latency")
    m = s["mttf"]
    pred, lo, hi = m["underrun_rate_per_s"], m["rate_ci_low_per_s"], m["rate_ci_high_per_s"]
    c = json.load(open(os.path.join(out, f"validate{r}.json")))["cases"][0]
    secs = c["consumer_seconds"]
    obs = c["observed_underruns"] / secs
    noise = c["predicted_underruns_noise"] / secs
    timer3 = c["predicted_underruns"] / secs
    ratio = obs / pred if pred > 0 else float("inf")
    rows.append((pred, obs, ratio, noise, timer3))
    print(f"{r} | {pred:.2f} ({lo:.2f}-{hi:.2f}) | {obs:.2f} | {ratio:.2f} | {noise:.2f} | {timer3:.2f}")
med = [statistics.median(x) for x in zip(*rows)]
print(f"median | {med[0]:.2f} | {med[1]:.2f} | {med[2]:.2f} | {med[3]:.2f} | {med[4]:.2f}")
PY
