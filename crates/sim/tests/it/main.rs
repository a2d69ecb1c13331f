//! The simulator end to end, one module per concern, built as one test
//! binary (one link instead of one per file). Run one module with
//! `cargo test -p punctual-sim --test it MODULE::`.

mod common;

mod correctness;
mod determinism;
mod edf_ties;
mod fuzz;
mod multiprocessor;
mod on_miss;
mod scenarios;
mod tie_order;
mod timeline;
