//! Verdicts: for each workload profile, does this machine meet the MTTF
//! the work needs, and if not, what buffering would? A number in place of
//! LatencyMon's "suitable for real-time audio".

use punctual_record::{Metric, Record, VerdictBasis, VerdictEntry, VerdictState};
use punctual_units::Nanos;
use serde::Serialize;

use std::cell::RefCell;

use crate::buffer::{least_buffers_by, mttf, Buffering, Mttf};
use crate::forecast::{GapStalls, TailModel};
pub use crate::model::human_secs;
use crate::profiles::Profile;

/// The outcome for one profile on one record.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Verdict {
    pub profile: String,
    /// The series that decided it (docs/forecast.md §6).
    pub series: String,
    pub buffering: Buffering,
    pub slack_ns: Nanos,
    pub target_seconds: f64,
    /// Decided only when the whole 95 % interval is on one side of the
    /// target.
    pub state: VerdictState,
    /// `None`: no wake-up that late observed or predicted.
    pub mttf_seconds: Option<f64>,
    pub mttf_ci_low_seconds: Option<f64>,
    pub mttf_ci_high_seconds: Option<f64>,
    pub extrapolated: bool,
    pub basis: VerdictBasis,
    /// Inconclusive only: how long to measure this machine in all (wake-up
    /// time) for the interval to leave the target, at the rate estimated.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub measure_more_seconds: Option<f64>,
    /// MTTF / target (> 1 meets it); `None` when the MTTF is unbounded.
    pub margin_ratio: Option<f64>,
    /// What would meet the target; only for a decided miss.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
    /// False when the record cannot stand for the profile's consumer
    /// (`note` says why); set by the caller, which knows how it measured.
    pub representative: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// The sentence a person reads, state and interval first.
    pub message: String,
}

impl Verdict {
    /// The record's typed form of this verdict.
    pub fn entry(&self) -> VerdictEntry {
        VerdictEntry {
            profile: self.profile.clone(),
            state: self.state,
            mttf_s: self.mttf_seconds,
            ci_s: [self.mttf_ci_low_seconds, self.mttf_ci_high_seconds],
            target_s: self.target_seconds,
            measure_more_s: self.measure_more_seconds,
            basis: self.basis,
            representative: self.representative,
            note: self.note.clone(),
        }
    }

    /// Marks the verdict as not standing for the profile's consumer.
    pub fn not_representative(&mut self, why: &str) {
        self.representative = false;
        self.note = Some(why.to_string());
    }
}

/// The state the interval `[lo, hi]` (None: unbounded above; `lo` None
/// means no bound was computed, read as 0) gives against `target_s`.
pub fn state_of(lo: Option<f64>, hi: Option<f64>, target_s: f64) -> VerdictState {
    if lo.is_some_and(|lo| lo >= target_s) {
        VerdictState::Meets
    } else if hi.is_some_and(|hi| hi < target_s) {
        VerdictState::Misses
    } else {
        VerdictState::Inconclusive
    }
}

/// Continuous form of the Poisson 95 % interval of a count with mean `m`
/// (the Wilson–Hilferty approximation `poisson_ci95` uses, for a mean that
/// need not be whole).
fn poisson_ci95_mean(m: f64) -> (f64, f64) {
    let z = 1.959_964;
    let lo = if m <= 0.0 {
        0.0
    } else {
        (m * (1.0 - 1.0 / (9.0 * m) - z / (3.0 * m.sqrt())).powi(3)).max(0.0)
    };
    let m1 = m + 1.0;
    let hi = m1 * (1.0 - 1.0 / (9.0 * m1) + z / (3.0 * m1.sqrt())).powi(3);
    (lo, hi)
}

/// How long a machine with underrun rate `rate_per_s` (the point
/// estimate: fitted tail and stall process) must be measured in all for
/// the Poisson 95 % interval of the underruns it would then show to
/// leave the target rate 1/`target_s` on the side the estimate is on.
/// At least twice what was measured (`measured_s`), since what kept this
/// interval open includes more than the counting error: the stall process
/// and the tail fit are estimated too, and both narrow only with more data.
/// Capped at 1000 × the target (a rate within a hair of the target would
/// need forever; 1000 × says "much longer than it is worth").
pub fn measure_needed_s(rate_per_s: f64, target_s: f64, measured_s: f64) -> f64 {
    let r0 = 1.0 / target_s;
    let cap = 1000.0 * target_s;
    let decided = |t: f64| {
        let (lo, hi) = poisson_ci95_mean(rate_per_s * t);
        if rate_per_s < r0 {
            hi / t < r0
        } else {
            lo / t > r0
        }
    };
    let floor = (2.0 * measured_s).max(1e-3);
    if !decided(cap) {
        return cap.max(floor);
    }
    let (mut lo, mut hi) = (1e-3f64, cap);
    for _ in 0..200 {
        let mid = (lo * hi).sqrt();
        if decided(mid) {
            hi = mid;
        } else {
            lo = mid;
        }
        if hi / lo < 1.001 {
            break;
        }
    }
    hi.max(floor)
}

/// The series a verdict is read from: latency-like series only (wake-up
/// latency, or a job's response time), what a buffered consumer suffers.
/// Other series (CPU time received per period, stolen gaps, intervals)
/// are not lateness and give no MTTF.
/// A latency series whose record also measured its CPU's stolen time
/// without RT-throttling stops (a `check` record, [`GapStalls::own`])
/// takes the queue model's stall term from those gaps.
pub fn models(record: &Record) -> Vec<TailModel> {
    let mut m = tail_models(record);
    attach_own_gaps(&mut m, record);
    m
}

/// Gives each latency model the stall term `stalls_from` measured on a
/// running thread on its CPU, when that record's gaps are free of
/// RT-throttling stops ([`GapStalls::own`]); others are left as they are.
pub fn attach_own_gaps(models: &mut [TailModel], stalls_from: &Record) {
    for m in models.iter_mut().filter(|m| m.metric == Metric::Latency) {
        if m.gap_stalls.is_some() {
            continue;
        }
        let cpu = stalls_from.series_named(&m.name).and_then(|s| s.cpu);
        m.gap_stalls = GapStalls::own(stalls_from, cpu);
    }
}

/// Whether a series of this metric is lateness a consumer suffers, so
/// that an MTTF and a verdict can be read from it.
pub fn latency_like(m: Metric) -> bool {
    matches!(m, Metric::Latency | Metric::Response)
}

fn tail_models(record: &Record) -> Vec<TailModel> {
    record
        .series
        .iter()
        .filter(|s| latency_like(s.metric))
        .filter_map(|s| {
            TailModel::new(s, record.series_duration(s))
                .ok()
                .map(|m| m.with_spike_log(record, s))
        })
        .collect()
}

/// Verdicts for every profile, from the series of `record` with the
/// shortest MTTF for each. Empty when the record has no usable series.
///
/// ```
/// use punctual_analysis::{profiles, verdicts};
/// use punctual_record::{Metric, Platform, Record, Recorder, Source, VerdictState};
/// use punctual_units::Nanos;
///
/// // A 1 ms timer: 1 wake-up in 1000 is 3 ms late, the rest 20 µs.
/// let mut rec = Recorder::new(Nanos::from_us(1)).with_sample_period(Nanos::from_ms(1));
/// for i in 0..200_000u64 {
///     rec.record(if i % 1000 == 0 { Nanos::from_ms(3) } else { Nanos::from_us(20) });
/// }
/// let mut record = Record::new(Source::Simulated, "timer", Platform::default());
/// record.series.push(rec.to_series("cpu0.latency", Metric::Latency));
///
/// let v = verdicts(&record, &profiles::builtin());
/// let audio = v.iter().find(|v| v.profile.starts_with("pro audio 128 frames × 2")).unwrap();
/// // 3 ms late every second: underruns every ~1 s, 200 of them seen.
/// assert_eq!(audio.state, VerdictState::Misses);
/// // Nothing reaches the soft modem's 76 ms slack in 200 s of data, but
/// // 200 s cannot show an hour between underruns either.
/// let modem = v.iter().find(|v| v.profile == "soft modem 16 ms × 6").unwrap();
/// assert_eq!(modem.state, VerdictState::Inconclusive);
/// assert!(modem.measure_more_seconds.unwrap() > 3600.0);
/// ```
pub fn verdicts(record: &Record, profiles: &[Profile]) -> Vec<Verdict> {
    verdicts_for(&models(record), profiles)
}

/// As [`verdicts`], over models already built (so a caller that also
/// prints forecasts fits each tail once).
/// Series that are not latency-like are left out.
pub fn verdicts_for(models: &[TailModel], profiles: &[Profile]) -> Vec<Verdict> {
    let lat: Vec<TailModel> = models
        .iter()
        .filter(|m| latency_like(m.metric))
        .cloned()
        .collect();
    if lat.is_empty() {
        return Vec::new();
    }
    let f = Forecasts::new(&lat);
    profiles
        .iter()
        .filter_map(|p| verdict_one(&f, profiles, p))
        .collect()
}

/// The series' MTTFs, each (series, buffering) forecast once. The
/// profiles' fixes and sizing searches ask again about bufferings
/// other profiles (or the same search) already forecast, and each
/// forecast runs the queue chain, whose cost grows with the square of
/// the buffering's cells: with long stalls, repeats were most of a
/// check's CPU time.
struct Forecasts<'a> {
    models: &'a [TailModel],
    /// (series index, buffering, its MTTF or None when it has none).
    seen: RefCell<Vec<(usize, Buffering, Option<Mttf>)>>,
}

impl<'a> Forecasts<'a> {
    fn new(models: &'a [TailModel]) -> Self {
        Forecasts {
            models,
            seen: RefCell::new(Vec::new()),
        }
    }

    fn mttf(&self, i: usize, b: &Buffering) -> Option<Mttf> {
        if let Some((_, _, r)) = self
            .seen
            .borrow()
            .iter()
            .find(|(j, c, _)| *j == i && c == b)
        {
            return r.clone();
        }
        let r = mttf(&self.models[i], b).ok();
        self.seen.borrow_mut().push((i, *b, r.clone()));
        r
    }

    fn all(&self, b: &Buffering) -> Vec<(&'a TailModel, Mttf)> {
        (0..self.models.len())
            .filter_map(|i| self.mttf(i, b).map(|r| (&self.models[i], r)))
            .collect()
    }
}

fn worst<'a>(models: &Forecasts<'a>, b: &Buffering) -> Option<(&'a TailModel, Mttf)> {
    models.all(b).into_iter().min_by(|a, b| {
        let k = |r: &Mttf| r.mttf_seconds.unwrap_or(f64::INFINITY);
        k(&a.1).total_cmp(&k(&b.1))
    })
}

fn meets(r: &Mttf, target_s: f64) -> bool {
    r.mttf_seconds.is_none_or(|s| s >= target_s)
}

fn state_of_mttf(r: &Mttf, target_s: f64) -> VerdictState {
    state_of(r.mttf_ci_low_seconds, r.mttf_ci_high_seconds, target_s)
}

/// The series that decides a profile: a decided miss on any series
/// decides the machine (the shortest such MTTF); otherwise an open
/// interval on any series keeps it open (the one with the lowest
/// interval); only when every series meets the target does the machine
/// (then the shortest MTTF is shown).
fn deciding<'a>(
    models: &Forecasts<'a>,
    b: &Buffering,
    target_s: f64,
) -> Option<(&'a TailModel, Mttf, VerdictState)> {
    let all: Vec<(&TailModel, Mttf, VerdictState)> = models
        .all(b)
        .into_iter()
        .map(|(m, r)| {
            let st = state_of_mttf(&r, target_s);
            (m, r, st)
        })
        .collect();
    let key = |r: &Mttf, lo: bool| {
        if lo {
            r.mttf_ci_low_seconds.unwrap_or(0.0)
        } else {
            r.mttf_seconds.unwrap_or(f64::INFINITY)
        }
    };
    let pick = |state: VerdictState, by_lo: bool| {
        all.iter()
            .filter(|x| x.2 == state)
            .min_by(|a, b| key(&a.1, by_lo).total_cmp(&key(&b.1, by_lo)))
            .cloned()
    };
    pick(VerdictState::Misses, false)
        .or_else(|| pick(VerdictState::Inconclusive, true))
        .or_else(|| pick(VerdictState::Meets, false))
}

/// "95% CI 3.5 ms–4.6 ms" for an MTTF interval.
pub fn ci_text(lo: Option<f64>, hi: Option<f64>) -> String {
    format!(
        "95% CI {}–{}",
        human_secs(lo.unwrap_or(0.0)),
        hi.map(human_secs).unwrap_or_else(|| "∞".to_string())
    )
}

fn verdict_one(models: &Forecasts, all: &[Profile], p: &Profile) -> Option<Verdict> {
    let target_s = p.target.as_secs_f64();
    let (m, r, state) = deciding(models, &p.buffering, target_s)?;
    let margin = r.mttf_seconds.map(|s| s / target_s);
    let ci = ci_text(r.mttf_ci_low_seconds, r.mttf_ci_high_seconds);
    let point = match r.mttf_seconds {
        Some(s) => format!("an underrun every {}", human_secs(s)),
        None => format!(
            "no wake-up later than the {} slack seen or predicted",
            r.slack_ns
        ),
    };
    let label = if r.extrapolated { ", extrapolated" } else { "" };
    let target = human_secs(target_s);
    let mut fix = None;
    let mut measure = None;
    let message = match state {
        VerdictState::Meets => format!(
            "{}: meets its {target} target, {ci} (point: {point}{}{label})",
            p.name,
            margin
                .map(|m| format!(", {} the target", ratio_text(m)))
                .unwrap_or_default()
        ),
        VerdictState::Misses => {
            let f = fix_for(models, all, p, target_s);
            let m = format!(
                "{}: misses its {target} target, {ci} (point: {point}{label}): {f}",
                p.name
            );
            fix = Some(f);
            m
        }
        VerdictState::Inconclusive => {
            let need = measure_needed_s(r.underrun_rate_per_s, target_s, m.covered_s());
            measure = Some(need);
            format!(
                "{}: inconclusive, {ci} spans the {target} target (point: {point}{label}): \
                 measure ≥ {} of wake-ups on this machine to decide",
                p.name,
                human_secs(need)
            )
        }
    };
    Some(Verdict {
        profile: p.name.clone(),
        series: m.name.clone(),
        buffering: p.buffering,
        slack_ns: r.slack_ns,
        target_seconds: target_s,
        state,
        mttf_seconds: r.mttf_seconds,
        mttf_ci_low_seconds: r.mttf_ci_low_seconds,
        mttf_ci_high_seconds: r.mttf_ci_high_seconds,
        extrapolated: r.extrapolated,
        basis: if r.extrapolated {
            VerdictBasis::Extrapolated
        } else {
            VerdictBasis::Observed
        },
        measure_more_seconds: measure,
        margin_ratio: margin,
        fix,
        representative: true,
        note: None,
        message,
    })
}

/// The smallest fix for a decided miss, with the interval of the MTTF it
/// would give: first a profile of the same family with more latency
/// tolerance whose point MTTF meets the target, then more buffers of the
/// same length.
fn fix_for(models: &Forecasts, all: &[Profile], p: &Profile, target_s: f64) -> String {
    if let Some(fam) = &p.family {
        let mut cands: Vec<&Profile> = all
            .iter()
            .filter(|o| o.family.as_ref() == Some(fam) && o.name != p.name)
            .filter(|o| o.buffering.slack().ok() > p.buffering.slack().ok())
            .collect();
        cands.sort_by_key(|o| (o.buffering.total(), o.buffering.buffers));
        for c in cands {
            if let Some((_, r)) = worst(models, &c.buffering).filter(|(_, r)| meets(r, target_s)) {
                return format!(
                    "needs {} ({})",
                    c.size,
                    ci_text(r.mttf_ci_low_seconds, r.mttf_ci_high_seconds)
                );
            }
        }
    }
    let max_n = (p.buffering.buffers * 4).max(64);
    let best = (0..models.models.len())
        .map(|i| {
            least_buffers_by(&p.buffering, target_s, max_n, |b| models.mttf(i, b))
                .map(|r| r.buffering.buffers)
        })
        .try_fold(0u32, |acc, n| n.map(|n| acc.max(n)));
    match best {
        Some(n) if n > p.buffering.buffers => {
            let b = Buffering {
                buffers: n,
                ..p.buffering
            };
            let ci = worst(models, &b)
                .map(|(_, r)| {
                    format!(
                        " ({})",
                        ci_text(r.mttf_ci_low_seconds, r.mttf_ci_high_seconds)
                    )
                })
                .unwrap_or_default();
            format!("needs {n} × {} buffers{ci}", p.buffering.buffer_len)
        }
        _ => format!(
            "no buffering up to {max_n} × {} reaches it here: find the cause of the long \
             latencies (punctual cause) or give the work a reservation",
            p.buffering.buffer_len
        ),
    }
}

/// A margin as people say it: 1.4×, 74×, > 1000×.
fn ratio_text(r: f64) -> String {
    if r >= 1000.0 {
        "> 1000×".to_string()
    } else if r >= 10.0 {
        format!("{r:.0}×")
    } else {
        format!("{r:.1}×")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn human_units() {
        assert_eq!(human_secs(0.021), "21 ms");
        assert_eq!(human_secs(240.0), "4 min");
        assert_eq!(human_secs(86_400.0), "24 h");
        assert_eq!(human_secs(3.0 * 86_400.0), "3 d");
        assert_eq!(human_secs(f64::INFINITY), "never");
        assert_eq!(human_secs(1.5), "1.5 s");
        assert_eq!(human_secs(1e300), "> 1000 years");
        assert_eq!(ratio_text(3415.0), "> 1000×");
        assert_eq!(ratio_text(74.2), "74×");
    }

    #[test]
    fn decided_only_when_the_interval_is_on_one_side() {
        assert_eq!(state_of(Some(4000.0), None, 3600.0), VerdictState::Meets);
        assert_eq!(
            state_of(Some(1.0), Some(3000.0), 3600.0),
            VerdictState::Misses
        );
        assert_eq!(
            state_of(Some(1.0), Some(4000.0), 3600.0),
            VerdictState::Inconclusive
        );
        assert_eq!(
            state_of(Some(1.0), None, 3600.0),
            VerdictState::Inconclusive
        );
        assert_eq!(state_of(None, None, 3600.0), VerdictState::Inconclusive);
    }

    /// No underrun expected: an interval above a 1 h target needs the
    /// zero-count Poisson bound 3.69 below it, ~3.7 h. A rate 10× the
    /// target's needs a handful of underruns, so minutes; a rate within
    /// 10 % of it needs hundreds, so days.
    #[test]
    fn measuring_time_follows_the_counting_error() {
        let t = measure_needed_s(0.0, 3600.0, 10.0);
        assert!((t / 3600.0 - 3.69).abs() < 0.03, "{t}");
        let fast = measure_needed_s(10.0 / 3600.0, 3600.0, 10.0);
        assert!((600.0..3600.0).contains(&fast), "{fast}");
        let near = measure_needed_s(1.1 / 3600.0, 3600.0, 10.0);
        assert!(near > 100.0 * 3600.0, "{near}");
        // Never less than twice what was measured.
        assert_eq!(measure_needed_s(100.0, 3600.0, 50.0), 100.0);
        // A rate at the target: capped.
        assert_eq!(measure_needed_s(1.0 / 3600.0, 3600.0, 1.0), 3.6e6);
    }
}
