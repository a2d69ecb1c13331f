//! Plan-driven scheduling (`[sim] scheduler = "plan"`): a Rialto-style
//! precomputed plan (Jones's Rialto talk, `punctual_sched::plan`) decides who owns each
//! instant of the CPU, and the simulator executes it the way a kernel
//! dispatcher would: ask `owner_at(now)`, run that owner until the answer's
//! `until`, repeat. Time constraints are asked up front at their `at` and
//! either granted (concrete future slices) or denied.
//!
//! What each thread *received* is measured by executing the plan, not read
//! back from it, so a plan that promised an amount and then handed out the
//! wrong stretches would show up as a missed period.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};

use punctual_record::{Recorder, Timeline};
use punctual_sched::plan::{ConstraintId, ConstraintRequest, Owner, Plan, PlanConfig};
use punctual_sched::PeriodStat;
use punctual_units::Nanos;

use crate::build::{common, Common};
use crate::outcome::{
    ConstraintResult, CpuStolen, Outcome, PeriodTotals, RunOptions, TaskStats, TimelineLog,
    TraceSlice, MAX_PERIODS, TIMELINE_WINDOW_DEFAULT,
};
use crate::scenario::{Scenario, ScenarioError};

struct PTask {
    name: String,
    /// Plan period the guarantee holds in, amount per period.
    rez: Option<(Nanos, Nanos, Nanos)>, // (amount, period, effective_from)
    cur_period: u64,
    cur_received: Nanos,
}

const FREE_QUANTUM: Nanos = Nanos::from_ms(1);

pub fn run(
    scn: &Scenario,
    opts: &RunOptions,
    stop: Option<&AtomicBool>,
) -> Result<Outcome, ScenarioError> {
    let f = &scn.spec;
    let Common { seed, end } = common(scn, opts)?;
    refuse_unsupported(scn)?;
    let base = f.sim.plan_base.map_or(Nanos::from_ms(10), |d| d.0);
    let (config, cap_ppm) = plan_config(scn, base)?;
    let mut plan = Plan::new(config).map_err(|e| scn.error(format!("sim.plan_base: {e}")))?;

    let mut tasks: Vec<PTask> = Vec::new();
    let mut by_rez = BTreeMap::new();
    let mut free_tasks = Vec::new();
    for t in &f.task {
        let name = t.name.get_ref().clone();
        if t.kind.get_ref() != "background" {
            return Err(scn.error_at(
                t.kind.span(),
                format!(
                    "task {name}: kind = \"{}\": with scheduler = \"plan\" tasks are CPU-bound \
                     (kind = \"background\"); the plan decides when they run",
                    t.kind.get_ref()
                ),
            ));
        }
        let rez = match &t.reserve {
            Some(r) => {
                let adm = plan.reserve(r.amount.0, r.period.0).map_err(|e| {
                    scn.error_at(
                        t.name.span(),
                        format!(
                            "task {name}: reservation denied: {e}{}",
                            rounding_note(&config, r.amount.0, r.period.0)
                        ),
                    )
                })?;
                by_rez.insert(adm.info.id, tasks.len());
                Some((adm.info.amount, adm.info.period, adm.info.effective_from))
            }
            None => {
                free_tasks.push(tasks.len());
                None
            }
        };
        tasks.push(PTask {
            name,
            rez,
            cur_period: 0,
            cur_received: Nanos::ZERO,
        });
    }
    let by_name: BTreeMap<&str, usize> = tasks
        .iter()
        .enumerate()
        .map(|(i, t)| (t.name.as_str(), i))
        .collect();

    // Constraint queries, in the order they are asked.
    let (mut queries, mut results, owner_task) = constraint_queries(scn, &by_name)?;
    queries.sort();
    let mut next_query = 0;
    let mut by_grant: BTreeMap<ConstraintId, usize> = BTreeMap::new();

    let mut stats: Vec<TaskStats> = tasks
        .iter()
        .map(|t| TaskStats {
            name: t.name.as_str().into(),
            cpu: 0,
            period: t.rez.map(|r| r.1),
            latency: Recorder::new(Nanos(1_000)),
            interval: Recorder::new(Nanos(1_000)),
            response: Recorder::new(Nanos(1_000)),
            jobs: 0,
            releases: 0,
            deadline_misses: 0,
            preemptions: 0,
            backlog_lost: 0,
            aborted: None,
            reserved: t.rez.is_some(),
            rez_kind: t.rez.map(|_| "plan".to_string()),
            need: t.rez.map(|r| r.0),
        })
        .collect();
    let mut totals: Vec<PeriodTotals> = tasks
        .iter()
        .filter_map(|t| {
            t.rez.map(|r| PeriodTotals {
                task: t.name.clone(),
                kind: "plan".into(),
                need: r.0,
                ..Default::default()
            })
        })
        .collect();
    let mut periods: Vec<(String, PeriodStat)> = Vec::new();
    let mut periods_dropped = 0u64;
    let mut trace = Vec::new();
    let mut trace_dropped = 0u64;
    let trace_cap = opts.trace_cap.unwrap_or(0);
    let mut timeline = TimelineLog {
        window: opts.timeline_window.unwrap_or(TIMELINE_WINDOW_DEFAULT),
        ..Default::default()
    };

    let mut now = Nanos::ZERO;
    let mut slots = 0u64;
    let mut interrupted = false;
    let mut free_rr = 0usize;
    let mut last_free: Option<usize> = None;
    while now < end {
        slots += 1;
        if slots & 0xFFFF == 0 {
            plan.advance(now.0);
            if stop.is_some_and(|s| s.load(Ordering::Relaxed)) {
                interrupted = true;
                break;
            }
        }
        while next_query < queries.len() && queries[next_query].0 <= now {
            let ci = queries[next_query].1;
            next_query += 1;
            let r = &mut results[ci];
            let mut req = ConstraintRequest::new(r.window_start, r.deadline, r.estimate);
            // Rialto: a constraint first uses its thread's own reservation.
            if let Some(rid) = by_rez
                .iter()
                .find(|(_, &v)| Some(v) == owner_task[ci])
                .map(|(k, _)| *k)
            {
                req = req.with_reservation(rid);
            }
            match plan.begin_constraint(now, req) {
                Ok(g) => {
                    r.granted = true;
                    by_grant.insert(g.id, ci);
                }
                Err(e) => r.denied_because = Some(e.to_string()),
            }
        }
        let slot = plan.owner_at(now);
        let mut until = slot.until.min(end);
        if let Some(q) = queries.get(next_query) {
            until = until.min(q.0.max(Nanos(now.0 + 1)));
        }
        let runner = match slot.owner {
            Owner::Reservation(id) => by_rez.get(&id).copied(),
            Owner::Constraint(cid) => by_grant.get(&cid).and_then(|&ci| {
                let r = &mut results[ci];
                let want = r.estimate - r.received;
                until = until.min(now + want);
                r.received += until - now;
                if r.received >= r.estimate && r.completed_at.is_none() {
                    r.completed_at = Some(until);
                    r.met_deadline = until <= r.deadline;
                }
                owner_task[ci]
            }),
            Owner::Free => {
                // Time-sharing among the unreserved threads, round robin.
                if free_tasks.is_empty() {
                    None
                } else {
                    until = until.min(now + FREE_QUANTUM);
                    let i = free_tasks[free_rr % free_tasks.len()];
                    free_rr += 1;
                    Some(i)
                }
            }
        };
        if until <= now {
            until = Nanos(now.0 + 1);
        }
        if let Some(i) = runner {
            if matches!(slot.owner, Owner::Free) {
                if last_free.is_some_and(|l| l != i) {
                    if let Some(l) = last_free {
                        stats[l].preemptions += 1;
                    }
                }
                last_free = Some(i);
            }
            // Split the stretch at the runner's period boundaries.
            let mut s = now;
            while s < until {
                close(
                    i,
                    s,
                    &mut tasks,
                    &mut stats,
                    &mut totals,
                    &mut periods,
                    &mut periods_dropped,
                );
                let e = match tasks[i].rez {
                    Some((_, p, from)) if s >= from => {
                        Nanos((from.0 + ((s.0 - from.0) / p.0 + 1) * p.0).min(until.0))
                    }
                    _ => until,
                };
                tasks[i].cur_received += e - s;
                s = e;
            }
            let name: std::sync::Arc<str> = tasks[i].name.as_str().into();
            timeline.push(0, &name, "run", &name, now, until - now);
            if trace.len() < trace_cap {
                trace.push(TraceSlice {
                    cpu: 0,
                    track: i as u32 + 1,
                    name: tasks[i].name.clone(),
                    start: now,
                    dur: until - now,
                });
            } else if trace_cap > 0 {
                trace_dropped += 1;
            }
        }
        now = until;
    }
    let ended_at = now.min(end);
    // Queries the run ended before were never put to the plan.
    for &(_, ci) in &queries[next_query..] {
        let r = &mut results[ci];
        r.denied_because = Some(format!(
            "not asked: it comes at {}, after the run ended at {ended_at}",
            r.asked_at
        ));
    }
    for i in 0..tasks.len() {
        close(
            i,
            ended_at,
            &mut tasks,
            &mut stats,
            &mut totals,
            &mut periods,
            &mut periods_dropped,
        );
    }
    for (ci, r) in results.iter().enumerate() {
        if let Some(c) = owner_task[ci] {
            let st = &mut stats[c];
            if r.granted && !st.reserved {
                st.releases += 1;
                st.jobs += u64::from(r.completed_at.is_some());
                st.deadline_misses += u64::from(r.completed_at.is_some() && !r.met_deadline);
            }
        }
    }
    let bin = Nanos((end.0 / 1000).max(Nanos::from_ms(1).0));
    let mut warnings = Vec::new();
    let used_ppm = (plan.utilization_fraction() * 1e6).round() as u32;
    if !f.sim.admission && used_ppm > cap_ppm {
        warnings.push(format!(
            "the plan reserves {:.1}% of the CPU, over the admission cap {:.1}% (admission is off)",
            used_ppm as f64 / 1e4,
            cap_ppm as f64 / 1e4
        ));
    }
    for r in &results {
        if r.granted && r.completed_at.is_none() && r.deadline <= ended_at {
            warnings.push(format!(
                "constraint {}: granted but received only {} of {}",
                r.name, r.received, r.estimate
            ));
        }
    }
    Ok(Outcome {
        seed,
        duration: end,
        ended_at,
        interrupted,
        events: slots,
        picks: slots,
        tasks: stats,
        sources: Vec::new(),
        cpus: vec![CpuStolen {
            total: Nanos::ZERO,
            intervals: 0,
            max: Nanos::ZERO,
            timeline: Timeline::new(bin),
            gaps: None,
        }],
        periods,
        periods_dropped,
        period_totals: totals,
        streams: Vec::new(),
        spikes: Vec::new(),
        spikes_dropped: 0,
        trace,
        trace_dropped,
        timeline,
        warnings,
        clock: format!("plan (base {base}): {}", plan_summary(&plan)),
        constraints: results,
        multiprocessor: None,
    })
}

type Queries = (
    Vec<(Nanos, usize)>,
    Vec<ConstraintResult>,
    Vec<Option<usize>>,
);

/// The `[[constraint]]` queries as (time asked, index), their results yet
/// to be filled, and the task each one's work runs in.
fn constraint_queries(
    scn: &Scenario,
    by_name: &BTreeMap<&str, usize>,
) -> Result<Queries, ScenarioError> {
    let f = &scn.spec;
    let mut queries: Vec<(Nanos, usize)> = Vec::new();
    let mut results = Vec::new();
    let mut owner_task: Vec<Option<usize>> = Vec::new();
    for (i, c) in f.constraint.iter().enumerate() {
        let task = match &c.task {
            Some(n) => Some(*by_name.get(n.get_ref().as_str()).ok_or_else(|| {
                scn.error_at(
                    n.span(),
                    format!("constraint: no task named {}", n.get_ref()),
                )
            })?),
            None => None,
        };
        if c.deadline.0 <= c.start.0 {
            return Err(scn.error_at(
                c.name.span(),
                format!(
                    "constraint {}: deadline must be after start",
                    c.name.get_ref()
                ),
            ));
        }
        owner_task.push(task);
        queries.push((c.at.0, i));
        results.push(ConstraintResult {
            name: c.name.get_ref().clone(),
            asked_at: c.at.0,
            window_start: c.at.0 + c.start.0,
            deadline: c.at.0 + c.deadline.0,
            estimate: c.estimate.0,
            granted: false,
            denied_because: None,
            received: Nanos::ZERO,
            completed_at: None,
            met_deadline: false,
        });
    }
    Ok((queries, results, owner_task))
}

/// The plan's configuration for `sim`: its own default cap (95%, Linux's
/// real-time cap) unless the scenario sets one; with admission off, up to
/// the whole CPU. Also the cap itself in parts per million, for the
/// warning when admission is off.
fn plan_config(scn: &Scenario, base: Nanos) -> Result<(PlanConfig, u32), ScenarioError> {
    let f = &scn.spec;
    let mut config = PlanConfig::new(base);
    if let Some(cap) = f.sim.admission_cap {
        if !(cap > 0.0 && cap <= 1.0) {
            return Err(scn.error_at_key(
                &["sim", "admission_cap"],
                format!("sim.admission_cap = {cap}: must be in (0, 1]"),
            ));
        }
        config.utilization_limit_ppm = (cap * 1e6).round() as u32;
    }
    let cap_ppm = config.utilization_limit_ppm;
    if !f.sim.admission {
        config.utilization_limit_ppm = 1_000_000;
    }
    Ok((config, cap_ppm))
}

/// What plan mode does not simulate: more than one CPU, noise, streams and
/// timers.
fn refuse_unsupported(scn: &Scenario) -> Result<(), ScenarioError> {
    let f = &scn.spec;
    if f.sim.cpus != 1 {
        return Err(scn.error(format!(
            "sim.cpus = {}: the plan scheduler simulates one CPU",
            f.sim.cpus
        )));
    }
    if let Some(n) = f.noise.first() {
        return Err(scn.error_at(
            n.name.span(),
            "noise sources are not simulated with scheduler = \"plan\"",
        ));
    }
    if let Some(s) = f.stream.first() {
        return Err(scn.error_at(
            s.name.span(),
            "streams are not simulated with scheduler = \"plan\"",
        ));
    }
    if let Some(t) = f.timer.first() {
        return Err(scn.error_at(
            t.name.span(),
            "timers are not simulated with scheduler = \"plan\"",
        ));
    }
    Ok(())
}

/// Closes every period of task `i` that ended by `upto`.
fn close(
    i: usize,
    upto: Nanos,
    tasks: &mut [PTask],
    stats: &mut [TaskStats],
    totals: &mut [PeriodTotals],
    periods: &mut Vec<(String, PeriodStat)>,
    dropped: &mut u64,
) {
    let t = &mut tasks[i];
    let Some((amount, period, from)) = t.rez else {
        return;
    };
    if upto <= from {
        return;
    }
    let done = (upto.0 - from.0) / period.0;
    while t.cur_period < done {
        let hit = t.cur_received >= amount;
        let st = &mut stats[i];
        st.releases += 1;
        st.jobs += 1;
        if !hit {
            st.deadline_misses += 1;
        }
        if let Some(tot) = totals.iter_mut().find(|x| x.task == t.name) {
            tot.periods += 1;
            tot.misses += u64::from(!hit);
            tot.received += t.cur_received;
            tot.requested += amount;
        }
        let ps = PeriodStat {
            thread: i,
            index: t.cur_period,
            start: Nanos(from.0 + t.cur_period * period.0),
            need: amount,
            requested: amount,
            received: t.cur_received,
            stolen: Nanos::ZERO,
            hit,
        };
        if periods.len() < MAX_PERIODS {
            periods.push((t.name.clone(), ps));
        } else {
            *dropped += 1;
        }
        t.cur_period += 1;
        t.cur_received = Nanos::ZERO;
    }
}

/// When the plan counts a reservation against a shorter period than asked
/// (periods round down to `base` times a power of two), the sentence that
/// says so, since a refusal then names figures the scenario never wrote.
fn rounding_note(config: &PlanConfig, amount: Nanos, period: Nanos) -> String {
    let base = config.base.0;
    if base == 0 || period.0 < base || amount > period {
        return String::new();
    }
    let level = (63 - (period.0 / base).leading_zeros()).min(config.max_depth);
    let effective = Nanos(base << level);
    if effective == period {
        return String::new();
    }
    format!(
        " ({period} was rounded down to the {effective} plan level, so {amount} becomes {:.1}% of the CPU)",
        amount.0 as f64 * 100.0 / effective.0 as f64
    )
}

fn plan_summary(plan: &Plan) -> String {
    format!(
        "period {}, {:.1}% reserved",
        plan.plan_period(),
        plan.utilization_fraction() * 100.0
    )
}
