//! A reserve run's record: the settings it ran with (`config`) and what it
//! found, as one typed [`ReserveReport`] written under `extra` (the type is
//! `punctual_record::reserve`'s, so the text report reads it back as the
//! same struct; its keys are documented in docs/record-format.md).

use std::ffi::OsString;

use punctual_record::{Record, Warning};
use punctual_units::Nanos;

use crate::kernel::{Bandwidth, Hrtick};
use crate::placement::Placed;
use crate::{command, testapp, Spec};

pub use punctual_record::reserve::{
    ControllerReport, Misses, ReservationReport, ReserveReport, TraceCounts,
};

/// What a run produced: the test app, a command, or several reservations
/// placed on CPUs.
#[derive(Debug)]
pub enum Outcome {
    App(Box<testapp::Outcome>),
    Cmd(Box<command::Outcome>),
    Several(Vec<(Placed, testapp::Outcome)>),
}

/// The settings a run was asked for, as the record's `config` names them.
#[derive(Clone, Debug, Default)]
pub struct Settings {
    pub cpu: Option<u32>,
    pub hrtick: bool,
    pub gap_threshold: Nanos,
    pub test_app: bool,
    pub threads: u32,
    /// `--duration`, when given.
    pub duration: Option<Nanos>,
    /// How long the test app runs (`--duration` or its default).
    pub asked: Nanos,
    /// `--constraint`, as typed.
    pub constraint: Option<String>,
    /// `--reserve`, as typed (several reservations).
    pub reserve: Vec<String>,
    pub command: Vec<OsString>,
    /// The run was stopped by Ctrl-C or SIGTERM (a command's run; the test
    /// app says so itself).
    pub interrupted: bool,
}

/// What the kernel was found to do for the run.
#[derive(Clone, Debug)]
pub struct KernelFacts {
    pub hrtick_before: Hrtick,
    pub hrtick_during: Hrtick,
    pub hz: Option<u32>,
    pub bandwidth_at_start: Bandwidth,
}

/// The report's fields every run has, the rest empty.
fn base(k: &KernelFacts, received_source: &str) -> ReserveReport {
    ReserveReport {
        hrtick_before: k.hrtick_before.clone(),
        hrtick_during: k.hrtick_during.clone(),
        hz: k.hz,
        bandwidth_at_start: k.bandwidth_at_start.clone(),
        received_source: received_source.to_string(),
        ..ReserveReport::default()
    }
}

/// Fills `rec` from a finished run: `config` from the settings, the
/// periods, summaries, series and stolen time from the outcome, and the
/// report of [`ReserveReport`].
pub fn fill_record(
    rec: &mut Record,
    s: &Settings,
    spec: &Spec,
    outcome: &Outcome,
    kernel: &KernelFacts,
) -> ReserveReport {
    // With several reservations their amounts are in `config.reserve` and
    // `extra.reservations`; the single-reservation keys would only name
    // the first.
    if !matches!(outcome, Outcome::Several(_)) {
        rec.set_config("budget_ns", spec.budget);
        rec.set_config("period_ns", spec.period);
        rec.set_config("deadline_ns", spec.deadline);
        rec.set_config("requested_ns", spec.target());
        rec.set_config("max_budget_ns", spec.max_budget);
    }
    rec.set_config("mode", spec.mode);
    rec.set_config("gain_ratio", spec.gain_ratio);
    rec.set_config("over_reserve_ratio", spec.over_reserve_ratio);
    rec.set_config("cpu", s.cpu);
    rec.set_config("hrtick_asked", s.hrtick);
    rec.set_config("gap_threshold_ns", s.gap_threshold);
    if s.test_app {
        rec.set_config("test_app_threads", s.threads);
        rec.set_config("duration_ns", s.asked);
        if let Some(c) = &s.constraint {
            rec.set_config("constraint", c);
        }
    } else {
        let argv: Vec<String> = s
            .command
            .iter()
            .map(|a| a.to_string_lossy().into())
            .collect();
        rec.set_config("command", argv);
        rec.set_config("duration_ns", s.duration);
    }
    let report = match outcome {
        Outcome::Several(v) => {
            rec.duration_ns = v.iter().map(|(_, o)| o.elapsed).max().unwrap_or_default();
            rec.interrupted = v.iter().any(|(_, o)| o.interrupted);
            let mut per = Vec::new();
            for (p, o) in v {
                rec.periods.extend(o.periods.iter().cloned());
                rec.periods_dropped += o.periods_dropped;
                rec.period_summary.push(o.summary.clone());
                rec.series.push(o.received.clone());
                rec.series.push(o.gaps.clone());
                rec.stolen.push(o.stolen.clone());
                per.push(ReservationReport {
                    task: o.summary.task.clone(),
                    cpu: p.cpu,
                    budget_ns: o.summary.reserved_ns,
                    period_ns: p.period_ns,
                    admitted_ns: p.runtime_ns,
                    requested_mean_ns: o.requested_mean_ns,
                    charged_total_ns: o.charged_total_ns,
                    controller_updates: o.controller_updates,
                    controller_overhead_ns: o.controller_overhead_ns,
                });
            }
            rec.set_config("reserve", s.reserve.clone());
            rec.set_config("test_app_threads", s.threads);
            rec.set_config("duration_ns", s.asked);
            ReserveReport {
                placement: Some(v.iter().map(|(p, _)| p.clone()).collect()),
                reservations: Some(per),
                ..base(kernel, "polling")
            }
        }
        Outcome::App(o) => {
            rec.duration_ns = o.elapsed;
            rec.interrupted = o.interrupted;
            if o.interrupted {
                rec.warnings.push(Warning::Interrupted {
                    completed_ns: o.elapsed.0,
                    asked_ns: s.asked.0,
                });
            }
            rec.periods = o.periods.clone();
            rec.periods_dropped = o.periods_dropped;
            rec.period_summary = vec![o.summary.clone()];
            rec.series = vec![o.received.clone(), o.gaps.clone()];
            rec.stolen = vec![o.stolen.clone()];
            let reserved_total = spec.budget.0 as f64 * o.summary.periods.max(1) as f64;
            ReserveReport {
                period_charged_ns: Some(o.charged_ns.clone()),
                charged_total_ns: Some(o.charged_total_ns),
                requested_mean_ns: Some(o.requested_mean_ns),
                controller: Some(ControllerReport {
                    updates: o.controller_updates,
                    applied: o.controller_applied,
                    enforce_overhead_ns: Some(o.enforce_overhead_ns),
                    enforce_overhead_ratio_of_reserved: Some(
                        o.enforce_overhead_ns.0 as f64 / reserved_total,
                    ),
                    overhead_ns: o.controller_overhead_ns,
                    overhead_ratio_of_reserved: o.controller_overhead_ns.0 as f64 / reserved_total,
                    setattr_refusals: o.setattr_refusals,
                    clamped_periods: o.clamped_periods,
                }),
                background: Some(o.background.clone()),
                constraint: o.constraint.clone(),
                ..base(kernel, "polling")
            }
        }
        Outcome::Cmd(c) => {
            rec.duration_ns = c.elapsed;
            rec.interrupted = s.interrupted;
            rec.periods = c.periods.clone();
            rec.periods_dropped = c.periods_dropped;
            rec.period_summary = vec![c.summary.clone()];
            let reserved_total = spec.budget.0 as f64 * c.summary.periods.max(1) as f64;
            if let Some(why) = &c.no_tracing {
                rec.warnings.push(Warning::Other {
                    message: format!("kernel tracing unavailable ({why}): received is the charged CPU time from schedstat, and stolen time is unknown"),
                });
            }
            for w in &c.warnings {
                rec.warnings.push(Warning::Other { message: w.clone() });
            }
            ReserveReport {
                period_charged_ns: Some(c.charged_ns.clone()),
                charged_total_ns: Some(c.charged_total_ns),
                schedstat_charged_total_ns: Some(c.schedstat_total_ns),
                host_steal_ns: Some(c.host_steal_ns),
                requested_mean_ns: Some(c.requested_mean_ns),
                controller: Some(ControllerReport {
                    updates: c.controller_updates,
                    applied: c.controller_applied,
                    enforce_overhead_ns: None,
                    enforce_overhead_ratio_of_reserved: None,
                    overhead_ns: c.controller_overhead_ns,
                    overhead_ratio_of_reserved: c.controller_overhead_ns.0 as f64 / reserved_total,
                    setattr_refusals: c.setattr_refusals,
                    clamped_periods: c.clamped_periods,
                }),
                misses: Some(Misses {
                    short_charged: c.misses_short_charged,
                    stolen: c.misses_stolen,
                }),
                trace: Some(TraceCounts {
                    events: c.trace_events,
                    lost_events: c.trace_lost_events,
                    incomplete_periods: c.incomplete_periods,
                }),
                exit_code: Some(c.exit_code),
                ended_by_punctual: Some(c.ended_by_us),
                ..base(kernel, c.received_source)
            }
        }
    };
    report.write_into(rec);
    report
}
