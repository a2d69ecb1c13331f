#!/usr/bin/env bash
# Simulator memory and speed against the number of tasks (issue 21): N
# periodic tasks (period 100-149 ms, exec 10 µs) on one CPU for 2 s
# simulated, run once per N under /usr/bin/time -v. A benchmark, not a
# test: it prints figures and checks nothing.
#
# Usage: bench/sim-tasks.sh [--bin BINARY] [--edf] [--json] [N...]   (default N: 10 100 1000 2500 10000)
# Without --bin, builds and runs the release binary of this tree.
# Tasks are fixed priority (priority 1 + i mod 31, so many share a
# priority), or with --edf `class = "edf"` (deadline = period).
# The scenario is deterministic: task i has period 100 + i mod 50 ms; the
# file is regenerated identically for each N.
#
# Columns: events the run handled (as simulate counts them); run_Mev_s,
# events per second of the run alone (simulate's own figure: its first
# events, the event loop and the outcome, wall time); wall_s, the whole
# process (parse, build, run, summary, exit) by /usr/bin/time; rss_MB, its
# maximum resident set; KB/task, that over N (the process's fixed ~7 MB
# included, so small N read high). With --json each run also writes its
# record (`--json`, inside the figures above) and two more columns give
# its size: json_MB and B/task.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=""
CLASS=fixed
JSON=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --bin) BIN="$2"; shift 2
      [[ -x "$BIN" ]] || { echo "sim-tasks.sh: '$BIN' is not an executable" >&2; exit 2; } ;;
    --edf) CLASS=edf; shift ;;
    --json) JSON=1; shift ;;
    *) break ;;
  esac
done
ns=("$@")
[[ ${#ns[@]} -gt 0 ]] || ns=(10 100 1000 2500 10000)
for n in "${ns[@]}"; do
  [[ "$n" =~ ^[1-9][0-9]*$ ]] || { echo "sim-tasks.sh: '$n' is not a task count" >&2; exit 2; }
done
if [[ -z "$BIN" ]]; then
  cargo build --release -q -p punctual
  BIN="${CARGO_TARGET_DIR:-target}/release/punctual"
fi
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT

gen() { # gen N FILE
  {
    printf '[sim]\ndescription = "%s periodic tasks, %s"\nduration = "2s"\n' "$1" \
      "$([[ $CLASS == edf ]] && echo EDF || echo 'shared priorities')"
    awk -v n="$1" -v edf="$([[ $CLASS == edf ]] && echo 1 || echo 0)" 'BEGIN {
      for (i = 0; i < n; i++) {
        printf "\n[[task]]\nname = \"t%d\"\nkind = \"periodic\"\n", i
        if (edf) printf "class = \"edf\"\n"; else printf "priority = %d\n", 1 + i % 31
        printf "period = \"%dms\"\nexec = \"10us\"\n", 100 + i % 50
      }
    }'
  } >"$2"
}

echo "class $CLASS, 2 s simulated, $BIN"
printf '%7s %12s %10s %9s %10s %9s' tasks events run_Mev_s wall_s rss_MB KB/task
[[ $JSON == 0 ]] && echo || printf ' %9s %8s\n' json_MB B/task
for n in "${ns[@]}"; do
  scn="$WORK/tasks-$n.toml"
  gen "$n" "$scn"
  rec=()
  [[ $JSON == 0 ]] || rec=(--json "$WORK/rec.json")
  /usr/bin/time -v "$BIN" simulate "$scn" --duration 2s "${rec[@]}" >"$WORK/out" 2>"$WORK/time" || {
    echo "sim-tasks.sh: simulate failed for N=$n:" >&2; cat "$WORK/out" "$WORK/time" >&2; exit 1; }
  ev=$(sed -n 's/^\([0-9]*\) events in .*/\1/p' "$WORK/out")
  mev=$(sed -n 's/^[0-9]* events in .*(\([0-9.]*\) M events\/s)$/\1/p' "$WORK/out")
  rss=$(sed -n 's/^[[:space:]]*Maximum resident set size (kbytes): //p' "$WORK/time")
  wall=$(sed -n 's/^[[:space:]]*Elapsed (wall clock) time.*: //p' "$WORK/time" |
    awk -F: '{s = 0; for (i = 1; i <= NF; i++) s = s * 60 + $i; print s}')
  awk -v n="$n" -v e="$ev" -v m="$mev" -v w="$wall" -v r="$rss" 'BEGIN {
    printf "%7d %12d %10.1f %9.2f %10.1f %9.1f", n, e, m, w, r / 1024, r / n }'
  if [[ $JSON == 0 ]]; then echo; else
    awk -v n="$n" -v b="$(stat -c %s "$WORK/rec.json")" 'BEGIN { printf " %9.2f %8.0f\n", b / 1e6, b / n }'
  fi
done
echo "(one run per N; wall and rss from /usr/bin/time -v; events and run_Mev_s as simulate prints them)"
