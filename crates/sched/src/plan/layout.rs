//! The tree itself: which reservation sits in which node, and where that
//! puts it in time.
//!
//! Time is cut into *frames* of `base` nanoseconds. Frame `i` of the plan
//! walks one root-to-leaf path of a binary tree: at depth `d` it visits node
//! `(d, i mod 2^d)`, so a node at depth `d` comes round exactly once every
//! `2^d` frames, always at the same offset inside its frame (the nodes above
//! it on the path are the same every time it is visited). A reservation
//! whose period is `base·2^d` therefore lives in a node at depth `d` and gets
//! its amount exactly once per period, at a fixed phase, however different
//! the other periods in the plan are. Within a frame the visited nodes' pieces
//! are laid out back to back in depth order and the rest of the frame is free.
//!
//! This is Rialto's scheduling graph: the memory and the placement work grow
//! with the number of distinct levels, not with the least common multiple of
//! all periods.

use std::collections::BTreeMap;

use super::ReservationId;

/// One stretch of a node: a reservation's piece, or a hole left behind by a
/// released one. Holes keep everything after them in place, so releasing a
/// reservation never moves anyone else's time; they are squeezed out only
/// when the plan is repacked (at a plan-period boundary).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Piece {
    pub(crate) owner: Option<ReservationId>,
    pub(crate) len: u64,
}

/// Why a reservation could not be placed at its level.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Shortfall {
    /// The most any single node at the level could still take.
    pub(crate) largest_node: u64,
    /// Sum of what all nodes at the level could still take (the most a
    /// reservation split across them could get per period).
    pub(crate) level_total: u64,
}

/// Alternatives a repack search considers per placement, tightest first.
const MAX_CANDIDATES: usize = 8;

/// Depth to which consolidation scores are scaled (the deepest plan).
const MAX_SCORE_DEPTH: u32 = super::MAX_DEPTH_LIMIT;

#[derive(Clone, Debug)]
pub(crate) struct Layout {
    pub(crate) base: u64,
    /// Deepest level that exists; the plan period is `base << depth`.
    pub(crate) depth: u32,
    /// Non-empty nodes only, keyed by (depth, index). Sparse because a plan
    /// with one 1-minute reservation on a 1 ms base has 2^16 nodes at that
    /// level, nearly all empty.
    pub(crate) nodes: BTreeMap<(u32, u64), Vec<Piece>>,
    /// Occupied length (pieces and holes) of every frame of one plan period.
    pub(crate) frame_load: Vec<u64>,
}

impl Layout {
    pub(crate) fn new(base: u64) -> Self {
        Layout {
            base,
            depth: 0,
            nodes: BTreeMap::new(),
            frame_load: vec![0],
        }
    }

    pub(crate) fn hyperperiod(&self) -> u64 {
        self.base << self.depth
    }

    /// Deepens the tree to `level`. The frame loads are periodic with the old
    /// plan period, so the longer period is the old one repeated.
    pub(crate) fn grow(&mut self, level: u32) {
        while self.depth < level {
            self.frame_load.extend_from_within(..);
            self.depth += 1;
        }
    }

    /// How much more each node at `level` could hold: the base minus the
    /// fullest frame among those that visit it.
    pub(crate) fn slacks(&self, level: u32) -> Vec<u64> {
        debug_assert!(level <= self.depth);
        let width = 1usize << level;
        let mut fullest = vec![0u64; width];
        for (i, &load) in self.frame_load.iter().enumerate() {
            let j = i & (width - 1);
            fullest[j] = fullest[j].max(load);
        }
        fullest
            .into_iter()
            .map(|f| self.base.saturating_sub(f))
            .collect()
    }

    fn add_piece(&mut self, level: u32, index: u64, piece: Piece) {
        self.nodes.entry((level, index)).or_default().push(piece);
        let step = 1usize << level;
        let mut i = index as usize;
        while i < self.frame_load.len() {
            self.frame_load[i] += piece.len;
            i += step;
        }
    }

    /// Places `amount` for `id` at `level`: in the single node that fits it
    /// most tightly (best fit keeps big gaps for big requests), or else
    /// split over the emptiest nodes of the level, which still gives exactly
    /// `amount` per period because each node at the level comes round once
    /// per period. Leaves `self` unchanged on failure.
    pub(crate) fn place(
        &mut self,
        id: ReservationId,
        amount: u64,
        level: u32,
    ) -> Result<(), Shortfall> {
        let choice = self.candidates(amount, level).first().copied();
        self.place_at(id, amount, level, choice)
    }

    /// Nodes at `level` that could hold `amount` whole, tightest first. Of
    /// nodes with the same slack and the same total load under them only
    /// the first is listed: the others would give the same plan up to the
    /// order of frames, as far as later placements can tell.
    pub(crate) fn candidates(&mut self, amount: u64, level: u32) -> Vec<u64> {
        let old_depth = self.depth;
        self.grow(level);
        let slacks = self.slacks(level);
        let width = 1usize << level;
        let mut load_sum = vec![0u64; width];
        for (i, &load) in self.frame_load.iter().enumerate() {
            load_sum[i & (width - 1)] += load;
        }
        // (slack, load) → first node with it; few distinct keys in practice.
        let mut distinct: BTreeMap<(u64, u64), u64> = BTreeMap::new();
        for (j, &s) in slacks.iter().enumerate() {
            if s >= amount {
                distinct.entry((s, load_sum[j])).or_insert(j as u64);
            }
        }
        self.shrink_to(old_depth);
        distinct.into_values().take(MAX_CANDIDATES).collect()
    }

    /// Places `amount` for `id` in node `(level, j)` when `node` is given
    /// (the caller checked it fits), else split over the level, emptiest
    /// nodes first. Leaves `self` unchanged on failure.
    pub(crate) fn place_at(
        &mut self,
        id: ReservationId,
        amount: u64,
        level: u32,
        node: Option<u64>,
    ) -> Result<(), Shortfall> {
        let old_depth = self.depth;
        self.grow(level);
        if let Some(j) = node {
            self.add_piece(
                level,
                j,
                Piece {
                    owner: Some(id),
                    len: amount,
                },
            );
            return Ok(());
        }
        let slacks = self.slacks(level);
        let level_total: u64 = slacks.iter().sum();
        if level_total < amount {
            let largest_node = slacks.iter().copied().max().unwrap_or(0);
            self.shrink_to(old_depth);
            return Err(Shortfall {
                largest_node,
                level_total,
            });
        }
        // Roomiest nodes first (fewer pieces), ties in index order. Grouped
        // by slack rather than sorted: a deep level has 65 536 nodes but
        // only a few distinct slacks.
        let mut groups: BTreeMap<std::cmp::Reverse<u64>, Vec<usize>> = BTreeMap::new();
        for (j, &s) in slacks.iter().enumerate().filter(|&(_, &s)| s > 0) {
            groups.entry(std::cmp::Reverse(s)).or_default().push(j);
        }
        let order = groups
            .into_iter()
            .flat_map(|(s, js)| js.into_iter().map(move |j| (j, s.0)));
        let mut left = amount;
        for (j, s) in order {
            if left == 0 {
                break;
            }
            let take = s.min(left);
            if take == 0 {
                continue;
            }
            self.add_piece(
                level,
                j as u64,
                Piece {
                    owner: Some(id),
                    len: take,
                },
            );
            left -= take;
        }
        Ok(())
    }

    /// How well the free time is gathered: the sum over one plan period's
    /// frames of (free time in the frame)², in ns². A constraint needs its
    /// estimate inside one window, so a plan with a few large free stretches
    /// grants more constraints than one with the same free time in crumbs.
    pub(crate) fn consolidation(&self) -> u128 {
        let reps = 1u128 << (MAX_SCORE_DEPTH.saturating_sub(self.depth));
        let sum: u128 = self
            .frame_load
            .iter()
            .map(|&l| {
                let free = self.base.saturating_sub(l) as u128;
                free * free
            })
            .sum();
        // Scaled to a common plan period so layouts of different depth
        // compare fairly.
        sum * reps
    }

    /// Number of pieces, holes included (fewer means fewer switches).
    pub(crate) fn piece_count(&self) -> usize {
        self.nodes.values().map(Vec::len).sum()
    }

    /// Undoes a `grow` that turned out not to be needed.
    fn shrink_to(&mut self, depth: u32) {
        if depth < self.depth && !self.nodes.keys().any(|&(d, _)| d > depth) {
            self.depth = depth;
            self.frame_load.truncate(1usize << depth);
        }
    }

    /// Turns `id`'s pieces into holes. Nothing else moves.
    pub(crate) fn release(&mut self, id: ReservationId) -> bool {
        let mut found = false;
        for pieces in self.nodes.values_mut() {
            for p in pieces.iter_mut().filter(|p| p.owner == Some(id)) {
                p.owner = None;
                found = true;
            }
        }
        found
    }

    /// Who holds absolute time `t` according to the tree alone, and the end
    /// of that stretch. `None` is free time (frame tail or hole).
    pub(crate) fn lookup(&self, t: u64) -> (Option<ReservationId>, u64) {
        let offset = t % self.base;
        let frame = (t % self.hyperperiod()) / self.base;
        let frame_start = t - offset;
        let mut acc = 0u64;
        for d in 0..=self.depth {
            let index = frame & ((1u64 << d) - 1);
            if let Some(pieces) = self.nodes.get(&(d, index)) {
                for p in pieces {
                    if offset < acc + p.len {
                        return (p.owner, frame_start.saturating_add(acc + p.len));
                    }
                    acc += p.len;
                }
            }
        }
        (None, frame_start.saturating_add(self.base))
    }

    /// The (start offset, piece) list of frame `frame`, in time order, for
    /// printing the plan.
    pub(crate) fn frame_pieces(&self, frame: u64) -> Vec<(u64, Piece)> {
        let mut out = Vec::new();
        let mut acc = 0u64;
        for d in 0..=self.depth {
            let index = frame & ((1u64 << d) - 1);
            if let Some(pieces) = self.nodes.get(&(d, index)) {
                for p in pieces {
                    out.push((acc, *p));
                    acc += p.len;
                }
            }
        }
        out
    }

    /// Node assignment of `id`: (depth, index, length) per piece.
    pub(crate) fn pieces_of(&self, id: ReservationId) -> Vec<(u32, u64, u64)> {
        let mut out = Vec::new();
        for (&(d, j), pieces) in &self.nodes {
            for p in pieces.iter().filter(|p| p.owner == Some(id)) {
                out.push((d, j, p.len));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    #[test]
    fn node_at_depth_recurs_once_per_period_at_fixed_offset() {
        let mut l = Layout::new(10 * MS);
        l.place(ReservationId(1), 3 * MS, 0).unwrap();
        l.place(ReservationId(2), 4 * MS, 2).unwrap();
        assert_eq!(l.hyperperiod(), 40 * MS);
        // id 2 sits in exactly one of the four frames, right after id 1.
        let mut starts = Vec::new();
        for f in 0..8u64 {
            let t = f * 10 * MS + 3 * MS;
            if l.lookup(t).0 == Some(ReservationId(2)) {
                starts.push(t);
            }
        }
        assert_eq!(starts.len(), 2);
        assert_eq!(starts[1] - starts[0], 40 * MS);
    }

    #[test]
    fn placement_refuses_what_no_frame_can_hold_and_leaves_layout_unchanged() {
        let mut l = Layout::new(10 * MS);
        l.place(ReservationId(1), 8 * MS, 0).unwrap();
        let before = l.frame_load.clone();
        let err = l.place(ReservationId(2), 17 * MS, 3).unwrap_err();
        assert_eq!(err.largest_node, 2 * MS);
        assert_eq!(err.level_total, 16 * MS);
        assert_eq!(l.depth, 0);
        assert_eq!(l.frame_load, before);
    }

    #[test]
    fn a_reservation_larger_than_any_node_is_split_across_the_level() {
        let mut l = Layout::new(10 * MS);
        l.place(ReservationId(1), 6 * MS, 0).unwrap();
        // 12 ms every 40 ms: no frame has 12 ms, the four together have 16.
        l.place(ReservationId(2), 12 * MS, 2).unwrap();
        let got: u64 = l.pieces_of(ReservationId(2)).iter().map(|p| p.2).sum();
        assert_eq!(got, 12 * MS);
        assert!(l.frame_load.iter().all(|&f| f <= 10 * MS));
    }

    #[test]
    fn release_leaves_a_hole_and_moves_nothing() {
        let mut l = Layout::new(10 * MS);
        l.place(ReservationId(1), 2 * MS, 0).unwrap();
        l.place(ReservationId(2), 3 * MS, 0).unwrap();
        assert_eq!(l.lookup(2 * MS), (Some(ReservationId(2)), 5 * MS));
        assert!(l.release(ReservationId(1)));
        assert_eq!(l.lookup(0), (None, 2 * MS));
        assert_eq!(l.lookup(2 * MS), (Some(ReservationId(2)), 5 * MS));
        assert!(!l.release(ReservationId(1)));
    }
}
