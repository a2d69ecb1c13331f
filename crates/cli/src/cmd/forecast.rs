//! `punctual forecast`: from any record (measured or simulated) to the
//! numbers a person plans with — worst case per hour/day/week, time to
//! buffer underrun, the least buffering that meets a target, verdicts
//! for workload profiles, and a pseudo worst case for schedulability.
//! All computing is in `punctual_analysis`; this module parses, calls and
//! prints.

use std::path::PathBuf;

use punctual_analysis::buffer::{self, Buffering, Compute, Mttf};
use punctual_analysis::forecast::{Estimate, GapStalls, TailModel, BOOTSTRAP_REPS, BOOTSTRAP_SEED};
use punctual_analysis::rate::{parse_rate_per_s, parse_usage, Usage};
use punctual_analysis::sched::{self, SchedReport};
use punctual_analysis::verdict::{human_secs, latency_like, verdicts_for};
use punctual_analysis::{profiles, Profile, Verdict};
use punctual_record::{Metric, Record};
use punctual_report::text::verdict::{render_verdicts, tally};
use punctual_units::Nanos;
use serde_json::{json, Value};

use crate::error::{CliError, CliResult};
use crate::opts;

#[derive(clap::Args, Debug)]
#[command(after_help = "\
Examples:
  punctual forecast run.json
  punctual forecast run.json --buffers 2 --buffer-len 1ms --compute 0.5ms --sweep
  punctual forecast run.json --buffer-len 2.667ms --compute 25% --target 1d
  punctual forecast run.json --rate 260000/s --target 1h
  punctual forecast run.json --miss-rate 1/h --taskset tasks.toml
Method, formulas and assumptions: docs/forecast.md")]
pub struct Args {
    /// Records to read (from timer, noise, check, simulate…).
    #[arg(required = true, value_name = "RECORD")]
    pub records: Vec<PathBuf>,
    /// Only this series (default: every latency series, or every series
    /// when the record has none).
    #[arg(long, value_name = "NAME")]
    pub series: Option<String>,
    /// Number of buffers n.
    #[arg(long, value_name = "N")]
    pub buffers: Option<i64>,
    /// Length t of one buffer (one consumer wake-up per buffer).
    #[arg(long, value_name = "T", value_parser = opts::positive_duration)]
    pub buffer_len: Option<Nanos>,
    /// Compute c per buffer: a time (0.5ms) or a fraction of t (25%).
    #[arg(long, value_name = "C", default_value = "0%")]
    pub compute: String,
    /// Table of MTTF against total buffering (n = 2 … max(8, n+4)).
    #[arg(long)]
    pub sweep: bool,
    /// How stalls arrive in the queue model: poisson (default), or
    /// renewal, read from the record's spike log time stamps (falls back
    /// to poisson without them; docs/forecast.md §3.3: validation did not
    /// favour it, so it is not the default).
    #[arg(long, value_name = "MODEL", default_value = "poisson", value_parser = ["poisson", "renewal"])]
    pub arrivals: String,
    /// Noise record (`punctual noise`, `check`) whose gap histogram for
    /// the same CPU gives the queue model's stall term S: time stolen from
    /// a running thread, instead of S inferred from the latency tail
    /// (docs/forecast.md §3.4). A `check` record whose noise half polled
    /// in stretches (every `check` since this option's default changed)
    /// is its own noise record unasked; older ones polled at FIFO for 30 s
    /// straight, so with RT throttling on their gaps include the throttled
    /// stops, which a consumer never sees, and are used only when named here.
    #[arg(long, value_name = "NOISE_RECORD", conflicts_with = "tail_stalls")]
    pub stalls: Option<PathBuf>,
    /// Infer S from the latency tail (§3.2) even when the record measured
    /// its stolen time on a running thread itself.
    #[arg(long)]
    pub tail_stalls: bool,
    /// Target MTTF for sizing (e.g. 10min, 1h, 1d).
    #[arg(long, value_name = "D", value_parser = opts::positive_duration)]
    pub target: Option<Nanos>,
    /// Packet stream rate for the buffer rule of the Hyper-V VMBus note
    /// (buffers ÷ drain interval; e.g. 260000/s).
    #[arg(long, value_name = "N/s")]
    pub rate: Option<String>,
    /// Permissible error rate for the pseudo worst case (e.g. 1/h).
    #[arg(long, value_name = "N/D")]
    pub miss_rate: Option<String>,
    /// Task set TOML to analyse with the pseudo worst case (needs --miss-rate).
    #[arg(long, value_name = "FILE")]
    pub taskset: Option<PathBuf>,
    /// Extra profiles TOML; same-named profiles replace the shipped ones.
    #[arg(long, value_name = "FILE")]
    pub profiles: Option<PathBuf>,
    /// Usage for the per-day/week-of-use worst case (Cota-Robles & Held's
    /// WDM latency study, 1999, §4.3).
    #[arg(long, value_name = "H/day,D/week", default_value = "8h/day,5d/week")]
    pub usage: String,
    /// Skip the per-profile verdicts.
    #[arg(long)]
    pub no_verdicts: bool,
    /// Write the forecast as JSON (atomically).
    #[arg(long, value_name = "PATH")]
    pub json: Option<PathBuf>,
}

/// Everything validated before any record is read.
struct Plan {
    buffering: Option<Buffering>,
    len_only: Option<Nanos>,
    n_only: Option<u32>,
    compute: Compute,
    rate_per_s: Option<f64>,
    miss_rate_per_s: Option<f64>,
    taskset: Option<(String, sched::TaskSet)>,
    profiles: Vec<Profile>,
    usage: Usage,
}

fn plan(a: &Args) -> CliResult<Plan> {
    let compute = Compute::parse(&a.compute).map_err(|e| CliError::usage(format!("--{e}")))?;
    let n = match a.buffers {
        Some(n) if n < 1 => {
            return Err(CliError::usage(format!(
                "--buffers {n} is less than 1; a consumer needs at least one buffer"
            )))
        }
        Some(n) if n > 1_000_000 => {
            return Err(CliError::usage(format!(
                "--buffers {n} is more than 1000000"
            )))
        }
        Some(n) => Some(n as u32),
        None => None,
    };
    let buffering = match (n, a.buffer_len) {
        (Some(n), Some(t)) => {
            let b = Buffering::new(n, t, compute);
            b.slack()
                .map_err(|e| CliError::usage(format!("--buffers/--buffer-len/--compute: {e}")))?;
            Some(b)
        }
        _ => None,
    };
    if let (Compute::Time(c), None, Some(t)) = (compute, n, a.buffer_len) {
        if c >= t * 63 {
            return Err(CliError::usage(format!(
                "--compute {c} is not less than what 64 buffers of {t} could hold"
            )));
        }
    }
    if n.is_some() && a.buffer_len.is_none() && a.target.is_none() {
        return Err(CliError::usage(
            "--buffers needs --buffer-len (or --target, to find the least buffer length)",
        ));
    }
    if a.buffer_len.is_some() && n.is_none() && a.target.is_none() && !a.sweep {
        return Err(CliError::usage(
            "--buffer-len needs --buffers (or --target or --sweep, to find or tabulate n)",
        ));
    }
    let rate_per_s = match &a.rate {
        Some(r) => Some(parse_rate_per_s(r).map_err(|e| CliError::usage(format!("--rate {e}")))?),
        None => None,
    };
    let miss_rate_per_s = match &a.miss_rate {
        Some(r) => {
            Some(parse_rate_per_s(r).map_err(|e| CliError::usage(format!("--miss-rate {e}")))?)
        }
        None => None,
    };
    let taskset = match &a.taskset {
        Some(p) => {
            if miss_rate_per_s.is_none() {
                return Err(CliError::usage(
                    "--taskset needs --miss-rate (the permissible error rate, e.g. 1/h)",
                ));
            }
            let text = std::fs::read_to_string(p)
                .map_err(|e| CliError::usage(format!("--taskset {}: {e}", p.display())))?;
            let set = sched::parse_taskset(&text)
                .map_err(|e| CliError::usage(format!("--taskset {}: {e}", p.display())))?;
            Some((p.display().to_string(), set))
        }
        None => None,
    };
    let mut profs = profiles::builtin();
    if let Some(p) = &a.profiles {
        let text = std::fs::read_to_string(p)
            .map_err(|e| CliError::usage(format!("--profiles {}: {e}", p.display())))?;
        let extra = profiles::parse(&text, &p.display().to_string()).map_err(CliError::usage)?;
        profs = profiles::merge(profs, extra);
    }
    let usage = parse_usage(&a.usage).map_err(CliError::usage)?;
    opts::check_output("--json", &a.json)?;
    Ok(Plan {
        buffering,
        len_only: if n.is_none() { a.buffer_len } else { None },
        n_only: if a.buffer_len.is_none() { n } else { None },
        compute,
        rate_per_s,
        miss_rate_per_s,
        taskset,
        profiles: profs,
        usage,
    })
}

pub fn run(a: Args) -> CliResult {
    let p = plan(&a)?;
    if a.stalls.is_some() && a.arrivals == "renewal" {
        return Err(CliError::usage(
            "--stalls and --arrivals renewal do not combine: renewal arrivals are read from the \
             timer record's spike log, the noise record's stalls arrive as a Poisson process",
        ));
    }
    let noise = match &a.stalls {
        Some(path) => {
            let r = Record::read(path)
                .map_err(|e| CliError::usage(format!("--stalls {}: {e}", path.display())))?;
            if !r.series.iter().any(|s| s.metric == Metric::Gap) {
                return Err(CliError::usage(format!(
                    "--stalls {}: the record has no gap series (take one with `punctual noise`)",
                    path.display()
                )));
            }
            Some((path.display().to_string(), r))
        }
        None => None,
    };
    let mut out = String::new();
    let mut series_json = Vec::new();
    let mut verdict_json = Vec::new();
    for path in &a.records {
        let rec = Record::read(path).map_err(|e| CliError::usage(e.to_string()))?;
        let shown = path.display().to_string();
        let mut models = select(&rec, &shown, a.series.as_deref(), a.arrivals == "renewal")?;
        attach_stalls(&mut models, &rec, &shown, noise.as_ref())?;
        if noise.is_none() && a.arrivals != "renewal" && !a.tail_stalls {
            // A `check` record's own gaps, when free of throttling stops.
            punctual_analysis::verdict::attach_own_gaps(&mut models, &rec);
        }
        if !a.no_verdicts {
            // Same selection as `verdicts()` makes, so each tail is fitted once.
            let v: Vec<Verdict> = verdicts_for(&models, &p.profiles);
            if !v.is_empty() {
                out.push_str(&format!(
                    "verdicts for {shown} ({}; decided only when the whole 95% CI of the MTTF \
                     is on one side of the target; each from the series that decides it):\n",
                    tally(&v)
                ));
                out.push_str(&render_verdicts(&v));
                out.push('\n');
            }
            for x in v {
                let mut j = serde_json::to_value(&x).unwrap_or(Value::Null);
                j["record"] = json!(shown);
                verdict_json.push(j);
            }
        }
        let skipped: Vec<String> = models
            .iter()
            .filter(|m| !latency_like(m.metric))
            .map(|m| format!("{} ({})", m.name, m.metric.as_str()))
            .collect();
        let asks_mttf = !a.no_verdicts || p.buffering.is_some() || a.sweep || a.target.is_some();
        if !skipped.is_empty() && asks_mttf {
            out.push_str(&format!(
                "{shown}: no MTTF or verdict from {}: only wake-up latency or response time is \
                 lateness a buffered consumer suffers\n\n",
                skipped.join(", ")
            ));
        }
        for m in &models {
            let (text, j) = forecast_series(&shown, &rec, m, &a, &p);
            out.push_str(&text);
            series_json.push(j);
        }
    }
    print!("{out}");
    if let Some(path) = &a.json {
        let doc = json!({
            "tool": "punctual forecast",
            "tool_version": env!("CARGO_PKG_VERSION"),
            "method": "docs/forecast.md",
            "bootstrap": { "seed": BOOTSTRAP_SEED, "replicates": BOOTSTRAP_REPS },
            "usage": p.usage,
            "series": series_json,
            "verdicts": verdict_json,
        });
        let text = serde_json::to_string_pretty(&doc).unwrap_or_default();
        crate::output::write_bytes("--json", path, text.as_bytes())?;
        if !crate::output::is_stdout(path) {
            eprintln!("forecast written to {}", path.display());
        }
    }
    Ok(())
}

/// The series to forecast, as models; one sentence and status 2 for a
/// missing or empty series.
fn select(
    rec: &Record,
    shown: &str,
    only: Option<&str>,
    renewal: bool,
) -> CliResult<Vec<TailModel>> {
    let names = || {
        rec.series
            .iter()
            .map(|s| s.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let chosen: Vec<_> = match only {
        Some(name) => {
            let s = rec.series_named(name).ok_or_else(|| {
                CliError::usage(format!(
                    "{shown} has no series '{name}' (it has: {})",
                    if rec.series.is_empty() {
                        "none".to_string()
                    } else {
                        names()
                    }
                ))
            })?;
            if s.count == 0 {
                return Err(CliError::usage(format!(
                    "{shown}: series '{name}' is empty (0 samples)"
                )));
            }
            vec![s]
        }
        None => {
            let nonempty: Vec<_> = rec.series.iter().filter(|s| s.count > 0).collect();
            if nonempty.is_empty() {
                return Err(CliError::usage(format!(
                    "{shown} has no samples in any series ({})",
                    if rec.series.is_empty() {
                        "it has no series".to_string()
                    } else {
                        names()
                    }
                )));
            }
            let lat: Vec<_> = nonempty
                .iter()
                .copied()
                .filter(|s| matches!(s.metric, Metric::Latency | Metric::Response))
                .collect();
            if lat.is_empty() {
                nonempty
            } else {
                lat
            }
        }
    };
    chosen
        .into_iter()
        .map(|s| {
            TailModel::new(s, rec.series_duration(s))
                .map(|m| {
                    if renewal {
                        m.with_record_spikes(rec, s)
                    } else {
                        m.with_spike_log(rec, s)
                    }
                })
                .map_err(|e| CliError::usage(format!("{shown}: {e}")))
        })
        .collect()
}

/// Gives each latency series the stall term measured by a running thread
/// on its CPU, from `--stalls` (which must have that CPU). Without it a
/// series keeps the tail inference unless its own record measured gaps
/// without throttling stops (`attach_own_gaps`, see `stalls` in the
/// options for why).
fn attach_stalls(
    models: &mut [TailModel],
    rec: &Record,
    shown: &str,
    noise: Option<&(String, Record)>,
) -> CliResult {
    let Some((path, r)) = noise else {
        return Ok(());
    };
    for m in models.iter_mut() {
        if m.metric != Metric::Latency {
            continue;
        }
        let cpu = rec.series_named(&m.name).and_then(|s| s.cpu);
        m.gap_stalls = Some(GapStalls::for_cpu(r, cpu).ok_or_else(|| {
            CliError::usage(format!(
                "--stalls {path}: no gap series with stolen-time totals for the CPU of \
                 {shown}'s {} ({})",
                m.name,
                cpu.map(|c| format!("cpu{c}"))
                    .unwrap_or_else(|| "no CPU".into())
            ))
        })?);
    }
    Ok(())
}

fn est(e: &Estimate) -> (String, String, String) {
    let v = e
        .value_ns
        .map(|v| v.to_string())
        .unwrap_or_else(|| "—".to_string());
    let ci = match (e.ci_low_ns, e.ci_high_ns) {
        (Some(l), Some(h)) => format!("{l} – {h}"),
        (Some(l), None) => format!("≥ {l}"),
        (None, Some(h)) => format!("≤ {h}"),
        _ => "—".to_string(),
    };
    let how = if e.extrapolated {
        if e.value_ns.is_none() {
            format!(
                "extrapolated {:.0}×: interval only",
                1.0 / e.expected_in_record
            )
        } else {
            format!("extrapolated {:.0}×", 1.0 / e.expected_in_record)
        }
    } else if e.expected_in_record < 10.0 {
        "observed (few samples)".to_string()
    } else {
        "observed".to_string()
    };
    (v, ci, how)
}

fn mttf_ci(m: &Mttf) -> String {
    match (m.mttf_ci_low_seconds, m.mttf_ci_high_seconds) {
        (Some(l), Some(h)) => format!("{} – {}", human_secs(l), human_secs(h)),
        (Some(l), None) => format!("{} – never", human_secs(l)),
        (None, _) => "—".to_string(),
    }
}

fn forecast_series(
    shown: &str,
    rec: &Record,
    m: &TailModel,
    a: &Args,
    p: &Plan,
) -> (String, Value) {
    let mut o = String::new();
    let s = rec.series_named(&m.name);
    let source = serde_json::to_value(rec.source).unwrap_or(Value::Null);
    o.push_str(&format!(
        "{shown} — {} ({}, {}): {} samples, one per {} ({}), {} of samples\n",
        m.name,
        m.metric.as_str(),
        source.as_str().unwrap_or("?"),
        m.tail.n,
        m.sample_period_ns,
        m.sample_period_source,
        human_secs(m.covered_s()),
    ));
    if let Some(s) = s {
        o.push_str(&format!(
            "  observed: p50 {}  p99 {}  p99.9 {}  p99.99 {}  max {}{}\n",
            s.percentiles.p50,
            s.percentiles.p99,
            s.percentiles.p99_9,
            s.percentiles.p99_99,
            s.max,
            if s.missed > 0 {
                format!("  ({} periods missed)", s.missed)
            } else {
                String::new()
            }
        ));
    }
    if rec.interrupted {
        o.push_str("  note: the run was interrupted; the record covers less than was asked\n");
    }
    // Exceedance curve.
    let curve = m.curve();
    o.push_str("  exceedance          x   samples above   P(X > x)   per hour\n");
    let per_h = m.samples_per_s() * 3600.0;
    for pt in &curve {
        o.push_str(&format!(
            "  {:>19} {:>15} {:>10.3e} {:>10.1}\n",
            pt.x_ns.to_string(),
            pt.count,
            pt.probability,
            pt.probability * per_h
        ));
    }
    // Worst cases.
    let wc = m.worst_case();
    let wu = m.worst_case_use(p.usage);
    o.push_str("  expected worst case                    value   95% CI                  how\n");
    for (label, e) in [
        ("per hour (continuous)".to_string(), &wc.hour),
        ("per day (continuous)".to_string(), &wc.day),
        ("per week (continuous)".to_string(), &wc.week),
        (
            format!("per day of use ({}h)", p.usage.hours_per_day),
            &wu.day,
        ),
        (format!("per week of use ({})", p.usage.label()), &wu.week),
    ] {
        let (v, ci, how) = est(e);
        o.push_str(&format!("    {label:<34} {v:>9}   {ci:<23} {how}\n"));
    }
    match &m.fit {
        Some(f) => {
            o.push_str(&format!(
                "  tail fit: generalized Pareto above {} ({} samples, {:.3}%), ξ = {:.3}, σ = {}{}, A² = {:.2}\n",
                Nanos(f.threshold_ns as u64),
                f.excesses,
                f.exceed_fraction * 100.0,
                f.shape,
                Nanos(f.scale_ns as u64),
                f.endpoint_ns()
                    .map(|e| format!(", bounded at {}", Nanos(e as u64)))
                    .unwrap_or_default(),
                m.fit_quality.unwrap_or(f64::NAN)
            ));
            if let Some(n) = &m.fit_note {
                o.push_str(&format!("  note: {n}\n"));
            }
        }
        None => o.push_str(&format!(
            "  tail fit: none ({}); nothing is extrapolated\n",
            m.fit_note.as_deref().unwrap_or("?")
        )),
    }
    for e in [&wc.week, &wu.week] {
        if e.value_ns.is_none() {
            if let Some(n) = &e.note {
                o.push_str(&format!("  note: {n}\n"));
            }
            break;
        }
    }

    let mut j = json!({
        "record": shown,
        "source": source,
        "name": m.name,
        "metric": m.metric.as_str(),
        "count": m.tail.n,
        "sample_period_ns": m.sample_period_ns,
        "sample_period_source": m.sample_period_source,
        "covered_seconds": m.covered_s(),
        "max_ns": m.tail.max,
        "exceedance_curve": curve,
        "fit": m.fit,
        "fit_note": m.fit_note,
        "fit_anderson_darling": m.fit_quality,
        "worst_case": wc,
        "worst_case_use": wu,
        "slack_ns": Value::Null,
        "exceedance_rate_per_s": Value::Null,
        "mttf_seconds": Value::Null,
    });

    // Time to underrun: only from lateness (the caller said why not).
    let lateness = latency_like(m.metric);
    if let Some(b) = p.buffering.as_ref().filter(|_| lateness) {
        if let Ok(r) = buffer::mttf(m, b) {
            o.push_str(&format!(
                "  buffering {} (compute {}): slack (n−1)·t − c = {}\n",
                b.label(),
                r.compute_ns,
                r.slack_ns
            ));
            let pe = &r.exceedance;
            o.push_str(&format!(
                "    P(latency > {}) = {:.3e} per wake-up ({} of {} observed{})\n",
                r.slack_ns,
                pe.probability,
                pe.observed_count,
                m.tail.n,
                if pe.extrapolated {
                    "; from the fitted tail, extrapolated"
                } else {
                    ""
                }
            ));
            let q = &r.queue;
            o.push_str(&format!(
                "    first order: {:.4} late wake-ups/s → MTTF {}\n",
                r.exceedance_rate_per_s,
                r.seed_mttf_seconds
                    .map(human_secs)
                    .unwrap_or_else(|| "never".to_string()),
            ));
            o.push_str(&format!(
                "    queue model: stalls {:.1}/s of mean {} ({:.2}% of the CPU), (c + stolen)/t = {:.3}, \
                 P(underrun) = {:.3e} per wake-up\n",
                q.stalls.rate_per_s,
                Nanos(q.stalls.mean_ns as u64),
                q.stalls.time_fraction * 100.0,
                q.utilization_ratio,
                q.underrun_probability,
            ));
            o.push_str(&format!(
                "    underruns {:.4}/s = {:.1}/h = {:.1}/day → MTTF {} (95% CI {}){}\n",
                r.underrun_rate_per_s,
                r.failures_per_hour,
                r.failures_per_day,
                r.mttf_seconds
                    .map(human_secs)
                    .unwrap_or_else(|| "never".to_string()),
                mttf_ci(&r),
                if r.extrapolated {
                    " [extrapolated]"
                } else {
                    ""
                }
            ));
            if let Some(ns) = &q.stalls.noise {
                o.push_str(&format!(
                    "    stalls from the noise record's {} ({} gaps in {} of running time), \
                     not from the latency tail\n",
                    ns.series, ns.gaps, ns.running_ns
                ));
                j["stall_source"] = json!({
                    "kind": "noise gaps",
                    "series": ns.series,
                    "gaps": ns.gaps,
                    "running_ns": ns.running_ns,
                    "gap_threshold_ns": ns.gap_threshold_ns,
                });
            }
            o.push_str(&format!("    formula: {}\n", r.formula));
            for asm in &r.assumptions {
                o.push_str(&format!("    assumes: {asm}\n"));
            }
            j["slack_ns"] = json!(r.slack_ns);
            j["exceedance_rate_per_s"] = json!(r.exceedance_rate_per_s);
            j["mttf_seconds"] = json!(r.mttf_seconds);
            j["mttf"] = serde_json::to_value(&r).unwrap_or(Value::Null);
        }
    }
    // Sweep.
    if a.sweep && lateness {
        let base = p
            .buffering
            .or_else(|| p.len_only.map(|t| Buffering::new(2, t, p.compute)));
        match base {
            Some(base) => {
                let max_n = (base.buffers + 4).max(8);
                let rows = buffer::sweep(m, &base, max_n);
                o.push_str(&format!(
                    "  MTTF against buffering (t = {}, compute {}; MTTF from the queue model, the first-order figure beside it):\n    {:>3} {:>9} {:>9} {:>11} {:>10}  {:<22} {:>10}\n",
                    base.buffer_len,
                    base.compute.at(base.buffer_len),
                    "n", "total", "slack", "P(>slack)", "MTTF", "95% CI", "seed"
                ));
                for r in &rows {
                    let ci = match (r.mttf_ci_low_seconds, r.mttf_ci_high_seconds) {
                        (Some(l), Some(h)) => format!("{} – {}", human_secs(l), human_secs(h)),
                        (Some(l), None) => format!("{} – never", human_secs(l)),
                        _ => "—".to_string(),
                    };
                    o.push_str(&format!(
                        "    {:>3} {:>9} {:>9} {:>11.3e} {:>10}  {:<22} {:>10}{}\n",
                        r.buffers,
                        r.total_buffering_ns.to_string(),
                        r.slack_ns.to_string(),
                        r.probability,
                        r.mttf_seconds
                            .map(human_secs)
                            .unwrap_or_else(|| "never".into()),
                        ci,
                        r.seed_mttf_seconds
                            .map(human_secs)
                            .unwrap_or_else(|| "never".into()),
                        if r.extrapolated { " extrapolated" } else { "" }
                    ));
                }
                j["sweep"] = serde_json::to_value(&rows).unwrap_or(Value::Null);
            }
            None => o.push_str("  sweep: needs --buffer-len\n"),
        }
    }
    // Sizing.
    if let Some(target) = a.target.filter(|_| lateness) {
        let ts = target.as_secs_f64();
        let mut sizing = json!({ "target_seconds": ts });
        let t_for_n = p.buffering.map(|b| b.buffer_len).or(p.len_only);
        if let Some(t) = t_for_n {
            let base = Buffering::new(2, t, p.compute);
            let r = buffer::least_buffers(m, &base, ts, 64);
            match &r {
                Some(r) => o.push_str(&format!(
                    "  to reach an MTTF of {}: at least {} buffers of {} (MTTF {}{})\n",
                    human_secs(ts),
                    r.buffering.buffers,
                    t,
                    r.mttf_seconds
                        .map(human_secs)
                        .unwrap_or_else(|| "never".into()),
                    if r.extrapolated { ", extrapolated" } else { "" }
                )),
                None => o.push_str(&format!(
                    "  to reach an MTTF of {}: no count of {t} buffers up to 64 does\n",
                    human_secs(ts)
                )),
            }
            sizing["least_buffers"] = json!(r.as_ref().map(|r| r.buffering.buffers));
            sizing["least_buffers_mttf"] = serde_json::to_value(&r).unwrap_or(Value::Null);
        }
        let n_for_t = p.buffering.map(|b| b.buffers).or(p.n_only);
        if let Some(n) = n_for_t {
            let base = Buffering::new(n, Nanos::from_ms(1), p.compute);
            let r = buffer::least_len(m, &base, ts);
            match &r {
                Some(r) => {
                    o.push_str(&format!(
                    "  to reach an MTTF of {}: {} buffers of at least {} (slack {}, MTTF {}{})\n",
                    human_secs(ts),
                    n,
                    r.buffering.buffer_len,
                    r.slack_ns,
                    r.mttf_seconds.map(human_secs).unwrap_or_else(|| "never".into()),
                    if r.extrapolated { ", extrapolated" } else { "" }
                ))
                }
                None => o.push_str(&format!(
                    "  to reach an MTTF of {}: no length up to 60 s works with {n} buffers\n",
                    human_secs(ts)
                )),
            }
            sizing["least_buffer_len_ns"] = json!(r.as_ref().map(|r| r.buffering.buffer_len));
            sizing["least_buffer_len_mttf"] = serde_json::to_value(&r).unwrap_or(Value::Null);
        }
        j["sizing"] = sizing;
    }
    // Packet stream (seed 003).
    if let Some(rate) = p.rate_per_s {
        let target_s = a.target.map(|t| t.as_secs_f64()).unwrap_or(3600.0);
        let have = p.buffering.map(|b| b.buffers).or(p.n_only);
        let ps = buffer::packet_sizing(m, rate, target_s, have);
        let (g, gci, how) = est(&ps.gap);
        o.push_str(&format!(
            "  packet stream at {:.0}/s: longest service gap once per {}{}: {g} ({gci}, {how})\n",
            rate,
            human_secs(target_s),
            if a.target.is_none() {
                " (default; set --target)"
            } else {
                ""
            }
        ));
        o.push_str(&format!(
            "    buffers needed = rate × gap = {} (95% CI {} – {})\n",
            ps.buffers_needed
                .map(|b| b.to_string())
                .unwrap_or_else(|| "—".into()),
            ps.buffers_ci_low
                .map(|b| b.to_string())
                .unwrap_or_else(|| "?".into()),
            ps.buffers_ci_high
                .map(|b| b.to_string())
                .unwrap_or_else(|| "?".into()),
        ));
        if let (Some(n), Some(sr)) = (have, ps.sustainable_rate_per_s) {
            o.push_str(&format!(
                "    {n} buffers sustain {sr:.0} packets/s over that gap\n"
            ));
        }
        o.push_str(&format!("    {}\n", ps.formula));
        j["packet"] = serde_json::to_value(&ps).unwrap_or(Value::Null);
    }
    // Pseudo worst case and schedulability.
    if let Some(r) = p.miss_rate_per_s {
        let e = m.value_at_rate(r);
        let (v, ci, how) = est(&e);
        o.push_str(&format!(
            "  pseudo worst case at {} (once per {}): {v} ({ci}, {how})\n",
            a.miss_rate.as_deref().unwrap_or(""),
            human_secs(1.0 / r)
        ));
        j["pseudo_worst_case"] = serde_json::to_value(&e).unwrap_or(Value::Null);
        if let Some((file, set)) = &p.taskset {
            let (used, why) = match (e.value_ns, e.ci_high_ns) {
                (Some(v), _) => (Some(v), "point estimate"),
                (None, Some(h)) => (
                    Some(h),
                    "upper 95% bound (too few samples for a point estimate)",
                ),
                _ => (None, ""),
            };
            match used {
                Some(l) => {
                    let rep = sched::analyze(set, l);
                    o.push_str(&render_sched(file, &rep, why));
                    j["schedulability"] = serde_json::to_value(&rep).unwrap_or(Value::Null);
                    j["schedulability"]["pseudo_worst_case_from"] = json!(why);
                }
                None => o.push_str(
                    "  schedulability: not analysed — the record cannot bound the pseudo worst case\n",
                ),
            }
        }
    }
    o.push('\n');
    (o, j)
}

fn render_sched(file: &str, r: &SchedReport, why: &str) -> String {
    let mut o = format!(
        "  task set {file}: pseudo worst case {} ({why}) added as {}, U = {:.3}\n",
        r.pseudo_worst_case_ns,
        match r.latency_as {
            sched::LatencyAs::Jitter => "release jitter",
            sched::LatencyAs::Blocking => "blocking",
        },
        r.utilization
    );
    o.push_str(&format!(
        "    {:<16} {:>5} {:>9} {:>9} {:>9} {:>9} {:>9} {:>10}  {}\n",
        "task",
        "prio",
        "period",
        "wcet",
        "deadline",
        "jitter",
        "blocking",
        "response",
        "fixed-priority"
    ));
    for t in &r.fixed_priority {
        o.push_str(&format!(
            "    {:<16} {:>5} {:>9} {:>9} {:>9} {:>9} {:>9} {:>10}  {}\n",
            t.name,
            t.priority,
            t.period_ns.to_string(),
            t.wcet_ns.to_string(),
            t.deadline_ns.to_string(),
            t.jitter_ns.to_string(),
            t.blocking_ns.to_string(),
            t.response_ns
                .map(|r| r.to_string())
                .unwrap_or_else(|| "> D".into()),
            if t.schedulable { "yes" } else { "NO" }
        ));
    }
    o.push_str(&format!(
        "    fixed priority (response-time analysis): {}\n    EDF (processor demand): {} — {}\n",
        if r.fixed_priority_schedulable {
            "schedulable"
        } else {
            "NOT schedulable"
        },
        if r.edf.schedulable {
            "schedulable"
        } else {
            "NOT schedulable"
        },
        r.edf.note
    ));
    o
}
