//! `--samples FILE`: every sample of a run, raw, for people who
//! post-process (cyclictest `-v`, jitterdebugger's capture).
//!
//! Each probe thread keeps its samples in a buffer allocated before it
//! starts measuring (so the measured path never allocates), bounded by its
//! share of `--samples-max`; samples past the bound are counted, not kept.
//! At the end the buffers are merged in time order and written in the
//! binary format of docs/record-format.md ("Raw samples"): a 32-byte
//! header, then 24 bytes per sample, all little-endian.

use std::io::{self, Read, Write};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use punctual_units::Nanos;

/// The file's first 8 bytes.
pub const MAGIC: &[u8; 8] = b"PUNCSMP1";
/// Format version after the magic.
pub const VERSION: u32 = 1;
/// Bytes per sample.
pub const SAMPLE_BYTES: usize = 24;
/// Bytes of the header.
pub const HEADER_BYTES: usize = 32;

/// What the samples are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SampleKind {
    /// Wake-up latency of the timer probe: `value` is how late, `at` when
    /// the thread ran.
    Latency = 1,
    /// A stolen gap of the noise probe: `value` its length, `at` its start.
    Gap = 2,
}

impl SampleKind {
    fn from_u32(v: u32) -> Option<SampleKind> {
        match v {
            1 => Some(SampleKind::Latency),
            2 => Some(SampleKind::Gap),
            _ => None,
        }
    }
}

/// One sample.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sample {
    /// On the run's time zero.
    pub at: Nanos,
    pub value: Nanos,
    pub cpu: u32,
}

/// One thread's samples, in a buffer allocated before it measures.
#[derive(Debug, Default)]
pub struct SampleBuf {
    pub samples: Vec<Sample>,
    pub dropped: u64,
}

impl SampleBuf {
    /// A buffer for up to `cap` samples (none when there is no sink).
    pub fn for_sink(sink: Option<&SampleSink>, cpus: usize) -> SampleBuf {
        SampleBuf {
            samples: Vec::with_capacity(sink.map_or(0, |s| s.share(cpus))),
            dropped: 0,
        }
    }

    /// Keeps the sample if there is room (never allocates).
    #[inline]
    pub fn push(&mut self, s: Sample) {
        if self.samples.len() < self.samples.capacity() {
            self.samples.push(s);
        } else {
            self.dropped += 1;
        }
    }

    /// Hands the samples, shifted by `offset` onto the run's time zero,
    /// to `sink`.
    pub fn hand_to(mut self, sink: &SampleSink, offset: Nanos) {
        for s in &mut self.samples {
            s.at += offset;
        }
        sink.add(&self.samples, self.dropped);
    }
}

/// Where the probe threads hand their samples, bounded.
#[derive(Debug)]
pub struct SampleSink {
    pub kind: SampleKind,
    /// Most samples kept over all CPUs.
    pub max: usize,
    samples: Mutex<Vec<Sample>>,
    dropped: AtomicU64,
}

impl SampleSink {
    pub fn new(kind: SampleKind, max: usize) -> SampleSink {
        SampleSink {
            kind,
            max,
            samples: Mutex::new(Vec::new()),
            dropped: AtomicU64::new(0),
        }
    }

    /// What one of `cpus` threads may keep.
    pub fn share(&self, cpus: usize) -> usize {
        self.max / cpus.max(1)
    }

    /// Adds one thread's samples (already on the run's time zero) and the
    /// number it could not keep.
    pub fn add(&self, samples: &[Sample], dropped: u64) {
        let mut all = self.samples.lock().unwrap_or_else(|e| e.into_inner());
        let room = self.max.saturating_sub(all.len());
        let keep = samples.len().min(room);
        all.extend_from_slice(&samples[..keep]);
        self.dropped
            .fetch_add(dropped + (samples.len() - keep) as u64, Ordering::Relaxed);
    }

    /// Samples that did not fit.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    /// Every kept sample, in time order (CPU order within one instant).
    pub fn take(&self) -> Vec<Sample> {
        let mut v = std::mem::take(&mut *self.samples.lock().unwrap_or_else(|e| e.into_inner()));
        v.sort_by_key(|s| (s.at, s.cpu));
        v
    }
}

/// Writes the header and `samples` to `w`; `origin` is the run's time zero
/// on CLOCK_MONOTONIC.
pub fn write_to(
    w: &mut impl Write,
    kind: SampleKind,
    origin: Nanos,
    samples: &[Sample],
) -> io::Result<()> {
    let mut h = Vec::with_capacity(HEADER_BYTES);
    h.extend_from_slice(MAGIC);
    h.extend_from_slice(&VERSION.to_le_bytes());
    h.extend_from_slice(&(SAMPLE_BYTES as u32).to_le_bytes());
    h.extend_from_slice(&(kind as u32).to_le_bytes());
    h.extend_from_slice(&0u32.to_le_bytes());
    h.extend_from_slice(&origin.0.to_le_bytes());
    w.write_all(&h)?;
    let mut buf = Vec::with_capacity(samples.len().min(1 << 16) * SAMPLE_BYTES);
    for s in samples {
        buf.extend_from_slice(&s.at.0.to_le_bytes());
        buf.extend_from_slice(&s.value.0.to_le_bytes());
        buf.extend_from_slice(&s.cpu.to_le_bytes());
        buf.extend_from_slice(&0u32.to_le_bytes());
        if buf.len() >= (1 << 16) * SAMPLE_BYTES {
            w.write_all(&buf)?;
            buf.clear();
        }
    }
    w.write_all(&buf)
}

/// Writes the samples file at `path` atomically (a temporary file renamed
/// over it: an interrupted write never leaves half a file).
pub fn write_file(
    path: &Path,
    kind: SampleKind,
    origin: Nanos,
    samples: &[Sample],
) -> io::Result<()> {
    let mut bytes = Vec::with_capacity(HEADER_BYTES + samples.len() * SAMPLE_BYTES);
    write_to(&mut bytes, kind, origin, samples)?;
    punctual_record::write_atomic(path, &bytes)
}

/// A samples file read back.
#[derive(Debug, PartialEq, Eq)]
pub struct SamplesFile {
    pub kind: SampleKind,
    pub origin: Nanos,
    pub samples: Vec<Sample>,
}

/// Reads a samples file; a file that is not one is an `InvalidData` error
/// saying why.
pub fn read_from(r: &mut impl Read) -> io::Result<SamplesFile> {
    let bad = |m: &str| io::Error::new(io::ErrorKind::InvalidData, m.to_string());
    let mut h = [0u8; HEADER_BYTES];
    r.read_exact(&mut h)
        .map_err(|_| bad("shorter than the 32-byte header"))?;
    if &h[..8] != MAGIC {
        return Err(bad("not a punctual samples file (no PUNCSMP1 magic)"));
    }
    let u32_at = |i: usize| u32::from_le_bytes(h[i..i + 4].try_into().unwrap_or([0; 4]));
    if u32_at(8) != VERSION {
        return Err(bad("a samples format version this build does not read"));
    }
    let size = u32_at(12) as usize;
    if size < SAMPLE_BYTES {
        return Err(bad("a sample size below 24 bytes"));
    }
    let kind = SampleKind::from_u32(u32_at(16)).ok_or_else(|| bad("an unknown sample kind"))?;
    let origin = Nanos(u64::from_le_bytes(h[24..32].try_into().unwrap_or([0; 8])));
    let mut rest = Vec::new();
    r.read_to_end(&mut rest)?;
    if rest.len() % size != 0 {
        return Err(bad("a truncated last sample"));
    }
    let samples = rest
        .chunks_exact(size)
        .map(|c| {
            let u64_at = |i: usize| u64::from_le_bytes(c[i..i + 8].try_into().unwrap_or([0; 8]));
            Sample {
                at: Nanos(u64_at(0)),
                value: Nanos(u64_at(8)),
                cpu: u32::from_le_bytes(c[16..20].try_into().unwrap_or([0; 4])),
            }
        })
        .collect();
    Ok(SamplesFile {
        kind,
        origin,
        samples,
    })
}

/// Reads the samples file at `path`.
pub fn read_file(path: &Path) -> io::Result<SamplesFile> {
    read_from(&mut std::fs::File::open(path)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_written_file_reads_back_the_same() {
        let sink = SampleSink::new(SampleKind::Gap, 5);
        sink.add(
            &[
                Sample {
                    at: Nanos(30),
                    value: Nanos(7),
                    cpu: 1,
                },
                Sample {
                    at: Nanos(10),
                    value: Nanos(u64::MAX),
                    cpu: 0,
                },
            ],
            0,
        );
        // Over the bound of 5: three of these six are kept, three counted
        // beside the four the thread could not keep itself.
        let more: Vec<Sample> = (0..6)
            .map(|i| Sample {
                at: Nanos(100 + i),
                value: Nanos(i),
                cpu: 3,
            })
            .collect();
        sink.add(&more, 4);
        assert_eq!(sink.dropped(), 7);
        let kept = sink.take();
        assert_eq!(kept.len(), 5);
        assert_eq!(kept[0].at, Nanos(10), "in time order");
        let mut bytes = Vec::new();
        write_to(&mut bytes, SampleKind::Gap, Nanos(123_456), &kept).unwrap();
        assert_eq!(bytes.len(), HEADER_BYTES + 5 * SAMPLE_BYTES);
        let back = read_from(&mut bytes.as_slice()).unwrap();
        assert_eq!(back.kind, SampleKind::Gap);
        assert_eq!(back.origin, Nanos(123_456));
        assert_eq!(back.samples, kept);
    }

    #[test]
    fn what_is_not_a_samples_file_is_refused_with_why() {
        let mut short = &b"PUNCSMP1"[..];
        assert!(read_from(&mut short)
            .unwrap_err()
            .to_string()
            .contains("header"));
        let mut bytes = Vec::new();
        write_to(&mut bytes, SampleKind::Latency, Nanos(0), &[]).unwrap();
        bytes.push(1);
        let e = read_from(&mut bytes.as_slice()).unwrap_err();
        assert!(e.to_string().contains("truncated"), "{e}");
        bytes[0] = b'X';
        let e = read_from(&mut bytes.as_slice()).unwrap_err();
        assert!(e.to_string().contains("magic"), "{e}");
    }
}
