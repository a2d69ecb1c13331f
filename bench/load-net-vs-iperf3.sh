#!/usr/bin/env bash
# `punctual load net` vs iperf3: one TCP stream over 127.0.0.1, same
# duration, same message size (128 KiB, iperf3's default), same CPU
# placement (sender on TX_CPU, receiver on RX_CPU), alternating which tool
# goes first, ROUNDS rounds; prints each round, the medians and the ratio.
#
#   bench/load-net-vs-iperf3.sh                 # 3 rounds of 10 s
#   ROUNDS=5 DURATION=20 TX_CPU=0 RX_CPU=1 bench/load-net-vs-iperf3.sh
#   PUNCTUAL=/path/to/punctual bench/load-net-vs-iperf3.sh
#
# Target: ratio >= 0.9. Traffic stays on loopback.
set -euo pipefail
cd "$(dirname "$0")/.."

ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-10}
TX_CPU=${TX_CPU:-0}
RX_CPU=${RX_CPU:-1}
PORT=${PORT:-5399}

if ! command -v iperf3 >/dev/null; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq iperf3 >/dev/null
fi
if [[ -z "${PUNCTUAL:-}" ]]; then
    cargo build --release -q -p punctual
    PUNCTUAL=${CARGO_TARGET_DIR:-target}/release/punctual
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"; [[ -n "${srv:-}" ]] && kill "$srv" 2>/dev/null || true' EXIT

run_iperf3() {
    iperf3 -s -1 -B 127.0.0.1 -p "$PORT" -A "$RX_CPU" >/dev/null 2>&1 &
    srv=$!
    sleep 0.5
    iperf3 -c 127.0.0.1 -p "$PORT" -t "$DURATION" -A "$TX_CPU" -l 128K -J >"$tmp/iperf3.json"
    wait "$srv" || true
    srv=
    python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["end"]["sum_received"]["bits_per_second"]/1e9)' "$tmp/iperf3.json"
}

run_punctual() {
    "$PUNCTUAL" load "net:msg=128K,tx-cpu=$TX_CPU,rx-cpu=$RX_CPU" --duration "${DURATION}s" \
        --json "$tmp/p.json" >/dev/null 2>&1
    python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["load"][0]["achieved"]["throughput_gbit_s"])' "$tmp/p.json"
}

p_all=(); i_all=()
printf '%-6s %-12s %14s\n' round tool 'Gbit/s'
for r in $(seq 1 "$ROUNDS"); do
    if (( r % 2 )); then order="punctual iperf3"; else order="iperf3 punctual"; fi
    for t in $order; do
        if [[ $t == punctual ]]; then v=$(run_punctual); p_all+=("$v"); else v=$(run_iperf3); i_all+=("$v"); fi
        printf '%-6s %-12s %14.3f\n' "$r" "$t" "$v"
    done
done
python3 - "${p_all[*]}" "${i_all[*]}" <<'PY'
import statistics, sys
p = [float(x) for x in sys.argv[1].split()]
i = [float(x) for x in sys.argv[2].split()]
mp, mi = statistics.median(p), statistics.median(i)
print(f"median punctual load net : {mp:.3f} Gbit/s")
print(f"median iperf3            : {mi:.3f} Gbit/s")
print(f"ratio punctual/iperf3    : {mp/mi:.3f}  (target >= 0.9)")
PY
