//! `punctual monitor`'s start-up lines on standard error: the first says
//! what it probes, where it reports, its state and the C-states it holds
//! (whoever starts the monitor may read just that line, for the address,
//! and close the pipe); then a warning per C-state it could not hold, and
//! a note when `/metrics` is reachable from other machines.

use std::net::SocketAddr;
use std::path::Path;

/// Where a monitor's state comes from.
pub enum StateFile<'a> {
    None,
    /// A new state, to be written here.
    New(&'a Path),
    /// A state restored from here, the `restarts`-th time.
    Restored(&'a Path, u64),
}

/// What the monitor is about to do, as it tells it at start.
pub struct Start<'a> {
    pub cpus: &'a [u32],
    pub rate_hz: u32,
    pub address: Option<SocketAddr>,
    pub textfile: Option<&'a Path>,
    pub state: StateFile<'a>,
    /// What it holds (`punctual_live::cstate::CStateHold::config`).
    pub c_states: &'a serde_json::Value,
    /// What could not be held, one sentence each.
    pub warnings: &'a [String],
}

/// The start-up lines.
pub fn start(s: &Start) -> String {
    let mut out = format!(
        "monitor: CPUs {} at {} Hz{}{}{}, {}\n",
        s.cpus
            .iter()
            .map(|c| c.to_string())
            .collect::<Vec<_>>()
            .join(","),
        s.rate_hz,
        s.address
            .map(|ad| format!(", serving http://{ad}/metrics"))
            .unwrap_or_default(),
        s.textfile
            .map(|p| format!(", textfile {}", p.display()))
            .unwrap_or_default(),
        match s.state {
            StateFile::Restored(p, restarts) => {
                format!(", state {} restored (restart {restarts})", p.display())
            }
            StateFile::New(p) => format!(", new state {}", p.display()),
            StateFile::None => String::new(),
        },
        super::probe::c_states_text(s.c_states).trim_end()
    );
    for w in s.warnings {
        out.push_str(&format!("monitor: warning: {w}\n"));
    }
    if let Some(ad) = s.address.filter(|ad| !ad.ip().is_loopback()) {
        out.push_str(&format!(
            "monitor: note: {ad} is reachable from other machines; /metrics has no authentication\n"
        ));
    }
    out
}
