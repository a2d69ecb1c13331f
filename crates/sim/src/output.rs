//! Turns a run's outcome into the record every other verb reads, a flat
//! summary for sweeps and tests, and a Chrome/Perfetto trace.

use std::collections::BTreeMap;

use punctual_record::sim::{SimConstraint, SimMultiprocessor, SimSection, SimStream, SimTask};
use punctual_record::{
    Metric, Period, PeriodSummary, Platform, Record, Source, SourceShare, Spike, Stolen, Warning,
};
use punctual_units::Nanos;
use serde_json::{json, Value};

use crate::outcome::Outcome;
use crate::scenario::Scenario;

/// Simulated runs carry a fixed start time: the record of a scenario and
/// seed must be the same bytes on every run (the real time a simulation was
/// run tells nothing about its results).
pub const SIMULATED_EPOCH: &str = "1970-01-01T00:00:00Z";

/// Flat `name → value` figures of one run, the row of a sweep table.
///
/// Keys: `<task>.jobs`, `.deadline_misses`, `.preemptions`,
/// `.latency_max_us`, `.interval_max_us`, `.interval_near_0_fraction`…;
/// reserved tasks add `.periods`, `.period_misses`, `.period_miss_fraction`,
/// `.received_mean_us`, `.requested_mean_us`, `.stolen_fraction`;
/// streams `<stream>.arrived`, `.lost`, `.loss_fraction`, `.paused_fraction`;
/// CPUs `cpu<N>.stolen_fraction`; and `events`. Under `sim.multiprocessor`
/// each task adds `.migrations`.
pub fn summary(o: &Outcome) -> BTreeMap<String, f64> {
    let mut m = BTreeMap::new();
    let dur = o.ended_at.0.max(1) as f64;
    m.insert("events".into(), o.events as f64);
    for (i, t) in o.tasks.iter().enumerate() {
        let n = &t.name;
        if t.jobs > 0 || t.releases > 0 && !t.reserved {
            m.insert(format!("{n}.jobs"), t.jobs as f64);
            m.insert(format!("{n}.deadline_misses"), t.deadline_misses as f64);
            m.insert(
                format!("{n}.deadline_miss_fraction"),
                // Aborted jobs ended too, without completing.
                t.deadline_misses as f64 / (t.jobs + t.aborted.unwrap_or(0)).max(1) as f64,
            );
            if let Some(a) = t.aborted {
                m.insert(format!("{n}.aborted"), a as f64);
            }
            m.insert(format!("{n}.preemptions"), t.preemptions as f64);
            if let Some(mp) = &o.multiprocessor {
                m.insert(format!("{n}.migrations"), mp.migrations[i] as f64);
            }
            m.insert(
                format!("{n}.latency_max_us"),
                t.latency.max().0 as f64 / 1e3,
            );
            m.insert(
                format!("{n}.interval_max_us"),
                t.interval.max().0 as f64 / 1e3,
            );
            m.insert(
                format!("{n}.response_max_us"),
                t.response.max().0 as f64 / 1e3,
            );
        }
    }
    for p in &o.period_totals {
        let n = &p.task;
        let k = p.periods.max(1) as f64;
        m.insert(format!("{n}.periods"), p.periods as f64);
        m.insert(format!("{n}.period_misses"), p.misses as f64);
        m.insert(format!("{n}.period_miss_fraction"), p.misses as f64 / k);
        m.insert(
            format!("{n}.received_mean_us"),
            p.received.0 as f64 / k / 1e3,
        );
        m.insert(
            format!("{n}.requested_mean_us"),
            p.requested.0 as f64 / k / 1e3,
        );
        let run = (p.received.0 + p.stolen.0).max(1) as f64;
        m.insert(format!("{n}.stolen_fraction"), p.stolen.0 as f64 / run);
    }
    for s in &o.streams {
        let n = &s.name;
        m.insert(format!("{n}.arrived"), s.arrived as f64);
        m.insert(format!("{n}.delivered"), s.delivered as f64);
        m.insert(format!("{n}.lost"), s.lost as f64);
        m.insert(
            format!("{n}.loss_fraction"),
            s.lost as f64 / (s.lost + s.arrived).max(1) as f64,
        );
        m.insert(format!("{n}.paused_fraction"), s.paused_ns.0 as f64 / dur);
    }
    for (c, s) in o.cpus.iter().enumerate() {
        m.insert(format!("cpu{c}.stolen_fraction"), s.total.0 as f64 / dur);
    }
    m
}

/// The run as a record (`source: simulated`, `kind: simulate`).
/// Most buckets a simulated series' histogram keeps in the record. An
/// overloaded task's lateness grows without bound and its exact 1 µs
/// histogram with it (an 83 MB record once); past this many buckets the
/// width doubles until it fits, as the HdrHistogram beside it already
/// does. The percentiles, min, mean and max stay exact.
pub const MAX_RECORD_BUCKETS: usize = 2048;

/// Coarsens every series histogram with more than [`MAX_RECORD_BUCKETS`]
/// buckets, with one warning naming each.
fn bound_histograms(r: &mut Record) {
    let mut coarse = Vec::new();
    for s in &mut r.series {
        if s.histogram.buckets.len() <= MAX_RECORD_BUCKETS {
            continue;
        }
        let mut w = s.histogram.bucket_ns.max(1);
        let mut h = s.histogram.clone();
        while h.buckets.len() > MAX_RECORD_BUCKETS {
            w = w.saturating_mul(2);
            h = s.histogram.rebucket(w);
        }
        coarse.push(format!("{} ({} ns)", s.name, w));
        s.histogram = h;
    }
    if !coarse.is_empty() {
        r.warnings.push(Warning::Other {
            message: format!(
                "histograms wider than {MAX_RECORD_BUCKETS} buckets were kept at a coarser bucket to bound the record: {}",
                coarse.join(", ")
            ),
        });
    }
}

pub fn to_record(scn: &Scenario, o: &Outcome, overrides: &[(String, String)]) -> Record {
    let mut platform = Platform {
        logical_cpus: Some(o.cpus.len() as u32),
        ..Default::default()
    };
    platform.other.insert("machine".into(), "simulated".into());
    platform.other.insert("clock".into(), o.clock.clone());
    let mut r = Record::new(Source::Simulated, "simulate", platform);
    r.started_at = SIMULATED_EPOCH.to_string();
    r.duration_ns = o.ended_at;
    r.interrupted = o.interrupted;
    r.set_config("scenario_file", &scn.file);
    r.set_config("scenario", &scn.text);
    r.set_config("seed", o.seed);
    r.set_config("duration_ns", o.duration.0);
    if !overrides.is_empty() {
        let v: Vec<String> = overrides.iter().map(|(k, v)| format!("{k}={v}")).collect();
        r.set_config("set", v);
    }
    for t in &o.tasks {
        r.series.extend(t.series());
    }
    bound_histograms(&mut r);
    let dur = o.ended_at;
    for (c, s) in o.cpus.iter().enumerate() {
        if let Some(g) = &s.gaps {
            let mut gs = g.to_series(&format!("cpu{c}.gap"), Metric::Gap);
            gs.cpu = Some(c as u32);
            r.series.push(gs);
        }
    }
    for (c, s) in o.cpus.iter().enumerate() {
        let mine: Vec<_> = o
            .sources
            .iter()
            .filter(|x| x.cpu as usize == c && x.count > 0)
            .collect();
        let total_src: u64 = mine.iter().map(|x| x.total.0).sum();
        let by_source = mine
            .iter()
            .map(|x| SourceShare {
                kind: x.kind.to_string(),
                name: x.name.to_string(),
                count: x.count,
                total_ns: x.total,
                max_ns: x.max,
                share: if total_src == 0 {
                    0.0
                } else {
                    x.total.0 as f64 / total_src as f64
                },
            })
            .collect();
        r.stolen.push(Stolen {
            cpu: c as u32,
            task: None,
            observed_ns: dur,
            total_ns: s.total,
            fraction: s.total.0 as f64 / dur.0.max(1) as f64,
            intervals: s.intervals,
            max_ns: s.max,
            threshold_ns: Nanos::ZERO,
            loop_cost_ns: None,
            timeline: s.timeline.clone(),
            by_source,
            kernel_view: None,
        });
    }
    for (at, cpu, task, v) in &o.spikes {
        r.spikes.push(Spike {
            at_ns: *at,
            cpu: *cpu,
            task: Some(o.tasks[*task as usize].name.to_string()),
            metric: Metric::Latency,
            value_ns: *v,
            causes: Vec::new(),
            incomplete: false,
        });
    }
    r.spikes_dropped = o.spikes_dropped;
    for (name, p) in &o.periods {
        r.periods.push(Period {
            task: name.clone(),
            index: p.index,
            start_ns: p.start,
            reserved_ns: p.need,
            requested_ns: p.requested,
            received_ns: p.received,
            stolen_ns: p.stolen,
            hit: p.hit,
        });
    }
    r.periods_dropped = o.periods_dropped;
    for p in &o.period_totals {
        r.period_summary.push(PeriodSummary {
            task: p.task.clone(),
            periods: p.periods,
            misses: p.misses,
            reserved_ns: p.need,
            received_total_ns: p.received,
            stolen_total_ns: p.stolen,
            requested_total_ns: p.requested,
        });
    }
    for w in &o.warnings {
        r.warnings.push(Warning::Other { message: w.clone() });
    }
    if o.interrupted {
        r.warnings.push(Warning::Interrupted {
            completed_ns: o.ended_at.0,
            asked_ns: o.duration.0,
        });
    }
    let tasks: BTreeMap<String, SimTask> = o
        .tasks
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let mut v = SimTask {
                releases: t.releases,
                jobs: t.jobs,
                deadline_misses: t.deadline_misses,
                preemptions: t.preemptions,
                backlog_lost: t.backlog_lost,
                reservation: t.rez_kind.clone(),
                // Only under sim.on_miss = "abort", so other records are unchanged.
                aborted: t.aborted,
                ..Default::default()
            };
            // Only under sim.multiprocessor, so records of pinned tasks are
            // unchanged.
            if let Some(m) = &o.multiprocessor {
                if m.placement.is_some() {
                    // Where partitioning put it; a global task has none.
                    v.cpu = Some(t.cpu);
                }
                v.migrations = Some(m.migrations[i]);
                v.task_migrations = Some(m.task_migrations[i]);
            }
            (t.name.to_string(), v)
        })
        .collect();
    let streams: BTreeMap<String, SimStream> = o
        .streams
        .iter()
        .map(|s| {
            (
                s.name.clone(),
                SimStream {
                    arrived: s.arrived,
                    delivered: s.delivered,
                    lost: s.lost,
                    capacity: s.capacity,
                    max_fill: s.max_fill,
                    paused_ns: s.paused_ns,
                },
            )
        })
        .collect();
    // Only when the interrupt-level queue overflowed, so records of runs
    // the CPU could serve are unchanged.
    let interrupt_work_dropped: BTreeMap<String, u64> = o
        .sources
        .iter()
        .filter(|x| x.dropped > 0)
        .map(|x| (x.name.to_string(), x.dropped))
        .collect();
    let multiprocessor = o.multiprocessor.as_ref().map(|m| SimMultiprocessor {
        policy: m.policy.to_string(),
        placement: m.placement.map(str::to_string),
        cpus: o.cpus.len() as u32,
        migrations: m.migrations.iter().sum::<u64>(),
        task_migrations: m.task_migrations.iter().sum::<u64>(),
    });
    let constraints: BTreeMap<String, SimConstraint> = o
        .constraints
        .iter()
        .map(|c| {
            (
                c.name.clone(),
                SimConstraint {
                    asked_at_ns: c.asked_at,
                    window_start_ns: c.window_start,
                    deadline_ns: c.deadline,
                    estimate_ns: c.estimate,
                    granted: c.granted,
                    denied_because: c.denied_because.clone(),
                    received_ns: c.received,
                    completed_at_ns: c.completed_at,
                    met_deadline: c.met_deadline,
                },
            )
        })
        .collect();
    let sim = SimSection {
        events: o.events,
        scheduler_picks: o.picks,
        tasks,
        streams,
        trace_slices_dropped: o.trace_dropped,
        interrupt_work_dropped,
        multiprocessor,
        constraints,
    };
    r.extra.insert(
        "sim".into(),
        serde_json::to_value(&sim).expect("plain data serializes"),
    );
    let sum: BTreeMap<String, Value> = summary(o).into_iter().map(|(k, v)| (k, json!(v))).collect();
    r.extra.insert("summary".into(), json!(sum));
    if let Some(t) = timeline_json(o) {
        r.extra.insert("timeline".into(), t);
    }
    r
}

/// Chrome trace-event JSON (opens in ui.perfetto.dev): one process per
/// CPU, one track per thread, interrupts and DPCs on their own track.
pub fn trace_json(o: &Outcome) -> String {
    let mut ev: Vec<Value> = Vec::new();
    for c in 0..o.cpus.len() {
        ev.push(json!({"name":"process_name","ph":"M","pid":c,"tid":0,"args":{"name":format!("cpu{c}")}}));
        ev.push(json!({"name":"thread_name","ph":"M","pid":c,"tid":0,"args":{"name":"interrupts+DPCs (stolen)"}}));
    }
    for (i, t) in o.tasks.iter().enumerate() {
        ev.push(
            json!({"name":"thread_name","ph":"M","pid":t.cpu,"tid":i + 1,"args":{"name":&*t.name}}),
        );
    }
    for s in &o.trace {
        ev.push(json!({
            "name": s.name,
            "cat": if s.track == 0 { "stolen" } else { "thread" },
            "ph": "X",
            "pid": s.cpu,
            "tid": s.track,
            "ts": s.start.0 as f64 / 1e3,
            "dur": s.dur.0 as f64 / 1e3,
        }));
    }
    let doc = json!({
        "traceEvents": ev,
        "displayTimeUnit": "ns",
        "otherData": {
            "producer": "punctual simulate",
            "seed": o.seed,
            "slices_dropped": o.trace_dropped,
        }
    });
    serde_json::to_string(&doc).expect("trace serializes")
}

/// `extra.timeline`: the bounded slice log of the start of the run, so the
/// HTML report can draw who ran when and where time was stolen without a
/// separate trace file. `None` when the window is zero.
fn timeline_json(o: &Outcome) -> Option<Value> {
    let t = &o.timeline;
    if t.window.is_zero() {
        return None;
    }
    let end = t.window.min(o.ended_at);
    let slices: Vec<Value> = t
        .slices
        .iter()
        .map(|s| {
            json!({
                "cpu": s.cpu,
                "track": &*s.track,
                "kind": s.kind,
                "name": &*s.name,
                "start_ns": s.start.0,
                "len_ns": s.len.0,
            })
        })
        .collect();
    Some(json!({
        "window_ns": [0u64, end.0],
        "slices": slices,
        "dropped": t.dropped,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::outcome::RunOptions;

    #[test]
    fn an_overloaded_task_keeps_a_bounded_histogram() {
        // Up to 5 ms of work every 2 ms for 60 s: lateness grows to the
        // backlog bound, one 1 µs bucket per distinct latency.
        let text = "[sim]\nduration = \"60s\"\n[[task]]\nname = \"a\"\nkind = \"periodic\"\nperiod = \"2ms\"\nexec = { uniform = [\"1ms\", \"5ms\"] }\npriority = 5\n";
        let scn = Scenario::parse("over.toml", text, &[]).unwrap();
        let out = crate::run(&scn, &RunOptions::default(), None).unwrap();
        let exact = out.tasks[0].latency.to_series("a.latency", Metric::Latency);
        assert!(
            exact.histogram.buckets.len() > MAX_RECORD_BUCKETS,
            "{}",
            exact.histogram.buckets.len()
        );
        let r = to_record(&scn, &out, &[]);
        let s = r.series.iter().find(|s| s.name == "a.latency").unwrap();
        assert!(s.histogram.buckets.len() <= MAX_RECORD_BUCKETS);
        assert!(s.histogram.bucket_ns > 1000);
        assert_eq!(s.histogram.total(), exact.histogram.total());
        assert_eq!(s.percentiles, exact.percentiles);
        assert!(r
            .warnings
            .iter()
            .any(|w| format!("{w:?}").contains("a.latency")));
        let bytes = r.to_json_pretty().len();
        assert!(bytes < 5_000_000, "{bytes}");
    }
}
