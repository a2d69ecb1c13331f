//! The types and the one formatting helper that buffer sizing, the queue
//! model, the profiles and the verdicts share. They sit here, below all
//! four, so that those modules import each other in one direction only:
//! `verdict` → `buffer`, `forecast`, `profiles`; `buffer` → `forecast`,
//! `queue`; `forecast` → `queue`; and `buffer`, `queue`, `profiles` and
//! `verdict` → `model`, which imports none of them.

use punctual_units::Nanos;
use serde::Serialize;

/// Compute per buffer: a time, or a fraction of the buffer length.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Compute {
    Time(Nanos),
    Fraction(f64),
}

impl Compute {
    pub fn at(&self, buffer_len: Nanos) -> Nanos {
        match *self {
            Compute::Time(c) => c,
            Compute::Fraction(f) => Nanos((buffer_len.0 as f64 * f).round() as u64),
        }
    }

    /// `0.5ms` is a time; `25%` or `0.25` is a fraction of the buffer.
    pub fn parse(text: &str) -> Result<Compute, String> {
        let t = text.trim();
        if t.ends_with('%') || t.parse::<f64>().is_ok() {
            let f = punctual_units::parse_ratio(t)?;
            if !(0.0..1.0).contains(&f) {
                return Err(format!(
                    "compute '{text}' as a fraction of the buffer must be at least 0 and below 1"
                ));
            }
            return Ok(Compute::Fraction(f));
        }
        punctual_units::parse_duration(t)
            .map(Compute::Time)
            .map_err(|e| format!("compute {e} (or give a fraction such as 25%)"))
    }
}

/// n buffers of length t with compute c, serviced once per `service`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Buffering {
    pub buffers: u32,
    pub buffer_len: Nanos,
    pub compute: Compute,
    /// Time between the consumer's wake-ups; `None` means one per buffer.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub service_period: Option<Nanos>,
}

impl Buffering {
    pub fn new(buffers: u32, buffer_len: Nanos, compute: Compute) -> Self {
        Buffering {
            buffers,
            buffer_len,
            compute,
            service_period: None,
        }
    }

    /// (n−1)·t − c, refusing buffers < 1, a zero length, and compute that
    /// leaves no slack, each with one sentence naming the values.
    pub fn slack(&self) -> Result<Nanos, String> {
        if self.buffers < 1 {
            return Err(format!("buffers {} is less than 1", self.buffers));
        }
        if self.buffer_len.is_zero() {
            return Err("buffer length is zero".to_string());
        }
        let c = self.compute.at(self.buffer_len);
        let tolerance = self.buffer_len * (self.buffers as u64 - 1);
        if c >= tolerance {
            return Err(format!(
                "compute {c} is not less than the buffering it must fit in, \
                 (n−1)·t = ({}−1)·{} = {tolerance}: there is no slack",
                self.buffers, self.buffer_len
            ));
        }
        Ok(tolerance - c)
    }

    pub fn service(&self) -> Nanos {
        self.service_period.unwrap_or(self.buffer_len)
    }

    /// Total buffering n·t.
    pub fn total(&self) -> Nanos {
        self.buffer_len * self.buffers as u64
    }

    pub fn label(&self) -> String {
        format!("{} × {}", self.buffers, self.buffer_len)
    }
}

/// Seconds in the unit a person would say: 850 ms, 4 min, 3.2 h, 12 d.
pub fn human_secs(s: f64) -> String {
    if !s.is_finite() {
        return "never".to_string();
    }
    if s > 1000.0 * 365.25 * 86_400.0 {
        return "> 1000 years".to_string();
    }
    let (v, unit) = if s < 1e-3 {
        (s * 1e6, "µs")
    } else if s < 1.0 {
        (s * 1e3, "ms")
    } else if s < 120.0 {
        (s, "s")
    } else if s < 7200.0 {
        (s / 60.0, "min")
    } else if s < 2.0 * 86_400.0 {
        (s / 3600.0, "h")
    } else if s < 365.0 * 86_400.0 {
        (s / 86_400.0, "d")
    } else {
        (s / (365.25 * 86_400.0), "years")
    };
    if v >= 10.0 || (v - v.round()).abs() < 0.05 {
        format!("{v:.0} {unit}")
    } else {
        format!("{v:.1} {unit}")
    }
}
