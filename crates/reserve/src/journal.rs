//! The restore journal: every system setting a run changes is written here
//! *before* it is changed, so that whatever ends the run — a return, an
//! error, Ctrl-C, SIGTERM, a panic, or SIGKILL — the machine can be put
//! back. Normal exits undo through `Drop`; after SIGKILL the next run (or
//! `punctual reserve --cleanup`) finds the dead owner's journal and undoes it.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// Where journals live unless a caller says otherwise: tmpfs, so a reboot
/// (which undoes everything anyway) also forgets them.
pub const DEFAULT_DIR: &str = "/run/punctual";

/// One change to undo.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Action {
    /// A kernel knob we wrote; undone by writing `restore` to it.
    Knob { path: PathBuf, restore: String },
    /// A cgroup we created: its tasks leave SCHED_DEADLINE, go back to the
    /// parent, and the directory is removed.
    Cgroup { path: PathBuf, v2: bool },
    /// A filesystem we mounted (debugfs, to reach sched features).
    Mount { target: PathBuf },
}

#[derive(Clone, Debug, Serialize, Deserialize)]
struct OnDisk {
    pid: u32,
    /// Start time of the owner in clock ticks since boot (/proc/PID/stat
    /// field 22): a reused PID is not mistaken for the owner.
    start_ticks: u64,
    actions: Vec<Action>,
}

/// The live journal of this process. Undoes everything when dropped.
#[derive(Debug)]
pub struct Journal {
    path: PathBuf,
    disk: OnDisk,
    done: bool,
}

impl Journal {
    /// Opens a fresh journal for this process in `dir` (created if needed).
    pub fn create(dir: &Path) -> io::Result<Journal> {
        fs::create_dir_all(dir)?;
        let pid = std::process::id();
        let path = dir.join(format!("reserve-{pid}.json"));
        let j = Journal {
            path,
            disk: OnDisk {
                pid,
                start_ticks: start_ticks(pid).unwrap_or(0),
                actions: Vec::new(),
            },
            done: false,
        };
        j.flush()?;
        Ok(j)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn flush(&self) -> io::Result<()> {
        let text = serde_json::to_vec_pretty(&self.disk).map_err(io::Error::other)?;
        punctual_record::write_atomic(&self.path, &text)
    }

    /// Records a change about to be made. Must be called (and succeed)
    /// before the change, or a SIGKILL between the two leaves it unknown.
    pub fn record(&mut self, a: Action) -> io::Result<()> {
        self.disk.actions.push(a);
        self.flush()
    }

    /// Writes `value` to a knob, journaling `restore` first.
    pub fn set_knob(&mut self, path: &Path, value: &str, restore: &str) -> io::Result<()> {
        self.record(Action::Knob {
            path: path.to_path_buf(),
            restore: restore.to_string(),
        })?;
        fs::write(path, value)
    }

    /// Undoes every change except mounts, newest first, keeping the mounts
    /// journaled (and mounted) for an [`undo_all`] later.
    ///
    /// Why: the root-domain totals are checked after the partitions come
    /// down (kernel::repair_negative_totals), through the debugfs a run
    /// may have mounted for itself.
    ///
    /// [`undo_all`]: Journal::undo_all
    pub fn undo_all_but_mounts(&mut self) -> Vec<String> {
        let mut errors = Vec::new();
        let mut mounts = Vec::new();
        while let Some(a) = self.disk.actions.pop() {
            if matches!(a, Action::Mount { .. }) {
                mounts.push(a);
                continue;
            }
            if let Err(e) = undo(&a) {
                errors.push(e);
            }
        }
        mounts.reverse();
        self.disk.actions = mounts;
        let _ = self.flush();
        errors
    }

    /// Undoes every change, newest first; returns what could not be undone.
    pub fn undo_all(&mut self) -> Vec<String> {
        let mut errors = Vec::new();
        while let Some(a) = self.disk.actions.pop() {
            if let Err(e) = undo(&a) {
                errors.push(e);
            }
            let _ = self.flush();
        }
        if errors.is_empty() {
            let _ = fs::remove_file(&self.path);
        }
        self.done = true;
        errors
    }
}

impl Drop for Journal {
    fn drop(&mut self) {
        if !self.done {
            let errs = self.undo_all();
            for e in errs {
                eprintln!("punctual reserve: could not restore: {e}");
            }
        }
    }
}

fn undo(a: &Action) -> Result<(), String> {
    match a {
        Action::Knob { path, restore } => {
            fs::write(path, restore).map_err(|e| format!("{}: {e}", path.display()))
        }
        Action::Cgroup { path, v2 } => crate::partition::remove_cgroup(path, *v2),
        Action::Mount { target } => {
            let c = std::ffi::CString::new(target.as_os_str().as_encoded_bytes())
                .map_err(|e| e.to_string())?;
            // SAFETY: c is a valid NUL-terminated path.
            let r = unsafe { libc::umount2(c.as_ptr(), libc::MNT_DETACH) };
            if r == 0 || io::Error::last_os_error().raw_os_error() == Some(libc::EINVAL) {
                // The mount point was made for the run: remove it too.
                let _ = fs::remove_dir(target);
                Ok(())
            } else {
                Err(format!(
                    "umount {}: {}",
                    target.display(),
                    io::Error::last_os_error()
                ))
            }
        }
    }
}

/// Start time of `pid` in clock ticks since boot, if it is alive.
pub fn start_ticks(pid: u32) -> Option<u64> {
    let text = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // comm may hold spaces and parentheses: fields start after the last ')'.
    let rest = &text[text.rfind(')')? + 1..];
    rest.split_whitespace().nth(19)?.parse().ok()
}

/// What `cleanup_stale` found.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct CleanupReport {
    /// Journals of dead runs whose changes were undone.
    pub cleaned: Vec<PathBuf>,
    /// Changes undone, as sentences.
    pub undone: Vec<String>,
    /// Journals of runs still alive, left alone.
    pub live: Vec<u32>,
    pub errors: Vec<String>,
}

/// Undoes the journals of runs that died without cleaning up (SIGKILL,
/// power cut of the process, not of the machine).
pub fn cleanup_stale(dir: &Path) -> CleanupReport {
    let mut rep = CleanupReport::default();
    let entries = match fs::read_dir(dir) {
        Ok(e) => e,
        Err(_) => return rep,
    };
    let me = std::process::id();
    for ent in entries.flatten() {
        let p = ent.path();
        let name = ent.file_name().to_string_lossy().to_string();
        if !(name.starts_with("reserve-") && name.ends_with(".json")) {
            continue;
        }
        let text = match fs::read_to_string(&p) {
            Ok(t) => t,
            Err(e) => {
                rep.errors.push(format!("{}: {e}", p.display()));
                continue;
            }
        };
        let disk: OnDisk = match serde_json::from_str(&text) {
            Ok(d) => d,
            Err(e) => {
                rep.errors
                    .push(format!("{}: not a journal ({e})", p.display()));
                continue;
            }
        };
        if disk.pid == me {
            continue;
        }
        if let Some(t) = start_ticks(disk.pid) {
            if disk.start_ticks == 0 || t == disk.start_ticks {
                rep.live.push(disk.pid);
                continue;
            }
        }
        let mut errs = Vec::new();
        for a in disk.actions.iter().rev() {
            match undo(a) {
                Ok(()) => rep.undone.push(describe(a)),
                Err(e) => errs.push(e),
            }
        }
        if errs.is_empty() {
            let _ = fs::remove_file(&p);
            rep.cleaned.push(p);
        } else {
            rep.errors.extend(errs);
        }
    }
    rep
}

fn describe(a: &Action) -> String {
    match a {
        Action::Knob { path, restore } => {
            format!("restored {} to '{}'", path.display(), restore.trim())
        }
        Action::Cgroup { path, .. } => format!("removed cpuset {}", path.display()),
        Action::Mount { target } => format!("unmounted {}", target.display()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drop_restores_knobs_in_reverse_order() {
        let dir = tempfile::tempdir().unwrap();
        let knob = dir.path().join("knob");
        fs::write(&knob, "1").unwrap();
        {
            let mut j = Journal::create(&dir.path().join("j")).unwrap();
            j.set_knob(&knob, "0", "1").unwrap();
            j.set_knob(&knob, "7", "0").unwrap();
            assert_eq!(fs::read_to_string(&knob).unwrap(), "7");
        }
        assert_eq!(fs::read_to_string(&knob).unwrap(), "1");
        assert_eq!(fs::read_dir(dir.path().join("j")).unwrap().count(), 0);
    }

    #[test]
    fn undo_all_but_mounts_keeps_the_mount_journaled_until_undo_all() {
        let dir = tempfile::tempdir().unwrap();
        let knob = dir.path().join("knob");
        let mnt = dir.path().join("mnt");
        fs::write(&knob, "1").unwrap();
        fs::create_dir(&mnt).unwrap();
        let mut j = Journal::create(&dir.path().join("j")).unwrap();
        j.set_knob(&knob, "0", "1").unwrap();
        j.record(Action::Mount {
            target: mnt.clone(),
        })
        .unwrap();
        j.set_knob(&knob, "7", "0").unwrap();
        assert!(j.undo_all_but_mounts().is_empty());
        assert_eq!(fs::read_to_string(&knob).unwrap(), "1");
        assert!(mnt.exists(), "the mount is undone only by undo_all");
        let on_disk = fs::read_to_string(j.path()).unwrap();
        assert!(
            on_disk.contains("mount") && !on_disk.contains("knob"),
            "{on_disk}"
        );
        // Not a mount point here: umount says EINVAL, and the made
        // directory is removed as after a real unmount.
        assert!(j.undo_all().is_empty());
        assert!(!mnt.exists());
        assert!(!j.path().exists());
    }

    #[test]
    fn stale_journal_of_a_dead_owner_is_undone_and_a_live_one_kept() {
        let dir = tempfile::tempdir().unwrap();
        let knob = dir.path().join("knob");
        fs::write(&knob, "changed").unwrap();
        // A dead owner: PID 0 never names a user process.
        let dead = OnDisk {
            pid: u32::MAX - 1,
            start_ticks: 1,
            actions: vec![Action::Knob {
                path: knob.clone(),
                restore: "orig".into(),
            }],
        };
        fs::write(
            dir.path().join("reserve-4294967294.json"),
            serde_json::to_string(&dead).unwrap(),
        )
        .unwrap();
        // A live owner: PID 1 with its real start time.
        let live = OnDisk {
            pid: 1,
            start_ticks: start_ticks(1).unwrap_or(0),
            actions: vec![Action::Knob {
                path: dir.path().join("other"),
                restore: "x".into(),
            }],
        };
        fs::write(
            dir.path().join("reserve-1.json"),
            serde_json::to_string(&live).unwrap(),
        )
        .unwrap();
        let rep = cleanup_stale(dir.path());
        assert_eq!(fs::read_to_string(&knob).unwrap(), "orig");
        assert_eq!(rep.cleaned.len(), 1, "{rep:?}");
        assert_eq!(rep.live, vec![1]);
        assert!(!dir.path().join("other").exists());
        assert!(rep.undone[0].contains("orig"));
    }
}
