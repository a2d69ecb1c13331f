//! The record's bounded slice log (`extra.timeline`): stays inside its
//! window, under its cap, shows both thread runs and stolen time, and goes
//! away when the window is zero.

use std::path::PathBuf;

use punctual_sim::{run_text, to_record, RunOptions, TIMELINE_CAP};
use punctual_units::Nanos;

fn timeline(window: Option<Nanos>) -> Option<serde_json::Value> {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/rez-network.toml");
    let text = std::fs::read_to_string(&p).unwrap();
    let opts = RunOptions {
        duration: Some(Nanos::from_ms(300)),
        timeline_window: window,
        ..Default::default()
    };
    let (scn, o) = run_text(&p.display().to_string(), &text, &[], &opts).unwrap();
    to_record(&scn, &o, &[]).extra.get("timeline").cloned()
}

#[test]
fn slices_stay_in_the_window_and_under_the_cap() {
    let t = timeline(Some(Nanos::from_ms(20))).expect("timeline written");
    assert_eq!(t["window_ns"][1].as_u64(), Some(20_000_000));
    let slices = t["slices"].as_array().unwrap();
    assert!(!slices.is_empty() && slices.len() <= TIMELINE_CAP);
    let (mut run, mut stolen) = (0, 0);
    for s in slices {
        let start = s["start_ns"].as_u64().unwrap();
        let len = s["len_ns"].as_u64().unwrap();
        assert!(len > 0 && start + len <= 20_000_000, "{s}");
        match s["kind"].as_str().unwrap() {
            "run" => run += 1,
            "stolen" => stolen += 1,
            k => panic!("unknown kind {k}"),
        }
    }
    assert!(run > 0 && stolen > 0, "run {run}, stolen {stolen}");
}

#[test]
fn default_window_is_capped_and_zero_window_writes_none() {
    let t = timeline(None).expect("timeline by default");
    assert_eq!(t["window_ns"][1].as_u64(), Some(200_000_000));
    let n = t["slices"].as_array().unwrap().len() as u64;
    // rez-network's interrupts every few µs overflow the cap in 200 ms.
    assert_eq!(n, TIMELINE_CAP as u64);
    assert!(t["dropped"].as_u64().unwrap() > 0);
    assert!(timeline(Some(Nanos::ZERO)).is_none());
}
