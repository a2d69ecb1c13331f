//! The private tracefs instance, and putting everything back.
//!
//! Nothing punctual changes may outlive it: tracefs is mounted only if it
//! was not, a private instance `instances/punctual-<pid>` is created
//! disabled, every knob written is saved on first read and restored if
//! changed, and the instance is removed on every exit path (Drop covers
//! normal exit, errors, panics and the Ctrl-C/SIGTERM flag the CLI polls).
//! SIGKILL skips Drop, so every change is first written to a restore
//! journal (`/run/punctual/trace-journal-<pid>.json`, in the one format of
//! [`punctual_live::restore`]); its `cleanup_stale` (run by every verb at
//! start, by `punctual cause --cleanup` and at the start of every
//! recording) replays the journals of dead processes.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use punctual_live::restore::{self, Action, Restore};
pub use punctual_live::restore::{
    cleanup_stale, find_mount, knob_value, read_file, CleanupReport, DEFAULT_DIR as JOURNAL_DIR,
    INSTANCE_PREFIX, TRACEFS,
};

/// Why tracing cannot be used; the message is the one sentence the user
/// sees (`Warning::NoTracing`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct NoTracing(pub String);

/// A private tracing instance. Dropping it restores and removes
/// everything it changed.
#[derive(Debug)]
pub struct Instance {
    root: PathBuf,
    path: PathBuf,
    journal: Restore,
    closed: bool,
}

impl Instance {
    /// Mounts tracefs if needed and creates `instances/punctual-<pid>`,
    /// with tracing off. Cleans up after dead runs first.
    pub fn create(journal_dir: &Path) -> Result<Instance, NoTracing> {
        Self::create_inner(journal_dir, false)
    }

    /// [`Instance::create`], for an instance that does not record command
    /// names (`saved_cmdlines`). With the top-level `options/record-cmd`
    /// on (the default), enabling `sched_switch` anywhere adds a comm copy
    /// under a global lock to every context switch of every CPU, on the
    /// probe's wake-up path too (≈0.35 µs per wake-up measured here);
    /// punctual reads names from `sched_switch` itself. That option exists
    /// only at the top level, and an instance copies it when created: it
    /// is switched off (journaled) just for the instance's creation and put
    /// back at once, so the global change lasts milliseconds.
    pub fn create_without_cmdline_recording(journal_dir: &Path) -> Result<Instance, NoTracing> {
        Self::create_inner(journal_dir, true)
    }

    fn create_inner(journal_dir: &Path, no_record_cmd: bool) -> Result<Instance, NoTracing> {
        let _ = cleanup_stale(journal_dir);
        let pid = std::process::id();
        let cannot_write = |e: io::Error| {
            NoTracing(format!(
                "cannot write the restore journal in {}: {e}",
                journal_dir.display()
            ))
        };
        let mut journal = Restore::create_named(journal_dir, &format!("trace-journal-{pid}"))
            .map_err(cannot_write)?;
        let root = match find_mount() {
            Some(r) => r,
            None => {
                // Journal first: a kill right after the mount must still
                // unmount it.
                journal
                    .record(Action::Mount {
                        target: PathBuf::from(TRACEFS),
                        shared: true,
                    })
                    .map_err(cannot_write)?;
                if let Err(e) = restore::mount_tracefs() {
                    journal.set_done();
                    let _ = fs::remove_file(journal.path());
                    return Err(NoTracing(format!(
                        "tracefs is not mounted and mounting it at {TRACEFS} failed: {e}"
                    )));
                }
                PathBuf::from(TRACEFS)
            }
        };
        let path = root
            .join("instances")
            .join(format!("{INSTANCE_PREFIX}{pid}"));
        journal
            .record(Action::TraceInstance { path: path.clone() })
            .map_err(cannot_write)?;
        let mut inst = Instance {
            root,
            path: path.clone(),
            journal,
            closed: false,
        };
        // Until some buffer is used the kernel keeps every ring buffer at a
        // placeholder size and the top-level one reads `7 (expanded: N)`.
        // Using the instance expands them all for good, which would leave
        // the top-level buffer at 7 KB for the next user of ftrace: its
        // expanded size is journaled so that closing writes it back.
        let top = inst.root.join("buffer_size_kb");
        if let Ok(t) = read_file(&top) {
            if t.contains("(expanded:") {
                inst.journal
                    .record(Action::Knob {
                        path: top,
                        restore: knob_value(&t),
                    })
                    .map_err(cannot_write)?;
            }
        }
        let record_cmd = inst.root.join("options/record-cmd");
        let switched = no_record_cmd && inst.set_path(&record_cmd, "0").is_ok();
        let created = fs::create_dir(&path);
        if switched {
            let _ = inst.restore_knob(&record_cmd);
        }
        if let Err(e) = created {
            let msg = if e.kind() == io::ErrorKind::PermissionDenied {
                format!("cannot create a tracing instance ({e}); run as root")
            } else {
                format!("cannot create tracing instance {}: {e}", path.display())
            };
            let _ = inst
                .journal
                .forget(|a| matches!(a, Action::TraceInstance { .. }));
            let _ = inst.close();
            return Err(NoTracing(msg));
        }
        if let Err(e) = inst.set("tracing_on", "0") {
            let _ = inst.close();
            return Err(NoTracing(format!("cannot switch tracing off: {e}")));
        }
        Ok(inst)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Writes a knob of the instance (path relative to it), saving its
    /// value first (journal before the write).
    pub fn set(&mut self, rel: &str, value: &str) -> io::Result<()> {
        let p = self.path.join(rel);
        self.set_path(&p, value)
    }

    /// Writes any tracefs file. Files outside the private instance are
    /// journaled before the write (they outlive it); the instance's own
    /// knobs are saved in memory only, since removing the instance
    /// discards them anyway.
    pub fn set_path(&mut self, p: &Path, value: &str) -> io::Result<()> {
        let saved = self
            .journal
            .actions()
            .iter()
            .any(|a| matches!(a, Action::Knob { path, .. } if path == p));
        if !saved {
            let old = knob_value(&read_file(p)?);
            if old == value {
                return Ok(());
            }
            let a = Action::Knob {
                path: p.to_path_buf(),
                restore: old,
            };
            if p.starts_with(&self.path) {
                self.journal.note(a);
            } else {
                self.journal.record(a)?;
            }
        }
        fs::write(p, value)
    }

    /// Puts one saved knob back now and forgets it (the journal too).
    fn restore_knob(&mut self, p: &Path) -> io::Result<()> {
        let Some(old) = self.journal.actions().iter().find_map(|a| match a {
            Action::Knob { path, restore } if path == p => Some(restore.clone()),
            _ => None,
        }) else {
            return Ok(());
        };
        fs::write(p, restore::restore_text(p, &old).as_bytes())?;
        self.journal
            .forget(|a| matches!(a, Action::Knob { path, .. } if path == p))
    }

    /// Adds `trigger` (e.g. `stacktrace if next_pid == 42`) to the
    /// triggers of `system/event`, its removal (`!trigger`) journaled
    /// first: undone before the instance is removed, and by the next run
    /// after a SIGKILL.
    pub fn add_trigger(&mut self, event: &str, trigger: &str) -> io::Result<()> {
        let p = self.path.join(format!("events/{event}/trigger"));
        self.journal.record(Action::Knob {
            path: p.clone(),
            restore: format!("!{trigger}"),
        })?;
        fs::write(&p, trigger)
    }

    /// Enables `system/event`; false when this kernel does not have it.
    pub fn enable_event(&mut self, name: &str) -> bool {
        self.set(&format!("events/{name}/enable"), "1").is_ok()
    }

    /// Puts every knob back, removes the instance, unmounts tracefs if we
    /// mounted it, and deletes the journal. Idempotent.
    pub fn close(&mut self) -> Result<(), String> {
        if self.closed {
            return Ok(());
        }
        self.closed = true;
        let problems = self.journal.undo_all();
        if problems.is_empty() {
            // Only succeeds when empty: another run's journal keeps it.
            let _ = fs::remove_dir(self.journal.dir());
            Ok(())
        } else {
            // The journal stays so `punctual cause --cleanup` can retry.
            Err(problems.join("; "))
        }
    }
}

impl Drop for Instance {
    fn drop(&mut self) {
        if let Err(e) = self.close() {
            eprintln!("punctual: tracing cleanup incomplete: {e} (run 'punctual cause --cleanup')");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The tests that create instances take turns: each journals in its
    /// own directory, so one that mounted tracefs would unmount it under
    /// the other's live instance (seen in CI as a NotFound on a global
    /// option file).
    static TRACEFS_TESTS: std::sync::Mutex<()> = std::sync::Mutex::new(());

    #[test]
    fn instance_is_created_disabled_and_removed() {
        if unsafe { libc::geteuid() } != 0 {
            eprintln!("skipped: needs root for tracefs");
            return;
        }
        let _turn = TRACEFS_TESTS.lock().unwrap_or_else(|e| e.into_inner());
        let dir = tempfile::tempdir().unwrap();
        let was_mounted = find_mount().is_some();
        let mut inst = match Instance::create(dir.path()) {
            Ok(i) => i,
            Err(e) => {
                eprintln!("skipped: {e}");
                return;
            }
        };
        let p = inst.path().to_path_buf();
        assert_eq!(
            fs::read_to_string(p.join("tracing_on")).unwrap().trim(),
            "0"
        );
        inst.set("trace_clock", "mono").unwrap();
        assert!(inst.enable_event("sched/sched_switch"));
        assert!(!inst.enable_event("nosuch/event"));
        let j = dir
            .path()
            .join(format!("trace-journal-{}.json", std::process::id()));
        let text = fs::read_to_string(&j).unwrap();
        assert!(
            text.contains(&format!("punctual-{}", std::process::id())),
            "{text}"
        );
        drop(inst);
        assert!(!p.exists());
        assert!(!j.exists());
        if !was_mounted {
            assert!(find_mount().is_none(), "tracefs left mounted");
        }
    }

    /// The instance that does not record command names leaves the global
    /// option as it found it, journal included, and records no comm.
    #[test]
    fn instance_without_cmdline_recording_leaves_the_global_option() {
        if unsafe { libc::geteuid() } != 0 {
            eprintln!("skipped: needs root for tracefs");
            return;
        }
        let _turn = TRACEFS_TESTS.lock().unwrap_or_else(|e| e.into_inner());
        let dir = tempfile::tempdir().unwrap();
        let mut inst = match Instance::create_without_cmdline_recording(dir.path()) {
            Ok(i) => i,
            Err(e) => {
                eprintln!("skipped: {e}");
                return;
            }
        };
        let opt = inst.root().join("options/record-cmd");
        let Ok(before) = fs::read_to_string(&opt) else {
            eprintln!("skipped: no options/record-cmd here");
            return;
        };
        let j = fs::read_to_string(
            dir.path()
                .join(format!("trace-journal-{}.json", std::process::id())),
        )
        .unwrap();
        assert!(!j.contains("record-cmd"), "{j}");
        assert!(inst.enable_event("sched/sched_switch"));
        inst.set("tracing_on", "1").unwrap();
        // A process with a fresh name runs (and switches) while tracing.
        let name = format!("pq{}", std::process::id());
        let bin = dir.path().join(&name);
        fs::copy("/bin/sleep", &bin).unwrap();
        std::process::Command::new(&bin)
            .arg("0.1")
            .status()
            .unwrap();
        let saved = fs::read_to_string(inst.root().join("saved_cmdlines")).unwrap_or_default();
        // Another tracer's instance (other runs on this machine) may
        // record the name through its own events.
        let others = fs::read_dir(inst.root().join("instances"))
            .map(|rd| rd.flatten().count() > 1)
            .unwrap_or(false);
        drop(inst);
        // An instance that mounted tracefs unmounts it when dropped; the
        // option lives on in the kernel, so look at it through a mount of
        // our own.
        let after = if find_mount().is_some() {
            fs::read_to_string(&opt)
        } else {
            restore::mount_tracefs().unwrap();
            let r = fs::read_to_string(Path::new(TRACEFS).join("options/record-cmd"));
            restore::umount(Path::new(TRACEFS), 0).unwrap();
            r
        };
        assert_eq!(after.unwrap(), before);
        // Only when the option is on would the comm be recorded at all.
        if before.trim() == "1" && !others {
            assert!(!saved.contains(&name), "{name} was recorded");
        }
    }
}
