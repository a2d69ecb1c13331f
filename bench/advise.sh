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
# --verify` on the expected fix (the first fix advise offers for the
# planted cause), which applies it, measures again as the record was
# measured and puts it back. Printed: whether the top-ranked fix is the
# expected one, and the expected fix's predicted figure over the observed
# one (stolen fraction, p99, MTTF of the first advised profile), and
# where the expected fix ranked (rank).
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

printf '%-12s %-40s %-6s %-40s %4s %10s %10s %10s %8s\n' setup top right? "verified fix" rank "stolen p/o" "p99 p/o" "MTTF p/o" "left"
for s in $SETUPS; do
  set +e
  bench/advise-setups.sh "$s" --cpu 1 -- bash -c '
    set -u
    R=$OUT/$ADVISE_SETUP
    "$PUNCTUAL" check --cpus 1 --duration "${SECS}s" --cause --json "$R.json" >"$R.check.out" 2>&1 || exit 1
    "$PUNCTUAL" advise "$R.json" --json "$R.advise.json" >"$R.advise.out" 2>&1 || exit 1
    id=$(python3 - "$R.advise.json" <<PY
import json, os, sys
fixes = json.load(open(sys.argv[1])).get("fixes") or []
want = [w for w in (os.environ.get("ADVISE_NOISY_COMM"), os.environ.get("ADVISE_RTBUSY_COMM")) if w]
irq = os.environ.get("ADVISE_DISK_IRQ")
def planted(f):
    t = f["target"]
    if f["kind"] == "rt-runtime" and os.environ.get("ADVISE_RTBUSY_COMM"):
        return True
    if f["kind"] == "irq-affinity" and irq and str(t.get("irq")) == irq:
        return True
    return f["kind"] in ("priority", "thread-affinity") and any(w in f["id"] for w in want)
ok = [f for f in fixes if planted(f) and f["runtime_applicable"]]
print(ok[0]["id"] if ok else "")
PY
)
    echo "$id" > "$R.expected"
    [ -n "$id" ] || exit 0
    "$PUNCTUAL" advise "$R.json" --top 1 --apply "$id" --verify --json "$R.verify.json" >"$R.verify.out" 2>&1
  '
  status=$?
  set -e
  left=$([ $status -eq 3 ] && echo CHANGED || echo none)
  python3 - "$s" "$OUT" "$left" <<'PY'
import json, sys
name, out, left = sys.argv[1:4]
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
right = "yes" if want and top == want else "no"
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
print("%-12s %-40s %-6s %-40s %4s %10s %10s %10s %8s" % (name, top, right, want or "(none offered)", rank, *cells, left))
PY
done
echo "records and outputs in $OUT"
