//! Linux measurement probes, platform facts and real-time scheduling control.
