//! Each kind runs briefly in-process and must report figures that mean
//! something (bounded below by what even this noisy 2-vCPU guest does, and
//! consistent with each other). The child-process path, the kill test and
//! the CLI are tested in `crates/cli/tests/it/load.rs`.

use std::time::Instant;

use super::*;

/// The figures are only meaningful if tests do not load each other.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

fn run(spec: &str, ms: u64) -> LoadsOutcome {
    let _g = serial();
    let specs = LoadSpec::parse_list(spec).unwrap();
    let t = Instant::now();
    let e = Engine::start(&specs, Nanos::from_ms(ms)).unwrap_or_else(|e| panic!("{spec}: {e}"));
    while Instant::now() < e.deadline() {
        std::thread::sleep(Duration::from_millis(10));
    }
    let out = e.finish();
    // Stops by itself: set-up plus duration plus a little.
    assert!(
        t.elapsed() < Duration::from_millis(ms + 3000),
        "{spec} took {:?}",
        t.elapsed()
    );
    assert_eq!(out.reports.len(), specs.len());
    out
}

fn get(o: &LoadsOutcome, i: usize, k: &str) -> f64 {
    *o.reports[i]
        .achieved
        .get(k)
        .unwrap_or_else(|| panic!("no {k} in {:?}", o.reports[i].achieved))
}

#[test]
fn net_tcp_streams_over_loopback() {
    let o = run("net:msg=64K", 400);
    let gbit = get(&o, 0, "throughput_gbit_s");
    let msgs = get(&o, 0, "messages_per_s");
    let dur = get(&o, 0, "duration_s");
    // Loopback TCP moves gigabits even on a small VM.
    assert!(gbit > 0.1, "{o:?}");
    // Messages and bytes agree (within the last partial message).
    let implied = msgs * 65536.0 * 8.0 / 1e9;
    assert!((implied - gbit).abs() / gbit < 0.05, "{implied} vs {gbit}");
    assert!((0.3..2.0).contains(&dur), "{dur}");
    // A fraction of one CPU: moving data costs something, and one thread
    // cannot use more than a CPU (how much it gets depends on the machine).
    let cpu = get(&o, 0, "sender_cpu_fraction");
    assert!(cpu > 0.0 && cpu <= 1.05, "{cpu}");
    assert_eq!(o.reports[0].kind, "net");
}

#[test]
fn net_udp_counts_received_and_lost() {
    let o = run("net:udp,rate=20000,pkt=512", 500);
    let sent = get(&o, 0, "sent_packets");
    let got = get(&o, 0, "received_packets");
    let lost = get(&o, 0, "lost_packets");
    assert_eq!(sent, got + lost);
    // Paced at the asked rate, within scheduling slop.
    let pps = get(&o, 0, "sent_packets_per_s");
    assert!((15_000.0..25_000.0).contains(&pps), "{pps}");
    assert!(get(&o, 0, "rcvbuf_bytes") > 0.0);
}

#[test]
fn net_udp_small_buffer_slow_drain_loses_packets() {
    // Basham's VMBus note: too few buffers for the rate while the consumer sleeps
    // 20 ms loses packets; a big buffer does not.
    let small = run("net:udp,rate=50000,pkt=256,rcvbuf=4K,drain=20ms", 500);
    assert!(get(&small, 0, "lost_packets") > 0.0, "{small:?}");
    let big = run("net:udp,rate=20000,pkt=256,rcvbuf=8M,drain=20ms", 500);
    assert!(
        get(&big, 0, "loss_fraction") < get(&small, 0, "loss_fraction"),
        "{big:?} vs {small:?}"
    );
}

#[test]
fn disk_reads_a_file_that_vanishes() {
    let dir = tempfile::tempdir_in("/var/tmp").unwrap();
    let spec = format!("disk:dir={},size=8M,bs=64K", dir.path().display());
    let o = run(&spec, 400);
    let mb = get(&o, 0, "mb_per_s");
    let iops = get(&o, 0, "iops");
    assert!(mb > 1.0, "{o:?}");
    // MB/s and IOPS are the same reads counted two ways.
    assert!((iops * 65536.0 / 1e6 - mb).abs() / mb < 0.01, "{iops} {mb}");
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

#[test]
fn disk_direct_random_with_queue_depth() {
    let dir = tempfile::tempdir_in("/var/tmp").unwrap();
    let spec = format!(
        "disk:dir={},size=8M,bs=4K,direct,rand,qd=2",
        dir.path().display()
    );
    let o = run(&spec, 400);
    assert!(get(&o, 0, "iops") > 50.0, "{o:?}");
    assert_eq!(get(&o, 0, "queue_depth"), 2.0);
    assert!(get(&o, 0, "read_latency_mean_us") > 0.0);
}

#[test]
fn disk_refuses_a_missing_dir_as_usage() {
    let specs = LoadSpec::parse_list("disk:dir=/nonexistent/punctual").unwrap();
    let e = Engine::start(&specs, Nanos::from_ms(10)).err().unwrap();
    assert!(e.is_usage(), "{e}");
    assert!(e.to_string().contains("/nonexistent/punctual"), "{e}");
}

#[test]
fn cpu_threads_burn_what_they_are_given() {
    // Side by side, so that whatever else this shared machine runs weighs
    // on both: the always-busy thread must out-use the 30%-duty one, which
    // sleeps 70% of each period and so cannot use much more than 30%.
    let o = run("cpu:threads=1+cpu:threads=1,duty=30%,period=5ms", 400);
    let full = get(&o, 0, "per_thread_cpu_fraction");
    let duty = get(&o, 1, "per_thread_cpu_fraction");
    assert!(full > 0.05 && full <= 1.05, "{full}");
    assert!(duty > 0.01 && duty < 0.4, "{duty}");
    assert!(duty < full, "{duty} vs {full}");
}

#[test]
fn cpu_fifo_policy_applies_or_says_why() {
    let o = run("cpu:threads=1,policy=fifo,priority=10,duty=20%", 200);
    let refused = o.notes.iter().any(|n| n.contains("refused"));
    // As root this is granted; otherwise a note says so (never silent).
    if punctual_live::rt::fifo_permitted().is_ok() {
        assert!(!refused, "{o:?}");
    } else {
        assert!(refused, "{o:?}");
    }
}

#[test]
fn mem_copies_at_memory_speed() {
    let o = run("mem:size=32M", 300);
    let gb = get(&o, 0, "copy_gb_per_s");
    assert!(gb > 0.2, "{o:?}");
    assert!((get(&o, 0, "traffic_gb_per_s") - 2.0 * gb).abs() < 1e-9);
}

#[test]
fn timer_threads_wake_often() {
    let o = run("timer:threads=4,interval=200us", 300);
    let w = get(&o, 0, "wakeups_per_s");
    // At most 4 / 200 µs = 20 000/s; at least a few hundred per thread.
    assert!(w > 1000.0 && w < 20_500.0, "{w}");
}

#[test]
fn cmd_runs_and_is_stopped() {
    let o = run("cmd:sleep,30", 300);
    assert_eq!(get(&o, 0, "exited_early"), 0.0);
    // `sleep` dies of SIGTERM (15) without needing SIGKILL.
    assert_eq!(get(&o, 0, "exit_signal"), 15.0);
    assert_eq!(get(&o, 0, "needed_sigkill"), 0.0);
    let pid = get(&o, 0, "pid") as u32;
    assert!(
        !std::path::Path::new(&format!("/proc/{pid}")).exists() || {
            // Reaped: a recycled pid would not be our sleep.
            let c = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
            c.trim() != "sleep"
        }
    );
}

#[test]
fn cmd_missing_program_is_usage() {
    let specs = LoadSpec::parse_list("cmd:definitely-not-a-program-xyz").unwrap();
    let e = Engine::start(&specs, Nanos::from_ms(10)).err().unwrap();
    assert!(e.is_usage());
}

#[test]
fn several_loads_run_together() {
    let o = run("timer:threads=2+cpu:duty=20%", 300);
    assert_eq!(o.reports[0].kind, "timer");
    assert_eq!(o.reports[1].kind, "cpu");
    assert!(get(&o, 0, "wakeups_per_s") > 0.0);
    assert!(get(&o, 1, "cpu_s") > 0.0);
}

#[test]
fn stop_flag_ends_loads_early() {
    let _g = serial();
    let specs = LoadSpec::parse_list("cpu+net").unwrap();
    let e = Engine::start(&specs, Nanos::from_secs(30)).unwrap();
    std::thread::sleep(Duration::from_millis(200));
    let t = Instant::now();
    let out = e.finish();
    assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
    assert!(get(&out, 0, "duration_s") < 2.0);
}

#[test]
fn mem_refuses_more_than_half_the_memory() {
    let specs = LoadSpec::parse_list("mem:size=64T").unwrap();
    let e = Engine::start(&specs, Nanos::from_ms(10)).err().unwrap();
    assert!(e.is_usage() && e.to_string().contains("available"), "{e}");
}
