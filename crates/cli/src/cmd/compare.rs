//! `punctual compare BASE.json NEW.json`: did latency regress? Parsing,
//! printing and the exit status; the test is `punctual_analysis::compare`,
//! its table `punctual_report::text::compare`.

use std::path::PathBuf;

use punctual_analysis::compare::{compare, Answer, CompareOptions, Comparison};
use punctual_record::Record;
use punctual_report::text::compare::ratio;

use crate::error::{CliError, CliResult};
use crate::opts;

#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:
  punctual timer --cpus 0 --duration 30s --json base.json
  (change something)
  punctual timer --cpus 0 --duration 30s --json new.json
  punctual compare base.json new.json || echo 'latency regressed'

Exit status: 0 no regression (same or improved), 1 regressed, 2 bad input.")]
pub struct Args {
    /// The reference record.
    #[arg(value_name = "BASE")]
    pub base: PathBuf,
    /// The record to judge against it.
    #[arg(value_name = "NEW")]
    pub new: PathBuf,
    /// Quantiles to test, in percent, comma-separated (the tail by
    /// default: add 50 to test the median too).
    #[arg(long, default_value = "99,99.9", value_name = "PCTS")]
    pub quantiles: String,
    /// Smallest change that counts, in percent: the whole confidence
    /// interval of NEW / BASE must lie beyond it. Two runs of one machine
    /// drift apart by more than their sampling noise says; the default is
    /// that drift on a shared 2-vCPU VM (39 of 40 pairs of idle runs
    /// within it). Measure your machine's with bench/compare-spread.py on
    /// pairs of idle runs and set it here.
    #[arg(long, default_value = "40%", value_name = "PCT")]
    pub min_change: String,
    /// Confidence of the whole comparison (Bonferroni-corrected over every
    /// series and quantile).
    #[arg(long, default_value_t = 0.95)]
    pub level: f64,
    /// Seed of the bootstrap (the same records and seed give the same answer).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Consecutive windows per block of the block bootstrap, in place of
    /// the length chosen from each run (1: windows one by one, which
    /// treats a second-long spell of slow windows as ten independent ones).
    #[arg(long, value_name = "N")]
    pub block_windows: Option<usize>,
    /// Write the comparison as JSON here (`-`: standard output).
    #[arg(long, value_name = "PATH")]
    pub json: Option<PathBuf>,
    /// Write a JUnit XML report here, one test case per compared series.
    #[arg(long, value_name = "PATH")]
    pub junit: Option<PathBuf>,
}

fn percent(flag: &str, s: &str) -> CliResult<f64> {
    let t = s.trim().trim_end_matches('%');
    match t.parse::<f64>() {
        Ok(v) if v.is_finite() => Ok(v),
        _ => Err(CliError::usage(format!(
            "{flag} '{s}' is not a percentage (use e.g. 40%)"
        ))),
    }
}

fn read(path: &std::path::Path, which: &str) -> CliResult<Record> {
    if !path.exists() {
        return Err(CliError::usage(format!(
            "{which} record {} does not exist",
            path.display()
        )));
    }
    Record::read(path).map_err(|e| CliError::usage(format!("{which}: {e}")))
}

pub fn run(args: Args) -> CliResult {
    let mut quantiles = Vec::new();
    for part in args.quantiles.split(',') {
        let p = percent("--quantiles", part)?;
        if !(p > 0.0 && p < 100.0) {
            return Err(CliError::usage(format!(
                "--quantiles '{}': {p} is not a percentile between 0 and 100 (use e.g. 99 or 99.9)",
                args.quantiles
            )));
        }
        quantiles.push(p / 100.0);
    }
    let min_change = percent("--min-change", &args.min_change)?;
    if min_change < 0.0 {
        return Err(CliError::usage(format!(
            "--min-change '{}' is negative; it is the smallest increase that counts",
            args.min_change
        )));
    }
    if args.block_windows == Some(0) {
        return Err(CliError::usage(
            "--block-windows 0: a block holds at least one window".to_string(),
        ));
    }
    opts::check_output("--json", &args.json)?;
    opts::check_output("--junit", &args.junit)?;
    let base = read(&args.base, "BASE")?;
    let new = read(&args.new, "NEW")?;
    let options = CompareOptions {
        quantiles,
        level: args.level,
        min_change: min_change / 100.0,
        seed: args.seed,
        block_windows: args.block_windows,
        ..CompareOptions::default()
    };
    let c = compare(&base, &new, &options).map_err(|e| CliError::usage(e.to_string()))?;
    if base.source != new.source {
        eprintln!(
            "warning: BASE is {:?} and NEW is {:?}: the comparison is between a model and a machine",
            base.source, new.source
        );
    }
    print!("{}", punctual_report::text::compare::render(&c));
    if let Some(p) = &args.json {
        let json = serde_json::to_string_pretty(&c).expect("comparison serializes") + "\n";
        crate::output::write_bytes("--json", p, json.as_bytes())?;
    }
    if let Some(p) = &args.junit {
        crate::output::write_bytes("--junit", p, junit(&c, &args.base, &args.new).as_bytes())?;
    }
    match c.answer {
        Answer::Regressed => Err(CliError::gate(format!(
            "latency regressed in {}",
            c.series
                .iter()
                .filter(|s| s.answer == Answer::Regressed)
                .map(|s| s.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ))),
        _ => Ok(()),
    }
}

/// JUnit XML: one test case per compared series; a regression is a
/// failure whose message lists the quantiles and their intervals.
pub fn junit(c: &Comparison, base: &std::path::Path, new: &std::path::Path) -> String {
    let cases = c
        .series
        .iter()
        .map(|se| {
            let lines: Vec<String> = se
                .quantiles
                .iter()
                .map(|q| {
                    let ci = q
                        .ratio_ci
                        .map(|(lo, hi)| format!(" (CI {} - {})", ratio(lo), ratio(hi)))
                        .unwrap_or_default();
                    format!(
                        "{} {} -> {}: {}{}",
                        q.quantile,
                        q.base_ns,
                        q.new_ns,
                        q.answer.as_str(),
                        ci
                    )
                })
                .collect();
            crate::junit::Case {
                classname: "latency".into(),
                name: se.name.clone(),
                result: if se.answer == Answer::Regressed {
                    crate::junit::Result::Failed("latency regressed".into())
                } else {
                    crate::junit::Result::Passed
                },
                text: lines.join("\n"),
            }
        })
        .collect();
    crate::junit::render(
        "punctual compare",
        &[crate::junit::Suite {
            name: format!("{} vs {}", base.display(), new.display()),
            cases,
        }],
    )
}
