//! `punctual cause`: run a probe beside the tracefs flight recorder and
//! name what filled every spike and every stolen interval.

use std::path::PathBuf;

use clap::ValueEnum;
use punctual_record::{Metric, Platform, Record, Source, Stolen, Warning};
use punctual_trace::probe::{self, ProbeConfig, ProbeKind};
use punctual_trace::recorder::{FlightRecorder, Options};
use punctual_trace::tracefs::{cleanup_stale, JOURNAL_DIR};
use punctual_units::Nanos;

use crate::error::{CliError, CliResult};
use crate::opts;

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ProbeArg {
    /// Periodic timer thread: wake-up latency spikes.
    Timer,
    /// Busy-polling thread: stolen intervals.
    Noise,
}

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Which probe runs beside the recorder.
    #[arg(long, value_enum, default_value = "timer")]
    pub probe: ProbeArg,
    /// CPUs to probe and trace: 0, 0,1, 0-3 or all.
    #[arg(long, default_value = "all")]
    pub cpus: String,
    #[arg(long, default_value = "10s", value_parser = opts::positive_duration)]
    pub duration: Nanos,
    /// Timer probe period.
    #[arg(long, default_value = "1ms", value_parser = opts::positive_duration)]
    pub interval: Nanos,
    /// SCHED_FIFO priority of the probe (0: SCHED_OTHER).
    #[arg(long, default_value_t = 95)]
    pub priority: u8,
    /// What counts as a spike: a wake-up later than this (timer), or a
    /// gap longer than this (noise, default 2us).
    #[arg(long = "cause-threshold", value_parser = opts::duration)]
    pub cause_threshold: Option<Nanos>,
    /// Spikes kept (and attributed) per CPU: the largest.
    #[arg(long, default_value_t = 1000)]
    pub max_spikes: usize,
    /// Trace ring size per CPU in KiB.
    #[arg(long, default_value_t = 4096)]
    pub buffer_kb: u32,
    /// Rows in the top-offenders tables.
    #[arg(long, default_value_t = 10)]
    pub top: usize,
    /// Spikes shown with their breakdown.
    #[arg(long, default_value_t = 10)]
    pub show_spikes: usize,
    /// Write the record (with causes) here as JSON.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Run without the recorder (to measure its overhead).
    #[arg(long)]
    pub no_trace: bool,
    /// Also record sched:sched_wakeup (adds a ring write to every wake-up
    /// path; attribution does not need it).
    #[arg(long)]
    pub wakeups: bool,
    /// Inject a known noise source: the SCHED_FIFO 99 `noisy-neighbor`
    /// (1 ms every 10.37 ms) on the first probed CPU.
    #[arg(long)]
    pub neighbor: bool,
    /// Run a load (as `punctual load SPEC`) for exactly the probe's time, so
    /// the recorder names what it steals, e.g. `disk:direct,irq-cpu=1`.
    #[arg(long, value_name = "SPEC")]
    pub load: Option<String>,
    /// Restore tracefs after a run that was killed (SIGKILL), then exit.
    #[arg(long)]
    pub cleanup: bool,
}

pub fn run(args: Args) -> CliResult {
    if args.cleanup {
        return cleanup();
    }
    let online = opts::online_cpus();
    let cpus = opts::cpu_list(&args.cpus, &online)?;
    let load_specs = super::load::probe_load_specs(args.load.as_deref())?;
    if args.priority > 99 {
        return Err(CliError::usage(format!(
            "--priority {} is out of range (0 for SCHED_OTHER, 1-99 for SCHED_FIFO)",
            args.priority
        )));
    }
    if args.buffer_kb < 64 || args.buffer_kb > 1 << 20 {
        return Err(CliError::usage(format!(
            "--buffer-kb {} is out of range (64 to 1048576)",
            args.buffer_kb
        )));
    }
    if args.max_spikes == 0 {
        return Err(CliError::usage(
            "--max-spikes 0 keeps nothing to attribute; use 1 or more",
        ));
    }
    opts::check_output("--json", &args.json)?;
    let kind = match args.probe {
        ProbeArg::Timer => ProbeKind::Timer,
        ProbeArg::Noise => ProbeKind::Noise,
    };
    let threshold = args.cause_threshold.unwrap_or(match kind {
        ProbeKind::Timer => Nanos::from_us(100),
        ProbeKind::Noise => Nanos::from_us(2),
    });
    let stop = crate::interrupt::stop_flag();

    let mut rec = Record::new(Source::Measured, "cause", Platform::default());
    rec.started_at = crate::output::rfc3339_now();
    rec.set_config("probe", format!("{:?}", args.probe).to_lowercase());
    rec.set_config("cpus", opts::format_cpus(&cpus));
    rec.set_config("duration_ns", args.duration.0);
    rec.set_config("interval_ns", args.interval.0);
    rec.set_config("priority", args.priority);
    rec.set_config("cause_threshold_ns", threshold.0);
    rec.set_config("buffer_kb", args.buffer_kb);
    rec.set_config("tracing", !args.no_trace);
    rec.set_config("neighbor", args.neighbor);
    rec.set_config("wakeups", args.wakeups);

    let recorder = if args.no_trace {
        None
    } else {
        let o = Options {
            buffer_kb: args.buffer_kb,
            wakeups: args.wakeups,
            ..Options::default()
        };
        match FlightRecorder::start(&cpus, &o) {
            Ok(r) => Some(r),
            Err(e) => {
                let w = Warning::NoTracing { reason: e.0 };
                eprintln!("punctual: {}", w.message());
                rec.warnings.push(w);
                None
            }
        }
    };
    let neighbor = if args.neighbor {
        match punctual_live::inject::NoisyNeighbor::start(punctual_live::inject::NeighborConfig {
            cpu: cpus[0],
            ..Default::default()
        }) {
            Ok(n) => Some(n),
            Err(e) => {
                return Err(CliError::runtime(format!("--neighbor: {e}")));
            }
        }
    } else {
        None
    };
    eprintln!(
        "punctual cause: {} probe on CPU {} for {}{}…",
        format!("{:?}", args.probe).to_lowercase(),
        opts::format_cpus(&cpus),
        args.duration,
        if recorder.is_some() {
            " with the flight recorder"
        } else {
            ""
        }
    );
    let cfg = ProbeConfig {
        kind,
        interval: args.interval,
        duration: args.duration,
        priority: args.priority,
        threshold,
        max_spikes: args.max_spikes,
    };
    let loads = super::load::start_loads(&load_specs, args.duration)?;
    let runs = probe::run(&cpus, &cfg, stop.clone());
    super::load::finish_loads(loads, &load_specs, &mut rec);
    let neighbor_report = neighbor.map(|n| n.stop());
    let trace = match recorder.map(|r| r.stop()) {
        Some(Ok(t)) => Some(t),
        Some(Err(e)) => {
            let w = Warning::NoTracing { reason: e.0 };
            eprintln!("punctual: {}", w.message());
            rec.warnings.push(w);
            None
        }
        None => None,
    };

    // The record.
    let origin = runs
        .iter()
        .map(|r| r.thread.origin)
        .min()
        .unwrap_or_default();
    rec.started_mono_ns = Some(origin);
    let span = runs.iter().map(|r| r.thread.span).max().unwrap_or_default();
    rec.duration_ns = span;
    rec.interrupted = crate::interrupt::interrupted(&stop);
    if rec.interrupted {
        rec.warnings.push(Warning::Interrupted {
            completed_ns: span.0,
            asked_ns: args.duration.0,
        });
    }
    let mut probes = Vec::new();
    for r in runs {
        if let Some(reason) = &r.realtime_refused {
            rec.warnings.push(Warning::NoRealtimePolicy {
                asked: format!("fifo:{}", args.priority),
                reason: reason.clone(),
            });
        }
        if let Some(reason) = &r.pin_refused {
            rec.warnings.push(Warning::NoAffinity {
                cpu: r.thread.cpu,
                reason: reason.clone(),
            });
        }
        let cpu = r.thread.cpu;
        let (name, metric) = match kind {
            ProbeKind::Timer => (format!("cpu{cpu}.latency"), Metric::Latency),
            ProbeKind::Noise => (format!("cpu{cpu}.gap"), Metric::Gap),
        };
        let mut s = r.values.to_series(&name, metric);
        s.cpu = Some(cpu);
        rec.series.push(s);
        if kind == ProbeKind::Noise {
            let observed = r.thread.span.saturating_sub(r.paused);
            rec.stolen.push(Stolen {
                cpu,
                task: None,
                observed_ns: observed,
                total_ns: r.stolen_total,
                fraction: if observed.is_zero() {
                    0.0
                } else {
                    r.stolen_total.0 as f64 / observed.0 as f64
                },
                intervals: r.stolen_count,
                max_ns: r.stolen_max,
                threshold_ns: threshold,
                loop_cost_ns: None,
                timeline: r.timeline,
                by_source: Vec::new(),
                kernel_view: None,
            });
        }
        rec.spikes.extend(r.spikes);
        rec.spikes_dropped += r.spikes_dropped;
        probes.push(r.thread);
    }
    rec.spikes.sort_by_key(|s| (s.at_ns, s.cpu));
    if let Some(n) = &neighbor_report {
        rec.extra.insert(
            "neighbor".into(),
            serde_json::json!({
                "name": "noisy-neighbor",
                "tid": n.thread_id,
                "bursts": n.bursts,
                "spun_ns": n.spun.0,
                "ran_for_ns": n.ran_for.0,
            }),
        );
    }

    // Attribution and the report.
    let mut out = String::new();
    for s in &rec.series {
        out.push_str(&format!(
            "{:<14} {:>9} samples  p50 {:>9}  p99 {:>9}  max {:>9}{}\n",
            s.name,
            s.count,
            s.percentiles.p50.to_string(),
            s.percentiles.p99.to_string(),
            s.max.to_string(),
            if s.missed > 0 {
                format!("  missed {}", s.missed)
            } else {
                String::new()
            }
        ));
    }
    for st in &rec.stolen {
        out.push_str(&format!(
            "cpu{}: {} stolen in {} intervals over {} ({:.3}%), longest {}\n",
            st.cpu,
            st.total_ns,
            st.intervals,
            st.observed_ns,
            st.fraction * 100.0,
            st.max_ns
        ));
    }
    out.push('\n');
    if let Some(t) = &trace {
        let sum = t.attribute(&mut rec, &probes);
        out.push_str(&crate::attach::report(
            &sum,
            &rec,
            args.top,
            args.show_spikes,
        ));
    }
    if let Some(n) = &neighbor_report {
        out.push_str(&format!(
            "noisy-neighbor/{}: {} bursts, spun {} (its own measurement)\n",
            n.thread_id, n.bursts, n.spun
        ));
    }
    out.push_str(&super::load::load_lines(&rec));
    print!("{out}");
    for w in &rec.warnings {
        if !matches!(w, Warning::NoTracing { .. }) {
            eprintln!("warning: {}", w.message());
        }
    }
    if let Some(p) = &args.json {
        crate::output::write_record(&rec, p)?;
    }
    Ok(())
}

fn cleanup() -> CliResult {
    let rep = cleanup_stale(std::path::Path::new(JOURNAL_DIR));
    if rep.actions.is_empty() && rep.problems.is_empty() {
        println!("nothing to clean up: no tracing state left by a punctual run");
    }
    for a in &rep.actions {
        println!("{a}");
    }
    for p in &rep.problems {
        eprintln!("punctual: {p}");
    }
    if rep.problems.is_empty() {
        Ok(())
    } else {
        Err(CliError::runtime(format!(
            "{} cleanup step(s) failed",
            rep.problems.len()
        )))
    }
}
