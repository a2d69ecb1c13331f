//! What the modules share.

use std::path::Path;
use std::sync::{Mutex, MutexGuard};

use punctual_trace::event::{load_formats, Decoder};
use punctual_trace::format::{HeaderEvent, HeaderPage};

/// One live test at a time across every module: the tests of this binary
/// run on parallel threads, and live runs share tracefs and CPU 1.
static LIVE: Mutex<()> = Mutex::new(());

/// Holds the live lock; a test that panicked while holding it does not
/// poison it for the others.
pub fn live() -> MutexGuard<'static, ()> {
    LIVE.lock().unwrap_or_else(|e| e.into_inner())
}

/// The ring-buffer headers and a decoder for `events`, from a captured
/// `events/` directory as the recorder reads them from tracefs.
pub fn captured_decoder(dir: &Path, events: &[&str]) -> (HeaderPage, HeaderEvent, Decoder) {
    let hp = HeaderPage::parse(&std::fs::read_to_string(dir.join("header_page")).unwrap()).unwrap();
    let he =
        HeaderEvent::parse(&std::fs::read_to_string(dir.join("header_event")).unwrap()).unwrap();
    let names: Vec<String> = events.iter().map(|s| s.to_string()).collect();
    let formats = load_formats(dir, &names);
    assert_eq!(formats.len(), events.len());
    (hp, he, Decoder::new(&formats).unwrap())
}
