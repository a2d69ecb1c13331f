# The rule of bench/advise.sh's header (which fixes are right for a
# setup, from the advise record) and its printout (a row per setup run,
# the totals of a run), in one file so that bench/advise-rejudge.sh reads
# kept runs with the same rule and prints them the same way. bench/advise.sh
# copies it into its output directory, so a kept directory carries the rule
# it was judged by.
#
#   judge.py SETUP ADVISE_JSON              the expected fix's id (or "")
#   judge.py row SETUP ROUND OUT LEFT       a run's row, appended to OUT/rows.jsonl
#   judge.py totals OUT                     the totals of OUT/rows.jsonl
#   judge.py rejudge SETUP ROUND KEPT NEW   a kept run's row again from NEW's
#                                           advise records (bench/advise-rejudge.sh)
import json, math, os, sys

FIGURES = ("stolen", "p99", "mttf")
ROW = "%-12s %5s %-36s %-6s %8s %-36s %4s %10s %10s %10s %-18s %5s %11s %8s"
HEADER = ROW % ("setup", "round", "top", "right?", "top ms", "verified fix", "rank",
                "stolen p/o", "p99 p/o", "MTTF p/o", "MTTF obs 95% CI", "in CI", "others ms", "left")


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


def load(p):
    try:
        return json.load(open(p))
    except Exception:
        return None


def read_env(out, run):
    """The setup's ADVISE_* variables as the run saw them."""
    try:
        for l in open(f"{out}/{run}.env"):
            k, _, v = l.rstrip("\n").partition("=")
            os.environ[k] = v
    except OSError:
        pass


def open_run(out, run):
    """Sets the run's ADVISE_* variables (read_env) and returns the id of
    the fix it expected ("" when it kept none)."""
    read_env(out, run)
    try:
        return open(f"{out}/{run}.expected").read().strip()
    except OSError:
        return ""


def ratio(p, o):
    return p / o if p and o else None


def secs(x):
    if x is None:
        return "inf"
    return "%.3gms" % (x * 1e3) if x < 1 else "%.3gs" % x


def others_ms(f, v):
    """Attributed time on the fix's CPU of the sources it does not take
    out: in the record (v, over the largest len(observed_sources)) and in
    the verified run (`observed_sources`)."""
    if not (f and f.get("observed_sources") is not None):
        return "-"
    gone = {(t["kind"], t["name"]) for t in f.get("takes_out") or []}
    cpu = f["cpu"]
    named = {}
    for sp in v.get("spikes") or []:
        for c in sp["causes"] if sp["cpu"] == cpu else []:
            named[(c["kind"], c["name"])] = named.get((c["kind"], c["name"]), 0) + c["total_ns"]
    for st in v.get("stolen") or []:
        for b in st["by_source"] if st["cpu"] == cpu else []:
            named[(b["kind"], b["name"])] = named.get((b["kind"], b["name"]), 0) + b["total_ns"]
    largest = sorted(named.items(), key=lambda kv: -kv[1])[:len(f["observed_sources"]) or 16]
    rec_ns = sum(t for k, t in largest if k not in gone)
    ver_ns = sum(o["total_ns"] for o in f["observed_sources"] if (o["kind"], o["name"]) not in gone)
    return "%.0f/%.0f" % (rec_ns / 1e6, ver_ns / 1e6)


def row(name, rnd, a, want, v, rep, left):
    """A run's printed lines and its rows.jsonl entry, from its advise
    record `a`, the verified fix's id `want`, the verify record `v` (the
    record with the verified fix's `predicted` and `observed`) and the
    A/A run's advise record `rep`."""
    fixes = a.get("fixes") or []
    top = fixes[0]["id"] if fixes else "(no fix)"
    ok = right_set(name, a) if fixes else None
    right = "n/j" if ok is None else ("yes" if top in ok else "no")
    f = next((f for f in v.get("fixes") or [] if f["id"] == want), None)
    ratios = {k: None for k in FIGURES}
    ci, in_ci = None, None
    if f and f.get("observed"):
        p, o = f["predicted"], f["observed"]
        ratios = {"stolen": ratio(p.get("stolen_fraction"), o.get("stolen_fraction")),
                  "p99": ratio(p["p99_ns"], o["p99_ns"]),
                  "mttf": ratio(p.get("mttf_s"), o.get("mttf_s"))}
        if o.get("ci_s") and p.get("mttf_s"):
            lo, hi = o["ci_s"]
            ci = [lo, hi]
            in_ci = lo <= p["mttf_s"] and (hi is None or p["mttf_s"] <= hi)
    cells = ["%.2f" % r if r is not None else "-" for r in ratios.values()]
    ci_cell = "%s-%s" % (secs(ci[0]), secs(ci[1])) if ci else "-"
    rank = next((str(i + 1) for i, x in enumerate(fixes) if x["id"] == want), "-")
    planted = "%.0f" % (planted_time(fixes[0], a) / 1e6) if fixes else "-"
    lines = [ROW % (name, rnd, top[:36], right, planted, (want or "(none offered)")[:36], rank, *cells,
                    ci_cell, "-" if in_ci is None else ("yes" if in_ci else "no"), others_ms(f, v), left)]
    aa, aa_in_ci = None, None
    if rep is not None and fixes:
        n1 = fixes[0]["now"]
        n2 = next((g["now"] for g in rep.get("fixes") or [] if g["cpu"] == fixes[0]["cpu"]), None)
        if n2:
            aa = {"stolen": ratio(n1.get("stolen_fraction"), n2.get("stolen_fraction")),
                  "p99": ratio(n1["p99_ns"], n2["p99_ns"]),
                  "mttf": ratio(n1.get("mttf_s"), n2.get("mttf_s"))}
            if n2.get("ci_s") and n1.get("mttf_s"):
                lo, hi = n2["ci_s"]
                aa_in_ci = lo <= n1["mttf_s"] and (hi is None or n1["mttf_s"] <= hi)
            lines.append("%-12s %5s A/A, nothing changed: now/again stolen %s, p99 %s, MTTF %s (in the again run's CI: %s)" % (
                name, rnd, *["%.2f" % r if r is not None else "-" for r in aa.values()],
                "-" if aa_in_ci is None else ("yes" if aa_in_ci else "no")))
    entry = {"setup": name, "round": int(rnd), "right": right, "ratios": ratios,
             "mttf_ci_s": ci, "in_ci": in_ci, "left": left, "aa": aa, "aa_in_ci": aa_in_ci}
    return lines, entry


def within_x2(rows, key, out):
    """Appends a line per figure of how many of the rows' ratios under
    `key` lie within x2; returns (within, of) over every figure."""
    k = n = 0
    for fig in FIGURES:
        rs = [r[key][fig] for r in rows if r[key][fig] is not None]
        w = sum(0.5 <= x <= 2 for x in rs)
        k, n = k + w, n + len(rs)
        out.append(f"  {fig:<8} within x2   {w} of {len(rs)}")
    return k, n


def totals(rows, title):
    judged = [r for r in rows if r["right"] in ("yes", "no")]
    out = [f"\n{title} ({len(rows)} setup runs, {len(judged)} judged):",
           f"  right first          {sum(r['right'] == 'yes' for r in judged)} of {len(judged)}"]
    k, n = within_x2(judged, "ratios", out)
    out.append(f"  overall within x2    {k} of {n}" + (f" ({100 * k / n:.0f} %; goal >= 80 %)" if n else ""))
    c = [r["in_ci"] for r in judged if r["in_ci"] is not None]
    out.append(f"  MTTF in verified CI  {sum(c)} of {len(c)}")
    out.append(f"  left changed         {sum(r['left'] != 'none' for r in rows)} of {len(rows)}")
    aa = [r for r in rows if r.get("aa")]
    if aa:
        out.append(f"A/A, nothing changed ({len(aa)} runs; the machine's own spread, judges nothing):")
        k, n = within_x2(aa, "aa", out)
        out.append(f"  overall within x2    {k} of {n}")
        c = [r["aa_in_ci"] for r in aa if r["aa_in_ci"] is not None]
        out.append(f"  MTTF in again's CI   {sum(c)} of {len(c)}")
    return "\n".join(out)


def rows_of(out):
    try:
        return [json.loads(l) for l in open(f"{out}/rows.jsonl")]
    except OSError:
        return []


def append_row(out, entry):
    with open(f"{out}/rows.jsonl", "a") as fh:
        fh.write(json.dumps(entry) + "\n")


def run_row(name, rnd, out, left):
    """bench/advise.sh's row for the run it just made."""
    run = f"{name}.{rnd}"
    want = open_run(out, run)
    lines, entry = row(name, rnd, load(f"{out}/{run}.advise.json") or {}, want,
                       load(f"{out}/{run}.verify.json") or {}, load(f"{out}/{run}.aa.advise.json"), left)
    print("\n".join(lines))
    append_row(out, entry)


def first_profile(fix):
    profs = (fix or {}).get("now", {}).get("profiles") or []
    return profs[0]["profile"] if profs else None


def observed_again(fix, again):
    """The verified run's figures as `--verify` reads them (the first
    advised profile's MTTF at the top), from `advise --profile` on the
    verified run's own record."""
    n = next((g["now"] for g in (again or {}).get("fixes") or [] if g["cpu"] == fix["cpu"]), None)
    if n is None:
        return None
    return dict(n)


def alike(a, b):
    """Equal, ratios to a relative 1e-9: a stationary solve reached another
    way rounds its last digits differently, and that is not a new figure."""
    if isinstance(a, float) and isinstance(b, float):
        return math.isclose(a, b, rel_tol=1e-9)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(alike(a[k], b[k]) for k in a)
    return a == b


def rejudge(name, rnd, kept, new):
    """A kept run read again: the advise record made afresh (NEW), the fix
    that was verified and what it measured (KEPT). The verified fix keeps
    its id; its prediction is the fresh one. The observed figures are read
    again from the verified run's own record when the run kept it
    (`--verified-json`), and are otherwise the ones the verifying binary
    read."""
    run = f"{name}.{rnd}"
    want = open_run(kept, run)
    a = load(f"{new}/{run}.advise.json") or {}
    v = load(f"{kept}/{run}.verify.json") or {}
    notes = []
    fresh = next((f for f in a.get("fixes") or [] if f["id"] == want), None)
    f = next((f for f in v.get("fixes") or [] if f["id"] == want), None)
    if f and fresh:
        for k in ("predicted", "takes_out", "now"):
            f[k] = fresh[k]
        again = load(f"{new}/{run}.verified.advise.json")
        if again is not None:
            o = observed_again(f, again)
            if o is None:
                notes.append("the verified run's record names no fix on its CPU: observed as the run read it")
            else:
                f["observed"] = o
        elif os.path.exists(f"{kept}/{run}.verified.json"):
            notes.append("the verified run's record could not be read again: observed as the run read it")
        else:
            notes.append("observed as the verifying binary read it (no verified record kept)")
        p_name = first_profile(fresh)
        o_name = (f.get("observed") or {}).get("profiles", [{}])[0].get("profile")
        if p_name and o_name and p_name != o_name:
            notes.append(f"first profile now '{p_name}', observed for '{o_name}': MTTF ratio across profiles")
    elif want and not fresh:
        notes.append(f"{want} is no longer offered: nothing to set beside what it measured")
    lines, entry = row(name, rnd, a, want, v if fresh else {}, load(f"{new}/{run}.aa.advise.json"),
                       next((r["left"] for r in rows_of(kept) if r["setup"] == name and r["round"] == int(rnd)), "none"))
    now_expects = expected(name, a)
    if want and now_expects != want:
        notes.append(f"the expected fix is now {now_expects or '(none)'}, not the verified one")
    as_run = next((r for r in rows_of(kept) if r["setup"] == name and r["round"] == int(rnd)), None)
    same = as_run is not None and all(alike(as_run.get(k), entry.get(k)) for k in ("right", "ratios", "in_ci", "aa", "aa_in_ci"))
    entry["as_run"] = same
    print("\n".join(lines))
    for n in notes:
        print(f"{'':18} note: {n}")
    if as_run is None:
        print(f"{'':18} as run: no row kept")
    elif not same:
        cells = ["%.2f" % as_run["ratios"][k] if as_run["ratios"][k] is not None else "-" for k in FIGURES]
        aa = as_run.get("aa") or {}
        print(f"{'':18} as run: right? {as_run['right']}, stolen/p99/MTTF p/o {' '.join(cells)}, in CI "
              f"{'-' if as_run['in_ci'] is None else ('yes' if as_run['in_ci'] else 'no')}"
              + (", A/A " + " ".join("%.2f" % aa[k] if aa.get(k) is not None else "-" for k in FIGURES) if aa else ""))
    append_row(new, entry)


if __name__ == "__main__":
    cmd = sys.argv[1] if len(sys.argv) > 1 else ""
    if cmd == "row":
        run_row(*sys.argv[2:6])
    elif cmd == "header":
        print(HEADER)
    elif cmd == "totals":
        print(totals(rows_of(sys.argv[2]), "totals of this run"))
    elif cmd == "rejudge":
        rejudge(*sys.argv[2:6])
    else:
        setup, path = sys.argv[1], sys.argv[2]
        print(expected(setup, json.load(open(path))))
