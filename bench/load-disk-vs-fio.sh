#!/usr/bin/env bash
# `punctual load disk` vs fio for the same pattern: O_DIRECT reads of a
# SIZE file in DIR with the psync engine (one thread per queue slot, like
# punctual's readers), sequential 128 KiB and random 4 KiB by default,
# alternating which tool goes first, ROUNDS rounds; prints each round, the
# medians and the MB/s ratio per pattern.
#
#   bench/load-disk-vs-fio.sh
#   ROUNDS=5 DURATION=20 SIZE=1G DIR=/var/tmp PATTERNS="seq:128K rand:4K rand:4K:4" bench/load-disk-vs-fio.sh
#
# A pattern is seq|rand:BLOCK[:QUEUE_DEPTH]. Target: ratio >= 0.9.
set -euo pipefail
cd "$(dirname "$0")/.."

ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-10}
SIZE=${SIZE:-256M}
DIR=${DIR:-/var/tmp}
PATTERNS=${PATTERNS:-"seq:128K rand:4K"}

if ! command -v fio >/dev/null; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq fio >/dev/null
fi
if [[ -z "${PUNCTUAL:-}" ]]; then
    cargo build --release -q -p punctual
    PUNCTUAL=${CARGO_TARGET_DIR:-target}/release/punctual
fi
tmp=$(mktemp -d)
work=$(mktemp -d -p "$DIR" punctual-bench-fio.XXXXXX)
trap 'rm -rf "$tmp" "$work"' EXIT

to_bytes() { python3 -c 'import sys; s=sys.argv[1].upper(); m={"K":1<<10,"M":1<<20,"G":1<<30}; print(int(s[:-1])*m[s[-1]] if s[-1] in m else int(s))' "$1"; }

run_fio() { # pattern bs qd
    local rw=read; [[ $1 == rand ]] && rw=randread
    fio --name=bench --directory="$work" --size="$SIZE" --bs="$2" --rw="$rw" --direct=1 \
        --ioengine=psync --numjobs="$3" --group_reporting --time_based --runtime="$DURATION" \
        --output-format=json >"$tmp/fio.json" 2>/dev/null
    rm -f "$work"/bench.*
    python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["jobs"][0]["read"]["bw_bytes"]/1e6)' "$tmp/fio.json"
}

run_punctual() { # pattern bs qd
    "$PUNCTUAL" load "disk:dir=$DIR,size=$SIZE,bs=$2,$1,direct,qd=$3" --duration "${DURATION}s" \
        --json "$tmp/p.json" >/dev/null 2>&1
    python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["load"][0]["achieved"]["mb_per_s"])' "$tmp/p.json"
}

summary=()
for pat in $PATTERNS; do
    IFS=: read -r kind bs qd <<<"$pat"; qd=${qd:-1}
    p_all=(); f_all=()
    echo "pattern $kind bs=$bs qd=$qd size=$SIZE dir=$DIR direct"
    printf '  %-6s %-10s %12s\n' round tool 'MB/s'
    for r in $(seq 1 "$ROUNDS"); do
        if (( r % 2 )); then order="punctual fio"; else order="fio punctual"; fi
        for t in $order; do
            if [[ $t == punctual ]]; then v=$(run_punctual "$kind" "$bs" "$qd"); p_all+=("$v")
            else v=$(run_fio "$kind" "$bs" "$qd"); f_all+=("$v"); fi
            printf '  %-6s %-10s %12.1f\n' "$r" "$t" "$v"
        done
    done
    summary+=("$(python3 - "$pat" "${p_all[*]}" "${f_all[*]}" <<'PY'
import statistics, sys
p = statistics.median(float(x) for x in sys.argv[2].split())
f = statistics.median(float(x) for x in sys.argv[3].split())
print(f"{sys.argv[1]:<14} punctual {p:9.1f} MB/s   fio {f:9.1f} MB/s   ratio {p/f:.3f}")
PY
)")
done
echo "medians (target ratio >= 0.9):"
printf '  %s\n' "${summary[@]}"
