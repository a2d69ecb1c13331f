//! Ctrl-C and SIGTERM end a run early without losing it.
//!
//! The handlers only set a flag; every long-running loop polls it and
//! returns what it has, which the verb then writes out marked as
//! interrupted. A second Ctrl-C falls back to the default action so a
//! wedged run can still be killed.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Installs the handlers (idempotent) and returns the shared stop flag.
pub fn stop_flag() -> Arc<AtomicBool> {
    static FLAG: std::sync::OnceLock<Arc<AtomicBool>> = std::sync::OnceLock::new();
    FLAG.get_or_init(|| {
        let flag = Arc::new(AtomicBool::new(false));
        for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
            // Second signal: terminate with the conventional status.
            let _ = signal_hook::flag::register_conditional_shutdown(sig, 130, Arc::clone(&flag));
            let _ = signal_hook::flag::register(sig, Arc::clone(&flag));
        }
        flag
    })
    .clone()
}

pub fn interrupted(flag: &AtomicBool) -> bool {
    flag.load(Ordering::Relaxed)
}
