//! `punctual validate` (being built; see the open issue).

use crate::error::{CliError, CliResult};

#[derive(clap::Args, Debug)]
pub struct Args {}

pub fn run(_args: Args) -> CliResult {
    Err(CliError::runtime("'validate' is not built yet"))
}
