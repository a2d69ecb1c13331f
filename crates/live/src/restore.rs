//! The restore journal: every system setting a run changes is written here
//! *before* it is changed, so that whatever ends the run — a return, an
//! error, Ctrl-C, SIGTERM, a panic, or SIGKILL — the machine can be put
//! back.
//!
//! One format serves every verb: a [`Journal`] names its owner (pid and
//! start time, so a recycled pid is not mistaken for the owner) and lists
//! its [`Action`]s in the order they were made; undoing walks them newest
//! first. Journals live in [`run_dir`] (`/run/punctual`: tmpfs, so a reboot,
//! which undoes every change they describe, forgets them too) and are
//! written atomically. Normal exits undo through `Drop`; after SIGKILL,
//! [`cleanup_stale`] — run by `punctual cause --cleanup`, `punctual reserve
//! --cleanup`, the loads worker and every verb at start — finds the journals
//! of dead owners and undoes them.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

use serde::{Deserialize, Serialize};

/// Where journals live unless [`RUN_DIR_ENV`] says otherwise.
pub const DEFAULT_DIR: &str = "/run/punctual";
/// Names another journal directory (tests use a private one, so that what
/// they leave or replay cannot meet the machine's real runs).
pub const RUN_DIR_ENV: &str = "PUNCTUAL_RUN_DIR";
/// Where tracefs lives on current kernels.
pub const TRACEFS: &str = "/sys/kernel/tracing";
/// Private tracing instances are `instances/punctual-<pid>`.
pub const INSTANCE_PREFIX: &str = "punctual-";

/// The journal directory: `$PUNCTUAL_RUN_DIR` when set and not empty, else
/// [`DEFAULT_DIR`].
pub fn run_dir() -> PathBuf {
    match std::env::var_os(RUN_DIR_ENV) {
        Some(d) if !d.is_empty() => PathBuf::from(d),
        _ => PathBuf::from(DEFAULT_DIR),
    }
}

/// One change to undo.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Action {
    /// A kernel knob we wrote; undone by writing `restore` back, unless it
    /// already reads so or the file is gone (with its tracing instance).
    Knob { path: PathBuf, restore: String },
    /// A cgroup we created: its tasks leave SCHED_DEADLINE, go back to the
    /// parent, and the directory is removed.
    Cgroup { path: PathBuf, v2: bool },
    /// A filesystem we mounted. A `shared` one (tracefs, which every
    /// tracing run uses) stays while another live journal still uses it,
    /// and its mount point belongs to sysfs; any other is detached and its
    /// mount point, made for the run, removed.
    Mount {
        target: PathBuf,
        #[serde(default)]
        shared: bool,
    },
    /// An interrupt routed elsewhere; `affinity_list` is what
    /// `/proc/irq/<irq>/smp_affinity_list` read before.
    IrqAffinity { irq: u32, affinity_list: String },
    /// A private tracing instance: tracing is switched off and the
    /// directory removed.
    TraceInstance { path: PathBuf },
    /// A thread's CPU affinity we changed; `cpus` is the list
    /// `sched_getaffinity` gave before. `start_time` (field 22 of
    /// /proc/<tid>/stat) tells a recycled tid from the thread: a thread
    /// that is gone has nothing to restore.
    ThreadAffinity {
        tid: i32,
        start_time: u64,
        cpus: String,
    },
    /// A thread's scheduling policy we changed: what `sched_getattr` gave
    /// before (the kernel's policy number, its priority and nice, and the
    /// deadline parameters of a SCHED_DEADLINE thread).
    ThreadSched {
        tid: i32,
        start_time: u64,
        policy: u32,
        priority: u32,
        nice: i32,
        #[serde(default)]
        runtime_ns: u64,
        #[serde(default)]
        deadline_ns: u64,
        #[serde(default)]
        period_ns: u64,
    },
}

/// What a journal file holds.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(from = "OnDisk")]
pub struct Journal {
    pub pid: u32,
    /// Field 22 of /proc/<pid>/stat (clock ticks since boot), so a recycled
    /// pid is not mistaken for the still-running owner; 0 when unknown.
    pub start_time: u64,
    /// In the order made; undone newest first.
    pub actions: Vec<Action>,
}

/// The journal formats older builds wrote (a tracefs journal with
/// `tracefs`/`mounted_by_us`/`instance`/`knobs`, a reserve journal with
/// `start_ticks`, an interrupt journal with `irqs`) still name changes
/// that must be undone: they are read into the one list of actions.
#[derive(Deserialize)]
struct OnDisk {
    pid: u32,
    #[serde(default, alias = "start_ticks")]
    start_time: u64,
    #[serde(default)]
    actions: Vec<Action>,
    #[serde(default)]
    tracefs: Option<PathBuf>,
    #[serde(default)]
    mounted_by_us: bool,
    #[serde(default)]
    instance: Option<PathBuf>,
    #[serde(default)]
    knobs: Vec<(PathBuf, String)>,
    #[serde(default)]
    irqs: Vec<OldIrq>,
}

#[derive(Deserialize)]
struct OldIrq {
    irq: u32,
    affinity_list: String,
}

impl From<OnDisk> for Journal {
    fn from(d: OnDisk) -> Journal {
        let mut actions = Vec::new();
        if d.mounted_by_us {
            if let Some(t) = &d.tracefs {
                actions.push(Action::Mount {
                    target: t.clone(),
                    shared: true,
                });
            }
        }
        if let Some(path) = d.instance {
            actions.push(Action::TraceInstance { path });
        }
        actions.extend(
            d.knobs
                .into_iter()
                .map(|(path, restore)| Action::Knob { path, restore }),
        );
        actions.extend(d.irqs.into_iter().map(|s| Action::IrqAffinity {
            irq: s.irq,
            affinity_list: s.affinity_list,
        }));
        actions.extend(d.actions);
        Journal {
            pid: d.pid,
            start_time: d.start_time,
            actions,
        }
    }
}

impl Journal {
    /// Whether the owner still runs: its pid exists with the recorded start
    /// time (any start time when it was not known).
    pub fn owner_alive(&self) -> bool {
        match crate::sysinfo::proc_start_time(self.pid) {
            Some(t) => self.start_time == 0 || t == self.start_time,
            None => false,
        }
    }
}

/// The live journal of this process, on disk as one file. Undoes
/// everything when dropped.
#[derive(Debug)]
pub struct Restore {
    path: PathBuf,
    dir: PathBuf,
    journal: Journal,
    done: bool,
}

static SEQ: AtomicU32 = AtomicU32::new(0);

/// This process's journal writes and a second Ctrl-C's undo take turns.
/// Without it, a run tearing down after the first Ctrl-C rewrote its
/// journal after the second had undone and removed it (a journal left for
/// a change already put back), or both undid the same change at once.
static JOURNAL_TURN: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn journal_turn() -> std::sync::MutexGuard<'static, ()> {
    JOURNAL_TURN.lock().unwrap_or_else(|e| e.into_inner())
}

impl Restore {
    /// Opens a fresh journal for this process in `dir` (created if needed),
    /// as `journal-<pid>-<n>.json`.
    pub fn create(dir: &Path) -> io::Result<Restore> {
        let n = SEQ.fetch_add(1, Ordering::Relaxed);
        Self::create_named(dir, &format!("journal-{}-{n}", std::process::id()))
    }

    /// Opens a fresh journal for this process as `dir/<stem>.json`: the
    /// names `trace-journal-<pid>`, `reserve-<pid>` and
    /// `irq-restore-<pid>-<n>` say which kind of run left a file.
    pub fn create_named(dir: &Path, stem: &str) -> io::Result<Restore> {
        fs::create_dir_all(dir)?;
        let pid = std::process::id();
        let r = Restore {
            path: dir.join(format!("{stem}.json")),
            dir: dir.to_path_buf(),
            journal: Journal {
                pid,
                start_time: crate::sysinfo::proc_start_time(pid).unwrap_or(0),
                actions: Vec::new(),
            },
            done: false,
        };
        r.flush()?;
        Ok(r)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn actions(&self) -> &[Action] {
        &self.journal.actions
    }

    /// Writes the journal file (atomically: a kill mid-write leaves the
    /// previous version).
    pub fn flush(&self) -> io::Result<()> {
        let _turn = journal_turn();
        self.write_file()
    }

    /// [`Restore::flush`] for a caller that already has the journal's turn.
    fn write_file(&self) -> io::Result<()> {
        let text = serde_json::to_vec_pretty(&self.journal).map_err(io::Error::other)?;
        punctual_record::write_atomic(&self.path, &text)
    }

    /// Records a change about to be made. Must be called (and succeed)
    /// before the change, or a SIGKILL between the two leaves it unknown.
    pub fn record(&mut self, a: Action) -> io::Result<()> {
        self.journal.actions.push(a);
        self.flush()
    }

    /// Records a change in memory only. For changes that cannot outlive the
    /// process's other journaled changes (the knobs of its own tracing
    /// instance, discarded with the instance), so each write does not cost
    /// a journal write.
    pub fn note(&mut self, a: Action) {
        self.journal.actions.push(a);
    }

    /// Forgets the actions `drop_it` selects (they were undone by hand, or
    /// never made), and rewrites the journal.
    pub fn forget(&mut self, drop_it: impl Fn(&Action) -> bool) -> io::Result<()> {
        self.journal.actions.retain(|a| !drop_it(a));
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
    /// down (reserve's `kernel::repair_negative_totals`), through the
    /// debugfs a run may have mounted for itself.
    ///
    /// [`undo_all`]: Restore::undo_all
    pub fn undo_all_but_mounts(&mut self) -> Vec<String> {
        let _turn = journal_turn();
        let mut errors = Vec::new();
        let mut mounts = Vec::new();
        while let Some(a) = self.journal.actions.pop() {
            if matches!(a, Action::Mount { .. }) {
                mounts.push(a);
                continue;
            }
            if let Err(e) = undo(&a, &self.dir, self.journal.pid) {
                errors.push(e);
            }
        }
        mounts.reverse();
        self.journal.actions = mounts;
        let _ = self.write_file();
        errors
    }

    /// Undoes the changes made after the first `kept` ones, newest first,
    /// and rewrites the journal: the roll-back of a step that failed half
    /// way, leaving what was journaled before it in place. Returns what
    /// could not be undone.
    pub fn undo_newer_than(&mut self, kept: usize) -> Vec<String> {
        let _turn = journal_turn();
        let mut errors = Vec::new();
        while self.journal.actions.len() > kept {
            let Some(a) = self.journal.actions.pop() else {
                break;
            };
            if let Err(e) = undo(&a, &self.dir, self.journal.pid) {
                errors.push(e);
            }
        }
        let _ = self.write_file();
        errors
    }

    /// Undoes every change, newest first; returns what could not be undone.
    /// The journal file goes when everything was; otherwise it stays, for
    /// a later `--cleanup` to retry.
    pub fn undo_all(&mut self) -> Vec<String> {
        let mut errors = Vec::new();
        loop {
            // One change and its journal write per turn, so a second
            // Ctrl-C reads a journal that holds just what is still to undo.
            let _turn = journal_turn();
            let Some(a) = self.journal.actions.pop() else {
                break;
            };
            if let Err(e) = undo(&a, &self.dir, self.journal.pid) {
                errors.push(e);
            }
            let _ = self.write_file();
        }
        if errors.is_empty() {
            let _turn = journal_turn();
            let _ = fs::remove_file(&self.path);
        }
        self.done = true;
        errors
    }

    /// Marks the journal handled: `Drop` will not undo it again.
    pub fn set_done(&mut self) {
        self.done = true;
    }
}

impl Drop for Restore {
    fn drop(&mut self) {
        if !self.done {
            for e in self.undo_all() {
                eprintln!("punctual: could not restore: {e}");
            }
        }
    }
}

/// Undoes one action. `Ok(Some(sentence))` says what was put back,
/// `Ok(None)` that nothing needed it, `Err` what could not be.
fn undo(a: &Action, dir: &Path, owner: u32) -> Result<Option<String>, String> {
    match a {
        Action::Knob { path, restore } => {
            match read_file(path) {
                Ok(now) if knob_value(&now) == knob_value(restore) => return Ok(None),
                // The file went away with its instance: nothing to restore.
                Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
                _ => {}
            }
            fs::write(path, restore_text(path, restore).as_bytes())
                .map(|()| {
                    Some(format!(
                        "restored {} to '{}'",
                        path.display(),
                        restore.trim()
                    ))
                })
                .map_err(|e| format!("cannot restore {}: {e}", path.display()))
        }
        Action::Cgroup { path, v2 } => {
            if !path.exists() {
                return Ok(None);
            }
            remove_cgroup(path, *v2).map(|()| Some(format!("removed cpuset {}", path.display())))
        }
        Action::Mount {
            target,
            shared: true,
        } => {
            if find_mount().is_none() || shared_mount_in_use(dir, owner, target) {
                return Ok(None);
            }
            // Busy means files of it are still open: this process's own
            // readers when a second Ctrl-C exits at once, or a tracer
            // started during the run. The mount was this run's, so it is
            // detached from the tree now, as the machine had it, and the
            // kernel frees it once those files close (at this exit).
            let detached = match umount(target, 0) {
                Err(e) if e.raw_os_error() == Some(libc::EBUSY) => {
                    umount(target, libc::MNT_DETACH).map(|()| true)
                }
                r => r.map(|()| false),
            };
            detached
                .map(|d| {
                    Some(if d {
                        format!(
                            "detached tracefs from {} (its open files close with them)",
                            target.display()
                        )
                    } else {
                        format!("unmounted tracefs at {}", target.display())
                    })
                })
                .map_err(|e| format!("left tracefs mounted at {} ({e})", target.display()))
        }
        Action::Mount {
            target,
            shared: false,
        } => match umount(target, libc::MNT_DETACH) {
            Ok(()) => {
                // The mount point was made for the run: remove it too.
                let _ = fs::remove_dir(target);
                Ok(Some(format!("unmounted {}", target.display())))
            }
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
                let _ = fs::remove_dir(target);
                Ok(None)
            }
            Err(e) => Err(format!("umount {}: {e}", target.display())),
        },
        Action::IrqAffinity { irq, affinity_list } => {
            // An interrupt that no longer exists (device gone) has nothing
            // to restore.
            if !Path::new(&format!("/proc/irq/{irq}")).exists() {
                return Ok(None);
            }
            fs::write(
                format!("/proc/irq/{irq}/smp_affinity_list"),
                format!("{affinity_list}\n"),
            )
            .map(|()| Some(format!("restored IRQ {irq} affinity to {affinity_list}")))
            .map_err(|e| format!("could not restore IRQ {irq} affinity to {affinity_list}: {e}"))
        }
        Action::TraceInstance { path } => {
            if !path.exists() {
                return Ok(None);
            }
            stop_tracing(path);
            // A reader still inside a read of one of the instance's files
            // keeps it busy until that read returns (a second Ctrl-C lands
            // while the recorder drains its rings): give it half a second.
            let mut tries = 0;
            loop {
                match fs::remove_dir(path) {
                    Ok(()) => {
                        return Ok(Some(format!("removed tracing instance {}", path.display())))
                    }
                    Err(e) if e.raw_os_error() == Some(libc::EBUSY) && tries < 50 => {
                        tries += 1;
                        std::thread::sleep(std::time::Duration::from_millis(10));
                    }
                    Err(e) => return Err(format!("cannot remove {}: {e}", path.display())),
                }
            }
        }
        Action::ThreadAffinity {
            tid,
            start_time,
            cpus,
        } => {
            if !same_thread(*tid, *start_time) {
                return Ok(None);
            }
            let list = crate::sysinfo::parse_cpu_list(cpus).map_err(|e| {
                format!("thread {tid}'s saved affinity '{cpus}' is not a CPU list ({e})")
            })?;
            if crate::rt::thread_affinity(*tid).is_ok_and(|now| now == list) {
                return Ok(None);
            }
            match crate::rt::set_thread_affinity(*tid, &list) {
                Ok(()) => Ok(Some(format!(
                    "restored thread {tid}'s CPU affinity to {cpus}"
                ))),
                // It exited between the check and the write.
                Err(e) if e.raw_os_error() == Some(libc::ESRCH) => Ok(None),
                Err(e) => Err(format!(
                    "could not restore thread {tid}'s CPU affinity to {cpus}: {e}"
                )),
            }
        }
        Action::ThreadSched {
            tid,
            start_time,
            policy,
            priority,
            nice,
            runtime_ns,
            deadline_ns,
            period_ns,
        } => {
            if !same_thread(*tid, *start_time) {
                return Ok(None);
            }
            let old = crate::rt::SchedAttr {
                size: std::mem::size_of::<crate::rt::SchedAttr>() as u32,
                sched_policy: *policy,
                sched_nice: *nice,
                sched_priority: *priority,
                sched_runtime: *runtime_ns,
                sched_deadline: *deadline_ns,
                sched_period: *period_ns,
                ..Default::default()
            };
            if let Ok(now) = crate::rt::sched_getattr(*tid) {
                if now.sched_policy == old.sched_policy
                    && now.sched_priority == old.sched_priority
                    && now.sched_nice == old.sched_nice
                {
                    return Ok(None);
                }
            }
            match crate::rt::sched_setattr(*tid, &old) {
                Ok(()) => Ok(Some(format!(
                    "restored thread {tid}'s scheduling policy {policy} priority {priority}"
                ))),
                Err(e) if e.raw_os_error() == Some(libc::ESRCH) => Ok(None),
                Err(e) => Err(format!(
                    "could not restore thread {tid}'s scheduling policy {policy} priority {priority}: {e}"
                )),
            }
        }
    }
}

/// Whether `tid` still names the thread that started at `start_time`
/// (any thread of that id when the start time was not known).
fn same_thread(tid: i32, start_time: u64) -> bool {
    match u32::try_from(tid)
        .ok()
        .and_then(crate::sysinfo::proc_start_time)
    {
        Some(t) => start_time == 0 || t == start_time,
        None => false,
    }
}

/// Switches an instance's tracing off before it is removed (the write
/// opens the existing file only: an instance always has one).
fn stop_tracing(instance: &Path) {
    use std::io::Write;
    if let Ok(mut f) = fs::OpenOptions::new()
        .write(true)
        .open(instance.join("tracing_on"))
    {
        let _ = f.write_all(b"0");
    }
}

/// Whether a live run other than `owner` journals a tracing instance under
/// `target` or its own mount of it.
fn shared_mount_in_use(dir: &Path, owner: u32, target: &Path) -> bool {
    read_journals(dir).into_iter().any(|(_, j)| match j {
        Ok(j) if j.pid != owner && j.owner_alive() => j.actions.iter().any(|a| match a {
            Action::TraceInstance { path } => path.starts_with(target),
            Action::Mount { target: t, .. } => t == target,
            _ => false,
        }),
        _ => false,
    })
}

/// The `*.json` files of `dir`, read as journals (or why not).
fn read_journals(dir: &Path) -> Vec<(PathBuf, Result<Journal, String>)> {
    let Ok(rd) = fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out: Vec<_> = rd
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            let name = p
                .file_name()
                .map(|n| n.to_string_lossy())
                .unwrap_or_default();
            !name.starts_with('.') && name.ends_with(".json")
        })
        .map(|p| {
            let j = fs::read_to_string(&p)
                .map_err(|e| e.to_string())
                .and_then(|t| serde_json::from_str::<Journal>(&t).map_err(|e| e.to_string()));
            (p, j)
        })
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

/// The journals of live runs in `dir` other than this process.
pub fn live_journals(dir: &Path) -> Vec<Journal> {
    let me = std::process::id();
    read_journals(dir)
        .into_iter()
        .filter_map(|(_, j)| j.ok())
        .filter(|j| j.pid != me && j.owner_alive())
        .collect()
}

/// What [`cleanup_stale`] found and did.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct CleanupReport {
    /// Journals of dead runs whose changes were all undone (and which were
    /// deleted).
    pub cleaned: Vec<PathBuf>,
    /// What was put back, one sentence per change.
    pub undone: Vec<String>,
    /// Owners of journals still running, left alone.
    pub live: Vec<u32>,
    /// What could not be put back; those journals stay for a retry.
    pub problems: Vec<String>,
}

impl CleanupReport {
    pub fn is_empty(&self) -> bool {
        self.cleaned.is_empty() && self.undone.is_empty() && self.problems.is_empty()
    }
}

/// Undoes this process's own journals in `dir`, newest change first: what
/// a second Ctrl-C does before it exits, without waiting for the run's
/// guards. Journals fully undone are removed; the others stay for the
/// next run.
///
/// It keeps the journals' turn for good: no thread of this process writes
/// a journal after it, so the caller must exit next.
pub fn undo_own(dir: &Path) -> CleanupReport {
    std::mem::forget(journal_turn());
    let mut rep = CleanupReport::default();
    let me = std::process::id();
    for (p, j) in read_journals(dir) {
        let Ok(j) = j else { continue };
        if j.pid != me {
            continue;
        }
        undo_journal(p, &j, dir, &mut rep);
    }
    rep
}

/// Undoes one journal's changes, newest first, into `rep`; the file is
/// removed only when every change was put back, so a failure is retried.
fn undo_journal(p: PathBuf, j: &Journal, dir: &Path, rep: &mut CleanupReport) {
    let mut errs = Vec::new();
    for a in j.actions.iter().rev() {
        match undo(a, dir, j.pid) {
            Ok(Some(said)) => rep.undone.push(said),
            Ok(None) => {}
            Err(e) => errs.push(e),
        }
    }
    if errs.is_empty() {
        let _ = fs::remove_file(&p);
        rep.cleaned.push(p);
    } else {
        rep.problems.extend(errs);
    }
}

/// Undoes the journals in `dir` of runs that died without cleaning up
/// (SIGKILL, a crash in a signal handler, OOM), newest change first, and
/// removes `punctual-<pid>` tracing instances whose owner is gone.
pub fn cleanup_stale(dir: &Path) -> CleanupReport {
    let mut rep = CleanupReport::default();
    let me = std::process::id();
    if let Ok(rd) = fs::read_dir(dir) {
        for e in rd.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            // A temporary file of a journal write that SIGKILL interrupted
            // (`.<name>.tmp.<pid>`).
            if name.starts_with('.') && name.contains(".json.tmp.") {
                let pid = name.rsplit('.').next().and_then(|p| p.parse::<u32>().ok());
                if pid.is_some_and(|p| crate::sysinfo::proc_start_time(p).is_none()) {
                    let _ = fs::remove_file(e.path());
                }
            }
        }
    }
    for (p, j) in read_journals(dir) {
        let j = match j {
            Ok(j) => j,
            Err(e) => {
                rep.problems.push(format!(
                    "{} is not a punctual journal ({e}); left alone",
                    p.display()
                ));
                continue;
            }
        };
        if j.pid == me {
            continue;
        }
        if j.owner_alive() {
            rep.live.push(j.pid);
            continue;
        }
        undo_journal(p, &j, dir, &mut rep);
    }
    remove_orphaned_instances(&mut rep);
    rep
}

/// Tracing instances `punctual-<pid>` whose owner is gone and whose
/// journal was lost.
fn remove_orphaned_instances(rep: &mut CleanupReport) {
    let Some(root) = find_mount() else {
        return;
    };
    let Ok(rd) = fs::read_dir(root.join("instances")) else {
        return;
    };
    for e in rd.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(pid) = name
            .strip_prefix(INSTANCE_PREFIX)
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        if crate::sysinfo::proc_start_time(pid).is_none() {
            stop_tracing(&e.path());
            match fs::remove_dir(e.path()) {
                Ok(()) => rep.undone.push(format!(
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

/// The comparable part of a knob's text: `trace_clock` reads
/// `[local] global mono`, and writing back `local` restores it.
pub fn knob_value(text: &str) -> String {
    let t = text.trim();
    // A ring buffer that has not been used yet reads `7 (expanded: 1408)`
    // in `buffer_size_kb` (6.1 and older kernels, PREEMPT_RT among them);
    // the kernel refuses that text (EINVAL), and the size it stands for is
    // the expanded one, so that is what is saved and written back.
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
pub fn restore_text<'a>(path: &Path, old: &'a str) -> &'a str {
    if path.file_name().is_some_and(|n| n == "filter") && old.trim() == "none" {
        "0"
    } else {
        old
    }
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

/// Mounts tracefs at [`TRACEFS`].
pub fn mount_tracefs() -> io::Result<()> {
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

/// umount2(2).
pub fn umount(path: &Path, flags: libc::c_int) -> io::Result<()> {
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL in path"))?;
    // SAFETY: c is a valid NUL-terminated path.
    if unsafe { libc::umount2(c.as_ptr(), flags) } == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

fn threads_of(pid: i32) -> Vec<i32> {
    fs::read_dir(format!("/proc/{pid}/task"))
        .map(|d| {
            d.flatten()
                .filter_map(|e| e.file_name().to_string_lossy().parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

/// Returns a thread to SCHED_OTHER if it is still a deadline thread, so it
/// can leave the partition (the kernel refuses to move deadline bandwidth
/// between root domains that cannot take it).
fn demote(tid: i32) {
    if let Ok(a) = crate::rt::sched_getattr(tid) {
        if a.sched_policy == crate::rt::SCHED_DEADLINE {
            let other = crate::rt::SchedAttr {
                sched_policy: libc::SCHED_OTHER as u32,
                ..Default::default()
            };
            let _ = crate::rt::sched_setattr(tid, &other);
        }
    }
}

/// Empties and removes a cgroup made by a run: [`Action::Cgroup`]'s undo.
pub fn remove_cgroup(path: &Path, v2: bool) -> Result<(), String> {
    if !path.exists() {
        return Ok(());
    }
    let parent = path.parent().unwrap_or(Path::new("/"));
    let (member_file, parent_file) = if v2 {
        ("cgroup.procs", parent.join("cgroup.procs"))
    } else {
        ("tasks", parent.join("tasks"))
    };
    for attempt in 0..50 {
        let members: Vec<i32> = fs::read_to_string(path.join(member_file))
            .unwrap_or_default()
            .split_whitespace()
            .filter_map(|t| t.parse().ok())
            .collect();
        for m in &members {
            if v2 {
                for t in threads_of(*m) {
                    demote(t);
                }
            } else {
                demote(*m);
            }
            let _ = fs::write(&parent_file, m.to_string());
        }
        match fs::remove_dir(path) {
            Ok(()) => return Ok(()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            Err(e) => {
                if attempt == 49 {
                    return Err(format!("cannot remove {}: {e}", path.display()));
                }
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unexpanded_buffer_size_is_saved_as_its_expanded_size() {
        assert_eq!(knob_value("7 (expanded: 1408)\n"), "1408");
        assert_eq!(knob_value("2048\n"), "2048");
    }

    fn write_journal(dir: &Path, stem: &str, j: &Journal) {
        fs::create_dir_all(dir).unwrap();
        fs::write(
            dir.join(format!("{stem}.json")),
            serde_json::to_string(j).unwrap(),
        )
        .unwrap();
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
            actions: vec![Action::Knob {
                path: knob.clone(),
                restore: "orig".into(),
            }],
        };
        write_journal(dir.path(), "trace-journal-0", &j);
        let rep = cleanup_stale(dir.path());
        assert_eq!(fs::read_to_string(&knob).unwrap(), "orig");
        assert!(rep.undone.iter().any(|a| a.contains("restored")), "{rep:?}");
        assert!(!dir.path().join("trace-journal-0.json").exists());
    }

    #[test]
    fn leaves_a_live_runs_journal_alone() {
        let dir = tempfile::tempdir().unwrap();
        let knob = dir.path().join("knob");
        fs::write(&knob, "changed").unwrap();
        let mut r = Restore::create(dir.path()).unwrap();
        r.record(Action::Knob {
            path: knob.clone(),
            restore: "orig".into(),
        })
        .unwrap();
        // Seen from another process: the owner (this one) is alive.
        let j: Journal = serde_json::from_str(&fs::read_to_string(r.path()).unwrap()).unwrap();
        assert!(j.owner_alive());
        let mut other = j.clone();
        other.pid = 1;
        other.start_time = crate::sysinfo::proc_start_time(1).unwrap_or(0);
        write_journal(dir.path(), "journal-1-0", &other);
        let rep = cleanup_stale(dir.path());
        assert_eq!(fs::read_to_string(&knob).unwrap(), "changed");
        assert!(r.path().exists());
        assert_eq!(rep.live, vec![1]);
        r.set_done();
    }

    #[test]
    fn drop_restores_knobs_in_reverse_order() {
        let dir = tempfile::tempdir().unwrap();
        let knob = dir.path().join("knob");
        fs::write(&knob, "1").unwrap();
        {
            let mut j = Restore::create(&dir.path().join("j")).unwrap();
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
        let mut j = Restore::create(&dir.path().join("j")).unwrap();
        j.set_knob(&knob, "0", "1").unwrap();
        j.record(Action::Mount {
            target: mnt.clone(),
            shared: false,
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
        // A dead owner: no process has this pid.
        let dead = Journal {
            pid: u32::MAX - 1,
            start_time: 1,
            actions: vec![Action::Knob {
                path: knob.clone(),
                restore: "orig".into(),
            }],
        };
        write_journal(dir.path(), "reserve-4294967294", &dead);
        // A live owner: PID 1 with its real start time.
        let live = Journal {
            pid: 1,
            start_time: crate::sysinfo::proc_start_time(1).unwrap_or(0),
            actions: vec![Action::Knob {
                path: dir.path().join("other"),
                restore: "x".into(),
            }],
        };
        write_journal(dir.path(), "reserve-1", &live);
        let rep = cleanup_stale(dir.path());
        assert_eq!(fs::read_to_string(&knob).unwrap(), "orig");
        assert_eq!(rep.cleaned.len(), 1, "{rep:?}");
        assert_eq!(rep.live, vec![1]);
        assert!(!dir.path().join("other").exists());
        assert!(rep.undone[0].contains("orig"));
    }

    /// The formats older builds wrote are still undone.
    #[test]
    fn reads_the_older_journal_formats() {
        let trace = r#"{"pid":5,"start_time":9,"tracefs":"/t","mounted_by_us":true,
            "instance":"/t/instances/punctual-5","knobs":[["/t/k","0"]]}"#;
        let j: Journal = serde_json::from_str(trace).unwrap();
        assert_eq!(
            j.actions,
            vec![
                Action::Mount {
                    target: "/t".into(),
                    shared: true
                },
                Action::TraceInstance {
                    path: "/t/instances/punctual-5".into()
                },
                Action::Knob {
                    path: "/t/k".into(),
                    restore: "0".into()
                },
            ]
        );
        let reserve = r#"{"pid":5,"start_ticks":9,"actions":[{"kind":"mount","target":"/m"}]}"#;
        let j: Journal = serde_json::from_str(reserve).unwrap();
        assert_eq!(j.start_time, 9);
        assert_eq!(
            j.actions,
            vec![Action::Mount {
                target: "/m".into(),
                shared: false
            }]
        );
        let irq = r#"{"pid":5,"start_time":9,"irqs":[{"irq":36,"affinity_list":"0-1"}]}"#;
        let j: Journal = serde_json::from_str(irq).unwrap();
        assert_eq!(
            j.actions,
            vec![Action::IrqAffinity {
                irq: 36,
                affinity_list: "0-1".into()
            }]
        );
    }

    /// A dead run's journal puts a living thread's affinity back, and
    /// skips a thread that has ended or whose tid now names another.
    #[test]
    fn replays_a_thread_affinity_and_skips_a_recycled_tid() {
        let online = fs::read_to_string("/sys/devices/system/cpu/online")
            .ok()
            .and_then(|s| crate::sysinfo::parse_cpu_list(&s).ok())
            .unwrap_or_default();
        if online.len() < 2 {
            println!("skipped: needs two online CPUs");
            return;
        }
        let (tx, rx) = std::sync::mpsc::channel();
        let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
        let h = std::thread::spawn(move || {
            tx.send(crate::rt::gettid()).unwrap();
            let _ = done_rx.recv();
        });
        let tid = rx.recv().unwrap();
        let before = crate::rt::thread_affinity(tid).unwrap();
        crate::rt::set_thread_affinity(tid, &online[..1]).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let list = |v: &[u32]| {
            v.iter()
                .map(|c| c.to_string())
                .collect::<Vec<_>>()
                .join(",")
        };
        let j = Journal {
            pid: u32::MAX - 3,
            start_time: 1,
            actions: vec![
                Action::ThreadAffinity {
                    tid,
                    start_time: crate::sysinfo::proc_start_time(tid as u32).unwrap(),
                    cpus: list(&before),
                },
                // The same tid with another start time: not that thread.
                Action::ThreadAffinity {
                    tid,
                    start_time: 1,
                    cpus: list(&online[1..2]),
                },
                Action::ThreadSched {
                    tid: i32::MAX - 1,
                    start_time: 1,
                    policy: 0,
                    priority: 0,
                    nice: 0,
                    runtime_ns: 0,
                    deadline_ns: 0,
                    period_ns: 0,
                },
            ],
        };
        write_journal(dir.path(), "remedy-4294967292-0", &j);
        let rep = cleanup_stale(dir.path());
        assert!(rep.problems.is_empty(), "{rep:?}");
        assert_eq!(crate::rt::thread_affinity(tid).unwrap(), before);
        assert_eq!(
            rep.undone,
            vec![format!(
                "restored thread {tid}'s CPU affinity to {}",
                list(&before)
            )]
        );
        done_tx.send(()).unwrap();
        h.join().unwrap();
    }

    /// All five kinds in one dead run's journal come back newest first.
    /// Stand-ins on a plain filesystem: the cgroup's directory lies inside
    /// the mount point and the instance's inside the cgroup's, so each can
    /// only be removed once the one made after it is gone.
    #[test]
    fn replays_all_five_kinds_newest_first() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let mnt = d.join("mnt");
        let cg = mnt.join("punctual-rt-7");
        let inst = cg.join("punctual-7");
        fs::create_dir_all(&inst).unwrap();
        let knob = d.join("knob");
        fs::write(&knob, "changed").unwrap();
        let j = Journal {
            pid: u32::MAX - 2,
            start_time: 1,
            actions: vec![
                // Not a mount point: umount says EINVAL, and the made
                // directory is removed as after a real unmount.
                Action::Mount {
                    target: mnt.clone(),
                    shared: false,
                },
                Action::Cgroup {
                    path: cg.clone(),
                    v2: true,
                },
                Action::TraceInstance { path: inst.clone() },
                // An interrupt no machine has: nothing to restore.
                Action::IrqAffinity {
                    irq: 999_999,
                    affinity_list: "0".into(),
                },
                Action::Knob {
                    path: knob.clone(),
                    restore: "orig".into(),
                },
            ],
        };
        write_journal(d, "journal-4294967293-0", &j);
        let rep = cleanup_stale(d);
        assert!(rep.problems.is_empty(), "{rep:?}");
        assert_eq!(
            rep.undone,
            vec![
                format!("restored {} to 'orig'", knob.display()),
                format!("removed tracing instance {}", inst.display()),
                format!("removed cpuset {}", cg.display()),
            ]
        );
        assert_eq!(fs::read_to_string(&knob).unwrap(), "orig");
        assert!(!mnt.exists(), "the mount point outlived its contents");
        assert_eq!(rep.cleaned, vec![d.join("journal-4294967293-0.json")]);
        assert!(!rep.cleaned[0].exists());
    }
}
