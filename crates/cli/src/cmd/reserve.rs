//! `punctual reserve`: real threads under CPU reservations (SCHED_DEADLINE
//! as Rez, Rez-C, Rez-FB), time constraints, and cleanup of leftovers.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use punctual_record::{Record, Source, Warning};
use punctual_reserve::constraint::ConstraintRequest;
use punctual_reserve::journal;
use punctual_reserve::partition::Partition;
use punctual_reserve::record::{self, Outcome};
use punctual_reserve::session;
use punctual_reserve::{command, testapp, Mode, ReserveError, Spec};
use punctual_units::{parse_ratio, Nanos};

use crate::error::{CliError, CliResult};
use crate::opts;

#[derive(clap::Args, Debug)]
#[command(
    after_help = "Examples:\n  punctual reserve --budget 4ms --period 20ms --mode feedback --cpu 1 --duration 10s --test-app\n  punctual reserve --budget 2ms --period 10ms -- ./my-audio-loop\n  punctual reserve --constraint 5ms@30ms..40ms --test-app\n  punctual reserve --cleanup"
)]
pub struct Args {
    /// CPU time needed in every period (R), e.g. 4ms.
    #[arg(long, value_parser = opts::duration, allow_hyphen_values = true)]
    budget: Option<Nanos>,
    /// Reservation period, e.g. 20ms.
    #[arg(long, value_parser = opts::duration, allow_hyphen_values = true)]
    period: Option<Nanos>,
    /// Relative deadline (default: the period).
    #[arg(long, value_parser = opts::duration, allow_hyphen_values = true)]
    deadline: Option<Nanos>,
    /// plain (Rez), catchup (Rez-C) or feedback (Rez-FB).
    #[arg(long, default_value = "plain")]
    mode: String,
    /// Rez-FB gain G, in (0, 2).
    #[arg(long, default_value = "0.5", allow_hyphen_values = true)]
    gain: String,
    /// Static over-reservation: ask the kernel for R·(1+x); e.g. 10%, -10%.
    #[arg(long, default_value = "0%", allow_hyphen_values = true)]
    over_reserve: String,
    /// Largest budget admitted up front for catch-up / feedback (default 1.5× the requested budget).
    #[arg(long, value_parser = opts::duration)]
    max_budget: Option<Nanos>,
    /// Run on this CPU alone, in an exclusive cpuset partition made for the run.
    #[arg(long)]
    cpu: Option<u32>,
    /// How long to run (test app default 10s; a command runs until it exits unless given).
    #[arg(long, value_parser = opts::positive_duration)]
    duration: Option<Nanos>,
    /// Write the run record (JSON) here.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Run the test application of Regehr's augmented-reservation study
    /// (2001) instead of a command.
    #[arg(long)]
    test_app: bool,
    /// Several reservations for the test app, AMOUNT/PERIOD each (repeat
    /// the option, e.g. --reserve 4ms/20ms --reserve 3ms/10ms): each gets
    /// a reserved thread, placed on the least-utilized CPU (as Rialto/NT does) in a
    /// one-CPU partition of its own. Replaces --budget, --period and --cpu.
    #[arg(long = "reserve", value_name = "AMOUNT/PERIOD")]
    reserve: Vec<String>,
    /// Test application threads per reservation: one reserved plus
    /// time-sharing competitors on its CPU.
    #[arg(long, default_value_t = 2)]
    threads: u32,
    /// A time constraint for the test app to demonstrate: ESTIMATE@START..DEADLINE.
    #[arg(long)]
    constraint: Option<String>,
    /// Enable HRTICK (precise budget enforcement) for the run, restored after.
    #[arg(long)]
    hrtick: bool,
    /// Who stops the test app's reserved thread at its budget: `kernel`
    /// (SCHED_DEADLINE as is), or `thread` (it stops itself once charged
    /// the budget: precise enforcement where the kernel only enforces at the
    /// tick). Default: thread when HRTICK is not on, else kernel.
    #[arg(long, value_enum)]
    enforce: Option<Enforce>,
    /// Clock-read gap above which the test app counts "not running".
    #[arg(long, default_value = "2us", value_parser = opts::positive_duration)]
    gap_threshold: Nanos,
    /// Run a load (as `punctual load SPEC`) while the reservation runs, e.g.
    /// `disk:direct,irq-cpu=1` to make interrupts steal from it.
    #[arg(long, value_name = "SPEC")]
    load: Option<String>,
    /// Undo what killed runs left behind (cpuset partitions, knobs) and exit.
    #[arg(long)]
    cleanup: bool,
    /// Where restore journals are kept.
    #[arg(long, default_value = journal::DEFAULT_DIR, hide = true)]
    journal_dir: PathBuf,
    /// The command to run under the reservation.
    #[arg(last = true)]
    command: Vec<OsString>,
}

/// Who stops the test app's reserved thread at its budget.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum Enforce {
    /// SCHED_DEADLINE as is: at the tick unless HRTICK is on.
    Kernel,
    /// The thread stops itself once charged its budget.
    Thread,
}

fn from_reserve(e: ReserveError) -> CliError {
    match e {
        ReserveError::Refused(m) => CliError::usage(m),
        ReserveError::Failed(m) => CliError::runtime(m),
    }
}

/// What the options ask for, checked.
struct Valid {
    spec: Spec,
    constraint: Option<ConstraintRequest>,
    /// The reservations of `--reserve`, in the order given (empty without).
    several: Vec<Spec>,
}

fn validate(a: &Args) -> CliResult<Valid> {
    if a.reserve.is_empty() {
        let (spec, constraint) = validate_one(a, None)?;
        return Ok(Valid {
            spec,
            constraint,
            several: Vec::new(),
        });
    }
    if !a.test_app {
        return Err(CliError::usage(
            "--reserve runs several reserved test-app threads; add --test-app (a command takes one reservation: --budget and --period)",
        ));
    }
    if a.budget.is_some() || a.period.is_some() || a.cpu.is_some() {
        return Err(CliError::usage(
            "--reserve replaces --budget, --period and --cpu (placement picks the CPUs); give one or the other",
        ));
    }
    if a.constraint.is_some() {
        return Err(CliError::usage(
            "--constraint is demonstrated beside one reservation; it cannot be combined with --reserve",
        ));
    }
    if a.reserve.len() > 16 {
        return Err(CliError::usage(format!(
            "--reserve was given {} times; at most 16 reservations per run",
            a.reserve.len()
        )));
    }
    let mut several = Vec::new();
    for r in &a.reserve {
        let bp = punctual_reserve::placement::parse_reservation(r).map_err(CliError::usage)?;
        let (spec, _) = validate_one(a, Some(bp)).map_err(|e| {
            CliError::usage(format!(
                "--reserve {r}: {}",
                e.to_string().trim_start_matches("--")
            ))
        })?;
        several.push(spec);
    }
    Ok(Valid {
        spec: several[0],
        constraint: None,
        several,
    })
}

fn validate_one(
    a: &Args,
    given: Option<(Nanos, Nanos)>,
) -> CliResult<(Spec, Option<ConstraintRequest>)> {
    let constraint = a
        .constraint
        .as_deref()
        .map(|c| c.parse::<ConstraintRequest>())
        .transpose()
        .map_err(CliError::usage)?;
    // A constraint demonstration alone still needs a reservation to sit
    // beside; default to seed 001's thread A (4 ms every 20 ms).
    let (budget, period) = match (a.budget, a.period) {
        _ if given.is_some() => given.expect("checked"),
        (Some(b), Some(p)) => (b, p),
        (None, None) if constraint.is_some() => (Nanos::from_ms(4), Nanos::from_ms(20)),
        (None, _) => return Err(CliError::usage("--budget is required (e.g. --budget 4ms)")),
        (_, None) => return Err(CliError::usage("--period is required (e.g. --period 20ms)")),
    };
    let mode: Mode = a
        .mode
        .parse()
        .map_err(|e: String| CliError::usage(format!("--{e}")))?;
    let gain = parse_ratio(&a.gain).map_err(|e| CliError::usage(format!("--gain {e}")))?;
    let over =
        parse_ratio(&a.over_reserve).map_err(|e| CliError::usage(format!("--over-reserve {e}")))?;
    let spec = Spec::new(budget, period, a.deadline, mode, gain, over, a.max_budget)
        .map_err(CliError::usage)?;
    if a.test_app != a.command.is_empty() {
        return Err(CliError::usage(
            "give either --test-app or a command after -- (e.g. -- ./my-loop), not both or neither",
        ));
    }
    if a.enforce == Some(Enforce::Thread) && !a.test_app {
        return Err(CliError::usage(
            "--enforce thread needs a thread that reports its own CPU time (--test-app or the library); a command is always enforced by the kernel",
        ));
    }
    if a.threads == 0 || a.threads > 64 {
        return Err(CliError::usage(format!(
            "--threads {} must be between 1 and 64",
            a.threads
        )));
    }
    if constraint.is_some() && !a.test_app {
        return Err(CliError::usage(
            "--constraint is demonstrated by --test-app; add --test-app",
        ));
    }
    if let Some(c) = a.cpu {
        let online = opts::online_cpus();
        if !online.contains(&c) {
            return Err(CliError::usage(format!(
                "--cpu {c} is not online on this machine (online: {})",
                opts::format_cpus(&online)
            )));
        }
    }
    Ok((spec, constraint))
}

fn cleanup(dir: &Path) -> CliResult {
    let rep = session::cleanup(dir);
    if rep.is_empty() {
        println!(
            "nothing to clean up: no journals of dead runs in {}",
            dir.display()
        );
    }
    for u in &rep.undone {
        println!("{u}");
    }
    for p in &rep.live {
        println!("left alone: run {p} is still alive");
    }
    if !rep.problems.is_empty() {
        return Err(CliError::runtime(format!(
            "could not undo everything: {}",
            rep.problems.join("; ")
        )));
    }
    Ok(())
}

pub fn run(a: Args) -> CliResult {
    if a.cleanup {
        return cleanup(&a.journal_dir);
    }
    let Valid {
        spec,
        constraint,
        several,
    } = validate(&a)?;
    opts::check_output("--json", &a.json)?;
    let load_specs = crate::opts::load_specs(a.load.as_deref())?;
    if let Err(e) = punctual_reserve::deadline_permitted() {
        return Err(match e.raw_os_error() {
            // EPERM, EACCES
            Some(1) | Some(13) => CliError::usage(format!(
                "SCHED_DEADLINE is not permitted for this user ({e}): it needs root or CAP_SYS_NICE{}",
                if a.cpu.is_some() { ", and --cpu also needs write access to the cpuset cgroup" } else { "" }
            )),
            _ => CliError::usage(format!(
                "the kernel refused even a 0.1% deadline reservation ({e}); deadline bandwidth is exhausted or SCHED_DEADLINE is unavailable"
            )),
        });
    }
    let stop = crate::interrupt::stop_flag();
    for line in session::restore_stale(&a.journal_dir) {
        eprintln!("punctual reserve: {line}");
    }
    let mut jr = journal::create(&a.journal_dir).map_err(|e| {
        CliError::usage(format!(
            "cannot write the restore journal in {}: {e}",
            a.journal_dir.display()
        ))
    })?;
    let session::Prepared {
        config: cfg,
        sched_dir,
        hrtick_before: hr,
        hrtick_during: hr_now,
        bandwidth: bw,
        tick,
        partition,
        placed,
        parts,
        rd_baseline,
        mut notes,
        mut warnings,
    } = session::prepare(
        &mut jr,
        session::Request {
            spec: &spec,
            several: &several,
            cpu: a.cpu,
            hrtick: a.hrtick,
        },
    )
    .map_err(from_reserve)?;
    let memlock = punctual_live::rt::lock_memory();
    if let Err(e) = &memlock {
        warnings.push(Warning::NoMemlock {
            reason: e.to_string(),
        });
    }
    let started_at = crate::output::rfc3339_now();
    let mut rec = Record::new(
        Source::Measured,
        "reserve",
        punctual_live::sysinfo::collect(),
    );
    rec.started_at = started_at;
    let asked = a.duration.unwrap_or(Nanos::from_secs(10));
    let thread_enforced = match a.enforce {
        Some(Enforce::Thread) => true,
        Some(Enforce::Kernel) => false,
        None => hr_now.enforced_at_tick(),
    };
    rec.set_config("enforce", if thread_enforced { "thread" } else { "kernel" });
    if thread_enforced && a.test_app {
        notes.push(format!(
            "the reserved thread stops itself once charged its budget (--enforce thread{}), as a precise enforcement would; --enforce kernel leaves it to the tick",
            if a.enforce.is_none() { ", the default while HRTICK is not on" } else { "" }
        ));
    } else if a.test_app && hr_now.enforced_at_tick() {
        notes.push("--enforce kernel: the kernel stops the reserved thread at the first tick after its budget and books the overrun as debt on the next period".into());
    } else if !a.test_app && hr_now.enforced_at_tick() {
        notes.push(format!(
            "a command cannot stop itself: the kernel stops it at the first tick after its budget (overrun up to {}, repaid the next period), so choose a budget well above the tick",
            tick.map(|t| t.to_string()).unwrap_or_else(|| "a tick".into())
        ));
    }
    // A command without --duration runs as long as it likes: the load is
    // stopped when it ends, whatever the bound given here.
    let load_for = a.duration.unwrap_or(if a.test_app {
        asked
    } else {
        Nanos::from_secs(24 * 3600)
    });
    let loads = punctual_measure::loads::start(&load_specs, load_for)?;
    let result = if !several.is_empty() {
        std::thread::scope(|sc| {
            let handles: Vec<_> = placed
                .iter()
                .map(|p| {
                    let part = parts.iter().find(|x| x.cpu == p.cpu);
                    let cfg = testapp::Config {
                        spec: several[p.index],
                        threads: a.threads,
                        duration: asked,
                        gap_threshold: a.gap_threshold,
                        max_periods_kept: 100_000,
                        constraint: None,
                        thread_enforced,
                        task: format!("r{}", p.index + 1),
                    };
                    let stop = &stop;
                    sc.spawn(move || testapp::run(&cfg, part, stop))
                })
                .collect();
            handles
                .into_iter()
                .zip(placed.iter().cloned())
                .map(|(h, p)| {
                    h.join()
                        .unwrap_or_else(|_| {
                            Err(punctual_reserve::ReserveError::Failed(
                                "a test-app thread panicked".into(),
                            ))
                        })
                        .map(|o| (p, o))
                })
                .collect::<Result<Vec<_>, _>>()
        })
        .map(Outcome::Several)
    } else if a.test_app {
        let tcfg = testapp::Config {
            spec,
            threads: a.threads,
            duration: asked,
            gap_threshold: a.gap_threshold,
            max_periods_kept: 100_000,
            constraint,
            thread_enforced,
            task: testapp::RESERVED_TASK.into(),
        };
        testapp::run(&tcfg, partition.as_ref(), &stop).map(|o| Outcome::App(Box::new(o)))
    } else {
        command::run(
            &command::Options {
                spec: &spec,
                argv: &a.command,
                partition: partition.as_ref(),
                duration: a.duration,
                max_periods_kept: 100_000,
                trace: true,
                journal_dir: &a.journal_dir,
            },
            &stop,
        )
        .map(|o| Outcome::Cmd(Box::new(o)))
    };
    punctual_measure::loads::finish(loads, &load_specs, &mut rec);
    if memlock.is_ok() {
        punctual_live::rt::unlock_memory();
    }
    // Reservations released less than a deadline ago still hold their
    // bandwidth; the partition stays until the kernel has let it go (see
    // kernel::wait_released: taking it down first corrupts the
    // root-domain totals).
    // Within one relative deadline a released reservation's bandwidth is
    // back (its 0-lag time is at the latest its deadline).
    let release_bound = several
        .iter()
        .chain(std::iter::once(&spec))
        .map(|s| s.deadline)
        .max()
        .unwrap_or(spec.deadline)
        + Nanos::from_ms(10);
    let partitions: Vec<Partition> = partition.into_iter().chain(parts).collect();
    let teardown = session::teardown(
        &mut jr,
        sched_dir.as_deref(),
        &rd_baseline,
        partitions,
        release_bound,
    );
    warnings.extend(teardown.warnings());
    let outcome = result.map_err(from_reserve)?;
    let settings = record::Settings {
        cpu: a.cpu,
        hrtick: a.hrtick,
        gap_threshold: a.gap_threshold,
        test_app: a.test_app,
        threads: a.threads,
        duration: a.duration,
        asked,
        constraint: a.constraint.clone(),
        reserve: a.reserve.clone(),
        command: a.command.clone(),
        interrupted: crate::interrupt::interrupted(&crate::interrupt::stop_flag()),
    };
    let facts = record::KernelFacts {
        hrtick_before: hr,
        hrtick_during: hr_now,
        hz: cfg.hz,
        bandwidth_at_start: bw,
    };
    let mut report = record::fill_record(&mut rec, &settings, &spec, &outcome, &facts);
    report.teardown_wait = teardown.quiesce.clone();
    report.root_domain_repair = teardown.repair.clone().ok().flatten();
    report.write_into(&mut rec);
    rec.warnings.extend(warnings);
    if let Some(p) = &a.json {
        crate::output::write_record(&rec, p)?;
    }
    let mut text = summary(&rec, &a, &spec, &outcome, &notes);
    text.push_str(&punctual_report::text::load::load_lines(&rec));
    // A closed pipe (| head) must not turn a finished run into a panic.
    let _ = std::io::Write::write_all(&mut std::io::stdout(), text.as_bytes());
    if let Outcome::Cmd(c) = &outcome {
        if let Some(code) = c.exit_code {
            if code != 0 && !c.ended_by_us {
                return Err(CliError::runtime(format!(
                    "the command exited with status {code}"
                )));
            }
        }
    }
    Ok(())
}

fn summary(rec: &Record, a: &Args, spec: &Spec, outcome: &Outcome, notes: &[String]) -> String {
    use std::fmt::Write;
    let mut w = String::new();
    let pct = |x: f64| format!("{:.2}%", x * 100.0);
    let place = match a.cpu {
        Some(c) => format!("CPU {c} (exclusive cpuset partition for the run)"),
        None => "any CPU (global EDF)".into(),
    };
    let mode = match spec.mode {
        Mode::Feedback => format!("feedback (G={})", spec.gain_ratio),
        m => m.name().to_string(),
    };
    if let Outcome::Several(v) = outcome {
        let _ = writeln!(
            w,
            "reserve: {} reservations, mode {mode}, over-reserve {:+.0}%, each in a one-CPU partition",
            v.len(),
            spec.over_reserve_ratio * 100.0
        );
        for n in notes {
            let _ = writeln!(w, "  {n}");
        }
        for (p, o) in v {
            let s = &o.summary;
            let n = s.periods.max(1);
            let _ = writeln!(w,
                "  {} {}/{} on CPU {}: {} periods, {} missed ({:.2}%), received/reserved mean {:.3}, stolen {:.2}%",
                s.task,
                s.reserved_ns,
                p.period_ns,
                p.cpu,
                s.periods,
                s.misses,
                s.misses as f64 / n as f64 * 100.0,
                s.received_total_ns.0 as f64 / (s.reserved_ns.0 as f64 * n as f64),
                o.stolen.fraction * 100.0
            );
            if spec.mode == Mode::Feedback {
                let _ = writeln!(
                    w,
                    "    controller: runtime mean {}, {} updates, overhead {}",
                    o.requested_mean_ns, o.controller_updates, o.controller_overhead_ns
                );
            }
        }
        for warn in &rec.warnings {
            let _ = writeln!(w, "  warning: {}", warn.message());
        }
        return w;
    }
    let _ = writeln!(w,
        "reserve: {} every {} (deadline {}), mode {mode}, over-reserve {:+.0}% -> asks {} (max {}), on {place}",
        spec.budget,
        spec.period,
        spec.deadline,
        spec.over_reserve_ratio * 100.0,
        spec.target(),
        spec.max_budget
    );
    for n in notes {
        let _ = writeln!(w, "  {n}");
    }
    let s = match rec.period_summary.first() {
        Some(s) => s,
        None => return w,
    };
    let miss = s.misses as f64 / s.periods.max(1) as f64;
    let _ = writeln!(
        w,
        "  {} periods in {}, {} missed ({})",
        s.periods,
        rec.duration_ns,
        s.misses,
        pct(miss)
    );
    let ratio = s.received_total_ns.0 as f64 / (s.reserved_ns.0 as f64 * s.periods.max(1) as f64);
    match outcome {
        Outcome::App(o) => {
            let _ = writeln!(w,
                "  received/reserved mean {ratio:.3}; stolen {} of the time owed ({} gaps, longest {})",
                pct(o.stolen.fraction),
                o.stolen.intervals,
                o.stolen.max_ns
            );
            let per = |n: Nanos| Nanos(n.0 / s.periods.max(1));
            let _ = writeln!(
                w,
                "  per period: received {}, charged {}, requested {}",
                per(s.received_total_ns),
                per(o.charged_total_ns),
                o.requested_mean_ns
            );
            if spec.mode == Mode::Feedback {
                let reserved_total = spec.budget.0 as f64 * s.periods.max(1) as f64;
                let _ = writeln!(w,
                    "  controller: {} updates, {} applied, {} refused by admission, overhead {} ({:.4}% of reserved CPU)",
                    o.controller_updates,
                    o.controller_applied,
                    o.setattr_refusals,
                    o.controller_overhead_ns,
                    o.controller_overhead_ns.0 as f64 / reserved_total * 100.0
                );
            }
            if !o.enforce_overhead_ns.is_zero() {
                let reserved_total = spec.budget.0 as f64 * s.periods.max(1) as f64;
                let _ = writeln!(
                    w,
                    "  self-enforcement: CPU clock reads cost {} ({:.4}% of reserved CPU)",
                    o.enforce_overhead_ns,
                    o.enforce_overhead_ns.0 as f64 / reserved_total * 100.0
                );
            }
            for b in &o.background {
                let _ = writeln!(
                    w,
                    "  competitor {}: received {} of {}",
                    b.name,
                    pct(b.received_ns.0 as f64 / b.observed_ns.0.max(1) as f64),
                    b.observed_ns
                );
            }
            if let Some(c) = &o.constraint {
                match &c.decision {
                    punctual_reserve::constraint::Decision::Granted => {
                        let _ = writeln!(
                            w,
                            "  constraint {}@{}..{}: granted; {}",
                            c.estimate_ns,
                            c.start_ns,
                            c.deadline_ns,
                            match c.completed_at_ns {
                                Some(t) => format!(
                                    "done at {t}, deadline {}",
                                    if c.met_deadline { "met" } else { "MISSED" }
                                ),
                                None => "did not complete".into(),
                            }
                        );
                    }
                    punctual_reserve::constraint::Decision::Denied { reason } => {
                        let _ = writeln!(
                            w,
                            "  constraint {}@{}..{}: denied up front: {reason}",
                            c.estimate_ns, c.start_ns, c.deadline_ns
                        );
                    }
                }
            }
        }
        Outcome::Several(_) => {}
        Outcome::Cmd(c) => {
            let per = |n: Nanos| Nanos(n.0 / s.periods.max(1));
            if c.received_source == "trace" {
                let _ = writeln!(w,
                    "  received/reserved mean {ratio:.3} (from the kernel trace: charged {} per period, of which stolen by interrupts {}, {})",
                    per(c.charged_total_ns),
                    per(s.stolen_total_ns),
                    pct(s.stolen_total_ns.0 as f64 / c.charged_total_ns.0.max(1) as f64)
                );
                if s.misses > 0 {
                    let _ = writeln!(w,
                        "  missed periods: {} charged less than the budget by the kernel (stopped short: tick enforcement repays an earlier overrun), {} charged enough but robbed by interrupts",
                        c.misses_short_charged, c.misses_stolen
                    );
                }
                let _ = writeln!(
                    w,
                    "  charged over the run: trace {}, schedstat {}{}{}",
                    c.charged_total_ns,
                    c.schedstat_total_ns,
                    if c.host_steal_ns > Nanos::ZERO {
                        format!(
                            " (schedstat leaves out hypervisor steal: {} on the CPU over the run)",
                            c.host_steal_ns
                        )
                    } else {
                        String::new()
                    },
                    if c.incomplete_periods > 0 {
                        format!(
                            "; {} period(s) not fully seen ({} events lost)",
                            c.incomplete_periods, c.trace_lost_events
                        )
                    } else {
                        String::new()
                    }
                );
            } else {
                let _ = writeln!(w,
                    "  charged/reserved mean {ratio:.3} (charged CPU time from schedstat: without the kernel trace, stolen time is not visible)"
                );
            }
            if spec.mode == Mode::Feedback && c.received_source == "trace" {
                let reserved_total = spec.budget.0 as f64 * s.periods.max(1) as f64;
                let _ = writeln!(w,
                    "  controller: runtime mean {} (target {}), {} updates, {} applied by sched_setattr, {} refused by admission, overhead {} ({:.4}% of reserved CPU)",
                    c.requested_mean_ns,
                    spec.target(),
                    c.controller_updates,
                    c.controller_applied,
                    c.setattr_refusals,
                    c.controller_overhead_ns,
                    c.controller_overhead_ns.0 as f64 / reserved_total * 100.0
                );
            }
            if let Some(code) = c.exit_code {
                let _ = writeln!(
                    w,
                    "  command exited with status {code}{}",
                    if c.ended_by_us {
                        " (ended by punctual at --duration)"
                    } else {
                        ""
                    }
                );
            }
        }
    }
    for warn in &rec.warnings {
        let _ = writeln!(w, "  warning: {}", warn.message());
    }
    w
}
