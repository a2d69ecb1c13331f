//! Terminal rendering of attribution: LatencyMon-style "top offenders"
//! per CPU and overall, and per-spike breakdowns. Reads only the record
//! and the summary, so a saved record renders the same way.

use std::fmt::Write;

use punctual_record::cause::{CauseSummary, SourceTotalShare};
use punctual_record::{Nanos, Record};

fn label(s: &SourceTotalShare) -> String {
    match &s.total.sched {
        Some(p) => format!("{} ({p})", s.total.name),
        None => s.total.name.clone(),
    }
}

fn table(out: &mut String, rows: &[SourceTotalShare], extra: &[(&str, u64, f64)], top: usize) {
    let _ = writeln!(
        out,
        "  {:<36} {:<9} {:>8} {:>11} {:>10} {:>7}",
        "source", "kind", "count", "total", "max", "share"
    );
    for s in rows.iter().take(top) {
        let _ = writeln!(
            out,
            "  {:<36} {:<9} {:>8} {:>11} {:>10} {:>6.1}%",
            truncate(&label(s), 36),
            s.total.kind,
            s.total.count,
            Nanos(s.total.total_ns).to_string(),
            Nanos(s.total.max_ns).to_string(),
            s.share * 100.0
        );
    }
    if rows.len() > top {
        let rest: u64 = rows[top..].iter().map(|s| s.total.total_ns).sum();
        let share: f64 = rows[top..].iter().map(|s| s.share).sum();
        let _ = writeln!(
            out,
            "  {:<36} {:<9} {:>8} {:>11} {:>10} {:>6.1}%",
            format!("({} more)", rows.len() - top),
            "",
            "",
            Nanos(rest).to_string(),
            "",
            share * 100.0
        );
    }
    for (name, ns, share) in extra {
        let _ = writeln!(
            out,
            "  {:<36} {:<9} {:>8} {:>11} {:>10} {:>6.1}%",
            name,
            "",
            "",
            Nanos(*ns).to_string(),
            "",
            share * 100.0
        );
    }
}

fn truncate(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        let mut t: String = s.chars().take(n - 1).collect();
        t.push('…');
        t
    }
}

/// The "top offenders" tables: per CPU, then all CPUs together.
pub fn top_offenders(sum: &CauseSummary, top: usize) -> String {
    let mut out = String::new();
    for c in &sum.per_cpu {
        let what = if c.probe_observed_ns.is_some() {
            "time stolen from the probe"
        } else {
            "CPU time of everything but idle and the probe"
        };
        let _ = writeln!(
            out,
            "CPU {} — top offenders over {} ({what}; nested interrupts counted once)",
            c.cpu,
            Nanos(c.span_ns)
        );
        let mut extra = Vec::new();
        if let Some(sp) = &c.stolen_split {
            let denom = sp.stolen_ns.max(1) as f64;
            for (name, ns) in [
                (punctual_record::cause::ENTRY_EXIT_NAME, sp.entry_exit_ns),
                (punctual_record::cause::LOOP_NAME, sp.loop_ns),
                ("unexplained (no guest event)", sp.no_event_ns),
                ("unexplained (cpu idle)", sp.idle_ns),
            ] {
                if ns > 0 {
                    extra.push((name, ns, ns as f64 / denom));
                }
            }
        } else if c.unexplained_ns > 0 {
            let denom = (c.named_ns + c.unexplained_ns).max(1) as f64;
            extra.push((
                "unexplained (no guest event)",
                c.unexplained_ns,
                c.unexplained_ns as f64 / denom,
            ));
        }
        if c.sources.is_empty() && extra.is_empty() {
            let _ = writeln!(out, "  nothing but the probe and idle ran");
        } else {
            table(&mut out, &c.sources, &extra, top);
        }
        match (c.probe_observed_ns, &c.stolen_split) {
            (_, Some(sp)) => {
                let _ = writeln!(
                    out,
                    "  {} intervals, {} stolen: {:.1}% named (sources {}, entry/exit {}, probe loop {}), {:.1}% unexplained{}",
                    sp.intervals,
                    Nanos(sp.stolen_ns),
                    sp.named_fraction() * 100.0,
                    Nanos(sp.named_ns),
                    Nanos(sp.entry_exit_ns),
                    Nanos(sp.loop_ns),
                    (sp.no_event_ns + sp.idle_ns) as f64 * 100.0 / sp.stolen_ns.max(1) as f64,
                    if sp.intervals_dropped > 0 {
                        format!(" ({} later intervals not kept)", sp.intervals_dropped)
                    } else {
                        String::new()
                    }
                );
                let _ = writeln!(
                    out,
                    "  one-event intervals: rest around the event p50 {}, p90 {}, p99 {} (charged to entry/exit up to {} per event)",
                    Nanos(sp.one_event_rest_p50_ns),
                    Nanos(sp.one_event_rest_p90_ns),
                    Nanos(sp.one_event_rest_p99_ns),
                    Nanos(sp.entry_exit_cap_ns)
                );
                let _ = writeln!(
                    out,
                    "  handler/thread time over the whole run {} (includes interruptions shorter than the probe's threshold)",
                    Nanos(c.whole_run_named_ns)
                );
            }
            (Some(obs), None) => {
                let _ = writeln!(
                    out,
                    "  handler/thread time {} vs stolen time the probe saw {} ({:.1}% named)",
                    Nanos(c.named_ns),
                    Nanos(obs),
                    if obs > 0 {
                        (c.named_ns.min(obs) as f64 / obs as f64) * 100.0
                    } else {
                        100.0
                    }
                );
            }
            (None, None) => {
                let _ = writeln!(
                    out,
                    "  handler/thread time {}, cpu idle {}, probe itself {}",
                    Nanos(c.named_ns),
                    Nanos(c.idle_ns),
                    Nanos(c.probe_ns)
                );
            }
        }
        let _ = writeln!(
            out,
            "  kernel's view (/proc/stat): irq {}, softirq {}, steal {}{}",
            Nanos(c.kernel_irq_ns),
            Nanos(c.kernel_softirq_ns),
            Nanos(c.kernel_steal_ns),
            if c.lost_events > 0 {
                format!(
                    "; {} trace events LOST (windows marked incomplete)",
                    c.lost_events
                )
            } else {
                "; no trace events lost".to_string()
            }
        );
        out.push('\n');
    }
    if sum.per_cpu.len() > 1 {
        let _ = writeln!(out, "All CPUs — top offenders");
        table(&mut out, &sum.overall, &[], top);
        out.push('\n');
    }
    for h in &sum.hints {
        let _ = writeln!(out, "hint: {h}");
    }
    if !sum.hints.is_empty() {
        out.push('\n');
    }
    out
}

/// The `n` largest spikes with their breakdown in percent of the window.
pub fn spike_breakdowns(rec: &Record, n: usize) -> String {
    let mut spikes: Vec<_> = rec.spikes.iter().filter(|s| !s.causes.is_empty()).collect();
    spikes.sort_by(|a, b| b.value_ns.cmp(&a.value_ns).then(a.at_ns.cmp(&b.at_ns)));
    let mut out = String::new();
    if spikes.is_empty() {
        return out;
    }
    let _ = writeln!(out, "Largest spikes and what filled them:");
    for s in spikes.iter().take(n) {
        let parts: Vec<String> = s
            .causes
            .iter()
            .filter(|c| c.share >= 0.005)
            .take(5)
            .map(|c| {
                let name = if c.kind == "unexplained" {
                    format!("unexplained: {}", c.name)
                } else {
                    c.name.clone()
                };
                format!("{name} {:.0}%", c.share * 100.0)
            })
            .collect();
        let _ = writeln!(
            out,
            "  at {:>9}  cpu{} {} {:>9}: {}{}",
            s.at_ns.to_string(),
            s.cpu,
            s.metric.as_str(),
            s.value_ns.to_string(),
            parts.join(", "),
            if s.incomplete {
                "  [INCOMPLETE: trace events lost]"
            } else {
                ""
            }
        );
    }
    out
}

/// One line: how much of the spikes' time has a name.
pub fn named_line(sum: &CauseSummary) -> String {
    let total = sum.spike_named_ns + sum.spike_unexplained_ns + sum.spike_idle_ns;
    if total == 0 {
        return String::new();
    }
    format!(
        "Spikes: {} attributed ({} incomplete); of their time {:.1}% named, {:.1}% unexplained (no guest event: hypervisor or hardware), {:.1}% cpu idle (timer not yet delivered)\n",
        sum.spikes_attributed,
        sum.spikes_incomplete,
        sum.spike_named_ns as f64 * 100.0 / total as f64,
        sum.spike_unexplained_ns as f64 * 100.0 / total as f64,
        sum.spike_idle_ns as f64 * 100.0 / total as f64,
    )
}

/// The attribution as `punctual cause` prints it: the `top` offenders per
/// CPU and overall, the `spikes` largest spikes broken down, the sources
/// named, and what the recorder itself cost.
pub fn report(sum: &CauseSummary, rec: &Record, top: usize, spikes: usize) -> String {
    let mut out = top_offenders(sum, top);
    out.push_str(&spike_breakdowns(rec, spikes));
    out.push_str(&named_line(sum));
    out.push_str(&format!(
        "Recorder: {} events in {} pages, reader used {} of CPU ({:.3}% of one CPU)\n",
        sum.events,
        sum.pages,
        Nanos(sum.recorder_cpu_ns),
        sum.recorder_cpu_fraction * 100.0
    ));
    out
}

/// A probe verb's `--cause` section: headed by what its spikes are (`late
/// wake-ups`, `stolen time`), ten offenders and ten spikes.
pub fn section(what: &str, sum: &CauseSummary, rec: &Record) -> String {
    let mut out = format!("\n== causes of {what} (tracefs flight recorder)\n");
    out.push_str(&report(sum, rec, 10, 10));
    out
}
