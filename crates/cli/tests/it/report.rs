//! `punctual report` as a person would use it: the HTML opened in a real
//! headless Chromium, exports read back by the tools they are meant for
//! (promtool, the HdrHistogram library, a trace-event JSON reader), merged
//! records checked against their inputs, and bad input refused with
//! status 2.

use std::path::{Path, PathBuf};
use std::process::Command;

use assert_cmd::Command as Cmd;
use base64::Engine;
use punctual_record::Record;

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../report/tests/fixtures")
}

fn fx(name: &str) -> PathBuf {
    fixtures().join(name)
}

fn all_fixtures() -> Vec<PathBuf> {
    vec![
        fx("timer-idle.json"),
        fx("timer-load.json"),
        fx("reserve-sim.json"),
    ]
}

fn punctual() -> Cmd {
    Cmd::cargo_bin("punctual").unwrap()
}

fn html_report(dir: &Path) -> PathBuf {
    let out = dir.join("report.html");
    punctual()
        .arg("report")
        .args(all_fixtures())
        .arg("--html")
        .arg(&out)
        .assert()
        .success();
    out
}

fn chromium() -> Option<PathBuf> {
    for c in ["chromium", "chromium-browser", "google-chrome"] {
        if let Ok(o) = Command::new("which").arg(c).output() {
            if o.status.success() {
                let p = String::from_utf8_lossy(&o.stdout).trim().to_string();
                if !p.is_empty() {
                    return Some(PathBuf::from(p));
                }
            }
        }
    }
    None
}

fn chrome(bin: &Path, profile: &Path, extra: &[&str], url: &str) -> std::process::Output {
    let mut c = Command::new("timeout");
    c.arg("90").arg(bin).args([
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--hide-scrollbars",
    ]);
    c.arg(format!("--user-data-dir={}", profile.display()));
    c.args(extra).arg(url);
    c.output().expect("chromium runs")
}

/// The report in a real browser: loads with no console errors, every plot
/// draws a non-empty box, system strings are text, and a screenshot is
/// taken (copied to docs/img/report.png when PUNCTUAL_UPDATE_SCREENSHOT is
/// set).
#[test]
fn html_report_in_headless_chromium() {
    let Some(bin) = chromium() else {
        eprintln!("skipped: chromium is not installed (apt-get install chromium)");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let page = html_report(dir.path());
    let url = format!("file://{}", page.display());

    // 1. The page as shipped: console messages and a screenshot.
    let shot = dir.path().join("report.png");
    let o = chrome(
        &bin,
        &dir.path().join("profile1"),
        &[
            "--enable-logging=stderr",
            "--v=0",
            "--window-size=1280,1900",
            &format!("--screenshot={}", shot.display()),
        ],
        &url,
    );
    let log = String::from_utf8_lossy(&o.stderr);
    let console: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("CONSOLE") || l.contains("Refused to") || l.contains("Uncaught"))
        .collect();
    assert!(console.is_empty(), "console messages: {console:#?}");
    let png = std::fs::read(&shot).expect("screenshot written");
    assert_eq!(&png[1..4], b"PNG");
    assert!(
        png.len() > 30_000,
        "screenshot suspiciously small: {} bytes",
        png.len()
    );
    if std::env::var_os("PUNCTUAL_UPDATE_SCREENSHOT").is_some() {
        let dest = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/img/report.png");
        std::fs::create_dir_all(dest.parent().unwrap()).unwrap();
        std::fs::copy(&shot, &dest).unwrap();
    }

    // 2. A copy with a probe script appended (the report itself has none,
    //    and its Content-Security-Policy would block one): measure what the
    //    browser actually laid out.
    let html = std::fs::read_to_string(&page).unwrap();
    let probe = r#"<script>
(function(){
  var out = {plots: [], imgs: document.images.length, scripts: document.scripts.length,
             text: document.body.textContent};
  document.querySelectorAll('svg.plot').forEach(function(svg){
    var g = svg.querySelector('g.data'); var b = g ? g.getBBox() : {width:0,height:0};
    var r = svg.getBoundingClientRect();
    out.plots.push({title: svg.querySelector('title').textContent, w: b.width, h: b.height,
                    sw: r.width, sh: r.height, n: g ? g.childElementCount : 0});
  });
  var pre = document.createElement('pre'); pre.id = 'probe-result';
  pre.textContent = JSON.stringify(out); document.body.appendChild(pre);
})();
</script>"#;
    let no_csp = html.replace("Content-Security-Policy", "x-removed-for-probe");
    let instrumented = no_csp.replace("</body>", &format!("{probe}</body>"));
    let ipath = dir.path().join("probe.html");
    std::fs::write(&ipath, instrumented).unwrap();
    let o = chrome(
        &bin,
        &dir.path().join("profile2"),
        &["--window-size=1280,1000", "--dump-dom"],
        &format!("file://{}", ipath.display()),
    );
    let dom = String::from_utf8_lossy(&o.stdout);
    let start = dom.find("<pre id=\"probe-result\">").expect("probe ran") + 23;
    let end = start + dom[start..].find("</pre>").unwrap();
    let json = dom[start..end]
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&amp;", "&");
    let v: serde_json::Value = serde_json::from_str(&json).expect("probe JSON");
    let plots = v["plots"].as_array().unwrap();
    assert!(plots.len() >= 10, "{} plots", plots.len());
    for p in plots {
        assert!(
            p["w"].as_f64().unwrap() > 10.0 && p["h"].as_f64().unwrap() > 1.0,
            "plot drew nothing: {p}"
        );
        assert!(p["sw"].as_f64().unwrap() > 200.0, "plot not laid out: {p}");
    }
    // Escaping, as the browser sees it: no <img> element, only our probe
    // script, and the names present as text.
    assert_eq!(v["imgs"], 0);
    assert_eq!(v["scripts"], 1);
    let text = v["text"].as_str().unwrap();
    assert!(text.contains("<img src=x oner"), "comm not shown as text");
    assert!(text.contains("<script>alert('scenario')</script> audio & video"));
}

/// A process named like markup and a scenario with `<script>` are text.
#[test]
fn system_strings_are_escaped_in_html() {
    let dir = tempfile::tempdir().unwrap();
    let page = std::fs::read_to_string(html_report(dir.path())).unwrap();
    assert!(page.contains("&lt;img src=x oner"));
    assert!(page.contains("&lt;script&gt;alert("));
    assert!(!page.contains("<img"));
    assert!(!page.contains("<script"));
}

#[test]
fn prometheus_output_passes_promtool() {
    let out = punctual()
        .arg("report")
        .args(all_fixtures())
        .args(["--format", "prometheus"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("punctual_latency_seconds_bucket{run=\"timer-idle\""));
    assert!(text.contains("punctual_stolen_by_source_seconds_total{"));
    // The verdicts are the ones the records' series give, each with its
    // state; the pass/fail a fixture keeps under `extra.forecast` is not one.
    assert!(text.contains("punctual_verdict{run=\"timer-idle\",profile=\"ADSL 2 ms × 2\",state=\""));
    assert!(!text.contains("profile=\"rt-audio\""));
    if Command::new("promtool").arg("--version").output().is_err() {
        eprintln!("skipped promtool part: promtool not installed (apt-get install prometheus)");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("punctual.prom");
    std::fs::write(&p, &text).unwrap();
    let o = Command::new("sh")
        .arg("-c")
        .arg(format!("promtool check metrics < {}", p.display()))
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "promtool: {}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
}

#[test]
fn hlog_reads_back_with_hdrhistogram() {
    use hdrhistogram::serialization::interval_log::{IntervalLogIterator, LogEntry};
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run.hlog");
    punctual()
        .args(["report"])
        .arg(fx("timer-load.json"))
        .args(["--format", "hlog", "-o"])
        .arg(&out)
        .assert()
        .success();
    let bytes = std::fs::read(&out).unwrap();
    let rec = Record::read(&fx("timer-load.json")).unwrap();
    let mut n = 0;
    for e in IntervalLogIterator::new(&bytes) {
        let LogEntry::Interval(h) = e.expect("log parses") else {
            continue;
        };
        let raw = base64::engine::general_purpose::STANDARD
            .decode(h.encoded_histogram())
            .unwrap();
        let hist: hdrhistogram::Histogram<u64> = hdrhistogram::serialization::Deserializer::new()
            .deserialize(&mut std::io::Cursor::new(raw))
            .unwrap();
        let s = rec.series_named(h.tag().unwrap().as_str()).unwrap();
        assert_eq!(hist.len(), s.count);
        assert!(hist.equivalent(hist.max(), s.max.0));
        assert_eq!(h.duration().as_secs(), 60);
        n += 1;
    }
    assert_eq!(n, rec.series.len());
}

#[test]
fn perfetto_has_one_track_per_thread() {
    let out = punctual()
        .arg("report")
        .args(all_fixtures())
        .args(["--format", "perfetto"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("valid JSON");
    let evs = v["traceEvents"].as_array().unwrap();
    let mut tracks = std::collections::BTreeMap::new();
    for e in evs.iter().filter(|e| e["name"] == "thread_name") {
        let key = (e["pid"].as_u64().unwrap(), e["tid"].as_u64().unwrap());
        assert!(
            tracks
                .insert(key, e["args"]["name"].as_str().unwrap().to_string())
                .is_none(),
            "two names for one track"
        );
    }
    // Two CPUs in each timer record, one task in the simulation.
    assert_eq!(tracks.len(), 5, "{tracks:?}");
    for e in evs {
        assert!(e["ph"].is_string() && e["pid"].is_u64());
        if e["ph"] == "X" {
            let key = (e["pid"].as_u64().unwrap(), e["tid"].as_u64().unwrap());
            assert!(tracks.contains_key(&key), "slice on an unnamed track: {e}");
            assert!(e["ts"].is_number() && e["dur"].as_f64().unwrap() >= 0.0);
        }
    }
}

#[test]
fn merge_is_lossless_on_the_command_line() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("merged.json");
    punctual()
        .arg("report")
        .arg(fx("timer-idle.json"))
        .arg(fx("timer-load.json"))
        .arg("--merge")
        .arg("-o")
        .arg(&out)
        .assert()
        .success();
    let m = Record::read(&out).unwrap();
    let a = Record::read(&fx("timer-idle.json")).unwrap();
    let b = Record::read(&fx("timer-load.json")).unwrap();
    for s in &m.series {
        let (sa, sb) = (
            a.series_named(&s.name).unwrap(),
            b.series_named(&s.name).unwrap(),
        );
        assert_eq!(s.count, sa.count + sb.count);
        assert_eq!(s.histogram, sa.histogram.merge(&sb.histogram));
        assert_eq!(s.max, sa.max.max(sb.max));
        let hdr = punctual_record::Recorder::from_series(s).unwrap();
        assert_eq!(hdr.hdr().len(), s.count);
    }
    assert_eq!(m.spikes.len(), a.spikes.len() + b.spikes.len());
    assert_eq!(m.duration_ns, a.duration_ns + b.duration_ns);
    // CSV of the merge sums the per-bucket counts of the inputs.
    let csv = punctual()
        .arg("report")
        .arg(&out)
        .args(["--format", "csv", "--bucket", "1ms"])
        .output()
        .unwrap();
    let text = String::from_utf8(csv.stdout).unwrap();
    let total: u64 = text
        .lines()
        .skip(1)
        .filter(|l| l.contains(",cpu0.latency,"))
        .map(|l| l.rsplit(',').next().unwrap().parse::<u64>().unwrap())
        .sum();
    assert_eq!(total, a.series[0].count + b.series[0].count);
}

#[test]
fn hist_is_cyclictest_shaped() {
    let out = punctual()
        .arg("report")
        .arg(fx("timer-idle.json"))
        .args(["--format", "hist"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.starts_with("# Histogram"));
    let rec = Record::read(&fx("timer-idle.json")).unwrap();
    // Rows are 1 µs; the columns (cpu0, cpu1 latency) sum with overflows to the counts.
    let total_line = text.lines().find(|l| l.starts_with("# Total:")).unwrap();
    let over_line = text
        .lines()
        .find(|l| l.starts_with("# Histogram Overflows:"))
        .unwrap();
    let nums = |l: &str| -> Vec<u64> {
        l.split(':')
            .nth(1)
            .unwrap()
            .split_whitespace()
            .map(|v| v.parse().unwrap())
            .collect()
    };
    let (t, o) = (nums(total_line), nums(over_line));
    assert_eq!(t.len(), 2);
    assert_eq!(t[0] + o[0], rec.series_named("cpu0.latency").unwrap().count);
    let none = punctual()
        .arg("report")
        .arg(fx("reserve-sim.json"))
        .args(["--format", "hist"])
        .output()
        .unwrap();
    assert_eq!(none.status.code(), Some(2));
}

#[test]
fn bad_input_is_refused_with_status_2() {
    let dir = tempfile::tempdir().unwrap();
    let not_record = dir.path().join("x.json");
    std::fs::write(&not_record, "{\"hello\": 1}").unwrap();
    let cases: Vec<(Vec<String>, &str)> = vec![
        (vec!["missing.json".into()], "does not exist"),
        (
            vec![not_record.display().to_string()],
            "not a punctual record",
        ),
        (
            vec![
                fx("timer-idle.json").display().to_string(),
                "--csv-table".into(),
                "nope".into(),
            ],
            "--csv-table 'nope'",
        ),
        (
            vec![
                fx("timer-idle.json").display().to_string(),
                "--profile".into(),
                "opera".into(),
            ],
            "--profile 'opera'",
        ),
        (
            vec![
                fx("timer-idle.json").display().to_string(),
                "-o".into(),
                "x.out".into(),
            ],
            "--output needs --format",
        ),
        (
            vec![
                fx("timer-idle.json").display().to_string(),
                "--html".into(),
                "/nonexistent-dir/r.html".into(),
            ],
            "--html",
        ),
        (
            vec![
                fx("timer-idle.json").display().to_string(),
                "--format".into(),
                "csv".into(),
                "--csv-table".into(),
                "periods".into(),
            ],
            "no reservation periods",
        ),
    ];
    for (args, msg) in cases {
        let o = punctual().arg("report").args(&args).output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(msg), "{args:?}: {err}");
        assert!(!err.contains("panicked"));
    }
    // A failed export leaves no file behind.
    let out = dir.path().join("never.csv");
    punctual()
        .arg("report")
        .arg(fx("timer-idle.json"))
        .args(["--format", "csv", "--csv-table", "periods", "-o"])
        .arg(&out)
        .assert()
        .code(2);
    assert!(!out.exists());
}

fn check_fixture() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/records/check-cause-load.json")
}

fn stdout_of(args: &[&std::ffi::OsStr]) -> String {
    let out = punctual().args(args).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// A check record's report, the summary and `--format text`, starts with
/// its verdicts, state and interval first, and the caveat the record
/// keeps (its machine changed during the run) once before them.
#[test]
fn a_check_record_s_text_starts_with_its_verdicts() {
    let rec = check_fixture();
    let summary = stdout_of(&["report".as_ref(), rec.as_os_str()]);
    let mut l = summary.lines();
    assert!(
        l.next()
            .unwrap()
            .starts_with("check-cause-load: verdicts for 26 workload profiles: "),
        "{summary}"
    );
    assert!(
        l.next()
            .unwrap()
            .starts_with("   NOT REPRESENTATIVE: the machine changed during the run"),
        "{summary}"
    );
    let first = l.next().unwrap();
    assert!(
        first.starts_with("  MISS ADSL 2 ms × 2: misses, 95% CI "),
        "{summary}"
    );
    let text = stdout_of(&[
        "report".as_ref(),
        rec.as_os_str(),
        "--format".as_ref(),
        "text".as_ref(),
    ]);
    assert!(
        text.starts_with("== verdicts for 26 workload profiles: "),
        "{text}"
    );
    assert!(text.contains(&format!("\n{first}\n")), "{text}");
    for later in [
        "\n== this machine\n",
        "\n== wake-up latency\n",
        "\n== summary\n",
    ] {
        assert!(text.contains(later), "{later} missing: {text}");
    }
    assert_eq!(text.matches("NOT REPRESENTATIVE").count(), 1, "{text}");
}

/// A timer record keeps no verdicts; its summary opens with those its
/// wake-ups give, the same the JUnit export computes, and says they were
/// computed. A simulated record's summary computes none.
#[test]
fn a_timer_record_s_summary_opens_with_computed_verdicts() {
    let rec =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/records/timer-cause.json");
    let summary = stdout_of(&["report".as_ref(), rec.as_os_str()]);
    let first = summary.lines().next().unwrap();
    assert!(
        first.starts_with("timer-cause: verdicts for 26 workload profiles: "),
        "{summary}"
    );
    assert!(
        summary.contains("(computed now from the record's latency series"),
        "{summary}"
    );
    let d = tempfile::tempdir().unwrap();
    let junit = d.path().join("j.xml");
    punctual()
        .arg("report")
        .arg(&rec)
        .args(["--format", "junit", "-o"])
        .arg(&junit)
        .assert()
        .success();
    let xml = std::fs::read_to_string(&junit).unwrap();
    let misses = summary.lines().filter(|l| l.starts_with("  MISS ")).count();
    assert!(misses > 0, "{summary}");
    assert_eq!(
        xml.matches("misses its MTTF target").count(),
        misses,
        "{xml}"
    );
    let sim = d.path().join("s.json");
    let scenario =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/softmodem-mttf.toml");
    punctual()
        .arg("simulate")
        .arg(&scenario)
        .args(["--duration", "2s", "--json"])
        .arg(&sim)
        .assert()
        .success();
    let summary = stdout_of(&["report".as_ref(), sim.as_os_str()]);
    assert!(!summary.contains("verdicts for"), "{summary}");
}

/// The HTML page opens with the verdicts: a check record's before its
/// runs and warnings; a timer record, which keeps none, gets those its
/// latency series give (the JUnit export's), said to be computed.
#[test]
fn the_html_page_opens_with_verdicts_for_check_and_timer_records() {
    let d = tempfile::tempdir().unwrap();
    for (rec, computed) in [(check_fixture(), false), (fx("timer-load.json"), true)] {
        let out = d.path().join("v.html");
        punctual()
            .arg("report")
            .arg(&rec)
            .arg("--html")
            .arg(&out)
            .assert()
            .success();
        let page = std::fs::read_to_string(&out).unwrap();
        let at = |id: &str| page.find(&format!("id=\"{id}\"")).unwrap_or(usize::MAX);
        assert!(at("verdicts") < at("runs"), "{}", rec.display());
        assert!(at("runs") < usize::MAX, "{}", rec.display());
        assert!(at("verdicts") < at("warnings"), "{}", rec.display());
        assert_eq!(
            page.contains("the record keeps no verdicts of its own"),
            computed,
            "{}",
            rec.display()
        );
        assert!(page.contains("95% CI"), "{}", rec.display());
    }
}

/// The Prometheus export carries a check record's verdicts: the state
/// with its label and whether it is representative, and the interval.
#[test]
fn prometheus_exports_a_check_record_s_verdicts() {
    let rec = check_fixture();
    let text = stdout_of(&[
        "report".as_ref(),
        rec.as_os_str(),
        "--format".as_ref(),
        "prometheus".as_ref(),
    ]);
    assert!(
        text.contains(
            "punctual_verdict{profile=\"ADSL 2 ms × 2\",state=\"misses\",representative=\"false\"} 0\n"
        ),
        "{text}"
    );
    assert_eq!(
        text.matches("punctual_verdict{").count(),
        26,
        "one gauge per profile: {text}"
    );
    assert!(
        text.contains(
            "punctual_verdict_mttf_ci_seconds{profile=\"ADSL 2 ms × 2\",bound=\"low\"} 0.63"
        ),
        "{text}"
    );
}
