//! Whether logged stalls come at a fixed period.
//!
//! A periodic interferer (a 1 ms burst every 10.37 ms) and Poisson stalls
//! with the same rate give the same latency histogram, but only the
//! Poisson ones ever put two stalls within one backlog. The spike log's
//! time stamps tell them apart: the gaps between successive logged stalls
//! of a periodic interferer sit on whole multiples of its period (the
//! probe misses some bursts, so multiples, not only the period), while
//! exponential gaps fall near those multiples only as often as the width
//! of the window around them allows.
//!
//! The log is length-biased (a probe sees a stall only when a wake-up
//! falls into it) and bounded, so the test uses only what survives both:
//! the gaps between the logged time stamps, each compared with the grid
//! of one candidate period, and the count of those on the grid compared
//! with what exponential gaps at the same mean would give.

/// Fewer gaps than this and the log cannot tell a period from chance.
pub const MIN_GAPS: usize = 20;
/// Standard deviations by which the gaps on the grid must exceed what
/// exponential gaps give. At most 3 × `MAX_DIVISOR` candidates are
/// tried, so under Poisson arrivals a false detection has a chance below
/// 12 × 3 × 10⁻⁷ (normal approximation of the binomial count).
pub const MIN_Z: f64 = 5.0;
/// Share of the gaps that must lie on the grid: the periodic part must
/// be most of what the log saw, or a periodic model would misdescribe
/// the rest.
pub const MIN_ON_GRID: f64 = 0.5;
/// Candidate periods are the lower quartile, the median and the upper
/// quartile of the gaps, each divided by 1 … MAX_DIVISOR (the probe may
/// see only every second or third burst).
///
/// Why three quantiles and not the median alone: when the probe sees
/// about half the bursts, half the gaps are one period and most of the
/// rest two, so the median sits on the boundary between those clusters,
/// and there it picks whichever stray gap lies between them (a burst gap
/// split by a stall of another source). The quartiles then lie inside a
/// cluster. Each candidate still has to pass the same test against
/// exponential gaps, so more candidates only widen the chance of a false
/// detection by their number.
pub const MAX_DIVISOR: usize = 4;

/// A period found in a log of stall times.
#[derive(Clone, Debug, PartialEq)]
pub struct Periodicity {
    /// The period, refined by least squares over the gaps on its grid.
    pub period_ns: f64,
    /// Gaps between successive logged stalls.
    pub gaps: usize,
    /// How many lie within the tolerance of a whole multiple of the period.
    pub on_grid: usize,
    /// How many exponential gaps with the same mean would.
    pub expected_on_grid: f64,
    /// (on_grid − expected) in standard deviations of the binomial count.
    pub z: f64,
}

/// Probability that an exponential gap of mean `mean` falls within `tol`
/// of k·`period` for some k ≥ 1.
fn exponential_on_grid(mean: f64, period: f64, tol: f64) -> f64 {
    let cdf = |x: f64| 1.0 - (-x.max(0.0) / mean).exp();
    let mut p = 0.0;
    let mut k = 1.0;
    loop {
        let lo = k * period - tol;
        if lo / mean > 50.0 {
            break;
        }
        p += cdf(k * period + tol) - cdf(lo);
        k += 1.0;
    }
    p.min(1.0)
}

/// Gaps within `tol` of a whole multiple (≥ 1) of `period`, and the
/// least-squares period through them.
fn on_grid(gaps: &[f64], period: f64, tol: f64) -> (usize, f64) {
    let (mut hits, mut sxk, mut skk) = (0usize, 0.0, 0.0);
    for &g in gaps {
        let k = (g / period).round();
        if k >= 1.0 && (g - k * period).abs() <= tol {
            hits += 1;
            sxk += g * k;
            skk += k * k;
        }
    }
    (hits, if skk > 0.0 { sxk / skk } else { period })
}

/// The period of `times_ns` (logged stall time stamps, any order), if
/// their gaps sit on one: `tolerance_ns` is how far a stall's logged time
/// can be from its true start (one probe interval: the probe sees a stall
/// at the first wake-up that falls into it).
///
/// A candidate must be at least 4 tolerances long, or a window of ± one
/// tolerance around its multiples covers half of all gaps whatever they
/// are, and the test could not tell.
pub fn detect(times_ns: &[u64], tolerance_ns: f64) -> Option<Periodicity> {
    let mut t: Vec<u64> = times_ns.to_vec();
    t.sort_unstable();
    let gaps: Vec<f64> = t.windows(2).map(|w| (w[1] - w[0]) as f64).collect();
    let n = gaps.len();
    if n < MIN_GAPS || tolerance_ns <= 0.0 {
        return None;
    }
    let mean = gaps.iter().sum::<f64>() / n as f64;
    let mut sorted = gaps.clone();
    sorted.sort_by(f64::total_cmp);
    let quantiles = [sorted[n / 4], sorted[n / 2], sorted[3 * n / 4]];
    let mut best: Option<Periodicity> = None;
    for (q, d) in quantiles
        .iter()
        .flat_map(|&q| (1..=MAX_DIVISOR).map(move |d| (q, d)))
    {
        let candidate = q / d as f64;
        if candidate < 4.0 * tolerance_ns {
            continue;
        }
        let (_, refined) = on_grid(&gaps, candidate, tolerance_ns);
        let (hits, period) = on_grid(&gaps, refined, tolerance_ns);
        let p0 = exponential_on_grid(mean, period, tolerance_ns);
        let expected = n as f64 * p0;
        let sd = (expected * (1.0 - p0)).sqrt().max(1e-9);
        let z = (hits as f64 - expected) / sd;
        if best.as_ref().is_none_or(|b| z > b.z) {
            best = Some(Periodicity {
                period_ns: period,
                gaps: n,
                on_grid: hits,
                expected_on_grid: expected,
                z,
            });
        }
    }
    best.filter(|b| b.z >= MIN_Z && b.on_grid as f64 >= MIN_ON_GRID * n as f64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::SplitMix64;

    /// A 1 ms probe's log of a 10.37 ms interferer: each burst logged at
    /// the first wake-up inside it (up to 1 ms late), one in three missed
    /// (length bias), plus a few Poisson stalls.
    #[test]
    fn periodic_log_is_detected() {
        let mut rng = SplitMix64::new(7);
        let period = 10_370_000.0;
        let mut times = Vec::new();
        for k in 0..600u64 {
            if rng.uniform_open() < 1.0 / 3.0 {
                continue;
            }
            let at = k as f64 * period + rng.uniform_open() * 1e6;
            times.push(at as u64);
        }
        for _ in 0..5 {
            times.push((rng.uniform_open() * 600.0 * period) as u64);
        }
        let p = detect(&times, 1e6).expect("periodic log detected");
        assert!((p.period_ns - period).abs() < 0.02 * period, "{p:?}");
        assert!(p.z > MIN_Z && p.on_grid > p.gaps / 2, "{p:?}");
    }

    /// A 7.3 ms interferer whose bursts the log holds about half the
    /// time, plus stalls of another source between them: half the gaps
    /// are one period and most of the rest two, so the median falls on
    /// the boundary between those clusters, on a gap split by the other
    /// source, off the grid. The period is still found (from a quartile).
    #[test]
    fn a_median_between_grid_clusters_still_finds_the_period() {
        let period = 7_300_000.0;
        let tol = 1e6;
        let mut found_off_grid = 0;
        for seed in 1..=40 {
            let mut rng = SplitMix64::new(seed);
            let mut times = Vec::new();
            for k in 0..300u64 {
                if rng.uniform_open() < 0.5 {
                    times.push((k as f64 * period + rng.uniform_open() * 2e5) as u64);
                }
            }
            for _ in 0..12 {
                times.push((rng.uniform_open() * 300.0 * period) as u64);
            }
            times.sort_unstable();
            let mut gaps: Vec<f64> = times.windows(2).map(|w| (w[1] - w[0]) as f64).collect();
            gaps.sort_by(f64::total_cmp);
            let median = gaps[gaps.len() / 2];
            let k = (median / period).round().max(1.0);
            if (median - k * period).abs() <= tol {
                continue;
            }
            found_off_grid += 1;
            let p = detect(&times, tol).expect("periodic log detected");
            assert!(
                (p.period_ns - period).abs() < 0.02 * period,
                "seed {seed}: {p:?}"
            );
        }
        assert!(found_off_grid > 0, "no seed put the median off the grid");
    }

    /// Exponential gaps of the same mean are not periodic, at any seed.
    #[test]
    fn poisson_log_is_not_detected() {
        for seed in 1..=50 {
            let mut rng = SplitMix64::new(seed);
            let mut at = 0.0;
            let times: Vec<u64> = (0..1000)
                .map(|_| {
                    at += rng.exp1() * 15_000_000.0;
                    at as u64
                })
                .collect();
            assert_eq!(detect(&times, 1e6), None, "seed {seed}");
        }
    }

    /// Too few gaps, or a tolerance as wide as the gaps: no claim.
    #[test]
    fn sparse_or_unresolvable_logs_are_not_periodic() {
        let few: Vec<u64> = (0..10).map(|k| k * 10_000_000).collect();
        assert_eq!(detect(&few, 1e6), None);
        let many: Vec<u64> = (0..100).map(|k| k * 2_000_000).collect();
        assert_eq!(detect(&many, 1e6), None);
    }
}
