#!/usr/bin/env bash
# Calibration of the MTTF forecast and its verdicts against the simulator
# as ground truth (docs/forecast.md §3.5).
#
# Usage: bench/calibration.sh [SEEDS] [SHORT] [LONG] [SHAPE]
#   SEEDS  short records per shape (default 100)
#   SHORT  length of each short record, a check's timer half (default 30s)
#   LONG   simulated time of the consumer run that gives the truth (default 2h)
#   SHAPE  only this shape (poisson, periodic, on/off, heavy, mixture, tick, long,
#          periodic-tight, or one of the held-out h-poisson …
#          h-periodic-tight), or `heldout`: the
#          held-out set, the same kinds with parameters and consumers of
#          their own
#
# For each interference shape: one long run of the consumer itself
# (3 × 1 ms buffers, 0.5 ms compute; for `long`, whose stalls outlast the
# probe's period, 2 × 3 ms and 1 ms; for periodic-tight, the periodic
# shape with tens of underruns per record, 3 × 1 ms and 0.8 ms; after an underrun it drops the jobs
# queued behind it and restarts at the next release, as validate's
# consumer does) gives the true underrun rate; SEEDS short runs of a 1 ms
# probe that skips the periods a stall swallows (as the live probe does)
# under the same noise are each forecast with the queue model; the
# probe's missed periods are counted as the live timer counts them.
# CAL_QUEUE=1: probe and consumer queue delayed jobs instead (the first
# harness); CAL_RENEWAL=1: renewal arrivals (--arrivals renewal);
# CAL_SHOW=1: each record's forecast and assumption lines;
# CAL_MIDP=1: Lancaster's mid-P interval on the count of underrun-sized
# events instead of Garwood's (measured, not adopted: docs/forecast.md §3.5);
# CAL_DISPERSION=1: a second table, the consumer's own underruns in the
# same seeds' records (their index of dispersion: is the count Poisson?)
# and the forecasts' spread across records against their intervals' width;
# CAL_BOOT_FROM=X (e.g. 1.05ms): the stall model's bootstrap redraws only
# the wake-ups from X up and holds the rest as recorded (a diagnostic: with X just
# above a periodic shape's burst length its bursts' own wake-ups are held,
# docs/forecast.md §3.5);
# CAL_STACK=1: the shapes' Poisson stalls at the interrupt level, where one
# that meets another stall waits and then takes its whole length, instead
# of overlapping it (a diagnostic of the truth: with SEEDS 0, how many true
# underruns hang on overlapping stalls; docs/forecast.md §3.3).
# CAL_SHOW=1 also prints each record's interval: its half-widths below
# and above the forecast, and its parts as relative standard deviations
# of the rate, the two counts' (1/k + 1/n_s) and the stall model's
# bootstrap (which replaces them where it runs; its replicates' median
# against the forecast, the wake-ups it held);
# CAL_SWEEP=1: the stall model's bootstrap holds a periodic source's
# phase sweep (the wake-ups its bursts of one length delay, as many as
# the period implies) as recorded and redraws the rest (measured, not
# the default: docs/forecast.md §3.5);
# CAL_SHOW=1 also prints, where the periodic phase model is used, its
# split of each record's stall model: the bursts' rate and lengths (and
# those longer than 1.1 × their median: unions of a burst and a stall
# that overlapped it), the rest's rate by length;
# CAL_REST=RATE,MEAN (e.g. 4,500us): the rest replaced by Poisson stalls
# of that rate and exponential mean; CAL_BURST_CAP=F (e.g. 1.1): the
# bursts' lengths above F × their median dropped, and with
# CAL_TAIL_TO_REST=1 handed to the rest as the part of each that outlasts
# the burst's median (diagnostics of where
# the tight shapes' high bias comes from, docs/forecast.md §3.3);
# CAL_UNIONS=1: the union model of §3.3, measured and not the default:
# the bursts keep their own cluster and hand the rest what lies beyond it,
# less the unions the chain makes, and the chain extends each burst by
# the rest stalls that overlap it (CAL_UNIONS=split or =chain: one part
# alone; with CAL_REST, the model on the shape's own rest); the rest is
# corrected at the left ends of its monotone pieces, the stall threshold
# and the bursts' edge, and CAL_RAW_ENDS=1 reads it without that
# correction.
# Prints a markdown table: coverage of the nominal 95%
# interval (with its own Wilson interval, and beside it the coverage the
# same interval on a count would reach if each record's own count of
# underruns were known: at a few underruns per record that is well
# above 95 %, docs/forecast.md §3.5), decided verdicts (targets at 0.1,
# 0.3, 3 and 10 × the true MTTF) and how many were wrong, the median and the mean of predicted ÷
# true rate, and how many records forecast fewer than one underrun in
# their own length (they saw no underrun-sized event: their point
# estimate is near zero, and a median of them says nothing of the model).
# Deterministic (fixed seeds). About 2.5 minutes on 2 cores after the build
# (the held-out set 1.5), most of it the two tight periodic shapes.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q -p punctual-analysis --example calibration
exec "${CARGO_TARGET_DIR:-target}"/release/examples/calibration "${1:-100}" "${2:-30s}" "${3:-2h}" ${4:+"$4"}
