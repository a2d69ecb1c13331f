//! `punctual advise`: which fix buys the most, predicted from a record
//! with cause attribution. The model is `punctual_analysis::advise`; the
//! text is `punctual_report::text::advise`; this parses, validates, calls
//! and prints.

use std::path::PathBuf;

use punctual_analysis::buffer::{Buffering, Compute};
use punctual_analysis::{advise, profiles, Profile};
use punctual_record::{Nanos, Record};

use crate::error::{CliError, CliResult};
use crate::opts;
use crate::output::write_json;

#[derive(clap::Args, Debug)]
#[command(after_help = "\
Examples:
  punctual advise c.json          (c.json from: punctual check --cpus 1 --cause --json c.json)
  punctual advise c.json --profile 'pro audio 128 frames × 2 at 48 kHz' --top 3
  punctual advise t.json --buffers 2 --buffer-len 1ms --compute 0.5ms --target 1h --json fixes.json
How each fix is predicted, and the limits: docs/advise.md")]
pub struct Args {
    /// Records with cause attribution (`check --cause`, `timer --cause`,
    /// `noise --cause`, `cause`).
    #[arg(required = true, value_name = "RECORD")]
    pub records: Vec<PathBuf>,
    /// Judge fixes by this shipped profile only (default: every profile
    /// that misses or is inconclusive now).
    #[arg(long, value_name = "NAME", conflicts_with_all = ["buffers", "buffer_len"])]
    pub profile: Option<String>,
    /// Your workload's number of buffers n (with --buffer-len).
    #[arg(long, value_name = "N", requires = "buffer_len")]
    pub buffers: Option<i64>,
    /// Length t of one buffer (with --buffers).
    #[arg(long, value_name = "T", value_parser = opts::positive_duration, requires = "buffers")]
    pub buffer_len: Option<Nanos>,
    /// Compute c per buffer: a time (0.5ms) or a fraction of t (25%).
    #[arg(long, value_name = "C", default_value = "0%")]
    pub compute: String,
    /// MTTF your workload needs (with --buffers/--buffer-len).
    #[arg(long, value_name = "D", default_value = "1h", value_parser = opts::positive_duration)]
    pub target: Nanos,
    /// Fixes shown (all are written with --json).
    #[arg(long, value_name = "N", default_value_t = 10)]
    pub top: usize,
    /// Write the input record with its ranked `fixes[]` here (atomically).
    #[arg(long, value_name = "PATH")]
    pub json: Option<PathBuf>,
    /// Apply a fix and measure again: not in this build.
    #[arg(long, value_name = "ID", hide = true)]
    pub apply: Option<String>,
}

/// The profiles asked for, and whether only the failing ones are kept.
fn chosen(a: &Args) -> CliResult<(Vec<Profile>, bool)> {
    if let Some(name) = &a.profile {
        let all = profiles::builtin();
        return match all.iter().find(|p| &p.name == name) {
            Some(p) => Ok((vec![p.clone()], false)),
            None => Err(CliError::usage(format!(
                "--profile '{name}' is not a shipped profile; `punctual forecast RECORD` lists \
                 them by name"
            ))),
        };
    }
    if let (Some(n), Some(t)) = (a.buffers, a.buffer_len) {
        if !(1..=1_000_000).contains(&n) {
            return Err(CliError::usage(format!(
                "--buffers {n} must be between 1 and 1000000"
            )));
        }
        let compute = Compute::parse(&a.compute).map_err(|e| CliError::usage(format!("--{e}")))?;
        let b = Buffering::new(n as u32, t, compute);
        b.slack()
            .map_err(|e| CliError::usage(format!("--buffers/--buffer-len/--compute: {e}")))?;
        return Ok((
            vec![Profile {
                name: format!("{n} × {t} (compute {})", compute.at(t)),
                family: None,
                size: b.label(),
                buffering: b,
                target: a.target,
                source: "command line".into(),
            }],
            false,
        ));
    }
    Ok((profiles::builtin(), true))
}

pub fn run(a: Args) -> CliResult {
    if a.apply.is_some() {
        return Err(CliError::usage(
            "--apply is not available in this build: advise predicts only; make a fix by hand \
             from its description and `permanent` text",
        ));
    }
    if a.top == 0 {
        return Err(CliError::usage("--top 0 shows nothing; give at least 1"));
    }
    opts::check_output("--json", &a.json)?;
    if a.json.is_some() && a.records.len() > 1 {
        return Err(CliError::usage(
            "--json writes one record with its fixes; give one RECORD with it",
        ));
    }
    let (profs, only_failing) = chosen(&a)?;
    for path in &a.records {
        let shown = path.display().to_string();
        let mut rec = Record::read(path).map_err(|e| CliError::usage(e.to_string()))?;
        let adv = advise::advise(&rec, &profs, only_failing)
            .map_err(|e| CliError::usage(format!("{shown}: {e}")))?;
        let what = if !adv.has_wakeups {
            "no wake-ups in the record, so no MTTF: fixes judged by the stolen fraction and the \
             gaps' p99.9"
                .to_string()
        } else if adv.all_profiles_meet {
            format!(
                "every one of {} profiles meets its target now; fixes judged by all of them",
                profs.len()
            )
        } else {
            let n = adv.now.first().map(|(_, f)| f.profiles.len()).unwrap_or(0);
            if only_failing {
                format!("{n} profile(s) that miss or are inconclusive now")
            } else {
                format!("{n} profile(s) asked for")
            }
        };
        println!("== advise: {shown} ({} record; {what})", rec.kind);
        rec.fixes = adv.fixes;
        print!(
            "{}",
            punctual_report::text::advise::advise_text(&rec, &adv.now, a.top)
        );
        write_json(&rec, &a.json)?;
    }
    Ok(())
}
