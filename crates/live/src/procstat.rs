//! The kernel's own accounting: `/proc/stat` (irq, softirq, steal time per
//! CPU) and `/proc/interrupts` (counts per CPU), read before and after a
//! run so a user sees how much of the measured loss the kernel admits to.
//!
//! Without CONFIG_IRQ_TIME_ACCOUNTING the irq and softirq columns are
//! sampled at the tick (an interrupt is charged only if the tick lands in
//! it), so they under-report short interrupts; steal is reported by the
//! hypervisor's paravirtual clock and covers only preempted vCPU time.

use std::collections::BTreeMap;

use punctual_record::KernelView;
use punctual_units::Nanos;

#[derive(Clone, Debug, Default, PartialEq)]
pub struct CpuTimes {
    pub irq: u64,
    pub softirq: u64,
    pub steal: u64,
}

/// One reading of both files.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct KernelSnapshot {
    /// Per CPU, in USER_HZ ticks.
    pub stat: BTreeMap<u32, CpuTimes>,
    /// Line label → per-CPU counts.
    pub interrupts: BTreeMap<String, Vec<u64>>,
    /// Nanoseconds per USER_HZ tick.
    pub ns_per_tick: u64,
}

/// Parses `/proc/stat`'s `cpuN` lines.
pub fn parse_stat(text: &str) -> BTreeMap<u32, CpuTimes> {
    let mut m = BTreeMap::new();
    for line in text.lines() {
        let mut it = line.split_whitespace();
        let Some(head) = it.next() else { continue };
        let Some(n) = head.strip_prefix("cpu").and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        let v: Vec<u64> = it.filter_map(|x| x.parse().ok()).collect();
        if v.len() >= 8 {
            m.insert(
                n,
                CpuTimes {
                    irq: v[5],
                    softirq: v[6],
                    steal: v[7],
                },
            );
        }
    }
    m
}

/// Parses `/proc/interrupts`: the header gives the CPU columns; each line
/// is `LABEL: counts… [description]`. Numbered IRQs are labelled
/// `N:description` (e.g. `25:virtio0-input.0`), system vectors by their
/// short name (`LOC`, `RES`, `CAL`, `TLB`…).
pub fn parse_interrupts(text: &str) -> BTreeMap<String, Vec<u64>> {
    let mut lines = text.lines();
    let ncpu = lines
        .next()
        .map(|h| {
            h.split_whitespace()
                .filter(|w| w.starts_with("CPU"))
                .count()
        })
        .unwrap_or(0);
    let mut m = BTreeMap::new();
    for line in lines {
        let Some((label, rest)) = line.split_once(':') else {
            continue;
        };
        let label = label.trim();
        let mut counts = Vec::with_capacity(ncpu);
        let mut words = rest.split_whitespace().peekable();
        while counts.len() < ncpu {
            match words.peek().and_then(|w| w.parse::<u64>().ok()) {
                Some(v) => {
                    counts.push(v);
                    words.next();
                }
                None => break,
            }
        }
        if counts.is_empty() {
            continue;
        }
        let desc: Vec<&str> = words.collect();
        let key = if label.chars().all(|c| c.is_ascii_digit()) {
            format!("{label}:{}", desc.last().copied().unwrap_or(""))
        } else {
            label.to_string()
        };
        m.insert(key, counts);
    }
    m
}

impl KernelSnapshot {
    pub fn read() -> Result<KernelSnapshot, String> {
        let stat = std::fs::read_to_string("/proc/stat").map_err(|e| format!("/proc/stat: {e}"))?;
        let ints = std::fs::read_to_string("/proc/interrupts").unwrap_or_default();
        // SAFETY: sysconf with a constant name.
        let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
        let hz = if hz > 0 { hz as u64 } else { 100 };
        Ok(KernelSnapshot {
            stat: parse_stat(&stat),
            interrupts: parse_interrupts(&ints),
            ns_per_tick: 1_000_000_000 / hz,
        })
    }

    /// What the kernel charged to `cpu` between two snapshots.
    pub fn delta(before: &KernelSnapshot, after: &KernelSnapshot, cpu: u32) -> KernelView {
        let z = CpuTimes::default();
        let b = before.stat.get(&cpu).unwrap_or(&z);
        let a = after.stat.get(&cpu).unwrap_or(&z);
        let ns = |x: u64, y: u64| Nanos(y.saturating_sub(x) * after.ns_per_tick);
        let mut interrupts = BTreeMap::new();
        for (k, av) in &after.interrupts {
            let bv = before
                .interrupts
                .get(k)
                .and_then(|v| v.get(cpu as usize))
                .copied()
                .unwrap_or(0);
            if let Some(&x) = av.get(cpu as usize) {
                let d = x.saturating_sub(bv);
                if d > 0 {
                    interrupts.insert(k.clone(), d);
                }
            }
        }
        KernelView {
            irq_ns: ns(b.irq, a.irq),
            softirq_ns: ns(b.softirq, a.softirq),
            steal_ns: ns(b.steal, a.steal),
            interrupts,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const INTS_A: &str = "           CPU0       CPU1       \n 24:          1          0  IO-APIC   5-edge      ACPI:Ged\n 29:        100        200  PCI-MSI 49152-edge      virtio0-input.0\nLOC:       5000       6000   Local timer interrupts\nERR:          0\n";
    const INTS_B: &str = "           CPU0       CPU1       \n 24:          1          0  IO-APIC   5-edge      ACPI:Ged\n 29:        150        200  PCI-MSI 49152-edge      virtio0-input.0\nLOC:       5250       6100   Local timer interrupts\nERR:          0\n";

    #[test]
    fn deltas_per_cpu() {
        let b = KernelSnapshot {
            stat: parse_stat(
                "cpu  1 2 3 4 5 6 7 8 0 0\ncpu0 1 0 2 3 0 10 20 30 0 0\ncpu1 1 0 2 3 0 1 1 1 0 0\n",
            ),
            interrupts: parse_interrupts(INTS_A),
            ns_per_tick: 10_000_000,
        };
        let a = KernelSnapshot {
            stat: parse_stat(
                "cpu  1 2 3 4 5 6 7 8 0 0\ncpu0 1 0 2 3 0 12 20 35 0 0\ncpu1 1 0 2 3 0 1 1 1 0 0\n",
            ),
            interrupts: parse_interrupts(INTS_B),
            ns_per_tick: 10_000_000,
        };
        let k = KernelSnapshot::delta(&b, &a, 0);
        assert_eq!(k.irq_ns, Nanos::from_ms(20));
        assert_eq!(k.softirq_ns, Nanos::ZERO);
        assert_eq!(k.steal_ns, Nanos::from_ms(50));
        assert_eq!(k.interrupts.get("29:virtio0-input.0"), Some(&50));
        assert_eq!(k.interrupts.get("LOC"), Some(&250));
        assert_eq!(k.interrupts.len(), 2);
        let k1 = KernelSnapshot::delta(&b, &a, 1);
        assert_eq!(k1.interrupts.get("LOC"), Some(&100));
    }

    #[test]
    fn reads_this_machine() {
        let s = KernelSnapshot::read().unwrap();
        assert!(!s.stat.is_empty());
        assert!(s.ns_per_tick > 0);
    }
}
