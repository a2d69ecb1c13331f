//! `disk`: reads of a temporary file that never outlives the load.
//!
//! The file is created with `O_TMPFILE` (no name at all: it disappears with
//! the last descriptor, even when the process is SIGKILLed). Where the file
//! system lacks `O_TMPFILE`, a named file is created and unlinked as soon as
//! the readers have it open, which leaves only the short layout window.
//! Each reader thread opens its own descriptor (queue depth = threads, like
//! fio's psync engine with numjobs). Buffered reads drop the file's cached
//! pages once per pass, so they keep reaching the device instead of
//! measuring the page cache.

use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd};
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::irq::{device_irqs, IrqRoute, RouteError};
use crate::spec::{DiskOpts, Pattern};
use crate::util::{nth_cpu, place, secs, thread_cpu_time, Ctl, Outcome, XorShift};
use crate::{LoadError, Prepared, Running};

const ALIGN: usize = 4096;

/// A heap buffer aligned for O_DIRECT.
struct AlignedBuf {
    ptr: *mut u8,
    len: usize,
}

// SAFETY: the buffer is plain bytes owned by one thread at a time.
unsafe impl Send for AlignedBuf {}

impl AlignedBuf {
    fn new(len: usize) -> AlignedBuf {
        let layout = std::alloc::Layout::from_size_align(len.max(ALIGN), ALIGN).expect("layout");
        // SAFETY: layout has non-zero size.
        let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
        if ptr.is_null() {
            std::alloc::handle_alloc_error(layout);
        }
        AlignedBuf { ptr, len }
    }
    fn as_mut(&mut self) -> &mut [u8] {
        // SAFETY: ptr is valid for len bytes and uniquely owned.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        let layout =
            std::alloc::Layout::from_size_align(self.len.max(ALIGN), ALIGN).expect("layout");
        // SAFETY: allocated above with this layout.
        unsafe { std::alloc::dealloc(self.ptr, layout) };
    }
}

fn invalid(m: String) -> LoadError {
    LoadError::Invalid(m)
}

/// Refuses a directory that cannot hold the file, before anything is made.
pub(crate) fn check_dir(o: &DiskOpts) -> Result<(), LoadError> {
    let d = &o.dir;
    let md = std::fs::metadata(d)
        .map_err(|e| invalid(format!("disk: dir '{}' cannot be used: {e}", d.display())))?;
    if !md.is_dir() {
        return Err(invalid(format!(
            "disk: dir '{}' is not a directory",
            d.display()
        )));
    }
    let c = std::ffi::CString::new(d.as_os_str().as_encoded_bytes())
        .map_err(|_| invalid(format!("disk: dir '{}' contains a NUL byte", d.display())))?;
    // SAFETY: c is a valid C string.
    if unsafe { libc::access(c.as_ptr(), libc::W_OK | libc::X_OK) } != 0 {
        return Err(invalid(format!(
            "disk: dir '{}' is not writable ({})",
            d.display(),
            io::Error::last_os_error()
        )));
    }
    // SAFETY: st is a valid out-parameter.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statvfs(c.as_ptr(), &mut st) } == 0 {
        let free = st.f_bavail as u64 * st.f_frsize as u64;
        // Leave at least 1 GiB or 5% to everyone else.
        let reserve = (st.f_blocks as u64 * st.f_frsize as u64 / 20).min(1 << 30);
        if o.size_bytes.saturating_add(reserve) > free {
            return Err(invalid(format!(
                "disk: dir '{}' has {} MiB free; size={} MiB would not leave a safe margin",
                d.display(),
                free >> 20,
                o.size_bytes >> 20
            )));
        }
    }
    Ok(())
}

fn open_tmp(dir: &Path) -> io::Result<(File, Option<PathBuf>)> {
    let c = std::ffi::CString::new(dir.as_os_str().as_encoded_bytes())
        .map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: c is a valid C string; the fd is owned by the File below.
    let fd = unsafe {
        libc::open(
            c.as_ptr(),
            libc::O_TMPFILE | libc::O_RDWR | libc::O_CLOEXEC,
            0o600,
        )
    };
    if fd >= 0 {
        // SAFETY: fresh fd we own.
        return Ok((unsafe { File::from_raw_fd(fd) }, None));
    }
    let e = io::Error::last_os_error();
    match e.raw_os_error() {
        Some(libc::EOPNOTSUPP) | Some(libc::EISDIR) | Some(libc::EINVAL) => {}
        _ => return Err(e),
    }
    let mut rng =
        XorShift::new(Instant::now().elapsed().as_nanos() as u64 ^ std::process::id() as u64);
    let path = dir.join(format!(
        ".punctual-load-{}-{:08x}.tmp",
        std::process::id(),
        rng.next_u64() as u32
    ));
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .open(&path)?;
    Ok((f, Some(path)))
}

struct DiskPrepared {
    o: DiskOpts,
    readers: Vec<File>,
    route: Option<IrqRoute>,
    pin_readers: Option<u32>,
    device: Option<String>,
    irq_on_cpu: bool,
    warnings: Vec<String>,
    layout: Duration,
}

pub(crate) fn prepare(o: &DiskOpts, abort: &AtomicBool) -> Result<Box<dyn Prepared>, LoadError> {
    check_dir(o)?;
    let rt = |what: &str, e: io::Error| LoadError::Runtime(format!("disk: {what}: {e}"));
    let t0 = Instant::now();
    let (file, named) = open_tmp(&o.dir).map_err(|e| {
        if e.kind() == io::ErrorKind::PermissionDenied {
            invalid(format!(
                "disk: dir '{}' is not writable ({e})",
                o.dir.display()
            ))
        } else {
            rt(&format!("create a file in {}", o.dir.display()), e)
        }
    })?;
    // Guard so a failure below still removes a named file.
    struct Unlink(Option<PathBuf>);
    impl Drop for Unlink {
        fn drop(&mut self) {
            if let Some(p) = self.0.take() {
                let _ = std::fs::remove_file(p);
            }
        }
    }
    let mut unlink = Unlink(named);
    // Incompressible contents: some virtual disks and file systems shortcut
    // zeros, which would not be a read of the device.
    let chunk = 1usize << 20;
    let mut buf = vec![0u8; chunk];
    let mut rng = XorShift::new(0x9e37_79b9_7f4a_7c15);
    let mut written = 0u64;
    while written < o.size_bytes {
        if abort.load(Ordering::Relaxed) {
            return Err(LoadError::Runtime(
                "disk: stopped while laying out the file".into(),
            ));
        }
        for w in buf.chunks_exact_mut(8) {
            w.copy_from_slice(&rng.next_u64().to_le_bytes());
        }
        let n = chunk.min((o.size_bytes - written) as usize);
        file.write_all_at(&buf[..n], written).map_err(|e| {
            if e.raw_os_error() == Some(libc::ENOSPC) {
                invalid(format!(
                    "disk: dir '{}' ran out of space laying out {} bytes",
                    o.dir.display(),
                    o.size_bytes
                ))
            } else {
                rt("lay out the file", e)
            }
        })?;
        written += n as u64;
    }
    file.sync_data().map_err(|e| rt("fsync", e))?;
    drop_cache(&file);
    let layout = t0.elapsed();
    let mut readers = Vec::new();
    let fdpath = format!("/proc/self/fd/{}", file.as_raw_fd());
    for _ in 0..o.queue_depth {
        let c = std::ffi::CString::new(fdpath.clone()).expect("no NUL");
        let flags = libc::O_RDONLY | libc::O_CLOEXEC | if o.direct { libc::O_DIRECT } else { 0 };
        // SAFETY: c is a valid C string; fd owned by the File below.
        let fd = unsafe { libc::open(c.as_ptr(), flags) };
        if fd < 0 {
            let e = io::Error::last_os_error();
            return Err(if o.direct && e.raw_os_error() == Some(libc::EINVAL) {
                invalid(format!(
                    "disk: the file system of '{}' does not support O_DIRECT; drop 'direct'",
                    o.dir.display()
                ))
            } else {
                rt("open a reader", e)
            });
        }
        // SAFETY: fresh fd we own.
        readers.push(unsafe { File::from_raw_fd(fd) });
    }
    if let Some(p) = unlink.0.take() {
        std::fs::remove_file(&p).map_err(|e| rt("unlink the temporary file", e))?;
    }
    drop(file);

    let mut warnings = Vec::new();
    let mut route = None;
    let mut pin_readers = None;
    let mut device = None;
    let mut irq_on_cpu = false;
    if let Some(cpu) = o.irq_cpu {
        let dev = readers[0].metadata().map_err(|e| rt("fstat", e))?.dev();
        match device_irqs(dev) {
            Err(why) => warnings.push(format!("disk: irq-cpu={cpu} not applied: {why}")),
            Ok(d) => {
                device = Some(d.device.clone());
                for m in crate::irq::recover_stale() {
                    warnings.push(m);
                }
                match IrqRoute::route(&d.irqs, cpu) {
                    Ok(r) => {
                        irq_on_cpu = true;
                        route = Some(r)
                    }
                    Err(RouteError::Managed(why)) => {
                        // The kernel spreads managed queue interrupts itself:
                        // with one queue per CPU, the queue a CPU submits to
                        // completes on that CPU, so pinning the readers
                        // there is the route.
                        let on: Vec<u32> = d
                            .irqs
                            .iter()
                            .filter(|&&i| crate::irq::effective_cpus(i).contains(&cpu))
                            .copied()
                            .collect();
                        let all: Vec<u32> = d
                            .irqs
                            .iter()
                            .flat_map(|&i| crate::irq::effective_cpus(i))
                            .collect();
                        if on.is_empty() {
                            warnings.push(format!(
                                "disk: irq-cpu={cpu} not applied: {why}, and it is delivered to CPU(s) {all:?}; use irq-cpu={} to load the CPU it lands on",
                                all.first().copied().unwrap_or(0)
                            ));
                        } else {
                            irq_on_cpu = true;
                            if d.irqs.len() > 1 {
                                pin_readers = Some(cpu);
                            }
                            warnings.push(format!(
                                "disk: {why}; IRQ(s) {on:?} of {} already land on CPU {cpu}{}",
                                d.device,
                                if d.irqs.len() > 1 {
                                    "; readers pinned there so they use that queue"
                                } else {
                                    ""
                                }
                            ));
                        }
                    }
                    Err(RouteError::Refused(why)) => {
                        warnings.push(format!("disk: irq-cpu={cpu} not applied: {why}"))
                    }
                }
            }
        }
    }
    Ok(Box::new(DiskPrepared {
        o: o.clone(),
        readers,
        route,
        pin_readers,
        device,
        irq_on_cpu,
        warnings,
        layout,
    }))
}

fn drop_cache(f: &File) {
    // SAFETY: advisory call on a valid fd.
    unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
}

struct ReaderReport {
    bytes: u64,
    reads: u64,
    busy: Duration,
    max: Duration,
    cpu: Duration,
    ended: Instant,
    error: Option<String>,
    warning: Option<String>,
}

struct DiskRunning {
    o: DiskOpts,
    start: Instant,
    handles: Vec<JoinHandle<ReaderReport>>,
    route: Option<IrqRoute>,
    pin_readers: Option<u32>,
    device: Option<String>,
    irq_on_cpu: bool,
    warnings: Vec<String>,
    layout: Duration,
}

impl Prepared for DiskPrepared {
    fn start(self: Box<Self>, ctl: Ctl) -> Box<dyn Running> {
        let o = self.o;
        let qd = self.readers.len() as u64;
        let blocks = (o.size_bytes / o.block_bytes as u64).max(1);
        let mut handles = Vec::new();
        for (i, f) in self.readers.into_iter().enumerate() {
            let c = ctl.clone();
            let (bs, pattern, direct) = (o.block_bytes, o.pattern, o.direct);
            let cpus = match self.pin_readers {
                Some(cpu) => vec![cpu],
                None => nth_cpu(&o.cpus, i),
            };
            handles.push(
                std::thread::Builder::new()
                    .name(format!("pl-disk{i}"))
                    .spawn(move || {
                        let warning = place("disk reader", &cpus);
                        let mut buf = AlignedBuf::new(bs);
                        let mut rng = XorShift::new(0x2545_f491_4f6c_dd1d ^ (i as u64 + 1));
                        // Sequential readers start spread over the file.
                        let first = blocks * i as u64 / qd;
                        let mut next = first;
                        let (mut bytes, mut reads) = (0u64, 0u64);
                        let (mut busy, mut max) = (Duration::ZERO, Duration::ZERO);
                        let mut since_drop = 0u64;
                        let mut error = None;
                        while !c.done() {
                            let blk = match pattern {
                                Pattern::Seq => {
                                    let b = next;
                                    next = (next + 1) % blocks;
                                    b
                                }
                                Pattern::Rand => rng.next_u64() % blocks,
                            };
                            let t = Instant::now();
                            match f.read_at(buf.as_mut(), blk * bs as u64) {
                                Ok(n) => {
                                    let d = t.elapsed();
                                    busy += d;
                                    max = max.max(d);
                                    bytes += n as u64;
                                    reads += 1;
                                }
                                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                                Err(e) => {
                                    error = Some(format!("disk: read failed: {e}"));
                                    break;
                                }
                            }
                            since_drop += 1;
                            if !direct && since_drop >= blocks {
                                drop_cache(&f);
                                since_drop = 0;
                            }
                        }
                        ReaderReport {
                            bytes,
                            reads,
                            busy,
                            max,
                            cpu: thread_cpu_time(),
                            ended: Instant::now(),
                            error,
                            warning,
                        }
                    })
                    .expect("spawn disk reader"),
            );
        }
        Box::new(DiskRunning {
            o,
            start: ctl.start,
            handles,
            route: self.route,
            pin_readers: self.pin_readers,
            device: self.device,
            irq_on_cpu: self.irq_on_cpu,
            warnings: self.warnings,
            layout: self.layout,
        })
    }
}

impl Running for DiskRunning {
    fn finish(mut self: Box<Self>) -> Outcome {
        let mut out = Outcome {
            warnings: std::mem::take(&mut self.warnings),
            ..Default::default()
        };
        let mut rs = Vec::new();
        for h in std::mem::take(&mut self.handles) {
            match h.join() {
                Ok(r) => rs.push(r),
                Err(_) => out.warnings.push("disk: a reader panicked".into()),
            }
        }
        let irqs = self.route.as_ref().map(|r| r.irqs()).unwrap_or_default();
        if let Some(mut r) = self.route.take() {
            out.warnings.extend(r.restore());
        }
        for r in &rs {
            for w in [&r.error, &r.warning].into_iter().flatten() {
                if !out.warnings.contains(w) {
                    out.warnings.push(w.clone());
                }
            }
        }
        let end = rs
            .iter()
            .map(|r| r.ended)
            .max()
            .unwrap_or_else(Instant::now);
        let wall = secs(end.saturating_duration_since(self.start)).max(1e-9);
        let bytes: u64 = rs.iter().map(|r| r.bytes).sum();
        let reads: u64 = rs.iter().map(|r| r.reads).sum();
        let busy: f64 = rs.iter().map(|r| secs(r.busy)).sum();
        let max = rs.iter().map(|r| r.max).max().unwrap_or_default();
        let cpu: f64 = rs.iter().map(|r| secs(r.cpu)).sum();
        out.set("duration_s", wall);
        out.set("mb_per_s", bytes as f64 / wall / 1e6);
        out.set("iops", reads as f64 / wall);
        out.set("bytes_read", bytes as f64);
        if reads > 0 {
            out.set("read_latency_mean_us", busy / reads as f64 * 1e6);
        }
        out.set("read_latency_max_us", secs(max) * 1e6);
        out.set("block_bytes", self.o.block_bytes as f64);
        out.set("size_bytes", self.o.size_bytes as f64);
        out.set("queue_depth", self.o.queue_depth as f64);
        out.set("direct", if self.o.direct { 1.0 } else { 0.0 });
        out.set("layout_s", secs(self.layout));
        out.set(
            "cpu_fraction",
            cpu / wall / crate::util::online_cpus().len().max(1) as f64,
        );
        if let Some(c) = self.o.irq_cpu {
            out.set("irq_cpu", c as f64);
            out.set("irqs_routed", irqs.len() as f64);
            out.set("irq_on_cpu", if self.irq_on_cpu { 1.0 } else { 0.0 });
            out.set(
                "readers_pinned_to_irq_cpu",
                if self.pin_readers.is_some() { 1.0 } else { 0.0 },
            );
        }
        if let Some(d) = &self.device {
            if !irqs.is_empty() {
                out.warnings.push(format!(
                    "disk: routed IRQ(s) {irqs:?} of {d} to CPU {} for the run; restored",
                    self.o.irq_cpu.unwrap_or_default()
                ));
            }
        }
        out
    }
}
