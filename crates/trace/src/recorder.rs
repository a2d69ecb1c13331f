//! The flight recorder a probe runs beside: start it on the probed CPUs,
//! run the probe, stop it, and let the [`Trace`] name the causes of the
//! record's spikes and stolen time.
//!
//! A reader thread drains each CPU's binary ring (`trace_pipe_raw`, non-
//! blocking) every `poll` and feeds the attribution state machine as it
//! goes, so memory is bounded by the segment store, not by run length.

use std::collections::BTreeMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use punctual_record::{KernelView, Metric, Nanos, Record, SourceShare, Warning};

pub use punctual_record::cause::{
    CauseSummary, CpuAccount, SourceTotalShare, StolenSplit, ENTRY_EXIT_NAME, LOOP_NAME,
};

use crate::attribute::{Attributor, SourceTotal, Symbols, WindowSplit, PAGE_FAULT_NAME};
use crate::event::Decoder;
use crate::format::{HeaderEvent, HeaderPage};
use crate::rings::{drain_ring_raw, Rings};
use crate::tracedat::{RawKeep, RawWindow, TraceDatMeta, STOP_MAX_BYTES_PER_CPU};
use crate::tracefs::{Instance, NoTracing};
use crate::watchlog::WatchLog;

/// The events recorded, as `system/event`; those this kernel lacks are
/// skipped (and listed in the summary).
///
/// The page-fault events name what a probe's own first touch of memory
/// costs: the fault runs in the probe's context with no other event, and
/// on a VM whose free memory the host has taken back (free page
/// reporting, ballooning) each fault also waits for the host to supply
/// the page — microseconds to milliseconds that would otherwise look like
/// a hypervisor stall.
///
/// `sched_wakeup` is optional: attribution takes names and priorities from
/// `sched_switch`, and the wakeup event sits on the probe's own wake-up
/// path (one more ring write before the thread runs), which the overhead
/// benchmark shows in the p50.
pub fn wanted_events(tracefs_events: &Path, wakeups: bool) -> Vec<String> {
    let mut v: Vec<String> = [
        "irq/irq_handler_entry",
        "irq/irq_handler_exit",
        "irq/softirq_entry",
        "irq/softirq_exit",
        "sched/sched_switch",
        "workqueue/workqueue_execute_start",
        "workqueue/workqueue_execute_end",
        "nmi/nmi_handler",
        "exceptions/page_fault_user",
        "exceptions/page_fault_kernel",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    if wakeups {
        v.push("sched/sched_wakeup".into());
    }
    // Every x86 system vector that has an entry/exit pair.
    if let Ok(rd) = std::fs::read_dir(tracefs_events.join("irq_vectors")) {
        let mut names: Vec<String> = rd
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with("_entry") || n.ends_with("_exit"))
            .collect();
        names.sort();
        v.extend(names.into_iter().map(|n| format!("irq_vectors/{n}")));
    }
    v
}

#[derive(Clone, Debug)]
pub struct Options {
    /// Ring size per CPU; a larger ring survives longer reader stalls.
    pub buffer_kb: u32,
    /// Segments kept per CPU (24 bytes each) for window attribution.
    pub max_segments: usize,
    /// How often the reader drains the rings. Each drain is a wake-up of
    /// the reader on some CPU: 500 ms with an 8 MiB ring leaves room for
    /// ~100 k events per second per CPU before the ring overwrites (lost
    /// events are counted anyway).
    pub poll: Duration,
    pub journal_dir: PathBuf,
    /// CPUs the reader thread may run on (default: any CPU not probed,
    /// so the recorder does not add itself to what it measures).
    pub reader_cpus: Option<Vec<u32>>,
    /// Also record `sched:sched_wakeup` (see [`wanted_events`]).
    pub wakeups: bool,
    /// Thread ids whose wake-ups and switches are kept (`punctual
    /// watch`): `sched_waking` is recorded, filtered in the kernel to
    /// these ids, and the reader keeps their scheduler events.
    pub watch: Vec<i32>,
    /// With `watch`: the wake-up latency that ends the run.
    pub stop_at: Option<crate::watchlog::StopAt>,
    /// Keep the newest pages of each ring raw, this far back from the
    /// newest (for `--stop-raw`: the window before a `--stop-at` event as
    /// a `trace.dat`); at most [`crate::tracedat::STOP_MAX_BYTES_PER_CPU`].
    pub keep_raw: Option<Nanos>,
    /// A `sched_switch` filter under which the kernel also records the
    /// stack of the task switched out (the `stacktrace` trigger): e.g. the
    /// switches into a probe from a task that held its CPU. Each stack
    /// costs its unwinding on that switch, i.e. on the probe's wake-up.
    pub stack_filter: Option<String>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            buffer_kb: 8192,
            max_segments: 2_000_000,
            poll: Duration::from_millis(500),
            // The one journal directory every verb replays from
            // (`PUNCTUAL_RUN_DIR` when set), so `cause --cleanup` finds it.
            journal_dir: punctual_live::restore::run_dir(),
            reader_cpus: None,
            wakeups: false,
            watch: Vec::new(),
            stop_at: None,
            keep_raw: None,
            stack_filter: None,
        }
    }
}

/// The kernel's own per-CPU counters, for the side-by-side comparison.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct KernelSnap {
    /// cpu → (irq, softirq, steal) in ns.
    pub stat: BTreeMap<u32, (u64, u64, u64)>,
    /// cpu → interrupt name → count.
    pub interrupts: BTreeMap<u32, BTreeMap<String, u64>>,
}

impl KernelSnap {
    pub fn read() -> KernelSnap {
        let hz = {
            // SAFETY: sysconf has no memory effects.
            let v = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
            if v > 0 {
                v as u64
            } else {
                100
            }
        };
        KernelSnap {
            stat: parse_proc_stat(
                &std::fs::read_to_string("/proc/stat").unwrap_or_default(),
                hz,
            ),
            interrupts: parse_interrupts(
                &std::fs::read_to_string("/proc/interrupts").unwrap_or_default(),
            ),
        }
    }

    /// What happened on `cpu` between `self` and `later`.
    pub fn delta(&self, later: &KernelSnap, cpu: u32) -> KernelView {
        let (a, b) = (
            self.stat.get(&cpu).copied().unwrap_or_default(),
            later.stat.get(&cpu).copied().unwrap_or_default(),
        );
        let mut interrupts = BTreeMap::new();
        if let (Some(x), Some(y)) = (self.interrupts.get(&cpu), later.interrupts.get(&cpu)) {
            for (k, v) in y {
                let d = v.saturating_sub(x.get(k).copied().unwrap_or(0));
                if d > 0 {
                    interrupts.insert(k.clone(), d);
                }
            }
        }
        KernelView {
            irq_ns: Nanos(b.0.saturating_sub(a.0)),
            softirq_ns: Nanos(b.1.saturating_sub(a.1)),
            steal_ns: Nanos(b.2.saturating_sub(a.2)),
            interrupts,
        }
    }
}

/// `cpuN user nice system idle iowait irq softirq steal …` in USER_HZ ticks.
pub fn parse_proc_stat(text: &str, hz: u64) -> BTreeMap<u32, (u64, u64, u64)> {
    let ns = |t: u64| t * (1_000_000_000 / hz.max(1));
    text.lines()
        .filter_map(|l| {
            let mut it = l.split_whitespace();
            let cpu: u32 = it.next()?.strip_prefix("cpu")?.parse().ok()?;
            let v: Vec<u64> = it.filter_map(|x| x.parse().ok()).collect();
            Some((cpu, (ns(*v.get(5)?), ns(*v.get(6)?), ns(*v.get(7)?))))
        })
        .collect()
}

/// `/proc/interrupts`, per CPU, keyed by the line's device name (numbered
/// lines) or its label (`LOC`, `RES`…).
pub fn parse_interrupts(text: &str) -> BTreeMap<u32, BTreeMap<String, u64>> {
    let mut lines = text.lines();
    let cpus: Vec<u32> = match lines.next() {
        Some(h) => h
            .split_whitespace()
            .filter_map(|c| c.strip_prefix("CPU")?.parse().ok())
            .collect(),
        None => return BTreeMap::new(),
    };
    let mut out: BTreeMap<u32, BTreeMap<String, u64>> = BTreeMap::new();
    for l in lines {
        let Some((label, rest)) = l.split_once(':') else {
            continue;
        };
        let label = label.trim();
        let fields: Vec<&str> = rest.split_whitespace().collect();
        let counts: Vec<u64> = fields
            .iter()
            .take(cpus.len())
            .map_while(|f| f.parse().ok())
            .collect();
        if counts.len() != cpus.len() {
            continue;
        }
        let name = if label.chars().all(|c| c.is_ascii_digit()) {
            fields.last().map(|s| s.to_string()).unwrap_or_default()
        } else {
            label.to_string()
        };
        for (c, n) in cpus.iter().zip(counts) {
            *out.entry(*c).or_default().entry(name.clone()).or_default() += n;
        }
    }
    out
}

struct ReaderOut {
    attributor: Attributor,
    watch: Option<WatchLog>,
    raw: Option<RawKeep>,
    /// Threads of this process named `punctual*` seen while recording.
    own: BTreeMap<i32, String>,
    pages: u64,
    events: u64,
    missed_pages: BTreeMap<u32, u64>,
    missed_counted: BTreeMap<u32, u64>,
    malformed: u64,
    cpu_time_ns: u64,
}

fn thread_cpu_time() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is a valid, writable timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

fn mono_now() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is a valid, writable timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// A running recording. Dropping it without [`FlightRecorder::stop`]
/// still stops the reader and removes the instance.
pub struct FlightRecorder {
    instance: Option<Instance>,
    cpus: Vec<u32>,
    stop: Arc<AtomicBool>,
    reader: Option<JoinHandle<ReaderOut>>,
    started_ns: u64,
    before: KernelSnap,
    enabled: Vec<String>,
    missing: Vec<String>,
    opts: Options,
    meta: Option<TraceDatMeta>,
    /// The thread ids watched now (`Options::watch` and those added by
    /// [`FlightRecorder::watch_more`]).
    watched: Vec<i32>,
    /// Ids the reader has yet to add to its watch log.
    more: Arc<std::sync::Mutex<Vec<i32>>>,
}

impl std::fmt::Debug for FlightRecorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FlightRecorder")
            .field("cpus", &self.cpus)
            .field("started_ns", &self.started_ns)
            .finish()
    }
}

impl FlightRecorder {
    /// Creates the instance, enables the events, starts the reader and
    /// switches tracing on. Any failure leaves nothing behind and says why
    /// in one sentence (to be shown as `Warning::NoTracing`).
    pub fn start(cpus: &[u32], opts: &Options) -> Result<FlightRecorder, NoTracing> {
        let inst = Instance::create_without_cmdline_recording(&opts.journal_dir)?;
        let events_dir = inst.root().join("events");
        let mut wanted = wanted_events(&events_dir, opts.wakeups);
        // The watched threads' wake-ups: `sched_waking` (the start of the
        // wake-up path) where the kernel has it, filtered to their ids so
        // no other task's wake-up costs a ring write.
        let use_wakeup = !events_dir.join("sched/sched_waking").exists();
        let pid_filter = opts
            .watch
            .iter()
            .map(|t| format!("pid == {t}"))
            .collect::<Vec<_>>()
            .join(" || ");
        if !opts.watch.is_empty() {
            let e = if use_wakeup {
                "sched/sched_wakeup"
            } else {
                "sched/sched_waking"
            };
            if !wanted.iter().any(|w| w == e) {
                wanted.push(e.into());
            }
        }
        // And their own system calls' returns: this kernel traces no
        // switch out of idle, so for a thread woken on an idle CPU the
        // return from its blocking call is the first sign that it runs.
        let own_filter = opts
            .watch
            .iter()
            .map(|t| format!("common_pid == {t}"))
            .collect::<Vec<_>>()
            .join(" || ");
        let mut filters = vec![FAULT_FILTER];
        if !opts.watch.is_empty() {
            filters.push(("sched/sched_wak", pid_filter.as_str()));
            filters.push(("raw_syscalls/sys_exit", own_filter.as_str()));
            wanted.push("raw_syscalls/sys_exit".into());
        }
        let Rings {
            instance: mut inst,
            files,
            decoder,
            header_page: hp,
            header_event: he,
            enabled,
            missing,
        } = Rings::open(
            inst,
            cpus,
            u64::from(opts.buffer_kb),
            wanted,
            &["sched/sched_switch"],
            &filters,
        )?;
        let watch = (!opts.watch.is_empty())
            .then(|| WatchLog::new(&opts.watch, use_wakeup, opts.stop_at.clone()));
        let fail = |what: &str, e: &dyn std::fmt::Display| NoTracing(format!("{what}: {e}"));
        let stop = Arc::new(AtomicBool::new(false));
        let online = crate::recorder::online_cpus();
        let reader_cpus = opts.reader_cpus.clone().unwrap_or_else(|| {
            let v: Vec<u32> = online
                .iter()
                .copied()
                .filter(|c| !cpus.contains(c))
                .collect();
            if v.is_empty() {
                online.clone()
            } else {
                v
            }
        });
        let mut enabled = enabled;
        let mut missing = missing;
        if let Some(f) = &opts.stack_filter {
            let trigger = format!("stacktrace if {f}");
            match inst.add_trigger("sched/sched_switch", &trigger) {
                Ok(()) => enabled.push("sched/sched_switch:stacktrace".into()),
                Err(_) => missing.push("sched/sched_switch:stacktrace".into()),
            }
        }
        let meta = opts
            .keep_raw
            .map(|_| TraceDatMeta::read(&events_dir, &enabled));
        let raw = opts.keep_raw.map(|w| {
            let page = hp.page_size();
            RawKeep::new(w, STOP_MAX_BYTES_PER_CPU / page.max(1), page)
        });
        let max_segments = opts.max_segments;
        let poll = opts.poll;
        let s2 = Arc::clone(&stop);
        let more: Arc<std::sync::Mutex<Vec<i32>>> = Arc::default();
        let more2 = Arc::clone(&more);
        let reader = std::thread::Builder::new()
            .name("punctual-trace".into())
            .spawn(move || {
                pin(&reader_cpus);
                read_loop(
                    files,
                    hp,
                    he,
                    decoder,
                    max_segments,
                    poll,
                    s2,
                    watch,
                    raw,
                    more2,
                )
            })
            .map_err(|e| fail("cannot start the trace reader", &e))?;
        let before = KernelSnap::read();
        let started_ns = mono_now();
        if let Err(e) = inst.set("tracing_on", "1") {
            stop.store(true, Ordering::Relaxed);
            reader.thread().unpark();
            let _ = reader.join();
            return Err(fail("cannot switch tracing on", &e));
        }
        Ok(FlightRecorder {
            instance: Some(inst),
            cpus: cpus.to_vec(),
            stop,
            reader: Some(reader),
            started_ns,
            before,
            enabled,
            missing,
            opts: opts.clone(),
            meta,
            watched: opts.watch.clone(),
            more,
        })
    }

    /// Watches `tids` too from now on (threads the watched process
    /// created since): the kernel filters of the wake-up and system-call
    /// events are rewritten to take them in, and the reader keeps their
    /// events from its next drain. Fails with the reason when a filter is
    /// refused (the events of the new threads are then not all kept).
    pub fn watch_more(&mut self, tids: &[i32]) -> Result<(), String> {
        let new: Vec<i32> = tids
            .iter()
            .copied()
            .filter(|t| !self.watched.contains(t))
            .collect();
        if new.is_empty() {
            return Ok(());
        }
        self.watched.extend(&new);
        self.more
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .extend(&new);
        let Some(inst) = self.instance.as_mut() else {
            return Ok(());
        };
        let join = |field: &str| {
            self.watched
                .iter()
                .map(|t| format!("{field} == {t}"))
                .collect::<Vec<_>>()
                .join(" || ")
        };
        let (pids, own) = (join("pid"), join("common_pid"));
        let mut problems = Vec::new();
        for e in &self.enabled {
            let f = if e.starts_with("sched/sched_wak") {
                &pids
            } else if e == "raw_syscalls/sys_exit" {
                &own
            } else {
                continue;
            };
            if let Err(err) = inst.set(&format!("events/{e}/filter"), f) {
                problems.push(format!("{e}: {err}"));
            }
        }
        if problems.is_empty() {
            Ok(())
        } else {
            Err(problems.join("; "))
        }
    }

    pub fn instance_path(&self) -> Option<&Path> {
        self.instance.as_ref().map(|i| i.path())
    }

    /// Stops tracing, drains what is left, removes the instance (tracefs
    /// state restored) and returns the trace.
    pub fn stop(mut self) -> Result<Trace, NoTracing> {
        let stopped_ns = mono_now();
        if let Some(i) = self.instance.as_mut() {
            let _ = i.set("tracing_on", "0");
        }
        let after = KernelSnap::read();
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = &self.reader {
            h.thread().unpark();
        }
        let out = self
            .reader
            .take()
            .and_then(|h| h.join().ok())
            .ok_or_else(|| NoTracing("the trace reader failed".into()))?;
        // Overruns the kernel counted that no page header showed.
        let mut lost = BTreeMap::new();
        if let Some(i) = self.instance.as_ref() {
            for &c in &self.cpus {
                let stats =
                    crate::tracefs::read_file(&i.path().join(format!("per_cpu/cpu{c}/stats")))
                        .unwrap_or_default();
                let field = |k: &str| -> u64 {
                    stats
                        .lines()
                        .find_map(|l| l.strip_prefix(k))
                        .and_then(|v| v.trim().parse().ok())
                        .unwrap_or(0)
                };
                let kernel = field("overrun:") + field("dropped events:");
                let seen = out.missed_counted.get(&c).copied().unwrap_or(0);
                let pages = out.missed_pages.get(&c).copied().unwrap_or(0);
                lost.insert(c, kernel.max(seen).max(pages));
            }
        }
        let close = self.instance.take().map(|mut i| i.close());
        let mut attributor = out.attributor;
        attributor.finish(stopped_ns);
        let symbols = if attributor_has_kworkers(&attributor) {
            Symbols::parse(&std::fs::read_to_string("/proc/kallsyms").unwrap_or_default())
        } else {
            Symbols::default()
        };
        let kernel = self
            .cpus
            .iter()
            .map(|&c| (c, self.before.delta(&after, c)))
            .collect();
        let mut cleanup_problem = None;
        if let Some(Err(e)) = close {
            cleanup_problem = Some(e);
        }
        Ok(Trace {
            attributor,
            symbols,
            cpus: self.cpus.clone(),
            lost,
            started_ns: self.started_ns,
            stopped_ns,
            kernel,
            reader_cpu_ns: out.cpu_time_ns,
            pages: out.pages,
            events: out.events,
            malformed: out.malformed,
            enabled: std::mem::take(&mut self.enabled),
            missing: std::mem::take(&mut self.missing),
            buffer_kb: self.opts.buffer_kb,
            cleanup_problem,
            own_threads: out.own,
            rt_runtime_us: read_knob("/proc/sys/kernel/sched_rt_runtime_us"),
            rt_period_us: read_knob("/proc/sys/kernel/sched_rt_period_us"),
            watch: out.watch,
            raw: out
                .raw
                .zip(self.meta.take())
                .map(|(keep, meta)| RawWindow { keep, meta }),
        })
    }
}

impl Drop for FlightRecorder {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(i) = self.instance.as_mut() {
            let _ = i.set("tracing_on", "0");
        }
        // The reader's open files would keep the instance busy.
        if let Some(h) = self.reader.take() {
            h.thread().unpark();
            let _ = h.join();
        }
        self.instance.take();
    }
}

fn read_knob(path: &str) -> Option<i64> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

fn attributor_has_kworkers(a: &Attributor) -> bool {
    a.has_kind(crate::attribute::Kind::Kworker)
}

/// Online CPUs from sysfs.
pub use punctual_live::sysinfo::online_cpus;

fn pin(cpus: &[u32]) {
    // SAFETY: cpu_set_t is plain data; indices are bounded by CPU_SETSIZE.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        for &c in cpus {
            if (c as usize) < libc::CPU_SETSIZE as usize {
                libc::CPU_SET(c as usize, &mut set);
            }
        }
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

#[allow(clippy::too_many_arguments)]
fn read_loop(
    mut files: Vec<(u32, File)>,
    hp: HeaderPage,
    he: HeaderEvent,
    decoder: Decoder,
    max_segments: usize,
    poll: Duration,
    stop: Arc<AtomicBool>,
    watch: Option<WatchLog>,
    raw: Option<RawKeep>,
    more: Arc<std::sync::Mutex<Vec<i32>>>,
) -> ReaderOut {
    let mut out = ReaderOut {
        attributor: Attributor::new(max_segments),
        watch,
        raw,
        pages: 0,
        events: 0,
        missed_pages: BTreeMap::new(),
        missed_counted: BTreeMap::new(),
        malformed: 0,
        cpu_time_ns: 0,
        own: BTreeMap::new(),
    };
    own_threads(&mut out.own);
    let mut rounds: u64 = 0;
    let mut buf = vec![0u8; hp.page_size()];
    let mut last_ts: BTreeMap<u32, u64> = BTreeMap::new();
    loop {
        // Read the flag before draining: after it is set (tracing already
        // off) one more full drain empties the rings.
        let last_round = stop.load(Ordering::Relaxed);
        if let Some(w) = out.watch.as_mut() {
            let new = std::mem::take(&mut *more.lock().unwrap_or_else(|e| e.into_inner()));
            w.add_tids(&new);
        }
        for (cpu, f) in files.iter_mut() {
            let cpu = *cpu;
            drain_ring_raw(f, &mut buf, &hp, &he, |bytes, page| {
                let Ok(page) = page else {
                    out.malformed += 1;
                    return;
                };
                if let Some(k) = out.raw.as_mut() {
                    let last = page.events.last().map_or(page.base_ts, |e| e.ts);
                    k.push(cpu, last, bytes);
                }
                out.pages += 1;
                out.malformed += page.malformed;
                if page.missed {
                    *out.missed_pages.entry(cpu).or_default() += 1;
                    let count = page.missed_count.unwrap_or(0);
                    *out.missed_counted.entry(cpu).or_default() += count;
                    let from = last_ts.get(&cpu).copied().unwrap_or(0);
                    let to = page.events.first().map(|e| e.ts).unwrap_or(page.base_ts);
                    out.attributor.lost(cpu, from, to, count.max(1));
                }
                for ev in &page.events {
                    if let Some(d) = decoder.decode(ev.ts, ev.data) {
                        if let Some(w) = out.watch.as_mut() {
                            w.feed(cpu, &d);
                        }
                        if let (
                            Some(k),
                            crate::event::Event::Switch {
                                prev_pid,
                                prev_comm,
                                next_pid,
                                next_comm,
                                ..
                            },
                        ) = (out.raw.as_mut(), &d.event)
                        {
                            k.name(*prev_pid, prev_comm);
                            k.name(*next_pid, next_comm);
                        }
                        out.attributor.feed(cpu, &d);
                        out.events += 1;
                    }
                }
                if let Some(e) = page.events.last() {
                    last_ts.insert(cpu, e.ts);
                }
            });
        }
        rounds += 1;
        if last_round {
            own_threads(&mut out.own);
            break;
        }
        // Our own threads live for the whole run; a look every ten rounds
        // finds them without adding to the reader's cost.
        if rounds.is_multiple_of(10) {
            own_threads(&mut out.own);
        }
        // One wake-up per poll: a stop unparks the thread at once (an
        // early or spurious return only means one more drain).
        if !stop.load(Ordering::Relaxed) {
            std::thread::park_timeout(poll);
        }
    }
    out.cpu_time_ns = thread_cpu_time();
    out
}

/// The page-fault events, kept to punctual's own probe threads
/// (`punctual-t<cpu>`, `punctual-n<cpu>`): only their faults are ever named
/// (an interval's other threads are already named by `sched_switch`), and
/// every other task's faults on a traced CPU would otherwise fill the ring
/// — a page-touching load on the CPU made 40-60 times the events and 2-3%
/// of a CPU for the reader. A kernel that cannot filter by `comm` gets the
/// events left off (and listed as not recorded), never recorded for every
/// task.
const FAULT_FILTER: (&str, &str) = ("exceptions/page_fault", "comm ~ \"punctual-*\"");

/// Adds this process's threads named `punctual-*` and its main thread
/// when named `punctual*` (the CLI's main, run, probe and reader threads)
/// to `into`. Other threads of the process (an
/// injected `noisy-neighbor`, a test harness) keep their own names.
fn own_threads(into: &mut BTreeMap<i32, String>) {
    let Ok(rd) = std::fs::read_dir("/proc/self/task") else {
        return;
    };
    for e in rd.flatten() {
        let Ok(tid) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        // Read again each time: a new thread carries its creator's name
        // until it names itself (the injected `noisy-neighbor` does).
        let comm = std::fs::read_to_string(e.path().join("comm")).unwrap_or_default();
        let comm = comm.trim();
        // Named threads are `punctual-…`; a thread still called just
        // `punctual` is the main one, or a new one not yet named.
        let main = tid as u32 == std::process::id();
        if comm.starts_with("punctual-") || (main && comm.starts_with("punctual")) {
            into.insert(tid, comm.to_string());
        } else {
            into.remove(&tid);
        }
    }
}

/// A probe's stolen intervals (every one, not only the logged spikes), so
/// the whole-run accounting splits exactly what the probe lost.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProbeGaps {
    pub cpu: u32,
    /// (start relative to the probe's `origin`, length).
    pub gaps: Vec<(Nanos, Nanos)>,
    /// Gaps the probe saw but did not keep (its log was full).
    pub dropped: u64,
    /// The probe loop's own cost per iteration: each gap contains one.
    pub loop_cost: Nanos,
}

/// A probe thread and its time origin, so the record's relative times
/// become trace timestamps.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProbeThread {
    pub cpu: u32,
    pub tid: i32,
    /// CLOCK_MONOTONIC of the probe's time zero on this CPU (spike
    /// `at_ns` values are relative to it).
    pub origin: Nanos,
    /// How long it observed from `origin`.
    pub span: Nanos,
    /// Absolute (CLOCK_MONOTONIC) stretches inside the span the probe did
    /// not observe (its own pauses): left out of the accounting.
    pub excluded: Vec<(Nanos, Nanos)>,
}

/// A finished recording.
#[derive(Debug)]
pub struct Trace {
    pub attributor: Attributor,
    pub symbols: Symbols,
    pub cpus: Vec<u32>,
    /// Events lost per CPU (ring overruns).
    pub lost: BTreeMap<u32, u64>,
    pub started_ns: u64,
    pub stopped_ns: u64,
    pub kernel: BTreeMap<u32, KernelView>,
    /// CPU time the reader thread used.
    pub reader_cpu_ns: u64,
    pub pages: u64,
    pub events: u64,
    pub malformed: u64,
    pub enabled: Vec<String>,
    pub missing: Vec<String>,
    pub buffer_kb: u32,
    /// Set when the instance could not be fully cleaned up.
    pub cleanup_problem: Option<String>,
    /// This process's own `punctual*` threads (tid → name).
    pub own_threads: BTreeMap<i32, String>,
    /// `kernel.sched_rt_runtime_us` / `sched_rt_period_us` when recording
    /// started (RT throttling: runtime < period).
    pub rt_runtime_us: Option<i64>,
    pub rt_period_us: Option<i64>,
    /// The watched threads' scheduler events (`Options::watch`).
    pub watch: Option<WatchLog>,
    /// The newest pages, raw (`Options::keep_raw`).
    pub raw: Option<RawWindow>,
}

/// The rest of an interval that holds events (time the trace charges to
/// the probe itself) is the events' entry and exit: kernel entry/exit code
/// outside the tracepoints, the tracepoints themselves, the hypervisor's
/// delivery of the interrupt, cache refill after. Per event it is charged
/// so up to twice the median rest of the run's one-event intervals (what
/// one interrupt's entry/exit costs on this machine), and at least this;
/// beyond that it stays unexplained: a long stall beside a short tick is
/// not the tick's.
pub const ENTRY_EXIT_CAP_MIN_NS: u64 = 2_000;

/// Share of stolen time with no guest event at all above which the output
/// says where such time comes from on this platform.
const NO_EVENT_HINT_FRACTION: f64 = 0.10;

/// The default priority of PREEMPT_RT's threaded interrupt handlers
/// (`irq/N-name`, SCHED_FIFO 50), used when none can be read from /proc.
pub const RT_IRQ_THREAD_PRIORITY: u32 = 50;

/// The real-time priority of the probe from a record's `policy` config
/// (`fifo:95`, `rr:40`); `None` for SCHED_OTHER or deadline.
fn probe_rt_priority(config: &BTreeMap<String, serde_json::Value>) -> Option<u32> {
    let p = config.get("policy")?.as_str()?;
    let (class, prio) = p.split_once(':')?;
    matches!(class, "fifo" | "rr")
        .then(|| prio.parse().ok())
        .flatten()
}

/// The highest SCHED_FIFO priority among PREEMPT_RT's interrupt threads
/// (`irq/N-name`), from /proc/<pid>/stat (field 40, rt_priority).
fn irq_thread_priority() -> Option<u32> {
    let mut best = None;
    for e in std::fs::read_dir("/proc").ok()?.flatten() {
        let Ok(stat) = std::fs::read_to_string(e.path().join("stat")) else {
            continue;
        };
        let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else {
            continue;
        };
        if !stat[open + 1..close].starts_with("irq/") {
            continue;
        }
        // Fields after the comm start at field 3 (state).
        let prio = stat[close + 1..]
            .split_whitespace()
            .nth(40 - 3)
            .and_then(|v| v.parse::<u32>().ok());
        best = best.max(prio);
    }
    best
}

/// Advice that depends on the platform rather than on a source: stolen
/// time no guest event explains (the hypervisor, an emulator), and on
/// PREEMPT_RT where the threaded handlers stand relative to the probe.
pub fn platform_hints(
    sum: &CauseSummary,
    platform: &punctual_record::Platform,
    config: &BTreeMap<String, serde_json::Value>,
) -> Vec<String> {
    let mut v = Vec::new();
    let no_event = sum
        .per_cpu
        .iter()
        .map(|c| match &c.stolen_split {
            Some(sp) => (sp.no_event_ns, sp.stolen_ns),
            None => (
                c.unexplained_ns,
                c.unexplained_ns + c.named_ns.min(c.probe_observed_ns.unwrap_or(0)),
            ),
        })
        .fold((0u64, 0u64), |a, b| (a.0 + b.0, a.1 + b.1));
    let frac = no_event.0 as f64 / no_event.1.max(1) as f64;
    if frac >= NO_EVENT_HINT_FRACTION {
        let pct = frac * 100.0;
        match platform.hypervisor.as_deref() {
            Some(h) if h.contains("TCG") => v.push(format!(
                "{pct:.0}% of the stolen time had no guest event: this guest runs under QEMU TCG, which emulates the CPU and stops a vCPU to translate code, emulate devices and run the other vCPUs, none of which guest tracing can see. Absolute times under TCG do not describe real hardware; measure on KVM or bare metal"
            )),
            Some(h) => v.push(format!(
                "{pct:.0}% of the stolen time had no guest event: under {h} the host stops this vCPU (its own interrupts, other guests, VM exits), which guest tracing cannot see; pin the vCPUs to isolated host CPUs and avoid overcommit"
            )),
            None => v.push(format!(
                "{pct:.0}% of the stolen time had no guest event: on bare metal that is firmware (SMIs, see the hwlat tracer) or hardware stalls"
            )),
        }
    }
    if platform.preemption.as_deref() == Some("rt") {
        let irq = irq_thread_priority().unwrap_or(RT_IRQ_THREAD_PRIORITY);
        match probe_rt_priority(config) {
            Some(p) if p > irq => v.push(format!(
                "PREEMPT_RT: interrupt handlers run as threads (irq/N-name, SCHED_FIFO {irq} here), and softirqs, timers and RCU callbacks in ksoftirqd, ktimers and rcuc threads; the probe ran at FIFO {p}, above them, so they wait for it and do not appear as sources (only the hard-IRQ top halves do). A task below FIFO {irq} is preempted by them: rerun with --priority {} to see what they cost it",
                irq.saturating_sub(1).max(1)
            )),
            Some(p) => v.push(format!(
                "PREEMPT_RT: the probe ran at FIFO {p}, not above the interrupt threads (irq/N-name, FIFO {irq} here): their threaded handlers preempt it and are named as sources beside the hard-IRQ top halves; a task that must not wait for them needs a priority above {irq} (chrt), or the interrupts moved off its CPU (irqaffinity=, /proc/irq/N/smp_affinity_list)"
            )),
            None => v.push(format!(
                "PREEMPT_RT: the probe ran at SCHED_OTHER, below every threaded interrupt handler (irq/N-name, FIFO {irq} here) and the ksoftirqd, ktimers and rcuc threads: they all preempt it and are named as sources"
            )),
        }
    }
    v
}

impl Trace {
    /// Advice for causes with a known fix, from the sources found.
    fn hints(&self, sum: &CauseSummary) -> Vec<String> {
        let mut v = Vec::new();
        let throttled: u64 = sum
            .per_cpu
            .iter()
            .flat_map(|c| c.sources.iter())
            .filter(|s| s.total.kind == "throttle" && s.total.name == "rt throttling")
            .map(|s| s.total.total_ns)
            .sum();
        if throttled > 0 {
            let knobs = match (self.rt_runtime_us, self.rt_period_us) {
                (Some(r), Some(p)) if r >= 0 => format!(
                    "kernel.sched_rt_runtime_us is {r} of sched_rt_period_us {p}, so a real-time thread that never sleeps is stopped for {} us every period",
                    p - r
                ),
                _ => "the kernel limits real-time runtime per period".to_string(),
            };
            v.push(format!(
                "rt throttling took {} from the probe: {knobs}. This is the kernel's safety limit, not noise a real-time task that sleeps would see; measure with --policy other, or lift the limit for the run (sysctl kernel.sched_rt_runtime_us=-1; punctual's busy loop then pauses by itself) at the risk of starving kernel threads",
                Nanos(throttled)
            ));
        }
        let faulted: u64 = sum
            .per_cpu
            .iter()
            .flat_map(|c| c.sources.iter())
            .filter(|s| s.total.kind == "fault")
            .map(|s| s.total.total_ns)
            .sum();
        if faulted > 0 {
            v.push(format!(
                "the probe's own page faults took {}: its first touch of memory it had not used yet (on a VM, the host may have to supply each page). Locked memory (mlockall, the default unless --no-mlock) touches it all before polling",
                Nanos(faulted)
            ));
        }
        v
    }

    /// The probe thread's window for a spike: a latency spike ends at its
    /// `at_ns` (the actual wake-up) and began `value_ns` earlier (the
    /// expected one); a gap starts at `at_ns`.
    fn spike_window(origin: u64, metric: Metric, at: u64, value: u64) -> (u64, u64) {
        match metric {
            Metric::Latency | Metric::Response | Metric::ServiceGap => {
                let end = origin + at;
                (end.saturating_sub(value), end)
            }
            _ => (origin + at, origin + at + value),
        }
    }

    /// Splits `[start, end)` on `cpu`; this process's own `punctual*`
    /// threads (other than `self_tids`) show as kind `self`.
    pub fn split(&self, cpu: u32, start: u64, end: u64, self_tids: &[i32]) -> WindowSplit {
        let own: Vec<i32> = self
            .own_threads
            .keys()
            .copied()
            .filter(|t| !self_tids.contains(t))
            .collect();
        self.attributor
            .window_own(cpu, start, end, self_tids, &own, &self.symbols)
    }

    /// [`Trace::split`] of a watched thread's wait after its wake-up at
    /// `woken` (time, the waker's CPU): when it was woken on `cpu`, the
    /// rest of the context that woke it is the wake-up's own path, kept
    /// apart from the sources that delayed it.
    pub fn split_woken(
        &self,
        cpu: u32,
        start: u64,
        end: u64,
        self_tids: &[i32],
        woken: Option<(u64, u32)>,
    ) -> WindowSplit {
        let waker = woken
            .filter(|&(_, c)| c == cpu)
            .and_then(|(t, _)| self.attributor.instance_at(cpu, t));
        let own: Vec<i32> = self
            .own_threads
            .keys()
            .copied()
            .filter(|t| !self_tids.contains(t))
            .collect();
        self.attributor
            .window_woken(cpu, start, end, self_tids, &own, &self.symbols, waker)
    }

    /// Splits every stolen interval of one probe (absolute windows from
    /// `origin`): named sources inside them, and the rest of each interval
    /// (time the trace charges to the probe itself) named where it honestly
    /// can be — see [`StolenSplit`].
    pub fn split_gaps(
        &self,
        cpu: u32,
        origin: u64,
        gaps: &ProbeGaps,
        self_tids: &[i32],
    ) -> (Vec<SourceTotal>, StolenSplit) {
        let mut sp = StolenSplit {
            intervals_dropped: gaps.dropped,
            ..Default::default()
        };
        let mut merged: BTreeMap<(String, String), SourceTotal> = BTreeMap::new();
        let mut single: Vec<u64> = Vec::new();
        // (rest after the loop iteration, events in the interval), for the
        // second pass once the typical entry/exit cost is known.
        // (rest after the loop iteration, events in the interval, the
        // probe's page faults in it), for the second pass once the typical
        // entry/exit cost is known.
        let mut rests: Vec<(u64, u64, u64)> = Vec::with_capacity(gaps.gaps.len());
        // The probe's own page faults: (count, total, largest per interval).
        let mut faults = (0u64, 0u64, 0u64);
        let mut fault = |ns: u64, n: u64, sp: &mut StolenSplit| {
            if ns > 0 {
                faults.0 += n;
                faults.1 += ns;
                faults.2 = faults.2.max(ns);
                sp.named_ns += ns;
            }
        };
        for &(at, len) in &gaps.gaps {
            let a = origin + at.0;
            let w = self.split(cpu, a, a + len.0, self_tids);
            sp.intervals += 1;
            sp.stolen_ns += len.0;
            sp.incomplete_intervals += w.incomplete as u64;
            sp.idle_ns += w.idle_ns;
            let instances: u64 = w.sources.iter().map(|s| s.count).sum();
            for s in &w.sources {
                sp.named_ns += s.total_ns;
                SourceTotal::merge_into(&mut merged, s);
            }
            let mut rest = w.unexplained_ns;
            let lp = rest.min(gaps.loop_cost.0);
            sp.loop_ns += lp;
            rest -= lp;
            if w.incomplete {
                sp.no_event_ns += rest;
            } else if instances == 0 {
                // Only the probe's own faults, or nothing the guest saw.
                if w.self_faults > 0 {
                    fault(rest, w.self_faults, &mut sp);
                } else {
                    sp.no_event_ns += rest;
                }
            } else {
                // What one interrupt costs: an interval holding one
                // hardware interruption (a handler or a vector) and
                // nothing else. A softirq or a thread alone came in
                // without an interrupt of its own, or is where a
                // neighbouring interval's end landed: their small rests
                // would make the cap too small for every interrupt.
                if instances == 1
                    && w.self_faults == 0
                    && matches!(w.sources[0].kind.as_str(), "irq" | "vector" | "nmi")
                {
                    single.push(rest);
                }
                rests.push((rest, instances, w.self_faults));
            }
        }
        single.sort_unstable();
        let q = |p: f64| -> u64 {
            if single.is_empty() {
                0
            } else {
                single[((single.len() - 1) as f64 * p).round() as usize]
            }
        };
        sp.one_event_rest_p50_ns = q(0.5);
        sp.one_event_rest_p90_ns = q(0.9);
        sp.one_event_rest_p99_ns = q(0.99);
        sp.entry_exit_cap_ns = (2 * sp.one_event_rest_p50_ns).max(ENTRY_EXIT_CAP_MIN_NS);
        for (rest, instances, nfaults) in rests {
            let ee = rest.min(instances * sp.entry_exit_cap_ns);
            sp.entry_exit_ns += ee;
            if nfaults > 0 {
                fault(rest - ee, nfaults, &mut sp);
            } else {
                sp.no_event_ns += rest - ee;
            }
        }
        if faults.1 > 0 {
            SourceTotal::merge_into(
                &mut merged,
                &SourceTotal {
                    kind: "fault".into(),
                    name: PAGE_FAULT_NAME.into(),
                    sched: None,
                    count: faults.0,
                    total_ns: faults.1,
                    max_ns: faults.2,
                },
            );
        }
        let mut v: Vec<SourceTotal> = merged.into_values().collect();
        v.sort_by(|a, b| {
            b.total_ns
                .cmp(&a.total_ns)
                .then_with(|| a.name.cmp(&b.name))
        });
        (v, sp)
    }

    /// Like [`Trace::split`] over `[start, end)` minus `excluded`.
    pub fn split_excluding(
        &self,
        cpu: u32,
        start: u64,
        end: u64,
        excluded: &[(Nanos, Nanos)],
        self_tids: &[i32],
    ) -> WindowSplit {
        let mut pieces = Vec::new();
        let mut t = start;
        let mut ex: Vec<(u64, u64)> = excluded.iter().map(|(a, b)| (a.0, b.0)).collect();
        ex.sort();
        for (a, b) in ex {
            if b <= t || a >= end {
                continue;
            }
            if a > t {
                pieces.push((t, a));
            }
            t = t.max(b);
        }
        if t < end {
            pieces.push((t, end));
        }
        let mut out = WindowSplit::default();
        let mut merged: BTreeMap<(String, String), SourceTotal> = BTreeMap::new();
        for (a, b) in pieces {
            let w = self.split(cpu, a, b, self_tids);
            out.length_ns += w.length_ns;
            out.unexplained_ns += w.unexplained_ns;
            out.idle_ns += w.idle_ns;
            out.incomplete |= w.incomplete;
            for s in w.sources {
                SourceTotal::merge_into(&mut merged, &s);
            }
        }
        out.sources = merged.into_values().collect();
        out.sources.sort_by(|a, b| {
            b.total_ns
                .cmp(&a.total_ns)
                .then_with(|| a.name.cmp(&b.name))
        });
        out
    }

    /// Fills `spikes[].causes`, `stolen[].by_source` (and `kernel_view`
    /// where empty), adds lost-event warnings, and stores the accounting in
    /// `extra["cause"]`. Probe threads not listed fall back to the record's
    /// `started_mono_ns` and the recording's span.
    pub fn attribute(&self, rec: &mut Record, probes: &[ProbeThread]) -> CauseSummary {
        self.attribute_with_gaps(rec, probes, &[])
    }

    /// [`Trace::attribute`], where the CPUs in `gaps` also get their whole
    /// stolen time split interval by interval (`CpuAccount::stolen_split`):
    /// `stolen[].by_source` then adds up to exactly what the probe lost.
    pub fn attribute_with_gaps(
        &self,
        rec: &mut Record,
        probes: &[ProbeThread],
        gaps: &[ProbeGaps],
    ) -> CauseSummary {
        let mut sum = CauseSummary {
            backend: "tracefs".into(),
            trace_clock: "mono".into(),
            events: self.events,
            pages: self.pages,
            events_enabled: self.enabled.clone(),
            events_missing: self.missing.clone(),
            recorder_cpu_ns: self.reader_cpu_ns,
            buffer_kb: self.buffer_kb,
            ..Default::default()
        };
        let span = self.stopped_ns.saturating_sub(self.started_ns).max(1);
        sum.recorder_cpu_fraction = self.reader_cpu_ns as f64 / span as f64;
        let probe_for = |cpu: u32| -> (u64, u64, Vec<i32>, Vec<(Nanos, Nanos)>) {
            match probes.iter().find(|p| p.cpu == cpu) {
                Some(p) => (p.origin.0, p.span.0, vec![p.tid], p.excluded.clone()),
                None => {
                    let o = rec.started_mono_ns.map(|n| n.0).unwrap_or(self.started_ns);
                    (o, self.stopped_ns.saturating_sub(o), Vec::new(), Vec::new())
                }
            }
        };
        for s in rec.spikes.iter_mut() {
            if !self.cpus.contains(&s.cpu) {
                continue;
            }
            let (origin, _, tids, _) = probe_for(s.cpu);
            let (a, b) = Self::spike_window(origin, s.metric, s.at_ns.0, s.value_ns.0);
            let w = self.split(s.cpu, a, b, &tids);
            s.causes = w.to_shares();
            s.incomplete = w.incomplete;
            sum.spikes_attributed += 1;
            sum.spikes_incomplete += w.incomplete as u64;
            sum.spike_named_ns += w.named_ns();
            sum.spike_unexplained_ns += w.unexplained_ns;
            sum.spike_idle_ns += w.idle_ns;
        }
        let mut overall: BTreeMap<(String, String), SourceTotal> = BTreeMap::new();
        for &cpu in &self.cpus {
            let (origin, pspan, tids, excluded) = probe_for(cpu);
            let end = origin + pspan;
            let w = self.split_excluding(cpu, origin, end, &excluded, &tids);
            let observed = rec
                .stolen
                .iter()
                .find(|st| st.cpu == cpu && st.task.is_none())
                .map(|st| st.total_ns.0);
            let whole_named = w.named_ns();
            let pg = gaps.iter().find(|g| g.cpu == cpu);
            let (sources, split) = match pg {
                Some(g) => {
                    let (v, sp) = self.split_gaps(cpu, origin, g, &tids);
                    (v, Some(sp))
                }
                None => (w.sources.clone(), None),
            };
            let (named, unexplained, denom) = match &split {
                Some(sp) => (
                    sp.named_ns,
                    sp.no_event_ns + sp.idle_ns,
                    sp.stolen_ns.max(1) as f64,
                ),
                None => {
                    let u = observed.map(|o| o.saturating_sub(whole_named)).unwrap_or(0);
                    (whole_named, u, (whole_named + u).max(1) as f64)
                }
            };
            let kv = self.kernel.get(&cpu).cloned().unwrap_or_default();
            let lost = self.lost.get(&cpu).copied().unwrap_or(0);
            let acct = CpuAccount {
                cpu,
                span_ns: pspan,
                sources: sources
                    .iter()
                    .map(|s| SourceTotalShare {
                        total: s.clone(),
                        share: s.total_ns as f64 / denom,
                    })
                    .collect(),
                named_ns: named,
                whole_run_named_ns: whole_named,
                stolen_split: split.clone(),
                idle_ns: w.idle_ns,
                probe_ns: if tids.is_empty() { 0 } else { w.unexplained_ns },
                probe_observed_ns: observed,
                unexplained_ns: unexplained,
                lost_events: lost,
                incomplete: w.incomplete && lost > 0,
                kernel_irq_ns: kv.irq_ns.0,
                kernel_softirq_ns: kv.softirq_ns.0,
                kernel_steal_ns: kv.steal_ns.0,
            };
            for s in &sources {
                SourceTotal::merge_into(&mut overall, s);
            }
            if let Some(st) = rec
                .stolen
                .iter_mut()
                .find(|st| st.cpu == cpu && st.task.is_none())
            {
                let mut shares: Vec<SourceShare> = acct
                    .sources
                    .iter()
                    .map(|s| SourceShare {
                        kind: s.total.kind.clone(),
                        name: s.total.name.clone(),
                        count: s.total.count,
                        total_ns: Nanos(s.total.total_ns),
                        max_ns: Nanos(s.total.max_ns),
                        share: s.share,
                    })
                    .collect();
                let rest: Vec<(&str, &str, u64)> = match &split {
                    Some(sp) => vec![
                        ("overhead", ENTRY_EXIT_NAME, sp.entry_exit_ns),
                        ("overhead", LOOP_NAME, sp.loop_ns),
                        ("unexplained", "no guest event", sp.no_event_ns),
                        ("unexplained", "cpu idle", sp.idle_ns),
                    ],
                    None => vec![("unexplained", "no guest event", unexplained)],
                };
                for (kind, name, ns) in rest {
                    if ns > 0 {
                        shares.push(SourceShare {
                            kind: kind.into(),
                            name: name.into(),
                            count: 0,
                            total_ns: Nanos(ns),
                            max_ns: Nanos::ZERO,
                            share: ns as f64 / denom,
                        });
                    }
                }
                st.by_source = shares;
                if st.kernel_view.is_none() {
                    st.kernel_view = Some(kv);
                }
            }
            if lost > 0 {
                rec.warnings.push(Warning::TraceEventsLost { cpu, lost });
            }
            sum.per_cpu.push(acct);
        }
        let total: u64 = overall.values().map(|s| s.total_ns).sum();
        let mut ov: Vec<SourceTotalShare> = overall
            .into_values()
            .map(|t| SourceTotalShare {
                share: t.total_ns as f64 / total.max(1) as f64,
                total: t,
            })
            .collect();
        ov.sort_by_key(|s| std::cmp::Reverse(s.total.total_ns));
        sum.overall = ov;
        sum.hints = self.hints(&sum);
        sum.hints
            .extend(platform_hints(&sum, &rec.platform, &rec.config));
        sum.own_threads = self
            .own_threads
            .iter()
            .map(|(t, n)| (*t, n.clone()))
            .collect();
        if let Some(p) = &self.cleanup_problem {
            rec.warnings.push(Warning::Other {
                message: format!("tracing cleanup incomplete: {p}; run 'punctual cause --cleanup'"),
            });
        }
        rec.set_cause(&sum);
        sum
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Stolen time without a guest event is explained by the platform it
    /// ran on, and on PREEMPT_RT the hint depends on where the probe's
    /// priority stands against the interrupt threads.
    #[test]
    fn platform_hints_explain_tcg_and_rt_priorities() {
        let sum = CauseSummary {
            per_cpu: vec![CpuAccount {
                cpu: 1,
                stolen_split: Some(StolenSplit {
                    stolen_ns: 1000,
                    no_event_ns: 540,
                    ..Default::default()
                }),
                ..Default::default()
            }],
            ..Default::default()
        };
        let mut platform = punctual_record::Platform {
            hypervisor: Some("QEMU (TCG)".into()),
            preemption: Some("rt".into()),
            ..Default::default()
        };
        let cfg = |p: &str| BTreeMap::from([("policy".to_string(), serde_json::json!(p))]);
        let h = platform_hints(&sum, &platform, &cfg("fifo:95"));
        assert_eq!(h.len(), 2, "{h:?}");
        assert!(
            h[0].starts_with("54% of the stolen time had no guest event") && h[0].contains("TCG")
        );
        assert!(
            h[1].contains("above them") && h[1].contains("ktimers"),
            "{}",
            h[1]
        );
        let h = platform_hints(&sum, &platform, &cfg("fifo:10"));
        assert!(h[1].contains("preempt it and are named"), "{}", h[1]);
        let h = platform_hints(&sum, &platform, &cfg("other:0"));
        assert!(h[1].contains("SCHED_OTHER"), "{}", h[1]);
        platform.hypervisor = Some("KVM".into());
        platform.preemption = Some("full".into());
        let h = platform_hints(&sum, &platform, &cfg("fifo:95"));
        assert_eq!(h.len(), 1);
        assert!(h[0].contains("under KVM the host stops this vCPU"));
        let quiet = CauseSummary {
            per_cpu: vec![CpuAccount {
                stolen_split: Some(StolenSplit {
                    stolen_ns: 1000,
                    no_event_ns: 50,
                    ..Default::default()
                }),
                ..Default::default()
            }],
            ..Default::default()
        };
        assert!(platform_hints(&quiet, &platform, &cfg("fifo:95")).is_empty());
    }

    #[test]
    fn parses_kernel_counters() {
        let stat =
            "cpu  1 2 3 4 5 6 7 8 0 0\ncpu0 1 2 3 4 5 6 7 8 0 0\ncpu1 0 0 0 0 0 10 20 30 0 0\n";
        let m = parse_proc_stat(stat, 100);
        assert_eq!(m[&1], (100_000_000, 200_000_000, 300_000_000));
        assert_eq!(m.len(), 2);
        let irq = "           CPU0       CPU1\n 36:          0      85539 PCI-MSIX-0000:00:02.0   1-edge      virtio1-req.0\nLOC:      53790      60280   Local timer interrupts\nERR:          0\n";
        let m = parse_interrupts(irq);
        assert_eq!(m[&1]["virtio1-req.0"], 85539);
        assert_eq!(m[&0]["LOC"], 53790);
    }

    fn trace_of(events: &[(u64, i32, crate::event::Event)], end: u64) -> Trace {
        let mut a = Attributor::new(1000);
        for (ts, pid, event) in events {
            a.feed(
                1,
                &crate::event::Decoded {
                    ts: *ts,
                    pid: *pid,
                    event: event.clone(),
                },
            );
        }
        a.finish(end);
        Trace {
            attributor: a,
            symbols: Symbols::default(),
            cpus: vec![1],
            lost: BTreeMap::new(),
            started_ns: 0,
            stopped_ns: end,
            kernel: BTreeMap::new(),
            reader_cpu_ns: 0,
            pages: 0,
            events: 0,
            malformed: 0,
            enabled: Vec::new(),
            missing: Vec::new(),
            buffer_kb: 0,
            cleanup_problem: None,
            own_threads: BTreeMap::new(),
            rt_runtime_us: None,
            rt_period_us: None,
            watch: None,
            raw: None,
        }
    }

    /// The probe's own page fault names the rest of its interval (a busy
    /// loop spends nothing at task level but its iteration); an interval
    /// with no event at all stays unexplained.
    #[test]
    fn the_probes_own_page_faults_are_named() {
        use crate::event::Event;
        let irq = |ts, entry| {
            (
                ts,
                100,
                if entry {
                    Event::IrqEntry {
                        irq: 36,
                        name: "virtio1-req.0".into(),
                    }
                } else {
                    Event::IrqExit { irq: 36 }
                },
            )
        };
        let t = trace_of(
            &[
                (1_000, 100, Event::PageFault),
                (10_000, 100, Event::PageFault),
                (10_100, 100, Event::PageFault),
                irq(50_000, true),
                irq(52_000, false),
                irq(60_000, true),
                (60_500, 100, Event::PageFault),
                irq(61_000, false),
            ],
            100_000,
        );
        let w = t.split(1, 9_000, 30_000, &[100]);
        assert_eq!(w.self_faults, 2);
        assert_eq!(w.to_shares()[0].kind, "fault");
        assert_eq!(w.to_shares()[0].count, 2);
        // Another thread's view of the same faults: not its own.
        assert_eq!(t.split(1, 9_000, 30_000, &[55]).self_faults, 0);
        let gaps = ProbeGaps {
            cpu: 1,
            gaps: [
                (9_000, 21_000),
                (49_000, 4_000),
                (59_500, 22_000),
                (85_000, 10_000),
            ]
            .iter()
            .map(|&(a, l)| (Nanos(a), Nanos(l)))
            .collect(),
            dropped: 0,
            loop_cost: Nanos(100),
        };
        let (sources, sp) = t.split_gaps(1, 0, &gaps, &[100]);
        let fault = sources.iter().find(|s| s.kind == "fault").unwrap();
        assert_eq!(fault.name, PAGE_FAULT_NAME);
        assert_eq!(fault.count, 3);
        // 21 us less the loop; the third interval's 21 us outside its
        // handler, less the loop and the handler's entry/exit cap.
        let cap = sp.entry_exit_cap_ns;
        assert_eq!(fault.total_ns, (21_000 - 100) + (21_000 - 100 - cap));
        // The last interval saw no event at all.
        assert_eq!(sp.no_event_ns, 10_000 - 100);
        assert_eq!(
            sp.named_ns + sp.entry_exit_ns + sp.loop_ns + sp.no_event_ns + sp.idle_ns,
            sp.stolen_ns
        );
    }

    #[test]
    fn spike_windows_follow_the_probes_conventions() {
        assert_eq!(
            Trace::spike_window(1000, Metric::Latency, 500, 200),
            (1300, 1500)
        );
        assert_eq!(
            Trace::spike_window(1000, Metric::Gap, 500, 200),
            (1500, 1700)
        );
    }
}
