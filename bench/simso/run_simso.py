#!/usr/bin/env python3
"""Runs one task set (JSON from gen_taskset.py) in SimSo under uniprocessor
EDF and prints per-task jobs, completions, deadline misses and preemptions
as JSON, with the wall time of the simulation alone (model construction
excluded, as punctual's own figure excludes parsing).

Jobs are not aborted on a miss (abort_on_miss=False), as punctual lets a
late job finish by default; with --abort they are (SimSo's own default),
to compare with punctual's sim.on_miss = "abort".

Usage: run_simso.py TASKSET.json [--abort]
"""
import json
import sys
import time

from simso.configuration import Configuration
from simso.core import Model


def main():
    ts = json.load(open(sys.argv[1]))
    abort = "--abort" in sys.argv[2:]
    cfg = Configuration()
    cfg.duration = int(ts["duration_ms"] * cfg.cycles_per_ms)
    for i, t in enumerate(ts["tasks"]):
        cfg.add_task(name=t["name"], identifier=i + 1, period=t["period_ms"],
                     activation_date=0, wcet=t["wcet_us"] / 1000.0,
                     deadline=t["period_ms"], abort_on_miss=abort)
    cfg.add_processor(name="cpu0", identifier=1)
    cfg.scheduler_info.clas = "simso.schedulers.EDF_mono"
    cfg.check_all()
    model = Model(cfg)
    t0 = time.perf_counter()
    model.run_model()
    wall = time.perf_counter() - t0
    out = {}
    for task in model.results.tasks.values():
        # SimSo also activates jobs at exactly t = duration; punctual's
        # window is half-open, [0, duration).
        jobs = [j for j in task.jobs
                if j.activation_date < cfg.duration]
        done = [j for j in jobs if j.end_date is not None and not j.aborted]
        # SimSo aborts a job whose deadline is exactly t = duration; in
        # punctual's half-open window that deadline is not yet reached.
        at_end = [j for j in jobs if j.aborted and j.end_date >= cfg.duration]
        out[task.name] = {
            "releases": len(jobs),
            "jobs": len(done),
            # a job still running at the end whose deadline has passed is
            # a miss too, as in punctual
            "deadline_misses": sum(1 for j in jobs if j.exceeded_deadline or (
                j.end_date is None and j.absolute_deadline * cfg.cycles_per_ms
                < cfg.duration)) - len(at_end),
            # SimSo's preemption_count also counts a job "preempted" and
            # resumed at the same instant when a release makes the
            # scheduler run but the running job keeps the CPU; the
            # preemption_inter_count variant counts only preemptions after
            # which another job executed, which is what punctual counts.
            "preemptions_raw": sum(j.preemption_count for j in jobs),
            "preemptions": sum(j.preemption_inter_count for j in jobs),
            "aborted": sum(1 for j in jobs if j.aborted) - len(at_end),
            "aborted_at_end": len(at_end),
        }
    print(json.dumps({"wall_s": wall, "tasks": out}))


if __name__ == "__main__":
    main()
