//! What every verb that measures does on the way out: stamp the record with
//! the wall-clock start and write it where `--json` says. One copy, so the
//! stamps and the messages are the same whichever verb made the record.
//!
//! Also the process's standard output policy: `--json -` puts the JSON on
//! standard output and everything else on standard error (so `punctual
//! timer --json - | jq` parses), and a closed pipe (`| head`) ends the
//! output quietly, as ripgrep does.

use std::fs::File;
use std::io::{IsTerminal, Write};
use std::os::fd::FromRawFd;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant, SystemTime};

use punctual_live::timer::Progress;
use punctual_measure::{MeasureError, ProbeRequest, Runner};
use punctual_record::{Nanos, Record};

use crate::error::{CliError, CliResult};

/// RFC 3339 UTC time of `t`, to the second. Hand-rolled because this one
/// format is all the CLI needs from a date library.
pub fn rfc3339(t: SystemTime) -> String {
    let secs = t
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Civil-from-days (H. Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// The wall-clock start of a run, for `Record::started_at`.
pub fn rfc3339_now() -> String {
    rfc3339(SystemTime::now())
}

/// The real standard output, kept aside when `--json -` sent fd 1 to
/// standard error.
static JSON_STDOUT: OnceLock<Mutex<File>> = OnceLock::new();

/// True for the path `-`: standard output.
pub fn is_stdout(path: &Path) -> bool {
    path.as_os_str() == "-"
}

/// True when the arguments (before a `--`) hold `--json -` or `--json=-`.
pub fn json_to_stdout(args: &[std::ffi::OsString]) -> bool {
    let args: Vec<&std::ffi::OsString> = args.iter().take_while(|a| *a != "--").collect();
    args.iter().any(|a| *a == "--json=-")
        || args.windows(2).any(|w| *w[0] == "--json" && *w[1] == "-")
}

/// For `--json -`: keeps the real standard output for the JSON and points
/// file descriptor 1 at standard error, so the tables, progress and
/// messages every verb prints still reach the user and the JSON stays
/// parseable. Done once, before the verb runs.
pub fn route_stdout_to_stderr() {
    // SAFETY: dup/dup2 on the process's own standard descriptors; the
    // duplicate is owned by the File from here on.
    unsafe {
        let saved = libc::dup(1);
        if saved < 0 {
            return;
        }
        if libc::dup2(2, 1) < 0 {
            libc::close(saved);
            return;
        }
        let _ = JSON_STDOUT.set(Mutex::new(File::from_raw_fd(saved)));
    }
}

/// Writes `bytes` to standard output: the one kept aside by
/// [`route_stdout_to_stderr`] when there is one.
fn write_stdout(bytes: &[u8]) -> std::io::Result<()> {
    match JSON_STDOUT.get() {
        Some(f) => {
            let mut f = f.lock().unwrap_or_else(|e| e.into_inner());
            f.write_all(bytes)?;
            f.flush()
        }
        None => {
            let mut so = std::io::stdout().lock();
            so.write_all(bytes)?;
            so.flush()
        }
    }
}

/// Writes an output file named by `flag` atomically, or to standard
/// output for `-`. A closed pipe is not an error (the reader had enough).
pub fn write_bytes(flag: &str, path: &Path, bytes: &[u8]) -> CliResult {
    if is_stdout(path) {
        return match write_stdout(bytes) {
            Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(CliError::runtime(
                format!("{flag} -: cannot write to standard output: {e}"),
            )),
            _ => Ok(()),
        };
    }
    punctual_record::write_atomic(path, bytes)
        .map_err(|e| CliError::runtime(format!("cannot write {flag} {}: {e}", path.display())))
}

/// Writes the record (atomically) to `--json PATH`, or to standard output
/// for `-`; a failure names the path.
pub fn write_record(rec: &Record, path: &Path) -> CliResult {
    let mut text = rec.to_json_pretty();
    if is_stdout(path) {
        text.push('\n');
        return write_bytes("--json", path, text.as_bytes());
    }
    rec.write(path)
        .map_err(|e| CliError::runtime(format!("cannot write --json {}: {e}", path.display())))
}

/// As [`write_record`] for an optional `--json`, saying where it went (on
/// standard error, in every verb: standard output holds the results).
pub fn write_json(rec: &Record, path: &Option<PathBuf>) -> CliResult {
    if let Some(p) = path {
        write_record(rec, p)?;
        if !is_stdout(p) {
            eprintln!("record written to {}", p.display());
        }
    }
    Ok(())
}

/// A CPU list as the flags take it: `0,2,3`.
pub fn format_cpus(cpus: &[u32]) -> String {
    cpus.iter()
        .map(|c| c.to_string())
        .collect::<Vec<_>>()
        .join(",")
}

/// Prints what the verb that made `rec` prints, from the record alone
/// (`punctual_report::text`): the measurement on standard output, its
/// warnings on standard error.
pub fn print_text(rec: &Record) -> CliResult {
    let (text, warnings) =
        punctual_report::text::render_split(rec).map_err(|e| CliError::runtime(e.to_string()))?;
    print!("{text}");
    eprint!("{warnings}");
    Ok(())
}

/// Runs `work` on its own thread while the calling thread draws a progress
/// line on stderr (only when stderr is a terminal): elapsed, remaining,
/// running max.
pub fn with_progress<T: Send + 'static>(
    label: &str,
    duration: Nanos,
    progress: Arc<Progress>,
    work: impl FnOnce() -> T + Send + 'static,
) -> Result<T, CliError> {
    let handle = std::thread::Builder::new()
        .name("punctual-run".into())
        .stack_size(punctual_live::rt::RUN_THREAD_STACK_BYTES)
        .spawn(work)
        .map_err(|e| CliError::runtime(format!("cannot start the run: {e}")))?;
    let tty = std::io::stderr().is_terminal();
    if !tty {
        // Nothing to draw: wait on the thread itself rather than waking
        // five times a second beside the probe for the whole run.
        return handle
            .join()
            .map_err(|_| CliError::runtime(format!("the {label} run panicked")));
    }
    let start = Instant::now();
    let mut drew = false;
    while !handle.is_finished() {
        std::thread::sleep(Duration::from_millis(200));
        let el = Nanos::from_std(start.elapsed()).min(duration);
        let frac = el.0 as f64 / duration.0.max(1) as f64;
        let w = 30usize;
        let filled = ((frac * w as f64) as usize).min(w);
        eprint!(
            "\r{label} [{}{}] {:>5.1}s / {:.1}s  remaining {:>5.1}s  max {:<10}",
            "#".repeat(filled),
            ".".repeat(w - filled),
            el.as_secs_f64(),
            duration.as_secs_f64(),
            (duration - el).as_secs_f64(),
            progress.max().to_string()
        );
        drew = true;
    }
    if drew {
        eprint!("\r{}\r", " ".repeat(100));
    }
    handle
        .join()
        .map_err(|_| CliError::runtime(format!("the {label} run panicked")))
}

/// The command line's way of waiting for a probe: the progress line of
/// [`with_progress`], and optionally one line on stderr saying what runs
/// (`punctual cause`'s).
#[derive(Default)]
pub struct Terminal {
    /// Say what runs before the probe starts.
    pub announce: bool,
}

impl Runner for Terminal {
    fn run(
        &self,
        label: &str,
        duration: Nanos,
        progress: Arc<Progress>,
        work: Box<dyn FnOnce() + Send>,
    ) -> Result<(), MeasureError> {
        with_progress(label, duration, progress, work).map_err(|e| match e {
            CliError::Usage(m) => MeasureError::Usage(m),
            CliError::Runtime(m) | CliError::Gate(m) => MeasureError::Runtime(m),
        })
    }

    fn starting(&self, req: &ProbeRequest, tracing: bool) {
        if self.announce {
            eprintln!(
                "punctual {}: {} probe on CPU {} for {}{}…",
                req.kind,
                req.probe.name(),
                format_cpus(req.probe.cpus()),
                req.probe.duration(),
                if tracing {
                    " with the flight recorder"
                } else {
                    ""
                }
            );
        }
    }
}

/// True when a panic's message is the standard library's "failed printing
/// to stdout" after the reader closed the pipe.
pub fn is_broken_pipe_panic(msg: &str) -> bool {
    msg.contains("failed printing to stdout") && msg.contains("Broken pipe")
}

/// The text of a panic payload, when it has one.
pub fn panic_text(payload: &(dyn std::any::Any + Send)) -> &str {
    payload
        .downcast_ref::<String>()
        .map(String::as_str)
        .or_else(|| payload.downcast_ref::<&str>().copied())
        .unwrap_or("")
}

/// Installs a panic hook that stays silent for a closed standard output
/// and otherwise behaves as the default hook. The panic still unwinds, so
/// every restore guard on the way runs; `main` then exits with status 0.
pub fn quiet_broken_pipe() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if is_broken_pipe_panic(panic_text(info.payload())) {
            return;
        }
        default(info);
    }));
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn dates() {
        let at = |s| rfc3339(SystemTime::UNIX_EPOCH + Duration::from_secs(s));
        assert_eq!(at(1_700_000_000), "2023-11-14T22:13:20Z");
        assert_eq!(at(0), "1970-01-01T00:00:00Z");
        // Leap day and the last second of a century leap year.
        assert_eq!(at(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(at(978_307_199), "2000-12-31T23:59:59Z");
    }
}
