//! The `--load` language: `KIND[:opt,opt=val…][+KIND…]`.
//!
//! One grammar for `punctual load` and for every probe's `--load`, parsed
//! into typed options here so that a bad spec is refused before anything
//! starts, with one sentence naming the part that is wrong.

use std::fmt;
use std::path::PathBuf;

use punctual_units::{parse_duration, parse_ratio, Nanos};
use serde::{Deserialize, Serialize};

/// One load of a `+`-separated list, with the text it was parsed from
/// (kept so the record shows exactly what the user asked for).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LoadSpec {
    pub text: String,
    pub kind: Kind,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum Kind {
    Net(NetOpts),
    Disk(DiskOpts),
    Cpu(CpuOpts),
    Mem(MemOpts),
    Timer(TimerOpts),
    Cmd(CmdOpts),
}

impl Kind {
    pub fn name(&self) -> &'static str {
        match self {
            Kind::Net(_) => "net",
            Kind::Disk(_) => "disk",
            Kind::Cpu(_) => "cpu",
            Kind::Mem(_) => "mem",
            Kind::Timer(_) => "timer",
            Kind::Cmd(_) => "cmd",
        }
    }
}

/// The kinds, for error messages and help.
pub const KINDS: &str = "net, disk, cpu, mem, timer, cmd";

/// TTCP/NTttcp-style stream over 127.0.0.1, or paced UDP.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NetOpts {
    /// Bytes per write (TCP) — iperf3's default is 128 KiB too.
    pub msg_bytes: usize,
    /// SO_SNDBUF / SO_RCVBUF; `None` leaves the kernel's autotuning on.
    pub sndbuf_bytes: Option<usize>,
    pub rcvbuf_bytes: Option<usize>,
    pub tx_cpu: Option<u32>,
    pub rx_cpu: Option<u32>,
    /// Parallel connections (each one sender and one receiver thread).
    pub streams: u32,
    /// UDP instead of TCP.
    pub udp: bool,
    /// UDP packets per second; 0 = as fast as the sender can.
    pub rate_pps: u64,
    /// UDP payload bytes.
    pub packet_bytes: usize,
    /// UDP receiver drains its socket only every `drain` (0 = continuously):
    /// Basham's "buffers drained every ~10 ms" question.
    pub drain: Nanos,
}

impl Default for NetOpts {
    fn default() -> Self {
        NetOpts {
            msg_bytes: 128 * 1024,
            sndbuf_bytes: None,
            rcvbuf_bytes: None,
            tx_cpu: None,
            rx_cpu: None,
            streams: 1,
            udp: false,
            rate_pps: 0,
            packet_bytes: 1472,
            drain: Nanos::ZERO,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Pattern {
    Seq,
    Rand,
}

/// Reads of a temporary file the load creates (and that vanishes with it).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DiskOpts {
    pub dir: PathBuf,
    pub size_bytes: u64,
    pub block_bytes: usize,
    pub pattern: Pattern,
    /// O_DIRECT: every read reaches the device (DMA straight to the buffer).
    pub direct: bool,
    /// Reader threads, each with its own file descriptor (queue depth).
    pub queue_depth: u32,
    /// Route the backing device's interrupt(s) to this CPU for the run.
    pub irq_cpu: Option<u32>,
    /// Pin the reader threads to these CPUs.
    pub cpus: Option<Vec<u32>>,
}

impl Default for DiskOpts {
    fn default() -> Self {
        DiskOpts {
            dir: PathBuf::from("/var/tmp"),
            size_bytes: 256 << 20,
            block_bytes: 128 * 1024,
            pattern: Pattern::Seq,
            direct: false,
            queue_depth: 1,
            irq_cpu: None,
            cpus: None,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CpuPolicy {
    Other,
    Fifo,
    Rr,
}

/// Competing busy threads (the Rialto talk's "high-priority competitor").
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CpuOpts {
    pub threads: u32,
    pub policy: CpuPolicy,
    pub priority: u8,
    pub nice: i32,
    pub cpus: Option<Vec<u32>>,
    /// Busy fraction of each `period` (1.0 = always busy).
    pub duty_fraction: f64,
    pub period: Nanos,
}

impl Default for CpuOpts {
    fn default() -> Self {
        CpuOpts {
            threads: 1,
            policy: CpuPolicy::Other,
            priority: 0,
            nice: 0,
            cpus: None,
            duty_fraction: 1.0,
            period: Nanos::from_ms(10),
        }
    }
}

/// Streaming copy over a buffer larger than the last-level cache.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MemOpts {
    /// `None`: 4 × the last-level cache, at least 64 MiB.
    pub size_bytes: Option<u64>,
    pub threads: u32,
    pub cpus: Option<Vec<u32>>,
}

impl Default for MemOpts {
    fn default() -> Self {
        MemOpts {
            size_bytes: None,
            threads: 1,
            cpus: None,
        }
    }
}

/// Many threads sleeping briefly: timer interrupts and context switches.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TimerOpts {
    pub threads: u32,
    pub interval: Nanos,
    pub cpus: Option<Vec<u32>>,
}

impl Default for TimerOpts {
    fn default() -> Self {
        TimerOpts {
            threads: 8,
            interval: Nanos::from_us(100),
            cpus: None,
        }
    }
}

/// An external program, run without a shell and stopped with the run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CmdOpts {
    pub argv: Vec<String>,
}

/// A spec that cannot be used; the message is one sentence naming the part.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SpecError {
    pub spec: String,
    pub message: String,
}

impl fmt::Display for SpecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "load spec '{}': {}", self.spec, self.message)
    }
}

impl std::error::Error for SpecError {}

impl LoadSpec {
    /// Parses `KIND[:opts][+KIND[:opts]…]`. `cmd` takes the rest of the
    /// text as its argument vector (commas separate arguments), so it must
    /// come last.
    pub fn parse_list(text: &str) -> Result<Vec<LoadSpec>, SpecError> {
        let whole = text.trim();
        let err = |m: String| SpecError {
            spec: whole.to_string(),
            message: m,
        };
        if whole.is_empty() {
            return Err(err(format!("it is empty; name a kind ({KINDS})")));
        }
        let mut out = Vec::new();
        let mut rest = whole;
        while !rest.is_empty() {
            let is_cmd = rest == "cmd" || rest.starts_with("cmd:");
            let (part, next) = if is_cmd {
                (rest, "")
            } else {
                match rest.split_once('+') {
                    Some((a, b)) => {
                        if b.trim().is_empty() {
                            return Err(err("it ends with '+'; name a kind after it".into()));
                        }
                        (a, b)
                    }
                    None => (rest, ""),
                }
            };
            out.push(LoadSpec::parse_one(part.trim()).map_err(&err)?);
            rest = next.trim();
        }
        Ok(out)
    }

    /// Parses one `KIND[:opts]`; the error is the sentence without the
    /// spec prefix.
    fn parse_one(part: &str) -> Result<LoadSpec, String> {
        let (kind, opts) = match part.split_once(':') {
            Some((k, o)) => (k.trim(), o),
            None => (part, ""),
        };
        let kind = match kind {
            "" => return Err(format!("a load has no kind; use one of {KINDS}")),
            "net" => Kind::Net(parse_net(&options(opts)?)?),
            "disk" => Kind::Disk(parse_disk(&options(opts)?)?),
            "cpu" => Kind::Cpu(parse_cpu(&options(opts)?)?),
            "mem" => Kind::Mem(parse_mem(&options(opts)?)?),
            "timer" => Kind::Timer(parse_timer(&options(opts)?)?),
            "cmd" => {
                let argv: Vec<String> = opts
                    .split(',')
                    .map(|s| s.to_string())
                    .filter(|s| !s.is_empty())
                    .collect();
                if argv.is_empty() {
                    return Err(
                        "cmd needs a program: cmd:PROGRAM,ARG,ARG… (or `punctual load cmd -- PROGRAM ARGS…`)"
                            .into(),
                    );
                }
                Kind::Cmd(CmdOpts { argv })
            }
            other => return Err(format!("'{other}' is not a load kind; use one of {KINDS}")),
        };
        Ok(LoadSpec {
            text: part.to_string(),
            kind,
        })
    }

    /// A spec for an external command given as an argument vector.
    pub fn command(argv: Vec<String>) -> Result<LoadSpec, SpecError> {
        if argv.is_empty() || argv[0].is_empty() {
            return Err(SpecError {
                spec: "cmd".into(),
                message: "cmd needs a program to run".into(),
            });
        }
        Ok(LoadSpec {
            text: format!("cmd:{}", argv.join(",")),
            kind: Kind::Cmd(CmdOpts { argv }),
        })
    }

    pub fn kind_name(&self) -> &'static str {
        self.kind.name()
    }
}

/// `key=value` or bare `flag`, in order.
type Opts = Vec<(String, Option<String>)>;

fn options(text: &str) -> Result<Opts, String> {
    let mut out: Opts = Vec::new();
    for tok in text.split(',') {
        let tok = tok.trim();
        if tok.is_empty() {
            continue;
        }
        // `cpus=0,1` would otherwise split; a bare CPU-list fragment after
        // `cpus=` continues it.
        if tok.chars().all(|c| c.is_ascii_digit() || c == '-') {
            if let Some((k, Some(v))) = out.last_mut() {
                if k == "cpus" {
                    v.push(',');
                    v.push_str(tok);
                    continue;
                }
            }
        }
        match tok.split_once('=') {
            Some((k, v)) => out.push((k.trim().to_string(), Some(v.trim().to_string()))),
            None => out.push((tok.to_string(), None)),
        }
    }
    Ok(out)
}

fn need<'a>(key: &str, v: &'a Option<String>) -> Result<&'a str, String> {
    match v.as_deref() {
        Some(s) if !s.is_empty() => Ok(s),
        _ => Err(format!("option '{key}' needs a value ({key}=…)")),
    }
}

fn flag(key: &str, v: &Option<String>) -> Result<(), String> {
    match v {
        None => Ok(()),
        Some(_) => Err(format!("option '{key}' is a flag and takes no value")),
    }
}

fn unknown(kind: &str, key: &str, known: &str) -> String {
    format!("'{key}' is not an option of {kind} (options: {known})")
}

/// Sizes with binary suffixes (`4K`, `128KiB`, `1M`, `2G`) or plain bytes.
pub fn parse_size(key: &str, s: &str) -> Result<u64, String> {
    let t = s.trim();
    let bad = || format!("{key} '{s}' is not a size (use e.g. 4K, 128K, 1M, 2G)");
    let lower = t.to_ascii_lowercase();
    let lower = lower
        .strip_suffix("ib")
        .or_else(|| lower.strip_suffix('b'))
        .unwrap_or(&lower)
        .to_string();
    let (num, mult) = match lower.chars().last() {
        Some('k') => (&lower[..lower.len() - 1], 1u64 << 10),
        Some('m') => (&lower[..lower.len() - 1], 1 << 20),
        Some('g') => (&lower[..lower.len() - 1], 1 << 30),
        Some('t') => (&lower[..lower.len() - 1], 1 << 40),
        _ => (&lower[..], 1),
    };
    if num.starts_with('-') {
        return Err(format!(
            "{key} '{s}' is negative; it must be a positive size"
        ));
    }
    let n: u64 = num.trim().parse().map_err(|_| bad())?;
    let v = n.checked_mul(mult).ok_or_else(bad)?;
    if v == 0 {
        return Err(format!("{key} '{s}' is zero; it must be a positive size"));
    }
    Ok(v)
}

fn parse_count(key: &str, s: &str, max: u64) -> Result<u64, String> {
    if s.trim_start().starts_with('-') {
        return Err(format!(
            "{key} '{s}' is negative; it must be a positive whole number"
        ));
    }
    let n: u64 = s
        .trim()
        .parse()
        .map_err(|_| format!("{key} '{s}' is not a whole number"))?;
    if n == 0 {
        return Err(format!("{key} '{s}' is zero; it must be at least 1"));
    }
    if n > max {
        return Err(format!("{key} '{s}' is more than the {max} allowed"));
    }
    Ok(n)
}

fn parse_cpu_index(key: &str, s: &str) -> Result<u32, String> {
    let c: u32 = s
        .trim()
        .parse()
        .map_err(|_| format!("{key} '{s}' is not a CPU number"))?;
    check_cpus(key, &[c])?;
    Ok(c)
}

/// CPU lists as elsewhere in punctual: `0`, `0,1`, `0-3`.
fn parse_cpu_list(key: &str, s: &str) -> Result<Vec<u32>, String> {
    use punctual_live::sysinfo::CpuListError;
    let out = punctual_live::sysinfo::parse_cpu_list(s).map_err(|e| match e {
        CpuListError::NotAList => {
            format!("{key} '{s}' is not a CPU list (use e.g. 0, 0,1 or 0-3)")
        }
        CpuListError::Backwards(a, b) => format!("{key} '{s}': range {a}-{b} is backwards"),
    })?;
    check_cpus(key, &out)?;
    Ok(out)
}

fn check_cpus(key: &str, cpus: &[u32]) -> Result<(), String> {
    let online = crate::util::online_cpus();
    for c in cpus {
        if !online.contains(c) {
            return Err(format!(
                "{key}: CPU {c} is not online on this machine (online: {})",
                online
                    .iter()
                    .map(|c| c.to_string())
                    .collect::<Vec<_>>()
                    .join(",")
            ));
        }
    }
    Ok(())
}

fn parse_dur(key: &str, s: &str) -> Result<Nanos, String> {
    if s.trim_start().starts_with('-') {
        return Err(format!(
            "{key} '{s}' is negative; it must be a positive duration"
        ));
    }
    parse_duration(s).map_err(|e| format!("{key}: {e}"))
}

fn parse_net(opts: &Opts) -> Result<NetOpts, String> {
    const KNOWN: &str = "msg, sndbuf, rcvbuf, tx-cpu, rx-cpu, streams, udp, rate, pkt, drain";
    let mut o = NetOpts::default();
    let mut udp_only: Option<&str> = None;
    for (k, v) in opts {
        match k.as_str() {
            "msg" => o.msg_bytes = parse_size(k, need(k, v)?)?.min(64 << 20) as usize,
            "sndbuf" => o.sndbuf_bytes = Some(parse_size(k, need(k, v)?)?.min(1 << 30) as usize),
            "rcvbuf" => o.rcvbuf_bytes = Some(parse_size(k, need(k, v)?)?.min(1 << 30) as usize),
            "tx-cpu" => o.tx_cpu = Some(parse_cpu_index(k, need(k, v)?)?),
            "rx-cpu" => o.rx_cpu = Some(parse_cpu_index(k, need(k, v)?)?),
            "streams" => o.streams = parse_count(k, need(k, v)?, 64)? as u32,
            "udp" => {
                flag(k, v)?;
                o.udp = true;
            }
            "tcp" => {
                flag(k, v)?;
                o.udp = false;
            }
            "rate" => {
                let s = need(k, v)?;
                o.rate_pps = parse_count(k, s, 100_000_000)
                    .map_err(|e| e.replace("whole number", "number of packets per second"))?;
                udp_only = Some("rate");
            }
            "pkt" => {
                let n = parse_size(k, need(k, v)?)?;
                if n > 65_507 {
                    return Err(format!(
                        "pkt '{n}' is larger than a UDP datagram (65507 bytes)"
                    ));
                }
                if n < 8 {
                    return Err(format!(
                        "pkt '{n}' is too small; packets carry an 8-byte sequence number"
                    ));
                }
                o.packet_bytes = n as usize;
                udp_only = Some("pkt");
            }
            "drain" => {
                o.drain = parse_dur(k, need(k, v)?)?;
                udp_only = Some("drain");
            }
            _ => return Err(unknown("net", k, KNOWN)),
        }
    }
    // rate/pkt/drain only mean something for datagrams: they imply `udp`.
    if udp_only.is_some() {
        o.udp = true;
    }
    Ok(o)
}

fn parse_disk(opts: &Opts) -> Result<DiskOpts, String> {
    const KNOWN: &str = "dir, size, bs, seq, rand, direct, buffered, qd, irq-cpu, cpus";
    let mut o = DiskOpts::default();
    for (k, v) in opts {
        match k.as_str() {
            "dir" => o.dir = PathBuf::from(need(k, v)?),
            "size" => o.size_bytes = parse_size(k, need(k, v)?)?,
            "bs" => o.block_bytes = parse_size(k, need(k, v)?)?.min(64 << 20) as usize,
            "seq" => {
                flag(k, v)?;
                o.pattern = Pattern::Seq;
            }
            "rand" | "random" => {
                flag(k, v)?;
                o.pattern = Pattern::Rand;
            }
            "pattern" => {
                o.pattern = match need(k, v)? {
                    "seq" => Pattern::Seq,
                    "rand" | "random" => Pattern::Rand,
                    other => return Err(format!("pattern '{other}' is not seq or rand")),
                }
            }
            "direct" => {
                flag(k, v)?;
                o.direct = true;
            }
            "buffered" => {
                flag(k, v)?;
                o.direct = false;
            }
            "qd" => o.queue_depth = parse_count(k, need(k, v)?, 256)? as u32,
            "irq-cpu" => o.irq_cpu = Some(parse_cpu_index(k, need(k, v)?)?),
            "cpus" => o.cpus = Some(parse_cpu_list(k, need(k, v)?)?),
            _ => return Err(unknown("disk", k, KNOWN)),
        }
    }
    if o.size_bytes < o.block_bytes as u64 {
        return Err(format!(
            "size {} is smaller than the block size {}",
            o.size_bytes, o.block_bytes
        ));
    }
    if o.block_bytes as u64 * o.queue_depth as u64 > 1 << 30 {
        return Err(format!(
            "bs x qd is {} MiB of read buffers; keep it under 1024 MiB",
            (o.block_bytes as u64 * o.queue_depth as u64) >> 20
        ));
    }
    if o.direct && o.block_bytes % 512 != 0 {
        return Err(format!(
            "bs {} is not a multiple of 512 bytes, which O_DIRECT requires",
            o.block_bytes
        ));
    }
    Ok(o)
}

fn parse_cpu(opts: &Opts) -> Result<CpuOpts, String> {
    const KNOWN: &str = "threads, policy, priority, nice, cpus, duty, period";
    let mut o = CpuOpts::default();
    let mut prio_given = false;
    for (k, v) in opts {
        match k.as_str() {
            "threads" => o.threads = parse_count(k, need(k, v)?, 1024)? as u32,
            "policy" => {
                o.policy = match need(k, v)? {
                    "other" | "normal" => CpuPolicy::Other,
                    "fifo" => CpuPolicy::Fifo,
                    "rr" => CpuPolicy::Rr,
                    p => return Err(format!("policy '{p}' is not one of other, fifo, rr")),
                }
            }
            "priority" | "prio" => {
                let s = need(k, v)?;
                let p: i64 = s
                    .parse()
                    .map_err(|_| format!("priority '{s}' is not a number"))?;
                if !(1..=99).contains(&p) {
                    return Err(format!("priority '{s}' is outside 1..=99"));
                }
                o.priority = p as u8;
                prio_given = true;
            }
            "nice" => {
                let s = need(k, v)?;
                let n: i32 = s
                    .parse()
                    .map_err(|_| format!("nice '{s}' is not a number"))?;
                if !(-20..=19).contains(&n) {
                    return Err(format!("nice '{s}' is outside -20..=19"));
                }
                o.nice = n;
            }
            "cpus" => o.cpus = Some(parse_cpu_list(k, need(k, v)?)?),
            "duty" => {
                let s = need(k, v)?;
                let d = parse_ratio(s).map_err(|e| format!("duty: {e}"))?;
                if !(d > 0.0 && d <= 1.0) {
                    return Err(format!("duty '{s}' must be above 0 and at most 100%"));
                }
                o.duty_fraction = d;
            }
            "period" => {
                o.period = parse_dur(k, need(k, v)?)?;
                if o.period < Nanos::from_us(100) {
                    return Err("period must be at least 100us".into());
                }
            }
            _ => return Err(unknown("cpu", k, KNOWN)),
        }
    }
    match o.policy {
        CpuPolicy::Other if prio_given => {
            return Err("priority applies to policy=fifo or policy=rr; use nice for other".into())
        }
        CpuPolicy::Fifo | CpuPolicy::Rr if !prio_given => o.priority = 50,
        CpuPolicy::Fifo | CpuPolicy::Rr if o.nice != 0 => {
            return Err("nice applies to policy=other; use priority for fifo/rr".into())
        }
        _ => {}
    }
    Ok(o)
}

fn parse_mem(opts: &Opts) -> Result<MemOpts, String> {
    const KNOWN: &str = "size, threads, cpus";
    let mut o = MemOpts::default();
    for (k, v) in opts {
        match k.as_str() {
            "size" => {
                let s = parse_size(k, need(k, v)?)?;
                if s < 1 << 20 {
                    return Err(format!(
                        "size {s} is below 1M; a cache-sized copy is not memory traffic"
                    ));
                }
                o.size_bytes = Some(s)
            }
            "threads" => o.threads = parse_count(k, need(k, v)?, 256)? as u32,
            "cpus" => o.cpus = Some(parse_cpu_list(k, need(k, v)?)?),
            _ => return Err(unknown("mem", k, KNOWN)),
        }
    }
    Ok(o)
}

fn parse_timer(opts: &Opts) -> Result<TimerOpts, String> {
    const KNOWN: &str = "threads, interval, cpus";
    let mut o = TimerOpts::default();
    for (k, v) in opts {
        match k.as_str() {
            "threads" => o.threads = parse_count(k, need(k, v)?, 4096)? as u32,
            "interval" => {
                o.interval = parse_dur(k, need(k, v)?)?;
                if o.interval.is_zero() {
                    return Err("interval must be greater than zero".into());
                }
            }
            "cpus" => o.cpus = Some(parse_cpu_list(k, need(k, v)?)?),
            _ => return Err(unknown("timer", k, KNOWN)),
        }
    }
    Ok(o)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(s: &str) -> Kind {
        let v = LoadSpec::parse_list(s).unwrap();
        assert_eq!(v.len(), 1, "{s}");
        v.into_iter().next().unwrap().kind
    }

    fn bad(s: &str) -> String {
        LoadSpec::parse_list(s).unwrap_err().to_string()
    }

    #[test]
    fn good_specs() {
        assert_eq!(one("net"), Kind::Net(NetOpts::default()));
        match one("disk:direct,irq-cpu=1,bs=4K,rand,qd=4,size=16M") {
            Kind::Disk(d) => {
                assert!(d.direct);
                assert_eq!(d.irq_cpu, Some(1));
                assert_eq!(d.block_bytes, 4096);
                assert_eq!(d.pattern, Pattern::Rand);
                assert_eq!(d.queue_depth, 4);
                assert_eq!(d.size_bytes, 16 << 20);
            }
            k => panic!("{k:?}"),
        }
        match one("cpu:threads=2,policy=fifo,priority=50,cpus=0,1") {
            Kind::Cpu(c) => {
                assert_eq!(c.threads, 2);
                assert_eq!(c.policy, CpuPolicy::Fifo);
                assert_eq!(c.priority, 50);
                assert_eq!(c.cpus, Some(vec![0, 1]));
            }
            k => panic!("{k:?}"),
        }
        match one("net:udp,rate=65500,rcvbuf=1M,drain=10ms") {
            Kind::Net(n) => {
                assert!(n.udp);
                assert_eq!(n.rate_pps, 65500);
                assert_eq!(n.rcvbuf_bytes, Some(1 << 20));
                assert_eq!(n.drain, Nanos::from_ms(10));
            }
            k => panic!("{k:?}"),
        }
        match one("cpu:duty=25%,nice=5") {
            Kind::Cpu(c) => {
                assert!((c.duty_fraction - 0.25).abs() < 1e-9);
                assert_eq!(c.nice, 5);
            }
            k => panic!("{k:?}"),
        }
        let v = LoadSpec::parse_list("net+mem:size=64M + timer:threads=4").unwrap();
        let kinds: Vec<_> = v.iter().map(|s| s.kind_name()).collect();
        assert_eq!(kinds, ["net", "mem", "timer"]);
        assert_eq!(v[1].text, "mem:size=64M");
        // cmd takes the rest, '+' included.
        let v = LoadSpec::parse_list("cpu+cmd:sh,-c,echo a+b").unwrap();
        match &v[1].kind {
            Kind::Cmd(c) => assert_eq!(c.argv, ["sh", "-c", "echo a+b"]),
            k => panic!("{k:?}"),
        }
    }

    #[test]
    fn bad_specs_name_the_part() {
        let e = bad("nett");
        assert!(e.contains("'nett' is not a load kind"), "{e}");
        let e = bad("net:rate=-5");
        assert!(e.contains("rate '-5' is negative"), "{e}");
        let e = bad("disk:bs=abc");
        assert!(e.contains("bs 'abc' is not a size"), "{e}");
        let e = bad("disk:fast");
        assert!(e.contains("'fast' is not an option of disk"), "{e}");
        let e = bad("cpu:policy=fifo,priority=120");
        assert!(e.contains("priority '120'"), "{e}");
        let e = bad("cpu:priority=10");
        assert!(e.contains("policy=fifo"), "{e}");
        let e = bad("net+");
        assert!(e.contains("ends with '+'"), "{e}");
        let e = bad("");
        assert!(e.contains("empty"), "{e}");
        let e = bad("cpu:cpus=999");
        assert!(e.contains("CPU 999 is not online"), "{e}");
        let e = bad("disk:direct,bs=1000");
        assert!(e.contains("multiple of 512"), "{e}");
        let e = bad("disk:bs=64M,qd=32");
        assert!(e.contains("keep it under"), "{e}");
        let e = bad("net:udp=1");
        assert!(e.contains("flag"), "{e}");
        let e = bad("timer:interval");
        assert!(e.contains("needs a value"), "{e}");
        let e = bad("cmd");
        assert!(e.contains("needs a program"), "{e}");
        // One sentence: no line breaks.
        for s in ["nett", "net:rate=-5", "disk:bs=abc", "mem:size=1K"] {
            assert!(!bad(s).contains('\n'), "{s}");
        }
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("x", "4K").unwrap(), 4096);
        assert_eq!(parse_size("x", "128KiB").unwrap(), 128 << 10);
        assert_eq!(parse_size("x", "1m").unwrap(), 1 << 20);
        assert_eq!(parse_size("x", "4096").unwrap(), 4096);
        assert!(parse_size("x", "0").is_err());
        assert!(parse_size("x", "-1K").unwrap_err().contains("negative"));
    }

    #[test]
    fn specs_round_trip_through_json() {
        // The worker child receives its specs as JSON.
        let v = LoadSpec::parse_list("disk:rand,qd=2+net:udp,rate=1000").unwrap();
        let j = serde_json::to_string(&v).unwrap();
        let back: Vec<LoadSpec> = serde_json::from_str(&j).unwrap();
        assert_eq!(v, back);
    }
}
