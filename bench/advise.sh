#!/usr/bin/env bash
# `punctual advise` against known problems set up on CPU 1:
#   fifo99  a SCHED_FIFO 99 thread on CPU 1, 1 ms bursts every 20 ms,
#           above the FIFO 95 probe: the fix is that thread (lowered or
#           moved); verified by measuring again with the load on CPU 0;
#   disk    direct reads with the disk interrupt routed to CPU 1
#           (`disk:direct,irq-cpu=1`): the fix is that interrupt; verified
#           with `irq-cpu=0`;
#   rtthrot a busy FIFO 95 loop (`noise --cause`, no rests) stopped by RT
#           throttling: the fix is kernel.sched_rt_runtime_us=-1; verified
#           by measuring again with it set (restored on every exit);
#   combo   fifo99 and disk together: the fix is the FIFO 99 thread.
# For each: check --cause (noise --cause for rtthrot), advise, and the
# same measurement with the expected fix made by hand (advise's --apply
# does not exist yet); then the top fix's kind, and the expected fix's
# predicted stolen fraction, p99 and MTTF (first advised profile) over
# what the second measurement gave.
# Needs root (SCHED_FIFO, tracefs). About 2 min per scenario on 2 CPUs.
#
# usage: bench/advise.sh [SECONDS=10] [SCENARIOS="fifo99 disk rtthrot combo"]
#   PUNCTUAL=path  binary that measures (default: target/release/punctual)
#   ADVISE=path    binary that advises (default: the same)
set -euo pipefail
SECS=${1:-10}; SCEN=${2:-"fifo99 disk rtthrot combo"}
cd "$(dirname "$0")/.."
PUNCTUAL=${PUNCTUAL:-${CARGO_TARGET_DIR:-target}/release/punctual}
ADVISE=${ADVISE:-$PUNCTUAL}
OUT=$(mktemp -d)
RT=$(cat /proc/sys/kernel/sched_rt_runtime_us)
trap 'echo "$RT" > /proc/sys/kernel/sched_rt_runtime_us' EXIT
FIFO="cpu:threads=1,policy=fifo,priority=99,cpus=1,duty=5%,period=20ms"
FIFO0="cpu:threads=1,policy=fifo,priority=99,cpus=0,duty=5%,period=20ms"

measure() { # name load-spec
  if [ "$1" = rtthrot ] || [ "$1" = rtthrot-fixed ]; then
    "$PUNCTUAL" noise --cpus 1 --duration "${SECS}s" --cause --json "$OUT/$1.json" >"$OUT/$1.out" 2>&1
  else
    "$PUNCTUAL" check --cpus 1 --duration "$((SECS * 2))s" --load "$2" --cause --json "$OUT/$1.json" >"$OUT/$1.out" 2>&1
  fi
}

printf '%-8s %-16s %-44s %-5s %-44s %12s %12s %12s\n' scenario expected top right? "judged fix" "stolen p/m" "p99 p/m" "MTTF p/m"
for s in $SCEN; do
  case $s in
    fifo99) load=$FIFO; fixed=$FIFO0; want="pl-cpu" ;;
    disk) load="disk:direct,irq-cpu=1"; fixed="disk:direct,irq-cpu=0"; want="irq-affinity" ;;
    rtthrot) load=""; fixed=""; want="rt-runtime" ;;
    combo) load="$FIFO+disk:direct,irq-cpu=1"; fixed="$FIFO0+disk:direct,irq-cpu=1"; want="pl-cpu" ;;
    *) echo "unknown scenario $s" >&2; exit 2 ;;
  esac
  measure "$s" "$load"
  "$ADVISE" advise "$OUT/$s.json" --json "$OUT/$s.advise.json" >"$OUT/$s.advise.out" 2>&1 || true
  if [ "$s" = rtthrot ]; then echo -1 > /proc/sys/kernel/sched_rt_runtime_us; fi
  measure "$s-fixed" "$fixed"
  echo "$RT" > /proc/sys/kernel/sched_rt_runtime_us
  first=$(python3 -c 'import json,sys
r=json.load(open(sys.argv[1])); f=r.get("fixes") or []
print(f[0]["now"]["profiles"][0]["profile"] if f and f[0]["now"]["profiles"] else "")' "$OUT/$s.advise.json" 2>/dev/null || true)
  if [ -n "$first" ]; then
    "$ADVISE" advise "$OUT/$s-fixed.json" --profile "$first" --json "$OUT/$s-fixed.advise.json" >/dev/null 2>&1 || true
  else
    "$ADVISE" advise "$OUT/$s-fixed.json" --json "$OUT/$s-fixed.advise.json" >/dev/null 2>&1 || true
  fi
  python3 - "$s" "$want" "$OUT/$s.advise.json" "$OUT/$s-fixed.advise.json" <<'PY'
import json, sys
name, want, adv, ver = sys.argv[1:5]
def load(p):
    try:
        return json.load(open(p))
    except Exception:
        return None
a = load(adv); v = load(ver)
fixes = (a or {}).get("fixes") or []
def hit(f):
    return want in f["kind"] or want in f["id"]
top = fixes[0]["id"] if fixes else "(no fix)"
right = "yes" if fixes and hit(fixes[0]) else "no"
judged = next((f for f in fixes if hit(f)), None)
def ratio(p, m):
    if p is None or m is None or m == 0:
        return "-"
    return "%.2f" % (p / m)
cells = ["-", "-", "-"]
if judged and v and v.get("fixes"):
    now = v["fixes"][0]["now"]
    pr = judged["predicted"]
    cells = [ratio(pr.get("stolen_fraction"), now.get("stolen_fraction")),
             ratio(pr["p99_ns"], now["p99_ns"]),
             ratio(pr.get("mttf_s"), now.get("mttf_s"))]
print("%-8s %-16s %-44s %-5s %-44s %12s %12s %12s" % (name, want, top, right,
      judged["id"] if judged else "(not offered)", *cells))
PY
done
echo "records and outputs in $OUT"
