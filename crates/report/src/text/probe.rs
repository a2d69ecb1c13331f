//! The probe verbs' tables (`timer`, `noise`, `check`, `cause`) and the
//! warnings under them, read from the record alone.

use punctual_record::{Metric, Nanos, Record, Severity, Warning};

fn fmt_ns(n: Nanos) -> String {
    n.to_string()
}

/// Terminal table of latency series, one row per CPU.
pub fn latency_table(rec: &Record) -> String {
    let mut out = format!(
        "{:<5} {:>9} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>7}\n",
        "cpu", "wakeups", "min", "p50", "p99", "p99.9", "max", "mean", "missed"
    );
    for s in rec.series.iter().filter(|s| s.metric == Metric::Latency) {
        out.push_str(&format!(
            "{:<5} {:>9} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>7}\n",
            row_label(s),
            s.count,
            fmt_ns(s.min),
            fmt_ns(s.percentiles.p50),
            fmt_ns(s.percentiles.p99),
            fmt_ns(s.percentiles.p99_9),
            fmt_ns(s.max),
            fmt_ns(s.mean),
            s.missed
        ));
    }
    out
}

/// A row's CPU, and for the kernel's timerlat probe which of its two
/// measurements (`cpuN.irq.latency`, `cpuN.thread.latency`) it is.
fn row_label(s: &punctual_record::Series) -> String {
    let Some(c) = s.cpu else {
        return s.name.clone();
    };
    match s.name.split('.').nth(1) {
        Some("irq") => format!("{c} irq"),
        Some("thread") => format!("{c} thr"),
        _ => c.to_string(),
    }
}

fn pct(x: f64) -> String {
    format!("{:.3}%", x * 100.0)
}

/// Terminal table of stolen time, one row per CPU, with the kernel's view.
pub fn stolen_table(rec: &Record) -> String {
    let mut out = format!(
        "{:<5} {:>9} {:>10} {:>9} {:>10} {:>9} {:>10} {:>9} | {:>9} {:>9} {:>9} {:>9}\n",
        "cpu",
        "observed",
        "stolen",
        "fraction",
        "intervals",
        "max gap",
        "threshold",
        "loop",
        "k.irq",
        "k.softirq",
        "k.steal",
        "k.admits"
    );
    for s in &rec.stolen {
        let (irq, soft, steal, admits) = match &s.kernel_view {
            Some(k) => {
                let sum = k.irq_ns + k.softirq_ns + k.steal_ns;
                let admits = if s.total_ns.is_zero() {
                    "-".to_string()
                } else {
                    format!("{:.0}%", 100.0 * sum.0 as f64 / s.total_ns.0 as f64)
                };
                (
                    k.irq_ns.to_string(),
                    k.softirq_ns.to_string(),
                    k.steal_ns.to_string(),
                    admits,
                )
            }
            None => ("-".into(), "-".into(), "-".into(), "-".into()),
        };
        out.push_str(&format!(
            "{:<5} {:>9} {:>10} {:>9} {:>10} {:>9} {:>10} {:>9} | {:>9} {:>9} {:>9} {:>9}\n",
            s.cpu,
            s.observed_ns.to_string(),
            s.total_ns.to_string(),
            pct(s.fraction),
            s.intervals,
            s.max_ns.to_string(),
            s.threshold_ns.to_string(),
            // The kernel's osnoise loop does not report its cost.
            s.loop_cost_ns
                .map(|n| n.to_string())
                .unwrap_or_else(|| "-".into()),
            irq,
            soft,
            steal,
            admits
        ));
    }
    out.push_str("k.* = the kernel's own accounting (/proc/stat) over the same run; k.admits = its share of the stolen time measured\n");
    out.push_str(&osnoise_lines(rec));
    out
}

/// The kernel's osnoise interference counters (`extra.osnoise`), one line
/// per CPU, when the kernel's probe measured.
fn osnoise_lines(rec: &Record) -> String {
    let Some(per_cpu) = rec.extra.get("osnoise").and_then(|v| v.as_object()) else {
        return String::new();
    };
    let mut out = String::new();
    for (cpu, v) in per_cpu {
        let n = |k: &str| v.get(k).and_then(|x| x.as_u64()).unwrap_or(0);
        out.push_str(&format!(
            "osnoise {cpu}: {} summaries, interference hw {} nmi {} irq {} softirq {} thread {}, largest single noise {}\n",
            n("samples"),
            n("hw"),
            n("nmi"),
            n("irq"),
            n("softirq"),
            n("thread"),
            Nanos(n("max_single_noise_ns")),
        ));
    }
    out
}

/// The event that stopped a `--stop-at` run (`extra.stopped_at`), with
/// what filled it when the flight recorder ran, or nothing.
pub fn stopped_line(rec: &Record) -> String {
    let Some(e) = rec.extra.get("stopped_at") else {
        return String::new();
    };
    let num = |k: &str| e.get(k).and_then(|v| v.as_u64()).unwrap_or(0);
    let what = if rec.kind == "noise" {
        "lost a gap of"
    } else {
        "woke late by"
    };
    let mut line = format!(
        "stopped at {}: CPU {} {what} {}, over --stop-at {}",
        Nanos(num("at_ns")),
        num("cpu"),
        Nanos(num("value_ns")),
        Nanos(num("threshold_ns"))
    );
    let causes: Vec<String> = e
        .get("causes")
        .and_then(|c| c.as_array())
        .map(|c| {
            c.iter()
                .filter(|x| x.get("share").and_then(|s| s.as_f64()).unwrap_or(0.0) >= 0.005)
                .take(5)
                .map(|x| {
                    format!(
                        "{} {:.0}%",
                        x.get("name").and_then(|n| n.as_str()).unwrap_or("?"),
                        x.get("share").and_then(|s| s.as_f64()).unwrap_or(0.0) * 100.0
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    if !causes.is_empty() {
        line.push_str(&format!("; filled by {}", causes.join(", ")));
    }
    line.push('\n');
    line.push_str(&stack_or_why(rec, e.get("stack"), num("cpu")));
    line
}

/// Frames of a stack shown under the `stopped at` line: the innermost ones
/// are the tracepoint and the scheduler, the outermost the system call or
/// interrupt entry; what the task was doing sits between.
const STACK_FRAMES_SHOWN: usize = 16;

/// The stack of what held `cpu` through a `--stop-at` event, or, when
/// `--stop-stacks` asked for one and the kernel took none there, why:
/// saying nothing would read as a stack that was lost.
pub fn stack_or_why(rec: &Record, stack: Option<&serde_json::Value>, cpu: u64) -> String {
    match stack {
        Some(_) => stack_lines(stack),
        None if rec.config.get("stop_stacks").and_then(|v| v.as_bool()) == Some(true) => {
            format!(
                "no kernel stack: no task but punctual's own gave CPU {cpu} back inside the \
                 event, so interrupts, the hypervisor or an idle exit held it\n"
            )
        }
        None => String::new(),
    }
}

/// The kernel stack of what held the CPU (`stopped_at.stack`, with
/// `--stop-stacks`), one frame a line, or nothing.
pub fn stack_lines(stack: Option<&serde_json::Value>) -> String {
    let Some(s) = stack else {
        return String::new();
    };
    let frames: Vec<&str> = s
        .get("frames")
        .and_then(|f| f.as_array())
        .map(|f| f.iter().filter_map(|x| x.as_str()).collect())
        .unwrap_or_default();
    let mut out = format!(
        "kernel stack of {} when it gave the CPU back:\n",
        s.get("task").and_then(|t| t.as_str()).unwrap_or("?")
    );
    for f in frames.iter().take(STACK_FRAMES_SHOWN) {
        out.push_str(&format!("  => {f}\n"));
    }
    if frames.len() > STACK_FRAMES_SHOWN {
        out.push_str(&format!(
            "  … {} more in the record\n",
            frames.len() - STACK_FRAMES_SHOWN
        ));
    }
    out
}

/// What was held of the C-states during a live run, from the record's
/// `config.c_states` (one line), or nothing when the record does not say
/// (a replayed feed, an older record).
pub fn c_states_line(rec: &Record) -> String {
    rec.config
        .get("c_states")
        .map(c_states_text)
        .unwrap_or_default()
}

/// The `C-states:` line from what a run held (`config.c_states`, or the
/// `c_states` key of a verb that writes no record, such as `validate`).
pub fn c_states_text(v: &serde_json::Value) -> String {
    let dma = match v.get("dma_latency_us") {
        Some(serde_json::Value::Number(n)) => format!("/dev/cpu_dma_latency held at {n}us"),
        _ => "/dev/cpu_dma_latency not held".to_string(),
    };
    let idle = match v.get("deepest_idle_state").and_then(|n| n.as_u64()) {
        Some(n) => {
            let k = v
                .get("disabled")
                .and_then(|d| d.as_array())
                .map_or(0, |d| d.len());
            format!("; idle states deeper than {n} disabled ({k} state files)")
        }
        None => String::new(),
    };
    format!("C-states: {dma}{idle}\n")
}

/// Warnings, most serious first, one per line.
pub fn warnings_text(rec: &Record) -> String {
    let mut w: Vec<&Warning> = rec.warnings.iter().collect();
    w.sort_by_key(|x| std::cmp::Reverse(x.severity()));
    w.iter()
        .map(|x| {
            let sev = match x.severity() {
                Severity::Info => "info",
                Severity::Warn => "warn",
                Severity::Degraded => "degraded",
            };
            format!("  [{sev}] {}\n", x.message())
        })
        .collect()
}

/// `warnings:` and the warnings, or nothing when there are none: the
/// closing block of `timer`, `noise` and `sysinfo`.
pub fn warnings_block(rec: &Record) -> String {
    if rec.warnings.is_empty() {
        String::new()
    } else {
        format!("warnings:\n{}", warnings_text(rec))
    }
}

/// The plain-language summary of a check record.
pub fn check_summary(rec: &Record) -> String {
    let mut out = String::new();
    for s in rec.series.iter().filter(|s| s.metric == Metric::Latency) {
        let cpu = s.cpu.unwrap_or(0);
        let mut line = format!(
            "CPU {cpu}: a thread woke typically {} late (median), 1 in 1000 wake-ups {} or later, worst {}",
            s.percentiles.p50, s.percentiles.p99_9, s.max
        );
        if s.missed > 0 {
            line.push_str(&format!(
                "; {} periods of {} passed without a wake-up",
                s.missed,
                s.sample_period_ns.unwrap_or_default()
            ));
        } else {
            line.push_str("; no period was missed");
        }
        out.push_str(&line);
        out.push_str(".\n");
        if let Some(st) = rec.stolen.iter().find(|x| x.cpu == cpu) {
            let mut l = format!(
                "       a busy thread lost {:.2}% of its time in {} interruptions (longest {})",
                st.fraction * 100.0,
                st.intervals,
                st.max_ns
            );
            if let Some(k) = &st.kernel_view {
                let sum = k.irq_ns + k.softirq_ns + k.steal_ns;
                if st.total_ns.is_zero() {
                    l.push_str("; the kernel accounted for none");
                } else {
                    l.push_str(&format!(
                        "; the kernel accounts for {:.0}% of that (irq {}, softirq {}, steal {})",
                        100.0 * sum.0 as f64 / st.total_ns.0 as f64,
                        k.irq_ns,
                        k.softirq_ns,
                        k.steal_ns
                    ));
                }
            }
            out.push_str(&l);
            out.push_str(".\n");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use punctual_record::{Platform, Recorder, Source};

    /// timerlat's two rows on one CPU are told apart; the user-space
    /// probe's row keeps its bare CPU number.
    #[test]
    fn the_kernel_probes_rows_say_which_measurement_they_are() {
        let mut rec = Record::new(Source::Measured, "timer", Platform::default());
        for name in ["cpu1.irq.latency", "cpu1.thread.latency", "cpu2.latency"] {
            let mut r = Recorder::new(Nanos(1000));
            r.record(Nanos::from_us(5));
            let mut s = r.to_series(name, Metric::Latency);
            s.cpu = Some(name.as_bytes()[3] as u32 - b'0' as u32);
            rec.series.push(s);
        }
        let labels: Vec<String> = latency_table(&rec)
            .lines()
            .skip(1)
            .map(|l| l[..5].trim_end().to_string())
            .collect();
        assert_eq!(labels, ["1 irq", "1 thr", "2"]);
        assert_eq!(osnoise_lines(&rec), "");
        rec.extra.insert(
            "osnoise".into(),
            serde_json::json!({"cpu1": {"samples": 3, "hw": 4, "nmi": 0, "irq": 9, "softirq": 1, "thread": 2, "max_single_noise_ns": 25_000}}),
        );
        assert_eq!(
            osnoise_lines(&rec),
            "osnoise cpu1: 3 summaries, interference hw 4 nmi 0 irq 9 softirq 1 thread 2, largest single noise 25us\n"
        );
    }

    /// A `--stop-stacks` run whose event held no task switch says so
    /// under its `stopped at` line; a stack, when there is one, is shown
    /// instead; a run that did not ask says nothing of stacks.
    #[test]
    fn a_missing_stack_is_explained_only_when_one_was_asked_for() {
        let mut rec = Record::new(Source::Measured, "timer", Platform::default());
        rec.extra.insert(
            "stopped_at".into(),
            serde_json::json!({"cpu": 1, "value_ns": 25_000_000, "at_ns": 2_000_000_000u64,
                               "mono_ns": 7, "threshold_ns": 20_000_000}),
        );
        assert!(!stopped_line(&rec).contains("stack"));
        rec.config
            .insert("stop_stacks".into(), serde_json::Value::Bool(true));
        let line = stopped_line(&rec);
        assert!(
            line.contains("no kernel stack: no task but punctual's own gave CPU 1 back"),
            "{line}"
        );
        rec.extra.get_mut("stopped_at").unwrap()["stack"] =
            serde_json::json!({"task": "spin/9", "frames": ["__schedule+0x1"]});
        let line = stopped_line(&rec);
        assert!(line.contains("kernel stack of spin/9"), "{line}");
        assert!(!line.contains("no kernel stack"), "{line}");
    }
}
