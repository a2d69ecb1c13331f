//! Turns a run's outcome into the record every other verb reads, a flat
//! summary for sweeps and tests, and a Chrome/Perfetto trace.

use std::collections::BTreeMap;

use punctual_record::sim::{
    SimConstraint, SimFolded, SimMultiprocessor, SimSection, SimStream, SimTask,
};
use punctual_record::{
    Metric, Period, PeriodSummary, Platform, Record, Recorder, Series, Source, Spike, Stolen,
    Warning,
};
use punctual_units::Nanos;
use serde::Serialize;
use serde_json::{json, Value};

use crate::outcome::{Outcome, PeriodTotals, TaskStats};
use crate::scenario::Scenario;

mod bound;
mod parts;

use parts::Parts;
pub use parts::{
    CONSTRAINTS_KEPT_MAX, DROPPED_KEPT_MAX, GAP_SERIES_MAX, SOURCES_PER_CPU_MAX, STREAMS_KEPT_MAX,
    TIMELINE_BINS_MAX, WARNINGS_KEPT_MAX,
};

/// Simulated runs carry a fixed start time: the record of a scenario and
/// seed must be the same bytes on every run (the real time a simulation was
/// run tells nothing about its results).
pub const SIMULATED_EPOCH: &str = "1970-01-01T00:00:00Z";

/// Flat `name → value` figures of one run, the row of a sweep table.
///
/// Keys: `<task>.jobs`, `.deadline_misses`, `.preemptions`,
/// `.latency_max_us`, `.interval_max_us`, `.interval_near_0_fraction`…;
/// reserved tasks add `.periods`, `.period_misses`, `.period_miss_fraction`,
/// `.received_mean_us`, `.requested_mean_us`, `.stolen_fraction`;
/// streams `<stream>.arrived`, `.lost`, `.loss_fraction`, `.paused_fraction`;
/// CPUs `cpu<N>.stolen_fraction`; and `events`. Under `sim.multiprocessor`
/// each task adds `.migrations`.
pub fn summary(o: &Outcome) -> BTreeMap<String, f64> {
    let mut m = BTreeMap::new();
    for i in 0..o.tasks.len() {
        task_summary(o, i, &mut m);
    }
    for p in &o.period_totals {
        period_summary_keys(p, &mut m);
    }
    run_summary(o, None, &mut m);
    m
}

/// The figures of the run as a whole: events, streams (those `kept`
/// marks, or all), CPUs.
fn run_summary(o: &Outcome, kept: Option<&[bool]>, m: &mut BTreeMap<String, f64>) {
    let dur = o.ended_at.0.max(1) as f64;
    m.insert("events".into(), o.events as f64);
    for (i, s) in o.streams.iter().enumerate() {
        if kept.is_some_and(|k| !k[i]) {
            continue;
        }
        let n = &s.name;
        m.insert(format!("{n}.arrived"), s.arrived as f64);
        m.insert(format!("{n}.delivered"), s.delivered as f64);
        m.insert(format!("{n}.lost"), s.lost as f64);
        m.insert(
            format!("{n}.loss_fraction"),
            s.lost as f64 / (s.lost + s.arrived).max(1) as f64,
        );
        m.insert(format!("{n}.paused_fraction"), s.paused_ns.0 as f64 / dur);
    }
    for (c, s) in o.cpus.iter().enumerate() {
        m.insert(format!("cpu{c}.stolen_fraction"), s.total.0 as f64 / dur);
    }
}

/// The figures of task `i`, when it released or ran anything.
fn task_summary(o: &Outcome, i: usize, m: &mut BTreeMap<String, f64>) {
    let t = &o.tasks[i];
    let n = &t.name;
    if t.jobs > 0 || t.releases > 0 && !t.reserved {
        m.insert(format!("{n}.jobs"), t.jobs as f64);
        m.insert(format!("{n}.deadline_misses"), t.deadline_misses as f64);
        m.insert(
            format!("{n}.deadline_miss_fraction"),
            // Aborted jobs ended too, without completing.
            t.deadline_misses as f64 / (t.jobs + t.aborted.unwrap_or(0)).max(1) as f64,
        );
        if let Some(a) = t.aborted {
            m.insert(format!("{n}.aborted"), a as f64);
        }
        m.insert(format!("{n}.preemptions"), t.preemptions as f64);
        if let Some(mp) = &o.multiprocessor {
            m.insert(format!("{n}.migrations"), mp.migrations[i] as f64);
        }
        m.insert(
            format!("{n}.latency_max_us"),
            t.latency.max().0 as f64 / 1e3,
        );
        m.insert(
            format!("{n}.interval_max_us"),
            t.interval.max().0 as f64 / 1e3,
        );
        m.insert(
            format!("{n}.response_max_us"),
            t.response.max().0 as f64 / 1e3,
        );
    }
}

/// The figures of one reserved task's periods.
fn period_summary_keys(p: &PeriodTotals, m: &mut BTreeMap<String, f64>) {
    let n = &p.task;
    let k = p.periods.max(1) as f64;
    m.insert(format!("{n}.periods"), p.periods as f64);
    m.insert(format!("{n}.period_misses"), p.misses as f64);
    m.insert(format!("{n}.period_miss_fraction"), p.misses as f64 / k);
    m.insert(
        format!("{n}.received_mean_us"),
        p.received.0 as f64 / k / 1e3,
    );
    m.insert(
        format!("{n}.requested_mean_us"),
        p.requested.0 as f64 / k / 1e3,
    );
    let run = (p.received.0 + p.stolen.0).max(1) as f64;
    m.insert(format!("{n}.stolen_fraction"), p.stolen.0 as f64 / run);
}

/// Most buckets a simulated series' histogram keeps in the record. An
/// overloaded task's lateness grows without bound and its exact 1 µs
/// histogram with it (an 83 MB record once); past this many buckets the
/// width doubles until it fits, as the HdrHistogram beside it already
/// does. The percentiles, min, mean and max stay exact.
pub const MAX_RECORD_BUCKETS: usize = 2048;

/// The most bytes a simulated record takes as written (`--json`, indented
/// JSON), whatever the scenario. Bounding each series is not enough: a
/// record grows by about 3.6 KB a task, so thousands of tasks passed any
/// fixed figure (147 MB at 100,000 tasks). A record that would be larger
/// is folded ([`SimFolded`]): only the tasks that fared worst keep all
/// their data.
pub const RECORD_BYTES_MAX: usize = 5_000_000;

/// Tasks that keep their own series in a folded record: the worst ones,
/// enough to see how badly the worst fared, few enough that their
/// histograms (up to [`MAX_RECORD_BUCKETS`] each) leave room for many
/// tasks' counts.
pub const DETAILED_TASKS_MAX: usize = 100;

/// Bytes the detailed tasks of a folded record may take at most; the rest
/// of the room goes to other tasks' counts.
const DETAILED_BYTES_MAX: usize = 1_500_000;

/// Past this many bytes the scenario text is kept deflated
/// (`config.scenario_deflated`): the text of 100,000 tasks is 7 MB.
pub const SCENARIO_TEXT_MAX: usize = 512 * 1024;

/// Most bytes of deflated scenario text kept; past it the record keeps
/// only the text's size and hash, with a warning.
pub const SCENARIO_PACKED_MAX: usize = 1_000_000;

/// Words of the warnings the record writer adds; the text report prints
/// these after the run's own.
const BOUNDED: &str = "to bound the record";

/// A series' histogram coarsened to [`MAX_RECORD_BUCKETS`] if it is
/// wider, with the note its warning gives.
fn bounded(mut s: Series) -> (Series, Option<String>) {
    if s.histogram.buckets.len() <= MAX_RECORD_BUCKETS {
        return (s, None);
    }
    let mut w = s.histogram.bucket_ns.max(1);
    let mut h = s.histogram.clone();
    while h.buckets.len() > MAX_RECORD_BUCKETS {
        w = w.saturating_mul(2);
        h = s.histogram.rebucket(w);
    }
    let note = format!("{} ({} ns)", s.name, w);
    s.histogram = h;
    (s, Some(note))
}

/// Bytes `v` takes written indented `depth` levels deep in the record,
/// with the comma and new line after it (serde_json indents by two
/// spaces).
fn pretty_len<T: Serialize>(v: &T, depth: usize) -> usize {
    let s = serde_json::to_string_pretty(v).expect("plain data serializes");
    s.len() + s.matches('\n').count() * 2 * depth + 2 * depth + 2
}

/// Bytes a map entry `"key": value` takes `depth` levels deep.
fn entry_len<T: Serialize>(key: &str, v: &T, depth: usize) -> usize {
    let key = serde_json::to_string(key).expect("a string serializes");
    pretty_len(v, depth) + key.len() + 2
}

/// What a folded record keeps of one task.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Keep {
    /// Its series, `extra.summary` keys, counts and period summary.
    Detail,
    /// Its counts (`extra.sim.tasks`, with its longest response) and
    /// period summary.
    Counts,
    /// Nothing of its own: it is in the totals.
    Totals,
}

/// Per task, what the record keeps, and the section that says so.
struct Fold {
    keep: Vec<Keep>,
    info: SimFolded,
    /// What the record keeps of the other parts.
    parts: Parts,
}

/// Each task's series, bounded, built once whichever way they are used.
struct SeriesCache(Vec<Option<(Vec<Series>, Vec<String>)>>);

impl SeriesCache {
    fn get(&mut self, o: &Outcome, i: usize) -> &(Vec<Series>, Vec<String>) {
        self.0[i].get_or_insert_with(|| {
            let mut notes = Vec::new();
            let series = o.tasks[i]
                .series()
                .into_iter()
                .map(|s| {
                    let (s, n) = bounded(s);
                    notes.extend(n);
                    s
                })
                .collect();
            (series, notes)
        })
    }
}

/// The run as a record (`source: simulated`, `kind: simulate`), under
/// [`RECORD_BYTES_MAX`] as written: whole exactly when the whole record
/// fits, else folded.
///
/// A record is sized only as far as the answer needs: the tasks' series
/// are built (the whole record needs them) and their least size summed,
/// which proves a record too large without assembling it; otherwise the
/// whole record is assembled and [`bound::record_max`], which writes
/// nothing, clears almost every record; only one it cannot clear is
/// written out to be measured.
pub fn to_record(scn: &Scenario, o: &Outcome, overrides: &[(String, String)]) -> Record {
    let mut cache = SeriesCache(vec![None; o.tasks.len()]);
    if !tasks_pass_bound(o, &mut cache) {
        let whole = assemble(scn, o, overrides, &mut cache, &Fold::none(o));
        if bound::record_max(&whole) <= RECORD_BYTES_MAX || written_len(&whole) <= RECORD_BYTES_MAX
        {
            return whole;
        }
    }
    folded_record(scn, o, overrides, &mut cache)
}

/// Why a folded record is still over [`RECORD_BYTES_MAX`], which only
/// names of great length can make so (they are repeated in every spike,
/// period and timeline slice, which are capped by count): `None` when it
/// fits. A whole record from [`to_record`] always fits.
pub fn record_refusal(r: &Record) -> Option<String> {
    let folded = r
        .extra
        .get("sim")
        .is_some_and(|s| s.get("folded").is_some());
    if !folded || bound::record_max(r) <= RECORD_BYTES_MAX {
        return None;
    }
    let len = written_len(r);
    (len > RECORD_BYTES_MAX).then(|| {
        format!(
            "the record would take {len} bytes even folded, over its {RECORD_BYTES_MAX}-byte bound: shorten the scenario's task, stream and noise names"
        )
    })
}

/// Whether the tasks' series alone take more than [`RECORD_BYTES_MAX`]
/// (by [`bound::series_min`]), stopping as soon as they do: a run of
/// 100,000 tasks then builds the series of the first few thousand only.
fn tasks_pass_bound(o: &Outcome, cache: &mut SeriesCache) -> bool {
    let mut least = 0usize;
    for i in 0..o.tasks.len() {
        least += cache
            .get(o, i)
            .0
            .iter()
            .map(bound::series_min)
            .sum::<usize>();
        if least > RECORD_BYTES_MAX {
            return true;
        }
    }
    false
}

/// Counts the bytes written to it, and keeps none.
struct Counter(usize);

impl std::io::Write for Counter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0 += buf.len();
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Bytes `r` takes as written (`Record::to_json_pretty`), without holding
/// the text.
pub(crate) fn written_len(r: &Record) -> usize {
    let mut c = Counter(0);
    serde_json::to_writer_pretty(&mut c, r).expect("record serializes");
    c.0
}

/// The record of a run whose whole record does not fit: tasks folded
/// worst first into the room the rest leaves.
fn folded_record(
    scn: &Scenario,
    o: &Outcome,
    overrides: &[(String, String)],
    cache: &mut SeriesCache,
) -> Record {
    let frame = written_len(&assemble(scn, o, overrides, cache, &all_totals(o)));
    let room = RECORD_BYTES_MAX.saturating_sub(frame);
    let periods: BTreeMap<&str, &PeriodTotals> = o
        .period_totals
        .iter()
        .map(|p| (p.task.as_str(), p))
        .collect();
    let order = fold_order(scn, o);
    let mut budget = room;
    loop {
        let fold = Fold::choose(o, &order, budget, cache, &periods);
        let r = assemble(scn, o, overrides, cache, &fold);
        let len = written_len(&r);
        if len <= RECORD_BYTES_MAX || fold.info.detailed + fold.info.counted == 0 {
            return r;
        }
        // The parts' estimates fell short of the whole (each is measured
        // alone, indented as the record nests it): give back the excess
        // with a margin and choose again.
        budget = budget.saturating_sub((len - RECORD_BYTES_MAX) * 5 / 4 + 1024);
    }
}

/// Bytes task `i`'s own data takes in a whole record.
fn detail_len(
    o: &Outcome,
    i: usize,
    cache: &mut SeriesCache,
    periods: &BTreeMap<&str, &PeriodTotals>,
) -> usize {
    let series: usize = cache.get(o, i).0.iter().map(|s| pretty_len(s, 2)).sum();
    let mut m = BTreeMap::new();
    task_summary(o, i, &mut m);
    if let Some(p) = periods.get(&*o.tasks[i].name) {
        period_summary_keys(p, &mut m);
    }
    let keys: usize = m.iter().map(|(k, v)| entry_len(k, &json!(v), 2)).sum();
    series + keys + counts_len(o, i, Keep::Detail, periods)
}

/// Bytes task `i`'s counts take: its `extra.sim.tasks` entry and its
/// period summary.
fn counts_len(o: &Outcome, i: usize, keep: Keep, periods: &BTreeMap<&str, &PeriodTotals>) -> usize {
    let t = &o.tasks[i];
    let entry = entry_len(&t.name, &sim_task(o, i, keep), 3);
    entry
        + periods
            .get(&*t.name)
            .map_or(0, |p| pretty_len(&period_summary(p), 2))
}

/// A name for the series merged over every task (`<name>.latency`, …)
/// that no task has: `all`, else `all_`, `all__`, ….
fn all_prefix(o: &Outcome) -> String {
    let names: std::collections::HashSet<&str> = o.tasks.iter().map(|t| &*t.name).collect();
    let mut p = "all".to_string();
    while names.contains(p.as_str()) {
        p.push('_');
    }
    p
}

/// The relative deadline each task's jobs were judged by, as the build
/// gives it (explicit, else `buffers − 1` periods, else the period), by
/// name; the record has no place for it, the scenario does.
fn deadlines(scn: &Scenario) -> BTreeMap<&str, Nanos> {
    scn.spec
        .task
        .iter()
        .filter_map(|t| {
            let d = match (t.deadline, t.buffers, t.period) {
                (Some(d), _, _) => d.0,
                (None, Some(n), Some(p)) => Nanos(p.0 .0.saturating_mul(n.max(1) as u64 - 1)),
                (None, _, Some(p)) => p.0,
                _ => return None,
            };
            (!d.is_zero()).then(|| (t.name.get_ref().as_str(), d))
        })
        .collect()
}

/// Task indices, worst first: most jobs missed (deadline misses and
/// releases lost to a full backlog), then the longest response over the
/// deadline (a task without one after those with one), then the name.
fn fold_order(scn: &Scenario, o: &Outcome) -> Vec<usize> {
    let dl = deadlines(scn);
    let key = |i: usize| {
        let t = &o.tasks[i];
        let missed = t.deadline_misses + t.backlog_lost;
        let d = dl.get(&*t.name).copied();
        (missed, t.response.max(), d)
    };
    let mut order: Vec<usize> = (0..o.tasks.len()).collect();
    order.sort_by(|&a, &b| {
        let (ma, ra, da) = key(a);
        let (mb, rb, db) = key(b);
        let late = match (da, db) {
            // ra / da against rb / db, exact in integers.
            (Some(da), Some(db)) => {
                (rb.0 as u128 * da.0 as u128).cmp(&(ra.0 as u128 * db.0 as u128))
            }
            (Some(_), None) => std::cmp::Ordering::Less,
            (None, Some(_)) => std::cmp::Ordering::Greater,
            (None, None) => std::cmp::Ordering::Equal,
        };
        mb.cmp(&ma)
            .then(late)
            .then_with(|| o.tasks[a].name.cmp(&o.tasks[b].name))
    });
    order
}

/// A record with every task in the totals: its size is what a record
/// costs before any task's own data.
fn all_totals(o: &Outcome) -> Fold {
    let parts = Parts::folded(o);
    Fold {
        keep: vec![Keep::Totals; o.tasks.len()],
        info: SimFolded {
            tasks: o.tasks.len() as u64,
            totals_only: o.tasks.len() as u64,
            parts: parts.info.clone(),
            ..Fold::totals(o)
        },
        parts,
    }
}

impl Fold {
    /// Every task whole: the record as it always was.
    fn none(o: &Outcome) -> Fold {
        Fold {
            keep: vec![Keep::Detail; o.tasks.len()],
            info: SimFolded::default(),
            parts: Parts::all(),
        }
    }

    /// The sums over every task and the section's fixed words.
    fn totals(o: &Outcome) -> SimFolded {
        let sum = |f: fn(&TaskStats) -> u64| o.tasks.iter().map(f).sum::<u64>();
        SimFolded {
            bytes_max: RECORD_BYTES_MAX as u64,
            order: "most jobs missed (deadline misses and backlog losses), then longest response over deadline (else period), then name".into(),
            all: all_prefix(o),
            jobs: sum(|t| t.jobs),
            deadline_misses: sum(|t| t.deadline_misses),
            backlog_lost: sum(|t| t.backlog_lost),
            preemptions: sum(|t| t.preemptions),
            ..Default::default()
        }
    }

    /// Fills `budget` bytes in `order`: up to [`DETAILED_TASKS_MAX`]
    /// tasks whole (within [`DETAILED_BYTES_MAX`]), then counts while they
    /// fit; every other task only in the totals.
    fn choose(
        o: &Outcome,
        order: &[usize],
        budget: usize,
        cache: &mut SeriesCache,
        periods: &BTreeMap<&str, &PeriodTotals>,
    ) -> Fold {
        let mut keep = vec![Keep::Totals; o.tasks.len()];
        let mut used = 0usize;
        let detail_budget = DETAILED_BYTES_MAX.min(budget / 2);
        let mut k = 0;
        while k < order.len() && k < DETAILED_TASKS_MAX {
            let n = detail_len(o, order[k], cache, periods);
            if used + n > detail_budget {
                break;
            }
            used += n;
            keep[order[k]] = Keep::Detail;
            k += 1;
        }
        let detailed = k;
        for &i in &order[k..] {
            let n = counts_len(o, i, Keep::Counts, periods);
            if used + n > budget {
                break;
            }
            used += n;
            keep[i] = Keep::Counts;
            k += 1;
        }
        let tasks = o.tasks.len();
        let parts = Parts::folded(o);
        Fold {
            keep,
            info: SimFolded {
                tasks: tasks as u64,
                detailed: detailed as u64,
                counted: (k - detailed) as u64,
                totals_only: (tasks - k) as u64,
                parts: parts.info.clone(),
                ..Fold::totals(o)
            },
            parts,
        }
    }

    /// Whether this is a folded record ([`Fold::none`] is the whole one).
    fn folded(&self) -> bool {
        self.info.bytes_max > 0
    }
}

/// Task `i`'s entry in `extra.sim.tasks`; a task kept without its series
/// adds its longest response.
fn sim_task(o: &Outcome, i: usize, keep: Keep) -> SimTask {
    let t = &o.tasks[i];
    let mut v = SimTask {
        releases: t.releases,
        jobs: t.jobs,
        deadline_misses: t.deadline_misses,
        preemptions: t.preemptions,
        backlog_lost: t.backlog_lost,
        reservation: t.rez_kind.clone(),
        // Only under sim.on_miss = "abort", so other records are unchanged.
        aborted: t.aborted,
        ..Default::default()
    };
    // Only under sim.multiprocessor, so records of pinned tasks are
    // unchanged.
    if let Some(m) = &o.multiprocessor {
        if m.placement.is_some() {
            // Where partitioning put it; a global task has none.
            v.cpu = Some(t.cpu);
        }
        v.migrations = Some(m.migrations[i]);
        v.task_migrations = Some(m.task_migrations[i]);
    }
    if keep == Keep::Counts {
        v.response_max_ns = Some(t.response.max());
    }
    v
}

fn period_summary(p: &PeriodTotals) -> PeriodSummary {
    PeriodSummary {
        task: p.task.clone(),
        periods: p.periods,
        misses: p.misses,
        reserved_ns: p.need,
        received_total_ns: p.received,
        stolen_total_ns: p.stolen,
        requested_total_ns: p.requested,
    }
}

/// One of a task's recorders.
type Pick = fn(&TaskStats) -> &Recorder;

/// The series merged over every task, named `<all>.latency`, … .
fn all_series(o: &Outcome, all: &str) -> Vec<Series> {
    let picks: [(Pick, Metric); 3] = [
        (|t| &t.latency, Metric::Latency),
        (|t| &t.interval, Metric::Interval),
        (|t| &t.response, Metric::Response),
    ];
    let mut out = Vec::new();
    for (pick, metric) in picks {
        let mut tasks = o.tasks.iter();
        let Some(first) = tasks.next() else {
            continue;
        };
        let mut rec = pick(first).clone();
        for t in tasks {
            rec.merge(pick(t));
        }
        if rec.count() == 0 && rec.missed() == 0 {
            continue;
        }
        out.push(rec.to_series(&format!("{all}.{}", metric.as_str()), metric));
    }
    out
}

/// `config.scenario`: the text as it is, deflated past
/// [`SCENARIO_TEXT_MAX`], or past [`SCENARIO_PACKED_MAX`] deflated only
/// its size and hash, with the warning that says so.
fn set_scenario(r: &mut Record, text: &str) -> Option<String> {
    if text.len() <= SCENARIO_TEXT_MAX {
        r.set_config("scenario", text);
        return None;
    }
    r.set_config("scenario_bytes", text.len());
    let packed = punctual_record::sim::pack_text(text);
    if packed.len() <= SCENARIO_PACKED_MAX {
        r.set_config("scenario_deflated", packed);
        return None;
    }
    let hash = punctual_record::sim::fnv1a64(text);
    r.set_config("scenario_fnv1a64", &hash);
    Some(format!(
        "the scenario text ({} bytes, {} deflated in base64) was left out {BOUNDED} under {RECORD_BYTES_MAX} bytes: config.scenario_fnv1a64 = {hash} names it",
        text.len(),
        packed.len()
    ))
}

/// The record with each task kept as `fold` says.
fn assemble(
    scn: &Scenario,
    o: &Outcome,
    overrides: &[(String, String)],
    cache: &mut SeriesCache,
    fold: &Fold,
) -> Record {
    let mut platform = Platform {
        logical_cpus: Some(o.cpus.len() as u32),
        ..Default::default()
    };
    platform.other.insert("machine".into(), "simulated".into());
    platform.other.insert("clock".into(), o.clock.clone());
    let mut r = Record::new(Source::Simulated, "simulate", platform);
    r.started_at = SIMULATED_EPOCH.to_string();
    r.duration_ns = o.ended_at;
    r.interrupted = o.interrupted;
    r.set_config("scenario_file", &scn.file);
    let scenario_dropped = set_scenario(&mut r, &scn.text);
    r.set_config("seed", o.seed);
    r.set_config("duration_ns", o.duration.0);
    if !overrides.is_empty() {
        let v: Vec<String> = overrides.iter().map(|(k, v)| format!("{k}={v}")).collect();
        r.set_config("set", v);
    }
    let mut coarse = Vec::new();
    for i in 0..o.tasks.len() {
        if fold.keep[i] == Keep::Detail {
            let (series, notes) = cache.get(o, i);
            r.series.extend(series.iter().cloned());
            coarse.extend(notes.iter().cloned());
        }
    }
    if fold.folded() {
        for s in all_series(o, &fold.info.all) {
            let (s, note) = bounded(s);
            coarse.extend(note);
            r.series.push(s);
        }
    }
    if !coarse.is_empty() {
        r.warnings.push(Warning::Other {
            message: format!(
                "histograms wider than {MAX_RECORD_BUCKETS} buckets were kept at a coarser bucket {BOUNDED}: {}",
                coarse.join(", ")
            ),
        });
    }
    let dur = o.ended_at;
    for (c, s) in o.cpus.iter().enumerate() {
        if fold.parts.gap_cpus.as_ref().is_some_and(|k| !k[c]) {
            continue;
        }
        if let Some(g) = &s.gaps {
            let mut gs = g.to_series(&format!("cpu{c}.gap"), Metric::Gap);
            gs.cpu = Some(c as u32);
            r.series.push(gs);
        }
    }
    for (c, s) in o.cpus.iter().enumerate() {
        let mine: Vec<_> = o
            .sources
            .iter()
            .filter(|x| x.cpu as usize == c && x.count > 0)
            .collect();
        let by_source = fold.parts.sources(mine);
        r.stolen.push(Stolen {
            cpu: c as u32,
            task: None,
            observed_ns: dur,
            total_ns: s.total,
            fraction: s.total.0 as f64 / dur.0.max(1) as f64,
            intervals: s.intervals,
            max_ns: s.max,
            threshold_ns: Nanos::ZERO,
            loop_cost_ns: None,
            timeline: fold.parts.timeline(&s.timeline),
            by_source,
            kernel_view: None,
        });
    }
    for (at, cpu, task, v) in &o.spikes {
        r.spikes.push(Spike {
            at_ns: *at,
            cpu: *cpu,
            task: Some(o.tasks[*task as usize].name.to_string()),
            metric: Metric::Latency,
            value_ns: *v,
            causes: Vec::new(),
            incomplete: false,
        });
    }
    r.spikes_dropped = o.spikes_dropped;
    for (name, p) in &o.periods {
        r.periods.push(Period {
            task: name.clone(),
            index: p.index,
            start_ns: p.start,
            reserved_ns: p.need,
            requested_ns: p.requested,
            received_ns: p.received,
            stolen_ns: p.stolen,
            hit: p.hit,
        });
    }
    r.periods_dropped = o.periods_dropped;
    let keep_of: BTreeMap<&str, Keep> = o
        .tasks
        .iter()
        .zip(&fold.keep)
        .map(|(t, k)| (&*t.name, *k))
        .collect();
    let kept = |name: &str| keep_of.get(name).copied().unwrap_or(Keep::Detail);
    for p in &o.period_totals {
        if kept(&p.task) != Keep::Totals {
            r.period_summary.push(period_summary(p));
        }
    }
    for w in o.warnings.iter().take(fold.parts.warnings_kept) {
        r.warnings.push(Warning::Other { message: w.clone() });
    }
    if o.interrupted {
        r.warnings.push(Warning::Interrupted {
            completed_ns: o.ended_at.0,
            asked_ns: o.duration.0,
        });
    }
    if let Some(w) = scenario_dropped {
        r.warnings.push(Warning::Other { message: w });
    }
    if fold.folded() {
        r.warnings.push(Warning::Other {
            message: fold_warning(&fold.info),
        });
    }
    sim_sections(&mut r, o, fold);
    if let Some(t) = timeline_json(o) {
        r.extra.insert("timeline".into(), t);
    }
    r
}

/// The warning a folded record carries.
fn fold_warning(f: &SimFolded) -> String {
    let mut w = if f.counted + f.totals_only == 0 {
        format!(
            "the record does not fit whole in its {:.0} MB bound: every task is kept whole ({})",
            f.bytes_max as f64 / 1e6,
            f.tasks
        )
    } else {
        tasks_fold_warning(f)
    };
    if !f.parts.is_empty() {
        let parts: Vec<String> = f
            .parts
            .iter()
            .map(|(k, p)| format!("{k} {} of {} ({})", p.kept, p.total, p.order))
            .collect();
        w.push_str(&format!(
            "; of the other parts it keeps the worst, with their totals in extra.sim.folded.parts: {}",
            parts.join("; ")
        ));
    }
    w
}

/// The words of [`fold_warning`] on the tasks.
fn tasks_fold_warning(f: &SimFolded) -> String {
    format!(
        "{} tasks do not fit whole in the record's {:.0} MB bound: the {} that fared worst keep their series, {} more their counts, and {} are only in the totals ({}.latency, .interval, .response over every task; extra.sim.folded); {BOUNDED}, tasks are ranked by {}",
        f.tasks,
        f.bytes_max as f64 / 1e6,
        f.detailed,
        f.counted,
        f.totals_only,
        f.all,
        f.order
    )
}

/// `extra.sim` and `extra.summary`.
fn sim_sections(r: &mut Record, o: &Outcome, fold: &Fold) {
    let tasks: BTreeMap<String, SimTask> = o
        .tasks
        .iter()
        .enumerate()
        .filter(|(i, _)| fold.keep[*i] != Keep::Totals)
        .map(|(i, t)| (t.name.to_string(), sim_task(o, i, fold.keep[i])))
        .collect();
    let streams: BTreeMap<String, SimStream> = o
        .streams
        .iter()
        .enumerate()
        .filter(|(i, _)| fold.parts.streams.as_ref().is_none_or(|k| k[*i]))
        .map(|(_, s)| {
            (
                s.name.clone(),
                SimStream {
                    arrived: s.arrived,
                    delivered: s.delivered,
                    lost: s.lost,
                    capacity: s.capacity,
                    max_fill: s.max_fill,
                    paused_ns: s.paused_ns,
                },
            )
        })
        .collect();
    // Only when the interrupt-level queue overflowed, so records of runs
    // the CPU could serve are unchanged.
    let interrupt_work_dropped: BTreeMap<String, u64> = o
        .sources
        .iter()
        .enumerate()
        .filter(|(i, x)| x.dropped > 0 && fold.parts.dropped.as_ref().is_none_or(|k| k[*i]))
        .map(|(_, x)| (x.name.to_string(), x.dropped))
        .collect();
    let multiprocessor = o.multiprocessor.as_ref().map(|m| SimMultiprocessor {
        policy: m.policy.to_string(),
        placement: m.placement.map(str::to_string),
        cpus: o.cpus.len() as u32,
        migrations: m.migrations.iter().sum::<u64>(),
        task_migrations: m.task_migrations.iter().sum::<u64>(),
    });
    let constraints: BTreeMap<String, SimConstraint> = o
        .constraints
        .iter()
        .enumerate()
        .filter(|(i, _)| fold.parts.constraints.as_ref().is_none_or(|k| k[*i]))
        .map(|(_, c)| {
            (
                c.name.clone(),
                SimConstraint {
                    asked_at_ns: c.asked_at,
                    window_start_ns: c.window_start,
                    deadline_ns: c.deadline,
                    estimate_ns: c.estimate,
                    granted: c.granted,
                    denied_because: c.denied_because.clone(),
                    received_ns: c.received,
                    completed_at_ns: c.completed_at,
                    met_deadline: c.met_deadline,
                },
            )
        })
        .collect();
    let sim = SimSection {
        events: o.events,
        scheduler_picks: o.picks,
        tasks,
        streams,
        trace_slices_dropped: o.trace_dropped,
        interrupt_work_dropped,
        multiprocessor,
        constraints,
        folded: fold.folded().then(|| fold.info.clone()),
    };
    r.extra.insert(
        "sim".into(),
        serde_json::to_value(&sim).expect("plain data serializes"),
    );
    let mut m = BTreeMap::new();
    for i in 0..o.tasks.len() {
        if fold.keep[i] == Keep::Detail {
            task_summary(o, i, &mut m);
        }
    }
    let detailed: std::collections::HashSet<&str> = o
        .tasks
        .iter()
        .zip(&fold.keep)
        .filter(|(_, k)| **k == Keep::Detail)
        .map(|(t, _)| &*t.name)
        .collect();
    for p in &o.period_totals {
        // A reservation whose task the scenario does not name stays.
        if detailed.contains(p.task.as_str()) || !o.tasks.iter().any(|t| *t.name == *p.task) {
            period_summary_keys(p, &mut m);
        }
    }
    run_summary(o, fold.parts.streams.as_deref(), &mut m);
    if fold.folded() {
        let f = &fold.info;
        let a = &f.all;
        for (k, v) in [
            ("tasks", f.tasks),
            ("tasks_folded", f.counted + f.totals_only),
            ("jobs", f.jobs),
            ("deadline_misses", f.deadline_misses),
            ("preemptions", f.preemptions),
        ] {
            m.insert(format!("{a}.{k}"), v as f64);
        }
    }
    let sum: BTreeMap<String, Value> = m.into_iter().map(|(k, v)| (k, json!(v))).collect();
    r.extra.insert("summary".into(), json!(sum));
}

/// Chrome trace-event JSON (opens in ui.perfetto.dev): one process per
/// CPU, one track per thread, interrupts and DPCs on their own track.
pub fn trace_json(o: &Outcome) -> String {
    let mut ev: Vec<Value> = Vec::new();
    for c in 0..o.cpus.len() {
        ev.push(json!({"name":"process_name","ph":"M","pid":c,"tid":0,"args":{"name":format!("cpu{c}")}}));
        ev.push(json!({"name":"thread_name","ph":"M","pid":c,"tid":0,"args":{"name":"interrupts+DPCs (stolen)"}}));
    }
    for (i, t) in o.tasks.iter().enumerate() {
        ev.push(
            json!({"name":"thread_name","ph":"M","pid":t.cpu,"tid":i + 1,"args":{"name":&*t.name}}),
        );
    }
    for s in &o.trace {
        ev.push(json!({
            "name": s.name,
            "cat": if s.track == 0 { "stolen" } else { "thread" },
            "ph": "X",
            "pid": s.cpu,
            "tid": s.track,
            "ts": s.start.0 as f64 / 1e3,
            "dur": s.dur.0 as f64 / 1e3,
        }));
    }
    let doc = json!({
        "traceEvents": ev,
        "displayTimeUnit": "ns",
        "otherData": {
            "producer": "punctual simulate",
            "seed": o.seed,
            "slices_dropped": o.trace_dropped,
        }
    });
    serde_json::to_string(&doc).expect("trace serializes")
}

/// `extra.timeline`: the bounded slice log of the start of the run, so the
/// HTML report can draw who ran when and where time was stolen without a
/// separate trace file. `None` when the window is zero.
fn timeline_json(o: &Outcome) -> Option<Value> {
    let t = &o.timeline;
    if t.window.is_zero() {
        return None;
    }
    let end = t.window.min(o.ended_at);
    let slices: Vec<Value> = t
        .slices
        .iter()
        .map(|s| {
            json!({
                "cpu": s.cpu,
                "track": &*s.track,
                "kind": s.kind,
                "name": &*s.name,
                "start_ns": s.start.0,
                "len_ns": s.len.0,
            })
        })
        .collect();
    Some(json!({
        "window_ns": [0u64, end.0],
        "slices": slices,
        "dropped": t.dropped,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::outcome::RunOptions;

    #[test]
    fn an_overloaded_task_keeps_a_bounded_histogram() {
        // Up to 5 ms of work every 2 ms for 60 s: lateness grows to the
        // backlog bound, one 1 µs bucket per distinct latency.
        let text = "[sim]\nduration = \"60s\"\n[[task]]\nname = \"a\"\nkind = \"periodic\"\nperiod = \"2ms\"\nexec = { uniform = [\"1ms\", \"5ms\"] }\npriority = 5\n";
        let scn = Scenario::parse("over.toml", text, &[]).unwrap();
        let out = crate::run(&scn, &RunOptions::default(), None).unwrap();
        let exact = out.tasks[0].latency.to_series("a.latency", Metric::Latency);
        assert!(
            exact.histogram.buckets.len() > MAX_RECORD_BUCKETS,
            "{}",
            exact.histogram.buckets.len()
        );
        let r = to_record(&scn, &out, &[]);
        let s = r.series.iter().find(|s| s.name == "a.latency").unwrap();
        assert!(s.histogram.buckets.len() <= MAX_RECORD_BUCKETS);
        assert!(s.histogram.bucket_ns > 1000);
        assert_eq!(s.histogram.total(), exact.histogram.total());
        assert_eq!(s.percentiles, exact.percentiles);
        assert!(r
            .warnings
            .iter()
            .any(|w| format!("{w:?}").contains("a.latency")));
        let bytes = r.to_json_pretty().len();
        assert!(bytes < 5_000_000, "{bytes}");
    }

    /// `n` periodic tasks on one CPU, overloaded: at 10 µs a job every
    /// 2–51 ms, 100,000 tasks ask for about 8 CPUs.
    fn many_tasks(n: usize, duration: &str) -> Scenario {
        Scenario::parse("many.toml", &many_tasks_text(n, duration), &[]).unwrap()
    }

    fn many_tasks_text(n: usize, duration: &str) -> String {
        let mut text = format!("[sim]\nduration = \"{duration}\"\n");
        for i in 0..n {
            text.push_str(&format!(
                "[[task]]\nname = \"t{i}\"\nkind = \"periodic\"\npriority = {}\nperiod = \"{}ms\"\nexec = \"10us\"\n",
                1 + i % 31,
                2 + i % 50
            ));
        }
        text
    }

    /// The record of [`many_tasks`] over 500 ms with a comment of `pad` bytes, which
    /// the record's `config.scenario` keeps (`pad` + 3 bytes written) and
    /// the run ignores.
    fn padded(n: usize, pad: usize) -> Record {
        let text = format!("{}#{}\n", many_tasks_text(n, "500ms"), "x".repeat(pad));
        let scn = Scenario::parse("many.toml", &text, &[]).unwrap();
        let out = crate::run(&scn, &RunOptions::default(), None).unwrap();
        to_record(&scn, &out, &[])
    }

    #[test]
    fn a_record_is_whole_exactly_when_it_fits() {
        // A task count whose whole record is a little under the bound.
        let (mut n, mut short) = (300, 0);
        for _ in 0..10 {
            let r = padded(n, 0);
            assert!(r.sim().unwrap().folded.is_none(), "{n}");
            let len = r.to_json_pretty().len();
            short = RECORD_BYTES_MAX - len;
            if (1..250_000).contains(&short) {
                break;
            }
            n += (short - 100_000) / (len / n);
        }
        // Within the text kept as it is (SCENARIO_TEXT_MAX), pad included.
        assert!((1..250_000).contains(&short), "{n}: {short}");
        // Padded to the bound exactly: whole (the rule before folded it,
        // as the tasks' data passed the room left beside the totals).
        let at = padded(n, short);
        assert_eq!(at.to_json_pretty().len(), RECORD_BYTES_MAX);
        assert!(at.sim().unwrap().folded.is_none());
        assert_eq!(at.sim().unwrap().tasks.len(), n);
        // One byte more: folded, under the bound.
        let over = padded(n, short + 1);
        let f = over.sim().unwrap().folded.clone().expect("folded");
        assert_eq!(f.tasks, n as u64);
        assert!(over.to_json_pretty().len() <= RECORD_BYTES_MAX);
    }

    #[test]
    fn a_hundred_thousand_tasks_fold_under_the_bound() {
        let scn = many_tasks(100_000, "20ms");
        let out = crate::run(&scn, &RunOptions::default(), None).unwrap();
        let r = to_record(&scn, &out, &[]);
        let text = r.to_json_pretty();
        assert!(text.len() <= RECORD_BYTES_MAX, "{}", text.len());
        let back = Record::from_json(&text).unwrap();
        let sim = back.sim().unwrap();
        let f = sim.folded.as_ref().expect("folded");
        assert_eq!(f.tasks, 100_000);
        assert_eq!(f.detailed + f.counted + f.totals_only, 100_000);
        assert_eq!(f.detailed, DETAILED_TASKS_MAX as u64);
        assert!(f.counted > 1000, "{f:?}");
        assert_eq!(sim.tasks.len() as u64, f.detailed + f.counted);
        // The totals are every task's, whatever was kept.
        let jobs: u64 = out.tasks.iter().map(|t| t.jobs).sum();
        let misses: u64 = out.tasks.iter().map(|t| t.deadline_misses).sum();
        assert!(misses > 0);
        assert_eq!((f.jobs, f.deadline_misses), (jobs, misses));
        let all = back.series_named("all.latency").unwrap();
        let started: u64 = out.tasks.iter().map(|t| t.latency.count()).sum();
        assert_eq!(all.count, started);
        // Every task that missed more than any task left out is kept.
        let worst_out = out
            .tasks
            .iter()
            .filter(|t| !sim.tasks.contains_key(&*t.name))
            .map(|t| t.deadline_misses)
            .max()
            .unwrap();
        for t in &out.tasks {
            if t.deadline_misses > worst_out {
                assert!(sim.tasks.contains_key(&*t.name), "{}", t.name);
            }
        }
        // The scenario text (about 8 MB) is kept deflated and reads back.
        assert!(!back.config.contains_key("scenario"));
        let kept = punctual_record::sim::scenario_text(&back.config).unwrap();
        assert_eq!(kept, scn.text);
        assert!(back
            .warnings
            .iter()
            .any(|w| format!("{w:?}").contains("only in the totals")));
    }

    #[test]
    fn a_record_that_fits_is_not_folded() {
        let scn = many_tasks(300, "20ms");
        let out = crate::run(&scn, &RunOptions::default(), None).unwrap();
        let r = to_record(&scn, &out, &[]);
        assert!(r.sim().unwrap().folded.is_none());
        assert_eq!(r.sim().unwrap().tasks.len(), 300);
        assert_eq!(r.config["scenario"].as_str(), Some(scn.text.as_str()));
        assert!(r.series_named("all.latency").is_none());
    }

    #[test]
    fn tasks_fold_worst_first_misses_then_lateness_then_name() {
        // On cpu 0 in priority order: zz (1 of 10 ms), bb (2 ms into its
        // 4 ms deadline: 0.5), aa (3 of 10 ms: 0.3), late (8 ms of work in
        // the 7 ms left: it misses). x and y are alone on cpus 1 and 2 at
        // zz's 0.1, and tie with it: by name.
        let task = |name: &str, cpu: u32, prio: u8, exec: &str, extra: &str| {
            format!("[[task]]\nname = \"{name}\"\nkind = \"periodic\"\ncpu = {cpu}\npriority = {prio}\nperiod = \"10ms\"\nexec = \"{exec}\"\n{extra}")
        };
        let text = [
            "[sim]\nduration = \"1s\"\ncpus = 3\n".to_string(),
            task("zz", 0, 9, "1ms", ""),
            task("bb", 0, 8, "1ms", "deadline = \"4ms\"\n"),
            task("aa", 0, 7, "1ms", ""),
            task("late", 0, 1, "8ms", ""),
            task("y", 1, 5, "1ms", ""),
            task("x", 2, 5, "1ms", ""),
        ]
        .concat();
        let scn = Scenario::parse("order.toml", &text, &[]).unwrap();
        let out = crate::run(&scn, &RunOptions::default(), None).unwrap();
        let names: Vec<&str> = fold_order(&scn, &out)
            .into_iter()
            .map(|i| &*out.tasks[i].name)
            .collect();
        assert_eq!(names, ["late", "bb", "aa", "x", "y", "zz"]);
        assert!(out.tasks[3].deadline_misses > 0);
    }
}
