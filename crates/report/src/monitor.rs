//! The state behind `punctual monitor`: rolling worst cases per CPU over the
//! last hour, day and week, latency histograms, missed periods and the
//! kernel's stolen-time counters, with memory that does not grow with
//! uptime and a persisted form that survives `kill -9`.
//!
//! Worst cases live in a ring of per-minute maxima, one slot per minute of a
//! week (10 080 slots), each slot stamped with the wall-clock minute it
//! holds. A window's worst case is the largest slot whose stamp lies inside
//! the window, so slots left over from before a restart (or a stopped
//! machine) age out by their stamps, not by being overwritten. The
//! histogram has fixed Prometheus buckets. Nothing else is kept, so a
//! year of uptime costs what a week does.
//!
//! Time comes in with every sample ([`Sample::at_unix_ns`]), never from a
//! clock read here, so tests drive days of samples in milliseconds through
//! a [`ProbeSource`] with an accelerated clock.

use serde::{Deserialize, Serialize};

use crate::prometheus::{Exposition, BUCKETS_NS};

pub const MINUTES_PER_WEEK: usize = 7 * 24 * 60;
/// Windows reported, in minutes.
pub const WINDOWS: [(&str, u64); 3] = [("hour", 60), ("day", 1440), ("week", 10_080)];

/// One wake-up of a probe.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Sample {
    pub cpu: u32,
    /// Wall-clock time of the wake-up (ns since the Unix epoch): what the
    /// rolling windows are measured in.
    pub at_unix_ns: u64,
    pub latency_ns: u64,
    /// Periods skipped before this wake-up.
    pub missed: u64,
}

/// Where samples come from: a real timer loop on a CPU, or a replayed /
/// accelerated feed in tests. `None` ends the feed.
pub trait ProbeSource: Send {
    fn next_sample(&mut self) -> Option<Sample>;
}

/// Cumulative kernel time on one CPU (from /proc/stat), nanoseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct KernelTimes {
    pub irq_ns: u64,
    pub softirq_ns: u64,
    pub steal_ns: u64,
}

#[derive(Clone, Debug, PartialEq)]
pub struct CpuState {
    pub cpu: u32,
    /// (minute stamp + 1, max latency ns); stamp 0 marks an empty slot.
    ring: Vec<(u64, u64)>,
    pub samples: u64,
    pub sum_ns: u64,
    pub max_ns: u64,
    pub missed: u64,
    /// Non-cumulative counts per [`BUCKETS_NS`] bucket, then the overflow.
    pub buckets: Vec<u64>,
    /// Kernel time accumulated while the monitor ran (across restarts).
    pub kernel: KernelTimes,
}

/// Persisted form: only non-empty ring slots, so a fresh state is small.
#[derive(Serialize, Deserialize)]
struct CpuWire {
    cpu: u32,
    minutes: Vec<(u64, u64)>,
    samples: u64,
    sum_ns: u64,
    max_ns: u64,
    missed: u64,
    buckets: Vec<u64>,
    kernel: KernelTimes,
}

impl CpuState {
    pub fn new(cpu: u32) -> Self {
        CpuState {
            cpu,
            ring: vec![(0, 0); MINUTES_PER_WEEK],
            samples: 0,
            sum_ns: 0,
            max_ns: 0,
            missed: 0,
            buckets: vec![0; BUCKETS_NS.len() + 1],
            kernel: KernelTimes::default(),
        }
    }

    fn record(&mut self, at_unix_ns: u64, latency_ns: u64, missed: u64) {
        let minute = at_unix_ns / 60_000_000_000;
        let slot = &mut self.ring[(minute % MINUTES_PER_WEEK as u64) as usize];
        if slot.0 != minute + 1 {
            *slot = (minute + 1, latency_ns);
        } else if latency_ns > slot.1 {
            slot.1 = latency_ns;
        }
        self.samples += 1;
        self.sum_ns = self.sum_ns.saturating_add(latency_ns);
        self.max_ns = self.max_ns.max(latency_ns);
        self.missed += missed;
        let b = BUCKETS_NS
            .iter()
            .position(|le| latency_ns <= *le)
            .unwrap_or(BUCKETS_NS.len());
        self.buckets[b] += 1;
    }

    /// Largest latency in the `minutes` before `now_unix_ns` (including the
    /// current minute); `None` when no sample fell in the window.
    pub fn worst(&self, now_unix_ns: u64, minutes: u64) -> Option<u64> {
        let now_min = now_unix_ns / 60_000_000_000;
        let oldest = now_min.saturating_sub(minutes - 1);
        self.ring
            .iter()
            .filter(|(stamp, _)| *stamp > oldest && *stamp <= now_min + 1)
            .map(|s| s.1)
            .max()
    }

    fn to_wire(&self) -> CpuWire {
        let mut minutes: Vec<(u64, u64)> = self
            .ring
            .iter()
            .filter(|s| s.0 != 0)
            .map(|s| (s.0 - 1, s.1))
            .collect();
        minutes.sort_unstable();
        CpuWire {
            cpu: self.cpu,
            minutes,
            samples: self.samples,
            sum_ns: self.sum_ns,
            max_ns: self.max_ns,
            missed: self.missed,
            buckets: self.buckets.clone(),
            kernel: self.kernel,
        }
    }

    fn from_wire(w: CpuWire) -> Result<CpuState, String> {
        if w.buckets.len() != BUCKETS_NS.len() + 1 {
            return Err(format!(
                "cpu {} has {} histogram buckets, expected {}",
                w.cpu,
                w.buckets.len(),
                BUCKETS_NS.len() + 1
            ));
        }
        let mut s = CpuState::new(w.cpu);
        for (minute, max) in w.minutes {
            let slot = &mut s.ring[(minute % MINUTES_PER_WEEK as u64) as usize];
            // If two stamps share a slot, the newer one is the live one.
            if slot.0 <= minute {
                *slot = (minute + 1, max);
            }
        }
        s.samples = w.samples;
        s.sum_ns = w.sum_ns;
        s.max_ns = w.max_ns;
        s.missed = w.missed;
        s.buckets = w.buckets;
        s.kernel = w.kernel;
        Ok(s)
    }
}

/// Everything the monitor knows; fixed size for a fixed CPU count.
#[derive(Clone, Debug, PartialEq)]
pub struct MonitorState {
    pub rate_hz: u32,
    /// Wall-clock time of the first ever start (kept across restarts).
    pub first_start_unix_ns: u64,
    /// Times the state was restored from disk.
    pub restarts: u64,
    pub cpus: Vec<CpuState>,
    /// The C-states the running monitor holds, as a probe record's
    /// `config.c_states` says them (`punctual_live::cstate::CStateHold::config`):
    /// what its latencies include. Set at each start, so a state restored
    /// across restarts says the latest one's.
    pub c_states: Option<serde_json::Value>,
}

#[derive(Serialize, Deserialize)]
struct StateWire {
    format: String,
    rate_hz: u32,
    first_start_unix_ns: u64,
    restarts: u64,
    cpus: Vec<CpuWire>,
    /// Absent from state files written before the monitor said it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    c_states: Option<serde_json::Value>,
}

const STATE_FORMAT: &str = "punctual-monitor-state/1";

impl MonitorState {
    pub fn new(cpus: &[u32], rate_hz: u32, now_unix_ns: u64) -> Self {
        MonitorState {
            rate_hz,
            first_start_unix_ns: now_unix_ns,
            restarts: 0,
            cpus: cpus.iter().map(|c| CpuState::new(*c)).collect(),
            c_states: None,
        }
    }

    pub fn record(&mut self, s: &Sample) {
        let idx = match self.cpus.iter().position(|c| c.cpu == s.cpu) {
            Some(i) => i,
            None => {
                self.cpus.push(CpuState::new(s.cpu));
                self.cpus.len() - 1
            }
        };
        self.cpus[idx].record(s.at_unix_ns, s.latency_ns, s.missed);
    }

    /// Adds kernel time that passed on `cpu` since the last reading.
    pub fn add_kernel(&mut self, cpu: u32, delta: KernelTimes) {
        if let Some(c) = self.cpus.iter_mut().find(|c| c.cpu == cpu) {
            c.kernel.irq_ns += delta.irq_ns;
            c.kernel.softirq_ns += delta.softirq_ns;
            c.kernel.steal_ns += delta.steal_ns;
        }
    }

    pub fn to_json(&self) -> String {
        let w = StateWire {
            format: STATE_FORMAT.into(),
            rate_hz: self.rate_hz,
            first_start_unix_ns: self.first_start_unix_ns,
            restarts: self.restarts,
            cpus: self.cpus.iter().map(|c| c.to_wire()).collect(),
            c_states: self.c_states.clone(),
        };
        serde_json::to_string(&w).unwrap_or_default()
    }

    pub fn from_json(text: &str) -> Result<MonitorState, String> {
        let w: StateWire =
            serde_json::from_str(text).map_err(|e| format!("not a monitor state file: {e}"))?;
        if w.format != STATE_FORMAT {
            return Err(format!(
                "state format is '{}', this punctual reads '{STATE_FORMAT}'",
                w.format
            ));
        }
        let cpus = w
            .cpus
            .into_iter()
            .map(CpuState::from_wire)
            .collect::<Result<Vec<_>, _>>()?;
        Ok(MonitorState {
            rate_hz: w.rate_hz,
            first_start_unix_ns: w.first_start_unix_ns,
            restarts: w.restarts,
            cpus,
            c_states: w.c_states,
        })
    }

    /// Bytes held, for the flat-memory test and the self-metric.
    pub fn approx_heap_bytes(&self) -> usize {
        self.cpus
            .iter()
            .map(|c| {
                c.ring.capacity() * std::mem::size_of::<(u64, u64)>()
                    + c.buckets.capacity() * 8
                    + std::mem::size_of::<CpuState>()
            })
            .sum()
    }

    /// The Prometheus text for `/metrics` and `--textfile`.
    pub fn exposition(&self, now_unix_ns: u64) -> String {
        let mut e = Exposition::new();
        for c in &self.cpus {
            let cpu = vec![("cpu".to_string(), c.cpu.to_string())];
            for (w, minutes) in WINDOWS {
                if let Some(v) = c.worst(now_unix_ns, minutes) {
                    let mut l = cpu.clone();
                    l.push(("window".into(), w.into()));
                    e.gauge(
                        "punctual_monitor_worst_latency_seconds",
                        "Largest timer wake-up latency in the last hour, day or week (rolling, per-minute resolution).",
                        l,
                        v as f64 / 1e9,
                    );
                }
            }
            e.gauge(
                "punctual_monitor_max_latency_seconds",
                "Largest timer wake-up latency since the state was created.",
                cpu.clone(),
                c.max_ns as f64 / 1e9,
            );
            let mut cum = [0u64; BUCKETS_NS.len()];
            let mut acc = 0;
            for (i, b) in c.buckets.iter().take(BUCKETS_NS.len()).enumerate() {
                acc += b;
                cum[i] = acc;
            }
            e.histogram(
                "punctual_monitor_latency_seconds",
                "Timer wake-up latency of the low-rate probe.",
                cpu.clone(),
                &cum,
                c.samples,
                c.sum_ns as f64 / 1e9,
            );
            e.counter(
                "punctual_monitor_missed_periods_total",
                "Probe periods that passed without a wake-up.",
                cpu.clone(),
                c.missed as f64,
            );
            for (kind, v) in [
                ("irq", c.kernel.irq_ns),
                ("softirq", c.kernel.softirq_ns),
                ("steal", c.kernel.steal_ns),
            ] {
                let mut l = cpu.clone();
                l.push(("kind".into(), kind.into()));
                e.counter(
                    "punctual_monitor_kernel_stolen_seconds_total",
                    "Time the kernel accounts to interrupts, softirqs and hypervisor steal on each CPU (/proc/stat) while the monitor ran.",
                    l,
                    v as f64 / 1e9,
                );
            }
        }
        e.gauge(
            "punctual_monitor_rate_hertz",
            "Wake-ups per second of each CPU's probe.",
            vec![],
            self.rate_hz as f64,
        );
        e.gauge(
            "punctual_monitor_first_start_timestamp_seconds",
            "When this monitor state was first created (Unix time).",
            vec![],
            self.first_start_unix_ns as f64 / 1e9,
        );
        e.counter(
            "punctual_monitor_restarts_total",
            "Times the monitor restarted from its persisted state.",
            vec![],
            self.restarts as f64,
        );
        e.gauge(
            "punctual_monitor_state_bytes",
            "Memory held by the rolling state (constant for a given CPU count).",
            vec![],
            self.approx_heap_bytes() as f64,
        );
        e.render()
    }
}

/// Feeds a source into the state until it ends or `keep_going` says stop.
pub fn drain(
    src: &mut dyn ProbeSource,
    state: &std::sync::Mutex<MonitorState>,
    mut keep_going: impl FnMut() -> bool,
) {
    while keep_going() {
        let Some(s) = src.next_sample() else { return };
        if let Ok(mut st) = state.lock() {
            st.record(&s);
        }
    }
}

/// A deterministic accelerated feed: `rate_hz` wake-ups per simulated
/// second from `start_unix_ns` for `seconds`, latencies from a small
/// linear-congruential generator plus scheduled spikes. Used by tests and
/// by anyone who wants to see what a week of monitoring looks like.
pub struct SyntheticFeed {
    pub cpu: u32,
    t_ns: u64,
    end_ns: u64,
    step_ns: u64,
    rng: u64,
    spikes: Vec<(u64, u64)>,
}

impl SyntheticFeed {
    pub fn new(cpu: u32, start_unix_ns: u64, seconds: u64, rate_hz: u64, seed: u64) -> Self {
        SyntheticFeed {
            cpu,
            t_ns: start_unix_ns,
            end_ns: start_unix_ns + seconds * 1_000_000_000,
            step_ns: 1_000_000_000 / rate_hz.max(1),
            rng: seed | 1,
            spikes: Vec::new(),
        }
    }

    /// A latency of `latency_ns` at the first wake-up at or after `at`.
    pub fn with_spike(mut self, at_unix_ns: u64, latency_ns: u64) -> Self {
        self.spikes.push((at_unix_ns, latency_ns));
        self.spikes.sort_unstable();
        self
    }
}

impl ProbeSource for SyntheticFeed {
    fn next_sample(&mut self) -> Option<Sample> {
        if self.t_ns >= self.end_ns {
            return None;
        }
        self.rng = self
            .rng
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        // 2–60 µs, like an idle guest's wake-ups.
        let mut lat = 2_000 + (self.rng >> 33) % 58_000;
        if let Some(&(at, v)) = self.spikes.first() {
            if self.t_ns >= at {
                lat = v;
                self.spikes.remove(0);
            }
        }
        let s = Sample {
            cpu: self.cpu,
            at_unix_ns: self.t_ns,
            latency_ns: lat,
            missed: 0,
        };
        self.t_ns += self.step_ns;
        Some(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    const DAY: u64 = 86_400;
    const T0: u64 = 1_750_000_000 * 1_000_000_000;

    #[test]
    fn windows_roll_and_memory_stays_flat() {
        let state = Mutex::new(MonitorState::new(&[0], 1, T0));
        // Spike of 7 ms on day 2; 2 ms on day 9.
        let mut feed = SyntheticFeed::new(0, T0, 21 * DAY, 1, 42)
            .with_spike(T0 + 2 * DAY * 1_000_000_000, 7_000_000)
            .with_spike(T0 + 9 * DAY * 1_000_000_000, 2_000_000);
        let mut sizes = Vec::new();
        let mut n = 0u64;
        let mut checks = Vec::new();
        drain(&mut feed, &state, || {
            n += 1;
            if n.is_multiple_of(DAY) {
                let st = state.lock().unwrap();
                let now = T0 + n * 1_000_000_000;
                sizes.push((st.approx_heap_bytes(), st.to_json().len()));
                checks.push((
                    n / DAY,
                    st.cpus[0].worst(now, 10_080),
                    st.cpus[0].worst(now, 60),
                ));
            }
            true
        });
        // Memory: identical from day 1 to day 21; persisted form stops
        // growing once the week ring is full.
        assert!(sizes.iter().all(|s| s.0 == sizes[0].0), "{sizes:?}");
        // (The JSON varies by a few digits, never by a slot.)
        let full: Vec<usize> = sizes[7..].iter().map(|s| s.1).collect();
        let (lo, hi) = (full.iter().min().unwrap(), full.iter().max().unwrap());
        assert!(hi - lo < hi / 1000, "{sizes:?}");
        assert!(sizes[1].1 < sizes[6].1, "{sizes:?}");
        // Day 5: the 7 ms spike is this week's worst, not this hour's.
        assert_eq!(checks[4].1, Some(7_000_000));
        assert!(checks[4].2.unwrap() < 60_000);
        // Day 10: 7 ms (day 2) has left the week; 2 ms (day 9) is in it.
        assert_eq!(checks[9].1, Some(2_000_000));
        // Day 17: both gone.
        assert!(checks[16].1.unwrap() < 60_000);
        let st = state.lock().unwrap();
        assert_eq!(st.cpus[0].samples, 21 * DAY);
        assert_eq!(st.cpus[0].max_ns, 7_000_000);
    }

    #[test]
    fn persisted_state_round_trips_and_ages_by_stamp() {
        let mut st = MonitorState::new(&[0, 1], 100, T0);
        let mut feed =
            SyntheticFeed::new(1, T0, 600, 100, 7).with_spike(T0 + 5_000_000_000, 900_000);
        while let Some(s) = feed.next_sample() {
            st.record(&s);
        }
        st.add_kernel(
            1,
            KernelTimes {
                irq_ns: 5,
                softirq_ns: 6,
                steal_ns: 7,
            },
        );
        let back = MonitorState::from_json(&st.to_json()).unwrap();
        assert_eq!(back, st);
        let now = T0 + 600 * 1_000_000_000;
        assert_eq!(back.cpus[1].worst(now, 60), Some(900_000));
        // Two hours later the hour window is empty, the day still has it.
        let later = now + 2 * 3600 * 1_000_000_000;
        assert_eq!(back.cpus[1].worst(later, 60), None);
        assert_eq!(back.cpus[1].worst(later, 1440), Some(900_000));
        let text = back.exposition(later);
        assert!(
            text.contains(
                "punctual_monitor_worst_latency_seconds{cpu=\"1\",window=\"day\"} 0.0009"
            ),
            "{text}"
        );
        assert!(text.contains("punctual_monitor_kernel_stolen_seconds_total{cpu=\"1\",kind=\"steal\"} 0.000000007"), "{text}");
        assert!(MonitorState::from_json("{\"format\":\"x\"}").is_err());
    }

    #[test]
    fn the_held_c_states_are_kept_and_an_older_state_reads_without_them() {
        let mut st = MonitorState::new(&[0], 100, T0);
        let older = st.to_json();
        assert!(!older.contains("c_states"), "{older}");
        st.c_states = Some(serde_json::json!({"dma_latency_us": 0}));
        let back = MonitorState::from_json(&st.to_json()).unwrap();
        assert_eq!(back.c_states, st.c_states);
        assert_eq!(MonitorState::from_json(&older).unwrap().c_states, None);
    }
}
