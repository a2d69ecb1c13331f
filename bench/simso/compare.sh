#!/usr/bin/env bash
# punctual simulate vs SimSo (PyPI simso, Python 3.11) on identical EDF task
# sets: the 3-task set (1,4) (2,6) (3,12) ms and a seeded 20-task set at
# U = 0.95, 10 s each. Prints per-task jobs / misses / preemptions side by
# side and the speed ratio in job events per second.
# Usage: bench/simso/compare.sh [ROUNDS]   (default 3)
set -euo pipefail
source "$(dirname "$0")/_setup.sh"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
python3 bench/simso/gen_taskset.py "$WORK"
"$VENV/bin/python" -c 'import simso; print("simso", simso.__version__)' 2>/dev/null || true
python3 bench/simso/compare.py "$WORK" "$CARGO_TARGET_DIR/release/punctual" "$VENV/bin/python" "${1:-3}"
