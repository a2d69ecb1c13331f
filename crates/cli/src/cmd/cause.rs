//! `punctual cause`: run a probe beside the tracefs flight recorder and
//! name what filled every spike and every stolen interval.
//!
//! The probes are `punctual timer`'s and `punctual noise`'s own (same
//! threads, clocks, policies and record), so a `cause` record reads like
//! theirs with the causes filled in; the noise probe also keeps every gap
//! so the whole stolen time is split interval by interval.

use std::sync::Arc;

use clap::ValueEnum;
use punctual_live::noise::NoiseConfig;
use punctual_live::rt::Policy;
use punctual_live::timer::TimerConfig;
use punctual_measure::{Noise, Probe, ProbeRequest, Session, Timer, Tracing};
use punctual_record::Warning;
use punctual_trace::recorder::Options;
use punctual_units::Nanos;

use crate::error::{CliError, CliResult};
use crate::opts::{self, ClockArg, PolicyArg, ProbeArgs};
use crate::output::Terminal;

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ProbeArg {
    /// Periodic timer thread (`punctual timer`): wake-up latency spikes.
    Timer,
    /// Busy-polling thread (`punctual noise`): stolen intervals.
    Noise,
}

#[derive(clap::Args, Debug)]
#[command(
    after_help = "Examples:\n  punctual cause --probe noise --cpus 1 --duration 10s\n  punctual cause --cpus 1 --neighbor --show-spikes 5 --json c.json\n  punctual cause --probe noise --cpus 1 --load disk:direct,irq-cpu=1\n  punctual cause --cleanup"
)]
pub struct Args {
    /// Which probe runs beside the recorder.
    #[arg(long, value_enum, default_value = "timer")]
    pub probe: ProbeArg,
    /// CPUs to probe and trace: 0, 0,1, 0-3 or all.
    #[arg(long, default_value = "all")]
    pub cpus: String,
    #[arg(long, default_value = "10s", value_parser = opts::positive_duration)]
    pub duration: Nanos,
    /// Timer probe period.
    #[arg(long, default_value = "1ms", value_parser = opts::positive_duration)]
    pub interval: Nanos,
    /// Scheduling policy of the probe threads (deadline for the timer probe
    /// only), as for `timer` and `noise`.
    #[arg(long, value_enum, default_value = "fifo")]
    pub policy: PolicyArg,
    /// Real-time priority (1-99) for fifo/rr; 0 means SCHED_OTHER.
    #[arg(long, default_value_t = 95)]
    pub priority: u32,
    /// Timer probe: the waiting mechanism.
    #[arg(long, value_enum, default_value = "nanosleep")]
    pub clock: ClockArg,
    /// Timer probe: keep wake-ups later than this in the spike log
    /// (default: the largest). Noise probe: a step longer than this is
    /// stolen (default: automatic, as `punctual noise`).
    #[arg(long, value_parser = opts::duration)]
    pub threshold: Option<Nanos>,
    /// Break down only spikes at least this long (default: every spike the
    /// spike log kept).
    #[arg(long = "cause-threshold", value_parser = opts::duration)]
    pub cause_threshold: Option<Nanos>,
    #[command(flatten)]
    pub common: ProbeArgs,
    #[command(flatten)]
    pub c_states: opts::CStateArgs,
    /// Trace ring size per CPU in KiB.
    #[arg(long, default_value_t = 8192)]
    pub buffer_kb: u32,
    /// Rows in the top-offenders tables.
    #[arg(long, default_value_t = 10)]
    pub top: usize,
    /// Spikes shown with their breakdown.
    #[arg(long, default_value_t = 10)]
    pub show_spikes: usize,
    /// Run without the recorder (to measure its overhead).
    #[arg(long)]
    pub no_trace: bool,
    /// Also record sched:sched_wakeup (adds a ring write to every wake-up
    /// path; attribution does not need it).
    #[arg(long)]
    pub wakeups: bool,
    /// Inject a known noise source: the SCHED_FIFO 99 `noisy-neighbor`
    /// (1 ms every 10.37 ms) on the first probed CPU.
    #[arg(long)]
    pub neighbor: bool,
    /// Restore tracefs after a run that was killed (SIGKILL), then exit.
    #[arg(long)]
    pub cleanup: bool,
}

/// The probe's policy: `--priority 0` keeps its old meaning (SCHED_OTHER).
fn policy(args: &Args) -> Result<Policy, CliError> {
    if args.priority == 0 && matches!(args.policy, PolicyArg::Fifo | PolicyArg::Rr) {
        return Ok(Policy::Other { nice: 0 });
    }
    if args.probe == ProbeArg::Noise && args.policy == PolicyArg::Deadline {
        return Err(CliError::usage(
            "--policy deadline does not fit the noise probe's busy loop; use fifo, rr or other",
        ));
    }
    opts::policy(args.policy, args.priority, args.interval)
}

/// The probe `--probe` names, configured from the flags.
fn probe(args: &Args) -> Result<Arc<dyn Probe>, CliError> {
    let cpus = opts::cpus(&args.cpus)?;
    let policy = policy(args)?;
    let (max_spikes, lock_memory) = (args.common.max_spikes, !args.common.no_mlock);
    Ok(match args.probe {
        ProbeArg::Timer => Arc::new(Timer {
            cfg: TimerConfig {
                cpus,
                policy,
                interval: args.interval,
                duration: args.duration,
                clock: args.clock.into(),
                threshold: args.threshold.unwrap_or(Nanos::ZERO),
                max_spikes,
                lock_memory,
                stop_at: None,
                samples: None,
            },
            replay: None,
        }),
        ProbeArg::Noise => Arc::new(Noise {
            cfg: NoiseConfig {
                cpus,
                policy,
                duration: args.duration,
                threshold: args.threshold,
                max_spikes,
                lock_memory,
                stretch: None,
                stop_at: None,
                samples: None,
            },
            replay: None,
        }),
    })
}

pub fn run(args: Args) -> CliResult {
    if args.cleanup {
        return cleanup();
    }
    opts::cpus(&args.cpus)?;
    let loads = opts::load_specs(args.common.load.as_deref())?;
    let probe = probe(&args)?;
    if args.buffer_kb < 64 || args.buffer_kb > 1 << 20 {
        return Err(CliError::usage(format!(
            "--buffer-kb {} is out of range (64 to 1048576)",
            args.buffer_kb
        )));
    }
    opts::check_max_spikes(args.common.max_spikes)?;
    opts::check_output("--json", &args.common.json)?;
    let req = ProbeRequest {
        kind: "cause",
        label: "cause",
        probe,
        loads,
        tracing: Tracing::Recorder {
            options: Options {
                buffer_kb: args.buffer_kb,
                wakeups: args.wakeups,
                ..Options::default()
            },
            trace: !args.no_trace,
            threshold: args.cause_threshold,
            neighbor: args.neighbor,
        },
    };
    let terminal = Terminal { announce: true };
    let session = Session::new(crate::interrupt::stop_flag(), &terminal);
    let cpus = req.probe.cpus().to_vec();
    let rec = punctual_live::cstate::holding(Some(args.c_states.request()), &cpus, || {
        Ok::<_, CliError>(session.run(&req, crate::output::rfc3339_now())?.record)
    })?;
    print!(
        "{}",
        punctual_report::text::cause_verb(&rec, args.top, args.show_spikes)
    );
    for w in &rec.warnings {
        if !matches!(w, Warning::NoTracing { .. }) {
            eprintln!("warning: {}", w.message());
        }
    }
    if let Some(p) = &args.common.json {
        crate::output::write_record(&rec, p)?;
    }
    Ok(())
}

fn cleanup() -> CliResult {
    let rep = punctual_live::restore::cleanup_stale(&punctual_live::restore::run_dir());
    if rep.is_empty() {
        println!("nothing to clean up: no tracing state left by a punctual run");
    }
    for a in rep.undone.iter() {
        println!("{a}");
    }
    for j in &rep.cleaned {
        println!("removed journal {}", j.display());
    }
    for p in &rep.problems {
        eprintln!("punctual: {p}");
    }
    if rep.problems.is_empty() {
        Ok(())
    } else {
        Err(CliError::runtime(format!(
            "{} cleanup step(s) failed",
            rep.problems.len()
        )))
    }
}
