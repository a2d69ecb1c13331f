#!/usr/bin/env bash
# Boots the `rt` guest of the kernel matrix RUNS times, each once, through
# tests/kernels/run, for a closer look at a guest that stops making progress
# (docs/kernels.md, "Known problems"):
#
#   tests/kernels/standstill.sh [RUNS=3]
#
# run watches the guest's heartbeat and sends the NMI; this adds to the
# guest's kernel arguments panic_print=0x55 (every task, the timers, the
# trace buffer, every CPU's backtrace) and ftrace_dump_on_oops, with the
# scheduler, softirq and timer events traced at the top level, so the
# panic also writes the last events on each CPU, and gives it 240 s to
# print them. PUNCTUAL_STANDSTILL_EVENTS= (empty) boots without those
# events: with them on from boot, a run's own enabling and disabling of
# the same events no longer switches their tracepoints on and off, so the
# guest is not the one the matrix boots. Each boot's directory, console
# included, lands in target/standstill/runN. Other PUNCTUAL_KERNELS_*
# settings pass through (PUNCTUAL_KERNELS_SUITE, for one).
set -uo pipefail
cd "$(dirname "$0")/../.."
runs=${1:-3}
[[ $runs =~ ^[1-9][0-9]*$ ]] || {
  echo "standstill: RUNS must be a whole number above 0, not '$runs'" >&2
  exit 2
}
base=target/standstill
rm -rf "$base"
mkdir -p "$base"
events=${PUNCTUAL_STANDSTILL_EVENTS-sched:sched_switch,sched:sched_wakeup,sched:sched_waking,irq:softirq_raise,irq:softirq_entry,irq:softirq_exit,timer:hrtimer_start,timer:hrtimer_expire_entry,timer:hrtimer_cancel,irq:irq_handler_entry}
extra="panic_print=0x55"
[ -z "$events" ] || extra="$extra ftrace_dump_on_oops trace_event=$events trace_buf_size=64K"
for n in $(seq 1 "$runs"); do
  PUNCTUAL_KERNELS_ACCEL=${PUNCTUAL_KERNELS_ACCEL:-tcg} PUNCTUAL_KERNELS_BOOTS=1 \
    PUNCTUAL_KERNELS_PANIC_WAIT=240 PUNCTUAL_KERNELS_APPEND="$extra" \
    tests/kernels/run rt
  echo "run $n: exit status $?"
  for d in target/kernels/rt.boot1 target/kernels/rt; do
    [ ! -f "$d/console.log" ] || { cp -a "$d" "$base/run$n"; break; }
  done
done
