//! The run of a plain task set, stepped job to job.
//!
//! Most scenarios of a schedulability study are one CPU of periodic tasks
//! and nothing else: no noise, no clock ticks, no timers, streams, locks
//! or reservations. Their run only ever meets three things, a release, the
//! running job's completion (the CPU's one wake-up) and, with late jobs
//! aborted, a deadline kept beside the release that follows it; the next
//! step is the earlier of the next release and that completion. This loop
//! takes them on the machine's own state, borrowed apart once (one CPU,
//! the tasks, the release queue, the logs), rather than through the
//! general loop's per-event dispatch, interrupt level and per-CPU
//! indexing, which it would pass through with nothing to do.
//!
//! What it decides and records is the general loop's, step for step: the
//! same scheduler calls in the same order (release, block, pick, ready
//! order), the same recorders and counters, the same sequence numbers for
//! ties, the same event and pick counts, so that every output is the same
//! bytes (`bench/sim-identity.sh`). Each step below names the function of
//! `engine.rs` it stands for; a change to one of those must be made here
//! too, which the byte comparison catches.

use std::sync::atomic::{AtomicBool, Ordering};

use punctual_units::Nanos;

use crate::engine::{Cpu, EvKind, Seg, Sim, SliceLogs, Task, TaskKind};
use crate::outcome::{keep_spike, Outcome, Spike, TimelineLog, TraceSlice};
use crate::queue::{key, key_time, EvQueue, NO_KEY};

impl Sim {
    /// Whether this machine is a plain task set, which [`Sim::run`] steps
    /// in [`Sim::run_plain`]: one CPU; only periodic tasks, without a stop,
    /// critical section or reservation; no clock ticks, timers, noise or
    /// streams; and with late jobs aborted, every deadline the period (so
    /// that each is kept beside the next release, [`Task::fused`]).
    pub(crate) fn is_plain(&self) -> bool {
        self.cpus.len() == 1
            && self.cpus[0].bh.is_empty()
            && self.cpus[0].sched.config().timeshare_reservation.is_none()
            && self.tick_ps.is_none()
            && self.timers.is_empty()
            && self.noises.is_empty()
            && self.streams.is_empty()
            && self.tasks.iter().all(|t| {
                t.kind == TaskKind::Periodic
                    && t.cpu == 0
                    && t.period.is_some()
                    && t.stop.is_none()
                    && t.critical.is_none()
                    && t.drains.is_empty()
                    && !t.stats.reserved
                    && (!self.abort_on_miss || t.fuse_deadline)
            })
    }

    /// [`Sim::run`] for a plain task set ([`Sim::is_plain`]).
    #[inline(never)]
    pub(crate) fn run_plain(mut self, stop: Option<&AtomicBool>) -> Outcome {
        self.initial_events();
        let interrupted;
        {
            let Sim {
                queue,
                cpus,
                tasks,
                timeline,
                trace,
                trace_cap,
                trace_dropped,
                spikes,
                spikes_dropped,
                warnings,
                seq,
                events,
                picks,
                wake,
                end_key,
                abort_on_miss,
                now,
                ..
            } = &mut self;
            let mut p = Plain {
                now: Nanos::ZERO,
                seq: *seq,
                events: *events,
                picks: *picks,
                wake: wake[0],
                end_key: *end_key,
                any_deferred: false,
                deadline_now: false,
                abort: *abort_on_miss,
                queue,
                cpu: &mut cpus[0],
                tasks,
                logs: (timeline, trace, *trace_cap, trace_dropped),
                spikes,
                spikes_dropped,
                warnings,
            };
            interrupted = p.run(stop);
            *now = p.now;
            *seq = p.seq;
            *events = p.events;
            *picks = p.picks;
            wake[0] = p.wake;
        }
        self.finish(interrupted)
    }
}

/// The machine's parts a plain run touches, borrowed apart.
struct Plain<'a> {
    now: Nanos,
    seq: u64,
    events: u64,
    picks: u64,
    /// The CPU's pending wake-up key ([`Sim::wake`]).
    wake: u128,
    end_key: u128,
    any_deferred: bool,
    deadline_now: bool,
    abort: bool,
    queue: &'a mut EvQueue<EvKind>,
    cpu: &'a mut Cpu,
    tasks: &'a mut [Task],
    /// The slice logs' parts ([`SliceLogs`]).
    logs: (
        &'a mut TimelineLog,
        &'a mut Option<Vec<TraceSlice>>,
        usize,
        &'a mut u64,
    ),
    spikes: &'a mut Vec<Spike>,
    spikes_dropped: &'a mut u64,
    warnings: &'a mut Vec<String>,
}

/// [`crate::engine`]'s `Advance`.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Advance {
    Idle,
    Again,
    Over,
}

impl Plain<'_> {
    /// The loop of [`Sim::run`]; true when `stop` ended it.
    #[inline(always)]
    fn run(&mut self, stop: Option<&AtomicBool>) -> bool {
        let stopped =
            |events: u64| events & 0xFFFF == 0 && stop.is_some_and(|s| s.load(Ordering::Relaxed));
        loop {
            let qk = self.queue.min_key();
            let wk = self.wake;
            let k = qk.min(wk);
            if k > self.end_key {
                break;
            }
            self.now = key_time(k);
            if wk < qk {
                self.events += 1;
                if stopped(self.events) {
                    return true;
                }
                self.wake = NO_KEY;
                self.cpu_update();
            } else {
                let ev = self.queue.take_min();
                self.events += 1;
                if stopped(self.events) {
                    return true;
                }
                let EvKind::Release { task, nominal } = ev else {
                    unreachable!("a plain task set queues only releases")
                };
                let i = task as usize;
                match self.tasks[i].fused.take() {
                    None => self.on_release_event(i, nominal),
                    Some((job, _)) => {
                        self.deadline_now = true;
                        self.on_release_event(i, nominal);
                        self.deadline_now = false;
                        self.events += 1;
                        if stopped(self.events) {
                            return true;
                        }
                        self.on_deadline(i, job);
                    }
                }
            }
            if self.any_deferred && !self.live_event_now() {
                self.flush_deferred();
            }
        }
        self.flush_deferred();
        false
    }

    /// [`Sim::on_release_event`] and [`Sim::release`].
    #[inline(always)]
    fn on_release_event(&mut self, i: usize, nominal: Nanos) {
        let t = &mut self.tasks[i];
        let next = nominal + t.period.expect("plain tasks are periodic");
        self.seq += 1;
        self.queue.push(
            key(next, self.seq),
            EvKind::Release {
                task: i as u32,
                nominal: next,
            },
        );
        // `queue_deadline`: every deadline is kept beside the release.
        if self.abort {
            self.seq += 1;
            t.fused = Some((nominal, self.seq));
        }
        t.stats.releases += 1;
        if t.active {
            t.hold(nominal);
            return;
        }
        self.begin_job(i, nominal);
        self.update_or_defer();
    }

    /// The end of [`Sim::release`] and [`Sim::on_deadline`]: releases due
    /// at the same instant are all seen before the CPU re-picks.
    #[inline(always)]
    fn update_or_defer(&mut self) {
        if self.live_event_now() {
            self.cpu.deferred = true;
            self.any_deferred = true;
        } else {
            self.cpu_update();
        }
    }

    /// [`Sim::on_deadline`] for a deadline kept beside the release.
    #[inline(always)]
    fn on_deadline(&mut self, i: usize, nominal: Nanos) {
        let now = self.now;
        let t = &mut self.tasks[i];
        if t.active && t.job_release == nominal {
            // With one segment, the job's last piece of work ends now.
            let finishing =
                self.cpu.running == Some(i) && t.seg + 1 == t.nseg && self.cpu.seg_end <= now;
            if finishing {
                return;
            }
            t.stats.dropped_at_deadline();
            if t.refill {
                t.backlog.clear();
            }
            t.active = false;
            let tid = t.tid;
            self.cpu.sched.on_block(now, tid);
            if !self.job_over(i) && self.cpu.running == Some(i) {
                self.cpu.seg_end = Nanos::MAX;
            }
        } else if let Some(pos) = t.backlog.iter().position(|&r| r == nominal) {
            t.backlog.remove(pos);
            t.stats.dropped_at_deadline();
            return;
        } else {
            return;
        }
        self.update_or_defer();
    }

    /// [`Sim::live_event_now`] (one CPU tracks no superseded wake-ups).
    #[inline(always)]
    fn live_event_now(&mut self) -> bool {
        let k = self.queue.min_key().min(self.wake);
        key_time(k.min(self.end_key)) == self.now || self.deadline_now
    }

    #[inline(always)]
    fn flush_deferred(&mut self) {
        if !self.any_deferred {
            return;
        }
        self.any_deferred = false;
        if self.cpu.deferred {
            self.cpu_update();
        }
    }

    /// [`Sim::begin_job`].
    #[inline(always)]
    fn begin_job(&mut self, i: usize, nominal: Nanos) {
        let now = self.now;
        let t = &mut self.tasks[i];
        t.start_job(nominal);
        if self.cpu.running == Some(i) {
            self.cpu.seg_end = t.seg_end_from(now);
        }
        let dl = t.job_deadline.filter(|_| t.edf);
        self.cpu.sched.on_release(now, t.tid, dl);
        self.cpu.need_pick = true;
    }

    /// [`Sim::job_over`]: the next queued job starts, or the task blocks.
    #[inline(always)]
    fn job_over(&mut self, i: usize) -> bool {
        let now = self.now;
        let t = &mut self.tasks[i];
        if let Some(next) = t.backlog.pop_front() {
            if t.ties_by_ready {
                let follows = self.cpu.sched.is_runnable(t.tid);
                self.begin_job(i, next);
                if follows {
                    let t = &self.tasks[i];
                    let (tid, dl) = (t.tid, t.job_deadline);
                    let sched = &mut self.cpu.sched;
                    let order = sched.take_ready_order();
                    sched.on_release_in_order(now, tid, dl, order);
                }
            } else {
                self.begin_job(i, next);
            }
            return true;
        }
        let tid = t.tid;
        self.cpu.sched.on_block(now, tid);
        self.cpu.need_pick = true;
        false
    }

    /// [`Sim::complete_job`].
    #[inline(always)]
    fn complete_job(&mut self, ti: usize) -> bool {
        let now = self.now;
        let t = &mut self.tasks[ti];
        t.stats.jobs += 1;
        t.stats.response.record(now - t.job_release);
        if t.job_deadline.is_some_and(|d| now > d) {
            t.stats.deadline_misses += 1;
            t.stats.latency.add_missed(1);
            if t.refill {
                t.backlog.clear();
            }
        }
        t.active = false;
        self.job_over(ti)
    }

    /// [`Sim::advance_task`] for a job of one compute segment.
    #[inline(always)]
    fn advance_task(&mut self, ti: usize) -> Advance {
        let t = &mut self.tasks[ti];
        if !t.active {
            return Advance::Idle;
        }
        match t.cur {
            Seg::Compute(r) if r.0 == u64::MAX => Advance::Idle,
            Seg::Compute(_) => {
                t.next_seg();
                if t.seg < t.nseg {
                    let now = self.now;
                    self.cpu.seg_end = self.tasks[ti].seg_end_from(now);
                } else if !self.complete_job(ti) {
                    self.cpu.seg_end = Nanos::MAX;
                    return Advance::Over;
                }
                Advance::Again
            }
            Seg::Lock(_) | Seg::Unlock(_) => unreachable!("a plain task holds no lock"),
        }
    }

    /// [`Sim::cpu_update`] with nothing at interrupt level: completions and
    /// picks at this instant, then the wake-up.
    fn cpu_update(&mut self) {
        let now = self.now;
        self.cpu.deferred = false;
        let mut guard = 1u32;
        loop {
            if let Some(ti) = self.cpu.running.filter(|_| self.cpu.seg_end <= now) {
                let advanced = self.advance_task(ti);
                if advanced != Advance::Idle {
                    if self.runaway(&mut guard) {
                        break;
                    }
                    if advanced == Advance::Again {
                        continue;
                    }
                }
            }
            if !(self.cpu.need_pick || self.cpu.until.is_some_and(|u| u <= now)) {
                break;
            }
            self.pick();
            if self.runaway(&mut guard) {
                break;
            }
        }
        self.arm();
    }

    /// [`Sim::runaway`].
    #[inline(always)]
    fn runaway(&mut self, guard: &mut u32) -> bool {
        *guard += 1;
        if *guard > 100_000 {
            let now = self.now;
            self.warnings.push(format!(
                "cpu 0: more than 100000 state changes at {now}; the scenario may have a zero-length loop"
            ));
            return true;
        }
        false
    }

    /// [`Sim::pick`]: no reservation closes a period and no task drains.
    #[inline(always)]
    fn pick(&mut self) {
        let now = self.now;
        self.picks += 1;
        let cpu = &mut *self.cpu;
        let tasks = &mut *self.tasks;
        cpu.need_pick = false;
        let d = cpu.sched.pick(now);
        let next = d.thread.map(|tid| cpu.thread_task[tid]);
        cpu.until = d.until.filter(|u| *u > now);
        let prev = cpu.running;
        let mut ended = None;
        if next != prev {
            if let Some(p) = prev {
                let pt = &mut tasks[p];
                if let Seg::Compute(r) = &mut pt.cur {
                    if cpu.seg_end != Nanos::MAX {
                        *r = cpu.seg_end.saturating_sub(now);
                    }
                }
                if pt.active && pt.started && cpu.sched.is_runnable(pt.tid) {
                    pt.stats.preemptions += 1;
                }
                ended = Some((p, cpu.slice_start));
            }
            cpu.running = next;
            cpu.seg_end = match next {
                Some(ti) => tasks[ti].seg_end_from(now),
                None => Nanos::MAX,
            };
            cpu.slice_start = now;
        }
        debug_assert!(!cpu.sched.has_closed_periods());
        if let Some((p, start)) = ended {
            self.emit_slice(p, start, now.saturating_sub(start));
        }
        if let Some(n) = next {
            if !self.tasks[n].started {
                self.job_started(n);
            }
        }
    }

    /// [`Sim::job_started`] for a periodic task.
    #[inline(always)]
    fn job_started(&mut self, ti: usize) {
        let now = self.now;
        let t = &mut self.tasks[ti];
        t.started = true;
        let lat = t.stats.started(&mut t.last_start, now, t.job_release);
        if lat > t.spike_threshold {
            let cpu = t.cpu as u32;
            keep_spike(self.spikes, self.spikes_dropped, || {
                (now, cpu, ti as u32, lat)
            });
        }
    }

    /// [`Sim::emit_slice`] of a task's slice.
    #[inline(always)]
    fn emit_slice(&mut self, ti: usize, start: Nanos, len: Nanos) {
        if len.is_zero() || (self.logs.1.is_none() && start >= self.logs.0.window) {
            return;
        }
        self.emit_slice_to_logs(ti, start, len);
    }

    #[inline(never)]
    fn emit_slice_to_logs(&mut self, ti: usize, start: Nanos, len: Nanos) {
        let n = &self.tasks[ti].stats.name;
        let logs = SliceLogs {
            timeline: self.logs.0,
            trace: self.logs.1,
            trace_cap: self.logs.2,
            trace_dropped: self.logs.3,
        };
        logs.push(0, n, "run", n, ti as u32 + 1, start, len);
    }

    /// [`Sim::arm`] on one CPU with nothing at interrupt level.
    #[inline(always)]
    fn arm(&mut self) {
        let now = self.now;
        let cpu = &*self.cpu;
        let seg_end = if cpu.seg_end > now {
            (cpu.seg_end != Nanos::MAX).then_some(cpu.seg_end)
        } else {
            cpu.running.and_then(|ti| match self.tasks[ti].cur {
                Seg::Compute(_) => Some(now),
                _ => None,
            })
        };
        let at = match (seg_end, cpu.until) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        let old = self.wake;
        if at == (old != NO_KEY).then(|| key_time(old)) {
            return;
        }
        self.wake = match at {
            Some(t) => {
                self.seq += 1;
                key(t, self.seq)
            }
            None => NO_KEY,
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::outcome::RunOptions;
    use crate::output::{summary, to_record, trace_json};
    use crate::rng::Rng;
    use crate::scenario::Scenario;

    /// A generated one-CPU set of periodic tasks, with what varies among
    /// the scenarios the plain loop takes: EDF or fixed priorities (some
    /// shared, so that equal priorities rotate by quantum), exact or drawn
    /// execution times, phases, refill, overload, and the options for late
    /// jobs and ties.
    fn scenario_text(seed: u64) -> String {
        let mut rng = Rng::new(seed, 0);
        let n = rng.range(1, 9);
        let edf = rng.range(0, 1) == 1;
        let mut s = String::from("[sim]\nduration = \"300ms\"\n");
        s += &format!(
            "quantum = \"{}us\"\n",
            [700, 3000, 2_000_000][rng.range(0, 2) as usize]
        );
        if rng.range(0, 1) == 1 {
            s += "on_miss = \"abort\"\n";
        }
        if rng.range(0, 2) == 0 {
            s += if edf {
                "edf_ties = \"ready\"\n"
            } else {
                "priority_ties = \"ready\"\n"
            };
        }
        s += "admission = false\n[clock]\nkind = \"oneshot\"\n";
        for i in 0..n {
            let period_us = [2000, 3000, 4000, 5000, 6000, 10_000][rng.range(0, 5) as usize];
            // A utilization of 1 on average over the sets, up to 2.
            let exec_us = rng.range(0, 2 * period_us / n);
            s += &format!(
                "[[task]]\nname = \"t{i}\"\nkind = \"periodic\"\nperiod = \"{period_us}us\"\n"
            );
            if edf {
                s += "class = \"edf\"\n";
            } else {
                s += &format!("priority = {}\n", 30 - period_us / 1000);
            }
            if rng.range(0, 2) == 0 {
                s += &format!(
                    "exec = {{ uniform = [\"{}us\", \"{exec_us}us\"] }}\n",
                    exec_us / 2
                );
            } else {
                s += &format!("exec = \"{exec_us}us\"\n");
            }
            if rng.range(0, 3) == 0 {
                s += &format!("phase = \"{}us\"\n", rng.range(0, period_us));
            }
            if rng.range(0, 4) == 0 {
                s += &format!("refill = true\ndeadline = \"{period_us}us\"\n");
            }
        }
        s
    }

    /// Everything a run puts out: the record, the trace and the summary;
    /// and its totals of misses, aborted jobs and preemptions.
    fn outputs(scn: &Scenario, plain: bool) -> (String, [u64; 3]) {
        let opts = RunOptions {
            trace_cap: Some(100_000),
            ..Default::default()
        };
        let mut sim = Sim::new(scn, &opts).expect("builds");
        assert!(sim.plain, "a plain task set");
        sim.plain = plain;
        let o = sim.run(None);
        let rec = serde_json::to_string(&to_record(scn, &o, &[])).expect("serialises");
        let totals = o.tasks.iter().fold([0; 3], |a, t| {
            [
                a[0] + t.deadline_misses,
                a[1] + t.aborted.unwrap_or(0),
                a[2] + t.preemptions,
            ]
        });
        let text = format!("{rec}\n{}\n{:?}", trace_json(&o), summary(&o));
        (text, totals)
    }

    #[test]
    fn the_plain_loop_puts_out_what_the_general_loop_does() {
        // Sets with misses, with aborted jobs, with preemptions.
        let mut seen = [0u32; 3];
        for seed in 1..=60 {
            let text = scenario_text(seed);
            let scn = Scenario::parse("gen.toml", &text, &[]).expect("parses");
            let (plain, totals) = outputs(&scn, true);
            assert_eq!(plain, outputs(&scn, false).0, "seed {seed}:\n{text}");
            for (s, t) in seen.iter_mut().zip(totals) {
                *s += (t > 0) as u32;
            }
        }
        assert!(
            seen.iter().all(|&n| n >= 5),
            "too few sets of each kind: {seen:?}"
        );
    }

    #[test]
    fn other_machines_take_the_general_loop() {
        for extra in [
            "[[noise]]\nname = \"n\"\nlevel = \"dpc\"\nkind = \"periodic\"\nperiod = \"1ms\"\nduration = \"10us\"\n",
            "[[task]]\nname = \"b\"\nkind = \"background\"\n",
        ] {
            let text = format!("{}{extra}", scenario_text(3));
            let scn = Scenario::parse("gen.toml", &text, &[]).expect("parses");
            let sim = Sim::new(&scn, &RunOptions::default()).expect("builds");
            assert!(!sim.plain, "{text}");
        }
    }
}
