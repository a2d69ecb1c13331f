#!/bin/sh
# Captures the test data of `punctual watch`'s pipeline (run as root, with
# rt-tests installed): cyclictest's measuring thread (FIFO 95, 1 ms, CPU 1)
# traced for ~60 ms in a private instance with the events watch records —
# sched_switch, the local timer, sched_waking filtered to that thread and
# raw_syscalls:sys_exit filtered to it — then saves the kernel's text
# rendering (`trace`, read first: it does not consume) and the binary
# per-CPU pages of the same buffer, the format files, and the thread id.
set -eu
T=/sys/kernel/tracing
OUT=$(cd "$(dirname "$0")" && pwd)
mounted=0
[ -e "$T/instances" ] || { mount -t tracefs nodev "$T"; mounted=1; }
I=$T/instances/punctual-capture-$$
cyclictest -q -m -a 1 -t 1 -p 95 -i 1000 -D 3 >/dev/null 2>&1 &
CP=$!
sleep 0.5
TID=$(ls "/proc/$CP/task" | grep -vx "$CP" | head -1)
mkdir "$I"
trap 'echo 0 > $I/tracing_on; echo 0 > $I/events/enable; rmdir $I; wait; [ $mounted = 0 ] || umount $T' EXIT
echo 0 > "$I/tracing_on"
echo mono > "$I/trace_clock"
echo 512 > "$I/buffer_size_kb"
echo "pid == $TID" > "$I/events/sched/sched_waking/filter"
echo "common_pid == $TID" > "$I/events/raw_syscalls/sys_exit/filter"
for e in sched/sched_switch sched/sched_waking raw_syscalls/sys_exit \
         irq_vectors/local_timer_entry irq_vectors/local_timer_exit; do
  echo 1 > "$I/events/$e/enable"
  mkdir -p "$OUT/events/$e"
  cp "$T/events/$e/format" "$OUT/events/$e/format"
done
cp "$T/events/header_page" "$T/events/header_event" "$OUT/events/"
echo 1 > "$I/tracing_on"
sleep 0.06
echo 0 > "$I/tracing_on"
echo "$TID" > "$OUT/tid"
cp "$I/trace" "$OUT/trace.txt"
for c in 0 1; do
  timeout 2 dd if="$I/per_cpu/cpu$c/trace_pipe_raw" of="$OUT/cpu$c.raw" bs=4096 iflag=nonblock 2>/dev/null || true
done
ls -l "$OUT"
