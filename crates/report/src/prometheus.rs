//! `--format prometheus`: Prometheus text exposition format 0.0.4, the
//! format node_exporter's textfile collector reads (`*.prom` files) and
//! `promtool check metrics` lints.
//!
//! Latency-like series become histograms in seconds with fixed buckets
//! from 5 µs to 1 s (a 1-2-5 ladder: the range between a good real-time
//! wake-up and a video frame), so histograms from every host aggregate in
//! PromQL. Stolen time becomes counters, worst cases per hour/day/week and
//! verdicts become gauges.

use std::collections::BTreeMap;
use std::fmt::Write;

use punctual_record::{Nanos, Series};

use crate::tail;
use crate::Input;

/// Histogram upper bounds in nanoseconds.
pub const BUCKETS_NS: [u64; 17] = [
    5_000,
    10_000,
    20_000,
    50_000,
    100_000,
    200_000,
    500_000,
    1_000_000,
    2_000_000,
    5_000_000,
    10_000_000,
    20_000_000,
    50_000_000,
    100_000_000,
    200_000_000,
    500_000_000,
    1_000_000_000,
];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Counter,
    Gauge,
    Histogram,
}

impl Kind {
    fn as_str(self) -> &'static str {
        match self {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
            Kind::Histogram => "histogram",
        }
    }
}

pub type Labels = Vec<(String, String)>;

struct Family {
    kind: Kind,
    help: String,
    samples: Vec<(String, Labels, f64)>,
}

/// Collects samples by family so each family is written once, with its
/// HELP and TYPE, as the format requires.
#[derive(Default)]
pub struct Exposition {
    families: BTreeMap<String, Family>,
}

fn escape_label(v: &str) -> String {
    let mut s = String::with_capacity(v.len());
    for c in v.chars() {
        match c {
            '\\' => s.push_str("\\\\"),
            '"' => s.push_str("\\\""),
            '\n' => s.push_str("\\n"),
            c => s.push(c),
        }
    }
    s
}

fn escape_help(v: &str) -> String {
    v.replace('\\', "\\\\").replace('\n', "\\n")
}

fn value(v: f64) -> String {
    if v.is_nan() {
        "NaN".into()
    } else if v == f64::INFINITY {
        "+Inf".into()
    } else if v == f64::NEG_INFINITY {
        "-Inf".into()
    } else {
        format!("{v}")
    }
}

fn seconds(n: Nanos) -> f64 {
    n.0 as f64 / 1e9
}

impl Exposition {
    pub fn new() -> Self {
        Self::default()
    }

    fn family(&mut self, name: &str, kind: Kind, help: &str) -> &mut Family {
        self.families
            .entry(name.to_string())
            .or_insert_with(|| Family {
                kind,
                help: help.to_string(),
                samples: Vec::new(),
            })
    }

    pub fn gauge(&mut self, name: &str, help: &str, labels: Labels, v: f64) {
        self.family(name, Kind::Gauge, help)
            .samples
            .push((name.to_string(), labels, v));
    }

    /// `name` must end in `_total`.
    pub fn counter(&mut self, name: &str, help: &str, labels: Labels, v: f64) {
        self.family(name, Kind::Counter, help)
            .samples
            .push((name.to_string(), labels, v));
    }

    /// A histogram from cumulative counts at [`BUCKETS_NS`] plus the total.
    pub fn histogram(
        &mut self,
        name: &str,
        help: &str,
        labels: Labels,
        cumulative: &[u64; BUCKETS_NS.len()],
        count: u64,
        sum_seconds: f64,
    ) {
        let fam = self.family(name, Kind::Histogram, help);
        for (le, c) in BUCKETS_NS.iter().zip(cumulative.iter()) {
            let mut l = labels.clone();
            l.push(("le".into(), value(*le as f64 / 1e9)));
            fam.samples.push((format!("{name}_bucket"), l, *c as f64));
        }
        let mut l = labels.clone();
        l.push(("le".into(), "+Inf".into()));
        fam.samples
            .push((format!("{name}_bucket"), l, count as f64));
        fam.samples
            .push((format!("{name}_sum"), labels.clone(), sum_seconds));
        fam.samples
            .push((format!("{name}_count"), labels, count as f64));
    }

    pub fn render(&self) -> String {
        let mut out = String::new();
        for (name, fam) in &self.families {
            let _ = writeln!(out, "# HELP {name} {}", escape_help(&fam.help));
            let _ = writeln!(out, "# TYPE {name} {}", fam.kind.as_str());
            for (sname, labels, v) in &fam.samples {
                out.push_str(sname);
                if !labels.is_empty() {
                    out.push('{');
                    for (i, (k, lv)) in labels.iter().enumerate() {
                        if i > 0 {
                            out.push(',');
                        }
                        let _ = write!(out, "{k}=\"{}\"", escape_label(lv));
                    }
                    out.push('}');
                }
                let _ = writeln!(out, " {}", value(*v));
            }
        }
        out
    }
}

/// Cumulative counts of samples ≤ each bound. A sparse bucket that straddles
/// a bound counts as above it: errs towards more late samples.
pub fn cumulative(s: &Series) -> [u64; BUCKETS_NS.len()] {
    let w = s.histogram.bucket_ns.max(1);
    let mut out = [0u64; BUCKETS_NS.len()];
    for (i, le) in BUCKETS_NS.iter().enumerate() {
        out[i] = s
            .histogram
            .buckets
            .iter()
            .filter(|(lo, _)| lo + (w - 1) <= *le)
            .map(|b| b.1)
            .sum();
    }
    out
}

fn series_labels(run: Option<&str>, s: &Series) -> Labels {
    let mut l: Labels = Vec::new();
    if let Some(r) = run {
        l.push(("run".into(), r.into()));
    }
    l.push(("series".into(), s.name.clone()));
    if let Some(c) = s.cpu {
        l.push(("cpu".into(), c.to_string()));
    }
    if let Some(t) = &s.task {
        l.push(("task".into(), t.clone()));
    }
    l
}

const VERDICT_HELP: &str = "1 when the profile's deadlines are met, 0 when missed, NaN while \
     inconclusive (state says which; representative=false: the record cannot stand for a \
     real-time consumer on one machine).";

/// The record's verdicts (those a check keeps, else those its latency
/// series give, as the HTML page and the JUnit export read them): the
/// state as a gauge, and the 95% interval of the MTTF that decided it.
fn typed_verdicts(e: &mut Exposition, runl: &Labels, r: &punctual_record::Record) {
    use punctual_record::VerdictState;
    for v in punctual_analysis::gate::record_verdicts(r) {
        let mut l = runl.clone();
        l.push(("profile".into(), v.profile.clone()));
        let mut ls = l.clone();
        ls.push(("state".into(), v.state.word().into()));
        ls.push(("representative".into(), v.representative.to_string()));
        let state = match v.state {
            VerdictState::Meets => 1.0,
            VerdictState::Misses => 0.0,
            VerdictState::Inconclusive => f64::NAN,
        };
        e.gauge("punctual_verdict", VERDICT_HELP, ls, state);
        for (bound, s, none) in [("low", v.ci_s[0], 0.0), ("high", v.ci_s[1], f64::INFINITY)] {
            let mut lb = l.clone();
            lb.push(("bound".into(), bound.into()));
            e.gauge(
                "punctual_verdict_mttf_ci_seconds",
                "Ends of the 95% interval of the mean time to underrun behind the verdict (+Inf: unbounded).",
                lb,
                s.unwrap_or(none),
            );
        }
        e.gauge(
            "punctual_verdict_target_seconds",
            "The profile's target mean time to underrun.",
            l,
            v.target_s,
        );
    }
}

pub fn render(inputs: &[Input]) -> Vec<u8> {
    let mut e = Exposition::new();
    let several = inputs.len() > 1;
    for i in inputs {
        let r = &i.record;
        let run = several.then_some(i.label.as_str());
        let mut info: Labels = Vec::new();
        if let Some(rn) = run {
            info.push(("run".into(), rn.into()));
        }
        info.push(("kind".into(), r.kind.clone()));
        info.push((
            "source".into(),
            match r.source {
                punctual_record::Source::Measured => "measured".into(),
                punctual_record::Source::Simulated => "simulated".into(),
            },
        ));
        info.push(("tool_version".into(), r.tool_version.clone()));
        e.gauge(
            "punctual_record_info",
            "Which punctual run these metrics come from (always 1).",
            info,
            1.0,
        );
        let runl: Labels = run
            .map(|x| vec![("run".to_string(), x.to_string())])
            .unwrap_or_default();
        e.gauge(
            "punctual_record_duration_seconds",
            "Length of the run the metrics summarize.",
            runl.clone(),
            seconds(r.duration_ns),
        );
        for s in &r.series {
            let metric = s.metric.as_str();
            let l = series_labels(run, s);
            e.histogram(
                &format!("punctual_{metric}_seconds"),
                &format!("Distribution of {metric} per CPU or task."),
                l.clone(),
                &cumulative(s),
                s.histogram.total(),
                s.mean.0 as f64 * s.count as f64 / 1e9,
            );
            e.gauge(
                "punctual_series_max_seconds",
                "Largest value of each series.",
                l.clone(),
                seconds(s.max),
            );
            e.counter(
                "punctual_missed_periods_total",
                "Periods that passed without a wake-up.",
                l.clone(),
                s.missed as f64,
            );
            if let Some(wc) = tail::worst_cases(s, r.series_duration(s)) {
                for (w, est) in wc {
                    let Some(v) = est.value_ns else { continue };
                    let mut l2 = l.clone();
                    l2.push(("window".into(), w.into()));
                    l2.push(("extrapolated".into(), est.extrapolated.to_string()));
                    e.gauge(
                        "punctual_worst_case_seconds",
                        "Value expected to be exceeded about once per window (extrapolated=true: from the fitted tail, not observed).",
                        l2,
                        seconds(v),
                    );
                }
            }
        }
        for st in &r.stolen {
            let mut l = runl.clone();
            l.push(("cpu".into(), st.cpu.to_string()));
            if let Some(t) = &st.task {
                l.push(("task".into(), t.clone()));
            }
            e.counter(
                "punctual_stolen_seconds_total",
                "Time taken from the measured thread by interrupts, softirqs, other threads or the hypervisor.",
                l.clone(),
                seconds(st.total_ns),
            );
            e.counter(
                "punctual_observed_seconds_total",
                "Time over which stolen time was observed (the denominator of the stolen fraction).",
                l.clone(),
                seconds(st.observed_ns),
            );
            e.counter(
                "punctual_stolen_intervals_total",
                "Number of stolen intervals.",
                l.clone(),
                st.intervals as f64,
            );
            e.gauge(
                "punctual_stolen_max_seconds",
                "Longest single stolen interval.",
                l.clone(),
                seconds(st.max_ns),
            );
            for src in &st.by_source {
                let mut l2 = l.clone();
                l2.push(("kind".into(), src.kind.clone()));
                l2.push(("source".into(), src.name.clone()));
                e.counter(
                    "punctual_stolen_by_source_seconds_total",
                    "Stolen time attributed to each named source.",
                    l2,
                    seconds(src.total_ns),
                );
            }
        }
        for ps in &r.period_summary {
            let mut l = runl.clone();
            l.push(("task".into(), ps.task.clone()));
            e.counter(
                "punctual_periods_total",
                "Reservation periods run.",
                l.clone(),
                ps.periods as f64,
            );
            e.counter(
                "punctual_period_misses_total",
                "Reservation periods whose deadline was missed.",
                l,
                ps.misses as f64,
            );
        }
        typed_verdicts(&mut e, &runl, r);
    }
    e.render().into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;
    use punctual_record::{Metric, Platform, Record, Recorder, Source};

    #[test]
    fn histogram_is_cumulative_and_labels_escaped() {
        let mut r = Record::new(Source::Measured, "timer", Platform::default());
        r.duration_ns = Nanos::from_secs(1);
        let mut rec = Recorder::new(Nanos(1000)).with_sample_period(Nanos::from_ms(1));
        for v in [1_000u64, 4_000, 7_000, 60_000, 2_000_000] {
            rec.record(Nanos(v));
        }
        let mut s = rec.to_series("cpu0.latency", Metric::Latency);
        s.task = Some("a\"b\\c\nd".into());
        r.series.push(s);
        r.extra.insert(
            "forecast".into(),
            serde_json::json!({"verdicts": [{"profile": "rt-audio", "verdict": "pass"}, {"name": "modem", "pass": false}]}),
        );
        let text = String::from_utf8(render(&[Input::new("x", r)])).unwrap();
        assert!(
            text.contains(r#"task="a\"b\\c\nd",le="0.00001"} 3"#),
            "{text}"
        );
        assert!(text.contains(r#"le="+Inf"} 5"#), "{text}");
        assert!(text.contains("punctual_latency_seconds_count{"), "{text}");
        // Verdicts are the ones the record's series give, each with its
        // state: a pass/fail left in `extra` by another tool is not read
        // as one, so one exposition never holds two answers for a profile.
        let verdicts: Vec<&str> = text
            .lines()
            .filter(|l| l.starts_with("punctual_verdict{"))
            .collect();
        assert!(!verdicts.is_empty(), "{text}");
        assert!(verdicts.iter().all(|l| l.contains("state=\"")), "{text}");
        assert!(!text.contains(r#"profile="rt-audio""#), "{text}");
        assert_eq!(
            text.matches("# TYPE punctual_latency_seconds histogram")
                .count(),
            1
        );
    }

    /// A check record's typed verdicts are exported: the state (1, 0, NaN
    /// while inconclusive) with its label and representativeness, and
    /// the ends of the MTTF's interval.
    #[test]
    fn a_check_record_s_verdicts_are_gauges() {
        use punctual_record::{VerdictBasis, VerdictEntry, VerdictState};
        let mut r = Record::new(Source::Measured, "check", Platform::default());
        let entry = |p: &str, state, hi| VerdictEntry {
            profile: p.into(),
            state,
            mttf_s: Some(20.0),
            ci_s: [Some(10.0), hi],
            target_s: 600.0,
            measure_more_s: None,
            basis: VerdictBasis::Extrapolated,
            representative: false,
            note: Some("why".into()),
        };
        r.verdicts = vec![
            entry("a", VerdictState::Misses, Some(30.0)),
            entry("b", VerdictState::Inconclusive, None),
        ];
        let text = String::from_utf8(render(&[Input::new("x", r)])).unwrap();
        for line in [
            r#"punctual_verdict{profile="a",state="misses",representative="false"} 0"#,
            r#"punctual_verdict{profile="b",state="inconclusive",representative="false"} NaN"#,
            r#"punctual_verdict_mttf_ci_seconds{profile="a",bound="high"} 30"#,
            r#"punctual_verdict_mttf_ci_seconds{profile="b",bound="high"} +Inf"#,
            r#"punctual_verdict_target_seconds{profile="a"} 600"#,
        ] {
            assert!(text.contains(line), "{line} missing: {text}");
        }
    }
}
