//! Histograms that lose nothing a latency analysis needs.
//!
//! Two forms travel together in a series: a sparse fixed-width histogram
//! (default 1 µs buckets) that anyone can read without a library, and the
//! HdrHistogram serialization (3 significant digits, nanosecond values)
//! that merges losslessly across runs and machines. The probes' hot loops
//! only call [`Recorder::record`], which is O(1) and allocation-free after
//! warm-up except when a value lands beyond the dense range (rare: a bucket
//! index past [`DENSE_BUCKETS`] goes to a map).

use std::borrow::Cow;
use std::collections::BTreeMap;

use base64::Engine;
use hdrhistogram::serialization::{Deserializer, Serializer, V2DeflateSerializer};
use punctual_units::Nanos;
use serde::{Deserialize, Serialize};

use crate::{Metric, Percentiles, Series};

/// 1 µs: fine enough for every tail the forecasts use, coarse enough that a
/// day-long run's histogram stays small.
pub const DEFAULT_BUCKET_NS: u64 = 1_000;

/// Buckets kept in a flat array (8.192 ms at 1 µs): nearly every latency,
/// gap and interval sample lands here.
pub const DENSE_BUCKETS: usize = 8192;

/// Sparse fixed-width histogram: `buckets` holds `[lower_ns, count]` pairs
/// in increasing order, only for non-empty buckets.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Histogram {
    pub bucket_ns: u64,
    pub buckets: Vec<(u64, u64)>,
}

impl Histogram {
    pub fn total(&self) -> u64 {
        self.buckets.iter().map(|b| b.1).sum()
    }

    /// Samples that may lie strictly above `x`: every bucket that holds any
    /// value greater than `x`. The bucket containing `x` counts whole, so the
    /// error is at most one bucket width and always towards more
    /// exceedances (a forecast of underruns errs towards more, not fewer).
    pub fn count_above(&self, x: Nanos) -> u64 {
        let w = self.bucket_ns.max(1);
        self.buckets
            .iter()
            .filter(|(lo, _)| lo + (w - 1) > x.0)
            .map(|b| b.1)
            .sum()
    }

    /// Re-buckets to a coarser width (a multiple of the current one), for
    /// the 100 µs histograms of seed 000 and the cyclictest format.
    pub fn rebucket(&self, bucket_ns: u64) -> Histogram {
        let w = bucket_ns.max(self.bucket_ns).max(1);
        let mut m: BTreeMap<u64, u64> = BTreeMap::new();
        for (lo, c) in &self.buckets {
            *m.entry(lo / w * w).or_default() += c;
        }
        Histogram {
            bucket_ns: w,
            buckets: m.into_iter().collect(),
        }
    }

    /// Lossless merge of two histograms of the same bucket width (the
    /// coarser width wins when they differ).
    pub fn merge(&self, other: &Histogram) -> Histogram {
        let w = self.bucket_ns.max(other.bucket_ns).max(1);
        let mut m: BTreeMap<u64, u64> = BTreeMap::new();
        for (lo, c) in self.buckets.iter().chain(other.buckets.iter()) {
            *m.entry(lo / w * w).or_default() += c;
        }
        Histogram {
            bucket_ns: w,
            buckets: m.into_iter().collect(),
        }
    }
}

/// Values below this are counted in [`Recorder`]'s own copy of the
/// HdrHistogram count layout and folded into the HdrHistogram when read
/// (16.8 ms; larger ones go to the HdrHistogram directly). The copy grows
/// only as far as the largest value recorded; a larger limit cost more in
/// zeroed pages than it saved on the 20-task SimSo set.
const PENDING_LIMIT: u64 = 1 << 24;

/// The HdrHistogram layout at 3 significant digits and unit 1 ns: 2048
/// sub-buckets, the lower half of each bucket after the first unused.
const SUB_BUCKET_HALF_MAGNITUDE: u32 = 10;
const SUB_BUCKET_MASK: u64 = 2047;
const LEADING_ZERO_BASE: u32 = 53;
const PENDING_LEN: usize = hdr_index(PENDING_LIMIT - 1) + 1;

/// Index of `v` in the HdrHistogram counts array (`index_for` there).
#[inline]
const fn hdr_index(v: u64) -> usize {
    let bucket = LEADING_ZERO_BASE - (v | SUB_BUCKET_MASK).leading_zeros();
    let sub = (v >> bucket) as usize;
    ((bucket as usize + 1) << SUB_BUCKET_HALF_MAGNITUDE) + sub - (1 << SUB_BUCKET_HALF_MAGNITUDE)
}

/// Lowest value counted at HdrHistogram index `i` (inverse of [`hdr_index`]).
#[inline]
fn hdr_value(i: usize) -> u64 {
    let half = 1usize << SUB_BUCKET_HALF_MAGNITUDE;
    if i < 2 * half {
        return i as u64;
    }
    let bucket = (i >> SUB_BUCKET_HALF_MAGNITUDE) - 1;
    let sub = (i & (half - 1)) + half;
    (sub as u64) << bucket
}

/// Adds pending counts (indexed like the HdrHistogram's own counts) to `h`.
fn fold_pending(h: &mut hdrhistogram::Histogram<u64>, pending: &[u64]) {
    for (i, &n) in pending.iter().enumerate() {
        if n > 0 {
            let _ = h.record_n(hdr_value(i), n);
        }
    }
}

/// Accumulates samples of one series with bounded memory.
///
/// [`Recorder::record`] does no HdrHistogram work for values under
/// [`PENDING_LIMIT`]: recording there cost more than all the simulator's
/// bookkeeping of a job. It counts them in a flat array laid out like the
/// HdrHistogram's counts, which is folded in by [`Recorder::settle`] or,
/// on a copy, by any reader; the histogram that results is the same.
///
/// Memory: the HdrHistogram (auto-resizing, ~40 KiB per decade of range
/// at 3 significant digits), a dense array of [`DENSE_BUCKETS`] counters
/// (64 KiB, allocated on first use) for the common small values, the pending
/// HdrHistogram counts (as far as the largest value below
/// [`PENDING_LIMIT`] needs, at most ~120 KiB), plus one map entry per
/// distinct bucket beyond the dense array;
/// with 1 µs buckets and values up to 1 s that is at most 10⁶ entries, and
/// in practice a few thousand. It never grows with the number of samples.
#[derive(Clone, Debug)]
pub struct Recorder {
    hdr: hdrhistogram::Histogram<u64>,
    /// Counts not yet in `hdr`, by HdrHistogram index (up to the largest
    /// index recorded, at most [`PENDING_LEN`] long).
    hdr_pending: Vec<u64>,
    /// Samples in `hdr_pending`.
    pending: u64,
    /// Counts of bucket indices below [`DENSE_BUCKETS`] (allocated whole on
    /// first use; growing it to 65.5 ms saved map updates for long periods
    /// but cost more in zeroed pages: RSS 18 -> 42 MB on the 20-task SimSo
    /// set, wall time up): a map insert per sample was most of the
    /// simulator's time, an array increment is not.
    dense: Vec<u64>,
    /// Buckets at or beyond the dense range, keyed by lower bound in ns.
    sparse: BTreeMap<u64, u64>,
    bucket_ns: u64,
    count: u64,
    sum: u128,
    min: u64,
    max: u64,
    missed: u64,
    sample_period: Option<Nanos>,
}

impl Recorder {
    pub fn new(bucket: Nanos) -> Self {
        let mut hdr = hdrhistogram::Histogram::<u64>::new_with_bounds(1, 1_000_000_000, 3)
            .expect("valid hdr bounds");
        hdr.auto(true);
        Recorder {
            hdr,
            hdr_pending: Vec::new(),
            pending: 0,
            dense: Vec::new(),
            sparse: BTreeMap::new(),
            bucket_ns: bucket.0.max(1),
            count: 0,
            sum: 0,
            min: u64::MAX,
            max: 0,
            missed: 0,
            sample_period: None,
        }
    }

    pub fn with_sample_period(mut self, p: Nanos) -> Self {
        self.sample_period = Some(p);
        self
    }

    // Always inlined: the simulator records three values per job and the
    // call cost as much as the counting; the rare paths are out of line.
    // Each array is tried with one bounds check (`get_mut`): a value past
    // what the array holds so far, or past its limit, takes the cold path.
    #[inline(always)]
    pub fn record(&mut self, v: Nanos) {
        let x = v.0;
        // HdrHistogram cannot hold 0 with a lowest bound of 1; a 0 ns value
        // is recorded as 1 ns there and exactly in the sparse form.
        let h = x.max(1);
        // An index at or past PENDING_LEN means h >= PENDING_LIMIT, and the
        // array never grows past PENDING_LEN.
        if let Some(n) = self.hdr_pending.get_mut(hdr_index(h)) {
            *n += 1;
            self.pending += 1;
        } else {
            self.record_hdr_cold(h);
        }
        // Empty until first use, then DENSE_BUCKETS long.
        let bucket = self.bucket_index(x) as usize;
        if let Some(n) = self.dense.get_mut(bucket) {
            *n += 1;
        } else {
            self.add_bucket_cold(x);
        }
        self.count += 1;
        self.sum += x as u128;
        self.min = self.min.min(x);
        self.max = self.max.max(x);
    }

    /// [`Recorder::record`]'s HdrHistogram count when the pending array
    /// does not reach `h` yet (or never will).
    #[cold]
    #[inline(never)]
    fn record_hdr_cold(&mut self, h: u64) {
        if h < PENDING_LIMIT {
            let i = hdr_index(h);
            self.grow_pending(i);
            self.hdr_pending[i] += 1;
            self.pending += 1;
        } else {
            self.record_large(h);
        }
    }

    #[cold]
    #[inline(never)]
    fn record_large(&mut self, h: u64) {
        let _ = self.hdr.record(h);
    }

    #[cold]
    #[inline(never)]
    fn grow_pending(&mut self, i: usize) {
        // Whole HdrHistogram buckets (1024 counts) at a time.
        let len = ((i >> SUB_BUCKET_HALF_MAGNITUDE) + 1) << SUB_BUCKET_HALF_MAGNITUDE;
        self.hdr_pending.resize(len.min(PENDING_LEN), 0);
    }

    /// Folds pending counts into the HdrHistogram, so that readers need
    /// not work on a folded copy.
    pub fn settle(&mut self) {
        if self.pending == 0 {
            return;
        }
        fold_pending(&mut self.hdr, &self.hdr_pending);
        self.hdr_pending.iter_mut().for_each(|n| *n = 0);
        self.pending = 0;
    }

    /// The HdrHistogram with pending counts folded in.
    fn settled_hdr(&self) -> Cow<'_, hdrhistogram::Histogram<u64>> {
        if self.pending == 0 {
            Cow::Borrowed(&self.hdr)
        } else {
            let mut h = self.hdr.clone();
            fold_pending(&mut h, &self.hdr_pending);
            Cow::Owned(h)
        }
    }

    pub fn add_missed(&mut self, k: u64) {
        self.missed += k;
    }

    pub fn count(&self) -> u64 {
        self.count
    }
    pub fn max(&self) -> Nanos {
        Nanos(self.max)
    }
    pub fn missed(&self) -> u64 {
        self.missed
    }
    pub fn mean(&self) -> Nanos {
        if self.count == 0 {
            Nanos::ZERO
        } else {
            Nanos((self.sum / self.count as u128) as u64)
        }
    }
    pub fn quantile(&self, q: f64) -> Nanos {
        self.quantile_of(&self.settled_hdr(), q)
    }

    fn quantile_of(&self, h: &hdrhistogram::Histogram<u64>, q: f64) -> Nanos {
        if self.count == 0 {
            Nanos::ZERO
        } else {
            Nanos(h.value_at_quantile(q).min(self.max))
        }
    }

    /// Folds another recorder in (per-thread recorders joined at the end).
    pub fn merge(&mut self, o: &Recorder) {
        self.settle();
        let _ = self.hdr.add(&*o.settled_hdr());
        for (k, v) in o.buckets() {
            self.add_bucket(k, v);
        }
        self.count += o.count;
        self.sum += o.sum;
        self.min = self.min.min(o.min);
        self.max = self.max.max(o.max);
        self.missed += o.missed;
    }

    pub fn to_series(&self, name: &str, metric: Metric) -> Series {
        let hdr = self.settled_hdr();
        let q = |p| self.quantile_of(&hdr, p);
        Series {
            name: name.to_string(),
            cpu: None,
            task: None,
            metric,
            unit: "ns".to_string(),
            count: self.count,
            min: if self.count == 0 {
                Nanos::ZERO
            } else {
                Nanos(self.min)
            },
            mean: self.mean(),
            max: Nanos(self.max),
            percentiles: Percentiles {
                p50: q(0.5),
                p90: q(0.9),
                p99: q(0.99),
                p99_9: q(0.999),
                p99_99: q(0.9999),
            },
            missed: self.missed,
            sample_period_ns: self.sample_period,
            histogram: Histogram {
                bucket_ns: self.bucket_ns,
                buckets: self.buckets().collect(),
            },
            hdr: encode_hdr(&hdr),
        }
    }

    /// Rebuilds a recorder from a stored series (for merging records).
    pub fn from_series(s: &Series) -> Result<Recorder, String> {
        let mut r = Recorder::new(Nanos(s.histogram.bucket_ns));
        if !s.hdr.is_empty() {
            r.hdr = decode_hdr(&s.hdr)?;
            r.hdr.auto(true);
        } else {
            for (lo, c) in &s.histogram.buckets {
                let _ = r.hdr.record_n((*lo).max(1), *c);
            }
        }
        for (lo, c) in &s.histogram.buckets {
            r.add_bucket(*lo, *c);
        }
        r.count = s.count;
        r.sum = s.mean.0 as u128 * s.count as u128;
        r.min = if s.count == 0 { u64::MAX } else { s.min.0 };
        r.max = s.max.0;
        r.missed = s.missed;
        r.sample_period = s.sample_period_ns;
        Ok(r)
    }

    /// Counts `n` samples in the fixed-width bucket holding `value_ns`.
    #[inline(always)]
    fn add_bucket(&mut self, value_ns: u64, n: u64) {
        let idx = self.bucket_index(value_ns);
        if idx < DENSE_BUCKETS as u64 {
            if self.dense.is_empty() {
                self.dense = vec![0; DENSE_BUCKETS];
            }
            self.dense[idx as usize] += n;
        } else {
            self.add_sparse(idx, n);
        }
    }

    /// [`Recorder::record`]'s bucket count beyond the dense array so far.
    #[cold]
    #[inline(never)]
    fn add_bucket_cold(&mut self, value_ns: u64) {
        self.add_bucket(value_ns, 1);
    }

    /// Fixed-width bucket index of `value_ns`.
    #[inline(always)]
    fn bucket_index(&self, value_ns: u64) -> u64 {
        // A division by a constant is a multiply; by a field, a slow divide.
        // The other width is divided out of line: inline, LLVM saw that
        // both arms divide by `bucket_ns` and merged them into the divide
        // (a `div` in every record, 3-4% of the simulator's week).
        if self.bucket_ns == DEFAULT_BUCKET_NS {
            value_ns / DEFAULT_BUCKET_NS
        } else {
            self.bucket_index_other(value_ns)
        }
    }

    #[inline(never)]
    fn bucket_index_other(&self, value_ns: u64) -> u64 {
        value_ns / self.bucket_ns
    }

    #[cold]
    #[inline(never)]
    fn add_sparse(&mut self, idx: u64, n: u64) {
        *self.sparse.entry(idx * self.bucket_ns).or_default() += n;
    }

    /// Non-empty buckets as `(lower_ns, count)` in increasing order: the
    /// dense range first, then the map, whose keys all lie beyond it.
    fn buckets(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        let w = self.bucket_ns;
        self.dense
            .iter()
            .enumerate()
            .filter(|(_, c)| **c > 0)
            .map(move |(i, c)| (i as u64 * w, *c))
            .chain(self.sparse.iter().map(|(k, v)| (*k, *v)))
    }

    pub fn hdr(&self) -> Cow<'_, hdrhistogram::Histogram<u64>> {
        self.settled_hdr()
    }
}

pub fn encode_hdr(h: &hdrhistogram::Histogram<u64>) -> String {
    let mut buf = Vec::new();
    if V2DeflateSerializer::new().serialize(h, &mut buf).is_err() {
        return String::new();
    }
    base64::engine::general_purpose::STANDARD.encode(buf)
}

pub fn decode_hdr(text: &str) -> Result<hdrhistogram::Histogram<u64>, String> {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(text.trim())
        .map_err(|e| format!("hdr field is not base64: {e}"))?;
    Deserializer::new()
        .deserialize(&mut std::io::Cursor::new(bytes))
        .map_err(|e| format!("hdr field is not an HdrHistogram: {e:?}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stats_and_percentiles() {
        let mut r = Recorder::new(Nanos(1000));
        for v in 1..=1000u64 {
            r.record(Nanos(v * 1000));
        }
        let s = r.to_series("x", Metric::Latency);
        assert_eq!(s.count, 1000);
        assert_eq!(s.min, Nanos(1000));
        assert_eq!(s.max, Nanos(1_000_000));
        assert_eq!(s.mean, Nanos(500_500));
        let p50 = s.percentiles.p50.0 as f64;
        assert!((p50 - 500_000.0).abs() / 500_000.0 < 0.002, "{p50}");
        assert_eq!(s.histogram.total(), 1000);
        assert_eq!(s.count_above(Nanos(990_999)), 10);
        assert_eq!(s.count_above(Nanos(990_500)), 11);
    }

    #[test]
    fn merge_is_lossless() {
        let mut a = Recorder::new(Nanos(1000));
        let mut b = Recorder::new(Nanos(1000));
        for v in 0..500u64 {
            a.record(Nanos(v * 37));
            b.record(Nanos(v * 91 + 5));
        }
        let mut all = a.clone();
        all.merge(&b);
        let sa = a.to_series("a", Metric::Gap);
        let sb = b.to_series("b", Metric::Gap);
        let merged = sa.histogram.merge(&sb.histogram);
        assert_eq!(merged, all.to_series("m", Metric::Gap).histogram);
        let back = Recorder::from_series(&sa).unwrap();
        assert_eq!(back.hdr().len(), 500);
        assert_eq!(back.to_series("a", Metric::Gap).percentiles, sa.percentiles);
    }

    #[test]
    fn dense_and_sparse_ranges_meet_in_order() {
        let mut r = Recorder::new(Nanos(1000));
        for v in [
            50_000_000u64,
            8_192_000,
            8_191_999,
            0,
            8_192_000,
            65_535_999,
            65_536_000,
            100_000_000,
        ] {
            r.record(Nanos(v));
        }
        let mut o = Recorder::new(Nanos(1000));
        o.record(Nanos(8_191_500));
        r.merge(&o);
        let h = r.to_series("x", Metric::Latency).histogram;
        assert_eq!(
            h.buckets,
            vec![
                (0, 1),
                (8_191_000, 2),
                (8_192_000, 2),
                (50_000_000, 1),
                (65_535_000, 1),
                (65_536_000, 1),
                (100_000_000, 1)
            ]
        );
        let back = Recorder::from_series(&r.to_series("x", Metric::Latency)).unwrap();
        assert_eq!(back.to_series("x", Metric::Latency).histogram, h);
    }

    /// Pending counts fold into exactly the HdrHistogram that recording
    /// each value there directly gives, serialization included.
    #[test]
    fn pending_counts_fold_into_the_same_hdr() {
        let mut direct = hdrhistogram::Histogram::<u64>::new_with_bounds(1, 1_000_000_000, 3)
            .expect("valid hdr bounds");
        direct.auto(true);
        let mut r = Recorder::new(Nanos(1000));
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        let mut values = vec![0u64, 1, 2047, 2048, 2049, 4095, 4096, PENDING_LIMIT - 1];
        values.extend([PENDING_LIMIT, PENDING_LIMIT + 1, 3_000_000_000]);
        for _ in 0..50_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            values.push(x >> (x % 50 + 14));
        }
        for (k, &v) in values.iter().enumerate() {
            let _ = direct.record(v.max(1));
            r.record(Nanos(v));
            if k == 20_000 {
                // A reader in between sees everything recorded so far.
                assert_eq!(*r.hdr(), direct);
            }
        }
        for i in 0..PENDING_LEN {
            assert_eq!(hdr_index(hdr_value(i)), i);
        }
        assert_eq!(*r.hdr(), direct);
        assert_eq!(encode_hdr(&r.hdr()), encode_hdr(&direct));
        let before = r.to_series("x", Metric::Latency);
        r.settle();
        assert_eq!(r.pending, 0);
        assert_eq!(r.hdr().into_owned(), direct);
        assert_eq!(r.to_series("x", Metric::Latency), before);
    }

    #[test]
    fn rebucket_keeps_counts() {
        let mut r = Recorder::new(Nanos(1000));
        for v in [0u64, 999, 1000, 150_000, 199_999, 200_000] {
            r.record(Nanos(v));
        }
        let h = r
            .to_series("x", Metric::Interval)
            .histogram
            .rebucket(100_000);
        assert_eq!(h.buckets, vec![(0, 3), (100_000, 2), (200_000, 1)]);
    }
}
