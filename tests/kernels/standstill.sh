#!/usr/bin/env bash
# Boots the `rt` guest of the kernel matrix RUNS times with the suite
# (tests/kernels/suite.sh) and, when a guest stops making progress, takes
# its evidence without asking the guest for anything (docs/kernels.md,
# "Known problems"):
#
#   tests/kernels/standstill.sh [RUNS=3] [SUITE_ARGS...]
#
# In the guest, a SCHED_OTHER loop writes the time to OUTDIR/heartbeat
# every 5 s (a sleep of an ordinary task is a soft timer on PREEMPT_RT,
# run by the ktimers thread). When the heartbeat is 90 s old the host sends
# an NMI through QEMU's monitor; the guest was booted with
# unknown_nmi_panic, panic_print=0x55 (every task, the timers, the trace
# buffer, every CPU's backtrace) and ftrace_dump_on_oops, with the scheduler, softirq and timer
# events traced at the top level, so its panic writes on the console which
# task each CPU ran, every timer still queued and the last events before
# it. PUNCTUAL_STANDSTILL_EVENTS= (empty) boots without those events: with
# them on from boot, a run's own enabling and disabling of the same events
# no longer switches their tracepoints on and off, so the guest is not the
# one the matrix boots.
# Evidence lands in target/standstill/runN/console.log (vng's
# --verbose sends the guest's kernel console there). Nothing runs
# in the guest at a real-time priority to watch: a FIFO 99 watcher's own
# hard timers could wake what a stand-still leaves asleep.
set -uo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
runs=${1:-3}
k=$(ls /boot/vmlinuz-*-rt-amd64 | sort -V | tail -1)
base=$root/target/standstill
rm -rf "$base"
mkdir -p "$base"
events=${PUNCTUAL_STANDSTILL_EVENTS-sched:sched_switch,sched:sched_wakeup,sched:sched_waking,irq:softirq_raise,irq:softirq_entry,irq:softirq_exit,timer:hrtimer_start,timer:hrtimer_expire_entry,timer:hrtimer_cancel,irq:irq_handler_entry}
trace_args=
[ -z "$events" ] || trace_args="ftrace_dump_on_oops trace_event=$events trace_buf_size=64K"
for n in $(seq 1 "$runs"); do
  out=$base/run$n
  mkdir -p "$out"
  sock=$base/monitor$n.sock
  t0=$SECONDS
  vng --run "$k" --verbose --disable-kvm --force-9p --cpus 2 --memory 2G --rwdir "$out" \
    --append "unknown_nmi_panic panic_print=0x55 $trace_args" \
    --qemu-opts="-monitor unix:$sock,server,nowait" \
    --exec "(while :; do date +%T >$out/heartbeat; sleep 5; done) & tests/kernels/suite.sh rt $out; echo \"suite-exit \$?\" >$out/done" \
    >"$out/console.log" 2>&1 &
  vng_pid=$!
  state=running
  while kill -0 $vng_pid 2>/dev/null; do
    sleep 5
    [ -f "$out/heartbeat" ] || { [ $((SECONDS - t0)) -lt 300 ] && continue; }
    age=$(($(date +%s) - $(stat -c %Y "$out/heartbeat" 2>/dev/null || echo 0)))
    if [ $age -gt 90 ] && [ $state = running ]; then
      state=stalled
      echo "run $n: heartbeat $age s old at $(date +%T) (last check: $(tail -1 "$out/summary" 2>/dev/null)); NMI"
      python3 - "$sock" <<'PY'
import socket, sys, time
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
time.sleep(0.5)
s.sendall(b"nmi\n")
time.sleep(1)
PY
      nmi_at=$SECONDS
    fi
    if [ $state = stalled ] && [ $((SECONDS - nmi_at)) -gt 240 ]; then
      kill $vng_pid
    fi
    if [ $((SECONDS - t0)) -gt 1500 ]; then
      echo "run $n: no end after 1500 s"
      kill $vng_pid
    fi
  done
  wait $vng_pid
  echo "run $n: $state, $((SECONDS - t0)) s, $(cat "$out/done" 2>/dev/null || echo 'no suite-exit')"
  [ ! -f "$out/summary" ] || sed 's/^/   /' "$out/summary"
done
