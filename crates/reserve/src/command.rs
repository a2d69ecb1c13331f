//! An uninstrumented command under a reservation.
//!
//! The command's threads cannot tell us when they run, so only the kernel's
//! view is available: CPU time charged per period (from
//! /proc/PID/task/*/schedstat, sampled on the parent's own period grid,
//! which is not aligned with the kernel's replenishments). On a kernel
//! without IRQ time accounting, charged time includes interrupts, so it can
//! overstate what the command received; stolen time is not measurable.
//!
//! What the modes mean here:
//! - plain: the reservation as the kernel enforces it.
//! - catchup: the larger maximum budget is admitted and given to the
//!   command, but nothing stops it at its reservation, because only the
//!   thread itself knows what it received. It is plain with the maximum
//!   budget: stolen time is covered up to the extra, at the cost of the
//!   extra bandwidth being used even when nothing was stolen.
//! - feedback: needs the received time, which an uninstrumented command
//!   does not report; the budget stays at the target (as plain) and a
//!   warning says so. Link the command against the library (or the C ABI)
//!   to get real catch-up and feedback.

use std::ffi::OsString;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::sync::atomic::{AtomicBool, Ordering};

use punctual_live::clock::{mono, sleep_until};
use punctual_record::{Period, PeriodSummary};
use punctual_units::Nanos;

use crate::kernel;
use crate::partition::Partition;
use crate::spec::{Mode, Spec};
use crate::{set_deadline, ReserveError};

#[derive(Clone, Debug)]
pub struct Outcome {
    pub periods: Vec<Period>,
    pub periods_dropped: u64,
    pub summary: PeriodSummary,
    /// Exit code, or 128+signal when killed by a signal.
    pub exit_code: Option<i32>,
    /// True when the run's duration ran out (or Ctrl-C) and punctual ended
    /// the command.
    pub ended_by_us: bool,
    pub elapsed: Nanos,
    pub warnings: Vec<String>,
}

fn charged(pid: i32) -> Option<Nanos> {
    let dir = std::fs::read_dir(format!("/proc/{pid}/task")).ok()?;
    let mut sum = 0u64;
    for t in dir.flatten() {
        if let Ok(s) = std::fs::read_to_string(t.path().join("schedstat")) {
            sum += s
                .split_whitespace()
                .next()
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or(0);
        }
    }
    Some(Nanos(sum))
}

/// Runs `argv` under the reservation until it exits, `duration` passes, or
/// `stop` is set.
pub fn run(
    spec: &Spec,
    argv: &[OsString],
    partition: Option<&Partition>,
    duration: Option<Nanos>,
    max_periods_kept: usize,
    stop: &AtomicBool,
) -> Result<Outcome, ReserveError> {
    let mut warnings = Vec::new();
    match spec.mode {
        Mode::Plain => {}
        Mode::Catchup => warnings.push(format!(
            "catchup on an uninstrumented command: the command gets the whole admitted maximum ({}) every period, since only an instrumented thread can stop at its reservation",
            spec.max_budget
        )),
        Mode::Feedback => warnings.push(
            "feedback on an uninstrumented command: received time is not observable, so the budget stays at the target (as plain); use the library or the C ABI for feedback".into(),
        ),
    }
    let Some((prog, args)) = argv.split_first() else {
        return Err(ReserveError::Refused("no command given after --".into()));
    };
    let join_file = partition.map(|p| {
        std::ffi::CString::new(p.self_join_file().as_os_str().as_encoded_bytes())
            .expect("cgroup path has no NUL")
    });
    let runtime = match spec.mode {
        Mode::Catchup => spec.max_budget,
        _ => spec.target(),
    };
    let (deadline, period) = (spec.deadline, spec.period);
    let mut cmd = std::process::Command::new(prog);
    cmd.args(args);
    // SAFETY: the closure only makes async-signal-safe system calls (prctl,
    // open, write, close, sched_setattr) on data prepared before fork.
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
            set_deadline(0, runtime, deadline, period)
        });
    }
    let started = mono();
    let mut child = cmd.spawn().map_err(|e| {
        if matches!(e.raw_os_error(), Some(libc::EBUSY) | Some(libc::EPERM)) {
            ReserveError::Refused(kernel::explain_refusal(
                &e,
                runtime,
                period,
                if partition.is_some() { 1 } else { 2 },
                &kernel::bandwidth(None),
            ))
        } else {
            ReserveError::Refused(format!("cannot run {}: {e}", prog.to_string_lossy()))
        }
    })?;
    let pid = child.id() as i32;
    let mut summary = PeriodSummary {
        task: "command".into(),
        reserved_ns: spec.budget,
        ..Default::default()
    };
    let mut periods = Vec::new();
    let mut dropped = 0u64;
    let mut mark = charged(pid).unwrap_or(Nanos::ZERO);
    let mut k = 0u64;
    let mut ended_by_us = false;
    let status = loop {
        sleep_until(started + period * (k + 1));
        if let Ok(Some(st)) = child.try_wait() {
            break Some(st);
        }
        let now_c = charged(pid).unwrap_or(mark);
        let got = now_c.saturating_sub(mark);
        mark = now_c;
        summary.periods += 1;
        summary.received_total_ns += got;
        summary.requested_total_ns += runtime;
        let hit = got >= spec.budget;
        if !hit {
            summary.misses += 1;
        }
        if periods.len() < max_periods_kept {
            periods.push(Period {
                task: "command".into(),
                index: k,
                start_ns: period * k,
                reserved_ns: spec.budget,
                requested_ns: runtime,
                received_ns: got,
                stolen_ns: Nanos::ZERO,
                hit,
            });
        } else {
            dropped += 1;
        }
        k += 1;
        let over = duration.map(|d| mono() - started >= d).unwrap_or(false);
        if over || stop.load(Ordering::Relaxed) {
            ended_by_us = true;
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
    let exit_code = status.map(|s| s.code().unwrap_or_else(|| 128 + s.signal().unwrap_or(0)));
    Ok(Outcome {
        periods,
        periods_dropped: dropped,
        summary,
        exit_code,
        ended_by_us,
        elapsed: mono() - started,
        warnings,
    })
}
