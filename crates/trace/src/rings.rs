//! A private instance made ready to record: trace clock, ring size, the
//! wanted events, the page and event headers, and each CPU's binary ring
//! opened for non-blocking reads. Both consumers of the rings — the cause
//! flight recorder and reserve's per-period accounting of an
//! uninstrumented command — start the same way and read pages the same
//! way; only what they do with the decoded events differs.

use std::fs::File;
use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;

use crate::event::{load_formats, Decoder};
use crate::format::{HeaderEvent, HeaderPage};
use crate::ring::{parse_page, Page, RingError};
use crate::tracefs::{Instance, NoTracing};

/// An instance with its events enabled and rings open; tracing is still
/// off (the caller switches it on once its reader is ready).
pub struct Rings {
    /// (CPU, its `trace_pipe_raw`), in the order asked for. Declared
    /// before `instance`: the open rings must be closed before the
    /// instance directory can be removed.
    pub files: Vec<(u32, File)>,
    pub decoder: Decoder,
    pub header_page: HeaderPage,
    pub header_event: HeaderEvent,
    /// Events enabled, and wanted events this kernel does not have.
    pub enabled: Vec<String>,
    pub missing: Vec<String>,
    pub instance: Instance,
}

impl Rings {
    /// Prepares `instance` on `cpus` with rings of `buffer_kb` per CPU and
    /// the `wanted` events; fails (dropping, hence removing, the instance)
    /// with the one sentence the user sees when any step is refused or an
    /// event in `required` is missing.
    ///
    /// `filters` pairs an event-name prefix with a filter expression: a
    /// matching event gets its filter before it is enabled, and an event
    /// whose filter the kernel refuses is not enabled at all (it is listed
    /// as missing), never recorded unfiltered.
    pub fn open(
        mut instance: Instance,
        cpus: &[u32],
        buffer_kb: u64,
        wanted: Vec<String>,
        required: &[&str],
        filters: &[(&str, &str)],
    ) -> Result<Rings, NoTracing> {
        let fail = |what: &str, e: &dyn std::fmt::Display| NoTracing(format!("{what}: {e}"));
        instance
            .set("trace_clock", "mono")
            .map_err(|e| fail("cannot set the trace clock to mono", &e))?;
        instance
            .set("buffer_size_kb", &buffer_kb.to_string())
            .map_err(|e| fail("cannot size the trace buffer", &e))?;
        // Overwrite mode is the default; losses are then seen in the page
        // headers, so they are counted rather than stalling the writer.
        let events_dir = instance.root().join("events");
        let header_page = crate::tracefs::read_file(&events_dir.join("header_page"))
            .map_err(|e| fail("cannot read events/header_page", &e))
            .and_then(|t| HeaderPage::parse(&t).map_err(|e| fail("events/header_page", &e)))?;
        let header_event = crate::tracefs::read_file(&events_dir.join("header_event"))
            .map_err(|e| fail("cannot read events/header_event", &e))
            .and_then(|t| HeaderEvent::parse(&t).map_err(|e| fail("events/header_event", &e)))?;
        let (mut enabled, mut missing) = (Vec::new(), Vec::new());
        for e in wanted {
            let filtered = filters
                .iter()
                .filter(|(prefix, _)| e.starts_with(prefix))
                .all(|(_, f)| instance.set(&format!("events/{e}/filter"), f).is_ok());
            if filtered && instance.enable_event(&e) {
                enabled.push(e);
            } else {
                missing.push(e);
            }
        }
        for need in required {
            if !enabled.iter().any(|e| e == need) {
                let short = need.rsplit('/').next().unwrap_or(need);
                return Err(NoTracing(format!("the {short} event is not available")));
            }
        }
        let decoder = Decoder::new(&load_formats(&events_dir, &enabled))
            .map_err(|e| fail("cannot use the event formats", &e))?;
        let mut files = Vec::new();
        for &c in cpus {
            let p = instance
                .path()
                .join(format!("per_cpu/cpu{c}/trace_pipe_raw"));
            let f = std::fs::OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_NONBLOCK)
                .open(&p)
                .map_err(|e| fail(&format!("cannot open {}", p.display()), &e))?;
            files.push((c, f));
        }
        Ok(Rings {
            instance,
            files,
            decoder,
            header_page,
            header_event,
            enabled,
            missing,
        })
    }
}

/// Reads one CPU's ring until it is empty, handing each page (or the
/// reason it could not be parsed) to `on_page`. `buf` is one page long.
pub fn drain_ring(
    f: &mut File,
    buf: &mut [u8],
    hp: &HeaderPage,
    he: &HeaderEvent,
    mut on_page: impl FnMut(Result<Page<'_>, RingError>),
) {
    drain_ring_raw(f, buf, hp, he, |_, page| on_page(page))
}

/// [`drain_ring`], handing `on_page` the page's bytes as read beside what
/// they parse to (the flight recorder keeps the newest ones raw).
pub fn drain_ring_raw(
    f: &mut File,
    buf: &mut [u8],
    hp: &HeaderPage,
    he: &HeaderEvent,
    mut on_page: impl FnMut(&[u8], Result<Page<'_>, RingError>),
) {
    loop {
        let n = match f.read(buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            // WouldBlock: the ring is empty for now; anything else ends
            // this drain (the next one tries again).
            Err(_) => break,
        };
        on_page(&buf[..n], parse_page(&buf[..n], hp, he));
    }
}
