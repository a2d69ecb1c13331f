//! What a run produced, filled alike by the event engine
//! ([`crate::engine`]) and the plan executor ([`crate::planmode`]), and the
//! options of a run that are not part of the scenario. Kept apart from both
//! engines so that neither imports the other and the record writer
//! ([`crate::output`]) reads one set of types.

use std::sync::Arc;

use punctual_record::{Metric, Recorder, Timeline};
use punctual_sched::PeriodStat;
use punctual_units::Nanos;

/// Stored periods in the record; later ones only count in the summary.
pub const MAX_PERIODS: usize = 10_000;

/// Spikes kept in the record.
pub const MAX_SPIKES: usize = 1_000;

/// A named source of stolen time and what it took.
#[derive(Clone, Debug)]
pub struct SourceStats {
    pub cpu: u32,
    /// Shared with the timeline's slices, which name their source.
    pub kind: Arc<str>,
    pub name: Arc<str>,
    pub count: u64,
    pub total: Nanos,
    pub max: Nanos,
    /// Pieces of its work dropped because the CPU's interrupt-level queue
    /// was full.
    pub dropped: u64,
}

/// Per-task results the record and sweeps are built from.
#[derive(Clone, Debug)]
pub struct TaskStats {
    /// Shared with the task's spikes and timeline slices.
    pub name: Arc<str>,
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
    /// Jobs dropped at their deadline under `sim.on_miss = "abort"`
    /// (`None` under "continue", so the record keeps its old shape).
    pub aborted: Option<u64>,
    pub reserved: bool,
    pub rez_kind: Option<String>,
    pub need: Option<Nanos>,
}

impl TaskStats {
    /// A job started at `now`, released at `release`: its wake-up latency
    /// and the interval since its task's previous start (`last_start`,
    /// moved on). Both engines keep starts this way; returns the latency.
    #[inline(always)]
    pub(crate) fn started(
        &mut self,
        last_start: &mut Option<Nanos>,
        now: Nanos,
        release: Nanos,
    ) -> Nanos {
        let lat = now.saturating_sub(release);
        self.latency.record(lat);
        if let Some(prev) = *last_start {
            self.interval.record(now - prev);
        }
        *last_start = Some(now);
        lat
    }

    /// A job dropped at its deadline (`sim.on_miss = "abort"`): a miss,
    /// a missed latency sample and an abort.
    pub(crate) fn dropped_at_deadline(&mut self) {
        self.deadline_misses += 1;
        self.latency.add_missed(1);
        *self.aborted.get_or_insert(0) += 1;
    }
}

/// A spike the run keeps: when, on which CPU, which task (its index in
/// [`Outcome::tasks`]), how late. The task is named by index, not by its
/// name: a late-running set keeps a spike for most of its first thousand
/// jobs, and a copy of the name each was a memory allocation inside the
/// run, a shared name an atomic count and 16 of the spike's 40 bytes.
pub type Spike = (Nanos, u32, u32, Nanos);

/// Keeps a spike in the log while it holds fewer than [`MAX_SPIKES`], or
/// counts it as dropped; the spike is only built when it is kept.
#[inline(always)]
pub(crate) fn keep_spike(
    spikes: &mut Vec<Spike>,
    dropped: &mut u64,
    spike: impl FnOnce() -> Spike,
) {
    if spikes.len() < MAX_SPIKES {
        spikes.push(spike());
    } else {
        *dropped += 1;
    }
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

/// Per-CPU stolen-time accounting.
#[derive(Clone, Debug)]
pub struct CpuStolen {
    pub total: Nanos,
    pub intervals: u64,
    pub max: Nanos,
    pub timeline: Timeline,
    /// Lengths of the stolen intervals (`sim.gap_series`): what a busy
    /// thread on this CPU would log as gaps.
    pub gaps: Option<Recorder>,
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

/// One slice of the record's execution timeline.
#[derive(Clone, Debug)]
pub struct TimelineSlice {
    pub cpu: u32,
    /// Row of the chart: the task's name, or the kind of the interrupt
    /// source (`irq`, `dpc`, …) whose handler stole the time. Shared with
    /// the task or source rather than copied: the log takes a slice at
    /// every switch of its window, and two copied names each were most of
    /// what a slice cost.
    pub track: Arc<str>,
    /// `run` (a thread had the CPU) or `stolen` (interrupts, DPCs or the
    /// hypervisor had it).
    pub kind: &'static str,
    pub name: Arc<str>,
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
        track: &Arc<str>,
        kind: &'static str,
        name: &Arc<str>,
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
        if self.slices.len() == self.slices.capacity() {
            self.grow();
        }
        self.slices.push(TimelineSlice {
            cpu: cpu as u32,
            track: track.clone(),
            kind,
            name: name.clone(),
            start,
            len: end - start,
        });
    }

    /// Room for more slices: [`TIMELINE_FIRST`] at first, then double.
    #[cold]
    #[inline(never)]
    fn grow(&mut self) {
        let room = self.slices.capacity().max(TIMELINE_FIRST);
        self.slices
            .reserve_exact(room.min(TIMELINE_CAP - self.slices.len()));
    }
}

/// Slices the log makes room for at its first: a short run's log grew from
/// 4 by doubling, seven reallocations that copied up to 128 slices each
/// (1% of a 2 s run of a 21-task set). 256 slices are 18 KB.
const TIMELINE_FIRST: usize = 256;

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
    pub spikes: Vec<Spike>,
    pub spikes_dropped: u64,
    pub trace: Vec<TraceSlice>,
    pub trace_dropped: u64,
    pub timeline: TimelineLog,
    pub warnings: Vec<String>,
    pub clock: String,
    /// Plan mode: the `[[constraint]]` queries and what became of them.
    pub constraints: Vec<ConstraintResult>,
    /// `sim.multiprocessor`: the policy and the migrations; `None` when
    /// each task ran on its own `cpu`.
    pub multiprocessor: Option<MultiStats>,
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
            s.task = Some(self.name.to_string());
            s.cpu = Some(self.cpu);
            out.push(s);
        }
        out
    }
}

/// Outcome of one `[[constraint]]` query.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConstraintResult {
    pub name: String,
    pub asked_at: Nanos,
    pub window_start: Nanos,
    pub deadline: Nanos,
    pub estimate: Nanos,
    pub granted: bool,
    /// The plan's reason, when denied.
    pub denied_because: Option<String>,
    /// CPU time the constraint's owner actually ran inside its grant.
    pub received: Nanos,
    /// When the granted work was done (all of `estimate` received).
    pub completed_at: Option<Nanos>,
    pub met_deadline: bool,
}

/// How a multiprocessor run went, beside the per-task figures every run
/// has.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MultiStats {
    /// `global` or `partitioned`.
    pub policy: &'static str,
    /// Partitioned: `first-fit` or `worst-fit`.
    pub placement: Option<&'static str>,
    /// Per task, in scenario order: jobs that resumed on another CPU than
    /// the one they left.
    pub migrations: Vec<u64>,
    /// Per task: jobs that started on another CPU than their task last ran
    /// on.
    pub task_migrations: Vec<u64>,
}
