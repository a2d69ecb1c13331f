//! What a check's verdicts may claim. They stand for a real-time consumer
//! on one machine only when the probes ran at their real-time policy and
//! the machine did not change during the run (`unrepresentative`,
//! `halves_differ`, over the timer probe's windows in the record), and
//! against a saved run they move only when the 95% intervals of the MTTF
//! part (`against_baseline`). Data and sentences for the verb to print;
//! the baseline's lines are `punctual_report::text::verdict::baseline`.

use punctual_record::{Metric, Nanos, Platform, Record, Warning};

use crate::profiles::Profile;
use crate::Verdict;

/// The verdicts of a check record: for `profiles`, from the timer
/// half's wake-ups (`timer` holds the record-time windows the timer ran
/// in; the noise half's seconds must not dilute the wake-up rate), with
/// the time stolen during each compute from the noise half's gaps on the
/// same CPU (docs/forecast.md §3.4), which it measured in stretches that
/// RT throttling never stops; without them (an interrupted run) it is
/// inferred from the wake-ups. A verdict is decided only when its whole
/// 95% interval is on one side of the target. The second value says what
/// the stall term came from.
pub fn verdicts_of(
    rec: &Record,
    timer: &[TimerWindow],
    profiles: &[Profile],
) -> (Vec<Verdict>, &'static str) {
    let mut timer_part = Record::new(rec.source, &rec.kind, Platform::default());
    timer_part.duration_ns = timer.iter().map(|w| w.len).sum();
    timer_part.series = rec
        .series
        .iter()
        .filter(|s| s.metric == Metric::Latency)
        .cloned()
        .collect();
    timer_part.spikes = rec
        .spikes
        .iter()
        .filter(|s| s.metric == Metric::Latency)
        .cloned()
        .collect();
    let mut models = crate::verdict::models(&timer_part);
    crate::verdict::attach_own_gaps(&mut models, rec);
    let mut v = crate::verdict::verdicts_for(&models, profiles);
    if let Some(why) = unrepresentative(rec, timer) {
        for x in v.iter_mut() {
            x.not_representative(&why);
        }
    }
    let from = if models.iter().any(|m| m.gap_stalls.is_some()) {
        "from the wake-up latencies and the busy loop's stolen time"
    } else {
        "from the wake-up latencies"
    };
    (v, from)
}

/// Why a check record's verdicts cannot stand for a real-time consumer on
/// one machine: its probes ran without their real-time policy, or the
/// machine changed during the run ([`halves_differ`]).
pub fn unrepresentative(rec: &Record, timer: &[TimerWindow]) -> Option<String> {
    let mut why = Vec::new();
    if rec
        .warnings
        .iter()
        .any(|w| matches!(w, Warning::NoRealtimePolicy { .. }))
    {
        why.push(
            "the probes ran at SCHED_OTHER (no real-time policy was allowed), so these \
             verdicts describe a time-sharing thread, not a SCHED_FIFO consumer; run as root \
             or grant CAP_SYS_NICE"
                .to_string(),
        );
    }
    if let Some(d) = halves_differ(rec, timer) {
        why.push(d);
    }
    (!why.is_empty()).then(|| why.join("; and "))
}

/// [`unrepresentative`] for any record, read back from it alone: its
/// timer windows as a check wrote them, else the whole record. `forecast`,
/// the report and the gates ask this, so a verdict recomputed from a saved
/// record carries the same caveat `check` printed beside it.
pub fn record_unrepresentative(rec: &Record) -> Option<String> {
    unrepresentative(rec, &timer_windows_of(rec))
}

/// Where in a check record's time the timer probe ran: one window per
/// round (`--until-decided` measures several).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TimerWindow {
    pub start: Nanos,
    pub len: Nanos,
}

/// Whether the first and second half of the timer run (its windows laid
/// end to end) differ beyond chance. The spike log keeps the latest
/// wake-ups with their times; on a machine that does not change, each is
/// as likely to fall in either half, so the count in the first half is
/// Binomial(K, ½). A count more than 4 standard deviations from K/2
/// (K ≥ 20) is a changed machine: 4 rather than 2 because late wake-ups
/// come in bursts, which widen the spread beyond the binomial's.
pub fn halves_differ(rec: &Record, timer: &[TimerWindow]) -> Option<String> {
    let total: Nanos = timer.iter().map(|w| w.len).sum();
    let mid = total.0 / 2;
    // Each latency spike's place in the timer's own time.
    let at: Vec<u64> = rec
        .spikes
        .iter()
        .filter(|s| s.metric == Metric::Latency)
        .filter_map(|s| {
            let mut before = 0;
            for w in timer {
                if s.at_ns >= w.start && s.at_ns.0 < w.start.0 + w.len.0 {
                    return Some(before + (s.at_ns.0 - w.start.0));
                }
                before += w.len.0;
            }
            None
        })
        .collect();
    let k = at.len() as f64;
    if at.len() < 20 {
        return None;
    }
    let first = at.iter().filter(|t| **t < mid).count();
    let z = (first as f64 - k / 2.0) / (k / 4.0).sqrt();
    (z.abs() > 4.0).then(|| {
        format!(
            "the machine changed during the run: of the {} latest wake-ups, {first} came in the \
             first half of the wake-up measurement and {} in the second, beyond chance \
             (z = {z:.1}), so the verdicts do not describe one machine",
            at.len(),
            at.len() - first
        )
    })
}

/// The timer windows of a check record: as it wrote them, else (records
/// written before they were kept) one window of the timer half it asked
/// for, or of the whole record when it is no check.
pub fn timer_windows_of(rec: &Record) -> Vec<TimerWindow> {
    if let Some(w) = rec.extra.get("timer_windows").and_then(|v| v.as_array()) {
        let w: Vec<TimerWindow> = w
            .iter()
            .filter_map(|x| {
                Some(TimerWindow {
                    start: Nanos(x.get(0)?.as_u64()?),
                    len: Nanos(x.get(1)?.as_u64()?),
                })
            })
            .collect();
        if !w.is_empty() {
            return w;
        }
    }
    let asked = rec
        .config
        .get("timer.duration_ns")
        .and_then(|v| v.as_u64())
        .map(Nanos);
    vec![TimerWindow {
        start: Nanos::ZERO,
        len: asked.map_or(rec.duration_ns, |a| a.min(rec.duration_ns)),
    }]
}

/// This run against a baseline, profile by profile, by the same 95%
/// intervals of the MTTF that decide the verdicts: worse when this run's
/// interval lies wholly below the baseline's, better when wholly above,
/// otherwise no difference is shown (two overlapping intervals cannot
/// tell the runs apart; no fixed threshold is used).
#[derive(Debug, Default)]
pub struct AgainstBaseline {
    pub worse: Vec<Shift>,
    pub better: Vec<Shift>,
    pub same: usize,
}

/// One profile whose MTTF interval moved: this run's and the baseline's.
#[derive(Debug)]
pub struct Shift {
    pub profile: String,
    pub now: (Option<f64>, Option<f64>),
    pub then: (Option<f64>, Option<f64>),
}

pub fn against_baseline(now: &[Verdict], then: &[Verdict]) -> AgainstBaseline {
    let mut out = AgainstBaseline::default();
    for a in now {
        let Some(b) = then.iter().find(|b| b.profile == a.profile) else {
            continue;
        };
        let hi = |x: Option<f64>| x.unwrap_or(f64::INFINITY);
        let lo = |x: Option<f64>| x.unwrap_or(0.0);
        let shift = || Shift {
            profile: a.profile.clone(),
            now: (a.mttf_ci_low_seconds, a.mttf_ci_high_seconds),
            then: (b.mttf_ci_low_seconds, b.mttf_ci_high_seconds),
        };
        if hi(a.mttf_ci_high_seconds) < lo(b.mttf_ci_low_seconds) {
            out.worse.push(shift());
        } else if lo(a.mttf_ci_low_seconds) > hi(b.mttf_ci_high_seconds) {
            out.better.push(shift());
        } else {
            out.same += 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use punctual_record::{Platform, Source, Spike};

    fn ten_s() -> Vec<TimerWindow> {
        vec![TimerWindow {
            start: Nanos::ZERO,
            len: Nanos::from_secs(10),
        }]
    }

    fn with_spikes(at_ms: impl Iterator<Item = u64>) -> Record {
        let mut r = Record::new(Source::Measured, "check", Platform::default());
        r.spikes = at_ms
            .map(|t| Spike {
                at_ns: Nanos::from_ms(t),
                cpu: 0,
                task: None,
                metric: Metric::Latency,
                value_ns: Nanos::from_ms(1),
                causes: Vec::new(),
                incomplete: false,
            })
            .collect();
        r
    }

    /// 40 late wake-ups spread over both halves of a 10 s run: one
    /// machine. All 40 in the first half: changed, said with the counts.
    #[test]
    fn halves_that_differ_beyond_chance_are_named() {
        let even = with_spikes((0..40).map(|i| i * 250));
        assert_eq!(halves_differ(&even, &ten_s()), None);
        let front = with_spikes((0..40).map(|i| i * 100));
        let d = halves_differ(&front, &ten_s()).unwrap();
        assert!(
            d.contains("40 latest wake-ups, 40 came in the first half"),
            "{d}"
        );
        assert!(unrepresentative(&front, &ten_s()).is_some());
        // Too few to tell.
        let few = with_spikes((0..10).map(|i| i * 100));
        assert_eq!(halves_differ(&few, &ten_s()), None);
    }

    /// Rounds of --until-decided: the halves are of the timer's own time,
    /// the windows laid end to end, so the noise halves between them do
    /// not count. Two rounds of 5 s of wake-ups, each followed by 5 s of
    /// noise: 20 spikes in each window is one machine; all 40 in the first
    /// round is a changed one.
    #[test]
    fn halves_are_over_the_timer_windows_of_all_rounds() {
        let w = [
            TimerWindow {
                start: Nanos::ZERO,
                len: Nanos::from_secs(5),
            },
            TimerWindow {
                start: Nanos::from_secs(10),
                len: Nanos::from_secs(5),
            },
        ];
        let even = with_spikes(
            (0..20)
                .map(|i| i * 250)
                .chain((0..20).map(|i| 10_000 + i * 250)),
        );
        assert_eq!(halves_differ(&even, &w), None);
        let first = with_spikes((0..40).map(|i| i * 120));
        assert!(halves_differ(&first, &w).is_some());
        // Spikes outside every timer window (the noise halves) are not
        // wake-ups of the timer.
        let outside = with_spikes((0..40).map(|i| 5_000 + i * 100));
        assert_eq!(halves_differ(&outside, &w), None);
    }
}
