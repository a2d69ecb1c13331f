//! The event loop and the machine model.
//!
//! Time only moves by popping the event queue, keyed by (time, sequence)
//! so that events at the same instant run in the order they were made.
//! Each CPU is a small state machine with three levels, highest first:
//! a bus stall or hypervisor steal (nothing runs, not even the clock
//! interrupt), bottom-half work (interrupts and DPCs, FIFO, Jones & Regehr's NT study §2:
//! "all queued DPCs are executed … just prior to starting the selected
//! thread"), and the thread the scheduler core picked. Whenever the state of
//! a CPU may change, [`Sim::cpu_update`] accounts progress since the last
//! change, completes what finished, asks the scheduler, and arms one wake
//! event for the next change.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use punctual_sched::{LockId, PeriodStat, Scheduler, StolenInterval};
use punctual_units::Nanos;

use crate::outcome::{
    keep_spike, CpuStolen, Outcome, PeriodTotals, SourceStats, Spike, StreamStats, TaskStats,
    TimelineLog, TraceSlice, MAX_PERIODS,
};
use crate::queue::{key, key_time, EvQueue, NO_KEY};
use crate::rng::Rng;
use crate::scenario::Dist;

/// Releases queued behind a running job before further ones count as lost.
pub(crate) const MAX_BACKLOG: usize = 10_000;

/// Pieces of interrupt and DPC work queued on one CPU before further ones
/// are dropped (and counted in their source's `dropped`): an interrupt rate
/// the CPU can never serve would otherwise grow the queue without bound.
pub(crate) const MAX_BH_QUEUE: usize = 10_000;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Level {
    Dpc,
    Irq,
    Stall,
    Steal,
}

impl Level {
    pub(crate) fn kind(self) -> &'static str {
        match self {
            Level::Dpc => "dpc",
            Level::Irq => "irq",
            Level::Stall => "bus",
            Level::Steal => "hypervisor",
        }
    }
    fn visible(self) -> bool {
        self == Level::Dpc
    }
}

#[derive(Clone, Copy, Debug)]
enum Action {
    None,
    Release { task: usize, nominal: Nanos },
}

#[derive(Clone, Debug)]
pub(crate) struct BhItem {
    remaining: Nanos,
    len: Nanos,
    src: usize,
    visible: bool,
    action: Action,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TaskKind {
    Periodic,
    Timer,
    Background,
    Drainer,
    Sleeper,
}

/// What [`Sim::advance_task`] did to the running task.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Advance {
    /// Nothing: it is inactive or its compute segment runs on.
    Idle,
    /// It moved past a segment; look at it again.
    Again,
    /// Its job completed and no queued one took its place: it is inactive,
    /// and the pick the completion asked for comes next.
    Over,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Seg {
    Compute(Nanos),
    Lock(LockId),
    Unlock(LockId),
}

/// Laid out in the order written (`repr(C)`): the stats first, whose
/// counters the compiler puts at their end, then everything the plain
/// loop reads or writes per job, then what only other paths read. With
/// 10,000 tasks each job touches a task last touched a period earlier, so
/// every line of it the job reads is a cache miss; in the compiler's order
/// those fields were spread over the whole 2.5 KB.
#[repr(C)]
pub(crate) struct Task {
    pub(crate) stats: TaskStats,
    pub(crate) job_release: Nanos,
    pub(crate) job_deadline: Option<Nanos>,
    pub(crate) period: Option<Nanos>,
    pub(crate) deadline: Option<Nanos>,
    /// The kept deadline event: the job's nominal release and the sequence
    /// number its queue key would have had.
    pub(crate) fused: Option<(Nanos, u64)>,
    /// The current segment, `segs[seg]` (once past the last, `segs[4]` or
    /// the one after the last, as `seg.min(4)` indexes; no one reads it
    /// then, as the job is over), with the time already run taken off a
    /// compute segment. Kept apart so that the three readers of every event
    /// (`cpu_sync`, `advance_task`, `arm`) load it at a fixed place rather
    /// than through `seg`.
    pub(crate) cur: Seg,
    pub(crate) seg: usize,
    pub(crate) nseg: usize,
    pub(crate) tid: usize,
    pub(crate) last_start: Option<Nanos>,
    pub(crate) spike_threshold: Nanos,
    pub(crate) backlog: VecDeque<Nanos>,
    pub(crate) active: bool,
    pub(crate) started: bool,
    pub(crate) edf: bool,
    /// Drop the queued jobs after a missed deadline (`refill`).
    pub(crate) refill: bool,
    /// `sim.edf_ties = "ready"` (an EDF task) or `sim.priority_ties =
    /// "ready"` (a fixed-priority one): a job queued behind its predecessor
    /// takes a new ready order when the predecessor ends.
    pub(crate) ties_by_ready: bool,
    /// Under `sim.on_miss = "abort"`, a periodic task whose deadline is
    /// its period: each job's deadline event would be queued right after
    /// the next release, at the same instant, so it is kept here instead
    /// (see [`Sim::queue_deadline`]).
    pub(crate) fuse_deadline: bool,
    pub(crate) kind: TaskKind,
    pub(crate) exec: Dist,
    pub(crate) rng: Rng,
    pub(crate) critical: Option<(LockId, Nanos, Dist)>,
    pub(crate) segs: [Seg; 5],
    pub(crate) sleep: Option<Dist>,
    pub(crate) drains: Vec<usize>,
    pub(crate) phase: Nanos,
    pub(crate) stop: Option<Nanos>,
    pub(crate) cpu: usize,
}

impl Task {
    /// Where its current segment would end if it ran from `now` on, as
    /// [`Cpu::seg_end`] keeps it.
    #[inline(always)]
    pub(crate) fn seg_end_from(&self, now: Nanos) -> Nanos {
        match self.cur {
            _ if !self.active => Nanos::MAX,
            Seg::Compute(r) if r.0 == u64::MAX => Nanos::MAX,
            Seg::Compute(r) => now + r,
            Seg::Lock(_) | Seg::Unlock(_) => Nanos::ZERO,
        }
    }

    /// A release that finds the task's previous job still running waits
    /// behind it, up to MAX_BACKLOG; past that it is lost and counted as
    /// a miss, so a backlog's memory stays bounded.
    #[inline(always)]
    pub(crate) fn hold(&mut self, nominal: Nanos) {
        if self.backlog.len() >= MAX_BACKLOG {
            self.stats.backlog_lost += 1;
            self.stats.latency.add_missed(1);
        } else {
            self.backlog.push_back(nominal);
        }
    }

    /// A job released at `nominal` starts: its segments and execution
    /// time drawn. Always inlined: once per job, and as a call its prologue and
    /// epilogue were a fifth of it.
    #[inline(always)]
    pub(crate) fn start_job(&mut self, nominal: Nanos) {
        let t = self;
        t.active = true;
        t.started = false;
        t.job_release = nominal;
        t.job_deadline = t.deadline.map(|d| nominal + d);
        t.seg = 0;
        if t.kind == TaskKind::Background {
            t.segs[0] = Seg::Compute(Nanos::MAX);
            t.nseg = 1;
            t.cur = t.segs[0];
            return;
        }
        let total = sample(&t.exec, &mut t.rng);
        match &t.critical {
            None => {
                t.segs[0] = Seg::Compute(total);
                t.nseg = 1;
            }
            Some((l, at, hold)) => {
                let (l, at) = (*l, *at);
                let h = sample(hold, &mut t.rng);
                let post = total.saturating_sub(at + h);
                t.segs = [
                    Seg::Compute(at),
                    Seg::Lock(l),
                    Seg::Compute(h),
                    Seg::Unlock(l),
                    Seg::Compute(post),
                ];
                t.nseg = 5;
            }
        }
        t.cur = t.segs[0];
    }

    /// Moves to the next segment.
    #[inline]
    pub(crate) fn next_seg(&mut self) {
        self.seg += 1;
        self.cur = self.segs[self.seg.min(4)];
    }
}

pub(crate) struct Timer {
    pub(crate) cpu: usize,
    pub(crate) period: Nanos,
    pub(crate) rounding: bool,
    pub(crate) task: usize,
    pub(crate) src: usize,
    /// Cost of each firing's DPC; drawn from `rng` unless constant.
    pub(crate) dpc_cost: Dist,
    pub(crate) rng: Rng,
    /// Next time the timer should fire by its own books (T_next).
    pub(crate) next: Nanos,
    /// When the kernel timer it armed expires.
    pub(crate) due: Nanos,
}

pub(crate) enum NoiseKind {
    Periodic {
        period: Nanos,
        jitter: Nanos,
    },
    /// Mean gap `1e9 / rate` in nanoseconds.
    Poisson {
        mean_ns: f64,
    },
    Bursty {
        mean_ns: f64,
        on: Nanos,
        off: Nanos,
        on_until: Nanos,
    },
}

pub(crate) struct Noise {
    pub(crate) cpu: usize,
    pub(crate) src: usize,
    pub(crate) level: Level,
    pub(crate) kind: NoiseKind,
    pub(crate) duration: Dist,
    pub(crate) phase: Nanos,
    pub(crate) k: u64,
    pub(crate) stop: Option<Nanos>,
    pub(crate) rng: Rng,
}

pub(crate) struct Stream {
    pub(crate) cpu: usize,
    pub(crate) interval: Nanos,
    /// Mean Poisson gap: 1e9 over the rate the whole interval gives.
    pub(crate) mean_gap_ns: f64,
    pub(crate) poisson: bool,
    pub(crate) capacity: u64,
    pub(crate) flow_control: bool,
    pub(crate) drainer: usize,
    pub(crate) irq: (usize, Nanos),
    pub(crate) dpc: (usize, Nanos),
    pub(crate) stop: Option<Nanos>,
    pub(crate) fill: u64,
    pub(crate) paused_since: Option<Nanos>,
    pub(crate) rng: Rng,
    pub(crate) stats: StreamStats,
}

pub(crate) struct Cpu {
    pub(crate) sched: Scheduler,
    pub(crate) thread_task: Vec<usize>,
    pub(crate) bh: VecDeque<BhItem>,
    pub(crate) stall_until: Nanos,
    pub(crate) stall_src: usize,
    pub(crate) running: Option<usize>,
    /// When the running task's compute segment ends, absolute; zero (due at
    /// once) for a lock or unlock step, `Nanos::MAX` when nothing of it
    /// can be due (idle, a background thread, an inactive task). Kept here
    /// rather than as the
    /// remaining time in the task's `cur`, so that thread-level progress
    /// costs nothing per event and the wake-up is read off directly:
    /// interrupt-level work pushes it back by the time it takes. The
    /// task's `cur` holds its remaining time only while it is off the CPU
    /// (written back when it is switched out).
    pub(crate) seg_end: Nanos,
    pub(crate) since: Nanos,
    pub(crate) until: Option<Nanos>,
    pub(crate) need_pick: bool,
    /// A release at this instant left its re-pick to the end of the
    /// instant (see [`Sim::release`]).
    pub(crate) deferred: bool,
    pub(crate) tick_pending: bool,
    pub(crate) steal_start: Option<Nanos>,
    pub(crate) steal_vis: Nanos,
    pub(crate) steal_invis: Nanos,
    pub(crate) stolen: CpuStolen,
    /// The stolen-time timeline bin the last interval fell in:
    /// `[start, end)` of `stolen.timeline.values_ns[idx]`, empty until one
    /// is known. Nearly every stolen interval lands in the same bin as the
    /// one before (a bin is a thousandth of the run), and testing the cached
    /// bounds spares the 64-bit division that finds the bin.
    pub(crate) bin: (Nanos, Nanos, usize),
    pub(crate) slice_start: Nanos,
}

impl Cpu {
    /// Accounts what happened on this CPU since its last change. Within
    /// that span its state was constant (every change arms a wake).
    ///
    /// Always inlined: it runs two or three times per event, often with
    /// nothing to do, and as a call it cost more than its early return.
    #[inline(always)]
    fn sync(&mut self, now: Nanos, sources: &mut [SourceStats]) {
        if now <= self.since {
            return;
        }
        let dt = now - self.since;
        let from = self.since;
        self.since = now;
        if self.stall_until >= now && self.stall_until > from {
            let src = self.stall_src;
            if self.steal_start.is_none() {
                self.steal_start = Some(from);
            }
            self.steal_invis += dt;
            sources[src].total += dt;
            self.push_back_seg_end(dt);
        } else if let Some(head) = self.bh.front_mut() {
            let d = dt.min(head.remaining);
            head.remaining -= d;
            if self.steal_start.is_none() {
                self.steal_start = Some(from);
            }
            if head.visible {
                self.steal_vis += dt;
            } else {
                self.steal_invis += dt;
            }
            sources[head.src].total += dt;
            self.push_back_seg_end(dt);
        }
        // At thread level the running task's segment end stands.
    }

    /// Sets the segment end from the running task's current segment,
    /// which must hold the remaining time (the task has just been put on
    /// the CPU or moved to a new segment).
    #[inline(always)]
    fn load_seg_end(&mut self, tasks: &[Task], now: Nanos) {
        self.seg_end = match self.running {
            Some(ti) => tasks[ti].seg_end_from(now),
            None => Nanos::MAX,
        };
    }

    /// Interrupt-level work took `dt` from the running task. (A lock step's
    /// zero end stays due: `dt` is at most the time since it was set.)
    #[inline(always)]
    fn push_back_seg_end(&mut self, dt: Nanos) {
        if self.seg_end != Nanos::MAX {
            self.seg_end += dt;
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum EvKind {
    Tick {
        cpu: u32,
        k: u64,
    },
    TimerDue {
        timer: u32,
    },
    Release {
        task: u32,
        nominal: Nanos,
    },
    Noise {
        idx: u32,
    },
    Stream {
        idx: u32,
    },
    /// The deadline of task `task`'s job released at `nominal`, queued only
    /// under `sim.on_miss = "abort"`.
    Deadline {
        task: u32,
        nominal: Nanos,
    },
}

/// Whose time a slice of CPU is: a noise source's handler or a task.
#[derive(Clone, Copy)]
enum SliceOwner {
    Source(usize),
    Task(usize),
}

/// The two consumers of slices of CPU time, the record's bounded timeline
/// and the `--trace` log, borrowed apart from the rest of the machine so
/// that the plain task set's loop (`plain.rs`) logs through the same code.
pub(crate) struct SliceLogs<'a> {
    pub(crate) timeline: &'a mut TimelineLog,
    pub(crate) trace: &'a mut Option<Vec<TraceSlice>>,
    pub(crate) trace_cap: usize,
    pub(crate) trace_dropped: &'a mut u64,
}

impl SliceLogs<'_> {
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn push(
        self,
        c: usize,
        label: &Arc<str>,
        kind: &'static str,
        name: &Arc<str>,
        track: u32,
        start: Nanos,
        len: Nanos,
    ) {
        self.timeline.push(c, label, kind, name, start, len);
        if let Some(tr) = self.trace {
            if tr.len() < self.trace_cap {
                tr.push(TraceSlice {
                    cpu: c as u32,
                    track,
                    name: name.to_string(),
                    start,
                    dur: len,
                });
            } else {
                *self.trace_dropped += 1;
            }
        }
    }
}

pub struct Sim {
    pub(crate) now: Nanos,
    pub(crate) seq: u64,
    pub(crate) queue: EvQueue<EvKind>,
    /// One pending wake-up per CPU as a queue key (time, sequence), or
    /// [`NO_KEY`]. A CPU re-arms far more often than its wake-ups fire
    /// (every interrupt, release or pick may move it); in a heap each
    /// re-arm left the superseded wake-up behind to be popped and thrown
    /// away. The sequence number is drawn from the same counter as queued
    /// events, so ties with them resolve first-in first-out as before.
    pub(crate) wake: Vec<u128>,
    /// The CPU whose wake-up is earliest.
    pub(crate) wake_min: usize,
    /// Superseded wake-up keys, tracked only on machines with more than
    /// one CPU (see [`Sim::next_is_now`]).
    pub(crate) stale: Vec<u128>,
    pub(crate) stale_cap: usize,
    /// Key of the event being handled.
    pub(crate) cur_key: u128,
    /// Where the run ends, as a queue key: the end of the simulated
    /// duration, ordered after the events queued before it was set (a
    /// stream starting exactly at the end still arrives), before all later
    /// ones. Not an event in the queue, so the queue stays one entry
    /// shorter.
    pub(crate) end_key: u128,
    pub(crate) cpus: Vec<Cpu>,
    pub(crate) tasks: Vec<Task>,
    pub(crate) timers: Vec<Timer>,
    pub(crate) noises: Vec<Noise>,
    pub(crate) streams: Vec<Stream>,
    pub(crate) sources: Vec<SourceStats>,
    pub(crate) tick_ps: Option<u128>,
    pub(crate) clock_cost: Nanos,
    pub(crate) clock_src: usize,
    pub(crate) oneshot: bool,
    pub(crate) end: Nanos,
    pub(crate) seed: u64,
    pub(crate) events: u64,
    pub(crate) picks: u64,
    pub(crate) any_deferred: bool,
    pub(crate) periods: Vec<(String, PeriodStat)>,
    pub(crate) periods_dropped: u64,
    pub(crate) period_totals: Vec<PeriodTotals>,
    pub(crate) spikes: Vec<Spike>,
    pub(crate) spikes_dropped: u64,
    pub(crate) trace: Option<Vec<TraceSlice>>,
    pub(crate) trace_cap: usize,
    pub(crate) trace_dropped: u64,
    pub(crate) timeline: TimelineLog,
    pub(crate) warnings: Vec<String>,
    pub(crate) clock_desc: String,
    /// `sim.on_miss = "abort"`: a job unfinished at its deadline is dropped.
    pub(crate) abort_on_miss: bool,
    /// A kept deadline event (see [`Task::fused`]) is due at this instant,
    /// right after the release being handled.
    pub(crate) deadline_now: bool,
    /// The machine is a plain task set ([`Sim::is_plain`], decided when it
    /// is built): [`Sim::run`] steps it job to job in `plain.rs`.
    pub(crate) plain: bool,
}

/// Inlined: every job draws its execution time here, and the call and the
/// match cost more than a uniform draw itself.
#[inline(always)]
pub(crate) fn sample(d: &Dist, rng: &mut Rng) -> Nanos {
    match d {
        Dist::Const(x) => *x,
        Dist::Uniform(a, b) => Nanos(rng.range(a.0, b.0)),
        Dist::Exp(m) => sample_exp(*m, rng),
        Dist::Choice(v) => v[rng.range(0, v.len() as u64 - 1) as usize],
        Dist::Cdf(c) => c.at(rng.unit()),
    }
}

/// An exponential draw of mean `m`, capped at 20 means (by the ziggurat,
/// [`Rng::exp1`]).
#[inline]
fn sample_exp(m: Nanos, rng: &mut Rng) -> Nanos {
    let v = rng.exp1() * m.0 as f64;
    Nanos((v.min(m.0 as f64 * 20.0)) as u64)
}

/// [`Timeline::add_interval`] for a stolen interval outside CPU `cpu`'s
/// cached bin; then caches the kept bin `start` falls in (the width may
/// have just doubled, so it is found afresh).
#[inline(never)]
fn add_interval_and_cache_bin(cpu: &mut Cpu, start: Nanos, len: Nanos) {
    let tl = &mut cpu.stolen.timeline;
    tl.add_interval(start, len);
    cpu.bin = tl.kept_bin(start).unwrap_or((Nanos::ZERO, Nanos::ZERO, 0));
}

/// One part of each element of `v`, in a vector of its own. Not
/// `v.into_iter().map(part).collect()`: that reuses `v`'s buffer (the
/// standard library's in-place collection), moving each part down over
/// the rest of its element and then shrinking the buffer by a reallocation
/// that copies it again; for the outcome's task statistics that was 2% of
/// a short run's instructions. A fresh vector of the right length takes
/// one copy of each part.
fn parts<T, U>(v: Vec<T>, part: impl FnMut(T) -> U) -> Vec<U> {
    let mut out = Vec::with_capacity(v.len());
    out.extend(v.into_iter().map(part));
    out
}

/// An exponential gap of mean `mean_ns` (callers keep `1e9 / rate` rather
/// than dividing at every arrival).
#[inline]
fn exp_interval(mean_ns: f64, rng: &mut Rng) -> Nanos {
    Nanos((rng.exp1() * mean_ns).max(1.0) as u64)
}

impl Sim {
    #[inline]
    pub(crate) fn push(&mut self, t: Nanos, kind: EvKind) {
        self.seq += 1;
        self.queue.push(key(t, self.seq), kind);
    }

    pub(crate) fn first_noise_time(&mut self, i: usize) -> Option<Nanos> {
        let n = &mut self.noises[i];
        let t = match &mut n.kind {
            NoiseKind::Periodic { jitter, .. } => {
                let j = if jitter.is_zero() {
                    Nanos::ZERO
                } else {
                    Nanos(n.rng.range(0, jitter.0))
                };
                n.phase + j
            }
            NoiseKind::Poisson { mean_ns } => n.phase + exp_interval(*mean_ns, &mut n.rng),
            NoiseKind::Bursty {
                mean_ns,
                on,
                on_until,
                ..
            } => {
                *on_until = n.phase + Nanos(sample(&Dist::Exp(*on), &mut n.rng).0.max(1));
                n.phase + exp_interval(*mean_ns, &mut n.rng)
            }
        };
        Some(t)
    }

    fn next_noise_time(&mut self, i: usize, now: Nanos) -> Option<Nanos> {
        let n = &mut self.noises[i];
        n.k += 1;
        let t = match &mut n.kind {
            NoiseKind::Periodic { period, jitter } => {
                let j = if jitter.is_zero() {
                    Nanos::ZERO
                } else {
                    Nanos(n.rng.range(0, jitter.0))
                };
                let base = n.phase.0.checked_add(period.0.checked_mul(n.k)?)?;
                Nanos(base) + j
            }
            NoiseKind::Poisson { mean_ns } => now + exp_interval(*mean_ns, &mut n.rng),
            NoiseKind::Bursty {
                mean_ns,
                on,
                off,
                on_until,
            } => {
                let mut t = now + exp_interval(*mean_ns, &mut n.rng);
                if t > *on_until {
                    // The burst ended: stay off, then start a new burst.
                    let off_len = sample(&Dist::Exp(*off), &mut n.rng);
                    let start = *on_until + off_len;
                    *on_until = start + Nanos(sample(&Dist::Exp(*on), &mut n.rng).0.max(1));
                    t = start + exp_interval(*mean_ns, &mut n.rng);
                }
                t
            }
        };
        if n.stop.is_some_and(|s| t >= s) {
            None
        } else {
            Some(t)
        }
    }

    /// Runs to the end (or until `stop` is set) and returns the results.
    pub fn run(mut self, stop: Option<&AtomicBool>) -> Outcome {
        if self.plain {
            return self.run_plain(stop);
        }
        self.initial_events();
        let mut interrupted = false;
        loop {
            let qk = self.queue.min_key();
            let wk = self.wake[self.wake_min];
            let k = qk.min(wk);
            if k > self.end_key {
                break;
            }
            self.now = key_time(k);
            self.cur_key = k;
            // Only real scheduling events count: the end is no event, and
            // superseded wake-ups no longer exist to be counted.
            let ev = if wk < qk {
                None
            } else {
                Some(self.queue.take_min())
            };
            self.events += 1;
            if self.events & 0xFFFF == 0 && stop.is_some_and(|s| s.load(Ordering::Relaxed)) {
                interrupted = true;
                break;
            }
            match ev {
                None => {
                    let c = self.wake_min;
                    self.wake[c] = NO_KEY;
                    self.rescan_wake_min();
                    self.cpu_update(c);
                }
                Some(EvKind::Release { task, nominal }) => {
                    let i = task as usize;
                    match self.tasks[i].fused.take() {
                        None => self.on_release_event(i, nominal),
                        Some((job, seq)) => {
                            // The kept deadline is the next event: it was
                            // queued right after this release, same time.
                            self.deadline_now = true;
                            self.on_release_event(i, nominal);
                            self.deadline_now = false;
                            self.events += 1;
                            if self.events & 0xFFFF == 0
                                && stop.is_some_and(|s| s.load(Ordering::Relaxed))
                            {
                                interrupted = true;
                                break;
                            }
                            self.cur_key = key(self.now, seq);
                            self.on_deadline(i, job);
                        }
                    }
                }
                Some(EvKind::Tick { cpu, k }) => self.on_tick(cpu as usize, k),
                Some(EvKind::TimerDue { timer }) => self.on_timer_due(timer as usize),
                Some(EvKind::Noise { idx }) => self.on_noise(idx as usize),
                Some(EvKind::Stream { idx }) => self.on_stream(idx as usize),
                Some(EvKind::Deadline { task, nominal }) => {
                    self.on_deadline(task as usize, nominal)
                }
            }
            // Superseded wake-ups are no events: when only they would have
            // been left at this instant, the old heap popped them (doing
            // nothing) and flushed right after, which is now.
            if self.any_deferred && !self.live_event_now() {
                self.flush_deferred();
            }
        }
        self.flush_deferred();
        self.finish(interrupted)
    }

    fn on_release_event(&mut self, i: usize, nominal: Nanos) {
        let t = &self.tasks[i];
        if t.stop.is_some_and(|s| nominal >= s) {
            return;
        }
        if t.kind == TaskKind::Periodic {
            if let Some(p) = t.period {
                let next = nominal + p;
                self.push(
                    next,
                    EvKind::Release {
                        task: i as u32,
                        nominal: next,
                    },
                );
            }
        }
        self.release(i, nominal);
    }

    /// A job of task `i` is released (nominally at `nominal`).
    fn release(&mut self, i: usize, nominal: Nanos) {
        let c = self.tasks[i].cpu;
        self.cpu_sync(c);
        self.queue_deadline(i, nominal);
        let t = &mut self.tasks[i];
        t.stats.releases += 1;
        if t.active {
            if t.kind == TaskKind::Drainer || t.kind == TaskKind::Background {
                return;
            }
            t.hold(nominal);
            return;
        }
        self.begin_job(i, c, nominal);
        // Releases due at the same instant are all seen before the CPU
        // re-picks: otherwise the first one released would be dispatched
        // for zero time and displaced by the next, counting a preemption
        // (and a start) that never happened. SimSo and the kernel both
        // decide once per instant.
        if self.next_is_now() {
            self.cpus[c].deferred = true;
            self.any_deferred = true;
        } else {
            self.cpu_update(c);
        }
    }

    /// Under `sim.on_miss = "abort"`, queues the deadline of the job of
    /// task `i` released at `nominal`, where it is dropped if unfinished.
    ///
    /// A periodic task's next release was queued just before this (see
    /// [`Sim::on_release_event`]), so with a deadline equal to the period
    /// the deadline event would be the very next one after that release:
    /// same time, next sequence number, and nothing can be queued between.
    /// It is kept in the task and handled right after the release instead
    /// (in [`Sim::run`]), taking the sequence number it would have had, so
    /// that everything happens in the same order as from the queue; most
    /// jobs are done by then, and the queue's push and pop of a deadline
    /// that does nothing were a third of an aborting run's time.
    #[inline(always)]
    fn queue_deadline(&mut self, i: usize, nominal: Nanos) {
        if !self.abort_on_miss {
            return;
        }
        if self.tasks[i].fuse_deadline {
            self.seq += 1;
            self.tasks[i].fused = Some((nominal, self.seq));
            return;
        }
        let t = &self.tasks[i];
        if let (Some(d), TaskKind::Periodic | TaskKind::Timer | TaskKind::Sleeper) =
            (t.deadline, t.kind)
        {
            self.push(
                nominal + d,
                EvKind::Deadline {
                    task: i as u32,
                    nominal,
                },
            );
        }
    }

    /// The deadline of task `i`'s job released at `nominal` has come: if
    /// that job is still running or queued, it is dropped and counted as
    /// a miss and as aborted. A job whose last piece of work ends exactly
    /// now is on time (as a completion at its deadline is) and is left to
    /// complete.
    fn on_deadline(&mut self, i: usize, nominal: Nanos) {
        let c = self.tasks[i].cpu;
        self.cpu_sync(c);
        let now = self.now;
        let t = &mut self.tasks[i];
        if t.active && t.job_release == nominal {
            let cpu = &self.cpus[c];
            let finishing = cpu.running == Some(i)
                && t.seg + 1 == t.nseg
                && cpu.seg_end <= now
                && cpu.bh.is_empty()
                && cpu.stall_until <= now;
            if finishing {
                return;
            }
            t.stats.dropped_at_deadline();
            if t.refill {
                t.backlog.clear();
            }
            t.active = false;
            // The dropped job leaves the ready queue: a queued successor
            // becomes ready now, behind the jobs already ready, as SimSo
            // activates it, rather than keeping its task's old place.
            let tid = t.tid;
            self.cpus[c].sched.on_block(now, tid);
            if !self.job_over(i, c) && self.cpus[c].running == Some(i) {
                self.cpus[c].seg_end = Nanos::MAX;
            }
        } else if let Some(pos) = t.backlog.iter().position(|&r| r == nominal) {
            // Queued behind a late predecessor and never started: dropped
            // without touching the CPU.
            t.backlog.remove(pos);
            t.stats.dropped_at_deadline();
            return;
        } else {
            return;
        }
        if self.next_is_now() {
            self.cpus[c].deferred = true;
            self.any_deferred = true;
        } else {
            self.cpu_update(c);
        }
    }

    /// Whether another event is due at this same instant.
    ///
    /// On a machine with several CPUs this also counts superseded wake-ups
    /// due now that the old heap would still have held (it popped and
    /// discarded them one by one). They change nothing themselves, but they
    /// decided whether a release re-picked its CPU at once or at the end of
    /// the instant, and so the order in which several CPUs re-pick at the
    /// end of one instant; keeping that order keeps every output
    /// byte-identical. On one CPU the two orders cannot differ, so nothing
    /// is tracked there.
    #[inline]
    fn next_is_now(&mut self) -> bool {
        if self.live_event_now() {
            return true;
        }
        if self.stale.is_empty() {
            return false;
        }
        let cur = self.cur_key;
        self.stale.retain(|&s| s > cur);
        let now = self.now;
        self.stale.iter().any(|&s| key_time(s) == now)
    }

    /// Whether a queued event or a CPU wake-up is due at this instant.
    #[inline]
    fn live_event_now(&mut self) -> bool {
        let k = self.queue.min_key().min(self.wake[self.wake_min]);
        key_time(k.min(self.end_key)) == self.now || self.deadline_now
    }

    fn rescan_wake_min(&mut self) {
        if self.wake.len() > 1 {
            let mut m = 0;
            for i in 1..self.wake.len() {
                if self.wake[i] < self.wake[m] {
                    m = i;
                }
            }
            self.wake_min = m;
        }
    }

    fn flush_deferred(&mut self) {
        if !self.any_deferred {
            return;
        }
        self.any_deferred = false;
        for c in 0..self.cpus.len() {
            if self.cpus[c].deferred {
                self.cpu_update(c);
            }
        }
    }

    /// Starts a job of task `i` (on CPU `c`) released at `nominal` and
    /// hands it to the scheduler; the CPU re-picks next. A task still on
    /// the CPU from its last job gets its segment end from the new job.
    #[inline(always)]
    fn begin_job(&mut self, i: usize, c: usize, nominal: Nanos) {
        self.start_job(i, nominal);
        if self.cpus[c].running == Some(i) {
            self.load_seg_end(c);
        }
        let t = &self.tasks[i];
        let dl = t.job_deadline.filter(|_| t.edf);
        let (tid, now) = (t.tid, self.now);
        self.cpus[c].sched.on_release(now, tid, dl);
        self.cpus[c].need_pick = true;
    }

    /// Always inlined: once per job, and as a call its prologue and
    /// epilogue were a fifth of it.
    #[inline(always)]
    fn start_job(&mut self, i: usize, nominal: Nanos) {
        self.tasks[i].start_job(nominal);
    }

    /// Out of line, as the other handlers of events a plain task set
    /// never has (ticks, timer firings, noise, streams): inlined into
    /// [`Sim::run`] they spread its hot path over more cache lines and
    /// pages, which a fresh process first reads from memory.
    #[inline(never)]
    fn on_tick(&mut self, c: usize, k: u64) {
        let ps = self.tick_ps.unwrap_or(1_000_000_000);
        let next_t = Nanos(((k as u128 + 1) * ps / 1000) as u64);
        self.push(
            next_t,
            EvKind::Tick {
                cpu: c as u32,
                k: k + 1,
            },
        );
        self.cpu_sync(c);
        if self.cpus[c].stall_until > self.now {
            // The clock interrupt is held off; one pending interrupt is
            // delivered when the stall ends, the others are lost.
            self.cpus[c].tick_pending = true;
            return;
        }
        self.clock_interrupt(c);
        self.cpu_update(c);
    }

    fn clock_interrupt(&mut self, c: usize) {
        if !self.clock_cost.is_zero() {
            let src = self.clock_src;
            self.push_bh(c, src, self.clock_cost, false, Action::None);
        }
        for ti in 0..self.timers.len() {
            if self.timers[ti].cpu == c && self.timers[ti].due <= self.now {
                self.fire_timer(ti);
            }
        }
    }

    #[inline(never)]
    fn on_timer_due(&mut self, ti: usize) {
        let c = self.timers[ti].cpu;
        self.cpu_sync(c);
        if self.timers[ti].due > self.now {
            return;
        }
        if self.cpus[c].stall_until > self.now {
            let at = self.cpus[c].stall_until;
            self.push(at, EvKind::TimerDue { timer: ti as u32 });
            return;
        }
        self.fire_timer(ti);
        if self.oneshot {
            let due = self.timers[ti].due;
            self.push(due, EvKind::TimerDue { timer: ti as u32 });
        }
        self.cpu_update(c);
    }

    /// Jones & Regehr's multimedia timer: fire, advance the next firing time by
    /// the period, fire again while it is in the past; then arm the kernel
    /// timer — for the whole next firing time (fixed), or for a relative
    /// wait rounded to whole milliseconds and never under 1 ms (rounding).
    fn fire_timer(&mut self, ti: usize) {
        let now = self.now;
        let (c, src, task) = {
            let t = &self.timers[ti];
            (t.cpu, t.src, t.task)
        };
        let mut fires = Vec::new();
        {
            let t = &mut self.timers[ti];
            fires.push(t.next);
            t.next += t.period;
            while t.next <= now && fires.len() < 10_000 {
                fires.push(t.next);
                t.next += t.period;
            }
            if t.next <= now {
                // Hopelessly behind: skip ahead rather than fire forever.
                let behind = (now.0 - t.next.0) / t.period.0 + 1;
                t.next = Nanos(t.next.0 + behind * t.period.0);
            }
            t.due = if t.rounding {
                let ahead = t.next.0 - now.0;
                let ms = ((ahead + 500_000) / 1_000_000).max(1);
                now + Nanos::from_ms(ms)
            } else {
                t.next
            };
        }
        for nominal in fires {
            let t = &mut self.timers[ti];
            let cost = sample(&t.dpc_cost, &mut t.rng);
            self.push_bh(c, src, cost, true, Action::Release { task, nominal });
        }
    }

    #[inline(never)]
    fn on_noise(&mut self, i: usize) {
        let now = self.now;
        if let Some(t) = self.next_noise_time(i, now) {
            self.push(t, EvKind::Noise { idx: i as u32 });
        }
        let n = &mut self.noises[i];
        let d = sample(&n.duration, &mut n.rng);
        let (c, src, level) = (n.cpu, n.src, n.level);
        if d.is_zero() {
            return;
        }
        self.cpu_sync(c);
        match level {
            Level::Stall | Level::Steal => {
                let cpu = &mut self.cpus[c];
                let until = now + d;
                if until > cpu.stall_until {
                    // The stretch this stall adds to one still running: the
                    // slices of one CPU's stalls never overlap.
                    let from = cpu.stall_until.max(now);
                    cpu.stall_until = until;
                    cpu.stall_src = src;
                    self.emit_slice(c, SliceOwner::Source(src), from, until - from);
                }
                self.sources[src].count += 1;
                if d > self.sources[src].max {
                    self.sources[src].max = d;
                }
            }
            Level::Dpc | Level::Irq => {
                self.push_bh(c, src, d, level.visible(), Action::None);
            }
        }
        self.cpu_update(c);
    }

    #[inline(never)]
    fn on_stream(&mut self, i: usize) {
        let now = self.now;
        let s = &mut self.streams[i];
        if s.stop.is_some_and(|st| now >= st) {
            return;
        }
        let c = s.cpu;
        if s.fill >= s.capacity {
            if s.flow_control {
                // The window is closed: the sender waits for the drain.
                s.paused_since = Some(now);
                return;
            }
            s.stats.lost += 1;
        } else {
            s.fill += 1;
            s.stats.arrived += 1;
            s.stats.max_fill = s.stats.max_fill.max(s.fill);
        }
        let gap = if s.poisson {
            exp_interval(s.mean_gap_ns, &mut s.rng)
        } else {
            s.interval
        };
        let (irq, dpc, drainer) = (s.irq, s.dpc, s.drainer);
        self.push(now + gap, EvKind::Stream { idx: i as u32 });
        self.cpu_sync(c);
        if !irq.1.is_zero() {
            self.push_bh(c, irq.0, irq.1, false, Action::None);
        }
        if !dpc.1.is_zero() {
            self.push_bh(c, dpc.0, dpc.1, true, Action::None);
        }
        let cpu = &self.cpus[c];
        if cpu.running == Some(drainer) && cpu.bh.is_empty() && cpu.stall_until <= now {
            // The receiver is on the CPU right now: it takes the data at once.
            self.drain(drainer);
        }
        if !self.tasks[drainer].active && self.tasks[drainer].kind == TaskKind::Drainer {
            self.release(drainer, now);
        } else {
            self.cpu_update(c);
        }
    }

    fn push_bh(&mut self, c: usize, src: usize, len: Nanos, visible: bool, action: Action) {
        if self.cpus[c].bh.len() >= MAX_BH_QUEUE {
            // The CPU cannot catch up at interrupt level: memory stays
            // bounded and the loss is counted, as for task backlogs.
            self.sources[src].dropped += 1;
            return;
        }
        self.cpus[c].bh.push_back(BhItem {
            remaining: len,
            len,
            src,
            visible,
            action,
        });
    }

    /// [`Cpu::sync`] for CPU `c` at this instant.
    #[inline(always)]
    fn cpu_sync(&mut self, c: usize) {
        let now = self.now;
        let Sim { cpus, sources, .. } = self;
        cpus[c].sync(now, sources);
    }

    /// Completes what is due on CPU `c`, re-picks when needed, and arms the
    /// next wake.
    fn cpu_update(&mut self, c: usize) {
        let now = self.now;
        // One borrow of the CPU for the steps every update takes: indexed
        // afresh at each, it was reloaded and bounds-checked at each.
        let Sim { cpus, sources, .. } = self;
        let cpu = &mut cpus[c];
        cpu.deferred = false;
        cpu.sync(now, sources);
        let irq_level = cpu.stall_until > now || cpu.tick_pending || !cpu.bh.is_empty();
        self.cpu_settle(c, now, irq_level);
        self.arm(c);
    }

    /// [`Sim::cpu_update`] up to its wake-up: one return for all its ends,
    /// so that the one `arm` after it is inlined (as three calls they cost
    /// a prologue and epilogue each).
    #[inline(always)]
    fn cpu_settle(&mut self, c: usize, now: Nanos, irq_level: bool) {
        // One count per state change, whichever phase makes it.
        let mut guard = 0;
        // Interrupt level: a stall, a held-off clock tick, finished
        // bottom-half items. Usually there is none (`irq_level` is false):
        // then the loop would only count its one pass.
        if !irq_level {
            guard = 1;
        } else if self.settle_interrupt_level(c, now, &mut guard) {
            return;
        }
        // Thread level: the stolen interval (if any) is over.
        if let Some(start) = self.cpus[c].steal_start.take() {
            self.end_steal(c, start);
        }
        // Nothing below stalls the CPU, holds off a tick or queues bottom-
        // half work (completions, locks and picks only touch the thread
        // level and the event queue), so once the interrupt level is clear
        // it stays clear: the checks above need not run again.
        loop {
            // Nothing is due before the segment end (never, for an idle
            // CPU, a background thread or an inactive task).
            // The CPU is indexed again only when the task moved on.
            let mut cpu = &self.cpus[c];
            if let Some(ti) = cpu.running.filter(|_| cpu.seg_end <= now) {
                let advanced = self.advance_task(ti, c);
                if advanced != Advance::Idle {
                    if self.runaway(&mut guard, c) {
                        break;
                    }
                    if advanced == Advance::Again {
                        continue;
                    }
                    // `Over`: the pass that would find the task inactive
                    // next changes nothing; go on to the pick its
                    // completion asked for.
                }
                cpu = &self.cpus[c];
            }
            if !(cpu.need_pick || cpu.until.is_some_and(|u| u <= now)) {
                break;
            }
            self.pick(c);
            if self.runaway(&mut guard, c) {
                break;
            }
        }
    }

    /// The interrupt-level part of [`Sim::cpu_settle`]: a stall, a held-off
    /// clock tick, finished bottom-half items. True when the CPU stays at
    /// interrupt level (or ran away) and the thread level waits. Out of
    /// line: a plain task set never gets here, and inlined it spread the
    /// update's hot path over more cache lines.
    #[inline(never)]
    fn settle_interrupt_level(&mut self, c: usize, now: Nanos, guard: &mut u32) -> bool {
        loop {
            if self.runaway(guard, c) {
                return true;
            }
            let cpu = &mut self.cpus[c];
            if cpu.stall_until > now {
                return true;
            }
            if cpu.tick_pending {
                cpu.tick_pending = false;
                self.clock_interrupt(c);
                continue;
            }
            if let Some(head) = cpu.bh.front() {
                if head.remaining.is_zero() {
                    let item = cpu.bh.pop_front().expect("head");
                    let s = &mut self.sources[item.src];
                    s.count += 1;
                    if item.len > s.max {
                        s.max = item.len;
                    }
                    self.emit_slice(c, SliceOwner::Source(item.src), now - item.len, item.len);
                    if let Action::Release { task, nominal } = item.action {
                        self.release_inner(task, nominal);
                    }
                    continue;
                }
                return true;
            }
            return false;
        }
    }

    /// Counts one state change of CPU `c` at this instant; true (and
    /// warned) past the bound that stops a scenario that never settles.
    #[inline(always)]
    fn runaway(&mut self, guard: &mut u32, c: usize) -> bool {
        *guard += 1;
        if *guard > 100_000 {
            self.too_many_changes(c);
            return true;
        }
        false
    }

    #[cold]
    fn too_many_changes(&mut self, c: usize) {
        let now = self.now;
        self.warnings.push(format!(
            "cpu {c}: more than 100000 state changes at {now}; the scenario may have a zero-length loop"
        ));
    }

    /// Like [`Sim::release`] but inside a running `cpu_update` (no nested
    /// update).
    fn release_inner(&mut self, i: usize, nominal: Nanos) {
        let c = self.tasks[i].cpu;
        self.queue_deadline(i, nominal);
        let t = &mut self.tasks[i];
        t.stats.releases += 1;
        if t.active {
            t.hold(nominal);
            return;
        }
        self.begin_job(i, c, nominal);
    }

    fn end_steal(&mut self, c: usize, start: Nanos) {
        let now = self.now;
        let cpu = &mut self.cpus[c];
        let len = now - start;
        let (vis, invis) = (cpu.steal_vis, cpu.steal_invis);
        cpu.steal_vis = Nanos::ZERO;
        cpu.steal_invis = Nanos::ZERO;
        if len.is_zero() {
            return;
        }
        if !vis.is_zero() {
            cpu.sched.on_stolen(StolenInterval {
                start,
                len: vis,
                visible: true,
            });
        }
        if !invis.is_zero() {
            cpu.sched.on_stolen(StolenInterval {
                start,
                len: invis,
                visible: false,
            });
        }
        cpu.stolen.total += len;
        cpu.stolen.intervals += 1;
        if let Some(g) = &mut cpu.stolen.gaps {
            g.record(len);
        }
        if len > cpu.stolen.max {
            cpu.stolen.max = len;
        }
        let (lo, hi, idx) = cpu.bin;
        if start >= lo && start.0.saturating_add(len.0) <= hi.0 {
            cpu.stolen.timeline.values_ns[idx] += len;
        } else {
            add_interval_and_cache_bin(cpu, start, len);
        }
    }

    /// Moves the running task past a finished segment; call it only when
    /// [`Cpu::seg_end`] is due.
    fn advance_task(&mut self, ti: usize, c: usize) -> Advance {
        let now = self.now;
        let t = &mut self.tasks[ti];
        if !t.active {
            return Advance::Idle;
        }
        debug_assert!(t.seg < t.nseg);
        match t.cur {
            // The caller found its end on the CPU due (a background
            // thread's endless segment has none).
            Seg::Compute(r) if r.0 == u64::MAX => Advance::Idle,
            Seg::Compute(_) => {
                t.next_seg();
                if t.seg < t.nseg {
                    self.load_seg_end(c);
                } else if !self.complete_job(ti, c) {
                    self.cpus[c].seg_end = Nanos::MAX;
                    return Advance::Over;
                }
                // A queued job that took the completed one's place has its
                // segment end loaded (`begin_job`).
                Advance::Again
            }
            Seg::Lock(l) => {
                let tid = t.tid;
                if self.cpus[c].sched.lock(now, tid, l) {
                    self.tasks[ti].next_seg();
                } else {
                    // Blocked: the waiter resumes past Lock when handed it.
                    self.tasks[ti].next_seg();
                    self.cpus[c].need_pick = true;
                }
                self.load_seg_end(c);
                Advance::Again
            }
            Seg::Unlock(l) => {
                let tid = t.tid;
                t.next_seg();
                if self.cpus[c].sched.unlock(now, tid, l).is_some() {
                    self.cpus[c].need_pick = true;
                }
                // Dropping a ceiling or inherited priority may change who runs.
                self.cpus[c].need_pick = true;
                self.load_seg_end(c);
                Advance::Again
            }
        }
    }

    /// [`Cpu::load_seg_end`] for CPU `c`.
    #[inline(always)]
    fn load_seg_end(&mut self, c: usize) {
        let Sim { cpus, tasks, .. } = self;
        cpus[c].load_seg_end(tasks, self.now);
    }

    /// Ends the running job of task `ti`; returns whether a queued job of
    /// it started in its place.
    fn complete_job(&mut self, ti: usize, c: usize) -> bool {
        let now = self.now;
        let t = &mut self.tasks[ti];
        t.stats.jobs += 1;
        t.stats.response.record(now - t.job_release);
        if t.job_deadline.is_some_and(|d| now > d) {
            t.stats.deadline_misses += 1;
            t.stats.latency.add_missed(1);
            if t.refill {
                // Their periods passed while this job ran late: silence.
                t.backlog.clear();
            }
        }
        t.active = false;
        self.job_over(ti, c)
    }

    /// After task `ti`'s job ended (completed or aborted; it is inactive
    /// now): starts its next queued job, or blocks it and, for a sleeper,
    /// queues its next release. Returns whether a queued job started.
    #[inline(always)]
    fn job_over(&mut self, ti: usize, c: usize) -> bool {
        let now = self.now;
        let t = &mut self.tasks[ti];
        if let Some(next) = t.backlog.pop_front() {
            // The next queued job starts when the scheduler next runs it.
            if t.ties_by_ready {
                // After a completion the task is still runnable, and its
                // next job would keep the task's place: it is ready from
                // now on instead. (After a drop at the deadline the task
                // was blocked, and the job is ready from now on under
                // either rule.)
                let follows = self.cpus[c].sched.is_runnable(t.tid);
                self.begin_job(ti, c, next);
                if follows {
                    let t = &self.tasks[ti];
                    let (tid, dl) = (t.tid, t.job_deadline);
                    let sched = &mut self.cpus[c].sched;
                    let order = sched.take_ready_order();
                    sched.on_release_in_order(now, tid, dl, order);
                }
            } else {
                self.begin_job(ti, c, next);
            }
            return true;
        }
        let tid = t.tid;
        let sleeper = t.kind == TaskKind::Sleeper;
        let stop = t.stop;
        self.cpus[c].sched.on_block(now, tid);
        self.cpus[c].need_pick = true;
        if sleeper {
            let t = &mut self.tasks[ti];
            let d = sample(t.sleep.as_ref().expect("validated"), &mut t.rng);
            let at = now + d;
            if stop.is_none_or(|s| at < s) {
                self.push(
                    at,
                    EvKind::Release {
                        task: ti as u32,
                        nominal: at,
                    },
                );
            }
        }
        false
    }

    /// First dispatch of a job: latency and interval samples, drains.
    fn job_started(&mut self, ti: usize) {
        let now = self.now;
        let t = &mut self.tasks[ti];
        if t.started || t.kind == TaskKind::Background {
            t.started = true;
            return;
        }
        t.started = true;
        let lat = t.stats.started(&mut t.last_start, now, t.job_release);
        if lat > t.spike_threshold {
            keep_spike(&mut self.spikes, &mut self.spikes_dropped, || {
                (now, t.cpu as u32, ti as u32, lat)
            });
        }
    }

    fn drain(&mut self, ti: usize) {
        let now = self.now;
        for k in 0..self.tasks[ti].drains.len() {
            let si = self.tasks[ti].drains[k];
            let s = &mut self.streams[si];
            s.stats.delivered += s.fill;
            s.fill = 0;
            if let Some(p) = s.paused_since.take() {
                s.stats.paused_ns += now - p;
                self.push(now, EvKind::Stream { idx: si as u32 });
            }
        }
    }

    /// Asks CPU `c`'s scheduler who runs now and switches to it.
    ///
    /// The CPU and the tasks are borrowed once, as disjoint fields, for
    /// the switch: indexing `self.cpus[c]` and `self.tasks[..]` afresh at
    /// each use reloaded and re-checked them (every store through one
    /// might have changed the other's length, as far as the compiler
    /// knew). Closed reservation periods are noted last; they go to their
    /// own lists, so the order against the slice log does not matter.
    fn pick(&mut self, c: usize) {
        let now = self.now;
        self.picks += 1;
        let Sim { cpus, tasks, .. } = self;
        let cpu = &mut cpus[c];
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
                        // Off the CPU its remaining time is kept in the task.
                        *r = cpu.seg_end.saturating_sub(now);
                    }
                }
                if pt.active && pt.started && cpu.sched.is_runnable(pt.tid) {
                    pt.stats.preemptions += 1;
                }
                ended = Some((p, cpu.slice_start));
            }
            cpu.running = next;
            cpu.load_seg_end(tasks, now);
            cpu.slice_start = now;
        }
        let closed = cpu.sched.has_closed_periods();
        let (first_dispatch, drains) = match next {
            Some(n) => (!tasks[n].started, !tasks[n].drains.is_empty()),
            None => (false, false),
        };
        if let Some((p, start)) = ended {
            self.emit_slice(c, SliceOwner::Task(p), start, now.saturating_sub(start));
        }
        if let Some(n) = next {
            if first_dispatch {
                self.job_started(n);
            }
            if drains {
                self.drain(n);
            }
        }
        if closed {
            self.note_closed_periods(c);
        }
    }

    #[cold]
    fn note_closed_periods(&mut self, c: usize) {
        let closed = self.cpus[c].sched.take_periods();
        for p in closed {
            self.note_period(c, p);
        }
    }

    fn trace_thread(&mut self, c: usize, ti: usize) {
        let start = self.cpus[c].slice_start;
        let len = self.now.saturating_sub(start);
        self.emit_slice(c, SliceOwner::Task(ti), start, len);
    }

    /// One place where a slice of CPU time goes to both slice consumers:
    /// the record's bounded timeline and, when asked, the `--trace` log.
    #[inline]
    fn emit_slice(&mut self, c: usize, who: SliceOwner, start: Nanos, len: Nanos) {
        // Past the record's window and without --trace nobody takes it.
        if len.is_zero() || (self.trace.is_none() && start >= self.timeline.window) {
            return;
        }
        self.emit_slice_to_logs(c, who, start, len);
    }

    fn emit_slice_to_logs(&mut self, c: usize, who: SliceOwner, start: Nanos, len: Nanos) {
        let (label, name, kind, track) = match who {
            SliceOwner::Source(i) => (&self.sources[i].kind, &self.sources[i].name, "stolen", 0),
            SliceOwner::Task(ti) => {
                let n = &self.tasks[ti].stats.name;
                (n, n, "run", ti as u32 + 1)
            }
        };
        let logs = SliceLogs {
            timeline: &mut self.timeline,
            trace: &mut self.trace,
            trace_cap: self.trace_cap,
            trace_dropped: &mut self.trace_dropped,
        };
        logs.push(c, label, kind, name, track, start, len);
    }

    fn note_period(&mut self, c: usize, p: PeriodStat) {
        let ti = self.cpus[c].thread_task.get(p.thread).copied();
        let Some(ti) = ti else { return };
        let name = self.tasks[ti].stats.name.to_string();
        if let Some(tot) = self.period_totals.iter_mut().find(|x| x.task == name) {
            tot.periods += 1;
            if !p.hit {
                tot.misses += 1;
            }
            tot.received += p.received;
            tot.stolen += p.stolen;
            tot.requested += p.requested;
        }
        if self.periods.len() < MAX_PERIODS {
            self.periods.push((name, p));
        } else {
            self.periods_dropped += 1;
        }
    }

    /// Arms CPU `c`'s wake-up for its next change. Always inlined into
    /// its one caller, [`Sim::cpu_update`].
    #[inline(always)]
    fn arm(&mut self, c: usize) {
        let now = self.now;
        let cpu = &self.cpus[c];
        let at = if cpu.stall_until > now {
            Some(cpu.stall_until)
        } else if let Some(h) = cpu.bh.front() {
            Some(now + h.remaining)
        } else {
            let seg_end = if cpu.seg_end > now {
                (cpu.seg_end != Nanos::MAX).then_some(cpu.seg_end)
            } else {
                // Only when a runaway stopped the settling: a compute
                // segment is due at once, a lock step waits.
                cpu.running.and_then(|ti| match self.tasks[ti].cur {
                    Seg::Compute(_) => Some(now),
                    _ => None,
                })
            };
            match (seg_end, cpu.until) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            }
        };
        // The pending wake-up's time is its key's: one place holds it.
        let old = self.wake[c];
        if at == (old != NO_KEY).then(|| key_time(old)) {
            return;
        }
        if self.wake.len() == 1 {
            // One CPU: its wake-up is the earliest, and no stale keys are
            // tracked (see `next_is_now`).
            self.wake[0] = match at {
                Some(t) => {
                    self.seq += 1;
                    key(t, self.seq)
                }
                None => NO_KEY,
            };
            return;
        }
        if old != NO_KEY {
            self.stale.push(old);
            if self.stale.len() > self.stale_cap {
                let cur = self.cur_key;
                self.stale.retain(|&s| s > cur);
                self.stale_cap = (self.stale.len() * 2).max(64);
            }
        }
        let k = match at {
            Some(t) => {
                self.seq += 1;
                key(t, self.seq)
            }
            None => NO_KEY,
        };
        self.wake[c] = k;
        if k < self.wake[self.wake_min] {
            self.wake_min = c;
        } else if c == self.wake_min {
            self.rescan_wake_min();
        }
    }

    /// Out of line: once per run, and inlined it sat among the event
    /// loop's code.
    #[inline(never)]
    pub(crate) fn finish(mut self, interrupted: bool) -> Outcome {
        let end = if interrupted { self.now } else { self.end };
        self.now = end;
        for c in 0..self.cpus.len() {
            self.cpu_sync(c);
            if let Some(start) = self.cpus[c].steal_start.take() {
                self.end_steal(c, start);
            }
            // Close the periods that ended exactly at the end.
            let _ = self.cpus[c].sched.pick(end);
            let closed = self.cpus[c].sched.take_periods();
            for p in closed {
                self.note_period(c, p);
            }
            if let Some(ti) = self.cpus[c].running {
                self.trace_thread(c, ti);
            }
        }
        for x in &self.sources {
            if x.dropped > 0 {
                self.warnings.push(format!(
                    "cpu {}: {} pieces of {} work from '{}' were dropped: more than {MAX_BH_QUEUE} were waiting at interrupt level",
                    x.cpu, x.dropped, x.kind, x.name
                ));
            }
        }
        // A job still pending after its deadline has missed it, whether it
        // would have finished later or not: counted here, as a completion
        // would have counted it. A deadline exactly at the end is not yet
        // past (a job finishing at that instant is on time).
        for t in &mut self.tasks {
            let late = |release: Nanos| t.deadline.is_some_and(|d| release + d < end);
            let pending = u64::from(t.active && late(t.job_release))
                + t.backlog.iter().filter(|&&r| late(r)).count() as u64;
            t.stats.deadline_misses += pending;
            t.stats.latency.add_missed(pending);
        }
        // Fold the recorders' pending counts once here rather than in a
        // copy at every read of the outcome.
        for t in &mut self.tasks {
            t.stats.latency.settle();
            t.stats.interval.settle();
            t.stats.response.settle();
        }
        for s in &mut self.streams {
            if let Some(p) = s.paused_since.take() {
                s.stats.paused_ns += end - p;
            }
        }
        Outcome {
            seed: self.seed,
            duration: self.end,
            ended_at: end,
            interrupted,
            events: self.events,
            picks: self.picks,
            tasks: parts(self.tasks, |t| t.stats),
            sources: self.sources,
            cpus: parts(self.cpus, |c| c.stolen),
            periods: self.periods,
            periods_dropped: self.periods_dropped,
            period_totals: self.period_totals,
            streams: parts(self.streams, |s| s.stats),
            spikes: self.spikes,
            spikes_dropped: self.spikes_dropped,
            trace: self.trace.unwrap_or_default(),
            trace_dropped: self.trace_dropped,
            timeline: self.timeline,
            warnings: self.warnings,
            clock: self.clock_desc,
            constraints: Vec::new(),
            multiprocessor: None,
        }
    }
}
