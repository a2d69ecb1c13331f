//! The `punctual` command line as a library, so integration tests and
//! other front ends call the same code the binary does.

pub mod cmd;
pub mod error;
pub mod gates;
pub mod interrupt;
pub mod junit;
pub mod opts;
pub mod output;
pub mod probe;
pub mod stale;

pub use error::{CliError, CliResult};
