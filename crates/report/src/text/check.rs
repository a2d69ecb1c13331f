//! `punctual check`'s terminal text while it measures (the headings and
//! tables of each half, the rounds of `--until-decided`) and after (the
//! verdict section, the baseline's heading). The run itself is
//! `punctual_measure::check`, which says what happened as a [`Progress`];
//! the verb prints each as this module renders it.

use punctual_analysis::verdict::human_secs;
use punctual_analysis::Verdict;
use punctual_record::{Nanos, Record};

use super::{load, probe, verdict};

/// A step of a check, as it happens.
pub enum Progress<'a> {
    /// The load about to run through both halves (`--load`).
    UnderLoad { spec: &'a str, duration: Nanos },
    /// The timer half starts, at `policy`, for `half`.
    TimerHalf { policy: &'a str, half: Nanos },
    /// The timer half is in the record.
    TimerDone(&'a Record),
    /// The noise half starts, at `policy`, for `duration`, in stretches of
    /// `on` with `rest` rests.
    NoiseHalf {
        policy: &'a str,
        duration: Nanos,
        on: Nanos,
        rest: Nanos,
    },
    /// The noise half is joined to the record.
    NoiseDone(&'a Record),
    /// The loads stopped and their figures are in the record.
    LoadsDone(&'a Record),
    /// A round of `--until-decided` ended: how many rounds, how much was
    /// measured, how many verdicts are still open out of how many, about
    /// how long (seconds) the open ones need, and why it stops, if so.
    Round {
        round: usize,
        measured: Nanos,
        open: usize,
        of: usize,
        left_secs: Option<f64>,
        why_stop: Option<&'a str>,
    },
    /// Several rounds, laid end to end in `rec`.
    AllRounds {
        rounds: usize,
        timer: Nanos,
        elapsed: Nanos,
        rec: &'a Record,
    },
}

/// What to print for a step: on standard output, then standard error.
#[derive(Default)]
pub struct Text {
    pub out: String,
    pub err: String,
}

/// The text of one step.
pub fn progress(p: &Progress) -> Text {
    let mut t = Text::default();
    match p {
        Progress::UnderLoad { spec, duration } => {
            t.out = format!("\n== under load: {spec} for {duration}\n");
        }
        Progress::TimerHalf { policy, half } => {
            t.out = format!(
                "\n== wake-up latency: one {policy} thread per CPU waking every 1ms for {half}\n"
            );
        }
        Progress::TimerDone(rec) => t.out = probe::latency_table(rec),
        Progress::NoiseHalf {
            policy,
            duration,
            on,
            rest,
        } => {
            t.out = format!(
                "\n== stolen time: one {policy} busy loop per CPU for {duration} ({on} at a time with {rest} rests, so RT throttling never stops it)\n"
            );
        }
        Progress::NoiseDone(rec) => t.out = probe::stolen_table(rec),
        Progress::LoadsDone(rec) => t.out = load::load_lines(rec),
        Progress::Round {
            round,
            measured,
            open,
            of,
            left_secs,
            why_stop,
        } => {
            t.err = format!(
                "punctual check: round {round}, {} measured: {open} of {of} profiles still inconclusive{}{}\n",
                Nanos(measured.0 / 10_000_000 * 10_000_000),
                match left_secs {
                    Some(s) if *open > 0 =>
                        format!(", about {} more to decide them all", human_secs(*s)),
                    _ => String::new(),
                },
                why_stop.map(|w| format!(" ({w})")).unwrap_or_default()
            );
        }
        Progress::AllRounds {
            rounds,
            timer,
            elapsed,
            rec,
        } => {
            t.out =
                format!("\n== all {rounds} rounds together: {timer} of wake-ups in {elapsed}\n");
            t.out.push_str(&probe::latency_table(rec));
            t.out.push_str(&probe::stolen_table(rec));
        }
    }
    t
}

/// The verdict section: a heading with the tally, what the stall term
/// came from, the note when the verdicts do not stand for a real-time
/// consumer (`unrepresentative`), then one compact line per verdict
/// (without the per-line note, which the heading gave once). Nothing
/// without verdicts.
pub fn verdicts(v: &[Verdict], from: &str, unrepresentative: Option<&str>) -> String {
    if v.is_empty() {
        return String::new();
    }
    let mut out = format!(
        "\n== verdicts for {} workload profiles: {} (decided only when the whole 95% CI of the \
         MTTF is on one side of the target; {from}; `punctual forecast` explains each)\n",
        v.len(),
        verdict::tally(v)
    );
    out.push_str(&verdict::compact(v, unrepresentative));
    out
}

/// The heading of the comparison with a saved check (`--baseline`): its
/// path, when it started and, when known, on which host.
pub fn baseline_heading(path: &str, base: &Record) -> String {
    format!(
        "\n== against the baseline {path} ({}{})\n",
        base.started_at,
        base.platform
            .hostname
            .as_ref()
            .map(|h| format!(", {h}"))
            .unwrap_or_default()
    )
}
