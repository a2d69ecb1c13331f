//! `punctual forecast`: from any record (measured or simulated) to the
//! numbers a person plans with — worst case per hour/day/week, time to
//! buffer underrun, the least buffering that meets a target, verdicts
//! for workload profiles, and a pseudo worst case for schedulability.
//! All computing is in `punctual_analysis` (the flags checked into a
//! `plan::Plan` too); this module parses, calls and prints through
//! `punctual_report::text::forecast`.

use std::path::PathBuf;

use punctual_analysis::check::record_unrepresentative;
use punctual_analysis::forecast::{BOOTSTRAP_REPS, BOOTSTRAP_SEED};
use punctual_analysis::plan::{attach_stalls, select, Asked, Plan};
use punctual_analysis::verdict::{latency_like, verdicts_for};
use punctual_analysis::Verdict;
use punctual_record::{Metric, Record};
use punctual_report::text::forecast;
use punctual_units::Nanos;
use serde_json::{json, Value};

use crate::error::{CliError, CliResult};
use crate::opts;

#[derive(clap::Args, Debug)]
#[command(after_help = "\
Examples:
  punctual forecast run.json
  punctual forecast run.json --buffers 2 --buffer-len 1ms --compute 0.5ms --sweep
  punctual forecast run.json --buffer-len 2.667ms --compute 25% --target 1d
  punctual forecast run.json --rate 260000/s --target 1h
  punctual forecast run.json --miss-rate 1/h --taskset tasks.toml
Method, formulas and assumptions: docs/forecast.md")]
pub struct Args {
    /// Records to read (from timer, noise, check, simulate…).
    #[arg(required = true, value_name = "RECORD")]
    pub records: Vec<PathBuf>,
    /// Only this series (default: every latency series, or every series
    /// when the record has none).
    #[arg(long, value_name = "NAME")]
    pub series: Option<String>,
    /// Number of buffers n.
    #[arg(long, value_name = "N")]
    pub buffers: Option<i64>,
    /// Length t of one buffer (one consumer wake-up per buffer).
    #[arg(long, value_name = "T", value_parser = opts::positive_duration)]
    pub buffer_len: Option<Nanos>,
    /// Compute c per buffer: a time (0.5ms) or a fraction of t (25%).
    #[arg(long, value_name = "C", default_value = "0%")]
    pub compute: String,
    /// Table of MTTF against total buffering (n = 2 … max(8, n+4)).
    #[arg(long)]
    pub sweep: bool,
    /// How stalls arrive in the queue model: poisson (default), or
    /// renewal, read from the record's spike log time stamps (falls back
    /// to poisson without them; docs/forecast.md §3.3: validation did not
    /// favour it, so it is not the default).
    #[arg(long, value_name = "MODEL", default_value = "poisson", value_parser = ["poisson", "renewal"])]
    pub arrivals: String,
    /// Noise record (`punctual noise`, `check`) whose gap histogram for
    /// the same CPU gives the queue model's stall term S: time stolen from
    /// a running thread, instead of S inferred from the latency tail
    /// (docs/forecast.md §3.4). A `check` record whose noise half polled
    /// in stretches (every `check` since this option's default changed)
    /// is its own noise record unasked; older ones polled at FIFO for 30 s
    /// straight, so with RT throttling on their gaps include the throttled
    /// stops, which a consumer never sees, and are used only when named here.
    #[arg(long, value_name = "NOISE_RECORD", conflicts_with = "tail_stalls")]
    pub stalls: Option<PathBuf>,
    /// Infer S from the latency tail (§3.2) even when the record measured
    /// its stolen time on a running thread itself.
    #[arg(long)]
    pub tail_stalls: bool,
    /// Target MTTF for sizing (e.g. 10min, 1h, 1d).
    #[arg(long, value_name = "D", value_parser = opts::positive_duration)]
    pub target: Option<Nanos>,
    /// Packets per second arriving into a receive ring (e.g. 260000/s):
    /// prints how many buffers ride out the longest service gap expected
    /// once per --target, rate × gap (docs/forecast.md §4; the rule's
    /// source is in docs/references.md).
    #[arg(long, value_name = "N/s")]
    pub rate: Option<String>,
    /// Permissible error rate for the pseudo worst case (e.g. 1/h).
    #[arg(long, value_name = "N/D")]
    pub miss_rate: Option<String>,
    /// Task set TOML to analyse with the pseudo worst case (needs --miss-rate).
    #[arg(long, value_name = "FILE")]
    pub taskset: Option<PathBuf>,
    /// Extra profiles TOML; same-named profiles replace the shipped ones.
    #[arg(long, value_name = "FILE")]
    pub profiles: Option<PathBuf>,
    /// Hours a day and days a week the machine is in use, for the worst
    /// case per day and per week of use (the default is a heavy office
    /// user; docs/forecast.md §2, sources in docs/references.md).
    #[arg(long, value_name = "H/day,D/week", default_value = "8h/day,5d/week")]
    pub usage: String,
    /// Skip the per-profile verdicts.
    #[arg(long)]
    pub no_verdicts: bool,
    /// Write the forecast as JSON (atomically).
    #[arg(long, value_name = "PATH")]
    pub json: Option<PathBuf>,
}

fn plan(a: &Args) -> CliResult<Plan> {
    let asked = Asked {
        buffers: a.buffers,
        buffer_len: a.buffer_len,
        compute: &a.compute,
        sweep: a.sweep,
        target: a.target,
        rate: a.rate.as_deref(),
        miss_rate: a.miss_rate.as_deref(),
        taskset: a.taskset.as_deref(),
        profiles: a.profiles.as_deref(),
        usage: &a.usage,
    };
    let plan = Plan::new(&asked, &|p| std::fs::read_to_string(p)).map_err(CliError::usage)?;
    opts::check_output("--json", &a.json)?;
    Ok(plan)
}

/// The `--stalls` noise record, named as given: it must hold gap series,
/// and its stalls arrive as a Poisson process, so it does not combine
/// with renewal arrivals.
fn stalls_record(a: &Args) -> CliResult<Option<(String, Record)>> {
    if a.stalls.is_some() && a.arrivals == "renewal" {
        return Err(CliError::usage(
            "--stalls and --arrivals renewal do not combine: renewal arrivals are read from the \
             timer record's spike log, the noise record's stalls arrive as a Poisson process",
        ));
    }
    Ok(match &a.stalls {
        Some(path) => {
            let r = Record::read(path)
                .map_err(|e| CliError::usage(format!("--stalls {}: {e}", path.display())))?;
            if !r.series.iter().any(|s| s.metric == Metric::Gap) {
                return Err(CliError::usage(format!(
                    "--stalls {}: the record has no gap series (take one with `punctual noise`)",
                    path.display()
                )));
            }
            Some((path.display().to_string(), r))
        }
        None => None,
    })
}

pub fn run(a: Args) -> CliResult {
    let p = plan(&a)?;
    let noise = stalls_record(&a)?;
    let mut out = String::new();
    let mut series_json = Vec::new();
    let mut verdict_json = Vec::new();
    for path in &a.records {
        let rec = Record::read(path).map_err(|e| CliError::usage(e.to_string()))?;
        let shown = path.display().to_string();
        let mut models = select(&rec, &shown, a.series.as_deref(), a.arrivals == "renewal")
            .map_err(CliError::usage)?;
        attach_stalls(&mut models, &rec, &shown, noise.as_ref()).map_err(CliError::usage)?;
        if noise.is_none() && a.arrivals != "renewal" && !a.tail_stalls {
            // A `check` record's own gaps, when free of throttling stops.
            punctual_analysis::verdict::attach_own_gaps(&mut models, &rec);
        }
        if !a.no_verdicts {
            // Same selection as `verdicts()` makes, so each tail is fitted once.
            let mut v: Vec<Verdict> = verdicts_for(&models, &p.profiles);
            let why = record_unrepresentative(&rec);
            if let Some(w) = &why {
                v.iter_mut().for_each(|x| x.not_representative(w));
            }
            if !v.is_empty() {
                out.push_str(&forecast::verdicts(&shown, &v, why.as_deref()));
            }
            for x in v {
                let mut j = serde_json::to_value(&x).unwrap_or(Value::Null);
                j["record"] = json!(shown);
                verdict_json.push(j);
            }
        }
        let skipped: Vec<String> = models
            .iter()
            .filter(|m| !latency_like(m.metric))
            .map(|m| format!("{} ({})", m.name, m.metric.as_str()))
            .collect();
        let asks_mttf = !a.no_verdicts || p.buffering.is_some() || a.sweep || a.target.is_some();
        if !skipped.is_empty() && asks_mttf {
            out.push_str(&forecast::skipped(&shown, &skipped));
        }
        for m in &models {
            let (text, j) = forecast::series(&shown, &rec, m, &p);
            out.push_str(&text);
            series_json.push(j);
        }
    }
    print!("{out}");
    if let Some(path) = &a.json {
        let doc = json!({
            "tool": "punctual forecast",
            "tool_version": env!("CARGO_PKG_VERSION"),
            "method": "docs/forecast.md",
            "bootstrap": { "seed": BOOTSTRAP_SEED, "replicates": BOOTSTRAP_REPS },
            "usage": p.usage,
            "series": series_json,
            "verdicts": verdict_json,
        });
        let text = serde_json::to_string_pretty(&doc).unwrap_or_default();
        crate::output::write_bytes("--json", path, text.as_bytes())?;
        if !crate::output::is_stdout(path) {
            eprintln!("forecast written to {}", path.display());
        }
    }
    Ok(())
}
