//! `punctual monitor` as an operator would run it: scraped over HTTP, killed
//! with `kill -9` and restarted without losing its worst cases, written as a
//! node_exporter textfile that promtool accepts, and scraped by a real
//! Prometheus on loopback.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use punctual_report::monitor::MonitorState;

/// Kills the child on every exit path, so a failing test leaves nothing
/// running.
struct Guard(Child);
impl Drop for Guard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn bin() -> std::path::PathBuf {
    assert_cmd::cargo::cargo_bin("punctual")
}

/// Starts the monitor on an ephemeral loopback port and returns it with the
/// address it printed.
fn start(args: &[&str]) -> (Guard, String) {
    let mut child = Command::new(bin())
        .arg("monitor")
        .args(["--listen", "127.0.0.1:0"])
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let err = child.stderr.take().unwrap();
    let guard = Guard(child);
    let mut line = String::new();
    BufReader::new(err).read_line(&mut line).unwrap();
    let addr = line
        .split("http://")
        .nth(1)
        .and_then(|s| s.split("/metrics").next())
        .unwrap_or_else(|| panic!("no address in: {line}"))
        .to_string();
    (guard, addr)
}

fn get(addr: &str, path: &str) -> String {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    write!(s, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out
}

fn metric(text: &str, prefix: &str) -> Option<f64> {
    text.lines()
        .find(|l| l.starts_with(prefix))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

fn now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
}

fn wait_for(path: &Path, secs: u64) {
    let t = Instant::now();
    while !path.exists() {
        assert!(
            t.elapsed() < Duration::from_secs(secs),
            "{} never appeared",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn kill_9_and_restart_keep_the_worst_cases() {
    let _live = crate::common::live();
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state.json");
    let st = state.to_str().unwrap();
    let (mut g, addr) = start(&["--rate", "200", "--state", st, "--persist-every", "1s"]);
    wait_for(&state, 10);
    std::thread::sleep(Duration::from_millis(1500));
    let live = get(&addr, "/metrics");
    assert!(live.starts_with("HTTP/1.1 200"), "{live}");
    assert!(live.contains("text/plain; version=0.0.4"));
    // SIGKILL: no chance to save anything more.
    g.0.kill().unwrap();
    let _ = g.0.wait();
    drop(g);
    let saved = MonitorState::from_json(&std::fs::read_to_string(&state).unwrap()).unwrap();
    let now = now_ns();
    let saved_worst: Vec<(u32, u64)> = saved
        .cpus
        .iter()
        .map(|c| (c.cpu, c.worst(now, 60).expect("samples in the last hour")))
        .collect();
    let saved_samples: u64 = saved.cpus.iter().map(|c| c.samples).sum();
    assert!(saved_samples > 20, "only {saved_samples} samples persisted");

    let (_g2, addr2) = start(&["--rate", "200", "--state", st, "--persist-every", "1s"]);
    let text = get(&addr2, "/metrics");
    assert_eq!(
        metric(&text, "punctual_monitor_restarts_total"),
        Some(1.0),
        "{text}"
    );
    for (cpu, w) in saved_worst {
        let got = metric(
            &text,
            &format!("punctual_monitor_worst_latency_seconds{{cpu=\"{cpu}\",window=\"hour\"}}"),
        )
        .unwrap_or_else(|| panic!("no hourly worst case for cpu {cpu}: {text}"));
        assert!(
            got * 1e9 + 0.5 >= w as f64,
            "cpu {cpu}: {got} s after restart < {w} ns before"
        );
        let week = metric(
            &text,
            &format!("punctual_monitor_worst_latency_seconds{{cpu=\"{cpu}\",window=\"week\"}}"),
        )
        .unwrap();
        assert!(week >= got);
    }
    let count: f64 = text
        .lines()
        .filter(|l| l.starts_with("punctual_monitor_latency_seconds_count"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum();
    assert!(count >= saved_samples as f64, "{count} < {saved_samples}");
    let nf = get(&addr2, "/nope");
    assert!(nf.starts_with("HTTP/1.1 404"));
}

#[test]
fn textfile_passes_promtool_and_run_ends_by_itself() {
    let _live = crate::common::live();
    let dir = tempfile::tempdir().unwrap();
    let tf = dir.path().join("punctual.prom");
    let t = Instant::now();
    let o = Command::new(bin())
        .arg("monitor")
        .args([
            "--listen",
            "off",
            "--rate",
            "100",
            "--duration",
            "2s",
            "--persist-every",
            "1s",
        ])
        .arg("--textfile")
        .arg(&tf)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let ran = t.elapsed();
    assert!(ran < Duration::from_secs(10));
    let text = std::fs::read_to_string(&tf).unwrap();
    let count = metric(&text, "punctual_monitor_latency_seconds_count{cpu=\"0\"}").unwrap();
    let missed = metric(&text, "punctual_monitor_missed_periods_total{cpu=\"0\"}").unwrap();
    // At least 2 s at 100 Hz: wake-ups plus the periods a busy machine made
    // it skip, give or take start-up. The run ends when the (SCHED_OTHER)
    // main thread sees 2 s gone, which under other tests' SCHED_FIFO loads
    // can be later (269 periods were seen once), so the ceiling is the
    // process's own lifetime at 100 Hz, not 2 s.
    assert!(count >= 1.0, "{text}");
    let ceiling = 100.0 * ran.as_secs_f64() + 2.0;
    assert!(
        (120.0..=ceiling).contains(&(count + missed)),
        "{count} samples + {missed} missed in {ran:?}"
    );
    // No temporary files left next to it.
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    if Command::new("promtool").arg("--version").output().is_err() {
        eprintln!("skipped promtool part: promtool not installed (apt-get install prometheus)");
        return;
    }
    let o = Command::new("sh")
        .arg("-c")
        .arg(format!("promtool check metrics < {}", tf.display()))
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A real Prometheus scrapes `/metrics` on loopback for a few seconds.
#[test]
fn real_prometheus_scrapes_the_monitor() {
    let _live = crate::common::live();
    if Command::new("prometheus")
        .arg("--version")
        .output()
        .is_err()
    {
        eprintln!("skipped: prometheus is not installed (apt-get install prometheus)");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (_mon, addr) = start(&["--rate", "50"]);
    let cfg = dir.path().join("prometheus.yml");
    std::fs::write(
        &cfg,
        format!(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\nscrape_configs:\n  - job_name: punctual\n    static_configs:\n      - targets: ['{addr}']\n"
        ),
    )
    .unwrap();
    let port = free_port();
    let web = format!("127.0.0.1:{port}");
    let prom = Command::new("prometheus")
        .arg(format!("--config.file={}", cfg.display()))
        .arg(format!(
            "--storage.tsdb.path={}",
            dir.path().join("data").display()
        ))
        .arg(format!("--web.listen-address={web}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let _prom = Guard(prom);
    let t = Instant::now();
    let mut last = String::new();
    loop {
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "Prometheus never had the monitor's metrics: {last}"
        );
        std::thread::sleep(Duration::from_millis(500));
        let Ok(mut s) = TcpStream::connect(&web) else {
            continue;
        };
        let _ = s.set_read_timeout(Some(Duration::from_secs(3)));
        let q =
            "/api/v1/query?query=punctual_monitor_worst_latency_seconds%7Bwindow%3D%22hour%22%7D";
        if write!(s, "GET {q} HTTP/1.0\r\nHost: {web}\r\n\r\n").is_err() {
            continue;
        }
        last.clear();
        let _ = s.read_to_string(&mut last);
        let Some(body) = last.split("\r\n\r\n").nth(1) else {
            continue;
        };
        let Ok(v) = serde_json::from_str::<serde_json::Value>(body) else {
            continue;
        };
        let res = v["data"]["result"].as_array().cloned().unwrap_or_default();
        if !res.is_empty() {
            assert_eq!(res[0]["metric"]["job"], "punctual");
            let val: f64 = res[0]["value"][1].as_str().unwrap().parse().unwrap();
            assert!(val > 0.0 && val < 1.0, "worst latency {val} s");
            break;
        }
    }
}

#[test]
fn bad_monitor_options_are_refused() {
    for (args, msg) in [
        (vec!["--rate", "0"], "--rate 0"),
        (vec!["--listen", "localhost"], "--listen 'localhost'"),
        (vec!["--listen", "off"], "nowhere to report"),
        (vec!["--cpus", "99"], "CPU 99"),
        (vec!["--priority", "120"], "--priority 120"),
    ] {
        let o = Command::new(bin())
            .arg("monitor")
            .args(&args)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(msg), "{args:?}: {err}");
    }
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("state.json");
    std::fs::write(&bad, "not json").unwrap();
    let o = Command::new(bin())
        .args(["monitor", "--listen", "127.0.0.1:0", "--state"])
        .arg(&bad)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("move the file away"));
}

/// The state file is the monitor's record: it says which C-states its
/// latencies saw, as a probe record's `config.c_states` does — the value
/// held, or why it could not be, and "not held" when left free.
#[test]
fn the_state_says_which_c_states_were_held() {
    let _live = crate::common::live();
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state.json");
    let run = dir.path().join("run");
    for (dma, held) in [("off", false), ("0", true)] {
        let o = Command::new(bin())
            .arg("monitor")
            .args(["--listen", "off", "--cpus", "0", "--duration", "300ms"])
            .args(["--dma-latency", dma])
            .arg("--textfile")
            .arg(dir.path().join("m.prom"))
            .arg("--state")
            .arg(&state)
            .env("PUNCTUAL_RUN_DIR", &run)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let st = MonitorState::from_json(&std::fs::read_to_string(&state).unwrap()).unwrap();
        let c = st.c_states.expect("the state names the C-states in force");
        if held {
            // Held at 0, or refused with the reason (not root): either way said.
            assert!(
                c["dma_latency_us"] == 0 || c.get("dma_latency_refused").is_some(),
                "{c}"
            );
        } else {
            assert_eq!(c["dma_latency_us"], "not held", "{c}");
        }
    }
}
