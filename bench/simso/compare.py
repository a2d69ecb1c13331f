#!/usr/bin/env python3
"""SimSo vs punctual on a sweep of generated single-CPU task sets, under
EDF and rate monotonic (RM), outcomes and speed.

Sets: one per seed, 5 to 50 tasks (drawn), total utilization 0.5 to 1.2
(drawn), UUniFast, periods and execution times as in gen_taskset.py; each
set runs under EDF and under RM (priorities by period, ties to the job
ready first, as SimSo's RM_mono).

Convention: late jobs are aborted at their deadline, SimSo's default
(abort_on_miss) and punctual's sim.on_miss = "abort". Under it the two
simulators make the same decisions in overload too: with deadlines equal
to periods a job is dropped at the instant its successor is released, so
no job ever waits behind its own predecessor, the one case where
punctual's EDF tie rule differs from SimSo's (docs/scenario-format.md,
"EDF ties"). SimSo also aborts a job whose deadline is exactly the end of
the run; punctual's window is half-open and does not (run_simso.py leaves
those out).

Outcomes: per task releases, completed jobs, deadline misses, aborted
jobs and preemptions; a run is `same` when every figure of every task
agrees. Speed: job events (releases + completions) per second of wall
time, SimSo timed around run_model() alone and punctual as the whole
process (parsing and record writing included) over a 100x longer run, so
that process start does not dominate; rounds alternate the two tools and
the ratio of the medians is printed per run, with the minimum and median
over the runs.

Usage: compare.py WORKDIR PUNCTUAL_BIN SIMSO_PYTHON [--rounds R]
       [--seeds N] [--first-seed S] [--duration-s D]
Exit status 1 when any outcome differs.
"""
import json
import random
import statistics
import subprocess
import sys
import time

HERE = sys.path[0]
sys.path.insert(0, HERE)
from gen_taskset import twenty_task, write  # noqa: E402

FIELDS = ("releases", "jobs", "deadline_misses", "aborted", "preemptions")
POLICIES = ("edf", "rm")


def punctual(binary, toml, duration=None):
    out = toml + ".out.json"
    cmd = [binary, "simulate", toml, "--json", out, "--set", "sim.on_miss=abort"]
    if duration:
        cmd += ["--duration", duration]
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - t0
    return wall, json.load(open(out))["extra"]["sim"]["tasks"]


def simso(py, js, policy):
    cmd = [py, f"{HERE}/run_simso.py", js, "--abort"]
    if policy == "rm":
        cmd.append("--rm")
    d = json.loads(subprocess.run(cmd, check=True, capture_output=True,
                                  text=True).stdout)
    return d["wall_s"], d["tasks"]


def job_events(tasks):
    return sum(t["releases"] + t["jobs"] for t in tasks.values())


def draw(seed):
    """Task count and utilization of the set of `seed`, then its tasks."""
    rng = random.Random(seed)
    n = rng.randint(5, 50)
    u = round(rng.uniform(0.5, 1.2), 3)
    return n, u, twenty_task(seed, n, u)


def main():
    work, binary, py = sys.argv[1:4]
    rounds, seeds, first, duration_s = 3, 20, 1, 2
    args = sys.argv[4:]
    while args:
        k = args.pop(0)
        if k == "--rounds":
            rounds = int(args.pop(0))
        elif k == "--seeds":
            seeds = int(args.pop(0))
        elif k == "--first-seed":
            first = int(args.pop(0))
        elif k == "--duration-s":
            duration_s = int(args.pop(0))
        else:
            sys.exit(f"compare.py: unknown argument {k!r}")
    long = f"{duration_s * 100}s"
    print(f"{seeds} sets x (EDF, RM), {duration_s} s simulated, late jobs "
          f"aborted at the deadline; totals SimSo/punctual; speed: punctual "
          f"over {long}, medians of {rounds} alternating rounds")
    print(f"{'set':16} {'pol':3} {'jobs':>13} {'misses':>11} {'aborted':>11} "
          f"{'preempt':>13} same  {'ratio':>8}")
    all_same = True
    ratios = {p: [] for p in POLICIES}
    for seed in range(first, first + seeds):
        n, u, tasks = draw(seed)
        for policy in POLICIES:
            name = f"s{seed}-n{n}-u{u:.2f}"
            stem = f"{name}-{policy}"
            write(work, stem, tasks, duration_s,
                  f"{policy.upper()} {n} tasks, UUniFast U={u} seed {seed}",
                  policy)
            js, toml = f"{work}/{stem}.json", f"{work}/{stem}.toml"
            s_walls, p_walls = [], []
            st = pt = None
            ev_long = 0
            for r in range(max(rounds, 1)):
                sw, st = simso(py, js, policy)
                s_walls.append(sw)
                if r == 0:
                    _, pt = punctual(binary, toml)
                if rounds > 0:
                    pw, lt = punctual(binary, toml, long)
                    p_walls.append(pw)
                    ev_long = job_events(lt)
            diff = [(t, f, st[t][f], pt[t].get(f, 0)) for t in st
                    for f in FIELDS if st[t][f] != pt[t].get(f, 0)]
            same = not diff
            all_same &= same
            ratio = ""
            if rounds > 0:
                rs = job_events(st) / statistics.median(s_walls)
                rl = ev_long / statistics.median(p_walls)
                ratios[policy].append(rl / rs)
                ratio = f"{rl / rs:,.0f}x"
            tot = {f: (sum(st[t][f] for t in st), sum(pt[t].get(f, 0) for t in st))
                   for f in FIELDS}
            cols = " ".join(
                f"{'%d/%d' % tot[f]:>{13 if f in ('jobs', 'preemptions') else 11}}"
                for f in ("jobs", "deadline_misses", "aborted", "preemptions"))
            print(f"{name:16} {policy:3} {cols} {'yes' if same else 'NO ':4} "
                  f"{ratio:>8}", flush=True)
            for t, f, a, b in diff[:8]:
                print(f"    {t}.{f}: simso {a} punctual {b}")
    if rounds > 0:
        every = ratios["edf"] + ratios["rm"]
        for label, r in (("EDF", ratios["edf"]), ("RM", ratios["rm"]),
                         ("all", every)):
            print(f"{label:3} speed vs SimSo (job events/s): minimum "
                  f"{min(r):,.0f}x, median {statistics.median(r):,.0f}x "
                  f"over {len(r)} runs")
    print("\nall outcomes identical:", "yes" if all_same else "NO")
    sys.exit(0 if all_same else 1)


if __name__ == "__main__":
    main()
