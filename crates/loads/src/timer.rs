//! `timer`: many threads each sleeping a short interval in a loop — timer
//! interrupts, hrtimer expiries and context switches at a high rate.

use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::spec::TimerOpts;
use crate::util::{nth_cpu, place, secs, thread_cpu_time, Ctl, Outcome};
use crate::{LoadError, Prepared, Running};

struct TimerPrepared(TimerOpts);

pub(crate) fn prepare(o: &TimerOpts) -> Result<Box<dyn Prepared>, LoadError> {
    Ok(Box::new(TimerPrepared(o.clone())))
}

struct Worker {
    wakeups: u64,
    overslept: Duration,
    cpu: Duration,
    ended: Instant,
    warning: Option<String>,
}

struct TimerRunning {
    o: TimerOpts,
    start: Instant,
    handles: Vec<JoinHandle<Worker>>,
}

impl Prepared for TimerPrepared {
    fn start(self: Box<Self>, ctl: Ctl) -> Box<dyn Running> {
        let o = self.0;
        let mut handles = Vec::new();
        for i in 0..o.threads as usize {
            let c = ctl.clone();
            let cpus = nth_cpu(&o.cpus, i);
            let interval = o.interval.to_std();
            handles.push(
                std::thread::Builder::new()
                    .name(format!("pl-timer{i}"))
                    .stack_size(64 * 1024)
                    .spawn(move || {
                        let warning = place("timer load", &cpus);
                        let (mut wakeups, mut overslept) = (0u64, Duration::ZERO);
                        while !c.done() {
                            let t = Instant::now();
                            std::thread::sleep(interval.min(c.left()));
                            overslept += t.elapsed().saturating_sub(interval);
                            wakeups += 1;
                        }
                        Worker {
                            wakeups,
                            overslept,
                            cpu: thread_cpu_time(),
                            ended: Instant::now(),
                            warning,
                        }
                    })
                    .expect("spawn timer worker"),
            );
        }
        Box::new(TimerRunning {
            o,
            start: ctl.start,
            handles,
        })
    }
}

impl Running for TimerRunning {
    fn finish(self: Box<Self>) -> Outcome {
        let mut out = Outcome::default();
        let ws = out.join("timer", self.handles);
        for m in ws.iter().filter_map(|w| w.warning.as_deref()) {
            out.warn_once(m);
        }
        let end = ws
            .iter()
            .map(|w| w.ended)
            .max()
            .unwrap_or_else(Instant::now);
        let wall = secs(end.saturating_duration_since(self.start)).max(1e-9);
        let wakeups: u64 = ws.iter().map(|w| w.wakeups).sum();
        let over: f64 = ws.iter().map(|w| secs(w.overslept)).sum();
        let cpu: f64 = ws.iter().map(|w| secs(w.cpu)).sum();
        out.set("duration_s", wall);
        out.set("wakeups_per_s", wakeups as f64 / wall);
        out.set("threads", self.o.threads as f64);
        out.set("interval_us", self.o.interval.as_us_f64());
        if wakeups > 0 {
            out.set("oversleep_mean_us", over / wakeups as f64 * 1e6);
        }
        out.set(
            "cpu_fraction",
            cpu / wall / crate::util::online_cpus().len().max(1) as f64,
        );
        out
    }
}
