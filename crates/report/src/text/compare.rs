//! `punctual compare`'s table: one line per series and quantile with its
//! ratio and confidence interval, then one answer per series. A
//! comparison is not a record, so `report --format text` does not print
//! it again; the numbers are `punctual_analysis::compare`.

use punctual_analysis::compare::{Answer, Comparison};

/// A ratio as the table shows it: two decimals, none from 10x up.
pub fn ratio(r: f64) -> String {
    if r >= 10.0 {
        format!("{r:.0}x")
    } else {
        format!("{r:.2}x")
    }
}

/// The table: one line per series and quantile, then one answer per series.
pub fn render(c: &Comparison) -> String {
    let mut s = String::new();
    s.push_str(&format!(
        "{:<18} {:>7} {:>11} {:>11} {:>8} {:>19}  answer\n",
        "series", "q", "base", "new", "new/base", "CI"
    ));
    for se in &c.series {
        for q in &se.quantiles {
            let ci = match q.ratio_ci {
                Some((lo, hi)) => format!("{} - {}", ratio(lo), ratio(hi)),
                None => "-".to_string(),
            };
            let answer = match &q.untested {
                Some(why) => format!("not tested: {why}"),
                None => q.answer.as_str().to_string(),
            };
            s.push_str(&format!(
                "{:<18} {:>7} {:>11} {:>11} {:>8} {:>19}  {}\n",
                se.name,
                q.quantile,
                q.base_ns.to_string(),
                q.new_ns.to_string(),
                ratio(q.ratio),
                ci,
                answer
            ));
        }
    }
    s.push('\n');
    for se in &c.series {
        let changed: Vec<&str> = se
            .quantiles
            .iter()
            .filter(|q| q.answer == se.answer && q.answer != Answer::NoDifference)
            .map(|q| q.quantile.as_str())
            .collect();
        if changed.is_empty() {
            s.push_str(&format!("{}: {}\n", se.name, se.answer.as_str()));
        } else {
            s.push_str(&format!(
                "{}: {} ({})\n",
                se.name,
                se.answer.as_str(),
                changed.join(", ")
            ));
        }
    }
    for se in &c.series {
        s.push_str(&format!("{}: {}\n", se.name, se.resampling.describe()));
    }
    for (name, why) in &c.skipped {
        s.push_str(&format!("{name}: not compared: {why}\n"));
    }
    s.push_str(&format!(
        "{:.0}% confidence over {} tests ({:.2}% each), changes under {:.0}% ignored, {} bootstrap replicates, seed {}\n",
        c.level * 100.0,
        c.series.iter().map(|s| s.quantiles.len()).sum::<usize>(),
        c.per_test_level * 100.0,
        c.min_change * 100.0,
        c.replicates,
        c.seed
    ));
    s
}
