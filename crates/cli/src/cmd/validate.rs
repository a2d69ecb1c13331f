//! `punctual validate`: does the forecast match reality on this machine?
//!
//! For each load (none, and the SCHED_FIFO-99 noisy neighbor spinning
//! 1 ms every 10.37 ms on the probed CPU) it first takes a `timer` record
//! with the real probe, forecasts the time to underrun of n buffers of
//! length t with compute c from it, and then runs an actual buffered
//! consumer under the same load for the same time and counts its real
//! underruns. The two phases run one after the other so they do not
//! disturb each other; the load is restarted for each.
//!
//! Each round also runs the `noise` probe (a busy loop that times its own
//! stolen intervals, in stretches RT throttling never stops) under the
//! same load, and the forecast takes its stall term S from those gaps
//! (docs/forecast.md §3.4): a timer record cannot tell the cost of waking
//! a sleeping thread from time stolen from a running one. The forecast
//! with S inferred from the timer's tail (§3.2), what `punctual forecast`
//! makes from the timer record alone, is printed beside it; across
//! validation runs I–N the noise-gap one was within 2× as often where
//! judged and closer on the idle machine (docs/forecast.md §8).

use punctual_analysis::buffer::{Buffering, Compute};
use punctual_live::cstate::CStateHold;
use punctual_measure::validation;
use punctual_report::text::validate::{self as text, Case};
use punctual_units::Nanos;
use serde_json::json;

use crate::error::{CliError, CliResult};
use crate::opts;

#[derive(clap::Args, Debug)]
#[command(
    after_help = "Examples:\n  punctual validate\n  punctual validate --cpu 1 --buffers 3 --buffer-len 1ms --compute 0.5ms --duration 30s\n  punctual validate --cpu 1 --load injector --records . --json v.json"
)]
pub struct Args {
    /// CPU on which the probe, the consumer and the load run.
    #[arg(long, default_value_t = 0)]
    pub cpu: u32,
    /// Number of buffers n.
    #[arg(long, default_value_t = 2)]
    pub buffers: u32,
    /// Buffer length t (the consumer wakes once per t).
    #[arg(long, default_value = "1ms", value_parser = opts::positive_duration)]
    pub buffer_len: Nanos,
    /// Compute per buffer, spun for real: a time or a fraction of t.
    #[arg(long, default_value = "0.5ms")]
    pub compute: String,
    /// Length of each phase (timer record, then consumer) per load.
    #[arg(long, default_value = "20s", value_parser = opts::positive_duration)]
    pub duration: Nanos,
    /// Alternate timer and consumer phases this many times per load (each
    /// phase duration/rounds long), so slow drifts in background noise
    /// reach both alike.
    #[arg(long, default_value_t = 4)]
    pub rounds: u32,
    /// Loads to run: none, injector, or both.
    #[arg(long, default_value = "both")]
    pub load: String,
    /// The injector's period (it spins --injector-spin once per period).
    #[arg(long, default_value = "10.37ms", value_parser = opts::positive_duration)]
    pub injector_period: Nanos,
    /// How long the injector spins each period, at SCHED_FIFO 99.
    #[arg(long, default_value = "1ms", value_parser = opts::positive_duration)]
    pub injector_spin: Nanos,
    /// SCHED_FIFO priority of the probe and the consumer.
    #[arg(long, default_value_t = 95)]
    pub priority: u8,
    /// Polling time of the noise phase per load (default: --duration),
    /// split over the rounds like the others.
    #[arg(long, value_name = "D", value_parser = opts::positive_duration)]
    pub noise_duration: Option<Nanos>,
    /// Write the results as JSON (atomically).
    #[arg(long, value_name = "PATH")]
    pub json: Option<std::path::PathBuf>,
    /// Also keep each load's timer record here as `timer-<load>.json`
    /// (and its noise record as `noise-<load>.json`), so the forecast can
    /// be rerun from it with `punctual forecast` (`--stalls`).
    #[arg(long, value_name = "DIR")]
    pub records: Option<std::path::PathBuf>,
    /// The timer, consumer and noise phases all run under the same
    /// C-states, so the forecast is made from what the consumer then meets.
    #[command(flatten)]
    pub c_states: opts::CStateArgs,
}

/// Checks the flags, measures each load in turn (until interrupted),
/// prints the table and writes `--json`.
pub fn run(a: Args) -> CliResult {
    let (b, loads) = setup(&a)?;
    let stop = crate::interrupt::stop_flag();
    let mut held = CStateHold::hold(a.c_states.request(), &[a.cpu]);
    let plan = validation::Plan {
        cpu: a.cpu,
        priority: a.priority,
        buffer_len: a.buffer_len,
        duration: a.duration,
        rounds: a.rounds,
        noise_duration: a.noise_duration,
        injector_period: a.injector_period,
        injector_spin: a.injector_spin,
        records: a.records.clone(),
    };
    let cases = validation::run(&plan, &b, &loads, &stop, &held, &|l| eprintln!("{l}"))?;
    for p in held.release() {
        eprintln!("warning: could not put the idle states back: {p}");
    }
    for w in held.warnings() {
        eprintln!("warning: {w}");
    }
    print!("{}", text::table(&cases, &b, a.cpu, a.duration, a.rounds));
    print!(
        "{}",
        punctual_report::text::probe::c_states_text(&held.config())
    );
    write_json(&a, &b, &cases, &held)
}

/// The buffering and the loads asked for, once every flag is checked and
/// real-time threads are known to be permitted.
fn setup(a: &Args) -> CliResult<(Buffering, Vec<&'static str>)> {
    let compute = Compute::parse(&a.compute).map_err(|e| CliError::usage(format!("--{e}")))?;
    let b = Buffering::new(a.buffers, a.buffer_len, compute);
    b.slack()
        .map_err(|e| CliError::usage(format!("--buffers/--buffer-len/--compute: {e}")))?;
    let loads: Vec<&str> = match a.load.as_str() {
        "none" => vec!["none"],
        "injector" => vec!["injector"],
        "both" => vec!["none", "injector"],
        l => {
            return Err(CliError::usage(format!(
                "--load '{l}' is not a load (use none, injector or both)"
            )))
        }
    };
    if a.injector_spin >= a.injector_period {
        return Err(CliError::usage(format!(
            "--injector-spin {} must be shorter than --injector-period {}",
            a.injector_spin, a.injector_period
        )));
    }
    if !opts::online_cpus().contains(&a.cpu) {
        return Err(CliError::usage(format!(
            "--cpu {} is not online on this machine",
            a.cpu
        )));
    }
    if !(1..=98).contains(&a.priority) {
        return Err(CliError::usage(format!(
            "--priority {} must be 1–98 (the injector runs at 99)",
            a.priority
        )));
    }
    if a.rounds == 0 || a.duration.0 / (a.rounds as u64) < a.buffer_len.0 * 100 {
        return Err(CliError::usage(format!(
            "--duration {} split in --rounds {} leaves phases shorter than 100 buffer periods",
            a.duration, a.rounds
        )));
    }
    opts::check_output("--json", &a.json)?;
    if let Some(d) = &a.records {
        if !d.is_dir() {
            return Err(CliError::usage(format!(
                "--records {} is not a directory",
                d.display()
            )));
        }
    }
    punctual_live::rt::fifo_permitted().map_err(|e| {
        CliError::runtime(format!(
            "SCHED_FIFO is not permitted here ({e}); validation needs real-time threads (run as root or with CAP_SYS_NICE)"
        ))
    })?;
    Ok((b, loads))
}

/// `--json`: the buffering and every load's case, written atomically.
fn write_json(a: &Args, b: &Buffering, cases: &[Case], held: &CStateHold) -> CliResult {
    if let Some(p) = &a.json {
        let doc = json!({
            "tool": "punctual validate",
            "buffering": b,
            "cpu": a.cpu,
            "phase_ns": a.duration,
            "rounds": a.rounds,
            "c_states": held.config(),
            "cases": cases,
        });
        punctual_record::write_atomic(
            p,
            serde_json::to_string_pretty(&doc)
                .unwrap_or_default()
                .as_bytes(),
        )
        .map_err(|e| CliError::runtime(format!("--json {}: {e}", p.display())))?;
    }
    Ok(())
}
