//! What `punctual forecast` is asked for, checked before any record is
//! read: the buffering (n buffers of length t with compute c, or one of
//! the two to find), the rates, the task set, the profiles and the usage.
//! Then the series of each record it forecasts ([`select`]) and the
//! stall term they take from a noise record ([`attach_stalls`]). Each
//! refusal is one sentence naming the flag or series, for the verb to
//! print with exit status 2.

use std::path::Path;

use punctual_record::{Metric, Record};
use punctual_units::Nanos;

use crate::forecast::{GapStalls, TailModel};
use crate::model::{Buffering, Compute};
use crate::profiles::{self, Profile};
use crate::rate::{parse_rate_per_s, parse_usage, Usage};
use crate::sched;

/// The forecast's question, validated.
pub struct Plan {
    pub buffering: Option<Buffering>,
    pub len_only: Option<Nanos>,
    pub n_only: Option<u32>,
    pub compute: Compute,
    pub rate_per_s: Option<f64>,
    pub miss_rate_per_s: Option<f64>,
    pub taskset: Option<(String, sched::TaskSet)>,
    pub profiles: Vec<Profile>,
    pub usage: Usage,
    /// `--sweep`: the table of MTTF against total buffering.
    pub sweep: bool,
    /// `--target`: the MTTF to size for.
    pub target: Option<Nanos>,
    /// `--miss-rate` as given, quoted in the pseudo worst case.
    pub miss_rate: Option<String>,
}

/// The flags of `punctual forecast` that shape a [`Plan`], as given.
pub struct Asked<'a> {
    pub buffers: Option<i64>,
    pub buffer_len: Option<Nanos>,
    pub compute: &'a str,
    pub sweep: bool,
    pub target: Option<Nanos>,
    pub rate: Option<&'a str>,
    pub miss_rate: Option<&'a str>,
    pub taskset: Option<&'a Path>,
    pub profiles: Option<&'a Path>,
    pub usage: &'a str,
}

impl Plan {
    /// Checks `a` into a plan; `read` reads the task set and profile files
    /// (the command line's file system, or a test's).
    pub fn new(a: &Asked, read: &dyn Fn(&Path) -> std::io::Result<String>) -> Result<Plan, String> {
        let compute = Compute::parse(a.compute).map_err(|e| format!("--{e}"))?;
        let n = match a.buffers {
            Some(n) if n < 1 => {
                return Err(format!(
                    "--buffers {n} is less than 1; a consumer needs at least one buffer"
                ))
            }
            Some(n) if n > 1_000_000 => return Err(format!("--buffers {n} is more than 1000000")),
            Some(n) => Some(n as u32),
            None => None,
        };
        let buffering = match (n, a.buffer_len) {
            (Some(n), Some(t)) => {
                let b = Buffering::new(n, t, compute);
                b.slack()
                    .map_err(|e| format!("--buffers/--buffer-len/--compute: {e}"))?;
                Some(b)
            }
            _ => None,
        };
        if let (Compute::Time(c), None, Some(t)) = (compute, n, a.buffer_len) {
            if c >= t * 63 {
                return Err(format!(
                    "--compute {c} is not less than what 64 buffers of {t} could hold"
                ));
            }
        }
        if n.is_some() && a.buffer_len.is_none() && a.target.is_none() {
            return Err(
                "--buffers needs --buffer-len (or --target, to find the least buffer length)"
                    .into(),
            );
        }
        if a.buffer_len.is_some() && n.is_none() && a.target.is_none() && !a.sweep {
            return Err(
                "--buffer-len needs --buffers (or --target or --sweep, to find or tabulate n)"
                    .into(),
            );
        }
        let rate_per_s = match a.rate {
            Some(r) => Some(parse_rate_per_s(r).map_err(|e| format!("--rate {e}"))?),
            None => None,
        };
        let miss_rate_per_s = match a.miss_rate {
            Some(r) => Some(parse_rate_per_s(r).map_err(|e| format!("--miss-rate {e}"))?),
            None => None,
        };
        let taskset = match a.taskset {
            Some(p) => {
                if miss_rate_per_s.is_none() {
                    return Err(
                        "--taskset needs --miss-rate (the permissible error rate, e.g. 1/h)".into(),
                    );
                }
                let text = read(p).map_err(|e| format!("--taskset {}: {e}", p.display()))?;
                let set = sched::parse_taskset(&text)
                    .map_err(|e| format!("--taskset {}: {e}", p.display()))?;
                Some((p.display().to_string(), set))
            }
            None => None,
        };
        let mut profs = profiles::builtin();
        if let Some(p) = a.profiles {
            let text = read(p).map_err(|e| format!("--profiles {}: {e}", p.display()))?;
            let extra = profiles::parse(&text, &p.display().to_string())?;
            profs = profiles::merge(profs, extra);
        }
        let usage = parse_usage(a.usage)?;
        Ok(Plan {
            sweep: a.sweep,
            target: a.target,
            miss_rate: a.miss_rate.map(str::to_string),
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
}

/// The series of `rec` (named `shown` in messages) to forecast, as
/// models: `only`, or every latency-like series, or every series when it
/// has none; with `renewal`, stalls arrive as its spike log's time stamps
/// say. A missing or empty series is one sentence.
pub fn select(
    rec: &Record,
    shown: &str,
    only: Option<&str>,
    renewal: bool,
) -> Result<Vec<TailModel>, String> {
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
                format!(
                    "{shown} has no series '{name}' (it has: {})",
                    if rec.series.is_empty() {
                        "none".to_string()
                    } else {
                        names()
                    }
                )
            })?;
            if s.count == 0 {
                return Err(format!("{shown}: series '{name}' is empty (0 samples)"));
            }
            vec![s]
        }
        None => {
            let nonempty: Vec<_> = rec.series.iter().filter(|s| s.count > 0).collect();
            if nonempty.is_empty() {
                return Err(format!(
                    "{shown} has no samples in any series ({})",
                    if rec.series.is_empty() {
                        "it has no series".to_string()
                    } else {
                        names()
                    }
                ));
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
                .map_err(|e| format!("{shown}: {e}"))
        })
        .collect()
}

/// Gives each latency series the stall term measured by a running thread
/// on its CPU, from `--stalls` (which must have that CPU). Without it a
/// series keeps the tail inference unless its own record measured gaps
/// without throttling stops (`attach_own_gaps`, see `stalls` in the
/// options for why).
pub fn attach_stalls(
    models: &mut [TailModel],
    rec: &Record,
    shown: &str,
    noise: Option<&(String, Record)>,
) -> Result<(), String> {
    let Some((path, r)) = noise else {
        return Ok(());
    };
    for m in models.iter_mut() {
        if m.metric != Metric::Latency {
            continue;
        }
        let cpu = rec.series_named(&m.name).and_then(|s| s.cpu);
        m.gap_stalls = Some(GapStalls::for_cpu(r, cpu).ok_or_else(|| {
            format!(
                "--stalls {path}: no gap series with stolen-time totals for the CPU of \
                 {shown}'s {} ({})",
                m.name,
                cpu.map(|c| format!("cpu{c}"))
                    .unwrap_or_else(|| "no CPU".into())
            )
        })?);
    }
    Ok(())
}
