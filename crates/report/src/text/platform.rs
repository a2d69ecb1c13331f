//! The platform facts every record carries, as aligned `name: value`
//! lines (`punctual sysinfo`, and the head of `punctual check`).

use punctual_record::Platform;

fn opt<T: std::fmt::Display>(v: &Option<T>) -> String {
    v.as_ref()
        .map(|x| x.to_string())
        .unwrap_or_else(|| "unknown".into())
}

/// The facts as aligned `name: value` lines.
pub fn platform_text(p: &Platform, all_irqs: bool) -> String {
    let mut rows: Vec<(&str, String)> = vec![
        ("host", opt(&p.hostname)),
        ("cpu model", opt(&p.cpu_model)),
        (
            "cpus",
            format!(
                "{} logical, online {}, {} package(s), {} thread(s) per core, {} NUMA node(s)",
                opt(&p.logical_cpus),
                opt(&p.online_cpus),
                opt(&p.packages),
                opt(&p.threads_per_core),
                opt(&p.numa_nodes)
            ),
        ),
        ("kernel", opt(&p.kernel)),
        ("preemption", opt(&p.preemption)),
        ("tick", format!("HZ={} nohz={}", opt(&p.hz), opt(&p.nohz))),
        ("clocksource", opt(&p.clocksource)),
        (
            "cpufreq",
            match &p.cpufreq_governor {
                Some(g) => format!(
                    "{g}, {}-{} kHz",
                    opt(&p.cpufreq_min_khz),
                    opt(&p.cpufreq_max_khz)
                ),
                None => "no cpufreq driver (frequency not controlled by the guest/OS)".into(),
            },
        ),
        (
            "cpuidle",
            if p.cpuidle_states.is_empty() {
                "no cpuidle states".into()
            } else {
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
            },
        ),
        (
            "virtualization",
            p.hypervisor
                .clone()
                .unwrap_or_else(|| "none detected".into()),
        ),
        (
            "isolcpus",
            p.isolcpus.clone().unwrap_or_else(|| "none".into()),
        ),
        (
            "nohz_full",
            p.nohz_full.clone().unwrap_or_else(|| "none".into()),
        ),
        (
            "rt throttling",
            match (p.rt_runtime_us, p.rt_period_us) {
                (Some(-1), _) => "off (sched_rt_runtime_us=-1)".into(),
                (Some(r), Some(per)) => format!("{r} us of every {per} us for real-time tasks"),
                _ => "unknown".into(),
            },
        ),
        (
            "irq time accounting",
            match p.irq_time_accounting {
                Some(true) => "yes".into(),
                Some(false) => "no (irq time is charged to the interrupted task)".into(),
                None => "unknown".into(),
            },
        ),
    ];
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
