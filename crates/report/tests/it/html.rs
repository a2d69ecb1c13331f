//! The HTML report from the committed fixtures: every section that has data
//! appears, every plot has drawn data, and system-derived strings stay text.

use std::path::PathBuf;

use punctual_record::Record;
use punctual_report::{html, merge, Input};

use crate::common::fixtures_dir;

fn fixture(name: &str) -> Input {
    let p = fixtures_dir().join(name);
    let label = name.trim_end_matches(".json").to_string();
    Input::new(label, Record::read(&p).unwrap())
}

fn all() -> Vec<Input> {
    vec![
        fixture("timer-idle.json"),
        fixture("timer-load.json"),
        fixture("reserve-sim.json"),
    ]
}

fn page(inputs: &[Input]) -> String {
    String::from_utf8(html::render(inputs, &html::HtmlOptions::default())).unwrap()
}

#[test]
fn every_section_with_data_is_there() {
    let s = page(&all());
    for id in [
        "runs",
        "comparable",
        "platform",
        "warnings",
        "tails",
        "histograms",
        "mttf",
        "forecast",
        "stolen",
        "spikes",
        "periods",
        "config",
    ] {
        assert!(s.contains(&format!("id=\"{id}\"")), "section {id} missing");
    }
    // Idle vs load overlaid: one exceedance plot per CPU with both records.
    assert_eq!(s.matches("cpu0.latency: latency exceedance").count(), 2); // <title> and caption
                                                                          // Machines differ (hostname, governor): the diff is called out.
    assert!(s.contains("2 platform facts differ between the records"));
    assert!(s.contains("class=\"diff\""));
    // Extrapolated worst cases are marked.
    assert!(s.contains("num extrap"));
    // Profile slack marks on the exceedance axis (modem: 4 ms − 25 % = 3 ms).
    assert!(s.contains("modem 3ms"), "modem slack mark missing");
    // Target line on the MTTF plot.
    assert!(s.contains("class=\"target\""));
    // No scripts, no external references.
    assert!(!s.contains("<script"));
    assert!(
        !s.contains("http://")
            || s.matches("http://").count() == s.matches("http://www.w3.org/2000/svg").count()
    );
    assert!(!s.contains("https://"));
}

#[test]
fn every_plot_has_data() {
    let s = page(&all());
    let plots: Vec<&str> = s.split("<svg ").skip(1).collect();
    assert!(plots.len() >= 10, "only {} plots", plots.len());
    for p in plots {
        let body = p.split("</svg>").next().unwrap();
        let data = body.split("<g class=\"data\">").nth(1).unwrap_or("");
        let data = data.split("</g>").next().unwrap_or("");
        assert!(
            data.contains("<path") || data.contains("<rect"),
            "empty plot: {}",
            &body[..body.len().min(300)]
        );
    }
}

#[test]
fn system_strings_are_text_never_markup() {
    let s = page(&all());
    // The 15-character comm and the scenario name appear, escaped.
    assert!(s.contains("&lt;img src=x oner"), "comm missing");
    assert!(s.contains("&lt;script&gt;alert("), "scenario missing");
    assert!(!s.contains("<img"));
    assert!(!s.contains("<script"));
    // The page parses as XML (well-formed) apart from the HTML doctype.
    let body = s.trim_start_matches("<!DOCTYPE html>");
    let mut r = quick_xml::Reader::from_str(body);
    loop {
        match r.read_event() {
            Ok(quick_xml::events::Event::Eof) => break,
            Ok(_) => {}
            Err(e) => panic!("not well-formed at {}: {e}", r.buffer_position()),
        }
    }
}

#[test]
fn one_record_and_a_merge_render() {
    let one = page(&[fixture("reserve-sim.json")]);
    assert!(one.contains("id=\"periods\""));
    assert!(!one.contains("id=\"stolen\""));
    let m = merge::merge(&[fixture("timer-idle.json"), fixture("timer-load.json")]).unwrap();
    let s = page(&[Input::new("merged", m)]);
    // Platforms of the merged inputs are still compared.
    assert!(s.contains("platform facts differ between the records"));
}

/// Writes the full page where the browser test and a person can open it.
#[test]
fn write_sample_page() {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let p = dir.join("report-sample.html");
    punctual_record::write_atomic(&p, page(&all()).as_bytes()).unwrap();
    eprintln!("sample report: {}", p.display());
}

/// A simulated record with `extra.timeline` gets the Gantt section: one
/// bar per slice, stolen slices marked apart, hostile names kept as text.
#[test]
fn timeline_renders_bars_and_escapes_names() {
    let mut rec = fixture("reserve-sim.json").record;
    rec.extra.insert(
        "timeline".into(),
        serde_json::json!({
            "window_ns": [0, 10_000_000],
            "slices": [
                {"cpu": 0, "track": "<script>alert(1)</script>", "kind": "run",
                 "name": "<script>alert(1)</script>", "start_ns": 0, "len_ns": 2_000_000},
                {"cpu": 0, "track": "irq", "kind": "stolen", "name": "tcp:irq",
                 "start_ns": 2_000_000, "len_ns": 5_000},
                {"cpu": 1, "track": "t2", "kind": "run", "name": "t2",
                 "start_ns": 1_000_000, "len_ns": 3_000_000},
            ],
            "dropped": 7,
        }),
    );
    let without = page(&[fixture("reserve-sim.json")]);
    assert!(!without.contains("id=\"timeline\""));
    let s = page(&[Input::new("sim", rec)]);
    assert!(s.contains("id=\"timeline\""), "timeline section missing");
    assert_eq!(s.matches("class=\"bar run\"").count(), 2);
    assert_eq!(s.matches("class=\"bar stolen\"").count(), 1);
    assert!(!s.contains("<script"), "track name became markup");
    assert!(s.contains("&lt;script&gt;"), "track name lost");
    assert!(s.contains("7 more in the window were not kept"));
}

/// A record's typed verdicts appear in their own section (the page's
/// first), state and interval first, with how long to measure for an open one and the note
/// of a record that cannot stand for a real-time consumer.
#[test]
fn verdicts_section_shows_state_interval_and_note() {
    use punctual_record::{VerdictBasis, VerdictEntry, VerdictState};
    let mut i = fixture("timer-idle.json");
    // A timer record keeps no verdicts: the page shows those its latency
    // series give, and says where they came from.
    let computed = page(std::slice::from_ref(&i));
    assert!(computed.contains("id=\"verdicts\""));
    assert!(computed.contains("the record keeps no verdicts of its own"));
    let entry = |profile: &str, state, ci: [Option<f64>; 2], more| VerdictEntry {
        profile: profile.into(),
        state,
        mttf_s: Some(120.0),
        ci_s: ci,
        target_s: 3600.0,
        measure_more_s: more,
        basis: VerdictBasis::Extrapolated,
        representative: false,
        note: Some("the probes ran at SCHED_OTHER".into()),
    };
    i.record.verdicts = vec![
        entry(
            "modem",
            VerdictState::Misses,
            [Some(60.0), Some(240.0)],
            None,
        ),
        entry(
            "audio",
            VerdictState::Inconclusive,
            [Some(30.0), None],
            Some(13_284.0),
        ),
    ];
    let s = page(&[i]);
    assert!(s.contains("id=\"verdicts\""), "no verdicts section");
    assert!(!s.contains("the record keeps no verdicts of its own"));
    assert!(
        s.find("id=\"verdicts\"") < s.find("id=\"runs\""),
        "verdicts first"
    );
    let sec = &s[s.find("id=\"verdicts\"").unwrap()..];
    for needle in [
        "misses (not representative)",
        "inconclusive (not representative)",
        "60 s – 4 min",
        "30 s – ∞",
        "measure ≥ 3.7 h",
        "Not representative: the probes ran at SCHED_OTHER",
    ] {
        assert!(sec.contains(needle), "{needle} missing");
    }
}
