//! `--format perfetto`: Chrome trace-event JSON, which ui.perfetto.dev and
//! chrome://tracing open directly.
//!
//! Each input is a process; each CPU and each task is its own thread track
//! (named by metadata events), so spikes land on the CPU they hit and
//! reservation periods on their task. Spikes are slices ending at the late
//! wake-up (starting when the thread should have run); their causes are in
//! the slice's args. Periods are slices as long as the time received, with
//! an instant event at each miss. Stolen time per timeline bin is a counter
//! track per CPU.

use std::collections::BTreeMap;

use serde_json::{json, Value};

use crate::Input;

/// Thread ids: CPUs at 1000+cpu, tasks at 100000+index, so they never clash.
const CPU_TID_BASE: u64 = 1000;
const TASK_TID_BASE: u64 = 100_000;

fn us(ns: u64) -> f64 {
    ns as f64 / 1000.0
}

pub fn render(inputs: &[Input]) -> Vec<u8> {
    let mut ev: Vec<Value> = Vec::new();
    for (k, i) in inputs.iter().enumerate() {
        let r = &i.record;
        let pid = k as u64 + 1;
        ev.push(
            json!({"ph": "M", "name": "process_name", "pid": pid, "tid": 0,
            "args": {"name": format!("{} ({}, {})", i.label, r.kind,
                r.platform.hostname.as_deref().unwrap_or("unknown host"))}}),
        );
        let mut cpus: BTreeMap<u32, ()> = BTreeMap::new();
        let mut tasks: BTreeMap<String, u64> = BTreeMap::new();
        for sp in &r.spikes {
            match &sp.task {
                Some(t) => {
                    let n = tasks.len() as u64;
                    tasks.entry(t.clone()).or_insert(n);
                }
                None => {
                    cpus.insert(sp.cpu, ());
                }
            }
        }
        for p in &r.periods {
            let n = tasks.len() as u64;
            tasks.entry(p.task.clone()).or_insert(n);
        }
        for st in &r.stolen {
            cpus.insert(st.cpu, ());
        }
        for s in &r.series {
            if let Some(c) = s.cpu {
                cpus.insert(c, ());
            }
        }
        for c in cpus.keys() {
            let tid = CPU_TID_BASE + *c as u64;
            ev.push(
                json!({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid,
                "args": {"name": format!("cpu{c}")}}),
            );
            ev.push(
                json!({"ph": "M", "name": "thread_sort_index", "pid": pid, "tid": tid,
                "args": {"sort_index": *c}}),
            );
        }
        for (t, idx) in &tasks {
            ev.push(json!({"ph": "M", "name": "thread_name", "pid": pid,
                "tid": TASK_TID_BASE + idx, "args": {"name": format!("task {t}")}}));
        }
        let tid_of = |cpu: u32, task: &Option<String>| -> u64 {
            match task {
                Some(t) => TASK_TID_BASE + tasks.get(t).copied().unwrap_or(0),
                None => CPU_TID_BASE + cpu as u64,
            }
        };
        for sp in &r.spikes {
            let start = sp.at_ns.0.saturating_sub(sp.value_ns.0);
            let causes: Vec<Value> = sp
                .causes
                .iter()
                .map(|c| {
                    json!({"kind": c.kind, "name": c.name, "count": c.count,
                    "total_ns": c.total_ns.0, "max_ns": c.max_ns.0})
                })
                .collect();
            ev.push(
                json!({"ph": "X", "cat": "spike", "pid": pid, "tid": tid_of(sp.cpu, &sp.task),
                "name": format!("{} {}", sp.metric.as_str(), sp.value_ns),
                "ts": us(start), "dur": us(sp.value_ns.0),
                "args": {"value_ns": sp.value_ns.0, "cpu": sp.cpu, "incomplete": sp.incomplete,
                    "causes": causes}}),
            );
        }
        for p in &r.periods {
            let tid = TASK_TID_BASE + tasks.get(&p.task).copied().unwrap_or(0);
            ev.push(json!({"ph": "X", "cat": "period", "pid": pid, "tid": tid,
                "name": format!("period {}{}", p.index, if p.hit { "" } else { " MISS" }),
                "ts": us(p.start_ns.0), "dur": us(p.received_ns.0),
                "args": {"reserved_ns": p.reserved_ns.0, "requested_ns": p.requested_ns.0,
                    "received_ns": p.received_ns.0, "stolen_ns": p.stolen_ns.0, "hit": p.hit}}));
            if !p.hit {
                ev.push(
                    json!({"ph": "i", "s": "t", "cat": "miss", "pid": pid, "tid": tid,
                    "name": "deadline miss", "ts": us(p.start_ns.0 + p.reserved_ns.0)}),
                );
            }
        }
        for st in &r.stolen {
            let w = st.timeline.bin_ns.0;
            let name = match &st.task {
                Some(t) => format!("stolen cpu{} ({t}) µs per bin", st.cpu),
                None => format!("stolen cpu{} µs per bin", st.cpu),
            };
            for (b, v) in st.timeline.values_ns.iter().enumerate() {
                ev.push(
                    json!({"ph": "C", "pid": pid, "tid": tid_of(st.cpu, &None), "name": name,
                    "ts": us(b as u64 * w), "args": {"stolen_us": us(v.0)}}),
                );
            }
        }
    }
    let doc = json!({"traceEvents": ev, "displayTimeUnit": "ns",
        "otherData": {"producer": "punctual", "version": env!("CARGO_PKG_VERSION")}});
    let mut s = serde_json::to_string(&doc).unwrap_or_default();
    s.push('\n');
    s.into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;
    use punctual_record::{Metric, Nanos, Period, Platform, Record, Source, Spike};

    #[test]
    fn one_track_per_cpu_and_task() {
        let mut r = Record::new(Source::Simulated, "simulate", Platform::default());
        for cpu in 0..2 {
            r.spikes.push(Spike {
                at_ns: Nanos::from_ms(5),
                cpu,
                task: None,
                metric: Metric::Latency,
                value_ns: Nanos::from_us(300),
                causes: vec![],
                incomplete: false,
            });
        }
        r.periods.push(Period {
            task: "mixer".into(),
            index: 0,
            start_ns: Nanos::ZERO,
            reserved_ns: Nanos::from_ms(4),
            requested_ns: Nanos::from_ms(4),
            received_ns: Nanos::from_ms(3),
            stolen_ns: Nanos::from_ms(1),
            hit: false,
        });
        let v: Value = serde_json::from_slice(&render(&[Input::new("x", r)])).unwrap();
        let evs = v["traceEvents"].as_array().unwrap();
        let names: Vec<(u64, String)> = evs
            .iter()
            .filter(|e| e["name"] == "thread_name")
            .map(|e| {
                (
                    e["tid"].as_u64().unwrap(),
                    e["args"]["name"].as_str().unwrap().to_string(),
                )
            })
            .collect();
        assert_eq!(names.len(), 3, "{names:?}");
        for e in evs.iter().filter(|e| e["ph"] == "X") {
            assert!(names.iter().any(|n| n.0 == e["tid"].as_u64().unwrap()));
        }
        let spike = evs.iter().find(|e| e["cat"] == "spike").unwrap();
        assert_eq!(spike["ts"], 4700.0);
        assert!(evs.iter().any(|e| e["cat"] == "miss"));
    }
}
