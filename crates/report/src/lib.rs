//! Output formats for records: terminal, JSON, CSV, HTML/SVG, histograms, HdrHistogram logs, Prometheus, Perfetto.

pub mod hist;
