//! `punctual report`'s terminal summary when no output is asked for: per
//! record the verdicts it keeps (state and interval first), its kind,
//! length and host, and a few lines per series, stolen time and task,
//! read from the records alone.

use crate::{tail, Input};

/// Without an output option: a few lines per series on the terminal.
pub fn summary(inputs: &[Input]) -> String {
    let mut s = String::new();
    for i in inputs {
        let r = &i.record;
        // A record's verdicts before anything else: the answer, with its
        // state, interval and caveat. A measured record that keeps none
        // (`timer`, `watch`) gets the ones its wake-up latencies give, as
        // the HTML page, the JUnit export and the gates compute them, and
        // says so. A simulated one does not: its tasks' response times are
        // not a consumer's wake-ups unless the scenario made them one, and
        // fitting every task's tails would make a summary of a large
        // scenario slow (`report --html` shows them).
        let kept = !r.verdicts.is_empty();
        let computed = if kept || r.source != punctual_record::Source::Measured {
            Vec::new()
        } else {
            punctual_analysis::gate::record_verdicts(r)
        };
        let entries = if kept { &r.verdicts } else { &computed };
        let verdicts = super::verdict::entries(entries);
        if !verdicts.is_empty() {
            s.push_str(&format!("{}: ", i.label));
            s.push_str(verdicts.trim_start_matches("== "));
            if !kept {
                s.push_str(
                    "  (computed now from the record's latency series against the built-in \
                     profiles: `punctual forecast RECORD` shows how)\n",
                );
            }
        }
        s.push_str(&format!(
            "{}: {} ({:?}), {} on {}\n",
            i.label,
            r.kind,
            r.source,
            r.duration_ns,
            r.platform.hostname.as_deref().unwrap_or("unknown host")
        ));
        for se in &r.series {
            let worst = tail::worst_cases(se, r.series_duration(se))
                .map(|w| tail::estimate_text(&w[0].1))
                .unwrap_or_else(|| "-".into());
            s.push_str(&format!(
                "  {:<20} n={:<9} p50={:<10} p99={:<10} p99.99={:<10} max={:<10} worst/hour={}\n",
                se.name,
                se.count,
                se.percentiles.p50.to_string(),
                se.percentiles.p99.to_string(),
                se.percentiles.p99_99.to_string(),
                se.max.to_string(),
                worst
            ));
        }
        for st in &r.stolen {
            s.push_str(&format!(
                "  stolen cpu{:<3} {:.3}% ({} of {}), longest {}\n",
                st.cpu,
                st.fraction * 100.0,
                st.total_ns,
                st.observed_ns,
                st.max_ns
            ));
        }
        for p in &r.period_summary {
            s.push_str(&format!(
                "  task {}: {} periods, {} missed\n",
                p.task, p.periods, p.misses
            ));
        }
    }
    s.push_str("(use --html PATH for the full report, --format for exports)\n");
    s
}
