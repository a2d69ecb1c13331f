#!/usr/bin/env bash
# punctual timer vs cyclictest, side by side: same CPU, interval, policy,
# priority and duration, alternating rounds; medians of p50/p99 latency
# (both read from the cyclictest-format histogram each tool writes, so the
# percentiles are computed the same way) and CPU time per wake-up
# (user+sys from wait4 rusage / wake-ups).
#
# usage: bench/timer-vs-cyclictest.sh [ROUNDS=5] [SECONDS=10] [CPU=1]
set -euo pipefail
ROUNDS=${1:-5}; SECS=${2:-10}; CPU=${3:-1}
cd "$(dirname "$0")/.."
command -v cyclictest >/dev/null || { apt-get update -qq && apt-get install -y -qq rt-tests >/dev/null; }
cargo build --release -q -p punctual
BIN=${CARGO_TARGET_DIR:-target}/release/punctual
OUT=$(mktemp -d)
for r in $(seq 1 "$ROUNDS"); do
  python3 bench/_rusage_run.py "$OUT/p$r" "$BIN" timer --cpus "$CPU" --interval 1ms --policy fifo --priority 95 \
      --duration "${SECS}s" --hist "$OUT/p$r.hist"
  python3 bench/_rusage_run.py "$OUT/c$r" cyclictest -q -m -a "$CPU" -t 1 -p 95 --policy=fifo -i 1000 \
      -D "$SECS" -h 20000 --histfile="$OUT/c$r.hist"
done
python3 - "$OUT" "$ROUNDS" <<'PY'
import sys, statistics as st
out, rounds = sys.argv[1], int(sys.argv[2])
def hist(path):
    rows, over = [], 0
    for line in open(path):
        if line.startswith('# Histogram Overflows:'):
            over = int(line.split(':')[1].split()[0])
        elif line[:1].isdigit():
            f = line.split()
            rows.append((int(f[0]), int(f[1])))
    return rows, over
def pct(rows, over, q):
    n = sum(c for _, c in rows) + over
    acc = 0
    for us, c in rows:
        acc += c
        if acc >= q * n:
            return us
    return float('inf')
def rusage(path):
    u, s = open(path + '.rusage').read().split()
    return float(u) + float(s)
res = {'punctual': [], 'cyclictest': []}
for r in range(1, rounds + 1):
    for tool, tag in (('punctual', 'p'), ('cyclictest', 'c')):
        rows, over = hist(f'{out}/{tag}{r}.hist')
        n = sum(c for _, c in rows) + over
        res[tool].append((pct(rows, over, .5), pct(rows, over, .99), rusage(f'{out}/{tag}{r}') / max(n, 1) * 1e9, n))
print(f"{'tool':<11} {'p50 us':>7} {'p99 us':>7} {'cpu ns/wakeup':>14} {'wakeups':>8}   (medians of {rounds} rounds)")
med = {}
for tool, v in res.items():
    med[tool] = [st.median(x[i] for x in v) for i in range(4)]
    m = med[tool]
    print(f"{tool:<11} {m[0]:>7} {m[1]:>7} {m[2]:>14.0f} {m[3]:>8.0f}")
p, c = med['punctual'], med['cyclictest']
ratio = lambda a, b: a / b if b else float('nan')
print(f"ratio punctual/cyclictest: p50 {ratio(p[0], c[0]):.3f}  p99 {ratio(p[1], c[1]):.3f}  cpu/wakeup {ratio(p[2], c[2]):.3f}")
PY
rm -rf "$OUT"
