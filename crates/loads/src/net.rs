//! `net`: a TTCP/NTttcp-style TCP stream, or paced UDP, over 127.0.0.1.
//!
//! Every socket is bound or connected to 127.0.0.1 and the address is
//! checked before use: this load never sends a byte off the machine. The
//! kernel's loopback path still runs the full TCP/UDP stack and its softirq
//! receive work, which is the stolen time Regehr's thesis measured under Netperf.

use std::io::{self, Read, Write};
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, TcpListener, TcpStream, UdpSocket};
use std::os::fd::{AsRawFd, FromRawFd, RawFd};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::spec::NetOpts;
use crate::util::{place, secs, thread_cpu_time, Ctl, Outcome};
use crate::{LoadError, Prepared, Running};

const LOOPBACK: Ipv4Addr = Ipv4Addr::LOCALHOST;

fn ensure_loopback(addr: SocketAddr) -> Result<(), LoadError> {
    if addr.ip().is_loopback() {
        Ok(())
    } else {
        Err(LoadError::Runtime(format!(
            "net: refusing to send to {addr}, which is not loopback"
        )))
    }
}

fn setsockopt_int(fd: RawFd, level: i32, name: i32, v: i32) -> io::Result<()> {
    // SAFETY: v lives across the call and its size is passed.
    let r = unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            &v as *const i32 as *const libc::c_void,
            std::mem::size_of::<i32>() as libc::socklen_t,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

fn getsockopt_int(fd: RawFd, level: i32, name: i32) -> Option<i32> {
    let mut v: i32 = 0;
    let mut len = std::mem::size_of::<i32>() as libc::socklen_t;
    // SAFETY: v and len are valid out-parameters of the announced size.
    let r = unsafe {
        libc::getsockopt(
            fd,
            level,
            name,
            &mut v as *mut i32 as *mut libc::c_void,
            &mut len,
        )
    };
    (r == 0).then_some(v)
}

/// Socket buffer sizes must be set before connect/listen to shape the TCP
/// window (scale is fixed at the handshake), hence the raw socket.
fn set_bufs(fd: RawFd, snd: Option<usize>, rcv: Option<usize>) -> io::Result<()> {
    if let Some(b) = snd {
        setsockopt_int(fd, libc::SOL_SOCKET, libc::SO_SNDBUF, b as i32)?;
    }
    if let Some(b) = rcv {
        setsockopt_int(fd, libc::SOL_SOCKET, libc::SO_RCVBUF, b as i32)?;
    }
    Ok(())
}

fn tcp_connect(addr: SocketAddrV4, o: &NetOpts) -> io::Result<TcpStream> {
    // SAFETY: plain socket(2); the fd is owned by the TcpStream below.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fd is a fresh socket we own.
    let stream = unsafe { TcpStream::from_raw_fd(fd) };
    set_bufs(fd, o.sndbuf_bytes, o.rcvbuf_bytes)?;
    let sa = libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: addr.port().to_be(),
        sin_addr: libc::in_addr {
            s_addr: u32::from(*addr.ip()).to_be(),
        },
        sin_zero: [0; 8],
    };
    // SAFETY: sa is a valid sockaddr_in of the announced size.
    let r = unsafe {
        libc::connect(
            fd,
            &sa as *const libc::sockaddr_in as *const libc::sockaddr,
            std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
        )
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(stream)
}

pub(crate) fn prepare(o: &NetOpts) -> Result<Box<dyn Prepared>, LoadError> {
    if o.udp {
        prepare_udp(o)
    } else {
        prepare_tcp(o)
    }
}

struct TcpPrepared {
    o: NetOpts,
    pairs: Vec<(TcpStream, TcpStream)>,
}

fn prepare_tcp(o: &NetOpts) -> Result<Box<dyn Prepared>, LoadError> {
    let rt = |what: &str, e: io::Error| LoadError::Runtime(format!("net: {what}: {e}"));
    let listener = TcpListener::bind(SocketAddrV4::new(LOOPBACK, 0))
        .map_err(|e| rt("listen on 127.0.0.1", e))?;
    // Accepted sockets inherit the listener's receive buffer.
    set_bufs(listener.as_raw_fd(), o.sndbuf_bytes, o.rcvbuf_bytes)
        .map_err(|e| rt("set socket buffer sizes", e))?;
    let addr = match listener.local_addr().map_err(|e| rt("local address", e))? {
        SocketAddr::V4(a) => a,
        other => {
            return Err(LoadError::Runtime(format!(
                "net: unexpected address {other}"
            )))
        }
    };
    ensure_loopback(SocketAddr::V4(addr))?;
    let mut pairs = Vec::new();
    for _ in 0..o.streams {
        let tx = tcp_connect(addr, o).map_err(|e| rt("connect to 127.0.0.1", e))?;
        let (rx, peer) = listener.accept().map_err(|e| rt("accept", e))?;
        ensure_loopback(peer)?;
        ensure_loopback(tx.peer_addr().map_err(|e| rt("peer address", e))?)?;
        // Timeouts only so that a stalled peer cannot keep a thread past
        // the deadline; in steady state the calls never wait this long.
        let t = Some(Duration::from_millis(100));
        tx.set_write_timeout(t).map_err(|e| rt("timeout", e))?;
        rx.set_read_timeout(t).map_err(|e| rt("timeout", e))?;
        let _ = tx.set_nodelay(false);
        pairs.push((tx, rx));
    }
    Ok(Box::new(TcpPrepared {
        o: o.clone(),
        pairs,
    }))
}

struct SideReport {
    bytes: u64,
    messages: u64,
    cpu: Duration,
    ended: Instant,
    warning: Option<String>,
}

struct TcpRunning {
    o: NetOpts,
    start: Instant,
    snd_buf: Option<i32>,
    rcv_buf: Option<i32>,
    tx: Vec<JoinHandle<SideReport>>,
    rx: Vec<JoinHandle<SideReport>>,
}

impl Prepared for TcpPrepared {
    fn start(self: Box<Self>, ctl: Ctl) -> Box<dyn Running> {
        let o = self.o;
        let snd_buf = self
            .pairs
            .first()
            .and_then(|(t, _)| getsockopt_int(t.as_raw_fd(), libc::SOL_SOCKET, libc::SO_SNDBUF));
        let rcv_buf = self
            .pairs
            .first()
            .and_then(|(_, r)| getsockopt_int(r.as_raw_fd(), libc::SOL_SOCKET, libc::SO_RCVBUF));
        let mut tx = Vec::new();
        let mut rx = Vec::new();
        for (i, (mut ts, mut rs)) in self.pairs.into_iter().enumerate() {
            let c = ctl.clone();
            let msg = o.msg_bytes;
            let cpu = o.tx_cpu;
            tx.push(
                std::thread::Builder::new()
                    .name(format!("pl-net-tx{i}"))
                    .spawn(move || {
                        let warning = cpu.and_then(|c| place("net sender", &[c]));
                        let buf = vec![0x5au8; msg];
                        let (mut bytes, mut messages) = (0u64, 0u64);
                        let mut off = 0usize;
                        while !c.done() {
                            match ts.write(&buf[off..]) {
                                Ok(0) => break,
                                Ok(n) => {
                                    bytes += n as u64;
                                    off += n;
                                    if off == msg {
                                        off = 0;
                                        messages += 1;
                                    }
                                }
                                Err(e)
                                    if matches!(
                                        e.kind(),
                                        io::ErrorKind::WouldBlock
                                            | io::ErrorKind::TimedOut
                                            | io::ErrorKind::Interrupted
                                    ) => {}
                                Err(_) => break,
                            }
                        }
                        let _ = ts.shutdown(std::net::Shutdown::Write);
                        SideReport {
                            bytes,
                            messages,
                            cpu: thread_cpu_time(),
                            ended: Instant::now(),
                            warning,
                        }
                    })
                    .expect("spawn net sender"),
            );
            let c = ctl.clone();
            let cpu = o.rx_cpu;
            let cap = msg.max(128 * 1024);
            rx.push(
                std::thread::Builder::new()
                    .name(format!("pl-net-rx{i}"))
                    .spawn(move || {
                        let warning = cpu.and_then(|c| place("net receiver", &[c]));
                        let mut buf = vec![0u8; cap];
                        let mut bytes = 0u64;
                        let mut ended = Instant::now();
                        loop {
                            match rs.read(&mut buf) {
                                Ok(0) => break,
                                Ok(n) => {
                                    bytes += n as u64;
                                    ended = Instant::now();
                                }
                                Err(e)
                                    if matches!(
                                        e.kind(),
                                        io::ErrorKind::WouldBlock
                                            | io::ErrorKind::TimedOut
                                            | io::ErrorKind::Interrupted
                                    ) =>
                                {
                                    // The sender normally ends the stream;
                                    // give up a second after the deadline.
                                    if c.done() && c.deadline.elapsed() > Duration::from_secs(1) {
                                        break;
                                    }
                                }
                                Err(_) => break,
                            }
                        }
                        SideReport {
                            bytes,
                            messages: 0,
                            cpu: thread_cpu_time(),
                            ended,
                            warning,
                        }
                    })
                    .expect("spawn net receiver"),
            );
        }
        Box::new(TcpRunning {
            o,
            start: ctl.start,
            snd_buf,
            rcv_buf,
            tx,
            rx,
        })
    }
}

fn join_all(v: Vec<JoinHandle<SideReport>>, out: &mut Outcome) -> Vec<SideReport> {
    let mut r = Vec::new();
    for h in v {
        match h.join() {
            Ok(s) => {
                if let Some(w) = &s.warning {
                    if !out.warnings.contains(w) {
                        out.warnings.push(w.clone());
                    }
                }
                r.push(s)
            }
            Err(_) => out.warnings.push("net: a worker thread panicked".into()),
        }
    }
    r
}

impl Running for TcpRunning {
    fn finish(self: Box<Self>) -> Outcome {
        let mut out = Outcome::default();
        let tx = join_all(self.tx, &mut out);
        let rx = join_all(self.rx, &mut out);
        let end = rx
            .iter()
            .chain(tx.iter())
            .map(|s| s.ended)
            .max()
            .unwrap_or_else(Instant::now);
        let wall = secs(end.saturating_duration_since(self.start)).max(1e-9);
        let rx_bytes: u64 = rx.iter().map(|s| s.bytes).sum();
        let msgs: u64 = tx.iter().map(|s| s.messages).sum();
        let n = self.o.streams.max(1) as f64;
        let tx_cpu: f64 = tx.iter().map(|s| secs(s.cpu)).sum();
        let rx_cpu: f64 = rx.iter().map(|s| secs(s.cpu)).sum();
        out.set("duration_s", wall);
        out.set("throughput_gbit_s", rx_bytes as f64 * 8.0 / wall / 1e9);
        out.set("bytes_received", rx_bytes as f64);
        out.set("messages_per_s", msgs as f64 / wall);
        out.set("msg_bytes", self.o.msg_bytes as f64);
        out.set("streams", n);
        out.set("sender_cpu_fraction", tx_cpu / wall / n);
        out.set("receiver_cpu_fraction", rx_cpu / wall / n);
        out.set(
            "cpu_fraction",
            (tx_cpu + rx_cpu) / wall / crate::util::online_cpus().len().max(1) as f64,
        );
        if let Some(b) = self.snd_buf {
            out.set("sndbuf_bytes", b as f64);
        }
        if let Some(b) = self.rcv_buf {
            out.set("rcvbuf_bytes", b as f64);
        }
        out
    }
}

struct UdpPrepared {
    o: NetOpts,
    tx: UdpSocket,
    rx: UdpSocket,
}

fn prepare_udp(o: &NetOpts) -> Result<Box<dyn Prepared>, LoadError> {
    let rt = |what: &str, e: io::Error| LoadError::Runtime(format!("net udp: {what}: {e}"));
    let rx =
        UdpSocket::bind(SocketAddrV4::new(LOOPBACK, 0)).map_err(|e| rt("bind 127.0.0.1", e))?;
    set_bufs(rx.as_raw_fd(), None, o.rcvbuf_bytes).map_err(|e| rt("SO_RCVBUF", e))?;
    let tx =
        UdpSocket::bind(SocketAddrV4::new(LOOPBACK, 0)).map_err(|e| rt("bind 127.0.0.1", e))?;
    set_bufs(tx.as_raw_fd(), o.sndbuf_bytes, None).map_err(|e| rt("SO_SNDBUF", e))?;
    let to = rx.local_addr().map_err(|e| rt("local address", e))?;
    ensure_loopback(to)?;
    tx.connect(to).map_err(|e| rt("connect", e))?;
    ensure_loopback(tx.peer_addr().map_err(|e| rt("peer address", e))?)?;
    rx.set_read_timeout(Some(Duration::from_millis(50)))
        .map_err(|e| rt("timeout", e))?;
    tx.set_write_timeout(Some(Duration::from_millis(100)))
        .map_err(|e| rt("timeout", e))?;
    Ok(Box::new(UdpPrepared {
        o: o.clone(),
        tx,
        rx,
    }))
}

struct UdpRunning {
    o: NetOpts,
    start: Instant,
    rcvbuf: Option<i32>,
    tx: JoinHandle<(SideReport, u64)>,
    rx: JoinHandle<(SideReport, u64)>,
    tx_done: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl Prepared for UdpPrepared {
    fn start(self: Box<Self>, ctl: Ctl) -> Box<dyn Running> {
        use std::sync::atomic::{AtomicBool, Ordering};
        let o = self.o;
        let rcvbuf = getsockopt_int(self.rx.as_raw_fd(), libc::SOL_SOCKET, libc::SO_RCVBUF);
        let tx_done = std::sync::Arc::new(AtomicBool::new(false));
        let c = ctl.clone();
        let (rate, pkt, cpu) = (o.rate_pps, o.packet_bytes, o.tx_cpu);
        let sock = self.tx;
        let done_flag = tx_done.clone();
        let tx = std::thread::Builder::new()
            .name("pl-udp-tx".into())
            .spawn(move || {
                let warning = cpu.and_then(|c| place("udp sender", &[c]));
                let mut buf = vec![0u8; pkt];
                let mut sent = 0u64;
                let mut send_errors = 0u64;
                let t0 = Instant::now();
                while !c.done() {
                    let due = if rate == 0 {
                        sent + 64
                    } else {
                        (t0.elapsed().as_nanos() * rate as u128 / 1_000_000_000) as u64
                    };
                    let mut batch = 0;
                    while sent < due && batch < 4096 {
                        buf[..8].copy_from_slice(&sent.to_le_bytes());
                        match sock.send(&buf) {
                            Ok(_) => {}
                            Err(_) => send_errors += 1,
                        }
                        sent += 1;
                        batch += 1;
                    }
                    if rate != 0 && sent >= due {
                        // Sleep until the next packet is due; bursts catch
                        // up after a late wake-up so the mean rate holds.
                        let next_ns = (sent + 1) as u128 * 1_000_000_000 / rate as u128;
                        let now_ns = t0.elapsed().as_nanos();
                        if next_ns > now_ns {
                            let d = Duration::from_nanos((next_ns - now_ns).min(1_000_000) as u64);
                            std::thread::sleep(d.min(c.left()));
                        }
                    }
                }
                done_flag.store(true, Ordering::Release);
                (
                    SideReport {
                        bytes: sent * pkt as u64,
                        messages: sent,
                        cpu: thread_cpu_time(),
                        ended: Instant::now(),
                        warning,
                    },
                    send_errors,
                )
            })
            .expect("spawn udp sender");
        let c = ctl.clone();
        let (drain, cpu) = (o.drain, o.rx_cpu);
        let sock = self.rx;
        let done_flag = tx_done.clone();
        let rx = std::thread::Builder::new()
            .name("pl-udp-rx".into())
            .spawn(move || {
                let warning = cpu.and_then(|c| place("udp receiver", &[c]));
                let mut buf = vec![0u8; 65536];
                let (mut got, mut bytes, mut max_seq) = (0u64, 0u64, 0u64);
                let mut ended = Instant::now();
                let mut take = |n: usize, buf: &[u8]| {
                    got += 1;
                    bytes += n as u64;
                    if n >= 8 {
                        let mut s = [0u8; 8];
                        s.copy_from_slice(&buf[..8]);
                        max_seq = max_seq.max(u64::from_le_bytes(s));
                    }
                    ended = Instant::now();
                };
                loop {
                    let sender_done = done_flag.load(Ordering::Acquire);
                    if sender_done || (drain.0 > 0) {
                        if !sender_done {
                            // Basham's consumer: sleep, then empty the queue.
                            std::thread::sleep(drain.to_std().min(c.left()));
                        }
                        let _ = sock.set_nonblocking(true);
                        while let Ok(n) = sock.recv(&mut buf) {
                            take(n, &buf);
                        }
                        let _ = sock.set_nonblocking(false);
                        if sender_done {
                            break;
                        }
                    } else if let Ok(n) = sock.recv(&mut buf) {
                        take(n, &buf);
                    }
                    if c.done() && c.deadline.elapsed() > Duration::from_secs(2) {
                        break;
                    }
                }
                let _ = max_seq;
                (
                    SideReport {
                        bytes,
                        messages: got,
                        cpu: thread_cpu_time(),
                        ended,
                        warning,
                    },
                    max_seq,
                )
            })
            .expect("spawn udp receiver");
        Box::new(UdpRunning {
            o,
            start: ctl.start,
            rcvbuf,
            tx,
            rx,
            tx_done,
        })
    }
}

impl Running for UdpRunning {
    fn finish(self: Box<Self>) -> Outcome {
        let mut out = Outcome::default();
        let (tx, send_errors) = match self.tx.join() {
            Ok(v) => v,
            Err(_) => {
                out.warnings.push("net udp: sender panicked".into());
                return out;
            }
        };
        self.tx_done
            .store(true, std::sync::atomic::Ordering::Release);
        let (rx, _max_seq) = match self.rx.join() {
            Ok(v) => v,
            Err(_) => {
                out.warnings.push("net udp: receiver panicked".into());
                return out;
            }
        };
        for w in [&tx.warning, &rx.warning].into_iter().flatten() {
            out.warnings.push(w.clone());
        }
        let wall = secs(tx.ended.saturating_duration_since(self.start)).max(1e-9);
        let sent = tx.messages;
        let got = rx.messages;
        let lost = sent.saturating_sub(got);
        out.set("duration_s", wall);
        out.set("sent_packets", sent as f64);
        out.set("received_packets", got as f64);
        out.set("lost_packets", lost as f64);
        out.set(
            "loss_fraction",
            if sent > 0 {
                lost as f64 / sent as f64
            } else {
                0.0
            },
        );
        out.set("packets_per_s", got as f64 / wall);
        out.set("sent_packets_per_s", sent as f64 / wall);
        out.set("send_errors", send_errors as f64);
        out.set("throughput_gbit_s", rx.bytes as f64 * 8.0 / wall / 1e9);
        out.set("packet_bytes", self.o.packet_bytes as f64);
        if self.o.rate_pps > 0 {
            out.set("rate_asked_pps", self.o.rate_pps as f64);
        }
        if let Some(b) = self.rcvbuf {
            // The kernel doubles what SO_RCVBUF asks for (bookkeeping
            // overhead); this is the size it really uses.
            out.set("rcvbuf_bytes", b as f64);
        }
        out.set("drain_ms", self.o.drain.as_ms_f64());
        out.set("sender_cpu_fraction", secs(tx.cpu) / wall);
        out.set("receiver_cpu_fraction", secs(rx.cpu) / wall);
        out
    }
}
