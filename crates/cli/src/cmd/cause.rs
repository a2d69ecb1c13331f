//! `punctual cause`: run a probe beside the tracefs flight recorder and
//! name what filled every spike and every stolen interval.
//!
//! The probes are `punctual timer`'s and `punctual noise`'s own (same
//! threads, clocks, policies and record), so a `cause` record reads like
//! theirs with the causes filled in; the noise probe also keeps every gap
//! so the whole stolen time is split interval by interval.

use std::path::PathBuf;

use clap::ValueEnum;
use punctual_live::noise::NoiseConfig;
use punctual_live::rt::Policy;
use punctual_live::timer::TimerConfig;
use punctual_record::Warning;
use punctual_trace::recorder::{Options, ProbeGaps};
use punctual_units::Nanos;

use super::timer::{finish_record, new_record, parse_cpus, parse_policy};
use crate::error::{CliError, CliResult};
use crate::opts;

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
    /// Scheduling policy of the probe threads: fifo, rr, other (and
    /// deadline for the timer probe), as for `timer` and `noise`.
    #[arg(long, default_value = "fifo")]
    pub policy: String,
    /// Real-time priority (1-99) for fifo/rr; 0 means SCHED_OTHER.
    #[arg(long, default_value_t = 95)]
    pub priority: u32,
    /// Timer probe: nanosleep or timerfd.
    #[arg(long, default_value = "nanosleep")]
    pub clock: String,
    /// Timer probe: keep wake-ups later than this in the spike log
    /// (default: the largest). Noise probe: a step longer than this is
    /// stolen (default: automatic, as `punctual noise`).
    #[arg(long, value_parser = opts::duration)]
    pub threshold: Option<Nanos>,
    /// Break down only spikes at least this long (default: every spike the
    /// spike log kept).
    #[arg(long = "cause-threshold", value_parser = opts::duration)]
    pub cause_threshold: Option<Nanos>,
    /// Spikes kept (and attributed) per CPU: the largest.
    #[arg(long, default_value_t = 1000)]
    pub max_spikes: usize,
    /// Do not mlockall (memory locking is on by default).
    #[arg(long)]
    pub no_mlock: bool,
    /// Trace ring size per CPU in KiB.
    #[arg(long, default_value_t = 8192)]
    pub buffer_kb: u32,
    /// Rows in the top-offenders tables.
    #[arg(long, default_value_t = 10)]
    pub top: usize,
    /// Spikes shown with their breakdown.
    #[arg(long, default_value_t = 10)]
    pub show_spikes: usize,
    /// Write the record (with causes) here as JSON.
    #[arg(long)]
    pub json: Option<PathBuf>,
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
    /// Run a load (as `punctual load SPEC`) for exactly the probe's time, so
    /// the recorder names what it steals, e.g. `disk:direct,irq-cpu=1`.
    #[arg(long, value_name = "SPEC")]
    pub load: Option<String>,
    /// Restore tracefs after a run that was killed (SIGKILL), then exit.
    #[arg(long)]
    pub cleanup: bool,
}

/// The probe's policy: `--priority 0` keeps its old meaning (SCHED_OTHER).
fn policy(args: &Args) -> Result<Policy, CliError> {
    if args.priority == 0 && matches!(args.policy.as_str(), "fifo" | "rr") {
        return Ok(Policy::Other { nice: 0 });
    }
    let p = parse_policy(&args.policy, args.priority, args.interval)?;
    if args.probe == ProbeArg::Noise && matches!(p, Policy::Deadline { .. }) {
        return Err(CliError::usage(
            "--policy deadline does not fit the noise probe's busy loop; use fifo, rr or other",
        ));
    }
    Ok(p)
}

/// What the probe produced, ready for attribution.
struct Probed {
    elapsed: Nanos,
    gaps: Vec<ProbeGaps>,
    probes: Vec<punctual_trace::recorder::ProbeThread>,
}

pub fn run(args: Args) -> CliResult {
    if args.cleanup {
        return cleanup();
    }
    let cpus = parse_cpus(&args.cpus)?;
    let load_specs = super::load::probe_load_specs(args.load.as_deref())?;
    let policy = policy(&args)?;
    let clock = super::timer::parse_clock(&args.clock)?;
    if args.buffer_kb < 64 || args.buffer_kb > 1 << 20 {
        return Err(CliError::usage(format!(
            "--buffer-kb {} is out of range (64 to 1048576)",
            args.buffer_kb
        )));
    }
    if args.max_spikes == 0 {
        return Err(CliError::usage(
            "--max-spikes 0 keeps nothing to attribute; use 1 or more",
        ));
    }
    opts::check_output("--json", &args.json)?;
    let stop = crate::interrupt::stop_flag();

    let platform = punctual_live::sysinfo::collect();
    let mut rec = new_record("cause", platform);
    rec.set_config("probe", format!("{:?}", args.probe).to_lowercase());
    rec.set_config("buffer_kb", args.buffer_kb);
    rec.set_config("tracing", !args.no_trace);
    rec.set_config("neighbor", args.neighbor);
    rec.set_config("wakeups", args.wakeups);
    if let Some(t) = args.cause_threshold {
        rec.set_config("cause_threshold_ns", t.0);
    }
    let timer_cfg = TimerConfig {
        cpus: cpus.clone(),
        policy,
        interval: args.interval,
        duration: args.duration,
        clock,
        threshold: args.threshold.unwrap_or(Nanos::ZERO),
        max_spikes: args.max_spikes,
        lock_memory: !args.no_mlock,
    };
    let noise_cfg = NoiseConfig {
        cpus: cpus.clone(),
        policy,
        duration: args.duration,
        threshold: args.threshold,
        max_spikes: args.max_spikes,
        lock_memory: !args.no_mlock,
        stretch: None,
    };
    match args.probe {
        ProbeArg::Timer => super::timer::set_timer_config(&mut rec, &timer_cfg, ""),
        ProbeArg::Noise => super::noise::set_noise_config(&mut rec, &noise_cfg, ""),
    }

    let recorder = if args.no_trace {
        None
    } else {
        let o = Options {
            buffer_kb: args.buffer_kb,
            wakeups: args.wakeups,
            ..Options::default()
        };
        crate::attach::start_recorder(&cpus, &o, &mut rec)
    };
    let neighbor = if args.neighbor {
        match punctual_live::inject::NoisyNeighbor::start(punctual_live::inject::NeighborConfig {
            cpu: cpus[0],
            ..Default::default()
        }) {
            Ok(n) => Some(n),
            Err(e) => {
                return Err(CliError::runtime(format!("--neighbor: {e}")));
            }
        }
    } else {
        None
    };
    eprintln!(
        "punctual cause: {} probe on CPU {} for {}{}…",
        format!("{:?}", args.probe).to_lowercase(),
        opts::format_cpus(&cpus),
        args.duration,
        if recorder.is_some() {
            " with the flight recorder"
        } else {
            ""
        }
    );
    let loads = super::load::start_loads(&load_specs, args.duration)?;
    let probed = match args.probe {
        ProbeArg::Timer => {
            let out = super::timer::run_timer_probe(&timer_cfg, stop, "cause")?;
            let tids = super::timer::timer_tids(&out);
            let elapsed = out.elapsed;
            let probes = crate::attach::threads(&tids, out.origin, elapsed);
            out.fill(&mut rec, args.max_spikes);
            Probed {
                elapsed,
                gaps: Vec::new(),
                probes,
            }
        }
        ProbeArg::Noise => {
            let out = super::noise::run_noise_probe(&noise_cfg, stop, "cause", recorder.is_some())?;
            let tids = super::noise::noise_tids(&out);
            let elapsed = out.elapsed;
            let probes = crate::attach::threads(&tids, out.origin, elapsed);
            let gaps = super::noise::noise_gaps(&out);
            out.fill(&mut rec, args.max_spikes);
            Probed {
                elapsed,
                gaps,
                probes,
            }
        }
    };
    super::load::finish_loads(loads, &load_specs, &mut rec);
    let neighbor_report = neighbor.map(|n| n.stop());
    let trace = recorder.and_then(|r| crate::attach::stop_recorder(r, &mut rec));
    finish_record(&mut rec, probed.elapsed, args.duration);
    if let Some(n) = &neighbor_report {
        rec.extra.insert(
            "neighbor".into(),
            serde_json::json!({
                "name": "noisy-neighbor",
                "tid": n.thread_id,
                "bursts": n.bursts,
                "spun_ns": n.spun.0,
                "ran_for_ns": n.ran_for.0,
            }),
        );
    }

    // Attribution and the report.
    let mut out = match args.probe {
        ProbeArg::Timer => super::timer::latency_table(&rec),
        ProbeArg::Noise => super::noise::stolen_table(&rec),
    };
    out.push('\n');
    if let Some(t) = &trace {
        let sum = crate::attach::attribute(
            t,
            &mut rec,
            &probed.probes,
            args.cause_threshold,
            &probed.gaps,
        );
        out.push_str(&crate::attach::report(
            &sum,
            &rec,
            args.top,
            args.show_spikes,
        ));
    }
    if let Some(n) = &neighbor_report {
        out.push_str(&format!(
            "noisy-neighbor/{}: {} bursts, spun {} (its own measurement)\n",
            n.thread_id, n.bursts, n.spun
        ));
    }
    out.push_str(&super::load::load_lines(&rec));
    print!("{out}");
    for w in &rec.warnings {
        if !matches!(w, Warning::NoTracing { .. }) {
            eprintln!("warning: {}", w.message());
        }
    }
    if let Some(p) = &args.json {
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
