//! A simulation's own section, `extra["sim"]`: what the simulator counted
//! that the common fields have no place for (jobs, preemptions, streams,
//! constraint answers, the multiprocessor's migrations).
//!
//! One type is both what `punctual-sim` writes and what the text report
//! reads back, so the two cannot drift apart. Maps are keyed by name (the
//! JSON keeps the same sorted keys it always had); the order the run
//! printed them in is the scenario's, which the record carries in
//! `config.scenario`.

use std::collections::BTreeMap;

use punctual_units::Nanos;
use serde::{Deserialize, Serialize};

/// `extra["sim"]`. Every field has a default so that records written
/// before a field existed still read.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct SimSection {
    /// Events the event loop handled.
    pub events: u64,
    pub scheduler_picks: u64,
    pub tasks: BTreeMap<String, SimTask>,
    pub streams: BTreeMap<String, SimStream>,
    /// Slices beyond `--trace-cap`, counted instead of kept.
    pub trace_slices_dropped: u64,
    /// Interrupt work lost to a full interrupt-level queue, by source; only
    /// when some was, so records of runs the CPU could serve are unchanged.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub interrupt_work_dropped: BTreeMap<String, u64>,
    /// Only under `sim.multiprocessor`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub multiprocessor: Option<SimMultiprocessor>,
    /// The answers to the scenario's `[[constraint]]` queries, when it has any.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub constraints: BTreeMap<String, SimConstraint>,
    /// Only when the record left tasks' own data out to stay under its
    /// size bound, so records that fit are unchanged.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub folded: Option<SimFolded>,
}

/// How a record too large for its bound was folded: which tasks kept what,
/// and the totals over every task, so a reader still has them.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct SimFolded {
    /// The bound, in bytes of the record as written (indented JSON).
    pub bytes_max: u64,
    /// The order tasks were kept in, worst first.
    pub order: String,
    /// Tasks in the run.
    pub tasks: u64,
    /// Tasks with their own series and `extra.summary` keys.
    pub detailed: u64,
    /// Tasks with only their counts in `tasks` (`response_max_ns` among them).
    pub counted: u64,
    /// Tasks in none of the above: only in the totals here and in the
    /// `series` merged over every task.
    pub totals_only: u64,
    /// The prefix of the series merged over every task (`<prefix>.latency`,
    /// `.interval`, `.response`) and of their `extra.summary` keys.
    pub all: String,
    /// Sums over every task.
    pub jobs: u64,
    pub deadline_misses: u64,
    pub backlog_lost: u64,
    pub preemptions: u64,
    /// The other parts that grow with the scenario (streams, constraints,
    /// noise sources, CPUs' gap series and timelines, warnings), only
    /// those the record keeps some of, by name.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub parts: BTreeMap<String, FoldedPart>,
}

/// A part of a folded record that keeps only its worst members.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct FoldedPart {
    /// Members in the run (streams, constraints, sources, CPUs, bins or
    /// warnings).
    pub total: u64,
    /// Members the record keeps.
    pub kept: u64,
    /// Which were kept, worst first.
    pub order: String,
    /// Sums over every member, kept or not (`lost`, `denied`, …).
    pub sums: BTreeMap<String, u64>,
}

/// One simulated task's counts.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct SimTask {
    pub releases: u64,
    pub jobs: u64,
    pub deadline_misses: u64,
    pub preemptions: u64,
    /// Releases dropped because the task's backlog was full.
    pub backlog_lost: u64,
    /// The reservation's kind (`rez`, `rez-c`, `plan`, …); `null` for an
    /// unreserved task.
    pub reservation: Option<String>,
    /// Jobs aborted at their deadline; only under `sim.on_miss = "abort"`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub aborted: Option<u64>,
    /// Where partitioned scheduling placed the task; a global task has none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu: Option<u32>,
    /// Preempted jobs resumed on another CPU (multiprocessor runs only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub migrations: Option<u64>,
    /// Jobs started on another CPU than the task last ran on
    /// (multiprocessor runs only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub task_migrations: Option<u64>,
    /// The task's longest response: only for a task a folded record keeps
    /// without its series, where it is the one figure of how late it ran.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub response_max_ns: Option<Nanos>,
}

/// One simulated stream's delivery.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct SimStream {
    pub arrived: u64,
    pub delivered: u64,
    pub lost: u64,
    pub capacity: u64,
    pub max_fill: u64,
    /// Time the sender was paused by flow control.
    pub paused_ns: Nanos,
}

/// How a multiprocessor run scheduled its task set.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct SimMultiprocessor {
    /// `global` or `partitioned`, with the per-CPU rule.
    pub policy: String,
    /// The fit heuristic of partitioned scheduling; `null` for global.
    pub placement: Option<String>,
    pub cpus: u32,
    /// Sums over the tasks.
    pub migrations: u64,
    pub task_migrations: u64,
}

/// The answer to one `[[constraint]]` query.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct SimConstraint {
    pub asked_at_ns: Nanos,
    pub window_start_ns: Nanos,
    pub deadline_ns: Nanos,
    pub estimate_ns: Nanos,
    pub granted: bool,
    pub denied_because: Option<String>,
    pub received_ns: Nanos,
    pub completed_at_ns: Option<Nanos>,
    pub met_deadline: bool,
}

/// The scenario text a simulated record keeps in `config`: `scenario` as
/// written, or `scenario_deflated` (base64 of a zlib stream) for a text
/// too long to keep as it is. `None` when the record kept only the
/// text's hash (`scenario_fnv1a64`), or none.
pub fn scenario_text(config: &BTreeMap<String, serde_json::Value>) -> Option<String> {
    if let Some(t) = config.get("scenario").and_then(|v| v.as_str()) {
        return Some(t.to_string());
    }
    let packed = config.get("scenario_deflated")?.as_str()?;
    unpack_text(packed).ok()
}

/// A text deflated (zlib) and written in base64, as the record keeps
/// HdrHistograms.
pub fn pack_text(text: &str) -> String {
    use base64::Engine as _;
    use std::io::Write as _;
    let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::best());
    // Writing into a Vec cannot fail.
    z.write_all(text.as_bytes()).expect("in memory");
    let bytes = z.finish().expect("in memory");
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// The text [`pack_text`] packed.
pub fn unpack_text(packed: &str) -> Result<String, String> {
    use base64::Engine as _;
    use std::io::Read as _;
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(packed)
        .map_err(|e| e.to_string())?;
    let mut text = String::new();
    flate2::read::ZlibDecoder::new(&bytes[..])
        .read_to_string(&mut text)
        .map_err(|e| e.to_string())?;
    Ok(text)
}

/// FNV-1a, 64 bits, in hex: names a scenario text too large to keep even
/// deflated, so two records can be told to come from the same text. Not a
/// cryptographic hash.
pub fn fnv1a64(text: &str) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in text.bytes() {
        h ^= b as u64;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    format!("{h:016x}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_packed_text_reads_back_and_a_plain_one_wins() {
        let text = "[[task]]\nname = \"a\"\n".repeat(1000);
        let packed = pack_text(&text);
        assert!(packed.len() < text.len() / 10, "{}", packed.len());
        let mut config = BTreeMap::new();
        config.insert("scenario_deflated".to_string(), packed.into());
        assert_eq!(scenario_text(&config).as_deref(), Some(text.as_str()));
        config.insert("scenario".to_string(), "plain".into());
        assert_eq!(scenario_text(&config).as_deref(), Some("plain"));
        config.clear();
        config.insert("scenario_deflated".to_string(), "not base64!".into());
        assert_eq!(scenario_text(&config), None);
    }

    #[test]
    fn fnv1a64_is_the_published_function() {
        // The reference values of the 64-bit FNV-1a test suite.
        assert_eq!(fnv1a64(""), "cbf29ce484222325");
        assert_eq!(fnv1a64("a"), "af63dc4c8601ec8c");
    }
}
