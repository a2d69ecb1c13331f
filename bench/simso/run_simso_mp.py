#!/usr/bin/env python3
"""Runs one multiprocessor task set (JSON from gen_mp.py) in SimSo under
global EDF (simso.schedulers.EDF) or partitioned EDF
(simso.schedulers.P_EDF: first-fit, tasks largest utilization first) and
prints per-task releases, jobs, deadline misses, preemptions, migrations
and task migrations as JSON, with the wall time of run_model() alone.

Conventions, matched by punctual's sim.multiprocessor (docs/scenario-format.md):
- late jobs run on (abort_on_miss=False), as punctual lets a late job finish;
- the window is [0, duration): SimSo also activates jobs at t = duration;
- preemptions are SimSo's preemption_inter_count (a job resumed on the CPU
  it left after another job ran there), migrations its migration_count (a
  job resumed on another CPU), task migrations its task_migrations (a job
  that starts on another CPU than its task last ran on). Global scheduling
  in punctual counts the same way, when the job resumes; partitioned
  scheduling runs on punctual's one-CPU engine, which counts a preemption
  when it happens, so a job still preempted when the window closes is
  added to SimSo's count there.

SimSo's global EDF prints a line for every decision; that print is
silenced (it would otherwise dominate SimSo's time and the speed ratio).

Usage: run_simso_mp.py TASKSET.json global|partitioned
"""
import json
import sys
import time

from simso.configuration import Configuration
from simso.core import Model
from simso.core.JobEvent import JobEvent
import simso.schedulers.EDF as simso_gedf

simso_gedf.print = lambda *a, **k: None

CLASSES = {"global": "simso.schedulers.EDF",
           "partitioned": "simso.schedulers.P_EDF"}


def preempted_at_end(task, duration):
    """1 when the task's last job event in the window is a preemption: the
    job was waiting to resume when the window closed. Partitioned runs use
    punctual's one-CPU engine, which counts a preemption when it happens;
    SimSo counts it when the job resumes."""
    last = None
    for t, e in task.monitor:
        if t < duration and e.event in (JobEvent.EXECUTE, JobEvent.PREEMPTED,
                                         JobEvent.TERMINATED):
            last = e.event
    return int(last == JobEvent.PREEMPTED)


def main():
    ts = json.load(open(sys.argv[1]))
    policy = sys.argv[2]
    cfg = Configuration()
    cfg.duration = int(ts["duration_ms"] * cfg.cycles_per_ms)
    for i, t in enumerate(ts["tasks"]):
        cfg.add_task(name=t["name"], identifier=i + 1, period=t["period_ms"],
                     activation_date=0, wcet=t["wcet_us"] / 1000.0,
                     deadline=t["period_ms"], abort_on_miss=False)
    for c in range(ts["cpus"]):
        cfg.add_processor(name=f"cpu{c}", identifier=c + 1)
    cfg.scheduler_info.clas = CLASSES[policy]
    cfg.check_all()
    model = Model(cfg)
    t0 = time.perf_counter()
    model.run_model()
    wall = time.perf_counter() - t0
    out = {}
    for task in model.results.tasks.values():
        jobs = [j for j in task.jobs if j.activation_date < cfg.duration]
        done = [j for j in jobs if j.end_date is not None
                and j.end_date < cfg.duration]
        out[task.name] = {
            "releases": len(jobs),
            "jobs": len(done),
            "deadline_misses": sum(1 for j in jobs if j.exceeded_deadline or (
                (j.end_date is None or j.end_date >= cfg.duration)
                and j.absolute_deadline * cfg.cycles_per_ms < cfg.duration)),
            "preemptions": sum(j.preemption_inter_count for j in jobs)
            + (preempted_at_end(task.task, cfg.duration) if policy == "partitioned"
               else 0),
            "migrations": sum(j.migration_count for j in jobs),
            "task_migrations": sum(1 for d, _ in task.task_migrations
                                   if d < cfg.duration),
        }
    print(json.dumps({"wall_s": wall, "tasks": out}))


if __name__ == "__main__":
    main()
