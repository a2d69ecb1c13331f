//! `punctual timer`: thread wake-up latency per CPU (the cyclictest
//! measurement), with missed periods counted and a bounded spike log.

use std::path::PathBuf;
use std::sync::Arc;

use punctual_live::timer::TimerConfig;
use punctual_measure::{KernelTimer, Timer};
use punctual_record::{Metric, Nanos, Record, Series};

use crate::error::{CliError, CliResult};
use crate::opts::{self, CStateArgs, CauseArgs, ClockArg, PolicyArg, ProbeArgs};
use crate::output::write_json;
use crate::probe::run_one_probe;

#[derive(clap::Args, Debug)]
#[command(
    after_help = "Examples:\n  punctual timer --duration 10s\n  punctual timer --cpus 1 --interval 500us --policy fifo --priority 80 --json t.json\n  punctual timer --cpus 0 --clock timerfd --hist hist.txt\n  punctual timer --cpus 1 --load net --cause\n  punctual timer --cpus 1 --stop-at 500us --cause --on-threshold 'echo $PUNCTUAL_VALUE_NS ns on CPU $PUNCTUAL_CPU'\n  punctual timer --cpus 1 --stop-at 1ms --cause --stop-stacks --stop-raw t.dat\n  punctual timer --duration 60s --samples t.samples --fail-if 'p99 > 200us'\n  punctual timer -a 1 -p 80 -i 500us -D 1m"
)]
pub struct Args {
    /// CPUs to measure: `0`, `0,1`, `0-3` or `all` (`-a` as cyclictest).
    #[arg(short = 'a', long, default_value = "all")]
    pub cpus: String,
    /// Scheduling policy of the measuring threads [default: fifo].
    // No clap default: a value given with --probe timerlat is warned
    // about, and only a given one.
    #[arg(long, value_enum)]
    pub policy: Option<PolicyArg>,
    /// Real-time priority (1-99) for fifo/rr; 95 keeps the probe below
    /// priority-99 kernel threads and the injector (`-p` as cyclictest)
    /// [default: 95].
    #[arg(short = 'p', long)]
    pub priority: Option<u32>,
    /// Period of the measuring threads, with its unit (`-i 1000us` for
    /// cyclictest's `-i 1000`, which counts microseconds).
    #[arg(short = 'i', long, default_value = "1ms", value_parser = opts::positive_duration)]
    pub interval: Nanos,
    /// How long to measure (`500us`, `10s`, `2h`; `-D` as cyclictest).
    #[arg(short = 'D', long, default_value = "10s", value_parser = opts::positive_duration)]
    pub duration: Nanos,
    /// Waiting mechanism: absolute clock_nanosleep or a timerfd.
    #[arg(long, value_enum, default_value = "nanosleep")]
    pub clock: ClockArg,
    /// Keep wake-ups later than this in the spike log (default: the largest).
    #[arg(long, value_parser = opts::duration)]
    pub threshold: Option<Nanos>,
    /// What measures: punctual's own thread (`user`), or the kernel's
    /// timerlat tracer (`timerlat`, where the kernel has it: PREEMPT_RT
    /// distribution kernels do), which records each wake-up twice, in the
    /// timer's interrupt (`cpuN.irq.latency`) and in the woken kernel
    /// thread (`cpuN.thread.latency`), as `rtla timerlat` shows them. Its
    /// threads keep the kernel's FIFO 95; --policy and --priority set
    /// punctual's own.
    #[arg(long, value_enum, default_value = "user")]
    pub probe: TimerProbe,
    /// Write a cyclictest-compatible histogram (`cyclictest -h`) here.
    #[arg(long)]
    pub hist: Option<PathBuf>,
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
    /// Replay wake-up latencies (ns, one per line) through the same
    /// pipeline on a virtual clock instead of measuring: for tests and for
    /// re-analysing a captured feed. Every CPU replays the same feed.
    #[arg(long, hide = true)]
    pub replay: Option<PathBuf>,
}

/// `timer --probe`.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimerProbe {
    /// punctual's periodic thread per CPU.
    User,
    /// The kernel's timerlat tracer.
    Timerlat,
}

/// Below this a period is not something the kernel's timers deliver: the
/// thread would spin through missed periods for the whole run.
const MIN_INTERVAL: Nanos = Nanos(10_000);

fn timer_config(args: &Args) -> Result<TimerConfig, CliError> {
    if args.interval < MIN_INTERVAL {
        return Err(CliError::usage(format!(
            "--interval {} is below what a timer wake-up can deliver here (each costs microseconds); give at least {MIN_INTERVAL}",
            args.interval
        )));
    }
    if args.duration < args.interval {
        return Err(CliError::usage(format!(
            "--duration {} is shorter than one --interval ({}): no wake-up would be measured",
            args.duration, args.interval
        )));
    }
    let policy = opts::policy(
        args.policy.unwrap_or(PolicyArg::Fifo),
        args.priority.unwrap_or(95),
        args.interval,
    )?;
    opts::check_max_spikes(args.common.max_spikes)?;
    Ok(TimerConfig {
        cpus: opts::cpus(&args.cpus)?,
        policy,
        interval: args.interval,
        duration: args.duration,
        clock: args.clock.into(),
        threshold: args.threshold.unwrap_or(Nanos::ZERO),
        max_spikes: args.common.max_spikes,
        lock_memory: !args.common.no_mlock,
        stop_at: args.stop.stop_at,
        samples: args.raw.sink(punctual_live::samples::SampleKind::Latency)?,
    })
}

pub fn run(args: Args) -> CliResult {
    let cfg = timer_config(&args)?;
    let gates = args.gates.parse()?;
    opts::check_output("--json", &args.common.json)?;
    opts::check_output("--stop-trace", &args.stop.stop_trace)?;
    opts::check_output("--stop-raw", &args.stop.stop_raw)?;
    opts::check_output("--hist", &args.hist)?;
    let replay = match &args.replay {
        Some(p) => Some(opts::latency_replay(p)?),
        None => None,
    };
    let sink = cfg.samples.clone();
    let probe: Arc<dyn punctual_measure::Probe> = match args.probe {
        TimerProbe::User => Arc::new(Timer { cfg, replay }),
        TimerProbe::Timerlat => {
            kernel_probe_fits(&args)?;
            opts::kernel_tracer(punctual_trace::ktracer::Tracer::Timerlat)?;
            opts::warn_kernel_threads_policy(
                (args.policy, args.priority),
                "--probe timerlat",
                "the kernel's timerlat/N threads run at FIFO 95",
            );
            Arc::new(KernelTimer::new(cfg, punctual_live::restore::run_dir()))
        }
    };
    let (mut rec, raw) = run_one_probe(
        "timer",
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
    if let Some(p) = &args.hist {
        write_hist(&rec, p)?;
    }
    gates.enforce(&rec)
}

/// The options that belong to punctual's own thread, refused with the
/// kernel's probe rather than ignored.
fn kernel_probe_fits(args: &Args) -> CliResult {
    let refuse = |what: &str| {
        Err(CliError::usage(format!(
            "{what} applies to punctual's own timer probe, not to --probe timerlat (the kernel's tracer)"
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
    if args.clock != ClockArg::Nanosleep {
        return refuse("--clock");
    }
    // osnoise/timerlat_period_us takes whole microseconds, 100 to 1000000.
    if args.interval < Nanos::from_us(100)
        || args.interval > Nanos::from_secs(1)
        || !args.interval.0.is_multiple_of(1000)
    {
        return Err(CliError::usage(format!(
            "--interval {} is not a period the timerlat tracer takes: give whole microseconds from 100us to 1s",
            args.interval
        )));
    }
    Ok(())
}

/// Writes the latency series in cyclictest's `-h` format.
pub fn write_hist(rec: &Record, path: &std::path::Path) -> CliResult {
    let lat: Vec<&Series> = rec
        .series
        .iter()
        .filter(|s| s.metric == Metric::Latency)
        .collect();
    let rows = punctual_report::hist::default_rows(&lat);
    let text = punctual_report::hist::cyclictest_hist(&lat, rows);
    punctual_record::write_atomic(path, text.as_bytes())
        .map_err(|e| CliError::runtime(format!("cannot write --hist {}: {e}", path.display())))?;
    eprintln!("histogram written to {}", path.display());
    Ok(())
}
