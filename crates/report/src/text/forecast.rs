//! What `punctual forecast` prints: per record the verdicts, then per
//! series the observed percentiles, the exceedance curve, the expected
//! worst cases, the tail fit, the MTTF against the buffering asked for
//! (and `--sweep`, `--target` sizing, `--rate`), and the pseudo worst case
//! of a task set. The numbers come from `punctual_analysis`; the method is
//! docs/forecast.md.

use punctual_analysis::buffer::{self, Buffering, Mttf};
use punctual_analysis::forecast::{Estimate, TailModel, WorstCase, WorstCaseUse};
use punctual_analysis::sched::{self, SchedReport};
use punctual_analysis::tail::CurvePoint;
use punctual_analysis::verdict::{human_secs, latency_like};
use punctual_analysis::Verdict;
use punctual_record::Record;
use punctual_units::Nanos;
use serde_json::{json, Value};

use crate::text::verdict::{compact, render_verdicts, tally};

/// What the forecast is asked for, validated before any record is read.
pub use punctual_analysis::plan::Plan;

/// The verdicts of one record, under their heading; when the record
/// cannot stand for a real-time consumer on one machine
/// (`unrepresentative`), one line says why before them all, as `check`
/// says it, and the verdict lines do not repeat it.
pub fn verdicts(shown: &str, v: &[Verdict], unrepresentative: Option<&str>) -> String {
    let mut out = format!(
        "verdicts for {shown} ({}; decided only when the whole 95% CI of the MTTF \
         is on one side of the target; each from the series that decides it):\n",
        tally(v)
    );
    match unrepresentative {
        Some(_) => out.push_str(&compact(v, unrepresentative)),
        None => out.push_str(&render_verdicts(v)),
    }
    out.push('\n');
    out
}

/// The line for series that get no MTTF: not lateness a consumer suffers.
pub fn skipped(shown: &str, skipped: &[String]) -> String {
    format!(
        "{shown}: no MTTF or verdict from {}: only wake-up latency or response time is \
         lateness a buffered consumer suffers\n\n",
        skipped.join(", ")
    )
}

fn est(e: &Estimate) -> (String, String, String) {
    let v = e
        .value_ns
        .map(|v| v.to_string())
        .unwrap_or_else(|| "—".to_string());
    let ci = match (e.ci_low_ns, e.ci_high_ns) {
        (Some(l), Some(h)) => format!("{l} – {h}"),
        (Some(l), None) => format!("≥ {l}"),
        (None, Some(h)) => format!("≤ {h}"),
        _ => "—".to_string(),
    };
    let how = if e.extrapolated {
        if e.value_ns.is_none() {
            format!(
                "extrapolated {:.0}×: interval only",
                1.0 / e.expected_in_record
            )
        } else {
            format!("extrapolated {:.0}×", 1.0 / e.expected_in_record)
        }
    } else if e.expected_in_record < 10.0 {
        "observed (few samples)".to_string()
    } else {
        "observed".to_string()
    };
    (v, ci, how)
}

fn mttf_ci(m: &Mttf) -> String {
    match (m.mttf_ci_low_seconds, m.mttf_ci_high_seconds) {
        (Some(l), Some(h)) => format!("{} – {}", human_secs(l), human_secs(h)),
        (Some(l), None) => format!("{} – never", human_secs(l)),
        (None, _) => "—".to_string(),
    }
}

/// One series' forecast: its text (observed percentiles, exceedance curve,
/// worst cases, tail fit, MTTF against the buffering, sizing, the pseudo
/// worst case) and the same as the `series[]` entry of `--json`.
pub fn series(shown: &str, rec: &Record, m: &TailModel, p: &Plan) -> (String, Value) {
    let mut o = String::new();
    let source = serde_json::to_value(rec.source).unwrap_or(Value::Null);
    heading(&mut o, shown, rec, m, &source);
    let curve = m.curve();
    exceedance(&mut o, m, &curve);
    let wc = m.worst_case();
    let wu = m.worst_case_use(p.usage);
    worst_cases(&mut o, p, &wc, &wu);
    tail_fit(&mut o, m, [&wc.week, &wu.week]);

    let mut j = json!({
        "record": shown,
        "source": source,
        "name": m.name,
        "metric": m.metric.as_str(),
        "count": m.tail.n,
        "sample_period_ns": m.sample_period_ns,
        "sample_period_source": m.sample_period_source,
        "covered_seconds": m.covered_s(),
        "max_ns": m.tail.max,
        "exceedance_curve": curve,
        "fit": m.fit,
        "fit_note": m.fit_note,
        "fit_anderson_darling": m.fit_quality,
        "worst_case": wc,
        "worst_case_use": wu,
        "slack_ns": Value::Null,
        "exceedance_rate_per_s": Value::Null,
        "mttf_seconds": Value::Null,
    });

    // Time to underrun: only from lateness (the caller said why not).
    let lateness = latency_like(m.metric);
    if let Some(b) = p.buffering.as_ref().filter(|_| lateness) {
        time_to_underrun(&mut o, &mut j, m, b);
    }
    if p.sweep && lateness {
        sweep(&mut o, &mut j, m, p);
    }
    if let Some(target) = p.target.filter(|_| lateness) {
        sizing(&mut o, &mut j, m, p, target);
    }
    if let Some(rate) = p.rate_per_s {
        packet_stream(&mut o, &mut j, m, p, rate);
    }
    if let Some(r) = p.miss_rate_per_s {
        pseudo_worst_case(&mut o, &mut j, m, p, r);
    }
    o.push('\n');
    (o, j)
}

/// The series' title line, its observed percentiles and whether the run
/// was cut short.
fn heading(o: &mut String, shown: &str, rec: &Record, m: &TailModel, source: &Value) {
    let s = rec.series_named(&m.name);
    o.push_str(&format!(
        "{shown} — {} ({}, {}): {} samples, one per {} ({}), {} of samples\n",
        m.name,
        m.metric.as_str(),
        source.as_str().unwrap_or("?"),
        m.tail.n,
        m.sample_period_ns,
        m.sample_period_source,
        human_secs(m.covered_s()),
    ));
    if let Some(s) = s {
        o.push_str(&format!(
            "  observed: p50 {}  p99 {}  p99.9 {}  p99.99 {}  max {}{}\n",
            s.percentiles.p50,
            s.percentiles.p99,
            s.percentiles.p99_9,
            s.percentiles.p99_99,
            s.max,
            if s.missed > 0 {
                format!("  ({} periods missed)", s.missed)
            } else {
                String::new()
            }
        ));
    }
    if rec.interrupted {
        o.push_str("  note: the run was interrupted; the record covers less than was asked\n");
    }
}

/// The exceedance curve, with each point's rate per hour.
fn exceedance(o: &mut String, m: &TailModel, curve: &[CurvePoint]) {
    o.push_str("  exceedance          x   samples above   P(X > x)   per hour\n");
    let per_h = m.samples_per_s() * 3600.0;
    for pt in curve {
        o.push_str(&format!(
            "  {:>19} {:>15} {:>10.3e} {:>10.1}\n",
            pt.x_ns.to_string(),
            pt.count,
            pt.probability,
            pt.probability * per_h
        ));
    }
}

/// The expected worst cases, continuous and per the usage asked for.
fn worst_cases(o: &mut String, p: &Plan, wc: &WorstCase, wu: &WorstCaseUse) {
    o.push_str("  expected worst case                    value   95% CI                  how\n");
    for (label, e) in [
        ("per hour (continuous)".to_string(), &wc.hour),
        ("per day (continuous)".to_string(), &wc.day),
        ("per week (continuous)".to_string(), &wc.week),
        (
            format!("per day of use ({}h)", p.usage.hours_per_day),
            &wu.day,
        ),
        (format!("per week of use ({})", p.usage.label()), &wu.week),
    ] {
        let (v, ci, how) = est(e);
        o.push_str(&format!("    {label:<34} {v:>9}   {ci:<23} {how}\n"));
    }
}

/// The tail fit (or why there is none), then why the first week's worst
/// case has no value, if one has none.
fn tail_fit(o: &mut String, m: &TailModel, weeks: [&Estimate; 2]) {
    match &m.fit {
        Some(f) => {
            o.push_str(&format!(
                "  tail fit: generalized Pareto above {} ({} samples, {:.3}%), ξ = {:.3}, σ = {}{}, A² = {:.2}\n",
                Nanos(f.threshold_ns as u64),
                f.excesses,
                f.exceed_fraction * 100.0,
                f.shape,
                Nanos(f.scale_ns as u64),
                f.endpoint_ns()
                    .map(|e| format!(", bounded at {}", Nanos(e as u64)))
                    .unwrap_or_default(),
                m.fit_quality.unwrap_or(f64::NAN)
            ));
            if let Some(n) = &m.fit_note {
                o.push_str(&format!("  note: {n}\n"));
            }
        }
        None => o.push_str(&format!(
            "  tail fit: none ({}); nothing is extrapolated\n",
            m.fit_note.as_deref().unwrap_or("?")
        )),
    }
    for e in weeks {
        if e.value_ns.is_none() {
            if let Some(n) = &e.note {
                o.push_str(&format!("  note: {n}\n"));
            }
            break;
        }
    }
}

/// The MTTF against the buffering asked for: slack, exceedance, the
/// first-order figure and the queue model's.
fn time_to_underrun(o: &mut String, j: &mut Value, m: &TailModel, b: &Buffering) {
    let Ok(r) = buffer::mttf(m, b) else {
        return;
    };
    o.push_str(&format!(
        "  buffering {} (compute {}): slack (n−1)·t − c = {}\n",
        b.label(),
        r.compute_ns,
        r.slack_ns
    ));
    let pe = &r.exceedance;
    o.push_str(&format!(
        "    P(latency > {}) = {:.3e} per wake-up ({} of {} observed{})\n",
        r.slack_ns,
        pe.probability,
        pe.observed_count,
        m.tail.n,
        if pe.extrapolated {
            "; from the fitted tail, extrapolated"
        } else {
            ""
        }
    ));
    let q = &r.queue;
    o.push_str(&format!(
        "    first order: {:.4} late wake-ups/s → MTTF {}\n",
        r.exceedance_rate_per_s,
        r.first_order_mttf_seconds
            .map(human_secs)
            .unwrap_or_else(|| "never".to_string()),
    ));
    o.push_str(&format!(
        "    queue model: stalls {:.1}/s of mean {} ({:.2}% of the CPU), (c + stolen)/t = {:.3}, \
         P(underrun) = {:.3e} per wake-up\n",
        q.stalls.rate_per_s,
        Nanos(q.stalls.mean_ns as u64),
        q.stalls.time_fraction * 100.0,
        q.utilization_ratio,
        q.underrun_probability,
    ));
    o.push_str(&format!(
        "    underruns {:.4}/s = {:.1}/h = {:.1}/day → MTTF {} (95% CI {}){}\n",
        r.underrun_rate_per_s,
        r.failures_per_hour,
        r.failures_per_day,
        r.mttf_seconds
            .map(human_secs)
            .unwrap_or_else(|| "never".to_string()),
        mttf_ci(&r),
        if r.extrapolated {
            " [extrapolated]"
        } else {
            ""
        }
    ));
    if let Some(ns) = &q.stalls.noise {
        o.push_str(&format!(
            "    stalls from the noise record's {} ({} gaps in {} of running time), \
             not from the latency tail\n",
            ns.series, ns.gaps, ns.running_ns
        ));
        j["stall_source"] = json!({
            "kind": "noise gaps",
            "series": ns.series,
            "gaps": ns.gaps,
            "running_ns": ns.running_ns,
            "gap_threshold_ns": ns.gap_threshold_ns,
        });
    }
    o.push_str(&format!("    formula: {}\n", r.formula));
    for asm in &r.assumptions {
        o.push_str(&format!("    assumes: {asm}\n"));
    }
    j["slack_ns"] = json!(r.slack_ns);
    j["exceedance_rate_per_s"] = json!(r.exceedance_rate_per_s);
    j["mttf_seconds"] = json!(r.mttf_seconds);
    j["mttf"] = serde_json::to_value(&r).unwrap_or(Value::Null);
}

/// `--sweep`: the MTTF against the number of buffers.
fn sweep(o: &mut String, j: &mut Value, m: &TailModel, p: &Plan) {
    let base = p
        .buffering
        .or_else(|| p.len_only.map(|t| Buffering::new(2, t, p.compute)));
    match base {
        Some(base) => {
            let max_n = (base.buffers + 4).max(8);
            let rows = buffer::sweep(m, &base, max_n);
            o.push_str(&format!(
                "  MTTF against buffering (t = {}, compute {}; MTTF from the queue model, the first-order figure beside it):\n    {:>3} {:>9} {:>9} {:>11} {:>10}  {:<22} {:>10}\n",
                base.buffer_len,
                base.compute.at(base.buffer_len),
                "n", "total", "slack", "P(>slack)", "MTTF", "95% CI", "1st order"
            ));
            for r in &rows {
                let ci = match (r.mttf_ci_low_seconds, r.mttf_ci_high_seconds) {
                    (Some(l), Some(h)) => format!("{} – {}", human_secs(l), human_secs(h)),
                    (Some(l), None) => format!("{} – never", human_secs(l)),
                    _ => "—".to_string(),
                };
                o.push_str(&format!(
                    "    {:>3} {:>9} {:>9} {:>11.3e} {:>10}  {:<22} {:>10}{}\n",
                    r.buffers,
                    r.total_buffering_ns.to_string(),
                    r.slack_ns.to_string(),
                    r.probability,
                    r.mttf_seconds
                        .map(human_secs)
                        .unwrap_or_else(|| "never".into()),
                    ci,
                    r.first_order_mttf_seconds
                        .map(human_secs)
                        .unwrap_or_else(|| "never".into()),
                    if r.extrapolated { " extrapolated" } else { "" }
                ));
            }
            j["sweep"] = serde_json::to_value(&rows).unwrap_or(Value::Null);
        }
        None => o.push_str("  sweep: needs --buffer-len\n"),
    }
}

/// `--target`: the least count of buffers, and the least length, that
/// reach the MTTF asked for.
fn sizing(o: &mut String, j: &mut Value, m: &TailModel, p: &Plan, target: Nanos) {
    let ts = target.as_secs_f64();
    let mut sizing = json!({ "target_seconds": ts });
    let t_for_n = p.buffering.map(|b| b.buffer_len).or(p.len_only);
    if let Some(t) = t_for_n {
        let base = Buffering::new(2, t, p.compute);
        let r = buffer::least_buffers(m, &base, ts, 64);
        match &r {
            Some(r) => o.push_str(&format!(
                "  to reach an MTTF of {}: at least {} buffers of {} (MTTF {}{})\n",
                human_secs(ts),
                r.buffering.buffers,
                t,
                r.mttf_seconds
                    .map(human_secs)
                    .unwrap_or_else(|| "never".into()),
                if r.extrapolated { ", extrapolated" } else { "" }
            )),
            None => o.push_str(&format!(
                "  to reach an MTTF of {}: no count of {t} buffers up to 64 does\n",
                human_secs(ts)
            )),
        }
        sizing["least_buffers"] = json!(r.as_ref().map(|r| r.buffering.buffers));
        sizing["least_buffers_mttf"] = serde_json::to_value(&r).unwrap_or(Value::Null);
    }
    let n_for_t = p.buffering.map(|b| b.buffers).or(p.n_only);
    if let Some(n) = n_for_t {
        let base = Buffering::new(n, Nanos::from_ms(1), p.compute);
        let r = buffer::least_len(m, &base, ts);
        match &r {
            Some(r) => o.push_str(&format!(
                "  to reach an MTTF of {}: {} buffers of at least {} (slack {}, MTTF {}{})\n",
                human_secs(ts),
                n,
                r.buffering.buffer_len,
                r.slack_ns,
                r.mttf_seconds
                    .map(human_secs)
                    .unwrap_or_else(|| "never".into()),
                if r.extrapolated { ", extrapolated" } else { "" }
            )),
            None => o.push_str(&format!(
                "  to reach an MTTF of {}: no length up to 60 s works with {n} buffers\n",
                human_secs(ts)
            )),
        }
        sizing["least_buffer_len_ns"] = json!(r.as_ref().map(|r| r.buffering.buffer_len));
        sizing["least_buffer_len_mttf"] = serde_json::to_value(&r).unwrap_or(Value::Null);
    }
    j["sizing"] = sizing;
}

/// `--rate`: a packet stream's longest service gap and the buffers it
/// takes (Basham's VMBus note).
fn packet_stream(o: &mut String, j: &mut Value, m: &TailModel, p: &Plan, rate: f64) {
    let target_s = p.target.map(|t| t.as_secs_f64()).unwrap_or(3600.0);
    let have = p.buffering.map(|b| b.buffers).or(p.n_only);
    let ps = buffer::packet_sizing(m, rate, target_s, have);
    let (g, gci, how) = est(&ps.gap);
    o.push_str(&format!(
        "  packet stream at {:.0}/s: longest service gap once per {}{}: {g} ({gci}, {how})\n",
        rate,
        human_secs(target_s),
        if p.target.is_none() {
            " (default; set --target)"
        } else {
            ""
        }
    ));
    o.push_str(&format!(
        "    buffers needed = rate × gap = {} (95% CI {} – {})\n",
        ps.buffers_needed
            .map(|b| b.to_string())
            .unwrap_or_else(|| "—".into()),
        ps.buffers_ci_low
            .map(|b| b.to_string())
            .unwrap_or_else(|| "?".into()),
        ps.buffers_ci_high
            .map(|b| b.to_string())
            .unwrap_or_else(|| "?".into()),
    ));
    if let (Some(n), Some(sr)) = (have, ps.sustainable_rate_per_s) {
        o.push_str(&format!(
            "    {n} buffers sustain {sr:.0} packets/s over that gap\n"
        ));
    }
    o.push_str(&format!("    {}\n", ps.formula));
    j["packet"] = serde_json::to_value(&ps).unwrap_or(Value::Null);
}

/// `--miss-rate`: the pseudo worst case, and with `--taskset` the task
/// set's schedulability under it.
fn pseudo_worst_case(o: &mut String, j: &mut Value, m: &TailModel, p: &Plan, r: f64) {
    let e = m.value_at_rate(r);
    let (v, ci, how) = est(&e);
    o.push_str(&format!(
        "  pseudo worst case at {} (once per {}): {v} ({ci}, {how})\n",
        p.miss_rate.as_deref().unwrap_or(""),
        human_secs(1.0 / r)
    ));
    j["pseudo_worst_case"] = serde_json::to_value(&e).unwrap_or(Value::Null);
    if let Some((file, set)) = &p.taskset {
        let (used, why) = match (e.value_ns, e.ci_high_ns) {
            (Some(v), _) => (Some(v), "point estimate"),
            (None, Some(h)) => (
                Some(h),
                "upper 95% bound (too few samples for a point estimate)",
            ),
            _ => (None, ""),
        };
        match used {
            Some(l) => {
                let rep = sched::analyze(set, l);
                o.push_str(&render_sched(file, &rep, why));
                j["schedulability"] = serde_json::to_value(&rep).unwrap_or(Value::Null);
                j["schedulability"]["pseudo_worst_case_from"] = json!(why);
            }
            None => o.push_str(
                "  schedulability: not analysed — the record cannot bound the pseudo worst case\n",
            ),
        }
    }
}

fn render_sched(file: &str, r: &SchedReport, why: &str) -> String {
    let mut o = format!(
        "  task set {file}: pseudo worst case {} ({why}) added as {}, U = {:.3}\n",
        r.pseudo_worst_case_ns,
        match r.latency_as {
            sched::LatencyAs::Jitter => "release jitter",
            sched::LatencyAs::Blocking => "blocking",
        },
        r.utilization
    );
    o.push_str(&format!(
        "    {:<16} {:>5} {:>9} {:>9} {:>9} {:>9} {:>9} {:>10}  {}\n",
        "task",
        "prio",
        "period",
        "wcet",
        "deadline",
        "jitter",
        "blocking",
        "response",
        "fixed-priority"
    ));
    for t in &r.fixed_priority {
        o.push_str(&format!(
            "    {:<16} {:>5} {:>9} {:>9} {:>9} {:>9} {:>9} {:>10}  {}\n",
            t.name,
            t.priority,
            t.period_ns.to_string(),
            t.wcet_ns.to_string(),
            t.deadline_ns.to_string(),
            t.jitter_ns.to_string(),
            t.blocking_ns.to_string(),
            t.response_ns
                .map(|r| r.to_string())
                .unwrap_or_else(|| "> D".into()),
            if t.schedulable { "yes" } else { "NO" }
        ));
    }
    o.push_str(&format!(
        "    fixed priority (response-time analysis): {}\n    EDF (processor demand): {} — {}\n",
        if r.fixed_priority_schedulable {
            "schedulable"
        } else {
            "NOT schedulable"
        },
        if r.edf.schedulable {
            "schedulable"
        } else {
            "NOT schedulable"
        },
        r.edf.note
    ));
    o
}
