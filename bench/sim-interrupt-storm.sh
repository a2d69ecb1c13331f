#!/usr/bin/env bash
# Memory of the simulator under an interrupt storm it cannot serve: Poisson
# 10^7/s of 1 ms interrupt-level work on one CPU for SIM_S simulated
# seconds (default 1). Before interrupt-level queues were bounded this grew
# about 550 MB per simulated second; now the CPU queues at most 10,000
# pieces and counts the rest as dropped (extra.sim.interrupt_work_dropped).
#
# Usage: bench/sim-interrupt-storm.sh [BIN] [SIM_S]
# Prints max resident memory (KB, /usr/bin/time %M) and the dropped count.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN="${1:-target/release/punctual}"
SIM_S="${2:-1}"
[[ -x "$BIN" ]] || cargo build --release -q -p punctual
command -v /usr/bin/time >/dev/null || { apt-get install -y -qq time >/dev/null; }
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
cat >"$WORK/storm.toml" <<TOML
[sim]
duration = "${SIM_S}s"
[[task]]
name = "b"
kind = "background"
[[noise]]
name = "storm"
kind = "poisson"
level = "irq"
rate = 1e7
duration = "1ms"
TOML
/usr/bin/time -f '%M' -o "$WORK/rss" "$BIN" simulate "$WORK/storm.toml" --json "$WORK/r.json" >/dev/null 2>&1
echo "max RSS: $(cat "$WORK/rss") KB for ${SIM_S} simulated s"
python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print('dropped:', r.get('extra',{}).get('sim',{}).get('interrupt_work_dropped'))" "$WORK/r.json"
