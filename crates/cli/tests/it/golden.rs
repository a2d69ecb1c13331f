//! Golden outputs: each verb's standard output, standard error and exit
//! status, and every file it writes, on inputs that do not depend on this
//! machine (the report fixture records, replayed feeds, scenarios).
//!
//! Moving code between crates must not change a byte a user sees; these
//! files are what proves it. A missing golden file fails (it is never
//! created silently); `PUNCTUAL_BLESS=1 cargo test -p punctual --test it golden::`
//! rewrites them after a deliberate change, which then shows in the diff.
//!
//! What does depend on the machine is taken out before comparing: the
//! platform-derived warning lines of a live-platform record (`[warn]`,
//! `[info]`), wall-clock rates, temporary paths, and a record's `platform`,
//! `warnings` and start time.

use std::path::{Path, PathBuf};
use std::process::Command;

use assert_cmd::cargo::CommandCargoExt;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn golden_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden")
}

/// Lines that describe the machine the test runs on, not the input.
fn machine_line(l: &str) -> bool {
    let t = l.trim_start();
    t.starts_with("[warn]")
        || t.starts_with("[info]")
        || l == "warnings:"
        || l.contains("of wall time")
}

fn normalize_text(s: &str, out: &Path) -> String {
    let out = out.display().to_string();
    let mut r = String::new();
    for l in s.lines() {
        if machine_line(l) {
            continue;
        }
        r.push_str(&l.replace(&out, "OUT"));
        r.push('\n');
    }
    r
}

/// A record written by a run on this machine carries this machine's facts;
/// those are compared by the platform tests, not here.
fn normalize_json(text: &str, out: &Path) -> String {
    let text = text.replace(&out.display().to_string(), "OUT");
    let Ok(mut v) = serde_json::from_str::<serde_json::Value>(&text) else {
        return text;
    };
    fn strip(v: &mut serde_json::Value) {
        if let Some(o) = v.as_object_mut() {
            if o.get("source").and_then(|s| s.as_str()) == Some("measured")
                && o.contains_key("platform")
                && o.get("started_at").and_then(|s| s.as_str()) != Some("2026-11-22T05:00:00Z")
            {
                for k in ["platform", "warnings", "started_at", "started_mono_ns"] {
                    o.remove(k);
                }
            }
        }
        if let Some(a) = v.as_array_mut() {
            a.iter_mut().for_each(strip);
        }
    }
    strip(&mut v);
    serde_json::to_string_pretty(&v).unwrap() + "\n"
}

struct Case {
    name: &'static str,
    args: Vec<String>,
    /// Files the run writes, by the name they are written to in `OUT`.
    outputs: Vec<&'static str>,
}

fn case(name: &'static str, args: &[&str], outputs: &[&'static str]) -> Case {
    Case {
        name,
        args: args.iter().map(|s| s.to_string()).collect(),
        outputs: outputs.to_vec(),
    }
}

const IDLE: &str = "crates/report/tests/fixtures/timer-idle.json";
const LOAD: &str = "crates/report/tests/fixtures/timer-load.json";
const RSIM: &str = "crates/report/tests/fixtures/reserve-sim.json";
/// Records of live `reserve` runs: the test app under a feedback
/// reservation, and a command under a plain one.
const RFB: &str = "crates/report/tests/fixtures/reserve-feedback.json";
const RCMD: &str = "crates/report/tests/fixtures/reserve-command.json";
/// `check --cause` and `timer --cause` records of CPU 1 with a known
/// problem (bench/trim-record.py made them small).
const FIFO99: &str = "crates/cli/tests/fixtures/advise-check-fifo99.json";
const DISK: &str = "crates/cli/tests/fixtures/advise-timer-disk.json";
/// The idle timer fixture with its causes taken out.
const NOCAUSE: &str = "crates/cli/tests/fixtures/advise-timer-nocause.json";

fn cases() -> Vec<Case> {
    let mut v = vec![
        case("forecast-idle", &["forecast", IDLE], &[]),
        case("forecast-load", &["forecast", LOAD], &[]),
        case("forecast-reserve-sim", &["forecast", RSIM], &[]),
        case(
            "forecast-idle-sweep",
            &[
                "forecast",
                IDLE,
                "--buffers",
                "3",
                "--buffer-len",
                "2ms",
                "--compute",
                "25%",
                "--sweep",
            ],
            &[],
        ),
        case(
            "forecast-load-target",
            &[
                "forecast",
                LOAD,
                "--buffers",
                "2",
                "--buffer-len",
                "4ms",
                "--target",
                "1h",
                "--json",
                "OUT/forecast.json",
            ],
            &["forecast.json"],
        ),
        case(
            "forecast-load-renewal",
            &[
                "forecast",
                LOAD,
                "--series",
                "cpu0.latency",
                "--arrivals",
                "renewal",
                "--no-verdicts",
            ],
            &[],
        ),
        case(
            "forecast-load-rate",
            &["forecast", LOAD, "--rate", "260000/s", "--no-verdicts"],
            &[],
        ),
        case(
            "forecast-load-missrate",
            &["forecast", LOAD, "--miss-rate", "1/h", "--no-verdicts"],
            &[],
        ),
        case(
            "forecast-bad-series",
            &["forecast", LOAD, "--series", "nope"],
            &[],
        ),
        case(
            "report-merge",
            &["report", "--merge", IDLE, LOAD, "-o", "OUT/merged.json"],
            &["merged.json"],
        ),
        case(
            "report-html",
            &["report", LOAD, "--html", "OUT/load.html"],
            &["load.html"],
        ),
        case(
            "timer-replay",
            &[
                "timer",
                "--cpus",
                "0",
                "--threshold",
                "100us",
                "--replay",
                "crates/cli/tests/golden/feed.txt",
                "--json",
                "OUT/timer.json",
                "--hist",
                "OUT/timer.hist",
            ],
            &["timer.json", "timer.hist"],
        ),
    ];
    for (fx, tag) in [(LOAD, "load"), (RSIM, "rsim")] {
        for fmt in ["json", "hist", "hlog", "prometheus", "perfetto", "text"] {
            let name: &'static str = Box::leak(format!("report-{tag}-{fmt}").into_boxed_str());
            if !(fmt == "text" && tag == "rsim") {
                v.push(case(name, &["report", fx, "--format", fmt], &[]));
            }
        }
        for t in ["buckets", "periods", "stolen", "spikes"] {
            let name: &'static str = Box::leak(format!("report-{tag}-csv-{t}").into_boxed_str());
            v.push(case(
                name,
                &["report", fx, "--format", "csv", "--csv-table", t],
                &[],
            ));
        }
    }
    // Its record's spike times carry the real clock's offset between the
    // run's zero and the loop's start, so only what it prints is compared.
    v.push(case(
        "noise-replay",
        &[
            "noise",
            "--cpus",
            "0",
            "--duration",
            "100ms",
            "--replay",
            "crates/cli/tests/golden/gaps.txt",
        ],
        &[],
    ));
    v.push(case(
        "noise-replay-bad-line",
        &[
            "noise",
            "--cpus",
            "0",
            "--replay",
            "crates/cli/tests/golden/feed.txt",
        ],
        &[],
    ));
    v.push(case(
        "advise-check-fifo99",
        &["advise", FIFO99, "--top", "5"],
        &[],
    ));
    v.push(case(
        "advise-timer-disk-profile",
        &["advise", DISK, "--profile", "ADSL 2 ms × 2", "--top", "3"],
        &[],
    ));
    v.push(case(
        "advise-no-cause",
        &["advise", NOCAUSE, "--json", "OUT/never.json"],
        &[],
    ));
    v.push(case(
        "report-idle-text",
        &["report", IDLE, "--format", "text"],
        &[],
    ));
    v.push(case(
        "report-reserve-feedback-text",
        &["report", RFB, "--format", "text"],
        &[],
    ));
    v.push(case(
        "report-reserve-command-text",
        &["report", RCMD, "--format", "text"],
        &[],
    ));
    v.push(case(
        "report-rsim-text",
        &["report", RSIM, "--format", "text"],
        &[],
    ));
    for s in [
        "nt-long-dpcs",
        "nt-mmtimer-rounding",
        "rez-network",
        "rialto-plan",
        "softmodem-mttf",
        "mediaplayer-inversion",
        "disk-pio-dma",
    ] {
        let name: &'static str = Box::leak(format!("simulate-{s}").into_boxed_str());
        let scn: &'static str = Box::leak(format!("scenarios/{s}.toml").into_boxed_str());
        v.push(case(
            name,
            &[
                "simulate",
                scn,
                "--duration",
                "2s",
                "--json",
                "OUT/sim.json",
            ],
            &["sim.json"],
        ));
    }
    v.push(case(
        "simulate-sweep",
        &[
            "simulate",
            "scenarios/rez-network.toml",
            "--duration",
            "1s",
            "--sweep",
            "stream.tcp.mbit_s=30..90/30",
        ],
        &[],
    ));
    v
}

fn run(c: &Case, out: &Path) -> Vec<(String, String)> {
    let args: Vec<String> = c
        .args
        .iter()
        .map(|a| a.replace("OUT/", &format!("{}/", out.display())))
        .collect();
    let o = Command::cargo_bin("punctual")
        .unwrap()
        .current_dir(root())
        .args(&args)
        .env_remove("NO_COLOR")
        // A private, empty journal directory: a dead run's journal on this
        // machine must not add a line to the outputs.
        .env("PUNCTUAL_RUN_DIR", out.join("no-journals"))
        .output()
        .unwrap();
    let mut text = normalize_text(&String::from_utf8_lossy(&o.stdout), out);
    text.push_str("--- stderr\n");
    text.push_str(&normalize_text(&String::from_utf8_lossy(&o.stderr), out));
    text.push_str(&format!("--- exit {}\n", o.status.code().unwrap_or(-1)));
    let mut files = vec![(format!("{}.out", c.name), text)];
    for f in &c.outputs {
        let p = out.join(f);
        let body = std::fs::read_to_string(&p).unwrap_or_else(|_| "(not written)\n".into());
        let body = if f.ends_with(".json") {
            normalize_json(&body, out)
        } else {
            body.replace(&out.display().to_string(), "OUT")
        };
        files.push((format!("{}.{f}", c.name), body));
    }
    files
}

#[test]
fn verbs_print_what_the_golden_files_hold() {
    let bless = std::env::var_os("PUNCTUAL_BLESS").is_some();
    let dir = golden_dir();
    let mut failures = Vec::new();
    for c in cases() {
        let tmp = tempfile::tempdir().unwrap();
        for (name, got) in run(&c, tmp.path()) {
            let p = dir.join(&name);
            if bless {
                std::fs::write(&p, &got).unwrap();
                continue;
            }
            match std::fs::read_to_string(&p) {
                Err(_) => failures.push(format!(
                    "{} is missing; run with PUNCTUAL_BLESS=1 to create it",
                    p.display()
                )),
                Ok(want) if want != got => {
                    let line = want
                        .lines()
                        .zip(got.lines())
                        .position(|(a, b)| a != b)
                        .unwrap_or(want.lines().count().min(got.lines().count()));
                    failures.push(format!(
                        "{} differs at line {}:\n  want: {:?}\n  got:  {:?}",
                        p.display(),
                        line + 1,
                        want.lines().nth(line).unwrap_or("(end)"),
                        got.lines().nth(line).unwrap_or("(end)")
                    ));
                }
                Ok(_) => {}
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} golden files differ (PUNCTUAL_BLESS=1 after a deliberate change):\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// Standard output of `punctual ARGS` run from the repository root.
fn stdout_of(args: &[&str]) -> String {
    outputs_of(args).0
}

fn outputs_of(args: &[&str]) -> (String, String) {
    let o = Command::cargo_bin("punctual")
        .unwrap()
        .current_dir(root())
        .args(args)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    (
        String::from_utf8(o.stdout).unwrap(),
        String::from_utf8(o.stderr).unwrap(),
    )
}

/// A saved record read back with `report --format text` prints exactly
/// what the verb printed when it made it.
#[test]
fn report_text_prints_what_the_verb_printed() {
    let tmp = tempfile::tempdir().unwrap();
    let runs: [(&str, Vec<&str>); 3] = [
        (
            "timer",
            vec![
                "timer",
                "--cpus",
                "0",
                "--threshold",
                "100us",
                "--replay",
                "crates/cli/tests/golden/feed.txt",
            ],
        ),
        (
            "noise",
            vec![
                "noise",
                "--cpus",
                "0",
                "--duration",
                "100ms",
                "--replay",
                "crates/cli/tests/golden/gaps.txt",
            ],
        ),
        ("sysinfo", vec!["sysinfo"]),
    ];
    for (name, args) in runs {
        let path = tmp.path().join(format!("{name}.json"));
        let p = path.to_str().unwrap();
        let mut with_json = args.clone();
        with_json.extend(["--json", p]);
        let (mut printed, stderr) = outputs_of(&with_json);
        assert!(!printed.is_empty(), "{name} printed nothing");
        // The warnings block goes to standard error; the report has it last.
        if let Some(at) = stderr.find("warnings:\n") {
            let block: String = stderr[at..]
                .lines()
                .take_while(|l| *l == "warnings:" || l.starts_with("  ["))
                .map(|l| format!("{l}\n"))
                .collect();
            printed.push_str(&block);
        }
        let read_back = stdout_of(&["report", p, "--format", "text"]);
        assert_eq!(printed, read_back, "{name}: report --format text differs");
    }
}
