//! The restore journal reserve writes every system setting into before it
//! is changed: the one format of [`punctual_live::restore`], under the
//! names reserve has always used.

use std::io;
use std::path::Path;

pub use punctual_live::restore::{
    cleanup_stale, Action, CleanupReport, Restore as Journal, DEFAULT_DIR,
};

/// Opens this process's reserve journal in `dir`, as `reserve-<pid>.json`.
pub fn create(dir: &Path) -> io::Result<Journal> {
    Journal::create_named(dir, &format!("reserve-{}", std::process::id()))
}
