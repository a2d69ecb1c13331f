//! What the tracefs flight recorder's attribution found: the data a
//! `--cause` run keeps in the record (`extra["cause"]`, and
//! `extra["cause_noise"]` for a check's noise half), so a saved record
//! renders its causes without the trace. The recorder in `punctual_trace`
//! fills these; the text report reads them.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Totals of one source over a window.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SourceTotal {
    pub kind: String,
    pub name: String,
    /// `rt` priority, `nice`, or `deadline` for threads.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sched: Option<String>,
    pub count: u64,
    pub total_ns: u64,
    pub max_ns: u64,
}

impl SourceTotal {
    /// Adds `s` to the entry for the same (kind, name) in `map`: per-window
    /// totals summed into per-CPU and whole-run tables.
    pub fn merge_into(map: &mut BTreeMap<(String, String), SourceTotal>, s: &SourceTotal) {
        let e = map
            .entry((s.kind.clone(), s.name.clone()))
            .or_insert_with(|| SourceTotal {
                kind: s.kind.clone(),
                name: s.name.clone(),
                sched: s.sched.clone(),
                ..Default::default()
            });
        e.count += s.count;
        e.total_ns += s.total_ns;
        e.max_ns = e.max_ns.max(s.max_ns);
    }
}

/// Whole-run accounting of one CPU (GetStolen).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CpuAccount {
    pub cpu: u32,
    pub span_ns: u64,
    /// Named sources, largest first; `share` is of all stolen time.
    pub sources: Vec<SourceTotalShare>,
    /// Time in handlers, softirqs, other threads and kworkers.
    pub named_ns: u64,
    pub idle_ns: u64,
    /// The probe thread itself.
    pub probe_ns: u64,
    /// What the probe observed as stolen (noise probe), side by side with
    /// `named_ns`: it exceeds handler time by cache/TLB refill and by
    /// hypervisor stalls no guest event shows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probe_observed_ns: Option<u64>,
    /// `probe_observed_ns - named_ns` when positive: no guest event.
    pub unexplained_ns: u64,
    pub lost_events: u64,
    pub incomplete: bool,
    pub kernel_irq_ns: u64,
    pub kernel_softirq_ns: u64,
    pub kernel_steal_ns: u64,
    /// Handler, softirq, thread and kworker time over the whole run,
    /// including interruptions too short for the probe to count: beside
    /// the stolen split, never mixed into it.
    #[serde(default)]
    pub whole_run_named_ns: u64,
    /// Interval-by-interval split of the stolen time (noise probe with
    /// its gap log); `sources`, `named_ns` and `unexplained_ns` then
    /// refer to the stolen intervals only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stolen_split: Option<StolenSplit>,
}

/// Name of the remainder of an interval around the events in it.
pub const ENTRY_EXIT_NAME: &str = "interrupt entry/exit around events";
/// Name of the probe loop's own iteration inside each interval.
pub const LOOP_NAME: &str = "probe loop (one iteration per gap)";

/// Where every nanosecond of a probe's stolen intervals went.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct StolenSplit {
    /// Intervals split (all the probe kept).
    pub intervals: u64,
    /// Intervals the probe saw but did not keep (not in these figures).
    pub intervals_dropped: u64,
    /// Their total length: the denominator of every share.
    pub stolen_ns: u64,
    /// Handlers, softirqs, threads, kworkers, throttling inside them, and
    /// the probe's own page faults (the rest of an interval it faulted in,
    /// beyond the entry/exit cap of the other events there).
    pub named_ns: u64,
    /// Rest of intervals that contain events, up to `entry_exit_cap_ns`
    /// per event: entry/exit code and delivery around those events.
    /// The cap is twice `one_event_rest_p50_ns`, at least
    /// `ENTRY_EXIT_CAP_MIN_NS` (2 µs, in `punctual_trace::recorder`).
    pub entry_exit_ns: u64,
    /// One probe loop iteration per interval (the loop's minimum step).
    pub loop_ns: u64,
    /// Intervals with no guest event at all (hypervisor, hardware), and
    /// the rest beyond the entry/exit cap or inside incomplete trace (the
    /// probe's page faults are guest events: their time is named).
    pub no_event_ns: u64,
    /// The CPU idled (not throttled) inside an interval.
    pub idle_ns: u64,
    pub incomplete_intervals: u64,
    pub entry_exit_cap_ns: u64,
    /// Distribution of the rest (minus the loop) of intervals holding
    /// exactly one event, a hardware interrupt (irq, vector or NMI): what
    /// one interrupt's entry/exit costs here.
    pub one_event_rest_p50_ns: u64,
    pub one_event_rest_p90_ns: u64,
    pub one_event_rest_p99_ns: u64,
}

impl StolenSplit {
    /// Share of the stolen time with a name (sources, entry/exit, loop).
    pub fn named_fraction(&self) -> f64 {
        (self.named_ns + self.entry_exit_ns + self.loop_ns) as f64 / self.stolen_ns.max(1) as f64
    }
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SourceTotalShare {
    #[serde(flatten)]
    pub total: SourceTotal,
    pub share: f64,
}

/// What attribution found, stored in `record.extra["cause"]` (read and
/// written through [`Record::cause`](crate::Record::cause) and
/// [`Record::set_cause`](crate::Record::set_cause)).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CauseSummary {
    pub backend: String,
    pub trace_clock: String,
    pub per_cpu: Vec<CpuAccount>,
    /// All CPUs merged.
    pub overall: Vec<SourceTotalShare>,
    pub spikes_attributed: u64,
    pub spikes_incomplete: u64,
    /// Over all attributed spikes: time named vs not.
    pub spike_named_ns: u64,
    pub spike_unexplained_ns: u64,
    pub spike_idle_ns: u64,
    pub events: u64,
    pub pages: u64,
    pub events_enabled: Vec<String>,
    pub events_missing: Vec<String>,
    pub recorder_cpu_ns: u64,
    pub recorder_cpu_fraction: f64,
    pub buffer_kb: u32,
    /// What to do about causes that have a known fix (RT throttling…).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hints: Vec<String>,
    /// punctual's own threads seen while recording (tid, name): shown as
    /// kind `self`, never as someone else's offender.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub own_threads: Vec<(i32, String)>,
}
