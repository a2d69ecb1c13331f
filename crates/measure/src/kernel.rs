//! The kernel's own probes behind the same [`Probe`] trait: `timer --probe
//! timerlat` and `noise --probe osnoise` run the kernel's tracers
//! ([`punctual_trace::ktracer`]) instead of punctual's threads, and fill
//! the same record shape, so every report, forecast and comparison reads
//! them as it reads a user-space run.
//!
//! timerlat measures each wake-up twice, as rtla shows it: in the timer's
//! interrupt handler (`cpuN.irq.latency`) and in the thread it wakes
//! (`cpuN.thread.latency`, the one a periodic task sees, and the one the
//! spike log follows). osnoise fills the noise record: every
//! `sample_threshold` interval is a gap, the per-period summaries give the
//! observed and stolen time, and the `*_noise` events name the sources.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use punctual_live::clock;
use punctual_live::noise::NoiseConfig;
use punctual_live::spikes::SpikeLog;
use punctual_live::timer::{Progress, TimerConfig};
use punctual_record::{
    Metric, Nanos, Record, Recorder, SourceShare, Stolen, Timeline, Warning, DEFAULT_BUCKET_NS,
};
use punctual_trace::ktracer::{self, Context, Interference, Line, Settings, Tracer};

use crate::probe::{config_accessors, Outcome, Probe};

/// How often the pipe is drained: often enough that a 1 ms timerlat
/// period (two lines a period per CPU) never fills the instance's buffer.
const POLL: Nanos = Nanos::from_ms(20);

/// Where the line's time stamp falls from the run's time zero: on the
/// caller's clock when the instance ran on CLOCK_MONOTONIC, else from the
/// first line seen.
struct Clock {
    origin: Nanos,
    mono: bool,
    first: Option<Nanos>,
}

impl Clock {
    fn at(&mut self, ts: Nanos) -> Nanos {
        if self.mono {
            return ts.saturating_sub(self.origin);
        }
        let first = *self.first.get_or_insert(ts);
        ts.saturating_sub(first)
    }
}

/// Runs `tracer` for `duration` (or until `stop`), handing every line to
/// `on_line`; returns the run's origin, elapsed time, whether it was
/// stopped early, and why it could not run or restore, if so.
fn drive(
    tracer: Tracer,
    cpus: &[u32],
    settings: &Settings,
    journal_dir: &std::path::Path,
    duration: Nanos,
    stop: &AtomicBool,
    mut on_line: impl FnMut(&mut Clock, Line),
) -> (Nanos, Nanos, bool, Result<(), String>) {
    // The reader formats the kernel's text on the CPU it runs on: off the
    // measured CPUs it is not itself the noise or the latency measured
    // (osnoise counted it as thread noise on CPU 1 of a 2-CPU guest).
    // With every CPU measured there is nowhere else to go.
    let elsewhere: Vec<u32> = punctual_live::sysinfo::online_cpus()
        .into_iter()
        .filter(|c| !cpus.contains(c))
        .collect();
    if !elsewhere.is_empty() {
        let _ = punctual_live::rt::pin_to_cpus(&elsewhere);
    }
    let t0 = clock::mono();
    let run = match ktracer::start(tracer, cpus, settings, journal_dir) {
        Ok(r) => r,
        Err(e) => return (t0, Nanos::ZERO, false, Err(e.to_string())),
    };
    let origin = clock::mono();
    let mut clk = Clock {
        origin,
        mono: run.mono,
        first: None,
    };
    let mut run = run;
    let mut interrupted = false;
    let mut failure = Ok(());
    loop {
        if let Err(e) = run.poll(|l| on_line(&mut clk, l)) {
            failure = Err(format!("reading the {} trace: {e}", tracer.name()));
            break;
        }
        let now = clock::mono();
        if now >= origin + duration {
            break;
        }
        if stop.load(Ordering::Relaxed) {
            interrupted = true;
            break;
        }
        clock::sleep_until((now + POLL).min(origin + duration));
    }
    let elapsed = clock::mono().saturating_sub(origin);
    let finished = run.finish(|l| on_line(&mut clk, l));
    let failure = failure.and(finished.map_err(|e| {
        format!(
            "the {} tracer's settings were not all restored: {e} (run 'punctual cause --cleanup')",
            tracer.name()
        )
    }));
    (origin, elapsed, interrupted, failure)
}

/// Why a kernel probe's last run could not be carried out (a tracer that
/// would not start, settings not all put back), set by the run and read
/// by the session after it: `Probe::run` takes `&self`, so it is behind
/// a lock.
#[derive(Default)]
struct Failure(Mutex<Option<String>>);

impl Failure {
    fn get(&self) -> Option<String> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
    fn set(&self, why: String) {
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = Some(why);
    }
}

/// The [`Outcome`] methods both kernel outcomes answer alike: their run's
/// time zero and length, and no thread ids to trace, because the
/// measuring threads are the kernel's, not punctual's.
macro_rules! kernel_outcome_accessors {
    () => {
        fn elapsed(&self) -> Nanos {
            self.elapsed
        }
        fn origin(&self) -> Nanos {
            self.origin
        }
        fn tids(&self) -> Vec<(u32, i32)> {
            Vec::new()
        }
    };
}

fn progress_max(progress: &Progress, slot: usize, v: Nanos) {
    if let Some(a) = progress.max_ns.get(slot) {
        a.fetch_max(v.0, Ordering::Relaxed);
    }
}

/// `timer --probe timerlat`: the kernel's timerlat tracer on the selected
/// CPUs at the requested interval.
pub struct KernelTimer {
    pub cfg: TimerConfig,
    /// The restore journal's directory.
    pub journal_dir: PathBuf,
    failure: Failure,
}

impl KernelTimer {
    pub fn new(cfg: TimerConfig, journal_dir: PathBuf) -> Self {
        KernelTimer {
            cfg,
            journal_dir,
            failure: Failure::default(),
        }
    }
}

/// One CPU's two timerlat series.
struct TimerlatCpu {
    cpu: u32,
    irq: Recorder,
    thread: Recorder,
    spikes: SpikeLog,
}

/// What a timerlat run produced.
pub struct TimerlatOutcome {
    per_cpu: Vec<TimerlatCpu>,
    lost: BTreeMap<u32, u64>,
    origin: Nanos,
    elapsed: Nanos,
    interrupted: bool,
}

impl Probe for KernelTimer {
    config_accessors!();
    fn spikes_are(&self) -> &'static str {
        "late wake-ups"
    }
    fn name(&self) -> &'static str {
        "timerlat"
    }
    fn failure(&self) -> Option<String> {
        self.failure.get()
    }
    fn set_config(&self, rec: &mut Record, prefix: &str) {
        crate::config::set_timer_config(rec, &self.cfg, prefix);
        rec.set_config(&format!("{prefix}probe"), "timerlat");
        rec.set_config(&format!("{prefix}clock"), "timerlat");
        // The kernel's timerlat/N threads keep their own policy.
        rec.set_config(&format!("{prefix}policy"), "fifo:95 (timerlat threads)");
    }
    fn run(
        &self,
        stop: Arc<AtomicBool>,
        progress: Arc<Progress>,
        _keep_gaps: bool,
    ) -> Box<dyn Outcome> {
        let bucket = Nanos(DEFAULT_BUCKET_NS);
        let mut per_cpu: Vec<TimerlatCpu> = self
            .cfg
            .cpus
            .iter()
            .map(|&cpu| TimerlatCpu {
                cpu,
                irq: Recorder::new(bucket).with_sample_period(self.cfg.interval),
                thread: Recorder::new(bucket).with_sample_period(self.cfg.interval),
                spikes: SpikeLog::new(Metric::Latency, self.cfg.threshold, self.cfg.max_spikes),
            })
            .collect();
        let mut lost: BTreeMap<u32, u64> = BTreeMap::new();
        let (origin, elapsed, interrupted, result) = drive(
            Tracer::Timerlat,
            &self.cfg.cpus,
            &Settings::Timerlat {
                period: self.cfg.interval,
            },
            &self.journal_dir,
            self.cfg.duration,
            &stop,
            |clk, line| match line {
                Line::Timerlat {
                    cpu,
                    at,
                    context,
                    latency,
                    ..
                } => {
                    let Some(slot) = per_cpu.iter().position(|c| c.cpu == cpu) else {
                        return;
                    };
                    let c = &mut per_cpu[slot];
                    match context {
                        Context::Irq => c.irq.record(latency),
                        Context::Thread => {
                            c.thread.record(latency);
                            c.spikes.offer(clk.at(at), cpu, latency);
                            progress_max(&progress, slot, latency);
                        }
                    }
                }
                Line::Lost { cpu, lost: n } => *lost.entry(cpu).or_default() += n,
                _ => {}
            },
        );
        if let Err(e) = result {
            self.failure.set(e);
        }
        Box::new(TimerlatOutcome {
            per_cpu,
            lost,
            origin,
            elapsed,
            interrupted,
        })
    }
}

impl Outcome for TimerlatOutcome {
    kernel_outcome_accessors!();
    fn fill(self: Box<Self>, rec: &mut Record, max_spikes: usize) {
        let mut logs = Vec::new();
        for c in self.per_cpu {
            for (ctx, r) in [("irq", &c.irq), ("thread", &c.thread)] {
                let mut s = r.to_series(&format!("cpu{}.{ctx}.latency", c.cpu), Metric::Latency);
                s.cpu = Some(c.cpu);
                rec.series.push(s);
            }
            logs.push(c.spikes);
        }
        let (spikes, dropped) = SpikeLog::merge_all(logs, max_spikes);
        rec.spikes.extend(spikes);
        rec.spikes.sort_by_key(|s| (s.at_ns, s.cpu));
        rec.spikes_dropped += dropped;
        for (cpu, lost) in self.lost {
            rec.warnings.push(Warning::TraceEventsLost { cpu, lost });
        }
        rec.interrupted |= self.interrupted;
        if rec.started_mono_ns.is_none() {
            rec.started_mono_ns = Some(self.origin);
        }
    }
}

/// `noise --probe osnoise`: the kernel's osnoise tracer on the selected
/// CPUs.
pub struct KernelNoise {
    pub cfg: NoiseConfig,
    pub journal_dir: PathBuf,
    failure: Failure,
}

impl KernelNoise {
    pub fn new(cfg: NoiseConfig, journal_dir: PathBuf) -> Self {
        KernelNoise {
            cfg,
            journal_dir,
            failure: Failure::default(),
        }
    }

    /// The osnoise period: one summary a second as rtla, but at least
    /// four in a run, so a short run still has several.
    pub fn period(&self) -> Nanos {
        let quarter = Nanos::from_ms((self.cfg.duration.0 / 4 / 1_000_000).max(1));
        Nanos::from_secs(1).min(quarter)
    }
}

/// One CPU's osnoise figures.
struct OsnoiseCpu {
    cpu: u32,
    gaps: Recorder,
    spikes: SpikeLog,
    timeline: Timeline,
    runtime: Nanos,
    noise: Nanos,
    max_single: Nanos,
    samples: u64,
    interference: Interference,
    /// (kind, name) → (count, total, max).
    sources: BTreeMap<(String, String), (u64, Nanos, Nanos)>,
}

/// What an osnoise run produced.
pub struct OsnoiseOutcome {
    per_cpu: Vec<OsnoiseCpu>,
    lost: BTreeMap<u32, u64>,
    threshold: Nanos,
    origin: Nanos,
    elapsed: Nanos,
    interrupted: bool,
}

impl Probe for KernelNoise {
    config_accessors!();
    fn spikes_are(&self) -> &'static str {
        "stolen time"
    }
    fn name(&self) -> &'static str {
        "osnoise"
    }
    fn failure(&self) -> Option<String> {
        self.failure.get()
    }
    fn set_config(&self, rec: &mut Record, prefix: &str) {
        crate::config::set_noise_config(rec, &self.cfg, prefix);
        rec.set_config(&format!("{prefix}probe"), "osnoise");
        rec.set_config(&format!("{prefix}osnoise_period_ns"), self.period());
        // The kernel's osnoise/N threads run at SCHED_OTHER.
        rec.set_config(&format!("{prefix}policy"), "other (osnoise threads)");
        rec.set_config(
            &format!("{prefix}threshold_ns"),
            ktracer::osnoise_threshold(),
        );
    }
    fn run(
        &self,
        stop: Arc<AtomicBool>,
        progress: Arc<Progress>,
        _keep_gaps: bool,
    ) -> Box<dyn Outcome> {
        let bucket = Nanos(DEFAULT_BUCKET_NS);
        let threshold = ktracer::osnoise_threshold();
        let mut per_cpu: Vec<OsnoiseCpu> = self
            .cfg
            .cpus
            .iter()
            .map(|&cpu| OsnoiseCpu {
                cpu,
                gaps: Recorder::new(bucket),
                spikes: SpikeLog::new(
                    Metric::Gap,
                    self.cfg.threshold.unwrap_or(Nanos::ZERO),
                    self.cfg.max_spikes,
                ),
                timeline: Timeline::new(Nanos::from_secs(1)),
                runtime: Nanos::ZERO,
                noise: Nanos::ZERO,
                max_single: Nanos::ZERO,
                samples: 0,
                interference: Interference::default(),
                sources: BTreeMap::new(),
            })
            .collect();
        let mut lost: BTreeMap<u32, u64> = BTreeMap::new();
        let period = self.period();
        let (origin, elapsed, interrupted, result) = drive(
            Tracer::Osnoise,
            &self.cfg.cpus,
            &Settings::Osnoise {
                period,
                runtime: period,
            },
            &self.journal_dir,
            self.cfg.duration,
            &stop,
            |clk, line| {
                let slot = match &line {
                    Line::Lost { cpu, lost: n } => {
                        *lost.entry(*cpu).or_default() += n;
                        return;
                    }
                    Line::Timerlat { .. } => return,
                    Line::OsnoiseSample { cpu, .. }
                    | Line::Threshold { cpu, .. }
                    | Line::Noise { cpu, .. } => per_cpu.iter().position(|c| c.cpu == *cpu),
                };
                let Some(slot) = slot else { return };
                let c = &mut per_cpu[slot];
                match line {
                    Line::OsnoiseSample {
                        runtime,
                        noise,
                        max_single,
                        interference,
                        ..
                    } => {
                        c.runtime += runtime;
                        c.noise += noise;
                        c.max_single = c.max_single.max(max_single);
                        c.samples += 1;
                        c.interference.add(&interference);
                    }
                    Line::Threshold { at, duration, .. } => {
                        let at = clk.at(at);
                        c.gaps.record(duration);
                        c.timeline.add(at, duration);
                        c.spikes.offer(at, c.cpu, duration);
                        progress_max(&progress, slot, duration);
                    }
                    Line::Noise {
                        kind,
                        name,
                        duration,
                        ..
                    } => {
                        let e = c.sources.entry((kind.name().to_string(), name)).or_insert((
                            0,
                            Nanos::ZERO,
                            Nanos::ZERO,
                        ));
                        e.0 += 1;
                        e.1 += duration;
                        e.2 = e.2.max(duration);
                    }
                    _ => {}
                }
            },
        );
        if let Err(e) = result {
            self.failure.set(e);
        }
        Box::new(OsnoiseOutcome {
            per_cpu,
            lost,
            threshold,
            origin,
            elapsed,
            interrupted,
        })
    }
}

impl Outcome for OsnoiseOutcome {
    kernel_outcome_accessors!();
    fn fill(self: Box<Self>, rec: &mut Record, max_spikes: usize) {
        let mut logs = Vec::new();
        let mut counters = serde_json::Map::new();
        for c in self.per_cpu {
            let mut s = c.gaps.to_series(&format!("cpu{}.gap", c.cpu), Metric::Gap);
            s.cpu = Some(c.cpu);
            rec.series.push(s);
            // The summaries are authoritative for the totals: the
            // per-interval events can be lost, the summary lines are few.
            let total = c.noise;
            let by_source = c
                .sources
                .into_iter()
                .map(|((kind, name), (count, sum, max))| SourceShare {
                    kind,
                    name,
                    count,
                    total_ns: sum,
                    max_ns: max,
                    share: if total.is_zero() {
                        0.0
                    } else {
                        sum.0 as f64 / total.0 as f64
                    },
                })
                .collect();
            rec.stolen.push(Stolen {
                cpu: c.cpu,
                task: None,
                observed_ns: c.runtime,
                total_ns: total,
                fraction: if c.runtime.is_zero() {
                    0.0
                } else {
                    total.0 as f64 / c.runtime.0 as f64
                },
                intervals: c.gaps.count(),
                max_ns: c.max_single.max(c.gaps.max()),
                threshold_ns: self.threshold,
                loop_cost_ns: None,
                timeline: c.timeline,
                by_source,
                kernel_view: None,
            });
            let i = c.interference;
            counters.insert(
                format!("cpu{}", c.cpu),
                serde_json::json!({
                    "samples": c.samples,
                    "max_single_noise_ns": c.max_single.0,
                    "hw": i.hw, "nmi": i.nmi, "irq": i.irq, "softirq": i.softirq, "thread": i.thread,
                }),
            );
            logs.push(c.spikes);
        }
        rec.extra
            .insert("osnoise".into(), serde_json::Value::Object(counters));
        let (spikes, dropped) = SpikeLog::merge_all(logs, max_spikes);
        rec.spikes.extend(spikes);
        rec.spikes.sort_by_key(|s| (s.at_ns, s.cpu));
        rec.spikes_dropped += dropped;
        for (cpu, lost) in self.lost {
            rec.warnings.push(Warning::TraceEventsLost { cpu, lost });
        }
        rec.interrupted |= self.interrupted;
        if rec.started_mono_ns.is_none() {
            rec.started_mono_ns = Some(self.origin);
        }
    }
}
