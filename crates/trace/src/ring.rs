//! The binary per-CPU ring as `per_cpu/cpuN/trace_pipe_raw` hands it out:
//! a sequence of sub-buffers ("pages"), each a header (base timestamp,
//! commit size with loss flags) followed by compressed event headers.
//!
//! Pure: bytes in, events out. Reading the binary ring instead of the text
//! `trace` keeps nanosecond timestamps (the text prints microseconds) and
//! costs no formatting in the kernel.

use crate::format::{HeaderEvent, HeaderPage};

/// The kernel sets this bit in `commit` when events were lost before the
/// page (the writer overwrote unread pages).
pub const RB_MISSED_EVENTS: u64 = 1 << 31;
/// …and this one when the number lost is stored after the page's data.
pub const RB_MISSED_STORED: u64 = 1 << 30;
const COMMIT_MASK: u64 = (1 << 30) - 1;

/// One event record: its absolute timestamp (the instance's trace clock,
/// nanoseconds) and payload (starting with `common_type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RawEvent<'a> {
    pub ts: u64,
    pub data: &'a [u8],
}

/// What one page held.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Page<'a> {
    /// Timestamp of the page's base (before the first event's delta).
    pub base_ts: u64,
    pub events: Vec<RawEvent<'a>>,
    /// Events were lost just before this page.
    pub missed: bool,
    /// How many, when the kernel stored the number.
    pub missed_count: Option<u64>,
    /// Records that could not be decoded (a corrupt or truncated page):
    /// counted so they show as losses, never silently dropped.
    pub malformed: u64,
}

/// Why a page could not be parsed at all.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RingError {
    #[error("page of {got} bytes is shorter than its {need}-byte header")]
    Short { got: usize, need: usize },
    #[error("page commit size {commit} exceeds the page's {room} data bytes")]
    Commit { commit: usize, room: usize },
}

fn rd_u32(b: &[u8], at: usize) -> Option<u32> {
    b.get(at..at + 4)
        .map(|s| u32::from_le_bytes([s[0], s[1], s[2], s[3]]))
}

fn rd_u64(b: &[u8], at: usize, size: usize) -> Option<u64> {
    let s = b.get(at..at + size)?;
    Some(match size {
        4 => u32::from_le_bytes(s.try_into().ok()?) as u64,
        8 => u64::from_le_bytes(s.try_into().ok()?),
        _ => return None,
    })
}

/// Parses one page (exactly one sub-buffer of `hp.page_size()` bytes, or
/// at least its header and committed data).
pub fn parse_page<'a>(
    page: &'a [u8],
    hp: &HeaderPage,
    he: &HeaderEvent,
) -> Result<Page<'a>, RingError> {
    let need = hp.data_offset;
    if page.len() < need {
        return Err(RingError::Short {
            got: page.len(),
            need,
        });
    }
    let base_ts = rd_u64(page, hp.timestamp_offset, 8).unwrap_or(0);
    let raw_commit = rd_u64(page, hp.commit_offset, hp.commit_size).unwrap_or(0);
    let commit = (raw_commit & COMMIT_MASK) as usize;
    let room = page.len() - hp.data_offset;
    if commit > room {
        return Err(RingError::Commit { commit, room });
    }
    let data = &page[hp.data_offset..hp.data_offset + commit];
    let missed = raw_commit & RB_MISSED_EVENTS != 0;
    let missed_count = if raw_commit & RB_MISSED_STORED != 0 {
        // Stored as an unsigned long right after the committed data.
        rd_u64(page, hp.data_offset + commit, hp.commit_size)
    } else {
        None
    };
    let mut out = Page {
        base_ts,
        events: Vec::new(),
        missed,
        missed_count,
        malformed: 0,
    };
    let mut ts = base_ts;
    let mut at = 0usize;
    while at + 4 <= data.len() {
        let Some(hdr) = rd_u32(data, at) else { break };
        let type_len = hdr & 0x1f;
        let delta = (hdr >> 5) as u64;
        if type_len == he.padding {
            if delta == 0 {
                // Null padding: the rest of the page is empty.
                break;
            }
            // A discarded event: skip it, but its delta still counts.
            let Some(len) = rd_u32(data, at + 4) else {
                out.malformed += 1;
                break;
            };
            ts += delta;
            at += 4 + len as usize;
            continue;
        }
        if type_len == he.time_extend {
            let Some(hi) = rd_u32(data, at + 4) else {
                out.malformed += 1;
                break;
            };
            ts += ((hi as u64) << 27) | delta;
            at += 8;
            continue;
        }
        if type_len == he.time_stamp {
            let Some(hi) = rd_u32(data, at + 4) else {
                out.malformed += 1;
                break;
            };
            // Absolute timestamp: the low 59 bits; the top bits come from
            // the running clock (they never change within a boot).
            let abs = ((hi as u64) << 27) | delta;
            ts = (ts & !((1u64 << 59) - 1)) | (abs & ((1u64 << 59) - 1));
            at += 8;
            continue;
        }
        ts += delta;
        let (start, len) = if type_len == 0 {
            // Length (including this word) in array[0]; data after it.
            let Some(l) = rd_u32(data, at + 4) else {
                out.malformed += 1;
                break;
            };
            if l < 4 {
                out.malformed += 1;
                break;
            }
            (at + 8, l as usize - 4)
        } else if type_len <= he.data_max_type_len {
            (at + 4, type_len as usize * 4)
        } else {
            out.malformed += 1;
            break;
        };
        match data.get(start..start + len) {
            Some(d) => out.events.push(RawEvent { ts, data: d }),
            None => {
                out.malformed += 1;
                break;
            }
        }
        at = start + len;
    }
    Ok(out)
}

/// Splits a buffer of whole pages (as read from `trace_pipe_raw`) and
/// parses each; a short trailing piece is ignored (it cannot be a page).
pub fn parse_pages<'a>(
    buf: &'a [u8],
    hp: &HeaderPage,
    he: &HeaderEvent,
) -> Vec<Result<Page<'a>, RingError>> {
    buf.chunks(hp.page_size())
        .filter(|c| c.len() == hp.page_size())
        .map(|c| parse_page(c, hp, he))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hp() -> HeaderPage {
        HeaderPage::parse(include_str!("../tests/data/events/header_page")).unwrap()
    }

    /// Builds a page by hand: base ts 1000, then the given words.
    fn page(words: &[u32], commit_flags: u64, tail: Option<u64>) -> Vec<u8> {
        let mut p = vec![0u8; 4096];
        p[0..8].copy_from_slice(&1000u64.to_le_bytes());
        let commit = (words.len() * 4) as u64;
        p[8..16].copy_from_slice(&(commit | commit_flags).to_le_bytes());
        for (i, w) in words.iter().enumerate() {
            p[16 + i * 4..20 + i * 4].copy_from_slice(&w.to_le_bytes());
        }
        if let Some(t) = tail {
            let at = 16 + words.len() * 4;
            p[at..at + 8].copy_from_slice(&t.to_le_bytes());
        }
        p
    }

    #[test]
    fn decodes_deltas_extends_padding_and_long_events() {
        let he = HeaderEvent::default();
        let words = [
            // small event: type_len 1 (4 bytes), delta 5
            (5 << 5) | 1,
            0xAAAA,
            // time extend: +((2<<27) | 3)
            (3 << 5) | 30,
            2,
            // discarded event (padding with delta 7, 4 more bytes)
            (7 << 5) | 29,
            8,
            0,
            // long event: type_len 0, array[0] = 4 + 8 data bytes, delta 1
            1 << 5,
            12,
            0xBBBB,
            0xCCCC,
            // absolute timestamp 50_000
            ((50_000 & ((1 << 27) - 1)) << 5) | 31,
            50_000 >> 27,
            // small event, delta 2
            (2 << 5) | 1,
            0xDDDD,
        ];
        let p = page(&words, 0, None);
        let pg = parse_page(&p, &hp(), &he).unwrap();
        assert!(!pg.missed);
        assert_eq!(pg.malformed, 0);
        let ts: Vec<u64> = pg.events.iter().map(|e| e.ts).collect();
        let ext = (2u64 << 27) | 3;
        assert_eq!(ts, vec![1005, 1005 + ext + 7 + 1, 50_002]);
        assert_eq!(pg.events[1].data.len(), 8);
        assert_eq!(pg.events[1].data[0], 0xBB);
        assert_eq!(pg.events[2].data[0], 0xDD);
    }

    #[test]
    fn reports_missed_events_and_refuses_bad_pages() {
        let he = HeaderEvent::default();
        let p = page(
            &[(1 << 5) | 1, 0],
            RB_MISSED_EVENTS | RB_MISSED_STORED,
            Some(17),
        );
        let pg = parse_page(&p, &hp(), &he).unwrap();
        assert!(pg.missed);
        assert_eq!(pg.missed_count, Some(17));
        assert!(parse_page(&p[..10], &hp(), &he).is_err());
        let mut huge = page(&[], 0, None);
        huge[8..16].copy_from_slice(&5000u64.to_le_bytes());
        assert!(parse_page(&huge, &hp(), &he).is_err());
        // A long event whose length runs off the page is counted, not read.
        let trunc = page(&[1 << 5, 400], 0, None);
        let pg = parse_page(&trunc, &hp(), &he).unwrap();
        assert_eq!((pg.events.len(), pg.malformed), (0, 1));
    }
}
