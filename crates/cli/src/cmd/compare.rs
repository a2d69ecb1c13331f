//! `punctual compare BASE.json NEW.json`: did latency regress? Parsing,
//! printing and the exit status; the test is `punctual_analysis::compare`.

use std::path::PathBuf;

use punctual_analysis::compare::{compare, Answer, CompareOptions, Comparison};
use punctual_record::Record;

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
    /// drift by more than their sampling noise says.
    #[arg(long, default_value = "20%", value_name = "PCT")]
    pub min_change: String,
    /// Confidence of the whole comparison (Bonferroni-corrected over every
    /// series and quantile).
    #[arg(long, default_value_t = 0.95)]
    pub level: f64,
    /// Seed of the bootstrap (the same records and seed give the same answer).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
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
            "{flag} '{s}' is not a percentage (use e.g. 20%)"
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
    opts::check_output("--json", &args.json)?;
    opts::check_output("--junit", &args.junit)?;
    let base = read(&args.base, "BASE")?;
    let new = read(&args.new, "NEW")?;
    let options = CompareOptions {
        quantiles,
        level: args.level,
        min_change: min_change / 100.0,
        seed: args.seed,
        ..CompareOptions::default()
    };
    let c = compare(&base, &new, &options).map_err(|e| CliError::usage(e.to_string()))?;
    if base.source != new.source {
        eprintln!(
            "warning: BASE is {:?} and NEW is {:?}: the comparison is between a model and a machine",
            base.source, new.source
        );
    }
    print!("{}", render(&c));
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

fn ratio_text(r: f64) -> String {
    if r >= 10.0 {
        format!("{r:.0}x")
    } else {
        format!("{r:.2}x")
    }
}

/// The table: one line per series and quantile, then one answer per series.
pub fn render(c: &Comparison) -> String {
    let mut s = String::new();
    s.push_str(&format!(
        "{:<18} {:>7} {:>11} {:>11} {:>8} {:>19}  answer\n",
        "series", "q", "base", "new", "new/base", "CI"
    ));
    for se in &c.series {
        for q in &se.quantiles {
            let ci = match q.ratio_ci {
                Some((lo, hi)) => format!("{} - {}", ratio_text(lo), ratio_text(hi)),
                None => "-".to_string(),
            };
            let answer = match &q.untested {
                Some(why) => format!("not tested: {why}"),
                None => q.answer.as_str().to_string(),
            };
            s.push_str(&format!(
                "{:<18} {:>7} {:>11} {:>11} {:>8} {:>19}  {}\n",
                se.name,
                q.quantile,
                q.base_ns.to_string(),
                q.new_ns.to_string(),
                ratio_text(q.ratio),
                ci,
                answer
            ));
        }
    }
    s.push('\n');
    for se in &c.series {
        let changed: Vec<&str> = se
            .quantiles
            .iter()
            .filter(|q| q.answer == se.answer && q.answer != Answer::NoDifference)
            .map(|q| q.quantile.as_str())
            .collect();
        if changed.is_empty() {
            s.push_str(&format!("{}: {}\n", se.name, se.answer.as_str()));
        } else {
            s.push_str(&format!(
                "{}: {} ({})\n",
                se.name,
                se.answer.as_str(),
                changed.join(", ")
            ));
        }
    }
    for se in &c.series {
        s.push_str(&format!("{}: {}\n", se.name, se.resampling.describe()));
    }
    for (name, why) in &c.skipped {
        s.push_str(&format!("{name}: not compared: {why}\n"));
    }
    s.push_str(&format!(
        "{:.0}% confidence over {} tests ({:.2}% each), changes under {:.0}% ignored, {} bootstrap replicates, seed {}\n",
        c.level * 100.0,
        c.series.iter().map(|s| s.quantiles.len()).sum::<usize>(),
        c.per_test_level * 100.0,
        c.min_change * 100.0,
        c.replicates,
        c.seed
    ));
    s
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
                        .map(|(lo, hi)| format!(" (CI {} - {})", ratio_text(lo), ratio_text(hi)))
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
