#!/usr/bin/env bash
# Replays measured records in the simulator (`simulate --from`) and prints,
# per record and CPU, the record's stolen fraction, gap p99 and latency p99
# beside the simulation's, with their ratios (sim / record). The issue's
# target is every ratio within [1/1.5, 1.5].
#
# Usage: bench/sim-from-record.sh [--bin PATH] RECORD.json...
# Each scenario runs for SIM_DURATION (default 60s), not the record's few
# seconds: a 3 s noise log may hold three 50 ms gaps, and a replay that
# long draws anywhere from one to six, so the model's expectation is read
# from a longer run. The simulated stolen fraction leaves out the probe's own wake-up path
# (the `timer:wakeup-cpuN` DPC source): a record's stolen time is the noise
# probe's, measured without a timer probe on the CPU.
set -euo pipefail
bin=${PUNCTUAL:-target/release/punctual}
if [[ "${1:-}" == --bin ]]; then bin=$2; shift 2; fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
printf '%-28s %-4s %-12s %12s %12s %7s\n' record cpu figure record sim ratio
for rec in "$@"; do
  base=$(basename "$rec" .json)
  "$bin" simulate --from "$rec" --emit-scenario "$tmp/$base.toml" 2>/dev/null
  "$bin" simulate "$tmp/$base.toml" --duration "${SIM_DURATION:-60s}" --json "$tmp/$base.sim.json" >/dev/null 2>&1
  for cpu in $(jq -r '[.series[] | select(.task == null and (.metric == "latency" or .metric == "gap")) | .cpu] | unique | .[]' "$rec"); do
    idx=$(jq -r --argjson c "$cpu" '[.series[] | select(.task == null and (.metric == "latency" or .metric == "gap")) | .cpu] | unique | index($c)' "$rec")
    row() { # figure record sim
      local r=$2 s=$3
      if [[ -z "$r" || "$r" == null || -z "$s" || "$s" == null ]]; then return; fi
      printf '%-28s %-4s %-12s %12s %12s %7s\n' "$base" "$cpu" "$1" "$r" "$s" \
        "$(awk -v a="$r" -v b="$s" 'BEGIN { if (a > 0) printf "%.2f", b / a; else print "-" }')"
    }
    row stolen "$(jq -r --argjson c "$cpu" '.stolen[] | select(.cpu == $c) | .fraction' "$rec")" \
      "$(jq -r --argjson c "$idx" '.stolen[] | select(.cpu == $c) | (.total_ns - ([.by_source[] | select(.name | startswith("timer:wakeup")) | .total_ns] | add // 0)) / .observed_ns' "$tmp/$base.sim.json")"
    row gap.p99 "$(jq -r --argjson c "$cpu" '.series[] | select(.task == null and .metric == "gap" and .cpu == $c) | .percentiles.p99' "$rec")" \
      "$(jq -r --argjson c "$idx" '.series[] | select(.name == "cpu\($c).gap") | .percentiles.p99' "$tmp/$base.sim.json")"
    row latency.p99 "$(jq -r --argjson c "$cpu" '.series[] | select(.task == null and .metric == "latency" and .cpu == $c) | .percentiles.p99' "$rec")" \
      "$(jq -r --argjson c "$cpu" '.series[] | select(.name == "probe-cpu\($c).latency") | .percentiles.p99' "$tmp/$base.sim.json")"
  done
done
