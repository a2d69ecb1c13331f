//! Rates and usage profiles as people write them: `260000/s`, `65.5k/s`,
//! `1/h`, `3/10min`, and `8h/day,5d/week`.

use punctual_units::parse_duration;
use serde::Serialize;

/// Parses `N/duration` into events per second. The denominator may omit
/// its number (`/s`, `/h`, `/day`); a bare number is refused because
/// "1" per what is exactly the question.
pub fn parse_rate_per_s(text: &str) -> Result<f64, String> {
    let s = text.trim();
    let (num, den) = s.split_once('/').ok_or_else(|| {
        format!("'{text}' is not a rate (write it as N/duration, e.g. 260000/s or 1/h)")
    })?;
    let num = num.trim();
    let (digits, mult) = match num.chars().last() {
        Some('k') | Some('K') => (&num[..num.len() - 1], 1e3),
        Some('M') => (&num[..num.len() - 1], 1e6),
        Some('G') => (&num[..num.len() - 1], 1e9),
        _ => (num, 1.0),
    };
    let n: f64 = digits
        .replace(['_', ','], "")
        .parse()
        .map_err(|_| format!("'{text}': '{num}' is not a number"))?;
    if !n.is_finite() || n <= 0.0 {
        return Err(format!("'{text}': the count must be greater than zero"));
    }
    let den = den.trim();
    let den_ns = parse_span(den)
        .map_err(|_| format!("'{text}': '{den}' is not a duration (use e.g. s, 10ms, h, day)"))?;
    if den_ns == 0 {
        return Err(format!("'{text}': the duration is zero"));
    }
    Ok(n * mult * 1e9 / den_ns as f64)
}

/// A duration that may omit a leading 1 and may use the words people use
/// for usage profiles (`day`, `week`).
fn parse_span(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let t = match t {
        "day" => "1d",
        "week" => "1w",
        "hour" => "1h",
        "minute" => "1min",
        _ => t,
    };
    if let Ok(d) = parse_duration(t) {
        return Ok(d.0);
    }
    parse_duration(&format!("1{t}"))
        .map(|d| d.0)
        .map_err(|e| e.to_string())
}

/// How much a user actually uses the machine: Cota-Robles & Held's "day" and "week"
/// of use (Office: 6–8 hours a day, 5 days a week; games and web: 3–4
/// hours a day, 7 days a week) rather than continuous 24 h or 168 h.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Usage {
    pub hours_per_day: f64,
    pub days_per_week: f64,
}

impl Default for Usage {
    /// Cota-Robles & Held's heavy office user: 8 hours a day, 5 days a week.
    fn default() -> Self {
        Usage {
            hours_per_day: 8.0,
            days_per_week: 5.0,
        }
    }
}

impl Usage {
    pub fn day_s(&self) -> f64 {
        self.hours_per_day * 3600.0
    }
    pub fn week_s(&self) -> f64 {
        self.day_s() * self.days_per_week
    }
    pub fn label(&self) -> String {
        format!("{}h/day,{}d/week", self.hours_per_day, self.days_per_week)
    }
}

/// Parses `8h/day,5d/week` (either part may be given alone; the other
/// keeps its default).
pub fn parse_usage(text: &str) -> Result<Usage, String> {
    let mut u = Usage::default();
    for part in text.split(',') {
        let p = part.trim();
        if let Some(h) = p.strip_suffix("/day") {
            let d = parse_duration(h.trim())
                .map_err(|_| format!("--usage '{text}': '{h}' is not a duration (e.g. 8h/day)"))?;
            let hours = d.as_secs_f64() / 3600.0;
            if hours <= 0.0 || hours > 24.0 {
                return Err(format!(
                    "--usage '{text}': {h} per day must be more than 0 and at most 24h"
                ));
            }
            u.hours_per_day = hours;
        } else if let Some(dw) = p.strip_suffix("/week") {
            let days: f64 = dw.trim().trim_end_matches('d').parse().map_err(|_| {
                format!("--usage '{text}': '{dw}' is not a number of days (e.g. 5d/week)")
            })?;
            if !(days > 0.0 && days <= 7.0) {
                return Err(format!(
                    "--usage '{text}': {dw} per week must be more than 0 and at most 7 days"
                ));
            }
            u.days_per_week = days;
        } else {
            return Err(format!(
                "--usage '{text}' is not a usage profile (write e.g. 8h/day,5d/week)"
            ));
        }
    }
    Ok(u)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates() {
        assert_eq!(parse_rate_per_s("260000/s").unwrap(), 260_000.0);
        assert_eq!(parse_rate_per_s("65.5k/s").unwrap(), 65_500.0);
        assert!((parse_rate_per_s("1/h").unwrap() - 1.0 / 3600.0).abs() < 1e-12);
        assert!((parse_rate_per_s("3/10min").unwrap() - 0.005).abs() < 1e-12);
        assert!((parse_rate_per_s("1/day").unwrap() - 1.0 / 86400.0).abs() < 1e-12);
        assert!(parse_rate_per_s("1000").unwrap_err().contains("1000"));
        assert!(parse_rate_per_s("x/s").is_err());
        assert!(parse_rate_per_s("5/banana").is_err());
        assert!(parse_rate_per_s("0/s").is_err());
    }

    #[test]
    fn usage() {
        let u = parse_usage("8h/day,5d/week").unwrap();
        assert_eq!(u.day_s(), 8.0 * 3600.0);
        assert_eq!(u.week_s(), 40.0 * 3600.0);
        let u = parse_usage("3h/day").unwrap();
        assert_eq!(u.days_per_week, 5.0);
        assert!(parse_usage("25h/day").is_err());
        assert!(parse_usage("8h").is_err());
        assert!(parse_usage("8h/day,9d/week").is_err());
    }
}
