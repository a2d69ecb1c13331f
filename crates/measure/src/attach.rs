//! The tracefs flight recorder beside a probe: its events name what filled
//! each spike and each stolen interval of that probe's own record.

use punctual_record::{Record, Spike, Warning};
use punctual_trace::recorder::{
    CauseSummary, FlightRecorder, Options, ProbeGaps, ProbeThread, Trace,
};
use punctual_units::Nanos;

/// Starts the recorder, or records (and prints) the one warning that says
/// why tracing is unavailable. Never fails: the probe runs without it.
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
