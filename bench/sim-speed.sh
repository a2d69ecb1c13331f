#!/usr/bin/env bash
# Simulator speed and memory (issue 3): scheduling events per second, a
# simulated week of a 1 ms periodic task with two noise sources, and max RSS
# for an hour, a day and a week (memory must not grow with simulated time).
#
# Usage: bench/sim-speed.sh [--quick] [--rounds N] [--against REV|BINARY]
#   --quick     1 h and 1 d only
#   --rounds N  runs per duration and binary, alternating (default 3); the
#               table gives medians
#   --against   also run an older punctual, alternating with this one, and
#               print the wall-time ratio old/new per duration. A git
#               revision is exported with `git archive` (the work tree is not
#               touched) and built into "$CARGO_TARGET_DIR-against".
#
# "events" is what each binary counts: since the wake-up slot change, real
# scheduling events only (releases, interrupts, arrivals and CPU wake-ups
# that fire); before it, superseded wake-ups popped and discarded and the end
# marker counted too. Compare binaries by wall time for the same simulated
# duration, which is what the ratio column does.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-target}"
durations=(1h 1d 7d)
rounds=3
against=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --quick) durations=(1h 1d) ;;
    --rounds) rounds="$2"; shift ;;
    --against) against="$2"; shift ;;
    *) echo "sim-speed.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
  shift
done
build() { # quiet unless it fails
  local log; log="$(mktemp)"
  if ! cargo build --release -p punctual >"$log" 2>&1; then cat "$log" >&2; rm -f "$log"; exit 1; fi
  rm -f "$log"
}
build
BIN="$CARGO_TARGET_DIR/release/punctual"
OLD=""
if [[ -n "$against" ]]; then
  if [[ -x "$against" && -f "$against" ]]; then
    OLD="$against"
  else
    src="$(mktemp -d)"
    git archive "$against" | tar -x -C "$src"
    (cd "$src" && CARGO_TARGET_DIR="$CARGO_TARGET_DIR-against" build)
    rm -rf "$src"
    OLD="$CARGO_TARGET_DIR-against/release/punctual"
  fi
fi
SCN="$(mktemp --suffix=.toml)"
OUT="$(mktemp)"
trap 'rm -f "$SCN" "$OUT"' EXIT
cat >"$SCN" <<'TOML'
[sim]
description = "1 ms periodic task with two noise sources"
duration = "1h"

[[task]]
name = "rt"
kind = "periodic"
priority = 24
period = "1ms"
exec = { uniform = ["50us", "150us"] }

[[task]]
name = "bg"
kind = "background"
priority = 1

[[noise]]
name = "dpc"
kind = "periodic"
period = "10ms"
jitter = "1ms"
duration = { exp = "50us" }

[[noise]]
name = "irq"
kind = "poisson"
level = "irq"
rate = 300.0
duration = { exp = "5us" }
TOML

# One run: prints "events wall_s rss_kb".
run() {
  /usr/bin/time -f "TIME %e %M" "$1" simulate "$SCN" --duration "$2" >"$OUT" 2>&1
  local ev wall rss
  ev=$(sed -n 's/^\([0-9]*\) events in .*/\1/p' "$OUT")
  read -r wall rss < <(sed -n 's/^TIME //p' "$OUT")
  echo "$ev $wall $rss"
}
median() { sort -g | awk '{v[NR]=$1} END {print (NR%2) ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2}'; }

if [[ -n "$OLD" ]]; then
  printf '%-5s %12s %8s %9s %9s | %12s %8s %9s | %7s\n' \
    simul events wall_s Mev_s rss_KB old_events wall_s Mev_s old/new
else
  printf '%-5s %12s %8s %9s %9s\n' simul events wall_s Mev_s rss_KB
fi
for d in "${durations[@]}"; do
  new_w=(); old_w=(); rss=0; ev=0; oev=0
  for ((r = 0; r < rounds; r++)); do
    read -r ev w m <<<"$(run "$BIN" "$d")"
    new_w+=("$w"); ((m > rss)) && rss=$m
    if [[ -n "$OLD" ]]; then
      read -r oev w _ <<<"$(run "$OLD" "$d")"
      old_w+=("$w")
    fi
  done
  nw=$(printf '%s\n' "${new_w[@]}" | median)
  nr=$(awk -v e="$ev" -v w="$nw" 'BEGIN {printf "%.1f", e / w / 1e6}')
  if [[ -n "$OLD" ]]; then
    ow=$(printf '%s\n' "${old_w[@]}" | median)
    orate=$(awk -v e="$oev" -v w="$ow" 'BEGIN {printf "%.1f", e / w / 1e6}')
    ratio=$(awk -v a="$ow" -v b="$nw" 'BEGIN {printf "%.2f", a / b}')
    printf '%-5s %12s %8s %9s %9s | %12s %8s %9s | %7s\n' \
      "$d" "$ev" "$nw" "$nr" "$rss" "$oev" "$ow" "$orate" "$ratio"
  else
    printf '%-5s %12s %8s %9s %9s\n' "$d" "$ev" "$nw" "$nr" "$rss"
  fi
done
echo "(medians of $rounds alternating runs; wall_s from /usr/bin/time; rss of this binary)"
