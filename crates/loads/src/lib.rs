//! Bounded, self-stopping stress loads on this machine: loopback network
//! streams, disk reads, CPU competitors, memory traffic, timer storms and
//! external commands.
//!
//! Latency measured on an idle machine tells a user little (Cota-Robles & Held measured
//! under office, game and web loads; Regehr's thesis under a TCP stream and disk
//! reads). Every probe takes `--load KIND[:opts][+KIND…]`; this crate parses
//! that, runs the loads for exactly the probe's duration and returns what
//! they achieved, for the record's `load` section.
//!
//! # Loads live in a child process
//!
//! [`Loads::start`] runs the loads in a worker child (`punctual load
//! --worker`), never in the caller, so that nothing outlives the run:
//!
//! - every worker thread checks the deadline itself, so loads stop on time
//!   even if nobody tells them;
//! - the child watches a pipe from the parent (its stdin): end-of-file —
//!   the parent stopping it, exiting or being SIGKILLed — stops the loads;
//! - `PR_SET_PDEATHSIG` (SIGTERM, handled as a stop) backs the pipe up, set
//!   from a keeper thread that lives as long as the loads, since the kernel
//!   ties that signal to the thread that forked;
//! - a stopping worker removes what it made: its temporary file has no name
//!   (`O_TMPFILE`), interrupt routes are restored from a journal
//!   (see [`irq`]), and `cmd` programs get SIGTERM then SIGKILL.
//!
//! The child starts with SCHED_OTHER and all online CPUs whatever the
//! caller's thread had, so a pinned real-time probe does not hand its
//! policy or CPU to its competitors; loads use real-time policies only when
//! a spec asks (`cpu:policy=fifo`).
//!
//! ```no_run
//! use punctual_loads::{LoadSpec, Loads};
//! use punctual_units::Nanos;
//!
//! let specs = LoadSpec::parse_list("net+disk:direct,irq-cpu=1")?;
//! let running = Loads::start(&specs, Nanos::from_secs(10))?;
//! // … measure for 10 s …
//! let reports = running.stop(); // Vec<punctual_record::LoadReport>
//! for r in &reports {
//!     println!("{} {:?}", r.spec, r.achieved);
//! }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use punctual_record::LoadReport;
use punctual_units::Nanos;
use serde::{Deserialize, Serialize};

mod cmd;
mod cpu;
mod disk;
pub mod irq;
mod mem;
mod net;
pub mod spec;
mod timer;
mod util;

pub use spec::{Kind, LoadSpec, SpecError};
pub use util::online_cpus;

/// Why loads could not start.
#[derive(Debug, Clone, PartialEq)]
pub enum LoadError {
    /// The spec text does not parse.
    Spec(SpecError),
    /// The spec parses but cannot be used here (unwritable dir, missing
    /// program, no O_DIRECT): the user's to fix.
    Invalid(String),
    /// Something failed that the user could not have known.
    Runtime(String),
}

impl LoadError {
    /// Whether this is bad input (exit status 2) rather than a failed run.
    pub fn is_usage(&self) -> bool {
        matches!(self, LoadError::Spec(_) | LoadError::Invalid(_))
    }
}

impl std::fmt::Display for LoadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LoadError::Spec(e) => e.fmt(f),
            LoadError::Invalid(m) | LoadError::Runtime(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for LoadError {}

impl From<SpecError> for LoadError {
    fn from(e: SpecError) -> Self {
        LoadError::Spec(e)
    }
}

/// A load set up (files laid out, sockets connected) but not yet running,
/// so that all loads of a spec start together.
pub(crate) trait Prepared: Send {
    fn start(self: Box<Self>, ctl: util::Ctl) -> Box<dyn Running>;
}

/// A started load; `finish` waits for its workers (which stop at the
/// deadline or the stop flag) and says what they achieved.
pub(crate) trait Running: Send {
    fn finish(self: Box<Self>) -> util::Outcome;
}

/// What a set of loads achieved, and sentences about anything that did not
/// go as asked (a refused policy, an interrupt that could not be routed).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LoadsOutcome {
    pub reports: Vec<LoadReport>,
    pub notes: Vec<String>,
}

/// Loads running in this process. Prefer [`Loads::start`]: these threads
/// die with this process but a `cmd` program or a routed interrupt is only
/// cleaned up if it ends normally. The worker child runs one of these.
pub struct Engine {
    stop: Arc<AtomicBool>,
    deadline: Instant,
    running: Vec<(LoadSpec, Box<dyn Running>)>,
}

impl Engine {
    /// Sets every load up, then starts them together for `duration`.
    pub fn start(specs: &[LoadSpec], duration: Nanos) -> Result<Engine, LoadError> {
        Engine::start_with_stop(specs, duration, Arc::new(AtomicBool::new(false)))
    }

    /// As [`Engine::start`], with a stop flag that also aborts set-up (a
    /// large disk layout) when raised.
    pub fn start_with_stop(
        specs: &[LoadSpec],
        duration: Nanos,
        stop: Arc<AtomicBool>,
    ) -> Result<Engine, LoadError> {
        let mut prepared = Vec::new();
        for s in specs {
            let p = match &s.kind {
                Kind::Net(o) => net::prepare(o)?,
                Kind::Disk(o) => disk::prepare(o, &stop)?,
                Kind::Cpu(o) => cpu::prepare(o)?,
                Kind::Mem(o) => mem::prepare(o)?,
                Kind::Timer(o) => timer::prepare(o)?,
                Kind::Cmd(o) => cmd::prepare(o)?,
            };
            prepared.push((s.clone(), p));
        }
        let start = Instant::now();
        let ctl = util::Ctl {
            stop: stop.clone(),
            start,
            deadline: start + duration.to_std(),
        };
        let running = prepared
            .into_iter()
            .map(|(s, p)| (s, p.start(ctl.clone())))
            .collect();
        Ok(Engine {
            stop,
            deadline: ctl.deadline,
            running,
        })
    }

    pub fn deadline(&self) -> Instant {
        self.deadline
    }

    /// Raising it ends every load early.
    pub fn stop_flag(&self) -> Arc<AtomicBool> {
        self.stop.clone()
    }

    /// Stops the loads (now, if the deadline has not passed) and reports.
    pub fn finish(self) -> LoadsOutcome {
        self.stop.store(true, Ordering::Relaxed);
        let mut out = LoadsOutcome::default();
        for (spec, r) in self.running {
            let o = r.finish();
            out.notes.extend(o.warnings);
            out.reports.push(LoadReport {
                kind: spec.kind_name().to_string(),
                spec: spec.text.clone(),
                achieved: o.achieved,
            });
        }
        out
    }
}

/// How to start the worker child: the `punctual` binary with `load --worker`.
#[derive(Clone, Debug)]
pub struct WorkerCommand {
    pub program: PathBuf,
    pub args: Vec<String>,
}

impl WorkerCommand {
    /// `PROGRAM load --worker`, for a `punctual` binary at `program`.
    pub fn punctual(program: impl Into<PathBuf>) -> WorkerCommand {
        WorkerCommand {
            program: program.into(),
            args: vec!["load".into(), "--worker".into()],
        }
    }

    /// `$PUNCTUAL_LOAD_WORKER` if set (tests whose executable is not
    /// `punctual` point it at the binary), else the running executable,
    /// which must then be `punctual` (probes call [`Loads::start`] from
    /// inside it).
    pub fn current_exe() -> Result<WorkerCommand, LoadError> {
        if let Some(p) = std::env::var_os("PUNCTUAL_LOAD_WORKER") {
            return Ok(WorkerCommand::punctual(PathBuf::from(p)));
        }
        std::env::current_exe()
            .map(WorkerCommand::punctual)
            .map_err(|e| LoadError::Runtime(format!("cannot find the punctual executable: {e}")))
    }
}

/// What the parent sends the worker (one command-line argument, JSON).
#[derive(Serialize, Deserialize)]
struct WorkerRequest {
    specs: Vec<LoadSpec>,
    duration_ns: u64,
}

/// What the worker prints, one JSON object per line.
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
enum WorkerMessage {
    Ready { pid: u32 },
    Error { usage: bool, message: String },
    Done(LoadsOutcome),
}

/// Starts loads in a worker child; see the crate documentation.
pub struct Loads;

impl Loads {
    /// Runs `specs` for `duration` in a child of this (`punctual`) process.
    /// Returns once every load is set up and running, so a probe started
    /// right after measures under full load.
    pub fn start(specs: &[LoadSpec], duration: Nanos) -> Result<RunningLoads, LoadError> {
        Loads::start_with(&WorkerCommand::current_exe()?, specs, duration)
    }

    /// As [`Loads::start`], with an explicit worker executable.
    pub fn start_with(
        worker: &WorkerCommand,
        specs: &[LoadSpec],
        duration: Nanos,
    ) -> Result<RunningLoads, LoadError> {
        let req = serde_json::to_string(&WorkerRequest {
            specs: specs.to_vec(),
            duration_ns: duration.0,
        })
        .map_err(|e| LoadError::Runtime(format!("cannot encode the load request: {e}")))?;
        let mut cmd = Command::new(&worker.program);
        cmd.args(&worker.args)
            .arg(req)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        let parent = std::process::id() as libc::pid_t;
        // Computed before fork: the hook may only make raw syscalls.
        // SAFETY: cpu_set_t is plain data; CPU_SET stays within it.
        let all_cpus = unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            for c in online_cpus() {
                if (c as usize) < libc::CPU_SETSIZE as usize {
                    libc::CPU_SET(c as usize, &mut set);
                }
            }
            set
        };
        // SAFETY: only async-signal-safe syscalls between fork and exec.
        unsafe {
            use std::os::unix::process::CommandExt;
            cmd.pre_exec(move || {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
                // The parent may have died before prctl took effect.
                if libc::getppid() != parent {
                    libc::_exit(1);
                }
                let p = libc::sched_param { sched_priority: 0 };
                libc::sched_setscheduler(0, libc::SCHED_OTHER, &p);
                libc::setpriority(libc::PRIO_PROCESS, 0, 0);
                libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &all_cpus);
                Ok(())
            });
        }
        // The keeper thread forks the child and lives until the loads are
        // stopped, so PR_SET_PDEATHSIG does not fire when the caller's
        // thread (which may be short-lived) exits.
        let (child_tx, child_rx) = mpsc::channel();
        let (keep_tx, keep_rx) = mpsc::channel::<()>();
        let keeper = std::thread::Builder::new()
            .name("pl-keeper".into())
            .spawn(move || {
                let r = cmd.spawn();
                let ok = r.is_ok();
                let _ = child_tx.send(r);
                if ok {
                    let _ = keep_rx.recv();
                }
            })
            .map_err(|e| LoadError::Runtime(format!("cannot start the keeper thread: {e}")))?;
        let mut child = child_rx
            .recv()
            .map_err(|_| LoadError::Runtime("keeper thread died".into()))?
            .map_err(|e| {
                LoadError::Runtime(format!(
                    "cannot start the load worker {}: {e}",
                    worker.program.display()
                ))
            })?;
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().expect("piped stdout");
        let (line_tx, lines) = mpsc::channel();
        let reader = std::thread::Builder::new()
            .name("pl-reader".into())
            .spawn(move || {
                for line in BufReader::new(stdout).lines() {
                    let Ok(line) = line else { break };
                    if line_tx.send(line).is_err() {
                        break;
                    }
                }
            })
            .map_err(|e| LoadError::Runtime(format!("cannot start the reader thread: {e}")))?;
        let mut running = RunningLoads {
            child: Some(child),
            stdin,
            lines,
            keeper: Some((keep_tx, keeper)),
            reader: Some(reader),
            deadline: Instant::now() + duration.to_std(),
            pid: 0,
        };
        // Set-up (a large disk layout) may take a while; a worker that
        // neither gets ready nor fails within this is stopped.
        let setup_limit = Duration::from_secs(300);
        loop {
            match running.lines.recv_timeout(setup_limit) {
                Ok(line) => match serde_json::from_str::<WorkerMessage>(&line) {
                    Ok(WorkerMessage::Ready { pid }) => {
                        running.pid = pid;
                        running.deadline = Instant::now() + duration.to_std();
                        return Ok(running);
                    }
                    Ok(WorkerMessage::Error { usage, message }) => {
                        running.shutdown();
                        return Err(if usage {
                            LoadError::Invalid(message)
                        } else {
                            LoadError::Runtime(message)
                        });
                    }
                    // Not ours (a worker built differently): ignore.
                    _ => continue,
                },
                Err(_) => {
                    running.shutdown();
                    return Err(LoadError::Runtime(
                        "the load worker exited or hung before its loads were running".into(),
                    ));
                }
            }
        }
    }
}

/// Loads running in a worker child. Dropping it stops them too.
pub struct RunningLoads {
    child: Option<Child>,
    stdin: Option<ChildStdin>,
    lines: mpsc::Receiver<String>,
    keeper: Option<(mpsc::Sender<()>, JoinHandle<()>)>,
    reader: Option<JoinHandle<()>>,
    deadline: Instant,
    pid: u32,
}

impl RunningLoads {
    /// Process id of the worker child.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// When the loads stop by themselves.
    pub fn deadline(&self) -> Instant {
        self.deadline
    }

    /// Stops the loads (now, if their duration has not passed) and returns
    /// what each achieved.
    pub fn stop(self) -> Vec<LoadReport> {
        self.stop_outcome().reports
    }

    /// As [`RunningLoads::stop`], with the notes (refused policies,
    /// interrupt routing, failures) to show the user or turn into warnings.
    pub fn stop_outcome(mut self) -> LoadsOutcome {
        self.shutdown()
    }

    fn shutdown(&mut self) -> LoadsOutcome {
        let mut out = LoadsOutcome::default();
        // End-of-file on its stdin is the worker's signal to stop.
        if let Some(mut s) = self.stdin.take() {
            let _ = s.flush();
        }
        if self.child.is_none() {
            return out;
        }
        let limit = self.deadline.max(Instant::now()) + Duration::from_secs(10);
        let mut done = false;
        while let Some(left) = limit.checked_duration_since(Instant::now()) {
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    if let Ok(WorkerMessage::Done(o)) = serde_json::from_str(&line) {
                        out = o;
                        done = true;
                        break;
                    }
                }
                Err(_) => break,
            }
        }
        if let Some(mut child) = self.child.take() {
            let t = Instant::now();
            loop {
                match child.try_wait() {
                    Ok(Some(_)) => break,
                    Ok(None) if t.elapsed() < Duration::from_secs(3) => {
                        std::thread::sleep(Duration::from_millis(10))
                    }
                    _ => {
                        let _ = child.kill();
                        let _ = child.wait();
                        out.notes
                            .push("the load worker did not stop in time and was killed".into());
                        break;
                    }
                }
            }
        }
        if !done {
            out.notes
                .push("the load worker ended without reporting; its figures are missing".into());
        }
        // A worker that died without unwinding leaves its interrupt routes
        // in its journal; it is gone now, so this puts them back.
        out.notes.extend(irq::recover_stale());
        if let Some((tx, h)) = self.keeper.take() {
            drop(tx);
            let _ = h.join();
        }
        if let Some(h) = self.reader.take() {
            let _ = h.join();
        }
        out
    }
}

impl Drop for RunningLoads {
    fn drop(&mut self) {
        let _ = self.shutdown();
    }
}

static SIGNALLED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    SIGNALLED.store(true, Ordering::Relaxed);
}

fn say(msg: &WorkerMessage) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{}", serde_json::to_string(msg).unwrap_or_default());
    let _ = out.flush();
}

/// The worker child's whole life: set up, say ready, run until the
/// deadline, EOF on stdin, or SIGTERM/SIGINT/SIGHUP, then report and exit.
/// Returns the exit status. `punctual load --worker REQUEST` calls this.
pub fn worker_main(request_json: &str) -> i32 {
    for sig in [libc::SIGTERM, libc::SIGINT, libc::SIGHUP] {
        // SAFETY: the handler only stores to an atomic.
        unsafe {
            libc::signal(
                sig,
                on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t,
            )
        };
    }
    let req: WorkerRequest = match serde_json::from_str(request_json) {
        Ok(r) => r,
        Err(e) => {
            say(&WorkerMessage::Error {
                usage: true,
                message: format!("the load worker's request is not valid: {e}"),
            });
            return 2;
        }
    };
    let stop = Arc::new(AtomicBool::new(false));
    {
        let stop = stop.clone();
        let _ = std::thread::Builder::new()
            .name("pl-watch".into())
            .spawn(move || watch_parent(&stop));
    }
    let mut notes = irq::recover_stale();
    let engine = match Engine::start_with_stop(&req.specs, Nanos(req.duration_ns), stop.clone()) {
        Ok(e) => e,
        Err(e) => {
            say(&WorkerMessage::Error {
                usage: e.is_usage(),
                message: e.to_string(),
            });
            return if e.is_usage() { 2 } else { 1 };
        }
    };
    say(&WorkerMessage::Ready {
        pid: std::process::id(),
    });
    while !stop.load(Ordering::Relaxed) && Instant::now() < engine.deadline() {
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut out = engine.finish();
    notes.append(&mut out.notes);
    out.notes = notes;
    say(&WorkerMessage::Done(out));
    0
}

/// Raises `stop` when the parent closes our stdin (it stopped us, exited or
/// died) or a stop signal arrived.
fn watch_parent(stop: &AtomicBool) {
    loop {
        if SIGNALLED.load(Ordering::Relaxed) {
            break;
        }
        let mut p = libc::pollfd {
            fd: 0,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: p is a valid pollfd array of length 1.
        let r = unsafe { libc::poll(&mut p, 1, 50) };
        if r > 0 {
            // EOF, hang-up or anything written: all mean stop.
            break;
        }
        if r < 0 && std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            break;
        }
    }
    stop.store(true, Ordering::Relaxed);
}

#[cfg(test)]
mod tests;
