//! Order of CPUs re-picking at the end of one instant.
//!
//! Releases due at the same instant are all seen before a CPU re-picks
//! (otherwise the first would be dispatched for zero time). Which CPUs wait
//! for the end of the instant, and so the order they re-pick in, once
//! depended on superseded wake-ups still sitting in the event queue; the
//! queue no longer keeps those, and the engine keeps the order by tracking
//! them on machines with several CPUs. That order reaches the outputs
//! through the sequence numbers of the CPUs' next wake-ups, so this test
//! pins it with a scenario built to hit it.

use punctual_sim::{run_text, RunOptions};

/// CPU 0 runs `a`; CPU 1 runs `b` and a long `c`, whose first job would
/// end at exactly 1 ms but is pushed back by a DPC at 950 µs, leaving a
/// superseded wake-up due at 1 ms, when `a` and `b` are released.
///
/// - At 0 there is none: the release of `b`, the last event of the
///   instant, re-picks CPU 1 at once, before CPU 0's deferred re-pick, so
///   `b`'s wake-up is queued first and `b` finishes first at 100 µs.
/// - At 1 ms the superseded wake-up was still queued in the old heap, so
///   CPU 1 deferred too and both re-picked at the end of the instant in
///   index order: `a` finishes first at 1.1 ms.
const SCENARIO: &str = r#"
[sim]
cpus = 2
duration = "20ms"

[[task]]
name = "a"
kind = "periodic"
priority = 10
period = "1ms"
exec = "100us"

[[task]]
name = "b"
kind = "periodic"
cpu = 1
priority = 10
period = "1ms"
exec = "100us"

[[task]]
name = "c"
kind = "periodic"
cpu = 1
priority = 5
period = "1ms"
phase = "100us"
exec = "900us"

[[noise]]
name = "n"
kind = "periodic"
cpu = 1
period = "1ms"
phase = "950us"
duration = "10us"
"#;

#[test]
fn cpus_released_together_repick_in_index_order() {
    let opts = RunOptions {
        trace_cap: Some(10_000),
        ..Default::default()
    };
    let (_, o) = run_text("tie.toml", SCENARIO, &[], &opts).unwrap_or_else(|e| panic!("{e}"));
    let end_of = |name: &str| -> Vec<(u64, usize)> {
        o.trace
            .iter()
            .enumerate()
            .filter(|(_, s)| s.name == name)
            .map(|(i, s)| (s.start.0 + s.dur.0, i))
            .collect()
    };
    let (a, b) = (end_of("a"), end_of("b"));
    let order_at = |t: u64| {
        let ia = a.iter().find(|e| e.0 == t).map(|e| e.1);
        let ib = b.iter().find(|e| e.0 == t).map(|e| e.1);
        match (ia, ib) {
            (Some(ia), Some(ib)) => ia < ib,
            _ => panic!("a and b do not both end at {t} ns: the scenario changed"),
        }
    };
    assert!(!order_at(100_000), "at 100 us, b (cpu 1) must finish first");
    assert!(
        order_at(1_100_000),
        "at 1.1 ms, a (cpu 0) must finish first"
    );
}
