#!/usr/bin/env python3
"""Where a validation miss comes from: the model, or its inputs.

For each case kept by `KEEP=DIR bench/validate-forecast.sh`, forecasts the
underruns over the consumer's own time (from DIR/vN.json) four ways and
prints them beside the observed count:

  timer      L and S from the timer record (the default forecast)
  noise-S    L from the timer record, S from the noise phase's gaps
             (`--stalls`, docs/forecast.md §3.4; runs that kept one)
  cons-S     L from the timer record, S what the running consumer itself
             lost: each compute's excess over the median compute, as a gap
             histogram per second of compute
  cons-L+S   L the consumer's own wake-up lateness (after a sleep) and S
             as in cons-S: the queue model fed what the consumer met

cons-L+S tests the model alone: if it is within 2x where the others miss,
the miss is in the inputs (the timer or noise phase met a different
machine than the consumer phase, or measured a different thing), not in
the recursion. The consumer's inputs are only available after the fact,
so cons-* are diagnostics, never forecasts.

Runs that kept no DIR/vN.json take the observed counts from their printed
output, DIR.out (30 s of consumer per case).

Usage: PUNCTUAL=path/to/punctual bench/forecast-decompose.py DIR...
"""
import copy
import json
import os
import re
import subprocess
import sys
import tempfile

BIN = os.environ.get("PUNCTUAL") or os.path.join(
    os.environ.get("CARGO_TARGET_DIR", "target"), "release", "punctual")
CFG = {1: ("2", "1ms", "0.5ms"), 2: ("3", "1ms", "0.5ms"),
       3: ("2", "2ms", "25%"), 4: ("4", "1ms", "0.9ms")}


def consumer_gaps(cons, cpu):
    """A noise-like record of what the consumer lost while computing."""
    comp = next(s for s in cons["series"] if s["name"].endswith("consumer_compute"))
    med = comp["percentiles"]["p50"]
    bw = comp["histogram"]["bucket_ns"]
    gaps, running = {}, 0.0
    for lo, n in comp["histogram"]["buckets"]:
        running += (lo + bw / 2) * n
        ex = lo - med
        if ex >= 1000:
            k = int(ex // 1000) * 1000
            gaps[k] = gaps.get(k, 0) + n
    cnt = sum(gaps.values())
    total = sum((k + 500) * n for k, n in gaps.items())
    ks = sorted(gaps)
    s = {"name": f"cpu{cpu}.gap", "cpu": cpu, "metric": "gap", "unit": "ns",
         "count": cnt, "min": ks[0] if ks else 0, "mean": int(total / cnt) if cnt else 0,
         "max": ks[-1] + 999 if ks else 0,
         "percentiles": {"p50": 0, "p90": 0, "p99": 0, "p99.9": 0, "p99.99": 0},
         "missed": 0, "histogram": {"bucket_ns": 1000, "buckets": [[k, gaps[k]] for k in ks]}}
    return {"schema_version": 1, "tool_version": "0.1.0", "source": "measured",
            "kind": "noise", "started_at": "", "duration_ns": int(running),
            "interrupted": False, "platform": {}, "config": {},
            "series": [s],
            "stolen": [{"cpu": cpu, "observed_ns": int(running), "total_ns": int(total),
                        "fraction": total / running if running else 0.0,
                        "intervals": cnt, "max_ns": s["max"], "threshold_ns": 1000,
                        "timeline": {"bin_ns": 0, "values_ns": []}, "by_source": []}],
            "spikes": [], "spikes_dropped": 0, "periods": [], "periods_dropped": 0,
            "period_summary": [], "load": [], "warnings": []}


def rate(tmp, rec, cfg, *extra):
    out = os.path.join(tmp, "f.json")
    n, t, c = cfg
    r = subprocess.run([BIN, "forecast", rec, "--buffers", n, "--buffer-len", t,
                        "--compute", c, "--no-verdicts", *extra, "--json", out],
                       capture_output=True, text=True)
    if r.returncode != 0:
        return None
    return json.load(open(out))["series"][0]["mttf"]["underrun_rate_per_s"]


def fmt(obs, pred):
    if pred is None:
        return f"{'-':>8} {'':>6}"
    r = f"{obs / pred:.2f}" if pred > 0 else "-"
    return f"{pred:8.1f} {r:>6}"


print(f"{'run':<16} {'n':>2} {'t':>4} {'c':>6} {'load':<9} {'obs':>5} "
      f"{'timer':>8} {'ratio':>6} {'noise-S':>8} {'ratio':>6} {'cons-S':>8} {'ratio':>6} "
      f"{'cons-L+S':>8} {'ratio':>6}")
def cases(d, i):
    vj = os.path.join(d, f"v{i}.json")
    if os.path.exists(vj):
        return json.load(open(vj))["cases"]
    out, k, found = d.rstrip("/") + ".out", 0, []
    if not os.path.exists(out):
        return []
    for line in open(out):
        if line.startswith("== n="):
            k += 1
        m = re.match(r"\s+(none|injector)\s+\d+\s+\S+\s+\S+\s+\S+\s+.*?(\d+)\s+\S+\s+\S+\s+(yes|NO|\(<10 obs\))", line)
        if m and k == i:
            found.append({"load": m.group(1), "observed_underruns": int(m.group(2)),
                          "consumer_seconds": 30.0})
    return found


for d in sys.argv[1:]:
    for i in range(1, 5):
        for case in cases(d, i):
            load = case["load"]
            timer = os.path.join(d, f"v{i}", f"timer-{load}.json")
            consp = os.path.join(d, f"v{i}", f"consumer-{load}.json")
            noise = os.path.join(d, f"v{i}", f"noise-{load}.json")
            if not (os.path.exists(timer) and os.path.exists(consp)):
                continue
            secs, obs = case["consumer_seconds"], case["observed_underruns"]
            cpu = json.load(open(timer))["series"][0].get("cpu", 0) or 0
            with tempfile.TemporaryDirectory() as tmp:
                cons = json.load(open(consp))
                og = os.path.join(tmp, "gaps.json")
                json.dump(consumer_gaps(cons, cpu), open(og, "w"))
                cl = copy.deepcopy(cons)
                for s in cl["series"]:
                    s["cpu"] = cpu
                clp = os.path.join(tmp, "cons.json")
                json.dump(cl, open(clp, "w"))
                wake = next((s["name"] for s in cl["series"]
                             if s["name"].endswith("consumer_wakeup")), None)
                cfg = CFG[i]
                r0 = rate(tmp, timer, cfg)
                rn = rate(tmp, timer, cfg, "--stalls", noise) if os.path.exists(noise) else None
                rs = rate(tmp, timer, cfg, "--stalls", og)
                rb = rate(tmp, clp, cfg, "--series", wake, "--stalls", og) if wake else None
            p = [None if x is None else x * secs for x in (r0, rn, rs, rb)]
            print(f"{os.path.basename(d.rstrip('/')):<16} {cfg[0]:>2} {cfg[1]:>4} {cfg[2]:>6} {load:<9} {obs:>5} "
                  + " ".join(fmt(obs, x) for x in p))
