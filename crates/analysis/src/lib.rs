//! Pure analyses over records: tails, extrapolation, MTTF, buffer sizing,
//! schedulability, and verdicts for named workload profiles.
//!
//! Everything here reads a [`punctual_record::Record`] (or one of its
//! series) and returns data; nothing measures, prints to a terminal or
//! touches the file system, so a forecast made from a simulation and one
//! made from a measurement go through exactly the same code. The method,
//! formulas and assumptions are written out in `docs/forecast.md`.

pub mod advise;
pub mod blocklen;
pub mod buffer;
pub mod check;
pub mod compare;
pub mod forecast;
pub mod gate;
pub mod gpd;
pub mod model;
pub mod periodic;
pub mod plan;
pub mod profiles;
pub mod queue;
pub mod rate;
pub mod rng;
pub mod sched;
pub mod simfrom;
pub mod tail;
pub mod verdict;

pub use forecast::{Estimate, ProbEstimate, TailModel};
pub use model::{Buffering, Compute};
pub use profiles::Profile;
pub use punctual_record::{VerdictBasis, VerdictEntry, VerdictState};
pub use verdict::{verdicts, Verdict};

/// Seconds in the spans that the worst-case table reports.
pub const HOUR_S: f64 = 3600.0;
pub const DAY_S: f64 = 86_400.0;
pub const WEEK_S: f64 = 604_800.0;
