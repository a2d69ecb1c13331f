//! The evidence a `--stop-at` run keeps: the flight recorder's raw pages
//! as a trace.dat (`--stop-raw`) that `trace-cmd report` reads, and the
//! kernel stack of what held the CPU (`--stop-stacks`), for `timer`,
//! `noise` and `watch`. Live tests need root, tracefs and trace-cmd and
//! skip with the reason otherwise.

use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use assert_cmd::prelude::*;

use crate::common::{live, read_json};

fn punctual() -> Command {
    Command::cargo_bin("punctual").unwrap()
}

/// Why a live test cannot run here, if it cannot.
pub fn live_skip() -> Option<&'static str> {
    // SAFETY: plain syscall.
    if unsafe { libc::geteuid() } != 0 {
        return Some("needs root");
    }
    if !Path::new("/sys/kernel/tracing/trace").exists() {
        return Some("needs tracefs at /sys/kernel/tracing");
    }
    if Command::new("trace-cmd").arg("--version").output().is_err() {
        return Some("needs trace-cmd (apt-get install -y trace-cmd)");
    }
    if std::thread::available_parallelism().map_or(1, |n| n.get()) < 2 {
        return Some("needs two CPUs");
    }
    None
}

/// `trace-cmd report` of `dat`, which must succeed.
pub fn report(dat: &Path) -> String {
    let out = Command::new("trace-cmd")
        .args(["report", "-i"])
        .arg(dat)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "trace-cmd report -i {}: {}",
        dat.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn evidence_flags_need_stop_at_and_the_recorder() {
    let dir = tempfile::tempdir().unwrap();
    let dat = dir.path().join("t.dat");
    let dat = dat.to_str().unwrap();
    for args in [
        vec!["timer", "--stop-raw", dat],
        vec!["timer", "--stop-at", "1ms", "--stop-raw", dat],
        vec!["noise", "--stop-at", "1ms", "--stop-stacks"],
        vec!["timer", "--cause", "--stop-stacks"],
        vec!["watch", "--pid", "1", "--on-threshold", "true"],
    ] {
        let out = punctual().args(&args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
        assert!(!Path::new(dat).exists());
    }
}

/// A SCHED_FIFO 99 thread of this process on `cpu` that, after `after`,
/// spins for `spin` and then sleeps: it holds the CPU from a probe of
/// lower priority, and its switch away is where its stack is taken.
pub struct Blocker {
    pub tid: i32,
    handle: Option<std::thread::JoinHandle<()>>,
}

impl Blocker {
    /// Spins once the run of `child` (a punctual process) is recording:
    /// its tracing instance is on, it has a thread named `thread` when one
    /// is given (a probe), and `settle` has passed. A fixed delay raced the
    /// run's start-up, which a loaded machine stretches past it: the spin
    /// then came before the probe, and the run stopped at a stall of the
    /// host instead, where no task switches and no stack is taken.
    pub fn once_recording(
        cpu: usize,
        child: u32,
        thread: Option<&'static str>,
        settle: Duration,
        spin: Duration,
    ) -> Blocker {
        let on = format!("/sys/kernel/tracing/instances/punctual-{child}/tracing_on");
        let has_thread = move || {
            thread.is_none_or(|name| {
                std::fs::read_dir(format!("/proc/{child}/task")).is_ok_and(|d| {
                    d.flatten().any(|t| {
                        std::fs::read_to_string(t.path().join("comm"))
                            .is_ok_and(|c| c.trim() == name)
                    })
                })
            })
        };
        Blocker::start(cpu, spin, move || {
            let t0 = std::time::Instant::now();
            while t0.elapsed() < Duration::from_secs(15)
                && !(std::fs::read_to_string(&on).is_ok_and(|v| v.trim() == "1") && has_thread())
            {
                std::thread::sleep(Duration::from_millis(5));
            }
            std::thread::sleep(settle);
        })
    }

    fn start(cpu: usize, spin: Duration, wait: impl FnOnce() + Send + 'static) -> Blocker {
        let tid = Arc::new(AtomicI32::new(0));
        let t2 = Arc::clone(&tid);
        let handle = std::thread::Builder::new()
            .name("evidence-spin".into())
            .spawn(move || {
                // SAFETY: plain syscalls on this thread.
                unsafe {
                    t2.store(libc::gettid(), Ordering::SeqCst);
                    let mut set: libc::cpu_set_t = std::mem::zeroed();
                    libc::CPU_SET(cpu, &mut set);
                    libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
                    let p = libc::sched_param { sched_priority: 99 };
                    libc::sched_setscheduler(0, libc::SCHED_FIFO, &p);
                }
                wait();
                let t0 = std::time::Instant::now();
                while t0.elapsed() < spin {
                    std::hint::spin_loop();
                }
                std::thread::sleep(Duration::from_millis(200));
            })
            .unwrap();
        while tid.load(Ordering::SeqCst) == 0 {
            std::thread::sleep(Duration::from_millis(1));
        }
        Blocker {
            tid: tid.load(Ordering::SeqCst),
            handle: Some(handle),
        }
    }
}

/// `cmd` spawned with its output captured, and a [`Blocker`] on `cpu`
/// that spins for `spin` once the run records (and, for a probe, once its
/// `thread` runs): the run's output and the blocker's task name
/// (`comm/tid`).
fn run_blocked(
    cmd: &mut Command,
    cpu: usize,
    thread: Option<&'static str>,
    spin: Duration,
) -> (std::process::Output, String) {
    let child = cmd
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // A watch finds its threads after the recorder starts.
    let settle = Duration::from_millis(if thread.is_some() { 200 } else { 1000 });
    let blocker = Blocker::once_recording(cpu, child.id(), thread, settle, spin);
    let out = child.wait_with_output().unwrap();
    let spinner = format!("evidence-spin/{}", blocker.tid);
    drop(blocker);
    (out, spinner)
}

impl Drop for Blocker {
    fn drop(&mut self) {
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

/// A timer run stopped by a 30 ms spin of a FIFO 99 thread on its CPU
/// writes a trace.dat of the last second that trace-cmd reads, with the
/// probe's own wake-ups in it, and keeps the kernel stack of what held
/// the CPU; when the spinner is what filled the event, it is the
/// spinner's stack, taken as it went to sleep. A stall of the host over
/// the threshold can come first on a virtual machine: no task switches
/// inside it, and the run says there is no stack to show.
#[test]
fn timer_stop_at_writes_a_trace_dat_and_the_blockers_stack() {
    if let Some(r) = live_skip() {
        eprintln!("skipped: {r}");
        return;
    }
    let _live = live();
    let dir = tempfile::tempdir().unwrap();
    let (dat, j) = (dir.path().join("t.dat"), dir.path().join("t.json"));
    let (out, spinner) = run_blocked(
        punctual()
            .args(["timer", "--cpus", "1", "--duration", "20s"])
            .args([
                "--stop-at",
                "20ms",
                "--cause",
                "--stop-stacks",
                "--stop-raw",
            ])
            .arg(&dat)
            .arg("--json")
            .arg(&j)
            .env("PUNCTUAL_RUN_DIR", dir.path().join("run")),
        1,
        Some("punctual-t1"),
        Duration::from_millis(30),
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    let v = read_json(&j);
    let e = &v["extra"]["stopped_at"];
    assert!(e["value_ns"].as_u64().unwrap() > 20_000_000, "{e}");
    assert_eq!(v["config"]["stop_stacks"], true);
    let text = report(&dat);
    assert!(
        text.lines()
            .any(|l| l.contains("sched_switch:") && l.contains("punctual-t1")),
        "the probe's switches are in the raw window"
    );
    let spinner_filled = e["causes"].as_array().is_some_and(|c| {
        c.first()
            .is_some_and(|c| c["name"].as_str() == Some(spinner.as_str()))
    });
    eprintln!("the spinner filled the event: {spinner_filled}");
    let stack = &e["stack"];
    let Some(frames) = stack["frames"].as_array() else {
        // A stall of the host or of interrupts came first: no task
        // switched inside it, and the output says so.
        assert!(!spinner_filled, "the spinner's stack is missing: {e}");
        assert!(stdout.contains("no kernel stack: "), "{stdout}");
        return;
    };
    let frames: Vec<&str> = frames.iter().filter_map(|f| f.as_str()).collect();
    assert!(
        frames.iter().any(|f| f.starts_with("__schedule")),
        "{frames:?}"
    );
    assert!(stdout.contains("kernel stack of "), "{stdout}");
    if spinner_filled {
        assert_eq!(stack["task"].as_str(), Some(spinner.as_str()), "{stack}");
        assert!(
            frames.iter().any(|f| f.contains("nanosleep")),
            "it went to sleep: {frames:?}"
        );
    }
    assert!(
        stack["mono_ns"].as_u64().unwrap() <= e["mono_ns"].as_u64().unwrap(),
        "the stack is inside the event"
    );
    assert!(
        text.contains("kernel_stack:"),
        "the window holds the stacks as the kernel wrote them"
    );
}

/// A noise run that stops at a gap writes the raw window too, and a run
/// that never crosses its threshold writes nothing.
#[test]
fn noise_stop_raw_is_written_only_when_the_threshold_was_crossed() {
    if let Some(r) = live_skip() {
        eprintln!("skipped: {r}");
        return;
    }
    let _live = live();
    let dir = tempfile::tempdir().unwrap();
    let dat = dir.path().join("n.dat");
    // The tick alone (every 1-4 ms) steals more than 2 us.
    let out = punctual()
        .args(["noise", "--cpus", "0", "--duration", "20s"])
        .args(["--stop-at", "2us", "--cause", "--stop-raw"])
        .arg(&dat)
        .env("PUNCTUAL_RUN_DIR", dir.path().join("run"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let text = report(&dat);
    assert!(
        text.lines().any(|l| l.contains(" [000] ")),
        "CPU 0's events are in the window"
    );
    let quiet = dir.path().join("q.dat");
    let out = punctual()
        .args(["noise", "--cpus", "0", "--duration", "200ms"])
        .args(["--stop-at", "10s", "--cause", "--stop-raw"])
        .arg(&quiet)
        .env("PUNCTUAL_RUN_DIR", dir.path().join("run"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert!(!quiet.exists(), "no event, no file");
}

/// A thread of this process on `cpu` that sleeps 1 ms at a time at
/// SCHED_FIFO 10 until `stop`, as a real-time loop does.
pub fn periodic(
    cpu: usize,
    stop: Arc<std::sync::atomic::AtomicBool>,
) -> (i32, std::thread::JoinHandle<()>) {
    let tid = Arc::new(AtomicI32::new(0));
    let t2 = Arc::clone(&tid);
    let h = std::thread::Builder::new()
        .name("evidence-loop".into())
        .spawn(move || {
            // SAFETY: plain syscalls on this thread.
            unsafe {
                t2.store(libc::gettid(), Ordering::SeqCst);
                let mut set: libc::cpu_set_t = std::mem::zeroed();
                libc::CPU_SET(cpu, &mut set);
                libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
                let p = libc::sched_param { sched_priority: 10 };
                libc::sched_setscheduler(0, libc::SCHED_FIFO, &p);
            }
            while !stop.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(1));
            }
        })
        .unwrap();
    while tid.load(Ordering::SeqCst) == 0 {
        std::thread::sleep(Duration::from_millis(1));
    }
    (tid.load(Ordering::SeqCst), h)
}

/// `watch --stop-at` keeps the same evidence as the probes: the event's
/// causes, the Perfetto window, the raw trace.dat and the stack of what
/// held the CPU — here a FIFO 99 spin of 30 ms on the CPU of a FIFO 10
/// loop of this process (or a stall of the host that came first, where
/// no task switched and the run says there is no stack).
#[test]
fn watch_stop_at_keeps_the_same_evidence() {
    if let Some(r) = live_skip() {
        eprintln!("skipped: {r}");
        return;
    }
    let _live = live();
    let dir = tempfile::tempdir().unwrap();
    let (dat, pf, j) = (
        dir.path().join("w.dat"),
        dir.path().join("w.pf.json"),
        dir.path().join("w.json"),
    );
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (tid, h) = periodic(1, Arc::clone(&stop));
    let (out, spinner) = run_blocked(
        punctual()
            .args(["watch", "--pid", &std::process::id().to_string()])
            .args(["--tid", &tid.to_string(), "--duration", "20s"])
            .args(["--stop-at", "20ms", "--stop-stacks", "--stop-raw"])
            .arg(&dat)
            .arg("--stop-trace")
            .arg(&pf)
            .arg("--json")
            .arg(&j)
            .env("PUNCTUAL_RUN_DIR", dir.path().join("run")),
        1,
        None,
        Duration::from_millis(30),
    );
    stop.store(true, Ordering::Relaxed);
    h.join().unwrap();
    assert!(out.status.success(), "{out:?}");
    let v = read_json(&j);
    let s = &v["extra"]["watch"]["stopped_at"];
    assert_eq!(s["tid"], tid, "{s}");
    assert!(s["latency_ns"].as_u64().unwrap() > 20_000_000, "{s}");
    let causes = s["causes"].as_array().expect("the event's causes");
    let share: f64 = causes.iter().map(|c| c["share"].as_f64().unwrap()).sum();
    assert!((share - 1.0).abs() < 0.01, "the shares add up: {share}");
    let spinner_filled = causes[0]["name"].as_str() == Some(spinner.as_str());
    let stdout = String::from_utf8_lossy(&out.stdout);
    match s["stack"]["frames"].as_array() {
        Some(frames) => {
            assert!(frames
                .iter()
                .any(|f| f.as_str().unwrap_or("").starts_with("__schedule")));
            if spinner_filled {
                assert_eq!(s["stack"]["task"].as_str(), Some(spinner.as_str()), "{s}");
            }
            assert!(stdout.contains("kernel stack of "), "{stdout}");
        }
        // A stall of the host came first: no task switched inside it.
        None => {
            assert!(!spinner_filled, "the spinner's stack is missing: {s}");
            assert!(stdout.contains("no kernel stack: "), "{stdout}");
        }
    }
    let text = report(&dat);
    assert!(
        text.contains(&format!(":{tid} [")),
        "the watched thread's switches are in the raw window"
    );
    let perfetto = read_json(&pf);
    assert!(perfetto.is_object() || perfetto.is_array());
    assert!(stdout.contains("stopped at +"), "{stdout}");
}

/// `watch --on-threshold` hands the command the wake-up that crossed
/// `--stop-at`, in the environment `timer`'s gets, plus the late thread:
/// the same figures the record keeps.
#[test]
fn watch_on_threshold_hands_the_event_to_a_command() {
    if let Some(r) = live_skip() {
        eprintln!("skipped: {r}");
        return;
    }
    let _live = live();
    let dir = tempfile::tempdir().unwrap();
    let (env, j) = (dir.path().join("env.txt"), dir.path().join("w.json"));
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (tid, h) = periodic(1, Arc::clone(&stop));
    let (out, _) = run_blocked(
        punctual()
            .args(["watch", "--pid", &std::process::id().to_string()])
            .args(["--tid", &tid.to_string(), "--duration", "20s"])
            .args(["--stop-at", "3ms", "--on-threshold"])
            .arg(format!(
                "echo $PUNCTUAL_KIND $PUNCTUAL_TID $PUNCTUAL_CPU $PUNCTUAL_VALUE_NS $PUNCTUAL_AT_NS $PUNCTUAL_MONO_NS $PUNCTUAL_THRESHOLD_NS > {}",
                env.display()
            ))
            .arg("--json")
            .arg(&j)
            .env("PUNCTUAL_RUN_DIR", dir.path().join("run")),
        1,
        None,
        Duration::from_millis(5),
    );
    stop.store(true, Ordering::Relaxed);
    h.join().unwrap();
    assert!(out.status.success(), "{out:?}");
    let v = read_json(&j);
    let s = &v["extra"]["watch"]["stopped_at"];
    assert!(s.is_object(), "the run stopped at its threshold: {v}");
    let at = s["at_ns"].as_u64().unwrap();
    let mono = v["started_mono_ns"].as_u64().unwrap() + at;
    assert_eq!(
        std::fs::read_to_string(&env).unwrap(),
        format!(
            "watch {tid} {} {} {at} {mono} 3000000\n",
            s["cpu"], s["latency_ns"]
        )
    );
    // Below the threshold nothing runs.
    let env2 = dir.path().join("env2.txt");
    let (tid, h) = {
        stop.store(false, Ordering::Relaxed);
        periodic(1, Arc::clone(&stop))
    };
    let out = punctual()
        .args(["watch", "--pid", &std::process::id().to_string()])
        .args(["--tid", &tid.to_string(), "--duration", "1s"])
        .args(["--stop-at", "10s", "--on-threshold"])
        .arg(format!("touch {}", env2.display()))
        .env("PUNCTUAL_RUN_DIR", dir.path().join("run"))
        .output()
        .unwrap();
    stop.store(true, Ordering::Relaxed);
    h.join().unwrap();
    assert!(out.status.success(), "{out:?}");
    assert!(!env2.exists(), "no event, no command");
}
