//! cyclictest-compatible histogram output (`--hist`), so plotting scripts
//! written for `cyclictest -h` work on punctual's numbers unchanged.
//!
//! The layout follows rt-tests' `print_hist()`: a `# Histogram` line, one
//! row per microsecond (`%06d ` then one `%06lu` column per thread, tab
//! separated), then `# Total:` (`%09llu` each: samples inside the rows),
//! `# Min Latencies:`, `# Avg Latencies:`, `# Max Latencies:`,
//! `# Histogram Overflows:` (`%05lu` each, µs truncated as cyclictest's
//! `calcdiff` truncates), and the overflow section. punctual does not keep
//! the cycle number of every overflow, so each thread's overflow line
//! carries only cyclictest's `# NNNNN others` tail.

use std::fmt::Write;

use punctual_record::Series;

/// Rows cyclictest would print for these series when none is asked:
/// enough to hold every sample (max µs + 1), at least 100, at most 100 000.
pub fn default_rows(series: &[&Series]) -> u64 {
    let max_us = series.iter().map(|s| s.max.0 / 1000).max().unwrap_or(0);
    (max_us + 1).clamp(100, 100_000)
}

/// Renders `series` (one column each, in order) with `rows` one-µs rows.
pub fn cyclictest_hist(series: &[&Series], rows: u64) -> String {
    let n = series.len();
    let mut cols: Vec<Vec<u64>> = vec![vec![0; rows as usize]; n];
    let mut overflow = vec![0u64; n];
    for (j, s) in series.iter().enumerate() {
        let h = s.histogram.rebucket(1000);
        for (lo, c) in h.buckets {
            let us = lo / 1000;
            if us < rows {
                cols[j][us as usize] += c;
            } else {
                overflow[j] += c;
            }
        }
    }
    let mut out = String::new();
    out.push_str("# Histogram\n");
    for i in 0..rows as usize {
        let _ = write!(out, "{i:06} ");
        for (j, col) in cols.iter().enumerate() {
            let _ = write!(out, "{:06}", col[i]);
            if j + 1 < n {
                out.push('\t');
            }
        }
        out.push('\n');
    }
    let line = |out: &mut String, title: &str, vals: Vec<String>| {
        out.push_str(title);
        for v in vals {
            out.push(' ');
            out.push_str(&v);
        }
        out.push('\n');
    };
    line(
        &mut out,
        "# Total:",
        cols.iter()
            .map(|c| format!("{:09}", c.iter().sum::<u64>()))
            .collect(),
    );
    line(
        &mut out,
        "# Min Latencies:",
        series
            .iter()
            .map(|s| format!("{:05}", s.min.0 / 1000))
            .collect(),
    );
    line(
        &mut out,
        "# Avg Latencies:",
        series
            .iter()
            .map(|s| format!("{:05}", s.mean.0 / 1000))
            .collect(),
    );
    line(
        &mut out,
        "# Max Latencies:",
        series
            .iter()
            .map(|s| format!("{:05}", s.max.0 / 1000))
            .collect(),
    );
    line(
        &mut out,
        "# Histogram Overflows:",
        overflow.iter().map(|o| format!("{o:05}")).collect(),
    );
    out.push_str("# Histogram Overflow at cycle number:\n");
    for (j, o) in overflow.iter().enumerate() {
        let _ = write!(out, "# Thread {j}:");
        if *o > 0 {
            let _ = write!(out, " # {o:05} others");
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use punctual_record::{Metric, Nanos, Recorder};

    fn series(vals: &[u64]) -> Series {
        let mut r = Recorder::new(Nanos(1000));
        for v in vals {
            r.record(Nanos(*v));
        }
        r.to_series("x", Metric::Latency)
    }

    #[test]
    fn matches_cyclictest_layout() {
        let a = series(&[1_500, 1_900, 2_100, 7_000]);
        let b = series(&[900, 3_000]);
        let text = cyclictest_hist(&[&a, &b], 5);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "# Histogram");
        assert_eq!(lines[1], "000000 000000\t000001");
        assert_eq!(lines[2], "000001 000002\t000000");
        assert_eq!(lines[3], "000002 000001\t000000");
        assert_eq!(lines[4], "000003 000000\t000001");
        assert_eq!(lines[6], "# Total: 000000003 000000002");
        assert_eq!(lines[7], "# Min Latencies: 00001 00000");
        assert_eq!(lines[8], "# Avg Latencies: 00003 00001");
        assert_eq!(lines[9], "# Max Latencies: 00007 00003");
        assert_eq!(lines[10], "# Histogram Overflows: 00001 00000");
        assert_eq!(lines[11], "# Histogram Overflow at cycle number:");
        assert_eq!(lines[12], "# Thread 0: # 00001 others");
        assert_eq!(lines[13], "# Thread 1:");
        assert_eq!(default_rows(&[&a]), 100);
    }
}
