//! One CPU's thread scheduler, driven by events and asked "who runs until
//! when".
//!
//! The caller (simulator or live backend) owns time. It tells the
//! scheduler what happened — a thread became runnable ([`Scheduler::on_release`]),
//! blocked ([`Scheduler::on_block`]), took or released a lock, or the CPU was
//! taken by interrupts, DPCs or the hypervisor ([`Scheduler::on_stolen`]) — and
//! calls [`Scheduler::pick`] whenever it may switch threads, at the latest
//! at the `until` of the previous [`Decision`]. The scheduler never reads a
//! clock.
//!
//! Bands, highest first:
//! 1. reservations with budget left (Rez, Rez-C, Rez-FB and the optional
//!    time-sharing reservation), earliest server deadline first;
//! 2. EDF threads, earliest absolute deadline first;
//! 3. fixed-priority threads (time-sharing threads are priority 0), highest
//!    effective priority first, round-robin among equals every `quantum`;
//! 4. soft reservations whose budget is spent (they may use idle time).
//!
//! Hard reservations with no budget do not run until replenished.

use std::collections::VecDeque;

use punctual_units::Nanos;

use crate::feedback::FeedbackController;

pub type ThreadId = usize;
pub type LockId = usize;

/// How a reservation treats stolen time (Regehr's thesis §11.5).
#[derive(Clone, Debug, PartialEq)]
pub enum RezKind {
    /// Plain Rez: the budget is charged with wall time, stolen time included
    /// (as the seeds' kernels did, since they could not see it).
    Rez,
    /// Rez-C: the budget is charged only with time actually received, so
    /// the thread catches up after theft (bypassing admission).
    RezC,
    /// Rez-FB: charged like Rez, but the amount requested each period is
    /// set by the feedback controller.
    RezFb(FeedbackController),
}

impl RezKind {
    pub fn name(&self) -> &'static str {
        match self {
            RezKind::Rez => "rez",
            RezKind::RezC => "rez-c",
            RezKind::RezFb(_) => "rez-fb",
        }
    }
}

/// "`amount` every `period`".
#[derive(Clone, Debug, PartialEq)]
pub struct Reservation {
    /// What is requested from the scheduler each period (after any static
    /// over-reservation); Rez-FB starts here and then adjusts.
    pub amount: Nanos,
    pub period: Nanos,
    /// What the application needs each period: a period is a hit when the
    /// thread received at least this much. Usually equal to `amount`.
    pub need: Nanos,
    /// Start of the first period.
    pub phase: Nanos,
    pub kind: RezKind,
    /// Hard: never more than the budget. Soft: may also use idle time.
    pub hard: bool,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Class {
    /// Fixed priority, larger is more important (NT style: 1..31).
    Fixed {
        priority: u8,
    },
    /// Earliest deadline first; the deadline comes with each release.
    Edf,
    /// Time-sharing: priority 0, round-robin.
    TimeShare,
    Reserved(Reservation),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LockProtocol {
    /// Plain mutex: a low-priority holder can be preempted by a medium
    /// thread while a high one waits (the media player's inversion).
    None,
    /// The holder runs at the highest priority of its waiters.
    Inherit,
    /// Immediate ceiling: the holder runs at the lock's ceiling from the
    /// moment it takes the lock (the Rialto talk's fix).
    Ceiling(u8),
}

#[derive(Clone, Debug, PartialEq)]
pub struct SchedConfig {
    /// Round-robin slice among runnable threads of equal priority.
    pub quantum: Nanos,
    /// Largest total reserved utilization admission grants (Regehr's thesis: 0.85).
    pub admission_cap: f64,
    /// When false, reservations over the cap are accepted anyway (the
    /// caller should warn).
    pub admission: bool,
    /// Optional reservation for the whole time-sharing class (Regehr's thesis
    /// §11.7.1), soft: amount and period.
    pub timeshare_reservation: Option<(Nanos, Nanos)>,
}

impl Default for SchedConfig {
    fn default() -> Self {
        SchedConfig {
            quantum: Nanos::from_ms(20),
            admission_cap: 0.85,
            admission: true,
            timeshare_reservation: None,
        }
    }
}

/// A reservation refused by admission control.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("reservation of {asked_fraction:.4} of the CPU refused: only {available_fraction:.4} is left under the admission cap of {cap}")]
pub struct AdmissionError {
    pub asked_fraction: f64,
    pub available_fraction: f64,
    pub cap: f64,
}

/// The scheduler's answer: run `thread` (or idle) until `until` at the
/// latest, when the caller must call [`Scheduler::pick`] again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Decision {
    pub thread: Option<ThreadId>,
    pub until: Option<Nanos>,
}

/// One closed period of a reservation, as Regehr's test application
/// records it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PeriodStat {
    pub thread: ThreadId,
    pub index: u64,
    pub start: Nanos,
    pub need: Nanos,
    /// C_t: what the scheduler requested in this period.
    pub requested: Nanos,
    /// CPU time the thread really got (stolen time excluded).
    pub received: Nanos,
    /// Time stolen while the thread was the one scheduled.
    pub stolen: Nanos,
    pub hit: bool,
}

/// Stolen time as the scheduler is told about it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StolenInterval {
    pub start: Nanos,
    pub len: Nanos,
    /// Whether the kernel's stolen-time instrumentation saw it (Regehr's thesis
    /// instrumented DPCs but not hardware interrupts). Invisible stolen time
    /// still counts against `received` in the period statistics, because
    /// the test application measures received time itself.
    pub visible: bool,
}

#[derive(Clone, Debug)]
struct Server {
    period: Nanos,
    need: Nanos,
    kind: RezKind,
    hard: bool,
    /// Requested amount for the current period (C_t).
    requested: Nanos,
    budget: Nanos,
    /// End of the current period: the EDF deadline.
    deadline: Nanos,
    start: Nanos,
    index: u64,
    received: Nanos,
    /// Received as the scheduler sees it: only visible theft subtracted.
    known_received: Nanos,
    stolen: Nanos,
    /// Utilization admitted for it (for Rez-FB, the current request).
    admitted_fraction: f64,
}

/// A thread's class without its parameters: the scans in
/// [`Scheduler::pick`] test it for every thread at every pick, and the full
/// [`Class`] is a large enum whose discriminant is costly to decode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Band {
    Fixed,
    TimeShare,
    Edf,
    Reserved,
}

impl Band {
    /// Fixed-priority and time-sharing threads compete by priority.
    #[inline]
    fn by_priority(self) -> bool {
        matches!(self, Band::Fixed | Band::TimeShare)
    }
}

#[derive(Clone, Debug)]
struct Thread {
    band: Band,
    /// Priority before inheritance and ceilings (0 unless fixed).
    base: i32,
    runnable: bool,
    /// FIFO order among equals: set on release and at the end of a slice.
    ready_seq: u64,
    deadline: Nanos,
    server: Option<usize>,
    held: Vec<LockId>,
    waiting_on: Option<LockId>,
}

#[derive(Clone, Debug)]
struct Lock {
    protocol: LockProtocol,
    holder: Option<ThreadId>,
    waiters: Vec<ThreadId>,
}

/// An EDF thread's place in the band, the scan's order: absolute deadline
/// in the high 64 bits, release order (`ready_seq`) in the low ones, so
/// that one integer comparison ranks two threads. Every `ready_seq` comes
/// from a fresh [`Scheduler::next_seq`], so no two runnable threads share
/// a key and the scan's tie-break on the thread index never applied.
type EdfKey = u128;

#[inline]
fn edf_key(deadline: Nanos, ready_seq: u64) -> EdfKey {
    ((deadline.0 as u128) << 64) | ready_seq as u128
}

/// Runnable EDF threads above this many turn the band from a sorted
/// vector into a heap: a release usually carries the latest deadline, and
/// in the vector it moves every entry, which made a run with thousands of
/// runnable EDF threads quadratic (100,000 overloaded EDF tasks, most of
/// them runnable, ran under 0.1 M events/s).
const EDF_HEAP_ABOVE: usize = 64;

/// Below this many the heap turns back into the sorted vector, the
/// cheaper of the two for the few runnable threads of most sets; the gap
/// to [`EDF_HEAP_ABOVE`] keeps a count that hovers around one bound from
/// converting at every step.
const EDF_SORTED_BELOW: usize = 16;

/// The runnable EDF threads in [`EdfKey`] order, in one of two shapes.
/// While few, `sorted` holds them latest first, so that the earliest is
/// the last entry, a pick reads it and the thread that blocks, usually
/// the one that ran, is popped off the end. Measured on 20 EDF tasks
/// against an unordered array with the earliest cached (2.4% more
/// instructions: its search for the next earliest at every block), a
/// binary heap and an earliest-first deque. Once many, `heap` holds them
/// as a binary min-heap with each thread's index in `at`, so that a
/// release, a block and the removal of any thread cost O(log n); then
/// `sorted` is empty, and `heap` is empty otherwise.
#[derive(Clone, Debug)]
struct EdfBand {
    sorted: Vec<(EdfKey, ThreadId)>,
    /// How many entries `sorted` may hold before an insertion takes the
    /// out-of-line path: [`EDF_HEAP_ABOVE`] in the vector's shape, 0 in
    /// the heap's, so that one comparison tells a small band's insertion
    /// from both a conversion and a heap's insertion.
    sorted_room: usize,
    heap: Vec<(EdfKey, ThreadId)>,
    /// Index in `heap` of each thread in it, by thread id; stale for the
    /// others.
    at: Vec<u32>,
}

impl Default for EdfBand {
    fn default() -> Self {
        EdfBand {
            sorted: Vec::new(),
            sorted_room: EDF_HEAP_ABOVE,
            heap: Vec::new(),
            at: Vec::new(),
        }
    }
}

impl EdfBand {
    #[inline]
    fn earliest(&self) -> Option<ThreadId> {
        match self.sorted.last() {
            Some(e) => Some(e.1),
            None => self.heap.first().map(|e| e.1),
        }
    }

    /// Puts `t` with `key` in place. It must not be there already.
    #[inline]
    fn insert(&mut self, key: EdfKey, t: ThreadId) {
        if self.sorted.len() >= self.sorted_room {
            return self.insert_in_heap(key, t);
        }
        self.sorted.push((key, t));
        // Moved into place from the end, past the earlier deadlines,
        // rather than placed by binary search and `Vec::insert` (0.4% more
        // instructions on 20 EDF tasks: a memmove call for a few entries);
        // on the slice, so that its start and length stay in registers
        // (through the vector, both were reloaded at every step).
        let q = self.sorted.as_mut_slice();
        let mut i = q.len() - 1;
        while i > 0 {
            let prev = q[i - 1];
            if prev.0 >= key {
                break;
            }
            q[i] = prev;
            i -= 1;
        }
        q[i] = (key, t);
    }

    /// Takes `t` out. It must be there.
    #[inline]
    fn remove(&mut self, t: ThreadId) {
        if self.sorted.last().is_some_and(|e| e.1 == t) {
            self.sorted.pop();
        } else {
            self.remove_other(t);
        }
    }

    /// [`EdfBand::remove`] of a thread that is not the last entry of
    /// `sorted`: from within it, or from the heap.
    #[inline(never)]
    fn remove_other(&mut self, t: ThreadId) {
        if !self.heap.is_empty() {
            return self.heap_remove(t);
        }
        let q = &mut self.sorted;
        if let Some(at) = q.iter().rposition(|e| e.1 == t) {
            q.remove(at);
        } else {
            debug_assert!(false, "EDF thread {t} is runnable but not in the band");
        }
    }

    /// The entries earliest first, as the scan ranks them.
    #[cfg(test)]
    fn in_order(&self) -> Vec<(EdfKey, ThreadId)> {
        let mut v: Vec<_> = self.sorted.iter().chain(&self.heap).copied().collect();
        v.sort_unstable();
        v
    }

    /// A sorted vector, latest first, is already a valid min-heap once
    /// reversed.
    #[cold]
    fn make_heap(&mut self) {
        self.heap = std::mem::take(&mut self.sorted);
        self.heap.reverse();
        for i in 0..self.heap.len() {
            self.place(self.heap[i].1, i);
        }
        self.sorted_room = 0;
    }

    #[cold]
    fn make_sorted(&mut self) {
        self.sorted = std::mem::take(&mut self.heap);
        self.sorted.sort_unstable_by_key(|e| std::cmp::Reverse(e.0));
        self.sorted_room = EDF_HEAP_ABOVE;
    }

    #[inline]
    fn place(&mut self, t: ThreadId, i: usize) {
        if self.at.len() <= t {
            self.at.resize(t + 1, 0);
        }
        self.at[t] = i as u32;
    }

    /// [`EdfBand::insert`] once `sorted` has no room: into the heap, made
    /// first from `sorted` when this insertion is the one that fills it.
    #[inline(never)]
    fn insert_in_heap(&mut self, key: EdfKey, t: ThreadId) {
        if self.heap.is_empty() {
            self.make_heap();
        }
        self.heap.push((key, t));
        self.sift_up(self.heap.len() - 1);
    }

    #[inline(never)]
    fn heap_remove(&mut self, t: ThreadId) {
        let i = self.at.get(t).map_or(usize::MAX, |&i| i as usize);
        if self.heap.get(i).is_none_or(|e| e.1 != t) {
            debug_assert!(false, "EDF thread {t} is runnable but not in the band");
            return;
        }
        let last = self.heap.pop().expect("the heap holds t");
        if i < self.heap.len() {
            // The last entry fills the hole and moves whichever way its
            // key sends it.
            self.heap[i] = last;
            self.place(last.1, i);
            if i > 0 && self.heap[(i - 1) / 2].0 > last.0 {
                self.sift_up(i);
            } else {
                self.sift_down(i);
            }
        }
        if self.heap.len() < EDF_SORTED_BELOW {
            self.make_sorted();
        }
    }

    fn sift_up(&mut self, mut i: usize) {
        let e = self.heap[i];
        while i > 0 {
            let parent = (i - 1) / 2;
            let p = self.heap[parent];
            if p.0 <= e.0 {
                break;
            }
            self.heap[i] = p;
            self.place(p.1, i);
            i = parent;
        }
        self.heap[i] = e;
        self.place(e.1, i);
    }

    fn sift_down(&mut self, mut i: usize) {
        let e = self.heap[i];
        let n = self.heap.len();
        loop {
            let l = 2 * i + 1;
            if l >= n {
                break;
            }
            let c = if l + 1 < n && self.heap[l + 1].0 < self.heap[l].0 {
                l + 1
            } else {
                l
            };
            let ch = self.heap[c];
            if ch.0 >= e.0 {
                break;
            }
            self.heap[i] = ch;
            self.place(ch.1, i);
            i = c;
        }
        self.heap[i] = e;
        self.place(e.1, i);
    }
}

/// Which band the current thread was picked in, for charging.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Charge {
    None,
    Server(usize),
    Free,
}

#[derive(Clone, Debug)]
pub struct Scheduler {
    cfg: SchedConfig,
    threads: Vec<Thread>,
    locks: Vec<Lock>,
    servers: Vec<Server>,
    /// Index of the time-sharing class's server, when configured.
    ts_server: Option<usize>,
    current: Option<ThreadId>,
    charge: Charge,
    last: Nanos,
    slice_start: Nanos,
    seq: u64,
    stolen_visible: Nanos,
    stolen_all: Nanos,
    closed: Vec<PeriodStat>,
    reserved_fraction: f64,
    /// EDF threads added: without any, [`Scheduler::pick`] skips the EDF
    /// band (the simulator picks millions of times per second).
    edf_threads: usize,
    /// The runnable EDF threads, ordered by [`EdfKey`]: updated on
    /// release, block and lock hand-over, so that a pick reads the earliest
    /// instead of scanning every thread (the scan was a quarter of the
    /// simulator's instructions with 20 EDF threads).
    edf_ready: EdfBand,
    /// No two fixed-priority or time-sharing threads share a base priority.
    /// Without locks (nothing raises a priority then) no two candidates
    /// of [`Scheduler::best_fixed`] can tie, so neither slice rotation nor
    /// the ready order can matter, and it skips both.
    distinct_priorities: bool,
    /// Bit `p` is set while a fixed-priority or time-sharing thread of base
    /// priority `p` is runnable; with distinct priorities that thread is
    /// `prio_owner[p]`, and the highest set bit is
    /// [`Scheduler::highest_priority`]'s answer without a scan of every
    /// thread (and without the mispredicted branch on which one is ready).
    /// Without distinct priorities it marks the non-empty `levels`.
    runnable_prio: [u64; 4],
    /// The thread of each base priority in use (with distinct priorities).
    prio_owner: Vec<ThreadId>,
    /// Once two threads share a base priority: the runnable fixed-priority
    /// and time-sharing threads of each base priority, by `ready_seq`
    /// (ready order), so that without locks a pick reads the front of the
    /// highest non-empty level instead of scanning every thread (the scan
    /// and its equal-waiting test were O(n) per pick, most of the
    /// simulator's time on 50 rate-monotonic tasks). Empty and unused
    /// while `distinct_priorities` holds.
    levels: Vec<VecDeque<(u64, ThreadId)>>,
    /// Bit `p` is set once two fixed-priority or time-sharing threads
    /// have base priority `p`: only those priorities keep a level. A
    /// priority of one thread is, like every priority while they are
    /// distinct, its bit in `runnable_prio` and its `prio_owner`: a level
    /// of one thread answers as the owner would, and keeping it in a deque
    /// was most of a pick's cost on a rate-monotonic set with one pair of
    /// equal periods.
    shared_levels: [u64; 4],
    /// Fixed-priority and time-sharing threads added at each base
    /// priority: the room a level needs. A level is grown to it
    /// amortised, so adding n threads of one priority copies O(n) entries.
    prio_threads: Vec<u32>,
}

impl Scheduler {
    pub fn new(cfg: SchedConfig) -> Result<Self, AdmissionError> {
        let mut s = Scheduler {
            cfg,
            threads: Vec::new(),
            locks: Vec::new(),
            servers: Vec::new(),
            ts_server: None,
            current: None,
            charge: Charge::None,
            last: Nanos::ZERO,
            slice_start: Nanos::ZERO,
            seq: 0,
            stolen_visible: Nanos::ZERO,
            stolen_all: Nanos::ZERO,
            closed: Vec::new(),
            reserved_fraction: 0.0,
            edf_threads: 0,
            edf_ready: EdfBand::default(),
            distinct_priorities: true,
            runnable_prio: [0; 4],
            prio_owner: Vec::new(),
            levels: Vec::new(),
            shared_levels: [0; 4],
            prio_threads: Vec::new(),
        };
        if let Some((amount, period)) = s.cfg.timeshare_reservation {
            let f = amount.0 as f64 / period.0.max(1) as f64;
            s.admit(f)?;
            s.servers.push(Server {
                period,
                need: amount,
                kind: RezKind::Rez,
                hard: false,
                requested: amount,
                budget: amount,
                deadline: period,
                start: Nanos::ZERO,
                index: 0,
                received: Nanos::ZERO,
                known_received: Nanos::ZERO,
                stolen: Nanos::ZERO,
                admitted_fraction: f,
            });
            s.ts_server = Some(0);
        }
        Ok(s)
    }

    pub fn config(&self) -> &SchedConfig {
        &self.cfg
    }

    /// Total utilization admitted so far (reservations' requests).
    pub fn reserved_fraction(&self) -> f64 {
        self.reserved_fraction
    }

    fn admit(&mut self, f: f64) -> Result<(), AdmissionError> {
        let available = self.cfg.admission_cap - self.reserved_fraction;
        if self.cfg.admission && f > available + 1e-12 {
            return Err(AdmissionError {
                asked_fraction: f,
                available_fraction: available.max(0.0),
                cap: self.cfg.admission_cap,
            });
        }
        self.reserved_fraction += f;
        Ok(())
    }

    /// Adds a thread, not yet runnable. Reservations go through admission
    /// control (Rez-C's catch-up is outside it by design).
    pub fn add_thread(&mut self, class: Class) -> Result<ThreadId, AdmissionError> {
        let id = self.threads.len();
        let mut server = None;
        if let Class::Reserved(r) = &class {
            let period = r.period.max(Nanos(1));
            let requested = match &r.kind {
                RezKind::RezFb(fb) => fb.request(),
                _ => r.amount,
            };
            let f = requested.0 as f64 / period.0 as f64;
            self.admit(f)?;
            server = Some(self.servers.len());
            self.servers.push(Server {
                period,
                need: r.need,
                kind: r.kind.clone(),
                hard: r.hard,
                requested,
                budget: requested,
                deadline: r.phase + period,
                start: r.phase,
                index: 0,
                received: Nanos::ZERO,
                known_received: Nanos::ZERO,
                stolen: Nanos::ZERO,
                admitted_fraction: f,
            });
        }
        if class == Class::Edf {
            self.edf_threads += 1;
        }
        let (band, base) = match &class {
            Class::Fixed { priority } => (Band::Fixed, *priority as i32),
            Class::TimeShare => (Band::TimeShare, 0),
            Class::Edf => (Band::Edf, 0),
            Class::Reserved(_) => (Band::Reserved, 0),
        };
        let was_distinct = self.distinct_priorities;
        let mut newly_shared = false;
        if band.by_priority() {
            let p = base as usize;
            if self.prio_threads.len() <= p {
                self.prio_threads.resize(p + 1, 0);
            }
            self.prio_threads[p] += 1;
        }
        // A second thread of this base priority: the count, not a scan of
        // every thread (quadratic when 100,000 tasks are added).
        if band.by_priority() && self.prio_threads[base as usize] > 1 {
            self.distinct_priorities = false;
            let p = base as usize;
            newly_shared = !self.is_shared_level(p);
            self.shared_levels[p >> 6] |= 1u64 << (p & 63);
        }
        if band.by_priority() {
            let p = base as usize;
            if self.prio_owner.len() <= p {
                self.prio_owner.resize(p + 1, usize::MAX);
            }
            if self.prio_owner[p] == usize::MAX {
                self.prio_owner[p] = id;
            }
        }
        if was_distinct && !self.distinct_priorities {
            self.build_levels();
        } else if newly_shared {
            self.share_level(base as usize);
        }
        if self.levels.len() < self.prio_owner.len() && !self.distinct_priorities {
            self.levels.resize(self.prio_owner.len(), VecDeque::new());
        }
        if band.by_priority() && !self.distinct_priorities && self.is_shared_level(base as usize) {
            self.reserve_level(base as usize);
        }
        self.threads.push(Thread {
            band,
            base,
            runnable: false,
            ready_seq: 0,
            deadline: Nanos::MAX,
            server,
            held: Vec::new(),
            waiting_on: None,
        });
        Ok(id)
    }

    pub fn add_lock(&mut self, protocol: LockProtocol) -> LockId {
        self.locks.push(Lock {
            protocol,
            holder: None,
            waiters: Vec::new(),
        });
        self.locks.len() - 1
    }

    pub fn thread_count(&self) -> usize {
        self.threads.len()
    }

    fn next_seq(&mut self) -> u64 {
        self.seq += 1;
        self.seq
    }

    /// `t` becomes runnable at `now`; an EDF thread brings its absolute
    /// deadline. Releasing a runnable thread only updates its deadline.
    /// Inlined, like [`Scheduler::on_block`]: the simulator calls both
    /// once per job, and as calls they cost a few percent of its time.
    #[inline]
    pub fn on_release(&mut self, _now: Nanos, t: ThreadId, deadline: Option<Nanos>) {
        let Some(th) = self.threads.get(t) else {
            return;
        };
        // Out of line, so that this stays small enough to be inlined into
        // the simulator's loop for the other bands (with the EDF upkeep in
        // it, it and `pick` were not, and the priority-only bench lost 6%).
        if th.band == Band::Edf {
            return self.on_release_edf(t, deadline);
        }
        let was = th.runnable;
        let seq = if was { th.ready_seq } else { self.next_seq() };
        let th = &mut self.threads[t];
        if let Some(d) = deadline {
            th.deadline = d;
        }
        th.ready_seq = seq;
        if th.waiting_on.is_none() {
            self.set_runnable(t, true);
        }
    }

    /// [`Scheduler::on_release`] for an EDF thread: the same, and its place
    /// in the EDF band.
    #[inline(never)]
    fn on_release_edf(&mut self, t: ThreadId, deadline: Option<Nanos>) {
        let (was, old_seq) = (self.threads[t].runnable, self.threads[t].ready_seq);
        if was {
            self.edf_unlink(t);
        }
        let seq = if was { old_seq } else { self.next_seq() };
        let th = &mut self.threads[t];
        if let Some(d) = deadline {
            th.deadline = d;
        }
        if th.waiting_on.is_none() {
            th.runnable = true;
        }
        th.ready_seq = seq;
        if th.runnable {
            self.edf_link(t);
        }
    }

    /// A new ready order, for [`Scheduler::on_release_in_order`]: later
    /// than every thread's that became ready so far.
    pub fn take_ready_order(&mut self) -> u64 {
        self.next_seq()
    }

    /// [`Scheduler::on_release`] for a thread whose new job ranks among
    /// equal deadlines (EDF) or equal priorities (fixed priority) by
    /// `order` (from [`Scheduler::take_ready_order`]) rather than keeping
    /// the place the thread had while it stayed runnable: SimSo's tie
    /// rule, where a job queued behind its predecessor becomes ready when
    /// that one ends. A fixed-priority thread that was running is no
    /// longer the one that keeps the CPU against its equals: its new job
    /// is not the job that ran.
    pub fn on_release_in_order(
        &mut self,
        _now: Nanos,
        t: ThreadId,
        deadline: Option<Nanos>,
        order: u64,
    ) {
        let Some(th) = self.threads.get(t) else {
            return;
        };
        if th.band == Band::Fixed {
            if th.runnable {
                self.set_runnable(t, false);
            }
            let th = &mut self.threads[t];
            if let Some(d) = deadline {
                th.deadline = d;
            }
            th.ready_seq = order;
            if th.waiting_on.is_none() {
                self.set_runnable(t, true);
            }
            if self.current == Some(t) {
                self.current = None;
            }
            return;
        }
        if th.band != Band::Edf {
            return self.on_release(_now, t, deadline);
        }
        if th.runnable {
            self.edf_unlink(t);
        }
        let th = &mut self.threads[t];
        if let Some(d) = deadline {
            th.deadline = d;
        }
        if th.waiting_on.is_none() {
            th.runnable = true;
        }
        th.ready_seq = order;
        if th.runnable {
            self.edf_link(t);
        }
    }

    /// `t` finished its job or went to sleep. Inlined into the simulator
    /// like [`Scheduler::on_release`]: small, once the EDF upkeep is out of
    /// line (without the attribute, a call in it stops rustc from offering
    /// it to other crates).
    #[inline]
    pub fn on_block(&mut self, _now: Nanos, t: ThreadId) {
        if let Some(th) = self.threads.get(t) {
            if th.runnable && th.band == Band::Edf {
                self.edf_unlink_cold(t);
            }
            self.set_runnable(t, false);
        }
    }

    /// Sets whether `t` is runnable, keeping [`Scheduler::runnable_prio`]
    /// (and, with shared priorities, [`Scheduler::levels`]) in step. The
    /// thread's `ready_seq` must be set before it turns runnable.
    #[inline]
    fn set_runnable(&mut self, t: ThreadId, runnable: bool) {
        let th = &mut self.threads[t];
        let was = th.runnable;
        th.runnable = runnable;
        if th.band.by_priority() {
            let p = th.base as usize;
            if !self.distinct_priorities {
                if was != runnable {
                    self.level_set(t, runnable);
                }
                return;
            }
            let bit = 1u64 << (p & 63);
            if runnable {
                self.runnable_prio[p >> 6] |= bit;
            } else {
                self.runnable_prio[p >> 6] &= !bit;
            }
        }
    }

    /// Puts fixed-priority or time-sharing thread `t` into its level, in
    /// ready order, or takes it out. New ready orders are the largest, so
    /// an entry goes in at the back, and the thread that blocks is usually
    /// the one that ran, at the front.
    fn level_set(&mut self, t: ThreadId, runnable: bool) {
        let (p, seq) = (self.threads[t].base as usize, self.threads[t].ready_seq);
        let bit = 1u64 << (p & 63);
        if !self.is_shared_level(p) {
            // A priority of one thread: its bit alone.
            if runnable {
                self.runnable_prio[p >> 6] |= bit;
            } else {
                self.runnable_prio[p >> 6] &= !bit;
            }
            return;
        }
        let q = &mut self.levels[p];
        if runnable {
            // Nearly always the latest ready order, at the back: a push,
            // where `insert` at the end cost a general shift's bookkeeping
            // (a tenth of a rate-monotonic run with shared priorities).
            if q.back().is_none_or(|e| e.0 <= seq) {
                q.push_back((seq, t));
            } else {
                let mut i = q.len();
                while i > 0 && q[i - 1].0 > seq {
                    i -= 1;
                }
                q.insert(i, (seq, t));
            }
        } else if q.front().is_some_and(|e| e.1 == t) {
            q.pop_front();
        } else if let Some(at) = q.iter().position(|e| e.1 == t) {
            q.remove(at);
        } else {
            debug_assert!(false, "thread {t} is runnable but not in its level");
        }
        if q.is_empty() {
            self.runnable_prio[p >> 6] &= !bit;
        } else {
            self.runnable_prio[p >> 6] |= bit;
        }
    }

    /// Whether base priority `p` is shared ([`Scheduler::shared_levels`]).
    #[inline(always)]
    fn is_shared_level(&self, p: usize) -> bool {
        self.shared_levels[(p >> 6) & 3] >> (p & 63) & 1 == 1
    }

    /// Runnable threads of level `p` (at most one unless it is shared).
    #[inline(always)]
    fn level_len(&self, p: usize) -> usize {
        if self.is_shared_level(p) {
            self.levels[p].len()
        } else {
            (self.runnable_prio[(p >> 6) & 3] >> (p & 63) & 1) as usize
        }
    }

    /// Base priority `p` has just become shared while the levels are kept:
    /// its one earlier thread, if runnable, goes into its new level.
    #[cold]
    fn share_level(&mut self, p: usize) {
        if self.levels.len() <= p {
            self.levels.resize(p + 1, VecDeque::new());
        }
        self.reserve_level(p);
        let owner = self.prio_owner[p];
        if self.levels[p].is_empty() && self.threads[owner].runnable {
            let seq = self.threads[owner].ready_seq;
            self.levels[p].push_back((seq, owner));
        }
    }

    /// Room in level `p` for every thread of that base priority added so
    /// far: each level is allocated while the threads are added, rather
    /// than grown by the picks of a run (a first allocation per level,
    /// inside the simulator's timed run). `reserve` grows amortised
    /// (at least doubling), so n threads of one priority cost O(n) copies;
    /// asking for one slot past the capacity each time doubled it per
    /// thread instead, and 32 threads asked for 64 GiB.
    fn reserve_level(&mut self, p: usize) {
        let need = self.prio_threads.get(p).copied().unwrap_or(0) as usize;
        let q = &mut self.levels[p];
        if q.capacity() < need {
            q.reserve(need - q.len());
        }
    }

    /// Fills [`Scheduler::levels`] and the bitmap from the runnable threads,
    /// when a second thread of one base priority ends `distinct_priorities`.
    #[cold]
    fn build_levels(&mut self) {
        self.levels = vec![VecDeque::new(); self.prio_owner.len()];
        self.runnable_prio = [0; 4];
        for i in 0..self.threads.len() {
            let p = self.threads[i].base as usize;
            if self.threads[i].band.by_priority() && self.is_shared_level(p) {
                self.reserve_level(p);
            }
        }
        let mut ready: Vec<(u64, ThreadId)> = (0..self.threads.len())
            .filter(|&i| self.threads[i].runnable && self.threads[i].band.by_priority())
            .map(|i| (self.threads[i].ready_seq, i))
            .collect();
        ready.sort_unstable();
        for (_, t) in ready {
            self.level_set(t, true);
        }
    }

    #[inline]
    pub fn is_runnable(&self, t: ThreadId) -> bool {
        self.threads.get(t).is_some_and(|th| th.runnable)
    }

    /// Tries to take `l` for `t`. On `false` the thread is blocked until the
    /// holder releases it and hands it over (then `t` holds the lock).
    pub fn lock(&mut self, _now: Nanos, t: ThreadId, l: LockId) -> bool {
        if t >= self.threads.len() || l >= self.locks.len() {
            return false;
        }
        match self.locks[l].holder {
            None => {
                self.locks[l].holder = Some(t);
                self.threads[t].held.push(l);
                true
            }
            Some(h) if h == t => true,
            Some(_) => {
                if self.threads[t].runnable && self.threads[t].band == Band::Edf {
                    self.edf_unlink(t);
                }
                self.locks[l].waiters.push(t);
                self.threads[t].waiting_on = Some(l);
                self.set_runnable(t, false);
                false
            }
        }
    }

    /// Releases `l`; the most important waiter (FIFO among equals) takes it
    /// and becomes runnable. Returns that thread.
    pub fn unlock(&mut self, _now: Nanos, t: ThreadId, l: LockId) -> Option<ThreadId> {
        if l >= self.locks.len() || self.locks[l].holder != Some(t) {
            return None;
        }
        self.threads[t].held.retain(|x| *x != l);
        let waiters = std::mem::take(&mut self.locks[l].waiters);
        let mut best: Option<(usize, i32)> = None;
        for (i, w) in waiters.iter().enumerate() {
            let p = self.effective_priority(*w, 0);
            if best.is_none_or(|(_, bp)| p > bp) {
                best = Some((i, p));
            }
        }
        match best {
            None => {
                self.locks[l].holder = None;
                None
            }
            Some((i, _)) => {
                let mut rest = waiters;
                let w = rest.remove(i);
                self.locks[l].waiters = rest;
                self.locks[l].holder = Some(w);
                let seq = self.next_seq();
                let edf = self.threads[w].band == Band::Edf;
                if edf && self.threads[w].runnable {
                    self.edf_unlink(w);
                }
                let th = &mut self.threads[w];
                th.held.push(l);
                th.waiting_on = None;
                th.ready_seq = seq;
                self.set_runnable(w, true);
                if edf {
                    self.edf_link(w);
                }
                Some(w)
            }
        }
    }

    /// Reports time taken from this CPU by interrupts, DPCs, bus stalls or
    /// the hypervisor. Call it before the next [`Scheduler::pick`] (the
    /// interval must lie after the previous pick).
    pub fn on_stolen(&mut self, s: StolenInterval) {
        self.stolen_all += s.len;
        if s.visible {
            self.stolen_visible += s.len;
        }
    }

    #[inline]
    fn base_priority(&self, t: ThreadId) -> i32 {
        self.threads[t].base
    }

    /// [`Scheduler::effective_priority`] without the call for the common
    /// thread that holds no lock (then nothing can raise it).
    #[inline]
    fn priority(&self, t: ThreadId) -> i32 {
        if self.threads[t].held.is_empty() {
            self.base_priority(t)
        } else {
            self.effective_priority(t, 0)
        }
    }

    /// Priority with inheritance and ceilings applied (depth-bounded so a
    /// lock cycle in a scenario cannot hang the scheduler).
    fn effective_priority(&self, t: ThreadId, depth: u32) -> i32 {
        let mut p = self.base_priority(t);
        if depth > 8 {
            return p;
        }
        for &l in &self.threads[t].held {
            let lock = &self.locks[l];
            match lock.protocol {
                LockProtocol::None => {}
                LockProtocol::Ceiling(c) => p = p.max(c as i32),
                LockProtocol::Inherit => {
                    for &w in &lock.waiters {
                        p = p.max(self.effective_priority(w, depth + 1));
                    }
                }
            }
        }
        p
    }

    /// Charges the time since the last call to whoever ran, and closes any
    /// reservation periods that ended by `now`.
    fn advance(&mut self, now: Nanos) {
        let elapsed = now.saturating_sub(self.last);
        let all = self.stolen_all.min(elapsed);
        let visible = self.stolen_visible.min(all);
        self.stolen_all = Nanos::ZERO;
        self.stolen_visible = Nanos::ZERO;
        if now > self.last {
            self.last = now;
        }
        let received = elapsed - all;
        if let Charge::Server(s) = self.charge {
            let srv = &mut self.servers[s];
            let cost = match srv.kind {
                RezKind::RezC => elapsed - visible,
                _ => elapsed,
            };
            srv.budget = srv.budget.saturating_sub(cost);
        }
        if let Some(cur) = self.current {
            if let Some(s) = self.threads[cur].server {
                let srv = &mut self.servers[s];
                srv.received += received;
                srv.known_received += elapsed - visible;
                srv.stolen += all;
            }
        }
        self.roll_periods(now);
    }

    fn roll_periods(&mut self, now: Nanos) {
        if self.servers.is_empty() {
            return;
        }
        for s in 0..self.servers.len() {
            while self.servers[s].deadline <= now {
                let thread = self
                    .threads
                    .iter()
                    .position(|t| t.server == Some(s))
                    .unwrap_or(usize::MAX);
                let other: f64 = self
                    .servers
                    .iter()
                    .enumerate()
                    .filter(|(i, _)| *i != s)
                    .map(|(_, x)| x.admitted_fraction)
                    .sum();
                let srv = &mut self.servers[s];
                if Some(s) != self.ts_server {
                    self.closed.push(PeriodStat {
                        thread,
                        index: srv.index,
                        start: srv.start,
                        need: srv.need,
                        requested: srv.requested,
                        received: srv.received,
                        stolen: srv.stolen,
                        hit: srv.received >= srv.need,
                    });
                }
                // What the scheduler itself knows it delivered: for Rez-FB
                // that is time charged minus the stolen time its
                // instrumentation saw, i.e. received plus invisible theft.
                let next = match &mut srv.kind {
                    RezKind::RezFb(fb) => {
                        let cap = self.cfg.admission_cap - other;
                        let limit = if self.cfg.admission {
                            Nanos((cap.max(0.0) * srv.period.0 as f64) as u64)
                        } else {
                            Nanos::MAX
                        };
                        fb.update(srv.known_received, limit)
                    }
                    _ => srv.requested,
                };
                srv.admitted_fraction = next.0 as f64 / srv.period.0 as f64;
                srv.requested = next;
                srv.budget = next;
                srv.start = srv.deadline;
                srv.deadline += srv.period;
                srv.index += 1;
                srv.received = Nanos::ZERO;
                srv.known_received = Nanos::ZERO;
                srv.stolen = Nanos::ZERO;
            }
        }
        self.reserved_fraction = self.servers.iter().map(|s| s.admitted_fraction).sum();
    }

    /// Reservation periods closed since the last call, oldest first.
    pub fn take_periods(&mut self) -> Vec<PeriodStat> {
        std::mem::take(&mut self.closed)
    }

    /// True when there are closed periods waiting in [`Scheduler::take_periods`].
    pub fn has_closed_periods(&self) -> bool {
        !self.closed.is_empty()
    }

    /// Current request C_t of `t`'s reservation.
    pub fn requested(&self, t: ThreadId) -> Option<Nanos> {
        let s = self.threads.get(t)?.server?;
        Some(self.servers[s].requested)
    }

    /// Chooses who runs from `now`, after charging the time since the last
    /// call. Deterministic: ties go to the earliest-released thread.
    ///
    /// Inlined into the caller with the priority-only path: the simulator
    /// picks twice per job, and the calls cost as much as the decision.
    #[inline]
    pub fn pick(&mut self, now: Nanos) -> Decision {
        if self.servers.is_empty() && self.edf_threads == 0 {
            return self.pick_by_priority(now);
        }
        self.pick_other(now)
    }

    /// [`Scheduler::pick`] with EDF threads or reservations; out of line so
    /// that `pick` stays small enough to be inlined for the priority-only
    /// path.
    #[inline(never)]
    fn pick_other(&mut self, now: Nanos) -> Decision {
        if self.servers.is_empty() {
            return self.pick_without_servers(now);
        }
        self.pick_any(now)
    }

    /// [`Scheduler::pick_any`] when no reservation exists, as with EDF
    /// threads alone: band 1 and the soft band are empty and there is no
    /// budget to charge nor period to close, so the decision is the head of
    /// the EDF band, else the priority bands. Without this the bookkeeping
    /// of the empty bands cost as much as the decision.
    #[inline]
    fn pick_without_servers(&mut self, now: Nanos) -> Decision {
        // `advance` with no server to charge or roll.
        self.stolen_all = Nanos::ZERO;
        self.stolen_visible = Nanos::ZERO;
        if now > self.last {
            self.last = now;
        }
        let (thread, equal_waiting) = match self.best_edf() {
            Some(t) => (Some(t), false),
            None => self.best_fixed(now, false),
        };
        // Only `best_fixed` reports an equal waiting, for the thread it
        // picked by priority.
        self.decide_unreserved(now, thread, equal_waiting)
    }

    /// [`Scheduler::pick`] through every band. Out of line: inlined into
    /// [`Scheduler::pick_other`], its stack frame was set up for the EDF
    /// picks too (28 instructions each).
    #[inline(never)]
    fn pick_any(&mut self, now: Nanos) -> Decision {
        self.advance(now);
        let prev = self.current;

        // Band 1: servers with budget, earliest deadline.
        let mut best_srv: Option<(Nanos, u64, usize, ThreadId)> = None;
        // Without servers no thread can be in band 1: skip the scan (the
        // simulator picks millions of times per second).
        let band1 = if self.servers.is_empty() {
            &[][..]
        } else {
            &self.threads[..]
        };
        for (i, th) in band1.iter().enumerate() {
            if !th.runnable {
                continue;
            }
            if let Some(s) = th.server {
                let srv = &self.servers[s];
                if srv.budget > Nanos::ZERO && now >= srv.start {
                    let key = (srv.deadline, th.ready_seq);
                    if best_srv.is_none_or(|b| key < (b.0, b.1)) {
                        best_srv = Some((srv.deadline, th.ready_seq, s, i));
                    }
                }
            }
        }
        if let Some(ts) = self.ts_server {
            let (budget, deadline) = (self.servers[ts].budget, self.servers[ts].deadline);
            if budget > Nanos::ZERO && best_srv.is_none_or(|b| deadline < b.0) {
                if let (Some(t), _) = self.best_fixed(now, true) {
                    best_srv = Some((deadline, 0, ts, t));
                }
            }
        }

        // Whether a thread of the same priority as the one picked by
        // priority is runnable too (then it gets a slice end).
        let mut equal_waiting = false;
        let (thread, charge) = if let Some((_, _, s, t)) = best_srv {
            (Some(t), Charge::Server(s))
        } else if let Some(t) = self.best_edf() {
            (Some(t), Charge::Free)
        } else if let (Some(t), eq) = self.best_fixed(now, false) {
            equal_waiting = eq;
            (Some(t), Charge::Free)
        } else if let Some(t) = self.best_soft() {
            (Some(t), Charge::Free)
        } else {
            (None, Charge::None)
        };

        if thread != prev {
            self.slice_start = now;
        }
        self.current = thread;
        self.charge = charge;

        // Next decision point: budget exhaustion, any period boundary, end
        // of the slice when an equal is waiting.
        let mut until: Option<Nanos> = None;
        let mut at = |x: Nanos| {
            until = Some(until.map_or(x, |u: Nanos| u.min(x)));
        };
        if let Charge::Server(s) = charge {
            at(now + self.servers[s].budget);
        }
        for srv in &self.servers {
            at(if now < srv.start {
                srv.start
            } else {
                srv.deadline
            });
        }
        if let (Some(t), Charge::Free) = (thread, charge) {
            if self.threads[t].band.by_priority() && equal_waiting {
                at(self.slice_start + self.cfg.quantum.max(Nanos(1)));
            }
        }
        Decision { thread, until }
    }

    /// [`Scheduler::pick`] when only fixed-priority and time-sharing
    /// threads exist (no reservation, no EDF thread): the same decision
    /// without the other bands' bookkeeping, which is most of the cost of a
    /// pick between two or three threads.
    #[inline]
    fn pick_by_priority(&mut self, now: Nanos) -> Decision {
        // `advance` with no server to charge or roll.
        self.stolen_all = Nanos::ZERO;
        self.stolen_visible = Nanos::ZERO;
        if now > self.last {
            self.last = now;
        }
        // Also checked inside `best_fixed`; kept here as it was benchmarked
        // (the plain maximum without a call); not measured without it.
        let (thread, equal_waiting) = if self.distinct_priorities && self.locks.is_empty() {
            (self.highest_priority(), false)
        } else {
            self.best_fixed(now, false)
        };
        self.decide_unreserved(now, thread, equal_waiting)
    }

    /// The end of a pick with no reservation to charge: the time slice
    /// restarts on a change of thread, and a thread picked over an equal
    /// one that waits runs for one quantum at most.
    #[inline(always)]
    fn decide_unreserved(
        &mut self,
        now: Nanos,
        thread: Option<ThreadId>,
        equal_waiting: bool,
    ) -> Decision {
        if thread != self.current {
            self.slice_start = now;
        }
        self.current = thread;
        self.charge = if thread.is_some() {
            Charge::Free
        } else {
            Charge::None
        };
        let until = if thread.is_some() && equal_waiting {
            Some(self.slice_start + self.cfg.quantum.max(Nanos(1)))
        } else {
            None
        };
        Decision { thread, until }
    }

    /// Earliest deadline among runnable EDF threads (ties to the earliest
    /// released): the head of [`Scheduler::edf_ready`].
    #[inline]
    fn best_edf(&self) -> Option<ThreadId> {
        let head = self.edf_ready.earliest();
        // The sched tests' picks are checked against the scan at the
        // moment of the decision (after any slice rotation in the pick).
        #[cfg(test)]
        assert_eq!(
            head,
            self.best_edf_scan(),
            "ordered EDF band disagrees with the scan"
        );
        head
    }

    /// Puts runnable EDF thread `t` in its place in the band. It must not
    /// be there already.
    #[inline]
    fn edf_link(&mut self, t: ThreadId) {
        let th = &self.threads[t];
        self.edf_ready.insert(edf_key(th.deadline, th.ready_seq), t);
    }

    /// [`Scheduler::edf_unlink`] out of line, for callers that serve the
    /// other bands too and must stay small.
    #[inline(never)]
    fn edf_unlink_cold(&mut self, t: ThreadId) {
        self.edf_unlink(t);
    }

    /// Takes EDF thread `t` out of the band before its runnable state,
    /// deadline or release order changes. It must be there.
    #[inline]
    fn edf_unlink(&mut self, t: ThreadId) {
        self.edf_ready.remove(t);
    }

    /// What [`Scheduler::best_edf`] answered before the ordered band: a scan
    /// of every thread, kept as the reference the tests compare it with.
    #[cfg(test)]
    fn best_edf_scan(&self) -> Option<ThreadId> {
        if self.edf_threads == 0 {
            return None;
        }
        let mut best: Option<(Nanos, u64, ThreadId)> = None;
        for (i, th) in self.threads.iter().enumerate() {
            if th.runnable && th.band == Band::Edf {
                let key = (th.deadline, th.ready_seq);
                if best.is_none_or(|b| key < (b.0, b.1)) {
                    best = Some((th.deadline, th.ready_seq, i));
                }
            }
        }
        best.map(|b| b.2)
    }

    /// Highest effective priority among fixed and time-sharing threads; the
    /// running thread keeps the CPU within its slice, then goes behind its
    /// equals. Also says whether another candidate has the winner's
    /// priority (what [`Scheduler::has_equal_waiting`] would answer for
    /// it, without a second scan).
    fn best_fixed(&mut self, now: Nanos, timeshare_only: bool) -> (Option<ThreadId>, bool) {
        if self.distinct_priorities && self.locks.is_empty() && !timeshare_only {
            return (self.highest_priority(), false);
        }
        let cur = self.current;
        let expired = now >= self.slice_start + self.cfg.quantum.max(Nanos(1));
        // Levels are kept while priorities are shared, and without locks
        // they rank exactly as the scan (base priority, then ready order).
        let by_level = !self.distinct_priorities && self.locks.is_empty();
        if let Some(c) = cur.filter(|_| expired) {
            self.end_slice(now, c, by_level);
        }
        if by_level && !timeshare_only {
            let r = self.best_by_level(cur, expired);
            #[cfg(test)]
            assert_eq!(
                r,
                self.best_fixed_scan(cur, expired, false),
                "priority levels disagree with the scan"
            );
            return r;
        }
        self.best_fixed_scan(cur, expired, timeshare_only)
    }

    /// The running thread `c`'s slice has expired: if an equal waits, it
    /// goes behind its equals (a new ready order) and a new slice starts.
    /// Out of line: with a quantum longer than the gaps between picks it
    /// seldom runs, and inlined, its upkeep of the bands made every pick
    /// save and restore the registers it needs.
    #[inline(never)]
    fn end_slice(&mut self, now: Nanos, c: ThreadId, by_level: bool) {
        let equal_waiting = self.threads[c].runnable
            && if by_level {
                self.level_equal_waiting(c)
            } else {
                self.has_equal_waiting(c)
            };
        if !equal_waiting {
            return;
        }
        let seq = self.next_seq();
        // A running EDF thread ties with runnable time-sharing threads at
        // priority 0 when the time-sharing reservation looks for its
        // thread: its new release order moves it in the EDF band too.
        let edf = self.threads[c].band == Band::Edf;
        let level = !self.distinct_priorities && self.threads[c].band.by_priority();
        if edf {
            self.edf_unlink(c);
        }
        if level {
            self.level_set(c, false);
        }
        self.threads[c].ready_seq = seq;
        if edf {
            self.edf_link(c);
        }
        if level {
            self.level_set(c, true);
        }
        self.slice_start = now;
    }

    /// [`Scheduler::best_fixed`]'s choice from the levels: the front of the
    /// highest non-empty one, or the running thread if it is there and its
    /// slice has not expired (the scan ranks it first among its equals).
    #[inline]
    fn best_by_level(&self, cur: Option<ThreadId>, expired: bool) -> (Option<ThreadId>, bool) {
        for w in (0..4).rev() {
            let m = self.runnable_prio[w];
            if m != 0 {
                let p = w * 64 + 63 - m.leading_zeros() as usize;
                if !self.is_shared_level(p) {
                    // Its one thread, whether it ran or not.
                    return (Some(self.prio_owner[p]), false);
                }
                let q = &self.levels[p];
                let keep = cur.filter(|&c| {
                    let th = &self.threads[c];
                    !expired && th.runnable && th.band.by_priority() && th.base as usize == p
                });
                let t = keep.or(q.front().map(|e| e.1));
                return (t, q.len() > 1);
            }
        }
        (None, false)
    }

    /// [`Scheduler::has_equal_waiting`] from the levels (no locks, so every
    /// priority is the base one).
    #[inline]
    fn level_equal_waiting(&self, t: ThreadId) -> bool {
        let th = &self.threads[t];
        let n = self.level_len(th.base as usize);
        if th.band.by_priority() && th.runnable {
            n > 1
        } else {
            n > 0
        }
    }

    /// The candidates' scan of [`Scheduler::best_fixed`], after any slice
    /// rotation: what it answers with locks (inherited and ceiling
    /// priorities) and for the time-sharing reservation. Out of line, like
    /// [`Scheduler::end_slice`]: the picks of shared priorities without
    /// locks read the levels instead.
    #[inline(never)]
    fn best_fixed_scan(
        &self,
        cur: Option<ThreadId>,
        expired: bool,
        timeshare_only: bool,
    ) -> (Option<ThreadId>, bool) {
        let mut best: Option<(i32, u64, ThreadId)> = None;
        // Candidates seen at the best priority so far.
        let mut at_best = 0u32;
        for (i, th) in self.threads.iter().enumerate() {
            if !th.runnable {
                continue;
            }
            let ok = match th.band {
                Band::TimeShare => true,
                Band::Fixed => !timeshare_only,
                _ => false,
            };
            if !ok {
                continue;
            }
            let p = if th.held.is_empty() {
                th.base
            } else {
                self.effective_priority(i, 0)
            };
            // The running thread is ahead of its equals within its slice.
            let seq = if Some(i) == cur && !expired {
                0
            } else {
                th.ready_seq
            };
            match best {
                Some(b) if p < b.0 => {}
                Some(b) if p == b.0 => {
                    at_best += 1;
                    if seq < b.1 {
                        best = Some((p, seq, i));
                    }
                }
                _ => {
                    at_best = 1;
                    best = Some((p, seq, i));
                }
            }
        }
        (best.map(|b| b.2), at_best > 1)
    }

    /// [`Scheduler::best_fixed`] when no two candidates can tie: the
    /// runnable thread of the highest base priority, from the bitmap.
    #[inline(always)]
    fn highest_priority(&self) -> Option<ThreadId> {
        for w in (0..4).rev() {
            let m = self.runnable_prio[w];
            if m != 0 {
                let p = w * 64 + 63 - m.leading_zeros() as usize;
                return Some(self.prio_owner[p]);
            }
        }
        None
    }

    fn best_soft(&self) -> Option<ThreadId> {
        if self.servers.is_empty() {
            return None;
        }
        let mut best: Option<(Nanos, u64, ThreadId)> = None;
        for (i, th) in self.threads.iter().enumerate() {
            if let (true, Some(s)) = (th.runnable, th.server) {
                let srv = &self.servers[s];
                if !srv.hard {
                    let key = (srv.deadline, th.ready_seq);
                    if best.is_none_or(|b| key < (b.0, b.1)) {
                        best = Some((srv.deadline, th.ready_seq, i));
                    }
                }
            }
        }
        best.map(|b| b.2)
    }

    fn has_equal_waiting(&self, t: ThreadId) -> bool {
        let p = self.priority(t);
        self.threads
            .iter()
            .enumerate()
            .any(|(i, th)| i != t && th.runnable && th.band.by_priority() && self.priority(i) == p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(x: u64) -> Nanos {
        Nanos::from_ms(x)
    }

    /// The randomized tests' generator (xorshift64): a draw below `n`.
    fn xorshift(mut x: u64) -> impl FnMut(u64) -> u64 {
        move |n| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % n
        }
    }

    #[test]
    fn fixed_priority_preempts_and_round_robins() {
        let mut s = Scheduler::new(SchedConfig {
            quantum: ms(10),
            ..Default::default()
        })
        .unwrap();
        let lo = s.add_thread(Class::Fixed { priority: 5 }).unwrap();
        let a = s.add_thread(Class::Fixed { priority: 9 }).unwrap();
        let b = s.add_thread(Class::Fixed { priority: 9 }).unwrap();
        s.on_release(ms(0), lo, None);
        assert_eq!(s.pick(ms(0)).thread, Some(lo));
        s.on_release(ms(1), a, None);
        s.on_release(ms(1), b, None);
        let d = s.pick(ms(1));
        assert_eq!(d.thread, Some(a));
        assert_eq!(d.until, Some(ms(11)));
        assert_eq!(s.pick(ms(11)).thread, Some(b));
        assert_eq!(s.pick(ms(21)).thread, Some(a));
        s.on_block(ms(22), a);
        s.on_block(ms(22), b);
        assert_eq!(s.pick(ms(22)).thread, Some(lo));
    }

    #[test]
    fn inheritance_and_ceiling_stop_the_inversion() {
        for proto in [
            LockProtocol::None,
            LockProtocol::Inherit,
            LockProtocol::Ceiling(24),
        ] {
            let mut s = Scheduler::new(SchedConfig::default()).unwrap();
            let l = s.add_lock(proto);
            let dec = s.add_thread(Class::Fixed { priority: 9 }).unwrap();
            let busy = s.add_thread(Class::Fixed { priority: 15 }).unwrap();
            let mix = s.add_thread(Class::Fixed { priority: 24 }).unwrap();
            s.on_release(ms(0), dec, None);
            assert_eq!(s.pick(ms(0)).thread, Some(dec));
            assert!(s.lock(ms(0), dec, l));
            s.on_release(ms(1), mix, None);
            if let LockProtocol::Ceiling(_) = proto {
                // At the ceiling the decoder is already at 24: the mixer,
                // an equal, waits for the end of the critical section
                // without ever blocking on the lock.
                assert_eq!(s.pick(ms(1)).thread, Some(dec));
                s.on_release(ms(1), busy, None);
                assert_eq!(s.pick(ms(1)).thread, Some(dec));
                assert_eq!(s.unlock(ms(2), dec, l), None);
                assert_eq!(s.pick(ms(2)).thread, Some(mix));
                continue;
            }
            assert_eq!(s.pick(ms(1)).thread, Some(mix));
            assert!(!s.lock(ms(1), mix, l));
            s.on_release(ms(1), busy, None);
            let who = s.pick(ms(1)).thread;
            match proto {
                LockProtocol::None => assert_eq!(who, Some(busy)),
                _ => assert_eq!(who, Some(dec), "{proto:?}"),
            }
            assert_eq!(s.unlock(ms(2), dec, l), Some(mix));
            assert_eq!(s.pick(ms(2)).thread, Some(mix));
        }
    }

    #[test]
    fn edf_orders_by_deadline() {
        let mut s = Scheduler::new(SchedConfig::default()).unwrap();
        let a = s.add_thread(Class::Edf).unwrap();
        let b = s.add_thread(Class::Edf).unwrap();
        s.on_release(ms(0), a, Some(ms(12)));
        s.on_release(ms(0), b, Some(ms(4)));
        assert_eq!(s.pick(ms(0)).thread, Some(b));
        s.on_block(ms(1), b);
        assert_eq!(s.pick(ms(1)).thread, Some(a));
    }

    fn rez(kind: RezKind, hard: bool) -> Class {
        Class::Reserved(Reservation {
            amount: ms(4),
            period: ms(20),
            need: ms(4),
            phase: Nanos::ZERO,
            kind,
            hard,
        })
    }

    /// Runs a reserved busy thread beside a busy time-sharing thread for
    /// `periods`, with 1 ms of visible theft in the first 4 ms of each period.
    fn run_with_theft(kind: RezKind) -> Vec<PeriodStat> {
        let mut s = Scheduler::new(SchedConfig::default()).unwrap();
        let r = s.add_thread(rez(kind, true)).unwrap();
        let ts = s.add_thread(Class::TimeShare).unwrap();
        s.on_release(Nanos::ZERO, r, None);
        s.on_release(Nanos::ZERO, ts, None);
        let mut now = Nanos::ZERO;
        let end = ms(200);
        while now < end {
            let d = s.pick(now);
            let until = d.until.unwrap_or(end).min(end);
            // Theft: whenever the reserved thread runs inside [p, p+1ms)
            // of a period, that part is stolen.
            if d.thread == Some(r) {
                let p0 = Nanos(now.0 / ms(20).0 * ms(20).0);
                let a = now.max(p0);
                let b = until.min(p0 + ms(1));
                if b > a {
                    s.on_stolen(StolenInterval {
                        start: a,
                        len: b - a,
                        visible: true,
                    });
                }
            }
            now = until;
        }
        s.pick(now);
        s.take_periods()
    }

    #[test]
    fn rez_misses_under_theft_rez_c_catches_up_rez_fb_converges() {
        let p = run_with_theft(RezKind::Rez);
        assert_eq!(p.len(), 10);
        assert!(p.iter().all(|x| !x.hit && x.received == ms(3)), "{p:?}");
        let p = run_with_theft(RezKind::RezC);
        assert!(p.iter().all(|x| x.hit && x.received == ms(4)), "{p:?}");
        let p = run_with_theft(RezKind::RezFb(FeedbackController::new(
            ms(4),
            0.5,
            Nanos::ZERO,
            ms(17),
        )));
        // The integral controller halves the shortfall every period (G =
        // 0.5): 1 ms, 0.5 ms, … so after 10 periods it is under 2 µs.
        assert!(!p[0].hit);
        let last = p.last().unwrap();
        assert!(ms(4) - last.received < Nanos::from_us(2), "{p:?}");
        assert!(last.requested > Nanos::from_us(4_990));
    }

    #[test]
    fn admission_refuses_over_the_cap() {
        let mut s = Scheduler::new(SchedConfig::default()).unwrap();
        for _ in 0..4 {
            s.add_thread(rez(RezKind::Rez, true)).unwrap();
        }
        let e = s.add_thread(rez(RezKind::Rez, true)).unwrap_err();
        assert!((e.available_fraction - 0.05).abs() < 1e-9, "{e}");
        let mut s = Scheduler::new(SchedConfig {
            timeshare_reservation: Some((ms(7), ms(50))),
            ..Default::default()
        })
        .unwrap();
        assert!((s.reserved_fraction() - 0.14).abs() < 1e-9);
        for _ in 0..3 {
            s.add_thread(rez(RezKind::Rez, true)).unwrap();
        }
        assert!(s.add_thread(rez(RezKind::Rez, true)).is_err());
    }

    #[test]
    fn timeshare_reservation_keeps_the_ui_alive() {
        let mut s = Scheduler::new(SchedConfig {
            timeshare_reservation: Some((ms(7), ms(50))),
            admission_cap: 1.0,
            ..Default::default()
        })
        .unwrap();
        let hog = s.add_thread(Class::Fixed { priority: 20 }).unwrap();
        let ui = s.add_thread(Class::TimeShare).unwrap();
        s.on_release(Nanos::ZERO, hog, None);
        s.on_release(Nanos::ZERO, ui, None);
        let d = s.pick(Nanos::ZERO);
        assert_eq!(d.thread, Some(ui));
        assert_eq!(d.until, Some(ms(7)));
        assert_eq!(s.pick(ms(7)).thread, Some(hog));
    }

    /// With distinct priorities and no locks, the plain maximum decides as
    /// the tie-aware scan and leaves the same state; a second thread at an
    /// equal priority turns it off.
    #[test]
    fn distinct_priorities_decide_as_the_tie_aware_scan() {
        let mut rnd = xorshift(0x2545_F491_4F6C_DD1Du64);
        let mut a = Scheduler::new(SchedConfig {
            quantum: ms(2),
            ..Default::default()
        })
        .unwrap();
        for p in [5u8, 24, 10, 1] {
            a.add_thread(Class::Fixed { priority: p }).unwrap();
        }
        a.add_thread(Class::TimeShare).unwrap();
        assert!(a.distinct_priorities);
        let mut b = a.clone();
        b.distinct_priorities = false;
        b.build_levels();
        let mut now = Nanos::ZERO;
        for step in 0..5000 {
            now += Nanos(rnd(3_000_000));
            let t = rnd(5) as usize;
            match rnd(3) {
                0 => {
                    a.on_release(now, t, None);
                    b.on_release(now, t, None);
                }
                1 => {
                    a.on_block(now, t);
                    b.on_block(now, t);
                }
                _ => {}
            }
            assert_eq!(a.pick(now), b.pick(now), "decisions differ at step {step}");
            let mut b_state = b.clone();
            b_state.levels.clear();
            assert_eq!(
                format!("{a:?}").replace("distinct_priorities: true", "-"),
                format!("{b_state:?}").replace("distinct_priorities: false", "-"),
                "states differ at step {step}"
            );
        }
        a.add_thread(Class::TimeShare).unwrap();
        assert!(!a.distinct_priorities, "two time-sharing threads tie");
    }

    /// Three threads of one priority without locks (the levels' path):
    /// the one ready first runs, each slice end sends the runner behind its
    /// equals, a higher priority preempts, and a block hands the CPU to the
    /// next in ready order.
    #[test]
    fn equal_priorities_run_in_ready_order_and_rotate_by_slice() {
        let mut s = Scheduler::new(SchedConfig {
            quantum: ms(10),
            ..Default::default()
        })
        .unwrap();
        let a = s.add_thread(Class::Fixed { priority: 9 }).unwrap();
        let b = s.add_thread(Class::Fixed { priority: 9 }).unwrap();
        let c = s.add_thread(Class::Fixed { priority: 9 }).unwrap();
        let hi = s.add_thread(Class::Fixed { priority: 12 }).unwrap();
        assert!(!s.distinct_priorities);
        // Ready order c, a, b: not the order they were added.
        s.on_release(ms(0), c, None);
        s.on_release(ms(0), a, None);
        s.on_release(ms(0), b, None);
        let d = s.pick(ms(0));
        assert_eq!((d.thread, d.until), (Some(c), Some(ms(10))));
        assert_eq!(s.pick(ms(10)).thread, Some(a));
        assert_eq!(s.pick(ms(20)).thread, Some(b));
        assert_eq!(s.pick(ms(30)).thread, Some(c));
        s.on_release(ms(31), hi, None);
        let d = s.pick(ms(31));
        assert_eq!((d.thread, d.until), (Some(hi), None));
        s.on_block(ms(33), hi);
        // c's slice (from 30) is over by 41; at 33 it goes on.
        assert_eq!(s.pick(ms(33)).thread, Some(c));
        s.on_block(ms(35), c);
        let d = s.pick(ms(35));
        assert_eq!((d.thread, d.until), (Some(a), Some(ms(45))));
        s.on_block(ms(36), b);
        let d = s.pick(ms(36));
        assert_eq!((d.thread, d.until), (Some(a), None), "alone at its level");
        s.on_block(ms(37), a);
        assert_eq!(s.pick(ms(37)).thread, None);
        assert!(s.levels.iter().all(VecDeque::is_empty));
        assert_eq!(s.runnable_prio, [0; 4]);
    }

    /// 100,000 threads of one fixed priority, then as many time-sharing
    /// threads: each level's room grows amortised to its thread count
    /// (never past twice it), where one slot past the capacity per thread
    /// doubled it 32 times and aborted; and every thread still runs, in
    /// ready order, from its level.
    #[test]
    fn many_threads_of_one_priority_grow_their_level_amortised() {
        const N: usize = 100_000;
        for class in [Class::Fixed { priority: 5 }, Class::TimeShare] {
            let mut s = Scheduler::new(SchedConfig::default()).unwrap();
            let p = match class {
                Class::Fixed { priority } => priority as usize,
                _ => 0,
            };
            for i in 0..N {
                assert_eq!(s.add_thread(class.clone()).unwrap(), i);
                if i == 0 {
                    continue;
                }
                let cap = s.levels[p].capacity();
                assert!(
                    cap > i && cap <= 2 * (i + 1).max(4),
                    "{class:?}: room for {cap} at {} threads",
                    i + 1
                );
            }
            for t in (0..N).rev() {
                s.on_release(ms(0), t, None);
            }
            assert_eq!(s.levels[p].len(), N);
            for (k, t) in (0..N).rev().enumerate().take(20) {
                assert_eq!(s.pick(ms(k as u64)).thread, Some(t), "{class:?}");
                s.on_block(ms(k as u64), t);
            }
        }
    }

    /// Without locks, shared priorities decide from the levels; every pick
    /// is checked against the scan inside `best_fixed` (test builds), here
    /// through releases, blocks, slice ends, EDF threads and time-sharing
    /// threads, and the levels must hold exactly the runnable threads of
    /// each priority in ready order.
    #[test]
    fn priority_levels_decide_as_the_scan() {
        let mut rnd = xorshift(0xD1B5_4A32_D192_ED03u64);
        let mut s = Scheduler::new(SchedConfig {
            quantum: ms(2),
            ..Default::default()
        })
        .unwrap();
        for p in [5u8, 9, 5, 9, 9, 30] {
            s.add_thread(Class::Fixed { priority: p }).unwrap();
        }
        s.add_thread(Class::TimeShare).unwrap();
        s.add_thread(Class::TimeShare).unwrap();
        s.add_thread(Class::Edf).unwrap();
        let n = s.thread_count() as u64;
        let mut now = Nanos::ZERO;
        let mut rotations = 0;
        for step in 0..20_000 {
            now += Nanos(rnd(1_500_000));
            let t = rnd(n) as usize;
            match rnd(3) {
                0 => s.on_release(now, t, Some(now + ms(5))),
                1 => s.on_block(now, t),
                _ => {}
            }
            let before = s.seq;
            let d = s.pick(now);
            rotations += (s.seq != before) as u32;
            for (p, q) in s.levels.iter().enumerate() {
                let shared = s.is_shared_level(p);
                let mut want: Vec<(u64, ThreadId)> = (0..s.thread_count())
                    .filter(|&i| {
                        let th = &s.threads[i];
                        th.runnable && th.band.by_priority() && th.base as usize == p
                    })
                    .map(|i| (s.threads[i].ready_seq, i))
                    .collect();
                want.sort_unstable();
                let bit = s.runnable_prio[p >> 6] >> (p & 63) & 1;
                assert_eq!(bit == 1, !want.is_empty(), "bitmap, step {step}");
                if shared {
                    assert_eq!(q.iter().copied().collect::<Vec<_>>(), want, "step {step}");
                } else {
                    // A priority of one thread keeps no level.
                    assert!(q.is_empty() && want.len() <= 1, "step {step}");
                }
            }
            if let Some(t) = d.thread {
                assert!(s.threads[t].runnable, "step {step}");
            }
        }
        assert!(rotations > 100, "slices rotated {rotations} times");
    }

    /// The runnable-priority bitmap must name the same thread as a scan of
    /// every thread, across all four of its words (priorities 0 to 255).
    #[test]
    fn priority_bitmap_finds_the_highest_runnable_thread() {
        let mut rnd = xorshift(0x1234_5678_9ABC_DEF1u64);
        let mut s = Scheduler::new(SchedConfig::default()).unwrap();
        for p in [255u8, 64, 63, 1, 130, 191, 192] {
            s.add_thread(Class::Fixed { priority: p }).unwrap();
        }
        s.add_thread(Class::TimeShare).unwrap();
        s.add_thread(Class::Edf).unwrap();
        assert!(s.distinct_priorities);
        let n = s.thread_count() as u64;
        let mut seen = std::collections::BTreeSet::new();
        for step in 0..5000 {
            let t = rnd(n) as usize;
            if rnd(2) == 0 {
                s.on_release(Nanos(step), t, Some(Nanos(step + 10)));
            } else {
                s.on_block(Nanos(step), t);
            }
            let scan = (0..s.thread_count())
                .filter(|&i| s.threads[i].runnable && s.threads[i].band.by_priority())
                .max_by_key(|&i| s.threads[i].base);
            assert_eq!(s.highest_priority(), scan, "step {step}");
            seen.insert(scan);
        }
        assert!(
            seen.len() >= 6,
            "most threads were the highest at some step"
        );
    }

    /// The priority-only fast path of `pick` must leave the scheduler in
    /// the same state and decide exactly as the general path, through
    /// releases, blocks, stolen time, slice ends and locks of every
    /// protocol.
    #[test]
    fn priority_fast_path_decides_as_the_general_pick() {
        let mut rnd = xorshift(0x9E37_79B9_7F4A_7C15u64);
        for proto in [
            LockProtocol::None,
            LockProtocol::Inherit,
            LockProtocol::Ceiling(20),
        ] {
            let mut a = Scheduler::new(SchedConfig {
                quantum: ms(2),
                ..Default::default()
            })
            .unwrap();
            for p in [5u8, 5, 10, 10, 20] {
                a.add_thread(Class::Fixed { priority: p }).unwrap();
            }
            a.add_thread(Class::TimeShare).unwrap();
            let l = a.add_lock(proto);
            let mut b = a.clone();
            let mut now = Nanos::ZERO;
            let mut picked_some = 0;
            for step in 0..5000 {
                now += Nanos(rnd(1_500_000));
                let t = rnd(6) as usize;
                match rnd(5) {
                    0 => {
                        a.on_release(now, t, None);
                        b.on_release(now, t, None);
                    }
                    1 => {
                        a.on_block(now, t);
                        b.on_block(now, t);
                    }
                    2 => {
                        let st = StolenInterval {
                            start: now,
                            len: Nanos(rnd(1000)),
                            visible: rnd(2) == 0,
                        };
                        a.on_stolen(st);
                        b.on_stolen(st);
                    }
                    3 => {
                        if let Some(c) = a.current {
                            if a.locks[l].holder == Some(c) {
                                assert_eq!(a.unlock(now, c, l), b.unlock(now, c, l));
                            } else {
                                assert_eq!(a.lock(now, c, l), b.lock(now, c, l));
                            }
                        }
                    }
                    _ => {}
                }
                let (da, db) = (a.pick(now), b.pick_any(now));
                assert_eq!(da, db, "{proto:?}: decisions differ at step {step}");
                assert_eq!(
                    format!("{a:?}"),
                    format!("{b:?}"),
                    "{proto:?}: states differ at step {step}"
                );
                picked_some += da.thread.is_some() as u32;
            }
            assert!(picked_some > 1000, "{proto:?}: threads ran");
        }
    }

    /// The runnable EDF threads in the order the scan would rank them:
    /// what `edf_ready` must hold at every moment.
    fn edf_order_by_scan(s: &Scheduler) -> Vec<(EdfKey, ThreadId)> {
        let mut v: Vec<(Nanos, u64, ThreadId)> = (0..s.threads.len())
            .filter(|&i| s.threads[i].runnable && s.threads[i].band == Band::Edf)
            .map(|i| (s.threads[i].deadline, s.threads[i].ready_seq, i))
            .collect();
        v.sort();
        v.into_iter().map(|(d, q, i)| (edf_key(d, q), i)).collect()
    }

    /// The ordered EDF band picks as the scan over all threads did, and
    /// holds exactly the runnable EDF threads in order, through releases
    /// (with equal deadlines, and re-releases of runnable threads), blocks,
    /// lock hand-overs of every protocol, stolen time, and the time-sharing
    /// reservation's slice rotation of a running EDF thread; `best_edf`
    /// itself asserts in test builds that its answer is the scan's. A twin
    /// scheduler always takes the general path, so the path without
    /// servers must decide the same and leave the same state.
    #[test]
    fn ordered_edf_band_picks_as_the_scan() {
        let mut rnd = xorshift(0xD1B5_4A32_D192_ED03u64);
        // (lock protocol or no lock, time-sharing reservation, threads
        // other than EDF ones)
        for (proto, ts_rez, others) in [
            (Some(LockProtocol::None), None, true),
            (Some(LockProtocol::Inherit), Some((ms(3), ms(10))), true),
            (Some(LockProtocol::Ceiling(20)), None, true),
            (Some(LockProtocol::None), Some((ms(2), ms(5))), true),
            (Some(LockProtocol::Inherit), None, false),
            (None, None, false),
        ] {
            let mut a = Scheduler::new(SchedConfig {
                quantum: ms(1),
                timeshare_reservation: ts_rez,
                admission_cap: 1.0,
                ..Default::default()
            })
            .unwrap();
            let mut edf = Vec::new();
            for k in 0..9 {
                let c = match k % 3 {
                    0 if others => Class::Fixed { priority: 8 },
                    1 if others => Class::TimeShare,
                    _ => Class::Edf,
                };
                let id = a.add_thread(c.clone()).unwrap();
                if c == Class::Edf {
                    edf.push(id);
                }
                // More EDF threads than the others.
                edf.push(a.add_thread(Class::Edf).unwrap());
            }
            let n = a.thread_count() as u64;
            let l = proto.map_or(usize::MAX, |p| a.add_lock(p));
            let mut b = a.clone();
            let mut now = Nanos::ZERO;
            let (mut edf_picked, mut rotated) = (0u32, 0u32);
            for step in 0..20_000 {
                now += Nanos(rnd(700_000));
                let t = rnd(n) as usize;
                match rnd(6) {
                    0 | 1 => {
                        // Few distinct deadlines, so that they tie often.
                        let d = (a.threads[t].band == Band::Edf)
                            .then(|| now + Nanos(rnd(4) * 1_000_000));
                        a.on_release(now, t, d);
                        b.on_release(now, t, d);
                    }
                    2 => {
                        a.on_block(now, t);
                        b.on_block(now, t);
                    }
                    3 if l != usize::MAX => {
                        // The holder lets go even when not running, so
                        // that waiters do not pile up for good.
                        if let Some(h) = a.locks[l].holder.filter(|_| rnd(2) == 0) {
                            assert_eq!(a.unlock(now, h, l), b.unlock(now, h, l));
                        } else if let Some(c) = a.current {
                            assert_eq!(a.lock(now, c, l), b.lock(now, c, l));
                        }
                    }
                    4 => {
                        let st = StolenInterval {
                            start: now,
                            len: Nanos(rnd(1000)),
                            visible: rnd(2) == 0,
                        };
                        a.on_stolen(st);
                        b.on_stolen(st);
                    }
                    _ => {}
                }
                let order = |s: &Scheduler| s.edf_ready.in_order();
                assert_eq!(order(&a), edf_order_by_scan(&a), "before pick {step}");
                let seqs: Vec<u64> = edf.iter().map(|&e| a.threads[e].ready_seq).collect();
                let (da, db) = (a.pick(now), b.pick_any(now));
                assert_eq!(da, db, "{proto:?}: decisions differ at step {step}");
                assert_eq!(
                    format!("{a:?}"),
                    format!("{b:?}"),
                    "{proto:?}: states differ at step {step}"
                );
                assert_eq!(order(&a), edf_order_by_scan(&a), "after pick {step}");
                edf_picked += da.thread.is_some_and(|t| edf.contains(&t)) as u32;
                rotated += edf
                    .iter()
                    .zip(&seqs)
                    .any(|(&e, &q)| a.threads[e].ready_seq != q) as u32;
            }
            assert!(edf_picked > 2000, "{proto:?}: EDF threads ran {edf_picked}");
            if ts_rez.is_some() {
                assert!(rotated > 0, "{proto:?}: a running EDF thread was rotated");
            }
        }
    }

    /// Thousands of runnable EDF threads, the band's heap: filled by
    /// releases (few distinct deadlines, so that keys tie on the deadline
    /// and rank by release order) and re-releases of runnable threads
    /// (removals from inside the heap), then drained by blocks of the
    /// thread that runs and of others, several times, so that the band
    /// turns into a heap and back. Every pick is checked against the scan
    /// by `best_edf`, the band's whole order now and then and at every
    /// change of shape.
    #[test]
    fn edf_band_of_thousands_picks_as_the_scan() {
        let mut rnd = xorshift(0x9E37_79B9_7F4A_7C15u64);
        let mut s = Scheduler::new(SchedConfig {
            quantum: ms(1),
            admission_cap: 1.0,
            ..Default::default()
        })
        .unwrap();
        let n = 3000u64;
        for _ in 0..n {
            s.add_thread(Class::Edf).unwrap();
        }
        let mut now = Nanos::ZERO;
        let (mut heap_ends, mut sorted_ends, mut turns, mut most) = (0u32, 0u32, 0u32, 0usize);
        for phase in 0..8 {
            let filling = phase % 2 == 0;
            for step in 0..3000 {
                now += Nanos(rnd(50_000));
                let t = rnd(n) as usize;
                let r = rnd(10);
                let was_heap = !s.edf_ready.heap.is_empty();
                if filling && r < 9 || !filling && r < 1 {
                    let d = now + Nanos(rnd(8) * 1_000_000);
                    s.on_release(now, t, Some(d));
                } else if let Some(c) = s.current.filter(|_| r < 9) {
                    s.on_block(now, c);
                } else {
                    s.on_block(now, t);
                }
                s.pick(now);
                let is_heap = !s.edf_ready.heap.is_empty();
                let runnable = s.edf_ready.sorted.len() + s.edf_ready.heap.len();
                most = most.max(runnable);
                turns += (was_heap != is_heap) as u32;
                if was_heap != is_heap || step % 97 == 0 {
                    assert_eq!(
                        s.edf_ready.in_order(),
                        edf_order_by_scan(&s),
                        "phase {phase} step {step}"
                    );
                }
                if is_heap {
                    assert!(s.edf_ready.sorted.is_empty(), "one shape at a time");
                    assert!(runnable >= EDF_SORTED_BELOW);
                } else {
                    assert!(runnable <= EDF_HEAP_ABOVE);
                }
            }
            let shape = !s.edf_ready.heap.is_empty();
            heap_ends += shape as u32;
            sorted_ends += !shape as u32;
        }
        assert!(most > 1500, "runnable at most {most}");
        assert!(turns >= 8, "the band changed shape {turns} times");
        assert!(
            heap_ends >= 4 && sorted_ends >= 4,
            "{heap_ends} heap, {sorted_ends} sorted phase ends"
        );
    }
}
