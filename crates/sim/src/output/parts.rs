//! What a folded record keeps of the parts other than tasks that grow
//! with the scenario: streams, time constraints, noise sources, the CPUs'
//! gap series and stolen-time timelines, and the run's warnings. Each
//! keeps its worst members up to a fixed count, so that together they
//! leave most of the bound to the tasks; every part's totals stay in
//! `extra.sim.folded.parts`.

use std::collections::BTreeMap;

use punctual_record::sim::FoldedPart;
use punctual_record::{SourceShare, Timeline};
use punctual_units::Nanos;

use crate::outcome::{Outcome, SourceStats};

/// Streams a folded record keeps (about 430 bytes each whole, their
/// `extra.summary` keys and scenario text included).
pub const STREAMS_KEPT_MAX: usize = 1000;

/// Time constraints a folded record keeps (about 350 bytes each).
pub const CONSTRAINTS_KEPT_MAX: usize = 1000;

/// Sources of stolen time a folded record names per CPU; the rest are
/// merged into one entry of kind `folded` (256 CPUs of 17 entries take
/// about 1 MB).
pub const SOURCES_PER_CPU_MAX: usize = 16;

/// Sources a folded record names in `extra.sim.interrupt_work_dropped`.
pub const DROPPED_KEPT_MAX: usize = 100;

/// The run's warnings a folded record keeps, in the run's order.
pub const WARNINGS_KEPT_MAX: usize = 100;

/// CPUs whose gap series (`sim.gap_series`) a folded record keeps: up to
/// 2048 buckets each, about 120 KB at most.
pub const GAP_SERIES_MAX: usize = 16;

/// Stolen-time timeline bins a folded record keeps over all its CPUs
/// (about 20 bytes each): 256 CPUs keep 128 bins each.
pub const TIMELINE_BINS_MAX: usize = 32_768;

/// Per part, which members the record keeps; everything when not folded.
#[derive(Clone, Debug)]
pub(super) struct Parts {
    /// Kept streams by index in [`Outcome::streams`]; `None`: all.
    pub streams: Option<Vec<bool>>,
    /// Kept constraints by index in [`Outcome::constraints`].
    pub constraints: Option<Vec<bool>>,
    /// Sources named per CPU.
    pub sources_per_cpu: usize,
    /// Sources kept in `interrupt_work_dropped`, by index in
    /// [`Outcome::sources`].
    pub dropped: Option<Vec<bool>>,
    pub warnings_kept: usize,
    /// CPUs whose gap series is kept.
    pub gap_cpus: Option<Vec<bool>>,
    /// Timeline bins per CPU.
    pub bins_per_cpu: usize,
    /// The account of each part that left something out.
    pub info: BTreeMap<String, FoldedPart>,
}

/// Indices `0..n` worst first by `cmp`, the first `max` marked kept, or
/// `None` when all `n` fit.
fn keep_worst(
    n: usize,
    max: usize,
    cmp: impl Fn(usize, usize) -> std::cmp::Ordering,
) -> Option<Vec<bool>> {
    if n <= max {
        return None;
    }
    let mut idx: Vec<usize> = (0..n).collect();
    idx.sort_by(|&a, &b| cmp(a, b));
    let mut keep = vec![false; n];
    for &i in &idx[..max] {
        keep[i] = true;
    }
    Some(keep)
}

/// [`keep_worst`] over the members `among` of a part of `len` (those
/// that have what is folded: a dropped piece, a gap series), as a mask
/// over all `len`; `cmp` compares members by their index in the part.
fn keep_worst_among(
    len: usize,
    among: &[usize],
    max: usize,
    cmp: impl Fn(usize, usize) -> std::cmp::Ordering,
) -> Option<Vec<bool>> {
    let k = keep_worst(among.len(), max, |a, b| cmp(among[a], among[b]))?;
    let mut keep = vec![false; len];
    for (j, &i) in among.iter().enumerate() {
        keep[i] = k[j];
    }
    Some(keep)
}

/// A part's account.
fn part(total: usize, kept: usize, order: &str, sums: &[(&str, u64)]) -> FoldedPart {
    FoldedPart {
        total: total as u64,
        kept: kept as u64,
        order: order.into(),
        sums: sums.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
    }
}

impl Parts {
    /// Everything kept: the record as it always was.
    pub fn all() -> Parts {
        Parts {
            streams: None,
            constraints: None,
            sources_per_cpu: usize::MAX,
            dropped: None,
            warnings_kept: usize::MAX,
            gap_cpus: None,
            bins_per_cpu: usize::MAX,
            info: BTreeMap::new(),
        }
    }

    /// What a folded record keeps of each part.
    pub fn folded(o: &Outcome) -> Parts {
        let mut p = Parts::all();
        p.fold_streams(o);
        p.fold_constraints(o);
        p.fold_sources(o);
        p.fold_cpus(o);
        if o.warnings.len() > WARNINGS_KEPT_MAX {
            p.warnings_kept = WARNINGS_KEPT_MAX;
            p.info.insert(
                "warnings".into(),
                part(o.warnings.len(), WARNINGS_KEPT_MAX, "the run's first", &[]),
            );
        }
        p
    }

    /// Streams that lost most first: a loss is what a stream's reader
    /// notices; then the fullest (a stream near its capacity is the next
    /// to lose), then by name.
    fn fold_streams(&mut self, o: &Outcome) {
        let s = &o.streams;
        self.streams = keep_worst(s.len(), STREAMS_KEPT_MAX, |a, b| {
            let (x, y) = (&s[a], &s[b]);
            y.lost
                .cmp(&x.lost)
                .then_with(|| {
                    (y.max_fill as u128 * x.capacity.max(1) as u128)
                        .cmp(&(x.max_fill as u128 * y.capacity.max(1) as u128))
                })
                .then_with(|| x.name.cmp(&y.name))
        });
        if self.streams.is_some() {
            let sum = |f: fn(&crate::outcome::StreamStats) -> u64| s.iter().map(f).sum::<u64>();
            self.info.insert(
                "streams".into(),
                part(
                    s.len(),
                    STREAMS_KEPT_MAX,
                    "most packets lost, then fullest (max_fill over capacity), then name",
                    &[
                        ("arrived", sum(|x| x.arrived)),
                        ("delivered", sum(|x| x.delivered)),
                        ("lost", sum(|x| x.lost)),
                    ],
                ),
            );
        }
    }

    /// Denied constraints first (the answer a caller acts on), then
    /// granted ones that missed their deadline, then by name.
    fn fold_constraints(&mut self, o: &Outcome) {
        let c = &o.constraints;
        let rank = |i: usize| match (c[i].granted, c[i].met_deadline) {
            (false, _) => 0,
            (true, false) => 1,
            (true, true) => 2,
        };
        self.constraints = keep_worst(c.len(), CONSTRAINTS_KEPT_MAX, |a, b| {
            rank(a)
                .cmp(&rank(b))
                .then_with(|| c[a].name.cmp(&c[b].name))
        });
        if self.constraints.is_some() {
            let count = |r: u8| (0..c.len()).filter(|&i| rank(i) == r).count() as u64;
            self.info.insert(
                "constraints".into(),
                part(
                    c.len(),
                    CONSTRAINTS_KEPT_MAX,
                    "denied first, then granted but late, then name",
                    &[("denied", count(0)), ("late", count(1)), ("met", count(2))],
                ),
            );
        }
    }

    /// Per CPU the sources that stole most; in
    /// `interrupt_work_dropped` the sources that dropped most.
    fn fold_sources(&mut self, o: &Outcome) {
        let ncpu = o.cpus.len();
        let mut per_cpu = vec![0usize; ncpu];
        for x in o.sources.iter().filter(|x| x.count > 0) {
            per_cpu[x.cpu as usize] += 1;
        }
        if per_cpu.iter().any(|&n| n > SOURCES_PER_CPU_MAX) {
            self.sources_per_cpu = SOURCES_PER_CPU_MAX;
            let total: usize = per_cpu.iter().sum();
            let kept: usize = per_cpu.iter().map(|&n| n.min(SOURCES_PER_CPU_MAX)).sum();
            self.info.insert(
                "sources".into(),
                part(
                    total,
                    kept,
                    "per CPU most time stolen, then name; the rest in one entry of kind `folded`",
                    &[],
                ),
            );
        }
        let s = &o.sources;
        let dropping: Vec<usize> = (0..s.len()).filter(|&i| s[i].dropped > 0).collect();
        let keep = keep_worst_among(s.len(), &dropping, DROPPED_KEPT_MAX, |a, b| {
            let (x, y) = (&s[a], &s[b]);
            y.dropped.cmp(&x.dropped).then_with(|| x.name.cmp(&y.name))
        });
        if let Some(by_source) = keep {
            self.dropped = Some(by_source);
            self.info.insert(
                "interrupt_work_dropped".into(),
                part(
                    dropping.len(),
                    DROPPED_KEPT_MAX,
                    "most pieces dropped, then name",
                    &[("dropped", s.iter().map(|x| x.dropped).sum())],
                ),
            );
        }
    }

    /// Gap series of the CPUs with most time stolen; timelines coarsened
    /// (bins merged in pairs) until all CPUs' bins fit.
    fn fold_cpus(&mut self, o: &Outcome) {
        let c = &o.cpus;
        let gaps: Vec<usize> = (0..c.len()).filter(|&i| c[i].gaps.is_some()).collect();
        let keep = keep_worst_among(c.len(), &gaps, GAP_SERIES_MAX, |a, b| {
            c[b].total.cmp(&c[a].total).then(a.cmp(&b))
        });
        if let Some(by_cpu) = keep {
            self.gap_cpus = Some(by_cpu);
            self.info.insert(
                "gap_series".into(),
                part(
                    gaps.len(),
                    GAP_SERIES_MAX,
                    "most time stolen, then CPU",
                    &[],
                ),
            );
        }
        let bins: usize = c.iter().map(|x| x.timeline.values_ns.len()).sum();
        if bins > TIMELINE_BINS_MAX {
            let mut per = 1usize;
            while per * 2 * c.len() <= TIMELINE_BINS_MAX {
                per *= 2;
            }
            self.bins_per_cpu = per;
            let kept: usize = c
                .iter()
                .map(|x| self.timeline(&x.timeline).values_ns.len())
                .sum();
            self.info.insert(
                "timeline_bins".into(),
                part(
                    bins,
                    kept,
                    &format!("every CPU's bins merged in pairs, each twice as wide, until it has {per} or fewer"),
                    &[],
                ),
            );
        }
    }

    /// A CPU's timeline with at most [`Parts::bins_per_cpu`] bins.
    pub fn timeline(&self, t: &Timeline) -> Timeline {
        let mut t = t.clone();
        while t.values_ns.len() > self.bins_per_cpu {
            t.values_ns = t
                .values_ns
                .chunks(2)
                .map(|c| c.iter().copied().sum())
                .collect();
            t.bin_ns = t.bin_ns * 2;
        }
        t
    }

    /// A CPU's sources: all of them in the run's order, or when there are
    /// more than [`Parts::sources_per_cpu`], those that stole most and one
    /// entry for the rest.
    pub fn sources(&self, mine: Vec<&SourceStats>) -> Vec<SourceShare> {
        let total_src: u64 = mine.iter().map(|x| x.total.0).sum();
        let share = |t: u64| {
            if total_src == 0 {
                0.0
            } else {
                t as f64 / total_src as f64
            }
        };
        let entry = |x: &SourceStats| SourceShare {
            kind: x.kind.to_string(),
            name: x.name.to_string(),
            count: x.count,
            total_ns: x.total,
            max_ns: x.max,
            share: share(x.total.0),
        };
        if mine.len() <= self.sources_per_cpu {
            return mine.into_iter().map(entry).collect();
        }
        let mut mine = mine;
        mine.sort_by(|a, b| b.total.cmp(&a.total).then_with(|| a.name.cmp(&b.name)));
        let rest = &mine[self.sources_per_cpu..];
        let total = rest.iter().map(|x| x.total.0).sum::<u64>();
        let mut out: Vec<SourceShare> = mine[..self.sources_per_cpu]
            .iter()
            .map(|x| entry(x))
            .collect();
        out.push(SourceShare {
            kind: "folded".into(),
            name: format!("{} more sources", rest.len()),
            count: rest.iter().map(|x| x.count).sum(),
            total_ns: Nanos(total),
            max_ns: rest.iter().map(|x| x.max).max().unwrap_or(Nanos::ZERO),
            share: share(total),
        });
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::outcome::RunOptions;
    use crate::output::{to_record, RECORD_BYTES_MAX};

    /// 20,000 streams drained by one sleeper (about 430 bytes a stream,
    /// its scenario text included: 6.9 MB whole) and 40 noise sources on its CPU.
    #[test]
    fn streams_and_sources_fold_worst_first_under_the_bound() {
        let mut text = String::from(
            "[sim]\nduration = \"50ms\"\n[[task]]\nname = \"d\"\nkind = \"sleeper\"\npriority = 5\nsleep = \"5ms\"\nexec = \"10us\"\n",
        );
        for i in 0..20_000 {
            // Every seventh stream is too small for what arrives between
            // two drains, and loses.
            let cap = if i % 7 == 0 { 1 } else { 64 };
            text.push_str(&format!(
                "[[stream]]\nname = \"s{i}\"\nrate = {}.0\ncapacity = {cap}\ndrained_by = \"d\"\nflow_control = false\n",
                400 + i % 300
            ));
        }
        for i in 0..40 {
            text.push_str(&format!(
                "[[noise]]\nname = \"n{i}\"\nkind = \"periodic\"\nperiod = \"{}us\"\nduration = \"1us\"\nlevel = \"dpc\"\n",
                500 + i
            ));
        }
        let (scn, o) = crate::run_text("parts.toml", &text, &[], &RunOptions::default()).unwrap();
        let r = to_record(&scn, &o, &[]);
        assert!(r.to_json_pretty().len() <= RECORD_BYTES_MAX);
        let sim = r.sim().unwrap();
        let f = sim.folded.clone().expect("folded");
        let streams = &f.parts["streams"];
        assert_eq!(
            (streams.total, streams.kept),
            (20_000, STREAMS_KEPT_MAX as u64)
        );
        assert_eq!(sim.streams.len(), STREAMS_KEPT_MAX);
        let lost: u64 = o.streams.iter().map(|s| s.lost).sum();
        assert!(lost > 0);
        assert_eq!(streams.sums["lost"], lost);
        // No stream left out lost more than one kept.
        let least_kept = sim.streams.values().map(|s| s.lost).min().unwrap();
        let most_out = o
            .streams
            .iter()
            .filter(|s| !sim.streams.contains_key(&s.name))
            .map(|s| s.lost)
            .max()
            .unwrap();
        assert!(least_kept >= most_out, "{least_kept} < {most_out}");
        // The summary keys of the streams left out are gone too.
        let summary = r.extra["summary"].as_object().unwrap();
        assert!(summary.keys().filter(|k| k.ends_with(".arrived")).count() == STREAMS_KEPT_MAX);
        // 40 sources on cpu 0: 16 named, one entry for the rest, the
        // total kept.
        let by = &r.stolen[0].by_source;
        assert_eq!(by.len(), SOURCES_PER_CPU_MAX + 1);
        assert_eq!(by.last().unwrap().kind, "folded");
        let sum: u64 = by.iter().map(|x| x.total_ns.0).sum();
        let all: u64 = o.sources.iter().map(|x| x.total.0).sum();
        assert_eq!(sum, all);
        assert_eq!(f.parts["sources"].total, 40);
        assert!(r
            .warnings
            .iter()
            .any(|w| format!("{w:?}").contains("streams 1000 of 20000")));
    }

    #[test]
    fn timelines_coarsen_to_their_share_of_bins() {
        let p = Parts {
            bins_per_cpu: 128,
            ..Parts::all()
        };
        let t = Timeline {
            bin_ns: Nanos(10),
            values_ns: (0..4096).map(Nanos).collect(),
        };
        let c = p.timeline(&t);
        assert_eq!(c.values_ns.len(), 128);
        assert_eq!(c.bin_ns, Nanos(320));
        let sum = |t: &Timeline| t.values_ns.iter().map(|x| x.0).sum::<u64>();
        assert_eq!(sum(&c), sum(&t));
    }
}
