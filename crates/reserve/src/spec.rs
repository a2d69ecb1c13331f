//! What the user asks for, validated before anything touches the kernel.
//!
//! Every refusal is one sentence naming the offending value, so the CLI and
//! the C ABI report the same thing.

use std::fmt;

use punctual_units::Nanos;

/// How stolen time is handled (Regehr's thesis §11.5).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Rez: the kernel's constant-bandwidth server as it is. Interrupt time
    /// is charged to the reservation and never given back.
    Plain,
    /// Rez-C: a larger maximum budget is admitted up front; the thread
    /// yields once it has *received* its reservation, so time stolen in a
    /// period is made up within that period.
    Catchup,
    /// Rez-FB: the next period's budget follows the measured gap between
    /// charged and received time, through an integral controller.
    Feedback,
}

impl Mode {
    pub fn name(self) -> &'static str {
        match self {
            Mode::Plain => "plain",
            Mode::Catchup => "catchup",
            Mode::Feedback => "feedback",
        }
    }
}

impl std::str::FromStr for Mode {
    type Err = String;
    fn from_str(s: &str) -> Result<Mode, String> {
        match s {
            "plain" | "rez" => Ok(Mode::Plain),
            "catchup" | "rez-c" => Ok(Mode::Catchup),
            "feedback" | "rez-fb" => Ok(Mode::Feedback),
            _ => Err(format!("mode '{s}' is not one of plain, catchup, feedback")),
        }
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A validated reservation request: `budget` of CPU in every `period`,
/// to be received before `deadline` (relative to the period start).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Spec {
    /// R: what the user needs per period.
    pub budget: Nanos,
    pub period: Nanos,
    pub deadline: Nanos,
    pub mode: Mode,
    /// G of Rez-FB; unused by the other modes.
    pub gain_ratio: f64,
    /// Static over-reservation (Regehr's thesis Fig 11.3's x axis): the scheduler
    /// is asked for R·(1 + over) instead of R. May be negative.
    pub over_reserve_ratio: f64,
    /// Largest budget admitted up front (Rez-C's catch-up room, Rez-FB's
    /// clamp). Never more than the deadline.
    pub max_budget: Nanos,
}

/// SCHED_DEADLINE refuses runtimes below 1024 ns (its bandwidth is kept in
/// 2^-20 units and the kernel checks `dl_runtime >= 1 << DL_SCALE`).
pub const MIN_RUNTIME: Nanos = Nanos(1024);

impl Spec {
    /// Checks the combination and fills defaults: deadline = period, and a
    /// maximum budget of 1.5× the requested amount (capped at the deadline)
    /// when none is given.
    pub fn new(
        budget: Nanos,
        period: Nanos,
        deadline: Option<Nanos>,
        mode: Mode,
        gain_ratio: f64,
        over_reserve_ratio: f64,
        max_budget: Option<Nanos>,
    ) -> Result<Spec, String> {
        if budget.is_zero() {
            return Err("--budget is zero; it must be greater than zero".into());
        }
        if period.is_zero() {
            return Err("--period is zero; it must be greater than zero".into());
        }
        if budget > period {
            return Err(format!(
                "--budget {budget} is larger than --period {period}; a reservation cannot exceed its period"
            ));
        }
        let deadline = deadline.unwrap_or(period);
        if deadline.is_zero() {
            return Err("--deadline is zero; it must be greater than zero".into());
        }
        if deadline > period {
            return Err(format!(
                "--deadline {deadline} is larger than --period {period}; SCHED_DEADLINE needs deadline <= period"
            ));
        }
        if budget > deadline {
            return Err(format!(
                "--budget {budget} is larger than --deadline {deadline}; the budget must fit before the deadline"
            ));
        }
        if !(gain_ratio > 0.0 && gain_ratio < 2.0) {
            return Err(format!(
                "--gain {gain_ratio} is outside (0, 2); the integral controller is unstable or inert there"
            ));
        }
        if !(over_reserve_ratio > -1.0 && over_reserve_ratio.is_finite()) {
            return Err(format!(
                "--over-reserve {}% must be more than -100%",
                over_reserve_ratio * 100.0
            ));
        }
        let mut s = Spec {
            budget,
            period,
            deadline,
            mode,
            gain_ratio,
            over_reserve_ratio,
            max_budget: Nanos::ZERO,
        };
        let target = s.target();
        if target < MIN_RUNTIME {
            return Err(format!(
                "--budget {budget} with --over-reserve {}% asks for {target}, below SCHED_DEADLINE's minimum runtime of {MIN_RUNTIME}",
                over_reserve_ratio * 100.0
            ));
        }
        if target > deadline {
            return Err(format!(
                "--over-reserve {}% makes the budget {target}, larger than the deadline {deadline}",
                over_reserve_ratio * 100.0
            ));
        }
        let max = match max_budget {
            Some(m) => {
                if m < target {
                    return Err(format!(
                        "--max-budget {m} is below the requested budget {target}"
                    ));
                }
                if m > deadline {
                    return Err(format!(
                        "--max-budget {m} is larger than the deadline {deadline}"
                    ));
                }
                m
            }
            None => Nanos(((target.0 as f64) * 1.5).round() as u64).min(deadline),
        };
        s.max_budget = max;
        Ok(s)
    }

    /// C: what is asked of the scheduler per period after static
    /// over-reservation.
    pub fn target(&self) -> Nanos {
        Nanos(((self.budget.0 as f64) * (1.0 + self.over_reserve_ratio)).round() as u64)
    }

    /// The runtime handed to the kernel at the start: catch-up runs with
    /// its whole maximum (the thread decides when to stop); the others
    /// start from the target.
    pub fn initial_runtime(&self) -> Nanos {
        match self.mode {
            Mode::Catchup => self.max_budget,
            Mode::Plain | Mode::Feedback => self.target(),
        }
    }

    /// The bandwidth admission must find room for before the run starts.
    pub fn admitted_runtime(&self) -> Nanos {
        match self.mode {
            Mode::Plain => self.target(),
            Mode::Catchup | Mode::Feedback => self.max_budget,
        }
    }

    pub fn utilization_ratio(&self, runtime: Nanos) -> f64 {
        runtime.0 as f64 / self.period.0 as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(x: u64) -> Nanos {
        Nanos::from_ms(x)
    }

    #[test]
    fn refuses_each_bad_combination_naming_the_value() {
        let bad = [
            (ms(30), ms(20), None, 0.5, 0.0, "30ms"),
            (Nanos::ZERO, ms(20), None, 0.5, 0.0, "zero"),
            (ms(4), Nanos::ZERO, None, 0.5, 0.0, "zero"),
            (ms(4), ms(20), Some(ms(30)), 0.5, 0.0, "30ms"),
            (ms(4), ms(20), Some(ms(3)), 0.5, 0.0, "3ms"),
            (ms(4), ms(20), None, 0.0, 0.0, "(0, 2)"),
            (ms(4), ms(20), None, 2.0, 0.0, "(0, 2)"),
            (ms(4), ms(20), None, f64::NAN, 0.0, "(0, 2)"),
            (ms(4), ms(20), None, 0.5, -1.0, "-100"),
            (ms(18), ms(20), None, 0.5, 0.5, "27ms"),
        ];
        for (b, p, d, g, o, needle) in bad {
            let e = Spec::new(b, p, d, Mode::Feedback, g, o, None).unwrap_err();
            assert!(e.contains(needle), "{e} should name {needle}");
        }
    }

    #[test]
    fn defaults_and_runtimes_per_mode() {
        let s = Spec::new(ms(4), ms(20), None, Mode::Catchup, 0.5, 0.1, None).unwrap();
        assert_eq!(s.deadline, ms(20));
        assert_eq!(s.target(), Nanos(4_400_000));
        assert_eq!(s.max_budget, Nanos(6_600_000));
        assert_eq!(s.initial_runtime(), s.max_budget);
        let p = Spec {
            mode: Mode::Plain,
            ..s
        };
        assert_eq!(p.initial_runtime(), p.target());
        assert_eq!(p.admitted_runtime(), p.target());
        let capped = Spec::new(ms(15), ms(20), None, Mode::Feedback, 0.5, 0.0, None).unwrap();
        assert_eq!(capped.max_budget, ms(20));
        assert!(Spec::new(ms(4), ms(20), None, Mode::Plain, 0.5, 0.0, Some(ms(3))).is_err());
    }
}
