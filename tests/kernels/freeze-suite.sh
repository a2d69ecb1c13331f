#!/usr/bin/env bash
# A guest that stands still on purpose, to try tests/kernels/run's own
# handling of one (docs/kernels.md, "Known problems"):
#
#   PUNCTUAL_KERNELS_SUITE=tests/kernels/freeze-suite.sh PUNCTUAL_KERNELS_BOOTS=2 \
#     tests/kernels/run stock
#
# must stop each boot about PUNCTUAL_KERNELS_STALL seconds after this
# script's one check, say the guest stood still, leave the console of the
# NMI's panic in target/kernels/stock.bootN/console.log, and fail (exit
# status 1) after two boots. With RT throttling off, a SCHED_FIFO 99 loop
# on every CPU leaves nothing else to run: no ktimers thread expires the
# heartbeat's sleep, and no interrupt thread finishes its 9p writes.
set -u
out=$2
echo "pass started 0s" >"$out/summary"
sleep 10
echo -1 >/proc/sys/kernel/sched_rt_runtime_us
for c in $(seq 0 $(($(nproc) - 1))); do
  taskset -c "$c" chrt -f 99 sh -c 'while :; do :; done' &
done
wait
