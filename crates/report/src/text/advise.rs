//! What `punctual advise` prints: the ranked fixes of a record, then each
//! fix's prediction beside the record as measured, its interval, why,
//! cost, and how to make it permanent.

use punctual_analysis::advise::Remainder;
use punctual_analysis::verdict::human_secs;
use punctual_record::{Fix, FixFigures, Nanos, Record, VerdictState};

/// Sources of the second run printed under `--verify` (all are in the
/// record's `fixes[].observed_sources`).
const VERIFY_SOURCES_SHOWN: usize = 6;

fn mttf(m: Option<f64>) -> String {
    m.map(human_secs).unwrap_or_else(|| "never".into())
}

fn ci(c: &[Option<f64>; 2]) -> String {
    format!(
        "95% CI {}–{}",
        human_secs(c[0].unwrap_or(0.0)),
        c[1].map(human_secs).unwrap_or_else(|| "∞".into())
    )
}

fn stolen(f: &FixFigures) -> String {
    f.stolen_fraction
        .map(|x| format!("{:.3}%", x * 100.0))
        .unwrap_or_else(|| "-".into())
}

fn meeting(f: &FixFigures) -> usize {
    f.profiles
        .iter()
        .filter(|p| p.state == VerdictState::Meets)
        .count()
}

/// The figures of one CPU as measured: the line every fix is set against.
pub fn now_line(cpu: u32, f: &FixFigures) -> String {
    let first = f
        .profiles
        .first()
        .map(|p| {
            format!(
                "; {}: an underrun every {} ({}), {} of {} profiles meet their target",
                p.profile,
                mttf(p.mttf_s),
                ci(&p.ci_s),
                meeting(f),
                f.profiles.len()
            )
        })
        .unwrap_or_default();
    format!(
        "now on CPU {cpu}: {} p99 {}, p99.9 {}, stolen {}{first}\n",
        f.series,
        f.p99_ns,
        f.p999_ns,
        stolen(f)
    )
}

/// One line, when what no fix targets by name could buy more than every
/// named cause together: how much it is, what it likely is on this
/// kernel, and what would tell more. Empty otherwise.
pub fn remainder_line(r: &Remainder) -> String {
    if !r.dominates {
        return String::new();
    }
    let share = |x: f64| format!("{:.0}%", x * 100.0);
    let mut parts = Vec::new();
    if r.below_ns > Nanos::ZERO {
        parts.push(format!(
            "{} is {} thread(s) and kworker(s) below the task's priority (SCHED_OTHER work, \
             mostly) that held the CPU {}",
            share(r.below_share),
            r.below_sources,
            if r.preemptible() {
                "in preempt-off sections".to_string()
            } else {
                format!(
                    "in kernel code this '{}' kernel does not preempt",
                    r.preemption
                )
            }
        ));
    }
    if r.no_event_ns > Nanos::ZERO {
        parts.push(format!(
            "{} has no source (no guest event: likely the hypervisor or the hardware)",
            share(r.no_event_share)
        ));
    }
    let learn = r.tell_more.join(", ");
    format!(
        "unexplained on CPU {}: taking out all attributed time would buy a gain of {:.2}, the \
         named causes alone {:.2}; of the attributed time {}; fixes rank by the named causes \
         (the record names who ran, not what held preemption off, nor whether that work \
         stays); to learn more, {learn}\n",
        r.cpu,
        r.gain_all_log10,
        r.gain_named_log10,
        parts.join(", and ")
    )
}

/// The ranked table and the detail of the first `top` fixes of `rec`
/// (its `fixes`, best first), `now` the measured figures per CPU and
/// `rest` what no fix targets by name on each.
pub fn advise_text(
    rec: &Record,
    now: &[(u32, FixFigures)],
    rest: &[Remainder],
    top: usize,
) -> String {
    let mut out = String::new();
    for (cpu, f) in now {
        out.push_str(&now_line(*cpu, f));
        if let Some(r) = rest.iter().find(|r| r.cpu == *cpu) {
            out.push_str(&remainder_line(r));
        }
    }
    let shown: Vec<&Fix> = rec.fixes.iter().take(top).collect();
    if shown.is_empty() {
        out.push_str("no fix found: no named source on the advised CPUs can be taken out\n");
        return out;
    }
    let gain = match shown[0].now.profiles.first() {
        Some(p) => format!(
            "MTTF of {}; gain = Σ log10 of the MTTF ratio over {} profile(s)",
            p.profile,
            shown[0].now.profiles.len()
        ),
        None => "no wake-ups, no MTTF; gain = log10 of the stolen fraction's ratio + log10 of \
                 the gaps' p99.9 ratio"
            .to_string(),
    };
    out.push_str(&format!(
        "\n== fixes, best first ({} of {}; {gain})\n",
        shown.len(),
        rec.fixes.len(),
    ));
    let w = shown
        .iter()
        .map(|f| f.id.chars().count())
        .max()
        .unwrap_or(2);
    out.push_str(&format!(
        "{:>2}  {:<w$} {:>10} {:>10} {:>8} {:>10} {:>7} {:>7} {:>6}  {}\n",
        "#", "id", "p99", "p99.9", "stolen", "MTTF", "gain", "w/ rest", "meet", "cost"
    ));
    for (i, f) in shown.iter().enumerate() {
        out.push_str(&format!(
            "{:>2}  {:<w$} {:>10} {:>10} {:>8} {:>10} {:>7.2} {:>7.2} {:>6}  {}{}\n",
            i + 1,
            f.id,
            f.predicted.p99_ns.to_string(),
            f.predicted.p999_ns.to_string(),
            stolen(&f.predicted),
            if f.predicted.profiles.is_empty() {
                "-".to_string()
            } else {
                mttf(f.predicted.mttf_s)
            },
            f.gain_log10,
            f.gain_all_log10.max(f.gain_log10),
            format!("{}/{}", meeting(&f.predicted), f.predicted.profiles.len()),
            pct_cost(f.cost_cpu_fraction),
            if f.within_noise {
                "  (within the CI of doing nothing)"
            } else {
                ""
            }
        ));
    }
    for (i, f) in shown.iter().enumerate() {
        out.push_str(&format!(
            "\n{}. {} [{}]: {}\n",
            i + 1,
            f.id,
            f.kind,
            f.description
        ));
        out.push_str(&format!(
            "   predicted  p99 {} (now {}), p99.9 {} (now {}), stolen {} (now {})\n",
            f.predicted.p99_ns,
            f.now.p99_ns,
            f.predicted.p999_ns,
            f.now.p999_ns,
            stolen(&f.predicted),
            stolen(&f.now)
        ));
        if let (Some(a), Some(b)) = (f.now.profiles.first(), f.predicted.profiles.first()) {
            out.push_str(&format!(
                "   {}: an underrun every {} ({}), now {} ({}); {} of {} profiles meet (now {})\n",
                b.profile,
                mttf(b.mttf_s),
                ci(&b.ci_s),
                mttf(a.mttf_s),
                ci(&a.ci_s),
                meeting(&f.predicted),
                f.predicted.profiles.len(),
                meeting(&f.now)
            ));
        }
        if let Some(m) = &f.predicted.reservation_miss {
            out.push_str(&reservation_miss_line(m));
        }
        if f.gain_all_log10 > f.gain_log10 + 0.005 {
            out.push_str(&format!(
                "   ranked by the named causes it takes out (gain {:.2}); with the \
                 below-priority work it also takes out, {:.2}\n",
                f.gain_log10, f.gain_all_log10
            ));
        }
        if f.within_noise {
            out.push_str(
                "   within noise: every predicted MTTF lies inside the 95% CI of doing nothing\n",
            );
        }
        if let Some(o) = &f.observed {
            out.push_str(&format!(
                "   observed   p99 {}, p99.9 {}, stolen {}, MTTF {}\n",
                o.p99_ns,
                o.p999_ns,
                stolen(o),
                mttf(o.mttf_s)
            ));
        }
        out.push_str(&format!("   why: {}\n", f.why));
        out.push_str(&format!("   cost: {}\n", f.cost));
        out.push_str(&format!(
            "   at run time: {}\n",
            if f.runtime_applicable {
                "yes, on this kernel"
            } else {
                "no"
            }
        ));
        out.push_str("   permanent:\n");
        for l in f.permanent_how.lines() {
            out.push_str(&format!("     {l}\n"));
        }
    }
    out.push_str(&format!(
        "\nPredictions take each source's attributed time out of the logged spikes and stolen \
         intervals and re-forecast; time no event names (entry/exit, no guest event) stays, \
         and so do the {} smaller wake-ups and gaps the spike log did not keep: docs/advise.md\n",
        rec.spikes_dropped
    ));
    out
}

/// The simulated share of a reservation's periods short of the budget,
/// plain beside feedback.
fn reservation_miss_line(m: &punctual_record::ReservationMiss) -> String {
    let rate = |r: &punctual_record::MissRate| {
        format!(
            "{:.3}% (95% CI {:.3}%–{:.3}%, {} of {})",
            r.fraction * 100.0,
            r.ci[0] * 100.0,
            r.ci[1] * 100.0,
            r.misses,
            r.periods
        )
    };
    format!(
        "   periods short of the budget, simulated on the record's gap process ({} runs of \
         {}): plain {}, with feedback {}\n",
        m.runs,
        m.run_ns,
        rate(&m.plain),
        rate(&m.feedback)
    )
}

fn pct_cost(x: f64) -> String {
    format!("{:.1}% CPU", x * 100.0)
}

/// Predicted beside observed for a fix applied and measured again
/// (`advise --apply ID --verify`): each figure, and observed ÷ predicted.
pub fn verify_text(f: &Fix) -> String {
    let Some(o) = &f.observed else {
        return String::new();
    };
    let p = &f.predicted;
    let ratio = |pr: f64, ob: f64| {
        if pr > 0.0 && ob > 0.0 {
            format!("{:.2}", ob / pr)
        } else {
            "-".to_string()
        }
    };
    let mut out = format!(
        "{:<16} {:>12} {:>12} {:>12} {:>16}\n",
        "figure", "now", "predicted", "observed", "observed/pred"
    );
    let row = |name: &str, n: String, pr: String, ob: String, r: String| {
        format!("{name:<16} {n:>12} {pr:>12} {ob:>12} {r:>16}\n")
    };
    out.push_str(&row(
        "p99",
        f.now.p99_ns.to_string(),
        p.p99_ns.to_string(),
        o.p99_ns.to_string(),
        ratio(p.p99_ns.0 as f64, o.p99_ns.0 as f64),
    ));
    out.push_str(&row(
        "p99.9",
        f.now.p999_ns.to_string(),
        p.p999_ns.to_string(),
        o.p999_ns.to_string(),
        ratio(p.p999_ns.0 as f64, o.p999_ns.0 as f64),
    ));
    out.push_str(&row(
        "stolen",
        stolen(&f.now),
        stolen(p),
        stolen(o),
        ratio(
            p.stolen_fraction.unwrap_or(0.0),
            o.stolen_fraction.unwrap_or(0.0),
        ),
    ));
    for ((n, pr), ob) in f.now.profiles.iter().zip(&p.profiles).zip(&o.profiles) {
        out.push_str(&row(
            &format!("MTTF {}", ob.profile),
            mttf(n.mttf_s),
            mttf(pr.mttf_s),
            mttf(ob.mttf_s),
            ratio(
                pr.mttf_s.unwrap_or(f64::INFINITY),
                ob.mttf_s.unwrap_or(f64::INFINITY),
            ),
        ));
        out.push_str(&format!(
            "{:<16} {:>12} {:>12} {:>12}\n",
            "",
            "",
            "",
            format!("({})", ci(&ob.ci_s))
        ));
    }
    if f.observed_sources.is_empty() {
        out.push_str("attributed with the fix applied: nothing (the second run named no source)\n");
    } else {
        out.push_str(&format!(
            "attributed with the fix applied on CPU {}, largest first:\n",
            f.cpu
        ));
        for t in f.observed_sources.iter().take(VERIFY_SOURCES_SHOWN) {
            // A source the prediction took out yet still attributed is
            // where a prediction and its measurement part.
            let was = if f
                .takes_out
                .iter()
                .any(|o| o.kind == t.kind && o.name == t.name)
            {
                " (predicted taken out)"
            } else {
                ""
            };
            out.push_str(&format!(
                "  {:>12} {} {}{was}\n",
                t.total_ns.to_string(),
                t.kind,
                t.name
            ));
        }
    }
    out
}
