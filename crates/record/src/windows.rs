//! A series' samples in consecutive windows of the run, each with its own
//! coarse histogram.
//!
//! Late wake-ups on a real machine come in bursts: a host that deschedules
//! the guest, another tenant's build, a stall from outside the probe. Two
//! runs of one machine then differ by more than a resampling of their
//! samples as independent values allows, and a comparison built on that
//! resampling calls the difference a regression. Keeping each window's
//! histogram lets `compare` resample whole windows (a block bootstrap), so
//! the run's variability between windows enters its interval.
//!
//! Windows hold equal numbers of consecutive samples (the last may hold
//! fewer): at a probe's fixed period that is equal spans of time. Memory and
//! record size stay bounded however long the run: past
//! [`Windows::MAX_WINDOWS`] windows, neighbours are merged in pairs and the
//! window length doubles, so a run keeps between half that and that many.
//! Values are counted in buckets at most 1/[`SUB_BUCKETS`] of their value
//! wide, so a window's histogram holds a few dozen entries, not one per
//! microsecond.

use serde::{Deserialize, Serialize};

use punctual_units::Nanos;

/// Buckets per power of two: a bucket is at most 1/32 (3.1%) of its lower
/// bound wide, well under the 40% change `compare` looks for by default.
pub const SUB_BUCKETS: u64 = 32;

/// Values below this are counted exactly (their bucket is 1 ns wide).
const EXACT_BELOW: u64 = 2 * SUB_BUCKETS;

/// The lower bound of the coarse bucket holding `v` ns: `v` itself below
/// 64 ns, else `v` with all but its 6 leading bits cleared.
#[inline]
pub fn window_bucket(v: u64) -> u64 {
    if v < EXACT_BELOW {
        v
    } else {
        let shift = 63 - v.leading_zeros() - SUB_BUCKETS.trailing_zeros();
        (v >> shift) << shift
    }
}

/// The width in ns of the coarse bucket whose lower bound is `lower`.
pub fn window_bucket_width(lower: u64) -> u64 {
    if lower < EXACT_BELOW {
        1
    } else {
        1 << (63 - lower.leading_zeros() - SUB_BUCKETS.trailing_zeros())
    }
}

/// Dense index of the bucket holding `v`: 0..64 exact, then 32 per
/// power of two (at most 64 + 58 × 32 entries for any u64).
#[inline]
fn bucket_index(v: u64) -> usize {
    if v < EXACT_BELOW {
        v as usize
    } else {
        let e = 63 - v.leading_zeros() as u64; // >= 6
        let sub = (v >> (e - 5)) & (SUB_BUCKETS - 1);
        (EXACT_BELOW + (e - 6) * SUB_BUCKETS + sub) as usize
    }
}

const INDEX_LEN: usize = (EXACT_BELOW + 58 * SUB_BUCKETS) as usize;

fn index_lower(i: usize) -> u64 {
    let i = i as u64;
    if i < EXACT_BELOW {
        i
    } else {
        let e = (i - EXACT_BELOW) / SUB_BUCKETS + 6;
        let sub = (i - EXACT_BELOW) % SUB_BUCKETS;
        (SUB_BUCKETS + sub) << (e - 5)
    }
}

/// The stored form: `series[].windows` in a record.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Windows {
    /// Samples in each window but the last (which may hold fewer).
    pub samples_per_window: u64,
    /// Per window, in run order: `[lower_ns, count]` of its non-empty
    /// buckets, increasing. A bucket's width is [`window_bucket_width`] of
    /// its lower bound.
    pub counts: Vec<Vec<(u64, u64)>>,
}

impl Windows {
    /// Most windows kept; one more closing merges them in pairs.
    pub const MAX_WINDOWS: usize = 128;

    /// Samples over all windows.
    pub fn total(&self) -> u64 {
        self.counts.iter().flatten().map(|c| c.1).sum()
    }
}

/// Counts a series' samples window by window, as they arrive.
#[derive(Clone, Debug)]
pub struct WindowRecorder {
    per_window: u64,
    /// The open window: counts by dense bucket index (allocated on the
    /// first sample), and the indices it touched, so closing it costs its
    /// entries, not the array.
    open: Vec<u64>,
    touched: Vec<usize>,
    in_open: u64,
    closed: Vec<Vec<(u64, u64)>>,
}

impl WindowRecorder {
    /// Windows of `per_window` samples to begin with (at least 1).
    pub fn new(per_window: u64) -> Self {
        WindowRecorder {
            per_window: per_window.max(1),
            open: Vec::new(),
            touched: Vec::new(),
            in_open: 0,
            closed: Vec::new(),
        }
    }

    #[inline]
    pub fn record(&mut self, v: Nanos) {
        if self.open.is_empty() {
            self.open = vec![0; INDEX_LEN];
        }
        let i = bucket_index(v.0);
        if self.open[i] == 0 {
            self.touched.push(i);
        }
        self.open[i] += 1;
        self.in_open += 1;
        if self.in_open >= self.per_window {
            self.close();
        }
    }

    fn take_open(&mut self) -> Vec<(u64, u64)> {
        self.touched.sort_unstable();
        let w = self
            .touched
            .drain(..)
            .map(|i| (index_lower(i), std::mem::take(&mut self.open[i])))
            .collect();
        self.in_open = 0;
        w
    }

    #[cold]
    fn close(&mut self) {
        let w = self.take_open();
        self.closed.push(w);
        if self.closed.len() >= Windows::MAX_WINDOWS {
            let old = std::mem::take(&mut self.closed);
            let mut it = old.into_iter();
            while let Some(a) = it.next() {
                match it.next() {
                    Some(b) => self.closed.push(merge(&a, &b)),
                    None => self.closed.push(a),
                }
            }
            self.per_window *= 2;
        }
    }

    /// The windows so far, the open one last when it holds samples.
    pub fn windows(&self) -> Windows {
        let mut counts = self.closed.clone();
        let mut me = self.clone();
        if me.in_open > 0 {
            counts.push(me.take_open());
        }
        Windows {
            samples_per_window: self.per_window,
            counts,
        }
    }
}

fn merge(a: &[(u64, u64)], b: &[(u64, u64)]) -> Vec<(u64, u64)> {
    let mut out = Vec::with_capacity(a.len() + b.len());
    let (mut i, mut j) = (0, 0);
    while i < a.len() || j < b.len() {
        match (a.get(i), b.get(j)) {
            (Some(x), Some(y)) if x.0 == y.0 => {
                out.push((x.0, x.1 + y.1));
                i += 1;
                j += 1;
            }
            (Some(x), Some(y)) if x.0 < y.0 => {
                out.push(*x);
                i += 1;
            }
            (Some(x), None) => {
                out.push(*x);
                i += 1;
            }
            (_, Some(y)) => {
                out.push(*y);
                j += 1;
            }
            (None, None) => unreachable!(),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_at_most_a_32nd_of_their_value_and_cover_every_value() {
        for v in (0..5000u64).chain([1 << 20, 123_456_789, u64::MAX / 3, u64::MAX]) {
            let lo = window_bucket(v);
            let w = window_bucket_width(lo);
            assert!(lo <= v && v - lo < w, "{v}: [{lo}, +{w})");
            assert!(w == 1 || w * SUB_BUCKETS <= lo, "{v}: {lo} {w}");
            assert_eq!(index_lower(bucket_index(v)), lo, "{v}");
            assert!(bucket_index(v) < INDEX_LEN);
        }
    }

    #[test]
    fn windows_keep_every_sample_in_run_order_and_stay_bounded() {
        let mut r = WindowRecorder::new(10);
        // 25 samples: two full windows of 10, one open of 5 (values on
        // bucket bounds, so each reads back as itself).
        for i in 0..25u64 {
            r.record(Nanos(1024 * (i / 10 + 1)));
        }
        let w = r.windows();
        assert_eq!(w.samples_per_window, 10);
        assert_eq!(
            w.counts,
            vec![vec![(1024, 10)], vec![(2048, 10)], vec![(3072, 5)]]
        );
        // A long run: the count of windows stays within [64, 128].
        let mut r = WindowRecorder::new(10);
        for i in 0..100_000u64 {
            r.record(Nanos(i % 977 * 100));
        }
        let w = r.windows();
        assert!(w.counts.len() <= Windows::MAX_WINDOWS, "{}", w.counts.len());
        assert!(w.counts.len() >= Windows::MAX_WINDOWS / 2);
        assert_eq!(w.total(), 100_000);
        assert_eq!(w.samples_per_window, 10 * 128);
    }
}
