//! The event loop and the machine model.
//!
//! Time only moves by popping the event queue, keyed by (time, sequence)
//! so that events at the same instant run in the order they were made.
//! Each CPU is a small state machine with three levels, highest first:
//! a bus stall or hypervisor steal (nothing runs, not even the clock
//! interrupt), bottom-half work (interrupts and DPCs, FIFO, seed 000 §2:
//! "all queued DPCs are executed … just prior to starting the selected
//! thread"), and the thread the scheduler core picked. Whenever the state of
//! a CPU may change, [`Sim::cpu_update`] accounts progress since the last
//! change, completes what finished, asks the scheduler, and arms one wake
//! event for the next change.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};

use punctual_record::{Metric, Recorder, Timeline};
use punctual_sched::{
    Class, FeedbackController, LockId, LockProtocol, PeriodStat, Reservation, RezKind, SchedConfig,
    Scheduler, StolenInterval,
};
use punctual_units::Nanos;

use crate::queue::{key, key_time, EvQueue, NO_KEY};
use crate::rng::Rng;
use crate::scenario::{index_by_name, Dist, Scenario, ScenarioError, MAX_DURATION};

/// The seed used when neither the scenario nor the command line gives one.
pub const DEFAULT_SEED: u64 = 0x5EED_0000_0001;

/// How long a run is when the scenario does not say.
pub const DEFAULT_DURATION: Nanos = Nanos::from_secs(10);

/// Stored periods in the record; later ones only count in the summary.
pub const MAX_PERIODS: usize = 10_000;

/// Spikes kept in the record.
pub const MAX_SPIKES: usize = 1_000;

/// Releases queued behind a running job before further ones count as lost.
const MAX_BACKLOG: usize = 10_000;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Level {
    Dpc,
    Irq,
    Stall,
    Steal,
}

impl Level {
    fn kind(self) -> &'static str {
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

/// A named source of stolen time and what it took.
#[derive(Clone, Debug)]
pub struct SourceStats {
    pub cpu: u32,
    pub kind: String,
    pub name: String,
    pub count: u64,
    pub total: Nanos,
    pub max: Nanos,
}

#[derive(Clone, Copy, Debug)]
enum Action {
    None,
    Release { task: usize, nominal: Nanos },
}

#[derive(Clone, Debug)]
struct BhItem {
    remaining: Nanos,
    len: Nanos,
    src: usize,
    visible: bool,
    action: Action,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum TaskKind {
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
enum Seg {
    Compute(Nanos),
    Lock(LockId),
    Unlock(LockId),
}

/// Per-task results the record and sweeps are built from.
#[derive(Clone, Debug)]
pub struct TaskStats {
    pub name: String,
    pub cpu: u32,
    pub period: Option<Nanos>,
    pub latency: Recorder,
    pub interval: Recorder,
    pub response: Recorder,
    pub jobs: u64,
    pub releases: u64,
    pub deadline_misses: u64,
    pub preemptions: u64,
    pub backlog_lost: u64,
    pub reserved: bool,
    pub rez_kind: Option<String>,
    pub need: Option<Nanos>,
}

struct Task {
    kind: TaskKind,
    cpu: usize,
    tid: usize,
    period: Option<Nanos>,
    phase: Nanos,
    sleep: Option<Dist>,
    exec: Dist,
    deadline: Option<Nanos>,
    critical: Option<(LockId, Nanos, Dist)>,
    stop: Option<Nanos>,
    edf: bool,
    drains: Vec<usize>,
    rng: Rng,
    active: bool,
    started: bool,
    segs: [Seg; 5],
    /// The current segment, `segs[seg]` (once past the last, `segs[4]` or
    /// the one after the last, as `seg.min(4)` indexes; no one reads it
    /// then, as the job is over), with the time already run taken off a
    /// compute segment. Kept apart so that the three readers of every event
    /// (`cpu_sync`, `advance_task`, `arm`) load it at a fixed place rather
    /// than through `seg`.
    cur: Seg,
    nseg: usize,
    seg: usize,
    job_release: Nanos,
    job_deadline: Option<Nanos>,
    backlog: VecDeque<Nanos>,
    last_start: Option<Nanos>,
    stats: TaskStats,
    spike_threshold: Nanos,
}

impl Task {
    /// Where its current segment would end if it ran from `now` on, as
    /// [`Cpu::seg_end`] keeps it.
    #[inline(always)]
    fn seg_end_from(&self, now: Nanos) -> Nanos {
        match self.cur {
            _ if !self.active => Nanos::MAX,
            Seg::Compute(r) if r.0 == u64::MAX => Nanos::MAX,
            Seg::Compute(r) => now + r,
            Seg::Lock(_) | Seg::Unlock(_) => Nanos::ZERO,
        }
    }

    /// Moves to the next segment.
    #[inline]
    fn next_seg(&mut self) {
        self.seg += 1;
        self.cur = self.segs[self.seg.min(4)];
    }
}

struct Timer {
    cpu: usize,
    period: Nanos,
    rounding: bool,
    task: usize,
    src: usize,
    dpc_cost: Nanos,
    /// Next time the timer should fire by its own books (T_next).
    next: Nanos,
    /// When the kernel timer it armed expires.
    due: Nanos,
}

enum NoiseKind {
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

struct Noise {
    cpu: usize,
    src: usize,
    level: Level,
    kind: NoiseKind,
    duration: Dist,
    phase: Nanos,
    k: u64,
    stop: Option<Nanos>,
    rng: Rng,
}

/// What a stream of packets did.
#[derive(Clone, Debug, Default)]
pub struct StreamStats {
    pub name: String,
    pub arrived: u64,
    pub delivered: u64,
    pub lost: u64,
    pub max_fill: u64,
    pub capacity: u64,
    pub paused_ns: Nanos,
}

struct Stream {
    cpu: usize,
    interval: Nanos,
    /// Mean Poisson gap: 1e9 over the rate the whole interval gives.
    mean_gap_ns: f64,
    poisson: bool,
    capacity: u64,
    flow_control: bool,
    drainer: usize,
    irq: (usize, Nanos),
    dpc: (usize, Nanos),
    stop: Option<Nanos>,
    fill: u64,
    paused_since: Option<Nanos>,
    rng: Rng,
    stats: StreamStats,
}

/// Per-CPU stolen-time accounting.
#[derive(Clone, Debug)]
pub struct CpuStolen {
    pub total: Nanos,
    pub intervals: u64,
    pub max: Nanos,
    pub timeline: Timeline,
}

struct Cpu {
    sched: Scheduler,
    thread_task: Vec<usize>,
    bh: VecDeque<BhItem>,
    stall_until: Nanos,
    stall_src: usize,
    running: Option<usize>,
    /// When the running task's compute segment ends, absolute; zero (due at
    /// once) for a lock or unlock step, `Nanos::MAX` when nothing of it
    /// can be due (idle, a background thread, an inactive task). Kept here
    /// rather than as the
    /// remaining time in the task's `cur`, so that thread-level progress
    /// costs nothing per event and the wake-up is read off directly:
    /// interrupt-level work pushes it back by the time it takes. The
    /// task's `cur` holds its remaining time only while it is off the CPU
    /// (written back when it is switched out).
    seg_end: Nanos,
    since: Nanos,
    until: Option<Nanos>,
    need_pick: bool,
    /// A release at this instant left its re-pick to the end of the
    /// instant (see [`Sim::release`]).
    deferred: bool,
    tick_pending: bool,
    steal_start: Option<Nanos>,
    steal_vis: Nanos,
    steal_invis: Nanos,
    stolen: CpuStolen,
    /// The stolen-time timeline bin the last interval fell in:
    /// `[start, end)` of `stolen.timeline.values_ns[idx]`, empty until one
    /// is known. Nearly every stolen interval lands in the same bin as the
    /// one before (a bin is a thousandth of the run), and testing the cached
    /// bounds spares the 64-bit division that finds the bin.
    bin: (Nanos, Nanos, usize),
    slice_start: Nanos,
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
enum EvKind {
    Tick { cpu: u32, k: u64 },
    TimerDue { timer: u32 },
    Release { task: u32, nominal: Nanos },
    Noise { idx: u32 },
    Stream { idx: u32 },
}

/// One slice of a Chrome/Perfetto trace.
#[derive(Clone, Debug)]
pub struct TraceSlice {
    pub cpu: u32,
    /// 0 for the interrupt/DPC track, task index + 1 for threads.
    pub track: u32,
    pub name: String,
    pub start: Nanos,
    pub dur: Nanos,
}

/// Options of one run that are not part of the scenario.
#[derive(Clone, Debug, Default)]
pub struct RunOptions {
    pub seed: Option<u64>,
    pub duration: Option<Nanos>,
    /// Collect trace slices, at most this many.
    pub trace_cap: Option<usize>,
    /// Span of simulated time kept in the record's bounded slice log
    /// (`extra.timeline`); `None` means [`TIMELINE_WINDOW_DEFAULT`], zero
    /// keeps none. A window rather than the whole run because the report
    /// embeds it and a Gantt chart of minutes of 1 ms periods is unreadable.
    pub timeline_window: Option<Nanos>,
}

/// The record keeps this much of the start of a run as a slice log.
pub const TIMELINE_WINDOW_DEFAULT: Nanos = Nanos(200_000_000);
/// At most this many slices in the record's log, so records stay small.
pub const TIMELINE_CAP: usize = 5000;

/// Whose time a slice of CPU is: a noise source's handler or a task.
#[derive(Clone, Copy)]
enum SliceOwner {
    Source(usize),
    Task(usize),
}

/// One slice of the record's execution timeline.
#[derive(Clone, Debug)]
pub struct TimelineSlice {
    pub cpu: u32,
    /// Row of the chart: the task's name, or the kind of the interrupt
    /// source (`irq`, `dpc`, …) whose handler stole the time.
    pub track: String,
    /// `run` (a thread had the CPU) or `stolen` (interrupts, DPCs or the
    /// hypervisor had it).
    pub kind: &'static str,
    pub name: String,
    pub start: Nanos,
    pub len: Nanos,
}

/// The bounded slice log of the first `window` of a run.
#[derive(Clone, Debug, Default)]
pub struct TimelineLog {
    pub window: Nanos,
    pub slices: Vec<TimelineSlice>,
    /// Slices inside the window that did not fit under [`TIMELINE_CAP`].
    pub dropped: u64,
}

impl TimelineLog {
    pub(crate) fn push(
        &mut self,
        cpu: usize,
        track: &str,
        kind: &'static str,
        name: &str,
        start: Nanos,
        len: Nanos,
    ) {
        if len.is_zero() || start >= self.window {
            return;
        }
        if self.slices.len() >= TIMELINE_CAP {
            self.dropped += 1;
            return;
        }
        let end = Nanos((start.0 + len.0).min(self.window.0));
        self.slices.push(TimelineSlice {
            cpu: cpu as u32,
            track: track.to_string(),
            kind,
            name: name.to_string(),
            start,
            len: end - start,
        });
    }
}

/// Everything a run produced.
pub struct Outcome {
    pub seed: u64,
    pub duration: Nanos,
    pub ended_at: Nanos,
    pub interrupted: bool,
    pub events: u64,
    pub picks: u64,
    pub tasks: Vec<TaskStats>,
    pub sources: Vec<SourceStats>,
    pub cpus: Vec<CpuStolen>,
    pub periods: Vec<(String, PeriodStat)>,
    pub periods_dropped: u64,
    pub period_totals: Vec<PeriodTotals>,
    pub streams: Vec<StreamStats>,
    pub spikes: Vec<(Nanos, u32, String, Nanos)>,
    pub spikes_dropped: u64,
    pub trace: Vec<TraceSlice>,
    pub trace_dropped: u64,
    pub timeline: TimelineLog,
    pub warnings: Vec<String>,
    pub clock: String,
    /// Plan mode: the `[[constraint]]` queries and what became of them.
    pub constraints: Vec<crate::planmode::ConstraintResult>,
}

/// Totals per reserved task.
#[derive(Clone, Debug, Default)]
pub struct PeriodTotals {
    pub task: String,
    pub kind: String,
    pub periods: u64,
    pub misses: u64,
    pub need: Nanos,
    pub received: Nanos,
    pub stolen: Nanos,
    pub requested: Nanos,
}

pub struct Sim {
    now: Nanos,
    seq: u64,
    queue: EvQueue<EvKind>,
    /// One pending wake-up per CPU as a queue key (time, sequence), or
    /// [`NO_KEY`]. A CPU re-arms far more often than its wake-ups fire
    /// (every interrupt, release or pick may move it); in a heap each
    /// re-arm left the superseded wake-up behind to be popped and thrown
    /// away. The sequence number is drawn from the same counter as queued
    /// events, so ties with them resolve first-in first-out as before.
    wake: Vec<u128>,
    /// The CPU whose wake-up is earliest.
    wake_min: usize,
    /// Superseded wake-up keys, tracked only on machines with more than
    /// one CPU (see [`Sim::next_is_now`]).
    stale: Vec<u128>,
    stale_cap: usize,
    /// Key of the event being handled.
    cur_key: u128,
    /// Where the run ends, as a queue key: the end of the simulated
    /// duration, ordered after the events queued before it was set (a
    /// stream starting exactly at the end still arrives), before all later
    /// ones. Not an event in the queue, so the queue stays one entry
    /// shorter.
    end_key: u128,
    cpus: Vec<Cpu>,
    tasks: Vec<Task>,
    timers: Vec<Timer>,
    noises: Vec<Noise>,
    streams: Vec<Stream>,
    sources: Vec<SourceStats>,
    tick_ps: Option<u128>,
    clock_cost: Nanos,
    clock_src: usize,
    oneshot: bool,
    end: Nanos,
    seed: u64,
    events: u64,
    picks: u64,
    any_deferred: bool,
    periods: Vec<(String, PeriodStat)>,
    periods_dropped: u64,
    period_totals: Vec<PeriodTotals>,
    spikes: Vec<(Nanos, u32, String, Nanos)>,
    spikes_dropped: u64,
    trace: Option<Vec<TraceSlice>>,
    trace_cap: usize,
    trace_dropped: u64,
    timeline: TimelineLog,
    warnings: Vec<String>,
    clock_desc: String,
}

/// Inlined: every job draws its execution time here, and the call and the
/// match cost more than a uniform draw itself.
#[inline(always)]
fn sample(d: &Dist, rng: &mut Rng) -> Nanos {
    match d {
        Dist::Const(x) => *x,
        Dist::Uniform(a, b) => Nanos(rng.range(a.0, b.0)),
        Dist::Exp(m) => sample_exp(*m, rng),
        Dist::Choice(v) => v[rng.range(0, v.len() as u64 - 1) as usize],
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

/// An exponential gap of mean `mean_ns` (callers keep `1e9 / rate` rather
/// than dividing at every arrival).
#[inline]
fn exp_interval(mean_ns: f64, rng: &mut Rng) -> Nanos {
    Nanos((rng.exp1() * mean_ns).max(1.0) as u64)
}

impl Sim {
    /// Builds the machine from a scenario, checking every cross-reference.
    pub fn new(scn: &Scenario, opts: &RunOptions) -> Result<Sim, ScenarioError> {
        let f = &scn.spec;
        let seed = opts.seed.or(f.sim.seed).unwrap_or(DEFAULT_SEED);
        let end = opts
            .duration
            .or(f.sim.duration.map(|d| d.0))
            .unwrap_or(DEFAULT_DURATION);
        if end.is_zero() || end > MAX_DURATION {
            return Err(scn.error("sim.duration must be greater than zero and at most 100 years"));
        }
        let ncpu = f.sim.cpus;
        if ncpu == 0 || ncpu > 256 {
            return Err(scn.error(format!("sim.cpus = {ncpu}: must be 1 to 256")));
        }
        let cap = f.sim.admission_cap.unwrap_or(0.85);
        if !(cap > 0.0 && cap <= 1.0) {
            return Err(scn.error(format!("sim.admission_cap = {cap}: must be in (0, 1]")));
        }
        let ts_rez = match &f.sim.timeshare_reservation {
            None => None,
            Some(s) => {
                let (a, b) = s.split_once('/').ok_or_else(|| {
                    scn.error(format!(
                        "sim.timeshare_reservation '{s}' must look like 7ms/50ms"
                    ))
                })?;
                let pa = punctual_units::parse_duration(a);
                let pb = punctual_units::parse_duration(b);
                match (pa, pb) {
                    (Ok(a), Ok(b)) if !b.is_zero() && a <= b && !a.is_zero() => Some((a, b)),
                    _ => {
                        return Err(scn.error(format!(
                            "sim.timeshare_reservation '{s}' must be amount/period with 0 < amount ≤ period"
                        )))
                    }
                }
            }
        };
        let cfg = SchedConfig {
            quantum: f.sim.quantum.map(|d| d.0).unwrap_or(Nanos::from_ms(20)),
            admission_cap: cap,
            admission: f.sim.admission,
            timeshare_reservation: ts_rez,
        };
        if cfg.quantum.is_zero() {
            return Err(scn.error("sim.quantum must be greater than zero"));
        }
        let mut cpus = Vec::new();
        for _ in 0..ncpu {
            let sched = Scheduler::new(cfg.clone())
                .map_err(|e| scn.error(format!("sim.timeshare_reservation: {e}")))?;
            let bin = Nanos((end.0 / 1000).max(Nanos::from_ms(1).0));
            cpus.push(Cpu {
                sched,
                thread_task: Vec::new(),
                bh: VecDeque::new(),
                stall_until: Nanos::ZERO,
                stall_src: 0,
                running: None,
                seg_end: Nanos::MAX,
                since: Nanos::ZERO,
                until: None,
                need_pick: true,
                deferred: false,
                tick_pending: false,
                steal_start: None,
                steal_vis: Nanos::ZERO,
                steal_invis: Nanos::ZERO,
                stolen: CpuStolen {
                    total: Nanos::ZERO,
                    intervals: 0,
                    max: Nanos::ZERO,
                    timeline: Timeline::new(bin),
                },
                bin: (Nanos::ZERO, Nanos::ZERO, 0),
                slice_start: Nanos::ZERO,
            });
        }
        let mut sim = Sim {
            now: Nanos::ZERO,
            seq: 0,
            queue: EvQueue::new(),
            wake: vec![NO_KEY; ncpu as usize],
            wake_min: 0,
            stale: Vec::new(),
            stale_cap: 64,
            cur_key: 0,
            end_key: NO_KEY,
            cpus,
            tasks: Vec::new(),
            timers: Vec::new(),
            noises: Vec::new(),
            streams: Vec::new(),
            sources: Vec::new(),
            tick_ps: None,
            clock_cost: Nanos::ZERO,
            clock_src: 0,
            oneshot: true,
            end,
            seed,
            events: 0,
            picks: 0,
            any_deferred: false,
            periods: Vec::new(),
            periods_dropped: 0,
            period_totals: Vec::new(),
            spikes: Vec::new(),
            spikes_dropped: 0,
            trace: opts.trace_cap.map(|_| Vec::new()),
            trace_cap: opts.trace_cap.unwrap_or(0),
            trace_dropped: 0,
            timeline: TimelineLog {
                window: opts.timeline_window.unwrap_or(TIMELINE_WINDOW_DEFAULT),
                ..Default::default()
            },
            warnings: Vec::new(),
            clock_desc: String::new(),
        };
        let spike_threshold = f
            .sim
            .spike_threshold
            .map(|d| d.0)
            .unwrap_or(Nanos::from_ms(1));
        let check_cpu = |cpu: u32, span: std::ops::Range<usize>, what: &str| {
            if cpu >= ncpu {
                Err(scn.error_at(
                    span,
                    format!("{what}: cpu {cpu} does not exist (sim.cpus = {ncpu})"),
                ))
            } else {
                Ok(())
            }
        };

        // Clock.
        let ck = f.clock.kind.as_ref().map(|k| k.get_ref().as_str());
        match ck {
            None | Some("tick") if f.clock.period.is_some() || f.clock.hz.is_some() => {
                let ps = match (f.clock.period, f.clock.hz) {
                    (Some(p), None) => p.0,
                    (None, Some(hz)) if hz > 0 && hz <= 1_000_000 => {
                        1_000_000_000_000u128 / hz as u128
                    }
                    _ => {
                        return Err(
                            scn.error("clock: give exactly one of period or hz (1 to 1000000)")
                        )
                    }
                };
                if ps < 1_000_000 {
                    return Err(scn.error("clock.period must be at least 1us"));
                }
                sim.tick_ps = Some(ps);
                sim.oneshot = false;
                sim.clock_desc = format!("tick {} ps", ps);
            }
            None | Some("oneshot") => {
                if ck == Some("oneshot") && (f.clock.period.is_some() || f.clock.hz.is_some()) {
                    return Err(scn.error("clock: a oneshot clock has no period or hz"));
                }
                sim.clock_desc = "oneshot".into();
            }
            Some(other) => {
                let sp = f.clock.kind.as_ref().map(|k| k.span()).unwrap_or(0..0);
                return Err(scn.error_at(sp, format!("clock.kind '{other}': use tick or oneshot")));
            }
        }
        sim.clock_cost = f.clock.cost.map(|d| d.0).unwrap_or(Nanos::ZERO);

        // Locks.
        let lock_names = index_by_name(&f.lock, |l| l.name.get_ref());
        if lock_names.len() != f.lock.len() {
            return Err(scn.error("two [[lock]] entries share a name"));
        }
        // Locks live per CPU: remember each one's CPU from its first user.
        let mut lock_cpu: Vec<Option<(usize, LockId)>> = vec![None; f.lock.len()];
        for l in &f.lock {
            match l.protocol.get_ref().as_str() {
                "none" | "inherit" => {}
                "ceiling" if l.ceiling.is_some() => {}
                "ceiling" => {
                    return Err(scn.error_at(
                        l.name.span(),
                        format!(
                            "lock '{}': protocol ceiling needs a ceiling priority",
                            l.name.get_ref()
                        ),
                    ))
                }
                p => {
                    return Err(scn.error_at(
                        l.protocol.span(),
                        format!(
                            "lock '{}': protocol '{p}' (use none, inherit or ceiling)",
                            l.name.get_ref()
                        ),
                    ))
                }
            }
        }

        // Tasks.
        let task_names = index_by_name(&f.task, |t| t.name.get_ref());
        if task_names.len() != f.task.len() {
            return Err(scn.error("two [[task]] entries share a name"));
        }
        for (i, t) in f.task.iter().enumerate() {
            let name = t.name.get_ref().clone();
            let at = |m: String| scn.error_at(t.name.span(), format!("task '{name}': {m}"));
            check_cpu(t.cpu, t.name.span(), &format!("task '{name}'"))?;
            let kind = match t.kind.get_ref().as_str() {
                "periodic" => TaskKind::Periodic,
                "timer" => TaskKind::Timer,
                "background" => TaskKind::Background,
                "drainer" => TaskKind::Drainer,
                "sleeper" => TaskKind::Sleeper,
                k => {
                    return Err(scn.error_at(
                        t.kind.span(),
                        format!("task '{name}': kind '{k}' (use periodic, timer, background, drainer or sleeper)"),
                    ))
                }
            };
            if kind == TaskKind::Periodic && t.period.is_none_or(|p| p.0.is_zero()) {
                return Err(at("a periodic task needs a period greater than zero".into()));
            }
            if kind == TaskKind::Sleeper && t.sleep.is_none() {
                return Err(at("a sleeper task needs sleep".into()));
            }
            if t.buffers.is_some_and(|b| b < 2) {
                return Err(at(
                    "buffers must be at least 2 (one being filled, one played)".into(),
                ));
            }
            if t.buffers.is_some() && t.period.is_none() {
                return Err(at(
                    "buffers needs a period (the length of one buffer)".into()
                ));
            }
            let class_name = t.class.as_ref().map(|c| c.get_ref().as_str());
            let class = if let Some(r) = &t.reserve {
                if t.priority.is_some() || class_name.is_some() {
                    return Err(at("a reserved task has no priority or class".into()));
                }
                if r.period.0.is_zero() || r.amount.0.is_zero() || r.amount.0 > r.period.0 {
                    return Err(at("reserve needs 0 < amount ≤ period".into()));
                }
                if !(r.over > -1.0 && r.over.is_finite()) {
                    return Err(at(format!("reserve.over = {} must be above -1", r.over)));
                }
                let amount =
                    Nanos(((r.amount.0 .0 as f64) * (1.0 + r.over)).round() as u64).min(r.period.0);
                let kname = r
                    .kind
                    .as_ref()
                    .map(|k| k.get_ref().as_str())
                    .unwrap_or("rez");
                let rk = match kname {
                    "rez" => RezKind::Rez,
                    "rez-c" => RezKind::RezC,
                    "rez-fb" => {
                        let g = r.gain.unwrap_or(0.5);
                        if !(g > 0.0 && g <= 2.0) {
                            return Err(at(format!("reserve.gain = {g} must be in (0, 2]")));
                        }
                        let min = r.min.map(|d| d.0).unwrap_or(Nanos::ZERO);
                        let max = r.max.map(|d| d.0).unwrap_or(r.period.0);
                        RezKind::RezFb(FeedbackController::new(amount, g, min, max))
                    }
                    k => {
                        let sp = r.kind.as_ref().map(|x| x.span()).unwrap_or(t.name.span());
                        return Err(scn.error_at(
                            sp,
                            format!("task '{name}': reserve.kind '{k}' (use rez, rez-c or rez-fb)"),
                        ));
                    }
                };
                Class::Reserved(Reservation {
                    amount,
                    period: r.period.0,
                    need: r.amount.0,
                    phase: t.phase.0,
                    kind: rk,
                    hard: r.hard,
                })
            } else {
                match (class_name, t.priority) {
                    (Some("edf"), None) => Class::Edf,
                    (Some("timeshare"), None) => Class::TimeShare,
                    (Some("fixed") | None, Some(p)) if (1..=31).contains(&p) => {
                        Class::Fixed { priority: p }
                    }
                    (None, None) => Class::TimeShare,
                    (Some("fixed") | None, Some(p)) => {
                        return Err(at(format!("priority {p} is outside 1..31")))
                    }
                    (Some(c), _) => {
                        return Err(at(format!(
                            "class '{c}' (use fixed with a priority, edf, or timeshare without one)"
                        )))
                    }
                }
            };
            let edf = class == Class::Edf;
            let reserved = matches!(class, Class::Reserved(_));
            let rez_kind = match &class {
                Class::Reserved(r) => Some(r.kind.name().to_string()),
                _ => None,
            };
            let need = match &class {
                Class::Reserved(r) => Some(r.need),
                _ => None,
            };
            let cpu = t.cpu as usize;
            let tid = sim.cpus[cpu].sched.add_thread(class).map_err(|e| {
                at(format!(
                    "{e} (set sim.admission = false to simulate it anyway)"
                ))
            })?;
            if !f.sim.admission && sim.cpus[cpu].sched.reserved_fraction() > cap + 1e-12 && reserved
            {
                sim.warnings.push(format!(
                    "cpu {cpu}: reservations total {:.3} of the CPU, over the admission cap {cap} (admission is off)",
                    sim.cpus[cpu].sched.reserved_fraction()
                ));
            }
            sim.cpus[cpu].thread_task.push(i);
            let critical = match &t.critical {
                None => None,
                Some(c) => {
                    let lname = c.lock.get_ref();
                    let Some(&li) = lock_names.get(lname) else {
                        return Err(scn.error_at(
                            c.lock.span(),
                            format!("task '{name}': no [[lock]] named '{lname}'"),
                        ));
                    };
                    let Some(hold) = c.hold.clone() else {
                        return Err(scn.error_at(
                            c.lock.span(),
                            format!("task '{name}': lock '{lname}' is never released (critical.hold is missing)"),
                        ));
                    };
                    let id = match lock_cpu[li] {
                        Some((lc, id)) if lc == cpu => id,
                        Some((lc, _)) => {
                            return Err(scn.error_at(
                                c.lock.span(),
                                format!("task '{name}': lock '{lname}' is used on cpu {lc} and cpu {cpu}; locks are per CPU here"),
                            ))
                        }
                        None => {
                            let ls = &f.lock[li];
                            let proto = match ls.protocol.get_ref().as_str() {
                                "inherit" => LockProtocol::Inherit,
                                "ceiling" => LockProtocol::Ceiling(ls.ceiling.unwrap_or(31)),
                                _ => LockProtocol::None,
                            };
                            let id = sim.cpus[cpu].sched.add_lock(proto);
                            lock_cpu[li] = Some((cpu, id));
                            id
                        }
                    };
                    Some((id, c.at.0, hold))
                }
            };
            let exec = t.exec.clone().unwrap_or(Dist::Const(Nanos::from_us(10)));
            if kind == TaskKind::Background && (t.exec.is_some() || t.period.is_some()) {
                return Err(at(
                    "a background task is always busy: no exec or period".into()
                ));
            }
            let deadline = match (t.deadline, t.buffers, t.period) {
                (Some(d), _, _) => Some(d.0),
                (None, Some(n), Some(p)) => Some(Nanos(
                    p.0 .0.saturating_mul(n as u64 - 1).min(MAX_DURATION.0),
                )),
                (None, None, Some(p)) if kind == TaskKind::Periodic => Some(p.0),
                _ => None,
            };
            let period = t.period.map(|p| p.0);
            sim.tasks.push(Task {
                kind,
                cpu,
                tid,
                period,
                phase: t.phase.0,
                sleep: t.sleep.clone(),
                exec,
                deadline,
                critical,
                stop: t.stop.map(|d| d.0),
                edf,
                drains: Vec::new(),
                rng: Rng::new(seed, 1_000 + i as u64),
                active: false,
                started: false,
                segs: [Seg::Compute(Nanos::ZERO); 5],
                cur: Seg::Compute(Nanos::ZERO),
                nseg: 0,
                seg: 0,
                job_release: Nanos::ZERO,
                job_deadline: None,
                backlog: VecDeque::new(),
                last_start: None,
                spike_threshold,
                stats: TaskStats {
                    name,
                    cpu: t.cpu,
                    period,
                    latency: Recorder::new(Nanos(1_000)),
                    interval: Recorder::new(Nanos(1_000)),
                    response: Recorder::new(Nanos(1_000)),
                    jobs: 0,
                    releases: 0,
                    deadline_misses: 0,
                    preemptions: 0,
                    backlog_lost: 0,
                    reserved,
                    rez_kind,
                    need,
                },
            });
            if reserved {
                let kind = sim.tasks[i].stats.rez_kind.clone().unwrap_or_default();
                sim.period_totals.push(PeriodTotals {
                    task: sim.tasks[i].stats.name.clone(),
                    kind,
                    need: sim.tasks[i].stats.need.unwrap_or_default(),
                    ..Default::default()
                });
            }
        }

        // Timers.
        for tm in &f.timer {
            let name = tm.name.get_ref();
            check_cpu(tm.cpu, tm.name.span(), &format!("timer '{name}'"))?;
            let Some(&task) = task_names.get(tm.task.get_ref()) else {
                return Err(scn.error_at(
                    tm.task.span(),
                    format!("timer '{name}': no [[task]] named '{}'", tm.task.get_ref()),
                ));
            };
            if sim.tasks[task].kind != TaskKind::Timer {
                return Err(scn.error_at(
                    tm.task.span(),
                    format!(
                        "timer '{name}': task '{}' must have kind = \"timer\"",
                        tm.task.get_ref()
                    ),
                ));
            }
            if sim.tasks[task].cpu != tm.cpu as usize {
                return Err(scn.error_at(
                    tm.task.span(),
                    format!(
                        "timer '{name}': task '{}' is on another cpu",
                        tm.task.get_ref()
                    ),
                ));
            }
            let rounding = match tm.mode.get_ref().as_str() {
                "rounding" => true,
                "fixed" => false,
                m => {
                    return Err(scn.error_at(
                        tm.mode.span(),
                        format!("timer '{name}': mode '{m}' (use rounding or fixed)"),
                    ))
                }
            };
            if tm.period.0 < Nanos::from_us(1) {
                return Err(scn.error_at(
                    tm.name.span(),
                    format!("timer '{name}': period must be at least 1us"),
                ));
            }
            if rounding && tm.period.0 .0 % 1_000_000 != 0 {
                return Err(scn.error_at(tm.name.span(), format!("timer '{name}': a rounding (multimedia) timer's period is whole milliseconds")));
            }
            let src = sim.add_source(tm.cpu, "dpc", &format!("timer:{name}"));
            sim.timers.push(Timer {
                cpu: tm.cpu as usize,
                period: tm.period.0,
                rounding,
                task,
                src,
                dpc_cost: tm.dpc_cost.map(|d| d.0).unwrap_or(Nanos::ZERO),
                next: tm.period.0,
                due: tm.period.0,
            });
        }

        // Noise.
        for (i, n) in f.noise.iter().enumerate() {
            let name = n.name.get_ref().clone();
            let at = |m: String| scn.error_at(n.name.span(), format!("noise '{name}': {m}"));
            check_cpu(n.cpu, n.name.span(), &format!("noise '{name}'"))?;
            let level = match n
                .level
                .as_ref()
                .map(|l| l.get_ref().as_str())
                .unwrap_or("dpc")
            {
                "dpc" => Level::Dpc,
                "irq" => Level::Irq,
                "stall" => Level::Stall,
                "steal" => Level::Steal,
                l => return Err(at(format!("level '{l}' (use dpc, irq, stall or steal)"))),
            };
            let mut duration = n.duration.clone();
            let kind = match n.kind.get_ref().as_str() {
                "periodic" => {
                    let p = n
                        .period
                        .ok_or_else(|| at("periodic noise needs a period".into()))?;
                    if p.0.is_zero() {
                        return Err(at("period must be greater than zero".into()));
                    }
                    NoiseKind::Periodic {
                        period: p.0,
                        jitter: n.jitter.0,
                    }
                }
                "poisson" => {
                    let r = n
                        .rate
                        .ok_or_else(|| at("poisson noise needs a rate (per second)".into()))?;
                    if !(r > 0.0 && r <= 1e7) {
                        return Err(at(format!("rate {r} must be in (0, 1e7] per second")));
                    }
                    NoiseKind::Poisson { mean_ns: 1e9 / r }
                }
                "bursty" => {
                    let r = n
                        .rate
                        .ok_or_else(|| at("bursty noise needs a rate (per second)".into()))?;
                    if !(r > 0.0 && r <= 1e7) {
                        return Err(at(format!("rate {r} must be in (0, 1e7] per second")));
                    }
                    let (Some(on), Some(off)) = (n.burst_on, n.burst_off) else {
                        return Err(at("bursty noise needs burst_on and burst_off".into()));
                    };
                    if on.0.is_zero() {
                        return Err(at("burst_on must be greater than zero".into()));
                    }
                    NoiseKind::Bursty {
                        mean_ns: 1e9 / r,
                        on: on.0,
                        off: off.0,
                        on_until: Nanos::ZERO,
                    }
                }
                "disk" => {
                    let mode = n
                        .mode
                        .as_ref()
                        .map(|m| m.get_ref().as_str())
                        .unwrap_or("dma");
                    let bw = n
                        .disk_bytes_per_s
                        .ok_or_else(|| at("disk noise needs disk_bytes_per_s".into()))?;
                    let size = n.transfer_bytes.unwrap_or(65_536);
                    if !(bw > 0.0 && bw.is_finite()) || size == 0 {
                        return Err(at(
                            "disk_bytes_per_s and transfer_bytes must be positive".into()
                        ));
                    }
                    let period = Nanos((size as f64 / bw * 1e9).round().max(1.0) as u64);
                    let irq = n.irq_cost.map(|d| d.0).unwrap_or(Nanos::from_us(20));
                    let cost = match mode {
                        "dma" => irq,
                        "pio" => {
                            let pio = n.pio_bytes_per_s.ok_or_else(|| at("pio mode needs pio_bytes_per_s (how fast the CPU copies from the drive)".into()))?;
                            if !(pio > 0.0 && pio.is_finite()) {
                                return Err(at("pio_bytes_per_s must be positive".into()));
                            }
                            irq + Nanos((size as f64 / pio * 1e9).round() as u64)
                        }
                        m => return Err(at(format!("mode '{m}' (use dma or pio)"))),
                    };
                    if duration.is_some() {
                        return Err(at("disk noise derives its duration; remove duration".into()));
                    }
                    duration = Some(Dist::Const(cost.min(period)));
                    NoiseKind::Periodic {
                        period,
                        jitter: Nanos::ZERO,
                    }
                }
                k => {
                    return Err(scn.error_at(
                        n.kind.span(),
                        format!(
                            "noise '{name}': kind '{k}' (use periodic, poisson, bursty or disk)"
                        ),
                    ))
                }
            };
            let duration = duration.ok_or_else(|| at("needs a duration".into()))?;
            let kind_name = if n.kind.get_ref() == "disk" {
                "disk"
            } else {
                level.kind()
            };
            let src = sim.add_source(n.cpu, kind_name, &name);
            sim.noises.push(Noise {
                cpu: n.cpu as usize,
                src,
                level,
                kind,
                duration,
                phase: n.phase.0.max(n.start.map(|d| d.0).unwrap_or(Nanos::ZERO)),
                k: 0,
                stop: n.stop.map(|d| d.0),
                rng: Rng::new(seed, 100_000 + i as u64),
            });
        }

        // Streams.
        for (i, s) in f.stream.iter().enumerate() {
            let name = s.name.get_ref().clone();
            let at = |m: String| scn.error_at(s.name.span(), format!("stream '{name}': {m}"));
            check_cpu(s.cpu, s.name.span(), &format!("stream '{name}'"))?;
            let rate = match (s.rate, s.mbit_s, s.item_bytes) {
                (Some(r), None, None) => r,
                (None, Some(m), Some(b)) if b > 0 => m * 1e6 / 8.0 / b as f64,
                _ => return Err(at("give rate (items/s), or mbit_s and item_bytes".into())),
            };
            if !(rate > 0.0 && rate <= 1e8) {
                return Err(at(format!("rate {rate} items/s must be in (0, 1e8]")));
            }
            if s.capacity == 0 {
                return Err(at("capacity must be at least 1".into()));
            }
            let Some(&drainer) = task_names.get(s.drained_by.get_ref()) else {
                return Err(scn.error_at(
                    s.drained_by.span(),
                    format!(
                        "stream '{name}': no [[task]] named '{}'",
                        s.drained_by.get_ref()
                    ),
                ));
            };
            if sim.tasks[drainer].cpu != s.cpu as usize {
                return Err(scn.error_at(
                    s.drained_by.span(),
                    format!("stream '{name}': its drainer runs on another cpu"),
                ));
            }
            let poisson = match s
                .arrivals
                .as_ref()
                .map(|a| a.get_ref().as_str())
                .unwrap_or("periodic")
            {
                "periodic" => false,
                "poisson" => true,
                a => return Err(at(format!("arrivals '{a}' (use periodic or poisson)"))),
            };
            let irq = sim.add_source(s.cpu, "irq", &format!("{name}:irq"));
            let dpc = sim.add_source(s.cpu, "dpc", &format!("{name}:dpc"));
            sim.tasks[drainer].drains.push(i);
            let interval = Nanos((1e9 / rate).round().max(1.0) as u64);
            sim.streams.push(Stream {
                cpu: s.cpu as usize,
                interval,
                mean_gap_ns: 1e9 / (1e9 / interval.0 as f64),
                poisson,
                capacity: s.capacity,
                flow_control: s.flow_control,
                drainer,
                irq: (irq, s.irq_cost.0),
                dpc: (dpc, s.dpc_cost.0),
                stop: s.stop.map(|d| d.0),
                fill: 0,
                paused_since: None,
                rng: Rng::new(seed, 200_000 + i as u64),
                stats: StreamStats {
                    name,
                    capacity: s.capacity,
                    ..Default::default()
                },
            });
            let start = s.start.map(|d| d.0).unwrap_or(Nanos::ZERO);
            sim.push(start, EvKind::Stream { idx: i as u32 });
        }
        sim.clock_src = sim.add_source(0, "irq", "clock");

        // Initial events.
        sim.seq += 1;
        sim.end_key = key(end, sim.seq);
        if sim.tick_ps.is_some() {
            for c in 0..ncpu {
                sim.push(Nanos::ZERO, EvKind::Tick { cpu: c, k: 0 });
            }
        } else {
            for i in 0..sim.timers.len() {
                let due = sim.timers[i].due;
                sim.push(due, EvKind::TimerDue { timer: i as u32 });
            }
        }
        for i in 0..sim.tasks.len() {
            let t = &sim.tasks[i];
            match t.kind {
                TaskKind::Periodic | TaskKind::Sleeper => {
                    let p = t.phase;
                    sim.push(
                        p,
                        EvKind::Release {
                            task: i as u32,
                            nominal: p,
                        },
                    );
                }
                TaskKind::Background => {
                    let p = t.phase;
                    sim.push(
                        p,
                        EvKind::Release {
                            task: i as u32,
                            nominal: p,
                        },
                    );
                }
                _ => {}
            }
        }
        for i in 0..sim.noises.len() {
            let first = sim.first_noise_time(i);
            if let Some(t) = first {
                sim.push(t, EvKind::Noise { idx: i as u32 });
            }
        }
        Ok(sim)
    }

    fn add_source(&mut self, cpu: u32, kind: &str, name: &str) -> usize {
        self.sources.push(SourceStats {
            cpu,
            kind: kind.to_string(),
            name: name.to_string(),
            count: 0,
            total: Nanos::ZERO,
            max: Nanos::ZERO,
        });
        self.sources.len() - 1
    }

    #[inline]
    fn push(&mut self, t: Nanos, kind: EvKind) {
        self.seq += 1;
        self.queue.push(key(t, self.seq), kind);
    }

    fn first_noise_time(&mut self, i: usize) -> Option<Nanos> {
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
                    self.on_release_event(task as usize, nominal)
                }
                Some(EvKind::Tick { cpu, k }) => self.on_tick(cpu as usize, k),
                Some(EvKind::TimerDue { timer }) => self.on_timer_due(timer as usize),
                Some(EvKind::Noise { idx }) => self.on_noise(idx as usize),
                Some(EvKind::Stream { idx }) => self.on_stream(idx as usize),
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
        let t = &mut self.tasks[i];
        t.stats.releases += 1;
        if t.active {
            if t.kind == TaskKind::Drainer || t.kind == TaskKind::Background {
                return;
            }
            if t.backlog.len() >= MAX_BACKLOG {
                t.stats.backlog_lost += 1;
                t.stats.latency.add_missed(1);
            } else {
                t.backlog.push_back(nominal);
            }
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
        key_time(k.min(self.end_key)) == self.now
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
        let t = &mut self.tasks[i];
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

    /// Seed 000's multimedia timer: fire, advance the next firing time by
    /// the period, fire again while it is in the past; then arm the kernel
    /// timer — for the whole next firing time (fixed), or for a relative
    /// wait rounded to whole milliseconds and never under 1 ms (rounding).
    fn fire_timer(&mut self, ti: usize) {
        let now = self.now;
        let (c, src, cost, task) = {
            let t = &self.timers[ti];
            (t.cpu, t.src, t.dpc_cost, t.task)
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
            self.push_bh(c, src, cost, true, Action::Release { task, nominal });
        }
    }

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
                    cpu.stall_until = until;
                    cpu.stall_src = src;
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
        } else {
            loop {
                if self.runaway(&mut guard, c) {
                    return;
                }
                let cpu = &mut self.cpus[c];
                if cpu.stall_until > now {
                    return;
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
                    return;
                }
                break;
            }
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
        let t = &mut self.tasks[i];
        t.stats.releases += 1;
        if t.active {
            if t.backlog.len() >= MAX_BACKLOG {
                t.stats.backlog_lost += 1;
                t.stats.latency.add_missed(1);
            } else {
                t.backlog.push_back(nominal);
            }
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
        }
        t.active = false;
        if let Some(next) = t.backlog.pop_front() {
            // The next queued job starts when the scheduler next runs it.
            self.begin_job(ti, c, next);
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
        let lat = now.saturating_sub(t.job_release);
        t.stats.latency.record(lat);
        if let Some(prev) = t.last_start {
            t.stats.interval.record(now - prev);
        }
        t.last_start = Some(now);
        if lat > t.spike_threshold {
            if self.spikes.len() < MAX_SPIKES {
                self.spikes
                    .push((now, t.cpu as u32, t.stats.name.clone(), lat));
            } else {
                self.spikes_dropped += 1;
            }
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
        self.timeline.push(c, label, kind, name, start, len);
        if let Some(tr) = &mut self.trace {
            if tr.len() < self.trace_cap {
                tr.push(TraceSlice {
                    cpu: c as u32,
                    track,
                    name: name.clone(),
                    start,
                    dur: len,
                });
            } else {
                self.trace_dropped += 1;
            }
        }
    }

    fn note_period(&mut self, c: usize, p: PeriodStat) {
        let ti = self.cpus[c].thread_task.get(p.thread).copied();
        let Some(ti) = ti else { return };
        let name = self.tasks[ti].stats.name.clone();
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

    fn finish(mut self, interrupted: bool) -> Outcome {
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
            tasks: self.tasks.into_iter().map(|t| t.stats).collect(),
            sources: self.sources,
            cpus: self.cpus.into_iter().map(|c| c.stolen).collect(),
            periods: self.periods,
            periods_dropped: self.periods_dropped,
            period_totals: self.period_totals,
            streams: self.streams.into_iter().map(|s| s.stats).collect(),
            spikes: self.spikes,
            spikes_dropped: self.spikes_dropped,
            trace: self.trace.unwrap_or_default(),
            trace_dropped: self.trace_dropped,
            timeline: self.timeline,
            warnings: self.warnings,
            clock: self.clock_desc,
            constraints: Vec::new(),
        }
    }
}

impl TaskStats {
    pub fn series(&self) -> Vec<punctual_record::Series> {
        let mut out = Vec::new();
        for (rec, metric) in [
            (&self.latency, Metric::Latency),
            (&self.interval, Metric::Interval),
            (&self.response, Metric::Response),
        ] {
            if rec.count() == 0 && rec.missed() == 0 {
                continue;
            }
            // The period is set on the series rather than on a copy of the
            // recorder: the copy (HdrHistogram and count arrays, ~0.3 MB
            // per series) was a sixth of the output's cost and page faults.
            let mut s = rec.to_series(&format!("{}.{}", self.name, metric.as_str()), metric);
            if let Some(p) = self.period {
                s.sample_period_ns = Some(p);
            }
            s.task = Some(self.name.clone());
            s.cpu = Some(self.cpu);
            out.push(s);
        }
        out
    }
}
