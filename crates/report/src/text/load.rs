//! What a load achieved (`punctual load`, and a probe's `--load`), read
//! from the record's `load` section.

use punctual_record::{LoadReport, Record};

/// For probe verbs: what the `--load` achieved, under the probe's table
/// (empty without a load), so a quiet result under a load that never got
/// going is visible as such.
pub fn load_lines(rec: &Record) -> String {
    if rec.load.is_empty() {
        return String::new();
    }
    format!(
        "load during the measurement (achieved):\n{}",
        reports(&rec.load)
    )
}

/// One block per load, figures in the order a user reads them: the
/// headline (throughput, MB/s…) first, then the rest alphabetically.
pub fn reports(reports: &[LoadReport]) -> String {
    const HEADLINE: &[&str] = &[
        "throughput_gbit_s",
        "messages_per_s",
        "packets_per_s",
        "lost_packets",
        "loss_fraction",
        "mb_per_s",
        "iops",
        "copy_gb_per_s",
        "wakeups_per_s",
        "cpu_fraction",
        "duration_s",
    ];
    let mut s = String::new();
    for r in reports {
        s.push_str(&format!("{}  ({})\n", r.kind, r.spec));
        let mut keys: Vec<&String> = r.achieved.keys().collect();
        keys.sort_by_key(|k| {
            (
                HEADLINE.iter().position(|h| h == k).unwrap_or(usize::MAX),
                (*k).clone(),
            )
        });
        for k in keys {
            s.push_str(&format!("  {:<28} {}\n", k, fmt_num(r.achieved[k])));
        }
    }
    s
}

fn fmt_num(v: f64) -> String {
    if v == v.trunc() && v.abs() < 1e15 {
        format!("{}", v as i64)
    } else if v.abs() >= 100.0 {
        format!("{v:.0}")
    } else if v.abs() >= 1.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.4}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_read_well() {
        assert_eq!(fmt_num(3.0), "3");
        assert_eq!(fmt_num(35.123), "35.12");
        assert_eq!(fmt_num(12345.6), "12346");
        assert_eq!(fmt_num(0.01234), "0.0123");
    }

    #[test]
    fn headline_first() {
        let mut r = LoadReport {
            kind: "net".into(),
            spec: "net".into(),
            achieved: Default::default(),
        };
        r.achieved.insert("bytes_received".into(), 1.0);
        r.achieved.insert("throughput_gbit_s".into(), 2.5);
        let s = reports(&[r]);
        let a = s.find("throughput_gbit_s").unwrap();
        let b = s.find("bytes_received").unwrap();
        assert!(a < b, "{s}");
    }
}
