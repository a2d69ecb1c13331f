//! The two ways a command fails.
//!
//! Bad input (a flag, a scenario file, a record) is the user's to fix and
//! gets exit status 2 with one sentence naming the value. Anything else
//! that stops a run (a failed syscall mid-run, a full disk) is status 1.

use std::fmt;

#[derive(Debug)]
pub enum CliError {
    /// Exit status 2: the input is wrong; the message names the value.
    Usage(String),
    /// Exit status 1: the run could not be carried out.
    Runtime(String),
    /// Exit status 1: the run worked and a gate it checks failed (a
    /// latency regression): the answer a CI job stops on.
    Gate(String),
}

impl CliError {
    pub fn usage(msg: impl Into<String>) -> Self {
        CliError::Usage(msg.into())
    }
    pub fn runtime(msg: impl Into<String>) -> Self {
        CliError::Runtime(msg.into())
    }
    pub fn gate(msg: impl Into<String>) -> Self {
        CliError::Gate(msg.into())
    }
    pub fn exit_code(&self) -> i32 {
        match self {
            CliError::Usage(_) => 2,
            CliError::Runtime(_) | CliError::Gate(_) => 1,
        }
    }
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CliError::Usage(m) | CliError::Runtime(m) | CliError::Gate(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for CliError {}

impl From<punctual_measure::MeasureError> for CliError {
    fn from(e: punctual_measure::MeasureError) -> Self {
        match e {
            punctual_measure::MeasureError::Usage(m) => CliError::Usage(m),
            punctual_measure::MeasureError::Runtime(m) => CliError::Runtime(m),
        }
    }
}

pub type CliResult<T = ()> = Result<T, CliError>;
