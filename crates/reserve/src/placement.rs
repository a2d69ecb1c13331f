//! Where several reservations go: each on the least-utilized CPU that can
//! take it (the Rialto/NT heuristic of Jones's talk), decided by the shared core's
//! [`MultiPlan`], with the deadline bandwidth already on each CPU counted.
//!
//! Existing deadline threads bound to one CPU (a one-CPU partition or
//! affinity) count on that CPU; threads free to run on several CPUs under
//! global EDF count a share on each, since the kernel may run them on any.

use punctual_sched::plan::{MultiPlan, PlanConfig};
use punctual_units::Nanos;

pub use punctual_record::reserve::Placed;

/// Deadline bandwidth already admitted by the kernel.
#[derive(Clone, Debug, PartialEq)]
pub struct Existing {
    pub runtime: Nanos,
    pub period: Nanos,
    /// The CPUs it may run on.
    pub cpus: Vec<u32>,
}

/// Places `requests` (runtime, period) on `cpus`, in the order given, each
/// on the least-utilized CPU whose plan can take it; a CPU is capped at
/// `limit_ratio` (the kernel's deadline bandwidth limit). Refuses with one
/// sentence when one cannot be placed anywhere.
pub fn place(
    requests: &[(Nanos, Nanos)],
    cpus: &[u32],
    existing: &[Existing],
    limit_ratio: f64,
) -> Result<Vec<Placed>, String> {
    if cpus.is_empty() {
        return Err("no CPU to place reservations on".into());
    }
    // The plan's frame is the shortest period in play, so those periods
    // are exact; longer ones round down to base·2^d, which only over-counts
    // their use (conservative).
    let base = requests
        .iter()
        .map(|r| r.1)
        .chain(existing.iter().map(|e| e.period))
        .min()
        .unwrap_or(Nanos::from_ms(10));
    let cfg = PlanConfig::new(base).with_utilization_limit_ratio(limit_ratio);
    let mut plan = MultiPlan::new(cpus.len(), cfg)?;
    for e in existing {
        let on: Vec<usize> = cpus
            .iter()
            .enumerate()
            .filter(|(_, c)| e.cpus.contains(c))
            .map(|(i, _)| i)
            .collect();
        if on.is_empty() {
            continue;
        }
        // A share per CPU it may use; if the plan cannot fit it (its
        // rounding), the kernel's admission still has the last word.
        let share = Nanos((e.runtime.0 / on.len() as u64).max(1));
        for i in on {
            let _ = plan.reserve_on(i, share, e.period);
        }
    }
    let util = |p: &MultiPlan, i: usize| p.plan(i).map_or(0.0, |x| x.utilization_fraction());
    let mut out = Vec::new();
    for (index, &(runtime, period)) in requests.iter().enumerate() {
        let before: Vec<f64> = (0..cpus.len()).map(|i| util(&plan, i)).collect();
        let (i, _) = plan.reserve(runtime, period).map_err(|d| {
            format!(
                "reservation {runtime}/{period} (number {}) cannot be placed on any CPU: {d}",
                index + 1
            )
        })?;
        out.push(Placed {
            index,
            cpu: cpus[i],
            runtime_ns: runtime,
            period_ns: period,
            cpu_utilization_before_ratio: before[i],
            cpu_utilization_after_ratio: util(&plan, i),
        });
    }
    Ok(out)
}

/// Deadline threads now on the system, with the CPUs each may use.
pub fn existing_deadline_load() -> Vec<Existing> {
    crate::kernel::deadline_tasks()
        .into_iter()
        .map(|t| Existing {
            runtime: t.runtime_ns,
            period: t.period_ns,
            cpus: std::fs::read_to_string(format!("/proc/{}/status", t.tid))
                .ok()
                .and_then(|s| {
                    s.lines()
                        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
                        .and_then(|l| punctual_live::sysinfo::parse_cpu_list(l).ok())
                })
                .unwrap_or_default(),
        })
        .collect()
}

/// Parses `AMOUNT/PERIOD` (e.g. `4ms/20ms`).
pub fn parse_reservation(s: &str) -> Result<(Nanos, Nanos), String> {
    let (a, p) = s
        .split_once('/')
        .ok_or_else(|| format!("--reserve '{s}' is not AMOUNT/PERIOD (e.g. 4ms/20ms)"))?;
    let a = punctual_units::parse_duration(a.trim())
        .map_err(|e| format!("--reserve '{s}': amount {e}"))?;
    let p = punctual_units::parse_duration(p.trim())
        .map_err(|e| format!("--reserve '{s}': period {e}"))?;
    Ok((a, p))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(x: u64) -> Nanos {
        Nanos::from_ms(x)
    }

    #[test]
    fn least_utilized_cpu_first_counting_existing_load() {
        // CPU 0 already carries a pinned 30 % deadline thread.
        let existing = [Existing {
            runtime: ms(6),
            period: ms(20),
            cpus: vec![0],
        }];
        let p = place(
            &[(ms(4), ms(20)), (ms(2), ms(20)), (ms(3), ms(20))],
            &[0, 1],
            &existing,
            0.95,
        )
        .unwrap();
        let cpus: Vec<u32> = p.iter().map(|x| x.cpu).collect();
        // 20 % → CPU 1 (0 %); 10 % → CPU 1 (20 % < 30 %); 15 % → tie at
        // 30 %, lower index: CPU 0.
        assert_eq!(cpus, vec![1, 1, 0]);
        assert!((p[1].cpu_utilization_before_ratio - 0.2).abs() < 1e-3);
        assert!((p[2].cpu_utilization_after_ratio - 0.45).abs() < 1e-3);
    }

    #[test]
    fn without_existing_load_reservations_alternate_and_overflow_is_refused() {
        let p = place(&[(ms(10), ms(20)), (ms(10), ms(20))], &[2, 3], &[], 0.95).unwrap();
        assert_eq!((p[0].cpu, p[1].cpu), (2, 3));
        // A floating 40 % thread counts 20 % on each CPU it may use.
        let floating = [Existing {
            runtime: ms(8),
            period: ms(20),
            cpus: vec![0, 1],
        }];
        let p = place(&[(ms(15), ms(20))], &[0, 1], &floating, 0.95).unwrap();
        assert!((p[0].cpu_utilization_before_ratio - 0.2).abs() < 1e-3);
        let e = place(
            &[(ms(15), ms(20)), (ms(15), ms(20)), (ms(15), ms(20))],
            &[0, 1],
            &[],
            0.95,
        )
        .unwrap_err();
        assert!(e.contains("number 3") && e.contains("15ms/20ms"), "{e}");
        assert_eq!(parse_reservation("4ms/20ms").unwrap(), (ms(4), ms(20)));
        assert!(parse_reservation("4ms")
            .unwrap_err()
            .contains("AMOUNT/PERIOD"));
    }
}
