//! `punctual reserve`: real threads under CPU reservations (SCHED_DEADLINE
//! as Rez, Rez-C, Rez-FB), time constraints, and cleanup of leftovers.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use punctual_record::Record;
use punctual_reserve::constraint::ConstraintRequest;
use punctual_reserve::journal;
use punctual_reserve::record;
use punctual_reserve::session;
use punctual_reserve::{Mode, ReserveError, Spec};
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
    /// What the reservation does about time stolen from it (interrupts,
    /// kernel threads): `plain` runs its budget and loses what was stolen,
    /// `catchup` makes the stolen time up in the same period (up to
    /// --max-budget), `feedback` adjusts next period's budget from what
    /// the thread received (docs/reserve.md; sources in docs/references.md).
    #[arg(long, default_value = "plain")]
    mode: String,
    /// How strongly `feedback` corrects the budget each period, in (0, 2):
    /// the share of the last period's shortfall added back.
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
    /// Run the built-in test application (a reserved thread and
    /// time-sharing competitors on its CPU) instead of a command.
    #[arg(long)]
    test_app: bool,
    /// Several reservations for the test app, AMOUNT/PERIOD each (repeat
    /// the option, e.g. --reserve 4ms/20ms --reserve 3ms/10ms): each gets
    /// a reserved thread, placed on the least-utilized CPU in a one-CPU
    /// partition of its own. Replaces --budget, --period and --cpu.
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

/// The loads beside the run, through the same worker as every verb's
/// `--load`.
struct Host {
    specs: Vec<punctual_loads::LoadSpec>,
    running: Option<punctual_loads::RunningLoads>,
}

impl session::Host for Host {
    fn start_loads(&mut self, duration: Nanos) -> Result<(), ReserveError> {
        self.running =
            punctual_measure::loads::start(&self.specs, duration).map_err(|e| match e {
                punctual_measure::MeasureError::Usage(m) => ReserveError::Refused(m),
                punctual_measure::MeasureError::Runtime(m) => ReserveError::Failed(m),
            })?;
        Ok(())
    }

    fn finish_loads(&mut self, rec: &mut Record) {
        punctual_measure::loads::finish(self.running.take(), &self.specs, rec);
    }

    fn now(&self) -> String {
        crate::output::rfc3339_now()
    }

    fn note(&self, line: &str) {
        eprintln!("{line}");
    }
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
    // beside; default to the Rialto talk's thread A (4 ms every 20 ms).
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
    // The test app waits for its constraint thread, so a deadline past the
    // run's end would stretch the run beyond what was asked.
    if let (Some(c), Some(text)) = (&constraint, &a.constraint) {
        let run_for = a.duration.unwrap_or(session::TEST_APP_DURATION);
        if c.deadline > run_for {
            return Err(CliError::usage(format!(
                "--constraint {text} ends {} after the start, later than the run's {run_for}{}: give --duration {} or more, or an earlier deadline",
                c.deadline,
                if a.duration.is_some() { " (--duration)" } else { " (the test app's default length)" },
                c.deadline
            )));
        }
    }
    if let Some(c) = a.cpu {
        let online = opts::online_cpus();
        if !online.contains(&c) {
            return Err(CliError::usage(format!(
                "--cpu {c} is not online on this machine (online: {})",
                crate::output::format_cpus(&online)
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
    let req = session::RunRequest {
        spec,
        several,
        constraint,
        enforce: a.enforce.map(|e| match e {
            Enforce::Kernel => session::Enforce::Kernel,
            Enforce::Thread => session::Enforce::Thread,
        }),
        settings: record::Settings {
            cpu: a.cpu,
            hrtick: a.hrtick,
            gap_threshold: a.gap_threshold,
            test_app: a.test_app,
            threads: a.threads,
            duration: a.duration,
            asked: a.duration.unwrap_or(session::TEST_APP_DURATION),
            constraint: a.constraint.clone(),
            reserve: a.reserve.clone(),
            command: a.command.clone(),
            interrupted: false,
        },
        journal_dir: &a.journal_dir,
    };
    let mut host = Host {
        specs: load_specs,
        running: None,
    };
    let done = session::run(&req, &mut host, &stop).map_err(from_reserve)?;
    let rec = done.record;
    if let Some(p) = &a.json {
        crate::output::write_record(&rec, p)?;
    }
    let text = punctual_report::text::render(&rec).map_err(|e| CliError::runtime(e.to_string()))?;
    // A closed pipe (| head) must not turn a finished run into a panic.
    let _ = std::io::Write::write_all(&mut std::io::stdout(), text.as_bytes());
    if let Some(code) = done.command_failed {
        return Err(CliError::runtime(format!(
            "the command exited with status {code}"
        )));
    }
    Ok(())
}
