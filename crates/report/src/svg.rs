//! The plots of the HTML report, as inline SVG written through [`Xml`].
//!
//! Three shapes cover every figure the seeds use: lines on linear or log
//! axes (exceedance curves, MTTF against buffering, stolen time per
//! second), bars (histograms in fixed buckets), and stacked bars per period
//! with an overlaid line (received / stolen / requested, hit or miss).
//! Every chart puts its data inside `<g class="data">` so a browser test
//! can check that each plot drew something.

use crate::xml::Xml;

/// Width and height of every chart in CSS pixels; the page scales them.
const W: f64 = 720.0;
const H: f64 = 340.0;
const LEFT: f64 = 78.0;
const RIGHT: f64 = 20.0;
const TOP: f64 = 34.0;
const BOTTOM: f64 = 52.0;

/// Distinct, colour-blind-friendly series colours (Okabe–Ito).
pub const PALETTE: [&str; 8] = [
    "#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000", "#F0E442",
];

#[derive(Clone, Copy, Debug)]
pub enum Scale {
    Linear { min: f64, max: f64 },
    Log { min: f64, max: f64 },
}

impl Scale {
    fn frac(&self, v: f64) -> f64 {
        match *self {
            Scale::Linear { min, max } => {
                if max > min {
                    (v - min) / (max - min)
                } else {
                    0.5
                }
            }
            Scale::Log { min, max } => {
                let (lmin, lmax) = (min.max(f64::MIN_POSITIVE).log10(), max.log10());
                if lmax > lmin {
                    (v.max(f64::MIN_POSITIVE).log10() - lmin) / (lmax - lmin)
                } else {
                    0.5
                }
            }
        }
    }

    /// A log scale that covers `lo..hi` in whole decades.
    pub fn log_covering(lo: f64, hi: f64) -> Scale {
        let lo = lo.max(1e-300);
        let hi = hi.max(lo);
        let min = 10f64.powf(lo.log10().floor());
        let mut max = 10f64.powf(hi.log10().ceil());
        if max <= min {
            max = min * 10.0;
        }
        Scale::Log { min, max }
    }

    /// A linear scale from `lo` to a rounded-up `hi`.
    pub fn linear_covering(lo: f64, hi: f64) -> Scale {
        let hi = if hi > lo { hi } else { lo + 1.0 };
        let step = nice_step((hi - lo) / 5.0);
        Scale::Linear {
            min: (lo / step).floor() * step,
            max: (hi / step).ceil() * step,
        }
    }

    fn ticks(&self) -> Vec<f64> {
        match *self {
            Scale::Linear { min, max } => {
                let step = nice_step((max - min) / 5.0);
                let mut v = Vec::new();
                let mut t = (min / step).ceil() * step;
                while t <= max + step * 1e-9 && v.len() < 20 {
                    v.push(t);
                    t += step;
                }
                v
            }
            Scale::Log { min, max } => {
                let mut v = Vec::new();
                let mut e = min.log10().floor() as i32;
                let decades = (max.log10() - min.log10()).ceil() as i32;
                // Thin the labels of very wide ranges to every other decade.
                let every = if decades > 10 { 2 } else { 1 };
                while 10f64.powi(e) <= max * 1.000001 && v.len() < 30 {
                    if e % every == 0 {
                        v.push(10f64.powi(e));
                    }
                    e += 1;
                }
                v
            }
        }
    }
}

fn nice_step(raw: f64) -> f64 {
    if raw <= 0.0 || !raw.is_finite() {
        return 1.0;
    }
    let mag = 10f64.powf(raw.log10().floor());
    let n = raw / mag;
    let m = if n <= 1.0 {
        1.0
    } else if n <= 2.0 {
        2.0
    } else if n <= 5.0 {
        5.0
    } else {
        10.0
    };
    m * mag
}

/// How tick values print: the axis unit is in the label, values are plain.
fn tick_label(v: f64) -> String {
    if v == 0.0 {
        return "0".into();
    }
    let a = v.abs();
    if !(1e-3..1e6).contains(&a) {
        let e = a.log10().floor() as i32;
        let m = v / 10f64.powi(e);
        if (m - 1.0).abs() < 1e-9 {
            format!("1e{e}")
        } else {
            format!("{m:.1}e{e}")
        }
    } else if a >= 1.0 && (v - v.round()).abs() < 1e-9 {
        format!("{}", v.round() as i64)
    } else {
        let s = format!("{v:.3}");
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    }
}

/// Ticks for a log axis of durations in seconds, labelled in the unit a
/// reader thinks in (`1 ms`, `1 s`, `1 min`, `1 h`, `1 d`, `1 y`) rather
/// than powers of ten, for the spans between `min_s` and `max_s`.
pub fn time_ticks(min_s: f64, max_s: f64) -> Vec<(f64, String)> {
    const Y: f64 = 365.25 * 86_400.0;
    const UNITS: [(f64, &str); 16] = [
        (1e-3, "1 ms"),
        (1e-2, "10 ms"),
        (0.1, "100 ms"),
        (1.0, "1 s"),
        (10.0, "10 s"),
        (60.0, "1 min"),
        (600.0, "10 min"),
        (3600.0, "1 h"),
        (86_400.0, "1 d"),
        (604_800.0, "1 w"),
        (30.0 * 86_400.0, "30 d"),
        (Y, "1 y"),
        (10.0 * Y, "10 y"),
        (100.0 * Y, "100 y"),
        (1000.0 * Y, "1000 y"),
        (1e4 * Y, "10000 y"),
    ];
    UNITS
        .iter()
        .filter(|(v, _)| *v >= min_s * 0.999 && *v <= max_s * 1.001)
        .map(|(v, l)| (*v, l.to_string()))
        .collect()
}

fn f(v: f64) -> String {
    format!("{v:.2}")
}

pub struct Line {
    pub name: String,
    pub points: Vec<(f64, f64)>,
    /// Points that are not measured but extrapolated are drawn dashed.
    pub dashed: bool,
    /// Draw dots at the points (few points, e.g. MTTF per buffer count).
    pub markers: bool,
    /// Fixed colour (the record's, so overlaid runs keep theirs from plot
    /// to plot); `None`: by position in the chart.
    pub colour: Option<&'static str>,
}

/// A vertical or horizontal reference line with a label.
pub struct Mark {
    pub at: f64,
    pub label: String,
}

pub struct LineChart {
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    pub x: Scale,
    pub y: Scale,
    pub lines: Vec<Line>,
    pub x_marks: Vec<Mark>,
    pub y_marks: Vec<Mark>,
    /// Tick positions and labels for y instead of the scale's own (e.g.
    /// time units: 1 s, 1 min, 1 h, 1 d).
    pub y_ticks: Option<Vec<(f64, String)>>,
}

struct Frame {
    x: Scale,
    y: Scale,
}

impl Frame {
    fn px(&self, v: f64) -> f64 {
        LEFT + self.x.frac(v).clamp(-0.02, 1.02) * (W - LEFT - RIGHT)
    }
    fn py(&self, v: f64) -> f64 {
        H - BOTTOM - self.y.frac(v).clamp(-0.02, 1.02) * (H - TOP - BOTTOM)
    }
}

/// Legend rows go under the plot, three entries per row, so they never
/// hide data or reference marks.
fn legend_height(n: usize) -> f64 {
    if n < 2 {
        0.0
    } else {
        n.div_ceil(3) as f64 * 16.0 + 6.0
    }
}

fn open_svg(x: &mut Xml, title: &str, kind: &str, legend_entries: usize) {
    let h = H + legend_height(legend_entries);
    x.open(
        "svg",
        &[
            ("xmlns", "http://www.w3.org/2000/svg"),
            ("class", &format!("plot {kind}")),
            ("viewBox", &format!("0 0 {W} {h}")),
            ("role", "img"),
        ],
    );
    x.leaf("title", &[], title);
    x.leaf(
        "text",
        &[
            ("x", &f(W / 2.0)),
            ("y", "20"),
            ("text-anchor", "middle"),
            ("class", "ptitle"),
        ],
        title,
    );
}

fn axes(x: &mut Xml, fr: &Frame, x_label: &str, y_label: &str, x_ticks: bool) {
    let y_ticks: Vec<(f64, String)> =
        fr.y.ticks()
            .into_iter()
            .map(|t| (t, tick_label(t)))
            .collect();
    axes_with(x, fr, x_label, y_label, x_ticks, &y_ticks);
}

fn axes_with(
    x: &mut Xml,
    fr: &Frame,
    x_label: &str,
    y_label: &str,
    x_ticks: bool,
    y_ticks: &[(f64, String)],
) {
    let (x0, x1, y0, y1) = (LEFT, W - RIGHT, TOP, H - BOTTOM);
    x.open("g", &[("class", "axes")]);
    x.empty(
        "rect",
        &[
            ("x", &f(x0)),
            ("y", &f(y0)),
            ("width", &f(x1 - x0)),
            ("height", &f(y1 - y0)),
            ("class", "frame"),
        ],
    );
    if x_ticks {
        for t in fr.x.ticks() {
            let px = fr.px(t);
            x.empty(
                "line",
                &[
                    ("x1", &f(px)),
                    ("x2", &f(px)),
                    ("y1", &f(y0)),
                    ("y2", &f(y1)),
                    ("class", "grid"),
                ],
            );
            x.leaf(
                "text",
                &[
                    ("x", &f(px)),
                    ("y", &f(y1 + 16.0)),
                    ("text-anchor", "middle"),
                    ("class", "tick"),
                ],
                &tick_label(t),
            );
        }
    }
    for (t, label) in y_ticks {
        let py = fr.py(*t);
        x.empty(
            "line",
            &[
                ("x1", &f(x0)),
                ("x2", &f(x1)),
                ("y1", &f(py)),
                ("y2", &f(py)),
                ("class", "grid"),
            ],
        );
        x.leaf(
            "text",
            &[
                ("x", &f(x0 - 6.0)),
                ("y", &f(py + 4.0)),
                ("text-anchor", "end"),
                ("class", "tick"),
            ],
            label,
        );
    }
    x.leaf(
        "text",
        &[
            ("x", &f((x0 + x1) / 2.0)),
            ("y", &f(H - 10.0)),
            ("text-anchor", "middle"),
            ("class", "alabel"),
        ],
        x_label,
    );
    x.leaf(
        "text",
        &[
            ("x", "14"),
            ("y", &f((y0 + y1) / 2.0)),
            ("text-anchor", "middle"),
            ("class", "alabel"),
            (
                "transform",
                &format!("rotate(-90 14 {})", f((y0 + y1) / 2.0)),
            ),
        ],
        y_label,
    );
    x.close("g");
}

fn legend(x: &mut Xml, names: &[(String, &str, bool)]) {
    if names.len() < 2 {
        return;
    }
    x.open("g", &[("class", "legend")]);
    let col_w = (W - LEFT) / 3.0;
    for (i, (name, colour, dashed)) in names.iter().enumerate() {
        let lx = LEFT + col_w * (i % 3) as f64;
        let y = H + 12.0 + 16.0 * (i / 3) as f64;
        let mut attrs = vec![
            ("x1", f(lx)),
            ("x2", f(lx + 22.0)),
            ("y1", f(y - 4.0)),
            ("y2", f(y - 4.0)),
            ("stroke", colour.to_string()),
            ("class", "lline".to_string()),
        ];
        if *dashed {
            attrs.push(("stroke-dasharray", "5 3".into()));
        }
        let a: Vec<(&str, &str)> = attrs.iter().map(|(k, v)| (*k, v.as_str())).collect();
        x.empty("line", &a);
        x.leaf(
            "text",
            &[("x", &f(lx + 28.0)), ("y", &f(y)), ("class", "ltext")],
            &truncate(name, 34),
        );
    }
    x.close("g");
}

fn truncate(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        let mut t: String = s.chars().take(n - 1).collect();
        t.push('…');
        t
    }
}

impl LineChart {
    pub fn render(&self) -> Xml {
        let mut x = Xml::new();
        let fr = Frame {
            x: self.x,
            y: self.y,
        };
        open_svg(&mut x, &self.title, "line", self.lines.len());
        match &self.y_ticks {
            Some(t) => axes_with(&mut x, &fr, &self.x_label, &self.y_label, true, t),
            None => axes(&mut x, &fr, &self.x_label, &self.y_label, true),
        }
        x.open("g", &[("class", "data")]);
        let mut names = Vec::new();
        for (i, l) in self.lines.iter().enumerate() {
            let colour = l.colour.unwrap_or(PALETTE[i % PALETTE.len()]);
            names.push((l.name.clone(), colour, l.dashed));
            let pts: Vec<(f64, f64)> = l
                .points
                .iter()
                .filter(|(a, b)| a.is_finite() && b.is_finite())
                .copied()
                .collect();
            if pts.is_empty() {
                continue;
            }
            let mut d = String::new();
            for (k, (a, b)) in pts.iter().enumerate() {
                d.push_str(if k == 0 { "M" } else { "L" });
                d.push_str(&format!("{} {} ", f(fr.px(*a)), f(fr.py(*b))));
            }
            let mut attrs = vec![
                ("d", d.trim_end().to_string()),
                ("stroke", colour.to_string()),
                ("class", "series".to_string()),
            ];
            if l.dashed {
                attrs.push(("stroke-dasharray", "6 4".into()));
            }
            let a: Vec<(&str, &str)> = attrs.iter().map(|(k, v)| (*k, v.as_str())).collect();
            x.empty("path", &a);
            if l.markers || pts.len() == 1 {
                for (a, b) in &pts {
                    x.empty(
                        "circle",
                        &[
                            ("cx", &f(fr.px(*a))),
                            ("cy", &f(fr.py(*b))),
                            ("r", "3"),
                            ("fill", colour),
                        ],
                    );
                }
            }
        }
        x.close("g");
        x.open("g", &[("class", "marks")]);
        for (i, m) in self.x_marks.iter().enumerate() {
            let px = fr.px(m.at);
            x.empty(
                "line",
                &[
                    ("x1", &f(px)),
                    ("x2", &f(px)),
                    ("y1", &f(TOP)),
                    ("y2", &f(H - BOTTOM)),
                    ("class", "mark"),
                ],
            );
            x.leaf(
                "text",
                &[
                    ("x", &f(px + 3.0)),
                    ("y", &f(TOP + 12.0 + 12.0 * (i % 4) as f64)),
                    ("class", "mtext"),
                ],
                &m.label,
            );
        }
        for m in &self.y_marks {
            let py = fr.py(m.at);
            x.empty(
                "line",
                &[
                    ("x1", &f(LEFT)),
                    ("x2", &f(W - RIGHT)),
                    ("y1", &f(py)),
                    ("y2", &f(py)),
                    ("class", "target"),
                ],
            );
            x.leaf(
                "text",
                &[
                    ("x", &f(LEFT + 4.0)),
                    ("y", &f(py - 4.0)),
                    ("class", "mtext"),
                ],
                &m.label,
            );
        }
        x.close("g");
        legend(&mut x, &names);
        x.close("svg");
        x
    }
}

/// One bar: from x0 to x1, this high.
pub type Bar = (f64, f64, f64);

/// Bars over `[x0, x1)` ranges: histograms.
pub struct BarChart {
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    pub x: Scale,
    pub y: Scale,
    /// (x0, x1, height) per series; series overlay with transparency.
    pub series: Vec<(String, Vec<Bar>)>,
    /// Colour per series (the record's); missing: by position.
    pub colours: Vec<&'static str>,
}

impl BarChart {
    pub fn render(&self) -> Xml {
        let mut x = Xml::new();
        let fr = Frame {
            x: self.x,
            y: self.y,
        };
        open_svg(&mut x, &self.title, "bars", self.series.len());
        axes(&mut x, &fr, &self.x_label, &self.y_label, true);
        x.open("g", &[("class", "data")]);
        let base = match self.y {
            Scale::Linear { min, .. } => min,
            Scale::Log { min, .. } => min,
        };
        let mut names = Vec::new();
        for (i, (name, bars)) in self.series.iter().enumerate() {
            let colour = self
                .colours
                .get(i)
                .copied()
                .unwrap_or(PALETTE[i % PALETTE.len()]);
            names.push((name.clone(), colour, false));
            for (a, b, h) in bars {
                if *h <= 0.0 {
                    continue;
                }
                let (px0, px1) = (fr.px(*a), fr.px(*b));
                let (py0, py1) = (fr.py(*h), fr.py(base));
                x.empty(
                    "rect",
                    &[
                        ("x", &f(px0)),
                        ("y", &f(py0)),
                        ("width", &f((px1 - px0).max(1.0))),
                        ("height", &f((py1 - py0).max(1.0))),
                        ("fill", colour),
                        ("class", "bar"),
                    ],
                );
            }
        }
        x.close("g");
        legend(&mut x, &names);
        x.close("svg");
        x
    }
}

/// One bar per period, stacked, with an overlaid line and a hit/miss strip.
pub struct PeriodChart {
    pub title: String,
    pub y_label: String,
    /// Period indices along x.
    pub index: Vec<f64>,
    /// Stacked components, bottom first: (name, colour, values in y units).
    pub stacks: Vec<(String, &'static str, Vec<f64>)>,
    /// Overlaid lines (e.g. requested amount).
    pub lines: Vec<(String, &'static str, Vec<f64>)>,
    /// Per period: true when the deadline was met.
    pub hit: Vec<bool>,
}

impl PeriodChart {
    pub fn render(&self) -> Xml {
        let mut x = Xml::new();
        let n = self.index.len().max(1);
        let mut ymax: f64 = 0.0;
        for i in 0..self.index.len() {
            let s: f64 = self
                .stacks
                .iter()
                .map(|st| st.2.get(i).copied().unwrap_or(0.0))
                .sum();
            ymax = ymax.max(s);
            for l in &self.lines {
                ymax = ymax.max(l.2.get(i).copied().unwrap_or(0.0));
            }
        }
        let first = self.index.first().copied().unwrap_or(0.0);
        let last = self.index.last().copied().unwrap_or(1.0);
        let fr = Frame {
            x: Scale::Linear {
                min: first - 0.5,
                max: last + 0.5,
            },
            y: Scale::linear_covering(0.0, ymax * 1.1),
        };
        open_svg(
            &mut x,
            &self.title,
            "periods",
            self.stacks.len() + self.lines.len(),
        );
        axes(&mut x, &fr, "period", &self.y_label, true);
        x.open("g", &[("class", "data")]);
        let slot = (W - LEFT - RIGHT) / n as f64;
        for (i, &ix) in self.index.iter().enumerate() {
            let mut acc = 0.0;
            for (_, colour, vals) in &self.stacks {
                let v = vals.get(i).copied().unwrap_or(0.0);
                if v <= 0.0 {
                    continue;
                }
                let (py0, py1) = (fr.py(acc + v), fr.py(acc));
                acc += v;
                x.empty(
                    "rect",
                    &[
                        ("x", &f(fr.px(ix) - slot * 0.4)),
                        ("y", &f(py0)),
                        ("width", &f((slot * 0.8).max(0.8))),
                        ("height", &f((py1 - py0).max(0.5))),
                        ("fill", colour),
                        ("class", "bar"),
                    ],
                );
            }
            let hit = self.hit.get(i).copied().unwrap_or(true);
            x.empty(
                "rect",
                &[
                    ("x", &f(fr.px(ix) - slot * 0.4)),
                    ("y", &f(TOP - 7.0)),
                    ("width", &f((slot * 0.8).max(0.8))),
                    ("height", "5"),
                    ("class", if hit { "hit" } else { "miss" }),
                ],
            );
        }
        for (_, colour, vals) in &self.lines {
            let mut d = String::new();
            for (i, &ix) in self.index.iter().enumerate() {
                let v = vals.get(i).copied().unwrap_or(0.0);
                d.push_str(if i == 0 { "M" } else { "L" });
                d.push_str(&format!(
                    "{} {} L{} {} ",
                    f(fr.px(ix) - slot / 2.0),
                    f(fr.py(v)),
                    f(fr.px(ix) + slot / 2.0),
                    f(fr.py(v))
                ));
            }
            x.empty(
                "path",
                &[("d", d.trim_end()), ("stroke", colour), ("class", "series")],
            );
        }
        x.close("g");
        let mut names: Vec<(String, &str, bool)> = self
            .stacks
            .iter()
            .map(|s| (s.0.clone(), s.1, false))
            .collect();
        names.extend(self.lines.iter().map(|l| (l.0.clone(), l.1, false)));
        legend(&mut x, &names);
        x.close("svg");
        x
    }
}

/// One bar of a [`GanttChart`].
pub struct GanttBar {
    pub row: usize,
    pub start_ms: f64,
    pub len_ms: f64,
    /// Stolen time (interrupts, DPCs, hypervisor) rather than a thread run.
    pub stolen: bool,
    /// Shown on hover: what ran.
    pub name: String,
}

/// Who had each CPU when, one row per (CPU, track), stolen slices in a
/// contrasting colour (Regehr's thesis Figures 11.1/11.2).
pub struct GanttChart {
    pub title: String,
    pub rows: Vec<String>,
    /// Time axis range in milliseconds.
    pub from_ms: f64,
    pub to_ms: f64,
    pub bars: Vec<GanttBar>,
}

/// Colours of the Gantt chart: thread runs blue, stolen time vermillion.
pub const GANTT_RUN: &str = "#0072B2";
pub const GANTT_STOLEN: &str = "#D55E00";

impl GanttChart {
    pub fn render(&self) -> Xml {
        const ROW: f64 = 20.0;
        const LABEL_W: f64 = 150.0;
        let mut x = Xml::new();
        let plot_h = ROW * self.rows.len().max(1) as f64;
        let h = TOP + plot_h + BOTTOM + 22.0;
        x.open(
            "svg",
            &[
                ("xmlns", "http://www.w3.org/2000/svg"),
                ("class", "plot gantt"),
                ("viewBox", &format!("0 0 {W} {}", f(h))),
                ("role", "img"),
            ],
        );
        x.leaf("title", &[], &self.title);
        x.leaf(
            "text",
            &[
                ("x", &f(W / 2.0)),
                ("y", "20"),
                ("text-anchor", "middle"),
                ("class", "ptitle"),
            ],
            &self.title,
        );
        let (x0, x1) = (LABEL_W, W - RIGHT);
        let span = (self.to_ms - self.from_ms).max(1e-9);
        let px = |ms: f64| x0 + ((ms - self.from_ms) / span).clamp(0.0, 1.0) * (x1 - x0);
        let y_end = TOP + plot_h;
        x.open("g", &[("class", "axes")]);
        for (i, r) in self.rows.iter().enumerate() {
            let y = TOP + ROW * i as f64;
            if i % 2 == 1 {
                x.empty(
                    "rect",
                    &[
                        ("x", &f(x0)),
                        ("y", &f(y)),
                        ("width", &f(x1 - x0)),
                        ("height", &f(ROW)),
                        ("fill", "#f3f3f3"),
                    ],
                );
            }
            x.leaf(
                "text",
                &[
                    ("x", &f(x0 - 6.0)),
                    ("y", &f(y + ROW * 0.7)),
                    ("text-anchor", "end"),
                    ("class", "tick"),
                ],
                &truncate(r, 22),
            );
        }
        x.empty(
            "rect",
            &[
                ("x", &f(x0)),
                ("y", &f(TOP)),
                ("width", &f(x1 - x0)),
                ("height", &f(plot_h)),
                ("class", "frame"),
                ("fill", "none"),
                ("stroke", "#888"),
            ],
        );
        let scale = Scale::Linear {
            min: self.from_ms,
            max: self.to_ms,
        };
        for t in scale.ticks() {
            let tx = px(t);
            x.empty(
                "line",
                &[
                    ("x1", &f(tx)),
                    ("x2", &f(tx)),
                    ("y1", &f(y_end)),
                    ("y2", &f(y_end + 5.0)),
                    ("stroke", "#888"),
                ],
            );
            x.leaf(
                "text",
                &[
                    ("x", &f(tx)),
                    ("y", &f(y_end + 18.0)),
                    ("text-anchor", "middle"),
                    ("class", "tick"),
                ],
                &tick_label(t),
            );
        }
        x.leaf(
            "text",
            &[
                ("x", &f((x0 + x1) / 2.0)),
                ("y", &f(y_end + 36.0)),
                ("text-anchor", "middle"),
                ("class", "alabel"),
            ],
            "simulated time (ms)",
        );
        x.close("g");
        x.open("g", &[("class", "data")]);
        for b in &self.bars {
            if b.row >= self.rows.len() {
                continue;
            }
            let bx = px(b.start_ms);
            // A slice shorter than a pixel still shows: stolen gaps of a
            // few microseconds are the point of the chart.
            let bw = (px(b.start_ms + b.len_ms) - bx).max(0.8);
            let y = TOP + ROW * b.row as f64 + 3.0;
            x.open(
                "rect",
                &[
                    ("x", &f(bx)),
                    ("y", &f(y)),
                    ("width", &f(bw)),
                    ("height", &f(ROW - 6.0)),
                    ("fill", if b.stolen { GANTT_STOLEN } else { GANTT_RUN }),
                    ("class", if b.stolen { "bar stolen" } else { "bar run" }),
                ],
            );
            x.leaf(
                "title",
                &[],
                &format!("{} {:.3} ms +{:.3} ms", b.name, b.start_ms, b.len_ms),
            );
            x.close("rect");
        }
        x.close("g");
        x.open("g", &[("class", "legend")]);
        let ly = y_end + 50.0;
        for (i, (name, colour)) in [("thread running", GANTT_RUN), ("stolen", GANTT_STOLEN)]
            .iter()
            .enumerate()
        {
            let lx = x0 + 180.0 * i as f64;
            x.empty(
                "rect",
                &[
                    ("x", &f(lx)),
                    ("y", &f(ly - 10.0)),
                    ("width", "22"),
                    ("height", "10"),
                    ("fill", colour),
                ],
            );
            x.leaf(
                "text",
                &[("x", &f(lx + 28.0)), ("y", &f(ly)), ("class", "ltext")],
                name,
            );
        }
        x.close("g");
        x.close("svg");
        x
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_ticks_are_decades() {
        let s = Scale::log_covering(3.0, 4000.0);
        assert_eq!(s.ticks(), vec![1.0, 10.0, 100.0, 1000.0, 10000.0]);
        assert_eq!(tick_label(1e-6), "1e-6");
        assert_eq!(tick_label(250.0), "250");
        assert_eq!(tick_label(0.5), "0.5");
    }

    #[test]
    fn time_ticks_read_in_time_units() {
        let t = time_ticks(0.5, 86_400.0 * 3.0);
        let labels: Vec<&str> = t.iter().map(|x| x.1.as_str()).collect();
        assert_eq!(labels, ["1 s", "10 s", "1 min", "10 min", "1 h", "1 d"]);
    }

    #[test]
    fn chart_names_are_escaped_and_data_drawn() {
        let c = LineChart {
            title: "cpu0 <script>alert(1)</script>".into(),
            x_label: "x".into(),
            y_label: "y".into(),
            x: Scale::log_covering(1.0, 100.0),
            y: Scale::log_covering(1e-3, 1.0),
            lines: vec![Line {
                name: "<img src=x onerror=alert(1)>".into(),
                points: vec![(1.0, 1.0), (10.0, 0.1), (100.0, 0.001)],
                dashed: false,
                markers: false,
                colour: None,
            }],
            x_marks: vec![],
            y_marks: vec![],
            y_ticks: None,
        };
        let s = c.render().into_string();
        assert!(!s.contains("<script"));
        assert!(!s.contains("<img"));
        assert!(s.contains("<path d=\"M"));
    }
}
