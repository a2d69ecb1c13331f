//! Verdicts: for each workload profile, does this machine meet the MTTF
//! the work needs, and if not, what buffering would? A number in place of
//! LatencyMon's "suitable for real-time audio".

use punctual_record::{Metric, Record};
use punctual_units::Nanos;
use serde::Serialize;

use crate::buffer::{least_buffers, mttf, Buffering, Mttf};
use crate::forecast::{GapStalls, TailModel};
use crate::profiles::Profile;

/// The outcome for one profile on one record.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Verdict {
    pub profile: String,
    /// The series that decided it: the one with the shortest MTTF.
    pub series: String,
    pub buffering: Buffering,
    pub slack_ns: Nanos,
    pub target_seconds: f64,
    /// `None`: no wake-up that late observed or predicted.
    pub mttf_seconds: Option<f64>,
    pub mttf_ci_low_seconds: Option<f64>,
    pub mttf_ci_high_seconds: Option<f64>,
    pub extrapolated: bool,
    pub meets_target: bool,
    /// MTTF / target (> 1 meets it); `None` when the MTTF is unbounded.
    pub margin_ratio: Option<f64>,
    /// What would meet the target, when it is missed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
    /// The sentence a person reads.
    pub message: String,
}

/// The series a verdict is read from: latency series when there are any
/// (what a buffered consumer suffers), otherwise every non-empty series.
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

fn tail_models(record: &Record) -> Vec<TailModel> {
    let usable = |m: Metric| matches!(m, Metric::Latency | Metric::Response);
    let pick: Vec<_> = if record
        .series
        .iter()
        .any(|s| usable(s.metric) && s.count > 0)
    {
        record.series.iter().filter(|s| usable(s.metric)).collect()
    } else {
        record.series.iter().collect()
    };
    pick.into_iter()
        .filter_map(|s| TailModel::new(s, record.series_duration(s)).ok())
        .collect()
}

/// Verdicts for every profile, from the series of `record` with the
/// shortest MTTF for each. Empty when the record has no usable series.
///
/// ```
/// use punctual_analysis::{profiles, render_verdicts, verdicts};
/// use punctual_record::{Metric, Platform, Record, Recorder, Source};
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
/// assert!(!audio.meets_target); // 3 ms late every second: underruns every ~1 s
/// let modem = v.iter().find(|v| v.profile == "soft modem 16 ms × 6").unwrap();
/// assert!(modem.meets_target);
/// println!("{}", render_verdicts(&v));
/// ```
pub fn verdicts(record: &Record, profiles: &[Profile]) -> Vec<Verdict> {
    verdicts_for(&models(record), profiles)
}

/// As [`verdicts`], over models already built (so a caller that also
/// prints forecasts fits each tail once).
pub fn verdicts_for(models: &[TailModel], profiles: &[Profile]) -> Vec<Verdict> {
    if models.is_empty() {
        return Vec::new();
    }
    profiles
        .iter()
        .filter_map(|p| verdict_one(models, profiles, p))
        .collect()
}

fn worst<'a>(models: &'a [TailModel], b: &Buffering) -> Option<(&'a TailModel, Mttf)> {
    models
        .iter()
        .filter_map(|m| mttf(m, b).ok().map(|r| (m, r)))
        .min_by(|a, b| {
            let k = |r: &Mttf| r.mttf_seconds.unwrap_or(f64::INFINITY);
            k(&a.1).total_cmp(&k(&b.1))
        })
}

fn meets(r: &Mttf, target_s: f64) -> bool {
    r.mttf_seconds.is_none_or(|s| s >= target_s)
}

fn verdict_one(models: &[TailModel], all: &[Profile], p: &Profile) -> Option<Verdict> {
    let (m, r) = worst(models, &p.buffering)?;
    let target_s = p.target.as_secs_f64();
    let ok = meets(&r, target_s);
    let margin = r.mttf_seconds.map(|s| s / target_s);
    let ci = match (r.mttf_ci_low_seconds, r.mttf_ci_high_seconds) {
        (Some(lo), hi) => format!(
            "; 95% CI {}–{}",
            human_secs(lo),
            hi.map(human_secs).unwrap_or_else(|| "∞".to_string())
        ),
        _ => String::new(),
    };
    let label = if r.extrapolated { ", extrapolated" } else { "" };
    let mut fix = None;
    let message = if ok {
        match r.mttf_seconds {
            Some(s) => format!(
                "{}: meets its target (underrun every {}, {} the {} target{label}{ci})",
                p.name,
                human_secs(s),
                ratio_text(s / target_s),
                human_secs(target_s)
            ),
            None => format!(
                "{}: meets its target (no wake-up later than the {} slack observed or predicted)",
                p.name, r.slack_ns
            ),
        }
    } else {
        fix = Some(fix_for(models, all, p, target_s));
        format!(
            "{}: expect an underrun every {} (target {}{label}{ci}): {}",
            p.name,
            human_secs(r.mttf_seconds.unwrap_or(f64::INFINITY)),
            human_secs(target_s),
            fix.as_deref().unwrap_or("")
        )
    };
    Some(Verdict {
        profile: p.name.clone(),
        series: m.name.clone(),
        buffering: p.buffering,
        slack_ns: r.slack_ns,
        target_seconds: target_s,
        mttf_seconds: r.mttf_seconds,
        mttf_ci_low_seconds: r.mttf_ci_low_seconds,
        mttf_ci_high_seconds: r.mttf_ci_high_seconds,
        extrapolated: r.extrapolated,
        meets_target: ok,
        margin_ratio: margin,
        fix,
        message,
    })
}

/// The smallest fix: first a profile of the same family with more
/// latency tolerance that meets the target, then more buffers of the same
/// length.
fn fix_for(models: &[TailModel], all: &[Profile], p: &Profile, target_s: f64) -> String {
    if let Some(fam) = &p.family {
        let mut cands: Vec<&Profile> = all
            .iter()
            .filter(|o| o.family.as_ref() == Some(fam) && o.name != p.name)
            .filter(|o| o.buffering.slack().ok() > p.buffering.slack().ok())
            .collect();
        cands.sort_by_key(|o| (o.buffering.total(), o.buffering.buffers));
        for c in cands {
            if worst(models, &c.buffering).is_some_and(|(_, r)| meets(&r, target_s)) {
                return format!("needs {}", c.size);
            }
        }
    }
    let max_n = (p.buffering.buffers * 4).max(64);
    let best = models
        .iter()
        .map(|m| least_buffers(m, &p.buffering, target_s, max_n).map(|r| r.buffering.buffers))
        .try_fold(0u32, |acc, n| n.map(|n| acc.max(n)));
    match best {
        Some(n) if n > p.buffering.buffers => {
            format!("needs {n} × {} buffers", p.buffering.buffer_len)
        }
        _ => format!(
            "no buffering up to {max_n} × {} reaches it here: find the cause of the long \
             latencies (punctual cause) or give the work a reservation",
            p.buffering.buffer_len
        ),
    }
}

/// Seconds in the unit a person would say: 850 ms, 4 min, 3.2 h, 12 d.
pub fn human_secs(s: f64) -> String {
    if !s.is_finite() {
        return "never".to_string();
    }
    if s > 1000.0 * 365.25 * 86_400.0 {
        return "> 1000 years".to_string();
    }
    let (v, unit) = if s < 1e-3 {
        (s * 1e6, "µs")
    } else if s < 1.0 {
        (s * 1e3, "ms")
    } else if s < 120.0 {
        (s, "s")
    } else if s < 7200.0 {
        (s / 60.0, "min")
    } else if s < 2.0 * 86_400.0 {
        (s / 3600.0, "h")
    } else if s < 365.0 * 86_400.0 {
        (s / 86_400.0, "d")
    } else {
        (s / (365.25 * 86_400.0), "years")
    };
    if v >= 10.0 || (v - v.round()).abs() < 0.05 {
        format!("{v:.0} {unit}")
    } else {
        format!("{v:.1} {unit}")
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

/// The verdicts as terminal lines: a mark, then the sentence.
pub fn render_verdicts(v: &[Verdict]) -> String {
    let mut out = String::new();
    for x in v {
        let mark = if x.meets_target { "ok  " } else { "MISS" };
        out.push_str(&format!("  {mark} {}\n", x.message));
    }
    out
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
}
