//! tracefs flight recorder, binary ring-buffer parser and cause attribution.
