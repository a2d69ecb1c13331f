//! Pure analyses over records: tails, extrapolation, MTTF, buffer sizing, schedulability.
