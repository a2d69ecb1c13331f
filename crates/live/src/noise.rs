//! The noise probe: time stolen from a busy thread (Regehr's test
//! application, oslat/sysjitter).
//!
//! A polling thread reads a fast counter in a tight loop; a step between two
//! reads longer than the threshold means something else had the CPU: an
//! interrupt, a softirq, another thread, the hypervisor. The loop itself
//! ([`poll`]) is generic over a [`Counter`], so the pipeline from counter
//! readings to stolen intervals runs in tests on a scripted counter.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use punctual_record::{Metric, Recorder, Stolen, Timeline, Warning};
use punctual_units::Nanos;

use crate::clock::{now, ClockId};
use crate::rt::Policy;
use crate::setup::{lock_memory_or_warn, prepare_thread, MemoryLock, ThreadSetup, WarningSink};
use crate::spikes::SpikeLog;
use crate::timer::Progress;

/// A monotonic counter read in the hot loop.
pub trait Counter {
    fn read(&mut self) -> u64;
}

/// A replayed feed of stolen intervals on a virtual clock (read with
/// [`Scale::IDENTITY`]: one tick is one ns): every read advances `step`,
/// and the read that first reaches a gap's start jumps over its length.
/// Gap starts count from the counter's creation, so the probe's first
/// 20 ms (its warm-up, which counts no gap) should hold none. Lets the
/// whole noise probe run with exact, known input.
#[derive(Clone, Debug)]
pub struct Replay {
    t: u64,
    step: u64,
    /// (start, length) in ns, in order of start.
    gaps: Vec<(Nanos, Nanos)>,
    next: usize,
}

impl Replay {
    /// `step` is the loop's cost per read (at least 1 ns).
    pub fn new(step: Nanos, mut gaps: Vec<(Nanos, Nanos)>) -> Self {
        gaps.sort_by_key(|g| g.0);
        Replay {
            t: 0,
            step: step.0.max(1),
            gaps,
            next: 0,
        }
    }
}

impl Counter for Replay {
    fn read(&mut self) -> u64 {
        self.t += self.step;
        while let Some(&(at, len)) = self.gaps.get(self.next) {
            if self.t < at.0 {
                break;
            }
            self.t += len.0;
            self.next += 1;
        }
        self.t
    }
}

/// Converts counter ticks to nanoseconds (fixed point, 32 fractional bits:
/// exact to well under 1 ns per second of span).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Scale {
    ns_per_tick_q32: u64,
}

impl Scale {
    pub const IDENTITY: Scale = Scale {
        ns_per_tick_q32: 1 << 32,
    };
    pub fn from_ratio(ns: u64, ticks: u64) -> Scale {
        Scale {
            ns_per_tick_q32: (((ns as u128) << 32) / ticks.max(1) as u128) as u64,
        }
    }
    #[inline]
    pub fn to_ns(self, ticks: u64) -> Nanos {
        Nanos(((ticks as u128 * self.ns_per_tick_q32 as u128) >> 32) as u64)
    }
    pub fn to_ticks(self, ns: Nanos) -> u64 {
        (((ns.0 as u128) << 32) / self.ns_per_tick_q32.max(1) as u128) as u64
    }
    pub fn ns_per_tick(self) -> f64 {
        self.ns_per_tick_q32 as f64 / (1u64 << 32) as f64
    }
}

/// The x86 time-stamp counter, fenced so the read is not hoisted above
/// the previous iteration's work.
#[cfg(target_arch = "x86_64")]
#[derive(Clone, Copy, Debug, Default)]
pub struct Tsc;

#[cfg(target_arch = "x86_64")]
impl Counter for Tsc {
    #[inline(always)]
    fn read(&mut self) -> u64 {
        // SAFETY: lfence and rdtsc exist on every x86_64 CPU.
        unsafe {
            core::arch::x86_64::_mm_lfence();
            core::arch::x86_64::_rdtsc()
        }
    }
}

/// CLOCK_MONOTONIC_RAW through the vDSO, for CPUs without a usable TSC.
#[derive(Clone, Copy, Debug, Default)]
pub struct RawClock;

impl Counter for RawClock {
    #[inline(always)]
    fn read(&mut self) -> u64 {
        now(ClockId::MonotonicRaw).0
    }
}

/// Whether the TSC ticks at a constant rate through frequency changes and
/// idle states (what makes it a clock and not a cycle counter).
pub fn tsc_usable() -> bool {
    if !cfg!(target_arch = "x86_64") {
        return false;
    }
    let info = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let flags = info
        .lines()
        .find(|l| l.starts_with("flags"))
        .unwrap_or_default();
    let has = |f: &str| flags.split_whitespace().any(|x| x == f);
    has("constant_tsc") && has("nonstop_tsc")
}

/// Calibrates a counter against CLOCK_MONOTONIC_RAW over `span`.
pub fn calibrate<C: Counter>(c: &mut C, span: Nanos) -> Scale {
    let r0 = now(ClockId::MonotonicRaw);
    let t0 = c.read();
    std::thread::sleep(span.to_std());
    let r1 = now(ClockId::MonotonicRaw);
    let t1 = c.read();
    Scale::from_ratio((r1 - r0).0, t1.wrapping_sub(t0))
}

/// Pure accounting of one CPU's gaps.
#[derive(Clone, Debug)]
pub struct GapProcessor {
    cpu: u32,
    threshold: Nanos,
    gaps: Recorder,
    spikes: SpikeLog,
    timeline: Timeline,
    total: Nanos,
    max: Nanos,
    count: u64,
    /// Every gap (start, length), up to a bound, for a tracer that names
    /// the cause of all stolen time and not only of the logged spikes.
    gap_log: Option<(Vec<(Nanos, Nanos)>, usize)>,
    gap_log_dropped: u64,
}

impl GapProcessor {
    pub fn new(cpu: u32, threshold: Nanos, spikes: SpikeLog) -> Self {
        GapProcessor {
            cpu,
            threshold,
            gaps: Recorder::new(Nanos(punctual_record::DEFAULT_BUCKET_NS)),
            spikes,
            timeline: Timeline::new(Nanos::from_secs(1)),
            total: Nanos::ZERO,
            max: Nanos::ZERO,
            count: 0,
            gap_log: None,
            gap_log_dropped: 0,
        }
    }

    /// Also keeps every gap, the first `cap` of them (16 bytes each);
    /// later ones are counted in [`GapProcessor::gap_log_dropped`]. The
    /// log is allocated whole here, before polling starts: a vector
    /// growing inside the loop would copy megabytes in the middle of a
    /// measurement, and the probe would count that copy as stolen time.
    pub fn with_gap_log(mut self, cap: usize) -> Self {
        if cap > 0 {
            self.gap_log = Some((Vec::with_capacity(cap), cap));
        }
        self
    }

    /// The kept gaps (start since the thread's start, length).
    pub fn gap_log(&self) -> &[(Nanos, Nanos)] {
        self.gap_log
            .as_ref()
            .map(|(v, _)| v.as_slice())
            .unwrap_or(&[])
    }

    pub fn gap_log_dropped(&self) -> u64 {
        self.gap_log_dropped
    }

    /// Re-measures the kept gaps' and spikes' start times against the
    /// clock of the run's timeline: `probe_span` is how long the run was
    /// by the counter's calibrated scale, `clock_span` by CLOCK_MONOTONIC
    /// read around the same loop. The 50 ms calibration is good to a few
    /// ppm — microseconds after a second, enough to shift a gap onto the
    /// wrong side of the interrupt a tracer saw end inside it — and
    /// CLOCK_MONOTONIC (the tracer's clock) may run apart from the raw
    /// clock it was calibrated on by NTP's correction. Lengths keep the
    /// calibrated scale (ppm of a length is nothing). Spans further apart
    /// than 0.1% are left alone and false returned: not a clock's error,
    /// the run was disturbed (suspended, or a counter that is no clock).
    pub fn align_positions(&mut self, probe_span: Nanos, clock_span: Nanos) -> bool {
        let (p, c) = (probe_span.0, clock_span.0);
        if p == 0 || c.abs_diff(p) > p / 1000 {
            return false;
        }
        if let Some((v, _)) = &mut self.gap_log {
            for g in v.iter_mut() {
                g.0 = Nanos(crate::spikes::mul_div(g.0 .0, c, p));
            }
        }
        self.spikes.stretch_positions(c, p);
        true
    }

    /// One stolen interval starting `at` (since the run's start).
    ///
    /// The whole step counts as stolen, including the loop's own iteration
    /// inside it: at most one loop cost (tens of ns) per interval, well
    /// under the 1 µs minimum threshold's resolution.
    #[cold]
    pub fn on_gap(&mut self, at: Nanos, len: Nanos) {
        self.gaps.record(len);
        self.timeline.add_interval(at, len);
        self.total += len;
        self.max = self.max.max(len);
        self.count += 1;
        self.spikes.offer(at, self.cpu, len);
        if let Some((v, cap)) = &mut self.gap_log {
            if v.len() < *cap {
                v.push((at, len));
            } else {
                self.gap_log_dropped += 1;
            }
        }
    }

    pub fn threshold(&self) -> Nanos {
        self.threshold
    }
    pub fn total(&self) -> Nanos {
        self.total
    }
    pub fn count(&self) -> u64 {
        self.count
    }
    pub fn max(&self) -> Nanos {
        self.max
    }
    pub fn approx_heap_bytes(&self) -> usize {
        self.gaps.to_series("", Metric::Gap).histogram.buckets.len() * 48
            + self.spikes.len() * 40
            + self.timeline.values_ns.len() * 8
    }
}

/// What the polling loop did besides finding gaps.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LoopStats {
    pub iterations: u64,
    /// Time covered by the loop, minus deliberate pauses.
    pub observed: Nanos,
    /// Smallest step between two reads: the loop's own cost.
    pub min_step: Nanos,
    /// Time the loop slept on purpose (self-throttling), not observed.
    pub paused: Nanos,
    /// The counter's value at the loop's time zero (gap times count from
    /// it), to place them on CLOCK_MONOTONIC (see [`clock_pair`]).
    pub first_read: u64,
    /// The gap over `--stop-at` that ended the loop: (start from the
    /// loop's time zero, length).
    pub stopped: Option<(Nanos, Nanos)>,
}

/// Parameters of [`poll`], in counter ticks where the hot loop needs them.
#[derive(Clone, Copy, Debug)]
pub struct PollParams {
    pub scale: Scale,
    pub threshold: Nanos,
    pub duration: Nanos,
    /// Sleep `.1` every `.0` of polling (used when the kernel's RT throttling
    /// is off, so a SCHED_FIFO busy loop cannot starve the CPU's kernel
    /// threads). The sleeps are excluded from the observed time.
    pub pause: Option<(Nanos, Nanos)>,
}

/// The polling loop. Ends after `duration` of counter time or when `stop`
/// is set (checked every 4096 iterations: a few µs).
pub fn poll<C: Counter>(
    c: &mut C,
    params: &PollParams,
    stop: &AtomicBool,
    proc_: &mut GapProcessor,
    progress_max: Option<&AtomicU64>,
) -> LoopStats {
    poll_halting(c, params, stop, None, proc_, progress_max)
}

/// [`poll`] that also ends at the first gap longer than `halt.1` (setting
/// `halt.0`, so the other CPUs' loops end too), and when `halt.0` is set.
pub fn poll_halting<C: Counter>(
    c: &mut C,
    params: &PollParams,
    stop: &AtomicBool,
    halt: Option<(&AtomicBool, Nanos)>,
    proc_: &mut GapProcessor,
    progress_max: Option<&AtomicU64>,
) -> LoopStats {
    let no_halt = AtomicBool::new(false);
    let (halt, stop_at) = halt.unwrap_or((&no_halt, Nanos::MAX));
    let mut stopped = None;
    let scale = params.scale;
    let thr = scale.to_ticks(params.threshold).max(1);
    let dur = scale.to_ticks(params.duration);
    let (pause_every, pause_len) = match params.pause {
        Some((every, len)) => (scale.to_ticks(every).max(1), len),
        None => (u64::MAX, Nanos::ZERO),
    };
    let start = c.read();
    let end = start.saturating_add(dur);
    let mut next_pause = start.saturating_add(pause_every);
    let mut prev = start;
    let mut min_step = u64::MAX;
    let mut iters: u64 = 0;
    let mut paused_ticks: u64 = 0;
    loop {
        let t = c.read();
        let d = t.wrapping_sub(prev);
        if d > thr {
            let at = scale.to_ns(prev.wrapping_sub(start));
            let len = scale.to_ns(d);
            proc_.on_gap(at, len);
            if let Some(m) = progress_max {
                m.fetch_max(len.0, Ordering::Relaxed);
            }
            if len > stop_at {
                stopped = Some((at, len));
                halt.store(true, Ordering::Relaxed);
                prev = t;
                break;
            }
        } else if d < min_step {
            min_step = d;
        }
        prev = t;
        iters += 1;
        if t >= end {
            break;
        }
        if iters & 0xFFF == 0 {
            if stop.load(Ordering::Relaxed) || halt.load(Ordering::Relaxed) {
                break;
            }
            if t >= next_pause {
                std::thread::sleep(pause_len.to_std());
                let after = c.read();
                paused_ticks += after.wrapping_sub(t);
                prev = after;
                next_pause = after.saturating_add(pause_every);
            }
        }
    }
    let span = prev.wrapping_sub(start);
    LoopStats {
        iterations: iters,
        observed: scale.to_ns(span.saturating_sub(paused_ticks)),
        min_step: if min_step == u64::MAX {
            Nanos::ZERO
        } else {
            scale.to_ns(min_step)
        },
        paused: scale.to_ns(paused_ticks),
        first_read: start,
        stopped,
    }
}

/// A counter reading and CLOCK_MONOTONIC at the same instant: the clock
/// read between two counter reads, their midpoint kept, from the closest
/// of a few tries. A page fault or an interrupt between the reads (the
/// first run of this code may fault its page in, microseconds here) only
/// widens a try, and the narrowest is tens of ns wide.
pub fn clock_pair<C: Counter>(c: &mut C) -> (u64, Nanos) {
    let mut best = (u64::MAX, 0u64, Nanos::ZERO);
    for _ in 0..8 {
        let a = c.read();
        let m = now(ClockId::Monotonic);
        let b = c.read();
        let width = b.wrapping_sub(a);
        if width < best.0 {
            best = (width, a.wrapping_add(width / 2), m);
        }
    }
    (best.1, best.2)
}

/// Automatic threshold: ten times the loop's minimum step, and never below
/// 1 µs (below that, cache and TLB misses of the loop itself would count).
pub fn auto_threshold(min_step: Nanos) -> Nanos {
    (min_step * 10).max(Nanos::from_us(1))
}

/// Measures the loop's minimum step for `span` (warm-up, also faults in the
/// code and stack).
pub fn measure_min_step<C: Counter>(c: &mut C, scale: Scale, span: Nanos) -> Nanos {
    let mut dummy = GapProcessor::new(0, Nanos::MAX, SpikeLog::new(Metric::Gap, Nanos::MAX, 0));
    let params = PollParams {
        scale,
        threshold: Nanos(u64::MAX / 4),
        duration: span,
        pause: None,
    };
    poll(c, &params, &AtomicBool::new(false), &mut dummy, None).min_step
}

#[derive(Clone, Debug)]
pub struct NoiseConfig {
    pub cpus: Vec<u32>,
    pub policy: Policy,
    pub duration: Nanos,
    /// None: automatic.
    pub threshold: Option<Nanos>,
    pub max_spikes: usize,
    pub lock_memory: bool,
    /// Poll at most `.0` at a time, then sleep `.1` (not observed), so the
    /// kernel's RT throttling never stops a SCHED_FIFO loop: its ~50 ms
    /// stops are time no thread using less of the CPU ever loses, and a
    /// record of them charges a forecast's stall term with them
    /// (docs/forecast.md §3.4). None: only the automatic pause
    /// ([`needs_self_pause`]) when throttling is off.
    pub stretch: Option<(Nanos, Nanos)>,
    /// `--stop-at`: end the run on every CPU at the first stolen gap
    /// longer than this (rtla osnoise `-a`), keeping what led to it.
    pub stop_at: Option<Nanos>,
    /// `--samples`: where every stolen gap goes (None: nowhere).
    pub samples: Option<Arc<crate::samples::SampleSink>>,
}

/// Stretches that keep a SCHED_FIFO loop under the default RT throttling
/// budget (950 ms in every 1 s period): 450 ms of polling, 300 ms of rest,
/// so any 1 s holds at most 750 ms of it, with room for other real-time
/// threads. `punctual validate`'s noise phase polls the same way.
pub const UNTHROTTLED_STRETCH: (Nanos, Nanos) = (Nanos(450_000_000), Nanos(300_000_000));

#[derive(Debug)]
pub struct NoiseCpuResult {
    pub cpu: u32,
    /// This thread's polling start minus the run's time zero.
    pub offset: Nanos,
    /// Kernel thread id of the polling thread, so a tracer can tell it
    /// from what stole its time.
    pub tid: i32,
    pub stats: LoopStats,
    pub threshold: Nanos,
    pub proc_: GapProcessor,
}

#[derive(Debug)]
pub struct NoiseOutcome {
    pub per_cpu: Vec<NoiseCpuResult>,
    /// CLOCK_MONOTONIC at the run's time zero.
    pub origin: Nanos,
    pub warnings: Vec<Warning>,
    pub elapsed: Nanos,
    pub interrupted: bool,
    pub realtime: bool,
    /// `tsc` or `clock_monotonic_raw`.
    pub counter: &'static str,
    pub ns_per_tick: f64,
    pub kernel: Vec<(u32, punctual_record::KernelView)>,
    /// Self-throttling pause (every, length) when RT throttling was off,
    /// or the configured stretch.
    pub pause: Option<(Nanos, Nanos)>,
    /// The loop polled in configured stretches ([`NoiseConfig::stretch`]):
    /// the kernel's accounting, read over the whole run, is prorated to
    /// the polled time when the record is filled.
    pub stretched: bool,
    /// `--stop-at` of the run (the event is in each result's
    /// `stats.stopped`).
    pub stop_at: Option<Nanos>,
}

/// Reads `/proc/sys/kernel/sched_rt_runtime_us` (−1: RT throttling off).
pub fn rt_runtime_us() -> Option<i64> {
    std::fs::read_to_string("/proc/sys/kernel/sched_rt_runtime_us")
        .ok()
        .and_then(|s| s.trim().parse().ok())
}

/// Whether a busy loop at `policy` needs to pause by itself: only real-time
/// policies can starve the CPU, and only when the kernel's RT throttling
/// (which normally leaves 5% to everything else) is off.
pub fn needs_self_pause(policy: Policy, rt_runtime: Option<i64>) -> Option<(Nanos, Nanos)> {
    let rt = !matches!(policy, Policy::Other { .. });
    if rt && rt_runtime == Some(-1) {
        Some((Nanos::from_ms(100), Nanos::from_ms(1)))
    } else {
        None
    }
}

fn run_generic<C, F>(
    cfg: &NoiseConfig,
    setup: Arc<dyn ThreadSetup>,
    make: F,
    scale: Scale,
    stop: Arc<AtomicBool>,
    progress: Arc<Progress>,
    (pause, gap_log): (Option<(Nanos, Nanos)>, usize),
) -> (Vec<NoiseCpuResult>, Vec<Warning>, bool, Nanos)
where
    C: Counter,
    F: Fn() -> C + Send + Sync + 'static,
{
    let warnings = Arc::new(WarningSink::default());
    let locked = cfg.lock_memory && lock_memory_or_warn(setup.as_ref(), MemoryLock::All, &warnings);
    let make = Arc::new(make);
    let origin = now(ClockId::Monotonic);
    let halt = Arc::new(AtomicBool::new(false));
    let mut handles = Vec::new();
    for (idx, &cpu) in cfg.cpus.iter().enumerate() {
        let halt = Arc::clone(&halt);
        let (setup, w2, stop, progress, cfg2, make) = (
            Arc::clone(&setup),
            Arc::clone(&warnings),
            Arc::clone(&stop),
            Arc::clone(&progress),
            cfg.clone(),
            Arc::clone(&make),
        );
        let h = std::thread::Builder::new()
            .name(format!("punctual-n{cpu}"))
            .stack_size(crate::rt::RUN_THREAD_STACK_BYTES)
            .spawn(move || {
                let (guard, rt_ok) = prepare_thread(setup.as_ref(), cpu, cfg2.policy, &w2);
                let mut c = make();
                let min_step = measure_min_step(&mut c, scale, Nanos::from_ms(20));
                let threshold = cfg2.threshold.unwrap_or_else(|| auto_threshold(min_step));
                let mut p = GapProcessor::new(
                    cpu,
                    threshold,
                    SpikeLog::new(Metric::Gap, threshold, cfg2.max_spikes),
                )
                .with_gap_log(
                    gap_log.max(
                        cfg2.samples
                            .as_ref()
                            .map_or(0, |s| s.share(cfg2.cpus.len())),
                    ),
                );
                let params = PollParams {
                    scale,
                    threshold,
                    duration: cfg2.duration,
                    pause,
                };
                // Gap times count from the loop's first counter read: the
                // counter-clock pairs around the loop place that on the
                // run's (and a tracer's) timeline, and measure the loop's
                // span on the clock, to correct the times' scale.
                let before = clock_pair(&mut c);
                let mut stats = poll_halting(
                    &mut c,
                    &params,
                    &stop,
                    cfg2.stop_at.map(|t| (&*halt, t)),
                    &mut p,
                    progress.max_ns.get(idx),
                );
                let after = clock_pair(&mut c);
                let zero = before.1 + scale.to_ns(stats.first_read.saturating_sub(before.0));
                let offset = zero.saturating_sub(origin);
                p.align_positions(
                    scale.to_ns(after.0.saturating_sub(before.0)),
                    after.1.saturating_sub(before.1),
                );
                stats.min_step = stats.min_step.min(min_step).max(Nanos(1));
                if let Some(sink) = &cfg2.samples {
                    let kept: Vec<crate::samples::Sample> = p
                        .gap_log()
                        .iter()
                        .take(sink.share(cfg2.cpus.len()))
                        .map(|&(at, len)| crate::samples::Sample {
                            at: at + offset,
                            value: len,
                            cpu,
                        })
                        .collect();
                    let over = (p.gap_log().len() - kept.len()) as u64 + p.gap_log_dropped();
                    sink.add(&kept, over);
                }
                drop(guard);
                (
                    NoiseCpuResult {
                        cpu,
                        offset,
                        tid: crate::rt::gettid(),
                        stats,
                        threshold,
                        proc_: p,
                    },
                    rt_ok,
                )
            });
        match h {
            Ok(h) => handles.push((cpu, h)),
            Err(e) => warnings.push(Warning::Other {
                message: format!("CPU {cpu}: cannot start the polling thread: {e}"),
            }),
        }
    }
    let mut out = Vec::new();
    let mut realtime = true;
    for (cpu, h) in handles {
        match h.join() {
            Ok((r, ok)) => {
                realtime &= ok;
                out.push(r);
            }
            Err(_) => warnings.push(Warning::Other {
                message: format!("CPU {cpu}: the polling thread panicked; its data is lost"),
            }),
        }
    }
    if locked {
        setup.unlock_memory();
    }
    (out, warnings.take(), realtime, origin)
}

/// Runs the noise probe with a caller-supplied counter (tests: a scripted
/// counter with `Scale::IDENTITY`).
pub fn run_with<C, F>(
    cfg: &NoiseConfig,
    setup: Arc<dyn ThreadSetup>,
    make: F,
    scale: Scale,
    stop: Arc<AtomicBool>,
    progress: Arc<Progress>,
) -> NoiseOutcome
where
    C: Counter,
    F: Fn() -> C + Send + Sync + 'static,
{
    let (per_cpu, warnings, realtime, origin) = run_generic(
        cfg,
        setup,
        make,
        scale,
        Arc::clone(&stop),
        progress,
        (cfg.stretch, 0),
    );
    let elapsed = per_cpu
        .iter()
        .map(|r| r.stats.observed + r.stats.paused)
        .max()
        .unwrap_or_default();
    NoiseOutcome {
        per_cpu,
        origin,
        warnings,
        elapsed,
        interrupted: stop.load(Ordering::Relaxed),
        realtime,
        counter: "replay",
        ns_per_tick: scale.ns_per_tick(),
        kernel: Vec::new(),
        pause: cfg.stretch,
        stretched: cfg.stretch.is_some(),
        stop_at: cfg.stop_at,
    }
}

/// Runs the real probe: TSC where usable, else CLOCK_MONOTONIC_RAW, with
/// the kernel's own accounting read before and after.
pub fn run(cfg: &NoiseConfig, stop: Arc<AtomicBool>, progress: Arc<Progress>) -> NoiseOutcome {
    run_logging_gaps(cfg, 0, stop, progress)
}

/// [`run`], keeping up to `gap_log` gaps per CPU in each result's
/// [`GapProcessor::gap_log`] (`punctual cause` names the cause of each).
pub fn run_logging_gaps(
    cfg: &NoiseConfig,
    gap_log: usize,
    stop: Arc<AtomicBool>,
    progress: Arc<Progress>,
) -> NoiseOutcome {
    let setup: Arc<dyn ThreadSetup> = Arc::new(crate::setup::RealSetup);
    let pause = cfg
        .stretch
        .or_else(|| needs_self_pause(cfg.policy, rt_runtime_us()));
    let before = crate::procstat::KernelSnapshot::read();
    let t0 = now(ClockId::Monotonic);
    #[cfg(target_arch = "x86_64")]
    let use_tsc = tsc_usable();
    #[cfg(not(target_arch = "x86_64"))]
    let use_tsc = false;
    let (per_cpu, mut warnings, realtime, origin, counter, scale) = if use_tsc {
        #[cfg(target_arch = "x86_64")]
        {
            let scale = calibrate(&mut Tsc, Nanos::from_ms(50));
            let (a, b, c, o) = run_generic(
                cfg,
                Arc::clone(&setup),
                || Tsc,
                scale,
                Arc::clone(&stop),
                progress,
                (pause, gap_log),
            );
            (a, b, c, o, "tsc", scale)
        }
        #[cfg(not(target_arch = "x86_64"))]
        unreachable!()
    } else {
        let scale = Scale::IDENTITY;
        let (a, b, c, o) = run_generic(
            cfg,
            setup,
            || RawClock,
            scale,
            Arc::clone(&stop),
            progress,
            (pause, gap_log),
        );
        (a, b, c, o, "clock_monotonic_raw", scale)
    };
    let elapsed = now(ClockId::Monotonic) - t0;
    let after = crate::procstat::KernelSnapshot::read();
    let kernel = match (before, after) {
        (Ok(b), Ok(a)) => cfg
            .cpus
            .iter()
            .map(|&c| (c, crate::procstat::KernelSnapshot::delta(&b, &a, c)))
            .collect(),
        (Err(e), _) | (_, Err(e)) => {
            warnings.push(Warning::Other {
                message: format!("the kernel's own accounting could not be read ({e}); only the measured view is shown"),
            });
            Vec::new()
        }
    };
    NoiseOutcome {
        per_cpu,
        origin,
        warnings,
        elapsed,
        interrupted: stop.load(Ordering::Relaxed),
        realtime,
        counter,
        ns_per_tick: scale.ns_per_tick(),
        kernel,
        pause,
        stretched: cfg.stretch.is_some(),
        stop_at: cfg.stop_at,
    }
}

impl NoiseOutcome {
    /// Adds this run's stolen entries, gap series, spikes and warnings to a
    /// record.
    pub fn fill(self, rec: &mut punctual_record::Record, max_spikes: usize) {
        let first = crate::timer::first_event(self.per_cpu.iter().map(|r| {
            let e = r
                .stats
                .stopped
                .map(|(at, len)| crate::timer::ThresholdEvent {
                    cpu: r.cpu,
                    value: len,
                    at,
                });
            (e, r.offset)
        }));
        if let (Some(e), Some(t)) = (first, self.stop_at) {
            rec.extra
                .insert("stopped_at".into(), e.to_json(t, self.origin));
        }
        let mut logs = Vec::new();
        let mut loop_info = serde_json::Map::new();
        for r in self.per_cpu {
            let p = r.proc_;
            let mut s = p.gaps.to_series(&format!("cpu{}.gap", r.cpu), Metric::Gap);
            s.cpu = Some(r.cpu);
            rec.series.push(s);
            let observed = r.stats.observed;
            let fraction = if observed.is_zero() {
                0.0
            } else {
                p.total.0 as f64 / observed.0 as f64
            };
            let kv = self.kernel.iter().find(|(c, _)| *c == r.cpu).map(|(_, k)| {
                let mut k = k.clone();
                if self.stretched {
                    // /proc/stat was read before and after the whole
                    // run, rests included: its share of the polled time.
                    let all = (observed + r.stats.paused).0.max(1) as f64;
                    let f = observed.0 as f64 / all;
                    for v in [&mut k.irq_ns, &mut k.softirq_ns, &mut k.steal_ns] {
                        *v = Nanos((v.0 as f64 * f).round() as u64);
                    }
                }
                k
            });
            let by_source = kv
                .as_ref()
                .map(|k| kernel_shares(k, p.total))
                .unwrap_or_default();
            if let Some(k) = &kv {
                if !observed.is_zero() && k.steal_ns.0 * 1000 >= observed.0 {
                    rec.warnings.push(Warning::StealObserved {
                        cpu: Some(r.cpu),
                        steal_fraction: k.steal_ns.0 as f64 / observed.0 as f64,
                    });
                }
            }
            rec.stolen.push(Stolen {
                cpu: r.cpu,
                task: None,
                observed_ns: observed,
                total_ns: p.total,
                fraction,
                intervals: p.count,
                max_ns: p.max,
                threshold_ns: r.threshold,
                loop_cost_ns: Some(r.stats.min_step),
                timeline: p.timeline,
                by_source,
                kernel_view: kv,
            });
            let mean_step = observed
                .0
                .saturating_sub(p.total.0)
                .checked_div(r.stats.iterations)
                .unwrap_or(0);
            loop_info.insert(
                format!("cpu{}", r.cpu),
                serde_json::json!({
                    "iterations": r.stats.iterations,
                    "min_step_ns": r.stats.min_step.0,
                    "mean_step_ns": mean_step,
                    "paused_ns": r.stats.paused.0,
                }),
            );
            logs.push(p.spikes.shifted(r.offset));
        }
        let mut info = serde_json::json!({
            "counter": self.counter,
            "ns_per_tick": self.ns_per_tick,
            "self_pause": self.pause.map(|(e, l)| serde_json::json!({"every_ns": e.0, "sleep_ns": l.0})),
            "cpus": loop_info,
        });
        if self.stretched {
            // Present only then, so records of unstretched runs keep
            // their bytes. `punctual forecast` reads it: such a record's
            // gaps hold no RT-throttling stops.
            info["stretched"] = serde_json::json!(true);
        }
        rec.extra.insert("noise_loop".into(), info);
        let (spikes, dropped) = SpikeLog::merge_all(logs, max_spikes);
        rec.spikes.extend(spikes);
        rec.spikes.sort_by_key(|s| (s.at_ns, s.cpu));
        rec.spikes_dropped += dropped;
        rec.interrupted |= self.interrupted;
        if rec.started_mono_ns.is_none() {
            rec.started_mono_ns = Some(self.origin);
        }
        for w in self.warnings {
            if !rec.warnings.contains(&w) {
                rec.warnings.push(w);
            }
        }
    }
}

/// The kernel's accounting as `by_source` entries of kind `kernel`, their
/// share taken against the measured stolen total (capped at 1: the kernel
/// may charge time the loop never saw as a gap, e.g. ticks shorter than the
/// threshold).
pub fn kernel_shares(
    k: &punctual_record::KernelView,
    stolen: Nanos,
) -> Vec<punctual_record::SourceShare> {
    let share = |x: Nanos| {
        if stolen.is_zero() {
            0.0
        } else {
            (x.0 as f64 / stolen.0 as f64).min(1.0)
        }
    };
    let irq_count: u64 = k.interrupts.values().sum();
    [
        ("irq", k.irq_ns, irq_count),
        ("softirq", k.softirq_ns, 0),
        ("steal", k.steal_ns, 0),
    ]
    .into_iter()
    .map(|(name, ns, count)| punctual_record::SourceShare {
        kind: "kernel".into(),
        name: name.into(),
        count,
        total_ns: ns,
        max_ns: Nanos::ZERO,
        share: share(ns),
    })
    .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A counter that advances by `step` per read, with scripted extra
    /// jumps (gaps) at given read indices.
    struct Scripted {
        t: u64,
        i: u64,
        step: u64,
        gaps: Vec<(u64, u64)>,
    }
    impl Counter for Scripted {
        fn read(&mut self) -> u64 {
            self.i += 1;
            self.t += self.step;
            if let Some(&(_, g)) = self.gaps.iter().find(|(at, _)| *at == self.i) {
                self.t += g;
            }
            self.t
        }
    }

    #[test]
    fn replayed_gaps_are_the_stolen_intervals() {
        let gaps = vec![(Nanos(30_000), Nanos(5_000)), (Nanos(10_000), Nanos(2_000))];
        let mut c = Replay::new(Nanos(20), gaps);
        let mut p = GapProcessor::new(0, Nanos(1000), SpikeLog::new(Metric::Gap, Nanos(1000), 10));
        let st = poll(
            &mut c,
            &params(Nanos(100_000)),
            &AtomicBool::new(false),
            &mut p,
            None,
        );
        assert_eq!(p.count(), 2);
        assert_eq!(p.total(), Nanos(20 + 2_000 + 20 + 5_000));
        assert_eq!(p.max(), Nanos(5_020));
        assert_eq!(st.min_step, Nanos(20));
    }

    fn params(duration: Nanos) -> PollParams {
        PollParams {
            scale: Scale::IDENTITY,
            threshold: Nanos(1000),
            duration,
            pause: None,
        }
    }

    #[test]
    fn gaps_above_threshold_are_stolen_intervals() {
        let mut c = Scripted {
            t: 0,
            i: 0,
            step: 20,
            gaps: vec![(100, 5_000), (200, 980), (50_000, 2_000_000)],
        };
        let mut p = GapProcessor::new(3, Nanos(1000), SpikeLog::new(Metric::Gap, Nanos(1000), 10));
        let s = poll(
            &mut c,
            &params(Nanos::from_secs(1)),
            &AtomicBool::new(false),
            &mut p,
            None,
        );
        assert_eq!(p.count(), 2);
        assert_eq!(p.total(), Nanos(5_020 + 2_000_020));
        assert_eq!(p.max(), Nanos(2_000_020));
        assert_eq!(s.min_step, Nanos(20));
        assert!(s.observed >= Nanos::from_secs(1));
        assert!(s.observed < Nanos::from_secs(1) + Nanos(100));
        let frac = p.total().0 as f64 / s.observed.0 as f64;
        assert!((frac - 0.002005).abs() < 0.00001, "{frac}");
    }

    #[test]
    fn gap_log_keeps_every_gap_up_to_its_bound() {
        let mut c = Scripted {
            t: 0,
            i: 0,
            step: 20,
            gaps: vec![(100, 5_000), (200, 3_000), (300, 4_000)],
        };
        let mut p = GapProcessor::new(0, Nanos(1000), SpikeLog::new(Metric::Gap, Nanos(1000), 1))
            .with_gap_log(2);
        poll(
            &mut c,
            &params(Nanos::from_ms(1)),
            &AtomicBool::new(false),
            &mut p,
            None,
        );
        // The spike log keeps one; the gap log the first two, in order.
        let log = p.gap_log();
        assert_eq!(log.len(), 2);
        assert_eq!(log[0], (Nanos(20 * 98), Nanos(5_020)));
        assert_eq!(log[1].1, Nanos(3_020));
        assert_eq!(p.gap_log_dropped(), 1);
        assert_eq!(p.count(), 3);
    }

    /// A run the calibrated scale measured as 1 s and CLOCK_MONOTONIC as
    /// 1 s + 5 µs (5 ppm): positions move with the clock, lengths stay;
    /// 0.1% apart is no clock error and is left alone.
    #[test]
    fn positions_follow_the_runs_clock() {
        let mut p = GapProcessor::new(0, Nanos(1000), SpikeLog::new(Metric::Gap, Nanos(1000), 4))
            .with_gap_log(4);
        p.on_gap(Nanos::from_ms(800), Nanos(5_000));
        p.on_gap(Nanos::from_ms(1000), Nanos(7_000));
        assert!(!p.align_positions(Nanos::from_secs(1), Nanos::from_ms(1002)));
        assert_eq!(p.gap_log()[1].0, Nanos::from_ms(1000));
        assert!(p.align_positions(Nanos::from_secs(1), Nanos(1_000_005_000)));
        assert_eq!(
            p.gap_log(),
            &[
                (Nanos(800_004_000), Nanos(5_000)),
                (Nanos(1_000_005_000), Nanos(7_000))
            ]
        );
        let spikes = p.spikes.clone().into_spikes();
        assert_eq!(spikes[0].at_ns, Nanos(800_004_000));
        assert_eq!(spikes[1].value_ns, Nanos(7_000));
    }

    #[test]
    fn scale_round_trips() {
        let s = Scale::from_ratio(1_000_000_000, 2_900_000_000);
        assert_eq!(s.to_ns(2_900_000_000), Nanos(999_999_999));
        let ticks = s.to_ticks(Nanos::from_us(1));
        assert!((2899..=2901).contains(&ticks), "{ticks}");
    }

    #[test]
    fn auto_threshold_has_a_floor() {
        assert_eq!(auto_threshold(Nanos(20)), Nanos(1000));
        assert_eq!(auto_threshold(Nanos(300)), Nanos(3000));
    }

    #[test]
    fn self_pause_only_without_throttling() {
        let fifo = Policy::Fifo { priority: 95 };
        assert!(needs_self_pause(fifo, Some(950_000)).is_none());
        assert!(needs_self_pause(fifo, Some(-1)).is_some());
        assert!(needs_self_pause(Policy::Other { nice: 0 }, Some(-1)).is_none());
    }

    #[test]
    fn pauses_are_not_observed_time() {
        let mut c = RawClock;
        let mut p = GapProcessor::new(0, Nanos(1000), SpikeLog::new(Metric::Gap, Nanos(1000), 10));
        let params = PollParams {
            scale: Scale::IDENTITY,
            threshold: Nanos::from_us(500),
            duration: Nanos::from_ms(60),
            // Pause at every check (each 4096 iterations, ~100 us), so the
            // test does not depend on how much CPU a loaded machine gives it.
            pause: Some((Nanos(1), Nanos::from_ms(1))),
        };
        let s = poll(&mut c, &params, &AtomicBool::new(false), &mut p, None);
        assert!(s.paused >= Nanos::from_ms(1), "{s:?}");
        assert!(s.observed + s.paused >= Nanos::from_ms(60), "{s:?}");
    }

    /// A run in stretches says so in the record (what `forecast` reads to
    /// trust its gaps) and prorates the kernel's accounting, read over the
    /// whole run, rests included, to the polled time; a run without one
    /// keeps its record as it was.
    #[test]
    fn stretched_runs_are_marked_and_prorate_the_kernel_view() {
        for stretched in [false, true] {
            let cfg = NoiseConfig {
                cpus: vec![0],
                policy: Policy::Fifo { priority: 95 },
                duration: Nanos::from_ms(10),
                threshold: Some(Nanos(1000)),
                max_spikes: 10,
                lock_memory: false,
                // Never reached in 10 ms of virtual time: no real sleep.
                stretch: stretched.then_some((Nanos::from_secs(3600), Nanos(1))),
                stop_at: None,
                samples: None,
            };
            let mut out = run_with(
                &cfg,
                Arc::new(crate::setup::Unprivileged),
                Periodic::standard,
                Scale::IDENTITY,
                Arc::new(AtomicBool::new(false)),
                Progress::new(1),
            );
            assert_eq!(out.stretched, stretched);
            // As if the loop had rested as long as it polled.
            let observed = out.per_cpu[0].stats.observed;
            out.per_cpu[0].stats.paused = observed;
            out.kernel = vec![(
                0,
                punctual_record::KernelView {
                    irq_ns: Nanos(1000),
                    softirq_ns: Nanos(2000),
                    steal_ns: Nanos(4000),
                    interrupts: Default::default(),
                },
            )];
            let mut rec = punctual_record::Record::new(
                punctual_record::Source::Measured,
                "noise",
                Default::default(),
            );
            out.fill(&mut rec, 10);
            let k = rec.stolen[0].kernel_view.as_ref().unwrap();
            let mark = rec.extra["noise_loop"].get("stretched");
            if stretched {
                assert_eq!(
                    (k.irq_ns, k.softirq_ns, k.steal_ns),
                    (Nanos(500), Nanos(1000), Nanos(2000))
                );
                assert_eq!(mark, Some(&serde_json::json!(true)));
            } else {
                assert_eq!(
                    (k.irq_ns, k.softirq_ns, k.steal_ns),
                    (Nanos(1000), Nanos(2000), Nanos(4000))
                );
                assert!(mark.is_none());
            }
        }
    }

    /// A counter of fixed step with a gap every `every` reads and a
    /// bigger one every `big_every` reads.
    struct Periodic {
        t: u64,
        i: u64,
        step: u64,
        every: u64,
        gap: u64,
        big_every: u64,
        big_gap: u64,
    }
    impl Periodic {
        /// 25 ns a read, a 1.5 us gap every 1000 reads and a 30 us one
        /// every 100 000.
        fn standard() -> Periodic {
            Periodic {
                t: 0,
                i: 0,
                step: 25,
                every: 1000,
                gap: 1_500,
                big_every: 100_000,
                big_gap: 30_000,
            }
        }
    }
    impl Counter for Periodic {
        fn read(&mut self) -> u64 {
            self.i += 1;
            self.t += self.step;
            if self.i.is_multiple_of(self.big_every) {
                self.t += self.big_gap;
            } else if self.i.is_multiple_of(self.every) {
                self.t += self.gap;
            }
            self.t
        }
    }

    #[test]
    fn replayed_pipeline_fills_a_record_and_stays_bounded() {
        let cfg = NoiseConfig {
            cpus: vec![0, 1],
            policy: Policy::Fifo { priority: 95 },
            duration: Nanos::from_secs(2),
            threshold: Some(Nanos(1000)),
            max_spikes: 100,
            lock_memory: false,
            stretch: None,
            stop_at: None,
            samples: None,
        };
        // Two seconds of virtual time, 80 million reads per CPU: a 1.5 us
        // gap every 1000 reads and a 30 us one every 100 000.
        let out = run_with(
            &cfg,
            Arc::new(crate::setup::Unprivileged),
            Periodic::standard,
            Scale::IDENTITY,
            Arc::new(AtomicBool::new(false)),
            Progress::new(2),
        );
        assert!(!out.realtime);
        assert!(out
            .warnings
            .iter()
            .any(|w| matches!(w, Warning::NoRealtimePolicy { .. })));
        let r = &out.per_cpu[0];
        let n = r.proc_.count();
        assert!((74_000..77_000).contains(&n), "{n}");
        assert!(r.proc_.approx_heap_bytes() < 64 * 1024);
        let mut rec = punctual_record::Record::new(
            punctual_record::Source::Measured,
            "noise",
            Default::default(),
        );
        out.fill(&mut rec, 100);
        assert_eq!(rec.stolen.len(), 2);
        let s = &rec.stolen[0];
        assert_eq!(s.intervals, n);
        assert_eq!(s.max_ns, Nanos(30_025));
        assert_eq!(s.loop_cost_ns, Some(Nanos(25)));
        let expect = (1500.0 * 99.0 + 30_000.0 + 100.0 * 25.0)
            / (100_000.0 * 25.0 + 1500.0 * 99.0 + 30_000.0);
        assert!(
            (s.fraction - expect).abs() < 0.002,
            "{} vs {expect}",
            s.fraction
        );
        assert!((2..=3).contains(&s.timeline.values_ns.len()));
        assert_eq!(rec.spikes.len(), 100);
        assert!(rec.spikes.iter().all(|x| x.value_ns == Nanos(30_025)));
        assert_eq!(rec.spikes_dropped, 2 * n - 100);
        assert!(rec.series_named("cpu1.gap").is_some());
    }
}
