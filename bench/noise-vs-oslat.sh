#!/usr/bin/env bash
# punctual noise vs oslat, side by side on the same CPU, policy (FIFO 95)
# and duration, alternating rounds; medians of the loop's iteration cost
# (duration / iterations) and of the total detected gap time.
#
# oslat keeps a 1-us histogram whose key k counts loops of [k-1, k) us (key
# 1 holds the ordinary sub-microsecond loops) and whose last key (32 by
# default) holds every loop of 31 us or more without its length, so it has
# no total of stolen time to compare. The comparison is of gap counts in the
# same classes, 2-31 us (oslat keys 3..31) and >= 31 us (its last key), and
# of the maximum; punctual's exact total (gaps above its 1 us threshold,
# fixed here) is shown beside.
#
# usage: bench/noise-vs-oslat.sh [ROUNDS=5] [SECONDS=10] [CPU=1]
set -euo pipefail
ROUNDS=${1:-5}; SECS=${2:-10}; CPU=${3:-1}
cd "$(dirname "$0")/.."
command -v oslat >/dev/null || { apt-get update -qq && apt-get install -y -qq rt-tests >/dev/null; }
cargo build --release -q -p punctual
BIN=${CARGO_TARGET_DIR:-target}/release/punctual
OUT=$(mktemp -d)
for r in $(seq 1 "$ROUNDS"); do
  python3 bench/_rusage_run.py "$OUT/p$r" "$BIN" noise --cpus "$CPU" --policy fifo --priority 95 \
      --duration "${SECS}s" --threshold 1us --json "$OUT/p$r.json"
  python3 bench/_rusage_run.py "$OUT/o$r" oslat -q -c "$CPU" -f 95 -D "$SECS" --json "$OUT/o$r.json"
done
python3 - "$OUT" "$ROUNDS" "$SECS" <<'PY'
import sys, json, statistics as st
out, rounds, secs = sys.argv[1], int(sys.argv[2]), sys.argv[3]
P, O = [], []
for r in range(1, rounds + 1):
    o = json.load(open(f'{out}/o{r}.json'))
    t = next(iter(o['thread'].values()))
    h = {int(k): v for k, v in t['histogram'].items()}
    n = sum(h.values())
    last = max(h)
    # Key k is [k-1, k) us: 2 us and up starts at key 3, the last key is
    # everything from last-1 us.
    edge_us = last - 1
    mid = sum(v for k, v in h.items() if 3 <= k < last)
    O.append((t['duration'] * 1e9 / max(n, 1), mid, h.get(last, 0), t['max'], float('nan')))
    p = json.load(open(f'{out}/p{r}.json'))
    s = p['stolen'][0]
    loop = p['extra']['noise_loop']['cpus'][f"cpu{s['cpu']}"]
    g = next(x for x in p['series'] if x['metric'] == 'gap')['histogram']['buckets']
    mid = sum(c for lo, c in g if 2000 <= lo < edge_us * 1000)
    big = sum(c for lo, c in g if lo >= edge_us * 1000)
    P.append((s['observed_ns'] / max(loop['iterations'], 1), mid, big, s['max_ns'] / 1e3, s['total_ns'] / 1e6))
print(f"{'tool':<9} {'loop ns':>8} {'gaps 2-31us':>12} {'gaps >=31us':>12} {'max us':>9} {'stolen ms':>10}   (medians of {rounds} rounds of {secs} s)")
med = {}
for name, v in (('punctual', P), ('oslat', O)):
    m = [st.median(x[i] for x in v) for i in range(5)]
    med[name] = m
    print(f"{name:<9} {m[0]:>8.1f} {m[1]:>12.0f} {m[2]:>12.0f} {m[3]:>9.0f} {m[4]:>10.1f}")
p, o = med['punctual'], med['oslat']
r = lambda a, b: a / b if b else float('nan')
print(f"ratio punctual/oslat: loop cost {r(p[0], o[0]):.3f}  gaps 2-31us {r(p[1], o[1]):.3f}  gaps >=31us {r(p[2], o[2]):.3f}  max {r(p[3], o[3]):.3f}")
print("(oslat keeps no total: its last key holds every loop >= 31 us without their lengths)")
PY
rm -rf "$OUT"
