//! Scheduling policy, CPU affinity and memory locking for the calling thread.
//!
//! Each call returns a `Result` whose error says what was refused and why,
//! so callers can turn it into a warning; [`PolicyGuard`] puts the thread's
//! old policy back when dropped, so a real-time policy ends with the run on
//! every exit path.

use std::io;

use punctual_units::Nanos;

/// The scheduling policies the probes and loads can ask for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Policy {
    Other {
        nice: i32,
    },
    Fifo {
        priority: u8,
    },
    Rr {
        priority: u8,
    },
    Deadline {
        runtime: Nanos,
        deadline: Nanos,
        period: Nanos,
    },
}

impl Policy {
    pub fn name(&self) -> &'static str {
        match self {
            Policy::Other { .. } => "other",
            Policy::Fifo { .. } => "fifo",
            Policy::Rr { .. } => "rr",
            Policy::Deadline { .. } => "deadline",
        }
    }
}

/// sched_attr as the kernel defines it (include/uapi/linux/sched/types.h).
#[repr(C)]
#[derive(Default, Debug, Clone, Copy)]
pub struct SchedAttr {
    pub size: u32,
    pub sched_policy: u32,
    pub sched_flags: u64,
    pub sched_nice: i32,
    pub sched_priority: u32,
    pub sched_runtime: u64,
    pub sched_deadline: u64,
    pub sched_period: u64,
    pub sched_util_min: u32,
    pub sched_util_max: u32,
}

pub const SCHED_DEADLINE: u32 = 6;
/// Reclaim the thread's policy in forked children (not inherited).
pub const SCHED_FLAG_RESET_ON_FORK: u64 = 0x01;

/// sched_setattr(2) for thread `tid` (0 = calling thread).
pub fn sched_setattr(tid: i32, attr: &SchedAttr) -> io::Result<()> {
    let mut a = *attr;
    a.size = std::mem::size_of::<SchedAttr>() as u32;
    // SAFETY: a is a valid sched_attr of the size we announce.
    let r = unsafe { libc::syscall(libc::SYS_sched_setattr, tid, &a as *const SchedAttr, 0u32) };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// sched_getattr(2) for thread `tid` (0 = calling thread).
pub fn sched_getattr(tid: i32) -> io::Result<SchedAttr> {
    let mut a = SchedAttr {
        size: std::mem::size_of::<SchedAttr>() as u32,
        ..Default::default()
    };
    // SAFETY: a is writable and its size is passed.
    let r = unsafe {
        libc::syscall(
            libc::SYS_sched_getattr,
            tid,
            &mut a as *mut SchedAttr,
            a.size,
            0u32,
        )
    };
    if r == 0 {
        Ok(a)
    } else {
        Err(io::Error::last_os_error())
    }
}

fn attr_for(p: Policy) -> SchedAttr {
    let mut a = SchedAttr::default();
    match p {
        Policy::Other { nice } => {
            a.sched_policy = libc::SCHED_OTHER as u32;
            a.sched_nice = nice;
        }
        Policy::Fifo { priority } => {
            a.sched_policy = libc::SCHED_FIFO as u32;
            a.sched_priority = priority as u32;
        }
        Policy::Rr { priority } => {
            a.sched_policy = libc::SCHED_RR as u32;
            a.sched_priority = priority as u32;
        }
        Policy::Deadline {
            runtime,
            deadline,
            period,
        } => {
            a.sched_policy = SCHED_DEADLINE;
            a.sched_runtime = runtime.0;
            a.sched_deadline = deadline.0;
            a.sched_period = period.0;
        }
    }
    a.sched_flags = SCHED_FLAG_RESET_ON_FORK;
    a
}

/// Sets the calling thread's policy; the guard restores the previous one.
pub fn set_policy(p: Policy) -> io::Result<PolicyGuard> {
    let old = sched_getattr(0)?;
    sched_setattr(0, &attr_for(p))?;
    Ok(PolicyGuard { old })
}

/// Restores the thread's previous scheduling attributes on drop. Must be
/// dropped on the thread that created it.
#[derive(Debug)]
pub struct PolicyGuard {
    old: SchedAttr,
}

impl Drop for PolicyGuard {
    fn drop(&mut self) {
        let mut old = self.old;
        old.sched_flags = 0;
        let _ = sched_setattr(0, &old);
    }
}

/// Pins the calling thread to one CPU.
pub fn pin_to_cpu(cpu: u32) -> io::Result<()> {
    pin_to_cpus(&[cpu])
}

pub fn pin_to_cpus(cpus: &[u32]) -> io::Result<()> {
    set_thread_affinity(0, cpus)
}

/// The CPUs thread `tid` (0 = calling thread) may run on
/// (sched_getaffinity(2)), in ascending order.
pub fn thread_affinity(tid: i32) -> io::Result<Vec<u32>> {
    // SAFETY: cpu_set_t is plain data the kernel fills; CPU_ISSET reads
    // within it for indices < CPU_SETSIZE.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(tid, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok((0..libc::CPU_SETSIZE as usize)
            .filter(|&c| libc::CPU_ISSET(c, &set))
            .map(|c| c as u32)
            .collect())
    }
}

/// Sets the CPUs thread `tid` (0 = calling thread) may run on
/// (sched_setaffinity(2)).
pub fn set_thread_affinity(tid: i32, cpus: &[u32]) -> io::Result<()> {
    // SAFETY: as in pin_to_cpus; indices are checked against CPU_SETSIZE.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        for &c in cpus {
            if c as usize >= libc::CPU_SETSIZE as usize {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "cpu out of range",
                ));
            }
            libc::CPU_SET(c as usize, &mut set);
        }
        if libc::sched_setaffinity(tid, std::mem::size_of::<libc::cpu_set_t>(), &set) == 0 {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        }
    }
}

/// Stack size of the threads a measuring run starts (the probes, the
/// thread that runs them, the signal watcher). With memory locked, every
/// thread's whole stack is faulted in and pinned, at once for the threads
/// alive at `mlockall` and on creation for later ones: at the standard
/// library's 2 MiB that was 6 MiB zeroed per run, the largest part of a
/// short run's fixed CPU cost. None of these threads recurses or keeps
/// large buffers on its stack.
pub const RUN_THREAD_STACK_BYTES: usize = 256 * 1024;

/// Locks current and future memory so page faults do not add latency.
pub fn lock_memory() -> io::Result<()> {
    // SAFETY: plain syscall with constant flags.
    if unsafe { libc::mlockall(libc::MCL_CURRENT | libc::MCL_FUTURE) } == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Locks every page the process has touched or will touch, without
/// faulting in the ones it never uses (`MCL_ONFAULT`, Linux 4.4; plain
/// [`lock_memory`] where the kernel refuses the flag).
///
/// For a probe whose measured path is the timer's expiry to its clock
/// read, that path's code, stack and data are all touched before its first
/// sleep, so they are locked before anything is measured, as with
/// [`lock_memory`]; what `MCL_CURRENT` alone adds is faulting in and
/// pinning the whole of this binary's 8 MB of code, most of which a run
/// never executes, and walking it again to unlock: over half of a short
/// run's fixed CPU cost. A page first touched later, by the bookkeeping
/// after a clock read, faults there and is locked from then on.
pub fn lock_touched_memory() -> io::Result<()> {
    // SAFETY: plain syscall with constant flags.
    if unsafe { libc::mlockall(libc::MCL_CURRENT | libc::MCL_FUTURE | libc::MCL_ONFAULT) } == 0 {
        return Ok(());
    }
    match io::Error::last_os_error() {
        e if e.raw_os_error() == Some(libc::EINVAL) => lock_memory(),
        e => Err(e),
    }
}

pub fn unlock_memory() {
    // SAFETY: plain syscall.
    unsafe { libc::munlockall() };
}

/// Names the calling thread (visible as comm in /proc and tracefs; the
/// kernel keeps 15 bytes).
pub fn set_thread_name(name: &str) {
    let mut bytes: Vec<u8> = name.bytes().filter(|b| *b != 0).take(15).collect();
    bytes.push(0);
    // SAFETY: bytes is NUL-terminated and at most 16 bytes.
    unsafe { libc::prctl(libc::PR_SET_NAME, bytes.as_ptr() as libc::c_ulong, 0, 0, 0) };
}

/// Kernel thread id of the calling thread.
pub fn gettid() -> i32 {
    // SAFETY: plain syscall.
    unsafe { libc::syscall(libc::SYS_gettid) as i32 }
}

/// Whether SCHED_FIFO can be set here (root or CAP_SYS_NICE and RT budget).
/// Tries it on a short-lived thread so the caller's policy is untouched.
pub fn fifo_permitted() -> Result<(), String> {
    std::thread::spawn(|| {
        set_policy(Policy::Fifo { priority: 1 })
            .map(|_| ())
            .map_err(|e| e.to_string())
    })
    .join()
    .unwrap_or_else(|_| Err("probe thread panicked".into()))
}

/// Whether this kernel admits a SCHED_DEADLINE thread of `runtime` every
/// `period` now (root, a kernel with the class, and deadline bandwidth
/// left in the root domain). Tried on a short-lived thread so the caller's
/// policy is untouched; the kernel's refusal is the answer, since
/// admission depends on what other deadline threads already hold.
pub fn deadline_permitted(runtime: Nanos, period: Nanos) -> Result<(), String> {
    std::thread::spawn(move || {
        set_policy(Policy::Deadline {
            runtime,
            deadline: period,
            period,
        })
        .map(|_| ())
        .map_err(|e| e.to_string())
    })
    .join()
    .unwrap_or_else(|_| Err("probe thread panicked".into()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    /// (Size, Rss, Locked) in kB of this executable's code mapping.
    fn own_code() -> Option<(u64, u64, u64)> {
        let exe = std::fs::read_link("/proc/self/exe").ok()?;
        let smaps = std::fs::read_to_string("/proc/self/smaps").ok()?;
        let mut lines = smaps.lines();
        while let Some(l) = lines.next() {
            let f: Vec<&str> = l.split_whitespace().collect();
            if f.len() >= 6 && f[1].starts_with("r-x") && Path::new(f[5]) == exe {
                let (mut size, mut rss, mut locked) = (None, None, None);
                for l in lines.by_ref() {
                    let mut kv = l.split_whitespace();
                    let (k, v) = (kv.next()?, kv.next().and_then(|v| v.parse().ok()));
                    match k {
                        "Size:" => size = v,
                        "Rss:" => rss = v,
                        "Locked:" => locked = v,
                        "VmFlags:" => break,
                        _ => {}
                    }
                }
                return Some((size?, rss?, locked?));
            }
        }
        None
    }

    /// What the timer probe relies on: the code already run is locked, the
    /// code never run is not faulted in.
    #[test]
    fn touched_memory_is_locked_and_the_rest_is_not_faulted_in() {
        // SAFETY: plain syscall.
        if unsafe { libc::geteuid() } != 0 {
            eprintln!("skipped: locking memory needs root here");
            return;
        }
        // Alone in a process of its own: another test that locks all memory
        // would have faulted the whole code in already.
        const CHILD: &str = "PUNCTUAL_RT_LOCK_CHILD";
        if std::env::var_os(CHILD).is_none() {
            let out = std::process::Command::new(std::env::current_exe().unwrap())
                .args([
                    "--exact",
                    "rt::tests::touched_memory_is_locked_and_the_rest_is_not_faulted_in",
                    "--nocapture",
                    "--test-threads=1",
                ])
                .env(CHILD, "1")
                .output()
                .unwrap();
            let text = String::from_utf8_lossy(&out.stdout).to_string()
                + &String::from_utf8_lossy(&out.stderr);
            assert!(out.status.success(), "{text}");
            assert!(text.contains("1 passed"), "{text}");
            return;
        }
        let Some((size, before, _)) = own_code() else {
            eprintln!("skipped: no /proc/self/smaps");
            return;
        };
        lock_touched_memory().unwrap();
        let after = own_code();
        unlock_memory();
        let (_, rss, locked) = after.unwrap();
        assert!(locked > 0, "the code run so far is locked");
        assert!(
            rss < size,
            "code never run is not faulted in: {rss} of {size} kB resident (before: {before})"
        );
    }
}
