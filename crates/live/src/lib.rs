//! Linux measurement probes, platform facts and real-time scheduling control.
//!
//! Everything here that touches the kernel degrades instead of dying: a
//! refused real-time policy or memory lock becomes a [`punctual_record::Warning`]
//! and the run goes on, so an unprivileged user still gets numbers, with a
//! sentence saying what they then mean.
//!
//! The probes separate pure sample processing ([`timer::TimerProcessor`],
//! [`noise::GapProcessor`], [`noise::poll`]) from the OS ([`timer::WakeSource`],
//! [`noise::Counter`], [`setup::ThreadSetup`]), so the whole pipeline is
//! tested on replayed or scripted input without root.

pub mod clock;
pub mod cstate;
pub mod inject;
pub mod noise;
pub mod procstat;
pub mod restore;
pub mod rt;
pub mod samples;
pub mod setup;
pub mod spikes;
pub mod sysinfo;
pub mod timer;
