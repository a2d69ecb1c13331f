#!/usr/bin/env bash
# Re-forecasts the timer records that bench/validate-forecast.sh kept
# (KEEP=DIR) with the current binary and extra forecast options (e.g.
# --arrivals renewal), and prints the underruns predicted over each case's
# consumer time (from DIR/vN.json when the run kept it, else 30 s) beside
# the observed ones (from DIR/vN.json, or the run's printed output given
# as OUTPUT). The option value @noise stands for each case's own kept
# noise record (DIR/vN/noise-LOAD.json), so `--stalls @noise` gives the
# noise-S forecast `validate` prints after its `|`; cases without one
# are skipped.
#
# Usage: bench/forecast-rerun.sh DIR [OUTPUT|-] [FORECAST OPTIONS…]
set -euo pipefail
DIR=$1
OUTF=${2:--}
shift 2 || shift $#
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=${PUNCTUAL:-${CARGO_TARGET_DIR:-$ROOT/target}/release/punctual}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
i=0
for cfg in "2 1ms 0.5ms" "3 1ms 0.5ms" "2 2ms 25%" "4 1ms 0.9ms"; do
  set -- $cfg "$@"
  i=$((i + 1))
  for load in none injector; do
    f="$DIR/v$i/timer-$load.json"
    [ -f "$f" ] || continue
    nz="$DIR/v$i/noise-$load.json"
    extra=()
    for o in "${@:4}"; do
      if [ "$o" = "@noise" ]; then extra+=("$nz"); else extra+=("$o"); fi
    done
    if [[ " ${extra[*]-} " == *" $nz "* ]] && [ ! -f "$nz" ]; then continue; fi
    "$BIN" forecast "$f" --buffers "$1" --buffer-len "$2" --compute "$3" --no-verdicts \
      ${extra[@]+"${extra[@]}"} --json "$TMP/v$i-$load.json" >/dev/null 2>&1
    echo "$i $load $1 $2 $3"
  done
  set -- "${@:4}"
done >"$TMP/cases"
python3 - "$DIR" "$OUTF" "$TMP" <<'PY'
import json, os, re, sys
d, outf, tmp = sys.argv[1:4]
observed = {}
# The run's own JSON when kept, else its printed summary table.
for i in range(1, 5):
    p = os.path.join(d, f"v{i}.json")
    if os.path.exists(p):
        for c in json.load(open(p))["cases"]:
            observed[(i, c["load"])] = (c["observed_underruns"], c["consumer_seconds"])
if outf != "-" and os.path.exists(outf):
    i = 0
    for line in open(outf):
        if line.startswith("== n="):
            i += 1
        m = re.match(r"\s+(none|injector)\s+\d+\s+\S+\s+\S+\s+\S+\s+.*?(\d+)\s+\S+\s+\S+\s+(yes|NO|\(<10 obs\))$", line)
        if m and (i, m.group(1)) not in observed:
            observed[(i, m.group(1))] = (int(m.group(2)), 30.0)
print(f"{'n':>2} {'t':>4} {'c':>6} {'load':<9} {'obs':>6} {'pred':>8} {'ratio':>6} {'x2':>5}  arrivals")
for line in open(os.path.join(tmp, "cases")):
    i, load, n, t, c = line.split()
    j = json.load(open(os.path.join(tmp, f"v{i}-{load}.json")))
    m = j["series"][0]["mttf"]
    obs, secs = observed.get((int(i), load), (None, 30.0))
    pred = m["underrun_rate_per_s"] * secs
    ratio = obs / pred if obs is not None and pred > 0 else None
    x2 = "(<10)" if obs is None or obs < 10 else ("yes" if ratio and 0.5 <= ratio <= 2 else "NO")
    ren = m["queue"].get("renewal")
    how = "poisson" if not ren else "renewal g=" + "/".join(f"{g:.2f}" for g in ren["pair_correlation"][:4])
    nz = m["queue"]["stalls"].get("noise")
    if nz:
        how += f", S from {nz['series']} gaps"
    print(f"{n:>2} {t:>4} {c:>6} {load:<9} {obs if obs is not None else '-':>6} {pred:>8.1f} "
          f"{(f'{ratio:.2f}' if ratio is not None else '-'):>6} {x2:>5}  {how}")
PY
