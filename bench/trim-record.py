#!/usr/bin/env python3
"""Trims a measured record with cause attribution to a test fixture.

Keeps what `punctual advise` reads (latency and gap series with their
sparse histograms, the spike log with its causes, stolen time, the cause
summaries, platform, config) and drops what makes it large: HdrHistogram
copies, the interval series, the timelines, causes under 1% of their
spike, spikes past the largest 400 of each CPU and metric (counted in
`spikes_dropped`, as the probe counts what its log did not keep),
offender tables past 30 rows, and the verdict detail.

Usage: bench/trim-record.py IN.json OUT.json
"""
import json
import sys

src, dst = sys.argv[1], sys.argv[2]
r = json.load(open(src))
r["series"] = [s for s in r["series"] if s["metric"] != "interval"]
for s in r["series"]:
    s["hdr"] = ""
for st in r["stolen"]:
    st["timeline"] = {"bin_ns": st.get("timeline", {}).get("bin_ns", 0), "values_ns": []}
KEEP = 400
groups = {}
for sp in r["spikes"]:
    groups.setdefault((sp["cpu"], sp["metric"]), []).append(sp)
kept = []
for g in groups.values():
    g.sort(key=lambda sp: -sp["value_ns"])
    kept.extend(g[:KEEP])
    r["spikes_dropped"] += max(0, len(g) - KEEP)
kept.sort(key=lambda sp: sp["at_ns"])
r["spikes"] = kept
for sp in r["spikes"]:
    sp["causes"] = [c for c in sp["causes"] if c["total_ns"] * 100 >= sp["value_ns"]]
for key in ("cause", "cause_noise"):
    c = r["extra"].get(key)
    if c:
        c["overall"] = c["overall"][:30]
        for pc in c["per_cpu"]:
            pc["sources"] = pc["sources"][:30]
r["extra"].pop("verdicts", None)
with open(dst, "w") as f:
    json.dump(r, f, separators=(",", ":"))
    f.write("\n")
