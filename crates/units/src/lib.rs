//! Time as integer nanoseconds.
//!
//! Every duration and instant inside punctual is an integer count of
//! nanoseconds: floating point seconds lose the sub-microsecond detail that
//! latency work is about, and a bare `u64` of unknown unit is how bugs like
//! Jones & Regehr's 976 µs rounding stay hidden. `Nanos` is that count; it parses
//! the human strings used on the command line and in scenario files
//! (`250us`, `1ms`, `2.5ms`, `5s`, `1h`) and prints itself in the most
//! readable unit. [`rng`] holds the house's seeded random numbers, which
//! must be as stable as the units themselves.

pub mod rng;

use std::fmt;
use std::ops::{Add, AddAssign, Div, Mul, Sub, SubAssign};
use std::str::FromStr;

/// A non-negative duration (or an instant on a run's own clock) in nanoseconds.
#[derive(
    Clone,
    Copy,
    Debug,
    Default,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    serde::Serialize,
    serde::Deserialize,
)]
#[serde(transparent)]
pub struct Nanos(pub u64);

pub const NS_PER_US: u64 = 1_000;
pub const NS_PER_MS: u64 = 1_000_000;
pub const NS_PER_S: u64 = 1_000_000_000;

impl Nanos {
    pub const ZERO: Nanos = Nanos(0);
    pub const MAX: Nanos = Nanos(u64::MAX);

    pub const fn from_ns(ns: u64) -> Self {
        Nanos(ns)
    }
    pub const fn from_us(us: u64) -> Self {
        Nanos(us * NS_PER_US)
    }
    pub const fn from_ms(ms: u64) -> Self {
        Nanos(ms * NS_PER_MS)
    }
    pub const fn from_secs(s: u64) -> Self {
        Nanos(s * NS_PER_S)
    }
    /// Rounds to the nearest nanosecond; negative and NaN inputs give zero.
    pub fn from_secs_f64(s: f64) -> Self {
        if s.is_nan() || s <= 0.0 {
            Nanos(0)
        } else {
            Nanos((s * NS_PER_S as f64).round().min(u64::MAX as f64) as u64)
        }
    }
    pub const fn as_ns(self) -> u64 {
        self.0
    }
    pub fn as_secs_f64(self) -> f64 {
        self.0 as f64 / NS_PER_S as f64
    }
    pub fn as_us_f64(self) -> f64 {
        self.0 as f64 / NS_PER_US as f64
    }
    pub fn as_ms_f64(self) -> f64 {
        self.0 as f64 / NS_PER_MS as f64
    }
    pub fn saturating_sub(self, o: Nanos) -> Nanos {
        Nanos(self.0.saturating_sub(o.0))
    }
    pub fn saturating_add(self, o: Nanos) -> Nanos {
        Nanos(self.0.saturating_add(o.0))
    }
    pub fn checked_sub(self, o: Nanos) -> Option<Nanos> {
        self.0.checked_sub(o.0).map(Nanos)
    }
    pub fn is_zero(self) -> bool {
        self.0 == 0
    }
    pub fn to_std(self) -> std::time::Duration {
        std::time::Duration::from_nanos(self.0)
    }
    pub fn from_std(d: std::time::Duration) -> Self {
        Nanos(d.as_nanos().min(u64::MAX as u128) as u64)
    }
}

impl Add for Nanos {
    type Output = Nanos;
    fn add(self, o: Nanos) -> Nanos {
        Nanos(self.0 + o.0)
    }
}
impl AddAssign for Nanos {
    fn add_assign(&mut self, o: Nanos) {
        self.0 += o.0;
    }
}
impl Sub for Nanos {
    type Output = Nanos;
    fn sub(self, o: Nanos) -> Nanos {
        Nanos(self.0 - o.0)
    }
}
impl SubAssign for Nanos {
    fn sub_assign(&mut self, o: Nanos) {
        self.0 -= o.0;
    }
}
impl Mul<u64> for Nanos {
    type Output = Nanos;
    fn mul(self, k: u64) -> Nanos {
        Nanos(self.0 * k)
    }
}
impl Div<u64> for Nanos {
    type Output = Nanos;
    fn div(self, k: u64) -> Nanos {
        Nanos(self.0 / k)
    }
}
impl std::iter::Sum for Nanos {
    fn sum<I: Iterator<Item = Nanos>>(it: I) -> Nanos {
        Nanos(it.map(|n| n.0).sum())
    }
}

/// Why a duration string was refused; the message names the offending text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseDurationError {
    #[error("empty duration (expected something like 250us, 1ms, 2.5ms, 5s, 1h)")]
    Empty,
    #[error("'{0}' is not a duration (expected a number and a unit: ns, us, ms, s, m, h, d, w)")]
    Invalid(String),
    #[error("'{0}' is negative; durations must be zero or more")]
    Negative(String),
    #[error("'{0}' has unknown unit '{1}' (use ns, us, ms, s, m, h, d or w)")]
    UnknownUnit(String, String),
    #[error("'{0}' is too long to represent in nanoseconds")]
    Overflow(String),
    #[error("'{0}' is finer than a nanosecond")]
    SubNanosecond(String),
    #[error("'{0}' is finer than a picosecond")]
    SubPicosecond(String),
}

fn unit_ns(unit: &str) -> Option<u64> {
    Some(match unit {
        "ns" => 1,
        "us" | "µs" | "μs" => NS_PER_US,
        "ms" => NS_PER_MS,
        "s" | "sec" => NS_PER_S,
        "m" | "min" => 60 * NS_PER_S,
        "h" => 3600 * NS_PER_S,
        "d" => 86_400 * NS_PER_S,
        "w" => 7 * 86_400 * NS_PER_S,
        _ => return None,
    })
}

/// Parses `250us`, `1ms`, `2.5ms`, `5s`, `1h`, `1d`, `1w`, and sums like
/// `1m30s`. A bare number without a unit is refused: in this field a bare
/// "1" is as likely to mean 1 ms as 1 s, and guessing is how periods end up
/// 1000× wrong.
pub fn parse_duration(text: &str) -> Result<Nanos, ParseDurationError> {
    let total = parse_scaled(text, Scale::Nano)?;
    if total > u64::MAX as u128 {
        return Err(ParseDurationError::Overflow(text.to_string()));
    }
    Ok(Nanos(total as u64))
}

/// The unit [`parse_scaled`] counts in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scale {
    /// Nanoseconds, as [`Nanos`] holds them.
    Nano,
    /// Picoseconds, for clock periods that are no whole number of
    /// nanoseconds (a 1024 Hz tick is 976 562.5 ns).
    Pico,
}

impl Scale {
    fn per_ns(self) -> u128 {
        match self {
            Scale::Nano => 1,
            Scale::Pico => 1_000,
        }
    }
}

/// The grammar of [`parse_duration`], counted exactly in `scale` units: a
/// digit finer than one unit is refused rather than rounded away.
pub fn parse_scaled(text: &str, scale: Scale) -> Result<u128, ParseDurationError> {
    let s = text.trim();
    if s.is_empty() {
        return Err(ParseDurationError::Empty);
    }
    if s.starts_with('-') {
        return Err(ParseDurationError::Negative(text.to_string()));
    }
    let mut total: u128 = 0;
    let mut rest = s;
    while !rest.is_empty() {
        let num_end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '_'))
            .unwrap_or(rest.len());
        if num_end == 0 {
            return Err(ParseDurationError::Invalid(text.to_string()));
        }
        let num_str: String = rest[..num_end].chars().filter(|c| *c != '_').collect();
        rest = rest[num_end..].trim_start();
        let unit_end = rest
            .find(|c: char| c.is_ascii_digit() || c == '.' || c.is_whitespace())
            .unwrap_or(rest.len());
        let unit = &rest[..unit_end];
        rest = rest[unit_end..].trim_start();
        if unit.is_empty() {
            return Err(ParseDurationError::Invalid(text.to_string()));
        }
        let mult = unit_ns(unit)
            .ok_or_else(|| ParseDurationError::UnknownUnit(text.to_string(), unit.to_string()))?
            as u128
            * scale.per_ns();
        let (int_part, frac_part) = match num_str.split_once('.') {
            Some((i, f)) => (i, f),
            None => (num_str.as_str(), ""),
        };
        if (int_part.is_empty() && frac_part.is_empty()) || frac_part.contains('.') {
            return Err(ParseDurationError::Invalid(text.to_string()));
        }
        let int_val: u128 = if int_part.is_empty() {
            0
        } else {
            int_part
                .parse()
                .map_err(|_| ParseDurationError::Overflow(text.to_string()))?
        };
        let mut value = int_val
            .checked_mul(mult)
            .ok_or_else(|| ParseDurationError::Overflow(text.to_string()))?;
        // Fractional part in exact integer arithmetic.
        let mut place = mult;
        for d in frac_part.chars() {
            let digit = d
                .to_digit(10)
                .ok_or_else(|| ParseDurationError::Invalid(text.to_string()))?
                as u128;
            if !place.is_multiple_of(10) {
                if digit != 0 {
                    return Err(match scale {
                        Scale::Nano => ParseDurationError::SubNanosecond(text.to_string()),
                        Scale::Pico => ParseDurationError::SubPicosecond(text.to_string()),
                    });
                }
                continue;
            }
            place /= 10;
            value += digit * place;
        }
        total = total
            .checked_add(value)
            .ok_or_else(|| ParseDurationError::Overflow(text.to_string()))?;
    }
    Ok(total)
}

impl FromStr for Nanos {
    type Err = ParseDurationError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        parse_duration(s)
    }
}

/// Prints with the largest unit that keeps the value ≥ 1, with up to three
/// decimals and no trailing zeros: `976.562us`, `2ms`, `1.5s`.
impl fmt::Display for Nanos {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ns = self.0;
        let (div, unit) = if ns >= 3600 * NS_PER_S && ns.is_multiple_of(3600 * NS_PER_S) {
            (3600 * NS_PER_S, "h")
        } else if ns >= NS_PER_S {
            (NS_PER_S, "s")
        } else if ns >= NS_PER_MS {
            (NS_PER_MS, "ms")
        } else if ns >= NS_PER_US {
            (NS_PER_US, "us")
        } else {
            return write!(f, "{ns}ns");
        };
        let whole = ns / div;
        let frac = ns % div;
        if frac == 0 {
            return write!(f, "{whole}{unit}");
        }
        // three decimals, rounded half up
        let milli = (frac as u128 * 1000 + div as u128 / 2) / div as u128;
        let (whole, milli) = if milli >= 1000 {
            (whole + 1, 0)
        } else {
            (whole, milli as u64)
        };
        if milli == 0 {
            return write!(f, "{whole}{unit}");
        }
        let s = format!("{milli:03}");
        write!(f, "{whole}.{}{unit}", s.trim_end_matches('0'))
    }
}

/// A signed nanosecond count, for differences that can be negative
/// (a timer that fires early, a controller error).
#[derive(
    Clone,
    Copy,
    Debug,
    Default,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    serde::Serialize,
    serde::Deserialize,
)]
#[serde(transparent)]
pub struct SignedNanos(pub i64);

impl fmt::Display for SignedNanos {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0 < 0 {
            write!(f, "-{}", Nanos(self.0.unsigned_abs()))
        } else {
            write!(f, "{}", Nanos(self.0 as u64))
        }
    }
}

/// Parses a fraction written as `10%`, `0.1`, or `-10%`; returns it as a
/// plain ratio (0.1). Used for over-reservation, compute share, gains.
pub fn parse_ratio(text: &str) -> Result<f64, String> {
    let s = text.trim();
    let (num, pct) = match s.strip_suffix('%') {
        Some(n) => (n.trim(), true),
        None => (s, false),
    };
    let v: f64 = num
        .parse()
        .map_err(|_| format!("'{text}' is not a number or percentage"))?;
    if !v.is_finite() {
        return Err(format!("'{text}' is not a finite number"));
    }
    Ok(if pct { v / 100.0 } else { v })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scaled_parsing_is_exact_at_both_scales() {
        assert_eq!(parse_scaled("976.5625us", Scale::Pico), Ok(976_562_500));
        assert_eq!(parse_scaled("1ms", Scale::Pico), Ok(1_000_000_000));
        assert_eq!(parse_scaled("1ms", Scale::Nano), Ok(1_000_000));
        assert_eq!(
            parse_scaled("0.5ps", Scale::Pico),
            Err(ParseDurationError::UnknownUnit("0.5ps".into(), "ps".into()))
        );
        assert_eq!(
            parse_scaled("1.0005ns", Scale::Pico),
            Err(ParseDurationError::SubPicosecond("1.0005ns".into()))
        );
        assert_eq!(
            parse_scaled("976.5625us", Scale::Nano),
            Err(ParseDurationError::SubNanosecond("976.5625us".into()))
        );
    }

    #[test]
    fn parses_the_documented_forms() {
        assert_eq!(parse_duration("250us").unwrap(), Nanos(250_000));
        assert_eq!(parse_duration("1ms").unwrap(), Nanos(1_000_000));
        assert_eq!(parse_duration("2.5ms").unwrap(), Nanos(2_500_000));
        assert_eq!(parse_duration("5s").unwrap(), Nanos(5 * NS_PER_S));
        assert_eq!(parse_duration("1h").unwrap(), Nanos(3600 * NS_PER_S));
        assert_eq!(parse_duration("1m30s").unwrap(), Nanos(90 * NS_PER_S));
        assert_eq!(parse_duration("976.562us").unwrap(), Nanos(976_562));
        assert_eq!(parse_duration("1.5 s").unwrap(), Nanos(1_500_000_000));
    }

    #[test]
    fn refuses_bad_input_with_the_text() {
        for bad in ["", "banana", "1", "-5ms", "5 parsecs", "1.2.3ms", "ms"] {
            let e = parse_duration(bad).unwrap_err();
            if !bad.is_empty() {
                assert!(e.to_string().contains(bad.trim()), "{e}");
            }
        }
        assert!(matches!(
            parse_duration("0.5ns"),
            Err(ParseDurationError::SubNanosecond(_))
        ));
        assert!(matches!(
            parse_duration("99999999999w"),
            Err(ParseDurationError::Overflow(_))
        ));
    }

    #[test]
    fn prints_readably_and_round_trips() {
        for (ns, s) in [
            (0, "0ns"),
            (999, "999ns"),
            (1_000, "1us"),
            (976_562, "976.562us"),
            (2_500_000, "2.5ms"),
            (NS_PER_S, "1s"),
            (3600 * NS_PER_S, "1h"),
        ] {
            assert_eq!(Nanos(ns).to_string(), s);
        }
        for ns in [1u64, 1_000, 1_500, 20_000_000, 5 * NS_PER_S] {
            assert_eq!(parse_duration(&Nanos(ns).to_string()).unwrap(), Nanos(ns));
        }
    }

    #[test]
    fn serializes_as_a_plain_integer() {
        assert_eq!(serde_json::to_string(&Nanos(42)).unwrap(), "42");
    }

    #[test]
    fn ratios() {
        assert_eq!(parse_ratio("10%").unwrap(), 0.1);
        assert_eq!(parse_ratio("-10%").unwrap(), -0.1);
        assert_eq!(parse_ratio("0.5").unwrap(), 0.5);
        assert!(parse_ratio("x").is_err());
    }
}
