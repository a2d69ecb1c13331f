//! The buffered consumer as a queue: a Lindley recursion evaluated
//! exactly as a Markov chain over its discretized backlog.
//!
//! Cota-Robles & Held's formula (an underrun whenever one wake-up is later than the
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

use crate::model::Buffering;
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
    /// least concave majorant of the latency CDF (or, from a noise
    /// record, the gap histogram's buckets).
    #[serde(skip)]
    pub lengths: Vec<(f64, f64)>,
    /// Set when the stalls were counted by a running thread (a noise
    /// record's gap histogram) instead of inferred from the latency tail;
    /// absent (and not serialized) otherwise, so forecasts without a
    /// noise record are unchanged.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub noise: Option<NoiseStalls>,
}

/// Where a stall model measured from a running thread came from: a
/// sleeping thread's latency tail cannot tell the cost of waking it from
/// time stolen while it runs (docs/forecast.md §3.4), a busy loop that
/// timestamps its own gaps measures only the latter.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct NoiseStalls {
    /// The noise record's gap series, e.g. `cpu0.gap`.
    pub series: String,
    /// Gaps above the probe's threshold (the histogram's count).
    pub gaps: u64,
    /// Time the polling loop ran and was not stolen: the denominator of
    /// the rate, because a compute of c meets stalls per unit of its own
    /// running time.
    pub running_ns: Nanos,
    /// The probe's stolen-gap threshold: shorter steps were not counted.
    pub gap_threshold_ns: Nanos,
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
            noise: None,
        }
    }

    /// The stall process as a running thread measured it: `gaps` is the
    /// noise probe's histogram of stolen intervals (all above its
    /// threshold), `running_ns` the loop's observed time minus the stolen
    /// total. Rate = gaps / running time, lengths = the histogram's
    /// buckets, each at its middle (capped at the maximum): gaps are a
    /// few µs, so the upper edge the chain uses for latencies would add
    /// ~0.5 µs to each, 5–25 % of the stolen time, all of it bias. No
    /// residual-life inference. `wake` (the timer tail's own model) only
    /// lends its median and threshold, which split the timer's wake-ups
    /// into quiet and stalled ones (a step whose wake-up was already late
    /// by a stall is not charged another).
    pub fn from_gaps(
        gaps: &Tail,
        running_ns: Nanos,
        gap_threshold_ns: Nanos,
        series: &str,
        wake: &StallModel,
    ) -> StallModel {
        let n = gaps.n;
        let mut lengths = Vec::new();
        if n > 0 {
            for &(lo, cnt) in gaps.buckets() {
                if cnt == 0 {
                    continue;
                }
                let len = (lo + gaps.bucket_ns / 2).min(gaps.max.0.max(lo));
                lengths.push((len as f64, cnt as f64 / n as f64));
            }
        }
        let rate_per_s = if running_ns.is_zero() {
            0.0
        } else {
            n as f64 / running_ns.as_secs_f64()
        };
        let mean_ns: f64 = lengths.iter().map(|(l, s)| l * s).sum();
        StallModel {
            base_ns: wake.base_ns,
            threshold_ns: wake.threshold_ns,
            rate_per_s,
            mean_ns,
            time_fraction: rate_per_s * mean_ns / 1e9,
            lengths,
            noise: Some(NoiseStalls {
                series: series.to_string(),
                gaps: n,
                running_ns,
                gap_threshold_ns,
            }),
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
    /// When stalls come, from the spike log (None: Poisson arrivals).
    pub renewal: Option<Renewal>,
    /// The stalled wake-ups were taken from the stall model for a
    /// consumer asleep t − c of each period (`forecast_sleeping`), not
    /// from the record's late wake-ups as they are.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub consumer_sleep: bool,
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
fn stolen_pmf(st: &StallModel, rate_scale: f64, c_ns: f64, grid: f64, cap: usize) -> Vec<f64> {
    let mut out = vec![0.0; cap + 1];
    // Mean number of stalls; beyond ~700 exp() underflows, and a compute
    // hit by hundreds of stalls is overloaded anyway.
    let mu = (st.rate_per_s * rate_scale * c_ns / 1e9).min(700.0);
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

/// When the stalls came: the record's spike log time stamps, kept apart
/// from the histogram because the histogram cannot tell a periodic
/// interferer from a random one with the same rate, and which one it is
/// decides whether two stalls can fall within a few periods of each
/// other (what an underrun with n ≥ 3 takes).
#[derive(Clone, Debug, PartialEq)]
pub struct StallTimes {
    /// (time, latency) of every logged wake-up, in time order.
    spikes: Vec<(u64, u64)>,
    /// The log keeps the largest events: every latency strictly above
    /// this is in it (0 when nothing was dropped).
    complete_above_ns: u64,
    /// Time the series covered (samples × interval): pairs are counted
    /// against it.
    covered_ns: f64,
    /// The probe's interval: it sees a stall only when a wake-up falls
    /// into it.
    interval_ns: f64,
    /// Use the times only if the logged stalls come at a fixed period
    /// ([`crate::periodic::detect`]); otherwise arrivals stay Poisson.
    periodic_only: bool,
    /// The source each logged wake-up is attributed to (the largest of
    /// its causes), in the order of `spikes`; `None` where the log names
    /// none. Empty: the log names no sources.
    sources: Vec<Option<String>>,
    /// The source whose own stalls come at the period the arrivals
    /// replay, when it is not every logged stall: the others stay the
    /// Poisson rest. Taking another source out of the record then leaves
    /// this one's period as it was, and taking this one out leaves the
    /// rest as Poisson on both sides of the edit.
    periodic_source: Option<String>,
    /// Diagnostics of the periodic phase model's split (the calibration's
    /// `CAL_REST` and `CAL_BURST_CAP`, docs/forecast.md §3.3); the default
    /// changes nothing.
    pub diagnostic: PhaseDiagnostic,
}

/// What the calibration substitutes in the periodic phase model's split
/// of a record's stall model, to tell which part of it a bias comes from
/// (docs/forecast.md §3.3). Not used by any command.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PhaseDiagnostic {
    /// The rest replaced by Poisson stalls at this rate (per second) with
    /// exponential lengths of this mean: the shape's own, where the
    /// record's estimate of the rest is in question.
    pub rest: Option<(f64, Nanos)>,
    /// The bursts' lengths above this multiple of their median dropped:
    /// the record's unions of a burst and a stall that overlapped it.
    pub burst_cap: Option<f64>,
    /// With `burst_cap`: the dropped lengths handed to the rest instead,
    /// as Poisson stalls of the part that outlasts the burst's median.
    pub tail_to_rest: bool,
    /// The split that takes the record's unions of a burst and a rest
    /// stall out of the bursts ([`hand_unions_to_rest`]).
    pub split_unions: bool,
    /// The chain's burst step extended by the rest stalls that overlap
    /// the burst ([`union_lengths`]).
    pub chain_unions: bool,
    /// With `split_unions`: the rest's stall model as the least concave
    /// majorant has it at the left ends of its monotone pieces, without
    /// [`boundary_point`]'s correction.
    pub raw_ends: bool,
}

impl PhaseDiagnostic {
    /// The rest replaced by the Poisson stalls given: exponential lengths
    /// at 400 equal-share quantiles.
    fn substitute_rest(&self, rest: &mut AgeStalls) {
        if let Some((rate, mean)) = self.rest {
            let mean_ns = mean.0 as f64;
            let k = 400;
            rest.stalls.lengths = (0..k)
                .map(|i| {
                    let p = (i as f64 + 0.5) / k as f64;
                    (-mean_ns * (1.0 - p).ln(), 1.0 / k as f64)
                })
                .collect();
            rest.stalls.rate_per_s = rate;
            rest.stalls.mean_ns = mean_ns;
            rest.stalls.time_fraction = rate * mean_ns / 1e9;
        }
    }

    /// The bursts above `burst_cap` times their median dropped, or handed
    /// to the rest as the part that outlasts the median (`tail_to_rest`).
    fn cap_bursts(&self, burst: &mut Vec<(f64, f64)>, burst_sum: f64, rest: &mut AgeStalls) {
        if let Some(f) = self.burst_cap {
            let median = share_quantile(burst, 0.5);
            if self.tail_to_rest {
                let moved: Vec<(f64, f64)> = burst
                    .iter()
                    .filter(|&&(y, _)| y > f * median)
                    .map(|&(y, sh)| (y - median, sh * burst_sum))
                    .collect();
                let add: f64 = moved.iter().map(|(_, r)| r).sum();
                let r0 = rest.stalls.rate_per_s;
                let total = r0 + add;
                if total > 0.0 {
                    let mut lengths: Vec<(f64, f64)> = rest
                        .stalls
                        .lengths
                        .iter()
                        .map(|&(y, sh)| (y, sh * r0 / total))
                        .chain(moved.iter().map(|&(y, r)| (y, r / total)))
                        .collect();
                    lengths.sort_by(|a, b| a.0.total_cmp(&b.0));
                    rest.stalls.mean_ns = lengths.iter().map(|(y, sh)| y * sh).sum();
                    rest.stalls.rate_per_s = total;
                    rest.stalls.time_fraction = total * rest.stalls.mean_ns / 1e9;
                    rest.stalls.lengths = lengths;
                }
            }
            burst.retain(|&(y, _)| y <= f * median);
            let kept: f64 = burst.iter().map(|(_, sh)| sh).sum();
            burst.iter_mut().for_each(|(_, sh)| *sh /= kept);
        }
    }
}

impl StallTimes {
    /// `spikes` as (time, latency) of one CPU's wake-ups; `dropped` says
    /// whether the bounded log dropped any (then only latencies above the
    /// smallest kept one are complete); `covered` is the time the series
    /// spans, gaps between probe runs excluded.
    pub fn new(
        spikes: impl IntoIterator<Item = (Nanos, Nanos)>,
        dropped: bool,
        covered: Nanos,
        interval: Nanos,
    ) -> Option<StallTimes> {
        let v: Vec<(Nanos, Nanos)> = spikes.into_iter().collect();
        let complete_above = if dropped {
            v.iter().map(|&(_, l)| l).min().unwrap_or(Nanos::ZERO)
        } else {
            Nanos::ZERO
        };
        StallTimes::labelled(
            v.into_iter().map(|(a, l)| (a, l, None)),
            complete_above,
            covered,
            interval,
        )
    }

    /// As [`new`](Self::new), with the level above which the log holds
    /// every wake-up given, and each wake-up with the source its lateness
    /// is attributed to, so that a period can be read per source
    /// ([`into_periodic`](Self::into_periodic)). A log edited after it was
    /// taken (a source's time taken out of its spikes) is still complete
    /// only above the level the bounded log kept: the wake-ups it dropped
    /// were below that and no edit brings them back, while its own
    /// smallest entry may now lie far below it.
    pub fn labelled(
        spikes: impl IntoIterator<Item = (Nanos, Nanos, Option<String>)>,
        complete_above: Nanos,
        covered: Nanos,
        interval: Nanos,
    ) -> Option<StallTimes> {
        let mut v: Vec<(u64, u64, Option<String>)> =
            spikes.into_iter().map(|(a, l, s)| (a.0, l.0, s)).collect();
        if v.is_empty() || covered.is_zero() || interval.is_zero() {
            return None;
        }
        v.sort_unstable();
        let sources: Vec<Option<String>> = if v.iter().any(|x| x.2.is_some()) {
            v.iter_mut().map(|x| x.2.take()).collect()
        } else {
            Vec::new()
        };
        Some(StallTimes {
            spikes: v.into_iter().map(|(a, l, _)| (a, l)).collect(),
            complete_above_ns: complete_above.0,
            covered_ns: covered.0 as f64,
            interval_ns: interval.0 as f64,
            periodic_only: false,
            sources,
            periodic_source: None,
            diagnostic: PhaseDiagnostic::default(),
        })
    }

    /// (time, latency) of the logged wake-ups above `level` that belong
    /// to `source` (all of them when `None`).
    fn logged_above<'a>(
        &'a self,
        level: u64,
        source: Option<&'a str>,
    ) -> impl Iterator<Item = (u64, u64)> + 'a {
        self.spikes
            .iter()
            .enumerate()
            .filter(move |&(i, &(_, l))| {
                l > level
                    && source
                        .is_none_or(|s| self.sources.get(i).and_then(|x| x.as_deref()) == Some(s))
            })
            .map(|(_, &x)| x)
    }

    /// As [`new`](Self::new), but the times are used only where the
    /// logged stalls come at a fixed period; `None` when those above the
    /// log's completeness level do not (the queue model's default: a
    /// periodic interferer never stalls twice within one period, and only
    /// a clear period is trusted to say so).
    pub fn periodic(
        spikes: impl IntoIterator<Item = (Nanos, Nanos)>,
        dropped: bool,
        covered: Nanos,
        interval: Nanos,
    ) -> Option<StallTimes> {
        let st = StallTimes::new(spikes, dropped, covered, interval)?;
        st.into_periodic()
    }

    /// These times, used only where the logged stalls above the log's
    /// completeness level come at a fixed period (`None` otherwise), as
    /// [`periodic`](Self::periodic).
    ///
    /// Where the log names sources, the period is read per source: the
    /// source with the most logged stalls among those whose own stalls
    /// come at a period is replayed periodically, the rest staying
    /// Poisson. A period read from the whole log instead holds every
    /// source's stalls to it, the random ones too, so taking the periodic
    /// source out of the record (a reservation above a FIFO 99 thread)
    /// left the others forecast as Poisson arrivals, which cluster more
    /// than the record's forecast had them, and predicted a shorter MTTF
    /// for a fix that only takes stalls away. Where the periodic source
    /// holds every logged stall, the two readings are the same; where no
    /// single source shows a period but the whole log does, the whole
    /// log's is kept.
    pub fn into_periodic(mut self) -> Option<StallTimes> {
        let level = self.complete_above_ns;
        let all: Vec<u64> = self.logged_above(level, None).map(|(a, _)| a).collect();
        let mut names: Vec<&str> = self.sources.iter().flatten().map(String::as_str).collect();
        names.sort_unstable();
        names.dedup();
        let mut best: Option<(usize, f64, &str)> = None;
        for name in names {
            let at: Vec<u64> = self
                .logged_above(level, Some(name))
                .map(|(a, _)| a)
                .collect();
            if let Some(p) = crate::periodic::detect(&at, self.interval_ns) {
                if best.is_none_or(|(n, z, _)| (at.len(), p.z) > (n, z)) {
                    best = Some((at.len(), p.z, name));
                }
            }
        }
        let source = match best {
            Some((n, _, name)) if n < all.len() => Some(name.to_string()),
            Some(_) => None,
            None => {
                crate::periodic::detect(&all, self.interval_ns)?;
                None
            }
        };
        self.periodic_source = source;
        self.periodic_only = true;
        Some(self)
    }

    /// The share of `source`'s stalls among the logged ones whose residue
    /// above `base` lies in each cell up to one of `lengths` (the stall
    /// model's) from the one before: which of the stall model's lengths
    /// are that source's. A residue is at most its stall's length, so
    /// it falls in its stall's cell or below. A cell with no logged stall
    /// gets the source's share of the whole log.
    fn source_share(
        &self,
        source: &str,
        level: u64,
        base: f64,
        lengths: &[(f64, f64)],
    ) -> Vec<f64> {
        let mut own = vec![0.0; lengths.len()];
        let mut every = vec![0.0; lengths.len()];
        let (mut own_all, mut all) = (0.0, 0.0);
        for (i, &(_, l)) in self.spikes.iter().enumerate() {
            if l <= level {
                continue;
            }
            let mine = self.sources.get(i).and_then(|x| x.as_deref()) == Some(source);
            let r = l as f64 - base;
            let cell = lengths
                .partition_point(|&(y, _)| y < r)
                .min(lengths.len() - 1);
            every[cell] += 1.0;
            all += 1.0;
            if mine {
                own[cell] += 1.0;
                own_all += 1.0;
            }
        }
        let overall = if all > 0.0 { own_all / all } else { 0.0 };
        own.iter()
            .zip(&every)
            .map(|(o, e)| if *e > 0.0 { o / e } else { overall })
            .collect()
    }
}

/// Expected pairs (under Poisson arrivals) a lag group needs before its
/// own pair correlation replaces Poisson's 1: fewer and the estimate is
/// mostly noise.
pub const MIN_EXPECTED_PAIRS: f64 = 10.0;
/// Steps after a stall that the chain remembers (its cost grows with
/// them).
pub const MAX_AGE_STEPS: usize = 16;

/// Steps of a period the chain follows the periodic source's phase for
/// (its cost grows with them); a longer period keeps the rate-based ages
/// of [`Renewal::estimate`].
pub const MAX_PHASE_STEPS: usize = 32;

/// A periodic source's phase: the steps since its own last stall, which
/// say when its next one comes, beside the rest of the stall process,
/// which comes at a constant rate and does not move the phase.
#[derive(Clone, Debug, PartialEq)]
pub struct Phase {
    /// Probability that the periodic source stalls in a step a = 1, 2, …
    /// steps after its last stall, given it has not since: 0 before
    /// ⌊P/t⌋, 1 − frac(P/t) at ⌊P/t⌋ and 1 at ⌊P/t⌋ + 1 (the last age).
    pub hazard: Vec<f64>,
    /// The other stalls: Poisson, at every age (with how much likelier
    /// than on average a stalled wake-up is under them alone).
    pub rest: AgeStalls,
    /// The periodic source's own stalls: (length, share).
    pub burst: Vec<(f64, f64)>,
    /// Its period in steps of the consumer, P/t.
    pub period_steps: f64,
    /// Whether the chain extends each burst by the rest stalls that
    /// overlap it ([`union_lengths`]; the calibration's
    /// [`PhaseDiagnostic::chain_unions`]).
    pub unions: bool,
}

/// The stall process as seen from a step some steps after the last
/// stall: its rate and lengths, and how much likelier a stalled wake-up
/// is than on average.
#[derive(Clone, Debug, PartialEq)]
pub struct AgeStalls {
    pub stalls: StallModel,
    pub stalled_wakeup_factor: f64,
    /// Probability that a step at this age has a stall.
    pub step_probability: f64,
}

/// How stalls depend on the time since the last one, read off the spike
/// log's time stamps.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Renewal {
    /// Ages remembered: the last holds every age from there on.
    pub ages: usize,
    /// Logged stalls (above the stall threshold and the log's
    /// completeness level) the pair correlation was read from.
    pub events: usize,
    /// Their rate.
    pub logged_rate_per_s: f64,
    /// Pair correlation g(a·t) of logged stall times a steps apart (1 for
    /// Poisson arrivals), after pooling sparse lags, and the value older
    /// ages get so that the mean stall rate stays the record's.
    pub pair_correlation: Vec<f64>,
    pub older_pair_correlation: f64,
    /// Probability of a stall in a step at each age (the last: older).
    pub hazard: Vec<f64>,
    /// The period the logged stalls came at, when they did
    /// ([`crate::periodic::detect`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub period_ns: Option<f64>,
    /// The source whose own stalls came at that period, when they were
    /// not every logged stall ([`StallTimes::into_periodic`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub periodic_source: Option<String>,
    #[serde(skip)]
    pub by_age: Vec<AgeStalls>,
    /// Where the period is the default arrivals' (and at most
    /// [`MAX_PHASE_STEPS`] steps): the chain's age is the periodic
    /// source's phase, and `by_age` is unused.
    #[serde(skip)]
    pub phase: Option<Phase>,
    /// False where the remembered ages already stall less often than the
    /// record's rate, so that no hazard of the older ages keeps the mean
    /// gap ([`older_hazard`]): they stall at every step and the chain's
    /// rate falls short of the record's (said in the assumptions).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub mean_gap_short: bool,
}

/// Hazard of the ages beyond the remembered ones that keeps the mean
/// number of steps between stalls at 1/q, given the hazards `h` of steps
/// 1 … h.len() after a stall: 1/q = Σ a·f_a + S·(len + 1/h_old) with
/// f_a = h_a·S_(a−1). `None` when no hazard up to 1 can: the remembered
/// ages alone already make the mean gap longer than 1/q, and the caller
/// must say that its rate falls short rather than take 1 as if it kept
/// the mean.
pub fn older_hazard(h: &[f64], q: f64) -> Option<f64> {
    let mut surv = 1.0;
    let mut mean_before = 0.0;
    for (a, ha) in h.iter().enumerate() {
        let f = ha.clamp(0.0, 1.0) * surv;
        mean_before += (a + 1) as f64 * f;
        surv -= f;
    }
    if surv <= 1e-12 || q <= 0.0 {
        return Some(q.clamp(0.0, 1.0));
    }
    let rest = (1.0 / q - mean_before) / surv - h.len() as f64;
    // Within rounding of 1: an older hazard of 1 keeps the mean exactly.
    (rest >= 1.0 - 1e-9).then(|| 1.0 / rest.max(1.0))
}

impl Renewal {
    /// The stall process a steps of `t_ns` after a stall, for a from 1 to
    /// `ages` − 1 (and older), from the spike log.
    ///
    /// The logged stalls' pair correlation g(τ) (pairs at lag τ against
    /// what Poisson arrivals at their rate give) says whether they come
    /// regularly (g < 1: a periodic interferer) or in clusters (g > 1).
    /// The log sees a stall only when a probe wake-up falls into it (and
    /// the residue exceeds the stall threshold), so it sees long stalls
    /// far more often than short ones: its view is length-biased, and
    /// nothing is known about when the stalls it rarely sees come. So the
    /// excess (or deficit) of logged stalls at lag τ, r·(g(τ) − 1) per
    /// second, is added to (taken from) the record's stall process with the
    /// logged stalls' lengths (the model's lengths weighted by the chance
    /// of being seen), and the rest stays Poisson. A periodic interferer
    /// that the probe sees every time leaves no stall of its own length
    /// close behind it, only the others; Poisson arrivals (g = 1) leave the
    /// plain model. Older ages get the g that keeps the mean step gap
    /// between stalls at the Poisson model's.
    pub fn estimate(
        times: &StallTimes,
        stalls: &StallModel,
        p_stalled: f64,
        t_ns: f64,
        c_ns: f64,
        ages: usize,
    ) -> Option<Renewal> {
        if ages < 2 || stalls.rate_per_s <= 0.0 || t_ns <= 0.0 || stalls.lengths.is_empty() {
            return None;
        }
        let level = times.complete_above_ns.max(stalls.threshold_ns.0);
        let source = times.periodic_source.as_deref();
        let at: Vec<f64> = times
            .logged_above(level, source)
            .map(|(a, _)| a as f64)
            .collect();
        let n = at.len();
        if n < 2 {
            return None;
        }
        let whole: Vec<u64> = at.iter().map(|&a| a as u64).collect();
        let period = crate::periodic::detect(&whole, times.interval_ns);
        if times.periodic_only && period.is_none() {
            return None;
        }
        // Lag bins centred on whole steps: ((a − ½)·t, (a + ½)·t].
        let lags = ages - 1;
        let mut pairs = vec![0.0; lags];
        let reach = (lags as f64 + 0.5) * t_ns;
        for i in 0..n {
            for &b in &at[i + 1..] {
                let lag = b - at[i];
                if lag > reach {
                    break;
                }
                let k = (lag / t_ns).round() as usize;
                if (1..=lags).contains(&k) {
                    pairs[k - 1] += 1.0;
                }
            }
        }
        let mut rate = n as f64 / times.covered_ns;
        let expected = n as f64 * rate * t_ns;
        if period.is_none() && expected * lags as f64 <= MIN_EXPECTED_PAIRS {
            return None;
        }
        // Pool neighbouring lags until each group expects enough pairs.
        let per_group = (MIN_EXPECTED_PAIRS / expected).ceil().max(1.0) as usize;
        let mut g = vec![1.0; lags];
        let mut start = 0;
        while start < lags {
            let mut end = (start + per_group).min(lags);
            if lags - end < per_group {
                end = lags;
            }
            let obs: f64 = pairs[start..end].iter().sum();
            let v = obs / (expected * (end - start) as f64);
            g[start..end].iter_mut().for_each(|x| *x = v);
            start = end;
        }
        // A periodic interferer: none of its stalls follows another
        // before one period less the tolerance of a logged time (one
        // probe interval), whatever the pair counts of a bounded log say,
        // and it stalls once per period whether or not the probe saw it
        // (the log misses the bursts no wake-up fell into, and a full log
        // undercounts them): its rate is 1/period.
        if let Some(p) = &period {
            rate = rate.max(1.0 / p.period_ns);
            for (i, x) in g.iter_mut().enumerate() {
                if (i as f64 + 1.5) * t_ns < p.period_ns - times.interval_ns {
                    *x = 0.0;
                } else if times.periodic_only {
                    *x = 1.0;
                }
            }
        }
        // Lengths as the log sees them: a stall of length y leaves a
        // residue above the level for (y − y0) of the interval.
        let base = stalls.base_ns.0 as f64;
        let y0 = level as f64 - base;
        let y_thr = stalls.threshold_ns.0 as f64 - base;
        let mut seen: Vec<f64> = stalls
            .lengths
            .iter()
            .map(|&(y, sh)| sh * ((y - y0).max(0.0) / times.interval_ns).min(1.0))
            .collect();
        // One source's period: only its share of the lengths is taken
        // from the steps after a stall.
        if let Some(src) = source {
            let share = times.source_share(src, level, base, &stalls.lengths);
            seen.iter_mut().zip(&share).for_each(|(s, p)| *s *= p);
        }
        let seen_sum: f64 = seen.iter().sum();
        if seen_sum <= 0.0 {
            return None;
        }
        let lam = stalls.rate_per_s;
        let logged_per_s = rate * 1e9;
        let residue = |m: &[f64]| -> f64 {
            m.iter()
                .zip(&stalls.lengths)
                .map(|(r, &(y, _))| r * (y - y_thr).max(0.0))
                .sum()
        };
        let base_measure: Vec<f64> = stalls.lengths.iter().map(|&(_, sh)| lam * sh).collect();
        let base_residue = residue(&base_measure);
        let of_measure = |measure: &[f64]| -> AgeStalls {
            let total: f64 = measure.iter().sum();
            let factor = if base_residue > 0.0 {
                residue(measure) / base_residue
            } else {
                1.0
            };
            let lengths: Vec<(f64, f64)> = if total > 0.0 {
                stalls
                    .lengths
                    .iter()
                    .zip(measure)
                    .filter(|(_, m)| **m > 0.0)
                    .map(|(&(y, _), m)| (y, m / total))
                    .collect()
            } else {
                Vec::new()
            };
            let mean_ns = lengths.iter().map(|(y, s)| y * s).sum();
            let ps = (p_stalled * factor).min(1.0);
            AgeStalls {
                stalled_wakeup_factor: factor,
                step_probability: 1.0 - (1.0 - ps) * (-total * c_ns / 1e9).exp(),
                stalls: StallModel {
                    rate_per_s: total,
                    mean_ns,
                    time_fraction: total / 1e9 * mean_ns,
                    lengths,
                    ..stalls.clone()
                },
            }
        };
        let at_g = |gv: f64| -> AgeStalls {
            let measure: Vec<f64> = base_measure
                .iter()
                .zip(&seen)
                .map(|(b, s)| (b + logged_per_s * (gv - 1.0) * s / seen_sum).max(0.0))
                .collect();
            of_measure(&measure)
        };
        let q = at_g(1.0).step_probability;
        if q <= 0.0 || q >= 1.0 {
            return None;
        }
        // The default arrivals' period: the chain's age is the source's
        // phase ([`Phase`]), for exactly the ages its period takes.
        let steps = period.as_ref().map(|p| p.period_ns / t_ns).unwrap_or(0.0);
        if times.periodic_only && steps >= 1.0 && (steps.floor() as usize) < MAX_PHASE_STEPS {
            let mut rest_of = rest_measure(&base_measure, &seen, seen_sum, logged_per_s);
            let mut burst_measure: Vec<f64> = base_measure
                .iter()
                .zip(&rest_of)
                .map(|(b, r)| (b - r).max(0.0))
                .collect();
            if times.diagnostic.split_unions {
                hand_unions_to_rest(
                    &stalls.lengths,
                    &mut burst_measure,
                    &mut rest_of,
                    period.as_ref().map_or(0.0, |p| p.period_ns),
                    Ends {
                        threshold_ns: y_thr,
                        wakeups: times.covered_ns / times.interval_ns,
                        corrected: !times.diagnostic.raw_ends,
                    },
                );
            }
            let mut rest = of_measure(&rest_of);
            times.diagnostic.substitute_rest(&mut rest);
            let burst_sum: f64 = burst_measure.iter().sum();
            if burst_sum > 0.0 {
                let m = steps.floor() as usize;
                let frac = steps - m as f64;
                let mut hazard = vec![0.0; m + 1];
                hazard[m - 1] = 1.0 - frac;
                hazard[m] = 1.0;
                let mut burst: Vec<(f64, f64)> = stalls
                    .lengths
                    .iter()
                    .zip(&burst_measure)
                    .filter(|(_, b)| **b > 0.0)
                    .map(|(&(y, _), b)| (y, b / burst_sum))
                    .collect();
                times
                    .diagnostic
                    .cap_bursts(&mut burst, burst_sum, &mut rest);
                return Some(Renewal {
                    ages: m + 1,
                    events: n,
                    logged_rate_per_s: logged_per_s,
                    pair_correlation: g,
                    older_pair_correlation: 1.0,
                    hazard: hazard.clone(),
                    by_age: Vec::new(),
                    period_ns: period.map(|p| p.period_ns),
                    periodic_source: source.map(str::to_string),
                    phase: Some(Phase {
                        hazard,
                        rest,
                        burst,
                        period_steps: steps,
                        unions: times.diagnostic.chain_unions,
                    }),
                    mean_gap_short: false,
                });
            }
        }
        // The chain's age counts steps since a stall of any source, and
        // one source's period speaks only of the steps since its own:
        // an age whose last stall was another source's says nothing of
        // when the periodic one comes. So where the period is one
        // source's beside others, its g is held only in the share of
        // stalled steps that source stalls, and the rest of them see it
        // as Poisson. Beside a disk's interrupts that stall nearly every
        // step, the thread's g of 0 at every young age otherwise took
        // its stalls (and the stalled wake-ups with them) out of nearly
        // every step, and a record with the thread was forecast fewer
        // underruns than without it.
        if source.is_some() {
            let q0 = at_g(0.0).step_probability;
            let own = 1.0 - (1.0 - q) / (1.0 - q0).max(1e-12);
            let pi = (own / q).clamp(0.0, 1.0);
            g.iter_mut().for_each(|x| *x = 1.0 + pi * (*x - 1.0));
        }
        let mut by_age: Vec<AgeStalls> = g.iter().map(|&x| at_g(x)).collect();
        let mut hazard: Vec<f64> = by_age.iter().map(|a| a.step_probability).collect();
        let kept = older_hazard(&hazard, q);
        let want = kept.unwrap_or(1.0);
        // The step probability grows with g: bisect for the older ages.
        let (mut lo, mut hi) = (0.0f64, 1.0f64);
        while at_g(hi).step_probability < want && hi < 1e6 {
            hi *= 2.0;
        }
        for _ in 0..60 {
            let mid = 0.5 * (lo + hi);
            if at_g(mid).step_probability < want {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        let older = 0.5 * (lo + hi);
        let last = at_g(older);
        hazard.push(last.step_probability);
        by_age.push(last);
        Some(Renewal {
            ages,
            events: n,
            logged_rate_per_s: logged_per_s,
            pair_correlation: g,
            older_pair_correlation: older,
            hazard,
            by_age,
            period_ns: period.map(|p| p.period_ns),
            periodic_source: source.map(str::to_string),
            phase: None,
            mean_gap_short: kept.is_none(),
        })
    }
}

/// The stall measure (rate per length) without the logged stalls'
/// `logged_per_s` spread over the lengths as they are `seen`: what is left
/// at a pair correlation of 0.
fn rest_measure(base: &[f64], seen: &[f64], seen_sum: f64, logged_per_s: f64) -> Vec<f64> {
    base.iter()
        .zip(seen)
        .map(|(b, s)| (b - logged_per_s * s / seen_sum).max(0.0))
        .collect()
}

/// Rounds of [`hand_unions_to_rest`]'s fixed point: the unions it takes
/// out depend on the rest it leaves, mostly through the rest's short
/// stalls, which the first round already holds.
const UNION_ROUNDS: usize = 4;

/// The `q` quantile of lengths given as (length, share), ascending: the
/// first length whose cumulative share reaches q of the whole (the
/// longest if rounding leaves it short; 0 for none).
pub(crate) fn share_quantile(lengths: &[(f64, f64)], q: f64) -> f64 {
    let total: f64 = lengths.iter().map(|(_, s)| s).sum();
    let mut acc = 0.0;
    for &(y, s) in lengths {
        acc += s;
        if acc >= q * total {
            return y;
        }
    }
    lengths.last().map_or(0.0, |l| l.0)
}

/// Takes the record's unions of a burst and a rest stall out of the
/// periodic source's bursts, and gives the rest what the bursts hide of
/// it.
///
/// The record's stall model is read from wake-ups, and a wake-up inside
/// a burst that a rest stall overlaps sees one stall, the union, longer
/// than the burst. Split by the log (above), every length the probe sees
/// every time went to the bursts: the unions, and the rest's own stalls
/// longer than the burst, came out as long bursts, and the chain then
/// overlapped the rest with them once more. A chain that makes the
/// unions itself from the rest ([`union_lengths`]) needs the rest whole
/// and the bursts without them, so here:
///
/// * the bursts keep their own cluster, their lengths within Tukey's
///   fences, Q1 − 1.5·(Q3 − Q1) to Q3 + 1.5·(Q3 − Q1) (by share): a
///   source's bursts vary little (the fences close on Q1 and Q3 where
///   they do not vary at all), and unions beside them are rare (about
///   1 % of the bursts in the calibration's tight shapes), far from moving
///   the quartiles; what the log's spread gave them below the cluster is
///   the rest's, at its length;
/// * within the cluster every stall is the source's: there the bursts'
///   latencies are a flat density of 1/P per unit of residue, which no
///   30 s record resolves into a few rest stalls per second beside it,
///   and the least concave majorant pools the rest's shorter stalls into
///   the burst's vertex, where, left to the Poisson rest, they came back
///   as stalls of the burst's length anywhere in the period;
/// * what lies beyond the fence goes to the rest at its whole length (a
///   rest stall that met no burst was seen whole), thinned by the share
///   of it that is unions the chain makes from the rest and not as a
///   rest stall of that length. Per burst of length b those are Poisson
///   in number, of mean 2·λ·E[min(G, b)]: the rest stalls that arrive
///   during the burst and outlast it (λ·∫_0^b P(G > b − v) dv) and those
///   in progress when it starts that end before it does (λ·∫_0^∞
///   P(w < G < w + b) dw, the same integral); a union the chain would make
///   as the rest stall itself (in progress, covering the burst) is the
///   rest's. The unions depend on the rest: iterated to its fixed point;
/// * the rest is scaled by 1/(1 − b̄/P) (b̄ the bursts' mean): a rest
///   stall that arrives during a burst is hidden in it or seen as a union,
///   never as itself, and the chain's rest comes at every instant, the
///   bursts' too (there it extends them). Bursts that hold over half the
///   CPU are taken to hide half of it.
///
/// The rest's two monotone pieces start at the stall threshold and at the
/// cluster's upper fence, where the least concave majorant overshoots:
/// both are corrected ([`correct_end`]), so that the rest holds neither
/// the threshold's spike of short stalls nor a lump of stalls just past
/// the bursts, which the chain would replay near the slack.
///
/// Not the default: with that correction the calibration's tight periodic
/// shapes come near the truth, but the loose ones fall further below it,
/// and the interval of every periodic shape is wider than the spread of
/// its forecasts (docs/forecast.md §3.3, `CAL_UNIONS`).
fn hand_unions_to_rest(
    lengths: &[(f64, f64)],
    burst: &mut [f64],
    rest: &mut [f64],
    period_ns: f64,
    ends: Ends,
) {
    let total: f64 = burst.iter().sum();
    if total <= 0.0 || period_ns <= 0.0 {
        return;
    }
    let shares: Vec<(f64, f64)> = lengths
        .iter()
        .zip(burst.iter())
        .map(|(&(y, _), b)| (y, b / total))
        .collect();
    let (q1, q3) = (share_quantile(&shares, 0.25), share_quantile(&shares, 0.75));
    let (low, fence) = (q1 - 1.5 * (q3 - q1), q3 + 1.5 * (q3 - q1));
    let mut moved = vec![0.0; lengths.len()];
    for (j, &(y, _)) in lengths.iter().enumerate() {
        if y > fence {
            moved[j] = burst[j];
            burst[j] = 0.0;
        } else if y < low {
            rest[j] += burst[j];
            burst[j] = 0.0;
        } else if burst[j] > 0.0 {
            burst[j] += rest[j];
            rest[j] = 0.0;
        }
    }
    let kept: f64 = burst.iter().sum();
    if kept <= 0.0 {
        return;
    }
    // The two left ends of the rest's monotone pieces: the stall
    // threshold, below the cluster, and the cluster's upper fence.
    let pieces = [(ends.threshold_ns, low), (fence, f64::INFINITY)];
    for (edge, end) in pieces.into_iter().filter(|_| ends.corrected) {
        correct_end(lengths, [burst, rest, &mut moved], edge, end, ends.wakeups);
    }
    let moved_total: f64 = moved.iter().sum();
    let cluster: Vec<(f64, f64)> = lengths
        .iter()
        .zip(burst.iter())
        .filter(|(_, b)| **b > 0.0)
        .map(|(&(y, _), b)| (y, b / kept))
        .collect();
    let per_s = 1e9 / period_ns;
    let mean_burst: f64 = cluster.iter().map(|(b, sh)| b * sh).sum();
    let visible = (1.0 - mean_burst / period_ns).max(0.5);
    let own: Vec<f64> = rest.to_vec();
    let mut keep = 1.0;
    for round in 0..=UNION_ROUNDS {
        for ((r, o), m) in rest.iter_mut().zip(&own).zip(&moved) {
            *r = (o + m * keep) / visible;
        }
        if round == UNION_ROUNDS || moved_total <= 0.0 {
            break;
        }
        let unions: f64 = per_s
            * cluster
                .iter()
                .map(|&(b, sh)| {
                    let during: f64 = lengths
                        .iter()
                        .zip(rest.iter())
                        .map(|(&(y, _), r)| r / 1e9 * y.min(b))
                        .sum();
                    sh * (1.0 - (-2.0 * during).exp())
                })
                .sum::<f64>();
        keep = (1.0 - unions / moved_total).max(0.0);
    }
}

/// Where the record's stall model starts a monotone piece, for
/// [`boundary_point`].
#[derive(Clone, Copy, Debug)]
struct Ends {
    /// The stall threshold, as a stall length (above the median latency).
    threshold_ns: f64,
    /// Wake-ups the record holds: the measure's late wake-ups in number.
    wakeups: f64,
    /// Whether the pieces' left ends are corrected at all.
    corrected: bool,
}

/// The stall measure, in `parts` that add up to the record's, corrected
/// at the left end `edge` of one of its monotone pieces
/// ([`boundary_point`]): no stall ends between `edge` and the point
/// inside (below `end`: the cluster above it is the bursts'), and the
/// stalls beyond that point are scaled so that the piece keeps the
/// number of late wake-ups the record has in it. The correction moves
/// the density's shape at the boundary, not the count, which the
/// record knows to within its Poisson error.
fn correct_end(lengths: &[(f64, f64)], parts: [&mut [f64]; 3], edge: f64, end: f64, wakeups: f64) {
    let whole = |parts: &[&mut [f64]; 3]| -> Vec<f64> {
        (0..lengths.len())
            .map(|j| parts.iter().map(|p| p[j]).sum())
            .collect()
    };
    let mut parts = parts;
    let before = whole(&parts);
    let Some(inside) = boundary_point(lengths, &before, edge, wakeups) else {
        return;
    };
    for (j, &(y, _)) in lengths.iter().enumerate() {
        if y > edge && y <= inside && y < end {
            parts.iter_mut().for_each(|p| p[j] = 0.0);
        }
    }
    let (was, now) = (
        late_beyond(lengths, &before, edge),
        late_beyond(lengths, &whole(&parts), edge),
    );
    if now <= 0.0 {
        return;
    }
    for (j, &(y, _)) in lengths.iter().enumerate() {
        if y > inside {
            parts.iter_mut().for_each(|p| p[j] *= was / now);
        }
    }
}

/// The share of wake-ups late beyond `edge` under the stall `measure`
/// (stalls per second at `lengths`): by the residual-life relation,
/// Σ m·(ℓ − edge)⁺ with m per ns.
fn late_beyond(lengths: &[(f64, f64)], measure: &[f64], edge: f64) -> f64 {
    lengths
        .iter()
        .zip(measure)
        .map(|(&(y, _), m)| m / 1e9 * (y - edge).max(0.0))
        .sum()
}

/// The length inside a monotone piece of the stall model that starts at
/// `edge`, at which the Grenander estimate stands for the piece's left
/// end (Kulikov and Lopuhaä's boundary correction); `None` where fewer
/// than two of the record's wake-ups lie beyond `edge`.
///
/// A stall model read off a latency record is a measure `measure` (stalls
/// per second) on `lengths`; by the residual-life relation a wake-up is
/// late beyond `edge` by more than y with probability S(y) = Σ m·(ℓ − edge
/// − y)⁺ (m per ns), so N·S(0) of the record's N wake-ups lie in the piece.
/// The least concave majorant's slope at the piece's left end is the
/// steepest chord from it: over the first few wake-ups past a boundary it
/// overshoots the density, does not tend to it as the record grows, and
/// turns the overshoot into a vertex of stalls there. At a distance that
/// holds n^(2/3) of the piece's n wake-ups (a distance n^(−1/3) on the
/// scale of the piece's own density) the estimate is consistent, and the
/// density from the edge up to there is taken to be its value there
/// ([`correct_end`]: the stalls of the vertices in between are dropped,
/// those beyond keep the piece's count).
fn boundary_point(lengths: &[(f64, f64)], measure: &[f64], edge: f64, wakeups: f64) -> Option<f64> {
    let beyond = |x: f64| wakeups * late_beyond(lengths, measure, x);
    let n = beyond(edge);
    if n < 2.0 {
        return None;
    }
    let target = n - n.powf(2.0 / 3.0);
    let mut before = (edge, n);
    for &(y, _) in lengths.iter().filter(|(y, _)| *y > edge) {
        let here = beyond(y);
        if here <= target {
            let (x0, n0) = before;
            let span = n0 - here;
            return Some(if span > 0.0 {
                x0 + (y - x0) * (n0 - target) / span
            } else {
                y
            });
        }
        before = (y, here);
    }
    None
}

/// Most lengths a union's extension beyond the burst is spread over.
const UNION_POINTS: usize = 256;

/// The periodic source's stalls as the consumer meets them: each burst
/// extended by the rest stalls that overlap it.
///
/// The rest is Poisson and does not see the bursts: a rest stall that
/// arrives during a burst, or is in progress when it starts, holds the
/// CPU past the burst's end by what of it remains then, and the CPU is
/// taken once, as one span (a late wake-up or time stolen from the
/// compute, wherever the burst's start puts it), not as a burst and a
/// stall each charged whole. What remains of the rest at the burst's end
/// instant is its residual life: by the same relation the stall model is
/// read with, the number of rest stalls still running at an instant with
/// more than e left is Poisson of mean λ·∫_e^∞ P(G > u) du, so the burst
/// of length b becomes b + E with P(E > e) = 1 − e^(−λ·∫_e^∞ P(G > u) du):
/// extended with probability 1 − e^(−ρ), ρ the rest's share of the CPU.
/// E is spread over cells of `grid` (at most [`UNION_POINTS`] of them),
/// each extension rounded up to its cell's end, as the chain rounds.
fn union_lengths(burst: &[(f64, f64)], rest: &StallModel, grid: f64) -> Vec<(f64, f64)> {
    let longest = rest.lengths.iter().map(|l| l.0).fold(0.0, f64::max);
    let lam = rest.rate_per_s / 1e9;
    if lam <= 0.0 || longest <= 0.0 {
        return burst.to_vec();
    }
    // λ·∫_e^∞ P(G > u) du = λ·(E[G] − E[min(G, e)]).
    let outlasting = |e: f64| lam * (rest.mean_ns - mean_capped(rest, e));
    let survives = |e: f64| 1.0 - (-outlasting(e)).exp();
    let width = grid.max(longest / UNION_POINTS as f64);
    let points = (longest / width).ceil() as usize;
    let mut out: Vec<(f64, f64)> = burst
        .iter()
        .map(|&(b, sh)| (b, sh * (1.0 - survives(0.0))))
        .collect();
    for k in 0..points {
        let (lo, hi) = (k as f64 * width, (k + 1) as f64 * width);
        let p = survives(lo) - survives(hi);
        if p <= 0.0 {
            continue;
        }
        for &(b, sh) in burst {
            out.push((b + hi, sh * p));
        }
    }
    out.sort_by(|a, b| a.0.total_cmp(&b.0));
    out.dedup_by(|later, kept| {
        let same = later.0 == kept.0;
        if same {
            kept.1 += later.1;
        }
        same
    });
    out
}

/// Points of the compute at which the first stall is placed (see
/// `first_and_after`).
const STALL_TIME_POINTS: usize = 8;

/// Stolen time over a compute of `c_ns` whose first stall comes from `st`
/// and the rest from `after[k]` (the stolen time over what is left of
/// the compute when the first stall falls at the k-th of
/// STALL_TIME_POINTS points): no stall with e^(−μ), else the first stall's
/// length (rounded up once) plus the rest, τ weighted by the first
/// arrival's truncated exponential law.
fn first_and_after(
    st: &StallModel,
    after: &[Vec<f64>],
    c_ns: f64,
    grid: f64,
    cap: usize,
) -> Vec<f64> {
    let mut out = vec![0.0; cap + 1];
    let mu = (st.rate_per_s * c_ns / 1e9).min(700.0);
    if mu <= 0.0 || st.lengths.is_empty() || after.is_empty() {
        out[0] = 1.0;
        return out;
    }
    let k = after.len() as f64;
    let w: Vec<f64> = (0..after.len())
        .map(|i| (-mu * i as f64 / k).exp() - (-mu * (i + 1) as f64 / k).exp())
        .collect();
    let wsum: f64 = w.iter().sum();
    let mut rest = vec![0.0; cap + 1];
    for (wi, a) in w.iter().zip(after) {
        for (r, p) in rest.iter_mut().zip(a) {
            *r += wi / wsum * p;
        }
    }
    let hit = 1.0 - (-mu).exp();
    out[0] = 1.0 - hit;
    for &(len, share) in &st.lengths {
        let first = cells(len, grid, cap).max(1);
        for (j, p) in rest.iter().enumerate() {
            if *p > 0.0 {
                out[(first + j).min(cap)] += hit * share * p;
            }
        }
    }
    out
}

/// Stationary underrun probability of `b` with wake-up latencies from
/// `tail` and stalls from [`StallModel::from_tail`], arriving as the spike
/// log's `times` say when given (Poisson otherwise).
pub fn forecast(tail: &Tail, times: Option<&StallTimes>, b: &Buffering) -> QueueForecast {
    let stalls = StallModel::from_tail(tail);
    forecast_with(tail, &stalls, times, b)
}

/// As [`forecast`] with a given stall model (tests use none).
pub fn forecast_with(
    tail: &Tail,
    stalls: &StallModel,
    times: Option<&StallTimes>,
    b: &Buffering,
) -> QueueForecast {
    forecast_sleeping(tail, stalls, times, b, false)
}

/// One kind of step the chain may take from an age.
struct Branch {
    probability: f64,
    /// Weights of the quiet and the stalled wake-ups' distributions, and
    /// the index of the latter.
    quiet_weight: f64,
    stalled_weight: f64,
    stalled: usize,
    /// Index of the stolen time of a quiet wake-up's compute.
    stolen: usize,
    /// Whether a step with a stall (a late wake-up or stolen compute),
    /// and one without, restarts the age.
    stalled_restarts: bool,
    untouched_restarts: bool,
}

/// ∫₀^y P(G > u) du for the stall model's lengths: the mean of min(G, y).
fn mean_capped(stalls: &StallModel, y: f64) -> f64 {
    stalls
        .lengths
        .iter()
        .map(|&(len, share)| share * len.min(y).max(0.0))
        .sum()
}

/// Probability that a consumer sleeping `sleep_ns` before each wake-up
/// wakes later than the stall residue `y`, from the stall model alone.
///
/// A wake-up instant is late by y when a stall of length G began u
/// before it and G − u = y: over every instant the density is
/// λ·P(G > y), the residual-life relation the stall model is read from.
/// A consumer computes for c of each period and sleeps only the rest: a
/// stall that began during its compute stretches the compute (the
/// stolen time S) and the backlog carries it to the next wake-up; only
/// one that began while it slept, u < t − c, makes its wake-up late. So
/// its density is λ·P(y ≤ G < y + (t − c)) and its survival
/// λ·∫_y^{y + t − c} P(G > u) du. Taking the probe's late wake-ups as
/// the consumer's instead counts a stall that begins during a compute
/// twice when the probe sleeps longer than t − c (once stretching the
/// compute, once more delaying a wake-up), and misses the late wake-ups
/// a consumer that sleeps longer than the probe's period meets (the
/// probe's are swallowed periods, not latencies).
fn sleeping_late(stalls: &StallModel, y: f64, sleep_ns: f64) -> f64 {
    stalls.rate_per_s / 1e9 * (mean_capped(stalls, y + sleep_ns) - mean_capped(stalls, y))
}

/// The late wake-ups of a consumer sleeping `sleep_ns` under `stalls`
/// ([`sleeping_late`]) on the chain's cells up to `over`: the survival at
/// each cell edge from the stall threshold on, the mass between two edges
/// on the upper one (values rounded up).
fn late_pmf(stalls: &StallModel, sleep_ns: f64, grid: f64, over: usize) -> Vec<f64> {
    let mut out = vec![0.0; over + 1];
    let base = stalls.base_ns.0 as f64;
    let longest = stalls.lengths.iter().map(|l| l.0).fold(0.0, f64::max);
    let mut x = stalls.threshold_ns.0 as f64;
    let mut above = sleeping_late(stalls, x - base, sleep_ns);
    while above > 0.0 && x - base < longest {
        let cell = cells(x + 1.0, grid, over);
        let edge = (cell as f64 * grid).max(x + 1.0);
        let next = sleeping_late(stalls, edge - base, sleep_ns);
        out[cell] += above - next;
        above = next;
        x = edge;
        if cell >= over {
            out[over] += above;
            break;
        }
    }
    out
}

/// The wake-ups' cells and shares that every kind of step is weighed in.
#[derive(Clone, Copy)]
struct Cells {
    t: f64,
    c: f64,
    grid: f64,
    over: usize,
    quiet_share: f64,
    stalled_share: f64,
    sleep: bool,
}

impl Cells {
    /// The weights that make the quiet wake-ups 1 − ps and the stalled
    /// ones (a distribution of total `of`) ps.
    fn weights_in(&self, ps: f64, of: f64) -> (f64, f64) {
        let ps = ps.min(1.0);
        (
            if self.quiet_share > 0.0 {
                (1.0 - ps) / self.quiet_share
            } else {
                0.0
            },
            if of > 0.0 { ps / of } else { 0.0 },
        )
    }

    fn weights_of(&self, ps: f64) -> (f64, f64) {
        self.weights_in(ps, self.stalled_share)
    }
}

/// The chain's steps per phase of a periodic source ([`Phase`]); pushes
/// the stolen times and late wake-ups its branches index.
fn phase_branches(
    cx: &Cells,
    ph: &Phase,
    stalls: &StallModel,
    stalled: &[f64],
    stolen_by_kind: &mut Vec<Vec<f64>>,
    stalled_by_kind: &mut Vec<Vec<f64>>,
) -> Vec<Vec<Branch>> {
    let Cells {
        t,
        c,
        grid,
        over,
        stalled_share,
        sleep,
        ..
    } = *cx;
    // The periodic source's phase. A step it does not stall
    // sees only the rest (Poisson: the stalls it takes, late
    // wake-ups or stolen compute, do not move the phase). A step
    // it stalls: its stall starts at a uniform point of the
    // step, so while the consumer sleeps (t − c of it) and then
    // makes the wake-up late, by the part of it that outlasts the
    // sleep (probability E[min(G, t − c)] / t), or inside the
    // compute (c / t) and then takes its whole length from it
    // besides what the rest takes; else it ends before the
    // wake-up and costs nothing. Either way the phase restarts.
    let tau = (t - c).max(0.0);
    let lengths = if ph.unions {
        union_lengths(&ph.burst, &ph.rest.stalls, grid)
    } else {
        ph.burst.clone()
    };
    let burst = StallModel {
        rate_per_s: 1.0,
        lengths,
        ..stalls.clone()
    };
    // Sleeping: each kind's late wake-ups from its own lengths
    // (from the record's late wake-ups, the bursts' lateness
    // would be the rest's and the other way round).
    let (rest_late, burst_late) = if sleep {
        let per_step = StallModel {
            rate_per_s: 1e9 / t,
            ..burst.clone()
        };
        (
            late_pmf(&ph.rest.stalls, tau, grid, over),
            late_pmf(&per_step, tau, grid, over),
        )
    } else {
        (stalled.to_vec(), stalled.to_vec())
    };
    let late = if !sleep && stalled_share <= 0.0 {
        0.0
    } else if sleep {
        burst_late.iter().sum::<f64>().min(1.0)
    } else {
        (mean_capped(&burst, tau) / t).min(1.0)
    };
    let inside = (c.min(t) / t).min(1.0 - late);
    let rest = stolen_pmf(&ph.rest.stalls, 1.0, c, grid, over);
    let mut hit = vec![0.0; over + 1];
    if late < 1.0 {
        let (w_in, w_none) = (inside / (1.0 - late), (1.0 - late - inside) / (1.0 - late));
        for (h, r) in hit.iter_mut().zip(&rest) {
            *h += w_none * r;
        }
        for &(len, share) in &burst.lengths {
            let first = cells(len, grid, over).max(1);
            for (j, r) in rest.iter().enumerate() {
                hit[(first + j).min(over)] += w_in * share * r;
            }
        }
    }
    stolen_by_kind.push(rest);
    stolen_by_kind.push(hit);
    let (rest_of, burst_of) = (rest_late.iter().sum(), burst_late.iter().sum());
    let (rq, rs) = if sleep {
        cx.weights_in(rest_of, rest_of)
    } else {
        cx.weights_of(stalled_share * ph.rest.stalled_wakeup_factor)
    };
    let (hq, hs) = cx.weights_in(late, burst_of);
    stalled_by_kind.push(rest_late);
    stalled_by_kind.push(burst_late);
    ph.hazard
        .iter()
        .map(|&h| {
            vec![
                Branch {
                    probability: 1.0 - h,
                    quiet_weight: rq,
                    stalled_weight: rs,
                    stalled: 1,
                    stolen: 0,
                    stalled_restarts: false,
                    untouched_restarts: false,
                },
                Branch {
                    probability: h,
                    quiet_weight: hq,
                    stalled_weight: hs,
                    stalled: 2,
                    stolen: 1,
                    stalled_restarts: true,
                    untouched_restarts: true,
                },
            ]
            .into_iter()
            .filter(|b| b.probability > 0.0)
            .collect()
        })
        .collect()
}

/// The chain's steps per age since the last stall (one branch each);
/// pushes the stolen times its branches index.
fn age_branches(
    cx: &Cells,
    renewal: Option<&Renewal>,
    stalls: &StallModel,
    stolen_by_kind: &mut Vec<Vec<f64>>,
) -> Vec<Vec<Branch>> {
    let Cells {
        c,
        grid,
        over,
        stalled_share,
        ..
    } = *cx;
    // Per age: the stall process that age sees (its compound stolen time;
    // equal processes share one Panjer run) and the wake-up kinds
    // re-weighted by how likely a stalled wake-up is then.
    let per_age: Vec<(&StallModel, f64)> = match &renewal {
        None => vec![(stalls, 1.0)],
        Some(r) => r
            .by_age
            .iter()
            .map(|a| (&a.stalls, a.stalled_wakeup_factor))
            .collect(),
    };
    let ages = per_age.len();
    let mut stolen_by_age: Vec<Vec<f64>> = Vec::with_capacity(ages);
    // A compute at some age meets its first stall at that age's rate;
    // once stalled, the rest of the compute (c − τ after a first stall at
    // τ) sees the process as it is right after a stall, not the age's
    // again: a periodic interferer never stalls one compute twice. For
    // Poisson arrivals this is the compound distribution split at its
    // first jump. τ is taken at STALL_TIME_POINTS points of the compute.
    let after: Vec<Vec<f64>> = match &renewal {
        None => Vec::new(),
        Some(r) => (0..STALL_TIME_POINTS)
            .map(|k| {
                let tau = (k as f64 + 0.5) / STALL_TIME_POINTS as f64 * c;
                stolen_pmf(&r.by_age[0].stalls, 1.0, c - tau, grid, over)
            })
            .collect(),
    };
    for (i, (st, _)) in per_age.iter().enumerate() {
        let same = per_age[..i].iter().position(|(o, _)| *o == *st);
        stolen_by_age.push(match (same, &renewal) {
            (Some(j), _) => stolen_by_age[j].clone(),
            (None, None) => stolen_pmf(st, 1.0, c, grid, over),
            (None, Some(_)) => first_and_after(st, &after, c, grid, over),
        });
    }
    stolen_by_kind.extend(stolen_by_age);
    per_age
        .iter()
        .enumerate()
        .map(|(i, &(_, f))| {
            let (quiet_weight, stalled_weight) = cx.weights_of(stalled_share * f);
            vec![Branch {
                probability: 1.0,
                quiet_weight,
                stalled_weight,
                stalled: 0,
                stolen: i,
                stalled_restarts: true,
                untouched_restarts: false,
            }]
        })
        .collect()
}

/// One step of the chain, fixed for a forecast: from an age and a
/// backlog D at the wake-up, the next wake-up's age and D.
struct Chain<'a> {
    /// Per age, the steps it may take.
    branches: &'a [Vec<Branch>],
    quiet: &'a [f64],
    stolen_by_kind: &'a [Vec<f64>],
    stalled_by_kind: &'a [Vec<f64>],
    /// Per kind, the stolen times that can occur (cell ≥ 1, ascending).
    stolen_at: &'a [Vec<(usize, f64)>],
    /// Cells 0..=k meet the deadline; `over` holds every later one.
    k: usize,
    over: usize,
    /// t and c in cells.
    tc: usize,
    cc: usize,
    backlog_modelled: bool,
}

/// The distributions one step works in, kept across steps so that the
/// chain allocates once.
struct Scratch {
    x: Vec<f64>,
    y: Vec<f64>,
    z: Vec<f64>,
    bpmf: Vec<f64>,
}

impl Scratch {
    fn new(over: usize) -> Scratch {
        Scratch {
            x: vec![0.0; over + 1],
            y: vec![0.0; over + 1],
            z: vec![0.0; over + 1],
            bpmf: vec![0.0; over + 1],
        }
    }
}

impl Chain<'_> {
    /// Moves the mass `from` at `age` one step on: what restarts the age
    /// is added to `next[0]`, the rest to `next[older]`, and an underrun
    /// (its next wake-up starts the ring afresh, at D = 0) to `fail`.
    fn advance(
        &self,
        age: usize,
        from: &[f64],
        next: &mut [Vec<f64>],
        older: usize,
        fail: &mut f64,
        s: &mut Scratch,
    ) {
        let (k, over) = (self.k, self.over);
        let mass: f64 = from.iter().sum();
        if mass <= 0.0 {
            return;
        }
        let Scratch { x, y, z, bpmf } = s;
        // Carried backlog B = max(0, D − t), then X = max(B, L).
        bpmf.iter_mut().for_each(|p| *p = 0.0);
        for (d, p) in from.iter().enumerate() {
            let carried = if self.backlog_modelled {
                d.saturating_sub(self.tc)
            } else {
                0
            };
            bpmf[carried] += p;
        }
        let mut out = 0.0;
        for br in &self.branches[age] {
            let (wq, ws) = (br.quiet_weight, br.stalled_weight);
            let stolen = &self.stolen_by_kind[br.stolen];
            let stalled = &self.stalled_by_kind[br.stalled];
            // X = max(B, L) for each kind of wake-up (sub-distributions:
            // P(max ≤ x, kind) = F_B(x) · P(L ≤ x, kind)).
            let (mut fb, mut fq, mut fs, mut prev_q, mut prev_s) = (0.0, 0.0, 0.0, 0.0, 0.0);
            for i in 0..=over {
                fb += bpmf[i];
                fq += self.quiet[i] * wq;
                fs += stalled[i] * ws;
                let (cq, cs) = (fb * fq, fb * fs);
                x[i] = cq - prev_q;
                y[i] = cs - prev_s;
                prev_q = cq;
                prev_s = cs;
            }
            // Y = X + S for quiet wake-ups (capped); stalled ones add
            // nothing. z: quiet steps that no stall touched.
            z.iter_mut().for_each(|p| *p = 0.0);
            let at = &self.stolen_at[br.stolen];
            for (i, xi) in x.iter().enumerate() {
                if *xi <= 0.0 {
                    continue;
                }
                z[i] += xi * stolen[0];
                // Stolen cells below `room` land below the top cell.
                let room = over - i;
                let below = at.partition_point(|(j, _)| *j < room);
                for &(j, sj) in &at[..below] {
                    y[i + j] += xi * sj;
                }
                let mut top = y[over];
                for &(_, sj) in &at[below..] {
                    top += xi * sj;
                }
                y[over] = top;
            }
            let dest = |restarts: bool| if restarts { 0 } else { older };
            let w = br.probability;
            for (dest, ys) in [
                (dest(br.stalled_restarts), &*y),
                (dest(br.untouched_restarts), &*z),
            ] {
                for (i, p) in ys.iter().enumerate() {
                    let p = w * p;
                    out += p;
                    let d = i + self.cc;
                    if d > k {
                        *fail += p;
                        next[dest][0] += p;
                    } else {
                        next[dest][d] += p;
                    }
                }
            }
        }
        // Mass lost to rounding at the top of X is an underrun too.
        let lost = (mass - out).max(0.0);
        *fail += lost;
        next[older][0] += lost;
    }

    /// The stationary underrun probability per step by iterating the
    /// whole chain from an empty ring at the oldest age: (probability,
    /// iterations, converged).
    fn solve(&self, max_iterations: u32, s: &mut Scratch) -> (f64, u32, bool) {
        let ages = self.branches.len();
        let k = self.k;
        // pi[age][D]: the last age holds every older one.
        let mut pi = vec![vec![0.0; k + 1]; ages];
        pi[ages - 1][0] = 1.0;
        let mut fail = 0.0;
        let mut iterations = 0;
        let mut next = vec![vec![0.0; k + 1]; ages];
        while iterations < max_iterations {
            iterations += 1;
            next.iter_mut()
                .for_each(|v| v.iter_mut().for_each(|p| *p = 0.0));
            fail = 0.0;
            for (age, from) in pi.iter().enumerate() {
                let older = (age + 1).min(ages - 1);
                self.advance(age, from, &mut next, older, &mut fail, s);
            }
            // After LAZY_AFTER plain steps, the lazy chain (I + P)/2: same
            // stationary distribution, no period, so a deterministic cycle
            // converges too (plain steps are twice as fast otherwise).
            let keep = if iterations > LAZY_AFTER { 0.5 } else { 0.0 };
            let mut diff = 0.0;
            for (pa, na) in pi.iter_mut().zip(&next) {
                for (p, q) in pa.iter_mut().zip(na) {
                    let v = keep * *p + (1.0 - keep) * q;
                    diff += (v - *p).abs();
                    *p = v;
                }
            }
            if !self.backlog_modelled || diff < TOLERANCE {
                return (fail, iterations, true);
            }
        }
        (fail, iterations, false)
    }

    /// As [`Chain::solve`] for a chain whose age is a periodic source's
    /// phase ([`Phase`]): every age but the last two only moves on to the
    /// next, so the chain runs round a cycle of about P/t steps, and a
    /// chain that nearly repeats itself each period mixes slowly step by
    /// step (thousands of iterations, each over every age). Its
    /// stationary distribution is read at the restart instead: the
    /// backlog D with which the cycle starts at age 0 maps, one whole
    /// period later, to the D of the next start (every age visited once,
    /// the last as often as mass stays there), and the fixed point of that
    /// map is the chain's own distribution at age 0. Running that period
    /// once more from it gives every age's share and the underruns per
    /// step, divided by the period's expected length in steps (the mass
    /// it carried). The answer is the same stationary distribution;
    /// `iterations` counts whole periods.
    fn solve_by_period(&self, max_iterations: u32, s: &mut Scratch) -> (f64, u32, bool) {
        let k = self.k;
        let mut start = vec![0.0; k + 1];
        start[0] = 1.0;
        let mut next = vec![vec![0.0; k + 1]; 2];
        let mut from = vec![0.0; k + 1];
        let mut iterations = 0;
        let mut converged = false;
        while iterations < max_iterations {
            iterations += 1;
            self.one_period(&start, &mut next, &mut from, s);
            let total: f64 = next[0].iter().sum();
            if total <= 0.0 {
                break;
            }
            // As the whole chain's: after LAZY_AFTER plain periods, the
            // lazy map (I + M)/2, in case the backlog itself cycles.
            let keep = if iterations > LAZY_AFTER { 0.5 } else { 0.0 };
            let mut diff = 0.0;
            for (p, q) in start.iter_mut().zip(&next[0]) {
                let v = keep * *p + (1.0 - keep) * q / total;
                diff += (v - *p).abs();
                *p = v;
            }
            if diff < TOLERANCE {
                converged = true;
                break;
            }
        }
        let (fail, steps) = self.one_period(&start, &mut next, &mut from, s);
        (
            if steps > 0.0 { fail / steps } else { 0.0 },
            iterations,
            converged,
        )
    }

    /// Runs the cycle once from `start` at age 0: the restarts it makes
    /// are left in `next[0]`. Returns the underruns on the way and the
    /// mass-weighted steps it took (the period's expected length when
    /// `start` has mass 1).
    fn one_period(
        &self,
        start: &[f64],
        next: &mut [Vec<f64>],
        from: &mut Vec<f64>,
        s: &mut Scratch,
    ) -> (f64, f64) {
        let last = self.branches.len() - 1;
        next[0].iter_mut().for_each(|p| *p = 0.0);
        from.clear();
        from.extend_from_slice(start);
        let (mut fail, mut steps) = (0.0, 0.0);
        let mut age = 0;
        // The last age keeps what does not restart (lost rounding mass,
        // or a stall chance under 1): follow it until nothing is left.
        for _ in 0..last + MAX_ITERATIONS as usize {
            let mass: f64 = from.iter().sum();
            if mass <= TOLERANCE * 1e-3 {
                break;
            }
            steps += mass;
            next[1].iter_mut().for_each(|p| *p = 0.0);
            self.advance(age, from, next, 1, &mut fail, s);
            std::mem::swap(from, &mut next[1]);
            age = (age + 1).min(last);
        }
        (fail, steps)
    }
}

/// As [`forecast_with`]; `sleeping: true` (only where `stalls` was
/// inferred from this tail with every wake-up instant of the probe, the
/// periods a long stall swallowed placed) takes the stalled wake-ups from
/// the stall model for a consumer that sleeps t − c of each period
/// ([`sleeping_late`]) instead of the record's late wake-ups as they
/// are; the rest of the stall process is charged to its compute.
pub fn forecast_sleeping(
    tail: &Tail,
    stalls: &StallModel,
    times: Option<&StallTimes>,
    b: &Buffering,
    sleeping: bool,
) -> QueueForecast {
    forecast_solved(tail, stalls, times, b, sleeping, true)
}

/// As [`forecast_sleeping`]; `by_period: false` steps the whole chain
/// even where its age is a periodic source's phase, which must give the
/// same answer ([`Chain::solve_by_period`]; the tests compare them).
fn forecast_solved(
    tail: &Tail,
    stalls: &StallModel,
    times: Option<&StallTimes>,
    b: &Buffering,
    sleeping: bool,
    by_period: bool,
) -> QueueForecast {
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
    let sleep = sleeping && counts_as_stall && stalls.noise.is_none();
    for &(lo, cnt) in tail.buckets() {
        let v = (lo + tail.bucket_ns).min(tail.max.0.max(lo));
        if counts_as_stall && v > stalls.threshold_ns.0 {
            if !sleep {
                stalled[cells(v as f64, grid, over)] += cnt as f64 / n;
            }
        } else {
            quiet[cells(v as f64, grid, over)] += cnt as f64 / n;
        }
    }
    if sleep {
        stalled = late_pmf(stalls, (t - c).max(0.0), grid, over);
    }
    // Wake-ups the re-weighting took from (gave to) the stalled ones come
    // from (go to) the quiet ones, in proportion.
    if sleep {
        let stalled_sum: f64 = stalled.iter().sum();
        let share = stalled_sum.min(1.0);
        if stalled_sum > share {
            stalled.iter_mut().for_each(|p| *p *= share / stalled_sum);
        }
        let quiet_sum: f64 = quiet.iter().sum();
        if quiet_sum > 0.0 {
            let scale = (1.0 - share) / quiet_sum;
            quiet.iter_mut().for_each(|p| *p *= scale);
        }
    }
    let quiet_share: f64 = quiet.iter().sum();
    let stalled_share = 1.0 - quiet_share;
    // Ages the chain remembers: as many steps as the whole slack takes to
    // drain at t − c a step (a stall older than that has left no backlog
    // for a second one to add to), within MAX_AGE_STEPS.
    let drain_steps = if c < t {
        ((periods as f64 * len) / (t - c)).ceil() as usize
    } else {
        MAX_AGE_STEPS
    };
    let renewal = times.filter(|_| backlog_modelled).and_then(|tm| {
        Renewal::estimate(
            tm,
            stalls,
            stalled_share,
            t,
            c,
            (drain_steps + 1).min(MAX_AGE_STEPS),
        )
    });
    let cx = Cells {
        t,
        c,
        grid,
        over,
        quiet_share,
        stalled_share,
        sleep,
    };
    // Per age, the steps it may take, each with its probability, the
    // wake-up kinds' weights, the stolen time of a quiet wake-up's compute
    // (an index into `stolen_by_kind`) and whether a stalled step (y) and
    // an untouched one (z) restart the age.
    let mut stolen_by_kind: Vec<Vec<f64>> = Vec::new();
    let mut stalled_by_kind: Vec<Vec<f64>> = vec![stalled.clone()];
    let branches = match renewal.as_ref().and_then(|r| r.phase.as_ref()) {
        Some(ph) => phase_branches(
            &cx,
            ph,
            stalls,
            &stalled,
            &mut stolen_by_kind,
            &mut stalled_by_kind,
        ),
        None => age_branches(&cx, renewal.as_ref(), stalls, &mut stolen_by_kind),
    };
    let stall_mean_ns = quiet_share * stalls.rate_per_s * c / 1e9 * stalls.mean_ns;
    // Per age, the stolen times that can occur (cell ≥ 1, ascending): the
    // chain's convolution visits only those. Stalls come in the lengths
    // the record saw, so most cells of the compound distribution are
    // empty, and visiting every cell made a forecast of a long buffering
    // cost seconds of CPU (the cells squared, every step) when the
    // record met stalls of tens of milliseconds.
    let stolen_at: Vec<Vec<(usize, f64)>> = stolen_by_kind
        .iter()
        .map(|st| {
            st.iter()
                .enumerate()
                .skip(1)
                .filter(|(_, p)| **p > 0.0)
                .map(|(j, p)| (j, *p))
                .collect()
        })
        .collect();
    let chain = Chain {
        branches: &branches,
        quiet: &quiet,
        stolen_by_kind: &stolen_by_kind,
        stalled_by_kind: &stalled_by_kind,
        stolen_at: &stolen_at,
        k,
        over,
        tc,
        cc: cells(c, grid, over),
        backlog_modelled,
    };
    let mut scratch = Scratch::new(over);
    // Not divided by the ages: near full utilization the chain needs its
    // iterations whatever it remembers, so renewal forecasts cost more.
    let max_iterations =
        (ITERATION_BUDGET / ((over + 1) as f64).powi(2)).clamp(50.0, MAX_ITERATIONS as f64) as u32;
    let phase = renewal.as_ref().is_some_and(|r| r.phase.is_some());
    let (fail, iterations, converged) = if phase && by_period {
        chain.solve_by_period(max_iterations, &mut scratch)
    } else {
        chain.solve(max_iterations, &mut scratch)
    };
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
        renewal,
        consumer_sleep: sleep,
    }
}

/// What the queue model assumes, in words printed beside every figure.
pub fn assumptions(q: &QueueForecast) -> Vec<String> {
    let mut a = vec![
        "the consumer wakes once per t, computes c of CPU work, and a late buffer delays the \
         next one (backlog carried across periods); an underrun skips to the next period \
         boundary with the ring refilled"
            .to_string(),
        if q.consumer_sleep {
            "each wake-up's latency is an independent draw: below the stall threshold from the \
             record, beyond it from the stall process for a consumer asleep t − c of each \
             period (a stall that begins during the compute is charged there, not again to the \
             next wake-up)"
                .to_string()
        } else {
            "each wake-up's latency is an independent draw from the record (wake-ups of a thread \
             that slept as long as the probe did)"
                .to_string()
        },
        match &q.stalls.noise {
            None => format!(
                "stalls during the compute: latencies from {} (the median {} + 2 × (p90 − p10)) up are read as \
                 a stall process through the residual-life relation, f_L(b + y) = λ·P(G > y): here \
                 {:.1} stalls/s of mean length {:.0} µs ({:.2} % of the CPU); a compute of c is hit \
                 by a Poisson(λ·c) number of them, each adding its whole length, unless its own \
                 wake-up was already late by a stall (at most one stall per step)",
                q.stalls.threshold_ns,
                q.stalls.base_ns,
                q.stalls.rate_per_s,
                q.stalls.mean_ns / 1e3,
                q.stalls.time_fraction * 100.0
            ),
            Some(ns) => format!(
                "stalls during the compute from the noise record's {} (time stolen from a running \
                 thread, not inferred from the latency tail): {} gaps above {} in {} of running \
                 time, {:.1} stalls/s of mean length {:.1} µs ({:.2} % of the CPU); a compute of c \
                 is hit by a Poisson(λ·c) number of them, each adding its whole length, unless its \
                 own wake-up was already late by a stall (latency above {}, at most one stall per \
                 step); stolen steps shorter than the noise threshold are not counted",
                ns.series,
                ns.gaps,
                ns.gap_threshold_ns,
                ns.running_ns,
                q.stalls.rate_per_s,
                q.stalls.mean_ns / 1e3,
                q.stalls.time_fraction * 100.0,
                q.stalls.threshold_ns,
            ),
        },
        match &q.renewal {
            None => "stalls in successive steps are independent (Poisson arrivals): the record's \
                     spike log has no time stamps, or too few stalls to tell"
                .to_string(),
            Some(Renewal {
                period_ns: Some(p),
                events,
                phase: Some(ph),
                periodic_source,
                ..
            }) => format!(
                "periodic arrivals: the {events} logged stalls{} came every {:.3} ms (their gaps \
                 sit on its multiples); the chain follows that interferer's phase, the steps \
                 since its own last stall ({} of them): it stalls once a period, {:.2} steps \
                 apart, starting at a uniform point of a step, so while the consumer sleeps \
                 (a late wake-up) or inside its compute (time taken from it, c/t of the time); \
                 the other stalls stay Poisson at every step and do not move its phase; where \
                 one of them overlaps its stall, the chain adds both (more underruns, not fewer)",
                periodic_source
                    .as_ref()
                    .map(|s| format!(" of {s} (the others' stay Poisson)"))
                    .unwrap_or_default(),
                p / 1e6,
                ph.hazard.len(),
                ph.period_steps,
            ),
            Some(Renewal {
                period_ns: Some(p),
                events,
                logged_rate_per_s,
                ages,
                periodic_source,
                ..
            }) => format!(
                "periodic arrivals: the {events} logged stalls{} came every {:.3} ms (their gaps \
                 sit on its multiples); no stall of that interferer follows another within a \
                 period, so its rate ({logged_rate_per_s:.1}/s) is taken from the stall process \
                 in the steps after each stall that end a probe interval before the next \
                 period (of the {} remembered), the rest stays Poisson, and older ages keep \
                 the mean stall rate (its period is more than 32 steps: the chain does not \
                 follow its phase)",
                periodic_source
                    .as_ref()
                    .map(|s| format!(" of {s} (the others' stay Poisson)"))
                    .unwrap_or_default(),
                p / 1e6,
                ages - 1
            ),
            Some(r) => format!(
                "renewal arrivals (--arrivals renewal): the {} logged stalls ({:.1}/s) came \
                 1…{} steps after one another {} × as often as Poisson arrivals would (pair \
                 correlation); that excess or deficit, with the logged stalls' lengths, is \
                 added to or taken from the stall process for {} steps after each stall, \
                 the rest stays Poisson, and older ages keep the mean stall rate; within one \
                 compute, stalls after the first come as right after a stall",
                r.events,
                r.logged_rate_per_s,
                r.pair_correlation.len(),
                r.pair_correlation
                    .iter()
                    .map(|g| format!("{g:.2}"))
                    .collect::<Vec<_>>()
                    .join("/"),
                r.ages - 1
            ) + if r.mean_gap_short {
                "; the remembered steps already stall less often than the record's rate, so the \
                 older ones stall at every step and the chain's stall rate falls short of it"
            } else {
                ""
            },
        },
        if q.stalls.noise.is_none() {
            "on a virtual machine part of the latency tail is the cost of waking a halted vCPU, \
             which a computing thread never pays: there the stall term errs towards more underruns"
                .to_string()
        } else {
            "the noise record was taken under the same conditions (CPU, load) as the consumer \
             runs in: its stall rate is not scaled"
                .to_string()
        },
        format!(
            "evaluated exactly on a {} grid (values rounded up) in {} iterations{}{}",
            q.grid_ns,
            q.iterations,
            if q.renewal.as_ref().is_some_and(|r| r.phase.is_some()) {
                " (each one period of the periodic source)"
            } else {
                ""
            },
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
    use crate::model::Compute;
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
            noise: None,
        }
    }

    fn gaps_of(values: impl IntoIterator<Item = u64>) -> Tail {
        let mut r = Recorder::new(Nanos(1000));
        for v in values {
            r.record(Nanos(v));
        }
        Tail::from_series(&r.to_series("cpu0.gap", Metric::Gap))
    }

    /// 1000 gaps of 20 µs in 10 s of running time: 100 stalls/s of 20 µs,
    /// 0.2 % of the CPU, all of one length; the timer's model only lends
    /// its split of wake-ups.
    #[test]
    fn gap_histogram_gives_rate_mean_and_fraction() {
        let wake = StallModel::from_tail(&tail_of((0..10_000u64).map(|i| 5_000 + i % 3 * 1000)));
        let g = gaps_of(std::iter::repeat_n(20_000u64, 1000));
        let st = StallModel::from_gaps(&g, Nanos::from_secs(10), Nanos(1000), "cpu0.gap", &wake);
        assert!((st.rate_per_s - 100.0).abs() < 1e-9, "{st:?}");
        assert!((st.mean_ns - 20_000.0).abs() < 1e-9, "{st:?}");
        assert!((st.time_fraction - 0.002).abs() < 1e-12, "{st:?}");
        assert_eq!(st.lengths, vec![(20_000.0, 1.0)]);
        assert_eq!(st.threshold_ns, wake.threshold_ns);
        let ns = st.noise.as_ref().unwrap();
        assert_eq!((ns.gaps, ns.running_ns), (1000, Nanos::from_secs(10)));
        // Two lengths: shares by count, mean by both.
        let g = gaps_of((0..400u64).map(|i| if i % 4 == 0 { 1_000_000 } else { 10_000 }));
        let st = StallModel::from_gaps(&g, Nanos::from_secs(4), Nanos(1000), "cpu0.gap", &wake);
        assert!((st.rate_per_s - 100.0).abs() < 1e-9);
        // 10 µs sits in the bucket [10, 11) µs: its middle; 1 ms is the
        // maximum, which caps its bucket's middle.
        assert_eq!(st.lengths, vec![(10_500.0, 0.75), (1_000_000.0, 0.25)]);
        assert!(
            (st.mean_ns - (0.25 * 1e6 + 0.75 * 10_500.0)).abs() < 1e-6,
            "{st:?}"
        );
        assert!((st.time_fraction - 100.0 * 257_875.0 / 1e9).abs() < 1e-12);
    }

    /// A noise record with no gaps: nothing is stolen, so the forecast is
    /// the no-stall one exactly, whatever the timer's own tail suggests.
    #[test]
    fn zero_gaps_is_the_no_stall_forecast() {
        let t = tail_of((0..20_000u64).map(|i| match i % 50 {
            0 => 700_000,
            1 => 300_000,
            _ => 5_000 + i % 7 * 1000,
        }));
        let wake = StallModel::from_tail(&t);
        assert!(
            wake.rate_per_s > 0.0,
            "the tail alone infers stalls: {wake:?}"
        );
        let st = StallModel::from_gaps(
            &gaps_of(std::iter::empty()),
            Nanos::from_secs(20),
            Nanos(1000),
            "cpu0.gap",
            &wake,
        );
        assert_eq!(
            (st.rate_per_s, st.mean_ns, st.time_fraction),
            (0.0, 0.0, 0.0)
        );
        for n in [2, 3] {
            let b = Buffering::new(n, Nanos::from_ms(1), Compute::Time(Nanos::from_us(500)));
            let with = forecast_with(&t, &st, None, &b);
            let none = forecast_with(&t, &no_stalls(), None, &b);
            assert_eq!(with.underrun_probability, none.underrun_probability);
            assert_eq!(with.rate_per_s, none.rate_per_s);
            assert_eq!(with.stall_mean_ns, 0.0);
            // And differs from the inferred stall term.
            let inferred = forecast(&t, None, &b);
            assert!(inferred.underrun_probability > with.underrun_probability);
        }
    }

    /// Stalls measured as 1 ms gaps at 10/s, wake-ups on time: a 0.5 ms
    /// compute with 0.5 ms of slack underruns exactly when a stall falls
    /// into it, P = 1 − exp(−λ·c) = 1 − e^−0.005.
    #[test]
    fn measured_stalls_in_the_compute_closed_form() {
        let t = tail_of(std::iter::repeat_n(0u64, 10_000));
        let wake = StallModel::from_tail(&t);
        let g = gaps_of(std::iter::repeat_n(1_000_000u64, 100));
        let st = StallModel::from_gaps(&g, Nanos::from_secs(10), Nanos(1000), "cpu0.gap", &wake);
        let b = Buffering::new(2, Nanos::from_ms(1), Compute::Time(Nanos::from_us(500)));
        let q = forecast_with(&t, &st, None, &b);
        let want = 1.0 - (-0.005f64).exp();
        assert!((q.underrun_probability - want).abs() < 1e-9, "{q:?}");
        assert!(assumptions(&q).iter().any(|a| a.contains("cpu0.gap")));
    }

    /// Without stalls and with c → 0, n = 2 is Cota-Robles & Held's formula:
    /// P(underrun) = P(L > t).
    #[test]
    fn reduces_to_the_seed_formula() {
        // 1 wake-up in 10 is 1.2 ms late, the rest 5 µs.
        let t = tail_of((0..10_000u64).map(|i| if i % 10 == 0 { 1_200_000 } else { 5_000 }));
        let b = Buffering::new(2, Nanos::from_ms(1), Compute::Time(Nanos::ZERO));
        let q = forecast_with(&t, &no_stalls(), None, &b);
        assert!((q.underrun_probability - 0.1).abs() < 1e-12, "{q:?}");
        // Each underrun costs 2 periods: rate = 0.1 / (1 ms × 1.1).
        assert!((q.rate_per_s - 100.0 / 1.1).abs() < 1e-6);
        // n = 3 and 1.2 ms < 2 ms of slack: a late wake-up leaves 0.2 ms
        // of backlog that the next, on-time buffer absorbs.
        let b3 = Buffering::new(3, Nanos::from_ms(1), Compute::Time(Nanos::ZERO));
        assert_eq!(
            forecast_with(&t, &no_stalls(), None, &b3).underrun_probability,
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
        let q = forecast_with(&t, &no_stalls(), None, &b);
        assert!(q.converged);
        assert!((q.underrun_probability - 0.25).abs() < 1e-9, "{q:?}");
        assert!(q.utilization_ratio > 1.0);
        // Cota-Robles & Held would say never: every wake-up is on time.
    }

    /// Backlog with random latency: n = 3, c = 0.6 ms, 1 wake-up in 4 is
    /// 0.9 ms late. A late step ends at 1.5 ms (backlog 0.5 ms); the next
    /// then fails only if it is late too (max(0.9, 0.5) + 0.6 = 1.5 ≤ 2:
    /// never), so no underrun, although Cota-Robles & Held with L alone also says
    /// none. With c = 0.8 ms, two late wake-ups in a row end at 1.7 then
    /// max(0.9, 0.7) + 0.8 = 1.7: still none; the chain must agree.
    #[test]
    fn random_backlog_matches_hand_enumeration() {
        let t = tail_of((0..4000u64).map(|i| if i % 4 == 0 { 900_000 } else { 0 }));
        for c_us in [600, 800] {
            let b = Buffering::new(3, Nanos::from_ms(1), Compute::Time(Nanos::from_us(c_us)));
            assert_eq!(
                forecast_with(&t, &no_stalls(), None, &b).underrun_probability,
                0.0
            );
        }
        // c = 1.05 ms: each step adds 0.05 ms over t, except a late one
        // restarts from max(0.9, B). Underruns must now occur.
        let b = Buffering::new(3, Nanos::from_ms(1), Compute::Time(Nanos::from_us(1050)));
        assert!(forecast_with(&t, &no_stalls(), None, &b).underrun_probability > 0.0);
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
        let q = forecast(&t, None, &b);
        let p = q.underrun_probability;
        assert!((p - 0.094).abs() < 0.006, "{p}");
    }
    /// Rate (per second) of the stalls longer than `edge` that the
    /// stall model of 30 000 wake-ups of 1 ms holds, before and after the
    /// boundary correction at `edge`, over 40 records: 5 µs quiet
    /// wake-ups, a Poisson rest of 4/s with exponential lengths of mean
    /// 0.5 ms (a wake-up inside one is late by its remainder, exponential
    /// of the same mean) and, with `bursts`, a 1 ms burst every 10.37 ms
    /// (late by a uniform part of it); the edge is the stall threshold
    /// without bursts, their longest with them.
    fn rest_beyond_an_edge(bursts: bool) -> (f64, f64, f64) {
        let mut rng = crate::rng::SplitMix64::new(17);
        let (mut raw, mut fixed, mut kept) = (0.0, 0.0, 0.0);
        let records = 40;
        for _ in 0..records {
            let n = 30_000;
            let mut v = Vec::with_capacity(n);
            for _ in 0..n {
                let u = rng.uniform_open();
                let late = if u < 0.002 {
                    500e3 * rng.exp1()
                } else if bursts && u < 0.002 + 1.0 / 10.37 {
                    1e6 * rng.uniform_open()
                } else {
                    0.0
                };
                v.push(5_000 + late as u64);
            }
            let st = StallModel::from_tail(&tail_of(v));
            let measure: Vec<f64> = st
                .lengths
                .iter()
                .map(|&(_, sh)| sh * st.rate_per_s)
                .collect();
            // A burst's wake-up is late by at most its 1 ms, read to the
            // end of its 1 µs bucket.
            let edge = if bursts {
                1e6 + 1e3
            } else {
                (st.threshold_ns.0 - st.base_ns.0) as f64
            };
            let longer = |m: &[f64]| -> f64 {
                st.lengths
                    .iter()
                    .zip(m)
                    .filter(|(&(y, _), _)| y > edge)
                    .map(|(_, r)| r)
                    .sum()
            };
            let mut fix = measure.clone();
            let (mut a, mut b) = (vec![0.0; fix.len()], vec![0.0; fix.len()]);
            correct_end(
                &st.lengths,
                [&mut fix, &mut a, &mut b],
                edge,
                f64::INFINITY,
                n as f64,
            );
            raw += longer(&measure);
            fixed += longer(&fix);
            kept += late_beyond(&st.lengths, &fix, edge) / late_beyond(&st.lengths, &measure, edge);
        }
        let r = records as f64;
        (raw / r, fixed / r, kept / r)
    }

    /// The least concave majorant's first slope past a left end is the
    /// steepest chord from it, and overshoots the stall density there;
    /// corrected as Kulikov and Lopuhaä have it ([`boundary_point`]) the
    /// rate of stalls longer than the end comes near the truth, at the
    /// stall threshold (4/s: the rest's stalls are all longer than its
    /// 5 µs) and just past a burst's edge (4·e^(−2) = 0.54/s), and the
    /// late wake-ups beyond the end keep their number.
    #[test]
    fn the_rest_is_corrected_at_the_left_end_of_its_pieces() {
        for (bursts, truth) in [
            (false, 4.0 * (-5e3f64 / 500e3).exp()),
            (true, 4.0 * (-2.0f64).exp()),
        ] {
            let (raw, fixed, kept) = rest_beyond_an_edge(bursts);
            eprintln!("bursts {bursts}: truth {truth:.3}/s, raw {raw:.3}/s, corrected {fixed:.3}/s, count kept {kept:.4}");
            assert!(
                (kept - 1.0).abs() < 1e-9,
                "the count beyond the edge moved: {kept}"
            );
            assert!(
                (fixed / truth - 1.0).abs() < (raw / truth - 1.0).abs(),
                "corrected {fixed} is no nearer {truth} than raw {raw}"
            );
            assert!(
                (fixed / truth - 1.0).abs() < 0.3,
                "corrected {fixed} for {truth}"
            );
        }
    }

    /// A rest of 4/s stalls of exactly 0.5 ms beside a 1 ms burst: the
    /// burst is extended with probability 1 − e^−ρ (ρ = 0.002), by a
    /// residue uniform on (0, 0.5 ms] (what is left of a 0.5 ms stall at a
    /// uniform instant of it), so its mean length grows by λ·E[G²]/2 =
    /// 0.5 µs; and with no rest it is the burst alone.
    #[test]
    fn a_burst_is_extended_by_the_rest_that_outlasts_it() {
        let rest = StallModel {
            rate_per_s: 4.0,
            mean_ns: 500e3,
            time_fraction: 0.002,
            lengths: vec![(500e3, 1.0)],
            ..no_stalls()
        };
        let burst = vec![(1e6, 1.0)];
        let union = union_lengths(&burst, &rest, 10e3);
        let total: f64 = union.iter().map(|(_, s)| s).sum();
        assert!((total - 1.0).abs() < 1e-12, "{total}");
        let extended: f64 = union.iter().filter(|(y, _)| *y > 1e6).map(|(_, s)| s).sum();
        assert!(
            (extended - (1.0 - (-0.002f64).exp())).abs() < 1e-9,
            "{extended}"
        );
        assert!(union.iter().all(|(y, _)| *y <= 1.5e6 + 1.0));
        let mean: f64 = union.iter().map(|(y, s)| y * s).sum();
        // Each residue rounded up to its 10 µs cell: at most 10 µs × ρ more.
        let grown = mean - 1e6;
        assert!(
            grown > 0.49e3 && grown < 0.5e3 + 10e3 * 0.002 + 1.0,
            "{grown}"
        );
        assert_eq!(union_lengths(&burst, &no_stalls(), 10e3), burst);
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
        let p = forecast(&t, None, &b).underrun_probability;
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
            noise: None,
        };
        for len in [
            Nanos::from_ms(1),
            Nanos::from_ms(20),
            Nanos::from_ms(1000),
            Nanos::from_ms(10_000),
        ] {
            let b = Buffering::new(2, len, Compute::Time(Nanos(len.0 / 4)));
            let q = forecast_with(&t, &st, None, &b);
            assert!(q.underrun_probability < 1e-9, "{len}: {q:?}");
        }
    }

    /// A 1 ms probe under stalls starting at `starts` (ns, ascending) of
    /// `len_ns` each: each wake-up's latency is 2 µs plus what is left of
    /// a stall covering it; returns the tail and the spike log of every
    /// wake-up (nothing dropped).
    fn probe_under(starts: &[u64], len_ns: u64, wakeups: u64) -> (Tail, StallTimes) {
        let mut lat = Vec::with_capacity(wakeups as usize);
        let mut log = Vec::new();
        let mut j = 0;
        for i in 0..wakeups {
            let at = i * 1_000_000;
            while j < starts.len() && starts[j] + len_ns <= at {
                j += 1;
            }
            let rest = if j < starts.len() && starts[j] <= at {
                starts[j] + len_ns - at
            } else {
                0
            };
            let l = rest + 2_000;
            lat.push(l);
            log.push((Nanos(at + l), Nanos(l)));
        }
        let times =
            StallTimes::new(log, false, Nanos(wakeups * 1_000_000), Nanos(1_000_000)).unwrap();
        (tail_of(lat), times)
    }

    /// Constant hazards q are Poisson's: the older ages keep q. Zero
    /// hazard for 3 steps after a stall at the same mean gap 1/q = 10
    /// steps leaves the older ages 1/(10 − 3).
    #[test]
    fn older_hazard_keeps_the_mean_gap() {
        for q in [0.01, 0.2, 0.7] {
            let old = older_hazard(&[q; 9], q).unwrap();
            assert!((old - q).abs() < 1e-9, "{q}: {old}");
        }
        let old = older_hazard(&[0.0, 0.0, 0.0], 0.1).unwrap();
        assert!((1.0 / old - 7.0).abs() < 1e-9, "{old}");
        // A cluster: half the stalls have another right behind them, so
        // the rest must wait longer: 10 = 0.5·1 + 0.5·(2 + 1/h) − … i.e.
        // (10 − 0.5)/0.5 − 2 = 17 = 1/h.
        let old = older_hazard(&[0.5, 0.0], 0.1).unwrap();
        assert!((1.0 / old - 17.0).abs() < 1e-9, "{old}");
        // Nine steps without a stall after each already make the mean gap
        // longer than 5 steps: no older hazard keeps it, and it says so.
        assert_eq!(older_hazard(&[0.0; 9], 0.2), None);
        assert_eq!(older_hazard(&[0.0; 4], 0.2), Some(1.0));
    }

    /// The injector's 1 ms bursts every 10.37 ms, n = 3 × 1 ms, c =
    /// 0.5 ms: slack 1.5 ms, so one burst never underruns, and two never
    /// fall within the few periods a burst's backlog lasts. With the
    /// stall times the chain must say (almost) never; Poisson arrivals at the same
    /// rate put a second burst close behind the first now and then (the
    /// miss in docs/forecast.md §8).
    #[test]
    fn periodic_stalls_never_double_up() {
        let starts: Vec<u64> = (0..10_000u64).map(|i| 500_000 + i * 10_370_000).collect();
        let (t, times) = probe_under(&starts, 1_000_000, 100_000);
        let b = Buffering::new(3, Nanos::from_ms(1), Compute::Time(Nanos::from_us(500)));
        let poisson = forecast(&t, None, &b);
        let renewal = forecast(&t, Some(&times), &b);
        let r = renewal.renewal.as_ref().expect("enough stalls to read");
        // Not exactly never: the stall model read off the histogram has a
        // little more than the bursts (λ = 139/s for 96 bursts/s), and
        // what the log does not account for stays Poisson.
        assert!(poisson.underrun_probability > 1e-4, "{poisson:?}");
        assert!(
            renewal.underrun_probability < poisson.underrun_probability / 100.0,
            "{renewal:?}"
        );
        assert!(r.pair_correlation[..3].iter().all(|&g| g == 0.0), "{r:?}");
        // n = 2: one burst is enough, so the stall rate alone decides and
        // the renewal model keeps it (within a few %).
        let b2 = Buffering::new(2, Nanos::from_ms(1), Compute::Time(Nanos::from_us(500)));
        let (p, q) = (
            forecast(&t, None, &b2).underrun_probability,
            forecast(&t, Some(&times), &b2).underrun_probability,
        );
        assert!((q / p - 1.0).abs() < 0.05, "{p} {q}");
    }

    /// The periodic phase's chain solved a period at a time is the
    /// whole chain's stationary distribution: 1 ms bursts every 9.5 and
    /// 10.37 steps beside Poisson stalls of 1 ms, 5/s, before a consumer
    /// a burst leaves behind for several steps (n = 3, c = 0.8 ms, so
    /// underruns are a burst and a stall close together). Stepping the
    /// whole chain takes hundreds of iterations over every age there.
    #[test]
    fn a_period_at_a_time_solves_the_same_chain() {
        for period in [9_500_000u64, 10_370_000] {
            let mut rng = crate::rng::SplitMix64::new(17);
            let mut starts: Vec<u64> = (0..9_000u64).map(|i| 300_000 + i * period).collect();
            let mut at = 0.0;
            while at < 7e10 {
                at += rng.exp1() * 2e8;
                starts.push(at as u64);
            }
            starts.sort_unstable();
            let (t, all) = probe_under(&starts, 1_000_000, 70_000);
            // A log of the wake-ups beyond 100 µs, as a bounded one keeps.
            let logged = all
                .spikes
                .iter()
                .filter(|&&(_, l)| l > 100_000)
                .map(|&(a, l)| (Nanos(a), Nanos(l)));
            let covered = Nanos(70_000 * 1_000_000);
            let times =
                StallTimes::periodic(logged, true, covered, Nanos(1_000_000)).expect("a period");
            let b = Buffering::new(3, Nanos::from_ms(1), Compute::Time(Nanos::from_us(800)));
            let stalls = StallModel::from_tail(&t);
            let fast = forecast_solved(&t, &stalls, Some(&times), &b, false, true);
            let whole = forecast_solved(&t, &stalls, Some(&times), &b, false, false);
            assert!(fast.renewal.as_ref().unwrap().phase.is_some(), "{fast:?}");
            assert!(fast.converged && whole.converged, "{fast:?} {whole:?}");
            assert!(fast.underrun_probability > 1e-4, "{fast:?}");
            let rel = fast.underrun_probability / whole.underrun_probability - 1.0;
            assert!(rel.abs() < 1e-6, "{period}: {fast:?} against {whole:?}");
            assert!(
                fast.iterations * 10 < whole.iterations,
                "{period}: {} periods, {} steps",
                fast.iterations,
                whole.iterations
            );
        }
    }

    /// The default arrivals: a log that holds only its first 1000 stalls
    /// (as the simulator's does) of a strictly periodic burst is found
    /// periodic, and at n = 3 (two bursts needed within one backlog,
    /// which never happens) the forecast falls far below Poisson's; the
    /// same log of exponential gaps is not periodic and stays Poisson.
    /// A thread's stalls every 20 ms among twice as many random ones: the
    /// whole log's gaps are split too often to show the period, the
    /// thread's own do; a log that is the thread's alone reads as the
    /// whole log did.
    #[test]
    fn a_period_is_read_per_source() {
        let mut rng = crate::rng::SplitMix64::new(3);
        let mut log: Vec<(Nanos, Nanos, Option<String>)> = (0..1000u64)
            .map(|k| {
                let at = k * 20_000_000 + (rng.uniform_open() * 5e5) as u64;
                (Nanos(at), Nanos(400_000), Some("thread per/7".to_string()))
            })
            .collect();
        let own = log.clone();
        let mut at = 0.0;
        while at < 2e10 {
            at += rng.exp1() * 10_000_000.0;
            log.push((Nanos(at as u64), Nanos(300_000), Some("irq rnd".into())));
        }
        let (covered, interval) = (Nanos(20_000_000_000), Nanos(1_000_000));
        let read = |l: &[(Nanos, Nanos, Option<String>)]| {
            StallTimes::labelled(l.iter().cloned(), Nanos::ZERO, covered, interval)
                .and_then(StallTimes::into_periodic)
        };
        let unlabelled: Vec<_> = log.iter().map(|(a, l, _)| (*a, *l, None)).collect();
        assert_eq!(read(&unlabelled), None, "the whole log shows no period");
        let st = read(&log).expect("the thread's own stalls are periodic");
        assert_eq!(st.periodic_source.as_deref(), Some("thread per/7"));
        let alone = read(&own).expect("periodic");
        assert_eq!(alone.periodic_source, None);
    }

    #[test]
    fn a_periodic_log_makes_periodic_arrivals_and_a_poisson_one_does_not() {
        let capped = |times: &StallTimes| -> Vec<(Nanos, Nanos)> {
            times
                .spikes
                .iter()
                .filter(|&&(_, l)| l > 100_000)
                .take(1000)
                .map(|&(a, l)| (Nanos(a), Nanos(l)))
                .collect()
        };
        let b = Buffering::new(3, Nanos::from_ms(1), Compute::Time(Nanos::from_us(500)));
        let starts: Vec<u64> = (0..10_000u64).map(|i| 500_000 + i * 10_370_000).collect();
        let (t, all) = probe_under(&starts, 1_000_000, 100_000);
        let covered = Nanos(100_000 * 1_000_000);
        let periodic = StallTimes::periodic(capped(&all), true, covered, Nanos(1_000_000))
            .expect("periodic log detected");
        let poisson = forecast(&t, None, &b).underrun_probability;
        let r = forecast(&t, Some(&periodic), &b);
        let period = r.renewal.as_ref().and_then(|x| x.period_ns);
        assert!((period.unwrap() - 10_370_000.0).abs() < 100_000.0, "{r:?}");
        assert!(assumptions(&r)
            .iter()
            .any(|a| a.starts_with("periodic arrivals")));
        assert!(
            r.underrun_probability < poisson / 100.0,
            "{poisson} vs {r:?}"
        );

        let mut rng = crate::rng::SplitMix64::new(11);
        let mut at = 0.0;
        let mut random = Vec::new();
        while at < 1e11 {
            at += rng.exp1() * 10_370_000.0;
            if random.last().is_none_or(|&p| at as u64 >= p + 1_000_000) {
                random.push(at as u64);
            }
        }
        let (_, all) = probe_under(&random, 1_000_000, 100_000);
        assert_eq!(
            StallTimes::periodic(capped(&all), true, covered, Nanos(1_000_000)),
            None
        );
    }

    /// A thread's 1 ms stalls every 20 ms beside a disk's interrupts, a
    /// busy loop's gaps of 10 µs about 9000 times a second and a few
    /// 1.2 ms ones at random, and two wake-ups 8 ms late (a
    /// `bench/advise.sh all` record's shape).
    /// The chain's age counts steps since the last stall of any source;
    /// the interrupts stall nearly every step, so an age says next to
    /// nothing about when the thread last stalled. Read as if it did,
    /// the thread's stalls were taken out at every young age, which is
    /// nearly every step, and the record with the thread was forecast
    /// fewer underruns than the same record without it.
    #[test]
    fn a_period_does_not_thin_a_process_that_stalls_every_step() {
        let mut rng = crate::rng::SplitMix64::new(5);
        let secs = 10u64;
        let mut log: Vec<(Nanos, Nanos, Option<String>)> = Vec::new();
        for k in 0..secs * 50 {
            let at = k * 20_000_000 + 3_000_000;
            let l = 20_000 + (rng.uniform_open() * 1e6) as u64;
            log.push((Nanos(at), Nanos(l), Some("thread fifo/7".into())));
        }
        let mut at = 0.0;
        while at < (secs * 1_000_000_000) as f64 {
            at += rng.exp1() * 10_000_000.0;
            let l = 60_000 + (rng.uniform_open() * 20_000.0) as u64;
            log.push((Nanos(at as u64), Nanos(l), Some("irq disk".into())));
        }
        let lat: Vec<u64> = (0..secs * 1000)
            .map(|i| match i {
                _ if i % 20 == 3 => 500_000,
                _ if i % 5000 == 2500 => 8_000_000,
                _ => 12_000,
            })
            .collect();
        let wake = StallModel::from_tail(&tail_of(lat.iter().copied()));
        let running = Nanos(secs * 1_000_000_000);
        let gaps = |fifo: bool| {
            let mut g: Vec<u64> = vec![10_000; 90_000];
            g.extend(std::iter::repeat_n(1_200_000, 20));
            if fifo {
                g.extend(std::iter::repeat_n(1_000_000, 500));
            }
            StallModel::from_gaps(&gaps_of(g), running, Nanos(1000), "cpu0.gap", &wake)
        };
        let times = StallTimes::labelled(log, Nanos::ZERO, running, Nanos(1_000_000))
            .and_then(StallTimes::into_periodic)
            .expect("the thread's stalls are periodic");
        assert_eq!(times.periodic_source.as_deref(), Some("thread fifo/7"));
        let b = Buffering::new(2, Nanos::from_ms(2), Compute::Time(Nanos::from_us(500)));
        let t = tail_of(lat);
        let with = forecast_with(&t, &gaps(true), Some(&times), &b);
        assert!(with.renewal.is_some(), "{with:?}");
        let without = forecast_with(&t, &gaps(false), None, &b);
        assert!(
            with.rate_per_s >= without.rate_per_s,
            "with the thread {} underruns/s, without it {}",
            with.rate_per_s,
            without.rate_per_s
        );
    }

    /// Exponential gaps between stalls: the pair correlation read from the
    /// log is 1 within its noise, and the forecast with the stall times is
    /// the Poisson one within that noise, for a case that takes two stalls
    /// (n = 3) and one that takes one (n = 2).
    #[test]
    fn exponential_gaps_reduce_to_poisson() {
        let mut rng = crate::rng::SplitMix64::new(7);
        let mut starts = Vec::new();
        let mut at = 0.0;
        let end = 200e9;
        while at < end {
            at += rng.exp1() * 1e7; // 100 stalls/s
            starts.push(at as u64);
        }
        // Stalls of 0.6 ms (overlaps merge: the later start waits).
        let mut merged: Vec<u64> = Vec::new();
        for s in starts {
            if merged.last().is_none_or(|&p| s >= p + 600_000) {
                merged.push(s);
            }
        }
        let (t, times) = probe_under(&merged, 600_000, 200_000);
        for (n, c_us) in [(3, 500), (2, 500), (3, 800)] {
            let b = Buffering::new(n, Nanos::from_ms(1), Compute::Time(Nanos::from_us(c_us)));
            let p = forecast(&t, None, &b).underrun_probability;
            let r = forecast(&t, Some(&times), &b);
            let g = &r.renewal.as_ref().unwrap().pair_correlation;
            assert!(g.iter().all(|x| (x - 1.0).abs() < 0.15), "{g:?}");
            assert!(p > 0.0);
            let ratio = r.underrun_probability / p;
            assert!((0.8..1.25).contains(&ratio), "n={n} c={c_us}: {p} vs {r:?}");
        }
    }

    /// Too few logged stalls to tell: Poisson, and the same figure.
    #[test]
    fn sparse_log_falls_back_to_poisson() {
        let starts: Vec<u64> = (0..5u64).map(|i| 500_000 + i * 1_000_370_000).collect();
        let (t, times) = probe_under(&starts, 1_000_000, 5_000);
        let b = Buffering::new(3, Nanos::from_ms(1), Compute::Time(Nanos::from_us(500)));
        let r = forecast(&t, Some(&times), &b);
        assert!(r.renewal.is_none());
        assert_eq!(r, forecast(&t, None, &b));
    }

    /// A simulated machine: `noise` (`[[noise]]` tables) under `task`.
    fn simulated(noise: &str, task: &str, seed: u64, secs: u64) -> punctual_record::Record {
        let text = format!(
            "[sim]\ndescription = \"queue test\"\nspike_threshold = \"100us\"\n{task}\n{noise}"
        );
        let opts = punctual_sim::RunOptions {
            seed: Some(seed),
            duration: Some(Nanos::from_secs(secs)),
            timeline_window: Some(Nanos::ZERO),
            ..Default::default()
        };
        let (scn, o) = punctual_sim::run_text("queue.toml", &text, &[], &opts).unwrap();
        punctual_sim::to_record(&scn, &o, &[])
    }

    /// Forecast ÷ truth for a consumer of `n` × 1 ms buffers and `c_us` of
    /// compute under `noise`: the median over `records` records of a 1 ms
    /// probe of `secs` each, forecast as `forecast` does (the probe's
    /// missed periods counted as the live timer counts them), against the
    /// rate of underruns of the consumer itself run for `truth_secs`
    /// (bench/calibration.sh at a test's size).
    fn forecast_over_truth(
        noise: &str,
        n: u32,
        c_us: u64,
        records: u64,
        secs: u64,
        truth_secs: u64,
        periodic: bool,
    ) -> f64 {
        let consumer = format!(
            "[[task]]\nname = \"consumer\"\nkind = \"periodic\"\npriority = 31\n\
             period = \"1ms\"\nexec = \"{c_us}us\"\nbuffers = {n}\nrefill = true\n"
        );
        let truth = simulated(noise, &consumer, 7, truth_secs)
            .series_named("consumer.latency")
            .unwrap()
            .missed as f64
            / truth_secs as f64;
        assert!(truth > 0.0, "the consumer must underrun in {truth_secs} s");
        let probe = "[[task]]\nname = \"probe\"\nkind = \"periodic\"\npriority = 31\n\
                     period = \"1ms\"\nexec = \"5us\"\ndeadline = \"1ms\"\nrefill = true\n";
        let b = Buffering::new(n, Nanos::from_ms(1), Compute::Time(Nanos::from_us(c_us)));
        let mut ratios: Vec<f64> = (1..=records)
            .map(|seed| {
                let rec = simulated(noise, probe, 1000 + seed, secs);
                let mut s = rec.series_named("probe.latency").unwrap().clone();
                let p = s.sample_period_ns.unwrap().0;
                s.missed = s.histogram.buckets.iter().map(|(lo, c)| c * (lo / p)).sum();
                let m = crate::forecast::TailModel::new(&s, rec.duration_ns)
                    .unwrap()
                    .with_spike_log(&rec, &s);
                let times = m.stall_times.as_ref();
                assert_eq!(times.is_some(), periodic, "seed {seed}: a period found");
                let r = crate::buffer::mttf(&m, &b).unwrap();
                r.underrun_rate_per_s / truth
            })
            .collect();
        ratios.sort_by(f64::total_cmp);
        ratios[ratios.len() / 2]
    }

    const BURST: &str = "[[noise]]\nname = \"burst\"\nkind = \"periodic\"\nlevel = \"stall\"\n";
    const STALLS: &str = "[[noise]]\nname = \"stalls\"\nkind = \"poisson\"\nlevel = \"stall\"\n";

    /// Periodic bursts that leave a backlog behind them for a few
    /// periods, and Poisson stalls that underrun the consumer inside that
    /// backlog (bench/calibration.sh's two tight periodic shapes): an
    /// underrun is a burst and a stall close together, in either order,
    /// and a burst starts inside the consumer's compute about c/t of the
    /// time. Placing every burst as a late wake-up, letting a Poisson
    /// stall restart the bursts' phase, and remembering more steps than
    /// the period forecast about 0.5–0.6 × the truth. The band is wider
    /// on the safe side, where the chain now errs (docs/forecast.md §3.3,
    /// its limits).
    #[test]
    fn bursts_with_a_backlog_behind_them_are_forecast_near_the_truth() {
        for (what, noise, c_us) in [
            (
                "1 ms every 10.37 ms, Poisson 4/s of 0.5 ms",
                format!(
                    "{BURST}period = \"10.37ms\"\nduration = \"1ms\"\n\
                     {STALLS}rate = 4.0\nduration = {{ exp = \"500us\" }}\n"
                ),
                800,
            ),
            (
                "0.7 ms every 8.3 ms, Poisson 3/s of 0.6 ms",
                format!(
                    "{BURST}period = \"8.3ms\"\nduration = \"700us\"\n\
                     {STALLS}rate = 3.0\nduration = {{ exp = \"600us\" }}\n"
                ),
                850,
            ),
        ] {
            let r = forecast_over_truth(&noise, 3, c_us, 5, 30, 600, true);
            eprintln!("{what}: forecast ÷ truth {r:.2} (median of 5)");
            assert!((0.75..1.5).contains(&r), "{what}: forecast ÷ truth {r:.2}");
        }
    }

    /// The shapes the model already forecast without a bias stay there:
    /// the classic periodic shape (a burst alone never underruns, two
    /// never come close) and Poisson stalls alone (no period: the
    /// arrivals stay Poisson, and the forecast is the one without times).
    #[test]
    fn classic_periodic_and_poisson_shapes_stay_near_the_truth() {
        let periodic = format!(
            "{BURST}period = \"10.37ms\"\nduration = \"1ms\"\n\
             {STALLS}rate = 0.3\nduration = {{ exp = \"1ms\" }}\n"
        );
        let r = forecast_over_truth(&periodic, 3, 500, 5, 120, 1200, true);
        assert!((0.6..1.5).contains(&r), "periodic: forecast ÷ truth {r:.2}");
        let poisson = format!("{STALLS}rate = 0.5\nduration = {{ exp = \"1ms\" }}\n");
        let r = forecast_over_truth(&poisson, 3, 500, 5, 120, 1200, false);
        assert!((0.6..1.5).contains(&r), "poisson: forecast ÷ truth {r:.2}");
    }

    #[test]
    fn constant_latency_has_no_stalls() {
        let t = tail_of(std::iter::repeat_n(20_000u64, 1000));
        let st = StallModel::from_tail(&t);
        assert_eq!(st.rate_per_s, 0.0);
    }
}
