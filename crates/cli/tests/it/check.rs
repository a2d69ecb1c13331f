//! CLI integration tests of `check --until-decided` and of the stability
//! of `check`'s verdicts. Replayed feeds (hidden `--replay-timer` and
//! `--replay-noise`) run without root; the live parts skip with the
//! reason when not root.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use assert_cmd::prelude::*;

use crate::common::{is_root, live, read_json};

fn punctual() -> Command {
    Command::cargo_bin("punctual").unwrap()
}

/// A wake-up latency feed of `n` values from one machine: 20 µs, with a
/// late wake-up of 1–4 ms at random about once in `every`, drawn with a
/// small LCG from `seed` (different seeds: different samples of the same
/// machine).
fn feed(dir: &Path, name: &str, n: usize, every: u64, seed: u64) -> PathBuf {
    let mut x = seed.wrapping_mul(6364136223846793005).wrapping_add(1);
    let mut next = || {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        x >> 33
    };
    let mut text = String::new();
    for _ in 0..n {
        let v = if next() % every == 0 {
            1_000_000 + next() % 3_000_000
        } else {
            20_000 + next() % 5_000
        };
        text.push_str(&format!("{v}\n"));
    }
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

/// Stolen intervals for the noise half: a few short ones.
fn gaps(dir: &Path) -> PathBuf {
    let p = dir.join("gaps.txt");
    std::fs::write(
        &p,
        "25000000 3000\n40000000 12000\n90000000 1500\n150000000 30000\n",
    )
    .unwrap();
    p
}

/// Stolen intervals enough to estimate the stall process well: 5 µs
/// every 5 ms for 4 s.
fn many_gaps(dir: &Path) -> PathBuf {
    let p = dir.join("many-gaps.txt");
    let text: String = (0..800u64)
        .map(|i| format!("{} 5000\n", 25_000_000 + i * 5_000_000))
        .collect();
    std::fs::write(&p, text).unwrap();
    p
}

fn replayed_check(dir: &Path, timer: &Path, extra: &[&str], json: &Path) -> std::process::Output {
    replayed_check_with(timer, &gaps(dir), extra, json)
}

fn replayed_check_with(
    timer: &Path,
    gaps: &Path,
    extra: &[&str],
    json: &Path,
) -> std::process::Output {
    punctual()
        .args(["check", "--cpus", "0", "--replay-timer"])
        .arg(timer)
        .arg("--replay-noise")
        .arg(gaps)
        .args(extra)
        .arg("--json")
        .arg(json)
        .output()
        .unwrap()
}

/// A profile that the first round decides stops the loop after one
/// round and says why.
#[test]
fn until_decided_stops_once_every_verdict_is_decided() {
    let dir = tempfile::tempdir().unwrap();
    let f = feed(dir.path(), "feed.txt", 400, 20, 1);
    let j = dir.path().join("c.json");
    let out = replayed_check(
        dir.path(),
        &f,
        &[
            "--duration",
            "800ms",
            "--until-decided",
            "--max",
            "10s",
            "--profile",
            "1 kHz control loop",
        ],
        &j,
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("round 1, ") && err.contains("0 of 1 profiles still inconclusive"),
        "{err}"
    );
    assert!(err.contains("every verdict is decided"), "{err}");
    assert!(!err.contains("round 2"), "{err}");
    let v = read_json(&j);
    assert_eq!(v["verdicts"].as_array().unwrap().len(), 1);
    assert_eq!(v["verdicts"][0]["state"], "misses", "{}", v["verdicts"]);
}

/// Profiles the data cannot decide keep it measuring round after round,
/// each line saying how many are open and how long deciding would take,
/// until --max; the record holds every round's wake-ups.
#[test]
fn until_decided_measures_in_rounds_up_to_max() {
    let dir = tempfile::tempdir().unwrap();
    let f = feed(dir.path(), "feed.txt", 400, 200, 2);
    let j = dir.path().join("c.json");
    let out = replayed_check(
        dir.path(),
        &f,
        &[
            "--duration",
            "800ms",
            "--until-decided",
            "--max",
            "3s",
            "--profile",
            "VoIP",
            "--profile",
            "RT audio",
        ],
        &j,
    );
    let err = String::from_utf8_lossy(&out.stderr);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{err}");
    let lines: Vec<&str> = err
        .lines()
        .filter(|l| l.starts_with("punctual check: round"))
        .collect();
    // 800 ms rounds, at most 3 s in all: three rounds.
    assert_eq!(lines.len(), 3, "{err}");
    for l in &lines {
        assert!(l.contains("of 5 profiles still inconclusive"), "{l}");
        assert!(l.contains("more to decide them all"), "{l}");
    }
    assert!(lines[2].contains("--max 3s reached"), "{err}");
    assert!(text.contains("== all 3 rounds together"), "{text}");
    let v = read_json(&j);
    assert_eq!(v["extra"]["rounds"].as_array().unwrap().len(), 3);
    let lat = v["series"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "cpu0.latency")
        .unwrap();
    // The feed's 400 wake-ups each round (the timer half stops where the
    // feed ends), some of them late past whole periods (missed).
    assert_eq!(
        lat["count"].as_u64().unwrap() + lat["missed"].as_u64().unwrap(),
        3 * 400,
        "{lat}"
    );
    // The gaps of every round's noise half are charged to the computes.
    assert!(text.contains("busy loop's stolen time"), "{text}");
}

/// Ctrl-C during the rounds keeps every wake-up measured so far: the
/// record is written, marked interrupted.
#[test]
fn until_decided_keeps_what_was_measured_on_ctrl_c() {
    let dir = tempfile::tempdir().unwrap();
    let f = feed(dir.path(), "feed.txt", 400, 200, 3);
    let j = dir.path().join("c.json");
    let child = punctual()
        .args(["check", "--cpus", "0", "--replay-timer"])
        .arg(&f)
        .arg("--replay-noise")
        .arg(gaps(dir.path()))
        .args(["--duration", "2s", "--until-decided", "--max", "10m"])
        .arg("--json")
        .arg(&j)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(3000));
    let st = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(st.success());
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("interrupted; keeping what was measured"),
        "{err}"
    );
    let v = read_json(&j);
    assert_eq!(v["interrupted"], true);
    let rounds = v["extra"]["rounds"].as_array().map_or(1, |r| r.len());
    assert!(rounds >= 2, "{rounds} rounds in 3 s of 2 s rounds");
    assert!(!v["verdicts"].as_array().unwrap().is_empty());
}

/// Bad input: one sentence, exit 2.
#[test]
fn until_decided_bad_input_is_named() {
    let cases: &[(&[&str], &str)] = &[
        (&["check", "--max", "10s"], "--until-decided"),
        (
            &[
                "check",
                "--until-decided",
                "--duration",
                "20s",
                "--max",
                "10s",
            ],
            "--max 10s is shorter than one round",
        ),
        (&["check", "--profile", "no such workload"], "--profile"),
    ];
    for (args, needle) in cases {
        let out = punctual().args(*args).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(needle), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
}

/// The live loop: short rounds of the real probes until the NIC ring
/// profile (decided in seconds on any machine whose wake-ups are
/// slower than 67 ns) is decided.
#[test]
fn until_decided_live() {
    if !is_root() {
        eprintln!("skipped: needs root for SCHED_FIFO probes");
        return;
    }
    let _live = live();
    let dir = tempfile::tempdir().unwrap();
    let j = dir.path().join("c.json");
    let out = punctual()
        .args([
            "check",
            "--cpus",
            "0",
            "--duration",
            "1s",
            "--until-decided",
            "--max",
            "5s",
            "--profile",
            "NIC ring",
            "--json",
        ])
        .arg(&j)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("punctual check: round 1, "), "{err}");
    let v = read_json(&j);
    assert_eq!(v["verdicts"].as_array().unwrap().len(), 1);
}

/// Each profile's decided states over several records of one machine.
fn contradictions(records: &[serde_json::Value]) -> Vec<String> {
    let mut seen: std::collections::BTreeMap<String, (usize, usize)> = Default::default();
    for v in records {
        for x in v["verdicts"].as_array().unwrap() {
            let e = seen
                .entry(x["profile"].as_str().unwrap().to_string())
                .or_default();
            match x["state"].as_str().unwrap() {
                "meets" => e.0 += 1,
                "misses" => e.1 += 1,
                _ => {}
            }
        }
    }
    seen.into_iter()
        .filter(|(_, (m, x))| *m > 0 && *x > 0)
        .map(|(p, (m, x))| format!("{p}: meets in {m}, misses in {x}"))
        .collect()
}

/// Five checks of one unchanging machine (five samples of the same
/// latency process, different seeds) never contradict each other: a
/// profile may be decided in some and open in others, but never meets in
/// one and misses in another. The profiles whose point estimates lie near
/// their targets are the ones this can catch.
#[test]
fn five_replayed_checks_never_contradict() {
    let dir = tempfile::tempdir().unwrap();
    let mut records = Vec::new();
    for seed in 0..5 {
        let f = feed(
            dir.path(),
            &format!("feed{seed}.txt"),
            1500,
            300,
            100 + seed,
        );
        let j = dir.path().join(format!("c{seed}.json"));
        let out = replayed_check(dir.path(), &f, &["--duration", "3s"], &j);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        records.push(read_json(&j));
    }
    let decided: usize = records
        .iter()
        .map(|v| {
            v["verdicts"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|x| x["state"] != "inconclusive")
                .count()
        })
        .sum();
    assert!(decided > 0, "nothing decided: the test would prove nothing");
    let c = contradictions(&records);
    assert!(c.is_empty(), "{c:#?}");
}

/// The same, live: five `check` runs back to back on this machine.
#[test]
fn five_live_checks_never_contradict() {
    if !is_root() {
        eprintln!("skipped: needs root for SCHED_FIFO probes");
        return;
    }
    let _live = live();
    let dir = tempfile::tempdir().unwrap();
    let mut records = Vec::new();
    for i in 0..5 {
        let j = dir.path().join(format!("c{i}.json"));
        let out = punctual()
            .args(["check", "--cpus", "0", "--duration", "2s", "--json"])
            .arg(&j)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        records.push(read_json(&j));
    }
    let c = contradictions(&records);
    assert!(c.is_empty(), "{c:#?}");
}

/// `--baseline`: a run whose late wake-ups come 100 times as often as
/// the baseline's (3 s of wake-ups each) is worse, said in plain words with both intervals; a run of
/// the same feed shows no difference; the comparison is kept in the
/// record.
#[test]
fn baseline_says_whether_this_run_is_worse() {
    let dir = tempfile::tempdir().unwrap();
    let quiet = feed(dir.path(), "quiet.txt", 3000, 1000, 7);
    let noisy = feed(dir.path(), "noisy.txt", 3000, 10, 7);
    let g = many_gaps(dir.path());
    let base = dir.path().join("base.json");
    let out = replayed_check_with(&quiet, &g, &["--duration", "6s"], &base);
    assert!(out.status.success());
    let j = dir.path().join("new.json");
    let out = replayed_check_with(
        &noisy,
        &g,
        &["--duration", "6s", "--baseline", base.to_str().unwrap()],
        &j,
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("== against the baseline"), "{text}");
    assert!(text.contains("WORSE than the baseline for"), "{text}");
    assert!(text.contains("in the baseline"), "{text}");
    let v = read_json(&j);
    assert!(!v["extra"]["baseline"]["worse"]
        .as_array()
        .unwrap()
        .is_empty());
    // The baseline against itself (the same feed again).
    let out = replayed_check_with(
        &quiet,
        &g,
        &["--duration", "6s", "--baseline", base.to_str().unwrap()],
        &dir.path().join("same.json"),
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("no difference shown: for all 26 profiles"),
        "{text}"
    );
}

/// A baseline that is no record, or has no wake-ups: one sentence, exit 2,
/// before anything is measured.
#[test]
fn bad_baseline_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let junk = dir.path().join("junk.json");
    std::fs::write(&junk, "not json").unwrap();
    let noise = dir.path().join("noise.json");
    let out = punctual()
        .args(["noise", "--cpus", "0", "--duration", "200ms", "--replay"])
        .arg(gaps(dir.path()))
        .arg("--json")
        .arg(&noise)
        .output()
        .unwrap();
    assert!(out.status.success());
    for (p, needle) in [
        (dir.path().join("missing.json"), "no such file"),
        (junk, "--baseline"),
        (noise, "no wake-up latency series"),
    ] {
        let out = punctual()
            .args(["check", "--baseline"])
            .arg(&p)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(needle), "{err}");
        assert!(!err.contains("panicked"), "{err}");
    }
}

/// `--max-spikes` bounds each half's spike log, above the default 1000
/// too (advise edits only what the log kept), and the record says so,
/// so `advise --verify` measures again with the same bound.
#[test]
fn max_spikes_bounds_the_spike_log() {
    let dir = tempfile::tempdir().unwrap();
    // More late wake-ups than the default bound keeps.
    let f = feed(dir.path(), "t.txt", 4000, 2, 7);
    let latency_spikes = |j: &Path| {
        let v = read_json(j);
        let n = v["spikes"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|s| s["metric"] == "latency")
            .count();
        (n, v["config"]["timer.max_spikes"].as_u64())
    };
    for (bound, want) in [(None, 1000usize), (Some(7), 7), (Some(1400), 1400)] {
        let j = dir.path().join(format!("c{want}.json"));
        let arg = bound.map(|b: usize| b.to_string());
        let mut extra = vec!["--duration", "8s"];
        if let Some(a) = &arg {
            extra.extend(["--max-spikes", a.as_str()]);
        }
        let out = replayed_check(dir.path(), &f, &extra, &j);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(latency_spikes(&j), (want, Some(want as u64)));
    }
    let j = dir.path().join("c0.json");
    let out = replayed_check(dir.path(), &f, &["--max-spikes", "0"], &j);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--max-spikes 0"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}
