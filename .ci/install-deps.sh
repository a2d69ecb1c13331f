#!/usr/bin/env bash
# Installs what the test suite needs on a fresh machine (root, Debian).
# Only packages tests use live here; bench scripts install their own peers.
set -euo pipefail
need=()
# report/monitor tests: headless browser, promtool and a real Prometheus.
command -v chromium >/dev/null || need+=(chromium)
command -v promtool >/dev/null || need+=(prometheus)
# --stop-raw tests: trace-cmd reads the trace.dat punctual writes.
command -v trace-cmd >/dev/null || need+=(trace-cmd)
command -v rustfmt >/dev/null || rustup component add rustfmt
cargo clippy --version >/dev/null 2>&1 || rustup component add clippy
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ]; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
  else
    echo "warning: not root; cannot install ${need[*]}; tests that need them will skip" >&2
  fi
fi
# The SimSo parity tests (crates/cli/tests/simso.rs) need SimSo, which
# needs Python 3.11; without it they skip with the reason.
if [ ! -x target/simso-venv/bin/python ]; then
  py=$(command -v python3.11 || command -v python3 || true)
  if [ -n "$py" ] && "$py" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))'; then
    mkdir -p target
    "$py" -m venv target/simso-venv && target/simso-venv/bin/pip install --quiet simso \
      || echo "warning: could not install SimSo; its parity tests will skip" >&2
  else
    echo "warning: no Python 3.11 for SimSo; its parity tests will skip" >&2
  fi
fi
