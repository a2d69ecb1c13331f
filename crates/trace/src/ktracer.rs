//! The kernel's own probes: the timerlat and osnoise tracers, run in a
//! private tracefs instance and read from its text `trace_pipe`.
//!
//! Why text: on 6.1 the timerlat tracer writes its samples as the tracer's
//! own entries (there is no `timerlat_sample` event to decode from
//! `trace_pipe_raw`), and the osnoise per-period summary likewise; the
//! kernel formats both, so the line is the stable interface (rtla reads
//! the same fields).
//!
//! Why an instance and still global knobs: the tracers run in an instance
//! (rtla does the same), but their settings (`osnoise/cpus`,
//! `osnoise/timerlat_period_us`, `osnoise/period_us`, …) are global files
//! shared by every instance. Each is journaled before it is written and
//! put back when the instance closes, and a run refuses to start while
//! another instance (rtla, another punctual) uses either tracer, since
//! changing the knobs under it would corrupt its run.

use std::fs::{self, File};
use std::io::{self, Read};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use punctual_units::Nanos;

use crate::tracefs::{find_mount, Instance};

/// One of the kernel's two probe tracers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tracer {
    Timerlat,
    Osnoise,
}

impl Tracer {
    pub fn name(self) -> &'static str {
        match self {
            Tracer::Timerlat => "timerlat",
            Tracer::Osnoise => "osnoise",
        }
    }
    fn config(self) -> &'static str {
        match self {
            Tracer::Timerlat => "CONFIG_TIMERLAT_TRACER",
            Tracer::Osnoise => "CONFIG_OSNOISE_TRACER",
        }
    }
}

/// Why a kernel probe cannot run; the message is the one sentence the
/// user sees.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unavailable {
    /// This kernel was built without the tracer (or tracefs is absent):
    /// nothing on this machine can change that.
    #[error("{0}")]
    Missing(String),
    /// The tracer exists but cannot be used now (in use, no permission).
    #[error("{0}")]
    Busy(String),
}

/// The tracefs mount, or where it would be.
fn tracefs_root() -> PathBuf {
    find_mount().unwrap_or_else(|| PathBuf::from(crate::tracefs::TRACEFS))
}

/// Whether `tracer` exists here and no one else is using the tracers'
/// shared knobs. Reads only; changes nothing.
pub fn check(tracer: Tracer) -> Result<(), Unavailable> {
    let root = tracefs_root();
    let missing = |why: String| {
        Unavailable::Missing(format!(
            "the kernel's {name} tracer is not available here ({why}); use punctual's own probe (leave out --probe {name}), or boot a kernel built with {cfg}, as PREEMPT_RT distribution kernels are (Debian's linux-image-rt-amd64)",
            name = tracer.name(),
            cfg = tracer.config(),
        ))
    };
    let list = match fs::read_to_string(root.join("available_tracers")) {
        Ok(t) => t,
        Err(e) if e.kind() == io::ErrorKind::PermissionDenied => {
            return Err(Unavailable::Busy(format!(
                "cannot read {}: {e}; the kernel's tracers need root",
                root.join("available_tracers").display()
            )))
        }
        Err(_) => {
            // Not mounted: the kernel's configuration still says.
            return match kernel_config_has(tracer.config()) {
                Some(true) => Ok(()),
                Some(false) => Err(missing(format!("{} is not set", tracer.config()))),
                None => Err(missing(format!(
                    "tracefs is not mounted at {} and the kernel's configuration does not say",
                    root.display()
                ))),
            };
        }
    };
    if !list.split_whitespace().any(|t| t == tracer.name()) {
        return Err(missing(format!(
            "available_tracers lists only: {}",
            list.trim()
        )));
    }
    if let Some(user) = tracer_user(&root) {
        return Err(Unavailable::Busy(format!(
            "{user}; the timerlat and osnoise tracers share one set of settings, so wait until that run ends (an rtla run, or another punctual)"
        )));
    }
    Ok(())
}

/// `CONFIG_X=y` in /boot/config-<release> or /proc/config.gz's plain copy.
fn kernel_config_has(key: &str) -> Option<bool> {
    let release = fs::read_to_string("/proc/sys/kernel/osrelease").ok()?;
    let text = fs::read_to_string(format!("/boot/config-{}", release.trim())).ok()?;
    let on = format!("{key}=y");
    Some(text.lines().any(|l| l.trim() == on))
}

/// The instance (or top level) whose current tracer is timerlat or
/// osnoise, described for the user.
fn tracer_user(root: &Path) -> Option<String> {
    let busy = |p: &Path| {
        fs::read_to_string(p.join("current_tracer"))
            .ok()
            .map(|t| t.trim().to_string())
            .filter(|t| t == "timerlat" || t == "osnoise")
    };
    if let Some(t) = busy(root) {
        return Some(format!("the top-level tracing instance is running {t}"));
    }
    let dir = fs::read_dir(root.join("instances")).ok()?;
    for e in dir.flatten() {
        if let Some(t) = busy(&e.path()) {
            return Some(format!(
                "tracing instance {} is running {t}",
                e.file_name().to_string_lossy()
            ));
        }
    }
    None
}

/// What to ask of the tracer.
#[derive(Clone, Debug)]
pub enum Settings {
    /// `osnoise/timerlat_period_us`: the timer's period.
    Timerlat { period: Nanos },
    /// `osnoise/period_us` and `osnoise/runtime_us`: how often a sample
    /// is summarised and how much of it the busy loop runs.
    Osnoise { period: Nanos, runtime: Nanos },
}

/// The osnoise events that name each stolen interval's source, and the
/// one that logs every interval (`sample_threshold`).
const OSNOISE_EVENTS: [&str; 5] = [
    "osnoise/sample_threshold",
    "osnoise/irq_noise",
    "osnoise/softirq_noise",
    "osnoise/nmi_noise",
    "osnoise/thread_noise",
];

/// A running kernel probe. Dropping it stops the tracer and puts every
/// knob back (through the instance's journal).
pub struct Running {
    /// Declared before the instance so that it is closed first: an open
    /// `trace_pipe` keeps the instance busy (EBUSY on its removal).
    pipe: Option<File>,
    inst: Instance,
    partial: Vec<u8>,
    /// Whether the instance's clock is CLOCK_MONOTONIC (`mono`): line
    /// times are then on the caller's clock.
    pub mono: bool,
}

/// Microseconds as written in a tracefs knob, at least 1.
fn us(n: Nanos) -> String {
    (n.0 / 1000).max(1).to_string()
}

/// Starts `tracer` on `cpus` in a private instance.
pub fn start(
    tracer: Tracer,
    cpus: &[u32],
    settings: &Settings,
    journal_dir: &Path,
) -> Result<Running, Unavailable> {
    check(tracer)?;
    let mut inst = Instance::create(journal_dir).map_err(|e| Unavailable::Busy(e.0))?;
    let root = inst.root().to_path_buf();
    let list = cpus
        .iter()
        .map(|c| c.to_string())
        .collect::<Vec<_>>()
        .join(",");
    let mut knobs: Vec<(&str, String)> = vec![
        ("osnoise/cpus", list),
        ("osnoise/stop_tracing_us", "0".into()),
        ("osnoise/stop_tracing_total_us", "0".into()),
    ];
    match settings {
        Settings::Timerlat { period } => knobs.push(("osnoise/timerlat_period_us", us(*period))),
        Settings::Osnoise { period, runtime } => {
            // The kernel refuses a runtime above the period, and a period
            // below the runtime: write them in the order that is valid
            // from any old pair.
            let old_period = fs::read_to_string(root.join("osnoise/period_us"))
                .ok()
                .and_then(|t| t.trim().parse::<u64>().ok())
                .unwrap_or(0);
            if old_period * 1000 < period.0 {
                knobs.push(("osnoise/period_us", us(*period)));
                knobs.push(("osnoise/runtime_us", us(*runtime)));
            } else {
                knobs.push(("osnoise/runtime_us", us(*runtime)));
                knobs.push(("osnoise/period_us", us(*period)));
            }
        }
    }
    for (k, v) in &knobs {
        let p = root.join(k);
        if !p.exists() && k.starts_with("osnoise/stop_") {
            continue;
        }
        inst.set_path(&p, v)
            .map_err(|e| Unavailable::Busy(format!("cannot set {k} to {v}: {e}")))?;
    }
    let mono = inst.set("trace_clock", "mono").is_ok();
    if tracer == Tracer::Osnoise {
        for e in OSNOISE_EVENTS {
            inst.enable_event(e);
        }
    }
    inst.set("current_tracer", tracer.name()).map_err(|e| {
        Unavailable::Busy(format!(
            "the kernel refused the {} tracer in a private instance: {e}",
            tracer.name()
        ))
    })?;
    let pipe = fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(inst.path().join("trace_pipe"))
        .map_err(|e| Unavailable::Busy(format!("cannot open the instance's trace_pipe: {e}")))?;
    inst.set("tracing_on", "1")
        .map_err(|e| Unavailable::Busy(format!("cannot switch tracing on: {e}")))?;
    Ok(Running {
        pipe: Some(pipe),
        inst,
        partial: Vec::new(),
        mono,
    })
}

impl Running {
    /// Reads what the pipe holds now (without waiting) and hands each
    /// parsed line to `f`; returns how many bytes were read.
    pub fn poll(&mut self, mut f: impl FnMut(Line)) -> io::Result<usize> {
        let mut buf = [0u8; 64 * 1024];
        let mut total = 0;
        let Some(pipe) = self.pipe.as_mut() else {
            return Ok(0);
        };
        loop {
            match pipe.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => {
                    total += n;
                    self.partial.extend_from_slice(&buf[..n]);
                    while let Some(i) = self.partial.iter().position(|&b| b == b'\n') {
                        let line: Vec<u8> = self.partial.drain(..=i).collect();
                        if let Some(l) = parse_line(&String::from_utf8_lossy(&line)) {
                            f(l);
                        }
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
        }
        Ok(total)
    }

    /// Stops the tracer, hands the lines still buffered to `f`, and puts
    /// everything back.
    pub fn finish(mut self, f: impl FnMut(Line)) -> Result<(), String> {
        let _ = self.inst.set("tracing_on", "0");
        let r = self.poll(f);
        self.pipe = None;
        let closed = self.inst.close();
        r.map_err(|e| format!("reading trace_pipe: {e}"))?;
        closed
    }

    /// The instance's directory.
    pub fn path(&self) -> &Path {
        self.inst.path()
    }
}

/// Whether a timerlat sample was taken in the timer's interrupt handler
/// or in the woken thread.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Context {
    Irq,
    Thread,
}

/// The interference counters of one osnoise period.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Interference {
    pub hw: u64,
    pub nmi: u64,
    pub irq: u64,
    pub softirq: u64,
    pub thread: u64,
}

impl Interference {
    pub fn add(&mut self, o: &Interference) {
        self.hw += o.hw;
        self.nmi += o.nmi;
        self.irq += o.irq;
        self.softirq += o.softirq;
        self.thread += o.thread;
    }
}

/// What one osnoise `*_noise` event names as the source of an interval.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NoiseKind {
    Irq,
    Softirq,
    Nmi,
    Thread,
}

impl NoiseKind {
    pub fn name(self) -> &'static str {
        match self {
            NoiseKind::Irq => "irq",
            NoiseKind::Softirq => "softirq",
            NoiseKind::Nmi => "nmi",
            NoiseKind::Thread => "thread",
        }
    }
}

/// One line of a timerlat or osnoise instance's `trace_pipe`; `at` is the
/// line's time stamp on the instance's clock.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Line {
    /// `#SEQ context irq|thread timer_latency N ns`.
    Timerlat {
        cpu: u32,
        at: Nanos,
        seq: u64,
        context: Context,
        latency: Nanos,
    },
    /// One osnoise period: runtime, noise and largest single noise (the
    /// kernel prints microseconds), and the interference counters.
    OsnoiseSample {
        cpu: u32,
        at: Nanos,
        runtime: Nanos,
        noise: Nanos,
        max_single: Nanos,
        interference: Interference,
    },
    /// `sample_threshold`: one stolen interval of the busy loop.
    Threshold {
        cpu: u32,
        at: Nanos,
        duration: Nanos,
        interference: u64,
    },
    /// `irq_noise`, `softirq_noise`, `nmi_noise`, `thread_noise`: what
    /// ran inside the intervals.
    Noise {
        cpu: u32,
        at: Nanos,
        kind: NoiseKind,
        name: String,
        duration: Nanos,
    },
    /// `CPU:N [LOST K EVENTS]`.
    Lost { cpu: u32, lost: u64 },
}

/// `97.899550` (seconds, any number of decimals) as nanoseconds.
fn seconds(s: &str) -> Option<Nanos> {
    let (whole, frac) = s.split_once('.').unwrap_or((s, ""));
    let whole: u64 = whole.parse().ok()?;
    if frac.len() > 9 || !frac.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let mut f: u64 = if frac.is_empty() {
        0
    } else {
        frac.parse().ok()?
    };
    for _ in frac.len()..9 {
        f *= 10;
    }
    Some(Nanos(whole.checked_mul(1_000_000_000)?.checked_add(f)?))
}

/// Parses one line; `None` for headers and lines of other events.
pub fn parse_line(line: &str) -> Option<Line> {
    let line = line.trim_end();
    if let Some(rest) = line.trim_start().strip_prefix("CPU:") {
        // CPU:1 [LOST 2034 EVENTS]
        let (cpu, rest) = rest.split_once(' ')?;
        let lost = rest
            .trim()
            .strip_prefix("[LOST ")?
            .strip_suffix(" EVENTS]")?;
        return Some(Line::Lost {
            cpu: cpu.parse().ok()?,
            lost: lost.parse().ok()?,
        });
    }
    if line.trim_start().starts_with('#') {
        return None;
    }
    // TASK-PID [CPU] FLAGS TIMESTAMP: REST. The task's name may hold
    // spaces, so find the CPU token followed by flags and a time stamp.
    let toks: Vec<&str> = line.split_whitespace().collect();
    let i = (0..toks.len().saturating_sub(2)).find(|&i| {
        let t = toks[i];
        t.len() > 2
            && t.starts_with('[')
            && t.ends_with(']')
            && t[1..t.len() - 1].bytes().all(|b| b.is_ascii_digit())
            && toks[i + 2].ends_with(':')
            && seconds(&toks[i + 2][..toks[i + 2].len() - 1]).is_some()
    })?;
    let cpu: u32 = toks[i][1..toks[i].len() - 1].parse().ok()?;
    let at = seconds(&toks[i + 2][..toks[i + 2].len() - 1])?;
    let rest = &toks[i + 3..];
    let num = |k: usize| rest.get(k).and_then(|t| t.parse::<u64>().ok());
    // `duration N ns` in an event's text.
    let duration = || {
        let k = rest.iter().position(|&t| t == "duration")?;
        (rest.get(k + 2) == Some(&"ns")).then_some(())?;
        Some(Nanos(num(k + 1)?))
    };
    match rest.first().copied()? {
        s if s.starts_with('#') => {
            // #SEQ context irq timer_latency N ns
            if rest.get(1) != Some(&"context") || rest.get(3) != Some(&"timer_latency") {
                return None;
            }
            let context = match rest.get(2).copied()? {
                "irq" => Context::Irq,
                "thread" => Context::Thread,
                _ => return None,
            };
            let latency = match rest.get(5).copied() {
                Some("ns") => Nanos(num(4)?),
                Some("us") => Nanos(num(4)?.checked_mul(1000)?),
                _ => return None,
            };
            Some(Line::Timerlat {
                cpu,
                at,
                seq: s[1..].parse().ok()?,
                context,
                latency,
            })
        }
        "sample_threshold:" => {
            let k = rest.iter().position(|&t| t == "interference")?;
            Some(Line::Threshold {
                cpu,
                at,
                duration: duration()?,
                interference: num(k + 1)?,
            })
        }
        ev @ ("irq_noise:" | "softirq_noise:" | "nmi_noise:" | "thread_noise:") => {
            let kind = match ev {
                "irq_noise:" => NoiseKind::Irq,
                "softirq_noise:" => NoiseKind::Softirq,
                "nmi_noise:" => NoiseKind::Nmi,
                _ => NoiseKind::Thread,
            };
            // NAME:N start S duration D ns (nmi_noise has no name); the
            // name may hold spaces, so it is everything before `start`.
            let k = rest.iter().position(|&t| t == "start")?;
            let name = if kind == NoiseKind::Nmi {
                "nmi".to_string()
            } else {
                let full = rest[1..k].join(" ");
                match full.rsplit_once(':') {
                    Some((n, _)) => n.trim().to_string(),
                    None => full,
                }
            };
            Some(Line::Noise {
                cpu,
                at,
                kind,
                name,
                duration: duration()?,
            })
        }
        _ if rest.len() == 9 => {
            // RUNTIME NOISE %CPU MAX-SINGLE HW NMI IRQ SIRQ THREAD
            rest[2].parse::<f64>().ok()?;
            let us = |k: usize| Some(Nanos(num(k)?.checked_mul(1000)?));
            Some(Line::OsnoiseSample {
                cpu,
                at,
                runtime: us(0)?,
                noise: us(1)?,
                max_single: us(3)?,
                interference: Interference {
                    hw: num(4)?,
                    nmi: num(5)?,
                    irq: num(6)?,
                    softirq: num(7)?,
                    thread: num(8)?,
                },
            })
        }
        _ => None,
    }
}

/// The threshold above which osnoise counts a gap as noise: `tracing_thresh`
/// in microseconds, whose 0 means the kernel's default of 5 µs.
pub fn osnoise_threshold() -> Nanos {
    let t = fs::read_to_string(tracefs_root().join("tracing_thresh"))
        .ok()
        .and_then(|t| t.trim().parse::<u64>().ok())
        .unwrap_or(0);
    Nanos::from_us(if t == 0 { 5 } else { t })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Lines as the Debian 6.1 PREEMPT_RT kernel printed them.
    #[test]
    fn timerlat_lines_give_context_and_nanoseconds() {
        let irq = "           <...>-286     [001] d..h1..    97.899550: #1     context    irq timer_latency  17371710 ns";
        let thr = "           <...>-286     [001] .......    97.900373: #1     context thread timer_latency  18485920 ns";
        assert_eq!(
            parse_line(irq),
            Some(Line::Timerlat {
                cpu: 1,
                at: Nanos(97_899_550_000),
                seq: 1,
                context: Context::Irq,
                latency: Nanos(17_371_710),
            })
        );
        match parse_line(thr) {
            Some(Line::Timerlat {
                context, latency, ..
            }) => {
                assert_eq!(context, Context::Thread);
                assert_eq!(latency, Nanos(18_485_920));
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(
            parse_line("CPU:1 [LOST 2034 EVENTS]"),
            Some(Line::Lost { cpu: 1, lost: 2034 })
        );
        assert_eq!(parse_line("# tracer: timerlat"), None);
        assert_eq!(parse_line(""), None);
    }

    #[test]
    fn osnoise_samples_and_events_are_told_apart() {
        let s = "       osnoise/1-305     [001] .......   111.330923: 200000     179329  10.33550   53311     19      0     19      0     20";
        assert_eq!(
            parse_line(s),
            Some(Line::OsnoiseSample {
                cpu: 1,
                at: Nanos(111_330_923_000),
                runtime: Nanos(200_000_000),
                noise: Nanos(179_329_000),
                max_single: Nanos(53_311_000),
                interference: Interference {
                    hw: 19,
                    nmi: 0,
                    irq: 19,
                    softirq: 0,
                    thread: 20
                },
            })
        );
        let t = "       osnoise/1-305     [001] .......   111.131136: sample_threshold: start 113.277597833 duration 324271 ns interference 0";
        assert_eq!(
            parse_line(t),
            Some(Line::Threshold {
                cpu: 1,
                at: Nanos(111_131_136_000),
                duration: Nanos(324_271),
                interference: 0
            })
        );
        let i = "       osnoise/1-305     [001] dn.h3..   111.132478: irq_noise: local_timer:236 start 113.279191267 duration 71977 ns";
        let th = " irq/29-virtio2--120     [001] d...3..   111.154956: thread_noise: irq/29-virtio2-:120 start 113.301630465 duration 111205 ns";
        let sq = "       osnoise/1-305     [001] d.s.3..   111.2: softirq_noise:    TIMER:1 start 113.2 duration 4000 ns";
        let nmi = "       osnoise/1-305     [001] d.s.3..   111.2: nmi_noise: start 113.2 duration 900 ns";
        let got: Vec<(NoiseKind, String, Nanos)> = [i, th, sq, nmi]
            .iter()
            .map(|l| match parse_line(l) {
                Some(Line::Noise {
                    kind,
                    name,
                    duration,
                    ..
                }) => (kind, name, duration),
                other => panic!("{l}: {other:?}"),
            })
            .collect();
        assert_eq!(
            got,
            vec![
                (NoiseKind::Irq, "local_timer".into(), Nanos(71_977)),
                (NoiseKind::Thread, "irq/29-virtio2-".into(), Nanos(111_205)),
                (NoiseKind::Softirq, "TIMER".into(), Nanos(4000)),
                (NoiseKind::Nmi, "nmi".into(), Nanos(900)),
            ]
        );
    }

    #[test]
    fn malformed_lines_are_skipped_not_misread() {
        for l in [
            "           <...>-286     [001] d..h1..    97.899550: #x context irq timer_latency 5 ns",
            "           <...>-286     [001] d..h1..    97.899550: #1 context soft timer_latency 5 ns",
            "           <...>-286     [001] d..h1..    97.899550: #1 context irq timer_latency 5",
            "       osnoise/1-305     [001] .......   111.330923: 200000 179329 x 53311 19 0 19 0 20",
            "       osnoise/1-305     [001] .......   111.131136: sample_threshold: start 1.0 duration 9",
            "CPU:1 [LOST many EVENTS]",
            "no cpu here: #1 context irq timer_latency 5 ns",
        ] {
            assert_eq!(parse_line(l), None, "{l}");
        }
    }

    #[test]
    fn seconds_keep_every_digit() {
        assert_eq!(seconds("1.5"), Some(Nanos(1_500_000_000)));
        assert_eq!(seconds("113.277597833"), Some(Nanos(113_277_597_833)));
        assert_eq!(seconds("7"), Some(Nanos(7_000_000_000)));
        assert_eq!(seconds("1.0000000001"), None);
        assert_eq!(seconds("1.-2"), None);
    }
}
