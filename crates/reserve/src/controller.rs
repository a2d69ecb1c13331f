//! Per-period accounting and the live side of the Rez-FB budget law.
//!
//! The law itself is the shared scheduler core's
//! [`punctual_sched::FeedbackController`], the very code the simulator runs
//! (Jones's Rialto talk: "exactly the same sources"). What is live-specific is only
//! what it is fed, explained on [`FeedbackController`].

use punctual_units::Nanos;

/// Rez-FB on a real thread: the core's integral controller, fed so that
/// Linux's enforcement artefacts do not drive it.
///
/// Regehr's thesis adjusts C by G·(R − P), with P the received time. On Linux the
/// received time of one period is dominated by things that are not stolen
/// time: the budget is only enforced at the tick (HZ=250: up to 4 ms of
/// overrun) and the kernel carries an overrun over as debt into the next
/// period. Feeding that into the integrator makes C oscillate. So the
/// controller is given what the kernel *would* have delivered had it
/// enforced C exactly: charged minus received is what was billed but not
/// received (interrupts, on a kernel without IRQ time accounting), and
/// `C − (charged − received)` is the received time of a precise
/// enforcement.
#[derive(Clone, Debug)]
pub struct FeedbackController {
    core: punctual_sched::FeedbackController,
    /// Largest C admission granted (the clamp); lowered when the kernel
    /// refuses a raise.
    limit: Nanos,
    /// Periods in which the clamp held C (anti-windup engaged).
    pub clamped_periods: u64,
}

impl FeedbackController {
    pub fn new(target: Nanos, max: Nanos, gain_ratio: f64) -> Self {
        let max = max.max(target);
        FeedbackController {
            core: punctual_sched::FeedbackController::new(target, gain_ratio, target, max),
            limit: max,
            clamped_periods: 0,
        }
    }

    pub fn current(&self) -> Nanos {
        self.core.request()
    }

    /// One period ended: `charged` is what the kernel billed the thread,
    /// `received` what the thread saw itself run. Returns next period's C,
    /// clamped to [target, admitted max] by the core (its anti-windup).
    pub fn update(&mut self, charged: Nanos, received: Nanos) -> Nanos {
        let c = self.core.request();
        let stolen = charged.saturating_sub(received);
        let would_receive = c.saturating_sub(stolen);
        let unclamped =
            c.0 as f64 + self.core.gain * (self.core.setpoint.0 as f64 - would_receive.0 as f64);
        let next = self.core.update(would_receive, self.limit);
        if (next.0 as f64 - unclamped).abs() > 1.0 {
            self.clamped_periods += 1;
        }
        next
    }

    /// The kernel refused a raise (admission): the granted value becomes
    /// the ceiling from now on.
    pub fn refused(&mut self, granted: Nanos) {
        self.limit = granted.max(self.core.min);
        let cur = self.core.request();
        if cur > self.limit {
            // Re-base the core on what the kernel really runs.
            let g = self.core.gain;
            let (sp, min, max) = (self.core.setpoint, self.core.min, self.core.max);
            self.core = punctual_sched::FeedbackController::new(self.limit, g, min, max);
            self.core.setpoint = sp;
        }
    }
}

/// What the test application's reserved thread knows about one period,
/// accumulated from its own polling.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PeriodAccount {
    pub received: Nanos,
    /// Gaps inside the period while the thread was still owed time.
    pub stolen: Nanos,
    /// Thread CPU clock delta (what the kernel charged).
    pub charged: Nanos,
    /// C in force during this period.
    pub requested: Nanos,
}

impl PeriodAccount {
    /// Regehr's thesis §11.6.2: a hit is at least the reserved amount received
    /// within the period.
    pub fn hit(&self, reserved: Nanos) -> bool {
        self.received >= reserved
    }
}

/// Rez-C's decision: stop (yield the rest of the period) once the thread
/// has received what it asked the scheduler for.
pub fn catchup_should_yield(received: Nanos, target: Nanos) -> bool {
    received >= target
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(x: f64) -> Nanos {
        Nanos((x * 1e6) as u64)
    }

    #[test]
    fn converges_to_target_plus_stolen_and_stays_clamped() {
        let mut c = FeedbackController::new(ms(4.0), ms(6.0), 0.5);
        // 0.6 ms of every period charged but not received (15 %).
        for _ in 0..30 {
            let cur = c.current();
            c.update(cur, cur - ms(0.6));
        }
        let got = c.current();
        assert!((got.0 as i64 - ms(4.6).0 as i64).abs() < 2_000, "{got}");
        // A huge steal cannot push C beyond the admitted maximum …
        for _ in 0..10 {
            let cur = c.current();
            c.update(cur, Nanos::ZERO);
        }
        assert_eq!(c.current(), ms(6.0));
        assert!(c.clamped_periods > 0);
        // … and when it stops, C comes back to the target without windup.
        for _ in 0..30 {
            let cur = c.current();
            c.update(cur, cur);
        }
        // Within rounding (1 ns steps), not stuck at the ceiling.
        assert!(c.current().0.abs_diff(ms(4.0).0) <= 1, "{}", c.current());
    }

    #[test]
    fn tick_overrun_alone_does_not_move_the_budget() {
        // Received 7 ms (a tick of overrun) but all of it charged: nothing
        // was stolen, so C must not drop below the target or move at all.
        let mut c = FeedbackController::new(ms(4.0), ms(6.0), 0.5);
        c.update(ms(7.0), ms(7.0));
        assert_eq!(c.current(), ms(4.0));
        c.update(ms(1.0), ms(1.0));
        assert_eq!(c.current(), ms(4.0));
    }

    #[test]
    fn gain_one_compensates_in_one_step_and_refusal_lowers_ceiling() {
        let mut c = FeedbackController::new(ms(4.0), ms(8.0), 1.0);
        assert_eq!(c.update(ms(4.0), ms(3.0)), ms(5.0));
        c.refused(ms(4.5));
        assert_eq!(c.update(ms(4.5), ms(2.0)), ms(4.5));
        assert!(catchup_should_yield(ms(4.0), ms(4.0)));
        assert!(!catchup_should_yield(ms(3.9), ms(4.0)));
        let a = PeriodAccount {
            received: ms(3.99),
            ..Default::default()
        };
        assert!(!a.hit(ms(4.0)));
    }
}
