//! `punctual monitor`'s probe and server, below the command line: a
//! minimal absolute `clock_nanosleep` loop per CPU built on
//! `punctual_live::clock` (the full timer probe keeps per-run histograms
//! and spike logs a week-long run does not need), the kernel's cumulative
//! stolen-time counters, and a small HTTP server for `/metrics`. The
//! rolling state and its Prometheus text live in `punctual_report::monitor`.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use punctual_live::clock::{mono, sleep_until};
use punctual_record::Nanos;
use punctual_report::monitor::{KernelTimes, MonitorState, ProbeSource, Sample};

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
