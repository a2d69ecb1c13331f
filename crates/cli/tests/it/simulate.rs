//! `punctual simulate` end to end: record, trace, sweep table, errors.

use std::path::PathBuf;

use assert_cmd::Command;
use predicates::prelude::*;

fn scenario(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../scenarios")
        .join(name)
}

fn punctual() -> Command {
    Command::cargo_bin("punctual").unwrap()
}

#[test]
fn writes_a_simulated_record_and_a_trace() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let trace = dir.path().join("t.json");
    punctual()
        .args(["simulate"])
        .arg(scenario("nt-mmtimer-fixed.toml"))
        .args(["--duration", "2s", "--json"])
        .arg(&json)
        .arg("--trace")
        .arg(&trace)
        .assert()
        .success()
        .stdout(predicate::str::contains("callback"));
    let r = punctual_record::Record::read(&json).unwrap();
    assert_eq!(r.source, punctual_record::Source::Simulated);
    assert_eq!(r.kind, "simulate");
    assert_eq!(
        r.config["seed"],
        serde_json::json!(punctual_sim::DEFAULT_SEED)
    );
    let s = r
        .series_named("callback.interval")
        .expect("interval series");
    assert!(s.count > 1900, "{}", s.count);
    let t: serde_json::Value = serde_json::from_slice(&std::fs::read(&trace).unwrap()).unwrap();
    let ev = t["traceEvents"].as_array().unwrap();
    assert!(ev.iter().any(|e| e["ph"] == "X" && e["name"] == "callback"));
}

/// The summary gives the run's CPU time (what bench/simso sets beside
/// SimSo's `run_model()`) and, beside it, the time with building the
/// machine, which can only be as long or longer.
#[test]
fn the_summary_gives_the_run_and_the_run_with_building_the_machine() {
    let out = punctual()
        .args(["simulate"])
        .arg(scenario("nt-mmtimer-fixed.toml"))
        .args(["--duration", "1s"])
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let text = String::from_utf8(out).unwrap();
    let line = text
        .lines()
        .find(|l| l.contains(" s of wall time, "))
        .unwrap_or_else(|| panic!("no cost line in:\n{text}"));
    let secs = |after: &str, before: &str| -> f64 {
        let rest = &line[line.find(after).unwrap() + after.len()..];
        rest[..rest.find(before).unwrap()].trim().parse().unwrap()
    };
    let run = secs("s of wall time, ", " s of CPU, ");
    let with_building = secs(" s of CPU, ", " s with building the machine");
    assert!(run > 0.0, "{line}");
    assert!(with_building >= run, "{line}");
}

#[test]
fn same_seed_same_record_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let mut out = Vec::new();
    for i in 0..2 {
        let p = dir.path().join(format!("r{i}.json"));
        punctual()
            .args(["simulate"])
            .arg(scenario("softmodem-mttf.toml"))
            .args(["--duration", "5s", "--seed", "99", "--json"])
            .arg(&p)
            .assert()
            .success();
        out.push(std::fs::read(&p).unwrap());
    }
    assert!(out[0] == out[1], "two runs with seed 99 differ");
}

#[test]
fn sweep_writes_one_table() {
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("t.csv");
    punctual()
        .args(["simulate"])
        .arg(scenario("vmbus-buffers.toml"))
        .args([
            "--duration",
            "1s",
            "--sweep",
            "stream.vmbus.rate=60000..70000/5000",
            "--columns",
            "vmbus.lost",
            "--table",
        ])
        .arg(&csv)
        .assert()
        .success();
    let text = std::fs::read_to_string(&csv).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], "stream.vmbus.rate,vmbus.lost");
    assert_eq!(lines.len(), 4, "{text}");
    assert!(lines[1].starts_with("60000,0"), "{text}");
}

#[test]
fn scenario_errors_name_file_and_line_and_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.toml");
    std::fs::write(
        &bad,
        "[sim]\nduration = \"1s\"\n\n[[task]]\nname = \"a\"\nkind = \"periodic\"\nperiod = \"-1ms\"\n",
    )
    .unwrap();
    punctual()
        .arg("simulate")
        .arg(&bad)
        .assert()
        .code(2)
        .stderr(predicate::str::contains("bad.toml:7:"))
        .stderr(predicate::str::contains("-1ms"));
    std::fs::write(
        &bad,
        "[[lock]]\nname = \"l\"\nprotocol = \"none\"\n[[task]]\nname = \"a\"\nkind = \"periodic\"\npriority = 3\nperiod = \"1ms\"\ncritical = { lock = \"l\" }\n",
    )
    .unwrap();
    punctual()
        .arg("simulate")
        .arg(&bad)
        .assert()
        .code(2)
        .stderr(predicate::str::contains("bad.toml:9:"))
        .stderr(predicate::str::contains("never released"));
    std::fs::write(
        &bad,
        "[[task]]\nname = \"a\"\nkind = \"background\"\nreserve = { amount = \"18ms\", period = \"20ms\" }\n",
    )
    .unwrap();
    punctual()
        .arg("simulate")
        .arg(&bad)
        .assert()
        .code(2)
        .stderr(predicate::str::contains("bad.toml:2:"))
        .stderr(predicate::str::contains("admission"));
    punctual()
        .arg("simulate")
        .arg(dir.path().join("missing.toml"))
        .assert()
        .code(2);
    punctual()
        .arg("simulate")
        .arg(scenario("vmbus-buffers.toml"))
        .args(["--set", "stream.nope.rate=1"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("nope"));
    punctual()
        .arg("simulate")
        .arg(scenario("vmbus-buffers.toml"))
        .args(["--sweep", "stream.vmbus.rate=3..1/1"])
        .assert()
        .code(2);
}

#[test]
fn plan_mode_answers_constraints_in_the_record_and_the_table() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    punctual()
        .args(["simulate"])
        .arg(scenario("rialto-plan.toml"))
        .args(["--duration", "400ms", "--json"])
        .arg(&json)
        .assert()
        .success()
        .stdout(predicate::str::contains("9ms-in-30-40").and(predicate::str::contains("denied")))
        .stdout(predicate::str::contains("granted, done at"));
    let r = punctual_record::Record::read(&json).unwrap();
    let c = &r.extra["sim"]["constraints"];
    assert_eq!(c["5ms-in-30-40"]["granted"], serde_json::json!(true));
    assert_eq!(c["9ms-in-30-40"]["granted"], serde_json::json!(false));
}

#[test]
fn an_unknown_scheduler_or_a_constraint_outside_plan_mode_is_a_located_usage_error() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.toml");
    std::fs::write(
        &bad,
        "[sim]\nscheduler = \"lottery\"\n\n[[task]]\nname = \"a\"\nkind = \"background\"\n",
    )
    .unwrap();
    punctual()
        .args(["simulate"])
        .arg(&bad)
        .assert()
        .code(2)
        .stderr(predicate::str::contains("bad.toml:2:").and(predicate::str::contains("lottery")));
    std::fs::write(
        &bad,
        "[[task]]\nname = \"a\"\nkind = \"background\"\n\n[[constraint]]\nname = \"c\"\nstart = \"1ms\"\ndeadline = \"2ms\"\nestimate = \"1ms\"\n",
    )
    .unwrap();
    punctual()
        .args(["simulate"])
        .arg(&bad)
        .assert()
        .code(2)
        .stderr(predicate::str::contains("bad.toml:6:").and(predicate::str::contains("plan")));
}

/// What `simulate` printed, as `report --format text` prints it from the
/// saved record: standard output, then the warnings from standard error.
/// Only the run's wall and CPU time are the verb's alone (a simulated
/// record is the same bytes on every run), so their clause is cut from
/// the events line.
fn printed_without_wall_time(stdout: &str, stderr: &str) -> String {
    let mut out = String::new();
    for l in stdout.lines() {
        match l.split_once(" events in ") {
            Some((n, rest))
                if rest.contains(" s of wall time, ") && rest.contains(" s of CPU, ") =>
            {
                out.push_str(n);
                out.push_str(" events");
            }
            _ => out.push_str(l),
        }
        out.push('\n');
    }
    for l in stderr.lines().filter(|l| l.starts_with("warning: ")) {
        out.push_str(l);
        out.push('\n');
    }
    out
}

#[test]
fn report_text_of_a_simulate_record_prints_what_simulate_printed() {
    let dir = tempfile::tempdir().unwrap();
    let mut runs: Vec<(String, Vec<String>)> = Vec::new();
    let mut names: Vec<PathBuf> = std::fs::read_dir(scenario(""))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .collect();
    names.sort();
    assert!(names.len() >= 10, "the scenarios directory: {names:?}");
    for p in &names {
        runs.push((
            p.display().to_string(),
            vec!["--duration".into(), "2s".into()],
        ));
    }
    // Late jobs aborted (the aborted line), partitioned placement (the
    // placed line) and an overridden field: the scenario as run, not as
    // written.
    for (scn, extra) in [
        ("softmodem-mttf.toml", "sim.on_miss=abort"),
        ("multiprocessor-edf.toml", "sim.multiprocessor=partitioned"),
        ("rez-network.toml", "task.t2.reserve.kind=rez-c"),
    ] {
        runs.push((
            scenario(scn).display().to_string(),
            vec![
                "--duration".into(),
                "1s".into(),
                "--set".into(),
                extra.into(),
            ],
        ));
    }
    let mut checked = 0;
    for (i, (scn, extra)) in runs.iter().enumerate() {
        let json = dir.path().join(format!("r{i}.json"));
        let sim = punctual()
            .arg("simulate")
            .arg(scn)
            .args(extra)
            .arg("--json")
            .arg(&json)
            .output()
            .unwrap();
        assert!(
            sim.status.success(),
            "{scn} {extra:?}: {}",
            String::from_utf8_lossy(&sim.stderr)
        );
        let want = printed_without_wall_time(
            &String::from_utf8(sim.stdout).unwrap(),
            &String::from_utf8(sim.stderr).unwrap(),
        );
        assert!(want.contains(" events\n"), "{scn}: {want}");
        let rep = punctual()
            .arg("report")
            .arg(&json)
            .args(["--format", "text"])
            .output()
            .unwrap();
        assert!(
            rep.status.success(),
            "{scn}: {}",
            String::from_utf8_lossy(&rep.stderr)
        );
        let got = String::from_utf8(rep.stdout).unwrap();
        assert_eq!(got, want, "{scn} {extra:?}");
        checked += 1;
    }
    assert_eq!(checked, runs.len());
}

/// A bad value given with `--set` is named by the `--set`, not by a line
/// and column of the scenario file, which does not hold it: exit 2.
#[test]
fn a_bad_set_value_names_the_set() {
    for (set, says) in [
        ("sim.cpus=0", "--set sim.cpus=0: must be 1 to 256"),
        ("sim.cpus=two", "--set sim.cpus=two: "),
    ] {
        let out = punctual()
            .arg("simulate")
            .arg(scenario("rez-network.toml"))
            .args(["--set", set])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{set}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(says), "{set}: {err}");
        let after_file = err.split("rez-network.toml:").nth(1).unwrap_or("");
        assert!(
            !after_file.starts_with(|c: char| c.is_ascii_digit()),
            "{set}: no line and column of the file: {err}"
        );
    }
}

/// Many tasks at one fixed priority, and many time-sharing tasks (no
/// priority): each level's room once doubled per thread added, and 32
/// tasks of one priority (40 time-sharing ones) aborted on a 64 GiB
/// allocation. Every task runs each of its jobs, in the text and the
/// record.
#[test]
fn many_tasks_of_one_priority_and_many_timeshare_tasks_simulate() {
    let dir = tempfile::tempdir().unwrap();
    let scn = dir.path().join("same.toml");
    let mut text = String::from("[sim]\nduration = \"100ms\"\n");
    for i in 0..200 {
        let class = if i % 2 == 0 { "priority = 5\n" } else { "" };
        text.push_str(&format!(
            "\n[[task]]\nname = \"t{i}\"\nkind = \"periodic\"\n{class}period = \"100ms\"\nexec = \"10us\"\n"
        ));
    }
    std::fs::write(&scn, text).unwrap();
    let json = dir.path().join("r.json");
    let out = punctual()
        .arg("simulate")
        .arg(&scn)
        .arg("--json")
        .arg(&json)
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let out = String::from_utf8(out).unwrap();
    let rows = out
        .lines()
        .filter(|l| l.starts_with('t') && l.split_whitespace().nth(1) == Some("1"))
        .count();
    assert_eq!(rows, 200, "{out}");
    let r = punctual_record::Record::read(&json).unwrap();
    let sim = r.sim().unwrap();
    assert_eq!(sim.tasks.len(), 200);
    assert!(sim.tasks.values().all(|t| t.jobs == 1), "{:?}", sim.tasks);
}

/// A scenario whose whole record would pass 5 MB (20,000 tasks, about
/// 3.6 KB each) is folded: the run says so on standard error, the record
/// is under the bound, and every reader takes it.
#[test]
fn a_record_past_its_bound_is_folded_with_a_warning_and_every_reader_takes_it() {
    let dir = tempfile::tempdir().unwrap();
    let scn = dir.path().join("many.toml");
    let mut text = String::from("[sim]\nduration = \"20ms\"\n");
    for i in 0..20_000 {
        text.push_str(&format!(
            "[[task]]\nname = \"t{i}\"\nkind = \"periodic\"\npriority = {}\nperiod = \"{}ms\"\nexec = \"10us\"\n",
            1 + i % 31,
            2 + i % 50
        ));
    }
    std::fs::write(&scn, text).unwrap();
    let json = dir.path().join("r.json");
    punctual()
        .arg("simulate")
        .arg(&scn)
        .arg("--json")
        .arg(&json)
        .assert()
        .success()
        .stdout(predicate::str::contains("all (20000 tasks)"))
        .stderr(predicate::str::contains(
            "the 100 that fared worst keep their series",
        ))
        .stderr(predicate::str::contains("only in the totals"));
    let len = std::fs::metadata(&json).unwrap().len();
    assert!(len <= 5_000_000, "{len}");
    let r = punctual_record::Record::read(&json).unwrap();
    assert_eq!(r.sim().unwrap().folded.unwrap().tasks, 20_000);
    // The saved record prints what the run printed.
    punctual()
        .args(["report", "--format", "text"])
        .arg(&json)
        .assert()
        .success()
        .stdout(predicate::str::contains("all (20000 tasks)"));
    every_reader_takes(dir.path(), &json, "all.latency");
}

/// 20,000 streams (about 430 bytes each whole: 6.9 MB) and 40 noise sources
/// on one CPU: the record keeps the 1000 streams that lost most and 16
/// sources, says so once, and every reader takes it.
#[test]
fn streams_and_sources_past_the_bound_fold_and_every_reader_takes_them() {
    let dir = tempfile::tempdir().unwrap();
    let scn = dir.path().join("streams.toml");
    let mut text = String::from(
        "[sim]\nduration = \"50ms\"\n[[task]]\nname = \"d\"\nkind = \"sleeper\"\npriority = 5\nsleep = \"5ms\"\nexec = \"10us\"\n",
    );
    for i in 0..20_000 {
        text.push_str(&format!(
            "[[stream]]\nname = \"s{i}\"\nrate = {}.0\ncapacity = {}\ndrained_by = \"d\"\nflow_control = false\n",
            400 + i % 300,
            if i % 7 == 0 { 1 } else { 64 }
        ));
    }
    for i in 0..40 {
        text.push_str(&format!(
            "[[noise]]\nname = \"n{i}\"\nkind = \"periodic\"\nperiod = \"{}us\"\nduration = \"1us\"\nlevel = \"dpc\"\n",
            500 + i
        ));
    }
    std::fs::write(&scn, text).unwrap();
    let json = dir.path().join("r.json");
    punctual()
        .arg("simulate")
        .arg(&scn)
        .arg("--json")
        .arg(&json)
        .assert()
        .success()
        .stderr(predicate::str::contains("streams 1000 of 20000"))
        .stderr(predicate::str::contains("sources 16 of 40"));
    let len = std::fs::metadata(&json).unwrap().len();
    assert!(len <= 5_000_000, "{len}");
    let r = punctual_record::Record::read(&json).unwrap();
    let f = r.sim().unwrap().folded.unwrap();
    assert_eq!(f.parts["streams"].total, 20_000);
    assert_eq!(r.sim().unwrap().streams.len(), 1000);
    punctual()
        .args(["report", "--format", "text"])
        .arg(&json)
        .assert()
        .success()
        .stdout(predicate::str::contains(
            "(record folded: 1000 of 20000 streams shown",
        ));
    every_reader_takes(dir.path(), &json, "d.latency");
}

/// `report` (HTML naming `series`, Prometheus, JUnit, JSON, `--merge`),
/// `compare` and `forecast` all take the record at `json`.
fn every_reader_takes(dir: &std::path::Path, json: &std::path::Path, series: &str) {
    let html = dir.join("r.html");
    punctual()
        .arg("report")
        .arg(json)
        .arg("--html")
        .arg(&html)
        .assert()
        .success();
    assert!(std::fs::read_to_string(&html).unwrap().contains(series));
    punctual()
        .arg("report")
        .arg(json)
        .args(["--format", "prometheus"])
        .assert()
        .success()
        .stdout(predicate::str::contains(series));
    for format in ["junit", "json"] {
        punctual()
            .arg("report")
            .arg(json)
            .args(["--format", format])
            .assert()
            .success();
    }
    let merged = dir.join("m.json");
    punctual()
        .arg("report")
        .arg(json)
        .arg(json)
        .arg("--merge")
        .arg("-o")
        .arg(&merged)
        .assert()
        .success();
    punctual()
        .arg("compare")
        .arg(json)
        .arg(json)
        .assert()
        .success();
    punctual().arg("forecast").arg(json).assert().success();
}
