#!/usr/bin/env bash
# CPU time of `punctual check`'s verdicts on a feed with stalls of tens
# of milliseconds, as QEMU TCG guests show (docs/kernels.md), replayed so
# every run judges the same wake-ups and gaps.
#
#   bench/check-verdict-cost.sh [BIN ...]
#
# BIN defaults to target/release/punctual; give two binaries (e.g. one
# built from an older commit) to compare them side by side: alternating
# rounds, median CPU seconds (user + sys) each, their ratio, and whether
# their verdict records are identical.
set -euo pipefail
cd "$(dirname "$0")/.."
bins=("$@")
[ ${#bins[@]} -gt 0 ] || bins=(target/release/punctual)
rounds=${ROUNDS:-3}
work=$(mktemp -d /tmp/punctual-verdict-cost.XXXXXX)
trap 'rm -rf "$work"' EXIT
# 1000 wake-ups (1 ms apart): 80 % quiet (40-150 us), 15 % 0.2-0.9 ms,
# 4 % 1-8 ms, 1 % 10-60 ms; 400 stolen gaps, 3 % of them 10-50 ms. A
# fixed seed: the same feed every run.
python3 - "$work" <<'PY'
import random, sys
d = sys.argv[1]
r = random.Random(7)
with open(d + '/lat.txt', 'w') as f:
    for _ in range(1000):
        u = r.random()
        if u < 0.01: v = r.randint(10_000_000, 60_000_000)
        elif u < 0.05: v = r.randint(1_000_000, 8_000_000)
        elif u < 0.2: v = r.randint(200_000, 900_000)
        else: v = r.randint(40_000, 150_000)
        f.write(f"{v}\n")
with open(d + '/gaps.txt', 'w') as f:
    t = 0
    for _ in range(400):
        t += r.randint(500_000, 3_000_000)
        u = r.random()
        if u < 0.03: l = r.randint(10_000_000, 50_000_000)
        elif u < 0.2: l = r.randint(500_000, 5_000_000)
        else: l = r.randint(2_000, 200_000)
        f.write(f"{t} {l}\n")
        t += l
PY
for ((r = 1; r <= rounds; r++)); do
  for i in "${!bins[@]}"; do
    python3 bench/_rusage_run.py "$work/b$i.r$r" "${bins[$i]}" check --duration 2s --cpus 0 \
      --replay-timer "$work/lat.txt" --replay-noise "$work/gaps.txt" --json "$work/b$i.r$r.json"
    awk '{ print $1 + $2 }' "$work/b$i.r$r.rusage" >>"$work/b$i.cpu"
    jq -S '.extra.verdicts' "$work/b$i.r$r.json" >"$work/b$i.verdicts"
  done
done
median() { sort -g "$1" | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
echo "check --duration 2s on a replayed feed with 10-60 ms stalls, $rounds alternating rounds"
for i in "${!bins[@]}"; do
  printf '  %-40s median CPU %6.2f s  (%s verdicts)\n' "${bins[$i]}" "$(median "$work/b$i.cpu")" \
    "$(jq length "$work/b$i.verdicts")"
done
if [ ${#bins[@]} -ge 2 ]; then
  awk -v a="$(median "$work/b0.cpu")" -v b="$(median "$work/b1.cpu")" \
    'BEGIN { printf "  ratio first/second: %.1fx\n", a / b }'
  if cmp -s "$work/b0.verdicts" "$work/b1.verdicts"; then
    echo "  verdict records: identical"
  else
    echo "  verdict records: DIFFER"
    diff "$work/b0.verdicts" "$work/b1.verdicts" | head -20
  fi
fi
