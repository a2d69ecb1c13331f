//! Fixes applied to the running machine, reversibly.
//!
//! A [`Remedy`] names one change that may remove a source of latency: an
//! interrupt or a thread moved off the measured CPU, RT throttling
//! switched off, C-states held shallow, full preemption, the CPU isolated,
//! a thread's priority raised. [`apply`] makes it through the one restore
//! journal ([`punctual_live::restore`]): each old value is journaled
//! *before* it is overwritten, so the change is undone when the journal is
//! dropped (a return, an error, Ctrl-C, a panic unwinding), and after
//! SIGKILL by the stale-journal replay every verb runs at start (or
//! `punctual cause --cleanup`). Measuring again with the fix in place
//! (`punctual_measure::again`) then tells what it bought.
//!
//! [`Remedy::permanent_how`] says how to make each fix survive a reboot;
//! it stays beside the code that applies it so the two say the same thing.
//!
//! Typical use:
//!
//! ```no_run
//! # fn main() -> Result<(), punctual_remedy::RemedyError> {
//! use punctual_remedy::{apply, journal, revert, Remedy};
//! let mut j = journal()?;
//! let applied = apply(&Remedy::RtRuntime { value: -1 }, &mut j)?;
//! // ... measure again ...
//! let problems = revert(applied, &mut j);
//! assert!(problems.is_empty());
//! # Ok(())
//! # }
//! ```

use std::fs::{self, File};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

use punctual_live::restore::{self, Action, Restore};
use punctual_live::rt;
use punctual_live::sysinfo::{parse_cpu_list, proc_start_time};
use punctual_reserve::partition::{self, CpusetFs, Partition};
use punctual_reserve::ReserveError;
use punctual_units::Nanos;

pub mod state;
use serde::{Deserialize, Serialize};

/// The RT throttling budget: how long real-time threads may run in each
/// `sched_rt_period_us`; -1 switches throttling off.
pub const RT_RUNTIME: &str = "/proc/sys/kernel/sched_rt_runtime_us";
const RT_PERIOD: &str = "/proc/sys/kernel/sched_rt_period_us";
/// The PM QoS request file: a value written to it holds every CPU's exit
/// latency at or under it for as long as the file stays open.
pub const DMA_LATENCY: &str = "/dev/cpu_dma_latency";
/// The preemption models a PREEMPT_DYNAMIC kernel switches between.
pub const PREEMPT_MODES: [&str; 4] = ["none", "voluntary", "full", "lazy"];

/// One fix that can be applied at run time. In JSON it is tagged by
/// `kind` (`irq-affinity`, `thread-affinity`, ...), with the fields as
/// named here.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Remedy {
    /// Route interrupt `irq` to `to_cpus` (`/proc/irq/N/smp_affinity_list`).
    IrqAffinity { irq: u32, to_cpus: Vec<u32> },
    /// Move one thread (`tid`), or every thread whose name is `comm`, to
    /// `to_cpus`. Exactly one of `tid` and `comm` is given.
    ThreadAffinity {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        tid: Option<i32>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        comm: Option<String>,
        to_cpus: Vec<u32>,
    },
    /// `sched_rt_runtime_us`: microseconds per period real-time threads
    /// may run; -1 switches RT throttling off.
    RtRuntime { value: i64 },
    /// Hold every CPU's C-state exit latency at or under `us` by keeping
    /// `/dev/cpu_dma_latency` open with that value: the open file is the
    /// lease, so the kernel drops the request when the process ends however
    /// it ends, and nothing needs journaling.
    DmaLatency { us: u32 },
    /// The preemption model of a PREEMPT_DYNAMIC kernel
    /// (`/sys/kernel/debug/sched/preempt`): `none`, `voluntary`, `full`,
    /// `lazy`.
    Preempt { mode: String },
    /// Give `cpu` its own exclusive cpuset partition and move every
    /// movable thread off it (per-CPU kernel threads stay).
    IsolateCpu { cpu: u32 },
    /// Thread `tid`'s policy (`fifo`, `rr`, `other`) and priority (1-99
    /// for fifo/rr, 0 for other).
    Priority { tid: i32, policy: String, prio: u32 },
    /// A CPU reservation of `budget` every `period`; applied by
    /// `punctual reserve`, which runs the command inside it, not here.
    Reservation { budget: Nanos, period: Nanos },
}

/// Why a fix was not applied.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RemedyError {
    /// The fix names something that is not there or not valid: a thread
    /// that no longer exists, an interrupt this machine does not have, a
    /// CPU out of range. Bad input (exit status 2).
    #[error("{0}")]
    Usage(String),
    /// The fix does not apply here: this kernel lacks the knob, the
    /// interrupt is kernel-managed, root is needed. Exit status 2.
    #[error("{0}")]
    Refused(String),
    /// The change failed on the way (exit status 1); what had been changed
    /// was put back.
    #[error("{0}")]
    Failed(String),
}

impl RemedyError {
    /// Whether the command line should exit with status 2 (the input or
    /// the machine must change) rather than 1.
    pub fn is_usage(&self) -> bool {
        !matches!(self, RemedyError::Failed(_))
    }
}

/// A fix in place. Dropping it releases what the process holds for it
/// (the `/dev/cpu_dma_latency` lease); the journaled changes are undone by
/// the journal passed to [`apply`] ([`revert`], or its `Drop`).
#[derive(Debug)]
pub struct Applied {
    /// One sentence per change made ("IRQ 36 routed to CPU 0 (was 1)").
    pub changes: Vec<String>,
    /// The open `/dev/cpu_dma_latency`: the request lasts while it is open.
    lease: Option<File>,
    /// The isolated CPU's partition, for a probe that must run inside it.
    partition: Option<Partition>,
}

impl Applied {
    /// The cpuset partition of an `isolate-cpu` fix. Threads of the
    /// calling process stay in the root cpuset (which still holds the CPU),
    /// so a probe pinned to the CPU runs there without joining it.
    pub fn partition(&self) -> Option<&Partition> {
        self.partition.as_ref()
    }
}

static SEQ: AtomicU32 = AtomicU32::new(0);

/// A fresh journal for fixes in the run directory
/// ([`restore::run_dir`]), as `remedy-<pid>-<n>.json`.
pub fn journal() -> Result<Restore, RemedyError> {
    let dir = restore::run_dir();
    let stem = format!(
        "remedy-{}-{}",
        std::process::id(),
        SEQ.fetch_add(1, Ordering::Relaxed)
    );
    Restore::create_named(&dir, &stem).map_err(|e| {
        RemedyError::Refused(format!(
            "cannot create the restore journal in {}: {e}",
            dir.display()
        ))
    })
}

/// Applies `r`, journaling in `journal` every old value before it is
/// overwritten. On an error nothing of `r` stays changed: what had been
/// changed is undone before returning, and the journal holds what it held
/// before.
pub fn apply(r: &Remedy, journal: &mut Restore) -> Result<Applied, RemedyError> {
    let before = journal.actions().len();
    let mut applied = Applied {
        changes: Vec::new(),
        lease: None,
        partition: None,
    };
    let res = match r {
        Remedy::IrqAffinity { irq, to_cpus } => irq_affinity(*irq, to_cpus, journal, &mut applied),
        Remedy::ThreadAffinity { tid, comm, to_cpus } => {
            thread_affinity(*tid, comm.as_deref(), to_cpus, journal, &mut applied)
        }
        Remedy::RtRuntime { value } => rt_runtime(*value, journal, &mut applied),
        Remedy::DmaLatency { us } => dma_latency(*us, &mut applied),
        Remedy::Preempt { mode } => preempt(mode, journal, &mut applied),
        Remedy::IsolateCpu { cpu } => isolate_cpu(*cpu, journal, &mut applied),
        Remedy::Priority { tid, policy, prio } => {
            priority(*tid, policy, *prio, journal, &mut applied)
        }
        Remedy::Reservation { budget, period } => {
            reservation_valid(*budget, *period).and(Err(reservation_refused()))
        }
    };
    match res {
        Ok(()) => Ok(applied),
        Err(e) => {
            drop(applied);
            let left = journal.undo_newer_than(before);
            if left.is_empty() {
                Err(e)
            } else {
                Err(RemedyError::Failed(format!(
                    "{e}; and what was changed could not all be put back: {}",
                    left.join("; ")
                )))
            }
        }
    }
}

/// Undoes a fix: releases its lease, then undoes everything `journal`
/// holds, newest first. Returns what could not be put back (empty when
/// all was); the journal file stays for `--cleanup` in that case.
pub fn revert(applied: Applied, journal: &mut Restore) -> Vec<String> {
    drop(applied);
    journal.undo_all()
}

/// Keeps a fix after the process ends: the journal forgets it, so nothing
/// undoes it. Returns what could not be taken down of the rest (a private
/// debugfs mount). What the process held (the C-state lease) still
/// ends with it; [`Remedy::permanent_how`] says how to keep that.
pub fn keep(applied: Applied, journal: &mut Restore) -> Vec<String> {
    // Only a private debugfs mount made to reach a knob is taken down.
    let _ = journal.forget(|a| !matches!(a, Action::Mount { .. }));
    let problems = journal.undo_all();
    // The lease cannot outlive the process: held until exit.
    std::mem::forget(applied);
    problems
}

/// Whether [`apply`] can make `r` on this machine now, without changing
/// anything: root, the knob present and readable, the interrupt routable,
/// the thread alive, the CPUs online. `Err` says why not, as [`apply`]
/// would. (Only the kernel's answer to the write itself is left: an
/// interrupt controller that cannot deliver to a CPU, bandwidth already
/// admitted.)
pub fn check(r: &Remedy) -> Result<(), RemedyError> {
    match r {
        Remedy::IrqAffinity { irq, to_cpus } => {
            check_cpus(&format!("routing IRQ {irq}"), to_cpus)?;
            let file = PathBuf::from(format!("/proc/irq/{irq}/smp_affinity_list"));
            if !file.exists() {
                return Err(RemedyError::Usage(format!(
                    "IRQ {irq} does not exist on this machine (no /proc/irq/{irq}); the device may be gone since the record was taken"
                )));
            }
            if !punctual_writable(&file) {
                return Err(RemedyError::Refused(format!(
                    "IRQ {irq} is kernel-managed (its smp_affinity_list is read-only): the kernel spreads it over the CPUs itself, so it cannot be routed at run time"
                )));
            }
            if let Some(pid) = held_elsewhere(*irq) {
                return Err(RemedyError::Refused(format!(
                    "IRQ {irq} is already routed by punctual pid {pid}; wait for that run to end"
                )));
            }
        }
        Remedy::ThreadAffinity { tid, comm, to_cpus } => {
            match (tid, comm) {
                (Some(t), None) if start_time(*t).is_none() => return Err(gone(*t)),
                (None, Some(c)) if threads_named(c).is_empty() => {
                    return Err(RemedyError::Usage(format!(
                        "no thread named '{c}' is running (it ended since the record was taken); take a new record and ask again"
                    )))
                }
                (Some(_), None) | (None, Some(_)) => {}
                _ => {
                    return Err(RemedyError::Usage(
                        "a thread-affinity fix names the thread by tid or by comm, one of the two"
                            .into(),
                    ))
                }
            }
            check_cpus("moving a thread", to_cpus)?;
        }
        Remedy::RtRuntime { value } => check_rt_runtime(*value)?,
        Remedy::DmaLatency { us } => {
            if i32::try_from(*us).is_err() {
                return Err(RemedyError::Usage(format!(
                    "a C-state exit latency of {us} us is out of range"
                )));
            }
            if !Path::new(DMA_LATENCY).exists() {
                return Err(RemedyError::Refused(format!(
                    "this kernel has no {DMA_LATENCY} (built without PM QoS), so C-states cannot be held shallow at run time"
                )));
            }
        }
        Remedy::Preempt { mode } => {
            if !PREEMPT_MODES.contains(&mode.as_str()) {
                return Err(RemedyError::Usage(format!(
                    "preemption model '{mode}' is not one of {}",
                    PREEMPT_MODES.join(", ")
                )));
            }
            // Reaching the knob may take a private debugfs mount: made and
            // taken down here, through a journal of its own.
            require_root()?;
            let mut j = journal()?;
            let res = preempt_knob(mode, &mut j).map(|_| ());
            let left = j.undo_all();
            if !left.is_empty() {
                return Err(RemedyError::Failed(left.join("; ")));
            }
            return res;
        }
        Remedy::IsolateCpu { cpu } => {
            check_cpus("isolating a CPU", &[*cpu])?;
            if online_cpus().len() < 2 {
                return Err(RemedyError::Refused(format!(
                    "CPU {cpu} cannot be isolated: this machine has only one CPU online"
                )));
            }
            if partition::find_cpuset_fs().is_none() {
                return Err(RemedyError::Refused(
                    "isolating a CPU needs the cpuset cgroup controller, and neither cgroup v2 nor a v1 cpuset hierarchy offers it here".into(),
                ));
            }
        }
        Remedy::Priority { tid, policy, prio } => {
            policy_number(policy, *prio)?;
            if start_time(*tid).is_none() {
                return Err(gone(*tid));
            }
        }
        Remedy::Reservation { budget, period } => {
            reservation_valid(*budget, *period)?;
            require_root()?;
            return rt::deadline_permitted(*budget, *period).map_err(|e| {
                RemedyError::Refused(format!(
                    "this kernel refuses a SCHED_DEADLINE reservation of {budget} every {period} ({e}): it needs a kernel with the deadline class and bandwidth left in the root domain"
                ))
            });
        }
    }
    require_root()
}

fn require_root() -> Result<(), RemedyError> {
    // SAFETY: plain syscall.
    if unsafe { libc::geteuid() } == 0 {
        Ok(())
    } else {
        Err(RemedyError::Refused(
            "applying fixes needs root: they change interrupt routing, scheduling and kernel knobs"
                .into(),
        ))
    }
}

fn reservation_valid(budget: Nanos, period: Nanos) -> Result<(), RemedyError> {
    if budget.is_zero() || budget > period {
        return Err(RemedyError::Usage(format!(
            "a reservation of {budget} every {period} is not one: the budget must be above 0 and at most the period"
        )));
    }
    Ok(())
}

fn reservation_refused() -> RemedyError {
    RemedyError::Refused(
        "a reservation holds a thread punctual starts inside it ('punctual reserve' runs the command in it, 'punctual advise --apply ID --verify' the probe); it cannot be given to a thread that is already running".into(),
    )
}

impl Remedy {
    /// Whether punctual can make this fix at run time. Every kind can: a
    /// reservation too, though not through [`apply`]: it holds a thread
    /// started inside it (`punctual reserve`'s command, or the probe
    /// that verifies it), never one already running. Whether it can on
    /// this machine now is [`check`]'s to say.
    pub fn runtime_applicable(&self) -> bool {
        true
    }

    /// One line naming the fix.
    pub fn describe(&self) -> String {
        match self {
            Remedy::IrqAffinity { irq, to_cpus } => {
                format!("route IRQ {irq} to CPU {}", cpu_list(to_cpus))
            }
            Remedy::ThreadAffinity { tid, comm, to_cpus } => format!(
                "move {} to CPU {}",
                thread_name(*tid, comm.as_deref()),
                cpu_list(to_cpus)
            ),
            Remedy::RtRuntime { value: -1 } => "switch RT throttling off".into(),
            Remedy::RtRuntime { value } => format!("set sched_rt_runtime_us to {value}"),
            Remedy::DmaLatency { us } => format!("hold C-state exit latency at or under {us} us"),
            Remedy::Preempt { mode } => format!("switch the preemption model to {mode}"),
            Remedy::IsolateCpu { cpu } => format!("isolate CPU {cpu}"),
            Remedy::Priority { tid, policy, prio } => {
                format!("run thread {tid} at {policy} {prio}")
            }
            Remedy::Reservation { budget, period } => {
                format!("reserve {budget} every {period}")
            }
        }
    }

    /// How to make the fix permanent: the kernel command line, a
    /// `sysctl.d` line, a tuned profile snippet or a systemd unit, as the
    /// kind calls for. Several lines; each alternative names its file.
    pub fn permanent_how(&self) -> String {
        match self {
            Remedy::IrqAffinity { irq, to_cpus } => {
                let l = cpu_list(to_cpus);
                format!(
                    "interrupt numbers can change between boots, so route it at boot by name or number with a oneshot systemd unit, /etc/systemd/system/punctual-irq{irq}.service:\n\
                     [Unit]\nDescription=Route IRQ {irq} to CPU {l}\nAfter=irqbalance.service\n\n\
                     [Service]\nType=oneshot\nExecStart=/bin/sh -c 'echo {l} > /proc/irq/{irq}/smp_affinity_list'\n\n\
                     [Install]\nWantedBy=multi-user.target\n\
                     and keep irqbalance from moving it back: IRQBALANCE_BANNED_CPULIST set to the CPUs to keep free, in /etc/sysconfig/irqbalance (or /etc/default/irqbalance);\n\
                     or route every interrupt that allows it at boot with the kernel command line irqaffinity={l}"
                )
            }
            Remedy::ThreadAffinity { tid, comm, to_cpus } => {
                let l = cpu_list(to_cpus);
                let who = thread_name(*tid, comm.as_deref());
                format!(
                    "start {who} with its CPUs set: in the systemd unit that starts it, CPUAffinity={l} under [Service];\n\
                     or start it under 'taskset -c {l} COMMAND';\n\
                     a kernel thread follows the kernel command line instead: isolcpus=, nohz_full= and rcu_nocbs= keep most of them off the isolated CPUs"
                )
            }
            Remedy::RtRuntime { value } => format!(
                "a sysctl.d line, /etc/sysctl.d/90-punctual.conf:\n\
                 kernel.sched_rt_runtime_us = {value}\n\
                 or in a tuned profile: [sysctl] kernel.sched_rt_runtime_us={value}"
            ),
            Remedy::DmaLatency { us } => format!(
                "a tuned profile snippet (tuned holds /dev/cpu_dma_latency open while the profile is active), /etc/tuned/punctual/tuned.conf:\n\
                 [main]\ninclude=latency-performance\n\n[cpu]\nforce_latency={us}\n\
                 then 'tuned-adm profile punctual';\n\
                 or the kernel command line {}",
                if *us == 0 {
                    "processor.max_cstate=1 intel_idle.max_cstate=0 (no deep C-states at all)".to_string()
                } else {
                    "intel_idle.max_cstate=N, with N the deepest C-state whose exit latency (/sys/devices/system/cpu/cpu0/cpuidle/state*/latency) is at most the bound".to_string()
                }
            ),
            Remedy::Preempt { mode } => format!(
                "the kernel command line preempt={mode} (a PREEMPT_DYNAMIC kernel); a kernel without PREEMPT_DYNAMIC has its model fixed at build time: boot one built with CONFIG_PREEMPT_DYNAMIC, or a PREEMPT_RT kernel"
            ),
            Remedy::IsolateCpu { cpu } => format!(
                "the kernel command line isolcpus=domain,managed_irq,{cpu} nohz_full={cpu} rcu_nocbs={cpu};\n\
                 or the tuned profile cpu-partitioning: isolated_cores={cpu} in /etc/tuned/cpu-partitioning-variables.conf, then 'tuned-adm profile cpu-partitioning';\n\
                 or, without a reboot, systemd's CPUAffinity= in /etc/systemd/system.conf listing every CPU but {cpu}, and the time-critical unit with CPUAffinity={cpu}"
            ),
            Remedy::Priority { tid, policy, prio } => format!(
                "in the systemd unit that starts thread {tid}'s program: CPUSchedulingPolicy={policy} and CPUSchedulingPriority={prio} under [Service];\n\
                 or start it under 'chrt --{policy} {prio} COMMAND' (a single thread of it: 'chrt --{policy} -p {prio} TID' once it runs)"
            ),
            Remedy::Reservation { budget, period } => format!(
                "run the program under 'punctual reserve --budget {budget} --period {period} -- COMMAND', from its systemd unit's ExecStart="
            ),
        }
    }
}

fn cpu_list(cpus: &[u32]) -> String {
    cpus.iter()
        .map(|c| c.to_string())
        .collect::<Vec<_>>()
        .join(",")
}

fn thread_name(tid: Option<i32>, comm: Option<&str>) -> String {
    match (tid, comm) {
        (Some(t), _) => format!("thread {t}"),
        (None, Some(c)) => format!("the threads named '{c}'"),
        (None, None) => "the thread".into(),
    }
}

/// The CPUs online now.
fn online_cpus() -> Vec<u32> {
    fs::read_to_string("/sys/devices/system/cpu/online")
        .ok()
        .and_then(|s| parse_cpu_list(&s).ok())
        .unwrap_or_default()
}

/// Refuses an empty CPU list or one naming a CPU that is not online.
fn check_cpus(what: &str, cpus: &[u32]) -> Result<(), RemedyError> {
    if cpus.is_empty() {
        return Err(RemedyError::Usage(format!(
            "{what}: to_cpus is empty; name at least one CPU"
        )));
    }
    let online = online_cpus();
    if let Some(c) = cpus.iter().find(|c| !online.contains(c)) {
        return Err(RemedyError::Usage(format!(
            "{what}: CPU {c} is not online here (online: {})",
            cpu_list(&online)
        )));
    }
    Ok(())
}

fn journal_err(j: &Restore, e: io::Error) -> RemedyError {
    RemedyError::Failed(format!("cannot write {}: {e}", j.path().display()))
}

/// Maps a refused write to the sentence that says what is needed.
fn write_err(what: &str, e: io::Error) -> RemedyError {
    match e.raw_os_error() {
        Some(libc::EACCES) | Some(libc::EPERM) => {
            RemedyError::Refused(format!("{what}: {e}; applying fixes needs root"))
        }
        _ => RemedyError::Failed(format!("{what}: {e}")),
    }
}

fn irq_affinity(
    irq: u32,
    to: &[u32],
    j: &mut Restore,
    out: &mut Applied,
) -> Result<(), RemedyError> {
    let what = format!("routing IRQ {irq}");
    check_cpus(&what, to)?;
    let file = PathBuf::from(format!("/proc/irq/{irq}/smp_affinity_list"));
    if !file.exists() {
        return Err(RemedyError::Usage(format!(
            "IRQ {irq} does not exist on this machine (no /proc/irq/{irq}); the device may be gone since the record was taken"
        )));
    }
    if let Some(pid) = held_elsewhere(irq) {
        return Err(RemedyError::Refused(format!(
            "IRQ {irq} is already routed by punctual pid {pid}; wait for that run to end"
        )));
    }
    if !punctual_writable(&file) {
        return Err(RemedyError::Refused(format!(
            "IRQ {irq} is kernel-managed (its smp_affinity_list is read-only): the kernel spreads it over the CPUs itself, so it cannot be routed at run time"
        )));
    }
    let old = fs::read_to_string(&file)
        .map_err(|e| write_err(&format!("cannot read {}", file.display()), e))?
        .trim()
        .to_string();
    j.record(Action::IrqAffinity {
        irq,
        affinity_list: old.clone(),
    })
    .map_err(|e| journal_err(j, e))?;
    let l = cpu_list(to);
    fs::write(&file, format!("{l}\n")).map_err(|e| match e.raw_os_error() {
        Some(libc::EIO) => RemedyError::Refused(format!(
            "the kernel refused to route IRQ {irq} to CPU {l} ({e}): the interrupt controller cannot deliver it there"
        )),
        _ => write_err(&format!("cannot route IRQ {irq} to CPU {l}"), e),
    })?;
    out.changes
        .push(format!("IRQ {irq} routed to CPU {l} (was {old})"));
    Ok(())
}

/// Interrupts a live run other than this process holds routed.
fn held_elsewhere(irq: u32) -> Option<u32> {
    restore::live_journals(&restore::run_dir())
        .into_iter()
        .find(|j| {
            j.actions
                .iter()
                .any(|a| matches!(a, Action::IrqAffinity { irq: i, .. } if *i == irq))
        })
        .map(|j| j.pid)
}

fn punctual_writable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    fs::metadata(p)
        .map(|m| m.permissions().mode() & 0o200 != 0)
        .unwrap_or(false)
}

/// Every thread on the machine whose name is `comm`.
pub fn threads_named(comm: &str) -> Vec<i32> {
    let mut out: Vec<i32> = punctual_live::sysinfo::all_threads()
        .into_iter()
        .filter(|&(pid, tid)| {
            fs::read_to_string(format!("/proc/{pid}/task/{tid}/comm"))
                .is_ok_and(|c| c.trim_end() == comm)
        })
        .map(|(_, tid)| tid)
        .collect();
    out.sort_unstable();
    out
}

fn gone(tid: i32) -> RemedyError {
    RemedyError::Usage(format!(
        "thread {tid} no longer exists (it ended since the record was taken); take a new record and ask again"
    ))
}

fn start_time(tid: i32) -> Option<u64> {
    u32::try_from(tid).ok().and_then(proc_start_time)
}

fn thread_affinity(
    tid: Option<i32>,
    comm: Option<&str>,
    to: &[u32],
    j: &mut Restore,
    out: &mut Applied,
) -> Result<(), RemedyError> {
    let tids = match (tid, comm) {
        (Some(t), None) => {
            if start_time(t).is_none() {
                return Err(gone(t));
            }
            vec![t]
        }
        (None, Some(c)) => {
            let v = threads_named(c);
            if v.is_empty() {
                return Err(RemedyError::Usage(format!(
                    "no thread named '{c}' is running (it ended since the record was taken); take a new record and ask again"
                )));
            }
            v
        }
        _ => {
            return Err(RemedyError::Usage(
                "a thread-affinity fix names the thread by tid or by comm, one of the two".into(),
            ))
        }
    };
    check_cpus("moving a thread", to)?;
    let l = cpu_list(to);
    let mut moved = 0;
    for t in &tids {
        let (Some(st), Ok(old)) = (start_time(*t), rt::thread_affinity(*t)) else {
            // Ended between the listing and now.
            if tid.is_some() {
                return Err(gone(*t));
            }
            continue;
        };
        j.record(Action::ThreadAffinity {
            tid: *t,
            start_time: st,
            cpus: cpu_list(&old),
        })
        .map_err(|e| journal_err(j, e))?;
        match rt::set_thread_affinity(*t, to) {
            Ok(()) => {
                moved += 1;
                out.changes.push(format!(
                    "thread {t} moved to CPU {l} (was {})",
                    cpu_list(&old)
                ));
            }
            Err(e) if e.raw_os_error() == Some(libc::ESRCH) && tid.is_none() => {}
            Err(e) if e.raw_os_error() == Some(libc::ESRCH) => return Err(gone(*t)),
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
                return Err(RemedyError::Refused(format!(
                    "thread {t} cannot be moved to CPU {l} ({e}): a per-CPU kernel thread is bound to its CPU, and a thread in a cpuset can only use that cpuset's CPUs"
                )))
            }
            Err(e) => return Err(write_err(&format!("cannot move thread {t} to CPU {l}"), e)),
        }
    }
    if moved == 0 {
        return Err(gone(tids[0]));
    }
    Ok(())
}

/// Refuses a runtime the kernel would not take: -1 or within the period.
fn check_rt_runtime(value: i64) -> Result<(), RemedyError> {
    let period: i64 = fs::read_to_string(RT_PERIOD)
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .ok_or_else(|| {
            RemedyError::Refused(format!(
                "this kernel has no {RT_PERIOD}, so RT throttling cannot be changed here"
            ))
        })?;
    if value != -1 && !(0..=period).contains(&value) {
        return Err(RemedyError::Usage(format!(
            "sched_rt_runtime_us {value} is neither -1 (throttling off) nor within 0..={period} (sched_rt_period_us)"
        )));
    }
    Ok(())
}

fn rt_runtime(value: i64, j: &mut Restore, out: &mut Applied) -> Result<(), RemedyError> {
    check_rt_runtime(value)?;
    let path = Path::new(RT_RUNTIME);
    let old = fs::read_to_string(path)
        .map_err(|e| write_err(&format!("cannot read {RT_RUNTIME}"), e))?
        .trim()
        .to_string();
    j.record(Action::Knob {
        path: path.to_path_buf(),
        restore: old.clone(),
    })
    .map_err(|e| journal_err(j, e))?;
    fs::write(path, value.to_string()).map_err(|e| match e.raw_os_error() {
        Some(libc::EBUSY) | Some(libc::EINVAL) => RemedyError::Refused(format!(
            "the kernel refused sched_rt_runtime_us {value} ({e}): the real-time or deadline bandwidth already admitted does not fit in it"
        )),
        _ => write_err(&format!("cannot write {RT_RUNTIME}"), e),
    })?;
    out.changes
        .push(format!("sched_rt_runtime_us set to {value} (was {old})"));
    Ok(())
}

fn dma_latency(us: u32, out: &mut Applied) -> Result<(), RemedyError> {
    let mut f = fs::OpenOptions::new()
        .write(true)
        .open(DMA_LATENCY)
        .map_err(|e| match e.kind() {
            io::ErrorKind::NotFound => RemedyError::Refused(format!(
                "this kernel has no {DMA_LATENCY} (built without PM QoS), so C-states cannot be held shallow at run time"
            )),
            _ => write_err(&format!("cannot open {DMA_LATENCY}"), e),
        })?;
    let v = i32::try_from(us).map_err(|_| {
        RemedyError::Usage(format!("a C-state exit latency of {us} us is out of range"))
    })?;
    f.write_all(&v.to_ne_bytes())
        .map_err(|e| write_err(&format!("cannot write {DMA_LATENCY}"), e))?;
    out.lease = Some(f);
    out.changes.push(format!(
        "C-state exit latency held at or under {us} us while this run lasts"
    ));
    Ok(())
}

/// The selected mode of `sched/preempt`, which reads `none voluntary
/// (full) lazy`.
pub fn preempt_selected(text: &str) -> Option<String> {
    let a = text.find('(')?;
    let b = text[a..].find(')')? + a;
    Some(text[a + 1..b].trim().to_string())
}

fn preempt(mode: &str, j: &mut Restore, out: &mut Applied) -> Result<(), RemedyError> {
    let (path, old) = preempt_knob(mode, j)?;
    j.record(Action::Knob {
        path: path.clone(),
        restore: old.clone(),
    })
    .map_err(|e| journal_err(j, e))?;
    fs::write(&path, mode)
        .map_err(|e| write_err(&format!("cannot write {}", path.display()), e))?;
    out.changes
        .push(format!("preemption model set to {mode} (was {old})"));
    Ok(())
}

/// The `sched/preempt` file and the model selected in it, when this kernel
/// offers `mode` there. Reaching debugfs may mount it privately, journaled
/// in `j`.
fn preempt_knob(mode: &str, j: &mut Restore) -> Result<(PathBuf, String), RemedyError> {
    if !PREEMPT_MODES.contains(&mode) {
        return Err(RemedyError::Usage(format!(
            "preemption model '{mode}' is not one of {}",
            PREEMPT_MODES.join(", ")
        )));
    }
    let before = j.actions().len();
    let no_knob = || {
        RemedyError::Refused(
            "this kernel has no sched/preempt in debugfs (it is not PREEMPT_DYNAMIC, or debugfs cannot be mounted): its preemption model is fixed at build time, so boot a kernel built with CONFIG_PREEMPT_DYNAMIC or a PREEMPT_RT kernel".into(),
        )
    };
    let Some(dir) = punctual_reserve::kernel::sched_debug_dir(Some(j)) else {
        return Err(no_knob());
    };
    let path = dir.join("preempt");
    let text = match fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) => {
            // A private debugfs mount made only to look is taken down now.
            j.undo_newer_than(before);
            return Err(if e.kind() == io::ErrorKind::NotFound {
                no_knob()
            } else {
                RemedyError::Refused(format!(
                    "this kernel refuses to read sched/preempt ({e}), so it does not switch its preemption model at run time: use the kernel command line preempt={mode}, or boot a PREEMPT_RT kernel"
                ))
            });
        }
    };
    if !text
        .split_whitespace()
        .any(|w| w.trim_matches(['(', ')']) == mode)
    {
        return Err(RemedyError::Refused(format!(
            "this kernel does not offer preemption model '{mode}' (sched/preempt reads '{}')",
            text.trim()
        )));
    }
    let old = preempt_selected(&text).ok_or_else(|| {
        RemedyError::Failed(format!(
            "cannot tell the current model from {} ('{}')",
            path.display(),
            text.trim()
        ))
    })?;
    Ok((path, old))
}

fn reserve_err(e: ReserveError) -> RemedyError {
    match e {
        ReserveError::Refused(m) => RemedyError::Refused(m.replace("--cpu", "isolating a CPU")),
        other => RemedyError::Failed(other.to_string()),
    }
}

fn isolate_cpu(cpu: u32, j: &mut Restore, out: &mut Applied) -> Result<(), RemedyError> {
    check_cpus("isolating a CPU", &[cpu])?;
    let fsys = partition::find_cpuset_fs().ok_or_else(|| {
        RemedyError::Refused(
            "isolating a CPU needs the cpuset cgroup controller, and neither cgroup v2 nor a v1 cpuset hierarchy offers it here".into(),
        )
    })?;
    let movable = match &fsys {
        CpusetFs::V1(root) => {
            let tids = root_threads(root)?;
            // Leaving a v1 cpuset sets a thread's CPUs to those of the
            // cpuset it joins: a kernel thread pinned to one CPU (an
            // interrupt thread) would come back allowed on all of them.
            // Their affinities are journaled before the partition, so
            // they are put back after it comes down.
            for &t in &tids {
                if let (Some(st), Ok(a)) = (start_time(t), rt::thread_affinity(t)) {
                    j.note(Action::ThreadAffinity {
                        tid: t,
                        start_time: st,
                        cpus: cpu_list(&a),
                    });
                }
            }
            j.flush().map_err(|e| journal_err(j, e))?;
            tids
        }
        CpusetFs::V2(_) => Vec::new(),
    };
    let parts = partition::create_in(j, &fsys, &[cpu], std::process::id()).map_err(reserve_err)?;
    let p = parts
        .into_iter()
        .next()
        .ok_or_else(|| RemedyError::Failed(format!("no partition was made for CPU {cpu}")))?;
    let moved = match &fsys {
        // A v2 partition root takes its CPU from every other cgroup's
        // effective CPUs: their threads leave it without being moved.
        CpusetFs::V2(_) => None,
        // On v1 the threads of the root cpuset keep every CPU: move them
        // into the cpuset of the other CPUs (its undo moves them back).
        CpusetFs::V1(root) => Some(move_threads(
            &movable,
            &root.join(format!("punctual-rest-{}", std::process::id())),
        )),
    };
    out.changes.push(match moved {
        None => format!(
            "CPU {cpu} made a cpuset partition of its own ({}); every other cgroup's threads left it",
            p.path().display()
        ),
        Some((n, stuck)) => format!(
            "CPU {cpu} given an exclusive cpuset ({}) and {n} threads moved off it ({stuck} per-CPU kernel threads stay)",
            p.path().display()
        ),
    });
    out.partition = Some(p);
    Ok(())
}

/// The threads of the v1 root cpuset but this process's.
fn root_threads(root: &Path) -> Result<Vec<i32>, RemedyError> {
    let tasks = fs::read_to_string(root.join("tasks"))
        .map_err(|e| write_err(&format!("cannot read {}", root.join("tasks").display()), e))?;
    let mine: Vec<i32> = fs::read_dir("/proc/self/task")
        .map(|d| {
            d.flatten()
                .filter_map(|e| e.file_name().to_str().and_then(|s| s.parse().ok()))
                .collect()
        })
        .unwrap_or_default();
    let me = std::process::id() as i32;
    Ok(tasks
        .split_whitespace()
        .filter_map(|t| t.parse::<i32>().ok())
        .filter(|t| *t != me && !mine.contains(t))
        .collect())
}

/// Moves `tids` into the v1 cpuset `rest`; returns how many moved and how
/// many the kernel keeps where they are (per-CPU kernel threads).
fn move_threads(tids: &[i32], rest: &Path) -> (usize, usize) {
    let (mut moved, mut stuck) = (0, 0);
    let dest = rest.join("tasks");
    for tid in tids {
        match fs::write(&dest, tid.to_string()) {
            Ok(()) => moved += 1,
            // Gone meanwhile.
            Err(e) if e.raw_os_error() == Some(libc::ESRCH) => {}
            Err(_) => stuck += 1,
        }
    }
    (moved, stuck)
}

fn policy_number(policy: &str, prio: u32) -> Result<u32, RemedyError> {
    let (n, range) = match policy {
        "fifo" => (libc::SCHED_FIFO as u32, 1..=99),
        "rr" => (libc::SCHED_RR as u32, 1..=99),
        "other" => (libc::SCHED_OTHER as u32, 0..=0),
        _ => {
            return Err(RemedyError::Usage(format!(
                "policy '{policy}' is not one of fifo, rr, other"
            )))
        }
    };
    if !range.contains(&prio) {
        return Err(RemedyError::Usage(format!(
            "priority {prio} is out of range for {policy} ({}..={})",
            range.start(),
            range.end()
        )));
    }
    Ok(n)
}

fn priority(
    tid: i32,
    policy: &str,
    prio: u32,
    j: &mut Restore,
    out: &mut Applied,
) -> Result<(), RemedyError> {
    let n = policy_number(policy, prio)?;
    let st = start_time(tid).ok_or_else(|| gone(tid))?;
    let old = rt::sched_getattr(tid).map_err(|e| match e.raw_os_error() {
        Some(libc::ESRCH) => gone(tid),
        _ => RemedyError::Failed(format!("cannot read thread {tid}'s policy: {e}")),
    })?;
    j.record(Action::ThreadSched {
        tid,
        start_time: st,
        policy: old.sched_policy,
        priority: old.sched_priority,
        nice: old.sched_nice,
        runtime_ns: old.sched_runtime,
        deadline_ns: old.sched_deadline,
        period_ns: old.sched_period,
    })
    .map_err(|e| journal_err(j, e))?;
    let new = rt::SchedAttr {
        sched_policy: n,
        sched_priority: prio,
        sched_nice: if n == libc::SCHED_OTHER as u32 {
            old.sched_nice
        } else {
            0
        },
        ..Default::default()
    };
    rt::sched_setattr(tid, &new).map_err(|e| match e.raw_os_error() {
        Some(libc::ESRCH) => gone(tid),
        Some(libc::EPERM) => RemedyError::Refused(format!(
            "the kernel refused {policy} {prio} for thread {tid} ({e}): it needs root (CAP_SYS_NICE), and a real-time policy also needs RT bandwidth left"
        )),
        _ => RemedyError::Failed(format!(
            "cannot set thread {tid} to {policy} {prio}: {e}"
        )),
    })?;
    out.changes.push(format!(
        "thread {tid} set to {policy} {prio} (was policy {} priority {})",
        old.sched_policy, old.sched_priority
    ));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_are_tagged_by_kind_with_their_fields() {
        let r: Remedy =
            serde_json::from_str(r#"{"kind":"irq-affinity","irq":36,"to_cpus":[0]}"#).unwrap();
        assert_eq!(
            r,
            Remedy::IrqAffinity {
                irq: 36,
                to_cpus: vec![0]
            }
        );
        let r: Remedy =
            serde_json::from_str(r#"{"kind":"thread-affinity","comm":"noisy","to_cpus":[0]}"#)
                .unwrap();
        assert_eq!(
            serde_json::to_value(&r).unwrap(),
            serde_json::json!({"kind":"thread-affinity","comm":"noisy","to_cpus":[0]})
        );
        for text in [
            r#"{"kind":"rt-runtime","value":-1}"#,
            r#"{"kind":"dma-latency","us":0}"#,
            r#"{"kind":"preempt","mode":"full"}"#,
            r#"{"kind":"isolate-cpu","cpu":1}"#,
            r#"{"kind":"priority","tid":7,"policy":"fifo","prio":90}"#,
            r#"{"kind":"reservation","budget":1000000,"period":10000000}"#,
        ] {
            let r: Remedy = serde_json::from_str(text).unwrap();
            let back: serde_json::Value = serde_json::to_value(&r).unwrap();
            assert_eq!(
                back,
                serde_json::from_str::<serde_json::Value>(text).unwrap()
            );
            assert!(!r.permanent_how().is_empty());
            assert!(!r.describe().is_empty());
        }
    }

    #[test]
    fn permanent_how_names_the_file_and_the_value() {
        let r = Remedy::RtRuntime { value: -1 };
        assert!(r
            .permanent_how()
            .contains("kernel.sched_rt_runtime_us = -1"));
        let r = Remedy::IsolateCpu { cpu: 3 };
        assert!(r.permanent_how().contains("isolcpus=domain,managed_irq,3"));
        let r = Remedy::DmaLatency { us: 10 };
        assert!(r.permanent_how().contains("force_latency=10"));
        let r = Remedy::Preempt {
            mode: "full".into(),
        };
        assert!(r.permanent_how().contains("preempt=full"));
    }

    #[test]
    fn the_selected_preemption_model_is_the_one_in_parentheses() {
        assert_eq!(
            preempt_selected("none voluntary (full) lazy\n").as_deref(),
            Some("full")
        );
        assert_eq!(preempt_selected("none voluntary full"), None);
    }

    #[test]
    fn bad_input_is_refused_before_anything_changes() {
        let dir = tempfile::tempdir().unwrap();
        let mut j = Restore::create(dir.path()).unwrap();
        let cases = [
            Remedy::Reservation {
                budget: Nanos::from_ms(11),
                period: Nanos::from_ms(10),
            },
            Remedy::Priority {
                tid: rt::gettid(),
                policy: "deadline".into(),
                prio: 1,
            },
            Remedy::Priority {
                tid: rt::gettid(),
                policy: "fifo".into(),
                prio: 100,
            },
            Remedy::ThreadAffinity {
                tid: None,
                comm: None,
                to_cpus: vec![0],
            },
            Remedy::ThreadAffinity {
                tid: Some(rt::gettid()),
                comm: None,
                to_cpus: vec![],
            },
            Remedy::ThreadAffinity {
                tid: None,
                comm: Some("no-such-thread-xyz".into()),
                to_cpus: vec![0],
            },
            Remedy::IrqAffinity {
                irq: 999_999,
                to_cpus: vec![0],
            },
            Remedy::RtRuntime { value: -2 },
            Remedy::Preempt {
                mode: "sometimes".into(),
            },
            Remedy::IsolateCpu { cpu: 4096 },
        ];
        for r in cases {
            let e = apply(&r, &mut j).unwrap_err();
            assert!(e.is_usage(), "{r:?}: {e}");
            assert!(!e.to_string().contains('\n'), "{e}");
            assert_eq!(check(&r).unwrap_err(), e, "{r:?}");
        }
        assert!(j.actions().is_empty());
        j.set_done();
    }

    /// A reservation is made for a thread punctual starts, never through
    /// `apply`; `check` asks the kernel whether it would admit one.
    #[test]
    fn a_reservation_is_checked_by_the_kernel_but_never_applied_to_a_running_thread() {
        let r = Remedy::Reservation {
            budget: Nanos::from_us(100),
            period: Nanos::from_ms(10),
        };
        assert!(r.runtime_applicable());
        let dir = tempfile::tempdir().unwrap();
        let mut j = Restore::create(dir.path()).unwrap();
        let e = apply(&r, &mut j).unwrap_err();
        assert!(e.to_string().contains("already running"), "{e}");
        assert!(j.actions().is_empty());
        j.set_done();
        // SAFETY: plain syscall.
        if unsafe { libc::geteuid() } != 0 {
            eprintln!("skipped the kernel's admission: not root");
            return;
        }
        match check(&r) {
            Ok(()) => {}
            // Another run's deadline threads may hold the bandwidth.
            Err(e) => assert!(
                matches!(e, RemedyError::Refused(_)) && e.to_string().contains("refuses"),
                "{e}"
            ),
        }
    }

    #[test]
    fn a_thread_that_ended_is_named_in_one_sentence() {
        let tid = std::thread::spawn(rt::gettid).join().unwrap();
        let dir = tempfile::tempdir().unwrap();
        let mut j = Restore::create(dir.path()).unwrap();
        for r in [
            Remedy::ThreadAffinity {
                tid: Some(tid),
                comm: None,
                to_cpus: vec![0],
            },
            Remedy::Priority {
                tid,
                policy: "fifo".into(),
                prio: 10,
            },
        ] {
            let e = apply(&r, &mut j).unwrap_err();
            assert_eq!(
                e,
                RemedyError::Usage(format!(
                    "thread {tid} no longer exists (it ended since the record was taken); take a new record and ask again"
                ))
            );
        }
        j.set_done();
    }
}
