#!/usr/bin/env bash
# punctual watch against cyclictest's own account of itself: cyclictest
# (FIFO 95, 1 ms, pinned to CPU) is the application; `punctual watch --pid
# --tid` watches its measuring thread from outside, through the
# scheduler's events. Both histograms are read the same way (1 us buckets,
# a bucket's lower edge; cyclictest's -h histogram, punctual's series
# histogram), so p50/p99/max compare directly.
#
# cyclictest measures from its timer's expiry to its own clock read back
# in user space; punctual from sched_waking (inside the timer interrupt,
# once the hrtimer callback runs) to the switch-in. The difference is the
# part of the wake-up path only one of them sees: interrupt entry and
# hrtimer expiry before sched_waking, context switch, return to user
# space and clock_gettime after the switch-in. It is printed per quantile.
# A timer interrupt delivered late (a host stall before it) delays
# sched_waking itself, so no scheduler event shows it; punctual's
# release-to-running figure (from the period fitted to the wake-ups) does,
# less the fastest wake-up's own latency, and is printed beside.
#
# Rounds alternate cyclictest alone and cyclictest watched, so the
# recorder's own cost on cyclictest's wake-up path shows too.
#
# Second part: the same under a noisy neighbour (`punctual load cpu`: one
# SCHED_FIFO 99 thread on the same CPU, 1 ms of every 10.37 ms); punctual
# must name it first behind cyclictest's slowest wake-ups.
#
# usage: bench/watch-vs-cyclictest.sh [ROUNDS=3] [SECONDS=10] [CPU=1]
# Run it on an otherwise idle machine: other work on the CPU moves both tools' figures.
set -euo pipefail
ROUNDS=${1:-3}; SECS=${2:-10}; CPU=${3:-1}
cd "$(dirname "$0")/.."
command -v cyclictest >/dev/null || { apt-get update -qq && apt-get install -y -qq rt-tests >/dev/null; }
cargo build --release -q -p punctual
BIN=${CARGO_TARGET_DIR:-target}/release/punctual
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT

# cyclictest_run TAG WATCH(0|1) NOISY(0|1)
cyclictest_run() {
  local tag=$1 watch=$2 noisy=$3 lpid=""
  if [ "$noisy" = 1 ]; then
    "$BIN" load "cpu:threads=1,policy=fifo,priority=99,cpus=$CPU,duty=9.643%,period=10.37ms" \
      --duration "$((SECS + 4))s" >"$OUT/$tag.load" 2>&1 &
    lpid=$!
    sleep 0.5
  fi
  cyclictest -q -m -a "$CPU" -t 1 -p 95 --policy=fifo -i 1000 -D "$SECS" \
    -h 20000 --histfile="$OUT/$tag.hist" >/dev/null 2>&1 &
  local cpid=$! tid=""
  if [ "$watch" = 1 ]; then
    # The measuring thread: cyclictest's one thread besides main.
    for _ in $(seq 1 200); do
      tid=$(ls "/proc/$cpid/task" 2>/dev/null | grep -vx "$cpid" | head -1 || true)
      [ -n "$tid" ] && break
      sleep 0.01
    done
    # It ends when cyclictest exits (the record then covers its life).
    "$BIN" watch --pid "$cpid" --tid "$tid" --duration "$((SECS + 5))s" \
      --json "$OUT/$tag.json" >"$OUT/$tag.txt" 2>"$OUT/$tag.err" || {
        cat "$OUT/$tag.err" >&2; exit 1; }
  fi
  wait "$cpid"
  if [ -n "$lpid" ]; then kill "$lpid" 2>/dev/null || true; wait "$lpid" 2>/dev/null || true; fi
}

for r in $(seq 1 "$ROUNDS"); do
  cyclictest_run "alone$r" 0 0
  cyclictest_run "idle$r" 1 0
  cyclictest_run "noisy$r" 1 1
done

python3 - "$OUT" "$ROUNDS" <<'PY'
import json, sys, statistics as st
out, rounds = sys.argv[1], int(sys.argv[2])

def ct_hist(path):
    rows, over, mx = [], 0, None
    for line in open(path):
        if line.startswith('# Histogram Overflows:'):
            over = int(line.split(':')[1].split()[0])
        elif line.startswith('# Max Latencies:'):
            mx = int(line.split(':')[1].split()[0])
        elif line[:1].isdigit():
            us, c = line.split()[:2]
            rows.append((int(us), int(c)))
    return rows, over, mx

def pct(rows, over, q):
    n = sum(c for _, c in rows) + over
    acc = 0
    for us, c in rows:
        acc += c
        if acc >= q * n:
            return us
    return float('inf')

def ct(tag):
    rows, over, mx = ct_hist(f'{out}/{tag}.hist')
    n = sum(c for _, c in rows) + over
    return pct(rows, over, .5), pct(rows, over, .99), mx, n

def pu(tag):
    rec = json.load(open(f'{out}/{tag}.json'))
    s = [x for x in rec['series'] if x['metric'] == 'latency'][0]
    rows = [(lo // 1000, c) for lo, c in s['histogram']['buckets']]
    w = rec['extra']['watch']['threads'][0]
    d = w.get('deadlines') or {}
    rr = tuple(d.get(k, 0) // 1000 for k in ('release_to_run_p50_ns', 'release_to_run_p99_ns', 'release_to_run_max_ns'))
    return (pct(rows, 0, .5), pct(rows, 0, .99), s['max'] // 1000, s['count'], w, rr)

def med(v, i):
    return st.median(x[i] for x in v)

alone = [ct(f'alone{r}') for r in range(1, rounds + 1)]
print(f"medians of {rounds} rounds, 1 us buckets (lower edge)")
print(f"{'run':<34} {'p50 us':>7} {'p99 us':>7} {'max us':>7} {'wakeups':>8}")
print(f"{'cyclictest alone':<34} {med(alone,0):>7} {med(alone,1):>7} {med(alone,2):>7} {med(alone,3):>8.0f}")
for cond in ('idle', 'noisy'):
    c = [ct(f'{cond}{r}') for r in range(1, rounds + 1)]
    p = [pu(f'{cond}{r}') for r in range(1, rounds + 1)]
    print(f"{'cyclictest watched, ' + cond:<34} {med(c,0):>7} {med(c,1):>7} {med(c,2):>7} {med(c,3):>8.0f}")
    print(f"{'punctual watch on it, ' + cond:<34} {med(p,0):>7} {med(p,1):>7} {med(p,2):>7} {med(p,3):>8.0f}")
    rr = [x[5] for x in p]
    print(f"{'  punctual, release to running':<34} {st.median(x[0] for x in rr):>7} {st.median(x[1] for x in rr):>7} {st.median(x[2] for x in rr):>7}")
    for r, (a, b) in enumerate(zip(c, p), 1):
        print(f"    round {r}: cyclictest {a[0]}/{a[1]}/{a[2]} us, punctual wake-up->running {b[0]}/{b[1]}/{b[2]} us, "
              f"release->running {b[5][0]}/{b[5][1]}/{b[5][2]} us (p50/p99/max)")
    d = [(a[0] - b[0], a[1] - b[1], a[2] - b[2]) for a, b in zip(c, p)]
    rat = lambda a, b: a / b if b else float('nan')
    print(f"  {cond}: cyclictest - punctual (wake-up path punctual does not see): "
          f"p50 {st.median(x[0] for x in d)} us, p99 {st.median(x[1] for x in d)} us, "
          f"max {st.median(x[2] for x in d)} us")
    print(f"  {cond}: ratio cyclictest/punctual: p50 {rat(med(c,0), med(p,0)):.2f}  "
          f"p99 {rat(med(c,1), med(p,1)):.2f}  max {rat(med(c,2), med(p,2)):.2f}")
    for r, x in enumerate(p, 1):
        w = x[4]
        offs = w.get('offenders', [])
        top = ', '.join(f"{o['name']} ({o['kind']}) {o['share']*100:.0f}%" for o in offs[:3])
        print(f"  {cond} round {r}: behind the {w['slowest']} slowest wake-ups "
              f"(>= {w['slowest_from_ns']/1000:.0f} us): {top}")
print(f"recorder's cost on cyclictest's own figures (watched idle / alone): "
      f"p50 {med([ct(f'idle{r}') for r in range(1, rounds+1)],0) / max(med(alone,0),1):.2f}  "
      f"p99 {med([ct(f'idle{r}') for r in range(1, rounds+1)],1) / max(med(alone,1),1):.2f}")
PY
