//! Value parsers shared by the verbs, so every duration, CPU list and
//! output path is validated the same way and refused with one sentence.

use std::path::{Path, PathBuf};

use punctual_units::{parse_duration, Nanos};

use crate::error::CliError;

/// clap value parser for human durations (`250us`, `1ms`, `5s`, `1h`).
pub fn duration(s: &str) -> Result<Nanos, String> {
    parse_duration(s).map_err(|e| e.to_string())
}

/// Like [`duration`] but refuses zero, and says "greater than zero" for
/// a negative value too (not the "zero or more" of plain durations).
pub fn positive_duration(s: &str) -> Result<Nanos, String> {
    if s.trim_start().starts_with('-') {
        return Err(format!("'{s}' is negative; it must be greater than zero"));
    }
    let d = duration(s)?;
    if d.is_zero() {
        Err(format!("'{s}' is zero; it must be greater than zero"))
    } else {
        Ok(d)
    }
}

/// Parses a CPU list such as `0`, `0,1`, `0-3`, `all` against the CPUs this
/// machine has online.
pub fn cpu_list(s: &str, online: &[u32]) -> Result<Vec<u32>, CliError> {
    let s = s.trim();
    if s == "all" {
        return Ok(online.to_vec());
    }
    let mut out = Vec::new();
    for part in s.split(',') {
        let part = part.trim();
        let (a, b) = match part.split_once('-') {
            Some((a, b)) => (a, b),
            None => (part, part),
        };
        let parse = |t: &str| {
            t.trim().parse::<u32>().map_err(|_| {
                CliError::usage(format!(
                    "--cpus '{s}' is not a CPU list (use e.g. 0, 0,1, 0-3 or all)"
                ))
            })
        };
        let (a, b) = (parse(a)?, parse(b)?);
        if a > b {
            return Err(CliError::usage(format!(
                "--cpus '{s}': range {a}-{b} is backwards"
            )));
        }
        for c in a..=b {
            if !online.contains(&c) {
                return Err(CliError::usage(format!(
                    "--cpus '{s}': CPU {c} is not online on this machine (online: {})",
                    format_cpus(online)
                )));
            }
            if !out.contains(&c) {
                out.push(c);
            }
        }
    }
    Ok(out)
}

pub fn format_cpus(cpus: &[u32]) -> String {
    cpus.iter()
        .map(|c| c.to_string())
        .collect::<Vec<_>>()
        .join(",")
}

/// The CPUs this process may run on, in order.
pub fn online_cpus() -> Vec<u32> {
    let n = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1) as u32;
    if let Ok(text) = std::fs::read_to_string("/sys/devices/system/cpu/online") {
        let mut v = Vec::new();
        for part in text.trim().split(',') {
            let (a, b) = match part.split_once('-') {
                Some((a, b)) => (a, b),
                None => (part, part),
            };
            if let (Ok(a), Ok(b)) = (a.parse::<u32>(), b.parse::<u32>()) {
                v.extend(a..=b);
            }
        }
        if !v.is_empty() {
            return v;
        }
    }
    (0..n).collect()
}

/// Fails early (before a long run) if an output path cannot be written.
pub fn check_output(flag: &str, path: &Option<PathBuf>) -> Result<(), CliError> {
    if let Some(p) = path {
        check_output_path(flag, p)?;
    }
    Ok(())
}

/// `-` (standard output) is always writable.
pub fn check_output_path(flag: &str, p: &Path) -> Result<(), CliError> {
    if crate::output::is_stdout(p) {
        return Ok(());
    }
    punctual_record::check_writable(p).map_err(|e| CliError::usage(format!("{flag}: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists() {
        let online = [0, 1];
        assert_eq!(cpu_list("all", &online).unwrap(), vec![0, 1]);
        assert_eq!(cpu_list("0-1", &online).unwrap(), vec![0, 1]);
        assert_eq!(cpu_list("1", &online).unwrap(), vec![1]);
        let e = cpu_list("7", &online).unwrap_err().to_string();
        assert!(e.contains("CPU 7"), "{e}");
        assert!(cpu_list("x", &online).is_err());
    }

    #[test]
    fn durations() {
        assert!(positive_duration("0ms").is_err());
        let neg = positive_duration("-1s").unwrap_err();
        assert!(neg.contains("greater than zero"), "{neg}");
        assert!(duration("banana").unwrap_err().contains("banana"));
    }
}
