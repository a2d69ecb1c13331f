#!/usr/bin/env bash
# Forecast against reality: for several bufferings, `punctual validate`
# takes a timer record and runs a real n-buffer consumer under the same
# load (none, and a SCHED_FIFO-99 neighbor spinning 1 ms every 10.37 ms),
# alternating the two phases in rounds, and prints predicted beside
# observed underruns. Needs root (SCHED_FIFO). No peer tool answers this
# question, so there is nothing to install; the comparison is with reality.
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
    --duration "$DUR" --rounds 4 --json "$OUT/v$i.json" 2>/dev/null
done
echo
echo "summary (ratio = observed / predicted underruns; judged where >= 10 observed)"
python3 - "$OUT" <<'PY'
import json, sys, glob, os
rows = []
for f in sorted(glob.glob(os.path.join(sys.argv[1], "v*.json"))):
    d = json.load(open(f))
    b = d["buffering"]
    for c in d["cases"]:
        rows.append((b["buffers"], b["buffer_len"], c))
print(f"{'n':>2} {'t(ns)':>8} {'load':<9} {'slack':>8} {'MTTF seed':>10} {'MTTF +c':>9} {'pred':>8} {'obs':>6} {'ratio':>6} {'+c':>6}")
def ms(s): return "never" if s is None else f"{s*1e3:.1f}ms"
def r(x): return "-" if x is None else f"{x:.2f}"
for n, t, c in rows:
    print(f"{n:>2} {t:>8} {c['load']:<9} {c['slack_ns']:>8} {ms(c['forecast_mttf_seconds']):>10} "
          f"{ms(c['forecast_compute_aware_mttf_seconds']):>9} {c['predicted_underruns']:>8.1f} "
          f"{c['observed_underruns']:>6} {r(c['ratio']):>6} {r(c['ratio_compute_aware']):>6}")
PY
