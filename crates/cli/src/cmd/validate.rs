//! `punctual validate`: does the forecast match reality on this machine?
//!
//! For each load (none, and the SCHED_FIFO-99 noisy neighbor spinning
//! 1 ms every 10.37 ms on the probed CPU) it first takes a `timer` record
//! with the real probe, forecasts the time to underrun of n buffers of
//! length t with compute c from it, and then runs an actual buffered
//! consumer under the same load for the same time and counts its real
//! underruns. The two phases run one after the other so they do not
//! disturb each other; the load is restarted for each.
//!
//! Each round also runs the `noise` probe (a busy loop that times its own
//! stolen intervals, in stretches RT throttling never stops) under the
//! same load, and the forecast takes its stall term S from those gaps
//! (docs/forecast.md §3.4): a timer record cannot tell the cost of waking
//! a sleeping thread from time stolen from a running one. The forecast
//! with S inferred from the timer's tail (§3.2), what `punctual forecast`
//! makes from the timer record alone, is printed beside it; across
//! validation runs I–N the noise-gap one was within 2× as often where
//! judged and closer on the idle machine (docs/forecast.md §8).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use punctual_analysis::buffer::{self, Buffering, Compute};
use punctual_analysis::forecast::{GapStalls, TailModel};
use punctual_analysis::verdict::human_secs;
use punctual_live::inject::{NeighborConfig, NoisyNeighbor};
use punctual_live::noise::{self as noise_probe, NoiseConfig, UNTHROTTLED_STRETCH};
use punctual_live::rt::Policy;
use punctual_live::timer::{self as probe, Progress, TimerClock, TimerConfig};
use punctual_measure::consumer;
use punctual_record::{Metric, Recorder};
use punctual_units::Nanos;
use serde::Serialize;
use serde_json::json;

use crate::error::{CliError, CliResult};
use crate::opts;

#[derive(clap::Args, Debug)]
#[command(
    after_help = "Examples:\n  punctual validate\n  punctual validate --cpu 1 --buffers 3 --buffer-len 1ms --compute 0.5ms --duration 30s\n  punctual validate --cpu 1 --load injector --records . --json v.json"
)]
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
    /// Polling time of the noise phase per load (default: --duration),
    /// split over the rounds like the others.
    #[arg(long, value_name = "D", value_parser = opts::positive_duration)]
    pub noise_duration: Option<Nanos>,
    /// Write the results as JSON (atomically).
    #[arg(long, value_name = "PATH")]
    pub json: Option<std::path::PathBuf>,
    /// Also keep each load's timer record here as `timer-<load>.json`
    /// (and its noise record as `noise-<load>.json`), so the forecast can
    /// be rerun from it with `punctual forecast` (`--stalls`).
    #[arg(long, value_name = "DIR")]
    pub records: Option<std::path::PathBuf>,
}

/// One load's forecast beside its observation.
#[derive(Clone, Debug, Serialize)]
pub struct Case {
    pub load: String,
    pub timer_samples: u64,
    pub timer_max_ns: Nanos,
    pub slack_ns: Nanos,
    /// Cota-Robles & Held's P(latency > slack) per wake-up.
    pub forecast_probability: f64,
    /// The queue model (docs/forecast.md §3): what `forecast` prints.
    pub forecast_mttf_seconds: Option<f64>,
    pub forecast_mttf_ci_low_seconds: Option<f64>,
    pub forecast_mttf_ci_high_seconds: Option<f64>,
    pub forecast_extrapolated: bool,
    /// Underruns the queue model predicts for the consumer phase's length.
    pub predicted_underruns: f64,
    /// Cota-Robles & Held's first-order figure, for comparison.
    pub seed_mttf_seconds: Option<f64>,
    pub predicted_underruns_seed: f64,
    pub ratio_seed: Option<f64>,
    /// Stalls per second the model reads off the record, and (c + mean
    /// stolen time) / t.
    pub stall_rate_per_s: f64,
    pub utilization_ratio: f64,
    pub consumer_seconds: f64,
    /// Median wall time of one compute (the calibrated work, c when
    /// nothing interrupts it).
    pub consumer_compute_median_ns: Nanos,
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
    /// The noise phase: running (observed − stolen) time polled and
    /// gaps counted.
    pub noise_running_seconds: f64,
    pub noise_gaps: u64,
    pub noise_gap_threshold_ns: Nanos,
    /// The queue model with S from the noise gaps (L still from the
    /// timer record).
    pub noise_stall_rate_per_s: f64,
    pub noise_stall_time_fraction: f64,
    pub noise_utilization_ratio: f64,
    pub noise_forecast_mttf_seconds: Option<f64>,
    pub predicted_underruns_noise: f64,
    pub ratio_noise: Option<f64>,
    /// As `within_factor_2`, for the noise-S forecast.
    pub within_factor_2_noise: Option<bool>,
    pub noise_forecast_mttf_ci_low_seconds: Option<f64>,
    pub noise_forecast_mttf_ci_high_seconds: Option<f64>,
    /// Which of the two is the forecast printed first: "noise gaps" (S
    /// from the noise phase, docs/forecast.md §3.4: the default since
    /// validation runs I–N) or "timer tail" (S inferred from the timer
    /// record, §3.2: only when no noise phase ran, e.g. interrupted).
    /// The unsuffixed fields are always the timer-tail forecast, the
    /// `noise` ones the noise-gap forecast.
    pub forecast_model: &'static str,
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
    if let Some(d) = &a.records {
        if !d.is_dir() {
            return Err(CliError::usage(format!(
                "--records {} is not a directory",
                d.display()
            )));
        }
    }
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
        let mut logs = Vec::new();
        let mut obs = consumer::Observed::default();
        let mut compute_medians = Vec::new();
        let mut computes: Option<Recorder> = None;
        let mut consumer_late: Option<Recorder> = None;
        let (mut bursts1, mut bursts2) = (0, 0);
        let noise_phase_len = Nanos(a.noise_duration.unwrap_or(a.duration).0 / a.rounds as u64);
        let mut np = NoisePhase::default();
        for round in 1..=a.rounds {
            if stop.load(Ordering::Relaxed) {
                break;
            }
            eprintln!(
                "validate: load {load}, round {round}/{}: timer probe {phase}, then the buffered consumer {phase}, then the noise probe {noise_phase_len}",
                a.rounds
            );
            let (tp, n1) = with_load(load, a.cpu, || timer_phase(&a, phase, Arc::clone(&stop)))?;
            logs.push((tp.spikes, tp.dropped));
            let r = tp.latency;
            match &mut rec {
                Some(all) => all.merge(&r),
                None => rec = Some(r),
            }
            let (o, n2) = with_load(load, a.cpu, || {
                Ok(consumer::run(
                    a.cpu,
                    a.priority,
                    phase,
                    &b,
                    Arc::clone(&stop),
                ))
            })?;
            obs.seconds += o.seconds;
            obs.wakeups += o.wakeups;
            obs.episodes += o.episodes;
            obs.buffers_lost += o.buffers_lost;
            compute_medians.push(o.compute_median_ns);
            if let Some(r) = o.computes {
                match &mut computes {
                    Some(all) => all.merge(&r),
                    None => computes = Some(r),
                }
            }
            if let Some(r) = o.lateness {
                match &mut consumer_late {
                    Some(all) => all.merge(&r),
                    None => consumer_late = Some(r),
                }
            }
            let (p, n3) = with_load(load, a.cpu, || {
                noise_phase(&a, noise_phase_len, np.threshold, Arc::clone(&stop))
            })?;
            np.add(p);
            bursts1 += n1;
            bursts2 += n2 + n3;
        }
        let Some(rec) = rec else { break };
        let mut series_rec = rec.to_series(&format!("cpu{}.latency", a.cpu), Metric::Latency);
        series_rec.sample_period_ns = Some(a.buffer_len);
        series_rec.cpu = Some(a.cpu);
        let (spikes, spikes_dropped) = merge_spike_logs(logs);
        if let Some(dir) = &a.records {
            let mut r = punctual_record::Record::new(
                punctual_record::Source::Measured,
                "timer",
                punctual_record::Platform::default(),
            );
            r.series.push(series_rec.clone());
            r.spikes = spikes.clone();
            r.spikes_dropped = spikes_dropped;
            let p = dir.join(format!("timer-{load}.json"));
            r.write(&p)
                .map_err(|e| CliError::runtime(format!("--records {}: {e}", p.display())))?;
            let p = dir.join(format!("noise-{load}.json"));
            np.record(a.cpu)
                .write(&p)
                .map_err(|e| CliError::runtime(format!("--records {}: {e}", p.display())))?;
            if let Some(c) = &computes {
                // The consumer's compute times (c plus whatever stalled
                // it), kept apart from the timer record so the stall
                // model can be checked against what a running thread lost.
                let mut r = punctual_record::Record::new(
                    punctual_record::Source::Measured,
                    "validate",
                    punctual_record::Platform::default(),
                );
                r.series
                    .push(c.to_series(&format!("cpu{}.consumer_compute", a.cpu), Metric::Response));
                if let Some(w) = &consumer_late {
                    r.series.push(
                        w.to_series(&format!("cpu{}.consumer_wakeup", a.cpu), Metric::Latency),
                    );
                }
                let p = dir.join(format!("consumer-{load}.json"));
                r.write(&p)
                    .map_err(|e| CliError::runtime(format!("--records {}: {e}", p.display())))?;
            }
        }
        compute_medians.sort_unstable();
        let compute_median_ns = Nanos(compute_medians[compute_medians.len() / 2]);
        let model = TailModel::new(&series_rec, Nanos::ZERO).map_err(CliError::runtime)?;
        let f = buffer::mttf(&model, &b).map_err(CliError::usage)?;
        let predicted = f.underrun_rate_per_s * obs.seconds;
        let ratio = (predicted > 0.0).then(|| obs.episodes as f64 / predicted);
        let predicted_seed = f.exceedance_rate_per_s * obs.seconds;
        let ratio_seed = (predicted_seed > 0.0).then(|| obs.episodes as f64 / predicted_seed);
        // The same forecast with S from the noise phase's gaps.
        let noise_rec = np.record(a.cpu);
        let mut noise_model = model.clone();
        noise_model.gap_stalls = noise_rec
            .series
            .first()
            .and_then(|s| GapStalls::from_record(&noise_rec, s));
        let fnz = buffer::mttf(&noise_model, &b).map_err(CliError::usage)?;
        let predicted_noise = fnz.underrun_rate_per_s * obs.seconds;
        let ratio_noise = (predicted_noise > 0.0).then(|| obs.episodes as f64 / predicted_noise);
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
            seed_mttf_seconds: f.seed_mttf_seconds,
            predicted_underruns_seed: predicted_seed,
            ratio_seed,
            stall_rate_per_s: f.queue.stalls.rate_per_s,
            utilization_ratio: f.queue.utilization_ratio,
            consumer_seconds: obs.seconds,
            consumer_compute_median_ns: compute_median_ns,
            consumer_wakeups: obs.wakeups,
            observed_underruns: obs.episodes,
            observed_buffers_lost: obs.buffers_lost,
            observed_mttf_seconds: (obs.episodes > 0).then(|| obs.seconds / obs.episodes as f64),
            within_factor_2: (obs.episodes >= 10)
                .then(|| ratio.is_some_and(|r| (0.5..=2.0).contains(&r))),
            ratio,
            injector_bursts: (load == "injector").then_some(bursts1 + bursts2),
            noise_running_seconds: np.observed.0.saturating_sub(np.stolen.0) as f64 / 1e9,
            noise_gaps: np.gaps.as_ref().map(|g| g.count()).unwrap_or(0),
            noise_gap_threshold_ns: np.threshold.unwrap_or_default(),
            noise_stall_rate_per_s: fnz.queue.stalls.rate_per_s,
            noise_stall_time_fraction: fnz.queue.stalls.time_fraction,
            noise_utilization_ratio: fnz.queue.utilization_ratio,
            noise_forecast_mttf_seconds: fnz.mttf_seconds,
            predicted_underruns_noise: predicted_noise,
            within_factor_2_noise: (obs.episodes >= 10)
                .then(|| ratio_noise.is_some_and(|r| (0.5..=2.0).contains(&r))),
            ratio_noise,
            noise_forecast_mttf_ci_low_seconds: fnz.mttf_ci_low_seconds,
            noise_forecast_mttf_ci_high_seconds: fnz.mttf_ci_high_seconds,
            forecast_model: if np.observed.is_zero() {
                "timer tail"
            } else {
                "noise gaps"
            },
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
        "  {:<9} {:>7} {:>8} {:>8} {:>7} {:>23} {:>9} {:>9} {:>8} {:>6} {:>6} {:>9} | {:>8} {:>7} {:>10} {:>10} {:>6} {:>9}",
        "load",
        "samples",
        "max",
        "stalls/s",
        "(c+S)/t",
        "MTTF queue (95% CI)",
        "MTTF seed",
        "predicted",
        "observed",
        "ratio",
        "seed",
        "within×2",
        "stalls/s",
        "(c+S)/t",
        "MTTF",
        "predicted",
        "ratio",
        "within×2"
    );
    for c in &cases {
        // The default forecast first, the other after the bar.
        let noise = View {
            stalls: c.noise_stall_rate_per_s,
            util: c.noise_utilization_ratio,
            mttf: c.noise_forecast_mttf_seconds,
            ci: (
                c.noise_forecast_mttf_ci_low_seconds,
                c.noise_forecast_mttf_ci_high_seconds,
            ),
            predicted: c.predicted_underruns_noise,
            ratio: c.ratio_noise,
            within: c.within_factor_2_noise,
        };
        let timer = View {
            stalls: c.stall_rate_per_s,
            util: c.utilization_ratio,
            mttf: c.forecast_mttf_seconds,
            ci: (
                c.forecast_mttf_ci_low_seconds,
                c.forecast_mttf_ci_high_seconds,
            ),
            predicted: c.predicted_underruns,
            ratio: c.ratio,
            within: c.within_factor_2,
        };
        let (first, other) = if c.forecast_model == "noise gaps" {
            (noise, timer)
        } else {
            (timer, noise)
        };
        let ci = match first.ci {
            (Some(l), Some(h)) => {
                format!("{} ({}–{})", mttf(first.mttf), human_secs(l), human_secs(h))
            }
            _ => mttf(first.mttf),
        };
        let r = |x: Option<f64>| x.map(|r| format!("{r:.2}")).unwrap_or_else(|| "—".into());
        println!(
            "  {:<9} {:>7} {:>8} {:>8.1} {:>7.3} {:>23} {:>9} {:>9.1} {:>8} {:>6} {:>6} {:>9} | {:>8.1} {:>7.3} {:>10} {:>10.1} {:>6} {:>9}",
            c.load,
            c.timer_samples,
            c.timer_max_ns.to_string(),
            first.stalls,
            first.util,
            ci,
            mttf(c.seed_mttf_seconds),
            first.predicted,
            c.observed_underruns,
            r(first.ratio),
            r(c.ratio_seed),
            within(first.within),
            other.stalls,
            other.util,
            mttf(other.mttf),
            other.predicted,
            r(other.ratio),
            within(other.within),
        );
    }
    let (first, other) = if cases.iter().all(|c| c.forecast_model == "noise gaps") {
        (
            "S from the noise phase's gaps, time stolen from a running thread (docs/forecast.md §3.4)",
            "S inferred from the timer record's tail (§3.2), what `punctual forecast` gives from the timer record alone",
        )
    } else {
        (
            "S inferred from the timer record's tail (§3.2; no noise phase ran)",
            "S from the noise phase's gaps (§3.4)",
        )
    };
    println!(
        "  MTTF queue: the forecast (backlog carried across periods, stalls during the compute; \
         docs/forecast.md §3), L from the timer record and {first}; MTTF seed: s / P(latency > \
         slack) (first order); predicted: queue rate × consumer time; observed: wake-ups whose \
         buffer missed its deadline; ratio = observed / predicted (queue, seed); within×2 judges \
         the queue forecast where ≥ 10 were observed; stalls/s: stalls per second of running \
         time; after |: the queue forecast with {other}"
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

/// One forecast's columns.
struct View {
    stalls: f64,
    util: f64,
    mttf: Option<f64>,
    ci: (Option<f64>, Option<f64>),
    predicted: f64,
    ratio: Option<f64>,
    within: Option<bool>,
}

fn within(w: Option<bool>) -> &'static str {
    match w {
        Some(true) => "yes",
        Some(false) => "NO",
        None => "(<10 obs)",
    }
}

/// Longest stretch the noise probe polls at once, and the rest after it:
/// a SCHED_FIFO busy loop that ran longer would be stopped by the
/// kernel's RT throttling (950 ms of every 1 s by default) for ~50 ms,
/// a gap no consumer using half the CPU ever sees. 450 ms on, 300 ms
/// off keeps any 1 s window under 750 ms of polling, plus ~100 ms of
/// the injector.
const NOISE_CHUNK: Nanos = UNTHROTTLED_STRETCH.0;
const NOISE_REST: Nanos = UNTHROTTLED_STRETCH.1;

/// Gaps and times of the noise phases so far.
#[derive(Default)]
struct NoisePhase {
    gaps: Option<Recorder>,
    observed: Nanos,
    stolen: Nanos,
    /// The first chunk's automatic threshold, kept for every later chunk
    /// so the merged histogram has one threshold.
    threshold: Option<Nanos>,
}

impl NoisePhase {
    fn add(&mut self, o: NoisePhase) {
        if let Some(g) = o.gaps {
            match &mut self.gaps {
                Some(all) => all.merge(&g),
                None => self.gaps = Some(g),
            }
        }
        self.observed += o.observed;
        self.stolen += o.stolen;
        self.threshold = self.threshold.or(o.threshold);
    }

    /// As a noise record: one gap series and its stolen-time totals.
    fn record(&self, cpu: u32) -> punctual_record::Record {
        let mut r = punctual_record::Record::new(
            punctual_record::Source::Measured,
            "noise",
            punctual_record::Platform::default(),
        );
        let gaps = self
            .gaps
            .clone()
            .unwrap_or_else(|| Recorder::new(Nanos(punctual_record::DEFAULT_BUCKET_NS)));
        let mut s = gaps.to_series(&format!("cpu{cpu}.gap"), Metric::Gap);
        s.cpu = Some(cpu);
        r.stolen.push(punctual_record::Stolen {
            cpu,
            task: None,
            observed_ns: self.observed,
            total_ns: self.stolen,
            fraction: if self.observed.is_zero() {
                0.0
            } else {
                self.stolen.0 as f64 / self.observed.0 as f64
            },
            intervals: s.count,
            max_ns: s.max,
            threshold_ns: self.threshold.unwrap_or_default(),
            loop_cost_ns: None,
            timeline: Default::default(),
            by_source: Vec::new(),
            kernel_view: None,
        });
        r.series.push(s);
        r.duration_ns = self.observed;
        r
    }
}

/// One noise phase: the busy loop on the CPU at the consumer's priority,
/// in chunks of [`NOISE_CHUNK`] with [`NOISE_REST`] between them.
fn noise_phase(
    a: &Args,
    dur: Nanos,
    threshold: Option<Nanos>,
    stop: Arc<AtomicBool>,
) -> CliResult<NoisePhase> {
    let mut acc = NoisePhase {
        threshold,
        ..Default::default()
    };
    let mut left = dur;
    while !left.is_zero() && !stop.load(Ordering::Relaxed) {
        let chunk = Nanos(left.0.min(NOISE_CHUNK.0));
        let cfg = NoiseConfig {
            cpus: vec![a.cpu],
            policy: Policy::Fifo {
                priority: a.priority,
            },
            duration: chunk,
            threshold: acc.threshold,
            max_spikes: 100,
            lock_memory: true,
            stretch: None,
            stop_at: None,
            samples: None,
        };
        let out = noise_probe::run(&cfg, Arc::clone(&stop), Progress::new(1));
        if !out.realtime {
            return Err(CliError::runtime(
                "the noise probe could not run at SCHED_FIFO",
            ));
        }
        let mut rec = punctual_record::Record::new(
            punctual_record::Source::Measured,
            "noise",
            punctual_record::Platform::default(),
        );
        out.fill(&mut rec, 100);
        let (Some(s), Some(st)) = (rec.series.first(), rec.stolen.first()) else {
            return Err(CliError::runtime("the noise probe returned no data"));
        };
        let g = Recorder::from_series(s).map_err(CliError::runtime)?;
        acc.add(NoisePhase {
            gaps: Some(g),
            observed: st.observed_ns,
            stolen: st.total_ns,
            threshold: Some(st.threshold_ns),
        });
        left = Nanos(left.0 - chunk.0);
        if !left.is_zero() {
            std::thread::sleep(NOISE_REST.to_std());
        }
    }
    Ok(acc)
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

/// One timer phase: its latencies and its spike log (every wake-up is a
/// candidate, and the log is sized for the largest fifth of them, which
/// holds every stall the queue model reads; times on the monotonic
/// clock, so the phases of several rounds stay apart).
struct TimerPhase {
    latency: Recorder,
    spikes: Vec<punctual_record::Spike>,
    dropped: u64,
}

fn timer_phase(a: &Args, dur: Nanos, stop: Arc<AtomicBool>) -> CliResult<TimerPhase> {
    let max_spikes = ((dur.0 / a.buffer_len.0.max(1)) / 5).clamp(100, 50_000) as usize;
    let cfg = TimerConfig {
        cpus: vec![a.cpu],
        policy: Policy::Fifo {
            priority: a.priority,
        },
        interval: a.buffer_len,
        duration: dur,
        clock: TimerClock::Nanosleep,
        threshold: Nanos::ZERO,
        max_spikes,
        lock_memory: true,
        stop_at: None,
        samples: None,
    };
    let out = probe::run(&cfg, stop, Progress::new(1));
    let origin = out.origin;
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
    let dropped = r.spikes.dropped();
    let spikes = r.spikes.shifted(origin + r.offset).into_spikes();
    Ok(TimerPhase {
        latency: r.latency,
        spikes,
        dropped,
    })
}

/// The rounds' spike logs as one: each round kept only its largest
/// wake-ups, so only latencies above every round's smallest kept one
/// are complete in all; the rest are dropped (and counted), so the
/// merged log keeps the record format's promise that everything above
/// its smallest entry is there. Times start at the first round's.
fn merge_spike_logs(
    phases: Vec<(Vec<punctual_record::Spike>, u64)>,
) -> (Vec<punctual_record::Spike>, u64) {
    let level = phases
        .iter()
        .filter(|(_, d)| *d > 0)
        .filter_map(|(s, _)| s.iter().map(|x| x.value_ns).min())
        .max();
    let mut dropped: u64 = phases.iter().map(|(_, d)| d).sum();
    let mut all: Vec<punctual_record::Spike> = Vec::new();
    for (s, _) in phases {
        for x in s {
            if level.is_some_and(|l| x.value_ns < l) {
                dropped += 1;
            } else {
                all.push(x);
            }
        }
    }
    all.sort_by_key(|x| x.at_ns);
    let t0 = all.first().map(|x| x.at_ns).unwrap_or_default();
    for x in &mut all {
        x.at_ns -= t0;
    }
    (all, dropped)
}
