//! `cpu`: competing busy threads at a chosen policy, priority or nice value
//! (the Rialto talk's "high-priority competitor thread"), optionally busy only a
//! fraction of each period.

use std::hint::black_box;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use punctual_live::rt::{set_policy, Policy};

use crate::spec::{CpuOpts, CpuPolicy};
use crate::util::{nth_cpu, place, secs, thread_cpu_time, Ctl, Outcome};
use crate::{LoadError, Prepared, Running};

struct CpuPrepared(CpuOpts);

pub(crate) fn prepare(o: &CpuOpts) -> Result<Box<dyn Prepared>, LoadError> {
    Ok(Box::new(CpuPrepared(o.clone())))
}

struct Worker {
    cpu: Duration,
    spins: u64,
    ended: Instant,
    warnings: Vec<String>,
}

struct CpuRunning {
    o: CpuOpts,
    start: Instant,
    handles: Vec<JoinHandle<Worker>>,
}

fn policy_of(o: &CpuOpts) -> Policy {
    match o.policy {
        CpuPolicy::Other => Policy::Other { nice: o.nice },
        CpuPolicy::Fifo => Policy::Fifo {
            priority: o.priority,
        },
        CpuPolicy::Rr => Policy::Rr {
            priority: o.priority,
        },
    }
}

/// About a microsecond of integer work the optimizer cannot remove.
#[inline(never)]
fn spin_chunk(mut x: u64) -> u64 {
    for _ in 0..256 {
        x = black_box(
            x.wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407),
        );
    }
    x
}

impl Prepared for CpuPrepared {
    fn start(self: Box<Self>, ctl: Ctl) -> Box<dyn Running> {
        let o = self.0;
        let mut handles = Vec::new();
        for i in 0..o.threads as usize {
            let c = ctl.clone();
            let cpus = nth_cpu(&o.cpus, i);
            let policy = policy_of(&o);
            let (duty, period) = (o.duty_fraction, o.period.to_std());
            handles.push(
                std::thread::Builder::new()
                    .name(format!("pl-cpu{i}"))
                    .spawn(move || {
                        let mut warnings: Vec<String> =
                            place("cpu load", &cpus).into_iter().collect();
                        let default = matches!(policy, Policy::Other { nice: 0 });
                        // The guard puts the thread back before it ends.
                        let _guard = if default {
                            None
                        } else {
                            match set_policy(policy) {
                                Ok(g) => Some(g),
                                Err(e) => {
                                    warnings.push(format!(
                                        "cpu load: policy {} refused ({e}); ran as SCHED_OTHER",
                                        policy.name()
                                    ));
                                    None
                                }
                            }
                        };
                        let mut x = i as u64;
                        let mut spins = 0u64;
                        let busy = period.mul_f64(duty);
                        let mut next = Instant::now();
                        while !c.done() {
                            if duty >= 1.0 {
                                x = spin_chunk(x);
                                spins += 1;
                                continue;
                            }
                            let until = next + busy;
                            while Instant::now() < until && !c.done() {
                                x = spin_chunk(x);
                                spins += 1;
                            }
                            next += period;
                            let now = Instant::now();
                            if next > now {
                                std::thread::sleep((next - now).min(c.left()));
                            } else {
                                next = now;
                            }
                        }
                        black_box(x);
                        Worker {
                            cpu: thread_cpu_time(),
                            spins,
                            ended: Instant::now(),
                            warnings,
                        }
                    })
                    .expect("spawn cpu worker"),
            );
        }
        Box::new(CpuRunning {
            o,
            start: ctl.start,
            handles,
        })
    }
}

impl Running for CpuRunning {
    fn finish(self: Box<Self>) -> Outcome {
        let mut out = Outcome::default();
        let ws = out.join("cpu", self.handles);
        for m in ws.iter().flat_map(|w| &w.warnings) {
            out.warn_once(m);
        }
        let end = ws
            .iter()
            .map(|w| w.ended)
            .max()
            .unwrap_or_else(Instant::now);
        let wall = secs(end.saturating_duration_since(self.start)).max(1e-9);
        let cpu: f64 = ws.iter().map(|w| secs(w.cpu)).sum();
        let spins: u64 = ws.iter().map(|w| w.spins).sum();
        out.set("duration_s", wall);
        out.set("threads", self.o.threads as f64);
        out.set("cpu_s", cpu);
        out.set(
            "cpu_fraction",
            cpu / wall / crate::util::online_cpus().len().max(1) as f64,
        );
        out.set(
            "per_thread_cpu_fraction",
            cpu / wall / self.o.threads.max(1) as f64,
        );
        out.set("duty_asked_fraction", self.o.duty_fraction);
        out.set("work_chunks_per_s", spins as f64 / wall);
        out
    }
}
