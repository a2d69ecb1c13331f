//! Runs one scenario with only the simulator crate linked and prints the
//! event count and wall time: for profiling the event loop (`perf record`,
//! `valgrind --tool=callgrind`) without building the whole CLI.
//!
//! `cargo run --release -p punctual-sim --example simrun -- SCENARIO.toml [DURATION]`
use std::time::Instant;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let Some(path) = args.get(1) else {
        eprintln!("usage: simrun SCENARIO.toml [DURATION]");
        std::process::exit(2);
    };
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| {
        eprintln!("simrun: {path}: {e}");
        std::process::exit(2);
    });
    let duration = args.get(2).map(|d| {
        punctual_units::parse_duration(d).unwrap_or_else(|e| {
            eprintln!("simrun: duration '{d}': {e}");
            std::process::exit(2);
        })
    });
    let opts = punctual_sim::RunOptions {
        duration,
        ..Default::default()
    };
    let t0 = Instant::now();
    match punctual_sim::run_text(path, &text, &[], &opts) {
        Ok((_, o)) => {
            let s = t0.elapsed().as_secs_f64();
            println!(
                "{} events in {:.3} s ({:.1} M events/s), {} picks",
                o.events,
                s,
                o.events as f64 / s.max(1e-9) / 1e6,
                o.picks
            );
        }
        Err(e) => {
            eprintln!("simrun: {e}");
            std::process::exit(2);
        }
    }
}
