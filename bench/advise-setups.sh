#!/usr/bin/env bash
# Sets up one of the known problems on a CPU (default 1), runs a command
# with it in place, and takes it down again, so `punctual advise` can be
# checked against a cause that is known:
#
#   fifo-noisy   a SCHED_FIFO 99 thread named advise-noisy on the CPU that
#                spins BURST_MS (default 1) every PERIOD_MS (default 20);
#   disk-irq     the disk's interrupt routed to the CPU (when the kernel
#                lets it be routed; a managed one is reported and left), with
#                a direct-I/O disk load running beside it (started here, so
#                the route is not held by a punctual journal and a fix may
#                move it);
#   rt-throttle  RT throttling on (sched_rt_runtime_us 950000 unless it is
#                already a budget) and a busy SCHED_FIFO 1 thread named
#                advise-rtbusy on the CPU: once it has used the budget, every
#                real-time thread on the CPU (a probe too) waits for the next
#                period;
#   all          the three at once.
#
# Usage: bench/advise-setups.sh SETUP [--cpu N] -- COMMAND [ARGS...]
#
# COMMAND sees ADVISE_SETUP, ADVISE_CPU, ADVISE_NOISY_COMM, ADVISE_DISK_IRQ
# (empty when the interrupt could not be routed) and ADVISE_RTBUSY_COMM.
# Whatever ends the script (COMMAND's end, Ctrl-C, SIGTERM, an error), a
# trap stops the threads and the load and writes back the interrupt
# affinity and the sysctl. Then the machine's interrupt affinities, the RT
# sysctls, the cpusets and the affinities and policies of the threads that
# outlived the run are compared with what they were before; the script
# exits 3 naming what was left changed, else with COMMAND's status.
# Needs root.
set -euo pipefail
cd "$(dirname "$0")/.."

usage() {
    sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'
    exit 2
}
[[ $# -ge 1 ]] || usage
SETUP="$1"
shift
CPU=1
while [[ $# -gt 0 && "$1" != "--" ]]; do
    case "$1" in
        --cpu) CPU="$2"; shift 2 ;;
        *) usage ;;
    esac
done
[[ "${1:-}" == "--" ]] || usage
shift
[[ $# -ge 1 ]] || usage
case "$SETUP" in fifo-noisy|disk-irq|rt-throttle|all) ;; *) usage ;; esac
if [[ $EUID -ne 0 ]]; then
    echo "advise-setups: the setups change scheduling and interrupt routing; run as root" >&2
    exit 2
fi
if ! grep -qw "$CPU" <(python3 -c "
import sys
s=open('/sys/devices/system/cpu/online').read().strip()
out=[]
for p in s.split(','):
    a,_,b=p.partition('-'); out+=range(int(a),int(b or a)+1)
print(' '.join(map(str,out)))"); then
    echo "advise-setups: CPU $CPU is not online" >&2
    exit 2
fi
BIN="${PUNCTUAL:-target/release/punctual}"
[[ -x "$BIN" ]] || cargo build --release -q -p punctual

WORK="$(mktemp -d)"
PIDS=()
IRQ=""
IRQ_OLD=""
RT_OLD=""

# The machine's state as JSON: interrupt affinities, the RT sysctls, the
# cpusets under the cpuset root, and each thread's affinity and policy.
snapshot() {
    python3 - "$1" <<'PY'
import json, os, sys
st = {"irqs": {}, "sysctls": {}, "cpusets": [], "threads": {}}
for n in os.listdir("/proc/irq"):
    try:
        st["irqs"][n] = open(f"/proc/irq/{n}/smp_affinity_list").read().strip()
    except OSError:
        pass
for k in ("sched_rt_runtime_us", "sched_rt_period_us"):
    st["sysctls"][k] = open(f"/proc/sys/kernel/{k}").read().strip()
for root in ("/sys/fs/cgroup/cpuset", "/sys/fs/cgroup"):
    if os.path.exists(os.path.join(root, "cpuset.cpus")) or os.path.exists(os.path.join(root, "cpuset.cpus.effective")):
        st["cpusets"] = sorted(d for d in os.listdir(root) if os.path.isdir(os.path.join(root, d)))
        break
for p in os.listdir("/proc"):
    if not p.isdigit():
        continue
    try:
        tids = os.listdir(f"/proc/{p}/task")
    except OSError:
        continue
    for t in tids:
        try:
            st["threads"][t] = [sorted(os.sched_getaffinity(int(t))),
                                os.sched_getscheduler(int(t)),
                                os.sched_getparam(int(t)).sched_priority]
        except OSError:
            pass
json.dump(st, open(sys.argv[1], "w"))
PY
}

# What differs between two snapshots; threads are compared only when they
# held still between the two "before" snapshots and outlived the run.
compare() {
    python3 - "$WORK/before1.json" "$WORK/before2.json" "$WORK/after.json" <<'PY'
import json, sys
b1, b2, a = (json.load(open(p)) for p in sys.argv[1:4])
left = []
for k in ("irqs", "sysctls"):
    for n, v in b2[k].items():
        if n in a[k] and a[k][n] != v:
            left.append(f"{k} {n}: {v} is now {a[k][n]}")
if b2["cpusets"] != a["cpusets"]:
    left.append(f"cpusets {b2['cpusets']} are now {a['cpusets']}")
for t, v in b2["threads"].items():
    if b1["threads"].get(t) == v and t in a["threads"] and a["threads"][t] != v:
        left.append(f"thread {t}: {v} is now {a['threads'][t]}")
for l in left:
    print("advise-setups: left changed:", l, file=sys.stderr)
sys.exit(3 if left else 0)
PY
}

teardown() {
    local status=$?
    trap - EXIT INT TERM
    for p in "${PIDS[@]}"; do
        kill "$p" 2>/dev/null || true
    done
    for p in "${PIDS[@]}"; do
        wait "$p" 2>/dev/null || true
    done
    if [[ -n "$IRQ" ]]; then
        echo "$IRQ_OLD" >"/proc/irq/$IRQ/smp_affinity_list" || echo "advise-setups: could not restore IRQ $IRQ to $IRQ_OLD" >&2
    fi
    if [[ -n "$RT_OLD" ]]; then
        echo "$RT_OLD" >/proc/sys/kernel/sched_rt_runtime_us || echo "advise-setups: could not restore sched_rt_runtime_us to $RT_OLD" >&2
    fi
    snapshot "$WORK/after.json"
    local cmp=0
    compare || cmp=$?
    rm -rf "$WORK"
    if [[ $cmp -ne 0 ]]; then
        exit "$cmp"
    fi
    exit "$status"
}

snapshot "$WORK/before1.json"
sleep 0.1
snapshot "$WORK/before2.json"
trap teardown EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# A SCHED_FIFO thread named $1 on $CPU at priority $2 that spins $3 ms
# every $4 ms (spins without rest when $3 >= $4).
rt_thread() {
    python3 - "$1" "$CPU" "$2" "$3" "$4" <<'PY' &
import ctypes, os, sys, time
name, cpu, prio, burst, period = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]) / 1e3, float(sys.argv[5]) / 1e3
ctypes.CDLL(None).prctl(15, name.encode(), 0, 0, 0)
os.sched_setaffinity(0, {cpu})
os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(prio))
while True:
    end = time.monotonic() + burst
    while time.monotonic() < end:
        pass
    if burst < period:
        time.sleep(period - burst)
PY
    PIDS+=($!)
}

# The interrupt of the disk that holds $1 (virtio request queue or NVMe
# queue), from /proc/interrupts.
disk_irq() {
    local src dev drv
    src="$(findmnt -no SOURCE -T "$1")"
    dev="$(basename "$src")"
    dev="${dev%%[0-9]*}"
    [[ "$dev" == nvme* ]] && dev="${src#/dev/}" && dev="${dev%%n[0-9]*}"
    drv="$(basename "$(readlink -f "/sys/block/$dev/device" 2>/dev/null || echo "$dev")")"
    awk -v d="$drv" '$NF ~ "^"d"-req" || $NF ~ "^"d"q[0-9]" { sub(":", "", $1); print $1; exit }' /proc/interrupts
}

export ADVISE_SETUP="$SETUP" ADVISE_CPU="$CPU" ADVISE_NOISY_COMM="" ADVISE_DISK_IRQ="" ADVISE_RTBUSY_COMM=""

if [[ "$SETUP" == fifo-noisy || "$SETUP" == all ]]; then
    rt_thread advise-noisy 99 "${BURST_MS:-1}" "${PERIOD_MS:-20}"
    ADVISE_NOISY_COMM=advise-noisy
    echo "advise-setups: SCHED_FIFO 99 thread advise-noisy spins ${BURST_MS:-1} ms every ${PERIOD_MS:-20} ms on CPU $CPU" >&2
fi
if [[ "$SETUP" == disk-irq || "$SETUP" == all ]]; then
    DIR="${DISK_DIR:-/var/tmp}"
    irq="$(disk_irq "$DIR" || true)"
    if [[ -z "$irq" ]]; then
        echo "advise-setups: no interrupt found for the disk holding $DIR; the load runs without routing" >&2
    elif [[ ! -w "/proc/irq/$irq/smp_affinity_list" ]] || ! (old="$(cat "/proc/irq/$irq/smp_affinity_list")"; echo "$CPU" >"/proc/irq/$irq/smp_affinity_list" && echo "$old" >"/proc/irq/$irq/smp_affinity_list") 2>/dev/null; then
        echo "advise-setups: IRQ $irq of the disk holding $DIR is kernel-managed and cannot be routed; it is delivered to CPU $(cat "/proc/irq/$irq/effective_affinity_list")" >&2
    else
        IRQ_OLD="$(cat "/proc/irq/$irq/smp_affinity_list")"
        IRQ="$irq"
        echo "$CPU" >"/proc/irq/$IRQ/smp_affinity_list"
        ADVISE_DISK_IRQ="$IRQ"
        echo "advise-setups: IRQ $IRQ of the disk holding $DIR routed to CPU $CPU (was $IRQ_OLD)" >&2
    fi
    "$BIN" load "disk:direct,dir=$DIR" --duration "${LOAD_FOR:-1h}" >"$WORK/load.out" 2>&1 &
    PIDS+=($!)
fi
if [[ "$SETUP" == rt-throttle || "$SETUP" == all ]]; then
    now="$(cat /proc/sys/kernel/sched_rt_runtime_us)"
    if [[ "$now" == -1 ]]; then
        RT_OLD="$now"
        echo 950000 >/proc/sys/kernel/sched_rt_runtime_us
    fi
    rt_thread advise-rtbusy 1 1000 1000
    ADVISE_RTBUSY_COMM=advise-rtbusy
    echo "advise-setups: RT throttling at $(cat /proc/sys/kernel/sched_rt_runtime_us) us per $(cat /proc/sys/kernel/sched_rt_period_us) us, and SCHED_FIFO 1 thread advise-rtbusy busy on CPU $CPU" >&2
fi

# Python takes a moment to start and name its thread.
for comm in $ADVISE_NOISY_COMM $ADVISE_RTBUSY_COMM; do
    for _ in $(seq 50); do
        grep -qx "$comm" /proc/[0-9]*/task/*/comm 2>/dev/null && break
        sleep 0.1
    done
done
"$@"
