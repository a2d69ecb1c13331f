//! What a killed run left behind, put back before any verb runs.
//!
//! A run killed by SIGKILL (or a second Ctrl-C) cannot undo its changes:
//! a tracing instance still tracing, load balancing off, an interrupt
//! routed away, a fix under test (`punctual_remedy`: a thread's affinity or
//! policy, RT throttling, an isolating cpuset). Its restore journal stays in the run directory, and the
//! next run of any verb replays it, so nothing measured later is measured
//! on a machine that is not as its owner left it.

use punctual_live::restore::{cleanup_stale, run_dir};

/// Replays the journals of dead runs and says, on one stderr line, what
/// was put back (and on another what could not be).
pub fn restore_at_start() {
    let rep = cleanup_stale(&run_dir());
    if !rep.undone.is_empty() {
        eprintln!(
            "punctual: put back what a killed run left: {}",
            rep.undone.join("; ")
        );
    }
    if !rep.problems.is_empty() {
        eprintln!(
            "punctual: a killed run left changes that could not be put back: {}; run 'punctual cause --cleanup' as root",
            rep.problems.join("; ")
        );
    }
}
