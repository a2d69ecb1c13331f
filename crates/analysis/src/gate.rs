//! CI gates on a record: `--fail-if 'cpu1.latency.p99 > 200us'` and
//! `--fail-on-verdict misses`. A gate is checked against the record alone,
//! so the same gate on the same record gives the same answer whether it
//! runs at the end of a measurement or later through `report`.
//!
//! An expression is `[SERIES.]FIGURE OP LIMIT`: SERIES a series name
//! (`cpu1.latency`), a CPU (`cpu1`, its latency or stolen-gap series) or
//! absent (every latency and stolen-gap series of the record); FIGURE one
//! of [`Figure::ALL`]; OP `>`, `>=`, `<` or `<=`; LIMIT a duration
//! (`200us`) for the time figures, a whole number for `missed` and
//! `count`. The gate fails when the comparison holds for any series it
//! selects.

use punctual_record::{Metric, Nanos, Record, Series, VerdictEntry, VerdictState};
use punctual_units::parse_duration;

/// A figure of a series that a gate can test.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Figure {
    Min,
    Mean,
    Max,
    P50,
    P90,
    P99,
    P99_9,
    P99_99,
    /// Periods without a wake-up.
    Missed,
    /// Samples.
    Count,
}

impl Figure {
    /// Every figure, longest name first where one name ends another
    /// (`p99.99` before `p99.9` before `p99`), as the parser tries them.
    pub const ALL: [(&'static str, Figure); 10] = [
        ("p99.99", Figure::P99_99),
        ("p99.9", Figure::P99_9),
        ("p99", Figure::P99),
        ("p90", Figure::P90),
        ("p50", Figure::P50),
        ("min", Figure::Min),
        ("mean", Figure::Mean),
        ("max", Figure::Max),
        ("missed", Figure::Missed),
        ("count", Figure::Count),
    ];

    pub fn name(self) -> &'static str {
        Figure::ALL
            .iter()
            .find(|(_, f)| *f == self)
            .map(|(n, _)| *n)
            .unwrap_or("?")
    }

    /// Whether the figure is a time (its limit a duration) rather than a
    /// count.
    pub fn is_time(self) -> bool {
        !matches!(self, Figure::Missed | Figure::Count)
    }

    /// The figure of `s`: nanoseconds for times, a count otherwise.
    pub fn of(self, s: &Series) -> u64 {
        let p = &s.percentiles;
        match self {
            Figure::Min => s.min.0,
            Figure::Mean => s.mean.0,
            Figure::Max => s.max.0,
            Figure::P50 => p.p50.0,
            Figure::P90 => p.p90.0,
            Figure::P99 => p.p99.0,
            Figure::P99_9 => p.p99_9.0,
            Figure::P99_99 => p.p99_99.0,
            Figure::Missed => s.missed,
            Figure::Count => s.count,
        }
    }

    fn show(self, v: u64) -> String {
        if self.is_time() {
            Nanos(v).to_string()
        } else {
            v.to_string()
        }
    }
}

/// The comparison that fails the gate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    Gt,
    Ge,
    Lt,
    Le,
}

impl Op {
    fn holds(self, v: u64, limit: u64) -> bool {
        match self {
            Op::Gt => v > limit,
            Op::Ge => v >= limit,
            Op::Lt => v < limit,
            Op::Le => v <= limit,
        }
    }
    fn text(self) -> &'static str {
        match self {
            Op::Gt => ">",
            Op::Ge => ">=",
            Op::Lt => "<",
            Op::Le => "<=",
        }
    }
}

/// Which series a gate reads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Select {
    /// Every latency and stolen-gap series.
    All,
    /// That CPU's latency and stolen-gap series.
    Cpu(u32),
    /// The series of that name.
    Named(String),
}

/// One `--fail-if` expression.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Gate {
    /// As the user wrote it, for the messages.
    pub text: String,
    pub select: Select,
    pub figure: Figure,
    pub op: Op,
    /// Nanoseconds for a time figure, a count otherwise.
    pub limit: u64,
}

/// A gate's answer on one record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outcome {
    /// The expression.
    pub gate: String,
    pub failed: bool,
    /// One clause per series read: `cpu0.latency p99 = 35us`.
    pub detail: String,
}

impl Gate {
    /// Parses `[SERIES.]FIGURE OP LIMIT`; the error is one sentence.
    pub fn parse(text: &str) -> Result<Gate, String> {
        let bad = |why: String| format!("--fail-if '{text}': {why}");
        let (lhs, op, rhs) = split_op(text).ok_or_else(|| {
            bad("no comparison; write e.g. 'p99 > 200us' or 'cpu1.latency.max >= 1ms'".into())
        })?;
        let lhs = lhs.trim();
        let (select, figure) = Figure::ALL
            .iter()
            .find_map(|(name, f)| {
                if lhs.eq_ignore_ascii_case(name) {
                    Some((Select::All, *f))
                } else {
                    let n = lhs.len().checked_sub(name.len() + 1)?;
                    let (head, tail) = (lhs.get(..n)?, lhs.get(n..)?);
                    tail.strip_prefix('.')
                        .filter(|t| t.eq_ignore_ascii_case(name))
                        .map(|_| (select_of(head), *f))
                }
            })
            .ok_or_else(|| {
                let names: Vec<&str> = Figure::ALL.iter().map(|(n, _)| *n).collect();
                bad(format!(
                    "'{lhs}' names no figure; end it with one of {}",
                    names.join(", ")
                ))
            })?;
        let rhs = rhs.trim();
        let limit = if figure.is_time() {
            parse_duration(rhs)
                .map(|d| d.0)
                .map_err(|e| bad(format!("{e}")))?
        } else {
            rhs.parse::<u64>().map_err(|_| {
                bad(format!(
                    "'{rhs}' is not a whole number ({} is a count)",
                    figure.name()
                ))
            })?
        };
        Ok(Gate {
            text: text.trim().to_string(),
            select,
            figure,
            op,
            limit,
        })
    }

    fn selects(&self, s: &Series) -> bool {
        let probe_metric = matches!(s.metric, Metric::Latency | Metric::Gap);
        match &self.select {
            Select::All => probe_metric,
            Select::Cpu(c) => probe_metric && s.cpu == Some(*c),
            Select::Named(n) => s.name == *n,
        }
    }

    /// Checks the gate on `rec`; an error (one sentence) when it selects
    /// no series there.
    pub fn check(&self, rec: &Record) -> Result<Outcome, String> {
        let series: Vec<&Series> = rec.series.iter().filter(|s| self.selects(s)).collect();
        if series.is_empty() {
            let names: Vec<&str> = rec.series.iter().map(|s| s.name.as_str()).collect();
            return Err(format!(
                "--fail-if '{}': the record has no such series (it has {})",
                self.text,
                if names.is_empty() {
                    "none".to_string()
                } else {
                    names.join(", ")
                }
            ));
        }
        let mut failed = false;
        let mut clauses = Vec::new();
        for s in series {
            let v = self.figure.of(s);
            let hit = self.op.holds(v, self.limit);
            failed |= hit;
            clauses.push(format!(
                "{} {} = {}{}",
                s.name,
                self.figure.name(),
                self.figure.show(v),
                if hit {
                    format!(" {} {}", self.op.text(), self.figure.show(self.limit))
                } else {
                    String::new()
                }
            ));
        }
        Ok(Outcome {
            gate: self.text.clone(),
            failed,
            detail: clauses.join(", "),
        })
    }
}

fn select_of(head: &str) -> Select {
    match head.strip_prefix("cpu").and_then(|n| n.parse::<u32>().ok()) {
        Some(c) => Select::Cpu(c),
        None => Select::Named(head.to_string()),
    }
}

/// Splits at the first comparison operator (two-character ones first).
fn split_op(text: &str) -> Option<(&str, Op, &str)> {
    let i = text.find(['<', '>'])?;
    let (lhs, rest) = text.split_at(i);
    let (op, len) = match rest.as_bytes() {
        [b'>', b'=', ..] => (Op::Ge, 2),
        [b'<', b'=', ..] => (Op::Le, 2),
        [b'>', ..] => (Op::Gt, 1),
        _ => (Op::Lt, 1),
    };
    Some((lhs, op, &rest[len..]))
}

/// `--fail-on-verdict`: which verdicts fail the run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum VerdictGate {
    /// Any profile decided as missed.
    Misses,
    /// Any profile missed or undecided.
    Inconclusive,
    /// The profiles whose name starts with this (case-insensitive),
    /// decided as missed.
    Profile(String),
}

impl VerdictGate {
    /// `misses`, `inconclusive`, or the start of a profile name among
    /// `profiles`; the error is one sentence.
    pub fn parse(text: &str, profiles: &[String]) -> Result<VerdictGate, String> {
        let t = text.trim();
        match t.to_ascii_lowercase().as_str() {
            "misses" | "miss" => return Ok(VerdictGate::Misses),
            "inconclusive" => return Ok(VerdictGate::Inconclusive),
            _ => {}
        }
        let low = t.to_lowercase();
        if !t.is_empty() && profiles.iter().any(|p| p.to_lowercase().starts_with(&low)) {
            return Ok(VerdictGate::Profile(t.to_string()));
        }
        Err(format!(
            "--fail-on-verdict '{text}' is neither 'misses', 'inconclusive' nor the start of a \
             workload profile's name (e.g. '{}')",
            profiles.first().map(String::as_str).unwrap_or("RT audio")
        ))
    }

    /// The verdicts this gate fails on.
    pub fn failing<'a>(&self, v: &'a [VerdictEntry]) -> Vec<&'a VerdictEntry> {
        v.iter()
            .filter(|x| match self {
                VerdictGate::Misses => x.state == VerdictState::Misses,
                VerdictGate::Inconclusive => x.state != VerdictState::Meets,
                VerdictGate::Profile(p) => {
                    x.state == VerdictState::Misses
                        && x.profile.to_lowercase().starts_with(&p.to_lowercase())
                }
            })
            .collect()
    }

    pub fn text(&self) -> String {
        match self {
            VerdictGate::Misses => "misses".into(),
            VerdictGate::Inconclusive => "inconclusive".into(),
            VerdictGate::Profile(p) => p.clone(),
        }
    }
}

/// The verdicts of a record: those it keeps (`check`), else the ones its
/// latency series give against the built-in profiles (empty when it has
/// none), marked not representative where the record says its probes
/// lacked their policy or its machine changed, as `check` marks its own.
pub fn record_verdicts(rec: &Record) -> Vec<VerdictEntry> {
    if !rec.verdicts.is_empty() {
        return rec.verdicts.clone();
    }
    let why = crate::check::record_unrepresentative(rec);
    crate::verdict::verdicts(rec, &crate::profiles::builtin())
        .iter_mut()
        .map(|v| {
            if let Some(w) = &why {
                v.not_representative(w);
            }
            v.entry()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use punctual_record::{Platform, Recorder, Source};

    fn record() -> Record {
        let mut rec = Record::new(Source::Measured, "timer", Platform::default());
        for (cpu, worst) in [(0u32, 50u64), (1, 900)] {
            let mut r = Recorder::new(Nanos::from_us(1)).with_sample_period(Nanos::from_ms(1));
            for i in 0..1000u64 {
                r.record(Nanos::from_us(if i == 500 { worst } else { 10 + i % 5 }));
            }
            r.add_missed(cpu as u64 * 3);
            let mut s = r.to_series(&format!("cpu{cpu}.latency"), Metric::Latency);
            s.cpu = Some(cpu);
            rec.series.push(s);
            let mut iv = Recorder::new(Nanos::from_us(1));
            iv.record(Nanos::from_ms(1));
            let mut s = iv.to_series(&format!("cpu{cpu}.interval"), Metric::Interval);
            s.cpu = Some(cpu);
            rec.series.push(s);
        }
        rec
    }

    #[test]
    fn expressions_parse_with_and_without_a_series() {
        let g = Gate::parse("p99 > 200us").unwrap();
        assert_eq!(
            (g.select, g.figure, g.op, g.limit),
            (Select::All, Figure::P99, Op::Gt, 200_000)
        );
        let g = Gate::parse("cpu1.latency.p99.9>=1ms").unwrap();
        assert_eq!(g.select, Select::Named("cpu1.latency".into()));
        assert_eq!(
            (g.figure, g.op, g.limit),
            (Figure::P99_9, Op::Ge, 1_000_000)
        );
        let g = Gate::parse("cpu1.max<5ms").unwrap();
        assert_eq!((g.select, g.figure), (Select::Cpu(1), Figure::Max));
        let g = Gate::parse("é.p99 > 1ms").unwrap();
        assert_eq!(g.select, Select::Named("é".into()));
        let g = Gate::parse("missed > 0").unwrap();
        assert_eq!((g.figure, g.limit), (Figure::Missed, 0));
    }

    #[test]
    fn bad_expressions_are_one_sentence_naming_the_text() {
        for (text, says) in [
            ("p99 200us", "no comparison"),
            ("p98 > 1ms", "names no figure"),
            ("p99 > fast", "--fail-if 'p99 > fast'"),
            ("missed > 1ms", "not a whole number"),
            ("ééé > 1ms", "names no figure"),
        ] {
            let e = Gate::parse(text).unwrap_err();
            assert!(e.contains(says), "{text}: {e}");
            assert!(!e.contains('\n'), "{e}");
        }
    }

    #[test]
    fn a_gate_fails_on_the_series_over_its_limit_and_names_it() {
        let rec = record();
        let o = Gate::parse("max > 500us").unwrap().check(&rec).unwrap();
        assert!(o.failed);
        assert_eq!(
            o.detail,
            "cpu0.latency max = 50us, cpu1.latency max = 900us > 500us"
        );
        // The interval series (1 ms) is not read without naming it.
        assert!(
            !Gate::parse("cpu0.max > 500us")
                .unwrap()
                .check(&rec)
                .unwrap()
                .failed
        );
        assert!(
            Gate::parse("cpu0.interval.max > 500us")
                .unwrap()
                .check(&rec)
                .unwrap()
                .failed
        );
        assert!(
            Gate::parse("cpu1.missed >= 3")
                .unwrap()
                .check(&rec)
                .unwrap()
                .failed
        );
        assert!(
            !Gate::parse("missed > 3")
                .unwrap()
                .check(&rec)
                .unwrap()
                .failed
        );
        let e = Gate::parse("cpu7.p99 > 1us")
            .unwrap()
            .check(&rec)
            .unwrap_err();
        assert!(e.contains("no such series (it has cpu0.latency"), "{e}");
    }

    #[test]
    fn verdict_gates_fail_on_what_they_name() {
        let names = vec!["RT audio 8 ms × 2".to_string(), "soft modem".to_string()];
        assert_eq!(
            VerdictGate::parse("misses", &names).unwrap(),
            VerdictGate::Misses
        );
        assert!(VerdictGate::parse("rt audio", &names).is_ok());
        let e = VerdictGate::parse("banana", &names).unwrap_err();
        assert!(e.contains("'banana'"), "{e}");
        let entry = |p: &str, state| VerdictEntry {
            profile: p.into(),
            state,
            mttf_s: None,
            ci_s: [None, None],
            target_s: 1.0,
            measure_more_s: None,
            basis: punctual_record::VerdictBasis::Observed,
            representative: true,
            note: None,
        };
        let v = vec![
            entry("RT audio 8 ms × 2", VerdictState::Inconclusive),
            entry("soft modem", VerdictState::Misses),
            entry("adsl", VerdictState::Meets),
        ];
        assert_eq!(VerdictGate::Misses.failing(&v).len(), 1);
        assert_eq!(VerdictGate::Inconclusive.failing(&v).len(), 2);
        assert!(VerdictGate::Profile("rt audio".into())
            .failing(&v)
            .is_empty());
        assert_eq!(VerdictGate::Profile("SOFT".into()).failing(&v).len(), 1);
    }

    /// Verdicts recomputed from a timer record that ran without its
    /// real-time policy carry the caveat, each with the reason; the same
    /// record without the warning gives the same verdicts, representative.
    #[test]
    fn recomputed_verdicts_carry_the_records_caveat() {
        let plain = record();
        let v = record_verdicts(&plain);
        assert!(!v.is_empty());
        assert!(v.iter().all(|x| x.representative && x.note.is_none()));
        let mut other = record();
        other
            .warnings
            .push(punctual_record::Warning::NoRealtimePolicy {
                asked: "SCHED_FIFO 95".into(),
                reason: "EPERM".into(),
            });
        let w = record_verdicts(&other);
        assert_eq!(w.len(), v.len());
        for (a, b) in v.iter().zip(&w) {
            assert_eq!((&a.profile, a.state), (&b.profile, b.state));
            assert!(!b.representative);
            assert!(
                b.note.as_deref().unwrap_or("").contains("SCHED_OTHER"),
                "{b:?}"
            );
        }
    }
}
