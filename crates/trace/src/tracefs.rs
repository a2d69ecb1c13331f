//! The private tracefs instance, and putting everything back.
//!
//! Nothing punctual changes may outlive it: tracefs is mounted only if it
//! was not, a private instance `instances/punctual-<pid>` is created
//! disabled, every knob written is saved on first read and restored if
//! changed, and the instance is removed on every exit path (Drop covers
//! normal exit, errors, panics and the Ctrl-C/SIGTERM flag the CLI polls).
//! SIGKILL skips Drop, so every change is first written to a restore
//! journal (`/run/punctual/trace-journal-<pid>.json`); [`cleanup_stale`]
//! (run by `punctual cause --cleanup` and at the start of every recording)
//! replays the journals of dead processes.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// Where tracefs lives on current kernels.
pub const TRACEFS: &str = "/sys/kernel/tracing";
/// Where the restore journals are kept (tmpfs: gone at reboot, as is
/// every tracefs change they describe).
pub const JOURNAL_DIR: &str = "/run/punctual";
const INSTANCE_PREFIX: &str = "punctual-";

/// What was changed, written before each change is made.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Journal {
    pub pid: u32,
    /// Field 22 of /proc/<pid>/stat, so a recycled pid is not mistaken
    /// for the still-running owner.
    pub start_time: u64,
    pub tracefs: PathBuf,
    pub mounted_by_us: bool,
    #[serde(default)]
    pub instance: Option<PathBuf>,
    /// (file, value before we wrote it), in the order changed.
    #[serde(default)]
    pub knobs: Vec<(PathBuf, String)>,
}

/// What a cleanup did, one line per action.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CleanupReport {
    pub actions: Vec<String>,
    pub problems: Vec<String>,
}

/// Reads a tracefs file in large reads. Some of its files (the ring's
/// `header_page`) answer only the first read of a file position, so the
/// small first read `read_to_string` makes would cut them short.
pub fn read_file(path: &Path) -> io::Result<String> {
    use std::io::Read;
    let mut f = fs::File::open(path)?;
    let mut out = Vec::new();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        match f.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
    }
    Ok(String::from_utf8_lossy(&out).into_owned())
}

fn proc_start_time(pid: u32) -> Option<u64> {
    let s = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &s[s.rfind(')')? + 1..];
    // After the comm: state is field 3, starttime field 22.
    rest.split_whitespace().nth(19)?.parse().ok()
}

fn alive(pid: u32, start_time: u64) -> bool {
    proc_start_time(pid) == Some(start_time)
}

/// Where tracefs is mounted now, if anywhere.
pub fn find_mount() -> Option<PathBuf> {
    let m = fs::read_to_string("/proc/mounts").ok()?;
    let mut found = None;
    for l in m.lines() {
        let mut it = l.split_whitespace();
        let (_, dir, fstype) = (it.next()?, it.next()?, it.next()?);
        if fstype == "tracefs" {
            if dir == TRACEFS {
                return Some(PathBuf::from(dir));
            }
            found.get_or_insert_with(|| PathBuf::from(dir));
        }
    }
    found
}

fn mount_tracefs() -> io::Result<()> {
    let src = c"nodev";
    let target = c"/sys/kernel/tracing";
    let fstype = c"tracefs";
    // SAFETY: all pointers are NUL-terminated constants; data may be null.
    let r = unsafe {
        libc::mount(
            src.as_ptr(),
            target.as_ptr(),
            fstype.as_ptr(),
            0,
            std::ptr::null(),
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

fn umount(path: &Path) -> io::Result<()> {
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL in path"))?;
    // SAFETY: c is a valid NUL-terminated path.
    if unsafe { libc::umount2(c.as_ptr(), 0) } == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

fn journal_path(dir: &Path, pid: u32) -> PathBuf {
    dir.join(format!("trace-journal-{pid}.json"))
}

fn write_journal(dir: &Path, j: &Journal) -> io::Result<()> {
    fs::create_dir_all(dir)?;
    let text = serde_json::to_string_pretty(j).map_err(io::Error::other)?;
    punctual_record::write_atomic(&journal_path(dir, j.pid), text.as_bytes())
}

fn other_live_journals(dir: &Path, me: u32) -> bool {
    let Ok(rd) = fs::read_dir(dir) else {
        return false;
    };
    rd.flatten().any(|e| {
        let Ok(text) = fs::read_to_string(e.path()) else {
            return false;
        };
        match serde_json::from_str::<Journal>(&text) {
            Ok(j) => j.pid != me && alive(j.pid, j.start_time),
            Err(_) => false,
        }
    })
}

/// Undoes what a journal describes: knobs back (newest first), tracing
/// off, instance removed, tracefs unmounted if it mounted it and no live
/// punctual still uses it.
fn replay(dir: &Path, j: &Journal, rep: &mut CleanupReport) {
    for (path, old) in j.knobs.iter().rev() {
        match read_file(path) {
            Ok(now) if knob_value(&now) == knob_value(old) => {}
            Ok(_) => match fs::write(path, restore_text(path, old).as_bytes()) {
                Ok(()) => {
                    rep.actions
                        .push(format!("restored {} to '{}'", path.display(), old.trim()))
                }
                Err(e) => rep
                    .problems
                    .push(format!("cannot restore {}: {e}", path.display())),
            },
            // The file went away with its instance: nothing to restore.
            Err(_) => {}
        }
    }
    if let Some(inst) = &j.instance {
        if inst.exists() {
            let _ = fs::write(inst.join("tracing_on"), "0");
            match fs::remove_dir(inst) {
                Ok(()) => rep
                    .actions
                    .push(format!("removed tracing instance {}", inst.display())),
                Err(e) => rep
                    .problems
                    .push(format!("cannot remove {}: {e}", inst.display())),
            }
        }
    }
    if j.mounted_by_us && !other_live_journals(dir, j.pid) && find_mount().is_some() {
        match umount(&j.tracefs) {
            Ok(()) => rep
                .actions
                .push(format!("unmounted tracefs at {}", j.tracefs.display())),
            Err(e) => rep.problems.push(format!(
                "left tracefs mounted at {} ({e})",
                j.tracefs.display()
            )),
        }
    }
}

/// The comparable part of a knob's text: `trace_clock` reads
/// `[local] global mono`, and writing back `local` restores it. A ring
/// buffer that has not been used yet reads `7 (expanded: 1408)` in
/// `buffer_size_kb` (6.1 and older kernels, PREEMPT_RT among them); the
/// kernel refuses that text (EINVAL), and the size it stands for is the
/// expanded one, so that is what is saved and written back.
pub fn knob_value(text: &str) -> String {
    let t = text.trim();
    if let Some((_, rest)) = t.split_once("(expanded:") {
        if let Some(kb) = rest.trim().strip_suffix(')') {
            return kb.trim().to_string();
        }
    }
    if let (Some(a), Some(b)) = (t.find('['), t.find(']')) {
        if a < b {
            return t[a + 1..b].to_string();
        }
    }
    t.to_string()
}

/// What to write to put a knob back to the value read from it. An event
/// filter reads "none" when unset but is cleared by writing "0" (the kernel
/// refuses "none" as a filter expression).
fn restore_text<'a>(path: &Path, old: &'a str) -> &'a str {
    if path.file_name().is_some_and(|n| n == "filter") && old.trim() == "none" {
        "0"
    } else {
        old
    }
}

/// Replays the journals of punctual processes that died without cleaning
/// up (SIGKILL, power loss of the process, a crash in a signal handler),
/// and removes `punctual-<pid>` instances whose owner is gone.
pub fn cleanup_stale(dir: &Path) -> CleanupReport {
    let mut rep = CleanupReport::default();
    if let Ok(rd) = fs::read_dir(dir) {
        for e in rd.flatten() {
            let p = e.path();
            let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
            // A temporary file of a journal write that SIGKILL interrupted.
            if let Some(rest) = name.strip_prefix(".trace-journal-") {
                let pid = rest.rsplit('.').next().and_then(|p| p.parse::<u32>().ok());
                if pid.is_some_and(|p| proc_start_time(p).is_none()) {
                    let _ = fs::remove_file(&p);
                }
                continue;
            }
            if !name.starts_with("trace-journal-") || !name.ends_with(".json") {
                continue;
            }
            let j = match fs::read_to_string(&p)
                .ok()
                .and_then(|t| serde_json::from_str::<Journal>(&t).ok())
            {
                Some(j) => j,
                None => {
                    rep.problems.push(format!(
                        "{} is not a punctual journal; left alone",
                        p.display()
                    ));
                    continue;
                }
            };
            if alive(j.pid, j.start_time) {
                continue;
            }
            replay(dir, &j, &mut rep);
            if fs::remove_file(&p).is_ok() {
                rep.actions.push(format!("removed journal {}", p.display()));
            }
        }
    }
    let _ = fs::remove_dir(dir);
    if let Some(root) = find_mount() {
        if let Ok(rd) = fs::read_dir(root.join("instances")) {
            for e in rd.flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                let Some(pid) = name
                    .strip_prefix(INSTANCE_PREFIX)
                    .and_then(|p| p.parse::<u32>().ok())
                else {
                    continue;
                };
                if proc_start_time(pid).is_none() {
                    let _ = fs::write(e.path().join("tracing_on"), "0");
                    match fs::remove_dir(e.path()) {
                        Ok(()) => rep.actions.push(format!(
                            "removed orphaned tracing instance {}",
                            e.path().display()
                        )),
                        Err(err) => rep
                            .problems
                            .push(format!("cannot remove {}: {err}", e.path().display())),
                    }
                }
            }
        }
    }
    rep
}

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
    journal_dir: PathBuf,
    journal: Journal,
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
        let mut journal = Journal {
            pid,
            start_time: proc_start_time(pid).unwrap_or(0),
            tracefs: PathBuf::from(TRACEFS),
            ..Default::default()
        };
        let write = |j: &Journal| {
            write_journal(journal_dir, j).map_err(|e| {
                NoTracing(format!(
                    "cannot write the restore journal in {}: {e}",
                    journal_dir.display()
                ))
            })
        };
        let root = match find_mount() {
            Some(r) => r,
            None => {
                // Journal first: a kill right after the mount must still
                // unmount it.
                journal.mounted_by_us = true;
                write(&journal)?;
                if let Err(e) = mount_tracefs() {
                    let _ = fs::remove_file(journal_path(journal_dir, pid));
                    return Err(NoTracing(format!(
                        "tracefs is not mounted and mounting it at {TRACEFS} failed: {e}"
                    )));
                }
                PathBuf::from(TRACEFS)
            }
        };
        journal.tracefs = root.clone();
        let path = root
            .join("instances")
            .join(format!("{INSTANCE_PREFIX}{pid}"));
        journal.instance = Some(path.clone());
        write(&journal)?;
        let mut inst = Instance {
            root,
            path: path.clone(),
            journal_dir: journal_dir.to_path_buf(),
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
                inst.journal.knobs.push((top, knob_value(&t)));
                write(&inst.journal)?;
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
            inst.journal.instance = None;
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
        if !self.journal.knobs.iter().any(|(k, _)| k == p) {
            let old = read_file(p)?;
            let old = knob_value(&old);
            if old == value {
                return Ok(());
            }
            self.journal.knobs.push((p.to_path_buf(), old));
            if !p.starts_with(&self.path) {
                write_journal(&self.journal_dir, &self.journal)?;
            }
        }
        fs::write(p, value)
    }

    /// Puts one saved knob back now and forgets it (the journal too).
    fn restore_knob(&mut self, p: &Path) -> io::Result<()> {
        let Some(i) = self.journal.knobs.iter().position(|(k, _)| k == p) else {
            return Ok(());
        };
        let (_, old) = self.journal.knobs[i].clone();
        fs::write(p, restore_text(p, &old).as_bytes())?;
        self.journal.knobs.remove(i);
        if !p.starts_with(&self.path) {
            write_journal(&self.journal_dir, &self.journal)?;
        }
        Ok(())
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
        let mut rep = CleanupReport::default();
        replay(&self.journal_dir, &self.journal, &mut rep);
        if rep.problems.is_empty() {
            let _ = fs::remove_file(journal_path(&self.journal_dir, self.journal.pid));
            // Only succeeds when empty: another run's journal keeps it.
            let _ = fs::remove_dir(&self.journal_dir);
            Ok(())
        } else {
            // Keep the journal so `punctual cause --cleanup` can retry.
            Err(rep.problems.join("; "))
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

    #[test]
    fn an_unexpanded_buffer_size_is_saved_as_its_expanded_size() {
        assert_eq!(knob_value("7 (expanded: 1408)\n"), "1408");
        assert_eq!(knob_value("2048\n"), "2048");
    }

    #[test]
    fn knob_values_compare_by_selection() {
        assert_eq!(knob_value("[local] global mono\n"), "local");
        assert_eq!(knob_value("1408\n"), "1408");
    }

    #[test]
    fn an_unset_filter_is_restored_by_clearing_it() {
        let f = Path::new("/t/instances/x/events/exceptions/page_fault_user/filter");
        assert_eq!(restore_text(f, "none\n"), "0");
        assert_eq!(restore_text(f, "comm ~ \"a*\""), "comm ~ \"a*\"");
        assert_eq!(restore_text(Path::new("/t/tracing_on"), "none"), "none");
    }

    #[test]
    fn replays_a_dead_runs_journal() {
        let dir = tempfile::tempdir().unwrap();
        let knob = dir.path().join("knob");
        fs::write(&knob, "changed").unwrap();
        // pid 0 never names a live process.
        let j = Journal {
            pid: 0,
            start_time: 1,
            tracefs: dir.path().join("nowhere"),
            mounted_by_us: false,
            instance: None,
            knobs: vec![(knob.clone(), "orig".into())],
        };
        write_journal(dir.path(), &j).unwrap();
        let rep = cleanup_stale(dir.path());
        assert_eq!(fs::read_to_string(&knob).unwrap(), "orig");
        assert!(
            rep.actions.iter().any(|a| a.contains("restored")),
            "{rep:?}"
        );
        assert!(!journal_path(dir.path(), 0).exists());
    }

    #[test]
    fn leaves_a_live_runs_journal_alone() {
        let dir = tempfile::tempdir().unwrap();
        let knob = dir.path().join("knob");
        fs::write(&knob, "changed").unwrap();
        let me = std::process::id();
        let j = Journal {
            pid: me,
            start_time: proc_start_time(me).unwrap(),
            knobs: vec![(knob.clone(), "orig".into())],
            ..Default::default()
        };
        write_journal(dir.path(), &j).unwrap();
        cleanup_stale(dir.path());
        assert_eq!(fs::read_to_string(&knob).unwrap(), "changed");
        assert!(journal_path(dir.path(), me).exists());
    }

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
        let j = journal_path(dir.path(), std::process::id());
        let text = fs::read_to_string(&j).unwrap();
        assert!(
            text.contains(&format!("punctual-{}", std::process::id())),
            "{text}"
        );
        drop(inst);
        assert!(!p.exists());
        assert!(!journal_path(dir.path(), std::process::id()).exists());
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
        let j = fs::read_to_string(journal_path(dir.path(), std::process::id())).unwrap();
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
            mount_tracefs().unwrap();
            let r = fs::read_to_string(Path::new(TRACEFS).join("options/record-cmd"));
            umount(Path::new(TRACEFS)).unwrap();
            r
        };
        assert_eq!(after.unwrap(), before);
        // Only when the option is on would the comm be recorded at all.
        if before.trim() == "1" && !others {
            assert!(!saved.contains(&name), "{name} was recorded");
        }
    }
}
