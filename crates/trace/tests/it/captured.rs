//! The binary ring parser against real pages captured on this project's
//! test VM (`tests/data/capture.sh`): every record of the binary
//! `trace_pipe_raw` pages must match, in order, the kernel's own text
//! rendering of the same buffer (`trace.txt`) — timestamp (to the text's
//! microsecond), CPU, event and its key fields.

use std::path::Path;

use punctual_trace::attribute::Attributor;
use punctual_trace::event::{Decoder, Event};
use punctual_trace::format::{HeaderEvent, HeaderPage};
use punctual_trace::ring::parse_pages;

use crate::common::captured_decoder;

const DATA: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data");

const EVENTS: &[&str] = &[
    "irq/irq_handler_entry",
    "irq/irq_handler_exit",
    "irq/softirq_entry",
    "irq/softirq_exit",
    "irq_vectors/local_timer_entry",
    "irq_vectors/local_timer_exit",
    "irq_vectors/reschedule_entry",
    "irq_vectors/reschedule_exit",
    "irq_vectors/call_function_single_entry",
    "irq_vectors/call_function_single_exit",
    "sched/sched_switch",
    "sched/sched_wakeup",
    "workqueue/workqueue_execute_start",
    "workqueue/workqueue_execute_end",
    "nmi/nmi_handler",
];

fn setup() -> (HeaderPage, HeaderEvent, Decoder) {
    captured_decoder(&Path::new(DATA).join("events"), EVENTS)
}

/// (cpu, µs timestamp, event name, key field) as the text shows them.
fn text_lines() -> Vec<(u32, u64, String, String)> {
    let text = std::fs::read_to_string(Path::new(DATA).join("trace.txt")).unwrap();
    let mut out = Vec::new();
    for l in text.lines().filter(|l| !l.starts_with('#')) {
        let open = l.find('[').unwrap();
        let cpu: u32 = l[open + 1..open + 4].parse().unwrap();
        let rest: Vec<&str> = l[open + 5..].split_whitespace().collect();
        // rest: flags, "secs.usecs:", "event:", fields…
        let ts = rest[1].trim_end_matches(':');
        let (s, us) = ts.split_once('.').unwrap();
        let ts_us = s.parse::<u64>().unwrap() * 1_000_000 + us.parse::<u64>().unwrap();
        let name = rest[2].trim_end_matches(':').to_string();
        let field = |k: &str| {
            rest.iter()
                .find_map(|f| f.strip_prefix(k))
                .unwrap_or("")
                .to_string()
        };
        let key = match name.as_str() {
            "irq_handler_entry" => field("name="),
            "irq_handler_exit" => field("irq="),
            "softirq_entry" | "softirq_exit" => field("vec="),
            "sched_switch" => format!(
                "{}>{} {}",
                field("prev_pid="),
                field("next_pid="),
                field("prev_state=")
            ),
            "sched_wakeup" => format!("{}/{}", field("comm="), field("pid=")),
            _ => String::new(),
        };
        out.push((cpu, ts_us, name, key));
    }
    out
}

/// The kernel's rendering of `prev_state` (its print fmt, as the format
/// file gives it).
fn state_letters(s: i64) -> String {
    let letters = [
        (0x1, "S"),
        (0x2, "D"),
        (0x4, "T"),
        (0x8, "t"),
        (0x10, "X"),
        (0x20, "Z"),
        (0x40, "P"),
        (0x80, "I"),
    ];
    let mut v: Vec<&str> = letters
        .iter()
        .filter(|(b, _)| s & b != 0)
        .map(|(_, l)| *l)
        .collect();
    if v.is_empty() {
        assert!(punctual_trace::event::left_runnable(s));
        v.push("R");
    } else {
        assert!(!punctual_trace::event::left_runnable(s));
    }
    let mut out = v.join("|");
    if s & 0x100 != 0 {
        out.push('+');
    }
    out
}

fn binary_lines() -> (Vec<(u32, u64, String, String)>, u64) {
    let (hp, he, dec) = setup();
    let mut out = Vec::new();
    let mut missed = 0;
    for cpu in 0..2u32 {
        let buf = std::fs::read(Path::new(DATA).join(format!("cpu{cpu}.raw"))).unwrap();
        for page in parse_pages(&buf, &hp, &he) {
            let page = page.unwrap();
            assert_eq!(page.malformed, 0);
            missed += page.missed as u64;
            for ev in page.events {
                let d = dec
                    .decode(ev.ts, ev.data)
                    .expect("every captured event decodes");
                let (name, key) = match d.event {
                    Event::IrqEntry { name, .. } => ("irq_handler_entry".to_string(), name),
                    Event::IrqExit { irq } => ("irq_handler_exit".into(), irq.to_string()),
                    Event::SoftirqEntry { vec } => ("softirq_entry".into(), vec.to_string()),
                    Event::SoftirqExit { vec } => ("softirq_exit".into(), vec.to_string()),
                    Event::VectorEntry { name } => (format!("{name}_entry"), String::new()),
                    Event::VectorExit { name } => (format!("{name}_exit"), String::new()),
                    Event::Switch {
                        prev_pid,
                        next_pid,
                        prev_state,
                        ..
                    } => (
                        "sched_switch".into(),
                        format!(
                            "{prev_pid}>{next_pid} {}",
                            state_letters(prev_state.expect("format has prev_state"))
                        ),
                    ),
                    Event::Wakeup { pid, comm, .. } => {
                        ("sched_wakeup".into(), format!("{comm}/{pid}"))
                    }
                    Event::Waking { pid, comm, .. } => {
                        ("sched_waking".into(), format!("{comm}/{pid}"))
                    }
                    Event::WorkStart { .. } => ("workqueue_execute_start".into(), String::new()),
                    Event::WorkEnd { .. } => ("workqueue_execute_end".into(), String::new()),
                    Event::Nmi { .. } => ("nmi_handler".into(), String::new()),
                    // Not in this capture (recorded since).
                    Event::PageFault => ("page_fault".into(), String::new()),
                    Event::SysExit => ("sys_exit".into(), String::new()),
                };
                // The text rounds to the nearest microsecond (ns2usecs).
                out.push((cpu, (d.ts + 500) / 1000, name, key));
            }
        }
    }
    (out, missed)
}

#[test]
fn binary_pages_match_the_kernels_text_rendering() {
    let mut text = text_lines();
    let (mut bin, missed) = binary_lines();
    assert_eq!(missed, 0);
    assert!(text.len() > 500, "capture too small: {}", text.len());
    // The text merges CPUs by time; compare per CPU in ring order.
    text.sort_by_key(|l| l.0);
    bin.sort_by_key(|l| l.0);
    assert_eq!(bin.len(), text.len());
    for (i, (b, t)) in bin.iter().zip(&text).enumerate() {
        assert_eq!(b, t, "record {i} differs");
    }
}

#[test]
fn stats_files_agree_on_counts() {
    let (bin, _) = binary_lines();
    for cpu in 0..2u32 {
        let stats =
            std::fs::read_to_string(Path::new(DATA).join(format!("stats.cpu{cpu}"))).unwrap();
        let entries: usize = stats
            .lines()
            .find_map(|l| l.strip_prefix("entries:"))
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        assert_eq!(bin.iter().filter(|l| l.0 == cpu).count(), entries);
    }
}

#[test]
fn captured_trace_attributes_every_nanosecond() {
    let (hp, he, dec) = setup();
    let mut a = Attributor::new(100_000);
    let mut last = 0;
    let mut first = u64::MAX;
    for cpu in 0..2u32 {
        let buf = std::fs::read(Path::new(DATA).join(format!("cpu{cpu}.raw"))).unwrap();
        for page in parse_pages(&buf, &hp, &he) {
            for ev in page.unwrap().events {
                let d = dec.decode(ev.ts, ev.data).unwrap();
                if cpu == 1 {
                    first = first.min(d.ts);
                }
                last = last.max(d.ts);
                a.feed(cpu, &d);
            }
        }
    }
    a.finish(last);
    let w = a.window(1, first, last, &[], &());
    assert!(!w.incomplete);
    assert_eq!(w.named_ns() + w.idle_ns + w.unexplained_ns, last - first);
    let names: Vec<&str> = w.sources.iter().map(|s| s.name.as_str()).collect();
    // The capture did direct-I/O writes: the disk's interrupt and BLOCK.
    assert!(names.contains(&"virtio1-req.0"), "{names:?}");
    assert!(names.contains(&"BLOCK"), "{names:?}");
    assert!(names.iter().any(|n| n.starts_with("dd/")), "{names:?}");
}
