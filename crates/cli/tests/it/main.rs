//! The `punctual` command line end to end, one module per verb or
//! concern, built as one test binary (one link instead of one per file).
//! Run one module with `cargo test -p punctual --test it MODULE::`.

mod common;

mod advise;
mod cause;
mod check;
mod compare;
mod edges;
mod evidence;
mod field;
mod forecast;
mod golden;
mod help;
mod kprobe;
mod load;
mod measure;
mod monitor;
mod mttf_chart;
mod readme;
mod remedy;
mod report;
mod reserve;
mod restore;
mod simso;
mod simulate;
mod simulate_from;
mod watch;
