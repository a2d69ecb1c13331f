//! `--cause` on the probe verbs (`timer`, `noise`, `check`): the tracefs
//! flight recorder from `punctual_trace` runs beside the real probe, and
//! its events name what filled each spike and each stolen interval of that
//! probe's own record. `punctual cause` runs the same probes with more
//! knobs for the recorder; here the user keeps every option and table of
//! the verb they know.

use punctual_record::{Record, Spike, Warning};
use punctual_trace::recorder::{
    CauseSummary, FlightRecorder, Options, ProbeGaps, ProbeThread, Trace,
};
use punctual_units::Nanos;

use crate::opts;

/// The flags every probe verb shares.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct CauseArgs {
    /// Also run the tracefs flight recorder and name what caused each
    /// spike and each stolen interval (needs root; without tracefs one
    /// warning and the probe runs anyway).
    #[arg(long)]
    pub cause: bool,
    /// With --cause: break down only spikes at least this long (default:
    /// every spike the spike log kept).
    #[arg(long = "cause-threshold", value_parser = opts::duration, requires = "cause")]
    pub cause_threshold: Option<Nanos>,
}

/// A running recorder, or why there is none (the warning is already in
/// the record and on stderr).
pub struct Attached {
    recorder: Option<FlightRecorder>,
    threshold: Option<Nanos>,
}

/// Starts the recorder on `cpus` when `--cause` was given. Never fails:
/// tracing that cannot start is one `NoTracing` warning and the probe
/// runs without it.
pub fn start(args: &CauseArgs, cpus: &[u32], rec: &mut Record) -> Option<Attached> {
    if !args.cause {
        return None;
    }
    rec.set_config("cause", true);
    if let Some(t) = args.cause_threshold {
        rec.set_config("cause_threshold_ns", t.0);
    }
    let recorder = start_recorder(cpus, &Options::default(), rec);
    Some(Attached {
        recorder,
        threshold: args.cause_threshold,
    })
}

/// Starts the recorder, or records (and prints) the one warning that says
/// why tracing is unavailable.
pub fn start_recorder(cpus: &[u32], opts: &Options, rec: &mut Record) -> Option<FlightRecorder> {
    match FlightRecorder::start(cpus, opts) {
        Ok(r) => Some(r),
        Err(e) => {
            no_tracing(rec, e.0);
            None
        }
    }
}

/// Stops the recorder; a failure is the same single warning.
pub fn stop_recorder(recorder: FlightRecorder, rec: &mut Record) -> Option<Trace> {
    match recorder.stop() {
        Ok(t) => Some(t),
        Err(e) => {
            no_tracing(rec, e.0);
            None
        }
    }
}

/// Attributes the record's spikes at or over `threshold` (all when
/// `None`) and its stolen time, split interval by interval for the CPUs in
/// `gaps`. Spikes under the threshold stay in the record, not broken down.
pub fn attribute(
    trace: &Trace,
    rec: &mut Record,
    probes: &[ProbeThread],
    threshold: Option<Nanos>,
    gaps: &[ProbeGaps],
) -> CauseSummary {
    let kept: Vec<Spike> = match threshold {
        Some(t) => {
            let (big, small): (Vec<Spike>, Vec<Spike>) = std::mem::take(&mut rec.spikes)
                .into_iter()
                .partition(|s| s.value_ns >= t);
            rec.spikes = big;
            small
        }
        None => Vec::new(),
    };
    let sum = trace.attribute_with_gaps(rec, probes, gaps);
    rec.spikes.extend(kept);
    rec.spikes.sort_by_key(|s| (s.at_ns, s.cpu));
    sum
}

fn no_tracing(rec: &mut Record, reason: String) {
    let w = Warning::NoTracing { reason };
    eprintln!("punctual: {}", w.message());
    rec.warnings.push(w);
}

/// One probe thread per CPU, all on the record's time zero (the probes
/// shift every spike onto it when they fill the record).
pub fn threads(tids: &[(u32, i32)], origin: Nanos, span: Nanos) -> Vec<ProbeThread> {
    tids.iter()
        .map(|&(cpu, tid)| ProbeThread {
            cpu,
            tid,
            origin,
            span,
            excluded: Vec::new(),
        })
        .collect()
}

/// Stops the recorder right after the probe and attributes the record's
/// spikes (those at or over the threshold) and stolen time, interval by
/// interval for the CPUs in `gaps` (the noise probe's log). Returns
/// the text to print, headed by `what` was measured: top offenders, per-spike breakdowns, and what the
/// recorder cost.
pub fn finish(
    att: Option<Attached>,
    rec: &mut Record,
    probes: &[ProbeThread],
    gaps: &[ProbeGaps],
    what: &str,
) -> String {
    let Some(att) = att else {
        return String::new();
    };
    let Some(recorder) = att.recorder else {
        return String::new();
    };
    let Some(trace) = stop_recorder(recorder, rec) else {
        return String::new();
    };
    let sum = attribute(&trace, rec, probes, att.threshold, gaps);
    let mut out = format!("\n== causes of {what} (tracefs flight recorder)\n");
    out.push_str(&report(&sum, rec, 10, 10));
    out
}

/// The attribution as `punctual cause` prints it: the `top` offenders per
/// CPU and overall, the `spikes` largest spikes broken down, the sources
/// named, and what the recorder itself cost.
pub fn report(sum: &CauseSummary, rec: &Record, top: usize, spikes: usize) -> String {
    let mut out = punctual_trace::report::top_offenders(sum, top);
    out.push_str(&punctual_trace::report::spike_breakdowns(rec, spikes));
    out.push_str(&punctual_trace::report::named_line(sum));
    out.push_str(&format!(
        "Recorder: {} events in {} pages, reader used {} of CPU ({:.3}% of one CPU)\n",
        sum.events,
        sum.pages,
        Nanos(sum.recorder_cpu_ns),
        sum.recorder_cpu_fraction * 100.0
    ));
    out
}
