#!/usr/bin/env python3
"""SimSo's default convention (a job unfinished at its deadline is aborted)
against punctual's sim.on_miss = "abort", on overloaded EDF task sets.

Sets: UUniFast, periods and execution times as in gen_taskset.py, N tasks
at total utilization U, one per seed. Per set it prints the totals over
its tasks of completed jobs, deadline misses, aborted jobs and
preemptions for both simulators, and how many tasks agree on all four.
SimSo also aborts the jobs whose deadline is exactly the end of the run;
punctual's window is half-open and does not count them (a deadline at the
end is not yet past), so they are left out of SimSo's figures and shown
apart.
Outcomes only: speed is compare.sh's business.

Usage: compare_abort.py WORKDIR PUNCTUAL_BIN SIMSO_PYTHON
"""
import json
import subprocess
import sys

HERE = sys.path[0]
sys.path.insert(0, HERE)
from gen_taskset import twenty_task, write  # noqa: E402

# (tasks, utilization, seeds): the overload sizes of issue 21.
SETS = [(8, 1.10, range(1, 6)), (12, 1.20, range(1, 6))]
DURATION_S = 2
KEYS = ("jobs", "deadline_misses", "aborted", "preemptions")


def punctual(binary, toml):
    subprocess.run([binary, "simulate", toml, "--set", "sim.on_miss=abort",
                    "--json", toml + ".out.json"], check=True,
                   stdout=subprocess.DEVNULL)
    return json.load(open(toml + ".out.json"))["extra"]["sim"]["tasks"]


def simso(py, js):
    out = subprocess.run([py, f"{HERE}/run_simso.py", js, "--abort"],
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out)["tasks"]


def main():
    work, binary, py = sys.argv[1:4]
    print(f"EDF, {DURATION_S} s simulated, late jobs aborted at the deadline;"
          " totals SimSo/punctual")
    print(f"{'set':16} {'jobs':>13} {'misses':>11} {'aborted':>11} "
          f"{'preempt':>13} tasks same  SimSo's aborts at t = end (left out)")
    all_same, total = 0, 0
    for n, u, seeds in SETS:
        for seed in seeds:
            name = f"n{n}-u{u:.2f}-s{seed}"
            write(work, name, twenty_task(seed, n, u), DURATION_S, name)
            s = simso(py, f"{work}/{name}.json")
            p = punctual(binary, f"{work}/{name}.toml")
            same = sum(all(s[t][k] == p[t][k] for k in KEYS) for t in s)
            all_same += same
            total += len(s)
            tot = {k: (sum(s[t][k] for t in s), sum(p[t][k] for t in s))
                   for k in KEYS}
            at_end = sum(s[t]["aborted_at_end"] for t in s)
            print(f"{name:16} " + " ".join(
                f"{'%d/%d' % tot[k]:>{13 if k in ('jobs', 'preemptions') else 11}}"
                for k in KEYS) + f" {same:>5}/{len(s):<2} {at_end:>6}")
    print(f"\ntasks with identical jobs, misses, aborted and preemptions: "
          f"{all_same}/{total}")
    sys.exit(0 if all_same == total else 1)


if __name__ == "__main__":
    main()
