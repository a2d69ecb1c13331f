#!/usr/bin/env bash
# `punctual advise` against known problems set up on CPU 1 by
# bench/advise-setups.sh (which takes each down again and exits 3 naming
# anything left changed):
#   fifo-noisy   a SCHED_FIFO 99 thread (advise-noisy), 1 ms every 20 ms,
#                above the FIFO 95 probe: the fix is that thread, lowered
#                below the probe or moved;
#   disk-irq     the disk interrupt routed to CPU 1 under direct reads: the
#                fix is that interrupt (a kernel-managed one cannot be
#                routed, and the setup says so);
#   rt-throttle  a busy FIFO 1 thread (advise-rtbusy) under RT throttling:
#                the fix is kernel.sched_rt_runtime_us=-1, or that thread;
#   all          the three at once.
# For each: `check --cause` on CPU 1, `advise`, then `advise --apply ID
# --verify` on the expected fix, which applies it, measures again as the
# record was measured (the same duration) and puts it back (a reservation:
# the probe is run inside it). Printed per run: whether the top-ranked fix
# is right, the expected fix and where it ranked (rank), its predicted
# figure over the observed one (stolen fraction, p99, MTTF of the first
# advised profile), the verified MTTF's 95 % interval and whether it holds
# the prediction (in CI), and the planted attributed time the top fix
# takes out (top ms), and the attributed time on CPU 1 of the sources the
# verified fix does not take out, in the record and in the verified run
# (others ms: counted as `fixes[].observed_sources` counts it, over the
# largest 16 of the verified run, so a rise says the machine, or the fix's
# side effects, added time the prediction could not see). ROUNDS runs every setup that many times, one setup
# after another; at the end the totals of this run only: right first k/n
# over judged runs, and per figure and overall how many ratios lie within
# x2 (0.5 <= predicted/observed <= 2) and how many predicted MTTFs lie
# inside the verified interval.
#
# AA=1 adds, after the verified run and with nothing changed, a third
# run measured as the record was (`check` again, then `advise` on it for
# the first advised profile): its figures over the record's own `now`
# (A/A stolen, p99, MTTF) are what "within x2" gives when the prediction
# is exact and only the machine moves between two runs. Its totals are
# printed apart; it judges nothing.
#
# The spike log is sized to the run (MAX_SPIKES, default 50 per second:
# a tenth of the timer half's wake-ups, twice the share the FIFO 99
# thread delays): advise edits only logged spikes, and at 60 s the
# default 1000 kept only that thread's longest delays; the others stayed
# in the prediction (docs/advise.md). The verified run repeats the
# record's bound.
#
# Why the MTTF gets its interval beside the ratio: the MTTF of a 2 ms
# buffer rests on the few events of underrun size the verified run saw,
# so its 95 % interval spans one to two orders of magnitude at 20 s and
# "within x2" of its point estimate is nearly a coin toss. A longer run
# narrows it (the default here is 60 s, record and verify alike); "in CI"
# says whether the prediction is one the verified run cannot tell apart.
#
# What counts as right (fixed before any run of this rule; judge.py below):
#   planted sources: the threads advise-noisy and advise-rtbusy (by comm),
#     RT throttling (kind `throttle`) where rt-throttle is planted, and the
#     disk interrupt where the setup could route it (ADVISE_DISK_IRQ);
#   fifo-noisy, rt-throttle: the top fix is a fix for the planted cause
#     (the thread lowered or moved; RT throttling lifted), and the expected
#     fix is the first such fix that can be applied at run time;
#   disk-irq: the same (the interrupt routed) when the setup routed it;
#     when the kernel manages the disk IRQ it cannot be routed and there is
#     no fix to be right about: "not judged" (n/j), run and shown all the
#     same;
#   all: several planted causes, and a fix may take out more than one. The
#     right top fix is one predicted to take out the most planted cause:
#     the most attributed time of planted sources among the sources it
#     takes out (`fixes[].takes_out`); every fix that ties at that most is
#     right. The expected fix is the first of those that can be applied at
#     run time.
# The records stay in the directory printed at the end: each run's
# `check` record, advise record, verify record and the verified run's own
# record (`--verified-json`), with judge.py (bench/advise-judge.py, the
# rule and the printout the run used). bench/advise-rejudge.sh DIR judges
# them again with another binary, without measuring.
#
# Needs root. At the default 60 s a setup and round takes 2.5 to 3
# minutes, and 3.5 to 4.5 with AA=1 (from the file times of one AA=1 run
# of fifo-noisy, rt-throttle and all, three rounds: 2.4 to 3.2 minutes
# up to the verified run's end, 3.6 to 4.5 up to the A/A run's; `all`
# takes the longest).
#
# usage: bench/advise.sh [SECONDS=60] [SETUPS=every] [ROUNDS=1]
#   SETUPS          one or more of fifo-noisy disk-irq rt-throttle all
#                   (space separated), or every (the four)
#   PUNCTUAL=path   the binary (default: target/release/punctual, built)
#   MAX_SPIKES=N    each half's spike log (default 50 per second)
set -euo pipefail
SECS=${1:-60}; SETUPS=${2:-every}; ROUNDS=${3:-1}
[ "$SETUPS" = every ] && SETUPS="fifo-noisy disk-irq rt-throttle all"
for s in $SETUPS; do
  case "$s" in fifo-noisy|disk-irq|rt-throttle|all) ;; *)
    echo "advise.sh: unknown setup '$s'; the setups are fifo-noisy disk-irq rt-throttle all, or every" >&2; exit 2 ;;
  esac
done
if ! [[ "$SECS" =~ ^[0-9]+$ && "$SECS" -gt 0 && "$ROUNDS" =~ ^[0-9]+$ && "$ROUNDS" -gt 0 ]]; then
  echo "advise.sh: SECONDS and ROUNDS are whole numbers above 0 (got '$SECS' and '$ROUNDS')" >&2; exit 2
fi
MAX_SPIKES=${MAX_SPIKES:-$((SECS * 50))}
cd "$(dirname "$0")/.."
if [ -z "${PUNCTUAL:-}" ]; then
  cargo build --release -q -p punctual
  PUNCTUAL=${CARGO_TARGET_DIR:-target}/release/punctual
fi
export PUNCTUAL SECS MAX_SPIKES
OUT=$(mktemp -d)
export OUT
# The rule and the printout: bench/advise-judge.py, kept with the run.
cp bench/advise-judge.py "$OUT/judge.py"

python3 "$OUT/judge.py" header
for round in $(seq "$ROUNDS"); do
for s in $SETUPS; do
  export RUN="$s.$round"
  set +e
  bench/advise-setups.sh "$s" --cpu 1 -- bash -c '
    set -u
    R=$OUT/$RUN
    "$PUNCTUAL" check --cpus 1 --duration "${SECS}s" --max-spikes "$MAX_SPIKES" --cause --json "$R.json" >"$R.check.out" 2>&1 || exit 1
    "$PUNCTUAL" advise "$R.json" --json "$R.advise.json" >"$R.advise.out" 2>&1 || exit 1
    id=$(python3 "$OUT/judge.py" "$ADVISE_SETUP" "$R.advise.json")
    env | grep ^ADVISE_ > "$R.env"
    echo "$id" > "$R.expected"
    [ -n "$id" ] || exit 0
    "$PUNCTUAL" advise "$R.json" --top 1 --apply "$id" --verify --json "$R.verify.json" --verified-json "$R.verified.json" >"$R.verify.out" 2>&1 || exit 1
    [ -n "${AA:-}" ] || exit 0
    prof=$(python3 -c "import json, sys; print(json.load(open(sys.argv[1]))[\"fixes\"][0][\"now\"][\"profiles\"][0][\"profile\"])" "$R.advise.json")
    "$PUNCTUAL" check --cpus 1 --duration "${SECS}s" --max-spikes "$MAX_SPIKES" --cause --json "$R.aa.json" >"$R.aa.check.out" 2>&1 || exit 1
    "$PUNCTUAL" advise "$R.aa.json" --profile "$prof" --json "$R.aa.advise.json" >"$R.aa.advise.out" 2>&1 || exit 1
  '
  status=$?
  set -e
  left=$([ $status -eq 3 ] && echo CHANGED || echo none)
  python3 "$OUT/judge.py" row "$s" "$round" "$OUT" "$left"
done
done
python3 "$OUT/judge.py" totals "$OUT"
echo "records and outputs in $OUT"
