#!/usr/bin/env bash
# The timeline of `reserve --cpu 1`'s v2 partition as another process sees
# it, run inside a kernel-matrix guest (see docs/kernels.md):
#
#   vng --run /boot/vmlinuz-<ver>-rt-amd64 --disable-kvm --force-9p --cpus 2 \
#     --memory 2G --rwdir OUTDIR --exec 'tests/kernels/partition-watch.sh OUTDIR'
#
# Three runs; OUTDIR/watchN.log gets one line per change of what a look
# reads: the time, the partition's cgroup, its cpuset.cpus.partition and
# cpuset.cpus.effective with each read's status (non-zero: the file was
# gone) and the root's cpuset.cpus.effective. The reads are shell
# builtins, so a look is microseconds long and many are taken a second.
set -uo pipefail
out=$1
root=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$out"
P=$(mktemp -d /tmp/punctual-watch.XXXXXX)/punctual
cp "${PUNCTUAL_BIN:-$root/target/release/punctual}" "$P"
[ -d /sys/kernel/debug/sched ] || mount -t debugfs nodev /sys/kernel/debug 2>/dev/null
watch() { # PID LOG
  local last= now cg d p e r pr er
  while kill -0 "$1" 2>/dev/null; do
    d=none p=- e=- pr=- er=-
    for cg in /sys/fs/cgroup/punctual-rt-*; do [ -d "$cg" ] && d=$cg; done
    if [ "$d" != none ]; then
      read -r p 2>/dev/null <"$d/cpuset.cpus.partition"
      pr=$?
      read -r e 2>/dev/null <"$d/cpuset.cpus.effective"
      er=$?
    fi
    read -r r </sys/fs/cgroup/cpuset.cpus.effective
    now="$d partition=$p($pr) effective=[$e]($er) root-effective=$r"
    [ "$now" = "$last" ] || echo "$EPOCHREALTIME $now" >>"$2"
    last=$now
  done
}
for i in 1 2 3; do
  : >"$out/watch$i.log"
  "$P" reserve --budget 2ms --period 10ms --cpu 1 --duration 2s --test-app >"$out/reserve$i.txt" 2>&1 &
  watch $! "$out/watch$i.log"
  wait $!
  echo "reserve run $i: exit $?" >>"$out/watch$i.log"
done
rm -rf "$(dirname "$P")"
