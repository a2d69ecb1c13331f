//! Small pieces every load uses: the shared stop/deadline control, CPU time
//! of a thread, placement.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// When workers must stop: at the deadline, or earlier when asked. Each
/// worker checks it itself, so a load ends on time even if whoever started
/// it is starved (e.g. by a busy SCHED_FIFO competitor) or gone.
#[derive(Clone, Debug)]
pub(crate) struct Ctl {
    pub stop: Arc<AtomicBool>,
    pub start: Instant,
    pub deadline: Instant,
}

impl Ctl {
    pub fn done(&self) -> bool {
        self.stop.load(Ordering::Relaxed) || Instant::now() >= self.deadline
    }

    /// Time left, or zero.
    pub fn left(&self) -> Duration {
        self.deadline.saturating_duration_since(Instant::now())
    }
}

/// What one load achieved: figures with units in their names, and
/// sentences about anything that did not go as asked.
#[derive(Debug, Default)]
pub(crate) struct Outcome {
    pub achieved: BTreeMap<String, f64>,
    pub warnings: Vec<String>,
}

impl Outcome {
    pub fn set(&mut self, key: &str, v: f64) {
        if v.is_finite() {
            self.achieved.insert(key.to_string(), v);
        }
    }

    /// Adds a warning unless the same sentence is already there (every
    /// worker of a load tends to hit the same refusal).
    pub fn warn_once(&mut self, m: &str) {
        if !self.warnings.iter().any(|w| w == m) {
            self.warnings.push(m.to_string());
        }
    }

    /// Joins a load's worker threads, turning a panicked worker into a
    /// warning instead of losing the other workers' figures.
    pub fn join<W>(&mut self, kind: &str, handles: Vec<std::thread::JoinHandle<W>>) -> Vec<W> {
        let mut ws = Vec::with_capacity(handles.len());
        for h in handles {
            match h.join() {
                Ok(w) => ws.push(w),
                Err(_) => self.warn_once(&format!("{kind} load: a worker panicked")),
            }
        }
        ws
    }
}

/// CPU time the calling thread has consumed.
pub(crate) fn thread_cpu_time() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is a valid out-parameter.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// CPUs this machine has online (the loads refuse others up front).
pub use punctual_live::sysinfo::online_cpus;

/// Pins the calling thread, returning a warning sentence if refused.
pub(crate) fn place(what: &str, cpus: &[u32]) -> Option<String> {
    if cpus.is_empty() {
        return None;
    }
    punctual_live::rt::pin_to_cpus(cpus)
        .err()
        .map(|e| format!("{what}: could not pin to CPU(s) {cpus:?} ({e}); it ran unpinned"))
}

/// Round-robin CPU for worker `i` of a set (None: unpinned).
pub(crate) fn nth_cpu(cpus: &Option<Vec<u32>>, i: usize) -> Vec<u32> {
    match cpus {
        Some(v) if !v.is_empty() => vec![v[i % v.len()]],
        _ => Vec::new(),
    }
}

/// A tiny fast PRNG for random offsets (quality is irrelevant here).
pub(crate) struct XorShift(u64);

impl XorShift {
    pub fn new(seed: u64) -> Self {
        XorShift(seed | 1)
    }
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }
}

pub(crate) fn secs(d: Duration) -> f64 {
    d.as_secs_f64()
}
