//! One plan per CPU (Rialto/NT on multiprocessors, as Jones's Rialto talk describes it).
//!
//! New reservations go to the plans in increasing order of reserved
//! utilization, the heuristic Rialto/NT used: it spreads load so each CPU
//! keeps free time for constraints and time-sharing, and it is cheap. Ids
//! are unique across CPUs so a driver can key threads by id alone.

use punctual_units::Nanos;

use super::{
    Admission, ConstraintEnd, ConstraintGrant, ConstraintId, ConstraintRequest, Denied, DenyReason,
    Plan, PlanConfig, ReservationId, Slot,
};

#[derive(Clone, Debug)]
pub struct MultiPlan {
    plans: Vec<Plan>,
    next_reservation: u32,
    next_constraint: u32,
}

impl MultiPlan {
    /// `cpus` plans of the same shape. Fails with one sentence on zero CPUs
    /// or an unusable configuration.
    pub fn new(cpus: usize, config: PlanConfig) -> Result<Self, String> {
        if cpus == 0 {
            return Err("a multi-CPU plan needs at least one CPU".into());
        }
        let plan = Plan::new(config)?;
        Ok(MultiPlan {
            plans: vec![plan; cpus],
            next_reservation: 1,
            next_constraint: 1,
        })
    }

    pub fn cpus(&self) -> usize {
        self.plans.len()
    }

    pub fn plan(&self, cpu: usize) -> Option<&Plan> {
        self.plans.get(cpu)
    }

    /// CPU indices from least to most reserved (ties: lower index first).
    pub fn cpus_by_utilization(&self) -> Vec<usize> {
        let loads: Vec<u32> = self.plans.iter().map(|p| p.utilization_ppm()).collect();
        crate::placement::order(crate::placement::Fit::Worst, &loads)
    }

    /// Admits `amount` every `period` on the least-utilized CPU that can
    /// take it, before the plans' clocks start. Returns (cpu, id).
    pub fn reserve(
        &mut self,
        amount: Nanos,
        period: Nanos,
    ) -> Result<(usize, ReservationId), Denied> {
        let now = self.plans.iter().map(|p| p.now).max().unwrap_or(0);
        self.reserve_at(Nanos(now), amount, period)
            .map(|(cpu, a)| (cpu, a.info.id))
    }

    /// As [`MultiPlan::reserve`], at time `now`, with the full admission.
    pub fn reserve_at(
        &mut self,
        now: Nanos,
        amount: Nanos,
        period: Nanos,
    ) -> Result<(usize, Admission), Denied> {
        let id = ReservationId(self.next_reservation);
        let mut refusals = Vec::new();
        for cpu in self.cpus_by_utilization() {
            match self.plans[cpu].admit(now.0, id, amount, period) {
                Ok(a) => {
                    self.next_reservation += 1;
                    return Ok((cpu, a));
                }
                // A malformed request is refused the same way everywhere:
                // say it once.
                Err(Denied {
                    reason: r @ DenyReason::InvalidRequest(_),
                }) => return Err(Denied { reason: r }),
                Err(d) => refusals.push((cpu, d.reason)),
            }
        }
        refusals.sort_by_key(|(cpu, _)| *cpu);
        Err(Denied {
            reason: DenyReason::NoCpu { per_cpu: refusals },
        })
    }

    /// Admits `amount` every `period` on CPU `cpu` only: for bandwidth
    /// already bound to one CPU (a deadline task in a one-CPU partition),
    /// so that later placements by utilization see it.
    pub fn reserve_on(
        &mut self,
        cpu: usize,
        amount: Nanos,
        period: Nanos,
    ) -> Result<ReservationId, Denied> {
        let now = self.plans.iter().map(|p| p.now).max().unwrap_or(0);
        let id = ReservationId(self.next_reservation);
        let Some(plan) = self.plans.get_mut(cpu) else {
            return Err(Denied {
                reason: DenyReason::InvalidRequest(format!("no CPU index {cpu} in the plan")),
            });
        };
        plan.admit(now, id, amount, period)?;
        self.next_reservation += 1;
        Ok(id)
    }

    /// CPU whose plan holds `id`.
    pub fn cpu_of(&self, id: ReservationId) -> Option<usize> {
        self.plans.iter().position(|p| p.reservation(id).is_some())
    }

    pub fn release(&mut self, id: ReservationId) -> bool {
        match self.cpu_of(id) {
            Some(cpu) => self.plans[cpu].release(id),
            None => false,
        }
    }

    /// Grants a constraint on the CPU of the caller's reservation if it has
    /// one (so its own reserved time counts), else, or if that CPU cannot,
    /// on the least-utilized CPU that can. Returns (cpu, grant).
    pub fn begin_constraint(
        &mut self,
        now: Nanos,
        request: ConstraintRequest,
    ) -> Result<(usize, ConstraintGrant), Denied> {
        let id = ConstraintId(self.next_constraint);
        let home = match request.reservation {
            Some(r) => match self.cpu_of(r) {
                Some(c) => Some(c),
                None => {
                    return Err(Denied {
                        reason: DenyReason::UnknownReservation(r),
                    })
                }
            },
            None => None,
        };
        let mut order = self.cpus_by_utilization();
        if let Some(h) = home {
            order.retain(|&c| c != h);
            order.insert(0, h);
        }
        let mut refusals = Vec::new();
        for cpu in order {
            let req = if Some(cpu) == home {
                request
            } else {
                ConstraintRequest {
                    reservation: None,
                    ..request
                }
            };
            match self.plans[cpu].grant(now.0, id, req) {
                Ok(g) => {
                    self.next_constraint += 1;
                    return Ok((cpu, g));
                }
                Err(Denied {
                    reason:
                        r @ (DenyReason::InvalidRequest(_)
                        | DenyReason::DeadlinePassed { .. }
                        | DenyReason::EstimateExceedsWindow { .. }),
                }) => return Err(Denied { reason: r }),
                Err(d) => refusals.push((cpu, d.reason)),
            }
        }
        refusals.sort_by_key(|(cpu, _)| *cpu);
        Err(Denied {
            reason: DenyReason::NoCpu { per_cpu: refusals },
        })
    }

    pub fn end_constraint(
        &mut self,
        id: ConstraintId,
        now: Nanos,
    ) -> Result<ConstraintEnd, Denied> {
        match self.plans.iter().position(|p| p.grants.contains_key(&id)) {
            Some(cpu) => self.plans[cpu].end_constraint(id, now),
            None => Err(Denied {
                reason: DenyReason::UnknownConstraint(id),
            }),
        }
    }

    /// Executor view for one CPU; `None` for a CPU the plan does not have.
    pub fn owner_at(&self, cpu: usize, t: Nanos) -> Option<Slot> {
        self.plans.get(cpu).map(|p| p.owner_at(t))
    }

    /// Forgets the past on every CPU (see [`Plan::advance`]).
    pub fn advance(&mut self, now: Nanos) {
        for p in &mut self.plans {
            p.advance(now.0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::Owner;

    fn ms(v: u64) -> Nanos {
        Nanos::from_ms(v)
    }

    #[test]
    fn reservations_go_to_the_least_utilized_cpu_first() {
        let mut m = MultiPlan::new(2, PlanConfig::new(ms(10))).unwrap();
        let (c1, _) = m.reserve(ms(4), ms(10)).unwrap(); // 40% → cpu0
        let (c2, _) = m.reserve(ms(2), ms(10)).unwrap(); // cpu1 empty
        let (c3, _) = m.reserve(ms(1), ms(10)).unwrap(); // cpu1 at 20% < 40%
        let (c4, _) = m.reserve(ms(3), ms(10)).unwrap(); // cpu1 at 30% < 40%
        let (c5, _) = m.reserve(ms(1), ms(10)).unwrap(); // tie 40/60 → cpu0
        assert_eq!((c1, c2, c3, c4, c5), (0, 1, 1, 1, 0));
        let u: Vec<u32> = (0..2)
            .map(|c| m.plan(c).unwrap().utilization_ppm())
            .collect();
        assert_eq!(u, vec![500_000, 600_000]);
    }

    #[test]
    fn ids_are_unique_across_cpus_and_release_finds_the_cpu() {
        let mut m = MultiPlan::new(3, PlanConfig::new(ms(10))).unwrap();
        let ids: Vec<ReservationId> = (0..6)
            .map(|_| m.reserve(ms(1), ms(20)).unwrap().1)
            .collect();
        let mut sorted = ids.clone();
        sorted.dedup();
        assert_eq!(sorted.len(), 6);
        let cpu = m.cpu_of(ids[4]).unwrap();
        assert!(m.release(ids[4]));
        assert!(!m.release(ids[4]));
        assert!(m.plan(cpu).unwrap().reservation(ids[4]).is_none());
    }

    #[test]
    fn refusal_names_every_cpu() {
        let mut m = MultiPlan::new(2, PlanConfig::new(ms(10))).unwrap();
        m.reserve(ms(9), ms(10)).unwrap();
        m.reserve(ms(9), ms(10)).unwrap();
        let err = m.reserve(ms(1), ms(10)).unwrap_err();
        let text = err.to_string();
        assert!(text.contains("cpu0") && text.contains("cpu1"), "{text}");
        assert!(text.contains("90.0%") && text.contains("95.0%"), "{text}");
    }

    #[test]
    fn constraint_prefers_its_reservations_cpu_and_falls_back() {
        let mut m = MultiPlan::new(2, PlanConfig::new(ms(10))).unwrap();
        let (c0, r) = m.reserve(ms(8), ms(10)).unwrap();
        // 6 ms in [0, 10): the home CPU has 8 ms own + 2 ms free.
        let (cpu, g) = m
            .begin_constraint(
                ms(0),
                ConstraintRequest::new(ms(0), ms(10), ms(6)).with_reservation(r),
            )
            .unwrap();
        assert_eq!(cpu, c0);
        assert!(g.slices.iter().all(|s| s.own_reservation));
        // Without a reservation, 5 ms in [10, 20) only fits on the other CPU.
        let (cpu2, _) = m
            .begin_constraint(ms(0), ConstraintRequest::new(ms(10), ms(20), ms(5)))
            .unwrap();
        assert_ne!(cpu2, c0);
        assert_eq!(
            m.owner_at(cpu2, ms(10)).unwrap().owner,
            Owner::Constraint(ConstraintId(2))
        );
        assert!(m.owner_at(7, ms(0)).is_none());
    }

    #[test]
    fn property_each_reservation_goes_to_a_least_utilized_cpu_and_keeps_its_amount() {
        for seed in 1..=30u64 {
            let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
            let mut rng = move |n: u64| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x % n
            };
            let cpus = 1 + rng(4) as usize;
            let mut m = MultiPlan::new(cpus, PlanConfig::new(ms(1)).with_max_depth(4)).unwrap();
            let mut placed = Vec::new();
            for _ in 0..30 {
                let period = Nanos::from_us(1000 + rng(15_000));
                let amount = Nanos(10_000 + rng(period.0 / 2 - 10_000));
                let before: Vec<u32> = (0..cpus)
                    .map(|c| m.plan(c).unwrap().utilization_ppm())
                    .collect();
                match m.reserve(amount, period) {
                    Ok((cpu, id)) => {
                        // Every less-utilized CPU must have refused it.
                        for c in 0..cpus {
                            if before[c] < before[cpu] || (before[c] == before[cpu] && c < cpu) {
                                let mut probe = m.plans[c].clone();
                                probe.release(id);
                                assert!(
                                    probe.reserve(amount, period).is_err(),
                                    "seed {seed}: cpu{c} ({}) could have taken it before cpu{cpu} ({})",
                                    before[c],
                                    before[cpu]
                                );
                            }
                        }
                        placed.push((cpu, id));
                    }
                    Err(d) => match d.reason {
                        DenyReason::NoCpu { per_cpu } => assert_eq!(per_cpu.len(), cpus),
                        other => panic!("seed {seed}: {other}"),
                    },
                }
            }
            for (cpu, id) in placed {
                let plan = m.plan(cpu).unwrap();
                let info = *plan.reservation(id).unwrap();
                let mut s = info.effective_from;
                while s < info.effective_from + plan.plan_period() * 2 {
                    assert_eq!(plan.reserved_time(id, s, s + info.period), info.amount);
                    s += info.period;
                }
            }
        }
    }
}
