//! The platform facts every record carries, as aligned `name: value`
//! lines (`punctual sysinfo`, and the head of `punctual check`).

use punctual_record::Platform;

use crate::facts::Fact;

/// The terminal's lines: each renders a run of consecutive facts of
/// [`crate::facts::FACTS`], all of them in order (a test checks it).
const LINES: [(&str, &[Fact]); 14] = [
    ("host", &[Fact::Host]),
    ("cpu model", &[Fact::CpuModel]),
    (
        "cpus",
        &[
            Fact::LogicalCpus,
            Fact::OnlineCpus,
            Fact::Packages,
            Fact::ThreadsPerCore,
            Fact::NumaNodes,
        ],
    ),
    ("kernel", &[Fact::Kernel]),
    ("preemption", &[Fact::Preemption]),
    ("tick", &[Fact::Hz, Fact::Nohz]),
    ("clocksource", &[Fact::Clocksource]),
    (
        "cpufreq",
        &[
            Fact::CpufreqGovernor,
            Fact::CpufreqMinKhz,
            Fact::CpufreqMaxKhz,
        ],
    ),
    ("cpuidle", &[Fact::IdleStates]),
    ("virtualization", &[Fact::Hypervisor]),
    ("isolcpus", &[Fact::Isolcpus]),
    ("nohz_full", &[Fact::NohzFull]),
    ("rt throttling", &[Fact::RtThrottling]),
    ("irq time accounting", &[Fact::IrqTimeAccounting]),
];

/// One line's value: its facts as a sentence, "unknown" for what the
/// record does not know.
fn line(facts: &[Fact], p: &Platform) -> String {
    let v = |f: Fact| f.value(p).unwrap_or_else(|| "unknown".into());
    match facts[0] {
        Fact::LogicalCpus => format!(
            "{} logical, online {}, {} package(s), {} thread(s) per core, {} NUMA node(s)",
            v(Fact::LogicalCpus),
            v(Fact::OnlineCpus),
            v(Fact::Packages),
            v(Fact::ThreadsPerCore),
            v(Fact::NumaNodes)
        ),
        Fact::Hz => format!("HZ={} nohz={}", v(Fact::Hz), v(Fact::Nohz)),
        Fact::CpufreqGovernor => match Fact::CpufreqGovernor.value(p) {
            Some(g) => format!(
                "{g}, {}-{} kHz",
                v(Fact::CpufreqMinKhz),
                v(Fact::CpufreqMaxKhz)
            ),
            None => "no cpufreq driver (frequency not controlled by the guest/OS)".into(),
        },
        Fact::IdleStates => Fact::IdleStates
            .value(p)
            .unwrap_or_else(|| "no cpuidle states".into()),
        Fact::Hypervisor => Fact::Hypervisor
            .value(p)
            .unwrap_or_else(|| "none detected".into()),
        f @ (Fact::Isolcpus | Fact::NohzFull) => f.value(p).unwrap_or_else(|| "none".into()),
        Fact::RtThrottling => match (p.rt_runtime_us, p.rt_period_us) {
            (Some(-1), _) => "off (sched_rt_runtime_us=-1)".into(),
            (Some(r), Some(per)) => format!("{r} us of every {per} us for real-time tasks"),
            _ => "unknown".into(),
        },
        Fact::IrqTimeAccounting => match p.irq_time_accounting {
            Some(true) => "yes".into(),
            Some(false) => "no (irq time is charged to the interrupted task)".into(),
            None => "unknown".into(),
        },
        f => v(f),
    }
}

/// The facts as aligned `name: value` lines.
pub fn platform_text(p: &Platform, all_irqs: bool) -> String {
    let mut rows: Vec<(&str, String)> = LINES
        .iter()
        .map(|(name, facts)| (*name, line(facts, p)))
        .collect();
    let irq_line = format!("{} with an affinity list", p.irqs.len());
    rows.push(("irqs", irq_line));
    for (k, v) in &p.other {
        rows.push((k.as_str(), v.clone()));
    }
    let mut out: String = rows.iter().map(|(k, v)| format!("{k:<20} {v}\n")).collect();
    if all_irqs {
        for i in &p.irqs {
            out.push_str(&format!(
                "  irq {:<5} {:<28} cpus {}\n",
                i.irq, i.name, i.affinity
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::facts::FACTS;

    #[test]
    fn the_lines_render_every_fact_once_in_order() {
        let flat: Vec<Fact> = LINES.iter().flat_map(|(_, f)| f.iter().copied()).collect();
        assert_eq!(flat, FACTS);
    }
}
