//! `punctual noise`: time stolen from a busy thread per CPU (the
//! oslat/sysjitter measurement), beside what the kernel admits to.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use punctual_live::noise::{NoiseConfig, Replay};
use punctual_measure::{Noise, ProbeRequest, Session};
use punctual_record::Nanos;

use crate::error::{CliError, CliResult};
use crate::opts::{self, CauseArgs, PolicyArg, ProbeArgs};
use crate::output::{print_text, write_json, Terminal};

#[derive(clap::Args, Debug)]
#[command(
    after_help = "Examples:\n  punctual noise --duration 10s\n  punctual noise --cpus 1 --policy other --json n.json\n  punctual noise --cpus 1 --load disk:direct,irq-cpu=1 --cause"
)]
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
    /// Replay stolen intervals (`START_NS LEN_NS`, one per line, starts
    /// from the counter's zero; the first 20 ms are the loop's warm-up)
    /// through the same pipeline on a virtual clock whose loop costs
    /// 50 ns a step, instead of measuring: for tests and for re-analysing
    /// a captured feed. Every CPU replays the same feed.
    #[arg(long, hide = true)]
    pub replay: Option<PathBuf>,
}

/// The replayed loop's cost per step: a busy loop's order of magnitude.
const REPLAY_STEP: Nanos = Nanos(50);

/// Reads a replay feed, refusing a bad line with its number and text.
fn read_replay(path: &Path) -> Result<Replay, CliError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| CliError::usage(format!("--replay {}: {e}", path.display())))?;
    let gaps = text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty() && !l.starts_with('#'))
        .map(|(i, l)| {
            let mut f = l.split_whitespace().map(|x| x.parse::<u64>().map(Nanos));
            match (f.next(), f.next(), f.next()) {
                (Some(Ok(at)), Some(Ok(len)), None) => Ok((at, len)),
                _ => Err(CliError::usage(format!(
                    "--replay {} line {}: '{}' is not START_NS LEN_NS",
                    path.display(),
                    i + 1,
                    l.trim()
                ))),
            }
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Replay::new(REPLAY_STEP, gaps))
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
    let replay = match &args.replay {
        Some(p) => {
            let feed = read_replay(p)?;
            if args.cause.cause {
                return Err(CliError::usage(
                    "--cause traces a live run; it does not apply to --replay",
                ));
            }
            Some(feed)
        }
        None => None,
    };
    let req = ProbeRequest {
        kind: "noise",
        label: "noise",
        probe: Arc::new(Noise { cfg, replay }),
        loads: opts::load_specs(args.common.load.as_deref())?,
        tracing: args.cause.tracing(),
    };
    let terminal = Terminal::default();
    let session = Session::new(crate::interrupt::stop_flag(), &terminal);
    let mut rec = session.run(&req, crate::output::rfc3339_now())?.record;
    if let Some(p) = &args.replay {
        rec.set_config("replay", p.display().to_string());
    }
    print_text(&rec)?;
    write_json(&rec, &args.common.json)
}
