//! Output formats for records: HTML with inline SVG plots, JSON, CSV,
//! cyclictest-compatible histograms, HdrHistogram interval logs,
//! Prometheus text, Perfetto (Chrome trace-event) JSON, lossless merging,
//! and the rolling state behind `punctual monitor`.
//!
//! One module per format. Every renderer takes [`Input`]s (a record and the
//! label it is shown under) and returns bytes; writing them (atomically) is
//! the caller's business, so a failed render never leaves half a file.

pub mod csv;
pub mod facts;
pub mod hist;
pub mod hlog;
pub mod html;
pub mod json;
pub mod merge;
pub mod monitor;
pub mod perfetto;
pub mod prometheus;
pub mod svg;
pub mod tail;
pub mod text;
mod xml;

use punctual_record::Record;

/// A record and the short label (usually the file name) it is shown under
/// when several are compared.
#[derive(Clone, Debug)]
pub struct Input {
    pub label: String,
    pub record: Record,
}

impl Input {
    pub fn new(label: impl Into<String>, record: Record) -> Self {
        Input {
            label: label.into(),
            record,
        }
    }
}

/// Why a report could not be produced.
#[derive(Debug, PartialEq)]
pub enum ReportError {
    /// The input cannot give what was asked (e.g. a histogram format for a
    /// record with no series): the user's to fix.
    Input(String),
}

impl std::fmt::Display for ReportError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReportError::Input(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for ReportError {}
