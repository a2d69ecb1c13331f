//! Measuring again as a record was measured: its `config` (written by
//! [`crate::config`]) is read back into the probe settings, loads and
//! tracing of the first run, so a second run after a fix differs from the
//! first by the fix alone. `punctual advise --apply --verify` stands on it.
//!
//! A `timer` or `noise` record (also one taken with `--cause`) gives one
//! probe with its loads; a `check` record gives its two halves, wake-up
//! latency then stolen time, with the loads running through both; a
//! `cause` record gives its probe and the recorder's settings.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use punctual_live::cstate::CStateRequest;
use punctual_live::noise::NoiseConfig;
use punctual_live::rt::Policy;
use punctual_live::timer::{TimerClock, TimerConfig};
use punctual_loads::LoadSpec;
use punctual_record::{Nanos, Platform, Record};
use punctual_trace::recorder::Options;
use serde_json::Value;

use crate::probe::{Noise, Probe, Timer};
use crate::session::{finish_record, ProbeRequest, Runner, Session, Tracing};
use crate::MeasureError;

/// What a second run may change from the first. `None` keeps the
/// record's own setting.
#[derive(Clone, Debug, Default)]
pub struct Overrides {
    /// The whole run's length (a check splits it in halves as `check`
    /// does).
    pub duration: Option<Nanos>,
    /// The CPUs measured.
    pub cpus: Option<Vec<u32>>,
    /// The loads, instead of the record's `config.load`.
    pub loads: Option<Vec<LoadSpec>>,
    /// Tracing, instead of what the record's `config.cause` says.
    pub tracing: Option<Tracing>,
    /// The timer probe's policy, instead of the record's: a reservation is
    /// verified by running the probed task inside it (SCHED_DEADLINE at
    /// the fix's budget and period), which is what the fix changes.
    pub timer_policy: Option<Policy>,
    /// The busy loop's policy, instead of the record's. Kept apart from
    /// the timer's: a busy loop inside a reservation's budget would count
    /// the reservation's own throttling as stolen time, so it is given a
    /// budget of its whole period instead.
    pub noise_policy: Option<Policy>,
}

/// One probe's settings, as the record says they were.
#[derive(Clone, Debug)]
pub enum ProbeSettings {
    Timer(TimerConfig),
    Noise(NoiseConfig),
}

impl ProbeSettings {
    pub fn cpus(&self) -> &[u32] {
        match self {
            ProbeSettings::Timer(c) => &c.cpus,
            ProbeSettings::Noise(c) => &c.cpus,
        }
    }

    pub fn duration(&self) -> Nanos {
        match self {
            ProbeSettings::Timer(c) => c.duration,
            ProbeSettings::Noise(c) => c.duration,
        }
    }

    fn probe(&self) -> Arc<dyn Probe> {
        match self {
            ProbeSettings::Timer(c) => Arc::new(Timer {
                cfg: c.clone(),
                replay: None,
            }),
            ProbeSettings::Noise(c) => Arc::new(Noise {
                cfg: c.clone(),
                replay: None,
            }),
        }
    }

    fn label(&self) -> &'static str {
        match self {
            ProbeSettings::Timer(_) => "timer",
            ProbeSettings::Noise(_) => "noise",
        }
    }
}

/// A run rebuilt from a record.
#[derive(Clone, Debug)]
pub struct Again {
    /// The record's `kind` (`timer`, `noise`, `check`, `cause`).
    pub kind: String,
    /// One probe, or a check's two halves in the order they run.
    pub probes: Vec<ProbeSettings>,
    /// The loads, run for the whole of [`Again::duration`].
    pub loads: Vec<LoadSpec>,
    pub tracing: Tracing,
    /// The C-states the first run held (`config.c_states`), held again
    /// through the whole run so the two differ only by what changed.
    pub c_states: CStateRequest,
}

impl Again {
    /// The whole run's length: the probes run one after the other.
    pub fn duration(&self) -> Nanos {
        self.probes
            .iter()
            .fold(Nanos::ZERO, |a, p| a + p.duration())
    }

    /// The requests a [`Session`] runs, one per probe. A single probe's
    /// request carries the loads; a check's halves carry none, because
    /// its loads run through both (as [`run_again`] starts them).
    pub fn requests(&self) -> Vec<ProbeRequest> {
        let kind: &'static str = match self.kind.as_str() {
            "timer" => "timer",
            "noise" => "noise",
            "cause" => "cause",
            _ => "check",
        };
        let one = self.probes.len() == 1;
        self.probes
            .iter()
            .map(|p| ProbeRequest {
                kind,
                label: p.label(),
                probe: p.probe(),
                loads: if one { self.loads.clone() } else { Vec::new() },
                tracing: self.tracing.clone(),
            })
            .collect()
    }
}

fn usage(m: String) -> MeasureError {
    MeasureError::Usage(m)
}

/// Rebuilds the run that made `rec`, with `o` applied.
pub fn again(rec: &Record, o: &Overrides) -> Result<Again, MeasureError> {
    if let Some(Value::String(p)) = rec.config.get("replay") {
        return Err(usage(format!(
            "the record was replayed from {p}, not measured on this machine; measuring again needs a measured record"
        )));
    }
    if let (Some(Value::String(k)), "timer" | "noise") =
        (rec.config.get("probe"), rec.kind.as_str())
    {
        return Err(usage(format!(
            "the record was measured by the kernel's {k} tracer (config.probe), and measuring again repeats punctual's own probes only; run 'punctual {} --probe {k}' again",
            rec.kind
        )));
    }
    let cfg = Config(rec);
    let probes = match rec.kind.as_str() {
        "timer" => vec![ProbeSettings::Timer(cfg.timer("")?)],
        "noise" => vec![ProbeSettings::Noise(cfg.noise("")?)],
        "cause" => match cfg.str("probe")? {
            "timer" => vec![ProbeSettings::Timer(cfg.timer("")?)],
            "noise" => vec![ProbeSettings::Noise(cfg.noise("")?)],
            other => {
                return Err(usage(format!(
                    "the record's config.probe is '{other}', not timer or noise"
                )))
            }
        },
        "check" => vec![
            ProbeSettings::Timer(cfg.timer("timer.")?),
            ProbeSettings::Noise(cfg.noise("noise.")?),
        ],
        other => {
            return Err(usage(format!(
                "a '{other}' record holds no probe run to repeat; give a check, timer, noise or cause record"
            )))
        }
    };
    let loads = match &o.loads {
        Some(l) => l.clone(),
        None => cfg.loads()?,
    };
    let tracing = match &o.tracing {
        Some(t) => t.clone(),
        None => cfg.tracing()?,
    };
    let mut a = Again {
        kind: rec.kind.clone(),
        probes,
        loads,
        tracing,
        c_states: CStateRequest::in_force(rec.config.get("c_states")),
    };
    if let Some(c) = &o.cpus {
        for p in &mut a.probes {
            match p {
                ProbeSettings::Timer(t) => t.cpus = c.clone(),
                ProbeSettings::Noise(n) => n.cpus = c.clone(),
            }
        }
    }
    for p in &mut a.probes {
        match p {
            ProbeSettings::Timer(t) => t.policy = o.timer_policy.unwrap_or(t.policy),
            ProbeSettings::Noise(n) => n.policy = o.noise_policy.unwrap_or(n.policy),
        }
    }
    if let Some(d) = o.duration {
        let n = a.probes.len() as u64;
        let each = d / n;
        let last = d - each * (n - 1);
        for (i, p) in a.probes.iter_mut().enumerate() {
            let v = if i as u64 + 1 == n { last } else { each };
            match p {
                ProbeSettings::Timer(t) => t.duration = v,
                ProbeSettings::Noise(s) => s.duration = v,
            }
        }
    }
    Ok(a)
}

/// Runs `a` and returns its record: the platform, each probe's settings
/// under the keys the first record had, the loads through the whole run,
/// the probes' series, spikes, stolen time and attribution. A check's
/// verdicts are the command line's to add (`punctual check` prints and
/// stores them from this record).
pub fn run_again(
    stop: Arc<AtomicBool>,
    runner: &dyn Runner,
    a: &Again,
    started_at: String,
) -> Result<Record, MeasureError> {
    let mut cpus: Vec<u32> = a.probes.iter().flat_map(|p| p.cpus().to_vec()).collect();
    cpus.sort_unstable();
    cpus.dedup();
    punctual_live::cstate::holding(Some(a.c_states), &cpus, || {
        measure(stop, runner, a, started_at)
    })
}

/// [`run_again`]'s measurement, while the C-states are held.
fn measure(
    stop: Arc<AtomicBool>,
    runner: &dyn Runner,
    a: &Again,
    started_at: String,
) -> Result<Record, MeasureError> {
    let session = Session::new(stop, runner);
    let reqs = a.requests();
    if reqs.len() == 1 {
        return Ok(session.run(&reqs[0], started_at)?.record);
    }
    let mut rec = session.new_record(&a.kind, started_at);
    for (r, prefix) in reqs.iter().zip(["timer.", "noise."]) {
        r.probe.set_config(&mut rec, prefix);
    }
    rec.set_config(
        "split",
        "sequential: timer for the first half, noise for the second",
    );
    let loads = crate::loads::start(&a.loads, a.duration())?;
    let mut elapsed = session.measure(&mut rec, &reqs[0], None)?.elapsed;
    let mut part = Record::new(rec.source, &a.kind, Platform::default());
    elapsed += session.measure(&mut part, &reqs[1], None)?.elapsed;
    crate::merge::merge_noise_half(&mut rec, part);
    crate::loads::finish(loads, &a.loads, &mut rec);
    finish_record(&mut rec, elapsed, a.duration());
    Ok(rec)
}

/// A record's `config`, read with one sentence for what is missing.
struct Config<'a>(&'a Record);

impl Config<'_> {
    fn get(&self, key: &str) -> Result<&Value, MeasureError> {
        self.0.config.get(key).ok_or_else(|| {
            usage(format!(
                "the record's config has no '{key}', so the run cannot be repeated as it was; it was written by another version of punctual, or by hand"
            ))
        })
    }

    fn bad(key: &str, v: &Value, want: &str) -> MeasureError {
        usage(format!("the record's config.{key} is {v}, not {want}"))
    }

    fn u64(&self, key: &str) -> Result<u64, MeasureError> {
        let v = self.get(key)?;
        v.as_u64()
            .ok_or_else(|| Self::bad(key, v, "a whole number"))
    }

    fn str(&self, key: &str) -> Result<&str, MeasureError> {
        let v = self.get(key)?;
        v.as_str().ok_or_else(|| Self::bad(key, v, "a string"))
    }

    fn bool(&self, key: &str) -> Result<bool, MeasureError> {
        let v = self.get(key)?;
        v.as_bool()
            .ok_or_else(|| Self::bad(key, v, "true or false"))
    }

    fn cpus(&self, key: &str) -> Result<Vec<u32>, MeasureError> {
        let v = self.get(key)?;
        let bad = || Self::bad(key, v, "a list of CPU numbers");
        let list = v.as_array().ok_or_else(bad)?;
        list.iter()
            .map(|c| {
                c.as_u64()
                    .and_then(|c| u32::try_from(c).ok())
                    .ok_or_else(bad)
            })
            .collect()
    }

    fn policy(&self, key: &str) -> Result<Policy, MeasureError> {
        let text = self.str(key)?;
        parse_policy(text).ok_or_else(|| {
            usage(format!(
                "the record's config.{key} '{text}' is not a policy punctual writes (other (nice N), fifo:P, rr:P, deadline:R/P)"
            ))
        })
    }

    fn timer(&self, p: &str) -> Result<TimerConfig, MeasureError> {
        let k = |s: &str| format!("{p}{s}");
        let clock = match self.str(&k("clock"))? {
            "nanosleep" => TimerClock::Nanosleep,
            "timerfd" => TimerClock::Timerfd,
            other => {
                return Err(usage(format!(
                    "the record's config.{}clock '{other}' is not nanosleep or timerfd",
                    p
                )))
            }
        };
        Ok(TimerConfig {
            cpus: self.cpus(&k("cpus"))?,
            policy: self.policy(&k("policy"))?,
            interval: Nanos(self.u64(&k("interval_ns"))?),
            duration: Nanos(self.u64(&k("duration_ns"))?),
            clock,
            threshold: Nanos(self.u64(&k("threshold_ns"))?),
            max_spikes: self.u64(&k("max_spikes"))? as usize,
            lock_memory: self.bool(&k("mlock"))?,
            // A second run measures like the first; it neither stops at a
            // threshold nor writes raw samples.
            stop_at: None,
            samples: None,
        })
    }

    fn noise(&self, p: &str) -> Result<NoiseConfig, MeasureError> {
        let k = |s: &str| format!("{p}{s}");
        let threshold = match self.get(&k("threshold_ns"))? {
            Value::String(s) if s == "auto" => None,
            v => Some(Nanos(v.as_u64().ok_or_else(|| {
                Self::bad(&k("threshold_ns"), v, "a number or \"auto\"")
            })?)),
        };
        let stretch = match self.0.config.get(&k("stretch")) {
            None => None,
            Some(v) => {
                let f = |n: &str| v.get(n).and_then(Value::as_u64).map(Nanos);
                Some(
                    f("poll_ns")
                        .zip(f("rest_ns"))
                        .ok_or_else(|| Self::bad(&k("stretch"), v, "{poll_ns, rest_ns}"))?,
                )
            }
        };
        Ok(NoiseConfig {
            cpus: self.cpus(&k("cpus"))?,
            policy: self.policy(&k("policy"))?,
            duration: Nanos(self.u64(&k("duration_ns"))?),
            threshold,
            max_spikes: self.u64(&k("max_spikes"))? as usize,
            lock_memory: self.bool(&k("mlock"))?,
            stretch,
            stop_at: None,
            samples: None,
        })
    }

    fn loads(&self) -> Result<Vec<LoadSpec>, MeasureError> {
        let Some(v) = self.0.config.get("load") else {
            return Ok(Vec::new());
        };
        let list = v
            .as_array()
            .ok_or_else(|| Self::bad("load", v, "a list of load specs"))?;
        let mut out = Vec::new();
        for s in list {
            let t = s
                .as_str()
                .ok_or_else(|| Self::bad("load", v, "a list of load specs"))?;
            out.extend(LoadSpec::parse_list(t).map_err(|e| usage(e.to_string()))?);
        }
        Ok(out)
    }

    fn tracing(&self) -> Result<Tracing, MeasureError> {
        let c = &self.0.config;
        let threshold = c
            .get("cause_threshold_ns")
            .and_then(Value::as_u64)
            .map(Nanos);
        if self.0.kind == "cause" {
            let mut options = Options::default();
            if let Some(kb) = c.get("buffer_kb").and_then(Value::as_u64) {
                options.buffer_kb = u32::try_from(kb)
                    .map_err(|_| Self::bad("buffer_kb", &c["buffer_kb"], "a ring size in KiB"))?;
            }
            if let Some(w) = c.get("wakeups").and_then(Value::as_bool) {
                options.wakeups = w;
            }
            return Ok(Tracing::Recorder {
                options,
                trace: c.get("tracing").and_then(Value::as_bool).unwrap_or(true),
                threshold,
                neighbor: c.get("neighbor").and_then(Value::as_bool).unwrap_or(false),
            });
        }
        Ok(match c.get("cause").and_then(Value::as_bool) {
            Some(true) => Tracing::Attach {
                threshold,
                evidence: Default::default(),
            },
            _ => Tracing::Off,
        })
    }
}

/// Reads back what [`punctual_live::setup::policy_label`] writes.
pub fn parse_policy(text: &str) -> Option<Policy> {
    let t = text.trim();
    if let Some(n) = t
        .strip_prefix("other (nice ")
        .and_then(|r| r.strip_suffix(')'))
    {
        return n.trim().parse().ok().map(|nice| Policy::Other { nice });
    }
    if let Some(p) = t.strip_prefix("fifo:") {
        return p.parse().ok().map(|priority| Policy::Fifo { priority });
    }
    if let Some(p) = t.strip_prefix("rr:") {
        return p.parse().ok().map(|priority| Policy::Rr { priority });
    }
    let (r, p) = t.strip_prefix("deadline:")?.split_once('/')?;
    let (runtime, period): (Nanos, Nanos) = (r.parse().ok()?, p.parse().ok()?);
    Some(Policy::Deadline {
        runtime,
        deadline: period,
        period,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::Quiet;
    use punctual_live::setup::policy_label;
    use punctual_record::Source;

    fn timer_cfg() -> TimerConfig {
        TimerConfig {
            cpus: vec![0, 1],
            policy: Policy::Fifo { priority: 95 },
            interval: Nanos::from_us(250),
            duration: Nanos::from_ms(20),
            clock: TimerClock::Timerfd,
            threshold: Nanos::from_us(30),
            max_spikes: 17,
            lock_memory: true,
            stop_at: None,
            samples: None,
        }
    }

    fn noise_cfg() -> NoiseConfig {
        NoiseConfig {
            cpus: vec![1],
            policy: Policy::Rr { priority: 40 },
            duration: Nanos::from_ms(30),
            threshold: None,
            max_spikes: 9,
            lock_memory: false,
            stretch: Some((Nanos::from_ms(450), Nanos::from_ms(300))),
            stop_at: None,
            samples: None,
        }
    }

    fn same<T: std::fmt::Debug>(a: &T, b: &T) {
        assert_eq!(format!("{a:?}"), format!("{b:?}"));
    }

    /// A timer record made by a session (here on a replayed feed, so the
    /// config is written by the same code a live run uses) gives back the
    /// request it was made from.
    #[test]
    fn a_timer_records_config_round_trips_into_the_same_request() {
        let cfg = timer_cfg();
        let req = ProbeRequest {
            kind: "timer",
            label: "timer",
            probe: Arc::new(Timer {
                cfg: cfg.clone(),
                replay: Some((0..40).map(|i| Nanos::from_us(2 + i % 5)).collect()),
            }),
            loads: Vec::new(),
            tracing: Tracing::Off,
        };
        let rec = Session::new(Arc::new(AtomicBool::new(false)), &Quiet)
            .run(&req, "2026-01-01T00:00:00Z".into())
            .unwrap()
            .record;
        let a = again(&rec, &Overrides::default()).unwrap();
        assert_eq!(a.kind, "timer");
        assert_eq!(a.probes.len(), 1);
        match &a.probes[0] {
            ProbeSettings::Timer(t) => same(t, &cfg),
            p => panic!("{p:?}"),
        }
        assert!(a.loads.is_empty());
        assert!(matches!(a.tracing, Tracing::Off));
        let reqs = a.requests();
        assert_eq!((reqs[0].kind, reqs[0].label), ("timer", "timer"));
        // The rebuilt request writes the same config again.
        let mut again_rec = Record::new(Source::Measured, "timer", Platform::default());
        reqs[0].probe.set_config(&mut again_rec, "");
        for (k, v) in &again_rec.config {
            assert_eq!(rec.config.get(k), Some(v), "{k}");
        }
    }

    /// A check record's two halves, its loads and its tracing come back,
    /// and an override of the duration splits it as check does.
    #[test]
    fn a_check_records_config_round_trips_into_both_halves() {
        let (t, n) = (timer_cfg(), noise_cfg());
        let mut rec = Record::new(Source::Measured, "check", Platform::default());
        Timer {
            cfg: t.clone(),
            replay: None,
        }
        .set_config(&mut rec, "timer.");
        Noise {
            cfg: n.clone(),
            replay: None,
        }
        .set_config(&mut rec, "noise.");
        let specs = LoadSpec::parse_list("cpu:threads=2+disk:direct,irq-cpu=1").unwrap();
        rec.set_config(
            "load",
            specs.iter().map(|s| s.text.clone()).collect::<Vec<_>>(),
        );
        rec.set_config("cause", true);
        rec.set_config("cause_threshold_ns", 50_000u64);
        let a = again(&rec, &Overrides::default()).unwrap();
        match (&a.probes[0], &a.probes[1]) {
            (ProbeSettings::Timer(t2), ProbeSettings::Noise(n2)) => {
                same(t2, &t);
                same(n2, &n);
            }
            p => panic!("{p:?}"),
        }
        same(&a.loads, &specs);
        assert!(matches!(
            a.tracing,
            Tracing::Attach {
                threshold: Some(Nanos(50_000)),
                ..
            }
        ));
        assert_eq!(a.duration(), t.duration + n.duration);
        let reqs = a.requests();
        assert_eq!(reqs.len(), 2);
        assert!(reqs.iter().all(|r| r.kind == "check" && r.loads.is_empty()));
        assert_eq!((reqs[0].label, reqs[1].label), ("timer", "noise"));

        let o = Overrides {
            duration: Some(Nanos::from_ms(1001)),
            cpus: Some(vec![1]),
            loads: Some(Vec::new()),
            tracing: Some(Tracing::Off),
            ..Default::default()
        };
        let b = again(&rec, &o).unwrap();
        assert_eq!(b.probes[0].duration(), Nanos::from_us(500_500));
        assert_eq!(b.duration(), Nanos::from_ms(1001));
        assert!(b.loads.is_empty() && matches!(b.tracing, Tracing::Off));
        match &b.probes[1] {
            ProbeSettings::Noise(n2) => assert_eq!(n2.cpus, vec![1]),
            p => panic!("{p:?}"),
        }

        // Each half's policy is overridden on its own; the other keeps
        // the record's.
        let dl = Policy::Deadline {
            runtime: Nanos::from_us(525),
            deadline: Nanos::from_ms(2),
            period: Nanos::from_ms(2),
        };
        let c = again(
            &rec,
            &Overrides {
                timer_policy: Some(dl),
                ..Default::default()
            },
        )
        .unwrap();
        match (&c.probes[0], &c.probes[1]) {
            (ProbeSettings::Timer(t2), ProbeSettings::Noise(n2)) => {
                assert_eq!(t2.policy, dl);
                assert_eq!(n2.policy, n.policy);
            }
            p => panic!("{p:?}"),
        }
    }

    /// Measuring a check again live gives a check record whose config is
    /// the first one's, with both halves' series.
    #[test]
    fn a_check_measured_again_has_the_first_runs_config_and_both_halves() {
        let mut first = Record::new(Source::Measured, "check", Platform::default());
        let mut t = timer_cfg();
        let mut n = noise_cfg();
        (t.duration, n.duration, t.cpus, n.cpus) =
            (Nanos::from_ms(60), Nanos::from_ms(60), vec![0], vec![0]);
        (t.policy, n.policy, n.stretch) =
            (Policy::Other { nice: 0 }, Policy::Other { nice: 0 }, None);
        Timer {
            cfg: t,
            replay: None,
        }
        .set_config(&mut first, "timer.");
        Noise {
            cfg: n,
            replay: None,
        }
        .set_config(&mut first, "noise.");
        let a = again(&first, &Overrides::default()).unwrap();
        let rec = run_again(
            Arc::new(AtomicBool::new(false)),
            &Quiet,
            &a,
            "2026-01-01T00:00:00Z".into(),
        )
        .unwrap();
        assert_eq!(rec.kind, "check");
        for (k, v) in &first.config {
            assert_eq!(rec.config.get(k), Some(v), "{k}");
        }
        let metrics: Vec<_> = rec.series.iter().map(|s| s.metric).collect();
        assert!(
            metrics.contains(&punctual_record::Metric::Latency),
            "{metrics:?}"
        );
        assert!(metrics.len() >= 2, "{metrics:?}");
        assert!(
            rec.duration_ns >= Nanos::from_ms(100),
            "{}",
            rec.duration_ns
        );
    }

    #[test]
    fn every_policy_label_reads_back() {
        for p in [
            Policy::Other { nice: -5 },
            Policy::Other { nice: 0 },
            Policy::Fifo { priority: 99 },
            Policy::Rr { priority: 1 },
            Policy::Deadline {
                runtime: Nanos::from_us(300),
                deadline: Nanos::from_ms(1),
                period: Nanos::from_ms(1),
            },
        ] {
            assert_eq!(parse_policy(&policy_label(p)), Some(p), "{p:?}");
        }
        assert_eq!(parse_policy("batch"), None);
    }

    #[test]
    fn a_record_that_cannot_be_repeated_says_why_in_one_sentence() {
        let mut rec = Record::new(Source::Measured, "timer", Platform::default());
        let e = again(&rec, &Overrides::default()).unwrap_err();
        assert!(
            matches!(&e, MeasureError::Usage(m) if m.contains("no 'clock'")),
            "{e}"
        );
        rec.set_config("probe", "timerlat");
        let e = again(&rec, &Overrides::default()).unwrap_err();
        assert!(
            matches!(&e, MeasureError::Usage(m) if m.contains("punctual timer --probe timerlat")),
            "{e}"
        );
        rec.set_config("replay", "feed.txt");
        let e = again(&rec, &Overrides::default()).unwrap_err();
        assert!(e.to_string().contains("replayed from feed.txt"), "{e}");
        let rec = Record::new(Source::Measured, "forecast", Platform::default());
        let e = again(&rec, &Overrides::default()).unwrap_err();
        assert!(e.to_string().contains("'forecast' record"), "{e}");
        let mut rec = Record::new(Source::Measured, "noise", Platform::default());
        Noise {
            cfg: noise_cfg(),
            replay: None,
        }
        .set_config(&mut rec, "");
        rec.set_config("policy", "batch");
        let e = again(&rec, &Overrides::default()).unwrap_err();
        assert!(e.to_string().contains("'batch'"), "{e}");
    }

    /// A cause record's recorder settings come back.
    #[test]
    fn a_cause_records_recorder_settings_come_back() {
        let mut rec = Record::new(Source::Measured, "cause", Platform::default());
        Noise {
            cfg: noise_cfg(),
            replay: None,
        }
        .set_config(&mut rec, "");
        rec.set_config("probe", "noise");
        rec.set_config("buffer_kb", 4096u32);
        rec.set_config("tracing", true);
        rec.set_config("neighbor", true);
        rec.set_config("wakeups", true);
        let a = again(&rec, &Overrides::default()).unwrap();
        assert_eq!(a.requests()[0].kind, "cause");
        match a.tracing {
            Tracing::Recorder {
                options,
                trace,
                threshold,
                neighbor,
            } => {
                assert_eq!((options.buffer_kb, options.wakeups), (4096, true));
                assert!(trace && neighbor && threshold.is_none());
            }
            t => panic!("{t:?}"),
        }
    }
}
