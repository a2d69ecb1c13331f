//! `punctual check`: the main job, no flags needed. Platform facts, then
//! the timer probe and the noise probe over all CPUs, then a short
//! plain-language summary.
//!
//! Why the time is split in two halves rather than the probes run side by
//! side on different CPUs: each probe disturbs the other on a shared CPU
//! (a busy loop at SCHED_FIFO delays or is charged with the timer thread's
//! wake-ups), and running them on disjoint CPUs would measure each CPU with
//! only one probe, which on a 2-CPU machine means every CPU misses half the
//! picture. Sequential halves measure every CPU with both probes, each
//! undisturbed, at the cost of not seeing them at the same moment.

use std::path::PathBuf;
use std::sync::Arc;

use punctual_live::noise::{NoiseConfig, UNTHROTTLED_STRETCH};
use punctual_live::rt::Policy;
use punctual_live::spikes::DEFAULT_SPIKE_CAPACITY;
use punctual_live::{timer::TimerClock, timer::TimerConfig};
use punctual_measure::{Noise, ProbeRequest, Session, Timer, Tracing};
use punctual_record::{Metric, Nanos, Platform, Record, Warning};
use punctual_report::text::{cause, load, platform, probe};

use crate::error::{CliError, CliResult};
use crate::interrupt::interrupted;
use crate::opts::{self, CauseArgs};
use crate::output::{write_json, Terminal};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Total time: the first half measures wake-up latency, the second
    /// stolen time.
    #[arg(long, default_value = "60s", value_parser = opts::positive_duration)]
    pub duration: Nanos,
    /// CPUs to survey: `0`, `0,1`, `0-3` or `all`.
    #[arg(long, default_value = "all")]
    pub cpus: String,
    /// Write the record (JSON) here.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Run a load (as `punctual load SPEC`) through both halves, so the
    /// verdicts say how the machine does while it is busy.
    #[arg(long, value_name = "SPEC")]
    pub load: Option<String>,
    #[command(flatten)]
    pub cause: CauseArgs,
}

/// Per-workload verdicts (does this machine meet each shipped profile's
/// MTTF, and if not what buffering would) read from the timer half's
/// wake-ups: the noise half's seconds must not dilute the wake-up rate.
/// The time stolen during each compute comes from the noise half's gaps
/// on the same CPU (docs/forecast.md §3.4), which it measured in stretches
/// that RT throttling never stops; without them (an interrupted run) it
/// is inferred from the wake-ups. Printed, and kept in
/// `extra["verdicts"]` so the record says what the terminal said.
pub fn print_verdicts(rec: &mut Record, timer_elapsed: Nanos) {
    let mut timer_part = Record::new(rec.source, &rec.kind, Platform::default());
    timer_part.duration_ns = timer_elapsed;
    timer_part.series = rec
        .series
        .iter()
        .filter(|s| s.metric == Metric::Latency)
        .cloned()
        .collect();
    let mut models = punctual_analysis::verdict::models(&timer_part);
    punctual_analysis::verdict::attach_own_gaps(&mut models, rec);
    let v =
        punctual_analysis::verdict::verdicts_for(&models, &punctual_analysis::profiles::builtin());
    if v.is_empty() {
        return;
    }
    let met = v.iter().filter(|x| x.meets_target).count();
    let from = if models.iter().any(|m| m.gap_stalls.is_some()) {
        "from the wake-up latencies and the busy loop's stolen time"
    } else {
        "from the wake-up latencies"
    };
    println!(
        "\n== verdicts: {met} of {} workload profiles meet their target ({from}; `punctual forecast` explains each)",
        v.len()
    );
    print!("{}", punctual_analysis::render_verdicts(&v));
    rec.extra.insert(
        "verdicts".into(),
        serde_json::to_value(&v).unwrap_or(serde_json::Value::Null),
    );
}

pub fn run(args: Args) -> CliResult {
    let cpus = opts::cpus(&args.cpus)?;
    opts::check_output("--json", &args.json)?;
    if args.duration < Nanos::from_ms(200) {
        return Err(CliError::usage(format!(
            "--duration {} is too short to split between two probes; give at least 200ms",
            args.duration
        )));
    }
    let load_specs = opts::load_specs(args.load.as_deref())?;
    let stop = crate::interrupt::stop_flag();
    let terminal = Terminal::default();
    let session = Session::new(Arc::clone(&stop), &terminal);
    let half = args.duration / 2;
    let mut rec = session.new_record("check", crate::output::rfc3339_now());
    println!("== this machine");
    print!("{}", platform::platform_text(&rec.platform, false));
    let timer = ProbeRequest {
        kind: "check",
        label: "timer",
        probe: Arc::new(Timer {
            cfg: TimerConfig {
                cpus: cpus.clone(),
                policy: Policy::Fifo { priority: 95 },
                interval: Nanos::from_ms(1),
                duration: half,
                clock: TimerClock::Nanosleep,
                threshold: Nanos::ZERO,
                max_spikes: DEFAULT_SPIKE_CAPACITY,
                lock_memory: true,
            },
            replay: None,
        }),
        loads: Vec::new(),
        tracing: args.cause.tracing(),
    };
    let ncfg = NoiseConfig {
        cpus,
        policy: Policy::Fifo { priority: 95 },
        duration: args.duration - half,
        threshold: None,
        max_spikes: DEFAULT_SPIKE_CAPACITY,
        lock_memory: true,
        // In stretches, so RT throttling never stops the loop: its gaps
        // then hold only time stolen from a running thread, which the
        // verdicts charge to each compute.
        stretch: Some(UNTHROTTLED_STRETCH),
    };
    let noise_duration = ncfg.duration;
    let mut noise = ProbeRequest {
        kind: "check",
        label: "noise",
        probe: Arc::new(Noise {
            cfg: ncfg,
            replay: None,
        }),
        loads: Vec::new(),
        tracing: args.cause.tracing(),
    };
    timer.probe.set_config(&mut rec, "timer.");
    noise.probe.set_config(&mut rec, "noise.");
    rec.set_config(
        "split",
        "sequential: timer for the first half, noise for the second",
    );
    // Through both halves; on an error they stop when dropped.
    let loads = punctual_measure::loads::start(&load_specs, args.duration)?;
    if let Some(l) = &args.load {
        println!("\n== under load: {l} for {}", args.duration);
    }
    println!("\n== wake-up latency: one SCHED_FIFO 95 thread per CPU waking every 1ms for {half}");
    let t = session.measure(&mut rec, &timer, None)?;
    let timer_elapsed = t.elapsed;
    let mut elapsed = timer_elapsed;
    let mut causes = t
        .cause
        .map(|s| cause::section(timer.probe.spikes_are(), &s, &rec))
        .unwrap_or_default();
    print!("{}", probe::latency_table(&rec));
    if !interrupted(&stop) {
        let (on, rest) = UNTHROTTLED_STRETCH;
        println!(
            "\n== stolen time: one SCHED_FIFO 95 busy loop per CPU for {noise_duration} ({on} at a time with {rest} rests, so RT throttling never stops it)"
        );
        // A record of its own for this half: its time zero is the noise
        // run's, so the flight recorder lines its events up with the right
        // spikes; its spikes are then moved onto the check's time zero.
        let mut part = Record::new(rec.source, "check", Platform::default());
        if rec
            .warnings
            .iter()
            .any(|w| matches!(w, Warning::NoTracing { .. }))
        {
            noise.tracing = Tracing::Off; // said once is enough; the second start would fail alike
        }
        let n = session.measure(&mut part, &noise, None)?;
        elapsed += n.elapsed;
        if let Some(s) = n.cause {
            causes.push_str(&cause::section(noise.probe.spikes_are(), &s, &part));
        }
        punctual_measure::merge::merge_noise_half(&mut rec, part);
        print!("{}", probe::stolen_table(&rec));
    }
    punctual_measure::loads::finish(loads, &load_specs, &mut rec);
    print!("{}", load::load_lines(&rec));
    print!("{causes}");
    punctual_measure::session::finish_record(&mut rec, elapsed, args.duration);
    println!("\n== summary");
    print!("{}", probe::check_summary(&rec));
    print_verdicts(&mut rec, timer_elapsed);
    if !rec.warnings.is_empty() {
        println!("\n== what may hurt, and what to change");
        print!("{}", probe::warnings_text(&rec));
    }
    write_json(&rec, &args.json)
}
