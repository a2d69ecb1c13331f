//! Verdicts as terminal lines: the mark, the sentence, and why a verdict
//! is not representative. The verdicts themselves are data
//! (`punctual_analysis::verdict`); `forecast` and `check` print them
//! through here.

use punctual_analysis::check::AgainstBaseline;
use punctual_analysis::{Verdict, VerdictState};

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
    let n = |s: VerdictState| v.iter().filter(|x| x.state == s).count();
    format!(
        "{} meet, {} miss, {} inconclusive",
        n(VerdictState::Meets),
        n(VerdictState::Misses),
        n(VerdictState::Inconclusive)
    )
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
