//! Scheduling one task set on several CPUs (`sim.multiprocessor`).
//!
//! Partitioned scheduling places each task on one CPU before the run, with
//! the shared core's fit heuristics ([`punctual_sched::placement`], the
//! same order the plan uses to place live reservations), and then runs the
//! ordinary event engine: a partitioned machine is one machine of pinned
//! tasks, so noise, streams and every per-CPU policy still apply.
//!
//! Global scheduling has one ready queue for all CPUs, dispatched by the
//! shared core's [`punctual_sched::global::assign`]; the loop here only
//! moves time between releases and completions. It simulates periodic
//! EDF or fixed-priority tasks on CPUs without noise, and refuses what it
//! does not model rather than ignoring it.
//!
//! Counting follows SimSo, so the two compare figure for figure: when a
//! preempted job runs again on the CPU it left, that is a preemption, on
//! another CPU a migration (a job still waiting at the end counts
//! neither); a job that starts on another CPU than its task last ran on is
//! a task migration, counted apart.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};

use punctual_record::{Recorder, Timeline};
use punctual_sched::global::{assign, decide_at, GlobalJob};
use punctual_sched::placement::{self, Fit, CPU_PPB};
use punctual_units::Nanos;
use toml::Spanned;

use crate::build::common;
use crate::engine::sample;
pub use crate::outcome::MultiStats;
use crate::outcome::{
    keep_spike, CpuStolen, Outcome, RunOptions, Spike, TaskStats, TimelineLog, TraceSlice,
    TIMELINE_WINDOW_DEFAULT,
};
use crate::rng::Rng;
use crate::scenario::{Dist, Scenario, ScenarioError, TaskSpec, MAX_DURATION};

/// Releases queued behind a running job before further ones count as lost
/// (as in the event engine).
const MAX_BACKLOG: usize = 10_000;

/// What `sim.multiprocessor` asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    Global,
    Partitioned(Fit),
}

/// Reads `sim.multiprocessor` and `sim.placement`; `None` for the default
/// (tasks pinned by `cpu`), where `placement` alone is refused.
pub fn mode(scn: &Scenario) -> Result<Option<Mode>, ScenarioError> {
    let s = &scn.spec.sim;
    let fit = match &s.placement {
        None => None,
        Some(p) => Some(match p.get_ref().as_str() {
            "first-fit" => Fit::First,
            "worst-fit" => Fit::Worst,
            other => {
                return Err(scn.error_at(
                    p.span(),
                    format!("sim.placement = \"{other}\": expected \"first-fit\" or \"worst-fit\""),
                ))
            }
        }),
    };
    let m = match &s.multiprocessor {
        None => None,
        Some(m) => Some(match m.get_ref().as_str() {
            "global" => Mode::Global,
            "partitioned" => Mode::Partitioned(fit.unwrap_or(Fit::First)),
            other => {
                return Err(scn.error_at(
                    m.span(),
                    format!(
                        "sim.multiprocessor = \"{other}\": expected \"global\" or \"partitioned\""
                    ),
                ))
            }
        }),
    };
    if let (Some(p), false) = (&s.placement, matches!(m, Some(Mode::Partitioned(_)))) {
        return Err(scn.error_at(
            p.span(),
            "sim.placement needs sim.multiprocessor = \"partitioned\"",
        ));
    }
    Ok(m)
}

/// Builds a scenario's machine under `mode`, ready to run.
pub(crate) fn prepare<'a>(
    scn: &'a Scenario,
    mode: Mode,
    opts: &RunOptions,
) -> Result<crate::Prepared<'a>, ScenarioError> {
    check_common(scn, mode)?;
    let kind = match mode {
        Mode::Partitioned(fit) => {
            let (placed, stats) = partition(scn, fit)?;
            crate::PreparedKind::Events(
                Box::new(crate::engine::Sim::new(&placed, opts)?),
                Some(stats),
            )
        }
        Mode::Global => crate::PreparedKind::Global(Box::new(GlobalSim::new(scn, opts)?)),
    };
    Ok(crate::Prepared { kind })
}

fn span_of(s: &Option<Spanned<String>>) -> std::ops::Range<usize> {
    s.as_ref().map(|x| x.span()).unwrap_or(0..0)
}

/// Refusals both modes share: what cannot be placed or migrated.
fn check_common(scn: &Scenario, mode: Mode) -> Result<(), ScenarioError> {
    let f = &scn.spec;
    let key = span_of(&f.sim.multiprocessor);
    let name = match mode {
        Mode::Global => "global",
        Mode::Partitioned(_) => "partitioned",
    };
    if f.sim
        .scheduler
        .as_ref()
        .is_some_and(|s| s.get_ref() == "plan")
    {
        return Err(scn.error_at(
            key,
            format!("sim.multiprocessor = \"{name}\" runs on the event scheduler, not sim.scheduler = \"plan\""),
        ));
    }
    if let Some(c) = f.constraint.first() {
        return Err(scn.error_at(
            c.name.span(),
            "[[constraint]] needs [sim] scheduler = \"plan\"",
        ));
    }
    for t in &f.task {
        let n = t.name.get_ref();
        let at = |m: String| scn.error_at(t.name.span(), format!("task '{n}': {m}"));
        if t.cpu != 0 {
            return Err(at(format!(
                "cpu = {} pins it, but under sim.multiprocessor = \"{name}\" the scheduler places every task",
                t.cpu
            )));
        }
        if t.kind.get_ref() != "periodic" {
            return Err(scn.error_at(
                t.kind.span(),
                format!("task '{n}': kind = \"{}\" under sim.multiprocessor = \"{name}\": only periodic tasks are placed", t.kind.get_ref()),
            ));
        }
        if t.reserve.is_some() {
            return Err(at(format!(
                "a reservation belongs to one CPU's scheduler; sim.multiprocessor = \"{name}\" schedules EDF and fixed-priority tasks"
            )));
        }
        if let Some(c) = &t.critical {
            return Err(scn.error_at(
                c.lock.span(),
                format!("task '{n}': locks are per CPU here; sim.multiprocessor = \"{name}\" takes tasks without critical sections"),
            ));
        }
        let class = t.class.as_ref().map(|c| c.get_ref().as_str());
        let edf = class == Some("edf");
        let fixed = class == Some("fixed") || (class.is_none() && t.priority.is_some());
        if !edf && !fixed {
            return Err(at(format!(
                "sim.multiprocessor = \"{name}\" needs class = \"edf\" or a fixed priority"
            )));
        }
    }
    if mode == Mode::Global {
        let refuse = |what: &str, span: std::ops::Range<usize>| {
            Err(scn.error_at(
                span,
                format!("{what} is not simulated under sim.multiprocessor = \"global\" (its CPUs have no noise, clock tick or per-CPU work)"),
            ))
        };
        if let Some(n) = f.noise.first() {
            return refuse("[[noise]]", n.name.span());
        }
        if let Some(s) = f.stream.first() {
            return refuse("[[stream]]", s.name.span());
        }
        if let Some(t) = f.timer.first() {
            return refuse("[[timer]]", t.name.span());
        }
        if let Some(l) = f.lock.first() {
            return refuse("[[lock]]", l.name.span());
        }
        if f.clock.period.is_some() || f.clock.hz.is_some() || f.clock.cost.is_some() {
            return Err(scn.error_at_key(
                &["clock"],
                "a clock tick is not simulated under sim.multiprocessor = \"global\" (use kind = \"oneshot\")",
            ));
        }
        if f.sim.timeshare_reservation.is_some() {
            return Err(scn.error_at_key(
                &["sim", "timeshare_reservation"],
                "sim.timeshare_reservation is not simulated under sim.multiprocessor = \"global\"",
            ));
        }
        let is_edf = |t: &TaskSpec| t.class.as_ref().is_some_and(|c| c.get_ref() == "edf");
        if let Some(first) = f.task.first() {
            if let Some(t) = f.task.iter().find(|t| is_edf(t) != is_edf(first)) {
                return Err(scn.error_at(
                    t.name.span(),
                    format!(
                        "task '{}': global scheduling takes one class for all tasks, EDF or fixed priority, and task '{}' has the other",
                        t.name.get_ref(),
                        first.name.get_ref()
                    ),
                ));
            }
        }
        if let Some(t) = f.task.iter().find(|t| t.refill) {
            return Err(scn.error_at(
                t.name.span(),
                format!(
                    "task '{}': refill is not simulated under sim.multiprocessor = \"global\"",
                    t.name.get_ref()
                ),
            ));
        }
    }
    Ok(())
}

/// The period and largest execution time of a periodic task: its share of
/// a CPU for placement.
fn demand(t: &TaskSpec) -> u64 {
    let exec = t.exec.as_ref().map(Dist::max).unwrap_or(Nanos::from_us(10));
    let period = t.period.map(|p| p.0).unwrap_or(Nanos::ZERO);
    placement::demand_ppb(exec.0, period.0)
}

/// Places every task on a CPU, largest utilization first (ties: file
/// order), and returns the scenario with each task's `cpu` set.
fn partition(scn: &Scenario, fit: Fit) -> Result<(Scenario, MultiStats), ScenarioError> {
    let f = &scn.spec;
    for t in &f.task {
        if t.period.is_none_or(|p| p.0.is_zero()) {
            return Err(scn.error_at(
                t.name.span(),
                format!(
                    "task '{}': a periodic task needs a period greater than zero",
                    t.name.get_ref()
                ),
            ));
        }
    }
    let ncpu = f.sim.cpus;
    if ncpu == 0 || ncpu > 256 {
        return Err(scn.error_at_key(
            &["sim", "cpus"],
            format!("sim.cpus = {ncpu}: must be 1 to 256"),
        ));
    }
    let demands: Vec<u64> = f.task.iter().map(demand).collect();
    let mut by_size: Vec<usize> = (0..f.task.len()).collect();
    by_size.sort_by_key(|&i| Reverse(demands[i]));
    let sorted: Vec<u64> = by_size.iter().map(|&i| demands[i]).collect();
    let cpus = placement::place(&sorted, ncpu as usize, CPU_PPB, fit).map_err(|e| {
        let t = &f.task[by_size[e.item]];
        let loads: Vec<String> = e
            .loads_ppb
            .iter()
            .enumerate()
            .map(|(c, l)| format!("cpu {c} {:.6}", *l as f64 / CPU_PPB as f64))
            .collect();
        scn.error_at(
            t.name.span(),
            format!(
                "task '{}' (utilization {:.6}) fits on no CPU by {}: the tasks placed before it (largest first) leave {}",
                t.name.get_ref(),
                e.demand_ppb as f64 / CPU_PPB as f64,
                fit.name(),
                loads.join(", ")
            ),
        )
    })?;
    let mut placed = scn.clone();
    for (k, &i) in by_size.iter().enumerate() {
        placed.spec.task[i].cpu = cpus[k] as u32;
    }
    let n = f.task.len();
    Ok((
        placed,
        MultiStats {
            policy: "partitioned",
            placement: Some(fit.name()),
            migrations: vec![0; n],
            task_migrations: vec![0; n],
        },
    ))
}

/// A turn in SimSo's run queue at one instant (see
/// [`GlobalSim::decide_as_simso`]).
#[derive(Clone, Copy, Debug)]
enum Turn {
    /// A task's process releases a job (the job announces itself next).
    Release(usize),
    /// A job completed on a CPU; a queued job of its task, if any, was made.
    Done(usize, Option<usize>),
    /// A job's process announces it on its task's CPU.
    Announce(usize),
    /// A processor takes a step.
    Cpu(usize),
}

/// One CPU's part in the turns of an instant.
#[derive(Default)]
struct CpuTurns {
    /// Its queued completions (`None`) and activations (the task).
    items: VecDeque<Option<usize>>,
    /// The reschedulings it owes.
    owed: u32,
    awake: bool,
    woken_before: bool,
    saving: bool,
    /// Decisions made on it and applied at its next turn (after the
    /// rescheduling's zero overhead): (task, CPU).
    pending: Vec<(usize, usize)>,
    /// Whether it runs a job as SimSo sees it (decisions applied), and
    /// whether it has loaded it since its last wake.
    has_job: bool,
    loaded: bool,
    /// Whether it went back to its job at least once this instant.
    finished: bool,
}

/// The emulation's per-instant state, kept between instants so that an
/// instant allocates nothing once the buffers have grown; one record per
/// CPU, so that an instant resets and reaches a CPU's state in one place.
#[derive(Default)]
struct Scratch {
    /// What each CPU ran when the instant's decisions began.
    before: Vec<Option<usize>>,
    first: Vec<(u64, Turn)>,
    fifo: VecDeque<Turn>,
    cpu: Vec<CpuTurns>,
    lock_wait: VecDeque<usize>,
    /// CPUs in the order they last went back to their jobs.
    finished: Vec<usize>,
}

impl Scratch {
    fn reset(&mut self, slots: &[Option<GlobalJob>]) {
        self.before.clear();
        self.before.extend(slots.iter().map(|x| x.map(|j| j.id)));
        self.first.clear();
        self.fifo.clear();
        self.cpu.resize_with(slots.len(), CpuTurns::default);
        for (k, slot) in self.cpu.iter_mut().zip(slots) {
            k.items.clear();
            k.pending.clear();
            k.owed = 0;
            k.awake = false;
            k.woken_before = false;
            k.saving = false;
            k.loaded = false;
            k.finished = false;
            k.has_job = slot.is_some();
        }
        self.lock_wait.clear();
        self.finished.clear();
    }
}

/// What one event of an instant asks of the global scheduler.
#[derive(Clone, Copy, Debug)]
enum Ask {
    /// The job on `cpu` completed (`seq`: when it was put there), and a
    /// queued job of its task, if any, took its place.
    Done {
        cpu: usize,
        seq: u64,
        queued: Option<usize>,
    },
    /// A job of `task` was released (`seq`: when its release was made).
    Release { task: usize, seq: u64 },
}

/// The turns of one instant ([`GlobalSim::decide_as_simso`]): runs the
/// processes' turns in SimSo's order and makes the decisions they ask on
/// `slots`, updating each task's CPU as SimSo knows it (`tcpu`: the last
/// CPU a decision sent it to, even one it was taken off again before it
/// ran there). `busy`: whether each CPU ran a job just before the
/// instant. Returns whether a decision moved a job; `sc.finished` holds
/// the CPUs in the order they went back to their jobs.
fn emulate_turns(
    sc: &mut Scratch,
    asks: &[Ask],
    busy: &[bool],
    tcpu: &mut [usize],
    slots: &mut [Option<GlobalJob>],
    waiting: &mut Vec<GlobalJob>,
) -> bool {
    let Scratch {
        first,
        fifo,
        cpu,
        lock_wait,
        finished,
        ..
    } = sc;
    first.extend(asks.iter().map(|a| match *a {
        Ask::Done { cpu, seq, queued } => (seq, Turn::Done(cpu, queued)),
        Ask::Release { task, seq } => (seq, Turn::Release(task)),
    }));
    first.sort_by_key(|x| x.0);
    fifo.extend(first.drain(..).map(|x| x.1));
    let mut lock: Option<usize> = None;
    let mut moved = false;
    let mut guard = 0u32;
    // A CPU woken by something queued on it takes a turn at the back;
    // its first turn saves the job it was running, if any.
    let wake = |k: &mut CpuTurns, c: usize, fifo: &mut VecDeque<Turn>| {
        if !k.awake {
            k.awake = true;
            k.saving = (!k.woken_before && busy[c]) || k.has_job;
            k.woken_before = true;
            fifo.push_back(Turn::Cpu(c));
        }
    };
    while let Some(turn) = fifo.pop_front() {
        guard += 1;
        if guard > 1_000_000 {
            break;
        }
        match turn {
            Turn::Release(ti) => fifo.push_back(Turn::Announce(ti)),
            Turn::Done(c, queued) => {
                if let Some(ti) = queued {
                    fifo.push_back(Turn::Announce(ti));
                }
                cpu[c].items.push_back(None);
                wake(&mut cpu[c], c, fifo);
            }
            Turn::Announce(ti) => {
                let c = tcpu[ti];
                cpu[c].items.push_back(Some(ti));
                wake(&mut cpu[c], c, fifo);
            }
            Turn::Cpu(c) => {
                if !cpu[c].pending.is_empty() {
                    // Taken and given back, so its buffer is kept.
                    let mut moves = std::mem::take(&mut cpu[c].pending);
                    for &(ti, k) in &moves {
                        tcpu[ti] = k;
                        // The CPU is told to switch: it wakes (saving
                        // the job it ran, if any) and loads the new one.
                        let kc = &mut cpu[k];
                        wake(kc, k, fifo);
                        kc.has_job = true;
                        kc.loaded = false;
                    }
                    moves.clear();
                    cpu[c].pending = moves;
                    lock = None;
                }
                let mut requeue = true;
                let me = &mut cpu[c];
                if me.saving {
                    me.saving = false;
                } else if me.loaded && (!me.items.is_empty() || me.owed > 0) {
                    // Its job was back on it when more work came: a
                    // turn to save it again.
                    me.loaded = false;
                } else if let Some(what) = me.items.pop_front() {
                    let target = what.map_or(c, |ti| tcpu[ti]);
                    cpu[target].owed += 1;
                    if target != c {
                        wake(&mut cpu[target], target, fifo);
                    }
                } else if me.owed > 0 {
                    if lock.is_none_or(|l| l == c) {
                        lock = Some(c);
                        me.owed -= 1;
                        if let Some(k) = decide_at(slots, waiting, Some(c)) {
                            moved = true;
                            let id = slots[k].map_or(0, |j| j.id);
                            me.pending.push((id, k));
                        }
                    } else {
                        lock_wait.push_back(c);
                        requeue = false;
                    }
                } else if me.has_job && !me.loaded {
                    // Nothing left: a turn to load its job's context.
                    me.loaded = true;
                } else {
                    me.awake = false;
                    requeue = false;
                    me.loaded = false;
                    me.finished = true;
                    finished.retain(|&x| x != c);
                    finished.push(c);
                }
                if requeue {
                    fifo.push_back(Turn::Cpu(c));
                }
            }
        }
        if lock.is_none() {
            if let Some(w) = lock_wait.pop_front() {
                lock = Some(w);
                fifo.push_back(Turn::Cpu(w));
            }
        }
    }
    moved
}

struct GTask {
    period: Nanos,
    phase: Nanos,
    exec: Dist,
    deadline: Nanos,
    stop: Option<Nanos>,
    /// Fixed priority, larger first; `None` under EDF.
    priority: Option<u8>,
    rng: Rng,
    /// The job in progress: its release, absolute deadline and the work
    /// left (as of the last time it was switched out or started).
    active: bool,
    release: Nanos,
    abs_deadline: Nanos,
    remaining: Nanos,
    started: bool,
    /// The CPU it runs on, if it runs.
    on: Option<usize>,
    /// The CPU the task last ran on (SimSo's `task.cpu`, CPU 0 before it
    /// ever ran).
    last_cpu: Option<usize>,
    backlog: VecDeque<Nanos>,
    last_start: Option<Nanos>,
    stats: TaskStats,
    migrations: u64,
    task_migrations: u64,
}

/// A CPU of the global machine: the task it runs and since when.
#[derive(Clone, Copy)]
struct GCpu {
    task: Option<usize>,
    since: Nanos,
}

pub(crate) struct GlobalSim {
    now: Nanos,
    end: Nanos,
    seed: u64,
    tasks: Vec<GTask>,
    cpus: Vec<GCpu>,
    /// Next release of each task, earliest first, then in the order they
    /// were made (SimSo's event order).
    releases: BinaryHeap<Reverse<(Nanos, u64, usize)>>,
    /// Under `sim.on_miss = "abort"`: each job's deadline, when it is
    /// dropped if unfinished, earliest first, then in the order they were
    /// made (SimSo starts a job's deadline timer as it makes the job, so
    /// before the task's next release, which the same instant made just
    /// after); with the job's release. Empty otherwise.
    deadlines: BinaryHeap<Reverse<(Nanos, u64, usize, Nanos)>>,
    abort_on_miss: bool,
    /// Counts releases and dispatches as they are made: the order of
    /// events due at one instant.
    seq: u64,
    /// Per CPU, when its job was put on it ([`GlobalSim::seq`]).
    dispatched: Vec<u64>,
    /// What this instant's events ask of the scheduler, in the order the
    /// events were made.
    asks: Vec<Ask>,
    /// Per CPU, whether it ran a job just before this instant.
    busy: Vec<bool>,
    /// Per task, the CPU SimSo's last decision sent it to (its `task.cpu`,
    /// CPU 0 at first), where its next activation is announced.
    task_cpu: Vec<usize>,
    scratch: Scratch,
    /// Whether instants of one decision skip the emulation of turns
    /// ([`GlobalSim::one_decision`]); off only to test that they may.
    shortcut: bool,
    /// Instants that took it.
    shortcuts: u64,
    /// Buffers of `run` and `dispatch`, kept so an instant allocates
    /// nothing.
    done_buf: Vec<usize>,
    waiting_buf: Vec<GlobalJob>,
    slots_buf: Vec<Option<GlobalJob>>,
    events: u64,
    picks: u64,
    spike_threshold: Nanos,
    spikes: Vec<Spike>,
    spikes_dropped: u64,
    trace: Option<Vec<TraceSlice>>,
    trace_cap: usize,
    trace_dropped: u64,
    timeline: TimelineLog,
}

impl GlobalSim {
    fn new(scn: &Scenario, opts: &RunOptions) -> Result<GlobalSim, ScenarioError> {
        let f = &scn.spec;
        let c = common(scn, opts)?;
        let ncpu = f.sim.cpus;
        if ncpu == 0 || ncpu > 256 {
            return Err(scn.error_at_key(
                &["sim", "cpus"],
                format!("sim.cpus = {ncpu}: must be 1 to 256"),
            ));
        }
        let mut tasks = Vec::new();
        for (i, t) in f.task.iter().enumerate() {
            let name = t.name.get_ref().clone();
            let at = |m: &str| scn.error_at(t.name.span(), format!("task '{name}': {m}"));
            let Some(period) = t.period.map(|p| p.0).filter(|p| !p.is_zero()) else {
                return Err(at("a periodic task needs a period greater than zero"));
            };
            if t.priority.is_some_and(|p| !(1..=31).contains(&p)) {
                return Err(at("priority must be 1 to 31"));
            }
            if t.buffers.is_some_and(|b| b < 2) {
                return Err(at(
                    "buffers must be at least 2 (one being filled, one played)",
                ));
            }
            let deadline = match (t.deadline, t.buffers) {
                (Some(d), _) => d.0,
                (None, Some(n)) => Nanos(period.0.saturating_mul(n as u64 - 1).min(MAX_DURATION.0)),
                (None, None) => period,
            };
            let edf = t.class.as_ref().is_some_and(|c| c.get_ref() == "edf");
            tasks.push(GTask {
                period,
                phase: t.phase.0,
                exec: t.exec.clone().unwrap_or(Dist::Const(Nanos::from_us(10))),
                deadline,
                stop: t.stop.map(|d| d.0),
                priority: if edf { None } else { t.priority },
                // The stream the event engine gives the same task, so a
                // task's draws do not depend on how it is scheduled.
                rng: Rng::new(c.seed, 1_000 + i as u64),
                active: false,
                release: Nanos::ZERO,
                abs_deadline: Nanos::ZERO,
                remaining: Nanos::ZERO,
                started: false,
                on: None,
                last_cpu: None,
                backlog: VecDeque::new(),
                last_start: None,
                stats: TaskStats {
                    name: name.into(),
                    cpu: 0,
                    period: Some(period),
                    latency: Recorder::new(Nanos(1_000)),
                    interval: Recorder::new(Nanos(1_000)),
                    response: Recorder::new(Nanos(1_000)),
                    jobs: 0,
                    releases: 0,
                    deadline_misses: 0,
                    preemptions: 0,
                    backlog_lost: 0,
                    aborted: scn.abort_on_miss()?.then_some(0),
                    reserved: false,
                    rez_kind: None,
                    need: None,
                },
                migrations: 0,
                task_migrations: 0,
            });
        }
        Ok(GlobalSim {
            now: Nanos::ZERO,
            end: c.end,
            seed: c.seed,
            tasks,
            cpus: vec![
                GCpu {
                    task: None,
                    since: Nanos::ZERO
                };
                ncpu as usize
            ],
            seq: f.task.len() as u64,
            dispatched: vec![0; ncpu as usize],
            asks: Vec::new(),
            busy: vec![false; ncpu as usize],
            task_cpu: vec![0; f.task.len()],
            scratch: Scratch::default(),
            shortcut: true,
            shortcuts: 0,
            done_buf: Vec::new(),
            waiting_buf: Vec::new(),
            slots_buf: Vec::new(),
            releases: BinaryHeap::new(),
            deadlines: BinaryHeap::new(),
            abort_on_miss: scn.abort_on_miss()?,
            events: 0,
            picks: 0,
            spike_threshold: f
                .sim
                .spike_threshold
                .map(|d| d.0)
                .unwrap_or(Nanos::from_ms(1)),
            spikes: Vec::new(),
            spikes_dropped: 0,
            trace: opts.trace_cap.map(|_| Vec::new()),
            trace_cap: opts.trace_cap.unwrap_or(0),
            trace_dropped: 0,
            timeline: TimelineLog {
                window: opts.timeline_window.unwrap_or(TIMELINE_WINDOW_DEFAULT),
                ..Default::default()
            },
        })
    }

    /// When the job on CPU `c` finishes, if it runs on.
    fn done_at(&self, c: usize) -> Option<Nanos> {
        let cpu = &self.cpus[c];
        cpu.task.map(|ti| cpu.since + self.tasks[ti].remaining)
    }

    pub(crate) fn run(mut self, stop: Option<&AtomicBool>) -> Result<Outcome, ScenarioError> {
        let interrupted = self.run_events(stop);
        Ok(self.finish(interrupted))
    }

    /// The run's events up to the end; returns whether `stop` cut it short.
    fn run_events(&mut self, stop: Option<&AtomicBool>) -> bool {
        // Each task's first release: the first thing a run does, as
        // SimSo's `run_model()` activates its tasks' processes.
        for (i, t) in self.tasks.iter().enumerate() {
            if t.stop.is_none_or(|s| t.phase < s) {
                self.releases.push(Reverse((t.phase, i as u64, i)));
            }
        }
        let mut interrupted = false;
        loop {
            let next_rel = self.releases.peek().map(|r| r.0 .0);
            let next_done = (0..self.cpus.len()).filter_map(|c| self.done_at(c)).min();
            let next_dl = self.deadlines.peek().map(|d| d.0 .0);
            let Some(t) = [next_rel, next_done, next_dl].into_iter().flatten().min() else {
                break;
            };
            // The window is [0, end): what happens at the end itself is
            // after the run, as in the event engine.
            if t >= self.end {
                break;
            }
            self.events += 1;
            if self.events & 0xFFFF == 0 && stop.is_some_and(|s| s.load(Ordering::Relaxed)) {
                interrupted = true;
                break;
            }
            self.now = t;
            // Completions first, then releases, then one decision for the
            // instant: SimSo decides once per instant too.
            let mut done = std::mem::take(&mut self.done_buf);
            done.clear();
            done.extend((0..self.cpus.len()).filter(|&c| self.done_at(c) == Some(t)));
            done.sort_by_key(|&c| self.dispatched[c]);
            self.asks.clear();
            for c in 0..self.cpus.len() {
                self.busy[c] = self.cpus[c].task.is_some();
            }
            for &c in &done {
                let seq = self.dispatched[c];
                let queued = self.complete(c);
                self.asks.push(Ask::Done {
                    cpu: c,
                    seq,
                    queued,
                });
            }
            self.done_buf = done;
            // Then the deadlines due now, after the completions: a job that
            // ends exactly at its deadline is on time, as in the event
            // engine (and in SimSo, whose deadline timer finds it done).
            while let Some(&Reverse((dt, seq, ti, nominal))) = self.deadlines.peek() {
                if dt != t {
                    break;
                }
                self.deadlines.pop();
                if let Some(cpu) = self.abort(ti, nominal) {
                    let queued = self.tasks[ti].active.then_some(ti);
                    self.asks.push(Ask::Done { cpu, seq, queued });
                }
            }
            while let Some(&Reverse((rt, seq, ti))) = self.releases.peek() {
                if rt != t {
                    break;
                }
                self.releases.pop();
                if self.release(ti) {
                    self.asks.push(Ask::Release { task: ti, seq });
                }
            }
            self.dispatch();
        }
        interrupted
    }

    fn urgency(&self, ti: usize) -> u64 {
        let t = &self.tasks[ti];
        match t.priority {
            None => t.abs_deadline.0,
            Some(p) => u64::from(u8::MAX - p),
        }
    }

    /// A release of task `ti`; returns whether a job of it became ready
    /// (it was idle).
    fn release(&mut self, ti: usize) -> bool {
        let now = self.now;
        self.seq += 1;
        if self.abort_on_miss {
            let d = self.tasks[ti].deadline;
            self.deadlines.push(Reverse((now + d, self.seq, ti, now)));
            self.seq += 1;
        }
        let t = &mut self.tasks[ti];
        let next = now + t.period;
        if t.stop.is_none_or(|s| next < s) {
            self.releases.push(Reverse((next, self.seq, ti)));
        }
        t.stats.releases += 1;
        if t.active {
            if t.backlog.len() >= MAX_BACKLOG {
                t.stats.backlog_lost += 1;
                t.stats.latency.add_missed(1);
            } else {
                t.backlog.push_back(now);
            }
            return false;
        }
        self.start_job(ti, now);
        true
    }

    fn start_job(&mut self, ti: usize, release: Nanos) {
        let t = &mut self.tasks[ti];
        t.active = true;
        t.started = false;
        t.release = release;
        t.abs_deadline = release + t.deadline;
        t.remaining = sample(&t.exec, &mut t.rng);
    }

    /// The job on CPU `c` has done its work; returns its task when a
    /// queued job of it takes its place.
    fn complete(&mut self, c: usize) -> Option<usize> {
        let now = self.now;
        let ti = self.cpus[c].task.take().expect("a running job");
        let since = self.cpus[c].since;
        self.slice(c, ti, since);
        let t = &mut self.tasks[ti];
        t.on = None;
        t.active = false;
        t.remaining = Nanos::ZERO;
        t.stats.jobs += 1;
        t.stats.response.record(now - t.release);
        if now > t.abs_deadline {
            t.stats.deadline_misses += 1;
            t.stats.latency.add_missed(1);
        }
        let r = t.backlog.pop_front()?;
        self.start_job(ti, r);
        Some(ti)
    }

    /// The deadline of task `ti`'s job released at `nominal` has come.
    /// A job still running or ready is dropped, counted as a miss and as
    /// aborted, and its task's next queued job (if any) made ready; then
    /// returns the CPU SimSo tells of the end, the one its last decision
    /// sent the task to (where a running job runs), as it tells of a
    /// completion. A job queued behind its predecessor, never started, is
    /// dropped without telling any CPU; `None` then, as for a job already
    /// done.
    fn abort(&mut self, ti: usize, nominal: Nanos) -> Option<usize> {
        let t = &mut self.tasks[ti];
        if !(t.active && t.release == nominal) {
            if let Some(pos) = t.backlog.iter().position(|&r| r == nominal) {
                t.backlog.remove(pos);
                t.stats.dropped_at_deadline();
            }
            return None;
        }
        if let Some(c) = t.on {
            let since = self.cpus[c].since;
            self.slice(c, ti, since);
            self.cpus[c].task = None;
        }
        let t = &mut self.tasks[ti];
        t.on = None;
        t.active = false;
        t.remaining = Nanos::ZERO;
        t.stats.dropped_at_deadline();
        if let Some(r) = t.backlog.pop_front() {
            self.start_job(ti, r);
        }
        Some(self.task_cpu[ti])
    }

    /// Who runs from now on: the shared dispatch rule, then the switches it
    /// asked for.
    fn dispatch(&mut self) {
        self.picks += 1;
        let mut waiting = std::mem::take(&mut self.waiting_buf);
        waiting.clear();
        for (ti, t) in self.tasks.iter().enumerate() {
            if t.active && t.on.is_none() {
                waiting.push(self.job(ti));
            }
        }
        if waiting.is_empty() {
            // Only completions, and no job waits: nothing moves, and no
            // running job was interrupted.
            self.waiting_buf = waiting;
            return;
        }
        let mut slots = std::mem::take(&mut self.slots_buf);
        slots.clear();
        for c in 0..self.cpus.len() {
            let slot = self.cpus[c].task.map(|ti| self.job(ti));
            slots.push(slot);
        }
        let mut moved = self.decide_as_simso(&mut slots, &mut waiting);
        // Whatever the events did not ask for (nothing, when they are
        // complete) still keeps the CPUs busy: each CPU a decision changed
        // takes a place in the order of completions.
        let before = &mut self.scratch.before;
        before.resize(slots.len(), None);
        for (b, x) in before.iter_mut().zip(&slots) {
            *b = x.map(|j| j.id);
        }
        if assign(&mut slots, &mut waiting, &[]) {
            moved = true;
            for (c, x) in slots.iter().enumerate() {
                if x.map(|j| j.id) != before[c] {
                    self.seq += 1;
                    self.dispatched[c] = self.seq;
                }
            }
        }
        if moved {
            self.switch(&slots);
        }
        self.waiting_buf = waiting;
        self.slots_buf = slots;
    }

    /// Task `ti`'s job as the dispatch rule sees it.
    fn job(&self, ti: usize) -> GlobalJob {
        GlobalJob {
            urgency: self.urgency(ti),
            order: ti as u32,
            id: ti,
            preferred: self.tasks[ti].last_cpu.unwrap_or(0),
        }
    }

    /// Puts on each CPU what `slots` says, counting first dispatches,
    /// preemptions and migrations.
    fn switch(&mut self, slots: &[Option<GlobalJob>]) {
        let now = self.now;
        // Off first, so that a job moving between CPUs in one decision is
        // switched out before it is switched in.
        for (c, slot) in slots.iter().enumerate() {
            let new = slot.map(|j| j.id);
            if let Some(old) = self.cpus[c].task.filter(|&o| Some(o) != new) {
                let since = self.cpus[c].since;
                self.slice(c, old, since);
                let t = &mut self.tasks[old];
                t.remaining = t.remaining.saturating_sub(now - since);
                t.on = None;
                self.cpus[c].task = None;
            }
        }
        for (c, slot) in slots.iter().enumerate() {
            let Some(ti) = slot.map(|j| j.id) else {
                continue;
            };
            if self.cpus[c].task == Some(ti) {
                continue;
            }
            self.cpus[c] = GCpu {
                task: Some(ti),
                since: now,
            };
            let t = &mut self.tasks[ti];
            t.on = Some(c);
            if t.started {
                if t.last_cpu == Some(c) {
                    t.stats.preemptions += 1;
                } else {
                    t.migrations += 1;
                }
            } else {
                t.started = true;
                if t.last_cpu.is_some_and(|l| l != c) {
                    t.task_migrations += 1;
                }
                let lat = t.stats.started(&mut t.last_start, now, t.release);
                if lat > self.spike_threshold {
                    keep_spike(&mut self.spikes, &mut self.spikes_dropped, || {
                        (now, c as u32, ti as u32, lat)
                    });
                }
            }
            t.last_cpu = Some(c);
        }
    }

    /// The decisions of this instant, asked on the CPUs and in the order
    /// SimSo's processors ask them, so that jobs land on the same CPUs.
    ///
    /// SimSo runs processes in turns, first in, first out, at one instant.
    /// A task's release makes a job whose process, a turn later, queues an
    /// activation on the CPU the task last ran on; a completing job queues
    /// a termination on its CPU (after making its task's next queued job).
    /// A CPU with something queued takes turns: if it was running a job it
    /// first spends one saving it; then each turn it handles one queued
    /// activation or termination, which owes one rescheduling on the job's
    /// CPU; once nothing else is queued, it takes the scheduler's lock and
    /// does all the reschedulings it owes, each placing at most one job
    /// ([`punctual_sched::global::decide`]), preferring that CPU.
    fn decide_as_simso(
        &mut self,
        slots: &mut [Option<GlobalJob>],
        waiting: &mut Vec<GlobalJob>,
    ) -> bool {
        if self.shortcut {
            if let Some(moved) = self.one_decision(slots, waiting) {
                return moved;
            }
        }
        let sc = &mut self.scratch;
        sc.reset(slots);
        let moved = emulate_turns(
            sc,
            &self.asks,
            &self.busy,
            &mut self.task_cpu,
            slots,
            waiting,
        );
        // The CPUs that took turns put their jobs back as they finished,
        // so those jobs' completions come after this instant's other
        // events, in that order.
        for (c, slot) in slots.iter().enumerate() {
            if !sc.cpu[c].finished && slot.map(|j| j.id) != sc.before[c] {
                sc.finished.push(c);
            }
        }
        for &c in &sc.finished {
            if slots[c].is_some() {
                self.seq += 1;
                self.dispatched[c] = self.seq;
            }
        }
        moved
    }

    /// [`GlobalSim::decide_as_simso`] for an instant of one event that
    /// asks one decision: a release, or a completion (or an abort) that
    /// makes no queued job ready; `None` for any other instant.
    ///
    /// Its turns are then fixed: the asking CPU `c` (the released task's
    /// CPU, or the CPU of the completion) saves its job if it ran one,
    /// takes the event, owes one rescheduling, makes it, applies it on its
    /// next turn (waking the CPU `k` the job went to), loads its job if it
    /// has one and goes back to it; `k`, woken after `c`'s last turns
    /// began, goes back after it. So: one decision on `c`, then `c` and
    /// `k` (once, when they are one CPU) take their places in the order of
    /// completions. Saving and loading only add turns, and no other CPU
    /// is woken, so the full emulation comes to the same; the test
    /// `the_one_decision_shortcut_keeps_every_slice` runs both.
    fn one_decision(
        &mut self,
        slots: &mut [Option<GlobalJob>],
        waiting: &mut Vec<GlobalJob>,
    ) -> Option<bool> {
        let c = match self.asks[..] {
            [Ask::Release { task, .. }] => self.task_cpu[task],
            [Ask::Done {
                cpu, queued: None, ..
            }] => cpu,
            _ => return None,
        };
        self.shortcuts += 1;
        let k = decide_at(slots, waiting, Some(c));
        if let Some(k) = k {
            let j = slots[k].map_or(0, |j| j.id);
            self.task_cpu[j] = k;
        }
        for x in [Some(c), k.filter(|&k| k != c)].into_iter().flatten() {
            if slots[x].is_some() {
                self.seq += 1;
                self.dispatched[x] = self.seq;
            }
        }
        Some(k.is_some())
    }

    /// Task `ti` ran on CPU `c` from `since` to now.
    fn slice(&mut self, c: usize, ti: usize, since: Nanos) {
        let len = self.now.saturating_sub(since);
        if len.is_zero() || (self.trace.is_none() && since >= self.timeline.window) {
            return;
        }
        let name = &self.tasks[ti].stats.name;
        self.timeline.push(c, name, "run", name, since, len);
        if let Some(tr) = &mut self.trace {
            if tr.len() < self.trace_cap {
                tr.push(TraceSlice {
                    cpu: c as u32,
                    track: ti as u32 + 1,
                    name: name.to_string(),
                    start: since,
                    dur: len,
                });
            } else {
                self.trace_dropped += 1;
            }
        }
    }

    fn finish(mut self, interrupted: bool) -> Outcome {
        let end = if interrupted { self.now } else { self.end };
        self.now = end;
        for c in 0..self.cpus.len() {
            if let Some(ti) = self.cpus[c].task {
                let since = self.cpus[c].since;
                self.slice(c, ti, since);
            }
        }
        // A job pending after its deadline has missed it, as in the event
        // engine; a deadline exactly at the end is not yet past.
        for t in &mut self.tasks {
            let d = t.deadline;
            let late = |r: Nanos| r + d < end;
            let pending = u64::from(t.active && late(t.release))
                + t.backlog.iter().filter(|&&r| late(r)).count() as u64;
            t.stats.deadline_misses += pending;
            t.stats.latency.add_missed(pending);
            t.stats.latency.settle();
            t.stats.interval.settle();
            t.stats.response.settle();
        }
        let bin = Nanos((self.end.0 / 1000).max(Nanos::from_ms(1).0));
        let ncpu = self.cpus.len();
        let multiprocessor = Some(MultiStats {
            policy: "global",
            placement: None,
            migrations: self.tasks.iter().map(|t| t.migrations).collect(),
            task_migrations: self.tasks.iter().map(|t| t.task_migrations).collect(),
        });
        Outcome {
            seed: self.seed,
            duration: self.end,
            ended_at: end,
            interrupted,
            events: self.events,
            picks: self.picks,
            tasks: self.tasks.into_iter().map(|t| t.stats).collect(),
            sources: Vec::new(),
            cpus: (0..ncpu)
                .map(|_| CpuStolen {
                    total: Nanos::ZERO,
                    intervals: 0,
                    max: Nanos::ZERO,
                    timeline: Timeline::new(bin),
                    gaps: None,
                })
                .collect(),
            periods: Vec::new(),
            periods_dropped: 0,
            period_totals: Vec::new(),
            streams: Vec::new(),
            spikes: self.spikes,
            spikes_dropped: self.spikes_dropped,
            trace: self.trace.unwrap_or_default(),
            trace_dropped: self.trace_dropped,
            timeline: self.timeline,
            warnings: Vec::new(),
            clock: "oneshot".into(),
            constraints: Vec::new(),
            multiprocessor,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Seeded sets of 2 to 8 CPUs, a few tasks per CPU, utilization up
    /// to overload, with and without late jobs aborted: every slice of the
    /// run (CPU, task, start, length) and every count must be the same
    /// with the shortcut of one-decision instants as with the full
    /// emulation of SimSo's turns.
    #[test]
    fn the_one_decision_shortcut_keeps_every_slice() {
        let periods_ms = [5u64, 8, 10, 12, 15, 20, 25, 30, 40, 50];
        let mut rng = Rng::new(7, 1);
        let mut shortcut_taken = 0;
        for set in 0..40 {
            let cpus = 2 + rng.next_u64() % 7;
            let n = cpus + rng.next_u64() % (3 * cpus);
            let mut text = format!(
                "[sim]\nduration = \"300ms\"\ncpus = {cpus}\nmultiprocessor = \"global\"\n"
            );
            if set % 2 == 1 {
                text.push_str("on_miss = \"abort\"\n");
            }
            for i in 0..n {
                let p = periods_ms[(rng.next_u64() % periods_ms.len() as u64) as usize];
                // Up to 0.6 of a CPU each (some sets overloaded), in
                // whole milliseconds so that completions often coincide.
                let exec_us = 1000 * (1 + rng.next_u64() % (p * 6 / 10));
                text.push_str(&format!(
                    "[[task]]\nname = \"t{i}\"\nkind = \"periodic\"\nclass = \"edf\"\nperiod = \"{p}ms\"\nexec = \"{exec_us}us\"\n"
                ));
            }
            let scn = Scenario::parse("t.toml", &text, &[]).unwrap();
            let opts = RunOptions {
                trace_cap: Some(usize::MAX),
                ..Default::default()
            };
            let run = |shortcut: bool| {
                let mut g = GlobalSim::new(&scn, &opts).unwrap();
                g.shortcut = shortcut;
                let interrupted = g.run_events(None);
                let taken = g.shortcuts;
                let o = g.finish(interrupted);
                let slices: Vec<_> = o
                    .trace
                    .iter()
                    .map(|s| (s.cpu, s.track, s.start, s.dur))
                    .collect();
                let counts: Vec<_> = o
                    .tasks
                    .iter()
                    .map(|t| (t.jobs, t.deadline_misses, t.preemptions, t.aborted))
                    .collect();
                let m = o.multiprocessor.unwrap();
                ((slices, counts, m.migrations, m.task_migrations), taken)
            };
            let (full, (short, taken)) = (run(false).0, run(true));
            assert!(!full.0.is_empty());
            assert_eq!(full, short, "set {set}: {text}");
            shortcut_taken += taken;
        }
        // The shortcut was taken, and not only at a few instants.
        assert!(shortcut_taken > 1_000, "{shortcut_taken}");
    }
}
