//! `punctual noise`: time stolen from a busy thread per CPU (the
//! oslat/sysjitter measurement), beside what the kernel admits to.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use punctual_live::noise::{self as probe, NoiseConfig};
use punctual_record::{Nanos, Record};
use punctual_trace::recorder::ProbeGaps;

use super::timer::{
    check_max_spikes, finish_record, new_record, parse_cpus, parse_policy, run_probe,
    set_probe_config, warnings_text, ProbeSettings,
};
use crate::error::{CliError, CliResult};
use crate::opts;
use crate::output::write_json;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// CPUs to poll: `0`, `0,1`, `0-3` or `all`.
    #[arg(long, default_value = "all")]
    pub cpus: String,
    /// Scheduling policy of the polling threads: fifo, rr or other. At fifo
    /// the kernel's RT throttling still leaves other tasks their share
    /// (punctual pauses by itself when throttling is off).
    #[arg(long, default_value = "fifo")]
    pub policy: String,
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
    pub common: super::timer::ProbeArgs,
}

pub fn noise_config(args: &Args) -> Result<NoiseConfig, CliError> {
    let policy = parse_policy(&args.policy, args.priority, Nanos::from_ms(1))?;
    if matches!(policy, punctual_live::rt::Policy::Deadline { .. }) {
        return Err(CliError::usage(
            "--policy deadline does not fit a busy loop (its budget would throttle it); use fifo, rr or other",
        ));
    }
    check_max_spikes(args.common.max_spikes)?;
    Ok(NoiseConfig {
        cpus: parse_cpus(&args.cpus)?,
        policy,
        duration: args.duration,
        threshold: args.threshold,
        max_spikes: args.common.max_spikes,
        lock_memory: !args.common.no_mlock,
        stretch: None,
    })
}

pub fn set_noise_config(rec: &mut Record, cfg: &NoiseConfig, prefix: &str) {
    set_probe_config(
        rec,
        prefix,
        ProbeSettings {
            cpus: &cfg.cpus,
            policy: cfg.policy,
            duration: cfg.duration,
            max_spikes: cfg.max_spikes,
            lock_memory: cfg.lock_memory,
        },
    );
    rec.set_config(
        &format!("{prefix}threshold_ns"),
        cfg.threshold
            .map(|t| serde_json::json!(t.0))
            .unwrap_or(serde_json::json!("auto")),
    );
    if let Some((on, rest)) = cfg.stretch {
        rec.set_config(
            &format!("{prefix}stretch"),
            serde_json::json!({"poll_ns": on.0, "rest_ns": rest.0}),
        );
    }
}

/// Gaps kept per CPU for the flight recorder's interval-by-interval split
/// (16 bytes each: 16 MiB per CPU; this machine's idle noise fills it in
/// about half an hour, after which later gaps are counted, not split).
pub const GAP_LOG_CAP: usize = 1 << 20;

/// Runs the noise probe; with `keep_gaps` each CPU also logs its stolen
/// intervals (at most [`GAP_LOG_CAP`]) so `--cause` can split every one.
pub fn run_noise_probe(
    cfg: &NoiseConfig,
    stop: Arc<AtomicBool>,
    label: &str,
    keep_gaps: bool,
) -> Result<probe::NoiseOutcome, CliError> {
    let c2 = cfg.clone();
    let cap = if keep_gaps { GAP_LOG_CAP } else { 0 };
    run_probe(label, cfg.cpus.len(), cfg.duration, move |p| {
        probe::run_logging_gaps(&c2, cap, stop, p)
    })
}

/// Each CPU's logged gaps on the record's time zero (gap starts are
/// relative to each thread's own start), as the flight recorder splits
/// them.
pub fn noise_gaps(out: &probe::NoiseOutcome) -> Vec<ProbeGaps> {
    out.per_cpu
        .iter()
        .map(|r| ProbeGaps {
            cpu: r.cpu,
            gaps: r
                .proc_
                .gap_log()
                .iter()
                .map(|&(at, len)| (at + r.offset, len))
                .collect(),
            dropped: r.proc_.gap_log_dropped(),
            loop_cost: r.stats.min_step,
        })
        .collect()
}

/// (CPU, thread id) of each polling thread, for the flight recorder.
pub fn noise_tids(out: &probe::NoiseOutcome) -> Vec<(u32, i32)> {
    out.per_cpu.iter().map(|r| (r.cpu, r.tid)).collect()
}

fn pct(x: f64) -> String {
    format!("{:.3}%", x * 100.0)
}

/// Terminal table of stolen time, one row per CPU, with the kernel's view.
pub fn stolen_table(rec: &Record) -> String {
    let mut out = format!(
        "{:<5} {:>9} {:>10} {:>9} {:>10} {:>9} {:>10} {:>9} | {:>9} {:>9} {:>9} {:>9}\n",
        "cpu",
        "observed",
        "stolen",
        "fraction",
        "intervals",
        "max gap",
        "threshold",
        "loop",
        "k.irq",
        "k.softirq",
        "k.steal",
        "k.admits"
    );
    for s in &rec.stolen {
        let (irq, soft, steal, admits) = match &s.kernel_view {
            Some(k) => {
                let sum = k.irq_ns + k.softirq_ns + k.steal_ns;
                let admits = if s.total_ns.is_zero() {
                    "-".to_string()
                } else {
                    format!("{:.0}%", 100.0 * sum.0 as f64 / s.total_ns.0 as f64)
                };
                (
                    k.irq_ns.to_string(),
                    k.softirq_ns.to_string(),
                    k.steal_ns.to_string(),
                    admits,
                )
            }
            None => ("-".into(), "-".into(), "-".into(), "-".into()),
        };
        out.push_str(&format!(
            "{:<5} {:>9} {:>10} {:>9} {:>10} {:>9} {:>10} {:>9} | {:>9} {:>9} {:>9} {:>9}\n",
            s.cpu,
            s.observed_ns.to_string(),
            s.total_ns.to_string(),
            pct(s.fraction),
            s.intervals,
            s.max_ns.to_string(),
            s.threshold_ns.to_string(),
            s.loop_cost_ns.unwrap_or_default().to_string(),
            irq,
            soft,
            steal,
            admits
        ));
    }
    out.push_str("k.* = the kernel's own accounting (/proc/stat) over the same run; k.admits = its share of the stolen time measured\n");
    out
}

pub fn run(args: Args) -> CliResult {
    let cfg = noise_config(&args)?;
    opts::check_output("--json", &args.common.json)?;
    let load_specs = super::load::probe_load_specs(args.common.load.as_deref())?;
    let stop = crate::interrupt::stop_flag();
    let platform = punctual_live::sysinfo::collect();
    let mut rec = new_record("noise", platform);
    set_noise_config(&mut rec, &cfg, "");
    let loads = super::load::start_loads(&load_specs, cfg.duration)?;
    let tracing = crate::attach::start(&args.common.cause, &cfg.cpus, &mut rec);
    let out = run_noise_probe(&cfg, stop, "noise", tracing.is_some())?;
    super::load::finish_loads(loads, &load_specs, &mut rec);
    let elapsed = out.elapsed;
    let probes = crate::attach::threads(&noise_tids(&out), out.origin, elapsed);
    let gaps = noise_gaps(&out);
    out.fill(&mut rec, cfg.max_spikes);
    let causes = crate::attach::finish(tracing, &mut rec, &probes, &gaps, "stolen time");
    finish_record(&mut rec, elapsed, cfg.duration);
    print!("{}", stolen_table(&rec));
    print!("{}", super::load::load_lines(&rec));
    print!("{causes}");
    if !rec.warnings.is_empty() {
        eprintln!("warnings:");
        eprint!("{}", warnings_text(&rec));
    }
    write_json(&rec, &args.common.json)
}
