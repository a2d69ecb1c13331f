//! `punctual check`'s run below the command line: one record per round,
//! the timer probe for the first half and the noise probe for the second
//! under one set of loads, the rounds of `--until-decided` re-forecast
//! after each until every verdict is decided or `--max` is reached, the
//! rounds laid end to end, and the verdicts (and a comparison with a
//! saved baseline) kept in the record. Each step is told to the caller as
//! a `punctual_report::text::check::Progress`, which the verb prints.
//!
//! Why the time is split in two halves rather than the probes run side by
//! side on different CPUs: each probe disturbs the other on a shared CPU
//! (a busy loop at SCHED_FIFO delays or is charged with the timer thread's
//! wake-ups), and running them on disjoint CPUs would measure each CPU with
//! only one probe, which on a 2-CPU machine means every CPU misses half the
//! picture. Sequential halves measure every CPU with both probes, each
//! undisturbed, at the cost of not seeing them at the same moment.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use punctual_analysis::check::{
    against_baseline, timer_windows_of, unrepresentative, verdicts_of, AgainstBaseline, TimerWindow,
};
use punctual_analysis::profiles::Profile;
use punctual_analysis::Verdict;
use punctual_live::cstate::CStateRequest;
use punctual_live::noise::{NoiseConfig, Replay, UNTHROTTLED_STRETCH};
use punctual_live::rt::Policy;
use punctual_live::timer::{TimerClock, TimerConfig};
use punctual_loads::LoadSpec;
use punctual_record::{Nanos, Platform, Record, VerdictState, Warning};
use punctual_report::text::cause;
use punctual_report::text::check::Progress;

use crate::{MeasureError, Noise, ProbeRequest, Session, Timer, Tracing};

/// --max when --until-decided is given without it.
pub const DEFAULT_MAX: Nanos = Nanos::from_secs(30 * 60);

/// What a check measures, every round alike.
pub struct CheckRequest {
    /// Both halves together, one round.
    pub duration: Nanos,
    /// Bound of each half's spike log (`DEFAULT_SPIKE_CAPACITY` unless
    /// asked): what `advise` can edit.
    pub max_spikes: usize,
    pub cpus: Vec<u32>,
    /// `--load` as given, for its heading, and parsed.
    pub load: Option<String>,
    pub load_specs: Vec<LoadSpec>,
    /// Wake-up latencies replayed instead of the timer half: the file's
    /// name (for the record) and the feed.
    pub timer_replay: Option<(String, Vec<Nanos>)>,
    /// Stolen intervals replayed instead of the noise half.
    pub noise_replay: Option<(String, Replay)>,
    pub tracing: Tracing,
    /// `--until-decided`: the most time to measure in all.
    pub until_decided: Option<Nanos>,
    pub profiles: Vec<Profile>,
    /// The saved check to compare with (`--baseline`): its path and record.
    pub baseline: Option<(String, Record)>,
    /// The C-states held through every round (`None`: a replayed feed,
    /// which no idle state delays).
    pub c_states: Option<CStateRequest>,
}

impl CheckRequest {
    fn replaying(&self) -> bool {
        self.timer_replay.is_some() || self.noise_replay.is_some()
    }
}

/// A finished check: the record (rounds laid end to end, the timer
/// windows, verdicts and baseline in it), and what the verb prints after
/// the run.
pub struct Checked {
    pub record: Record,
    /// Each round's causes, rendered (`punctual_report::text::cause`).
    pub causes: String,
    pub verdicts: Vec<Verdict>,
    /// What the verdicts' stall term came from.
    pub verdicts_from: &'static str,
    /// Why the verdicts do not stand for a real-time consumer, if so.
    pub unrepresentative: Option<String>,
    pub baseline: Option<AgainstBaseline>,
}

/// Whether this process may give a thread SCHED_FIFO 95 (tried on a
/// short-lived thread, whose old policy the guard puts back), so the
/// headings can say what the probes will really run at.
fn realtime_allowed() -> bool {
    std::thread::spawn(|| punctual_live::rt::set_policy(Policy::Fifo { priority: 95 }).is_ok())
        .join()
        .unwrap_or(false)
}

/// One round of a check: the timer half, then (unless interrupted) the
/// noise half, into a record of its own.
struct Round {
    rec: Record,
    timer_elapsed: Nanos,
    elapsed: Nanos,
    causes: String,
}

/// The rounds' whole time and their timer halves' time.
fn totals(rounds: &[Round]) -> (Nanos, Nanos) {
    (
        rounds.iter().map(|x| x.elapsed).sum(),
        rounds.iter().map(|x| x.timer_elapsed).sum(),
    )
}

/// The run of one check: its request, session, and where it tells its
/// progress.
struct Run<'a> {
    req: &'a CheckRequest,
    session: &'a Session<'a>,
    stop: &'a AtomicBool,
    policy: &'static str,
    show: &'a dyn Fn(&Progress),
    started_at: &'a dyn Fn() -> String,
}

impl Run<'_> {
    /// Measures one round; `quiet` leaves out the section headings and
    /// tables (later rounds of --until-decided, shown together at the end).
    fn round(&self, quiet: bool) -> Result<Round, MeasureError> {
        let req = self.req;
        let show = |p: Progress| {
            if !quiet {
                (self.show)(&p)
            }
        };
        let half = req.duration / 2;
        let mut rec = self.session.new_record("check", (self.started_at)());
        let timer = ProbeRequest {
            kind: "check",
            label: "timer",
            probe: Arc::new(Timer {
                cfg: TimerConfig {
                    cpus: req.cpus.clone(),
                    policy: Policy::Fifo { priority: 95 },
                    interval: Nanos::from_ms(1),
                    duration: half,
                    clock: TimerClock::Nanosleep,
                    threshold: Nanos::ZERO,
                    max_spikes: req.max_spikes,
                    lock_memory: true,
                    stop_at: None,
                    samples: None,
                },
                replay: req.timer_replay.as_ref().map(|r| r.1.clone()),
            }),
            loads: Vec::new(),
            tracing: req.tracing.clone(),
        };
        let ncfg = NoiseConfig {
            cpus: req.cpus.clone(),
            policy: Policy::Fifo { priority: 95 },
            duration: req.duration - half,
            threshold: None,
            max_spikes: req.max_spikes,
            lock_memory: true,
            // In stretches, so RT throttling never stops the loop: its gaps
            // then hold only time stolen from a running thread, which the
            // verdicts charge to each compute.
            stretch: Some(UNTHROTTLED_STRETCH),
            stop_at: None,
            samples: None,
        };
        let noise_duration = ncfg.duration;
        let mut noise = ProbeRequest {
            kind: "check",
            label: "noise",
            probe: Arc::new(Noise {
                cfg: ncfg,
                replay: req.noise_replay.as_ref().map(|r| r.1.clone()),
            }),
            loads: Vec::new(),
            tracing: req.tracing.clone(),
        };
        timer.probe.set_config(&mut rec, "timer.");
        noise.probe.set_config(&mut rec, "noise.");
        rec.set_config(
            "split",
            "sequential: timer for the first half, noise for the second",
        );
        if let Some((p, _)) = &req.timer_replay {
            rec.set_config("timer.replay", p.as_str());
        }
        if let Some((p, _)) = &req.noise_replay {
            rec.set_config("noise.replay", p.as_str());
        }
        // Through both halves; on an error they stop when dropped.
        let loads = crate::loads::start(&req.load_specs, req.duration)?;
        if let Some(l) = &req.load {
            show(Progress::UnderLoad {
                spec: l,
                duration: req.duration,
            });
        }
        let policy = self.policy;
        show(Progress::TimerHalf { policy, half });
        let t = self.session.measure(&mut rec, &timer, None)?;
        let timer_elapsed = t.elapsed;
        let mut elapsed = timer_elapsed;
        let mut causes = t
            .cause
            .map(|s| cause::section(timer.probe.spikes_are(), &s, &rec))
            .unwrap_or_default();
        show(Progress::TimerDone(&rec));
        if !self.stop.load(Ordering::Relaxed) {
            let (on, rest) = UNTHROTTLED_STRETCH;
            show(Progress::NoiseHalf {
                policy,
                duration: noise_duration,
                on,
                rest,
            });
            // A record of its own for this half: its time zero is the noise
            // run's, so the flight recorder lines its events up with the right
            // spikes; its spikes are then moved onto the check's time zero.
            let mut part = Record::new(rec.source, "check", Platform::default());
            if rec
                .warnings
                .iter()
                .any(|w| matches!(w, Warning::NoTracing { .. }))
            {
                noise.tracing = Tracing::Off; // said once is enough; the second start would fail alike
            }
            let n = self.session.measure(&mut part, &noise, None)?;
            elapsed += n.elapsed;
            if let Some(s) = n.cause {
                causes.push_str(&cause::section(noise.probe.spikes_are(), &s, &part));
            }
            crate::merge::merge_noise_half(&mut rec, part);
            show(Progress::NoiseDone(&rec));
        }
        crate::loads::finish(loads, &req.load_specs, &mut rec);
        show(Progress::LoadsDone(&rec));
        crate::session::finish_record(&mut rec, elapsed, req.duration);
        Ok(Round {
            rec,
            timer_elapsed,
            elapsed,
            causes,
        })
    }

    /// Rounds until every verdict is decided, Ctrl-C, or `max`; each
    /// round's status told as it ends.
    fn until_decided(&self, rounds: &mut Vec<Round>, max: Nanos) -> Result<(), MeasureError> {
        loop {
            let (rec, windows) = combine(rounds)?;
            let (v, _) = verdicts_of(&rec, &windows, &self.req.profiles);
            let open: Vec<&Verdict> = v
                .iter()
                .filter(|x| x.state == VerdictState::Inconclusive)
                .collect();
            let (elapsed, timer) = totals(rounds);
            let timer_share = timer.as_secs_f64() / elapsed.as_secs_f64().max(1e-9);
            let left = time_left(&open, timer, timer_share);
            let why_stop = if open.is_empty() {
                Some("every verdict is decided".to_string())
            } else if self.stop.load(Ordering::Relaxed) {
                Some("interrupted; keeping what was measured".to_string())
            } else if elapsed + self.req.duration > max {
                Some(format!("--max {max} reached"))
            } else {
                None
            };
            (self.show)(&Progress::Round {
                round: rounds.len(),
                measured: elapsed,
                open: open.len(),
                of: v.len(),
                left_secs: left,
                why_stop: why_stop.as_deref(),
            });
            if why_stop.is_some() {
                return Ok(());
            }
            rounds.push(self.round(true)?);
        }
    }

    /// Every round, laid end to end, with the timer windows and the causes.
    fn rounds(&self) -> Result<(Record, Vec<TimerWindow>, String), MeasureError> {
        let mut rounds = vec![self.round(false)?];
        if let Some(max) = self.req.until_decided {
            self.until_decided(&mut rounds, max)?;
        }
        let (mut rec, windows) = combine(&rounds)?;
        if let (Some(max), true) = (self.req.until_decided, self.stop.load(Ordering::Relaxed)) {
            if !rec.interrupted {
                // Stopped between rounds: what was measured is whole, but the
                // run is shorter than it would have been.
                rec.interrupted = true;
                rec.warnings.push(Warning::Interrupted {
                    completed_ns: rec.duration_ns.0,
                    asked_ns: max.0,
                });
            }
        }
        if rounds.len() > 1 {
            let (elapsed, timer) = totals(&rounds);
            (self.show)(&Progress::AllRounds {
                rounds: rounds.len(),
                timer,
                elapsed,
                rec: &rec,
            });
        }
        let causes = rounds.iter().map(|r| r.causes.as_str()).collect();
        Ok((rec, windows, causes))
    }
}

/// Runs a check: its rounds with the C-states held (released before the
/// verdicts), then the timer windows, the verdicts and the baseline's
/// comparison into the record. `show` is told each step as it happens;
/// `started_at` stamps each round's record (RFC 3339).
pub fn run(
    req: &CheckRequest,
    session: &Session,
    stop: &AtomicBool,
    show: &dyn Fn(&Progress),
    started_at: &dyn Fn() -> String,
) -> Result<Checked, MeasureError> {
    let policy = if req.replaying() {
        "replayed"
    } else if realtime_allowed() {
        "SCHED_FIFO 95"
    } else {
        "SCHED_OTHER (not allowed SCHED_FIFO)"
    };
    let run = Run {
        req,
        session,
        stop,
        policy,
        show,
        started_at,
    };
    let mut windows = Vec::new();
    let mut causes = String::new();
    // C-states are held through every round the way every other measuring
    // verb holds them, and released before the summary is printed.
    let mut rec = punctual_live::cstate::holding(req.c_states, &req.cpus, || {
        let (rec, w, c) = run.rounds()?;
        windows = w;
        causes = c;
        Ok::<_, MeasureError>(rec)
    })?;
    rec.extra.insert(
        "timer_windows".into(),
        serde_json::to_value(
            windows
                .iter()
                .map(|w| [w.start.0, w.len.0])
                .collect::<Vec<_>>(),
        )
        .unwrap_or(serde_json::Value::Null),
    );
    let (verdicts, from) = verdicts_of(&rec, &windows, &req.profiles);
    let why = unrepresentative(&rec, &windows);
    if !verdicts.is_empty() {
        // The record says what the terminal says: the typed verdicts, and
        // their full detail in `extra["verdicts"]`.
        rec.verdicts = verdicts.iter().map(|x| x.entry()).collect();
        rec.extra.insert(
            "verdicts".into(),
            serde_json::to_value(&verdicts).unwrap_or(serde_json::Value::Null),
        );
    }
    let baseline = req.baseline.as_ref().map(|(path, base)| {
        let (then, _) = verdicts_of(base, &timer_windows_of(base), &req.profiles);
        let c = against_baseline(&verdicts, &then);
        rec.extra.insert(
            "baseline".into(),
            serde_json::json!({
                "record": path,
                "started_at": base.started_at,
                "worse": c.worse.iter().map(|x| &x.profile).collect::<Vec<_>>(),
                "better": c.better.iter().map(|x| &x.profile).collect::<Vec<_>>(),
                "same": c.same,
            }),
        );
        c
    });
    Ok(Checked {
        record: rec,
        causes,
        verdicts,
        verdicts_from: from,
        unrepresentative: why,
        baseline,
    })
}

/// The rounds of a check as one record, laid end to end (the report's
/// lossless merge: histograms merged, spikes and stolen timelines moved
/// onto the first round's time zero), with the timer windows in its time.
/// One round is returned as it is.
fn combine(rounds: &[Round]) -> Result<(Record, Vec<TimerWindow>), MeasureError> {
    if let [one] = rounds {
        return Ok((
            one.rec.clone(),
            vec![TimerWindow {
                start: Nanos::ZERO,
                len: one.timer_elapsed,
            }],
        ));
    }
    let inputs: Vec<punctual_report::Input> = rounds
        .iter()
        .enumerate()
        .map(|(i, r)| punctual_report::Input::new(format!("round {}", i + 1), r.rec.clone()))
        .collect();
    let mut rec =
        punctual_report::merge::merge(&inputs).map_err(|e| MeasureError::Runtime(e.to_string()))?;
    let last = &rounds[rounds.len() - 1].rec;
    rec.kind = "check".into();
    rec.extra = last.extra.clone();
    rec.started_mono_ns = rounds[0].rec.started_mono_ns;
    let mut windows = Vec::new();
    let mut at = Nanos::ZERO;
    let mut list = Vec::new();
    for r in rounds {
        windows.push(TimerWindow {
            start: at,
            len: r.timer_elapsed,
        });
        list.push(serde_json::json!({
            "started_at": r.rec.started_at,
            "offset_ns": at,
            "duration_ns": r.rec.duration_ns,
            "timer_ns": r.timer_elapsed,
        }));
        at += r.rec.duration_ns;
    }
    rec.extra
        .insert("rounds".into(), serde_json::Value::Array(list));
    rec.set_config("rounds", rounds.len());
    Ok((rec, windows))
}

/// How much longer to measure (whole rounds of `round`, which spend
/// `timer_share` of their time on wake-ups) before every open verdict's
/// `measure_more` of wake-ups is reached: the longest of them.
fn time_left(open: &[&Verdict], timer_measured: Nanos, timer_share: f64) -> Option<f64> {
    open.iter()
        .filter_map(|v| v.measure_more_seconds)
        .map(|need| (need - timer_measured.as_secs_f64()).max(0.0) / timer_share)
        .max_by(f64::total_cmp)
}
