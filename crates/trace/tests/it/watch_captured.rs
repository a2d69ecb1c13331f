//! `punctual watch`'s pipeline on real pages captured on this project's
//! test VM (`tests/data/watch/capture.sh`: cyclictest's 1 ms FIFO 95
//! thread, traced from outside), without root: binary pages → events →
//! the watched thread's log → activations → the record. Every wake-up
//! latency must match the one read off the kernel's own text rendering of
//! the same buffer (wake-up to the next switch-in or return of a system
//! call of that thread, to the text's microsecond), and the record must
//! carry cyclictest's period.

use std::collections::BTreeMap;
use std::path::Path;

use punctual_record::{Metric, Platform, Record, Source};
use punctual_trace::attribute::{Attributor, Symbols};
use punctual_trace::recorder::Trace;
use punctual_trace::ring::parse_pages;
use punctual_trace::watch::{activations, WatchLog, WatchSpec};

use crate::common::captured_decoder;

const DATA: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/watch");

const EVENTS: &[&str] = &[
    "sched/sched_switch",
    "sched/sched_waking",
    "raw_syscalls/sys_exit",
    "irq_vectors/local_timer_entry",
    "irq_vectors/local_timer_exit",
];

fn tid() -> i32 {
    std::fs::read_to_string(Path::new(DATA).join("tid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

/// The captured pages fed to the attribution and a watch log, as the
/// recorder's reader does.
fn replay() -> Trace {
    let (hp, he, dec) = captured_decoder(&Path::new(DATA).join("events"), EVENTS);
    let mut a = Attributor::new(1_000_000);
    let mut log = WatchLog::new(&[tid()], false, None);
    let (mut first, mut last) = (u64::MAX, 0);
    for cpu in 0..2u32 {
        let buf = std::fs::read(Path::new(DATA).join(format!("cpu{cpu}.raw"))).unwrap();
        for page in parse_pages(&buf, &hp, &he) {
            for ev in page.unwrap().events {
                let d = dec.decode(ev.ts, ev.data).expect("every event decodes");
                first = first.min(d.ts);
                last = last.max(d.ts);
                log.feed(cpu, &d);
                a.feed(cpu, &d);
            }
        }
    }
    a.finish(last);
    Trace {
        attributor: a,
        symbols: Symbols::default(),
        cpus: vec![0, 1],
        lost: BTreeMap::new(),
        started_ns: first,
        stopped_ns: last,
        kernel: BTreeMap::new(),
        reader_cpu_ns: 0,
        pages: 0,
        events: 0,
        malformed: 0,
        enabled: EVENTS.iter().map(|s| s.to_string()).collect(),
        missing: Vec::new(),
        buffer_kb: 512,
        cleanup_problem: None,
        own_threads: BTreeMap::new(),
        rt_runtime_us: None,
        rt_period_us: None,
        watch: Some(log),
        raw: None,
    }
}

/// (wake-up, run) in µs from the text: each `sched_waking` of the thread
/// and the first line after it where the thread runs (switched in, or
/// its own system call returning).
fn text_latencies(tid: i32) -> Vec<(u64, u64)> {
    let text = std::fs::read_to_string(Path::new(DATA).join("trace.txt")).unwrap();
    let us = |l: &str| -> u64 {
        let open = l.find('[').unwrap();
        let ts = l[open + 5..].split_whitespace().nth(1).unwrap();
        let (s, u) = ts.trim_end_matches(':').split_once('.').unwrap();
        s.parse::<u64>().unwrap() * 1_000_000 + u.parse::<u64>().unwrap()
    };
    let me = format!("-{tid} ");
    let mut out = Vec::new();
    let mut woke: Option<u64> = None;
    for l in text.lines().filter(|l| !l.starts_with('#')) {
        if l.contains("sched_waking:") && l.contains(&format!(" pid={tid} ")) {
            woke.get_or_insert(us(l));
        } else if let Some(w) = woke {
            let runs = (l.contains("sched_switch:") && l.contains(&format!("next_pid={tid} ")))
                || (l.contains("sys_exit:") && l.contains(&me));
            if runs {
                out.push((w, us(l)));
                woke = None;
            }
        }
    }
    out
}

#[test]
fn captured_wakeups_match_the_kernels_text_and_make_a_record() {
    let tid = tid();
    let trace = replay();
    let log = trace.watch.as_ref().unwrap();
    let mut evs = log.events.clone();
    evs.sort_by_key(|e| e.ts);
    let acts = activations(&evs);
    let ours: Vec<(u64, u64)> = acts
        .iter()
        .filter_map(|a| Some((a.wake?, a.run?.0)))
        .collect();
    let text = text_latencies(tid);
    assert!(
        text.len() >= 40,
        "the capture holds ~60 wake-ups: {}",
        text.len()
    );
    assert_eq!(
        ours.len(),
        text.len(),
        "one latency per wake-up the text shows"
    );
    for ((w, r), (tw, tr)) in ours.iter().zip(&text) {
        // The text rounds each time stamp to the nearest microsecond.
        assert!(
            (w + 500) / 1000 == *tw && (r + 500) / 1000 == *tr,
            "{w}/{r} against {tw}/{tr} us"
        );
    }

    let mut rec = Record::new(Source::Measured, "watch", Platform::default());
    let spec = WatchSpec {
        pid: tid - 2,
        command: "cyclictest".into(),
        threads: vec![(tid, "cyclictest".into())],
        period: None,
        max_spikes: 5,
        origin: trace.started_ns,
        stop_at: None,
    };
    let sum = trace.fill_watch(&mut rec, &spec);
    let t = &sum.threads[0];
    assert_eq!(t.wakeups, text.len() as u64);
    // cyclictest -i1000: its releases are 1 ms apart on CLOCK_MONOTONIC.
    let p = t.period.as_ref().expect("a 1 ms thread is periodic");
    assert!(p.period_ns.0.abs_diff(1_000_000) < 2_000, "{}", p.period_ns);
    let s = rec.series_named(&t.series).unwrap();
    assert_eq!((s.metric, s.count), (Metric::Latency, t.wakeups));
    assert_eq!(s.sample_period_ns, Some(p.period_ns));
    let slowest = text.iter().map(|(w, r)| r - w).max().unwrap();
    assert!(
        s.max.0.abs_diff(slowest * 1000) <= 1_000,
        "{} against {slowest} us",
        s.max
    );
    // The slowest wake-ups are broken down: each window is filled by what
    // the CPU did (the timer's interrupt at least, which woke it).
    assert_eq!(rec.spikes.len(), 5);
    for sp in &rec.spikes {
        let named: u64 = sp.causes.iter().map(|c| c.total_ns.0).sum();
        assert_eq!(named, sp.value_ns.0, "{sp:?}");
    }
    assert!(!t.offenders.is_empty());
    // cyclictest's timer fires on its own CPU: the rest of that local
    // timer interrupt, after sched_waking, is the wake-up's own path,
    // named as such and not as a source that delayed it.
    assert!(
        rec.spikes.iter().all(|sp| sp
            .causes
            .iter()
            .any(|c| c.kind == "wakeup" && c.name == "wake-up path (local_timer)")),
        "{:?}",
        rec.spikes
    );
    assert!(rec
        .spikes
        .iter()
        .all(|sp| !sp.causes.iter().any(|c| c.name == "local_timer")));
    assert!(rec.watch().is_some());
    assert_eq!(
        rec.stolen[0].task.as_deref(),
        Some(format!("cyclictest-{tid}").as_str())
    );
}
