//! Terminal text: what each verb prints, rendered from its record alone,
//! so `punctual report --format text REC` reads a saved record exactly as
//! the verb printed it.

pub mod advise;
pub mod cause;
pub mod check;
pub mod compare;
pub mod forecast;
pub mod load;
pub mod monitor;
pub mod platform;
pub mod probe;
pub mod reserve;
pub mod simulate;
pub mod summary;
pub mod validate;
pub mod verdict;
pub mod watch;

use punctual_record::Record;

use crate::ReportError;

/// What the verb that made `rec` printed: its standard output followed by
/// the warnings block it printed on standard error (`timer`, `noise`).
/// Records of the probe verbs (`timer`, `noise`, `cause`), `sysinfo`,
/// `load`, `reserve`, `watch` and `simulate` are rendered; a `check`
/// record with its verdicts first ([`check_verb`]); others are refused
/// with one sentence.
pub fn render(rec: &Record) -> Result<String, ReportError> {
    let (mut out, warnings) = render_split(rec)?;
    out.push_str(&warnings);
    Ok(out)
}

/// [`render`] in two parts: what the verb prints on standard output, and
/// the warnings it prints on standard error, where every verb puts them
/// so that standard output stays the measurement alone.
pub fn render_split(rec: &Record) -> Result<(String, String), ReportError> {
    let mut out = String::new();
    let mut warnings = String::new();
    match rec.kind.as_str() {
        "timer" | "noise" => {
            let what = if rec.kind == "timer" {
                out.push_str(&probe::latency_table(rec));
                "late wake-ups"
            } else {
                out.push_str(&probe::stolen_table(rec));
                "stolen time"
            };
            out.push_str(&probe::stopped_line(rec));
            out.push_str(&probe::c_states_line(rec));
            out.push_str(&load::load_lines(rec));
            if let Some(sum) = rec.cause() {
                out.push_str(&cause::section(what, &sum, rec));
            }
            warnings.push_str(&probe::warnings_block(rec));
        }
        "cause" => out.push_str(&cause_verb(rec, 10, 10)),
        "sysinfo" => {
            out.push_str(&platform::platform_text(&rec.platform, false));
            warnings.push_str(&probe::warnings_block(rec));
        }
        "load" => out.push_str(&load::reports(&rec.load)),
        "watch" => {
            let (o, w) = watch::render(rec, 5);
            out.push_str(&o);
            warnings.push_str(&w);
        }
        "reserve" => {
            out.push_str(&reserve::summary(rec));
            out.push_str(&load::load_lines(rec));
        }
        "simulate" => {
            let (o, w) = simulate::summary(rec, None);
            out.push_str(&o);
            warnings.push_str(&w);
        }
        "check" => {
            let (o, w) = check_verb(rec);
            out.push_str(&o);
            warnings.push_str(&w);
        }
        other => {
            return Err(ReportError::Input(format!(
                "--format text renders records of timer, noise, cause, sysinfo, load, reserve, watch, simulate and check; this one is of '{other}'"
            )))
        }
    }
    Ok((out, warnings))
}

/// A check record read back: its verdicts first, state and interval
/// before anything else (the answer people come for, with its caveat),
/// then what `check` printed after its platform facts: the two halves'
/// tables, the C-states, what attribution found, the summary; the
/// warnings as the second part. The platform facts are the record's
/// (`report --html` shows them all).
pub fn check_verb(rec: &Record) -> (String, String) {
    let mut out = verdict::entries(&rec.verdicts);
    out.push_str("\n== this machine\n");
    out.push_str(&platform::platform_text(&rec.platform, false));
    out.push_str("\n== wake-up latency\n");
    out.push_str(&probe::latency_table(rec));
    out.push_str("\n== stolen time\n");
    out.push_str(&probe::stolen_table(rec));
    out.push_str(&probe::c_states_line(rec));
    if let Some(sum) = rec.cause() {
        out.push_str(&cause::section("late wake-ups and stolen time", &sum, rec));
    }
    out.push_str("\n== summary\n");
    out.push_str(&probe::check_summary(rec));
    let warnings = if rec.warnings.is_empty() {
        String::new()
    } else {
        format!(
            "\n== what may hurt, and what to change\n{}",
            probe::warnings_text(rec)
        )
    };
    (out, warnings)
}

/// What `punctual cause` prints on standard output: the probe's table, the
/// attribution (`top` offenders, `spikes` spikes broken down), the
/// injected neighbor's own account and the load's figures.
pub fn cause_verb(rec: &Record, top: usize, spikes: usize) -> String {
    let noise = rec.config.get("probe").and_then(|v| v.as_str()) == Some("noise");
    let mut out = if noise {
        probe::stolen_table(rec)
    } else {
        probe::latency_table(rec)
    };
    out.push_str(&probe::c_states_line(rec));
    out.push('\n');
    if let Some(sum) = rec.cause() {
        out.push_str(&cause::report(&sum, rec, top, spikes));
    }
    if let Some(n) = rec.extra.get("neighbor") {
        let num = |k: &str| n.get(k).and_then(|v| v.as_u64()).unwrap_or(0);
        out.push_str(&format!(
            "noisy-neighbor/{}: {} bursts, spun {} (its own measurement)\n",
            n.get("tid").and_then(|v| v.as_i64()).unwrap_or(0),
            num("bursts"),
            punctual_record::Nanos(num("spun_ns"))
        ));
    }
    out.push_str(&load::load_lines(rec));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use punctual_record::{Platform, Source};

    #[test]
    fn a_record_of_a_verb_without_text_is_refused_by_name() {
        let rec = Record::new(Source::Measured, "validate", Platform::default());
        let e = render(&rec).unwrap_err().to_string();
        assert!(e.contains("'validate'"), "{e}");
    }

    #[test]
    fn a_timer_record_prints_its_table_and_warnings() {
        let mut rec = Record::new(Source::Measured, "timer", Platform::default());
        rec.warnings.push(punctual_record::Warning::Other {
            message: "a note".into(),
        });
        let t = render(&rec).unwrap();
        assert!(t.starts_with("cpu "), "{t}");
        assert!(
            !t.contains("C-states"),
            "a record that does not say holds nothing: {t}"
        );
        rec.set_config(
            "c_states",
            serde_json::json!({"dma_latency_us": 0, "deepest_idle_state": 0, "disabled": [{}]}),
        );
        let t = render(&rec).unwrap();
        assert!(
            t.contains("C-states: /dev/cpu_dma_latency held at 0us; idle states deeper than 0 disabled (1 state files)\n"),
            "{t}"
        );
        let warnings = t.find("warnings:\n").expect("a warnings block");
        assert!(t[warnings..].contains("] a note\n"), "{t}");
    }
}
