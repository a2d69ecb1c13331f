//! A small seeded generator for the bootstrap and the tests.
//!
//! A forecast must give the same bytes for the same record, so the
//! bootstrap uses a fixed, recorded seed and SplitMix64, whose output is
//! fully specified, rather than an OS-seeded crate whose stream may change
//! between versions. It is the house's one generator module,
//! [`punctual_units::rng`], which the simulator draws from too.

pub use punctual_units::rng::SplitMix64;
