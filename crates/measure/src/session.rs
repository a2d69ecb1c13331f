//! The probe sequence, written once: record → config → loads → flight
//! recorder → probe → loads' figures → fill → attribution → finish.

use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};

use punctual_live::inject::{NeighborConfig, NeighborReport, NoisyNeighbor};
use punctual_live::timer::Progress;
use punctual_loads::{LoadSpec, RunningLoads};
use punctual_record::{Nanos, Platform, Record, Source, Warning};
use punctual_trace::recorder::{CauseSummary, Options};

use crate::attach;
use crate::probe::{Outcome, Probe};
use crate::MeasureError;

/// How a live probe is carried out while the caller waits: the command
/// line draws a progress line, a library caller may just wait.
pub trait Runner {
    /// Runs `work` (the probe) to its end on its own thread; `progress`
    /// holds the running maximum per CPU, `duration` what was asked.
    fn run(
        &self,
        label: &str,
        duration: Nanos,
        progress: Arc<Progress>,
        work: Box<dyn FnOnce() + Send>,
    ) -> Result<(), MeasureError>;

    /// Called once everything beside the probe runs (loads, recorder,
    /// injected neighbor), right before the probe starts; `tracing` says
    /// whether the flight recorder is on.
    fn starting(&self, _req: &ProbeRequest, _tracing: bool) {}
}

/// A [`Runner`] that waits without showing anything.
pub struct Quiet;

impl Runner for Quiet {
    fn run(
        &self,
        label: &str,
        _duration: Nanos,
        _progress: Arc<Progress>,
        work: Box<dyn FnOnce() + Send>,
    ) -> Result<(), MeasureError> {
        std::thread::Builder::new()
            .name("punctual-run".into())
            .stack_size(punctual_live::rt::RUN_THREAD_STACK_BYTES)
            .spawn(work)
            .map_err(|e| MeasureError::Runtime(format!("cannot start the run: {e}")))?
            .join()
            .map_err(|_| MeasureError::Runtime(format!("the {label} run panicked")))
    }
}

/// Whether and how the tracefs flight recorder runs beside the probe.
#[derive(Clone, Debug, Default)]
pub enum Tracing {
    #[default]
    Off,
    /// `--cause` on a probe verb: the recorder with its default options,
    /// spikes at or over `threshold` broken down (all when `None`), and
    /// what it keeps of a `--stop-at` event beyond attribution.
    Attach {
        threshold: Option<Nanos>,
        evidence: Evidence,
    },
    /// `punctual cause`: the recorder's own knobs, whether it runs at all
    /// (`--no-trace` runs the probe alone, to measure the recorder's
    /// overhead), and the injected noisy neighbor on the first CPU.
    Recorder {
        options: Options,
        trace: bool,
        threshold: Option<Nanos>,
        neighbor: bool,
    },
}

/// What the flight recorder keeps of a `--stop-at` event besides its
/// cause table (`--stop-raw`, `--stop-stacks`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Evidence {
    /// The rings' last second of pages, raw ([`Measured::raw`]).
    pub raw: bool,
    /// The kernel stack of what held a probe's CPU when it gave it up
    /// (the `stacktrace` trigger on every switch away from a task on the
    /// probed CPUs): `extra.stopped_at.stack`.
    pub stacks: bool,
}

/// The switches away from a task (not from idle) on the probed CPUs: the
/// stack then is where the task that held the CPU gave it up. Every one
/// of them, not only those into the probe: a task that delayed the probe
/// often hands the CPU to another before the probe gets it.
pub fn probe_stack_filter(cpus: &[u32]) -> String {
    let on = cpus
        .iter()
        .map(|c| format!("CPU == {c}"))
        .collect::<Vec<_>>()
        .join(" || ");
    format!("({on}) && prev_pid != 0")
}

/// One probe run: what to measure, under which load, traced or not.
pub struct ProbeRequest {
    /// The record's `kind` (`timer`, `noise`, `cause`).
    pub kind: &'static str,
    /// Name of the run on the progress line.
    pub label: &'static str,
    pub probe: Arc<dyn Probe>,
    /// `--load`: run for exactly the probe's time.
    pub loads: Vec<LoadSpec>,
    pub tracing: Tracing,
}

/// A finished measurement.
pub struct Measured {
    pub record: Record,
    /// What attribution found (also kept in the record's `extra["cause"]`).
    pub cause: Option<CauseSummary>,
    /// The injected neighbor's own account (also `extra["neighbor"]`).
    pub neighbor: Option<NeighborReport>,
    /// Wall time the probe ran.
    pub elapsed: Nanos,
    /// With [`Evidence::raw`] or [`Evidence::stacks`]: the recorder's
    /// last pages, raw, to write as a `trace.dat`.
    pub raw: Option<punctual_trace::tracedat::RawWindow>,
}

/// One probe run inside a record someone else finishes (`check`'s halves).
pub struct Half {
    pub cause: Option<CauseSummary>,
    pub neighbor: Option<NeighborReport>,
    pub elapsed: Nanos,
    pub raw: Option<punctual_trace::tracedat::RawWindow>,
}

/// A measured record with platform facts and their warnings.
pub fn new_record(kind: &str, platform: Platform, started_at: String) -> Record {
    let mut rec = Record::new(Source::Measured, kind, platform.clone());
    rec.started_at = started_at;
    rec.warnings = punctual_live::sysinfo::warnings(&platform);
    rec
}

/// Sets the run's length, and marks an interrupted record with the
/// warning that says how much of it there is.
pub fn finish_record(rec: &mut Record, elapsed: Nanos, asked: Nanos) {
    rec.duration_ns = elapsed;
    if rec.interrupted {
        rec.warnings.push(Warning::Interrupted {
            completed_ns: elapsed.0,
            asked_ns: asked.0,
        });
    }
}

/// Runs probes: shares the stop flag (Ctrl-C) and the way of waiting.
pub struct Session<'a> {
    stop: Arc<AtomicBool>,
    runner: &'a dyn Runner,
}

impl<'a> Session<'a> {
    pub fn new(stop: Arc<AtomicBool>, runner: &'a dyn Runner) -> Self {
        Session { stop, runner }
    }

    /// A new record of `kind` with this machine's platform facts, started
    /// at `started_at` (RFC 3339).
    pub fn new_record(&self, kind: &str, started_at: String) -> Record {
        new_record(kind, punctual_live::sysinfo::collect(), started_at)
    }

    /// The whole sequence for one probe: a new record with the platform,
    /// the probe's settings, the loads for the probe's time, then
    /// [`Session::measure`], then the run's length.
    pub fn run(&self, req: &ProbeRequest, started_at: String) -> Result<Measured, MeasureError> {
        let mut rec = self.new_record(req.kind, started_at);
        req.probe.set_config(&mut rec, "");
        let loads = crate::loads::start(&req.loads, req.probe.duration())?;
        let half = self.measure(&mut rec, req, loads)?;
        finish_record(&mut rec, half.elapsed, req.probe.duration());
        Ok(Measured {
            record: rec,
            cause: half.cause,
            neighbor: half.neighbor,
            elapsed: half.elapsed,
            raw: half.raw,
        })
    }

    /// Runs the probe into `rec` with the recorder `req` asks for: the
    /// recorder (and neighbor) start, the probe runs, `loads` (started by
    /// the caller for `req.loads`) are stopped and their figures kept, the
    /// probe fills the record, and the recorder's events are attributed to
    /// its spikes and stolen time.
    pub fn measure(
        &self,
        rec: &mut Record,
        req: &ProbeRequest,
        loads: Option<RunningLoads>,
    ) -> Result<Half, MeasureError> {
        let probe = &req.probe;
        let (options, threshold, neighbor) = match &req.tracing {
            Tracing::Off => (None, None, false),
            Tracing::Attach {
                threshold,
                evidence,
            } => {
                rec.set_config("cause", true);
                if let Some(t) = threshold {
                    rec.set_config("cause_threshold_ns", t.0);
                }
                if evidence.stacks {
                    rec.set_config("stop_stacks", true);
                }
                let options = Options {
                    keep_raw: (evidence.raw || evidence.stacks)
                        .then_some(punctual_trace::tracedat::STOP_WINDOW),
                    stack_filter: evidence.stacks.then(|| probe_stack_filter(probe.cpus())),
                    ..Options::default()
                };
                (Some(options), *threshold, false)
            }
            Tracing::Recorder {
                options,
                trace,
                threshold,
                neighbor,
            } => {
                rec.set_config("probe", probe.name());
                rec.set_config("buffer_kb", options.buffer_kb);
                rec.set_config("tracing", *trace);
                rec.set_config("neighbor", *neighbor);
                rec.set_config("wakeups", options.wakeups);
                if let Some(t) = threshold {
                    rec.set_config("cause_threshold_ns", t.0);
                }
                (trace.then(|| options.clone()), *threshold, *neighbor)
            }
        };
        let recorder = options.and_then(|o| attach::start_recorder(probe.cpus(), &o, rec));
        let neighbor = if neighbor {
            let cfg = NeighborConfig {
                cpu: probe.cpus()[0],
                ..Default::default()
            };
            Some(
                NoisyNeighbor::start(cfg)
                    .map_err(|e| MeasureError::Runtime(format!("--neighbor: {e}")))?,
            )
        } else {
            None
        };
        self.runner.starting(req, recorder.is_some());
        let out = self.run_probe(req.label, probe, recorder.is_some())?;
        if let Some(e) = probe.failure() {
            return Err(MeasureError::Runtime(e));
        }
        crate::loads::finish(loads, &req.loads, rec);
        let neighbor = neighbor.map(|n| n.stop());
        let elapsed = out.elapsed();
        let threads = attach::threads(&out.tids(), out.origin(), elapsed);
        let gaps = out.gaps();
        out.fill(rec, probe.max_spikes());
        let trace = recorder.and_then(|r| attach::stop_recorder(r, rec));
        let cause = trace
            .as_ref()
            .map(|t| attach::attribute(t, rec, &threads, threshold, &gaps));
        let raw = trace.and_then(|t| t.raw);
        if let Some(w) = &raw {
            attach::stop_stack(w, rec);
        }
        stop_causes(rec);
        if let Some(n) = &neighbor {
            rec.extra.insert(
                "neighbor".into(),
                serde_json::json!({
                    "name": "noisy-neighbor",
                    "tid": n.thread_id,
                    "bursts": n.bursts,
                    "spun_ns": n.spun.0,
                    "ran_for_ns": n.ran_for.0,
                }),
            );
        }
        Ok(Half {
            cause,
            neighbor,
            elapsed,
            raw,
        })
    }

    /// Runs the probe through the runner (a replay runs at once).
    fn run_probe(
        &self,
        label: &str,
        probe: &Arc<dyn Probe>,
        keep_gaps: bool,
    ) -> Result<Box<dyn Outcome>, MeasureError> {
        let progress = Progress::new(probe.cpus().len());
        if !probe.live() {
            return Ok(probe.run(Arc::clone(&self.stop), progress, keep_gaps));
        }
        let slot: Arc<Mutex<Option<Box<dyn Outcome>>>> = Arc::new(Mutex::new(None));
        let (s2, p2, stop, probe2) = (
            Arc::clone(&slot),
            Arc::clone(&progress),
            Arc::clone(&self.stop),
            Arc::clone(probe),
        );
        self.runner.run(
            label,
            probe.duration(),
            progress,
            Box::new(move || {
                let out = probe2.run(stop, p2, keep_gaps);
                *s2.lock().unwrap_or_else(|e| e.into_inner()) = Some(out);
            }),
        )?;
        let out = slot.lock().unwrap_or_else(|e| e.into_inner()).take();
        out.ok_or_else(|| MeasureError::Runtime(format!("the {label} run panicked")))
    }
}

/// With `--stop-at` and `--cause`: the causes the flight recorder found
/// for the event that stopped the run (its spike: the largest on its CPU,
/// so the spike log kept it), copied into `extra.stopped_at.causes`, so
/// the stop event carries its own explanation without a search of the
/// spike log.
fn stop_causes(rec: &mut Record) {
    let Some(e) = rec.extra.get("stopped_at") else {
        return;
    };
    let num = |k: &str| e.get(k).and_then(|v| v.as_u64());
    let (cpu, value) = (num("cpu"), num("value_ns"));
    let Some(sp) = rec
        .spikes
        .iter()
        .find(|s| Some(s.cpu as u64) == cpu && Some(s.value_ns.0) == value)
    else {
        return;
    };
    if sp.causes.is_empty() {
        return;
    }
    let causes = serde_json::to_value(&sp.causes).unwrap_or(serde_json::Value::Null);
    if let Some(e) = rec.extra.get_mut("stopped_at") {
        e["causes"] = causes;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::probe::Timer;
    use punctual_live::rt::Policy;
    use punctual_live::timer::{TimerClock, TimerConfig};
    use punctual_record::Metric;

    fn replayed(feed: Vec<Nanos>) -> ProbeRequest {
        ProbeRequest {
            kind: "timer",
            label: "timer",
            probe: Arc::new(Timer {
                cfg: TimerConfig {
                    cpus: vec![0],
                    policy: Policy::Other { nice: 0 },
                    interval: Nanos::from_us(100),
                    duration: Nanos::from_ms(10),
                    clock: TimerClock::Nanosleep,
                    threshold: Nanos::ZERO,
                    max_spikes: 4,
                    lock_memory: false,
                    stop_at: None,
                    samples: None,
                },
                replay: Some(feed),
            }),
            loads: Vec::new(),
            tracing: Tracing::Off,
        }
    }

    #[test]
    fn a_replayed_timer_fills_one_record_with_its_config() {
        let feed: Vec<Nanos> = (0..50).map(|i| Nanos::from_us(1 + i % 7)).collect();
        let session = Session::new(Arc::new(AtomicBool::new(false)), &Quiet);
        let m = session
            .run(&replayed(feed.clone()), "2026-01-01T00:00:00Z".into())
            .unwrap();
        let rec = &m.record;
        assert_eq!(rec.kind, "timer");
        assert_eq!(rec.started_at, "2026-01-01T00:00:00Z");
        assert_eq!(rec.duration_ns, m.elapsed);
        let lat: Vec<_> = rec
            .series
            .iter()
            .filter(|s| s.metric == Metric::Latency)
            .collect();
        assert_eq!(lat.len(), 1);
        assert_eq!(lat[0].count, feed.len() as u64);
        assert_eq!(lat[0].max, *feed.iter().max().unwrap());
        assert_eq!(rec.config["interval_ns"], 100_000);
        assert_eq!(rec.config["clock"], "nanosleep");
        assert!(!rec.config.contains_key("cause"));
        assert!(m.cause.is_none() && m.neighbor.is_none());
        assert!(rec.spikes.len() <= 4, "the spike log keeps max_spikes");
    }

    #[test]
    fn an_interrupted_run_says_how_much_of_it_there_is() {
        let mut rec = Record::new(Source::Measured, "timer", Platform::default());
        rec.interrupted = true;
        finish_record(&mut rec, Nanos::from_ms(3), Nanos::from_ms(10));
        assert_eq!(rec.duration_ns, Nanos::from_ms(3));
        assert_eq!(
            rec.warnings,
            vec![Warning::Interrupted {
                completed_ns: 3_000_000,
                asked_ns: 10_000_000
            }]
        );
    }

    #[test]
    fn the_stop_event_takes_the_causes_of_its_own_spike_only() {
        use punctual_record::{SourceShare, Spike};
        let share = |name: &str| SourceShare {
            kind: "irq".into(),
            name: name.into(),
            count: 1,
            total_ns: Nanos::from_us(40),
            max_ns: Nanos::from_us(40),
            share: 1.0,
        };
        let spike = |cpu, us, cause: &str| Spike {
            at_ns: Nanos::from_ms(1),
            cpu,
            task: None,
            metric: Metric::Latency,
            value_ns: Nanos::from_us(us),
            causes: vec![share(cause)],
            incomplete: false,
        };
        let mut rec = Record::new(Source::Measured, "timer", Platform::default());
        rec.spikes = vec![
            spike(0, 50, "eth0"),
            spike(1, 50, "nvme"),
            spike(1, 60, "ahci"),
        ];
        rec.extra.insert(
            "stopped_at".into(),
            serde_json::json!({"cpu": 1, "value_ns": 50_000}),
        );
        stop_causes(&mut rec);
        assert_eq!(rec.extra["stopped_at"]["causes"][0]["name"], "nvme");
        assert_eq!(
            rec.extra["stopped_at"]["causes"].as_array().map(Vec::len),
            Some(1)
        );

        let mut none = Record::new(Source::Measured, "timer", Platform::default());
        none.spikes = rec.spikes.clone();
        stop_causes(&mut none);
        assert!(
            !none.extra.contains_key("stopped_at"),
            "no stop event, nothing added"
        );
    }
}
