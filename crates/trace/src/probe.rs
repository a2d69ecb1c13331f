//! Minimal probes for `punctual cause` to run beside the recorder: a
//! periodic timer thread (wake-up latency) and a busy-poll thread (stolen
//! intervals), one per CPU, on CLOCK_MONOTONIC so their times meet the
//! trace's `mono` clock without conversion.
//!
//! They exist so the recorder has a driver of its own; the full probes of
//! `punctual timer`/`noise` feed the same [`crate::recorder::Trace::attribute`]
//! through [`ProbeThread`].

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use punctual_record::{Metric, Nanos, Recorder, Spike, Timeline, DEFAULT_BUCKET_NS};

use crate::recorder::ProbeThread;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProbeKind {
    Timer,
    Noise,
}

#[derive(Clone, Debug)]
pub struct ProbeConfig {
    pub kind: ProbeKind,
    pub interval: Nanos,
    pub duration: Nanos,
    /// SCHED_FIFO priority; 0 runs at SCHED_OTHER.
    pub priority: u8,
    /// What counts as a spike (latency) or a stolen interval (gap).
    pub threshold: Nanos,
    pub max_spikes: usize,
}

/// One CPU's result.
#[derive(Debug)]
pub struct ProbeRun {
    pub thread: ProbeThread,
    pub values: Recorder,
    pub spikes: Vec<Spike>,
    pub spikes_dropped: u64,
    pub stolen_total: Nanos,
    pub stolen_count: u64,
    pub stolen_max: Nanos,
    pub timeline: Timeline,
    /// Time the noise probe slept to leave RT throttling room (not observed).
    pub paused: Nanos,
    pub realtime_refused: Option<String>,
    pub pin_refused: Option<String>,
}

fn mono() -> Nanos {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is valid and writable.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    Nanos(ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64)
}

fn sleep_until(t: Nanos) {
    let ts = libc::timespec {
        tv_sec: (t.0 / 1_000_000_000) as libc::time_t,
        tv_nsec: (t.0 % 1_000_000_000) as libc::c_long,
    };
    // SAFETY: ts is valid; remain may be null with TIMER_ABSTIME.
    while unsafe {
        libc::clock_nanosleep(
            libc::CLOCK_MONOTONIC,
            libc::TIMER_ABSTIME,
            &ts,
            std::ptr::null_mut(),
        )
    } == libc::EINTR
    {}
}

fn pin(cpu: u32) -> Result<(), String> {
    // SAFETY: cpu_set_t is plain data; the index is checked.
    unsafe {
        if cpu as usize >= libc::CPU_SETSIZE as usize {
            return Err("CPU out of range".into());
        }
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu as usize, &mut set);
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
            return Err(std::io::Error::last_os_error().to_string());
        }
    }
    Ok(())
}

/// Sets SCHED_FIFO for the calling thread; returns the old policy to put
/// back (the thread ends anyway, but a pooled thread must not stay RT).
fn set_fifo(priority: u8) -> Result<(), String> {
    let p = libc::sched_param {
        sched_priority: priority as i32,
    };
    // SAFETY: p is a valid sched_param.
    if unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &p) } != 0 {
        return Err(std::io::Error::last_os_error().to_string());
    }
    Ok(())
}

fn set_other() {
    let p = libc::sched_param { sched_priority: 0 };
    // SAFETY: p is a valid sched_param.
    unsafe { libc::sched_setscheduler(0, libc::SCHED_OTHER, &p) };
}

fn gettid() -> i32 {
    // SAFETY: plain syscall.
    unsafe { libc::syscall(libc::SYS_gettid) as i32 }
}

fn rt_budget_is_limited() -> bool {
    std::fs::read_to_string("/proc/sys/kernel/sched_rt_runtime_us")
        .map(|s| s.trim() != "-1")
        .unwrap_or(true)
}

/// Bounded spike log keeping the largest.
struct Spikes {
    v: Vec<Spike>,
    cap: usize,
    dropped: u64,
}

impl Spikes {
    fn offer(&mut self, s: Spike) {
        if self.v.len() < self.cap {
            self.v.push(s);
            return;
        }
        self.dropped += 1;
        if let Some((i, min)) = self
            .v
            .iter()
            .enumerate()
            .min_by_key(|(_, x)| x.value_ns)
            .map(|(i, x)| (i, x.value_ns))
        {
            if s.value_ns > min {
                self.v[i] = s;
            }
        }
    }
}

/// Runs the probe on each CPU (one thread each) until `duration` or stop.
pub fn run(cpus: &[u32], cfg: &ProbeConfig, stop: Arc<AtomicBool>) -> Vec<ProbeRun> {
    let handles: Vec<_> = cpus
        .iter()
        .map(|&cpu| {
            let cfg = cfg.clone();
            let stop = Arc::clone(&stop);
            std::thread::Builder::new()
                .name(format!("punctual-c{cpu}"))
                .spawn(move || run_one(cpu, &cfg, &stop))
        })
        .collect();
    handles
        .into_iter()
        .filter_map(|h| h.ok()?.join().ok())
        .collect()
}

fn run_one(cpu: u32, cfg: &ProbeConfig, stop: &AtomicBool) -> ProbeRun {
    let pin_refused = pin(cpu).err();
    let realtime_refused = if cfg.priority > 0 {
        set_fifo(cfg.priority).err()
    } else {
        None
    };
    let tid = gettid();
    let mut spikes = Spikes {
        v: Vec::new(),
        cap: cfg.max_spikes,
        dropped: 0,
    };
    let bucket = Nanos(DEFAULT_BUCKET_NS);
    let mut run = ProbeRun {
        thread: ProbeThread {
            cpu,
            tid,
            origin: Nanos::ZERO,
            span: Nanos::ZERO,
            excluded: Vec::new(),
        },
        values: Recorder::new(bucket),
        spikes: Vec::new(),
        spikes_dropped: 0,
        stolen_total: Nanos::ZERO,
        stolen_count: 0,
        stolen_max: Nanos::ZERO,
        timeline: Timeline::new(Nanos::from_secs(1)),
        paused: Nanos::ZERO,
        realtime_refused,
        pin_refused,
    };
    let origin = mono();
    let end = origin + cfg.duration;
    run.thread.origin = origin;
    match cfg.kind {
        ProbeKind::Timer => {
            run.values = Recorder::new(bucket).with_sample_period(cfg.interval);
            let mut expected = origin + cfg.interval;
            let mut last = origin;
            while expected <= end && !stop.load(Ordering::Relaxed) {
                sleep_until(expected);
                let actual = mono();
                last = actual;
                let lat = actual.saturating_sub(expected);
                run.values.record(lat);
                let k = lat.0 / cfg.interval.0;
                if k > 0 {
                    run.values.add_missed(k);
                }
                if lat > cfg.threshold {
                    spikes.offer(Spike {
                        at_ns: actual - origin,
                        cpu,
                        task: None,
                        metric: Metric::Latency,
                        value_ns: lat,
                        causes: Vec::new(),
                        incomplete: false,
                    });
                }
                expected += cfg.interval * (k + 1);
            }
            run.thread.span = last - origin;
        }
        ProbeKind::Noise => {
            // A SCHED_FIFO busy loop under RT throttling sleeps 50 ms every
            // 900 ms so the CPU's kernel threads still run; sleeps are not
            // observed time.
            let pause =
                cfg.priority > 0 && run.realtime_refused.is_none() && rt_budget_is_limited();
            let mut next_pause = origin + Nanos::from_ms(900);
            let mut prev = origin;
            let mut iters: u64 = 0;
            loop {
                let t = mono();
                let d = t - prev;
                if d > cfg.threshold {
                    run.values.record(d);
                    run.stolen_total += d;
                    run.stolen_count += 1;
                    run.stolen_max = run.stolen_max.max(d);
                    run.timeline.add_interval(prev - origin, d);
                    spikes.offer(Spike {
                        at_ns: prev - origin,
                        cpu,
                        task: None,
                        metric: Metric::Gap,
                        value_ns: d,
                        causes: Vec::new(),
                        incomplete: false,
                    });
                }
                prev = t;
                iters += 1;
                if t >= end {
                    break;
                }
                if iters & 0xFFF == 0 {
                    if stop.load(Ordering::Relaxed) {
                        break;
                    }
                    if pause && t >= next_pause {
                        std::thread::sleep(std::time::Duration::from_millis(50));
                        let after = mono();
                        run.paused += after - t;
                        if run.thread.excluded.len() < 100_000 {
                            run.thread.excluded.push((t, after));
                        }
                        prev = after;
                        next_pause = after + Nanos::from_ms(900);
                    }
                }
            }
            run.thread.span = prev - origin;
        }
    }
    if cfg.priority > 0 && run.realtime_refused.is_none() {
        set_other();
    }
    run.spikes_dropped = spikes.dropped;
    let mut v = spikes.v;
    v.sort_by_key(|s| s.at_ns);
    run.spikes = v;
    run
}
