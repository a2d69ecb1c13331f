//! Regehr's thesis §11.6.2's test application on Linux.
//!
//! K threads poll the monotonic clock. A difference between two reads
//! longer than the gap threshold means the thread was not running in
//! between; everything else is time it received. Thread 0 holds the
//! reservation and, at every period boundary, records what it received,
//! what was stolen from it while it was owed time, and whether it got its
//! reservation (a hit). The other threads are ordinary time-sharing
//! competitors that take whatever the reservation leaves, as Thread 1 does
//! in Regehr's figures.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Barrier, Mutex};

use punctual_live::clock::{mono, sleep_until};
use punctual_live::rt::{gettid, set_thread_name};
use punctual_record::{Metric, Period, PeriodSummary, Recorder, Series, Stolen, Timeline};
use punctual_units::Nanos;

pub use punctual_record::reserve::Background;

use crate::constraint::{ConstraintOutcome, ConstraintRequest};
use crate::controller::{catchup_should_yield, FeedbackController, PeriodAccount};
use crate::kernel;
use crate::partition::Partition;
use crate::spec::{Mode, Spec};
use crate::{set_deadline, set_other, thread_cputime, ReserveError};

/// What the test application is asked to do.
#[derive(Clone, Debug)]
pub struct Config {
    pub spec: Spec,
    /// Total threads: one reserved, the rest time-sharing competitors.
    pub threads: u32,
    pub duration: Nanos,
    /// A gap between two clock reads longer than this counts as "not
    /// running". Well above the loop's own step (tens of ns), well below
    /// real interruptions.
    pub gap_threshold: Nanos,
    /// Periods kept in full; later ones only count in the summary, so
    /// memory stays bounded on long runs.
    pub max_periods_kept: usize,
    pub constraint: Option<ConstraintRequest>,
    /// The reserved thread (plain, feedback) stops itself once charged
    /// C_t, emulating precise (HRTICK) enforcement on a tick-enforced
    /// kernel. Catch-up always stops itself, on received time.
    pub thread_enforced: bool,
    /// The reserved thread's task name in the record (`reserved`; with
    /// several reservations, one name each).
    pub task: String,
}

/// Everything the test application measured.
#[derive(Clone, Debug)]
pub struct Outcome {
    pub periods: Vec<Period>,
    /// Charged CPU time of each kept period (thread CPU clock).
    pub charged_ns: Vec<Nanos>,
    pub periods_dropped: u64,
    pub summary: PeriodSummary,
    pub charged_total_ns: Nanos,
    pub received: Series,
    pub gaps: Series,
    pub stolen: Stolen,
    pub background: Vec<Background>,
    /// CPU time spent in the controller (budget law + sched_setattr).
    pub controller_overhead_ns: Nanos,
    pub controller_updates: u64,
    /// Updates that changed the kernel's runtime (sched_setattr calls).
    pub controller_applied: u64,
    /// Time spent reading the CPU clock to stop at C_t (`thread_enforced`).
    pub enforce_overhead_ns: Nanos,
    pub setattr_refusals: u64,
    pub clamped_periods: u64,
    /// Mean C over all periods.
    pub requested_mean_ns: Nanos,
    pub elapsed: Nanos,
    pub interrupted: bool,
    pub constraint: Option<ConstraintOutcome>,
}

/// The default task name of the reserved thread.
pub const RESERVED_TASK: &str = "reserved";

/// How close (received + stolen) must come to C_t before a thread-enforced
/// thread reads its CPU clock to find where exactly C_t charged falls.
const SELF_ENFORCE_MARGIN: Nanos = Nanos(100_000);

struct Reserved {
    periods: Vec<Period>,
    charged: Vec<Nanos>,
    dropped: u64,
    summary: PeriodSummary,
    charged_total: Nanos,
    received: Recorder,
    gaps: Recorder,
    timeline: Timeline,
    stolen_total: Nanos,
    stolen_intervals: u64,
    stolen_max: Nanos,
    overhead: Nanos,
    updates: u64,
    applied: u64,
    enforce_overhead: Nanos,
    enforce_reads: u64,
    enforce_clean_reads: u64,
    refusals: u64,
    clamped: u64,
    requested_sum: u128,
    /// CPU the thread ran on last (where its stolen time was taken).
    last_cpu: u32,
}

/// Runs the test application. `partition`, when given, holds every thread
/// of the application on its CPU. Returns early (with what it has) when
/// `stop` is set.
pub fn run(
    cfg: &Config,
    partition: Option<&Partition>,
    stop: &AtomicBool,
) -> Result<Outcome, ReserveError> {
    let n = cfg.threads.max(1) as usize + usize::from(cfg.constraint.is_some());
    let ready = Barrier::new(n + 1);
    let t0 = AtomicU64::new(0);
    let failed = AtomicBool::new(false);
    let setup_error: Mutex<Option<ReserveError>> = Mutex::new(None);
    let start_wall = mono();

    let fail = |e: ReserveError| {
        failed.store(true, Ordering::SeqCst);
        let mut g = setup_error.lock().unwrap_or_else(|p| p.into_inner());
        if g.is_none() {
            *g = Some(e);
        }
    };
    let fail = &fail;
    let result = std::thread::scope(|s| {
        let reserved = s.spawn(|| {
            set_thread_name("pt-reserved");
            let setup = (|| {
                if let Some(p) = partition {
                    p.add_thread(gettid())?;
                }
                let sp = &cfg.spec;
                // Admission is asked for the largest budget the mode may use,
                // so a refusal comes now and not in the middle of the run.
                let mut admitted = set_deadline(0, sp.admitted_runtime(), sp.deadline, sp.period);
                // Bandwidth another process released less than one of its
                // deadlines ago is held until its 0-lag time: retry EBUSY
                // briefly (this run's own releases are waited out before
                // its partitions come down: kernel::wait_released).
                for _ in 0..10 {
                    match &admitted {
                        Err(e) if e.raw_os_error() == Some(libc::EBUSY) => {
                            std::thread::sleep(std::time::Duration::from_millis(50));
                            admitted =
                                set_deadline(0, sp.admitted_runtime(), sp.deadline, sp.period);
                        }
                        _ => break,
                    }
                }
                admitted.map_err(|e| {
                    ReserveError::Refused(kernel::explain_refusal(
                        &e,
                        sp.admitted_runtime(),
                        sp.period,
                        if partition.is_some() {
                            1
                        } else {
                            online_cpus()
                        },
                        &kernel::bandwidth(None),
                    ))
                })?;
                // A thread-enforced feedback thread keeps the admitted
                // maximum in the kernel and stops itself at C_t.
                let keep_max = sp.mode == Mode::Feedback && cfg.thread_enforced;
                if !keep_max && sp.initial_runtime() != sp.admitted_runtime() {
                    set_deadline(0, sp.initial_runtime(), sp.deadline, sp.period)
                        .map_err(|e| ReserveError::Failed(format!("sched_setattr: {e}")))?;
                }
                Ok(())
            })();
            if let Err(e) = setup {
                fail(e);
                ready.wait();
                return None;
            }
            ready.wait();
            if failed.load(Ordering::SeqCst) {
                let _ = set_other(0);
                return None;
            }
            let start = wait_start(&t0);
            let r = reserved_loop(cfg, start, stop);
            let _ = set_other(0);
            Some(r)
        });
        let mut bgs = Vec::new();
        for i in 1..cfg.threads.max(1) {
            let ready = &ready;
            let t0 = &t0;
            let failed = &failed;
            bgs.push(s.spawn(move || {
                let name = format!("pt-bg{i}");
                set_thread_name(&name);
                if let Some(p) = partition {
                    if let Err(e) = p.add_thread(gettid()) {
                        fail(e);
                    }
                }
                ready.wait();
                if failed.load(Ordering::SeqCst) {
                    return None;
                }
                let start = wait_start(t0);
                Some(background_loop(name, cfg, start, stop))
            }));
        }
        let constraint = cfg.constraint.map(|req| {
            let ready = &ready;
            let t0 = &t0;
            let failed = &failed;
            s.spawn(move || {
                set_thread_name("pt-constraint");
                if let Some(p) = partition {
                    if let Err(e) = p.add_thread(gettid()) {
                        fail(e);
                    }
                }
                ready.wait();
                if failed.load(Ordering::SeqCst) {
                    return None;
                }
                let start = wait_start(t0);
                Some(crate::constraint::demo(req, start, &cfg.spec, stop))
            })
        });
        ready.wait();
        // Everyone is placed and admitted: start on a common instant later
        // than the deadline the kernel gave the reserved thread when it was
        // admitted. Waking after that deadline makes the kernel start a
        // fresh instance (new deadline, full budget) at the wake-up, so the
        // kernel's periods line up with the test app's.
        let lead = cfg.spec.deadline.max(Nanos::from_ms(20)) + Nanos::from_ms(2);
        t0.store((mono() + lead).0, Ordering::SeqCst);
        let r = reserved.join().ok().flatten();
        let bg: Vec<Background> = bgs
            .into_iter()
            .filter_map(|h| h.join().ok().flatten())
            .collect();
        let c = constraint.and_then(|h| h.join().ok().flatten());
        (r, bg, c)
    });
    if let Some(e) = setup_error.into_inner().unwrap_or_else(|p| p.into_inner()) {
        return Err(e);
    }
    let (r, background, constraint) = result;
    let r = r.ok_or_else(|| ReserveError::Failed("the reserved thread did not finish".into()))?;
    let elapsed = mono().saturating_sub(start_wall);
    let observed = r.summary.received_total_ns + r.stolen_total;
    let stolen = Stolen {
        cpu: partition.map(|p| p.cpu).unwrap_or(r.last_cpu),
        task: Some(cfg.task.clone()),
        observed_ns: observed,
        total_ns: r.stolen_total,
        fraction: if observed.is_zero() {
            0.0
        } else {
            r.stolen_total.0 as f64 / observed.0 as f64
        },
        intervals: r.stolen_intervals,
        max_ns: r.stolen_max,
        threshold_ns: cfg.gap_threshold,
        loop_cost_ns: None,
        timeline: r.timeline,
        by_source: Vec::new(),
        kernel_view: None,
    };
    let periods_n = r.summary.periods.max(1) as u128;
    let mut received = r
        .received
        .to_series(&format!("{}.received", cfg.task), Metric::Received);
    received.task = Some(cfg.task.clone());
    let mut gaps = r.gaps.to_series(&format!("{}.gap", cfg.task), Metric::Gap);
    gaps.task = Some(cfg.task.clone());
    Ok(Outcome {
        periods: r.periods,
        charged_ns: r.charged,
        periods_dropped: r.dropped,
        interrupted: stop.load(Ordering::Relaxed),
        requested_mean_ns: Nanos((r.requested_sum / periods_n) as u64),
        summary: r.summary,
        charged_total_ns: r.charged_total,
        received,
        gaps,
        stolen,
        background,
        controller_overhead_ns: r.overhead,
        controller_updates: r.updates,
        controller_applied: r.applied,
        enforce_overhead_ns: Nanos(
            (r.enforce_overhead.0 as u128 * r.enforce_reads as u128
                / r.enforce_clean_reads.max(1) as u128) as u64,
        ),
        setattr_refusals: r.refusals,
        clamped_periods: r.clamped,
        elapsed,
        constraint,
    })
}

fn online_cpus() -> u32 {
    std::thread::available_parallelism()
        .map(|n| n.get() as u32)
        .unwrap_or(1)
}

fn wait_start(t0: &AtomicU64) -> Nanos {
    loop {
        let v = t0.load(Ordering::SeqCst);
        if v != 0 {
            sleep_until(Nanos(v));
            return Nanos(v);
        }
        std::thread::sleep(std::time::Duration::from_micros(200));
    }
}

fn background_loop(name: String, cfg: &Config, start: Nanos, stop: &AtomicBool) -> Background {
    let end = start + cfg.duration;
    let thr = cfg.gap_threshold;
    let mut last = mono();
    let first = last;
    let mut received = Nanos::ZERO;
    let mut i: u32 = 0;
    loop {
        let now = mono();
        let d = now - last;
        if d <= thr {
            received += d;
        }
        last = now;
        i = i.wrapping_add(1);
        if i.is_multiple_of(4096) && (now >= end || stop.load(Ordering::Relaxed)) {
            break;
        }
    }
    Background {
        name,
        received_ns: received,
        observed_ns: last - first,
    }
}

fn reserved_loop(cfg: &Config, start: Nanos, stop: &AtomicBool) -> Reserved {
    let sp = &cfg.spec;
    let p = sp.period;
    let thr = cfg.gap_threshold;
    let end = start + cfg.duration;
    let mut ctl = FeedbackController::new(sp.target(), sp.max_budget, sp.gain_ratio);
    let mut kernel_runtime = sp.initial_runtime();
    let mut out = Reserved {
        periods: Vec::new(),
        charged: Vec::new(),
        dropped: 0,
        summary: PeriodSummary {
            task: cfg.task.clone(),
            reserved_ns: sp.budget,
            ..Default::default()
        },
        charged_total: Nanos::ZERO,
        received: Recorder::new(Nanos(10_000)).with_sample_period(p),
        gaps: Recorder::new(Nanos(1_000)),
        timeline: Timeline::new(Nanos::from_ms(100)),
        stolen_total: Nanos::ZERO,
        stolen_intervals: 0,
        stolen_max: Nanos::ZERO,
        overhead: Nanos::ZERO,
        updates: 0,
        applied: 0,
        enforce_overhead: Nanos::ZERO,
        enforce_reads: 0,
        enforce_clean_reads: 0,
        refusals: 0,
        clamped: 0,
        requested_sum: 0,
        last_cpu: 0,
    };
    let mut last = mono().max(start);
    let mut cpu_mark = thread_cputime();
    let mut k: u64 = (last - start).0 / p.0;
    let mut acct = PeriodAccount {
        requested: sp.target(),
        ..Default::default()
    };
    let mut yielded = false;
    // Received + stolen at which this period's C_t is reached (set once the
    // CPU clock has been read near the end of the budget).
    let mut armed_at: Option<Nanos> = None;
    loop {
        let now = mono();
        let d = now - last;
        let k_now = (now - start).0 / p.0;
        if d <= thr {
            acct.received += d;
        } else if k_now == k && !yielded {
            // Not running while still inside the period and not having
            // given the time back: stolen (interrupts, the hypervisor, a
            // higher class). A gap that crosses the boundary is the
            // kernel's throttling until replenishment, not theft.
            acct.stolen += d;
            out.gaps.record(d);
            out.timeline.add_interval(last - start, d);
            out.stolen_intervals += 1;
            out.stolen_max = out.stolen_max.max(d);
        }
        last = now;
        if k_now != k {
            let cpu_now = thread_cputime();
            acct.charged = cpu_now - cpu_mark;
            cpu_mark = cpu_now;
            finish_period(&mut out, cfg, k, acct);
            for skipped in k + 1..k_now {
                finish_period(
                    &mut out,
                    cfg,
                    skipped,
                    PeriodAccount {
                        requested: acct.requested,
                        ..Default::default()
                    },
                );
            }
            if now >= end || stop.load(Ordering::Relaxed) {
                // SAFETY: plain libc call.
                out.last_cpu = unsafe { libc::sched_getcpu() }.max(0) as u32;
                break;
            }
            let mut next_c = sp.target();
            if sp.mode == Mode::Feedback {
                let t = mono();
                let before_clamped = ctl.clamped_periods;
                next_c = ctl.update(acct.charged, acct.received);
                if ctl.clamped_periods != before_clamped {
                    out.clamped += 1;
                }
                // With the thread enforcing C_t itself, the kernel keeps
                // the admitted maximum as a ceiling and nothing needs to
                // change there. Otherwise C_t goes to the kernel; a
                // sched_setattr costs microseconds (more in a VM), so changes
                // smaller than the deadband are skipped (the integrator
                // keeps accumulating them until they matter).
                let deadband = (sp.target().0 / 100).max(20_000);
                if cfg.thread_enforced {
                    kernel_runtime = next_c;
                } else if next_c.0.abs_diff(kernel_runtime.0) >= deadband {
                    match set_deadline(0, next_c, sp.deadline, sp.period) {
                        Ok(()) => {
                            kernel_runtime = next_c;
                            out.applied += 1;
                        }
                        Err(_) => {
                            out.refusals += 1;
                            ctl.refused(kernel_runtime);
                        }
                    }
                }
                next_c = kernel_runtime;
                out.updates += 1;
                out.overhead += mono() - t;
            }
            k = k_now;
            acct = PeriodAccount {
                requested: next_c,
                ..Default::default()
            };
            yielded = false;
            armed_at = None;
            continue;
        }
        if cfg.thread_enforced && sp.mode != Mode::Catchup && !yielded {
            // Rez and Rez-FB assume the scheduler stops the thread when it
            // has been *charged* C_t. Without HRTICK Linux stops it only at
            // the next tick and books the overrun as debt on the next
            // period, which no over-reservation or feedback can correct.
            // With `thread_enforced` the instrumented thread stops itself
            // at C_t charged. Received + stolen tracks charged time closely
            // (both advance while the thread is on the CPU), so the CPU
            // clock (a system call) is read once per period, shortly before
            // C_t, to fix the exact point; the rest is arithmetic.
            let seen = acct.received + acct.stolen;
            let stop_at = match armed_at {
                Some(x) => Some(x),
                None if seen + SELF_ENFORCE_MARGIN >= acct.requested => {
                    let charged = thread_cputime() - cpu_mark;
                    let cost = mono() - now;
                    out.enforce_reads += 1;
                    // A read that spans a gap was descheduled inside (the
                    // kernel's own tick enforcement can land there): its
                    // length is not the read's cost. Such reads are
                    // costed at the mean of the clean ones.
                    if cost <= thr {
                        out.enforce_clean_reads += 1;
                        out.enforce_overhead += cost;
                    }
                    let x = seen + acct.requested.saturating_sub(charged);
                    armed_at = Some(x);
                    Some(x)
                }
                None => None,
            };
            if stop_at.is_some_and(|x| seen >= x) {
                yielded = true;
                // SAFETY: plain syscall.
                unsafe { libc::sched_yield() };
                continue;
            }
        }
        if sp.mode == Mode::Catchup && !yielded && catchup_should_yield(acct.received, sp.target())
        {
            yielded = true;
            // SCHED_DEADLINE: ends this instance; the thread sleeps until
            // its next replenishment with a full budget.
            // SAFETY: plain syscall.
            unsafe { libc::sched_yield() };
        }
    }
    out
}

fn finish_period(out: &mut Reserved, cfg: &Config, index: u64, a: PeriodAccount) {
    let sp = &cfg.spec;
    let hit = a.hit(sp.budget);
    out.summary.periods += 1;
    if !hit {
        out.summary.misses += 1;
    }
    out.summary.received_total_ns += a.received;
    out.summary.stolen_total_ns += a.stolen;
    out.summary.requested_total_ns += a.requested;
    out.charged_total += a.charged;
    out.stolen_total += a.stolen;
    out.requested_sum += a.requested.0 as u128;
    out.received.record(a.received);
    if out.periods.len() < cfg.max_periods_kept {
        out.periods.push(Period {
            task: cfg.task.clone(),
            index,
            start_ns: sp.period * index,
            reserved_ns: sp.budget,
            requested_ns: a.requested,
            received_ns: a.received,
            stolen_ns: a.stolen,
            hit,
        });
        out.charged.push(a.charged);
    } else {
        out.dropped += 1;
    }
}
