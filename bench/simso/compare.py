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
agrees. Speed, ratios of job events (releases + completions) per CPU
second, rounds alternating the two tools, ratio of the medians per run,
then the minimum and median over the runs:
- `sim`: like for like, the same 2 s run on both sides, each timed around
  the same part of its simulation in the same process, on the same clock
  (CLOCK_PROCESS_CPUTIME_ID): SimSo around run_model() with
  time.process_time(), which activates the tasks' and processors'
  processes, runs the event loop and gathers its Results, and leaves out
  Model(cfg), which builds the tasks, processors and scheduler; punctual
  around the run of its built machine (the first events queued, the event
  loop and the outcome: punctual_sim::Prepared::run), leaving out building
  the machine from the parsed scenario (punctual_sim::prepare: checking it,
  the tasks', CPUs' and schedulers' state), the process start, the parse
  and the record. That is the "s of CPU" its summary prints.
- `+build`: the same, with punctual's building of the machine counted
  too (the "s with building the machine" of its summary) against the same
  SimSo time, which does not count its Model(cfg): the figure that hides
  nothing on punctual's side.
- `proc`: punctual as the whole process (start, parse and record writing
  included, from its rusage) over a 100x longer run, so that process
  start does not dominate, against the same SimSo run_model() time.
CPU time rather than wall time: on a shared machine a run of a few
milliseconds waits for a CPU, and for the disk when the record is synced,
as long as it computes, which says nothing about either simulator.

Repetitions: every run is a fresh process on both sides (no warm-up).
ROUNDS alternating rounds at least; where punctual's timed run is shorter
than SHORT_S (2 ms), the `sim` pair (one SimSo run, one punctual run, so
both sides equally) is repeated until punctual's runs add up to SHORT_S,
at most SHORT_MAX (30) times, and each side's median is taken over all of
them, as hyperfine repeats a short command: a run of 50-90 us is now and
then slowed by half or more (bench/simso/scatter.py). The `proc` runs,
100x longer, stay at ROUNDS. The last column of a row is the number of
`sim` pairs.

With --late continue, late jobs run on instead (SimSo's abort_on_miss =
False, punctual's default) and punctual orders equal EDF deadlines and
equal priorities as SimSo does (sim.edf_ties = "ready", sim.priority_ties
= "ready"); there a job can wait behind its own predecessor, and the tie
rule decides which of two equal deadlines or priorities runs.

Usage: compare.py WORKDIR PUNCTUAL_BIN SIMSO_PYTHON [--rounds R]
       [--seeds N] [--first-seed S] [--duration-s D]
       [--late abort|continue] [--policies edf,rm]
Exit status 1 when any outcome differs.
"""
import json
import math
import os
import random
import re
import statistics
import subprocess
import sys

HERE = sys.path[0]
sys.path.insert(0, HERE)
from gen_taskset import twenty_task, write  # noqa: E402

FIELDS = ("releases", "jobs", "deadline_misses", "aborted", "preemptions")
POLICIES = ("edf", "rm")


def punctual(binary, toml, duration=None, late="abort"):
    """CPU time (user + system, from the child's rusage) of the whole
    process, CPU time of the run alone and with building the machine (from
    its summary), and its per-task outcomes."""
    out = toml + ".out.json"
    cmd = [binary, "simulate", toml, "--json", out]
    cmd += (["--set", "sim.on_miss=abort"] if late == "abort"
            else ["--set", "sim.edf_ties=ready", "--set", "sim.priority_ties=ready"])
    if duration:
        cmd += ["--duration", duration]
    return run_simulate(cmd, out, "compare.py")


def run_simulate(cmd, out, who):
    """Runs `punctual simulate` (`cmd`, writing its record to `out`): the
    CPU time of the whole process (its rusage), that of the run alone and
    with building the machine (the "s of CPU" and "s with building the
    machine" of its summary), and the per-task outcomes. compare_mp.py runs
    it the same way."""
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                         text=True)
    text = p.stdout.read()
    _, status, ru = os.wait4(p.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"{who}: {' '.join(cmd)} failed")
    m = re.search(r"of wall time, ([0-9.]+) s of CPU, ([0-9.]+) s with building", text)
    if not m:
        sys.exit(f"{who}: no simulation CPU time in the summary of {' '.join(cmd)}")
    return (ru.ru_utime + ru.ru_stime, (float(m.group(1)), float(m.group(2))),
            json.load(open(out))["extra"]["sim"]["tasks"])


def simso(py, js, policy, late="abort"):
    cmd = [py, f"{HERE}/run_simso.py", js]
    if late == "abort":
        cmd.append("--abort")
    if policy == "rm":
        cmd.append("--rm")
    d = json.loads(subprocess.run(cmd, check=True, capture_output=True,
                                  text=True).stdout)
    return d["cpu_s"], d["tasks"]


# A timed run shorter than SHORT_S (punctual's runs of the sets with
# fewest jobs last 50-90 us) is repeated, on both sides alike, until
# punctual's timed runs of the set add up to SHORT_S, at most SHORT_MAX
# times each. A fresh process's run that short is now and then slowed by
# half or more (a timer interrupt, a cold cache or TLB entry): the median
# of three such runs could land on a slow one, and the minimum over 40
# sets reported that run's scatter rather than the simulator
# (bench/simso/scatter.py shows it for one set).
SHORT_S = 0.002
SHORT_MAX = 30


def short_rounds(p_sim):
    """Rounds a set's `sim` pair needs: enough that punctual's runs add up
    to SHORT_S at their median so far, at most SHORT_MAX."""
    if not p_sim:
        return 0
    m = statistics.median(p_sim)
    return min(SHORT_MAX, math.ceil(SHORT_S / max(m, 1e-9)))


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
    late, policies = "abort", POLICIES
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
        elif k == "--late":
            late = args.pop(0)
        elif k == "--policies":
            policies = tuple(args.pop(0).split(","))
        else:
            sys.exit(f"compare.py: unknown argument {k!r}")
    long = f"{duration_s * 100}s"
    how = ("aborted at the deadline" if late == "abort" else
           "run on, ties by readiness (sim.edf_ties and sim.priority_ties "
           "= \"ready\")")
    print(f"{seeds} sets x ({', '.join(p.upper() for p in policies)}), "
          f"{duration_s} s simulated, late jobs "
          f"{how}; totals SimSo/punctual; speed in CPU time, medians of "
          f"{rounds} alternating rounds (more for runs under "
          f"{SHORT_S * 1e3:g} ms, last column): sim = both runs alone over "
          f"{duration_s} s, +build = punctual's with building its machine, "
          f"proc = punctual's whole process over {long}")
    print(f"{'set':16} {'pol':3} {'jobs':>13} {'misses':>11} {'aborted':>11} "
          f"{'preempt':>13} same  {'sim':>7} {'+build':>7} {'proc':>7} {'n':>3}")
    all_same = True
    ratios = {p: [] for p in POLICIES}
    sim_ratios = {p: [] for p in POLICIES}
    build_ratios = {p: [] for p in POLICIES}
    for seed in range(first, first + seeds):
        n, u, tasks = draw(seed)
        for policy in policies:
            name = f"s{seed}-n{n}-u{u:.2f}"
            stem = f"{name}-{policy}"
            write(work, stem, tasks, duration_s,
                  f"{policy.upper()} {n} tasks, UUniFast U={u} seed {seed}",
                  policy)
            js, toml = f"{work}/{stem}.json", f"{work}/{stem}.toml"
            s_cpu, p_cpu, p_sim, p_build = [], [], [], []
            st = pt = None
            ev_long = 0
            r = 0
            while r < max(rounds, 1) or (rounds > 0 and r < short_rounds(p_sim)):
                sw, st = simso(py, js, policy, late)
                s_cpu.append(sw)
                _, (ps, pb), pt = punctual(binary, toml, late=late)
                p_sim.append(ps)
                p_build.append(pb)
                if r < rounds:
                    pw, _, lt = punctual(binary, toml, long, late)
                    p_cpu.append(pw)
                    ev_long = job_events(lt)
                r += 1
            diff = [(t, f, st[t][f], pt[t].get(f, 0)) for t in st
                    for f in FIELDS if st[t][f] != pt[t].get(f, 0)]
            same = not diff
            all_same &= same
            ratio = ""
            if rounds > 0:
                rs = job_events(st) / statistics.median(s_cpu)
                rl = ev_long / statistics.median(p_cpu)
                ratios[policy].append(rl / rs)
                rp = job_events(pt) / statistics.median(p_sim)
                sim_ratios[policy].append(rp / rs)
                rb = job_events(pt) / statistics.median(p_build)
                build_ratios[policy].append(rb / rs)
                ratio = (f"{rp / rs:,.0f}x {rb / rs:>7,.0f}x {rl / rs:>7,.0f}x "
                         f"{len(p_sim):>3}")
            tot = {f: (sum(st[t][f] for t in st), sum(pt[t].get(f, 0) for t in st))
                   for f in FIELDS}
            cols = " ".join(
                f"{'%d/%d' % tot[f]:>{13 if f in ('jobs', 'preemptions') else 11}}"
                for f in ("jobs", "deadline_misses", "aborted", "preemptions"))
            print(f"{name:16} {policy:3} {cols} {'yes' if same else 'NO ':4} "
                  f"{ratio:>27}", flush=True)
            for t, f, a, b in diff[:8]:
                print(f"    {t}.{f}: simso {a} punctual {b}")
    if rounds > 0:
        for what, rr in (("sim", sim_ratios), ("+build", build_ratios),
                         ("proc", ratios)):
            every = rr["edf"] + rr["rm"]
            for label, r in (("EDF", rr["edf"]), ("RM", rr["rm"]),
                             ("all", every)):
                if not r:
                    continue
                print(f"{label:3} speed vs SimSo (job events/s, {what:6}): "
                      f"minimum {min(r):,.0f}x, median "
                      f"{statistics.median(r):,.0f}x over {len(r)} runs")
    print("\nall outcomes identical:", "yes" if all_same else "NO")
    sys.exit(0 if all_same else 1)


if __name__ == "__main__":
    main()
