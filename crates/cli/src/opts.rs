//! Value parsers shared by the verbs, so every duration, CPU list and
//! output path is validated the same way and refused with one sentence.

use std::path::{Path, PathBuf};

use punctual_live::rt::Policy;
use punctual_live::spikes::DEFAULT_SPIKE_CAPACITY;
use punctual_live::sysinfo::CpuListError;
use punctual_live::timer::TimerClock;
use punctual_units::{parse_duration, Nanos};

use crate::error::CliError;

/// `--policy` of the probe threads.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum PolicyArg {
    /// SCHED_FIFO at `--priority`.
    Fifo,
    /// SCHED_RR at `--priority`.
    Rr,
    /// SCHED_OTHER (nice 0).
    Other,
    /// SCHED_DEADLINE with the interval as period (timer probe only).
    Deadline,
}

/// `--clock` of the timer probe (`timer`, `cause`).
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClockArg {
    /// Absolute clock_nanosleep.
    Nanosleep,
    /// A timerfd armed with the interval.
    Timerfd,
}

impl From<ClockArg> for TimerClock {
    fn from(c: ClockArg) -> TimerClock {
        match c {
            ClockArg::Nanosleep => TimerClock::Nanosleep,
            ClockArg::Timerfd => TimerClock::Timerfd,
        }
    }
}

/// Turns `--policy`/`--priority` into a policy, refusing an out-of-range
/// priority with one sentence. SCHED_DEADLINE gets runtime = a tenth of the
/// interval (at least 50 us) and deadline = period = interval: enough for
/// a wake-up and a clock read, small enough to pass admission on every CPU.
pub fn policy(policy: PolicyArg, priority: u32, interval: Nanos) -> Result<Policy, CliError> {
    let rt_prio = || {
        if (1..=99).contains(&priority) {
            Ok(priority as u8)
        } else {
            Err(CliError::usage(format!(
                "--priority {priority} is out of range: real-time priorities are 1 to 99"
            )))
        }
    };
    Ok(match policy {
        PolicyArg::Fifo => Policy::Fifo {
            priority: rt_prio()?,
        },
        PolicyArg::Rr => Policy::Rr {
            priority: rt_prio()?,
        },
        PolicyArg::Other => Policy::Other { nice: 0 },
        PolicyArg::Deadline => {
            let runtime = (interval / 10).max(Nanos::from_us(50)).min(interval);
            Policy::Deadline {
                runtime,
                deadline: interval,
                period: interval,
            }
        }
    })
}

/// Resolves `--cpus` against the online CPUs; refuses a list that selects
/// none.
pub fn cpus(s: &str) -> Result<Vec<u32>, CliError> {
    let online = online_cpus();
    let cpus = cpu_list(s, &online)?;
    if cpus.is_empty() {
        return Err(CliError::usage(format!("--cpus '{s}' selects no CPU")));
    }
    Ok(cpus)
}

/// `--max-spikes 0` would keep nothing to look at: refused for every probe.
pub fn check_max_spikes(n: usize) -> Result<(), CliError> {
    if n == 0 {
        return Err(CliError::usage(
            "--max-spikes 0 keeps no spike; give at least 1",
        ));
    }
    Ok(())
}

/// The options every probe verb shares, declared once.
#[derive(clap::Args, Debug)]
pub struct ProbeArgs {
    /// Bound of the spike log (the largest are kept).
    #[arg(long, default_value_t = DEFAULT_SPIKE_CAPACITY)]
    pub max_spikes: usize,
    /// Write the record (JSON) here.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Do not mlockall (memory locking is on by default).
    #[arg(long)]
    pub no_mlock: bool,
    /// Run a load (as `punctual load SPEC`) for exactly the time of the
    /// measurement, e.g. `net`, `cpu:threads=2`, `disk+mem`; what it
    /// achieved goes in the record's `load` section.
    #[arg(long, value_name = "SPEC")]
    pub load: Option<String>,
}

/// `--cause` on the probe verbs (`timer`, `noise`, `check`): the tracefs
/// flight recorder runs beside the real probe, and its events name what
/// filled each spike and each stolen interval of that probe's own record.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct CauseArgs {
    /// Also run the tracefs flight recorder and name what caused each
    /// spike and each stolen interval (needs root; without tracefs one
    /// warning and the probe runs anyway).
    #[arg(long)]
    pub cause: bool,
    /// With --cause: break down only spikes at least this long (default:
    /// every spike the spike log kept).
    #[arg(long = "cause-threshold", value_parser = duration, requires = "cause")]
    pub cause_threshold: Option<Nanos>,
}

impl CauseArgs {
    /// The recorder these flags ask for.
    pub fn tracing(&self) -> punctual_measure::Tracing {
        self.tracing_with(punctual_measure::Evidence::default())
    }

    /// The recorder these flags ask for, keeping `evidence` of a
    /// `--stop-at` event.
    pub fn tracing_with(&self, evidence: punctual_measure::Evidence) -> punctual_measure::Tracing {
        if self.cause {
            punctual_measure::Tracing::Attach {
                threshold: self.cause_threshold,
                evidence,
            }
        } else {
            punctual_measure::Tracing::Off
        }
    }
}

/// `--dma-latency`, `--deepest-idle-state` on the probe verbs (`timer`,
/// `noise`, `check`): the C-states held while the probe runs.
#[derive(clap::Args, Debug, Clone)]
pub struct CStateArgs {
    /// Hold /dev/cpu_dma_latency at this many microseconds while the probe
    /// runs, so no CPU enters an idle state whose exit latency is longer.
    /// The default, 0, is what cyclictest does unless told otherwise, so
    /// the figures compare with the ones people quote; `off` leaves the
    /// C-states free (wake-ups from idle then include the exit latency).
    /// Needs root; without it one warning says what the numbers mean.
    #[arg(long, value_name = "US", default_value = "0", value_parser = dma_latency)]
    pub dma_latency: DmaLatency,
    /// Disable the measured CPUs' cpuidle states deeper than N for the run
    /// (0 leaves only the shallowest, usually polling), put back on every
    /// exit through the restore journal.
    #[arg(long, value_name = "N")]
    pub deepest_idle_state: Option<u32>,
}

/// `--dma-latency`: microseconds to hold, or `off`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DmaLatency(pub Option<u32>);

/// clap value parser for `--dma-latency`: whole microseconds (`0`, `10`,
/// `10us`) or `off`.
pub fn dma_latency(s: &str) -> Result<DmaLatency, String> {
    let t = s.trim();
    if t.eq_ignore_ascii_case("off") {
        return Ok(DmaLatency(None));
    }
    let digits = t.strip_suffix("us").unwrap_or(t);
    digits
        .parse::<u32>()
        .ok()
        .filter(|v| *v <= i32::MAX as u32)
        .map(|v| DmaLatency(Some(v)))
        .ok_or_else(|| {
            format!("'{s}' is not a latency in whole microseconds (use e.g. 0, 10us) or 'off'")
        })
}

impl CStateArgs {
    pub fn request(&self) -> punctual_live::cstate::CStateRequest {
        punctual_live::cstate::CStateRequest {
            dma_latency_us: self.dma_latency.0,
            deepest_idle_state: self.deepest_idle_state,
        }
    }
}

/// `--stop-at`, `--on-threshold` on `timer` and `noise` (cyclictest `-b`,
/// rtla `-a`/`-T`): stop at the first sample over a threshold and keep
/// the evidence.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct StopArgs {
    /// Stop every CPU's probe at the first wake-up later than this (timer)
    /// or stolen gap longer than this (noise); the record keeps the event
    /// (`extra.stopped_at`) and, with --cause, what filled it. Exit status
    /// stays 0: gate on it with --fail-if.
    #[arg(long, value_name = "DURATION", value_parser = positive_duration)]
    pub stop_at: Option<Nanos>,
    /// With --stop-at: run this shell command when the threshold is
    /// crossed, with the event in its environment: PUNCTUAL_VALUE_NS,
    /// PUNCTUAL_CPU, PUNCTUAL_AT_NS (from the run's start),
    /// PUNCTUAL_MONO_NS (CLOCK_MONOTONIC), PUNCTUAL_THRESHOLD_NS,
    /// PUNCTUAL_KIND (timer or noise).
    #[arg(long, value_name = "CMD", requires = "stop_at")]
    pub on_threshold: Option<String>,
    /// With --stop-at: write the last second before the event as a
    /// Perfetto trace (Chrome trace-event JSON, as `report --format
    /// perfetto`): the spikes on each CPU's track, with --cause what
    /// filled each. Written only when the threshold was crossed.
    #[arg(long, value_name = "FILE", requires = "stop_at")]
    pub stop_trace: Option<PathBuf>,
    /// With --stop-at and --cause: write the flight recorder's last second
    /// before the stop, every event raw as the kernel wrote it, as a
    /// trace.dat (`trace-cmd report -i FILE`, KernelShark). Written only
    /// when the threshold was crossed.
    #[arg(long, value_name = "FILE", requires_all = ["stop_at", "cause"])]
    pub stop_raw: Option<PathBuf>,
    /// With --stop-at and --cause: record the kernel stack of every task
    /// as it gives up a probed CPU (the `stacktrace` trigger); the record
    /// and the `stopped at` line keep the one of what held the CPU during
    /// the event. Each stack is unwound inside the switch, so a wake-up
    /// of the probe after a task held its CPU is measured that much later
    /// (bench/stop-stacks-cost.sh measures it).
    #[arg(long, requires_all = ["stop_at", "cause"])]
    pub stop_stacks: bool,
}

/// Writes `--stop-raw` (a trace.dat) when the run stopped: the record has
/// `extra.stopped_at` (a probe's) or `extra.watch.stopped_at` (watch's).
pub fn write_stop_raw(
    path: Option<&std::path::Path>,
    rec: &punctual_record::Record,
    raw: Option<&punctual_trace::tracedat::RawWindow>,
) -> Result<(), CliError> {
    let stopped = rec.extra.contains_key("stopped_at")
        || rec
            .extra
            .get("watch")
            .is_some_and(|w| w.get("stopped_at").is_some_and(|s| !s.is_null()));
    let Some(p) = path.filter(|_| stopped) else {
        return Ok(());
    };
    let Some(raw) = raw else {
        eprintln!("punctual: --stop-raw: the flight recorder did not run, nothing written");
        return Ok(());
    };
    raw.write(p)
        .map_err(|e| CliError::runtime(format!("cannot write --stop-raw {}: {e}", p.display())))?;
    eprintln!(
        "raw trace of the last second written to {} ({} pages; trace-cmd report -i {})",
        p.display(),
        raw.keep.len(),
        p.display()
    );
    Ok(())
}

/// Writes the second before `at` (on the record's time zero) as a
/// Perfetto trace: the spikes on each CPU's track, with what filled each.
pub fn write_stop_trace(
    p: &std::path::Path,
    rec: &punctual_record::Record,
    at: u64,
) -> Result<(), CliError> {
    let from = at.saturating_sub(STOP_TRACE_WINDOW.0);
    let mut window = rec.clone();
    window
        .spikes
        .retain(|s| s.at_ns.0 >= from && s.at_ns.0 <= at);
    let bytes =
        punctual_report::perfetto::render(&[punctual_report::Input::new(rec.kind.clone(), window)]);
    crate::output::write_bytes("--stop-trace", p, &bytes)?;
    eprintln!(
        "trace of the second before the event written to {}",
        p.display()
    );
    Ok(())
}

/// How far before the stopping event `--stop-trace` reaches.
pub const STOP_TRACE_WINDOW: Nanos = Nanos(1_000_000_000);

impl StopArgs {
    /// What the flight recorder keeps for these flags.
    pub fn evidence(&self) -> punctual_measure::Evidence {
        punctual_measure::Evidence {
            raw: self.stop_raw.is_some(),
            stacks: self.stop_stacks,
        }
    }

    /// Writes `--stop-raw` when the run stopped at its threshold.
    pub fn write_raw(
        &self,
        rec: &punctual_record::Record,
        raw: Option<&punctual_trace::tracedat::RawWindow>,
    ) -> Result<(), CliError> {
        write_stop_raw(self.stop_raw.as_deref(), rec, raw)
    }

    /// Writes `--stop-trace` when the run stopped at its threshold.
    pub fn write_trace(&self, rec: &punctual_record::Record) -> Result<(), CliError> {
        let (Some(p), Some(e)) = (&self.stop_trace, rec.extra.get("stopped_at")) else {
            return Ok(());
        };
        let at = e.get("at_ns").and_then(|v| v.as_u64()).unwrap_or(0);
        write_stop_trace(p, rec, at)
    }

    /// Runs `--on-threshold` when the run stopped at its threshold; its
    /// failure is a warning (the measurement stands).
    pub fn on_threshold(&self, rec: &punctual_record::Record) {
        let (Some(cmd), Some(e)) = (&self.on_threshold, rec.extra.get("stopped_at")) else {
            return;
        };
        let num = |k: &str| e.get(k).and_then(|v| v.as_u64()).unwrap_or(0);
        run_on_threshold(
            cmd,
            &ThresholdEvent {
                kind: &rec.kind,
                value_ns: num("value_ns"),
                cpu: num("cpu"),
                at_ns: num("at_ns"),
                mono_ns: num("mono_ns"),
                threshold_ns: num("threshold_ns"),
                tid: None,
            },
        );
    }
}

/// What `--on-threshold`'s command is told about the event that crossed
/// the threshold, the same for every verb that stops at one.
pub struct ThresholdEvent<'a> {
    /// `timer`, `noise` or `watch`.
    pub kind: &'a str,
    pub value_ns: u64,
    pub cpu: u64,
    /// From the run's start.
    pub at_ns: u64,
    /// CLOCK_MONOTONIC, to find the event in other tools' traces.
    pub mono_ns: u64,
    pub threshold_ns: u64,
    /// The late thread (`watch`).
    pub tid: Option<i32>,
}

/// Runs an `--on-threshold` command through `/bin/sh -c` with the event
/// in its environment and waits for it; its failure is a warning (the
/// measurement stands).
pub fn run_on_threshold(cmd: &str, e: &ThresholdEvent) {
    let mut c = std::process::Command::new("/bin/sh");
    c.args(["-c", cmd])
        .env("PUNCTUAL_VALUE_NS", e.value_ns.to_string())
        .env("PUNCTUAL_CPU", e.cpu.to_string())
        .env("PUNCTUAL_AT_NS", e.at_ns.to_string())
        .env("PUNCTUAL_MONO_NS", e.mono_ns.to_string())
        .env("PUNCTUAL_THRESHOLD_NS", e.threshold_ns.to_string())
        .env("PUNCTUAL_KIND", e.kind);
    if let Some(t) = e.tid {
        c.env("PUNCTUAL_TID", t.to_string());
    }
    match c.status() {
        Ok(s) if s.success() => {}
        Ok(s) => eprintln!("punctual: --on-threshold '{cmd}' ended with {s}"),
        Err(err) => eprintln!("punctual: --on-threshold '{cmd}' could not run: {err}"),
    }
}

/// `--samples`, `--samples-max` on `timer` and `noise`: every sample,
/// raw (cyclictest `-v`), in the binary format of docs/record-format.md.
#[derive(clap::Args, Debug, Clone)]
pub struct SampleArgs {
    /// Write every sample here (timer: each wake-up's latency; noise: each
    /// stolen gap), binary: a 32-byte header, then 24 bytes per sample
    /// (docs/record-format.md, "Raw samples").
    #[arg(long, value_name = "FILE")]
    pub samples: Option<PathBuf>,
    /// Most samples --samples keeps, over all CPUs (16 bytes of memory
    /// each while the run goes on, allocated before it starts); later ones
    /// are counted in the record, not kept. 1,000,000 is 8 minutes of two
    /// CPUs at 1 kHz.
    #[arg(
        long,
        value_name = "N",
        default_value_t = 1_000_000,
        requires = "samples"
    )]
    pub samples_max: usize,
}

impl SampleArgs {
    /// The sink the probe threads fill, when `--samples` asks for one;
    /// `--samples-max 0` and an unwritable path are refused before the run.
    pub fn sink(
        &self,
        kind: punctual_live::samples::SampleKind,
    ) -> Result<Option<std::sync::Arc<punctual_live::samples::SampleSink>>, CliError> {
        let Some(p) = &self.samples else {
            return Ok(None);
        };
        if self.samples_max == 0 {
            return Err(CliError::usage(
                "--samples-max 0 keeps no sample; give at least 1",
            ));
        }
        check_output_path("--samples", p)?;
        Ok(Some(std::sync::Arc::new(
            punctual_live::samples::SampleSink::new(kind, self.samples_max),
        )))
    }

    /// Writes what `sink` kept to `--samples` and says so in the record
    /// (`config.samples`) and on standard error.
    pub fn write(
        &self,
        sink: Option<&punctual_live::samples::SampleSink>,
        rec: &mut punctual_record::Record,
    ) -> Result<(), CliError> {
        let (Some(p), Some(sink)) = (&self.samples, sink) else {
            return Ok(());
        };
        let kept = sink.take();
        let origin = rec.started_mono_ns.unwrap_or_default();
        punctual_live::samples::write_file(p, sink.kind, origin, &kept).map_err(|e| {
            CliError::runtime(format!("cannot write --samples {}: {e}", p.display()))
        })?;
        rec.set_config(
            "samples",
            serde_json::json!({
                "path": p.display().to_string(),
                "written": kept.len(),
                "dropped": sink.dropped(),
                "max": sink.max,
            }),
        );
        eprintln!(
            "{} samples written to {}{}",
            kept.len(),
            p.display(),
            if sink.dropped() > 0 {
                format!(" ({} more past --samples-max, not kept)", sink.dropped())
            } else {
                String::new()
            }
        );
        Ok(())
    }
}

/// `--load` text into specs, refused with one sentence (status 2) before
/// anything starts; interrupt routing a killed earlier run left behind is
/// restored first, and said.
pub fn load_specs(text: Option<&str>) -> Result<Vec<punctual_loads::LoadSpec>, CliError> {
    let (specs, restored) = punctual_measure::loads::specs(text)?;
    for m in restored {
        eprintln!("punctual: {m}");
    }
    Ok(specs)
}

/// clap value parser for human durations (`250us`, `1ms`, `5s`, `1h`).
pub fn duration(s: &str) -> Result<Nanos, String> {
    parse_duration(s).map_err(|e| e.to_string())
}

/// Like [`duration`] but refuses zero, and says "greater than zero" for
/// a negative value too (not the "zero or more" of plain durations).
pub fn positive_duration(s: &str) -> Result<Nanos, String> {
    if s.trim_start().starts_with('-') {
        return Err(format!("'{s}' is negative; it must be greater than zero"));
    }
    let d = duration(s)?;
    if d.is_zero() {
        Err(format!("'{s}' is zero; it must be greater than zero"))
    } else {
        Ok(d)
    }
}

/// Parses a CPU list such as `0`, `0,1`, `0-3`, `all` against the CPUs this
/// machine has online.
pub fn cpu_list(s: &str, online: &[u32]) -> Result<Vec<u32>, CliError> {
    let s = s.trim();
    if s == "all" {
        return Ok(online.to_vec());
    }
    let out = punctual_live::sysinfo::parse_cpu_list(s).map_err(|e| match e {
        CpuListError::NotAList => CliError::usage(format!(
            "--cpus '{s}' is not a CPU list (use e.g. 0, 0,1, 0-3 or all)"
        )),
        CpuListError::Backwards(a, b) => {
            CliError::usage(format!("--cpus '{s}': range {a}-{b} is backwards"))
        }
    })?;
    if let Some(c) = out.iter().find(|c| !online.contains(c)) {
        return Err(CliError::usage(format!(
            "--cpus '{s}': CPU {c} is not online on this machine (online: {})",
            crate::output::format_cpus(online)
        )));
    }
    Ok(out)
}

pub use punctual_live::sysinfo::online_cpus;

/// Fails early (before a long run) if an output path cannot be written.
pub fn check_output(flag: &str, path: &Option<PathBuf>) -> Result<(), CliError> {
    if let Some(p) = path {
        check_output_path(flag, p)?;
    }
    Ok(())
}

/// `-` (standard output) is always writable.
pub fn check_output_path(flag: &str, p: &Path) -> Result<(), CliError> {
    if crate::output::is_stdout(p) {
        return Ok(());
    }
    punctual_record::check_writable(p).map_err(|e| CliError::usage(format!("{flag}: {e}")))
}

/// Reads a `--replay` feed: one entry a line, blank lines and `#` comments
/// skipped; a line `parse` refuses is named with its number and text
/// ("'x' is not {what}").
pub fn read_replay<T>(
    path: &Path,
    what: &str,
    parse: impl Fn(&str) -> Option<T>,
) -> Result<Vec<T>, CliError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| CliError::usage(format!("--replay {}: {e}", path.display())))?;
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty() && !l.starts_with('#'))
        .map(|(i, l)| {
            parse(l.trim()).ok_or_else(|| {
                CliError::usage(format!(
                    "--replay {} line {}: '{}' is not {what}",
                    path.display(),
                    i + 1,
                    l.trim()
                ))
            })
        })
        .collect()
}

/// `--replay` of wake-up latencies: one latency in ns a line.
pub fn latency_replay(path: &Path) -> Result<Vec<Nanos>, CliError> {
    read_replay(path, "a latency in ns", |l| {
        l.parse::<u64>().ok().map(Nanos)
    })
}

/// The replayed busy loop's cost per step: a busy loop's order of
/// magnitude.
const REPLAY_STEP: Nanos = Nanos(50);

/// `--replay` of stolen intervals: one `START_NS LEN_NS` a line.
pub fn gap_replay(path: &Path) -> Result<punctual_live::noise::Replay, CliError> {
    let gaps = read_replay(path, "START_NS LEN_NS", |l| {
        let mut f = l
            .split_whitespace()
            .map(|x| x.parse::<u64>().ok().map(Nanos));
        match (f.next(), f.next(), f.next()) {
            (Some(Some(at)), Some(Some(len)), None) => Some((at, len)),
            _ => None,
        }
    })?;
    Ok(punctual_live::noise::Replay::new(REPLAY_STEP, gaps))
}

/// The kernel's probes run the kernel's own threads, whose policy no
/// option changes: a `--policy` or `--priority` given with one is kept out
/// of the run (the record's `config.policy` names the threads' own), and
/// one warning line says so rather than letting the user believe it held.
pub fn warn_kernel_threads_policy(
    given: (Option<PolicyArg>, Option<u32>),
    probe: &str,
    theirs: &str,
) {
    if let Some(msg) = kernel_threads_policy_warning(given, probe, theirs) {
        eprintln!("warning: {msg}");
    }
}

fn kernel_threads_policy_warning(
    given: (Option<PolicyArg>, Option<u32>),
    probe: &str,
    theirs: &str,
) -> Option<String> {
    let opts: Vec<String> = [
        given.0.map(|p| format!("--policy {}", policy_name(p))),
        given.1.map(|p| format!("--priority {p}")),
    ]
    .into_iter()
    .flatten()
    .collect();
    (!opts.is_empty()).then(|| {
        format!(
            "{} does not apply to {probe}: {theirs}, and the record's config.policy says so",
            opts.join(" ")
        )
    })
}

fn policy_name(p: PolicyArg) -> &'static str {
    match p {
        PolicyArg::Fifo => "fifo",
        PolicyArg::Rr => "rr",
        PolicyArg::Other => "other",
        PolicyArg::Deadline => "deadline",
    }
}

/// Whether the kernel's `tracer` can run here: a kernel without it is bad
/// input for `--probe` (exit status 2, the sentence says what to do); one
/// that is in use by another run is a run that cannot be made now.
pub fn kernel_tracer(tracer: punctual_trace::ktracer::Tracer) -> Result<(), CliError> {
    use punctual_trace::ktracer::{check, Unavailable};
    match check(tracer) {
        Ok(()) => Ok(()),
        Err(Unavailable::Missing(m)) => Err(CliError::usage(m)),
        Err(Unavailable::Busy(m)) => Err(CliError::runtime(m)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists() {
        let online = [0, 1];
        assert_eq!(cpu_list("all", &online).unwrap(), vec![0, 1]);
        assert_eq!(cpu_list("0-1", &online).unwrap(), vec![0, 1]);
        assert_eq!(cpu_list("1", &online).unwrap(), vec![1]);
        let e = cpu_list("7", &online).unwrap_err().to_string();
        assert!(e.contains("CPU 7"), "{e}");
        assert!(cpu_list("x", &online).is_err());
    }

    #[test]
    fn policies() {
        let ms = Nanos::from_ms(1);
        assert!(policy(PolicyArg::Fifo, 120, ms).is_err());
        assert!(policy(PolicyArg::Rr, 0, ms).is_err());
        assert_eq!(
            policy(PolicyArg::Fifo, 95, ms).unwrap(),
            Policy::Fifo { priority: 95 }
        );
        assert!(matches!(
            policy(PolicyArg::Deadline, 0, ms).unwrap(),
            Policy::Deadline { runtime, .. } if runtime == Nanos::from_us(100)
        ));
    }

    #[test]
    fn kernel_probe_policy_warning_only_for_given_options() {
        let w = |g| kernel_threads_policy_warning(g, "--probe osnoise", "theirs");
        assert_eq!(w((None, None)), None);
        let both = w((Some(PolicyArg::Rr), Some(80))).unwrap();
        assert!(
            both.starts_with("--policy rr --priority 80 does not apply to --probe osnoise"),
            "{both}"
        );
        let one = w((None, Some(95))).unwrap();
        assert!(one.starts_with("--priority 95 does not apply"), "{one}");
        assert!(!one.contains('\n'));
    }

    #[test]
    fn durations() {
        assert!(positive_duration("0ms").is_err());
        let neg = positive_duration("-1s").unwrap_err();
        assert!(neg.contains("greater than zero"), "{neg}");
        assert!(duration("banana").unwrap_err().contains("banana"));
    }
}
