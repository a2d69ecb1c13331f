//! One module per verb: an `Args` struct (clap) and a `run` function.

pub mod cause;
pub mod check;
pub mod forecast;
pub mod load;
pub mod noise;
pub mod report;
pub mod simulate;
pub mod sysinfo;
pub mod timer;
