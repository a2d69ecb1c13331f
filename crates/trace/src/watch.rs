//! Watching an application's own threads from the scheduler's events: no
//! change to the application, no probe of ours in its place.
//!
//! The reader keeps, for the watched thread ids only, the three events
//! that say what a thread is doing: its wake-up (`sched_waking`, filtered
//! to those ids in the kernel), its switch-in and its switch-out (with
//! whether it left runnable). After the run they are put in time order
//! (each CPU's ring is in order, the CPUs between them are not) and turned
//! into activations: wake → first run → … → block. The latency of a
//! wake-up is switch-in minus wake-up; what filled it, and what took time
//! from the thread while it ran or waited runnable, is the same
//! [`Trace::split`] that `cause` uses for a probe's windows.

use std::collections::BTreeMap;

use punctual_record::watch::{Deadlines, PeriodFit, StopEvent, WatchSummary, WatchedThread};
use punctual_record::{
    Metric, Nanos, Record, Recorder, SourceShare, Spike, Stolen, Warning, DEFAULT_BUCKET_NS,
};

use crate::recorder::Trace;
pub use crate::watchlog::{StopAt, ThreadEvent, WatchLog, What, MAX_EVENTS};

/// A stretch of one activation on one CPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Piece {
    pub cpu: u32,
    pub start: u64,
    pub end: u64,
    /// Running (else waiting runnable).
    pub running: bool,
}

/// One wake → block cycle of a thread.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Activation {
    /// Its wake-up (none for the cycle the trace began inside).
    pub wake: Option<u64>,
    /// The CPU its wake-up ran on (the waker's).
    pub wake_cpu: Option<u32>,
    /// Its first switch-in and CPU.
    pub run: Option<(u64, u32)>,
    /// `run` is the return of its blocking system call, the kernel having
    /// traced no switch-in (it left an idle CPU).
    pub run_by_own_event: bool,
    /// It blocked again with neither a switch-in nor a call's return
    /// seen: it ran, but when it started is not known.
    pub untimed: bool,
    /// When it blocked (none for the cycle the trace ended inside).
    pub end: Option<u64>,
    pub pieces: Vec<Piece>,
}

impl Activation {
    /// Switch-in minus wake-up.
    pub fn latency(&self) -> Option<u64> {
        let (w, (r, _)) = (self.wake?, self.run?);
        r.checked_sub(w)
    }
}

#[derive(Clone, Copy, Debug)]
enum State {
    Unknown,
    Sleeping,
    Woken,
    Running { since: u64, cpu: u32 },
    Preempted { since: u64 },
}

/// One thread's events (in time order) as activations.
pub fn activations(events: &[ThreadEvent]) -> Vec<Activation> {
    let mut out = Vec::new();
    let mut st = State::Unknown;
    let mut cur: Option<Activation> = None;
    for e in events {
        match (e.what, st) {
            (What::Waking, State::Unknown | State::Sleeping) => {
                if let Some(a) = cur.take() {
                    out.push(a);
                }
                cur = Some(Activation {
                    wake: Some(e.ts),
                    wake_cpu: Some(e.cpu),
                    ..Default::default()
                });
                st = State::Woken;
            }
            // Woken again while awake: the wake-up found it still on its
            // way to sleep, and it stays awake.
            (What::Waking, _) => {}
            // Its own event while it runs says nothing new.
            (What::Own, State::Running { .. }) => {}
            (What::In | What::Own, s) => {
                let a = cur.get_or_insert_with(Activation::default);
                let from = match s {
                    State::Woken => a.wake,
                    State::Preempted { since } => Some(since),
                    _ => None,
                };
                if let Some(from) = from {
                    a.pieces.push(Piece {
                        cpu: e.cpu,
                        start: from,
                        end: e.ts.max(from),
                        running: false,
                    });
                }
                if a.run.is_none() && a.wake.is_some() {
                    a.run = Some((e.ts, e.cpu));
                    a.run_by_own_event = e.what == What::Own;
                }
                st = State::Running {
                    since: e.ts,
                    cpu: e.cpu,
                };
            }
            (What::Out { runnable }, s) => {
                let a = cur.get_or_insert_with(Activation::default);
                if let State::Running { since, cpu } = s {
                    a.pieces.push(Piece {
                        cpu,
                        start: since,
                        end: e.ts.max(since),
                        running: true,
                    });
                }
                if matches!(s, State::Woken) {
                    a.untimed = true;
                }
                if runnable {
                    st = State::Preempted { since: e.ts };
                } else {
                    a.end = Some(e.ts);
                    out.extend(cur.take());
                    st = State::Sleeping;
                }
            }
        }
    }
    out.extend(cur);
    out
}

/// Wake-ups one period apart (±25 %) among those needed to call a thread
/// periodic.
pub const REGULAR_FRACTION: f64 = 0.6;

/// The period of a thread's wake-ups (in time order), when most are one
/// period apart: the median spacing, refined by a least-squares line
/// through (release index, wake-up time), so a period of 1 ms over a
/// minute is known to well under a nanosecond and the releases do not
/// drift away from the wake-ups.
pub fn detect_period(wakes: &[u64]) -> Option<(Nanos, f64)> {
    if wakes.len() < 9 {
        return None;
    }
    let mut d: Vec<u64> = wakes
        .windows(2)
        .map(|w| w[1].saturating_sub(w[0]))
        .collect();
    d.sort_unstable();
    let median = d[d.len() / 2];
    if median == 0 {
        return None;
    }
    let (lo, hi) = (median as f64 * 0.75, median as f64 * 1.25);
    let regular = d
        .iter()
        .filter(|&&x| (x as f64) >= lo && (x as f64) <= hi)
        .count() as f64
        / d.len() as f64;
    if regular < REGULAR_FRACTION {
        return None;
    }
    // The median spacing can be off by the latencies' jitter; fitted over
    // 16 periods, then 4 times as many each round, the period is always
    // known well enough for the next round's release indices to round
    // right.
    let mut p = median as f64;
    let mut span = 16.0;
    loop {
        let n = wakes.partition_point(|&w| ((w - wakes[0]) as f64) < span * p);
        p = fit_slope(&wakes[..n.max(2)], p);
        if n >= wakes.len() {
            break;
        }
        span *= 4.0;
    }
    p = fit_slope(wakes, p);
    // Once more without the wake-ups far off the line (one late by more
    // than a quarter period, a stray one): least squares weighs them most.
    let w0 = wakes[0];
    let off: Vec<f64> = wakes
        .iter()
        .map(|&w| {
            let t = (w - w0) as f64;
            t - (t / p).round() * p
        })
        .collect();
    let mut sorted = off.clone();
    sorted.sort_by(|a, b| a.total_cmp(b));
    let median = sorted[sorted.len() / 2];
    let kept: Vec<u64> = wakes
        .iter()
        .zip(&off)
        .filter(|(_, &o)| (o - median).abs() <= p / 4.0)
        .map(|(&w, _)| w)
        .collect();
    if kept.len() >= 9 {
        p = fit_slope(&kept, p);
    }
    (p >= 1.0).then(|| (Nanos(p.round() as u64), regular))
}

/// Least-squares slope of wake-up time on release index (index = the
/// number of periods `p` from the first wake-up, rounded).
fn fit_slope(wakes: &[u64], p: f64) -> f64 {
    let w0 = wakes[0];
    let pts: Vec<(f64, f64)> = wakes
        .iter()
        .map(|&w| {
            let t = (w - w0) as f64;
            ((t / p).round(), t)
        })
        .collect();
    let n = pts.len() as f64;
    let (mk, mt) = pts
        .iter()
        .fold((0.0, 0.0), |a, &(k, t)| (a.0 + k / n, a.1 + t / n));
    let (mut cov, mut var) = (0.0, 0.0);
    for &(k, t) in &pts {
        cov += (k - mk) * (t - mt);
        var += (k - mk) * (k - mk);
    }
    if var > 0.0 {
        cov / var
    } else {
        p
    }
}

/// The first release: the lower envelope of the wake-ups on a grid of
/// period `p` (a wake-up is never earlier than its release).
///
/// Each wake-up's offset on the grid is taken around the median offset
/// (where most wake-ups are), within half a period; the envelope is the
/// earliest offset no more than a quarter period before the median. A
/// wake-up later than half a period wraps round to look early by the rest
/// of the period, and an extra wake-up (a signal) can fall anywhere: a
/// plain minimum put the releases hundreds of microseconds early for
/// one such wake-up.
pub fn first_release(wakes: &[u64], p: Nanos) -> u64 {
    let w0 = wakes[0];
    let p = p.0.max(1) as f64;
    let wrap = |x: f64| x - (x / p).round() * p;
    let mut off: Vec<f64> = wakes.iter().map(|&w| wrap((w - w0) as f64)).collect();
    off.sort_by(|a, b| a.total_cmp(b));
    let median = off[off.len() / 2];
    let earliest = off
        .iter()
        .map(|&o| wrap(o - median))
        .filter(|&d| d >= -p / 4.0)
        .fold(0.0f64, f64::min);
    (w0 as f64 + median + earliest).round().max(0.0) as u64
}

/// Deadline misses of `acts` under releases every `p` from `release0`
/// (implicit deadline: the next release). An activation belongs to the
/// last release at or before its wake-up.
pub fn deadlines(acts: &[Activation], release0: u64, p: Nanos) -> Deadlines {
    let p = p.0.max(1);
    let mut out = Deadlines {
        deadline_ns: Nanos(p),
        ..Default::default()
    };
    let mut seen = std::collections::BTreeSet::new();
    let mut to_run = Vec::new();
    for a in acts {
        let Some(w) = a.wake else { continue };
        let k = w.saturating_sub(release0) / p;
        seen.insert(k);
        if let Some((r, _)) = a.run {
            to_run.push(r.saturating_sub(release0 + k * p));
        }
        if let Some(end) = a.end {
            let release = release0 + k * p;
            let response = end.saturating_sub(release);
            out.worst_response_ns = out.worst_response_ns.max(Nanos(response));
            if response > p {
                out.late += 1;
            }
        }
    }
    if let (Some(&first), Some(&last)) = (seen.first(), seen.last()) {
        out.releases = last - first + 1;
        out.skipped = out.releases - seen.len() as u64;
    }
    to_run.sort_unstable();
    let q = |f: f64| -> Nanos {
        let i = ((to_run.len() as f64 * f).ceil() as usize).clamp(1, to_run.len().max(1)) - 1;
        Nanos(to_run.get(i).copied().unwrap_or(0))
    };
    out.release_to_run_p50_ns = q(0.5);
    out.release_to_run_p99_ns = q(0.99);
    out.release_to_run_max_ns = Nanos(to_run.last().copied().unwrap_or(0));
    out
}

/// What the watch asked for, beside the trace.
#[derive(Clone, Debug, Default)]
pub struct WatchSpec {
    pub pid: i32,
    pub command: String,
    /// (tid, name when the run began).
    pub threads: Vec<(i32, String)>,
    /// `--period`: the period to judge deadlines by.
    pub period: Option<Nanos>,
    /// Slowest wake-ups kept per thread in the spike log, broken down.
    pub max_spikes: usize,
    /// CLOCK_MONOTONIC of the record's time zero.
    pub origin: u64,
    pub stop_at: Option<Nanos>,
}

/// Slowest wake-ups whose causes make a thread's top offenders: 1 % of
/// them, at least 10 (or all, when fewer).
pub fn slowest_count(wakeups: usize) -> usize {
    (wakeups / 100).max(10).min(wakeups)
}

fn merge_share(into: &mut BTreeMap<(String, String), SourceShare>, s: &SourceShare) {
    let e = into
        .entry((s.kind.clone(), s.name.clone()))
        .or_insert_with(|| SourceShare {
            kind: s.kind.clone(),
            name: s.name.clone(),
            ..Default::default()
        });
    e.count += s.count;
    e.total_ns += s.total_ns;
    e.max_ns = e.max_ns.max(s.max_ns);
}

fn ranked(m: BTreeMap<(String, String), SourceShare>, denom: u64) -> Vec<SourceShare> {
    let mut v: Vec<SourceShare> = m
        .into_values()
        .map(|mut s| {
            s.share = s.total_ns.0 as f64 / denom.max(1) as f64;
            s
        })
        .collect();
    v.sort_by(|a, b| b.total_ns.cmp(&a.total_ns).then(a.name.cmp(&b.name)));
    v
}

impl Trace {
    /// Turns the watched threads' events into the record: a latency
    /// series, a `stolen[]` entry and the slowest wake-ups (broken down)
    /// per thread, and `extra["watch"]`.
    pub fn fill_watch(&self, rec: &mut Record, spec: &WatchSpec) -> WatchSummary {
        let empty = WatchLog::default();
        let log = self.watch.as_ref().unwrap_or(&empty);
        let mut by_tid: BTreeMap<i32, Vec<ThreadEvent>> = BTreeMap::new();
        for e in &log.events {
            by_tid.entry(e.tid).or_default().push(*e);
        }
        let mut sum = WatchSummary {
            pid: spec.pid,
            command: spec.command.clone(),
            wake_event: if log.use_wakeup {
                "sched_wakeup"
            } else {
                "sched_waking"
            }
            .into(),
            events_dropped: log.dropped,
            ..Default::default()
        };
        let observed = self.stopped_ns.saturating_sub(spec.origin);
        let rank = |w: &What| match w {
            What::Waking => 0,
            What::Out { .. } => 1,
            What::In => 2,
            What::Own => 3,
        };
        for (tid, start_name) in &spec.threads {
            let mut evs = by_tid.remove(tid).unwrap_or_default();
            evs.sort_by_key(|e| (e.ts, rank(&e.what)));
            let name = log
                .names
                .get(tid)
                .cloned()
                .unwrap_or_else(|| start_name.clone());
            let label = format!("{name}-{tid}");
            let acts = activations(&evs);
            let t = self.watch_thread(rec, spec, *tid, &label, &acts, observed);
            sum.threads.push(WatchedThread { name, ..t });
        }
        if let Some((tid, cpu, run, lat)) = log.tripped {
            let w = self.split_woken(cpu, run.saturating_sub(lat), run, &[tid], None);
            sum.stopped_at = Some(StopEvent {
                tid,
                cpu,
                at_ns: Nanos(run.saturating_sub(spec.origin)),
                latency_ns: Nanos(lat),
                threshold_ns: spec.stop_at.unwrap_or(Nanos::ZERO),
                causes: w.to_shares(),
                stack: None,
            });
        }
        for (&cpu, &lost) in &self.lost {
            if lost > 0 {
                rec.warnings.push(Warning::TraceEventsLost { cpu, lost });
            }
        }
        if log.dropped > 0 {
            rec.warnings.push(Warning::Other {
                message: format!(
                    "{} scheduler events of the watched threads were not kept (more than {} in the run)",
                    log.dropped, MAX_EVENTS
                ),
            });
        }
        rec.spikes.sort_by_key(|s| (s.at_ns, s.cpu));
        rec.set_watch(&sum);
        sum
    }

    fn watch_thread(
        &self,
        rec: &mut Record,
        spec: &WatchSpec,
        tid: i32,
        label: &str,
        acts: &[Activation],
        observed: u64,
    ) -> WatchedThread {
        let wakes: Vec<u64> = acts.iter().filter_map(|a| a.wake).collect();
        let period = match spec.period {
            Some(p) => Some((p, true, detect_period(&wakes).map_or(0.0, |d| d.1))),
            None => detect_period(&wakes).map(|(p, r)| (p, false, r)),
        };
        let fit = period
            .filter(|_| !wakes.is_empty())
            .map(|(p, stated, r)| PeriodFit {
                period_ns: p,
                stated,
                regular_fraction: r,
                first_release_mono_ns: Nanos(first_release(&wakes, p)),
            });
        let dl = fit
            .as_ref()
            .map(|f| deadlines(acts, f.first_release_mono_ns.0, f.period_ns));
        // Where it ran, most first.
        let mut per_cpu: BTreeMap<u32, u64> = BTreeMap::new();
        for p in acts.iter().flat_map(|a| a.pieces.iter()) {
            if p.running {
                *per_cpu.entry(p.cpu).or_default() += p.end - p.start;
            }
        }
        let mut cpus: Vec<(u32, u64)> = per_cpu.into_iter().collect();
        cpus.sort_by_key(|&(c, t)| (std::cmp::Reverse(t), c));
        let main_cpu = cpus.first().map(|c| c.0).unwrap_or(0);
        // Latency series.
        let mut h = Recorder::new(Nanos(DEFAULT_BUCKET_NS));
        if let Some(f) = &fit {
            h = h.with_sample_period(f.period_ns);
        }
        let mut lat: Vec<(u64, &Activation)> = Vec::new();
        for a in acts {
            if let Some(l) = a.latency() {
                h.record(Nanos(l));
                lat.push((l, a));
            }
        }
        if let Some(d) = &dl {
            h.add_missed(d.skipped);
        }
        let series = if lat.is_empty() {
            String::new()
        } else {
            let name = format!("{label}.latency");
            let mut s = h.to_series(&name, Metric::Latency);
            s.cpu = Some(main_cpu);
            s.task = Some(label.to_string());
            s.observed_ns = Some(Nanos(observed));
            rec.series.push(s);
            name
        };
        // The slowest wake-ups: the spike log, and the top offenders.
        lat.sort_by_key(|&(l, a)| (std::cmp::Reverse(l), a.wake));
        let slowest = slowest_count(lat.len());
        let keep = spec.max_spikes.max(slowest).min(lat.len());
        let mut offenders = BTreeMap::new();
        let mut slowest_total = 0u64;
        for (i, &(l, a)) in lat.iter().take(keep).enumerate() {
            let (run, cpu) = a.run.expect("a latency has a switch-in");
            let woken = a.wake.zip(a.wake_cpu);
            let w = self.split_woken(cpu, run - l, run, &[tid], woken);
            let causes = w.to_shares();
            if i < slowest {
                slowest_total += l;
                for c in &causes {
                    merge_share(&mut offenders, c);
                }
            }
            if i < spec.max_spikes {
                rec.spikes.push(Spike {
                    at_ns: Nanos(run.saturating_sub(spec.origin)),
                    cpu,
                    task: Some(label.to_string()),
                    metric: Metric::Latency,
                    value_ns: Nanos(l),
                    causes,
                    incomplete: w.incomplete,
                });
            }
        }
        // Where its time went: every piece of every activation.
        let (mut ran, mut runnable, mut st_run, mut st_wait) = (0u64, 0u64, 0u64, 0u64);
        let (mut intervals, mut max_piece) = (0u64, 0u64);
        let mut by_source = BTreeMap::new();
        let mut idle = (0u64, 0u64);
        let mut no_event = (0u64, 0u64);
        let mut wake_path: BTreeMap<String, (u64, u64, u64)> = BTreeMap::new();
        for (a, p) in acts
            .iter()
            .flat_map(|a| a.pieces.iter().map(move |p| (a, p)))
        {
            let woken = a.wake.zip(a.wake_cpu).filter(|w| w.0 == p.start);
            let w = self.split_woken(p.cpu, p.start, p.end, &[tid], woken);
            if w.wake_path_ns > 0 {
                let e = wake_path
                    .entry(w.wake_path_via.clone().unwrap_or_default())
                    .or_default();
                *e = (e.0 + 1, e.1 + w.wake_path_ns, e.2.max(w.wake_path_ns));
            }
            let named = w.named_ns();
            let stolen = if p.running {
                ran += p.end - p.start;
                st_run += named;
                named
            } else {
                runnable += p.end - p.start;
                let s = named + w.idle_ns + w.unexplained_ns + w.wake_path_ns;
                st_wait += s;
                if w.idle_ns > 0 {
                    idle = (idle.0 + 1, idle.1 + w.idle_ns);
                }
                if w.unexplained_ns > 0 {
                    no_event = (no_event.0 + 1, no_event.1 + w.unexplained_ns);
                }
                s
            };
            if stolen > 0 {
                intervals += 1;
                max_piece = max_piece.max(stolen);
            }
            for s in &w.sources {
                merge_share(
                    &mut by_source,
                    &SourceShare {
                        kind: s.kind.clone(),
                        name: s.name.clone(),
                        count: s.count,
                        total_ns: Nanos(s.total_ns),
                        max_ns: Nanos(s.max_ns),
                        share: 0.0,
                    },
                );
            }
        }
        for (name, (n, ns)) in [("cpu idle", idle), ("no guest event", no_event)] {
            if ns > 0 {
                merge_share(
                    &mut by_source,
                    &SourceShare {
                        kind: "unexplained".into(),
                        name: name.into(),
                        count: n,
                        total_ns: Nanos(ns),
                        max_ns: Nanos::ZERO,
                        share: 0.0,
                    },
                );
            }
        }
        for (via, (n, ns, max)) in wake_path {
            merge_share(
                &mut by_source,
                &SourceShare {
                    kind: crate::attribute::WAKE_PATH_KIND.into(),
                    name: format!("wake-up path ({via})"),
                    count: n,
                    total_ns: Nanos(ns),
                    max_ns: Nanos(max),
                    share: 0.0,
                },
            );
        }
        let total = st_run + st_wait;
        if !acts.is_empty() {
            rec.stolen.push(Stolen {
                cpu: main_cpu,
                task: Some(label.to_string()),
                observed_ns: Nanos(observed),
                total_ns: Nanos(total),
                fraction: total as f64 / observed.max(1) as f64,
                intervals,
                max_ns: Nanos(max_piece),
                by_source: ranked(by_source, total),
                kernel_view: self.kernel.get(&main_cpu).cloned(),
                ..Default::default()
            });
        }
        WatchedThread {
            tid,
            name: String::new(),
            timed_by_own_event: lat.iter().filter(|x| x.1.run_by_own_event).count() as u64,
            untimed: acts.iter().filter(|a| a.untimed).count() as u64,
            series,
            cpus: cpus.iter().map(|c| c.0).collect(),
            wakeups: lat.len() as u64,
            activations: acts
                .iter()
                .filter(|a| a.wake.is_some() && a.end.is_some())
                .count() as u64,
            ran_ns: Nanos(ran),
            runnable_ns: Nanos(runnable),
            stolen_running_ns: Nanos(st_run),
            stolen_runnable_ns: Nanos(st_wait),
            period: fit,
            deadlines: dl,
            slowest: slowest as u64,
            slowest_from_ns: Nanos(lat.get(slowest.saturating_sub(1)).map_or(0, |x| x.0)),
            offenders: ranked(offenders, slowest_total),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(ts: u64, cpu: u32, what: What) -> ThreadEvent {
        ThreadEvent {
            ts,
            tid: 7,
            cpu,
            what,
        }
    }

    #[test]
    fn activations_follow_wake_run_preempt_block() {
        let evs = [
            // The trace begins while it runs.
            ev(50, 1, What::Out { runnable: false }),
            ev(100, 0, What::Waking),
            ev(130, 1, What::In),
            ev(200, 1, What::Out { runnable: true }),
            ev(260, 1, What::In),
            ev(300, 1, What::Out { runnable: false }),
            ev(1100, 0, What::Waking),
            // A second wake-up while awake changes nothing.
            ev(1105, 0, What::Waking),
            ev(1110, 1, What::In),
            ev(1120, 1, What::Own),
            ev(1150, 1, What::Out { runnable: false }),
            // Woken on an idle CPU: no switch-in traced, its call returns.
            ev(2000, 1, What::Waking),
            ev(2009, 1, What::Own),
            ev(2050, 1, What::Out { runnable: false }),
            // Neither: it ran, from an unknown time.
            ev(3000, 1, What::Waking),
            ev(3050, 1, What::Out { runnable: false }),
        ];
        let a = activations(&evs);
        assert_eq!(a.len(), 5);
        assert_eq!((a[0].wake, a[0].end), (None, Some(50)));
        assert_eq!(a[1].latency(), Some(30));
        assert_eq!(a[1].end, Some(300));
        let kinds: Vec<(u64, u64, bool)> = a[1]
            .pieces
            .iter()
            .map(|p| (p.start, p.end, p.running))
            .collect();
        assert_eq!(
            kinds,
            vec![
                (100, 130, false),
                (130, 200, true),
                (200, 260, false),
                (260, 300, true)
            ]
        );
        assert_eq!((a[2].latency(), a[2].end), (Some(10), Some(1150)));
        assert!(!a[2].run_by_own_event);
        assert_eq!(a[2].pieces.len(), 2, "one wait, one run: {:?}", a[2].pieces);
        assert_eq!((a[3].latency(), a[3].run_by_own_event), (Some(9), true));
        assert_eq!(a[3].pieces[1].start, 2009);
        assert_eq!((a[4].latency(), a[4].untimed), (None, true));
    }

    #[test]
    fn a_periodic_thread_has_its_period_found_and_its_misses_counted() {
        // 1 ms releases from 5 ms, latencies 3-40 us, one release skipped
        // and one activation finishing after its deadline.
        let p = 1_000_000u64;
        let mut acts = Vec::new();
        for k in 0..200u64 {
            if k == 57 {
                continue;
            }
            let release = 5_000_000 + k * p;
            let lat = 3_000 + (k * 7919) % 37_000;
            let wake = release + lat;
            let end = if k == 120 {
                release + p + 50_000
            } else {
                wake + 20_000
            };
            acts.push(Activation {
                wake: Some(wake),
                run: Some((wake + 500, 1)),
                end: Some(end),
                ..Default::default()
            });
        }
        let wakes: Vec<u64> = acts.iter().filter_map(|a| a.wake).collect();
        // One wake-up 600 us late, one stray wake-up mid-period: neither
        // moves the releases.
        let mut odd = wakes.clone();
        odd[30] += 600_000;
        odd.insert(90, odd[89] + 450_000);
        let (p_odd, _) = detect_period(&odd).unwrap();
        let r_odd = first_release(&odd, p_odd);
        assert!(r_odd.abs_diff(5_003_000) <= 100, "{r_odd} {p_odd}");
        let (found, regular) = detect_period(&wakes).expect("periodic");
        assert!(
            found.0.abs_diff(p) <= 100,
            "{found} against {p}: regular {regular}"
        );
        let r0 = first_release(&wakes, found);
        // The releases sit on the fastest wake-up (3 us after the true
        // one): wake-ups alone cannot tell how long the fastest one took.
        assert!(r0.abs_diff(5_003_000) <= 100, "{r0}");
        let d = deadlines(&acts, r0, found);
        assert_eq!((d.releases, d.skipped, d.late), (200, 1, 1), "{d:?}");
        assert!(d.worst_response_ns.0 >= p + 40_000);
        // Release to running: the wake-up's lateness past the fastest
        // one (0-37 us) plus 500 ns to the switch-in.
        let slowest = (0..200u64)
            .filter(|&k| k != 57)
            .map(|k| (k * 7919) % 37_000)
            .max()
            .unwrap();
        // To the fitted releases' nanoseconds.
        assert!(
            d.release_to_run_max_ns.0.abs_diff(slowest + 500) < 200,
            "{} against {}",
            d.release_to_run_max_ns,
            slowest + 500
        );
        assert!(d.release_to_run_p50_ns.0 >= 500 && d.release_to_run_p50_ns.0 <= 34_500);
        // Irregular wake-ups are not called periodic.
        let irregular: Vec<u64> = (0..100u64).map(|i| i * i * 1000 + i * 37).collect();
        assert!(detect_period(&irregular).is_none());
    }
}
