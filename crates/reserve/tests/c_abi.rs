//! The C ABI from C: examples/c/reserve_demo.c is compiled against
//! include/punctual.h and the cdylib this crate builds, then run.

use std::path::PathBuf;
use std::process::Command;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// target/<profile>/, where cargo put libpunctual_reserve.so next to deps/.
fn lib_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    exe.parent().unwrap().parent().unwrap().to_path_buf()
}

#[test]
fn c_program_takes_a_reservation_and_constraints() {
    if Command::new("cc").arg("--version").output().is_err() {
        eprintln!("skipped: no C compiler (cc) on this machine");
        return;
    }
    let lib = lib_dir();
    if !lib.join("libpunctual_reserve.so").exists() {
        eprintln!("skipped: {} has no libpunctual_reserve.so", lib.display());
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let exe = dir.path().join("reserve_demo");
    let out = Command::new("cc")
        .arg("-Wall")
        .arg("-Werror")
        .arg("-I")
        .arg(repo().join("include"))
        .arg(repo().join("examples/c/reserve_demo.c"))
        .arg("-L")
        .arg(&lib)
        .arg(format!("-Wl,-rpath,{}", lib.display()))
        .arg("-lpunctual_reserve")
        .arg("-o")
        .arg(&exe)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "cc failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let run = Command::new(&exe).output().unwrap();
    let stdout = String::from_utf8_lossy(&run.stdout);
    let stderr = String::from_utf8_lossy(&run.stderr);
    if run.status.code() == Some(2) {
        // The demo could not take a reservation: fine only without the
        // privilege, and then the sentence must say so.
        assert!(stderr.contains("CAP_SYS_NICE"), "{stderr}");
        eprintln!("skipped: SCHED_DEADLINE not permitted here ({stderr})");
        return;
    }
    assert_eq!(run.status.code(), Some(0), "{stdout}\n{stderr}");
    let periods: u64 = stdout
        .split_whitespace()
        .skip_while(|w| *w != "periods")
        .nth(1)
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    // 25 periods of 20 ms; with tick-granular enforcement (HZ=250) some
    // periods are skipped while the thread pays back an overrun.
    assert!((10..=25).contains(&periods), "{stdout}");
    assert!(stdout.contains("constraint granted"), "{stdout}");
    assert!(stdout.contains("impossible constraint denied"), "{stdout}");
    assert!(stdout.contains("cannot fit"), "{stdout}");
}
