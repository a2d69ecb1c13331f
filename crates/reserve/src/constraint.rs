//! Time constraints (Jones's Rialto talk): "can I do E of work between start and
//! deadline?" answered yes or no *up front*, then carried out by switching
//! the calling thread's deadline parameters for the window.
//!
//! The decision is made in two steps. First the shared scheduler core's
//! Rialto plan ([`punctual_sched::plan::MultiPlan`], the same code the
//! simulator runs) is laid out with the deadline reservations that exist on
//! the system, one plan per CPU the thread may use, and asked for a one-shot
//! grant of E in the window. Second, the kernel's own admission control,
//! which has the last word: a refused sched_setattr is a denial, with its
//! reason.

use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, Ordering};

use punctual_live::clock::{mono, sleep_until};
use punctual_live::rt::{sched_getattr, sched_setattr, SchedAttr};
use punctual_units::Nanos;

pub use punctual_record::reserve::{ConstraintOutcome, Decision, Taken};

use crate::kernel;
use crate::spec::Spec;
use crate::{set_deadline, set_other, thread_cputime};

struct Active {
    old: SchedAttr,
    began: Nanos,
    cpu_at_begin: Nanos,
}

thread_local! {
    static ACTIVE: RefCell<Option<Active>> = const { RefCell::new(None) };
}

/// An existing reservation the plan must leave room for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Existing {
    pub runtime: Nanos,
    pub period: Nanos,
}

/// The pure part of the decision, by the shared plan: with `others`
/// reserved (and the caller's own reservation, whose time in the window
/// counts for it), can `cpus` CPUs capped at `limit_ratio` each give
/// `estimate` between `from` and `deadline` (times relative to now)?
pub fn decide(
    from: Nanos,
    deadline: Nanos,
    estimate: Nanos,
    others: &[Existing],
    own: Option<Existing>,
    cpus: usize,
    limit_ratio: f64,
) -> Result<(), String> {
    use punctual_sched::plan::{ConstraintRequest as PlanRequest, MultiPlan, PlanConfig};
    // The plan's frame is the shortest period in play, so those periods are
    // represented exactly (longer ones round down to base·2^d, which only
    // over-counts their use: conservative).
    let base = others
        .iter()
        .chain(own.iter())
        .map(|e| e.period)
        .min()
        .unwrap_or(Nanos::from_ms(10));
    let cfg = PlanConfig::new(base).with_utilization_limit_ratio(limit_ratio);
    let mut plan = MultiPlan::new(cpus.max(1), cfg)?;
    for e in others {
        // Already admitted by the kernel; if the plan's rounding cannot
        // place one, the window is only judged with fewer neighbours, and
        // the kernel's admission below still has the last word.
        let _ = plan.reserve(e.runtime, e.period);
    }
    let mut req = PlanRequest::new(from, deadline, estimate);
    if let Some(o) = own {
        if let Ok((_, id)) = plan.reserve(o.runtime, o.period) {
            req = req.with_reservation(id);
        }
    }
    plan.begin_constraint(Nanos::ZERO, req)
        .map(|_| ())
        .map_err(|d| d.to_string())
}

/// Asks for `estimate` of CPU between `start` and `deadline` (absolute
/// CLOCK_MONOTONIC times). If granted, the calling thread sleeps until
/// `start` when that is still ahead, then runs under a deadline
/// reservation of `estimate` in the remaining window until
/// [`end_constraint`]. If denied, nothing changes.
pub fn begin_constraint(start: Nanos, deadline: Nanos, estimate: Nanos) -> Decision {
    if ACTIVE.with(|a| a.borrow().is_some()) {
        return Decision::Denied {
            reason: "a constraint is already active on this thread; end it first".into(),
        };
    }
    if estimate < crate::spec::MIN_RUNTIME {
        return Decision::Denied {
            reason: format!("an estimate of {estimate} is below SCHED_DEADLINE's minimum runtime"),
        };
    }
    let from = start.max(mono());
    let old = match sched_getattr(0) {
        Ok(a) => a,
        Err(e) => {
            return Decision::Denied {
                reason: format!("cannot read this thread's policy: {e}"),
            }
        }
    };
    let bw = kernel::bandwidth(None);
    let limit = bw.limit_per_cpu_ratio.unwrap_or(1.0);
    let me = punctual_live::rt::gettid();
    let others: Vec<Existing> = bw
        .tasks
        .iter()
        .filter(|t| t.tid != me)
        .map(|t| Existing {
            runtime: t.runtime_ns,
            period: t.period_ns,
        })
        .collect();
    let own = (old.sched_policy == punctual_live::rt::SCHED_DEADLINE && old.sched_period > 0)
        .then_some(Existing {
            runtime: Nanos(old.sched_runtime),
            period: Nanos(old.sched_period),
        });
    let cpus = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    let now = mono();
    if deadline <= now {
        // The asking thread itself ran late (a loaded machine): say so,
        // rather than judge a window that is already over.
        return Decision::Denied {
            reason: format!(
                "the deadline passed {} before the request could be judged (the asking thread ran late)",
                now - deadline
            ),
        };
    }
    if let Err(reason) = decide(
        from.saturating_sub(now),
        deadline.saturating_sub(now),
        estimate,
        &others,
        own,
        cpus,
        limit,
    ) {
        return Decision::Denied { reason };
    }
    // Switch to the constraint's deadline parameters *before* sleeping to
    // the start: the kernel admits (or refuses) the bandwidth now, and the
    // wake-up at the start is a deadline wake-up (prompt, with a fresh
    // instance whose deadline is start + window), not a time-sharing one
    // that could come late behind busy threads.
    let window = deadline - from;
    if let Err(e) = set_deadline(0, estimate, window, window) {
        return Decision::Denied {
            reason: kernel::explain_refusal(&e, estimate, window, cpus as u32, &bw),
        };
    }
    if start > mono() {
        sleep_until(start);
    }
    let now = mono();
    if deadline <= now + estimate {
        let mut o = old;
        o.sched_flags = punctual_live::rt::SCHED_FLAG_RESET_ON_FORK;
        if sched_setattr(0, &o).is_err() {
            let _ = set_other(0);
        }
        return Decision::Denied {
            reason: format!(
                "woke at the start too late: only {} left",
                deadline.saturating_sub(now)
            ),
        };
    }
    ACTIVE.with(|a| {
        *a.borrow_mut() = Some(Active {
            old,
            began: now,
            cpu_at_begin: thread_cputime(),
        })
    });
    Decision::Granted
}

/// Ends the thread's constraint and restores its previous scheduling
/// parameters; `None` when no constraint was active.
pub fn end_constraint() -> Option<Taken> {
    let a = ACTIVE.with(|a| a.borrow_mut().take())?;
    let taken = Taken {
        elapsed_ns: mono() - a.began,
        cpu_ns: thread_cputime() - a.cpu_at_begin,
    };
    let mut old = a.old;
    old.sched_flags = punctual_live::rt::SCHED_FLAG_RESET_ON_FORK;
    if sched_setattr(0, &old).is_err() {
        let _ = set_other(0);
    }
    Some(taken)
}

/// A constraint the test application demonstrates, relative to its start.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConstraintRequest {
    pub estimate: Nanos,
    pub start: Nanos,
    pub deadline: Nanos,
}

impl std::str::FromStr for ConstraintRequest {
    type Err = String;
    /// `5ms@30ms..40ms`: 5 ms of work between 30 ms and 40 ms from now.
    fn from_str(s: &str) -> Result<Self, String> {
        let bad =
            || format!("--constraint '{s}' is not ESTIMATE@START..DEADLINE (e.g. 5ms@30ms..40ms)");
        let (e, w) = s.split_once('@').ok_or_else(bad)?;
        let (a, b) = w.split_once("..").ok_or_else(bad)?;
        let p = |t: &str| {
            punctual_units::parse_duration(t).map_err(|e| format!("--constraint '{s}': {e}"))
        };
        let r = ConstraintRequest {
            estimate: p(e)?,
            start: p(a)?,
            deadline: p(b)?,
        };
        if r.estimate.is_zero() {
            return Err(format!("--constraint '{s}': the estimate is zero"));
        }
        if r.deadline <= r.start {
            return Err(format!(
                "--constraint '{s}': the deadline {} is not after the start {}",
                r.deadline, r.start
            ));
        }
        Ok(r)
    }
}

/// The test application's constraint thread: asks, and if granted does
/// exactly `estimate` of polling work, then ends the constraint.
pub fn demo(
    req: ConstraintRequest,
    run_start: Nanos,
    _spec: &Spec,
    stop: &AtomicBool,
) -> ConstraintOutcome {
    let decision = begin_constraint(
        run_start + req.start,
        run_start + req.deadline,
        req.estimate,
    );
    let mut out = ConstraintOutcome {
        estimate_ns: req.estimate,
        start_ns: req.start,
        deadline_ns: req.deadline,
        decision: decision.clone(),
        received_ns: Nanos::ZERO,
        completed_at_ns: None,
        met_deadline: false,
        taken: None,
    };
    if !decision.granted() {
        return out;
    }
    let thr = Nanos(2_000);
    let mut last = mono();
    let give_up = run_start + req.deadline * 4;
    while out.received_ns < req.estimate {
        let now = mono();
        let d = now - last;
        if d <= thr {
            out.received_ns += d;
        }
        last = now;
        if now > give_up || stop.load(Ordering::Relaxed) {
            break;
        }
    }
    if out.received_ns >= req.estimate {
        let at = last - run_start;
        out.completed_at_ns = Some(at);
        out.met_deadline = at <= req.deadline;
    }
    out.taken = end_constraint();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(x: u64) -> Nanos {
        Nanos::from_ms(x)
    }

    #[test]
    fn parses_and_refuses_constraint_specs() {
        let r: ConstraintRequest = "5ms@30ms..40ms".parse().unwrap();
        assert_eq!((r.estimate, r.start, r.deadline), (ms(5), ms(30), ms(40)));
        for bad in [
            "5ms",
            "5ms@30ms",
            "5ms@40ms..30ms",
            "0ms@1ms..2ms",
            "x@1ms..2ms",
        ] {
            assert!(bad.parse::<ConstraintRequest>().is_err(), "{bad}");
        }
    }

    #[test]
    fn the_shared_plan_decides_up_front() {
        // An empty CPU: 5 ms between +30 and +40 ms fits.
        assert!(decide(ms(30), ms(40), ms(5), &[], None, 1, 0.95).is_ok());
        // 11 ms cannot fit in a 10 ms window.
        let e = decide(ms(30), ms(40), ms(11), &[], None, 1, 0.95).unwrap_err();
        assert!(e.contains("11ms"), "{e}");
        // The Rialto talk's threads A–F on one CPU leave too little of that
        // window for 9 ms; a second, empty CPU takes it.
        let seed: Vec<Existing> = [(4, 20), (3, 10), (2, 40), (1, 20), (1, 10), (5, 40)]
            .iter()
            .map(|&(a, p)| Existing {
                runtime: ms(a),
                period: ms(p),
            })
            .collect();
        assert!(decide(ms(30), ms(40), ms(9), &seed, None, 1, 0.95).is_err());
        assert!(decide(ms(30), ms(40), ms(9), &seed, None, 2, 0.95).is_ok());
        // A past deadline is refused, not attempted.
        assert!(decide(ms(0), ms(0), ms(1), &[], None, 1, 0.95).is_err());
    }
}
