//! Sharp edges a new user meets, each through the command line: a closed
//! pipe, `--json -`, an output path that cannot take files, negative and
//! zero durations, options that do nothing without another, a failing
//! command load, and where messages go.

use std::io::Read;
use std::path::PathBuf;
use std::process::{Command as Std, Stdio};

use assert_cmd::Command;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn punctual() -> Command {
    let mut c = Command::cargo_bin("punctual").unwrap();
    c.current_dir(root());
    c
}

fn bin() -> PathBuf {
    assert_cmd::cargo::cargo_bin("punctual")
}

/// Runs `args` with standard output a pipe whose reader is already gone
/// (`punctual … | head` after head exited), returning (status, stderr).
fn closed_pipe(args: &[&str]) -> (Option<i32>, String) {
    let mut child = Std::new(bin())
        .current_dir(root())
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    (child.wait().unwrap().code(), err)
}

#[test]
fn a_closed_pipe_ends_the_output_quietly() {
    for args in [
        &["simulate", "scenarios/rez-network.toml", "--duration", "1s"][..],
        &["report", "crates/report/tests/fixtures/timer-load.json"][..],
        &[
            "report",
            "crates/report/tests/fixtures/timer-load.json",
            "--format",
            "csv",
        ][..],
    ] {
        let (code, err) = closed_pipe(args);
        assert!(!err.contains("panicked"), "{args:?}: {err}");
        assert!(!err.contains("Broken pipe"), "{args:?}: {err}");
        assert_eq!(code, Some(0), "{args:?}: {err}");
    }
}

#[test]
fn json_dash_is_standard_output_and_the_rest_goes_to_stderr() {
    let out = punctual()
        .args(["simulate", "scenarios/rez-network.toml", "--duration", "1s"])
        .args(["--json", "-"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let rec = punctual_record::Record::from_json(&String::from_utf8_lossy(&out.stdout)).unwrap();
    assert_eq!(rec.kind, "simulate");
    assert!(!root().join("-").exists(), "a file named - was written");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("rez-network"),
        "the summary goes to stderr: {err}"
    );
    assert!(!err.contains("record written"), "{err}");
}

#[test]
fn an_output_path_in_a_directory_that_takes_no_files_says_so() {
    let out = punctual()
        .args(["sysinfo", "--json", "/proc/version"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("directory /proc does not accept new files"),
        "{err}"
    );
    let out = punctual()
        .args(["sysinfo", "--json", "/nonexistent-dir/x.json"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("directory /nonexistent-dir does not exist"),
        "{err}"
    );
}

#[test]
fn negative_and_zero_durations_get_the_same_rule() {
    for d in ["--duration=-1s", "--duration=0s"] {
        let out = punctual().args(["timer", d]).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{d}: {err}");
        assert!(err.contains("must be greater than zero"), "{d}: {err}");
    }
}

#[test]
fn table_and_columns_without_sweep_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let table = dir.path().join("t.csv");
    let out = punctual()
        .args(["simulate", "scenarios/rez-network.toml", "--duration", "1s"])
        .arg("--table")
        .arg(&table)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("--table shapes the table of a --sweep"),
        "{err}"
    );
    assert!(!table.exists());
}

#[test]
fn a_failing_command_load_fails_the_run() {
    let out = punctual()
        .args(["load", "cmd", "--duration", "2s", "--", "false"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("exited with status 1"), "{err}");
    // A command that runs until the end and is stopped by the run is fine.
    let out = punctual()
        .args(["load", "cmd", "--duration", "1s", "--", "sleep", "30"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn record_written_and_warnings_go_to_stderr() {
    let _live = crate::common::live();
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("t.json");
    let out = punctual()
        .args([
            "timer",
            "--cpus",
            "0",
            "--replay",
            "crates/cli/tests/golden/feed.txt",
        ])
        .arg("--json")
        .arg(&json)
        .output()
        .unwrap();
    assert!(out.status.success());
    let (so, se) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(se.contains("record written to"), "{se}");
    assert!(!so.contains("record written"), "{so}");
    // A live run: whatever warnings this machine earns go to stderr, and
    // standard output holds the table alone.
    let live = dir.path().join("live.json");
    let out = punctual()
        .args(["timer", "--cpus", "0", "--duration", "200ms", "--json"])
        .arg(&live)
        .output()
        .unwrap();
    if out.status.success() {
        let rec = punctual_record::Record::read(&live).unwrap();
        let (so, se) = (
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
        );
        assert!(!so.contains("warnings:") && !so.contains("[warn]"), "{so}");
        assert_eq!(se.contains("warnings:"), !rec.warnings.is_empty(), "{se}");
    } else {
        eprintln!(
            "live timer did not run here ({}); its part is skipped",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    let sim = dir.path().join("s.json");
    let out = punctual()
        .args(["simulate", "scenarios/rez-network.toml", "--duration", "1s"])
        .arg("--json")
        .arg(&sim)
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("record written to"));
    assert!(!String::from_utf8_lossy(&out.stdout).contains("record written"));
}

/// cyclictest's short options, where punctual's do not clash with them,
/// mean what they mean there: `-a` CPUs, `-p` priority, `-i` interval,
/// `-D` duration, each landing in the record's `config` as the long
/// option would.
#[test]
fn cyclictest_short_options_mean_the_long_ones() {
    let dir = tempfile::tempdir().unwrap();
    let config = |args: &[&str], name: &str| -> serde_json::Value {
        let path = dir.path().join(name);
        punctual()
            .args(args)
            .arg("--json")
            .arg(&path)
            .assert()
            .success();
        punctual_record::Record::read(&path)
            .map(|r| serde_json::to_value(r.config).unwrap())
            .unwrap()
    };
    let feed = "crates/cli/tests/golden/feed.txt";
    let gaps = "crates/cli/tests/golden/gaps.txt";
    let t = config(
        &[
            "timer", "-a", "0", "-p", "80", "-i", "500us", "-D", "1s", "--replay", feed,
        ],
        "t.json",
    );
    assert_eq!(t["cpus"], serde_json::json!([0]), "{t}");
    assert_eq!(t["policy"], "fifo:80", "{t}");
    assert_eq!(t["interval_ns"], 500_000, "{t}");
    assert_eq!(t["duration_ns"], 1_000_000_000u64, "{t}");
    let n = config(
        &["noise", "-a", "0", "-p", "70", "-D", "2s", "--replay", gaps],
        "n.json",
    );
    assert_eq!(n["cpus"], serde_json::json!([0]), "{n}");
    assert_eq!(n["policy"], "fifo:70", "{n}");
    assert_eq!(n["duration_ns"], 2_000_000_000u64, "{n}");
    // check: the duration is split between its timer and noise halves.
    let c = config(
        &[
            "check",
            "-a",
            "0",
            "-D",
            "2s",
            "--replay-timer",
            feed,
            "--replay-noise",
            gaps,
        ],
        "c.json",
    );
    assert_eq!(c["timer.cpus"], serde_json::json!([0]), "{c}");
    assert_eq!(c["timer.duration_ns"], 1_000_000_000u64, "{c}");
    assert_eq!(c["noise.duration_ns"], 1_000_000_000u64, "{c}");
    // cyclictest's `-i 1000` counts microseconds; punctual asks for the unit.
    punctual()
        .args(["timer", "-i", "1000", "--replay", feed])
        .assert()
        .code(2)
        .stderr(predicates::str::contains("'1000' is not a duration"));
    // Each is documented in --help beside its long option.
    for (verb, shorts) in [
        (
            "timer",
            &[
                "-a, --cpus",
                "-p, --priority",
                "-i, --interval",
                "-D, --duration",
            ][..],
        ),
        (
            "noise",
            &["-a, --cpus", "-p, --priority", "-D, --duration"][..],
        ),
        ("check", &["-a, --cpus", "-D, --duration"][..]),
    ] {
        let out = punctual().args([verb, "--help"]).output().unwrap();
        let help = String::from_utf8(out.stdout).unwrap();
        for s in shorts {
            assert!(help.contains(s), "{verb} --help lacks {s}:\n{help}");
        }
    }
}
