#!/usr/bin/env python3
"""Runs one multiprocessor task set (JSON from gen_mp.py) in SimSo under
global EDF (simso.schedulers.EDF) or partitioned EDF
(simso.schedulers.P_EDF: first-fit, tasks largest utilization first) and
prints per-task releases, jobs, deadline misses, preemptions, migrations
and task migrations as JSON, with the wall and CPU time of run_model()
alone.

Conventions, matched by punctual's sim.multiprocessor (docs/scenario-format.md):
- late jobs run on (abort_on_miss=False), as punctual lets a late job
  finish; with --abort they are aborted at their deadline (SimSo's own
  default), against punctual's sim.on_miss = "abort", and a job SimSo
  aborts at exactly t = duration is left out, as in run_simso.py: in the
  half-open window its deadline is not yet reached;
- the window is [0, duration): SimSo also activates jobs at t = duration;
- preemptions are SimSo's preemption_inter_count (a job resumed on the CPU
  it left after another job ran there), migrations its migration_count (a
  job resumed on another CPU), task migrations its task_migrations (a job
  that starts on another CPU than its task last ran on). Global scheduling
  in punctual counts the same way, when the job resumes; partitioned
  scheduling runs on punctual's one-CPU engine, which counts a preemption
  when it happens, so a job still preempted when the window closes is
  added to SimSo's count there; under --abort, partitioned preemptions
  are counted when they happen from SimSo's job events, as run_simso.py
  counts them (a job preempted and then aborted never resumes).

SimSo's global EDF prints a line for every decision; that print is
silenced (it would otherwise dominate SimSo's time and the speed ratio).

Usage: run_simso_mp.py TASKSET.json global|partitioned [--abort]
"""
import json
import sys
import time

from simso.configuration import Configuration
from simso.core import Model
from simso.core.JobEvent import JobEvent
import simso.schedulers.EDF as simso_gedf

sys.path.insert(0, sys.path[0])
from run_simso import preemptions as preemptions_as_they_happen  # noqa: E402

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
    abort = "--abort" in sys.argv[3:]
    cfg = Configuration()
    cfg.duration = int(ts["duration_ms"] * cfg.cycles_per_ms)
    for i, t in enumerate(ts["tasks"]):
        cfg.add_task(name=t["name"], identifier=i + 1, period=t["period_ms"],
                     activation_date=0, wcet=t["wcet_us"] / 1000.0,
                     deadline=t["period_ms"], abort_on_miss=abort)
    for c in range(ts["cpus"]):
        cfg.add_processor(name=f"cpu{c}", identifier=c + 1)
    cfg.scheduler_info.clas = CLASSES[policy]
    cfg.check_all()
    model = Model(cfg)
    t0, c0 = time.perf_counter(), time.process_time()
    model.run_model()
    wall = time.perf_counter() - t0
    cpu = time.process_time() - c0
    out = {}
    for task in model.results.tasks.values():
        jobs = [j for j in task.jobs if j.activation_date < cfg.duration]
        done = [j for j in jobs if j.end_date is not None
                and j.end_date < cfg.duration and not j.aborted]
        # aborted at exactly t = duration: not yet late in [0, duration)
        at_end = [j for j in jobs if j.aborted and j.end_date >= cfg.duration]
        if policy == "partitioned" and abort:
            preempt = preemptions_as_they_happen(task.task, cfg.duration,
                                                 cfg.cycles_per_ms / 1000)
        else:
            preempt = sum(j.preemption_inter_count for j in jobs) + (
                preempted_at_end(task.task, cfg.duration)
                if policy == "partitioned" else 0)
        out[task.name] = {
            "releases": len(jobs),
            "jobs": len(done),
            "deadline_misses": sum(1 for j in jobs if j.exceeded_deadline or (
                (j.end_date is None or j.end_date >= cfg.duration)
                # a JobR's deadline is in cycles already, as the window is
                and j.absolute_deadline < cfg.duration)) - len(at_end),
            "aborted": sum(1 for j in jobs if j.aborted) - len(at_end),
            "preemptions": preempt,
            "migrations": sum(j.migration_count for j in jobs),
            "task_migrations": sum(1 for d, _ in task.task_migrations
                                   if d < cfg.duration),
        }
    print(json.dumps({"wall_s": wall, "cpu_s": cpu, "tasks": out}))


if __name__ == "__main__":
    main()
