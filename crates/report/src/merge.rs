//! `--merge`: several runs or machines into one record, losing nothing a
//! tail analysis needs.
//!
//! Series of the same name are merged through their HdrHistogram and sparse
//! histogram ([`Recorder::from_series`] + [`Recorder::merge`]), so the
//! merged percentiles are those of all samples, not averages of
//! percentiles. Runs are laid end to end in time: the second run's spikes,
//! periods and stolen-time timeline start where the first run's duration
//! ends. Each input's identity (label, host, kind, start, duration,
//! platform, config) is kept in `extra["merged_from"]` so the report can
//! still show where the samples came from and diff platforms.
//!
//! A series found in only some of the runs keeps its own time base
//! (`Series::observed_ns`): its per-hour rates are over the time it was
//! observed, not over the sum of every run. A measured and a simulated
//! record are not merged: one record has one provenance, and calling a
//! measurement simulated (or the reverse) would misstate both.

use std::collections::BTreeMap;

use punctual_record::{
    KernelView, Nanos, PeriodSummary, Record, Recorder, Source, SourceShare, Stolen, Timeline,
};

use crate::{Input, ReportError};

/// A series being merged: name, accumulator, cpu, task, metric, time
/// observed.
type MergedSeries = (
    String,
    Recorder,
    Option<u32>,
    Option<String>,
    punctual_record::Metric,
    Nanos,
);

/// Merges `inputs` in order. One input is returned unchanged except for
/// the `merged_from` note.
pub fn merge(inputs: &[Input]) -> Result<Record, ReportError> {
    let first = inputs
        .first()
        .ok_or_else(|| ReportError::Input("--merge needs at least one record".into()))?;
    let mut out = Record::new(first.record.source, "merge", first.record.platform.clone());
    out.started_at = first.record.started_at.clone();
    out.config = first.record.config.clone();

    let mut provenance = Vec::new();
    let mut offset = Nanos::ZERO;
    let mut series: Vec<MergedSeries> = Vec::new();
    let mut stolen: BTreeMap<(u32, Option<String>), Stolen> = BTreeMap::new();
    let mut summaries: BTreeMap<String, PeriodSummary> = BTreeMap::new();

    for inp in inputs {
        let r = &inp.record;
        // Nested merges keep their own provenance instead of a second layer.
        match r.extra.get("merged_from").and_then(|v| v.as_array()) {
            Some(prev) if r.kind == "merge" => provenance.extend(prev.iter().cloned()),
            _ => provenance.push(serde_json::json!({
                "label": inp.label,
                "kind": r.kind,
                "source": r.source,
                "hostname": r.platform.hostname,
                "started_at": r.started_at,
                "duration_ns": r.duration_ns,
                "offset_ns": offset,
                "platform": r.platform,
                "config": r.config,
            })),
        }
        if r.source != first.record.source {
            return Err(ReportError::Input(format!(
                "{} is {} but {} is {}: a merged record has one provenance, so measured and simulated runs are not merged (report them side by side without --merge, or compare them with punctual compare)",
                first.label,
                source_word(first.record.source),
                inp.label,
                source_word(r.source)
            )));
        }
        out.interrupted |= r.interrupted;

        for s in &r.series {
            let rec = Recorder::from_series(s).map_err(|e| {
                ReportError::Input(format!("{}: series {}: {e}", inp.label, s.name))
            })?;
            let observed = r.series_duration(s);
            match series.iter_mut().find(|x| x.0 == s.name) {
                Some(x) => {
                    x.5 += observed;
                    if x.4 != s.metric {
                        return Err(ReportError::Input(format!(
                            "{}: series {} is {} here but {} in an earlier record; cannot merge different metrics under one name",
                            inp.label,
                            s.name,
                            s.metric.as_str(),
                            x.4.as_str()
                        )));
                    }
                    // The coarser bucket wins so the sparse form stays exact.
                    if s.histogram.bucket_ns > x.1.to_series("", s.metric).histogram.bucket_ns {
                        let mut r2 = rec;
                        r2.merge(&x.1);
                        x.1 = r2;
                    } else {
                        x.1.merge(&rec);
                    }
                }
                None => series.push((
                    s.name.clone(),
                    rec,
                    s.cpu,
                    s.task.clone(),
                    s.metric,
                    observed,
                )),
            }
        }

        for st in &r.stolen {
            let e = stolen
                .entry((st.cpu, st.task.clone()))
                .or_insert_with(|| Stolen {
                    cpu: st.cpu,
                    task: st.task.clone(),
                    threshold_ns: st.threshold_ns,
                    loop_cost_ns: st.loop_cost_ns,
                    timeline: Timeline::new(st.timeline.bin_ns),
                    ..Default::default()
                });
            e.observed_ns += st.observed_ns;
            e.total_ns += st.total_ns;
            e.intervals += st.intervals;
            e.max_ns = e.max_ns.max(st.max_ns);
            e.threshold_ns = e.threshold_ns.max(st.threshold_ns);
            for (i, v) in st.timeline.values_ns.iter().enumerate() {
                if !v.is_zero() {
                    e.timeline
                        .add(offset + Nanos(i as u64 * st.timeline.bin_ns.0), *v);
                }
            }
            for src in &st.by_source {
                match e
                    .by_source
                    .iter_mut()
                    .find(|x| x.kind == src.kind && x.name == src.name)
                {
                    Some(x) => {
                        x.count += src.count;
                        x.total_ns += src.total_ns;
                        x.max_ns = x.max_ns.max(src.max_ns);
                    }
                    None => e.by_source.push(src.clone()),
                }
            }
            if let Some(k) = &st.kernel_view {
                let kv = e.kernel_view.get_or_insert_with(KernelView::default);
                kv.irq_ns += k.irq_ns;
                kv.softirq_ns += k.softirq_ns;
                kv.steal_ns += k.steal_ns;
                for (name, n) in &k.interrupts {
                    *kv.interrupts.entry(name.clone()).or_default() += n;
                }
            }
        }

        for sp in &r.spikes {
            let mut sp = sp.clone();
            sp.at_ns += offset;
            out.spikes.push(sp);
        }
        out.spikes_dropped += r.spikes_dropped;
        for p in &r.periods {
            let mut p = p.clone();
            p.start_ns += offset;
            out.periods.push(p);
        }
        out.periods_dropped += r.periods_dropped;
        for ps in &r.period_summary {
            let e = summaries
                .entry(ps.task.clone())
                .or_insert_with(|| PeriodSummary {
                    task: ps.task.clone(),
                    periods: 0,
                    misses: 0,
                    reserved_ns: ps.reserved_ns,
                    received_total_ns: Nanos::ZERO,
                    stolen_total_ns: Nanos::ZERO,
                    requested_total_ns: Nanos::ZERO,
                });
            e.periods += ps.periods;
            e.misses += ps.misses;
            e.received_total_ns += ps.received_total_ns;
            e.stolen_total_ns += ps.stolen_total_ns;
            e.requested_total_ns += ps.requested_total_ns;
        }
        out.load.extend(r.load.iter().cloned());
        for w in &r.warnings {
            if !out.warnings.contains(w) {
                out.warnings.push(w.clone());
            }
        }
        offset += r.duration_ns;
    }

    out.duration_ns = offset;
    out.series = series
        .into_iter()
        .map(|(name, rec, cpu, task, metric, observed)| {
            let mut s = rec.to_series(&name, metric);
            s.cpu = cpu;
            s.task = task;
            s.observed_ns = (observed != offset).then_some(observed);
            s
        })
        .collect();
    out.stolen = stolen
        .into_values()
        .map(|mut s| {
            s.fraction = if s.observed_ns.is_zero() {
                0.0
            } else {
                s.total_ns.0 as f64 / s.observed_ns.0 as f64
            };
            let total = s.by_source.iter().map(|x| x.total_ns.0).sum::<u64>().max(1);
            for x in &mut s.by_source {
                x.share = x.total_ns.0 as f64 / total as f64;
            }
            s.by_source
                .sort_by_key(|x: &SourceShare| std::cmp::Reverse(x.total_ns));
            s
        })
        .collect();
    out.period_summary = summaries.into_values().collect();
    out.extra
        .insert("merged_from".into(), serde_json::Value::Array(provenance));
    Ok(out)
}

fn source_word(s: Source) -> &'static str {
    match s {
        Source::Measured => "measured",
        Source::Simulated => "simulated",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use punctual_record::{Metric, Platform, Spike};

    fn run(host: &str, values: &[u64], stolen_ns: u64) -> Record {
        let mut r = Record::new(
            Source::Measured,
            "timer",
            Platform {
                hostname: Some(host.into()),
                ..Default::default()
            },
        );
        r.duration_ns = Nanos::from_secs(10);
        let mut rec = Recorder::new(Nanos(1000)).with_sample_period(Nanos::from_ms(1));
        for v in values {
            rec.record(Nanos(*v));
        }
        let mut s = rec.to_series("cpu0.latency", Metric::Latency);
        s.cpu = Some(0);
        r.series.push(s);
        let mut t = Timeline::new(Nanos::from_secs(1));
        t.add(Nanos::from_secs(3), Nanos(stolen_ns));
        r.stolen.push(Stolen {
            cpu: 0,
            observed_ns: Nanos::from_secs(10),
            total_ns: Nanos(stolen_ns),
            intervals: 1,
            max_ns: Nanos(stolen_ns),
            timeline: t,
            by_source: vec![SourceShare {
                kind: "irq".into(),
                name: "virtio0".into(),
                count: 1,
                total_ns: Nanos(stolen_ns),
                max_ns: Nanos(stolen_ns),
                share: 1.0,
            }],
            ..Default::default()
        });
        r.spikes.push(Spike {
            at_ns: Nanos::from_secs(2),
            cpu: 0,
            task: None,
            metric: Metric::Latency,
            value_ns: Nanos(values.iter().copied().max().unwrap_or(0)),
            causes: vec![],
            incomplete: false,
        });
        r
    }

    #[test]
    fn merge_is_lossless_and_lays_runs_end_to_end() {
        let a: Vec<u64> = (1..=1000).map(|v| v * 37).collect();
        let b: Vec<u64> = (1..=1000).map(|v| v * 91 + 5000).collect();
        let m = merge(&[
            Input::new("a", run("alpha", &a, 5_000)),
            Input::new("b", run("beta", &b, 7_000)),
        ])
        .unwrap();
        let mut all = Recorder::new(Nanos(1000)).with_sample_period(Nanos::from_ms(1));
        for v in a.iter().chain(b.iter()) {
            all.record(Nanos(*v));
        }
        let mut expect = all.to_series("cpu0.latency", Metric::Latency);
        expect.cpu = Some(0);
        let got = &m.series[0];
        assert_eq!(got.histogram, expect.histogram);
        assert_eq!(got.percentiles, expect.percentiles);
        assert_eq!(
            (got.count, got.min, got.max),
            (2000, expect.min, expect.max)
        );
        assert_eq!(m.duration_ns, Nanos::from_secs(20));
        assert_eq!(m.stolen[0].total_ns, Nanos(12_000));
        assert_eq!(m.stolen[0].by_source[0].total_ns, Nanos(12_000));
        assert_eq!(
            m.stolen[0]
                .timeline
                .values_ns
                .iter()
                .copied()
                .sum::<Nanos>(),
            Nanos(12_000)
        );
        assert_eq!(m.stolen[0].timeline.values_ns[13], Nanos(7_000));
        assert_eq!(m.spikes[1].at_ns, Nanos::from_secs(12));
        let from = m.extra["merged_from"].as_array().unwrap();
        assert_eq!(from.len(), 2);
        assert_eq!(from[1]["hostname"], "beta");
        // Merging a merge keeps one flat provenance list.
        let again = merge(&[Input::new("m", m.clone()), Input::new("c", run("c", &a, 1))]).unwrap();
        assert_eq!(again.extra["merged_from"].as_array().unwrap().len(), 3);
        assert_eq!(again.series[0].count, 3000);
    }

    #[test]
    fn different_metrics_under_one_name_are_refused() {
        let a = run("a", &[1000], 1);
        let mut b = run("b", &[1000], 1);
        b.series[0].metric = Metric::Gap;
        let e = merge(&[Input::new("a", a), Input::new("b", b)]).unwrap_err();
        assert!(e.to_string().contains("cpu0.latency"), "{e}");
    }

    #[test]
    fn measured_and_simulated_are_not_merged() {
        let a = run("a", &[1000], 1);
        let mut b = run("b", &[1000], 1);
        b.source = Source::Simulated;
        let e = merge(&[Input::new("a", a), Input::new("b", b)]).unwrap_err();
        let e = e.to_string();
        assert!(e.contains("a is measured but b is simulated"), "{e}");
    }

    #[test]
    fn a_series_in_one_run_keeps_its_own_time_base() {
        let a = run("a", &[1000, 2000], 1);
        let mut b = run("b", &[1000], 1);
        b.series[0].name = "cpu1.latency".into();
        let m = merge(&[Input::new("a", a.clone()), Input::new("b", b)]).unwrap();
        assert_eq!(m.duration_ns, Nanos::from_secs(20));
        for s in &m.series {
            // Each was seen for one 10 s run, not the merged 20 s.
            assert_eq!(m.series_duration(s), Nanos::from_secs(10), "{}", s.name);
        }
        // Present in every run: the record's duration is its time base.
        let both = merge(&[Input::new("a", a.clone()), Input::new("a2", a)]).unwrap();
        assert_eq!(both.series[0].observed_ns, None);
        assert_eq!(both.series_duration(&both.series[0]), Nanos::from_secs(20));
    }
}
