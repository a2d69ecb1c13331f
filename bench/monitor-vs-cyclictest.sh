#!/usr/bin/env bash
# punctual monitor vs cyclictest at the monitor's low rate, side by side:
# same CPU, 100 Hz, SCHED_FIFO 50, same duration, alternating rounds.
# Medians of CPU time per wake-up (user+sys from wait4 rusage / wake-ups:
# what leaving it running costs) and of the largest latency each saw.
# Both hold /dev/cpu_dma_latency at 0 (cyclictest's default; the monitor's
# --dma-latency 0), since a wake-up's cost depends on the idle state the
# CPU left.
#
# usage: bench/monitor-vs-cyclictest.sh [ROUNDS=5] [SECONDS=20] [CPU=1]
set -euo pipefail
ROUNDS=${1:-5}; SECS=${2:-20}; CPU=${3:-1}
cd "$(dirname "$0")/.."
command -v cyclictest >/dev/null || { apt-get update -qq && apt-get install -y -qq rt-tests >/dev/null; }
cargo build --release -q -p punctual
BIN=${CARGO_TARGET_DIR:-target}/release/punctual
OUT=$(mktemp -d)
for r in $(seq 1 "$ROUNDS"); do
  python3 bench/_rusage_run.py "$OUT/p$r" "$BIN" monitor --cpus "$CPU" --rate 100 --priority 50 \
      --listen off --textfile "$OUT/p$r.prom" --persist-every 60s --duration "${SECS}s" \
      --dma-latency 0
  python3 bench/_rusage_run.py "$OUT/c$r" cyclictest -q -m -a "$CPU" -t 1 -p 50 --policy=fifo \
      -i 10000 -D "$SECS"
done
python3 - "$OUT" "$ROUNDS" "$CPU" <<'PY'
import re, sys, statistics as st
out, rounds, cpu = sys.argv[1], int(sys.argv[2]), sys.argv[3]
def rusage(prefix):
    u, s = open(prefix + '.rusage').read().split()
    return float(u) + float(s)
def monitor(r):
    text = open(f'{out}/p{r}.prom').read()
    n = float(re.search(r'punctual_monitor_latency_seconds_count\{cpu="%s"\} (\S+)' % cpu, text).group(1))
    mx = float(re.search(r'punctual_monitor_max_latency_seconds\{cpu="%s"\} (\S+)' % cpu, text).group(1)) * 1e6
    return n, mx
def cyclic(r):
    text = open(f'{out}/c{r}.out').read()
    n = float(re.search(r'C:\s*(\d+)', text).group(1))
    mx = float(re.search(r'Max:\s*(\d+)', text).group(1))
    return n, mx
res = {'punctual': [], 'cyclictest': []}
for r in range(1, rounds + 1):
    for tool, tag, f in (('punctual', 'p', monitor), ('cyclictest', 'c', cyclic)):
        n, mx = f(r)
        res[tool].append((rusage(f'{out}/{tag}{r}') / max(n, 1) * 1e9, mx, n))
print(f"{'tool':<11} {'cpu ns/wakeup':>14} {'max us':>8} {'wakeups':>8}   (medians of {rounds} rounds, 100 Hz)")
med = {}
for tool, v in res.items():
    med[tool] = [st.median(x[i] for x in v) for i in range(3)]
    m = med[tool]
    print(f"{tool:<11} {m[0]:>14.0f} {m[1]:>8.0f} {m[2]:>8.0f}")
p, c = med['punctual'], med['cyclictest']
ratio = lambda a, b: a / b if b else float('nan')
print(f"ratio punctual/cyclictest: cpu/wakeup {ratio(p[0], c[0]):.3f}  max {ratio(p[1], c[1]):.3f}")
PY
