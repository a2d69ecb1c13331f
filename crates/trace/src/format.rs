//! The tracefs self-description: `events/header_page`, `events/header_event`
//! and each event's `format` file.
//!
//! The binary ring is only readable together with these files: field
//! offsets and sizes differ between kernels (and `__data_loc` strings move
//! inside the record), so nothing here hard-codes a layout; a layout the
//! files do not describe is refused with a sentence rather than guessed.

use std::collections::BTreeMap;

/// Why a format file could not be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FormatError {
    #[error("format file has no '{0}' line")]
    Missing(&'static str),
    #[error("format line '{0}' is not understood")]
    BadLine(String),
    #[error("event {event} has no field '{field}'")]
    NoField { event: String, field: String },
}

/// One field of an event record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Field {
    pub name: String,
    /// The C declaration before the name (`unsigned short`, `__data_loc char[]`).
    pub ctype: String,
    pub offset: usize,
    pub size: usize,
    pub signed: bool,
    /// `char name[16]` style: a fixed array (strings are NUL-padded).
    pub array: bool,
}

impl Field {
    pub fn is_data_loc(&self) -> bool {
        self.ctype.starts_with("__data_loc")
    }
    pub fn is_rel_loc(&self) -> bool {
        self.ctype.starts_with("__rel_loc")
    }

    /// Reads the field as an integer (sign-extended when signed). `None`
    /// when the record is too short: a corrupt record is skipped, never
    /// read past its end.
    pub fn int(&self, rec: &[u8]) -> Option<i64> {
        let b = rec.get(self.offset..self.offset + self.size)?;
        let v = match self.size {
            1 => {
                if self.signed {
                    b[0] as i8 as i64
                } else {
                    b[0] as i64
                }
            }
            2 => {
                let u = u16::from_le_bytes([b[0], b[1]]);
                if self.signed {
                    u as i16 as i64
                } else {
                    u as i64
                }
            }
            4 => {
                let u = u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
                if self.signed {
                    u as i32 as i64
                } else {
                    u as i64
                }
            }
            8 => u64::from_le_bytes(b.try_into().ok()?) as i64,
            _ => return None,
        };
        Some(v)
    }

    /// Unsigned 64-bit view (pointers, `void *`).
    pub fn u64(&self, rec: &[u8]) -> Option<u64> {
        self.int(rec).map(|v| v as u64)
    }

    /// Reads a string field: a fixed `char[N]` or a `__data_loc`/`__rel_loc`
    /// reference (low 16 bits offset, high 16 bits length).
    pub fn string(&self, rec: &[u8]) -> Option<String> {
        let bytes = if self.is_data_loc() || self.is_rel_loc() {
            let loc = self.int(rec)? as u32;
            let mut off = (loc & 0xffff) as usize;
            let len = (loc >> 16) as usize;
            if self.is_rel_loc() {
                off += self.offset + self.size;
            }
            rec.get(off..off + len)?
        } else {
            rec.get(self.offset..self.offset + self.size)?
        };
        let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
        Some(String::from_utf8_lossy(&bytes[..end]).into_owned())
    }
}

/// One event's `format` file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventFormat {
    pub system: String,
    pub name: String,
    pub id: u16,
    pub fields: Vec<Field>,
}

impl EventFormat {
    /// Parses a `format` file. `system` is the directory it came from
    /// (the file itself does not say).
    pub fn parse(system: &str, text: &str) -> Result<EventFormat, FormatError> {
        let mut name = None;
        let mut id = None;
        let mut fields = Vec::new();
        for line in text.lines() {
            let t = line.trim();
            if let Some(n) = t.strip_prefix("name:") {
                name = Some(n.trim().to_string());
            } else if let Some(i) = t.strip_prefix("ID:") {
                id = Some(
                    i.trim()
                        .parse::<u16>()
                        .map_err(|_| FormatError::BadLine(t.to_string()))?,
                );
            } else if t.starts_with("field:") {
                fields.push(parse_field(t)?);
            }
        }
        Ok(EventFormat {
            system: system.to_string(),
            name: name.ok_or(FormatError::Missing("name"))?,
            id: id.ok_or(FormatError::Missing("ID"))?,
            fields,
        })
    }

    pub fn field(&self, name: &str) -> Result<&Field, FormatError> {
        self.fields
            .iter()
            .find(|f| f.name == name)
            .ok_or_else(|| FormatError::NoField {
                event: format!("{}:{}", self.system, self.name),
                field: name.to_string(),
            })
    }
}

/// `field:<decl>;\toffset:N;\tsize:N;\tsigned:N;`
fn parse_field(line: &str) -> Result<Field, FormatError> {
    let bad = || FormatError::BadLine(line.to_string());
    let mut decl = None;
    let mut kv = BTreeMap::new();
    for part in line.split(';') {
        let part = part.trim();
        if part.is_empty() {
            continue;
        }
        let (k, v) = part.split_once(':').ok_or_else(bad)?;
        if k.trim() == "field" {
            decl = Some(v.trim().to_string());
        } else {
            kv.insert(k.trim().to_string(), v.trim().to_string());
        }
    }
    let decl = decl.ok_or_else(bad)?;
    let num = |k: &str| -> Result<usize, FormatError> {
        kv.get(k).and_then(|v| v.parse().ok()).ok_or_else(bad)
    };
    let offset = num("offset")?;
    let size = num("size")?;
    let signed = kv.get("signed").map(|v| v == "1").unwrap_or(false);
    // The name is the last identifier of the declaration, before any [N].
    let (head, array) = match decl.find('[') {
        Some(i) if !decl.starts_with("__data_loc") && !decl.starts_with("__rel_loc") => {
            (decl[..i].trim().to_string(), true)
        }
        _ => (decl.clone(), false),
    };
    let (ctype, name) = match head.rsplit_once(|c: char| c.is_whitespace() || c == '*') {
        Some((t, n)) => (t.trim().to_string(), n.trim().to_string()),
        None => return Err(bad()),
    };
    if name.is_empty() {
        return Err(bad());
    }
    Ok(Field {
        name,
        ctype,
        offset,
        size,
        signed,
        array,
    })
}

/// The sub-buffer ("page") layout from `events/header_page`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeaderPage {
    pub timestamp_offset: usize,
    pub commit_offset: usize,
    pub commit_size: usize,
    pub data_offset: usize,
    /// Size of the data area; with the header it makes one sub-buffer.
    pub data_size: usize,
}

impl HeaderPage {
    pub fn parse(text: &str) -> Result<HeaderPage, FormatError> {
        let mut fields = BTreeMap::new();
        for line in text.lines() {
            let t = line.trim();
            if t.starts_with("field:") {
                let f = parse_field(t)?;
                fields.insert(f.name.clone(), f);
            }
        }
        let get = |n: &'static str| fields.get(n).ok_or(FormatError::Missing(n));
        let ts = get("timestamp")?;
        let commit = get("commit")?;
        let data = get("data")?;
        Ok(HeaderPage {
            timestamp_offset: ts.offset,
            commit_offset: commit.offset,
            commit_size: commit.size,
            data_offset: data.offset,
            data_size: data.size,
        })
    }

    /// Bytes in one sub-buffer as `trace_pipe_raw` hands them out.
    pub fn page_size(&self) -> usize {
        self.data_offset + self.data_size
    }
}

/// The compressed event header's type codes from `events/header_event`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeaderEvent {
    pub padding: u32,
    pub time_extend: u32,
    pub time_stamp: u32,
    pub data_max_type_len: u32,
}

impl Default for HeaderEvent {
    /// The values every kernel since 2.6.30 uses.
    fn default() -> Self {
        HeaderEvent {
            padding: 29,
            time_extend: 30,
            time_stamp: 31,
            data_max_type_len: 28,
        }
    }
}

impl HeaderEvent {
    pub fn parse(text: &str) -> Result<HeaderEvent, FormatError> {
        let mut h = HeaderEvent::default();
        let mut bits_ok = false;
        for line in text.lines() {
            let t = line.trim();
            let num = |s: &str| -> Result<u32, FormatError> {
                s.rsplit("==")
                    .next()
                    .and_then(|v| v.trim().parse().ok())
                    .ok_or_else(|| FormatError::BadLine(t.to_string()))
            };
            if t.starts_with("padding") {
                h.padding = num(t)?;
            } else if t.starts_with("time_extend") {
                h.time_extend = num(t)?;
            } else if t.starts_with("time_stamp") {
                h.time_stamp = num(t)?;
            } else if t.starts_with("data max type_len") {
                h.data_max_type_len = num(t)?;
            } else if t.starts_with("type_len") {
                // Only the 5-bit type_len / 27-bit delta layout exists.
                if !t.contains(" 5 bits") {
                    return Err(FormatError::BadLine(t.to_string()));
                }
                bits_ok = true;
            }
        }
        if !bits_ok {
            return Err(FormatError::Missing("type_len"));
        }
        Ok(h)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SWITCH: &str = include_str!("../tests/data/events/sched/sched_switch/format");
    const IRQ: &str = include_str!("../tests/data/events/irq/irq_handler_entry/format");

    #[test]
    fn parses_fields_arrays_and_data_loc() {
        let f = EventFormat::parse("sched", SWITCH).unwrap();
        assert_eq!(f.name, "sched_switch");
        let c = f.field("prev_comm").unwrap();
        assert!(c.array);
        assert_eq!(c.size, 16);
        let p = f.field("next_prio").unwrap();
        assert_eq!((p.offset, p.size, p.signed), (60, 4, true));
        let i = EventFormat::parse("irq", IRQ).unwrap();
        assert!(i.field("name").unwrap().is_data_loc());
        assert!(i.field("nope").is_err());
    }

    #[test]
    fn parses_headers() {
        let hp = HeaderPage::parse(include_str!("../tests/data/events/header_page")).unwrap();
        assert_eq!(hp.page_size(), 4096);
        assert_eq!(
            (hp.commit_offset, hp.commit_size, hp.data_offset),
            (8, 8, 16)
        );
        let he = HeaderEvent::parse(include_str!("../tests/data/events/header_event")).unwrap();
        assert_eq!(he, HeaderEvent::default());
        assert!(HeaderEvent::parse("nothing").is_err());
        assert!(EventFormat::parse("x", "field:int a;\toffset:zz;").is_err());
    }

    #[test]
    fn reads_values_without_reading_past_the_end() {
        let f = Field {
            name: "x".into(),
            ctype: "int".into(),
            offset: 2,
            size: 4,
            signed: true,
            array: false,
        };
        assert_eq!(f.int(&[0, 0, 0xff, 0xff, 0xff, 0xff]), Some(-1));
        assert_eq!(f.int(&[0, 0, 1]), None);
        let s = Field {
            name: "n".into(),
            ctype: "__data_loc char[]".into(),
            offset: 0,
            size: 4,
            signed: false,
            array: false,
        };
        let mut rec = vec![8, 0, 3, 0, 0, 0, 0, 0];
        rec.extend_from_slice(b"ab\0");
        assert_eq!(s.string(&rec).as_deref(), Some("ab"));
        rec[2] = 200; // length beyond the record
        assert_eq!(s.string(&rec), None);
    }
}
