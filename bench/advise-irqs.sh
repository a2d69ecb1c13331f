#!/usr/bin/env bash
# Which device interrupts of this machine a setup of bench/advise-setups.sh
# could route to a CPU and drive with a punctual load: for each numbered
# line of /proc/interrupts, whether the kernel lets its affinity be written
# (the line's own affinity is written back, so nothing moves; a
# kernel-managed interrupt refuses the write), and how many times it fired
# over SECONDS idle, under `punctual load net` and under
# `punctual load disk:direct` (dir DISK_DIR, default /var/tmp), summed over
# CPUs. An interrupt is of use to a setup only if it is routable and a load
# drives it well above idle.
#
# usage: bench/advise-irqs.sh [SECONDS=5]
#   PUNCTUAL=path   the binary (default: target/release/punctual, built)
# Needs root (the affinity write).
set -euo pipefail
SECS=${1:-5}
cd "$(dirname "$0")/.."
if [[ ! "$SECS" =~ ^[0-9]+$ ]] || [[ "$SECS" -lt 1 ]]; then
    echo "advise-irqs: SECONDS must be a whole number of seconds, at least 1 (got '$SECS')" >&2
    exit 2
fi
if [[ $EUID -ne 0 ]]; then
    echo "advise-irqs: writing an interrupt's affinity needs root" >&2
    exit 2
fi
if [ -z "${PUNCTUAL:-}" ]; then
    cargo build --release -q -p punctual
    PUNCTUAL=${CARGO_TARGET_DIR:-target}/release/punctual
fi
DIR="${DISK_DIR:-/var/tmp}"
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT

# Total count per numbered interrupt line: "irq count".
counts() {
    awk 'NR == 1 { n = NF; next }
         $1 ~ /^[0-9]+:$/ { s = 0; for (i = 2; i <= n + 1; i++) s += $i; sub(":", "", $1); print $1, s }' /proc/interrupts
}

# Writes the interrupt's own affinity back: refused for a managed one.
routable() {
    local f="/proc/irq/$1/smp_affinity_list" old
    old="$(cat "$f" 2>/dev/null)" || { echo no; return; }
    if (echo "$old" >"$f") 2>/dev/null; then echo yes; else echo no; fi
}

counts >"$OUT/idle0"; sleep "$SECS"; counts >"$OUT/idle1"
counts >"$OUT/net0"
"$PUNCTUAL" load net --duration "${SECS}s" >/dev/null 2>&1
counts >"$OUT/net1"
counts >"$OUT/disk0"
"$PUNCTUAL" load "disk:direct,dir=$DIR" --duration "${SECS}s" >/dev/null 2>&1
counts >"$OUT/disk1"

printf '%-4s %-20s %-9s %10s %10s %10s\n' irq name routable "idle ${SECS}s" "net ${SECS}s" "disk ${SECS}s"
awk '$1 ~ /^[0-9]+:$/ { sub(":", "", $1); print $1, $NF }' /proc/interrupts | while read -r irq name; do
    d() { echo $(($(awk -v i="$irq" '$1 == i { print $2 }' "$OUT/${1}1") - $(awk -v i="$irq" '$1 == i { print $2 }' "$OUT/${1}0"))); }
    printf '%-4s %-20s %-9s %10s %10s %10s\n' "$irq" "$name" "$(routable "$irq")" "$(d idle)" "$(d net)" "$(d disk)"
done
