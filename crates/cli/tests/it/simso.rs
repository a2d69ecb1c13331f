//! The simulator against SimSo (PyPI `simso`, Python 3.11) on generated
//! multiprocessor task sets: 2 to 8 CPUs, global and partitioned EDF, every
//! task's jobs, misses, preemptions, migrations and task migrations
//! identical under the conventions `bench/simso/run_simso_mp.py` lists,
//! with late jobs run on and with them aborted at their deadline.
//! Skips, with the reason, where SimSo is not installed: set
//! `SIMSO_PYTHON` to a Python that imports `simso`, or run
//! `bench/simso/compare_mp.sh` once (it makes `target/simso-venv`).

use std::path::{Path, PathBuf};
use std::process::Command;

fn simso_python(root: &Path) -> Option<PathBuf> {
    let py = std::env::var_os("SIMSO_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target/simso-venv/bin/python"));
    let ok = Command::new(&py)
        .args(["-c", "import simso"])
        .output()
        .is_ok_and(|o| o.status.success());
    ok.then_some(py)
}

#[test]
fn simso_multiprocessor() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let Some(py) = simso_python(&root) else {
        eprintln!(
            "skipped: SimSo is not installed (set SIMSO_PYTHON or run bench/simso/compare_mp.sh)"
        );
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let gen = Command::new(&py)
        .arg(root.join("bench/simso/gen_mp.py"))
        .arg(dir.path())
        .args([
            "--seeds",
            "10",
            "--first-seed",
            "7700",
            "--duration-ms",
            "1000",
        ])
        .output()
        .expect("SimSo's python");
    assert!(
        gen.status.success(),
        "{}",
        String::from_utf8_lossy(&gen.stderr)
    );
    // Late jobs run on, then are aborted at their deadline (SimSo's
    // default, sim.on_miss = "abort").
    for late in ["continue", "abort"] {
        let cmp = Command::new(&py)
            .arg(root.join("bench/simso/compare_mp.py"))
            .arg(dir.path())
            .arg(env!("CARGO_BIN_EXE_punctual"))
            .arg(&py)
            .args(["0", late])
            .output()
            .expect("SimSo's python");
        let out = String::from_utf8_lossy(&cmp.stdout);
        assert!(
            cmp.status.success() && out.contains("all outcomes identical: yes"),
            "{late}: {out}\n{}",
            String::from_utf8_lossy(&cmp.stderr)
        );
        // Every generated set ran under both policies, on 2 to 8 CPUs.
        let rows: Vec<&str> = out.lines().filter(|l| l.starts_with("mp")).collect();
        assert_eq!(rows.len(), 20, "{late}: {out}");
    }
}
