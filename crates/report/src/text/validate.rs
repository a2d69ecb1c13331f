//! What `punctual validate` prints: per load the forecast beside the
//! consumer's observed underruns, the default forecast (S from the noise
//! phase's gaps, or from the timer record's tail when no noise phase ran)
//! first and the other after the bar, then the legend. The figures are
//! measured and forecast by the verb; docs/forecast.md is the method.

use punctual_analysis::buffer::Buffering;
use punctual_analysis::verdict::human_secs;
use punctual_units::Nanos;
use serde::Serialize;

/// One load's forecast beside its observation.
#[derive(Clone, Debug, Serialize)]
pub struct Case {
    pub load: String,
    pub timer_samples: u64,
    pub timer_max_ns: Nanos,
    pub slack_ns: Nanos,
    /// Cota-Robles & Held's P(latency > slack) per wake-up.
    pub forecast_probability: f64,
    /// The queue model (docs/forecast.md §3): what `forecast` prints.
    pub forecast_mttf_seconds: Option<f64>,
    pub forecast_mttf_ci_low_seconds: Option<f64>,
    pub forecast_mttf_ci_high_seconds: Option<f64>,
    pub forecast_extrapolated: bool,
    /// Underruns the queue model predicts for the consumer phase's length.
    pub predicted_underruns: f64,
    /// The published first-order figure (docs/forecast.md §3.1), for
    /// comparison: the queue model's MTTF is what the forecast stands by.
    pub first_order_mttf_seconds: Option<f64>,
    pub predicted_underruns_first_order: f64,
    pub ratio_first_order: Option<f64>,
    /// Stalls per second the model reads off the record, and (c + mean
    /// stolen time) / t.
    pub stall_rate_per_s: f64,
    pub utilization_ratio: f64,
    pub consumer_seconds: f64,
    /// Median wall time of one compute (the calibrated work, c when
    /// nothing interrupts it).
    pub consumer_compute_median_ns: Nanos,
    pub consumer_wakeups: u64,
    /// Underrun episodes: a wake-up that finished its buffer too late
    /// (what the forecast counts).
    pub observed_underruns: u64,
    /// Buffers the device found empty (one long stall can cost several).
    pub observed_buffers_lost: u64,
    pub observed_mttf_seconds: Option<f64>,
    /// observed / predicted underruns.
    pub ratio: Option<f64>,
    /// Within a factor of 2, judged only where ≥ 10 underruns were seen.
    pub within_factor_2: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub injector_bursts: Option<u64>,
    /// The noise phase: running (observed − stolen) time polled and
    /// gaps counted.
    pub noise_running_seconds: f64,
    pub noise_gaps: u64,
    pub noise_gap_threshold_ns: Nanos,
    /// The queue model with S from the noise gaps (L still from the
    /// timer record).
    pub noise_stall_rate_per_s: f64,
    pub noise_stall_time_fraction: f64,
    pub noise_utilization_ratio: f64,
    pub noise_forecast_mttf_seconds: Option<f64>,
    pub predicted_underruns_noise: f64,
    pub ratio_noise: Option<f64>,
    /// As `within_factor_2`, for the noise-S forecast.
    pub within_factor_2_noise: Option<bool>,
    pub noise_forecast_mttf_ci_low_seconds: Option<f64>,
    pub noise_forecast_mttf_ci_high_seconds: Option<f64>,
    /// Which of the two is the forecast printed first: "noise gaps" (S
    /// from the noise phase, docs/forecast.md §3.4: the default since
    /// validation runs I–N) or "timer tail" (S inferred from the timer
    /// record, §3.2: only when no noise phase ran, e.g. interrupted).
    /// The unsuffixed fields are always the timer-tail forecast, the
    /// `noise` ones the noise-gap forecast.
    pub forecast_model: &'static str,
}

/// The table of `cases`, measured on `cpu` with `buffering`, each phase
/// `duration` long per load in `rounds` alternating rounds.
pub fn table(
    cases: &[Case],
    buffering: &Buffering,
    cpu: u32,
    duration: Nanos,
    rounds: u32,
) -> String {
    let b = buffering;
    let mut o = String::new();
    o.push_str(&format!(
        "validate: {} buffers × {}, compute {} (slack {}), CPU {}, {} of timer and {} of consumer per load in {} alternating rounds\n",
        b.buffers,
        b.buffer_len,
        b.compute.at(b.buffer_len),
        b.slack().unwrap_or_default(),
        cpu,
        duration,
        duration,
        rounds
    ));
    o.push_str(&format!(
        "  {:<9} {:>7} {:>8} {:>8} {:>7} {:>23} {:>9} {:>9} {:>8} {:>6} {:>6} {:>9} | {:>8} {:>7} {:>10} {:>10} {:>6} {:>9}\n",
        "load",
        "samples",
        "max",
        "stalls/s",
        "(c+S)/t",
        "MTTF queue (95% CI)",
        "1st order",
        "predicted",
        "observed",
        "ratio",
        "1st",
        "within×2",
        "stalls/s",
        "(c+S)/t",
        "MTTF",
        "predicted",
        "ratio",
        "within×2"
    ));
    for c in cases {
        // The default forecast first, the other after the bar.
        let noise = View {
            stalls: c.noise_stall_rate_per_s,
            util: c.noise_utilization_ratio,
            mttf: c.noise_forecast_mttf_seconds,
            ci: (
                c.noise_forecast_mttf_ci_low_seconds,
                c.noise_forecast_mttf_ci_high_seconds,
            ),
            predicted: c.predicted_underruns_noise,
            ratio: c.ratio_noise,
            within: c.within_factor_2_noise,
        };
        let timer = View {
            stalls: c.stall_rate_per_s,
            util: c.utilization_ratio,
            mttf: c.forecast_mttf_seconds,
            ci: (
                c.forecast_mttf_ci_low_seconds,
                c.forecast_mttf_ci_high_seconds,
            ),
            predicted: c.predicted_underruns,
            ratio: c.ratio,
            within: c.within_factor_2,
        };
        let (first, other) = if c.forecast_model == "noise gaps" {
            (noise, timer)
        } else {
            (timer, noise)
        };
        let ci = match first.ci {
            (Some(l), Some(h)) => {
                format!("{} ({}–{})", mttf(first.mttf), human_secs(l), human_secs(h))
            }
            _ => mttf(first.mttf),
        };
        let r = |x: Option<f64>| x.map(|r| format!("{r:.2}")).unwrap_or_else(|| "—".into());
        o.push_str(&format!(
            "  {:<9} {:>7} {:>8} {:>8.1} {:>7.3} {:>23} {:>9} {:>9.1} {:>8} {:>6} {:>6} {:>9} | {:>8.1} {:>7.3} {:>10} {:>10.1} {:>6} {:>9}\n",
            c.load,
            c.timer_samples,
            c.timer_max_ns.to_string(),
            first.stalls,
            first.util,
            ci,
            mttf(c.first_order_mttf_seconds),
            first.predicted,
            c.observed_underruns,
            r(first.ratio),
            r(c.ratio_first_order),
            within(first.within),
            other.stalls,
            other.util,
            mttf(other.mttf),
            other.predicted,
            r(other.ratio),
            within(other.within),
        ));
    }
    let (first, other) = if cases.iter().all(|c| c.forecast_model == "noise gaps") {
        (
            "S from the noise phase's gaps, time stolen from a running thread (docs/forecast.md §3.4)",
            "S inferred from the timer record's tail (§3.2), what `punctual forecast` gives from the timer record alone",
        )
    } else {
        (
            "S inferred from the timer record's tail (§3.2; no noise phase ran)",
            "S from the noise phase's gaps (§3.4)",
        )
    };
    o.push_str(&format!(
        "  MTTF queue: the forecast (backlog carried across periods, stalls during the compute; \
         docs/forecast.md §3), L from the timer record and {first}; 1st order: the MTTF of the \
         published first-order formula, s / P(latency > slack); predicted: queue rate × consumer \
         time; observed: wake-ups whose buffer missed its deadline; ratio = observed / predicted \
         (queue, 1st order); within×2 judges \
         the queue forecast where ≥ 10 were observed; stalls/s: stalls per second of running \
         time; after |: the queue forecast with {other}\n"
    ));
    o
}

/// One forecast's columns.
struct View {
    stalls: f64,
    util: f64,
    mttf: Option<f64>,
    ci: (Option<f64>, Option<f64>),
    predicted: f64,
    ratio: Option<f64>,
    within: Option<bool>,
}

fn within(w: Option<bool>) -> &'static str {
    match w {
        Some(true) => "yes",
        Some(false) => "NO",
        None => "(<10 obs)",
    }
}

fn mttf(s: Option<f64>) -> String {
    s.map(human_secs).unwrap_or_else(|| "never".into())
}
