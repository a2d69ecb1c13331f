//! `punctual load`: run a bounded stress load on its own and say what it
//! achieved. The loads run in a worker child (this same binary with the
//! hidden `--worker` flag) exactly as they do under a probe's `--load`, so
//! what this verb shows is what a probe's record will carry.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use punctual_loads::{LoadSpec, LoadsOutcome};
use punctual_record::{Record, Source, Warning};
use punctual_units::Nanos;

use crate::error::{CliError, CliResult};
use crate::interrupt::{interrupted, stop_flag};
use crate::opts;

const KINDS_HELP: &str = "\
Kinds and options (KIND[:opt,opt=val…], several joined with '+'):
  net    TCP stream over 127.0.0.1: msg=128K sndbuf= rcvbuf= tx-cpu= rx-cpu= streams=1
         UDP at a fixed rate: udp rate=PPS pkt=1472 rcvbuf= drain=DURATION
  disk   reads of a temporary file: dir=/var/tmp size=256M bs=128K seq|rand
         direct|buffered qd=1 irq-cpu=N cpus=LIST
  cpu    busy threads: threads=1 policy=other|fifo|rr priority=1..99 nice=-20..19
         cpus=LIST duty=100% period=10ms
  mem    streaming copy: size=(4 x LLC, >= 64M) threads=1 cpus=LIST
  timer  short sleeps: threads=8 interval=100us cpus=LIST
  cmd    an external program, no shell: cmd:PROG,ARG,… or `load cmd -- PROG ARGS…`
Examples:
  punctual load net --duration 10s
  punctual load disk:direct,rand,bs=4K,irq-cpu=1 --duration 30s --json disk.json
  punctual load cpu:threads=2,policy=fifo,priority=50,duty=50% --duration 5s
  punctual load net+mem --duration 1m";

#[derive(clap::Args, Debug)]
#[command(after_help = KINDS_HELP)]
pub struct Args {
    /// The load(s): KIND[:opt,opt=val…][+KIND…]; kinds: net, disk, cpu, mem, timer, cmd.
    #[arg(value_name = "SPEC", required_unless_present = "worker")]
    pub spec: Option<String>,
    /// How long the load runs (it stops by itself).
    #[arg(long, short = 'd', value_parser = opts::positive_duration, default_value = "10s")]
    pub duration: Nanos,
    /// Also write the run record (JSON, with the `load` section) here.
    #[arg(long, value_name = "PATH")]
    pub json: Option<PathBuf>,
    /// Internal: be the load worker child of a probe or of `punctual load`.
    #[arg(long, hide = true, value_name = "REQUEST")]
    pub worker: Option<String>,
    /// For `cmd`: the program and its arguments, after `--`.
    #[arg(last = true, value_name = "ARGV")]
    pub argv: Vec<String>,
}

pub fn run(args: Args) -> CliResult {
    if let Some(req) = &args.worker {
        std::process::exit(punctual_loads::worker_main(req));
    }
    let text = args.spec.clone().unwrap_or_default();
    let specs = if !args.argv.is_empty() {
        if text.trim() != "cmd" {
            return Err(CliError::usage(format!(
                "arguments after -- are a program for the 'cmd' kind, but the load is '{text}'"
            )));
        }
        vec![LoadSpec::command(args.argv.clone()).map_err(|e| CliError::usage(e.to_string()))?]
    } else {
        LoadSpec::parse_list(&text).map_err(|e| CliError::usage(e.to_string()))?
    };
    opts::check_output("--json", &args.json)?;
    let flag = stop_flag();
    for m in punctual_loads::irq::recover_stale() {
        eprintln!("punctual: {m}");
    }
    let started_at = crate::output::rfc3339_now();
    let running = punctual_measure::loads::start(&specs, args.duration)?
        .ok_or_else(|| CliError::usage("no load given"))?;
    let t0 = Instant::now();
    eprintln!(
        "punctual load: {} for {} (worker pid {}); Ctrl-C stops early and keeps the figures",
        specs
            .iter()
            .map(|s| s.text.as_str())
            .collect::<Vec<_>>()
            .join(" + "),
        args.duration,
        running.pid()
    );
    let mut was_interrupted = false;
    while Instant::now() < running.deadline() {
        if interrupted(&flag) {
            was_interrupted = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let outcome = running.stop_outcome();
    let ran = Nanos::from_std(t0.elapsed());
    print!("{}", render(&outcome));
    for n in &outcome.notes {
        eprintln!("punctual: {n}");
    }
    if let Some(path) = &args.json {
        let mut rec = Record::new(Source::Measured, "load", punctual_live::sysinfo::collect());
        rec.started_at = started_at;
        rec.duration_ns = ran;
        rec.interrupted = was_interrupted;
        rec.set_config(
            "load",
            specs.iter().map(|s| s.text.clone()).collect::<Vec<_>>(),
        );
        rec.set_config("duration_ns", args.duration.0);
        rec.load = outcome.reports.clone();
        if was_interrupted {
            rec.warnings.push(Warning::Interrupted {
                completed_ns: ran.0,
                asked_ns: args.duration.0,
            });
        }
        for n in &outcome.notes {
            rec.warnings.push(Warning::Other { message: n.clone() });
        }
        crate::output::write_record(&rec, path)?;
    }
    if outcome.reports.is_empty() {
        return Err(CliError::runtime(
            "the loads reported nothing (see the notes above)",
        ));
    }
    command_failure(&outcome.reports).map_or(Ok(()), |m| Err(CliError::runtime(m)))
}

/// A `cmd` load that ended by itself with a failure status or a signal
/// (not the SIGTERM the run sends at its end): the load did not run as
/// asked, so `load` must not exit 0.
fn command_failure(reports: &[punctual_record::LoadReport]) -> Option<String> {
    reports.iter().filter(|r| r.kind == "cmd").find_map(|r| {
        let early = r.achieved.get("exited_early").copied() == Some(1.0);
        match (r.achieved.get("exit_code"), r.achieved.get("exit_signal")) {
            (Some(&c), _) if c != 0.0 => {
                Some(format!("the command ({}) exited with status {c}", r.spec))
            }
            (_, Some(&s)) if early => {
                Some(format!("the command ({}) was killed by signal {s}", r.spec))
            }
            _ => None,
        }
    })
}

/// One block per load, figures in the order a user reads them.
fn render(o: &LoadsOutcome) -> String {
    punctual_report::text::load::reports(&o.reports)
}
