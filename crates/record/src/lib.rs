//! The run record: the one format that every producer writes and every
//! analysis and report reads.
//!
//! A probe on a real CPU, a simulated task in a scenario and a live
//! reservation all emit per-CPU (or per-task) latency samples, stolen
//! intervals with their causes, and per-period reservation accounting into
//! this structure. Nothing downstream knows which one made it, so a forecast
//! made from a measurement can be checked against a simulation.
//!
//! The JSON wire format is documented field by field in
//! `docs/record-format.md`; the doc comments here say why a field exists.
//! Any change that removes or reinterprets a field bumps [`SCHEMA_VERSION`];
//! adding an optional field does not.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;

pub use punctual_units::Nanos;
use serde::{Deserialize, Serialize};

pub mod cause;
mod counts;
mod fix;
mod histogram;
pub mod reserve;
pub mod sim;
mod verdict;
mod warning;
pub mod watch;
pub mod windows;

pub use fix::{
    preemptible as fix_preemptible, Fix, FixFigures, MissRate, ProfileFigure, ReservationMiss,
    TakenOut, Unexplained,
};
pub use histogram::{Histogram, Recorder, DEFAULT_BUCKET_NS};
pub use verdict::{VerdictBasis, VerdictEntry, VerdictState};
pub use warning::{Severity, Warning};
pub use windows::{WindowRecorder, Windows};

/// Version of the wire format written by this build.
pub const SCHEMA_VERSION: u32 = 1;

/// Which kind of producer made a record.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Source {
    Measured,
    Simulated,
}

/// One run.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Record {
    pub schema_version: u32,
    pub tool_version: String,
    pub source: Source,
    /// The verb that produced it: `timer`, `noise`, `check`, `simulate`,
    /// `reserve`, `monitor`, `merge`…
    pub kind: String,
    /// RFC 3339 wall-clock time of the start (for a simulation: when the
    /// simulation was run, not simulated time).
    pub started_at: String,
    /// CLOCK_MONOTONIC at the run's time zero: what the record's relative
    /// times (`spikes[].at_ns`, timelines) add to, to meet tracefs
    /// timestamps (`trace_clock` mono) in cause attribution.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_mono_ns: Option<Nanos>,
    pub duration_ns: Nanos,
    /// True when Ctrl-C / SIGTERM ended the run early: the data is real but
    /// covers less than the asked duration.
    #[serde(default)]
    pub interrupted: bool,
    /// The machine the numbers belong to (Basham's VMBus note: a latency figure means
    /// nothing without CPU model, frequency policy, SMT, virtualization).
    pub platform: Platform,
    /// Every option that shaped the run, including the seed of a simulation,
    /// so that the run can be repeated from the record alone.
    pub config: BTreeMap<String, serde_json::Value>,
    #[serde(default)]
    pub series: Vec<Series>,
    #[serde(default)]
    pub stolen: Vec<Stolen>,
    #[serde(default)]
    pub spikes: Vec<Spike>,
    /// Spikes beyond the log's bound are counted here, not silently lost.
    #[serde(default)]
    pub spikes_dropped: u64,
    #[serde(default)]
    pub periods: Vec<Period>,
    /// Periods beyond the stored bound still count in `period_summary`.
    #[serde(default)]
    pub periods_dropped: u64,
    #[serde(default)]
    pub period_summary: Vec<PeriodSummary>,
    #[serde(default)]
    pub load: Vec<LoadReport>,
    #[serde(default)]
    pub warnings: Vec<Warning>,
    /// Per-profile verdicts with their intervals (written by `check`), so
    /// reports show what the terminal said without re-deriving it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub verdicts: Vec<VerdictEntry>,
    /// Changes to the machine ranked by what they are predicted to buy
    /// (written by `advise`), each with the record it predicts.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fixes: Vec<Fix>,
    /// Per advised CPU, what no fix targets by name (written by `advise`
    /// beside `fixes`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unexplained: Vec<Unexplained>,
    /// Producer-specific extras (forecast results, sweep tables, trace-loss
    /// counters…) that other tools may ignore.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub extra: BTreeMap<String, serde_json::Value>,
}

impl Record {
    /// An empty record of this build's schema, ready to be filled.
    pub fn new(source: Source, kind: &str, platform: Platform) -> Self {
        Record {
            schema_version: SCHEMA_VERSION,
            tool_version: env!("CARGO_PKG_VERSION").to_string(),
            source,
            kind: kind.to_string(),
            started_at: String::new(),
            started_mono_ns: None,
            duration_ns: Nanos::ZERO,
            interrupted: false,
            platform,
            config: BTreeMap::new(),
            series: Vec::new(),
            stolen: Vec::new(),
            spikes: Vec::new(),
            spikes_dropped: 0,
            periods: Vec::new(),
            periods_dropped: 0,
            period_summary: Vec::new(),
            load: Vec::new(),
            warnings: Vec::new(),
            verdicts: Vec::new(),
            fixes: Vec::new(),
            unexplained: Vec::new(),
            extra: BTreeMap::new(),
        }
    }

    /// Records one option of the run's configuration.
    pub fn set_config(&mut self, key: &str, value: impl Serialize) {
        let v = serde_json::to_value(value).unwrap_or(serde_json::Value::Null);
        self.config.insert(key.to_string(), v);
    }

    /// The flight recorder's attribution (`extra["cause"]`), when the run
    /// had one and it reads as one.
    pub fn cause(&self) -> Option<cause::CauseSummary> {
        self.extra_section("cause")
    }

    /// Keeps the flight recorder's attribution in `extra["cause"]`.
    pub fn set_cause(&mut self, sum: &cause::CauseSummary) {
        self.extra.insert(
            "cause".into(),
            serde_json::to_value(sum).unwrap_or(serde_json::Value::Null),
        );
    }

    /// A reserve run's section (its keys of `extra`), when this is a
    /// reserve record.
    pub fn reserve(&self) -> Option<reserve::ReserveReport> {
        reserve::ReserveReport::read(self)
    }

    /// A simulation's own counts (`extra["sim"]`).
    pub fn sim(&self) -> Option<sim::SimSection> {
        self.extra_section("sim")
    }

    /// What `punctual watch` found about its threads (`extra["watch"]`).
    pub fn watch(&self) -> Option<watch::WatchSummary> {
        self.extra_section("watch")
    }

    /// Keeps a watch run's findings in `extra["watch"]`.
    pub fn set_watch(&mut self, sum: &watch::WatchSummary) {
        self.extra.insert(
            "watch".into(),
            serde_json::to_value(sum).unwrap_or(serde_json::Value::Null),
        );
    }

    /// A check record's noise half's attribution (`extra["cause_noise"]`).
    pub fn cause_noise(&self) -> Option<cause::CauseSummary> {
        self.extra_section("cause_noise")
    }

    fn extra_section<T: serde::de::DeserializeOwned>(&self, key: &str) -> Option<T> {
        self.extra
            .get(key)
            .and_then(|v| serde_json::from_value(v.clone()).ok())
    }

    pub fn to_json_pretty(&self) -> String {
        // Serialization of these plain data types cannot fail.
        serde_json::to_string_pretty(self).expect("record serializes")
    }

    /// Parses a record, refusing other schema versions with a sentence that
    /// names both versions.
    pub fn from_json(text: &str) -> Result<Record, RecordError> {
        let v: serde_json::Value =
            serde_json::from_str(text).map_err(|e| RecordError::Syntax(e.to_string()))?;
        match v.get("schema_version").and_then(|s| s.as_u64()) {
            Some(n) if n == SCHEMA_VERSION as u64 => {}
            Some(n) => return Err(RecordError::Version(n)),
            None => return Err(RecordError::NotARecord),
        }
        serde_json::from_value(v).map_err(|e| RecordError::Syntax(e.to_string()))
    }

    pub fn read(path: &Path) -> Result<Record, RecordError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| RecordError::Io(path.display().to_string(), e.to_string()))?;
        Record::from_json(&text).map_err(|e| e.in_file(path))
    }

    /// Writes atomically: a reader never sees half a record.
    pub fn write(&self, path: &Path) -> Result<(), RecordError> {
        write_atomic(path, self.to_json_pretty().as_bytes())
            .map_err(|e| RecordError::Io(path.display().to_string(), e.to_string()))
    }

    pub fn series_named(&self, name: &str) -> Option<&Series> {
        self.series.iter().find(|s| s.name == name)
    }

    /// The time base of `s`: how long it was observed (its own
    /// `observed_ns` when a merge gave it one, else the record's duration).
    pub fn series_duration(&self, s: &Series) -> Nanos {
        s.observed_ns.unwrap_or(self.duration_ns)
    }
}

/// Why a record could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    #[error("{0}: {1}")]
    Io(String, String),
    #[error("not valid record JSON: {0}")]
    Syntax(String),
    #[error("this is not a punctual record (no schema_version field)")]
    NotARecord,
    #[error(
        "record has schema_version {0}, but this punctual reads schema_version {SCHEMA_VERSION}"
    )]
    Version(u64),
    #[error("{0}: {1}")]
    InFile(String, Box<RecordError>),
}

impl RecordError {
    fn in_file(self, path: &Path) -> RecordError {
        match self {
            e @ RecordError::Io(..) => e,
            e => RecordError::InFile(path.display().to_string(), Box::new(e)),
        }
    }
}

/// Writes `bytes` to `path` through a temporary file in the same directory
/// and a rename, so an interrupted or failed write never leaves half a file.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => std::path::PathBuf::from("."),
    };
    let name = path
        .file_name()
        .ok_or_else(|| std::io::Error::new(std::io::ErrorKind::InvalidInput, "not a file path"))?;
    let tmp = dir.join(format!(
        ".{}.tmp.{}",
        name.to_string_lossy(),
        std::process::id()
    ));
    let result = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// Checks that `path` could be written (its directory exists and accepts
/// files) before a long run starts, so a typo in `--json` is reported in
/// the first second and not after an hour of measuring.
pub fn check_writable(path: &Path) -> Result<(), String> {
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => std::path::PathBuf::from("."),
    };
    if path.is_dir() {
        return Err(format!("{} is a directory, not a file", path.display()));
    }
    if !dir.is_dir() {
        return Err(format!(
            "cannot write {}: directory {} does not exist",
            path.display(),
            dir.display()
        ));
    }
    // Files are written beside their target and renamed over it, so the
    // directory must take new files (`/proc`, `/sys` and read-only mounts
    // do not, whatever the target's own permissions).
    let probe = dir.join(format!(".punctual-write-test.{}", std::process::id()));
    match std::fs::File::create(&probe) {
        Ok(_) => {
            let _ = std::fs::remove_file(&probe);
            Ok(())
        }
        Err(e) => Err(format!(
            "cannot write {}: directory {} does not accept new files ({e})",
            path.display(),
            dir.display()
        )),
    }
}

/// What a series measures.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Metric {
    /// Wake-up latency: actual minus expected wake-up time.
    Latency,
    /// Time between consecutive wake-ups (Jones & Regehr's "time between callbacks").
    Interval,
    /// Length of each gap a busy-polling thread saw (stolen intervals).
    Gap,
    /// Response time of a job: completion minus release.
    Response,
    /// Per-period received CPU time of a reservation.
    Received,
    /// Longest service gap of a buffered consumer.
    ServiceGap,
}

impl Metric {
    pub fn as_str(self) -> &'static str {
        match self {
            Metric::Latency => "latency",
            Metric::Interval => "interval",
            Metric::Gap => "gap",
            Metric::Response => "response",
            Metric::Received => "received",
            Metric::ServiceGap => "service_gap",
        }
    }
}

/// Percentiles every consumer expects without decoding the histogram.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Percentiles {
    pub p50: Nanos,
    pub p90: Nanos,
    pub p99: Nanos,
    #[serde(rename = "p99.9")]
    pub p99_9: Nanos,
    #[serde(rename = "p99.99")]
    pub p99_99: Nanos,
}

/// One distribution: a CPU's (or a task's) values of one metric.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Series {
    /// Unique within the record, e.g. `cpu0.latency`, `mixer.latency`.
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<u32>,
    /// Task name in simulations and reservation runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task: Option<String>,
    pub metric: Metric,
    /// Always "ns": written so a reader never has to guess.
    pub unit: String,
    pub count: u64,
    pub min: Nanos,
    pub mean: Nanos,
    pub max: Nanos,
    pub percentiles: Percentiles,
    /// Periods that passed without a wake-up (a wake-up later than k whole
    /// intervals skipped k periods). Counted, not hidden as cyclictest does.
    #[serde(default)]
    pub missed: u64,
    /// Nominal time between samples (the probe's interval or task period):
    /// what turns a fraction of samples into a rate per hour.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sample_period_ns: Option<Nanos>,
    /// Time this series was observed, when it is not the record's
    /// `duration_ns`: a merge of runs where the series is in only some of
    /// them. Rates per hour divide by this, not by the merged duration.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_ns: Option<Nanos>,
    /// Lossless at `bucket_ns` resolution, sparse.
    pub histogram: Histogram,
    /// The samples again, window by window in run order (probes only):
    /// what lets `compare` resample whole stretches of the run, so that
    /// bursts of late samples count as the few events they are.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub windows: Option<Windows>,
    /// HdrHistogram V2 (deflate) serialization, base64: merges losslessly
    /// across records and feeds HdrHistogram's own tools.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub hdr: String,
}

impl Series {
    /// Number of samples strictly above `x` (from the sparse histogram;
    /// exact when `x` is a bucket boundary, otherwise the bucket holding `x`
    /// counts as above).
    pub fn count_above(&self, x: Nanos) -> u64 {
        self.histogram.count_above(x)
    }
}

/// Stolen time from one CPU (or one simulated task's CPU).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Stolen {
    pub cpu: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task: Option<String>,
    /// Time observed on this CPU (the denominator of `fraction`).
    pub observed_ns: Nanos,
    pub total_ns: Nanos,
    pub fraction: f64,
    /// Number of stolen intervals.
    pub intervals: u64,
    pub max_ns: Nanos,
    /// The threshold above which a gap counted as stolen.
    #[serde(default)]
    pub threshold_ns: Nanos,
    /// The polling loop's own cost per iteration (its minimum step).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loop_cost_ns: Option<Nanos>,
    /// Stolen time per time bin over the run (bins widen as a long run goes
    /// on, so memory stays bounded).
    #[serde(default)]
    pub timeline: Timeline,
    /// Who stole it. Filled by cause attribution; without it, by the
    /// kernel's own accounting (source kind `kernel`).
    #[serde(default)]
    pub by_source: Vec<SourceShare>,
    /// What the kernel admits to over the same interval (/proc/stat,
    /// /proc/interrupts deltas).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel_view: Option<KernelView>,
}

/// A bounded time series: `values[i]` covers `[i*bin_ns, (i+1)*bin_ns)`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Timeline {
    pub bin_ns: Nanos,
    pub values_ns: Vec<Nanos>,
}

impl Timeline {
    /// Largest number of bins kept; past it, pairs of bins are merged and
    /// the bin width doubles.
    pub const MAX_BINS: usize = 4096;

    pub fn new(bin: Nanos) -> Self {
        Timeline {
            bin_ns: bin,
            values_ns: Vec::new(),
        }
    }

    /// Adds `amount` to the bin holding time `at` (since the run's start).
    pub fn add(&mut self, at: Nanos, amount: Nanos) {
        if self.bin_ns.is_zero() {
            self.bin_ns = Nanos::from_secs(1);
        }
        let mut idx = (at.0 / self.bin_ns.0) as usize;
        while idx >= Self::MAX_BINS {
            self.coarsen();
            idx = (at.0 / self.bin_ns.0) as usize;
        }
        if self.values_ns.len() <= idx {
            self.values_ns.resize(idx + 1, Nanos::ZERO);
        }
        self.values_ns[idx] += amount;
    }

    /// The kept bin holding time `at`: its bounds `[start, end)` and its
    /// index in `values_ns`; none before the width is set or past the bins
    /// kept so far. (The simulator caches it: nearly every stolen interval
    /// falls in the bin of the one before.)
    pub fn kept_bin(&self, at: Nanos) -> Option<(Nanos, Nanos, usize)> {
        if self.bin_ns.is_zero() {
            return None;
        }
        let idx = at.0 / self.bin_ns.0;
        ((idx as usize) < self.values_ns.len()).then(|| {
            let lo = idx * self.bin_ns.0;
            (Nanos(lo), Nanos(lo + self.bin_ns.0), idx as usize)
        })
    }

    /// Adds an interval that may straddle bins, splitting it exactly.
    // Inlined with the split out of line: the simulator adds one per
    // stolen interval, and with the split in the same function the call
    // saved and restored registers only the split uses.
    #[inline]
    pub fn add_interval(&mut self, start: Nanos, len: Nanos) {
        // Nearly every interval (an interrupt, a DPC) lies inside one bin:
        // one division finds it, where the split below takes two.
        if !self.bin_ns.is_zero() {
            let idx = start.0 / self.bin_ns.0;
            let end = start.0.saturating_add(len.0);
            if (idx as usize) < Self::MAX_BINS && end <= (idx + 1) * self.bin_ns.0 {
                if len.is_zero() {
                    return;
                }
                if let Some(v) = self.values_ns.get_mut(idx as usize) {
                    *v += len;
                    return;
                }
            }
        }
        self.add_interval_split(start, len);
    }

    /// [`Timeline::add_interval`] for an interval straddling bins, past
    /// the bins kept so far, or before the first bin width is set.
    #[cold]
    #[inline(never)]
    fn add_interval_split(&mut self, start: Nanos, len: Nanos) {
        let mut t = start;
        let end = start + len;
        while t < end {
            if self.bin_ns.is_zero() {
                self.bin_ns = Nanos::from_secs(1);
            }
            let bin_end = Nanos((t.0 / self.bin_ns.0 + 1) * self.bin_ns.0);
            let piece_end = if bin_end < end { bin_end } else { end };
            self.add(t, piece_end - t);
            t = piece_end;
        }
    }

    fn coarsen(&mut self) {
        let merged: Vec<Nanos> = self
            .values_ns
            .chunks(2)
            .map(|c| c.iter().copied().sum())
            .collect();
        self.values_ns = merged;
        self.bin_ns = self.bin_ns * 2;
    }
}

/// One named source of stolen time and how much it took.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SourceShare {
    /// `irq`, `softirq`, `vector` (x86 system vector), `thread`, `kworker`,
    /// `nmi`, `hypervisor`, `unexplained`, `kernel` (from /proc/stat), or a
    /// simulator noise-source kind.
    pub kind: String,
    /// e.g. `virtio3-rx`, `NET_RX`, `local_timer`, `noisy-neighbor/4242`.
    pub name: String,
    pub count: u64,
    pub total_ns: Nanos,
    pub max_ns: Nanos,
    /// Share of all stolen time on this CPU, 0..1.
    pub share: f64,
}

/// The kernel's own accounting over a run.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct KernelView {
    pub irq_ns: Nanos,
    pub softirq_ns: Nanos,
    pub steal_ns: Nanos,
    /// Interrupt counts on this CPU by /proc/interrupts line name.
    #[serde(default)]
    pub interrupts: BTreeMap<String, u64>,
}

/// One large event, kept in a bounded log.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Spike {
    /// Time since the run's start.
    pub at_ns: Nanos,
    pub cpu: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task: Option<String>,
    pub metric: Metric,
    pub value_ns: Nanos,
    /// Breakdown of the window, filled by cause attribution.
    #[serde(default)]
    pub causes: Vec<SourceShare>,
    /// True when trace events were lost in the window: the causes are then
    /// incomplete and not guessed.
    #[serde(default)]
    pub incomplete: bool,
}

/// One period of a reservation (live or simulated), as Regehr's test
/// application records it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Period {
    pub task: String,
    pub index: u64,
    pub start_ns: Nanos,
    /// What the user asked for (R).
    pub reserved_ns: Nanos,
    /// What the scheduler requested this period (C_t; differs from R under
    /// over-reservation and feedback).
    pub requested_ns: Nanos,
    pub received_ns: Nanos,
    pub stolen_ns: Nanos,
    /// received ≥ reserved within the period.
    pub hit: bool,
}

/// Totals per reserved task over all periods, kept even when the period
/// list is truncated.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PeriodSummary {
    pub task: String,
    pub periods: u64,
    pub misses: u64,
    pub reserved_ns: Nanos,
    pub received_total_ns: Nanos,
    pub stolen_total_ns: Nanos,
    pub requested_total_ns: Nanos,
}

/// What a stress load achieved while the probe ran.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LoadReport {
    pub kind: String,
    /// The load spec as given (`disk:direct,irq-cpu=1`).
    pub spec: String,
    /// Achieved figures with units in their names (`throughput_gbit_s`,
    /// `iops`, `cpu_fraction`).
    pub achieved: BTreeMap<String, f64>,
}

/// The machine. Every field is optional: a fact that could not be read is
/// absent, never invented.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Platform {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hostname: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_model: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub logical_cpus: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub online_cpus: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub packages: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub threads_per_core: Option<u32>,
    /// SMT sibling groups, e.g. ["0,2", "1,3"].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub smt_siblings: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub numa_nodes: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel: Option<String>,
    /// `none`, `voluntary`, `full`, `lazy`, `rt`, `dynamic(full)`…
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preemption: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hz: Option<u32>,
    /// `periodic`, `idle`, `full`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nohz: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clocksource: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpufreq_governor: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpufreq_min_khz: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpufreq_max_khz: Option<u64>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cpuidle_states: Vec<IdleState>,
    /// Hypervisor vendor (`KVM`, `Microsoft Hv`…) when virtualized.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hypervisor: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub isolcpus: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nohz_full: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rt_runtime_us: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rt_period_us: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub irq_time_accounting: Option<bool>,
    /// IRQ number → (name, affinity list).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub irqs: Vec<IrqInfo>,
    /// Anything else a producer wants recorded (simulated machine model…).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub other: BTreeMap<String, String>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct IdleState {
    pub name: String,
    pub exit_latency_us: u64,
    #[serde(default)]
    pub disabled: bool,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct IrqInfo {
    pub irq: String,
    pub name: String,
    pub affinity: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_refuses_other_versions() {
        let mut r = Record::new(Source::Simulated, "simulate", Platform::default());
        r.set_config("seed", 42u64);
        let mut rec = Recorder::new(Nanos(1000));
        for v in [1500u64, 2500, 2600, 900_000] {
            rec.record(Nanos(v));
        }
        r.series.push(rec.to_series("t.latency", Metric::Latency));
        let text = r.to_json_pretty();
        let back = Record::from_json(&text).unwrap();
        assert_eq!(back, r);
        let bumped = text.replacen("\"schema_version\": 1", "\"schema_version\": 99", 1);
        let e = Record::from_json(&bumped).unwrap_err().to_string();
        assert!(e.contains("99"), "{e}");
        assert!(matches!(
            Record::from_json("{}"),
            Err(RecordError::NotARecord)
        ));
    }

    #[test]
    fn atomic_write_leaves_no_temp_file() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("r.json");
        write_atomic(&p, b"hello").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"hello");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
        assert!(check_writable(&dir.path().join("nope/x.json")).is_err());
        assert!(check_writable(&p).is_ok());
    }

    #[test]
    fn timeline_stays_bounded_and_keeps_the_total() {
        let mut t = Timeline::new(Nanos::from_secs(1));
        let mut total = Nanos::ZERO;
        for s in 0..100_000u64 {
            t.add_interval(Nanos::from_secs(s) + Nanos(999_999_000), Nanos(2000));
            total += Nanos(2000);
        }
        assert!(t.values_ns.len() <= Timeline::MAX_BINS);
        assert_eq!(t.values_ns.iter().copied().sum::<Nanos>(), total);
    }
}
