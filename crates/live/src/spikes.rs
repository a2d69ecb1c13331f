//! The bounded spike log: the largest events of a run, however long it is.
//!
//! A day-long run at 1 kHz has 86 million wake-ups; keeping every one above
//! a threshold would let a noisy machine exhaust memory. The log keeps the
//! `capacity` largest candidates (a min-heap, so a new candidate costs
//! O(log n) and most are rejected after one comparison) and counts the rest
//! in `dropped`, so nothing disappears without a trace.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use punctual_record::{Metric, Spike};
use punctual_units::Nanos;

/// Default bound of the log (entries per CPU).
pub const DEFAULT_SPIKE_CAPACITY: usize = 1000;

#[derive(Clone, Debug)]
pub struct SpikeLog {
    capacity: usize,
    threshold: Nanos,
    // (value, at, cpu) ordered by value then time; Reverse makes it a min-heap.
    heap: BinaryHeap<Reverse<(u64, u64, u32)>>,
    metric: Metric,
    dropped: u64,
}

impl SpikeLog {
    /// A log of events strictly above `threshold` (zero: every event is a
    /// candidate, so the log holds the run's `capacity` largest).
    pub fn new(metric: Metric, threshold: Nanos, capacity: usize) -> Self {
        SpikeLog {
            capacity,
            threshold,
            heap: BinaryHeap::with_capacity(capacity.min(4096)),
            metric,
            dropped: 0,
        }
    }

    pub fn threshold(&self) -> Nanos {
        self.threshold
    }

    /// Offers one event at time `at` (since the run's start).
    #[inline]
    pub fn offer(&mut self, at: Nanos, cpu: u32, value: Nanos) {
        if value <= self.threshold {
            return;
        }
        if self.heap.len() < self.capacity {
            self.heap.push(Reverse((value.0, at.0, cpu)));
            return;
        }
        self.dropped += 1;
        if let Some(Reverse(smallest)) = self.heap.peek() {
            if value.0 > smallest.0 {
                self.heap.pop();
                self.heap.push(Reverse((value.0, at.0, cpu)));
            }
        }
    }

    pub fn len(&self) -> usize {
        self.heap.len()
    }
    pub fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }
    /// Candidates that were not kept (the log was full of larger ones).
    pub fn dropped(&self) -> u64 {
        self.dropped
    }

    /// Moves every kept event `by` later (a thread's own time zero onto the
    /// run's).
    pub fn shifted(mut self, by: Nanos) -> SpikeLog {
        if !by.is_zero() {
            self.heap = self
                .heap
                .into_iter()
                .map(|Reverse((v, at, c))| Reverse((v, at + by.0, c)))
                .collect();
        }
        self
    }

    /// Multiplies every kept event's time by `num / den` (positions
    /// re-measured against another clock; see
    /// `GapProcessor::align_positions`). Values are left alone.
    pub fn stretch_positions(&mut self, num: u64, den: u64) {
        if num == den || den == 0 {
            return;
        }
        let heap = std::mem::take(&mut self.heap);
        self.heap = heap
            .into_iter()
            .map(|Reverse((v, at, c))| Reverse((v, mul_div(at, num, den), c)))
            .collect();
    }

    /// The kept events in time order.
    pub fn into_spikes(self) -> Vec<Spike> {
        let metric = self.metric;
        let mut v: Vec<(u64, u64, u32)> = self.heap.into_iter().map(|Reverse(x)| x).collect();
        v.sort_by_key(|&(val, at, cpu)| (at, cpu, val));
        v.into_iter()
            .map(|(val, at, cpu)| Spike {
                at_ns: Nanos(at),
                cpu,
                task: None,
                metric,
                value_ns: Nanos(val),
                causes: Vec::new(),
                incomplete: false,
            })
            .collect()
    }

    /// Merges logs of several CPUs into one bounded log of `capacity`.
    pub fn merge_all(logs: Vec<SpikeLog>, capacity: usize) -> (Vec<Spike>, u64) {
        let mut dropped: u64 = logs.iter().map(|l| l.dropped).sum();
        let mut all: Vec<Spike> = logs.into_iter().flat_map(|l| l.into_spikes()).collect();
        if all.len() > capacity {
            all.sort_by(|a, b| b.value_ns.cmp(&a.value_ns).then(a.at_ns.cmp(&b.at_ns)));
            dropped += (all.len() - capacity) as u64;
            all.truncate(capacity);
        }
        all.sort_by_key(|s| (s.at_ns, s.cpu));
        (all, dropped)
    }
}

/// `x * num / den` without overflow (rounded down).
pub fn mul_div(x: u64, num: u64, den: u64) -> u64 {
    (x as u128 * num as u128 / den.max(1) as u128) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_largest_and_counts_the_rest() {
        let mut log = SpikeLog::new(Metric::Latency, Nanos(10), 3);
        for (i, v) in [5u64, 50, 20, 70, 11, 90, 10, 30].iter().enumerate() {
            log.offer(Nanos(i as u64), 0, Nanos(*v));
        }
        // candidates above 10: 50 20 70 11 90 30 = 6; kept 3
        assert_eq!(log.dropped(), 3);
        let s = log.into_spikes();
        let vals: Vec<u64> = s.iter().map(|x| x.value_ns.0).collect();
        assert_eq!(vals, vec![50, 70, 90]);
        assert!(s.windows(2).all(|w| w[0].at_ns <= w[1].at_ns));
    }

    #[test]
    fn merge_is_bounded() {
        let mut a = SpikeLog::new(Metric::Gap, Nanos::ZERO, 5);
        let mut b = SpikeLog::new(Metric::Gap, Nanos::ZERO, 5);
        for i in 1..=5u64 {
            a.offer(Nanos(i), 0, Nanos(i * 10));
            b.offer(Nanos(i), 1, Nanos(i * 11));
        }
        let (s, dropped) = SpikeLog::merge_all(vec![a, b], 4);
        assert_eq!(s.len(), 4);
        assert_eq!(dropped, 6);
        assert!(s.iter().all(|x| x.value_ns.0 >= 40));
    }
}
