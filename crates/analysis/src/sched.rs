//! Cota-Robles & Held §5.2: schedulability analysis on a general-purpose OS with a
//! *pseudo worst case* — the latency exceeded at a permissible error rate
//! — added to each task as release jitter (or as blocking), then the
//! classic tests: fixed-priority response-time analysis with jitter and
//! blocking (Audsley et al. 1993), and the EDF processor-demand test
//! (Baruah, Rosier, Howell 1990; jitter as in Spuri 1996).

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use punctual_units::{parse_duration, Nanos};
use serde::{Deserialize, Serialize};

/// How the pseudo worst case enters the analysis.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LatencyAs {
    /// Each release may start that late (the OS delayed the wake-up).
    #[default]
    Jitter,
    /// Each job may be held up once by that much (a non-preemptible
    /// section of the OS in its way).
    Blocking,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSet {
    #[serde(default)]
    latency_as: LatencyAs,
    #[serde(default)]
    task: Vec<RawTask>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTask {
    name: String,
    period: String,
    wcet: String,
    deadline: Option<String>,
    priority: Option<i64>,
    jitter: Option<String>,
    blocking: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Task {
    pub name: String,
    pub period_ns: Nanos,
    pub wcet_ns: Nanos,
    pub deadline_ns: Nanos,
    /// Smaller runs first. Deadline-monotonic order when not given.
    pub priority: i64,
    pub jitter_ns: Nanos,
    pub blocking_ns: Nanos,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TaskSet {
    pub latency_as: LatencyAs,
    pub tasks: Vec<Task>,
}

/// Parses a task-set TOML file (format in `docs/forecast.md`); errors
/// are one sentence naming the task and field.
pub fn parse_taskset(text: &str) -> Result<TaskSet, String> {
    let raw: RawSet = toml::from_str(text)
        .map_err(|e| format!("task set is not valid: {}", e.message().trim()))?;
    if raw.task.is_empty() {
        return Err("task set has no [[task]] entries".to_string());
    }
    let mut tasks = Vec::new();
    for t in &raw.task {
        let dur = |field: &str, v: &str| {
            parse_duration(v).map_err(|e| format!("task '{}': {field} {e}", t.name))
        };
        let period = dur("period", &t.period)?;
        let wcet = dur("wcet", &t.wcet)?;
        let deadline = match &t.deadline {
            Some(d) => dur("deadline", d)?,
            None => period,
        };
        if period.is_zero() || wcet.is_zero() || deadline.is_zero() {
            return Err(format!(
                "task '{}': period, wcet and deadline must be greater than zero",
                t.name
            ));
        }
        if deadline > period {
            return Err(format!(
                "task '{}': deadline {deadline} is longer than its period {period}; only \
                 constrained deadlines (D ≤ T) are analysed",
                t.name
            ));
        }
        tasks.push(Task {
            name: t.name.clone(),
            period_ns: period,
            wcet_ns: wcet,
            deadline_ns: deadline,
            priority: t.priority.unwrap_or(i64::MAX),
            jitter_ns: match &t.jitter {
                Some(j) => dur("jitter", j)?,
                None => Nanos::ZERO,
            },
            blocking_ns: match &t.blocking {
                Some(b) => dur("blocking", b)?,
                None => Nanos::ZERO,
            },
        });
    }
    // Unranked tasks: deadline-monotonic after the ranked ones, stable.
    let mut order: Vec<usize> = (0..tasks.len()).collect();
    order.sort_by_key(|&i| (tasks[i].priority, tasks[i].deadline_ns, i));
    for (rank, &i) in order.iter().enumerate() {
        if tasks[i].priority == i64::MAX {
            tasks[i].priority = 1_000_000 + rank as i64;
        }
    }
    Ok(TaskSet {
        latency_as: raw.latency_as,
        tasks,
    })
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TaskResult {
    pub name: String,
    pub priority: i64,
    pub period_ns: Nanos,
    pub wcet_ns: Nanos,
    pub deadline_ns: Nanos,
    /// Jitter and blocking including the pseudo worst case.
    pub jitter_ns: Nanos,
    pub blocking_ns: Nanos,
    /// Worst-case response time under fixed priority; `None` when it
    /// exceeds the deadline (the iteration stops there).
    pub response_ns: Option<Nanos>,
    pub schedulable: bool,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct EdfResult {
    pub schedulable: bool,
    /// Demand-bound check points tested.
    pub points_checked: u64,
    /// Interval length where demand first exceeded supply.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first_overload_at_ns: Option<Nanos>,
    pub note: String,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SchedReport {
    pub pseudo_worst_case_ns: Nanos,
    pub latency_as: LatencyAs,
    pub utilization: f64,
    pub fixed_priority: Vec<TaskResult>,
    pub fixed_priority_schedulable: bool,
    pub edf: EdfResult,
}

/// Runs both tests with `pseudo` added to every task.
pub fn analyze(set: &TaskSet, pseudo: Nanos) -> SchedReport {
    let mut tasks = set.tasks.clone();
    for t in &mut tasks {
        match set.latency_as {
            LatencyAs::Jitter => t.jitter_ns += pseudo,
            LatencyAs::Blocking => t.blocking_ns += pseudo,
        }
    }
    tasks.sort_by_key(|t| t.priority);
    let utilization: f64 = tasks
        .iter()
        .map(|t| t.wcet_ns.0 as f64 / t.period_ns.0 as f64)
        .sum();
    let fp: Vec<TaskResult> = (0..tasks.len())
        .map(|i| {
            let r = response_time(&tasks, i);
            let t = &tasks[i];
            TaskResult {
                name: t.name.clone(),
                priority: t.priority,
                period_ns: t.period_ns,
                wcet_ns: t.wcet_ns,
                deadline_ns: t.deadline_ns,
                jitter_ns: t.jitter_ns,
                blocking_ns: t.blocking_ns,
                response_ns: r,
                schedulable: r.is_some(),
            }
        })
        .collect();
    SchedReport {
        pseudo_worst_case_ns: pseudo,
        latency_as: set.latency_as,
        utilization,
        fixed_priority_schedulable: fp.iter().all(|t| t.schedulable),
        fixed_priority: fp,
        edf: edf_demand(&tasks, utilization),
    }
}

/// R_i = J_i + w, w = C_i + B_i + Σ_{j ∈ hp(i)} ⌈(w + J_j)/T_j⌉·C_j.
/// Tasks are sorted by priority; equal priorities interfere both ways.
fn response_time(tasks: &[Task], i: usize) -> Option<Nanos> {
    let me = &tasks[i];
    let base = me.wcet_ns.0 as u128 + me.blocking_ns.0 as u128;
    let limit = me.deadline_ns.0 as u128;
    let mut w = base;
    loop {
        let mut next = base;
        for (j, o) in tasks.iter().enumerate() {
            if j != i && o.priority <= me.priority {
                let t = o.period_ns.0 as u128;
                next += (w + o.jitter_ns.0 as u128).div_ceil(t) * o.wcet_ns.0 as u128;
            }
        }
        if next + me.jitter_ns.0 as u128 > limit {
            return None;
        }
        if next == w {
            return Some(Nanos((w + me.jitter_ns.0 as u128) as u64));
        }
        w = next;
    }
}

/// Demand bound with jitter: h(L) = Σ max(0, ⌊(L + J_i − D_i)/T_i⌋ + 1)·C_i;
/// schedulable iff h(L) + B ≤ L at every step point up to the bound
/// L* = (Σ (T_i − D_i + J_i)·U_i + B) / (1 − U).
fn edf_demand(tasks: &[Task], u: f64) -> EdfResult {
    const MAX_POINTS: u64 = 5_000_000;
    let b = tasks.iter().map(|t| t.blocking_ns.0).max().unwrap_or(0) as f64;
    if u > 1.0 + 1e-12 {
        return EdfResult {
            schedulable: false,
            points_checked: 0,
            first_overload_at_ns: None,
            note: format!("utilization {u:.4} exceeds 1"),
        };
    }
    let bound = if u < 1.0 - 1e-12 {
        let s: f64 = tasks
            .iter()
            .map(|t| {
                (t.period_ns.0 as f64 - t.deadline_ns.0 as f64 + t.jitter_ns.0 as f64)
                    * (t.wcet_ns.0 as f64 / t.period_ns.0 as f64)
            })
            .sum();
        let dmax = tasks
            .iter()
            .map(|t| t.deadline_ns.0.saturating_sub(t.jitter_ns.0))
            .max()
            .unwrap_or(0) as f64;
        ((s + b) / (1.0 - u)).max(dmax)
    } else {
        // U = 1: one hyperperiod past the largest deadline.
        let mut l: u128 = 1;
        for t in tasks {
            let p = t.period_ns.0 as u128;
            l = l / gcd(l, p) * p;
            if l > 1u128 << 62 {
                return EdfResult {
                    schedulable: false,
                    points_checked: 0,
                    first_overload_at_ns: None,
                    note: "utilization is exactly 1 and the hyperperiod is too long to check; \
                           not decided (treated as not schedulable)"
                        .to_string(),
                };
            }
        }
        l as f64
            + tasks
                .iter()
                .map(|t| t.deadline_ns.0 + t.jitter_ns.0)
                .max()
                .unwrap_or(0) as f64
    };
    // Step points L = k·T_i + D_i − J_i, in increasing order.
    let mut heap: BinaryHeap<Reverse<(u64, usize)>> = BinaryHeap::new();
    for (i, t) in tasks.iter().enumerate() {
        let first = t.deadline_ns.0.saturating_sub(t.jitter_ns.0);
        heap.push(Reverse((first, i)));
    }
    let mut checked = 0u64;
    while let Some(Reverse((l, i))) = heap.pop() {
        if l as f64 > bound {
            break;
        }
        if checked >= MAX_POINTS {
            return EdfResult {
                schedulable: false,
                points_checked: checked,
                first_overload_at_ns: None,
                note: format!(
                    "stopped after {MAX_POINTS} check points before the bound {}; not decided \
                     (treated as not schedulable)",
                    Nanos(bound as u64)
                ),
            };
        }
        checked += 1;
        let demand: u128 = tasks
            .iter()
            .map(|t| {
                let x = l as i128 + t.jitter_ns.0 as i128 - t.deadline_ns.0 as i128;
                if x < 0 {
                    0
                } else {
                    (x as u128 / t.period_ns.0 as u128 + 1) * t.wcet_ns.0 as u128
                }
            })
            .sum();
        if demand as f64 + b > l as f64 {
            return EdfResult {
                schedulable: false,
                points_checked: checked,
                first_overload_at_ns: Some(Nanos(l)),
                note: format!(
                    "in an interval of {} the work due is {} (+ blocking {}), more than fits",
                    Nanos(l),
                    Nanos(demand as u64),
                    Nanos(b as u64)
                ),
            };
        }
        heap.push(Reverse((l + tasks[i].period_ns.0, i)));
    }
    EdfResult {
        schedulable: true,
        points_checked: checked,
        first_overload_at_ns: None,
        note: format!(
            "demand ≤ supply at every step point up to {}",
            Nanos(bound as u64)
        ),
    }
}

fn gcd(a: u128, b: u128) -> u128 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SET: &str = r#"
        [[task]]
        name = "a"
        period = "3ms"
        wcet = "1ms"
        [[task]]
        name = "b"
        period = "5ms"
        wcet = "1ms"
        [[task]]
        name = "c"
        period = "15ms"
        wcet = "3ms"
    "#;

    /// C = (1, 1, 3), T = D = (3, 5, 15), rate-monotonic, by hand:
    /// R_c: w = 3 → 3+1+1 = 5 → 3+2+1 = 6 → 3+2+2 = 7 → 3+3+2 = 8 → 8.
    #[test]
    fn response_times_match_hand_computation() {
        let set = parse_taskset(SET).unwrap();
        let r = analyze(&set, Nanos::ZERO);
        let got: Vec<Option<Nanos>> = r.fixed_priority.iter().map(|t| t.response_ns).collect();
        assert_eq!(
            got,
            vec![
                Some(Nanos::from_ms(1)),
                Some(Nanos::from_ms(2)),
                Some(Nanos::from_ms(8))
            ]
        );
        assert!(r.fixed_priority_schedulable && r.edf.schedulable);
        // 1 ms of pseudo worst case as jitter: a: R = 1 + 1 = 2;
        // b: w = 1 + ⌈(w+1)/3⌉ → w = 2, R = 3;
        let r = analyze(&set, Nanos::from_ms(1));
        assert_eq!(r.fixed_priority[0].response_ns, Some(Nanos::from_ms(2)));
        assert_eq!(r.fixed_priority[1].response_ns, Some(Nanos::from_ms(3)));
        // c: w=3 → 3+⌈4/3⌉+⌈4/5⌉=3+2+1=6 → 3+⌈7/3⌉+⌈7/5⌉=3+3+2=8 → 3+3+2=8; R = 9.
        assert_eq!(r.fixed_priority[2].response_ns, Some(Nanos::from_ms(9)));
        // 3 ms of jitter breaks b (R = 1+? > 5).
        let r = analyze(&set, Nanos::from_ms(3));
        assert!(!r.fixed_priority_schedulable);
    }

    #[test]
    fn edf_demand_test() {
        // U = 1/3 + 1/5 + 3/15 = 0.733: schedulable; a 4 ms blocking term
        // makes the first deadline (3 ms) infeasible.
        let set = parse_taskset(SET).unwrap();
        assert!(analyze(&set, Nanos::ZERO).edf.schedulable);
        let blocking = TaskSet {
            latency_as: LatencyAs::Blocking,
            ..set.clone()
        };
        let r = analyze(&blocking, Nanos::from_ms(4));
        assert!(!r.edf.schedulable);
        assert_eq!(r.edf.first_overload_at_ns, Some(Nanos::from_ms(3)));
        // Overload.
        let over = parse_taskset(
            "[[task]]\nname='x'\nperiod='2ms'\nwcet='1.5ms'\n[[task]]\nname='y'\nperiod='4ms'\nwcet='1.5ms'\n",
        )
        .unwrap();
        assert!(!analyze(&over, Nanos::ZERO).edf.schedulable);
        // U = 1 exactly, implicit deadlines: EDF schedulable, RM not.
        let full = parse_taskset(
            "[[task]]\nname='x'\nperiod='2ms'\nwcet='1ms'\n[[task]]\nname='y'\nperiod='5ms'\nwcet='2.5ms'\n",
        )
        .unwrap();
        let r = analyze(&full, Nanos::ZERO);
        assert!(r.edf.schedulable, "{:?}", r.edf);
        assert!(!r.fixed_priority_schedulable);
    }

    #[test]
    fn bad_task_sets_are_named() {
        assert!(parse_taskset("").unwrap_err().contains("no [[task]]"));
        let e = parse_taskset("[[task]]\nname='x'\nperiod='soon'\nwcet='1ms'\n").unwrap_err();
        assert!(e.contains("'x'") && e.contains("soon"), "{e}");
        let e = parse_taskset("[[task]]\nname='x'\nperiod='1ms'\nwcet='1ms'\ndeadline='2ms'\n")
            .unwrap_err();
        assert!(e.contains("deadline"), "{e}");
    }
}
