//! `punctual watch`: what a running application's threads see — wake-up
//! latency, stolen time by source, period, deadline misses, the offenders
//! behind the slowest wake-ups — from the scheduler's events, with no
//! change to the application. The work is `punctual_measure::watch` over
//! `punctual_trace::watch`; the text is `punctual_report::text::watch`.

use std::path::PathBuf;

use punctual_measure::watch::{self, WatchRequest};
use punctual_units::Nanos;

use crate::error::{CliError, CliResult};
use crate::opts;

#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:
  punctual watch --pid $(pidof pipewire) --duration 30s
  punctual watch --pid 4242 --tid 4250 --period 1ms --json w.json
  punctual watch --pid 4242 --stop-at 500us --duration 10m
  punctual watch --pid 4242 --stop-at 1ms --on-threshold 'echo $PUNCTUAL_VALUE_NS ns, thread $PUNCTUAL_TID'
  punctual watch --pid 4242 --stop-at 2ms --stop-stacks --stop-raw w.dat --stop-trace w.perfetto.json
`punctual forecast w.json` and `punctual advise w.json` read its record as a probe's.
How it works and what it costs: docs/workflows.md")]
pub struct Args {
    /// The process to watch (every thread, unless --tid names some).
    #[arg(long, value_name = "PID", allow_negative_numbers = true)]
    pub pid: i32,
    /// Watch only this thread of the process (repeatable).
    #[arg(long = "tid", value_name = "TID", allow_negative_numbers = true)]
    pub tids: Vec<i32>,
    /// The threads' period, to judge deadline misses by (default: the
    /// period detected from each thread's wake-ups, when it has one).
    #[arg(long, value_name = "T", value_parser = opts::positive_duration)]
    pub period: Option<Nanos>,
    #[arg(long, default_value = "10s", value_parser = opts::positive_duration)]
    pub duration: Nanos,
    /// End the run at the first wake-up later than this (the record keeps
    /// that wake-up and its causes).
    #[arg(long, value_name = "D", value_parser = opts::positive_duration)]
    pub stop_at: Option<Nanos>,
    /// With --stop-at: run this shell command when the threshold is
    /// crossed, with the event in its environment, as `timer`'s:
    /// PUNCTUAL_VALUE_NS (the wake-up's latency), PUNCTUAL_CPU,
    /// PUNCTUAL_AT_NS (from the run's start), PUNCTUAL_MONO_NS
    /// (CLOCK_MONOTONIC), PUNCTUAL_THRESHOLD_NS, PUNCTUAL_KIND (watch),
    /// and PUNCTUAL_TID (the late thread).
    #[arg(long, value_name = "CMD", requires = "stop_at")]
    pub on_threshold: Option<String>,
    /// With --stop-at: write the second before the event as a Perfetto
    /// trace (the slowest wake-ups on each CPU's track, with what filled
    /// each). Written only when the threshold was crossed.
    #[arg(long, value_name = "FILE", requires = "stop_at")]
    pub stop_trace: Option<PathBuf>,
    /// With --stop-at: write the recorder's last second before the stop,
    /// every event raw as the kernel wrote it, as a trace.dat
    /// (`trace-cmd report -i FILE`). Written only when the threshold was
    /// crossed.
    #[arg(long, value_name = "FILE", requires = "stop_at")]
    pub stop_raw: Option<PathBuf>,
    /// With --stop-at: record the kernel stack of every task as it gives
    /// up a CPU (the `stacktrace` trigger, on every CPU), and keep the one
    /// of what held the CPU during the event. Each switch away from a
    /// task then costs its unwinding, on every CPU, the application's
    /// included.
    #[arg(long, requires = "stop_at")]
    pub stop_stacks: bool,
    /// Write the record here (`-`: standard output).
    #[arg(long, value_name = "PATH")]
    pub json: Option<PathBuf>,
    /// Trace ring size per CPU in KiB.
    #[arg(long, default_value_t = 8192)]
    pub buffer_kb: u32,
    /// Slowest wake-ups per thread kept in the record, broken down.
    #[arg(long, default_value_t = 20)]
    pub max_spikes: usize,
    /// Rows in each thread's offenders table.
    #[arg(long, default_value_t = 5)]
    pub top: usize,
}

pub fn run(args: Args) -> CliResult {
    if args.buffer_kb < 64 || args.buffer_kb > 1 << 20 {
        return Err(CliError::usage(format!(
            "--buffer-kb {} is out of range (64 to 1048576)",
            args.buffer_kb
        )));
    }
    opts::check_max_spikes(args.max_spikes)?;
    opts::check_output("--json", &args.json)?;
    opts::check_output("--stop-trace", &args.stop_trace)?;
    opts::check_output("--stop-raw", &args.stop_raw)?;
    let target = watch::target(args.pid, &args.tids)?;
    let req = WatchRequest {
        pid: args.pid,
        tids: args.tids.clone(),
        period: args.period,
        duration: args.duration,
        stop_at: args.stop_at,
        buffer_kb: args.buffer_kb,
        max_spikes: args.max_spikes,
        evidence: punctual_measure::Evidence {
            raw: args.stop_raw.is_some(),
            stacks: args.stop_stacks,
        },
    };
    eprintln!(
        "watching {} ({}), {} thread(s), for {}; Ctrl-C stops and keeps the results",
        target.pid,
        target.command,
        target.threads.len(),
        args.duration
    );
    let mut rec = punctual_measure::session::new_record(
        "watch",
        punctual_live::sysinfo::collect(),
        crate::output::rfc3339_now(),
    );
    let raw = watch::run(&mut rec, &req, &target, crate::interrupt::stop_flag())?;
    let (text, warnings) = punctual_report::text::watch::render(&rec, args.top);
    print!("{text}");
    eprint!("{warnings}");
    if let (Some(p), Some(s)) = (&args.stop_trace, rec.watch().and_then(|w| w.stopped_at)) {
        opts::write_stop_trace(p, &rec, s.at_ns.0)?;
    }
    opts::write_stop_raw(args.stop_raw.as_deref(), &rec, raw.as_ref())?;
    if let (Some(cmd), Some(s)) = (&args.on_threshold, rec.watch().and_then(|w| w.stopped_at)) {
        opts::run_on_threshold(
            cmd,
            &opts::ThresholdEvent {
                kind: "watch",
                value_ns: s.latency_ns.0,
                cpu: s.cpu.into(),
                at_ns: s.at_ns.0,
                mono_ns: rec.started_mono_ns.map_or(0, |o| o.0 + s.at_ns.0),
                threshold_ns: s.threshold_ns.0,
                tid: Some(s.tid),
            },
        );
    }
    crate::output::write_json(&rec, &args.json)
}
