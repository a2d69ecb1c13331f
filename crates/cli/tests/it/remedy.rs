//! Fixes applied by a process that is then SIGKILLed are put back by the
//! next verb's start (the stale-journal replay), and the machine's state —
//! interrupt affinities, sysctls, cpusets, thread affinities and policies,
//! the PM QoS bound — is as before. Root only.

use std::io::{BufRead, BufReader};
use std::process::{Command as Std, Stdio};
use std::time::Duration;

use assert_cmd::Command;
use predicates::prelude::*;
use punctual_live::rt;
use punctual_remedy::state::State;
use punctual_remedy::{apply, Remedy};

const CHILD: &str = "PUNCTUAL_TEST_REMEDY_CHILD";
const TARGET: &str = "PUNCTUAL_TEST_REMEDY_TARGET";

fn online() -> Vec<u32> {
    punctual_live::sysinfo::parse_cpu_list(
        &std::fs::read_to_string("/sys/devices/system/cpu/online").unwrap(),
    )
    .unwrap()
}

/// A routable interrupt: its affinity file is writable.
fn routable_irq() -> Option<u32> {
    use std::os::unix::fs::PermissionsExt;
    let mut irqs: Vec<u32> = std::fs::read_dir("/proc/irq")
        .ok()?
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse().ok())
        .collect();
    irqs.sort_unstable();
    irqs.into_iter().find(|i| {
        std::fs::metadata(format!("/proc/irq/{i}/smp_affinity_list"))
            .is_ok_and(|m| m.permissions().mode() & 0o200 != 0)
    })
}

/// The child's side: applies every fix this machine takes, says "ready",
/// and waits to be killed.
fn child() {
    let target: i32 = std::env::var(TARGET).unwrap().parse().unwrap();
    let cpus = online();
    let last = *cpus.last().unwrap();
    let mut fixes = vec![
        Remedy::RtRuntime { value: -1 },
        Remedy::DmaLatency { us: 0 },
        Remedy::ThreadAffinity {
            tid: Some(target),
            comm: None,
            to_cpus: vec![cpus[0]],
        },
        Remedy::Priority {
            tid: target,
            policy: "fifo".into(),
            prio: 10,
        },
        Remedy::Preempt {
            mode: "full".into(),
        },
        Remedy::IsolateCpu { cpu: last },
    ];
    if let Some(irq) = routable_irq() {
        fixes.push(Remedy::IrqAffinity {
            irq,
            to_cpus: vec![last],
        });
    }
    let mut j = punctual_remedy::journal().unwrap();
    let mut held = Vec::new();
    for f in &fixes {
        match apply(f, &mut j) {
            Ok(a) => {
                println!("applied: {}", a.changes.join("; "));
                held.push(a);
            }
            Err(e) => println!("not applied: {}: {e}", f.describe()),
        }
    }
    println!("ready");
    std::thread::sleep(Duration::from_secs(120));
    drop(held);
}

#[test]
fn a_killed_runs_fixes_are_put_back_by_the_next_verb() {
    let _live = crate::common::live();
    if std::env::var_os(CHILD).is_some() {
        child();
        return;
    }
    // SAFETY: plain syscall.
    if unsafe { libc::geteuid() } != 0 {
        println!("skipped: applying fixes needs root");
        return;
    }
    if online().len() < 2 {
        println!("skipped: needs two CPUs");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let run_dir = dir.path().join("run");
    let mut target = Std::new("sleep").arg("300").spawn().unwrap();
    let tid = target.id() as i32;
    let before = State::settled(Duration::from_millis(50));
    let mut kid = Std::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "remedy::a_killed_runs_fixes_are_put_back_by_the_next_verb",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD, "1")
        .env(TARGET, tid.to_string())
        .env("PUNCTUAL_RUN_DIR", &run_dir)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut said = Vec::new();
    for line in BufReader::new(kid.stdout.take().unwrap()).lines() {
        let line = line.unwrap();
        if line == "ready" {
            break;
        }
        said.push(line);
    }
    for l in &said {
        println!("child: {l}");
    }
    let applied: Vec<_> = said.iter().filter(|l| l.starts_with("applied")).collect();
    assert!(applied.len() >= 4, "{said:#?}");
    // The fixes hold while their owner lives.
    assert_eq!(
        std::fs::read_to_string("/proc/sys/kernel/sched_rt_runtime_us")
            .unwrap()
            .trim(),
        "-1"
    );
    assert_eq!(rt::sched_getattr(tid).unwrap().sched_priority, 10);
    assert!(
        !State::read().changes(&before).is_empty(),
        "nothing was changed"
    );
    // SAFETY: plain syscall on our own child.
    unsafe { libc::kill(kid.id() as i32, libc::SIGKILL) };
    kid.wait().unwrap();
    let after_kill = State::read();
    // The kernel drops the C-state request with its owner's file; the
    // rest stays until the replay.
    assert_eq!(after_kill.dma_latency_us, before.dma_latency_us);
    assert!(!before.changes(&after_kill).is_empty());
    Command::cargo_bin("punctual")
        .unwrap()
        .env("PUNCTUAL_RUN_DIR", &run_dir)
        .arg("sysinfo")
        .assert()
        .success()
        .stderr(predicate::str::contains(
            "punctual: put back what a killed run left: ",
        ))
        .stderr(predicate::str::contains("could not be put back").not());
    let left = before.changes(&State::read());
    assert!(
        left.is_empty(),
        "left changed after the replay: {left:#?}\n{said:#?}"
    );
    let journals: Vec<_> = std::fs::read_dir(&run_dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert!(journals.is_empty(), "{journals:?}");
    let _ = target.kill();
    let _ = target.wait();
}
