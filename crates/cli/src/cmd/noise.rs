//! `punctual noise`: time stolen from a busy thread per CPU (the
//! oslat/sysjitter measurement), beside what the kernel admits to.

use std::sync::Arc;

use punctual_live::noise::NoiseConfig;
use punctual_measure::{Noise, ProbeRequest, Session};
use punctual_record::Nanos;

use crate::error::{CliError, CliResult};
use crate::opts::{self, CauseArgs, PolicyArg, ProbeArgs};
use crate::output::{print_text, write_json, Terminal};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// CPUs to poll: `0`, `0,1`, `0-3` or `all`.
    #[arg(long, default_value = "all")]
    pub cpus: String,
    /// Scheduling policy of the polling threads: fifo, rr or other. At fifo
    /// the kernel's RT throttling still leaves other tasks their share
    /// (punctual pauses by itself when throttling is off).
    #[arg(long, value_enum, default_value = "fifo")]
    pub policy: PolicyArg,
    /// Real-time priority (1-99) for fifo/rr.
    #[arg(long, default_value_t = 95)]
    pub priority: u32,
    /// How long to poll (`500ms`, `10s`, `2h`).
    #[arg(long, default_value = "10s", value_parser = opts::positive_duration)]
    pub duration: Nanos,
    /// A step longer than this is stolen time (default: automatic, ten times
    /// the loop's minimum step and at least 1us; the chosen value is shown).
    #[arg(long, value_parser = opts::positive_duration)]
    pub threshold: Option<Nanos>,
    #[command(flatten)]
    pub common: ProbeArgs,
    #[command(flatten)]
    pub cause: CauseArgs,
}

fn noise_config(args: &Args) -> Result<NoiseConfig, CliError> {
    if args.policy == PolicyArg::Deadline {
        return Err(CliError::usage(
            "--policy deadline does not fit a busy loop (its budget would throttle it); use fifo, rr or other",
        ));
    }
    let policy = opts::policy(args.policy, args.priority, Nanos::from_ms(1))?;
    opts::check_max_spikes(args.common.max_spikes)?;
    Ok(NoiseConfig {
        cpus: opts::cpus(&args.cpus)?,
        policy,
        duration: args.duration,
        threshold: args.threshold,
        max_spikes: args.common.max_spikes,
        lock_memory: !args.common.no_mlock,
        stretch: None,
    })
}

pub fn run(args: Args) -> CliResult {
    let cfg = noise_config(&args)?;
    opts::check_output("--json", &args.common.json)?;
    let req = ProbeRequest {
        kind: "noise",
        label: "noise",
        probe: Arc::new(Noise { cfg }),
        loads: opts::load_specs(args.common.load.as_deref())?,
        tracing: args.cause.tracing(),
    };
    let terminal = Terminal::default();
    let session = Session::new(crate::interrupt::stop_flag(), &terminal);
    let rec = session.run(&req, crate::output::rfc3339_now())?.record;
    print_text(&rec)?;
    write_json(&rec, &args.common.json)
}
