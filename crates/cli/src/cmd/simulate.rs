//! `punctual simulate`: run a scenario in the deterministic simulator and
//! write the same record as the live probes, a Perfetto trace, or a sweep
//! table.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use punctual_record::write_atomic;
use punctual_sim::{parse_set, summary, sweep_values, to_record, trace_json, RunOptions, Scenario};
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
    // Building the machine and running it are timed apart: the run alone
    // is what SimSo's figure in bench/simso is compared with.
    let setup = process_cputime();
    let prepared =
        punctual_sim::prepare(&scn, &run_opts).map_err(|e| CliError::usage(e.to_string()))?;
    let wall = Instant::now();
    let cpu = process_cputime();
    let out = prepared
        .run(Some(&stop))
        .map_err(|e| CliError::usage(e.to_string()))?;
    let end = process_cputime();
    let cost = punctual_report::text::simulate::RunCost {
        wall: wall.elapsed(),
        cpu: Duration::from_nanos(end.saturating_sub(cpu).0),
        setup_cpu: Duration::from_nanos(cpu.saturating_sub(setup).0),
    };
    let record = to_record(&scn, &out, &sets);
    if let Some(why) = punctual_sim::record_refusal(&record) {
        return Err(CliError::usage(format!("{}: {why}", scn.file)));
    }
    let (text, warnings) = punctual_report::text::simulate::summary(&record, Some(cost));
    print!("{text}");
    eprint!("{warnings}");
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

/// CPU time of the whole process so far. The simulation's share of it is
/// printed beside its wall time because on a shared machine a run of a
/// millisecond waits for a CPU as long as it computes; and it is the
/// clock SimSo's comparison (bench/simso) reads around `run_model()`,
/// Python's `time.process_time()`.
fn process_cputime() -> Nanos {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is a valid, writable timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) };
    Nanos(ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64)
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
