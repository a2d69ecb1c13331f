//! Did latency regress between two records? A two-sample comparison of
//! chosen quantiles, series by series, for CI farms and before/after tuning.
//!
//! A raw max (or a raw p99) differs between any two runs; the question is
//! whether the difference is larger than the runs' own sampling noise.
//! Each record's histogram is resampled with the Poisson bootstrap (every
//! sample gets a Poisson(1) weight, so a bucket of `c` samples gets a
//! Poisson(`c`) count: O(buckets) per replicate, however long the run),
//! and the quantile is recomputed in each replicate. The ratio NEW / BASE
//! over paired replicates gives a confidence interval; the level is
//! Bonferroni-corrected over every (series, quantile) test so that the
//! whole comparison, not each line, holds the asked confidence.
//!
//! Late wake-ups come in episodes (a host that deschedules the VM, a long
//! kernel section, a burst of interrupts), not one by one: 50 samples
//! above p99 may be three events. Resampling them as 50 independent
//! samples makes the interval far too narrow, and two runs of an idle
//! machine then "differ". The record's spike log (time stamps of the
//! largest values) gives the mean episode size above the values tested
//! (the inverse of the extremal index of extreme-value theory, estimated
//! from the times between exceedances), and the tail buckets are
//! resampled in episodes of that size (a compound Poisson bootstrap),
//! which widens the interval by the clustering the run showed.
//!
//! Episodes from the spike log see only the tail's clustering, and only
//! as far as the log reaches; a run also drifts as a whole (another
//! tenant's build for two seconds of it, a host that steals in one stretch
//! and not the next). When both series carry their samples window by
//! window (`Series::windows`, written by the timer probe), the interval
//! comes from a block bootstrap instead: each replicate draws runs of
//! consecutive windows (circular blocks) until it has as many windows as
//! the run, and recomputes the quantile from their summed histograms, so a
//! run whose stretches disagree gets an interval as wide as that
//! disagreement.
//!
//! The windows (about 100 ms at first) are longer than a stall that makes
//! neighbouring wake-ups late together, but not than every disturbance:
//! a host's busy spell or another tenant's burst lasts a second or more,
//! many windows in a row. Drawn one by one, those windows would each
//! appear in a replicate about once, and a run that met one such episode
//! would look as if every run meets one. So a block holds the more
//! consecutive windows the more the run's windows resemble their
//! neighbours: the per-window share of samples at or above the quantile tested
//! (pooled over both runs) is the statistic, and its autocovariances set
//! the length by Politis & White's rule for the circular block bootstrap
//! ([`crate::blocklen`]), for each run and quantile on its own. A steady
//! disturbance (a competitor in every window, a slower machine) shows in
//! every window alike, its shares do not depend on their neighbours, and
//! its blocks stay near one window, so its interval stays narrow. Blocks
//! are at most a tenth of the run ([`MIN_BLOCKS`]), so that a replicate
//! still mixes ten stretches. What no resampling within a run can see is
//! a change slower than the run: two runs that meet the machine in two
//! different steady states differ, and their comparison says so.
//!
//! Without windows (records of older versions, merged records,
//! simulations) the episode bootstrap above is used and the comparison
//! says so: its interval leaves out the run's variability beyond what the
//! spike log shows.
//!
//! A change counts only when the whole interval lies beyond `min_change`
//! (and beyond one histogram bucket): the bootstrap sees only the sampling
//! noise within a run, not the drift between two runs of the same machine
//! (other tenants, frequency, cache state), and a CI gate that fires on
//! drift is switched off within a week. The default margin is that drift
//! as measured on a shared VM (`CompareOptions::default`); a quieter
//! machine can measure its own with `bench/compare-spread.py` and pass a
//! smaller one. Quantiles with too few samples
//! above them to be estimated are reported as such, with the run length
//! that would give enough.

use punctual_record::windows::window_bucket_width;
use punctual_record::{Metric, Nanos, Record, Series, Spike, Windows};
use serde::Serialize;

use crate::rng::SplitMix64;

/// The answer for one quantile, one series or the whole comparison.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Answer {
    Regressed,
    Improved,
    /// The interval holds no change beyond `min_change`, or the quantile
    /// could not be estimated at this length.
    NoDifference,
}

impl Answer {
    pub fn as_str(self) -> &'static str {
        match self {
            Answer::Regressed => "regressed",
            Answer::Improved => "improved",
            Answer::NoDifference => "no difference detectable at this length",
        }
    }
}

/// How to compare.
#[derive(Clone, Debug)]
pub struct CompareOptions {
    /// Quantiles to test, each in (0, 1).
    pub quantiles: Vec<f64>,
    /// Family-wise confidence of the whole comparison (0.95).
    pub level: f64,
    /// Smallest relative change that counts (0.4 = NEW 40% above BASE, or
    /// BASE 40% above NEW for an improvement).
    pub min_change: f64,
    /// Bootstrap replicates per record and series.
    pub replicates: usize,
    /// Seed of the bootstrap: the same records give the same answer.
    pub seed: u64,
    /// Consecutive windows per block in the block bootstrap; `None`
    /// chooses it for each run and quantile from the windows' dependence
    /// (the module's text). A fixed 1 resamples windows one by one.
    pub block_windows: Option<usize>,
}

impl Default for CompareOptions {
    fn default() -> Self {
        CompareOptions {
            // The tail: where deadlines are missed. The median of a
            // virtual machine moves with its host's load by more than a
            // regression gate should care about; ask for it with
            // `quantiles` when it matters.
            quantiles: vec![0.99, 0.999],
            level: 0.95,
            // The drift between two idle runs of one machine, which no
            // resampling within a run sees: 39 of 40 back-to-back pairs
            // of idle 11 s runs on a shared 2-vCPU VM needed at most 39.5%
            // (`bench/compare-spread.py`; docs/workflows.md). Covering 39
            // of 40, not 9 of 10, is what makes ">= 9 of 10 pairs no
            // difference" hold in most batches of ten rather than half.
            min_change: 0.4,
            replicates: 4000,
            seed: 1,
            block_windows: None,
        }
    }
}

/// Samples needed above a quantile in each record before it is tested:
/// with fewer, the bootstrap's interval is set by a handful of values and
/// its stated confidence does not hold.
pub const MIN_ABOVE: f64 = 10.0;

/// Fewest windows in each record for the block bootstrap: with fewer, a
/// replicate can only repeat a handful of stretches and its interval is
/// set by which ones it drew.
pub const MIN_WINDOWS: usize = 16;

/// Fewest blocks a replicate is made of: the block length is capped at
/// the run's windows divided by this. With fewer, each replicate repeats a
/// few long stretches, and the interval says more about which ones were
/// drawn than about the run.
pub const MIN_BLOCKS: usize = 10;

/// The block length used for one quantile, in windows, in each run.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct BlockLength {
    /// `p99`, `p99.9`.
    pub quantile: String,
    pub base: usize,
    pub new: usize,
}

/// How a series' replicates were drawn.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "by", rename_all = "snake_case")]
pub enum Resampling {
    /// Circular blocks of consecutive windows of each run, with
    /// replacement.
    Windows {
        base_windows: usize,
        new_windows: usize,
        /// Samples per window in BASE and NEW (the last may hold fewer).
        samples_per_window: (u64, u64),
        /// Windows per block, by tested quantile.
        blocks: Vec<BlockLength>,
    },
    /// Sample by sample, the tail in episodes from the spike log; `why`
    /// says why windows were not used.
    Samples { why: String },
}

impl Resampling {
    /// One line for the text output.
    pub fn describe(&self) -> String {
        match self {
            Resampling::Windows {
                base_windows,
                new_windows,
                samples_per_window: (sb, sn),
                blocks,
            } => {
                let lengths: Vec<String> = blocks
                    .iter()
                    .map(|b| format!("{} {} in BASE, {} in NEW", b.quantile, b.base, b.new))
                    .collect();
                let lengths = if lengths.is_empty() {
                    "no quantile tested".to_string()
                } else {
                    lengths.join("; ")
                };
                format!(
                    "resampled by blocks of B consecutive windows, B as long as neighbouring windows stay alike (Politis & White's rule, at most a tenth of the run): {lengths} ({base_windows} windows of {sb} samples in BASE, {new_windows} of {sn} in NEW)"
                )
            }
            Resampling::Samples { why } => format!(
                "resampled sample by sample, late ones in episodes from the spike log ({why}): the interval leaves out the run's swings between stretches, so a drift of the machine may read as a change"
            ),
        }
    }
}

/// One quantile of one series.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct QuantileComparison {
    /// `p50`, `p99`, `p99.9`.
    pub quantile: String,
    pub q: f64,
    pub base_ns: Nanos,
    pub new_ns: Nanos,
    /// NEW / BASE, point estimate.
    pub ratio: f64,
    /// Bonferroni-corrected interval of NEW / BASE; absent when untested.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ratio_ci: Option<(f64, f64)>,
    pub answer: Answer,
    /// Why a quantile was not tested, with the length that would do.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub untested: Option<String>,
    /// Mean episode size of the samples above the lower of the two
    /// values in BASE and NEW (1: independent; from the spike log), by
    /// which the resampling groups the tail.
    pub episode_size: (f64, f64),
}

/// One series found in both records.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SeriesComparison {
    pub name: String,
    pub metric: Metric,
    pub base_count: u64,
    pub new_count: u64,
    pub quantiles: Vec<QuantileComparison>,
    /// Regressed when any quantile regressed; improved when one improved
    /// and none regressed.
    pub answer: Answer,
    pub resampling: Resampling,
}

/// The whole comparison.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Comparison {
    pub series: Vec<SeriesComparison>,
    /// Series not compared, with the reason.
    pub skipped: Vec<(String, String)>,
    pub level: f64,
    /// Per-test confidence after the Bonferroni correction.
    pub per_test_level: f64,
    pub min_change: f64,
    pub replicates: usize,
    pub seed: u64,
    pub answer: Answer,
}

/// Why two records cannot be compared.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum CompareError {
    #[error("quantile {0} is not between 0 and 1 (use e.g. 0.99 for p99)")]
    Quantile(f64),
    #[error("--level {0} is not between 0 and 1 (use e.g. 0.95)")]
    Level(f64),
    #[error("--min-change {0} is negative")]
    MinChange(f64),
    #[error(
        "the records have no latency-like series in common ({0}), so there is nothing to compare"
    )]
    NothingInCommon(String),
}

/// Metrics where larger is worse, so "regressed" means "went up".
/// Intervals deviate in both directions and received CPU time is better
/// when larger: those are not compared.
fn comparable(m: Metric) -> Result<(), &'static str> {
    match m {
        Metric::Latency | Metric::Gap | Metric::Response | Metric::ServiceGap => Ok(()),
        Metric::Interval => Err("intervals deviate both ways from the period; latency carries the same information one-sided"),
        Metric::Received => Err("received CPU time is better when larger; not a latency"),
    }
}

/// `p99`, `p99.9`, `p50` from 0.99, 0.999, 0.5.
pub fn quantile_label(q: f64) -> String {
    let pct = q * 100.0;
    let s = format!("{pct:.4}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    format!("p{s}")
}

/// Compares every latency-like series present in both records.
pub fn compare(
    base: &Record,
    new: &Record,
    opts: &CompareOptions,
) -> Result<Comparison, CompareError> {
    for &q in &opts.quantiles {
        if !(q > 0.0 && q < 1.0) {
            return Err(CompareError::Quantile(q));
        }
    }
    if !(opts.level > 0.0 && opts.level < 1.0) {
        return Err(CompareError::Level(opts.level));
    }
    if opts.min_change.is_nan() || opts.min_change < 0.0 {
        return Err(CompareError::MinChange(opts.min_change));
    }
    let mut pairs: Vec<(&Series, &Series)> = Vec::new();
    let mut skipped = Vec::new();
    for b in &base.series {
        match new.series_named(&b.name) {
            None => skipped.push((b.name.clone(), "only in BASE".to_string())),
            Some(n) => match comparable(b.metric) {
                Err(why) => skipped.push((b.name.clone(), why.to_string())),
                Ok(()) if b.count == 0 || n.count == 0 => {
                    skipped.push((b.name.clone(), "no samples in one record".to_string()))
                }
                Ok(()) => pairs.push((b, n)),
            },
        }
    }
    for n in &new.series {
        if base.series_named(&n.name).is_none() {
            skipped.push((n.name.clone(), "only in NEW".to_string()));
        }
    }
    if pairs.is_empty() {
        let names = |r: &Record| {
            let v: Vec<&str> = r.series.iter().map(|s| s.name.as_str()).collect();
            if v.is_empty() {
                "none".to_string()
            } else {
                v.join(", ")
            }
        };
        return Err(CompareError::NothingInCommon(format!(
            "BASE has {}; NEW has {}",
            names(base),
            names(new)
        )));
    }
    let tests = (pairs.len() * opts.quantiles.len()).max(1);
    let per_test_level = 1.0 - (1.0 - opts.level) / tests as f64;
    let mut rng = SplitMix64::new(opts.seed);
    let mut series = Vec::new();
    for (b, n) in pairs {
        series.push(compare_series(
            (base, b),
            (new, n),
            opts,
            per_test_level,
            &mut rng,
        ));
    }
    let answer = overall(series.iter().map(|s| s.answer));
    Ok(Comparison {
        series,
        skipped,
        level: opts.level,
        per_test_level,
        min_change: opts.min_change,
        replicates: opts.replicates,
        seed: opts.seed,
        answer,
    })
}

fn overall(answers: impl Iterator<Item = Answer>) -> Answer {
    let mut out = Answer::NoDifference;
    for a in answers {
        match a {
            Answer::Regressed => return Answer::Regressed,
            Answer::Improved => out = Answer::Improved,
            Answer::NoDifference => {}
        }
    }
    out
}

/// Mean size of the episodes of `s`'s samples above `u` ns: 1 / the
/// extremal index, by the intervals estimator of Ferro & Segers (2003)
/// over the times between those samples in the spike log, in sample
/// periods. It needs no run length to decide what counts as one episode,
/// so a steady periodic disturbance (every wake-up its own event) reads
/// as 1 and a stall that delays twenty wake-ups in a row as about 20.
/// The log keeps the largest values: when it is full and its smallest
/// value is above `u`, the estimate uses what it holds. 1 when fewer
/// than three are logged.
pub fn episode_size(rec: &Record, s: &Series, u: u64) -> f64 {
    let mine = |sp: &&Spike| {
        sp.metric == s.metric && s.cpu.is_none_or(|c| c == sp.cpu) && sp.task == s.task
    };
    let mut at: Vec<u64> = rec
        .spikes
        .iter()
        .filter(mine)
        .filter(|sp| sp.value_ns.0 > u)
        .map(|sp| sp.at_ns.0)
        .collect();
    if at.len() < 3 {
        return 1.0;
    }
    at.sort_unstable();
    let period = s
        .sample_period_ns
        .filter(|p| !p.is_zero())
        .map_or(1_000_000, |p| p.0) as f64;
    let t: Vec<f64> = at
        .windows(2)
        .map(|w| ((w[1] - w[0]) as f64 / period).round().max(1.0))
        .collect();
    let n1 = t.len() as f64;
    let max = t.iter().copied().fold(0.0, f64::max);
    let theta = if max <= 2.0 {
        let sum: f64 = t.iter().sum();
        let sq: f64 = t.iter().map(|x| x * x).sum();
        2.0 * sum * sum / (n1 * sq)
    } else {
        let sum: f64 = t.iter().map(|x| x - 1.0).sum();
        let prod: f64 = t.iter().map(|x| (x - 1.0) * (x - 2.0)).sum();
        2.0 * sum * sum / (n1 * prod)
    };
    if theta.is_finite() && theta > 0.0 {
        1.0 / theta.min(1.0)
    } else {
        1.0
    }
}

fn compare_series(
    (base, b): (&Record, &Series),
    (new, n): (&Record, &Series),
    opts: &CompareOptions,
    per_test_level: f64,
    rng: &mut SplitMix64,
) -> SeriesComparison {
    // Same bucket width on both sides, so a quantile means the same value.
    let w = b.histogram.bucket_ns.max(n.histogram.bucket_ns).max(1);
    let hb = b.histogram.rebucket(w);
    let hn = n.histogram.rebucket(w);
    let (tb, tn) = (hb.total(), hn.total());
    let (base_len, new_len) = (base.duration_ns, new.duration_ns);
    let blocks = match (usable_windows(b), usable_windows(n)) {
        (Ok(wb), Ok(wn)) => Ok((Blocks::new(wb), Blocks::new(wn))),
        (Err(why), _) => Err(format!("BASE {why}")),
        (_, Err(why)) => Err(format!("NEW {why}")),
    };
    let mut resampling = match &blocks {
        Ok((bb, bn)) => Resampling::Windows {
            base_windows: bb.windows.len(),
            new_windows: bn.windows.len(),
            samples_per_window: (bb.per_window, bn.per_window),
            blocks: Vec::new(),
        },
        Err(why) => Resampling::Samples { why: why.clone() },
    };
    let pooled = match &blocks {
        Ok((bb, bn)) => pooled_counts(bb, bn),
        Err(_) => Vec::new(),
    };
    let mut quantiles = Vec::new();
    for &q in &opts.quantiles {
        let label = quantile_label(q);
        let base_ns = quantile(&hb.buckets, tb as f64, q, w);
        let new_ns = quantile(&hn.buckets, tn as f64, q, w);
        let ratio = new_ns as f64 / base_ns.max(1) as f64;
        let mut row = QuantileComparison {
            quantile: label.clone(),
            q,
            base_ns: Nanos(base_ns),
            new_ns: Nanos(new_ns),
            ratio,
            ratio_ci: None,
            answer: Answer::NoDifference,
            untested: None,
            // Episodes above the lower of the two values: the samples
            // whose count decides both quantiles' place.
            episode_size: (
                episode_size(base, b, base_ns.min(new_ns)),
                episode_size(new, n, base_ns.min(new_ns)),
            ),
        };
        let short = [(tb, base_len, "BASE"), (tn, new_len, "NEW")]
            .into_iter()
            .find(|(t, _, _)| (*t as f64) * (1.0 - q) < MIN_ABOVE);
        if let Some((t, len, which)) = short {
            // Rounded first: 10 / (1 - 0.999) is 10000.000000000002 in f64.
            let needed = (MIN_ABOVE / (1.0 - q)).round().max(1.0);
            let mut why = format!(
                "{which} has {t} samples; {label} needs {needed:.0} ({MIN_ABOVE:.0} above it)"
            );
            if len.0 > 0 && t > 0 {
                let secs = len.as_secs_f64() * needed / t as f64;
                why.push_str(&format!(": measure at least {}", human_secs(secs)));
            }
            row.untested = Some(why);
            quantiles.push(row);
            continue;
        }
        let mut ratios = Vec::with_capacity(opts.replicates);
        let mut diffs = Vec::with_capacity(opts.replicates);
        let mut wb = vec![0f64; hb.buckets.len()];
        let mut wn = vec![0f64; hn.buckets.len()];
        let (kb, kn) = row.episode_size;
        let lengths = match &blocks {
            Ok((bb, bn)) => {
                let at_ns = pooled_quantile_lower_ns(&pooled, q);
                let length = |b: &Blocks| match opts.block_windows {
                    Some(l) => l.clamp(1, b.windows.len()),
                    None => b.block_length(at_ns),
                };
                let (lb, ln) = (length(bb), length(bn));
                if let Resampling::Windows { blocks, .. } = &mut resampling {
                    blocks.push(BlockLength {
                        quantile: label.clone(),
                        base: lb,
                        new: ln,
                    });
                }
                (lb, ln)
            }
            Err(_) => (1, 1),
        };
        for _ in 0..opts.replicates.max(1) {
            let (qb, qn) = match &blocks {
                Ok((bb, bn)) => (
                    bb.resampled_quantile(q, lengths.0, rng),
                    bn.resampled_quantile(q, lengths.1, rng),
                ),
                Err(_) => {
                    let from = base_ns.min(new_ns);
                    (
                        resampled_quantile(&hb.buckets, &mut wb, q, w, (from, kb), rng),
                        resampled_quantile(&hn.buckets, &mut wn, q, w, (from, kn), rng),
                    )
                }
            };
            ratios.push(qn as f64 / qb.max(1) as f64);
            diffs.push(qn as f64 - qb as f64);
        }
        let alpha = 1.0 - per_test_level;
        let lo = percentile(&mut ratios, alpha / 2.0);
        let hi = percentile(&mut ratios, 1.0 - alpha / 2.0);
        let dlo = percentile(&mut diffs, alpha / 2.0);
        let dhi = percentile(&mut diffs, 1.0 - alpha / 2.0);
        row.ratio_ci = Some((lo, hi));
        // Beyond min_change in ratio and beyond one bucket in absolute
        // terms (a one-bucket shift is the least the histogram can show).
        row.answer = if lo > 1.0 + opts.min_change && dlo > w as f64 {
            Answer::Regressed
        } else if hi < 1.0 / (1.0 + opts.min_change) && dhi < -(w as f64) {
            Answer::Improved
        } else {
            Answer::NoDifference
        };
        quantiles.push(row);
    }
    let answer = overall(quantiles.iter().map(|q| q.answer));
    SeriesComparison {
        name: b.name.clone(),
        metric: b.metric,
        base_count: b.count,
        new_count: n.count,
        quantiles,
        answer,
        resampling,
    }
}

/// A series' windows when the block bootstrap can use them, or why not.
fn usable_windows(s: &Series) -> Result<&Windows, String> {
    let Some(w) = &s.windows else {
        return Err(
            "has no per-window counts (a merged or simulated record, or one from an older version)"
                .into(),
        );
    };
    if w.counts.len() < MIN_WINDOWS {
        return Err(format!(
            "has {} windows, fewer than the {MIN_WINDOWS} a block bootstrap needs",
            w.counts.len()
        ));
    }
    if w.total() != s.count {
        return Err(format!(
            "windows hold {} samples but the series {}",
            w.total(),
            s.count
        ));
    }
    Ok(w)
}

/// Both runs' windows summed: `(lower_ns, count)` by increasing bucket.
fn pooled_counts(b: &Blocks, n: &Blocks) -> Vec<(u64, u64)> {
    let mut m = std::collections::BTreeMap::new();
    for blocks in [b, n] {
        for win in &blocks.windows {
            for &(i, c) in win {
                *m.entry(blocks.lowers[i]).or_insert(0u64) += c;
            }
        }
    }
    m.into_iter().collect()
}

/// Lower bound in ns of the bucket holding the pooled `q` quantile.
fn pooled_quantile_lower_ns(pooled: &[(u64, u64)], q: f64) -> u64 {
    let total: u64 = pooled.iter().map(|p| p.1).sum();
    let rank = ((q * total as f64).ceil() as u64).max(1);
    let mut seen = 0;
    for &(lo, c) in pooled {
        seen += c;
        if seen >= rank {
            return lo;
        }
    }
    pooled.last().map_or(0, |p| p.0)
}

/// A record's windows laid out for resampling: each window's counts by
/// index into one shared list of bucket values.
struct Blocks {
    /// Lower bound of each bucket any window uses, increasing.
    lowers: Vec<u64>,
    /// Middle of each of those buckets.
    values: Vec<u64>,
    windows: Vec<Vec<(usize, u64)>>,
    per_window: u64,
    /// Scratch: the replicate's summed counts by bucket.
    sum: std::cell::RefCell<Vec<u64>>,
}

impl Blocks {
    fn new(w: &Windows) -> Blocks {
        let mut lowers: Vec<u64> = w.counts.iter().flatten().map(|c| c.0).collect();
        lowers.sort_unstable();
        lowers.dedup();
        let windows = w
            .counts
            .iter()
            .map(|win| {
                win.iter()
                    .map(|(lo, c)| (lowers.binary_search(lo).expect("listed above"), *c))
                    .collect()
            })
            .collect();
        let n = lowers.len();
        Blocks {
            values: lowers
                .iter()
                .map(|lo| lo + window_bucket_width(*lo) / 2)
                .collect(),
            lowers,
            windows,
            per_window: w.samples_per_window,
            sum: std::cell::RefCell::new(vec![0; n]),
        }
    }

    /// Windows per block for the quantile whose pooled bucket starts at
    /// `at_ns`: Politis & White's length for the share of each window's
    /// samples at or above it, rounded, at most a [`MIN_BLOCKS`]th of the
    /// run.
    fn block_length(&self, at_ns: u64) -> usize {
        let from = self.lowers.partition_point(|lo| *lo < at_ns);
        let shares: Vec<f64> = self
            .windows
            .iter()
            .map(|win| {
                let all: u64 = win.iter().map(|p| p.1).sum();
                let above: u64 = win.iter().filter(|p| p.0 >= from).map(|p| p.1).sum();
                above as f64 / all.max(1) as f64
            })
            .collect();
        let cap = (self.windows.len() / MIN_BLOCKS).max(1);
        (crate::blocklen::circular_block_length(&shares).round() as usize).clamp(1, cap)
    }

    /// The `q` quantile of one replicate: blocks of `block` consecutive
    /// windows (wrapping round from the last window to the first), each
    /// starting at a window drawn uniformly, until the replicate holds as
    /// many windows as the run.
    fn resampled_quantile(&self, q: f64, block: usize, rng: &mut SplitMix64) -> u64 {
        let mut sum = self.sum.borrow_mut();
        sum.iter_mut().for_each(|c| *c = 0);
        let len = self.windows.len();
        let n = len as u128;
        let block = block.clamp(1, len);
        let mut total = 0u64;
        let mut taken = 0;
        while taken < len {
            let start = ((rng.next_u64() as u128 * n) >> 64) as usize;
            for k in 0..block.min(len - taken) {
                for &(i, c) in &self.windows[(start + k) % len] {
                    sum[i] += c;
                    total += c;
                }
            }
            taken += block;
        }
        let rank = ((q * total as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (i, c) in sum.iter().enumerate() {
            seen += c;
            if seen >= rank {
                return self.values[i];
            }
        }
        self.values.last().copied().unwrap_or(0)
    }
}

/// The `q` quantile of `counts` over `buckets` (lower bounds, width `w`):
/// the middle of the bucket holding the sample of rank ceil(q·total).
fn quantile_of(
    buckets: &[(u64, u64)],
    counts: impl Iterator<Item = f64>,
    total: f64,
    q: f64,
    w: u64,
) -> u64 {
    let rank = (q * total).ceil().max(1.0);
    let mut seen = 0.0;
    let mut last = 0;
    for ((lo, _), c) in buckets.iter().zip(counts) {
        if c <= 0.0 {
            continue;
        }
        seen += c;
        last = *lo;
        if seen >= rank {
            return lo + w / 2;
        }
    }
    last + w / 2
}

fn quantile(buckets: &[(u64, u64)], total: f64, q: f64, w: u64) -> u64 {
    quantile_of(buckets, buckets.iter().map(|b| b.1 as f64), total, q, w)
}

/// One Poisson-bootstrap replicate of the `q` quantile. Buckets at or
/// above `tail.0` ns are drawn in episodes of `tail.1` samples (compound
/// Poisson: the count's variance grows by the episode size).
fn resampled_quantile(
    buckets: &[(u64, u64)],
    weights: &mut [f64],
    q: f64,
    w: u64,
    (from, k): (u64, f64),
    rng: &mut SplitMix64,
) -> u64 {
    let mut total = 0.0;
    for (slot, (lo, c)) in weights.iter_mut().zip(buckets) {
        *slot = if k > 1.0 && lo + w > from {
            k * poisson(*c as f64 / k, rng) as f64
        } else {
            poisson(*c as f64, rng) as f64
        };
        total += *slot;
    }
    quantile_of(buckets, weights.iter().copied(), total, q, w)
}

/// A Poisson(`mean`) draw: exact (Knuth) for small means, normal with
/// continuity correction above 30, where the two differ by less than the
/// bootstrap's own Monte-Carlo error.
fn poisson(mean: f64, rng: &mut SplitMix64) -> u64 {
    if mean <= 0.0 {
        return 0;
    }
    if mean < 30.0 {
        let limit = (-mean).exp();
        let mut k = 0u64;
        let mut p = rng.uniform_open();
        while p > limit {
            k += 1;
            p *= rng.uniform_open();
        }
        k
    } else {
        (mean + mean.sqrt() * rng.normal() + 0.5).floor().max(0.0) as u64
    }
}

/// The `p` percentile (0..1) of `v` by nearest rank (sorts `v`).
fn percentile(v: &mut [f64], p: f64) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    if v.is_empty() {
        return f64::NAN;
    }
    let i = ((p * v.len() as f64).ceil() as usize).clamp(1, v.len()) - 1;
    v[i]
}

fn human_secs(s: f64) -> String {
    if s < 120.0 {
        format!("{:.0} s", s.ceil())
    } else if s < 7200.0 {
        format!("{:.0} min", (s / 60.0).ceil())
    } else {
        format!("{:.1} h", s / 3600.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use punctual_record::{Metric, Platform, Recorder, Source};

    /// A record with one latency series drawn from `draw`.
    fn record(seed: u64, n: usize, draw: impl Fn(&mut SplitMix64) -> u64) -> Record {
        let mut rng = SplitMix64::new(seed);
        let mut r = Recorder::new(Nanos::from_us(1));
        for _ in 0..n {
            r.record(Nanos(draw(&mut rng)));
        }
        let mut rec = Record::new(Source::Measured, "timer", Platform::default());
        rec.duration_ns = Nanos(n as u64 * 1_000_000);
        rec.series
            .push(r.to_series("cpu0.latency", Metric::Latency));
        rec
    }

    /// Exponential latencies around `mean_us`, plus a `p_spike` chance of
    /// a 1 ms stall.
    fn draw(mean_us: f64, p_spike: f64) -> impl Fn(&mut SplitMix64) -> u64 {
        move |rng| {
            if rng.uniform_open() < p_spike {
                1_000_000 + (rng.exp1() * 50_000.0) as u64
            } else {
                5_000 + (rng.exp1() * mean_us * 1000.0) as u64
            }
        }
    }

    fn three() -> CompareOptions {
        CompareOptions {
            quantiles: vec![0.5, 0.99, 0.999],
            ..Default::default()
        }
    }

    #[test]
    fn same_distribution_is_no_difference_in_most_pairs() {
        let opts = three();
        let mut differ = 0;
        for i in 0..20 {
            let a = record(100 + i, 5000, draw(30.0, 0.002));
            let b = record(200 + i, 5000, draw(30.0, 0.002));
            let c = compare(&a, &b, &opts).unwrap();
            if c.answer != Answer::NoDifference {
                differ += 1;
            }
        }
        // The family-wise level is 95% before min_change adds margin.
        assert!(differ <= 1, "{differ} of 20 identical pairs differed");
    }

    #[test]
    fn a_competitor_in_the_tail_is_a_regression_and_its_removal_an_improvement() {
        let opts = three();
        let idle = record(1, 5000, draw(30.0, 0.0));
        let noisy = record(2, 5000, draw(30.0, 0.05));
        let c = compare(&idle, &noisy, &opts).unwrap();
        assert_eq!(c.answer, Answer::Regressed);
        let p99 = &c.series[0].quantiles[1];
        assert_eq!(p99.quantile, "p99");
        assert_eq!(p99.answer, Answer::Regressed);
        assert!(p99.ratio_ci.unwrap().0 > 1.2, "{p99:?}");
        // The median hardly moves: not called a regression.
        assert_eq!(c.series[0].quantiles[0].answer, Answer::NoDifference);
        let back = compare(&noisy, &idle, &opts).unwrap();
        assert_eq!(back.answer, Answer::Improved);
    }

    #[test]
    fn a_short_run_says_how_long_to_measure() {
        let opts = three();
        let a = record(1, 3000, draw(30.0, 0.0));
        let b = record(2, 3000, draw(30.0, 0.0));
        let c = compare(&a, &b, &opts).unwrap();
        let p999 = &c.series[0].quantiles[2];
        assert_eq!(p999.answer, Answer::NoDifference);
        assert!(p999.ratio_ci.is_none());
        let why = p999.untested.as_deref().unwrap();
        // 10,000 samples at 1 ms each.
        assert!(why.contains("measure at least 10 s"), "{why}");
    }

    #[test]
    fn same_seed_same_answer() {
        let opts = CompareOptions::default();
        let a = record(1, 4000, draw(30.0, 0.01));
        let b = record(2, 4000, draw(33.0, 0.01));
        assert_eq!(
            compare(&a, &b, &opts).unwrap(),
            compare(&a, &b, &opts).unwrap()
        );
    }

    #[test]
    fn bad_settings_and_disjoint_records_are_refused() {
        let a = record(1, 100, draw(30.0, 0.0));
        let mut b = a.clone();
        b.series[0].name = "cpu1.latency".into();
        let e = compare(&a, &b, &CompareOptions::default()).unwrap_err();
        assert!(e.to_string().contains("cpu0.latency"), "{e}");
        let bad = CompareOptions {
            quantiles: vec![99.0],
            ..Default::default()
        };
        assert_eq!(
            compare(&a, &a, &bad).unwrap_err(),
            CompareError::Quantile(99.0)
        );
    }

    /// Logs the spikes of `rec` (values above 500 µs) at the times
    /// `at(i)` of the i-th such sample.
    fn log_spikes(rec: &mut Record, values: &[u64], at: impl Fn(usize) -> u64) {
        for (i, v) in values.iter().filter(|v| **v > 500_000).enumerate() {
            rec.spikes.push(Spike {
                at_ns: Nanos(at(i)),
                cpu: 0,
                task: None,
                metric: Metric::Latency,
                value_ns: Nanos(*v),
                causes: vec![],
                incomplete: false,
            });
        }
    }

    #[test]
    fn late_samples_in_episodes_widen_the_interval() {
        // 2% of 5000 wake-ups 1 ms late against 0.5%: a clear regression
        // when the late ones are independent events, and not one when
        // they are four episodes of a machine that stalled.
        let opts = CompareOptions::default();
        let values = |seed, p| {
            let mut rng = SplitMix64::new(seed);
            let d = draw(30.0, p);
            (0..5000).map(|_| d(&mut rng)).collect::<Vec<u64>>()
        };
        let make = |v: &[u64]| {
            let mut r = Recorder::new(Nanos::from_us(1)).with_sample_period(Nanos::from_ms(1));
            for x in v {
                r.record(Nanos(*x));
            }
            let mut rec = Record::new(Source::Measured, "timer", Platform::default());
            rec.duration_ns = Nanos::from_secs(5);
            let mut s = r.to_series("cpu0.latency", Metric::Latency);
            s.cpu = Some(0);
            rec.series.push(s);
            rec
        };
        let (vb, vn) = (values(1, 0.005), values(2, 0.02));
        let (mut base, mut spread) = (make(&vb), make(&vn));
        // Independent: one late wake-up every 50 ms or more.
        log_spikes(&mut base, &vb, |i| i as u64 * 200_000_000);
        log_spikes(&mut spread, &vn, |i| i as u64 * 50_000_000);
        let c = compare(&base, &spread, &opts).unwrap();
        assert_eq!(c.series[0].quantiles[0].episode_size.1, 1.0);
        assert_eq!(c.answer, Answer::Regressed, "{c:?}");
        // The same samples in four bursts of back-to-back late wake-ups.
        let mut bursty = make(&vn);
        log_spikes(&mut bursty, &vn, |i| {
            (i as u64 % 4) * 1_000_000_000 + (i as u64 / 4) * 1_000_000
        });
        let c = compare(&base, &bursty, &opts).unwrap();
        let p99 = &c.series[0].quantiles[0];
        assert!(p99.episode_size.1 > 10.0, "{p99:?}");
        assert_eq!(c.answer, Answer::NoDifference, "{c:?}");
    }

    /// A run of `windows` windows of 100 wake-ups each: latencies around
    /// 30 µs, and in each window a chance `p_stall` that the machine
    /// stalled, making `stalled` of its wake-ups 1-1.5 ms late; plus
    /// `p_late` independent late wake-ups everywhere. With `keep_windows`
    /// false the record carries no per-window counts.
    fn windowed(
        seed: u64,
        windows: usize,
        (p_stall, stalled, p_late): (f64, usize, f64),
        keep_windows: bool,
    ) -> Record {
        let mut rng = SplitMix64::new(seed);
        let mut stall = false;
        timer_windows(windows, keep_windows, |_, i| {
            if i == 0 {
                stall = rng.uniform_open() < p_stall;
            }
            if (stall && i < stalled) || rng.uniform_open() < p_late {
                1_000_000 + (rng.uniform_open() * 500_000.0) as u64
            } else {
                5_000 + (rng.exp1() * 25_000.0) as u64
            }
        })
    }

    /// A 1 ms timer record of `windows` windows of 100 wake-ups each,
    /// wake-up `i` of window `w` late by `late_ns(w, i)`; with
    /// `keep_windows` false it carries no per-window counts.
    fn timer_windows(
        windows: usize,
        keep_windows: bool,
        mut late_ns: impl FnMut(usize, usize) -> u64,
    ) -> Record {
        let mut r = Recorder::new(Nanos::from_us(1)).with_sample_period(Nanos::from_ms(1));
        let mut w = punctual_record::WindowRecorder::new(100);
        for win in 0..windows {
            for i in 0..100 {
                let v = Nanos(late_ns(win, i));
                r.record(v);
                w.record(v);
            }
        }
        let mut rec = Record::new(Source::Measured, "timer", Platform::default());
        rec.duration_ns = Nanos::from_ms(100 * windows as u64);
        let mut s = r.to_series("cpu0.latency", Metric::Latency);
        s.cpu = Some(0);
        if keep_windows {
            s.windows = Some(w.windows());
        }
        rec.series.push(s);
        rec
    }

    #[test]
    fn runs_of_one_bursty_machine_are_no_difference_when_whole_windows_are_resampled() {
        // Each run stalls in ~2 of its 110 windows, 40 wake-ups at a time:
        // how many stalls a run met decides its p99 and p99.9, and two runs
        // of the same machine meet 0 to 5 of them.
        let opts = CompareOptions {
            replicates: 1000,
            ..Default::default()
        };
        let bursty = (0.02, 40, 0.0);
        let (mut by_window, mut by_sample) = (0, 0);
        for i in 0..20 {
            let differs = |keep| {
                let a = windowed(300 + i, 110, bursty, keep);
                let b = windowed(400 + i, 110, bursty, keep);
                let c = compare(&a, &b, &opts).unwrap();
                if keep {
                    assert!(
                        matches!(
                            c.series[0].resampling,
                            Resampling::Windows {
                                base_windows: 110,
                                ..
                            }
                        ),
                        "{:?}",
                        c.series[0].resampling
                    );
                } else {
                    assert!(matches!(c.series[0].resampling, Resampling::Samples { .. }));
                }
                c.answer != Answer::NoDifference
            };
            by_window += differs(true) as u32;
            by_sample += differs(false) as u32;
        }
        assert!(
            by_window <= 1,
            "{by_window} of 20 pairs of one machine differed"
        );
        // What the windows are for: resampled sample by sample, the same
        // pairs differ far more often.
        assert!(
            by_sample >= by_window + 5,
            "{by_sample} against {by_window}"
        );
    }

    #[test]
    fn a_steady_competitor_is_a_regression_by_window_too() {
        // The noisy neighbour: 10% of the wake-ups of every window late,
        // against an idle machine that stalls now and then, 10 wake-ups
        // at a time (0.2% of them: its p99.9, not its p99).
        let opts = CompareOptions {
            replicates: 1000,
            ..Default::default()
        };
        for i in 0..10 {
            let idle = windowed(500 + i, 110, (0.02, 10, 0.0), true);
            let noisy = windowed(600 + i, 110, (0.02, 10, 0.1), true);
            let c = compare(&idle, &noisy, &opts).unwrap();
            // Every window of NEW is alike: nothing to keep together.
            for (_, new) in block_lengths(&c) {
                assert!(new <= 3, "pair {i}: {:?}", block_lengths(&c));
            }
            assert_eq!(c.answer, Answer::Regressed, "pair {i}: {c:?}");
            // Backwards, at the margin of 20%: the idle run's stalls reach
            // its p99 in a few replicates, so the interval of idle / noisy
            // can reach 0.73 (pair 4), short of the 1 / 1.4 an improvement
            // needs under the default margin.
            let back = CompareOptions {
                min_change: 0.2,
                ..opts.clone()
            };
            let back = compare(&noisy, &idle, &back).unwrap();
            assert_eq!(back.answer, Answer::Improved, "pair {i}: {back:?}");
        }
    }

    /// An idle run of `windowed` with every latency `factor` times as
    /// long: the same machine, uniformly slower.
    fn shifted(seed: u64, factor: f64) -> Record {
        let mut rec = windowed(seed, 110, (0.0, 0, 0.0), true);
        let s = &mut rec.series[0];
        let mut r = Recorder::new(Nanos::from_us(1)).with_sample_period(Nanos::from_ms(1));
        let mut w = punctual_record::WindowRecorder::new(100);
        for win in &s.windows.as_ref().unwrap().counts {
            for (lo, c) in win {
                let v = Nanos((*lo as f64 * factor) as u64);
                for _ in 0..*c {
                    r.record(v);
                    w.record(v);
                }
            }
        }
        *s = r.to_series("cpu0.latency", Metric::Latency);
        s.cpu = Some(0);
        s.windows = Some(w.windows());
        rec
    }

    #[test]
    fn a_shift_of_every_window_is_a_regression() {
        // The same machine, every latency 2.5 times as long, well beyond
        // the default margin: the windows agree with each other, so the
        // interval is narrow and wholly beyond the margin.
        let opts = CompareOptions {
            quantiles: vec![0.5, 0.99],
            ..Default::default()
        };
        let base = windowed(7, 110, (0.0, 0, 0.0), true);
        let new = shifted(8, 2.5);
        let c = compare(&base, &new, &opts).unwrap();
        for (b, n) in block_lengths(&c) {
            assert!(b <= 3 && n <= 3, "{:?}", block_lengths(&c));
        }
        for q in &c.series[0].quantiles {
            assert_eq!(q.answer, Answer::Regressed, "{q:?}");
            let (lo, hi) = q.ratio_ci.unwrap();
            assert!(lo > 1.0 + opts.min_change && lo < 2.5 && hi > 2.5, "{q:?}");
        }
    }

    #[test]
    fn a_real_shift_under_the_margin_is_no_difference() {
        // Every latency longer by half the default margin: a real change,
        // its interval wholly above 1, and yet within what two idle runs
        // of one machine drift apart by, so it does not count; without a
        // margin the same records are a regression.
        let m = CompareOptions::default().min_change;
        let opts = CompareOptions {
            quantiles: vec![0.5, 0.99],
            ..Default::default()
        };
        let base = windowed(7, 110, (0.0, 0, 0.0), true);
        let new = shifted(8, 1.0 + m / 2.0);
        let c = compare(&base, &new, &opts).unwrap();
        for q in &c.series[0].quantiles {
            let (lo, hi) = q.ratio_ci.unwrap();
            assert!(lo > 1.0 && hi < 1.0 + m, "{q:?}");
            assert_eq!(q.answer, Answer::NoDifference, "{q:?}");
        }
        assert_eq!(c.answer, Answer::NoDifference);
        let no_margin = CompareOptions {
            min_change: 0.0,
            ..opts
        };
        assert_eq!(
            compare(&base, &new, &no_margin).unwrap().answer,
            Answer::Regressed
        );
    }

    #[test]
    fn too_few_or_inconsistent_windows_fall_back_and_say_why() {
        let opts = CompareOptions::default();
        let a = windowed(1, 110, (0.0, 0, 0.01), true);
        let short = windowed(2, 110, (0.0, 0, 0.01), true);
        let mut few = short.clone();
        let w = few.series[0].windows.as_mut().unwrap();
        let head: Vec<_> = w.counts.drain(..).collect();
        // 110 windows merged into 10: too few to resample.
        w.counts = head
            .chunks(11)
            .map(|c| c.iter().fold(Vec::new(), |acc, x| merge_sorted(&acc, x)))
            .collect();
        let c = compare(&a, &few, &opts).unwrap();
        match &c.series[0].resampling {
            Resampling::Samples { why } => assert!(why.starts_with("NEW has 10 windows"), "{why}"),
            r => panic!("{r:?}"),
        }
        let mut odd = short.clone();
        odd.series[0].windows.as_mut().unwrap().counts.pop();
        let c = compare(&odd, &a, &opts).unwrap();
        match &c.series[0].resampling {
            Resampling::Samples { why } => assert!(why.contains("BASE windows hold"), "{why}"),
            r => panic!("{r:?}"),
        }
    }

    /// A run of `windows` windows of 100 wake-ups, latencies of 12 µs plus
    /// an exponential part of 2 µs on average; those of the windows in
    /// `slow` twice as long, as when
    /// the host is busy for a second or more (`slow`: `(from, to)`, `to`
    /// excluded).
    fn episode(seed: u64, windows: usize, slow: &[(usize, usize)]) -> Record {
        let mut rng = SplitMix64::new(seed);
        timer_windows(windows, true, |win, _| {
            let factor = if slow.iter().any(|&(from, to)| (from..to).contains(&win)) {
                2.0
            } else {
                1.0
            };
            (factor * (12_000.0 + rng.exp1() * 2_000.0)) as u64
        })
    }

    fn block_lengths(c: &Comparison) -> Vec<(usize, usize)> {
        match &c.series[0].resampling {
            Resampling::Windows { blocks, .. } => blocks.iter().map(|b| (b.base, b.new)).collect(),
            r => panic!("{r:?}"),
        }
    }

    #[test]
    fn one_episode_of_consecutive_windows_is_no_difference() {
        // NEW met one busy spell of 0.8 s (8 windows in a row at twice the
        // latency: 7% of its wake-ups, so its p99 is the spell's); BASE
        // met none. Two runs of that machine meet 0 to 3 such spells, so
        // this is no regression. Windows drawn one by one would call it
        // one: the spell's windows then enter every replicate about 8
        // times. The margin is 20%: under the default 40% the spell's
        // ratio (about 2) leaves even the one-by-one interval short of it,
        // and the contrast between block lengths would not show.
        let auto = CompareOptions {
            quantiles: vec![0.99],
            replicates: 1000,
            min_change: 0.2,
            ..Default::default()
        };
        let one_by_one = CompareOptions {
            block_windows: Some(1),
            ..auto.clone()
        };
        let (mut same, mut regressed_by_window) = (0, 0);
        for i in 0..10 {
            let base = episode(700 + i, 110, &[]);
            let new = episode(800 + i, 110, &[(60, 68)]);
            let c = compare(&base, &new, &auto).unwrap();
            let (lb, ln) = block_lengths(&c)[0];
            assert!(ln > lb && ln >= 4, "pair {i}: {lb} / {ln}");
            same += (c.answer == Answer::NoDifference) as u32;
            regressed_by_window +=
                (compare(&base, &new, &one_by_one).unwrap().answer == Answer::Regressed) as u32;
        }
        assert!(same >= 9, "{same} of 10 pairs no difference");
        assert!(regressed_by_window >= 9, "{regressed_by_window} of 10");
    }

    #[test]
    fn longer_spells_give_longer_blocks() {
        let opts = CompareOptions {
            quantiles: vec![0.99],
            replicates: 10,
            ..Default::default()
        };
        let base = episode(1, 110, &[]);
        // The same 12 slow windows, in six spells of 2 or two of 6.
        let short = episode(
            2,
            110,
            &[(5, 7), (25, 27), (45, 47), (65, 67), (85, 87), (100, 102)],
        );
        let long = episode(2, 110, &[(20, 26), (70, 76)]);
        let ls = block_lengths(&compare(&base, &short, &opts).unwrap())[0].1;
        let ll = block_lengths(&compare(&base, &long, &opts).unwrap())[0].1;
        assert!(ll > ls, "{ls} against {ll}");
    }

    #[test]
    fn the_same_windowed_records_and_seed_give_the_same_answer() {
        let opts = CompareOptions {
            replicates: 500,
            ..Default::default()
        };
        let a = episode(3, 110, &[(10, 14)]);
        let b = episode(4, 110, &[(50, 58)]);
        let first = compare(&a, &b, &opts).unwrap();
        assert_eq!(first, compare(&a, &b, &opts).unwrap());
        let other = CompareOptions { seed: 2, ..opts };
        // Another seed draws other blocks: the intervals move, the block
        // lengths (a property of the records) do not.
        let second = compare(&a, &b, &other).unwrap();
        assert_eq!(block_lengths(&first), block_lengths(&second));
    }

    fn merge_sorted(a: &[(u64, u64)], b: &[(u64, u64)]) -> Vec<(u64, u64)> {
        let mut m = std::collections::BTreeMap::new();
        for (lo, c) in a.iter().chain(b) {
            *m.entry(*lo).or_insert(0) += c;
        }
        m.into_iter().collect()
    }

    #[test]
    fn labels() {
        assert_eq!(quantile_label(0.5), "p50");
        assert_eq!(quantile_label(0.99), "p99");
        assert_eq!(quantile_label(0.999), "p99.9");
        assert_eq!(quantile_label(0.9999), "p99.99");
    }

    #[test]
    fn poisson_mean() {
        let mut rng = SplitMix64::new(3);
        for mean in [0.5, 4.0, 100.0] {
            let n = 20_000;
            let s: u64 = (0..n).map(|_| poisson(mean, &mut rng)).sum();
            let m = s as f64 / n as f64;
            assert!((m - mean).abs() < 0.05 * mean.max(1.0), "{mean}: {m}");
        }
    }
}
