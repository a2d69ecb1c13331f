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

/// Ctrl-C twice, as an impatient user presses it. The second follows once
/// the first had time to be taken: two pending signals of one kind reach
/// a process as one.
pub fn ctrl_c_twice(pid: u32) {
    for _ in 0..2 {
        // SAFETY: plain syscall, signalling a child of this test.
        unsafe { libc::kill(pid as i32, libc::SIGINT) };
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// `punctual` run by `setpriv` as nobody, with every capability dropped:
/// what a user without privileges sees. The caller checks that it runs as
/// root and that setpriv exists.
pub fn punctual_as_nobody() -> std::process::Command {
    let mut c = std::process::Command::new("setpriv");
    c.args([
        "--reuid=65534",
        "--regid=65534",
        "--clear-groups",
        "--inh-caps=-all",
        "--bounding-set=-all",
    ])
    .arg(assert_cmd::cargo::cargo_bin("punctual"));
    c
}

/// A temporary directory that nobody may write to (for the records of
/// [`punctual_as_nobody`]).
pub fn tempdir_for_anyone() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(
        dir.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o777),
    )
    .unwrap();
    dir
}

/// Whether this test runs as root: the live tests need it for real-time
/// policies, tracefs and /dev/cpu_dma_latency, and skip with the reason
/// otherwise.
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// A JSON file a run wrote: a record, a fixes list, an export.
pub fn read_json(p: &std::path::Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
}
