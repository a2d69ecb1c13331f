//! `punctual check`: the main job, no flags needed. Platform facts, then
//! the timer probe and the noise probe over all CPUs, then a short
//! plain-language summary.
//!
//! Why the time is split in two halves rather than the probes run side by
//! side on different CPUs: each probe disturbs the other on a shared CPU
//! (a busy loop at SCHED_FIFO delays or is charged with the timer thread's
//! wake-ups), and running them on disjoint CPUs would measure each CPU with
//! only one probe, which on a 2-CPU machine means every CPU misses half the
//! picture. Sequential halves measure every CPU with both probes, each
//! undisturbed, at the cost of not seeing them at the same moment.

use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use punctual_analysis::check::{against_baseline, timer_windows_of, unrepresentative, TimerWindow};
use punctual_analysis::profiles::Profile;
use punctual_analysis::verdict::human_secs;

use punctual_live::noise::{NoiseConfig, UNTHROTTLED_STRETCH};
use punctual_live::rt::Policy;
use punctual_live::spikes::DEFAULT_SPIKE_CAPACITY;
use punctual_live::{timer::TimerClock, timer::TimerConfig};
use punctual_measure::{Noise, ProbeRequest, Session, Timer, Tracing};
use punctual_record::{Metric, Nanos, Platform, Record, VerdictState, Warning};
use punctual_report::text::{cause, load, platform, probe};

use crate::error::{CliError, CliResult};
use crate::interrupt::interrupted;
use crate::opts::{self, CStateArgs, CauseArgs};
use crate::output::{write_json, Terminal};

#[derive(clap::Args, Debug)]
#[command(
    after_help = "Examples:\n  punctual check\n  punctual check --duration 20s --cpus 1 --json check.json\n  punctual check --load disk:direct,irq-cpu=1 --cause\n  punctual check --duration 20s --fail-on-verdict misses --json check.json\n  punctual check -a 1 -D 20s"
)]
pub struct Args {
    /// Total time: the first half measures wake-up latency, the second
    /// stolen time (`-D` as cyclictest).
    #[arg(short = 'D', long, default_value = "60s", value_parser = opts::positive_duration)]
    pub duration: Nanos,
    /// CPUs to survey: `0`, `0,1`, `0-3` or `all` (`-a` as cyclictest).
    #[arg(short = 'a', long, default_value = "all")]
    pub cpus: String,
    /// Write the record (JSON) here.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Run a load (as `punctual load SPEC`) through both halves, so the
    /// verdicts say how the machine does while it is busy.
    #[arg(long, value_name = "SPEC")]
    pub load: Option<String>,
    /// Keep measuring in rounds of --duration (same probes, same load),
    /// re-forecasting after each, until every selected profile's verdict
    /// is decided (meets or misses) or --max is reached. Ctrl-C keeps
    /// what was measured.
    #[arg(long)]
    pub until_decided: bool,
    /// With --until-decided: the most time to measure in all.
    #[arg(long, value_name = "DURATION", value_parser = opts::positive_duration, requires = "until_decided")]
    pub max: Option<Nanos>,
    /// Give verdicts only for profiles whose name contains NAME
    /// (repeatable; default: every shipped profile).
    #[arg(long = "profile", value_name = "NAME")]
    pub profiles: Vec<String>,
    /// Replay wake-up latencies (ns, one per line) instead of measuring
    /// the timer half: for tests and for re-analysing a captured feed.
    #[arg(long, hide = true, value_name = "FILE")]
    pub replay_timer: Option<PathBuf>,
    /// Replay stolen intervals (`START_NS LEN_NS` a line, as `noise
    /// --replay`) instead of measuring the noise half.
    #[arg(long, hide = true, value_name = "FILE")]
    pub replay_noise: Option<PathBuf>,
    /// Say whether this run is worse than a saved check record (the
    /// baseline), profile by profile: worse when this run's 95% interval
    /// of the MTTF lies wholly below the baseline's.
    #[arg(long, value_name = "RECORD")]
    pub baseline: Option<PathBuf>,
    #[command(flatten)]
    pub cause: CauseArgs,
    #[command(flatten)]
    pub c_states: CStateArgs,
    #[command(flatten)]
    pub gates: crate::gates::GateArgs,
}

/// --max when --until-decided is given without it.
pub const DEFAULT_MAX: Nanos = Nanos::from_secs(30 * 60);

/// The verdicts of a check record: for `profiles`, from the timer
/// half's wake-ups (`timer` holds the record-time windows the timer ran
/// in; the noise half's seconds must not dilute the wake-up rate), with
/// the time stolen during each compute from the noise half's gaps on the
/// same CPU (docs/forecast.md §3.4), which it measured in stretches that
/// RT throttling never stops; without them (an interrupted run) it is
/// inferred from the wake-ups. A verdict is decided only when its whole
/// 95% interval is on one side of the target. The second value says what
/// the stall term came from.
pub fn verdicts_of(
    rec: &Record,
    timer: &[TimerWindow],
    profiles: &[Profile],
) -> (Vec<punctual_analysis::Verdict>, &'static str) {
    let mut timer_part = Record::new(rec.source, &rec.kind, Platform::default());
    timer_part.duration_ns = timer.iter().map(|w| w.len).sum();
    timer_part.series = rec
        .series
        .iter()
        .filter(|s| s.metric == Metric::Latency)
        .cloned()
        .collect();
    timer_part.spikes = rec
        .spikes
        .iter()
        .filter(|s| s.metric == Metric::Latency)
        .cloned()
        .collect();
    let mut models = punctual_analysis::verdict::models(&timer_part);
    punctual_analysis::verdict::attach_own_gaps(&mut models, rec);
    let mut v = punctual_analysis::verdict::verdicts_for(&models, profiles);
    if let Some(why) = unrepresentative(rec, timer) {
        for x in v.iter_mut() {
            x.not_representative(&why);
        }
    }
    let from = if models.iter().any(|m| m.gap_stalls.is_some()) {
        "from the wake-up latencies and the busy loop's stolen time"
    } else {
        "from the wake-up latencies"
    };
    (v, from)
}

/// Per-workload verdicts (does this machine meet each selected profile's
/// MTTF, and if not what buffering would; [`verdicts_of`]). Printed, and
/// kept in the record's typed `verdicts` (and the full detail in
/// `extra["verdicts"]`) so the record says what the terminal said.
pub fn print_verdicts(rec: &mut Record, timer: &[TimerWindow], profiles: &[Profile]) {
    let (v, from) = verdicts_of(rec, timer, profiles);
    if v.is_empty() {
        return;
    }
    println!(
        "\n== verdicts for {} workload profiles: {} (decided only when the whole 95% CI of the \
         MTTF is on one side of the target; {from}; `punctual forecast` explains each)",
        v.len(),
        punctual_report::text::verdict::tally(&v)
    );
    if let Some(why) = unrepresentative(rec, timer) {
        println!("   NOT REPRESENTATIVE: {why}");
    }
    print!("{}", render_verdicts_compact(&v));
    rec.verdicts = v.iter().map(|x| x.entry()).collect();
    rec.extra.insert(
        "verdicts".into(),
        serde_json::to_value(&v).unwrap_or(serde_json::Value::Null),
    );
}

/// The verdict lines without the per-line "not representative" note,
/// which the heading already gave once.
fn render_verdicts_compact(v: &[punctual_analysis::Verdict]) -> String {
    let mut out = String::new();
    for x in v {
        out.push_str(&format!(
            "  {} {}\n",
            punctual_report::text::verdict::mark(x.state),
            x.message
        ));
    }
    out
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

/// What every round measures with.
struct Plan<'a> {
    args: &'a Args,
    cpus: Vec<u32>,
    load_specs: Vec<punctual_loads::LoadSpec>,
    timer_replay: Option<Vec<Nanos>>,
    noise_replay: Option<punctual_live::noise::Replay>,
    policy: &'static str,
}

impl Plan<'_> {
    /// Measures one round; `quiet` leaves out the section headings and
    /// tables (later rounds of --until-decided, shown together at the end).
    fn round(&self, session: &Session, stop: &AtomicBool, quiet: bool) -> CliResult<Round> {
        let args = self.args;
        let half = args.duration / 2;
        let mut rec = session.new_record("check", crate::output::rfc3339_now());
        let timer = ProbeRequest {
            kind: "check",
            label: "timer",
            probe: Arc::new(Timer {
                cfg: TimerConfig {
                    cpus: self.cpus.clone(),
                    policy: Policy::Fifo { priority: 95 },
                    interval: Nanos::from_ms(1),
                    duration: half,
                    clock: TimerClock::Nanosleep,
                    threshold: Nanos::ZERO,
                    max_spikes: DEFAULT_SPIKE_CAPACITY,
                    lock_memory: true,
                    stop_at: None,
                    samples: None,
                },
                replay: self.timer_replay.clone(),
            }),
            loads: Vec::new(),
            tracing: args.cause.tracing(),
        };
        let ncfg = NoiseConfig {
            cpus: self.cpus.clone(),
            policy: Policy::Fifo { priority: 95 },
            duration: args.duration - half,
            threshold: None,
            max_spikes: DEFAULT_SPIKE_CAPACITY,
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
                replay: self.noise_replay.clone(),
            }),
            loads: Vec::new(),
            tracing: args.cause.tracing(),
        };
        timer.probe.set_config(&mut rec, "timer.");
        noise.probe.set_config(&mut rec, "noise.");
        rec.set_config(
            "split",
            "sequential: timer for the first half, noise for the second",
        );
        if let Some(p) = &args.replay_timer {
            rec.set_config("timer.replay", p.display().to_string());
        }
        if let Some(p) = &args.replay_noise {
            rec.set_config("noise.replay", p.display().to_string());
        }
        // Through both halves; on an error they stop when dropped.
        let loads = punctual_measure::loads::start(&self.load_specs, args.duration)?;
        if let (Some(l), false) = (&args.load, quiet) {
            println!("\n== under load: {l} for {}", args.duration);
        }
        let policy = self.policy;
        if !quiet {
            println!(
                "\n== wake-up latency: one {policy} thread per CPU waking every 1ms for {half}"
            );
        }
        let t = session.measure(&mut rec, &timer, None)?;
        let timer_elapsed = t.elapsed;
        let mut elapsed = timer_elapsed;
        let mut causes = t
            .cause
            .map(|s| cause::section(timer.probe.spikes_are(), &s, &rec))
            .unwrap_or_default();
        if !quiet {
            print!("{}", probe::latency_table(&rec));
        }
        if !interrupted(stop) {
            let (on, rest) = UNTHROTTLED_STRETCH;
            if !quiet {
                println!(
                    "\n== stolen time: one {policy} busy loop per CPU for {noise_duration} ({on} at a time with {rest} rests, so RT throttling never stops it)"
                );
            }
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
            let n = session.measure(&mut part, &noise, None)?;
            elapsed += n.elapsed;
            if let Some(s) = n.cause {
                causes.push_str(&cause::section(noise.probe.spikes_are(), &s, &part));
            }
            punctual_measure::merge::merge_noise_half(&mut rec, part);
            if !quiet {
                print!("{}", probe::stolen_table(&rec));
            }
        }
        punctual_measure::loads::finish(loads, &self.load_specs, &mut rec);
        if !quiet {
            print!("{}", load::load_lines(&rec));
        }
        punctual_measure::session::finish_record(&mut rec, elapsed, args.duration);
        Ok(Round {
            rec,
            timer_elapsed,
            elapsed,
            causes,
        })
    }
}

/// The rounds of a check as one record, laid end to end (the report's
/// lossless merge: histograms merged, spikes and stolen timelines moved
/// onto the first round's time zero), with the timer windows in its time.
/// One round is returned as it is.
fn combine(rounds: &[Round]) -> CliResult<(Record, Vec<TimerWindow>)> {
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
        punctual_report::merge::merge(&inputs).map_err(|e| CliError::runtime(e.to_string()))?;
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

/// The profiles `--profile` selects (all when none is given); a NAME
/// matching none is refused.
fn selected_profiles(names: &[String]) -> CliResult<Vec<Profile>> {
    let all = punctual_analysis::profiles::builtin();
    if names.is_empty() {
        return Ok(all);
    }
    for n in names {
        if !all.iter().any(|p| p.name.contains(n.as_str())) {
            return Err(CliError::usage(format!(
                "--profile {n}: no workload profile's name contains it (a check without --profile names every profile in its verdicts)"
            )));
        }
    }
    Ok(all
        .into_iter()
        .filter(|p| names.iter().any(|n| p.name.contains(n.as_str())))
        .collect())
}

/// How much longer to measure (whole rounds of `round`, which spend
/// `timer_share` of their time on wake-ups) before every open verdict's
/// `measure_more` of wake-ups is reached: the longest of them.
fn time_left(
    open: &[&punctual_analysis::Verdict],
    timer_measured: Nanos,
    timer_share: f64,
) -> Option<f64> {
    open.iter()
        .filter_map(|v| v.measure_more_seconds)
        .map(|need| (need - timer_measured.as_secs_f64()).max(0.0) / timer_share)
        .max_by(f64::total_cmp)
}

/// Reads a `--baseline` record: it must hold wake-up latencies.
fn read_baseline(p: &std::path::Path) -> CliResult<Record> {
    if !p.exists() {
        return Err(CliError::usage(format!(
            "--baseline {}: no such file",
            p.display()
        )));
    }
    let r = Record::read(p).map_err(|e| CliError::usage(format!("--baseline: {e}")))?;
    if !r.series.iter().any(|s| s.metric == Metric::Latency) {
        return Err(CliError::usage(format!(
            "--baseline {}: the record has no wake-up latency series to compare with (give a check or timer record)",
            p.display()
        )));
    }
    Ok(r)
}

pub fn run(args: Args) -> CliResult {
    let cpus = opts::cpus(&args.cpus)?;
    let gates = args.gates.parse()?;
    opts::check_output("--json", &args.json)?;
    if args.duration < Nanos::from_ms(200) {
        return Err(CliError::usage(format!(
            "--duration {} is too short to split between two probes; give at least 200ms",
            args.duration
        )));
    }
    let max = args.max.unwrap_or(DEFAULT_MAX);
    if args.until_decided && max < args.duration {
        return Err(CliError::usage(format!(
            "--max {max} is shorter than one round (--duration {}); give a longer --max or a shorter --duration",
            args.duration
        )));
    }
    let replaying = args.replay_timer.is_some() || args.replay_noise.is_some();
    if replaying && args.cause.cause {
        return Err(CliError::usage(
            "--cause traces a live run; it does not apply to a replayed feed",
        ));
    }
    let profiles = selected_profiles(&args.profiles)?;
    let baseline = match &args.baseline {
        Some(p) => Some((p.clone(), read_baseline(p)?)),
        None => None,
    };
    let timer_replay = match &args.replay_timer {
        Some(p) => Some(opts::latency_replay(p)?),
        None => None,
    };
    let noise_replay = match &args.replay_noise {
        Some(p) => Some(opts::gap_replay(p)?),
        None => None,
    };
    let load_specs = opts::load_specs(args.load.as_deref())?;
    let stop = crate::interrupt::stop_flag();
    let terminal = Terminal::default();
    let session = Session::new(Arc::clone(&stop), &terminal);
    println!("== this machine");
    print!(
        "{}",
        platform::platform_text(&punctual_live::sysinfo::collect(), false)
    );
    let policy = if replaying {
        "replayed"
    } else if realtime_allowed() {
        "SCHED_FIFO 95"
    } else {
        "SCHED_OTHER (not allowed SCHED_FIFO)"
    };
    let plan = Plan {
        args: &args,
        cpus: cpus.clone(),
        load_specs,
        timer_replay,
        noise_replay,
        policy,
    };
    let mut rounds = Vec::new();
    let mut windows = Vec::new();
    // C-states are held through every round the way every other measuring
    // verb holds them, and released before the summary is printed; a
    // replayed feed holds nothing.
    let c_states = (!replaying).then(|| args.c_states.request());
    let mut rec = punctual_live::cstate::holding(c_states, &cpus, || {
        rounds.push(plan.round(&session, &stop, false)?);
        if args.until_decided {
            loop {
                let (rec, windows) = combine(&rounds)?;
                let (v, _) = verdicts_of(&rec, &windows, &profiles);
                let open: Vec<&punctual_analysis::Verdict> = v
                    .iter()
                    .filter(|x| x.state == VerdictState::Inconclusive)
                    .collect();
                let (elapsed, timer) = totals(&rounds);
                let timer_share = timer.as_secs_f64() / elapsed.as_secs_f64().max(1e-9);
                let left = time_left(&open, timer, timer_share);
                let why_stop = if open.is_empty() {
                    Some("every verdict is decided".to_string())
                } else if interrupted(&stop) {
                    Some("interrupted; keeping what was measured".to_string())
                } else if elapsed + args.duration > max {
                    Some(format!("--max {max} reached"))
                } else {
                    None
                };
                eprintln!(
                    "punctual check: round {}, {} measured: {} of {} profiles still inconclusive{}{}",
                    rounds.len(),
                    Nanos(elapsed.0 / 10_000_000 * 10_000_000),
                    open.len(),
                    v.len(),
                    match left {
                        Some(s) if !open.is_empty() =>
                            format!(", about {} more to decide them all", human_secs(s)),
                        _ => String::new(),
                    },
                    why_stop
                        .as_ref()
                        .map(|w| format!(" ({w})"))
                        .unwrap_or_default()
                );
                if why_stop.is_some() {
                    break;
                }
                rounds.push(plan.round(&session, &stop, true)?);
            }
        }
        let (mut rec, w) = combine(&rounds)?;
        windows = w;
        if args.until_decided && interrupted(&stop) && !rec.interrupted {
            // Stopped between rounds: what was measured is whole, but the run
            // is shorter than it would have been.
            rec.interrupted = true;
            rec.warnings.push(Warning::Interrupted {
                completed_ns: rec.duration_ns.0,
                asked_ns: max.0,
            });
        }
        if rounds.len() > 1 {
            let (elapsed, timer) = totals(&rounds);
            println!(
                "\n== all {} rounds together: {timer} of wake-ups in {elapsed}",
                rounds.len()
            );
            print!("{}", probe::latency_table(&rec));
            print!("{}", probe::stolen_table(&rec));
        }
        Ok::<_, CliError>(rec)
    })?;
    let causes: String = rounds.iter().map(|r| r.causes.as_str()).collect();
    print!("{}", probe::c_states_line(&rec));
    print!("{causes}");
    println!("\n== summary");
    print!("{}", probe::check_summary(&rec));
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
    print_verdicts(&mut rec, &windows, &profiles);
    if let Some((path, base)) = &baseline {
        let (now, _) = verdicts_of(&rec, &windows, &profiles);
        let (then, _) = verdicts_of(base, &timer_windows_of(base), &profiles);
        let c = against_baseline(&now, &then);
        println!(
            "\n== against the baseline {} ({}{})",
            path.display(),
            base.started_at,
            base.platform
                .hostname
                .as_ref()
                .map(|h| format!(", {h}"))
                .unwrap_or_default()
        );
        print!("{}", punctual_report::text::verdict::baseline(&c));
        rec.extra.insert(
            "baseline".into(),
            serde_json::json!({
                "record": path.display().to_string(),
                "started_at": base.started_at,
                "worse": c.worse.iter().map(|x| &x.profile).collect::<Vec<_>>(),
                "better": c.better.iter().map(|x| &x.profile).collect::<Vec<_>>(),
                "same": c.same,
            }),
        );
    }
    if !rec.warnings.is_empty() {
        eprintln!("\n== what may hurt, and what to change");
        eprint!("{}", probe::warnings_text(&rec));
    }
    write_json(&rec, &args.json)?;
    gates.enforce(&rec)
}
