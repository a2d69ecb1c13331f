//! `punctual validate`: does the forecast match reality on this machine?
//!
//! For each load (none, and the SCHED_FIFO-99 noisy neighbor spinning
//! 1 ms every 10.37 ms on the probed CPU) it first takes a `timer` record
//! with the real probe, forecasts the time to underrun of n buffers of
//! length t with compute c from it, and then runs an actual buffered
//! consumer under the same load for the same time and counts its real
//! underruns. The two phases run one after the other so they do not
//! disturb each other; the load is restarted for each.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use punctual_analysis::buffer::{self, Buffering, Compute};
use punctual_analysis::forecast::TailModel;
use punctual_analysis::verdict::human_secs;
use punctual_live::clock::{mono, sleep_until, spin_until};
use punctual_live::inject::{NeighborConfig, NoisyNeighbor};
use punctual_live::rt::{pin_to_cpu, set_policy, set_thread_name, Policy};
use punctual_live::timer::{self as probe, Progress, TimerClock, TimerConfig};
use punctual_record::{Metric, Recorder};
use punctual_units::Nanos;
use serde::Serialize;
use serde_json::json;

use crate::error::{CliError, CliResult};
use crate::opts;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// CPU on which the probe, the consumer and the load run.
    #[arg(long, default_value_t = 0)]
    pub cpu: u32,
    /// Number of buffers n.
    #[arg(long, default_value_t = 2)]
    pub buffers: u32,
    /// Buffer length t (the consumer wakes once per t).
    #[arg(long, default_value = "1ms", value_parser = opts::positive_duration)]
    pub buffer_len: Nanos,
    /// Compute per buffer, spun for real: a time or a fraction of t.
    #[arg(long, default_value = "0.5ms")]
    pub compute: String,
    /// Length of each phase (timer record, then consumer) per load.
    #[arg(long, default_value = "20s", value_parser = opts::positive_duration)]
    pub duration: Nanos,
    /// Alternate timer and consumer phases this many times per load (each
    /// phase duration/rounds long), so slow drifts in background noise
    /// reach both alike.
    #[arg(long, default_value_t = 4)]
    pub rounds: u32,
    /// Loads to run: none, injector, or both.
    #[arg(long, default_value = "both")]
    pub load: String,
    /// SCHED_FIFO priority of the probe and the consumer.
    #[arg(long, default_value_t = 95)]
    pub priority: u8,
    /// Write the results as JSON (atomically).
    #[arg(long, value_name = "PATH")]
    pub json: Option<std::path::PathBuf>,
}

/// One load's forecast beside its observation.
#[derive(Clone, Debug, Serialize)]
pub struct Case {
    pub load: String,
    pub timer_samples: u64,
    pub timer_max_ns: Nanos,
    pub slack_ns: Nanos,
    pub forecast_probability: f64,
    pub forecast_mttf_seconds: Option<f64>,
    pub forecast_mttf_ci_low_seconds: Option<f64>,
    pub forecast_mttf_ci_high_seconds: Option<f64>,
    pub forecast_extrapolated: bool,
    /// Underruns the forecast predicts for the consumer phase's length.
    pub predicted_underruns: f64,
    /// The same counting stalls during the compute (see `Mttf`).
    pub forecast_compute_aware_mttf_seconds: Option<f64>,
    pub predicted_underruns_compute_aware: f64,
    pub ratio_compute_aware: Option<f64>,
    pub consumer_seconds: f64,
    pub consumer_wakeups: u64,
    /// Underrun episodes: a wake-up that finished its buffer too late
    /// (what the forecast counts).
    pub observed_underruns: u64,
    /// Buffers the device found empty (one long stall can cost several).
    pub observed_buffers_lost: u64,
    pub observed_mttf_seconds: Option<f64>,
    /// observed / predicted underruns.
    pub ratio: Option<f64>,
    /// Within a factor of 2, judged only where ≥ 10 underruns were seen.
    pub within_factor_2: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub injector_bursts: Option<u64>,
}

pub fn run(a: Args) -> CliResult {
    let compute = Compute::parse(&a.compute).map_err(|e| CliError::usage(format!("--{e}")))?;
    let b = Buffering::new(a.buffers, a.buffer_len, compute);
    b.slack()
        .map_err(|e| CliError::usage(format!("--buffers/--buffer-len/--compute: {e}")))?;
    let loads: Vec<&str> = match a.load.as_str() {
        "none" => vec!["none"],
        "injector" => vec!["injector"],
        "both" => vec!["none", "injector"],
        l => {
            return Err(CliError::usage(format!(
                "--load '{l}' is not a load (use none, injector or both)"
            )))
        }
    };
    if !opts::online_cpus().contains(&a.cpu) {
        return Err(CliError::usage(format!(
            "--cpu {} is not online on this machine",
            a.cpu
        )));
    }
    if !(1..=98).contains(&a.priority) {
        return Err(CliError::usage(format!(
            "--priority {} must be 1–98 (the injector runs at 99)",
            a.priority
        )));
    }
    if a.rounds == 0 || a.duration.0 / (a.rounds as u64) < a.buffer_len.0 * 100 {
        return Err(CliError::usage(format!(
            "--duration {} split in --rounds {} leaves phases shorter than 100 buffer periods",
            a.duration, a.rounds
        )));
    }
    opts::check_output("--json", &a.json)?;
    punctual_live::rt::fifo_permitted().map_err(|e| {
        CliError::runtime(format!(
            "SCHED_FIFO is not permitted here ({e}); validation needs real-time threads (run as root or with CAP_SYS_NICE)"
        ))
    })?;
    let stop = crate::interrupt::stop_flag();
    let mut cases = Vec::new();
    for load in loads {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        let phase = Nanos(a.duration.0 / a.rounds as u64);
        let mut rec: Option<Recorder> = None;
        let mut obs = Observed {
            seconds: 0.0,
            wakeups: 0,
            episodes: 0,
            buffers_lost: 0,
        };
        let (mut bursts1, mut bursts2) = (0, 0);
        for round in 1..=a.rounds {
            if stop.load(Ordering::Relaxed) {
                break;
            }
            eprintln!(
                "validate: load {load}, round {round}/{}: timer probe {phase}, then the buffered consumer {phase}",
                a.rounds
            );
            let (r, n1) = with_load(load, a.cpu, || timer_phase(&a, phase, Arc::clone(&stop)))?;
            match &mut rec {
                Some(all) => all.merge(&r),
                None => rec = Some(r),
            }
            let (o, n2) = with_load(load, a.cpu, || {
                Ok(consumer_phase(&a, phase, &b, Arc::clone(&stop)))
            })?;
            obs.seconds += o.seconds;
            obs.wakeups += o.wakeups;
            obs.episodes += o.episodes;
            obs.buffers_lost += o.buffers_lost;
            bursts1 += n1;
            bursts2 += n2;
        }
        let Some(rec) = rec else { break };
        let mut series_rec = rec.to_series(&format!("cpu{}.latency", a.cpu), Metric::Latency);
        series_rec.sample_period_ns = Some(a.buffer_len);
        let model = TailModel::new(&series_rec, Nanos::ZERO).map_err(CliError::runtime)?;
        let f = buffer::mttf(&model, &b).map_err(CliError::usage)?;
        let predicted = f.exceedance_rate_per_s * obs.seconds;
        let ratio = (predicted > 0.0).then(|| obs.episodes as f64 / predicted);
        let predicted_ca = (f.exceedance.probability + f.compute_exposure_probability)
            * f.wakeups_per_s
            * obs.seconds;
        let ratio_ca = (predicted_ca > 0.0).then(|| obs.episodes as f64 / predicted_ca);
        cases.push(Case {
            load: load.to_string(),
            timer_samples: model.tail.n,
            timer_max_ns: model.tail.max,
            slack_ns: f.slack_ns,
            forecast_probability: f.exceedance.probability,
            forecast_mttf_seconds: f.mttf_seconds,
            forecast_mttf_ci_low_seconds: f.mttf_ci_low_seconds,
            forecast_mttf_ci_high_seconds: f.mttf_ci_high_seconds,
            forecast_extrapolated: f.extrapolated,
            predicted_underruns: predicted,
            forecast_compute_aware_mttf_seconds: f.mttf_compute_aware_seconds,
            predicted_underruns_compute_aware: predicted_ca,
            ratio_compute_aware: ratio_ca,
            consumer_seconds: obs.seconds,
            consumer_wakeups: obs.wakeups,
            observed_underruns: obs.episodes,
            observed_buffers_lost: obs.buffers_lost,
            observed_mttf_seconds: (obs.episodes > 0).then(|| obs.seconds / obs.episodes as f64),
            within_factor_2: (obs.episodes >= 10)
                .then(|| ratio.is_some_and(|r| (0.5..=2.0).contains(&r))),
            ratio,
            injector_bursts: (load == "injector").then_some(bursts1 + bursts2),
        });
    }
    println!(
        "validate: {} buffers × {}, compute {} (slack {}), CPU {}, {} of timer and {} of consumer per load in {} alternating rounds",
        b.buffers,
        b.buffer_len,
        compute.at(b.buffer_len),
        b.slack().unwrap_or_default(),
        a.cpu,
        a.duration,
        a.duration,
        a.rounds
    );
    println!(
        "  {:<9} {:>7} {:>8} {:>10} {:>21} {:>9} {:>9} {:>8} {:>6} {:>6} {:>9}",
        "load",
        "samples",
        "max",
        "P(>slack)",
        "MTTF seed (95% CI)",
        "MTTF +c",
        "predicted",
        "observed",
        "ratio",
        "+c",
        "within×2"
    );
    for c in &cases {
        let ci = match (
            c.forecast_mttf_ci_low_seconds,
            c.forecast_mttf_ci_high_seconds,
        ) {
            (Some(l), Some(h)) => format!(
                "{} ({}–{})",
                mttf(c.forecast_mttf_seconds),
                human_secs(l),
                human_secs(h)
            ),
            _ => mttf(c.forecast_mttf_seconds),
        };
        let r = |x: Option<f64>| x.map(|r| format!("{r:.2}")).unwrap_or_else(|| "—".into());
        println!(
            "  {:<9} {:>7} {:>8} {:>10.3e} {:>21} {:>9} {:>9.1} {:>8} {:>6} {:>6} {:>9}",
            c.load,
            c.timer_samples,
            c.timer_max_ns.to_string(),
            c.forecast_probability,
            ci,
            mttf(c.forecast_compute_aware_mttf_seconds),
            c.predicted_underruns,
            c.observed_underruns,
            r(c.ratio),
            r(c.ratio_compute_aware),
            match c.within_factor_2 {
                Some(true) => "yes",
                Some(false) => "NO",
                None => "(<10 obs)",
            }
        );
    }
    println!(
        "  MTTF seed: s / P(latency > slack) (seed 002); MTTF +c: also counting stalls that start \
         during the compute; predicted: seed rate × consumer time; observed: wake-ups whose buffer \
         missed its deadline; ratio = observed / predicted (seed, +c); within×2 judges the seed \
         forecast where ≥ 10 were observed"
    );
    if let Some(p) = &a.json {
        let doc = json!({
            "tool": "punctual validate",
            "buffering": b,
            "cpu": a.cpu,
            "phase_ns": a.duration,
            "rounds": a.rounds,
            "cases": cases,
        });
        punctual_record::write_atomic(
            p,
            serde_json::to_string_pretty(&doc)
                .unwrap_or_default()
                .as_bytes(),
        )
        .map_err(|e| CliError::runtime(format!("--json {}: {e}", p.display())))?;
    }
    Ok(())
}

fn mttf(s: Option<f64>) -> String {
    s.map(human_secs).unwrap_or_else(|| "never".into())
}

/// Runs `f` with the load running (and stopped after, on every path).
fn with_load<T>(load: &str, cpu: u32, f: impl FnOnce() -> CliResult<T>) -> CliResult<(T, u64)> {
    if load == "injector" {
        let n = NoisyNeighbor::start(NeighborConfig {
            cpu,
            ..NeighborConfig::default()
        })
        .map_err(|e| CliError::runtime(format!("cannot start the injector: {e}")))?;
        let r = f();
        let rep = n.stop();
        r.map(|t| (t, rep.bursts))
    } else {
        f().map(|t| (t, 0))
    }
}

fn timer_phase(a: &Args, dur: Nanos, stop: Arc<AtomicBool>) -> CliResult<Recorder> {
    let cfg = TimerConfig {
        cpus: vec![a.cpu],
        policy: Policy::Fifo {
            priority: a.priority,
        },
        interval: a.buffer_len,
        duration: dur,
        clock: TimerClock::Nanosleep,
        threshold: Nanos::ZERO,
        max_spikes: 100,
        lock_memory: true,
    };
    let out = probe::run(&cfg, stop, Progress::new(1));
    let r = out
        .per_cpu
        .into_iter()
        .next()
        .ok_or_else(|| CliError::runtime("the timer probe returned no data"))?;
    if !out.realtime {
        return Err(CliError::runtime(
            "the timer probe could not run at SCHED_FIFO",
        ));
    }
    Ok(r.latency)
}

struct Observed {
    seconds: f64,
    wakeups: u64,
    episodes: u64,
    buffers_lost: u64,
}

/// The real consumer: a device drains one buffer every t from a ring of
/// n; this thread wakes at each period boundary, spins c to "compute" the
/// next buffer and hands it over. Buffer j is due when the device reaches
/// it, (n−1)·t after the thread's nominal wake-up for it; finishing later is
/// an underrun, after which the thread resynchronizes to the next period
/// boundary (the buffers in between were played as silence).
fn consumer_phase(a: &Args, dur: Nanos, b: &Buffering, stop: Arc<AtomicBool>) -> Observed {
    let (cpu, prio) = (a.cpu, a.priority);
    let b = *b;
    std::thread::spawn(move || {
        set_thread_name("punctual-consumer");
        let _ = pin_to_cpu(cpu);
        let _guard = set_policy(Policy::Fifo { priority: prio });
        let t = b.buffer_len.0;
        let c = b.compute.at(b.buffer_len);
        let ahead = (b.buffers as u64 - 1) * t;
        let t0 = mono() + Nanos::from_ms(1);
        let end = t0 + dur;
        let mut j: u64 = 0;
        let mut o = Observed {
            seconds: 0.0,
            wakeups: 0,
            episodes: 0,
            buffers_lost: 0,
        };
        loop {
            let wake = Nanos(t0.0 + j * t);
            if wake >= end || stop.load(Ordering::Relaxed) {
                o.seconds = (wake.min(end) - t0).as_secs_f64();
                break;
            }
            sleep_until(wake);
            let now = mono();
            spin_until(now + c);
            let done = mono();
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
        o
    })
    .join()
    .unwrap_or(Observed {
        seconds: 0.0,
        wakeups: 0,
        episodes: 0,
        buffers_lost: 0,
    })
}
