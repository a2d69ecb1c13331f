#!/usr/bin/env bash
# Forecast against reality: for several bufferings, `punctual validate`
# takes a timer record and runs a real n-buffer consumer under the same
# load (none, and a SCHED_FIFO-99 neighbor spinning 1 ms every 10.37 ms),
# alternating the two phases in rounds, and prints predicted beside
# observed underruns: the queue model (the forecast) and seed 002's
# first-order formula beside it, and the queue model again with its
# stall term from a noise phase (a busy loop's stolen intervals) run in
# the same rounds under the same load. Needs root (SCHED_FIFO). No peer tool
# answers this question, so there is nothing to install; the comparison is
# with reality. Set KEEP=DIR to keep each case's timer (and noise) records there
# (rerun the forecast on them with `punctual forecast`, or all of them with
# bench/forecast-rerun.sh).
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
print(f"{'n':>2} {'t':>5} {'c':>6} {'load':<9} {'slack':>7} {'MTTF queue':>10} {'MTTF seed':>10} {'pred':>8} {'pred seed':>9} {'obs':>6} {'ratio':>6} {'seed':>6} {'x2':>5}"
      f" | {'MTTF noise':>10} {'pred noise':>10} {'ratio':>6} {'x2':>5}")
def ms(s): return "never" if s is None else f"{s*1e3:.1f}ms"
def r(x): return "-" if x is None else f"{x:.2f}"
def w(x): return "(<10)" if x is None else ("yes" if x else "NO")
for n, t, ct, c in rows:
    print(f"{n:>2} {t/1e6:>4g}ms {ct:>6} {c['load']:<9} {c['slack_ns']/1e6:>5.2f}ms {ms(c['forecast_mttf_seconds']):>10} "
          f"{ms(c['seed_mttf_seconds']):>10} {c['predicted_underruns']:>8.1f} {c['predicted_underruns_seed']:>9.1f} "
          f"{c['observed_underruns']:>6} {r(c['ratio']):>6} {r(c['ratio_seed']):>6} {w(c['within_factor_2']):>5}"
          f" | {ms(c.get('noise_forecast_mttf_seconds')):>10} {c.get('predicted_underruns_noise', float('nan')):>10.1f} "
          f"{r(c.get('ratio_noise')):>6} {w(c.get('within_factor_2_noise')):>5}")
print("after |: the queue model with S from the noise phase's gaps (docs/forecast.md §3.4)")
PY
