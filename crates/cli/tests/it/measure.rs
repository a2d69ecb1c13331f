//! CLI integration tests of the measuring verbs: timer, noise, sysinfo,
//! check. Short runs of the real probes (they degrade, not fail, without
//! privileges), bad input, and interruption.

use std::process::Command;
use std::time::Duration;

use assert_cmd::prelude::*;
use predicates::prelude::*;

use crate::common::{is_root, live, read_json};

fn punctual() -> Command {
    Command::cargo_bin("punctual").unwrap()
}

/// Bad input: one sentence naming the value, exit status 2, no panic.
#[test]
fn bad_input_is_named_and_exits_2() {
    let cases: &[(&[&str], &str)] = &[
        (&["timer", "--interval", "0"], "'0'"),
        (&["timer", "--cpus", "7"], "CPU 7"),
        (&["timer", "--priority", "120"], "--priority 120"),
        (&["timer", "--duration", "banana"], "banana"),
        (&["timer", "--policy", "batch"], "'batch'"),
        (&["timer", "--clock", "hpet"], "'hpet'"),
        (&["noise", "--cpus", "7"], "CPU 7"),
        (&["noise", "--duration", "banana"], "banana"),
        (&["noise", "--policy", "deadline"], "deadline"),
        (&["check", "--duration", "banana"], "banana"),
        (&["check", "--cpus", "0-99"], "is not online"),
        (
            &["timer", "--json", "/nonexistent-dir/x.json"],
            "/nonexistent-dir/x.json",
        ),
        (
            &["noise", "--json", "/nonexistent-dir/x.json"],
            "/nonexistent-dir/x.json",
        ),
        (
            &["sysinfo", "--json", "/nonexistent-dir/x.json"],
            "/nonexistent-dir/x.json",
        ),
        (
            &["timer", "--hist", "/nonexistent-dir/h.txt"],
            "/nonexistent-dir/h.txt",
        ),
    ];
    for (args, needle) in cases {
        let out = punctual().args(*args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
}

#[test]
fn sysinfo_prints_facts_and_writes_a_record() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("s.json");
    punctual()
        .args(["sysinfo", "--json"])
        .arg(&p)
        .assert()
        .success()
        .stdout(predicate::str::contains("kernel").and(predicate::str::contains("clocksource")));
    let v = read_json(&p);
    assert_eq!(v["schema_version"], 1);
    assert_eq!(v["kind"], "sysinfo");
    assert!(v["platform"]["logical_cpus"].as_u64().unwrap() >= 1);
}

#[test]
fn timer_writes_record_and_cyclictest_histogram() {
    let _live = live();
    let dir = tempfile::tempdir().unwrap();
    let (j, h) = (dir.path().join("t.json"), dir.path().join("t.hist"));
    punctual()
        .args([
            "timer",
            "--duration",
            "300ms",
            "--cpus",
            "0",
            "--threshold",
            "50us",
            "--json",
        ])
        .arg(&j)
        .arg("--hist")
        .arg(&h)
        .assert()
        .success()
        .stdout(predicate::str::contains("p99.9").and(predicate::str::contains("missed")));
    let v = read_json(&j);
    assert_eq!(v["kind"], "timer");
    assert_eq!(v["source"], "measured");
    assert_eq!(v["interrupted"], false);
    let s = v["series"].as_array().unwrap();
    let lat = s.iter().find(|x| x["name"] == "cpu0.latency").unwrap();
    assert_eq!(lat["unit"], "ns");
    assert_eq!(lat["sample_period_ns"], 1_000_000);
    assert!(lat["count"].as_u64().unwrap() > 100);
    assert_eq!(lat["histogram"]["bucket_ns"], 1000);
    assert!(s.iter().any(|x| x["name"] == "cpu0.interval"));
    assert_eq!(v["config"]["interval_ns"], 1_000_000);
    assert!(v["spikes"]
        .as_array()
        .unwrap()
        .iter()
        .all(|x| x["value_ns"].as_u64().unwrap() > 50_000));
    let hist = std::fs::read_to_string(&h).unwrap();
    assert!(hist.starts_with("# Histogram\n000000 "));
    assert!(hist.contains("\n# Max Latencies: "));
    assert!(hist.contains("\n# Histogram Overflows: "));
}

#[test]
fn timerfd_and_other_policy_work() {
    let _live = live();
    punctual()
        .args([
            "timer",
            "--duration",
            "200ms",
            "--cpus",
            "0",
            "--clock",
            "timerfd",
            "--policy",
            "other",
        ])
        .assert()
        .success();
}

#[test]
fn noise_reports_stolen_time_and_the_kernel_view() {
    let _live = live();
    let dir = tempfile::tempdir().unwrap();
    let j = dir.path().join("n.json");
    punctual()
        .args(["noise", "--duration", "300ms", "--cpus", "0", "--json"])
        .arg(&j)
        .assert()
        .success()
        .stdout(predicate::str::contains("k.admits"));
    let v = read_json(&j);
    let st = &v["stolen"][0];
    assert_eq!(st["cpu"], 0);
    assert!(st["observed_ns"].as_u64().unwrap() >= 290_000_000);
    assert!(st["threshold_ns"].as_u64().unwrap() >= 1000);
    assert!(st["loop_cost_ns"].as_u64().unwrap() > 0);
    assert!(st["kernel_view"].is_object());
    assert!(st["by_source"]
        .as_array()
        .unwrap()
        .iter()
        .all(|s| s["kind"] == "kernel"));
    assert!(v["series"][0]["name"] == "cpu0.gap");
}

#[test]
fn check_surveys_and_summarizes() {
    let _live = live();
    let dir = tempfile::tempdir().unwrap();
    let j = dir.path().join("c.json");
    punctual()
        .args(["check", "--duration", "1s", "--json"])
        .arg(&j)
        .assert()
        .success()
        .stdout(
            predicate::str::contains("== summary")
                .and(predicate::str::contains("woke typically"))
                .and(predicate::str::contains("lost"))
                .and(predicate::str::contains("== verdicts for"))
                .and(predicate::str::is_match(r"\n  (ok  |MISS|\?\?  ) ").unwrap()),
        );
    let v = read_json(&j);
    assert_eq!(v["kind"], "check");
    assert!(!v["series"].as_array().unwrap().is_empty());
    assert!(!v["stolen"].as_array().unwrap().is_empty());
    // The verdicts printed are the ones kept, one per shipped profile.
    let verdicts = v["extra"]["verdicts"].as_array().unwrap();
    assert!(!verdicts.is_empty());
    for x in verdicts {
        assert!(x["profile"].is_string() && x["state"].is_string(), "{x}");
    }
    // And in the record's typed section, the same states.
    let typed = v["verdicts"].as_array().unwrap();
    assert_eq!(typed.len(), verdicts.len());
    for (t, x) in typed.iter().zip(verdicts) {
        assert_eq!(t["profile"], x["profile"]);
        assert_eq!(t["state"], x["state"]);
        assert!(t["ci_s"].is_array() && t["basis"].is_string(), "{t}");
    }
    // The noise half polled in stretches (no RT-throttling stops), and
    // says so; `forecast` on the record then takes S from its gaps, and
    // its verdicts are the ones `check` printed and kept.
    assert_eq!(
        v["extra"]["noise_loop"]["stretched"], true,
        "{}",
        v["extra"]
    );
    assert!(v["config"]["noise.stretch"]["rest_ns"].as_u64().unwrap() > 0);
    let f = dir.path().join("f.json");
    punctual()
        .args([
            "forecast",
            "--buffers",
            "2",
            "--buffer-len",
            "1ms",
            "--compute",
            "0.5ms",
        ])
        .arg(&j)
        .arg("--json")
        .arg(&f)
        .assert()
        .success();
    let fj = read_json(&f);
    for s in fj["series"].as_array().unwrap() {
        assert_eq!(s["stall_source"]["kind"], "noise gaps", "{s}");
    }
    let fv = fj["verdicts"].as_array().unwrap();
    assert_eq!(fv.len(), verdicts.len());
    for (a, b) in fv.iter().zip(verdicts) {
        assert_eq!(a["profile"], b["profile"]);
        assert_eq!(a["mttf_seconds"], b["mttf_seconds"], "{a} vs {b}");
    }
}

/// Without the right to SCHED_FIFO the probes run at SCHED_OTHER: the
/// headings say so (never "SCHED_FIFO 95"), and every verdict, printed and
/// kept, is marked not representative. As root the run drops to nobody
/// (setpriv); without setpriv a root run skips, saying why.
#[test]
fn check_without_realtime_marks_verdicts_not_representative() {
    let _live = live();
    let root = unsafe { libc::geteuid() } == 0;
    let setpriv = std::path::Path::new("/usr/bin/setpriv");
    if root && !setpriv.exists() {
        eprintln!("skipped: running as root and /usr/bin/setpriv is missing to drop privileges");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(
        dir.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o777),
    )
    .unwrap();
    let j = dir.path().join("c.json");
    let bin = assert_cmd::cargo::cargo_bin("punctual");
    let mut cmd = if root {
        let mut c = Command::new(setpriv);
        c.args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .arg(&bin);
        c
    } else {
        Command::new(&bin)
    };
    let out = cmd
        .args(["check", "--duration", "400ms", "--cpus", "0", "--json"])
        .arg(&j)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(!text.contains("SCHED_FIFO 95"), "{text}");
    assert!(text.contains("one SCHED_OTHER"), "{text}");
    assert!(text.contains("NOT REPRESENTATIVE"), "{text}");
    let v = read_json(&j);
    let typed = v["verdicts"].as_array().unwrap();
    assert!(!typed.is_empty());
    for t in typed {
        assert_eq!(t["representative"], false, "{t}");
        assert!(t["note"].as_str().unwrap().contains("SCHED_OTHER"), "{t}");
    }
}

/// Ctrl-C ends the run early and still writes the record, marked.
#[test]
fn sigint_keeps_results_marked_interrupted() {
    let _live = live();
    let dir = tempfile::tempdir().unwrap();
    for verb in ["timer", "noise"] {
        let j = dir.path().join(format!("{verb}.json"));
        let mut child = punctual()
            .args([verb, "--duration", "60s", "--cpus", "0", "--json"])
            .arg(&j)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(1200));
        let st = Command::new("kill")
            .args(["-INT", &child.id().to_string()])
            .status()
            .unwrap();
        assert!(st.success());
        let t0 = std::time::Instant::now();
        let status = loop {
            if let Some(s) = child.try_wait().unwrap() {
                break s;
            }
            assert!(
                t0.elapsed() < Duration::from_secs(20),
                "{verb} did not stop"
            );
            std::thread::sleep(Duration::from_millis(50));
        };
        assert!(status.success(), "{verb}: {status:?}");
        let v = read_json(&j);
        assert_eq!(v["interrupted"], true, "{verb}");
        assert!(v["duration_ns"].as_u64().unwrap() < 30_000_000_000);
        assert!(v["warnings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|w| w["code"] == "interrupted"));
    }
}

/// The whole CLI pipeline on a replayed feed: exact, known figures.
#[test]
fn replayed_feed_gives_exact_figures() {
    let dir = tempfile::tempdir().unwrap();
    let feed = dir.path().join("feed.txt");
    // 100 wake-ups: 98 at 10 us, one 400 us, one 2.5 ms (2 missed periods).
    let mut text = String::from("# latencies in ns\n");
    for i in 0..100 {
        let v = match i {
            40 => 400_000,
            70 => 2_500_000,
            _ => 10_000,
        };
        text.push_str(&format!("{v}\n"));
    }
    std::fs::write(&feed, text).unwrap();
    let (j, h) = (dir.path().join("r.json"), dir.path().join("r.hist"));
    punctual()
        .args(["timer", "--cpus", "0", "--threshold", "100us", "--replay"])
        .arg(&feed)
        .arg("--json")
        .arg(&j)
        .arg("--hist")
        .arg(&h)
        .assert()
        .success();
    let v = read_json(&j);
    let lat = &v["series"][0];
    assert_eq!(lat["count"], 100);
    assert_eq!(lat["missed"], 2);
    assert_eq!(lat["min"], 10_000);
    assert_eq!(lat["max"], 2_500_000);
    // Percentiles come from the HdrHistogram: 3 significant digits.
    let p50 = lat["percentiles"]["p50"].as_u64().unwrap();
    assert!((10_000..=10_010).contains(&p50), "{p50}");
    let spikes: Vec<u64> = v["spikes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["value_ns"].as_u64().unwrap())
        .collect();
    assert_eq!(spikes, vec![400_000, 2_500_000]);
    let hist = std::fs::read_to_string(&h).unwrap();
    assert!(hist.contains("\n000010 000098\n"), "{hist}");
    assert!(hist.contains("# Max Latencies: 02500\n"));
    let bad = dir.path().join("bad.txt");
    std::fs::write(&bad, "10\nbanana\n").unwrap();
    punctual()
        .args(["timer", "--replay"])
        .arg(&bad)
        .assert()
        .code(2)
        .stderr(predicate::str::contains("line 2: 'banana'"));
}

/// Without privileges (no CAP_SYS_NICE, no mlock) the probes warn and run
/// at SCHED_OTHER; they do not fail.
#[test]
fn unprivileged_runs_degrade_with_warnings() {
    let _live = live();
    let setpriv = std::path::Path::new("/usr/bin/setpriv");
    if !setpriv.exists() || !is_root() {
        eprintln!("skipped: needs root and setpriv to drop privileges");
        return;
    }
    for verb in ["timer", "noise"] {
        let out = crate::common::punctual_as_nobody()
            .args([verb, "--duration", "300ms", "--cpus", "0"])
            .output()
            .unwrap();
        // Warnings go to standard error; standard output is the table.
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success(),
            "{verb}: {} {stderr}",
            String::from_utf8_lossy(&out.stdout)
        );
        assert!(
            stderr.contains("could not set policy fifo:95"),
            "{verb}: {stderr}"
        );
        assert!(stderr.contains("could not lock memory"), "{verb}: {stderr}");
        assert_eq!(
            stderr.matches("could not set policy").count(),
            1,
            "{verb}: warn once"
        );
    }
}
