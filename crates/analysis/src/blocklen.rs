//! How many consecutive observations a block bootstrap should resample
//! together: Politis & White's automatic rule (2004), with the correction
//! of Patton, Politis & White (2009) for the circular block bootstrap.
//!
//! A block bootstrap keeps the dependence within a block and loses it
//! between blocks. Blocks too short understate the variance of a mean of
//! dependent data (a stretch of bad windows is broken up and averaged
//! away); blocks too long leave few blocks, and the replicates then repeat
//! the same handful of stretches. The rule picks the length that minimises
//! the bootstrap variance estimator's mean squared error, from the series'
//! own autocovariances: b = (2 G² / D)^(1/3) · n^(1/3), where G weighs the
//! autocovariances by their lag and D is a multiple of the squared
//! long-run variance (4/3 of it for circular blocks). Both sums use a
//! flat-top lag window whose width comes from the first lag after which
//! the sample autocorrelations stay insignificant. Independent data give a
//! length near 1 (G near 0); slowly decaying dependence a long one.
//!
//! The numbers follow Patton's reference implementation
//! (`opt_block_length_REV_dec07.m`): K_N = max(5, ⌈√log₁₀ n⌉) consecutive
//! autocorrelations under 2·√(log₁₀ n / n) end the dependence, the window
//! spans at most ⌈√n⌉ + K_N lags, and the length is capped at
//! ⌈min(3√n, n/3)⌉.

/// The circular block bootstrap's optimal block length for `x`, in
/// observations (not rounded; at least 1). A constant series, or one
/// whose estimated long-run variance is not positive, gives 1: there is
/// no dependence the estimate can use.
pub fn circular_block_length(x: &[f64]) -> f64 {
    let n = x.len();
    if n < 4 {
        return 1.0;
    }
    let nf = n as f64;
    let mean = x.iter().sum::<f64>() / nf;
    let e: Vec<f64> = x.iter().map(|v| v - mean).collect();
    let k_n = (nf.log10().sqrt().ceil() as usize).max(5);
    let m_max = ((nf.sqrt().ceil() as usize) + k_n).min(n - 1);
    // Autocovariances R(0..=m_max), divided by n as in the estimator.
    let acv: Vec<f64> = (0..=m_max)
        .map(|k| {
            e[..n - k]
                .iter()
                .zip(&e[k..])
                .map(|(a, b)| a * b)
                .sum::<f64>()
                / nf
        })
        .collect();
    if acv[0] <= 0.0 || !acv[0].is_finite() {
        return 1.0;
    }
    let critical = 2.0 * (nf.log10() / nf).sqrt();
    let insignificant = |lag: usize| (acv[lag] / acv[0]).abs() < critical;
    // The first lag m from which K_N autocorrelations in a row are
    // insignificant; the window spans twice that.
    let m_hat = (1..=m_max.saturating_sub(k_n) + 1)
        .find(|&m| (m..m + k_n).all(|lag| lag > m_max || insignificant(lag)));
    let width = m_hat.map_or(m_max, |m| (2 * m).min(m_max));
    let (mut g, mut long_run) = (0.0, acv[0]);
    for (k, r) in acv.iter().enumerate().take(width + 1).skip(1) {
        let t = k as f64 / width as f64;
        // Flat-top window: 1 up to half the width, then down to 0.
        let lambda = if t < 0.5 { 1.0 } else { 2.0 * (1.0 - t) };
        // Both signs of the lag.
        g += 2.0 * lambda * k as f64 * r;
        long_run += 2.0 * lambda * r;
    }
    if long_run <= 0.0 || !long_run.is_finite() {
        return 1.0;
    }
    let d_cb = 4.0 / 3.0 * long_run * long_run;
    let b = (2.0 * g * g / d_cb).cbrt() * nf.cbrt();
    let cap = (3.0 * nf.sqrt()).min(nf / 3.0).ceil();
    b.clamp(1.0, cap.max(1.0))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::SplitMix64;

    /// An AR(1) series x_t = φ x_{t−1} + ε_t of length `n`.
    fn ar1(phi: f64, n: usize, seed: u64) -> Vec<f64> {
        let mut rng = SplitMix64::new(seed);
        let mut x = 0.0;
        (0..n)
            .map(|_| {
                x = phi * x + rng.normal();
                x
            })
            .collect()
    }

    fn median_length(phi: f64, n: usize) -> f64 {
        let mut v: Vec<f64> = (0..21)
            .map(|s| circular_block_length(&ar1(phi, n, 10 + s)))
            .collect();
        v.sort_by(|a, b| a.total_cmp(b));
        v[10]
    }

    #[test]
    fn the_length_grows_with_the_dependence() {
        let lengths: Vec<f64> = [0.0, 0.3, 0.6, 0.85]
            .iter()
            .map(|&phi| median_length(phi, 1000))
            .collect();
        assert!(lengths[0] < 2.0, "{lengths:?}");
        for w in lengths.windows(2) {
            assert!(w[1] > w[0], "{lengths:?}");
        }
    }

    #[test]
    fn it_approaches_the_ar1_optimum() {
        // For AR(1), R(k) ∝ φ^|k|, so G / g(0) = 2φ / ((1−φ)(1+φ)) and
        // b = (1.5 (G / g(0))²)^(1/3) · n^(1/3): about 22 here.
        let (phi, n) = (0.6_f64, 2000);
        let ratio = 2.0 * phi / ((1.0 - phi) * (1.0 + phi));
        let want = (1.5 * ratio * ratio).cbrt() * (n as f64).cbrt();
        let got = median_length(phi, n);
        assert!(got > want / 1.5 && got < want * 1.5, "{got} against {want}");
    }

    #[test]
    fn degenerate_series_give_one() {
        assert_eq!(circular_block_length(&[]), 1.0);
        assert_eq!(circular_block_length(&[3.0; 50]), 1.0);
        let mut x = vec![0.0; 100];
        x[40] = 1.0;
        assert!(circular_block_length(&x) >= 1.0);
    }

    #[test]
    fn the_cap_holds() {
        // A trend: dependence at every lag.
        let x: Vec<f64> = (0..100).map(|i| i as f64).collect();
        assert!(circular_block_length(&x) <= 30.0);
    }
}
