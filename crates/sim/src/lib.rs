//! Deterministic discrete-event simulator of a machine, its noise and its tasks.
