#!/usr/bin/env bash
# punctual simulate vs SimSo (PyPI simso, Python 3.11) on a sweep of
# generated single-CPU task sets: one set per seed, 5 to 50 tasks at
# utilization 0.5 to 1.2, each under EDF and rate monotonic, late jobs
# aborted at their deadline (SimSo's default, sim.on_miss = "abort").
# Per run: totals of jobs / misses / aborted / preemptions side by side,
# whether every task agrees, and three speed ratios in job events per CPU
# second (alternating rounds, medians): `sim`, both runs of the same set
# timed alone in-process (SimSo around run_model(), its Model(cfg) left
# out; punctual around the run of its built machine, the "s of CPU" of its
# summary; neither's process start, parse nor output), `+build`, punctual's
# run with building its machine against the same SimSo time, and `proc`,
# punctual's whole process over a 100x longer run; then the minimum and
# median of each. Every run is a fresh process on both sides; where
# punctual's timed run is under 2 ms, the `sim` pair (a SimSo run and a
# punctual run) is repeated until punctual's runs add up to 2 ms, at most
# 30 times, and each side's median is taken over all of them (a run of
# 50-90 us is now and then slowed by half or more:
# bench/simso/scatter.py).
# LATE = continue lets late jobs run on instead (SimSo's abort_on_miss =
# False) with punctual's sim.edf_ties and sim.priority_ties = "ready",
# SimSo's tie rules.
# PUNCTUAL=BIN runs that binary instead of the release build of the tree,
# so that two builds go through the same script one after the other.
# Usage: bench/simso/compare.sh [ROUNDS] [SEEDS] [DURATION_S] [LATE]
#        (defaults 3, 20, 2, abort; ROUNDS 0 compares outcomes only)
set -euo pipefail
source "$(dirname "$0")/_setup.sh"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
"$VENV/bin/python" -c 'import simso; print("simso", simso.__version__)' 2>/dev/null || true
python3 bench/simso/compare.py "$WORK" "${PUNCTUAL:-$CARGO_TARGET_DIR/release/punctual}" "$VENV/bin/python" \
  --rounds "${1:-3}" --seeds "${2:-20}" --duration-s "${3:-2}" --late "${4:-abort}"
