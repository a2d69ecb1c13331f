//! What `punctual simulate` prints after a run: the run's header, the
//! tasks' jobs and latencies, the multiprocessor's placement or
//! migrations, the reservations' periods, the streams, the time stolen
//! on each CPU by source, and the constraint answers.
//!
//! It reads the record alone: the header from `config` and `platform`,
//! the latencies from `series`, the stolen time from `stolen`, the
//! periods from `period_summary`, the counts from `extra["sim"]`
//! (`punctual_record::sim::SimSection`). Tasks, streams and constraints
//! are printed in the scenario's order, which the record keeps in
//! `config.scenario` (the scenario text as run, overrides applied), as is
//! the scenario's description.
//!
//! The one thing a record cannot hold is how long the simulation took, in
//! wall time and in CPU time, the run alone and with building the machine: a simulated record is the same bytes on
//! every run of the same scenario and seed. The verb passes it in
//! ([`RunCost`]); a saved record prints its event count without it.

use std::collections::{HashMap, HashSet};
use std::fmt::Write;
use std::time::Duration;

use punctual_record::sim::SimSection;
use punctual_record::{Metric, Nanos, Record, Series, Warning};
use punctual_sim::Scenario;

/// The warning the record writer adds when it coarsened histograms; the
/// verb prints it after the run's own warnings.
const BOUNDED: &str = "to bound the record";

fn us(n: Nanos) -> String {
    format!("{:.1}", n.0 as f64 / 1e3)
}

/// The scenario as run, for its description and the order of its tasks,
/// streams and constraints; `None` when the record's text no longer
/// parses (a record from another version of the scenario format).
fn scenario(rec: &Record) -> Option<Scenario> {
    // Kept deflated past a size, or only hashed past another.
    let text = punctual_record::sim::scenario_text(&rec.config)?;
    let file = rec
        .config
        .get("scenario_file")
        .and_then(|v| v.as_str())
        .unwrap_or("");
    Scenario::parse(file, &text, &[]).ok()
}

/// `names` in the scenario's order (`order`), then any the scenario does
/// not name, in the record's (sorted) order.
/// Sets, not searches: 100,000 tasks made a search per name quadratic.
fn ordered<'a>(order: &[&str], names: impl Iterator<Item = &'a String>) -> Vec<String> {
    let names: Vec<&String> = names.collect();
    let present: HashSet<&str> = names.iter().map(|n| n.as_str()).collect();
    let mut out: Vec<String> = order
        .iter()
        .filter(|n| present.contains(**n))
        .map(|n| n.to_string())
        .collect();
    let placed: HashSet<&str> = order.iter().copied().collect();
    for n in names {
        if !placed.contains(n.as_str()) {
            out.push(n.clone());
        }
    }
    out
}

/// What a run cost, which only the verb that ran it knows.
#[derive(Debug, Clone, Copy)]
pub struct RunCost {
    /// Wall time of the run alone (as `cpu`).
    pub wall: Duration,
    /// The CPU time of the run alone: its first events, the event loop and
    /// the outcome; not building the machine from the parsed scenario, the
    /// process start, the parse or the record. It is what the SimSo
    /// comparison in bench/simso times on both sides (SimSo's
    /// `run_model()`, its `Model(...)` left out), on the clock a short run
    /// on a shared machine does not inflate by waiting for a CPU.
    pub cpu: Duration,
    /// The CPU time of building the machine the run starts from (checking
    /// the scenario, the tasks' and CPUs' state), printed beside `cpu` so
    /// that leaving it out of the run's figure hides nothing.
    pub setup_cpu: Duration,
}

/// What `punctual simulate` prints for the run `rec` records: standard
/// output, then the warnings it prints on standard error.
pub fn summary(rec: &Record, cost: Option<RunCost>) -> (String, String) {
    let sim = rec.sim().unwrap_or_default();
    let scn = scenario(rec);
    let mut w = String::new();
    header(&mut w, rec, &sim, scn.as_ref(), cost);
    tasks(&mut w, rec, &sim, scn.as_ref());
    periods(&mut w, rec, &sim);
    streams(&mut w, rec, &sim, scn.as_ref());
    stolen(&mut w, rec);
    constraints(&mut w, &sim, scn.as_ref());
    (w, warnings(rec))
}

/// The scenario, seed, simulated time and clock; the description; the
/// event count.
fn header(
    w: &mut String,
    rec: &Record,
    sim: &SimSection,
    scn: Option<&Scenario>,
    cost: Option<RunCost>,
) {
    let cfg_str = |k: &str| rec.config.get(k).and_then(|v| v.as_str()).unwrap_or("");
    let seed = rec.config.get("seed").and_then(|v| v.as_u64()).unwrap_or(0);
    let ended_at = rec.duration_ns;
    let _ = writeln!(
        w,
        "scenario {}  seed {}  simulated {}{}  clock {}",
        cfg_str("scenario_file"),
        seed,
        ended_at,
        if rec.interrupted {
            " (interrupted)"
        } else {
            ""
        },
        rec.platform
            .other
            .get("clock")
            .map(String::as_str)
            .unwrap_or("")
    );
    if let Some(d) = scn.and_then(|s| s.spec.sim.description.as_ref()) {
        let _ = writeln!(w, "  {d}");
    }
    match cost {
        Some(cost) => {
            let wall_s = cost.wall.as_secs_f64();
            let _ = writeln!(
                w,
                "{} events in {:.3} s of wall time, {:.6} s of CPU, {:.6} s with building the machine ({:.1} M events/s)",
                sim.events,
                wall_s,
                cost.cpu.as_secs_f64(),
                (cost.cpu + cost.setup_cpu).as_secs_f64(),
                sim.events as f64 / wall_s.max(1e-9) / 1e6
            );
        }
        None => {
            let _ = writeln!(w, "{} events", sim.events);
        }
    }
}

/// Each task's jobs, misses and latencies (the tasks that ran), the
/// aborted jobs, and the multiprocessor's placement or migrations.
fn tasks(w: &mut String, rec: &Record, sim: &SimSection, scn: Option<&Scenario>) {
    let task_order: Vec<&str> = scn
        .map(|s| {
            s.spec
                .task
                .iter()
                .map(|t| t.name.get_ref().as_str())
                .collect()
        })
        .unwrap_or_default();
    let tasks = ordered(&task_order, sim.tasks.keys());
    // Indexed once: a search of `rec.series` per task was quadratic (25 s
    // of a 10,000-task run's summary). The first series of a task and
    // metric wins, as the search found it.
    let mut by_task: HashMap<(&str, Metric), &Series> = HashMap::new();
    for s in &rec.series {
        if let Some(task) = s.task.as_deref() {
            by_task.entry((task, s.metric)).or_insert(s);
        }
    }
    let series =
        |task: &str, metric: Metric| -> Option<&Series> { by_task.get(&(task, metric)).copied() };
    // A task whose every job was aborted still has a row.
    let rows: Vec<(&String, &punctual_record::sim::SimTask)> = tasks
        .iter()
        .filter_map(|n| sim.tasks.get(n).map(|t| (n, t)))
        .filter(|(_, t)| t.jobs > 0 || t.aborted.is_some_and(|a| a > 0))
        .collect();
    if !rows.is_empty() {
        let _ = writeln!(
            w,
            "\n{:<18} {:>8} {:>7} {:>7} {:>10} {:>10} {:>10} {:>10} {:>10}",
            "task",
            "jobs",
            "missed",
            "preempt",
            "lat p50us",
            "lat p99us",
            "lat max us",
            "int p99us",
            "int max us"
        );
        for (name, t) in &rows {
            let lat = series(name, Metric::Latency);
            let int = series(name, Metric::Interval);
            // A task a folded record keeps without its series (it has its
            // longest response instead): a dash, not a zero.
            let bare = t.response_max_ns.is_some();
            let p = |s: Option<&Series>, f: fn(&Series) -> Nanos| {
                if bare {
                    "-".to_string()
                } else {
                    us(s.map_or(Nanos::ZERO, f))
                }
            };
            let counts = [t.jobs, t.deadline_misses + t.backlog_lost, t.preemptions];
            task_row(w, name, counts, [lat, int], p);
        }
        if let Some(f) = &sim.folded {
            folded_row(w, rec, f);
        }
        let aborted: Vec<String> = rows
            .iter()
            .filter_map(|(n, t)| t.aborted.map(|a| format!("{n} {a}")))
            .collect();
        if !aborted.is_empty() {
            // Under sim.on_miss = "abort" only; `missed` above includes them.
            let _ = writeln!(w, "jobs aborted at their deadline: {}", aborted.join(", "));
        }
    }
    if let Some(m) = &sim.multiprocessor {
        let _ = writeln!(
            w,
            "\n{} scheduling on {} CPUs{}",
            m.policy,
            m.cpus,
            m.placement
                .as_ref()
                .map(|p| format!(", {p} placement"))
                .unwrap_or_default()
        );
        if m.placement.is_some() {
            let places: Vec<String> = tasks
                .iter()
                .filter_map(|n| sim.tasks.get(n).map(|t| (n, t)))
                .map(|(n, t)| format!("{n} cpu{}", t.cpu.unwrap_or(0)))
                .collect();
            let _ = writeln!(w, "placed: {}", places.join(", "));
        } else {
            let _ = writeln!(
                w,
                "migrations: {} (a preempted job resumed on another CPU); task migrations: {} (a job started on another CPU than its task last ran on)",
                m.migrations, m.task_migrations
            );
        }
    }
}

/// One row of the task table: jobs, missed, preempted, then the latency's
/// p50, p99 and max and the interval's p99 and max, each as `p` renders it.
fn task_row(
    w: &mut String,
    name: &str,
    [jobs, missed, preempted]: [u64; 3],
    [lat, int]: [Option<&Series>; 2],
    p: impl Fn(Option<&Series>, fn(&Series) -> Nanos) -> String,
) {
    let _ = writeln!(
        w,
        "{:<18} {:>8} {:>7} {:>7} {:>10} {:>10} {:>10} {:>10} {:>10}",
        name,
        jobs,
        missed,
        preempted,
        p(lat, |s| s.percentiles.p50),
        p(lat, |s| s.percentiles.p99),
        p(lat, |s| s.max),
        p(int, |s| s.percentiles.p99),
        p(int, |s| s.max),
    );
}

/// The totals of a folded record, over every task, and what it left out.
fn folded_row(w: &mut String, rec: &Record, f: &punctual_record::sim::SimFolded) {
    let all = |m: Metric| rec.series_named(&format!("{}.{}", f.all, m.as_str()));
    let (lat, int) = (all(Metric::Latency), all(Metric::Interval));
    let p = |s: Option<&Series>, f: fn(&Series) -> Nanos| us(s.map_or(Nanos::ZERO, f));
    let name = format!("{} ({} tasks)", f.all, f.tasks);
    let counts = [f.jobs, f.deadline_misses + f.backlog_lost, f.preemptions];
    task_row(w, &name, counts, [lat, int], p);
    let _ = writeln!(
        w,
        "(record folded: {} tasks with series, {} with counts only (a dash), {} only in the {} row)",
        f.detailed, f.counted, f.totals_only, f.all
    );
}

/// Each reservation's periods, misses and what it asked for and received.
fn periods(w: &mut String, rec: &Record, sim: &SimSection) {
    if !rec.period_summary.is_empty() {
        let _ = writeln!(
            w,
            "\n{:<18} {:>7} {:>8} {:>8} {:>7} {:>12} {:>12} {:>8}",
            "reservation",
            "kind",
            "periods",
            "misses",
            "miss%",
            "requested us",
            "received us",
            "stolen%"
        );
        for p in &rec.period_summary {
            let k = p.periods.max(1);
            let kind = sim
                .tasks
                .get(&p.task)
                .and_then(|t| t.reservation.clone())
                .unwrap_or_default();
            let _ = writeln!(
                w,
                "{:<18} {:>7} {:>8} {:>8} {:>7.2} {:>12} {:>12} {:>8.2}",
                p.task,
                kind,
                p.periods,
                p.misses,
                p.misses as f64 * 100.0 / k as f64,
                us(Nanos(p.requested_total_ns.0 / k)),
                us(Nanos(p.received_total_ns.0 / k)),
                p.stolen_total_ns.0 as f64 * 100.0
                    / (p.received_total_ns.0 + p.stolen_total_ns.0).max(1) as f64
            );
        }
    }
}

/// Each stream's arrivals, deliveries, losses and pauses.
fn streams(w: &mut String, rec: &Record, sim: &SimSection, scn: Option<&Scenario>) {
    let ended_at = rec.duration_ns;
    if !sim.streams.is_empty() {
        let order: Vec<&str> = scn
            .map(|s| {
                s.spec
                    .stream
                    .iter()
                    .map(|x| x.name.get_ref().as_str())
                    .collect()
            })
            .unwrap_or_default();
        let _ = writeln!(
            w,
            "\n{:<18} {:>10} {:>10} {:>10} {:>8} {:>9}",
            "stream", "arrived", "delivered", "lost", "loss%", "paused%"
        );
        for name in ordered(&order, sim.streams.keys()) {
            let s = &sim.streams[&name];
            let _ = writeln!(
                w,
                "{:<18} {:>10} {:>10} {:>10} {:>8.3} {:>9.2}",
                name,
                s.arrived,
                s.delivered,
                s.lost,
                s.lost as f64 * 100.0 / (s.lost + s.arrived).max(1) as f64,
                s.paused_ns.0 as f64 * 100.0 / ended_at.0.max(1) as f64
            );
        }
        if let Some(p) = sim.folded.as_ref().and_then(|f| f.parts.get("streams")) {
            let sum = |k: &str| p.sums.get(k).copied().unwrap_or(0);
            let _ = writeln!(
                w,
                "(record folded: {} of {} streams shown, {}; over all: {} arrived, {} delivered, {} lost)",
                p.kept,
                p.total,
                p.order,
                sum("arrived"),
                sum("delivered"),
                sum("lost")
            );
        }
    }
}

/// The time stolen on each CPU, and its eight largest sources.
fn stolen(w: &mut String, rec: &Record) {
    let ended_at = rec.duration_ns;
    for s in &rec.stolen {
        let _ = writeln!(
            w,
            "\ncpu{}: stolen {} ({:.3}%) in {} intervals, longest {}",
            s.cpu,
            s.total_ns,
            s.total_ns.0 as f64 * 100.0 / ended_at.0.max(1) as f64,
            s.intervals,
            s.max_ns
        );
        let mut src: Vec<_> = s.by_source.iter().filter(|x| x.count > 0).collect();
        src.sort_by(|a, b| b.total_ns.cmp(&a.total_ns).then(a.name.cmp(&b.name)));
        for x in src.iter().take(8) {
            let _ = writeln!(
                w,
                "  {:<10} {:<24} {:>9} x  total {:>12}  max {:>10}",
                x.kind, x.name, x.count, x.total_ns, x.max_ns
            );
        }
    }
}

/// The answers to the scenario's time constraints.
fn constraints(w: &mut String, sim: &SimSection, scn: Option<&Scenario>) {
    if !sim.constraints.is_empty() {
        let order: Vec<&str> = scn
            .map(|s| {
                s.spec
                    .constraint
                    .iter()
                    .map(|x| x.name.get_ref().as_str())
                    .collect()
            })
            .unwrap_or_default();
        let _ = writeln!(
            w,
            "\nconstraint             window                 estimate  answer"
        );
        for name in ordered(&order, sim.constraints.keys()) {
            let c = &sim.constraints[&name];
            let answer = match (&c.denied_because, c.completed_at_ns) {
                (Some(why), _) => format!("denied: {why}"),
                (None, Some(t)) => format!(
                    "granted, done at {t}{}",
                    if c.met_deadline { "" } else { " (late)" }
                ),
                (None, None) => format!("granted, received {} so far", c.received_ns),
            };
            let _ = writeln!(
                w,
                "{:<22} {:<22} {:>8}  {answer}",
                name,
                format!("[{}, {})", c.window_start_ns, c.deadline_ns),
                c.estimate_ns.to_string()
            );
        }
    }
}

/// The warnings block of standard error.
fn warnings(rec: &Record) -> String {
    // The run's own warnings, then the record writer's (histograms
    // coarsened to bound it), in the order the verb printed them; an
    // interrupted run says so in the header instead.
    let mut warnings = String::new();
    let other = |w: &Warning| match w {
        Warning::Other { message } => Some(message.clone()),
        _ => None,
    };
    let messages: Vec<String> = rec.warnings.iter().filter_map(other).collect();
    for m in messages.iter().filter(|m| !m.contains(BOUNDED)) {
        let _ = writeln!(warnings, "warning: {m}");
    }
    for m in messages.iter().filter(|m| m.contains(BOUNDED)) {
        let _ = writeln!(warnings, "warning: {m}");
    }
    warnings
}
