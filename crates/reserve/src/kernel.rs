//! What the kernel will and will not do for a reservation: budget
//! enforcement granularity (tick vs HRTICK), deadline bandwidth limits and
//! what is already admitted, and a sentence explaining a refusal.

use std::fs;
use std::path::{Path, PathBuf};

use punctual_units::Nanos;
use serde::Serialize;

use punctual_live::restore::{Action, Restore as Journal};
pub use punctual_record::reserve::{Bandwidth, DlTask, Hrtick, Quiesce, Repair};

/// Facts read from /proc/config.gz (absent when the kernel does not
/// publish its configuration).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct KernelConfig {
    pub hz: Option<u32>,
    pub sched_hrtick: Option<bool>,
    pub irq_time_accounting: Option<bool>,
}

pub fn kernel_config() -> KernelConfig {
    match punctual_live::sysinfo::running_kernel_config() {
        Some(text) => parse_config(&text),
        None => KernelConfig::default(),
    }
}

fn parse_config(text: &str) -> KernelConfig {
    let mut c = KernelConfig {
        sched_hrtick: Some(false),
        irq_time_accounting: Some(false),
        ..Default::default()
    };
    for l in text.lines() {
        if let Some(v) = l.strip_prefix("CONFIG_HZ=") {
            c.hz = v.trim().parse().ok();
        } else if l == "CONFIG_SCHED_HRTICK=y" {
            c.sched_hrtick = Some(true);
        } else if l == "CONFIG_IRQ_TIME_ACCOUNTING=y" {
            c.irq_time_accounting = Some(true);
        }
    }
    c
}

/// Where sched/features and sched/debug can be read: the standard debugfs
/// mount, or a private debugfs mount made for this run (journaled, so it is
/// undone with everything else; private so that it never disturbs another
/// user of /sys/kernel/debug).
pub fn sched_debug_dir(journal: Option<&mut Journal>) -> Option<PathBuf> {
    let std_dir = Path::new("/sys/kernel/debug/sched");
    if std_dir.join("debug").exists() {
        return Some(std_dir.to_path_buf());
    }
    let j = journal?;
    let dir = j
        .path()
        .parent()?
        .join(format!("debugfs-{}", std::process::id()));
    if dir.join("sched/debug").exists() {
        return Some(dir.join("sched"));
    }
    fs::create_dir_all(&dir).ok()?;
    j.record(Action::Mount {
        target: dir.clone(),
        shared: false,
    })
    .ok()?;
    let target = std::ffi::CString::new(dir.as_os_str().as_encoded_bytes()).ok()?;
    // SAFETY: all pointers are valid NUL-terminated strings or null data.
    let r = unsafe {
        libc::mount(
            c"none".as_ptr(),
            target.as_ptr(),
            c"debugfs".as_ptr(),
            libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
            std::ptr::null(),
        )
    };
    if r != 0 {
        return None;
    }
    Some(dir.join("sched"))
}

/// Reads the HRTICK state from sched/features.
pub fn hrtick_state(cfg: &KernelConfig, sched_dir: Option<&Path>) -> Hrtick {
    if cfg.sched_hrtick == Some(false) {
        return Hrtick::NotBuilt;
    }
    let Some(dir) = sched_dir else {
        return Hrtick::Unknown {
            reason: "debugfs is not mounted and could not be mounted".into(),
        };
    };
    match fs::read_to_string(dir.join("features")) {
        Ok(t) => parse_features(&t),
        Err(e) => Hrtick::Unknown {
            reason: format!("reading {} failed: {e}", dir.join("features").display()),
        },
    }
}

fn parse_features(text: &str) -> Hrtick {
    let words: Vec<&str> = text.split_whitespace().collect();
    for name in ["HRTICK_DL", "HRTICK"] {
        if words.contains(&name) {
            return Hrtick::On {
                feature: name.into(),
            };
        }
        if words.contains(&format!("NO_{name}").as_str()) {
            return Hrtick::Off {
                feature: name.into(),
            };
        }
    }
    Hrtick::NotBuilt
}

/// Turns HRTICK on for the run (journaled: it is switched back off on
/// every exit path).
pub fn enable_hrtick(
    journal: &mut Journal,
    sched_dir: &Path,
    state: &Hrtick,
) -> Result<(), String> {
    match state {
        Hrtick::On { .. } => Ok(()),
        Hrtick::Off { feature } => journal
            .set_knob(
                &sched_dir.join("features"),
                feature,
                &format!("NO_{feature}"),
            )
            .map_err(|e| format!("could not enable {feature}: {e}")),
        Hrtick::NotBuilt => {
            Err("--hrtick: this kernel was built without CONFIG_SCHED_HRTICK".into())
        }
        Hrtick::Unknown { reason } => Err(format!(
            "--hrtick: the scheduler features cannot be changed here ({reason})"
        )),
    }
}

/// Every SCHED_DEADLINE thread currently on the system.
pub fn deadline_tasks() -> Vec<DlTask> {
    let mut out = Vec::new();
    for (pid, tid) in punctual_live::sysinfo::all_threads() {
        if let Ok(a) = punctual_live::rt::sched_getattr(tid) {
            if a.sched_policy == punctual_live::rt::SCHED_DEADLINE {
                let comm = fs::read_to_string(format!("/proc/{pid}/task/{tid}/comm"))
                    .unwrap_or_default()
                    .trim()
                    .to_string();
                out.push(DlTask {
                    tid,
                    comm,
                    runtime_ns: Nanos(a.sched_runtime),
                    period_ns: Nanos(a.sched_period),
                });
            }
        }
    }
    out
}

pub fn bandwidth(sched_dir: Option<&Path>) -> Bandwidth {
    let rt = |f: &str| -> Option<i64> {
        fs::read_to_string(format!("/proc/sys/kernel/{f}"))
            .ok()?
            .trim()
            .parse()
            .ok()
    };
    let limit = match (rt("sched_rt_runtime_us"), rt("sched_rt_period_us")) {
        (Some(r), Some(p)) if r >= 0 && p > 0 => Some(r as f64 / p as f64),
        _ => None,
    };
    let tasks = deadline_tasks();
    // Folded from +0.0: an empty f64 sum is -0.0, which prints as "-0.0%".
    let used = tasks
        .iter()
        .map(|t| t.runtime_ns.0 as f64 / t.period_ns.0.max(1) as f64)
        .fold(0.0, |a, b| a + b);
    let rd = sched_dir
        .and_then(|d| fs::read_to_string(d.join("debug")).ok())
        .map(|t| parse_dl_bw(&t))
        .unwrap_or_default();
    Bandwidth {
        limit_per_cpu_ratio: limit,
        root_domain_in_use_ratio: rd,
        tasks_in_use_ratio: used,
        tasks,
    }
}

/// Each CPU's root-domain deadline bandwidth now (ratio of one CPU), from
/// sched/debug; empty when it cannot be read.
pub fn root_domain_bandwidth(sched_dir: Option<&Path>) -> Vec<(u32, f64)> {
    sched_dir
        .and_then(|d| fs::read_to_string(d.join("debug")).ok())
        .map(|t| parse_dl_bw(&t))
        .unwrap_or_default()
}

/// Waits until the deadline bandwidth of reservations that just ended has
/// left the root domains of `cpus`, before those root domains are rebuilt
/// (a cpuset partition taken down).
///
/// Why: when a deadline task leaves the class or exits before its 0-lag
/// time, the kernel keeps its bandwidth admitted and releases it only
/// when the task's inactive timer fires at that time (sched-deadline.rst,
/// bandwidth reclaiming), which is at the latest its current absolute
/// deadline, i.e. within one relative deadline. A root-domain rebuild in
/// between recomputes the totals from the tasks still in the class, so the
/// late release is then subtracted from a total that no longer holds it:
/// seen here as CPU 1's total dropping 0.1% below its fair-server floor
/// after a run whose 0.1% admission probe was released across a rebuild.
/// A full reservation released that way would make the total wrap, and
/// admission refuses everything (EBUSY) until the next rebuild. So the
/// partition stays until the release happened: polled on `baseline` (the
/// totals right after the partition was made, before anything was
/// admitted) where sched/debug is readable, else the bound is waited out.
pub fn wait_released(
    sched_dir: Option<&Path>,
    baseline: &[(u32, f64)],
    cpus: &[u32],
    bound: Nanos,
) -> Quiesce {
    let start = punctual_live::clock::mono();
    let deadline = start + bound;
    let released = |now: &[(u32, f64)]| {
        cpus.iter().all(|c| {
            match (
                now.iter().find(|x| x.0 == *c),
                baseline.iter().find(|x| x.0 == *c),
            ) {
                // 2^-20 rounding of several tasks' shares.
                (Some(n), Some(b)) => n.1 <= b.1 + 1e-5,
                _ => false,
            }
        })
    };
    let readable = !root_domain_bandwidth(sched_dir).is_empty() && !baseline.is_empty();
    loop {
        let now = punctual_live::clock::mono();
        if readable && released(&root_domain_bandwidth(sched_dir)) {
            return Quiesce {
                waited_ns: now - start,
                how: "polled".into(),
            };
        }
        if now >= deadline {
            return Quiesce {
                waited_ns: now - start,
                how: if readable { "timeout" } else { "bound" }.into(),
            };
        }
        std::thread::sleep(std::time::Duration::from_millis(if readable {
            1
        } else {
            5
        }));
    }
}

/// Root-domain totals as a sentence shows them: `CPU0 10.0%, CPU1 10.0%`.
pub fn format_totals(totals: &[(u32, f64)]) -> String {
    totals
        .iter()
        .map(|(c, x)| format!("CPU{c} {:.1}%", x * 100.0))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The CPUs whose root-domain deadline total is below zero.
pub fn negative_totals(totals: &[(u32, f64)]) -> Vec<(u32, f64)> {
    // Half a 2^-20 unit: anything below is a real negative count.
    totals
        .iter()
        .copied()
        .filter(|(_, x)| *x < -0.5 / (1u64 << 20) as f64)
        .collect()
}

/// Clears a negative root-domain deadline total by rebuilding the root
/// domains (`rebuild`, e.g. making and taking down a cpuset partition).
///
/// Why: on the 6.18 kernel of our CI machine, back-to-back reserve runs
/// have left `dl_bw->total_bw` at -104859 (minus the two 5% fair servers)
/// after their partition came down: the bandwidth of a reservation that
/// ended was subtracted from a total that a rebuild had already recomputed
/// without it (see [`wait_released`]). A total below zero is a kernel
/// accounting error that makes admission refuse every SCHED_DEADLINE task
/// on the machine (EBUSY) until the next rebuild, which recomputes the
/// totals from the deadline tasks and servers that really exist. It is
/// reproducible with a run killed by SIGKILL and cleaned up at once: its
/// dead threads' bandwidth is released at their 0-lag time, after the
/// cleanup's rebuild. So the totals are watched for `window` (a late
/// release lands within one relative deadline), every 2 ms, and read once
/// more at its end; nothing is done when none goes negative, and at most
/// three rebuilds are made in all.
pub fn repair_negative_totals(
    sched_dir: Option<&Path>,
    window: Nanos,
    mut rebuild: impl FnMut() -> Result<(), String>,
) -> Result<Option<Repair>, String> {
    let end = punctual_live::clock::mono() + window;
    let mut rep: Option<Repair> = None;
    loop {
        let last = punctual_live::clock::mono() >= end;
        let found = negative_totals(&root_domain_bandwidth(sched_dir));
        if !found.is_empty() {
            let r = rep.get_or_insert(Repair {
                found,
                rebuilds: 0,
                after: Vec::new(),
                repaired: false,
            });
            if r.rebuilds >= 3 {
                r.after = root_domain_bandwidth(sched_dir);
                r.repaired = false;
                return Ok(rep);
            }
            rebuild()?;
            r.rebuilds += 1;
            r.after = root_domain_bandwidth(sched_dir);
            r.repaired = negative_totals(&r.after).is_empty();
            continue;
        }
        if last {
            return Ok(rep);
        }
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
}

/// Parses `dl_rq[N]: … .dl_bw->total_bw : X` (2^-20 units) per CPU.
fn parse_dl_bw(text: &str) -> Vec<(u32, f64)> {
    let mut out = Vec::new();
    let mut cpu = None;
    for l in text.lines() {
        let t = l.trim();
        if let Some(rest) = t.strip_prefix("dl_rq[") {
            cpu = rest.split(']').next().and_then(|n| n.parse::<u32>().ok());
        } else if let (Some(c), Some(v)) = (cpu, t.strip_prefix(".dl_bw->total_bw")) {
            // Signed: the kernel prints it with %lld, and a total driven
            // below zero is exactly the state worth seeing (see
            // repair_negative_totals).
            if let Ok(x) = v.trim().trim_start_matches(':').trim().parse::<i64>() {
                out.push((c, x as f64 / (1u64 << 20) as f64));
            }
            cpu = None;
        }
    }
    out
}

/// One sentence for a refused sched_setattr: what was asked, what is in
/// use, the limit, and what the user can change. Never suggests disabling
/// admission control.
pub fn explain_refusal(
    err: &std::io::Error,
    runtime: Nanos,
    period: Nanos,
    cpus_in_domain: u32,
    bw: &Bandwidth,
) -> String {
    let asked = runtime.0 as f64 / period.0 as f64;
    let pct = |x: f64| format!("{:.1}%", x * 100.0);
    let limit = match bw.limit_per_cpu_ratio {
        Some(l) => format!(
            "{} of each of {cpus_in_domain} CPU(s) (kernel.sched_rt_runtime_us / sched_rt_period_us)",
            pct(l)
        ),
        None => "unlimited".into(),
    };
    let in_use = if bw.root_domain_in_use_ratio.is_empty() {
        format!(
            "{} by {} deadline thread(s)",
            pct(bw.tasks_in_use_ratio),
            bw.tasks.len()
        )
    } else {
        format!(
            "{} by {} user deadline thread(s); root-domain totals incl. the kernel's fair servers: {}",
            pct(bw.tasks_in_use_ratio),
            bw.tasks.len(),
            format_totals(&bw.root_domain_in_use_ratio)
        )
    };
    let negative = negative_totals(&bw.root_domain_in_use_ratio);
    if err.raw_os_error() == Some(libc::EBUSY) && !negative.is_empty() {
        return format!(
            "admission control refused {runtime}/{period} because the kernel's deadline bandwidth total is below zero ({}), an accounting error an earlier root-domain rebuild can leave that refuses every SCHED_DEADLINE task; `punctual reserve --cleanup` rebuilds the root domains and clears it",
            format_totals(&negative)
        );
    }
    match err.raw_os_error() {
        Some(libc::EPERM) | Some(libc::EACCES) => format!(
            "SCHED_DEADLINE was refused ({err}): it needs root or CAP_SYS_NICE, and a thread whose CPU affinity is narrower than its root domain (use --cpu N to get an exclusive partition instead of pinning)"
        ),
        Some(libc::EBUSY) => format!(
            "admission control refused {runtime}/{period} ({} of a CPU): bandwidth in use {in_use}; limit {limit} (a reservation released less than one period ago still holds its bandwidth until its deadline); lower --budget or --over-reserve/--max-budget, lengthen --period, or end other deadline tasks",
            pct(asked)
        ),
        _ => format!(
            "sched_setattr({runtime}/{period}) failed: {err} (bandwidth in use {in_use}; limit {limit})"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_config_features_and_dl_bw() {
        let c = parse_config(
            "CONFIG_HZ=250\nCONFIG_SCHED_HRTICK=y\n# CONFIG_IRQ_TIME_ACCOUNTING is not set\n",
        );
        assert_eq!(c.hz, Some(250));
        assert_eq!(c.sched_hrtick, Some(true));
        assert_eq!(c.irq_time_accounting, Some(false));
        assert_eq!(
            parse_features("GENTLE_FAIR_SLEEPERS NO_HRTICK HRTICK_DL WAKEUP_PREEMPTION"),
            Hrtick::On {
                feature: "HRTICK_DL".into()
            }
        );
        assert_eq!(
            parse_features("NO_HRTICK NO_HRTICK_DL"),
            Hrtick::Off {
                feature: "HRTICK_DL".into()
            }
        );
        assert!(parse_features("NO_HRTICK").enforced_at_tick());
        let d = "dl_rq[0]:\n  .dl_nr_running : 0\n  .dl_bw->bw : 996147\n  .dl_bw->total_bw : 104856\n\ndl_rq[1]:\n  .dl_bw->total_bw : 0\n";
        let v = parse_dl_bw(d);
        assert_eq!(v.len(), 2);
        assert!((v[0].1 - 0.1).abs() < 1e-3);
        assert_eq!(v[1], (1, 0.0));
    }

    #[test]
    fn refusal_sentences_name_use_and_limit() {
        let bw = Bandwidth {
            limit_per_cpu_ratio: Some(0.95),
            root_domain_in_use_ratio: vec![(1, 0.85)],
            tasks_in_use_ratio: 0.8,
            tasks: vec![],
        };
        let busy = std::io::Error::from_raw_os_error(libc::EBUSY);
        let s = explain_refusal(&busy, Nanos::from_ms(4), Nanos::from_ms(20), 1, &bw);
        assert!(
            s.contains("20.0%") && s.contains("80.0%") && s.contains("95.0%"),
            "{s}"
        );
        assert!(!s.contains("sched_rt_runtime_us=-1"));
        let perm = std::io::Error::from_raw_os_error(libc::EPERM);
        let s = explain_refusal(&perm, Nanos::from_ms(4), Nanos::from_ms(20), 1, &bw);
        assert!(s.contains("CAP_SYS_NICE"), "{s}");
    }
    #[test]
    fn negative_totals_are_read_named_and_rebuilt_away() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().to_path_buf();
        let dbg = |cpu0: i64| {
            format!(
                "dl_rq[0]:\n  .dl_bw->total_bw : {cpu0}\ndl_rq[1]:\n  .dl_bw->total_bw : {cpu0}\n"
            )
        };
        // The state seen on this kernel after back-to-back runs.
        fs::write(d.join("debug"), dbg(-104859)).unwrap();
        let now = root_domain_bandwidth(Some(&d));
        assert_eq!(now.len(), 2, "a negative total must not be dropped");
        assert!((now[0].1 + 0.1).abs() < 1e-3, "{now:?}");
        assert_eq!(negative_totals(&now).len(), 2);
        assert!(negative_totals(&[(0, 0.0), (1, 0.05)]).is_empty());

        // Admission refused because of it: the sentence says so and how to fix it.
        let bw = Bandwidth {
            limit_per_cpu_ratio: Some(0.95),
            root_domain_in_use_ratio: now.clone(),
            tasks_in_use_ratio: 0.0,
            tasks: vec![],
        };
        let busy = std::io::Error::from_raw_os_error(libc::EBUSY);
        let s = explain_refusal(&busy, Nanos::from_ms(4), Nanos::from_ms(20), 1, &bw);
        assert!(
            s.contains("below zero") && s.contains("CPU0 -10.0%") && s.contains("--cleanup"),
            "{s}"
        );

        // A rebuild that works: one call, totals back.
        let mut calls = 0;
        let rep = repair_negative_totals(Some(&d), Nanos(0), || {
            calls += 1;
            fs::write(d.join("debug"), dbg(52428)).map_err(|e| e.to_string())
        })
        .unwrap()
        .expect("negative totals must be repaired");
        assert_eq!((calls, rep.rebuilds, rep.repaired), (1, 1, true));
        assert_eq!(rep.found.len(), 2);
        assert!(rep.after.iter().all(|x| x.1 > 0.0));

        // Healthy totals: nothing is rebuilt.
        let rep = repair_negative_totals(Some(&d), Nanos(0), || Err("must not be called".into()))
            .unwrap();
        assert_eq!(rep, None);

        // A rebuild that does not help is tried three times, then reported.
        fs::write(d.join("debug"), dbg(-3)).unwrap();
        let mut calls = 0;
        let rep = repair_negative_totals(Some(&d), Nanos(0), || {
            calls += 1;
            Ok(())
        })
        .unwrap()
        .unwrap();
        assert_eq!((calls, rep.rebuilds, rep.repaired), (3, 3, false));
        // A rebuild that fails is an error, not a silent pass.
        assert!(repair_negative_totals(Some(&d), Nanos(0), || Err("no cpuset".into())).is_err());
    }

    #[test]
    fn teardown_waits_for_released_bandwidth_by_polling_or_the_bound() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let dbg = |cpu1: u64| {
            format!(
                "dl_rq[0]:\n  .dl_bw->total_bw : 52428\ndl_rq[1]:\n  .dl_bw->total_bw : {cpu1}\n"
            )
        };
        fs::write(d.join("debug"), dbg(52428)).unwrap();
        let base = root_domain_bandwidth(Some(d));
        assert_eq!(base.len(), 2);
        // Still held (a 20% reservation not yet released): times out.
        fs::write(d.join("debug"), dbg(52428 + 209715)).unwrap();
        let q = wait_released(Some(d), &base, &[1], Nanos::from_ms(15));
        assert_eq!(q.how, "timeout");
        assert!(q.waited_ns >= Nanos::from_ms(15));
        // Released (or released across a rebuild, below the floor): done.
        fs::write(d.join("debug"), dbg(52428 - 1048)).unwrap();
        let q = wait_released(Some(d), &base, &[1], Nanos::from_ms(500));
        assert_eq!(q.how, "polled");
        assert!(q.waited_ns < Nanos::from_ms(100), "{:?}", q.waited_ns);
        // Unreadable: the bound is waited out.
        let q = wait_released(None, &base, &[1], Nanos::from_ms(12));
        assert_eq!(q.how, "bound");
        assert!(q.waited_ns >= Nanos::from_ms(12));
    }
}
