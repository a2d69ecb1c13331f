#!/usr/bin/env python3
"""Runs one task set (JSON from gen_taskset.py) in SimSo under uniprocessor
EDF and prints per-task jobs, completions, deadline misses and preemptions
as JSON, with the wall and CPU time of the simulation alone (model
construction excluded).

Jobs are not aborted on a miss (abort_on_miss=False), as punctual lets a
late job finish by default; with --abort they are (SimSo's own default),
to compare with punctual's sim.on_miss = "abort". With --rm the scheduler
is SimSo's rate monotonic (RM_mono) instead of EDF (EDF_mono).

Usage: run_simso.py TASKSET.json [--abort] [--rm]
"""
import json
import sys
import time

from simso.configuration import Configuration
from simso.core import Model
from simso.core.JobEvent import JobEvent


def preemptions(task, duration, cycles_per_us):
    """Preemptions counted as punctual counts them: a job that ran is
    switched out while another job runs, before the window's end, counted
    when it happens. SimSo's own count (preemption_inter_count) differs in
    three ways this undoes:
    - it counts at the resume, so a job preempted and then aborted, or
      still waiting at the end of the window, counts nothing there;
    - a job preempted at the very instant it is aborted is dropped first in
      punctual, which decides once per instant: no preemption;
    - SimSo keeps remaining work in floating point, so a job can end a few
      nanoseconds early and the next job run for that sliver before a
      release at the exact instant preempts it. All the sets' times are
      whole microseconds, so a slice shorter than half a microsecond is
      such an artefact and does not count as having run.
    """
    runs, pending, n = {}, {}, 0
    for t, e in task.monitor:
        if t >= duration:
            continue
        j = e.job
        if e.event == JobEvent.EXECUTE:
            runs[j] = t
            if pending.get(j, t) < t:
                n += 1  # resumed after another job ran
            pending.pop(j, None)
        elif e.event == JobEvent.PREEMPTED:
            since = runs.pop(j, None)
            if since is not None and t - since >= cycles_per_us / 2:
                pending[j] = t
        elif e.event in (JobEvent.TERMINATED, JobEvent.ABORTED):
            runs.pop(j, None)
            if pending.pop(j, t) < t:
                n += 1  # aborted later, never resumed
    # still waiting to resume when the window closed
    return n + len(pending)


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
    cfg.scheduler_info.clas = ("simso.schedulers.RM_mono" if "--rm" in sys.argv[2:]
                               else "simso.schedulers.EDF_mono")
    cfg.check_all()
    model = Model(cfg)
    t0, c0 = time.perf_counter(), time.process_time()
    model.run_model()
    wall = time.perf_counter() - t0
    cpu = time.process_time() - c0
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
            # a job still running or queued at the end whose deadline has
            # passed is a miss too, as in punctual (a JobR's deadline is in
            # cycles already, as the window is)
            "deadline_misses": sum(1 for j in jobs if j.exceeded_deadline or (
                j.end_date is None and j.absolute_deadline < cfg.duration))
            - len(at_end),
            # SimSo's preemption_count also counts a job "preempted" and
            # resumed at the same instant when a release makes the
            # scheduler run but the running job keeps the CPU; the
            # preemption_inter_count variant counts only preemptions after
            # which another job executed, which is what punctual counts.
            "preemptions_raw": sum(j.preemption_count for j in jobs),
            "preemptions": preemptions(task.task, cfg.duration,
                                       cfg.cycles_per_ms / 1000),
            "preemptions_inter": sum(j.preemption_inter_count for j in jobs),
            "aborted": sum(1 for j in jobs if j.aborted) - len(at_end),
            "aborted_at_end": len(at_end),
        }
    print(json.dumps({"wall_s": wall, "cpu_s": cpu, "tasks": out}))


if __name__ == "__main__":
    main()
