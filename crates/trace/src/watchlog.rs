//! The watched threads' scheduler events as the flight recorder's reader
//! keeps them while it drains the rings, and the `--stop-at` check made on
//! them as they arrive. Below both the recorder, which feeds it, and
//! `watch`, which turns it into activations after the run, so neither
//! imports the other.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use punctual_record::Nanos;

use crate::event::{left_runnable, Decoded, Event};

/// Scheduler events kept per run (24 bytes each): 4 M holds more than an
/// hour of a 1 kHz thread's three events per period.
pub const MAX_EVENTS: usize = 4_000_000;

/// A wake-up longer than this is not matched to a switch-in while the run
/// goes on (for `--stop-at`): the pair then belongs to a lost event.
const MAX_ONLINE_LATENCY_NS: u64 = 1_000_000_000;

/// What a watched thread did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum What {
    /// Its wake-up started (on the waker's CPU).
    Waking,
    /// Switched in on the event's CPU.
    In,
    /// Switched out; `runnable` when it left still runnable (preempted).
    Out { runnable: bool },
    /// One of its system calls returned: it runs on the event's CPU. The
    /// switch-in where the kernel traced none (a CPU leaving idle).
    Own,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ThreadEvent {
    pub ts: u64,
    pub tid: i32,
    pub cpu: u32,
    pub what: What,
}

/// `--stop-at`: the latency that ends the run, and the flag it raises.
#[derive(Clone, Debug)]
pub struct StopAt {
    pub threshold: Nanos,
    pub flag: Arc<AtomicBool>,
}

/// The watched threads' events, kept by the reader as it drains the rings.
#[derive(Clone, Debug, Default)]
pub struct WatchLog {
    tids: Vec<i32>,
    pub events: Vec<ThreadEvent>,
    /// Last name seen per thread (from `sched_switch`).
    pub names: BTreeMap<i32, String>,
    pub dropped: u64,
    max: usize,
    /// Take `sched_wakeup` as the wake-up (the kernel lacks `sched_waking`).
    pub(crate) use_wakeup: bool,
    stop_at: Option<StopAt>,
    /// Unmatched wake-up and switch-in per thread, for `--stop-at`: the
    /// two come from different CPUs' rings, drained one after the other.
    pending_wake: HashMap<i32, u64>,
    pending_in: HashMap<i32, (u64, u32)>,
    /// The wake-up that crossed `--stop-at`: (tid, cpu, switch-in, latency).
    pub tripped: Option<(i32, u32, u64, u64)>,
}

impl WatchLog {
    pub fn new(tids: &[i32], use_wakeup: bool, stop_at: Option<StopAt>) -> WatchLog {
        WatchLog {
            tids: tids.to_vec(),
            max: MAX_EVENTS,
            use_wakeup,
            stop_at,
            ..Default::default()
        }
    }

    /// Keeps the events of `tids` too, from now on.
    pub fn add_tids(&mut self, tids: &[i32]) {
        for t in tids {
            if !self.tids.contains(t) {
                self.tids.push(*t);
            }
        }
    }

    fn push(&mut self, e: ThreadEvent) {
        if self.events.len() >= self.max {
            self.dropped += 1;
        } else {
            self.events.push(e);
        }
    }

    /// Keeps `ev` (seen on `cpu`) if it concerns a watched thread.
    pub fn feed(&mut self, cpu: u32, ev: &Decoded) {
        match &ev.event {
            Event::Waking { pid, .. } if !self.use_wakeup && self.tids.contains(pid) => {
                self.wake(ev.ts, *pid, cpu)
            }
            Event::Wakeup { pid, .. } if self.use_wakeup && self.tids.contains(pid) => {
                self.wake(ev.ts, *pid, cpu)
            }
            Event::Switch {
                prev_pid,
                prev_comm,
                next_pid,
                next_comm,
                prev_state,
                ..
            } => {
                if self.tids.contains(prev_pid) {
                    let runnable = prev_state.is_some_and(left_runnable);
                    self.names.insert(*prev_pid, prev_comm.clone());
                    self.push(ThreadEvent {
                        ts: ev.ts,
                        tid: *prev_pid,
                        cpu,
                        what: What::Out { runnable },
                    });
                }
                if self.tids.contains(next_pid) {
                    self.names.insert(*next_pid, next_comm.clone());
                    self.push(ThreadEvent {
                        ts: ev.ts,
                        tid: *next_pid,
                        cpu,
                        what: What::In,
                    });
                    if let Some(w) = self.pending_wake.remove(next_pid) {
                        self.check(*next_pid, cpu, w, ev.ts);
                    } else if self.stop_at.is_some() {
                        self.pending_in.insert(*next_pid, (ev.ts, cpu));
                    }
                }
            }
            Event::SysExit if self.tids.contains(&ev.pid) => {
                self.push(ThreadEvent {
                    ts: ev.ts,
                    tid: ev.pid,
                    cpu,
                    what: What::Own,
                });
                if let Some(w) = self.pending_wake.remove(&ev.pid) {
                    self.check(ev.pid, cpu, w, ev.ts);
                }
            }
            _ => {}
        }
    }

    fn wake(&mut self, ts: u64, tid: i32, cpu: u32) {
        self.push(ThreadEvent {
            ts,
            tid,
            cpu,
            what: What::Waking,
        });
        if self.stop_at.is_none() {
            return;
        }
        match self.pending_in.remove(&tid) {
            Some((t_in, in_cpu)) if t_in >= ts => self.check(tid, in_cpu, ts, t_in),
            _ => {
                self.pending_wake.insert(tid, ts);
            }
        }
    }

    fn check(&mut self, tid: i32, cpu: u32, wake: u64, run: u64) {
        let Some(s) = &self.stop_at else { return };
        let lat = run.saturating_sub(wake);
        if run >= wake
            && lat < MAX_ONLINE_LATENCY_NS
            && lat > s.threshold.0
            && self.tripped.is_none()
        {
            self.tripped = Some((tid, cpu, run, lat));
            s.flag.store(true, Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stop_at_matches_pairs_drained_in_either_order() {
        let flag = Arc::new(AtomicBool::new(false));
        let mut log = WatchLog::new(
            &[7],
            false,
            Some(StopAt {
                threshold: Nanos(1_000),
                flag: Arc::clone(&flag),
            }),
        );
        let waking = |ts| Decoded {
            ts,
            pid: 0,
            event: Event::Waking {
                pid: 7,
                comm: "app".into(),
                prio: 10,
            },
        };
        let switch_in = |ts| Decoded {
            ts,
            pid: 0,
            event: Event::Switch {
                prev_pid: 0,
                prev_comm: "swapper/1".into(),
                prev_prio: 120,
                next_pid: 7,
                next_comm: "app".into(),
                next_prio: 10,
                prev_state: Some(0),
            },
        };
        log.feed(0, &waking(100));
        log.feed(1, &switch_in(600));
        assert!(!flag.load(Ordering::Relaxed), "500 ns is under 1 us");
        // The switch-in's CPU drained first.
        log.feed(1, &switch_in(9_000));
        log.feed(0, &waking(5_000));
        assert!(flag.load(Ordering::Relaxed));
        assert_eq!(log.tripped, Some((7, 1, 9_000, 4_000)));
        assert_eq!(log.events.len(), 4);
    }
}
