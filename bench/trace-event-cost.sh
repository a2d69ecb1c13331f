#!/bin/sh
# What one trace event costs on this machine (issue 6 overhead): a tight
# getppid() loop on one CPU with raw_syscalls (2 events per call) enabled
# in a private tracefs instance vs disabled, per trace clock, alternating
# rounds. (cost on - cost off) / 2 = one ring write with that clock. The
# flight recorder writes about 3-4 events on a timer wake-up's critical
# path (local timer entry/exit, sched_switch), so this times that path.
# Run as root.   bench/trace-event-cost.sh [rounds] [cpu]
set -eu
ROUNDS=${1:-3}
CPU=${2:-1}
command -v gcc >/dev/null || { apt-get update -q >/dev/null && apt-get install -y -q gcc >/dev/null; }
T=/sys/kernel/tracing
mountpoint -q $T || mount -t tracefs nodev $T
OUT=$(mktemp -d)
I=$T/instances/punctual-bench-$$
trap 'echo 0 > $I/tracing_on 2>/dev/null; echo 0 > $I/events/raw_syscalls/enable 2>/dev/null; rmdir $I 2>/dev/null; rm -rf "$OUT"' EXIT INT TERM
cat > "$OUT/loop.c" <<'C'
#include <stdio.h>
#include <time.h>
#include <unistd.h>
#include <sys/syscall.h>
int main(void) {
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (int i = 0; i < 2000000; i++) syscall(SYS_getppid);
    clock_gettime(CLOCK_MONOTONIC, &b);
    printf("%.1f\n", ((b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec)) / 2e6);
    return 0;
}
C
gcc -O2 -o "$OUT/loop" "$OUT/loop.c"
mkdir $I
r=1
while [ "$r" -le "$ROUNDS" ]; do
  for clk in off mono x86-tsc local; do
    if [ $clk = off ]; then
      echo 0 > $I/tracing_on; echo 0 > $I/events/raw_syscalls/enable
    else
      echo $clk > $I/trace_clock 2>/dev/null || continue
      echo 1 > $I/events/raw_syscalls/enable; echo 1 > $I/tracing_on
    fi
    echo "$clk $(taskset -c "$CPU" "$OUT/loop")" >> "$OUT/res"
    echo 0 > $I/tracing_on
  done
  r=$((r + 1))
done
python3 - "$OUT/res" <<'PY'
import statistics, sys
res = {}
for line in open(sys.argv[1]):
    k, v = line.split()
    res.setdefault(k, []).append(float(v))
off = statistics.median(res.pop("off"))
print(f"getppid() alone: {off:.1f} ns (median)")
print("| trace clock | ns per call, 2 events | ns per event |")
print("|---|---:|---:|")
for k, v in res.items():
    m = statistics.median(v)
    print(f"| {k} | {m:.1f} | {(m - off) / 2:.1f} |")
PY
