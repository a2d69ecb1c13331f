//! Calibration of the MTTF forecast against the simulator as ground truth
//! (docs/forecast.md §3.5; run through `bench/calibration.sh`).
//!
//! For each interference shape, a long simulated run of the consumer
//! itself (n buffers of t, compute c, at the probe's priority) gives the
//! true underrun rate; many short runs of a 1 ms probe under the same
//! noise (different seeds, the length of a `check`'s timer half) are each
//! forecast as `punctual forecast` would. Per shape: how often the 95 %
//! interval holds the true rate (coverage, nominal 95 %), how many
//! decided verdicts against targets around the truth are wrong, and the
//! median predicted ÷ true rate.
//!
//! `cargo run --release -p punctual-analysis --example calibration -- [SEEDS] [SHORT] [LONG]`

use std::sync::{Arc, Mutex};

use punctual_analysis::buffer::{mttf, underrun_count_ci95, Buffering, Compute, CountInterval};
use punctual_analysis::forecast::TailModel;
use punctual_analysis::queue::PhaseDiagnostic;
use punctual_analysis::verdict::state_of;
use punctual_analysis::VerdictState;
use punctual_record::Record;
use punctual_units::{parse_duration, Nanos};

/// One interference shape: the `[[noise]]` (and `[clock]`) tables it
/// adds to both the probe's and the consumer's scenario.
struct Shape {
    name: &'static str,
    what: &'static str,
    toml: &'static str,
    /// Probe and consumer released by a 1 ms timer on the scenario's
    /// clock (so a tick clock rounds both), not at exact periods.
    timer: bool,
    /// The consumer forecast and run for the truth: n buffers of t µs,
    /// c µs of compute.
    consumer: Consumer,
}

/// A consumer: `n` buffers of `t_us`, `c_us` of compute per buffer.
#[derive(Clone, Copy)]
struct Consumer {
    n: u32,
    t_us: u64,
    c_us: u64,
}

/// The consumer of every shape but the long stalls': 3 × 1 ms, 0.5 ms.
const SMALL: Consumer = Consumer {
    n: 3,
    t_us: 1000,
    c_us: 500,
};

const SHAPES: &[Shape] = &[
    Shape {
        name: "poisson",
        what: "Poisson stalls, 0.5/s, exponential lengths of mean 1 ms",
        toml: r#"
[[noise]]
name = "stalls"
kind = "poisson"
level = "stall"
rate = 0.5
duration = { exp = "1ms" }
"#,
        timer: false,
        consumer: SMALL,
    },
    Shape {
        name: "periodic",
        what: "a 1 ms burst every 10.37 ms, plus Poisson stalls 0.3/s of mean 1 ms",
        toml: r#"
[[noise]]
name = "burst"
kind = "periodic"
level = "stall"
period = "10.37ms"
duration = "1ms"
[[noise]]
name = "stalls"
kind = "poisson"
level = "stall"
rate = 0.3
duration = { exp = "1ms" }
"#,
        timer: false,
        consumer: SMALL,
    },
    Shape {
        name: "on/off",
        what: "storms: 100 stalls/s of mean 300 µs during bursts of mean 100 ms, every ~5 s",
        toml: r#"
[[noise]]
name = "storms"
kind = "bursty"
level = "stall"
rate = 100.0
burst_on = "100ms"
burst_off = "5s"
duration = { exp = "300us" }
"#,
        timer: false,
        consumer: SMALL,
    },
    Shape {
        name: "heavy",
        what: "20/s stalls of 50 µs and 0.1/s of 3-20 ms",
        toml: r#"
[[noise]]
name = "short"
kind = "poisson"
level = "stall"
rate = 20.0
duration = "50us"
[[noise]]
name = "long"
kind = "poisson"
level = "stall"
rate = 0.1
duration = { uniform = ["3ms", "20ms"] }
"#,
        timer: false,
        consumer: SMALL,
    },
    Shape {
        name: "mixture",
        what: "a 0.5 ms burst every 4 ms, on/off storms and Poisson stalls",
        toml: r#"
[[noise]]
name = "burst"
kind = "periodic"
level = "stall"
period = "4ms"
duration = "500us"
[[noise]]
name = "storms"
kind = "bursty"
level = "stall"
rate = 50.0
burst_on = "50ms"
burst_off = "10s"
duration = { exp = "300us" }
[[noise]]
name = "stalls"
kind = "poisson"
level = "stall"
rate = 0.2
duration = { exp = "1ms" }
"#,
        timer: false,
        consumer: SMALL,
    },
    Shape {
        name: "tick",
        what: "probe and consumer on a 1 ms timer over a 976.5625 µs tick clock, Poisson stalls 0.5/s of mean 1 ms",
        toml: r#"
[clock]
kind = "tick"
period = "976.5625us"
[[noise]]
name = "stalls"
kind = "poisson"
level = "stall"
rate = 0.5
duration = { exp = "1ms" }
"#,
        timer: true,
        consumer: SMALL,
    },
    Shape {
        name: "long",
        what: "stalls longer than the probe's period: a burst of 1.5-2.5 ms every 23.1 ms, plus Poisson stalls 0.3/s of mean 1 ms; consumer 2 × 3 ms, 1 ms",
        toml: r#"
[[noise]]
name = "burst"
kind = "periodic"
level = "stall"
period = "23.1ms"
duration = { uniform = ["1.5ms", "2.5ms"] }
[[noise]]
name = "stalls"
kind = "poisson"
level = "stall"
rate = 0.3
duration = { exp = "1ms" }
"#,
        timer: false,
        consumer: Consumer {
            n: 2,
            t_us: 3000,
            c_us: 1000,
        },
    },
    // `periodic` sees ~2.5 underruns per 30 s record, where an interval on
    // a count cannot fall below the truth (Garwood's upper end for none
    // seen is 3.69) and even a count known exactly covers 98.5 %: its
    // coverage cannot show whether the periodic model is too wide. The
    // same bursts before a consumer with less slack make each burst
    // leave a backlog that a Poisson stall turns into an underrun, so
    // the truth is tens of underruns per record (chosen from the
    // consumer's physics and its long run, before any coverage was
    // seen), where a count's coverage is near 95 % and a periodic
    // model's interval can miss on either side.
    Shape {
        name: "periodic-tight",
        what: "periodic where the count can tell: the 1 ms burst every 10.37 ms of `periodic`, Poisson stalls 4/s of mean 0.5 ms; consumer 3 × 1 ms, 0.8 ms, which a burst leaves behind for ~5 ms, so a stall then underruns: tens of underruns per record, not 2.5, and an interval can miss on either side",
        toml: r#"
[[noise]]
name = "burst"
kind = "periodic"
level = "stall"
period = "10.37ms"
duration = "1ms"
[[noise]]
name = "stalls"
kind = "poisson"
level = "stall"
rate = 4.0
duration = { exp = "500us" }
"#,
        timer: false,
        consumer: Consumer {
            n: 3,
            t_us: 1000,
            c_us: 800,
        },
    },
];

/// Held-out shapes: the same kinds of interference with parameters and
/// consumers of their own, none of them the harness defaults above, so
/// that a change to the model is checked on shapes it was not made on
/// (`bench/calibration.sh 100 30s 2h heldout`).
const HELD_OUT: &[Shape] = &[
    Shape {
        name: "h-poisson",
        what: "Poisson stalls, 1.2/s, exponential lengths of mean 700 µs; consumer 3 × 1 ms, 0.3 ms",
        toml: r#"
[[noise]]
name = "stalls"
kind = "poisson"
level = "stall"
rate = 1.2
duration = { exp = "700us" }
"#,
        timer: false,
        consumer: Consumer {
            n: 3,
            t_us: 1000,
            c_us: 300,
        },
    },
    Shape {
        name: "h-periodic",
        what: "a 0.8 ms burst every 7.3 ms, plus Poisson stalls 0.4/s of mean 0.8 ms; consumer 3 × 1 ms, 0.4 ms",
        toml: r#"
[[noise]]
name = "burst"
kind = "periodic"
level = "stall"
period = "7.3ms"
duration = "800us"
[[noise]]
name = "stalls"
kind = "poisson"
level = "stall"
rate = 0.4
duration = { exp = "800us" }
"#,
        timer: false,
        consumer: Consumer {
            n: 3,
            t_us: 1000,
            c_us: 400,
        },
    },
    Shape {
        name: "h-on/off",
        what: "storms: 150 stalls/s of mean 400 µs during bursts of mean 60 ms, every ~3 s; consumer 3 × 1 ms, 0.5 ms",
        toml: r#"
[[noise]]
name = "storms"
kind = "bursty"
level = "stall"
rate = 150.0
burst_on = "60ms"
burst_off = "3s"
duration = { exp = "400us" }
"#,
        timer: false,
        consumer: SMALL,
    },
    Shape {
        name: "h-heavy",
        what: "30/s stalls with a heavy-tailed length (median 40 µs, 1 in 1000 beyond 3 ms, up to 15 ms); consumer 3 × 1 ms, 0.5 ms",
        toml: r#"
[[noise]]
name = "stalls"
kind = "poisson"
level = "stall"
rate = 30.0
duration = { cdf = [[0.0, "20us"], [0.9, "60us"], [0.99, "400us"], [0.999, "3ms"], [1.0, "15ms"]] }
"#,
        timer: false,
        consumer: SMALL,
    },
    Shape {
        name: "h-mixture",
        what: "a 0.3 ms burst every 2.9 ms, on/off storms (80/s of 250 µs, 80 ms every ~6 s) and Poisson stalls 0.3/s of mean 0.8 ms; consumer 4 × 1 ms, 0.7 ms",
        toml: r#"
[[noise]]
name = "burst"
kind = "periodic"
level = "stall"
period = "2.9ms"
duration = "300us"
[[noise]]
name = "storms"
kind = "bursty"
level = "stall"
rate = 80.0
burst_on = "80ms"
burst_off = "6s"
duration = { exp = "250us" }
[[noise]]
name = "stalls"
kind = "poisson"
level = "stall"
rate = 0.3
duration = { exp = "800us" }
"#,
        timer: false,
        consumer: Consumer {
            n: 4,
            t_us: 1000,
            c_us: 700,
        },
    },
    Shape {
        name: "h-tick",
        what: "probe and consumer on a 1 ms timer over a 990 µs tick clock, Poisson stalls 0.8/s of mean 0.8 ms; consumer 3 × 1 ms, 0.4 ms",
        toml: r#"
[clock]
kind = "tick"
period = "990us"
[[noise]]
name = "stalls"
kind = "poisson"
level = "stall"
rate = 0.8
duration = { exp = "800us" }
"#,
        timer: true,
        consumer: Consumer {
            n: 3,
            t_us: 1000,
            c_us: 400,
        },
    },
    Shape {
        name: "h-long",
        what: "stalls longer than the probe's period: a burst of 2.5-3.5 ms every 31.7 ms, plus Poisson stalls 0.2/s of mean 1 ms; consumer 2 × 4 ms, 1 ms",
        toml: r#"
[[noise]]
name = "burst"
kind = "periodic"
level = "stall"
period = "31.7ms"
duration = { uniform = ["2.5ms", "3.5ms"] }
[[noise]]
name = "stalls"
kind = "poisson"
level = "stall"
rate = 0.2
duration = { exp = "1ms" }
"#,
        timer: false,
        consumer: Consumer {
            n: 2,
            t_us: 4000,
            c_us: 1000,
        },
    },
    // `periodic-tight`'s reason, with bursts, stalls and consumer of its own.
    Shape {
        name: "h-periodic-tight",
        what: "periodic where the count can tell, held out: a 0.7 ms burst every 8.3 ms, Poisson stalls 3/s of mean 0.6 ms; consumer 3 × 1 ms, 0.85 ms",
        toml: r#"
[[noise]]
name = "burst"
kind = "periodic"
level = "stall"
period = "8.3ms"
duration = "700us"
[[noise]]
name = "stalls"
kind = "poisson"
level = "stall"
rate = 3.0
duration = { exp = "600us" }
"#,
        timer: false,
        consumer: Consumer {
            n: 3,
            t_us: 1000,
            c_us: 850,
        },
    },
];

fn scenario(shape: &Shape, task: &str) -> String {
    // CAL_STACK=1 (a diagnostic of the truth, docs/forecast.md §3.3): the
    // Poisson stalls come at the interrupt level, where one that meets
    // another stall waits for it to end and then takes its whole length,
    // instead of the stall level's, where two that overlap take the CPU
    // once (their union). With `SEEDS` 0 the table is the truth alone:
    // beside the plain run it says how many of the true underruns hang on
    // stalls that overlap.
    let toml = if std::env::var_os("CAL_STACK").is_some() {
        shape.toml.replace(
            "kind = \"poisson\"\nlevel = \"stall\"",
            "kind = \"poisson\"\nlevel = \"irq\"",
        )
    } else {
        shape.toml.to_string()
    };
    format!(
        "[sim]\ndescription = \"calibration {}\"\nspike_threshold = \"100us\"\n{}\n{}",
        shape.name, task, toml
    )
}

fn probe_task(shape: &Shape) -> String {
    // CAL_QUEUE=1: the probe queues the jobs a stall delays (as the first
    // calibration runs did).
    let refill = if std::env::var_os("CAL_QUEUE").is_some() {
        ""
    } else {
        "deadline = \"1ms\"\nrefill = true\n"
    };
    if shape.timer {
        format!(
            "[[timer]]\nname = \"t\"\nperiod = \"1ms\"\nmode = \"fixed\"\ntask = \"probe\"\n\
             [[task]]\nname = \"probe\"\nkind = \"timer\"\npriority = 31\nexec = \"5us\"\n{refill}"
        )
    } else {
        format!(
            "[[task]]\nname = \"probe\"\nkind = \"periodic\"\npriority = 31\nperiod = \"1ms\"\nexec = \"5us\"\n{refill}"
        )
    }
}

/// The consumer: a job of c every t that underruns when it completes
/// later than (n − 1)·t after its release, and then drops the jobs queued
/// behind it and starts again at the next release with its ring refilled
/// (`refill`): the consumer the queue model describes (docs/forecast.md
/// §3.2) and `validate` runs. One underrun is one such episode.
fn consumer_task(shape: &Shape) -> String {
    let Consumer { n, t_us, c_us } = shape.consumer;
    // CAL_QUEUE=1: the consumer that never drops a job and counts each
    // late one (the truth of the first calibration runs).
    let refill = || {
        if std::env::var_os("CAL_QUEUE").is_some() {
            ""
        } else {
            "refill = true\n"
        }
    };
    if shape.timer {
        format!(
            "[[timer]]\nname = \"t\"\nperiod = \"{t_us}us\"\nmode = \"fixed\"\ntask = \"consumer\"\n\
             [[task]]\nname = \"consumer\"\nkind = \"timer\"\npriority = 31\nexec = \"{c_us}us\"\ndeadline = \"{}us\"\n{}",
            t_us * u64::from(n - 1),
            refill()
        )
    } else {
        format!(
            "[[task]]\nname = \"consumer\"\nkind = \"periodic\"\npriority = 31\nperiod = \"{t_us}us\"\nexec = \"{c_us}us\"\nbuffers = {n}\n{}",
            refill()
        )
    }
}

fn simulate(text: &str, seed: u64, duration: Nanos) -> Record {
    let opts = punctual_sim::RunOptions {
        seed: Some(seed),
        duration: Some(duration),
        timeline_window: Some(Nanos::ZERO),
        ..Default::default()
    };
    let (scn, o) = punctual_sim::run_text("calibration.toml", text, &[], &opts)
        .unwrap_or_else(|e| panic!("calibration scenario: {e}"));
    punctual_sim::to_record(&scn, &o, &[])
}

/// The probe's series with its missed periods counted as the live
/// timer counts them: ⌊v / p⌋ for a wake-up late by v (the periods it
/// skipped). The simulator's refilling task counts one per late job
/// instead, the episodes its consumer's truth is made of.
fn live_missed(s: &punctual_record::Series) -> punctual_record::Series {
    let mut s = s.clone();
    let (Some(p), w) = (s.sample_period_ns, s.histogram.bucket_ns) else {
        return s;
    };
    // CAL_QUEUE=1: the probe queues delayed jobs and skips none.
    if std::env::var_os("CAL_QUEUE").is_some() || p.0 == 0 || !p.0.is_multiple_of(w.max(1)) {
        return s;
    }
    s.missed = s
        .histogram
        .buckets
        .iter()
        .map(|(lo, c)| c * (lo / p.0))
        .sum();
    s
}

/// The forecast of one short record: (rate, lo, hi) underruns per second.
fn forecast(rec: &Record, c: Consumer) -> Option<(f64, f64, f64)> {
    let s = rec.series_named("probe.latency")?;
    let s = &live_missed(s);
    let mut m = TailModel::new(s, rec.duration_ns)
        .ok()?
        .with_spike_log(rec, s);
    if std::env::var_os("CAL_RENEWAL").is_some() {
        m = m.with_record_spikes(rec, s);
    }
    m.count_interval = count_interval();
    // CAL_REST=RATE,MEAN (e.g. 4,500us) and CAL_BURST_CAP=F (e.g. 1.1):
    // diagnostics of the periodic phase model's split (docs/forecast.md
    // §3.3), the rest replaced by the shape's own Poisson stalls, or the
    // bursts' lengths above F × their median dropped.
    if let Some(st) = m.stall_times.as_mut() {
        st.diagnostic = phase_diagnostic();
    }
    // CAL_BOOT_FROM=X: the stall model's bootstrap holds the wake-ups
    // below X as recorded (a diagnostic: which wake-ups the interval's
    // width comes from; docs/forecast.md §3.5).
    m.stall_boot_from = std::env::var("CAL_BOOT_FROM")
        .ok()
        .map(|v| match parse_duration(&v) {
            Ok(d) => d,
            Err(e) => {
                eprintln!("CAL_BOOT_FROM must be a duration such as 1.05ms, not {v:?}: {e}");
                std::process::exit(2)
            }
        });
    // CAL_SWEEP=1: the stall model's bootstrap holds a periodic source's
    // phase sweep as recorded and redraws the rest (measured, not the
    // default: docs/forecast.md §3.5).
    m.hold_phase_sweep = std::env::var_os("CAL_SWEEP").is_some();
    let b = Buffering::new(
        c.n,
        Nanos::from_us(c.t_us),
        Compute::Time(Nanos::from_us(c.c_us)),
    );
    let r = mttf(&m, &b).ok()?;
    // CAL_SHOW=1: what the forecast of each record assumed.
    if std::env::var_os("CAL_SHOW").is_some() {
        eprintln!(
            "{:.3}/s ({:.3}-{:.3}; queue model {:.3}/s); stalls {:.1}/s; {} logged, {} dropped, {} missed, bucket {} ns\n  {}",
            r.underrun_rate_per_s,
            r.rate_ci_low_per_s,
            r.rate_ci_high_per_s,
            r.queue.rate_per_s,
            r.queue.stalls.rate_per_s,
            rec.spikes.len(),
            rec.spikes_dropped,
            s.missed,
            s.histogram.bucket_ns,
            r.assumptions.join("\n  ")
        );
        // The interval's parts, each as a relative standard deviation of
        // the rate: the two counts' (1/k + 1/n_s), the stall model's
        // bootstrap where it replaces them (its replicates' median against
        // the forecast, the wake-ups it held), the storms' dispersion; and
        // the interval's half-widths below and above the forecast.
        let iv = &r.interval;
        let rate = r.underrun_rate_per_s.max(1e-300);
        let (bsd, bmed, held) = iv.bootstrap.as_ref().map_or((f64::NAN, f64::NAN, 0), |b| {
            (b.variance.sqrt(), b.median_ratio, b.held_wakeups)
        });
        eprintln!(
            "  interval: -{:.3} +{:.3} of the rate; counts' s.d. {:.3}, bootstrap's s.d. {:.3}{} (replicates' median {:.2} × the forecast, {} wake-ups held), dispersion {:.2}",
            1.0 - r.rate_ci_low_per_s / rate,
            r.rate_ci_high_per_s / rate - 1.0,
            iv.count_rel_var.sqrt(),
            bsd,
            if bsd > 1.0 { " (capped at 1)" } else { "" },
            bmed,
            held,
            iv.dispersion,
        );
        // The periodic phase model's split of the stall model into the
        // source's bursts and the Poisson rest (docs/forecast.md §3.3):
        // each part's rate and mean length, and the bursts' lengths by
        // quantile, to set against the shape's own.
        if let Some(ph) = r.queue.renewal.as_ref().and_then(|w| w.phase.as_ref()) {
            let rest = &ph.rest.stalls;
            let burst_rate = r.queue.stalls.rate_per_s - rest.rate_per_s;
            let burst_mean: f64 = ph.burst.iter().map(|(y, s)| y * s).sum();
            let quantile = |q: f64| {
                let mut acc = 0.0;
                for &(y, s) in &ph.burst {
                    acc += s;
                    if acc >= q {
                        return y;
                    }
                }
                f64::NAN
            };
            let rest_below = |x: f64| -> f64 {
                rest.lengths
                    .iter()
                    .filter(|(y, _)| *y < x)
                    .map(|(_, s)| s)
                    .sum()
            };
            let rest_in = |a: f64, b: f64| -> f64 {
                rest.rate_per_s
                    * rest
                        .lengths
                        .iter()
                        .filter(|(y, _)| a <= *y && *y < b)
                        .map(|(_, s)| s)
                        .sum::<f64>()
            };
            eprintln!(
                "  rest per second by length: <200 µs {:.2}, 200-900 µs {:.2}, 900-1100 µs {:.2}, >=1100 µs {:.2}",
                rest_in(0.0, 200e3),
                rest_in(200e3, 900e3),
                rest_in(900e3, 1100e3),
                rest_in(1100e3, f64::INFINITY),
            );
            let median = quantile(0.5);
            let long: Vec<(f64, f64)> = ph
                .burst
                .iter()
                .filter(|(y, _)| *y > 1.1 * median)
                .copied()
                .collect();
            let long_share: f64 = long.iter().map(|(_, s)| s).sum();
            let long_mean = long.iter().map(|(y, s)| y * s).sum::<f64>() / long_share.max(1e-300);
            eprintln!(
                "  bursts longer than 1.1 × their median: {:.2}/s ({:.2} % of them) of mean {:.0} µs",
                burst_rate * long_share,
                100.0 * long_share,
                long_mean / 1e3,
            );
            eprintln!(
                "  split: bursts {burst_rate:.1}/s of mean {:.0} µs (p10 {:.0}, p50 {:.0}, p90 {:.0} µs); rest {:.2}/s of mean {:.0} µs ({:.0} % of it shorter than 200 µs, {:.0} % longer than 900 µs), stalled wake-up factor {:.2}",
                burst_mean / 1e3,
                quantile(0.1) / 1e3,
                quantile(0.5) / 1e3,
                quantile(0.9) / 1e3,
                rest.rate_per_s,
                rest.mean_ns / 1e3,
                100.0 * rest_below(200e3),
                100.0 * (1.0 - rest_below(900e3)),
                ph.rest.stalled_wakeup_factor,
            );
        }
    }
    Some((
        r.underrun_rate_per_s,
        r.rate_ci_low_per_s,
        r.rate_ci_high_per_s,
    ))
}

/// The periodic phase model's diagnostics from `CAL_REST`,
/// `CAL_BURST_CAP` and `CAL_UNIONS`; bad values end the run with one
/// sentence and status 2.
fn phase_diagnostic() -> PhaseDiagnostic {
    let bad = |what: &str, v: &str| -> ! {
        eprintln!("{what}, not {v:?}");
        std::process::exit(2)
    };
    let rest = std::env::var("CAL_REST").ok().map(|v| {
        let parsed = v.split_once(',').and_then(|(r, m)| {
            let rate: f64 = r.trim().parse().ok()?;
            let mean = parse_duration(m.trim()).ok()?;
            (rate.is_finite() && rate >= 0.0).then_some((rate, mean))
        });
        parsed.unwrap_or_else(|| {
            bad(
                "CAL_REST must be a rate per second and a mean length, such as 4,500us",
                &v,
            )
        })
    });
    let burst_cap = std::env::var("CAL_BURST_CAP").ok().map(|v| {
        v.trim()
            .parse::<f64>()
            .ok()
            .filter(|f| f.is_finite() && *f >= 1.0)
            .unwrap_or_else(|| {
                bad(
                    "CAL_BURST_CAP must be a factor of at least 1, such as 1.1",
                    &v,
                )
            })
    });
    // CAL_TAIL_TO_REST=1 (with CAL_BURST_CAP): the dropped lengths go to
    // the rest, as the part of each that outlasts the burst.
    let tail_to_rest = std::env::var_os("CAL_TAIL_TO_REST").is_some();
    // CAL_UNIONS=1: the union model of both parts, =split or =chain: one
    // of them (the bursts' unions handed to the rest; the chain's bursts
    // extended by the rest that overlaps them).
    let unions = std::env::var("CAL_UNIONS").ok();
    let (split_unions, chain_unions) = match unions.as_deref() {
        None => (false, false),
        Some("1") => (true, true),
        Some("split") => (true, false),
        Some("chain") => (false, true),
        Some(v) => bad("CAL_UNIONS must be 1, split or chain", v),
    };
    // CAL_RAW_ENDS=1 (with CAL_UNIONS): the rest's stall model as the
    // least concave majorant has it at its pieces' left ends, without the
    // boundary correction (docs/forecast.md §3.3).
    let raw_ends = std::env::var_os("CAL_RAW_ENDS").is_some();
    PhaseDiagnostic {
        rest,
        burst_cap,
        tail_to_rest,
        split_unions,
        chain_unions,
        raw_ends,
    }
}

/// The interval on the count of underrun-sized events: Garwood's, as
/// `forecast` uses it; CAL_MIDP=1: Lancaster's mid-P, measured and not
/// adopted (docs/forecast.md §3.5).
fn count_interval() -> CountInterval {
    if std::env::var_os("CAL_MIDP").is_some() {
        CountInterval::MidP
    } else {
        CountInterval::Garwood
    }
}

/// The Wilson score interval (95 %) of `k` successes in `n` trials.
fn wilson(k: usize, n: usize) -> (f64, f64) {
    if n == 0 {
        return (0.0, 1.0);
    }
    let (k, n, z) = (k as f64, n as f64, 1.959_964);
    let p = k / n;
    let centre = (p + z * z / (2.0 * n)) / (1.0 + z * z / n);
    let half = z / (1.0 + z * z / n) * (p * (1.0 - p) / n + z * z / (4.0 * n * n)).sqrt();
    ((centre - half).max(0.0), (centre + half).min(1.0))
}

/// The coverage a forecast that knew each record's own count of
/// underruns would reach with the interval `mttf` puts on a count
/// ([`underrun_count_ci95`]): Σ_k P(k; μ) over the k whose interval holds μ,
/// μ the true underruns in one record's length. At a few events per
/// record an interval that is at least 95 % for every μ holds the truth
/// far more often than 95 % (98–99 % at μ = 1.5–3), so this is the
/// coverage the 90–98 % goal must be read against: a shape's figure near
/// it says the interval is as narrow as a count allows.
fn counting_coverage(mu: f64) -> f64 {
    if mu <= 0.0 || !mu.is_finite() {
        return f64::NAN;
    }
    let top = (mu + 20.0 * mu.sqrt() + 20.0) as u64;
    // P(k; μ) from P(0; μ) = e^−μ by P(k) = P(k − 1)·μ / k, in logs so
    // that a large μ does not underflow.
    let mut log_p = -mu;
    let mut sum = 0.0;
    for k in 0..=top {
        if k > 0 {
            log_p += mu.ln() - (k as f64).ln();
        }
        let (lo, hi) = underrun_count_ci95(count_interval(), k);
        if lo <= mu && mu <= hi {
            sum += log_p.exp();
        }
    }
    sum
}

/// The consumer's own underruns in `seeds` runs of `short` (seeds as the
/// probe's records): their mean per record and index of dispersion
/// (variance ÷ mean; 1 for a Poisson count, below 1 where the underruns
/// come more regularly than Poisson's, as a periodic interferer's might).
/// An interval that reads the count as Poisson where it is
/// under-dispersed is wider than the count's own spread.
fn consumer_dispersion(shape: &Shape, seeds: u64, short: Nanos) -> (f64, f64) {
    let text = scenario(shape, &consumer_task(shape));
    let counts: Vec<f64> = (1..=seeds)
        .map(|i| {
            simulate(&text, 1000 + i, short)
                .series_named("consumer.latency")
                .map(|s| s.missed as f64)
                .unwrap_or(0.0)
        })
        .collect();
    let n = counts.len().max(2) as f64;
    let mean = counts.iter().sum::<f64>() / n;
    let var = counts.iter().map(|c| (c - mean).powi(2)).sum::<f64>() / (n - 1.0);
    (mean, if mean > 0.0 { var / mean } else { f64::NAN })
}

fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let seeds: u64 = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(60);
    let short = parse_duration(args.get(2).map(String::as_str).unwrap_or("30s")).unwrap();
    let long = parse_duration(args.get(3).map(String::as_str).unwrap_or("2h")).unwrap();
    let only: Option<&str> = args.get(4).map(String::as_str);
    println!(
        "consumer 3 × 1000us, compute 500us unless the shape says otherwise; {seeds} records of {short} per shape, truth from {long}\n"
    );
    println!("| shape | true MTTF | coverage of 95% CI (its own 95% interval; of records that saw an underrun-sized event) | a count's coverage at the true rate | decided | wrong decided | median predicted/true | mean predicted/true | forecasts of < 1 underrun in the record | what |");
    println!("|---|---|---|---|---|---|---|---|---|---|");
    // "heldout": the held-out set; a name: that shape of either set.
    let shapes: Vec<&Shape> = match only {
        Some("heldout") => HELD_OUT.iter().collect(),
        Some(o) => SHAPES
            .iter()
            .chain(HELD_OUT)
            .filter(|s| s.name == o)
            .collect(),
        None => SHAPES.iter().collect(),
    };
    // CAL_DISPERSION=1: a second table, whether the consumer's underrun
    // count is Poisson-dispersed and how wide the intervals are against
    // the spread of the forecasts themselves.
    let dispersion = std::env::var_os("CAL_DISPERSION").is_some();
    let mut spread_rows = Vec::new();
    for shape in shapes {
        let truth_rec = simulate(&scenario(shape, &consumer_task(shape)), 0xCA11_B8A7, long);
        let missed = truth_rec
            .series_named("consumer.latency")
            .map(|s| s.missed)
            .unwrap_or(0);
        let true_rate = missed as f64 / truth_rec.duration_ns.as_secs_f64();
        let text = Arc::new(scenario(shape, &probe_task(shape)));
        let consumer = shape.consumer;
        let results = Arc::new(Mutex::new(Vec::new()));
        let next = Arc::new(Mutex::new(0u64));
        let workers: Vec<_> = (0..2)
            .map(|_| {
                let (text, results, next) = (text.clone(), results.clone(), next.clone());
                std::thread::spawn(move || loop {
                    let i = {
                        let mut n = next.lock().unwrap();
                        if *n >= seeds {
                            break;
                        }
                        *n += 1;
                        *n
                    };
                    let rec = simulate(&text, 1000 + i, short);
                    if let Some(f) = forecast(&rec, consumer) {
                        results.lock().unwrap().push(f);
                    }
                })
            })
            .collect();
        for w in workers {
            w.join().unwrap();
        }
        let res = results.lock().unwrap().clone();
        let covered = res
            .iter()
            .filter(|(_, lo, hi)| *lo <= true_rate && true_rate <= *hi)
            .count();
        let true_mttf = 1.0 / true_rate;
        let (mut decided, mut wrong) = (0usize, 0usize);
        for (_, lo, hi) in &res {
            let inv = |x: f64| (x > 0.0).then(|| 1.0 / x);
            for k in [0.1, 0.3, 3.0, 10.0] {
                let target = true_mttf * k;
                match state_of(inv(*hi), inv(*lo), target) {
                    VerdictState::Meets => {
                        decided += 1;
                        wrong += usize::from(true_mttf < target);
                    }
                    VerdictState::Misses => {
                        decided += 1;
                        wrong += usize::from(true_mttf >= target);
                    }
                    VerdictState::Inconclusive => {}
                }
            }
        }
        let ratio = median(res.iter().map(|(r, _, _)| r / true_rate).collect());
        // A record too short to show the failure forecasts from what it
        // saw, which holds no underrun-sized event: its point estimate is
        // near zero and the median of many such is no statement about the
        // model. The mean ratio is (an unbiased forecast has mean 1), and
        // the count says how many records could not see it.
        let mean = res.iter().map(|(r, _, _)| r / true_rate).sum::<f64>() / res.len().max(1) as f64;
        let blind = res
            .iter()
            .filter(|(r, _, _)| r * short.as_secs_f64() < 1.0)
            .count();
        // Coverage is itself estimated from a few hundred records: its own
        // interval says whether a figure outside 90–98 % is the method or
        // the count. Records that saw no underrun-sized event get a bound
        // from nothing seen, which any valid interval must make wide and
        // which covers almost always: their share is shown apart.
        let (c_lo, c_hi) = wilson(covered, res.len());
        let seeing: Vec<_> = res
            .iter()
            .filter(|(r, _, _)| r * short.as_secs_f64() >= 1.0)
            .collect();
        let covered_seeing = seeing
            .iter()
            .filter(|(_, lo, hi)| *lo <= true_rate && true_rate <= *hi)
            .count();
        if dispersion {
            let (mean_count, d) = consumer_dispersion(shape, seeds, short);
            // The forecasts' own spread: relative standard deviation of
            // the predicted rate across records, against the relative
            // standard deviation each record's interval implies, its
            // width ÷ (2 × 1.96) ÷ its rate (median over the records that
            // saw an underrun-sized event).
            let rel: Vec<f64> = seeing.iter().map(|(r, _, _)| r / true_rate).collect();
            let m = rel.iter().sum::<f64>() / rel.len().max(1) as f64;
            let sd = (rel.iter().map(|x| (x - m).powi(2)).sum::<f64>()
                / (rel.len().max(2) - 1) as f64)
                .sqrt();
            let implied = median(
                seeing
                    .iter()
                    .map(|(r, lo, hi)| (hi - lo) / (2.0 * 1.959_964) / r)
                    .collect(),
            );
            spread_rows.push(format!(
                "| {} | {:.2} | {:.2} (± {:.2}) | {:.2} | {:.2} | {} |",
                shape.name,
                mean_count,
                d,
                2.0 * (2.0 / (seeds.max(2) - 1) as f64).sqrt(),
                sd / m,
                implied,
                seeing.len()
            ));
        }
        println!(
            "| {} | {:.3} s ({} underruns) | {:.0}% ({covered}/{}; {:.1}–{:.1}%; {covered_seeing}/{} of records that saw one) | {:.1}% (μ = {:.2}) | {decided}/{} | {:.1}% ({wrong}) | {:.2} | {mean:.2} | {blind} | {} |",
            shape.name,
            true_mttf,
            missed,
            100.0 * covered as f64 / res.len().max(1) as f64,
            res.len(),
            100.0 * c_lo,
            100.0 * c_hi,
            seeing.len(),
            100.0 * counting_coverage(true_rate * short.as_secs_f64()),
            true_rate * short.as_secs_f64(),
            res.len() * 4,
            100.0 * wrong as f64 / decided.max(1) as f64,
            ratio,
            shape.what
        );
    }
    if dispersion {
        println!("\n| shape | consumer's underruns per record | their index of dispersion (± 2 s.e. for Poisson) | forecasts' relative s.d. | intervals' implied relative s.d. (median) | records that saw one |");
        println!("|---|---|---|---|---|---|");
        for r in spread_rows {
            println!("{r}");
        }
    }
}
