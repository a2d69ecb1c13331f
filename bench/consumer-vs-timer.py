#!/usr/bin/env python3
"""What the real consumer paid beside what the timer record says.

For each case kept by `KEEP=DIR bench/validate-forecast.sh`, prints at a
few lengths x: the timer probe's P(latency > x); the consumer's own
P(wake-up lateness > x) (wake-ups after a sleep only); P(compute took more
than its median + x) (time stolen from the running consumer); and what the
queue model's stall term implies for the latter, c · λ·P(G > x), with
λ·P(G > x) = f_L(b + x) taken as the chord slope of the timer's exceedance
between b + x and b + 2x (b: its median); where the run kept a noise
record, the same from its gaps (λ = gaps per second of running time,
docs/forecast.md §3.4), which is what `--stalls` charges.

Usage: bench/consumer-vs-timer.py DIR
"""
import json
import os
import sys

CFG = {1: 0.5e6, 2: 0.5e6, 3: 0.5e6, 4: 0.9e6}  # c in ns, as the script runs them
XS = [100e3, 200e3, 500e3, 1e6]


def exceed(s, x):
    b = s["histogram"]["buckets"]
    return sum(c for lo, c in b if lo >= x) / max(s["count"], 1)


d = sys.argv[1]
print("x:", ", ".join(f"{x / 1e3:g} us" for x in XS))
for i in range(1, 5):
    for load in ("none", "injector"):
        tp = os.path.join(d, f"v{i}", f"timer-{load}.json")
        cp = os.path.join(d, f"v{i}", f"consumer-{load}.json")
        if not (os.path.exists(tp) and os.path.exists(cp)):
            continue
        t = json.load(open(tp))["series"][0]
        cs = json.load(open(cp))["series"]
        comp = next(s for s in cs if s["name"].endswith("consumer_compute"))
        wake = next((s for s in cs if s["name"].endswith("consumer_wakeup")), None)
        med = comp["percentiles"]["p50"]
        base = t["percentiles"]["p50"]
        c = CFG[i]
        row = lambda f: " ".join(f"{f(x):8.1e}" for x in XS)
        print(f"v{i} {load}")
        print(f"  timer    P(L > x)            {row(lambda x: exceed(t, x))}   n={t['count']}")
        if wake:
            print(f"  consumer P(wake-up late > x) {row(lambda x: exceed(wake, x))}   n={wake['count']}")
        print(f"  consumer P(compute > p50 + x) {row(lambda x: exceed(comp, med + x))}   n={comp['count']}")
        model = lambda x: min(1.0, c * (exceed(t, base + x) - exceed(t, base + 2 * x)) / x)
        print(f"  model    c·λ·P(G > x)         {row(model)}")
        npth = os.path.join(d, f"v{i}", f"noise-{load}.json")
        if os.path.exists(npth):
            nr = json.load(open(npth))
            g, st = nr["series"][0], nr["stolen"][0]
            lam = g["count"] / ((st["observed_ns"] - st["total_ns"]) / 1e9)
            ng = lambda x: min(1.0, c / 1e9 * lam * exceed(g, x))
            print(f"  noise    c·λ·P(gap > x)       {row(ng)}   gaps={g['count']} ({lam:.0f}/s)")
