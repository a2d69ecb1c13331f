//! `punctual monitor`: a low-rate timer probe per CPU that runs for weeks,
//! keeping rolling hourly/daily/weekly worst cases and the kernel's
//! stolen-time counters, served on `/metrics` for Prometheus and/or written
//! to a node_exporter textfile, with its state persisted so a restart (even
//! `kill -9`) loses at most one persist interval.
//!
//! The run (probe threads, `/metrics` server, persist loop, held
//! C-states) is `punctual_measure::monitor::Monitor`;
//! its start-up lines are `punctual_report::text::monitor`;
//! the rolling state and its Prometheus text live in
//! `punctual_report::monitor`, behind a `ProbeSource` trait that tests
//! drive with an accelerated clock.

use std::net::{SocketAddr, TcpListener};
use std::path::PathBuf;

use punctual_live::cstate::{CStateHold, CStateRequest};
use punctual_measure::monitor::{load_state, unix_now_ns, Monitor};
use punctual_record::Nanos;
use punctual_report::monitor::MonitorState;
use punctual_report::text::monitor::{self as text, Start, StateFile};

use crate::error::{CliError, CliResult};
use crate::opts;

#[derive(clap::Args, Debug)]
#[command(
    after_help = "Examples:\n  punctual monitor\n  punctual monitor --rate 200 --cpus 1 --state monitor-state.json\n  punctual monitor --listen off --textfile /var/lib/node_exporter/punctual.prom --duration 1h"
)]
pub struct Args {
    /// Wake-ups per second of each CPU's probe (1–10000).
    #[arg(long, default_value_t = 100)]
    pub rate: u32,
    /// CPUs to probe: 0, 0,1, 0-3 or all.
    #[arg(long, default_value = "all")]
    pub cpus: String,
    /// Address for the HTTP /metrics endpoint; `off` disables it.
    #[arg(long, default_value = "127.0.0.1:9634", value_name = "ADDR")]
    pub listen: String,
    /// Also write the metrics to this file (node_exporter textfile
    /// collector), atomically, every persist interval.
    #[arg(long, value_name = "PATH")]
    pub textfile: Option<PathBuf>,
    /// Persist the rolling state here and restore it at start.
    #[arg(long, value_name = "PATH")]
    pub state: Option<PathBuf>,
    /// How often state and textfile are written (what a crash can lose).
    #[arg(long, default_value = "60s", value_parser = opts::positive_duration)]
    pub persist_every: Nanos,
    /// SCHED_FIFO priority of the probe threads (0: SCHED_OTHER).
    #[arg(long, default_value_t = 50)]
    pub priority: u8,
    /// Stop after this long (default: run until Ctrl-C / SIGTERM).
    #[arg(long, value_parser = opts::positive_duration)]
    pub duration: Option<Nanos>,
    /// Hold /dev/cpu_dma_latency at this many microseconds while the
    /// monitor runs (as `timer --dma-latency`). Off by default, unlike the
    /// probe verbs: a monitor runs for weeks, and held C-states would keep
    /// every CPU out of idle all that time; its figures are then what the
    /// machine's own applications meet in its normal power state.
    #[arg(long, value_name = "US", default_value = "off", value_parser = opts::dma_latency)]
    pub dma_latency: opts::DmaLatency,
    /// Disable the monitored CPUs' cpuidle states deeper than N while it
    /// runs, put back on every exit through the restore journal.
    #[arg(long, value_name = "N")]
    pub deepest_idle_state: Option<u32>,
}

/// The flags, checked into the run (CPUs, reporting, C-states) and the
/// state it starts from (restored or new), with the listener bound, so a
/// bad state file or address is refused before the probes start.
fn monitor(a: &Args) -> CliResult<(Monitor, MonitorState, bool)> {
    if !(1..=10_000).contains(&a.rate) {
        return Err(CliError::usage(format!(
            "--rate {} is out of range; use 1 to 10000 wake-ups per second",
            a.rate
        )));
    }
    if a.priority > 99 {
        return Err(CliError::usage(format!(
            "--priority {} is out of range; SCHED_FIFO priorities are 1-99 (0 for SCHED_OTHER)",
            a.priority
        )));
    }
    let cpus = opts::cpu_list(&a.cpus, &opts::online_cpus())?;
    let listen: Option<SocketAddr> = if a.listen == "off" {
        None
    } else {
        Some(a.listen.parse().map_err(|_| {
            CliError::usage(format!(
                "--listen '{}' is not an address like 127.0.0.1:9634 (or 'off')",
                a.listen
            ))
        })?)
    };
    if listen.is_none() && a.textfile.is_none() {
        return Err(CliError::usage(
            "--listen off and no --textfile: the monitor would have nowhere to report",
        ));
    }
    opts::check_output("--textfile", &a.textfile)?;
    opts::check_output("--state", &a.state)?;
    let (state, restored) = match &a.state {
        Some(p) => load_state(p, &cpus, a.rate)?,
        None => (MonitorState::new(&cpus, a.rate, unix_now_ns()), false),
    };
    let listener = match listen {
        Some(addr) => Some(
            TcpListener::bind(addr)
                .map_err(|e| CliError::runtime(format!("cannot listen on {addr}: {e}")))?,
        ),
        None => None,
    };
    let monitor = Monitor {
        cpus,
        rate_hz: a.rate,
        priority: a.priority,
        listener,
        state_path: a.state.clone(),
        textfile: a.textfile.clone(),
        persist_every: a.persist_every,
        duration: a.duration,
        c_states: CStateRequest {
            dma_latency_us: a.dma_latency.0,
            deepest_idle_state: a.deepest_idle_state,
        },
    };
    Ok((monitor, state, restored))
}

pub fn run(a: Args) -> CliResult {
    let (monitor, state, restored) = monitor(&a)?;
    let cpus = monitor.cpus.clone();
    let restarts = state.restarts;
    let address = monitor.listener.as_ref().and_then(|l| l.local_addr().ok());
    let started = |held: &CStateHold| {
        let state = match (&a.state, restored) {
            (Some(p), true) => StateFile::Restored(p, restarts),
            (Some(p), false) => StateFile::New(p),
            _ => StateFile::None,
        };
        eprint!(
            "{}",
            text::start(&Start {
                cpus: &cpus,
                rate_hz: a.rate,
                address,
                textfile: a.textfile.as_deref(),
                state,
                c_states: &held.config(),
                warnings: &held.warnings(),
            })
        );
    };
    let warn = |m: &str| eprintln!("monitor: warning: {m}");
    Ok(monitor.run(state, crate::interrupt::stop_flag(), started, warn)?)
}
