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
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::io::Write;

use base64::Engine;
use flate2::write::ZlibEncoder;
use flate2::Compression;
use hdrhistogram::serialization::{Deserializer, Serializer, V2DeflateSerializer};
use punctual_units::Nanos;
use serde::{Deserialize, Serialize};

use crate::counts::CountMap;
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
    /// the 100 µs histograms of Jones & Regehr's NT study and the cyclictest format.
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

/// Values below this are counted in a flat array laid out like the
/// HdrHistogram's counts (16.8 ms); larger ones by HdrHistogram index in a
/// [`CountMap`]. The array grows only as far as the largest value recorded;
/// a larger limit cost more in zeroed pages than it saved on the 20-task
/// SimSo set.
const NEAR_LIMIT: u64 = 1 << 24;

/// The HdrHistogram layout at 3 significant digits and unit 1 ns: 2048
/// sub-buckets, the lower half of each bucket after the first unused.
const SUB_BUCKET_HALF_MAGNITUDE: u32 = 10;
const SUB_BUCKET_MASK: u64 = 2047;
const LEADING_ZERO_BASE: u32 = 53;
const NEAR_LEN: usize = hdr_index(NEAR_LIMIT - 1) + 1;

/// A flat array grows to `len` counts only once the recorder holds at
/// least `len / ARRAY_AFTER_RATIO` samples; until then what falls outside
/// it goes to the maps.
///
/// Why 8: a map keeps at most four 16-byte slots per distinct key, 64
/// bytes, against 8 bytes per count in an array, so the maps never hold
/// more bytes than the arrays they stand in for; and an array is zeroed
/// (and first-touched, a page fault per 512 counts) only once there are
/// samples to spread that cost over. A task that runs a few dozen jobs
/// costs a few hundred bytes per distinct value rather than arrays sized
/// by its largest value (10,000 tasks of 16 jobs each once took 3-4 GB),
/// and a short simulation of wide latencies (a 5 ms task's 400 jobs in
/// 2 s, values 0 to 5 ms: 12,000 HdrHistogram counts and 8,192 buckets)
/// no longer zeroes 160 KB per recorder to hold 400 samples, which was
/// most of such a run's time. Once past it, the arrays take the hot path.
const ARRAY_AFTER_RATIO: usize = 8;

/// Whether an array may grow to `len` counts with `count` samples held.
#[inline]
fn array_may_grow(count: u64, len: usize) -> bool {
    count >= (len / ARRAY_AFTER_RATIO) as u64
}

/// Distinct values a recorder counts inline, by exact value, before it
/// uses its arrays and maps at all.
///
/// Why: most tasks of a short simulation record a few dozen jobs, and
/// their latencies, intervals and responses repeat (a period, an
/// unpreempted execution time, a zero wait). Counting those in the maps
/// cost a hash per sample and two table allocations per recorder, six per
/// task, with their first touches; a scan of 16 inline keys costs neither.
/// A 17th distinct value moves the counts into the arrays and maps, which
/// take every sample from then on. 16 keys and counts are 256 bytes, three
/// recorders per task 768 bytes, well inside the per-task budget.
const FEW: usize = 16;

/// Distinct values a recorder counts by exact value in one map
/// (`exact`), once its inline counts overflowed, before it moves them to
/// its arrays and maps.
///
/// Why: a short run's wide distribution (an overloaded EDF task's
/// latencies, a few hundred samples over milliseconds) overflows the
/// inline counts early and then, with too few samples to pay for arrays
/// ([`ARRAY_AFTER_RATIO`]), counted every sample twice in maps (by
/// HdrHistogram index and by bucket), each a hash and a probe behind two
/// array checks; one map by exact value costs half of that, and readers
/// derive both keys from the value as they do for the inline counts.
/// Bounded so that it stays below what the two maps would hold: 256 keys
/// in at most 512 slots of 16 bytes, 8 KiB.
const EXACT_MAX: usize = 256;

/// Samples after which a recorder moves its exact counts to its arrays
/// and maps even with fewer than [`EXACT_MAX`] distinct values: by then
/// every array may grow to its full length ([`ARRAY_AFTER_RATIO`]), and
/// an array increment is cheaper than a hash.
const EXACT_SAMPLES: u64 = 2048;
const _: () = assert!(EXACT_SAMPLES as usize >= NEAR_LEN / ARRAY_AFTER_RATIO);

/// Counts the flat arrays grow by at the least (512 bytes).
const ARRAY_CHUNK: usize = 64;
const _: () =
    assert!(NEAR_LEN.is_multiple_of(ARRAY_CHUNK) && DENSE_BUCKETS.is_multiple_of(ARRAY_CHUNK));

/// The HdrHistogram every recorder's counts stand for: values 1 ns to 1 s
/// at 3 significant digits, growing when a larger value arrives.
const HDR_HIGHEST: u64 = 1_000_000_000;
const HDR_DIGITS: u8 = 3;

fn new_hdr() -> hdrhistogram::Histogram<u64> {
    let mut h = hdrhistogram::Histogram::<u64>::new_with_bounds(1, HDR_HIGHEST, HDR_DIGITS)
        .expect("valid hdr bounds");
    h.auto(true);
    h
}

/// Index of `v` in the HdrHistogram counts array (`index_for` there).
/// 0, which that HdrHistogram cannot hold, has index 0, where no other
/// value lands.
#[inline]
const fn hdr_index(v: u64) -> usize {
    let bucket = LEADING_ZERO_BASE - (v | SUB_BUCKET_MASK).leading_zeros();
    let sub = (v >> bucket) as usize;
    ((bucket as usize) << SUB_BUCKET_HALF_MAGNITUDE) + sub
}

/// `v / 1000` for every `u64`, as the multiply by the reciprocal that the
/// compiler emits for a constant divisor: `(v >> 3) · ⌈2⁷¹ / 1000⌉ >> 68`.
#[inline(always)]
fn div_1000(v: u64) -> u64 {
    const _: () = assert!(DEFAULT_BUCKET_NS == 1000);
    (((v >> 3) as u128 * 0x20C4_9BA5_E353_F7CF) >> 68) as u64
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

/// Highest value counted at HdrHistogram index `i` (`highest_equivalent`
/// of [`hdr_value`] there).
fn hdr_value_top(i: usize) -> u64 {
    let v = hdr_value(i);
    let bucket = LEADING_ZERO_BASE - (v | SUB_BUCKET_MASK).leading_zeros();
    v.saturating_add(1 << bucket) - 1
}

/// `value_at_quantile` of an HdrHistogram holding `counts` (non-zero
/// `(index, count)` in increasing index order), computed as it does.
fn value_at_quantile(counts: &[(usize, u64)], q: f64) -> u64 {
    let total: u64 = counts.iter().map(|c| c.1).sum();
    let q = if q > 1.0 { 1.0 } else { q };
    let want = ((q * total as f64).ceil() as u64).max(1);
    let mut seen = 0u64;
    for &(i, n) in counts {
        seen += n;
        if seen >= want {
            return if q == 0.0 {
                hdr_value(i)
            } else {
                hdr_value_top(i)
            };
        }
    }
    0
}

/// Adds `(index, count)` pairs to `h`.
fn fold_counts(h: &mut hdrhistogram::Histogram<u64>, counts: &[(usize, u64)]) {
    for &(i, n) in counts {
        let _ = h.record_n(hdr_value(i), n);
    }
}

/// Accumulates samples of one series with bounded memory.
///
/// Recording does no HdrHistogram work: that cost more than all the
/// simulator's bookkeeping of a job, and a fresh HdrHistogram (1 ns to 1 s,
/// ~170 KiB zeroed) per series was most of a short simulation's page
/// faults. Each value is counted under its HdrHistogram index instead
/// (a flat array below [`NEAR_LIMIT`], a [`CountMap`] above), and readers
/// compute percentiles and the HdrHistogram serialization from those
/// counts exactly as the HdrHistogram would; an HdrHistogram is built only
/// for a recorder read from a stored series or merged with one, and for
/// values beyond its initial 1 s range (whose serialization depends on how
/// it grew).
///
/// Memory: the flat HdrHistogram counts (as far as the largest value below
/// [`NEAR_LIMIT`] needs, at most ~120 KiB), a dense array of
/// [`DENSE_BUCKETS`] counters (64 KiB, allocated on first use) for the
/// common small values, plus a few slots per distinct HdrHistogram index
/// or fixed-width bucket beyond those arrays; with 1 µs buckets and values
/// up to 1 s that is at most 10⁶ buckets, and in practice a few thousand.
/// It never grows with the number of samples.
///
/// Laid out in the order written (`repr(C)`), what every sample reads
/// first: a simulation of 10,000 tasks records three samples per job into
/// a task's recorders last touched a period earlier, so each line a
/// sample reads is a cache miss, and the compiler's order spread the
/// totals, the inline counts' length and the arrays' and exact map's
/// emptiness over 600 bytes. Here they are in the first 128 bytes, then
/// the inline values and counts, then what only the rarer paths read.
#[derive(Clone, Debug)]
#[repr(C)]
pub struct Recorder {
    sum: u128,
    count: u64,
    min: u64,
    max: u64,
    few_len: usize,
    /// The inline and exact counts were moved out, for good: every sample
    /// since goes to the arrays and maps.
    promoted: bool,
    /// HdrHistogram counts by index for values below [`NEAR_LIMIT`]:
    /// `near[k]` counts index `near_lo + k`. The window covers only the
    /// indices recorded (in [`ARRAY_CHUNK`] steps, doubling as it grows),
    /// so a task whose values sit around 10 µs holds a few hundred counts,
    /// not the ~4,400 up to that index.
    near: Vec<u64>,
    /// Exact values counted once the inline counts overflowed, until
    /// [`EXACT_MAX`] distinct values or [`EXACT_SAMPLES`] samples: like
    /// the inline counts, in none of the arrays and maps, and read with
    /// them. Empty while the inline counts take samples.
    exact: CountMap,
    /// Exact values counted inline ([`FEW`]): `few_n[k]` samples of
    /// `few_v[k]` for `k < few_len`. Not in `near`, `far`, `dense`,
    /// `dense_other` or `sparse`; readers add them in.
    few_v: [u64; FEW],
    few_n: [u64; FEW],
    near_lo: usize,
    /// Counts of bucket indices below [`DENSE_BUCKETS`] (grown, by
    /// doubling, only as far as the largest index recorded, and only once
    /// enough samples are held, [`ARRAY_AFTER_RATIO`]; growing it to
    /// 65.5 ms saved map updates for long periods
    /// but cost more in zeroed pages: RSS 18 -> 42 MB on the 20-task SimSo
    /// set, wall time up): a map insert per sample was most of the
    /// simulator's time, an array increment is not. Only for 1 µs buckets
    /// ([`DEFAULT_BUCKET_NS`]): [`Recorder::record`] indexes it by
    /// `value / 1000` without looking at the width.
    dense: Vec<u64>,
    missed: u64,
    /// HdrHistogram counts by index for values from [`NEAR_LIMIT`] on,
    /// and for those outside `near` while too few samples are held to
    /// grow it ([`ARRAY_AFTER_RATIO`]).
    far: CountMap,
    /// Samples counted in `base` rather than in `near` and `far`: those
    /// hold `count - in_base`, so recording counts a sample once.
    in_base: u64,
    /// An HdrHistogram read from a stored series or merged in from one:
    /// the counts above add to it.
    base: Option<Box<hdrhistogram::Histogram<u64>>>,
    /// `dense` for any other bucket width (at most one of the two is ever
    /// allocated).
    dense_other: Vec<u64>,
    /// Buckets at or beyond the dense range, and those beyond the dense
    /// array while too few samples are held to grow it (bucket 0
    /// excepted), keyed by lower bound in ns.
    sparse: CountMap,
    bucket_ns: u64,
    sample_period: Option<Nanos>,
}

impl Recorder {
    pub fn new(bucket: Nanos) -> Self {
        Recorder {
            near: Vec::new(),
            near_lo: 0,
            far: CountMap::default(),
            in_base: 0,
            base: None,
            dense: Vec::new(),
            dense_other: Vec::new(),
            sparse: CountMap::default(),
            bucket_ns: bucket.0.max(1),
            count: 0,
            sum: 0,
            min: u64::MAX,
            max: 0,
            missed: 0,
            sample_period: None,
            few_v: [0; FEW],
            few_n: [0; FEW],
            few_len: 0,
            exact: CountMap::default(),
            promoted: false,
        }
    }

    pub fn with_sample_period(mut self, p: Nanos) -> Self {
        self.sample_period = Some(p);
        self
    }

    // Always inlined: the simulator records three values per job and the
    // call cost as much as the counting; the rare paths are out of line.
    // Each array is tried with one bounds check: a value past what either
    // array holds so far, or past its limit, takes the cold path, and so
    // does every value of a width other than 1 µs (`dense` stays empty
    // then), so no sample tests the width.
    #[inline(always)]
    pub fn record(&mut self, v: Nanos) {
        let x = v.0;
        if self.near.is_empty() {
            // No array yet, so none can take it: one call for all of it,
            // without the arrays' indices (most samples of a short run).
            self.record_unarrayed(x);
            return;
        }
        // HdrHistogram cannot hold 0 with a lowest bound of 1; a 0 ns value
        // is counted at index 0 here and read as 1 ns (`own_counts`), and
        // exactly in the sparse form. Both arrays are empty while the
        // inline counts take the samples, so those go out of line.
        let near = hdr_index(x).wrapping_sub(self.near_lo);
        let bucket = div_1000(x) as usize;
        if near < self.near.len() && bucket < self.dense.len() {
            self.near[near] += 1;
            self.dense[bucket] += 1;
        } else {
            self.record_cold(x);
        }
        self.count += 1;
        self.sum += x as u128;
        // Branches, not a select: after the first samples a new extreme is
        // rare, and a select loads and stores the field every time. Out of
        // line, so that the common case falls through rather than jumping
        // away and back.
        if x < self.min {
            self.new_min(x);
        }
        if x > self.max {
            self.new_max(x);
        }
    }

    /// A sample that either array does not reach yet: counted inline
    /// until a [`FEW`]+1th distinct value arrives, then by exact value
    /// ([`EXACT_MAX`]), then in the arrays and maps.
    ///
    /// The inline counts alone here, the rest in
    /// [`Recorder::record_past_few`]: most samples of a short run stop
    /// at the inline counts, and with the rest in the same function every
    /// one paid the rest's register saves and restores, as many
    /// instructions again as the scan.
    #[cold]
    #[inline(never)]
    fn record_cold(&mut self, x: u64) {
        if !self.count_few(x) {
            self.record_past_few(x);
        }
    }

    /// [`Recorder::record`] while the `near` array is empty: the counts
    /// as [`Recorder::record_cold`] keeps them, and the totals.
    #[inline(never)]
    fn record_unarrayed(&mut self, x: u64) {
        if !self.count_few(x) {
            self.record_past_few(x);
        }
        self.count += 1;
        self.sum += x as u128;
        if x < self.min {
            self.min = x;
        }
        if x > self.max {
            self.max = x;
        }
    }

    /// Counts `x` inline if the inline counts take it (they hold it, or
    /// have room for it and no sample went past them yet).
    #[inline(always)]
    fn count_few(&mut self, x: u64) -> bool {
        if self.promoted || !self.exact.is_empty() {
            return false;
        }
        let len = self.few_len;
        if let Some(k) = self.few_v[..len].iter().position(|&v| v == x) {
            self.few_n[k] += 1;
            return true;
        }
        if len < FEW {
            self.few_v[len] = x;
            self.few_n[len] = 1;
            self.few_len = len + 1;
            return true;
        }
        false
    }

    /// [`Recorder::record_cold`] past the inline counts: by exact value,
    /// then in the arrays and maps.
    #[inline(never)]
    fn record_past_few(&mut self, x: u64) {
        if !self.promoted {
            if self.exact.is_empty() {
                self.few_to_exact();
            }
            if self.exact.len() < EXACT_MAX && self.count < EXACT_SAMPLES {
                self.exact.add(x, 1);
                return;
            }
            self.promote();
        }
        self.add_hdr(hdr_index(x), 1);
        self.add_bucket(x, 1);
    }

    /// Moves the inline counts to the exact map, which takes the samples
    /// from then on.
    fn few_to_exact(&mut self) {
        for k in 0..std::mem::take(&mut self.few_len) {
            self.exact.add(self.few_v[k], self.few_n[k]);
        }
    }

    /// Moves the inline and exact counts into the arrays and maps, for
    /// good.
    fn promote(&mut self) {
        self.promoted = true;
        for k in 0..std::mem::take(&mut self.few_len) {
            let (x, n) = (self.few_v[k], self.few_n[k]);
            self.add_hdr(hdr_index(x), n);
            self.add_bucket(x, n);
        }
        for (x, n) in std::mem::take(&mut self.exact).iter() {
            self.add_hdr(hdr_index(x), n);
            self.add_bucket(x, n);
        }
    }

    /// The inline and exact counts, `(value, count)` in no particular
    /// order.
    fn few(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.few_v[..self.few_len]
            .iter()
            .copied()
            .zip(self.few_n[..self.few_len].iter().copied())
            .chain(self.exact.iter())
    }

    /// Whether any count is held inline or by exact value.
    fn has_few(&self) -> bool {
        self.few_len > 0 || !self.exact.is_empty()
    }

    #[cold]
    #[inline(never)]
    fn new_min(&mut self, x: u64) {
        self.min = x;
    }

    #[cold]
    #[inline(never)]
    fn new_max(&mut self, x: u64) {
        self.max = x;
    }

    /// Counts `n` at HdrHistogram index `i` when the near array does not
    /// reach `i` yet (or never will).
    #[cold]
    #[inline(never)]
    fn add_hdr_cold(&mut self, i: usize, n: u64) {
        if i >= NEAR_LEN {
            self.far.add(i as u64, n);
            return;
        }
        let (lo, hi) = self.near_window(i);
        if !array_may_grow(self.count + n, hi - lo) {
            self.far.add(i as u64, n);
            return;
        }
        self.grow_near(lo, hi);
        self.near[i - self.near_lo] += n;
    }

    /// The `near` window widened to cover index `i` (below [`NEAR_LEN`]):
    /// whole [`ARRAY_CHUNK`]s, at least doubling, so that a spreading
    /// distribution copies the window a logarithmic number of times.
    fn near_window(&self, i: usize) -> (usize, usize) {
        let chunk_lo = i / ARRAY_CHUNK * ARRAY_CHUNK;
        if self.near.is_empty() {
            (chunk_lo, (chunk_lo + ARRAY_CHUNK).min(NEAR_LEN))
        } else {
            let (lo, len) = (self.near_lo, self.near.len());
            let hi = lo + len;
            if i < lo {
                (chunk_lo.min(hi.saturating_sub(2 * len)), hi)
            } else {
                (lo, (chunk_lo + ARRAY_CHUNK).max(lo + 2 * len).min(NEAR_LEN))
            }
        }
    }

    /// Widens the `near` window to `[lo, hi)` ([`Recorder::near_window`]).
    fn grow_near(&mut self, lo: usize, hi: usize) {
        let mut v = vec![0; hi - lo];
        let at = self.near_lo.wrapping_sub(lo);
        if !self.near.is_empty() {
            v[at..at + self.near.len()].copy_from_slice(&self.near);
        }
        self.near = v;
        self.near_lo = lo;
    }

    /// Non-zero HdrHistogram counts of `near` and `far` as `(index, count)`
    /// in increasing index order, one pair per index (`far` may hold
    /// indices inside `near`'s window: those of the first samples). The
    /// 0 ns values counted at index 0 are counted at 1 ns's index, 1, as
    /// the HdrHistogram does.
    fn own_counts(&self) -> Vec<(usize, u64)> {
        let mut v: Vec<(usize, u64)> = self
            .near
            .iter()
            .enumerate()
            .filter(|(_, &n)| n > 0)
            .map(|(k, &n)| ((self.near_lo + k).max(1), n))
            .collect();
        let far = self.far.sorted();
        if !far.is_empty() || self.has_few() {
            v.extend(far.into_iter().map(|(i, n)| ((i as usize).max(1), n)));
            v.extend(self.few().map(|(x, n)| (hdr_index(x).max(1), n)));
            v.sort_by_key(|c| c.0);
        }
        merge_equal(&mut v);
        v.retain(|c| c.1 > 0);
        v
    }

    /// Folds the counts into the HdrHistogram read from a stored series or
    /// merged in, if there is one, so that readers need not fold a copy. A
    /// recorder without one has nothing to fold: its counts are read as
    /// they are.
    pub fn settle(&mut self) {
        if self.own() == 0 || self.base.is_none() {
            return;
        }
        let counts = self.own_counts();
        if let Some(b) = &mut self.base {
            fold_counts(b, &counts);
        }
        self.clear_own();
    }

    /// Forgets the counts of `near` and `far` (once folded into `base`),
    /// and the inline ones, whose fixed-width buckets it keeps.
    fn clear_own(&mut self) {
        self.near.iter_mut().for_each(|n| *n = 0);
        self.far = CountMap::default();
        for k in 0..std::mem::take(&mut self.few_len) {
            self.add_bucket(self.few_v[k], self.few_n[k]);
        }
        for (x, n) in std::mem::take(&mut self.exact).iter() {
            self.add_bucket(x, n);
        }
        self.in_base = self.count;
    }

    /// Samples in `near` and `far`.
    fn own(&self) -> u64 {
        self.count - self.in_base
    }

    /// The HdrHistogram of everything recorded.
    fn built_hdr(&self) -> Cow<'_, hdrhistogram::Histogram<u64>> {
        match &self.base {
            Some(b) if self.own() == 0 => Cow::Borrowed(&**b),
            b => {
                let mut h = b.as_deref().cloned().unwrap_or_else(new_hdr);
                fold_counts(&mut h, &self.own_counts());
                Cow::Owned(h)
            }
        }
    }

    /// The serialization of the HdrHistogram this recorder stands for can
    /// be written from its counts: nothing came from outside, and no value
    /// made the HdrHistogram grow past its first range (which its header
    /// states).
    fn counts_suffice(&self) -> bool {
        self.base.is_none() && self.max <= HDR_HIGHEST
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
        if self.base.is_none() {
            self.capped(value_at_quantile(&self.own_counts(), q))
        } else {
            self.capped(self.built_hdr().value_at_quantile(q))
        }
    }

    /// A quantile as reported: 0 without samples, never above the maximum
    /// (the HdrHistogram answers with the top of a bucket).
    fn capped(&self, v: u64) -> Nanos {
        if self.count == 0 {
            Nanos::ZERO
        } else {
            Nanos(v.min(self.max))
        }
    }

    /// Folds another recorder in (per-thread recorders joined at the end).
    pub fn merge(&mut self, o: &Recorder) {
        if self.base.is_none() && o.base.is_none() && o.max <= HDR_HIGHEST {
            // Counts add as they are: the HdrHistogram they stand for does
            // not grow for `o`'s values, so it ends as if merged whole.
            for (k, &n) in o.near.iter().enumerate() {
                if n > 0 {
                    self.add_hdr(o.near_lo + k, n);
                }
            }
            // Without a base `o` holds all its samples there, as `self`
            // then does with `o.count` added.
            for (i, n) in o.far.sorted() {
                self.add_hdr(i as usize, n);
            }
            for (x, n) in o.few() {
                self.add_hdr(hdr_index(x), n);
            }
        } else {
            // HdrHistogram addition grows to the addend's maximum, as
            // recording does not: merge whole histograms, as before.
            let mut b = self.base.take().unwrap_or_else(|| Box::new(new_hdr()));
            fold_counts(&mut b, &self.own_counts());
            self.clear_own();
            let _ = b.add(&*o.built_hdr());
            self.in_base += o.count;
            self.base = Some(b);
        }
        for (k, v) in o.buckets() {
            self.add_bucket(k, v);
        }
        self.count += o.count;
        self.sum += o.sum;
        self.min = self.min.min(o.min);
        self.max = self.max.max(o.max);
        self.missed += o.missed;
    }

    /// Counts `n` at HdrHistogram index `i`. An index at or past NEAR_LEN
    /// means a value of NEAR_LIMIT or more, and the near array never grows
    /// past NEAR_LEN. Always inlined: [`Recorder::record`] runs it per
    /// sample.
    #[inline(always)]
    fn add_hdr(&mut self, i: usize, n: u64) {
        match self.near.get_mut(i.wrapping_sub(self.near_lo)) {
            Some(c) => *c += n,
            None => self.add_hdr_cold(i, n),
        }
    }

    pub fn to_series(&self, name: &str, metric: Metric) -> Series {
        let percentiles = |q: &dyn Fn(f64) -> u64| Percentiles {
            p50: self.capped(q(0.5)),
            p90: self.capped(q(0.9)),
            p99: self.capped(q(0.99)),
            p99_9: self.capped(q(0.999)),
            p99_99: self.capped(q(0.9999)),
        };
        let (percentiles, hdr) = if self.counts_suffice() {
            let counts = self.own_counts();
            (
                percentiles(&|p| value_at_quantile(&counts, p)),
                encode_counts(&counts),
            )
        } else {
            let hdr = self.built_hdr();
            (percentiles(&|p| hdr.value_at_quantile(p)), encode_hdr(&hdr))
        };
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
            percentiles,
            missed: self.missed,
            sample_period_ns: self.sample_period,
            observed_ns: None,
            histogram: Histogram {
                bucket_ns: self.bucket_ns,
                buckets: self.buckets().collect(),
            },
            windows: None,
            hdr,
        }
    }

    /// Rebuilds a recorder from a stored series (for merging records).
    pub fn from_series(s: &Series) -> Result<Recorder, String> {
        let mut r = Recorder::new(Nanos(s.histogram.bucket_ns));
        let mut base = if !s.hdr.is_empty() {
            let mut h = decode_hdr(&s.hdr)?;
            h.auto(true);
            h
        } else {
            let mut h = new_hdr();
            for (lo, c) in &s.histogram.buckets {
                let _ = h.record_n((*lo).max(1), *c);
            }
            h
        };
        base.auto(true);
        r.base = Some(Box::new(base));
        for (lo, c) in &s.histogram.buckets {
            r.add_bucket(*lo, *c);
        }
        r.count = s.count;
        r.in_base = s.count;
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
        let dense = if self.bucket_ns == DEFAULT_BUCKET_NS {
            &mut self.dense
        } else {
            &mut self.dense_other
        };
        if idx < dense.len() as u64 {
            dense[idx as usize] += n;
            return;
        }
        if idx < DENSE_BUCKETS as u64 {
            let len = (idx as usize + 1)
                .next_power_of_two()
                .clamp(ARRAY_CHUNK, DENSE_BUCKETS);
            if array_may_grow(self.count + n, len) {
                dense.resize(len, 0);
                dense[idx as usize] += n;
                return;
            }
        }
        self.add_sparse(idx, n);
    }

    /// Fixed-width bucket index of `value_ns`.
    #[inline(always)]
    fn bucket_index(&self, value_ns: u64) -> u64 {
        // A division by a constant is a multiply; by a field, a slow divide.
        // Written as the multiply: with `value_ns / DEFAULT_BUCKET_NS` here
        // the compiler saw both arms divide by `bucket_ns` and kept only the
        // divide, for every sample.
        if self.bucket_ns == DEFAULT_BUCKET_NS {
            div_1000(value_ns)
        } else {
            value_ns / self.bucket_ns
        }
    }

    #[inline]
    fn add_sparse(&mut self, idx: u64, n: u64) {
        self.sparse.add(idx * self.bucket_ns, n);
    }

    /// Non-empty buckets as `(lower_ns, count)` in increasing order, one
    /// pair per bucket: the dense array and the map (which holds the
    /// first samples' buckets wherever they fall, and every bucket beyond
    /// the array).
    fn buckets(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        let w = self.bucket_ns;
        let mut v: Vec<(u64, u64)> = self
            .dense
            .iter()
            .chain(&self.dense_other)
            .enumerate()
            .filter(|(_, c)| **c > 0)
            .map(move |(i, c)| (i as u64 * w, *c))
            .collect();
        let sparse = self.sparse.sorted();
        if !sparse.is_empty() || self.has_few() {
            v.extend(sparse);
            v.extend(self.few().map(|(x, n)| (self.bucket_index(x) * w, n)));
            v.sort_by_key(|c| c.0);
            merge_equal(&mut v);
        }
        v.into_iter()
    }

    pub fn hdr(&self) -> Cow<'_, hdrhistogram::Histogram<u64>> {
        self.built_hdr()
    }
}

/// Sums the counts of neighbouring pairs with the same key (`v` sorted by
/// key), leaving one pair per key.
fn merge_equal<K: PartialEq + Copy>(v: &mut Vec<(K, u64)>) {
    v.dedup_by(|b, a| {
        if a.0 == b.0 {
            a.1 += b.1;
            true
        } else {
            false
        }
    });
}

/// V2 serialization cookies and header length (HdrHistogram's format).
const V2_COOKIE: u32 = 0x1c84_9303 | 0x10;
const V2_COMPRESSED_COOKIE: u32 = 0x1c84_9304 | 0x10;
const V2_HEADER_SIZE: usize = 40;

/// [`encode_hdr`] of an HdrHistogram (1 ns to [`HDR_HIGHEST`], not grown)
/// holding `counts` (non-zero `(index, count)` in increasing index order),
/// written from the counts alone: the same V2 format, the same deflate
/// stream, the same bytes.
fn encode_counts(counts: &[(usize, u64)]) -> String {
    let mut raw = Vec::with_capacity(V2_HEADER_SIZE + 18 * counts.len() + 1);
    raw.extend_from_slice(&V2_COOKIE.to_be_bytes());
    raw.extend_from_slice(&0u32.to_be_bytes()); // payload length, below
    raw.extend_from_slice(&0u32.to_be_bytes()); // normalizing index offset
    raw.extend_from_slice(&u32::from(HDR_DIGITS).to_be_bytes());
    raw.extend_from_slice(&1u64.to_be_bytes()); // lowest discernible value
    raw.extend_from_slice(&HDR_HIGHEST.to_be_bytes());
    raw.extend_from_slice(&1.0f64.to_be_bytes()); // integer to double ratio

    // Counts up to the maximum's index, a run of two or more zeros as its
    // negated length, all zig-zag LEB128; an empty histogram is one zero.
    let mut next = 0usize;
    for &(i, n) in counts {
        match i - next {
            0 => {}
            1 => push_varint(&mut raw, 0),
            z => push_varint(&mut raw, zig_zag(-(z as i64))),
        }
        let Ok(n) = i64::try_from(n) else {
            return String::new(); // not serializable, as in encode_hdr
        };
        push_varint(&mut raw, zig_zag(n));
        next = i + 1;
    }
    if counts.is_empty() {
        push_varint(&mut raw, 0);
    }
    let payload = (raw.len() - V2_HEADER_SIZE) as u32;
    raw[4..8].copy_from_slice(&payload.to_be_bytes());
    let mut head = Vec::with_capacity(raw.len() / 2 + 8);
    head.extend_from_slice(&V2_COMPRESSED_COOKIE.to_be_bytes());
    head.extend_from_slice(&0u32.to_be_bytes()); // compressed length, below
    let Ok(mut buf) = zlib_append(head, &raw) else {
        return String::new();
    };
    let len = (buf.len() - 8) as u32;
    buf[4..8].copy_from_slice(&len.to_be_bytes());
    base64::engine::general_purpose::STANDARD.encode(buf)
}

thread_local! {
    /// One zlib compressor per thread, reset between series: a fresh one
    /// allocates and zeroes some 230 KiB of tables (every series of a
    /// simulation paid that, in page faults too); reset zeroes them in
    /// place.
    static ZLIB: RefCell<Option<ZlibEncoder<Vec<u8>>>> = const { RefCell::new(None) };
}

/// `out` followed by the zlib stream (default level) of `data`: the bytes
/// a fresh `ZlibEncoder` writes, from the thread's reused one.
fn zlib_append(out: Vec<u8>, data: &[u8]) -> std::io::Result<Vec<u8>> {
    ZLIB.with(|cell| {
        let mut slot = cell.borrow_mut();
        let result = (|| {
            let z = match slot.as_mut() {
                Some(z) => {
                    // The last stream was finished: this only resets.
                    z.reset(out)?;
                    z
                }
                None => slot.insert(ZlibEncoder::new(out, Compression::default())),
            };
            z.write_all(data)?;
            z.try_finish()?;
            Ok(std::mem::take(z.get_mut()))
        })();
        if result.is_err() {
            // Never leave a half-written stream for the next caller.
            *slot = None;
        }
        result
    })
}

fn zig_zag(n: i64) -> u64 {
    ((n << 1) ^ (n >> 63)) as u64
}

/// LEB128 as HdrHistogram writes it: at most 9 bytes, the ninth whole.
fn push_varint(buf: &mut Vec<u8>, mut v: u64) {
    for _ in 0..8 {
        if v < 0x80 {
            buf.push(v as u8);
            return;
        }
        buf.push(0x80 | (v & 0x7f) as u8);
        v >>= 7;
    }
    buf.push(v as u8);
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

    /// Values (ns) from a fixed linear congruential sequence: `n` of them,
    /// spread over 0 to `span`, with many repeats.
    fn spread(n: usize, span: u64) -> Vec<u64> {
        let mut x = 12345u64;
        (0..n)
            .map(|_| {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let v = (x >> 33) % span;
                // Every third value repeats a small one, so that indices
                // counted in the maps meet the same indices in the arrays.
                if x.is_multiple_of(3) {
                    v % 5_000
                } else {
                    v
                }
            })
            .collect()
    }

    /// The series of a recorder whose first samples went to its maps and
    /// the rest to its arrays is the one an HdrHistogram and an exact
    /// bucket map give for the same values.
    #[test]
    fn maps_then_arrays_read_as_one() {
        // From maps alone to mostly arrays: 30 ms spreads over ~17,000
        // HdrHistogram counts and 8,192 buckets.
        for n in [10, 256, 3_000, 100_000] {
            let vals = spread(n, 30_000_000);
            let mut r = Recorder::new(Nanos(1000));
            let mut h = new_hdr();
            let mut b: BTreeMap<u64, u64> = BTreeMap::new();
            for &v in &vals {
                r.record(Nanos(v));
                h.record(v.max(1)).unwrap();
                *b.entry(v / 1000 * 1000).or_default() += 1;
            }
            if n == 100_000 {
                assert!(r.near.len() > ARRAY_CHUNK && r.dense.len() > ARRAY_CHUNK);
            }
            let s = r.to_series("x", Metric::Latency);
            assert_eq!(s.hdr, encode_hdr(&h), "n = {n}");
            assert_eq!(s.histogram.buckets, b.into_iter().collect::<Vec<_>>());
            let max = *vals.iter().max().unwrap();
            assert_eq!(s.percentiles.p99, Nanos(h.value_at_quantile(0.99).min(max)));
            assert_eq!(s.percentiles.p50, Nanos(h.value_at_quantile(0.5).min(max)));
            // Merging the recorder into an empty one changes nothing.
            let mut m = Recorder::new(Nanos(1000));
            m.merge(&r);
            assert_eq!(m.to_series("x", Metric::Latency), s);
        }
    }

    /// A recorder of a few widely spread values keeps no array sized by
    /// its largest value.
    #[test]
    fn few_samples_keep_small_arrays() {
        let mut r = Recorder::new(Nanos(1000));
        for v in spread(16, 100_000_000) {
            r.record(Nanos(v));
        }
        assert!(r.near.len() <= ARRAY_CHUNK, "{}", r.near.len());
        assert!(r.dense.len() <= ARRAY_CHUNK, "{}", r.dense.len());
        assert_eq!(r.count(), 16);
    }

    /// A few hundred samples spread over milliseconds (a 5 ms task's
    /// jobs in a 2 s simulation) grow no array past what their number
    /// pays for: zeroing those arrays was most of such a run's time.
    #[test]
    fn short_wide_runs_keep_arrays_to_their_samples() {
        let mut r = Recorder::new(Nanos(1000));
        let vals = spread(400, 5_000_000);
        for &v in &vals {
            r.record(Nanos(v));
        }
        let most = vals.len() * ARRAY_AFTER_RATIO;
        assert!(r.near.len() <= most, "{}", r.near.len());
        assert!(r.dense.len() <= most, "{}", r.dense.len());
    }

    /// Values drawn from `distinct` fixed ones (0 ns and values past the
    /// arrays' limits among them), `n` times.
    fn repeating(distinct: usize, n: usize) -> Vec<u64> {
        let pool: Vec<u64> = (0..distinct as u64)
            .map(|k| match k % 4 {
                0 => k * 1000,
                1 => k * 7_919_993,
                2 => (k + 1) << 33,
                _ => k * 13,
            })
            .collect();
        let mut x: u64 = 0xABCD_EF01_2345_6789;
        (0..n)
            .map(|_| pool[(xorshift(&mut x) % distinct as u64) as usize])
            .collect()
    }

    /// Up to FEW distinct values are counted inline, with nothing
    /// allocated; one more moves them to a map by exact value, and past
    /// EXACT_MAX values or EXACT_SAMPLES samples they move out. Either way, and through merges
    /// between recorders on either side of that, a stored series and a
    /// settle, the series is the one an HdrHistogram and an exact bucket
    /// map give.
    #[test]
    fn inline_counts_read_as_the_arrays_and_maps() {
        let hdr_of = |h: &mut hdrhistogram::Histogram<u64>, vals: &[u64]| {
            for &v in vals {
                h.record(v.max(1)).unwrap();
            }
        };
        let check = |r: &Recorder, h: &hdrhistogram::Histogram<u64>, vals: &[u64]| {
            assert_same_as_hdr(r, h);
            let mut b: BTreeMap<u64, u64> = BTreeMap::new();
            for &v in vals {
                *b.entry(v / 1000 * 1000).or_default() += 1;
            }
            let b: Vec<(u64, u64)> = b.into_iter().collect();
            assert_eq!(r.to_series("x", Metric::Latency).histogram.buckets, b);
            assert_eq!(r.count(), vals.len() as u64);
        };
        let mut all = Vec::new();
        // Inline, by exact value (up to EXACT_MAX distinct values, and
        // fewer than EXACT_SAMPLES samples), then in the arrays and maps.
        for (distinct, n) in [
            (1, 200),
            (2, 200),
            (FEW - 1, 200),
            (FEW, 200),
            (FEW + 1, 200),
            (3 * FEW, 200),
            (3 * FEW, 3 * EXACT_SAMPLES as usize),
            (EXACT_MAX + 40, 2 * EXACT_SAMPLES as usize - 1),
        ] {
            let vals = repeating(distinct, n);
            let mut r = Recorder::new(Nanos(1000));
            for &v in &vals {
                r.record(Nanos(v));
            }
            let seen = vals.iter().collect::<std::collections::BTreeSet<_>>().len();
            let promoted = seen > EXACT_MAX || n as u64 > EXACT_SAMPLES;
            assert_eq!(r.promoted, promoted, "{distinct} {n}");
            assert_eq!(r.few_len > 0, seen <= FEW, "{distinct} {n}");
            assert_eq!(!r.exact.is_empty(), !promoted && seen > FEW);
            if !promoted {
                assert!(r.near.is_empty() && r.dense.is_empty());
                assert!(r.far.sorted().is_empty() && r.sparse.sorted().is_empty());
            } else {
                assert!(r.few_len == 0 && r.exact.is_empty());
            }
            let mut h = direct_hdr();
            hdr_of(&mut h, &vals);
            check(&r, &h, &vals);
            all.push((r, h, vals));
        }
        for (a, ha, va) in &all {
            for (b, hb, vb) in &all {
                // HdrHistogram addition, not recording one after the other:
                // they differ in how far the histogram grew past 1 s.
                let mut m = a.clone();
                m.merge(b);
                let mut hm = ha.clone();
                hm.add(hb).unwrap();
                let both: Vec<u64> = va.iter().chain(vb).copied().collect();
                check(&m, &hm, &both);
                // A stored series read back, then inline samples on top.
                let mut s = Recorder::from_series(&b.to_series("b", Metric::Gap)).unwrap();
                let mut hs = hb.clone();
                for &v in va {
                    s.record(Nanos(v));
                }
                hdr_of(&mut hs, va);
                assert_eq!(*s.hdr(), hs);
                s.settle();
                assert_eq!(*s.hdr(), hs);
                assert_eq!(s.to_series("s", Metric::Gap).hdr, encode_hdr(&hs));
            }
        }
    }

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

    fn direct_hdr() -> hdrhistogram::Histogram<u64> {
        let mut h = hdrhistogram::Histogram::<u64>::new_with_bounds(1, 1_000_000_000, 3)
            .expect("valid hdr bounds");
        h.auto(true);
        h
    }

    fn xorshift(x: &mut u64) -> u64 {
        *x ^= *x << 13;
        *x ^= *x >> 7;
        *x ^= *x << 17;
        *x
    }

    /// What the recorder reports next to what an HdrHistogram fed every
    /// value directly reports: the same histogram, percentiles and
    /// serialization bytes.
    fn assert_same_as_hdr(r: &Recorder, direct: &hdrhistogram::Histogram<u64>) {
        assert_eq!(*r.hdr(), *direct);
        let s = r.to_series("x", Metric::Latency);
        assert_eq!(s.hdr, encode_hdr(direct));
        let q = |p: f64| {
            if direct.is_empty() {
                Nanos::ZERO
            } else {
                Nanos(direct.value_at_quantile(p).min(r.max))
            }
        };
        let want = Percentiles {
            p50: q(0.5),
            p90: q(0.9),
            p99: q(0.99),
            p99_9: q(0.999),
            p99_99: q(0.9999),
        };
        assert_eq!(s.percentiles, want);
        for p in [0.0, 1e-9, 0.25, 0.5, 0.999_99, 1.0, 1.5] {
            assert_eq!(r.quantile(p), q(p), "quantile {p}");
        }
    }

    /// Counts by HdrHistogram index give exactly the HdrHistogram that
    /// recording each value there directly gives, serialization and
    /// percentiles included, on either side of the near array's limit and
    /// of the HdrHistogram's first range.
    #[test]
    fn counts_give_the_same_hdr() {
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        for (round, top) in [(0, 1_000_000_000u64), (1, u64::MAX), (2, NEAR_LIMIT)] {
            let mut direct = direct_hdr();
            let mut r = Recorder::new(Nanos(1000));
            assert_same_as_hdr(&r, &direct);
            let mut values = vec![0u64, 1, 2047, 2048, 2049, 4095, 4096, NEAR_LIMIT - 1];
            values.extend([NEAR_LIMIT, NEAR_LIMIT + 1, 999_999_999, 1_000_000_000]);
            if round == 1 {
                values.extend([1_000_000_001, 1 << 30, 3_000_000_000, u64::MAX / 3]);
            }
            for _ in 0..50_000 {
                let v = xorshift(&mut x);
                values.push((v >> (v % 50 + 14)).min(top));
            }
            // Few distinct values, many times each (as a simulation gives).
            for k in 0..20_000u64 {
                values.push([5_000_000, 30_000_000, 117_803_000, 281_025_000][k as usize % 4]);
            }
            for (k, &v) in values.iter().enumerate() {
                let _ = direct.record(v.max(1));
                r.record(Nanos(v));
                if k == 20_000 {
                    // A reader in between sees everything recorded so far.
                    assert_same_as_hdr(&r, &direct);
                }
            }
            assert_same_as_hdr(&r, &direct);
            let before = r.to_series("x", Metric::Latency);
            r.settle();
            assert_eq!(r.to_series("x", Metric::Latency), before);
        }
        for i in 0..NEAR_LEN + 3 * 1024 {
            assert_eq!(hdr_index(hdr_value(i)), i);
            assert_eq!(hdr_index(hdr_value_top(i)), i);
            assert_eq!(hdr_value_top(i) + 1, hdr_value(i + 1));
        }
    }

    /// The reused compressor writes, series after series, the bytes of a
    /// fresh one.
    #[test]
    fn encodes_in_sequence_match_fresh_ones() {
        let mut x: u64 = 0x0DDB_1A5E_5BAD_5EED;
        for n in [0usize, 1, 3, 100, 10_000, 5, 200_000, 0, 7] {
            let mut direct = direct_hdr();
            let mut r = Recorder::new(Nanos(1000));
            for _ in 0..n {
                let v = xorshift(&mut x);
                let v = v >> (v % 29 + 35);
                let _ = direct.record(v.max(1));
                r.record(Nanos(v));
            }
            assert_eq!(r.to_series("x", Metric::Latency).hdr, encode_hdr(&direct));
        }
    }

    /// Merging recorders, with or without a histogram read from a stored
    /// series, gives what merging their HdrHistograms gives.
    #[test]
    fn merges_give_the_same_hdr() {
        let mut x: u64 = 0x1234_5678_9ABC_DEF1;
        let mut fill = |r: &mut Recorder, h: &mut hdrhistogram::Histogram<u64>, big: bool| {
            for _ in 0..5_000 {
                let v = xorshift(&mut x);
                let v = if big {
                    v >> (v % 50 + 14)
                } else {
                    v >> (v % 29 + 35)
                };
                let _ = h.record(v.max(1));
                r.record(Nanos(v));
            }
        };
        for big in [false, true] {
            let (mut a, mut ha) = (Recorder::new(Nanos(1000)), direct_hdr());
            let (mut b, mut hb) = (Recorder::new(Nanos(1000)), direct_hdr());
            fill(&mut a, &mut ha, false);
            fill(&mut b, &mut hb, big);
            let mut m = a.clone();
            m.merge(&b);
            let mut hm = ha.clone();
            hm.add(&hb).unwrap();
            assert_same_as_hdr(&m, &hm);
            let mut m3 = b.clone();
            m3.merge(&a);
            let mut hm3 = hb.clone();
            hm3.add(&ha).unwrap();
            assert_same_as_hdr(&m3, &hm3);
            // Through a stored series, then more samples on top.
            let mut s = Recorder::from_series(&b.to_series("b", Metric::Gap)).unwrap();
            let mut hs = hb.clone();
            fill(&mut s, &mut hs, false);
            let mut m2 = a.clone();
            m2.merge(&s);
            let mut hm2 = ha.clone();
            hm2.add(&hs).unwrap();
            assert_eq!(*m2.hdr(), hm2);
            assert_eq!(m2.to_series("m", Metric::Gap).hdr, encode_hdr(&hm2));
            m2.settle();
            assert_eq!(*m2.hdr(), hm2);
        }
    }

    #[test]
    fn div_1000_divides() {
        let mut x: u64 = 0xC0FF_EE00_1234_5678;
        let mut values = vec![0u64, 1, 999, 1000, 1001, 7999, 8000, u64::MAX, u64::MAX - 1];
        values.extend((0..64).map(|b| 1u64 << b));
        values.extend((0..64).map(|b| (1u64 << b) - 1));
        values.extend((1..200_000u64).map(|k| k * 1000 - 1));
        for _ in 0..1_000_000 {
            values.push(xorshift(&mut x) >> (x % 64));
        }
        for v in values {
            assert_eq!(div_1000(v), v / 1000, "{v}");
        }
    }

    /// Widths other than 1 µs, which `record` never counts in `dense`,
    /// give the buckets that dividing each value gives, 0 ns included.
    #[test]
    fn other_widths_count_every_value() {
        let mut x: u64 = 0x5EED_0F0D_D1D7;
        for w in [1u64, 7, 100, 999, 1001, 1 << 20] {
            let mut r = Recorder::new(Nanos(w));
            let mut want: BTreeMap<u64, u64> = BTreeMap::new();
            for k in 0..20_000u64 {
                let v = match k % 5 {
                    0 => 0,
                    1 => xorshift(&mut x) % (w * 9000),
                    _ => xorshift(&mut x) >> (x % 64),
                };
                r.record(Nanos(v));
                *want.entry(v / w * w).or_default() += 1;
            }
            let h = r.to_series("x", Metric::Latency).histogram;
            assert_eq!(h.bucket_ns, w);
            assert_eq!(h.buckets, want.into_iter().collect::<Vec<_>>(), "{w}");
        }
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
