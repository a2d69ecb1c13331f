//! How a probe's settings are written into the record's `config`, so a
//! record says what was asked for. A check record holds two probes and
//! prefixes their keys (`timer.`, `noise.`); a probe's own record has none.

use punctual_live::noise::NoiseConfig;
use punctual_live::rt::Policy;
use punctual_live::timer::TimerConfig;
use punctual_record::{Nanos, Record};

/// The settings every probe has, in the record's `config` under `prefix`
/// (`timer.`/`noise.` in a check record, nothing in a probe's own).
pub fn set_probe_config(rec: &mut Record, prefix: &str, probe: ProbeSettings<'_>) {
    rec.set_config(&format!("{prefix}cpus"), probe.cpus);
    rec.set_config(
        &format!("{prefix}policy"),
        punctual_live::setup::policy_label(probe.policy),
    );
    rec.set_config(&format!("{prefix}duration_ns"), probe.duration);
    rec.set_config(&format!("{prefix}max_spikes"), probe.max_spikes);
    rec.set_config(&format!("{prefix}mlock"), probe.lock_memory);
}

/// What [`set_probe_config`] records.
pub struct ProbeSettings<'a> {
    pub cpus: &'a [u32],
    pub policy: Policy,
    pub duration: Nanos,
    pub max_spikes: usize,
    pub lock_memory: bool,
}

/// Records a timer configuration in the record's `config`.
pub fn set_timer_config(rec: &mut Record, cfg: &TimerConfig, prefix: &str) {
    set_probe_config(
        rec,
        prefix,
        ProbeSettings {
            cpus: &cfg.cpus,
            policy: cfg.policy,
            duration: cfg.duration,
            max_spikes: cfg.max_spikes,
            lock_memory: cfg.lock_memory,
        },
    );
    rec.set_config(&format!("{prefix}interval_ns"), cfg.interval);
    rec.set_config(&format!("{prefix}clock"), cfg.clock.name());
    rec.set_config(&format!("{prefix}threshold_ns"), cfg.threshold);
}

/// Records a noise configuration in the record's `config`: the threshold
/// is `"auto"` when the probe chooses it.
pub fn set_noise_config(rec: &mut Record, cfg: &NoiseConfig, prefix: &str) {
    set_probe_config(
        rec,
        prefix,
        ProbeSettings {
            cpus: &cfg.cpus,
            policy: cfg.policy,
            duration: cfg.duration,
            max_spikes: cfg.max_spikes,
            lock_memory: cfg.lock_memory,
        },
    );
    rec.set_config(
        &format!("{prefix}threshold_ns"),
        cfg.threshold
            .map(|t| serde_json::json!(t.0))
            .unwrap_or(serde_json::json!("auto")),
    );
    if let Some((on, rest)) = cfg.stretch {
        rec.set_config(
            &format!("{prefix}stretch"),
            serde_json::json!({"poll_ns": on.0, "rest_ns": rest.0}),
        );
    }
}
