#!/usr/bin/env bash
# What writing a simulated record costs on a small scenario (issue 21): the
# record of every run is kept under RECORD_BYTES_MAX, and sizing it must not
# make a small record dear. Counts instructions with callgrind, so the
# figures do not move with the machine's load.
#
# Usage: bench/sim-record-cost.sh BIN...
# The scenario: 20 tasks t0..t19, class edf, periods 10..29 ms, exec 100 us,
# 2 s simulated. For each binary, `BIN simulate s20.toml` runs under
# `valgrind --tool=callgrind`; columns: total_Minstr, the whole process;
# to_record_Minstr, inclusive in punctual_sim::output::to_record (the
# record built, sized and, when too large, folded); json_bytes, the record
# `--json` writes (a separate run, not counted).
set -euo pipefail
cd "$(dirname "$0")/.."
[[ $# -ge 1 ]] || { echo "usage: bench/sim-record-cost.sh BIN..." >&2; exit 2; }
for b in "$@"; do
  [[ -x "$b" ]] || { echo "sim-record-cost.sh: '$b' is not an executable" >&2; exit 2; }
done
command -v valgrind >/dev/null || { echo "sim-record-cost.sh: needs valgrind" >&2; exit 2; }
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
SCN="$WORK/s20.toml"
{
  printf '[sim]\ndescription = "20 EDF tasks"\nduration = "2s"\n'
  for i in $(seq 0 19); do
    printf '\n[[task]]\nname = "t%d"\nkind = "periodic"\nclass = "edf"\nperiod = "%dms"\nexec = "100us"\n' "$i" $((10 + i))
  done
} >"$SCN"
printf '%-40s %14s %18s %12s\n' binary total_Minstr to_record_Minstr json_bytes
for b in "$@"; do
  out="$WORK/cg.out"
  valgrind --tool=callgrind --callgrind-out-file="$out" "$b" simulate "$SCN" >/dev/null 2>"$WORK/vg.err"
  # awk reads to the end: an early exit would fail the pipe under pipefail.
  total=$(callgrind_annotate "$out" | awk '/PROGRAM TOTALS/ && !done { gsub(",", "", $1); print $1; done = 1 }')
  rec=$(callgrind_annotate --inclusive=yes "$out" \
    | awk '/punctual_sim::output::to_record( |$)/ && !done { gsub(",", "", $1); print $1; done = 1 }')
  "$b" simulate "$SCN" --json "$WORK/r.json" >/dev/null
  printf '%-40s %14.2f %18.2f %12d\n' "$b" "$(echo "$total / 1000000" | bc -l)" \
    "$(echo "${rec:-0} / 1000000" | bc -l)" "$(stat -c %s "$WORK/r.json")"
done
