//! Verdicts as terminal lines: the mark, the sentence, and why a verdict
//! is not representative. The verdicts themselves are data
//! (`punctual_analysis::verdict`); `forecast` and `check` print them
//! through here.

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
