//! Which fix buys the most, predicted from the record (`punctual advise`).
//!
//! Every prediction edits the measured data and reads it again the way
//! `check` and `forecast` do; none comes from a rule of thumb. A fix that
//! takes a named source off the CPU (an interrupt routed elsewhere, a
//! thread moved or lowered below the task, RT throttling lifted, C-states
//! held shallow, a preemptible kernel) is predicted by taking that
//! source's attributed time out of every logged spike and stolen interval
//! it appears in: the spike's wake-up (or gap) shrinks by that much in the
//! series' histogram, a gap that falls below the stolen threshold stops
//! counting, the CPU's stolen total loses the source's share, and the
//! queue model re-forecasts the MTTF from the edited latency and gap
//! processes and the edited spike log, its fitted tail held at or below
//! the record's so that taking time out can only lengthen it. What the attribution left unnamed (entry/exit, hypervisor
//! time, spikes beyond the log) stays, and the source's own attributed
//! time is removed whole, so a prediction is the most the fix can give
//! for that source's part (docs/advise.md).

use std::collections::{BTreeMap, BTreeSet};

use punctual_record::cause::CauseSummary;
use punctual_record::fix_preemptible as preemptible;
use punctual_record::{
    Fix, FixFigures, Metric, Nanos, Platform, ProfileFigure, Record, Series, SourceShare,
    VerdictState,
};
use serde_json::{json, Value};

use crate::buffer::{least_buffers, mttf, Buffering};
use crate::forecast::{GapStalls, TailModel};
use crate::profiles::Profile;
use crate::tail::Tail;
use crate::verdict::state_of;

/// An unbounded MTTF ("no underrun predicted") counts as this many seconds
/// in the ranking, about 30 000 years: more than any target.
pub const UNBOUNDED_MTTF_S: f64 = 1e12;

/// The resolution of the ranking's gain (log10 of the summed MTTF ratios).
pub const GAIN_STEP: f64 = 0.1;

/// Named sources tried one by one as "move" or "priority" fixes, largest
/// first: past these the shares are too small to change a tail.
pub const MAX_SOURCES: usize = 8;

/// Why a record cannot be advised on.
#[derive(Debug, Clone, PartialEq)]
pub enum AdviseError {
    /// The record has no cause attribution to edit.
    NoCause,
    /// Not a probe record (`check`, `timer`, `noise`, `cause`).
    Kind(String),
    /// No latency or gap series to read percentiles from.
    NoSeries,
}

impl std::fmt::Display for AdviseError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AdviseError::NoCause => write!(
                f,
                "the record has no cause attribution, so no source can be taken out of it: \
                 measure again with --cause (punctual check --cause, timer --cause or noise --cause)"
            ),
            AdviseError::Kind(k) => write!(
                f,
                "a '{k}' record cannot be advised on: give a check, timer, noise or cause record \
                 taken with --cause, or a watch record"
            ),
            AdviseError::NoSeries => write!(
                f,
                "the record has no latency or gap series to predict percentiles from"
            ),
        }
    }
}

/// What advise found for one record.
#[derive(Clone, Debug)]
pub struct Advice {
    /// Per advised CPU, the figures as measured.
    pub now: Vec<(u32, FixFigures)>,
    /// Ranked, best first.
    pub fixes: Vec<Fix>,
    /// True when no profile missed or was inconclusive and every profile
    /// given was kept.
    pub all_profiles_meet: bool,
    /// False when no advised CPU has wake-ups to forecast from (a `noise`
    /// record): fixes are then judged by stolen time and gaps alone.
    pub has_wakeups: bool,
    /// Per advised CPU, what no fix can target by name, and how much of
    /// the gain there is to have it holds.
    pub remainder: Vec<Remainder>,
}

/// The time on one CPU that no fix targets by name, beside the named
/// causes: what the ranking leaves out, and whether it dominates (the
/// record's `unexplained[]`, docs/record-format.md).
///
/// Two parts. Below-priority work: threads and kworkers of lower priority
/// than a real-time task (SCHED_OTHER work, mostly). They cannot take the
/// CPU from the task by priority, so where the attribution finds them
/// inside a late wake-up they held it in a section the kernel would not
/// preempt (the whole kernel on a `none`/`voluntary` model, preempt-off
/// sections on any): the record names which thread ran, not which
/// section held preemption off, nor whether that work is the machine's
/// steady load or a passing one. And time with no source at all
/// (`unexplained`: no guest event, the hypervisor or the hardware).
pub type Remainder = punctual_record::Unexplained;

/// Whether `rec` carries the attribution advise edits.
pub fn has_cause(rec: &Record) -> bool {
    rec.cause().is_some()
        || rec.cause_noise().is_some()
        || rec.spikes.iter().any(|s| !s.causes.is_empty())
}

/// Advises on every CPU of `rec` that has a latency or gap series.
/// `profiles` are the workloads asked for; when `only_failing`, those that
/// meet their target now on every CPU are left out (all are kept when
/// none fails).
pub fn advise(
    rec: &Record,
    profiles: &[Profile],
    only_failing: bool,
) -> Result<Advice, AdviseError> {
    if !matches!(
        rec.kind.as_str(),
        "check" | "timer" | "noise" | "cause" | "watch"
    ) {
        return Err(AdviseError::Kind(rec.kind.clone()));
    }
    if !has_cause(rec) {
        return Err(AdviseError::NoCause);
    }
    let cpus: BTreeSet<u32> = rec
        .series
        .iter()
        .filter(|s| matches!(s.metric, Metric::Latency | Metric::Gap))
        .filter_map(|s| s.cpu)
        .collect();
    if cpus.is_empty() {
        return Err(AdviseError::NoSeries);
    }
    // The profiles: those failing now on some CPU.
    let mut chosen: Vec<Profile> = profiles.to_vec();
    let mut all_meet = false;
    let has_wakeups = cpus
        .iter()
        .any(|&c| series_of(rec, c, Metric::Latency).is_some());
    if only_failing && has_wakeups {
        let failing: BTreeSet<String> = cpus
            .iter()
            .flat_map(|&c| profile_figures(rec, c, profiles))
            .filter(|f| f.state != VerdictState::Meets)
            .map(|f| f.profile)
            .collect();
        if failing.is_empty() {
            all_meet = true;
        } else {
            chosen.retain(|p| failing.contains(&p.name));
        }
    }
    let mut now = Vec::new();
    let mut fixes = Vec::new();
    let mut remainder = Vec::new();
    let prio = probe_priority(rec);
    for &cpu in &cpus {
        let base = figures(rec, cpu, &chosen);
        let named = named_sources(rec, cpu);
        let below: BTreeSet<(String, String)> = named
            .iter()
            .filter(|n| below_task(n, prio))
            .map(|n| (n.kind.clone(), n.name.clone()))
            .collect();
        for cand in candidates(rec, cpu, &chosen) {
            fixes.push(judge(rec, cpu, &base, cand, &chosen, &below, &named));
        }
        remainder.push(remainder_of(rec, cpu, &base, &named, &below, &chosen));
        now.push((cpu, base));
    }
    rank(&mut fixes);
    Ok(Advice {
        now,
        fixes,
        all_profiles_meet: all_meet,
        has_wakeups,
        remainder,
    })
}

/// The named causes against the rest on `cpu` ([`Remainder`]).
fn remainder_of(
    rec: &Record,
    cpu: u32,
    base: &FixFigures,
    named: &[Named],
    below: &BTreeSet<(String, String)>,
    profiles: &[Profile],
) -> Remainder {
    let key = |n: &Named| (n.kind.clone(), n.name.clone());
    let sum =
        |f: &dyn Fn(&Named) -> bool| Nanos(named.iter().filter(|n| f(n)).map(|n| n.total_ns).sum());
    let unexplained = sum(&|n| unremovable(&n.kind));
    let below_ns = sum(&|n| below.contains(&key(n)));
    let named_ns = sum(&|n| !unremovable(&n.kind) && !below.contains(&key(n)));
    let gain_of = |pick: &dyn Fn(&str, &str) -> bool| {
        let edited = remove_sources(rec, cpu, pick);
        let f = figures_edited(rec, &edited, cpu, profiles);
        gain_log10(base, &kept_where_shorter(base, f))
    };
    let gain_named_log10 =
        gain_of(&|k, n| !unremovable(k) && !below.contains(&(k.to_string(), n.to_string())));
    let gain_all_log10 = gain_of(&|_, _| true);
    let gain_all_log10 = gain_all_log10.max(gain_named_log10);
    let preemption = rec.platform.preemption.clone().unwrap_or_default();
    let total = (named_ns.0 + below_ns.0 + unexplained.0).max(1) as f64;
    // What would tell more, in the order the text gives it.
    let mut tell_more = vec!["measure longer with --cause".to_string()];
    if below_ns > Nanos::ZERO && !preemptible(&preemption) {
        tell_more.push(
            "again with full preemption (--apply preempt-full --verify, or a preemptible \
             kernel)"
                .into(),
        );
    }
    if unexplained > Nanos::ZERO {
        tell_more.push("on the host or bare metal for the time with no guest event".into());
    }
    Remainder {
        cpu,
        preemption,
        named_ns,
        below_ns,
        below_sources: below.len(),
        no_event_ns: unexplained,
        below_share: below_ns.0 as f64 / total,
        no_event_share: unexplained.0 as f64 / total,
        gain_named_log10,
        gain_all_log10,
        dominates: Remainder::rest_dominates(gain_named_log10, gain_all_log10),
        tell_more,
    }
}

/// Time no fix removes: no guest event, the hypervisor.
fn unremovable(kind: &str) -> bool {
    matches!(kind, "unexplained" | "hypervisor")
}

/// A thread or kworker of lower priority than a real-time task: it delays
/// the task only by holding the CPU where the kernel does not preempt
/// ([`Remainder`]). Nothing is below a task at SCHED_OTHER, which shares
/// the CPU with its peers by the fair scheduler's own rule.
fn below_task(n: &Named, prio: Option<u32>) -> bool {
    match n.kind.as_str() {
        "kworker" => prio.is_some(),
        "thread" => match (prio, rt_of(&n.sched)) {
            (Some(p), Some(r)) => r < p,
            (Some(_), None) => n.sched.as_deref() != Some("deadline"),
            (None, _) => false,
        },
        _ => false,
    }
}

/// Best first: by the gain from the named causes over the profiles (0
/// where that alone lies within the interval of doing nothing), ties by
/// whether the whole prediction does, then by the CPU given up
/// ([`cpu_given_up`]), then by the CPU time moved to another CPU, then
/// by the gain with below-priority work included, then by id (so the
/// same record always gives the same order). Below-priority work does
/// not rank a fix: the record names who ran there, not what held
/// preemption off or whether it stays ([`Remainder`]); a fix that takes
/// only such work out ranks by its cost and its whole gain after every
/// fix a named cause ranks.
pub fn rank(fixes: &mut [Fix]) {
    // Gains are compared in steps of GAIN_STEP: two fixes whose summed
    // MTTF ratios differ by less than a factor 10^0.1 (a sliver of a
    // source in one of them) are a tie no record resolves, and the cost
    // decides.
    let step = |g: f64| (g / GAIN_STEP).round() as i64;
    fixes.sort_by(|a, b| {
        step(b.gain_log10)
            .cmp(&step(a.gain_log10))
            .then(a.within_noise.cmp(&b.within_noise))
            .then(cpu_given_up(a).total_cmp(&cpu_given_up(b)))
            .then(a.cost_cpu_fraction.total_cmp(&b.cost_cpu_fraction))
            .then(b.gain_all_log10.total_cmp(&a.gain_all_log10))
            .then(a.id.cmp(&b.id))
    });
}

/// The share of a CPU a fix takes from everything else on the machine:
/// an isolated CPU, or a reservation's bandwidth, held whether the work
/// uses it or not. A source moved to another CPU (`cost_cpu_fraction`
/// of the moves) still gets its time there, and a lowered priority or a
/// lifted limit takes none, so between fixes of equal gain the one that
/// gives up nothing ranks first, and the CPU time it moves orders the
/// rest.
pub fn cpu_given_up(f: &Fix) -> f64 {
    match f.kind.as_str() {
        "isolate-cpu" | "reservation" => f.cost_cpu_fraction,
        _ => 0.0,
    }
}

/// One candidate before it is judged: how the record changes.
struct Candidate {
    id: String,
    kind: &'static str,
    target: BTreeMap<String, Value>,
    description: String,
    why: String,
    cost: String,
    cost_cpu_fraction: f64,
    runtime_applicable: bool,
    permanent_how: String,
    change: Change,
}

enum Change {
    /// Take these sources' attributed time out.
    Remove(Vec<(String, String)>),
    /// Take these sources' attributed time out of all but the given share
    /// of the spikes they appear in, and of their stolen time: a fix
    /// after which the kernel still makes part of the same gaps (RT
    /// throttling lifted where the fair server runs starved fair work).
    Thin(Vec<(String, String)>, f64),
    /// More buffers of the same length for one profile.
    Buffers(String, Buffering),
}

fn judge(
    rec: &Record,
    cpu: u32,
    base: &FixFigures,
    c: Candidate,
    profiles: &[Profile],
    below: &BTreeSet<(String, String)>,
    named: &[Named],
) -> Fix {
    let predict = |keys: &[(String, String)]| {
        let edited = remove_sources(rec, cpu, &|k, n| {
            keys.iter().any(|(kk, nn)| kk == k && nn == n)
        });
        kept_where_shorter(base, figures_edited(rec, &edited, cpu, profiles))
    };
    let (predicted, gain, gain_all) = match &c.change {
        Change::Remove(keys) => {
            let predicted = predict(keys);
            let gain_all = gain_log10(base, &predicted);
            // The ranking's gain: what the fix takes out of the named
            // causes alone (below-priority work stays, see `rank`).
            let named: Vec<(String, String)> = keys
                .iter()
                .filter(|k| !below.contains(*k))
                .cloned()
                .collect();
            let named_pred = if named.len() == keys.len() {
                predicted.clone()
            } else if named.is_empty() {
                base.clone()
            } else {
                predict(&named)
            };
            // A named gain the record cannot tell from no change ranks
            // nothing: the rest of the fix's gain then orders it.
            let gain = if within_noise(base, &named_pred) {
                0.0
            } else {
                gain_log10(base, &named_pred)
            };
            (predicted, gain, gain_all)
        }
        Change::Thin(keys, kept) => {
            let edited = remove_sources_kept(
                rec,
                cpu,
                &|k, n| keys.iter().any(|(kk, nn)| kk == k && nn == n),
                *kept,
            );
            let predicted = kept_where_shorter(base, figures_edited(rec, &edited, cpu, profiles));
            let all = gain_log10(base, &predicted);
            let gain = if within_noise(base, &predicted) {
                0.0
            } else {
                all
            };
            (predicted, gain, all)
        }
        Change::Buffers(name, b) => {
            let mut f = base.clone();
            let m = latency_model(rec, cpu);
            for pf in f.profiles.iter_mut().filter(|p| &p.profile == name) {
                if let Some(r) = m.as_ref().and_then(|m| mttf(m, b).ok()) {
                    pf.mttf_s = r.mttf_seconds;
                    pf.ci_s = [r.mttf_ci_low_seconds, r.mttf_ci_high_seconds];
                    pf.state = state_of(r.mttf_ci_low_seconds, r.mttf_ci_high_seconds, pf.target_s);
                }
            }
            if let Some(first) = f.profiles.first() {
                f.mttf_s = first.mttf_s;
                f.ci_s = first.ci_s;
            }
            let g = gain_log10(base, &f);
            (f, g, g)
        }
    };
    let within = within_noise(base, &predicted);
    let takes_out = match &c.change {
        Change::Remove(keys) => named
            .iter()
            .filter(|n| keys.iter().any(|(k, m)| *k == n.kind && *m == n.name))
            .map(|n| punctual_record::TakenOut {
                kind: n.kind.clone(),
                name: n.name.clone(),
                total_ns: Nanos(n.total_ns),
            })
            .collect(),
        Change::Thin(keys, kept) => named
            .iter()
            .filter(|n| keys.iter().any(|(k, m)| *k == n.kind && *m == n.name))
            .map(|n| punctual_record::TakenOut {
                kind: n.kind.clone(),
                name: n.name.clone(),
                total_ns: Nanos((n.total_ns as f64 * (1.0 - kept)).round() as u64),
            })
            .filter(|t| t.total_ns > Nanos::ZERO)
            .collect(),
        Change::Buffers(..) => Vec::new(),
    };
    Fix {
        id: c.id,
        kind: c.kind.to_string(),
        target: c.target,
        cpu,
        description: c.description,
        now: base.clone(),
        predicted,
        gain_log10: gain,
        gain_all_log10: gain_all,
        within_noise: within,
        why: c.why,
        cost: c.cost,
        cost_cpu_fraction: c.cost_cpu_fraction,
        runtime_applicable: c.runtime_applicable,
        permanent_how: c.permanent_how,
        observed: None,
        takes_out,
        observed_sources: Vec::new(),
    }
}

/// `f`, an edited record's figures, with each profile whose predicted
/// MTTF came out shorter than measured set back to the measured one.
///
/// The edited spike log, latency histogram and gap process feed the
/// queue model `check` uses; its fitted tail is held at or below the
/// record's (`TailModel::bounded_by`), so the predicted MTTF can only
/// lengthen through the tail. The arrivals can still make it shorter:
/// where the removed source was the periodic one, the stalls left are
/// forecast as Poisson arrivals, which cluster more. That comes from the
/// arrival model's choice, not from the data, so there the figure as
/// measured stands (docs/advise.md).
fn kept_where_shorter(base: &FixFigures, mut f: FixFigures) -> FixFigures {
    for (a, b) in base.profiles.iter().zip(f.profiles.iter_mut()) {
        if eff(b.mttf_s) < eff(a.mttf_s) {
            *b = a.clone();
        }
    }
    if let Some(first) = f.profiles.first() {
        f.mttf_s = first.mttf_s;
        f.ci_s = first.ci_s;
    }
    f
}

fn eff(m: Option<f64>) -> f64 {
    m.unwrap_or(UNBOUNDED_MTTF_S).clamp(1e-9, UNBOUNDED_MTTF_S)
}

/// Σ over the profiles of log10(MTTF after / MTTF now), each MTTF capped
/// at the profile's target (past its target a workload gains nothing
/// more) and each term at least 0 (no fix here lengthens a wake-up).
///
/// A record without wake-ups (a `noise` record) has no MTTF; there the
/// gain is log10 of the stolen fraction's ratio plus log10 of the gap
/// p99.9's ratio (now ÷ after, each at least 0).
pub fn gain_log10(now: &FixFigures, after: &FixFigures) -> f64 {
    if now.profiles.is_empty() {
        let r = |a: f64, b: f64| (a.max(1e-12) / b.max(1e-12)).log10().max(0.0);
        return r(
            now.stolen_fraction.unwrap_or(0.0),
            after.stolen_fraction.unwrap_or(0.0),
        ) + r(now.p999_ns.0 as f64, after.p999_ns.0 as f64);
    }
    now.profiles
        .iter()
        .zip(&after.profiles)
        .map(|(a, b)| {
            let cap = |m: Option<f64>| eff(m).min(a.target_s.max(1e-9));
            (cap(b.mttf_s) / cap(a.mttf_s)).log10().max(0.0)
        })
        .sum()
}

/// True when every profile's predicted point MTTF lies inside the 95 %
/// interval measured now (and, without profiles, the p99 and stolen
/// fraction did not move).
pub fn within_noise(now: &FixFigures, after: &FixFigures) -> bool {
    if now.profiles.is_empty() {
        return after.p99_ns == now.p99_ns
            && after.stolen_fraction.unwrap_or(0.0) >= now.stolen_fraction.unwrap_or(0.0);
    }
    now.profiles.iter().zip(&after.profiles).all(|(a, b)| {
        let lo = a.ci_s[0].unwrap_or(0.0);
        let hi = a.ci_s[1].unwrap_or(f64::INFINITY);
        let x = b.mttf_s.unwrap_or(f64::INFINITY);
        x >= lo && x <= hi
    })
}

/// The record's figures for `cpu`: percentiles of its latency series (or
/// gap series), its stolen fraction, and the MTTF for each profile.
pub fn figures(rec: &Record, cpu: u32, profiles: &[Profile]) -> FixFigures {
    let s = series_of(rec, cpu, Metric::Latency).or_else(|| series_of(rec, cpu, Metric::Gap));
    let (name, p99, p999) = match s {
        Some(s) => {
            let t = Tail::from_series(s);
            (s.name.clone(), quantile(&t, 0.99), quantile(&t, 0.999))
        }
        None => (String::new(), Nanos::ZERO, Nanos::ZERO),
    };
    let stolen = rec.stolen.iter().find(|x| x.cpu == cpu).map(|x| x.fraction);
    let pf = profile_figures(rec, cpu, profiles);
    let (mttf_s, ci_s) = pf
        .first()
        .map(|p| (p.mttf_s, p.ci_s))
        .unwrap_or((None, [None, None]));
    FixFigures {
        series: name,
        p99_ns: p99,
        p999_ns: p999,
        stolen_fraction: stolen,
        mttf_s,
        ci_s,
        profiles: pf,
        reservation_miss: None,
    }
}

/// [`figures`] of `edited`, a copy of `rec` with sources taken out, with
/// the queue model's fitted tail bounded by `rec`'s.
pub fn figures_edited(rec: &Record, edited: &Record, cpu: u32, profiles: &[Profile]) -> FixFigures {
    let mut f = figures(edited, cpu, profiles);
    f.profiles = profile_figures_of(edited_model(rec, edited, cpu).as_ref(), profiles);
    let (mttf_s, ci_s) = f
        .profiles
        .first()
        .map(|p| (p.mttf_s, p.ci_s))
        .unwrap_or((None, [None, None]));
    f.mttf_s = mttf_s;
    f.ci_s = ci_s;
    f
}

/// The queue model of `edited` on `cpu`, its fitted tail bounded by that
/// of the record it was edited from, and its spike log read as complete
/// above the level the record's was.
///
/// The bounded log keeps the largest wake-ups, so it holds every one
/// above its smallest entry; an edit shrinks entries below that level,
/// and read afresh the edited log would count as complete down to its
/// new smallest one, though the wake-ups the record dropped are missing
/// there. The times of the stalls that count then mix the shrunk ones
/// with the rest, and a period the remaining sources still keep (a
/// FIFO thread's burst every 20 ms, once RT throttling is taken out) is
/// lost among them or read as another.
fn edited_model(rec: &Record, edited: &Record, cpu: u32) -> Option<TailModel> {
    let mut m = latency_model(edited, cpu)?;
    let Some(base) = latency_model(rec, cpu) else {
        return Some(m);
    };
    m.stall_times = m.periodic_stall_times(base.log_complete_above(rec));
    Some(m.bounded_by(&base))
}

/// The value with a fraction `1 - q` of the samples at or above it, read
/// as its bucket's upper edge (the tail's own convention, so a figure
/// before and after an edit move together).
pub fn quantile(t: &Tail, q: f64) -> Nanos {
    if t.n == 0 {
        return Nanos::ZERO;
    }
    let rank = ((t.n as f64) * (1.0 - q)).ceil().max(1.0) as u64;
    t.value_at_rank(rank)
}

fn series_of(rec: &Record, cpu: u32, metric: Metric) -> Option<&Series> {
    rec.series
        .iter()
        .find(|s| s.metric == metric && s.cpu == Some(cpu))
}

/// The queue model of `cpu`'s wake-ups as `check` builds it: the latency
/// series with its spike log, and the stall term from the busy loop's gaps
/// when the record measured them free of RT throttling.
fn latency_model(rec: &Record, cpu: u32) -> Option<TailModel> {
    let s = series_of(rec, cpu, Metric::Latency)?;
    let mut m = TailModel::new(s, rec.series_duration(s))
        .ok()?
        .with_spike_log(rec, s);
    m.gap_stalls = GapStalls::own(rec, Some(cpu));
    Some(m)
}

/// MTTF and state per profile on `cpu`, in the order given; empty when the
/// CPU has no wake-ups to forecast from.
pub fn profile_figures(rec: &Record, cpu: u32, profiles: &[Profile]) -> Vec<ProfileFigure> {
    profile_figures_of(latency_model(rec, cpu).as_ref(), profiles)
}

fn profile_figures_of(m: Option<&TailModel>, profiles: &[Profile]) -> Vec<ProfileFigure> {
    let Some(m) = m else {
        return Vec::new();
    };
    profiles
        .iter()
        .filter_map(|p| {
            let r = mttf(m, &p.buffering).ok()?;
            let target_s = p.target.as_secs_f64();
            Some(ProfileFigure {
                profile: p.name.clone(),
                state: state_of(r.mttf_ci_low_seconds, r.mttf_ci_high_seconds, target_s),
                mttf_s: r.mttf_seconds,
                ci_s: [r.mttf_ci_low_seconds, r.mttf_ci_high_seconds],
                target_s,
            })
        })
        .collect()
}

/// `rec` with every source `pick(kind, name)` selects taken out of `cpu`'s
/// logged spikes and stolen intervals.
///
/// A spike shrinks by the picked sources' attributed time: a wake-up to no
/// less than the series' median (a wake-up still costs what a typical one
/// does), a gap to what is left of it, and a gap left below the stolen
/// threshold stops counting as stolen. The series' histogram moves the
/// sample accordingly (its HdrHistogram copy, which no longer matches, is
/// dropped). The CPU's stolen total loses the sources' `by_source` time.
pub fn remove_sources(rec: &Record, cpu: u32, pick: &dyn Fn(&str, &str) -> bool) -> Record {
    remove_sources_kept(rec, cpu, pick, 0.0)
}

/// [`remove_sources`], leaving the picked sources whole in a share `kept`
/// (0..1) of the spikes they appear in, spread evenly over the run, and
/// that share of their stolen time: the gaps a fix leaves are whole gaps
/// (the fair server runs its whole runtime when fair work starves), not
/// every gap shortened.
pub fn remove_sources_kept(
    rec: &Record,
    cpu: u32,
    pick: &dyn Fn(&str, &str) -> bool,
    kept: f64,
) -> Record {
    let kept = kept.clamp(0.0, 1.0);
    let mut share = 0.0;
    let mut out = rec.clone();
    let threshold = rec
        .stolen
        .iter()
        .find(|s| s.cpu == cpu)
        .map(|s| s.threshold_ns)
        .unwrap_or(Nanos::ZERO);
    let mut gaps_gone = 0u64;
    let mut touched: BTreeSet<usize> = BTreeSet::new();
    let HostKept {
        runs: host,
        no_event,
    } = host_time(rec, cpu, pick);
    // Host time left in the stolen split, by source.
    let mut host_in_gaps: BTreeMap<(String, String), u64> = BTreeMap::new();
    // Time with no guest event that went with a removed window, in gaps.
    let mut no_event_gone = 0u64;
    let Record { spikes, series, .. } = &mut out;
    for (i, sp) in spikes.iter_mut().enumerate().filter(|(_, s)| s.cpu == cpu) {
        let picked: u64 = sp
            .causes
            .iter()
            .filter(|c| pick(&c.kind, &c.name))
            .map(|c| c.total_ns.0)
            .sum();
        let stays = host.get(&i).map(|h| h.0).unwrap_or(0).min(picked);
        let mut removed = picked - stays;
        if removed == 0 {
            continue;
        }
        share += kept;
        if share >= 1.0 - 1e-9 {
            share -= 1.0;
            continue;
        }
        let Some(si) = series
            .iter()
            .position(|s| s.metric == sp.metric && s.cpu == Some(cpu) && s.task == sp.task)
        else {
            continue;
        };
        if let Some(&host_ns) = no_event.get(&i) {
            // What steal cannot account for goes with the window.
            let mut keep = host_ns;
            for c in sp.causes.iter_mut().filter(|c| is_no_event(c)) {
                let k = keep.min(c.total_ns.0);
                keep -= k;
                let gone = c.total_ns.0 - k;
                removed += gone;
                if sp.metric == Metric::Gap {
                    no_event_gone += gone;
                }
                c.total_ns = Nanos(k);
                c.max_ns = c.max_ns.min(c.total_ns);
            }
            sp.causes
                .retain(|c| !(is_no_event(c) && c.total_ns == Nanos::ZERO));
        }
        let s = &mut series[si];
        let old = sp.value_ns;
        let left = spread_left(sp, removed, stays, pick);
        if stays > 0 {
            let (kind, name) = host[&i].1.clone();
            if sp.metric == Metric::Gap {
                *host_in_gaps
                    .entry((kind.clone(), name.clone()))
                    .or_default() += stays;
            }
            sp.causes.push(SourceShare {
                kind: "unexplained".into(),
                name: HOST_IN_RUNS.into(),
                count: 1,
                total_ns: Nanos(stays),
                max_ns: Nanos(stays),
                share: 0.0,
            });
        }
        sp.causes.retain(|c| !pick(&c.kind, &c.name));
        touched.insert(si);
        match sp.metric {
            Metric::Gap if left <= threshold => {
                move_sample(s, old, None);
                gaps_gone += 1;
                sp.value_ns = left;
            }
            Metric::Gap => {
                move_sample(s, old, Some(left));
                sp.value_ns = left;
            }
            _ => {
                let floor = s.percentiles.p50.min(old);
                let new = left.max(floor);
                move_sample(s, old, Some(new));
                sp.value_ns = new;
            }
        }
    }
    for &si in &touched {
        settle(&mut series[si]);
    }
    // Gaps that stopped counting leave the spike log too.
    out.spikes
        .retain(|s| !(s.cpu == cpu && s.metric == Metric::Gap && s.value_ns <= threshold));
    let gap_max = series_of(&out, cpu, Metric::Gap).map(|s| s.max);
    if let Some(st) = out.stolen.iter_mut().find(|s| s.cpu == cpu) {
        let mut removed = 0u64;
        for b in st.by_source.iter_mut().filter(|b| pick(&b.kind, &b.name)) {
            let host = host_in_gaps
                .get(&(b.kind.clone(), b.name.clone()))
                .copied()
                .unwrap_or(0);
            let left = ((b.total_ns.0 as f64 * kept).round() as u64 + host).min(b.total_ns.0);
            removed += b.total_ns.0 - left;
            b.total_ns = Nanos(left);
        }
        for b in st.by_source.iter_mut().filter(|b| is_no_event(b)) {
            let gone = no_event_gone.min(b.total_ns.0);
            no_event_gone -= gone;
            removed += gone;
            b.total_ns = Nanos(b.total_ns.0 - gone);
        }
        st.by_source
            .retain(|b| !((pick(&b.kind, &b.name) || is_no_event(b)) && b.total_ns == Nanos::ZERO));
        st.total_ns = Nanos(st.total_ns.0.saturating_sub(removed));
        st.fraction = st.total_ns.0 as f64 / st.observed_ns.0.max(1) as f64;
        st.intervals = st.intervals.saturating_sub(gaps_gone);
        if let Some(m) = gap_max {
            st.max_ns = m;
        }
        let total = st.total_ns.0.max(1) as f64;
        for b in st.by_source.iter_mut() {
            b.share = b.total_ns.0 as f64 / total;
        }
    }
    out
}

/// What is left of a spike of `old` once `removed` of its picked
/// sources' time goes, when the other sources' events were spread over
/// the whole of it.
///
/// A spike is one wake-up's lateness (or one gap), and the events inside
/// it add up over its length: 50 ms of RT throttling held the probe off
/// while the disk's interrupts kept coming, 3 ms of them in that window.
/// Without the throttling those interrupts are not one 3 ms delay: they
/// fall where they would have fallen, each delaying the wake-up in which
/// it lands. So the other sources' time R is taken as spread evenly over
/// the spike's length L, and the shorter spike x keeps their share of it,
/// x = U + R·x/L, with U the time no event names (the wake-up's own
/// cost, entry and exit); but never less than U plus the longest single
/// event left (`max_ns`: one event is not split), and never more than
/// the old rule, L less the removed time.
fn spread_left(
    sp: &punctual_record::Spike,
    removed: u64,
    host: u64,
    pick: &dyn Fn(&str, &str) -> bool,
) -> Nanos {
    let old = sp.value_ns.0;
    let whole = old.saturating_sub(removed);
    let picked = removed + host;
    let (r, longest) = sp
        .causes
        .iter()
        .filter(|c| !pick(&c.kind, &c.name))
        .fold((0u64, 0u64), |(r, m), c| {
            (r + c.total_ns.0, m.max(c.max_ns.0.min(c.total_ns.0)))
        });
    if r == 0 || r >= old {
        return Nanos(whole);
    }
    let unnamed = old.saturating_sub(picked + r);
    let spread = (unnamed as f64 / (1.0 - r as f64 / old as f64)).round() as u64;
    // Host time kept from a removed run is one stretch: it is not spread.
    Nanos(((unnamed + longest).max(spread) + host).min(whole))
}

/// The name under which host time found inside a removed thread's run
/// stays in an edited spike ([`host_time_in_runs`]).
pub const HOST_IN_RUNS: &str = "host time inside a removed thread's run";

/// A source's kind and name.
type Src = (String, String);

/// Host time found inside what a fix removes from `cpu`'s logged spikes,
/// by spike index: what taking the picked sources away leaves.
#[derive(Default)]
struct HostKept {
    /// Host time inside a picked thread's run, with the source it was
    /// found in.
    runs: BTreeMap<usize, (u64, Src)>,
    /// The time with no guest event kept as the host's, for every spike
    /// whose throttled window the fix removes (0: none of it).
    no_event: BTreeMap<usize, u64>,
}

/// Host time inside the picked sources' time in `cpu`'s logged spikes:
/// what taking them away leaves.
///
/// The attribution times a thread's run by the guest's clock, so when
/// the hypervisor takes the vCPU away while the thread runs, the run
/// stretches by that time: a FIFO 99 thread that spins 1 ms showed one
/// run of 7.6 ms, the rest ~1 ms, and lowering it left the probe as late
/// as before, the hypervisor's time landing on the probe instead. The
/// kernel accounts such time as steal (/proc/stat), per CPU, which the
/// record keeps for the run (`kernel_steal_ns` of the timer half for
/// late wake-ups, of the noise half for gaps), but not where it fell.
/// So a run longer than the thread's mean (its CPU time ÷ runs over the
/// whole run) is taken as stretched by steal.
///
/// Time with no guest event inside a removed throttled window is the
/// same question: the hypervisor's, or the window's. Each of ten 50 ms
/// RT-throttling windows held 3.52 ms with no guest event, 35 ms over a
/// half whose steal the kernel put at 10 ms; kept whole, lifting the
/// throttle was predicted to leave 3.5 ms late wake-ups that the verified
/// run did not see. What steal cannot account for came with the window,
/// and goes with it.
///
/// Both draw on the one budget, the CPU's steal over the half, largest
/// stretch first, until it is spent; that much stays. The steal is
/// counted in 10 ms ticks, so the budget is coarse, and the longest
/// stretches first make it the most that can stay.
fn host_time(rec: &Record, cpu: u32, pick: &dyn Fn(&str, &str) -> bool) -> HostKept {
    let acct =
        |s: Option<CauseSummary>| s.and_then(|s| s.per_cpu.into_iter().find(|c| c.cpu == cpu));
    let timer = acct(rec.cause());
    let noise = acct(rec.cause_noise()).or_else(|| timer.clone());
    let mean_run = |kind: &str, name: &str| -> Option<u64> {
        let (mut total, mut count) = (0u64, 0u64);
        for c in timer.iter().chain(noise.iter()) {
            for s in c
                .sources
                .iter()
                .filter(|s| s.total.kind == kind && s.total.name == name)
            {
                total += s.total.total_ns;
                count += s.total.count;
            }
        }
        (count > 0).then(|| total / count)
    };
    let mut out = HostKept::default();
    for (metric, budget) in [
        (Metric::Latency, timer.as_ref().map(|c| c.kernel_steal_ns)),
        (Metric::Gap, noise.as_ref().map(|c| c.kernel_steal_ns)),
    ] {
        // (stretch, spike, the run's source; None: no guest event)
        let mut stretched: Vec<(u64, usize, Option<Src>)> = Vec::new();
        for (i, sp) in rec.spikes.iter().enumerate() {
            if sp.cpu != cpu || sp.metric != metric {
                continue;
            }
            if sp
                .causes
                .iter()
                .any(|c| c.kind == "throttle" && pick(&c.kind, &c.name))
            {
                out.no_event.insert(i, 0);
                let ns: u64 = sp
                    .causes
                    .iter()
                    .filter(|c| is_no_event(c) && !pick(&c.kind, &c.name))
                    .map(|c| c.total_ns.0)
                    .sum();
                if ns > 0 {
                    stretched.push((ns, i, None));
                }
            }
            for c in &sp.causes {
                if !matches!(c.kind.as_str(), "thread" | "kworker") || !pick(&c.kind, &c.name) {
                    continue;
                }
                let Some(mean) = mean_run(&c.kind, &c.name) else {
                    continue;
                };
                let over = c.total_ns.0.saturating_sub(mean * c.count.max(1));
                if over > 0 {
                    stretched.push((over, i, Some((c.kind.clone(), c.name.clone()))));
                }
            }
        }
        stretched.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
        let mut left = budget.unwrap_or(0);
        for (over, i, src) in stretched {
            if left == 0 {
                break;
            }
            let take = over.min(left);
            left -= take;
            match src {
                Some(src) => out.runs.entry(i).or_insert((0, src)).0 += take,
                None => *out.no_event.entry(i).or_default() += take,
            }
        }
    }
    out
}

/// A spike's time with no guest event (the watched thread at task level
/// with nothing else to show: the hypervisor, the hardware, or the
/// window it sits in).
fn is_no_event(c: &SourceShare) -> bool {
    c.kind == "unexplained" && c.name == "no guest event"
}

/// Moves one sample of `s` from the bucket of `old` to that of `new`
/// (`None`: the sample is gone).
fn move_sample(s: &mut Series, old: Nanos, new: Option<Nanos>) {
    let w = s.histogram.bucket_ns.max(1);
    let b = &mut s.histogram.buckets;
    let lo = old.0 / w * w;
    match b.binary_search_by_key(&lo, |x| x.0) {
        Ok(i) => {
            b[i].1 -= 1;
            if b[i].1 == 0 {
                b.remove(i);
            }
        }
        // Not in the histogram (a spike from a merged or trimmed record):
        // nothing to move.
        Err(_) => return,
    }
    match new {
        Some(v) => {
            let lo = v.0 / w * w;
            match b.binary_search_by_key(&lo, |x| x.0) {
                Ok(i) => b[i].1 += 1,
                Err(i) => b.insert(i, (lo, 1)),
            }
        }
        None => s.count = s.count.saturating_sub(1),
    }
}

/// The summary fields of an edited series, from its histogram.
fn settle(s: &mut Series) {
    let w = s.histogram.bucket_ns.max(1);
    let top = s
        .histogram
        .buckets
        .last()
        .map(|b| Nanos(b.0 + w - 1))
        .unwrap_or(Nanos::ZERO);
    s.max = s.max.min(top);
    s.hdr.clear();
    let t = Tail::from_series(s);
    s.percentiles.p99 = quantile(&t, 0.99);
    s.percentiles.p99_9 = quantile(&t, 0.999);
    s.percentiles.p99_99 = quantile(&t, 0.9999);
}

/// A source named in the record for one CPU, with its totals.
#[derive(Clone, Debug)]
struct Named {
    kind: String,
    name: String,
    sched: Option<String>,
    /// Attributed time in spikes and stolen intervals of this CPU.
    total_ns: u64,
    /// CPU time it used on this CPU over its accounting span, 0..1.
    cpu_fraction: f64,
}

/// The sources named on `cpu`: in spike causes and `stolen[].by_source`,
/// largest first, with their scheduling class from the cause summary.
fn named_sources(rec: &Record, cpu: u32) -> Vec<Named> {
    let mut map: BTreeMap<(String, String), u64> = BTreeMap::new();
    for sp in rec.spikes.iter().filter(|s| s.cpu == cpu) {
        for c in &sp.causes {
            *map.entry((c.kind.clone(), c.name.clone())).or_default() += c.total_ns.0;
        }
    }
    for st in rec.stolen.iter().filter(|s| s.cpu == cpu) {
        for b in &st.by_source {
            *map.entry((b.kind.clone(), b.name.clone())).or_default() += b.total_ns.0;
        }
    }
    let sums: Vec<CauseSummary> = [rec.cause(), rec.cause_noise()]
        .into_iter()
        .flatten()
        .collect();
    let mut v: Vec<Named> = map
        .into_iter()
        .filter(|(_, t)| *t > 0)
        .map(|((kind, name), total_ns)| {
            let acct = sums
                .iter()
                .flat_map(|s| s.per_cpu.iter().filter(|c| c.cpu == cpu))
                .find_map(|c| {
                    c.sources
                        .iter()
                        .find(|s| s.total.kind == kind && s.total.name == name)
                        .map(|s| (s.total.sched.clone(), s.total.total_ns, c.span_ns))
                });
            let (sched, used, span) = acct.unwrap_or((None, 0, 0));
            Named {
                kind,
                name,
                sched,
                total_ns,
                cpu_fraction: used as f64 / span.max(1) as f64,
            }
        })
        .collect();
    v.sort_by(|a, b| b.total_ns.cmp(&a.total_ns).then(a.name.cmp(&b.name)));
    v
}

/// Every source attributed on `cpu`, largest first, at most `max`: its
/// time in the CPU's logged spikes and stolen intervals, as `takes_out`
/// counts it. A `--verify` run's list says what remained after a fix.
pub fn attributed(rec: &Record, cpu: u32, max: usize) -> Vec<punctual_record::TakenOut> {
    named_sources(rec, cpu)
        .into_iter()
        .take(max)
        .map(|n| punctual_record::TakenOut {
            kind: n.kind,
            name: n.name,
            total_ns: Nanos(n.total_ns),
        })
        .collect()
}

/// The probe's real-time priority from the record's configuration
/// (`timer.policy` or `policy`, e.g. `fifo:95`); None at SCHED_OTHER.
fn probe_priority(rec: &Record) -> Option<u32> {
    ["timer.policy", "policy", "noise.policy"]
        .iter()
        .find_map(|k| rec.config.get(*k).and_then(|v| v.as_str()))
        .and_then(|p| {
            let (pol, prio) = p.split_once(':')?;
            matches!(pol, "fifo" | "rr")
                .then(|| prio.parse().ok())
                .flatten()
        })
}

/// `rt95` → 95; other classes None.
fn rt_of(sched: &Option<String>) -> Option<u32> {
    sched.as_deref()?.strip_prefix("rt")?.parse().ok()
}

/// Online CPUs (`0-3,6`), from the platform.
fn online(p: &Platform) -> Vec<u32> {
    let mut v = Vec::new();
    let Some(list) = &p.online_cpus else {
        return v;
    };
    for part in list.split(',') {
        let part = part.trim();
        match part.split_once('-') {
            Some((a, b)) => {
                if let (Ok(a), Ok(b)) = (a.parse::<u32>(), b.parse::<u32>()) {
                    v.extend(a..=b);
                }
            }
            None => v.extend(part.parse::<u32>().ok()),
        }
    }
    v
}

/// `comm/tid` → (comm, tid).
fn comm_tid(name: &str) -> (String, Option<i32>) {
    match name.rsplit_once('/') {
        Some((c, t)) => match t.parse() {
            Ok(t) => (c.to_string(), Some(t)),
            Err(_) => (name.to_string(), None),
        },
        None => (name.to_string(), None),
    }
}

/// A kernel thread bound to one CPU (`migration/1`, `ksoftirqd/1`,
/// `rcuc/1`, `ktimers/1`, `cpuhp/1`, `idle_inject/1`): it cannot be moved
/// and its priority is the kernel's.
fn per_cpu_kthread(comm: &str) -> bool {
    comm.rsplit_once('/')
        .is_some_and(|(_, n)| n.parse::<u32>().is_ok())
}

/// `[a-z0-9-]` only, for ids.
fn slug(s: &str) -> String {
    let mut out = String::new();
    for ch in s.chars() {
        if ch.is_ascii_alphanumeric() {
            out.push(ch.to_ascii_lowercase());
        } else if !out.ends_with('-') {
            out.push('-');
        }
    }
    out.trim_matches('-').to_string()
}

fn pct(x: f64) -> String {
    format!("{:.2}%", x * 100.0)
}

/// Where a moved source goes: every online CPU but the measured one.
struct Elsewhere {
    /// `1,2,3`, as the descriptions and unit files write it.
    list: String,
    /// The same CPUs as a JSON array, for a candidate's target.
    cpus: Value,
    /// The first of them, for ids; None on a one-CPU machine.
    first: Option<u32>,
}

impl Elsewhere {
    fn of(rec: &Record, cpu: u32) -> Elsewhere {
        let others: Vec<u32> = online(&rec.platform)
            .into_iter()
            .filter(|c| *c != cpu)
            .collect();
        Elsewhere {
            list: others
                .iter()
                .map(|c| c.to_string())
                .collect::<Vec<_>>()
                .join(","),
            cpus: json!(others),
            first: others.first().copied(),
        }
    }
}

/// The RT throttling on the CPU that the real-time thread `n` caused:
/// throttling stops the real-time class once it used its runtime of the
/// period (`sched_rt_runtime_us` of `sched_rt_period_us`); `n` used more
/// of the CPU than any other real-time thread named there, and without
/// `n` their CPU time stays below that share. Moving `n` away then ends the throttling too, and
/// the fair server's gaps with it (nothing real-time is left to starve the
/// fair class). Empty when the record shows no throttling, `n` is not
/// real-time, or the others alone would still run into it.
fn throttled_by(rec: &Record, named: &[Named], n: &Named) -> Vec<Named> {
    let throttle: Vec<Named> = named
        .iter()
        .filter(|x| x.kind == "throttle")
        .cloned()
        .collect();
    let limit = match (rec.platform.rt_runtime_us, rec.platform.rt_period_us) {
        (Some(r), Some(p)) if r >= 0 && p > 0 => r as f64 / p as f64,
        _ => return Vec::new(),
    };
    if throttle.is_empty() || rt_of(&n.sched).is_none() || n.cpu_fraction <= 0.0 {
        return Vec::new();
    }
    let others: Vec<&Named> = named
        .iter()
        .filter(|x| x.kind == "thread" && x.name != n.name && rt_of(&x.sched).is_some())
        .collect();
    // The thread that never rests is the one that used the most of the
    // real-time runtime; one that rests (a periodic FIFO 99 thread) used
    // a sliver, and moving it leaves the busy one to run into the limit.
    let largest = others.iter().all(|x| x.cpu_fraction < n.cpu_fraction);
    let left: f64 = others.iter().map(|x| x.cpu_fraction).sum();
    if largest && left < limit {
        throttle
    } else {
        Vec::new()
    }
}

/// Every fix tried on `cpu`, in the order they are judged: per named
/// source (largest first) its move and priority fixes, then isolation,
/// RT throttling, C-states, preemption and buffering.
fn candidates(rec: &Record, cpu: u32, profiles: &[Profile]) -> Vec<Candidate> {
    let mut out = Vec::new();
    let named = named_sources(rec, cpu);
    let to = Elsewhere::of(rec, cpu);
    let prio = probe_priority(rec);
    let movable: Vec<&Named> = named
        .iter()
        .filter(|n| matches!(n.kind.as_str(), "irq" | "thread"))
        .take(MAX_SOURCES)
        .collect();
    for n in movable {
        match n.kind.as_str() {
            "irq" if to.first.is_some() => out.push(irq_affinity(rec, cpu, &named, n, &to)),
            "thread" => out.extend(thread_fixes(
                cpu,
                n,
                &to,
                prio,
                &throttled_by(rec, &named, n),
            )),
            _ => {}
        }
    }
    out.extend(isolate_cpu(rec, cpu, &named));
    out.extend(rt_runtime(rec, cpu, &named));
    out.extend(dma_latency(rec, cpu, &named));
    out.extend(preempt_full(rec, cpu, &named, prio));
    out.extend(reservation(rec, cpu, &named, prio, profiles));
    out.extend(buffering(rec, cpu, profiles));
    out
}

/// Route the interrupt `n` to the other CPUs.
fn irq_affinity(rec: &Record, cpu: u32, named: &[Named], n: &Named, to: &Elsewhere) -> Candidate {
    let to_cpus = &to.cpus;
    let to_first = to.first;
    let to = &to.list;
    let irq = rec
        .platform
        .irqs
        .iter()
        .find(|i| i.name == n.name || i.name.split_whitespace().any(|w| w == n.name))
        .map(|i| i.irq.clone());
    let label = irq.clone().unwrap_or_else(|| slug(&n.name));
    // On PREEMPT_RT the handler's thread (irq/N-name) moves with it.
    let mut keys = vec![(n.kind.clone(), n.name.clone())];
    if let Some(i) = &irq {
        for t in named
            .iter()
            .filter(|t| t.kind == "thread" && t.name.starts_with(&format!("irq/{i}-")))
        {
            keys.push((t.kind.clone(), t.name.clone()));
        }
    }
    let mut target = BTreeMap::new();
    // The number when the platform names it (what an apply
    // step needs), else the handler's name.
    target.insert(
        "irq".into(),
        match irq.as_deref().and_then(|i| i.parse::<u32>().ok()) {
            Some(i) => json!(i),
            None => json!(n.name),
        },
    );
    target.insert("to_cpus".into(), to_cpus.clone());
    let unit_irq = irq.clone().unwrap_or_else(|| "N".into());
    Candidate {
        id: format!("irq-{label}-to-cpu{to}", to = to_first.unwrap_or(0)),
        kind: "irq-affinity",
        target,
        description: match &irq {
            Some(i) => format!("route interrupt {i} ({}) to CPU {to}", n.name),
            None => format!(
                "route interrupt {} to CPU {to} (its number is not in the record)",
                n.name
            ),
        },
        why: format!(
            "{} was attributed {} inside CPU {cpu}'s spikes and stolen intervals; \
             taken out of them",
            n.name,
            Nanos(n.total_ns)
        ),
        cost: format!(
            "its handler time moves to CPU {to}: {} of a CPU measured here",
            pct(n.cpu_fraction)
        ),
        cost_cpu_fraction: n.cpu_fraction,
        runtime_applicable: irq.is_some(),
        permanent_how: format!(
            "systemd unit (irqbalance off or IRQBALANCE_BANNED_CPUS covering CPU {cpu}):\n\
             [Unit]\nDescription=keep IRQ {unit_irq} off CPU {cpu}\n[Service]\nType=oneshot\n\
             ExecStart=/bin/sh -c 'echo {to} > /proc/irq/{unit_irq}/smp_affinity_list'\n\
             [Install]\nWantedBy=multi-user.target\n\
             or for every interrupt: irqaffinity={to} on the kernel command line"
        ),
        change: Change::Remove(keys),
    }
}

/// Move the thread `n` to the other CPUs, and lower it below the task
/// when it ran at or above the task's priority. Per-CPU kernel threads
/// get neither. An interrupt's thread (PREEMPT_RT's `irq/N-name`) is not
/// moved, since it follows its interrupt's affinity (the `irq-affinity`
/// fix moves both), but it can be lowered: at FIFO 50 by default it
/// outranks a task below that.
fn thread_fixes(
    cpu: u32,
    n: &Named,
    to: &Elsewhere,
    prio: Option<u32>,
    throttle: &[Named],
) -> Vec<Candidate> {
    let mut out = Vec::new();
    let (comm, tid) = comm_tid(&n.name);
    if per_cpu_kthread(&comm) {
        return out;
    }
    let irq_thread = comm.starts_with("irq/");
    if let Some(first) = to.first.filter(|_| !irq_thread) {
        let to_cpus = &to.cpus;
        let to = &to.list;
        // The thread by tid when the attribution named it,
        // else every thread of that name.
        let mut target = BTreeMap::new();
        match tid {
            Some(t) => target.insert("tid".into(), json!(t)),
            None => target.insert("comm".into(), json!(comm)),
        };
        target.insert("to_cpus".into(), to_cpus.clone());
        out.push(Candidate {
            id: format!("thread-{}-to-cpu{first}", slug(&n.name)),
            kind: "thread-affinity",
            target,
            description: format!("move thread {} off CPU {cpu} to CPU {to}", n.name),
            why: format!(
                "{} was attributed {} inside CPU {cpu}'s spikes and stolen intervals; \
                 taken out of them{}",
                n.name,
                Nanos(n.total_ns),
                if throttle.is_empty() {
                    String::new()
                } else {
                    format!(
                        ", and with it the RT throttling ({}) it ran the CPU's real-time \
                         work into: without its {} of the CPU the real-time threads left \
                         fit in the RT runtime",
                        Nanos(throttle.iter().map(|t| t.total_ns).sum()),
                        pct(n.cpu_fraction)
                    )
                }
            ),
            cost: format!(
                "its CPU time moves to CPU {to}: {} of a CPU measured here",
                pct(n.cpu_fraction)
            ),
            cost_cpu_fraction: n.cpu_fraction,
            runtime_applicable: tid.is_some(),
            permanent_how: format!(
                "in the systemd unit that starts {comm} (systemctl edit UNIT):\n\
                 [Service]\nCPUAffinity={to}\nor start it with taskset -c {to}"
            ),
            change: Change::Remove(
                std::iter::once(n)
                    .chain(throttle)
                    .map(|x| (x.kind.clone(), x.name.clone()))
                    .collect(),
            ),
        });
    }
    // Above (or level with) the task: it preempts it only by
    // priority.
    if let (Some(p), Some(r)) = (prio, rt_of(&n.sched)) {
        if r >= p && p > 1 {
            let new = p - 1;
            let mut target = BTreeMap::new();
            if let Some(t) = tid {
                target.insert("tid".into(), json!(t));
            }
            target.insert("comm".into(), json!(comm));
            target.insert("policy".into(), json!("fifo"));
            target.insert("prio".into(), json!(new));
            out.push(Candidate {
                id: format!("prio-{}-fifo{new}", slug(&n.name)),
                kind: "priority",
                target,
                description: format!(
                    "lower {} from FIFO {r} to FIFO {new}, below the task's FIFO {p}",
                    n.name
                ),
                why: format!(
                    "{} ran at FIFO {r}, at or above the task's FIFO {p}, and was \
                     attributed {} inside CPU {cpu}'s spikes and stolen intervals; \
                     below the task it waits instead, so that time is taken out",
                    n.name,
                    Nanos(n.total_ns)
                ),
                cost: format!(
                    "no CPU given up; {} (it used {} of CPU {cpu})",
                    if irq_thread {
                        format!(
                            "the interrupt's handling ({comm}) waits while the task runs, \
                             so its device waits longer"
                        )
                    } else {
                        format!("{comm} waits while the task runs")
                    },
                    pct(n.cpu_fraction)
                ),
                cost_cpu_fraction: 0.0,
                runtime_applicable: tid.is_some(),
                permanent_how: if irq_thread {
                    format!(
                        "{comm} is the kernel's, started with its interrupt: lower it at \
                         boot from a oneshot unit after the device is up:\n\
                         [Service]\nType=oneshot\n\
                         ExecStart=/bin/sh -c 'chrt -f -p {new} $(pgrep -x \"{comm}\")'"
                    )
                } else {
                    format!(
                        "in the systemd unit that starts {comm} (systemctl edit UNIT):\n\
                         [Service]\nCPUSchedulingPolicy=fifo\nCPUSchedulingPriority={new}"
                    )
                },
                change: Change::Remove(vec![(n.kind.clone(), n.name.clone())]),
            });
        }
    }
    out
}

/// Isolation: every thread-level source goes, interrupts and host stay.
fn isolate_cpu(rec: &Record, cpu: u32, named: &[Named]) -> Option<Candidate> {
    let threads: Vec<(String, String)> = named
        .iter()
        .filter(|n| matches!(n.kind.as_str(), "thread" | "kworker"))
        .filter(|n| !per_cpu_kthread(&comm_tid(&n.name).0))
        .map(|n| (n.kind.clone(), n.name.clone()))
        .collect();
    if threads.is_empty() {
        return None;
    }
    let ncpu = online(&rec.platform).len().max(1);
    let mut target = BTreeMap::new();
    target.insert("cpu".into(), json!(cpu));
    Some(Candidate {
        id: format!("isolate-cpu{cpu}"),
        kind: "isolate-cpu",
        target,
        description: format!("isolate CPU {cpu}: no thread but the task runs there"),
        why: format!(
            "{} thread-level sources (threads, kworkers) were attributed time on CPU {cpu}; \
             all are taken out, interrupts, per-CPU kernel threads and host time stay",
            threads.len()
        ),
        cost: format!(
            "CPU {cpu} is given up by every other task: 1 of {ncpu} CPUs ({} of the machine)",
            pct(1.0 / ncpu as f64)
        ),
        cost_cpu_fraction: 1.0,
        runtime_applicable: true,
        permanent_how: format!(
            "kernel command line: isolcpus=managed_irq,domain,{cpu} nohz_full={cpu} \
             rcu_nocbs={cpu}\nor a tuned profile: [cpu-partitioning] with \
             isolated_cores={cpu}"
        ),
        change: Change::Remove(threads),
    })
}

/// RT throttling lifted, when it stopped the task.
fn rt_runtime(rec: &Record, cpu: u32, named: &[Named]) -> Option<Candidate> {
    let throttle: Vec<(String, String)> = named
        .iter()
        .filter(|n| n.kind == "throttle")
        .map(|n| (n.kind.clone(), n.name.clone()))
        .collect();
    if throttle.is_empty() {
        return None;
    }
    let mut target = BTreeMap::new();
    target.insert("value".into(), json!(-1));
    let total: u64 = named
        .iter()
        .filter(|n| n.kind == "throttle")
        .map(|n| n.total_ns)
        .sum();
    let (change, why) = match fair_server_kept(rec, cpu) {
        Some(k) if k.kept > 0.0 => (
            Change::Thin(throttle, k.kept),
            format!(
                "RT throttling stopped the task for {} inside CPU {cpu}'s spikes and stolen \
                 intervals. Lifted, the real-time thread that ran into it never rests, and \
                 the kernel's fair server ({} every {}, {}) then runs the CPU's fair-class \
                 work above every real-time thread: it used {} of CPU {cpu} in the throttled \
                 time ({} throttled, {} of it idle), so {} of the CPU stays taken as whole \
                 gaps; {}",
                Nanos(total),
                k.runtime,
                k.period,
                k.whence,
                pct(k.fair_share),
                pct(k.throttle_share),
                pct(k.idle_share),
                pct(k.throttle_share * k.kept),
                if k.kept >= 1.0 {
                    "all of the throttled time is kept: lifting the knob is predicted to buy \
                     nothing"
                        .to_string()
                } else {
                    format!(
                        "{:.0}% of the throttled time is kept, the rest taken out",
                        k.kept * 100.0
                    )
                }
            ),
        ),
        _ => (
            Change::Remove(throttle),
            format!(
                "RT throttling stopped the task for {} inside CPU {cpu}'s spikes and stolen \
                 intervals; taken out{}",
                Nanos(total),
                if fair_server(&rec.platform).is_some() {
                    " (the fair server would find no fair-class work to run there: the \
                     throttled time was idle)"
                } else {
                    ""
                }
            ),
        ),
    };
    Some(Candidate {
        id: "rt-runtime-unlimited".into(),
        kind: "rt-runtime",
        target,
        description: "lift RT throttling (kernel.sched_rt_runtime_us = -1)".into(),
        why,
        cost: format!(
            "no CPU given up; a real-time thread that never sleeps can then starve kernel \
             threads on its CPU (up to {} of each second are no longer kept for them)",
            match (rec.platform.rt_runtime_us, rec.platform.rt_period_us) {
                (Some(r), Some(p)) if r >= 0 && p > 0 => pct((p - r) as f64 / p as f64),
                _ => "the share".into(),
            }
        ),
        cost_cpu_fraction: 0.0,
        runtime_applicable: true,
        permanent_how: "/etc/sysctl.d/90-rt-runtime.conf:\nkernel.sched_rt_runtime_us = -1".into(),
        change,
    })
}

/// The kernel's fair server (Linux 6.12 and later): a deadline entity per
/// CPU that runs fair-class work for `runtime` every `period` when
/// real-time threads leave it none.
#[derive(Clone, Debug, PartialEq)]
pub struct FairServer {
    pub runtime: Nanos,
    pub period: Nanos,
    /// Where the figures come from: read from debugfs when the record was
    /// taken, or the kernel's default when debugfs was not mounted.
    pub whence: &'static str,
}

/// The kernel's default fair server: 50 ms of every second
/// (kernel/sched/deadline.c, `fair_server_init`), what RT throttling's
/// 950 000 µs of 1 000 000 left to the fair class before it.
const FAIR_SERVER_DEFAULT: (Nanos, Nanos) = (Nanos(50_000_000), Nanos(1_000_000_000));

/// The fair server of the record's machine, None on a kernel without one
/// (before 6.12) or one the record does not name.
pub fn fair_server(p: &Platform) -> Option<FairServer> {
    let read = |k: &str| p.other.get(k).and_then(|v| v.trim().parse::<u64>().ok());
    if let Some(r) = read("fair_server_runtime_ns") {
        return Some(FairServer {
            runtime: Nanos(r),
            period: Nanos(read("fair_server_period_ns").unwrap_or(FAIR_SERVER_DEFAULT.1 .0)),
            whence: "read from debugfs",
        });
    }
    let k = p.kernel.as_deref()?;
    let mut parts = k.split(|c: char| !c.is_ascii_digit());
    let major: u32 = parts.next().and_then(|x| x.parse().ok()).unwrap_or(0);
    let minor: u32 = parts.next().and_then(|x| x.parse().ok()).unwrap_or(0);
    ((major, minor) >= (6, 12)).then_some(FairServer {
        runtime: FAIR_SERVER_DEFAULT.0,
        period: FAIR_SERVER_DEFAULT.1,
        whence: "the kernel's default: debugfs was not mounted to read it",
    })
}

/// What the fair server keeps of the throttled time on `cpu` once RT
/// throttling is lifted.
struct FairKept {
    runtime: Nanos,
    period: Nanos,
    whence: &'static str,
    /// Throttled time over the CPU's accounted span.
    throttle_share: f64,
    /// The part of it the CPU was idle.
    idle_share: f64,
    /// Fair-class work inside it: throttled, not idle.
    fair_share: f64,
    /// Share of the throttled time the fair server still takes.
    kept: f64,
}

/// A real-time thread that ran into RT throttling never rests once it is
/// lifted; fair-class work on its CPU then starves until the fair server
/// runs it, at deadline priority, above every real-time thread, for up to
/// its runtime every period. The record gives the fair-class work: it ran
/// in the throttled time, which was not idle (the CPU's accounting), so
/// the server keeps min(that work, its runtime ÷ period) of the CPU, as
/// whole gaps. None without a fair server or the CPU's accounting.
fn fair_server_kept(rec: &Record, cpu: u32) -> Option<FairKept> {
    let fs = fair_server(&rec.platform)?;
    let acct = [rec.cause(), rec.cause_noise()]
        .into_iter()
        .flatten()
        .flat_map(|s| s.per_cpu.into_iter())
        .find(|c| c.cpu == cpu && c.span_ns > 0)?;
    let throttled: u64 = acct
        .sources
        .iter()
        .filter(|s| s.total.kind == "throttle")
        .map(|s| s.total.total_ns)
        .sum();
    if throttled == 0 {
        return None;
    }
    let span = acct.span_ns as f64;
    let throttle_share = throttled as f64 / span;
    let idle_share = (acct.idle_ns.min(throttled)) as f64 / span;
    let fair_share = throttle_share - idle_share;
    let server_share = fs.runtime.0 as f64 / fs.period.0.max(1) as f64;
    let kept = (fair_share.min(server_share) / throttle_share).clamp(0.0, 1.0);
    Some(FairKept {
        runtime: fs.runtime,
        period: fs.period,
        whence: fs.whence,
        throttle_share,
        idle_share,
        fair_share,
        kept,
    })
}

/// Shallow C-states where idle exit shows.
fn dma_latency(rec: &Record, cpu: u32, named: &[Named]) -> Option<Candidate> {
    let idle: Vec<(String, String)> = named
        .iter()
        .filter(|n| n.kind == "idle")
        .map(|n| (n.kind.clone(), n.name.clone()))
        .collect();
    let deep = rec
        .platform
        .cpuidle_states
        .iter()
        .any(|s| s.exit_latency_us > 0 && !s.disabled);
    // A run that already held /dev/cpu_dma_latency at 0 (timer, noise and
    // check do by default) has nothing more to gain from it.
    let held_shallow = rec
        .config
        .get("c_states")
        .and_then(|c| c.get("dma_latency_us"))
        .and_then(|v| v.as_u64())
        == Some(0);
    if idle.is_empty() || !deep || held_shallow {
        return None;
    }
    let mut target = BTreeMap::new();
    target.insert("us".into(), json!(0));
    Some(Candidate {
        id: "dma-latency-0".into(),
        kind: "dma-latency",
        target,
        description: "hold C-states shallow (/dev/cpu_dma_latency held at 0 µs)".into(),
        why: format!(
            "the CPU was idle inside spikes on CPU {cpu} (timer not yet delivered: idle exit); \
             that time is taken out"
        ),
        cost: "no CPU given up; idle CPUs poll instead of sleeping: more power and heat".into(),
        cost_cpu_fraction: 0.0,
        runtime_applicable: true,
        permanent_how: "tuned profile snippet:\n[cpu]\nforce_latency=0\nor kernel command \
                        line: processor.max_cstate=1 intel_idle.max_cstate=0"
            .into(),
        change: Change::Remove(idle),
    })
}

/// Full preemption: sources below the task delayed it only because the
/// kernel could not preempt them.
fn preempt_full(rec: &Record, cpu: u32, named: &[Named], prio: Option<u32>) -> Option<Candidate> {
    let preemption = rec.platform.preemption.as_deref().unwrap_or("");
    if preemptible(preemption) || preemption.is_empty() {
        return None;
    }
    let below: Vec<(String, String)> = named
        .iter()
        .filter(|n| below_task(n, prio))
        .map(|n| (n.kind.clone(), n.name.clone()))
        .collect();
    if below.is_empty() {
        return None;
    }
    let dynamic = preemption.starts_with("dynamic(");
    let mut target = BTreeMap::new();
    target.insert("mode".into(), json!("full"));
    Some(Candidate {
        id: "preempt-full".into(),
        kind: "preempt",
        target,
        description: if dynamic {
            "full kernel preemption (sched/preempt = full)".into()
        } else {
            "a fully preemptible kernel (PREEMPT or PREEMPT_RT build)".into()
        },
        why: format!(
            "the kernel's preemption model is '{preemption}': {} sources of lower \
             priority than the task (threads, kworkers) held CPU {cpu} when it should \
             have run; with full preemption they yield at once, so their time is \
             taken out",
            below.len()
        ),
        cost: "no CPU given up; more context switches, kernel-heavy throughput may \
               fall by a few percent (not measured by this record)"
            .into(),
        cost_cpu_fraction: 0.0,
        runtime_applicable: dynamic,
        permanent_how: if dynamic {
            "kernel command line: preempt=full".into()
        } else {
            "boot a kernel built with CONFIG_PREEMPT (or PREEMPT_RT); not changeable \
             at run time on this kernel"
                .into()
        },
        change: Change::Remove(below),
    })
}

/// What a deadline task is shielded from that a task at `prio` (None:
/// SCHED_OTHER) is not: threads that outrank it by priority (not the stop
/// class, `migration/N`, nor another deadline thread) and RT throttling.
fn outranks_task(n: &Named, prio: Option<u32>) -> bool {
    match n.kind.as_str() {
        "throttle" => true,
        "thread" => {
            let comm = comm_tid(&n.name).0;
            !comm.starts_with("migration/")
                && n.sched.as_deref() != Some("deadline")
                && match (prio, rt_of(&n.sched)) {
                    (Some(p), Some(r)) => r >= p,
                    (Some(_), None) => false,
                    (None, _) => true,
                }
        }
        "kworker" => prio.is_none(),
        _ => false,
    }
}

/// The name of the reserved thread in [`reservation_scenario`].
pub const RESERVED_TASK: &str = "reserved";

/// The simulator scenario that predicts a reservation's miss rate on
/// `cpu`: the record's measured gap process with what the reservation
/// takes out removed ([`remove_sources`], the same edit its other
/// figures come from), built by the bridge `simulate --from` uses
/// ([`crate::simfrom`]: each source's lengths as measured, its arrivals
/// periodic where its logged times sat on a period, Poisson otherwise),
/// and in place of the probes one thread, [`RESERVED_TASK`], that always
/// has work, under a reservation of `budget` every `period` over-reserved
/// by `over_percent`, of kind `kind` (`rez`: a fixed budget charged with
/// the time stolen inside it; `rez-fb`: the budget adapted by feedback).
/// A period is missed when the thread received less than `budget`.
pub fn reservation_scenario(
    rec: &Record,
    cpu: u32,
    budget: Nanos,
    period: Nanos,
    over_percent: u64,
    kind: &str,
) -> Result<String, String> {
    let prio = probe_priority(rec);
    let keys: Vec<(String, String)> = named_sources(rec, cpu)
        .iter()
        .filter(|n| outranks_task(n, prio))
        .map(|n| (n.kind.clone(), n.name.clone()))
        .collect();
    let edited = remove_sources(rec, cpu, &|k, n| {
        keys.iter().any(|(kk, nn)| kk == k && nn == n)
    });
    let built = crate::simfrom::scenario_from_record(&edited, "the record")?;
    let mut doc: toml::Table = built
        .toml
        .parse()
        .map_err(|e| format!("the scenario built from the record does not read back: {e}"))?;
    // The CPU's index in the scenario: simfrom numbers the record's CPUs
    // with a latency or gap series in ascending order.
    let mut cpus: Vec<u32> = rec
        .series
        .iter()
        .filter(|s| matches!(s.metric, Metric::Latency | Metric::Gap) && s.task.is_none())
        .filter_map(|s| s.cpu)
        .collect();
    cpus.sort_unstable();
    cpus.dedup();
    let index = cpus
        .iter()
        .position(|c| *c == cpu)
        .ok_or_else(|| format!("the record has no latency or gap series on CPU {cpu}"))?;
    doc.remove("task");
    doc.remove("timer");
    if let Some(toml::Value::Table(sim)) = doc.get_mut("sim") {
        sim.remove("gap_series");
        sim.insert(
            "description".into(),
            toml::Value::String(format!(
                "a reservation of {budget} every {period} (+{over_percent}%, {kind}) on CPU {cpu} \
                 of the record, against its gap process without what the reservation takes out"
            )),
        );
    }
    let mut reserve = toml::Table::new();
    reserve.insert(
        "amount".into(),
        toml::Value::String(format!("{}ns", budget.0)),
    );
    reserve.insert(
        "period".into(),
        toml::Value::String(format!("{}ns", period.0)),
    );
    reserve.insert("kind".into(), toml::Value::String(kind.into()));
    reserve.insert(
        "over".into(),
        toml::Value::Float(over_percent as f64 / 100.0),
    );
    let mut task = toml::Table::new();
    task.insert("name".into(), toml::Value::String(RESERVED_TASK.into()));
    task.insert("kind".into(), toml::Value::String("background".into()));
    task.insert("cpu".into(), toml::Value::Integer(index as i64));
    task.insert("reserve".into(), toml::Value::Table(reserve));
    doc.insert(
        "task".into(),
        toml::Value::Array(vec![toml::Value::Table(task)]),
    );
    Ok(doc.to_string())
}

/// A SCHED_DEADLINE reservation for the work: `budget` of CPU every
/// `period`, sized from the first advised profile (its compute per buffer
/// and its buffer length), the budget over-reserved by the stolen share
/// the reservation leaves.
///
/// A deadline task runs above every SCHED_FIFO, SCHED_RR and SCHED_OTHER
/// thread and is not subject to RT throttling, so it takes out the
/// threads that outrank a real-time task by priority (all threads for a
/// task at SCHED_OTHER, which would otherwise share the CPU with them)
/// and RT throttling. It does not take out interrupts and softirqs,
/// idle exit, the stop class (`migration/N`), the hypervisor, nor threads
/// below the task, which delay it only where the kernel does not preempt
/// and would hold a deadline task off the same way.
fn reservation(
    rec: &Record,
    cpu: u32,
    named: &[Named],
    prio: Option<u32>,
    profiles: &[Profile],
) -> Option<Candidate> {
    let p = profiles.first()?;
    let period = p.buffering.buffer_len;
    let compute = p.buffering.compute.at(period);
    if compute == Nanos::ZERO || period == Nanos::ZERO {
        return None;
    }
    let outranks = |n: &Named| outranks_task(n, prio);
    let keys: Vec<(String, String)> = named
        .iter()
        .filter(|n| outranks(n))
        .map(|n| (n.kind.clone(), n.name.clone()))
        .collect();
    if keys.is_empty() {
        return None;
    }
    let protected_ns: u64 = named
        .iter()
        .filter(|n| outranks(n))
        .map(|n| n.total_ns)
        .sum();
    // What the reservation leaves stolen is still taken from the work's
    // wall time inside its period, so the budget is asked for that much
    // larger: compute ÷ (1 − share left), as a whole percent, rounded up.
    let left = rec
        .stolen
        .iter()
        .find(|s| s.cpu == cpu)
        .map(|st| {
            let gone: u64 = st
                .by_source
                .iter()
                .filter(|b| keys.iter().any(|(k, n)| *k == b.kind && *n == b.name))
                .map(|b| b.total_ns.0)
                .sum();
            st.total_ns.0.saturating_sub(gone) as f64 / st.observed_ns.0.max(1) as f64
        })
        .unwrap_or(0.0)
        .clamp(0.0, 0.5);
    let over_pct = ((left / (1.0 - left)) * 100.0).ceil() as u64;
    let asked = compute.0 as f64 * (1.0 + over_pct as f64 / 100.0);
    if asked > period.0 as f64 {
        return None;
    }
    let fraction = asked / period.0 as f64;
    let task = match prio {
        Some(p) => format!("the task's FIFO {p}"),
        None => "the task (SCHED_OTHER)".into(),
    };
    let mut target = BTreeMap::new();
    target.insert("budget".into(), json!(compute.0));
    target.insert("period".into(), json!(period.0));
    target.insert("over_reserve_percent".into(), json!(over_pct));
    let command = format!(
        "punctual reserve --budget {compute} --period {period} --over-reserve {over_pct}% -- COMMAND"
    );
    Some(Candidate {
        id: format!(
            "reserve-{}-per-{}",
            slug(&compute.to_string()),
            slug(&period.to_string())
        ),
        kind: "reservation",
        target,
        description: format!(
            "run the work under a SCHED_DEADLINE reservation of {compute} every {period} \
             (+{over_pct}%), sized for {}: {command}",
            p.name
        ),
        why: format!(
            "a deadline task runs above every FIFO, RR and SCHED_OTHER thread and is not RT \
             throttled: the {} source(s) that outranked {task} on CPU {cpu} (threads by \
             priority, RT throttling) are taken out, {} attributed; interrupts, softirqs, \
             idle exit, the hypervisor and threads below the task (which hold the CPU only \
             where the kernel does not preempt, from a deadline task too) stay. The budget \
             is over-reserved by the {} of CPU {cpu} the reservation leaves stolen; how often \
             a period is stolen more than that, so the work gets less than its budget, is \
             simulated on the record's gap process, plain and with feedback",
            keys.len(),
            Nanos(protected_ns),
            pct(left)
        ),
        cost: format!(
            "{} of a CPU held for the work whether it uses it or not, and the program must \
             be started under punctual reserve (the reservation may run on any CPU; the \
             prediction is CPU {cpu}'s)",
            pct(fraction)
        ),
        cost_cpu_fraction: fraction,
        runtime_applicable: deadline_class(&rec.platform),
        permanent_how: format!(
            "start the program under the reservation, e.g. from its systemd unit:\n\
             ExecStart={command}"
        ),
        change: Change::Remove(keys),
    })
}

/// Whether the measured kernel has the SCHED_DEADLINE class (Linux 3.14
/// and later), so a reservation can be made, and verified, at run time.
/// A record that does not name its kernel cannot tell, and says no.
pub fn deadline_class(p: &Platform) -> bool {
    let Some(k) = p.kernel.as_deref() else {
        return false;
    };
    let mut parts = k.split(|c: char| !c.is_ascii_digit());
    let major: u32 = parts.next().and_then(|x| x.parse().ok()).unwrap_or(0);
    let minor: u32 = parts.next().and_then(|x| x.parse().ok()).unwrap_or(0);
    (major, minor) >= (3, 14)
}

/// Buffering, for one workload (a fix for one profile says nothing of
/// the others): the least n of the same length that meets it.
fn buffering(rec: &Record, cpu: u32, profiles: &[Profile]) -> Vec<Candidate> {
    let mut out = Vec::new();
    let (Some(m), 1) = (latency_model(rec, cpu), profiles.len()) else {
        return out;
    };
    for p in profiles {
        let ts = p.target.as_secs_f64();
        let max_n = (p.buffering.buffers * 4).max(64);
        let Some(r) = least_buffers(&m, &p.buffering, ts, max_n) else {
            continue;
        };
        let n = r.buffering.buffers;
        if n <= p.buffering.buffers {
            continue;
        }
        let added = p.buffering.buffer_len * u64::from(n - p.buffering.buffers);
        let mut target = BTreeMap::new();
        target.insert("profile".into(), json!(p.name));
        target.insert("buffers".into(), json!(n));
        target.insert("buffer_len_ns".into(), json!(p.buffering.buffer_len));
        out.push(Candidate {
            id: format!("buffers-{n}-{}", slug(&p.name)),
            kind: "buffering",
            target,
            description: format!(
                "{}: {n} buffers of {} instead of {}",
                p.name, p.buffering.buffer_len, p.buffering.buffers
            ),
            why: format!(
                "the least n whose MTTF from the same queue model reaches {}'s target",
                p.name
            ),
            cost: format!(
                "{added} more latency end to end (and the memory of {} more buffers)",
                n - p.buffering.buffers
            ),
            cost_cpu_fraction: 0.0,
            runtime_applicable: false,
            permanent_how: "the application's buffer configuration (never applied by punctual)"
                .into(),
            change: Change::Buffers(p.name.clone(), r.buffering),
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use punctual_record::cause::{CpuAccount, SourceTotal, SourceTotalShare};
    use punctual_record::{Recorder, Source, Spike, Stolen};

    /// A real-time thread attributed `total_ns` in one long run (the
    /// throttling tests' busy and resting threads).
    fn busy_thread(name: &str, sched: &str, total_ns: u64, share: f64) -> SourceTotalShare {
        SourceTotalShare {
            total: SourceTotal {
                kind: "thread".into(),
                name: name.into(),
                sched: Some(sched.into()),
                count: 1,
                total_ns,
                max_ns: 1_000_000,
            },
            share,
        }
    }

    /// `throttled`'s record at the kernel's default limit (950 ms of
    /// every 1 s) with a busy real-time thread on CPU 1: `busy/9`, 90 % of
    /// the CPU at `rt1`, named by `cause` and in the stolen time.
    fn throttled_with_busy_thread() -> Record {
        let mut r = throttled("6.18.4", Nanos::ZERO);
        r.platform.rt_runtime_us = Some(950_000);
        r.platform.rt_period_us = Some(1_000_000);
        add_thread(&mut r, busy_thread("busy/9", "rt1", 90_000_000_000, 0.9));
        r
    }

    /// Names `thread` in `r`'s cause summary and in its stolen time
    /// (1 ms).
    fn add_thread(r: &mut Record, thread: SourceTotalShare) {
        let mut sum = r.cause().unwrap();
        r.stolen[0]
            .by_source
            .push(share("thread", &thread.total.name, 1_000_000));
        sum.per_cpu[0].sources.push(thread);
        r.set_cause(&sum);
    }

    fn share(kind: &str, name: &str, ns: u64) -> SourceShare {
        SourceShare {
            kind: kind.into(),
            name: name.into(),
            count: 1,
            total_ns: Nanos(ns),
            max_ns: Nanos(ns),
            share: 0.0,
        }
    }

    /// A 1 ms timer on CPU 1 for 200 s: a FIFO-99 thread delays one
    /// wake-up in 100 by 900 µs, an interrupt one in 1000 by 30 µs, the
    /// rest wake 20 µs late. A check-like record with both in the spike
    /// log and in the stolen split.
    fn record() -> Record {
        let mut rec = Recorder::new(Nanos::from_us(1)).with_sample_period(Nanos::from_ms(1));
        let mut spikes = Vec::new();
        for i in 0..200_000u64 {
            let (v, causes) = if i % 100 == 0 {
                (
                    Nanos::from_us(925),
                    vec![
                        share("thread", "hog/42", 900_000),
                        share("unexplained", "no guest event", 5_000),
                    ],
                )
            } else if i % 1000 == 7 {
                (Nanos::from_us(55), vec![share("irq", "eth0", 30_000)])
            } else {
                (Nanos::from_us(20), Vec::new())
            };
            rec.record(v);
            if !causes.is_empty() {
                spikes.push(Spike {
                    at_ns: Nanos::from_ms(i),
                    cpu: 1,
                    task: None,
                    metric: Metric::Latency,
                    value_ns: v,
                    causes,
                    incomplete: false,
                });
            }
        }
        let mut s = rec.to_series("cpu1.latency", Metric::Latency);
        s.cpu = Some(1);
        let mut r = Record::new(Source::Measured, "check", Platform::default());
        r.platform.online_cpus = Some("0-1".into());
        r.platform.preemption = Some("dynamic(none)".into());
        r.platform.irqs = vec![punctual_record::IrqInfo {
            irq: "36".into(),
            name: "eth0".into(),
            affinity: "0-1".into(),
        }];
        r.duration_ns = Nanos::from_secs(200);
        r.series.push(s);
        r.spikes = spikes;
        r.set_config("timer.policy", "fifo:95");
        r.stolen.push(Stolen {
            cpu: 1,
            observed_ns: Nanos::from_secs(100),
            total_ns: Nanos::from_ms(2000),
            fraction: 0.02,
            intervals: 2000,
            threshold_ns: Nanos::from_us(1),
            by_source: vec![
                share("thread", "hog/42", 1_800_000_000),
                share("irq", "eth0", 60_000_000),
            ],
            ..Default::default()
        });
        let mut sum = CauseSummary::default();
        sum.per_cpu.push(CpuAccount {
            cpu: 1,
            span_ns: 200_000_000_000,
            sources: vec![SourceTotalShare {
                total: SourceTotal {
                    kind: "thread".into(),
                    name: "hog/42".into(),
                    sched: Some("rt99".into()),
                    count: 2000,
                    total_ns: 1_800_000_000,
                    max_ns: 900_000,
                },
                share: 0.9,
            }],
            ..Default::default()
        });
        r.set_cause(&sum);
        r
    }

    fn profiles() -> Vec<Profile> {
        crate::profiles::builtin()
    }

    /// A 1 ms timer on CPU 1 for 100 s whose wake-ups wait out RT
    /// throttling once a second (40 ms), 5 s in all, on `kernel`, with
    /// `idle` of the throttled time idle in the CPU's accounting.
    fn throttled(kernel: &str, idle: Nanos) -> Record {
        let mut rec = Recorder::new(Nanos::from_us(1)).with_sample_period(Nanos::from_ms(1));
        let mut spikes = Vec::new();
        for i in 0..100_000u64 {
            let v = if i % 1000 == 500 {
                spikes.push(Spike {
                    at_ns: Nanos::from_ms(i),
                    cpu: 1,
                    task: None,
                    metric: Metric::Latency,
                    value_ns: Nanos::from_ms(40),
                    causes: vec![share("throttle", "rt throttling", 39_990_000)],
                    incomplete: false,
                });
                Nanos::from_ms(40)
            } else {
                Nanos::from_us(10)
            };
            rec.record(v);
        }
        let mut s = rec.to_series("cpu1.latency", Metric::Latency);
        s.cpu = Some(1);
        let mut r = Record::new(Source::Measured, "check", Platform::default());
        r.platform.kernel = Some(kernel.into());
        r.platform.online_cpus = Some("0-1".into());
        r.duration_ns = Nanos::from_secs(100);
        r.series.push(s);
        r.spikes = spikes;
        r.set_config("timer.policy", "fifo:95");
        r.stolen.push(Stolen {
            cpu: 1,
            observed_ns: Nanos::from_secs(100),
            total_ns: Nanos::from_secs(5),
            fraction: 0.05,
            intervals: 100,
            threshold_ns: Nanos::from_us(1),
            by_source: vec![share("throttle", "rt throttling", 5_000_000_000)],
            ..Default::default()
        });
        let mut sum = CauseSummary::default();
        sum.per_cpu.push(CpuAccount {
            cpu: 1,
            span_ns: 100_000_000_000,
            idle_ns: idle.0,
            sources: vec![SourceTotalShare {
                total: SourceTotal {
                    kind: "throttle".into(),
                    name: "rt throttling".into(),
                    sched: None,
                    count: 100,
                    total_ns: 5_000_000_000,
                    max_ns: 50_000_000,
                },
                share: 1.0,
            }],
            ..Default::default()
        });
        r.set_cause(&sum);
        r
    }

    fn lift(r: &Record) -> Fix {
        let p = vec![consumer(2000)];
        advise(r, &p, false)
            .unwrap()
            .fixes
            .into_iter()
            .find(|f| f.id == "rt-runtime-unlimited")
            .unwrap()
    }

    /// Before the fair server (6.12), lifting RT throttling takes all the
    /// throttled time out.
    #[test]
    fn without_a_fair_server_lifting_rt_throttling_takes_it_all_out() {
        let f = lift(&throttled("6.6.0", Nanos::ZERO));
        assert_eq!(f.predicted.stolen_fraction, Some(0.0));
        assert!(
            f.predicted.p999_ns < Nanos::from_us(20),
            "{:?}",
            f.predicted
        );
        assert_eq!(
            f.takes_out[0].total_ns,
            Nanos(100 * 39_990_000 + 5_000_000_000)
        );
    }

    /// With a fair server and the throttled time filled by fair-class
    /// work (never idle), the server takes its 5 % as RT throttling did:
    /// lifting it is predicted to buy nothing, and ranks nothing.
    #[test]
    fn the_fair_server_keeps_the_gaps_fair_work_fills() {
        let f = lift(&throttled("6.18.4", Nanos::ZERO));
        assert_eq!(f.predicted.stolen_fraction, f.now.stolen_fraction);
        assert_eq!(f.predicted.p999_ns, f.now.p999_ns);
        assert_eq!(f.gain_log10, 0.0);
        assert!(f.takes_out.is_empty(), "{:?}", f.takes_out);
        assert!(f.why.contains("fair server"), "{}", f.why);
    }

    /// Fair-class work that used 1 % of the CPU in the throttled 5 %
    /// (the rest idle) keeps 1 %: a fifth of the throttled time, as whole
    /// gaps, and its runtime read from the record rather than the
    /// default when the record has it.
    #[test]
    fn the_fair_server_keeps_only_the_fair_work_it_runs() {
        let r = throttled("6.18.4", Nanos::from_secs(4));
        let f = lift(&r);
        let st = f.predicted.stolen_fraction.unwrap();
        assert!((st - 0.01).abs() < 1e-9, "{st}");
        let edited = remove_sources_kept(&r, 1, &|k, _| k == "throttle", 0.2);
        let left = edited
            .spikes
            .iter()
            .filter(|s| !s.causes.is_empty())
            .count();
        assert_eq!(left, 20);
        // A smaller server than the fair work: its runtime bounds it.
        let mut r = throttled("6.18.4", Nanos::ZERO);
        r.platform
            .other
            .insert("fair_server_runtime_ns".into(), "20000000".into());
        r.platform
            .other
            .insert("fair_server_period_ns".into(), "1000000000".into());
        let st = lift(&r).predicted.stolen_fraction.unwrap();
        assert!((st - 0.02).abs() < 1e-9, "{st}");
    }

    /// A busy FIFO 1 thread that used 90 % of the CPU ran the real-time
    /// class into RT throttling: moving it ends the throttling too, so
    /// its move takes the throttled time out with it; lowering it (still
    /// real-time) would not, and no fix is offered for that here.
    #[test]
    fn moving_the_real_time_thread_that_ran_into_throttling_ends_it() {
        let mut r = throttled_with_busy_thread();
        let p = vec![consumer(2000)];
        let fixes = advise(&r, &p, false).unwrap().fixes;
        let mv = fixes.iter().find(|f| f.kind == "thread-affinity").unwrap();
        assert!(
            mv.takes_out.iter().any(|t| t.kind == "throttle"),
            "{:?}",
            mv.takes_out
        );
        assert_eq!(mv.predicted.stolen_fraction, Some(0.0));
        // A FIFO 99 thread that rests (5 % of the CPU) did not cause it:
        // moving it leaves the busy one to run into the limit.
        let mut small = r.clone();
        add_thread(
            &mut small,
            busy_thread("noisy/5", "rt99", 5_000_000_000, 0.05),
        );
        let fixes = advise(&small, &p, false).unwrap().fixes;
        let by = |id: &str| fixes.iter().find(|f| f.id.starts_with(id)).unwrap();
        assert!(by("thread-noisy-5")
            .takes_out
            .iter()
            .all(|t| t.kind != "throttle"));
        assert!(by("thread-busy-9")
            .takes_out
            .iter()
            .any(|t| t.kind == "throttle"));
        // Another real-time thread as busy would still run into it.
        add_thread(&mut r, busy_thread("busy2/10", "rt1", 96_000_000_000, 0.9));
        let fixes = advise(&r, &p, false).unwrap().fixes;
        let mv = fixes
            .iter()
            .find(|f| f.kind == "thread-affinity" && f.id.contains("busy-9"))
            .unwrap();
        assert!(mv.takes_out.iter().all(|t| t.kind != "throttle"));
    }

    /// Moving the busy real-time thread and a reservation both end the
    /// RT throttling that is all the record names, so they gain the
    /// same; the reservation holds a quarter of the CPU for the work,
    /// the move gives up none (the thread keeps its 90 % on CPU 0), and
    /// ranks first though it moves more CPU time.
    #[test]
    fn an_equal_gain_that_gives_up_no_cpu_outranks_a_reservation() {
        let r = throttled_with_busy_thread();
        let mut p = consumer(2000);
        p.buffering.compute = crate::model::Compute::Time(Nanos::from_us(500));
        let fixes = advise(&r, &[p], false).unwrap().fixes;
        let at = |kind: &str| fixes.iter().position(|f| f.kind == kind).unwrap();
        let (mv, res) = (&fixes[at("thread-affinity")], &fixes[at("reservation")]);
        let step = |g: f64| (g / GAIN_STEP).round() as i64;
        assert!(mv.gain_log10 > 0.0, "{}", mv.gain_log10);
        assert_eq!(step(mv.gain_log10), step(res.gain_log10));
        assert!(mv.cost_cpu_fraction > res.cost_cpu_fraction);
        assert!(cpu_given_up(res) > 0.0 && cpu_given_up(mv) == 0.0);
        assert!(at("thread-affinity") < at("reservation"), "{fixes:#?}");
    }

    /// A FIFO 99 thread that runs 1 ms at a time, one of whose runs the
    /// hypervisor stretched to 7.6 ms (the CPU's steal over the run:
    /// 20 ms). Taking the thread away leaves the 6.6 ms it ran past its
    /// mean run in that spike, as host time, and takes the other runs
    /// out whole; with no steal accounted the whole run goes.
    #[test]
    fn host_time_inside_a_removed_threads_run_stays() {
        let steal = |ns: u64| {
            let mut rec = Recorder::new(Nanos::from_us(1)).with_sample_period(Nanos::from_ms(1));
            let mut spikes = Vec::new();
            for i in 0..10_000u64 {
                let run = match i {
                    5000 => Some(7_600_000),
                    _ if i % 100 == 7 => Some(1_000_000),
                    _ => None,
                };
                let v = match run {
                    Some(r) => {
                        spikes.push(Spike {
                            at_ns: Nanos::from_ms(i),
                            cpu: 1,
                            task: None,
                            metric: Metric::Latency,
                            value_ns: Nanos(r + 10_000),
                            causes: vec![share("thread", "noisy/5", r)],
                            incomplete: false,
                        });
                        Nanos(r + 10_000)
                    }
                    None => Nanos::from_us(10),
                };
                rec.record(v);
            }
            let mut s = rec.to_series("cpu1.latency", Metric::Latency);
            s.cpu = Some(1);
            let mut r = Record::new(Source::Measured, "timer", Platform::default());
            r.series.push(s);
            r.spikes = spikes;
            let mut sum = CauseSummary::default();
            sum.per_cpu.push(CpuAccount {
                cpu: 1,
                span_ns: 10_000_000_000,
                kernel_steal_ns: ns,
                sources: vec![busy_thread("noisy/5", "rt99", 106_600_000, 1.0)],
                ..Default::default()
            });
            sum.per_cpu[0].sources[0].total.count = 100;
            r.set_cause(&sum);
            r
        };
        let left = |r: &Record| {
            let e = remove_sources(r, 1, &|k, n| k == "thread" && n == "noisy/5");
            let mut v: Vec<u64> = e.spikes.iter().map(|s| s.value_ns.0).collect();
            v.sort_unstable();
            (v, e)
        };
        // Mean run 1.066 ms: 6.534 ms of the long run is the host's.
        let (v, e) = left(&steal(20_000_000));
        assert_eq!(*v.last().unwrap(), 6_534_000 + 10_000);
        // The others go down to the median wake-up (its 1 µs bucket's edge).
        assert!(v[..v.len() - 1].iter().all(|&x| x < 11_000), "{v:?}");
        let kept = e.spikes.iter().flat_map(|s| &s.causes).collect::<Vec<_>>();
        assert_eq!(kept.len(), 1);
        assert_eq!(kept[0].name, HOST_IN_RUNS);
        // Less steal than the stretch: only that much stays.
        let (v, _) = left(&steal(2_000_000));
        assert_eq!(*v.last().unwrap(), 2_000_000 + 10_000);
        // None accounted: the run goes whole.
        let (v, _) = left(&steal(0));
        assert!(v.iter().all(|&x| x < 11_000), "{v:?}");
    }

    /// Each 40 ms RT-throttling window ends with 3.5 ms with no guest
    /// event. The CPU's steal over the run (10 ms) accounts for two
    /// whole such stretches and part of a third, which stay as the
    /// hypervisor's; the rest went with the window, and lifting the
    /// throttle takes it out too. With no steal accounted none stays.
    #[test]
    fn time_with_no_guest_event_in_a_removed_window_stays_up_to_the_steal() {
        let with_steal = |ns: u64| {
            let mut r = throttled("6.6.0", Nanos::ZERO);
            for sp in r.spikes.iter_mut() {
                sp.causes = vec![
                    share("throttle", "rt throttling", 36_490_000),
                    share("unexplained", "no guest event", 3_500_000),
                ];
            }
            let mut sum = r.cause().unwrap();
            sum.per_cpu[0].kernel_steal_ns = ns;
            r.set_cause(&sum);
            let e = remove_sources(&r, 1, &|k, _| k == "throttle");
            let mut v: Vec<u64> = e.spikes.iter().map(|s| s.value_ns.0).collect();
            v.sort_unstable_by(|a, b| b.cmp(a));
            (v, e)
        };
        let (v, e) = with_steal(10_000_000);
        assert_eq!(v[..3], [3_510_000, 3_510_000, 3_010_000]);
        // The rest down to the median wake-up (its 1 µs bucket's edge).
        assert!(v[3..].iter().all(|&x| x < 11_000), "{v:?}");
        let kept: u64 = e
            .spikes
            .iter()
            .flat_map(|s| &s.causes)
            .filter(|c| is_no_event(c))
            .map(|c| c.total_ns.0)
            .sum();
        assert_eq!(kept, 10_000_000);
        let (v, _) = with_steal(0);
        assert!(v.iter().all(|&x| x < 11_000), "{v:?}");
    }

    /// 3 ms of a disk's interrupts, 30 of them, came in each 40 ms of
    /// RT throttling: lifting it does not leave 3 ms late wake-ups, the
    /// interrupts fall where they would have, and a wake-up is late by
    /// the longest of them (100 µs) over its own 10 µs. One 3 ms event
    /// (a single run) is not split.
    #[test]
    fn what_came_inside_a_removed_window_is_spread_over_it() {
        let with = |count: u64, max_ns: u64| {
            let mut r = throttled("6.6.0", Nanos::ZERO);
            for sp in r.spikes.iter_mut() {
                sp.causes = vec![
                    share("throttle", "rt throttling", 36_990_000),
                    SourceShare {
                        count,
                        max_ns: Nanos(max_ns),
                        ..share("irq", "disk", 3_000_000)
                    },
                ];
            }
            let e = remove_sources(&r, 1, &|k, _| k == "throttle");
            e.spikes.iter().map(|s| s.value_ns).max().unwrap()
        };
        assert_eq!(with(30, 100_000), Nanos(110_000));
        assert_eq!(with(1, 3_000_000), Nanos(3_010_000));
    }

    /// What a `--verify` run keeps of its attribution: each source's time
    /// summed over the CPU's spikes and stolen split, largest first, cut
    /// at the number asked for, and nothing of another CPU.
    #[test]
    fn attributed_sums_spikes_and_stolen_time_largest_first() {
        let mut r = record();
        r.spikes.push(Spike {
            at_ns: Nanos::ZERO,
            cpu: 0,
            task: None,
            metric: Metric::Latency,
            value_ns: Nanos::from_ms(50),
            causes: vec![share("thread", "elsewhere/7", 50_000_000)],
            incomplete: false,
        });
        let all = attributed(&r, 1, 10);
        let names: Vec<&str> = all.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["hog/42", "eth0", "no guest event"]);
        // 2000 spikes of 900 µs, and 1.8 s in the stolen split.
        assert_eq!(all[0].total_ns, Nanos(2000 * 900_000 + 1_800_000_000));
        // 200 spikes of 30 µs, and 60 ms in the stolen split.
        assert_eq!(all[1].total_ns, Nanos(200 * 30_000 + 60_000_000));
        assert_eq!(attributed(&r, 1, 1).len(), 1);
        assert!(attributed(&r, 0, 10)
            .iter()
            .all(|t| t.name == "elsewhere/7"));
    }

    /// A 1 ms timer on CPU 1 for 200 s, drawn from `seed`: every wake-up
    /// 15 µs plus an exponential 4 µs late; one in 500 also hit by an
    /// interrupt (an exponential 20 µs more, attributed to eth0); with
    /// `hog`, one in 200 also delayed 100–800 µs by a thread (attributed
    /// to hog/42). Without `hog` it is the record the thread's removal
    /// would truly give.
    fn synthetic(hog: bool, seed: u64) -> Record {
        timer_record(200, seed, |_, v, uniform, causes| {
            if uniform() < 1.0 / 500.0 {
                let d = -20_000.0 * (1.0 - uniform()).ln();
                *v += d;
                causes.push(share("irq", "eth0", d as u64));
            }
            let (h, d) = (uniform(), 100_000.0 + 700_000.0 * uniform());
            if hog && h < 1.0 / 200.0 {
                *v += d;
                causes.push(share("thread", "hog/42", d as u64));
            }
        })
    }

    /// A 1 ms timer on CPU 1 for `secs` s, drawn from `seed`: every
    /// wake-up 15 µs plus an exponential 4 µs late, to which `hit` adds
    /// for wake-up `i` (drawing from the same stream, after the base, and
    /// naming its causes); a wake-up with causes goes to the spike log.
    fn timer_record(
        secs: u64,
        seed: u64,
        mut hit: impl FnMut(u64, &mut f64, &mut dyn FnMut() -> f64, &mut Vec<SourceShare>),
    ) -> Record {
        let mut x = seed | 1;
        let mut uniform = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 11) as f64 / (1u64 << 53) as f64
        };
        let mut rec = Recorder::new(Nanos::from_us(1)).with_sample_period(Nanos::from_ms(1));
        let mut spikes = Vec::new();
        for i in 0..secs * 1000 {
            let mut v = 15_000.0 - 4_000.0 * (1.0 - uniform()).ln();
            let mut causes = Vec::new();
            hit(i, &mut v, &mut uniform, &mut causes);
            let v = Nanos(v as u64);
            rec.record(v);
            if !causes.is_empty() {
                spikes.push(Spike {
                    at_ns: Nanos::from_ms(i),
                    cpu: 1,
                    task: None,
                    metric: Metric::Latency,
                    value_ns: v,
                    causes,
                    incomplete: false,
                });
            }
        }
        let mut s = rec.to_series("cpu1.latency", Metric::Latency);
        s.cpu = Some(1);
        let mut r = Record::new(Source::Measured, "check", Platform::default());
        r.duration_ns = Nanos::from_secs(secs);
        r.series.push(s);
        r.spikes = spikes;
        r
    }

    /// A consumer waking every `period` with two buffers and 20 µs of
    /// compute: `period` − 20 µs of slack.
    fn consumer(period_us: u64) -> Profile {
        Profile {
            name: format!("{period_us}us"),
            family: None,
            size: format!("{period_us} µs × 2"),
            buffering: Buffering::new(
                2,
                Nanos::from_us(period_us),
                crate::model::Compute::Time(Nanos::from_us(20)),
            ),
            target: Nanos::from_secs(3600),
            source: "test".into(),
        }
    }

    /// The true after-fix record is the same draws without the thread
    /// (`synthetic(false, seed)`); records of other seeds differ from it
    /// by their own sampling error (×10 between seeds where the slack is
    /// past the interrupts' observed tail), which is not the edit's.
    /// 100 µs: the underruns are observed; 150 µs: they come from the
    /// fitted tail.
    #[test]
    fn taking_a_thread_out_predicts_the_mttf_of_the_record_without_it() {
        for period_us in [100u64, 150] {
            for seed in [1u64, 7, 99] {
                let with = synthetic(true, seed);
                let truth = synthetic(false, seed);
                let p = vec![consumer(period_us)];
                let now = figures(&with, 1, &p).mttf_s.unwrap();
                let edited = remove_sources(&with, 1, &|k, n| k == "thread" && n == "hog/42");
                let pred = figures_edited(&with, &edited, 1, &p).mttf_s.unwrap();
                let real = figures(&truth, 1, &p).mttf_s.unwrap();
                let at = format!("{period_us} µs, seed {seed}");
                assert!(pred >= now, "{at}: predicted {pred} s below now {now} s");
                // Beyond the 0.5–2 band below: a prediction that left
                // the MTTF as it was would fail.
                assert!(
                    real > 2.5 * now,
                    "{at}: the thread must matter: {now} → {real}"
                );
                let r = pred / real;
                assert!(
                    (0.5..=2.0).contains(&r),
                    "{at}: predicted {pred} s, true {real} s"
                );
            }
        }
    }

    /// A 1 ms timer for 100 s: a thread stalls it 300 µs every 20 ms, and
    /// an interrupt (when `rnd`) 100 to 700 µs at random, about 70 times
    /// a second. The spike log holds both, and is bounded (it dropped the
    /// smaller wake-ups).
    fn periodic_beside_random(rnd: bool, seed: u64) -> Record {
        periodic_beside_random_at(if rnd { 1.0 / 15.0 } else { 0.0 }, seed)
    }

    /// As [`periodic_beside_random`], the interrupt hitting a wake-up
    /// off the thread's with probability `rnd`.
    fn periodic_beside_random_at(rnd: f64, seed: u64) -> Record {
        let mut r = timer_record(100, seed, |i, v, uniform, causes| {
            if i % 20 == 3 {
                *v += 300_000.0;
                causes.push(share("thread", "per/7", 300_000));
            }
            let (r, d) = (uniform(), 100_000.0 + 600_000.0 * uniform());
            if i % 20 != 3 && r < rnd {
                *v += d;
                causes.push(share("irq", "rnd", d as u64));
            }
        });
        r.spikes_dropped = 1000;
        r
    }

    /// Taking the random interrupt out leaves the thread's stalls, which
    /// still come every 20 ms: the edited model keeps them periodic, as
    /// the record without the interrupt has them, and forecasts what that
    /// record does (three 200 µs buffers: one 300 µs stall fits the
    /// slack, two close together do not, which periodic stalls never
    /// are).
    #[test]
    fn taking_a_random_source_out_keeps_the_period_of_the_one_left() {
        let p = vec![Profile {
            buffering: Buffering::new(
                3,
                Nanos::from_us(200),
                crate::model::Compute::Time(Nanos::from_us(20)),
            ),
            ..consumer(200)
        }];
        for seed in [1u64, 5] {
            let with = periodic_beside_random(true, seed);
            let truth = periodic_beside_random(false, seed);
            let edited = remove_sources(&with, 1, &|k, n| k == "irq" && n == "rnd");
            let m = edited_model(&with, &edited, 1).unwrap();
            assert!(
                latency_model(&truth, 1).unwrap().stall_times.is_some(),
                "seed {seed}: the record without the interrupt is periodic"
            );
            assert!(
                m.stall_times.is_some(),
                "seed {seed}: the edited log lost the thread's period"
            );
            let pred = figures_edited(&with, &edited, 1, &p)
                .mttf_s
                .unwrap_or(f64::INFINITY);
            let real = figures(&truth, 1, &p).mttf_s.unwrap_or(f64::INFINITY);
            let r = pred / real;
            assert!(
                (0.5..=2.0).contains(&r) || (pred.is_infinite() && real.is_infinite()),
                "seed {seed}: predicted {pred} s, true {real} s"
            );
        }
    }

    /// Taking the periodic thread out leaves the random interrupt,
    /// forecast as Poisson arrivals. The record's own forecast holds the
    /// same interrupt as the Poisson rest beside the thread's periodic
    /// stalls, so with the thread gone its MTTF can only grow: the
    /// interrupt's arrivals are read the same way on both sides, and the
    /// thread's stalls are gone.
    #[test]
    fn taking_the_periodic_source_out_never_shortens_the_mttf() {
        let p: Vec<Profile> = [(3, 200), (3, 300), (4, 300), (3, 400), (5, 200), (4, 250)]
            .into_iter()
            .map(|(n, us)| Profile {
                name: format!("{us}us x {n}"),
                buffering: Buffering::new(
                    n,
                    Nanos::from_us(us),
                    crate::model::Compute::Time(Nanos::from_us(20)),
                ),
                ..consumer(us)
            })
            .collect();
        for (seed, rnd) in [(1u64, 1.0 / 100.0), (5, 1.0 / 100.0), (1, 1.0 / 60.0)] {
            let with = periodic_beside_random_at(rnd, seed);
            let edited = remove_sources(&with, 1, &|k, n| k == "thread" && n == "per/7");
            let now = figures(&with, 1, &p);
            let after = figures_edited(&with, &edited, 1, &p);
            for (a, b) in now.profiles.iter().zip(&after.profiles) {
                let (a_s, b_s) = (eff(a.mttf_s), eff(b.mttf_s));
                assert!(
                    b_s >= a_s,
                    "seed {seed}, interrupt {rnd}, {}: {b_s} s without the thread, {a_s} s now",
                    a.profile
                );
            }
        }
    }

    /// The thread's stalls come every 20 ms whether or not the interrupt
    /// hits between them: the record's forecast replays the thread's
    /// period, also where the interrupt comes often enough (one wake-up
    /// in 30) that the whole log shows none, and taking the interrupt out
    /// keeps it.
    #[test]
    fn taking_the_random_source_out_keeps_the_record_period() {
        for (seed, rnd) in [(1u64, 1.0 / 100.0), (5, 1.0 / 30.0), (1, 1.0 / 30.0)] {
            let with = periodic_beside_random_at(rnd, seed);
            let edited = remove_sources(&with, 1, &|k, n| k == "irq" && n == "rnd");
            let b = Buffering::new(
                3,
                Nanos::from_us(200),
                crate::model::Compute::Time(Nanos::from_us(20)),
            );
            let period = |m: &TailModel| {
                let st = crate::queue::StallModel::from_tail(&m.tail);
                crate::queue::forecast_with(&m.tail, &st, m.stall_times.as_ref(), &b)
                    .renewal
                    .and_then(|r| r.period_ns)
            };
            let lm = latency_model(&with, 1).unwrap();
            let whole: Vec<u64> = lm.spike_log.iter().map(|&(a, _)| a.0).collect();
            assert!(
                rnd < 0.02 || crate::periodic::detect(&whole, 1e6).is_none(),
                "seed {seed}: the interrupt must hide the period from the whole log"
            );
            let now = period(&lm).expect("record periodic");
            let after = period(&edited_model(&with, &edited, 1).unwrap()).expect("edit periodic");
            for (what, p) in [("record", now), ("edited", after)] {
                assert!(
                    (p - 20e6).abs() < 0.2e6,
                    "seed {seed}: {what} period {p} ns, the thread's is 20 ms"
                );
            }
        }
    }

    #[test]
    fn an_edited_fit_never_predicts_a_heavier_tail() {
        let with = synthetic(true, 3);
        let base = latency_model(&with, 1).unwrap();
        let edited = remove_sources(&with, 1, &|k, n| k == "thread" && n == "hog/42");
        let m = edited_model(&with, &edited, 1).unwrap();
        // Out to the base fit's endpoint, where a bounded fit puts zero
        // (the interval's `thin_tail_bound` covers what lies past it).
        let end = base
            .fit
            .and_then(|f| f.endpoint_ns())
            .unwrap_or(f64::INFINITY);
        for us in [50u64, 100, 300, 600, 1000, 5000] {
            let x = Nanos::from_us(us);
            if x.0 as f64 >= end {
                continue;
            }
            let (a, b) = (base.prob_above(x), m.prob_above(x));
            assert!(
                b.probability <= a.probability,
                "{x}: {} > {}",
                b.probability,
                a.probability
            );
        }
    }

    #[test]
    fn refuses_records_without_causes_and_other_kinds() {
        let mut r = record();
        r.extra.clear();
        for s in r.spikes.iter_mut() {
            s.causes.clear();
        }
        assert_eq!(
            advise(&r, &profiles(), true).unwrap_err(),
            AdviseError::NoCause
        );
        let mut r = record();
        r.kind = "simulate".into();
        assert!(matches!(
            advise(&r, &profiles(), true),
            Err(AdviseError::Kind(_))
        ));
    }

    #[test]
    fn removing_a_source_moves_its_spikes_and_stolen_time() {
        let r = record();
        let edited = remove_sources(&r, 1, &|k, n| k == "thread" && n == "hog/42");
        let s = edited.series_named("cpu1.latency").unwrap();
        // Same number of wake-ups; the 2000 late ones now at 25 µs.
        assert_eq!(s.histogram.total(), 200_000);
        assert_eq!(s.count_above(Nanos::from_us(100)), 0);
        assert!(s.max < Nanos::from_us(100), "{}", s.max);
        let st = &edited.stolen[0];
        assert_eq!(st.total_ns, Nanos::from_ms(200));
        assert!((st.fraction - 0.002).abs() < 1e-9);
        assert_eq!(st.by_source.len(), 1);
        // The interrupt's spikes are untouched.
        let irq: Vec<_> = edited
            .spikes
            .iter()
            .filter(|s| s.causes.iter().any(|c| c.name == "eth0"))
            .collect();
        assert!(irq.iter().all(|s| s.value_ns == Nanos::from_us(55)));
    }

    #[test]
    fn the_offending_thread_ranks_first_and_the_interrupt_below() {
        let a = advise(&record(), &profiles(), true).unwrap();
        assert!(!a.fixes.is_empty());
        let top = &a.fixes[0];
        assert!(
            top.target.get("tid") == Some(&json!(42)) || top.kind == "isolate-cpu",
            "{top:?}"
        );
        assert!(top.gain_log10 > 1.0, "{}", top.gain_log10);
        assert!(top.predicted.p99_ns < top.now.p99_ns);
        let irq = a.fixes.iter().find(|f| f.kind == "irq-affinity").unwrap();
        assert_eq!(irq.id, "irq-36-to-cpu0");
        assert!(irq.gain_log10 < top.gain_log10);
        // Lowering the FIFO-99 thread below the FIFO-95 task is offered
        // and costs no CPU, so it ranks above moving the thread when the
        // two buy the same.
        let prio = a.fixes.iter().find(|f| f.kind == "priority").unwrap();
        assert_eq!(prio.target["prio"], json!(94));
        let mv = a
            .fixes
            .iter()
            .find(|f| f.kind == "thread-affinity")
            .unwrap();
        assert!((prio.gain_log10 - mv.gain_log10).abs() < 1e-9);
        let pi = a.fixes.iter().position(|f| f.kind == "priority").unwrap();
        let mi = a
            .fixes
            .iter()
            .position(|f| f.kind == "thread-affinity")
            .unwrap();
        assert!(pi < mi);
        // Every profile advised for misses or is undecided now.
        assert!(a.now[0]
            .1
            .profiles
            .iter()
            .all(|p| p.state != VerdictState::Meets));
    }

    /// On PREEMPT_RT an interrupt's handler runs in a thread (FIFO 50 by
    /// default) that follows its interrupt's affinity: above a task at
    /// FIFO 40 it is offered lowered below the task, with its time taken
    /// out, and never moved as a thread.
    #[test]
    fn an_interrupt_thread_above_the_task_is_lowered_not_moved() {
        let text = serde_json::to_string(&record())
            .unwrap()
            .replace("hog/42", "irq/36-eth0/120")
            .replace("\"rt99\"", "\"rt50\"")
            .replace("fifo:95", "fifo:40");
        let r: Record = serde_json::from_str(&text).unwrap();
        let a = advise(&r, &profiles(), true).unwrap();
        let prio = a
            .fixes
            .iter()
            .find(|f| f.kind == "priority")
            .expect("a priority fix for the interrupt's thread");
        assert_eq!(prio.target["tid"], json!(120));
        assert_eq!(prio.target["prio"], json!(39));
        assert!(prio.gain_log10 > 1.0, "{prio:?}");
        assert!(prio.predicted.p99_ns < prio.now.p99_ns);
        assert!(prio.permanent_how.contains("chrt -f -p 39"), "{prio:?}");
        assert!(!a
            .fixes
            .iter()
            .any(|f| f.kind == "thread-affinity" && f.id.contains("irq-36")));
        // The same thread below the task gets no priority fix.
        let r: Record = serde_json::from_str(&text.replace("fifo:40", "fifo:95")).unwrap();
        assert!(!candidates(&r, 1, &profiles())
            .iter()
            .any(|c| c.kind == "priority"));
    }

    #[test]
    fn a_source_of_no_weight_is_within_noise() {
        let mut r = record();
        for s in r.spikes.iter_mut() {
            s.causes.push(share("thread", "tiny/7", 1));
        }
        let a = advise(&r, &profiles(), true).unwrap();
        let tiny = a
            .fixes
            .iter()
            .find(|f| f.kind == "thread-affinity" && f.id.contains("tiny"))
            .unwrap();
        assert!(tiny.within_noise, "{tiny:?}");
        // A gain the record cannot tell from none ranks nothing.
        assert_eq!(tiny.gain_log10, 0.0);
    }

    /// Without wake-ups (a noise record) the gain is the stolen time and
    /// gap tail taken away.
    #[test]
    fn a_noise_record_ranks_by_stolen_time() {
        let mut r = record();
        r.kind = "noise".into();
        // 2000 gaps of 900 µs, the thread's; 2000 of 30 µs, the interrupt's.
        let mut g = Recorder::new(Nanos::from_us(1));
        r.spikes.clear();
        for i in 0..4000u64 {
            let (v, c) = if i % 2 == 0 {
                (900_000, share("thread", "hog/42", 900_000))
            } else {
                (30_000, share("irq", "eth0", 30_000))
            };
            g.record(Nanos(v));
            r.spikes.push(Spike {
                at_ns: Nanos::from_ms(i * 25),
                cpu: 1,
                task: None,
                metric: Metric::Gap,
                value_ns: Nanos(v),
                causes: vec![c],
                incomplete: false,
            });
        }
        let mut s = g.to_series("cpu1.gap", Metric::Gap);
        s.cpu = Some(1);
        r.series = vec![s];
        let a = advise(&r, &profiles(), true).unwrap();
        assert!(!a.has_wakeups);
        let top = &a.fixes[0];
        assert!(top.now.profiles.is_empty());
        // The thread held 1.8 s of the 2 s stolen (a tenfold drop), and
        // its gaps were the tail: the gaps' p99.9 falls to the interrupt's.
        assert!(top.target.get("tid") == Some(&json!(42)) || top.kind == "isolate-cpu");
        assert!(top.predicted.stolen_fraction.unwrap() < 0.0021);
        assert!(top.predicted.p999_ns <= Nanos::from_us(31), "{top:?}");
        assert!(top.gain_log10 > 1.0, "{}", top.gain_log10);
        let irq = a.fixes.iter().find(|f| f.kind == "irq-affinity").unwrap();
        assert!(irq.gain_log10 < top.gain_log10);
    }

    /// `record()` with a second CPU account: `below` SCHED_OTHER threads
    /// `cc/N` each delaying one wake-up in 200 by 1.2 ms (so together they
    /// hold the tail past the FIFO-99 thread's 900 µs), with their share
    /// in the spike log and the cause summary.
    fn with_below_priority_work(below: u64) -> Record {
        let mut r = record();
        let mut sum = r.cause().unwrap();
        let s = r
            .series
            .iter_mut()
            .find(|s| s.name == "cpu1.latency")
            .unwrap();
        for i in 0..200_000u64 {
            if i % 200 != 3 {
                continue;
            }
            let name = format!("cc/{}", 1000 + i / 200 % below);
            move_sample(s, Nanos::from_us(20), Some(Nanos::from_us(1220)));
            r.spikes.push(Spike {
                at_ns: Nanos::from_ms(i),
                cpu: 1,
                task: None,
                metric: Metric::Latency,
                value_ns: Nanos::from_us(1220),
                causes: vec![share("thread", &name, 1_200_000)],
                incomplete: false,
            });
        }
        s.max = Nanos::from_us(1220);
        settle(s);
        for t in 0..below {
            sum.per_cpu[0].sources.push(SourceTotalShare {
                total: SourceTotal {
                    kind: "thread".into(),
                    name: format!("cc/{}", 1000 + t),
                    sched: Some("nice0".into()),
                    count: 1000 / below,
                    total_ns: 1_200_000 * 1000 / below,
                    max_ns: 1_200_000,
                },
                share: 0.01,
            });
        }
        r.spikes.sort_by_key(|s| s.at_ns);
        r.set_cause(&sum);
        r
    }

    /// Below-priority work that holds the tail does not rank isolation
    /// (or full preemption) above the named FIFO-99 thread: isolation is
    /// ranked by what it takes out of the named causes, the same as
    /// lowering the thread, at a higher cost; the advice says the rest
    /// dominates; and full preemption, which takes out only the rest,
    /// ranks after every fix a named cause ranks while its whole gain is
    /// kept beside.
    #[test]
    fn below_priority_work_does_not_rank_a_fix_but_is_reported() {
        let r = with_below_priority_work(20);
        let a = advise(&r, &profiles(), true).unwrap();
        let top = &a.fixes[0];
        assert_eq!(top.kind, "priority", "{top:?}");
        let iso = a.fixes.iter().find(|f| f.kind == "isolate-cpu").unwrap();
        let pre = a.fixes.iter().find(|f| f.kind == "preempt").unwrap();
        assert!((iso.gain_log10 - top.gain_log10).abs() < 1e-9);
        assert!(iso.gain_all_log10 > top.gain_log10 + 1.0, "{iso:?}");
        assert_eq!(pre.gain_log10, 0.0);
        assert!(pre.gain_all_log10 > 1.0);
        let pos = |k: &str| a.fixes.iter().position(|f| f.kind == k).unwrap();
        assert!(pos("priority") < pos("isolate-cpu"));
        assert!(pos("isolate-cpu") < pos("preempt"));
        let rest = &a.remainder[0];
        assert!(rest.dominates, "{rest:?}");
        assert_eq!(rest.below_sources, 20);
        assert_eq!(rest.below_ns, Nanos::from_ms(1200));
        assert!(rest.gain_all_log10 > 2.0 * rest.gain_named_log10);
        // The FIFO-99 thread alone: the named causes hold what there is
        // to gain, and nothing is said of a remainder.
        let a = advise(&record(), &profiles(), true).unwrap();
        assert!(!a.remainder[0].dominates, "{:?}", a.remainder[0]);
    }

    /// A reservation takes out what outranks the task by priority (the
    /// FIFO-99 thread) and RT throttling, not interrupts nor threads below
    /// the task; it is sized from the first profile and over-reserved by
    /// the stolen share it leaves; it names the `punctual reserve` line.
    #[test]
    fn a_reservation_takes_out_what_outranks_the_task_and_names_its_command() {
        let mut r = with_below_priority_work(4);
        r.spikes[0]
            .causes
            .push(share("throttle", "rt_runtime", 10_000));
        let p = vec![consumer(1000)];
        let a = advise(&r, &p, false).unwrap();
        let res = a.fixes.iter().find(|f| f.kind == "reservation").unwrap();
        assert_eq!(res.target["period"], json!(1_000_000));
        assert_eq!(res.target["budget"], json!(20_000));
        // 60 ms of the interrupt's stolen time left of 100 s observed:
        // 0.06 %, rounded up to 1 %.
        assert_eq!(res.target["over_reserve_percent"], json!(1));
        assert!(res
            .permanent_how
            .contains("punctual reserve --budget 20us --period 1ms --over-reserve 1% -- COMMAND"));
        // A record that does not name its kernel cannot say the deadline
        // class is there; one measured on 3.14 or later can.
        assert!(!res.runtime_applicable);
        r.platform.kernel = Some("6.18.44-fc".into());
        let a = advise(&r, &p, false).unwrap();
        let res = a.fixes.iter().find(|f| f.kind == "reservation").unwrap();
        assert!(res.runtime_applicable);
        assert!((res.cost_cpu_fraction - 0.0202).abs() < 1e-9);
        // What it predicts is the record with the thread and the
        // throttling taken out, and nothing else.
        let edited = remove_sources(&r, 1, &|k, n| {
            (k == "thread" && n == "hog/42") || k == "throttle"
        });
        let base = figures(&r, 1, &p);
        let want = kept_where_shorter(&base, figures_edited(&r, &edited, 1, &p));
        assert_eq!(res.predicted, want);
        // And it says so: what it takes out, with the attributed time.
        let out: Vec<(&str, &str)> = res
            .takes_out
            .iter()
            .map(|t| (t.kind.as_str(), t.name.as_str()))
            .collect();
        assert_eq!(out.len(), 2, "{out:?}");
        assert!(out.contains(&("thread", "hog/42")) && out.contains(&("throttle", "rt_runtime")));
        let hog = res.takes_out.iter().find(|t| t.kind == "thread").unwrap();
        assert_eq!(
            hog.total_ns,
            named_sources(&r, 1)
                .iter()
                .find(|n| n.name == "hog/42")
                .map(|n| Nanos(n.total_ns))
                .unwrap()
        );
        assert!(
            res.predicted.p999_ns > Nanos::from_ms(1),
            "the cc threads stay"
        );
        let irq_spikes = edited
            .spikes
            .iter()
            .filter(|s| s.causes.iter().any(|c| c.name == "eth0"))
            .count();
        assert_eq!(irq_spikes, 200);
        // A task at SCHED_OTHER is outranked by every thread.
        r.set_config("timer.policy", "other");
        let a = advise(&r, &p, false).unwrap();
        let res = a.fixes.iter().find(|f| f.kind == "reservation").unwrap();
        assert!(res.predicted.p999_ns < Nanos::from_us(100), "{res:?}");
        // A workload with no compute has nothing to reserve.
        let mut idle = consumer(1000);
        idle.buffering = Buffering::new(
            2,
            Nanos::from_ms(1),
            crate::model::Compute::Time(Nanos::ZERO),
        );
        let a = advise(&r, &[idle], false).unwrap();
        assert!(a.fixes.iter().all(|f| f.kind != "reservation"));
    }

    /// A gain a hair above another's (a sliver of a source more) is a
    /// tie no record resolves: the cheaper fix ranks first.
    #[test]
    fn a_hair_of_gain_does_not_outrank_a_cheaper_fix() {
        let a = advise(&record(), &profiles(), true).unwrap();
        let prio = a.fixes.iter().find(|f| f.kind == "priority").unwrap();
        let mut dear = prio.clone();
        dear.id = "a-dear".into();
        dear.gain_log10 += 0.001;
        dear.cost_cpu_fraction = 0.25;
        let mut fixes = vec![dear.clone(), prio.clone()];
        rank(&mut fixes);
        assert_eq!(fixes[0].id, prio.id);
        // A whole step more does outrank it.
        dear.gain_log10 += GAIN_STEP;
        let mut fixes = vec![prio.clone(), dear];
        rank(&mut fixes);
        assert_eq!(fixes[0].id, "a-dear");
    }

    /// The reservation's miss rate is simulated on the record's own gap
    /// process without what the reservation takes out: the scenario has
    /// the reserved thread alone, sized as the fix, on the advised CPU,
    /// the interrupt's noise and not the FIFO-99 thread's.
    #[test]
    fn the_reservation_scenario_replays_the_record_without_what_it_takes_out() {
        let r = record();
        let text = reservation_scenario(&r, 1, Nanos::from_us(20), Nanos::from_ms(1), 3, "rez-fb")
            .unwrap();
        let doc: toml::Table = text.parse().unwrap();
        let tasks = doc["task"].as_array().unwrap();
        assert_eq!(tasks.len(), 1, "{text}");
        let t = tasks[0].as_table().unwrap();
        assert_eq!(t["name"].as_str(), Some(RESERVED_TASK));
        assert_eq!(t["cpu"].as_integer(), Some(0));
        let res = t["reserve"].as_table().unwrap();
        assert_eq!(res["amount"].as_str(), Some("20000ns"));
        assert_eq!(res["period"].as_str(), Some("1000000ns"));
        assert_eq!(res["kind"].as_str(), Some("rez-fb"));
        assert_eq!(res["over"].as_float(), Some(0.03));
        assert!(doc.get("timer").is_none(), "{text}");
        let noise: Vec<&str> = doc["noise"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|n| n.get("name").and_then(|x| x.as_str()))
            .collect();
        assert!(noise.iter().any(|n| n.contains("eth0")), "{noise:?}");
        assert!(noise.iter().all(|n| !n.contains("hog")), "{noise:?}");
        // The same record with the thread left in has it as noise: the
        // edit, not the builder, took it out.
        let whole = crate::simfrom::scenario_from_record(&r, "r").unwrap().toml;
        assert!(whole.contains("hog"), "{whole}");
        assert!(
            reservation_scenario(&r, 7, Nanos::from_us(20), Nanos::from_ms(1), 3, "rez").is_err()
        );
    }

    #[test]
    fn the_deadline_class_is_read_from_the_kernel_version() {
        let k = |v: &str| {
            deadline_class(&Platform {
                kernel: Some(v.into()),
                ..Default::default()
            })
        };
        assert!(k("3.14.0") && k("6.18.44-fc-v509") && k("4.19.0-rt"));
        assert!(!k("3.13.11") && !k("2.6.32") && !k("unknown"));
        assert!(!deadline_class(&Platform::default()));
    }

    #[test]
    fn ids_and_helpers() {
        assert_eq!(slug("lto 6o0r9/10450"), "lto-6o0r9-10450");
        assert!(per_cpu_kthread("migration/1"));
        assert!(!per_cpu_kthread("pl-cpu0"));
        assert_eq!(comm_tid("pl-cpu0/10168"), ("pl-cpu0".into(), Some(10168)));
        let p = Platform {
            online_cpus: Some("0-2,5".into()),
            ..Default::default()
        };
        assert_eq!(online(&p), vec![0, 1, 2, 5]);
    }
}
