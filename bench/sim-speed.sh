#!/usr/bin/env bash
# Simulator speed and memory (issue 3): events per second, a simulated week
# of a 1 ms periodic task with two noise sources, and max RSS for a day vs a
# week (memory must not grow with simulated time).
# Usage: bench/sim-speed.sh [--quick]   (--quick: 1 h and 1 day only)
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-target}"
cargo build --release -p punctual >/dev/null
BIN="$CARGO_TARGET_DIR/release/punctual"
SCN="$(mktemp --suffix=.toml)"
trap 'rm -f "$SCN"' EXIT
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
durations=(1h 1d 7d)
[[ "${1:-}" == "--quick" ]] && durations=(1h 1d)
printf '%-6s %14s %10s %12s %12s\n' simulated events wall_s Mevents_s maxrss_KB
for d in "${durations[@]}"; do
  out=$( { /usr/bin/time -f "RSS %M" "$BIN" simulate "$SCN" --duration "$d"; } 2>&1 )
  ev=$(sed -n 's/^\([0-9]*\) events in \([0-9.]*\) s.*(\([0-9.]*\) M events.*/\1 \2 \3/p' <<<"$out")
  rss=$(sed -n 's/^RSS //p' <<<"$out")
  read -r n w r <<<"$ev"
  printf '%-6s %14s %10s %12s %12s\n' "$d" "$n" "$w" "$r" "$rss"
done
