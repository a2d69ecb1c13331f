//! Each fix applied to this machine for real and reverted, with the
//! machine's state (interrupt affinities, sysctls, cpusets, thread
//! affinities and policies) compared before and after. Root only: each
//! test says why it skips otherwise, or when this kernel lacks the knob.
//! The tests change machine-wide settings, so they run one at a time.

use std::fs;
use std::path::Path;
use std::sync::mpsc;
use std::sync::Mutex;
use std::time::Duration;

use punctual_live::restore::Restore;
use punctual_live::rt;
use punctual_live::sysinfo::parse_cpu_list;
use punctual_remedy::state::State;
use punctual_remedy::{apply, check, revert, Remedy, RemedyError, RT_RUNTIME};

static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner())
}

fn root(test: &str) -> bool {
    // SAFETY: plain syscall.
    let r = unsafe { libc::geteuid() } == 0;
    if !r {
        println!("{test}: skipped, applying fixes needs root");
    }
    r
}

fn online() -> Vec<u32> {
    parse_cpu_list(&fs::read_to_string("/sys/devices/system/cpu/online").unwrap()).unwrap()
}

fn read(p: impl AsRef<Path>) -> Option<String> {
    fs::read_to_string(p).ok().map(|s| s.trim().to_string())
}

fn before() -> State {
    State::settled(Duration::from_millis(50))
}

fn assert_restored(before: &State, test: &str) {
    let left = before.changes(&State::read());
    assert!(left.is_empty(), "{test}: left changed: {left:?}");
}

fn journal() -> (tempfile::TempDir, Restore) {
    let d = tempfile::tempdir().unwrap();
    let j = Restore::create(d.path()).unwrap();
    (d, j)
}

/// A thread named `name` that sleeps until the sender is dropped; its tid.
fn named_thread(name: &'static str) -> (i32, mpsc::Sender<()>, std::thread::JoinHandle<()>) {
    let (tx, rx) = mpsc::channel();
    let (stop_tx, stop_rx) = mpsc::channel::<()>();
    let h = std::thread::spawn(move || {
        rt::set_thread_name(name);
        tx.send(rt::gettid()).unwrap();
        let _ = stop_rx.recv();
    });
    (rx.recv().unwrap(), stop_tx, h)
}

#[test]
fn irq_affinity_is_applied_and_reverted() {
    let _s = serial();
    if !root("irq_affinity") {
        return;
    }
    let cpus = online();
    if cpus.len() < 2 {
        println!("irq_affinity: skipped, needs two CPUs");
        return;
    }
    let b = before();
    // A routable interrupt no live run holds.
    let Some((&irq, old)) = b.irqs.iter().find(|(irq, _)| {
        use std::os::unix::fs::PermissionsExt;
        fs::metadata(format!("/proc/irq/{irq}/smp_affinity_list"))
            .is_ok_and(|m| m.permissions().mode() & 0o200 != 0)
    }) else {
        println!("irq_affinity: skipped, no interrupt here can be routed");
        return;
    };
    let to = *cpus.last().unwrap();
    let (_d, mut j) = journal();
    match apply(
        &Remedy::IrqAffinity {
            irq,
            to_cpus: vec![to],
        },
        &mut j,
    ) {
        Ok(a) => {
            assert_eq!(
                read(format!("/proc/irq/{irq}/smp_affinity_list")).unwrap(),
                to.to_string()
            );
            assert_eq!(
                a.changes,
                vec![format!("IRQ {irq} routed to CPU {to} (was {old})")]
            );
            assert!(revert(a, &mut j).is_empty());
        }
        // Some controllers cannot deliver a given interrupt to a given
        // CPU; that is a refusal with the reason, never a half change.
        Err(RemedyError::Refused(m)) => println!("irq_affinity: refused here: {m}"),
        Err(e) => panic!("{e}"),
    }
    assert_restored(&b, "irq_affinity");
}

#[test]
fn thread_affinity_by_comm_and_by_tid_is_applied_and_reverted() {
    let _s = serial();
    if !root("thread_affinity") {
        return;
    }
    let cpus = online();
    if cpus.len() < 2 {
        println!("thread_affinity: skipped, needs two CPUs");
        return;
    }
    let (t1, s1, h1) = named_thread("remedy-noisy");
    let (t2, s2, h2) = named_thread("remedy-noisy");
    let (t3, s3, h3) = named_thread("remedy-other");
    let b = before();
    let to = vec![cpus[0]];
    let (_d, mut j) = journal();
    let a = apply(
        &Remedy::ThreadAffinity {
            tid: None,
            comm: Some("remedy-noisy".into()),
            to_cpus: to.clone(),
        },
        &mut j,
    )
    .unwrap();
    assert_eq!(a.changes.len(), 2, "{:?}", a.changes);
    let b2 = apply(
        &Remedy::ThreadAffinity {
            tid: Some(t3),
            comm: None,
            to_cpus: to.clone(),
        },
        &mut j,
    )
    .unwrap();
    for t in [t1, t2, t3] {
        assert_eq!(rt::thread_affinity(t).unwrap(), to);
    }
    drop(b2);
    assert!(revert(a, &mut j).is_empty());
    assert_restored(&b, "thread_affinity");
    for t in [t1, t2, t3] {
        assert_eq!(rt::thread_affinity(t).unwrap(), cpus);
    }
    drop((s1, s2, s3));
    for h in [h1, h2, h3] {
        h.join().unwrap();
    }
}

#[test]
fn rt_runtime_is_applied_and_reverted_by_drop() {
    let _s = serial();
    if !root("rt_runtime") {
        return;
    }
    if read(RT_RUNTIME).is_none() {
        println!("rt_runtime: skipped, this kernel has no {RT_RUNTIME}");
        return;
    }
    let b = before();
    let old = read(RT_RUNTIME).unwrap();
    let value = if old == "-1" { 900_000 } else { -1 };
    check(&Remedy::RtRuntime { value }).unwrap();
    {
        let (_d, mut j) = journal();
        let a = apply(&Remedy::RtRuntime { value }, &mut j).unwrap();
        assert_eq!(read(RT_RUNTIME).unwrap(), value.to_string());
        assert_eq!(
            a.changes,
            vec![format!("sched_rt_runtime_us set to {value} (was {old})")]
        );
        // Dropped without revert: the journal undoes it.
    }
    assert_restored(&b, "rt_runtime");
}

/// The kernel's current PM QoS bound, which /dev/cpu_dma_latency reads as
/// a binary 32-bit value.
fn dma_bound() -> i32 {
    let b = fs::read(punctual_remedy::DMA_LATENCY).unwrap();
    i32::from_ne_bytes(b[..4].try_into().unwrap())
}

#[test]
fn dma_latency_is_held_while_the_lease_is_open() {
    let _s = serial();
    if !root("dma_latency") {
        return;
    }
    if !Path::new(punctual_remedy::DMA_LATENCY).exists() {
        println!("dma_latency: skipped, this kernel has no PM QoS file");
        return;
    }
    let b = before();
    let was = dma_bound();
    let (_d, mut j) = journal();
    let a = apply(&Remedy::DmaLatency { us: 0 }, &mut j).unwrap();
    assert_eq!(dma_bound(), 0);
    assert!(revert(a, &mut j).is_empty());
    assert_eq!(dma_bound(), was);
    assert_restored(&b, "dma_latency");
}

#[test]
fn preempt_is_switched_and_back_or_refused_with_the_reason() {
    let _s = serial();
    if !root("preempt") {
        return;
    }
    let b = before();
    let (_d, mut j) = journal();
    // Asking for the model the kernel already runs still goes through the
    // journal; asking for "full" where it cannot be switched is refused.
    let r = Remedy::Preempt {
        mode: "full".into(),
    };
    // check() reaches the knob as apply() does, and changes nothing.
    let checked = check(&r);
    assert_restored(&b, "preempt check");
    match apply(&r, &mut j) {
        Ok(a) => {
            assert_eq!(checked, Ok(()));
            assert!(a.changes[0].starts_with("preemption model set to full"));
            assert!(revert(a, &mut j).is_empty());
        }
        Err(RemedyError::Refused(m)) => {
            assert_eq!(checked, Err(RemedyError::Refused(m.clone())));
            println!("preempt: refused here: {m}");
            assert!(m.contains("preempt"), "{m}");
            assert!(j.actions().is_empty(), "a refusal leaves nothing journaled");
        }
        Err(e) => panic!("{e}"),
    }
    assert_restored(&b, "preempt");
    // The private debugfs mount, if one was made, is gone.
    let mounts = fs::read_to_string("/proc/self/mounts").unwrap();
    assert!(
        !mounts.contains(&format!("debugfs-{}", std::process::id())),
        "{mounts}"
    );
}

#[test]
fn priority_is_applied_and_reverted() {
    let _s = serial();
    if !root("priority") {
        return;
    }
    let (tid, stop, h) = named_thread("remedy-prio");
    let b = before();
    let (_d, mut j) = journal();
    let a = apply(
        &Remedy::Priority {
            tid,
            policy: "fifo".into(),
            prio: 10,
        },
        &mut j,
    )
    .unwrap();
    let now = rt::sched_getattr(tid).unwrap();
    assert_eq!(
        (now.sched_policy, now.sched_priority),
        (libc::SCHED_FIFO as u32, 10)
    );
    assert!(revert(a, &mut j).is_empty());
    assert_restored(&b, "priority");
    assert_eq!(
        rt::sched_getattr(tid).unwrap().sched_policy,
        libc::SCHED_OTHER as u32
    );
    drop(stop);
    h.join().unwrap();
}

#[test]
fn isolate_cpu_moves_threads_off_and_everything_back() {
    let _s = serial();
    if !root("isolate_cpu") {
        return;
    }
    let cpus = online();
    if cpus.len() < 2 {
        println!("isolate_cpu: skipped, needs two CPUs");
        return;
    }
    if punctual_reserve::partition::find_cpuset_fs().is_none() {
        println!("isolate_cpu: skipped, no cpuset controller here");
        return;
    }
    let cpu = *cpus.last().unwrap();
    // A process of its own, as any other on the machine.
    let mut child = std::process::Command::new("sleep")
        .arg("30")
        .spawn()
        .unwrap();
    let pid = child.id() as i32;
    let b = before();
    let (_d, mut j) = journal();
    check(&Remedy::IsolateCpu { cpu }).unwrap();
    let res = apply(&Remedy::IsolateCpu { cpu }, &mut j);
    match res {
        Ok(a) => {
            assert!(a.partition().is_some());
            let now = rt::thread_affinity(pid).unwrap();
            assert!(
                !now.contains(&cpu),
                "the child still may run on CPU {cpu}: {now:?}"
            );
            // This process stays where it was, so its probe can pin there.
            rt::set_thread_affinity(0, &[cpu]).unwrap();
            rt::set_thread_affinity(0, &cpus).unwrap();
            assert!(revert(a, &mut j).is_empty());
        }
        // Another run holding the CPU exclusively is a refusal, not a failure.
        Err(RemedyError::Refused(m)) => println!("isolate_cpu: refused here: {m}"),
        Err(e) => panic!("{e}"),
    }
    assert_restored(&b, "isolate_cpu");
    assert_eq!(rt::thread_affinity(pid).unwrap(), b.threads[&pid].0);
    let _ = child.kill();
    let _ = child.wait();
}
