//! `punctual monitor`: a low-rate timer probe per CPU that runs for weeks,
//! keeping rolling hourly/daily/weekly worst cases and the kernel's
//! stolen-time counters, served on `/metrics` for Prometheus and/or written
//! to a node_exporter textfile, with its state persisted so a restart (even
//! `kill -9`) loses at most one persist interval.
//!
//! The probe loop and the `/metrics` server are `punctual_measure::monitor`;
//! the rolling state and its Prometheus text live in
//! `punctual_report::monitor`, behind a `ProbeSource` trait that tests
//! drive with an accelerated clock.

use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use punctual_live::rt::{self, Policy};
use punctual_measure::monitor::{kernel_times, serve, unix_now_ns, LiveTimer};
use punctual_record::Nanos;
use punctual_report::monitor::{drain, KernelTimes, MonitorState};

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

fn load_state(path: &Path, cpus: &[u32], rate: u32) -> CliResult<(MonitorState, bool)> {
    match std::fs::read_to_string(path) {
        Ok(text) => {
            let mut st = MonitorState::from_json(&text).map_err(|e| {
                CliError::usage(format!(
                    "--state {}: {e}; move the file away to start afresh",
                    path.display()
                ))
            })?;
            st.restarts += 1;
            st.rate_hz = rate;
            for c in cpus {
                if !st.cpus.iter().any(|x| x.cpu == *c) {
                    st.cpus.push(punctual_report::monitor::CpuState::new(*c));
                }
            }
            Ok((st, true))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            Ok((MonitorState::new(cpus, rate, unix_now_ns()), false))
        }
        Err(e) => Err(CliError::usage(format!(
            "--state {}: cannot read it: {e}",
            path.display()
        ))),
    }
}

fn persist(state: &Mutex<MonitorState>, a: &Args) -> CliResult {
    let (json, text) = match state.lock() {
        Ok(st) => (st.to_json(), st.exposition(unix_now_ns())),
        Err(_) => return Err(CliError::runtime("monitor state lock poisoned")),
    };
    if let Some(p) = &a.state {
        punctual_record::write_atomic(p, json.as_bytes())
            .map_err(|e| CliError::runtime(format!("cannot write state {}: {e}", p.display())))?;
    }
    if let Some(p) = &a.textfile {
        punctual_record::write_atomic(p, text.as_bytes())
            .map_err(|e| CliError::runtime(format!("cannot write {}: {e}", p.display())))?;
    }
    Ok(())
}

pub fn run(a: Args) -> CliResult {
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
    let restarts = state.restarts;
    let state = Arc::new(Mutex::new(state));
    let listener = match listen {
        Some(addr) => Some(
            TcpListener::bind(addr)
                .map_err(|e| CliError::runtime(format!("cannot listen on {addr}: {e}")))?,
        ),
        None => None,
    };
    let stop = crate::interrupt::stop_flag();
    let probes_stop = Arc::new(AtomicBool::new(false));

    let mut held = punctual_live::cstate::CStateHold::hold(
        punctual_live::cstate::CStateRequest {
            dma_latency_us: a.dma_latency.0,
            deepest_idle_state: a.deepest_idle_state,
        },
        &cpus,
    );
    // One line, the first: whoever starts the monitor may read just it (the
    // address) and close the pipe.
    eprintln!(
        "monitor: CPUs {} at {} Hz{}{}{}, {}",
        crate::output::format_cpus(&cpus),
        a.rate,
        listener
            .as_ref()
            .and_then(|l| l.local_addr().ok())
            .map(|ad| format!(", serving http://{ad}/metrics"))
            .unwrap_or_default(),
        a.textfile
            .as_ref()
            .map(|p| format!(", textfile {}", p.display()))
            .unwrap_or_default(),
        match (&a.state, restored) {
            (Some(p), true) => format!(", state {} restored (restart {restarts})", p.display()),
            (Some(p), false) => format!(", new state {}", p.display()),
            _ => String::new(),
        },
        punctual_report::text::probe::c_states_text(&held.config()).trim_end()
    );
    for w in held.warnings() {
        eprintln!("monitor: warning: {w}");
    }
    if let Some(l) = &listener {
        if let Ok(ad) = l.local_addr() {
            if !ad.ip().is_loopback() {
                eprintln!("monitor: note: {ad} is reachable from other machines; /metrics has no authentication");
            }
        }
    }

    let period = Nanos(1_000_000_000 / a.rate as u64);
    let mut threads = Vec::new();
    for &cpu in &cpus {
        let st = Arc::clone(&state);
        let ps = Arc::clone(&probes_stop);
        let prio = a.priority;
        threads.push(std::thread::spawn(move || {
            rt::set_thread_name(&format!("punctual-mon{cpu}"));
            if let Err(e) = rt::pin_to_cpu(cpu) {
                eprintln!("monitor: warning: cannot pin to CPU {cpu} ({e}); its numbers may mix CPUs");
            }
            let _guard = if prio > 0 {
                match rt::set_policy(Policy::Fifo { priority: prio }) {
                    Ok(g) => Some(g),
                    Err(e) => {
                        if cpu == cpus_first(&st) {
                            eprintln!("monitor: warning: SCHED_FIFO {prio} refused ({e}); measuring SCHED_OTHER latency, which is far worse; run as root or grant CAP_SYS_NICE");
                        }
                        None
                    }
                }
            } else {
                None
            };
            let mut src = LiveTimer::new(cpu, period, Arc::clone(&ps));
            drain(&mut src, &st, || !ps.load(Ordering::Relaxed));
        }));
    }
    let server = listener.map(|l| {
        let st = Arc::clone(&state);
        let ps = Arc::clone(&probes_stop);
        std::thread::spawn(move || serve(l, st, ps))
    });

    let start = Instant::now();
    let mut last_kernel: Vec<(u32, KernelTimes)> = kernel_times();
    let mut last_persist = Instant::now();
    let every = a.persist_every.to_std();
    let mut result = Ok(());
    loop {
        std::thread::sleep(Duration::from_millis(100));
        let ended = crate::interrupt::interrupted(&stop)
            || a.duration.is_some_and(|d| start.elapsed() >= d.to_std());
        if ended || last_persist.elapsed() >= every {
            let now_k = kernel_times();
            if let Ok(mut st) = state.lock() {
                for (cpu, k) in &now_k {
                    if let Some((_, old)) = last_kernel.iter().find(|(c, _)| c == cpu) {
                        st.add_kernel(
                            *cpu,
                            KernelTimes {
                                irq_ns: k.irq_ns.saturating_sub(old.irq_ns),
                                softirq_ns: k.softirq_ns.saturating_sub(old.softirq_ns),
                                steal_ns: k.steal_ns.saturating_sub(old.steal_ns),
                            },
                        );
                    }
                }
            }
            last_kernel = now_k;
            if let Err(e) = persist(&state, &a) {
                result = Err(e);
                break;
            }
            last_persist = Instant::now();
        }
        if ended {
            break;
        }
    }
    probes_stop.store(true, Ordering::Relaxed);
    for t in threads {
        let _ = t.join();
    }
    if let Some(s) = server {
        let _ = s.join();
    }
    for p in held.release() {
        eprintln!("monitor: warning: could not put the idle states back: {p}");
    }
    // The probes' last samples since the loop's final persist.
    result.and_then(|_| persist(&state, &a))
}

fn cpus_first(st: &Mutex<MonitorState>) -> u32 {
    st.lock()
        .ok()
        .and_then(|s| s.cpus.first().map(|c| c.cpu))
        .unwrap_or(0)
}
