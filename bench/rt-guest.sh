# Sourced by the benches that compare punctual with rtla (rtla-vs-punctual.sh,
# rtla-cause.sh): run the calling script's rounds on a kernel with the
# timerlat tracer. Here, if this kernel has it; otherwise in the Debian
# PREEMPT_RT kernel of the kernel matrix, booted with virtme-ng under
# QEMU TCG (2 vCPUs), with the script run again inside. Either way the
# inside run writes OUT/result.txt, which is printed; a guest that did not
# finish fails with the end of its console.
#
# usage: run_in_rt_kernel OUT SCRIPT ARGS...   (from the repository's root)
run_in_rt_kernel() {
  local out=$1 script=$2; shift 2
  local need=
  for p in rtla jq qemu-system-x86_64; do
    command -v $p >/dev/null || need=1
  done
  if [ -n "$need" ] || ! ls /boot/vmlinuz-*-rt-amd64 >/dev/null 2>&1; then
    apt-get update -qq
    INITRD=No DEBIAN_FRONTEND=noninteractive apt-get install -y -qq rtla jq qemu-system-x86 \
      busybox-static linux-image-rt-amd64 >/dev/null
  fi
  command -v vng >/dev/null || pip3 install -q virtme-ng
  cargo build --release -q -p punctual
  rm -rf "$out"; mkdir -p "$out"
  if grep -qw timerlat /sys/kernel/tracing/available_tracers 2>/dev/null; then
    PUNCTUAL_BENCH_INSIDE=1 PUNCTUAL_BENCH_OUT=$out "$script" "$@"
  else
    local k
    k=$(ls /boot/vmlinuz-*-rt-amd64 | sort -V | tail -1)
    echo "booting $(basename "$k") under QEMU TCG (2 vCPUs) to run the rounds inside"
    vng --run "$k" --disable-kvm --force-9p --cpus 2 --memory 2G --rwdir "$out" \
      --exec "PUNCTUAL_BENCH_WHERE='QEMU TCG guest' PUNCTUAL_BENCH_INSIDE=1 PUNCTUAL_BENCH_OUT=$out $script $*" \
      >"$out/console.log" 2>&1 || true
  fi
  if [ ! -f "$out/result.txt" ]; then
    echo "the guest did not finish; its console:"; tail -40 "$out/console.log"; return 1
  fi
  cat "$out/result.txt"
}
