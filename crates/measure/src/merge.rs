//! `check` measures its two halves into two records (each on its own
//! probe's time zero, so the flight recorder lines its events up with the
//! right spikes) and merges the second into the first.

use punctual_record::{Nanos, Record};

/// Moves the noise half's results into the check record. Its spikes are
/// shifted from the noise run's time zero onto the check's (the record's
/// `started_mono_ns`, the timer run's); the stolen timelines keep the noise
/// half's own zero. The half's cause accounting goes to
/// `extra["cause_noise"]` beside the timer half's `extra["cause"]`.
pub fn merge_noise_half(rec: &mut Record, mut half: Record) {
    let shift = match (rec.started_mono_ns, half.started_mono_ns) {
        (Some(a), Some(b)) => b.saturating_sub(a),
        _ => Nanos::ZERO,
    };
    for mut sp in half.spikes.drain(..) {
        sp.at_ns += shift;
        rec.spikes.push(sp);
    }
    rec.spikes.sort_by_key(|s| (s.at_ns, s.cpu));
    rec.spikes_dropped += half.spikes_dropped;
    rec.series.append(&mut half.series);
    rec.stolen.append(&mut half.stolen);
    rec.interrupted |= half.interrupted;
    if rec.started_mono_ns.is_none() {
        rec.started_mono_ns = half.started_mono_ns;
    }
    for (k, v) in half.extra {
        let key = if k == "cause" {
            "cause_noise".to_string()
        } else {
            k
        };
        rec.extra.insert(key, v);
    }
    for w in half.warnings {
        if !rec.warnings.contains(&w) {
            rec.warnings.push(w);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use punctual_record::{Metric, Platform, Source, Spike};

    fn spike(at: u64) -> Spike {
        Spike {
            at_ns: Nanos(at),
            cpu: 0,
            task: None,
            metric: Metric::Gap,
            value_ns: Nanos(5),
            causes: Vec::new(),
            incomplete: false,
        }
    }

    #[test]
    fn the_noise_half_moves_onto_the_checks_time_zero() {
        let mut rec = Record::new(Source::Measured, "check", Platform::default());
        rec.started_mono_ns = Some(Nanos(1_000));
        rec.spikes.push(spike(700));
        let mut half = Record::new(Source::Measured, "check", Platform::default());
        half.started_mono_ns = Some(Nanos(1_500));
        half.spikes.push(spike(100));
        half.extra
            .insert("cause".into(), serde_json::json!({"x": 1}));
        merge_noise_half(&mut rec, half);
        let at: Vec<u64> = rec.spikes.iter().map(|s| s.at_ns.0).collect();
        assert_eq!(at, vec![600, 700], "shifted by 500 and sorted");
        assert!(rec.extra.contains_key("cause_noise"));
        assert!(!rec.extra.contains_key("cause"));
    }
}
