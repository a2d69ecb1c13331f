//! `punctual sysinfo`: the platform facts every record carries, and the
//! warnings that say what to change.

use std::path::PathBuf;

use punctual_report::text::{platform::platform_text, probe::warnings_block};

use crate::error::CliResult;
use crate::opts;
use crate::output::write_json;

#[derive(clap::Args, Debug)]
#[command(
    after_help = "Examples:\n  punctual sysinfo\n  punctual sysinfo --irqs --json facts.json"
)]
pub struct Args {
    /// Write a record (kind `sysinfo`, no series) with the facts here.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// List every IRQ with its affinity (default: only the count).
    #[arg(long)]
    pub irqs: bool,
}

pub fn run(args: Args) -> CliResult {
    opts::check_output("--json", &args.json)?;
    let rec = punctual_measure::session::new_record(
        "sysinfo",
        punctual_live::sysinfo::collect(),
        crate::output::rfc3339_now(),
    );
    print!("{}", platform_text(&rec.platform, args.irqs));
    // Warnings on standard error, as every verb puts them.
    eprint!("{}", warnings_block(&rec));
    write_json(&rec, &args.json)
}
