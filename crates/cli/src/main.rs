//! `punctual`: thin command line over the library crates. Parse, validate,
//! call, print; no logic lives only here.

use clap::{Parser, Subcommand};

use punctual::cmd;

#[derive(Parser)]
#[command(
    name = "punctual",
    version,
    about = "Will my deadlines be met on this machine, how often not, why, and what fixes it.",
    long_about = None
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Survey this machine (sysinfo + timer + noise) and say what it found.
    Check(cmd::check::Args),
    /// Thread wake-up latency per CPU (the cyclictest measurement).
    Timer(cmd::timer::Args),
    /// Time stolen from a busy thread per CPU (the oslat/sysjitter measurement).
    Noise(cmd::noise::Args),
    /// Platform facts that every record carries, with warnings.
    Sysinfo(cmd::sysinfo::Args),
    /// Run a scenario in the deterministic simulator.
    Simulate(cmd::simulate::Args),
    /// Tails, worst case per hour/day/week, time to buffer underrun, verdicts.
    Forecast(cmd::forecast::Args),
    /// Run a bounded stress load on its own and report what it achieved.
    Load(cmd::load::Args),
    /// Run a probe with the tracefs flight recorder and name each spike's cause.
    Cause(cmd::cause::Args),
    /// Which fix buys the most: fixes ranked by the MTTF they are predicted to give.
    Advise(cmd::advise::Args),
    /// Run real threads under CPU reservations (SCHED_DEADLINE, making up stolen time or not) and time constraints.
    Reserve(cmd::reserve::Args),
    /// Run a real buffered consumer and compare its underruns with the forecast.
    Validate(cmd::validate::Args),
    /// Long-running low-rate probe serving rolling worst cases on /metrics.
    Monitor(cmd::monitor::Args),
    /// Watch a running application's threads: wake-up latency, stolen time, misses, causes.
    Watch(cmd::watch::Args),
    /// Did latency regress? A statistical test of two records' quantiles.
    Compare(cmd::compare::Args),
    /// Turn records into HTML, CSV, histograms, HdrHistogram logs, Prometheus, Perfetto.
    Report(cmd::report::Args),
}

fn main() {
    punctual::output::quiet_broken_pipe();
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            // clap's own errors are usage errors: status 2, as for our own.
            let code = if e.use_stderr() { 2 } else { 0 };
            let _ = e.print();
            std::process::exit(code);
        }
    };
    // `reserve` replays stale journals itself, to repair the root domains
    // after a dead run's partition comes down; `cause --cleanup` reports
    // what it replays.
    match &cli.command {
        Command::Reserve(_) => {}
        Command::Cause(a) if a.cleanup => {}
        _ => punctual::stale::restore_at_start(),
    }
    let argv: Vec<std::ffi::OsString> = std::env::args_os().collect();
    if punctual::output::json_to_stdout(&argv) {
        punctual::output::route_stdout_to_stderr();
    }
    // A closed standard output (`| head`) panics inside print!; the panic
    // unwinds through the verb (its restore guards run) and ends here.
    let result = match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run(cli.command))) {
        Ok(r) => r,
        Err(payload) => {
            if punctual::output::is_broken_pipe_panic(punctual::output::panic_text(&*payload)) {
                std::process::exit(0);
            }
            std::panic::resume_unwind(payload);
        }
    };
    if let Err(e) = result {
        eprintln!("punctual: {e}");
        std::process::exit(e.exit_code());
    }
}

fn run(command: Command) -> punctual::error::CliResult {
    match command {
        Command::Check(a) => cmd::check::run(a),
        Command::Timer(a) => cmd::timer::run(a),
        Command::Noise(a) => cmd::noise::run(a),
        Command::Sysinfo(a) => cmd::sysinfo::run(a),
        Command::Simulate(a) => cmd::simulate::run(a),
        Command::Forecast(a) => cmd::forecast::run(a),
        Command::Advise(a) => cmd::advise::run(a),
        Command::Report(a) => cmd::report::run(a),
        Command::Compare(a) => cmd::compare::run(a),
        Command::Load(a) => cmd::load::run(a),
        Command::Cause(a) => cmd::cause::run(a),
        Command::Reserve(a) => cmd::reserve::run(a),
        Command::Validate(a) => cmd::validate::run(a),
        Command::Monitor(a) => cmd::monitor::run(a),
        Command::Watch(a) => cmd::watch::run(a),
    }
}
