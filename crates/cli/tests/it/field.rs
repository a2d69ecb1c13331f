//! The habits of cyclictest, rtla and CI farms, through the command line:
//! C-states held for the run (`--dma-latency`, `--deepest-idle-state`),
//! CI gates (`--fail-if`, `--fail-on-verdict`, `report --format junit`).

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use assert_cmd::prelude::*;

use crate::common::{is_root, live, read_json};

fn punctual() -> Command {
    Command::cargo_bin("punctual").unwrap()
}

/// CPU 0's deepest idle state's `disable` file, when it has more than one
/// state (so that `--deepest-idle-state 0` has something to disable).
fn cpu0_deepest_disable() -> Option<std::path::PathBuf> {
    let dir = Path::new("/sys/devices/system/cpu/cpu0/cpuidle");
    let n = (0..)
        .take_while(|k| dir.join(format!("state{k}")).exists())
        .count();
    (n >= 2).then(|| dir.join(format!("state{}/disable", n - 1)))
}

fn read_trim(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap().trim().to_string()
}

/// Waits until `cond` holds (or panics after `secs`).
fn wait_for(secs: u64, what: &str, mut cond: impl FnMut() -> bool) {
    let t0 = Instant::now();
    while !cond() {
        assert!(t0.elapsed() < Duration::from_secs(secs), "{what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// While the probe runs, /dev/cpu_dma_latency is held at 0 and CPU 0's
/// deeper idle states are disabled; the record and the output say so, and
/// afterwards the states read as before.
#[test]
fn c_states_are_held_for_the_run_said_and_put_back() {
    let Some(disable) = cpu0_deepest_disable().filter(|_| is_root()) else {
        eprintln!("skipped: needs root and a CPU 0 with two cpuidle states or more");
        return;
    };
    let _live = live();
    let before = read_trim(&disable);
    let dir = tempfile::tempdir().unwrap();
    let j = dir.path().join("t.json");
    let child = punctual()
        .args(["timer", "--cpus", "0", "--duration", "1500ms"])
        .args(["--deepest-idle-state", "0", "--json"])
        .arg(&j)
        .env("PUNCTUAL_RUN_DIR", dir.path().join("run"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    if before == "0" {
        wait_for(10, "the deepest idle state was never disabled", || {
            read_trim(&disable) == "1"
        });
    }
    // The PM QoS target in force reads back as a 32-bit value.
    let qos = std::fs::read("/dev/cpu_dma_latency").unwrap();
    assert_eq!(i32::from_ne_bytes(qos[..4].try_into().unwrap()), 0);
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{out:?}");
    assert_eq!(read_trim(&disable), before, "the idle state was put back");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("C-states: /dev/cpu_dma_latency held at 0us; idle states deeper than 0"),
        "{stdout}"
    );
    let c = &read_json(&j)["config"]["c_states"];
    assert_eq!(c["dma_latency_us"], 0, "{c}");
    assert_eq!(c["deepest_idle_state"], 0, "{c}");
    if before == "0" {
        assert!(!c["disabled"].as_array().unwrap().is_empty(), "{c}");
    }
    assert_eq!(
        std::fs::read_dir(dir.path().join("run")).unwrap().count(),
        0,
        "no journal is left"
    );
}

/// `cause` and `validate` hold the C-states as the probe verbs do, and
/// `monitor` leaves them free unless asked; each says which, and the idle
/// states read as before afterwards.
#[test]
fn cause_validate_and_monitor_say_which_c_states_they_held() {
    let Some(disable) = cpu0_deepest_disable().filter(|_| is_root()) else {
        eprintln!("skipped: needs root and a CPU 0 with two cpuidle states or more");
        return;
    };
    let _live = live();
    let before = read_trim(&disable);
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    let (c, v, m) = (
        dir.path().join("c.json"),
        dir.path().join("v.json"),
        dir.path().join("m.prom"),
    );
    let out = punctual()
        .args([
            "cause",
            "--probe",
            "noise",
            "--cpus",
            "0",
            "--duration",
            "500ms",
        ])
        .args(["--deepest-idle-state", "0", "--json"])
        .arg(&c)
        .env("PUNCTUAL_RUN_DIR", &run)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("C-states: /dev/cpu_dma_latency held at 0us; idle states deeper than 0"),
        "{stdout}"
    );
    assert_eq!(read_json(&c)["config"]["c_states"]["dma_latency_us"], 0);
    assert_eq!(read_trim(&disable), before, "cause put the idle state back");

    let out = punctual()
        .args([
            "validate",
            "--cpu",
            "0",
            "--duration",
            "1s",
            "--rounds",
            "1",
        ])
        .args(["--load", "none", "--json"])
        .arg(&v)
        .env("PUNCTUAL_RUN_DIR", &run)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("C-states: /dev/cpu_dma_latency held at 0us"),
        "{stdout}"
    );
    assert_eq!(read_json(&v)["c_states"]["dma_latency_us"], 0);

    let out = punctual()
        .args([
            "monitor",
            "--cpus",
            "0",
            "--listen",
            "off",
            "--duration",
            "300ms",
        ])
        .arg("--textfile")
        .arg(&m)
        .env("PUNCTUAL_RUN_DIR", &run)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("C-states: /dev/cpu_dma_latency not held"),
        "{stderr}"
    );
    assert_eq!(read_trim(&disable), before);
    assert_eq!(
        std::fs::read_dir(&run).map_or(0, |d| d.count()),
        0,
        "no journal is left"
    );
}

/// A run killed while it holds the idle states leaves its journal, and the
/// next verb, whatever it is, puts them back and says so.
#[test]
fn a_killed_runs_idle_states_are_put_back_by_the_next_verb() {
    let Some(disable) = cpu0_deepest_disable().filter(|_| is_root()) else {
        eprintln!("skipped: needs root and a CPU 0 with two cpuidle states or more");
        return;
    };
    if read_trim(&disable) != "0" {
        eprintln!("skipped: CPU 0's deepest idle state is already disabled");
        return;
    }
    let _live = live();
    let run = tempfile::tempdir().unwrap();
    let mut child = punctual()
        .args(["noise", "--cpus", "0", "--duration", "60s"])
        .args(["--deepest-idle-state", "0", "--dma-latency", "off"])
        .env("PUNCTUAL_RUN_DIR", run.path())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_for(10, "the deepest idle state was never disabled", || {
        read_trim(&disable) == "1"
    });
    child.kill().unwrap();
    child.wait().unwrap();
    assert_eq!(read_trim(&disable), "1", "SIGKILL cannot restore");
    let out = punctual()
        .arg("sysinfo")
        .env("PUNCTUAL_RUN_DIR", run.path())
        .output()
        .unwrap();
    assert!(out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!(
            "put back what a killed run left: restored {} to '0'",
            disable.display()
        )),
        "{stderr}"
    );
    assert_eq!(read_trim(&disable), "0");
}

/// Without root the C-states cannot be held: one warning says what the
/// numbers then mean, and the record says nothing was held.
#[test]
fn without_root_the_c_states_are_not_held_and_that_is_said() {
    let setpriv = Path::new("/usr/bin/setpriv");
    if !setpriv.exists() || !is_root() {
        eprintln!("skipped: needs root and setpriv to drop privileges");
        return;
    }
    let _live = live();
    let dir = crate::common::tempdir_for_anyone();
    let j = dir.path().join("t.json");
    let out = crate::common::punctual_as_nobody()
        .args(["timer", "--duration", "300ms", "--cpus", "0", "--json"])
        .arg(&j)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("C-states not held at 0us (cannot open /dev/cpu_dma_latency"),
        "{stderr}"
    );
    assert!(
        stderr.contains("not comparable with cyclictest's"),
        "{stderr}"
    );
    let v = read_json(&j);
    assert_eq!(v["config"]["c_states"]["dma_latency_us"], "not held");
    assert!(String::from_utf8_lossy(&out.stdout).contains("/dev/cpu_dma_latency not held"));
}

/// A latency that is not whole microseconds or `off` is refused by name.
#[test]
fn a_bad_dma_latency_is_one_sentence_and_exit_2() {
    for bad in ["-1", "fast", "1.5"] {
        let out = punctual()
            .args(["timer", &format!("--dma-latency={bad}")])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{bad}");
        let e = String::from_utf8_lossy(&out.stderr);
        assert!(e.contains("whole microseconds"), "{bad}: {e}");
    }
}

fn root() -> std::path::PathBuf {
    std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn fixture(name: &str) -> std::path::PathBuf {
    root().join("crates/report/tests/fixtures").join(name)
}

/// A replayed timer feed: 100 wake-ups at 10 us, one at 2.5 ms.
fn feed(dir: &Path) -> std::path::PathBuf {
    let p = dir.join("feed.txt");
    let mut text = String::new();
    for i in 0..100 {
        text.push_str(if i == 70 { "2500000\n" } else { "10000\n" });
    }
    std::fs::write(&p, text).unwrap();
    p
}

/// A gate that holds passes (exit 0, said on stderr); one that fails is
/// exit 1 with one line naming it, after the record is written.
#[test]
fn fail_if_gates_a_timer_run() {
    let dir = tempfile::tempdir().unwrap();
    let feed = feed(dir.path());
    let j = dir.path().join("t.json");
    let out = punctual()
        .args(["timer", "--cpus", "0", "--replay"])
        .arg(&feed)
        .args([
            "--fail-if",
            "max > 10ms",
            "--fail-if",
            "cpu0.latency.p50 >= 1ms",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("gate passed: --fail-if 'max > 10ms': cpu0.latency max = 2.5ms\n"),
        "{err}"
    );
    let out = punctual()
        .args(["timer", "--cpus", "0", "--replay"])
        .arg(&feed)
        .args([
            "--fail-if",
            "max > 1ms",
            "--fail-if",
            "missed > 0",
            "--json",
        ])
        .arg(&j)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    let last = err.lines().last().unwrap();
    assert_eq!(
        last,
        "punctual: gate failed: --fail-if 'max > 1ms': cpu0.latency max = 2.5ms > 1ms; \
         --fail-if 'missed > 0': cpu0.latency missed = 2 > 0"
    );
    assert!(
        j.exists(),
        "the record is written before the gates are checked"
    );
}

/// A gate that cannot be read is exit 2 with one sentence, before or after
/// the run.
#[test]
fn bad_gates_are_one_sentence_and_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let feed = feed(dir.path());
    let cases: [(&[&str], &str); 5] = [
        (&["timer", "--fail-if", "p99 200us"], "no comparison"),
        (&["timer", "--fail-if", "p97 > 1ms"], "names no figure"),
        (&["timer", "--fail-on-verdict", "sometimes"], "'sometimes'"),
        (
            &["noise", "--fail-on-verdict", "misses"],
            "noise measures stolen time",
        ),
        (&["timer", "--fail-if", "cpu5.p99 > 1ms"], "no such series"),
    ];
    for (args, says) in cases {
        let out = punctual()
            .args(args)
            .args(["--cpus", "0", "--replay"])
            .arg(&feed)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}: {out:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(says), "{args:?}: {err}");
        assert_eq!(
            err.lines().filter(|l| l.starts_with("punctual:")).count(),
            1
        );
    }
}

/// `report` gates saved records, and writes JUnit XML with one test case
/// per gate and per verdict (a decided miss fails, an undecided one is
/// skipped), whose counts agree with the cases.
#[test]
fn report_gates_records_and_writes_junit() {
    let load = fixture("timer-load.json");
    let out = punctual()
        .arg("report")
        .arg(&load)
        .args(["--fail-if", "p99 > 1ms", "--fail-on-verdict", "RT video 50"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let dir = tempfile::tempdir().unwrap();
    let x = dir.path().join("junit.xml");
    let out = punctual()
        .arg("report")
        .arg(&load)
        .args(["--fail-if", "p99 > 50us", "--fail-on-verdict", "misses"])
        .args(["--format", "junit", "-o"])
        .arg(&x)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(
            "punctual: gate failed: --fail-if 'p99 > 50us': cpu0.latency p99 = 87.295us > 50us"
        ),
        "{err}"
    );
    let xml = std::fs::read_to_string(&x).unwrap();
    let rec = punctual_record::Record::read(&load).unwrap();
    let verdicts = punctual_analysis::gate::record_verdicts(&rec);
    let misses = verdicts
        .iter()
        .filter(|v| v.state == punctual_record::VerdictState::Misses)
        .count();
    let undecided = verdicts
        .iter()
        .filter(|v| v.state == punctual_record::VerdictState::Inconclusive)
        .count();
    assert!(misses > 0 && undecided > 0, "the fixture has both");
    assert_eq!(xml.matches("<testcase classname=\"gate\"").count(), 2);
    assert_eq!(
        xml.matches("<testcase classname=\"verdict\"").count(),
        verdicts.len()
    );
    assert_eq!(xml.matches("<failure ").count(), misses + 2, "{xml}");
    assert_eq!(xml.matches("<skipped ").count(), undecided);
    assert!(xml.contains(&format!(
        "<testsuites name=\"punctual report\" tests=\"{}\" failures=\"{}\" skipped=\"{undecided}\">",
        verdicts.len() + 2,
        misses + 2
    )));
    assert!(
        xml.contains("<testcase classname=\"gate\" name=\"--fail-if 'p99 &gt; 50us'\">"),
        "{xml}"
    );
}

/// `--stop-at` ends the run at the first sample over it, keeps the event
/// in the record and the output, and `--on-threshold` gets its figures.
#[test]
fn stop_at_ends_the_run_at_the_event_and_hands_it_to_a_command() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("feed.txt");
    // Wake-ups of 10 us, the fifth 600 us late, then more that must not
    // be measured.
    let mut text = String::new();
    for i in 0..50 {
        text.push_str(if i == 4 { "600000\n" } else { "10000\n" });
    }
    std::fs::write(&f, text).unwrap();
    let env = dir.path().join("env.txt");
    let j = dir.path().join("t.json");
    let trace = dir.path().join("stop.perfetto.json");
    let out = punctual()
        .args(["timer", "--cpus", "0", "--interval", "1ms", "--replay"])
        .arg(&f)
        .args(["--stop-at", "500us", "--on-threshold"])
        .arg(format!(
            "echo $PUNCTUAL_KIND $PUNCTUAL_CPU $PUNCTUAL_VALUE_NS $PUNCTUAL_AT_NS $PUNCTUAL_THRESHOLD_NS > {}",
            env.display()
        ))
        .arg("--json")
        .arg(&j)
        .arg("--stop-trace")
        .arg(&trace)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let v = read_json(&j);
    assert_eq!(v["series"][0]["count"], 5, "nothing after the event");
    // The Perfetto trace of the second before: the event is its last slice.
    let t = read_json(&trace);
    let slices: Vec<&serde_json::Value> = t["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["ph"] == "X")
        .collect();
    assert_eq!(slices.last().unwrap()["args"]["value_ns"], 600_000, "{t}");
    let e = &v["extra"]["stopped_at"];
    assert_eq!(e["value_ns"], 600_000);
    assert_eq!(e["cpu"], 0);
    // Due at 5 ms on the replay's clock, 600 us late.
    assert_eq!(e["at_ns"], 5_600_000);
    assert_eq!(v["interrupted"], false, "a threshold stop is not a Ctrl-C");
    assert_eq!(
        std::fs::read_to_string(&env).unwrap(),
        "timer 0 600000 5600000 500000\n"
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("stopped at 5.6ms: CPU 0 woke late by 600us, over --stop-at 500us\n"),
        "{stdout}"
    );
    // Below the threshold the run goes to its end and nothing runs.
    let out = punctual()
        .args(["timer", "--cpus", "0", "--replay"])
        .arg(&f)
        .args(["--stop-at", "1ms", "--on-threshold", "exit 3"])
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(!String::from_utf8_lossy(&out.stdout).contains("stopped at"));
    std::fs::remove_file(&trace).unwrap();
    let out = punctual()
        .args(["timer", "--cpus", "0", "--replay"])
        .arg(&f)
        .args(["--stop-at", "1ms", "--stop-trace"])
        .arg(&trace)
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(!trace.exists(), "no event, no trace");
    let out = punctual()
        .args(["timer", "--on-threshold", "true"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "--on-threshold needs --stop-at");
}

/// The noise probe stops at the first gap over the threshold.
#[test]
fn stop_at_ends_a_noise_run_at_its_first_long_gap() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("gaps.txt");
    // After the 20 ms warm-up: gaps of 5, 300 and 80 us.
    std::fs::write(&f, "30000000 5000\n40000000 300000\n50000000 80000\n").unwrap();
    let j = dir.path().join("n.json");
    let out = punctual()
        .args(["noise", "--cpus", "0", "--duration", "1s", "--replay"])
        .arg(&f)
        .args(["--stop-at", "100us", "--json"])
        .arg(&j)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let v = read_json(&j);
    let e = &v["extra"]["stopped_at"];
    // The gap is the stolen 300 us plus the replayed loop's 50 ns step.
    assert_eq!(e["value_ns"], 300_050, "{e}");
    let gaps = &v["series"][0];
    assert_eq!(
        gaps["count"], 2,
        "the 80 us gap came after the stop: {gaps}"
    );
    assert!(v["duration_ns"].as_u64().unwrap() < 100_000_000);
}

/// Live, with the flight recorder: the record names what filled the event
/// that stopped the run.
#[test]
fn stop_at_with_cause_names_what_filled_the_event() {
    if !is_root() || !Path::new("/sys/kernel/tracing/trace").exists() {
        eprintln!("skipped: needs root and tracefs");
        return;
    }
    let _live = live();
    let dir = tempfile::tempdir().unwrap();
    let j = dir.path().join("n.json");
    // The tick alone (every 1-4 ms) steals more than 2 us.
    let out = punctual()
        .args([
            "noise",
            "--cpus",
            "0",
            "--duration",
            "20s",
            "--stop-at",
            "2us",
        ])
        .args(["--cause", "--json"])
        .arg(&j)
        .env("PUNCTUAL_RUN_DIR", dir.path().join("run"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let v = read_json(&j);
    let e = &v["extra"]["stopped_at"];
    assert!(e["value_ns"].as_u64().unwrap() > 2000, "{e}");
    assert!(
        v["duration_ns"].as_u64().unwrap() < 10_000_000_000,
        "stopped early"
    );
    let causes = e["causes"].as_array().expect("the event's causes");
    assert!(!causes.is_empty());
    let share: f64 = causes.iter().map(|c| c["share"].as_f64().unwrap()).sum();
    assert!((share - 1.0).abs() < 0.01, "the shares add up: {share}");
}

/// `--samples` writes every sample, in the documented binary format, and
/// reads back as the feed that made it; `--samples-max` bounds it and the
/// record counts what was not kept.
#[test]
fn samples_are_every_wake_up_and_read_back() {
    use punctual_live::samples::{read_file, SampleKind, HEADER_BYTES, SAMPLE_BYTES};
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("feed.txt");
    let feed: Vec<u64> = (0..40).map(|i| 5_000 + i * 1_000).collect();
    let text: String = feed.iter().map(|v| format!("{v}\n")).collect();
    std::fs::write(&f, text).unwrap();
    let s = dir.path().join("t.samples");
    let j = dir.path().join("t.json");
    let out = punctual()
        .args(["timer", "--cpus", "0", "--interval", "1ms", "--replay"])
        .arg(&f)
        .arg("--samples")
        .arg(&s)
        .arg("--json")
        .arg(&j)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr)
        .contains(&format!("40 samples written to {}", s.display())));
    assert_eq!(
        std::fs::metadata(&s).unwrap().len() as usize,
        HEADER_BYTES + 40 * SAMPLE_BYTES
    );
    let back = read_file(&s).unwrap();
    assert_eq!(back.kind, SampleKind::Latency);
    let values: Vec<u64> = back.samples.iter().map(|x| x.value.0).collect();
    assert_eq!(values, feed);
    // Wake-up k is due at (k+1) ms on the replay's clock and runs its
    // latency later.
    for (k, x) in back.samples.iter().enumerate() {
        assert_eq!(x.at.0, (k as u64 + 1) * 1_000_000 + feed[k]);
        assert_eq!(x.cpu, 0);
    }
    let v = read_json(&j);
    assert_eq!(v["config"]["samples"]["written"], 40);
    assert_eq!(v["config"]["samples"]["dropped"], 0);

    let out = punctual()
        .args(["timer", "--cpus", "0", "--replay"])
        .arg(&f)
        .arg("--samples")
        .arg(&s)
        .args(["--samples-max", "3", "--json"])
        .arg(&j)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let back = read_file(&s).unwrap();
    assert_eq!(back.samples.len(), 3);
    assert_eq!(back.samples[2].value.0, feed[2], "the first ones are kept");
    assert_eq!(read_json(&j)["config"]["samples"]["dropped"], 37);

    let out = punctual()
        .args(["timer", "--samples"])
        .arg(&s)
        .args(["--samples-max", "0"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}

/// The noise probe's samples are its stolen gaps.
#[test]
fn noise_samples_are_its_gaps() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("gaps.txt");
    std::fs::write(&f, "30000000 5000\n40000000 300000\n50000000 80000\n").unwrap();
    let s = dir.path().join("n.samples");
    let out = punctual()
        .args(["noise", "--cpus", "0", "--duration", "1s", "--replay"])
        .arg(&f)
        .arg("--samples")
        .arg(&s)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let back = punctual_live::samples::read_file(&s).unwrap();
    assert_eq!(back.kind, punctual_live::samples::SampleKind::Gap);
    let lens: Vec<u64> = back.samples.iter().map(|x| x.value.0).collect();
    // Each stolen interval plus the replayed loop's 50 ns step.
    assert_eq!(lens, vec![5_050, 300_050, 80_050]);
}

/// A second Ctrl-C exits at once (130), but first puts back what the run
/// changed; no output is left half-written.
#[test]
fn a_second_ctrl_c_exits_at_once_and_still_restores() {
    let Some(disable) = cpu0_deepest_disable().filter(|_| is_root()) else {
        eprintln!("skipped: needs root and a CPU 0 with two cpuidle states or more");
        return;
    };
    if read_trim(&disable) != "0" {
        eprintln!("skipped: CPU 0's deepest idle state is already disabled");
        return;
    }
    let _live = live();
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    let j = dir.path().join("t.json");
    let child = punctual()
        .args(["timer", "--cpus", "0", "--duration", "60s"])
        .args(["--deepest-idle-state", "0", "--json"])
        .arg(&j)
        .env("PUNCTUAL_RUN_DIR", &run)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for(10, "the deepest idle state was never disabled", || {
        read_trim(&disable) == "1"
    });
    let pid = child.id().to_string();
    let t0 = Instant::now();
    // Two signals sent back to back can reach the process as one (a
    // pending signal is not queued twice), so the second follows once the
    // first had time to be taken; the first alone may also finish the run
    // before the second lands. Either way the run ends at once and puts
    // back what it changed.
    crate::common::ctrl_c_twice(pid.parse().unwrap());
    let out = child.wait_with_output().unwrap();
    assert!(t0.elapsed() < Duration::from_secs(5), "exits at once");
    let err = String::from_utf8_lossy(&out.stderr);
    if out.status.code() == Some(130) {
        assert!(err.contains("interrupted again: putting back"), "{err}");
    } else {
        assert_eq!(out.status.code(), Some(0), "{err}");
        eprintln!("note: the first Ctrl-C ended the run before the second arrived");
    }
    assert_eq!(read_trim(&disable), "0", "put back: {err}");
    assert_eq!(
        std::fs::read_dir(&run).unwrap().count(),
        0,
        "no journal left"
    );
    if j.exists() {
        read_json(&j); // complete, or not there at all
    }
}

/// Settings no probe can honour are refused with one sentence.
#[test]
fn degenerate_durations_and_intervals_are_refused() {
    let cases: [(&[&str], &str); 3] = [
        (
            &["timer", "--duration", "1ns"],
            "shorter than one --interval",
        ),
        (
            &["timer", "--interval", "1ns"],
            "below what a timer wake-up can deliver",
        ),
        (&["noise", "--duration", "1ns"], "too short to poll"),
    ];
    for (args, says) in cases {
        let out = punctual().args(args).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}: {out:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(says), "{args:?}: {err}");
    }
}

/// `sysinfo` keeps standard output for the facts; its warnings go to
/// standard error, as every verb's do.
#[test]
fn sysinfo_warnings_go_to_standard_error() {
    let out = punctual().arg("sysinfo").output().unwrap();
    assert!(out.status.success());
    let (so, se) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(so.contains("clocksource"), "{so}");
    assert!(!so.contains("warnings:"), "{so}");
    assert!(!so.contains("  [warn]") && !so.contains("  [info]"), "{so}");
    if se.contains("warnings:") {
        assert!(se.contains("  ["), "{se}");
    } else {
        eprintln!("this machine gave no warning; only standard output was checked");
    }
}

/// The records `validate --records` keeps (each load's timer and noise
/// record, from which `forecast` reruns it) state the C-states its phases
/// ran under, the same hold its `--json` reports, so a forecast rerun from
/// one of them knows what the consumer met.
#[test]
fn validate_records_state_the_c_states_they_were_measured_under() {
    if !is_root() {
        eprintln!("skipped: validate needs SCHED_FIFO (root)");
        return;
    }
    let _live = live();
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    let recs = dir.path().join("recs");
    std::fs::create_dir(&recs).unwrap();
    let v = dir.path().join("v.json");
    let out = punctual()
        .args([
            "validate",
            "--cpu",
            "0",
            "--duration",
            "1s",
            "--rounds",
            "1",
        ])
        .args(["--load", "none", "--dma-latency", "0", "--records"])
        .arg(&recs)
        .arg("--json")
        .arg(&v)
        .env("PUNCTUAL_RUN_DIR", &run)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let said = read_json(&v)["c_states"].clone();
    assert!(
        said.get("dma_latency_us").is_some(),
        "validate's --json says which C-state bound it asked for: {said}"
    );
    for name in ["timer-none.json", "noise-none.json"] {
        let rec = read_json(&recs.join(name));
        assert_eq!(rec["config"]["c_states"], said, "{name}");
    }
}
