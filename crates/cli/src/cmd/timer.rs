//! `punctual timer`: thread wake-up latency per CPU (the cyclictest
//! measurement), with missed periods counted and a bounded spike log.
//!
//! Also home of the helpers the other probe verbs (`noise`, `check`) share:
//! policy validation, record assembly, the progress line and tables.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use punctual_live::rt::Policy;
use punctual_live::spikes::DEFAULT_SPIKE_CAPACITY;
use punctual_live::timer::{self as probe, Progress, TimerClock, TimerConfig};
use punctual_record::{Nanos, Platform, Record, Series, Source, Warning};

use crate::error::{CliError, CliResult};
use crate::opts;

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
    /// Bound of the spike log.
    #[arg(long, default_value_t = DEFAULT_SPIKE_CAPACITY)]
    pub max_spikes: usize,
    /// Write the record (JSON) here.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Write a cyclictest-compatible histogram (`cyclictest -h`) here.
    #[arg(long)]
    pub hist: Option<PathBuf>,
    /// Do not mlockall (memory locking is on by default).
    #[arg(long)]
    pub no_mlock: bool,
    /// Replay wake-up latencies (ns, one per line) through the same
    /// pipeline on a virtual clock instead of measuring: for tests and for
    /// re-analysing a captured feed. Every CPU replays the same feed.
    #[arg(long, hide = true)]
    pub replay: Option<PathBuf>,
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

/// RFC 3339 UTC time of `t`, without a date library.
pub fn rfc3339(t: SystemTime) -> String {
    let secs = t
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let (days, rem) = (secs / 86_400, secs % 86_400);
    // Civil-from-days (H. Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    )
}

/// A measured record with platform facts and their warnings.
pub fn new_record(kind: &str, platform: Platform) -> Record {
    let mut rec = Record::new(Source::Measured, kind, platform.clone());
    rec.started_at = rfc3339(SystemTime::now());
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

/// Writes the record and reports where.
pub fn write_json(rec: &Record, path: &Option<PathBuf>) -> CliResult {
    if let Some(p) = path {
        rec.write(p)
            .map_err(|e| CliError::runtime(format!("cannot write --json: {e}")))?;
        eprintln!("record written to {}", p.display());
    }
    Ok(())
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
    let clock = match args.clock.as_str() {
        "nanosleep" => TimerClock::Nanosleep,
        "timerfd" => TimerClock::Timerfd,
        c => {
            return Err(CliError::usage(format!(
                "--clock '{c}' is not a timer (use nanosleep or timerfd)"
            )))
        }
    };
    if args.max_spikes == 0 {
        return Err(CliError::usage(
            "--max-spikes 0 keeps no spike; give at least 1",
        ));
    }
    Ok(TimerConfig {
        cpus: parse_cpus(&args.cpus)?,
        policy,
        interval: args.interval,
        duration: args.duration,
        clock,
        threshold: args.threshold.unwrap_or(Nanos::ZERO),
        max_spikes: args.max_spikes,
        lock_memory: !args.no_mlock,
    })
}

/// Records a timer configuration in the record's `config`.
pub fn set_timer_config(rec: &mut Record, cfg: &TimerConfig, prefix: &str) {
    rec.set_config(&format!("{prefix}cpus"), &cfg.cpus);
    rec.set_config(
        &format!("{prefix}policy"),
        punctual_live::setup::policy_label(cfg.policy),
    );
    rec.set_config(&format!("{prefix}interval_ns"), cfg.interval);
    rec.set_config(&format!("{prefix}duration_ns"), cfg.duration);
    rec.set_config(&format!("{prefix}clock"), cfg.clock.name());
    rec.set_config(&format!("{prefix}threshold_ns"), cfg.threshold);
    rec.set_config(&format!("{prefix}max_spikes"), cfg.max_spikes);
    rec.set_config(&format!("{prefix}mlock"), cfg.lock_memory);
}

/// Runs the timer probe with progress and returns the outcome.
pub fn run_timer_probe(
    cfg: &TimerConfig,
    stop: Arc<AtomicBool>,
    label: &str,
) -> Result<probe::TimerOutcome, CliError> {
    let progress = Progress::new(cfg.cpus.len());
    let c2 = cfg.clone();
    let p2 = Arc::clone(&progress);
    with_progress(label, cfg.duration, progress, move || {
        probe::run(&c2, stop, p2)
    })
}

pub fn run(args: Args) -> CliResult {
    let cfg = timer_config(&args)?;
    opts::check_output("--json", &args.json)?;
    opts::check_output("--hist", &args.hist)?;
    if let Some(p) = &args.replay {
        read_replay(p)?;
    }
    let stop = crate::interrupt::stop_flag();
    let platform = punctual_live::sysinfo::collect();
    let mut rec = new_record("timer", platform);
    set_timer_config(&mut rec, &cfg, "");
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
    let elapsed = out.elapsed;
    out.fill(&mut rec, cfg.max_spikes);
    finish_record(&mut rec, elapsed, cfg.duration);
    print!("{}", latency_table(&rec));
    if !rec.warnings.is_empty() {
        println!("warnings:");
        print!("{}", warnings_text(&rec));
    }
    write_json(&rec, &args.json)?;
    if let Some(p) = &args.hist {
        write_hist(&rec, p)?;
    }
    Ok(())
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
    fn dates() {
        let t = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        assert_eq!(rfc3339(t), "2023-11-14T22:13:20Z");
    }

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
