//! Verdicts as terminal lines: the mark, the sentence, and why a verdict
//! is not representative. The verdicts themselves are data
//! (`punctual_analysis::verdict`); `forecast` and `check` print them
//! through here.

use punctual_analysis::check::AgainstBaseline;
use punctual_analysis::verdict::{ci_text, human_secs};
use punctual_analysis::{Verdict, VerdictState};
use punctual_record::{VerdictBasis, VerdictEntry};

/// The verdicts as terminal lines: a mark, then the sentence.
pub fn render_verdicts(v: &[Verdict]) -> String {
    let mut out = String::new();
    for x in v {
        out.push_str(&format!("  {} {}\n", mark(x.state), x.message));
        if let Some(n) = &x.note {
            out.push_str(&format!("       not representative: {n}\n"));
        }
    }
    out
}

/// The four-character mark before a verdict line.
pub fn mark(s: VerdictState) -> &'static str {
    match s {
        VerdictState::Meets => "ok  ",
        VerdictState::Misses => "MISS",
        VerdictState::Inconclusive => "??  ",
    }
}

/// "3 meet, 2 miss, 21 inconclusive": the counts a heading gives.
pub fn tally(v: &[Verdict]) -> String {
    tally_states(v.iter().map(|x| x.state))
}

/// [`tally`] of the states alone, for verdicts computed now and verdicts
/// a record keeps alike.
fn tally_states(states: impl Iterator<Item = VerdictState>) -> String {
    let (mut meet, mut miss, mut open) = (0, 0, 0);
    for s in states {
        match s {
            VerdictState::Meets => meet += 1,
            VerdictState::Misses => miss += 1,
            VerdictState::Inconclusive => open += 1,
        }
    }
    format!("{meet} meet, {miss} miss, {open} inconclusive")
}

/// The line that says, once above them all, why the verdicts below do
/// not stand for a real-time consumer on one machine.
fn caveat(why: &str) -> String {
    format!("   NOT REPRESENTATIVE: {why}\n")
}

/// The verdicts as compact lines (mark and sentence, without the
/// per-line note) under the caveat when there is one: what `check` and
/// `forecast` print when the caveat is said once for all of them.
pub fn compact(v: &[Verdict], unrepresentative: Option<&str>) -> String {
    let mut out = unrepresentative.map(caveat).unwrap_or_default();
    for x in v {
        out.push_str(&format!("  {} {}\n", mark(x.state), x.message));
    }
    out
}

/// A record's verdicts as it keeps them (`verdicts[]`), read back without
/// the profiles or the model: a heading with the tally, the caveat once
/// when they are not representative, then per profile the mark, the state
/// and its 95% interval first, the target, the point estimate and, when
/// open, how long to measure. Nothing without verdicts.
pub fn entries(v: &[VerdictEntry]) -> String {
    if v.is_empty() {
        return String::new();
    }
    let mut out = format!(
        "== verdicts for {} workload profiles: {} (decided only when the whole 95% CI of the \
         MTTF is on one side of the target)\n",
        v.len(),
        tally_states(v.iter().map(|x| x.state))
    );
    if let Some(why) = v.iter().find_map(|x| x.note.as_deref()) {
        out.push_str(&caveat(why));
    }
    for x in v {
        let point = match x.mttf_s {
            Some(s) => format!("an underrun every {}", human_secs(s)),
            None => "no underrun seen or predicted".to_string(),
        };
        let basis = match x.basis {
            VerdictBasis::Observed => "observed",
            VerdictBasis::Extrapolated => "extrapolated",
        };
        let more = x
            .measure_more_s
            .map(|s| format!(": measure ≥ {} on this machine to decide", human_secs(s)))
            .unwrap_or_default();
        out.push_str(&format!(
            "  {} {}: {}, {} against the {} target (point: {point}, {basis}){more}\n",
            mark(x.state),
            x.profile,
            x.state.word(),
            ci_text(x.ci_s[0], x.ci_s[1]),
            human_secs(x.target_s)
        ));
    }
    out
}

/// A check against its `--baseline`: plain words first, then the profiles
/// that moved.
pub fn baseline(c: &AgainstBaseline) -> String {
    let ci = punctual_analysis::verdict::ci_text;
    let mut s = String::new();
    if c.worse.is_empty() && c.better.is_empty() {
        s.push_str(&format!(
            "  no difference shown: for all {} profiles this run's and the baseline's 95% intervals of the MTTF overlap\n",
            c.same
        ));
        return s;
    }
    if !c.worse.is_empty() {
        s.push_str(&format!(
            "  WORSE than the baseline for {} profiles: this machine (or this run's conditions) is not the one the baseline measured\n",
            c.worse.len()
        ));
    } else {
        s.push_str(&format!(
            "  better than the baseline for {} profiles, worse for none: this machine (or this run's conditions) is not the one the baseline measured\n",
            c.better.len()
        ));
    }
    for (word, list) in [("worse ", &c.worse), ("better", &c.better)] {
        for x in list.iter() {
            s.push_str(&format!(
                "  {word} {}: MTTF {} here, {} in the baseline\n",
                x.profile,
                ci(x.now.0, x.now.1),
                ci(x.then.0, x.then.1)
            ));
        }
    }
    if c.same > 0 {
        s.push_str(&format!(
            "  no difference shown for the other {} profiles (intervals overlap)\n",
            c.same
        ));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(p: &str, state: VerdictState, note: Option<&str>) -> VerdictEntry {
        VerdictEntry {
            profile: p.into(),
            state,
            mttf_s: Some(27.0),
            ci_s: [Some(3.0), None],
            target_s: 600.0,
            measure_more_s: (state == VerdictState::Inconclusive).then_some(126.0),
            basis: VerdictBasis::Extrapolated,
            representative: note.is_none(),
            note: note.map(str::to_string),
        }
    }

    /// Each line starts with the mark, the profile, the state and its
    /// interval; the caveat of an unrepresentative record is said once,
    /// before the verdicts.
    #[test]
    fn kept_verdicts_read_state_and_interval_first() {
        let v = vec![
            entry(
                "RT audio 8 ms × 2",
                VerdictState::Misses,
                Some("ran at SCHED_OTHER"),
            ),
            entry(
                "RT audio 8 ms × 4",
                VerdictState::Inconclusive,
                Some("ran at SCHED_OTHER"),
            ),
        ];
        let t = entries(&v);
        let lines: Vec<&str> = t.lines().collect();
        assert!(
            lines[0]
                .starts_with("== verdicts for 2 workload profiles: 0 meet, 1 miss, 1 inconclusive"),
            "{t}"
        );
        assert_eq!(lines[1], "   NOT REPRESENTATIVE: ran at SCHED_OTHER", "{t}");
        assert!(
            lines[2].starts_with(
                "  MISS RT audio 8 ms × 2: misses, 95% CI 3 s–∞ against the 10 min target"
            ),
            "{t}"
        );
        assert!(
            lines[3].starts_with("  ??   RT audio 8 ms × 4: inconclusive, 95% CI"),
            "{t}"
        );
        assert!(
            lines[3].ends_with(": measure ≥ 2.1 min on this machine to decide"),
            "{t}"
        );
        assert_eq!(t.matches("NOT REPRESENTATIVE").count(), 1, "{t}");
        let fine = entries(&[entry("x", VerdictState::Meets, None)]);
        assert!(!fine.contains("NOT REPRESENTATIVE"), "{fine}");
        assert_eq!(entries(&[]), "");
    }
}
