//! The flight recorder's last pages, kept raw, and written as a
//! `trace.dat` that `trace-cmd report` (and KernelShark) read: the
//! evidence of a `--stop-at` event in the kernel's own words, every field
//! of every event, not only what attribution made of them.
//!
//! The reader already holds each page it drains; keeping the newest ones
//! per CPU costs a copy of a page (4 KiB) per drain of a busy ring and at
//! most [`RawKeep::max_pages`] pages per CPU of memory. The file is the
//! version 6 format of trace-cmd.dat(5): a header with the kernel's own
//! self-description (`header_page`, `header_event`, the event formats,
//! `/proc/kallsyms` for stack traces, `printk_formats`, the thread names
//! seen), then each CPU's pages as the ring handed them out, page-aligned.

use std::collections::{BTreeMap, VecDeque};
use std::path::Path;

use punctual_units::Nanos;

use crate::format::{HeaderEvent, HeaderPage};
use crate::ring::parse_page;

/// What `trace-cmd report` needs besides the pages, read from tracefs when
/// the recording starts (the formats do not change while it runs).
#[derive(Clone, Debug, Default)]
pub struct TraceDatMeta {
    pub header_page: String,
    pub header_event: String,
    /// `events/ftrace/*/format`: the records ftrace itself writes, among
    /// them `kernel_stack`, which the `stacktrace` trigger produces.
    pub ftrace_formats: Vec<String>,
    /// system → the format text of each recorded event of it.
    pub formats: BTreeMap<String, Vec<String>>,
    pub printk_formats: String,
}

impl TraceDatMeta {
    /// Reads the headers and the formats of `enabled` (`system/event`)
    /// below `events_dir` (the tracefs root's `events`).
    pub fn read(events_dir: &Path, enabled: &[String]) -> TraceDatMeta {
        let read = |p: &Path| crate::tracefs::read_file(p).unwrap_or_default();
        let mut formats: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for e in enabled {
            let Some((sys, _)) = e.split_once('/') else {
                continue;
            };
            let text = read(&events_dir.join(e).join("format"));
            if !text.is_empty() {
                formats.entry(sys.to_string()).or_default().push(text);
            }
        }
        let mut ftrace_formats = Vec::new();
        if let Ok(rd) = std::fs::read_dir(events_dir.join("ftrace")) {
            let mut dirs: Vec<_> = rd.flatten().map(|e| e.path()).collect();
            dirs.sort();
            for d in dirs {
                let text = read(&d.join("format"));
                if !text.is_empty() {
                    ftrace_formats.push(text);
                }
            }
        }
        let root = events_dir.parent().unwrap_or(events_dir);
        TraceDatMeta {
            header_page: read(&events_dir.join("header_page")),
            header_event: read(&events_dir.join("header_event")),
            ftrace_formats,
            formats,
            printk_formats: read(&root.join("printk_formats")),
        }
    }
}

/// The newest pages of each CPU's ring, as drained: those whose last event
/// is within `window` of the newest page of that CPU, and at most
/// `max_pages` of them.
#[derive(Clone, Debug)]
pub struct RawKeep {
    pub window: Nanos,
    pub max_pages: usize,
    pub page_size: usize,
    /// CPU → (timestamp of its last event, the page), oldest first.
    pub pages: BTreeMap<u32, VecDeque<(u64, Vec<u8>)>>,
    /// Thread names seen in `sched_switch` (tid → comm), for the file's
    /// process table: the instance records no `saved_cmdlines` of its own.
    pub comms: BTreeMap<i32, String>,
}

impl RawKeep {
    pub fn new(window: Nanos, max_pages: usize, page_size: usize) -> RawKeep {
        RawKeep {
            window,
            max_pages: max_pages.max(1),
            page_size,
            pages: BTreeMap::new(),
            comms: BTreeMap::new(),
        }
    }

    /// Keeps one drained page of `cpu` whose last event is at `last_ts`,
    /// and forgets the ones that fell out of the window.
    pub fn push(&mut self, cpu: u32, last_ts: u64, page: &[u8]) {
        let mut p = page.to_vec();
        p.resize(self.page_size.max(page.len()), 0);
        let q = self.pages.entry(cpu).or_default();
        // A CPU's pages come in time order; an empty page carries its
        // base time only, which may be older.
        let newest = q.back().map_or(last_ts, |b| b.0.max(last_ts));
        q.push_back((newest, p));
        while q.len() > self.max_pages
            || q.front()
                .is_some_and(|f| f.0.saturating_add(self.window.0) < newest)
        {
            q.pop_front();
        }
    }

    /// Notes `comm` as the name of `tid` (from a `sched_switch`).
    pub fn name(&mut self, tid: i32, comm: &str) {
        if self.comms.get(&tid).map(String::as_str) != Some(comm) {
            self.comms.insert(tid, comm.to_string());
        }
    }

    /// Pages kept, over all CPUs.
    pub fn len(&self) -> usize {
        self.pages.values().map(VecDeque::len).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The whole file: the header of trace-cmd.dat(5) version 6 from
    /// `meta` and `kallsyms`, then the kept pages of CPU 0 to the highest
    /// CPU kept (a CPU with none has an empty section).
    pub fn to_trace_dat(&self, meta: &TraceDatMeta, kallsyms: &str) -> Vec<u8> {
        let mut b: Vec<u8> = Vec::new();
        b.extend_from_slice(&[0x17, 0x08, 0x44]);
        b.extend_from_slice(b"tracing6\0");
        b.push(0); // little endian
        b.push(std::mem::size_of::<libc::c_long>() as u8);
        b.extend_from_slice(&(self.page_size as u32).to_le_bytes());
        let text64 = |b: &mut Vec<u8>, t: &str| {
            b.extend_from_slice(&(t.len() as u64).to_le_bytes());
            b.extend_from_slice(t.as_bytes());
        };
        let text32 = |b: &mut Vec<u8>, t: &str| {
            b.extend_from_slice(&(t.len() as u32).to_le_bytes());
            b.extend_from_slice(t.as_bytes());
        };
        b.extend_from_slice(b"header_page\0");
        text64(&mut b, &meta.header_page);
        b.extend_from_slice(b"header_event\0");
        text64(&mut b, &meta.header_event);
        b.extend_from_slice(&(meta.ftrace_formats.len() as u32).to_le_bytes());
        for f in &meta.ftrace_formats {
            text64(&mut b, f);
        }
        b.extend_from_slice(&(meta.formats.len() as u32).to_le_bytes());
        for (sys, fs) in &meta.formats {
            b.extend_from_slice(sys.as_bytes());
            b.push(0);
            b.extend_from_slice(&(fs.len() as u32).to_le_bytes());
            for f in fs {
                text64(&mut b, f);
            }
        }
        text32(&mut b, kallsyms);
        text32(&mut b, &meta.printk_formats);
        let cmdlines: String = self
            .comms
            .iter()
            .map(|(t, c)| format!("{t} {c}\n"))
            .collect();
        text64(&mut b, &cmdlines);
        let ncpus = self.pages.keys().next_back().map_or(0, |c| c + 1);
        b.extend_from_slice(&ncpus.to_le_bytes());
        b.extend_from_slice(b"options  \0");
        b.extend_from_slice(&0u16.to_le_bytes());
        b.extend_from_slice(b"flyrecord\0");
        // Each CPU's section starts page-aligned after the offset table.
        let table_at = b.len();
        b.resize(table_at + 16 * ncpus as usize, 0);
        let mut at = b.len().next_multiple_of(self.page_size.max(1));
        let mut table = Vec::new();
        for cpu in 0..ncpus {
            let size: usize = self
                .pages
                .get(&cpu)
                .map_or(0, |q| q.iter().map(|p| p.1.len()).sum());
            table.push((at as u64, size as u64));
            at += size;
        }
        for (i, (off, size)) in table.iter().enumerate() {
            let e = table_at + 16 * i;
            b[e..e + 8].copy_from_slice(&off.to_le_bytes());
            b[e + 8..e + 16].copy_from_slice(&size.to_le_bytes());
        }
        if let Some(&(first, _)) = table.first() {
            b.resize(first as usize, 0);
        }
        for cpu in 0..ncpus {
            for (_, p) in self.pages.get(&cpu).into_iter().flatten() {
                b.extend_from_slice(p);
            }
        }
        b
    }
}

/// What `--stop-raw` keeps: the pages of the last second before the
/// stop, or 8 MiB per CPU, whichever is less.
pub const STOP_WINDOW: Nanos = Nanos(1_000_000_000);
pub const STOP_MAX_BYTES_PER_CPU: usize = 8 << 20;

/// A recording's kept pages with what is needed to read them.
#[derive(Clone, Debug)]
pub struct RawWindow {
    pub keep: RawKeep,
    pub meta: TraceDatMeta,
}

impl RawWindow {
    /// Writes the window as a `trace.dat` at `path` (atomically), with
    /// this machine's `/proc/kallsyms` so kernel stacks read as names.
    pub fn write(&self, path: &Path) -> std::io::Result<()> {
        let kallsyms = std::fs::read_to_string("/proc/kallsyms").unwrap_or_default();
        let bytes = self.keep.to_trace_dat(&self.meta, &kallsyms);
        punctual_record::write_atomic(path, &bytes)
    }
}

/// A kernel stack the `stacktrace` trigger recorded: the task switched
/// out (the one that held the CPU) and where it was, innermost first.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KernelStack {
    pub ts: u64,
    pub cpu: u32,
    pub pid: i32,
    pub frames: Vec<u64>,
}

/// The `kernel_stack` records of `pages` (the layout of ftrace's
/// `kernel_stack` format: `int size` at 8, the `size` return addresses
/// from 16), with the type id `id`.
pub fn stacks_in(
    cpu: u32,
    pages: &[Vec<u8>],
    hp: &HeaderPage,
    he: &HeaderEvent,
    id: u16,
) -> Vec<KernelStack> {
    let mut out = Vec::new();
    for p in pages {
        let Ok(page) = parse_page(p, hp, he) else {
            continue;
        };
        for ev in &page.events {
            let d = ev.data;
            let rd = |at: usize, n: usize| d.get(at..at + n);
            let Some(ty) = rd(0, 2).map(|b| u16::from_le_bytes([b[0], b[1]])) else {
                continue;
            };
            if ty != id {
                continue;
            }
            let pid = rd(4, 4).map_or(0, |b| i32::from_le_bytes(b.try_into().unwrap_or([0; 4])));
            let n = rd(8, 4).map_or(0, |b| i32::from_le_bytes(b.try_into().unwrap_or([0; 4])));
            let frames = (0..n.max(0) as usize)
                .map_while(|i| rd(16 + 8 * i, 8))
                .map(|b| u64::from_le_bytes(b.try_into().unwrap_or([0; 8])))
                .take_while(|&a| a != 0 && a != u64::MAX)
                .collect();
            out.push(KernelStack {
                ts: ev.ts,
                cpu,
                pid,
                frames,
            });
        }
    }
    out
}

impl RawWindow {
    /// Every kernel stack in the window, per CPU in time order.
    pub fn stacks(&self) -> Vec<KernelStack> {
        let (Ok(hp), Ok(he)) = (
            HeaderPage::parse(&self.meta.header_page),
            HeaderEvent::parse(&self.meta.header_event),
        ) else {
            return Vec::new();
        };
        let Some(id) = self
            .meta
            .ftrace_formats
            .iter()
            .find(|f| f.starts_with("name: kernel_stack\n"))
            .and_then(|f| {
                f.lines()
                    .find_map(|l| l.strip_prefix("ID: ")?.trim().parse().ok())
            })
        else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for (&cpu, q) in &self.keep.pages {
            let pages: Vec<Vec<u8>> = q.iter().map(|p| p.1.clone()).collect();
            out.extend(stacks_in(cpu, &pages, &hp, &he, id));
        }
        out
    }

    /// The last stack recorded on `cpu` from `from` to `to` (trace clock):
    /// for a switch that ended an event there, the stack of what held the
    /// CPU until then.
    pub fn stack_in(&self, cpu: u32, from: u64, to: u64) -> Option<KernelStack> {
        self.stacks()
            .into_iter()
            .filter(|s| s.cpu == cpu && s.ts >= from && s.ts <= to)
            .max_by_key(|s| s.ts)
    }
}

/// A stack as function names (`name+0xoff`) from `/proc/kallsyms`, the
/// address in hex where no symbol covers it.
pub fn symbolize(frames: &[u64], kallsyms: &str) -> Vec<String> {
    use crate::attribute::Symbolizer;
    let syms = crate::attribute::Symbols::parse(kallsyms);
    frames
        .iter()
        .map(|&a| syms.name(a).unwrap_or_else(|| format!("{a:#x}")))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A page as the ring hands it out, holding one `kernel_stack` record
    /// (type 4) of pid 77 with three return addresses, 10 ns after the
    /// page's base time, and one record of another type.
    fn stack_page(hp: &HeaderPage) -> Vec<u8> {
        let mut rec = Vec::new();
        rec.extend_from_slice(&4u16.to_le_bytes());
        rec.extend_from_slice(&[0, 0]);
        rec.extend_from_slice(&77i32.to_le_bytes());
        rec.extend_from_slice(&3i32.to_le_bytes());
        rec.extend_from_slice(&[0; 4]);
        for a in [
            0xffff_ffff_8100_0010u64,
            0xffff_ffff_8100_0200,
            0xffff_ffff_8200_0000,
        ] {
            rec.extend_from_slice(&a.to_le_bytes());
        }
        let mut data = Vec::new();
        // Header: length in 4-byte words in the low 5 bits, time delta above.
        data.extend_from_slice(&(((10u32) << 5) | (rec.len() as u32 / 4)).to_le_bytes());
        data.extend_from_slice(&rec);
        let other = [9u8, 0, 0, 0, 1, 0, 0, 0];
        data.extend_from_slice(&((5u32 << 5) | 2).to_le_bytes());
        data.extend_from_slice(&other);
        let mut page = vec![0u8; hp.page_size()];
        page[hp.timestamp_offset..hp.timestamp_offset + 8].copy_from_slice(&1000u64.to_le_bytes());
        page[hp.commit_offset..hp.commit_offset + 8]
            .copy_from_slice(&(data.len() as u64).to_le_bytes());
        page[hp.data_offset..hp.data_offset + data.len()].copy_from_slice(&data);
        page
    }

    #[test]
    fn kernel_stacks_are_read_from_the_pages_and_named() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/events");
        let hp_text = std::fs::read_to_string(dir.join("header_page")).unwrap();
        let he_text = std::fs::read_to_string(dir.join("header_event")).unwrap();
        let hp = HeaderPage::parse(&hp_text).unwrap();
        let mut keep = RawKeep::new(Nanos(1_000_000_000), 10, hp.page_size());
        keep.push(1, 1015, &stack_page(&hp));
        keep.name(77, "blocker");
        let w = RawWindow {
            keep,
            meta: TraceDatMeta {
                header_page: hp_text,
                header_event: he_text,
                ftrace_formats: vec!["name: kernel_stack\nID: 4\nformat:\n".into()],
                ..Default::default()
            },
        };
        let s = w.stacks();
        assert_eq!(s.len(), 1, "only the kernel_stack record: {s:?}");
        assert_eq!((s[0].ts, s[0].cpu, s[0].pid), (1010, 1, 77));
        assert_eq!(s[0].frames.len(), 3);
        assert_eq!(w.stack_in(1, 1000, 1010).map(|s| s.pid), Some(77));
        assert_eq!(w.stack_in(1, 1011, 2000), None);
        assert_eq!(w.stack_in(0, 0, 2000), None);
        let kallsyms =
            "ffffffff81000000 T first_fn\nffffffff81000100 t second_fn\nffffffff81000300 D data\n";
        assert_eq!(
            symbolize(&s[0].frames, kallsyms),
            ["first_fn+0x10", "second_fn+0x100", "second_fn+0xffff00"]
        );
    }

    #[test]
    fn keeps_the_window_and_the_bound() {
        let mut k = RawKeep::new(Nanos(1000), 3, 8);
        k.push(0, 100, &[1; 8]);
        k.push(0, 600, &[2; 8]);
        k.push(1, 50, &[3; 4]);
        assert_eq!(k.len(), 3);
        // The page ending at 100 is more than 1000 ns older than this one.
        k.push(0, 1200, &[4; 8]);
        assert_eq!(
            k.pages[&0].iter().map(|p| p.0).collect::<Vec<_>>(),
            [600, 1200]
        );
        // A short read is padded to a whole page.
        assert_eq!(k.pages[&1][0].1, [3, 3, 3, 3, 0, 0, 0, 0]);
        for t in 1300..1310 {
            k.push(0, t, &[5; 8]);
        }
        assert_eq!(k.pages[&0].len(), 3, "at most max_pages");
    }

    #[test]
    fn the_file_is_trace_cmd_version_6_with_page_aligned_cpu_data() {
        let mut k = RawKeep::new(Nanos(1_000_000), 10, 64);
        k.push(1, 10, &[7; 64]);
        k.push(1, 20, &[8; 64]);
        k.comms.insert(42, "app".into());
        let meta = TraceDatMeta {
            header_page: "hp".into(),
            header_event: "he".into(),
            ..Default::default()
        };
        let b = k.to_trace_dat(&meta, "");
        assert_eq!(&b[..13], b"\x17\x08\x44tracing6\0\0");
        let page = u32::from_le_bytes(b[14..18].try_into().unwrap());
        assert_eq!(page, 64);
        let fly = b.windows(10).position(|w| w == b"flyrecord\0").unwrap() + 10;
        let rd = |at: usize| u64::from_le_bytes(b[at..at + 8].try_into().unwrap());
        // Two CPUs: 0 (empty) and 1.
        let (off0, size0, off1, size1) = (rd(fly), rd(fly + 8), rd(fly + 16), rd(fly + 24));
        assert_eq!(size0, 0);
        assert_eq!(size1, 128);
        assert_eq!(off0 % 64, 0);
        assert_eq!(off1, off0);
        assert_eq!(&b[off1 as usize..off1 as usize + 64], &[7; 64]);
        assert_eq!(b.len() as u64, off1 + 128);
        assert!(b.windows(7).any(|w| w == b"42 app\n"));
    }
}
