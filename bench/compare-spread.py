#!/usr/bin/env python3
"""The run-to-run spread of idle `timer` runs, as `punctual compare` sees it.

The bootstrap inside `compare` sees only what varies within a run; two
idle runs of one machine also drift between runs, and `--min-change` is
the margin that keeps that drift from reading as a change. This measures
the margin a machine needs from pairs of idle runs taken back to back
(the records `bench/compare-validate.sh` keeps: aI.json and bI.json idle,
nI.json, where present, with the noisy thread), so that the default, or
a user's own setting, comes from a measurement rather than a guess.

For each idle pair and quantile: the point ratio NEW / BASE, its interval,
and the smallest min-change under which that quantile would not count as
a change (the interval's bound nearest 1, as a percent; 0 when the
interval holds 1). A pair needs the largest of its quantiles. Then the
smallest min-change that makes at least 90% of the idle pairs "no
difference", and the one for 96.3% (what ">= 9 of 10 pairs" needs to
hold in 95% of batches of ten); compared again at each, how many idle
pairs are "no difference" and how many idle/noisy pairs are still
"regressed".
The margin is an upper bound: `compare` also ignores shifts within one
histogram bucket, which can only make more pairs "no difference".

usage: bench/compare-spread.py BIN DIR [DIR ...]
  BIN: the punctual binary; several DIRs pool their pairs.
  BLOCK_WINDOWS=N and NO_WINDOWS=1 as for bench/compare-validate.sh
  (NO_WINDOWS reads the aI.json.nowin copies that script writes).
  MARGINS="20 40" counts again at these --min-change settings too.
"""

import json
import math
import os
import subprocess
import sys
import tempfile

SHARE = 0.9
# The probability p that one idle pair is "no difference" for which
# P(>= 9 of 10) = p^10 + 10 p^9 (1 - p) reaches 95%.
RELIABLE = 0.9633


def fail(msg):
    print(msg, file=sys.stderr)
    sys.exit(2)


def records(d):
    """(label, base, other idle, noisy or None) for every idle pair in d."""
    suffix = ".nowin" if os.environ.get("NO_WINDOWS") else ""
    out = []
    i = 1
    while os.path.exists(os.path.join(d, f"a{i}.json")):
        a, b, n = (os.path.join(d, f"{k}{i}.json{suffix}") for k in "abn")
        if os.path.exists(a) and os.path.exists(b):
            label = f"{os.path.basename(os.path.normpath(d))}/{i}"
            out.append((label, a, b, n if os.path.exists(n) else None))
        i += 1
    return out


def compare(binary, base, new, min_change_pct=None):
    """(exit status, comparison JSON) of `punctual compare BASE NEW`."""
    how = []
    if os.environ.get("BLOCK_WINDOWS"):
        how = ["--block-windows", os.environ["BLOCK_WINDOWS"]]
    if min_change_pct is not None:
        how += ["--min-change", f"{min_change_pct}%"]
    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        p = subprocess.run(
            [binary, "compare", *how, base, new, "--json", f.name],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        if p.returncode == 2:
            fail(f"compare {base} {new}: {p.stderr.strip()}")
        return p.returncode, json.load(open(f.name))


def needed_pct(q):
    """Smallest min-change, in percent, under which q is not a change."""
    ci = q.get("ratio_ci")
    if not ci:
        return 0.0
    lo, hi = ci
    if lo > 1.0:
        return (lo - 1.0) * 100.0
    if hi < 1.0:
        return (1.0 / hi - 1.0) * 100.0
    return 0.0


def quantiles(c):
    return [(s["name"], q) for s in c["series"] for q in s["quantiles"]]


def main():
    if len(sys.argv) < 3:
        fail(__doc__.strip().split("\n\n")[-1])
    binary, dirs = sys.argv[1], sys.argv[2:]
    pairs = [t for d in dirs for t in records(d)]
    if not pairs:
        fail(f"no idle pairs of records (a1.json, b1.json, ...) in {' '.join(dirs)}")
    needs = []
    per_q = {}
    print("idle/idle run-to-run spread (ratio NEW/BASE, interval, min-change that makes it no difference):")
    for label, a, b, n in pairs:
        _, c = compare(binary, a, b)
        cells = []
        worst = 0.0
        for name, q in quantiles(c):
            need = needed_pct(q)
            worst = max(worst, need)
            per_q.setdefault(q["quantile"], []).append(need)
            ci = q.get("ratio_ci")
            ci_s = f"{ci[0]:.2f}-{ci[1]:.2f}x" if ci else "not estimated"
            cells.append(f"{q['quantile']} {q['ratio']:.2f}x ({ci_s}) {need:5.1f}%")
        needs.append(worst)
        print(f"  {label:<18} {'   '.join(cells)}   pair {worst:5.1f}%")
    k = math.ceil(SHARE * len(needs))
    for name, v in sorted(per_q.items()):
        print(
            f"{name} alone: {SHARE:.0%} of {len(v)} idle pairs need at most "
            f"{sorted(v)[k - 1]:.1f}% (largest {max(v):.1f}%)"
        )
    ranked = sorted(needs)
    margin = up(ranked[k - 1])
    print(
        f"smallest min-change for 'no difference' in >= {SHARE:.0%} of {len(needs)} "
        f"idle pairs: {margin:.1f}% ({k} of {len(needs)}; largest needed {ranked[-1]:.1f}%)"
    )
    # A margin that holds 90% of pairs gives >= 9 of 10 in only 74% of
    # batches of ten; >= 9 of 10 in 95% of batches needs a pair to be
    # "no difference" with probability RELIABLE or more.
    k_reliable = math.ceil(RELIABLE * len(needs))
    reliable = up(ranked[k_reliable - 1])
    print(
        f"smallest min-change for 'no difference' in >= {RELIABLE:.1%} of {len(needs)} "
        f"idle pairs (>= 9 of 10 in 95% of batches of ten): {reliable:.1f}% "
        f"({k_reliable} of {len(needs)}"
        + ("; too few pairs to say more than their largest" if k_reliable == len(needs) else "")
        + ")"
    )
    extra = {float(m.rstrip("%")) for m in os.environ.get("MARGINS", "").split()}
    for m in sorted({margin, reliable} | extra):
        recount(binary, pairs, m)


def up(pct):
    """pct rounded up to a tenth of a percent."""
    return math.ceil(pct * 10.0 - 1e-9) / 10.0


def recount(binary, pairs, margin):
    same = regressed = noisy = 0
    headroom = []
    for label, a, b, n in pairs:
        ab, c = compare(binary, a, b, margin)
        same += ab == 0 and c["answer"] == "no_difference"
        if n is None:
            continue
        noisy += 1
        an, c = compare(binary, a, n, margin)
        regressed += an == 1
        # The largest margin under which this noisy pair stays regressed
        # (from the quantiles regressed at this one).
        lows = [q["ratio_ci"][0] for _, q in quantiles(c) if q["answer"] == "regressed"]
        if an == 1:
            headroom.append((max(lows) - 1.0) * 100.0)
    print(
        f"at --min-change {margin:.1f}%: idle/idle no difference in {same} of {len(pairs)}"
        + (f", idle/noisy regressed in {regressed} of {noisy}" if noisy else "")
        + (
            f" (the least of them stays regressed up to --min-change {min(headroom):.0f}%)"
            if headroom
            else ""
        )
    )

if __name__ == "__main__":
    main()
