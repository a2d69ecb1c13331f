//! A simulation's own section, `extra["sim"]`: what the simulator counted
//! that the common fields have no place for (jobs, preemptions, streams,
//! constraint answers, the multiprocessor's migrations).
//!
//! One type is both what `punctual-sim` writes and what the text report
//! reads back, so the two cannot drift apart. Maps are keyed by name (the
//! JSON keeps the same sorted keys it always had); the order the run
//! printed them in is the scenario's, which the record carries in
//! `config.scenario`.

use std::collections::BTreeMap;

use punctual_units::Nanos;
use serde::{Deserialize, Serialize};

/// `extra["sim"]`. Every field has a default so that records written
/// before a field existed still read.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct SimSection {
    /// Events the event loop handled.
    pub events: u64,
    pub scheduler_picks: u64,
    pub tasks: BTreeMap<String, SimTask>,
    pub streams: BTreeMap<String, SimStream>,
    /// Slices beyond `--trace-cap`, counted instead of kept.
    pub trace_slices_dropped: u64,
    /// Interrupt work lost to a full interrupt-level queue, by source; only
    /// when some was, so records of runs the CPU could serve are unchanged.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub interrupt_work_dropped: BTreeMap<String, u64>,
    /// Only under `sim.multiprocessor`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub multiprocessor: Option<SimMultiprocessor>,
    /// The answers to the scenario's `[[constraint]]` queries, when it has any.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub constraints: BTreeMap<String, SimConstraint>,
}

/// One simulated task's counts.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct SimTask {
    pub releases: u64,
    pub jobs: u64,
    pub deadline_misses: u64,
    pub preemptions: u64,
    /// Releases dropped because the task's backlog was full.
    pub backlog_lost: u64,
    /// The reservation's kind (`rez`, `rez-c`, `plan`, …); `null` for an
    /// unreserved task.
    pub reservation: Option<String>,
    /// Jobs aborted at their deadline; only under `sim.on_miss = "abort"`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub aborted: Option<u64>,
    /// Where partitioned scheduling placed the task; a global task has none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu: Option<u32>,
    /// Preempted jobs resumed on another CPU (multiprocessor runs only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub migrations: Option<u64>,
    /// Jobs started on another CPU than the task last ran on
    /// (multiprocessor runs only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub task_migrations: Option<u64>,
}

/// One simulated stream's delivery.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct SimStream {
    pub arrived: u64,
    pub delivered: u64,
    pub lost: u64,
    pub capacity: u64,
    pub max_fill: u64,
    /// Time the sender was paused by flow control.
    pub paused_ns: Nanos,
}

/// How a multiprocessor run scheduled its task set.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct SimMultiprocessor {
    /// `global` or `partitioned`, with the per-CPU rule.
    pub policy: String,
    /// The fit heuristic of partitioned scheduling; `null` for global.
    pub placement: Option<String>,
    pub cpus: u32,
    /// Sums over the tasks.
    pub migrations: u64,
    pub task_migrations: u64,
}

/// The answer to one `[[constraint]]` query.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct SimConstraint {
    pub asked_at_ns: Nanos,
    pub window_start_ns: Nanos,
    pub deadline_ns: Nanos,
    pub estimate_ns: Nanos,
    pub granted: bool,
    pub denied_because: Option<String>,
    pub received_ns: Nanos,
    pub completed_at_ns: Option<Nanos>,
    pub met_deadline: bool,
}
