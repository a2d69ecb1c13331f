//! Platform facts every record carries (Basham's VMBus note: utilization and latency
//! mean nothing without CPU model, frequency policy, SMT, NUMA and
//! virtualization), and the warnings that say what to change.
//!
//! Every reader is best-effort: a fact that cannot be read stays `None`
//! rather than being guessed. The parsing is split from the file reading
//! so it is tested on fixed text.

use std::collections::BTreeSet;
use std::io::Read;
use std::path::Path;

use punctual_record::{IdleState, IrqInfo, Platform, Warning};

fn read(path: impl AsRef<Path>) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()
        .map(|s| s.trim().to_string())
}

/// Why a CPU list did not parse; each caller words it for its flag.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CpuListError {
    /// Empty, or a part that is not `N` or `N-M`.
    NotAList,
    /// A range whose start is above its end.
    Backwards(u32, u32),
}

impl std::fmt::Display for CpuListError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CpuListError::NotAList => f.write_str("not a CPU list (use e.g. 0, 0,1 or 0-3)"),
            CpuListError::Backwards(a, b) => write!(f, "range {a}-{b} is backwards"),
        }
    }
}

impl std::error::Error for CpuListError {}

/// Expands a CPU list as the kernel writes it and users type it
/// (`0-3,8`), in order, each CPU once.
pub fn parse_cpu_list(s: &str) -> Result<Vec<u32>, CpuListError> {
    let s = s.trim();
    if s.is_empty() {
        return Err(CpuListError::NotAList);
    }
    let mut v = Vec::new();
    for part in s.split(',') {
        let (a, b) = part.split_once('-').unwrap_or((part, part));
        let num = |t: &str| t.trim().parse::<u32>().map_err(|_| CpuListError::NotAList);
        let (a, b) = (num(a)?, num(b)?);
        if a > b {
            return Err(CpuListError::Backwards(a, b));
        }
        for c in a..=b {
            if !v.contains(&c) {
                v.push(c);
            }
        }
    }
    Ok(v)
}

/// The CPUs online now (`/sys/devices/system/cpu/online`); when that
/// cannot be read, CPUs 0 to the number this process may use.
pub fn online_cpus() -> Vec<u32> {
    if let Some(v) = read("/sys/devices/system/cpu/online").and_then(|t| parse_cpu_list(&t).ok()) {
        return v;
    }
    let n = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1) as u32;
    (0..n).collect()
}

/// Every thread on the machine as (process id, thread id), read from
/// `/proc/PID/task`: the one walker over all threads, for those who look
/// for deadline threads, threads by name, or every thread's affinity.
pub fn all_threads() -> Vec<(i32, i32)> {
    let mut out = Vec::new();
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return out;
    };
    let id = |e: &std::fs::DirEntry| e.file_name().to_str().and_then(|s| s.parse::<i32>().ok());
    for p in procs.flatten() {
        let Some(pid) = id(&p) else { continue };
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
            continue;
        };
        out.extend(tasks.flatten().filter_map(|t| id(&t)).map(|tid| (pid, tid)));
    }
    out
}

/// Start time of `pid` in clock ticks since boot (field 22 of
/// `/proc/<pid>/stat`), if it is alive: with the pid, it names one process
/// even after the pid is reused.
pub fn proc_start_time(pid: u32) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // comm may hold spaces and parentheses: fields start after the last ')'.
    let rest = &s[s.rfind(')')? + 1..];
    // After the comm: state is field 3, starttime field 22.
    rest.split_whitespace().nth(19)?.parse().ok()
}

/// The kernel build configuration, from /proc/config.gz or /boot.
pub fn kernel_config(release: &str) -> Option<String> {
    if let Ok(f) = std::fs::File::open("/proc/config.gz") {
        let mut s = String::new();
        if flate2::read::GzDecoder::new(f)
            .read_to_string(&mut s)
            .is_ok()
        {
            return Some(s);
        }
    }
    std::fs::read_to_string(format!("/boot/config-{release}")).ok()
}

/// The running kernel's build configuration ([`kernel_config`] of its
/// release).
pub fn running_kernel_config() -> Option<String> {
    kernel_config(&uname().1?)
}

/// Facts from a kernel config text: (HZ, NO_HZ mode, preemption model,
/// IRQ time accounting).
pub fn parse_config(cfg: &str) -> (Option<u32>, Option<String>, Option<String>, Option<bool>) {
    // One pass over the config for every key asked below: it is read at
    // the start of every measuring run, and a pass (with an allocation per
    // line) for each of a dozen keys was a visible share of a short run's
    // fixed cost.
    const KEYS: [&str; 11] = [
        "NO_HZ_FULL",
        "NO_HZ_IDLE",
        "NO_HZ",
        "HZ_PERIODIC",
        "PREEMPT_RT",
        "PREEMPT",
        "PREEMPT_LAZY",
        "PREEMPT_VOLUNTARY",
        "PREEMPT_NONE",
        "PREEMPT_DYNAMIC",
        "IRQ_TIME_ACCOUNTING",
    ];
    let mut set = [false; KEYS.len()];
    for l in cfg.lines() {
        if let Some(k) = l
            .trim()
            .strip_prefix("CONFIG_")
            .and_then(|l| l.strip_suffix("=y"))
        {
            if let Some(i) = KEYS.iter().position(|x| *x == k) {
                set[i] = true;
            }
        }
    }
    let on = |k: &str| {
        let i = KEYS.iter().position(|x| *x == k);
        debug_assert!(i.is_some(), "CONFIG_{k} is not among the keys read");
        i.is_some_and(|i| set[i])
    };
    let hz = cfg
        .lines()
        .find_map(|l| l.strip_prefix("CONFIG_HZ="))
        .and_then(|v| v.trim().parse().ok());
    let nohz = if on("NO_HZ_FULL") {
        Some("full".to_string())
    } else if on("NO_HZ_IDLE") || on("NO_HZ") {
        Some("idle".to_string())
    } else if on("HZ_PERIODIC") {
        Some("periodic".to_string())
    } else {
        None
    };
    let base = if on("PREEMPT_RT") {
        Some("rt")
    } else if on("PREEMPT") {
        Some("full")
    } else if on("PREEMPT_LAZY") {
        Some("lazy")
    } else if on("PREEMPT_VOLUNTARY") {
        Some("voluntary")
    } else if on("PREEMPT_NONE") {
        Some("none")
    } else {
        None
    };
    let preempt = match (on("PREEMPT_DYNAMIC"), base) {
        (true, Some(b)) => Some(format!("dynamic({b})")),
        (false, Some(b)) => Some(b.to_string()),
        (true, None) => Some("dynamic".to_string()),
        _ => None,
    };
    let irq_time = if cfg.is_empty() {
        None
    } else {
        Some(on("IRQ_TIME_ACCOUNTING"))
    };
    (hz, nohz, preempt, irq_time)
}

/// The model in force on a PREEMPT_DYNAMIC kernel, from debugfs
/// (`none voluntary (full) lazy`), when mounted.
pub fn parse_debugfs_preempt(s: &str) -> Option<String> {
    s.split_whitespace()
        .find(|w| w.starts_with('(') && w.ends_with(')'))
        .map(|w| w.trim_matches(|c| c == '(' || c == ')').to_string())
}

/// `preempt=` on the kernel command line overrides a dynamic kernel's
/// default.
fn cmdline_value<'a>(cmdline: &'a str, key: &str) -> Option<&'a str> {
    cmdline
        .split_whitespace()
        .take_while(|w| *w != "--")
        .find_map(|w| w.strip_prefix(key).and_then(|r| r.strip_prefix('=')))
}

/// The hypervisor vendor: CPUID leaf 0x40000000 when the hypervisor bit is
/// set (what systemd-detect-virt checks first), else /sys/hypervisor/type.
pub fn hypervisor() -> Option<String> {
    #[cfg(target_arch = "x86_64")]
    {
        // cpuid is available on every x86_64 CPU.
        let l1 = core::arch::x86_64::__cpuid(1);
        if l1.ecx & (1 << 31) != 0 {
            // Leaf 0x40000000 is reserved for hypervisors.
            let l = core::arch::x86_64::__cpuid(0x4000_0000);
            let mut b = Vec::with_capacity(12);
            for r in [l.ebx, l.ecx, l.edx] {
                b.extend_from_slice(&r.to_le_bytes());
            }
            let id = String::from_utf8_lossy(&b)
                .trim_matches(char::from(0))
                .trim()
                .to_string();
            let name = match id.as_str() {
                "KVMKVMKVM" => "KVM".to_string(),
                "Microsoft Hv" => "Microsoft Hyper-V".to_string(),
                "VMwareVMware" => "VMware".to_string(),
                "XenVMMXenVMM" => "Xen".to_string(),
                "TCGTCGTCGTCG" => "QEMU (TCG)".to_string(),
                " lrpepyh  vr" => "Parallels".to_string(),
                "ACRNACRNACRN" => "ACRN".to_string(),
                "" => "unknown hypervisor".to_string(),
                other => other.to_string(),
            };
            return Some(name);
        }
    }
    read("/sys/hypervisor/type").filter(|s| !s.is_empty())
}

fn uname() -> (Option<String>, Option<String>, Option<String>) {
    // SAFETY: utsname is plain data, filled by the kernel.
    let mut u: libc::utsname = unsafe { std::mem::zeroed() };
    // SAFETY: u is writable.
    if unsafe { libc::uname(&mut u) } != 0 {
        return (None, None, None);
    }
    let s = |f: &[libc::c_char]| {
        let b: Vec<u8> = f
            .iter()
            .take_while(|c| **c != 0)
            .map(|c| *c as u8)
            .collect();
        String::from_utf8_lossy(&b).to_string()
    };
    (
        Some(s(&u.nodename)),
        Some(s(&u.release)),
        Some(s(&u.version)),
    )
}

/// Reads every fact this machine exposes.
pub fn collect() -> Platform {
    let mut p = Platform::default();
    let (host, release, version) = uname();
    p.hostname = host;
    let cpu = Path::new("/sys/devices/system/cpu");
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    p.cpu_model = cpuinfo
        .lines()
        .find(|l| {
            l.starts_with("model name") || l.starts_with("Model") || l.starts_with("cpu model")
        })
        .and_then(|l| l.split_once(':'))
        .map(|(_, v)| v.trim().to_string());
    let online_text = read(cpu.join("online"));
    let online = online_text
        .as_deref()
        .and_then(|t| parse_cpu_list(t).ok())
        .unwrap_or_default();
    p.online_cpus = online_text;
    p.logical_cpus = read(cpu.join("possible"))
        .and_then(|s| parse_cpu_list(&s).ok())
        .map(|v| v.len() as u32)
        .or(Some(online.len() as u32).filter(|n| *n > 0));
    let mut pkgs = BTreeSet::new();
    let mut sibs = BTreeSet::new();
    for c in &online {
        let t = cpu.join(format!("cpu{c}/topology"));
        if let Some(x) = read(t.join("physical_package_id")) {
            pkgs.insert(x);
        }
        if let Some(x) =
            read(t.join("thread_siblings_list")).or_else(|| read(t.join("core_cpus_list")))
        {
            sibs.insert(x);
        }
    }
    if !pkgs.is_empty() {
        p.packages = Some(pkgs.len() as u32);
    }
    if let Some(max) = sibs
        .iter()
        .map(|s| parse_cpu_list(s).map_or(0, |v| v.len() as u32))
        .max()
    {
        p.threads_per_core = Some(max);
        if max > 1 {
            p.smt_siblings = sibs.into_iter().collect();
        }
    }
    p.numa_nodes = read("/sys/devices/system/node/online")
        .and_then(|s| parse_cpu_list(&s).ok())
        .map(|v| v.len() as u32)
        .filter(|n| *n > 0);
    p.kernel = match (&release, &version) {
        (Some(r), Some(v)) => Some(format!("{r} {v}")),
        (Some(r), None) => Some(r.clone()),
        _ => None,
    };
    let cfg = release
        .as_deref()
        .and_then(kernel_config)
        .unwrap_or_default();
    let (hz, nohz, preempt, irq_time) = parse_config(&cfg);
    p.hz = hz;
    p.nohz = nohz;
    p.irq_time_accounting = irq_time;
    let cmdline = read("/proc/cmdline").unwrap_or_default();
    let dynamic_now = read("/sys/kernel/debug/sched/preempt")
        .as_deref()
        .and_then(parse_debugfs_preempt);
    p.preemption = match (dynamic_now, cmdline_value(&cmdline, "preempt"), preempt) {
        (Some(m), _, _) => Some(format!("dynamic({m})")),
        (None, Some(m), Some(c)) if c.starts_with("dynamic") => Some(format!("dynamic({m})")),
        (None, _, Some(c)) => Some(c),
        (None, _, None) => version.as_deref().map(|v| {
            if v.contains("PREEMPT_RT") {
                "rt".to_string()
            } else if v.contains("PREEMPT_DYNAMIC") {
                "dynamic".to_string()
            } else if v.contains("PREEMPT") {
                "full".to_string()
            } else {
                "none or voluntary".to_string()
            }
        }),
    };
    if p.nohz.as_deref() != Some("full") && cmdline_value(&cmdline, "nohz_full").is_some() {
        p.nohz = Some("full".to_string());
    }
    p.clocksource = read(cpu.join("../clocksource/clocksource0/current_clocksource"))
        .or_else(|| read("/sys/devices/system/clocksource/clocksource0/current_clocksource"));
    let first = online.first().copied().unwrap_or(0);
    let freq = cpu.join(format!("cpu{first}/cpufreq"));
    p.cpufreq_governor = read(freq.join("scaling_governor"));
    p.cpufreq_min_khz = read(freq.join("scaling_min_freq")).and_then(|s| s.parse().ok());
    p.cpufreq_max_khz = read(freq.join("scaling_max_freq")).and_then(|s| s.parse().ok());
    let idle = cpu.join(format!("cpu{first}/cpuidle"));
    for i in 0.. {
        let d = idle.join(format!("state{i}"));
        if !d.exists() {
            break;
        }
        p.cpuidle_states.push(IdleState {
            name: read(d.join("name")).unwrap_or_else(|| format!("state{i}")),
            exit_latency_us: read(d.join("latency"))
                .and_then(|s| s.parse().ok())
                .unwrap_or(0),
            disabled: read(d.join("disable")).as_deref() == Some("1"),
        });
    }
    p.hypervisor = hypervisor();
    p.isolcpus = read(cpu.join("isolated"))
        .filter(|s| !s.is_empty())
        .or_else(|| cmdline_value(&cmdline, "isolcpus").map(String::from));
    p.nohz_full = read(cpu.join("nohz_full"))
        .filter(|s| !s.is_empty() && s != "(null)")
        .or_else(|| cmdline_value(&cmdline, "nohz_full").map(String::from));
    p.rt_runtime_us = read("/proc/sys/kernel/sched_rt_runtime_us").and_then(|s| s.parse().ok());
    p.rt_period_us = read("/proc/sys/kernel/sched_rt_period_us").and_then(|s| s.parse().ok());
    p.irqs = irqs();
    if let Some(f) = read("/proc/stat").as_deref().and_then(steal_since_boot) {
        p.other.insert(
            "steal_since_boot_percent".into(),
            format!("{:.3}", f * 100.0),
        );
    }
    // The fair server's share is what lifting RT throttling leaves to
    // fair-class work (advise's rt-runtime prediction).
    if let Some(d) = read("/sys/kernel/debug/sched/fair_server/cpu0/runtime") {
        p.other.insert("fair_server_runtime_ns".into(), d);
    }
    if let Some(d) = read("/sys/kernel/debug/sched/fair_server/cpu0/period") {
        p.other.insert("fair_server_period_ns".into(), d);
    }
    let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap_or_default();
    if let Some(c) = cgroup_version(&mounts) {
        p.other.insert("cgroup".into(), c);
    }
    let hrtick = match kernel_config_flag(&cfg, "SCHED_HRTICK") {
        Some(false) => "not built (CONFIG_SCHED_HRTICK is off)".to_string(),
        _ => match read("/sys/kernel/debug/sched/features")
            .or_else(|| read("/sys/kernel/debug/sched_features"))
        {
            Some(f) => hrtick_text(&f),
            None => "unknown (mount debugfs to read sched/features: mount -t debugfs none /sys/kernel/debug)"
                .to_string(),
        },
    };
    p.other.insert("hrtick".into(), hrtick);
    let tracefs = ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"];
    match tracefs
        .iter()
        .find_map(|d| read(Path::new(d).join("available_tracers")))
    {
        Some(t) => {
            p.other.insert("tracers".into(), t);
        }
        None => {
            p.other.insert(
                "tracers".into(),
                "unknown (tracefs not mounted or not readable: mount -t tracefs nodev /sys/kernel/tracing)"
                    .into(),
            );
        }
    }
    if let Some(m) = cpuinfo.lines().find(|l| l.starts_with("flags")).map(|l| {
        let has = |f: &str| l.split_whitespace().any(|x| x == f);
        has("constant_tsc") && has("nonstop_tsc")
    }) {
        p.other.insert("invariant_tsc".into(), m.to_string());
    }
    p
}

/// `Some(true)` when the config sets `CONFIG_<key>=y`, `Some(false)` when it
/// says the option is not set, `None` when the config is unknown or silent.
fn kernel_config_flag(cfg: &str, key: &str) -> Option<bool> {
    let on = format!("CONFIG_{key}=y");
    let off = format!("# CONFIG_{key} is not set");
    cfg.lines().find_map(|l| {
        let l = l.trim();
        (l == on).then_some(true).or((l == off).then_some(false))
    })
}

/// Which cgroup hierarchy the machine mounts: `v2` (unified only), `v1`,
/// or `hybrid` (v1 controllers beside a v2 mount), from /proc/self/mounts.
/// punctual's cpuset partitions use v2 when its cpuset controller is there.
pub fn cgroup_version(mounts: &str) -> Option<String> {
    let types: Vec<&str> = mounts
        .lines()
        .filter_map(|l| l.split_whitespace().nth(2))
        .collect();
    let v1 = types.contains(&"cgroup");
    let v2 = types.contains(&"cgroup2");
    match (v1, v2) {
        (false, true) => Some("v2".into()),
        (true, false) => Some("v1".into()),
        (true, true) => Some("hybrid (v1 controllers and a v2 mount)".into()),
        (false, false) => None,
    }
}

/// The HRTICK state from sched/features: deadline budgets are enforced by
/// a high-resolution timer only when it is on (`HRTICK_DL` on kernels that
/// split it from `HRTICK`), otherwise at the scheduler tick.
pub fn hrtick_text(features: &str) -> String {
    let words: Vec<&str> = features.split_whitespace().collect();
    for name in ["HRTICK_DL", "HRTICK"] {
        if words.contains(&name) {
            return format!(
                "on ({name}: deadline budgets are enforced by a high-resolution timer)"
            );
        }
        if words.contains(&format!("NO_{name}").as_str()) {
            return format!(
                "off ({name}: deadline budgets are enforced at the tick; `punctual reserve --hrtick` switches it on for a run)"
            );
        }
    }
    "not built (no HRTICK in sched/features)".into()
}

/// The kernel tracers punctual can use in place of its own probes, and why
/// each one matters when it is missing.
pub const WANTED_TRACERS: [&str; 2] = ["timerlat", "osnoise"];

/// Hypervisor steal as a fraction of all CPU time since boot (the `cpu`
/// line of /proc/stat), when the kernel reports any.
pub fn steal_since_boot(stat: &str) -> Option<f64> {
    let line = stat.lines().find(|l| l.starts_with("cpu "))?;
    let v: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .filter_map(|x| x.parse().ok())
        .collect();
    // user nice system idle iowait irq softirq steal (guest time is
    // already inside user/nice).
    let total: u64 = v.iter().take(8).sum();
    (v.len() >= 8 && total > 0).then(|| v[7] as f64 / total as f64)
}

/// IRQ number, name (from /proc/interrupts) and affinity list.
fn irqs() -> Vec<IrqInfo> {
    let ints = std::fs::read_to_string("/proc/interrupts").unwrap_or_default();
    let mut out = Vec::new();
    for (k, _) in crate::procstat::parse_interrupts(&ints) {
        let Some((n, name)) = k.split_once(':') else {
            continue;
        };
        if let Some(aff) = read(format!("/proc/irq/{n}/smp_affinity_list")) {
            out.push(IrqInfo {
                irq: n.to_string(),
                name: name.to_string(),
                affinity: aff,
            });
        }
    }
    out.sort_by_key(|i| i.irq.parse::<u64>().unwrap_or(u64::MAX));
    out
}

/// Deep idle states matter above this exit latency (µs).
const DEEP_IDLE_US: u64 = 10;

/// Each fact that can hurt latency, as a warning saying what to change.
pub fn warnings(p: &Platform) -> Vec<Warning> {
    let mut w = Vec::new();
    if let Some(h) = &p.hypervisor {
        w.push(Warning::Virtualized {
            hypervisor: h.clone(),
        });
    }
    if let Some(m) = &p.preemption {
        let full = m == "full" || m == "rt" || m == "dynamic(full)" || m == "dynamic(rt)";
        if !full {
            w.push(Warning::PreemptionModel { model: m.clone() });
        }
    }
    if let Some(g) = &p.cpufreq_governor {
        if g != "performance" {
            w.push(Warning::CpufreqGovernor {
                governor: g.clone(),
            });
        }
    }
    for s in &p.cpuidle_states {
        if !s.disabled && s.exit_latency_us > DEEP_IDLE_US {
            w.push(Warning::DeepIdle {
                state: s.name.clone(),
                exit_latency_us: s.exit_latency_us,
            });
        }
    }
    if let (Some(r), Some(per)) = (p.rt_runtime_us, p.rt_period_us) {
        if r >= 0 && r < per {
            w.push(Warning::RtThrottling {
                runtime_us: r,
                period_us: per,
            });
        }
    }
    if let Some(t) = p.threads_per_core {
        if t > 1 {
            w.push(Warning::SmtEnabled {
                threads_per_core: t,
            });
        }
    }
    if p.isolcpus.is_none() && p.nohz_full.is_none() {
        w.push(Warning::NoIsolatedCpus);
    }
    if p.irq_time_accounting == Some(false) {
        w.push(Warning::NoIrqTimeAccounting);
    }
    if let Some(hz) = p.hz {
        // A NO_HZ_FULL kernel (PREEMPT_RT builds one) still ticks on every
        // CPU not listed in nohz_full=.
        if p.nohz.as_deref() != Some("full") || p.nohz_full.is_none() {
            w.push(Warning::TickHz { hz });
        }
    }
    if let Some(t) = p.other.get("tracers").filter(|t| !t.starts_with("unknown")) {
        let have: Vec<&str> = t.split_whitespace().collect();
        for want in WANTED_TRACERS {
            if !have.contains(&want) {
                w.push(Warning::MissingTracer {
                    tracer: want.to_string(),
                });
            }
        }
    }
    if let Some(c) = &p.clocksource {
        if cfg!(target_arch = "x86_64") && c != "tsc" {
            w.push(Warning::Clocksource {
                clocksource: c.clone(),
            });
        }
    }
    w
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_facts() {
        let cfg = "CONFIG_HZ_250=y\nCONFIG_HZ=250\nCONFIG_NO_HZ_IDLE=y\nCONFIG_PREEMPT_NONE=y\nCONFIG_PREEMPT_DYNAMIC=y\n# CONFIG_IRQ_TIME_ACCOUNTING is not set\n";
        let (hz, nohz, pre, irq) = parse_config(cfg);
        assert_eq!(hz, Some(250));
        assert_eq!(nohz.as_deref(), Some("idle"));
        assert_eq!(pre.as_deref(), Some("dynamic(none)"));
        assert_eq!(irq, Some(false));
        let (_, nohz, pre, irq) = parse_config(
            "CONFIG_NO_HZ_FULL=y\nCONFIG_PREEMPT_RT=y\nCONFIG_IRQ_TIME_ACCOUNTING=y\n",
        );
        assert_eq!(nohz.as_deref(), Some("full"));
        assert_eq!(pre.as_deref(), Some("rt"));
        assert_eq!(irq, Some(true));
        assert_eq!(
            parse_debugfs_preempt("none voluntary (full) lazy").as_deref(),
            Some("full")
        );
        assert_eq!(parse_cpu_list("0-2,5"), Ok(vec![0, 1, 2, 5]));
        assert_eq!(parse_cpu_list("0-3,6\n"), Ok(vec![0, 1, 2, 3, 6]));
        assert_eq!(parse_cpu_list(" 1, 0-1"), Ok(vec![1, 0]));
        assert_eq!(parse_cpu_list(""), Err(CpuListError::NotAList));
        assert_eq!(parse_cpu_list("x"), Err(CpuListError::NotAList));
        assert_eq!(parse_cpu_list("0,,1"), Err(CpuListError::NotAList));
        assert_eq!(parse_cpu_list("3-1"), Err(CpuListError::Backwards(3, 1)));
        assert!(proc_start_time(std::process::id()).is_some());
        assert!(proc_start_time(u32::MAX - 1).is_none());
        assert!(!online_cpus().is_empty());
        assert_eq!(
            cmdline_value("a=1 preempt=full -- preempt=x", "preempt"),
            Some("full")
        );
    }

    #[test]
    fn warnings_say_what_hurts() {
        let p = Platform {
            hypervisor: Some("KVM".into()),
            preemption: Some("dynamic(none)".into()),
            cpufreq_governor: Some("powersave".into()),
            cpuidle_states: vec![
                IdleState {
                    name: "POLL".into(),
                    exit_latency_us: 0,
                    disabled: false,
                },
                IdleState {
                    name: "C6".into(),
                    exit_latency_us: 133,
                    disabled: false,
                },
            ],
            rt_runtime_us: Some(950_000),
            rt_period_us: Some(1_000_000),
            threads_per_core: Some(2),
            irq_time_accounting: Some(false),
            hz: Some(250),
            nohz: Some("idle".into()),
            clocksource: Some("tsc".into()),
            ..Default::default()
        };
        let w = warnings(&p);
        for want in [
            "virtualized",
            "preemption_model",
            "cpufreq_governor",
            "deep_idle",
            "rt_throttling",
            "smt_enabled",
            "no_isolated_cpus",
            "no_irq_time_accounting",
            "tick_hz",
        ] {
            assert!(
                w.iter()
                    .any(|x| serde_json::to_value(x).unwrap()["code"] == want),
                "missing {want}: {w:?}"
            );
        }
        assert_eq!(w.len(), 9, "{w:?}");
        let quiet = Platform {
            preemption: Some("full".into()),
            isolcpus: Some("1".into()),
            nohz: Some("full".into()),
            nohz_full: Some("1".into()),
            hz: Some(1000),
            ..Default::default()
        };
        assert!(warnings(&quiet).is_empty());
        let built_not_used = Platform {
            nohz_full: None,
            ..quiet
        };
        let w = warnings(&built_not_used);
        assert_eq!(
            w,
            vec![Warning::TickHz { hz: 1000 }],
            "NO_HZ_FULL built but no CPU in nohz_full= still ticks"
        );
    }

    #[test]
    fn kernel_facts_for_rt_and_cgroup2() {
        let v2 = "sysfs /sys sysfs rw 0 0\ncgroup2 /sys/fs/cgroup cgroup2 rw 0 0\n";
        assert_eq!(cgroup_version(v2).as_deref(), Some("v2"));
        let v1 = "cgroup /sys/fs/cgroup/cpuset cgroup rw,cpuset 0 0\n";
        assert_eq!(cgroup_version(v1).as_deref(), Some("v1"));
        assert!(cgroup_version(&format!("{v1}{v2}"))
            .unwrap()
            .starts_with("hybrid"));
        assert_eq!(cgroup_version("proc /proc proc rw 0 0\n"), None);
        assert!(hrtick_text("GENTLE_FAIR_SLEEPERS NO_HRTICK NO_HRTICK_DL")
            .starts_with("off (HRTICK_DL"));
        assert!(hrtick_text("NO_HRTICK HRTICK_DL").starts_with("on (HRTICK_DL"));
        assert!(hrtick_text("NO_HRTICK").starts_with("off (HRTICK:"));
        assert!(hrtick_text("WAKEUP_PREEMPTION").starts_with("not built"));
        assert_eq!(
            kernel_config_flag("# CONFIG_SCHED_HRTICK is not set\n", "SCHED_HRTICK"),
            Some(false)
        );
        assert_eq!(
            kernel_config_flag("CONFIG_SCHED_HRTICK=y\n", "SCHED_HRTICK"),
            Some(true)
        );
        let code = |p: &Platform| -> Vec<String> {
            warnings(p)
                .iter()
                .map(|w| serde_json::to_value(w).unwrap()["tracer"].to_string())
                .filter(|t| t != "null")
                .collect()
        };
        let mut p = Platform::default();
        p.other
            .insert("tracers".into(), "hwlat function nop".into());
        assert_eq!(code(&p), vec!["\"timerlat\"", "\"osnoise\""]);
        p.other
            .insert("tracers".into(), "timerlat osnoise hwlat nop".into());
        assert!(code(&p).is_empty());
        p.other
            .insert("tracers".into(), "unknown (tracefs…)".into());
        assert!(code(&p).is_empty(), "no guess when tracefs is unreadable");
    }

    #[test]
    fn collects_this_machine() {
        let p = collect();
        assert!(p.logical_cpus.unwrap_or(0) >= 1);
        assert!(p.kernel.is_some());
        assert!(p.online_cpus.is_some());
    }
}
