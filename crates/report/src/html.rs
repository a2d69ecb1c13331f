//! `--html`: one self-contained page (inline CSS and SVG, no scripts, no
//! network) with the plots people read.
//!
//! Sections appear only when some record has the data: platform facts and
//! their differences (Basham's apples-to-apples rule), warnings, log-log
//! exceedance curves with several records overlaid and the workload
//! profiles' slack marked (Cota-Robles & Held Figures 4–5), histograms in a chosen
//! bucket (Jones & Regehr's 100 µs bins), worst cases per hour/day/week, MTTF
//! against buffering with the target line (Cota-Robles & Held Figures 6–7), stolen
//! time per second with the top offenders and per-spike causes, and per
//! period received / stolen / requested with hit or miss (Regehr's thesis Figure
//! 11.4). The whole page is written through the XML writer, so every
//! system-derived string is escaped text.

use std::collections::BTreeMap;

use punctual_record::{Metric, Nanos, Platform, Record, Series, Severity, Source};

use crate::svg::{
    time_ticks, BarChart, GanttBar, GanttChart, Line, LineChart, Mark, PeriodChart, Scale, PALETTE,
};
use crate::tail::{self, BufferingRange, BUFFERING_RANGES};
use crate::xml::Xml;
use crate::Input;

/// Choices that shape the page.
#[derive(Clone, Debug)]
pub struct HtmlOptions {
    /// Fixed bucket width of the CSV exports; the page's histograms use
    /// log-spaced bins (`LOG_BINS`).
    pub bucket: Nanos,
    /// Profile for the MTTF-against-buffering plot.
    pub profile: &'static BufferingRange,
    /// Target mean time to underrun (the horizontal line).
    pub target_mttf: Nanos,
    /// Compute time per buffer as a fraction of the buffer (Cota-Robles & Held's
    /// soft modem: 25 %).
    pub compute_fraction: f64,
    /// Periods drawn per task (the table and summary count all).
    pub max_periods: usize,
    /// Series (per kind of plot) drawn before the rest are only tabulated.
    pub max_plots: usize,
}

impl Default for HtmlOptions {
    fn default() -> Self {
        HtmlOptions {
            bucket: Nanos::from_us(100),
            profile: &BUFFERING_RANGES[2],
            target_mttf: Nanos::from_secs(3600),
            compute_fraction: 0.25,
            max_periods: 200,
            max_plots: 12,
        }
    }
}

const CSS: &str = "
body{font-family:'DejaVu Sans',Helvetica,Arial,sans-serif;margin:24px auto;max-width:1180px;color:#1b1b1b;background:#fff;line-height:1.4}
h1{font-size:26px;margin:0 0 4px 0}h2{font-size:20px;border-bottom:2px solid #0072B2;padding-bottom:3px;margin-top:34px}
h3{font-size:15px;margin:18px 0 6px 0}
table{border-collapse:collapse;font-size:13px;margin:6px 0 14px 0}
th,td{border:1px solid #d0d0d0;padding:3px 8px;text-align:left;vertical-align:top}
td.num{white-space:nowrap}
th{background:#f2f5f8}td.num{text-align:right;font-variant-numeric:tabular-nums}
tr.diff td{background:#fff3d6}
.extrap{color:#9a4b00;font-style:italic}
.sev-degraded{color:#b00020;font-weight:bold}.sev-warn{color:#9a4b00}.sev-info{color:#555}
.note{color:#555;font-size:13px}
.grid2{display:flex;flex-wrap:wrap;gap:12px}
.grid2 svg{flex:1 1 520px;max-width:580px}
svg.plot{width:100%;height:auto;background:#fff;border:1px solid #e2e2e2;margin:4px 0}
svg .frame{fill:none;stroke:#888}
svg .grid{stroke:#e6e6e6;stroke-width:1}
svg .tick{font-size:11px;fill:#444}
svg .alabel{font-size:12px;fill:#222}
svg .ptitle{font-size:14px;font-weight:bold;fill:#111}
svg .series{fill:none;stroke-width:2}
svg .lline{stroke-width:2.5}
svg .ltext{font-size:11px;fill:#222}
svg .mark{stroke:#777;stroke-dasharray:3 3}
svg .target{stroke:#b00020;stroke-dasharray:7 4;stroke-width:1.5}
svg .mtext{font-size:10px;fill:#555}
svg .bar{opacity:0.75}
svg .hit{fill:#009E73}svg .miss{fill:#b00020}
pre{background:#f6f6f6;padding:8px;font-size:12px;overflow:auto;max-height:360px}
footer{margin-top:40px;color:#777;font-size:12px}
";

fn fmt_ns(n: Nanos) -> String {
    n.to_string()
}

fn table_head(x: &mut Xml, cols: &[&str]) {
    x.open("table", &[]);
    x.open("tr", &[]);
    for c in cols {
        x.leaf("th", &[], c);
    }
    x.close("tr");
}

fn row(x: &mut Xml, cells: &[String], numeric_from: usize) {
    x.open("tr", &[]);
    for (i, c) in cells.iter().enumerate() {
        if i >= numeric_from {
            x.leaf("td", &[("class", "num")], c);
        } else {
            x.leaf("td", &[], c);
        }
    }
    x.close("tr");
}

/// The facts that make two runs comparable, as (name, value) rows: the
/// list of [`crate::facts::FACTS`], then the record's own others.
fn facts(p: &Platform) -> Vec<(String, String)> {
    let mut v: Vec<(String, String)> = crate::facts::FACTS
        .iter()
        .map(|f| {
            (
                f.label().to_string(),
                f.value(p).unwrap_or_else(|| "—".into()),
            )
        })
        .collect();
    for (k, val) in &p.other {
        v.push((k.clone(), val.clone()));
    }
    v
}

/// The records' platforms: from each record, or from each merged input.
fn platforms(inputs: &[Input]) -> Vec<(String, Platform)> {
    let mut out = Vec::new();
    for i in inputs {
        let merged = i
            .record
            .extra
            .get("merged_from")
            .and_then(|v| v.as_array())
            .map(|a| {
                a.iter()
                    .filter_map(|m| {
                        let p: Platform =
                            serde_json::from_value(m.get("platform")?.clone()).ok()?;
                        let l = m.get("label").and_then(|l| l.as_str()).unwrap_or("?");
                        Some((format!("{} ⟵ {l}", i.label), p))
                    })
                    .collect::<Vec<_>>()
            })
            .unwrap_or_default();
        if merged.is_empty() {
            out.push((i.label.clone(), i.record.platform.clone()));
        } else {
            out.extend(merged);
        }
    }
    out
}

/// The scenario a simulated record ran: its file name and the
/// `description` line of the scenario text, not the whole file the record
/// keeps in `config.scenario` for repeating the run.
fn scenario_note(r: &Record) -> Option<String> {
    let text = |k: &str| r.config.get(k).and_then(|v| v.as_str());
    let file = text("scenario_file").or_else(|| text("scenario_name"));
    let scenario = punctual_record::sim::scenario_text(&r.config);
    let description = scenario.as_deref().and_then(|t| {
        t.lines().find_map(|l| {
            let (k, v) = l.split_once('=')?;
            (k.trim() == "description").then(|| v.trim().trim_matches('"').to_string())
        })
    });
    let file = file.map(|f| {
        std::path::Path::new(f)
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| f.to_string())
    });
    match (file, description) {
        (Some(f), Some(d)) => Some(format!("scenario {f}: {d}")),
        (Some(f), None) => Some(format!("scenario {f}")),
        (None, Some(d)) => Some(format!("scenario: {d}")),
        (None, None) => None,
    }
}

/// When the run started; a simulation's start is a fixed epoch (its
/// record is byte-identical from run to run), which says nothing, so it
/// reads "simulated".
fn started_text(r: &Record) -> String {
    match r.source {
        Source::Simulated if r.started_at.starts_with("1970-01-01") => "simulated".into(),
        _ => r.started_at.clone(),
    }
}

fn section_runs(x: &mut Xml, inputs: &[Input]) {
    x.leaf("h2", &[("id", "runs")], "Runs");
    table_head(
        x,
        &[
            "record", "kind", "source", "host", "started", "duration", "note",
        ],
    );
    for i in inputs {
        let r = &i.record;
        let mut note = Vec::new();
        if let Some(n) = scenario_note(r) {
            note.push(n);
        }
        if r.interrupted {
            note.push("interrupted: covers less than asked".into());
        }
        row(
            x,
            &[
                i.label.clone(),
                r.kind.clone(),
                format!("{:?}", r.source).to_lowercase(),
                r.platform.hostname.clone().unwrap_or_else(|| "—".into()),
                started_text(r),
                fmt_ns(r.duration_ns),
                note.join("; "),
            ],
            99,
        );
    }
    x.close("table");
}

fn section_platform(x: &mut Xml, inputs: &[Input]) {
    let plats = platforms(inputs);
    x.leaf("h2", &[("id", "platform")], "Platform");
    let rows: Vec<Vec<(String, String)>> = plats.iter().map(|p| facts(&p.1)).collect();
    let mut names: Vec<String> = Vec::new();
    for r in &rows {
        for (k, _) in r {
            if !names.contains(k) {
                names.push(k.clone());
            }
        }
    }
    let mut differing = 0;
    let mut cols = vec!["fact".to_string()];
    cols.extend(plats.iter().map(|p| p.0.clone()));
    let c: Vec<&str> = cols.iter().map(|s| s.as_str()).collect();
    table_head(x, &c);
    for n in &names {
        let vals: Vec<String> = rows
            .iter()
            .map(|r| {
                r.iter()
                    .find(|(k, _)| k == n)
                    .map(|(_, v)| v.clone())
                    .unwrap_or_else(|| "—".into())
            })
            .collect();
        let differs = vals.windows(2).any(|w| w[0] != w[1]);
        if differs {
            differing += 1;
        }
        x.open("tr", if differs { &[("class", "diff")] } else { &[] });
        x.leaf("td", &[], n);
        for v in vals {
            x.leaf("td", &[], &v);
        }
        x.close("tr");
    }
    x.close("table");
    if plats.len() > 1 {
        x.leaf(
            "p",
            &[("class", "note")],
            &if differing == 0 {
                "All records come from machines with the same recorded facts.".to_string()
            } else {
                format!(
                    "{differing} facts differ between the records (highlighted): compare their numbers with care; a latency means little without the platform it was measured on."
                )
            },
        );
    }
}

/// Near the top: only the facts that differ between the records' machines.
fn section_platform_diff(x: &mut Xml, inputs: &[Input]) {
    let plats = platforms(inputs);
    if plats.len() < 2 {
        return;
    }
    let rows: Vec<Vec<(String, String)>> = plats.iter().map(|p| facts(&p.1)).collect();
    let mut diffs: Vec<(String, Vec<String>)> = Vec::new();
    for (k, _) in &rows[0] {
        let vals: Vec<String> = rows
            .iter()
            .map(|r| {
                r.iter()
                    .find(|(n, _)| n == k)
                    .map(|(_, v)| v.clone())
                    .unwrap_or_else(|| "—".into())
            })
            .collect();
        if vals.windows(2).any(|w| w[0] != w[1]) {
            diffs.push((k.clone(), vals));
        }
    }
    x.leaf("h2", &[("id", "comparable")], "Are these runs comparable?");
    if diffs.is_empty() {
        x.leaf(
            "p",
            &[("class", "note")],
            "Yes as far as recorded: every platform fact is the same (full list under Platform).",
        );
        return;
    }
    x.leaf(
        "p",
        &[("class", "note")],
        &format!(
            "{} platform facts differ between the records: compare their numbers with care; a latency means little without the platform it was measured on (full list under Platform).",
            diffs.len()
        ),
    );
    let mut cols = vec!["fact".to_string()];
    cols.extend(plats.iter().map(|p| p.0.clone()));
    let c: Vec<&str> = cols.iter().map(|s| s.as_str()).collect();
    table_head(x, &c);
    for (k, vals) in diffs {
        x.open("tr", &[("class", "diff")]);
        x.leaf("td", &[], &k);
        for v in vals {
            x.leaf("td", &[], &v);
        }
        x.close("tr");
    }
    x.close("table");
}

fn section_warnings(x: &mut Xml, inputs: &[Input]) {
    if inputs.iter().all(|i| i.record.warnings.is_empty()) {
        return;
    }
    x.leaf("h2", &[("id", "warnings")], "Warnings");
    // One line per distinct warning, naming the records it came from.
    let mut ws: Vec<(&punctual_record::Warning, Vec<&str>)> = Vec::new();
    for i in inputs {
        for w in &i.record.warnings {
            match ws.iter_mut().find(|(x, _)| *x == w) {
                Some((_, who)) => who.push(&i.label),
                None => ws.push((w, vec![&i.label])),
            }
        }
    }
    ws.sort_by_key(|(w, _)| std::cmp::Reverse(w.severity()));
    x.open("ul", &[]);
    for (w, who) in ws {
        let (cls, tag) = match w.severity() {
            Severity::Degraded => ("sev-degraded", "degraded"),
            Severity::Warn => ("sev-warn", "warning"),
            Severity::Info => ("sev-info", "info"),
        };
        x.open("li", &[]);
        x.leaf("span", &[("class", cls)], &format!("[{tag}] "));
        x.text(&w.message());
        if inputs.len() > 1 {
            let whom = if who.len() == inputs.len() {
                "all records".to_string()
            } else {
                who.join(", ")
            };
            x.leaf("span", &[("class", "note")], &format!(" ({whom})"));
        }
        x.close("li");
    }
    x.close("ul");
}

/// Series grouped by name across records, in first-seen order.
/// Members of one group: (record label, record, series).
type Group<'a> = Vec<(&'a str, &'a Record, &'a Series)>;

/// The colour of a record on every plot of the page: its position among
/// the inputs, so an overlaid run keeps its colour from plot to plot even
/// where an earlier run has no curve.
fn colour_of(inputs: &[Input], rec: &Record) -> &'static str {
    let i = inputs
        .iter()
        .position(|x| std::ptr::eq(&x.record, rec))
        .unwrap_or(0);
    PALETTE[i % PALETTE.len()]
}

fn grouped(inputs: &[Input], keep: impl Fn(&Series) -> bool) -> Vec<(String, Group<'_>)> {
    let mut order: Vec<String> = Vec::new();
    let mut map: BTreeMap<String, Group<'_>> = BTreeMap::new();
    for i in inputs {
        for s in &i.record.series {
            if !keep(s) || s.count == 0 {
                continue;
            }
            if !map.contains_key(&s.name) {
                order.push(s.name.clone());
            }
            map.entry(s.name.clone())
                .or_default()
                .push((i.label.as_str(), &i.record, s));
        }
    }
    order
        .into_iter()
        .map(|n| {
            let v = map.remove(&n).unwrap_or_default();
            (n, v)
        })
        .collect()
}

fn is_tail_metric(m: Metric) -> bool {
    matches!(
        m,
        Metric::Latency | Metric::Gap | Metric::Response | Metric::ServiceGap
    )
}

fn section_tails(x: &mut Xml, inputs: &[Input], o: &HtmlOptions, models: &mut tail::Models) {
    let groups = grouped(inputs, |s| is_tail_metric(s.metric));
    if groups.is_empty() {
        return;
    }
    x.leaf("h2", &[("id", "tails")], "Tails: how often is it late?");
    x.leaf(
        "p",
        &[("class", "note")],
        &format!(
            "Log-log exceedance: the fraction of samples at or above each value. Dashed verticals mark the smallest slack of each workload profile, (n−1)·t − c with n = 2, the shortest buffer t and compute c = {:.0}% of t: a curve still high at a mark misses that profile's deadlines often.",
            o.compute_fraction * 100.0
        ),
    );
    let marks: Vec<Mark> = BUFFERING_RANGES
        .iter()
        .map(|p| {
            let s = tail::slack(p.n_min, p.t_min, o.compute_fraction);
            Mark {
                at: s.0 as f64 / 1e3,
                label: format!("{} {}", p.name, s),
            }
        })
        .collect();
    x.open("div", &[("class", "grid2")]);
    for (name, members) in groups.iter().take(o.max_plots) {
        let mut lines = Vec::new();
        let (mut xmin, mut xmax, mut ymin) = (f64::MAX, 0f64, 1f64);
        for (label, rec, s) in members {
            let pts: Vec<(f64, f64)> = tail::exceedance(s, 400)
                .into_iter()
                .map(|p| (p.at.0 as f64 / 1e3, p.fraction))
                .collect();
            for (a, b) in &pts {
                xmin = xmin.min(*a);
                xmax = xmax.max(*a);
                ymin = ymin.min(*b);
            }
            lines.push(Line {
                name: label.to_string(),
                points: pts,
                dashed: false,
                markers: false,
                colour: Some(colour_of(inputs, rec)),
            });
        }
        if xmax <= 0.0 {
            continue;
        }
        let metric = members[0].2.metric.as_str();
        let visible: Vec<Mark> = marks
            .iter()
            .filter(|m| m.at >= xmin / 2.0 && m.at <= xmax.max(xmin) * 20.0)
            .map(|m| Mark {
                at: m.at,
                label: m.label.clone(),
            })
            .collect();
        let xmax_axis = visible.iter().map(|m| m.at).fold(xmax, f64::max);
        let c = LineChart {
            title: format!("{name}: {metric} exceedance"),
            x_label: format!("{metric} (µs)"),
            y_label: "fraction of samples ≥ x".into(),
            x: Scale::log_covering(xmin, xmax_axis),
            y: Scale::log_covering(ymin, 1.0),
            lines,
            x_marks: visible,
            y_marks: vec![],
            y_ticks: None,
        };
        x.fragment(c.render());
    }
    x.close("div");
    if groups.len() > o.max_plots {
        x.leaf(
            "p",
            &[("class", "note")],
            &format!(
                "{} more series are in the table below but not plotted.",
                groups.len() - o.max_plots
            ),
        );
    }
    x.leaf("h3", &[], "Summary and expected worst cases");
    x.leaf(
        "p",
        &[("class", "note")],
        "Worst case per hour/day/week: the value exceeded about once in that much time at this series' sample rate (punctual_analysis, as punctual forecast computes it). Values in italics marked ~ are extrapolated from a generalized Pareto fit of the measured tail because the run was shorter than the window; \u{2018}> x\u{2019} means the window is too far beyond the run for a point estimate and gives the lower end of the 95% interval.",
    );
    table_head(
        x,
        &[
            "series",
            "record",
            "count",
            "min",
            "mean",
            "p50",
            "p99",
            "p99.9",
            "p99.99",
            "max",
            "missed",
            "worst/hour",
            "worst/day",
            "worst/week",
        ],
    );
    for (name, members) in &groups {
        for (label, rec, s) in members {
            x.open("tr", &[]);
            x.leaf("td", &[], name);
            x.leaf("td", &[], label);
            for v in [
                s.count.to_string(),
                fmt_ns(s.min),
                fmt_ns(s.mean),
                fmt_ns(s.percentiles.p50),
                fmt_ns(s.percentiles.p99),
                fmt_ns(s.percentiles.p99_9),
                fmt_ns(s.percentiles.p99_99),
                fmt_ns(s.max),
                s.missed.to_string(),
            ] {
                x.leaf("td", &[("class", "num")], &v);
            }
            match models
                .get(s, rec.series_duration(s))
                .map(tail::worst_cases_of)
            {
                Some(wc) => {
                    for (_, e) in wc {
                        let cls = if e.extrapolated { "num extrap" } else { "num" };
                        let note = e.note.clone().unwrap_or_default();
                        x.leaf(
                            "td",
                            &[("class", cls), ("title", &note)],
                            &tail::estimate_text(&e),
                        );
                    }
                }
                None => {
                    for _ in 0..3 {
                        x.leaf("td", &[("class", "num")], "—");
                    }
                }
            }
            x.close("tr");
        }
    }
    x.close("table");
}

/// Bins of a histogram plot: at most this many per chart, equal in width
/// on a log axis from the smallest to the largest value of the series
/// plotted together, so a distribution is spread over the plot whatever
/// its range (linear 100 µs bins put most of a 20–80 µs latency
/// distribution in one bar and an interval distribution in two).
const LOG_BINS: usize = 60;

/// The log-bin ratio for values in `[lo, hi)` ns recorded in buckets of
/// `bucket_ns`: [`LOG_BINS`] bins, or fewer where the bins at `lo` would
/// be narrower than a bucket (such bins would alternate full and empty).
fn log_ratio(lo: f64, hi: f64, bucket_ns: f64) -> f64 {
    (hi / lo)
        .powf(1.0 / LOG_BINS as f64)
        .max(1.0 + bucket_ns / lo)
        .max(1.0 + 1e-9)
}

/// Re-bins sparse histogram buckets into log-spaced bins of `ratio` from
/// `lo` ns; returns (first bin, counts per bin). A bucket goes to the bin
/// holding its middle.
fn log_bins(buckets: &[(u64, u64)], bucket_ns: u64, lo: f64, ratio: f64) -> Vec<(usize, u64)> {
    let mut m = BTreeMap::<usize, u64>::new();
    for (b, c) in buckets {
        let mid = (*b as f64 + bucket_ns as f64 / 2.0).max(lo);
        let k = ((mid / lo).ln() / ratio.ln()).floor().max(0.0) as usize;
        *m.entry(k).or_default() += c;
    }
    m.into_iter().collect()
}

fn section_histograms(x: &mut Xml, inputs: &[Input], o: &HtmlOptions) {
    let groups = grouped(inputs, |s| {
        matches!(s.metric, Metric::Latency | Metric::Interval)
    });
    if groups.is_empty() {
        return;
    }
    x.leaf("h2", &[("id", "histograms")], "Histograms");
    x.leaf(
        "p",
        &[("class", "note")],
        &format!(
            "Counts in up to {LOG_BINS} bins of equal width on a logarithmic axis, from the smallest to the largest value plotted (never narrower than the record's resolution); several records share each bin side by side (a log axis shows the body and the tail of a latency distribution at once). Count axis is logarithmic when the counts span more than two decades. CSV and hist exports keep fixed buckets (--bucket)."
        ),
    );
    x.open("div", &[("class", "grid2")]);
    for (name, members) in groups.iter().take(o.max_plots) {
        // One binning for every record of the plot, so bars line up;
        // records share each bin side by side, so none hides another.
        let (mut lo, mut hi, mut w) = (f64::MAX, 0f64, 1f64);
        for (_, _, s) in members {
            let bw = s.histogram.bucket_ns.max(1) as f64;
            w = w.max(bw);
            for (b, _) in &s.histogram.buckets {
                lo = lo.min((*b as f64).max(bw));
                hi = hi.max(*b as f64 + bw);
            }
        }
        if hi <= 0.0 {
            continue;
        }
        let hi = hi.max(lo * 10.0);
        // The resolution limit is set where the samples are (their 1st
        // percentile), not by a few near-zero outliers, which would
        // otherwise force every bin to double in width.
        let mut all: Vec<(u64, u64)> = members
            .iter()
            .flat_map(|m| m.2.histogram.buckets.iter().copied())
            .collect();
        all.sort_unstable();
        let total: u64 = all.iter().map(|b| b.1).sum();
        let mut seen = 0;
        let bulk = all
            .iter()
            .find(|b| {
                seen += b.1;
                seen * 100 >= total
            })
            .map_or(lo, |b| (b.0 as f64).max(lo));
        let ratio = log_ratio(bulk, hi.max(bulk * 10.0), w).min(log_ratio(lo, hi, w));
        let share = members.len().max(1) as f64;
        let mut series = Vec::new();
        let mut colours = Vec::new();
        let (mut cmax, mut cmin) = (0f64, f64::MAX);
        for (j, (label, rec, s)) in members.iter().enumerate() {
            let bars: Vec<(f64, f64, f64)> =
                log_bins(&s.histogram.buckets, s.histogram.bucket_ns, lo, ratio)
                    .into_iter()
                    .map(|(k, c)| {
                        let x0 = lo * ratio.powf(k as f64 + j as f64 / share) / 1e3;
                        (x0, x0 * ratio.powf(1.0 / share), c as f64)
                    })
                    .collect();
            for b in &bars {
                cmax = cmax.max(b.2);
                cmin = cmin.min(b.2);
            }
            series.push((label.to_string(), bars));
            colours.push(colour_of(inputs, rec));
        }
        if cmax <= 0.0 {
            continue;
        }
        let y = if cmax / cmin.max(1.0) > 100.0 {
            Scale::log_covering(0.5, cmax)
        } else {
            Scale::linear_covering(0.0, cmax * 1.05)
        };
        let metric = members[0].2.metric.as_str();
        let c = BarChart {
            title: format!("{name}: {metric}"),
            x_label: format!("{metric} (µs, log scale)"),
            y_label: "count per bin".into(),
            x: Scale::log_covering(lo / 1e3, hi / 1e3),
            y,
            series,
            colours,
        };
        x.fragment(c.render());
    }
    x.close("div");
}

/// Highest MTTF the plot shows: beyond a century the figure only says
/// "never in practice", and fitted tails put such points at 1e20 s and
/// more, which would squeeze every useful value into the bottom of the plot.
const MTTF_CAP_S: f64 = 100.0 * 365.25 * 86_400.0;

/// Makes MTTF non-decreasing in the number of buffers, from the most
/// buffered end: more buffering cannot underrun more often, so where the
/// model's estimate falls as buffering grows (the fitted tail taking over
/// from the counted one), the smaller buffering gets the larger's MTTF, the
/// more pessimistic of the two. Returns how many points were lowered.
fn monotone_mttf(pts: &mut [(f64, f64)]) -> usize {
    let mut lowered = 0;
    for i in (0..pts.len().saturating_sub(1)).rev() {
        if pts[i].1 > pts[i + 1].1 {
            pts[i].1 = pts[i + 1].1;
            lowered += 1;
        }
    }
    lowered
}

fn section_mttf(x: &mut Xml, inputs: &[Input], o: &HtmlOptions, models: &mut tail::Models) {
    let groups = grouped(inputs, |s| s.metric == Metric::Latency);
    if groups.is_empty() {
        return;
    }
    let p = o.profile;
    x.leaf(
        "h2",
        &[("id", "mttf")],
        "Mean time to buffer underrun against buffering",
    );
    x.leaf(
        "p",
        &[("class", "note")],
        &format!(
            "Profile {}: buffers of {}–{}, {}–{} of them, compute {:.0}% of a buffer. MTTF = t / P(latency > (n−1)·t − c) (computed by punctual_analysis). Red line: target {}. Dashed lines: fewer than 10 samples exceeded the slack, so the probability comes from the fitted tail. Missing points: no underrun observed or predicted at that buffering. With several records, one buffer length (the middle one) per record, in the record's colour. The axis stops at 100 years: points drawn on its top edge are beyond it. Where the model's MTTF fell as buffering grew (the fitted tail taking over from the counted one), the smaller buffering is drawn at the larger one's MTTF, since more buffering cannot underrun more often; the legend counts such points.",
            p.name,
            p.t_min,
            p.t_max,
            p.n_min,
            p.n_max,
            o.compute_fraction * 100.0,
            o.target_mttf
        ),
    );
    let ts = [p.t_min, Nanos((p.t_min.0 + p.t_max.0) / 2), p.t_max];
    x.open("div", &[("class", "grid2")]);
    for (name, members) in groups.iter().take(o.max_plots) {
        let mut lines = Vec::new();
        let (mut ymin, mut ymax, mut xmax) = (f64::MAX, 0f64, 0f64);
        for (label, rec, s) in members.iter().take(3) {
            let Some(model) = models.get(s, rec.series_duration(s)) else {
                continue;
            };
            // Several records: one buffer length each (the middle), in the
            // record's colour; one record: all three, coloured by length.
            let lengths: &[Nanos] = if members.len() > 1 { &ts[1..2] } else { &ts };
            for &t in lengths {
                let mut pts = Vec::new();
                let mut extrapolated = false;
                for n in p.n_min..=p.n_max {
                    let Some(m) = tail::mttf(model, n, t, o.compute_fraction) else {
                        continue;
                    };
                    // None: no underrun observed or predicted at this slack.
                    let Some(secs) = m.mttf_seconds else { continue };
                    let total_ms = (n as u64 * t.0) as f64 / 1e6;
                    pts.push((total_ms, secs));
                    extrapolated |= m.extrapolated;
                }
                let lowered = monotone_mttf(&mut pts);
                for pt in &mut pts {
                    pt.1 = pt.1.min(MTTF_CAP_S);
                    ymin = ymin.min(pt.1);
                    ymax = ymax.max(pt.1);
                    xmax = xmax.max(pt.0);
                }
                let who = if members.len() > 1 {
                    format!("{label}, ")
                } else {
                    String::new()
                };
                let mut notes = Vec::new();
                if extrapolated {
                    notes.push("fitted tail".to_string());
                }
                if lowered > 0 {
                    notes.push(format!("{lowered} lowered"));
                }
                let notes = if notes.is_empty() {
                    String::new()
                } else {
                    format!(" ({})", notes.join(", "))
                };
                lines.push(Line {
                    name: format!("{who}t = {t}{notes}"),
                    points: pts,
                    dashed: extrapolated,
                    markers: true,
                    colour: (members.len() > 1).then(|| colour_of(inputs, rec)),
                });
            }
        }
        if ymax <= 0.0 {
            continue;
        }
        let target = o.target_mttf.as_secs_f64();
        let lo = ymin.min(target).max(1e-3);
        let hi = ymax.max(target).min(MTTF_CAP_S);
        let y = Scale::log_covering(lo, hi);
        let (ymin_axis, ymax_axis) = match y {
            Scale::Log { min, max } | Scale::Linear { min, max } => (min, max.min(MTTF_CAP_S)),
        };
        let y = Scale::Log {
            min: ymin_axis,
            max: ymax_axis.max(ymin_axis * 10.0),
        };
        let c = LineChart {
            title: format!("{name}: MTTF, profile {}", p.name),
            x_label: "total buffering n·t (ms)".into(),
            y_label: "mean time to underrun".into(),
            x: Scale::linear_covering(0.0, xmax),
            y,
            lines,
            x_marks: vec![],
            y_marks: vec![Mark {
                at: target,
                label: format!("target {}", o.target_mttf),
            }],
            y_ticks: Some(time_ticks(ymin_axis, ymax_axis.max(ymin_axis * 10.0))),
        };
        x.fragment(c.render());
    }
    x.close("div");
}

fn json_table(x: &mut Xml, v: &serde_json::Value, depth: usize) {
    use serde_json::Value;
    match v {
        Value::Object(m) if depth < 4 => {
            x.open("table", &[]);
            for (k, val) in m {
                x.open("tr", &[]);
                x.leaf("th", &[], k);
                x.open("td", &[]);
                json_table(x, val, depth + 1);
                x.close("td");
                x.close("tr");
            }
            x.close("table");
        }
        Value::Array(a) if depth < 4 && !a.is_empty() && a.iter().all(|e| e.is_object()) => {
            let mut cols: Vec<String> = Vec::new();
            for e in a {
                if let Some(o) = e.as_object() {
                    for k in o.keys() {
                        if !cols.contains(k) {
                            cols.push(k.clone());
                        }
                    }
                }
            }
            let c: Vec<&str> = cols.iter().map(|s| s.as_str()).collect();
            table_head(x, &c);
            for e in a.iter().take(500) {
                x.open("tr", &[]);
                for k in &cols {
                    let cell = e.get(k).cloned().unwrap_or(Value::Null);
                    let extrap = k.contains("extrapolated") && cell == Value::Bool(true);
                    x.open("td", if extrap { &[("class", "extrap")] } else { &[] });
                    json_table(x, &cell, depth + 1);
                    x.close("td");
                }
                x.close("tr");
            }
            x.close("table");
        }
        Value::String(s) => x.text(s),
        Value::Null => x.text("—"),
        other => x.text(&other.to_string()),
    }
}

fn section_forecast(x: &mut Xml, inputs: &[Input]) {
    let with: Vec<&Input> = inputs
        .iter()
        .filter(|i| i.record.extra.contains_key("forecast"))
        .collect();
    if with.is_empty() {
        return;
    }
    x.leaf("h2", &[("id", "forecast")], "Forecast");
    for i in with {
        if inputs.len() > 1 {
            x.leaf("h3", &[], &i.label);
        }
        json_table(x, &i.record.extra["forecast"], 0);
    }
}

/// The records' verdicts: state and 95% interval first, then the point
/// estimate, the target and, when open, how long to measure. A record
/// that keeps none (`timer`, `simulate`) gets those its latency series
/// give, from the same `record_verdicts` the JUnit export reads.
fn section_verdicts(x: &mut Xml, inputs: &[Input]) {
    use punctual_analysis::verdict::human_secs;
    use punctual_record::VerdictState;
    let all: Vec<(&Input, Vec<punctual_record::VerdictEntry>)> = inputs
        .iter()
        .map(|i| (i, punctual_analysis::gate::record_verdicts(&i.record)))
        .filter(|(_, v)| !v.is_empty())
        .collect();
    if all.is_empty() {
        return;
    }
    x.leaf("h2", &[("id", "verdicts")], "Verdicts");
    x.leaf(
        "p",
        &[("class", "note")],
        "Decided (meets, misses) only when the whole 95% interval of the time to underrun \
         is on one side of the profile's target; otherwise inconclusive, with how long to \
         measure this machine to decide.",
    );
    for (i, verdicts) in &all {
        if inputs.len() > 1 {
            x.leaf("h3", &[], &i.label);
        }
        if i.record.verdicts.is_empty() {
            x.leaf(
                "p",
                &[("class", "note")],
                "From the record's wake-up latencies against the built-in profiles (the \
                 record keeps no verdicts of its own; `punctual forecast` explains each).",
            );
        }
        if let Some(n) = verdicts.iter().find_map(|v| v.note.as_ref()) {
            x.leaf(
                "p",
                &[("class", "sev-degraded")],
                &format!("Not representative: {n}"),
            );
        }
        table_head(
            x,
            &[
                "profile",
                "state",
                "95% CI",
                "MTTF",
                "target",
                "basis",
                "to decide",
            ],
        );
        let secs = |s: Option<f64>| s.map(human_secs).unwrap_or_else(|| "never".into());
        for v in verdicts {
            x.open("tr", &[]);
            x.leaf("td", &[], &v.profile);
            let class = match v.state {
                VerdictState::Meets => "sev-info",
                VerdictState::Misses => "sev-degraded",
                VerdictState::Inconclusive => "sev-warn",
            };
            let state = if v.representative {
                v.state.word().to_string()
            } else {
                format!("{} (not representative)", v.state.word())
            };
            x.leaf("td", &[("class", class)], &state);
            x.leaf(
                "td",
                &[],
                &format!(
                    "{} – {}",
                    human_secs(v.ci_s[0].unwrap_or(0.0)),
                    v.ci_s[1].map(human_secs).unwrap_or_else(|| "∞".into())
                ),
            );
            x.leaf("td", &[], &secs(v.mttf_s));
            x.leaf("td", &[], &human_secs(v.target_s));
            x.leaf(
                "td",
                &[],
                match v.basis {
                    punctual_record::VerdictBasis::Observed => "observed",
                    punctual_record::VerdictBasis::Extrapolated => "extrapolated",
                },
            );
            x.leaf(
                "td",
                &[],
                &v.measure_more_s
                    .map(|s| format!("measure ≥ {}", human_secs(s)))
                    .unwrap_or_default(),
            );
            x.close("tr");
        }
        x.close("table");
    }
}

fn section_stolen(x: &mut Xml, inputs: &[Input], o: &HtmlOptions) {
    if inputs.iter().all(|i| i.record.stolen.is_empty()) {
        return;
    }
    x.leaf("h2", &[("id", "stolen")], "Stolen time");
    table_head(
        x,
        &[
            "record",
            "cpu",
            "task",
            "observed",
            "stolen",
            "fraction",
            "intervals",
            "longest",
            "threshold",
        ],
    );
    for i in inputs {
        for s in &i.record.stolen {
            row(
                x,
                &[
                    i.label.clone(),
                    s.cpu.to_string(),
                    s.task.clone().unwrap_or_default(),
                    fmt_ns(s.observed_ns),
                    fmt_ns(s.total_ns),
                    format!("{:.3}%", s.fraction * 100.0),
                    s.intervals.to_string(),
                    fmt_ns(s.max_ns),
                    fmt_ns(s.threshold_ns),
                ],
                3,
            );
        }
    }
    x.close("table");
    // Per CPU, records overlaid: stolen milliseconds per second of run.
    let mut by_cpu: BTreeMap<(u32, Option<String>), Vec<Line>> = BTreeMap::new();
    for i in inputs {
        for s in &i.record.stolen {
            let w = s.timeline.bin_ns.0.max(1) as f64;
            let pts: Vec<(f64, f64)> = s
                .timeline
                .values_ns
                .iter()
                .enumerate()
                .map(|(b, v)| ((b as f64 + 0.5) * w / 1e9, v.0 as f64 / 1e6 / (w / 1e9)))
                .collect();
            if pts.is_empty() {
                continue;
            }
            by_cpu
                .entry((s.cpu, s.task.clone()))
                .or_default()
                .push(Line {
                    name: i.label.clone(),
                    points: pts,
                    dashed: false,
                    markers: false,
                    colour: Some(colour_of(inputs, &i.record)),
                });
        }
    }
    x.open("div", &[("class", "grid2")]);
    for ((cpu, task), lines) in by_cpu.into_iter().take(o.max_plots) {
        let xmax = lines
            .iter()
            .flat_map(|l| l.points.iter().map(|p| p.0))
            .fold(0.0, f64::max);
        let ymax = lines
            .iter()
            .flat_map(|l| l.points.iter().map(|p| p.1))
            .fold(0.0, f64::max);
        let who = match task {
            Some(t) => format!("cpu{cpu} ({t})"),
            None => format!("cpu{cpu}"),
        };
        let c = LineChart {
            title: format!("{who}: stolen time per second"),
            x_label: "time since start (s)".into(),
            y_label: "stolen (ms per s)".into(),
            x: Scale::linear_covering(0.0, xmax),
            y: Scale::linear_covering(0.0, ymax.max(1e-3) * 1.1),
            lines,
            x_marks: vec![],
            y_marks: vec![],
            y_ticks: None,
        };
        x.fragment(c.render());
    }
    x.close("div");

    // Top offenders across every record and CPU.
    let mut offenders: Vec<(String, u32, &punctual_record::SourceShare)> = Vec::new();
    for i in inputs {
        for s in &i.record.stolen {
            for src in &s.by_source {
                offenders.push((i.label.clone(), s.cpu, src));
            }
        }
    }
    if !offenders.is_empty() {
        offenders.sort_by_key(|o| std::cmp::Reverse(o.2.total_ns));
        x.leaf("h3", &[], "Top offenders");
        table_head(
            x,
            &[
                "record", "cpu", "kind", "source", "count", "total", "longest", "share",
            ],
        );
        for (label, cpu, src) in offenders.iter().take(25) {
            row(
                x,
                &[
                    label.clone(),
                    cpu.to_string(),
                    src.kind.clone(),
                    src.name.clone(),
                    src.count.to_string(),
                    fmt_ns(src.total_ns),
                    fmt_ns(src.max_ns),
                    format!("{:.1}%", src.share * 100.0),
                ],
                4,
            );
        }
        x.close("table");
    }
    let kv: Vec<_> = inputs
        .iter()
        .flat_map(|i| {
            i.record
                .stolen
                .iter()
                .filter_map(move |s| s.kernel_view.as_ref().map(|k| (i, s.cpu, k)))
        })
        .collect();
    if !kv.is_empty() {
        x.leaf("h3", &[], "What the kernel admits to (/proc/stat)");
        table_head(
            x,
            &["record", "cpu", "irq", "softirq", "steal", "top interrupts"],
        );
        for (i, cpu, k) in kv {
            let mut ints: Vec<(&String, &u64)> = k.interrupts.iter().collect();
            ints.sort_by(|a, b| b.1.cmp(a.1));
            let top = ints
                .iter()
                .take(5)
                .map(|(n, c)| format!("{n}: {c}"))
                .collect::<Vec<_>>()
                .join(", ");
            row(
                x,
                &[
                    i.label.clone(),
                    cpu.to_string(),
                    fmt_ns(k.irq_ns),
                    fmt_ns(k.softirq_ns),
                    fmt_ns(k.steal_ns),
                    top,
                ],
                2,
            );
        }
        x.close("table");
    }
}

fn section_spikes(x: &mut Xml, inputs: &[Input]) {
    if inputs.iter().all(|i| i.record.spikes.is_empty()) {
        return;
    }
    x.leaf("h2", &[("id", "spikes")], "Largest spikes and their causes");
    let mut all: Vec<(&str, &punctual_record::Spike)> = inputs
        .iter()
        .flat_map(|i| i.record.spikes.iter().map(move |s| (i.label.as_str(), s)))
        .collect();
    all.sort_by_key(|a| std::cmp::Reverse(a.1.value_ns));
    let dropped: u64 = inputs.iter().map(|i| i.record.spikes_dropped).sum();
    table_head(
        x,
        &[
            "record",
            "at",
            "cpu / task",
            "metric",
            "value",
            "causes (time taken)",
        ],
    );
    for (label, s) in all.iter().take(30) {
        x.open("tr", &[]);
        x.leaf("td", &[], label);
        x.leaf("td", &[("class", "num")], &fmt_ns(s.at_ns));
        x.leaf(
            "td",
            &[],
            &match &s.task {
                Some(t) => format!("cpu{} / {t}", s.cpu),
                None => format!("cpu{}", s.cpu),
            },
        );
        x.leaf("td", &[], s.metric.as_str());
        x.leaf("td", &[("class", "num")], &fmt_ns(s.value_ns));
        x.open("td", &[]);
        if s.causes.is_empty() {
            x.text("not attributed");
        } else {
            let mut causes: Vec<_> = s.causes.iter().collect();
            causes.sort_by_key(|c| std::cmp::Reverse(c.total_ns));
            x.open("ul", &[]);
            for c in causes {
                x.leaf(
                    "li",
                    &[],
                    &format!(
                        "{} {}: {} in {} event(s) ({:.0}%)",
                        c.kind,
                        c.name,
                        c.total_ns,
                        c.count,
                        c.share * 100.0
                    ),
                );
            }
            x.close("ul");
        }
        if s.incomplete {
            x.leaf(
                "span",
                &[("class", "sev-warn")],
                "trace events were lost in this window: attribution incomplete",
            );
        }
        x.close("td");
        x.close("tr");
    }
    x.close("table");
    if dropped > 0 {
        x.leaf(
            "p",
            &[("class", "note")],
            &format!(
                "{dropped} further spikes were counted but not stored (the spike log is bounded)."
            ),
        );
    }
}

fn section_periods(x: &mut Xml, inputs: &[Input], o: &HtmlOptions) {
    if inputs
        .iter()
        .all(|i| i.record.periods.is_empty() && i.record.period_summary.is_empty())
    {
        return;
    }
    x.leaf("h2", &[("id", "periods")], "Reservations: per period");
    x.leaf(
        "p",
        &[("class", "note")],
        "Each bar is one period: time received (blue) and time stolen (vermillion) stacked; the black line is the amount requested. The strip above the plot is green for a met deadline and red for a miss.",
    );
    let any_summary = inputs.iter().any(|i| !i.record.period_summary.is_empty());
    if any_summary {
        table_head(
            x,
            &[
                "record",
                "task",
                "periods",
                "misses",
                "reserved",
                "received",
                "stolen",
                "requested",
            ],
        );
        for i in inputs {
            for s in &i.record.period_summary {
                row(
                    x,
                    &[
                        i.label.clone(),
                        s.task.clone(),
                        s.periods.to_string(),
                        format!(
                            "{} ({:.2}%)",
                            s.misses,
                            100.0 * s.misses as f64 / s.periods.max(1) as f64
                        ),
                        fmt_ns(s.reserved_ns),
                        fmt_ns(s.received_total_ns),
                        fmt_ns(s.stolen_total_ns),
                        fmt_ns(s.requested_total_ns),
                    ],
                    2,
                );
            }
        }
        x.close("table");
    }
    let mut plots = 0;
    for i in inputs {
        let mut tasks: Vec<&str> = Vec::new();
        for p in &i.record.periods {
            if !tasks.contains(&p.task.as_str()) {
                tasks.push(&p.task);
            }
        }
        for t in tasks {
            if plots >= o.max_plots {
                break;
            }
            plots += 1;
            let ps: Vec<_> = i
                .record
                .periods
                .iter()
                .filter(|p| p.task == t)
                .take(o.max_periods)
                .collect();
            let ms = |n: Nanos| n.0 as f64 / 1e6;
            let c = PeriodChart {
                title: format!("{}: task {t}, first {} periods", i.label, ps.len()),
                y_label: "time (ms)".into(),
                index: ps.iter().map(|p| p.index as f64).collect(),
                stacks: vec![
                    (
                        "received".into(),
                        "#0072B2",
                        ps.iter().map(|p| ms(p.received_ns)).collect(),
                    ),
                    (
                        "stolen".into(),
                        "#D55E00",
                        ps.iter().map(|p| ms(p.stolen_ns)).collect(),
                    ),
                ],
                lines: vec![(
                    "requested".into(),
                    "#000000",
                    ps.iter().map(|p| ms(p.requested_ns)).collect(),
                )],
                hit: ps.iter().map(|p| p.hit).collect(),
            };
            x.fragment(c.render());
        }
    }
}

/// The chart of `extra.timeline` of one record, `None` when it has none or
/// it is malformed (a record from elsewhere must not break the page).
fn timeline_chart(label: &str, v: &serde_json::Value) -> Option<(GanttChart, usize, u64)> {
    let win = v.get("window_ns")?.as_array()?;
    let (w0, w1) = (win.first()?.as_u64()?, win.get(1)?.as_u64()?);
    if w1 <= w0 {
        return None;
    }
    let slices = v.get("slices")?.as_array()?;
    let dropped = v.get("dropped").and_then(|d| d.as_u64()).unwrap_or(0);
    // Rows: per CPU, thread tracks first, then the stolen-time tracks.
    let mut keys: Vec<(u64, bool, String)> = Vec::new();
    let mut parsed = Vec::new();
    for sl in slices {
        let (Some(cpu), Some(track), Some(start), Some(len)) = (
            sl.get("cpu").and_then(|c| c.as_u64()),
            sl.get("track").and_then(|c| c.as_str()),
            sl.get("start_ns").and_then(|c| c.as_u64()),
            sl.get("len_ns").and_then(|c| c.as_u64()),
        ) else {
            continue;
        };
        let stolen = sl.get("kind").and_then(|k| k.as_str()) == Some("stolen");
        let name = sl.get("name").and_then(|k| k.as_str()).unwrap_or(track);
        let key = (cpu, stolen, track.to_string());
        if !keys.contains(&key) {
            keys.push(key.clone());
        }
        parsed.push((key, start, len, stolen, name.to_string()));
    }
    if parsed.is_empty() {
        return None;
    }
    keys.sort();
    let ms = |n: u64| n as f64 / 1e6;
    let bars = parsed
        .into_iter()
        .filter_map(|(key, start, len, stolen, name)| {
            Some(GanttBar {
                row: keys.binary_search(&key).ok()?,
                start_ms: ms(start),
                len_ms: ms(len),
                stolen,
                name,
            })
        })
        .collect::<Vec<_>>();
    let n = bars.len();
    let chart = GanttChart {
        title: format!("{label}: execution timeline, {} to {} ms", ms(w0), ms(w1)),
        rows: keys.iter().map(|(c, _, t)| format!("cpu{c} {t}")).collect(),
        from_ms: ms(w0),
        to_ms: ms(w1),
        bars,
    };
    Some((chart, n, dropped))
}

fn section_timeline(x: &mut Xml, inputs: &[Input]) {
    let charts: Vec<_> = inputs
        .iter()
        .filter_map(|i| {
            let v = i.record.extra.get("timeline")?;
            timeline_chart(&i.label, v).map(|c| (i.label.clone(), c))
        })
        .collect();
    if charts.is_empty() {
        return;
    }
    x.leaf(
        "h2",
        &[("id", "timeline")],
        "Execution timeline (simulated)",
    );
    x.leaf(
        "p",
        &[("class", "note")],
        "Which thread had each CPU when, over the start of the simulated run: blue bars are a thread running, vermillion bars are time stolen from threads by interrupts, DPCs or the hypervisor. Hover a bar for its name, start and length.",
    );
    for (label, (chart, n, dropped)) in charts {
        x.fragment(chart.render());
        if dropped > 0 {
            x.leaf(
                "p",
                &[("class", "note")],
                &format!(
                    "{label}: {n} slices drawn; {dropped} more in the window were not kept (slice cap), so the right end of the chart is incomplete."
                ),
            );
        }
    }
}

fn section_loads(x: &mut Xml, inputs: &[Input]) {
    if inputs.iter().all(|i| i.record.load.is_empty()) {
        return;
    }
    x.leaf("h2", &[("id", "loads")], "Loads during the run");
    table_head(x, &["record", "kind", "spec", "achieved"]);
    for i in inputs {
        for l in &i.record.load {
            row(
                x,
                &[
                    i.label.clone(),
                    l.kind.clone(),
                    l.spec.clone(),
                    l.achieved
                        .iter()
                        .map(|(k, v)| format!("{k} = {v}"))
                        .collect::<Vec<_>>()
                        .join(", "),
                ],
                99,
            );
        }
    }
    x.close("table");
}

fn section_config(x: &mut Xml, inputs: &[Input]) {
    x.leaf("h2", &[("id", "config")], "Configuration");
    for i in inputs {
        x.open("details", &[]);
        x.leaf("summary", &[], &format!("{}: options of the run", i.label));
        let text = serde_json::to_string_pretty(&i.record.config).unwrap_or_default();
        x.leaf("pre", &[], &text);
        x.close("details");
    }
}

/// The whole page.
pub fn render(inputs: &[Input], o: &HtmlOptions) -> Vec<u8> {
    let mut x = Xml::new();
    x.doctype_html();
    x.open("html", &[("lang", "en")]);
    x.open("head", &[]);
    x.empty("meta", &[("charset", "utf-8")]);
    x.empty(
        "meta",
        &[
            ("name", "viewport"),
            ("content", "width=device-width, initial-scale=1"),
        ],
    );
    // No network even if a plot label looked like a URL.
    x.empty(
        "meta",
        &[
            ("http-equiv", "Content-Security-Policy"),
            (
                "content",
                "default-src 'none'; style-src 'unsafe-inline'; img-src data:",
            ),
        ],
    );
    let labels: Vec<&str> = inputs.iter().map(|i| i.label.as_str()).collect();
    x.leaf(
        "title",
        &[],
        &format!("punctual report: {}", labels.join(", ")),
    );
    x.open("style", &[]);
    x.trusted_static(CSS);
    x.close("style");
    x.close("head");
    x.open("body", &[]);
    x.leaf("h1", &[], "punctual report");
    x.leaf(
        "p",
        &[("class", "note")],
        &format!(
            "{} record(s): {}. Will the deadlines be met on this machine, how often not, and why.",
            inputs.len(),
            labels.join(", ")
        ),
    );
    // What a reader needs first: the verdicts (the answer people come
    // for, with their caveat), which runs, whether they are comparable,
    // what to distrust; then the plots; the full platform facts last.
    section_verdicts(&mut x, inputs);
    section_runs(&mut x, inputs);
    section_platform_diff(&mut x, inputs);
    section_warnings(&mut x, inputs);
    let mut models = tail::Models::default();
    section_tails(&mut x, inputs, o, &mut models);
    section_histograms(&mut x, inputs, o);
    section_mttf(&mut x, inputs, o, &mut models);
    section_forecast(&mut x, inputs);
    section_stolen(&mut x, inputs, o);
    section_spikes(&mut x, inputs);
    section_periods(&mut x, inputs, o);
    section_timeline(&mut x, inputs);
    section_loads(&mut x, inputs);
    section_platform(&mut x, inputs);
    section_config(&mut x, inputs);
    x.leaf(
        "footer",
        &[],
        &format!(
            "Made by punctual {} from the records above; self-contained, no scripts, no network.",
            env!("CARGO_PKG_VERSION")
        ),
    );
    x.close("body");
    x.close("html");
    let mut s = x.into_string();
    s.push('\n');
    s.into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// More buffering never underruns more often: where the model's MTTF
    /// fell as buffering grew, the smaller buffering is drawn at the
    /// larger one's, and the points lowered are counted.
    #[test]
    fn the_mttf_curve_never_falls_as_buffering_grows() {
        let mut pts = vec![(2.0, 1e24), (3.0, 1e16), (4.0, 1e18), (5.0, 1e17)];
        assert_eq!(monotone_mttf(&mut pts), 2);
        assert!(pts.windows(2).all(|w| w[0].1 <= w[1].1), "{pts:?}");
        assert_eq!(
            pts,
            vec![(2.0, 1e16), (3.0, 1e16), (4.0, 1e17), (5.0, 1e17)]
        );
    }

    /// A latency distribution spread over 10 µs – 1 ms in 1 µs buckets
    /// falls into many log-spaced bins, every decade as many, where 100 µs
    /// linear bins held most of it in one bar.
    #[test]
    fn histograms_bin_on_a_log_scale() {
        let buckets: Vec<(u64, u64)> = (10..1000u64).map(|us| (us * 1000, 1)).collect();
        let ratio = 10f64.powf(1.0 / 10.0);
        let bins = log_bins(&buckets, 1000, 1000.0, ratio);
        let decade = |lo: usize| {
            bins.iter()
                .filter(|(k, _)| (lo..lo + 10).contains(k))
                .count()
        };
        assert_eq!(decade(10), 10);
        assert_eq!(decade(20), 10);
        assert_eq!(bins.iter().map(|b| b.1).sum::<u64>(), 990);
    }

    /// A simulated record's note is its scenario's file name and
    /// description, not the scenario text it keeps for repeating the run,
    /// and its fixed 1970 start reads "simulated"; a measured record's
    /// start is its own.
    #[test]
    fn a_simulated_record_is_named_by_its_scenario_not_its_text_or_1970() {
        let mut r = Record::new(Source::Simulated, "simulate", Platform::default());
        r.started_at = "1970-01-01T00:00:00Z".into();
        r.config
            .insert("scenario_file".into(), "scenarios/audio.toml".into());
        r.config.insert(
            "scenario".into(),
            "[sim]\ndescription = \"audio under load\"\n[[task]]\nname = \"a\"\n".into(),
        );
        assert_eq!(started_text(&r), "simulated");
        assert_eq!(
            scenario_note(&r).as_deref(),
            Some("scenario audio.toml: audio under load")
        );
        let mut m = Record::new(Source::Measured, "timer", Platform::default());
        m.started_at = "2026-11-27T15:00:00Z".into();
        assert_eq!(started_text(&m), "2026-11-27T15:00:00Z");
        assert_eq!(scenario_note(&m), None);
    }

    /// An overlaid run keeps its colour on every plot: the colour is its
    /// place among the inputs, whichever other runs a plot shows.
    #[test]
    fn a_run_keeps_its_colour_from_plot_to_plot() {
        let inputs: Vec<Input> = (0..3)
            .map(|i| {
                Input::new(
                    format!("r{i}"),
                    Record::new(Source::Measured, "timer", Platform::default()),
                )
            })
            .collect();
        for (i, x) in inputs.iter().enumerate() {
            assert_eq!(colour_of(&inputs, &x.record), PALETTE[i % PALETTE.len()]);
        }
        assert_ne!(
            colour_of(&inputs, &inputs[1].record),
            colour_of(&inputs, &inputs[2].record)
        );
    }
}
