#!/usr/bin/env bash
# Rez vs Rez-FB for an *uninstrumented* command (a CPU-bound shell loop)
# under the disk load with its interrupt on the reserved CPU.
#
# The command cannot report what it received; punctual reads it from the
# kernel trace per period: charged = time a reserved thread was current,
# stolen = irq/softirq/vector/NMI time while it was, received = charged -
# stolen. Feedback feeds that to the shared controller and changes the
# command's runtime with sched_setattr. Enforcement is the kernel's (tick
# granular here: HZ=250, no HRTICK), so the budget is chosen well above the
# tick (20 ms / 100 ms by default) and the over-reservation sweep starts
# where tick overrun alone no longer makes plain miss.
#
# Per setting: missed periods (received < budget), mean received/reserved,
# stolen share of charged time, mean runtime asked (feedback), medians over
# ROUNDS runs; plain and feedback alternate within each round. Also the
# trace's charged total against the kernel's schedstat total (agreement of
# the two views) and the controller's cost.
#
# Usage: bench/reserve-command.sh [ROUNDS] [SECONDS_PER_RUN]
#   env: CPU=1  BUDGET=20ms  PERIOD=100ms  OVERS="0 5 10 15 20"
#        PUNCTUAL=path/to/punctual  OUT=dir (default: a temp dir)
# Needs root (SCHED_DEADLINE, cpusets, tracefs). Leaves nothing behind.
set -euo pipefail

ROUNDS=${1:-3}
SECS=${2:-10}
CPU=${CPU:-1}
BUDGET=${BUDGET:-20ms}
PERIOD=${PERIOD:-100ms}
OVERS=${OVERS:-"0 5 10 15 20"}
OUT=${OUT:-$(mktemp -d /tmp/reserve-command.XXXXXX)}
here=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$OUT"

if [ -z "${PUNCTUAL:-}" ]; then
    (cd "$here" && cargo build --release -q -p punctual)
    PUNCTUAL="${CARGO_TARGET_DIR:-$here/target}/release/punctual"
fi
command -v python3 >/dev/null || { apt-get install -y python3 >/dev/null; }
other=$(python3 -c "import os; print(','.join(str(c) for c in sorted(os.sched_getaffinity(0)) if c != $CPU))")
[ -n "$other" ] || { echo "needs a second CPU for the disk readers" >&2; exit 2; }

n_overs=$(wc -w <<<"$OVERS")
load_secs=$(( ROUNDS * n_overs * 2 * (SECS + 3) + 60 ))
echo "records in $OUT"
echo "starting load: disk:direct,irq-cpu=$CPU,cpus=$other for ${load_secs}s"
"$PUNCTUAL" load "disk:direct,size=64M,irq-cpu=$CPU,cpus=$other" --duration "${load_secs}s" \
    >"$OUT/load.log" 2>&1 &
load_pid=$!
trap 'kill -INT $load_pid 2>/dev/null || true' EXIT
sleep 3

run() { # mode over
    "$PUNCTUAL" reserve --budget "$BUDGET" --period "$PERIOD" --mode "$1" --gain 0.5 \
        --over-reserve "$2%" --cpu "$CPU" --duration "${SECS}s" \
        --json "$OUT/$1_$2_r$round.json" -- sh -c 'while :; do :; done' \
        >/dev/null 2>>"$OUT/errors.log" || echo "run $1 $2 failed" >&2
}
for round in $(seq 1 "$ROUNDS"); do
    for o in $OVERS; do
        if (( round % 2 )); then run plain "$o"; run feedback "$o"; else run feedback "$o"; run plain "$o"; fi
    done
done
kill -INT $load_pid 2>/dev/null || true
wait $load_pid 2>/dev/null || true
trap - EXIT

python3 - "$OUT" "$OVERS" <<'EOF'
import glob, json, os, statistics, sys
out, overs = sys.argv[1], [int(x) for x in sys.argv[2].split()]
rows = {}
agree, oh, src = [], [], set()
for f in glob.glob(os.path.join(out, "*_r*.json")):
    mode, over, _ = os.path.basename(f)[:-5].split("_")
    r = json.load(open(f))
    s = r["period_summary"][0]
    n = max(s["periods"], 1)
    x = r["extra"]
    src.add(x["received_source"])
    charged = x["charged_total_ns"]
    rows.setdefault((mode, int(over)), []).append((
        s["misses"] / n,
        s["received_total_ns"] / (s["reserved_ns"] * n),
        s["stolen_total_ns"] / max(charged, 1),
        x["requested_mean_ns"] / r["config"]["requested_ns"],
        x.get("misses", {}).get("short_charged", 0) / n,
        x.get("misses", {}).get("stolen", 0) / n,
    ))
    if x.get("schedstat_charged_total_ns"):
        agree.append(charged / x["schedstat_charged_total_ns"])
    if mode == "feedback":
        oh.append(x["controller"]["overhead_ratio_of_reserved"])
med = lambda v: statistics.median(v) if v else float("nan")
print(f"received from: {', '.join(sorted(src))}; runs per cell: {len(next(iter(rows.values())))}")
print("| over-reserve | plain missed | feedback missed | plain recv/res | feedback recv/res | stolen (plain) | feedback runtime / target |")
print("|---:|---:|---:|---:|---:|---:|---:|")
for o in overs:
    p, fb = rows.get(("plain", o), []), rows.get(("feedback", o), [])
    c = lambda v, i, pct: (f"{100*med([y[i] for y in v]):.1f}%" if pct else f"{med([y[i] for y in v]):.3f}") if v else "-"
    print(f"| {o:+d}% | {c(p,0,1)} | {c(fb,0,1)} | {c(p,1,0)} | {c(fb,1,0)} | {c(p,2,1)} | {c(fb,3,0)} |")
print()
print("missed periods by cause (medians): charged < budget by the kernel (tick-enforcement debt) / charged enough but robbed by interrupts")
print("| over-reserve | plain short-charged | plain robbed | feedback short-charged | feedback robbed |")
print("|---:|---:|---:|---:|---:|")
for o in overs:
    p, fb = rows.get(("plain", o), []), rows.get(("feedback", o), [])
    c = lambda v, i: f"{100*med([y[i] for y in v]):.1f}%" if v else "-"
    print(f"| {o:+d}% | {c(p,4)} | {c(p,5)} | {c(fb,4)} | {c(fb,5)} |")
print(f"trace charged / schedstat charged over a run: median {med(agree):.4f} (min {min(agree or [0]):.4f}, max {max(agree or [0]):.4f})")
print(f"controller cost (parent, off the reserved CPU; sched_setattr included): median {100*med(oh):.3f}% of the reserved CPU time")
EOF
if [ -s "$OUT/errors.log" ]; then echo "errors: see $OUT/errors.log" >&2; fi
