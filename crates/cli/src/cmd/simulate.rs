//! `punctual simulate`: run a scenario in the deterministic simulator and
//! write the same record as the live probes, a Perfetto trace, or a sweep
//! table.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Instant;

use punctual_record::write_atomic;
use punctual_sim::{
    parse_set, summary, sweep_values, to_record, trace_json, Outcome, RunOptions, Scenario,
};
use punctual_units::Nanos;

use crate::error::{CliError, CliResult};
use crate::opts;

#[derive(clap::Args, Debug)]
#[command(
    after_help = "Examples:\n  punctual simulate scenarios/nt-mmtimer-rounding.toml\n  punctual simulate scenarios/rez-network.toml --duration 60s --seed 7 --json r.json\n  punctual simulate scenarios/rez-network.toml --set task.t2.reserve.kind=rez-c --sweep task.t2.reserve.over=0..0.3/0.05 --table sweep.csv\n  punctual simulate --from noise.json --emit-scenario measured.toml"
)]
pub struct Args {
    /// Scenario file (TOML; see docs/scenario-format.md).
    #[arg(required_unless_present = "from", conflicts_with = "from")]
    pub scenario: Option<PathBuf>,
    /// Build the scenario from a measured record (`timer`, `noise` or
    /// `check`, best with --cause): its probed task and its noise sources.
    #[arg(long, value_name = "RECORD")]
    pub from: Option<PathBuf>,
    /// With --from: write the scenario built from the record here (TOML,
    /// to edit and replay) instead of running it.
    #[arg(long, value_name = "PATH")]
    pub emit_scenario: Option<PathBuf>,
    /// Random seed (default: the scenario's, else a fixed one; recorded).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Simulated duration, overriding the scenario's (e.g. 10s, 1h, 7d).
    #[arg(long, value_parser = opts::positive_duration)]
    pub duration: Option<Nanos>,
    /// Write the run record (JSON); with --sweep, the sweep table as JSON.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Write a Chrome/Perfetto trace-event timeline (opens in ui.perfetto.dev).
    #[arg(long)]
    pub trace: Option<PathBuf>,
    /// Most slices kept in the trace; later ones are counted as dropped.
    #[arg(long, default_value_t = 200_000)]
    pub trace_cap: usize,
    /// Simulated time from the start kept as a slice log in the record
    /// (`extra.timeline`, drawn by `report --html`); `0s` keeps none.
    #[arg(long, value_parser = opts::duration, default_value = "200ms")]
    pub timeline_window: Nanos,
    /// Override a scenario field: key=value (e.g. task.t2.reserve.over=0.1).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
    /// Sweep a field: key=a..b/step (numbers or durations); prints one table.
    #[arg(long, value_name = "KEY=A..B/STEP")]
    pub sweep: Option<String>,
    /// With --sweep: write the table as CSV (or JSON if the name ends in .json).
    #[arg(long)]
    pub table: Option<PathBuf>,
    /// With --sweep: only these summary columns (comma-separated substrings).
    #[arg(long)]
    pub columns: Option<String>,
}

pub fn run(args: Args) -> CliResult {
    if args.emit_scenario.is_some() && args.from.is_none() {
        return Err(CliError::usage(
            "--emit-scenario writes the scenario built by --from RECORD; add --from or drop it",
        ));
    }
    let (file, text) = match (&args.scenario, &args.from) {
        (Some(path), _) => (
            path.display().to_string(),
            std::fs::read_to_string(path).map_err(|e| {
                CliError::usage(format!("cannot read scenario {}: {e}", path.display()))
            })?,
        ),
        (None, Some(rec)) => {
            let text = from_record(rec)?;
            if let Some(p) = &args.emit_scenario {
                opts::check_output("--emit-scenario", &args.emit_scenario)?;
                write_out(p, text.as_bytes())?;
                eprintln!("scenario written to {}", p.display());
                return Ok(());
            }
            (format!("{} (--from)", rec.display()), text)
        }
        (None, None) => return Err(CliError::usage("give a scenario file or --from RECORD")),
    };
    let mut sets = Vec::new();
    for s in &args.set {
        sets.push(parse_set(s).map_err(|e| CliError::usage(format!("--set {e}")))?);
    }
    opts::check_output("--json", &args.json)?;
    opts::check_output("--trace", &args.trace)?;
    opts::check_output("--table", &args.table)?;
    if args.sweep.is_none() {
        for (flag, given) in [
            ("--table", args.table.is_some()),
            ("--columns", args.columns.is_some()),
        ] {
            if given {
                return Err(CliError::usage(format!(
                    "{flag} shapes the table of a --sweep; add --sweep KEY=A..B/STEP or drop {flag}"
                )));
            }
        }
    }
    let run_opts = RunOptions {
        seed: args.seed,
        duration: args.duration,
        trace_cap: args.trace.as_ref().map(|_| args.trace_cap),
        timeline_window: Some(args.timeline_window),
    };
    let stop = crate::interrupt::stop_flag();
    if let Some(sw) = &args.sweep {
        return sweep(&args, &file, &text, &sets, sw, &run_opts);
    }
    let scn = Scenario::parse(&file, &text, &sets).map_err(|e| CliError::usage(e.to_string()))?;
    let wall = Instant::now();
    let cpu = process_cputime();
    let out = punctual_sim::run(&scn, &run_opts, Some(&stop))
        .map_err(|e| CliError::usage(e.to_string()))?;
    let cpu = process_cputime().saturating_sub(cpu);
    let secs = wall.elapsed().as_secs_f64();
    print_summary(&scn, &out, secs, cpu);
    let record = to_record(&scn, &out, &sets);
    // The record writer's own warning (histograms coarsened to bound it)
    // comes after the run's, which print_summary showed.
    for w in &record.warnings {
        if let punctual_record::Warning::Other { message } = w {
            if message.contains("to bound the record") {
                eprintln!("warning: {message}");
            }
        }
    }
    crate::output::write_json(&record, &args.json)?;
    if let Some(p) = &args.trace {
        write_atomic(p, trace_json(&out).as_bytes())
            .map_err(|e| CliError::runtime(format!("{}: {e}", p.display())))?;
        eprintln!(
            "trace written to {} ({} slices{})",
            p.display(),
            out.trace.len(),
            if out.trace_dropped > 0 {
                format!(", {} dropped beyond --trace-cap", out.trace_dropped)
            } else {
                String::new()
            }
        );
    }
    // The process ends next, and the kernel takes back its memory in one
    // go: freeing the outcome's and the record's histograms first (some 25
    // MB in a few hundred blocks on a 20-task run) only delayed the exit.
    std::mem::forget(record);
    std::mem::forget(out);
    Ok(())
}

/// The scenario text built from the record at `path`; its notes go to
/// stderr.
fn from_record(path: &Path) -> Result<String, CliError> {
    let rec =
        punctual_record::Record::read(path).map_err(|e| CliError::usage(format!("--from: {e}")))?;
    let built = punctual_analysis::simfrom::scenario_from_record(&rec, &path.display().to_string())
        .map_err(|e| CliError::usage(format!("--from: {e}")))?;
    for n in &built.notes {
        eprintln!("note: {n}");
    }
    Ok(built.toml)
}

fn us(n: Nanos) -> String {
    format!("{:.1}", n.0 as f64 / 1e3)
}

/// CPU time of the whole process so far. The simulation's share of it is
/// printed beside its wall time because on a shared machine a run of a
/// millisecond waits for a CPU as long as it computes; and it is the
/// figure SimSo's comparison (bench/simso) takes around `run_model()`,
/// Python's `time.process_time()`, the same clock.
fn process_cputime() -> Nanos {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is a valid, writable timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) };
    Nanos(ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64)
}

/// `cpu` is the CPU time of the simulation alone: building the machine
/// and tasks from the parsed scenario, the event loop and the outcome,
/// not the process start, the parse or the record.
fn print_summary(scn: &Scenario, o: &Outcome, wall_s: f64, cpu: Nanos) {
    println!(
        "scenario {}  seed {}  simulated {}{}  clock {}",
        scn.file,
        o.seed,
        o.ended_at,
        if o.interrupted { " (interrupted)" } else { "" },
        o.clock
    );
    if let Some(d) = &scn.spec.sim.description {
        println!("  {d}");
    }
    println!(
        "{} events in {:.3} s of wall time, {:.6} s of CPU ({:.1} M events/s)",
        o.events,
        wall_s,
        cpu.0 as f64 / 1e9,
        o.events as f64 / wall_s.max(1e-9) / 1e6
    );
    // A task whose every job was aborted still has a row.
    let rows: Vec<_> = o
        .tasks
        .iter()
        .filter(|t| t.jobs > 0 || t.aborted.is_some_and(|a| a > 0))
        .collect();
    if !rows.is_empty() {
        println!(
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
        for t in &rows {
            println!(
                "{:<18} {:>8} {:>7} {:>7} {:>10} {:>10} {:>10} {:>10} {:>10}",
                t.name,
                t.jobs,
                t.deadline_misses + t.backlog_lost,
                t.preemptions,
                us(t.latency.quantile(0.5)),
                us(t.latency.quantile(0.99)),
                us(t.latency.max()),
                us(t.interval.quantile(0.99)),
                us(t.interval.max()),
            );
        }
        let aborted: Vec<String> = rows
            .iter()
            .filter_map(|t| t.aborted.map(|a| format!("{} {a}", t.name)))
            .collect();
        if !aborted.is_empty() {
            // Under sim.on_miss = "abort" only; `missed` above includes them.
            println!("jobs aborted at their deadline: {}", aborted.join(", "));
        }
    }
    if let Some(m) = &o.multiprocessor {
        println!(
            "\n{} scheduling on {} CPUs{}",
            m.policy,
            o.cpus.len(),
            m.placement
                .map(|p| format!(", {p} placement"))
                .unwrap_or_default()
        );
        if m.placement.is_some() {
            let places: Vec<String> = o
                .tasks
                .iter()
                .map(|t| format!("{} cpu{}", t.name, t.cpu))
                .collect();
            println!("placed: {}", places.join(", "));
        } else {
            println!(
                "migrations: {} (a preempted job resumed on another CPU); task migrations: {} (a job started on another CPU than its task last ran on)",
                m.migrations.iter().sum::<u64>(),
                m.task_migrations.iter().sum::<u64>()
            );
        }
    }
    if !o.period_totals.is_empty() {
        println!(
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
        for p in &o.period_totals {
            let k = p.periods.max(1);
            println!(
                "{:<18} {:>7} {:>8} {:>8} {:>7.2} {:>12} {:>12} {:>8.2}",
                p.task,
                p.kind,
                p.periods,
                p.misses,
                p.misses as f64 * 100.0 / k as f64,
                us(p.requested / k),
                us(p.received / k),
                p.stolen.0 as f64 * 100.0 / (p.received.0 + p.stolen.0).max(1) as f64
            );
        }
    }
    if !o.streams.is_empty() {
        println!(
            "\n{:<18} {:>10} {:>10} {:>10} {:>8} {:>9}",
            "stream", "arrived", "delivered", "lost", "loss%", "paused%"
        );
        for s in &o.streams {
            println!(
                "{:<18} {:>10} {:>10} {:>10} {:>8.3} {:>9.2}",
                s.name,
                s.arrived,
                s.delivered,
                s.lost,
                s.lost as f64 * 100.0 / (s.lost + s.arrived).max(1) as f64,
                s.paused_ns.0 as f64 * 100.0 / o.ended_at.0.max(1) as f64
            );
        }
    }
    for (c, s) in o.cpus.iter().enumerate() {
        println!(
            "\ncpu{c}: stolen {} ({:.3}%) in {} intervals, longest {}",
            s.total,
            s.total.0 as f64 * 100.0 / o.ended_at.0.max(1) as f64,
            s.intervals,
            s.max
        );
        let mut src: Vec<_> = o
            .sources
            .iter()
            .filter(|x| x.cpu as usize == c && x.count > 0)
            .collect();
        src.sort_by(|a, b| b.total.cmp(&a.total).then(a.name.cmp(&b.name)));
        for x in src.iter().take(8) {
            println!(
                "  {:<10} {:<24} {:>9} x  total {:>12}  max {:>10}",
                x.kind, x.name, x.count, x.total, x.max
            );
        }
    }
    if !o.constraints.is_empty() {
        println!("\nconstraint             window                 estimate  answer");
    }
    for c in &o.constraints {
        let answer = match (&c.denied_because, c.completed_at) {
            (Some(why), _) => format!("denied: {why}"),
            (None, Some(t)) => format!(
                "granted, done at {t}{}",
                if c.met_deadline { "" } else { " (late)" }
            ),
            (None, None) => format!("granted, received {} so far", c.received),
        };
        println!(
            "{:<22} {:<22} {:>8}  {answer}",
            c.name,
            format!("[{}, {})", c.window_start, c.deadline),
            c.estimate.to_string()
        );
    }
    for w in &o.warnings {
        eprintln!("warning: {w}");
    }
}

fn sweep(
    args: &Args,
    file: &str,
    text: &str,
    sets: &[(String, String)],
    spec: &str,
    run_opts: &RunOptions,
) -> CliResult {
    let (key, range) = spec
        .split_once('=')
        .ok_or_else(|| CliError::usage(format!("--sweep '{spec}' must look like key=a..b/step")))?;
    let values = sweep_values(range).map_err(|e| CliError::usage(format!("--sweep {e}")))?;
    let stop = crate::interrupt::stop_flag();
    let mut rows: Vec<(String, BTreeMap<String, f64>)> = Vec::new();
    for v in &values {
        if crate::interrupt::interrupted(&stop) {
            eprintln!("interrupted: the table has the rows finished so far");
            break;
        }
        let mut s = sets.to_vec();
        s.push((key.to_string(), v.clone()));
        let scn = Scenario::parse(file, text, &s).map_err(|e| CliError::usage(e.to_string()))?;
        let out = punctual_sim::run(&scn, run_opts, Some(&stop))
            .map_err(|e| CliError::usage(e.to_string()))?;
        rows.push((v.trim_matches('"').to_string(), summary(&out)));
    }
    // Columns: the requested ones, else those that vary across the sweep.
    let all: BTreeSet<String> = rows.iter().flat_map(|r| r.1.keys().cloned()).collect();
    let cols: Vec<String> = match &args.columns {
        Some(c) => {
            let want: Vec<&str> = c
                .split(',')
                .map(|x| x.trim())
                .filter(|x| !x.is_empty())
                .collect();
            all.iter()
                .filter(|k| want.iter().any(|w| k.contains(w)))
                .cloned()
                .collect()
        }
        None => all
            .iter()
            .filter(|k| k.as_str() != "events")
            .filter(|k| {
                let vals: Vec<f64> = rows
                    .iter()
                    .map(|r| r.1.get(*k).copied().unwrap_or(f64::NAN))
                    .collect();
                vals.windows(2).any(|w| w[0].to_bits() != w[1].to_bits())
            })
            .cloned()
            .collect(),
    };
    let mut csv = String::new();
    csv.push_str(key);
    for c in &cols {
        csv.push(',');
        csv.push_str(c);
    }
    csv.push('\n');
    for (v, m) in &rows {
        csv.push_str(v);
        for c in &cols {
            csv.push(',');
            if let Some(x) = m.get(c) {
                csv.push_str(&fmt_num(*x));
            }
        }
        csv.push('\n');
    }
    print!("{}", pretty_table(&csv));
    let json_rows: Vec<serde_json::Value> = rows
        .iter()
        .map(|(v, m)| serde_json::json!({ "value": v, "summary": m }))
        .collect();
    let json = serde_json::to_string_pretty(&serde_json::json!({
        "scenario": file,
        "sweep": key,
        "set": sets.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>(),
        "seed": run_opts.seed,
        "rows": json_rows,
    }))
    .expect("table serializes");
    if let Some(p) = &args.table {
        let is_json = p.extension().is_some_and(|e| e == "json");
        write_out(
            p,
            if is_json {
                json.as_bytes()
            } else {
                csv.as_bytes()
            },
        )?;
    }
    if let Some(p) = &args.json {
        write_out(p, json.as_bytes())?;
    }
    Ok(())
}

fn write_out(p: &Path, bytes: &[u8]) -> CliResult {
    write_atomic(p, bytes).map_err(|e| CliError::runtime(format!("{}: {e}", p.display())))
}

fn fmt_num(x: f64) -> String {
    if x.fract() == 0.0 && x.abs() < 1e15 {
        format!("{}", x as i64)
    } else {
        format!("{x:.6}")
    }
}

fn pretty_table(csv: &str) -> String {
    let rows: Vec<Vec<&str>> = csv.lines().map(|l| l.split(',').collect()).collect();
    let ncol = rows.first().map_or(0, |r| r.len());
    let widths: Vec<usize> = (0..ncol)
        .map(|i| {
            rows.iter()
                .map(|r| r.get(i).map_or(0, |c| c.len()))
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for r in &rows {
        let cells: Vec<String> = r
            .iter()
            .enumerate()
            .map(|(i, c)| format!("{:>w$}", c, w = widths[i]))
            .collect();
        out.push_str(&cells.join("  "));
        out.push('\n');
    }
    out
}
