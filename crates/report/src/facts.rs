//! The platform facts a record carries, as one list in one order: the
//! terminal (`text::platform`, in `sysinfo` and the head of `check`) and
//! the HTML report's platform table both render it, so a fact added to the
//! record is shown by both or by neither.

use punctual_record::Platform;

/// One platform fact, named apart from how either renderer words it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fact {
    Host,
    CpuModel,
    LogicalCpus,
    OnlineCpus,
    Packages,
    ThreadsPerCore,
    NumaNodes,
    Kernel,
    Preemption,
    Hz,
    Nohz,
    Clocksource,
    CpufreqGovernor,
    CpufreqMinKhz,
    CpufreqMaxKhz,
    IdleStates,
    Hypervisor,
    Isolcpus,
    NohzFull,
    RtThrottling,
    IrqTimeAccounting,
}

/// Every fact, in the order both renderers show them (the record's
/// free-form `platform.other` follows).
pub const FACTS: [Fact; 21] = [
    Fact::Host,
    Fact::CpuModel,
    Fact::LogicalCpus,
    Fact::OnlineCpus,
    Fact::Packages,
    Fact::ThreadsPerCore,
    Fact::NumaNodes,
    Fact::Kernel,
    Fact::Preemption,
    Fact::Hz,
    Fact::Nohz,
    Fact::Clocksource,
    Fact::CpufreqGovernor,
    Fact::CpufreqMinKhz,
    Fact::CpufreqMaxKhz,
    Fact::IdleStates,
    Fact::Hypervisor,
    Fact::Isolcpus,
    Fact::NohzFull,
    Fact::RtThrottling,
    Fact::IrqTimeAccounting,
];

impl Fact {
    /// The fact's name in the HTML platform table.
    pub fn label(self) -> &'static str {
        match self {
            Fact::Host => "hostname",
            Fact::CpuModel => "CPU model",
            Fact::LogicalCpus => "logical CPUs",
            Fact::OnlineCpus => "online CPUs",
            Fact::Packages => "packages",
            Fact::ThreadsPerCore => "threads per core",
            Fact::NumaNodes => "NUMA nodes",
            Fact::Kernel => "kernel",
            Fact::Preemption => "preemption",
            Fact::Hz => "HZ",
            Fact::Nohz => "nohz",
            Fact::Clocksource => "clocksource",
            Fact::CpufreqGovernor => "cpufreq governor",
            Fact::CpufreqMinKhz => "cpufreq min kHz",
            Fact::CpufreqMaxKhz => "cpufreq max kHz",
            Fact::IdleStates => "idle states",
            Fact::Hypervisor => "hypervisor",
            Fact::Isolcpus => "isolcpus",
            Fact::NohzFull => "nohz_full",
            Fact::RtThrottling => "RT throttling",
            Fact::IrqTimeAccounting => "IRQ time accounting",
        }
    }

    /// The fact as the record has it, `None` when it was not found out
    /// (each renderer words "unknown" its own way).
    pub fn value(self, p: &Platform) -> Option<String> {
        let s = |v: &Option<String>| v.clone();
        let n = |v: Option<u64>| v.map(|x| x.to_string());
        match self {
            Fact::Host => s(&p.hostname),
            Fact::CpuModel => s(&p.cpu_model),
            Fact::LogicalCpus => n(p.logical_cpus.map(u64::from)),
            Fact::OnlineCpus => s(&p.online_cpus),
            Fact::Packages => n(p.packages.map(u64::from)),
            Fact::ThreadsPerCore => n(p.threads_per_core.map(u64::from)),
            Fact::NumaNodes => n(p.numa_nodes.map(u64::from)),
            Fact::Kernel => s(&p.kernel),
            Fact::Preemption => s(&p.preemption),
            Fact::Hz => n(p.hz.map(u64::from)),
            Fact::Nohz => s(&p.nohz),
            Fact::Clocksource => s(&p.clocksource),
            Fact::CpufreqGovernor => s(&p.cpufreq_governor),
            Fact::CpufreqMinKhz => n(p.cpufreq_min_khz),
            Fact::CpufreqMaxKhz => n(p.cpufreq_max_khz),
            Fact::IdleStates => (!p.cpuidle_states.is_empty()).then(|| {
                p.cpuidle_states
                    .iter()
                    .map(|s| {
                        format!(
                            "{} ({} us{})",
                            s.name,
                            s.exit_latency_us,
                            if s.disabled { ", disabled" } else { "" }
                        )
                    })
                    .collect::<Vec<_>>()
                    .join(", ")
            }),
            Fact::Hypervisor => s(&p.hypervisor),
            Fact::Isolcpus => s(&p.isolcpus),
            Fact::NohzFull => s(&p.nohz_full),
            Fact::RtThrottling => match (p.rt_runtime_us, p.rt_period_us) {
                (Some(r), Some(q)) => Some(format!("{r} us / {q} us")),
                _ => None,
            },
            Fact::IrqTimeAccounting => p
                .irq_time_accounting
                .map(|b| if b { "yes" } else { "no" }.to_string()),
        }
    }
}
