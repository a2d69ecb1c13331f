//! Rialto-style precomputed scheduling plan and time constraints (Jones's Rialto talk).
//!
//! A [`Plan`] is an explicit map of future time on one CPU. Reservations
//! ("A every P") get ongoing allocations in it; time constraints ("E of work
//! between S and D") get one-shot grants of concrete future intervals. Because
//! future time is written down, both are decided **up front**: a reservation
//! either has a place in every one of its periods or is refused with the
//! utilization in use and the limit; a constraint either gets specific
//! intervals that add up to its estimate or is refused with how much time the
//! window really has. Answering "can I do 5 ms between now+30 ms and
//! now+40 ms?" costs 5 ms of that window's free time, not half the CPU for
//! 40 ms.
//!
//! The plan is a binary tree over frames of `base` length (see
//! `plan/layout.rs` and `docs/plan.md`): a reservation whose period is
//! `base·2^d` sits at depth `d` and recurs at a fixed offset every period.
//! Periods between levels are rounded down to the level below (it then gets
//! its amount more often than asked, and is charged for that); periods longer
//! than the deepest level use the deepest level.
//!
//! The plan is pure: no clock, no I/O. Drivers (the simulator and the live
//! `reserve` verb) pass their own `now` and ask [`Plan::owner_at`] who owns
//! the CPU and until when. Changes never break a promise already made: a new
//! reservation starts at a boundary of its own period, a repacked plan
//! switches at a plan-period boundary, and neither starts while it would take
//! time already granted to a constraint.
//!
//! ```
//! use punctual_sched::plan::{ConstraintRequest, Owner, Plan, PlanConfig};
//! use punctual_units::Nanos;
//!
//! let ms = Nanos::from_ms;
//! let mut plan = Plan::new(PlanConfig::new(ms(10))).unwrap();
//! // The Rialto talk's threads A–F on one CPU.
//! for (amount, period) in [(4, 20), (3, 10), (2, 40), (1, 20), (1, 10), (5, 40)] {
//!     plan.reserve(ms(amount), ms(period)).unwrap();
//! }
//! // Executor view: who runs at t = 0 and until when.
//! let slot = plan.owner_at(Nanos::ZERO);
//! assert!(matches!(slot.owner, Owner::Reservation(_)));
//! assert!(slot.until > Nanos::ZERO);
//!
//! // "Can I do 5 ms of work between now+30 ms and now+40 ms?"
//! let now = Nanos::ZERO;
//! let free = plan.free_time(ms(30), ms(40));
//! let asked = ConstraintRequest::new(ms(30), ms(40), ms(5));
//! match plan.begin_constraint(now, asked) {
//!     Ok(grant) => {
//!         assert!(free >= ms(5));
//!         // ... do the work, then:
//!         let end = plan.end_constraint(grant.id, ms(37)).unwrap();
//!         assert!(end.time_taken <= ms(5));
//!     }
//!     Err(denied) => {
//!         assert!(free < ms(5));
//!         eprintln!("{denied}");
//!     }
//! }
//! // 9 ms in a 10 ms window cannot fit next to B and E (4 ms every 10 ms).
//! assert!(plan.begin_constraint(now, ConstraintRequest::new(ms(30), ms(40), ms(9))).is_err());
//! ```

mod layout;
mod multi;

use std::collections::BTreeMap;
use std::fmt;

use punctual_units::Nanos;

use layout::Layout;
pub use multi::MultiPlan;

/// Deepest tree the plan will build: with a 1 ms base, periods up to 65.5 s
/// keep their own level; longer ones are served every 65.5 s.
pub const MAX_DEPTH_LIMIT: u32 = 16;
/// A grant made of more slices than this is refused: it would cost the
/// driver a switch per slice and the plan unbounded memory.
pub const MAX_GRANT_SLICES: usize = 16_384;
/// Stretches of plan a constraint request may walk before it is refused:
/// bounds the work of one request (tens of milliseconds at most) whatever
/// window it names.
pub const MAX_SCAN_SEGMENTS: usize = 262_144;
/// Outstanding (not yet ended) constraints per plan. Past that, grants whose
/// deadline has passed are forgotten (ending one then reports it unknown).
pub const MAX_OUTSTANDING_CONSTRAINTS: usize = 1_024;

const PPM: u128 = 1_000_000;

/// Identifies a reservation for its whole life (unique within a plan, and
/// across CPUs when handed out by a [`MultiPlan`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ReservationId(pub u32);

/// Identifies a granted time constraint until it is ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ConstraintId(pub u32);

impl fmt::Display for ReservationId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "reservation #{}", self.0)
    }
}
impl fmt::Display for ConstraintId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "constraint #{}", self.0)
    }
}

/// The shape of a plan. `base` is the shortest period it can serve (and the
/// frame length); `max_depth` bounds the tree, so the longest distinct period
/// is `base·2^max_depth`; `utilization_limit_ppm` keeps part of the CPU out
/// of reach of reservations, for time-sharing threads and the OS itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PlanConfig {
    pub base: Nanos,
    pub max_depth: u32,
    /// Highest total reserved utilization, in parts per million. The default
    /// 950 000 (95%) is Linux's own default real-time cap
    /// (`sched_rt_runtime_us` / `sched_rt_period_us`).
    pub utilization_limit_ppm: u32,
    /// Whether admission may lay the plan out afresh to gather free time
    /// into larger stretches (which is what lets constraints fit), when
    /// that delays nobody. Off: reservations are only ever added around the
    /// existing ones by best fit, and repacked only when they do not fit.
    pub gather_free_time: bool,
}

impl PlanConfig {
    pub fn new(base: Nanos) -> Self {
        PlanConfig {
            base,
            max_depth: MAX_DEPTH_LIMIT,
            utilization_limit_ppm: 950_000,
            gather_free_time: true,
        }
    }
    pub fn with_gather_free_time(mut self, on: bool) -> Self {
        self.gather_free_time = on;
        self
    }
    pub fn with_max_depth(mut self, depth: u32) -> Self {
        self.max_depth = depth;
        self
    }
    /// `ratio` in (0, 1]; 0.85 is Regehr's admission cap.
    pub fn with_utilization_limit_ratio(mut self, ratio: f64) -> Self {
        self.utilization_limit_ppm = if ratio.is_nan() {
            0
        } else {
            (ratio.clamp(0.0, 1.0) * 1e6).round() as u32
        };
        self
    }
    fn validate(&self) -> Result<(), String> {
        if self.base.is_zero() {
            return Err("the plan's base period must be longer than zero".into());
        }
        if self.max_depth > MAX_DEPTH_LIMIT {
            return Err(format!(
                "a plan depth of {} levels is more than the supported {MAX_DEPTH_LIMIT}",
                self.max_depth
            ));
        }
        if self
            .base
            .0
            .checked_shl(self.max_depth)
            .map(|h| h >> self.max_depth)
            != Some(self.base.0)
        {
            return Err(format!(
                "a base period of {} with {} levels overflows the plan period",
                self.base, self.max_depth
            ));
        }
        if self.utilization_limit_ppm == 0 || self.utilization_limit_ppm > 1_000_000 {
            return Err(format!(
                "utilization limit {:.4}% is outside (0%, 100%]",
                self.utilization_limit_ppm as f64 / 1e4
            ));
        }
        Ok(())
    }
}

/// Who a stretch of CPU time belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Owner {
    /// The reservation's thread runs.
    Reservation(ReservationId),
    /// Granted to a time constraint (including any of the constraint's own
    /// reservation time it was granted): the constraint's thread runs.
    Constraint(ConstraintId),
    /// Nobody's: the time-sharing scheduler decides.
    Free,
}

/// Executor view at one instant: `owner` holds the CPU from the asked time
/// until `until` (exclusive). The driver arms its next decision for `until`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Slot {
    pub owner: Owner,
    pub until: Nanos,
}

/// A stretch `[start, end)` of one owner, as returned by [`Plan::segments`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Segment {
    pub owner: Owner,
    pub start: Nanos,
    pub end: Nanos,
}

/// A live reservation as the plan serves it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReservationInfo {
    pub id: ReservationId,
    pub amount: Nanos,
    /// What the caller asked for.
    pub requested_period: Nanos,
    /// The plan level it sits on: `base·2^level`, at most the requested
    /// period. It receives `amount` in every `[k·period, (k+1)·period)`.
    pub period: Nanos,
    /// First instant of its first guaranteed period.
    pub effective_from: Nanos,
    /// amount / period, rounded up, in parts per million.
    pub utilization_ppm: u32,
}

/// Result of admitting a reservation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Admission {
    pub info: ReservationInfo,
    /// True when the plan was laid out afresh, because the newcomer did not
    /// fit around the others or because a fresh layout gathers free time
    /// better without delaying the start. Existing reservations keep their
    /// amounts but may move inside their periods from `effective_from` on.
    pub repacked: bool,
}

/// A time-constraint request: `estimate` of CPU time between `start` and
/// `deadline`. `reservation`, when the caller's thread has one, lets the
/// grant count that reservation's own time in the window (Rialto does the
/// same: a constraint first uses what its thread already reserved).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConstraintRequest {
    pub start: Nanos,
    pub deadline: Nanos,
    pub estimate: Nanos,
    pub reservation: Option<ReservationId>,
}

impl ConstraintRequest {
    pub fn new(start: Nanos, deadline: Nanos, estimate: Nanos) -> Self {
        ConstraintRequest {
            start,
            deadline,
            estimate,
            reservation: None,
        }
    }
    pub fn with_reservation(mut self, id: ReservationId) -> Self {
        self.reservation = Some(id);
        self
    }
}

/// One interval of a grant. `own_reservation` marks time that was already
/// the caller's reservation's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GrantSlice {
    pub start: Nanos,
    pub end: Nanos,
    pub own_reservation: bool,
}

/// A granted constraint: the exact future intervals that are now its.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConstraintGrant {
    pub id: ConstraintId,
    pub request: ConstraintRequest,
    /// Earliest-first intervals adding up to exactly `estimate`.
    pub slices: Vec<GrantSlice>,
    /// End of the last slice: the work is done by then if the estimate holds.
    pub completes_by: Nanos,
}

/// What [`Plan::end_constraint`] reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConstraintEnd {
    /// Granted CPU time that had passed by the end: what the plan gave the
    /// constraint. A driver that measures the thread's own CPU time knows
    /// better how much of it was used; the plan only knows what it handed out.
    pub time_taken: Nanos,
    /// Granted time after the end, handed back to the free pool.
    pub released: Nanos,
    /// From the constraint's start (or its request, if later) to the end.
    pub elapsed: Nanos,
    /// Whether the end came no later than the deadline.
    pub met_deadline: bool,
}

/// Why a request was refused. Every variant carries the numbers the caller
/// needs to decide what to change; `Display` says it in one sentence.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DenyReason {
    InvalidRequest(String),
    PeriodShorterThanBase {
        period: Nanos,
        base: Nanos,
    },
    PeriodRoundsBelowAmount {
        amount: Nanos,
        period: Nanos,
        effective_period: Nanos,
    },
    OverUtilizationLimit {
        in_use_ppm: u32,
        request_ppm: u32,
        limit_ppm: u32,
    },
    DoesNotFit {
        amount: Nanos,
        effective_period: Nanos,
        largest_node: Nanos,
        level_total: Nanos,
    },
    UnknownReservation(ReservationId),
    UnknownConstraint(ConstraintId),
    DeadlinePassed {
        deadline: Nanos,
        now: Nanos,
    },
    EstimateExceedsWindow {
        estimate: Nanos,
        window_start: Nanos,
        deadline: Nanos,
    },
    InsufficientTime {
        estimate: Nanos,
        available: Nanos,
        window_start: Nanos,
        deadline: Nanos,
        reserved_by_others: Nanos,
        granted_to_others: Nanos,
    },
    TooFragmented {
        slices: usize,
    },
    TooManyConstraints {
        limit: usize,
    },
    WindowTooLong {
        scanned_until: Nanos,
        available: Nanos,
        estimate: Nanos,
    },
    /// From [`MultiPlan`]: every CPU refused, each for its own reason.
    NoCpu {
        per_cpu: Vec<(usize, DenyReason)>,
    },
}

fn pct(ppm: u32) -> String {
    format!("{:.1}%", ppm as f64 / 1e4)
}

impl fmt::Display for DenyReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use DenyReason::*;
        match self {
            InvalidRequest(what) => write!(f, "{what}"),
            PeriodShorterThanBase { period, base } => write!(
                f,
                "period {period} is shorter than the plan's base period {base}, the shortest it can serve"
            ),
            PeriodRoundsBelowAmount { amount, period, effective_period } => write!(
                f,
                "period {period} rounds down to the plan level {effective_period}, which is shorter than the amount {amount}"
            ),
            OverUtilizationLimit { in_use_ppm, request_ppm, limit_ppm } => write!(
                f,
                "{} of the CPU is already reserved; adding {} would exceed the {} limit",
                pct(*in_use_ppm),
                pct(*request_ppm),
                pct(*limit_ppm)
            ),
            DoesNotFit { amount, effective_period, largest_node, level_total } => write!(
                f,
                "{amount} every {effective_period} does not fit even after repacking: the {effective_period} level has at most {largest_node} free in one slot and {level_total} per period in all"
            ),
            UnknownReservation(id) => write!(f, "{id} is not in this plan"),
            UnknownConstraint(id) => write!(f, "{id} is not outstanding in this plan"),
            DeadlinePassed { deadline, now } => {
                write!(f, "the deadline {deadline} is not after now ({now})")
            }
            EstimateExceedsWindow { estimate, window_start, deadline } => write!(
                f,
                "{estimate} of work cannot fit in the {} from {window_start} to {deadline}",
                *deadline - *window_start
            ),
            InsufficientTime {
                estimate,
                available,
                window_start,
                deadline,
                reserved_by_others,
                granted_to_others,
            } => {
                // Printed to three decimals, 9.000001 ms and 9 ms would read
                // alike; then both are given to the nanosecond.
                let (available, estimate) = if available.to_string() == estimate.to_string() {
                    (format!("{}ns", available.0), format!("{}ns", estimate.0))
                } else {
                    (available.to_string(), estimate.to_string())
                };
                write!(
                    f,
                    "only {available} of the {} from {window_start} to {deadline} is available ({reserved_by_others} reserved by others, {granted_to_others} granted to other constraints); {estimate} was asked",
                    *deadline - *window_start
                )
            }
            TooFragmented { slices } => write!(
                f,
                "the free time in the window is split into more than {slices} pieces; ask for a shorter window or a coarser plan"
            ),
            WindowTooLong { scanned_until, available, estimate } => write!(
                f,
                "the window is too long to plan in one request: up to {scanned_until} only {available} of the {estimate} asked was found; ask for a shorter window"
            ),
            TooManyConstraints { limit } => {
                write!(f, "{limit} constraints are already outstanding; end some first")
            }
            NoCpu { per_cpu } => {
                write!(f, "no CPU can take it")?;
                for (i, (cpu, r)) in per_cpu.iter().enumerate() {
                    write!(f, "{} cpu{cpu}: {r}", if i == 0 { ":" } else { ";" })?;
                }
                Ok(())
            }
        }
    }
}

/// A refusal, decided up front. See [`DenyReason`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Denied {
    pub reason: DenyReason,
}

impl fmt::Display for Denied {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.reason.fmt(f)
    }
}
impl std::error::Error for Denied {}

fn deny<T>(reason: DenyReason) -> Result<T, Denied> {
    Err(Denied { reason })
}

/// A layout and the instant it starts to apply.
#[derive(Clone, Debug)]
struct Version {
    from: u64,
    layout: Layout,
}

#[derive(Clone, Debug)]
struct Grant {
    request: ConstraintRequest,
    window_start: u64,
    slices: Vec<GrantSlice>,
}

/// The plan for one CPU. See the module documentation.
#[derive(Clone, Debug)]
pub struct Plan {
    config: PlanConfig,
    /// Sorted by `from`; the first applies from time 0 (or from whenever
    /// the versions before it were pruned). Later ones are changes that
    /// wait for a boundary at which they break no promise.
    versions: Vec<Version>,
    reservations: BTreeMap<ReservationId, ReservationInfo>,
    /// Reservation id → plan level, for repacking.
    levels: BTreeMap<ReservationId, u32>,
    grants: BTreeMap<ConstraintId, Grant>,
    /// Every granted slice not yet in the past: start → (end, grant).
    taken: BTreeMap<u64, (u64, ConstraintId)>,
    next_reservation: u32,
    next_constraint: u32,
    /// Latest `now` seen; time only goes forward for the plan.
    now: u64,
}

fn round_up(x: u64, unit: u64) -> u64 {
    x.div_ceil(unit).saturating_mul(unit)
}

impl Plan {
    /// An empty plan. Fails with one sentence when the configuration is
    /// unusable (zero base, too deep, limit outside (0, 100%]).
    pub fn new(config: PlanConfig) -> Result<Self, String> {
        config.validate()?;
        Ok(Plan {
            config,
            versions: vec![Version {
                from: 0,
                layout: Layout::new(config.base.0),
            }],
            reservations: BTreeMap::new(),
            levels: BTreeMap::new(),
            grants: BTreeMap::new(),
            taken: BTreeMap::new(),
            next_reservation: 1,
            next_constraint: 1,
            now: 0,
        })
    }

    pub fn config(&self) -> &PlanConfig {
        &self.config
    }

    /// The period after which the plan (as of its latest change) repeats.
    pub fn plan_period(&self) -> Nanos {
        Nanos(self.latest().hyperperiod())
    }

    fn latest(&self) -> &Layout {
        &self
            .versions
            .last()
            .expect("a plan always has a version")
            .layout
    }

    /// Reserved utilization in parts per million (sum of amount/period of
    /// the live reservations, each rounded up).
    pub fn utilization_ppm(&self) -> u32 {
        self.reservations
            .values()
            .map(|r| r.utilization_ppm as u64)
            .sum::<u64>()
            .min(u32::MAX as u64) as u32
    }

    /// Reserved fraction of the CPU, 0..=1.
    pub fn utilization_fraction(&self) -> f64 {
        self.utilization_ppm() as f64 / 1e6
    }

    pub fn reservations(&self) -> impl Iterator<Item = &ReservationInfo> {
        self.reservations.values()
    }

    pub fn reservation(&self, id: ReservationId) -> Option<&ReservationInfo> {
        self.reservations.get(&id)
    }

    pub fn constraint(&self, id: ConstraintId) -> Option<ConstraintGrant> {
        self.grants.get(&id).map(|g| grant_view(id, g))
    }

    /// Level and effective period of a request, or why it cannot have one.
    fn level_for(&self, amount: Nanos, period: Nanos) -> Result<(u32, u64), Denied> {
        if amount.is_zero() || period.is_zero() {
            return deny(DenyReason::InvalidRequest(format!(
                "a reservation needs an amount and a period longer than zero (got {amount} every {period})"
            )));
        }
        if amount > period {
            return deny(DenyReason::InvalidRequest(format!(
                "amount {amount} is longer than its period {period}"
            )));
        }
        let base = self.config.base.0;
        if period.0 < base {
            return deny(DenyReason::PeriodShorterThanBase {
                period,
                base: self.config.base,
            });
        }
        let ratio = period.0 / base;
        let level = (63 - ratio.leading_zeros()).min(self.config.max_depth);
        let effective = base << level;
        if amount.0 > effective {
            return deny(DenyReason::PeriodRoundsBelowAmount {
                amount,
                period,
                effective_period: Nanos(effective),
            });
        }
        Ok((level, effective))
    }

    /// Admits `amount` every `period` at the latest time the plan has seen
    /// (time 0 for a plan whose clock has not started, where the guarantee
    /// starts at once). Running systems use [`Plan::reserve_at`].
    pub fn reserve(&mut self, amount: Nanos, period: Nanos) -> Result<Admission, Denied> {
        let id = ReservationId(self.next_reservation);
        let adm = self.admit(self.now, id, amount, period)?;
        self.next_reservation += 1;
        Ok(adm)
    }

    /// Admits `amount` every `period` at time `now`, or refuses with a reason.
    /// The guarantee starts at `effective_from` in the answer: the next
    /// boundary of the reservation's own period, or of the plan period when
    /// the plan had to be repacked, or later if constraint grants already
    /// hold the time it needs.
    pub fn reserve_at(
        &mut self,
        now: Nanos,
        amount: Nanos,
        period: Nanos,
    ) -> Result<Admission, Denied> {
        let id = ReservationId(self.next_reservation);
        let adm = self.admit(now.0, id, amount, period)?;
        self.next_reservation += 1;
        Ok(adm)
    }

    /// Admission with a caller-chosen id (the multi-CPU plan keeps ids
    /// unique across CPUs).
    pub(crate) fn admit(
        &mut self,
        now: u64,
        id: ReservationId,
        amount: Nanos,
        period: Nanos,
    ) -> Result<Admission, Denied> {
        let (level, effective) = self.level_for(amount, period)?;
        self.advance(now);
        let now = self.now;
        // Exact admission test: compare reserved time per longest plan
        // period against the limit's share of it, in integers.
        let hmax = (self.config.base.0 as u128) << self.config.max_depth;
        let max_depth = self.config.max_depth;
        let per_h = |a: u64, level: u32| (a as u128) << (max_depth - level);
        let in_use: u128 = self
            .reservations
            .values()
            .map(|r| per_h(r.amount.0, self.levels[&r.id]))
            .sum();
        let request = per_h(amount.0, level);
        let request_ppm = (amount.0 as u128 * PPM).div_ceil(effective as u128) as u32;
        if (in_use + request) * PPM > self.config.utilization_limit_ppm as u128 * hmax {
            return deny(DenyReason::OverUtilizationLimit {
                in_use_ppm: self.utilization_ppm(),
                request_ppm,
                limit_ppm: self.config.utilization_limit_ppm,
            });
        }

        let last_from = self.versions.last().map_or(0, |v| v.from);
        let start = now.max(last_from);
        let mut incremental = self.latest().clone();
        let incremental = incremental.place(id, amount.0, level).map(|()| incremental);
        let mut all: Vec<(ReservationId, u64, u32)> = self
            .reservations
            .values()
            .map(|r| (r.id, r.amount.0, self.levels[&r.id]))
            .collect();
        all.push((id, amount.0, level));
        let deepest = all.iter().map(|a| a.2).max().unwrap_or(0);
        let repack_h = self.config.base.0 << deepest;
        // A fresh layout is only worth computing if it could be used: when
        // the newcomer does not fit, or when switching at the next plan
        // period would not start it later than fitting it in would.
        // Optional repacks are skipped when even the greedy layout would
        // cost more than the search budget (deep, crowded plans).
        let greedy_cost = ((4u64 << deepest) + 64 * all.len() as u64) * all.len() as u64;
        let repacked = if incremental.is_err()
            || (self.config.gather_free_time
                && round_up(start, repack_h) == round_up(start, effective)
                && greedy_cost <= REPACK_BUDGET_UNITS)
        {
            repack(self.config.base.0, &all, self.config.gather_free_time)
        } else {
            Err(layout::Shortfall {
                largest_node: 0,
                level_total: 0,
            })
        };
        // Keep everyone where they are unless that cannot fit the newcomer,
        // or a repack gathers free time better at no cost in delay.
        let (layout, unit, repacked) = match (incremental, repacked) {
            (Ok(inc), Ok(rep)) => {
                let h = rep.hyperperiod();
                let better = (rep.consolidation(), std::cmp::Reverse(rep.piece_count()))
                    > (inc.consolidation(), std::cmp::Reverse(inc.piece_count()));
                if better && round_up(start, h) == round_up(start, effective) {
                    (rep, h, true)
                } else {
                    (inc, effective, false)
                }
            }
            (Ok(inc), Err(_)) => (inc, effective, false),
            (Err(_), Ok(rep)) => {
                let h = rep.hyperperiod();
                (rep, h, true)
            }
            (Err(_), Err(short)) => {
                return deny(DenyReason::DoesNotFit {
                    amount,
                    effective_period: Nanos(effective),
                    largest_node: Nanos(short.largest_node),
                    level_total: Nanos(short.level_total),
                })
            }
        };
        let mut from = round_up(start, unit);
        if self.conflicts_with_grants(&layout, from) {
            let last_end = self
                .grants
                .values()
                .filter_map(|g| g.slices.last().map(|s| s.end.0))
                .max()
                .unwrap_or(0);
            from = round_up(last_end.max(from), unit);
        }
        // A repacked plan replaces every version from `from` on; an
        // incremental one is always built on the latest version.
        self.versions.retain(|v| v.from < from);
        self.versions.push(Version { from, layout });

        let info = ReservationInfo {
            id,
            amount,
            requested_period: period,
            period: Nanos(effective),
            effective_from: Nanos(from),
            utilization_ppm: request_ppm,
        };
        self.reservations.insert(id, info);
        self.levels.insert(id, level);
        Ok(Admission { info, repacked })
    }

    /// Whether switching to `layout` at `from` would change what a granted
    /// slice stands on: a slice granted from free time must stay free, one
    /// granted from the caller's own reservation must stay that
    /// reservation's. Otherwise a grant could take time now promised to a
    /// reservation, or a reservation's period could count a slice twice.
    fn conflicts_with_grants(&self, layout: &Layout, from: u64) -> bool {
        for g in self.grants.values() {
            for s in &g.slices {
                let (a, e) = (s.start.0.max(from).max(self.now), s.end.0);
                let want = if s.own_reservation {
                    g.request.reservation
                } else {
                    None
                };
                let mut t = a;
                while t < e {
                    let (who, until) = layout.lookup(t);
                    if who != want {
                        return true;
                    }
                    t = until;
                }
            }
        }
        false
    }

    /// Ends a reservation at once. Its time becomes free (a hole in the
    /// tree), nothing else moves, so no other promise is affected.
    pub fn release(&mut self, id: ReservationId) -> bool {
        if self.reservations.remove(&id).is_none() {
            return false;
        }
        self.levels.remove(&id);
        for v in &mut self.versions {
            v.layout.release(id);
        }
        true
    }

    /// Forgets what is in the past: layout versions superseded before `now`
    /// and granted slices that have ended. Called by every mutating call;
    /// drivers of long runs may call it too, to keep memory bounded.
    pub fn advance(&mut self, now: u64) {
        self.now = self.now.max(now);
        let now = self.now;
        while self.versions.len() >= 2 && self.versions[1].from <= now {
            self.versions.remove(0);
        }
        while let Some((&s, &(e, _))) = self.taken.first_key_value() {
            if e > now {
                break;
            }
            self.taken.remove(&s);
        }
    }

    /// Layout in effect at `t`, and when the next one starts.
    fn layout_at(&self, t: u64) -> (&Layout, Option<u64>) {
        let idx = self.versions.partition_point(|v| v.from <= t);
        let v = &self.versions[idx.saturating_sub(1)];
        (&v.layout, self.versions.get(idx).map(|n| n.from))
    }

    /// Owner by the tree alone (reservations and free time), until when.
    fn tree_owner(&self, t: u64) -> (Option<ReservationId>, u64) {
        let (layout, next) = self.layout_at(t);
        let (who, until) = layout.lookup(t);
        (who, next.map_or(until, |n| until.min(n)))
    }

    /// Executor view: who owns the CPU at `t`, and until when. Constant
    /// work per call (a walk down one tree path and two map look-ups), so
    /// drivers may call it at every decision.
    pub fn owner_at(&self, t: Nanos) -> Slot {
        let t = t.0;
        if let Some((_, &(e, cid))) = self.taken.range(..=t).next_back() {
            if e > t {
                return Slot {
                    owner: Owner::Constraint(cid),
                    until: Nanos(e),
                };
            }
        }
        let (who, mut until) = self.tree_owner(t);
        if let Some((&s, _)) = self.taken.range(t.saturating_add(1)..).next() {
            until = until.min(s);
        }
        Slot {
            owner: who.map_or(Owner::Free, Owner::Reservation),
            until: Nanos(until),
        }
    }

    /// The plan's timeline over `[from, to)`, adjacent stretches of the same
    /// owner merged.
    pub fn segments(&self, from: Nanos, to: Nanos) -> Segments<'_> {
        Segments {
            plan: self,
            t: from.0,
            to: to.0,
        }
    }

    /// Time in `[from, to)` that is neither reserved nor granted: what a
    /// constraint without a reservation could still get there.
    pub fn free_time(&self, from: Nanos, to: Nanos) -> Nanos {
        self.segments(from, to)
            .filter(|s| s.owner == Owner::Free)
            .map(|s| s.end - s.start)
            .sum()
    }

    /// Time in `[from, to)` that the plan gives `id`: its reserved slots not
    /// granted to a constraint.
    pub fn reserved_time(&self, id: ReservationId, from: Nanos, to: Nanos) -> Nanos {
        self.segments(from, to)
            .filter(|s| s.owner == Owner::Reservation(id))
            .map(|s| s.end - s.start)
            .sum()
    }

    /// Asks for a one-shot grant of `request.estimate` between its start
    /// and deadline, decided now. A grant is concrete: earliest-first free
    /// intervals (and the caller's own reservation time, when named) that
    /// add up to exactly the estimate, taken out of the free pool so nobody
    /// else can be promised them.
    pub fn begin_constraint(
        &mut self,
        now: Nanos,
        request: ConstraintRequest,
    ) -> Result<ConstraintGrant, Denied> {
        let id = ConstraintId(self.next_constraint);
        let g = self.grant(now.0, id, request)?;
        self.next_constraint += 1;
        Ok(g)
    }

    pub(crate) fn grant(
        &mut self,
        now: u64,
        id: ConstraintId,
        request: ConstraintRequest,
    ) -> Result<ConstraintGrant, Denied> {
        let ConstraintRequest {
            start,
            deadline,
            estimate,
            reservation,
        } = request;
        if estimate.is_zero() {
            return deny(DenyReason::InvalidRequest(
                "a constraint's estimate must be longer than zero".into(),
            ));
        }
        if deadline <= start {
            return deny(DenyReason::InvalidRequest(format!(
                "the deadline {deadline} is not after the start {start}"
            )));
        }
        if let Some(r) = reservation {
            if !self.reservations.contains_key(&r) {
                return deny(DenyReason::UnknownReservation(r));
            }
        }
        self.advance(now);
        let now = self.now;
        if deadline.0 <= now {
            return deny(DenyReason::DeadlinePassed {
                deadline,
                now: Nanos(now),
            });
        }
        let window_start = start.0.max(now);
        if estimate.0 > deadline.0 - window_start {
            return deny(DenyReason::EstimateExceedsWindow {
                estimate,
                window_start: Nanos(window_start),
                deadline,
            });
        }
        if self.grants.len() >= MAX_OUTSTANDING_CONSTRAINTS {
            // Forget grants whose deadline has passed before refusing: a
            // caller that never ended them must not lock the plan forever.
            self.grants.retain(|_, g| g.request.deadline.0 > now);
        }
        if self.grants.len() >= MAX_OUTSTANDING_CONSTRAINTS {
            return deny(DenyReason::TooManyConstraints {
                limit: MAX_OUTSTANDING_CONSTRAINTS,
            });
        }

        let mut slices: Vec<GrantSlice> = Vec::new();
        let mut got = 0u64;
        let (mut reserved_by_others, mut granted_to_others) = (0u64, 0u64);
        for (n, seg) in self.segments(Nanos(window_start), deadline).enumerate() {
            if got >= estimate.0 {
                break;
            }
            if n == MAX_SCAN_SEGMENTS {
                return deny(DenyReason::WindowTooLong {
                    scanned_until: seg.start,
                    available: Nanos(got),
                    estimate,
                });
            }
            let len = seg.end.0 - seg.start.0;
            let own = match seg.owner {
                Owner::Free => false,
                Owner::Reservation(r) if Some(r) == reservation => true,
                Owner::Reservation(_) => {
                    reserved_by_others += len;
                    continue;
                }
                Owner::Constraint(_) => {
                    granted_to_others += len;
                    continue;
                }
            };
            if slices.len() == MAX_GRANT_SLICES {
                return deny(DenyReason::TooFragmented {
                    slices: MAX_GRANT_SLICES,
                });
            }
            let take = len.min(estimate.0 - got);
            slices.push(GrantSlice {
                start: seg.start,
                end: Nanos(seg.start.0 + take),
                own_reservation: own,
            });
            got += len;
        }
        if got < estimate.0 {
            return deny(DenyReason::InsufficientTime {
                estimate,
                available: Nanos(got),
                window_start: Nanos(window_start),
                deadline,
                reserved_by_others: Nanos(reserved_by_others),
                granted_to_others: Nanos(granted_to_others),
            });
        }
        for s in &slices {
            self.taken.insert(s.start.0, (s.end.0, id));
        }
        let g = Grant {
            request,
            window_start,
            slices,
        };
        let view = grant_view(id, &g);
        self.grants.insert(id, g);
        Ok(view)
    }

    /// Ends a constraint at `now`: its granted time after `now` goes back to
    /// the free pool, and the answer says how much it was given before.
    pub fn end_constraint(
        &mut self,
        id: ConstraintId,
        now: Nanos,
    ) -> Result<ConstraintEnd, Denied> {
        let Some(g) = self.grants.remove(&id) else {
            return deny(DenyReason::UnknownConstraint(id));
        };
        let now = now.0.max(self.now);
        let (mut taken, mut released) = (0u64, 0u64);
        for s in &g.slices {
            let (a, b) = (s.start.0, s.end.0);
            taken += b.min(now).saturating_sub(a);
            released += b.saturating_sub(a.max(now));
            if self.taken.get(&a).map(|&(_, c)| c) == Some(id) {
                self.taken.remove(&a);
            }
        }
        self.advance(now);
        Ok(ConstraintEnd {
            time_taken: Nanos(taken),
            released: Nanos(released),
            elapsed: Nanos(now.saturating_sub(g.window_start)),
            met_deadline: now <= g.request.deadline.0,
        })
    }

    /// One plan period of the latest layout as text, one frame a line:
    /// `[0ms, 10ms)  #2 0ms..3ms  #5 3ms..4ms  #1 4ms..8ms  free 8ms..10ms`.
    /// For documentation, tests and any driver that wants to print its plan.
    pub fn describe(&self) -> String {
        let layout = self.latest();
        let base = layout.base;
        let mut out = String::new();
        for frame in 0..(1u64 << layout.depth) {
            let fs = frame * base;
            out.push_str(&format!("[{}, {})", Nanos(fs), Nanos(fs + base)));
            let mut end = 0;
            for (off, p) in layout.frame_pieces(frame) {
                let who = match p.owner {
                    Some(r) => format!("#{}", r.0),
                    None => "hole".to_string(),
                };
                out.push_str(&format!(
                    "  {who} {}..{}",
                    Nanos(fs + off),
                    Nanos(fs + off + p.len)
                ));
                end = off + p.len;
            }
            if end < base {
                out.push_str(&format!("  free {}..{}", Nanos(fs + end), Nanos(fs + base)));
            }
            out.push('\n');
        }
        out
    }

    /// Node assignment of a reservation in the latest layout: (depth, index,
    /// length) per piece. For tests and for explaining a plan.
    pub fn placement(&self, id: ReservationId) -> Vec<(u32, u64, Nanos)> {
        self.latest()
            .pieces_of(id)
            .into_iter()
            .map(|(d, j, l)| (d, j, Nanos(l)))
            .collect()
    }
}

fn grant_view(id: ConstraintId, g: &Grant) -> ConstraintGrant {
    ConstraintGrant {
        id,
        request: g.request,
        slices: g.slices.clone(),
        completes_by: g.slices.last().map_or(Nanos(g.window_start), |s| s.end),
    }
}

/// Work one repack may spend searching for a better layout, in units of
/// about a nanosecond (a tried placement costs a copy and a scan of the
/// frame loads plus a copy of the pieces). The first, greedy layout is
/// always completed whatever this says.
const REPACK_BUDGET_UNITS: u64 = 300_000;

/// Lays out all reservations afresh. Shortest periods go first: each level
/// then has exactly the room the shorter ones left, so a set within 100%
/// always fits (pieces split over a level if no single slot is big enough).
/// Within that order a bounded depth-first search over the slot chosen for
/// each reservation (tightest slot first, so the first layout tried is plain
/// best fit) keeps the layout whose free time is most gathered, fewest
/// pieces on ties: big free stretches are what time constraints need.
fn repack(
    base: u64,
    all: &[(ReservationId, u64, u32)],
    search: bool,
) -> Result<Layout, layout::Shortfall> {
    let mut order = all.to_vec();
    order.sort_by_key(|&(id, amount, level)| (level, std::cmp::Reverse(amount), id));
    let deepest = order.iter().map(|o| o.2).max().unwrap_or(0);
    let per_try = (4u64 << deepest) + 64 * order.len() as u64;
    let budget = if search {
        REPACK_BUDGET_UNITS / per_try
    } else {
        0
    };
    let mut search = Search {
        order: &order,
        budget,
        best: None,
        shortfall: None,
    };
    search.run(Layout::new(base), 0);
    match (search.best, search.shortfall) {
        (Some((l, _)), _) => Ok(l),
        (None, Some(s)) => Err(s),
        (None, None) => Ok(Layout::new(base)),
    }
}

struct Search<'a> {
    order: &'a [(ReservationId, u64, u32)],
    budget: u64,
    best: Option<(Layout, (u128, std::cmp::Reverse<usize>))>,
    shortfall: Option<layout::Shortfall>,
}

impl Search<'_> {
    fn run(&mut self, layout: Layout, k: usize) {
        let Some(&(id, amount, level)) = self.order.get(k) else {
            let score = (
                layout.consolidation(),
                std::cmp::Reverse(layout.piece_count()),
            );
            if self.best.as_ref().is_none_or(|(_, s)| score > *s) {
                self.best = Some((layout, score));
            }
            return;
        };
        let mut l = layout;
        let mut choices: Vec<Option<u64>> =
            l.candidates(amount, level).into_iter().map(Some).collect();
        if choices.is_empty() {
            choices.push(None);
        }
        let n = choices.len();
        for (i, choice) in choices.into_iter().enumerate() {
            // The first (greedy) branch always runs so a layout is found;
            // alternatives only while budget remains.
            if i > 0 && self.budget == 0 {
                return;
            }
            self.budget = self.budget.saturating_sub(1);
            let mut next = if i + 1 == n {
                std::mem::replace(&mut l, Layout::new(0))
            } else {
                l.clone()
            };
            match next.place_at(id, amount, level, choice) {
                Ok(()) => self.run(next, k + 1),
                Err(s) => {
                    self.shortfall.get_or_insert(s);
                    return;
                }
            }
        }
    }
}

/// Iterator behind [`Plan::segments`].
pub struct Segments<'a> {
    plan: &'a Plan,
    t: u64,
    to: u64,
}

impl Iterator for Segments<'_> {
    type Item = Segment;
    fn next(&mut self) -> Option<Segment> {
        if self.t >= self.to {
            return None;
        }
        let start = self.t;
        let first = self.plan.owner_at(Nanos(start));
        let mut end = first.until.0.min(self.to);
        while end < self.to {
            let next = self.plan.owner_at(Nanos(end));
            if next.owner != first.owner {
                break;
            }
            end = next.until.0.min(self.to);
        }
        self.t = end;
        Some(Segment {
            owner: first.owner,
            start: Nanos(start),
            end: Nanos(end),
        })
    }
}

#[cfg(test)]
mod tests;
