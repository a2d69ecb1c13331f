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
use crate::opts::{self, CStateArgs, CauseArgs};
use crate::output::{write_json, Terminal};

#[derive(clap::Args, Debug)]
#[command(
    after_help = "Examples:\n  punctual check\n  punctual check --duration 20s --cpus 1 --json check.json\n  punctual check --load disk:direct,irq-cpu=1 --cause\n  punctual check --duration 20s --fail-on-verdict misses --json check.json"
)]
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
    #[command(flatten)]
    pub c_states: CStateArgs,
    #[command(flatten)]
    pub gates: crate::gates::GateArgs,
}

/// Per-workload verdicts (does this machine meet each shipped profile's
/// MTTF, and if not what buffering would) read from the timer half's
/// wake-ups: the noise half's seconds must not dilute the wake-up rate.
/// The time stolen during each compute comes from the noise half's gaps
/// on the same CPU (docs/forecast.md §3.4), which it measured in stretches
/// that RT throttling never stops; without them (an interrupted run) it
/// is inferred from the wake-ups. A verdict is decided only when its whole
/// 95% interval is on one side of the target. Printed, and kept in the
/// record's typed `verdicts` (and the full detail in `extra["verdicts"]`)
/// so the record says what the terminal said.
pub fn print_verdicts(rec: &mut Record, timer_elapsed: Nanos) {
    let mut timer_part = Record::new(rec.source, &rec.kind, Platform::default());
    timer_part.duration_ns = timer_elapsed;
    timer_part.series = rec
        .series
        .iter()
        .filter(|s| s.metric == Metric::Latency)
        .cloned()
        .collect();
    timer_part.spikes = rec
        .spikes
        .iter()
        .filter(|s| s.metric == Metric::Latency)
        .cloned()
        .collect();
    let mut models = punctual_analysis::verdict::models(&timer_part);
    punctual_analysis::verdict::attach_own_gaps(&mut models, rec);
    let mut v =
        punctual_analysis::verdict::verdicts_for(&models, &punctual_analysis::profiles::builtin());
    if v.is_empty() {
        return;
    }
    let why = unrepresentative(rec, timer_elapsed);
    if let Some(why) = &why {
        for x in v.iter_mut() {
            x.not_representative(why);
        }
    }
    let from = if models.iter().any(|m| m.gap_stalls.is_some()) {
        "from the wake-up latencies and the busy loop's stolen time"
    } else {
        "from the wake-up latencies"
    };
    println!(
        "\n== verdicts for {} workload profiles: {} (decided only when the whole 95% CI of the \
         MTTF is on one side of the target; {from}; `punctual forecast` explains each)",
        v.len(),
        punctual_analysis::verdict::tally(&v)
    );
    if let Some(why) = &why {
        println!("   NOT REPRESENTATIVE: {why}");
    }
    print!("{}", render_verdicts_compact(&v));
    rec.verdicts = v.iter().map(|x| x.entry()).collect();
    rec.extra.insert(
        "verdicts".into(),
        serde_json::to_value(&v).unwrap_or(serde_json::Value::Null),
    );
}

/// The verdict lines without the per-line "not representative" note,
/// which the heading already gave once.
fn render_verdicts_compact(v: &[punctual_analysis::Verdict]) -> String {
    let mut out = String::new();
    for x in v {
        out.push_str(&format!(
            "  {} {}\n",
            punctual_analysis::verdict::mark(x.state),
            x.message
        ));
    }
    out
}

/// Why a check record's verdicts cannot stand for a real-time consumer on
/// one machine: its probes ran without their real-time policy, or the
/// machine changed during the run ([`halves_differ`]).
pub fn unrepresentative(rec: &Record, timer_elapsed: Nanos) -> Option<String> {
    let mut why = Vec::new();
    if rec
        .warnings
        .iter()
        .any(|w| matches!(w, Warning::NoRealtimePolicy { .. }))
    {
        why.push(
            "the probes ran at SCHED_OTHER (no real-time policy was allowed), so these \
             verdicts describe a time-sharing thread, not a SCHED_FIFO consumer; run as root \
             or grant CAP_SYS_NICE"
                .to_string(),
        );
    }
    if let Some(d) = halves_differ(rec, timer_elapsed) {
        why.push(d);
    }
    (!why.is_empty()).then(|| why.join("; and "))
}

/// Whether the first and second half of the timer run differ beyond
/// chance. The spike log keeps the latest wake-ups with their times; on a
/// machine that does not change, each is as likely to fall in either
/// half, so the count in the first half is Binomial(K, ½). A count more
/// than 4 standard deviations from K/2 (K ≥ 20) is a changed machine:
/// 4 rather than 2 because late wake-ups come in bursts, which widen the
/// spread beyond the binomial's.
pub fn halves_differ(rec: &Record, timer_elapsed: Nanos) -> Option<String> {
    let mid = timer_elapsed.0 / 2;
    let at: Vec<u64> = rec
        .spikes
        .iter()
        .filter(|s| s.metric == Metric::Latency && s.at_ns.0 < timer_elapsed.0)
        .map(|s| s.at_ns.0)
        .collect();
    let k = at.len() as f64;
    if at.len() < 20 {
        return None;
    }
    let first = at.iter().filter(|t| **t < mid).count();
    let z = (first as f64 - k / 2.0) / (k / 4.0).sqrt();
    (z.abs() > 4.0).then(|| {
        format!(
            "the machine changed during the run: of the {} latest wake-ups, {first} came in the \
             first half of the wake-up measurement and {} in the second, beyond chance \
             (z = {z:.1}), so the verdicts do not describe one machine",
            at.len(),
            at.len() - first
        )
    })
}

/// Whether this process may give a thread SCHED_FIFO 95 (tried on a
/// short-lived thread, whose old policy the guard puts back), so the
/// headings can say what the probes will really run at.
fn realtime_allowed() -> bool {
    std::thread::spawn(|| punctual_live::rt::set_policy(Policy::Fifo { priority: 95 }).is_ok())
        .join()
        .unwrap_or(false)
}

pub fn run(args: Args) -> CliResult {
    let cpus = opts::cpus(&args.cpus)?;
    let gates = args.gates.parse()?;
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
                stop_at: None,
                samples: None,
            },
            replay: None,
        }),
        loads: Vec::new(),
        tracing: args.cause.tracing(),
    };
    let ncfg = NoiseConfig {
        cpus: cpus.clone(),
        policy: Policy::Fifo { priority: 95 },
        duration: args.duration - half,
        threshold: None,
        max_spikes: DEFAULT_SPIKE_CAPACITY,
        lock_memory: true,
        // In stretches, so RT throttling never stops the loop: its gaps
        // then hold only time stolen from a running thread, which the
        // verdicts charge to each compute.
        stretch: Some(UNTHROTTLED_STRETCH),
        stop_at: None,
        samples: None,
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
    // Through both halves, released before the summary is printed.
    let mut held = opts::hold_c_states(&args.c_states, &cpus);
    let rt = realtime_allowed();
    let policy = if rt {
        "SCHED_FIFO 95"
    } else {
        "SCHED_OTHER (not allowed SCHED_FIFO)"
    };
    println!("\n== wake-up latency: one {policy} thread per CPU waking every 1ms for {half}");
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
            "\n== stolen time: one {policy} busy loop per CPU for {noise_duration} ({on} at a time with {rest} rests, so RT throttling never stops it)"
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
    for e in held.release() {
        eprintln!("punctual: could not restore: {e}");
    }
    opts::note_c_states(&mut rec, &held);
    print!("{}", probe::c_states_line(&rec));
    punctual_measure::loads::finish(loads, &load_specs, &mut rec);
    print!("{}", load::load_lines(&rec));
    print!("{causes}");
    punctual_measure::session::finish_record(&mut rec, elapsed, args.duration);
    println!("\n== summary");
    print!("{}", probe::check_summary(&rec));
    print_verdicts(&mut rec, timer_elapsed);
    // Warnings on standard error, as every verb puts them.
    if !rec.warnings.is_empty() {
        eprintln!("\n== what may hurt, and what to change");
        eprint!("{}", probe::warnings_text(&rec));
    }
    write_json(&rec, &args.json)?;
    gates.enforce(&rec)
}

#[cfg(test)]
mod tests {
    use super::*;
    use punctual_record::{Source, Spike};

    fn with_spikes(at_ms: impl Iterator<Item = u64>) -> Record {
        let mut r = Record::new(Source::Measured, "check", Platform::default());
        r.spikes = at_ms
            .map(|t| Spike {
                at_ns: Nanos::from_ms(t),
                cpu: 0,
                task: None,
                metric: Metric::Latency,
                value_ns: Nanos::from_ms(1),
                causes: Vec::new(),
                incomplete: false,
            })
            .collect();
        r
    }

    /// 40 late wake-ups spread over both halves of a 10 s run: one
    /// machine. All 40 in the first half: changed, said with the counts.
    #[test]
    fn halves_that_differ_beyond_chance_are_named() {
        let even = with_spikes((0..40).map(|i| i * 250));
        assert_eq!(halves_differ(&even, Nanos::from_secs(10)), None);
        let front = with_spikes((0..40).map(|i| i * 100));
        let d = halves_differ(&front, Nanos::from_secs(10)).unwrap();
        assert!(
            d.contains("40 latest wake-ups, 40 came in the first half"),
            "{d}"
        );
        assert!(unrepresentative(&front, Nanos::from_secs(10)).is_some());
        // Too few to tell.
        let few = with_spikes((0..10).map(|i| i * 100));
        assert_eq!(halves_differ(&few, Nanos::from_secs(10)), None);
    }
}
