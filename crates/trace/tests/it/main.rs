//! The flight recorder end to end, on captured traces and live, one module
//! per concern, built as one test binary (one link instead of one per
//! file). Run one module with `cargo test -p punctual-trace --test it
//! MODULE::`.

mod common;

mod captured;
mod live;
mod rawdat;
mod watch_captured;
