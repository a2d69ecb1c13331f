//! The simulator's event queue: a binary min-heap on a packed
//! (time, sequence) key.
//!
//! Two things make it cheaper than `std`'s `BinaryHeap<Reverse<Ev>>` for
//! this loop, without changing the order events come out in:
//!
//! - The key is one `u128` (time in the high half, sequence in the low
//!   half), so a comparison is one wide compare instead of a derived
//!   lexicographic one over the whole event.
//! - Taking the minimum leaves a *hole* at the root instead of sifting at
//!   once. Nearly every handler schedules its own successor (the next
//!   release, the next noise arrival, the next packet) before anything
//!   else; that push drops into the hole and sifts down once, where a pop
//!   followed by a push would sift twice. Any other access fills the hole
//!   the ordinary way first.
//!
//! Keys are unique (the sequence number is), so the order of equal times
//! is exactly first-in first-out, as before.
//!
//! CPU wake-ups are not queued here: each CPU keeps one pending wake-up
//! slot (see `Sim::wake` in the engine). A tournament tree with one slot
//! per source, wake-ups included, was tried and was slower: a CPU re-arms
//! two or three times per event and each re-arm replays a path of the tree.

use punctual_units::Nanos;

/// Packs (time, sequence) so that integer order is queue order.
#[inline]
pub(crate) fn key(t: Nanos, seq: u64) -> u128 {
    ((t.0 as u128) << 64) | seq as u128
}

/// The time half of a key.
#[inline]
pub(crate) fn key_time(k: u128) -> Nanos {
    Nanos((k >> 64) as u64)
}

/// No event: larger than every real key (a sequence never reaches `u64::MAX`).
pub(crate) const NO_KEY: u128 = u128::MAX;

#[derive(Clone, Copy, Debug)]
struct Entry<T> {
    key: u128,
    item: T,
}

#[derive(Debug)]
pub(crate) struct EvQueue<T: Copy> {
    v: Vec<Entry<T>>,
    /// The root was taken and not yet refilled.
    hole: bool,
}

impl<T: Copy> EvQueue<T> {
    pub(crate) fn new() -> Self {
        EvQueue {
            v: Vec::new(),
            hole: false,
        }
    }

    /// Number of queued events.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.v.len() - self.hole as usize
    }

    /// Always inlined: a call passed the event through memory and saved
    /// and restored five registers around a sift of two or three levels.
    #[inline(always)]
    pub(crate) fn push(&mut self, key: u128, item: T) {
        let e = Entry { key, item };
        if self.hole {
            self.hole = false;
            self.sift_down_from(0, e);
        } else {
            self.v.push(e);
            self.sift_up(self.v.len() - 1);
        }
    }

    /// Key of the earliest event, [`NO_KEY`] when empty.
    #[inline]
    pub(crate) fn min_key(&mut self) -> u128 {
        self.settle();
        self.v.first().map_or(NO_KEY, |e| e.key)
    }

    /// Removes the earliest event; call only after [`EvQueue::min_key`]
    /// returned a real key.
    #[inline]
    pub(crate) fn take_min(&mut self) -> T {
        debug_assert!(!self.hole && !self.v.is_empty());
        self.hole = true;
        self.v[0].item
    }

    /// Fills a pending hole with the last entry. Only the test is always
    /// inlined: the event loop asks for the minimum two or three times per
    /// event and there is seldom a hole then (handlers push their successor
    /// into it), and as a call the test cost more than itself.
    #[inline(always)]
    fn settle(&mut self) {
        if self.hole {
            self.fill_hole();
        }
    }

    #[inline(never)]
    fn fill_hole(&mut self) {
        self.hole = false;
        let last = self.v.pop().expect("a hole is an entry");
        if !self.v.is_empty() {
            self.sift_down_from(0, last);
        }
    }

    #[inline]
    fn sift_up(&mut self, mut i: usize) {
        let e = self.v[i];
        while i > 0 {
            let p = (i - 1) / 2;
            if self.v[p].key <= e.key {
                break;
            }
            self.v[i] = self.v[p];
            i = p;
        }
        self.v[i] = e;
    }

    /// Sifts `e` down from slot `i`, whose old content is dropped: `e` is
    /// written once, where it lands. Writing it into slot `i` first and
    /// reading it back made the read wait on stores it could not be
    /// forwarded from (the event's fields are written piecewise), a stall
    /// that was the single hottest spot of the event loop.
    #[inline]
    fn sift_down_from(&mut self, mut i: usize, e: Entry<T>) {
        let n = self.v.len();
        loop {
            let l = 2 * i + 1;
            if l >= n {
                break;
            }
            let r = l + 1;
            // Which child is smaller is a coin toss: select without a
            // branch to mispredict.
            let c = if r < n {
                l + (self.v[r].key < self.v[l].key) as usize
            } else {
                l
            };
            if e.key <= self.v[c].key {
                break;
            }
            self.v[i] = self.v[c];
            i = c;
        }
        self.v[i] = e;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::Rng;

    /// The queue must hand events out in exactly the order of a reference
    /// sorted by (time, sequence), through any mix of pushes into the hole,
    /// plain pushes and takes.
    #[test]
    fn matches_a_sorted_reference_through_holes() {
        let mut rng = Rng::new(7, 1);
        let mut q = EvQueue::new();
        let mut reference: Vec<u128> = Vec::new();
        let mut seq = 0u64;
        let mut takes = 0;
        for _ in 0..20_000 {
            match rng.range(0, 9) {
                0..=4 => {
                    seq += 1;
                    let t = Nanos(rng.range(0, 50));
                    let k = key(t, seq);
                    q.push(k, seq);
                    reference.push(k);
                }
                _ => {
                    let k = q.min_key();
                    reference.sort_unstable();
                    if reference.is_empty() {
                        assert_eq!(k, NO_KEY);
                        continue;
                    }
                    let r = reference.remove(0);
                    assert_eq!(k, r);
                    let item = q.take_min();
                    assert_eq!(item as u128, r & u64::MAX as u128);
                    takes += 1;
                }
            }
            assert_eq!(q.len(), reference.len());
        }
        assert!(takes > 5_000, "the test exercised takes");
    }

    #[test]
    fn key_orders_by_time_then_sequence() {
        assert!(key(Nanos(1), 9) < key(Nanos(2), 1));
        assert!(key(Nanos(2), 1) < key(Nanos(2), 2));
        assert_eq!(key_time(key(Nanos(12345), 77)), Nanos(12345));
        assert!(key(Nanos::MAX, u64::MAX - 1) < NO_KEY);
    }
}
