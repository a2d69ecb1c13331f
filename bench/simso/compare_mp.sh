#!/usr/bin/env bash
# punctual simulate vs SimSo (PyPI simso, Python 3.11) on generated
# multiprocessor task sets, 2 to 8 CPUs, under global EDF and partitioned
# EDF (first-fit, largest utilization first): per-task jobs, misses,
# preemptions, migrations and task migrations must be identical; with
# ROUNDS > 0, three speed ratios in job events per CPU second (alternating
# rounds, medians; `sim` both runs timed alone in-process on the same set,
# SimSo's Model(cfg) and punctual's building of its machine left out,
# `+build` punctual's with building its machine, `proc` punctual's whole
# process over a 100x longer run), minimum and median over the sets.
# LATE = abort aborts late jobs at their deadline on both sides (SimSo's
# default, punctual's sim.on_miss = "abort").
# PUNCTUAL=BIN runs that binary instead of the release build of the tree,
# so that two builds go through the same script one after the other.
# Usage: bench/simso/compare_mp.sh [ROUNDS] [SEEDS] [DURATION_MS] [LATE]
#        (defaults 3, 20, 2000, continue)
set -euo pipefail
source "$(dirname "$0")/_setup.sh"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
python3 bench/simso/gen_mp.py "$WORK" --seeds "${2:-20}" --duration-ms "${3:-2000}"
"$VENV/bin/python" -c 'import simso; print("simso", simso.__version__)' 2>/dev/null || true
python3 bench/simso/compare_mp.py "$WORK" "${PUNCTUAL:-$CARGO_TARGET_DIR/release/punctual}" "$VENV/bin/python" "${1:-3}" "${4:-continue}"
