//! One series' tail as a forecasting model: the empirical tail where the
//! record has data, a generalized Pareto fit beyond it, and a 95 %
//! confidence interval on every number either gives.

use punctual_record::{Metric, Record, Series};
use punctual_units::Nanos;
use serde::Serialize;

use crate::gpd::{self, GpdFit};
use crate::rate::Usage;
use crate::tail::{poisson_ci95, CurvePoint, Tail};
use crate::{DAY_S, HOUR_S, WEEK_S};

/// Seed of the parametric bootstrap; fixed so the same record always
/// gives the same bytes, and written into every forecast.
pub const BOOTSTRAP_SEED: u64 = 0x0002_5EED_F0CA_57ED;
/// Bootstrap replicates: 200 puts the 2.5 % and 97.5 % points on the
/// 5th and 195th replicate, which is the usual minimum for a 95 % CI.
pub const BOOTSTRAP_REPS: usize = 200;
/// Fewer excesses than this and the fit is refused: the shape parameter's
/// standard error would be near ±0.2, too wide to extrapolate with.
pub const MIN_EXCESSES: u64 = 30;
/// Beyond this many times the record's own span a point estimate is
/// withheld and only the interval given: a tail fitted on minutes says
/// little of what happens once a week.
pub const MAX_EXTRAPOLATION: f64 = 1000.0;
/// A fitted shape ξ at or above this (infinite mean) withholds extrapolated
/// point estimates: quantiles of such a fit explode with the span and are
/// not credible from a short record.
pub const MAX_SHAPE: f64 = 1.0;
/// Fewer observed exceedances than this and a probability is taken from
/// the fitted tail instead: 10 events bound a rate within about ×2.
pub const MIN_OBSERVED_EVENTS: u64 = 10;

/// A value (ns) read off the tail, never a bare number: it says whether it
/// was observed or extrapolated and carries its 95 % interval.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Estimate {
    /// Point estimate; `None` when the data cannot support one (see `note`).
    pub value_ns: Option<Nanos>,
    /// True when the value lies beyond what the record observed and comes
    /// from the fitted tail.
    pub extrapolated: bool,
    pub ci_low_ns: Option<Nanos>,
    pub ci_high_ns: Option<Nanos>,
    /// Expected number of samples above the value within the record: below
    /// 1 the value is extrapolated; the span asked is 1/this times the
    /// record.
    pub expected_in_record: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// A per-sample probability P(X > x) with its interval and provenance.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ProbEstimate {
    pub probability: f64,
    pub ci_low: f64,
    pub ci_high: f64,
    pub extrapolated: bool,
    /// Samples above x in the record.
    pub observed_count: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// A series ready for forecasting.
#[derive(Clone, Debug)]
pub struct TailModel {
    pub name: String,
    pub metric: Metric,
    pub tail: Tail,
    /// Nominal time between samples.
    pub sample_period_ns: Nanos,
    /// How `sample_period_ns` was obtained.
    pub sample_period_source: &'static str,
    pub fit: Option<GpdFit>,
    pub fit_note: Option<String>,
    /// Anderson–Darling A² of the kept fit (smaller is better; < 1 passes).
    pub fit_quality: Option<f64>,
    /// When the stalls came (the record's spike log), for the queue
    /// model's renewal arrivals; None: Poisson.
    pub stall_times: Option<crate::queue::StallTimes>,
    /// Stalls measured by a running thread (a noise record's gaps): when
    /// set, the queue model takes its stall term from here instead of
    /// inferring it from this series' tail; None keeps the inference.
    pub gap_stalls: Option<GapStalls>,
    /// (time, value) of this series' wake-ups in the record's spike log:
    /// which late wake-ups came in runs of consecutive periods (one long
    /// stall), so the MTTF interval counts stalls, not wake-ups. Empty
    /// without a spike log.
    pub spike_log: Vec<(Nanos, Nanos)>,
    /// The source each entry of `spike_log` is attributed to (the largest
    /// of its causes), so the queue model reads a period per source
    /// (`StallTimes::into_periodic`); empty where the log names none.
    pub spike_sources: Vec<Option<String>>,
    /// Periods that passed without a wake-up (`Series::missed`): a probe
    /// that skips the periods a long stall swallowed counts them here,
    /// which lets the queue model place them (`buffer::swallowed_wake_ups`).
    pub missed: u64,
    /// The interval the MTTF puts on its count of underrun-sized events
    /// (`buffer::underrun_count_ci95`). Garwood's unless a calibration asks
    /// for mid-P, which was measured and not adopted (docs/forecast.md
    /// §3.5, "Mid-P, measured").
    pub count_interval: crate::tail::CountInterval,
    /// The stall model's bootstrap (`buffer::stall_model_variance`)
    /// redraws the wake-ups from the stall threshold up; from here up
    /// instead when set, the ones below held as recorded. None, as
    /// `forecast` runs it. A calibration's diagnostic: it tells which of a
    /// record's wake-ups the interval's width comes from (a periodic
    /// source's, docs/forecast.md §3.5, "Where the periodic shapes'
    /// width comes from").
    pub stall_boot_from: Option<Nanos>,
    /// Whether the bootstrap holds a periodic source's phase sweep as
    /// recorded (`buffer::phase_sweep`). False, as `forecast` runs it: the
    /// interval it gives follows the forecasts' spread, but without a
    /// forecast centred on the truth it no longer holds the tight periodic
    /// shapes' (docs/forecast.md §3.5); a calibration's switch.
    pub hold_phase_sweep: bool,
    boot: Vec<GpdFit>,
}

/// The (time, value) of `rec`'s spikes that belong to `s` (same metric,
/// CPU and task).
fn own_spikes<'a>(rec: &'a Record, s: &'a Series) -> impl Iterator<Item = (Nanos, Nanos)> + 'a {
    rec.spikes
        .iter()
        .filter(move |p| {
            p.metric == s.metric && s.cpu.is_none_or(|c| c == p.cpu) && p.task == s.task
        })
        .map(|p| (p.at_ns, p.value_ns))
}

/// The source `p`'s lateness is attributed to: the largest of its causes
/// by time (the first of equals), none without causes.
pub fn main_cause(p: &punctual_record::Spike) -> Option<String> {
    let mut best: Option<&punctual_record::SourceShare> = None;
    for c in &p.causes {
        if best.is_none_or(|b| c.total_ns > b.total_ns) {
            best = Some(c);
        }
    }
    best.map(|c| format!("{} {}", c.kind, c.name))
}

/// [`main_cause`] of each of `rec`'s spikes that belong to `s`, in the
/// order of [`own_spikes`].
fn own_sources(rec: &Record, s: &Series) -> Vec<Option<String>> {
    rec.spikes
        .iter()
        .filter(|p| p.metric == s.metric && s.cpu.is_none_or(|c| c == p.cpu) && p.task == s.task)
        .map(main_cause)
        .collect()
}

/// A noise record's gap histogram for one CPU, as the queue model's
/// stall term reads it (`StallModel::from_gaps`).
#[derive(Clone, Debug)]
pub struct GapStalls {
    pub series: String,
    pub gaps: Tail,
    /// Observed minus stolen time of the polling loop.
    pub running_ns: Nanos,
    pub gap_threshold_ns: Nanos,
}

impl GapStalls {
    /// From a record's gap series `s` and its `stolen[]` entry for the
    /// same CPU (None when the record has no such entry).
    pub fn from_record(rec: &Record, s: &Series) -> Option<GapStalls> {
        let st = rec.stolen.iter().find(|x| Some(x.cpu) == s.cpu)?;
        Some(GapStalls {
            series: s.name.clone(),
            gaps: Tail::from_series(s),
            running_ns: Nanos(st.observed_ns.0.saturating_sub(st.total_ns.0)),
            gap_threshold_ns: st.threshold_ns,
        })
    }

    /// The record's own gap series for `cpu`, but only when its noise
    /// probe polled in stretches short enough that the kernel's RT
    /// throttling never stopped it (`extra.noise_loop.stretched`, which
    /// `punctual check` sets): then its gaps are time stolen from a
    /// running thread and nothing else, and `check` and `forecast` take the
    /// stall term from them unasked (docs/forecast.md §3.4). Records
    /// without that mark (older `check` records, `noise` records) give
    /// None.
    pub fn own(rec: &Record, cpu: Option<u32>) -> Option<GapStalls> {
        let stretched = rec
            .extra
            .get("noise_loop")
            .and_then(|v| v.get("stretched"))
            .and_then(|v| v.as_bool())
            == Some(true);
        if !stretched {
            return None;
        }
        GapStalls::for_cpu(rec, cpu)
    }

    /// The first gap series of `rec` for `cpu` that has its stolen-time
    /// totals; None without a CPU.
    pub fn for_cpu(rec: &Record, cpu: Option<u32>) -> Option<GapStalls> {
        cpu?;
        rec.series
            .iter()
            .filter(|s| s.metric == Metric::Gap && s.cpu == cpu)
            .find_map(|s| GapStalls::from_record(rec, s))
    }
}

/// The upper bound a thin (bounded, ξ < 0) fit cannot go below: an
/// exponential tail (ξ = 0) with the same threshold, share above it and
/// mean excess σ / (1 − ξ). A record's few hundred excesses cannot tell a
/// bounded tail from an exponential one, and the bounded fit would put
/// every value past its endpoint at probability zero, so a verdict could
/// be decided on the endpoint alone. 0 for a fit with ξ ≥ 0 (its own
/// bootstrap already reaches past any value).
fn thin_tail_bound(f: &GpdFit, x: Nanos) -> f64 {
    if f.shape >= 0.0 {
        return 0.0;
    }
    let mean_excess = f.scale_ns / (1.0 - f.shape);
    let y = (x.0 as f64 - f.threshold_ns).max(0.0);
    f.exceed_fraction * (-y / mean_excess).exp()
}

impl TailModel {
    /// Builds the model. `record_duration` is the fallback for the sample
    /// rate when the series does not carry `sample_period_ns`.
    pub fn new(s: &Series, record_duration: Nanos) -> Result<TailModel, String> {
        let tail = Tail::from_series(s);
        if tail.n == 0 {
            return Err(format!("series '{}' is empty (0 samples)", s.name));
        }
        let (period, source) = match s.sample_period_ns {
            Some(p) if !p.is_zero() => (p, "sample_period_ns"),
            _ if !record_duration.is_zero() => (
                Nanos((record_duration.0 / tail.n).max(1)),
                "record duration / sample count",
            ),
            _ => {
                return Err(format!(
                    "series '{}' has no sample_period_ns and the record no duration, \
                     so its samples cannot be turned into a rate per hour",
                    s.name
                ))
            }
        };
        let mut m = TailModel {
            name: s.name.clone(),
            metric: s.metric,
            tail,
            sample_period_ns: period,
            sample_period_source: source,
            fit: None,
            fit_note: None,
            fit_quality: None,
            stall_times: None,
            gap_stalls: None,
            spike_log: Vec::new(),
            spike_sources: Vec::new(),
            missed: s.missed,
            count_interval: crate::tail::CountInterval::Garwood,
            stall_boot_from: None,
            hold_phase_sweep: false,
            boot: Vec::new(),
        };
        m.fit_tail();
        Ok(m)
    }

    /// Adds the time stamps of the series' wake-ups in a record's spike
    /// log (`dropped`: the log was full and kept only the largest), so
    /// the queue model can tell periodic stalls from random ones.
    pub fn with_spikes(
        mut self,
        spikes: impl IntoIterator<Item = (Nanos, Nanos)>,
        dropped: bool,
    ) -> TailModel {
        let covered = Nanos(self.sample_period_ns.0.saturating_mul(self.tail.n));
        self.stall_times =
            crate::queue::StallTimes::new(spikes, dropped, covered, self.sample_period_ns);
        self
    }

    /// [`with_spikes`](Self::with_spikes) with the spikes of `rec` that
    /// belong to `s` (same metric, CPU and task).
    pub fn with_record_spikes(self, rec: &Record, s: &Series) -> TailModel {
        let mine: Vec<(Nanos, Nanos)> = own_spikes(rec, s).collect();
        let mut m = self.with_spikes(mine.iter().copied(), rec.spikes_dropped > 0);
        m.spike_log = mine;
        m
    }

    /// Keeps the time stamps of the series' wake-ups in `rec`'s spike log
    /// for the MTTF interval (`spike_log`). Where those stalls come at a fixed period (docs/forecast.md §3.3),
    /// the queue model's arrivals become that periodic process, the
    /// other stalls staying Poisson.
    pub fn with_spike_log(mut self, rec: &Record, s: &Series) -> TailModel {
        self.spike_log = own_spikes(rec, s).collect();
        self.spike_sources = own_sources(rec, s);
        if self.spike_sources.iter().all(Option::is_none) {
            self.spike_sources.clear();
        }
        if self.stall_times.is_none() {
            let level = self.log_complete_above(rec);
            self.stall_times = self.periodic_stall_times(level);
        }
        self
    }

    /// The level above which `rec`'s spike log, as kept in this model,
    /// holds every wake-up: its smallest entry when the bounded log
    /// dropped some (it keeps the largest), zero when it dropped none.
    pub fn log_complete_above(&self, rec: &Record) -> Nanos {
        if rec.spikes_dropped == 0 {
            return Nanos::ZERO;
        }
        self.spike_log
            .iter()
            .map(|&(_, l)| l)
            .min()
            .unwrap_or(Nanos::ZERO)
    }

    /// The spike log's times as the queue model's periodic arrivals
    /// (`StallTimes::into_periodic`), the log read as complete above
    /// `level`; `None` where no period shows.
    pub fn periodic_stall_times(&self, level: Nanos) -> Option<crate::queue::StallTimes> {
        let covered = Nanos(self.sample_period_ns.0.saturating_mul(self.tail.n));
        let labels = self
            .spike_sources
            .iter()
            .cloned()
            .chain(std::iter::repeat(None));
        crate::queue::StallTimes::labelled(
            self.spike_log
                .iter()
                .zip(labels)
                .map(|(&(a, l), s)| (a, l, s)),
            level,
            covered,
            self.sample_period_ns,
        )
        .and_then(crate::queue::StallTimes::into_periodic)
    }

    /// Peaks over threshold with an automatic threshold: candidate
    /// thresholds from about 2√n excesses down to 40, and the lowest one
    /// whose fit passes an Anderson–Darling check (A² < 1.0, about the
    /// 1 % level) is kept — the usual "lowest threshold at which the GPD
    /// fits" rule. A threshold too low lets the body of the distribution
    /// bend the tail (heavy-tailed fits that predict seconds-long
    /// wake-ups from millisecond data); one too high wastes data. When no
    /// candidate passes, the best-fitting one is kept and said so.
    fn fit_tail(&mut self) {
        let n = self.tail.n;
        let top = ((2.0 * (n as f64).sqrt()) as u64).clamp(50, 1000);
        let mut ks: Vec<u64> = vec![top];
        for k in [600u64, 400, 250, 150, 100, 60, 40] {
            if k < top {
                ks.push(k);
            }
        }
        let w = self.tail.bucket_ns as f64;
        let mut best: Option<(f64, GpdFit)> = None;
        let mut last_u = None;
        let mut tried = 0;
        for k in ks {
            let Some((u, above)) = self.tail.threshold_for(k) else {
                continue;
            };
            if Some(u) == last_u || above < MIN_EXCESSES || above == n {
                continue;
            }
            last_u = Some(u);
            let pts: Vec<(f64, f64)> = self
                .tail
                .buckets_from(u)
                .iter()
                .map(|(lo, c)| ((lo - u) as f64 + w / 2.0, *c as f64))
                .collect();
            if pts.len() < 3 {
                continue;
            }
            let Some(f) = gpd::fit(u as f64, &pts, n) else {
                continue;
            };
            tried += 1;
            let a2 = gpd::anderson_darling(&pts, f.scale_ns, f.shape);
            let pass = a2 < 1.0;
            if best.as_ref().is_none_or(|(b, _)| a2 < *b) || pass {
                best = Some((a2, f));
            }
            if pass {
                break;
            }
        }
        match best {
            Some((a2, f)) => {
                self.fit_quality = Some(a2);
                if a2 >= 1.0 {
                    self.fit_note = Some(format!(
                        "no threshold gave a good generalized Pareto fit (best A² = {a2:.2} \
                         of {tried} tried); extrapolations are rough"
                    ));
                }
                self.boot = gpd::bootstrap(&f, n, w, BOOTSTRAP_REPS, BOOTSTRAP_SEED);
                self.fit = Some(f);
            }
            None => {
                self.fit_note = Some(format!(
                    "{n} samples with too few distinct values in the tail (at least \
                     {MIN_EXCESSES} samples in 3 or more {}-wide buckets above a threshold \
                     are needed)",
                    Nanos(self.tail.bucket_ns)
                ));
            }
        }
    }

    /// This model, built from a record `base` was edited into by only
    /// lowering or removing samples (a source's attributed time taken
    /// out), with a fitted tail that cannot lie above `base`'s: the base
    /// fit and its bootstrap thinned to the share of `base`'s samples
    /// above the fit's threshold that the edit left there. The edited
    /// data's own fit is kept instead where it predicts no larger a
    /// probability at any level from the threshold out to one sample in
    /// 10¹² (the edit showed a thinner tail). A refit on the thinner data
    /// alone can come out heavier than the data it came from (fewer
    /// excesses, another threshold), and would predict that taking time
    /// out makes wake-ups later.
    pub fn bounded_by(mut self, base: &TailModel) -> TailModel {
        let Some(bf) = base.fit else {
            return self;
        };
        let u = bf.threshold_ns;
        let before = base.tail.count_above(u) as f64 / base.tail.n.max(1) as f64;
        let after = self.tail.count_above(u) as f64 / self.tail.n.max(1) as f64;
        let keep = if before > 0.0 {
            (after / before).min(1.0)
        } else {
            1.0
        };
        let thin = |g: &GpdFit| GpdFit {
            exceed_fraction: g.exceed_fraction * keep,
            ..*g
        };
        let thinned = thin(&bf);
        let own_is_thinner = self.fit.is_some_and(|f| {
            (3..=12).all(|e| {
                let p = 10f64.powi(-e);
                if p >= thinned.exceed_fraction {
                    return true;
                }
                let x = thinned.quantile(p);
                f.prob_above(x) <= thinned.prob_above(x) * (1.0 + 1e-9)
            })
        });
        if own_is_thinner {
            return self;
        }
        self.fit = Some(thinned);
        self.boot = base.boot.iter().map(thin).collect();
        self.fit_quality = base.fit_quality;
        self.fit_note = base.fit_note.clone();
        self
    }

    pub fn samples_per_s(&self) -> f64 {
        1e9 / self.sample_period_ns.0 as f64
    }

    /// Time the record's samples stand for (n × period).
    pub fn covered_s(&self) -> f64 {
        self.tail.n as f64 * self.sample_period_ns.0 as f64 / 1e9
    }

    pub fn curve(&self) -> Vec<CurvePoint> {
        self.tail.curve()
    }

    /// The value exceeded on average once per `span_s` seconds of samples.
    pub fn worst_per(&self, span_s: f64) -> Estimate {
        let m = self.covered_s() / span_s;
        let p = 1.0 / (self.samples_per_s() * span_s);
        self.value_exceeded_with_prob(p, m)
    }

    /// The value with per-sample exceedance probability `p`; `m` = n·p.
    fn value_exceeded_with_prob(&self, p: f64, m: f64) -> Estimate {
        if m >= 1.0 {
            let rank = m.round().max(1.0) as u64;
            let (lo, hi) = poisson_ci95(rank);
            let v = self.tail.value_at_rank(rank);
            let ci_low = Some(self.tail.value_at_rank(hi.ceil() as u64));
            let ci_high = if lo >= 1.0 {
                Some(self.tail.value_at_rank(lo.floor() as u64))
            } else {
                self.boot_quantile(p, 0.975).map(|x| Nanos(x as u64).max(v))
            };
            let note = (rank < 10).then(|| {
                format!(
                    "observed, but the record holds only about {rank} sample(s) this high; \
                     the interval is wide"
                )
            });
            return Estimate {
                value_ns: Some(v),
                extrapolated: false,
                ci_low_ns: ci_low,
                ci_high_ns: ci_high,
                expected_in_record: m,
                note,
            };
        }
        let factor = 1.0 / m;
        let Some(f) = self.fit else {
            return Estimate {
                value_ns: None,
                extrapolated: true,
                ci_low_ns: Some(self.tail.max),
                ci_high_ns: None,
                expected_in_record: m,
                note: Some(format!(
                    "the span asked is {factor:.0}× what the record covers and no tail fit was \
                     possible ({}); the value is at least the observed maximum",
                    self.fit_note.as_deref().unwrap_or("no fit")
                )),
            };
        };
        let lo = self.boot_quantile(p, 0.025).map(|x| Nanos(x as u64));
        let hi = self.boot_quantile(p, 0.975).map(|x| Nanos(x as u64));
        let point = Nanos(f.quantile(p).min(u64::MAX as f64 / 2.0) as u64);
        if f.shape >= MAX_SHAPE {
            // With ξ ≥ 1 the fitted tail has no finite mean: its far quantiles
            // grow like a power of the span and a 15 s record would "predict"
            // hour-long stalls. Such a fit says the tail is heavier than the
            // record can measure, not how large the worst case is.
            return Estimate {
                value_ns: None,
                extrapolated: true,
                ci_low_ns: Some(self.tail.max.max(lo.unwrap_or(Nanos::ZERO))),
                ci_high_ns: None,
                expected_in_record: m,
                note: Some(format!(
                    "the fitted tail is too heavy to extrapolate (ξ = {:.2} ≥ {MAX_SHAPE}: no finite \
                     mean); the worst case over {factor:.0}× the record is at least the observed \
                     maximum — record longer",
                    f.shape
                )),
            };
        }
        if factor > MAX_EXTRAPOLATION {
            return Estimate {
                value_ns: None,
                extrapolated: true,
                ci_low_ns: lo,
                ci_high_ns: hi,
                expected_in_record: m,
                note: Some(format!(
                    "the span asked is {factor:.0}× what the record covers (more than \
                     {MAX_EXTRAPOLATION:.0}×): only the interval is given; record at least \
                     {:.0} s for a point estimate",
                    factor / MAX_EXTRAPOLATION * self.covered_s()
                )),
            };
        }
        Estimate {
            value_ns: Some(point),
            extrapolated: true,
            ci_low_ns: lo,
            ci_high_ns: hi,
            expected_in_record: m,
            note: Some(format!(
                "extrapolated {factor:.0}× beyond the record from a generalized Pareto tail \
                 (ξ = {:.3})",
                f.shape
            )),
        }
    }

    fn boot_quantile(&self, p: f64, q: f64) -> Option<f64> {
        if self.boot.len() < 20 {
            return None;
        }
        let v: Vec<f64> = self.boot.iter().map(|b| b.quantile(p)).collect();
        Some(gpd::percentile(&v, q).min(u64::MAX as f64 / 2.0))
    }

    /// P(X > x) per sample, observed where the record has at least
    /// [`MIN_OBSERVED_EVENTS`] such samples and from the fitted tail
    /// (labelled) where it has fewer.
    pub fn prob_above(&self, x: Nanos) -> ProbEstimate {
        let n = self.tail.n as f64;
        let c = self.tail.count_above(x.0 as f64);
        let (lo, hi) = poisson_ci95(c);
        let empirical = |note: Option<String>| ProbEstimate {
            probability: c as f64 / n,
            ci_low: lo / n,
            ci_high: hi / n,
            extrapolated: false,
            observed_count: c,
            note,
        };
        if c >= MIN_OBSERVED_EVENTS {
            return empirical(None);
        }
        match self.fit {
            Some(f) if (x.0 as f64) >= f.threshold_ns && self.boot.len() >= 20 => {
                let v: Vec<f64> = self.boot.iter().map(|b| b.prob_above(x.0 as f64)).collect();
                ProbEstimate {
                    probability: f.prob_above(x.0 as f64),
                    ci_low: gpd::percentile(&v, 0.025),
                    ci_high: gpd::percentile(&v, 0.975).max(thin_tail_bound(&f, x)),
                    extrapolated: true,
                    observed_count: c,
                    note: Some(format!(
                        "{c} sample(s) above {x} observed; probability from the fitted tail \
                         (ξ = {:.3})",
                        f.shape
                    )),
                }
            }
            _ => empirical(Some(format!(
                "only {c} sample(s) above {x} and no tail fit ({}); the interval is wide",
                self.fit_note
                    .as_deref()
                    .unwrap_or("below the fit threshold")
            ))),
        }
    }

    /// Worst case per hour, day and week of continuous use.
    pub fn worst_case(&self) -> WorstCase {
        WorstCase {
            hour: self.worst_per(HOUR_S),
            day: self.worst_per(DAY_S),
            week: self.worst_per(WEEK_S),
        }
    }

    /// Worst case per day and week of *use* (Cota-Robles & Held §4.3).
    pub fn worst_case_use(&self, usage: Usage) -> WorstCaseUse {
        WorstCaseUse {
            usage,
            day: self.worst_per(usage.day_s()),
            week: self.worst_per(usage.week_s()),
        }
    }

    /// The latency exceeded at `rate_per_s` (Cota-Robles & Held §5.2: the pseudo
    /// worst case at a permissible error rate).
    pub fn value_at_rate(&self, rate_per_s: f64) -> Estimate {
        self.worst_per(1.0 / rate_per_s)
    }

    /// Time between services implied by a value of this metric: a wake-up
    /// late by L after a period T leaves T + L without service; gap-type
    /// metrics already are the gap.
    pub fn gap_for(&self, v: Nanos) -> Nanos {
        match self.metric {
            Metric::Latency | Metric::Response => v + self.sample_period_ns,
            _ => v,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct WorstCase {
    pub hour: Estimate,
    pub day: Estimate,
    pub week: Estimate,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct WorstCaseUse {
    pub usage: Usage,
    pub day: Estimate,
    pub week: Estimate,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::SplitMix64;
    use punctual_record::Recorder;

    fn record_samples(f: impl Fn(&mut SplitMix64) -> f64, n: usize, seed: u64) -> Series {
        let mut rng = SplitMix64::new(seed);
        let mut r = Recorder::new(Nanos(1000)).with_sample_period(Nanos::from_ms(1));
        for _ in 0..n {
            r.record(Nanos(f(&mut rng) as u64));
        }
        r.to_series("cpu0.latency", Metric::Latency)
    }

    /// Exponential latencies, mean 50 µs, 1 ms period: the value exceeded
    /// once per span S is 50 µs · ln(1000 · S) exactly.
    #[test]
    fn exponential_tail_worst_cases_match_closed_form() {
        let mean = 50_000.0;
        let s = record_samples(|r| r.exp1() * mean, 200_000, 3);
        let m = TailModel::new(&s, Nanos::ZERO).unwrap();
        assert_eq!(m.samples_per_s(), 1000.0);
        // Within the data: 200 000 samples = 200 s; once per minute.
        let e = m.worst_per(60.0);
        assert!(!e.extrapolated);
        let truth = mean * (1000.0f64 * 60.0).ln();
        let v = e.value_ns.unwrap().0 as f64;
        assert!((v / truth - 1.0).abs() < 0.05, "{v} vs {truth}");
        // Beyond the data: hour and day.
        for span in [HOUR_S, DAY_S] {
            let e = m.worst_per(span);
            assert!(e.extrapolated);
            let truth = mean * (1000.0 * span).ln();
            let v = e.value_ns.unwrap().0 as f64;
            assert!(
                (v / truth - 1.0).abs() < 0.12,
                "span {span}: {v} vs {truth}"
            );
            let (lo, hi) = (
                e.ci_low_ns.unwrap().0 as f64,
                e.ci_high_ns.unwrap().0 as f64,
            );
            assert!(lo <= truth && truth <= hi, "{lo}..{hi} vs {truth}");
        }
        // A week is 3024× the record: only an interval.
        let w = m.worst_per(WEEK_S);
        assert!(w.value_ns.is_none() && w.ci_high_ns.is_some());
    }

    /// Pareto(α = 3, x_m = 20 µs): P(X > x) = (x_m / x)^α.
    #[test]
    fn pareto_tail_probabilities_match_closed_form() {
        let (xm, alpha) = (20_000.0, 3.0);
        let s = record_samples(|r| xm * r.uniform_open().powf(-1.0 / alpha), 300_000, 5);
        let m = TailModel::new(&s, Nanos::ZERO).unwrap();
        let f = m.fit.unwrap();
        assert!((f.shape - 1.0 / alpha).abs() < 0.1, "ξ = {}", f.shape);
        // Observed region.
        let p = m.prob_above(Nanos(100_000));
        let truth = (xm / 100_000.0f64).powf(alpha);
        assert!(!p.extrapolated && (p.probability / truth - 1.0).abs() < 0.1);
        // Far beyond the maximum (~1.3 ms): at 3 ms, truth 2.96e-7 per sample.
        let x = 3_000_000.0;
        let p = m.prob_above(Nanos(x as u64));
        let truth = (xm / x).powf(alpha);
        assert!(p.extrapolated);
        assert!(p.ci_low <= truth && truth <= p.ci_high, "{p:?} vs {truth}");
        assert!(
            (p.probability / truth).ln().abs() < 2.0f64.ln(),
            "{p:?} vs {truth}"
        );
    }

    /// Regression: a 15 s record of this VM fitted ξ > 1 and "forecast" a
    /// worst case per hour of 7.8 million seconds. Pareto(α = 0.7) has no
    /// finite mean (ξ ≈ 1.43): the hour must come back as a lower bound only.
    #[test]
    fn infinite_mean_tail_withholds_the_point_estimate() {
        let (xm, alpha) = (20_000.0, 0.7);
        let s = record_samples(
            |r| (xm * r.uniform_open().powf(-1.0 / alpha)).min(5e9),
            60_000,
            11,
        );
        let m = TailModel::new(&s, Nanos::ZERO).unwrap();
        let f = m.fit.unwrap();
        assert!(f.shape >= MAX_SHAPE, "ξ = {}", f.shape);
        let e = m.worst_per(HOUR_S);
        assert!(e.extrapolated && e.value_ns.is_none(), "{e:?}");
        assert!(e.ci_low_ns.unwrap() >= s.max);
        assert!(e.note.unwrap().contains("too heavy"));
    }

    #[test]
    fn too_few_samples_give_an_interval_not_a_number() {
        let s = record_samples(|r| r.exp1() * 10_000.0, 20, 9);
        let m = TailModel::new(&s, Nanos::ZERO).unwrap();
        assert!(m.fit.is_none());
        let e = m.worst_per(HOUR_S);
        assert!(e.value_ns.is_none() && e.note.is_some());
    }

    #[test]
    fn same_series_same_forecast() {
        let s = record_samples(|r| r.exp1() * 10_000.0, 50_000, 1);
        let a = TailModel::new(&s, Nanos::ZERO).unwrap().worst_case();
        let b = TailModel::new(&s, Nanos::ZERO).unwrap().worst_case();
        assert_eq!(
            serde_json::to_string(&a).unwrap(),
            serde_json::to_string(&b).unwrap()
        );
    }

    /// A bounded fit (ξ = −0.5, σ = 1 ms over u = 1 ms, ζ = 0.01) ends at
    /// 3 ms; past it the upper bound is the exponential tail of the same
    /// mean excess (σ / (1 − ξ) = 0.667 ms): at 4 ms, 0.01·e^(−4.5). A
    /// fit with ξ ≥ 0 adds nothing.
    #[test]
    fn a_thin_fit_keeps_an_exponential_upper_bound() {
        let mut f = GpdFit {
            threshold_ns: 1e6,
            scale_ns: 1e6,
            shape: -0.5,
            exceed_fraction: 0.01,
            excesses: 100,
        };
        assert_eq!(f.endpoint_ns(), Some(3e6));
        assert_eq!(f.prob_above(4e6), 0.0);
        let b = thin_tail_bound(&f, Nanos::from_ms(4));
        assert!((b - 0.01 * (-4.5f64).exp()).abs() < 1e-15, "{b}");
        f.shape = 0.2;
        assert_eq!(thin_tail_bound(&f, Nanos::from_ms(4)), 0.0);
    }
}
