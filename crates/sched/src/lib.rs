//! Pure scheduler core shared by the simulator and live reservations.
pub mod plan;
