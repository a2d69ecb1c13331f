//! `punctual reserve`: real threads under CPU reservations (SCHED_DEADLINE
//! as Rez, Rez-C, Rez-FB), time constraints, and cleanup of leftovers.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use punctual_record::{Platform, Record, Source, Warning};
use punctual_reserve::constraint::ConstraintRequest;
use punctual_reserve::journal::{self, Journal};
use punctual_reserve::kernel::{self, Hrtick};
use punctual_reserve::partition::{self, Partition};
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
    /// Run seed 004's test application instead of a command.
    #[arg(long)]
    test_app: bool,
    /// Several reservations for the test app, AMOUNT/PERIOD each (repeat
    /// the option, e.g. --reserve 4ms/20ms --reserve 3ms/10ms): each gets
    /// a reserved thread, placed on the least-utilized CPU (seed 001) in a
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
    #[arg(long)]
    enforce: Option<String>,
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
    if let Some(e) = a.enforce.as_deref() {
        if e != "kernel" && e != "thread" {
            return Err(CliError::usage(format!(
                "--enforce '{e}' is not one of kernel, thread"
            )));
        }
        if e == "thread" && !a.test_app {
            return Err(CliError::usage(
                "--enforce thread needs a thread that reports its own CPU time (--test-app or the library); a command is always enforced by the kernel",
            ));
        }
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

/// One line for a root-domain repair: what was wrong and whether the
/// rebuild cleared it.
fn repair_sentence(r: &kernel::Repair) -> String {
    let list = kernel::format_totals;
    if r.repaired {
        format!(
            "the kernel left its deadline bandwidth total below zero when the partition came down ({}), which would refuse every SCHED_DEADLINE task; punctual rebuilt the root domains ({} rebuild(s)) and the totals read {} again",
            list(&r.found),
            r.rebuilds,
            list(&r.after)
        )
    } else {
        format!(
            "the kernel left its deadline bandwidth total below zero when the partition came down ({}) and {} rebuild(s) of the root domains did not clear it ({}): SCHED_DEADLINE will be refused until it is; try punctual reserve --cleanup, or toggle cpuset.sched_load_balance with an exclusive cpuset",
            list(&r.found),
            r.rebuilds,
            list(&r.after)
        )
    }
}

/// A negative root-domain total left by some earlier run (or by a kernel
/// bug outside punctual) refuses every deadline task; `--cleanup` is where
/// a user who was told so goes, so it checks and repairs that too.
fn cleanup_root_domains(dir: &Path, window: Nanos) -> Result<Option<kernel::Repair>, String> {
    // Without a journal (no root) debugfs cannot be mounted, but an
    // already mounted one is still read: a user without root is told of a
    // negative total, just not able to clear it.
    let mut jr = Journal::create(dir).ok();
    let sched_dir = kernel::sched_debug_dir(jr.as_mut());
    let online = std::fs::read_to_string("/sys/devices/system/cpu/online").unwrap_or_default();
    let cpu = partition::parse_cpu_list(&online).into_iter().max();
    let rep = match (&mut jr, cpu) {
        (Some(j), Some(cpu)) if cpu > 0 => {
            kernel::repair_negative_totals(sched_dir.as_deref(), window, || {
                partition::rebuild_root_domains(j, cpu).map_err(|e| e.to_string())
            })
        }
        _ => {
            let found =
                kernel::negative_totals(&kernel::root_domain_bandwidth(sched_dir.as_deref()));
            if found.is_empty() {
                Ok(None)
            } else {
                Err(format!(
                    "the deadline bandwidth total is below zero ({}) and clearing it takes root and a machine of two or more CPUs",
                    kernel::format_totals(&found)
                ))
            }
        }
    };
    let errors = jr.map(|mut j| j.undo_all()).unwrap_or_default();
    if !errors.is_empty() {
        return Err(errors.join("; "));
    }
    rep
}

fn cleanup(dir: &Path) -> CliResult {
    let mut rep = journal::cleanup_stale(dir);
    // A dead run's deadline threads give back their bandwidth at their
    // 0-lag time, which can come after the rebuild its cpusets' removal
    // just made, and drive a total below zero (seen in CI after SIGKILL):
    // watch for that for a second (reservations' deadlines are below it)
    // when anything of a dead run was undone.
    let window = if rep.undone.is_empty() {
        Nanos::ZERO
    } else {
        Nanos::from_secs(1)
    };
    match cleanup_root_domains(dir, window) {
        Ok(Some(r)) => {
            let line = repair_sentence(&r);
            if r.repaired {
                rep.undone.push(line);
            } else {
                rep.errors.push(line);
            }
        }
        Ok(None) => {}
        Err(e) => rep.errors.push(e),
    }
    // A killed command run also leaves the tracing instance it accounted
    // with (its own journal, in the trace crate's format).
    let tr = punctual_trace::tracefs::cleanup_stale(dir);
    rep.undone.extend(tr.actions);
    rep.errors.extend(tr.problems);
    if rep.cleaned.is_empty() && rep.undone.is_empty() && rep.errors.is_empty() {
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
    if !rep.errors.is_empty() {
        return Err(CliError::runtime(format!(
            "could not undo everything: {}",
            rep.errors.join("; ")
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
    let stale = journal::cleanup_stale(&a.journal_dir);
    for u in &stale.undone {
        eprintln!("punctual reserve: cleaned up after a killed run: {u}");
    }
    if !stale.undone.is_empty() {
        // As `--cleanup` does: the killed run's bandwidth may come back
        // after the rebuild its cpusets' removal made (see cleanup()).
        match cleanup_root_domains(&a.journal_dir, Nanos::from_secs(1)) {
            Ok(Some(r)) => eprintln!("punctual reserve: {}", repair_sentence(&r)),
            Ok(None) => {}
            Err(e) => eprintln!("punctual reserve: {e}"),
        }
    }
    let mut jr = Journal::create(&a.journal_dir).map_err(|e| {
        CliError::usage(format!(
            "cannot write the restore journal in {}: {e}",
            a.journal_dir.display()
        ))
    })?;
    let mut warnings: Vec<Warning> = Vec::new();
    let cfg = kernel::kernel_config();
    let sched_dir = kernel::sched_debug_dir(Some(&mut jr));
    let hr = kernel::hrtick_state(&cfg, sched_dir.as_deref());
    let bw = kernel::bandwidth(sched_dir.as_deref());
    if a.hrtick {
        let dir = sched_dir.clone().unwrap_or_default();
        kernel::enable_hrtick(&mut jr, &dir, &hr).map_err(CliError::usage)?;
    }
    let hr_now = if a.hrtick {
        kernel::hrtick_state(&cfg, sched_dir.as_deref())
    } else {
        hr.clone()
    };
    let tick = cfg.hz.map(|hz| Nanos(1_000_000_000 / hz as u64));
    let mut notes = Vec::new();
    if hr_now.enforced_at_tick() {
        let why = match &hr_now {
            Hrtick::Off { feature } => format!("{feature} is off"),
            Hrtick::NotBuilt => "the kernel has no HRTICK".into(),
            Hrtick::Unknown { reason } => {
                format!("HRTICK state unknown, kernel default is off: {reason}")
            }
            Hrtick::On { .. } => unreachable!(),
        };
        let tick_s = tick
            .map(|t| t.to_string())
            .unwrap_or_else(|| "unknown".into());
        notes.push(format!(
            "budgets are enforced at the tick ({tick_s}; {why})"
        ));
        if let Some(t) = tick {
            if spec.target() < t * 10 {
                warnings.push(Warning::Other {
                    message: format!(
                        "the budget {} is not much larger than the tick ({t}) and HRTICK is not on: the kernel stops a reservation only at a tick, so each period it can overrun by up to {t} and then starts the next one in debt{}",
                        spec.target(),
                        if matches!(hr_now, Hrtick::Off { .. }) { "; --hrtick enables precise enforcement for the run" } else { "" }
                    ),
                });
            }
        }
    }
    if cfg.irq_time_accounting == Some(false) {
        warnings.push(Warning::NoIrqTimeAccounting);
    }
    let partition = match a.cpu {
        Some(c) => Some(Partition::create(&mut jr, c).map_err(from_reserve)?),
        None => None,
    };
    // Several reservations: placed by the shared plan in increasing order
    // of CPU utilization, counting the deadline bandwidth already there;
    // each CPU used gets a one-CPU partition.
    let mut placed = Vec::new();
    let mut parts = Vec::new();
    if !several.is_empty() {
        let cpus = match punctual_reserve::partition::find_cpuset_fs() {
            Some(punctual_reserve::partition::CpusetFs::V1(root)) => {
                punctual_reserve::partition::parse_cpu_list(
                    &std::fs::read_to_string(root.join("cpuset.cpus")).unwrap_or_default(),
                )
            }
            _ => opts::online_cpus(),
        };
        let existing = punctual_reserve::placement::existing_deadline_load();
        let reqs: Vec<(Nanos, Nanos)> = several
            .iter()
            .map(|s| (s.admitted_runtime(), s.period))
            .collect();
        placed = punctual_reserve::placement::place(
            &reqs,
            &cpus,
            &existing,
            bw.limit_per_cpu_ratio.unwrap_or(1.0),
        )
        .map_err(CliError::usage)?;
        notes.push(format!(
            "placement (shared plan, least-utilized CPU first; {} existing deadline thread(s) counted):",
            existing.len()
        ));
        for p in &placed {
            notes.push(format!(
                "  r{} {}/{} (admitted {}) -> CPU {}: reserved {:.1}% before, {:.1}% after",
                p.index + 1,
                several[p.index].budget,
                p.period_ns,
                p.runtime_ns,
                p.cpu,
                p.cpu_utilization_before_ratio * 100.0,
                p.cpu_utilization_after_ratio * 100.0
            ));
        }
        let mut used: Vec<u32> = placed.iter().map(|p| p.cpu).collect();
        used.sort_unstable();
        used.dedup();
        parts = Partition::create_set(&mut jr, &used).map_err(from_reserve)?;
    }
    // The root domains' deadline totals before anything of this run is
    // admitted in them: what the teardown waits to see again.
    let rd_baseline = kernel::root_domain_bandwidth(sched_dir.as_deref());
    let memlock = punctual_live::rt::lock_memory();
    if let Err(e) = &memlock {
        warnings.push(Warning::NoMemlock {
            reason: e.to_string(),
        });
    }
    let started_at = crate::output::rfc3339_now();
    let mut rec = Record::new(Source::Measured, "reserve", platform(&cfg));
    rec.started_at = started_at;
    let asked = a.duration.unwrap_or(Nanos::from_secs(10));
    let thread_enforced = match a.enforce.as_deref() {
        Some("thread") => true,
        Some("kernel") => false,
        None => hr_now.enforced_at_tick(),
        Some(other) => unreachable!("validated: {other}"),
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
    let quiesce = if partition.is_some() || !parts.is_empty() {
        let cpus: Vec<u32> = partition
            .iter()
            .chain(parts.iter())
            .map(|p| p.cpu)
            .collect();
        Some(kernel::wait_released(
            sched_dir.as_deref(),
            &rd_baseline,
            &cpus,
            release_bound,
        ))
    } else {
        None
    };
    let rebuild_cpu = partition.iter().chain(parts.iter()).map(|p| p.cpu).max();
    drop(partition);
    drop(parts);
    let mut restore_errors = jr.undo_all_but_mounts();
    // The partitions are down; a late release can still have driven a
    // root-domain total below zero, which refuses every deadline task on
    // the machine until a rebuild (kernel::repair_negative_totals).
    let repair = match (rebuild_cpu, &quiesce) {
        (Some(cpu), Some(q)) if q.how != "bound" => {
            // Released bandwidth was waited for before the teardown, so a
            // late release is not expected; one more deadline covers it.
            kernel::repair_negative_totals(sched_dir.as_deref(), release_bound, || {
                partition::rebuild_root_domains(&mut jr, cpu).map_err(|e| e.to_string())
            })
        }
        _ => Ok(None),
    };
    restore_errors.extend(jr.undo_all());
    match &repair {
        Ok(Some(r)) => warnings.push(Warning::Other {
            message: repair_sentence(r),
        }),
        Ok(None) => {}
        Err(e) => warnings.push(Warning::Other {
            message: format!(
                "could not check the kernel's deadline bandwidth totals after the partition came down ({e}); if SCHED_DEADLINE is refused from now on, run punctual reserve --cleanup"
            ),
        }),
    }
    for e in &restore_errors {
        warnings.push(Warning::Other {
            message: format!("could not restore a setting: {e}; run punctual reserve --cleanup"),
        });
    }
    let outcome = result.map_err(from_reserve)?;
    fill_record(
        &mut rec, &a, &spec, &outcome, &hr, &hr_now, &bw, cfg.hz, asked,
    );
    if let Some(q) = &quiesce {
        rec.extra.insert(
            "teardown_wait".into(),
            serde_json::to_value(q).unwrap_or_default(),
        );
    }
    if let Ok(Some(r)) = &repair {
        rec.extra.insert(
            "root_domain_repair".into(),
            serde_json::to_value(r).unwrap_or_default(),
        );
    }
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

enum Outcome {
    App(Box<testapp::Outcome>),
    Cmd(Box<command::Outcome>),
    Several(Vec<(punctual_reserve::placement::Placed, testapp::Outcome)>),
}

fn platform(cfg: &kernel::KernelConfig) -> Platform {
    let read = |p: &str| {
        std::fs::read_to_string(p)
            .ok()
            .map(|s| s.trim().to_string())
    };
    Platform {
        hostname: read("/proc/sys/kernel/hostname"),
        kernel: read("/proc/sys/kernel/osrelease"),
        logical_cpus: std::thread::available_parallelism()
            .ok()
            .map(|n| n.get() as u32),
        online_cpus: read("/sys/devices/system/cpu/online"),
        hz: cfg.hz,
        irq_time_accounting: cfg.irq_time_accounting,
        rt_runtime_us: read("/proc/sys/kernel/sched_rt_runtime_us").and_then(|s| s.parse().ok()),
        rt_period_us: read("/proc/sys/kernel/sched_rt_period_us").and_then(|s| s.parse().ok()),
        ..Default::default()
    }
}

#[allow(clippy::too_many_arguments)]
fn fill_record(
    rec: &mut Record,
    a: &Args,
    spec: &Spec,
    outcome: &Outcome,
    hr: &Hrtick,
    hr_now: &Hrtick,
    bw: &kernel::Bandwidth,
    hz: Option<u32>,
    asked: Nanos,
) {
    // With several reservations their amounts are in `config.reserve` and
    // `extra.reservations`; the single-reservation keys would only name
    // the first.
    if !matches!(outcome, Outcome::Several(_)) {
        rec.set_config("budget_ns", spec.budget);
        rec.set_config("period_ns", spec.period);
        rec.set_config("deadline_ns", spec.deadline);
        rec.set_config("requested_ns", spec.target());
        rec.set_config("max_budget_ns", spec.max_budget);
    }
    rec.set_config("mode", spec.mode);
    rec.set_config("gain_ratio", spec.gain_ratio);
    rec.set_config("over_reserve_ratio", spec.over_reserve_ratio);
    rec.set_config("cpu", a.cpu);
    rec.set_config("hrtick_asked", a.hrtick);
    rec.set_config("gap_threshold_ns", a.gap_threshold);
    if a.test_app {
        rec.set_config("test_app_threads", a.threads);
        rec.set_config("duration_ns", asked);
        if let Some(c) = &a.constraint {
            rec.set_config("constraint", c);
        }
    } else {
        let argv: Vec<String> = a
            .command
            .iter()
            .map(|s| s.to_string_lossy().into())
            .collect();
        rec.set_config("command", argv);
        rec.set_config("duration_ns", a.duration);
    }
    let ser = |v: &dyn erased::Ser| v.value();
    rec.extra.insert("hrtick_before".into(), ser(hr));
    rec.extra.insert("hrtick_during".into(), ser(hr_now));
    rec.extra.insert("hz".into(), serde_json::json!(hz));
    rec.extra.insert("bandwidth_at_start".into(), ser(bw));
    match outcome {
        Outcome::Several(v) => {
            rec.duration_ns = v.iter().map(|(_, o)| o.elapsed).max().unwrap_or_default();
            rec.interrupted = v.iter().any(|(_, o)| o.interrupted);
            let mut per = Vec::new();
            for (p, o) in v {
                rec.periods.extend(o.periods.iter().cloned());
                rec.periods_dropped += o.periods_dropped;
                rec.period_summary.push(o.summary.clone());
                rec.series.push(o.received.clone());
                rec.series.push(o.gaps.clone());
                rec.stolen.push(o.stolen.clone());
                per.push(serde_json::json!({
                    "task": o.summary.task,
                    "cpu": p.cpu,
                    "budget_ns": o.summary.reserved_ns,
                    "period_ns": p.period_ns,
                    "admitted_ns": p.runtime_ns,
                    "requested_mean_ns": o.requested_mean_ns,
                    "charged_total_ns": o.charged_total_ns,
                    "controller_overhead_ns": o.controller_overhead_ns,
                }));
            }
            rec.set_config("reserve", a.reserve.clone());
            rec.set_config("test_app_threads", a.threads);
            rec.set_config("duration_ns", asked);
            rec.extra.insert(
                "placement".into(),
                ser(&v.iter().map(|(p, _)| p.clone()).collect::<Vec<_>>()),
            );
            rec.extra
                .insert("reservations".into(), serde_json::json!(per));
            rec.extra
                .insert("received_source".into(), serde_json::json!("polling"));
        }
        Outcome::App(o) => {
            rec.duration_ns = o.elapsed;
            rec.interrupted = o.interrupted;
            if o.interrupted {
                rec.warnings.push(Warning::Interrupted {
                    completed_ns: o.elapsed.0,
                    asked_ns: asked.0,
                });
            }
            rec.periods = o.periods.clone();
            rec.periods_dropped = o.periods_dropped;
            rec.period_summary = vec![o.summary.clone()];
            rec.series = vec![o.received.clone(), o.gaps.clone()];
            rec.stolen = vec![o.stolen.clone()];
            let reserved_total = spec.budget.0 as f64 * o.summary.periods.max(1) as f64;
            rec.extra
                .insert("received_source".into(), serde_json::json!("polling"));
            rec.extra
                .insert("period_charged_ns".into(), serde_json::json!(o.charged_ns));
            rec.extra.insert(
                "charged_total_ns".into(),
                serde_json::json!(o.charged_total_ns),
            );
            rec.extra.insert(
                "requested_mean_ns".into(),
                serde_json::json!(o.requested_mean_ns),
            );
            rec.extra.insert(
                "controller".into(),
                serde_json::json!({
                    "updates": o.controller_updates,
                    "applied": o.controller_applied,
                    "enforce_overhead_ns": o.enforce_overhead_ns,
                    "enforce_overhead_ratio_of_reserved": o.enforce_overhead_ns.0 as f64 / reserved_total,
                    "overhead_ns": o.controller_overhead_ns,
                    "overhead_ratio_of_reserved": o.controller_overhead_ns.0 as f64 / reserved_total,
                    "setattr_refusals": o.setattr_refusals,
                    "clamped_periods": o.clamped_periods,
                }),
            );
            rec.extra.insert("background".into(), ser(&o.background));
            if let Some(c) = &o.constraint {
                rec.extra.insert("constraint".into(), ser(c));
            }
        }
        Outcome::Cmd(c) => {
            rec.duration_ns = c.elapsed;
            rec.interrupted = crate::interrupt::interrupted(&crate::interrupt::stop_flag());
            rec.periods = c.periods.clone();
            rec.periods_dropped = c.periods_dropped;
            rec.period_summary = vec![c.summary.clone()];
            rec.extra.insert(
                "received_source".into(),
                serde_json::json!(c.received_source),
            );
            rec.extra
                .insert("period_charged_ns".into(), serde_json::json!(c.charged_ns));
            rec.extra.insert(
                "charged_total_ns".into(),
                serde_json::json!(c.charged_total_ns),
            );
            rec.extra.insert(
                "schedstat_charged_total_ns".into(),
                serde_json::json!(c.schedstat_total_ns),
            );
            rec.extra.insert(
                "requested_mean_ns".into(),
                serde_json::json!(c.requested_mean_ns),
            );
            let reserved_total = spec.budget.0 as f64 * c.summary.periods.max(1) as f64;
            rec.extra.insert(
                "controller".into(),
                serde_json::json!({
                    "updates": c.controller_updates,
                    "applied": c.controller_applied,
                    "overhead_ns": c.controller_overhead_ns,
                    "overhead_ratio_of_reserved": c.controller_overhead_ns.0 as f64 / reserved_total,
                    "setattr_refusals": c.setattr_refusals,
                    "clamped_periods": c.clamped_periods,
                }),
            );
            rec.extra.insert(
                "misses".into(),
                serde_json::json!({
                    "short_charged": c.misses_short_charged,
                    "stolen": c.misses_stolen,
                }),
            );
            rec.extra.insert(
                "trace".into(),
                serde_json::json!({
                    "events": c.trace_events,
                    "lost_events": c.trace_lost_events,
                    "incomplete_periods": c.incomplete_periods,
                }),
            );
            if let Some(why) = &c.no_tracing {
                rec.warnings.push(Warning::Other {
                    message: format!("kernel tracing unavailable ({why}): received is the charged CPU time from schedstat, and stolen time is unknown"),
                });
            }
            rec.extra
                .insert("exit_code".into(), serde_json::json!(c.exit_code));
            for w in &c.warnings {
                rec.warnings.push(Warning::Other { message: w.clone() });
            }
        }
    }
}

mod erased {
    pub trait Ser {
        fn value(&self) -> serde_json::Value;
    }
    impl<T: serde::Serialize> Ser for T {
        fn value(&self) -> serde_json::Value {
            serde_json::to_value(self).unwrap_or(serde_json::Value::Null)
        }
    }
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
                    "  charged over the run: trace {}, schedstat {}{}",
                    c.charged_total_ns,
                    c.schedstat_total_ns,
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
