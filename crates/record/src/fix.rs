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
}
