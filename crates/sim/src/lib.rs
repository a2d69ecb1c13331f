//! Deterministic discrete-event simulator of a machine, its noise and its
//! tasks, on the same scheduler core as live reservations.
//!
//! `run(scenario, options)` gives the very record a live probe writes
//! (`source: simulated`), so every analysis and report works on both. Same
//! scenario text and seed ⇒ same bytes: the event queue breaks ties by
//! insertion order, randomness comes from [`rng::Rng`] (in `punctual_units`)
//! seeded per source, and the record carries a fixed start time.
pub mod build;
pub mod engine;
pub mod multi;
pub mod outcome;
pub mod output;
mod plain;
pub mod planmode;
mod queue;
/// The simulator's random numbers, from the house's one generator module.
pub mod rng {
    pub use punctual_units::rng::Rng;
}
pub mod scenario;

use std::sync::atomic::AtomicBool;

pub use build::{DEFAULT_DURATION, DEFAULT_SEED};
pub use engine::Sim;
pub use outcome::{
    Outcome, RunOptions, TimelineLog, TimelineSlice, TIMELINE_CAP, TIMELINE_WINDOW_DEFAULT,
};
pub use output::{record_refusal, summary, to_record, trace_json};
pub use scenario::{parse_set, sweep_values, Scenario, ScenarioError};

/// Builds and runs a scenario.
pub fn run(
    scn: &Scenario,
    opts: &RunOptions,
    stop: Option<&AtomicBool>,
) -> Result<Outcome, ScenarioError> {
    prepare(scn, opts)?.run(stop)
}

/// A scenario built into a machine, not yet run: the two halves are
/// apart so that the time of a run can be told from the time of building
/// it (bench/simso times SimSo's `run_model()` without its `Model(...)`,
/// and `simulate` prints both).
pub struct Prepared<'a> {
    kind: PreparedKind<'a>,
}

enum PreparedKind<'a> {
    /// One CPU, or a partitioned machine with its placement.
    Events(Box<Sim>, Option<outcome::MultiStats>),
    Global(Box<multi::GlobalSim>),
    /// Plan mode builds as it runs: all of it counts as the run.
    Plan(&'a Scenario, RunOptions),
}

impl Prepared<'_> {
    /// Runs to the end (or until `stop` is set). Only plan mode can still
    /// refuse here.
    pub fn run(self, stop: Option<&AtomicBool>) -> Result<Outcome, ScenarioError> {
        match self.kind {
            PreparedKind::Events(sim, multi) => {
                let mut o = sim.run(stop);
                if multi.is_some() {
                    o.multiprocessor = multi;
                }
                Ok(o)
            }
            PreparedKind::Global(sim) => sim.run(stop),
            PreparedKind::Plan(scn, opts) => planmode::run(scn, &opts, stop),
        }
    }
}

/// Checks a scenario and builds the machine it describes, ready to run:
/// every refusal a run can meet comes from here (plan mode's excepted).
pub fn prepare<'a>(scn: &'a Scenario, opts: &RunOptions) -> Result<Prepared<'a>, ScenarioError> {
    let f = &scn.spec;
    let abort = scn.abort_on_miss()?;
    let refuse_abort = |where_: &str| {
        let span = f.sim.on_miss.as_ref().map(|s| s.span()).unwrap_or(0..0);
        scn.error_at(
            span,
            format!("sim.on_miss = \"abort\" is not supported {where_}; use \"continue\""),
        )
    };
    // The first of the two tie rules asking for "ready" is named.
    let (ties_key, ties_field) = if scn.edf_ties_by_ready()? {
        ("edf_ties", &f.sim.edf_ties)
    } else {
        ("priority_ties", &f.sim.priority_ties)
    };
    let refuse_ties = |where_: &str| {
        let span = ties_field.as_ref().map(|s| s.span()).unwrap_or(0..0);
        scn.error_at(
            span,
            format!("sim.{ties_key} = \"ready\" is not supported {where_}; use \"task\""),
        )
    };
    let ties_by_ready = scn.edf_ties_by_ready()? || scn.priority_ties_by_ready()?;
    if let Some(mode) = multi::mode(scn)? {
        if ties_by_ready && mode == multi::Mode::Global {
            return Err(refuse_ties("with sim.multiprocessor = \"global\""));
        }
        return multi::prepare(scn, mode, opts);
    }
    match f.sim.scheduler.as_ref().map(|s| s.get_ref().as_str()) {
        None | Some("events") => {}
        Some("plan") if abort => return Err(refuse_abort("in plan mode")),
        Some("plan") if ties_by_ready => return Err(refuse_ties("in plan mode")),
        Some("plan") => {
            return Ok(Prepared {
                kind: PreparedKind::Plan(scn, opts.clone()),
            })
        }
        Some(other) => {
            let span = f.sim.scheduler.as_ref().map(|s| s.span()).unwrap_or(0..0);
            return Err(scn.error_at(
                span,
                format!("sim.scheduler = \"{other}\": expected \"events\" or \"plan\""),
            ));
        }
    }
    if let Some(c) = f.constraint.first() {
        return Err(scn.error_at(
            c.name.span(),
            "[[constraint]] needs [sim] scheduler = \"plan\"",
        ));
    }
    Ok(Prepared {
        kind: PreparedKind::Events(Box::new(Sim::new(scn, opts)?), None),
    })
}

/// Parses and runs scenario text; the common path of tests and sweeps.
pub fn run_text(
    file: &str,
    text: &str,
    overrides: &[(String, String)],
    opts: &RunOptions,
) -> Result<(Scenario, Outcome), ScenarioError> {
    let scn = Scenario::parse(file, text, overrides)?;
    let o = run(&scn, opts, None)?;
    Ok((scn, o))
}
