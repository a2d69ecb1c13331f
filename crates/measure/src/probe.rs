//! The probes a [`Session`](crate::Session) runs, behind one trait so the
//! runner has no timer/noise branches: each says how it records its
//! settings, runs, and fills the record.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use punctual_live::noise::{self, NoiseConfig};
use punctual_live::timer::{self, Progress, TimerConfig};
use punctual_record::{Nanos, Record};
use punctual_trace::recorder::ProbeGaps;

/// A probe the session can run.
pub trait Probe: Send + Sync {
    /// The CPUs it measures (and the recorder traces).
    fn cpus(&self) -> &[u32];
    /// How long it was asked to run.
    fn duration(&self) -> Nanos;
    /// Bound of its spike log.
    fn max_spikes(&self) -> usize;
    /// What its spikes are, for the heading of their causes.
    fn spikes_are(&self) -> &'static str;
    /// Its name in a `cause` record's `config.probe`.
    fn name(&self) -> &'static str;
    /// Writes its settings in the record's `config` under `prefix`.
    fn set_config(&self, rec: &mut Record, prefix: &str);
    /// Whether it measures this machine in real time (a replay on a
    /// virtual clock runs at once, without a progress line).
    fn live(&self) -> bool {
        true
    }
    /// Why its last run could not be carried out, if so (the kernel's
    /// probes: a tracer that would not start); the session then fails
    /// instead of writing an empty record.
    fn failure(&self) -> Option<String> {
        None
    }
    /// Runs to the end (or until `stop`). With `keep_gaps` it also logs
    /// every stolen interval, for the recorder to split one by one.
    fn run(
        &self,
        stop: Arc<AtomicBool>,
        progress: Arc<Progress>,
        keep_gaps: bool,
    ) -> Box<dyn Outcome>;
}

/// The three [`Probe`] methods every probe answers from its settings in
/// `self.cfg` (a `TimerConfig` or a `NoiseConfig`, whose CPUs, duration
/// and spike bound are fields of the same names), written once for the
/// user-space and the kernel's probes alike.
macro_rules! config_accessors {
    () => {
        fn cpus(&self) -> &[u32] {
            &self.cfg.cpus
        }
        fn duration(&self) -> punctual_record::Nanos {
            self.cfg.duration
        }
        fn max_spikes(&self) -> usize {
            self.cfg.max_spikes
        }
    };
}
pub(crate) use config_accessors;

/// What a probe run produced, before it goes into a record.
pub trait Outcome: Send {
    /// Wall time the run took.
    fn elapsed(&self) -> Nanos;
    /// CLOCK_MONOTONIC of the run's time zero.
    fn origin(&self) -> Nanos;
    /// (CPU, thread id) of each measuring thread, for the flight recorder.
    fn tids(&self) -> Vec<(u32, i32)>;
    /// Each CPU's logged stolen intervals on the record's time zero.
    fn gaps(&self) -> Vec<ProbeGaps> {
        Vec::new()
    }
    /// Adds the series, spikes, stolen time and warnings to `rec`.
    fn fill(self: Box<Self>, rec: &mut Record, max_spikes: usize);
}

/// The periodic timer thread per CPU (`punctual timer`): wake-up latency.
pub struct Timer {
    pub cfg: TimerConfig,
    /// Wake-up latencies replayed on a virtual clock instead of measuring
    /// (every CPU replays the same feed).
    pub replay: Option<Vec<Nanos>>,
}

impl Probe for Timer {
    config_accessors!();
    fn spikes_are(&self) -> &'static str {
        "late wake-ups"
    }
    fn name(&self) -> &'static str {
        "timer"
    }
    fn set_config(&self, rec: &mut Record, prefix: &str) {
        crate::config::set_timer_config(rec, &self.cfg, prefix);
    }
    fn live(&self) -> bool {
        self.replay.is_none()
    }
    fn run(
        &self,
        stop: Arc<AtomicBool>,
        progress: Arc<Progress>,
        _keep_gaps: bool,
    ) -> Box<dyn Outcome> {
        match &self.replay {
            None => Box::new(timer::run(&self.cfg, stop, progress)),
            Some(feed) => {
                let feed = feed.clone();
                Box::new(timer::run_with(
                    &self.cfg,
                    Arc::new(punctual_live::setup::NoSetup),
                    move |_| Ok(timer::Replay::new(Nanos::ZERO, feed.clone().into_iter())),
                    stop,
                    progress,
                ))
            }
        }
    }
}

impl Outcome for timer::TimerOutcome {
    fn elapsed(&self) -> Nanos {
        self.elapsed
    }
    fn origin(&self) -> Nanos {
        self.origin
    }
    fn tids(&self) -> Vec<(u32, i32)> {
        self.per_cpu.iter().map(|r| (r.cpu, r.tid)).collect()
    }
    fn fill(self: Box<Self>, rec: &mut Record, max_spikes: usize) {
        (*self).fill(rec, max_spikes)
    }
}

/// Gaps kept per CPU for the flight recorder's interval-by-interval split
/// (16 bytes each: 16 MiB per CPU; this machine's idle noise fills it in
/// about half an hour, after which later gaps are counted, not split).
pub const GAP_LOG_CAP: usize = 1 << 20;

/// The busy-polling thread per CPU (`punctual noise`): stolen time.
pub struct Noise {
    pub cfg: NoiseConfig,
    /// Stolen intervals replayed on a virtual clock instead of measuring
    /// (every CPU replays the same feed).
    pub replay: Option<noise::Replay>,
}

impl Probe for Noise {
    config_accessors!();
    fn spikes_are(&self) -> &'static str {
        "stolen time"
    }
    fn name(&self) -> &'static str {
        "noise"
    }
    fn set_config(&self, rec: &mut Record, prefix: &str) {
        crate::config::set_noise_config(rec, &self.cfg, prefix);
    }
    fn live(&self) -> bool {
        self.replay.is_none()
    }
    fn run(
        &self,
        stop: Arc<AtomicBool>,
        progress: Arc<Progress>,
        keep_gaps: bool,
    ) -> Box<dyn Outcome> {
        match &self.replay {
            None => {
                let cap = if keep_gaps { GAP_LOG_CAP } else { 0 };
                Box::new(noise::run_logging_gaps(&self.cfg, cap, stop, progress))
            }
            Some(feed) => {
                let feed = feed.clone();
                Box::new(noise::run_with(
                    &self.cfg,
                    Arc::new(punctual_live::setup::NoSetup),
                    move || feed.clone(),
                    noise::Scale::IDENTITY,
                    stop,
                    progress,
                ))
            }
        }
    }
}

impl Outcome for noise::NoiseOutcome {
    fn elapsed(&self) -> Nanos {
        self.elapsed
    }
    fn origin(&self) -> Nanos {
        self.origin
    }
    fn tids(&self) -> Vec<(u32, i32)> {
        self.per_cpu.iter().map(|r| (r.cpu, r.tid)).collect()
    }
    /// Gap starts are relative to each thread's own start; the offset puts
    /// them on the record's time zero, as the flight recorder splits them.
    fn gaps(&self) -> Vec<ProbeGaps> {
        self.per_cpu
            .iter()
            .map(|r| ProbeGaps {
                cpu: r.cpu,
                gaps: r
                    .proc_
                    .gap_log()
                    .iter()
                    .map(|&(at, len)| (at + r.offset, len))
                    .collect(),
                dropped: r.proc_.gap_log_dropped(),
                loop_cost: r.stats.min_step,
            })
            .collect()
    }
    fn fill(self: Box<Self>, rec: &mut Record, max_spikes: usize) {
        (*self).fill(rec, max_spikes)
    }
}
