//! `punctual watch` end to end: bad input (one sentence, status 2), and,
//! as root, a real watch of a periodic thread this test starts in its own
//! process — its wake-ups, its period, the record, Ctrl-C (SIGTERM)
//! keeping the results, and tracefs left as found.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::common::is_root;
use assert_cmd::prelude::*;

fn bin() -> Command {
    Command::cargo_bin("punctual").unwrap()
}

#[test]
fn bad_input_is_one_sentence_and_status_2() {
    let me = std::process::id().to_string();
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["--pid", "0"], "--pid 0 is not a process id"),
        (vec!["--pid", "-7"], "--pid -7 is not a process id"),
        // Above any pid_max (at most 2^22).
        (
            vec!["--pid", "8388608"],
            "no process with pid 8388608 is running",
        ),
        (
            vec!["--pid", &me, "--tid", "-3"],
            "--tid -3 is not a thread of process",
        ),
        (vec!["--pid", &me, "--duration", "0s"], "--duration"),
        (
            vec!["--pid", &me, "--buffer-kb", "1"],
            "--buffer-kb 1 is out of range",
        ),
        (vec!["--pid", "abc"], "invalid value 'abc'"),
        (vec![], "--pid"),
    ];
    for (args, says) in cases {
        let o = bin().arg("watch").args(&args).output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
        assert!(o.stdout.is_empty(), "{args:?}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
}

/// A thread of this process that sleeps to absolute times every `period`
/// (at SCHED_FIFO 10 where allowed), as a real-time loop does.
struct Periodic {
    tid: i32,
    stop: Arc<AtomicBool>,
    handle: Option<std::thread::JoinHandle<()>>,
}

impl Periodic {
    fn start(period: Duration) -> Periodic {
        let stop = Arc::new(AtomicBool::new(false));
        let tid = Arc::new(AtomicI32::new(0));
        let (s2, t2) = (Arc::clone(&stop), Arc::clone(&tid));
        let handle = std::thread::spawn(move || {
            // SAFETY: plain syscalls on this thread.
            unsafe {
                t2.store(libc::gettid(), Ordering::SeqCst);
                let p = libc::sched_param { sched_priority: 10 };
                libc::sched_setscheduler(0, libc::SCHED_FIFO, &p);
                let mut t = libc::timespec {
                    tv_sec: 0,
                    tv_nsec: 0,
                };
                libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut t);
                while !s2.load(Ordering::Relaxed) {
                    t.tv_nsec += period.as_nanos() as libc::c_long;
                    while t.tv_nsec >= 1_000_000_000 {
                        t.tv_nsec -= 1_000_000_000;
                        t.tv_sec += 1;
                    }
                    libc::clock_nanosleep(
                        libc::CLOCK_MONOTONIC,
                        libc::TIMER_ABSTIME,
                        &t,
                        std::ptr::null_mut(),
                    );
                }
            }
        });
        while tid.load(Ordering::SeqCst) == 0 {
            std::thread::sleep(Duration::from_millis(1));
        }
        Periodic {
            tid: tid.load(Ordering::SeqCst),
            stop,
            handle: Some(handle),
        }
    }
}

impl Drop for Periodic {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

fn instance(pid: u32) -> PathBuf {
    punctual_trace::tracefs::find_mount()
        .unwrap_or_else(|| PathBuf::from(punctual_trace::tracefs::TRACEFS))
        .join("instances")
        .join(format!("punctual-{pid}"))
}

#[test]
fn watches_a_periodic_thread_and_keeps_results_on_sigterm() {
    let _s = crate::common::live();
    if !is_root() {
        eprintln!("skipped: watch needs root for tracefs");
        return;
    }
    let t = Periodic::start(Duration::from_millis(10));
    let me = std::process::id().to_string();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("w.json");
    let o = bin()
        .args(["watch", "--pid", &me, "--tid", &t.tid.to_string()])
        .args(["--duration", "2s", "--json"])
        .arg(&out)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    if err.contains("tracefs, which is not available here") {
        eprintln!("skipped: {err}");
        return;
    }
    assert!(o.status.success(), "{err}");
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains(&format!("-{} ", t.tid)), "{text}");
    let rec: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert_eq!(rec["kind"], "watch");
    let th = &rec["extra"]["watch"]["threads"][0];
    assert_eq!(th["tid"], t.tid);
    // ~200 wake-ups in 2 s; a loaded VM delays some, none should vanish
    // wholesale.
    let wakeups = th["wakeups"].as_u64().unwrap();
    assert!(wakeups >= 50, "{wakeups} wake-ups of a 10 ms thread in 2 s");
    let series = rec["series"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == th["series"])
        .expect("its latency series");
    assert_eq!(series["count"].as_u64(), Some(wakeups));
    assert_eq!(series["metric"], "latency");
    // Its period is found from its wake-ups alone.
    let p = th["period"]["period_ns"].as_u64().expect("a period");
    assert!(p.abs_diff(10_000_000) < 500_000, "period {p} ns");
    assert_eq!(th["period"]["stated"], false);
    assert!(!rec["spikes"].as_array().unwrap().is_empty());

    // SIGTERM (Ctrl-C's twin) ends it early with the results kept and
    // the instance gone.
    let child = bin()
        .args(["watch", "--pid", &me, "--tid", &t.tid.to_string()])
        .args(["--duration", "60s", "--period", "10ms", "--json"])
        .arg(&out)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let started = Instant::now();
    while !instance(pid).exists() && started.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(instance(pid).exists(), "the recorder's instance appears");
    std::thread::sleep(Duration::from_millis(800));
    // SAFETY: plain syscall on our own child.
    unsafe { libc::kill(pid as i32, libc::SIGTERM) };
    let o = child.wait_with_output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(!instance(pid).exists());
    assert!(!PathBuf::from(format!("/run/punctual/trace-journal-{pid}.json")).exists());
    let rec: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert_eq!(rec["interrupted"], true);
    let th = &rec["extra"]["watch"]["threads"][0];
    assert_eq!(th["period"]["stated"], true);
    assert_eq!(th["period"]["period_ns"], 10_000_000);
    assert!(th["deadlines"]["releases"].as_u64().unwrap() > 0);
    drop(t);
}

/// Without --tid, a thread the process creates once the watch runs is
/// followed: its wake-ups are timed like those of the threads that were
/// there at the start, and the record lists it as followed.
#[test]
fn follows_a_thread_created_after_the_start() {
    let _s = crate::common::live();
    if !is_root() {
        eprintln!("skipped: watch needs root for tracefs");
        return;
    }
    let me = std::process::id().to_string();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("w.json");
    let child = bin()
        .args(["watch", "--pid", &me, "--duration", "3s", "--json"])
        .arg(&out)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let started = Instant::now();
    while !instance(pid).exists() && started.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(instance(pid).exists(), "the recorder's instance appears");
    // Created after the watch started: not among the threads it found.
    std::thread::sleep(Duration::from_millis(300));
    let t = Periodic::start(Duration::from_millis(10));
    let o = child.wait_with_output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let rec: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    let at_start: Vec<i64> = rec["config"]["tids"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|v| v.as_i64())
        .collect();
    assert!(!at_start.contains(&(t.tid as i64)), "it came later");
    let followed = rec["config"]["followed_tids"].as_array().expect("followed");
    assert!(followed.iter().any(|v| v.as_i64() == Some(t.tid as i64)));
    let th = rec["extra"]["watch"]["threads"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["tid"] == t.tid)
        .expect("the new thread is in the record")
        .clone();
    // It ran ~2.5 s of the 3 s at 100 Hz; a loaded VM delays some
    // wake-ups, the first look for it comes up to 100 ms late.
    let wakeups = th["wakeups"].as_u64().unwrap();
    assert!(wakeups >= 100, "{wakeups} wake-ups of the new thread");
    let p = th["period"]["period_ns"].as_u64().expect("its period");
    assert!(p.abs_diff(10_000_000) < 500_000, "period {p} ns");
    drop(t);
}
