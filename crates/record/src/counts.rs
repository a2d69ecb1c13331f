//! A count per key in one open-addressed table: where [`crate::Recorder`]
//! keeps values beyond its flat arrays.
//!
//! The keys a recorder sees there are few and repeat (a task's periods,
//! a timer's late wake-ups), so a lookup is one multiply and, nearly
//! always, one probe; a `BTreeMap` walk per sample cost several times
//! that. Memory is at most four slots of 16 bytes per distinct key, and
//! never grows with the number of samples.

/// Counts by `u64` key. 0 marks a free slot, so key 0's count is kept
/// apart (`zero`).
#[derive(Clone, Debug, Default)]
pub(crate) struct CountMap {
    /// Key 0's count, once it was added.
    zero: Option<u64>,
    /// `(key, count)`, a power of two long once anything is counted.
    slots: Vec<(u64, u64)>,
    /// Occupied slots.
    len: usize,
    /// `64 - log2(slots.len())`: the home slot is the top bits of the
    /// key's Fibonacci hash.
    shift: u32,
}

const FIRST_SLOTS: usize = 16;

impl CountMap {
    /// Adds `n` to `key`'s count (a key added with `n = 0` is kept, with
    /// count 0, like a map entry would be). Always inlined: its callers
    /// are the recorder's out-of-line paths, and a further call there cost
    /// as much as the count.
    #[inline(always)]
    pub(crate) fn add(&mut self, key: u64, n: u64) {
        if key == 0 {
            *self.zero.get_or_insert(0) += n;
            return;
        }
        if self.slots.is_empty() {
            self.resize(FIRST_SLOTS);
        }
        let mask = self.slots.len() - 1;
        let mut i = self.home(key);
        loop {
            let slot = &mut self.slots[i];
            if slot.0 == key {
                slot.1 += n;
                return;
            }
            if slot.0 == 0 {
                break;
            }
            i = (i + 1) & mask;
        }
        // A new key: keep at least half the slots free so probes stay short.
        if (self.len + 1) * 2 > self.slots.len() {
            self.resize(self.slots.len() * 2);
            i = self.free_slot(key);
        }
        self.slots[i] = (key, n);
        self.len += 1;
    }

    #[inline]
    fn home(&self, key: u64) -> usize {
        (key.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> self.shift) as usize
    }

    /// The free slot where `key` (not present) goes.
    fn free_slot(&self, key: u64) -> usize {
        let mask = self.slots.len() - 1;
        let mut i = self.home(key);
        while self.slots[i].0 != 0 {
            i = (i + 1) & mask;
        }
        i
    }

    #[cold]
    #[inline(never)]
    fn resize(&mut self, slots: usize) {
        let old = std::mem::replace(&mut self.slots, vec![(0, 0); slots]);
        self.shift = 64 - slots.trailing_zeros();
        for (k, n) in old {
            if k != 0 {
                let i = self.free_slot(k);
                self.slots[i] = (k, n);
            }
        }
    }

    /// Distinct keys counted.
    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.len + usize::from(self.zero.is_some())
    }

    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// `(key, count)` in no particular order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.zero
            .map(|n| (0, n))
            .into_iter()
            .chain(self.slots.iter().copied().filter(|s| s.0 != 0))
    }

    /// `(key, count)` in increasing key order.
    pub(crate) fn sorted(&self) -> Vec<(u64, u64)> {
        let mut v: Vec<(u64, u64)> = self.zero.map(|n| (0, n)).into_iter().collect();
        v.extend(self.slots.iter().copied().filter(|s| s.0 != 0));
        v.sort_unstable_by_key(|s| s.0);
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    #[test]
    fn counts_like_a_map() {
        let mut m = CountMap::default();
        let mut want: BTreeMap<u64, u64> = BTreeMap::new();
        assert!(m.sorted().is_empty());
        let mut x: u64 = 0x2545_F491_4F6C_DD1D;
        for k in 0..20_000u64 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            // Keys from a few repeated ones to many distinct, some huge.
            let key = match k % 4 {
                0 => x % 7,
                1 => (x % 3000 + 1) * 1000,
                2 => x | 1,
                _ => u64::MAX - x % 5,
            };
            let n = x >> 60;
            m.add(key, n);
            *want.entry(key).or_default() += n;
        }
        assert_eq!(m.len(), want.len());
        let mut it: Vec<(u64, u64)> = m.iter().collect();
        it.sort_unstable();
        assert_eq!(m.sorted(), it);
        assert_eq!(m.sorted(), want.into_iter().collect::<Vec<_>>());
    }
}
