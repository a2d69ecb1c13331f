//! `punctual validate`'s measurement: for each load, alternating rounds of
//! the timer probe, the real buffered consumer ([`crate::consumer`]) and
//! the noise probe, then the forecast made from the timer record (and
//! from the noise probe's gaps) beside the underruns the consumer
//! counted. The verb checks its flags, holds the C-states and prints the
//! [`Case`]s this returns.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use punctual_analysis::buffer::{self, Buffering};
use punctual_analysis::forecast::{GapStalls, TailModel};
use punctual_live::cstate::CStateHold;
use punctual_live::inject::{NeighborConfig, NoisyNeighbor};
use punctual_live::noise::{self as noise_probe, NoiseConfig, UNTHROTTLED_STRETCH};
use punctual_live::rt::Policy;
use punctual_live::timer::{self as probe, Progress, TimerClock, TimerConfig};
use punctual_record::{Metric, Recorder};
use punctual_report::text::validate::Case;
use punctual_units::Nanos;

use crate::consumer;
use crate::MeasureError;

/// The settings of a validation, checked by the caller.
#[derive(Clone, Debug)]
pub struct Plan {
    /// CPU on which the probe, the consumer and the load run.
    pub cpu: u32,
    /// SCHED_FIFO priority of the probes and the consumer (the injector
    /// runs at 99).
    pub priority: u8,
    /// The buffer length t: the timer probe wakes once per t, as the
    /// consumer does.
    pub buffer_len: Nanos,
    /// Length of each phase per load, split over the rounds.
    pub duration: Nanos,
    /// Timer, consumer and noise phases alternate this many times per load.
    pub rounds: u32,
    /// Polling time of the noise phase per load (default: `duration`).
    pub noise_duration: Option<Nanos>,
    /// The injector's period and spin, at SCHED_FIFO 99.
    pub injector_period: Nanos,
    pub injector_spin: Nanos,
    /// Where each load's timer, noise and consumer records are kept.
    pub records: Option<std::path::PathBuf>,
}

/// Measures each of `loads` in turn (`none`, `injector`) until `stop`;
/// the cases of the loads that finished a round. `note` receives a line
/// at the start of each round.
pub fn run(
    a: &Plan,
    b: &Buffering,
    loads: &[&str],
    stop: &Arc<AtomicBool>,
    held: &CStateHold,
    note: &dyn Fn(&str),
) -> Result<Vec<Case>, MeasureError> {
    let mut cases = Vec::new();
    for load in loads {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        let Some(case) = measure_load(a, b, load, stop, held, note)? else {
            break;
        };
        cases.push(case);
    }
    Ok(cases)
}

/// One load's alternating rounds of timer, consumer and noise phases,
/// its records kept under `--records`, and its forecast beside what the
/// consumer saw; None when interrupted before a round finished.
fn measure_load(
    a: &Plan,
    b: &Buffering,
    load: &str,
    stop: &Arc<AtomicBool>,
    held: &CStateHold,
    note: &dyn Fn(&str),
) -> Result<Option<Case>, MeasureError> {
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
        note(&format!(
            "validate: load {load}, round {round}/{}: timer probe {phase}, then the buffered consumer {phase}, then the noise probe {noise_phase_len}",
            a.rounds
        ));
        let (tp, n1) = with_load(a, load, || timer_phase(a, phase, Arc::clone(stop)))?;
        logs.push((tp.spikes, tp.dropped));
        let r = tp.latency;
        match &mut rec {
            Some(all) => all.merge(&r),
            None => rec = Some(r),
        }
        let (o, n2) = with_load(a, load, || {
            Ok(consumer::run(a.cpu, a.priority, phase, b, Arc::clone(stop)))
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
        let (p, n3) = with_load(a, load, || {
            noise_phase(a, noise_phase_len, np.threshold, Arc::clone(stop))
        })?;
        np.add(p);
        bursts1 += n1;
        bursts2 += n2 + n3;
    }
    let Some(rec) = rec else {
        return Ok(None);
    };
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
        held.note(&mut r);
        let p = dir.join(format!("timer-{load}.json"));
        r.write(&p)
            .map_err(|e| MeasureError::Runtime(format!("--records {}: {e}", p.display())))?;
        let p = dir.join(format!("noise-{load}.json"));
        let mut nr = np.record(a.cpu);
        held.note(&mut nr);
        nr.write(&p)
            .map_err(|e| MeasureError::Runtime(format!("--records {}: {e}", p.display())))?;
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
                r.series
                    .push(w.to_series(&format!("cpu{}.consumer_wakeup", a.cpu), Metric::Latency));
            }
            let p = dir.join(format!("consumer-{load}.json"));
            r.write(&p)
                .map_err(|e| MeasureError::Runtime(format!("--records {}: {e}", p.display())))?;
        }
    }
    compute_medians.sort_unstable();
    let compute_median_ns = Nanos(compute_medians[compute_medians.len() / 2]);
    let model = TailModel::new(&series_rec, Nanos::ZERO).map_err(MeasureError::Runtime)?;
    let f = buffer::mttf(&model, b).map_err(MeasureError::Usage)?;
    let predicted = f.underrun_rate_per_s * obs.seconds;
    let ratio = (predicted > 0.0).then(|| obs.episodes as f64 / predicted);
    let predicted_first_order = f.exceedance_rate_per_s * obs.seconds;
    let ratio_first_order =
        (predicted_first_order > 0.0).then(|| obs.episodes as f64 / predicted_first_order);
    // The same forecast with S from the noise phase's gaps.
    let noise_rec = np.record(a.cpu);
    let mut noise_model = model.clone();
    noise_model.gap_stalls = noise_rec
        .series
        .first()
        .and_then(|s| GapStalls::from_record(&noise_rec, s));
    let fnz = buffer::mttf(&noise_model, b).map_err(MeasureError::Usage)?;
    let predicted_noise = fnz.underrun_rate_per_s * obs.seconds;
    let ratio_noise = (predicted_noise > 0.0).then(|| obs.episodes as f64 / predicted_noise);
    Ok(Some(Case {
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
        first_order_mttf_seconds: f.first_order_mttf_seconds,
        predicted_underruns_first_order: predicted_first_order,
        ratio_first_order,
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
    }))
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
    a: &Plan,
    dur: Nanos,
    threshold: Option<Nanos>,
    stop: Arc<AtomicBool>,
) -> Result<NoisePhase, MeasureError> {
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
            return Err(MeasureError::Runtime(
                "the noise probe could not run at SCHED_FIFO".into(),
            ));
        }
        let mut rec = punctual_record::Record::new(
            punctual_record::Source::Measured,
            "noise",
            punctual_record::Platform::default(),
        );
        out.fill(&mut rec, 100);
        let (Some(s), Some(st)) = (rec.series.first(), rec.stolen.first()) else {
            return Err(MeasureError::Runtime(
                "the noise probe returned no data".into(),
            ));
        };
        let g = Recorder::from_series(s).map_err(MeasureError::Runtime)?;
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

/// Runs `f` with the load running (and stopped after, on every path).
fn with_load<T>(
    a: &Plan,
    load: &str,
    f: impl FnOnce() -> Result<T, MeasureError>,
) -> Result<(T, u64), MeasureError> {
    if load == "injector" {
        let n = NoisyNeighbor::start(NeighborConfig {
            cpu: a.cpu,
            period: a.injector_period,
            spin: a.injector_spin,
            ..NeighborConfig::default()
        })
        .map_err(|e| MeasureError::Runtime(format!("cannot start the injector: {e}")))?;
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

fn timer_phase(a: &Plan, dur: Nanos, stop: Arc<AtomicBool>) -> Result<TimerPhase, MeasureError> {
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
        .ok_or_else(|| MeasureError::Runtime("the timer probe returned no data".into()))?;
    if !out.realtime {
        return Err(MeasureError::Runtime(
            "the timer probe could not run at SCHED_FIFO".into(),
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
