#!/usr/bin/env bash
# punctual beside rtla in the PREEMPT_RT guest of the kernel matrix: same
# CPU, same period, same duration, alternating rounds, medians, ratios.
#
#   timer:  punctual timer (its own FIFO 95 thread), punctual timer
#           --probe timerlat (the kernel's tracer read by punctual) and
#           rtla timerlat hist (the same tracer read by rtla): average and
#           largest thread latency, and the largest IRQ latency;
#   noise:  punctual noise --policy other (its own busy thread, at the
#           SCHED_OTHER of osnoise's threads), punctual noise --probe
#           osnoise and rtla osnoise top: share of the CPU stolen and the
#           largest single noise.
#
# The guest is QEMU under TCG on this machine kind (nested KVM does not
# start a vCPU): absolute times are the emulator's, only ratios between
# tools measured in the same guest mean anything, and the output says so.
#
# usage: bench/rtla-vs-punctual.sh [ROUNDS=3] [SECONDS=5] [CPU=1]
# On a kernel with the timerlat tracer it runs here; otherwise it boots
# the Debian PREEMPT_RT kernel with virtme-ng (tests/kernels/run installs
# it) and runs itself inside.
set -euo pipefail
ROUNDS=${1:-3}; SECS=${2:-5}; CPU=${3:-1}
cd "$(dirname "$0")/.."
root=$PWD
T=/sys/kernel/tracing

if [ "${PUNCTUAL_BENCH_INSIDE:-}" != 1 ]; then
  . bench/rt-guest.sh
  run_in_rt_kernel "$root/target/bench-rtla" bench/rtla-vs-punctual.sh "$ROUNDS" "$SECS" "$CPU"
  exit
fi

# Inside the kernel with the tracers.
out=$PUNCTUAL_BENCH_OUT
[ -d $T/instances ] || mount -t tracefs nodev $T
work=$(mktemp -d /tmp/bench-rtla.XXXXXX)
P=$work/punctual
cp "$root/target/release/punctual" "$P" # 9p has no page cache: run it from memory
us=$((1000))
for r in $(seq 1 "$ROUNDS"); do
  $P timer --cpus "$CPU" --interval 1ms --duration "${SECS}s" --json "$work/pt$r.json" >/dev/null 2>>"$out/stderr.log"
  $P timer --probe timerlat --cpus "$CPU" --interval 1ms --duration "${SECS}s" --json "$work/pk$r.json" >/dev/null 2>>"$out/stderr.log"
  rtla timerlat hist -c "$CPU" -p $us -d "$SECS" >"$work/rt$r.txt" 2>&1
  $P noise --policy other --cpus "$CPU" --duration "${SECS}s" --json "$work/pn$r.json" >/dev/null 2>>"$out/stderr.log"
  $P noise --probe osnoise --cpus "$CPU" --duration "${SECS}s" --json "$work/po$r.json" >/dev/null 2>>"$out/stderr.log"
  rtla osnoise top -q -c "$CPU" -d "$SECS" >"$work/ro$r.txt" 2>&1
done
cp "$work"/*.txt "$out/" 2>/dev/null || true
python3 - "$work" "$ROUNDS" "$CPU" "$SECS" "$(uname -r)" "${PUNCTUAL_BENCH_WHERE:-this machine}" <<'PY' | tee "$out/result.txt"
import json, re, sys, statistics as st
work, rounds, cpu, secs, kernel, where = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5], sys.argv[6]
def rec(name):
    return json.load(open(f"{work}/{name}.json"))
def series(r, name):
    return next(s for s in r["series"] if s["name"] == name)
def rtla_hist(n):
    rows = {}
    for line in open(f"{work}/rt{n}.txt"):
        m = re.match(r"^(count|min|avg|max):\s+(\S+)\s+(\S+)", line)
        if m:
            rows[m.group(1)] = (float(m.group(2)), float(m.group(3)))
    # rtla prints microseconds: (irq, thread)
    return {k: v if k == "count" else (v[0] * 1000, v[1] * 1000) for k, v in rows.items()}
def rtla_top(n):
    last = [l.split() for l in open(f"{work}/ro{n}.txt") if re.match(r"^\s*%s\s+#" % cpu, l)][-1]
    runtime, noise, maxsingle = float(last[2]), float(last[3]), float(last[6])
    return noise / runtime, maxsingle * 1000
t = {"punctual timer": [], "punctual --probe timerlat": [], "rtla timerlat hist": []}
n = {"punctual noise": [], "punctual --probe osnoise": [], "rtla osnoise top": []}
for i in range(1, rounds + 1):
    s = series(rec(f"pt{i}"), f"cpu{cpu}.latency")
    t["punctual timer"].append((s["mean"], s["max"], None, s["count"]))
    k = rec(f"pk{i}")
    th, irq = series(k, f"cpu{cpu}.thread.latency"), series(k, f"cpu{cpu}.irq.latency")
    t["punctual --probe timerlat"].append((th["mean"], th["max"], irq["max"], th["count"]))
    h = rtla_hist(i)
    t["rtla timerlat hist"].append((h["avg"][1], h["max"][1], h["max"][0], h["count"][1]))
    for key, name in (("punctual noise", f"pn{i}"), ("punctual --probe osnoise", f"po{i}")):
        s = rec(name)["stolen"][0]
        n[key].append((s["fraction"], s["max_ns"]))
    n["rtla osnoise top"].append(rtla_top(i))
med = lambda v, j: st.median(x[j] for x in v) if all(x[j] is not None for x in v) else float("nan")
print(f"{where}, kernel {kernel}, CPU {cpu}, {secs} s a run, medians of {rounds} alternating rounds")
if "TCG" in where:
    print("(under TCG absolute times are the emulator's: compare the ratios, not the microseconds)")
print(f"{'timer (1 ms period)':<28} {'thread avg us':>13} {'thread max us':>13} {'irq max us':>10} {'samples':>8}")
mt = {}
for k, v in t.items():
    mt[k] = [med(v, j) for j in range(4)]
    a, m, q, c = mt[k]
    print(f"{k:<28} {a/1000:>13.1f} {m/1000:>13.1f} {q/1000:>10.1f} {c:>8.0f}")
print(f"{'noise':<28} {'stolen %':>13} {'max single us':>13}")
mn = {}
for k, v in n.items():
    mn[k] = [med(v, j) for j in range(2)]
    print(f"{k:<28} {mn[k][0]*100:>13.2f} {mn[k][1]/1000:>13.1f}")
r = lambda a, b: a / b if b else float("nan")
R, K, U = mt["rtla timerlat hist"], mt["punctual --probe timerlat"], mt["punctual timer"]
print(f"ratio punctual timer / rtla timerlat hist: thread avg {r(U[0], R[0]):.2f}  thread max {r(U[1], R[1]):.2f}")
print(f"ratio punctual --probe timerlat / rtla timerlat hist: thread avg {r(K[0], R[0]):.2f}  thread max {r(K[1], R[1]):.2f}  irq max {r(K[2], R[2]):.2f}")
R, K, U = mn["rtla osnoise top"], mn["punctual --probe osnoise"], mn["punctual noise"]
print(f"ratio punctual noise / rtla osnoise top: stolen {r(U[0], R[0]):.2f}  max single {r(U[1], R[1]):.2f}")
print(f"ratio punctual --probe osnoise / rtla osnoise top: stolen {r(K[0], R[0]):.2f}  max single {r(K[1], R[1]):.2f}")
PY
rm -rf "$work"
