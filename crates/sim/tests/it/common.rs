//! What the modules share.

use punctual_sim::{run_text, RunOptions, ScenarioError};

/// The error a scenario the simulator must refuse gives; panics, showing
/// the text, if it was accepted.
pub fn refuse(text: &str) -> ScenarioError {
    match run_text("t.toml", text, &[], &RunOptions::default()) {
        Ok(_) => panic!("accepted:\n{text}"),
        Err(e) => e,
    }
}

/// The (line, column) of the first occurrence of `needle` in `text`.
fn at(text: &str, needle: &str) -> (usize, usize) {
    let off = text.find(needle).expect("needle");
    let line = text[..off].matches('\n').count() + 1;
    let col = off - text[..off].rfind('\n').map_or(0, |p| p + 1) + 1;
    (line, col)
}

/// A refusal must point at the field that caused it, so a user's editor
/// can jump there.
pub fn assert_at(e: &ScenarioError, text: &str, needle: &str) {
    assert_eq!((e.line, e.column), at(text, needle), "{e}");
    assert!(e.to_string().starts_with("t.toml:"), "{e}");
}
