#!/usr/bin/env bash
# Judges the runs a `bench/advise.sh` run kept again, with another binary:
# a prediction is a function of the record alone, so the same measured
# pairs (record, verified run) can be read by a later model without
# measuring again. For each kept run it makes the advise record afresh
# from the kept `check --cause` record with $PUNCTUAL, judges it with the
# rule of bench/advise.sh's header (bench/advise-judge.py: right first, the
# expected fix), sets the fresh prediction of the fix that was verified
# beside what the verified run measured, and prints the row as
# bench/advise.sh prints it, then the totals, then the run's own totals.
#
# What is read again and what is not:
#   - the prediction, the ranking, `now` and the A/A run's `now`: afresh;
#   - the verified run's figures: a forecast too (its MTTF and interval
#     come from the same queue model), so they are read again from the
#     verified run's own record where the run kept it (`advise
#     --verified-json`, which bench/advise.sh passes); a run kept before
#     that keeps the figures the verifying binary read, and its row says so;
#   - the fix that was verified stays the one measured. Where the fresh
#     ranking expects another fix, the row says so: the verified pair then
#     says nothing about the fix the new binary would apply.
# A row that differs from the run's own (ratios beyond a relative 1e-9,
# the last digits a solve reached another way rounds differently) is
# followed by the run's figures
# (`as run:`); the last line counts the rows that came out as run. Read
# with the binary that made the run, every row comes out as run (the
# mode's own check).
#
# usage: bench/advise-rejudge.sh DIR [RUN...]
#   DIR             a directory bench/advise.sh kept ("records and outputs in DIR")
#   RUN             setup.round, e.g. fifo-noisy.2 (default: every run of DIR)
#   PUNCTUAL=path   the binary (default: target/release/punctual, built)
# The fresh records go to a new directory, printed at the end; DIR is not
# written. About 30 to 60 s of CPU per advise at 60 s records, two or three
# advise per run. No root needed, nothing on the machine changes.
set -euo pipefail
if [ $# -lt 1 ]; then
  sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//' >&2
  exit 2
fi
KEPT=$(cd "$1" 2>/dev/null && pwd) || { echo "advise-rejudge.sh: no directory '$1'" >&2; exit 2; }
shift
if [ ! -f "$KEPT/rows.jsonl" ]; then
  echo "advise-rejudge.sh: $KEPT holds no rows.jsonl, so it is not a directory bench/advise.sh kept" >&2
  exit 2
fi
cd "$(dirname "$0")/.."
if [ $# -gt 0 ]; then
  RUNS="$*"
else
  RUNS=$(python3 -c 'import json, sys; print(" ".join("%s.%d" % (r["setup"], r["round"]) for r in map(json.loads, open(sys.argv[1]))))' "$KEPT/rows.jsonl")
fi
for run in $RUNS; do
  if [ ! -f "$KEPT/$run.json" ]; then
    echo "advise-rejudge.sh: $KEPT has no run '$run' (no $run.json); its runs: $(cd "$KEPT" && ls *.expected | sed 's/\.expected$//' | tr '\n' ' ')" >&2
    exit 2
  fi
done
if [ -z "${PUNCTUAL:-}" ]; then
  cargo build --release -q -p punctual
  PUNCTUAL=${CARGO_TARGET_DIR:-target}/release/punctual
fi
NEW=$(mktemp -d)
JUDGE=bench/advise-judge.py
# The first advised profile of an advise record's top fix (what the A/A
# run and the verified run are read for).
first_profile() {
  python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["fixes"][0]["now"]["profiles"][0]["profile"])' "$1"
}
# The first advised profile of the fix ID in an advise record.
fix_profile() {
  python3 -c 'import json, sys; print(next((f["now"]["profiles"][0]["profile"] for f in json.load(open(sys.argv[1]))["fixes"] if f["id"] == sys.argv[2]), ""))' "$1" "$2"
}

echo "re-judging $KEPT with $PUNCTUAL ($("$PUNCTUAL" --version))"
python3 "$JUDGE" header
for run in $RUNS; do
  setup=${run%.*}; round=${run##*.}
  "$PUNCTUAL" advise "$KEPT/$run.json" --json "$NEW/$run.advise.json" >"$NEW/$run.advise.out" 2>&1 \
    || { echo "advise-rejudge.sh: advise failed on $KEPT/$run.json (see $NEW/$run.advise.out)" >&2; exit 1; }
  want=$(cat "$KEPT/$run.expected" 2>/dev/null || true)
  if [ -n "$want" ] && [ -f "$KEPT/$run.verified.json" ]; then
    prof=$(fix_profile "$NEW/$run.advise.json" "$want")
    if [ -n "$prof" ]; then
      "$PUNCTUAL" advise "$KEPT/$run.verified.json" --profile "$prof" --json "$NEW/$run.verified.advise.json" \
        >"$NEW/$run.verified.advise.out" 2>&1 || rm -f "$NEW/$run.verified.advise.json"
    fi
  fi
  if [ -f "$KEPT/$run.aa.json" ]; then
    "$PUNCTUAL" advise "$KEPT/$run.aa.json" --profile "$(first_profile "$NEW/$run.advise.json")" \
      --json "$NEW/$run.aa.advise.json" >"$NEW/$run.aa.advise.out" 2>&1 \
      || { echo "advise-rejudge.sh: advise failed on $KEPT/$run.aa.json (see $NEW/$run.aa.advise.out)" >&2; exit 1; }
  fi
  python3 "$JUDGE" rejudge "$setup" "$round" "$KEPT" "$NEW"
done
python3 - "$KEPT" "$NEW" "$RUNS" <<'PY'
import importlib.util, sys
spec = importlib.util.spec_from_file_location("judge", "bench/advise-judge.py")
judge = importlib.util.module_from_spec(spec)
spec.loader.exec_module(judge)
kept, new, runs = sys.argv[1], sys.argv[2], sys.argv[3].split()
fresh = judge.rows_of(new)
asked = {(r["setup"], r["round"]) for r in fresh}
print(judge.totals(fresh, "totals re-judged"))
print(judge.totals([r for r in judge.rows_of(kept) if (r["setup"], r["round"]) in asked], "totals as run"))
print(f"\nrows as run: {sum(r['as_run'] for r in fresh)} of {len(fresh)}")
PY
echo "fresh records in $NEW"
