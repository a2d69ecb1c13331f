//! One module per verb: an `Args` struct (clap) and a `run` function.

pub mod advise;
pub mod cause;
pub mod check;
pub mod compare;
pub mod forecast;
pub mod load;
pub mod monitor;
pub mod noise;
pub mod report;
pub mod reserve;
pub mod simulate;
pub mod sysinfo;
pub mod timer;
pub mod validate;
pub mod watch;
