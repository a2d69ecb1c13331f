#!/usr/bin/env bash
# Forecast against reality: for several bufferings, `punctual validate`
# takes a timer record and runs a real n-buffer consumer under the same
# load (none, and a SCHED_FIFO-99 neighbor spinning 1 ms every 10.37 ms),
# alternating the two phases in rounds, and prints predicted beside
# observed underruns: the queue model (the forecast, its stall term S
# from a noise phase, a busy loop's stolen intervals, run in the same
# rounds under the same load) and Cota-Robles & Held's first-order
# formula (docs/references.md) beside it, and the queue model again with S
# inferred from the timer record.
# Needs root (SCHED_FIFO). No peer tool answers this question, so there
# is nothing to install; the comparison is with reality. Set KEEP=DIR to
# keep each case's timer, noise and consumer records there (rerun the
# forecast on them with `punctual forecast`, or all of them with
# bench/forecast-rerun.sh; bench/forecast-decompose.py says whether a miss
# is in the model or in its inputs).
#
# Usage: bench/validate-forecast.sh [DURATION_PER_LOAD] [CPU]
set -euo pipefail
DUR=${1:-30s}
CPU=${2:-0}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=${PUNCTUAL:-}
if [ -z "$BIN" ]; then
  (cd "$ROOT" && cargo build --release -p punctual >/dev/null)
  BIN="${CARGO_TARGET_DIR:-$ROOT/target}/release/punctual"
fi
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
i=0
for cfg in "2 1ms 0.5ms" "3 1ms 0.5ms" "2 2ms 25%" "4 1ms 0.9ms"; do
  set -- $cfg
  i=$((i + 1))
  echo "== n=$1 t=$2 c=$3"
  "$BIN" validate --cpu "$CPU" --buffers "$1" --buffer-len "$2" --compute "$3" \
    --duration "$DUR" --rounds 4 --json "$OUT/v$i.json" \
    ${KEEP:+--records "$(mkdir -p "$KEEP/v$i" && echo "$KEEP/v$i")"} 2>/dev/null
  # Observed counts beside the records, for bench/forecast-rerun.sh.
  if [ -n "${KEEP:-}" ]; then cp "$OUT/v$i.json" "$KEEP/"; fi
done
echo
echo "summary (ratio = observed / predicted underruns; judged where >= 10 observed)"
python3 - "$OUT" <<'PY'
import json, sys, glob, os
rows = []
for f in sorted(glob.glob(os.path.join(sys.argv[1], "v*.json"))):
    d = json.load(open(f))
    b = d["buffering"]
    comp = b["compute"]
    c_txt = (f"{comp['fraction']*100:g}%" if "fraction" in comp else f"{comp['time']/1e6:g}ms")
    for c in d["cases"]:
        rows.append((b["buffers"], b["buffer_len"], c_txt, c))
print(f"{'n':>2} {'t':>5} {'c':>6} {'load':<9} {'slack':>7} {'MTTF queue':>10} {'1st order':>10} {'pred':>8} {'pred 1st':>9} {'obs':>6} {'ratio':>6} {'1st':>6} {'x2':>5}"
      f" | {'MTTF other':>10} {'pred other':>10} {'ratio':>6} {'x2':>5}")
def ms(s): return "never" if s is None else f"{s*1e3:.1f}ms"
def r(x): return "-" if x is None else f"{x:.2f}"
def w(x): return "(<10)" if x is None else ("yes" if x else "NO")
models = set()
for n, t, ct, c in rows:
    timer = (c['forecast_mttf_seconds'], c['predicted_underruns'], c['ratio'], c['within_factor_2'])
    noise = (c.get('noise_forecast_mttf_seconds'), c.get('predicted_underruns_noise', float('nan')),
             c.get('ratio_noise'), c.get('within_factor_2_noise'))
    # The forecast validate printed first (noise gaps unless no noise phase ran).
    model = c.get('forecast_model', 'timer tail')
    models.add(model)
    first, other = (noise, timer) if model == 'noise gaps' else (timer, noise)
    print(f"{n:>2} {t/1e6:>4g}ms {ct:>6} {c['load']:<9} {c['slack_ns']/1e6:>5.2f}ms {ms(first[0]):>10} "
          f"{ms(c['first_order_mttf_seconds']):>10} {first[1]:>8.1f} {c['predicted_underruns_first_order']:>9.1f} "
          f"{c['observed_underruns']:>6} {r(first[2]):>6} {r(c['ratio_first_order']):>6} {w(first[3]):>5}"
          f" | {ms(other[0]):>10} {other[1]:>10.1f} {r(other[2]):>6} {w(other[3]):>5}")
if models == {'noise gaps'}:
    print("MTTF queue: S from the noise phase's gaps (docs/forecast.md §3.4); after |: S inferred from the timer record's tail (§3.2)")
else:
    print("MTTF queue: " + " / ".join(sorted(models)) + " (see each case's forecast_model); after |: the other one")
PY
