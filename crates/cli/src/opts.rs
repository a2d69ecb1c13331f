//! Value parsers shared by the verbs, so every duration, CPU list and
//! output path is validated the same way and refused with one sentence.

use std::path::{Path, PathBuf};

use punctual_live::sysinfo::CpuListError;
use punctual_units::{parse_duration, Nanos};

use crate::error::CliError;

/// clap value parser for human durations (`250us`, `1ms`, `5s`, `1h`).
pub fn duration(s: &str) -> Result<Nanos, String> {
    parse_duration(s).map_err(|e| e.to_string())
}

/// Like [`duration`] but refuses zero.
pub fn positive_duration(s: &str) -> Result<Nanos, String> {
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
    let out = punctual_live::sysinfo::parse_cpu_list(s).map_err(|e| match e {
        CpuListError::NotAList => CliError::usage(format!(
            "--cpus '{s}' is not a CPU list (use e.g. 0, 0,1, 0-3 or all)"
        )),
        CpuListError::Backwards(a, b) => {
            CliError::usage(format!("--cpus '{s}': range {a}-{b} is backwards"))
        }
    })?;
    if let Some(c) = out.iter().find(|c| !online.contains(c)) {
        return Err(CliError::usage(format!(
            "--cpus '{s}': CPU {c} is not online on this machine (online: {})",
            format_cpus(online)
        )));
    }
    Ok(out)
}

pub fn format_cpus(cpus: &[u32]) -> String {
    cpus.iter()
        .map(|c| c.to_string())
        .collect::<Vec<_>>()
        .join(",")
}

pub use punctual_live::sysinfo::online_cpus;

/// Fails early (before a long run) if an output path cannot be written.
pub fn check_output(flag: &str, path: &Option<PathBuf>) -> Result<(), CliError> {
    if let Some(p) = path {
        check_output_path(flag, p)?;
    }
    Ok(())
}

pub fn check_output_path(flag: &str, p: &Path) -> Result<(), CliError> {
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
        assert!(duration("banana").unwrap_err().contains("banana"));
    }
}
