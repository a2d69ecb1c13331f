//! A reserve run's section of the record: what the run found beyond the
//! periods, series and stolen time every record has. `punctual-reserve`
//! fills [`ReserveReport`] and the text report reads it back, so the two
//! sides share one type instead of agreeing on key names.
//!
//! The section's fields are top-level keys of `extra` (one key per field,
//! as records have always had them), not an object of their own: records
//! written before the type existed read back unchanged, and the JSON of a
//! run stays what docs/record-format.md lists. The field types are plain
//! data here, below both crates; the code that measures them stays in
//! `punctual-reserve`.

use serde::{Deserialize, Deserializer, Serialize};

use crate::{Nanos, Record};

/// Whether the deadline class's budgets are enforced by a high-resolution
/// timer or only at the scheduler tick.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum Hrtick {
    /// The feature (`HRTICK_DL` on kernels that split it, else `HRTICK`) is on.
    On {
        feature: String,
    },
    Off {
        feature: String,
    },
    /// The kernel was built without CONFIG_SCHED_HRTICK.
    NotBuilt,
    /// Could not tell; the kernel default is off.
    Unknown {
        reason: String,
    },
}

impl Hrtick {
    pub fn enforced_at_tick(&self) -> bool {
        !matches!(self, Hrtick::On { .. })
    }
}

impl Default for Hrtick {
    /// What a record that does not say reads as.
    fn default() -> Self {
        Hrtick::Unknown {
            reason: "not in the record".into(),
        }
    }
}

/// One deadline thread found on the system.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DlTask {
    pub tid: i32,
    pub comm: String,
    pub runtime_ns: Nanos,
    pub period_ns: Nanos,
}

/// The deadline bandwidth picture an admission refusal is explained with.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Bandwidth {
    /// sched_rt_runtime_us / sched_rt_period_us: the per-CPU share the
    /// kernel lets deadline (and RT) tasks admit; None = unlimited (-1).
    pub limit_per_cpu_ratio: Option<f64>,
    /// Per-CPU `dl_bw->total_bw` from sched/debug (admitted bandwidth of
    /// the CPU's root domain, including the kernel's own fair servers), as
    /// a ratio of one CPU.
    pub root_domain_in_use_ratio: Vec<(u32, f64)>,
    /// Deadline threads of user space, summed as CPU ratios.
    pub tasks_in_use_ratio: f64,
    pub tasks: Vec<DlTask>,
}

/// What waiting for released bandwidth found.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Quiesce {
    pub waited_ns: Nanos,
    /// `polled`: sched/debug showed the bandwidth gone; `bound`: it could
    /// not be read, so the bound (the largest relative deadline) was
    /// waited out; `timeout`: still held at the bound.
    pub how: String,
}

/// What a check of the root-domain totals after teardown found and did.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Repair {
    /// The negative totals found (CPU, ratio of one CPU).
    pub found: Vec<(u32, f64)>,
    /// Root-domain rebuilds made to clear them.
    pub rebuilds: u32,
    /// The totals after the last rebuild.
    pub after: Vec<(u32, f64)>,
    /// Whether every total is back at or above zero.
    pub repaired: bool,
}

/// One reservation's place.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Placed {
    /// Index into the requests, in the order given.
    pub index: usize,
    pub cpu: u32,
    pub runtime_ns: Nanos,
    pub period_ns: Nanos,
    /// Reserved share of the CPU (plan view, all reservations) before and
    /// after this one was placed.
    pub cpu_utilization_before_ratio: f64,
    pub cpu_utilization_after_ratio: f64,
}

/// Answer to a time constraint's request.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "decision", rename_all = "snake_case")]
pub enum Decision {
    Granted,
    Denied { reason: String },
}

impl Decision {
    pub fn granted(&self) -> bool {
        matches!(self, Decision::Granted)
    }
}

/// What an ended constraint took.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Taken {
    /// Wall time from the start of the window to the end call.
    pub elapsed_ns: Nanos,
    /// CPU time charged to the thread in the window.
    pub cpu_ns: Nanos,
}

/// What the demonstration constraint did.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ConstraintOutcome {
    pub estimate_ns: Nanos,
    pub start_ns: Nanos,
    pub deadline_ns: Nanos,
    pub decision: Decision,
    /// Work received (own polling view) and when it completed, relative to
    /// the run's start.
    pub received_ns: Nanos,
    pub completed_at_ns: Option<Nanos>,
    pub met_deadline: bool,
    pub taken: Option<Taken>,
}

/// What one competitor thread of the test application got.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Background {
    pub name: String,
    pub received_ns: Nanos,
    pub observed_ns: Nanos,
}

/// Everything a reserve run adds to its record's `extra`, one field per
/// key. Here and in the parts below, a field reads back with its default
/// when absent, so a record of an older build that lacks a key still
/// prints what it has.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
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
    /// A command's exit status (`null` when it died of a signal); absent
    /// for the test application. The outer `Option` is whether the key is
    /// there, so a `null` reads back as `Some(None)`.
    #[serde(skip_serializing_if = "Option::is_none", deserialize_with = "present")]
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

/// A key that is there, whatever its value (`null` included).
fn present<'de, D, T>(d: D) -> Result<Option<T>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    T::deserialize(d).map(Some)
}

/// The budget controller and the self-enforcement's costs.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
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
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Misses {
    pub short_charged: u64,
    pub stolen: u64,
}

/// The command trace's own counts.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct TraceCounts {
    pub events: u64,
    pub lost_events: u64,
    pub incomplete_periods: u64,
}

/// One of several reservations.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
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
    /// Writes every field into `rec.extra`, one key each.
    pub fn write_into(&self, rec: &mut Record) {
        if let Ok(serde_json::Value::Object(m)) = serde_json::to_value(self) {
            rec.extra.extend(m);
        }
    }

    /// The section of a `reserve` record, read from the keys of `extra`
    /// (the other keys there are ignored); `None` for another kind of
    /// record, or when a key holds what no reserve run wrote.
    pub fn read(rec: &Record) -> Option<ReserveReport> {
        if rec.kind != "reserve" {
            return None;
        }
        let map: serde_json::Map<String, serde_json::Value> = rec
            .extra
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        serde_json::from_value(serde_json::Value::Object(map)).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Platform, Source};

    fn facts() -> ReserveReport {
        ReserveReport {
            hrtick_before: Hrtick::NotBuilt,
            hrtick_during: Hrtick::On {
                feature: "HRTICK_DL".into(),
            },
            hz: None,
            received_source: "schedstat".into(),
            ..ReserveReport::default()
        }
    }

    /// Keys that hold nothing are left out, except `hz` (always written)
    /// and a command's `exit_code`, whose `null` says no status is known.
    #[test]
    fn the_report_writes_one_extra_key_per_field_it_holds() {
        let mut rec = Record::new(Source::Measured, "reserve", Platform::default());
        let report = ReserveReport {
            exit_code: Some(None),
            ..facts()
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
        assert_eq!(
            rec.extra["hrtick_before"],
            serde_json::json!({"state": "not_built"})
        );
    }

    /// What is written reads back as the same value, through a saved
    /// record's text: a `null` exit status stays "known to be none", an
    /// absent one stays absent, and keys of other producers are ignored.
    #[test]
    fn a_saved_section_reads_back_as_written() {
        let full = ReserveReport {
            notes: vec!["budget enforced at the tick".into()],
            period_charged_ns: Some(vec![Nanos(4_000_000), Nanos(3_900_000)]),
            charged_total_ns: Some(Nanos(7_900_000)),
            controller: Some(ControllerReport {
                updates: 2,
                applied: 1,
                overhead_ns: Nanos(1200),
                overhead_ratio_of_reserved: 0.00015,
                ..ControllerReport::default()
            }),
            exit_code: Some(None),
            ended_by_punctual: Some(true),
            constraint: Some(ConstraintOutcome {
                estimate_ns: Nanos(5_000_000),
                start_ns: Nanos(30_000_000),
                deadline_ns: Nanos(40_000_000),
                decision: Decision::Denied {
                    reason: "no room".into(),
                },
                received_ns: Nanos::ZERO,
                completed_at_ns: None,
                met_deadline: false,
                taken: None,
            }),
            teardown_wait: Some(Quiesce {
                waited_ns: Nanos(3_000_000),
                how: "polled".into(),
            }),
            ..facts()
        };
        for report in [full, facts()] {
            let mut rec = Record::new(Source::Measured, "reserve", Platform::default());
            rec.extra.insert("stopped_at".into(), serde_json::json!(1));
            report.write_into(&mut rec);
            let back = Record::from_json(&rec.to_json_pretty()).unwrap();
            assert_eq!(ReserveReport::read(&back), Some(report));
        }
    }

    #[test]
    fn a_record_of_another_kind_has_no_reserve_section() {
        let mut rec = Record::new(Source::Measured, "timer", Platform::default());
        facts().write_into(&mut rec);
        assert_eq!(ReserveReport::read(&rec), None);
    }

    /// A record of an older build that lacks keys still reads, with what
    /// it lacks at its default.
    #[test]
    fn missing_keys_read_as_defaults() {
        let mut rec = Record::new(Source::Measured, "reserve", Platform::default());
        rec.extra
            .insert("received_source".into(), serde_json::json!("polling"));
        let r = ReserveReport::read(&rec).unwrap();
        assert_eq!(r.received_source, "polling");
        assert_eq!(r.hrtick_before, Hrtick::default());
        assert_eq!(r.exit_code, None);
    }

    /// docs/record-format.md lists every key the section can write: a
    /// field added here without its row fails.
    #[test]
    fn every_key_is_documented() {
        let doc = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../docs/record-format.md"
        ))
        .unwrap();
        let table = doc
            .split("### `extra` of a `reserve` run")
            .nth(1)
            .expect("the reserve section of record-format.md");
        let table = table.split("\n## ").next().unwrap();
        let every = ReserveReport {
            notes: vec!["n".into()],
            period_charged_ns: Some(vec![]),
            charged_total_ns: Some(Nanos::ZERO),
            schedstat_charged_total_ns: Some(Nanos::ZERO),
            host_steal_ns: Some(Nanos::ZERO),
            requested_mean_ns: Some(Nanos::ZERO),
            controller: Some(ControllerReport::default()),
            misses: Some(Misses::default()),
            trace: Some(TraceCounts::default()),
            exit_code: Some(Some(0)),
            ended_by_punctual: Some(false),
            background: Some(vec![]),
            constraint: Some(ConstraintOutcome {
                estimate_ns: Nanos::ZERO,
                start_ns: Nanos::ZERO,
                deadline_ns: Nanos::ZERO,
                decision: Decision::Granted,
                received_ns: Nanos::ZERO,
                completed_at_ns: None,
                met_deadline: true,
                taken: None,
            }),
            placement: Some(vec![]),
            reservations: Some(vec![]),
            teardown_wait: Some(Quiesce::default()),
            root_domain_repair: Some(Repair {
                found: vec![],
                rebuilds: 0,
                after: vec![],
                repaired: true,
            }),
            ..facts()
        };
        let serde_json::Value::Object(keys) = serde_json::to_value(&every).unwrap() else {
            panic!("the section is an object");
        };
        assert_eq!(keys.len(), 22);
        for k in keys.keys() {
            assert!(
                table.contains(&format!("| `{k}` |")),
                "docs/record-format.md has no row for extra.{k} of a reserve run"
            );
        }
    }
}
