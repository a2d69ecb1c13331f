//! `punctual compare` through the command line: the answer, the exit
//! status a CI job stops on, and the JSON and JUnit outputs, on the report
//! fixtures (an idle and a loaded timer run of the same machine).

use std::path::PathBuf;

use crate::common::{is_root, read_json};
use assert_cmd::Command;

fn fx(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../report/tests/fixtures")
        .join(name)
}

fn punctual() -> Command {
    Command::cargo_bin("punctual").unwrap()
}

#[test]
fn a_loaded_run_against_an_idle_one_regressed_and_exits_1() {
    let out = punctual()
        .arg("compare")
        .arg(fx("timer-idle.json"))
        .arg(fx("timer-load.json"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stdout}{stderr}");
    assert!(stdout.contains("cpu0.latency: regressed"), "{stdout}");
    assert!(stdout.contains("cpu1.latency: regressed"), "{stdout}");
    // Intervals deviate both ways: named as not compared, with the reason.
    assert!(stdout.contains("cpu0.interval: not compared"), "{stdout}");
    assert!(
        stderr.contains("latency regressed in cpu0.latency"),
        "{stderr}"
    );
}

#[test]
fn the_reverse_is_an_improvement_and_exits_0() {
    let out = punctual()
        .arg("compare")
        .arg(fx("timer-load.json"))
        .arg(fx("timer-idle.json"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(stdout.contains("cpu0.latency: improved"), "{stdout}");
}

#[test]
fn a_record_against_itself_is_no_difference() {
    let out = punctual()
        .arg("compare")
        .arg(fx("timer-idle.json"))
        .arg(fx("timer-idle.json"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(
        stdout.contains("cpu0.latency: no difference detectable at this length"),
        "{stdout}"
    );
}

#[test]
fn json_to_stdout_and_junit_file() {
    let dir = tempfile::tempdir().unwrap();
    let junit = dir.path().join("compare.xml");
    let out = punctual()
        .arg("compare")
        .arg(fx("timer-idle.json"))
        .arg(fx("timer-load.json"))
        .args(["--json", "-", "--junit"])
        .arg(&junit)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    // Standard output holds only the JSON; the table went to stderr.
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["answer"], "regressed");
    assert_eq!(v["series"][0]["quantiles"][0]["quantile"], "p99");
    assert!(String::from_utf8_lossy(&out.stderr).contains("answer"));
    let xml = std::fs::read_to_string(&junit).unwrap();
    assert!(xml.contains("<testcase classname=\"latency\" name=\"cpu0.latency\">"));
    assert_eq!(xml.matches("<failure").count(), 2, "{xml}");
}

#[test]
fn bad_input_is_one_sentence_and_exit_2() {
    let cases: [(&[&str], &str); 5] = [
        (&["--quantiles", "99,150"], "not a percentile"),
        (&["--min-change", "lots"], "not a percentage"),
        (&["--min-change=-5%"], "negative"),
        (&["--level", "2"], "not between 0 and 1"),
        (&["--block-windows", "0"], "at least one window"),
    ];
    for (extra, says) in cases {
        let out = punctual()
            .arg("compare")
            .arg(fx("timer-idle.json"))
            .arg(fx("timer-load.json"))
            .args(extra)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{extra:?}: {stderr}");
        assert!(stderr.contains(says), "{extra:?}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
    }
    let out = punctual()
        .arg("compare")
        .arg(fx("timer-idle.json"))
        .arg(fx("reserve-sim.json"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("no latency-like series in common"),
        "{stderr}"
    );
    let out = punctual()
        .arg("compare")
        .arg(fx("timer-idle.json"))
        .arg("/nonexistent/new.json")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("does not exist"));
}

#[test]
fn a_timer_record_is_resampled_in_blocks_of_its_windows() {
    if !is_root() {
        eprintln!("skipped: timer's probe needs root (SCHED_FIFO)");
        return;
    }
    let _live = crate::common::live();
    let dir = tempfile::tempdir().unwrap();
    let rec = dir.path().join("t.json");
    let out = punctual()
        .args(["timer", "--cpus", "0", "--duration", "4s", "--json"])
        .arg(&rec)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v = read_json(&rec);
    let windows = v["series"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "cpu0.latency")
        .and_then(|s| s["windows"]["counts"].as_array())
        .map_or(0, |c| c.len());
    let compare = |extra: &[&str]| {
        let out = punctual()
            .arg("compare")
            .arg(&rec)
            .arg(&rec)
            .args(extra)
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        // A record against itself: whatever the blocks, no change.
        assert_eq!(out.status.code(), Some(0), "{stdout}");
        assert!(
            stdout.contains("cpu0.latency: no difference detectable at this length"),
            "{stdout}"
        );
        stdout
    };
    let auto = compare(&[]);
    if windows < punctual_analysis::compare::MIN_WINDOWS {
        // A run that missed most of its periods: too few windows, and
        // the output says it fell back.
        assert!(auto.contains("resampled sample by sample"), "{auto}");
        return;
    }
    assert!(
        auto.contains("cpu0.latency: resampled by blocks of B consecutive windows"),
        "{auto}"
    );
    let one = compare(&["--block-windows", "1"]);
    assert!(one.contains("p99 1 in BASE, 1 in NEW"), "{one}");
}
