//! Scenario → machine: every check a scenario must pass before it runs,
//! and the [`Sim`] it becomes.
//!
//! Semantic validation lives here, apart from the event loop in
//! [`crate::engine`]: each cross-reference (a timer's task, a stream's
//! drainer, a task's lock) is resolved once, and every error points at the
//! field it concerns through [`Scenario::error_at`]. The order of the
//! checks is the order a reader meets the sections of a scenario (sim,
//! clock, locks, tasks, timers, noise, streams), so the first error a file
//! has is the one reported. Plan mode ([`crate::planmode`]) shares the
//! run's seed and length from [`common`].

use std::collections::{BTreeMap, VecDeque};
use std::ops::Range;

use punctual_record::{Recorder, Timeline};
use punctual_sched::{
    Class, FeedbackController, LockId, LockProtocol, Reservation, RezKind, SchedConfig, Scheduler,
};
use punctual_units::Nanos;

use crate::engine::{
    Cpu, EvKind, Level, Noise, NoiseKind, Seg, Sim, Stream, Task, TaskKind, Timer,
};
use crate::outcome::{
    CpuStolen, PeriodTotals, RunOptions, SourceStats, StreamStats, TaskStats, TimelineLog,
    TIMELINE_WINDOW_DEFAULT,
};
use crate::queue::{key, EvQueue, NO_KEY};
use crate::rng::Rng;
use crate::scenario::{Dist, Scenario, ScenarioError, ScenarioFile, TaskSpec, MAX_DURATION};

/// The seed used when neither the scenario nor the command line gives one.
pub const DEFAULT_SEED: u64 = 0x5EED_0000_0001;

/// How long a run is when the scenario does not say.
pub const DEFAULT_DURATION: Nanos = Nanos::from_secs(10);

/// What both engines settle first: the run's seed and its length.
pub(crate) struct Common {
    pub seed: u64,
    pub end: Nanos,
}

/// The seed (command line, then scenario, then [`DEFAULT_SEED`]) and the
/// length of the run, refused when zero or beyond [`MAX_DURATION`].
pub(crate) fn common(scn: &Scenario, opts: &RunOptions) -> Result<Common, ScenarioError> {
    let f = &scn.spec;
    let seed = opts.seed.or(f.sim.seed).unwrap_or(DEFAULT_SEED);
    let end = opts
        .duration
        .or(f.sim.duration.map(|d| d.0))
        .unwrap_or(DEFAULT_DURATION);
    if end.is_zero() || end > MAX_DURATION {
        return Err(scn.error_at_key(
            &["sim", "duration"],
            "sim.duration must be greater than zero and at most 100 years",
        ));
    }
    if f.task.is_empty() && f.noise.is_empty() && f.stream.is_empty() && f.constraint.is_empty() {
        return Err(
            scn.error("nothing to simulate: the scenario has no [[task]], [[noise]] or [[stream]]")
        );
    }
    scn.unique_names("task", &f.task, |t| &t.name)?;
    scn.unique_names("stream", &f.stream, |t| &t.name)?;
    scn.unique_names("constraint", &f.constraint, |t| &t.name)?;
    Ok(Common { seed, end })
}

/// What every part of the build reads.
struct Ctx<'a> {
    scn: &'a Scenario,
    f: &'a ScenarioFile,
    ncpu: u32,
    seed: u64,
    cap: f64,
    spike_threshold: Nanos,
}

impl Ctx<'_> {
    fn check_cpu(&self, cpu: u32, span: Range<usize>, what: &str) -> Result<(), ScenarioError> {
        let ncpu = self.ncpu;
        if cpu >= ncpu {
            Err(self.scn.error_at(
                span,
                format!("{what}: cpu {cpu} does not exist (sim.cpus = {ncpu})"),
            ))
        } else {
            Ok(())
        }
    }
}

/// Locks are created on the CPU of their first user: each one's CPU and id
/// once known.
type LockPlaces = Vec<Option<(usize, LockId)>>;

impl Sim {
    /// Builds the machine from a scenario, checking every cross-reference.
    pub fn new(scn: &Scenario, opts: &RunOptions) -> Result<Sim, ScenarioError> {
        let f = &scn.spec;
        let Common { seed, end } = common(scn, opts)?;
        let (ncpu, cfg) = sched_config(scn)?;
        let mut sim = Sim::empty(scn, ncpu, &cfg, seed, end, opts)?;
        let cx = Ctx {
            scn,
            f,
            ncpu,
            seed,
            cap: cfg.admission_cap,
            spike_threshold: f
                .sim
                .spike_threshold
                .map(|d| d.0)
                .unwrap_or(Nanos::from_ms(1)),
        };
        sim.build_clock(&cx)?;
        let lock_names = check_locks(&cx)?;
        let task_names = scn.unique_names("task", &f.task, |t| &t.name)?;
        let mut lock_cpu: LockPlaces = vec![None; f.lock.len()];
        for (i, t) in f.task.iter().enumerate() {
            sim.build_task(&cx, i, t, &lock_names, &mut lock_cpu)?;
        }
        if scn.abort_on_miss()? {
            // Dropping a job inside its critical section would leave its
            // lock held by nobody: refused rather than guessed at.
            if let Some(t) = f.task.iter().find(|t| t.critical.is_some()) {
                return Err(scn.error_at_key(
                    &["sim", "on_miss"],
                    format!(
                        "sim.on_miss = \"abort\" cannot drop a job inside a critical section, and task '{}' has one",
                        t.name.get_ref()
                    ),
                ));
            }
            sim.abort_on_miss = true;
            for t in &mut sim.tasks {
                t.stats.aborted = Some(0);
                t.fuse_deadline =
                    t.kind == TaskKind::Periodic && t.period.is_some() && t.deadline == t.period;
            }
        }
        let (edf_ready, fixed_ready) = (scn.edf_ties_by_ready()?, scn.priority_ties_by_ready()?);
        if edf_ready || fixed_ready {
            for (t, spec) in sim.tasks.iter_mut().zip(&f.task) {
                let fixed = !t.edf && !t.stats.reserved && spec.priority.is_some();
                t.ties_by_ready = (edf_ready && t.edf) || (fixed_ready && fixed);
            }
        }
        sim.build_timers(&cx, &task_names)?;
        sim.check_timer_tasks(&cx)?;
        sim.build_noise(&cx)?;
        sim.build_streams(&cx, &task_names)?;
        sim.clock_src = sim.add_source(0, "irq", "clock");
        sim.plain = sim.is_plain();
        Ok(sim)
    }

    /// A machine of `ncpu` idle CPUs with nothing on them yet.
    fn empty(
        scn: &Scenario,
        ncpu: u32,
        cfg: &SchedConfig,
        seed: u64,
        end: Nanos,
        opts: &RunOptions,
    ) -> Result<Sim, ScenarioError> {
        let mut cpus = Vec::new();
        for _ in 0..ncpu {
            let sched = Scheduler::new(cfg.clone())
                .map_err(|e| scn.error(format!("sim.timeshare_reservation: {e}")))?;
            let bin = Nanos((end.0 / 1000).max(Nanos::from_ms(1).0));
            cpus.push(Cpu {
                sched,
                thread_task: Vec::new(),
                bh: VecDeque::new(),
                stall_until: Nanos::ZERO,
                stall_src: 0,
                running: None,
                seg_end: Nanos::MAX,
                since: Nanos::ZERO,
                until: None,
                need_pick: true,
                deferred: false,
                tick_pending: false,
                steal_start: None,
                steal_vis: Nanos::ZERO,
                steal_invis: Nanos::ZERO,
                stolen: CpuStolen {
                    total: Nanos::ZERO,
                    intervals: 0,
                    max: Nanos::ZERO,
                    timeline: Timeline::new(bin),
                    gaps: scn.spec.sim.gap_series.then(|| Recorder::new(Nanos(1_000))),
                },
                bin: (Nanos::ZERO, Nanos::ZERO, 0),
                slice_start: Nanos::ZERO,
            });
        }
        Ok(Sim {
            now: Nanos::ZERO,
            seq: 0,
            queue: EvQueue::new(),
            wake: vec![NO_KEY; ncpu as usize],
            wake_min: 0,
            stale: Vec::new(),
            stale_cap: 64,
            cur_key: 0,
            end_key: NO_KEY,
            cpus,
            tasks: Vec::new(),
            timers: Vec::new(),
            noises: Vec::new(),
            streams: Vec::new(),
            sources: Vec::new(),
            tick_ps: None,
            clock_cost: Nanos::ZERO,
            clock_src: 0,
            oneshot: true,
            end,
            seed,
            events: 0,
            picks: 0,
            any_deferred: false,
            periods: Vec::new(),
            periods_dropped: 0,
            period_totals: Vec::new(),
            spikes: Vec::new(),
            spikes_dropped: 0,
            trace: opts.trace_cap.map(|_| Vec::new()),
            trace_cap: opts.trace_cap.unwrap_or(0),
            trace_dropped: 0,
            timeline: TimelineLog {
                window: opts.timeline_window.unwrap_or(TIMELINE_WINDOW_DEFAULT),
                ..Default::default()
            },
            warnings: Vec::new(),
            clock_desc: String::new(),
            abort_on_miss: false,
            deadline_now: false,
            plain: false,
        })
    }

    fn build_clock(&mut self, cx: &Ctx) -> Result<(), ScenarioError> {
        let (scn, f) = (cx.scn, cx.f);
        let ck = f.clock.kind.as_ref().map(|k| k.get_ref().as_str());
        match ck {
            None | Some("tick") if f.clock.period.is_some() || f.clock.hz.is_some() => {
                let ps = match (f.clock.period, f.clock.hz) {
                    (Some(p), None) => p.0,
                    (None, Some(hz)) if hz > 0 && hz <= 1_000_000 => {
                        1_000_000_000_000u128 / hz as u128
                    }
                    _ => {
                        return Err(
                            scn.error("clock: give exactly one of period or hz (1 to 1000000)")
                        )
                    }
                };
                if ps < 1_000_000 {
                    return Err(scn.error("clock.period must be at least 1us"));
                }
                self.tick_ps = Some(ps);
                self.oneshot = false;
                self.clock_desc = format!("tick {} ps", ps);
            }
            None | Some("oneshot") => {
                if ck == Some("oneshot") && (f.clock.period.is_some() || f.clock.hz.is_some()) {
                    return Err(scn.error("clock: a oneshot clock has no period or hz"));
                }
                self.clock_desc = "oneshot".into();
            }
            Some(other) => {
                let sp = f.clock.kind.as_ref().map(|k| k.span()).unwrap_or(0..0);
                return Err(scn.error_at(sp, format!("clock.kind '{other}': use tick or oneshot")));
            }
        }
        self.clock_cost = f.clock.cost.map(|d| d.0).unwrap_or(Nanos::ZERO);
        Ok(())
    }

    /// One `[[task]]`: its kind, scheduling class, lock and statistics.
    fn build_task(
        &mut self,
        cx: &Ctx,
        i: usize,
        t: &TaskSpec,
        lock_names: &BTreeMap<String, usize>,
        lock_cpu: &mut LockPlaces,
    ) -> Result<(), ScenarioError> {
        let (scn, f, seed, cap, spike_threshold) =
            (cx.scn, cx.f, cx.seed, cx.cap, cx.spike_threshold);
        let name = t.name.get_ref().clone();
        let at = |m: String| scn.error_at(t.name.span(), format!("task '{name}': {m}"));
        cx.check_cpu(t.cpu, t.name.span(), &format!("task '{name}'"))?;
        let kind = match t.kind.get_ref().as_str() {
            "periodic" => TaskKind::Periodic,
            "timer" => TaskKind::Timer,
            "background" => TaskKind::Background,
            "drainer" => TaskKind::Drainer,
            "sleeper" => TaskKind::Sleeper,
            k => {
                return Err(scn.error_at(
                    t.kind.span(),
                    format!("task '{name}': kind '{k}' (use periodic, timer, background, drainer or sleeper)"),
                ))
            }
        };
        if kind == TaskKind::Periodic && t.period.is_none_or(|p| p.0.is_zero()) {
            return Err(at("a periodic task needs a period greater than zero".into()));
        }
        if kind == TaskKind::Sleeper && t.sleep.is_none() {
            return Err(at("a sleeper task needs sleep".into()));
        }
        if t.buffers.is_some_and(|b| b < 2) {
            return Err(at(
                "buffers must be at least 2 (one being filled, one played)".into(),
            ));
        }
        if t.refill && t.buffers.is_none() && t.deadline.is_none() {
            return Err(at(
                "refill needs buffers or a deadline (what counts as an underrun)".into(),
            ));
        }
        if t.buffers.is_some() && t.period.is_none() {
            return Err(at(
                "buffers needs a period (the length of one buffer)".into()
            ));
        }
        let class = task_class(scn, t, &at)?;
        let edf = class == Class::Edf;
        let reserved = matches!(class, Class::Reserved(_));
        let rez_kind = match &class {
            Class::Reserved(r) => Some(r.kind.name().to_string()),
            _ => None,
        };
        let need = match &class {
            Class::Reserved(r) => Some(r.need),
            _ => None,
        };
        let cpu = t.cpu as usize;
        let tid = self.cpus[cpu].sched.add_thread(class).map_err(|e| {
            at(format!(
                "{e} (set sim.admission = false to simulate it anyway)"
            ))
        })?;
        if !f.sim.admission && self.cpus[cpu].sched.reserved_fraction() > cap + 1e-12 && reserved {
            self.warnings.push(format!(
                "cpu {cpu}: reservations total {:.3} of the CPU, over the admission cap {cap} (admission is off)",
                self.cpus[cpu].sched.reserved_fraction()
            ));
        }
        self.cpus[cpu].thread_task.push(i);
        let critical = match &t.critical {
            None => None,
            Some(c) => {
                let lname = c.lock.get_ref();
                let Some(&li) = lock_names.get(lname) else {
                    return Err(scn.error_at(
                        c.lock.span(),
                        format!("task '{name}': no [[lock]] named '{lname}'"),
                    ));
                };
                let Some(hold) = c.hold.clone() else {
                    return Err(scn.error_at(
                        c.lock.span(),
                        format!("task '{name}': lock '{lname}' is never released (critical.hold is missing)"),
                    ));
                };
                let id = match lock_cpu[li] {
                    Some((lc, id)) if lc == cpu => id,
                    Some((lc, _)) => {
                        return Err(scn.error_at(
                            c.lock.span(),
                            format!("task '{name}': lock '{lname}' is used on cpu {lc} and cpu {cpu}; locks are per CPU here"),
                        ))
                    }
                    None => {
                        let ls = &f.lock[li];
                        let proto = match ls.protocol.get_ref().as_str() {
                            "inherit" => LockProtocol::Inherit,
                            "ceiling" => LockProtocol::Ceiling(ls.ceiling.unwrap_or(31)),
                            _ => LockProtocol::None,
                        };
                        let id = self.cpus[cpu].sched.add_lock(proto);
                        lock_cpu[li] = Some((cpu, id));
                        id
                    }
                };
                Some((id, c.at.0, hold))
            }
        };
        let exec = t.exec.clone().unwrap_or(Dist::Const(Nanos::from_us(10)));
        if kind == TaskKind::Background && (t.exec.is_some() || t.period.is_some()) {
            return Err(at(
                "a background task is always busy: no exec or period".into()
            ));
        }
        let deadline = match (t.deadline, t.buffers, t.period) {
            (Some(d), _, _) => Some(d.0),
            (None, Some(n), Some(p)) => Some(Nanos(
                p.0 .0.saturating_mul(n as u64 - 1).min(MAX_DURATION.0),
            )),
            (None, None, Some(p)) if kind == TaskKind::Periodic => Some(p.0),
            _ => None,
        };
        let period = t.period.map(|p| p.0);
        self.tasks.push(Task {
            kind,
            cpu,
            tid,
            period,
            phase: t.phase.0,
            sleep: t.sleep.clone(),
            exec,
            deadline,
            refill: t.refill,
            critical,
            stop: t.stop.map(|d| d.0),
            edf,
            drains: Vec::new(),
            rng: Rng::new(seed, 1_000 + i as u64),
            active: false,
            started: false,
            segs: [Seg::Compute(Nanos::ZERO); 5],
            cur: Seg::Compute(Nanos::ZERO),
            nseg: 0,
            seg: 0,
            job_release: Nanos::ZERO,
            job_deadline: None,
            backlog: VecDeque::new(),
            last_start: None,
            spike_threshold,
            fuse_deadline: false,
            fused: None,
            ties_by_ready: false,
            stats: TaskStats {
                name: name.into(),
                cpu: t.cpu,
                period,
                latency: Recorder::new(Nanos(1_000)),
                interval: Recorder::new(Nanos(1_000)),
                response: Recorder::new(Nanos(1_000)),
                jobs: 0,
                releases: 0,
                deadline_misses: 0,
                preemptions: 0,
                backlog_lost: 0,
                aborted: None,
                reserved,
                rez_kind,
                need,
            },
        });
        if reserved {
            let kind = self.tasks[i].stats.rez_kind.clone().unwrap_or_default();
            self.period_totals.push(PeriodTotals {
                task: self.tasks[i].stats.name.to_string(),
                kind,
                need: self.tasks[i].stats.need.unwrap_or_default(),
                ..Default::default()
            });
        }
        Ok(())
    }

    fn build_timers(
        &mut self,
        cx: &Ctx,
        task_names: &BTreeMap<String, usize>,
    ) -> Result<(), ScenarioError> {
        let (scn, f) = (cx.scn, cx.f);
        for tm in &f.timer {
            let name = tm.name.get_ref();
            cx.check_cpu(tm.cpu, tm.name.span(), &format!("timer '{name}'"))?;
            let Some(&task) = task_names.get(tm.task.get_ref()) else {
                return Err(scn.error_at(
                    tm.task.span(),
                    format!("timer '{name}': no [[task]] named '{}'", tm.task.get_ref()),
                ));
            };
            if self.tasks[task].kind != TaskKind::Timer {
                return Err(scn.error_at(
                    tm.task.span(),
                    format!(
                        "timer '{name}': task '{}' must have kind = \"timer\"",
                        tm.task.get_ref()
                    ),
                ));
            }
            if self.tasks[task].cpu != tm.cpu as usize {
                return Err(scn.error_at(
                    tm.task.span(),
                    format!(
                        "timer '{name}': task '{}' is on another cpu",
                        tm.task.get_ref()
                    ),
                ));
            }
            let rounding = match tm.mode.get_ref().as_str() {
                "rounding" => true,
                "fixed" => false,
                m => {
                    return Err(scn.error_at(
                        tm.mode.span(),
                        format!("timer '{name}': mode '{m}' (use rounding or fixed)"),
                    ))
                }
            };
            if tm.period.0 < Nanos::from_us(1) {
                return Err(scn.error_at(
                    tm.name.span(),
                    format!("timer '{name}': period must be at least 1us"),
                ));
            }
            if rounding && tm.period.0 .0 % 1_000_000 != 0 {
                return Err(scn.error_at(tm.name.span(), format!("timer '{name}': a rounding (multimedia) timer's period is whole milliseconds")));
            }
            let src = self.add_source(tm.cpu, "dpc", &format!("timer:{name}"));
            self.timers.push(Timer {
                cpu: tm.cpu as usize,
                period: tm.period.0,
                rounding,
                task,
                src,
                dpc_cost: tm.dpc_cost.clone().unwrap_or(Dist::Const(Nanos::ZERO)),
                rng: Rng::new(cx.seed, 300_000 + self.timers.len() as u64),
                next: tm.period.0,
                due: tm.period.0,
            });
        }
        Ok(())
    }

    /// A timer task no `[[timer]]` releases would never run: refused
    /// rather than simulated as idle.
    fn check_timer_tasks(&self, cx: &Ctx) -> Result<(), ScenarioError> {
        for (i, t) in self.tasks.iter().enumerate() {
            if t.kind == TaskKind::Timer && !self.timers.iter().any(|tm| tm.task == i) {
                let spec = &cx.f.task[i];
                return Err(cx.scn.error_at(
                    spec.name.span(),
                    format!(
                        "task '{}': kind = \"timer\" but no [[timer]] releases it",
                        spec.name.get_ref()
                    ),
                ));
            }
        }
        Ok(())
    }

    fn build_noise(&mut self, cx: &Ctx) -> Result<(), ScenarioError> {
        let (scn, f, seed) = (cx.scn, cx.f, cx.seed);
        for (i, n) in f.noise.iter().enumerate() {
            let name = n.name.get_ref().clone();
            let at = |m: String| scn.error_at(n.name.span(), format!("noise '{name}': {m}"));
            cx.check_cpu(n.cpu, n.name.span(), &format!("noise '{name}'"))?;
            let level = match n
                .level
                .as_ref()
                .map(|l| l.get_ref().as_str())
                .unwrap_or("dpc")
            {
                "dpc" => Level::Dpc,
                "irq" => Level::Irq,
                "stall" => Level::Stall,
                "steal" => Level::Steal,
                l => return Err(at(format!("level '{l}' (use dpc, irq, stall or steal)"))),
            };
            let mut duration = n.duration.clone();
            let kind = match n.kind.get_ref().as_str() {
                "periodic" => {
                    let p = n
                        .period
                        .ok_or_else(|| at("periodic noise needs a period".into()))?;
                    if p.0.is_zero() {
                        return Err(at("period must be greater than zero".into()));
                    }
                    NoiseKind::Periodic {
                        period: p.0,
                        jitter: n.jitter.0,
                    }
                }
                "poisson" => {
                    let r = n
                        .rate
                        .ok_or_else(|| at("poisson noise needs a rate (per second)".into()))?;
                    if !(r > 0.0 && r <= 1e7) {
                        return Err(at(format!("rate {r} must be in (0, 1e7] per second")));
                    }
                    NoiseKind::Poisson { mean_ns: 1e9 / r }
                }
                "bursty" => {
                    let r = n
                        .rate
                        .ok_or_else(|| at("bursty noise needs a rate (per second)".into()))?;
                    if !(r > 0.0 && r <= 1e7) {
                        return Err(at(format!("rate {r} must be in (0, 1e7] per second")));
                    }
                    let (Some(on), Some(off)) = (n.burst_on, n.burst_off) else {
                        return Err(at("bursty noise needs burst_on and burst_off".into()));
                    };
                    if on.0.is_zero() {
                        return Err(at("burst_on must be greater than zero".into()));
                    }
                    NoiseKind::Bursty {
                        mean_ns: 1e9 / r,
                        on: on.0,
                        off: off.0,
                        on_until: Nanos::ZERO,
                    }
                }
                "disk" => {
                    let mode = n
                        .mode
                        .as_ref()
                        .map(|m| m.get_ref().as_str())
                        .unwrap_or("dma");
                    let bw = n
                        .disk_bytes_per_s
                        .ok_or_else(|| at("disk noise needs disk_bytes_per_s".into()))?;
                    let size = n.transfer_bytes.unwrap_or(65_536);
                    if !(bw > 0.0 && bw.is_finite()) || size == 0 {
                        return Err(at(
                            "disk_bytes_per_s and transfer_bytes must be positive".into()
                        ));
                    }
                    let period = Nanos((size as f64 / bw * 1e9).round().max(1.0) as u64);
                    let irq = n.irq_cost.map(|d| d.0).unwrap_or(Nanos::from_us(20));
                    let cost = match mode {
                        "dma" => irq,
                        "pio" => {
                            let pio = n.pio_bytes_per_s.ok_or_else(|| at("pio mode needs pio_bytes_per_s (how fast the CPU copies from the drive)".into()))?;
                            if !(pio > 0.0 && pio.is_finite()) {
                                return Err(at("pio_bytes_per_s must be positive".into()));
                            }
                            irq + Nanos((size as f64 / pio * 1e9).round() as u64)
                        }
                        m => return Err(at(format!("mode '{m}' (use dma or pio)"))),
                    };
                    if duration.is_some() {
                        return Err(at("disk noise derives its duration; remove duration".into()));
                    }
                    duration = Some(Dist::Const(cost.min(period)));
                    NoiseKind::Periodic {
                        period,
                        jitter: Nanos::ZERO,
                    }
                }
                k => {
                    return Err(scn.error_at(
                        n.kind.span(),
                        format!(
                            "noise '{name}': kind '{k}' (use periodic, poisson, bursty or disk)"
                        ),
                    ))
                }
            };
            let duration = duration.ok_or_else(|| at("needs a duration".into()))?;
            let kind_name = if n.kind.get_ref() == "disk" {
                "disk"
            } else {
                level.kind()
            };
            let src = self.add_source(n.cpu, kind_name, &name);
            self.noises.push(Noise {
                cpu: n.cpu as usize,
                src,
                level,
                kind,
                duration,
                phase: n.phase.0.max(n.start.map(|d| d.0).unwrap_or(Nanos::ZERO)),
                k: 0,
                stop: n.stop.map(|d| d.0),
                rng: Rng::new(seed, 100_000 + i as u64),
            });
        }
        Ok(())
    }

    fn build_streams(
        &mut self,
        cx: &Ctx,
        task_names: &BTreeMap<String, usize>,
    ) -> Result<(), ScenarioError> {
        let (scn, f, seed) = (cx.scn, cx.f, cx.seed);
        for (i, s) in f.stream.iter().enumerate() {
            let name = s.name.get_ref().clone();
            let at = |m: String| scn.error_at(s.name.span(), format!("stream '{name}': {m}"));
            cx.check_cpu(s.cpu, s.name.span(), &format!("stream '{name}'"))?;
            let rate = match (s.rate, s.mbit_s, s.item_bytes) {
                (Some(r), None, None) => r,
                (None, Some(m), Some(b)) if b > 0 => m * 1e6 / 8.0 / b as f64,
                _ => return Err(at("give rate (items/s), or mbit_s and item_bytes".into())),
            };
            if !(rate > 0.0 && rate <= 1e8) {
                return Err(at(format!("rate {rate} items/s must be in (0, 1e8]")));
            }
            if s.capacity == 0 {
                return Err(at("capacity must be at least 1".into()));
            }
            let Some(&drainer) = task_names.get(s.drained_by.get_ref()) else {
                return Err(scn.error_at(
                    s.drained_by.span(),
                    format!(
                        "stream '{name}': no [[task]] named '{}'",
                        s.drained_by.get_ref()
                    ),
                ));
            };
            if self.tasks[drainer].cpu != s.cpu as usize {
                return Err(scn.error_at(
                    s.drained_by.span(),
                    format!("stream '{name}': its drainer runs on another cpu"),
                ));
            }
            let poisson = match s
                .arrivals
                .as_ref()
                .map(|a| a.get_ref().as_str())
                .unwrap_or("periodic")
            {
                "periodic" => false,
                "poisson" => true,
                a => return Err(at(format!("arrivals '{a}' (use periodic or poisson)"))),
            };
            let irq = self.add_source(s.cpu, "irq", &format!("{name}:irq"));
            let dpc = self.add_source(s.cpu, "dpc", &format!("{name}:dpc"));
            self.tasks[drainer].drains.push(i);
            let interval = Nanos((1e9 / rate).round().max(1.0) as u64);
            self.streams.push(Stream {
                cpu: s.cpu as usize,
                interval,
                mean_gap_ns: 1e9 / (1e9 / interval.0 as f64),
                poisson,
                capacity: s.capacity,
                flow_control: s.flow_control,
                drainer,
                irq: (irq, s.irq_cost.0),
                dpc: (dpc, s.dpc_cost.0),
                stop: s.stop.map(|d| d.0),
                fill: 0,
                paused_since: None,
                rng: Rng::new(seed, 200_000 + i as u64),
                stats: StreamStats {
                    name,
                    capacity: s.capacity,
                    ..Default::default()
                },
            });
            let start = s.start.map(|d| d.0).unwrap_or(Nanos::ZERO);
            self.push(start, EvKind::Stream { idx: i as u32 });
        }
        Ok(())
    }

    /// The end of the run, then the first tick or timer, release and noise
    /// arrival, in this order (their sequence numbers break ties). The
    /// first thing a run does rather than part of building the machine, as
    /// SimSo's `run_model()` activates its tasks' processes.
    #[inline(never)]
    pub(crate) fn initial_events(&mut self) {
        let ncpu = self.cpus.len() as u32;
        let end = self.end;
        self.seq += 1;
        self.end_key = key(end, self.seq);
        if self.tick_ps.is_some() {
            for c in 0..ncpu {
                self.push(Nanos::ZERO, EvKind::Tick { cpu: c, k: 0 });
            }
        } else {
            for i in 0..self.timers.len() {
                let due = self.timers[i].due;
                self.push(due, EvKind::TimerDue { timer: i as u32 });
            }
        }
        for i in 0..self.tasks.len() {
            let t = &self.tasks[i];
            match t.kind {
                TaskKind::Periodic | TaskKind::Sleeper => {
                    let p = t.phase;
                    self.push(
                        p,
                        EvKind::Release {
                            task: i as u32,
                            nominal: p,
                        },
                    );
                }
                TaskKind::Background => {
                    let p = t.phase;
                    self.push(
                        p,
                        EvKind::Release {
                            task: i as u32,
                            nominal: p,
                        },
                    );
                }
                _ => {}
            }
        }
        for i in 0..self.noises.len() {
            let first = self.first_noise_time(i);
            if let Some(t) = first {
                self.push(t, EvKind::Noise { idx: i as u32 });
            }
        }
    }

    fn add_source(&mut self, cpu: u32, kind: &str, name: &str) -> usize {
        self.sources.push(SourceStats {
            cpu,
            kind: kind.into(),
            name: name.into(),
            count: 0,
            total: Nanos::ZERO,
            max: Nanos::ZERO,
            dropped: 0,
        });
        self.sources.len() - 1
    }
}

/// The machine's size and the scheduler's configuration, from `[sim]`.
fn sched_config(scn: &Scenario) -> Result<(u32, SchedConfig), ScenarioError> {
    let f = &scn.spec;
    let ncpu = f.sim.cpus;
    if ncpu == 0 || ncpu > 256 {
        return Err(scn.error_at_key(
            &["sim", "cpus"],
            format!("sim.cpus = {ncpu}: must be 1 to 256"),
        ));
    }
    let cap = f.sim.admission_cap.unwrap_or(0.85);
    if !(cap > 0.0 && cap <= 1.0) {
        return Err(scn.error_at_key(
            &["sim", "admission_cap"],
            format!("sim.admission_cap = {cap}: must be in (0, 1]"),
        ));
    }
    let cfg = SchedConfig {
        quantum: f.sim.quantum.map(|d| d.0).unwrap_or(Nanos::from_ms(20)),
        admission_cap: cap,
        admission: f.sim.admission,
        timeshare_reservation: f.sim.timeshare_reservation.map(|r| (r.amount, r.period)),
    };
    if cfg.quantum.is_zero() {
        return Err(scn.error_at_key(&["sim", "quantum"], "sim.quantum must be greater than zero"));
    }
    Ok((ncpu, cfg))
}

/// Lock names are unique and each protocol is known; their ids come later,
/// from their first user.
fn check_locks(cx: &Ctx) -> Result<BTreeMap<String, usize>, ScenarioError> {
    let (scn, f) = (cx.scn, cx.f);
    let lock_names = scn.unique_names("lock", &f.lock, |l| &l.name)?;
    for l in &f.lock {
        match l.protocol.get_ref().as_str() {
            "none" | "inherit" => {}
            "ceiling" if l.ceiling.is_some() => {}
            "ceiling" => {
                return Err(scn.error_at(
                    l.name.span(),
                    format!(
                        "lock '{}': protocol ceiling needs a ceiling priority",
                        l.name.get_ref()
                    ),
                ))
            }
            p => {
                return Err(scn.error_at(
                    l.protocol.span(),
                    format!(
                        "lock '{}': protocol '{p}' (use none, inherit or ceiling)",
                        l.name.get_ref()
                    ),
                ))
            }
        }
    }
    Ok(lock_names)
}

/// A task's scheduling class: a reservation, EDF, a fixed priority or time
/// sharing.
fn task_class(
    scn: &Scenario,
    t: &TaskSpec,
    at: &dyn Fn(String) -> ScenarioError,
) -> Result<Class, ScenarioError> {
    let name = t.name.get_ref();
    let class_name = t.class.as_ref().map(|c| c.get_ref().as_str());
    let class = if let Some(r) = &t.reserve {
        if t.priority.is_some() || class_name.is_some() {
            return Err(at("a reserved task has no priority or class".into()));
        }
        if r.period.0.is_zero() || r.amount.0.is_zero() || r.amount.0 > r.period.0 {
            return Err(at("reserve needs 0 < amount ≤ period".into()));
        }
        if !(r.over > -1.0 && r.over.is_finite()) {
            return Err(at(format!("reserve.over = {} must be above -1", r.over)));
        }
        let amount =
            Nanos(((r.amount.0 .0 as f64) * (1.0 + r.over)).round() as u64).min(r.period.0);
        let kname = r
            .kind
            .as_ref()
            .map(|k| k.get_ref().as_str())
            .unwrap_or("rez");
        let rk = match kname {
            "rez" => RezKind::Rez,
            "rez-c" => RezKind::RezC,
            "rez-fb" => {
                let g = r.gain.unwrap_or(0.5);
                if !(g > 0.0 && g <= 2.0) {
                    return Err(at(format!("reserve.gain = {g} must be in (0, 2]")));
                }
                let min = r.min.map(|d| d.0).unwrap_or(Nanos::ZERO);
                let max = r.max.map(|d| d.0).unwrap_or(r.period.0);
                RezKind::RezFb(FeedbackController::new(amount, g, min, max))
            }
            k => {
                let sp = r.kind.as_ref().map(|x| x.span()).unwrap_or(t.name.span());
                return Err(scn.error_at(
                    sp,
                    format!("task '{name}': reserve.kind '{k}' (use rez, rez-c or rez-fb)"),
                ));
            }
        };
        Class::Reserved(Reservation {
            amount,
            period: r.period.0,
            need: r.amount.0,
            phase: t.phase.0,
            kind: rk,
            hard: r.hard,
        })
    } else {
        match (class_name, t.priority) {
            (Some("edf"), None) => Class::Edf,
            (Some("timeshare"), None) => Class::TimeShare,
            (Some("fixed") | None, Some(p)) if (1..=31).contains(&p) => {
                Class::Fixed { priority: p }
            }
            (None, None) => Class::TimeShare,
            (Some("fixed") | None, Some(p)) => {
                return Err(at(format!("priority {p} is outside 1..31")))
            }
            (Some(c), _) => {
                return Err(at(format!(
                    "class '{c}' (use fixed with a priority, edf, or timeshare without one)"
                )))
            }
        }
    };
    Ok(class)
}
