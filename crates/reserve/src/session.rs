//! A reservation session: putting back what a killed run left, and the
//! root-domain repair that must follow it; the machine prepared for a run;
//! the run itself ([`run`]: loads, reserved threads or the command, the
//! ordered teardown) and its record.
//!
//! The order matters and is kernel knowledge: a dead run's deadline threads
//! give back their bandwidth at their 0-lag time, which can come after the
//! root-domain rebuild its cpusets' removal made, and drive a total below
//! zero; so after undoing a dead run's journal the totals are watched and
//! repaired ([`kernel::repair_negative_totals`]).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use punctual_live::restore::{cleanup_stale, CleanupReport};
use punctual_record::{Record, Source, Warning};
use punctual_units::Nanos;

use crate::kernel::Hrtick;
use crate::partition::Partition;
use crate::placement::Placed;
use crate::record::Outcome;
use crate::{command, journal, kernel, partition, placement, testapp, ReserveError, Spec};

/// One line for a root-domain repair: what was wrong and whether the
/// rebuild cleared it.
pub fn repair_sentence(r: &kernel::Repair) -> String {
    let list = kernel::format_totals;
    if r.repaired {
        format!(
            "the kernel left its deadline bandwidth total below zero when the partition came down ({}), which would refuse every SCHED_DEADLINE task; punctual rebuilt the root domains ({} rebuild(s)) and the totals read {} again",
            list(&r.found),
            r.rebuilds,
            list(&r.after)
        )
    } else {
        format!(
            "the kernel left its deadline bandwidth total below zero when the partition came down ({}) and {} rebuild(s) of the root domains did not clear it ({}): SCHED_DEADLINE will be refused until it is; try punctual reserve --cleanup, or toggle cpuset.sched_load_balance with an exclusive cpuset",
            list(&r.found),
            r.rebuilds,
            list(&r.after)
        )
    }
}

/// A negative root-domain total left by some earlier run (or by a kernel
/// bug outside punctual) refuses every deadline task; `--cleanup` is where
/// a user who was told so goes, so it checks and repairs that too.
pub fn cleanup_root_domains(dir: &Path, window: Nanos) -> Result<Option<kernel::Repair>, String> {
    // Without a journal (no root) debugfs cannot be mounted, but an
    // already mounted one is still read: a user without root is told of a
    // negative total, just not able to clear it.
    let mut jr = journal::create(dir).ok();
    let sched_dir = kernel::sched_debug_dir(jr.as_mut());
    let cpu = punctual_live::sysinfo::online_cpus().into_iter().max();
    let rep = match (&mut jr, cpu) {
        (Some(j), Some(cpu)) if cpu > 0 => {
            kernel::repair_negative_totals(sched_dir.as_deref(), window, || {
                partition::rebuild_root_domains(j, cpu).map_err(|e| e.to_string())
            })
        }
        _ => {
            let found =
                kernel::negative_totals(&kernel::root_domain_bandwidth(sched_dir.as_deref()));
            if found.is_empty() {
                Ok(None)
            } else {
                Err(format!(
                    "the deadline bandwidth total is below zero ({}) and clearing it takes root and a machine of two or more CPUs",
                    kernel::format_totals(&found)
                ))
            }
        }
    };
    let errors = jr.map(|mut j| j.undo_all()).unwrap_or_default();
    if !errors.is_empty() {
        return Err(errors.join("; "));
    }
    rep
}

/// `punctual reserve --cleanup`: undoes the journals of dead runs in `dir`
/// (of any verb), then checks the root-domain totals, watching them for a
/// second when anything of a dead run was undone (reservations' deadlines
/// are below that). A repair is reported as undone, a failed one as a
/// problem.
pub fn cleanup(dir: &Path) -> CleanupReport {
    let mut rep = cleanup_stale(dir);
    let window = if rep.undone.is_empty() {
        Nanos::ZERO
    } else {
        Nanos::from_secs(1)
    };
    match cleanup_root_domains(dir, window) {
        Ok(Some(r)) => {
            let line = repair_sentence(&r);
            if r.repaired {
                rep.undone.push(line);
            } else {
                rep.problems.push(line);
            }
        }
        Ok(None) => {}
        Err(e) => rep.problems.push(e),
    }
    rep
}

/// What a run does before it changes anything: the journals of dead runs
/// in `dir` undone, and, when anything was, the root domains watched and
/// repaired as [`cleanup`] does. Returns one sentence per thing done or
/// found.
pub fn restore_stale(dir: &Path) -> Vec<String> {
    let stale = cleanup_stale(dir);
    let mut said: Vec<String> = stale
        .undone
        .iter()
        .map(|u| format!("cleaned up after a killed run: {u}"))
        .collect();
    if !stale.undone.is_empty() {
        match cleanup_root_domains(dir, Nanos::from_secs(1)) {
            Ok(Some(r)) => said.push(repair_sentence(&r)),
            Ok(None) => {}
            Err(e) => said.push(e),
        }
    }
    said
}

/// What the ordered teardown of a run found.
#[derive(Debug)]
pub struct Teardown {
    /// How long the partitions waited for the kernel to let the released
    /// reservations' bandwidth go (none without a partition).
    pub quiesce: Option<kernel::Quiesce>,
    /// A root-domain total a late release drove below zero, and its repair.
    pub repair: Result<Option<kernel::Repair>, String>,
    /// Settings that could not be put back.
    pub restore_errors: Vec<String>,
}

impl Teardown {
    /// The warnings a record of the run carries for it.
    pub fn warnings(&self) -> Vec<Warning> {
        let mut w = Vec::new();
        match &self.repair {
            Ok(Some(r)) => w.push(Warning::Other {
                message: repair_sentence(r),
            }),
            Ok(None) => {}
            Err(e) => w.push(Warning::Other {
                message: format!(
                    "could not check the kernel's deadline bandwidth totals after the partition came down ({e}); if SCHED_DEADLINE is refused from now on, run punctual reserve --cleanup"
                ),
            }),
        }
        for e in &self.restore_errors {
            w.push(Warning::Other {
                message: format!(
                    "could not restore a setting: {e}; run punctual reserve --cleanup"
                ),
            });
        }
        w
    }
}

/// Takes a run's partitions down in the order the kernel needs, and puts
/// every journaled setting back:
///
/// 1. wait until the kernel has let the released reservations' bandwidth
///    go (within one relative deadline, `release_bound`): taking the
///    partition down first corrupts the root-domain totals
///    ([`kernel::wait_released`]);
/// 2. undo everything but the mounts (the partitions come down);
/// 3. a late release can still have driven a total below zero, which
///    refuses every deadline task on the machine until a rebuild: check
///    and repair through the debugfs still mounted
///    ([`kernel::repair_negative_totals`]);
/// 4. undo the rest (the mounts).
pub fn teardown(
    journal: &mut journal::Journal,
    sched_dir: Option<&Path>,
    baseline: &[(u32, f64)],
    partitions: Vec<Partition>,
    release_bound: Nanos,
) -> Teardown {
    let cpus: Vec<u32> = partitions.iter().map(|p| p.cpu).collect();
    let quiesce = if cpus.is_empty() {
        None
    } else {
        Some(kernel::wait_released(
            sched_dir,
            baseline,
            &cpus,
            release_bound,
        ))
    };
    let rebuild_cpu = cpus.iter().copied().max();
    drop(partitions);
    let mut restore_errors = journal.undo_all_but_mounts();
    let repair = match (rebuild_cpu, &quiesce) {
        (Some(cpu), Some(q)) if q.how != "bound" => {
            // Released bandwidth was waited for before the teardown, so a
            // late release is not expected; one more deadline covers it.
            kernel::repair_negative_totals(sched_dir, release_bound, || {
                partition::rebuild_root_domains(journal, cpu).map_err(|e| e.to_string())
            })
        }
        _ => Ok(None),
    };
    restore_errors.extend(journal.undo_all());
    Teardown {
        quiesce,
        repair,
        restore_errors,
    }
}

/// What a run asks of the machine before its threads start.
#[derive(Clone, Copy, Debug)]
pub struct Request<'a> {
    /// The one reservation (the first, with several).
    pub spec: &'a Spec,
    /// Several reservations to place on CPUs (`--reserve` more than once);
    /// empty for one.
    pub several: &'a [Spec],
    /// `--cpu`: the one reservation's own partition.
    pub cpu: Option<u32>,
    /// `--hrtick`: precise enforcement for the run.
    pub hrtick: bool,
}

/// The machine made ready for a run: what the kernel does for it, and the
/// partitions it got (all journaled).
#[derive(Debug)]
pub struct Prepared {
    pub config: kernel::KernelConfig,
    /// Where sched/features and sched/debug are read.
    pub sched_dir: Option<PathBuf>,
    pub hrtick_before: Hrtick,
    pub hrtick_during: Hrtick,
    pub bandwidth: kernel::Bandwidth,
    /// One tick (1/CONFIG_HZ), when known.
    pub tick: Option<Nanos>,
    /// `--cpu`'s partition.
    pub partition: Option<Partition>,
    /// Several reservations: where each went, and a partition per CPU used.
    pub placed: Vec<Placed>,
    pub parts: Vec<Partition>,
    /// The root domains' deadline totals before anything of this run is
    /// admitted in them: what the teardown waits to see again.
    pub rd_baseline: Vec<(u32, f64)>,
    /// Lines the run's summary shows.
    pub notes: Vec<String>,
    pub warnings: Vec<Warning>,
}

/// Reads what the kernel will do (tick or HRTICK enforcement, deadline
/// bandwidth), turns HRTICK on if asked, and makes the partitions: for
/// `--cpu`, or one per CPU the shared plan places several reservations on
/// (least-utilized CPU first, counting the deadline bandwidth already
/// there). Every change is journaled in `journal` first.
pub fn prepare(journal: &mut journal::Journal, req: Request) -> Result<Prepared, ReserveError> {
    let mut warnings: Vec<Warning> = Vec::new();
    let cfg = kernel::kernel_config();
    let sched_dir = kernel::sched_debug_dir(Some(journal));
    let hr = kernel::hrtick_state(&cfg, sched_dir.as_deref());
    let bw = kernel::bandwidth(sched_dir.as_deref());
    if req.hrtick {
        let dir = sched_dir.clone().unwrap_or_default();
        kernel::enable_hrtick(journal, &dir, &hr).map_err(ReserveError::Refused)?;
    }
    let hr_now = if req.hrtick {
        kernel::hrtick_state(&cfg, sched_dir.as_deref())
    } else {
        hr.clone()
    };
    let tick = cfg.hz.map(|hz| Nanos(1_000_000_000 / hz as u64));
    let mut notes = Vec::new();
    if hr_now.enforced_at_tick() {
        let why = match &hr_now {
            Hrtick::Off { feature } => format!("{feature} is off"),
            Hrtick::NotBuilt => "the kernel has no HRTICK".into(),
            Hrtick::Unknown { reason } => {
                format!("HRTICK state unknown, kernel default is off: {reason}")
            }
            Hrtick::On { .. } => unreachable!(),
        };
        let tick_s = tick
            .map(|t| t.to_string())
            .unwrap_or_else(|| "unknown".into());
        notes.push(format!(
            "budgets are enforced at the tick ({tick_s}; {why})"
        ));
        if let Some(t) = tick {
            if req.spec.target() < t * 10 {
                warnings.push(Warning::Other {
                    message: format!(
                        "the budget {} is not much larger than the tick ({t}) and HRTICK is not on: the kernel stops a reservation only at a tick, so each period it can overrun by up to {t} and then starts the next one in debt{}",
                        req.spec.target(),
                        if matches!(hr_now, Hrtick::Off { .. }) { "; --hrtick enables precise enforcement for the run" } else { "" }
                    ),
                });
            }
        }
    }
    if cfg.irq_time_accounting == Some(false) {
        warnings.push(Warning::NoIrqTimeAccounting);
    }
    let partition = match req.cpu {
        Some(c) => Some(Partition::create(journal, c)?),
        None => None,
    };
    let mut placed = Vec::new();
    let mut parts = Vec::new();
    if !req.several.is_empty() {
        let cpus = match partition::find_cpuset_fs() {
            Some(partition::CpusetFs::V1(root)) => punctual_live::sysinfo::parse_cpu_list(
                &std::fs::read_to_string(root.join("cpuset.cpus")).unwrap_or_default(),
            )
            .unwrap_or_default(),
            _ => punctual_live::sysinfo::online_cpus(),
        };
        let existing = placement::existing_deadline_load();
        let reqs: Vec<(Nanos, Nanos)> = req
            .several
            .iter()
            .map(|s| (s.admitted_runtime(), s.period))
            .collect();
        placed = placement::place(
            &reqs,
            &cpus,
            &existing,
            bw.limit_per_cpu_ratio.unwrap_or(1.0),
        )
        .map_err(ReserveError::Refused)?;
        notes.push(format!(
            "placement (shared plan, least-utilized CPU first; {} existing deadline thread(s) counted):",
            existing.len()
        ));
        for p in &placed {
            notes.push(format!(
                "  r{} {}/{} (admitted {}) -> CPU {}: reserved {:.1}% before, {:.1}% after",
                p.index + 1,
                req.several[p.index].budget,
                p.period_ns,
                p.runtime_ns,
                p.cpu,
                p.cpu_utilization_before_ratio * 100.0,
                p.cpu_utilization_after_ratio * 100.0
            ));
        }
        let mut used: Vec<u32> = placed.iter().map(|p| p.cpu).collect();
        used.sort_unstable();
        used.dedup();
        parts = Partition::create_set(journal, &used)?;
    }
    let rd_baseline = kernel::root_domain_bandwidth(sched_dir.as_deref());
    Ok(Prepared {
        config: cfg,
        sched_dir,
        hrtick_before: hr,
        hrtick_during: hr_now,
        bandwidth: bw,
        tick,
        partition,
        placed,
        parts,
        rd_baseline,
        notes,
        warnings,
    })
}

/// How long the test app runs without `--duration`.
pub const TEST_APP_DURATION: Nanos = Nanos::from_secs(10);

/// Who stops the test app's reserved thread at its budget.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Enforce {
    /// SCHED_DEADLINE as is: at the tick unless HRTICK is on.
    Kernel,
    /// The thread stops itself once charged its budget.
    Thread,
}

/// A whole run, checked by the caller.
#[derive(Clone, Debug)]
pub struct RunRequest<'a> {
    /// The one reservation (the first, with several).
    pub spec: Spec,
    /// Several reservations for the test app, placed on CPUs; empty for one.
    pub several: Vec<Spec>,
    pub constraint: Option<crate::constraint::ConstraintRequest>,
    /// `None`: the thread stops itself while HRTICK is off, else the kernel.
    pub enforce: Option<Enforce>,
    /// What the record's `config` names; `interrupted` is filled in here.
    pub settings: crate::record::Settings,
    /// Where restore journals are kept.
    pub journal_dir: &'a Path,
}

/// What the caller provides around a run: the stress loads beside it, the
/// wall clock's time stamp, and where lines about stale runs go.
pub trait Host {
    /// Starts the loads asked for, to run at most `duration`.
    fn start_loads(&mut self, duration: Nanos) -> Result<(), ReserveError>;
    /// Stops the loads and puts their figures into `rec`.
    fn finish_loads(&mut self, rec: &mut Record);
    /// The record's start time (RFC 3339).
    fn now(&self) -> String;
    /// A line about a dead run's leftovers put back, as it happens.
    fn note(&self, line: &str);
}

/// A run's record, and the command's exit status when it failed on its own.
#[derive(Debug)]
pub struct Finished {
    pub record: Record,
    pub command_failed: Option<i32>,
}

/// The whole session: dead runs' journals replayed, the machine prepared
/// (journaled), the loads started, the reserved threads or the command run
/// until done or `stop`, the loads stopped, and the teardown in its order
/// (released bandwidth back before the partitions come down, then the
/// root-domain repair); then the record.
pub fn run(
    req: &RunRequest,
    host: &mut dyn Host,
    stop: &AtomicBool,
) -> Result<Finished, ReserveError> {
    let RunRequest {
        spec,
        several,
        constraint,
        enforce,
        settings,
        journal_dir,
    } = req;
    let (spec, journal_dir) = (*spec, *journal_dir);
    let a = settings;
    for line in restore_stale(journal_dir) {
        host.note(&format!("punctual reserve: {line}"));
    }
    let mut jr = journal::create(journal_dir).map_err(|e| {
        ReserveError::Refused(format!(
            "cannot write the restore journal in {}: {e}",
            journal_dir.display()
        ))
    })?;
    let Prepared {
        config: cfg,
        sched_dir,
        hrtick_before: hr,
        hrtick_during: hr_now,
        bandwidth: bw,
        tick,
        partition,
        placed,
        parts,
        rd_baseline,
        mut notes,
        mut warnings,
    } = prepare(
        &mut jr,
        Request {
            spec: &spec,
            several,
            cpu: a.cpu,
            hrtick: a.hrtick,
        },
    )?;
    let memlock = punctual_live::rt::lock_memory();
    if let Err(e) = &memlock {
        warnings.push(Warning::NoMemlock {
            reason: e.to_string(),
        });
    }
    let started_at = host.now();
    let mut rec = Record::new(
        Source::Measured,
        "reserve",
        punctual_live::sysinfo::collect(),
    );
    rec.started_at = started_at;
    let asked = a.asked;
    let thread_enforced = match enforce {
        Some(Enforce::Thread) => true,
        Some(Enforce::Kernel) => false,
        None => hr_now.enforced_at_tick(),
    };
    rec.set_config("enforce", if thread_enforced { "thread" } else { "kernel" });
    if thread_enforced && a.test_app {
        notes.push(format!(
            "the reserved thread stops itself once charged its budget (--enforce thread{}), as a precise enforcement would; --enforce kernel leaves it to the tick",
            if enforce.is_none() { ", the default while HRTICK is not on" } else { "" }
        ));
    } else if a.test_app && hr_now.enforced_at_tick() {
        notes.push("--enforce kernel: the kernel stops the reserved thread at the first tick after its budget and books the overrun as debt on the next period".into());
    } else if !a.test_app && hr_now.enforced_at_tick() {
        notes.push(format!(
            "a command cannot stop itself: the kernel stops it at the first tick after its budget (overrun up to {}, repaid the next period), so choose a budget well above the tick",
            tick.map(|t| t.to_string()).unwrap_or_else(|| "a tick".into())
        ));
    }
    // A command without --duration runs as long as it likes: the load is
    // stopped when it ends, whatever the bound given here.
    let load_for = a.duration.unwrap_or(if a.test_app {
        asked
    } else {
        Nanos::from_secs(24 * 3600)
    });
    host.start_loads(load_for)?;
    let result = if !several.is_empty() {
        std::thread::scope(|sc| {
            let handles: Vec<_> = placed
                .iter()
                .map(|p| {
                    let part = parts.iter().find(|x| x.cpu == p.cpu);
                    let cfg = testapp::Config {
                        spec: several[p.index],
                        threads: a.threads,
                        duration: asked,
                        gap_threshold: a.gap_threshold,
                        max_periods_kept: 100_000,
                        constraint: None,
                        thread_enforced,
                        task: format!("r{}", p.index + 1),
                    };
                    sc.spawn(move || testapp::run(&cfg, part, stop))
                })
                .collect();
            handles
                .into_iter()
                .zip(placed.iter().cloned())
                .map(|(h, p)| {
                    h.join()
                        .unwrap_or_else(|_| {
                            Err(ReserveError::Failed("a test-app thread panicked".into()))
                        })
                        .map(|o| (p, o))
                })
                .collect::<Result<Vec<_>, _>>()
        })
        .map(Outcome::Several)
    } else if a.test_app {
        let tcfg = testapp::Config {
            spec,
            threads: a.threads,
            duration: asked,
            gap_threshold: a.gap_threshold,
            max_periods_kept: 100_000,
            constraint: *constraint,
            thread_enforced,
            task: testapp::RESERVED_TASK.into(),
        };
        testapp::run(&tcfg, partition.as_ref(), stop).map(|o| Outcome::App(Box::new(o)))
    } else {
        command::run(
            &command::Options {
                spec: &spec,
                argv: &a.command,
                partition: partition.as_ref(),
                duration: a.duration,
                max_periods_kept: 100_000,
                trace: true,
                journal_dir,
            },
            stop,
        )
        .map(|o| Outcome::Cmd(Box::new(o)))
    };
    host.finish_loads(&mut rec);
    if memlock.is_ok() {
        punctual_live::rt::unlock_memory();
    }
    // Reservations released less than a deadline ago still hold their
    // bandwidth; the partition stays until the kernel has let it go (see
    // kernel::wait_released: taking it down first corrupts the
    // root-domain totals).
    // Within one relative deadline a released reservation's bandwidth is
    // back (its 0-lag time is at the latest its deadline).
    let release_bound = several
        .iter()
        .chain(std::iter::once(&spec))
        .map(|s| s.deadline)
        .max()
        .unwrap_or(spec.deadline)
        + Nanos::from_ms(10);
    let partitions: Vec<Partition> = partition.into_iter().chain(parts).collect();
    let teardown = teardown(
        &mut jr,
        sched_dir.as_deref(),
        &rd_baseline,
        partitions,
        release_bound,
    );
    warnings.extend(teardown.warnings());
    let outcome = result?;
    let settings = crate::record::Settings {
        interrupted: stop.load(Ordering::Relaxed),
        ..a.clone()
    };
    let facts = crate::record::KernelFacts {
        hrtick_before: hr,
        hrtick_during: hr_now,
        hz: cfg.hz,
        bandwidth_at_start: bw,
    };
    let mut report = crate::record::fill_record(&mut rec, &settings, &spec, &outcome, &facts);
    report.teardown_wait = teardown.quiesce.clone();
    report.root_domain_repair = teardown.repair.clone().ok().flatten();
    report.notes = notes;
    report.write_into(&mut rec);
    rec.warnings.extend(warnings);
    let command_failed = match &outcome {
        Outcome::Cmd(c) => c.exit_code.filter(|&code| code != 0 && !c.ended_by_us),
        _ => None,
    };
    Ok(Finished {
        record: rec,
        command_failed,
    })
}
