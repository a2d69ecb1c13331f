//! What `punctual watch` found about the threads of a running application
//! (`extra["watch"]`): per thread, its wake-ups, its period, the deadline
//! misses that period implies, where its time went, and the sources
//! behind its slowest wake-ups. The latency histograms themselves are
//! ordinary series (`<name>-<tid>.latency`) and the stolen time ordinary
//! `stolen[]` entries with `task` set, so every reader of a probe record
//! reads these too.

use serde::{Deserialize, Serialize};

use crate::{Nanos, SourceShare};

/// The watched process and its threads.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct WatchSummary {
    pub pid: i32,
    /// The process's `comm`.
    pub command: String,
    /// The event taken as the wake-up: `sched_waking` (the start of the
    /// wake-up path) where the kernel has it, else `sched_wakeup`.
    pub wake_event: String,
    pub threads: Vec<WatchedThread>,
    /// Scheduler events of the watched threads not kept (the log was full).
    #[serde(default)]
    pub events_dropped: u64,
    /// Set when `--stop-at` ended the run: the wake-up that crossed it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stopped_at: Option<StopEvent>,
}

/// The wake-up that crossed `--stop-at`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct StopEvent {
    pub tid: i32,
    pub cpu: u32,
    /// The switch-in, relative to the record's `started_mono_ns`.
    pub at_ns: Nanos,
    pub latency_ns: Nanos,
    pub threshold_ns: Nanos,
    /// What filled that wake-up, as `cause` names a probe's spike.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub causes: Vec<crate::SourceShare>,
    /// With `--stop-stacks`: the kernel stack of what held the CPU.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stack: Option<KernelStack>,
}

/// A kernel stack the `stacktrace` trigger recorded as a task gave up a
/// CPU (the same keys as a probe's `extra.stopped_at.stack`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct KernelStack {
    /// `comm/pid`.
    pub task: String,
    pub pid: i32,
    /// When it was taken (CLOCK_MONOTONIC).
    pub mono_ns: u64,
    /// Innermost first, as `function+0xoffset`.
    pub frames: Vec<String>,
}

/// One watched thread.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct WatchedThread {
    pub tid: i32,
    pub name: String,
    /// Its latency series' name in `series[]` (empty when it never woke).
    pub series: String,
    /// CPUs it ran on, most used first.
    pub cpus: Vec<u32>,
    /// Wake-ups followed by a switch-in (one latency sample each).
    pub wakeups: u64,
    /// Activations that ended by blocking (a whole wake → sleep cycle).
    pub activations: u64,
    /// Wake-ups timed to the return of the thread's blocking system call,
    /// the kernel having traced no switch-in: it leaves an idle CPU
    /// without a `sched_switch`. The call's return comes after the switch
    /// by the kernel's exit path (about a microsecond).
    #[serde(default)]
    pub timed_by_own_event: u64,
    /// Wake-ups after which it ran and blocked again with neither a
    /// switch-in nor a system call's return seen: no latency sample.
    #[serde(default)]
    pub untimed: u64,
    /// Time it ran, and time it waited runnable (woken or preempted).
    pub ran_ns: Nanos,
    pub runnable_ns: Nanos,
    /// Time other contexts took from it while it ran (interrupts,
    /// softirqs, vectors) and while it was runnable (those, other threads,
    /// an idle CPU leaving its idle state).
    pub stolen_running_ns: Nanos,
    pub stolen_runnable_ns: Nanos,
    /// The period: stated with `--period`, or detected from its wake-ups.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub period: Option<PeriodFit>,
    /// Deadline misses inferred from the period.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deadlines: Option<Deadlines>,
    /// How many of the slowest wake-ups `offenders` adds up.
    pub slowest: u64,
    /// Their smallest latency (every one counted is at least this).
    pub slowest_from_ns: Nanos,
    /// What ran between wake-up and switch-in in those slowest wake-ups,
    /// largest first; shares are of their summed latency.
    pub offenders: Vec<SourceShare>,
}

/// A thread's period and its release times' phase.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PeriodFit {
    pub period_ns: Nanos,
    /// True when `--period` stated it; false when detected.
    pub stated: bool,
    /// Share of consecutive wake-ups one period apart (±25 %).
    pub regular_fraction: f64,
    /// CLOCK_MONOTONIC of the first release: the lower envelope of the
    /// wake-ups (a wake-up is never earlier than its release), so the
    /// releases sit on the fastest wake-up, later than the true ones by
    /// that wake-up's own latency (microseconds), which wake-ups alone
    /// cannot measure.
    pub first_release_mono_ns: Nanos,
}

/// Deadline misses under an implicit deadline (one period after each
/// release).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Deadlines {
    pub deadline_ns: Nanos,
    /// Releases between the first and last wake-up.
    pub releases: u64,
    /// Activations that finished (blocked) after their deadline.
    pub late: u64,
    /// Releases with no wake-up of their own (skipped periods).
    pub skipped: u64,
    /// Largest release → completion seen.
    pub worst_response_ns: Nanos,
    /// Release → running, over the activations that ran: the thread's
    /// timer's own lateness (its interrupt held back, a host stall before
    /// it was delivered: nothing the scheduler's events show) plus the
    /// wake-up latency. What a thread timing itself against its period
    /// sees (cyclictest), less the fastest wake-up's own latency, on which
    /// the releases are placed.
    #[serde(default)]
    pub release_to_run_p50_ns: Nanos,
    #[serde(default)]
    pub release_to_run_p99_ns: Nanos,
    #[serde(default)]
    pub release_to_run_max_ns: Nanos,
}

impl Deadlines {
    pub fn misses(&self) -> u64 {
        self.late + self.skipped
    }
}
