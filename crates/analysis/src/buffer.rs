//! Time to buffer underrun (seed 002 §5.1) and buffer sizing (seed 003).
//!
//! A consumer with `n` buffers of length `t` that needs `c` of compute per
//! buffer survives a wake-up late by up to the slack (n−1)·t − c; a later
//! wake-up underruns. With one wake-up per service period `s` (normally
//! `t`), the failure rate is P(latency > slack) / s and the mean time to
//! failure its inverse.

use punctual_units::Nanos;
use serde::Serialize;

use crate::forecast::{Estimate, ProbEstimate, TailModel};

/// Compute per buffer: a time, or a fraction of the buffer length.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Compute {
    Time(Nanos),
    Fraction(f64),
}

impl Compute {
    pub fn at(&self, buffer_len: Nanos) -> Nanos {
        match *self {
            Compute::Time(c) => c,
            Compute::Fraction(f) => Nanos((buffer_len.0 as f64 * f).round() as u64),
        }
    }

    /// `0.5ms` is a time; `25%` or `0.25` is a fraction of the buffer.
    pub fn parse(text: &str) -> Result<Compute, String> {
        let t = text.trim();
        if t.ends_with('%') || t.parse::<f64>().is_ok() {
            let f = punctual_units::parse_ratio(t)?;
            if !(0.0..1.0).contains(&f) {
                return Err(format!(
                    "compute '{text}' as a fraction of the buffer must be at least 0 and below 1"
                ));
            }
            return Ok(Compute::Fraction(f));
        }
        punctual_units::parse_duration(t)
            .map(Compute::Time)
            .map_err(|e| format!("compute {e} (or give a fraction such as 25%)"))
    }
}

/// n buffers of length t with compute c, serviced once per `service`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Buffering {
    pub buffers: u32,
    pub buffer_len: Nanos,
    pub compute: Compute,
    /// Time between the consumer's wake-ups; `None` means one per buffer.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub service_period: Option<Nanos>,
}

impl Buffering {
    pub fn new(buffers: u32, buffer_len: Nanos, compute: Compute) -> Self {
        Buffering {
            buffers,
            buffer_len,
            compute,
            service_period: None,
        }
    }

    /// (n−1)·t − c, refusing buffers < 1, a zero length, and compute that
    /// leaves no slack, each with one sentence naming the values.
    pub fn slack(&self) -> Result<Nanos, String> {
        if self.buffers < 1 {
            return Err(format!("buffers {} is less than 1", self.buffers));
        }
        if self.buffer_len.is_zero() {
            return Err("buffer length is zero".to_string());
        }
        let c = self.compute.at(self.buffer_len);
        let tolerance = self.buffer_len * (self.buffers as u64 - 1);
        if c >= tolerance {
            return Err(format!(
                "compute {c} is not less than the buffering it must fit in, \
                 (n−1)·t = ({}−1)·{} = {tolerance}: there is no slack",
                self.buffers, self.buffer_len
            ));
        }
        Ok(tolerance - c)
    }

    pub fn service(&self) -> Nanos {
        self.service_period.unwrap_or(self.buffer_len)
    }

    /// Total buffering n·t.
    pub fn total(&self) -> Nanos {
        self.buffer_len * self.buffers as u64
    }

    pub fn label(&self) -> String {
        format!("{} × {}", self.buffers, self.buffer_len)
    }
}

/// Mean time to failure of one buffering on one series.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Mttf {
    pub buffering: Buffering,
    pub compute_ns: Nanos,
    pub slack_ns: Nanos,
    /// P(latency > slack) per wake-up.
    pub exceedance: ProbEstimate,
    pub wakeups_per_s: f64,
    /// Failures (underruns) per second: `exceedance.probability × wakeups_per_s`.
    pub exceedance_rate_per_s: f64,
    pub rate_ci_low_per_s: f64,
    pub rate_ci_high_per_s: f64,
    /// `None`: no failure observed or predicted (infinite).
    pub mttf_seconds: Option<f64>,
    pub mttf_ci_low_seconds: Option<f64>,
    pub mttf_ci_high_seconds: Option<f64>,
    pub failures_per_hour: f64,
    pub failures_per_day: f64,
    pub extrapolated: bool,
    pub formula: String,
    pub assumptions: Vec<String>,
    /// Extra failure probability per wake-up from stalls that hit while
    /// the consumer computes (not in seed 002's formula): a stall longer
    /// than the slack that starts during the c of compute also makes the
    /// buffer late. With stalls arriving at random, its probability is
    /// c × the latency density at the slack, estimated from the histogram
    /// as P(slack − c/2 < latency ≤ slack + c/2).
    pub compute_exposure_probability: f64,
    /// MTTF counting both ways of failing: s / (P + exposure).
    pub mttf_compute_aware_seconds: Option<f64>,
}

fn inv(x: f64) -> Option<f64> {
    (x > 0.0 && x.is_finite()).then(|| 1.0 / x)
}

/// MTTF of `b` on the series modelled by `m`.
pub fn mttf(m: &TailModel, b: &Buffering) -> Result<Mttf, String> {
    let slack = b.slack()?;
    let c = b.compute.at(b.buffer_len);
    let p = m.prob_above(slack);
    let service = b.service();
    let per_s = 1e9 / service.0 as f64;
    let rate = p.probability * per_s;
    let mut assumptions = vec![
        "one consumer wake-up per service period, each late by an independent draw from \
         the record's distribution (late wake-ups uniformly spread over time, as seed 002 \
         assumes)"
            .to_string(),
        "a wake-up later than the slack costs exactly one underrun; the consumer then \
         resynchronizes"
            .to_string(),
        "exact for double buffering; for n > 2 it ignores the extra slack a \
         partly-refilled queue has after an earlier late wake-up, so it errs towards \
         more underruns"
            .to_string(),
    ];
    if m.sample_period_ns != service {
        assumptions.push(format!(
            "the record sampled every {} but this consumer wakes every {}: the per-wake-up \
             probability from the record is applied at {:.4}/s, so the rate is the record's \
             own exceedance rate × {:.4} (this assumes latency does not depend on the period)",
            m.sample_period_ns,
            service,
            per_s,
            m.sample_period_ns.0 as f64 / service.0 as f64
        ));
    }
    if p.extrapolated {
        assumptions.push(
            "fewer than 10 wake-ups this late were observed: the probability comes from the \
             generalized Pareto tail fitted above the threshold"
                .to_string(),
        );
    }
    let half = c.0 as f64 / 2.0;
    let n = m.tail.n.max(1) as f64;
    let exposure = if c.is_zero() {
        0.0
    } else {
        let lo = (slack.0 as f64 - half).max(0.0);
        let hi = slack.0 as f64 + half;
        m.tail
            .count_above(lo)
            .saturating_sub(m.tail.count_above(hi)) as f64
            / n
    };
    Ok(Mttf {
        compute_exposure_probability: exposure,
        mttf_compute_aware_seconds: inv((p.probability + exposure) * per_s),
        buffering: *b,
        compute_ns: c,
        slack_ns: slack,
        wakeups_per_s: per_s,
        exceedance_rate_per_s: rate,
        rate_ci_low_per_s: p.ci_low * per_s,
        rate_ci_high_per_s: p.ci_high * per_s,
        mttf_seconds: inv(rate),
        mttf_ci_low_seconds: inv(p.ci_high * per_s),
        mttf_ci_high_seconds: inv(p.ci_low * per_s),
        failures_per_hour: rate * 3600.0,
        failures_per_day: rate * 86_400.0,
        extrapolated: p.extrapolated,
        formula: format!(
            "slack = (n−1)·t − c = ({}−1)·{} − {} = {}; MTTF = s / P(latency > slack) = {} / {:.3e}",
            b.buffers, b.buffer_len, c, slack, service, p.probability
        ),
        exceedance: p,
        assumptions,
    })
}

/// One row of an MTTF-versus-buffering table.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SweepRow {
    pub buffers: u32,
    pub buffer_len_ns: Nanos,
    pub total_buffering_ns: Nanos,
    pub slack_ns: Nanos,
    pub probability: f64,
    pub mttf_seconds: Option<f64>,
    pub mttf_ci_low_seconds: Option<f64>,
    pub mttf_ci_high_seconds: Option<f64>,
    pub extrapolated: bool,
}

/// MTTF against total buffering (the data behind seed 002's Figures 6
/// and 7): `n` from 2 to `max_n` at the given length and compute.
pub fn sweep(m: &TailModel, base: &Buffering, max_n: u32) -> Vec<SweepRow> {
    (2..=max_n.max(2))
        .filter_map(|n| {
            let b = Buffering {
                buffers: n,
                ..*base
            };
            mttf(m, &b).ok().map(|r| SweepRow {
                buffers: n,
                buffer_len_ns: b.buffer_len,
                total_buffering_ns: b.total(),
                slack_ns: r.slack_ns,
                probability: r.exceedance.probability,
                mttf_seconds: r.mttf_seconds,
                mttf_ci_low_seconds: r.mttf_ci_low_seconds,
                mttf_ci_high_seconds: r.mttf_ci_high_seconds,
                extrapolated: r.extrapolated,
            })
        })
        .collect()
}

fn meets(r: &Mttf, target_s: f64) -> bool {
    r.mttf_seconds.is_none_or(|s| s >= target_s)
}

/// Least number of buffers (up to `max_n`) whose MTTF reaches `target_s`.
pub fn least_buffers(m: &TailModel, base: &Buffering, target_s: f64, max_n: u32) -> Option<Mttf> {
    (1..=max_n)
        .filter_map(|n| {
            mttf(
                m,
                &Buffering {
                    buffers: n,
                    ..*base
                },
            )
            .ok()
        })
        .find(|r| meets(r, target_s))
}

/// Least buffer length (µs resolution, up to 60 s) for `base.buffers`
/// buffers whose MTTF reaches `target_s`. MTTF grows with t (more slack,
/// fewer wake-ups), so a bisection finds it.
pub fn least_len(m: &TailModel, base: &Buffering, target_s: f64) -> Option<Mttf> {
    if base.buffers < 2 {
        return None;
    }
    let at = |us: u64| {
        let b = Buffering {
            buffer_len: Nanos::from_us(us),
            service_period: None,
            ..*base
        };
        mttf(m, &b).ok()
    };
    let ok = |us: u64| at(us).is_some_and(|r| meets(&r, target_s));
    let (mut lo, mut hi) = (1u64, 60_000_000u64);
    if !ok(hi) {
        return None;
    }
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if ok(mid) {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    at(lo)
}

/// Seed 003's rule for a packet stream: buffers = rate × longest service
/// gap, the gap taken at the target's rate of occurrence.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PacketSizing {
    pub rate_per_s: f64,
    pub target_seconds: f64,
    /// Longest service gap expected once per target span.
    pub gap: Estimate,
    pub buffers_needed: Option<u64>,
    pub buffers_ci_low: Option<u64>,
    pub buffers_ci_high: Option<u64>,
    /// With `--buffers`: the packet rate those buffers sustain over the gap.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sustainable_rate_per_s: Option<f64>,
    pub formula: String,
}

pub fn packet_sizing(
    m: &TailModel,
    rate_per_s: f64,
    target_s: f64,
    have_buffers: Option<u32>,
) -> PacketSizing {
    let lat = m.worst_per(target_s);
    let gap_of = |v: Option<Nanos>| v.map(|v| m.gap_for(v));
    let gap = Estimate {
        value_ns: gap_of(lat.value_ns),
        ci_low_ns: gap_of(lat.ci_low_ns),
        ci_high_ns: gap_of(lat.ci_high_ns),
        ..lat
    };
    // The epsilon keeps 65 500/s × 10 ms at 655, not 656 from rounding.
    let need = |g: Option<Nanos>| g.map(|g| (rate_per_s * g.as_secs_f64() - 1e-6).ceil() as u64);
    PacketSizing {
        rate_per_s,
        target_seconds: target_s,
        buffers_needed: need(gap.value_ns),
        buffers_ci_low: need(gap.ci_low_ns),
        buffers_ci_high: need(gap.ci_high_ns),
        sustainable_rate_per_s: have_buffers
            .zip(gap.value_ns)
            .filter(|(_, g)| !g.is_zero())
            .map(|(n, g)| n as f64 / g.as_secs_f64()),
        formula: format!(
            "buffers = rate × gap, gap = {} exceeded once per {} ({}); seed 003: 655 buffers / 10 ms = 65,500 packets/s",
            match m.metric {
                punctual_record::Metric::Latency | punctual_record::Metric::Response =>
                    "sample period + wake-up latency",
                _ => "the series' own gap",
            },
            crate::verdict::human_secs(target_s),
            if gap.extrapolated { "extrapolated" } else { "observed" }
        ),
        gap,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use punctual_record::{Metric, Recorder};

    /// A 1 ms timer where one wake-up in ten is late by 0.8 ms: for n = 2,
    /// t = 1 ms, c = 0.5 ms the slack is 0.5 ms, P = 0.1, MTTF = 10 ms.
    #[test]
    fn mttf_formula_on_a_synthetic_histogram() {
        let mut r = Recorder::new(Nanos(1000)).with_sample_period(Nanos::from_ms(1));
        for i in 0..100_000u64 {
            r.record(Nanos::from_us(if i % 10 == 0 { 800 } else { 5 }));
        }
        let s = r.to_series("cpu0.latency", Metric::Latency);
        let m = TailModel::new(&s, Nanos::ZERO).unwrap();
        let b = Buffering::new(2, Nanos::from_ms(1), Compute::Time(Nanos::from_us(500)));
        let x = mttf(&m, &b).unwrap();
        assert_eq!(x.slack_ns, Nanos::from_us(500));
        assert!(!x.extrapolated);
        assert!((x.exceedance.probability - 0.1).abs() < 1e-12);
        assert!((x.mttf_seconds.unwrap() - 0.010).abs() < 1e-9);
        assert!((x.failures_per_hour - 360_000.0).abs() < 1e-3);
        // No latency near 500 µs ± 250 µs: preemption during compute adds nothing.
        assert_eq!(x.compute_exposure_probability, 0.0);
        // Fraction compute gives the same slack.
        let bf = Buffering::new(2, Nanos::from_ms(1), Compute::Fraction(0.5));
        assert_eq!(mttf(&m, &bf).unwrap().slack_ns, Nanos::from_us(500));
        // A consumer waking every 2 ms: same probability, half the rate.
        let b2 = Buffering::new(2, Nanos::from_ms(2), Compute::Time(Nanos::from_us(1500)));
        let x2 = mttf(&m, &b2).unwrap();
        assert!((x2.mttf_seconds.unwrap() - 0.020).abs() < 1e-9);
        assert!(x2.assumptions.iter().any(|a| a.contains("× 0.5")));
        // Enough buffering: 3 × 1 ms, c = 0.5 ms → slack 1.5 ms > 0.8 ms.
        let b3 = Buffering::new(3, Nanos::from_ms(1), Compute::Time(Nanos::from_us(500)));
        let x3 = mttf(&m, &b3).unwrap();
        assert!(x3.exceedance.observed_count == 0);
        // Sizing finds 3 buffers for a 1 h target, and a length for 2.
        let least = least_buffers(&m, &b, 3600.0, 16).unwrap();
        assert_eq!(least.buffering.buffers, 3);
        let t = least_len(&m, &b, 3600.0).unwrap();
        assert!(t.slack_ns > Nanos::from_us(800), "{:?}", t.slack_ns);
        assert!(sweep(&m, &b, 4).len() == 3);
    }

    /// The injector case in closed form: a 1 ms burst every 10.37 ms gives
    /// wake-up latencies uniform on 0–1 ms for 1 in 10.37 wake-ups. For
    /// 2 × 1 ms with c = 0.5 ms: P(L > 0.5 ms) = 0.5/10.37 = 4.8 %
    /// (MTTF ≈ 21 ms), and bursts starting during the 0.5 ms of compute
    /// add as much again (compute-aware MTTF ≈ 10.4 ms).
    #[test]
    fn injector_closed_form() {
        let mut r = Recorder::new(Nanos(1000)).with_sample_period(Nanos::from_ms(1));
        let period = 10_370u64; // µs
        for i in 0..1_037_000u64 {
            // wake-up i at i ms; burst starts at k·10.37 ms and lasts 1 ms.
            let t = i * 1000;
            let since = t % period;
            let late = 1000u64.saturating_sub(since);
            r.record(Nanos::from_us(late + 2));
        }
        let s = r.to_series("cpu0.latency", Metric::Latency);
        let m = TailModel::new(&s, Nanos::ZERO).unwrap();
        let b = Buffering::new(2, Nanos::from_ms(1), Compute::Time(Nanos::from_us(500)));
        let x = mttf(&m, &b).unwrap();
        let p = x.exceedance.probability;
        assert!((p - 0.5 / 10.37).abs() < 0.003, "{p}");
        let mt = x.mttf_seconds.unwrap();
        assert!((mt - 0.0207).abs() < 0.0015, "{mt}");
        let ca = x.mttf_compute_aware_seconds.unwrap();
        assert!((ca - 0.0104).abs() < 0.001, "{ca}");
    }

    #[test]
    fn refuses_buffering_without_slack() {
        let b = Buffering::new(0, Nanos::from_ms(1), Compute::Fraction(0.0));
        assert!(b.slack().unwrap_err().contains("less than 1"));
        let b = Buffering::new(2, Nanos::from_ms(1), Compute::Time(Nanos::from_ms(1)));
        assert!(b.slack().unwrap_err().contains("no slack"));
        assert!(Buffering::new(1, Nanos::from_ms(1), Compute::Fraction(0.0))
            .slack()
            .is_err());
        assert!(Compute::parse("150%").is_err());
        assert_eq!(Compute::parse("25%").unwrap(), Compute::Fraction(0.25));
        assert_eq!(
            Compute::parse("0.5ms").unwrap(),
            Compute::Time(Nanos::from_us(500))
        );
        assert!(Compute::parse("soon").is_err());
    }

    /// Seed 003: a 10 ms gap and 65 500 packets/s need 655 buffers.
    #[test]
    fn packet_rule_reproduces_seed_003() {
        let mut r = Recorder::new(Nanos(1000)).with_sample_period(Nanos::from_ms(10));
        for _ in 0..100_000 {
            r.record(Nanos::from_ms(10));
        }
        let s = r.to_series("vm.gap", Metric::ServiceGap);
        let m = TailModel::new(&s, Nanos::ZERO).unwrap();
        let p = packet_sizing(&m, 65_500.0, 60.0, Some(2600));
        assert_eq!(p.gap.value_ns, Some(Nanos::from_ms(10)));
        assert_eq!(p.buffers_needed, Some(655));
        assert!((p.sustainable_rate_per_s.unwrap() - 260_000.0).abs() < 1.0);
    }
}
