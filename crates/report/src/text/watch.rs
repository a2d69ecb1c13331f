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

fn release_text(t: &WatchedThread) -> Option<String> {
    let d = t.deadlines.as_ref()?;
    Some(format!(
        "release to running (timer lateness + wake-up latency, from the fastest wake-up on): p50 {}, p99 {}, max {}",
        d.release_to_run_p50_ns, d.release_to_run_p99_ns, d.release_to_run_max_ns
    ))
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
        if let Some(r) = release_text(t) {
            let _ = writeln!(out, "  {r}");
        }
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
            "\nstopped at +{}: thread {} on CPU {} woke {} after its wake-up, over --stop-at {}{}",
            s.at_ns,
            s.tid,
            s.cpu,
            s.latency_ns,
            s.threshold_ns,
            filled_by(&s.causes)
        );
        let stack = s.stack.as_ref().and_then(|k| serde_json::to_value(k).ok());
        out.push_str(&probe::stack_or_why(rec, stack.as_ref(), u64::from(s.cpu)));
    }
    (out, probe::warnings_block(rec))
}

/// `; filled by A 80%, B 15%` for the shares of at least 0.5 % (five at
/// most), as the probes' `stopped at` line says it; nothing without any.
fn filled_by(causes: &[punctual_record::SourceShare]) -> String {
    let named: Vec<String> = causes
        .iter()
        .filter(|c| c.share >= 0.005)
        .take(5)
        .map(|c| format!("{} {:.0}%", c.name, c.share * 100.0))
        .collect();
    if named.is_empty() {
        String::new()
    } else {
        format!("; filled by {}", named.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use punctual_record::watch::{Deadlines, PeriodFit, WatchSummary};
    use punctual_record::{Metric, Platform, Recorder, Source, Stolen};

    #[test]
    fn a_watch_record_prints_each_thread_and_its_offenders() {
        let mut rec = Record::new(Source::Measured, "watch", Platform::default());
        let mut h = Recorder::new(Nanos(1_000));
        for v in [8_000u64, 9_000, 12_000, 950_000] {
            h.record(Nanos(v));
        }
        let mut s = h.to_series("rtloop-42.latency", Metric::Latency);
        s.cpu = Some(1);
        rec.series.push(s);
        let share = |kind: &str, name: &str, ns: u64, share: f64| SourceShare {
            kind: kind.into(),
            name: name.into(),
            count: 1,
            total_ns: Nanos(ns),
            max_ns: Nanos(ns),
            share,
        };
        rec.stolen.push(Stolen {
            cpu: 1,
            task: Some("rtloop-42".into()),
            by_source: vec![share("thread", "hog/7", 900_000, 0.9)],
            ..Default::default()
        });
        rec.set_watch(&WatchSummary {
            pid: 40,
            command: "rtloop".into(),
            wake_event: "sched_waking".into(),
            threads: vec![WatchedThread {
                tid: 42,
                name: "rtloop".into(),
                series: "rtloop-42.latency".into(),
                cpus: vec![1],
                wakeups: 4,
                period: Some(PeriodFit {
                    period_ns: Nanos(1_000_000),
                    regular_fraction: 1.0,
                    ..Default::default()
                }),
                deadlines: Some(Deadlines {
                    deadline_ns: Nanos(1_000_000),
                    releases: 5,
                    late: 1,
                    skipped: 1,
                    worst_response_ns: Nanos(1_200_000),
                    ..Default::default()
                }),
                slowest: 4,
                slowest_from_ns: Nanos(8_000),
                offenders: vec![share("thread", "hog/7", 900_000, 0.92)],
                ..Default::default()
            }],
            ..Default::default()
        });
        let (out, _) = render(&rec, 5);
        let row = out
            .lines()
            .find(|l| l.starts_with("rtloop-42 "))
            .expect("a row for the thread");
        let cells: Vec<&str> = row.split_whitespace().collect();
        assert_eq!(cells[1..3], ["1", "4"], "{row}");
        assert_eq!(cells[cells.len() - 2..], ["1ms", "2"], "{row}");
        assert!(
            out.contains("deadline misses 2 of 5 releases (1 finished late, 1 skipped)"),
            "{out}"
        );
        assert!(out.contains("behind its 4 slowest wake-ups"), "{out}");
        assert_eq!(out.matches("hog/7").count(), 2, "{out}");
        // A record of another verb's run says it holds no watch results.
        let other = Record::new(Source::Measured, "watch", Platform::default());
        assert!(render(&other, 5).0.contains("no watch results"));
    }
}
