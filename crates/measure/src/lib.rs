//! One runner for the live probes, below the command line (rtla's
//! `run_tool`): a [`Session`] takes a [`ProbeRequest`] and does, in one
//! place, what every measuring verb needs: a record with the platform and
//! its warnings, the probe's configuration, the `--load` worker, the
//! tracefs flight recorder, the probe itself, the loads' figures,
//! attribution, and the interrupted-run warning.
//!
//! The verbs (`timer`, `noise`, `check`, `cause`) only turn their flags
//! into a request and render the record that comes back; `check`'s
//! request ([`check`]) is the two probes in halves, in rounds until its
//! verdicts are decided.
//!
//! The two probes that do not make a record of their own live here too:
//! `validate`'s real buffered consumer ([`consumer`], run in its rounds
//! beside the timer and noise probes by [`validation`]) and `monitor`'s
//! week-long low-rate loop with its `/metrics` server ([`monitor`]).

pub mod again;
pub mod attach;
pub mod check;
pub mod config;
pub mod consumer;
pub mod kernel;
pub mod loads;
pub mod merge;
pub mod monitor;
pub mod probe;
pub mod session;
pub mod validation;
pub mod watch;

pub use kernel::{KernelNoise, KernelTimer};
pub use probe::{Noise, Outcome, Probe, Timer};
pub use session::{Evidence, Measured, ProbeRequest, Quiet, Runner, Session, Tracing};

use std::fmt;

/// Why a measurement could not be made. The two kinds map onto the command
/// line's exit statuses: bad input (2) and a run that could not be carried
/// out (1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MeasureError {
    /// The request cannot be met as given (a load spec that cannot be used
    /// here, an option out of range); the message names the value.
    Usage(String),
    /// The run could not be carried out (a thread that would not start).
    Runtime(String),
}

impl fmt::Display for MeasureError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MeasureError::Usage(m) | MeasureError::Runtime(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for MeasureError {}
