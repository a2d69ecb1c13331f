//! The report from the committed fixture records, one module per concern,
//! built as one test binary (one link instead of one per file). Run one
//! module with `cargo test -p punctual-report --test it MODULE::`.

mod common;

mod fixtures;
mod html;
