//! `punctual monitor`'s probe and server, below the command line: a
//! minimal absolute `clock_nanosleep` loop per CPU built on
//! `punctual_live::clock` (the full timer probe keeps per-run histograms
//! and spike logs a week-long run does not need), the kernel's cumulative
//! stolen-time counters, a small HTTP server for `/metrics`, and the run
//! that ties them together ([`Monitor::run`]: the probe threads, the
//! server, the persist loop, the held C-states). The rolling state and its
//! Prometheus text live in `punctual_report::monitor`.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use punctual_live::clock::{mono, sleep_until};
use punctual_live::cstate::{CStateHold, CStateRequest};
use punctual_live::rt::{self, Policy};
use punctual_record::Nanos;
use punctual_report::monitor::{drain, KernelTimes, MonitorState, ProbeSource, Sample};

use crate::MeasureError;

/// Wall-clock time now, for the samples' stamps.
pub fn unix_now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

/// Absolute-deadline timer loop on one CPU.
pub struct LiveTimer {
    cpu: u32,
    period: Nanos,
    next: Nanos,
    stop: Arc<AtomicBool>,
}

impl LiveTimer {
    /// Wakes every `period` on the calling thread (pinned to `cpu` by the
    /// caller) until `stop`; the first wake-up is one period from now.
    pub fn new(cpu: u32, period: Nanos, stop: Arc<AtomicBool>) -> Self {
        LiveTimer {
            cpu,
            period,
            next: mono() + period,
            stop,
        }
    }
}

impl ProbeSource for LiveTimer {
    fn next_sample(&mut self) -> Option<Sample> {
        if self.stop.load(Ordering::Relaxed) {
            return None;
        }
        sleep_until(self.next);
        let now = mono();
        let late = now.saturating_sub(self.next);
        let missed = late.0 / self.period.0;
        self.next += self.period * (missed + 1);
        Some(Sample {
            cpu: self.cpu,
            at_unix_ns: unix_now_ns(),
            latency_ns: late.0,
            missed,
        })
    }
}

/// Cumulative irq, softirq and steal per CPU from /proc/stat (USER_HZ is
/// 100 on Linux, so one tick is 10 ms).
pub fn kernel_times() -> Vec<(u32, KernelTimes)> {
    let Ok(text) = std::fs::read_to_string("/proc/stat") else {
        return Vec::new();
    };
    let tick = 10_000_000u64;
    text.lines()
        .filter_map(|l| {
            let mut it = l.split_whitespace();
            let name = it.next()?;
            let cpu: u32 = name.strip_prefix("cpu")?.parse().ok()?;
            let v: Vec<u64> = it.filter_map(|x| x.parse().ok()).collect();
            Some((
                cpu,
                KernelTimes {
                    irq_ns: v.get(5)? * tick,
                    softirq_ns: v.get(6)? * tick,
                    steal_ns: v.get(7).copied().unwrap_or(0) * tick,
                },
            ))
        })
        .collect()
}

fn serve_one(mut s: TcpStream, state: &Mutex<MonitorState>) {
    let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
    let _ = s.set_write_timeout(Some(Duration::from_secs(2)));
    let mut buf = [0u8; 4096];
    let mut req = Vec::new();
    while !req.windows(4).any(|w| w == b"\r\n\r\n") && req.len() < 8192 {
        match s.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => req.extend_from_slice(&buf[..n]),
        }
    }
    let line = String::from_utf8_lossy(&req);
    let mut parts = line.split_whitespace();
    let (method, path) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    let (status, ctype, body) = if method != "GET" && method != "HEAD" {
        (
            "405 Method Not Allowed",
            "text/plain",
            "only GET\n".to_string(),
        )
    } else if path == "/metrics" || path.starts_with("/metrics?") {
        let text = state
            .lock()
            .map(|st| st.exposition(unix_now_ns()))
            .unwrap_or_default();
        ("200 OK", "text/plain; version=0.0.4; charset=utf-8", text)
    } else if path == "/" {
        (
            "200 OK",
            "text/plain; charset=utf-8",
            "punctual monitor: metrics at /metrics\n".to_string(),
        )
    } else {
        (
            "404 Not Found",
            "text/plain",
            "not found; try /metrics\n".to_string(),
        )
    };
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    let _ = s.write_all(head.as_bytes());
    if method != "HEAD" {
        let _ = s.write_all(body.as_bytes());
    }
}

/// Serves `/metrics` (the state's Prometheus exposition) one connection
/// at a time until `stop`: a scrape every few seconds needs no more.
pub fn serve(listener: TcpListener, state: Arc<Mutex<MonitorState>>, stop: Arc<AtomicBool>) {
    let _ = listener.set_nonblocking(true);
    while !stop.load(Ordering::Relaxed) {
        match listener.accept() {
            Ok((s, _)) => {
                let _ = s.set_nonblocking(false);
                serve_one(s, &state);
            }
            Err(_) => std::thread::sleep(Duration::from_millis(50)),
        }
    }
}

/// The state to start from: `path`'s, restored (one more restart, the
/// rate now asked, any new CPU added), or a new one when the file does not
/// exist yet; the second value says which.
pub fn load_state(
    path: &Path,
    cpus: &[u32],
    rate: u32,
) -> Result<(MonitorState, bool), MeasureError> {
    match std::fs::read_to_string(path) {
        Ok(text) => {
            let mut st = MonitorState::from_json(&text).map_err(|e| {
                MeasureError::Usage(format!(
                    "--state {}: {e}; move the file away to start afresh",
                    path.display()
                ))
            })?;
            st.restarts += 1;
            st.rate_hz = rate;
            for c in cpus {
                if !st.cpus.iter().any(|x| x.cpu == *c) {
                    st.cpus.push(punctual_report::monitor::CpuState::new(*c));
                }
            }
            Ok((st, true))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            Ok((MonitorState::new(cpus, rate, unix_now_ns()), false))
        }
        Err(e) => Err(MeasureError::Usage(format!(
            "--state {}: cannot read it: {e}",
            path.display()
        ))),
    }
}

/// A monitor run: what to probe, where to report, how long.
pub struct Monitor {
    pub cpus: Vec<u32>,
    /// Wake-ups per second of each CPU's probe.
    pub rate_hz: u32,
    /// SCHED_FIFO priority of the probe threads (0: SCHED_OTHER).
    pub priority: u8,
    /// Bound already, so a bad address is refused before anything starts.
    pub listener: Option<TcpListener>,
    pub state_path: Option<PathBuf>,
    pub textfile: Option<PathBuf>,
    pub persist_every: Nanos,
    /// `None`: until `stop`.
    pub duration: Option<Nanos>,
    pub c_states: CStateRequest,
}

impl Monitor {
    fn persist(&self, state: &Mutex<MonitorState>) -> Result<(), MeasureError> {
        let (json, text) = match state.lock() {
            Ok(st) => (st.to_json(), st.exposition(unix_now_ns())),
            Err(_) => return Err(MeasureError::Runtime("monitor state lock poisoned".into())),
        };
        if let Some(p) = &self.state_path {
            punctual_record::write_atomic(p, json.as_bytes()).map_err(|e| {
                MeasureError::Runtime(format!("cannot write state {}: {e}", p.display()))
            })?;
        }
        if let Some(p) = &self.textfile {
            punctual_record::write_atomic(p, text.as_bytes())
                .map_err(|e| MeasureError::Runtime(format!("cannot write {}: {e}", p.display())))?;
        }
        Ok(())
    }

    /// Holds the C-states asked for (stated in `state`, which is the
    /// monitor's record), calls `started` with the hold once, before any
    /// probe runs (so whoever started the monitor reads its first line
    /// before anything else), then runs one probe thread per CPU and the
    /// server until `duration` or `stop`, persisting every
    /// `persist_every` and once more at the end. `warn` gets what a probe
    /// thread could not set up and what could not be put back.
    pub fn run(
        self,
        state: MonitorState,
        stop: Arc<AtomicBool>,
        started: impl FnOnce(&CStateHold),
        warn: fn(&str),
    ) -> Result<(), MeasureError> {
        let (result, problems) =
            punctual_live::cstate::holding_with(self.c_states, &self.cpus.clone(), |held| {
                let mut state = state;
                state.c_states = Some(held.config());
                started(held);
                Ok::<_, MeasureError>(self.probe(state, &stop, warn))
            })?;
        for p in problems {
            warn(&format!("could not put the idle states back: {p}"));
        }
        result
    }

    /// The probe threads, the server and the persist loop.
    fn probe(
        mut self,
        state: MonitorState,
        stop: &AtomicBool,
        warn: fn(&str),
    ) -> Result<(), MeasureError> {
        let state = Arc::new(Mutex::new(state));
        let probes_stop = Arc::new(AtomicBool::new(false));
        let period = Nanos(1_000_000_000 / self.rate_hz as u64);
        let mut threads = Vec::new();
        for &cpu in &self.cpus {
            let st = Arc::clone(&state);
            let ps = Arc::clone(&probes_stop);
            let prio = self.priority;
            threads.push(std::thread::spawn(move || {
                rt::set_thread_name(&format!("punctual-mon{cpu}"));
                if let Err(e) = rt::pin_to_cpu(cpu) {
                    warn(&format!(
                        "cannot pin to CPU {cpu} ({e}); its numbers may mix CPUs"
                    ));
                }
                let _guard = if prio > 0 {
                    match rt::set_policy(Policy::Fifo { priority: prio }) {
                        Ok(g) => Some(g),
                        Err(e) => {
                            if cpu == cpus_first(&st) {
                                warn(&format!("SCHED_FIFO {prio} refused ({e}); measuring SCHED_OTHER latency, which is far worse; run as root or grant CAP_SYS_NICE"));
                            }
                            None
                        }
                    }
                } else {
                    None
                };
                let mut src = LiveTimer::new(cpu, period, Arc::clone(&ps));
                drain(&mut src, &st, || !ps.load(Ordering::Relaxed));
            }));
        }
        let server = self.listener.take().map(|l| {
            let st = Arc::clone(&state);
            let ps = Arc::clone(&probes_stop);
            std::thread::spawn(move || serve(l, st, ps))
        });

        let start = Instant::now();
        let mut last_kernel: Vec<(u32, KernelTimes)> = kernel_times();
        let mut last_persist = Instant::now();
        let every = self.persist_every.to_std();
        let mut result = Ok(());
        loop {
            std::thread::sleep(Duration::from_millis(100));
            let ended = stop.load(Ordering::Relaxed)
                || self.duration.is_some_and(|d| start.elapsed() >= d.to_std());
            if ended || last_persist.elapsed() >= every {
                let now_k = kernel_times();
                if let Ok(mut st) = state.lock() {
                    for (cpu, k) in &now_k {
                        if let Some((_, old)) = last_kernel.iter().find(|(c, _)| c == cpu) {
                            st.add_kernel(
                                *cpu,
                                KernelTimes {
                                    irq_ns: k.irq_ns.saturating_sub(old.irq_ns),
                                    softirq_ns: k.softirq_ns.saturating_sub(old.softirq_ns),
                                    steal_ns: k.steal_ns.saturating_sub(old.steal_ns),
                                },
                            );
                        }
                    }
                }
                last_kernel = now_k;
                if let Err(e) = self.persist(&state) {
                    result = Err(e);
                    break;
                }
                last_persist = Instant::now();
            }
            if ended {
                break;
            }
        }
        probes_stop.store(true, Ordering::Relaxed);
        for t in threads {
            let _ = t.join();
        }
        if let Some(s) = server {
            let _ = s.join();
        }
        // The probes' last samples since the loop's final persist.
        result.and_then(|_| self.persist(&state))
    }
}

fn cpus_first(st: &Mutex<MonitorState>) -> u32 {
    st.lock()
        .ok()
        .and_then(|s| s.cpus.first().map(|c| c.cpu))
        .unwrap_or(0)
}
