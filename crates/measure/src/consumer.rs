//! `punctual validate`'s real buffered consumer: a pinned SCHED_FIFO
//! thread that computes one buffer per period against a device draining
//! a ring, and counts the underruns the forecast predicts.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use punctual_analysis::buffer::Buffering;
use punctual_live::clock::{mono, sleep_until};
use punctual_live::rt::{pin_to_cpu, set_policy, set_thread_name, Policy};
use punctual_record::Recorder;
use punctual_units::Nanos;

/// What the consumer saw over one run.
#[derive(Default)]
pub struct Observed {
    /// Seconds it ran.
    pub seconds: f64,
    /// Buffers it computed.
    pub wakeups: u64,
    /// Underruns: buffers finished after the device needed them.
    pub episodes: u64,
    /// Device slots that found the ring empty.
    pub buffers_lost: u64,
    /// Median wall time of a compute.
    pub compute_median_ns: u64,
    /// Wall time of each compute: c plus whatever stalled it.
    pub computes: Option<Recorder>,
    /// Lateness of each wake-up that followed a sleep (not those that
    /// started at once on a backlog): the consumer's own latency, beside
    /// the timer probe's, which sleeps the whole period.
    pub lateness: Option<Recorder>,
}

/// The real consumer: a device drains one buffer every t from a ring of
/// n; this thread wakes at each period boundary, does c worth of CPU work
/// to "compute" the next buffer and hands it over. Buffer j is due when
/// the device reaches it, (n−1)·t after the thread's nominal wake-up for
/// it; finishing later is an underrun, after which the thread
/// resynchronizes to the next period boundary (the buffers in between
/// were played as silence). A thread that is late for one buffer starts
/// the next one at once, so lateness carries over (a backlog).
///
/// The compute is a fixed amount of work (a loop calibrated to take c on
/// this CPU when nothing interrupts it), not a wall-clock spin: a real
/// consumer that is preempted for 1 ms while mixing audio finishes 1 ms
/// later, whereas a spin until start + c would absorb any stall that ends
/// before start + c and hide exactly the effect the forecast must model.
///
/// It runs for `dur` (or until `stop`) on its own thread, pinned to `cpu`
/// at SCHED_FIFO `priority`.
pub fn run(cpu: u32, priority: u8, dur: Nanos, b: &Buffering, stop: Arc<AtomicBool>) -> Observed {
    let (cpu, prio) = (cpu, priority);
    let b = *b;
    std::thread::spawn(move || {
        set_thread_name("punctual-consumer");
        let _ = pin_to_cpu(cpu);
        let _guard = set_policy(Policy::Fifo { priority: prio });
        let t = b.buffer_len.0;
        let c = b.compute.at(b.buffer_len);
        let ns_per_iter = calibrate_work();
        let iters = (c.0 as f64 / ns_per_iter).round() as u64;
        let ahead = (b.buffers as u64 - 1) * t;
        let t0 = mono() + Nanos::from_ms(1);
        let end = t0 + dur;
        let mut j: u64 = 0;
        let mut o = Observed::default();
        let mut computes: Vec<u64> = Vec::with_capacity((dur.0 / t) as usize + 1);
        let mut late: Vec<u64> = Vec::with_capacity((dur.0 / t) as usize + 1);
        loop {
            let wake = Nanos(t0.0 + j * t);
            if wake >= end || stop.load(Ordering::Relaxed) {
                o.seconds = (wake.min(end) - t0).as_secs_f64();
                break;
            }
            let sleeps = mono() < wake;
            sleep_until(wake);
            let now = mono();
            if sleeps {
                late.push(now.0.saturating_sub(wake.0));
            }
            work(iters);
            let done = mono();
            computes.push((done - now).0);
            o.wakeups += 1;
            let due = wake.0 + ahead;
            if done.0 > due {
                o.episodes += 1;
                // Device slots k ≥ j whose due time t0 + (k+n−1)·t passed
                // before this buffer was done found the ring empty.
                let elapsed = (done.0 - t0.0) / t;
                o.buffers_lost += elapsed.saturating_sub(j + b.buffers as u64 - 1) + 1;
                // Restart at the next period boundary with the ring refilled.
                j = (done.0 - t0.0).div_ceil(t);
            } else {
                j += 1;
            }
        }
        if !computes.is_empty() {
            let mut r = Recorder::new(Nanos(1000)).with_sample_period(b.buffer_len);
            for &x in &computes {
                r.record(Nanos(x));
            }
            o.computes = Some(r);
            let mut w = Recorder::new(Nanos(1000)).with_sample_period(b.buffer_len);
            for &x in &late {
                w.record(Nanos(x));
            }
            o.lateness = Some(w);
            let mid = computes.len() / 2;
            o.compute_median_ns = *computes.select_nth_unstable(mid).1;
        }
        o
    })
    .join()
    .unwrap_or_default()
}

/// The unit of consumer work: a dependent multiply-add chain the compiler
/// cannot remove or vectorize, so its time is CPU time spent.
#[inline(never)]
fn work(iters: u64) -> u64 {
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    for i in 0..iters {
        x = std::hint::black_box(x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(i));
    }
    x
}

/// ns per iteration of `work` on this CPU: the fastest of 30 runs of
/// ~0.2 ms, so an interrupt during calibration does not make every later
/// compute short.
fn calibrate_work() -> f64 {
    const N: u64 = 100_000;
    let mut best = f64::INFINITY;
    for _ in 0..30 {
        let s = mono();
        work(N);
        let e = mono();
        best = best.min((e - s).0 as f64 / N as f64);
    }
    best.max(1e-3)
}
