//! Attribution: a per-CPU state machine over decoded events that says, for
//! every nanosecond the trace covers, what the CPU was doing — an NMI, an
//! x86 system vector, an interrupt handler, a softirq, a kworker function or
//! a task (or idle) — and answers questions about windows of time.
//!
//! Time is charged to the innermost context only, so a handler nested in a
//! softirq is counted once (net of nesting, as osnoise does). The machine
//! produces data (segments and per-instance totals); printing is elsewhere.

use std::collections::{BTreeMap, HashMap, VecDeque};

use punctual_record::SourceShare;
use serde::{Deserialize, Serialize};

pub use punctual_record::cause::SourceTotal;

use crate::event::{softirq_name, Decoded, Event};

/// Longest a throttle is assumed to last without its task running again:
/// RT throttling lasts `sched_rt_period_us - sched_rt_runtime_us`, a
/// deadline throttle until the task's next period; both are well under it.
pub const MAX_THROTTLE_NS: u64 = 1_000_000_000;

/// What a source is. Serialized as the record's `SourceShare::kind`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    Nmi,
    Vector,
    Irq,
    Softirq,
    Kworker,
    Thread,
    Idle,
    /// The CPU idled while the task it took away was still runnable: the
    /// scheduler's bandwidth limit (RT throttling, a deadline or CFS
    /// quota) stopped it, not the lack of work.
    Throttle,
    /// A thread of the measuring process itself (`punctual-*`), shown
    /// apart so punctual is not mistaken for someone else's offender.
    Own,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Nmi => "nmi",
            Kind::Vector => "vector",
            Kind::Irq => "irq",
            Kind::Softirq => "softirq",
            Kind::Kworker => "kworker",
            Kind::Thread => "thread",
            Kind::Idle => "idle",
            Kind::Throttle => "throttle",
            Kind::Own => "self",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Key {
    Nmi,
    Vector(String),
    Irq(i32),
    Softirq(u32),
    Kworker(u64),
    Thread(i32),
    Idle,
    /// Throttled idle after a task of this class: 0 rt, 1 deadline, 2 cfs.
    Throttle(u8),
}

/// What is known about one source; thread names and priorities are the
/// last ones seen (a thread may rename itself or change priority).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SourceInfo {
    pub name: String,
    pub pid: Option<i32>,
    /// Highest kernel priority sched_switch/sched_wakeup reported (0..99
    /// real-time, 100..139 normal, -1 deadline).
    pub prio: Option<i32>,
    /// Work function address (kworker), resolved to a symbol on output.
    pub function: Option<u64>,
}

/// A stretch of time charged to one source instance.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Segment {
    pub start: u64,
    pub end: u64,
    pub src: u32,
    /// Which occurrence (entry, switch-in) of the source this belongs to,
    /// so a window can count occurrences and their largest net length.
    pub inst: u32,
}

#[derive(Clone, Debug)]
struct Ctx {
    src: u32,
    inst: u32,
    /// For irqs and softirqs: what closes it.
    key: Key,
}

#[derive(Clone, Debug, Default)]
struct CpuState {
    stack: Vec<Ctx>,
    /// Current task (pid) and its instance; `None` until known.
    task: Option<(i32, u32)>,
    /// Per class (0 deadline, 1 real-time, 2 normal): set while a task of
    /// that class, switched out still runnable, is kept off the CPU by the
    /// class's bandwidth limit (source, instance, throttled pid), until it
    /// or another task of its class (not a `migration/N` stopper) runs
    /// again, or at most [`MAX_THROTTLE_NS`] (it may have moved away).
    throttle: [Option<(u32, u32, i32)>; 3],
    throttle_since: [u64; 3],
    /// Real-time/deadline tasks switched out still runnable and not back
    /// yet (pid, class, since): at most 16, for at most MAX_THROTTLE_NS.
    waiting: Vec<(i32, u8, u64)>,
    /// Class rank of the current task (3: idle). Idle time and normal
    /// threads' time under a throttle are charged to the nearest throttled
    /// class above them; real-time and deadline tasks (a probe, an
    /// injected neighbor) always keep their own names.
    task_class: u8,
    open_since: Option<u64>,
    segments: VecDeque<Segment>,
    /// Segments before this time were dropped to bound memory.
    retained_from: Option<u64>,
    /// Spans where events were lost: attribution there is not guessed.
    lost: Vec<(u64, u64)>,
    lost_events: u64,
    last_ts: u64,
    first_ts: Option<u64>,
    next_inst: u32,
    /// Page faults entered (time, pid), oldest dropped past the segment
    /// bound. A fault has no exit event, so it is no segment: a window
    /// counts the watched thread's own faults, and its task-level time
    /// there is the fault's (see [`WindowSplit::self_faults`]).
    faults: VecDeque<(u64, i32)>,
}

/// The source name of a watched thread's own page faults.
pub const PAGE_FAULT_NAME: &str = "page fault";

/// What a window was made of.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct WindowSplit {
    /// Named sources, largest first.
    pub sources: Vec<SourceTotal>,
    /// Time in the window with no guest event: the watched thread itself
    /// at task level (a stall only the hypervisor or hardware explains).
    pub unexplained_ns: u64,
    /// Time the CPU sat idle inside the window (a timer not yet delivered,
    /// idle-state exit, or a hypervisor stall of an idle vCPU).
    pub idle_ns: u64,
    /// The window is not fully covered by intact trace.
    pub incomplete: bool,
    pub length_ns: u64,
    /// Page faults the watched thread entered inside the window. Its
    /// task-level time there (`unexplained_ns`) is then the faults' own:
    /// a busy loop takes no time at task level but its next iteration,
    /// and the fault (the guest's handler and, on a VM, the host supplying
    /// the page) ran in its context with no other event to show for it.
    #[serde(default)]
    pub self_faults: u64,
    /// Time in the window spent in the context that woke the watched
    /// thread (the rest of the interrupt whose handler woke it), with that
    /// context's name: the wake-up's own path, not someone else's time.
    #[serde(default)]
    pub wake_path_ns: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wake_path_via: Option<String>,
}

/// The source kind of a wake-up's own path in a watched thread's window.
pub const WAKE_PATH_KIND: &str = "wakeup";

impl WindowSplit {
    pub fn named_ns(&self) -> u64 {
        self.sources.iter().map(|s| s.total_ns).sum()
    }

    /// The record's form: one `SourceShare` per source, plus `unexplained`
    /// (and idle) remainders, shares of the window length.
    pub fn to_shares(&self) -> Vec<SourceShare> {
        let denom = self.length_ns.max(1) as f64;
        let mut v: Vec<SourceShare> = self
            .sources
            .iter()
            .map(|s| SourceShare {
                kind: s.kind.clone(),
                name: s.name.clone(),
                count: s.count,
                total_ns: punctual_record::Nanos(s.total_ns),
                max_ns: punctual_record::Nanos(s.max_ns),
                share: s.total_ns as f64 / denom,
            })
            .collect();
        let (kind, name, count) = if self.self_faults > 0 {
            ("fault", PAGE_FAULT_NAME, self.self_faults)
        } else {
            ("unexplained", "no guest event", 1)
        };
        let wake_name = format!(
            "wake-up path ({})",
            self.wake_path_via.as_deref().unwrap_or("?")
        );
        for (kind, name, count, ns) in [
            (kind, name, count, self.unexplained_ns),
            ("unexplained", "cpu idle", 1, self.idle_ns),
            (WAKE_PATH_KIND, wake_name.as_str(), 1, self.wake_path_ns),
        ] {
            if ns > 0 {
                v.push(SourceShare {
                    kind: kind.into(),
                    name: name.into(),
                    count,
                    total_ns: punctual_record::Nanos(ns),
                    max_ns: punctual_record::Nanos(ns),
                    share: ns as f64 / denom,
                });
            }
        }
        v.sort_by(|a, b| b.total_ns.cmp(&a.total_ns).then(a.name.cmp(&b.name)));
        v
    }
}

/// Resolves kworker function addresses (from /proc/kallsyms).
pub trait Symbolizer {
    fn name(&self, addr: u64) -> Option<String>;
}

impl Symbolizer for () {
    fn name(&self, _addr: u64) -> Option<String> {
        None
    }
}

/// The per-CPU state machines and the source table they share.
#[derive(Debug)]
pub struct Attributor {
    cpus: BTreeMap<u32, CpuState>,
    keys: HashMap<Key, u32>,
    sources: Vec<(Kind, SourceInfo)>,
    /// Active work item per kworker pid (a work item can sleep and move on).
    work: HashMap<i32, (u32, u32)>,
    max_segments: usize,
}

impl Attributor {
    /// `max_segments` bounds memory per CPU (24 bytes each); older
    /// segments are dropped and windows before them marked incomplete.
    pub fn new(max_segments: usize) -> Attributor {
        Attributor {
            cpus: BTreeMap::new(),
            keys: HashMap::new(),
            sources: Vec::new(),
            work: HashMap::new(),
            max_segments: max_segments.max(16),
        }
    }

    fn intern(&mut self, key: Key, kind: Kind, info: impl FnOnce() -> SourceInfo) -> u32 {
        if let Some(&i) = self.keys.get(&key) {
            return i;
        }
        let i = self.sources.len() as u32;
        self.sources.push((kind, info()));
        self.keys.insert(key, i);
        i
    }

    fn thread_src(&mut self, pid: i32, comm: Option<&str>, prio: Option<i32>) -> u32 {
        if pid == 0 {
            return self.intern(Key::Idle, Kind::Idle, || SourceInfo {
                name: "idle".into(),
                pid: Some(0),
                ..Default::default()
            });
        }
        let i = self.intern(Key::Thread(pid), Kind::Thread, || SourceInfo {
            name: String::new(),
            pid: Some(pid),
            ..Default::default()
        });
        let info = &mut self.sources[i as usize].1;
        if let Some(c) = comm {
            if !c.is_empty() {
                info.name = c.to_string();
            }
        }
        // The highest priority it was seen at: a thread's policy guard
        // puts SCHED_OTHER back just before it exits, and that last switch
        // must not hide the priority it ran at.
        if let Some(p) = prio {
            info.prio = Some(info.prio.map_or(p, |q| q.min(p)));
        }
        i
    }

    /// Marks events lost on `cpu` between `from` and `to` (the last event
    /// before the loss and the first after it). The CPU's state is unknown
    /// afterwards until the events re-establish it.
    pub fn lost(&mut self, cpu: u32, from: u64, to: u64, count: u64) {
        let st = self.cpus.entry(cpu).or_default();
        st.lost_events += count;
        let from = if from == 0 { st.last_ts } else { from };
        if st.lost.len() < 100_000 {
            st.lost.push((from, to.max(from)));
        } else if let Some(l) = st.lost.last_mut() {
            l.1 = l.1.max(to);
        }
        st.stack.clear();
        st.task = None;
        st.throttle = [None; 3];
        st.waiting.clear();
        st.open_since = None;
    }

    pub fn lost_events(&self, cpu: u32) -> u64 {
        self.cpus.get(&cpu).map(|c| c.lost_events).unwrap_or(0)
    }

    pub fn cpus(&self) -> Vec<u32> {
        self.cpus.keys().copied().collect()
    }

    /// Last timestamp seen on `cpu`.
    pub fn last_ts(&self, cpu: u32) -> Option<u64> {
        self.cpus.get(&cpu).map(|c| c.last_ts)
    }

    fn top_src(&mut self, cpu: u32) -> Option<(u32, u32)> {
        let st = self.cpus.get(&cpu)?;
        if let Some(c) = st.stack.last() {
            return Some((c.src, c.inst));
        }
        if st.task_class >= 2 {
            let above = &st.throttle[..st.task_class.min(3) as usize];
            if let Some((src, inst, _)) = above.iter().rev().flatten().next() {
                return Some((*src, *inst));
            }
        }
        let (pid, inst) = st.task?;
        if let Some(&(src, winst)) = self.work.get(&pid) {
            return Some((src, winst));
        }
        Some((self.thread_src(pid, None, None), inst))
    }

    /// Charges `[open_since, ts)` to the innermost context.
    fn close(&mut self, cpu: u32, ts: u64) {
        let top = self.top_src(cpu);
        let max = self.max_segments;
        let st = self.cpus.get_mut(&cpu).expect("cpu state exists");
        if let (Some(since), Some((src, inst))) = (st.open_since, top) {
            if ts > since {
                match st.segments.back_mut() {
                    Some(last) if last.src == src && last.inst == inst && last.end == since => {
                        last.end = ts
                    }
                    _ => {
                        st.segments.push_back(Segment {
                            start: since,
                            end: ts,
                            src,
                            inst,
                        });
                        if st.segments.len() > max {
                            let dropped = st.segments.pop_front().expect("non-empty");
                            st.retained_from = Some(dropped.end);
                        }
                    }
                }
            }
        }
        st.open_since = Some(ts.max(st.open_since.unwrap_or(0)));
    }

    /// Class rank (0 deadline, 1 real-time, 2 normal, 3 idle) of a task
    /// from the highest priority seen for it; normal when never seen.
    fn known_class(&self, pid: i32) -> u8 {
        if pid == 0 {
            return 3;
        }
        let prio = self
            .keys
            .get(&Key::Thread(pid))
            .and_then(|&i| self.sources[i as usize].1.prio);
        match prio {
            Some(p) if p < 0 => 0,
            Some(p) if p < 100 => 1,
            _ => 2,
        }
    }

    fn new_inst(&mut self, cpu: u32) -> u32 {
        let st = self.cpus.get_mut(&cpu).expect("cpu state exists");
        st.next_inst = st.next_inst.wrapping_add(1);
        st.next_inst
    }

    /// Feeds one event of `cpu`. Events of one CPU must come in time order
    /// (the per-CPU ring guarantees it).
    pub fn feed(&mut self, cpu: u32, ev: &Decoded) {
        let (ts, prev_ts) = {
            let st = self.cpus.entry(cpu).or_default();
            let prev = st.last_ts;
            let ts = ev.ts.max(prev);
            st.last_ts = ts;
            st.first_ts.get_or_insert(ts);
            (ts, prev)
        };
        // Every event's common_pid is the task current on its CPU (an
        // interrupt runs on the task it interrupted). Some switches are
        // not traced — this kernel (6.18) emits no sched_switch when a CPU
        // leaves idle — so a different pid means the task changed after
        // the previous event: charge up to that event to the old task and
        // the rest to the new one.
        if let Some((cur, _)) = self.cpus[&cpu].task {
            if cur != ev.pid && !matches!(ev.event, Event::Nmi { .. }) {
                self.close(cpu, prev_ts);
                let class = self.known_class(ev.pid);
                let inst = self.new_inst(cpu);
                let st = self.cpus.get_mut(&cpu).expect("exists");
                st.task = Some((ev.pid, inst));
                st.task_class = class;
                st.waiting.retain(|w| w.0 != ev.pid);
                for (c, t) in st.throttle.iter_mut().enumerate() {
                    if t.is_some_and(|(_, _, p)| p == ev.pid) || class as usize == c {
                        *t = None;
                    }
                }
            }
        }
        // The task current at any event is its common_pid: this recovers
        // the state after a start or a loss without waiting for a switch.
        if self.cpus[&cpu].task.is_none() {
            let inst = self.new_inst(cpu);
            let st = self.cpus.get_mut(&cpu).expect("exists");
            st.task = Some((ev.pid, inst));
            st.task_class = if ev.pid == 0 { 3 } else { 2 };
            if st.open_since.is_none() {
                st.open_since = Some(ts);
            }
        }
        match &ev.event {
            Event::Nmi { delta_ns } => {
                let d = (*delta_ns).max(0) as u64;
                let since = self.cpus[&cpu].open_since.unwrap_or(ts);
                let nmi_start = ts.saturating_sub(d).max(since);
                self.close(cpu, nmi_start);
                let src = self.intern(Key::Nmi, Kind::Nmi, || SourceInfo {
                    name: "NMI".into(),
                    ..Default::default()
                });
                let inst = self.new_inst(cpu);
                let st = self.cpus.get_mut(&cpu).expect("exists");
                st.stack.push(Ctx {
                    src,
                    inst,
                    key: Key::Nmi,
                });
                self.close(cpu, ts);
                self.cpus.get_mut(&cpu).expect("exists").stack.pop();
                return;
            }
            _ => self.close(cpu, ts),
        }
        match &ev.event {
            Event::IrqEntry { irq, name } => {
                let src = self.intern(Key::Irq(*irq), Kind::Irq, || SourceInfo {
                    name: name.clone(),
                    ..Default::default()
                });
                self.push(cpu, src, Key::Irq(*irq));
            }
            Event::IrqExit { irq } => self.pop(cpu, &Key::Irq(*irq)),
            Event::SoftirqEntry { vec } => {
                let src = self.intern(Key::Softirq(*vec), Kind::Softirq, || SourceInfo {
                    name: softirq_name(*vec),
                    ..Default::default()
                });
                self.push(cpu, src, Key::Softirq(*vec));
            }
            Event::SoftirqExit { vec } => self.pop(cpu, &Key::Softirq(*vec)),
            Event::VectorEntry { name } => {
                let key = Key::Vector(name.clone());
                let src = self.intern(key.clone(), Kind::Vector, || SourceInfo {
                    name: name.clone(),
                    ..Default::default()
                });
                self.push(cpu, src, key);
            }
            Event::VectorExit { name } => self.pop(cpu, &Key::Vector(name.clone())),
            Event::Switch {
                prev_pid,
                prev_comm,
                prev_prio,
                next_pid,
                next_comm,
                next_prio,
                prev_state,
            } => {
                self.thread_src(*prev_pid, Some(prev_comm), Some(*prev_prio));
                self.thread_src(*next_pid, Some(next_comm), Some(*next_prio));
                // A runnable task replaced by idle, or a real-time/deadline
                // task replaced by a lower class: only a bandwidth limit
                // does that. It lasts until that task or one of its class
                // runs again.
                let class = |pid: i32, p: i32| match p {
                    _ if pid == 0 => 3u8,
                    p if p < 0 => 0,
                    p if p < 100 => 1,
                    _ => 2,
                };
                let (pc, nc) = (class(*prev_pid, *prev_prio), class(*next_pid, *next_prio));
                let mut throttle = self.cpus[&cpu].throttle;
                let since = self.cpus[&cpu].throttle_since;
                // It ends when its task or another of its class runs; not
                // for the stop-class `migration/N` threads, which show as
                // rt99 and run through any throttle.
                let stopper = next_comm.starts_with("migration/");
                for (c, t) in throttle.iter_mut().enumerate() {
                    if let Some((_, _, pid)) = *t {
                        if *next_pid == pid
                            || (nc as usize == c && !stopper)
                            || ts.saturating_sub(since[c]) > MAX_THROTTLE_NS
                        {
                            *t = None;
                        }
                    }
                }
                // Real-time and deadline tasks switched out still runnable
                // wait for the CPU; the one switched in stops waiting.
                let runnable =
                    *prev_pid != 0 && prev_state.is_some_and(crate::event::left_runnable);
                {
                    let st = self.cpus.get_mut(&cpu).expect("exists");
                    st.waiting.retain(|&(p, _, t)| {
                        p != *next_pid && p != *prev_pid && ts.saturating_sub(t) <= MAX_THROTTLE_NS
                    });
                    if runnable && pc < 2 && st.waiting.len() < 16 {
                        st.waiting.push((*prev_pid, pc, ts));
                    }
                }
                // Idle, or a lower class, chosen while a task is runnable:
                // only a bandwidth limit does that. The task is the one
                // switched out now, or one that waits since a preemption
                // (the probe preempted by a neighbor that then throttles).
                // A new throttle of a class replaces an older one.
                let waiter = self.cpus[&cpu]
                    .waiting
                    .iter()
                    .filter(|w| w.1 < nc)
                    .min_by_key(|w| w.1)
                    .map(|w| (w.0, w.1));
                let start = if runnable && pc < 3 && (*next_pid == 0 || (pc < 2 && nc > pc)) {
                    Some((*prev_pid, pc))
                } else {
                    waiter.filter(|w| throttle[w.1 as usize].is_none())
                };
                if let Some((tpid, class)) = start {
                    let src = self.intern(Key::Throttle(class), Kind::Throttle, || SourceInfo {
                        name: match class {
                            0 => "deadline throttling",
                            1 => "rt throttling",
                            _ => "cfs bandwidth throttling",
                        }
                        .into(),
                        ..Default::default()
                    });
                    throttle[class as usize] = Some((src, self.new_inst(cpu), tpid));
                    self.cpus.get_mut(&cpu).expect("exists").throttle_since[class as usize] = ts;
                }
                let inst = self.new_inst(cpu);
                let st = self.cpus.get_mut(&cpu).expect("exists");
                // A switch happens at task level: any context still open
                // lost its exit (trace started inside it).
                st.stack.clear();
                st.task = Some((*next_pid, inst));
                st.task_class = nc;
                st.throttle = throttle;
            }
            Event::Wakeup { pid, comm, prio } | Event::Waking { pid, comm, prio } => {
                self.thread_src(*pid, Some(comm), Some(*prio));
            }
            Event::WorkStart { function } => {
                let src = self.intern(Key::Kworker(*function), Kind::Kworker, || SourceInfo {
                    name: format!("{function:#x}"),
                    function: Some(*function),
                    ..Default::default()
                });
                let inst = self.new_inst(cpu);
                self.work.insert(ev.pid, (src, inst));
            }
            Event::WorkEnd { .. } => {
                self.work.remove(&ev.pid);
            }
            Event::PageFault => {
                let max = self.max_segments;
                let st = self.cpus.get_mut(&cpu).expect("exists");
                st.faults.push_back((ts, ev.pid));
                if st.faults.len() > max {
                    st.faults.pop_front();
                }
            }
            // Only its common_pid matters (above): the task that runs.
            Event::SysExit => {}
            Event::Nmi { .. } => unreachable!("handled above"),
        }
    }

    fn push(&mut self, cpu: u32, src: u32, key: Key) {
        let inst = self.new_inst(cpu);
        let st = self.cpus.get_mut(&cpu).expect("exists");
        if st.stack.len() < 64 {
            st.stack.push(Ctx { src, inst, key });
        }
    }

    fn pop(&mut self, cpu: u32, key: &Key) {
        let st = self.cpus.get_mut(&cpu).expect("exists");
        if let Some(i) = st.stack.iter().rposition(|c| &c.key == key) {
            st.stack.truncate(i);
        }
    }

    /// Closes every CPU's open segment at `ts` (the end of recording).
    pub fn finish(&mut self, ts: u64) {
        let cpus: Vec<u32> = self.cpus.keys().copied().collect();
        for cpu in cpus {
            let last = self.cpus[&cpu].last_ts;
            self.close(cpu, ts.max(last));
            self.cpus.get_mut(&cpu).expect("exists").last_ts = ts.max(last);
        }
    }

    /// Segments of `cpu` (oldest first), for tests and exporters.
    pub fn segments(&self, cpu: u32) -> impl Iterator<Item = &Segment> {
        self.cpus
            .get(&cpu)
            .into_iter()
            .flat_map(|c| c.segments.iter())
    }

    pub fn has_kind(&self, kind: Kind) -> bool {
        self.sources.iter().any(|(k, _)| *k == kind)
    }

    pub fn source(&self, src: u32) -> (Kind, &SourceInfo) {
        let (k, i) = &self.sources[src as usize];
        (*k, i)
    }

    fn display(&self, src: u32, sym: &dyn Symbolizer) -> (Kind, String, Option<String>) {
        let (kind, info) = self.source(src);
        match kind {
            Kind::Thread => {
                let pid = info.pid.unwrap_or(-1);
                let comm = if info.name.is_empty() {
                    "?".to_string()
                } else {
                    info.name.clone()
                };
                (kind, format!("{comm}/{pid}"), info.prio.map(sched_label))
            }
            Kind::Kworker => {
                let name = info
                    .function
                    .and_then(|f| sym.name(f))
                    .unwrap_or_else(|| info.name.clone());
                (kind, name, None)
            }
            _ => (kind, info.name.clone(), None),
        }
    }

    /// Splits `[start, end)` on `cpu`. Time charged to a thread in
    /// `self_pids` (the probe) at task level is unexplained: no guest event
    /// fired, so only the hypervisor or the hardware can have taken it.
    pub fn window(
        &self,
        cpu: u32,
        start: u64,
        end: u64,
        self_pids: &[i32],
        sym: &dyn Symbolizer,
    ) -> WindowSplit {
        self.window_own(cpu, start, end, self_pids, &[], sym)
    }

    /// [`Attributor::window`], with the threads in `own_pids` (the
    /// measuring process's other threads) shown as kind `self`.
    pub fn window_own(
        &self,
        cpu: u32,
        start: u64,
        end: u64,
        self_pids: &[i32],
        own_pids: &[i32],
        sym: &dyn Symbolizer,
    ) -> WindowSplit {
        self.window_woken(cpu, start, end, self_pids, own_pids, sym, None)
    }

    /// The source instance (source, occurrence) running on `cpu` at `ts`,
    /// innermost context first, when the trace covers that moment.
    pub fn instance_at(&self, cpu: u32, ts: u64) -> Option<(u32, u32)> {
        let st = self.cpus.get(&cpu)?;
        let i = st.segments.partition_point(|s| s.end <= ts);
        let seg = st.segments.get(i)?;
        (seg.start <= ts).then_some((seg.src, seg.inst))
    }

    /// [`Attributor::window_own`], with the time of the source instance
    /// `waker` (the context that woke the watched thread) counted apart as
    /// the wake-up's own path.
    #[allow(clippy::too_many_arguments)]
    pub fn window_woken(
        &self,
        cpu: u32,
        start: u64,
        end: u64,
        self_pids: &[i32],
        own_pids: &[i32],
        sym: &dyn Symbolizer,
        waker: Option<(u32, u32)>,
    ) -> WindowSplit {
        let mut out = WindowSplit {
            length_ns: end.saturating_sub(start),
            ..Default::default()
        };
        let Some(st) = self.cpus.get(&cpu) else {
            out.incomplete = true;
            out.unexplained_ns = out.length_ns;
            return out;
        };
        if end <= start {
            return out;
        }
        let covered_from = st.retained_from.or(st.first_ts).unwrap_or(u64::MAX);
        if start < covered_from || end > st.last_ts {
            out.incomplete = true;
        }
        if st.lost.iter().any(|&(a, b)| a < end && start < b) {
            out.incomplete = true;
        }
        // (count, total, max, current instance, its running total)
        let mut per: HashMap<u32, (u64, u64, u64, u32, u64)> = HashMap::new();
        let mut covered = 0u64;
        let first = st.segments.partition_point(|s| s.end <= start);
        for seg in st.segments.range(first..) {
            if seg.start >= end {
                break;
            }
            let a = seg.start.max(start);
            let b = seg.end.min(end);
            if b <= a {
                continue;
            }
            let d = b - a;
            covered += d;
            if waker == Some((seg.src, seg.inst)) {
                out.wake_path_ns += d;
                if out.wake_path_via.is_none() {
                    out.wake_path_via = Some(self.display(seg.src, sym).1);
                }
                continue;
            }
            let (kind, info) = self.source(seg.src);
            if kind == Kind::Idle {
                out.idle_ns += d;
                continue;
            }
            if kind == Kind::Thread && info.pid.is_some_and(|p| self_pids.contains(&p)) {
                out.unexplained_ns += d;
                continue;
            }
            let e = per.entry(seg.src).or_insert((0, 0, 0, u32::MAX, 0));
            if e.3 != seg.inst || e.0 == 0 {
                e.0 += 1;
                e.3 = seg.inst;
                e.4 = 0;
            }
            e.1 += d;
            e.4 += d;
            e.2 = e.2.max(e.4);
        }
        let f0 = st.faults.partition_point(|f| f.0 < start);
        out.self_faults = st
            .faults
            .range(f0..)
            .take_while(|f| f.0 < end)
            .filter(|f| self_pids.contains(&f.1))
            .count() as u64;
        // Time no segment covers (before the trace, inside a loss) is not
        // named: it is counted as unexplained and the window flagged.
        let gap = out.length_ns.saturating_sub(covered);
        if gap > 0 {
            out.incomplete = true;
            out.unexplained_ns += gap;
        }
        let mut merged: BTreeMap<(Kind, String), SourceTotal> = BTreeMap::new();
        for (src, (count, total, max, _, _)) in per {
            let (mut kind, name, sched) = self.display(src, sym);
            if kind == Kind::Thread
                && self
                    .source(src)
                    .1
                    .pid
                    .is_some_and(|p| own_pids.contains(&p))
            {
                kind = Kind::Own;
            }
            let e = merged
                .entry((kind, name.clone()))
                .or_insert_with(|| SourceTotal {
                    kind: kind.as_str().into(),
                    name,
                    sched,
                    ..Default::default()
                });
            e.count += count;
            e.total_ns += total;
            e.max_ns = e.max_ns.max(max);
        }
        out.sources = merged.into_values().collect();
        out.sources.sort_by(|a, b| {
            b.total_ns
                .cmp(&a.total_ns)
                .then_with(|| a.name.cmp(&b.name))
        });
        out
    }
}

/// `rt99`, `nice0`, `deadline` from a kernel priority.
pub fn sched_label(prio: i32) -> String {
    if prio < 0 {
        "deadline".into()
    } else if prio < 100 {
        format!("rt{}", 99 - prio)
    } else {
        format!("nice{}", prio - 120)
    }
}

/// Kernel symbols from `/proc/kallsyms` text, for kworker functions.
#[derive(Debug, Default)]
pub struct Symbols {
    sorted: Vec<(u64, String)>,
}

impl Symbols {
    pub fn parse(text: &str) -> Symbols {
        let mut sorted: Vec<(u64, String)> = text
            .lines()
            .filter_map(|l| {
                let mut it = l.split_whitespace();
                let addr = u64::from_str_radix(it.next()?, 16).ok()?;
                let ty = it.next()?;
                let name = it.next()?;
                (addr != 0 && matches!(ty, "t" | "T")).then(|| (addr, name.to_string()))
            })
            .collect();
        sorted.sort();
        Symbols { sorted }
    }

    pub fn is_empty(&self) -> bool {
        self.sorted.is_empty()
    }
}

impl Symbolizer for Symbols {
    fn name(&self, addr: u64) -> Option<String> {
        let i = self.sorted.partition_point(|(a, _)| *a <= addr);
        if i == 0 {
            return None;
        }
        let (a, n) = &self.sorted[i - 1];
        Some(if *a == addr {
            n.clone()
        } else {
            format!("{n}+{:#x}", addr - a)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(ts: u64, pid: i32, event: Event) -> Decoded {
        Decoded { ts, pid, event }
    }

    fn comm_of(pid: i32) -> String {
        match pid {
            0 => "swapper/0".into(),
            50 => "kworker/0:1".into(),
            100 => "probe".into(),
            200 => "noisy-neighbor".into(),
            300 => "punctual-run".into(),
            p => format!("t{p}"),
        }
    }

    fn next_prio_of(pid: i32) -> i32 {
        if pid == 200 {
            0
        } else {
            1
        }
    }

    fn switch(ts: u64, prev: i32, next: i32, next_comm: &str, next_prio: i32) -> Decoded {
        ev(
            ts,
            prev,
            Event::Switch {
                prev_pid: prev,
                prev_comm: comm_of(prev),
                prev_prio: match prev {
                    100 | 200 => next_prio_of(prev),
                    _ => 120,
                },
                next_pid: next,
                next_comm: next_comm.into(),
                next_prio,
                // Blocked (S) unless a test says otherwise.
                prev_state: Some(1),
            },
        )
    }

    fn preempted(mut d: Decoded) -> Decoded {
        if let Event::Switch { prev_state, .. } = &mut d.event {
            // R+: runnable, switched out by preemption.
            *prev_state = Some(0x100);
        }
        d
    }

    /// A SCHED_FIFO probe switched out still runnable with idle next is
    /// throttled: that idle time is named, a blocking switch's is not.
    #[test]
    fn throttled_idle_is_named_and_blocked_idle_is_not() {
        let mut a = Attributor::new(1000);
        for e in [
            switch(1_000, 0, 100, "probe", 1),
            preempted(switch(2_000, 100, 0, "swapper/0", 120)),
            ev(
                3_000,
                0,
                Event::VectorEntry {
                    name: "local_timer".into(),
                },
            ),
            ev(
                3_200,
                0,
                Event::VectorExit {
                    name: "local_timer".into(),
                },
            ),
            // A normal thread runs inside the throttled stretch: the
            // throttling, not it, kept the probe off the CPU.
            switch(4_000, 0, 300, "t300", 120),
            switch(5_000, 300, 0, "swapper/0", 120),
            switch(6_000, 0, 100, "probe", 1),
            switch(7_000, 100, 0, "swapper/0", 120),
            switch(9_000, 0, 100, "probe", 1),
            // A deadline task preempting the probe is itself, not a throttle.
            preempted(switch(9_500, 100, 400, "dl", -1)),
            switch(9_800, 400, 100, "probe", 1),
            // The deadline task throttled: the real-time tasks that run
            // meanwhile (the probe, a neighbor) keep their own names.
            preempted(switch(9_900, 100, 400, "dl", -1)),
            preempted(switch(9_950, 400, 100, "probe", 1)),
            preempted(switch(9_960, 100, 200, "noisy-neighbor", 0)),
            switch(9_990, 200, 100, "probe", 1),
        ] {
            a.feed(0, &e);
        }
        a.finish(10_000);
        let w = a.window(0, 1_000, 10_000, &[100], &());
        let th = w.sources.iter().find(|s| s.kind == "throttle").unwrap();
        assert_eq!(
            (th.name.as_str(), th.total_ns, th.count),
            ("rt throttling", 3_800, 1)
        );
        // The tick inside the throttled stretch keeps its own name.
        assert!(w
            .sources
            .iter()
            .any(|s| s.name == "local_timer" && s.total_ns == 200));
        // Idle after a blocking switch stays idle.
        assert_eq!(w.idle_ns, 2_000);
        let dl = w.sources.iter().find(|s| s.name == "t400/400").unwrap();
        assert_eq!((dl.kind.as_str(), dl.total_ns), ("thread", 350));
        let nb = w
            .sources
            .iter()
            .find(|s| s.name == "noisy-neighbor/200")
            .unwrap();
        assert_eq!((nb.kind.as_str(), nb.total_ns), ("thread", 30));
        assert!(!w.sources.iter().any(|s| s.name == "deadline throttling"));
    }

    /// The probe preempted by a real-time neighbor that then blocks, and
    /// the CPU idles while the probe is still runnable: throttled.
    #[test]
    fn idle_while_a_preempted_rt_task_waits_is_throttling() {
        let mut a = Attributor::new(1000);
        for e in [
            switch(1_000, 0, 100, "probe", 1),
            preempted(switch(2_000, 100, 200, "noisy-neighbor", 0)),
            switch(3_000, 200, 0, "swapper/0", 120),
            switch(7_000, 0, 100, "probe", 1),
        ] {
            a.feed(0, &e);
        }
        a.finish(8_000);
        let w = a.window(0, 1_000, 8_000, &[100], &());
        let th = w.sources.iter().find(|s| s.kind == "throttle").unwrap();
        assert_eq!((th.name.as_str(), th.total_ns), ("rt throttling", 4_000));
        assert_eq!(w.idle_ns, 0);
    }

    /// This kernel does not trace leaving idle: the next event's
    /// common_pid shows who runs, from the event before it.
    #[test]
    fn untraced_switch_out_of_idle_is_recovered_from_common_pid() {
        let mut a = Attributor::new(1000);
        for e in [
            switch(1_000, 0, 100, "probe", 1),
            switch(2_000, 100, 0, "swapper/0", 120),
            ev(
                3_000,
                0,
                Event::VectorEntry {
                    name: "local_timer".into(),
                },
            ),
            ev(
                3_200,
                0,
                Event::VectorExit {
                    name: "local_timer".into(),
                },
            ),
            // (the probe runs from here, no sched_switch)
            ev(
                8_000,
                100,
                Event::VectorEntry {
                    name: "local_timer".into(),
                },
            ),
            ev(
                8_100,
                100,
                Event::VectorExit {
                    name: "local_timer".into(),
                },
            ),
        ] {
            a.feed(0, &e);
        }
        a.finish(9_000);
        let w = a.window(0, 1_000, 9_000, &[100], &());
        assert_eq!(w.idle_ns, 1_000, "{w:?}");
        // probe: 1000..2000, 3200..8000, 8100..9000
        assert_eq!(w.unexplained_ns, 1_000 + 4_800 + 900);
    }

    #[test]
    fn own_threads_are_labelled_self() {
        let mut a = Attributor::new(1000);
        for e in [
            switch(0, 0, 100, "probe", 1),
            switch(1_000, 100, 300, "punctual-run", 120),
            switch(1_500, 300, 100, "probe", 1),
        ] {
            a.feed(0, &e);
        }
        a.finish(2_000);
        let w = a.window_own(0, 0, 2_000, &[100], &[300], &());
        assert_eq!(w.sources[0].kind, "self");
        assert_eq!(w.sources[0].name, "punctual-run/300");
        let w = a.window(0, 0, 2_000, &[100], &());
        assert_eq!(w.sources[0].kind, "thread");
    }

    /// A probe (pid 100) busy on CPU 0; a timer vector with a nested
    /// softirq and an irq inside it; then an RT thread runs; then nothing
    /// fires for a while (a hypervisor stall).
    fn scenario() -> Attributor {
        let mut a = Attributor::new(1000);
        let evs = vec![
            switch(1_000, 0, 100, "probe", 0),
            ev(
                2_000,
                100,
                Event::VectorEntry {
                    name: "local_timer".into(),
                },
            ),
            ev(
                2_500,
                100,
                Event::VectorExit {
                    name: "local_timer".into(),
                },
            ),
            ev(2_500, 100, Event::SoftirqEntry { vec: 1 }),
            ev(
                3_000,
                100,
                Event::IrqEntry {
                    irq: 36,
                    name: "virtio1-req.0".into(),
                },
            ),
            ev(3_400, 100, Event::IrqExit { irq: 36 }),
            ev(4_000, 100, Event::SoftirqExit { vec: 1 }),
            switch(5_000, 100, 200, "noisy-neighbor", 0),
            switch(8_000, 200, 100, "probe", 0),
            ev(
                20_000,
                100,
                Event::VectorEntry {
                    name: "local_timer".into(),
                },
            ),
            ev(
                20_100,
                100,
                Event::VectorExit {
                    name: "local_timer".into(),
                },
            ),
        ];
        for e in &evs {
            a.feed(0, e);
        }
        a.finish(30_000);
        a
    }

    #[test]
    fn nesting_is_counted_once_and_self_time_is_unexplained() {
        let a = scenario();
        let w = a.window(0, 1_500, 9_000, &[100], &());
        assert!(!w.incomplete);
        let get = |n: &str| w.sources.iter().find(|s| s.name == n).cloned().unwrap();
        assert_eq!(get("local_timer").total_ns, 500);
        // Softirq 2500..4000 minus the nested irq's 400.
        assert_eq!(get("TIMER").total_ns, 1_100);
        assert_eq!(get("virtio1-req.0").total_ns, 400);
        let t = get("noisy-neighbor/200");
        assert_eq!((t.kind.as_str(), t.total_ns, t.count), ("thread", 3_000, 1));
        assert_eq!(t.sched.as_deref(), Some("rt99"));
        assert_eq!(w.sources[0].name, "noisy-neighbor/200");
        // Everything else of the 7.5 us window was the probe itself.
        assert_eq!(w.named_ns() + w.unexplained_ns, 7_500);
        assert_eq!(w.unexplained_ns, 7_500 - 5_000);
        let shares = w.to_shares();
        let sum: f64 = shares.iter().map(|s| s.share).sum();
        assert!((sum - 1.0).abs() < 1e-9, "{shares:?}");
    }

    #[test]
    fn counts_instances_and_their_largest_net_length() {
        let a = scenario();
        let w = a.window(0, 0, 30_000, &[100], &());
        let lt = w.sources.iter().find(|s| s.name == "local_timer").unwrap();
        assert_eq!((lt.count, lt.total_ns, lt.max_ns), (2, 600, 500));
        // Before the first event nothing is known: flagged, not guessed.
        assert!(w.incomplete);
        assert!(!a.window(0, 1_000, 30_000, &[100], &()).incomplete);
    }

    #[test]
    fn losses_mark_windows_incomplete_and_reset_state() {
        let mut a = scenario();
        a.lost(0, 30_000, 40_000, 12);
        a.feed(
            0,
            &ev(
                41_000,
                300,
                Event::IrqEntry {
                    irq: 5,
                    name: "eth0".into(),
                },
            ),
        );
        a.feed(0, &ev(42_500, 300, Event::IrqExit { irq: 5 }));
        a.finish(43_000);
        assert_eq!(a.lost_events(0), 12);
        assert!(a.window(0, 35_000, 36_000, &[100], &()).incomplete);
        let w = a.window(0, 41_000, 43_000, &[100], &());
        assert!(!w.incomplete);
        // After the loss, the current task came from common_pid (300).
        assert_eq!(w.sources[0].name, "eth0");
        assert_eq!(w.sources[1].name, "?/300");
    }

    #[test]
    fn kworker_functions_idle_and_nmi() {
        let mut a = Attributor::new(1000);
        let evs = vec![
            switch(0, 100, 0, "swapper/0", 120),
            switch(1_000, 0, 50, "kworker/0:1", 120),
            ev(1_100, 50, Event::WorkStart { function: 0x1010 }),
            ev(1_600, 50, Event::Nmi { delta_ns: 200 }),
            ev(2_100, 50, Event::WorkEnd { function: 0x1010 }),
            switch(2_200, 50, 0, "swapper/0", 120),
        ];
        for e in &evs {
            a.feed(0, e);
        }
        a.finish(3_000);
        let syms = Symbols::parse("0000000000001000 T vmstat_update\n0000000000002000 t other\n");
        let w = a.window(0, 0, 3_000, &[], &syms);
        let names: Vec<(&str, &str, u64)> = w
            .sources
            .iter()
            .map(|s| (s.kind.as_str(), s.name.as_str(), s.total_ns))
            .collect();
        assert_eq!(
            names,
            vec![
                ("kworker", "vmstat_update+0x10", 800),
                ("nmi", "NMI", 200),
                ("thread", "kworker/0:1/50", 200),
            ]
        );
        assert_eq!(w.idle_ns, 1_800);
        assert_eq!(sched_label(120), "nice0");
        assert_eq!(sched_label(-1), "deadline");
    }

    #[test]
    fn memory_stays_bounded() {
        let mut a = Attributor::new(16);
        for i in 0..1000u64 {
            a.feed(0, &ev(i * 10, 1, Event::SoftirqEntry { vec: 3 }));
            a.feed(0, &ev(i * 10 + 5, 1, Event::SoftirqExit { vec: 3 }));
        }
        assert!(a.segments(0).count() <= 16);
        assert!(a.window(0, 0, 100, &[], &()).incomplete);
        assert!(!a.window(0, 9_950, 9_990, &[], &()).incomplete);
    }
}
