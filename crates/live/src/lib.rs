//! Linux measurement probes, platform facts and real-time scheduling control.
//!
//! Everything here that touches the kernel degrades instead of dying: a
//! refused real-time policy or memory lock becomes a [`punctual_record::Warning`]
//! and the run goes on, so an unprivileged user still gets numbers, with a
//! sentence saying what they then mean.

pub mod clock;
pub mod inject;
pub mod rt;
