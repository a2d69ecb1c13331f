//! Scenario files: TOML in, a validated model out.
//!
//! Every error names the file, the line and the field. Syntax and type
//! errors come from `toml` with their span; semantic errors (an unknown lock,
//! a reservation over the admission cap) point at the name of the entity
//! they concern. The format is documented in `docs/scenario-format.md`.

use std::collections::BTreeMap;
use std::fmt;

use punctual_units::{parse_duration, parse_scaled, Nanos, Scale};
use serde::{Deserialize, Deserializer};
use toml::Spanned;

/// A scenario error located in its file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScenarioError {
    pub file: String,
    pub line: usize,
    pub column: usize,
    pub message: String,
}

impl fmt::Display for ScenarioError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line == 0 {
            write!(f, "{}: {}", self.file, self.message)
        } else {
            write!(
                f,
                "{}:{}:{}: {}",
                self.file, self.line, self.column, self.message
            )
        }
    }
}

impl std::error::Error for ScenarioError {}

fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let offset = offset.min(text.len());
    let before = &text.as_bytes()[..offset];
    let line = before.iter().filter(|b| **b == b'\n').count() + 1;
    let col = offset
        - before
            .iter()
            .rposition(|b| *b == b'\n')
            .map_or(0, |p| p + 1)
        + 1;
    (line, col)
}

/// A duration written as a human string (`"2.5ms"`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct Dur(pub Nanos);

impl<'de> Deserialize<'de> for Dur {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        parse_bounded(&s).map(Dur).map_err(serde::de::Error::custom)
    }
}

/// Longest duration a scenario may state: 100 years. Sums of two such
/// values never overflow the nanosecond clock.
pub const MAX_DURATION: Nanos = Nanos(100 * 365 * 86_400 * 1_000_000_000);

fn parse_bounded(s: &str) -> Result<Nanos, String> {
    let d = parse_duration(s).map_err(|e| format!("'{s}' is not a duration: {e}"))?;
    if d > MAX_DURATION {
        return Err(format!("'{s}' is longer than 100 years"));
    }
    Ok(d)
}

/// A reservation written `amount/period` (`"7ms/50ms"`), with
/// 0 < amount ≤ period.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Share {
    pub amount: Nanos,
    pub period: Nanos,
}

impl<'de> Deserialize<'de> for Share {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        let s = String::deserialize(d)?;
        let (a, b) = s
            .split_once('/')
            .ok_or_else(|| D::Error::custom(format!("'{s}' must look like 7ms/50ms")))?;
        match (parse_duration(a), parse_duration(b)) {
            (Ok(amount), Ok(period)) if !amount.is_zero() && amount <= period => {
                Ok(Share { amount, period })
            }
            _ => Err(D::Error::custom(format!(
                "'{s}' must be amount/period with 0 < amount ≤ period"
            ))),
        }
    }
}

/// A clock period that may be a fraction of a nanosecond (976.5625 µs),
/// held exactly in picoseconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Picos(pub u128);

/// A duration in picoseconds, from 1 ps to `u64::MAX` ps (213 days).
pub fn parse_picos(s: &str) -> Result<Picos, String> {
    let v = parse_scaled(s, Scale::Pico).map_err(|e| e.to_string())?;
    if v == 0 || v > u64::MAX as u128 {
        return Err(format!("'{s}' must be between 1 ps and 213 days"));
    }
    Ok(Picos(v))
}

impl<'de> Deserialize<'de> for Picos {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        parse_picos(&s).map_err(serde::de::Error::custom)
    }
}

/// A distribution of durations: `"1ms"` (constant), `{ uniform = ["6ms",
/// "7ms"] }`, `{ exp = "2ms" }` (exponential with that mean, capped at 20×
/// the mean so one draw cannot swallow a run), or `{ choice = ["1ms",
/// "5ms"] }` (equally likely values), or `{ cdf = [[0.0, "2us"], [0.9,
/// "5us"], [1.0, "1ms"]] }` (an empirical distribution: points of its
/// cumulative distribution function, linear in between).
#[derive(Clone, Debug, PartialEq)]
pub enum Dist {
    Const(Nanos),
    Uniform(Nanos, Nanos),
    Exp(Nanos),
    Choice(Vec<Nanos>),
    Cdf(Cdf),
}

/// An empirical distribution of durations given by points `(p, x)` of its
/// cumulative distribution function: P(X ≤ x) = p at each point, linear
/// between neighbours, so a measured histogram or a list of quantiles
/// carries over as it was measured (an atom at x is two points at x). A
/// draw takes u uniform in [0, 1) and reads x off the curve: one random
/// number per draw, so the same seed gives the same values.
#[derive(Clone, Debug, PartialEq)]
pub struct Cdf {
    /// Ascending probabilities, the first 0 and the last 1.
    pub p: Vec<f64>,
    /// Non-decreasing values at those probabilities.
    pub x: Vec<Nanos>,
}

/// Most points a `cdf` distribution may have: draws search them, and a
/// histogram needs no more to keep its shape.
pub const MAX_CDF_POINTS: usize = 4096;

impl Cdf {
    /// Checks the points: at least two, p from 0 to 1 and non-decreasing,
    /// x non-decreasing.
    pub fn new(points: Vec<(f64, Nanos)>) -> Result<Cdf, String> {
        if points.len() < 2 || points.len() > MAX_CDF_POINTS {
            return Err(format!(
                "cdf: between 2 and {MAX_CDF_POINTS} points [p, duration], got {}",
                points.len()
            ));
        }
        let (p, x): (Vec<f64>, Vec<Nanos>) = points.into_iter().unzip();
        if p[0] != 0.0 || p[p.len() - 1] != 1.0 {
            return Err("cdf: the first point's p must be 0 and the last one's 1".into());
        }
        if p.iter().any(|v| !v.is_finite()) || p.windows(2).any(|w| w[1] < w[0]) {
            return Err("cdf: the probabilities must not decrease".into());
        }
        if x.windows(2).any(|w| w[1] < w[0]) {
            return Err("cdf: the durations must not decrease".into());
        }
        Ok(Cdf { p, x })
    }

    /// The value at probability `u` in [0, 1): linear between the two
    /// points around it (a jump of p at one x is an atom there).
    #[inline]
    pub fn at(&self, u: f64) -> Nanos {
        // First point above u (exists: the last p is 1 > u); the one
        // before it is at or below u, so the segment has width.
        let j = self.p.partition_point(|&p| p <= u).min(self.p.len() - 1);
        let i = j.saturating_sub(1);
        let (p0, p1) = (self.p[i], self.p[j]);
        let (x0, x1) = (self.x[i].0 as f64, self.x[j].0 as f64);
        if p1 <= p0 {
            return self.x[j];
        }
        Nanos((x0 + (x1 - x0) * (u - p0) / (p1 - p0)).round() as u64)
    }

    /// Mean: each segment contributes its width times its midpoint.
    pub fn mean(&self) -> Nanos {
        let m: f64 = (1..self.p.len())
            .map(|k| (self.p[k] - self.p[k - 1]) * (self.x[k].0 + self.x[k - 1].0) as f64 / 2.0)
            .sum();
        Nanos(m.round() as u64)
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct DistTable {
    uniform: Option<[Dur; 2]>,
    exp: Option<Dur>,
    choice: Option<Vec<Dur>>,
    cdf: Option<Vec<(f64, Dur)>>,
}

impl<'de> Deserialize<'de> for Dist {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Repr {
            S(String),
            T(DistTable),
        }
        use serde::de::Error;
        match Repr::deserialize(d).map_err(|_| {
            D::Error::custom(
                "expected a duration (\"1ms\") or a table { uniform = [lo, hi] } / { exp = mean } / { choice = [...] } / { cdf = [[p, duration], ...] }",
            )
        })? {
            Repr::S(s) => parse_bounded(&s).map(Dist::Const).map_err(D::Error::custom),
            Repr::T(t) => match (t.uniform, t.exp, t.choice, t.cdf) {
                (None, None, None, Some(points)) => {
                    Cdf::new(points.into_iter().map(|(p, x)| (p, x.0)).collect())
                        .map(Dist::Cdf)
                        .map_err(D::Error::custom)
                }
                (Some([a, b]), None, None, None) => {
                    if b.0 < a.0 {
                        Err(D::Error::custom("uniform: upper bound below lower bound"))
                    } else {
                        Ok(Dist::Uniform(a.0, b.0))
                    }
                }
                (None, Some(m), None, None) => Ok(Dist::Exp(m.0)),
                (None, None, Some(v), None) if !v.is_empty() => {
                    Ok(Dist::Choice(v.into_iter().map(|x| x.0).collect()))
                }
                _ => Err(D::Error::custom(
                    "a distribution has exactly one of uniform, exp, choice (non-empty), cdf",
                )),
            },
        }
    }
}

impl Dist {
    pub fn mean(&self) -> Nanos {
        match self {
            Dist::Const(x) => *x,
            Dist::Uniform(a, b) => Nanos((a.0 + b.0) / 2),
            Dist::Exp(m) => *m,
            Dist::Choice(v) => Nanos(v.iter().map(|x| x.0).sum::<u64>() / v.len().max(1) as u64),
            Dist::Cdf(c) => c.mean(),
        }
    }
    pub fn max(&self) -> Nanos {
        match self {
            Dist::Const(x) => *x,
            Dist::Uniform(_, b) => *b,
            Dist::Exp(m) => Nanos(m.0.saturating_mul(20)),
            Dist::Choice(v) => v.iter().copied().max().unwrap_or(Nanos::ZERO),
            Dist::Cdf(c) => c.x[c.x.len() - 1],
        }
    }
}

#[derive(Deserialize, Clone, Debug)]
#[serde(deny_unknown_fields)]
pub struct SimSection {
    pub duration: Option<Dur>,
    pub seed: Option<u64>,
    #[serde(default = "one")]
    pub cpus: u32,
    pub quantum: Option<Dur>,
    pub admission_cap: Option<f64>,
    #[serde(default = "yes")]
    pub admission: bool,
    /// "7ms/50ms": reservation for the time-sharing class.
    pub timeshare_reservation: Option<Share>,
    /// Latencies above this go to the spike log (default: 1 ms).
    pub spike_threshold: Option<Dur>,
    pub description: Option<String>,
    /// "events" (default: the event-driven scheduler core) or "plan" (a
    /// Rialto precomputed plan, Jones's Rialto talk, decides who owns each instant).
    pub scheduler: Option<Spanned<String>>,
    /// Plan mode: the plan's base period (default 10 ms).
    pub plan_base: Option<Dur>,
    /// Also record each CPU's stolen intervals as a `cpuN.gap` series, as
    /// `punctual noise` does (off by default: it costs one histogram
    /// entry per interval).
    #[serde(default)]
    pub gap_series: bool,
    /// How tasks share the CPUs: absent, each task runs on its `cpu`;
    /// "global", one ready queue for all CPUs (tasks migrate);
    /// "partitioned", each task is placed on one CPU before the run by
    /// `placement`.
    pub multiprocessor: Option<Spanned<String>>,
    /// Partitioned: "first-fit" (default) or "worst-fit", tasks taken
    /// largest utilization first.
    pub placement: Option<Spanned<String>>,
    /// What a job still unfinished at its deadline does: "continue"
    /// (default) runs it to completion; "abort" drops it there, as SimSo
    /// does by default.
    pub on_miss: Option<Spanned<String>>,
    /// How equal EDF deadlines are ordered: "task" (default), a job queued
    /// behind its predecessor keeps its task's place; "ready", it is ready
    /// from its predecessor's end, as SimSo activates it.
    pub edf_ties: Option<Spanned<String>>,
    /// How equal fixed priorities are ordered, by the same two rules as
    /// `edf_ties`: "task" (default) or "ready", as SimSo's rate monotonic.
    pub priority_ties: Option<Spanned<String>>,
}

fn one() -> u32 {
    1
}
fn yes() -> bool {
    true
}

impl Default for SimSection {
    fn default() -> Self {
        SimSection {
            duration: None,
            seed: None,
            cpus: 1,
            quantum: None,
            admission_cap: None,
            admission: true,
            timeshare_reservation: None,
            spike_threshold: None,
            description: None,
            scheduler: None,
            plan_base: None,
            gap_series: false,
            multiprocessor: None,
            placement: None,
            on_miss: None,
            edf_ties: None,
            priority_ties: None,
        }
    }
}

#[derive(Deserialize, Clone, Debug, Default)]
#[serde(deny_unknown_fields)]
pub struct ClockSection {
    /// "tick" (periodic interrupt) or "oneshot" (precise timers).
    pub kind: Option<Spanned<String>>,
    pub period: Option<Picos>,
    pub hz: Option<u32>,
    /// Time the clock interrupt handler takes (stolen, invisible).
    pub cost: Option<Dur>,
}

#[derive(Deserialize, Clone, Debug)]
#[serde(deny_unknown_fields)]
pub struct TimerSpec {
    pub name: Spanned<String>,
    pub period: Dur,
    /// "rounding" (Jones & Regehr's multimedia timer), "fixed" (its fix).
    pub mode: Spanned<String>,
    /// Task released by each firing.
    pub task: Spanned<String>,
    #[serde(default)]
    pub cpu: u32,
    /// Cost of the timer DPC that runs the expiry (before the task runs):
    /// a distribution, so a measured wake-up path can be replayed.
    pub dpc_cost: Option<Dist>,
}

#[derive(Deserialize, Clone, Debug)]
#[serde(deny_unknown_fields)]
pub struct ReserveSpec {
    pub amount: Dur,
    pub period: Dur,
    /// "rez", "rez-c", "rez-fb".
    pub kind: Option<Spanned<String>>,
    #[serde(default = "yes")]
    pub hard: bool,
    /// Static over-reservation as a fraction (0.24 = 24% more).
    #[serde(default)]
    pub over: f64,
    /// Rez-FB gain G.
    pub gain: Option<f64>,
    /// Rez-FB request clamps.
    pub min: Option<Dur>,
    pub max: Option<Dur>,
}

#[derive(Deserialize, Clone, Debug)]
#[serde(deny_unknown_fields)]
pub struct CriticalSpec {
    pub lock: Spanned<String>,
    /// Computation before taking the lock.
    #[serde(default)]
    pub at: Dur,
    /// Time the lock is held (computation inside the critical section).
    pub hold: Option<Dist>,
}

#[derive(Deserialize, Clone, Debug)]
#[serde(deny_unknown_fields)]
pub struct TaskSpec {
    pub name: Spanned<String>,
    /// "periodic", "timer" (released by a [[timer]]), "background" (always
    /// busy), "drainer" (woken by data on a [[stream]]), "sleeper" (sleeps
    /// `sleep` after each job).
    pub kind: Spanned<String>,
    #[serde(default)]
    pub cpu: u32,
    pub priority: Option<u8>,
    /// "fixed" (default with a priority), "edf", "timeshare".
    pub class: Option<Spanned<String>>,
    pub reserve: Option<ReserveSpec>,
    pub period: Option<Dur>,
    #[serde(default)]
    pub phase: Dur,
    pub sleep: Option<Dist>,
    pub exec: Option<Dist>,
    /// Relative deadline (default: the period; with `buffers`, (n−1)·period).
    pub deadline: Option<Dur>,
    /// n buffers of one period each: a job finishing later than (n−1)
    /// periods after its release is an underrun (Cota-Robles & Held).
    pub buffers: Option<u32>,
    /// After a job misses its deadline (an underrun), drop the jobs queued
    /// behind it and start again at the next release, as a real consumer
    /// resynchronizes to the next period boundary with its ring refilled
    /// (the buffers in between play as silence). Default false: queued
    /// jobs run late, each a miss of its own.
    #[serde(default)]
    pub refill: bool,
    pub critical: Option<CriticalSpec>,
    /// Stop releasing jobs after this time.
    pub stop: Option<Dur>,
}

#[derive(Deserialize, Clone, Debug)]
#[serde(deny_unknown_fields)]
pub struct LockSpec {
    pub name: Spanned<String>,
    /// "none", "inherit", "ceiling".
    pub protocol: Spanned<String>,
    pub ceiling: Option<u8>,
}

#[derive(Deserialize, Clone, Debug)]
#[serde(deny_unknown_fields)]
pub struct NoiseSpec {
    pub name: Spanned<String>,
    /// "periodic", "poisson", "bursty", "disk".
    pub kind: Spanned<String>,
    #[serde(default)]
    pub cpu: u32,
    /// "dpc" (bottom half, visible to stolen-time instrumentation), "irq"
    /// (hard interrupt, invisible), "stall" (bus stall: stops everything,
    /// the clock too), "steal" (hypervisor: stops the whole vCPU).
    pub level: Option<Spanned<String>>,
    pub period: Option<Dur>,
    #[serde(default)]
    pub phase: Dur,
    #[serde(default)]
    pub jitter: Dur,
    /// Mean arrivals per second (poisson, bursty).
    pub rate: Option<f64>,
    pub duration: Option<Dist>,
    /// bursty: mean length of on and off phases.
    pub burst_on: Option<Dur>,
    pub burst_off: Option<Dur>,
    /// disk: "dma" or "pio", bytes/s delivered by the disk, bytes per
    /// transfer, bytes/s the CPU copies in PIO, interrupt cost per transfer.
    pub mode: Option<Spanned<String>>,
    pub disk_bytes_per_s: Option<f64>,
    pub transfer_bytes: Option<u64>,
    pub pio_bytes_per_s: Option<f64>,
    pub irq_cost: Option<Dur>,
    pub start: Option<Dur>,
    pub stop: Option<Dur>,
}

#[derive(Deserialize, Clone, Debug)]
#[serde(deny_unknown_fields)]
pub struct StreamSpec {
    pub name: Spanned<String>,
    #[serde(default)]
    pub cpu: u32,
    /// Items (packets) per second while sending.
    pub rate: Option<f64>,
    /// Alternative to `rate`: link rate and item size.
    pub mbit_s: Option<f64>,
    pub item_bytes: Option<u64>,
    /// Items the receive buffer holds.
    pub capacity: u64,
    /// true: the sender stops when the buffer is full (TCP window); false:
    /// arrivals into a full buffer are lost (a ring such as VMBus).
    #[serde(default)]
    pub flow_control: bool,
    pub drained_by: Spanned<String>,
    /// Per item: hard-interrupt cost (invisible) and DPC cost (visible).
    #[serde(default)]
    pub irq_cost: Dur,
    #[serde(default)]
    pub dpc_cost: Dur,
    /// "periodic" (default) or "poisson" arrivals.
    pub arrivals: Option<Spanned<String>>,
    pub start: Option<Dur>,
    pub stop: Option<Dur>,
}

/// Plan mode: a time-constraint query (the Rialto talk's `begin_constraint`),
/// asked at `at` for `estimate` of CPU time in `[at+start, at+deadline)`.
#[derive(Deserialize, Clone, Debug)]
#[serde(deny_unknown_fields)]
pub struct ConstraintSpec {
    pub name: Spanned<String>,
    /// The thread that does the work when granted (optional: a query only).
    pub task: Option<Spanned<String>>,
    #[serde(default)]
    pub at: Dur,
    pub start: Dur,
    pub deadline: Dur,
    pub estimate: Dur,
}

#[derive(Deserialize, Clone, Debug, Default)]
#[serde(deny_unknown_fields)]
pub struct ScenarioFile {
    #[serde(default)]
    pub sim: SimSection,
    #[serde(default)]
    pub clock: ClockSection,
    #[serde(default)]
    pub timer: Vec<TimerSpec>,
    #[serde(default)]
    pub task: Vec<TaskSpec>,
    #[serde(default)]
    pub lock: Vec<LockSpec>,
    #[serde(default)]
    pub noise: Vec<NoiseSpec>,
    #[serde(default)]
    pub stream: Vec<StreamSpec>,
    #[serde(default)]
    pub constraint: Vec<ConstraintSpec>,
}

/// A parsed scenario with the text it came from (kept so that semantic
/// errors can be located and the record can carry it).
#[derive(Clone, Debug)]
pub struct Scenario {
    pub file: String,
    pub text: String,
    pub spec: ScenarioFile,
    /// The `--set key=value` overrides applied to `text`: an error whose
    /// place is one of their values names the override, not a place in a
    /// file that does not hold it.
    sets: Vec<(String, String)>,
}

impl Scenario {
    /// Parses `text` (named `file` in errors) after applying `key=value`
    /// overrides. Keys are dotted paths; arrays of tables are addressed by
    /// the entry's `name` or index: `task.t2.reserve.over`, `noise.0.rate`.
    pub fn parse(
        file: &str,
        text: &str,
        overrides: &[(String, String)],
    ) -> Result<Self, ScenarioError> {
        let text = if overrides.is_empty() {
            text.to_string()
        } else {
            apply_overrides(file, text, overrides)?
        };
        let spec: ScenarioFile = toml::from_str(&text).map_err(|e| {
            let message = e.message().trim().to_string();
            match e.span() {
                Some(s) => located(file, &text, overrides, s.start, message),
                None => ScenarioError {
                    file: file.to_string(),
                    line: 0,
                    column: 0,
                    message,
                },
            }
        })?;
        Ok(Scenario {
            file: file.to_string(),
            text,
            spec,
            sets: overrides.to_vec(),
        })
    }

    pub fn error_at(
        &self,
        span: std::ops::Range<usize>,
        message: impl Into<String>,
    ) -> ScenarioError {
        located(
            &self.file,
            &self.text,
            &self.sets,
            span.start,
            message.into(),
        )
    }

    /// An error located at the value of the dotted key `path` (`sim.cpus`)
    /// when the file states it, else at the file alone (the value came
    /// from a default or the command line).
    pub fn error_at_key(&self, path: &[&str], message: impl Into<String>) -> ScenarioError {
        let span = toml_edit::ImDocument::parse(self.text.as_str())
            .ok()
            .and_then(|doc| {
                let mut item = doc.as_item();
                for k in path {
                    item = item.get(k)?;
                }
                item.span()
            });
        match span {
            Some(span) => self.error_at(span, message),
            None => self.error(message),
        }
    }

    /// Whether `sim.on_miss` asks for late jobs to be aborted at their
    /// deadline; refused at its value unless "continue" or "abort".
    pub fn abort_on_miss(&self) -> Result<bool, ScenarioError> {
        match &self.spec.sim.on_miss {
            None => Ok(false),
            Some(v) => match v.get_ref().as_str() {
                "continue" => Ok(false),
                "abort" => Ok(true),
                other => Err(self.error_at(
                    v.span(),
                    format!("sim.on_miss = \"{other}\": expected \"continue\" or \"abort\""),
                )),
            },
        }
    }

    /// Whether `sim.edf_ties` asks for SimSo's rule ("ready"); refused at
    /// its value unless "task" or "ready".
    pub fn edf_ties_by_ready(&self) -> Result<bool, ScenarioError> {
        self.ties_by_ready("edf_ties", &self.spec.sim.edf_ties)
    }

    /// Whether `sim.priority_ties` asks for SimSo's rule ("ready"); refused
    /// at its value unless "task" or "ready".
    pub fn priority_ties_by_ready(&self) -> Result<bool, ScenarioError> {
        self.ties_by_ready("priority_ties", &self.spec.sim.priority_ties)
    }

    fn ties_by_ready(
        &self,
        key: &str,
        field: &Option<Spanned<String>>,
    ) -> Result<bool, ScenarioError> {
        match field {
            None => Ok(false),
            Some(v) => match v.get_ref().as_str() {
                "task" => Ok(false),
                "ready" => Ok(true),
                other => Err(self.error_at(
                    v.span(),
                    format!("sim.{key} = \"{other}\": expected \"task\" or \"ready\""),
                )),
            },
        }
    }

    /// Refuses two entries of one `[[kind]]` with the same name, at the
    /// second one: the record keeps one result per name.
    pub(crate) fn unique_names<T>(
        &self,
        kind: &str,
        items: &[T],
        name: impl Fn(&T) -> &Spanned<String>,
    ) -> Result<BTreeMap<String, usize>, ScenarioError> {
        let mut seen = BTreeMap::new();
        for (i, t) in items.iter().enumerate() {
            let n = name(t);
            if seen.insert(n.get_ref().clone(), i).is_some() {
                return Err(self.error_at(
                    n.span(),
                    format!("two [[{kind}]] entries are named '{}'", n.get_ref()),
                ));
            }
        }
        Ok(seen)
    }

    pub fn error(&self, message: impl Into<String>) -> ScenarioError {
        ScenarioError {
            file: self.file.clone(),
            line: 0,
            column: 0,
            message: message.into(),
        }
    }
}

/// An error at byte `at` of the scenario text: named by the `--set` whose
/// value holds it (the message's own "key = value: " lead dropped, since
/// the override says it), else at its line and column.
fn located(
    file: &str,
    text: &str,
    sets: &[(String, String)],
    at: usize,
    message: String,
) -> ScenarioError {
    if let Some((k, v)) = set_holding(text, sets, at) {
        let lead = format!("{k} = ");
        let message = match message.strip_prefix(&lead).and_then(|m| m.split_once(": ")) {
            Some((_, rest)) => rest.to_string(),
            None => message,
        };
        return ScenarioError {
            file: file.to_string(),
            line: 0,
            column: 0,
            message: format!("--set {k}={v}: {message}"),
        };
    }
    let (line, column) = line_col(text, at);
    ScenarioError {
        file: file.to_string(),
        line,
        column,
        message,
    }
}

/// The override whose value spans byte `at` of `text` (the text after
/// the overrides), found by walking its dotted key as `set_path` does,
/// entries selected by the same [`entry_index`].
fn set_holding<'a>(
    text: &str,
    sets: &'a [(String, String)],
    at: usize,
) -> Option<&'a (String, String)> {
    if sets.is_empty() {
        return None;
    }
    let doc = toml_edit::ImDocument::parse(text).ok()?;
    sets.iter().find(|(key, _)| {
        let mut item = doc.as_item();
        let parts: Vec<&str> = key.split('.').collect();
        let mut i = 0;
        while i < parts.len() {
            let Some(next) = item.get(parts[i]) else {
                return false;
            };
            item = next;
            if let (Some(arr), Some(sel)) = (item.as_array_of_tables(), parts.get(i + 1)) {
                let Some(t) = entry_index(arr, sel).and_then(|n| arr.get(n)) else {
                    return false;
                };
                let Some(rest) = parts.get(i + 2) else {
                    return false;
                };
                let Some(next) = t.get(rest) else {
                    return false;
                };
                item = next;
                i += 3;
                continue;
            }
            i += 1;
        }
        item.span().is_some_and(|s| s.contains(&at))
    })
}

fn apply_overrides(
    file: &str,
    text: &str,
    overrides: &[(String, String)],
) -> Result<String, ScenarioError> {
    let err = |m: String| ScenarioError {
        file: file.to_string(),
        line: 0,
        column: 0,
        message: m,
    };
    let mut doc: toml_edit::DocumentMut = text.parse().map_err(|e: toml_edit::TomlError| {
        let (line, column) = e.span().map(|s| line_col(text, s.start)).unwrap_or((0, 0));
        ScenarioError {
            file: file.to_string(),
            line,
            column,
            message: e.message().trim().to_string(),
        }
    })?;
    for (key, raw) in overrides {
        let parts: Vec<&str> = key.split('.').collect();
        if parts.iter().any(|p| p.is_empty()) {
            return Err(err(format!("--set '{key}': empty path component")));
        }
        // A value that is valid TOML (7, 0.5, true, "x") is taken as such;
        // anything else (2ms, rez-c) as a string.
        let value: toml_edit::Value = format!("v = {raw}")
            .parse::<toml_edit::DocumentMut>()
            .ok()
            .and_then(|d| d.get("v").and_then(|i| i.as_value()).cloned())
            .unwrap_or_else(|| toml_edit::Value::from(raw.as_str()));
        set_path(doc.as_table_mut(), &parts, value, key).map_err(err)?;
    }
    Ok(doc.to_string())
}

fn set_path(
    tl: &mut dyn toml_edit::TableLike,
    parts: &[&str],
    value: toml_edit::Value,
    key: &str,
) -> Result<(), String> {
    let p = parts[0];
    if parts.len() == 1 {
        tl.insert(p, toml_edit::Item::Value(value));
        return Ok(());
    }
    if tl.get(p).is_none() {
        tl.insert(p, toml_edit::Item::Table(toml_edit::Table::new()));
    }
    let child = tl.get_mut(p).expect("present");
    if let Some(arr) = child.as_array_of_tables_mut() {
        let sel = parts[1];
        let Some(t) = entry_index(arr, sel).and_then(|i| arr.get_mut(i)) else {
            return Err(format!(
                "--set '{key}': no [[{p}]] named or numbered '{sel}'"
            ));
        };
        if parts.len() == 2 {
            return Err(format!(
                "--set '{key}': names a whole [[{p}]] entry, not a field"
            ));
        }
        return set_path(t, &parts[2..], value, key);
    }
    if let Some(v) = child.as_value_mut() {
        if let Some(t) = v.as_inline_table_mut() {
            return set_path(t, &parts[1..], value, key);
        }
        return Err(format!("--set '{key}': '{p}' is a value, not a table"));
    }
    let t = child
        .as_table_like_mut()
        .ok_or_else(|| format!("--set '{key}': '{p}' is not a table"))?;
    set_path(t, &parts[1..], value, key)
}

/// The entry of `[[table]]` entries that a `--set` path's selector names:
/// a number is its index, anything else the entry of that `name`.
fn entry_index(arr: &toml_edit::ArrayOfTables, sel: &str) -> Option<usize> {
    match sel.parse::<usize>() {
        Ok(n) => Some(n),
        Err(_) => arr
            .iter()
            .position(|t| t.get("name").and_then(|n| n.as_str()) == Some(sel)),
    }
}

/// Parses a "`a..b/step`" sweep into its values (at most 10 000).
pub fn sweep_values(spec: &str) -> Result<Vec<String>, String> {
    let (range, step) = spec
        .split_once('/')
        .ok_or_else(|| format!("sweep '{spec}' must look like a..b/step"))?;
    let (a, b) = range
        .split_once("..")
        .ok_or_else(|| format!("sweep '{spec}' must look like a..b/step"))?;
    // Durations sweep as durations, everything else as numbers.
    if let (Ok(x), Ok(y), Ok(s)) = (parse_duration(a), parse_duration(b), parse_duration(step)) {
        if s.is_zero() || y < x {
            return Err(format!("sweep '{spec}': step must be positive and a ≤ b"));
        }
        let n = (y.0 - x.0) / s.0 + 1;
        if n > 10_000 {
            return Err(format!("sweep '{spec}' has {n} points; at most 10000"));
        }
        return Ok((0..n).map(|i| format!("\"{}ns\"", x.0 + i * s.0)).collect());
    }
    let p = |t: &str| {
        t.trim()
            .parse::<f64>()
            .map_err(|_| format!("sweep '{spec}': '{t}' is neither a number nor a duration"))
    };
    let (x, y, s) = (p(a)?, p(b)?, p(step)?);
    if s.is_nan() || s <= 0.0 || y < x || !x.is_finite() || !y.is_finite() {
        return Err(format!("sweep '{spec}': step must be positive and a ≤ b"));
    }
    let n = ((y - x) / s + 1e-9).floor() as u64 + 1;
    if n > 10_000 {
        return Err(format!("sweep '{spec}' has {n} points; at most 10000"));
    }
    let integral = [a, b, step].iter().all(|t| t.trim().parse::<i64>().is_ok());
    Ok((0..n)
        .map(|i| {
            let v = x + i as f64 * s;
            if integral {
                format!("{}", v.round() as i64)
            } else {
                let r = (v * 1e9).round() / 1e9;
                format!("{r:?}")
            }
        })
        .collect())
}

/// Splits "`key=value`".
pub fn parse_set(s: &str) -> Result<(String, String), String> {
    let (k, v) = s
        .split_once('=')
        .ok_or_else(|| format!("'{s}' must look like key=value"))?;
    if k.trim().is_empty() {
        return Err(format!("'{s}': empty key"));
    }
    Ok((k.trim().to_string(), v.trim().to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn picoseconds_are_exact() {
        assert_eq!(parse_picos("976.5625us").unwrap(), Picos(976_562_500));
        assert_eq!(parse_picos("1ms").unwrap(), Picos(1_000_000_000));
        assert!(parse_picos("1").is_err());
        assert!(parse_picos("0ms").is_err());
    }

    #[test]
    fn errors_name_file_line_and_field() {
        let text = "[sim]\nduration = \"1s\"\n\n[[task]]\nname = \"a\"\nkind = \"periodic\"\nperiodd = \"1ms\"\n";
        let e = Scenario::parse("x.toml", text, &[]).unwrap_err();
        assert_eq!(e.line, 7, "{e}");
        assert!(e.to_string().starts_with("x.toml:7:"), "{e}");
        assert!(e.message.contains("periodd"), "{e}");
        let e = Scenario::parse("x.toml", "[sim]\nduration = \"-1ms\"\n", &[]).unwrap_err();
        assert_eq!(e.line, 2, "{e}");
        assert!(e.message.contains("-1ms"), "{e}");
    }

    /// A bad value given by `--set` is named by the override, not by a
    /// place in the file (which does not hold it); a bad value the file
    /// holds is still named by its line.
    #[test]
    fn an_error_in_a_set_value_names_the_set() {
        let text = "[sim]\nduration = \"1s\"\n\n[[task]]\nname = \"a\"\nkind = \"periodic\"\nperiod = \"1ms\"\n";
        let set = |k: &str, v: &str| vec![(k.to_string(), v.to_string())];
        let scn = Scenario::parse("x.toml", text, &set("sim.cpus", "0")).unwrap();
        let e = scn.error_at_key(&["sim", "cpus"], "sim.cpus = 0: must be 1 to 256");
        assert_eq!(e.to_string(), "x.toml: --set sim.cpus=0: must be 1 to 256");
        let e = Scenario::parse("x.toml", text, &set("task.a.period", "-1ms")).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("x.toml: --set task.a.period=-1ms: "),
            "{e}"
        );
        let e = Scenario::parse("x.toml", text, &set("sim.cpus", "two")).unwrap_err();
        assert!(
            e.to_string().starts_with("x.toml: --set sim.cpus=two: "),
            "{e}"
        );
        let bad = "[sim]\nduration = \"-1ms\"\n";
        let e = Scenario::parse("x.toml", bad, &set("sim.cpus", "2")).unwrap_err();
        assert_eq!(e.line, 2, "{e}");
    }

    #[test]
    fn overrides_reach_named_entries() {
        let text = "[sim]\nduration = \"1s\"\n[[task]]\nname = \"a\"\nkind = \"periodic\"\nperiod = \"1ms\"\n[[task]]\nname = \"b\"\nkind = \"background\"\n";
        let s = Scenario::parse(
            "x",
            text,
            &[
                ("task.b.priority".into(), "7".into()),
                ("sim.duration".into(), "2s".into()),
                ("task.0.period".into(), "\"3ms\"".into()),
            ],
        )
        .unwrap();
        assert_eq!(s.spec.task[1].priority, Some(7));
        assert_eq!(s.spec.task[0].period, Some(Dur(Nanos::from_ms(3))));
        assert_eq!(s.spec.sim.duration, Some(Dur(Nanos::from_secs(2))));
        assert!(Scenario::parse("x", text, &[("task.zz.priority".into(), "1".into())]).is_err());
    }

    fn dist(text: &str) -> Result<Dist, String> {
        #[derive(Deserialize)]
        struct W {
            #[allow(dead_code)]
            d: Dist,
        }
        toml::from_str::<W>(&format!("d = {text}"))
            .map(|w| w.d)
            .map_err(|e| e.message().to_string())
    }

    #[test]
    fn cdf_distributions_parse_and_refuse_bad_curves() {
        let d =
            dist(r#"{ cdf = [[0.0, "1us"], [0.5, "1us"], [0.5, "3us"], [1.0, "5us"]] }"#).unwrap();
        let Dist::Cdf(c) = &d else { panic!("{d:?}") };
        // Half an atom at 1 µs, half uniform on 3..5 µs.
        assert_eq!(d.mean(), Nanos(2_500));
        assert_eq!(d.max(), Nanos::from_us(5));
        assert_eq!(c.at(0.0), Nanos::from_us(1));
        assert_eq!(c.at(0.49), Nanos::from_us(1));
        assert_eq!(c.at(0.5), Nanos::from_us(3));
        assert_eq!(c.at(0.75), Nanos::from_us(4));
        for bad in [
            r#"{ cdf = [[0.0, "1us"]] }"#,
            r#"{ cdf = [[0.1, "1us"], [1.0, "2us"]] }"#,
            r#"{ cdf = [[0.0, "1us"], [0.9, "2us"]] }"#,
            r#"{ cdf = [[0.0, "1us"], [0.6, "2us"], [0.5, "3us"], [1.0, "4us"]] }"#,
            r#"{ cdf = [[0.0, "3us"], [1.0, "2us"]] }"#,
            r#"{ cdf = [[0.0, "1us"], [1.0, "2us"]], exp = "1us" }"#,
        ] {
            let e = dist(bad).unwrap_err();
            assert!(e.contains("cdf") || e.contains("exactly one"), "{bad}: {e}");
        }
    }

    #[test]
    fn cdf_draws_follow_the_curve_and_repeat_with_the_seed() {
        let Dist::Cdf(c) =
            dist(r#"{ cdf = [[0.0, "0ns"], [0.9, "10us"], [1.0, "1ms"]] }"#).unwrap()
        else {
            unreachable!()
        };
        let d = Dist::Cdf(c);
        let draw = |seed| {
            let mut rng = crate::rng::Rng::new(seed, 1);
            (0..100_000)
                .map(|_| crate::engine::sample(&d, &mut rng))
                .collect::<Vec<_>>()
        };
        let a = draw(7);
        assert_eq!(a, draw(7));
        assert_ne!(a, draw(8));
        let above = a.iter().filter(|x| **x > Nanos::from_us(10)).count();
        // P(X > 10 µs) = 0.1: 10 000 ± 5 σ (σ ≈ 95).
        assert!((9_525..=10_475).contains(&above), "{above}");
        let mean = a.iter().map(|x| x.0).sum::<u64>() as f64 / a.len() as f64;
        let want = d.mean().0 as f64;
        assert!((mean - want).abs() < want * 0.05, "{mean} vs {want}");
    }

    #[test]
    fn sweeps() {
        assert_eq!(sweep_values("1..3/1").unwrap(), vec!["1", "2", "3"]);
        assert_eq!(
            sweep_values("-0.1..0.1/0.1").unwrap(),
            vec!["-0.1", "0.0", "0.1"]
        );
        assert_eq!(sweep_values("1ms..2ms/500us").unwrap().len(), 3);
        assert!(sweep_values("3..1/1").is_err());
        assert!(sweep_values("1..3").is_err());
    }
}
