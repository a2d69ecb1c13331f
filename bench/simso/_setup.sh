# Sourced by the compare scripts: SimSo (PyPI simso, which needs Python 3.11)
# in a venv under the target directory, made once, and the release binary.
# Leaves VENV set and the working directory at the repository root.
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-target}"
VENV="${SIMSO_VENV:-$CARGO_TARGET_DIR/simso-venv}"
PY311="$(command -v python3.11 || true)"
[[ -n "$PY311" ]] || { echo "$(basename "$0"): python3.11 not found (SimSo needs it)" >&2; exit 1; }
if [[ ! -x "$VENV/bin/python" ]] || ! "$VENV/bin/python" -c 'import simso' 2>/dev/null; then
  "$PY311" -m venv "$VENV"
  "$VENV/bin/pip" install --quiet simso
fi
cargo build --release -p punctual >/dev/null
