//! Fixes predicted from a record (`punctual advise`): each a change to the
//! machine, with the record it is predicted to give, so a user picks the
//! change that buys the most before making it, and a later measurement
//! can be set beside the prediction (`observed`).

use std::collections::BTreeMap;

use punctual_units::Nanos;
use serde::{Deserialize, Serialize};

use crate::VerdictState;

/// One workload profile's MTTF, before or after a fix.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ProfileFigure {
    pub profile: String,
    pub state: VerdictState,
    /// Seconds between underruns; `null`: none observed or predicted.
    pub mttf_s: Option<f64>,
    /// 95 % interval, `[lo, hi]`; `hi` `null` is unbounded.
    pub ci_s: [Option<f64>; 2],
    pub target_s: f64,
}

/// The figures of one CPU of a record, measured or predicted: what a fix
/// is judged by.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FixFigures {
    /// The series the percentiles come from (`cpu1.latency`, or the gap
    /// series of a record without wake-ups).
    pub series: String,
    pub p99_ns: Nanos,
    pub p999_ns: Nanos,
    /// Stolen fraction of the busy loop on the CPU; `null` without one.
    pub stolen_fraction: Option<f64>,
    /// MTTF of the first profile in `profiles` (the one that misses by
    /// most now), seconds; `null`: none predicted, or no wake-ups.
    pub mttf_s: Option<f64>,
    pub ci_s: [Option<f64>; 2],
    /// Every profile advised for, in the same order as the baseline's.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub profiles: Vec<ProfileFigure>,
    /// A reservation's share of periods in which the work does not get
    /// its budget, simulated on the record's measured gap process (only
    /// in a reservation fix's `predicted`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reservation_miss: Option<ReservationMiss>,
}

/// A reservation's miss rate, simulated: the record's gap process with
/// what the reservation takes out removed (each source's lengths and
/// arrivals, periodic where they sat on a period) replayed against a
/// reserved thread that always has work, plain and with feedback.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ReservationMiss {
    /// Independent runs (seeds) per mode.
    pub runs: u32,
    /// Simulated time of each run (the record's duration).
    pub run_ns: Nanos,
    /// A fixed budget (over-reserved as the fix says) charged with the
    /// time stolen inside it (`rez`).
    pub plain: MissRate,
    /// The budget adapted each period from what was stolen in the last
    /// (`rez-fb`, gain 0.5), from the same starting budget.
    pub feedback: MissRate,
}

/// Periods in which the reserved thread got less than its budget.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MissRate {
    pub periods: u64,
    pub misses: u64,
    /// `misses / periods`.
    pub fraction: f64,
    /// 95 % interval of the fraction, `[lo, hi]`, from the spread over
    /// the runs (a run's periods are not independent of each other);
    /// with no miss at all, `[0, 3 / periods]`.
    pub ci: [f64; 2],
}

/// A change to the machine and what it is predicted to give.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Fix {
    /// Short and stable for the same record: `irq-36-to-cpu0`.
    pub id: String,
    /// `irq-affinity`, `thread-affinity`, `rt-runtime`, `dma-latency`,
    /// `preempt`, `isolate-cpu`, `reservation`, `priority`, `buffering`.
    pub kind: String,
    /// The kind's parameters (`{"irq": "36", "to_cpus": "0"}`…), what an
    /// apply step needs and nothing more.
    pub target: BTreeMap<String, serde_json::Value>,
    /// The CPU the fix is for.
    pub cpu: u32,
    pub description: String,
    /// The record as measured, read the same way as `predicted`.
    pub now: FixFigures,
    pub predicted: FixFigures,
    /// Sum over the profiles of log10(MTTF after / MTTF now), each MTTF
    /// capped at its profile's target and each term at least 0, from the
    /// named causes the fix takes out: what the ranking orders by. Time
    /// of threads below a real-time task's priority, which held the CPU
    /// only where the kernel would not preempt, is left in.
    pub gain_log10: f64,
    /// The same sum with everything the fix takes out, below-priority
    /// work included: equal to `gain_log10` unless the fix also removes
    /// such work (isolation, full preemption, moving such a thread).
    #[serde(default)]
    pub gain_all_log10: f64,
    /// True when every profile's predicted MTTF lies inside the 95 %
    /// interval of doing nothing: the record cannot tell this fix from
    /// none.
    #[serde(default)]
    pub within_noise: bool,
    pub why: String,
    /// What it costs, in units (CPU given up, latency added, throughput).
    pub cost: String,
    /// CPU fraction of one CPU given up or moved, for ordering ties.
    pub cost_cpu_fraction: f64,
    /// Whether punctual can make the change at run time.
    pub runtime_applicable: bool,
    /// How to keep it across reboots: kernel command line, sysctl.d, a
    /// tuned snippet or a systemd unit.
    pub permanent_how: String,
    /// What a measurement with the fix applied gave.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed: Option<FixFigures>,
    /// The named sources the prediction took out of the record, largest
    /// first: what the fix is predicted to remove, so a check against a
    /// known cause can tell how much of it a fix takes out.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub takes_out: Vec<TakenOut>,
    /// The sources the measurement with the fix applied attributed on the
    /// CPU, largest first, read as `takes_out` reads the record: what
    /// remained, so a prediction the measurement missed can be explained
    /// from data (which source the fix did not take out, or which one it
    /// brought).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub observed_sources: Vec<TakenOut>,
}

/// One source a fix takes out, as attribution named it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TakenOut {
    /// `irq`, `thread`, `kworker`, `throttle`, `idle`…
    pub kind: String,
    /// `comm/tid` for a thread, the handler's name for an interrupt.
    pub name: String,
    /// Its attributed time in the CPU's spikes and stolen intervals.
    pub total_ns: Nanos,
}

/// What no fix targets by name on one CPU, beside the named causes
/// (written by `advise`, one per advised CPU): the ranking orders fixes by
/// the named causes alone, so this says how much of what there is to
/// gain it leaves out, what that time likely is, and what would tell
/// more. Times are attributed time inside the CPU's logged spikes and
/// stolen intervals.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Unexplained {
    pub cpu: u32,
    /// The kernel's preemption model as the record gives it
    /// (`dynamic(none)`): whether below-priority work could hold the CPU
    /// in any kernel code or only in preempt-off sections.
    pub preemption: String,
    /// Time of the named causes a fix can target: interrupts, threads at
    /// or above the task's priority, RT throttling, idle exit.
    pub named_ns: Nanos,
    /// Time of threads and kworkers below a real-time task's priority:
    /// they held the CPU where the kernel would not preempt, and the
    /// record does not say which section nor whether that work stays.
    pub below_ns: Nanos,
    /// How many distinct below-priority sources.
    pub below_sources: usize,
    /// Time with no source (`unexplained`, `hypervisor`): no guest event,
    /// likely the hypervisor or the hardware.
    pub no_event_ns: Nanos,
    /// `below_ns` over all attributed time (0..1).
    pub below_share: f64,
    /// `no_event_ns` over all attributed time (0..1).
    pub no_event_share: f64,
    /// The gain (Σ log10 of the MTTF ratio over the profiles) of taking
    /// out every named cause at once.
    pub gain_named_log10: f64,
    /// The gain of taking out everything attributed, the rest included.
    pub gain_all_log10: f64,
    /// True when the rest could buy more than every named cause together
    /// ([`Unexplained::rest_dominates`]): the text says so in one line.
    pub dominates: bool,
    /// What would tell more, each a short instruction.
    pub tell_more: Vec<String>,
}

impl Unexplained {
    /// True when what is left after the named causes (the gain of all
    /// less the gain of the named ones) is larger than the named gain,
    /// and more than a hair: then the ranking says little about what
    /// would fix this CPU.
    pub fn rest_dominates(gain_named_log10: f64, gain_all_log10: f64) -> bool {
        let rest = gain_all_log10 - gain_named_log10;
        rest > gain_named_log10 && rest > 0.01
    }

    /// Whether the kernel lets a higher-priority task preempt kernel code.
    pub fn preemptible(&self) -> bool {
        preemptible(&self.preemption)
    }
}

/// Whether a preemption model (`full`, `dynamic(none)`…) lets a
/// higher-priority task preempt kernel code.
pub fn preemptible(preemption: &str) -> bool {
    matches!(
        preemption,
        "full" | "rt" | "dynamic(full)" | "lazy" | "dynamic(lazy)"
    )
}
