//! A reserve run's record: the settings it ran with (`config`) and what it
//! found, as one typed [`ReserveReport`] written under `extra` (its keys
//! are documented in docs/record-format.md).

use std::ffi::OsString;

use punctual_record::{Record, Warning};
use punctual_units::Nanos;
use serde::Serialize;

use crate::constraint::ConstraintOutcome;
use crate::kernel::{Bandwidth, Hrtick, Quiesce, Repair};
use crate::placement::Placed;
use crate::testapp::Background;
use crate::{command, testapp, Spec};

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

/// Everything a reserve run adds to its record's `extra`, one field per key.
#[derive(Clone, Debug, Serialize)]
pub struct ReserveReport {
    /// What the run printed about how the reservation is enforced (the
    /// tick, HRTICK, who stops the thread), so the record prints as the
    /// run did.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    pub hrtick_before: Hrtick,
    pub hrtick_during: Hrtick,
    /// Always written: `null` when the kernel config is not readable.
    pub hz: Option<u32>,
    pub bandwidth_at_start: Bandwidth,
    /// `polling` (the test app reads its clock), or for a command
    /// `trace`/`schedstat`.
    pub received_source: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub period_charged_ns: Option<Vec<Nanos>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub charged_total_ns: Option<Nanos>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub schedstat_charged_total_ns: Option<Nanos>,
    /// Hypervisor steal on the command's CPUs over the run: what the
    /// scheduler's clock (and so schedstat) leaves out and the trace keeps.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host_steal_ns: Option<Nanos>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub requested_mean_ns: Option<Nanos>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub controller: Option<ControllerReport>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub misses: Option<Misses>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trace: Option<TraceCounts>,
    /// A command's exit status (`null` when it died of a signal).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<Option<i32>>,
    /// A command's: punctual ended it at `--duration` (its exit status is
    /// then not a failure).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ended_by_punctual: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub background: Option<Vec<Background>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub constraint: Option<ConstraintOutcome>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub placement: Option<Vec<Placed>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reservations: Option<Vec<ReservationReport>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub teardown_wait: Option<Quiesce>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub root_domain_repair: Option<Repair>,
}

/// The budget controller and the self-enforcement's costs.
#[derive(Clone, Debug, Serialize)]
pub struct ControllerReport {
    pub updates: u64,
    pub applied: u64,
    /// Test app only: CPU-clock reads of the self-enforcement.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enforce_overhead_ns: Option<Nanos>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enforce_overhead_ratio_of_reserved: Option<f64>,
    pub overhead_ns: Nanos,
    pub overhead_ratio_of_reserved: f64,
    pub setattr_refusals: u64,
    pub clamped_periods: u64,
}

/// A command's missed periods by reason.
#[derive(Clone, Debug, Serialize)]
pub struct Misses {
    pub short_charged: u64,
    pub stolen: u64,
}

/// The command trace's own counts.
#[derive(Clone, Debug, Serialize)]
pub struct TraceCounts {
    pub events: u64,
    pub lost_events: u64,
    pub incomplete_periods: u64,
}

/// One of several reservations.
#[derive(Clone, Debug, Serialize)]
pub struct ReservationReport {
    pub task: String,
    pub cpu: u32,
    pub budget_ns: Nanos,
    pub period_ns: Nanos,
    pub admitted_ns: Nanos,
    pub requested_mean_ns: Nanos,
    pub charged_total_ns: Nanos,
    pub controller_updates: u64,
    pub controller_overhead_ns: Nanos,
}

impl ReserveReport {
    fn new(k: &KernelFacts, received_source: &str) -> ReserveReport {
        ReserveReport {
            notes: Vec::new(),
            hrtick_before: k.hrtick_before.clone(),
            hrtick_during: k.hrtick_during.clone(),
            hz: k.hz,
            bandwidth_at_start: k.bandwidth_at_start.clone(),
            received_source: received_source.to_string(),
            period_charged_ns: None,
            charged_total_ns: None,
            schedstat_charged_total_ns: None,
            host_steal_ns: None,
            requested_mean_ns: None,
            controller: None,
            misses: None,
            trace: None,
            exit_code: None,
            ended_by_punctual: None,
            background: None,
            constraint: None,
            placement: None,
            reservations: None,
            teardown_wait: None,
            root_domain_repair: None,
        }
    }

    /// Writes every field into `rec.extra`, one key each.
    pub fn write_into(&self, rec: &mut Record) {
        if let Ok(serde_json::Value::Object(m)) = serde_json::to_value(self) {
            rec.extra.extend(m);
        }
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
                ..ReserveReport::new(kernel, "polling")
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
                ..ReserveReport::new(kernel, "polling")
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
                ..ReserveReport::new(kernel, c.received_source)
            }
        }
    };
    report.write_into(rec);
    report
}

#[cfg(test)]
mod tests {
    use super::*;
    use punctual_record::{Platform, Source};

    /// Keys that hold nothing are left out, except `hz` (always written)
    /// and a command's `exit_code`, whose `null` says no status is known.
    #[test]
    fn the_report_writes_one_extra_key_per_field_it_holds() {
        let facts = KernelFacts {
            hrtick_before: Hrtick::NotBuilt,
            hrtick_during: Hrtick::NotBuilt,
            hz: None,
            bandwidth_at_start: Bandwidth::default(),
        };
        let mut rec = Record::new(Source::Measured, "reserve", Platform::default());
        let report = ReserveReport {
            exit_code: Some(None),
            ..ReserveReport::new(&facts, "schedstat")
        };
        report.write_into(&mut rec);
        let keys: Vec<&str> = rec.extra.keys().map(|k| k.as_str()).collect();
        assert_eq!(
            keys,
            [
                "bandwidth_at_start",
                "exit_code",
                "hrtick_before",
                "hrtick_during",
                "hz",
                "received_source"
            ]
        );
        assert_eq!(rec.extra["hz"], serde_json::Value::Null);
        assert_eq!(rec.extra["exit_code"], serde_json::Value::Null);
        assert_eq!(rec.extra["received_source"], "schedstat");
        assert_eq!(
            rec.extra["hrtick_before"],
            serde_json::json!({"state": "not_built"})
        );
    }
}
