//! What `punctual watch` prints, from its record alone: one row per
//! watched thread (its wake-up latency, period and deadline misses), then
//! per thread where its time went and what ran behind its slowest
//! wake-ups.

use std::fmt::Write;

use punctual_record::watch::WatchedThread;
use punctual_record::{Nanos, Record, SourceShare};

use super::probe;

fn sources(out: &mut String, rows: &[SourceShare], top: usize) {
    let _ = writeln!(
        out,
        "    {:<36} {:<11} {:>8} {:>11} {:>10} {:>7}",
        "source", "kind", "count", "total", "max", "share"
    );
    for s in rows.iter().take(top) {
        let mut name = s.name.clone();
        if name.chars().count() > 36 {
            name = name.chars().take(35).collect::<String>() + "…";
        }
        let _ = writeln!(
            out,
            "    {:<36} {:<11} {:>8} {:>11} {:>10} {:>6.1}%",
            name,
            s.kind,
            s.count,
            s.total_ns.to_string(),
            if s.max_ns.is_zero() {
                String::new()
            } else {
                s.max_ns.to_string()
            },
            s.share * 100.0
        );
    }
    if rows.len() > top {
        let rest: u64 = rows[top..].iter().map(|s| s.total_ns.0).sum();
        let share: f64 = rows[top..].iter().map(|s| s.share).sum();
        let _ = writeln!(
            out,
            "    {:<36} {:<11} {:>8} {:>11} {:>10} {:>6.1}%",
            format!("({} more)", rows.len() - top),
            "",
            "",
            Nanos(rest).to_string(),
            "",
            share * 100.0
        );
    }
}

fn period_text(t: &WatchedThread) -> String {
    match (&t.period, &t.deadlines) {
        (Some(p), Some(d)) => format!(
            "period {} ({}; {:.1}% of wake-ups one period apart); deadline misses {} of {} releases ({} finished late, {} skipped), worst response {}",
            p.period_ns,
            if p.stated { "stated" } else { "detected" },
            p.regular_fraction * 100.0,
            d.misses(),
            d.releases,
            d.late,
            d.skipped,
            d.worst_response_ns
        ),
        _ => "no period: its wake-ups are not regular (state one with --period to count deadline misses)".into(),
    }
}

/// The verb's standard output and, apart, the warnings block it prints on
/// standard error. `top` rows per sources table.
pub fn render(rec: &Record, top: usize) -> (String, String) {
    let mut out = String::new();
    let Some(sum) = rec.watch() else {
        return (
            "the record holds no watch results\n".into(),
            probe::warnings_block(rec),
        );
    };
    let _ = writeln!(
        out,
        "pid {} ({}), {} thread(s) watched for {}; wake-up = {} to switch-in",
        sum.pid,
        sum.command,
        sum.threads.len(),
        rec.duration_ns,
        sum.wake_event
    );
    let _ = writeln!(
        out,
        "{:<24} {:>5} {:>8} {:>9} {:>9} {:>9} {:>9} {:>9} {:>10} {:>7}",
        "thread", "cpu", "wakeups", "min", "p50", "p99", "p99.9", "max", "period", "misses"
    );
    for t in &sum.threads {
        let s = rec.series_named(&t.series);
        let cell = |f: &dyn Fn(&punctual_record::Series) -> Nanos| {
            s.map(|s| f(s).to_string()).unwrap_or_else(|| "-".into())
        };
        let mut label = format!("{}-{}", t.name, t.tid);
        if label.chars().count() > 24 {
            label = label.chars().take(23).collect::<String>() + "…";
        }
        let _ = writeln!(
            out,
            "{:<24} {:>5} {:>8} {:>9} {:>9} {:>9} {:>9} {:>9} {:>10} {:>7}",
            label,
            t.cpus
                .first()
                .map(|c| c.to_string())
                .unwrap_or_else(|| "-".into()),
            t.wakeups,
            cell(&|s| s.min),
            cell(&|s| s.percentiles.p50),
            cell(&|s| s.percentiles.p99),
            cell(&|s| s.percentiles.p99_9),
            cell(&|s| s.max),
            t.period
                .as_ref()
                .map(|p| p.period_ns.to_string())
                .unwrap_or_else(|| "-".into()),
            t.deadlines
                .as_ref()
                .map(|d| d.misses().to_string())
                .unwrap_or_else(|| "-".into()),
        );
    }
    for t in sum
        .threads
        .iter()
        .filter(|t| t.wakeups > 0 || !t.ran_ns.is_zero())
    {
        let label = format!("{}-{}", t.name, t.tid);
        let _ = writeln!(out, "\n{label}:");
        let _ = writeln!(out, "  {}", period_text(t));
        if t.timed_by_own_event > 0 || t.untimed > 0 {
            let _ = writeln!(
                out,
                "  {} wake-up(s) timed to the return of its blocking call (no switch-in traced when a CPU leaves idle), {} not timed (neither seen)",
                t.timed_by_own_event, t.untimed
            );
        }
        let _ = writeln!(
            out,
            "  ran {}, waited runnable {}; taken from it: {} while it ran, {} while it waited",
            t.ran_ns, t.runnable_ns, t.stolen_running_ns, t.stolen_runnable_ns
        );
        if let Some(st) = rec
            .stolen
            .iter()
            .find(|s| s.task.as_deref() == Some(label.as_str()))
        {
            if !st.by_source.is_empty() {
                let _ = writeln!(out, "  time taken from it, by source:");
                sources(&mut out, &st.by_source, top);
            }
        }
        if !t.offenders.is_empty() {
            let _ = writeln!(
                out,
                "  behind its {} slowest wake-ups (each {} or more):",
                t.slowest, t.slowest_from_ns
            );
            sources(&mut out, &t.offenders, top);
        }
    }
    if let Some(s) = &sum.stopped_at {
        let _ = writeln!(
            out,
            "\nstopped at +{}: thread {} on CPU {} woke {} after its wake-up, over --stop-at {}",
            s.at_ns, s.tid, s.cpu, s.latency_ns, s.threshold_ns
        );
    }
    (out, probe::warnings_block(rec))
}
