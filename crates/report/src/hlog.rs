//! `--format hlog`: the HdrHistogram interval log (the jHiccup format),
//! which HdrHistogram's own tools (HistogramLogProcessor, HdrHistogram
//! plotters, hdr-plot) read.
//!
//! A record stores each series as one whole-run histogram, so each series
//! becomes one interval, tagged with its name (prefixed by the input's
//! label when several records are given). Several records are laid end to
//! end in time, as `--merge` does. Values are nanoseconds; the max column
//! is divided by 10^6 (milliseconds), as jHiccup writes it.

use std::time::Duration;

use hdrhistogram::serialization::interval_log::{IntervalLogWriterBuilder, Tag};
use hdrhistogram::serialization::V2DeflateSerializer;
use punctual_record::{Nanos, Recorder};

use crate::{Input, ReportError};

/// A tag may not contain ',', ' ', CR or LF.
pub fn tag_for(label: Option<&str>, series: &str) -> String {
    let raw = match label {
        Some(l) => format!("{l}/{series}"),
        None => series.to_string(),
    };
    raw.chars()
        .map(|c| {
            if matches!(c, ',' | ' ' | '\r' | '\n') {
                '_'
            } else {
                c
            }
        })
        .collect()
}

pub fn render(inputs: &[Input]) -> Result<Vec<u8>, ReportError> {
    let mut buf = Vec::new();
    let mut ser = V2DeflateSerializer::new();
    let mut builder = IntervalLogWriterBuilder::new();
    builder.add_comment("punctual HdrHistogram interval log; values in nanoseconds");
    builder.with_max_value_divisor(1e6);
    let mut w = builder
        .begin_log_with(&mut buf, &mut ser)
        .map_err(|e| ReportError::Input(format!("cannot start the log: {e}")))?;
    let _ = w.write_comment(
        "\"StartTimestamp\",\"Interval_Length\",\"Interval_Max\",\"Interval_Compressed_Histogram\"",
    );
    let several = inputs.len() > 1;
    let mut offset = Nanos::ZERO;
    let mut written = 0;
    for i in inputs {
        let r = &i.record;
        let _ = w.write_comment(&format!(
            "record {} kind {} host {} started {}",
            i.label,
            r.kind,
            r.platform.hostname.as_deref().unwrap_or("?"),
            r.started_at
        ));
        for s in &r.series {
            let rec = Recorder::from_series(s)
                .map_err(|e| ReportError::Input(format!("{}: series {}: {e}", i.label, s.name)))?;
            let tag = tag_for(several.then_some(i.label.as_str()), &s.name);
            let dur = if r.duration_ns.is_zero() {
                Duration::from_secs(0)
            } else {
                r.duration_ns.to_std()
            };
            w.write_histogram(&rec.hdr(), offset.to_std(), dur, Tag::new(&tag))
                .map_err(|e| ReportError::Input(format!("series {}: {e:?}", s.name)))?;
            written += 1;
        }
        offset += r.duration_ns;
    }
    drop(w);
    if written == 0 {
        return Err(ReportError::Input(
            "the record(s) have no series, so there is no histogram to write as an hlog".into(),
        ));
    }
    Ok(buf)
}

#[cfg(test)]
mod tests {
    use super::*;
    use base64::Engine;
    use hdrhistogram::serialization::interval_log::{IntervalLogIterator, LogEntry};
    use hdrhistogram::serialization::Deserializer;
    use punctual_record::{Metric, Platform, Record, Source};

    #[test]
    fn reads_back_with_hdrhistogram() {
        let mut r = Record::new(Source::Measured, "timer", Platform::default());
        r.duration_ns = Nanos::from_secs(5);
        for cpu in 0..2u64 {
            let mut rec = Recorder::new(Nanos(1000));
            for v in 1..=5000u64 {
                rec.record(Nanos(v * 100 * (cpu + 1)));
            }
            r.series
                .push(rec.to_series(&format!("cpu{cpu}.latency"), Metric::Latency));
        }
        let out = render(&[Input::new("a b", r.clone()), Input::new("c", r)]).unwrap();
        let mut seen = Vec::new();
        for e in IntervalLogIterator::new(&out) {
            if let Ok(LogEntry::Interval(h)) = e {
                let bytes = base64::engine::general_purpose::STANDARD
                    .decode(h.encoded_histogram())
                    .unwrap();
                let hist: hdrhistogram::Histogram<u64> = Deserializer::new()
                    .deserialize(&mut std::io::Cursor::new(bytes))
                    .unwrap();
                seen.push((
                    h.tag().map(|t| t.as_str().to_string()),
                    h.start_timestamp().as_secs(),
                    hist.len(),
                    hist.max(),
                ));
            }
        }
        assert_eq!(seen.len(), 4, "{}", String::from_utf8_lossy(&out));
        assert_eq!(seen[0].0.as_deref(), Some("a_b/cpu0.latency"));
        assert_eq!(seen[2].1, 5);
        assert_eq!(seen[1].2, 5000);
        assert!(hdrhistogram::Histogram::<u64>::new(3)
            .unwrap()
            .equivalent(1_000_000, seen[1].3));
    }
}
