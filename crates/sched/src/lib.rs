//! Pure scheduler core shared by the simulator and live reservations.
//!
//! No I/O, no clock, integer nanoseconds: the caller feeds events (release,
//! block, lock, stolen interval) and asks [`Scheduler::pick`] who runs until
//! when. The simulator and the live `reserve` verb drive this same code, so
//! a policy behaves identically in both (Jones's Rialto talk: "exactly the same
//! sources" in kernel and simulator).
pub mod feedback;
pub mod global;
pub mod placement;
pub mod plan;
pub mod scheduler;

pub use feedback::FeedbackController;
pub use scheduler::{
    AdmissionError, Class, Decision, LockId, LockProtocol, PeriodStat, Reservation, RezKind,
    SchedConfig, Scheduler, StolenInterval, ThreadId,
};
