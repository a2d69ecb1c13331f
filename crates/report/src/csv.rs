//! `--format csv`: flat tables for spreadsheets and pandas.
//!
//! A record holds distributions (histograms), not raw samples, so "per
//! sample" means the rows that are stored one per event: periods of a
//! reservation run, spikes, and stolen time per timeline bin. Every table
//! starts with a `record` column (the input's label) so several records
//! concatenate into one file.

use std::fmt::Write;

use crate::{Input, ReportError};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Table {
    /// One row per histogram bucket of each series.
    Buckets,
    /// One row per reservation period.
    Periods,
    /// One row per stolen-time timeline bin.
    Stolen,
    /// One row per recorded spike.
    Spikes,
}

impl Table {
    pub fn parse(s: &str) -> Option<Table> {
        match s {
            "buckets" => Some(Table::Buckets),
            "periods" => Some(Table::Periods),
            "stolen" => Some(Table::Stolen),
            "spikes" => Some(Table::Spikes),
            _ => None,
        }
    }
}

/// RFC 4180 quoting: only when needed, doubling inner quotes.
fn cell(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

fn opt<T: ToString>(v: &Option<T>) -> String {
    v.as_ref().map(|x| cell(&x.to_string())).unwrap_or_default()
}

/// Renders `table`; `bucket_ns` re-buckets histograms (0 keeps the stored
/// width).
pub fn render(inputs: &[Input], table: Table, bucket_ns: u64) -> Result<Vec<u8>, ReportError> {
    let mut out = String::new();
    let mut rows = 0usize;
    match table {
        Table::Buckets => {
            out.push_str("record,series,cpu,task,metric,lower_ns,upper_ns,count\n");
            for i in inputs {
                for s in &i.record.series {
                    let h = if bucket_ns > 0 {
                        s.histogram.rebucket(bucket_ns)
                    } else {
                        s.histogram.clone()
                    };
                    for (lo, c) in &h.buckets {
                        rows += 1;
                        let _ = writeln!(
                            out,
                            "{},{},{},{},{},{},{},{}",
                            cell(&i.label),
                            cell(&s.name),
                            opt(&s.cpu),
                            opt(&s.task),
                            s.metric.as_str(),
                            lo,
                            lo + h.bucket_ns,
                            c
                        );
                    }
                }
            }
        }
        Table::Periods => {
            out.push_str(
                "record,task,index,start_ns,reserved_ns,requested_ns,received_ns,stolen_ns,hit\n",
            );
            for i in inputs {
                for p in &i.record.periods {
                    rows += 1;
                    let _ = writeln!(
                        out,
                        "{},{},{},{},{},{},{},{},{}",
                        cell(&i.label),
                        cell(&p.task),
                        p.index,
                        p.start_ns.0,
                        p.reserved_ns.0,
                        p.requested_ns.0,
                        p.received_ns.0,
                        p.stolen_ns.0,
                        p.hit
                    );
                }
            }
        }
        Table::Stolen => {
            out.push_str("record,cpu,task,bin_start_ns,bin_ns,stolen_ns\n");
            for i in inputs {
                for st in &i.record.stolen {
                    let w = st.timeline.bin_ns.0;
                    for (k, v) in st.timeline.values_ns.iter().enumerate() {
                        rows += 1;
                        let _ = writeln!(
                            out,
                            "{},{},{},{},{},{}",
                            cell(&i.label),
                            st.cpu,
                            opt(&st.task),
                            k as u64 * w,
                            w,
                            v.0
                        );
                    }
                }
            }
        }
        Table::Spikes => {
            out.push_str("record,at_ns,cpu,task,metric,value_ns,top_cause_kind,top_cause,top_cause_ns,incomplete\n");
            for i in inputs {
                for sp in &i.record.spikes {
                    rows += 1;
                    let top = sp.causes.iter().max_by_key(|c| c.total_ns);
                    let _ = writeln!(
                        out,
                        "{},{},{},{},{},{},{},{},{},{}",
                        cell(&i.label),
                        sp.at_ns.0,
                        sp.cpu,
                        opt(&sp.task),
                        sp.metric.as_str(),
                        sp.value_ns.0,
                        top.map(|c| cell(&c.kind)).unwrap_or_default(),
                        top.map(|c| cell(&c.name)).unwrap_or_default(),
                        top.map(|c| c.total_ns.0.to_string()).unwrap_or_default(),
                        sp.incomplete
                    );
                }
            }
        }
    }
    if rows == 0 {
        let what = match table {
            Table::Buckets => "series (histograms)",
            Table::Periods => "reservation periods",
            Table::Stolen => "stolen-time timelines",
            Table::Spikes => "spikes",
        };
        return Err(ReportError::Input(format!(
            "the record(s) have no {what} for --csv-table; try another table (buckets, periods, stolen, spikes)"
        )));
    }
    Ok(out.into_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;
    use punctual_record::{Metric, Nanos, Platform, Record, Recorder, Source};

    #[test]
    fn buckets_rebucket_and_quote() {
        let mut r = Record::new(Source::Measured, "timer", Platform::default());
        let mut rec = Recorder::new(Nanos(1000));
        for v in [10u64, 150_000, 160_000, 250_000] {
            rec.record(Nanos(v));
        }
        r.series.push(rec.to_series("a,\"b\"", Metric::Interval));
        let out = render(&[Input::new("run 1", r.clone())], Table::Buckets, 100_000).unwrap();
        let text = String::from_utf8(out).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 4, "{text}");
        assert_eq!(lines[2], "run 1,\"a,\"\"b\"\"\",,,interval,100000,200000,2");
        let e = render(&[Input::new("x", r)], Table::Periods, 0).unwrap_err();
        assert!(e.to_string().contains("periods"));
    }
}
