#!/bin/sh
# Captures the test data of the binary ring parser (run as root, tracefs mounted
# at /sys/kernel/tracing). Makes a private instance, records ~30 ms of the
# events punctual cause uses, then saves the text `trace` (non-consuming,
# read first) and the binary per-CPU `trace_pipe_raw` pages of the same
# events, plus the format files needed to decode them.
set -eu
T=/sys/kernel/tracing
OUT=$(cd "$(dirname "$0")" && pwd)
I=$T/instances/punctual-capture-$$
mkdir "$I"
trap 'echo 0 > $I/tracing_on; rmdir $I' EXIT
echo 0 > "$I/tracing_on"
echo mono > "$I/trace_clock"
echo 64 > "$I/buffer_size_kb"
for e in irq/irq_handler_entry irq/irq_handler_exit irq/softirq_entry irq/softirq_exit \
         irq_vectors/local_timer_entry irq_vectors/local_timer_exit \
         irq_vectors/reschedule_entry irq_vectors/reschedule_exit \
         irq_vectors/call_function_single_entry irq_vectors/call_function_single_exit \
         sched/sched_switch sched/sched_wakeup \
         workqueue/workqueue_execute_start workqueue/workqueue_execute_end nmi/nmi_handler; do
  echo 1 > "$I/events/$e/enable"
  mkdir -p "$OUT/events/$(dirname $e)/$(basename $e)"
  cp "$T/events/$e/format" "$OUT/events/$e/format"
done
cp "$T/events/header_page" "$T/events/header_event" "$OUT/events/"
echo 1 > "$I/tracing_on"
# Some disk and network interrupts, a few threads.
dd if=/dev/zero of=/tmp/punctual-capture.$$ bs=4k count=64 oflag=direct 2>/dev/null
(sleep 0.01; true) &
sleep 0.03
echo 0 > "$I/tracing_on"
wait
rm -f /tmp/punctual-capture.$$
cp "$I/trace" "$OUT/trace.txt"
for c in 0 1; do
  cat "$I/per_cpu/cpu$c/stats" > "$OUT/stats.cpu$c"
  # trace_pipe_raw never blocks on an empty buffer once tracing is off.
  timeout 2 dd if="$I/per_cpu/cpu$c/trace_pipe_raw" of="$OUT/cpu$c.raw" bs=4096 iflag=nonblock 2>/dev/null || true
done
ls -l "$OUT"
