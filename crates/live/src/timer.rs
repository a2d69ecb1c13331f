//! The timer probe: thread wake-up latency, the cyclictest / Jones & Regehr's NT study
//! measurement, with missed periods counted instead of hidden.
//!
//! Split in two so the whole pipeline runs in tests without root:
//! [`TimerProcessor`] turns (expected, actual) wake-up pairs into the
//! latency and interval histograms, the missed-period count and the spike
//! log, and knows nothing of the OS; a [`WakeSource`] produces the pairs,
//! from `clock_nanosleep`, a `timerfd`, or a replayed feed.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use punctual_record::{Metric, Record, Recorder, Warning, WindowRecorder};
use punctual_units::Nanos;

use crate::clock::{mono, sleep_until};
use crate::rt::Policy;
use crate::setup::{lock_memory_or_warn, prepare_thread, MemoryLock, ThreadSetup, WarningSink};
use crate::spikes::SpikeLog;

/// Pure per-CPU processing of wake-ups.
///
/// Missed periods: a wake-up `k` whole intervals late means the `k` periods
/// after the one it served had no wake-up of their own. They are counted
/// into `missed`, and the schedule is re-anchored on the original grid at
/// the first period boundary after the wake-up, as a real periodic task
/// that drops overrun releases would be: no burst of catch-up wake-ups
/// (which would record fake near-zero intervals), and no phase drift.
#[derive(Clone, Debug)]
pub struct TimerProcessor {
    cpu: u32,
    interval: Nanos,
    start: Nanos,
    latency: Recorder,
    /// The latencies again by window of the run, for `compare`'s
    /// resampling of whole stretches.
    windows: WindowRecorder,
    between: Recorder,
    spikes: SpikeLog,
    prev_actual: Option<Nanos>,
}

/// Span of a latency window to begin with: long enough to hold a stall
/// from outside the probe (tens of ms) whole, short enough that an 11 s
/// run has about a hundred windows to resample.
pub const WINDOW: Nanos = Nanos::from_ms(100);

impl TimerProcessor {
    /// `start` is the run's time origin (spike times are relative to it).
    pub fn new(cpu: u32, interval: Nanos, start: Nanos, spikes: SpikeLog) -> Self {
        let bucket = Nanos(punctual_record::DEFAULT_BUCKET_NS);
        TimerProcessor {
            cpu,
            interval,
            start,
            latency: Recorder::new(bucket).with_sample_period(interval),
            windows: WindowRecorder::new(WINDOW.0 / interval.0.max(1)),
            between: Recorder::new(bucket).with_sample_period(interval),
            spikes,
            prev_actual: None,
        }
    }

    /// Accounts one wake-up that was due at `expected` and happened at
    /// `actual`; returns when the next one is due.
    #[inline]
    pub fn on_wakeup(&mut self, expected: Nanos, actual: Nanos) -> Nanos {
        // A timer never fires early; a clock read before the expiry (a
        // replayed feed, a coarse clock) is counted as zero latency.
        let lat = actual.saturating_sub(expected);
        self.latency.record(lat);
        self.windows.record(lat);
        if let Some(p) = self.prev_actual {
            self.between.record(actual.saturating_sub(p));
        }
        self.prev_actual = Some(actual);
        let k = lat.0 / self.interval.0;
        if k > 0 {
            self.latency.add_missed(k);
        }
        self.spikes
            .offer(actual.saturating_sub(self.start), self.cpu, lat);
        expected + self.interval * (k + 1)
    }

    pub fn wakeups(&self) -> u64 {
        self.latency.count()
    }
    pub fn missed(&self) -> u64 {
        self.latency.missed()
    }
    pub fn max_latency(&self) -> Nanos {
        self.latency.max()
    }
    pub fn latency(&self) -> &Recorder {
        &self.latency
    }
    pub fn interval_recorder(&self) -> &Recorder {
        &self.between
    }
    pub fn spikes(&self) -> &SpikeLog {
        &self.spikes
    }

    /// Bytes held by this processor's growable state: what the memory-bound
    /// test watches.
    pub fn approx_heap_bytes(&self) -> usize {
        let buckets = self
            .latency
            .to_series("", Metric::Latency)
            .histogram
            .buckets
            .len()
            + self
                .between
                .to_series("", Metric::Interval)
                .histogram
                .buckets
                .len();
        buckets * 48 + self.spikes.len() * 40
    }

    pub fn into_result(self) -> TimerCpuResult {
        TimerCpuResult {
            cpu: self.cpu,
            start: self.start,
            offset: Nanos::ZERO,
            tid: 0,
            latency: self.latency,
            windows: self.windows,
            interval: self.between,
            spikes: self.spikes,
            stopped: None,
        }
    }
}

/// What produces wake-ups: the kernel, or a replayed feed.
pub trait WakeSource: Send {
    /// Current CLOCK_MONOTONIC time (or the feed's virtual time).
    fn now(&mut self) -> Nanos;
    /// Blocks until `t` and returns when the thread really ran; `None` ends
    /// the run (a replayed feed ran out, or the timer failed).
    fn wait_until(&mut self, t: Nanos) -> Option<Nanos>;
}

/// Absolute `clock_nanosleep` on CLOCK_MONOTONIC (cyclictest's default).
#[derive(Debug, Default)]
pub struct Nanosleep;

impl WakeSource for Nanosleep {
    fn now(&mut self) -> Nanos {
        mono()
    }
    #[inline]
    fn wait_until(&mut self, t: Nanos) -> Option<Nanos> {
        sleep_until(t);
        Some(mono())
    }
}

/// A one-shot absolute `timerfd` re-armed every period (the event-loop way
/// of waiting, which goes through the fd's wait queue).
#[derive(Debug)]
pub struct Timerfd {
    fd: i32,
}

impl Timerfd {
    pub fn new() -> std::io::Result<Timerfd> {
        // SAFETY: plain syscall with constant arguments.
        let fd = unsafe { libc::timerfd_create(libc::CLOCK_MONOTONIC, libc::TFD_CLOEXEC) };
        if fd < 0 {
            Err(std::io::Error::last_os_error())
        } else {
            Ok(Timerfd { fd })
        }
    }
}

impl Drop for Timerfd {
    fn drop(&mut self) {
        // SAFETY: fd is ours and closed once.
        unsafe { libc::close(self.fd) };
    }
}

impl WakeSource for Timerfd {
    fn now(&mut self) -> Nanos {
        mono()
    }
    fn wait_until(&mut self, t: Nanos) -> Option<Nanos> {
        let spec = libc::itimerspec {
            it_interval: libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            },
            it_value: libc::timespec {
                tv_sec: (t.0 / 1_000_000_000) as libc::time_t,
                tv_nsec: (t.0 % 1_000_000_000) as libc::c_long,
            },
        };
        // SAFETY: spec is valid; old value not requested.
        let r = unsafe {
            libc::timerfd_settime(
                self.fd,
                libc::TFD_TIMER_ABSTIME,
                &spec,
                std::ptr::null_mut(),
            )
        };
        if r != 0 {
            return None;
        }
        let mut buf = [0u8; 8];
        loop {
            // SAFETY: buf is 8 writable bytes, as timerfd reads require.
            let n = unsafe { libc::read(self.fd, buf.as_mut_ptr().cast(), 8) };
            if n == 8 {
                return Some(mono());
            }
            if n < 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::EINTR) {
                continue;
            }
            return None;
        }
    }
}

/// A replayed feed: wake-up `i` happens `latencies[i]` after it was due,
/// on a virtual clock. Lets the whole probe run in tests with exact,
/// known input (including wake-ups several periods late).
#[derive(Debug)]
pub struct Replay<I: Iterator<Item = Nanos> + Send> {
    latencies: I,
    clock: Nanos,
}

impl<I: Iterator<Item = Nanos> + Send> Replay<I> {
    pub fn new(start: Nanos, latencies: I) -> Self {
        Replay {
            latencies,
            clock: start,
        }
    }
}

impl<I: Iterator<Item = Nanos> + Send> WakeSource for Replay<I> {
    fn now(&mut self) -> Nanos {
        self.clock
    }
    fn wait_until(&mut self, t: Nanos) -> Option<Nanos> {
        let l = self.latencies.next()?;
        self.clock = self.clock.max(t + l);
        Some(self.clock)
    }
}

/// Which kernel interface the real probe waits with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimerClock {
    Nanosleep,
    Timerfd,
}

impl TimerClock {
    pub fn name(self) -> &'static str {
        match self {
            TimerClock::Nanosleep => "nanosleep",
            TimerClock::Timerfd => "timerfd",
        }
    }
}

#[derive(Clone, Debug)]
pub struct TimerConfig {
    pub cpus: Vec<u32>,
    pub policy: Policy,
    pub interval: Nanos,
    pub duration: Nanos,
    pub clock: TimerClock,
    /// Spike log threshold (zero: keep the largest).
    pub threshold: Nanos,
    pub max_spikes: usize,
    pub lock_memory: bool,
    /// `--stop-at`: end the run on every CPU at the first wake-up later
    /// than this (cyclictest `-b`, rtla `-a`), keeping what led to it.
    pub stop_at: Option<Nanos>,
    /// `--samples`: where every wake-up's latency goes (None: nowhere).
    pub samples: Option<Arc<crate::samples::SampleSink>>,
}

/// The sample that ended a run over its `--stop-at` threshold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ThresholdEvent {
    pub cpu: u32,
    /// The wake-up latency (timer) or stolen gap (noise).
    pub value: Nanos,
    /// When it happened: on the thread's own time zero in a per-CPU
    /// result, on the run's in an outcome.
    pub at: Nanos,
}

impl ThresholdEvent {
    /// The record's `extra["stopped_at"]`: the event, the threshold and
    /// the CLOCK_MONOTONIC time of the event (to find it in a trace).
    pub fn to_json(&self, threshold: Nanos, origin: Nanos) -> serde_json::Value {
        serde_json::json!({
            "cpu": self.cpu,
            "value_ns": self.value.0,
            "at_ns": self.at.0,
            "mono_ns": (origin + self.at).0,
            "threshold_ns": threshold.0,
        })
    }
}

/// The earliest of the CPUs' events, each shifted by its thread's offset
/// onto the run's time zero.
pub fn first_event(
    events: impl Iterator<Item = (Option<ThresholdEvent>, Nanos)>,
) -> Option<ThresholdEvent> {
    events
        .filter_map(|(e, off)| {
            e.map(|e| ThresholdEvent {
                at: e.at + off,
                ..e
            })
        })
        .min_by_key(|e| e.at)
}

/// Live figures the CLI shows while a run goes on.
#[derive(Debug)]
pub struct Progress {
    pub max_ns: Vec<AtomicU64>,
}

impl Progress {
    pub fn new(cpus: usize) -> Arc<Progress> {
        Arc::new(Progress {
            max_ns: (0..cpus).map(|_| AtomicU64::new(0)).collect(),
        })
    }
    pub fn max(&self) -> Nanos {
        Nanos(
            self.max_ns
                .iter()
                .map(|a| a.load(Ordering::Relaxed))
                .max()
                .unwrap_or(0),
        )
    }
}

#[derive(Debug)]
pub struct TimerCpuResult {
    pub cpu: u32,
    /// The thread's own time zero (CLOCK_MONOTONIC, or a replay's clock).
    pub start: Nanos,
    /// This thread's time zero minus the run's (spike times are shifted
    /// onto the run's time zero when the record is filled).
    pub offset: Nanos,
    /// Kernel thread id of the measuring thread, so a tracer can tell its
    /// own wake-ups from the work that delayed them (0 when not known).
    pub tid: i32,
    pub latency: Recorder,
    pub windows: WindowRecorder,
    pub interval: Recorder,
    pub spikes: SpikeLog,
    /// The wake-up over `--stop-at` that ended this thread's run.
    pub stopped: Option<ThresholdEvent>,
}

#[derive(Debug)]
pub struct TimerOutcome {
    pub per_cpu: Vec<TimerCpuResult>,
    /// CLOCK_MONOTONIC at the run's time zero.
    pub origin: Nanos,
    pub warnings: Vec<Warning>,
    /// Wall time from start to the last thread's end.
    pub elapsed: Nanos,
    pub interrupted: bool,
    pub realtime: bool,
    /// The first wake-up over `--stop-at`, on the run's time zero.
    pub stopped: Option<ThresholdEvent>,
    pub stop_at: Option<Nanos>,
}

fn r_start_offset(r: &TimerCpuResult, origin: Nanos) -> Nanos {
    r.start.saturating_sub(origin)
}

/// Runs one CPU's measuring loop on the calling thread, until the end,
/// `stop`, or `halt` (set here by the first wake-up over `cfg.stop_at`,
/// which is returned, and then seen by every other CPU's loop).
pub fn run_one<S: WakeSource>(
    src: &mut S,
    cpu: u32,
    idx: usize,
    cfg: &TimerConfig,
    (stop, halt): (&AtomicBool, &AtomicBool),
    progress: &Progress,
    samples: &mut crate::samples::SampleBuf,
) -> (TimerProcessor, Nanos, Option<ThresholdEvent>) {
    let keep_samples = cfg.samples.is_some();
    let start = src.now();
    let end = start + cfg.duration;
    let log = SpikeLog::new(Metric::Latency, cfg.threshold, cfg.max_spikes);
    let mut p = TimerProcessor::new(cpu, cfg.interval, start, log);
    let mut expected = start + cfg.interval;
    let mut last = start;
    // The shared progress maximum is written only when this thread's own
    // maximum grows: an atomic read-modify-write per wake-up would put a
    // cache line shared with the other CPUs' probes into the measured path.
    let mut local_max = Nanos::ZERO;
    let shared_max = progress.max_ns.get(idx);
    let stop_at = cfg.stop_at.unwrap_or(Nanos::MAX);
    let mut stopped = None;
    while expected <= end && !stop.load(Ordering::Relaxed) && !halt.load(Ordering::Relaxed) {
        let Some(actual) = src.wait_until(expected) else {
            break;
        };
        last = actual;
        let lat = actual.saturating_sub(expected);
        expected = p.on_wakeup(expected, actual);
        if keep_samples {
            samples.push(crate::samples::Sample {
                at: actual.saturating_sub(start),
                value: lat,
                cpu,
            });
        }
        if lat > local_max {
            local_max = lat;
            if let Some(m) = shared_max {
                m.fetch_max(lat.0, Ordering::Relaxed);
            }
            if lat > stop_at {
                stopped = Some(ThresholdEvent {
                    cpu,
                    value: lat,
                    at: actual.saturating_sub(start),
                });
                halt.store(true, Ordering::Relaxed);
                break;
            }
        }
    }
    (p, last - start, stopped)
}

/// Runs the probe on every configured CPU with a source made per thread.
pub fn run_with<S, F>(
    cfg: &TimerConfig,
    setup: Arc<dyn ThreadSetup>,
    make_source: F,
    stop: Arc<AtomicBool>,
    progress: Arc<Progress>,
) -> TimerOutcome
where
    S: WakeSource + 'static,
    F: Fn(u32) -> std::io::Result<S> + Send + Sync + 'static,
{
    let warnings = Arc::new(WarningSink::default());
    let locked =
        cfg.lock_memory && lock_memory_or_warn(setup.as_ref(), MemoryLock::Touched, &warnings);
    let make_source = Arc::new(make_source);
    let t0 = mono();
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
            Arc::clone(&make_source),
        );
        let h = std::thread::Builder::new()
            .name(format!("punctual-t{cpu}"))
            .stack_size(crate::rt::RUN_THREAD_STACK_BYTES)
            .spawn(move || {
                let (guard, rt_ok) = prepare_thread(setup.as_ref(), cpu, cfg2.policy, &w2);
                let mut buf =
                    crate::samples::SampleBuf::for_sink(cfg2.samples.as_deref(), cfg2.cpus.len());
                let res = match make(cpu) {
                    Ok(mut src) => {
                        let (p, el, stopped) = run_one(
                            &mut src,
                            cpu,
                            idx,
                            &cfg2,
                            (&stop, &halt),
                            &progress,
                            &mut buf,
                        );
                        let mut r = p.into_result();
                        r.stopped = stopped;
                        r.offset = r_start_offset(&r, t0);
                        if let Some(sink) = &cfg2.samples {
                            buf.hand_to(sink, r.offset);
                        }
                        r.tid = crate::rt::gettid();
                        Some((r, el))
                    }
                    Err(e) => {
                        w2.push(Warning::Other {
                            message: format!("CPU {cpu}: cannot create the timer: {e}"),
                        });
                        None
                    }
                };
                // The real-time policy ends with the measuring loop.
                drop(guard);
                (res, rt_ok)
            });
        match h {
            Ok(h) => handles.push((cpu, h)),
            Err(e) => warnings.push(Warning::Other {
                message: format!("CPU {cpu}: cannot start the probe thread: {e}"),
            }),
        }
    }
    let mut per_cpu = Vec::new();
    let mut realtime = true;
    let mut elapsed = Nanos::ZERO;
    for (cpu, h) in handles {
        match h.join() {
            Ok((Some((r, el)), ok)) => {
                per_cpu.push(r);
                realtime &= ok;
                elapsed = elapsed.max(el);
            }
            Ok((None, _)) => realtime = false,
            Err(_) => warnings.push(Warning::Other {
                message: format!("CPU {cpu}: the probe thread panicked; its data is lost"),
            }),
        }
    }
    if locked {
        setup.unlock_memory();
    }
    if elapsed.is_zero() {
        elapsed = mono() - t0;
    }
    let interrupted = stop.load(Ordering::Relaxed);
    let stopped = first_event(per_cpu.iter().map(|r| (r.stopped, r.offset)));
    TimerOutcome {
        per_cpu,
        origin: t0,
        warnings: warnings.take(),
        elapsed,
        interrupted,
        realtime,
        stopped,
        stop_at: cfg.stop_at,
    }
}

/// Runs the real probe (nanosleep or timerfd) with the real kernel setup.
pub fn run(cfg: &TimerConfig, stop: Arc<AtomicBool>, progress: Arc<Progress>) -> TimerOutcome {
    let setup: Arc<dyn ThreadSetup> = Arc::new(crate::setup::RealSetup);
    match cfg.clock {
        TimerClock::Nanosleep => run_with(cfg, setup, |_| Ok(Nanosleep), stop, progress),
        TimerClock::Timerfd => run_with(cfg, setup, |_| Timerfd::new(), stop, progress),
    }
}

impl TimerOutcome {
    /// Adds this run's series, spikes and warnings to a record.
    pub fn fill(self, rec: &mut Record, max_spikes: usize) {
        if let (Some(e), Some(t)) = (self.stopped, self.stop_at) {
            rec.extra
                .insert("stopped_at".into(), e.to_json(t, self.origin));
        }
        let mut logs = Vec::new();
        for r in self.per_cpu {
            let mut s = r
                .latency
                .to_series(&format!("cpu{}.latency", r.cpu), Metric::Latency);
            s.cpu = Some(r.cpu);
            s.windows = Some(r.windows.windows());
            rec.series.push(s);
            let mut s = r
                .interval
                .to_series(&format!("cpu{}.interval", r.cpu), Metric::Interval);
            s.cpu = Some(r.cpu);
            rec.series.push(s);
            logs.push(r.spikes.shifted(r.offset));
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(duration: Nanos) -> TimerConfig {
        TimerConfig {
            cpus: vec![0],
            policy: Policy::Fifo { priority: 95 },
            interval: Nanos::from_ms(1),
            duration,
            clock: TimerClock::Nanosleep,
            threshold: Nanos::from_us(100),
            max_spikes: 10,
            lock_memory: true,
            stop_at: None,
            samples: None,
        }
    }

    #[test]
    fn missed_periods_are_counted_and_the_grid_is_kept() {
        let ms = Nanos::from_ms(1);
        let mut p = TimerProcessor::new(
            0,
            ms,
            Nanos::ZERO,
            SpikeLog::new(Metric::Latency, Nanos::ZERO, 10),
        );
        // due at 1 ms, woke at 1.010
        assert_eq!(p.on_wakeup(ms, Nanos(1_010_000)), ms * 2);
        // due at 2 ms, woke at 5.3 ms: served period 2, skipped 3, 4 and 5
        assert_eq!(p.on_wakeup(ms * 2, Nanos(5_300_000)), ms * 6);
        assert_eq!(p.missed(), 3);
        assert_eq!(p.wakeups(), 2);
        assert_eq!(p.max_latency(), Nanos(3_300_000));
        // next due at 6 ms, on time: interval 0.7 ms
        p.on_wakeup(ms * 6, ms * 6);
        let iv = p.interval_recorder();
        assert_eq!(iv.count(), 2);
        assert_eq!(iv.max(), Nanos(4_290_000));
    }

    #[test]
    fn replayed_run_gives_exact_figures() {
        // 1000 wake-ups: every tenth 500 us late, one 2.5 ms late.
        let lats: Vec<Nanos> = (0..1000u64)
            .map(|i| match i {
                500 => Nanos(2_500_000),
                i if i % 10 == 0 => Nanos::from_us(500),
                _ => Nanos::from_us(5),
            })
            .collect();
        let stop = Arc::new(AtomicBool::new(false));
        let progress = Progress::new(1);
        let out = run_with(
            &cfg(Nanos::from_secs(100)),
            Arc::new(crate::setup::RealSetup),
            move |_| Ok(Replay::new(Nanos::from_secs(1), lats.clone().into_iter())),
            stop,
            Arc::clone(&progress),
        );
        // Either pinning/policy worked or it warned; data is the same.
        let r = &out.per_cpu[0];
        assert_eq!(r.latency.count(), 1000);
        assert_eq!(r.latency.missed(), 2);
        assert_eq!(r.latency.max(), Nanos(2_500_000));
        assert_eq!(progress.max(), Nanos(2_500_000));
        // spikes above 100 us: 100 candidates (99 at 500 us + the 2.5 ms one), 10 kept
        assert_eq!(r.spikes.len(), 10);
        assert_eq!(r.spikes.dropped(), 90);
        let mut rec = Record::new(
            punctual_record::Source::Measured,
            "timer",
            Default::default(),
        );
        out.fill(&mut rec, 1000);
        assert_eq!(rec.series.len(), 2);
        let lat = rec.series_named("cpu0.latency").unwrap();
        assert_eq!(lat.missed, 2);
        assert_eq!(lat.sample_period_ns, Some(Nanos::from_ms(1)));
        assert!(rec.spikes.iter().any(|s| s.value_ns == Nanos(2_500_000)));
    }

    #[test]
    fn refused_policy_degrades_with_one_warning_and_still_measures() {
        let stop = Arc::new(AtomicBool::new(false));
        let mut c = cfg(Nanos::from_secs(100));
        c.cpus = vec![0, 0];
        let out = run_with(
            &c,
            Arc::new(crate::setup::Unprivileged),
            |_| {
                Ok(Replay::new(
                    Nanos::ZERO,
                    std::iter::repeat_n(Nanos(3000), 50),
                ))
            },
            stop,
            Progress::new(2),
        );
        assert!(!out.realtime);
        assert_eq!(out.per_cpu.len(), 2);
        assert!(out.per_cpu.iter().all(|r| r.latency.count() == 50));
        let rt: Vec<_> = out
            .warnings
            .iter()
            .filter(|w| matches!(w, Warning::NoRealtimePolicy { .. }))
            .collect();
        assert_eq!(rt.len(), 1, "{:?}", out.warnings);
        assert!(out
            .warnings
            .iter()
            .any(|w| matches!(w, Warning::NoMemlock { .. })));
    }

    #[test]
    fn stop_flag_ends_the_run_and_marks_it() {
        let stop = Arc::new(AtomicBool::new(true));
        let out = run_with(
            &cfg(Nanos::from_secs(100)),
            Arc::new(crate::setup::Unprivileged),
            |_| Ok(Replay::new(Nanos::ZERO, std::iter::repeat(Nanos(1)))),
            stop,
            Progress::new(1),
        );
        assert!(out.interrupted);
        assert_eq!(out.per_cpu[0].latency.count(), 0);
    }

    #[test]
    fn memory_stays_bounded_over_a_long_feed() {
        // 5 million wake-ups (83 minutes at 1 kHz) of pseudo-random latency
        // with a heavy tail; the processor's state must stop growing.
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let ms = Nanos::from_ms(1);
        let mut p = TimerProcessor::new(
            0,
            ms,
            Nanos::ZERO,
            SpikeLog::new(Metric::Latency, Nanos::from_us(50), 1000),
        );
        let mut expected = ms;
        for _ in 0..5_000_000u64 {
            let r = next();
            let lat = if r % 1000 == 0 {
                Nanos(r % 3_000_000)
            } else {
                Nanos(r % 80_000)
            };
            expected = p.on_wakeup(expected, expected + lat);
        }
        let at_5m = p.approx_heap_bytes();
        assert_eq!(p.spikes().len(), 1000);
        assert!(p.spikes().dropped() > 1_000_000);
        // The histograms hold one bucket per distinct microsecond of the
        // value range (latency < 3 ms, interval < 4.1 ms), the spike log its
        // 1000 entries: bounded by the range, not the count (5 million
        // samples kept raw would take 40 MB).
        let bound = (3_000 + 4_100) * 48 + 1000 * 40;
        assert!(at_5m <= bound, "{at_5m} bytes > {bound}");
    }
}
