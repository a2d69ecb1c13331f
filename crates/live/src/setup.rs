//! How a probe thread gets its CPU, policy and locked memory, behind a trait
//! so that a refused policy can be injected in tests without root.
//!
//! Every refusal becomes a [`Warning`] and the run goes on: an unprivileged
//! user still gets numbers, with a sentence saying what they mean.

use std::io;
use std::sync::Mutex;

use punctual_record::Warning;

use crate::rt::{self, Policy, PolicyGuard};

/// The privileged operations a probe thread asks for.
pub trait ThreadSetup: Send + Sync {
    fn pin(&self, cpu: u32) -> io::Result<()>;
    /// Moves the calling thread onto `cpu` and gives it back the CPUs it
    /// could run on before: a SCHED_DEADLINE thread may not be pinned,
    /// but one that becomes a deadline thread while running on `cpu`
    /// stays there until another deadline thread it cannot preempt
    /// takes that CPU. The default moves nothing.
    fn start_on(&self, _cpu: u32) -> io::Result<()> {
        Ok(())
    }
    /// Sets the calling thread's policy; the guard (if any) restores the old
    /// one when dropped on the same thread.
    fn set_policy(&self, p: Policy) -> io::Result<Option<PolicyGuard>>;
    /// Process-wide mlockall.
    fn lock_memory(&self) -> io::Result<()>;
    /// Process-wide mlockall of the pages touched so far and from now on
    /// ([`rt::lock_touched_memory`]).
    fn lock_touched_memory(&self) -> io::Result<()> {
        self.lock_memory()
    }
    fn unlock_memory(&self);
}

/// The real kernel.
#[derive(Clone, Copy, Debug, Default)]
pub struct RealSetup;

impl ThreadSetup for RealSetup {
    fn pin(&self, cpu: u32) -> io::Result<()> {
        rt::pin_to_cpu(cpu)
    }
    fn start_on(&self, cpu: u32) -> io::Result<()> {
        let before = rt::thread_affinity(0)?;
        // sched_setaffinity on the calling thread returns once it runs
        // on an allowed CPU, so widening the mask again leaves it there.
        rt::pin_to_cpu(cpu)?;
        rt::set_thread_affinity(0, &before)
    }
    fn set_policy(&self, p: Policy) -> io::Result<Option<PolicyGuard>> {
        rt::set_policy(p).map(Some)
    }
    fn lock_memory(&self) -> io::Result<()> {
        rt::lock_memory()
    }
    fn lock_touched_memory(&self) -> io::Result<()> {
        rt::lock_touched_memory()
    }
    fn unlock_memory(&self) {
        rt::unlock_memory()
    }
}

/// A setup that refuses what a user without CAP_SYS_NICE / CAP_IPC_LOCK is
/// refused (EPERM), for tests of the degraded path.
#[derive(Clone, Copy, Debug, Default)]
pub struct Unprivileged;

impl ThreadSetup for Unprivileged {
    fn pin(&self, _cpu: u32) -> io::Result<()> {
        Ok(())
    }
    fn set_policy(&self, p: Policy) -> io::Result<Option<PolicyGuard>> {
        match p {
            Policy::Other { .. } => Ok(None),
            _ => Err(io::Error::from_raw_os_error(libc::EPERM)),
        }
    }
    fn lock_memory(&self) -> io::Result<()> {
        Err(io::Error::from_raw_os_error(libc::EPERM))
    }
    fn unlock_memory(&self) {}
}

/// A setup that touches nothing: for replayed feeds, where the thread's
/// CPU and policy do not shape the numbers.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoSetup;

impl ThreadSetup for NoSetup {
    fn pin(&self, _cpu: u32) -> io::Result<()> {
        Ok(())
    }
    fn set_policy(&self, _p: Policy) -> io::Result<Option<PolicyGuard>> {
        Ok(None)
    }
    fn lock_memory(&self) -> io::Result<()> {
        Ok(())
    }
    fn unlock_memory(&self) {}
}

/// Warnings collected from many threads, each kind kept once ("warn once").
#[derive(Debug, Default)]
pub struct WarningSink {
    inner: Mutex<Vec<Warning>>,
}

impl WarningSink {
    pub fn push(&self, w: Warning) {
        let mut v = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let code = |w: &Warning| {
            serde_json::to_value(w)
                .ok()
                .and_then(|j| j.get("code").and_then(|c| c.as_str()).map(String::from))
        };
        let c = code(&w);
        // One per code, except affinity, which names its CPU.
        let dup = v.iter().any(|x| match (&w, x) {
            (Warning::NoAffinity { cpu: a, .. }, Warning::NoAffinity { cpu: b, .. }) => a == b,
            _ => code(x) == c,
        });
        if !dup {
            v.push(w);
        }
    }
    pub fn take(&self) -> Vec<Warning> {
        std::mem::take(&mut *self.inner.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

/// Pins the calling thread and sets its policy, turning refusals into
/// warnings. Returns the guard that ends the policy and whether the asked
/// policy is in force.
pub fn prepare_thread(
    setup: &dyn ThreadSetup,
    cpu: u32,
    policy: Policy,
    warnings: &WarningSink,
) -> (Option<PolicyGuard>, bool) {
    let pin = |warnings: &WarningSink| {
        if let Err(e) = setup.pin(cpu) {
            let reason = if matches!(policy, Policy::Deadline { .. }) {
                format!("{e}; SCHED_DEADLINE threads may not be pinned to fewer CPUs than their root domain")
            } else {
                e.to_string()
            };
            warnings.push(Warning::NoAffinity { cpu, reason });
        }
    };
    // SCHED_DEADLINE is refused for a thread already pinned to a subset of
    // its root domain, so it is set first and pinning is attempted after.
    // The thread is first moved onto its CPU, so that the deadline thread
    // starts there: left where it was created, a deadline probe asked for
    // CPU 1 measured CPU 0 (its busy loop saw a fortieth of the disk
    // interrupts that CPU 1 takes), and a reservation verified so was not
    // the CPU its prediction was made for.
    let deadline = matches!(policy, Policy::Deadline { .. });
    if !deadline {
        pin(warnings);
    } else if let Err(e) = setup.start_on(cpu) {
        warnings.push(Warning::NoAffinity {
            cpu,
            reason: format!("{e}; the deadline thread could not be started on its CPU"),
        });
    }
    let out = match setup.set_policy(policy) {
        Ok(g) => (g, true),
        Err(e) => {
            if !matches!(policy, Policy::Other { .. }) {
                warnings.push(Warning::NoRealtimePolicy {
                    asked: policy_label(policy),
                    reason: e.to_string(),
                });
            }
            (None, false)
        }
    };
    if deadline {
        pin(warnings);
    }
    out
}

/// `fifo:95`, `deadline:100us/1ms`: the policy as the user would write it.
pub fn policy_label(p: Policy) -> String {
    match p {
        Policy::Other { nice } => format!("other (nice {nice})"),
        Policy::Fifo { priority } => format!("fifo:{priority}"),
        Policy::Rr { priority } => format!("rr:{priority}"),
        Policy::Deadline {
            runtime, period, ..
        } => format!("deadline:{runtime}/{period}"),
    }
}

/// Locks memory once for the run, warning when refused.
/// Which pages a probe locks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MemoryLock {
    /// Every mapped page, faulted in now (`MCL_CURRENT | MCL_FUTURE`):
    /// for a probe that measures its own loop (noise), where a first touch
    /// of a page would show up as a gap.
    All,
    /// Only the pages touched, as they are touched (`MCL_ONFAULT`): for a
    /// probe whose measured path is all touched before its first sleep
    /// (timer).
    Touched,
}

pub fn lock_memory_or_warn(
    setup: &dyn ThreadSetup,
    how: MemoryLock,
    warnings: &WarningSink,
) -> bool {
    let locked = match how {
        MemoryLock::All => setup.lock_memory(),
        MemoryLock::Touched => setup.lock_touched_memory(),
    };
    match locked {
        Ok(()) => true,
        Err(e) => {
            warnings.push(Warning::NoMemlock {
                reason: e.to_string(),
            });
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unprivileged_setup_warns_once_per_kind() {
        let sink = WarningSink::default();
        for cpu in 0..4 {
            let (g, ok) = prepare_thread(&Unprivileged, cpu, Policy::Fifo { priority: 95 }, &sink);
            assert!(g.is_none() && !ok);
        }
        assert!(!lock_memory_or_warn(&Unprivileged, MemoryLock::All, &sink));
        assert!(!lock_memory_or_warn(
            &Unprivileged,
            MemoryLock::Touched,
            &sink
        ));
        let w = sink.take();
        assert_eq!(w.len(), 2, "{w:?}");
        assert!(matches!(w[0], Warning::NoRealtimePolicy { .. }));
        assert!(matches!(w[1], Warning::NoMemlock { .. }));
    }

    /// What a setup was asked, in order.
    #[derive(Default)]
    struct Calls(Mutex<Vec<String>>);

    impl ThreadSetup for Calls {
        fn pin(&self, cpu: u32) -> io::Result<()> {
            self.0.lock().unwrap().push(format!("pin {cpu}"));
            Err(io::Error::from_raw_os_error(libc::EPERM))
        }
        fn start_on(&self, cpu: u32) -> io::Result<()> {
            self.0.lock().unwrap().push(format!("start on {cpu}"));
            Ok(())
        }
        fn set_policy(&self, p: Policy) -> io::Result<Option<PolicyGuard>> {
            self.0.lock().unwrap().push(policy_label(p));
            Ok(None)
        }
        fn lock_memory(&self) -> io::Result<()> {
            Ok(())
        }
        fn unlock_memory(&self) {}
    }

    /// A deadline thread cannot be pinned, so it is moved onto its CPU
    /// before it becomes one (and the pin is still tried after, for a
    /// kernel that allows it); any other policy is pinned first.
    #[test]
    fn a_deadline_thread_starts_on_its_cpu() {
        let sink = WarningSink::default();
        let calls = Calls::default();
        let dl = Policy::Deadline {
            runtime: punctual_units::Nanos::from_us(100),
            deadline: punctual_units::Nanos::from_ms(1),
            period: punctual_units::Nanos::from_ms(1),
        };
        prepare_thread(&calls, 1, dl, &sink);
        assert_eq!(
            *calls.0.lock().unwrap(),
            ["start on 1", "deadline:100us/1ms", "pin 1"]
        );
        let calls = Calls::default();
        prepare_thread(&calls, 1, Policy::Fifo { priority: 95 }, &sink);
        assert_eq!(*calls.0.lock().unwrap(), ["pin 1", "fifo:95"]);
    }
}
