//! Time to buffer underrun (Cota-Robles & Held §5.1) and buffer sizing (Basham's VMBus note).
//!
//! A consumer with `n` buffers of length `t` that needs `c` of compute per
//! buffer survives a wake-up late by up to the slack (n−1)·t − c; a later
//! wake-up underruns. Cota-Robles & Held's first-order figure is P(latency > slack)
//! per wake-up. The MTTF this module reports is the queue model's
//! ([`crate::queue`]): the same record, but with lateness carried from one
//! buffer to the next and with stalls during the compute; the seed figure
//! is kept beside it.

use punctual_units::Nanos;
use serde::Serialize;

use crate::forecast::{Estimate, ProbEstimate, TailModel};
pub use crate::model::{Buffering, Compute};
use crate::queue::{self, QueueForecast};
pub use crate::tail::{underrun_count_ci95, CountInterval};

/// Mean time to failure of one buffering on one series.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Mttf {
    pub buffering: Buffering,
    pub compute_ns: Nanos,
    pub slack_ns: Nanos,
    /// P(latency > slack) per wake-up.
    pub exceedance: ProbEstimate,
    pub wakeups_per_s: f64,
    /// Wake-ups later than the slack per second (Cota-Robles & Held's failure
    /// rate): `exceedance.probability × wakeups_per_s`.
    pub exceedance_rate_per_s: f64,
    /// 95 % interval of the queue model's underrun rate.
    pub rate_ci_low_per_s: f64,
    pub rate_ci_high_per_s: f64,
    /// Queue model; `None`: no underrun observed or predicted (infinite).
    pub mttf_seconds: Option<f64>,
    pub mttf_ci_low_seconds: Option<f64>,
    pub mttf_ci_high_seconds: Option<f64>,
    /// Queue model.
    pub failures_per_hour: f64,
    pub failures_per_day: f64,
    pub extrapolated: bool,
    pub formula: String,
    pub assumptions: Vec<String>,
    /// Cota-Robles & Held's first-order figure, s / P(latency > slack): wake-ups
    /// independent, nothing carried over, nothing stolen during compute.
    pub first_order_mttf_seconds: Option<f64>,
    pub first_order_mttf_ci_low_seconds: Option<f64>,
    pub first_order_mttf_ci_high_seconds: Option<f64>,
    /// The queue model's underruns per second (what `mttf_seconds` inverts).
    pub underrun_rate_per_s: f64,
    /// The queue model behind `mttf_seconds`.
    pub queue: QueueForecast,
    #[serde(skip)]
    pub interval: IntervalParts,
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
    // Where the stall inference sees every wake-up instant (the periods a
    // long stall swallowed placed, or none to place), the record's late
    // wake-ups are re-weighted to a consumer that sleeps only t − c of
    // each period (`queue::forecast_sleeping`); otherwise the inference
    // reads long stalls short and the wake-ups stay as recorded.
    let sleeping = |whole: &crate::tail::Tail| {
        let st = queue::StallModel::from_tail(whole);
        queue::forecast_sleeping(&m.tail, &st, m.stall_times.as_ref(), b, true)
    };
    // The relative variance of the underrun rate from the error in the
    // stall model, where a long stall's swallowed periods are placed.
    let mut boot: Option<Bootstrap> = None;
    let q = match &m.gap_stalls {
        None => match swallowed_wake_ups(m) {
            Some(extra) => {
                let whole = m.tail.with_extra(&extra);
                let q = sleeping(&whole);
                // A replicate redraws the record's own wake-ups and places
                // the periods each long one swallowed again, so one stall
                // stays one event however many periods it covered.
                let p = m.sample_period_ns.0;
                let from = m.stall_boot_from.unwrap_or(Nanos::ZERO);
                let sweep = phase_sweep(m, &q).filter(|_| m.hold_phase_sweep);
                boot = stall_model_variance(&m.tail, &q, from, sweep, |t| {
                    sleeping(&t.with_extra(&swallowed_in(t, p))).rate_per_s
                });
                q
            }
            None => queue::forecast(&m.tail, m.stall_times.as_ref(), b),
        },
        Some(g) => {
            let wake = queue::StallModel::from_tail(&m.tail);
            let st = queue::StallModel::from_gaps(
                &g.gaps,
                g.running_ns,
                g.gap_threshold_ns,
                &g.series,
                &wake,
            );
            queue::forecast_with(&m.tail, &st, m.stall_times.as_ref(), b)
        }
    };
    let mut assumptions = queue::assumptions(&q);
    if m.sample_period_ns != service {
        assumptions.push(format!(
            "the record sampled every {} but this consumer wakes every {}: each wake-up \
             draws from the record's latency distribution at {:.4}/s (this assumes latency \
             does not depend on the period); stalls are a rate per second and need no scaling",
            m.sample_period_ns, service, per_s,
        ));
    }
    if let Some(a) = long_stall_warning(m) {
        assumptions.push(a);
    }
    // The chain sees only the record's own samples. Where fewer than 10
    // wake-ups beyond the slack were observed, the part of the tail the
    // record did not show comes from the fitted Pareto tail, as
    // independent late wake-ups (Cota-Robles & Held's way).
    let n = m.tail.n.max(1) as f64;
    let emp = p.observed_count as f64 / n;
    let extra = |pp: f64| {
        if p.extrapolated {
            (pp - emp).max(0.0)
        } else {
            0.0
        }
    };
    let model_rate = q.rate_per_s + extra(p.probability) * per_s;
    // The interval is that of the error in the forecast rate, which is
    // the error in the data the model reads it from.
    // Without a bootstrap of the stall model it counts two errors, both
    // Poisson: the underruns the model implies within the record (k_eff of
    // them: the record's events of the size that underruns, whose number
    // bounds how well their share is known), and the stalls the record saw
    // (n_s), whose number bounds how well the stall rate is known. The
    // relative variances add (delta method: the rate is proportional to
    // the stall rate to first order), so the interval is that of an
    // effective count k_e with 1/k_e = 1/k_eff + 1/n_s.
    // A stall several periods long makes a run of late wake-ups, each
    // counted in the histogram but all one event: both counts are divided
    // by the mean run length the spike log shows at their level.
    let stall_var = boot.as_ref().map(|b| b.variance);
    let k_eff = q.underrun_probability * n / run_length(m, slack);
    let n_s = stall_count(m, &q.stalls) / run_length(m, q.stalls.threshold_ns);
    // Where long stalls were read whole (their swallowed periods placed),
    // the stall model is bootstrapped (`stall_model_variance`): every
    // wake-up from the stall threshold up, the ones whose lengths decide
    // the underruns as well as the rest, is redrawn, so its variance is
    // the error in the stall rate *and* in the events of underrun size
    // at once. It replaces both counts; adding 1/k_eff to it would count
    // those events twice (the interval then held the truth in 100 % of
    // the calibration's records on four shapes, and verdicts the data
    // could decide stayed open).
    // At most 1, the relative variance of a single Poisson count: where
    // the replicates scatter over orders of magnitude (one rare stall near
    // the slack decides the rate), a variance says little about the
    // spread, and the interval is taken as resting on one stall.
    let counted = if n_s > 0.0 && k_eff > 0.0 {
        1.0 / (1.0 / k_eff + 1.0 / n_s)
    } else {
        k_eff
    };
    let boot_var = stall_var.filter(|_| n_s > 0.0).map(|v| v.min(1.0));
    let k_e = match boot_var {
        Some(v) if k_eff > 0.0 && v > 0.0 => 1.0 / v,
        _ => counted,
    };
    // The lengths decide more than the count: said, because the timer
    // reads a stall's length only through its wake-up path and the
    // consumer's own switches, which it does not see, may tip it.
    if let (Some(v), true) = (stall_var, n_s > 0.0) {
        if v > 4.0 / n_s {
            assumptions.push(format!(
                "the underrun rate hangs on the stall lengths more than on their number (the \
                 stall model's bootstrap: ±{:.0} % at one standard deviation, their count alone \
                 ±{:.0} %): stalls end near the slack, a timer record reads each length only \
                 through its own wake-up, and a consumer's own switches may tip it; a running \
                 thread's gaps measure them (--stalls NOISE_RECORD, or a check record's own)",
                100.0 * v.min(1.0).sqrt(),
                100.0 / n_s.sqrt()
            ));
        }
    }
    // Stalls that cluster in time (on/off storms) make the counts vary
    // across the record more than Poisson's: the interval is that of
    // k_e / D, D the index of dispersion of the stall runs across windows.
    let d = dispersion(m, q.stalls.threshold_ns);
    let k_e = k_e / d;
    // A record that implies less than one underrun within its own length
    // saw no event of the size that underruns; the bootstrap redraws only
    // what was seen and cannot widen for what was not, so there the
    // interval rests on the count of those events, none: from zero to the
    // Poisson bound on none seen.
    let k = if k_eff.round() == 0.0 {
        0
    } else {
        k_e.round() as u64
    };
    let (lo, hi) = underrun_count_ci95(m.count_interval, k);
    let (rlo, rhi) = if k == 0 {
        (
            0.0,
            (hi / n * per_s).max(q.rate_per_s * hi / (counted / d).max(1e-300)),
        )
    } else {
        (q.rate_per_s * lo / k_e, q.rate_per_s * hi / k_e)
    };
    let (rate_lo, rate_hi) = (
        rlo + extra(p.ci_low) * per_s,
        rhi + extra(p.ci_high) * per_s,
    );
    // Stalls the timer cannot decide, enough of them to move the rate
    // beyond its interval if each one that begins during a compute
    // underran.
    if let Some(a) = near_slack_warning(m, &q, b, rate_hi - model_rate) {
        assumptions.push(a);
    }
    if p.extrapolated {
        assumptions.push(
            "fewer than 10 wake-ups later than the slack were observed: the tail beyond the \
             record comes from the generalized Pareto fit, added as independent late wake-ups"
                .to_string(),
        );
    }
    assumptions.push(format!(
        "the first-order figure beside it, s / P(latency > slack) = {}: one wake-up \
         per period, independent, nothing carried over, nothing stolen during the compute",
        inv(rate)
            .map(crate::model::human_secs)
            .unwrap_or_else(|| "never".into())
    ));
    Ok(Mttf {
        buffering: *b,
        compute_ns: c,
        slack_ns: slack,
        wakeups_per_s: per_s,
        exceedance_rate_per_s: rate,
        rate_ci_low_per_s: rate_lo,
        rate_ci_high_per_s: rate_hi,
        mttf_seconds: inv(model_rate),
        mttf_ci_low_seconds: inv(rate_hi),
        mttf_ci_high_seconds: inv(rate_lo),
        failures_per_hour: model_rate * 3600.0,
        failures_per_day: model_rate * 86_400.0,
        extrapolated: p.extrapolated,
        formula: format!(
            "D_k = finish_k − k·t; D_k+1 = max(L, D_k − t) + c + S, underrun when D > (n−1)·t = {}; \
             L from the record, S = stalls (λ = {:.1}/s) with lengths from {}, arriving {}; \
             P(underrun) = {:.3e} per wake-up → MTTF {}. \
             First order: slack = (n−1)·t − c = ({}−1)·{} − {} = {}; MTTF = s / P(latency > slack) = {} / {:.3e}",
            b.buffer_len * (b.buffers.saturating_sub(1) as u64),
            q.stalls.rate_per_s,
            match &q.stalls.noise {
                None => "the record's exceedance slope".to_string(),
                Some(ns) => format!("the noise record's gap histogram {}", ns.series),
            },
            if q.renewal.is_some() {
                "as a renewal process read from the spike log's time stamps"
            } else {
                "as a Poisson process"
            },
            q.underrun_probability,
            inv(model_rate).map(crate::model::human_secs).unwrap_or_else(|| "never".into()),
            b.buffers, b.buffer_len, c, slack, service, p.probability
        ),
        first_order_mttf_seconds: inv(rate),
        first_order_mttf_ci_low_seconds: inv(p.ci_high * per_s),
        first_order_mttf_ci_high_seconds: inv(p.ci_low * per_s),
        underrun_rate_per_s: model_rate,
        queue: q,
        interval: IntervalParts {
            count_rel_var: 1.0 / counted.max(1e-300),
            bootstrap: boot,
            dispersion: d,
        },
        exceedance: p,
        assumptions,
    })
}

/// What the interval of the underrun rate was assembled from, each part
/// a relative variance of the rate (not in the record: the calibration
/// prints it to tell which part sets the width).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct IntervalParts {
    /// The two counts' part, 1/k + 1/n_s (underrun-sized events and
    /// stalls, each divided by its run length): the whole of it where the
    /// stall model is not bootstrapped.
    pub count_rel_var: f64,
    /// The stall model's bootstrap, where it replaces the counts.
    pub bootstrap: Option<Bootstrap>,
    /// The storms' index of dispersion that divides the effective count.
    pub dispersion: f64,
}

/// The stall model's bootstrap of one forecast.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Bootstrap {
    /// Relative variance of the replicates' underrun rates (before the
    /// cap at 1).
    pub variance: f64,
    /// Their median ÷ the record's own forecast.
    pub median_ratio: f64,
    /// Wake-ups held as recorded in every replicate: a periodic source's
    /// phase sweep ([`phase_sweep`]).
    pub held_wakeups: u64,
}

/// Where a periodic source's bursts have one length b, the wake-ups they
/// delay, as lateness ranges: the probe wakes every p, so the one wake-up
/// that falls in a burst (or the first of those it swallows) is late by
/// b − u for the probe's phase u in the burst, and over the record the
/// period sweeps u over [0, min(p, b)): n·min(p, b)/P wake-ups in that
/// range, n the record's wake-ups. That sweep is set by the period, the
/// probe's and the record's length, not sampled: a record of the same
/// machine shows the same stretch (evenly spread, or on the lattice of
/// the two periods' common divisor in a simulator's exact time), where a
/// Poisson redraw of each bucket puts noise on it that steepens the
/// chords the stall model is read from, and the replicates' forecasts
/// scatter several times more than records' do (docs/forecast.md §3.5).
/// Bursts whose lengths vary are sampled lengths, not a sweep: where the
/// split's bursts have quartiles more than one bucket apart, nothing is
/// held. Returns (lowest lateness, highest lateness, the sweep's
/// wake-ups in that range).
fn phase_sweep(m: &TailModel, q: &QueueForecast) -> Option<(f64, f64, f64)> {
    let r = q.renewal.as_ref()?;
    let ph = r.phase.as_ref()?;
    let period = r.period_ns?;
    let w = m.tail.bucket_ns.max(1) as f64;
    let (q1, q3) = (
        queue::share_quantile(&ph.burst, 0.25),
        queue::share_quantile(&ph.burst, 0.75),
    );
    if !(period > 0.0 && q3 > 0.0) || q3 - q1 > w {
        return None;
    }
    let b = queue::share_quantile(&ph.burst, 0.5);
    let top = q.stalls.base_ns.0 as f64 + b;
    let p = m.sample_period_ns.0 as f64;
    Some((top - p.min(b), top, m.tail.n as f64 * p.min(b) / period))
}

/// Bootstrap replicates of the stall model behind a long-stall forecast.
const STALL_BOOT: usize = 40;
/// Their seed, fixed so the same record gives the same bytes.
const STALL_BOOT_SEED: u64 = 0x57A1_1B00_75EE_D5ED;

/// The relative variance of the underrun rate that comes from estimating
/// the stall model: the record's wake-ups from the stall threshold up are
/// redrawn [`STALL_BOOT`] times, each bucket's count from a Poisson law of
/// its mean, and `rate` places the periods each long one swallowed, reads
/// the stall model again and evaluates the chain. A long stall is one
/// wake-up late by v with ⌊v / p⌋ swallowed periods behind it, so it is
/// redrawn whole: redrawing the swallowed periods on their own, as if
/// each were a stall of its own, made 20 stalls of 4.5 ms look like 60
/// independent events. This counts the error in the stall lengths as
/// well as in their rate, and in the events of the size that underruns
/// among them. None when the point forecast has no underrun. Wake-ups
/// below `from` (when above the threshold) are held as recorded: a
/// calibration's diagnostic (`TailModel::stall_boot_from`); so are those
/// of a periodic source's phase sweep (`sweep`, [`phase_sweep`]).
fn stall_model_variance(
    record: &crate::tail::Tail,
    q: &QueueForecast,
    from: Nanos,
    sweep: Option<(f64, f64, f64)>,
    rate: impl Fn(&crate::tail::Tail) -> f64,
) -> Option<Bootstrap> {
    if q.rate_per_s <= 0.0 || q.stalls.rate_per_s <= 0.0 {
        return None;
    }
    let mut rng = crate::rng::SplitMix64::new(STALL_BOOT_SEED);
    let level = q.stalls.threshold_ns.0.max(from.0);
    let w = record.bucket_ns;
    // The share of each bucket within the sweep's lateness range, and of
    // the wake-ups recorded there the share that the sweep accounts for:
    // the rest's stalls and the unions that fell there are redrawn.
    let within = |lo: u64| match sweep {
        Some((a, b, _)) => ((((lo + w) as f64).min(b) - (lo as f64).max(a)) / w as f64).max(0.0),
        None => 0.0,
    };
    let recorded: f64 = record
        .buckets()
        .iter()
        .map(|&(lo, c)| c as f64 * within(lo))
        .sum();
    let share = sweep.map_or(0.0, |(_, _, expected)| {
        (expected / recorded.max(1.0)).min(1.0)
    });
    let held = |lo: u64, c: u64| c as f64 * within(lo) * share;
    let held_wakeups = record
        .buckets()
        .iter()
        .filter(|&&(lo, _)| lo + w > level)
        .map(|&(lo, c)| held(lo, c))
        .sum::<f64>()
        .round() as u64;
    let mut rel: Vec<f64> = (0..STALL_BOOT)
        .map(|_| rate(&record.resampled_above(level, held, &mut rng)) / q.rate_per_s)
        .collect();
    let mean = rel.iter().sum::<f64>() / rel.len() as f64;
    let variance = rel.iter().map(|r| (r - mean).powi(2)).sum::<f64>() / (rel.len() - 1) as f64;
    rel.sort_by(f64::total_cmp);
    Some(Bootstrap {
        variance,
        median_ratio: rel[rel.len() / 2],
        held_wakeups,
    })
}

/// The wake-ups a probe of period `p` would have had in the periods its
/// late wake-ups swallowed, placed from the histogram `t` alone: each
/// wake-up in a bucket from `lo ≥ p` stands for ⌊lo / p⌋ of them, at
/// lo − p, lo − 2p, … (as [`swallowed_from_histogram`] places a record's).
fn swallowed_in(t: &crate::tail::Tail, p: u64) -> Vec<Nanos> {
    let mut out = Vec::new();
    if p == 0 {
        return out;
    }
    for &(lo, c) in t.buckets().iter().filter(|(lo, _)| *lo >= p) {
        for j in 1..=lo / p {
            out.extend(std::iter::repeat_n(Nanos(lo - j * p), c as usize));
        }
    }
    out
}

/// The latencies the wake-ups a long stall swallowed would have had:
/// for each wake-up late by v beyond the probe's period p, the wake-up
/// instants v − p, v − 2p, … fell into the same stall and became missed
/// periods. A probe that skips them counts ⌊v / p⌋ missed periods per
/// such wake-up (the live timer does), so where the record's missed
/// count is exactly what its histogram implies, the histogram places
/// them all, bucket for bucket, with no spike log needed. Otherwise
/// (a probe that queued delayed periods, or missed periods from
/// elsewhere) they are placed from the spike log when it holds every
/// wake-up later than p, and None when neither can place them.
pub(crate) fn swallowed_wake_ups(m: &TailModel) -> Option<Vec<Nanos>> {
    let p = m.sample_period_ns.0;
    if p == 0 || m.metric != punctual_record::Metric::Latency {
        return None;
    }
    if let Some(out) = swallowed_from_histogram(m) {
        return Some(out);
    }
    let logged: Vec<u64> = m
        .spike_log
        .iter()
        .map(|(_, v)| v.0)
        .filter(|v| *v > p + m.tail.bucket_ns)
        .collect();
    if (logged.len() as u64) < m.tail.count_above((p + m.tail.bucket_ns) as f64) {
        return None;
    }
    let mut out = Vec::new();
    for v in logged {
        let mut r = v - p;
        while r > 0 {
            out.push(Nanos(r));
            r = r.saturating_sub(p);
        }
    }
    Some(out)
}

/// The swallowed wake-ups placed from the histogram, where the record's
/// missed-period count is exactly the ⌊v / p⌋ its wake-ups imply.
fn swallowed_from_histogram(m: &TailModel) -> Option<Vec<Nanos>> {
    let p = m.sample_period_ns.0;
    let w = m.tail.bucket_ns.max(1);
    if p == 0 || !p.is_multiple_of(w) {
        return None;
    }
    let out = swallowed_in(&m.tail, p);
    if out.is_empty() || out.len() as u64 != m.missed {
        return None;
    }
    Some(out)
}

/// A timer record sees a stall longer than its period only from the
/// first wake-up it delays: the wake-ups the stall swallows are missed
/// periods, not latencies, so the residual-life inference (§3.2 of
/// docs/forecast.md) reads the stall process short of its long part.
/// Said wherever the stall term comes from the wake-ups alone and some
/// were later than the probe's period.
fn long_stall_warning(m: &TailModel) -> Option<String> {
    if m.gap_stalls.is_some() || m.metric != punctual_record::Metric::Latency {
        return None;
    }
    let p = m.sample_period_ns;
    // Whole buckets beyond the one holding the period itself.
    let k = m.tail.count_above((p.0 + m.tail.bucket_ns) as f64);
    if k == 0 {
        return None;
    }
    Some(match swallowed_wake_ups(m) {
        Some(extra) => format!(
            "{k} wake-ups were later than the probe's {p} period: the stalls behind them were \
             longer than a period, and the {} wake-ups they swallowed (missed periods, which \
             would have been late by v − {p}, v − 2·{p}, … of each v; placed from {}) are added \
             to the stall inference, so each stall's length is read whole",
            extra.len(),
            if m.missed > 0 && swallowed_from_histogram(m).is_some() {
                "the record's missed-period count"
            } else {
                "the spike log"
            }
        ),
        None => format!(
            "{k} wake-ups were later than the probe's {p} period: the stalls behind them were \
             longer than a period, and a timer record sees only what is left of each at the \
             first wake-up it delays; the spike log does not hold every one of them, so the \
             wake-ups they swallowed (missed periods) cannot be placed, and the stall lengths \
             and the time stolen during a compute may be underestimated here; a running \
             thread's gaps measure them (--stalls NOISE_RECORD, or a check record's own)"
        ),
    })
}

/// Stalls longer than the probe's period whose lengths, as the timer
/// reads them, end within one probe period of the slack: a stall that
/// begins during the compute then underruns or not by what the consumer
/// pays and the probe does not (its own wake-up, its switches, the
/// injector's switch back), and a timer record reads each length only
/// through its own wake-up path. Live, on such a case (a 2 ms burst every
/// 23.1 ms, 2 × 3 ms, c = 1 ms: `bench/long-stall.sh 20 1 3`), the
/// timer-only forecast fell 1.2–10× below what a real consumer saw over
/// two runs of three rounds,
/// while the simulated one, whose stalls are exactly as long as the
/// record says, is right (docs/forecast.md §3.5). Said only where the
/// stall term comes from the timer's wake-ups, and where those stalls
/// matter: if every one of them that begins during a compute (a share
/// c / t) underran, the rate would rise by more than `headroom_per_s`,
/// the distance from the point forecast to its interval's upper end.
fn near_slack_warning(
    m: &TailModel,
    q: &QueueForecast,
    b: &Buffering,
    headroom_per_s: f64,
) -> Option<String> {
    if m.gap_stalls.is_some() || m.metric != punctual_record::Metric::Latency {
        return None;
    }
    let slack = b.slack().ok()?;
    let in_compute = b.compute.at(b.buffer_len).0 as f64 / b.buffer_len.0.max(1) as f64;
    let p = m.sample_period_ns.0 as f64;
    if p <= 0.0 || m.tail.count_above(p + m.tail.bucket_ns as f64) == 0 {
        return None;
    }
    let s = slack.0 as f64;
    let share: f64 = q
        .stalls
        .lengths
        .iter()
        .filter(|(y, _)| *y > p && (*y - s).abs() <= p)
        .map(|(_, sh)| sh)
        .sum();
    (share > 0.0 && q.stalls.rate_per_s * share * in_compute > headroom_per_s).then(|| {
        format!(
            "{:.0} % of the stalls are longer than the probe's {} period and end within one \
             period of the {} slack: whether one that begins during the compute underruns is \
             decided by the consumer's own wake-up and switches, which the timer does not pay; \
             on such a case a real consumer underran 1.2–10 × as often as the timer-only \
             forecast (docs/forecast.md §3.5), so read it as likely too low, and measure stolen \
             time on a running thread (--stalls NOISE_RECORD, or a check record's own)",
            100.0 * share,
            m.sample_period_ns,
            slack
        )
    })
}

/// The stalls a stall model was estimated from: gaps counted by a
/// running thread, or the record's wake-ups beyond the stall threshold.
fn stall_count(m: &TailModel, st: &queue::StallModel) -> f64 {
    match &st.noise {
        Some(ns) => ns.gaps as f64,
        None if st.rate_per_s > 0.0 => m.tail.count_above(st.threshold_ns.0 as f64) as f64,
        None => 0.0,
    }
}

/// Windows the record is cut into for [`dispersion`].
const DISPERSION_WINDOWS: usize = 10;

/// Index of dispersion (variance ÷ mean, at least 1) of the runs of late
/// wake-ups beyond `level` across [`DISPERSION_WINDOWS`] equal windows of
/// the record: 1 for Poisson stalls, more where they come in storms.
/// 1 when the spike log does not hold every wake-up beyond the level (a
/// bounded log's kept part is not spread like the rest), or holds fewer
/// than 2 runs.
fn dispersion(m: &TailModel, level: Nanos) -> f64 {
    let at = late_at(m, level);
    let bucket = m.tail.bucket_ns;
    if at.len() < 2 || (at.len() as u64) < m.tail.count_above((level.0 + bucket) as f64) {
        return 1.0;
    }
    let starts = run_starts(m, &at);
    let span = m.sample_period_ns.0.saturating_mul(m.tail.n).max(1);
    let mut counts = [0f64; DISPERSION_WINDOWS];
    for t in &starts {
        let w = ((*t as u128 * DISPERSION_WINDOWS as u128) / span as u128) as usize;
        counts[w.min(DISPERSION_WINDOWS - 1)] += 1.0;
    }
    let w = DISPERSION_WINDOWS as f64;
    let mean = counts.iter().sum::<f64>() / w;
    let var = counts.iter().map(|c| (c - mean).powi(2)).sum::<f64>() / (w - 1.0);
    if mean <= 0.0 {
        1.0
    } else {
        (var / mean).max(1.0)
    }
}

/// Mean number of consecutive periods late beyond `level` per run, from
/// the spike log's time stamps: a wake-up within two periods of the
/// previous one beyond the level continues its run. 1 without a log.
fn run_length(m: &TailModel, level: Nanos) -> f64 {
    let at = late_at(m, level);
    if at.len() < 2 {
        return 1.0;
    }
    at.len() as f64 / run_starts(m, &at).len() as f64
}

/// Times of the logged wake-ups later than `level`, in order.
fn late_at(m: &TailModel, level: Nanos) -> Vec<u64> {
    let mut at: Vec<u64> = m
        .spike_log
        .iter()
        .filter(|(_, v)| *v > level)
        .map(|(t, _)| t.0)
        .collect();
    at.sort_unstable();
    at
}

/// The first wake-up of each run in `at` (sorted): one more than two
/// periods after the previous late one starts a run.
fn run_starts(m: &TailModel, at: &[u64]) -> Vec<u64> {
    let gap = 2 * m.sample_period_ns.0;
    at.iter()
        .enumerate()
        .filter(|(i, t)| *i == 0 || **t - at[i - 1] > gap)
        .map(|(_, t)| *t)
        .collect()
}

/// One row of an MTTF-versus-buffering table.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SweepRow {
    pub buffers: u32,
    /// Cota-Robles & Held's first-order MTTF beside the queue model's.
    pub first_order_mttf_seconds: Option<f64>,
    pub buffer_len_ns: Nanos,
    pub total_buffering_ns: Nanos,
    pub slack_ns: Nanos,
    pub probability: f64,
    pub mttf_seconds: Option<f64>,
    pub mttf_ci_low_seconds: Option<f64>,
    pub mttf_ci_high_seconds: Option<f64>,
    pub extrapolated: bool,
}

/// MTTF against total buffering (the data behind Cota-Robles & Held's Figures 6
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
                first_order_mttf_seconds: r.first_order_mttf_seconds,
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
/// More buffers never shorten the MTTF (more slack, same wake-ups), so a
/// bisection finds it with a handful of queue evaluations.
pub fn least_buffers(m: &TailModel, base: &Buffering, target_s: f64, max_n: u32) -> Option<Mttf> {
    least_buffers_by(base, target_s, max_n, |b| mttf(m, b).ok())
}

/// As [`least_buffers`], with the MTTF of each buffering from `mttf_of`
/// (a caller that keeps the forecasts it already made).
pub fn least_buffers_by(
    base: &Buffering,
    target_s: f64,
    max_n: u32,
    mttf_of: impl Fn(&Buffering) -> Option<Mttf>,
) -> Option<Mttf> {
    let at = |n: u32| {
        mttf_of(&Buffering {
            buffers: n,
            ..*base
        })
    };
    let ok = |n: u64| at(n as u32).is_some_and(|r| meets(&r, target_s));
    if max_n < 1 || !ok(u64::from(max_n)) {
        return None;
    }
    at(least_true(1, u64::from(max_n), ok) as u32)
}

/// The least x in [lo, hi] for which `ok` holds, where `ok` is monotone
/// (false up to some point, true from there) and holds at `hi`.
fn least_true(mut lo: u64, mut hi: u64, ok: impl Fn(u64) -> bool) -> u64 {
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if ok(mid) {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    lo
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
    let hi = 60_000_000u64;
    if !ok(hi) {
        return None;
    }
    at(least_true(1, hi, ok))
}

/// Basham's rule for a packet stream: buffers = rate × longest service
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
            "buffers = rate × gap, gap = {} exceeded once per {} ({})",
            match m.metric {
                punctual_record::Metric::Latency | punctual_record::Metric::Response =>
                    "sample period + wake-up latency",
                _ => "the series' own gap",
            },
            crate::model::human_secs(target_s),
            if gap.extrapolated {
                "extrapolated"
            } else {
                "observed"
            }
        ),
        gap,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tail::poisson_ci95;
    use punctual_record::{Metric, Recorder, Series};

    /// A 1 ms timer where one wake-up in ten is late by 0.8 ms and the
    /// rest by 0.45 ms (no latency reaches twice the median, so the record
    /// shows no stall process): for n = 2, t = 1 ms, c = 0.5 ms the slack
    /// is 0.5 ms and P = 0.1. Cota-Robles & Held: MTTF = 10 ms. The queue: the same
    /// probability per wake-up, but each underrun also skips a period, so
    /// 0.1 underruns per 1.1 ms: 11 ms.
    #[test]
    fn mttf_formula_on_a_synthetic_histogram() {
        let mut r = Recorder::new(Nanos(1000)).with_sample_period(Nanos::from_ms(1));
        for i in 0..100_000u64 {
            r.record(Nanos::from_us(if i % 10 == 0 { 800 } else { 450 }));
        }
        let s = r.to_series("cpu0.latency", Metric::Latency);
        let m = TailModel::new(&s, Nanos::ZERO).unwrap();
        let b = Buffering::new(2, Nanos::from_ms(1), Compute::Time(Nanos::from_us(500)));
        let x = mttf(&m, &b).unwrap();
        assert_eq!(x.slack_ns, Nanos::from_us(500));
        assert!(!x.extrapolated);
        assert_eq!(x.queue.stalls.rate_per_s, 0.0);
        assert!((x.exceedance.probability - 0.1).abs() < 1e-12);
        assert!((x.first_order_mttf_seconds.unwrap() - 0.010).abs() < 1e-9);
        assert!((x.exceedance_rate_per_s * 3600.0 - 360_000.0).abs() < 1e-3);
        assert!((x.mttf_seconds.unwrap() - 0.011).abs() < 1e-9);
        assert!((x.failures_per_hour - 3600.0 / 0.011).abs() < 1e-3);
        let (lo, hi) = (
            x.mttf_ci_low_seconds.unwrap(),
            x.mttf_ci_high_seconds.unwrap(),
        );
        assert!(lo < 0.011 && 0.011 < hi, "{lo} {hi}");
        // Fraction compute gives the same slack.
        let bf = Buffering::new(2, Nanos::from_ms(1), Compute::Fraction(0.5));
        assert_eq!(mttf(&m, &bf).unwrap().slack_ns, Nanos::from_us(500));
        // A consumer waking every 2 ms: same probability, half the rate.
        let b2 = Buffering::new(2, Nanos::from_ms(2), Compute::Time(Nanos::from_us(1500)));
        let x2 = mttf(&m, &b2).unwrap();
        assert!((x2.first_order_mttf_seconds.unwrap() - 0.020).abs() < 1e-9);
        assert!((x2.mttf_seconds.unwrap() - 0.022).abs() < 1e-9);
        assert!(x2.assumptions.iter().any(|a| a.contains("sampled every")));
        // 3 × 1 ms, c = 0.5 ms: a 0.8 ms wake-up ends at 1.3 ms, the
        // 0.3 ms it carries over is absorbed: never.
        let b3 = Buffering::new(3, Nanos::from_ms(1), Compute::Time(Nanos::from_us(500)));
        let x3 = mttf(&m, &b3).unwrap();
        assert!(x3.exceedance.observed_count == 0);
        assert_eq!(x3.mttf_seconds, None);
        // Sizing finds 3 buffers for a 1 h target, and a length for 2.
        let least = least_buffers(&m, &b, 3600.0, 16).unwrap();
        assert_eq!(least.buffering.buffers, 3);
        let t = least_len(&m, &b, 3600.0).unwrap();
        assert!(t.slack_ns > Nanos::from_us(800), "{:?}", t.slack_ns);
        let rows = sweep(&m, &b, 4);
        assert!(rows.len() == 3);
        assert_eq!(rows[1].mttf_seconds, None);
        assert_eq!(rows[0].mttf_seconds, x.mttf_seconds);
    }

    /// The injector case in closed form: a 1 ms burst every 10.37 ms gives
    /// wake-up latencies uniform on 0–1 ms for 1 in 10.37 wake-ups. For
    /// 2 × 1 ms with c = 0.5 ms, Cota-Robles & Held: P(L > 0.5 ms) = 0.5/10.37 =
    /// 4.8 %, MTTF ≈ 21 ms. The queue adds bursts that start during the
    /// 0.5 ms of compute (another 4.8 %, less the 0.2 % where both
    /// happen): p ≈ 0.094 per wake-up, each underrun skipping a period,
    /// MTTF ≈ 1 ms × (1 + p) / p ≈ 11.6 ms.
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
        let mt = x.first_order_mttf_seconds.unwrap();
        assert!((mt - 0.0207).abs() < 0.0015, "{mt}");
        let q = x.mttf_seconds.unwrap();
        assert!((q - 0.0116).abs() < 0.001, "{q}");
    }

    /// 20 stalls of 3 ms in 100 s: the underruns they imply are about as
    /// many as the stalls, so the error in the stall rate matters as much
    /// as the counting error of the underruns, and the interval is that
    /// of about half the count (1/k_e = 1/k + 1/n_s), wider than Poisson
    /// counting alone would give.
    #[test]
    fn interval_counts_the_error_in_the_stall_process() {
        let mut r = Recorder::new(Nanos(1000)).with_sample_period(Nanos::from_ms(1));
        for i in 0..100_000u64 {
            r.record(Nanos::from_us(if i % 5000 == 0 {
                3000
            } else {
                20 + i % 7
            }));
        }
        let s = r.to_series("cpu0.latency", Metric::Latency);
        let m = TailModel::new(&s, Nanos::ZERO).unwrap();
        let b = Buffering::new(2, Nanos::from_ms(1), Compute::Time(Nanos::from_us(500)));
        let x = mttf(&m, &b).unwrap();
        let k_eff = x.queue.underrun_probability * 100_000.0;
        let n_s = stall_count(&m, &x.queue.stalls);
        assert!(n_s >= 20.0, "{n_s}");
        let (_, hi_counting) = poisson_ci95(k_eff.round() as u64);
        let hi_ratio = x.rate_ci_high_per_s / x.queue.rate_per_s;
        assert!(
            hi_ratio > 1.15 * hi_counting / k_eff,
            "{hi_ratio} vs {}",
            hi_counting / k_eff
        );
        let k_e = 1.0 / (1.0 / k_eff + 1.0 / n_s);
        let (_, hi_e) = poisson_ci95(k_e.round() as u64);
        assert!(
            (hi_ratio - hi_e / k_e).abs() < 1e-9 * hi_ratio,
            "{hi_ratio} vs {}",
            hi_e / k_e
        );
    }

    /// Three stalls of 10 ms seen as runs of ten consecutive late
    /// wake-ups (a queued probe) are three events, not thirty; isolated
    /// late wake-ups are one each; no log counts every wake-up.
    #[test]
    fn runs_of_late_wake_ups_count_once() {
        let mut r = Recorder::new(Nanos(1000)).with_sample_period(Nanos::from_ms(1));
        r.record(Nanos::from_us(20));
        let s = r.to_series("cpu0.latency", Metric::Latency);
        let mut m = TailModel::new(&s, Nanos::ZERO).unwrap();
        assert_eq!(run_length(&m, Nanos::from_us(500)), 1.0);
        for start in [1_000u64, 5_000, 9_000] {
            for k in 0..10u64 {
                m.spike_log
                    .push((Nanos::from_ms(start + k), Nanos::from_ms(10 - k)));
            }
        }
        assert!((run_length(&m, Nanos::from_us(500)) - 10.0).abs() < 1e-12);
        // Above 5 ms only the first five of each run: still three runs.
        assert!((run_length(&m, Nanos::from_ms(5)) - 5.0).abs() < 1e-12);
        m.spike_log = (0..10u64)
            .map(|i| (Nanos::from_ms(100 * i), Nanos::from_ms(3)))
            .collect();
        assert_eq!(run_length(&m, Nanos::from_us(500)), 1.0);
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

    /// Basham's VMBus note: a 10 ms gap and 65 500 packets/s need 655 buffers.
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

    /// A 1 ms timer record with 8 wake-ups 3 ms late says that a timer
    /// record cannot see those stalls' length; one whose latest wake-up
    /// is within its period says nothing.
    #[test]
    fn stalls_longer_than_the_period_are_named() {
        let build = |late: Nanos| {
            let mut r = Recorder::new(Nanos(1000)).with_sample_period(Nanos::from_ms(1));
            for i in 0..10_000u64 {
                r.record(if i % 1400 == 0 {
                    late
                } else {
                    Nanos::from_us(20)
                });
            }
            TailModel::new(&r.to_series("cpu0.latency", Metric::Latency), Nanos::ZERO).unwrap()
        };
        let b = Buffering::new(3, Nanos::from_ms(1), Compute::Time(Nanos::from_us(500)));
        let says = |m: &TailModel| {
            mttf(m, &b)
                .unwrap()
                .assumptions
                .iter()
                .find(|a| a.contains("later than the probe's"))
                .cloned()
        };
        let a = says(&build(Nanos::from_ms(3))).expect("named");
        assert!(
            a.starts_with("8 wake-ups were later than the probe's 1ms period"),
            "{a}"
        );
        assert_eq!(says(&build(Nanos::from_us(900))), None);
    }

    /// 20 stalls of 5 ms in 100 s, each seen by a 1 ms probe as one
    /// wake-up 4.5 ms late and four swallowed periods (all in the spike
    /// log). For 3 × 1 ms, c = 0.5 ms every such stall is one underrun
    /// wherever it begins: during the compute it stretches it past the
    /// deadline, during the sleep it delays the wake-up as far. So the
    /// rate is the stall rate, 0.2/s. Taking the probe's late wake-ups,
    /// which see every stall that began within its 1 ms period, as the
    /// consumer's, which sleeps only 0.5 ms, and charging the computes
    /// with the stall process as well counts the stalls that begin during
    /// a compute twice: 1.5 × the rate.
    #[test]
    fn a_stall_is_charged_once_to_a_consumer_that_sleeps_t_minus_c() {
        let mut r = Recorder::new(Nanos(1000)).with_sample_period(Nanos::from_ms(1));
        let mut log = Vec::new();
        for i in 0..100_000u64 {
            if i % 5000 == 2500 {
                r.record(Nanos::from_us(4520));
                log.push((Nanos::from_ms(i), Nanos::from_us(4520)));
            } else if i % 5000 > 2500 && i % 5000 <= 2504 {
                // Swallowed by the stall: missed periods, not latencies.
            } else {
                r.record(Nanos::from_us(20 + i % 7));
            }
        }
        let s = r.to_series("cpu0.latency", Metric::Latency);
        let mut m = TailModel::new(&s, Nanos::from_secs(100)).unwrap();
        m.spike_log = log;
        let b = Buffering::new(3, Nanos::from_ms(1), Compute::Time(Nanos::from_us(500)));
        let x = mttf(&m, &b).unwrap();
        let rate = x.underrun_rate_per_s;
        assert!((rate - 0.2).abs() < 0.2 * 0.1, "{rate}/s");
        // The same stall process with the probe's late wake-ups as they are.
        let extra = swallowed_wake_ups(&m).unwrap();
        assert_eq!(extra.len(), 20 * 4);
        let st = queue::StallModel::from_tail(&m.tail.with_extra(&extra));
        let twice = queue::forecast_with(&m.tail, &st, None, &b).rate_per_s;
        assert!(twice > 1.35 * 0.2, "{twice}/s");
    }

    /// 100 s of a 1 ms timer: a 4.52 ms stall every 5 s, counted as one
    /// late wake-up and the four periods it swallowed (as the live timer
    /// counts them), and 20–26 µs wake-ups otherwise.
    fn stalls_with_missed_periods() -> Series {
        let mut r = Recorder::new(Nanos(1000)).with_sample_period(Nanos::from_ms(1));
        for i in 0..100_000u64 {
            if i % 5000 == 2500 {
                r.record(Nanos::from_us(4520));
                r.add_missed(4);
            } else if i % 5000 > 2500 && i % 5000 <= 2504 {
            } else {
                r.record(Nanos::from_us(20 + i % 7));
            }
        }
        r.to_series("cpu0.latency", Metric::Latency)
    }

    /// The record of the test above without its spike log: where the
    /// probe counted the four periods each stall swallowed as missed (as
    /// the live timer does, ⌊4.52 ms / 1 ms⌋ per stall), the histogram
    /// places them and the forecast is the same 0.2/s, one underrun per
    /// stall, and says where it placed them from; where the record's
    /// missed count is not what its wake-ups imply (here none counted),
    /// they cannot be placed, the stall lengths are read short, and the
    /// forecast says so.
    #[test]
    fn missed_periods_place_a_long_stall_without_a_spike_log() {
        let s = stalls_with_missed_periods();
        let b = Buffering::new(3, Nanos::from_ms(1), Compute::Time(Nanos::from_us(500)));
        let m = TailModel::new(&s, Nanos::from_secs(100)).unwrap();
        assert!(m.spike_log.is_empty());
        assert_eq!(swallowed_wake_ups(&m).map(|e| e.len()), Some(80));
        let x = mttf(&m, &b).unwrap();
        assert!(
            (x.underrun_rate_per_s - 0.2).abs() < 0.2 * 0.1,
            "{}/s",
            x.underrun_rate_per_s
        );
        let said = |x: &Mttf| {
            x.assumptions
                .iter()
                .find(|a| a.contains("later than the probe's"))
                .cloned()
                .unwrap()
        };
        assert!(
            said(&x).contains("placed from the record's missed-period count"),
            "{}",
            said(&x)
        );
        // Twenty stalls, each one underrun: the interval is that of about
        // twenty events (Poisson: 0.61–1.54 of the rate), neither that of
        // the hundred wake-ups they were seen in (each swallowed period
        // redrawn as an event of its own gave 0.77–1.28) nor that of
        // ten (this bootstrap and the underrun count both added:
        // 0.48–1.84). Forty replicates estimate a variance to about
        // ±25 %: 16–30 events.
        let (lo16, hi16) = poisson_ci95(16);
        let (lo30, hi30) = poisson_ci95(30);
        let hi = x.rate_ci_high_per_s / x.underrun_rate_per_s;
        let lo = x.rate_ci_low_per_s / x.underrun_rate_per_s;
        assert!(hi > hi30 / 30.0 && hi < hi16 / 16.0, "{lo}-{hi}");
        assert!(lo < lo30 / 30.0 && lo > lo16 / 16.0, "{lo}-{hi}");
        // Every such stall underruns whatever its exact length: the count
        // decides, and nothing is said about the lengths (4.5 ms stalls are
        // not near the 1.5 ms slack either).
        assert!(!x
            .assumptions
            .iter()
            .any(|a| a.contains("end within one period")));
        assert!(!x
            .assumptions
            .iter()
            .any(|a| a.contains("hangs on the stall lengths")));
        let mut blind = s.clone();
        blind.missed = 0;
        let m = TailModel::new(&blind, Nanos::from_secs(100)).unwrap();
        assert_eq!(swallowed_wake_ups(&m), None);
        let y = mttf(&m, &b).unwrap();
        assert!(said(&y).contains("cannot be placed"), "{}", said(&y));
        assert!(y.queue.stalls.rate_per_s < x.queue.stalls.rate_per_s);
    }

    /// `stall_boot_from` holds the wake-ups below it out of the stall
    /// model's bootstrap: a level under every stall leaves the interval
    /// byte for byte, one above every stall leaves nothing to redraw, and
    /// the interval falls back to the two counts (wider here: twenty
    /// stalls and about twenty events of underrun size, ten together).
    #[test]
    fn the_stall_bootstrap_redraws_from_the_level_it_is_given() {
        let s = stalls_with_missed_periods();
        let b = Buffering::new(3, Nanos::from_ms(1), Compute::Time(Nanos::from_us(500)));
        let mut m = TailModel::new(&s, Nanos::from_secs(100)).unwrap();
        let whole = mttf(&m, &b).unwrap();
        m.stall_boot_from = Some(Nanos::from_ms(4));
        let held_below = mttf(&m, &b).unwrap();
        assert_eq!(
            (held_below.rate_ci_low_per_s, held_below.rate_ci_high_per_s),
            (whole.rate_ci_low_per_s, whole.rate_ci_high_per_s)
        );
        m.stall_boot_from = Some(Nanos::from_ms(5));
        let held_all = mttf(&m, &b).unwrap();
        assert_eq!(held_all.underrun_rate_per_s, whole.underrun_rate_per_s);
        let width = |x: &Mttf| x.rate_ci_high_per_s / x.rate_ci_low_per_s;
        assert!(
            width(&held_all) > 1.2 * width(&whole),
            "{} vs {}",
            width(&held_all),
            width(&whole)
        );
    }

    /// Stalls of 1.9–2.1 ms, 20 a second, under a 1 ms probe, for 2 × 3 ms
    /// buffers with c = 1 ms: a stall during the compute underruns when
    /// it is longer than the 2 ms left, so whether a stall underruns is
    /// decided by the few µs the record reads its length to. The interval
    /// then counts the error in the stall lengths (the bootstrap of the
    /// stall model), which is larger than that of their count alone.
    #[test]
    fn stall_lengths_near_the_slack_widen_the_interval() {
        let mut r = Recorder::new(Nanos(1000)).with_sample_period(Nanos::from_ms(1));
        let mut rng = crate::rng::SplitMix64::new(7);
        let mut i = 0u64;
        while i < 100_000 {
            if i % 50 == 25 {
                let g = 1_900_000 + (rng.uniform_open() * 200_000.0) as u64;
                let v = g - (rng.uniform_open() * 1_000_000.0) as u64;
                r.record(Nanos(v));
                r.add_missed(v / 1_000_000);
                i += 1 + v / 1_000_000;
            } else {
                r.record(Nanos::from_us(20 + i % 7));
                i += 1;
            }
        }
        let s = r.to_series("cpu0.latency", Metric::Latency);
        let m = TailModel::new(&s, Nanos::from_secs(100)).unwrap();
        let b = Buffering::new(2, Nanos::from_ms(3), Compute::Time(Nanos::from_ms(1)));
        let x = mttf(&m, &b).unwrap();
        let var = stall_model_variance(&m.tail, &x.queue, Nanos::ZERO, None, |t| {
            let st = queue::StallModel::from_tail(&t.with_extra(&swallowed_in(t, 1_000_000)));
            queue::forecast_sleeping(&m.tail, &st, None, &b, true).rate_per_s
        })
        .unwrap()
        .variance;
        let n_s = stall_count(&m, &x.queue.stalls) / run_length(&m, x.queue.stalls.threshold_ns);
        assert!(var > 2.0 / n_s, "bootstrap {var}, count {}", 1.0 / n_s);
        let width = x.rate_ci_high_per_s / x.rate_ci_low_per_s;
        assert!(width > 1.0 + 4.0 * var.sqrt(), "{width} {var}");
        assert!(
            x.assumptions
                .iter()
                .any(|a| a.contains("hangs on the stall lengths")),
            "{:#?}",
            x.assumptions
        );
        // Stalls of about 2 ms against a 2 ms slack: the timer alone cannot
        // decide them, and the forecast says so.
        assert!(
            x.assumptions
                .iter()
                .any(|a| a.contains("end within one period of the 2ms slack")),
            "{:#?}",
            x.assumptions
        );
    }

    /// 100 s of a 1 ms probe with 40 late wake-ups of 3 ms: spread one
    /// every 2.5 s, their counts across the ten windows are all 4
    /// (dispersion 1, Poisson's interval); all 40 within the first 10 s (a
    /// storm), the counts are 40, 0, …, 0: variance 160, dispersion 40,
    /// and the interval is that of a count 40 times smaller.
    #[test]
    fn storms_widen_the_interval_by_their_dispersion() {
        let mut r = Recorder::new(Nanos(1000)).with_sample_period(Nanos::from_ms(1));
        for i in 0..100_000u64 {
            r.record(if i % 2500 == 0 {
                Nanos::from_ms(3)
            } else {
                Nanos::from_us(20)
            });
        }
        let s = r.to_series("cpu0.latency", Metric::Latency);
        let mut m = TailModel::new(&s, Nanos::ZERO).unwrap();
        m.spike_log = (0..40u64)
            .map(|i| (Nanos::from_ms(2500 * i), Nanos::from_ms(3)))
            .collect();
        assert_eq!(dispersion(&m, Nanos::from_us(500)), 1.0);
        let b = Buffering::new(3, Nanos::from_ms(1), Compute::Time(Nanos::from_us(500)));
        let even = mttf(&m, &b).unwrap();
        m.spike_log = (0..40u64)
            .map(|i| (Nanos::from_ms(200 * i), Nanos::from_ms(3)))
            .collect();
        assert!((dispersion(&m, Nanos::from_us(500)) - 40.0).abs() < 1e-9);
        let storm = mttf(&m, &b).unwrap();
        assert_eq!(even.underrun_rate_per_s, storm.underrun_rate_per_s);
        let width = |x: &Mttf| x.rate_ci_high_per_s / x.rate_ci_low_per_s.max(1e-300);
        assert!(
            width(&storm) > 3.0 * width(&even),
            "{} vs {}",
            width(&storm),
            width(&even)
        );
        // A bounded log that lost some of them cannot say how they spread.
        m.spike_log.truncate(30);
        assert_eq!(dispersion(&m, Nanos::from_us(500)), 1.0);
    }
}
