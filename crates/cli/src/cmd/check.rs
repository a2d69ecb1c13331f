//! `punctual check`: the main job, no flags needed. Platform facts, then
//! the timer probe and the noise probe over all CPUs, then a short
//! plain-language summary.
//!
//! Why the time is split in two halves rather than the probes run side by
//! side on different CPUs: each probe disturbs the other on a shared CPU
//! (a busy loop at SCHED_FIFO delays or is charged with the timer thread's
//! wake-ups), and running them on disjoint CPUs would measure each CPU with
//! only one probe, which on a 2-CPU machine means every CPU misses half the
//! picture. Sequential halves measure every CPU with both probes, each
//! undisturbed, at the cost of not seeing them at the same moment.

use std::path::PathBuf;

use punctual_live::rt::Policy;
use punctual_live::spikes::DEFAULT_SPIKE_CAPACITY;
use punctual_live::{noise::NoiseConfig, timer::TimerClock, timer::TimerConfig};
use punctual_record::{Metric, Nanos, Record};

use super::noise::{run_noise_probe, set_noise_config, stolen_table};
use super::sysinfo::platform_text;
use super::timer::{
    finish_record, latency_table, new_record, parse_cpus, run_timer_probe, set_timer_config,
    warnings_text, write_json,
};
use crate::error::{CliError, CliResult};
use crate::interrupt::interrupted;
use crate::opts;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Total time: the first half measures wake-up latency, the second
    /// stolen time.
    #[arg(long, default_value = "60s", value_parser = opts::positive_duration)]
    pub duration: Nanos,
    /// CPUs to survey: `0`, `0,1`, `0-3` or `all`.
    #[arg(long, default_value = "all")]
    pub cpus: String,
    /// Write the record (JSON) here.
    #[arg(long)]
    pub json: Option<PathBuf>,
}

/// Where per-workload verdicts go: forecasts (worst case per hour/day/week,
/// time to buffer underrun for each named workload profile) come from
/// `punctual_analysis` and are printed here once that lands. Takes the
/// finished record so the verdicts read exactly what was measured.
pub fn print_verdicts(_rec: &Record) {
    // Intentionally empty until `punctual_analysis` provides the forecast.
}

/// The plain-language summary of a check record.
pub fn summary(rec: &Record) -> String {
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

pub fn run(args: Args) -> CliResult {
    let cpus = parse_cpus(&args.cpus)?;
    opts::check_output("--json", &args.json)?;
    if args.duration < Nanos::from_ms(200) {
        return Err(CliError::usage(format!(
            "--duration {} is too short to split between two probes; give at least 200ms",
            args.duration
        )));
    }
    let stop = crate::interrupt::stop_flag();
    let half = args.duration / 2;
    let platform = punctual_live::sysinfo::collect();
    let mut rec = new_record("check", platform);
    println!("== this machine");
    print!("{}", platform_text(&rec.platform, false));
    let tcfg = TimerConfig {
        cpus: cpus.clone(),
        policy: Policy::Fifo { priority: 95 },
        interval: Nanos::from_ms(1),
        duration: half,
        clock: TimerClock::Nanosleep,
        threshold: Nanos::ZERO,
        max_spikes: DEFAULT_SPIKE_CAPACITY,
        lock_memory: true,
    };
    let ncfg = NoiseConfig {
        cpus,
        policy: Policy::Fifo { priority: 95 },
        duration: args.duration - half,
        threshold: None,
        max_spikes: DEFAULT_SPIKE_CAPACITY,
        lock_memory: true,
    };
    set_timer_config(&mut rec, &tcfg, "timer.");
    set_noise_config(&mut rec, &ncfg, "noise.");
    rec.set_config(
        "split",
        "sequential: timer for the first half, noise for the second",
    );
    println!("\n== wake-up latency: one SCHED_FIFO 95 thread per CPU waking every 1ms for {half}");
    let t = run_timer_probe(&tcfg, std::sync::Arc::clone(&stop), "timer")?;
    let mut elapsed = t.elapsed;
    t.fill(&mut rec, DEFAULT_SPIKE_CAPACITY);
    print!("{}", latency_table(&rec));
    if !interrupted(&stop) {
        println!(
            "\n== stolen time: one SCHED_FIFO 95 busy loop per CPU for {}",
            ncfg.duration
        );
        let n = run_noise_probe(&ncfg, std::sync::Arc::clone(&stop), "noise")?;
        elapsed += n.elapsed;
        n.fill(&mut rec, DEFAULT_SPIKE_CAPACITY);
        print!("{}", stolen_table(&rec));
    }
    finish_record(&mut rec, elapsed, args.duration);
    println!("\n== summary");
    print!("{}", summary(&rec));
    print_verdicts(&rec);
    if !rec.warnings.is_empty() {
        println!("\n== what may hurt, and what to change");
        print!("{}", warnings_text(&rec));
    }
    write_json(&rec, &args.json)
}
