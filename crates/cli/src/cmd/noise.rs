//! `punctual noise`: time stolen from a busy thread per CPU (the
//! oslat/sysjitter measurement), beside what the kernel admits to.

use std::path::PathBuf;
use std::sync::Arc;

use punctual_live::noise::NoiseConfig;
use punctual_measure::{KernelNoise, Noise};
use punctual_record::Nanos;

use crate::error::{CliError, CliResult};
use crate::opts::{self, CStateArgs, CauseArgs, PolicyArg, ProbeArgs};
use crate::output::write_json;
use crate::probe::run_one_probe;

#[derive(clap::Args, Debug)]
#[command(
    after_help = "Examples:\n  punctual noise --duration 10s\n  punctual noise --cpus 1 --policy other --json n.json\n  punctual noise --cpus 1 --load disk:direct,irq-cpu=1 --cause\n  punctual noise --cpus 1 --stop-at 100us --cause --json n.json\n  punctual noise -a 1 -p 80 -D 30s"
)]
pub struct Args {
    /// CPUs to poll: `0`, `0,1`, `0-3` or `all` (`-a` as cyclictest).
    #[arg(short = 'a', long, default_value = "all")]
    pub cpus: String,
    /// Scheduling policy of the polling threads: fifo, rr or other. At fifo
    /// the kernel's RT throttling still leaves other tasks their share
    /// (punctual pauses by itself when throttling is off) [default: fifo].
    // No clap default: a value given with --probe osnoise is warned
    // about, and only a given one.
    #[arg(long, value_enum)]
    pub policy: Option<PolicyArg>,
    /// Real-time priority (1-99) for fifo/rr (`-p` as cyclictest)
    /// [default: 95].
    #[arg(short = 'p', long)]
    pub priority: Option<u32>,
    /// How long to poll (`500ms`, `10s`, `2h`; `-D` as cyclictest).
    #[arg(short = 'D', long, default_value = "10s", value_parser = opts::positive_duration)]
    pub duration: Nanos,
    /// A step longer than this is stolen time (default: automatic, ten times
    /// the loop's minimum step and at least 1us; the chosen value is shown).
    #[arg(long, value_parser = opts::positive_duration)]
    pub threshold: Option<Nanos>,
    /// What measures: punctual's own busy thread (`user`), or the kernel's
    /// osnoise tracer (`osnoise`, where the kernel has it: PREEMPT_RT
    /// distribution kernels do), whose stolen intervals, per-period
    /// summaries and interference counts (`extra.osnoise`) fill the same
    /// record, as `rtla osnoise` shows them. Its threads keep the kernel's
    /// SCHED_OTHER and its threshold (`tracing_thresh`, 5us when 0);
    /// --policy, --priority and --threshold set punctual's own.
    #[arg(long, value_enum, default_value = "user")]
    pub probe: NoiseProbe,
    #[command(flatten)]
    pub common: ProbeArgs,
    #[command(flatten)]
    pub cause: CauseArgs,
    #[command(flatten)]
    pub c_states: CStateArgs,
    #[command(flatten)]
    pub gates: crate::gates::GateArgs,
    #[command(flatten)]
    pub stop: opts::StopArgs,
    #[command(flatten)]
    pub raw: opts::SampleArgs,
    /// Replay stolen intervals (`START_NS LEN_NS`, one per line, starts
    /// from the counter's zero; the first 20 ms are the loop's warm-up)
    /// through the same pipeline on a virtual clock whose loop costs
    /// 50 ns a step, instead of measuring: for tests and for re-analysing
    /// a captured feed. Every CPU replays the same feed.
    #[arg(long, hide = true)]
    pub replay: Option<PathBuf>,
}

/// `noise --probe`.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum NoiseProbe {
    /// punctual's busy-polling thread per CPU.
    User,
    /// The kernel's osnoise tracer.
    Osnoise,
}

/// Shorter runs hold too few loop steps to tell a stolen gap from the
/// loop's own cost.
const MIN_DURATION: Nanos = Nanos(1_000_000);

fn noise_config(args: &Args) -> Result<NoiseConfig, CliError> {
    if args.duration < MIN_DURATION {
        return Err(CliError::usage(format!(
            "--duration {} is too short to poll; give at least {MIN_DURATION}",
            args.duration
        )));
    }
    if args.policy == Some(PolicyArg::Deadline) {
        return Err(CliError::usage(
            "--policy deadline does not fit a busy loop (its budget would throttle it); use fifo, rr or other",
        ));
    }
    let policy = opts::policy(
        args.policy.unwrap_or(PolicyArg::Fifo),
        args.priority.unwrap_or(95),
        Nanos::from_ms(1),
    )?;
    opts::check_max_spikes(args.common.max_spikes)?;
    Ok(NoiseConfig {
        cpus: opts::cpus(&args.cpus)?,
        policy,
        duration: args.duration,
        threshold: args.threshold,
        max_spikes: args.common.max_spikes,
        lock_memory: !args.common.no_mlock,
        stop_at: args.stop.stop_at,
        samples: args.raw.sink(punctual_live::samples::SampleKind::Gap)?,
        stretch: None,
    })
}

pub fn run(args: Args) -> CliResult {
    let cfg = noise_config(&args)?;
    let gates = args.gates.parse()?;
    if gates.verdict.is_some() {
        return Err(CliError::usage(
            "--fail-on-verdict needs wake-up latencies (timer, check); noise measures stolen time, so gate it with --fail-if",
        ));
    }
    opts::check_output("--json", &args.common.json)?;
    opts::check_output("--stop-trace", &args.stop.stop_trace)?;
    opts::check_output("--stop-raw", &args.stop.stop_raw)?;
    let replay = match &args.replay {
        Some(p) => Some(opts::gap_replay(p)?),
        None => None,
    };
    let sink = cfg.samples.clone();
    let probe: Arc<dyn punctual_measure::Probe> = match args.probe {
        NoiseProbe::User => Arc::new(Noise { cfg, replay }),
        NoiseProbe::Osnoise => {
            kernel_probe_fits(&args)?;
            opts::kernel_tracer(punctual_trace::ktracer::Tracer::Osnoise)?;
            opts::warn_kernel_threads_policy(
                (args.policy, args.priority),
                "--probe osnoise",
                "the kernel's osnoise/N threads run at SCHED_OTHER",
            );
            Arc::new(KernelNoise::new(cfg, punctual_live::restore::run_dir()))
        }
    };
    let (mut rec, raw) = run_one_probe(
        "noise",
        probe,
        &args.common,
        &args.cause,
        &args.c_states,
        args.stop.evidence(),
        args.replay.as_deref(),
    )?;
    args.stop.on_threshold(&rec);
    args.stop.write_trace(&rec)?;
    args.stop.write_raw(&rec, raw.as_ref())?;
    args.raw.write(sink.as_deref(), &mut rec)?;
    write_json(&rec, &args.common.json)?;
    gates.enforce(&rec)
}

/// The options that belong to punctual's own thread, refused with the
/// kernel's probe rather than ignored.
fn kernel_probe_fits(args: &Args) -> CliResult {
    let refuse = |what: &str| {
        Err(CliError::usage(format!(
            "{what} applies to punctual's own noise probe, not to --probe osnoise (the kernel's tracer)"
        )))
    };
    if args.replay.is_some() {
        return refuse("--replay");
    }
    if args.cause.cause {
        return refuse("--cause");
    }
    if args.stop.stop_at.is_some() {
        return refuse("--stop-at");
    }
    if args.raw.samples.is_some() {
        return refuse("--samples");
    }
    if args.threshold.is_some() {
        return refuse("--threshold");
    }
    Ok(())
}
