#!/usr/bin/env python3
"""SimSo vs punctual on the multiprocessor task sets of gen_mp.py, under
global EDF and partitioned EDF (first-fit, largest utilization first).

Outcomes: per task releases, jobs, deadline misses, aborted jobs,
preemptions, migrations and task migrations, under the conventions listed in run_simso_mp.py; a set
is `same` when every figure of every task agrees. Speed (with ROUNDS > 0),
as in compare.py: job events (releases + completions) per CPU second,
rounds alternating the two tools, the ratio of the medians per set and the
minimum and median over the sets, three ways: `sim`, both runs of the
same set timed alone in-process (SimSo around run_model() with
time.process_time(), its Model(cfg) left out; punctual around the run of
its built machine, the "s of CPU" of its summary, on the same clock),
`+build`, punctual's run with building its machine (its summary's "s with
building the machine") against the same SimSo time, and `proc`,
punctual's whole process (from its rusage) over a 100x longer run against
the same SimSo time.

With LATE = abort, late jobs are aborted at their deadline on both sides
(SimSo's default, punctual's sim.on_miss = "abort") and aborted jobs are
compared too.

Usage: compare_mp.py WORKDIR PUNCTUAL_BIN SIMSO_PYTHON [ROUNDS] [LATE]
Exit status 1 when any outcome differs.
"""
import glob
import json
import os
import statistics
import subprocess
import sys

HERE = sys.path[0]
from compare import run_simulate  # noqa: E402
FIELDS = ("releases", "jobs", "deadline_misses", "aborted", "preemptions",
          "migrations", "task_migrations")
LATE = "continue"
POLICIES = ("global", "partitioned")


def punctual(binary, toml, policy, duration=None):
    """CPU time of the whole process (its rusage), CPU time of the run
    alone and with building the machine (its summary), and per-task
    outcomes."""
    out = f"{toml}.{policy}.out.json"
    cmd = [binary, "simulate", toml, "--json", out,
           "--set", f"sim.multiprocessor={policy}"]
    if LATE == "abort":
        cmd += ["--set", "sim.on_miss=abort"]
    if duration:
        cmd += ["--duration", duration]
    return run_simulate(cmd, out, "compare_mp.py")


def simso(py, js, policy):
    cmd = [py, f"{HERE}/run_simso_mp.py", js, policy]
    if LATE == "abort":
        cmd.append("--abort")
    out = subprocess.run(cmd,
                         check=True, capture_output=True, text=True).stdout
    d = json.loads(out)
    return d["cpu_s"], d["tasks"]


def job_events(tasks):
    return sum(t["releases"] + t["jobs"] for t in tasks.values())


def main():
    work, binary, py = sys.argv[1:4]
    rounds = int(sys.argv[4]) if len(sys.argv) > 4 else 0
    global LATE
    LATE = sys.argv[5] if len(sys.argv) > 5 else "continue"
    if LATE not in ("continue", "abort"):
        sys.exit(f"compare_mp.py: LATE is continue or abort, not {LATE!r}")
    print(f"late jobs: {'aborted at the deadline' if LATE == 'abort' else 'run on'}")
    sets = sorted(p for p in glob.glob(f"{work}/mp*.json")
                  if not p.endswith(".out.json"))
    all_same = True
    ratios = {p: [] for p in POLICIES}
    sim_ratios = {p: [] for p in POLICIES}
    build_ratios = {p: [] for p in POLICIES}
    print(f"{'set':12} {'policy':11} {'cpus':>4} {'tasks':>5} "
          f"{'jobs':>7} {'misses':>6} {'abort':>5} {'preempt':>7} {'migr':>6} "
          f"{'task migr':>9}  same     sim  +build    proc")
    for js in sets:
        name = os.path.basename(js)[:-5]
        toml = js[:-5] + ".toml"
        meta = json.load(open(js))
        long = f"{meta['duration_ms'] * 100}ms"
        for policy in POLICIES:
            sw, st = simso(py, js, policy)
            _, _, pt = punctual(binary, toml, policy)
            diff = [(t, f, st[t][f], pt[t].get(f, 0)) for t in st for f in FIELDS
                    if st[t].get(f, 0) != pt[t].get(f, 0)]
            same = not diff
            all_same &= same
            ratio = ""
            if rounds > 0:
                s_cpu, p_cpu, p_sim, p_build = [], [], [], []
                ev_l = 0
                for _ in range(rounds):
                    c, _ = simso(py, js, policy)
                    s_cpu.append(c)
                    _, (c, b), _ = punctual(binary, toml, policy)
                    p_sim.append(c)
                    p_build.append(b)
                    c, _, lt = punctual(binary, toml, policy, long)
                    p_cpu.append(c)
                    ev_l = job_events(lt)
                rs = job_events(st) / statistics.median(s_cpu)
                rl = ev_l / statistics.median(p_cpu)
                rp = job_events(pt) / statistics.median(p_sim)
                ratios[policy].append(rl / rs)
                sim_ratios[policy].append(rp / rs)
                rb = job_events(pt) / statistics.median(p_build)
                build_ratios[policy].append(rb / rs)
                ratio = f"{rp / rs:>6,.0f}x {rb / rs:>6,.0f}x {rl / rs:>6,.0f}x"
            tot = {f: sum(t.get(f, 0) for t in st.values()) for f in FIELDS}
            print(f"{name:12} {policy:11} {meta['cpus']:>4} {len(st):>5} "
                  f"{tot['jobs']:>7} {tot['deadline_misses']:>6} {tot['aborted']:>5} "
                  f"{tot['preemptions']:>7} {tot['migrations']:>6} "
                  f"{tot['task_migrations']:>9}  {'yes' if same else 'NO '}  "
                  f"{ratio}")
            for t, f, a, b in diff[:8]:
                print(f"    {t}.{f}: simso {a} punctual {b}")
    if rounds > 0:
        for what, rr in (("sim", sim_ratios), ("+build", build_ratios),
                         ("proc", ratios)):
            for p in POLICIES:
                r = rr[p]
                print(f"{p} EDF speed vs SimSo (job events per CPU second, "
                      f"{what}, medians of {rounds} rounds): minimum "
                      f"{min(r):,.0f}x, median {statistics.median(r):,.0f}x "
                      f"over {len(r)} sets")
    print("\nall outcomes identical:", "yes" if all_same else "NO")
    sys.exit(0 if all_same else 1)


if __name__ == "__main__":
    main()
