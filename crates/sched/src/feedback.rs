//! Rez-FB's controller (Regehr's thesis §11.5.3), on its own so that the live
//! `reserve` verb and the simulator run the very same arithmetic.
//!
//! At the start of each period the amount requested for the next period is
//! `C(t+1) = C(t) + G · (R − received(t))`: an integral-only controller on
//! the error between the reserved amount R and what the thread actually
//! received. The result is clamped to `[min, max]` and to whatever the
//! admission controller can still grant, and the clamped value is what the
//! controller remembers (anti-windup: a long burst of stolen time cannot
//! build up a debt that keeps the request high after the burst ends).

use punctual_units::Nanos;

#[derive(Clone, Debug, PartialEq)]
pub struct FeedbackController {
    /// G; Regehr's thesis used 0.5 and found 0.5–1 about equally good.
    pub gain: f64,
    /// R: the amount the application asked to receive each period.
    pub setpoint: Nanos,
    /// Lower clamp of the request (never ask for less than this).
    pub min: Nanos,
    /// Upper clamp of the request, before admission.
    pub max: Nanos,
    current: Nanos,
}

impl FeedbackController {
    /// Starts requesting exactly the setpoint.
    pub fn new(setpoint: Nanos, gain: f64, min: Nanos, max: Nanos) -> Self {
        let max = if max < min { min } else { max };
        let current = setpoint.max(min).min(max);
        FeedbackController {
            gain,
            setpoint,
            min,
            max,
            current,
        }
    }

    /// The amount requested for the current period (C_t).
    pub fn request(&self) -> Nanos {
        self.current
    }

    /// Closes one period: `received` is what the thread got in it, `limit`
    /// is the largest request admission control allows now. Returns C_{t+1}.
    pub fn update(&mut self, received: Nanos, limit: Nanos) -> Nanos {
        let error = self.setpoint.0 as i128 - received.0 as i128;
        let g = if self.gain.is_finite() {
            self.gain
        } else {
            0.0
        };
        let step = (g * error as f64).round() as i128;
        let next = self.current.0 as i128 + step;
        let hi = self.max.min(limit).max(self.min);
        let clamped = next.clamp(self.min.0 as i128, hi.0 as i128);
        self.current = Nanos(clamped as u64);
        self.current
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integral_action_converges_on_constant_theft() {
        // 18% of whatever runs is stolen: the controller must settle where
        // received == R, i.e. C = R / 0.82.
        let r = Nanos::from_ms(4);
        let mut fb = FeedbackController::new(r, 0.5, Nanos::ZERO, Nanos::from_ms(20));
        for _ in 0..60 {
            let c = fb.request();
            let received = Nanos((c.0 as f64 * 0.82) as u64);
            fb.update(received, Nanos::from_ms(17));
        }
        let want = 4.0 / 0.82;
        let got = fb.request().as_ms_f64();
        assert!(
            (got - want).abs() < 0.01,
            "C settled at {got} ms, want {want}"
        );
    }

    #[test]
    fn clamp_is_anti_windup() {
        let r = Nanos::from_ms(4);
        let mut fb = FeedbackController::new(r, 1.0, Nanos::from_ms(1), Nanos::from_ms(6));
        // Total starvation for many periods: request pinned at the clamp.
        for _ in 0..100 {
            fb.update(Nanos::ZERO, Nanos::from_ms(17));
        }
        assert_eq!(fb.request(), Nanos::from_ms(6));
        // Theft ends: one period later the request is back near R, not
        // held up by 100 periods of accumulated error.
        fb.update(Nanos::from_ms(6), Nanos::from_ms(17));
        assert_eq!(fb.request(), Nanos::from_ms(4));
        // Admission limit below max wins.
        fb.update(Nanos::ZERO, Nanos::from_ms(5));
        assert_eq!(fb.request(), Nanos::from_ms(5));
    }
}
