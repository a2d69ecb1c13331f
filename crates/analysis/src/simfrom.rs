//! A simulator scenario built from a measured record (`punctual simulate
//! --from RECORD`), so that what was measured can be varied: its noise
//! sources and its probed task, written as the TOML of
//! docs/scenario-format.md.
//!
//! What each record gives:
//! - a noise probe's gap log (`cpuN.gap`, a `noise` record or the noise
//!   half of a `check`): the time stolen from a running thread. With cause
//!   attribution every named source becomes a noise source (its count and
//!   total over the run; its lengths from the spike log's per-gap
//!   breakdown, the occurrences the log did not keep at the mean that is
//!   left), and the gaps no source accounts for become one `unattributed`
//!   source with what is left of the gap histogram. Without attribution,
//!   the gap histogram is one source;
//! - a timer probe's latency (`cpuN.latency`): the probed task, released
//!   every interval by a timer whose DPC costs what the wake-up path cost
//!   (the latencies below the stall threshold of the queue model,
//!   [`StallModel::from_tail`]); when the record has no gap log for that
//!   CPU, the stalls of the latency tail (the same model's rate and
//!   lengths) as noise, split between the sources that dominate the
//!   logged spikes.
//!
//! A source's arrivals are periodic when its logged times sit on a period
//! ([`crate::periodic::detect`]; RT throttling at the kernel's
//! `sched_rt_period_us`), Poisson otherwise. Lengths are `cdf`
//! distributions, so the measured histogram is replayed as it was.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use punctual_record::cause::CpuAccount;
use punctual_record::{Metric, Record, Series, Spike, Stolen};
use punctual_units::Nanos;

use crate::queue::StallModel;
use crate::tail::Tail;

/// A scenario built from a record, with what the builder had to assume.
#[derive(Clone, Debug)]
pub struct Built {
    pub toml: String,
    /// One line per assumption or simplification, printed to the user.
    pub notes: Vec<String>,
}

/// Sources below this share of a CPU's stolen time (or of its spikes) are
/// folded into `unattributed`: a scenario with dozens of 0.0 % sources is
/// harder to edit and replays no differently.
pub const MIN_SOURCE_SHARE: f64 = 0.001;

/// A piece of a length distribution: `weight` occurrences spread uniformly
/// over `[lo, hi]` ns (an atom when lo = hi).
#[derive(Clone, Copy, Debug, PartialEq)]
struct Piece {
    lo: f64,
    hi: f64,
    weight: f64,
}

/// How a source's arrivals come.
#[derive(Clone, Debug, PartialEq)]
enum Arrivals {
    Poisson { rate_per_s: f64 },
    Periodic { period_ns: u64, phase_ns: u64 },
}

#[derive(Clone, Debug)]
struct NoiseOut {
    name: String,
    cpu: usize,
    level: &'static str,
    arrivals: Arrivals,
    lengths: Vec<Piece>,
    comment: String,
}

/// The simulator level a measured source kind acts at: hardware
/// interrupts and system vectors as `irq`, softirqs, kernel and user
/// threads and RT throttling as `dpc` (deferred work the probe waits
/// behind), the hypervisor and unexplained time as `steal`.
fn level_of(kind: &str) -> &'static str {
    match kind {
        "irq" | "vector" | "nmi" => "irq",
        "hypervisor" | "unexplained" => "steal",
        _ => "dpc",
    }
}

/// Builds the scenario of `rec` (named `label` in comments and errors).
pub fn scenario_from_record(rec: &Record, label: &str) -> Result<Built, String> {
    let mut cpus: Vec<u32> = rec
        .series
        .iter()
        .filter(|s| matches!(s.metric, Metric::Latency | Metric::Gap) && s.task.is_none())
        .filter_map(|s| s.cpu)
        .collect();
    cpus.sort_unstable();
    cpus.dedup();
    if cpus.is_empty() {
        return Err(format!(
            "{label} has no per-CPU latency or gap series to build a scenario from \
             (a record of `punctual timer`, `noise` or `check`)"
        ));
    }
    let mut notes = Vec::new();
    let gap_cause = if rec.kind == "check" {
        rec.cause_noise()
    } else {
        rec.cause()
    };
    let lat_cause = rec.cause();
    let policy = ["policy", "timer.policy", "noise.policy"]
        .iter()
        .find_map(|k| rec.config.get(*k).and_then(|v| v.as_str()))
        .unwrap_or("fifo:95")
        .to_string();
    let rt = policy.starts_with("fifo") || policy.starts_with("rr");
    let rt_period_ns = rec
        .platform
        .rt_period_us
        .filter(|&p| p > 0)
        .map(|p| p as u64 * 1000);

    let mut tasks = String::new();
    let mut timers = String::new();
    let mut noises: Vec<NoiseOut> = Vec::new();
    let mut has_gaps = false;
    for (i, &c) in cpus.iter().enumerate() {
        let lat = find_series(rec, c, Metric::Latency);
        let gap = find_series(rec, c, Metric::Gap);
        let stolen = rec.stolen.iter().find(|s| s.cpu == c);
        let probe = format!("probe-cpu{c}");
        let prio = if rt {
            format!("priority = 31  # measured at {policy}\n")
        } else {
            format!("# measured at {policy}: time-sharing\n")
        };
        if let Some(lat) = lat {
            let tail = Tail::from_series(lat);
            if tail.n == 0 {
                return Err(format!("{label}: series {} is empty", lat.name));
            }
            let interval = lat.sample_period_ns.filter(|p| !p.is_zero()).ok_or_else(|| {
                format!(
                    "{label}: series {} has no sample_period_ns, so the probe's interval is unknown",
                    lat.name
                )
            })?;
            let stalls = StallModel::from_tail(&tail);
            let body: Vec<Piece> = tail
                .buckets()
                .iter()
                .filter(|(lo, _)| *lo < stalls.threshold_ns.0)
                .map(|&(lo, n)| Piece {
                    lo: lo as f64,
                    hi: (lo + tail.bucket_ns) as f64,
                    weight: n as f64,
                })
                .collect();
            let _ = write!(
                tasks,
                "\n[[task]]\n# the timer probe of {}: woken every {interval}\nname = {}\nkind = \"timer\"\ncpu = {i}\n{prio}exec = \"1us\"\n",
                lat.name,
                q(&probe),
            );
            let _ = write!(
                timers,
                "\n[[timer]]\n# the wake-up path: {} of {} wake-ups at or below the stall threshold {} (median {})\nname = {}\nperiod = \"{}ns\"\nmode = \"fixed\"\ntask = {}\ncpu = {i}\ndpc_cost = {}\n",
                body.iter().map(|p| p.weight).sum::<f64>() as u64,
                tail.n,
                stalls.threshold_ns,
                stalls.base_ns,
                q(&format!("wakeup-cpu{c}")),
                interval.0,
                q(&probe),
                cdf_toml(&body),
            );
            if gap.is_none() {
                let spikes: Vec<&Spike> = rec
                    .spikes
                    .iter()
                    .filter(|s| s.cpu == c && s.metric == Metric::Latency && s.task.is_none())
                    .collect();
                latency_sources(
                    &stalls,
                    &spikes,
                    lat_cause.is_some(),
                    i,
                    c,
                    interval,
                    &mut noises,
                    &mut notes,
                );
            }
        } else {
            let _ = write!(
                tasks,
                "\n[[task]]\n# the noise probe: a thread that never sleeps\nname = {}\nkind = \"background\"\ncpu = {i}\n{prio}",
                q(&probe),
            );
        }
        if let (Some(gap), Some(stolen)) = (gap, stolen) {
            has_gaps = true;
            let spikes: Vec<&Spike> = rec
                .spikes
                .iter()
                .filter(|s| s.cpu == c && s.metric == Metric::Gap)
                .collect();
            let acct = gap_cause
                .as_ref()
                .and_then(|cs| cs.per_cpu.iter().find(|a| a.cpu == c));
            gap_sources(
                gap,
                stolen,
                acct,
                &spikes,
                rec.spikes_dropped > 0,
                i,
                c,
                rt_period_ns,
                &mut noises,
                &mut notes,
            );
        } else if gap.is_some() {
            notes.push(format!(
                "cpu{c}: the gap series has no stolen-time entry; its noise is left out"
            ));
        }
    }

    let duration = if rec.duration_ns.is_zero() {
        Nanos::from_secs(10)
    } else {
        rec.duration_ns
    };
    let mut out = String::new();
    let _ = writeln!(
        out,
        "# Built by `punctual simulate --from` from {} (a `{}` record).",
        label.replace('\n', " "),
        rec.kind
    );
    out.push_str("# Every source below comes from the record; edit and replay it with `punctual simulate`.\n");
    let _ = write!(
        out,
        "\n[sim]\nduration = \"{}ns\"\ncpus = {}\ndescription = {}\n",
        duration.0,
        cpus.len(),
        q(&format!(
            "{} record {}, cpus {}",
            rec.kind,
            label,
            cpus.iter()
                .map(|c| c.to_string())
                .collect::<Vec<_>>()
                .join(",")
        ))
    );
    if has_gaps {
        out.push_str("gap_series = true\n");
    }
    out.push_str(&tasks);
    out.push_str(&timers);
    // Unique names in file order.
    let mut seen: BTreeMap<String, u32> = BTreeMap::new();
    for n in &mut noises {
        let k = seen.entry(n.name.clone()).or_insert(0);
        *k += 1;
        if *k > 1 {
            n.name = format!("{} #{}", n.name, k);
        }
    }
    for n in &noises {
        let _ = write!(
            out,
            "\n[[noise]]\n# {}\nname = {}\ncpu = {}\nlevel = \"{}\"\n",
            n.comment,
            q(&n.name),
            n.cpu,
            n.level
        );
        match n.arrivals {
            Arrivals::Poisson { rate_per_s } => {
                let _ = writeln!(out, "kind = \"poisson\"\nrate = {}", fnum(rate_per_s));
            }
            Arrivals::Periodic {
                period_ns,
                phase_ns,
            } => {
                let _ = writeln!(
                    out,
                    "kind = \"periodic\"\nperiod = \"{period_ns}ns\"\nphase = \"{phase_ns}ns\""
                );
            }
        }
        let _ = writeln!(out, "duration = {}", cdf_toml(&n.lengths));
    }
    if noises.is_empty() {
        notes.push("the record shows no stolen time or stalls: the scenario has no noise".into());
    }
    Ok(Built { toml: out, notes })
}

fn find_series(rec: &Record, cpu: u32, m: Metric) -> Option<&Series> {
    rec.series
        .iter()
        .find(|s| s.metric == m && s.cpu == Some(cpu) && s.task.is_none() && s.count > 0)
}

/// A TOML string literal.
fn q(s: &str) -> String {
    toml::Value::String(s.to_string()).to_string()
}

/// A rate with enough digits and no exponent.
fn fnum(x: f64) -> String {
    let s = format!("{x:.6}");
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

/// Most points written for one distribution (two per piece); past it
/// neighbouring pieces merge ([`merge_pieces`]).
const MAX_POINTS: usize = 400;

/// The `{ cdf = [...] }` of `pieces`: exact (two points per piece) when
/// there are few, else with neighbours merged, finest in the tail.
fn cdf_toml(pieces: &[Piece]) -> String {
    let pts = cdf_points(pieces);
    let body: Vec<String> = pts
        .iter()
        .map(|&(p, x)| {
            let ps = if p <= 0.0 {
                "0.0".to_string()
            } else if p >= 1.0 {
                "1.0".to_string()
            } else {
                format!("{p:.9}")
            };
            format!("[{ps}, \"{x}ns\"]")
        })
        .collect();
    format!("{{ cdf = [{}] }}", body.join(", "))
}

/// Points (p, x ns) of the piecewise-linear CDF of `pieces`.
fn cdf_points(pieces: &[Piece]) -> Vec<(f64, u64)> {
    let mut v: Vec<Piece> = pieces
        .iter()
        .copied()
        .filter(|p| p.weight > 0.0 && p.lo.is_finite() && p.hi.is_finite())
        .map(|p| Piece {
            lo: p.lo.max(0.0),
            hi: p.hi.max(p.lo).max(0.0),
            weight: p.weight,
        })
        .collect();
    v.sort_by(|a, b| a.lo.total_cmp(&b.lo).then(a.hi.total_cmp(&b.hi)));
    let total: f64 = v.iter().map(|p| p.weight).sum();
    if v.is_empty() || total <= 0.0 {
        return vec![(0.0, 0), (1.0, 0)];
    }
    if 2 * v.len() > MAX_POINTS {
        v = merge_pieces(&v, total);
    }
    // Overlapping pieces are clipped to start where the one before ended,
    // so that x never decreases along the curve.
    let mut pts: Vec<(f64, f64)> = Vec::with_capacity(2 * v.len());
    let mut acc = 0.0;
    for p in &v {
        let lo = pts.last().map_or(p.lo, |l| p.lo.max(l.1));
        let hi = p.hi.max(lo);
        pts.push((acc / total, lo));
        acc += p.weight;
        pts.push((acc / total, hi));
    }
    let n = pts.len();
    pts[0].0 = 0.0;
    pts[n - 1].0 = 1.0;
    let mut out: Vec<(f64, u64)> = Vec::with_capacity(pts.len());
    for (p, x) in pts {
        let x = x.round() as u64;
        let x = out.last().map_or(x, |l| x.max(l.1));
        if out.last() != Some(&(p, x)) {
            out.push((p, x));
        }
    }
    if out.len() < 2 {
        let x = out.first().map_or(0, |p| p.1);
        out = vec![(0.0, x), (1.0, x)];
    }
    out
}

/// Fewer pieces for a long histogram: neighbours merge into one atom at
/// their mean (so the mean and the total stay the record's) while the
/// group holds at most a tenth of the probability above it, and at most
/// 2 % in all: coarse in the body, down to single pieces in the tail that
/// p99 and beyond are read from. A piece is never split.
fn merge_pieces(v: &[Piece], total: f64) -> Vec<Piece> {
    let mut out: Vec<Piece> = Vec::new();
    let mut acc = 0.0;
    let (mut w, mut sum) = (0.0, 0.0);
    for p in v {
        let cap = total * (0.1 * (1.0 - acc / total)).clamp(1e-6, 0.02);
        if w > 0.0 && w + p.weight > cap {
            let m = sum / w;
            out.push(Piece {
                lo: m,
                hi: m,
                weight: w,
            });
            acc += w;
            (w, sum) = (0.0, 0.0);
        }
        w += p.weight;
        sum += p.weight * (p.lo + p.hi) / 2.0;
    }
    if w > 0.0 {
        let m = sum / w;
        out.push(Piece {
            lo: m,
            hi: m,
            weight: w,
        });
    }
    out
}

/// The gap histogram of `s` as pieces (each bucket uniform over its width,
/// the top one capped at the series' maximum).
fn histogram_pieces(s: &Series) -> Vec<Piece> {
    let tail = Tail::from_series(s);
    let w = tail.bucket_ns as f64;
    tail.buckets()
        .iter()
        .map(|&(lo, n)| Piece {
            lo: lo as f64,
            hi: (lo as f64 + w).min((tail.max.0 as f64).max(lo as f64)),
            weight: n as f64,
        })
        .collect()
}

/// Removes `weight` occurrences near `x` from the histogram `h`: the
/// bucket holding `x` first, then its neighbours outwards.
fn take_near(h: &mut [Piece], x: f64, mut weight: f64) {
    if h.is_empty() {
        return;
    }
    let k = h.partition_point(|p| p.hi < x).min(h.len() - 1);
    let (mut lo, mut hi) = (k as isize, k as isize + 1);
    while weight > 0.0 && (lo >= 0 || (hi as usize) < h.len()) {
        // The nearer of the two frontiers.
        let dl = if lo >= 0 {
            (x - h[lo as usize].hi)
                .abs()
                .min((x - h[lo as usize].lo).abs())
        } else {
            f64::INFINITY
        };
        let dh = if (hi as usize) < h.len() {
            (h[hi as usize].lo - x).abs()
        } else {
            f64::INFINITY
        };
        let idx = if dl <= dh {
            let i = lo as usize;
            lo -= 1;
            i
        } else {
            let i = hi as usize;
            hi += 1;
            i
        };
        let t = h[idx].weight.min(weight);
        h[idx].weight -= t;
        weight -= t;
    }
}

/// Arrivals of a source logged at `times`: periodic when they sit on a
/// period, else Poisson at `rate_per_s`.
fn arrivals(times: &[u64], tolerance_ns: f64, rate_per_s: f64) -> (Arrivals, Option<f64>) {
    if let Some(p) = crate::periodic::detect(times, tolerance_ns) {
        let period = p.period_ns.round().max(1.0) as u64;
        let first = times.iter().copied().min().unwrap_or(0);
        return (
            Arrivals::Periodic {
                period_ns: period,
                phase_ns: first % period,
            },
            Some(p.z),
        );
    }
    (Arrivals::Poisson { rate_per_s }, None)
}

/// Noise sources from a CPU's gap log (see the module doc).
#[allow(clippy::too_many_arguments)]
fn gap_sources(
    gap: &Series,
    stolen: &Stolen,
    acct: Option<&CpuAccount>,
    spikes: &[&Spike],
    log_dropped: bool,
    sim_cpu: usize,
    cpu: u32,
    rt_period_ns: Option<u64>,
    out: &mut Vec<NoiseOut>,
    notes: &mut Vec<String>,
) {
    let observed_s = stolen.observed_ns.as_secs_f64().max(1e-9);
    let mut rest = histogram_pieces(gap);
    let tol = (gap.percentiles.p50.0 as f64).max(1000.0);
    let Some(acct) = acct.filter(|a| !a.sources.is_empty()) else {
        let times: Vec<u64> = spikes.iter().map(|s| s.at_ns.0).collect();
        let (arr, z) = arrivals(&times, tol, gap.count as f64 / observed_s);
        out.push(NoiseOut {
            name: format!("cpu{cpu} gaps"),
            cpu: sim_cpu,
            level: "steal",
            arrivals: arr,
            lengths: rest,
            comment: format!(
                "every gap of {} ({} over {:.3} s{}): the record has no cause attribution",
                gap.name,
                gap.count,
                observed_s,
                z.map_or(String::new(), |z| format!(", periodic at z = {z:.1}"))
            ),
        });
        return;
    };
    let span_s = (acct.span_ns as f64 / 1e9).max(1e-9);
    let split = acct.stolen_split.as_ref();
    let stolen_total = split.map_or(stolen.total_ns.0, |s| s.stolen_ns) as f64;
    let named: Vec<_> = acct
        .sources
        .iter()
        .filter(|s| s.total.kind != "self" && s.total.count > 0)
        .collect();
    let events: u64 = named.iter().map(|s| s.total.count).sum();
    // Entry/exit around events belongs to the events: spread per event.
    let entry_exit = split.map_or(0.0, |s| s.entry_exit_ns as f64) / events.max(1) as f64;
    let mut folded = 0usize;
    for s in named {
        let t = &s.total;
        if (t.total_ns as f64) < MIN_SOURCE_SHARE * stolen_total {
            folded += 1;
            continue;
        }
        // Logged occurrences: each spike's per-source total over its count.
        let mut pieces: Vec<Piece> = Vec::new();
        let (mut k, mut logged) = (0.0, 0.0);
        let mut times = Vec::new();
        for sp in spikes {
            let mut dominant = (0u64, "", "");
            for c in &sp.causes {
                if c.total_ns.0 > dominant.0 {
                    dominant = (c.total_ns.0, &c.kind, &c.name);
                }
                if c.kind == t.kind && c.name == t.name && c.count > 0 {
                    let each = c.total_ns.0 as f64 / c.count as f64;
                    pieces.push(Piece {
                        lo: each,
                        hi: each,
                        weight: c.count as f64,
                    });
                    k += c.count as f64;
                    logged += c.total_ns.0 as f64;
                }
            }
            if dominant.1 == t.kind && dominant.2 == t.name {
                times.push(sp.at_ns.0);
            }
        }
        let count = (t.count as f64).max(k);
        let left = count - k;
        if left > 0.0 {
            let min_logged = pieces.iter().map(|p| p.lo).fold(f64::INFINITY, f64::min);
            let r = ((t.total_ns as f64 - logged) / left)
                .max(0.0)
                .min(min_logged);
            pieces.push(Piece {
                lo: r,
                hi: r,
                weight: left,
            });
        }
        for p in &mut pieces {
            p.lo += entry_exit;
            p.hi += entry_exit;
        }
        for p in &pieces {
            take_near(&mut rest, p.lo, p.weight);
        }
        let rate = count / span_s;
        let (arr, z) = match (t.kind.as_str(), rt_period_ns) {
            // RT throttling stops the thread for the rest of each period of
            // the kernel's RT bandwidth: periodic by construction.
            ("throttle", Some(period)) => {
                let first = times.iter().copied().min().unwrap_or(0);
                (
                    Arrivals::Periodic {
                        period_ns: period,
                        phase_ns: first % period,
                    },
                    None,
                )
            }
            _ => arrivals(&times, tol, rate),
        };
        let how = match (&arr, z) {
            (Arrivals::Periodic { .. }, Some(z)) => {
                format!(", periodic (logged times on a period at z = {z:.1})")
            }
            (Arrivals::Periodic { .. }, None) => {
                ", periodic at the kernel's sched_rt_period_us".to_string()
            }
            _ => String::new(),
        };
        // A periodic source seen more often than once a period (RT
        // throttling cut in two by a tick): the longest occurrences, one
        // per period, keep the period; the others come as Poisson.
        if let Arrivals::Periodic { period_ns, .. } = arr {
            let per_period = span_s * 1e9 / period_ns as f64;
            if count > 1.2 * per_period {
                pieces.sort_by(|a, b| b.lo.total_cmp(&a.lo));
                let (mut keep, mut others) = (Vec::new(), Vec::new());
                let mut room = per_period;
                for p in pieces.drain(..) {
                    let w = p.weight.min(room.max(0.0));
                    if w > 0.0 {
                        keep.push(Piece { weight: w, ..p });
                    }
                    if p.weight > w {
                        others.push(Piece {
                            weight: p.weight - w,
                            ..p
                        });
                    }
                    room -= w;
                }
                pieces = keep;
                let w: f64 = others.iter().map(|p| p.weight).sum();
                out.push(NoiseOut {
                    name: format!("cpu{cpu} {} {} (rest)", t.kind, t.name),
                    cpu: sim_cpu,
                    level: level_of(&t.kind),
                    arrivals: Arrivals::Poisson {
                        rate_per_s: w / span_s,
                    },
                    lengths: others,
                    comment: format!(
                        "{} '{}': the {:.0} occurrences beyond one per period (the shortest), as Poisson",
                        t.kind, t.name, w
                    ),
                });
            }
        }
        out.push(NoiseOut {
            name: format!("cpu{cpu} {} {}", t.kind, t.name),
            cpu: sim_cpu,
            level: level_of(&t.kind),
            arrivals: arr,
            lengths: pieces,
            comment: format!(
                "{} '{}': {} times, {} ns in all over {:.3} s ({} logged in the spike log){}; {:.0} ns entry/exit added to each",
                t.kind, t.name, t.count, t.total_ns, span_s, k as u64, how, entry_exit
            ),
        });
    }
    let left: f64 = rest.iter().map(|p| p.weight).sum();
    if left >= 1.0 {
        rest.retain(|p| p.weight > 0.0);
        out.push(NoiseOut {
            name: format!("cpu{cpu} unattributed"),
            cpu: sim_cpu,
            level: "steal",
            arrivals: Arrivals::Poisson {
                rate_per_s: left / observed_s,
            },
            lengths: rest,
            comment: format!(
                "the {} gaps of {} no named source accounts for{} (their lengths: the gap histogram less the named sources' occurrences)",
                left.round() as u64,
                gap.name,
                if folded > 0 {
                    format!(", {folded} sources under {:.1}% of the stolen time among them", MIN_SOURCE_SHARE * 100.0)
                } else {
                    String::new()
                }
            ),
        });
    }
    if log_dropped {
        notes.push(format!(
            "cpu{cpu}: the spike log kept only the largest gaps; occurrences it dropped are set at each source's remaining mean length"
        ));
    }
}

/// Stall sources from a CPU's latency tail when it has no gap log.
#[allow(clippy::too_many_arguments)]
fn latency_sources(
    stalls: &StallModel,
    spikes: &[&Spike],
    attributed: bool,
    sim_cpu: usize,
    cpu: u32,
    interval: Nanos,
    out: &mut Vec<NoiseOut>,
    notes: &mut Vec<String>,
) {
    if stalls.rate_per_s <= 0.0 || stalls.lengths.is_empty() {
        return;
    }
    let lengths: Vec<Piece> = stalls
        .lengths
        .iter()
        .map(|&(l, s)| Piece {
            lo: l,
            hi: l,
            weight: s,
        })
        .collect();
    // Spikes above the stall threshold, by the source that filled most of
    // each window.
    let mut by: BTreeMap<(String, String), Vec<u64>> = BTreeMap::new();
    let mut n = 0usize;
    for sp in spikes.iter().filter(|s| s.value_ns > stalls.threshold_ns) {
        n += 1;
        let key = sp
            .causes
            .iter()
            .filter(|c| c.kind != "unexplained")
            .max_by(|a, b| a.total_ns.cmp(&b.total_ns).then(b.name.cmp(&a.name)))
            .map(|c| (c.kind.clone(), c.name.clone()))
            .unwrap_or_else(|| ("unattributed".into(), String::new()));
        by.entry(key).or_default().push(sp.at_ns.0);
    }
    let tol = interval.0 as f64;
    let mut rest: Vec<u64> = Vec::new();
    let mut rest_share = 0.0;
    let mut groups: Vec<((String, String), Vec<u64>)> = by.into_iter().collect();
    // Largest first, name order among equals: a stable file order.
    groups.sort_by(|a, b| b.1.len().cmp(&a.1.len()).then(a.0.cmp(&b.0)));
    for ((kind, name), times) in groups {
        let share = times.len() as f64 / n.max(1) as f64;
        if !attributed || kind == "unattributed" || share < 0.02 {
            rest_share += share;
            rest.extend(times);
            continue;
        }
        let rate = stalls.rate_per_s * share;
        let (arr, z) = arrivals(&times, tol, rate);
        out.push(NoiseOut {
            name: format!("cpu{cpu} {kind} {name}"),
            cpu: sim_cpu,
            level: "irq",
            arrivals: arr,
            lengths: lengths.clone(),
            comment: format!(
                "stalls of the latency tail (rate {:.3}/s, mean {:.0} ns) in the share of logged spikes '{name}' dominated ({:.1}%){}; lengths are the tail's, not this source's own",
                stalls.rate_per_s,
                stalls.mean_ns,
                share * 100.0,
                z.map_or(String::new(), |z| format!(", periodic at z = {z:.1}"))
            ),
        });
    }
    if n == 0 {
        rest_share = 1.0;
    }
    if rest_share > 0.0 {
        let rate = stalls.rate_per_s * rest_share;
        let (arr, _) = arrivals(&rest, tol, rate);
        out.push(NoiseOut {
            name: format!("cpu{cpu} unattributed"),
            cpu: sim_cpu,
            level: "irq",
            arrivals: arr,
            lengths,
            comment: format!(
                "stalls of the latency tail (rate {:.3}/s, mean {:.0} ns, above {}){}",
                stalls.rate_per_s,
                stalls.mean_ns,
                stalls.threshold_ns,
                if attributed {
                    format!(
                        ", the {:.1}% of logged spikes no named source dominated",
                        rest_share * 100.0
                    )
                } else {
                    ": the record has no cause attribution".to_string()
                }
            ),
        });
    }
    notes.push(format!(
        "cpu{cpu}: stalls inferred from the latency tail (no gap log for this CPU): a sleeping probe cannot tell the wake-up path from stolen time above {}",
        stalls.threshold_ns
    ));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn piece(lo: f64, hi: f64, weight: f64) -> Piece {
        Piece { lo, hi, weight }
    }

    #[test]
    fn cdf_points_keep_atoms_and_buckets() {
        let pts = cdf_points(&[piece(5.0, 5.0, 1.0), piece(10.0, 20.0, 3.0)]);
        assert_eq!(
            pts,
            vec![(0.0, 5), (0.25, 5), (0.25, 10), (1.0, 20)],
            "an atom is a jump, a bucket a slope"
        );
    }

    #[test]
    fn many_pieces_merge_keeping_the_mean_and_the_tail() {
        // 10 000 one-wide buckets, and 10 far out: a throttled gap log.
        let mut v: Vec<Piece> = (0..10_000)
            .map(|i| piece(i as f64, i as f64 + 1.0, 1.0))
            .collect();
        v.extend((0..10).map(|i| piece(1e6 + i as f64, 1e6 + i as f64, 1.0)));
        let pts = cdf_points(&v);
        assert!(pts.len() <= MAX_POINTS, "{}", pts.len());
        let mean: f64 = pts
            .windows(2)
            .map(|w| (w[1].0 - w[0].0) * (w[0].1 + w[1].1) as f64 / 2.0)
            .sum();
        let want = v
            .iter()
            .map(|p| p.weight * (p.lo + p.hi) / 2.0)
            .sum::<f64>()
            / 10_010.0;
        assert!((mean - want).abs() < want * 1e-3, "{mean} vs {want}");
        // The far values stay far, at their own probability.
        let far = pts.iter().filter(|p| p.1 >= 1_000_000).count();
        assert!(far >= 2, "{pts:?}");
        let first_far = pts.iter().find(|p| p.1 >= 1_000_000).unwrap();
        assert!(
            (first_far.0 - 10_000.0 / 10_010.0).abs() < 1e-6,
            "{first_far:?}"
        );
    }

    #[test]
    fn take_near_removes_from_the_nearest_buckets() {
        let mut h = vec![
            piece(0.0, 10.0, 2.0),
            piece(10.0, 20.0, 2.0),
            piece(20.0, 30.0, 2.0),
        ];
        take_near(&mut h, 15.0, 3.0);
        assert_eq!(h[1].weight, 0.0);
        assert_eq!(h[0].weight + h[2].weight, 3.0);
    }

    #[test]
    fn strings_are_quoted_for_toml() {
        for name in ["a\"b", "<img src=x one'r", "tab\there", "a\\b"] {
            let v: toml::Value = toml::from_str(&format!("x = {}", q(name))).unwrap();
            assert_eq!(v["x"].as_str(), Some(name));
        }
        assert_eq!(fnum(2.5), "2.5");
        assert_eq!(fnum(3.0), "3");
    }
}
