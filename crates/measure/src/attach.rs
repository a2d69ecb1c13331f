//! The tracefs flight recorder beside a probe: its events name what filled
//! each spike and each stolen interval of that probe's own record.

use punctual_record::{Record, Spike, Warning};
use punctual_trace::recorder::{
    CauseSummary, FlightRecorder, Options, ProbeGaps, ProbeThread, Trace,
};
use punctual_trace::tracedat::{KernelStack, RawWindow};
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

/// The kernel stack of what held the CPU of the event that stopped a
/// `--stop-at` run, into `extra.stopped_at.stack`: of the stacks the
/// trigger recorded on that CPU inside the event, the last one of the
/// thread that took most of it (its causes), else the last one of any
/// task but the probe.
pub fn stop_stack(raw: &RawWindow, rec: &mut Record) {
    let Some(e) = rec.extra.get("stopped_at") else {
        return;
    };
    let num = |k: &str| e.get(k).and_then(|v| v.as_u64());
    let (Some(cpu), Some(mono), Some(value)) = (num("cpu"), num("mono_ns"), num("value_ns")) else {
        return;
    };
    // A wake-up's time is when it ran; a gap's, when it began.
    let (from, to) = if rec.kind == "noise" {
        (mono, mono + value)
    } else {
        (mono.saturating_sub(value), mono)
    };
    let spike = rec
        .spikes
        .iter()
        .find(|s| u64::from(s.cpu) == cpu && s.value_ns.0 == value);
    let causes = spike.map(|s| s.causes.clone()).unwrap_or_default();
    let Some(stack) = event_stack(raw, cpu as u32, from, to, &causes, &[]) else {
        return;
    };
    let stack = serde_json::to_value(stack).unwrap_or(serde_json::Value::Null);
    if let Some(e) = rec.extra.get_mut("stopped_at") {
        e["stack"] = stack;
    }
}

/// The stack of what held `cpu` from `from` to `to` (trace clock) during
/// an event whose causes are `causes`, never one of `exclude`'s: see
/// [`stop_stack`].
pub fn event_stack(
    raw: &RawWindow,
    cpu: u32,
    from: u64,
    to: u64,
    causes: &[punctual_record::SourceShare],
    exclude: &[i32],
) -> Option<punctual_record::watch::KernelStack> {
    let mut threads: Vec<&punctual_record::SourceShare> =
        causes.iter().filter(|c| c.kind == "thread").collect();
    threads.sort_by(|a, b| b.share.total_cmp(&a.share));
    let s = pick_stack(raw, cpu, from, to, &threads, exclude)?;
    let kallsyms = std::fs::read_to_string("/proc/kallsyms").unwrap_or_default();
    Some(stack_record(raw, &s, &kallsyms))
}

/// The stack [`stop_stack`] keeps: of `threads` (named `comm/pid`, most
/// to blame first) the first with a stack in the window, else the last
/// stack of anything but punctual's own threads.
fn pick_stack(
    raw: &RawWindow,
    cpu: u32,
    from: u64,
    to: u64,
    threads: &[&punctual_record::SourceShare],
    exclude: &[i32],
) -> Option<KernelStack> {
    let inside: Vec<KernelStack> = raw
        .stacks()
        .into_iter()
        .filter(|s| s.cpu == cpu && s.ts >= from && s.ts <= to && !exclude.contains(&s.pid))
        .filter(|s| {
            !raw.keep
                .comms
                .get(&s.pid)
                .is_some_and(|c| c.starts_with("punctual"))
        })
        .collect();
    for t in threads {
        let pid: Option<i32> = t.name.rsplit('/').next().and_then(|p| p.parse().ok());
        if let Some(s) = inside.iter().rev().find(|s| Some(s.pid) == pid) {
            return Some(s.clone());
        }
    }
    inside.last().cloned()
}

/// A kernel stack as the record keeps it, its frames named from
/// `kallsyms`.
pub fn stack_record(
    raw: &RawWindow,
    s: &KernelStack,
    kallsyms: &str,
) -> punctual_record::watch::KernelStack {
    let name = raw.keep.comms.get(&s.pid).cloned().unwrap_or_default();
    punctual_record::watch::KernelStack {
        task: format!("{name}/{}", s.pid),
        pid: s.pid,
        mono_ns: s.ts,
        frames: punctual_trace::tracedat::symbolize(&s.frames, kallsyms),
    }
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
