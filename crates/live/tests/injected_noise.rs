//! The probes' correctness test: a known noise source, measured.
//!
//! A SCHED_FIFO 99 thread on the probed CPU wakes every 10.37 ms and spins
//! 1 ms, taking 1/10.37 = 9.64% of the CPU. `noise` must report that much
//! more stolen time than its idle baseline (±1.5 points), and `timer` at
//! 1 ms below priority 99 must see ~9.6% more wake-ups delayed, with the
//! delays spread evenly over 0–1 ms (the injector's phase drifts across the
//! probe's period). The machine is a shared, noisy VM: each check is tried
//! up to three times, every try is printed, and a check whose baseline was
//! too noisy in every try is skipped with that reason.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use punctual_live::inject::{NeighborConfig, NoisyNeighbor};
use punctual_live::noise::{self, NoiseConfig};
use punctual_live::rt::{fifo_permitted, Policy};
use punctual_live::timer::{self, Progress, TimerClock, TimerConfig};
use punctual_record::{Metric, Nanos, Record, Source};

const EXPECTED: f64 = 1.0 / 10.37;

fn probed_cpu() -> u32 {
    let online = std::fs::read_to_string("/sys/devices/system/cpu/online").unwrap_or_default();
    let last = online
        .trim()
        .rsplit([',', '-'])
        .next()
        .and_then(|x| x.parse().ok())
        .unwrap_or(0);
    last
}

fn neighbor(cpu: u32) -> NoisyNeighbor {
    NoisyNeighbor::start(NeighborConfig {
        cpu,
        ..Default::default()
    })
    .expect("injector starts once SCHED_FIFO is permitted")
}

/// Baseline and injected stolen fractions, measured in alternating
/// half-second chunks so that both sides see the same ambient load (other
/// users of this 2-CPU VM come and go within seconds).
fn stolen_fractions(cpu: u32) -> (f64, f64) {
    let mut acc = [(0u64, 0u64); 2];
    for _ in 0..6 {
        for (i, inject) in [false, true].into_iter().enumerate() {
            let (s, o) = stolen_chunk(cpu, inject);
            acc[i].0 += s;
            acc[i].1 += o;
        }
    }
    let f = |(s, o): (u64, u64)| s as f64 / o.max(1) as f64;
    (f(acc[0]), f(acc[1]))
}

/// (stolen ns in gaps shorter than 2 ms, observed ns without the longer
/// gaps) over one chunk.
fn stolen_chunk(cpu: u32, inject: bool) -> (u64, u64) {
    let cfg = NoiseConfig {
        cpus: vec![cpu],
        policy: Policy::Fifo { priority: 95 },
        duration: Nanos::from_ms(500),
        threshold: None,
        max_spikes: 100,
        lock_memory: false,
        stretch: None,
        stop_at: None,
        samples: None,
    };
    let n = inject.then(|| neighbor(cpu));
    let out = noise::run(&cfg, Arc::new(AtomicBool::new(false)), Progress::new(1));
    drop(n);
    let mut rec = Record::new(Source::Measured, "noise", Default::default());
    out.fill(&mut rec, 100);
    // Gaps longer than twice the injected spin are set aside on both sides:
    // on this shared VM they are the fair server's 50 ms slices handed to
    // other users' SCHED_OTHER work, which vary by several points from one
    // second to the next and would swamp the ±1.5-point tolerance. The
    // injected bursts (1 ms) are all kept.
    let s = rec.series.iter().find(|s| s.metric == Metric::Gap).unwrap();
    let w = s.histogram.bucket_ns;
    let (mut small, mut big) = (0u64, 0u64);
    for &(lo, c) in &s.histogram.buckets {
        let v = (lo + w / 2) * c;
        if lo < 2_000_000 {
            small += v;
        } else {
            big += v;
        }
    }
    (small, rec.stolen[0].observed_ns.0.saturating_sub(big))
}

/// Per chunk: (wake-ups, wake-ups delayed by [CUT, 1 ms + CUT) in four
/// equal bins).
fn delay_chunk(cpu: u32, inject: bool) -> (u64, [u64; 4]) {
    let cfg = TimerConfig {
        cpus: vec![cpu],
        policy: Policy::Fifo { priority: 95 },
        interval: Nanos::from_ms(1),
        duration: Nanos::from_ms(500),
        clock: TimerClock::Nanosleep,
        threshold: Nanos::ZERO,
        max_spikes: 10,
        lock_memory: false,
        stop_at: None,
        samples: None,
    };
    let n = inject.then(|| neighbor(cpu));
    let out = timer::run(&cfg, Arc::new(AtomicBool::new(false)), Progress::new(1));
    drop(n);
    let mut rec = Record::new(Source::Measured, "timer", Default::default());
    out.fill(&mut rec, 10);
    let s = rec
        .series
        .iter()
        .find(|s| s.metric == Metric::Latency)
        .unwrap();
    let mut bins = [0u64; 4];
    for &(lo, c) in &s.histogram.buckets {
        if (CUT.0..CUT.0 + 1_000_000).contains(&lo) {
            bins[((lo - CUT.0) / 250_000) as usize] += c;
        }
    }
    (s.count, bins)
}

/// Wake-ups later than this count as delayed: above this VM's own p99
/// (about 70 us), so the baseline stays a few percent.
const CUT: Nanos = Nanos::from_us(100);

/// (baseline delayed fraction, injected delayed fraction, injected-minus-
/// baseline delays per bin as shares), from alternating chunks.
fn delayed_fractions(cpu: u32) -> (f64, f64, [f64; 4]) {
    let mut n = [0u64; 2];
    let mut bins = [[0u64; 4]; 2];
    for _ in 0..6 {
        for (i, inject) in [false, true].into_iter().enumerate() {
            let (c, b) = delay_chunk(cpu, inject);
            n[i] += c;
            for k in 0..4 {
                bins[i][k] += b[k];
            }
        }
    }
    let frac = |i: usize| bins[i].iter().sum::<u64>() as f64 / n[i].max(1) as f64;
    let added: Vec<f64> = (0..4)
        .map(|k| {
            (bins[1][k] as f64 / n[1].max(1) as f64 - bins[0][k] as f64 / n[0].max(1) as f64)
                .max(0.0)
        })
        .collect();
    let tot: f64 = added.iter().sum::<f64>().max(1e-12);
    (frac(0), frac(1), [0, 1, 2, 3].map(|k| added[k] / tot))
}

/// One try's outcome: passed, failed on a quiet machine, or not measurable
/// because the machine's own noise was louder than the tolerance.
enum Try {
    Pass(String),
    Fail(String),
    TooNoisy(String),
}

/// Up to three tries, a few seconds apart (other users of this VM come and
/// go). Any pass passes. A failure with a quiet baseline fails the test. When
/// every try met a baseline too noisy to resolve a ±1.5-point effect, the
/// check is skipped with that reason: a wrong probe still fails wherever the
/// machine is quiet enough to tell.
fn attempt<F: FnMut() -> Try>(name: &str, mut f: F) {
    let mut seen = Vec::new();
    let mut quiet_failure = false;
    for i in 0..3 {
        if i > 0 {
            std::thread::sleep(std::time::Duration::from_secs(3));
        }
        match f() {
            Try::Pass(m) => {
                eprintln!("{name}: passed on try {}: {m}", i + 1);
                return;
            }
            Try::Fail(m) => {
                eprintln!("{name}: try {} failed: {m}", i + 1);
                quiet_failure = true;
                seen.push(m);
            }
            Try::TooNoisy(m) => {
                eprintln!("{name}: try {} not measurable: {m}", i + 1);
                seen.push(m);
            }
        }
    }
    if quiet_failure {
        panic!("{name}: failed three times: {}", seen.join(" / "));
    }
    eprintln!(
        "skipped {name}: the machine's own noise was above what a ±1.5-point check can resolve in all three tries"
    );
}

/// Above these baselines the machine's own delays are of the same order as
/// the injected ones and vary by more than the tolerance between the
/// alternating chunks (seen: a 6.4% timer baseline, against 0.07-0.2% on a
/// quiet VM).
const QUIET_NOISE: f64 = 0.04;
const QUIET_TIMER: f64 = 0.02;

#[test]
fn probes_measure_a_known_injected_noise() {
    if let Err(e) = fifo_permitted() {
        eprintln!("skipped: SCHED_FIFO is not permitted here ({e})");
        return;
    }
    let cpu = probed_cpu();
    attempt("noise", || {
        let (base, with) = stolen_fractions(cpu);
        let added = with - base;
        let msg = format!(
            "baseline {:.2}%, injected {:.2}%, added {:.2} points (expected {:.2} ± 1.5)",
            base * 100.0,
            with * 100.0,
            added * 100.0,
            EXPECTED * 100.0
        );
        if (added - EXPECTED).abs() <= 0.015 {
            Try::Pass(msg)
        } else if base > QUIET_NOISE {
            Try::TooNoisy(msg)
        } else {
            Try::Fail(msg)
        }
    });
    attempt("timer", || {
        let (base, with, q) = delayed_fractions(cpu);
        let added = with - base;
        // Uniform delays over 0-1 ms: the share below the cut is lost.
        let want = EXPECTED * (1.0 - CUT.as_ms_f64());
        let msg = format!(
            "delayed by 100us-1.1ms: baseline {:.2}%, injected {:.2}%, added {:.2} points (expected {:.2} ± 1.5); added delays per quarter {:.0}% {:.0}% {:.0}% {:.0}%",
            base * 100.0,
            with * 100.0,
            added * 100.0,
            want * 100.0,
            q[0] * 100.0,
            q[1] * 100.0,
            q[2] * 100.0,
            q[3] * 100.0
        );
        let even = q.iter().all(|s| (0.12..=0.38).contains(s));
        if (added - want).abs() <= 0.015 && even {
            Try::Pass(msg)
        } else if base > QUIET_TIMER {
            Try::TooNoisy(msg)
        } else {
            Try::Fail(msg)
        }
    });
}
