//! CPU reservations for real Linux threads: "X of CPU in every Y", kept
//! even when the kernel steals time (Regehr's Rez, Rez-C, Rez-FB), plus
//! one-shot time constraints (Jones's Rialto talk) and a C ABI.
//!
//! The mechanism is SCHED_DEADLINE: a constant-bandwidth server with
//! admission control. What Linux does not give is added here: an exclusive
//! CPU partition per run (a deadline task cannot simply be pinned), a view
//! of what the thread really received (by polling the clock, as Regehr's
//! test application does), catch-up within the period, feedback on the next
//! period's budget, and a restore journal so no setting outlives the run.

pub mod cmdtrace;
pub mod command;
pub mod constraint;
pub mod controller;
pub mod ffi;
pub mod journal;
pub mod kernel;
pub mod partition;
pub mod placement;
pub mod record;
pub mod session;
pub mod spec;
pub mod testapp;

use punctual_live::rt::{sched_setattr, SchedAttr, SCHED_DEADLINE, SCHED_FLAG_RESET_ON_FORK};
use punctual_units::Nanos;

pub use controller::FeedbackController;
pub use spec::{Mode, Spec};

/// Why a reservation run could not go ahead.
#[derive(Debug, thiserror::Error)]
pub enum ReserveError {
    /// The user (or the system's configuration) must change something:
    /// privileges, admission refused, bad combination. Exit status 2.
    #[error("{0}")]
    Refused(String),
    /// The run failed on the way. Exit status 1.
    #[error("{0}")]
    Failed(String),
}

/// The thread's CPU time as the kernel charges it (sum_exec_runtime).
/// Without IRQ time accounting this includes interrupts that hit the
/// thread, which is exactly the charged-but-not-received gap Rez-FB needs.
#[inline]
pub fn thread_cputime() -> Nanos {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is a valid, writable timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    Nanos(ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64)
}

/// Puts thread `tid` (0 = caller) under SCHED_DEADLINE. Reset-on-fork is
/// set because the kernel refuses fork() from a deadline task otherwise;
/// children of a reserved program run as ordinary threads.
pub fn set_deadline(
    tid: i32,
    runtime: Nanos,
    deadline: Nanos,
    period: Nanos,
) -> std::io::Result<()> {
    let a = SchedAttr {
        sched_policy: SCHED_DEADLINE,
        sched_flags: SCHED_FLAG_RESET_ON_FORK,
        sched_runtime: runtime.0,
        sched_deadline: deadline.0,
        sched_period: period.0,
        ..Default::default()
    };
    sched_setattr(tid, &a)
}

/// Returns thread `tid` to SCHED_OTHER at nice 0.
pub fn set_other(tid: i32) -> std::io::Result<()> {
    let a = SchedAttr {
        sched_policy: libc::SCHED_OTHER as u32,
        ..Default::default()
    };
    sched_setattr(tid, &a)
}

/// Whether this process may use SCHED_DEADLINE at all: tried on a
/// short-lived thread with a tiny reservation so nothing else is touched.
///
/// The probe is 1024 ns every 1 ms (0.1%, the kernel's smallest runtime)
/// so that its bandwidth, which the kernel holds until the probe's 0-lag
/// time after it leaves the class, is gone within 1 ms: the probe waits
/// that out, so a partition made right after does not rebuild root
/// domains while the release is pending (see
/// [`kernel::wait_released`] for what that does to the totals).
///
/// EBUSY is retried for up to half a second: a reservation another
/// process released less than one of its deadlines ago still holds its
/// bandwidth until its 0-lag time, and admission grants once it is
/// released.
pub fn deadline_permitted() -> Result<(), std::io::Error> {
    let mut last = Ok(());
    for _ in 0..10 {
        last = std::thread::spawn(|| {
            set_deadline(0, spec::MIN_RUNTIME, Nanos::from_ms(1), Nanos::from_ms(1))?;
            set_other(0)?;
            std::thread::sleep(std::time::Duration::from_millis(2));
            Ok(())
        })
        .join()
        .unwrap_or_else(|_| Err(std::io::Error::other("probe thread panicked")));
        match &last {
            Err(e) if e.raw_os_error() == Some(libc::EBUSY) => {
                std::thread::sleep(std::time::Duration::from_millis(50))
            }
            _ => return last,
        }
    }
    last
}
