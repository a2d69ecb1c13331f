//! `punctual timer`: thread wake-up latency per CPU (the cyclictest
//! measurement), with missed periods counted and a bounded spike log.
//!
//! Also home of the helpers the other probe verbs (`noise`, `check`) share:
//! policy validation, record assembly, the progress line and tables.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant};

use punctual_live::rt::Policy;
use punctual_live::spikes::DEFAULT_SPIKE_CAPACITY;
use punctual_live::timer::{self as probe, Progress, TimerClock, TimerConfig};
use punctual_record::{Nanos, Platform, Record, Series, Source, Warning};

use crate::error::{CliError, CliResult};
use crate::opts;
use crate::output::write_json;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// CPUs to measure: `0`, `0,1`, `0-3` or `all`.
    #[arg(long, default_value = "all")]
    pub cpus: String,
    /// Scheduling policy of the measuring threads: fifo, rr, other, deadline.
    #[arg(long, default_value = "fifo")]
    pub policy: String,
    /// Real-time priority (1-99) for fifo/rr; 95 keeps the probe below
    /// priority-99 kernel threads and the injector.
    #[arg(long, default_value_t = 95)]
    pub priority: u32,
    /// Period of the measuring threads.
    #[arg(long, default_value = "1ms", value_parser = opts::positive_duration)]
    pub interval: Nanos,
    /// How long to measure (`500us`, `10s`, `2h`).
    #[arg(long, default_value = "10s", value_parser = opts::positive_duration)]
    pub duration: Nanos,
    /// Waiting mechanism: nanosleep (absolute clock_nanosleep) or timerfd.
    #[arg(long, default_value = "nanosleep")]
    pub clock: String,
    /// Keep wake-ups later than this in the spike log (default: the largest).
    #[arg(long, value_parser = opts::duration)]
    pub threshold: Option<Nanos>,
    /// Write a cyclictest-compatible histogram (`cyclictest -h`) here.
    #[arg(long)]
    pub hist: Option<PathBuf>,
    #[command(flatten)]
    pub common: ProbeArgs,
    /// Replay wake-up latencies (ns, one per line) through the same
    /// pipeline on a virtual clock instead of measuring: for tests and for
    /// re-analysing a captured feed. Every CPU replays the same feed.
    #[arg(long, hide = true)]
    pub replay: Option<PathBuf>,
}

/// The options `timer` and `noise` share, declared once.
#[derive(clap::Args, Debug)]
pub struct ProbeArgs {
    /// Bound of the spike log (the largest are kept).
    #[arg(long, default_value_t = DEFAULT_SPIKE_CAPACITY)]
    pub max_spikes: usize,
    /// Write the record (JSON) here.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Do not mlockall (memory locking is on by default).
    #[arg(long)]
    pub no_mlock: bool,
    /// Run a load (as `punctual load SPEC`) for exactly the time of the
    /// measurement, e.g. `net`, `cpu:threads=2`, `disk+mem`; what it
    /// achieved goes in the record's `load` section.
    #[arg(long, value_name = "SPEC")]
    pub load: Option<String>,
    #[command(flatten)]
    pub cause: crate::attach::CauseArgs,
}

/// Reads a replay feed, refusing a bad line with its number and text.
fn read_replay(path: &std::path::Path) -> Result<Vec<Nanos>, CliError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| CliError::usage(format!("--replay {}: {e}", path.display())))?;
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty() && !l.starts_with('#'))
        .map(|(i, l)| {
            l.trim().parse::<u64>().map(Nanos).map_err(|_| {
                CliError::usage(format!(
                    "--replay {} line {}: '{}' is not a latency in ns",
                    path.display(),
                    i + 1,
                    l.trim()
                ))
            })
        })
        .collect()
}

/// Turns `--policy`/`--priority` into a policy, refusing out-of-range
/// values with one sentence. SCHED_DEADLINE gets runtime = a tenth of the
/// interval (at least 50 us) and deadline = period = interval: enough for
/// a wake-up and a clock read, small enough to pass admission on every CPU.
pub fn parse_policy(policy: &str, priority: u32, interval: Nanos) -> Result<Policy, CliError> {
    let rt_prio = || {
        if (1..=99).contains(&priority) {
            Ok(priority as u8)
        } else {
            Err(CliError::usage(format!(
                "--priority {priority} is out of range: real-time priorities are 1 to 99"
            )))
        }
    };
    match policy {
        "fifo" => Ok(Policy::Fifo {
            priority: rt_prio()?,
        }),
        "rr" => Ok(Policy::Rr {
            priority: rt_prio()?,
        }),
        "other" => Ok(Policy::Other { nice: 0 }),
        "deadline" => {
            let runtime = (interval / 10).max(Nanos::from_us(50)).min(interval);
            Ok(Policy::Deadline {
                runtime,
                deadline: interval,
                period: interval,
            })
        }
        p => Err(CliError::usage(format!(
            "--policy '{p}' is not a policy (use fifo, rr, other or deadline)"
        ))),
    }
}

/// Resolves `--cpus` against the online CPUs.
pub fn parse_cpus(s: &str) -> Result<Vec<u32>, CliError> {
    let online = opts::online_cpus();
    let cpus = opts::cpu_list(s, &online)?;
    if cpus.is_empty() {
        return Err(CliError::usage(format!("--cpus '{s}' selects no CPU")));
    }
    Ok(cpus)
}

/// A measured record with platform facts and their warnings.
pub fn new_record(kind: &str, platform: Platform) -> Record {
    let mut rec = Record::new(Source::Measured, kind, platform.clone());
    rec.started_at = crate::output::rfc3339_now();
    rec.warnings = punctual_live::sysinfo::warnings(&platform);
    rec
}

/// Marks an interrupted record with the warning that says how much of it
/// there is.
pub fn finish_record(rec: &mut Record, elapsed: Nanos, asked: Nanos) {
    rec.duration_ns = elapsed;
    if rec.interrupted {
        rec.warnings.push(Warning::Interrupted {
            completed_ns: elapsed.0,
            asked_ns: asked.0,
        });
    }
}

/// Runs `work` on its own thread while the calling thread draws a progress
/// line on stderr (only when stderr is a terminal): elapsed, remaining,
/// running max.
pub fn with_progress<T: Send + 'static>(
    label: &str,
    duration: Nanos,
    progress: Arc<Progress>,
    work: impl FnOnce() -> T + Send + 'static,
) -> Result<T, CliError> {
    let handle = std::thread::Builder::new()
        .name("punctual-run".into())
        .spawn(work)
        .map_err(|e| CliError::runtime(format!("cannot start the run: {e}")))?;
    let tty = std::io::stderr().is_terminal();
    let start = Instant::now();
    let mut drew = false;
    while !handle.is_finished() {
        std::thread::sleep(Duration::from_millis(200));
        if tty {
            let el = Nanos::from_std(start.elapsed()).min(duration);
            let frac = el.0 as f64 / duration.0.max(1) as f64;
            let w = 30usize;
            let filled = ((frac * w as f64) as usize).min(w);
            eprint!(
                "\r{label} [{}{}] {:>5.1}s / {:.1}s  remaining {:>5.1}s  max {:<10}",
                "#".repeat(filled),
                ".".repeat(w - filled),
                el.as_secs_f64(),
                duration.as_secs_f64(),
                (duration - el).as_secs_f64(),
                progress.max().to_string()
            );
            drew = true;
        }
    }
    if drew {
        eprint!("\r{}\r", " ".repeat(100));
    }
    handle
        .join()
        .map_err(|_| CliError::runtime(format!("the {label} run panicked")))
}

fn fmt_ns(n: Nanos) -> String {
    n.to_string()
}

/// Terminal table of latency series, one row per CPU.
pub fn latency_table(rec: &Record) -> String {
    let mut out = format!(
        "{:<5} {:>9} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>7}\n",
        "cpu", "wakeups", "min", "p50", "p99", "p99.9", "max", "mean", "missed"
    );
    for s in rec
        .series
        .iter()
        .filter(|s| s.metric == punctual_record::Metric::Latency)
    {
        out.push_str(&format!(
            "{:<5} {:>9} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>7}\n",
            s.cpu
                .map(|c| c.to_string())
                .unwrap_or_else(|| s.name.clone()),
            s.count,
            fmt_ns(s.min),
            fmt_ns(s.percentiles.p50),
            fmt_ns(s.percentiles.p99),
            fmt_ns(s.percentiles.p99_9),
            fmt_ns(s.max),
            fmt_ns(s.mean),
            s.missed
        ));
    }
    out
}

/// Warnings, most serious first, one per line.
pub fn warnings_text(rec: &Record) -> String {
    use punctual_record::Severity;
    let mut w: Vec<&Warning> = rec.warnings.iter().collect();
    w.sort_by_key(|x| std::cmp::Reverse(x.severity()));
    w.iter()
        .map(|x| {
            let sev = match x.severity() {
                Severity::Info => "info",
                Severity::Warn => "warn",
                Severity::Degraded => "degraded",
            };
            format!("  [{sev}] {}\n", x.message())
        })
        .collect()
}

pub fn timer_config(args: &Args) -> Result<TimerConfig, CliError> {
    let policy = parse_policy(&args.policy, args.priority, args.interval)?;
    let clock = parse_clock(&args.clock)?;
    check_max_spikes(args.common.max_spikes)?;
    Ok(TimerConfig {
        cpus: parse_cpus(&args.cpus)?,
        policy,
        interval: args.interval,
        duration: args.duration,
        clock,
        threshold: args.threshold.unwrap_or(Nanos::ZERO),
        max_spikes: args.common.max_spikes,
        lock_memory: !args.common.no_mlock,
    })
}

/// `--max-spikes 0` would keep nothing to look at: refused for every probe.
/// `--clock` of the timer probe (`timer`, `cause`).
pub fn parse_clock(s: &str) -> Result<TimerClock, CliError> {
    match s {
        "nanosleep" => Ok(TimerClock::Nanosleep),
        "timerfd" => Ok(TimerClock::Timerfd),
        c => Err(CliError::usage(format!(
            "--clock '{c}' is not a timer (use nanosleep or timerfd)"
        ))),
    }
}

pub fn check_max_spikes(n: usize) -> Result<(), CliError> {
    if n == 0 {
        return Err(CliError::usage(
            "--max-spikes 0 keeps no spike; give at least 1",
        ));
    }
    Ok(())
}

/// The settings every probe has, in the record's `config` under `prefix`
/// (`timer.`/`noise.` in a check record, nothing in a probe's own).
pub fn set_probe_config(rec: &mut Record, prefix: &str, probe: ProbeSettings<'_>) {
    rec.set_config(&format!("{prefix}cpus"), probe.cpus);
    rec.set_config(
        &format!("{prefix}policy"),
        punctual_live::setup::policy_label(probe.policy),
    );
    rec.set_config(&format!("{prefix}duration_ns"), probe.duration);
    rec.set_config(&format!("{prefix}max_spikes"), probe.max_spikes);
    rec.set_config(&format!("{prefix}mlock"), probe.lock_memory);
}

/// What [`set_probe_config`] records.
pub struct ProbeSettings<'a> {
    pub cpus: &'a [u32],
    pub policy: Policy,
    pub duration: Nanos,
    pub max_spikes: usize,
    pub lock_memory: bool,
}

/// Records a timer configuration in the record's `config`.
pub fn set_timer_config(rec: &mut Record, cfg: &TimerConfig, prefix: &str) {
    set_probe_config(
        rec,
        prefix,
        ProbeSettings {
            cpus: &cfg.cpus,
            policy: cfg.policy,
            duration: cfg.duration,
            max_spikes: cfg.max_spikes,
            lock_memory: cfg.lock_memory,
        },
    );
    rec.set_config(&format!("{prefix}interval_ns"), cfg.interval);
    rec.set_config(&format!("{prefix}clock"), cfg.clock.name());
    rec.set_config(&format!("{prefix}threshold_ns"), cfg.threshold);
}

/// Runs a probe (`run` gets the shared progress counters) on its own
/// thread with the progress line, for `cpus` CPUs over `duration`.
pub fn run_probe<T: Send + 'static>(
    label: &str,
    cpus: usize,
    duration: Nanos,
    run: impl FnOnce(Arc<Progress>) -> T + Send + 'static,
) -> Result<T, CliError> {
    let progress = Progress::new(cpus);
    let p2 = Arc::clone(&progress);
    with_progress(label, duration, progress, move || run(p2))
}

/// Runs the timer probe with progress and returns the outcome.
pub fn run_timer_probe(
    cfg: &TimerConfig,
    stop: Arc<AtomicBool>,
    label: &str,
) -> Result<probe::TimerOutcome, CliError> {
    let c2 = cfg.clone();
    run_probe(label, cfg.cpus.len(), cfg.duration, move |p| {
        probe::run(&c2, stop, p)
    })
}

pub fn run(args: Args) -> CliResult {
    let cfg = timer_config(&args)?;
    opts::check_output("--json", &args.common.json)?;
    opts::check_output("--hist", &args.hist)?;
    if let Some(p) = &args.replay {
        read_replay(p)?;
        if args.common.cause.cause {
            return Err(CliError::usage(
                "--cause traces a live run; it does not apply to --replay",
            ));
        }
    }
    let load_specs = super::load::probe_load_specs(args.common.load.as_deref())?;
    let stop = crate::interrupt::stop_flag();
    let platform = punctual_live::sysinfo::collect();
    let mut rec = new_record("timer", platform);
    set_timer_config(&mut rec, &cfg, "");
    let loads = super::load::start_loads(&load_specs, cfg.duration)?;
    let tracing = crate::attach::start(&args.common.cause, &cfg.cpus, &mut rec);
    let out = match &args.replay {
        None => run_timer_probe(&cfg, stop, "timer")?,
        Some(p) => {
            let feed = read_replay(p)?;
            rec.set_config("replay", p.display().to_string());
            probe::run_with(
                &cfg,
                Arc::new(punctual_live::setup::NoSetup),
                move |_| Ok(probe::Replay::new(Nanos::ZERO, feed.clone().into_iter())),
                stop,
                Progress::new(cfg.cpus.len()),
            )
        }
    };
    super::load::finish_loads(loads, &load_specs, &mut rec);
    let elapsed = out.elapsed;
    let probes = crate::attach::threads(&timer_tids(&out), out.origin, elapsed);
    out.fill(&mut rec, cfg.max_spikes);
    let causes = crate::attach::finish(tracing, &mut rec, &probes, &[], "late wake-ups");
    finish_record(&mut rec, elapsed, cfg.duration);
    print!("{}", latency_table(&rec));
    print!("{}", super::load::load_lines(&rec));
    print!("{causes}");
    if !rec.warnings.is_empty() {
        eprintln!("warnings:");
        eprint!("{}", warnings_text(&rec));
    }
    write_json(&rec, &args.common.json)?;
    if let Some(p) = &args.hist {
        write_hist(&rec, p)?;
    }
    Ok(())
}

/// (CPU, thread id) of each measuring thread, for the flight recorder.
pub fn timer_tids(out: &probe::TimerOutcome) -> Vec<(u32, i32)> {
    out.per_cpu.iter().map(|r| (r.cpu, r.tid)).collect()
}

/// Writes the latency series in cyclictest's `-h` format.
pub fn write_hist(rec: &Record, path: &std::path::Path) -> CliResult {
    let lat: Vec<&Series> = rec
        .series
        .iter()
        .filter(|s| s.metric == punctual_record::Metric::Latency)
        .collect();
    let rows = punctual_report::hist::default_rows(&lat);
    let text = punctual_report::hist::cyclictest_hist(&lat, rows);
    punctual_record::write_atomic(path, text.as_bytes())
        .map_err(|e| CliError::runtime(format!("cannot write --hist {}: {e}", path.display())))?;
    eprintln!("histogram written to {}", path.display());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policies() {
        assert!(parse_policy("fifo", 120, Nanos::from_ms(1)).is_err());
        assert!(parse_policy("fifo", 0, Nanos::from_ms(1)).is_err());
        assert!(parse_policy("banana", 10, Nanos::from_ms(1)).is_err());
        assert!(matches!(
            parse_policy("deadline", 0, Nanos::from_ms(1)).unwrap(),
            Policy::Deadline { runtime, .. } if runtime == Nanos::from_us(100)
        ));
    }
}
