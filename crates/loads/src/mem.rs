//! `mem`: streaming copy over a buffer larger than the last-level cache,
//! so every byte goes to DRAM and back (memory-bandwidth pressure on the
//! probe's cache misses).

use std::thread::JoinHandle;
use std::time::Instant;

use crate::spec::MemOpts;
use crate::util::{nth_cpu, place, secs, thread_cpu_time, Ctl, Outcome};
use crate::{LoadError, Prepared, Running};

/// Largest cache of CPU 0, from sysfs (bytes).
pub(crate) fn llc_bytes() -> Option<u64> {
    let mut best = None;
    for i in 0..8 {
        let p = format!("/sys/devices/system/cpu/cpu0/cache/index{i}/size");
        let Ok(s) = std::fs::read_to_string(p) else {
            continue;
        };
        if let Ok(v) = crate::spec::parse_size("cache", s.trim()) {
            best = Some(best.map_or(v, |b: u64| b.max(v)));
        }
    }
    best
}

fn mem_available_bytes() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

struct MemPrepared {
    o: MemOpts,
    size: usize,
    bufs: Vec<Vec<u8>>,
}

pub(crate) fn prepare(o: &MemOpts) -> Result<Box<dyn Prepared>, LoadError> {
    let size = o
        .size_bytes
        .unwrap_or_else(|| (llc_bytes().unwrap_or(32 << 20) * 4).max(64 << 20))
        as usize;
    let total = size as u64 * o.threads as u64;
    if let Some(avail) = mem_available_bytes() {
        if total > avail / 2 {
            return Err(LoadError::Invalid(format!(
                "mem: {} threads x {} MiB would take more than half of the {} MiB available",
                o.threads,
                size >> 20,
                avail >> 20
            )));
        }
    }
    // Touch the pages now so the run measures copying, not page faults.
    let bufs = (0..o.threads).map(|_| vec![1u8; size]).collect();
    Ok(Box::new(MemPrepared {
        o: o.clone(),
        size,
        bufs,
    }))
}

/// Bytes copied, CPU seconds, end, placement warning.
type WorkerResult = (u64, f64, Instant, Option<String>);

struct MemRunning {
    o: MemOpts,
    size: usize,
    start: Instant,
    handles: Vec<JoinHandle<WorkerResult>>,
}

impl Prepared for MemPrepared {
    fn start(self: Box<Self>, ctl: Ctl) -> Box<dyn Running> {
        let mut handles = Vec::new();
        for (i, mut buf) in self.bufs.into_iter().enumerate() {
            let c = ctl.clone();
            let cpus = nth_cpu(&self.o.cpus, i);
            handles.push(
                std::thread::Builder::new()
                    .name(format!("pl-mem{i}"))
                    .spawn(move || {
                        let warning = place("mem load", &cpus);
                        let half = buf.len() / 2;
                        let chunk = 1usize << 20;
                        let mut copied = 0u64;
                        let mut off = 0usize;
                        let (src, dst) = buf.split_at_mut(half);
                        let mut forward = true;
                        while !c.done() {
                            let n = chunk.min(half - off);
                            if forward {
                                dst[off..off + n].copy_from_slice(&src[off..off + n]);
                            } else {
                                src[off..off + n].copy_from_slice(&dst[off..off + n]);
                            }
                            copied += n as u64;
                            off += n;
                            if off >= half {
                                off = 0;
                                forward = !forward;
                            }
                        }
                        std::hint::black_box(&buf);
                        (copied, secs(thread_cpu_time()), Instant::now(), warning)
                    })
                    .expect("spawn mem worker"),
            );
        }
        Box::new(MemRunning {
            o: self.o,
            size: self.size,
            start: ctl.start,
            handles,
        })
    }
}

impl Running for MemRunning {
    fn finish(self: Box<Self>) -> Outcome {
        let mut out = Outcome::default();
        let (mut copied, mut cpu) = (0u64, 0f64);
        let mut end = self.start;
        for (b, c, e, w) in out.join("mem", self.handles) {
            copied += b;
            cpu += c;
            end = end.max(e);
            if let Some(w) = w {
                out.warn_once(&w);
            }
        }
        let wall = secs(end.saturating_duration_since(self.start)).max(1e-9);
        out.set("duration_s", wall);
        out.set("copy_gb_per_s", copied as f64 / wall / 1e9);
        // Each copied byte is read once and written once.
        out.set("traffic_gb_per_s", 2.0 * copied as f64 / wall / 1e9);
        out.set("buffer_bytes", self.size as f64);
        if let Some(l) = llc_bytes() {
            out.set("llc_bytes", l as f64);
        }
        out.set("threads", self.o.threads as f64);
        out.set(
            "cpu_fraction",
            cpu / wall / crate::util::online_cpus().len().max(1) as f64,
        );
        out
    }
}
