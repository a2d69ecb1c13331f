#!/usr/bin/env bash
# How much each built-in load raises wake-up latency (p99, max) and the
# stolen fraction on one CPU versus idle, on this machine.
#
# For each condition the timer probe (cyclictest-style, SCHED_FIFO 95, 1 ms
# period) and then the noise probe (busy polling thread) run for DURATION
# seconds on CPU, each under its own instance of the load. Conditions
# alternate within each round, ROUNDS rounds, medians printed.
# Uses the probes' `--load` when they have it, else runs `punctual load`
# alongside (same loads, same worker code).
#
#   bench/load-effect.sh
#   CPU=1 DURATION=10 ROUNDS=3 bench/load-effect.sh
#   LOADS="idle net disk:direct,irq-cpu=1 mem" bench/load-effect.sh
set -euo pipefail
cd "$(dirname "$0")/.."

ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-10}
CPU=${CPU:-1}
LOADS=${LOADS:-"idle net disk:direct,irq-cpu=$CPU mem timer"}

if [[ -z "${PUNCTUAL:-}" ]]; then
    cargo build --release -q -p punctual
    PUNCTUAL=${CARGO_TARGET_DIR:-target}/release/punctual
fi
tmp=$(mktemp -d)
lp=
trap 'rm -rf "$tmp"; [[ -n "$lp" ]] && kill -INT "$lp" 2>/dev/null || true' EXIT
has_load_flag=0
"$PUNCTUAL" timer --help | grep -q -- '--load' && has_load_flag=1

# probe SPEC OUT: runs probe (timer|noise) under SPEC ("idle" = none).
probe() {
    local what=$1 spec=$2 out=$3
    local args=(--cpus "$CPU" --duration "${DURATION}s" --json "$out")
    if [[ $spec == idle ]]; then
        "$PUNCTUAL" "$what" "${args[@]}" >/dev/null 2>&1
    elif (( has_load_flag )); then
        "$PUNCTUAL" "$what" "${args[@]}" --load "$spec" >/dev/null 2>&1
    else
        "$PUNCTUAL" load "$spec" --duration "$((DURATION + 5))s" >"$tmp/load.out" 2>"$tmp/load.err" &
        lp=$!
        for _ in $(seq 600); do grep -q 'worker pid' "$tmp/load.err" && break; sleep 0.1; done
        "$PUNCTUAL" "$what" "${args[@]}" >/dev/null 2>&1
        kill -INT "$lp" 2>/dev/null || true
        wait "$lp" || true
        lp=
    fi
}

: >"$tmp/rows"
for r in $(seq 1 "$ROUNDS"); do
    for spec in $LOADS; do
        probe timer "$spec" "$tmp/t.json"
        probe noise "$spec" "$tmp/n.json"
        python3 - "$spec" "$tmp/t.json" "$tmp/n.json" "$CPU" >>"$tmp/rows" <<'PY'
import json, sys
spec, tj, nj, cpu = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
t = json.load(open(tj)); n = json.load(open(nj))
lat = next(s for s in t["series"] if s["metric"] == "latency" and s.get("cpu") == cpu)
st = next(s for s in n["stolen"] if s["cpu"] == cpu)
print(spec, lat["percentiles"]["p99"], lat["max"], st["fraction"])
PY
        echo "round $r: $(tail -1 "$tmp/rows")" >&2
    done
done
python3 - "$tmp/rows" "$CPU" "$DURATION" "$ROUNDS" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
order = []
for r in rows:
    if r[0] not in order:
        order.append(r[0])
med = {}
for k in order:
    rs = [r for r in rows if r[0] == k]
    med[k] = tuple(statistics.median(float(r[i]) for r in rs) for i in (1, 2, 3))
base = med.get("idle")
print(f"CPU {sys.argv[2]}, {sys.argv[3]} s per probe, median of {sys.argv[4]} rounds")
print(f"{'load':<28} {'p99 latency':>12} {'max latency':>12} {'stolen':>9} {'p99 vs idle':>12} {'stolen vs idle':>15}")
for k in order:
    p99, mx, st = med[k]
    rel = f"x{p99 / base[0]:.2f}" if base else "-"
    srel = f"x{st / base[2]:.2f}" if base and base[2] > 0 else "-"
    print(f"{k:<28} {p99/1000:>10.1f}us {mx/1000:>10.1f}us {st*100:>8.2f}% {rel:>12} {srel:>15}")
PY
