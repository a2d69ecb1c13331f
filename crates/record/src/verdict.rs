//! The record's verdicts: for each workload profile, whether the machine
//! the record measured meets the profile's MTTF target, and how sure that
//! is. Written by `check` (and readable by every report) so a verdict is
//! data, not only a sentence on a terminal.

use serde::{Deserialize, Serialize};

/// A verdict is decided only when the whole 95 % interval of the MTTF lies
/// on one side of the target; a point estimate on one side with an
/// interval across it decides nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum VerdictState {
    /// The whole interval is at or above the target.
    Meets,
    /// The whole interval is below the target.
    Misses,
    /// The interval spans the target: measure longer.
    Inconclusive,
}

impl VerdictState {
    pub fn word(self) -> &'static str {
        match self {
            VerdictState::Meets => "meets",
            VerdictState::Misses => "misses",
            VerdictState::Inconclusive => "inconclusive",
        }
    }
}

/// Whether the MTTF rests on underruns the record itself implies
/// (`observed`) or on the fitted tail beyond it (`extrapolated`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum VerdictBasis {
    Observed,
    Extrapolated,
}

/// One profile's verdict as the record keeps it. Seconds throughout;
/// `null` stands for "never" (an MTTF or interval end that is unbounded).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct VerdictEntry {
    pub profile: String,
    pub state: VerdictState,
    /// Point estimate of the time between underruns; `null`: none
    /// observed or predicted.
    pub mttf_s: Option<f64>,
    /// 95 % interval of the MTTF, `[lo, hi]`; `hi` `null` is unbounded.
    pub ci_s: [Option<f64>; 2],
    pub target_s: f64,
    /// For an inconclusive verdict: how long this machine must be measured
    /// (in all, wake-up time) for the interval to leave the target.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub measure_more_s: Option<f64>,
    pub basis: VerdictBasis,
    /// False when the measurement cannot stand for what the profile runs
    /// as (a probe that could not get its real-time policy, or a machine
    /// that changed during the run); the reason is in `note`.
    #[serde(default = "yes")]
    pub representative: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

fn yes() -> bool {
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The record's `verdicts[]` entry carries the fields docs and other
    /// tools read by name (issue 17's list), in seconds, with `null` for
    /// an unbounded end, and `measure_more_s` only for an open verdict;
    /// it reads back to the same value.
    #[test]
    fn a_verdict_entry_keeps_its_named_fields_and_reads_back() {
        let open = VerdictEntry {
            profile: "pro audio 64 frames × 2".into(),
            state: VerdictState::Inconclusive,
            mttf_s: Some(30.0),
            ci_s: [Some(3.0), None],
            target_s: 600.0,
            measure_more_s: Some(1500.0),
            basis: VerdictBasis::Extrapolated,
            representative: true,
            note: None,
        };
        let v = serde_json::to_value(&open).unwrap();
        for k in [
            "profile",
            "state",
            "mttf_s",
            "ci_s",
            "target_s",
            "measure_more_s",
            "basis",
        ] {
            assert!(v.get(k).is_some(), "{k} missing: {v}");
        }
        assert_eq!(v["state"], "inconclusive");
        assert_eq!(v["basis"], "extrapolated");
        assert_eq!(v["ci_s"], serde_json::json!([3.0, null]));
        assert_eq!(serde_json::from_value::<VerdictEntry>(v).unwrap(), open);
        let decided = VerdictEntry {
            state: VerdictState::Misses,
            measure_more_s: None,
            ..open
        };
        let v = serde_json::to_value(&decided).unwrap();
        assert!(v.get("measure_more_s").is_none(), "{v}");
        assert_eq!(v["state"], "misses");
    }
}
