//! A known noise source: the "noisy neighbor" used to check that the probes,
//! the forecasts and the cause recorder measure what is really there.
//!
//! A SCHED_FIFO thread pinned to the probed CPU wakes every `period`
//! (10.37 ms by default: incommensurate with a 1 ms probe, so its phase
//! drifts across the probe's period) and spins for `spin`. It measures what
//! it really spun, so tests compare against the truth rather than against
//! the nominal 1 ms.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use punctual_units::Nanos;

use crate::clock::{mono, sleep_until, spin_until};
use crate::rt::{pin_to_cpu, set_policy, set_thread_name, Policy};

/// What the neighbor actually did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NeighborReport {
    pub bursts: u64,
    /// Sum of measured spin lengths (wall time from first to last spin
    /// instruction of each burst, which includes anything that preempted it).
    pub spun: Nanos,
    pub thread_id: i32,
    pub ran_for: Nanos,
}

#[derive(Clone, Debug)]
pub struct NeighborConfig {
    pub cpu: u32,
    pub period: Nanos,
    pub spin: Nanos,
    pub priority: u8,
    pub name: String,
}

impl Default for NeighborConfig {
    fn default() -> Self {
        NeighborConfig {
            cpu: 0,
            period: Nanos(10_370_000),
            spin: Nanos::from_ms(1),
            priority: 99,
            name: "noisy-neighbor".to_string(),
        }
    }
}

/// A running neighbor; [`NoisyNeighbor::stop`] ends it and reports.
pub struct NoisyNeighbor {
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<Result<NeighborReport, String>>>,
}

impl NoisyNeighbor {
    /// Starts the neighbor. Fails (without leaving a thread behind) when the
    /// policy or pinning is refused, with the reason.
    pub fn start(cfg: NeighborConfig) -> Result<NoisyNeighbor, String> {
        let stop = Arc::new(AtomicBool::new(false));
        let (tx, rx) = std::sync::mpsc::channel::<Result<i32, String>>();
        let s2 = Arc::clone(&stop);
        let handle = std::thread::Builder::new()
            .name(cfg.name.clone())
            .spawn(move || {
                set_thread_name(&cfg.name);
                if let Err(e) = pin_to_cpu(cfg.cpu) {
                    let msg = format!("cannot pin noisy neighbor to CPU {}: {e}", cfg.cpu);
                    let _ = tx.send(Err(msg.clone()));
                    return Err(msg);
                }
                let _guard = match set_policy(Policy::Fifo {
                    priority: cfg.priority,
                }) {
                    Ok(g) => g,
                    Err(e) => {
                        let msg = format!("SCHED_FIFO {} refused: {e}", cfg.priority);
                        let _ = tx.send(Err(msg.clone()));
                        return Err(msg);
                    }
                };
                let tid = crate::rt::gettid();
                let _ = tx.send(Ok(tid));
                let start = mono();
                let mut next = start + cfg.period;
                let mut rep = NeighborReport {
                    thread_id: tid,
                    ..Default::default()
                };
                while !s2.load(Ordering::Relaxed) {
                    sleep_until(next);
                    let t0 = mono();
                    let t1 = spin_until(t0 + cfg.spin);
                    rep.spun += t1 - t0;
                    rep.bursts += 1;
                    next += cfg.period;
                    // Never try to catch up a backlog: a late wake-up skips.
                    let now = mono();
                    while next <= now {
                        next += cfg.period;
                    }
                }
                rep.ran_for = mono() - start;
                Ok(rep)
            })
            .map_err(|e| format!("cannot start noisy neighbor thread: {e}"))?;
        match rx.recv() {
            Ok(Ok(_)) => Ok(NoisyNeighbor {
                stop,
                handle: Some(handle),
            }),
            Ok(Err(e)) => {
                let _ = handle.join();
                Err(e)
            }
            Err(_) => Err("noisy neighbor thread died".into()),
        }
    }

    pub fn stop(mut self) -> NeighborReport {
        self.finish().unwrap_or_default()
    }

    fn finish(&mut self) -> Option<NeighborReport> {
        self.stop.store(true, Ordering::Relaxed);
        self.handle
            .take()
            .and_then(|h| h.join().ok())
            .and_then(|r| r.ok())
    }
}

impl Drop for NoisyNeighbor {
    fn drop(&mut self) {
        let _ = self.finish();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn neighbor_spins_what_it_says_or_explains_why_not() {
        let cfg = NeighborConfig {
            period: Nanos::from_ms(10),
            spin: Nanos::from_ms(1),
            ..Default::default()
        };
        match NoisyNeighbor::start(cfg) {
            Err(e) => eprintln!("skipped: {e}"),
            Ok(n) => {
                std::thread::sleep(std::time::Duration::from_millis(200));
                let r = n.stop();
                assert!(r.bursts >= 10, "{r:?}");
                let per = r.spun.0 / r.bursts;
                assert!((1_000_000..1_500_000).contains(&per), "{r:?}");
            }
        }
    }
}
