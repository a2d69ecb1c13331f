//! Ctrl-C and SIGTERM end a run early without losing it.
//!
//! The first signal only sets a flag; every long-running loop polls it and
//! returns what it has, which the verb then writes out marked as
//! interrupted. A second one exits at once (status 130) for a run that
//! does not stop, but first puts back what this run changed, from its own
//! restore journals (a fraction of a second); outputs are written
//! atomically, so none is left half-written.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Installs the handlers (idempotent) and returns the shared stop flag.
pub fn stop_flag() -> Arc<AtomicBool> {
    static FLAG: std::sync::OnceLock<Arc<AtomicBool>> = std::sync::OnceLock::new();
    FLAG.get_or_init(|| {
        let flag = Arc::new(AtomicBool::new(false));
        let sigs = [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM];
        // A thread blocked on the signals (it never wakes otherwise).
        let watcher = signal_hook::iterator::Signals::new(sigs).and_then(|mut signals| {
            let f = Arc::clone(&flag);
            std::thread::Builder::new()
                .name("punctual-signals".into())
                .stack_size(punctual_live::rt::RUN_THREAD_STACK_BYTES)
                .spawn(move || {
                    for _ in signals.forever() {
                        if f.swap(true, Ordering::SeqCst) {
                            second_signal();
                        }
                    }
                })
        });
        if watcher.is_err() {
            for sig in sigs {
                // Second signal: terminate with the conventional status.
                let _ =
                    signal_hook::flag::register_conditional_shutdown(sig, 130, Arc::clone(&flag));
                let _ = signal_hook::flag::register(sig, Arc::clone(&flag));
            }
        }
        flag
    })
    .clone()
}

/// The second Ctrl-C: undo this run's journaled changes, say what was
/// put back (or what is left and how to clean it), exit 130.
fn second_signal() -> ! {
    use punctual_live::restore::{run_dir, undo_own};
    eprintln!("punctual: interrupted again: putting back what this run changed, then exiting");
    let rep = undo_own(&run_dir());
    if !rep.undone.is_empty() {
        eprintln!("punctual: {}", rep.undone.join("; "));
    }
    if !rep.problems.is_empty() {
        eprintln!(
            "punctual: left behind: {}; the next run puts it back, or run 'punctual cause --cleanup' as root",
            rep.problems.join("; ")
        );
    }
    std::process::exit(130);
}

pub fn interrupted(flag: &AtomicBool) -> bool {
    flag.load(Ordering::Relaxed)
}
