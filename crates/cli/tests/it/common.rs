//! What the modules share.

use std::sync::{Mutex, MutexGuard};

/// One live test at a time across every module: the tests of this binary
/// run on parallel threads, and live runs disturb each other (a
/// SCHED_FIFO busy loop starves a timer probe of the same priority on its
/// CPU, reserve's exclusive partition takes CPU 1, `cause` and the flight
/// recorder share tracefs and /run/punctual).
static LIVE: Mutex<()> = Mutex::new(());

/// Holds the live lock; a test that panicked while holding it does not
/// poison it for the others.
pub fn live() -> MutexGuard<'static, ()> {
    LIVE.lock().unwrap_or_else(|e| e.into_inner())
}
