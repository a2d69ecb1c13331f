//! Warnings as data: each says what is wrong and what to change.
//!
//! They are an enum so that a report can group them, a test can look for a
//! specific one, and the wording lives in one place.

use serde::{Deserialize, Serialize};

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// Numbers are fine but worth knowing about.
    Info,
    /// Latency or stolen time is likely worse than it needs to be.
    Warn,
    /// The numbers do not mean what the user probably thinks.
    Degraded,
}

/// Every condition punctual warns about. Serialized as
/// `{"code": "<snake_case variant>", …fields}`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "code", rename_all = "snake_case")]
pub enum Warning {
    /// Running virtualized: the hypervisor can stop the whole VM.
    Virtualized { hypervisor: String },
    /// Hypervisor steal seen during the run.
    StealObserved {
        cpu: Option<u32>,
        steal_fraction: f64,
    },
    /// cpufreq governor other than `performance`.
    CpufreqGovernor { governor: String },
    /// A cpuidle state with a large exit latency is enabled.
    DeepIdle { state: String, exit_latency_us: u64 },
    /// Kernel not fully preemptible.
    PreemptionModel { model: String },
    /// RT throttling will stop a runaway RT task, but also a legitimate one.
    RtThrottling { runtime_us: i64, period_us: i64 },
    /// SMT siblings share a core with the measured CPU.
    SmtEnabled { threads_per_core: u32 },
    /// No CPUs isolated from the scheduler and housekeeping.
    NoIsolatedCpus,
    /// Interrupt time is charged to whatever thread was running.
    NoIrqTimeAccounting,
    /// The tick is periodic at this rate (timer granularity for tick-based code).
    TickHz { hz: u32 },
    /// Clocksource is not the TSC (slower, less precise time reads).
    Clocksource { clocksource: String },
    /// Could not use a real-time policy: numbers are SCHED_OTHER latency.
    NoRealtimePolicy { asked: String, reason: String },
    /// Could not lock memory: page faults may add latency.
    NoMemlock { reason: String },
    /// Could not pin to a CPU.
    NoAffinity { cpu: u32, reason: String },
    /// The run was interrupted before its duration.
    Interrupted { completed_ns: u64, asked_ns: u64 },
    /// Too few samples for the asked statistic.
    FewSamples {
        series: String,
        count: u64,
        needed: u64,
    },
    /// Tracing unavailable: attribution skipped.
    NoTracing { reason: String },
    /// Trace events were lost.
    TraceEventsLost { cpu: u32, lost: u64 },
    /// A kernel tracer (timerlat, osnoise) is not built into this kernel.
    MissingTracer { tracer: String },
    /// A free-form warning from a producer that has no variant yet.
    Other { message: String },
}

impl Warning {
    pub fn severity(&self) -> Severity {
        use Warning::*;
        match self {
            NoRealtimePolicy { .. }
            | NoAffinity { .. }
            | Interrupted { .. }
            | FewSamples { .. }
            | TraceEventsLost { .. } => Severity::Degraded,
            Virtualized { .. }
            | StealObserved { .. }
            | CpufreqGovernor { .. }
            | DeepIdle { .. }
            | PreemptionModel { .. }
            | RtThrottling { .. }
            | NoMemlock { .. }
            | NoTracing { .. }
            | Other { .. } => Severity::Warn,
            SmtEnabled { .. }
            | NoIsolatedCpus
            | NoIrqTimeAccounting
            | TickHz { .. }
            | Clocksource { .. }
            | MissingTracer { .. } => Severity::Info,
        }
    }

    /// One or two sentences: what is wrong, and what to change.
    pub fn message(&self) -> String {
        use Warning::*;
        match self {
            Virtualized { hypervisor } => format!(
                "running under a hypervisor ({hypervisor}): the host can stop this VM at any moment, and no guest setting prevents that; pin vCPUs and avoid CPU overcommit on the host for real-time work"
            ),
            StealObserved { cpu, steal_fraction } => format!(
                "the hypervisor stole {:.2}% of {} during the run; this time is invisible to guest tracing and shows as unexplained",
                steal_fraction * 100.0,
                cpu.map(|c| format!("CPU {c}")).unwrap_or_else(|| "the CPUs".into())
            ),
            CpufreqGovernor { governor } => format!(
                "cpufreq governor is '{governor}': frequency changes add latency; set 'performance' (cpupower frequency-set -g performance)"
            ),
            DeepIdle { state, exit_latency_us } => format!(
                "idle state {state} takes {exit_latency_us} us to exit; disable it for latency-critical CPUs (cpupower idle-set -D {exit_latency_us}, or processor.max_cstate=1)"
            ),
            PreemptionModel { model } => format!(
                "kernel preemption model is '{model}': long kernel sections delay wake-ups; boot with preempt=full or use a PREEMPT_RT kernel"
            ),
            RtThrottling { runtime_us, period_us } => format!(
                "RT throttling allows real-time tasks {runtime_us} us of every {period_us} us; a task that needs more is stopped (sysctl kernel.sched_rt_runtime_us=-1 disables it, at your own risk)"
            ),
            SmtEnabled { threads_per_core } => format!(
                "SMT is on ({threads_per_core} threads per core): a sibling thread slows the measured one; keep sibling CPUs idle or disable SMT"
            ),
            NoIsolatedCpus => "no CPUs are isolated: housekeeping work and other tasks run on every CPU; consider isolcpus= / nohz_full= for the real-time CPUs".to_string(),
            NoIrqTimeAccounting => "the kernel has no IRQ time accounting: interrupt time is charged to whichever thread was running, so /proc/stat under-reports interrupt load (CONFIG_IRQ_TIME_ACCOUNTING)".to_string(),
            TickHz { hz } => format!(
                "the scheduler tick is {hz} Hz ({} us): tick-driven work (budget enforcement, RR slices) has that granularity",
                1_000_000 / (*hz).max(1)
            ),
            Clocksource { clocksource } => format!(
                "clocksource is '{clocksource}', not 'tsc': time reads are slower and coarser; check 'tsc' in available_clocksource"
            ),
            NoRealtimePolicy { asked, reason } => format!(
                "could not set policy {asked} ({reason}): the probe ran at SCHED_OTHER, so these are time-sharing latencies, far worse than a real-time thread would see; run as root or grant CAP_SYS_NICE"
            ),
            NoMemlock { reason } => format!(
                "could not lock memory ({reason}): page faults may add latency; raise RLIMIT_MEMLOCK (ulimit -l) or run as root"
            ),
            NoAffinity { cpu, reason } => format!(
                "could not pin to CPU {cpu} ({reason}): the probe may have migrated, so per-CPU numbers mix CPUs"
            ),
            Interrupted { completed_ns, asked_ns } => format!(
                "interrupted after {} of {}: results cover only that part",
                punctual_units::Nanos(*completed_ns),
                punctual_units::Nanos(*asked_ns)
            ),
            FewSamples { series, count, needed } => format!(
                "{series} has {count} samples; {needed} are needed for this statistic, so it is shown with its confidence interval"
            ),
            NoTracing { reason } => format!("tracing unavailable ({reason}): causes were not attributed"),
            TraceEventsLost { cpu, lost } => format!(
                "{lost} trace events lost on CPU {cpu}: attribution of windows with losses is marked incomplete"
            ),
            MissingTracer { tracer } => format!(
                "the kernel has no {tracer} tracer, so the kernel's own {} probe (rtla {tracer}) cannot be compared with punctual's here; PREEMPT_RT and most distribution kernels build it (CONFIG_{})",
                if tracer == "timerlat" { "wake-up latency" } else { "stolen-time" },
                if tracer == "timerlat" { "TIMERLAT_TRACER" } else { "OSNOISE_TRACER" }
            ),
            Other { message } => message.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serializes_with_a_code_and_reads_back() {
        let w = Warning::CpufreqGovernor {
            governor: "powersave".into(),
        };
        let j = serde_json::to_string(&w).unwrap();
        assert_eq!(j, r#"{"code":"cpufreq_governor","governor":"powersave"}"#);
        assert_eq!(serde_json::from_str::<Warning>(&j).unwrap(), w);
        assert!(w.message().contains("performance"));
    }
}
