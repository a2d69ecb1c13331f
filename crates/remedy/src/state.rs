//! What the fixes may change, read from the machine, so a run can show
//! that it left nothing changed: interrupt affinities, the RT throttling
//! sysctls, the cpusets under the cpuset root and its load balancing, each
//! thread's CPU affinity and scheduling policy, and the PM QoS bound.

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;
use std::time::Duration;

use punctual_live::rt;
use punctual_reserve::partition::{find_cpuset_fs, CpusetFs};

/// The sysctls a fix may write.
const SYSCTLS: [&str; 2] = [crate::RT_RUNTIME, "/proc/sys/kernel/sched_rt_period_us"];

/// A thread's CPU affinity, policy and priority.
pub type ThreadState = (Vec<u32>, u32, u32);

/// The machine's settings a fix may change.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct State {
    /// `/proc/irq/N/smp_affinity_list` of every interrupt.
    pub irqs: BTreeMap<u32, String>,
    pub sysctls: BTreeMap<String, String>,
    /// The cgroups directly under the cpuset root.
    pub cpusets: Vec<String>,
    /// The cpuset root's `cpuset.sched_load_balance` (cgroup v1).
    pub load_balance: Option<String>,
    /// What `/dev/cpu_dma_latency` reads: the bound in force, in us.
    pub dma_latency_us: Option<i32>,
    pub threads: BTreeMap<i32, ThreadState>,
}

fn read(p: impl AsRef<Path>) -> Option<String> {
    fs::read_to_string(p).ok().map(|s| s.trim().to_string())
}

fn cpuset_root() -> Option<std::path::PathBuf> {
    match find_cpuset_fs()? {
        CpusetFs::V1(p) | CpusetFs::V2(p) => Some(p),
    }
}

fn threads() -> BTreeMap<i32, ThreadState> {
    punctual_live::sysinfo::all_threads()
        .into_iter()
        .filter_map(|(_, tid)| {
            let a = rt::thread_affinity(tid).ok()?;
            let s = rt::sched_getattr(tid).ok()?;
            Some((tid, (a, s.sched_policy, s.sched_priority)))
        })
        .collect()
}

impl State {
    /// Reads the state now.
    pub fn read() -> State {
        let mut irqs = BTreeMap::new();
        if let Ok(rd) = fs::read_dir("/proc/irq") {
            for e in rd.flatten() {
                if let Some(n) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) {
                    if let Some(a) = read(e.path().join("smp_affinity_list")) {
                        irqs.insert(n, a);
                    }
                }
            }
        }
        let sysctls = SYSCTLS
            .iter()
            .map(|k| (k.to_string(), read(k).unwrap_or_default()))
            .collect();
        let (mut cpusets, mut load_balance) = (Vec::new(), None);
        if let Some(r) = cpuset_root() {
            cpusets = fs::read_dir(&r)
                .map(|rd| {
                    rd.flatten()
                        .filter(|e| e.path().is_dir())
                        .map(|e| e.file_name().to_string_lossy().into_owned())
                        .collect()
                })
                .unwrap_or_default();
            cpusets.sort();
            load_balance = read(r.join("cpuset.sched_load_balance"));
        }
        let dma_latency_us = fs::read(crate::DMA_LATENCY).ok().and_then(|b| {
            b.get(..4)
                .map(|b| i32::from_ne_bytes([b[0], b[1], b[2], b[3]]))
        });
        State {
            irqs,
            sysctls,
            cpusets,
            load_balance,
            dma_latency_us,
            threads: threads(),
        }
    }

    /// Reads the state twice, `gap` apart, keeping only the threads whose
    /// settings held still: the baseline to compare with after a run, on
    /// a machine where other programs may change their own threads.
    pub fn settled(gap: Duration) -> State {
        let a = State::read();
        std::thread::sleep(gap);
        let mut b = State::read();
        b.threads.retain(|t, v| a.threads.get(t) == Some(v));
        b
    }

    /// What differs in `after`, one sentence each (empty: nothing). Threads
    /// that ended or started in between are not compared.
    pub fn changes(&self, after: &State) -> Vec<String> {
        let mut out = Vec::new();
        for (irq, a) in &self.irqs {
            match after.irqs.get(irq) {
                Some(b) if b != a => out.push(format!("IRQ {irq} affinity {a} is now {b}")),
                _ => {}
            }
        }
        for (k, a) in &self.sysctls {
            if let Some(b) = after.sysctls.get(k).filter(|b| *b != a) {
                out.push(format!("{k} {a} is now {b}"));
            }
        }
        if self.cpusets != after.cpusets {
            out.push(format!(
                "the cpusets {:?} are now {:?}",
                self.cpusets, after.cpusets
            ));
        }
        if self.load_balance != after.load_balance {
            out.push(format!(
                "cpuset.sched_load_balance {:?} is now {:?}",
                self.load_balance, after.load_balance
            ));
        }
        if self.dma_latency_us != after.dma_latency_us {
            out.push(format!(
                "the PM QoS bound {:?} us is now {:?} us",
                self.dma_latency_us, after.dma_latency_us
            ));
        }
        for (tid, a) in &self.threads {
            match after.threads.get(tid) {
                Some(b) if b != a => out.push(format!(
                    "thread {tid} (CPUs {:?}, policy {} priority {}) is now (CPUs {:?}, policy {} priority {})",
                    a.0, a.1, a.2, b.0, b.1, b.2
                )),
                _ => {}
            }
        }
        out
    }
}
