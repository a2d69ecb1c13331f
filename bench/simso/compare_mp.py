#!/usr/bin/env python3
"""SimSo vs punctual on the multiprocessor task sets of gen_mp.py, under
global EDF and partitioned EDF (first-fit, largest utilization first).

Outcomes: per task releases, jobs, deadline misses, preemptions, migrations
and task migrations, under the conventions listed in run_simso_mp.py; a set
is `same` when every figure of every task agrees. Speed (with ROUNDS > 0):
job events (releases + completions) per second of wall time, SimSo timed
around run_model() alone and punctual as the whole process over a 100x
longer run, so that process start does not dominate; rounds alternate the
two tools, and the ratio of the medians is printed per set, with the
minimum and median over the sets.

Usage: compare_mp.py WORKDIR PUNCTUAL_BIN SIMSO_PYTHON [ROUNDS]
Exit status 1 when any outcome differs.
"""
import glob
import json
import os
import statistics
import subprocess
import sys
import time

HERE = sys.path[0]
FIELDS = ("releases", "jobs", "deadline_misses", "preemptions",
          "migrations", "task_migrations")
POLICIES = ("global", "partitioned")


def punctual(binary, toml, policy, duration=None):
    out = f"{toml}.{policy}.out.json"
    cmd = [binary, "simulate", toml, "--json", out,
           "--set", f"sim.multiprocessor={policy}"]
    if duration:
        cmd += ["--duration", duration]
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - t0
    return wall, json.load(open(out))["extra"]["sim"]["tasks"]


def simso(py, js, policy):
    out = subprocess.run([py, f"{HERE}/run_simso_mp.py", js, policy],
                         check=True, capture_output=True, text=True).stdout
    d = json.loads(out)
    return d["wall_s"], d["tasks"]


def job_events(tasks):
    return sum(t["releases"] + t["jobs"] for t in tasks.values())


def main():
    work, binary, py = sys.argv[1:4]
    rounds = int(sys.argv[4]) if len(sys.argv) > 4 else 0
    sets = sorted(p for p in glob.glob(f"{work}/mp*.json")
                  if not p.endswith(".out.json"))
    all_same = True
    ratios = {p: [] for p in POLICIES}
    print(f"{'set':12} {'policy':11} {'cpus':>4} {'tasks':>5} "
          f"{'jobs':>7} {'misses':>6} {'preempt':>7} {'migr':>6} "
          f"{'task migr':>9}  same   ratio")
    for js in sets:
        name = os.path.basename(js)[:-5]
        toml = js[:-5] + ".toml"
        meta = json.load(open(js))
        long = f"{meta['duration_ms'] * 100}ms"
        for policy in POLICIES:
            sw, st = simso(py, js, policy)
            pw, pt = punctual(binary, toml, policy)
            diff = [(t, f, st[t][f], pt[t][f]) for t in st for f in FIELDS
                    if st[t][f] != pt[t].get(f)]
            same = not diff
            all_same &= same
            ratio = ""
            if rounds > 0:
                s_walls, p_walls = [], []
                ev_l = 0
                for _ in range(rounds):
                    w, _ = simso(py, js, policy)
                    s_walls.append(w)
                    w, lt = punctual(binary, toml, policy, long)
                    p_walls.append(w)
                    ev_l = job_events(lt)
                rs = job_events(st) / statistics.median(s_walls)
                rl = ev_l / statistics.median(p_walls)
                ratios[policy].append(rl / rs)
                ratio = f"{rl / rs:,.0f}x"
            tot = {f: sum(t[f] for t in st.values()) for f in FIELDS}
            print(f"{name:12} {policy:11} {meta['cpus']:>4} {len(st):>5} "
                  f"{tot['jobs']:>7} {tot['deadline_misses']:>6} "
                  f"{tot['preemptions']:>7} {tot['migrations']:>6} "
                  f"{tot['task_migrations']:>9}  {'yes' if same else 'NO '}  "
                  f"{ratio}")
            for t, f, a, b in diff[:8]:
                print(f"    {t}.{f}: simso {a} punctual {b}")
    if rounds > 0:
        for p in POLICIES:
            r = ratios[p]
            print(f"{p} EDF speed vs SimSo (job events/s, medians of {rounds} "
                  f"rounds): minimum {min(r):,.0f}x, median "
                  f"{statistics.median(r):,.0f}x over {len(r)} sets")
    print("\nall outcomes identical:", "yes" if all_same else "NO")
    sys.exit(0 if all_same else 1)


if __name__ == "__main__":
    main()
