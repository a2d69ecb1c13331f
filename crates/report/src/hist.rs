//! cyclictest-compatible histogram output (`--hist`).
