//! Routing a block device's interrupts to one CPU, and putting them back.
//!
//! `disk:irq-cpu=N` writes N to `/proc/irq/I/smp_affinity_list` for each
//! interrupt I of the device under the load's file, so that completions
//! (and their softirq work) steal from whatever runs on CPU N — the disk
//! experiment of Regehr's thesis. Changing a machine-wide knob needs a way back on every
//! exit path:
//!
//! 1. Before the first write, the old affinities go to a restore journal,
//!    `/run/punctual/irq-restore-<pid>-<n>.json` (the one format of
//!    [`punctual_live::restore`], written atomically; /run is tmpfs, so a
//!    reboot forgets it along with the change itself).
//! 2. [`IrqRoute`] restores and deletes its journal when dropped: normal end,
//!    early stop, error, panic unwinding, SIGTERM/EOF of the worker.
//! 3. If the process holding the route dies without unwinding (SIGKILL,
//!    OOM), its journal stays. [`recover_stale`] replays every journal
//!    whose process is gone (pid absent or reused: the journal records the
//!    process start time). The parent of a load worker calls it as soon as
//!    the worker has exited, every worker calls it before routing, and
//!    every punctual verb at start — so a stale route lasts at most until
//!    the next punctual run, and normally not at all.
//!
//! Two live runs never fight over one interrupt: routing an interrupt that a
//! live journal already holds is refused.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

use punctual_live::restore::{self, Action, Restore};

/// Where restore journals live (unless `PUNCTUAL_RUN_DIR` says otherwise).
pub const JOURNAL_DIR: &str = restore::DEFAULT_DIR;

/// The block device behind a file and its interrupt lines.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceIrqs {
    /// e.g. `vda (virtio1)`.
    pub device: String,
    pub irqs: Vec<u32>,
}

/// Finds the interrupts of the block device holding `st_dev`: the
/// partition's disk, its device in sysfs, then interrupts named after the
/// device in /proc/interrupts (virtio-blk: `virtioN-req.Q`), else the PCI
/// function's MSI vectors, else its legacy `irq`.
pub fn device_irqs(st_dev: u64) -> Result<DeviceIrqs, String> {
    let (maj, min) = (libc::major(st_dev), libc::minor(st_dev));
    let link = PathBuf::from(format!("/sys/dev/block/{maj}:{min}"));
    let mut node = std::fs::canonicalize(&link).map_err(|_| {
        format!(
            "device {maj}:{min} is not a block device (no {})",
            link.display()
        )
    })?;
    if node.join("partition").exists() {
        if let Some(p) = node.parent() {
            node = p.to_path_buf();
        }
    }
    let disk = node
        .file_name()
        .map(|s| s.to_string_lossy().to_string())
        .unwrap_or_default();
    let dev = match std::fs::canonicalize(node.join("device")) {
        Ok(d) => d,
        Err(_) => {
            return Err(format!(
                "{disk} ({maj}:{min}) is a virtual block device with no interrupt of its own"
            ))
        }
    };
    let interrupts = std::fs::read_to_string("/proc/interrupts").unwrap_or_default();
    // Walk from the device up towards the bus looking for named vectors.
    let mut cur: Option<&Path> = Some(&dev);
    while let Some(d) = cur {
        let name = d
            .file_name()
            .map(|s| s.to_string_lossy().to_string())
            .unwrap_or_default();
        if name.starts_with("pci") && !name.contains(':') {
            break;
        }
        let named = named_irqs(&interrupts, &name);
        if !named.is_empty() {
            return Ok(DeviceIrqs {
                device: format!("{disk} ({name})"),
                irqs: named,
            });
        }
        if let Ok(rd) = std::fs::read_dir(d.join("msi_irqs")) {
            let mut v: Vec<u32> = rd
                .flatten()
                .filter_map(|e| e.file_name().to_string_lossy().parse().ok())
                .collect();
            v.sort_unstable();
            if !v.is_empty() {
                return Ok(DeviceIrqs {
                    device: format!("{disk} ({name})"),
                    irqs: v,
                });
            }
        }
        if let Ok(s) = std::fs::read_to_string(d.join("irq")) {
            if let Ok(i) = s.trim().parse::<u32>() {
                if i > 0 {
                    return Ok(DeviceIrqs {
                        device: format!("{disk} ({name})"),
                        irqs: vec![i],
                    });
                }
            }
        }
        cur = d.parent();
    }
    Err(format!("found no interrupt for {disk} ({})", dev.display()))
}

/// Interrupt numbers whose /proc/interrupts action names `dev` as a request
/// queue (`virtio1-req.0`, `virtio1-request`, `nvme0q1`), not its config
/// vector.
pub(crate) fn named_irqs(interrupts: &str, dev: &str) -> Vec<u32> {
    let mut v = Vec::new();
    if dev.is_empty() {
        return v;
    }
    for line in interrupts.lines() {
        let Some((num, rest)) = line.trim_start().split_once(':') else {
            continue;
        };
        let Ok(irq) = num.trim().parse::<u32>() else {
            continue;
        };
        let Some(action) = rest.split_whitespace().last() else {
            continue;
        };
        let queue = action
            .strip_prefix(dev)
            .map(|t| t.starts_with("-req") || (dev.starts_with("nvme") && t.starts_with('q')))
            .unwrap_or(false);
        if queue {
            v.push(irq);
        }
    }
    v
}

/// Interrupts a live run other than this process holds routed, with the
/// holder's pid.
fn held_elsewhere() -> Vec<(u32, u32)> {
    restore::live_journals(&restore::run_dir())
        .into_iter()
        .flat_map(|j| {
            j.actions.into_iter().filter_map(move |a| match a {
                Action::IrqAffinity { irq, .. } => Some((irq, j.pid)),
                _ => None,
            })
        })
        .collect()
}

fn write_affinity(irq: u32, list: &str) -> io::Result<()> {
    std::fs::write(
        format!("/proc/irq/{irq}/smp_affinity_list"),
        format!("{list}\n"),
    )
}

/// The kernel makes a managed interrupt's affinity file read-only (0444).
pub fn affinity_writable(irq: u32) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(format!("/proc/irq/{irq}/smp_affinity_list"))
        .map(|m| m.permissions().mode() & 0o200 != 0)
        .unwrap_or(false)
}

/// CPUs an interrupt is really delivered to.
pub fn effective_cpus(irq: u32) -> Vec<u32> {
    let s = std::fs::read_to_string(format!("/proc/irq/{irq}/effective_affinity_list"))
        .unwrap_or_default();
    let mut v = Vec::new();
    for part in s.trim().split(',').filter(|p| !p.is_empty()) {
        let (a, b) = part.split_once('-').unwrap_or((part, part));
        if let (Ok(a), Ok(b)) = (a.parse::<u32>(), b.parse::<u32>()) {
            v.extend(a..=b);
        }
    }
    v
}

fn is_root() -> bool {
    // SAFETY: plain syscall.
    unsafe { libc::geteuid() == 0 }
}

pub fn read_affinity(irq: u32) -> io::Result<String> {
    Ok(
        std::fs::read_to_string(format!("/proc/irq/{irq}/smp_affinity_list"))?
            .trim()
            .to_string(),
    )
}

/// Replays the restore journal of every punctual run that is gone
/// (interrupt routes, and whatever else a killed run of any verb left),
/// deletes those journals, and says what it did.
pub fn recover_stale() -> Vec<String> {
    let rep = restore::cleanup_stale(&restore::run_dir());
    rep.undone.into_iter().chain(rep.problems).collect()
}

/// Interrupts routed to one CPU for as long as this value lives.
#[derive(Debug)]
pub struct IrqRoute {
    journal: Restore,
    irqs: Vec<u32>,
    done: bool,
}

/// Why routing did not happen: `Managed` interrupts belong to the kernel's
/// per-queue spreading and cannot be moved (the disk load then pins its
/// readers to the CPU instead, so the queue served there completes there).
#[derive(Debug)]
pub enum RouteError {
    Managed(String),
    Refused(String),
}

static SEQ: AtomicU32 = AtomicU32::new(0);

impl IrqRoute {
    /// Journals the old affinities, then points every irq at `cpu`.
    pub fn route(irqs: &[u32], cpu: u32) -> Result<IrqRoute, RouteError> {
        let refused = RouteError::Refused;
        if let Some((irq, pid)) = held_elsewhere().into_iter().find(|(i, _)| irqs.contains(i)) {
            return Err(refused(format!(
                "IRQ {irq} is already routed by punctual pid {pid}"
            )));
        }
        let mut saved = Vec::new();
        for &i in irqs {
            if !affinity_writable(i) {
                return Err(RouteError::Managed(format!(
                    "IRQ {i} is kernel-managed (its smp_affinity_list is read-only)"
                )));
            }
            let a = read_affinity(i)
                .map_err(|e| refused(format!("cannot read IRQ {i} affinity: {e}")))?;
            saved.push(Action::IrqAffinity {
                irq: i,
                affinity_list: a,
            });
        }
        let dir = restore::run_dir();
        let stem = format!(
            "irq-restore-{}-{}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        );
        let mut journal = Restore::create_named(&dir, &stem).map_err(|e| {
            refused(format!(
                "cannot create {} for the restore journal: {e}",
                dir.display()
            ))
        })?;
        for a in saved {
            journal.note(a);
        }
        journal
            .flush()
            .map_err(|e| refused(format!("cannot write {}: {e}", journal.path().display())))?;
        let mut route = IrqRoute {
            journal,
            irqs: Vec::new(),
            done: false,
        };
        for &i in irqs {
            if let Err(e) = write_affinity(i, &cpu.to_string()) {
                let msg = format!("cannot route IRQ {i} to CPU {cpu}: {e}");
                // Undo whatever was already moved, now; the rest was never
                // changed.
                let moved = route.irqs.clone();
                let _ = route.journal.forget(
                    |a| matches!(a, Action::IrqAffinity { irq, .. } if !moved.contains(irq)),
                );
                route.restore();
                return Err(match e.raw_os_error() {
                    Some(libc::EIO) | Some(libc::EPERM) if is_root() => {
                        RouteError::Managed(format!("{msg} (kernel-managed interrupt)"))
                    }
                    _ => RouteError::Refused(msg),
                });
            }
            route.irqs.push(i);
        }
        Ok(route)
    }

    pub fn irqs(&self) -> Vec<u32> {
        self.irqs.clone()
    }

    /// Puts the old affinities back and deletes the journal (idempotent).
    /// Returns sentences for anything that could not be restored.
    pub fn restore(&mut self) -> Vec<String> {
        if self.done {
            return Vec::new();
        }
        self.done = true;
        self.journal.undo_all()
    }
}

impl Drop for IrqRoute {
    fn drop(&mut self) {
        for m in self.restore() {
            eprintln!("punctual: {m}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_queue_vectors_not_config() {
        let t = " 35:          0          1 PCI-MSIX-0000:00:02.0   0-edge      virtio1-config
 36:          0      85562 PCI-MSIX-0000:00:02.0   1-edge      virtio1-req.0
 37:          0          0 PCI-MSIX-0000:00:03.0   0-edge      virtio2-config
 40:          3          0 PCI-MSIX-0000:00:04.0   1-edge      virtio11-req.0
 50:          3          0 PCI-MSIX-0000:00:05.0   1-edge      nvme0q1
 51:          3          0 PCI-MSIX-0000:00:05.0   1-edge      nvme0q2
LOC:      53953      60371   Local timer interrupts
";
        assert_eq!(named_irqs(t, "virtio1"), vec![36]);
        assert_eq!(named_irqs(t, "nvme0"), vec![50, 51]);
        assert!(named_irqs(t, "virtio2").is_empty());
    }

    /// A holder that dies without unwinding (SIGKILL) leaves its journal;
    /// recovery must put the interrupt back. Uses a real, movable IRQ.
    #[test]
    fn journal_restores_after_a_hard_death() {
        if !is_root() {
            eprintln!("skipped: changing IRQ affinity needs root");
            return;
        }
        let online = crate::util::online_cpus();
        if online.len() < 2 {
            eprintln!("skipped: needs two CPUs to move an interrupt");
            return;
        }
        let text = std::fs::read_to_string("/proc/interrupts").unwrap_or_default();
        let irq = text.lines().find_map(|l| {
            let (n, _) = l.trim_start().split_once(':')?;
            let i: u32 = n.trim().parse().ok()?;
            (affinity_writable(i) && read_affinity(i).is_ok()).then_some(i)
        });
        let Some(irq) = irq else {
            eprintln!("skipped: no interrupt with a writable affinity here");
            return;
        };
        let before = read_affinity(irq).unwrap();
        let target = if before == online[0].to_string() {
            online[1]
        } else {
            online[0]
        };
        let route = IrqRoute::route(&[irq], target).unwrap();
        assert_eq!(read_affinity(irq).unwrap(), target.to_string());
        let journal = route.journal.path().to_path_buf();
        // What SIGKILL does: no Drop, the journal stays.
        std::mem::forget(route);
        assert!(journal.exists());
        // Hand the journal to a process that is gone.
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let dead = child.id();
        child.wait().unwrap();
        let mut j: restore::Journal =
            serde_json::from_str(&std::fs::read_to_string(&journal).unwrap()).unwrap();
        j.pid = dead;
        std::fs::write(&journal, serde_json::to_string(&j).unwrap()).unwrap();
        let said = recover_stale();
        assert_eq!(read_affinity(irq).unwrap(), before, "{said:?}");
        assert!(!journal.exists());
        assert!(
            said.iter().any(|m| m.contains(&format!("IRQ {irq}"))),
            "{said:?}"
        );
    }

    #[test]
    fn live_journals_are_left_alone() {
        if !is_root() {
            eprintln!("skipped: /run/punctual needs root");
            return;
        }
        std::fs::create_dir_all(JOURNAL_DIR).unwrap();
        let pid = std::process::id();
        let p = PathBuf::from(format!("{JOURNAL_DIR}/irq-restore-{pid}-test.json"));
        let j = restore::Journal {
            pid,
            start_time: punctual_live::sysinfo::proc_start_time(pid).unwrap(),
            // An IRQ number no machine has: restoring it would fail loudly.
            actions: vec![Action::IrqAffinity {
                irq: 999_999,
                affinity_list: "0".into(),
            }],
        };
        std::fs::write(&p, serde_json::to_string(&j).unwrap()).unwrap();
        let said = recover_stale();
        let still = p.exists();
        let _ = std::fs::remove_file(&p);
        assert!(still, "a live process's journal was consumed: {said:?}");
        assert!(!said.iter().any(|m| m.contains("999999")), "{said:?}");
    }

    #[test]
    fn root_filesystem_device_resolves_or_says_why() {
        // Either the device's irqs, or a sentence (containers, overlayfs).
        use std::os::unix::fs::MetadataExt;
        let dev = std::fs::metadata("/var/tmp").unwrap().dev();
        match device_irqs(dev) {
            Ok(d) => assert!(!d.irqs.is_empty(), "{d:?}"),
            Err(e) => assert!(!e.is_empty()),
        }
    }
}
