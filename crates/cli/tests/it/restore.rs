//! A run killed without cleaning up leaves its restore journal; any later
//! verb puts back what it describes and says so on stderr.

use assert_cmd::Command;
use predicates::prelude::*;

/// A pid that named a process which has exited.
fn dead_pid() -> u32 {
    let mut child = std::process::Command::new("true").spawn().unwrap();
    let pid = child.id();
    child.wait().unwrap();
    pid
}

#[test]
fn an_unrelated_verb_replays_a_dead_runs_journal() {
    let dir = tempfile::tempdir().unwrap();
    let run_dir = dir.path().join("run");
    std::fs::create_dir(&run_dir).unwrap();
    let knob = dir.path().join("knob");
    std::fs::write(&knob, "changed").unwrap();
    // An empty directory stands in for the tracing instance it made.
    let instance = dir.path().join("punctual-instance");
    std::fs::create_dir(&instance).unwrap();
    let pid = dead_pid();
    let journal = run_dir.join(format!("trace-journal-{pid}.json"));
    std::fs::write(
        &journal,
        serde_json::json!({
            "pid": pid,
            "start_time": 1,
            "actions": [
                {"kind": "trace_instance", "path": instance},
                {"kind": "knob", "path": knob, "restore": "orig"},
            ],
        })
        .to_string(),
    )
    .unwrap();
    let put_back = format!(
        "punctual: put back what a killed run left: restored {} to 'orig'; removed tracing instance {}\n",
        knob.display(),
        instance.display()
    );
    Command::cargo_bin("punctual")
        .unwrap()
        .env("PUNCTUAL_RUN_DIR", &run_dir)
        .arg("sysinfo")
        .assert()
        .success()
        .stderr(predicate::str::contains(put_back.clone()));
    assert_eq!(std::fs::read_to_string(&knob).unwrap(), "orig");
    assert!(!instance.exists());
    assert!(!journal.exists());
    // Done once: the next run has nothing to say.
    Command::cargo_bin("punctual")
        .unwrap()
        .env("PUNCTUAL_RUN_DIR", &run_dir)
        .arg("sysinfo")
        .assert()
        .success()
        .stderr(predicate::str::contains("killed run").not());
}
