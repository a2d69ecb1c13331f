#!/usr/bin/env bash
# punctual simulate vs SimSo (PyPI simso, Python 3.11) on identical EDF task
# sets: the 3-task set (1,4) (2,6) (3,12) ms and a seeded 20-task set at
# U = 0.95, 10 s each. Prints per-task jobs / misses / preemptions side by
# side and the speed ratio in job events per second.
# Usage: bench/simso/compare.sh [ROUNDS]   (default 3)
set -euo pipefail
cd "$(dirname "$0")/../.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-target}"
VENV="${SIMSO_VENV:-$CARGO_TARGET_DIR/simso-venv}"
PY311="$(command -v python3.11 || true)"
[[ -n "$PY311" ]] || { echo "compare.sh: python3.11 not found (SimSo needs it)" >&2; exit 1; }
if [[ ! -x "$VENV/bin/python" ]] || ! "$VENV/bin/python" -c 'import simso' 2>/dev/null; then
  "$PY311" -m venv "$VENV"
  "$VENV/bin/pip" install --quiet simso
fi
cargo build --release -p punctual >/dev/null
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
python3 bench/simso/gen_taskset.py "$WORK"
"$VENV/bin/python" -c 'import simso; print("simso", simso.__version__)' 2>/dev/null || true
python3 bench/simso/compare.py "$WORK" "$CARGO_TARGET_DIR/release/punctual" "$VENV/bin/python" "${1:-3}"
