//! The tail numbers the report plots, computed from a series' histogram.
//!
//! The exceedance curve is read straight off the sparse histogram. Worst
//! cases per window and MTTF against buffering come from
//! `punctual_analysis` (generalized Pareto tail, confidence intervals,
//! extrapolation limits), so the report and `punctual forecast` never
//! disagree about a number.

use punctual_analysis::buffer::Mttf;
use punctual_analysis::{Buffering, Compute, Estimate, TailModel};
use punctual_record::{Nanos, Series};

/// One point of a complementary distribution: the fraction of samples at
/// or above `at`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ExceedPoint {
    pub at: Nanos,
    pub fraction: f64,
}

/// P(X ≥ x) at each non-empty bucket's lower edge (at most `max_points`,
/// thinned evenly in log x), every fraction positive so log axes work.
pub fn exceedance(s: &Series, max_points: usize) -> Vec<ExceedPoint> {
    let total = s.histogram.total();
    if total == 0 {
        return Vec::new();
    }
    let mut above = total;
    let mut pts = Vec::with_capacity(s.histogram.buckets.len());
    for (lo, c) in &s.histogram.buckets {
        // A 0 ns lower edge cannot sit on a log axis; half a bucket stands in.
        let x = if *lo == 0 {
            (s.histogram.bucket_ns / 2).max(1)
        } else {
            *lo
        };
        pts.push(ExceedPoint {
            at: Nanos(x),
            fraction: above as f64 / total as f64,
        });
        above -= c;
    }
    thin_log(pts, max_points)
}

fn thin_log(pts: Vec<ExceedPoint>, max_points: usize) -> Vec<ExceedPoint> {
    if pts.len() <= max_points || max_points < 2 {
        return pts;
    }
    let lo = (pts[0].at.0.max(1) as f64).log10();
    let hi = (pts[pts.len() - 1].at.0.max(1) as f64).log10();
    let step = (hi - lo) / (max_points as f64 - 1.0);
    let mut out: Vec<ExceedPoint> = Vec::with_capacity(max_points + 8);
    let mut next = lo;
    let n = pts.len();
    for (i, p) in pts.into_iter().enumerate() {
        let lx = (p.at.0.max(1) as f64).log10();
        // The tail (last points) is kept whole: it is what the plot is for.
        if lx >= next || i + 8 >= n {
            out.push(p);
            next = lx + step;
        }
    }
    out
}

/// Samples per hour of a series: from its nominal sample period, else from
/// the count over the run's duration.
pub fn samples_per_hour(s: &Series, duration: Nanos) -> Option<f64> {
    if let Some(p) = s.sample_period_ns.filter(|p| !p.is_zero()) {
        return Some(3600e9 / p.0 as f64);
    }
    if duration.is_zero() || s.count == 0 {
        return None;
    }
    Some(s.count as f64 * 3600e9 / duration.0 as f64)
}

/// The spans of the worst-case tables, in seconds.
pub const WINDOWS: [(&str, f64); 3] = [
    ("hour", punctual_analysis::HOUR_S),
    ("day", punctual_analysis::DAY_S),
    ("week", punctual_analysis::WEEK_S),
];

/// Worst case expected once per hour, day and week, from the analysis
/// crate's tail model; `None` when the series cannot be modelled.
pub fn worst_cases(s: &Series, duration: Nanos) -> Option<Vec<(&'static str, Estimate)>> {
    let m = TailModel::new(s, duration).ok()?;
    Some(worst_cases_of(&m))
}

/// Worst cases per hour, day and week, in that order and never falling
/// from one window to the next: the worst week holds the worst day. Where
/// a longer window has only the lower end of its interval (too far beyond
/// the record for a point estimate) and that lower end is below a shorter
/// window's estimate, the lower end is raised to it, so the table never
/// reads "per day 48 ms, per week > 36 ms".
pub fn worst_cases_of(m: &TailModel) -> Vec<(&'static str, Estimate)> {
    let mut out: Vec<(&'static str, Estimate)> = WINDOWS
        .iter()
        .map(|(w, span)| (*w, m.worst_per(*span)))
        .collect();
    ordered_windows(&mut out);
    out
}

fn ordered_windows(out: &mut [(&'static str, Estimate)]) {
    let mut floor: Option<(Nanos, &'static str)> = None;
    for (w, e) in out.iter_mut() {
        if let (None, Some(lo), Some((f, shorter))) = (e.value_ns, e.ci_low_ns, floor) {
            if lo < f {
                e.ci_low_ns = Some(f);
                let raised = format!(
                    "at least the worst case per {shorter} ({f}); the interval's own lower end was {lo}"
                );
                e.note = Some(match e.note.take() {
                    Some(n) => format!("{n}; {raised}"),
                    None => raised,
                });
            }
        }
        let shown = e.value_ns.or(e.ci_low_ns);
        if let Some(v) = shown {
            if floor.is_none_or(|(f, _)| v > f) {
                floor = Some((v, *w));
            }
        }
    }
}

/// Tail models built once per series of a page (fitting a tail with its
/// bootstrap is the expensive part of a report), keyed by series address.
#[derive(Default)]
pub struct Models {
    map: std::collections::HashMap<usize, Option<TailModel>>,
}

impl Models {
    pub fn get(&mut self, s: &Series, duration: Nanos) -> Option<&TailModel> {
        self.map
            .entry(s as *const Series as usize)
            .or_insert_with(|| TailModel::new(s, duration).ok())
            .as_ref()
    }
}

/// How a worst case reads in a table: `~` marks extrapolated values; a
/// span too far beyond the record shows the lower end of its interval.
pub fn estimate_text(e: &Estimate) -> String {
    match (e.value_ns, e.ci_low_ns) {
        (Some(v), _) if e.extrapolated => format!("~{v}"),
        (Some(v), _) => v.to_string(),
        (None, Some(lo)) => format!("> {lo}"),
        (None, None) => "—".into(),
    }
}

/// The buffering range of a workload of Cota-Robles & Held Table 1:
/// buffers of `t_min..=t_max`, `n_min..=n_max` of them, which the HTML
/// page's MTTF plot sweeps. Named apart from
/// `punctual_analysis::profiles::Profile`, the verdicts' workload with its
/// compute and target, which it does not replace.
#[derive(Clone, Debug, PartialEq)]
pub struct BufferingRange {
    pub name: &'static str,
    pub t_min: Nanos,
    pub t_max: Nanos,
    pub n_min: u32,
    pub n_max: u32,
}

pub const BUFFERING_RANGES: [BufferingRange; 4] = [
    BufferingRange {
        name: "adsl",
        t_min: Nanos::from_ms(2),
        t_max: Nanos::from_ms(4),
        n_min: 2,
        n_max: 6,
    },
    BufferingRange {
        name: "modem",
        t_min: Nanos::from_ms(4),
        t_max: Nanos::from_ms(16),
        n_min: 2,
        n_max: 6,
    },
    BufferingRange {
        name: "rt-audio",
        t_min: Nanos::from_ms(8),
        t_max: Nanos::from_ms(24),
        n_min: 2,
        n_max: 8,
    },
    BufferingRange {
        name: "rt-video",
        t_min: Nanos::from_ms(33),
        t_max: Nanos::from_ms(50),
        n_min: 2,
        n_max: 3,
    },
];

pub fn range_named(name: &str) -> Option<&'static BufferingRange> {
    BUFFERING_RANGES.iter().find(|p| p.name == name)
}

/// Cota-Robles & Held: the latency a design of n buffers of length t tolerates.
pub fn slack(n: u32, t: Nanos, compute_fraction: f64) -> Nanos {
    let c = (t.0 as f64 * compute_fraction) as u64;
    Nanos((n.saturating_sub(1) as u64 * t.0).saturating_sub(c))
}

/// Cota-Robles & Held section 5.1 through the analysis crate: the MTTF of `n`
/// buffers of length `t` with compute `compute_fraction` of a buffer.
pub fn mttf(m: &TailModel, n: u32, t: Nanos, compute_fraction: f64) -> Option<Mttf> {
    let b = Buffering::new(n, t, Compute::Fraction(compute_fraction));
    punctual_analysis::buffer::mttf(m, &b).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use punctual_record::{Metric, Recorder};

    fn pareto(n: u64) -> Series {
        // Deterministic heavy tail: value k-th of n is 10 µs · n/(n-k).
        let mut r = Recorder::new(Nanos(1000)).with_sample_period(Nanos::from_ms(1));
        for k in 0..n {
            r.record(Nanos(10_000 * n / (n - k)));
        }
        r.to_series("cpu0.latency", Metric::Latency)
    }

    #[test]
    fn exceedance_starts_at_one_and_falls() {
        let s = pareto(10_000);
        let e = exceedance(&s, 300);
        assert!((e[0].fraction - 1.0).abs() < 1e-12);
        assert!(e.len() <= 300 + 8);
        assert!(e
            .windows(2)
            .all(|w| w[1].fraction <= w[0].fraction && w[1].at > w[0].at));
        assert!(e.last().unwrap().fraction > 0.0);
    }

    #[test]
    fn a_longer_window_never_reads_below_a_shorter_one() {
        let est = |v: Option<u64>, lo: u64| Estimate {
            value_ns: v.map(Nanos),
            extrapolated: true,
            ci_low_ns: Some(Nanos(lo)),
            ci_high_ns: None,
            expected_in_record: 0.1,
            note: None,
        };
        // The figures of a simulated soft modem: hour 38.9 ms, day 48.1
        // ms, week only "> 36.3 ms".
        let mut w = vec![
            ("hour", est(Some(38_891_000), 30_587_000)),
            ("day", est(Some(48_149_000), 34_462_000)),
            ("week", est(None, 36_290_000)),
        ];
        ordered_windows(&mut w);
        assert_eq!(estimate_text(&w[2].1), "> 48.149ms");
        assert!(w[2].1.note.as_deref().unwrap().contains("per day"));
        // Already in order: untouched.
        let mut ok = vec![("hour", est(Some(1000), 900)), ("day", est(None, 5000))];
        let before = ok.clone();
        ordered_windows(&mut ok);
        assert_eq!(ok, before);
    }

    #[test]
    fn worst_cases_come_marked() {
        let s = pareto(10_000);
        let w = worst_cases(&s, Nanos::from_secs(10)).unwrap();
        assert_eq!(w.len(), 3);
        // 10 000 samples at 1 ms are 10 s: an hour is beyond the record.
        assert!(w.iter().all(|(_, e)| e.extrapolated));
        assert!(estimate_text(&w[0].1).starts_with('~') || estimate_text(&w[0].1).starts_with('>'));
        assert_eq!(slack(4, Nanos::from_ms(4), 0.25), Nanos::from_ms(11));
    }

    #[test]
    fn mttf_follows_seed_002() {
        let s = pareto(10_000);
        let m = TailModel::new(&s, Nanos::from_secs(10)).unwrap();
        // 3 buffers of 8 ms, no compute: slack 16 ms, P(X > 16 ms) ≈ 10 µs / 16 ms.
        let r = mttf(&m, 3, Nanos::from_ms(8), 0.0).unwrap();
        let expect = 0.008 / (10e-6 / 16e-3);
        let got = r.mttf_seconds.unwrap();
        assert!((got / expect - 1.0).abs() < 0.2, "{got} vs {expect}");
    }
}
