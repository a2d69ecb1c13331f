//! `punctual reserve` (being built; see the open issue).

use crate::error::{CliError, CliResult};

#[derive(clap::Args, Debug)]
pub struct Args {}

pub fn run(_args: Args) -> CliResult {
    Err(CliError::runtime("'reserve' is not built yet"))
}
