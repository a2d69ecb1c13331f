//! The HTML report's MTTF-against-buffering chart read as a person reads
//! it, on a simulated record (whose DPC stalls once gave an axis of
//! labels 1e2…1e60 piled on each other and a curve that left the frame)
//! and on a `check` record: the y axis is in time units and capped, its
//! labels stand apart, and every point of every curve is inside the frame.

use std::path::{Path, PathBuf};

use assert_cmd::Command;

fn punctual() -> Command {
    Command::cargo_bin("punctual").unwrap()
}

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The value of attribute `name` in one tag's text.
fn attr(tag: &str, name: &str) -> Option<f64> {
    let key = format!(" {name}=\"");
    let at = tag.find(&key)? + key.len();
    tag[at..].split('"').next()?.parse().ok()
}

/// The `<svg>…</svg>` pieces of the page's MTTF section.
fn mttf_charts(html: &str) -> Vec<String> {
    let start = html.find("id=\"mttf\"").expect("an MTTF section");
    // The section is one <div>; the next section starts with the next id.
    let rest = &html[start..];
    let end = rest[10..].find(" id=\"").map_or(rest.len(), |e| e + 10);
    rest[..end]
        .split("<svg")
        .skip(1)
        .map(|s| s.split("</svg>").next().unwrap().to_string())
        .collect()
}

struct Frame {
    x0: f64,
    y0: f64,
    x1: f64,
    y1: f64,
}

fn frame(svg: &str) -> Frame {
    let tag = svg
        .split('<')
        .find(|t| t.starts_with("rect") && t.contains("class=\"frame\""))
        .expect("a frame");
    let (x, y) = (attr(tag, "x").unwrap(), attr(tag, "y").unwrap());
    Frame {
        x0: x,
        y0: y,
        x1: x + attr(tag, "width").unwrap(),
        y1: y + attr(tag, "height").unwrap(),
    }
}

/// (y position, label) of the y axis's tick labels (right-aligned).
fn y_ticks(svg: &str) -> Vec<(f64, String)> {
    svg.split("<text")
        .skip(1)
        .filter(|t| t.contains("class=\"tick\"") && t.contains("text-anchor=\"end\""))
        .map(|t| {
            let label = t.split('>').nth(1).unwrap().split('<').next().unwrap();
            (attr(t, "y").unwrap(), label.to_string())
        })
        .collect()
}

/// Every point the curves pass through: path vertices and markers.
fn points(svg: &str) -> Vec<(f64, f64)> {
    let mut out = Vec::new();
    for t in svg.split('<') {
        if t.starts_with("path") && t.contains("class=\"series\"") {
            let key = " d=\"";
            let d = &t[t.find(key).unwrap() + key.len()..];
            let d = d.split('"').next().unwrap();
            let nums: Vec<f64> = d
                .split(|c: char| c == 'M' || c == 'L' || c.is_whitespace())
                .filter(|s| !s.is_empty())
                .map(|s| s.parse().unwrap())
                .collect();
            out.extend(nums.chunks(2).map(|p| (p[0], p[1])));
        } else if t.starts_with("circle") {
            out.push((attr(t, "cx").unwrap(), attr(t, "cy").unwrap()));
        }
    }
    out
}

fn html_of(records: &[&Path], dir: &Path) -> String {
    let out = dir.join("report.html");
    punctual()
        .arg("report")
        .args(records)
        .arg("--html")
        .arg(&out)
        .assert()
        .success();
    std::fs::read_to_string(out).unwrap()
}

fn check_charts(html: &str, what: &str) {
    let charts = mttf_charts(html);
    assert!(!charts.is_empty(), "{what}: no MTTF chart");
    let unit = |l: &str| {
        let mut w = l.split(' ');
        let (n, u) = (w.next().unwrap_or(""), w.next().unwrap_or(""));
        w.next().is_none()
            && n.parse::<u64>().is_ok()
            && ["ms", "s", "min", "h", "d", "w", "y"].contains(&u)
    };
    let mut drawn = 0;
    for svg in &charts {
        let fr = frame(svg);
        let ticks = y_ticks(svg);
        assert!(!ticks.is_empty(), "{what}: an MTTF axis without labels");
        for (_, l) in &ticks {
            assert!(unit(l), "{what}: y label {l:?} is not a time");
        }
        // Capped: nothing beyond 10000 years is labelled.
        assert!(ticks.len() <= 16, "{what}: {} labels", ticks.len());
        let mut ys: Vec<f64> = ticks.iter().map(|(y, _)| *y).collect();
        ys.sort_by(f64::total_cmp);
        for w in ys.windows(2) {
            assert!(w[1] - w[0] >= 10.0, "{what}: labels piled up: {ticks:?}");
        }
        for (y, l) in &ticks {
            // A label's baseline sits 4 px below its grid line.
            assert!(
                *y - 4.0 >= fr.y0 - 0.5 && *y - 4.0 <= fr.y1 + 0.5,
                "{what}: label {l} outside the frame"
            );
        }
        for (px, py) in points(svg) {
            drawn += 1;
            assert!(
                px >= fr.x0 - 0.5 && px <= fr.x1 + 0.5 && py >= fr.y0 - 0.5 && py <= fr.y1 + 0.5,
                "{what}: point ({px}, {py}) outside the frame {}-{} × {}-{}",
                fr.x0,
                fr.x1,
                fr.y0,
                fr.y1
            );
        }
    }
    assert!(drawn > 0, "{what}: no curve drawn");
}

#[test]
fn mttf_chart_of_a_simulated_record_is_capped_and_readable() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("sim.json");
    punctual()
        .arg("simulate")
        .arg(repo().join("scenarios/nt-long-dpcs.toml"))
        .args(["--duration", "30s", "--json"])
        .arg(&json)
        .assert()
        .success();
    check_charts(&html_of(&[&json], dir.path()), "simulated record");
}

#[test]
fn mttf_chart_of_a_check_record_is_capped_and_readable() {
    let dir = tempfile::tempdir().unwrap();
    let rec = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/records/check-cause-load.json");
    check_charts(&html_of(&[&rec], dir.path()), "check record");
}
