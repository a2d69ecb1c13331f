//! Rialto-style precomputed scheduling plan and time constraints (seed 001).
