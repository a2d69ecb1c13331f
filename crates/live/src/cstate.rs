//! C-states held for the length of a run, as cyclictest does by default.
//!
//! A CPU woken from a deep idle state first pays that state's exit
//! latency; a wake-up latency measured with idle states free therefore
//! includes it, and is not comparable with the figures people quote from
//! cyclictest, which holds `/dev/cpu_dma_latency` at 0 µs for its whole
//! run (the PM QoS request keeps every CPU out of any state whose exit
//! latency exceeds the value). Two knobs, as rtla offers:
//!
//! - `/dev/cpu_dma_latency`: a process-wide PM QoS request that lasts
//!   while the file is open. The kernel drops it when the descriptor is
//!   closed, which includes every way the process can end (SIGKILL too),
//!   so it needs no restore journal.
//! - the cpuidle `disable` files of the measured CPUs' states deeper than
//!   N: sysfs knobs that outlive the process, so each is journaled before
//!   it is written ([`crate::restore`]) and put back on every exit path,
//!   by `Drop` on a normal exit and by the next run's stale-journal
//!   cleanup after a kill.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use serde_json::json;

use crate::restore::Restore;

/// The PM QoS device cyclictest and rtla hold.
pub const DMA_LATENCY_DEV: &str = "/dev/cpu_dma_latency";
/// Where each CPU's idle states live (`cpuN/cpuidle/stateK`).
pub const CPU_SYSFS: &str = "/sys/devices/system/cpu";

/// What a run asks to hold.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CStateRequest {
    /// Hold `/dev/cpu_dma_latency` at this many µs (`None`: leave it).
    pub dma_latency_us: Option<u32>,
    /// Disable the measured CPUs' idle states deeper than this index
    /// (`None`: leave them).
    pub deepest_idle_state: Option<u32>,
}

impl CStateRequest {
    /// What a record's `config.c_states` ([`CStateHold::config`]) says
    /// was in force, to hold the same again (nothing where nothing was,
    /// or where the first run's request was refused).
    pub fn in_force(config: Option<&serde_json::Value>) -> CStateRequest {
        let num = |k: &str| {
            config
                .and_then(|v| v.get(k))
                .and_then(|v| v.as_u64())
                .and_then(|x| u32::try_from(x).ok())
        };
        CStateRequest {
            dma_latency_us: num("dma_latency_us"),
            deepest_idle_state: num("deepest_idle_state"),
        }
    }
}

/// One idle state disabled for the run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Disabled {
    pub cpu: u32,
    pub state: u32,
    pub name: String,
    pub exit_latency_us: u64,
}

/// What was held, for the record; the file and the journal live as long
/// as the value.
#[derive(Debug, Default)]
pub struct CStateHold {
    /// The open PM QoS request (closed, hence dropped, with the value).
    dma: Option<File>,
    /// The journal of the `disable` files written (undone when dropped).
    journal: Option<Restore>,
    pub request: CStateRequest,
    /// `Some(us)` when the PM QoS request is in force.
    pub dma_latency_us: Option<u32>,
    /// Why the PM QoS request asked for could not be made.
    pub dma_refused: Option<String>,
    pub disabled: Vec<Disabled>,
    /// Why some idle states asked to be disabled could not be.
    pub idle_refused: Option<String>,
}

/// Opens `dev` and writes the request, as a native-endian 32-bit value
/// (the interface also takes ASCII hex; binary is what cyclictest writes).
pub fn hold_dma_latency(dev: &Path, us: u32) -> std::io::Result<File> {
    let mut f = OpenOptions::new().read(true).write(true).open(dev)?;
    let v = i32::try_from(us).unwrap_or(i32::MAX);
    f.write_all(&v.to_ne_bytes())?;
    Ok(f)
}

/// The idle states of `cpu` deeper than `deepest` under `sysfs`, with their
/// `disable` file, name and exit latency.
fn deeper_states(sysfs: &Path, cpu: u32, deepest: u32) -> Vec<(PathBuf, Disabled)> {
    let dir = sysfs.join(format!("cpu{cpu}/cpuidle"));
    let mut out = Vec::new();
    for k in (deepest + 1).. {
        let s = dir.join(format!("state{k}"));
        if !s.exists() {
            break;
        }
        let read = |f: &str| {
            std::fs::read_to_string(s.join(f))
                .map(|t| t.trim().to_string())
                .unwrap_or_default()
        };
        out.push((
            s.join("disable"),
            Disabled {
                cpu,
                state: k,
                name: read("name"),
                exit_latency_us: read("latency").parse().unwrap_or(0),
            },
        ));
    }
    out
}

/// Disables the idle states deeper than `deepest` on `cpus` under
/// `sysfs`, journaling each in `journal_dir` before it is written.
pub fn disable_deeper(
    sysfs: &Path,
    journal_dir: &Path,
    cpus: &[u32],
    deepest: u32,
) -> (Option<Restore>, Vec<Disabled>, Option<String>) {
    if !cpus
        .iter()
        .any(|c| sysfs.join(format!("cpu{c}/cpuidle")).exists())
    {
        return (
            None,
            Vec::new(),
            Some("this kernel has no cpuidle states for the measured CPUs".into()),
        );
    }
    let mut journal =
        match Restore::create_named(journal_dir, &format!("cstate-{}", std::process::id())) {
            Ok(j) => j,
            Err(e) => {
                return (
                    None,
                    Vec::new(),
                    Some(format!(
                        "cannot write the restore journal in {}: {e}",
                        journal_dir.display()
                    )),
                )
            }
        };
    let mut done = Vec::new();
    let mut refused = None;
    for &cpu in cpus {
        for (path, d) in deeper_states(sysfs, cpu, deepest) {
            let before = std::fs::read_to_string(&path).unwrap_or_else(|_| "0".into());
            if before.trim() == "1" {
                continue; // already disabled by someone else: not ours to restore
            }
            match journal.set_knob(&path, "1", before.trim()) {
                Ok(()) => done.push(d),
                Err(e) => {
                    refused.get_or_insert_with(|| format!("cannot write {}: {e}", path.display()));
                }
            }
        }
    }
    (Some(journal), done, refused)
}

impl CStateHold {
    /// Holds what `req` asks on `cpus` through the real kernel files, with
    /// the journal in the run directory.
    pub fn hold(req: CStateRequest, cpus: &[u32]) -> CStateHold {
        Self::hold_at(
            req,
            cpus,
            Path::new(DMA_LATENCY_DEV),
            Path::new(CPU_SYSFS),
            &crate::restore::run_dir(),
        )
    }

    /// [`CStateHold::hold`] with the files elsewhere (tests).
    pub fn hold_at(
        req: CStateRequest,
        cpus: &[u32],
        dev: &Path,
        sysfs: &Path,
        journal_dir: &Path,
    ) -> CStateHold {
        let mut h = CStateHold {
            request: req,
            ..Default::default()
        };
        if let Some(us) = req.dma_latency_us {
            match hold_dma_latency(dev, us) {
                Ok(f) => {
                    h.dma = Some(f);
                    h.dma_latency_us = Some(us);
                }
                Err(e) => h.dma_refused = Some(format!("cannot open {}: {e}", dev.display())),
            }
        }
        if let Some(n) = req.deepest_idle_state {
            let (j, d, why) = disable_deeper(sysfs, journal_dir, cpus, n);
            h.journal = j;
            h.disabled = d;
            h.idle_refused = why;
        }
        h
    }

    /// The record's `config.c_states`: what was asked and what was in
    /// force.
    pub fn config(&self) -> serde_json::Value {
        let mut v = json!({
            "dma_latency_us": match self.dma_latency_us {
                Some(us) => json!(us),
                None => json!("not held"),
            },
        });
        if let Some(why) = &self.dma_refused {
            v["dma_latency_refused"] = json!(why);
        }
        if let Some(n) = self.request.deepest_idle_state {
            v["deepest_idle_state"] = json!(n);
            v["disabled"] = json!(self
                .disabled
                .iter()
                .map(|d| json!({
                    "cpu": d.cpu,
                    "state": d.state,
                    "name": d.name,
                    "exit_latency_us": d.exit_latency_us,
                }))
                .collect::<Vec<_>>());
            if let Some(why) = &self.idle_refused {
                v["idle_refused"] = json!(why);
            }
        }
        v
    }

    /// One sentence per request that could not be met, saying what the
    /// numbers then mean.
    pub fn warnings(&self) -> Vec<String> {
        let mut w = Vec::new();
        if let (Some(us), Some(why)) = (self.request.dma_latency_us, &self.dma_refused) {
            w.push(format!(
                "C-states not held at {us}us ({why}; needs root): wake-ups from idle include \
                 the idle state's exit latency, so these numbers are not comparable with \
                 cyclictest's, which holds /dev/cpu_dma_latency at 0"
            ));
        }
        if let (Some(n), Some(why)) = (self.request.deepest_idle_state, &self.idle_refused) {
            w.push(format!(
                "idle states deeper than {n} not (all) disabled ({why}): wake-ups may include \
                 a deeper state's exit latency"
            ));
        }
        w
    }

    /// Writes what was held into `rec` (`config.c_states`), with one
    /// warning per request that could not be met.
    pub fn note(&self, rec: &mut punctual_record::Record) {
        rec.set_config("c_states", self.config());
        for message in self.warnings() {
            let w = punctual_record::Warning::Other { message };
            if !rec.warnings.contains(&w) {
                rec.warnings.push(w);
            }
        }
    }

    /// Releases everything now (also done when dropped): the PM QoS
    /// request is closed, the idle states put back.
    pub fn release(&mut self) -> Vec<String> {
        self.dma = None;
        match self.journal.as_mut() {
            Some(j) => j.undo_all(),
            None => Vec::new(),
        }
    }
}

/// Runs `run` with the C-states `req` asks for held on `cpus`, then puts
/// them back and writes into the record what was held, with a warning for
/// anything that could not be met or put back. `None` (a replayed feed,
/// which no idle state can delay) just runs. Every measuring verb goes
/// through here, so a record always says which C-states its numbers saw.
pub fn holding<E>(
    req: Option<CStateRequest>,
    cpus: &[u32],
    run: impl FnOnce() -> Result<punctual_record::Record, E>,
) -> Result<punctual_record::Record, E> {
    let Some(req) = req else {
        return run();
    };
    let (mut rec, problems) = holding_with(req, cpus, |held| {
        let mut rec = run()?;
        held.note(&mut rec);
        Ok(rec)
    })?;
    for p in problems {
        rec.warnings.push(punctual_record::Warning::Other {
            message: format!("could not put the idle states back: {p}"),
        });
    }
    Ok(rec)
}

/// As [`holding`], for a run whose result is not a [`Record`]
/// (`monitor`, whose record is its persisted state): `run` is handed the
/// hold, to state what is held wherever that run keeps it, and the
/// problems putting it back come back beside its result.
///
/// [`Record`]: punctual_record::Record
pub fn holding_with<T, E>(
    req: CStateRequest,
    cpus: &[u32],
    run: impl FnOnce(&CStateHold) -> Result<T, E>,
) -> Result<(T, Vec<String>), E> {
    let mut held = CStateHold::hold(req, cpus);
    let out = run(&held);
    let problems = held.release();
    Ok((out?, problems))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fake_sysfs(states: &[(&str, u64, &str)]) -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        for cpu in 0..2 {
            for (k, (name, lat, disable)) in states.iter().enumerate() {
                let s = d.path().join(format!("cpu{cpu}/cpuidle/state{k}"));
                std::fs::create_dir_all(&s).unwrap();
                std::fs::write(s.join("name"), format!("{name}\n")).unwrap();
                std::fs::write(s.join("latency"), format!("{lat}\n")).unwrap();
                std::fs::write(s.join("disable"), format!("{disable}\n")).unwrap();
            }
        }
        d
    }

    fn read(p: &Path) -> String {
        std::fs::read_to_string(p).unwrap().trim().to_string()
    }

    #[test]
    fn deeper_states_are_disabled_journaled_and_put_back() {
        let sys = fake_sysfs(&[("POLL", 0, "0"), ("C1", 2, "0"), ("C6", 133, "0")]);
        let run = tempfile::tempdir().unwrap();
        let req = CStateRequest {
            dma_latency_us: None,
            deepest_idle_state: Some(0),
        };
        let mut h =
            CStateHold::hold_at(req, &[1], Path::new("/nonexistent"), sys.path(), run.path());
        assert_eq!(h.disabled.len(), 2);
        assert_eq!(h.disabled[1].name, "C6");
        assert_eq!(read(&sys.path().join("cpu1/cpuidle/state2/disable")), "1");
        // CPU 0 was not asked for.
        assert_eq!(read(&sys.path().join("cpu0/cpuidle/state2/disable")), "0");
        let journal = std::fs::read_dir(run.path()).unwrap().count();
        assert_eq!(
            journal, 1,
            "the journal is on disk while the states are held"
        );
        assert_eq!(h.config()["disabled"][1]["exit_latency_us"], 133);
        assert!(h.warnings().is_empty());
        assert!(h.release().is_empty());
        assert_eq!(read(&sys.path().join("cpu1/cpuidle/state1/disable")), "0");
        assert_eq!(read(&sys.path().join("cpu1/cpuidle/state2/disable")), "0");
        assert_eq!(std::fs::read_dir(run.path()).unwrap().count(), 0);
    }

    #[test]
    fn a_state_someone_else_disabled_stays_disabled() {
        let sys = fake_sysfs(&[("POLL", 0, "0"), ("C1", 2, "1")]);
        let run = tempfile::tempdir().unwrap();
        let req = CStateRequest {
            dma_latency_us: None,
            deepest_idle_state: Some(0),
        };
        let h = CStateHold::hold_at(req, &[0], Path::new("/nonexistent"), sys.path(), run.path());
        assert!(h.disabled.is_empty());
        drop(h);
        assert_eq!(read(&sys.path().join("cpu0/cpuidle/state1/disable")), "1");
    }

    #[test]
    fn what_cannot_be_held_is_said_with_what_the_numbers_mean() {
        let run = tempfile::tempdir().unwrap();
        let req = CStateRequest {
            dma_latency_us: Some(0),
            deepest_idle_state: Some(1),
        };
        let empty = tempfile::tempdir().unwrap();
        let h = CStateHold::hold_at(
            req,
            &[0],
            &empty.path().join("cpu_dma_latency"),
            empty.path(),
            run.path(),
        );
        assert_eq!(h.dma_latency_us, None);
        let w = h.warnings();
        assert_eq!(w.len(), 2, "{w:?}");
        assert!(
            w[0].contains("not comparable with cyclictest's"),
            "{}",
            w[0]
        );
        assert!(w[1].contains("no cpuidle states"), "{}", w[1]);
        assert_eq!(h.config()["dma_latency_us"], "not held");
    }

    #[test]
    fn the_request_is_written_as_a_32_bit_value() {
        let d = tempfile::tempdir().unwrap();
        let dev = d.path().join("dev");
        std::fs::write(&dev, b"").unwrap();
        let f = hold_dma_latency(&dev, 7).unwrap();
        drop(f);
        assert_eq!(std::fs::read(&dev).unwrap(), 7i32.to_ne_bytes());
    }
}
