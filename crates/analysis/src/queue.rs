//! The buffered consumer as a queue: a Lindley recursion evaluated
//! exactly as a Markov chain over its discretized backlog.
//!
//! Seed 002's formula (an underrun whenever one wake-up is later than the
//! slack (n−1)·t − c) treats wake-ups as independent and the compute as
//! untouchable. Validation on a real consumer showed both matter: a thread
//! that finishes late starts the next buffer late (a backlog), and a
//! thread can be kept off the CPU *while* it computes, not only when it
//! wakes. The consumer here is
//!
//! ```text
//! start_k  = max(k·t + L_k, finish_{k−1})
//! finish_k = start_k + c + S_k
//! underrun when finish_k > (k + n − 1)·t; the consumer then skips to the
//! next period boundary with the ring refilled (the backlog is gone).
//! ```
//!
//! With D_k = finish_k − k·t, D_{k+1} = max(L, D_k − t) + c + S, a Markov
//! chain on D ∈ [0, (n−1)·t] whose stationary underrun probability per
//! wake-up this module computes deterministically (no random numbers).
//!
//! L is the record's own latency distribution. S, the time stolen while
//! computing, comes from the same record through the residual-life
//! relation: if stalls (intervals when the CPU is taken from the thread)
//! arrive at rate λ with lengths G, a wake-up at a random instant falls
//! into one with its remaining part as latency, so the latency density
//! is f_L(b + y) = λ·P(G > y) for stall lengths y beyond the wake-up
//! path's own latency b. The derivative of the record's exceedance curve
//! is therefore the rate of stalls longer than y. A compute of c is hit by
//! a Poisson(λ·c) number of them, each adding its full length. Where this
//! cannot hold, and what it ignores, is listed in [`assumptions`] and in
//! docs/forecast.md.

use punctual_units::Nanos;
use serde::Serialize;

use crate::buffer::Buffering;
use crate::tail::Tail;

/// Grid cells across (n−1)·t (but at least `MIN_CELLS_PER_T` per t): the
/// chain costs O(cells²) per step, and 192 cells keep every rounding (up,
/// so towards more underruns) under 0.6 % of the buffering.
pub const MAX_CELLS: u64 = 192;
/// Stop iterating once the distribution moves less than this (L1).
pub const TOLERANCE: f64 = 1e-13;
/// Iteration cap; reached only near or above full utilization, where the
/// chain mixes slowly (said in the result).
pub const MAX_ITERATIONS: u32 = 4000;
const LAZY_AFTER: u32 = 200;
/// Cells per buffer length at least (see `forecast_with`).
pub const MIN_CELLS_PER_T: u64 = 16;
/// Largest chain; each step costs cells², so the iteration cap shrinks
/// with it (`ITERATION_BUDGET`).
pub const MAX_BACKLOG_CELLS: u64 = 1024;
const ITERATION_BUDGET: f64 = 2.0e8;

/// The stall process read off a latency record.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct StallModel {
    /// Median latency: what the wake-up path costs without a stall.
    pub base_ns: Nanos,
    /// Latencies from here up count as stalls: beyond the median by more
    /// than twice the central spread p90 − p10 of the wake-up path (and at
    /// least twice the median). Below that the distribution is the wake-up
    /// path itself, which on a VM has a long shoulder; an increasing or
    /// steeply falling body cannot be stall residuals, and pooling it into
    /// the first stall segment would invent thousands of short stalls per
    /// second. A higher threshold only drops stalls shorter than it: the
    /// rate of longer ones is read from the same density.
    pub threshold_ns: Nanos,
    /// Stalls per second at least `threshold − base` long.
    pub rate_per_s: f64,
    /// Mean stall length.
    pub mean_ns: f64,
    /// Fraction of time the CPU is taken by such stalls (λ·E[G]).
    pub time_fraction: f64,
    /// (length, share of stalls), ascending: the vertices of the
    /// least concave majorant of the latency CDF.
    #[serde(skip)]
    pub lengths: Vec<(f64, f64)>,
}

impl StallModel {
    /// The stall process behind a latency tail. The density is the
    /// Grenander estimate (the slope of the least concave majorant of the
    /// empirical CDF above the threshold): the maximum-likelihood
    /// non-increasing density, which is exactly the shape the
    /// residual-life relation allows, and which needs no bin width.
    pub fn from_tail(tail: &Tail) -> StallModel {
        let n = tail.n.max(1) as f64;
        let base = tail.value_at_rank(tail.n - tail.n / 2);
        let p90 = tail.value_at_rank((tail.n / 10).max(1));
        let p10 = tail.value_at_rank(tail.n - tail.n / 10);
        let spread = p90.0.saturating_sub(p10.0);
        let threshold = Nanos((base.0 + 2 * spread).max(base.0 * 2).max(tail.bucket_ns));
        // Survival points (x, P(L > x)) from the threshold to the maximum.
        let mut pts: Vec<(f64, f64)> = vec![(
            threshold.0 as f64,
            tail.count_above(threshold.0 as f64) as f64 / n,
        )];
        for &(lo, _) in tail.buckets() {
            let edge = (lo + tail.bucket_ns).min(tail.max.0.max(lo + 1));
            if (edge as f64) <= pts[pts.len() - 1].0 {
                continue;
            }
            pts.push((edge as f64, tail.count_above(edge as f64) as f64 / n));
        }
        let top = tail.max.0 as f64;
        if pts[pts.len() - 1].0 < top {
            pts.push((top, 0.0));
        }
        if let Some(last) = pts.last_mut() {
            last.1 = 0.0;
        }
        // Greatest convex minorant of the survival function.
        let mut hull: Vec<(f64, f64)> = Vec::new();
        for p in pts {
            while hull.len() >= 2 {
                let (a, b) = (hull[hull.len() - 2], hull[hull.len() - 1]);
                // Drop b if it lies above the chord a→p.
                let cross = (b.0 - a.0) * (p.1 - a.1) - (b.1 - a.1) * (p.0 - a.0);
                if cross <= 0.0 {
                    hull.pop();
                } else {
                    break;
                }
            }
            hull.push(p);
        }
        // Slopes (stall rate density per ns), non-increasing by convexity.
        let slopes: Vec<f64> = hull
            .windows(2)
            .map(|w| ((w[0].1 - w[1].1) / (w[1].0 - w[0].0)).max(0.0))
            .collect();
        let lambda_per_ns = slopes.first().copied().unwrap_or(0.0);
        let mut lengths = Vec::new();
        if lambda_per_ns > 0.0 {
            for (i, v) in hull.iter().enumerate().skip(1) {
                let before = slopes[i - 1];
                let after = slopes.get(i).copied().unwrap_or(0.0);
                let share = (before - after) / lambda_per_ns;
                if share > 0.0 {
                    lengths.push((v.0 - base.0 as f64, share));
                }
            }
        }
        let mean_ns: f64 = lengths.iter().map(|(l, s)| l * s).sum();
        StallModel {
            base_ns: base,
            threshold_ns: threshold,
            rate_per_s: lambda_per_ns * 1e9,
            mean_ns,
            time_fraction: lambda_per_ns * mean_ns,
            lengths,
        }
    }
}

/// The chain's answer for one buffering.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct QueueForecast {
    /// Underrun probability per consumer step (wake-up).
    pub underrun_probability: f64,
    /// Underruns per second: each underrun also costs the periods the
    /// consumer skips to resynchronize (at least n−1 more).
    pub rate_per_s: f64,
    pub grid_ns: Nanos,
    pub iterations: u32,
    pub converged: bool,
    /// (c + E[S]) / t: at or above 1 the backlog grows without bound.
    pub utilization_ratio: f64,
    /// Mean time stolen during one compute.
    pub stall_mean_ns: f64,
    /// False with very many buffers (the chain would exceed
    /// `MAX_BACKLOG_CELLS`): then each wake-up is judged alone.
    pub backlog_modelled: bool,
    pub stalls: StallModel,
}

/// Cells needed to hold `v`, rounded up (a hair of tolerance keeps exact
/// multiples of the grid exact).
fn cells(v: f64, grid: f64, cap: usize) -> usize {
    ((v / grid - 1e-9).ceil().max(0.0) as usize).min(cap)
}

/// Fine cells × distinct stall lengths one compound distribution may cost
/// (Panjer's recursion is their product): keeps a forecast with a sweep,
/// sizing searches and 26 verdicts well under a second.
const PANJER_WORK: usize = 4_000_000;

/// Compound Poisson distribution of the stolen time over a compute of
/// `c_ns`, on `cap + 1` cells of `grid` (the last holds everything
/// beyond), by Panjer's recursion.
///
/// The recursion runs on a grid fine enough that each stall keeps its own
/// length (down to a quarter of the shortest), and only the total is
/// rounded up to the chain's grid. Rounding every stall up to a whole
/// chain cell instead made a long buffer (cells of milliseconds) charge
/// each 65 µs stall a full cell: at t = 10 s the model called 99% of
/// wake-ups underruns.
fn stolen_pmf(st: &StallModel, c_ns: f64, grid: f64, cap: usize) -> Vec<f64> {
    let mut out = vec![0.0; cap + 1];
    // Mean number of stalls; beyond ~700 exp() underflows, and a compute
    // hit by hundreds of stalls is overloaded anyway.
    let mu = (st.rate_per_s * c_ns / 1e9).min(700.0);
    if mu <= 0.0 || st.lengths.is_empty() {
        out[0] = 1.0;
        return out;
    }
    let shortest = st
        .lengths
        .iter()
        .map(|&(len, _)| len)
        .fold(f64::INFINITY, f64::min)
        .max(1.0);
    let distinct = st.lengths.len().max(1);
    let per_cell_wanted = (grid / (shortest / 4.0)).ceil().max(1.0) as usize;
    let per_cell_budget = (PANJER_WORK / distinct / cap.max(1)).max(1);
    let m = per_cell_wanted.min(per_cell_budget);
    let h = grid / m as f64;
    let kmax = cap * m;
    // Sparse jump distribution on the fine grid (merged by cell).
    let mut g: Vec<(usize, f64)> = Vec::with_capacity(distinct);
    for &(len, share) in &st.lengths {
        let j = cells(len, h, kmax).max(1);
        match g.iter_mut().find(|(k, _)| *k == j) {
            Some(e) => e.1 += share,
            None => g.push((j, share)),
        }
    }
    let mut fine = vec![0.0; kmax];
    fine[0] = (-mu).exp();
    for k in 1..kmax {
        let mut s = 0.0;
        for &(j, gj) in &g {
            if j <= k {
                s += j as f64 * gj * fine[k - j];
            }
        }
        fine[k] = mu / k as f64 * s;
    }
    // Fine cell k holds totals in ((k−1)·h, k·h]: chain cell ⌈k/m⌉.
    for (k, p) in fine.iter().enumerate() {
        out[k.div_ceil(m).min(cap)] += p;
    }
    let below: f64 = out[..cap].iter().sum();
    out[cap] = (1.0 - below).max(0.0);
    out
}

/// Stationary underrun probability of `b` with wake-up latencies from
/// `tail` and stalls from [`StallModel::from_tail`].
pub fn forecast(tail: &Tail, b: &Buffering) -> QueueForecast {
    let stalls = StallModel::from_tail(tail);
    forecast_with(tail, &stalls, b)
}

/// As [`forecast`] with a given stall model (tests use none).
pub fn forecast_with(tail: &Tail, stalls: &StallModel, b: &Buffering) -> QueueForecast {
    let t = b.service().0 as f64;
    let len = b.buffer_len.0 as f64;
    let c = b.compute.at(b.buffer_len).0 as f64;
    let periods = b.buffers.saturating_sub(1) as u64;
    // A whole number of cells per buffer, so t and the deadline are
    // exact, and at least MIN_CELLS_PER_T so rounding c and L up costs at
    // most t/16 each; past MAX_BACKLOG_CELLS (about 64 buffers) carried
    // backlog is not modelled.
    let per_t = (MAX_CELLS / periods.max(1)).max(MIN_CELLS_PER_T);
    let backlog_modelled = per_t * periods <= MAX_BACKLOG_CELLS;
    let (grid, k) = if backlog_modelled {
        (len / per_t as f64, (per_t * periods) as usize)
    } else {
        (
            (len * periods as f64 / MAX_CELLS as f64).max(1.0),
            MAX_CELLS as usize,
        )
    };
    let over = k + 1; // cells 0..=k meet the deadline
    let tc = (t / grid).round() as usize;
    let n = tail.n.max(1) as f64;
    // Wake-ups split by whether a stall made them late: a step whose
    // wake-up already sat out a stall is not hit by another during its
    // compute (one stall per step at most; see `assumptions`).
    let mut quiet = vec![0.0; over + 1];
    let mut stalled = vec![0.0; over + 1];
    let counts_as_stall = stalls.rate_per_s > 0.0;
    for &(lo, cnt) in tail.buckets() {
        let v = (lo + tail.bucket_ns).min(tail.max.0.max(lo));
        let into = if counts_as_stall && v > stalls.threshold_ns.0 {
            &mut stalled
        } else {
            &mut quiet
        };
        into[cells(v as f64, grid, over)] += cnt as f64 / n;
    }
    let quiet_share: f64 = quiet.iter().sum();
    let stolen = stolen_pmf(stalls, c, grid, over);
    let stall_mean_ns = quiet_share * stalls.rate_per_s * c / 1e9 * stalls.mean_ns;
    let cc = cells(c, grid, over);
    let mut pi = vec![0.0; k + 1];
    pi[0] = 1.0;
    let mut fail = 0.0;
    let mut iterations = 0;
    let mut converged = false;
    let mut x = vec![0.0; over + 1];
    let mut y = vec![0.0; over + 1];
    let max_iterations =
        (ITERATION_BUDGET / ((over + 1) as f64).powi(2)).clamp(50.0, MAX_ITERATIONS as f64) as u32;
    while iterations < max_iterations {
        iterations += 1;
        // Carried backlog B = max(0, D − t), then X = max(B, L).
        let mut bpmf = vec![0.0; over + 1];
        for (d, p) in pi.iter().enumerate() {
            let carried = if backlog_modelled {
                d.saturating_sub(tc)
            } else {
                0
            };
            bpmf[carried] += p;
        }
        // X = max(B, L) for each kind of wake-up (sub-distributions:
        // P(max ≤ x, kind) = F_B(x) · P(L ≤ x, kind)).
        let (mut fb, mut fq, mut fs, mut prev_q, mut prev_s) = (0.0, 0.0, 0.0, 0.0, 0.0);
        for i in 0..=over {
            fb += bpmf[i];
            fq += quiet[i];
            fs += stalled[i];
            let (cq, cs) = (fb * fq, fb * fs);
            x[i] = cq - prev_q;
            y[i] = cs - prev_s;
            prev_q = cq;
            prev_s = cs;
        }
        // Y = X + S for quiet wake-ups (capped); stalled ones add nothing.
        for (i, xi) in x.iter().enumerate() {
            if *xi <= 0.0 {
                continue;
            }
            for (j, sj) in stolen.iter().enumerate() {
                if *sj > 0.0 {
                    y[(i + j).min(over)] += xi * sj;
                }
            }
        }
        let mut next = vec![0.0; k + 1];
        fail = 0.0;
        for (i, p) in y.iter().enumerate() {
            let d = i + cc;
            if d > k {
                fail += p;
            } else {
                next[d] += p;
            }
        }
        // Mass lost to rounding at the top of X is an underrun too.
        let total: f64 = next.iter().sum::<f64>() + fail;
        fail += (1.0 - total).max(0.0);
        next[0] += fail;
        // After LAZY_AFTER plain steps, the lazy chain (I + P)/2: same
        // stationary distribution, no period, so a deterministic cycle
        // converges too (plain steps are twice as fast otherwise).
        let keep = if iterations > LAZY_AFTER { 0.5 } else { 0.0 };
        let mut diff = 0.0;
        for (p, q) in pi.iter_mut().zip(&next) {
            let v = keep * *p + (1.0 - keep) * q;
            diff += (v - *p).abs();
            *p = v;
        }
        if !backlog_modelled || diff < TOLERANCE {
            converged = true;
            break;
        }
    }
    let periods_per_step = 1.0 + fail * b.buffers.saturating_sub(1) as f64;
    QueueForecast {
        underrun_probability: fail,
        rate_per_s: fail / (t / 1e9 * periods_per_step),
        grid_ns: Nanos(grid as u64),
        iterations,
        converged,
        utilization_ratio: (c + stall_mean_ns) / t,
        stall_mean_ns,
        backlog_modelled,
        stalls: stalls.clone(),
    }
}

/// What the queue model assumes, in words printed beside every figure.
pub fn assumptions(q: &QueueForecast) -> Vec<String> {
    let mut a = vec![
        "the consumer wakes once per t, computes c of CPU work, and a late buffer delays the \
         next one (backlog carried across periods); an underrun skips to the next period \
         boundary with the ring refilled"
            .to_string(),
        "each wake-up's latency is an independent draw from the record (wake-ups of a thread \
         that slept as long as the probe did)"
            .to_string(),
        format!(
            "stalls during the compute: latencies from {} (the median {} + 2 × (p90 − p10)) up are read as \
             a stall process through the residual-life relation, f_L(b + y) = λ·P(G > y): here \
             {:.1} stalls/s of mean length {:.0} µs ({:.2} % of the CPU); a compute of c is hit \
             by a Poisson(λ·c) number of them, each adding its whole length, unless its own \
             wake-up was already late by a stall (at most one stall per step; stalls in \
             successive steps are independent)",
            q.stalls.threshold_ns,
            q.stalls.base_ns,
            q.stalls.rate_per_s,
            q.stalls.mean_ns / 1e3,
            q.stalls.time_fraction * 100.0
        ),
        "on a virtual machine part of the latency tail is the cost of waking a halted vCPU, \
         which a computing thread never pays: there the stall term errs towards more underruns"
            .to_string(),
        format!(
            "evaluated exactly on a {} grid (values rounded up) in {} iterations{}",
            q.grid_ns,
            q.iterations,
            if q.converged {
                ""
            } else {
                " (not converged: near full utilization the chain mixes slowly)"
            }
        ),
    ];
    if !q.backlog_modelled {
        a.push(
            "with this many buffers carried backlog is not modelled (each wake-up is judged \
             alone); only a consumer that cannot keep up on average would notice"
                .to_string(),
        );
    }
    if q.utilization_ratio >= 1.0 {
        a.push(format!(
            "(c + mean stolen time) / t = {:.3} ≥ 1: the consumer cannot keep up on average \
             and underruns recur however many buffers it has",
            q.utilization_ratio
        ));
    }
    a
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::buffer::Compute;
    use punctual_record::{Metric, Recorder};

    fn tail_of(values: impl IntoIterator<Item = u64>) -> Tail {
        let mut r = Recorder::new(Nanos(1000)).with_sample_period(Nanos::from_ms(1));
        for v in values {
            r.record(Nanos(v));
        }
        Tail::from_series(&r.to_series("cpu0.latency", Metric::Latency))
    }

    fn no_stalls() -> StallModel {
        StallModel {
            base_ns: Nanos::ZERO,
            threshold_ns: Nanos::ZERO,
            rate_per_s: 0.0,
            mean_ns: 0.0,
            time_fraction: 0.0,
            lengths: Vec::new(),
        }
    }

    /// Without stalls and with c → 0, n = 2 is seed 002's formula:
    /// P(underrun) = P(L > t).
    #[test]
    fn reduces_to_the_seed_formula() {
        // 1 wake-up in 10 is 1.2 ms late, the rest 5 µs.
        let t = tail_of((0..10_000u64).map(|i| if i % 10 == 0 { 1_200_000 } else { 5_000 }));
        let b = Buffering::new(2, Nanos::from_ms(1), Compute::Time(Nanos::ZERO));
        let q = forecast_with(&t, &no_stalls(), &b);
        assert!((q.underrun_probability - 0.1).abs() < 1e-12, "{q:?}");
        // Each underrun costs 2 periods: rate = 0.1 / (1 ms × 1.1).
        assert!((q.rate_per_s - 100.0 / 1.1).abs() < 1e-6);
        // n = 3 and 1.2 ms < 2 ms of slack: a late wake-up leaves 0.2 ms
        // of backlog that the next, on-time buffer absorbs.
        let b3 = Buffering::new(3, Nanos::from_ms(1), Compute::Time(Nanos::ZERO));
        assert_eq!(
            forecast_with(&t, &no_stalls(), &b3).underrun_probability,
            0.0
        );
    }

    /// A deterministic backlog: no latency, c = 1.3·t. D grows by 0.3·t a
    /// step from c; with n = 3 (deadline 2t) D = 1.3, 1.6, 1.9, 2.2 ·t:
    /// the fourth step underruns, then it starts over, so one step in
    /// four underruns.
    #[test]
    fn deterministic_backlog() {
        let t = tail_of(std::iter::repeat_n(0u64, 1000));
        let b = Buffering::new(3, Nanos::from_ms(1), Compute::Time(Nanos::from_us(1300)));
        let q = forecast_with(&t, &no_stalls(), &b);
        assert!(q.converged);
        assert!((q.underrun_probability - 0.25).abs() < 1e-9, "{q:?}");
        assert!(q.utilization_ratio > 1.0);
        // Seed 002 would say never: every wake-up is on time.
    }

    /// Backlog with random latency: n = 3, c = 0.6 ms, 1 wake-up in 4 is
    /// 0.9 ms late. A late step ends at 1.5 ms (backlog 0.5 ms); the next
    /// then fails only if it is late too (max(0.9, 0.5) + 0.6 = 1.5 ≤ 2:
    /// never), so no underrun, although seed 002 with L alone also says
    /// none. With c = 0.8 ms, two late wake-ups in a row end at 1.7 then
    /// max(0.9, 0.7) + 0.8 = 1.7: still none; the chain must agree.
    #[test]
    fn random_backlog_matches_hand_enumeration() {
        let t = tail_of((0..4000u64).map(|i| if i % 4 == 0 { 900_000 } else { 0 }));
        for c_us in [600, 800] {
            let b = Buffering::new(3, Nanos::from_ms(1), Compute::Time(Nanos::from_us(c_us)));
            assert_eq!(
                forecast_with(&t, &no_stalls(), &b).underrun_probability,
                0.0
            );
        }
        // c = 1.05 ms: each step adds 0.05 ms over t, except a late one
        // restarts from max(0.9, B). Underruns must now occur.
        let b = Buffering::new(3, Nanos::from_ms(1), Compute::Time(Nanos::from_us(1050)));
        assert!(forecast_with(&t, &no_stalls(), &b).underrun_probability > 0.0);
    }

    /// The injector in closed form: a 1 ms burst every 10.37 ms seen by a
    /// 1 ms timer gives latencies uniform on 0–1 ms for 1 wake-up in
    /// 10.37. The stall model must recover ~96 stalls/s of ~1 ms, and for
    /// 2 × 1 ms with c = 0.5 ms the underrun probability is P(L > 0.5 ms)
    /// + P(a burst starts in the compute) − both ≈ 0.048 + 0.048 − 0.002.
    #[test]
    fn injector_stalls_are_recovered() {
        let period = 10_370u64;
        let t = tail_of((0..1_037_000u64).map(|i| {
            let since = (i * 1000) % period;
            (1000u64.saturating_sub(since) + 2) * 1000
        }));
        let st = StallModel::from_tail(&t);
        // Stalls of half a millisecond or more: the bursts themselves.
        let long: f64 = st
            .lengths
            .iter()
            .filter(|(l, _)| *l >= 0.5e6)
            .map(|(l, s)| {
                assert!((l - 1.0e6).abs() < 0.01e6, "{st:?}");
                s * st.rate_per_s
            })
            .sum();
        assert!((long - 96.4).abs() < 5.0, "{st:?}");
        assert!((st.time_fraction - 0.0964).abs() < 0.006, "{st:?}");
        let b = Buffering::new(2, Nanos::from_ms(1), Compute::Time(Nanos::from_us(500)));
        let q = forecast(&t, &b);
        let p = q.underrun_probability;
        assert!((p - 0.094).abs() < 0.006, "{p}");
    }

    /// The same injector with 2 × 2 ms and c = 0.5 ms: slack 1.5 ms, so one
    /// 1 ms burst never underruns; a burst covering the wake-up plus another
    /// during the compute would, but a step has at most one stall. What is
    /// left is two bursts within one quiet step's compute: Poisson with
    /// μ = 96.4/s × 0.5 ms, P(N ≥ 2) = 1 − e^−μ(1 + μ) ≈ 0.00113, times the
    /// 90.4 % of quiet wake-ups ≈ 0.00102.
    #[test]
    fn one_stall_per_step() {
        let period = 10_370u64;
        let t = tail_of((0..1_037_000u64).map(|i| {
            let since = (i * 1000) % period;
            (1000u64.saturating_sub(since) + 2) * 1000
        }));
        let b = Buffering::new(2, Nanos::from_ms(2), Compute::Time(Nanos::from_us(500)));
        let p = forecast(&t, &b).underrun_probability;
        assert!((p - 0.00102).abs() < 0.0003, "{p}");
    }

    /// A tail with no room for a stall process (every sample equal) has
    /// none, so the chain equals the seed formula.
    /// Short stalls keep their own length however coarse the chain's grid
    /// is: a quarter of every buffer computing under 300 stalls/s of 65 µs
    /// (0.5% of the CPU) against 75% slack never underruns, from 1 ms
    /// buffers to 10 s ones (each stall rounded up to a whole cell made it
    /// 99% at 10 s).
    #[test]
    fn short_stalls_keep_their_length_on_a_coarse_grid() {
        let t = tail_of(std::iter::repeat_n(20_000u64, 1000));
        let st = StallModel {
            base_ns: Nanos::from_us(20),
            threshold_ns: Nanos::from_us(60),
            rate_per_s: 300.0,
            mean_ns: 65_000.0,
            time_fraction: 300.0 * 65e-6,
            lengths: vec![(65_000.0, 1.0)],
        };
        for len in [
            Nanos::from_ms(1),
            Nanos::from_ms(20),
            Nanos::from_ms(1000),
            Nanos::from_ms(10_000),
        ] {
            let b = Buffering::new(2, len, Compute::Time(Nanos(len.0 / 4)));
            let q = forecast_with(&t, &st, &b);
            assert!(q.underrun_probability < 1e-9, "{len}: {q:?}");
        }
    }

    #[test]
    fn constant_latency_has_no_stalls() {
        let t = tail_of(std::iter::repeat_n(20_000u64, 1000));
        let st = StallModel::from_tail(&t);
        assert_eq!(st.rate_per_s, 0.0);
    }
}
