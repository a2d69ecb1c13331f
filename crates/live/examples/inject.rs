//! Runs the noisy neighbor (SCHED_FIFO 99, 1 ms spin every 10.37 ms) on a
//! CPU for some seconds, for benchmarks that put a peer tool under the same
//! known noise. usage: inject CPU SECONDS [PERIOD_US SPIN_US]
use punctual_live::inject::{NeighborConfig, NoisyNeighbor};

fn main() {
    let a: Vec<String> = std::env::args().collect();
    let cpu: u32 = a.get(1).and_then(|s| s.parse().ok()).unwrap_or(1);
    let secs: u64 = a.get(2).and_then(|s| s.parse().ok()).unwrap_or(10);
    let d = NeighborConfig::default();
    let us = |i: usize, or: punctual_units::Nanos| {
        a.get(i)
            .and_then(|s| s.parse().ok())
            .map(punctual_units::Nanos::from_us)
            .unwrap_or(or)
    };
    match NoisyNeighbor::start(NeighborConfig {
        cpu,
        period: us(3, d.period),
        spin: us(4, d.spin),
        ..d
    }) {
        Ok(n) => {
            std::thread::sleep(std::time::Duration::from_secs(secs));
            let r = n.stop();
            eprintln!(
                "injector: {} bursts, {:.3}% of {:.1}s spun",
                r.bursts,
                100.0 * r.spun.0 as f64 / r.ran_for.0.max(1) as f64,
                r.ran_for.as_secs_f64()
            );
        }
        Err(e) => {
            eprintln!("injector: {e}");
            std::process::exit(1);
        }
    }
}
