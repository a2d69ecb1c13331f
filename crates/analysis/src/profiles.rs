//! Workload profiles: named bufferings with the MTTF their work needs.
//!
//! The shipped set lives in `profiles/profiles.toml` (documented there)
//! and is compiled in, so the binary works from any directory; users add
//! or override profiles with their own file of the same shape.

use punctual_units::{parse_duration, Nanos};
use serde::{Deserialize, Serialize};

use crate::model::{Buffering, Compute};

/// The shipped profiles file, verbatim.
pub const BUILTIN_TOML: &str = include_str!("../../../profiles/profiles.toml");

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Profile {
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub family: Option<String>,
    /// Short label of the buffering, e.g. "128 frames × 2".
    pub size: String,
    pub buffering: Buffering,
    /// MTTF the work needs.
    pub target: Nanos,
    pub source: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    #[serde(default)]
    profile: Vec<RawProfile>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawProfile {
    name: String,
    family: Option<String>,
    size: Option<String>,
    buffers: i64,
    buffer_len: Option<String>,
    frames: Option<u64>,
    frame_rate_hz: Option<f64>,
    compute: Option<String>,
    service_period: Option<String>,
    target: String,
    source: Option<String>,
}

/// Parses a profiles file; `origin` names it in error sentences.
pub fn parse(text: &str, origin: &str) -> Result<Vec<Profile>, String> {
    let raw: RawFile = toml::from_str(text).map_err(|e| {
        format!(
            "{origin} is not a valid profiles file: {}",
            e.message().trim()
        )
    })?;
    let mut out: Vec<Profile> = Vec::new();
    for p in raw.profile {
        let who = format!("{origin}: profile '{}'", p.name);
        if p.buffers < 1 || p.buffers > 1_000_000 {
            return Err(format!(
                "{who}: buffers {} must be between 1 and 1000000",
                p.buffers
            ));
        }
        let buffer_len = match (&p.buffer_len, p.frames, p.frame_rate_hz) {
            (Some(t), None, None) => {
                parse_duration(t).map_err(|e| format!("{who}: buffer_len {e}"))?
            }
            (None, Some(f), Some(hz)) if f > 0 && hz > 0.0 && hz.is_finite() => {
                Nanos((f as f64 * 1e9 / hz).round() as u64)
            }
            _ => {
                return Err(format!(
                    "{who}: give either buffer_len, or frames and frame_rate_hz (both positive)"
                ))
            }
        };
        let compute = match &p.compute {
            Some(c) => Compute::parse(c).map_err(|e| format!("{who}: {e}"))?,
            None => Compute::Fraction(0.0),
        };
        let mut buffering = Buffering::new(p.buffers as u32, buffer_len, compute);
        if let Some(s) = &p.service_period {
            let s = parse_duration(s).map_err(|e| format!("{who}: service_period {e}"))?;
            if s.is_zero() {
                return Err(format!("{who}: service_period is zero"));
            }
            buffering.service_period = Some(s);
        }
        buffering.slack().map_err(|e| format!("{who}: {e}"))?;
        let target = parse_duration(&p.target).map_err(|e| format!("{who}: target {e}"))?;
        if target.is_zero() {
            return Err(format!("{who}: target is zero"));
        }
        if out.iter().any(|o| o.name == p.name) {
            return Err(format!("{who} appears twice"));
        }
        out.push(Profile {
            size: p.size.unwrap_or_else(|| buffering.label()),
            name: p.name,
            family: p.family,
            buffering,
            target,
            source: p.source.unwrap_or_default(),
        });
    }
    Ok(out)
}

/// The shipped profiles.
pub fn builtin() -> Vec<Profile> {
    parse(BUILTIN_TOML, "built-in profiles").expect("the shipped profiles file is valid")
}

/// `base` with `extra` added; an extra profile replaces a base one of the
/// same name in place.
pub fn merge(mut base: Vec<Profile>, extra: Vec<Profile>) -> Vec<Profile> {
    for p in extra {
        match base.iter_mut().find(|b| b.name == p.name) {
            Some(b) => *b = p,
            None => base.push(p),
        }
    }
    base
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shipped_profiles_parse_and_cover_the_issue() {
        let p = builtin();
        assert!(p.len() >= 20);
        let audio = p
            .iter()
            .find(|p| p.name.starts_with("pro audio 128 frames × 2"))
            .unwrap();
        assert_eq!(audio.buffering.buffer_len, Nanos(2_666_667));
        assert_eq!(audio.target, Nanos::from_secs(86_400));
        let nic = p.iter().find(|p| p.name.starts_with("NIC ring")).unwrap();
        let slack = nic.buffering.slack().unwrap();
        // 1023 × 67.2 ns ≈ 68.7 µs (67 ns after rounding the slot).
        assert!((68_000..69_000).contains(&slack.0), "{slack}");
        for needle in [
            "ADSL",
            "soft modem",
            "RT audio",
            "RT video",
            "VoIP",
            "1 kHz",
            "144 Hz",
        ] {
            assert!(p.iter().any(|x| x.name.contains(needle)), "{needle}");
        }
    }

    #[test]
    fn user_files_extend_and_override() {
        let extra = parse(
            "[[profile]]\nname = 'VoIP 20 ms × 2'\nbuffers = 4\nbuffer_len = '20ms'\ntarget = '1h'\n\
             [[profile]]\nname = 'mine'\nbuffers = 2\nbuffer_len = '5ms'\ncompute = '1ms'\ntarget = '1d'\n",
            "x.toml",
        )
        .unwrap();
        let all = merge(builtin(), extra);
        let n = builtin().len();
        assert_eq!(all.len(), n + 1);
        assert_eq!(
            all.iter()
                .find(|p| p.name == "VoIP 20 ms × 2")
                .unwrap()
                .buffering
                .buffers,
            4
        );
    }

    #[test]
    fn bad_profiles_are_named() {
        let e = parse(
            "[[profile]]\nname='a'\nbuffers=0\nbuffer_len='1ms'\ntarget='1h'\n",
            "f",
        )
        .unwrap_err();
        assert!(e.contains("'a'") && e.contains("buffers"), "{e}");
        let e = parse(
            "[[profile]]\nname='a'\nbuffers=2\nbuffer_len='1ms'\ncompute='1ms'\ntarget='1h'\n",
            "f",
        )
        .unwrap_err();
        assert!(e.contains("no slack"), "{e}");
        let e = parse(
            "[[profile]]\nname='a'\nbuffers=2\nbuffer_len='1ms'\ntarget='daily'\n",
            "f",
        )
        .unwrap_err();
        assert!(e.contains("target"), "{e}");
        assert!(parse("[[profile]]\nname='a'\nbufers=2\n", "f").is_err());
    }
}
