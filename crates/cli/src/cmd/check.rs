//! `punctual check`: the main job, no flags needed. Platform facts, then
//! the timer probe and the noise probe over all CPUs, then a short
//! plain-language summary. The run (its halves, rounds, verdicts and
//! baseline) is `punctual_measure::check`; its text is
//! `punctual_report::text::check`.

use std::path::PathBuf;
use std::sync::Arc;

use punctual_analysis::profiles::Profile;
use punctual_measure::check::{CheckRequest, DEFAULT_MAX};
use punctual_measure::Session;
use punctual_record::{Metric, Nanos, Record};
use punctual_report::text::check::{self as text, Progress};
use punctual_report::text::{platform, probe};

use crate::error::{CliError, CliResult};
use crate::opts::{self, CStateArgs, CauseArgs};
use crate::output::{rfc3339_now, write_json, Terminal};

#[derive(clap::Args, Debug)]
#[command(
    after_help = "Examples:\n  punctual check\n  punctual check --duration 20s --cpus 1 --json check.json\n  punctual check --load disk:direct,irq-cpu=1 --cause\n  punctual check --duration 20s --fail-on-verdict misses --json check.json\n  punctual check -a 1 -D 20s"
)]
pub struct Args {
    /// Total time: the first half measures wake-up latency, the second
    /// stolen time (`-D` as cyclictest).
    #[arg(short = 'D', long, default_value = "60s", value_parser = opts::positive_duration)]
    pub duration: Nanos,
    /// CPUs to survey: `0`, `0,1`, `0-3` or `all` (`-a` as cyclictest).
    #[arg(short = 'a', long, default_value = "all")]
    pub cpus: String,
    /// Write the record (JSON) here.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Run a load (as `punctual load SPEC`) through both halves, so the
    /// verdicts say how the machine does while it is busy.
    #[arg(long, value_name = "SPEC")]
    pub load: Option<String>,
    /// Keep measuring in rounds of --duration (same probes, same load),
    /// re-forecasting after each, until every selected profile's verdict
    /// is decided (meets or misses) or --max is reached. Ctrl-C keeps
    /// what was measured.
    #[arg(long)]
    pub until_decided: bool,
    /// With --until-decided: the most time to measure in all.
    #[arg(long, value_name = "DURATION", value_parser = opts::positive_duration, requires = "until_decided")]
    pub max: Option<Nanos>,
    /// Give verdicts only for profiles whose name contains NAME
    /// (repeatable; default: every shipped profile).
    #[arg(long = "profile", value_name = "NAME")]
    pub profiles: Vec<String>,
    /// Bound of each half's spike log (the largest are kept). `advise`
    /// edits only logged spikes, so a source that delays more wake-ups
    /// than the log holds stays in the rest; a longer run needs more.
    #[arg(long, default_value_t = punctual_live::spikes::DEFAULT_SPIKE_CAPACITY)]
    pub max_spikes: usize,
    /// Replay wake-up latencies (ns, one per line) instead of measuring
    /// the timer half: for tests and for re-analysing a captured feed.
    #[arg(long, hide = true, value_name = "FILE")]
    pub replay_timer: Option<PathBuf>,
    /// Replay stolen intervals (`START_NS LEN_NS` a line, as `noise
    /// --replay`) instead of measuring the noise half.
    #[arg(long, hide = true, value_name = "FILE")]
    pub replay_noise: Option<PathBuf>,
    /// Say whether this run is worse than a saved check record (the
    /// baseline), profile by profile: worse when this run's 95% interval
    /// of the MTTF lies wholly below the baseline's.
    #[arg(long, value_name = "RECORD")]
    pub baseline: Option<PathBuf>,
    #[command(flatten)]
    pub cause: CauseArgs,
    #[command(flatten)]
    pub c_states: CStateArgs,
    #[command(flatten)]
    pub gates: crate::gates::GateArgs,
}

/// The profiles `--profile` selects (all when none is given); a NAME
/// matching none is refused.
fn selected_profiles(names: &[String]) -> CliResult<Vec<Profile>> {
    let all = punctual_analysis::profiles::builtin();
    if names.is_empty() {
        return Ok(all);
    }
    for n in names {
        if !all.iter().any(|p| p.name.contains(n.as_str())) {
            return Err(CliError::usage(format!(
                "--profile {n}: no workload profile's name contains it (a check without --profile names every profile in its verdicts)"
            )));
        }
    }
    Ok(all
        .into_iter()
        .filter(|p| names.iter().any(|n| p.name.contains(n.as_str())))
        .collect())
}

/// Reads a `--baseline` record: it must hold wake-up latencies.
fn read_baseline(p: &std::path::Path) -> CliResult<Record> {
    if !p.exists() {
        return Err(CliError::usage(format!(
            "--baseline {}: no such file",
            p.display()
        )));
    }
    let r = Record::read(p).map_err(|e| CliError::usage(format!("--baseline: {e}")))?;
    if !r.series.iter().any(|s| s.metric == Metric::Latency) {
        return Err(CliError::usage(format!(
            "--baseline {}: the record has no wake-up latency series to compare with (give a check or timer record)",
            p.display()
        )));
    }
    Ok(r)
}

/// The flags, checked into the run's request (and the gates to enforce
/// on its record).
fn request(args: &Args) -> CliResult<(CheckRequest, crate::gates::Gates)> {
    let cpus = opts::cpus(&args.cpus)?;
    let gates = args.gates.parse()?;
    opts::check_output("--json", &args.json)?;
    if args.duration < Nanos::from_ms(200) {
        return Err(CliError::usage(format!(
            "--duration {} is too short to split between two probes; give at least 200ms",
            args.duration
        )));
    }
    let max = args.max.unwrap_or(DEFAULT_MAX);
    if args.until_decided && max < args.duration {
        return Err(CliError::usage(format!(
            "--max {max} is shorter than one round (--duration {}); give a longer --max or a shorter --duration",
            args.duration
        )));
    }
    let replaying = args.replay_timer.is_some() || args.replay_noise.is_some();
    if replaying && args.cause.cause {
        return Err(CliError::usage(
            "--cause traces a live run; it does not apply to a replayed feed",
        ));
    }
    let profiles = selected_profiles(&args.profiles)?;
    let baseline = match &args.baseline {
        Some(p) => Some((p.display().to_string(), read_baseline(p)?)),
        None => None,
    };
    let timer_replay = match &args.replay_timer {
        Some(p) => Some((p.display().to_string(), opts::latency_replay(p)?)),
        None => None,
    };
    let noise_replay = match &args.replay_noise {
        Some(p) => Some((p.display().to_string(), opts::gap_replay(p)?)),
        None => None,
    };
    opts::check_max_spikes(args.max_spikes)?;
    let req = CheckRequest {
        duration: args.duration,
        max_spikes: args.max_spikes,
        cpus,
        load: args.load.clone(),
        load_specs: opts::load_specs(args.load.as_deref())?,
        timer_replay,
        noise_replay,
        tracing: args.cause.tracing(),
        until_decided: args.until_decided.then_some(max),
        profiles,
        baseline,
        c_states: (!replaying).then(|| args.c_states.request()),
    };
    Ok((req, gates))
}

pub fn run(args: Args) -> CliResult {
    let (req, gates) = request(&args)?;
    let stop = crate::interrupt::stop_flag();
    let terminal = Terminal::default();
    let session = Session::new(Arc::clone(&stop), &terminal);
    println!("== this machine");
    print!(
        "{}",
        platform::platform_text(&punctual_live::sysinfo::collect(), false)
    );
    let show = |p: &Progress| {
        let t = text::progress(p);
        print!("{}", t.out);
        eprint!("{}", t.err);
    };
    let checked = punctual_measure::check::run(&req, &session, &stop, &show, &rfc3339_now)?;
    let rec = &checked.record;
    print!("{}", probe::c_states_line(rec));
    print!("{}", checked.causes);
    println!("\n== summary");
    print!("{}", probe::check_summary(rec));
    print!(
        "{}",
        text::verdicts(
            &checked.verdicts,
            checked.verdicts_from,
            checked.unrepresentative.as_deref()
        )
    );
    if let (Some(c), Some((path, base))) = (&checked.baseline, &req.baseline) {
        print!("{}", text::baseline_heading(path, base));
        print!("{}", punctual_report::text::verdict::baseline(c));
    }
    if !rec.warnings.is_empty() {
        eprintln!("\n== what may hurt, and what to change");
        eprint!("{}", probe::warnings_text(rec));
    }
    write_json(rec, &args.json)?;
    gates.enforce(rec)
}
