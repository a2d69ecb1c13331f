//! An exclusive cpuset partition holding one CPU for the run.
//!
//! A SCHED_DEADLINE thread cannot be pinned with `sched_setaffinity`: the
//! kernel admits deadline bandwidth per *root domain* and refuses a task
//! whose affinity is narrower than its root domain (EPERM/EBUSY). The way
//! to run a deadline task on one CPU is to give that CPU its own root
//! domain: a cgroup v2 partition (`cpuset.cpus.partition=root`), or on a
//! cgroup v1 cpuset hierarchy an exclusive child cpuset with load balancing
//! turned off at the top. Both are journaled before they are made and taken
//! down on every exit path.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use crate::ReserveError;
use punctual_live::restore::{Action, Restore as Journal};
use punctual_live::sysinfo::parse_cpu_list;

/// Which cpuset interface this machine offers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CpusetFs {
    V1(PathBuf),
    V2(PathBuf),
}

/// Finds a usable cpuset controller: cgroup v2 with `cpuset` available at
/// its root, else a mounted v1 cpuset hierarchy.
pub fn find_cpuset_fs() -> Option<CpusetFs> {
    let mounts = fs::read_to_string("/proc/self/mounts").ok()?;
    parse_mounts(&mounts, |p| {
        fs::read_to_string(p.join("cgroup.controllers"))
            .map(|c| c.split_whitespace().any(|w| w == "cpuset"))
            .unwrap_or(false)
    })
}

fn parse_mounts(mounts: &str, v2_has_cpuset: impl Fn(&Path) -> bool) -> Option<CpusetFs> {
    let mut v1 = None;
    for line in mounts.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() < 4 {
            continue;
        }
        let target = PathBuf::from(f[1]);
        match f[2] {
            "cgroup2" if v2_has_cpuset(&target) => return Some(CpusetFs::V2(target)),
            "cgroup" if f[3].split(',').any(|o| o == "cpuset") && v1.is_none() => {
                v1 = Some(CpusetFs::V1(target))
            }
            _ => {}
        }
    }
    v1
}

fn list(cpus: &[u32]) -> String {
    cpus.iter()
        .map(|c| c.to_string())
        .collect::<Vec<_>>()
        .join(",")
}

/// A CPU given its own root domain for the run.
#[derive(Debug)]
pub struct Partition {
    pub cpu: u32,
    path: PathBuf,
    v2: bool,
}

fn io_err(what: &str, p: &Path, e: io::Error) -> ReserveError {
    if e.raw_os_error() == Some(libc::EACCES) || e.raw_os_error() == Some(libc::EPERM) {
        ReserveError::Refused(format!(
            "no write access to the cpuset controller ({}: {e}); --cpu needs root or write access to {}",
            p.display(),
            p.parent().unwrap_or(p).display()
        ))
    } else {
        ReserveError::Failed(format!("{what} {}: {e}", p.display()))
    }
}

fn write(p: &Path, v: &str) -> Result<(), ReserveError> {
    fs::write(p, v).map_err(|e| io_err("cannot write", p, e))
}

fn read(p: &Path) -> Result<String, ReserveError> {
    fs::read_to_string(p)
        .map(|s| s.trim().to_string())
        .map_err(|e| io_err("cannot read", p, e))
}

impl Partition {
    /// Creates the partition for `cpu`, journaling each step first.
    pub fn create(journal: &mut Journal, cpu: u32) -> Result<Partition, ReserveError> {
        let mut v = Partition::create_set(journal, &[cpu])?;
        Ok(v.remove(0))
    }

    /// One partition per CPU in `cpus` (each its own root domain), for
    /// reservations placed on several CPUs; journaled like [`create`].
    ///
    /// [`create`]: Partition::create
    pub fn create_set(journal: &mut Journal, cpus: &[u32]) -> Result<Vec<Partition>, ReserveError> {
        let fsys = find_cpuset_fs().ok_or_else(|| {
            ReserveError::Refused(
                "--cpu needs the cpuset cgroup controller, and neither cgroup v2 nor a v1 cpuset hierarchy offers it here".into(),
            )
        })?;
        create_in(journal, &fsys, cpus, std::process::id())
    }
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Moves a thread into the partition. On cgroup v2 threads of one
    /// process share a cgroup, so the whole process of `tid` moves.
    pub fn add_thread(&self, tid: i32) -> Result<(), ReserveError> {
        if self.v2 {
            let pid = tgid_of(tid).unwrap_or(tid);
            write(&self.path.join("cgroup.procs"), &pid.to_string())
        } else {
            write(&self.path.join("tasks"), &tid.to_string())
        }
    }

    /// The file a process writes "0" to in order to join the partition
    /// itself (a forked child, before exec).
    pub fn self_join_file(&self) -> PathBuf {
        self.path
            .join(if self.v2 { "cgroup.procs" } else { "tasks" })
    }

    /// Moves a whole process (and on v1 each of its threads) in.
    pub fn add_process(&self, pid: i32) -> Result<(), ReserveError> {
        if self.v2 {
            write(&self.path.join("cgroup.procs"), &pid.to_string())
        } else {
            for t in threads_of(pid) {
                self.add_thread(t)?;
            }
            Ok(())
        }
    }
}

fn journal_cgroup(journal: &mut Journal, path: &Path, v2: bool) -> Result<(), ReserveError> {
    journal
        .record(Action::Cgroup {
            path: path.to_path_buf(),
            v2,
        })
        .map_err(|e| io_err("cannot journal", journal.path(), e))
}

/// The partitions' cgroup directory names: `punctual-rt-PID` for one CPU,
/// `punctual-rt-PID-cpuN` for each of several.
fn rt_name(pid: u32, cpu: u32, several: bool) -> String {
    if several {
        format!("punctual-rt-{pid}-cpu{cpu}")
    } else {
        format!("punctual-rt-{pid}")
    }
}

/// Makes the partitions under `fsys` (a real hierarchy, or a fake one in
/// tests) for `cpus`, named after `pid`.
pub fn create_in(
    journal: &mut Journal,
    fsys: &CpusetFs,
    cpus: &[u32],
    pid: u32,
) -> Result<Vec<Partition>, ReserveError> {
    let several = cpus.len() > 1;
    let mut out = Vec::new();
    match fsys {
        CpusetFs::V1(root) => {
            let all = parse_cpu_list(&read(&root.join("cpuset.cpus"))?).unwrap_or_default();
            for &c in cpus {
                check_cpu(c, &all)?;
            }
            let mems = read(&root.join("cpuset.mems"))?;
            let rest: Vec<u32> = all.iter().copied().filter(|c| !cpus.contains(c)).collect();
            for &cpu in cpus {
                let rt = root.join(rt_name(pid, cpu, several));
                journal_cgroup(journal, &rt, false)?;
                fs::create_dir(&rt).map_err(|e| io_err("cannot create", &rt, e))?;
                write(&rt.join("cpuset.cpus"), &cpu.to_string())?;
                write(&rt.join("cpuset.mems"), &mems)?;
                if let Err(e) = fs::write(rt.join("cpuset.cpu_exclusive"), "1") {
                    return Err(ReserveError::Refused(format!(
                        "CPU {cpu} cannot be made exclusive ({e}): another cpuset under {} already claims it exclusively; remove that cpuset or pick another --cpu",
                        root.display()
                    )));
                }
                out.push(Partition {
                    cpu,
                    path: rt,
                    v2: false,
                });
            }
            // The other CPUs keep load balancing among themselves.
            if !rest.is_empty() {
                let other = root.join(format!("punctual-rest-{pid}"));
                journal_cgroup(journal, &other, false)?;
                fs::create_dir(&other).map_err(|e| io_err("cannot create", &other, e))?;
                write(&other.join("cpuset.cpus"), &list(&rest))?;
                write(&other.join("cpuset.mems"), &mems)?;
            }
            let lb = root.join("cpuset.sched_load_balance");
            let old = read(&lb)?;
            journal
                .set_knob(&lb, "0", &old)
                .map_err(|e| io_err("cannot write", &lb, e))?;
        }
        CpusetFs::V2(root) => {
            if several {
                // A v2 cgroup holds whole processes (threads move with their
                // process unless the subtree is threaded): one process's
                // threads cannot sit in several partitions this way.
                return Err(ReserveError::Refused(
                    "several reservations on different CPUs need per-thread cpusets; on cgroup v2 that takes a threaded subtree, which punctual does not set up: use one reservation per run, or a cgroup v1 cpuset hierarchy".into(),
                ));
            }
            let cpu = cpus[0];
            let online = punctual_live::sysinfo::online_cpus();
            let all = offered_v2(root, cpu, &online, OFFER_WAIT)?;
            check_cpu(cpu, &all)?;
            let sub = root.join("cgroup.subtree_control");
            if !read(&sub)?.split_whitespace().any(|w| w == "cpuset") {
                journal
                    .set_knob(&sub, "+cpuset", "-cpuset")
                    .map_err(|e| io_err("cannot write", &sub, e))?;
            }
            let cg = root.join(rt_name(pid, cpu, false));
            journal_cgroup(journal, &cg, true)?;
            fs::create_dir(&cg).map_err(|e| io_err("cannot create", &cg, e))?;
            write(&cg.join("cpuset.cpus"), &cpu.to_string())?;
            write(&cg.join("cpuset.cpus.partition"), "root")?;
            let state = read(&cg.join("cpuset.cpus.partition"))?;
            if state != "root" {
                return Err(ReserveError::Refused(format!(
                    "the kernel did not make CPU {cpu} a partition root (cpuset.cpus.partition reads '{state}'); another cgroup may hold CPU {cpu}"
                )));
            }
            out.push(Partition {
                cpu,
                path: cg,
                v2: true,
            });
        }
    }
    Ok(out)
}

/// Rebuilds the root domains by making a partition for `cpu` and taking it
/// down again (each step makes the kernel rebuild them, which recomputes
/// their deadline totals from the tasks and servers that exist): the
/// repair for a total a late release drove below zero
/// (kernel::repair_negative_totals). Leaves only `journal`'s mounts.
pub fn rebuild_root_domains(journal: &mut Journal, cpu: u32) -> Result<(), ReserveError> {
    let made = Partition::create_set(journal, &[cpu]);
    let errors = journal.undo_all_but_mounts();
    made?;
    if errors.is_empty() {
        Ok(())
    } else {
        Err(ReserveError::Failed(format!(
            "could not take down the partition made to rebuild the root domains: {}",
            errors.join("; ")
        )))
    }
}

/// How long an online CPU the v2 root does not offer is waited for.
const OFFER_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// The CPUs the v2 root offers a partition (`cpuset.cpus.effective`),
/// waiting up to `wait` for `cpu` when it is online but not offered. A
/// partition just taken down (this run's, before the root-domain repair
/// makes another; a killed run's, by `--cleanup`) gives its CPUs back only
/// when the kernel takes its cgroup offline, after the rmdir has
/// returned: in a PREEMPT_RT guest under QEMU the root read `0` then, and
/// the repair was refused.
fn offered_v2(
    root: &Path,
    cpu: u32,
    online: &[u32],
    wait: std::time::Duration,
) -> Result<Vec<u32>, ReserveError> {
    let end = std::time::Instant::now() + wait;
    loop {
        let all = parse_cpu_list(&read(&root.join("cpuset.cpus.effective"))?).unwrap_or_default();
        if all.contains(&cpu) || !online.contains(&cpu) || std::time::Instant::now() >= end {
            return Ok(all);
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

fn check_cpu(cpu: u32, all: &[u32]) -> Result<(), ReserveError> {
    if !all.contains(&cpu) {
        return Err(ReserveError::Refused(format!(
            "--cpu {cpu} is not among the CPUs the cpuset controller offers ({})",
            list(all)
        )));
    }
    if all.len() < 2 {
        return Err(ReserveError::Refused(format!(
            "--cpu {cpu}: this machine has only one CPU, so it cannot be partitioned off; run without --cpu"
        )));
    }
    Ok(())
}

fn tgid_of(tid: i32) -> Option<i32> {
    let s = fs::read_to_string(format!("/proc/{tid}/status")).ok()?;
    s.lines()
        .find_map(|l| l.strip_prefix("Tgid:"))
        .and_then(|v| v.trim().parse().ok())
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefers_v2_with_cpuset_else_v1() {
        let m = "cgroup2 /sys/fs/cgroup/unified cgroup2 rw 0 0\n\
                 cgroup /sys/fs/cgroup/cpuset cgroup rw,relatime,cpuset 0 0\n";
        assert_eq!(
            parse_mounts(m, |_| false),
            Some(CpusetFs::V1("/sys/fs/cgroup/cpuset".into()))
        );
        assert_eq!(
            parse_mounts(m, |_| true),
            Some(CpusetFs::V2("/sys/fs/cgroup/unified".into()))
        );
        assert_eq!(parse_mounts("proc /proc proc rw 0 0\n", |_| true), None);
    }

    #[test]
    fn cpu_lists() {
        assert!(check_cpu(3, &[0, 1])
            .unwrap_err()
            .to_string()
            .contains("--cpu 3"));
        assert!(check_cpu(0, &[0]).is_err());
        assert!(check_cpu(1, &[0, 1]).is_ok());
    }
    #[test]
    fn a_cpu_given_back_late_is_waited_for_and_an_offline_one_is_not() {
        let root = tempfile::tempdir().unwrap();
        let r = root.path().to_path_buf();
        fs::write(r.join("cpuset.cpus.effective"), "0\n").unwrap();
        let back = {
            let r = r.clone();
            std::thread::spawn(move || {
                std::thread::sleep(std::time::Duration::from_millis(50));
                fs::write(r.join("cpuset.cpus.effective"), "0-1\n").unwrap();
            })
        };
        let wait = std::time::Duration::from_secs(5);
        assert_eq!(offered_v2(&r, 1, &[0, 1], wait).unwrap(), vec![0, 1]);
        back.join().unwrap();
        fs::write(r.join("cpuset.cpus.effective"), "0\n").unwrap();
        let t0 = std::time::Instant::now();
        assert_eq!(offered_v2(&r, 7, &[0, 1], wait).unwrap(), vec![0]);
        assert!(
            t0.elapsed() < wait,
            "a CPU that is not online is refused at once"
        );
    }

    /// The cgroup v2 path against a fake hierarchy in a tempdir: what is
    /// written, what is journaled, and the restore. Regular files stand in
    /// for the kernel's, so this checks punctual's side only; the kernel's
    /// answers (partition root accepted, rmdir of a populated cgroup) are
    /// simulated, and the path is untested on a real v2 kernel.
    #[test]
    fn cgroup_v2_partition_writes_and_restores_on_a_fake_hierarchy() {
        let root = tempfile::tempdir().unwrap();
        let r = root.path();
        fs::write(r.join("cpuset.cpus.effective"), "0-3\n").unwrap();
        fs::write(r.join("cgroup.subtree_control"), "memory\n").unwrap();
        fs::write(r.join("cgroup.procs"), "").unwrap();
        let jdir = tempfile::tempdir().unwrap();
        let mut j = Journal::create(jdir.path()).unwrap();
        let fsys = CpusetFs::V2(r.to_path_buf());
        let parts = create_in(&mut j, &fsys, &[2], 4242).unwrap();
        assert_eq!(parts.len(), 1);
        let cg = r.join("punctual-rt-4242");
        assert_eq!(parts[0].path(), cg.as_path());
        assert_eq!(
            fs::read_to_string(r.join("cgroup.subtree_control")).unwrap(),
            "+cpuset"
        );
        assert_eq!(fs::read_to_string(cg.join("cpuset.cpus")).unwrap(), "2");
        assert_eq!(
            fs::read_to_string(cg.join("cpuset.cpus.partition")).unwrap(),
            "root"
        );
        // Threads join as their whole process (v2 moves processes).
        parts[0].add_thread(punctual_live::rt::gettid()).unwrap();
        let me = std::process::id().to_string();
        assert_eq!(fs::read_to_string(cg.join("cgroup.procs")).unwrap(), me);
        assert_eq!(parts[0].self_join_file(), cg.join("cgroup.procs"));
        // Several CPUs are refused on v2, with the reason.
        let e = create_in(&mut j, &fsys, &[1, 2], 4243).unwrap_err();
        assert!(e.to_string().contains("threaded"), "{e}");
        // Restore: the kernel's own files vanish with rmdir; here the test
        // removes the stand-ins the kernel would not have let us create.
        for f in ["cpuset.cpus", "cpuset.cpus.partition"] {
            fs::remove_file(cg.join(f)).unwrap();
        }
        let members = fs::read_to_string(cg.join("cgroup.procs")).unwrap();
        // The cgroup's undo moves members to the parent first; a fake cgroup
        // keeps its procs file, so drop it once moved.
        let errs = {
            let cgp = cg.clone();
            let h = std::thread::spawn(move || {
                for _ in 0..200 {
                    if fs::read_to_string(cgp.parent().unwrap().join("cgroup.procs"))
                        .is_ok_and(|s| !s.is_empty())
                    {
                        let _ = fs::remove_file(cgp.join("cgroup.procs"));
                        return;
                    }
                    std::thread::sleep(std::time::Duration::from_millis(2));
                }
            });
            let errs = j.undo_all();
            h.join().unwrap();
            errs
        };
        assert!(errs.is_empty(), "{errs:?}");
        assert!(!cg.exists());
        assert_eq!(fs::read_to_string(r.join("cgroup.procs")).unwrap(), members);
        assert_eq!(
            fs::read_to_string(r.join("cgroup.subtree_control")).unwrap(),
            "-cpuset"
        );
    }

    #[test]
    fn cgroup_v1_partitions_for_several_cpus_on_a_fake_hierarchy() {
        let root = tempfile::tempdir().unwrap();
        let r = root.path();
        fs::write(r.join("cpuset.cpus"), "0-3\n").unwrap();
        fs::write(r.join("cpuset.mems"), "0\n").unwrap();
        fs::write(r.join("cpuset.sched_load_balance"), "1\n").unwrap();
        let jdir = tempfile::tempdir().unwrap();
        let mut j = Journal::create(jdir.path()).unwrap();
        let parts = create_in(&mut j, &CpusetFs::V1(r.to_path_buf()), &[1, 3], 7).unwrap();
        let names: Vec<String> = parts
            .iter()
            .map(|p| p.path().file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, ["punctual-rt-7-cpu1", "punctual-rt-7-cpu3"]);
        for p in &parts {
            assert_eq!(
                fs::read_to_string(p.path().join("cpuset.cpus")).unwrap(),
                p.cpu.to_string()
            );
            assert_eq!(
                fs::read_to_string(p.path().join("cpuset.cpu_exclusive")).unwrap(),
                "1"
            );
        }
        assert_eq!(
            fs::read_to_string(r.join("punctual-rest-7/cpuset.cpus")).unwrap(),
            "0,2"
        );
        assert_eq!(
            fs::read_to_string(r.join("cpuset.sched_load_balance")).unwrap(),
            "0"
        );
        // Restore, after removing the stand-ins for the kernel's files.
        for d in [
            "punctual-rt-7-cpu1",
            "punctual-rt-7-cpu3",
            "punctual-rest-7",
        ] {
            for f in fs::read_dir(r.join(d)).unwrap().flatten() {
                fs::remove_file(f.path()).unwrap();
            }
        }
        let errs = j.undo_all();
        assert!(errs.is_empty(), "{errs:?}");
        assert_eq!(
            fs::read_to_string(r.join("cpuset.sched_load_balance")).unwrap(),
            "1"
        );
        assert!(fs::read_dir(r)
            .unwrap()
            .flatten()
            .all(|e| e.path().is_file()));
    }
}
