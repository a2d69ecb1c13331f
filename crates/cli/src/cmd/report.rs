//! `punctual report RECORD…`: turn records into a self-contained HTML page,
//! standard export formats, or one merged record.
//!
//! Parsing and validation only; every format lives in `punctual_report`.

use std::io::Write;
use std::path::{Path, PathBuf};

use punctual_record::{Nanos, Record};
use punctual_report::{csv, hlog, html, json, merge, perfetto, prometheus, tail, Input};

use crate::error::{CliError, CliResult};
use crate::opts;

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// The record (one) or a JSON array of records.
    Json,
    /// A flat table; choose it with --csv-table.
    Csv,
    /// cyclictest-compatible histogram.
    Hist,
    /// HdrHistogram interval log (jHiccup format).
    Hlog,
    /// Prometheus text format 0.0.4 (node_exporter textfile collector).
    Prometheus,
    /// Chrome trace-event JSON for ui.perfetto.dev.
    Perfetto,
    /// The terminal text the verb that made each record printed (timer,
    /// noise, cause, sysinfo, load, reserve and simulate records; a check
    /// record with its verdicts first).
    Text,
    /// JUnit XML for CI systems: per record, one test case per gate
    /// (--fail-if, --fail-on-verdict) and per workload verdict (a decided
    /// miss fails, an undecided one is skipped).
    Junit,
}

#[derive(clap::Args, Debug)]
#[command(
    after_help = "Examples:\n  punctual report a.json b.json --html report.html\n  punctual report run.json --format prometheus\n  punctual report run.json --format csv --csv-table spikes -o spikes.csv\n  punctual report a.json b.json --merge -o merged.json\n  punctual report run.json --fail-if 'p99 > 200us' --format junit -o junit.xml"
)]
pub struct Args {
    /// Record files (JSON written by any punctual verb).
    #[arg(required = true, value_name = "RECORD")]
    pub records: Vec<PathBuf>,
    /// Write a self-contained HTML report (inline SVG, no scripts, no network).
    #[arg(long, value_name = "PATH")]
    pub html: Option<PathBuf>,
    /// Export in this format (to --output, or standard output).
    #[arg(long, value_enum)]
    pub format: Option<Format>,
    /// Where --format (or --merge) writes; written atomically.
    #[arg(long, short, value_name = "PATH")]
    pub output: Option<PathBuf>,
    /// Combine the records into one (lossless histogram merge) before
    /// reporting; alone, writes the merged record as JSON.
    #[arg(long)]
    pub merge: bool,
    /// Bucket of the CSV bucket table (the HTML histograms use log-spaced
    /// bins; hist is always 1 µs rows, as cyclictest's).
    #[arg(long, default_value = "100us", value_parser = opts::positive_duration)]
    pub bucket: Nanos,
    /// Which table --format csv writes: buckets, periods, stolen or spikes.
    #[arg(long, default_value = "buckets", value_name = "TABLE")]
    pub csv_table: String,
    /// Workload whose buffer length and compute the MTTF-against-buffering
    /// plot uses: adsl, modem, rt-audio or rt-video (the published
    /// tolerances of these workloads; sources in docs/references.md).
    #[arg(long, default_value = "rt-audio")]
    pub profile: String,
    /// Target mean time to underrun drawn on the MTTF plot.
    #[arg(long, default_value = "1h", value_parser = opts::positive_duration)]
    pub target_mttf: Nanos,
    /// Compute time per buffer, as a fraction of the buffer (0.25 = 25%).
    #[arg(long, default_value = "0.25")]
    pub compute_fraction: String,
    #[command(flatten)]
    pub gates: crate::gates::GateArgs,
}

/// Labels records by file stem, falling back to the whole path when two
/// stems collide, so overlaid curves stay distinguishable.
fn labels(paths: &[PathBuf]) -> Vec<String> {
    let stems: Vec<String> = paths
        .iter()
        .map(|p| {
            p.file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_else(|| p.display().to_string())
        })
        .collect();
    stems
        .iter()
        .enumerate()
        .map(|(i, s)| {
            if stems.iter().filter(|t| *t == s).count() > 1 {
                paths[i].display().to_string()
            } else {
                s.clone()
            }
        })
        .collect()
}

fn read_inputs(paths: &[PathBuf]) -> CliResult<Vec<Input>> {
    let names = labels(paths);
    let mut out = Vec::with_capacity(paths.len());
    for (p, label) in paths.iter().zip(names) {
        if !p.exists() {
            return Err(CliError::usage(format!(
                "record file {} does not exist",
                p.display()
            )));
        }
        let r = Record::read(p).map_err(|e| CliError::usage(e.to_string()))?;
        out.push(Input::new(label, r));
    }
    Ok(out)
}

fn write_out(path: Option<&Path>, bytes: &[u8]) -> CliResult {
    match path {
        Some(p) => punctual_record::write_atomic(p, bytes)
            .map_err(|e| CliError::runtime(format!("cannot write {}: {e}", p.display()))),
        None => {
            let mut so = std::io::stdout().lock();
            match so.write_all(bytes).and_then(|_| so.flush()) {
                // The reader closed the pipe (`| head`): it had enough.
                Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
                r => r.map_err(|e| {
                    CliError::runtime(format!("cannot write to standard output: {e}"))
                }),
            }
        }
    }
}

fn usage(e: punctual_report::ReportError) -> CliError {
    CliError::usage(e.to_string())
}

/// The flags checked: the gates, the CSV table, and the HTML page's
/// options; the output paths must be writable.
fn options(a: &Args) -> CliResult<(crate::gates::Gates, csv::Table, html::HtmlOptions)> {
    let gates = a.gates.parse()?;
    let table = csv::Table::parse(&a.csv_table).ok_or_else(|| {
        CliError::usage(format!(
            "--csv-table '{}' is not a table; use buckets, periods, stolen or spikes",
            a.csv_table
        ))
    })?;
    let profile = tail::range_named(&a.profile).ok_or_else(|| {
        CliError::usage(format!(
            "--profile '{}' is not a known profile; use adsl, modem, rt-audio or rt-video",
            a.profile
        ))
    })?;
    let compute_fraction = punctual_units::parse_ratio(&a.compute_fraction)
        .map_err(|e| CliError::usage(format!("--compute-fraction: {e}")))?;
    if !(0.0..1.0).contains(&compute_fraction) {
        return Err(CliError::usage(format!(
            "--compute-fraction '{}' must be at least 0 and below 1 (a fraction of one buffer)",
            a.compute_fraction
        )));
    }
    if a.output.is_some() && a.format.is_none() && !a.merge {
        return Err(CliError::usage(
            "--output needs --format (or --merge); the HTML report goes to --html",
        ));
    }
    if let Some(p) = &a.html {
        opts::check_output_path("--html", p)?;
    }
    if let Some(p) = &a.output {
        opts::check_output_path("--output", p)?;
    }
    let o = html::HtmlOptions {
        bucket: a.bucket,
        profile,
        target_mttf: a.target_mttf,
        compute_fraction,
        ..Default::default()
    };
    Ok((gates, table, o))
}

pub fn run(a: Args) -> CliResult {
    let (gates, table, html_options) = options(&a)?;
    let mut inputs = read_inputs(&a.records)?;
    if a.merge {
        let merged = merge::merge(&inputs).map_err(usage)?;
        let label = if inputs.len() == 1 {
            inputs[0].label.clone()
        } else {
            "merged".to_string()
        };
        inputs = vec![Input::new(label, merged)];
    }

    let mut wrote = false;
    if let Some(p) = &a.html {
        write_out(Some(p), &html::render(&inputs, &html_options))?;
        eprintln!("wrote {}", p.display());
        wrote = true;
    }
    let format = match (a.format, a.merge) {
        (Some(f), _) => Some(f),
        (None, true) if !wrote || a.output.is_some() => Some(Format::Json),
        _ => None,
    };
    if let Some(f) = format {
        let bytes = export(f, &inputs, table, a.bucket, &gates)?;
        write_out(a.output.as_deref(), &bytes)?;
        if let Some(p) = &a.output {
            eprintln!("wrote {}", p.display());
        }
        wrote = true;
    }
    if !wrote {
        print!("{}", punctual_report::text::summary::summary(&inputs));
    }
    let mut checked = Vec::new();
    for i in &inputs {
        for mut c in gates.check(&i.record)? {
            if inputs.len() > 1 {
                c.name = format!("{}: {}", i.label, c.name);
            }
            checked.push(c);
        }
    }
    crate::gates::enforce_checked(&checked)
}

/// The records in format `f`.
fn export(
    f: Format,
    inputs: &[Input],
    table: csv::Table,
    bucket: Nanos,
    gates: &crate::gates::Gates,
) -> CliResult<Vec<u8>> {
    Ok(match f {
        Format::Json => json::render(inputs),
        Format::Csv => csv::render(inputs, table, bucket.0).map_err(usage)?,
        Format::Hist => hist_format(inputs)?,
        Format::Hlog => hlog::render(inputs).map_err(usage)?,
        Format::Prometheus => prometheus::render(inputs),
        Format::Perfetto => perfetto::render(inputs),
        Format::Text => text_format(inputs)?,
        Format::Junit => junit_format(inputs, gates)?,
    })
}

/// JUnit XML: a suite per record, a case per gate and per verdict.
fn junit_format(inputs: &[Input], gates: &crate::gates::Gates) -> CliResult<Vec<u8>> {
    use crate::junit::{Case, Result as JResult, Suite};
    use punctual_record::VerdictState;
    let mut suites = Vec::new();
    for i in inputs {
        let mut cases: Vec<Case> = gates
            .check(&i.record)?
            .into_iter()
            .map(|c| Case {
                classname: "gate".into(),
                result: if c.failed {
                    JResult::Failed("gate failed".into())
                } else {
                    JResult::Passed
                },
                name: c.name,
                text: c.detail,
            })
            .collect();
        for v in punctual_analysis::gate::record_verdicts(&i.record) {
            cases.push(Case {
                classname: "verdict".into(),
                name: v.profile.clone(),
                result: match v.state {
                    VerdictState::Meets => JResult::Passed,
                    VerdictState::Misses => JResult::Failed("misses its MTTF target".into()),
                    VerdictState::Inconclusive => {
                        JResult::Skipped("inconclusive: measure longer".into())
                    }
                },
                text: crate::gates::verdict_line(&v),
            });
        }
        suites.push(Suite {
            name: i.label.clone(),
            cases,
        });
    }
    Ok(crate::junit::render("punctual report", &suites).into_bytes())
}

/// Each record as its verb printed it, one after the other.
fn text_format(inputs: &[Input]) -> CliResult<Vec<u8>> {
    let mut out = String::new();
    for i in inputs {
        let t = punctual_report::text::render(&i.record)
            .map_err(|e| CliError::usage(format!("{}: {e}", i.label)))?;
        out.push_str(&t);
    }
    Ok(out.into_bytes())
}

/// The cyclictest histogram (one µs per row, one column per latency
/// series, in record order) is written by `punctual_report::hist`.
fn hist_format(inputs: &[Input]) -> CliResult<Vec<u8>> {
    let lat: Vec<&punctual_record::Series> = inputs
        .iter()
        .flat_map(|i| i.record.series.iter())
        .filter(|s| s.metric == punctual_record::Metric::Latency)
        .collect();
    if lat.is_empty() {
        return Err(CliError::usage(
            "--format hist needs latency series (from timer, check or simulate); these records have none",
        ));
    }
    let rows = punctual_report::hist::default_rows(&lat);
    Ok(punctual_report::hist::cyclictest_hist(&lat, rows).into_bytes())
}
