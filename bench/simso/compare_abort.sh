#!/usr/bin/env bash
# punctual simulate (sim.on_miss = "abort") vs SimSo's default (late jobs
# aborted at their deadline) on overloaded EDF task sets: per-set totals
# of jobs, misses, aborted jobs and preemptions, and how many tasks agree.
# Usage: bench/simso/compare_abort.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-target}"
VENV="${SIMSO_VENV:-$CARGO_TARGET_DIR/simso-venv}"
PY311="$(command -v python3.11 || true)"
[[ -n "$PY311" ]] || { echo "compare_abort.sh: python3.11 not found (SimSo needs it)" >&2; exit 1; }
if [[ ! -x "$VENV/bin/python" ]] || ! "$VENV/bin/python" -c 'import simso' 2>/dev/null; then
  "$PY311" -m venv "$VENV"
  "$VENV/bin/pip" install --quiet simso
fi
cargo build --release -p punctual >/dev/null
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
"$VENV/bin/python" -c 'import simso; print("simso", simso.__version__)' 2>/dev/null || true
python3 bench/simso/compare_abort.py "$WORK" "$CARGO_TARGET_DIR/release/punctual" "$VENV/bin/python"
