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
# record was measured and puts it back (a reservation: the probe is run
# inside it). Printed: whether the top-ranked fix is right, the expected
# fix and where it ranked (rank), its predicted figure over the observed
# one (stolen fraction, p99, MTTF of the first advised profile), and the
# planted attributed time the top fix takes out (top ms).
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
# Needs root. About 2 minutes per setup at the default 20 s.
#
# usage: bench/advise.sh [SECONDS=20] [SETUPS="fifo-noisy disk-irq rt-throttle all"]
#   PUNCTUAL=path   the binary (default: target/release/punctual, built)
set -euo pipefail
SECS=${1:-20}; SETUPS=${2:-"fifo-noisy disk-irq rt-throttle all"}
cd "$(dirname "$0")/.."
if [ -z "${PUNCTUAL:-}" ]; then
  cargo build --release -q -p punctual
  PUNCTUAL=${CARGO_TARGET_DIR:-target}/release/punctual
fi
export PUNCTUAL SECS
OUT=$(mktemp -d)
export OUT
cat >"$OUT/judge.py" <<'PY'
# The rule of the header: which fixes are right for a setup, from the
# advise record. Prints the expected fix's id (`expected`), or the row.
import json, os, sys

def planted_time(f, rec):
    """Attributed ns of planted sources the fix takes out."""
    comms = [c for c in (os.environ.get("ADVISE_NOISY_COMM"), os.environ.get("ADVISE_RTBUSY_COMM")) if c]
    irq = os.environ.get("ADVISE_DISK_IRQ")
    irq_names = {i["irq"]: i["name"] for i in rec.get("platform", {}).get("irqs", [])}
    total = 0
    for t in f.get("takes_out") or []:
        k, n = t["kind"], t["name"]
        if k == "thread" and n.split("/")[0] in comms:
            total += t["total_ns"]
        elif k == "throttle" and os.environ.get("ADVISE_RTBUSY_COMM"):
            total += t["total_ns"]
        elif k == "irq" and irq and n in (irq, irq_names.get(irq)):
            total += t["total_ns"]
    return total

def for_planted(f):
    """A fix for one planted cause (the single-cause setups' rule)."""
    t = f["target"]
    comms = [c for c in (os.environ.get("ADVISE_NOISY_COMM"), os.environ.get("ADVISE_RTBUSY_COMM")) if c]
    irq = os.environ.get("ADVISE_DISK_IRQ")
    if f["kind"] == "rt-runtime" and os.environ.get("ADVISE_RTBUSY_COMM"):
        return True
    if f["kind"] == "irq-affinity" and irq and str(t.get("irq")) == irq:
        return True
    return f["kind"] in ("priority", "thread-affinity") and any(c in f["id"] for c in comms)

def right_set(setup, rec):
    """The ids that are right at the top; None when not judged."""
    fixes = rec.get("fixes") or []
    if setup == "disk-irq" and not os.environ.get("ADVISE_DISK_IRQ"):
        return None
    if setup == "all":
        most = max([planted_time(f, rec) for f in fixes] or [0])
        return [f["id"] for f in fixes if most > 0 and planted_time(f, rec) == most]
    return [f["id"] for f in fixes if for_planted(f)]

def expected(setup, rec):
    ok = set(right_set(setup, rec) or [])
    return next((f["id"] for f in rec.get("fixes") or [] if f["id"] in ok and f["runtime_applicable"]), "")

if __name__ == "__main__":
    setup, path = sys.argv[1], sys.argv[2]
    print(expected(setup, json.load(open(path))))
PY

printf '%-12s %-40s %-6s %8s %-40s %4s %10s %10s %10s %8s\n' setup top right? "top ms" "verified fix" rank "stolen p/o" "p99 p/o" "MTTF p/o" "left"
for s in $SETUPS; do
  set +e
  bench/advise-setups.sh "$s" --cpu 1 -- bash -c '
    set -u
    R=$OUT/$ADVISE_SETUP
    "$PUNCTUAL" check --cpus 1 --duration "${SECS}s" --cause --json "$R.json" >"$R.check.out" 2>&1 || exit 1
    "$PUNCTUAL" advise "$R.json" --json "$R.advise.json" >"$R.advise.out" 2>&1 || exit 1
    id=$(python3 "$OUT/judge.py" "$ADVISE_SETUP" "$R.advise.json")
    env | grep ^ADVISE_ > "$R.env"
    echo "$id" > "$R.expected"
    [ -n "$id" ] || exit 0
    "$PUNCTUAL" advise "$R.json" --top 1 --apply "$id" --verify --json "$R.verify.json" >"$R.verify.out" 2>&1
  '
  status=$?
  set -e
  left=$([ $status -eq 3 ] && echo CHANGED || echo none)
  python3 - "$s" "$OUT" "$left" <<'PY'
import json, os, sys
name, out, left = sys.argv[1:4]
sys.path.insert(0, out)
try:
    for l in open(f"{out}/{name}.env"):
        k, _, v = l.rstrip("\n").partition("=")
        os.environ[k] = v
except OSError:
    pass
import judge
def load(p):
    try:
        return json.load(open(p))
    except Exception:
        return None
a = load(f"{out}/{name}.advise.json") or {}
fixes = a.get("fixes") or []
try:
    want = open(f"{out}/{name}.expected").read().strip()
except OSError:
    want = ""
top = fixes[0]["id"] if fixes else "(no fix)"
ok = judge.right_set(name, a) if fixes else None
right = "n/j" if ok is None else ("yes" if top in ok else "no")
v = load(f"{out}/{name}.verify.json") or {}
f = next((f for f in v.get("fixes") or [] if f["id"] == want), None)
def r(p, o):
    return "%.2f" % (p / o) if p and o else "-"
cells = ["-", "-", "-"]
if f and f.get("observed"):
    p, o = f["predicted"], f["observed"]
    cells = [r(p.get("stolen_fraction"), o.get("stolen_fraction")), r(p["p99_ns"], o["p99_ns"]),
             r(p.get("mttf_s"), o.get("mttf_s"))]
rank = next((str(i + 1) for i, x in enumerate(fixes) if x["id"] == want), "-")
planted = "%.0f" % (judge.planted_time(fixes[0], a) / 1e6) if fixes else "-"
print("%-12s %-40s %-6s %8s %-40s %4s %10s %10s %10s %8s" % (name, top, right, planted, want or "(none offered)", rank, *cells, left))
PY
done
echo "records and outputs in $OUT"
