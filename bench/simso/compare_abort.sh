#!/usr/bin/env bash
# punctual simulate (sim.on_miss = "abort") vs SimSo's default (late jobs
# aborted at their deadline) on overloaded EDF task sets: per-set totals
# of jobs, misses, aborted jobs and preemptions, and how many tasks agree.
# Usage: bench/simso/compare_abort.sh
set -euo pipefail
source "$(dirname "$0")/_setup.sh"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
"$VENV/bin/python" -c 'import simso; print("simso", simso.__version__)' 2>/dev/null || true
python3 bench/simso/compare_abort.py "$WORK" "$CARGO_TARGET_DIR/release/punctual" "$VENV/bin/python"
