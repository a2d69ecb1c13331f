#!/usr/bin/env bash
# `punctual cause` beside rtla's stop-and-trace analysis, in the PREEMPT_RT
# guest of the kernel matrix: with one injected noisy thread on the probed
# CPU, do both name it as the top cause?
#
# The injected thread: `punctual load` with one SCHED_FIFO 99 busy thread
# pinned to CPU (20 ms busy in every 40 ms), above both timerlat's FIFO 95
# thread and punctual's FIFO 95 probe. Its bursts are longer than the
# stalls a TCG guest shows by itself (up to about 16 ms in
# bench/rtla-vs-punctual.sh), so the first wake-up over THRESHOLD is, by
# design, one the thread delayed.
#
#   rtla:     `rtla timerlat top -a THRESHOLD`: timerlat stops at the first
#             IRQ or thread latency over THRESHOLD and saves its trace
#             (timerlat_trace.txt), with the osnoise interference events
#             rtla enables. rtla 6.1, what Debian 12 ships, has no
#             auto-analysis text (`Blocking thread:` came with rtla 6.3),
#             so its answer is read from that trace the way the later
#             analysis reads it: of the interference logged on the CPU
#             between the stopping sample's timer IRQ and its thread's
#             wake-up, the source that took most. (The task the IRQ found
#             running is no answer: the timer fires on an idle CPU and the
#             FIFO 99 thread wakes before timerlat's.)
#   punctual: `punctual cause --cpus CPU`: the top named source of the
#             CPU's stolen time (record extra.cause.per_cpu[].sources[0]).
#
# Alternating rounds; each prints both names, and the last line counts the
# rounds where they agree. Under TCG only the names mean anything.
#
# usage: bench/rtla-cause.sh [ROUNDS=3] [SECONDS=5] [CPU=1] [THRESHOLD_US=10000]
# On a kernel with the timerlat tracer it runs here; otherwise it boots the
# Debian PREEMPT_RT kernel with virtme-ng and runs itself inside.
set -euo pipefail
ROUNDS=${1:-3}; SECS=${2:-5}; CPU=${3:-1}; THRESH=${4:-10000}
cd "$(dirname "$0")/.."
root=$PWD
T=/sys/kernel/tracing

if [ "${PUNCTUAL_BENCH_INSIDE:-}" != 1 ]; then
  . bench/rt-guest.sh
  run_in_rt_kernel "$root/target/bench-rtla-cause" bench/rtla-cause.sh "$ROUNDS" "$SECS" "$CPU" "$THRESH"
  exit
fi

# Inside the kernel with the tracers.
out=$PUNCTUAL_BENCH_OUT
[ -d $T/instances ] || mount -t tracefs nodev $T
work=$(mktemp -d /tmp/bench-rtla-cause.XXXXXX)
P=$work/punctual
cp "$root/target/release/punctual" "$P" # 9p has no page cache: run it from memory
noisy="cpu:threads=1,policy=fifo,priority=99,cpus=$CPU,duty=50%,period=40ms"
# Starts the noisy thread for the next tool's run and waits until it runs.
inject() {
  $P load "$noisy" --duration "$((SECS + 30))s" >"$work/load.out" 2>&1 &
  load_pid=$!
  local n=0
  until ps -eLo rtprio,comm | awk '$1 == 99 && $2 ~ /^pl-cpu/' | grep -q .; do
    sleep 0.2
    n=$((n + 1))
    [ $n -lt 300 ] || { echo "the noisy thread never started"; cat "$work/load.out"; exit 1; }
  done
  ps -eLo tid,cls,rtprio,psr,comm | awk 'NR == 1 || $5 ~ /^pl-/' >"$work/noisy-threads.txt"
}
stop_inject() {
  kill -INT $load_pid 2>/dev/null || true
  wait $load_pid 2>/dev/null || true
}
rtla_round() { # N
  mkdir -p "$work/rtla$1"
  inject
  (cd "$work/rtla$1" && rtla timerlat top -q -c "$CPU" -a "$THRESH" -d "$((SECS * 4))" >stdout.txt 2>&1) || true
  stop_inject
}
punctual_round() { # N
  inject
  $P cause --cpus "$CPU" --duration "${SECS}s" --json "$work/c$1.json" >"$work/c$1.txt" 2>&1 || true
  stop_inject
}
for r in $(seq 1 "$ROUNDS"); do
  if [ $((r % 2)) = 1 ]; then rtla_round $r; punctual_round $r; else punctual_round $r; rtla_round $r; fi
done
for r in $(seq 1 "$ROUNDS"); do
  cp "$work/rtla$r/stdout.txt" "$out/rtla$r.stdout.txt" 2>/dev/null || true
  cp "$work/rtla$r/timerlat_trace.txt" "$out/rtla$r.trace.txt" 2>/dev/null || true
  cp "$work/c$r.txt" "$work/c$r.json" "$out/" 2>/dev/null || true
done
cp "$work/noisy-threads.txt" "$out/"
python3 - "$out" "$ROUNDS" "$CPU" "$SECS" "$THRESH" "$(uname -r)" "${PUNCTUAL_BENCH_WHERE:-this machine}" <<'PY' | tee "$out/result.txt"
import json, os, re, sys
work, rounds, cpu, secs, thresh, kernel, where = sys.argv[1:8]
rounds, cpu = int(rounds), int(cpu)
# ps -eLo tid,cls,rtprio,psr,comm of the load's threads: the busy one is FF 99.
noisy = [f[4] for f in (l.split() for l in open(f"{work}/noisy-threads.txt").readlines()[1:])
         if len(f) >= 5 and f[1] == "FF" and f[2] == "99"]
# timerlat's samples: "comm-pid [cpu] flags ts: #seq context irq|thread timer_latency N ns";
# the osnoise events rtla enables beside them: "irq_noise: local_timer:236 start T
# duration N ns", "thread_noise: comm:pid start T duration N ns", and so on.
sample = re.compile(r"^\s*(.+)-(\d+)\s+\[(\d+)\].*?\s#(\d+)\s+context\s+(irq|thread)\s+timer_latency\s+(\d+)\s+(ns|us)")
noise = re.compile(r"^\s*.+-\d+\s+\[(\d+)\].*?\s(irq|softirq|thread|nmi)_noise:\s+(.+?):(\d+)\s+start\s+\S+\s+duration\s+(\d+)\s+ns")
def rtla_blocker(n):
    # What rtla's later auto-analysis reports as the blocking thread: of the
    # interference the osnoise events logged on the CPU between the stopping
    # sample's timer IRQ and its thread's wake-up, the source that took most.
    path = f"{work}/rtla{n}.trace.txt"
    if not os.path.exists(path):
        return None, "no stop (nothing over the threshold)"
    samples, events = [], []
    for i, l in enumerate(open(path, errors="replace")):
        m = sample.match(l)
        if m and int(m.group(3)) == cpu:
            lat = int(m.group(6)) * (1000 if m.group(7) == "us" else 1)
            samples.append((i, int(m.group(4)), m.group(5), lat, m.group(1).strip()))
            continue
        m = noise.match(l)
        if m and int(m.group(1)) == cpu:
            events.append((i, m.group(2), m.group(3).strip(), int(m.group(5))))
    if not samples:
        return None, "no timerlat sample in the saved trace"
    end, seq, ctx, lat, _ = samples[-1]
    irq = next((s for s in samples if s[1] == seq and s[2] == "irq"), None)
    if ctx == "irq" or irq is None:
        who = samples[-1][4]
        return who, f"stopped at #{seq} {ctx} latency {lat / 1000:.0f} us, in the IRQ, with {who} running"
    took = {}
    for i, kind, name, d in events:
        if irq[0] < i < end:
            took[(kind, name)] = took.get((kind, name), 0) + d
    if not took:
        return None, f"stopped at #{seq} thread latency {lat / 1000:.0f} us, no interference logged"
    (kind, name), d = max(took.items(), key=lambda kv: kv[1])
    return name, f"stopped at #{seq} thread latency {lat / 1000:.0f} us; most of it {kind} {name}: {d / 1e6:.1f} ms"
def punctual_top(n):
    try:
        rec = json.load(open(f"{work}/c{n}.json"))
    except (OSError, ValueError):
        return None, "no record"
    acc = next((a for a in rec.get("extra", {}).get("cause", {}).get("per_cpu", []) if a["cpu"] == cpu), None)
    if not acc or not acc["sources"]:
        return None, "no named source"
    s = acc["sources"][0]
    return s["name"], f"top source {s['kind']} {s['name']}: {s['total_ns'] / 1e6:.1f} ms, {s['share'] * 100:.0f}% of the stolen time"
def same(a, b):
    # Thread names: rtla's trace shows the 15-character comm, punctual may
    # add the thread id after a slash.
    return a is not None and b is not None and a.split("/")[0][:15] == b.split("/")[0][:15]
print(f"{where}, kernel {kernel}, CPU {cpu}; injected: SCHED_FIFO 99 thread {', '.join(sorted(set(noisy)))} busy 20 ms of every 40 ms")
print(f"rtla timerlat top -a {thresh} (stop and save the trace) against punctual cause --duration {secs}s, alternating rounds")
agree = 0
for n in range(1, rounds + 1):
    a, why_a = rtla_blocker(n)
    b, why_b = punctual_top(n)
    ok = same(a, b)
    agree += ok
    print(f"round {n}: rtla: {why_a}")
    print(f"round {n}: punctual: {why_b}")
    print(f"round {n}: same top cause: {'yes' if ok else 'no'}{'' if a is None or a.split('/')[0][:15] in [x[:15] for x in noisy] else ' (rtla did not name the injected thread)'}")
print(f"same top cause in {agree} of {rounds} rounds")
PY
rm -rf "$work"
