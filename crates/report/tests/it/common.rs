//! What the modules share.

use std::path::PathBuf;

/// The committed fixture records: `fixtures` writes and checks them,
/// the other modules render them.
pub fn fixtures_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}
