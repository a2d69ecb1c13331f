//! An uninstrumented command under a reservation.
//!
//! The command's threads cannot tell us when they run, so the kernel's view
//! is used. With tracefs (root), [`crate::cmdtrace`] reads it exactly: per
//! period (on the kernel's own grid: it starts at the instant the command
//! was admitted), the time a reserved thread was current (charged) and the
//! interrupt, softirq, system-vector and NMI time taken from it while it
//! stayed current (stolen; this kernel bills it to the thread, having no
//! IRQ time accounting). Received = charged − stolen. Without tracefs, the
//! CPU time charged per period is read from /proc/PID/task/*/schedstat
//! (lagging a running thread by up to a tick) and stolen time is unknown.
//!
//! What the modes mean here:
//! - plain: the reservation as the kernel enforces it.
//! - catchup: the larger maximum budget is admitted and given to the
//!   command, but nothing stops it at its reservation, because stopping at
//!   *received* R needs the thread's own view, instantly; the trace is read
//!   only at period ends. It is plain with the maximum budget: stolen time
//!   is covered up to the extra, at the cost of the extra bandwidth being
//!   used even when nothing was stolen.
//! - feedback: Rez-FB with the trace's charged and stolen time, the same
//!   controller the test application uses; the new runtime goes to every
//!   reserved thread by `sched_setattr` at the period end and takes effect
//!   at the kernel's next replenishment (so it lags the measurement by one
//!   period). Without tracefs it acts as plain, with a warning.

use std::collections::HashMap;
use std::ffi::OsString;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

use punctual_live::clock::{mono, sleep_until};
use punctual_live::procstat::KernelSnapshot;
use punctual_record::{Period, PeriodSummary};
use punctual_units::Nanos;

use crate::cmdtrace::{Accountant, CommandTrace};
use crate::controller::FeedbackController;
use crate::kernel;
use crate::partition::Partition;
use crate::spec::{Mode, Spec};
use crate::{set_deadline, ReserveError};

/// What the run is asked to do.
#[derive(Clone, Copy, Debug)]
pub struct Options<'a> {
    pub spec: &'a Spec,
    pub argv: &'a [OsString],
    pub partition: Option<&'a Partition>,
    pub duration: Option<Nanos>,
    pub max_periods_kept: usize,
    /// Account from the kernel trace when tracefs allows it.
    pub trace: bool,
    /// Where the tracing instance's restore journal goes.
    pub journal_dir: &'a Path,
}

#[derive(Clone, Debug, Default)]
pub struct Outcome {
    pub periods: Vec<Period>,
    /// Charged time of each kept period.
    pub charged_ns: Vec<Nanos>,
    pub periods_dropped: u64,
    pub summary: PeriodSummary,
    /// `trace` (charged and stolen from the kernel trace) or `schedstat`
    /// (charged CPU time only; stolen unknown).
    pub received_source: &'static str,
    pub charged_total_ns: Nanos,
    /// Sum of the reserved threads' schedstat CPU time over the run: an
    /// independent check of the trace's charged total.
    pub schedstat_total_ns: Nanos,
    /// Hypervisor steal on the command's CPUs over the run (`/proc/stat`).
    /// The scheduler's clock leaves it out (CONFIG_PARAVIRT_TIME_ACCOUNTING)
    /// while the trace's clock does not, so in a guest schedstat falls short
    /// of the trace by up to this much.
    pub host_steal_ns: Nanos,
    pub requested_mean_ns: Nanos,
    pub controller_updates: u64,
    pub controller_applied: u64,
    pub controller_overhead_ns: Nanos,
    pub setattr_refusals: u64,
    pub clamped_periods: u64,
    /// Periods the trace could not fully see (a ring overrun, the start):
    /// the controller holds C through them.
    pub incomplete_periods: u64,
    pub trace_events: u64,
    pub trace_lost_events: u64,
    /// Missed periods in which the kernel charged the command less than
    /// the budget R: it was stopped short (the overrun of an earlier
    /// period repaid, with tick-granular enforcement), not robbed.
    pub misses_short_charged: u64,
    /// Missed periods charged at least R, but with so much stolen inside
    /// that less than R was received: what feedback compensates.
    pub misses_stolen: u64,
    /// Why tracing was not used, when it was wanted.
    pub no_tracing: Option<String>,
    /// Exit code, or 128+signal when killed by a signal.
    pub exit_code: Option<i32>,
    /// True when the run's duration ran out (or Ctrl-C) and punctual ended
    /// the command.
    pub ended_by_us: bool,
    pub elapsed: Nanos,
    pub warnings: Vec<String>,
}

/// Threads of `pid` that run under SCHED_DEADLINE: the reservation's
/// threads (threads the command creates are ordinary, by reset-on-fork).
fn deadline_tids(pid: i32) -> Vec<i32> {
    let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|t| t.file_name().to_str()?.parse::<i32>().ok())
        .filter(|&t| {
            punctual_live::rt::sched_getattr(t)
                .is_ok_and(|a| a.sched_policy == punctual_live::rt::SCHED_DEADLINE)
        })
        .collect()
}

fn schedstat(pid: i32, tid: i32) -> Option<Nanos> {
    std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/schedstat"))
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
        .map(Nanos)
}

/// Per-thread schedstat marks, so a thread that exits does not make the
/// sum go backwards and a new one counts from zero.
#[derive(Default)]
struct Schedstat {
    marks: HashMap<i32, Nanos>,
    total: Nanos,
}

impl Schedstat {
    fn delta(&mut self, pid: i32, tids: &[i32]) -> Nanos {
        let mut d = Nanos::ZERO;
        for &t in tids {
            if let Some(now) = schedstat(pid, t) {
                let m = self.marks.insert(t, now).unwrap_or(Nanos::ZERO);
                d += now.saturating_sub(m);
            }
        }
        self.total += d;
        d
    }
}

fn cpus_of(partition: Option<&Partition>) -> Vec<u32> {
    match partition {
        Some(p) => vec![p.cpu],
        None => punctual_live::sysinfo::online_cpus(),
    }
}

/// Pins the calling thread off `avoid` and raises it to SCHED_FIFO 1 for
/// its lifetime; both are put back on drop. Best effort: a refusal only
/// leaves the thread as it was.
struct KeepUp {
    old_mask: Option<libc::cpu_set_t>,
    _policy: Option<punctual_live::rt::PolicyGuard>,
}

impl KeepUp {
    fn new(avoid: Option<u32>) -> KeepUp {
        let mut old_mask = None;
        if let Some(cpu) = avoid {
            // SAFETY: cpu_set_t is plain data, written by the kernel.
            let mut m: libc::cpu_set_t = unsafe { std::mem::zeroed() };
            // SAFETY: valid pointer and size.
            let ok = unsafe {
                libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut m)
            } == 0;
            let rest: Vec<u32> = cpus_of(None).into_iter().filter(|c| *c != cpu).collect();
            if ok && !rest.is_empty() && punctual_live::rt::pin_to_cpus(&rest).is_ok() {
                old_mask = Some(m);
            }
        }
        KeepUp {
            old_mask,
            _policy: punctual_live::rt::set_policy(punctual_live::rt::Policy::Fifo { priority: 1 })
                .ok(),
        }
    }
}

impl Drop for KeepUp {
    fn drop(&mut self) {
        if let Some(m) = &self.old_mask {
            // SAFETY: restoring a mask the kernel gave us.
            unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), m) };
        }
    }
}

/// How long after a period ends its events are read: the ring holds every
/// event before the boundary by then.
const READ_LAG: Nanos = Nanos(500_000);

/// Runs `argv` under the reservation until it exits, `duration` passes, or
/// `stop` is set.
pub fn run(o: &Options<'_>, stop: &AtomicBool) -> Result<Outcome, ReserveError> {
    let spec = o.spec;
    let mut out = Outcome::default();
    let Some((prog, args)) = o.argv.split_first() else {
        return Err(ReserveError::Refused("no command given after --".into()));
    };
    let mut trace = None;
    if o.trace {
        match CommandTrace::start(&cpus_of(o.partition), o.journal_dir) {
            Ok(t) => trace = Some(t),
            Err(e) => out.no_tracing = Some(e.0),
        }
    }
    match spec.mode {
        Mode::Plain => {}
        Mode::Catchup => out.warnings.push(format!(
            "catchup on an uninstrumented command: the command gets the whole admitted maximum ({}) every period, since only an instrumented thread can stop at its reservation",
            spec.max_budget
        )),
        Mode::Feedback if trace.is_none() => out.warnings.push(format!(
            "feedback on an uninstrumented command needs the kernel trace to tell received from stolen time ({}); the budget stays at the target, as plain",
            out.no_tracing.as_deref().unwrap_or("tracing not used")
        )),
        Mode::Feedback => {}
    }
    let feedback = spec.mode == Mode::Feedback && trace.is_some();
    let join_file = o.partition.map(|p| {
        std::ffi::CString::new(p.self_join_file().as_os_str().as_encoded_bytes())
            .expect("cgroup path has no NUL")
    });
    let runtime = match spec.mode {
        Mode::Catchup => spec.max_budget,
        _ => spec.target(),
    };
    // Feedback may raise the runtime up to the maximum: admission is asked
    // for that first, so a refusal comes now rather than mid-run.
    let admit = if feedback { spec.max_budget } else { runtime };
    let (deadline, period) = (spec.deadline, spec.period);
    // The child reports the instant it was admitted: the kernel's periods
    // start there, and so does the accounting grid.
    let mut fds = [0i32; 2];
    // SAFETY: fds is a valid array of two ints.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(ReserveError::Failed(format!(
            "pipe: {}",
            std::io::Error::last_os_error()
        )));
    }
    let (rfd, wfd) = (fds[0], fds[1]);
    let mut cmd = std::process::Command::new(prog);
    cmd.args(args);
    // SAFETY: the closure only makes async-signal-safe system calls (prctl,
    // open, write, close, sched_setattr, clock_gettime) on data prepared
    // before fork.
    unsafe {
        cmd.pre_exec(move || {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
            if let Some(f) = &join_file {
                let fd = libc::open(f.as_ptr(), libc::O_WRONLY);
                if fd < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                let w = libc::write(fd, b"0".as_ptr().cast(), 1);
                let err = std::io::Error::last_os_error();
                libc::close(fd);
                if w != 1 {
                    return Err(err);
                }
            }
            if admit != runtime {
                set_deadline(0, admit, deadline, period)?;
            }
            set_deadline(0, runtime, deadline, period)?;
            let t = mono().0.to_ne_bytes();
            libc::write(wfd, t.as_ptr().cast(), t.len());
            Ok(())
        });
    }
    let steal_cpus = cpus_of(o.partition);
    let steal_before = KernelSnapshot::read().ok();
    let started = mono();
    let spawned = cmd.spawn();
    // SAFETY: closing our copy of the write end; the child has its own.
    unsafe { libc::close(wfd) };
    let mut child = match spawned {
        Ok(c) => c,
        Err(e) => {
            // SAFETY: closing the read end we own.
            unsafe { libc::close(rfd) };
            return Err(
                if matches!(e.raw_os_error(), Some(libc::EBUSY) | Some(libc::EPERM)) {
                    ReserveError::Refused(kernel::explain_refusal(
                        &e,
                        admit,
                        period,
                        if o.partition.is_some() { 1 } else { 2 },
                        &kernel::bandwidth(None),
                    ))
                } else {
                    ReserveError::Refused(format!("cannot run {}: {e}", prog.to_string_lossy()))
                },
            );
        }
    };
    let mut t0b = [0u8; 8];
    // SAFETY: reading into a valid 8-byte buffer from the fd we own.
    let n = unsafe { libc::read(rfd, t0b.as_mut_ptr().cast(), 8) };
    // SAFETY: closing the read end we own.
    unsafe { libc::close(rfd) };
    let t0 = if n == 8 {
        Nanos(u64::from_ne_bytes(t0b))
    } else {
        started
    };
    let pid = child.id() as i32;
    // The accounting must keep up with the periods: a starved reader lets
    // the trace rings overflow. It runs off the reserved CPU (where it
    // would wait behind the reservation) at the lowest real-time priority.
    let _keep_up = KeepUp::new(o.partition.map(|p| p.cpu));
    out.received_source = if trace.is_some() {
        "trace"
    } else {
        "schedstat"
    };
    out.summary = PeriodSummary {
        task: "command".into(),
        reserved_ns: spec.budget,
        ..Default::default()
    };
    let mut acct = Accountant::new(t0, period);
    let mut sstat = Schedstat::default();
    let mut ctl = FeedbackController::new(spec.target(), spec.max_budget, spec.gain_ratio);
    let mut kernel_runtime = runtime;
    let mut requested_sum: u128 = 0;
    let mut tids = vec![pid];
    let mut k = 0u64;
    let status = loop {
        sleep_until(t0 + period * (k + 1) + READ_LAG);
        if let Ok(Some(st)) = child.try_wait() {
            break Some(st);
        }
        let now_tids = deadline_tids(pid);
        if !now_tids.is_empty() {
            tids = now_tids;
        }
        let ss = sstat.delta(pid, &tids);
        let (charged, stolen, incomplete) = match trace.as_mut() {
            Some(t) => {
                acct.set_tids(tids.iter().copied());
                t.drain(&mut acct);
                let p = acct.finish_period(k);
                (p.charged, p.stolen, p.incomplete)
            }
            None => (ss, Nanos::ZERO, false),
        };
        let received = charged.saturating_sub(stolen);
        let hit = received >= spec.budget;
        let s = &mut out.summary;
        s.periods += 1;
        s.misses += u64::from(!hit);
        if !hit {
            if charged < spec.budget {
                out.misses_short_charged += 1;
            } else {
                out.misses_stolen += 1;
            }
        }
        s.received_total_ns += received;
        s.stolen_total_ns += stolen;
        s.requested_total_ns += kernel_runtime;
        out.charged_total_ns += charged;
        out.incomplete_periods += u64::from(incomplete);
        requested_sum += kernel_runtime.0 as u128;
        if out.periods.len() < o.max_periods_kept {
            out.periods.push(Period {
                task: "command".into(),
                index: k,
                start_ns: period * k,
                reserved_ns: spec.budget,
                requested_ns: kernel_runtime,
                received_ns: received,
                stolen_ns: stolen,
                hit,
            });
            out.charged_ns.push(charged);
        } else {
            out.periods_dropped += 1;
        }
        if feedback && !incomplete && k > 0 {
            let t = mono();
            let before = ctl.clamped_periods;
            let next = ctl.update(charged, received);
            out.clamped_periods += u64::from(ctl.clamped_periods != before);
            // A sched_setattr per thread costs tens of µs in a VM: changes
            // below the deadband wait until the integrator makes them matter.
            let deadband = (spec.target().0 / 100).max(20_000);
            if next.0.abs_diff(kernel_runtime.0) >= deadband {
                let refused = tids
                    .iter()
                    .filter(|&&t| set_deadline(t, next, deadline, period).is_err())
                    .count();
                if refused == 0 {
                    kernel_runtime = next;
                    out.controller_applied += 1;
                } else {
                    out.setattr_refusals += 1;
                    ctl.refused(kernel_runtime);
                    for &t in &tids {
                        let _ = set_deadline(t, kernel_runtime, deadline, period);
                    }
                }
            }
            out.controller_updates += 1;
            out.controller_overhead_ns += mono() - t;
        }
        k += 1;
        // Every period of the asked duration is accounted, even when the
        // reader fell behind and is catching up.
        let over = o.duration.map(|d| period * k >= d).unwrap_or(false);
        if over || stop.load(Ordering::Relaxed) {
            out.ended_by_us = true;
            // SAFETY: signalling our own child.
            unsafe { libc::kill(pid, libc::SIGTERM) };
            let t = mono();
            loop {
                if let Ok(Some(_)) = child.try_wait() {
                    break;
                } else if mono() - t > Nanos::from_secs(2) {
                    let _ = child.kill();
                    break;
                }
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            break child.wait().ok();
        }
    };
    out.schedstat_total_ns = sstat.total;
    if let (Some(b), Ok(a)) = (&steal_before, KernelSnapshot::read()) {
        out.host_steal_ns = steal_cpus
            .iter()
            .map(|&c| KernelSnapshot::delta(b, &a, c).steal_ns)
            .fold(Nanos::ZERO, |x, y| x + y);
    }
    out.trace_events = acct.events;
    out.trace_lost_events = acct.lost_events;
    if let Some(t) = trace {
        if let Err(e) = t.close() {
            out.warnings.push(format!(
                "tracing cleanup incomplete: {e} (run punctual cause --cleanup)"
            ));
        }
    }
    out.requested_mean_ns = Nanos((requested_sum / out.summary.periods.max(1) as u128) as u64);
    out.exit_code = status.map(|s| s.code().unwrap_or_else(|| 128 + s.signal().unwrap_or(0)));
    out.elapsed = mono() - started;
    Ok(out)
}
