//! Bounds of a record's size as written (indented JSON, as
//! `Record::to_json_pretty` writes it) that cost far less than writing it.
//!
//! Most records are far under [`super::RECORD_BYTES_MAX`]; sizing each one
//! exactly meant serializing it once more than the writer does (a quarter
//! of a small run's instructions). [`record_max`] never says less than the
//! written size and reads only lengths (names, `hdr`, bucket and bin
//! counts) and each part's largest number, so a record it clears is
//! written as it is. [`series_min`] never says more than a series' share of
//! the written size, so a sum of it that passes the bound proves the whole
//! record cannot fit before the record is even assembled.

use punctual_record::{Histogram, Record, Series, Stolen, Timeline};
use serde::Serialize;
use serde_json::Value;

/// Longest text serde_json writes for an `f64` (ryu's buffer, as in
/// `-2.2250738585072014e-308`).
const F64_WIDTH: usize = 24;

/// Longest text of an integer (`u64::MAX`, or `i64::MIN` with its sign).
const INT_WIDTH: usize = 20;

/// Fewest bytes one `[lower, count]` bucket pair takes in a series of the
/// record (two one-digit numbers at the pairs' indent, 10 and 12 spaces).
const BUCKET_MIN: usize = 40;

/// Decimal digits of `x`.
pub(crate) fn digits(mut x: u64) -> usize {
    let mut n = 1;
    while x >= 10 {
        x /= 10;
        n += 1;
    }
    n
}

/// Bytes of `s` as a JSON string, quotes and escapes included (serde_json
/// escapes `"`, `\` and the control characters, five of them in two bytes).
pub(crate) fn escaped(s: &str) -> usize {
    2 + s
        .bytes()
        .map(|b| match b {
            b'"' | b'\\' | b'\n' | b'\t' | b'\r' | 0x08 | 0x0c => 2,
            0..=0x1f => 6,
            _ => 1,
        })
        .sum::<usize>()
}

/// Bytes of an array or object of `n` members that take `items` bytes in
/// all (an object's with their keys and `": "`), its brackets at indent
/// `d`: each member on its own line one level deeper.
pub(crate) fn seq_len(n: usize, items: usize, d: usize) -> usize {
    if n == 0 {
        return 2;
    }
    2 + items + n * (1 + 2 * (d + 1)) + (n - 1) + 1 + 2 * d
}

/// Bytes a member `"key": value` adds to an object at indent `d` that has
/// members already.
fn member_added(d: usize, key: &str, value: usize) -> usize {
    2 + 2 * (d + 1) + escaped(key) + 2 + value
}

/// Bytes `v` takes at indent `d`; integers at their own width when
/// `exact_ints`, else at the widest any integer can take (a template
/// standing for others), and floats always at the widest.
pub(crate) fn value_len(v: &Value, d: usize, exact_ints: bool) -> usize {
    match v {
        Value::Null => 4,
        Value::Bool(b) => {
            if *b && exact_ints {
                4
            } else {
                5
            }
        }
        Value::Number(n) => match (n.as_u64(), n.as_i64()) {
            _ if !exact_ints && !n.is_f64() => INT_WIDTH,
            (Some(u), _) => digits(u),
            (None, Some(i)) => 1 + digits(i.unsigned_abs()),
            _ => F64_WIDTH,
        },
        Value::String(s) => escaped(s),
        Value::Array(a) => seq_len(
            a.len(),
            a.iter().map(|x| value_len(x, d + 1, exact_ints)).sum(),
            d,
        ),
        Value::Object(m) => seq_len(
            m.len(),
            m.iter()
                .map(|(k, x)| escaped(k) + 2 + value_len(x, d + 1, exact_ints))
                .sum(),
            d,
        ),
    }
}

/// [`value_len`] of a typed part.
fn typed_len<T: Serialize>(v: &T, d: usize, exact_ints: bool) -> usize {
    value_len(
        &serde_json::to_value(v).expect("plain data serializes"),
        d,
        exact_ints,
    )
}

/// At most the bytes series `s` takes at indent `d`: its numbers as they
/// are, its histogram from the bucket count and the widest lower bound and
/// count, without writing a bucket.
pub(crate) fn series_max(s: &Series, d: usize) -> usize {
    let shell = Series {
        name: String::new(),
        cpu: s.cpu,
        task: s.task.as_ref().map(|_| String::new()),
        metric: s.metric,
        unit: s.unit.clone(),
        count: s.count,
        min: s.min,
        mean: s.mean,
        max: s.max,
        percentiles: s.percentiles.clone(),
        missed: s.missed,
        sample_period_ns: s.sample_period_ns,
        observed_ns: s.observed_ns,
        histogram: Histogram {
            bucket_ns: s.histogram.bucket_ns,
            buckets: Vec::new(),
        },
        windows: s.windows.clone(),
        hdr: String::new(),
    };
    let mut n = typed_len(&shell, d, true) + escaped(&s.name) - 2;
    if let Some(t) = &s.task {
        n += escaped(t) - 2;
    }
    if !s.hdr.is_empty() {
        n += member_added(d, "hdr", escaped(&s.hdr));
    }
    let b = &s.histogram.buckets;
    if !b.is_empty() {
        let lo = b.iter().map(|x| x.0).max().unwrap_or(0);
        let count = b.iter().map(|x| x.1).max().unwrap_or(0);
        let pair = seq_len(2, digits(lo) + digits(count), d + 3);
        n += seq_len(b.len(), b.len() * pair, d + 2) - 2;
    }
    n
}

/// At least the bytes series `s` takes in a record: its name, its `hdr`
/// and its buckets, each of which is written as it is.
pub(crate) fn series_min(s: &Series) -> usize {
    s.name.len() + s.hdr.len() + s.histogram.buckets.len() * BUCKET_MIN
}

/// At most the bytes a list of `items` takes at indent `d` when each
/// item is `template` (at its widest) but for the strings `strings` picks
/// out of it, which are counted as they are; an item whose `shape`
/// differs from the template's is measured alone.
fn list_max<T: Serialize, K: PartialEq>(
    items: &[T],
    d: usize,
    shape: impl Fn(&T) -> K,
    strings: impl Fn(&T) -> usize,
    blank: impl Fn(&T) -> T,
) -> usize {
    let Some(first) = items.first() else {
        return 2;
    };
    let key = shape(first);
    let template = typed_len(&blank(first), d + 1, false) - strings(&blank(first));
    let sum: usize = items
        .iter()
        .map(|x| {
            if shape(x) == key {
                template + strings(x)
            } else {
                typed_len(x, d + 1, false)
            }
        })
        .sum();
    seq_len(items.len(), sum, d)
}

/// At most the bytes one CPU's stolen time takes at indent `d`.
fn stolen_max(s: &Stolen, d: usize) -> usize {
    let shell = Stolen {
        timeline: Timeline {
            bin_ns: s.timeline.bin_ns,
            values_ns: Vec::new(),
        },
        by_source: Vec::new(),
        kernel_view: s.kernel_view.clone(),
        task: s.task.clone(),
        cpu: s.cpu,
        observed_ns: s.observed_ns,
        total_ns: s.total_ns,
        fraction: s.fraction,
        intervals: s.intervals,
        max_ns: s.max_ns,
        threshold_ns: s.threshold_ns,
        loop_cost_ns: s.loop_cost_ns,
    };
    let mut n = typed_len(&shell, d, true);
    let v = &s.timeline.values_ns;
    if !v.is_empty() {
        let widest = digits(v.iter().map(|x| x.0).max().unwrap_or(0));
        n += seq_len(v.len(), v.len() * widest, d + 2) - 2;
    }
    if !s.by_source.is_empty() {
        n += list_max(
            &s.by_source,
            d + 1,
            |_| (),
            |x| escaped(&x.kind) + escaped(&x.name),
            |x| punctual_record::SourceShare {
                kind: String::new(),
                name: String::new(),
                ..x.clone()
            },
        ) - 2;
    }
    n
}

/// At most the bytes `r` takes as written: never less, so a record this
/// clears fits without being written to find out.
pub fn record_max(r: &Record) -> usize {
    // Everything but the parts that grow with the scenario, measured as
    // it is; each of those parts is written `{}` or `[]` in it.
    let shell = Record {
        schema_version: r.schema_version,
        tool_version: r.tool_version.clone(),
        source: r.source,
        kind: r.kind.clone(),
        started_at: r.started_at.clone(),
        started_mono_ns: r.started_mono_ns,
        duration_ns: r.duration_ns,
        interrupted: r.interrupted,
        platform: r.platform.clone(),
        config: Default::default(),
        series: Vec::new(),
        stolen: Vec::new(),
        spikes: Vec::new(),
        spikes_dropped: r.spikes_dropped,
        periods: Vec::new(),
        periods_dropped: r.periods_dropped,
        period_summary: Vec::new(),
        load: r.load.clone(),
        warnings: Vec::new(),
        verdicts: r.verdicts.clone(),
        fixes: r.fixes.clone(),
        unexplained: r.unexplained.clone(),
        extra: Default::default(),
    };
    let mut n = typed_len(&shell, 0, true) - 2 * 7;
    let obj = |m: &std::collections::BTreeMap<String, Value>| {
        seq_len(
            m.len(),
            m.iter()
                .map(|(k, v)| escaped(k) + 2 + value_len(v, 2, true))
                .sum(),
            1,
        )
    };
    n += obj(&r.config);
    n += seq_len(
        r.series.len(),
        r.series.iter().map(|s| series_max(s, 2)).sum(),
        1,
    );
    n += seq_len(
        r.stolen.len(),
        r.stolen.iter().map(|s| stolen_max(s, 2)).sum(),
        1,
    );
    n += list_max(
        &r.spikes,
        1,
        |x| (x.task.is_some(), x.metric, x.causes.is_empty()),
        |x| x.task.as_deref().map_or(0, escaped),
        |x| punctual_record::Spike {
            task: x.task.as_ref().map(|_| String::new()),
            ..x.clone()
        },
    );
    n += list_max(
        &r.periods,
        1,
        |_| (),
        |x| escaped(&x.task),
        |x| punctual_record::Period {
            task: String::new(),
            ..x.clone()
        },
    );
    n += list_max(
        &r.period_summary,
        1,
        |_| (),
        |x| escaped(&x.task),
        |x| punctual_record::PeriodSummary {
            task: String::new(),
            ..x.clone()
        },
    );
    n += seq_len(
        r.warnings.len(),
        r.warnings.iter().map(|w| typed_len(w, 2, true)).sum(),
        1,
    );
    if !r.extra.is_empty() {
        n += member_added(0, "extra", obj(&r.extra));
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::outcome::RunOptions;
    use punctual_units::Nanos;

    /// The record of `text` run for `ms` of simulated time.
    fn record(file: &str, text: &str, ms: u64) -> Record {
        let opts = RunOptions {
            duration: Some(Nanos::from_ms(ms)),
            ..Default::default()
        };
        let (scn, o) = crate::run_text(file, text, &[], &opts).unwrap();
        super::super::to_record(&scn, &o, &[])
    }

    /// Every figure serde_json can write for an `f64` fits [`F64_WIDTH`].
    #[test]
    fn the_widest_float_fits_its_width() {
        for x in [-2.2250738585072014e-308, f64::MIN, -1.0 / 3.0, 1e-7] {
            let s = serde_json::to_string(&x).unwrap();
            assert!(s.len() <= F64_WIDTH, "{s}");
        }
        assert_eq!(serde_json::to_string(&i64::MIN).unwrap().len(), INT_WIDTH);
    }

    /// The bound is never below the written size and the least size of a
    /// series never above its share, over every scenario of the repo and
    /// names JSON must escape; and the bound is close enough (within a
    /// half) to clear records that fit.
    #[test]
    fn the_bound_is_never_below_the_written_size() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../scenarios");
        let mut cases: Vec<(String, String)> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|x| x == "toml"))
            .map(|p| {
                (
                    p.display().to_string(),
                    std::fs::read_to_string(&p).unwrap(),
                )
            })
            .collect();
        assert!(cases.len() >= 10, "{}", cases.len());
        cases.push((
            "escapes.toml".into(),
            "[sim]\n[[task]]\nname = \"a \\\"b\\\" \\\\ \\u0001 \\t é\"\nkind = \"periodic\"\nperiod = \"2ms\"\nexec = { uniform = [\"1ms\", \"3ms\"] }\npriority = 5\n\
             [[noise]]\nname = \"n \\\"q\\\"\"\nkind = \"poisson\"\nrate = 2000.0\nduration = \"20us\"\nlevel = \"dpc\"\n"
                .into(),
        ));
        for (file, text) in &cases {
            let r = record(file, text, 300);
            let exact = r.to_json_pretty().len();
            let max = record_max(&r);
            assert!(max >= exact, "{file}: bound {max} < written {exact}");
            assert!(
                max <= exact + exact / 2,
                "{file}: bound {max}, written {exact}"
            );
            let mut least = 0;
            for s in &r.series {
                let alone = serde_json::to_string_pretty(s).unwrap().len();
                assert!(series_min(s) <= alone, "{file}: {}", s.name);
                least += series_min(s);
            }
            assert!(least <= exact, "{file}");
        }
    }
}
