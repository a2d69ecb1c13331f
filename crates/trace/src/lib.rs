//! tracefs flight recorder, binary ring-buffer parser and cause attribution.
//!
//! Layers, each usable alone: [`format`] reads the kernel's self-description
//! of its trace records, [`ring`] parses the binary per-CPU pages of
//! `trace_pipe_raw`, [`event`] turns records into typed events,
//! [`attribute`] is the per-CPU state machine that names what ran when,
//! [`tracedat`] keeps the newest pages raw and writes them as trace-cmd's
//! `trace.dat`,
//! [`tracefs`] owns the private instance (and puts every knob back, even
//! after SIGKILL, through a journal), and [`recorder`] ties them together
//! for a probe: start, run the probe, stop, attribute the record.

pub mod attribute;
pub mod event;
pub mod format;
pub mod ktracer;
pub mod recorder;
pub mod ring;
pub mod rings;
pub mod tracedat;
pub mod tracefs;
pub mod watch;
pub mod watchlog;
