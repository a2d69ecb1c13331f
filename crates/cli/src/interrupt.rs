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
    release_trace_files();
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

/// Points every file this process holds open inside one of its tracing
/// instances at /dev/null. The kernel refuses to remove an instance with
/// open files (EBUSY), and the recorder's readers still hold theirs when
/// the second signal arrives; `dup2` swaps each in place, so no descriptor
/// number is freed for another thread to reuse before the process exits,
/// and a reader then sees end of file.
fn release_trace_files() {
    use std::os::fd::AsRawFd;
    let (Ok(null), Ok(fds)) = (
        std::fs::File::open("/dev/null"),
        std::fs::read_dir("/proc/self/fd"),
    ) else {
        return;
    };
    let marker = format!("/instances/{}", punctual_live::restore::INSTANCE_PREFIX);
    for e in fds.flatten() {
        let inside =
            std::fs::read_link(e.path()).is_ok_and(|t| t.to_string_lossy().contains(&marker));
        if let (true, Ok(fd)) = (inside, e.file_name().to_string_lossy().parse::<i32>()) {
            // SAFETY: both descriptors are open; dup2 replaces `fd` atomically.
            unsafe { libc::dup2(null.as_raw_fd(), fd) };
        }
    }
}

pub fn interrupted(flag: &AtomicBool) -> bool {
    flag.load(Ordering::Relaxed)
}
