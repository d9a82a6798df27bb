//! # commbench-tcp: raw TCP sockets
//!
//! The "Gigabit Ethernet" class of transport: a full mesh of TCP connections between the ranks
//! of a run, with MPI-like tag matching from [`commbench_core::transport::matching`].
//!
//! * **Bootstrap.** Ranks meet at rank 0's rendezvous ([`commbench_core::launch::rendezvous`]). Each rank
//!   listens on an ephemeral port on the interface it reached the rendezvous from (or
//!   [`TcpConfig::bind_host`]), the addresses are exchanged by an allgather, and rank `i`
//!   connects to every rank below it and accepts every rank above it. Every data connection
//!   presents the bootstrap hello (magic, version, token, rank, size); anything else is refused
//!   and logged, and the run goes on. `TCP_NODELAY` is set on every socket.
//! * **Framing.** A 16-byte header (payload length `u64`, tag `u32`, flags `u32`, little-endian)
//!   followed by the payload. The header is matched on arrival (seed 004's posted-receive and
//!   unexpected queues, as MPI does): a posted receive gets the payload read straight into its
//!   buffer (small messages through a 64 KiB staging buffer, so one `read(2)` brings header and
//!   payload; large ones directly), an unmatched message goes to a pooled unexpected buffer.
//!   Sends are eager: the header and payload leave in one system call when the socket has
//!   room (a frame of at most [`SMALL_FRAME`] bytes copied together and sent with `send(2)`,
//!   a larger one as a `sendmsg(2)` gather write), and what does not fit is queued and
//!   written as the socket drains, while incoming data keeps being read, so two ranks that send large messages to each other at the
//!   same time (COMMS2 exchange, seed 002) never deadlock.
//! * **Modes** ([`TcpConfig::poll`]). *Blocking*: waits sleep in the kernel, in `read(2)` on the
//!   only connection of a two-rank run with nothing to write, otherwise in `epoll_wait(2)`, each
//!   bounded by the timeout. *Poll*: non-blocking sockets and a spin on `recv(MSG_DONTWAIT)`
//!   that never sleeps. Both are recorded by [`Endpoint::info`].
//! * **Self-sends** (`dest == rank`) are supported: the message is matched or queued locally
//!   and the send completes at once.
//! * **Failures.** End-of-file or a reset on a connection whose peer did not say goodbye is
//!   [`Error::PeerLost`] naming the peer; a wait that sees no completion within
//!   [`TcpConfig::timeout`] is [`Error::Timeout`] naming the awaited peer. A run ends with a
//!   goodbye exchange ([`TcpEndpoint::finish`]) so that no rank closes while messages to or from
//!   it are still in flight.

use commbench_core::launch::affinity;
use commbench_core::launch::rendezvous::{self as rendezvous, Bootstrap, Listener, Rendezvous};
use commbench_core::launch::RankEnv;
use commbench_core::transport::matching::{Matcher, ReqTable};
use commbench_core::transport::{
    BackendInfo, Completion, Endpoint, OpKind, Program, Rank, ReqId, Src, Tag, TagSel,
};
use commbench_core::{Error, Result};
use nix::errno::Errno;
use nix::sys::epoll::{Epoll, EpollCreateFlags, EpollEvent, EpollFlags};
use nix::sys::socket::{recv, send, sendmsg, MsgFlags, SockaddrStorage};
use std::collections::VecDeque;
use std::io::IoSlice;
use std::net::{SocketAddr, TcpStream};
use std::os::fd::{AsFd, AsRawFd, RawFd};
use std::time::{Duration, Instant};

/// Bytes of the frame header: payload length (`u64`), tag (`u32`), flags (`u32`).
pub const HEADER_BYTES: usize = 16;
/// Size of each connection's receive staging buffer.
pub const RX_BUFFER_BYTES: usize = 64 << 10;
/// Payloads at least this long are read straight into the receive buffer, bypassing staging.
const DIRECT_READ: usize = RX_BUFFER_BYTES / 2;
/// Sends at least this long first release an acknowledgement the kernel is holding back (see
/// [`Conn::quickack`]). Below it the extra ACK costs more than it saves: on loopback 64 and
/// 96 KiB ping-pongs were slower with it, 128 KiB the same, 192 KiB and more faster.
const QUICKACK_MIN: usize = 128 << 10;
/// Frames (header included) up to this size leave through `send(2)` from one contiguous copy
/// instead of a two-element `sendmsg(2)`. Measured with both ranks on one CPU (no wake-up
/// interrupt in the way): an 8-byte one-way time 0.22 us shorter (median of 10 interleaved
/// rounds, 9 of them faster), out of about 7.6 us; copying this little costs far less.
pub const SMALL_FRAME: usize = 512;
/// Header flag: the sender has finished and will send nothing more.
const FLAG_BYE: u32 = 1;
/// Largest message a peer may announce (64 GiB): a corrupted header cannot make a rank try to
/// allocate more for an unexpected message.
const MAX_MESSAGE: u64 = 1 << 36;
/// Longest single sleep in a blocking wait, so that the deadline is checked regularly.
const SLEEP_SLICE: Duration = Duration::from_millis(200);

/// How a TCP endpoint runs.
#[derive(Debug, Clone)]
pub struct TcpConfig {
    /// Busy-poll (non-blocking sockets, spin on `recv(MSG_DONTWAIT)`) instead of sleeping in
    /// the kernel while waiting.
    pub poll: bool,
    /// How long a wait (or a bootstrap step) may see no completion before it is an error.
    pub timeout: Duration,
    /// Interface (host name or address) to listen on for data connections; by default the
    /// one this rank reached the rendezvous from (`127.0.0.1` for [`run_threads`]).
    pub bind_host: Option<String>,
    /// CPUs to pin ranks to (`--cpus`): rank `i` goes to `cpus[i % len]`; empty: no pinning.
    pub cpus: Vec<usize>,
}

impl Default for TcpConfig {
    fn default() -> Self {
        TcpConfig {
            poll: false,
            timeout: Duration::from_secs(30),
            bind_host: None,
            cpus: Vec::new(),
        }
    }
}

fn header(len: usize, tag: Tag, flags: u32) -> [u8; HEADER_BYTES] {
    let mut h = [0u8; HEADER_BYTES];
    h[..8].copy_from_slice(&(len as u64).to_le_bytes());
    h[8..12].copy_from_slice(&tag.to_le_bytes());
    h[12..].copy_from_slice(&flags.to_le_bytes());
    h
}

/// A send that did not fit in the socket at once.
#[derive(Debug)]
struct SendOp {
    /// `None` for the goodbye frame.
    req: Option<ReqId>,
    hdr: [u8; HEADER_BYTES],
    buf: Vec<u8>,
    tag: Tag,
    /// Bytes of header + payload already written.
    off: usize,
}

/// Where the bytes of the message being received go.
#[derive(Debug)]
enum Rx {
    /// Between messages: the next bytes are a header.
    Header,
    /// Into a posted receive's buffer.
    Posted {
        req: ReqId,
        buf: Vec<u8>,
        tag: Tag,
        len: usize,
        got: usize,
    },
    /// Into an unexpected-message buffer.
    Unexpected { tag: Tag, data: Vec<u8>, got: usize },
    /// Dropped (the payload of a truncated receive).
    Discard { left: usize },
}

/// One connection to a peer.
#[derive(Debug)]
struct Conn {
    peer: Rank,
    stream: TcpStream,
    fd: RawFd,
    sendq: VecDeque<SendOp>,
    rx: Rx,
    rbuf: Box<[u8]>,
    rs: usize,
    re: usize,
    /// The peer said goodbye: it sends nothing more.
    bye_in: bool,
    /// End of file after the goodbye: the connection is finished.
    closed: bool,
    /// Whether `EPOLLOUT` is in this connection's epoll interest.
    epollout: bool,
    /// Whether the connection is registered with epoll.
    watched: bool,
}

impl Conn {
    fn new(peer: Rank, stream: TcpStream, cfg: &TcpConfig) -> Result<Conn> {
        let ctx = |e| Error::io(format!("configuring the connection to rank {peer}"), e);
        stream.set_nodelay(true).map_err(ctx)?;
        stream.set_nonblocking(cfg.poll).map_err(ctx)?;
        // Bounds each sleep in read(2) of the blocking fast path; the wait checks its deadline.
        stream
            .set_read_timeout(Some(
                SLEEP_SLICE.min(cfg.timeout).max(Duration::from_millis(1)),
            ))
            .map_err(ctx)?;
        let fd = stream.as_raw_fd();
        Ok(Conn {
            peer,
            stream,
            fd,
            sendq: VecDeque::with_capacity(16),
            rx: Rx::Header,
            rbuf: vec![0u8; RX_BUFFER_BYTES].into_boxed_slice(),
            rs: 0,
            re: 0,
            bye_in: false,
            closed: false,
            epollout: false,
            watched: true,
        })
    }

    /// Send now the acknowledgement Linux is holding back for what this connection last
    /// received (a delayed ACK), and leave its delayed-ACK "ping-pong" mode (`TCP_QUICKACK`).
    /// Called before a large message leaves. When a rank has just received a small message (the
    /// handshake, a barrier) and then sends a large one, the held-back ACK otherwise rides on
    /// the large message, and Linux then moves the whole message markedly slower: on loopback
    /// the first 4 MiB ping-pong after the handshake took up to three times as long as the ones
    /// that followed it, which NetPIPE, with no handshake between its ping-pongs, never meets.
    /// One `setsockopt(2)` per large send.
    fn quickack(&self) -> Result<()> {
        socket2::SockRef::from(&self.stream)
            .set_quickack(true)
            .map_err(|e| {
                Error::io(
                    format!("setting TCP_QUICKACK towards rank {}", self.peer),
                    e,
                )
            })
    }

    fn lost(&self, detail: impl Into<String>) -> Error {
        Error::PeerLost {
            peer: self.peer,
            detail: detail.into(),
        }
    }

    /// One non-blocking write of header + payload from `off` (a small whole frame from one
    /// contiguous copy, otherwise a gather write); bytes written.
    fn write_from(&self, hdr: &[u8; HEADER_BYTES], buf: &[u8], off: usize) -> Result<usize> {
        let flags = MsgFlags::MSG_DONTWAIT | MsgFlags::MSG_NOSIGNAL;
        loop {
            let r = if off == 0 && buf.len() <= SMALL_FRAME - HEADER_BYTES {
                // A small frame leaves from one contiguous buffer through send(2): the
                // kernel's path for one plain buffer is shorter than sendmsg(2)'s for an
                // iovec array, and copying a few hundred bytes costs less than the difference.
                let mut frame = [0u8; SMALL_FRAME];
                frame[..HEADER_BYTES].copy_from_slice(hdr);
                frame[HEADER_BYTES..HEADER_BYTES + buf.len()].copy_from_slice(buf);
                send(self.fd, &frame[..HEADER_BYTES + buf.len()], flags)
            } else if off < HEADER_BYTES {
                let iov = [IoSlice::new(&hdr[off..]), IoSlice::new(buf)];
                sendmsg::<SockaddrStorage>(self.fd, &iov, &[], flags, None)
            } else {
                send(self.fd, &buf[off - HEADER_BYTES..], flags)
            };
            match r {
                Ok(n) => return Ok(n),
                Err(Errno::EAGAIN) => return Ok(0),
                Err(Errno::EINTR) => continue,
                Err(e) => return Err(self.lost(format!("send failed: {e}"))),
            }
        }
    }

    /// Write queued sends until the socket is full; completed sends go to `reqs`.
    fn tx_progress(&mut self, reqs: &mut ReqTable) -> Result<bool> {
        let mut progressed = false;
        while let Some(op) = self.sendq.front() {
            let total = HEADER_BYTES + op.buf.len();
            let n = self.write_from(&op.hdr, &op.buf, op.off)?;
            if n == 0 {
                break;
            }
            progressed = true;
            let done = match self.sendq.front_mut() {
                Some(op) => {
                    op.off += n;
                    op.off >= total
                }
                None => false,
            };
            if !done {
                break;
            }
            if let Some(op) = self.sendq.pop_front() {
                if let Some(req) = op.req {
                    let len = op.buf.len();
                    reqs.complete(
                        req,
                        Ok(Completion {
                            kind: OpKind::Send,
                            buf: op.buf,
                            peer: self.peer,
                            tag: op.tag,
                            len,
                        }),
                    );
                }
            }
        }
        Ok(progressed)
    }

    /// A header arrived: match it and set where its payload goes.
    fn on_header(&mut self, m: &mut Matcher, reqs: &mut ReqTable) -> Result<()> {
        let h = &self.rbuf[self.rs..self.rs + HEADER_BYTES];
        let len = u64::from_le_bytes([h[0], h[1], h[2], h[3], h[4], h[5], h[6], h[7]]);
        let tag = u32::from_le_bytes([h[8], h[9], h[10], h[11]]);
        let flags = u32::from_le_bytes([h[12], h[13], h[14], h[15]]);
        self.rs += HEADER_BYTES;
        if flags == FLAG_BYE && len == 0 {
            self.bye_in = true;
            return Ok(());
        }
        if flags != 0 || len > MAX_MESSAGE || self.bye_in {
            return Err(Error::Protocol(format!(
                "bad frame from rank {}: {len} bytes, tag {tag}, flags {flags:#x}",
                self.peer
            )));
        }
        let len = usize::try_from(len).map_err(|_| {
            Error::Protocol(format!("a {len}-byte message from rank {}", self.peer))
        })?;
        self.rx = match m.match_arrival(self.peer, tag) {
            Some(p) if len > p.buf.len() => {
                reqs.complete(
                    p.req,
                    Err(Error::Truncated {
                        len,
                        cap: p.buf.len(),
                        source_rank: self.peer,
                        tag,
                    }),
                );
                Rx::Discard { left: len }
            }
            Some(p) => Rx::Posted {
                req: p.req,
                buf: p.buf,
                tag,
                len,
                got: 0,
            },
            None => Rx::Unexpected {
                tag,
                data: m.unexpected_buffer(len),
                got: 0,
            },
        };
        Ok(())
    }

    /// The payload is complete: finish the receive or queue the unexpected message.
    fn on_payload(&mut self, m: &mut Matcher, reqs: &mut ReqTable) {
        let peer = self.peer;
        match std::mem::replace(&mut self.rx, Rx::Header) {
            Rx::Posted {
                req, buf, tag, len, ..
            } => reqs.complete(
                req,
                Ok(Completion {
                    kind: OpKind::Recv,
                    buf,
                    peer,
                    tag,
                    len,
                }),
            ),
            Rx::Unexpected { tag, data, .. } => m.deliver(reqs, peer, tag, data),
            Rx::Header | Rx::Discard { .. } => {}
        }
    }

    /// Read what has arrived and process complete frames. With `block`, the first read sleeps
    /// in the kernel (at most the socket's receive timeout). Stops after a short read: the
    /// socket was empty at that instant.
    fn rx_progress(&mut self, m: &mut Matcher, reqs: &mut ReqTable, block: bool) -> Result<bool> {
        let mut progressed = false;
        let mut first = true;
        let mut drained = false;
        loop {
            // 1. Consume staged bytes.
            let avail = self.re - self.rs;
            let complete = match &mut self.rx {
                Rx::Header => {
                    if avail >= HEADER_BYTES {
                        self.on_header(m, reqs)?;
                        progressed = true;
                        continue;
                    }
                    false
                }
                Rx::Posted { buf, len, got, .. } => {
                    let k = avail.min(*len - *got);
                    buf[*got..*got + k].copy_from_slice(&self.rbuf[self.rs..self.rs + k]);
                    *got += k;
                    self.rs += k;
                    *got == *len
                }
                Rx::Unexpected { data, got, .. } => {
                    let k = avail.min(data.len() - *got);
                    data[*got..*got + k].copy_from_slice(&self.rbuf[self.rs..self.rs + k]);
                    *got += k;
                    self.rs += k;
                    *got == data.len()
                }
                Rx::Discard { left } => {
                    let k = avail.min(*left);
                    *left -= k;
                    self.rs += k;
                    *left == 0
                }
            };
            if complete {
                self.on_payload(m, reqs);
                progressed = true;
                continue;
            }
            if self.rs == self.re {
                self.rs = 0;
                self.re = 0;
            }
            // 2. Read more.
            if self.closed || drained {
                return Ok(progressed);
            }
            let flags = if block && first {
                MsgFlags::empty()
            } else {
                MsgFlags::MSG_DONTWAIT
            };
            first = false;
            let direct = self.rs == self.re
                && match &self.rx {
                    Rx::Posted { len, got, .. } => len - got >= DIRECT_READ,
                    Rx::Unexpected { data, got, .. } => data.len() - got >= DIRECT_READ,
                    _ => false,
                };
            let r = if direct {
                let dst = match &mut self.rx {
                    Rx::Posted { buf, len, got, .. } => &mut buf[*got..*len],
                    Rx::Unexpected { data, got, .. } => &mut data[*got..],
                    _ => &mut self.rbuf[..0],
                };
                let want = dst.len();
                recv(self.fd, dst, flags).map(|n| {
                    match &mut self.rx {
                        Rx::Posted { got, .. } | Rx::Unexpected { got, .. } => *got += n,
                        _ => {}
                    }
                    (n, want)
                })
            } else {
                if self.rs > 0 && self.re == self.rbuf.len() {
                    self.rbuf.copy_within(self.rs..self.re, 0);
                    self.re -= self.rs;
                    self.rs = 0;
                }
                let dst = &mut self.rbuf[self.re..];
                let want = dst.len();
                recv(self.fd, dst, flags).map(|n| {
                    self.re += n;
                    (n, want)
                })
            };
            match r {
                Ok((0, want)) if want > 0 => {
                    if self.bye_in {
                        self.closed = true;
                        return Ok(progressed);
                    }
                    return Err(self.lost("connection closed without goodbye"));
                }
                Ok((n, want)) => {
                    progressed = true;
                    drained = n < want;
                }
                Err(Errno::EAGAIN) => return Ok(progressed),
                Err(Errno::EINTR) => {}
                Err(e) => return Err(self.lost(format!("receive failed: {e}"))),
            }
        }
    }
}

/// What a request waits for, to name the peer in a timeout.
#[derive(Debug, Clone, Copy)]
struct Meta {
    kind: OpKind,
    peer: Option<Rank>,
}

/// One rank's TCP endpoint (see the crate documentation).
#[derive(Debug)]
pub struct TcpEndpoint {
    rank: Rank,
    size: u32,
    cfg: TcpConfig,
    /// Indexed by peer rank; `None` for this rank.
    conns: Vec<Option<Conn>>,
    matcher: Matcher,
    reqs: ReqTable,
    meta: Vec<Meta>,
    epoll: Epoll,
    events: [EpollEvent; 16],
    local: Option<SocketAddr>,
    /// The CPU asked for (`--cpus`) and the affinity in effect, for the backend info.
    pinned: Option<usize>,
    affinity: Vec<usize>,
}

impl TcpEndpoint {
    /// Build the mesh of data connections over an established bootstrap: listen, exchange
    /// addresses, connect to lower ranks, accept higher ones (all presenting `token`); then
    /// pin the calling thread as [`TcpConfig::cpus`] says.
    pub fn connect(boot: &mut dyn Rendezvous, token: &str, cfg: &TcpConfig) -> Result<TcpEndpoint> {
        let me = boot.rank();
        let size = boot.size();
        let local_ip = boot.local_ip().unwrap_or_else(rendezvous::host_ip);
        let host = match &cfg.bind_host {
            Some(h) if h.contains(':') && !h.starts_with('[') => format!("[{h}]:0"),
            Some(h) => format!("{h}:0"),
            None => SocketAddr::new(local_ip, 0).to_string(),
        };
        let listener: Listener = Bootstrap::listen(&host)?;
        let mut advertised = listener.local_addr();
        if advertised.ip().is_unspecified() {
            advertised.set_ip(local_ip);
        }
        let all = boot
            .allgather(advertised.to_string().as_bytes())
            .map_err(|e| e.in_phase("exchanging data addresses"))?;
        let mut conns: Vec<Option<Conn>> = (0..size).map(|_| None).collect();
        for peer in 0..me {
            let addr = std::str::from_utf8(&all[peer as usize]).map_err(|_| {
                Error::Protocol(format!("rank {peer} sent a data address that is not text"))
            })?;
            let s = rendezvous::connect_stream(addr, me, peer, size, token, cfg.timeout)
                .map_err(|e| e.in_phase(format!("connecting to rank {peer} at {addr}")))?;
            conns[peer as usize] = Some(Conn::new(peer, s, cfg)?);
        }
        let higher = listener
            .accept_ranks(me, size, me + 1..size, token, cfg.timeout)
            .map_err(|e| e.in_phase("accepting data connections"))?;
        for (i, s) in higher.into_iter().enumerate() {
            let peer = me + 1 + i as Rank;
            conns[peer as usize] = Some(Conn::new(peer, s, cfg)?);
        }
        let epoll = Epoll::new(EpollCreateFlags::EPOLL_CLOEXEC)
            .map_err(|e| Error::io("creating an epoll instance", e.into()))?;
        let pinned = affinity::cpu_for(&cfg.cpus, me);
        let affinity = affinity::pin(pinned)?;
        for c in conns.iter().flatten() {
            epoll
                .add(
                    c.stream.as_fd(),
                    EpollEvent::new(EpollFlags::EPOLLIN, c.peer as u64),
                )
                .map_err(|e| Error::io("registering a connection with epoll", e.into()))?;
        }
        Ok(TcpEndpoint {
            rank: me,
            size,
            cfg: cfg.clone(),
            conns,
            matcher: Matcher::new(),
            reqs: ReqTable::new(),
            meta: Vec::with_capacity(64),
            epoll,
            events: [EpollEvent::empty(); 16],
            local: Some(advertised),
            pinned,
            affinity,
        })
    }

    /// The tag-matching engine (its counters feed the queue benchmarks of seed 004).
    pub fn matcher(&self) -> &Matcher {
        &self.matcher
    }

    fn note(&mut self, req: ReqId, kind: OpKind, peer: Option<Rank>) {
        let i = (req.0 & 0xFFFF_FFFF) as usize;
        if i >= self.meta.len() {
            self.meta.resize(
                i + 1,
                Meta {
                    kind: OpKind::Send,
                    peer: None,
                },
            );
        }
        self.meta[i] = Meta { kind, peer };
    }

    fn check_peer(&self, r: Rank, what: &str) -> Result<()> {
        if r >= self.size {
            return Err(Error::Invalid(format!(
                "{what} rank {r}, but the run has {} ranks",
                self.size
            )));
        }
        Ok(())
    }

    fn conn(&mut self, r: Rank) -> Result<&mut Conn> {
        let me = self.rank;
        self.conns
            .get_mut(r as usize)
            .and_then(Option::as_mut)
            .ok_or_else(|| Error::Invalid(format!("rank {me} has no connection to rank {r}")))
    }

    /// Non-blocking progress on every connection.
    fn progress(&mut self) -> Result<bool> {
        let mut any = false;
        for c in self.conns.iter_mut().flatten() {
            if !c.sendq.is_empty() {
                any |= c.tx_progress(&mut self.reqs)?;
            }
            any |= c.rx_progress(&mut self.matcher, &mut self.reqs, false)?;
        }
        Ok(any)
    }

    /// The only peer of a two-rank run, when a wait can sleep in its `read(2)`: blocking mode,
    /// nothing to write, connection open.
    fn single_reader(&self) -> Option<usize> {
        if self.cfg.poll || self.size != 2 {
            return None;
        }
        let i = (1 - self.rank) as usize;
        match &self.conns[i] {
            Some(c) if c.sendq.is_empty() && !c.closed => Some(i),
            _ => None,
        }
    }

    /// Sleep in `epoll_wait(2)` until a connection can be read or a queued send written, at
    /// most `left`.
    fn sleep(&mut self, left: Duration) -> Result<()> {
        for c in self.conns.iter_mut().flatten() {
            let want_out = !c.sendq.is_empty();
            if c.closed {
                // A finished connection is always readable (end of file): stop watching it.
                if c.watched {
                    let _ = self.epoll.delete(c.stream.as_fd());
                    c.watched = false;
                }
                continue;
            }
            if want_out != c.epollout {
                let mut flags = EpollFlags::EPOLLIN;
                if want_out {
                    flags |= EpollFlags::EPOLLOUT;
                }
                let mut ev = EpollEvent::new(flags, c.peer as u64);
                self.epoll
                    .modify(c.stream.as_fd(), &mut ev)
                    .map_err(|e| Error::io("updating epoll interest", e.into()))?;
                c.epollout = want_out;
            }
        }
        let ms = left.min(SLEEP_SLICE).as_millis().clamp(1, u16::MAX as u128) as u16;
        match self.epoll.wait(&mut self.events, ms) {
            Ok(_) | Err(Errno::EINTR) => Ok(()),
            Err(e) => Err(Error::io("waiting in epoll_wait", e.into())),
        }
    }

    fn timeout_error(&self, req: ReqId) -> Error {
        let i = (req.0 & 0xFFFF_FFFF) as usize;
        let what = match self.meta.get(i) {
            Some(Meta {
                kind: OpKind::Recv,
                peer: Some(p),
            }) => format!("a message from rank {p} (request {})", req.0),
            Some(Meta {
                kind: OpKind::Recv,
                peer: None,
            }) => format!("a message from any rank (request {})", req.0),
            Some(Meta {
                kind: OpKind::Send,
                peer: Some(p),
            }) => format!("rank {p} to take a send (request {})", req.0),
            _ => format!("request {}", req.0),
        };
        Error::Timeout {
            rank: self.rank,
            what,
            timeout: self.cfg.timeout,
        }
    }

    /// A receive from a peer that has finished can never complete.
    fn finished_peer(&self, req: ReqId) -> Option<Error> {
        let i = (req.0 & 0xFFFF_FFFF) as usize;
        let p = self.meta.get(i)?.peer?;
        let c = self.conns.get(p as usize)?.as_ref()?;
        (c.closed && matches!(c.rx, Rx::Header)).then(|| Error::PeerLost {
            peer: p,
            detail: "it finished its run and closed the connection".into(),
        })
    }

    /// End the run cleanly: write every queued send, say goodbye to every peer and wait for
    /// every peer's goodbye, so that no message in flight is lost when the sockets close.
    pub fn finish(mut self) -> Result<()> {
        let start = Instant::now();
        let limit = self.cfg.timeout;
        for c in self.conns.iter_mut().flatten() {
            c.sendq.push_back(SendOp {
                req: None,
                hdr: header(0, 0, FLAG_BYE),
                buf: Vec::new(),
                tag: 0,
                off: 0,
            });
        }
        loop {
            self.progress().map_err(|e| e.in_phase("goodbye"))?;
            let pending: Vec<Rank> = self
                .conns
                .iter()
                .flatten()
                .filter(|c| !c.sendq.is_empty() || !c.bye_in && !c.closed)
                .map(|c| c.peer)
                .collect();
            if pending.is_empty() {
                return Ok(());
            }
            let elapsed = start.elapsed();
            if elapsed >= limit {
                return Err(Error::Timeout {
                    rank: self.rank,
                    what: format!("the goodbye of rank(s) {pending:?}"),
                    timeout: limit,
                });
            }
            if self.cfg.poll {
                std::hint::spin_loop();
            } else {
                self.sleep(limit - elapsed)?;
            }
        }
    }
}

impl Endpoint for TcpEndpoint {
    fn rank(&self) -> Rank {
        self.rank
    }

    fn size(&self) -> u32 {
        self.size
    }

    fn backend(&self) -> &'static str {
        "tcp"
    }

    fn timeout(&self) -> Duration {
        self.cfg.timeout
    }

    fn isend(&mut self, dest: Rank, tag: Tag, buf: Vec<u8>) -> Result<ReqId> {
        self.check_peer(dest, "send to")?;
        let req = self.reqs.alloc();
        self.note(req, OpKind::Send, Some(dest));
        let len = buf.len();
        if dest == self.rank {
            self.matcher.deliver_copy(&mut self.reqs, dest, tag, &buf);
            self.reqs.complete(
                req,
                Ok(Completion {
                    kind: OpKind::Send,
                    buf,
                    peer: dest,
                    tag,
                    len,
                }),
            );
            return Ok(req);
        }
        let TcpEndpoint { conns, reqs, .. } = self;
        let c = conns
            .get_mut(dest as usize)
            .and_then(Option::as_mut)
            .ok_or_else(|| Error::Invalid(format!("no connection to rank {dest}")))?;
        c.sendq.push_back(SendOp {
            req: Some(req),
            hdr: header(len, tag, 0),
            buf,
            tag,
            off: 0,
        });
        if c.sendq.len() == 1 {
            if len >= QUICKACK_MIN {
                c.quickack()?;
            }
            c.tx_progress(reqs)?;
        }
        Ok(req)
    }

    fn irecv(&mut self, src: Src, tag: TagSel, buf: Vec<u8>) -> Result<ReqId> {
        if let Src::Rank(r) = src {
            self.check_peer(r, "receive from")?;
        }
        let req = self.reqs.alloc();
        let peer = match src {
            Src::Rank(r) => Some(r),
            Src::Any => None,
        };
        self.note(req, OpKind::Recv, peer);
        if let Some(res) = self.matcher.post_recv(req, src, tag, buf) {
            self.reqs.complete(req, res);
        }
        Ok(req)
    }

    fn test(&mut self, req: ReqId) -> Result<Option<Completion>> {
        if let Some(c) = self.reqs.take(req)? {
            return Ok(Some(c));
        }
        self.progress()?;
        self.reqs.take(req)
    }

    fn wait(&mut self, req: ReqId) -> Result<Completion> {
        if let Some(c) = self.reqs.take(req)? {
            return Ok(c);
        }
        let start = Instant::now();
        let limit = self.cfg.timeout;
        let mut spins: u32 = 0;
        loop {
            if let Some(i) = self.single_reader() {
                let TcpEndpoint {
                    conns,
                    matcher,
                    reqs,
                    ..
                } = self;
                if let Some(c) = conns[i].as_mut() {
                    c.rx_progress(matcher, reqs, true)?;
                }
            } else {
                self.progress()?;
                if !self.cfg.poll && self.reqs.is_pending(req) {
                    if let Some(e) = self.finished_peer(req) {
                        return Err(e);
                    }
                    let left = limit.saturating_sub(start.elapsed());
                    self.sleep(left)?;
                    self.progress()?;
                }
            }
            if let Some(c) = self.reqs.take(req)? {
                return Ok(c);
            }
            spins = spins.wrapping_add(1);
            if (!self.cfg.poll || spins % 256 == 0) && start.elapsed() >= limit {
                return Err(self
                    .finished_peer(req)
                    .unwrap_or_else(|| self.timeout_error(req)));
            }
        }
    }

    fn send(&mut self, dest: Rank, tag: Tag, buf: Vec<u8>) -> Result<Vec<u8>> {
        // Fast path: nothing queued to `dest`, so the whole frame may leave in one sendmsg(2).
        if dest != self.rank && dest < self.size {
            let c = self.conn(dest)?;
            if c.sendq.is_empty() {
                if buf.len() >= QUICKACK_MIN {
                    c.quickack()?;
                }
                let hdr = header(buf.len(), tag, 0);
                let n = c.write_from(&hdr, &buf, 0)?;
                if n == HEADER_BYTES + buf.len() {
                    return Ok(buf);
                }
                let req = self.reqs.alloc();
                self.note(req, OpKind::Send, Some(dest));
                let c = self.conn(dest)?;
                c.sendq.push_back(SendOp {
                    req: Some(req),
                    hdr,
                    buf,
                    tag,
                    off: n,
                });
                return Ok(self.wait(req)?.buf);
            }
        }
        let r = self.isend(dest, tag, buf)?;
        Ok(self.wait(r)?.buf)
    }

    fn info(&self) -> BackendInfo {
        let mut m = BackendInfo::new();
        let mode = if self.cfg.poll { "poll" } else { "blocking" };
        m.insert("mode".into(), mode.into());
        let wait = if self.cfg.poll {
            "spin on recv(MSG_DONTWAIT), never sleeps"
        } else {
            "sleeps in read(2) (two ranks) or epoll_wait(2)"
        };
        m.insert("wait".into(), wait.into());
        m.insert("nodelay".into(), true.into());
        m.insert("header_bytes".into(), (HEADER_BYTES as u64).into());
        m.insert("rx_buffer_bytes".into(), (RX_BUFFER_BYTES as u64).into());
        m.insert("small_frame_bytes".into(), (SMALL_FRAME as u64).into());
        m.insert("eager".into(), true.into());
        m.insert("self_send".into(), "local queue".into());
        m.insert("timeout_s".into(), self.cfg.timeout.as_secs_f64().into());
        if let Some(a) = self.local {
            m.insert("data_address".into(), a.to_string().into());
        }
        affinity::record(&mut m, self.pinned, &self.affinity);
        m
    }
}

/// Build the endpoint, run `p`, and end with the goodbye exchange.
fn rank_main<P: Program>(
    mut boot: Bootstrap,
    token: &str,
    cfg: &TcpConfig,
    p: &P,
) -> Result<P::Output> {
    let mut ep = TcpEndpoint::connect(&mut boot, token, cfg)?;
    drop(boot);
    let out = p.run(&mut ep)?;
    ep.finish()?;
    Ok(out)
}

/// This process is one rank of a run whose ranks met through another rendezvous (MPI under
/// `mpirun`, so that tcp measures the same processes as the MPI backend): build the mesh over
/// `rdv`, run `p`, close cleanly. Every data connection presents `token`.
pub fn run_rank_over<P: Program>(
    rdv: &mut dyn Rendezvous,
    token: &str,
    cfg: &TcpConfig,
    p: &P,
) -> Result<P::Output> {
    let mut ep = TcpEndpoint::connect(rdv, token, cfg)?;
    let out = p.run(&mut ep)?;
    ep.finish()?;
    Ok(out)
}

fn token_of(env: &RankEnv) -> Result<&str> {
    env.token.as_deref().ok_or_else(|| {
        Error::Config(format!(
            "no run token: set {} to the same secret on every rank",
            commbench_core::launch::ENV_TOKEN
        ))
    })
}

/// All `n` ranks as threads of this process, connected over loopback (tests, conformance,
/// benches). Every rank's output in rank order, or the error that most likely caused the
/// failure (an error other than a lost peer, when there is one).
pub fn run_threads<P: Program>(n: u32, cfg: &TcpConfig, p: &P) -> Result<Vec<P::Output>> {
    if n == 0 {
        return Err(Error::Invalid("a run of 0 ranks".into()));
    }
    let token = commbench_core::launch::new_token()?;
    let listener = Bootstrap::listen("127.0.0.1:0")?;
    let addr = listener.local_addr().to_string();
    let mut cfg = cfg.clone();
    if cfg.bind_host.is_none() {
        cfg.bind_host = Some("127.0.0.1".into());
    }
    let results: Vec<Result<P::Output>> = std::thread::scope(|sc| {
        let (cfg, token, addr) = (&cfg, &token, &addr);
        let handles: Vec<_> = (1..n)
            .map(|r| {
                std::thread::Builder::new()
                    .name(format!("tcp-rank-{r}"))
                    .spawn_scoped(sc, move || {
                        let boot = Bootstrap::connect(addr, r, n, token, cfg.timeout)?;
                        rank_main(boot, token, cfg, p)
                    })
            })
            .collect();
        let mut out = Vec::with_capacity(n as usize);
        out.push(
            listener
                .accept_all(n, token, cfg.timeout)
                .and_then(|b| rank_main(b, token, cfg, p)),
        );
        for (i, h) in handles.into_iter().enumerate() {
            out.push(match h {
                Ok(h) => h.join().unwrap_or_else(|_| {
                    Err(Error::Backend {
                        backend: "tcp",
                        message: format!("rank {} panicked", i + 1),
                    })
                }),
                Err(e) => Err(Error::io("starting a rank thread", e)),
            });
        }
        out
    });
    collect(results)
}

/// All outputs, or the most telling error.
fn collect<T>(results: Vec<Result<T>>) -> Result<Vec<T>> {
    if results.iter().all(Result::is_ok) {
        return Ok(results.into_iter().flatten().collect());
    }
    let mut errs: Vec<Error> = results.into_iter().filter_map(Result::err).collect();
    let i = errs
        .iter()
        .position(|e| !matches!(e.root(), Error::PeerLost { .. }))
        .unwrap_or(0);
    Err(errs.swap_remove(i))
}

/// This process is one rank of a multi-process run (a child of the local launcher, or under
/// mpirun/srun): bootstrap through `env.rendezvous` with `env.token` (rank 0 binds it), build
/// the mesh, run `p`, and close cleanly.
pub fn run_rank<P: Program>(env: &RankEnv, cfg: &TcpConfig, p: &P) -> Result<P::Output> {
    let boot = Bootstrap::from_env(env, cfg.timeout).map_err(|e| e.in_phase("bootstrap"))?;
    rank_main(boot, token_of(env)?, cfg, p)
}

/// Rank 0 of a local launch: `listener` was bound (with [`Bootstrap::listen`]) before the
/// other ranks were spawned with its address; accept them, build the mesh, run `p`, close.
pub fn run_rank_with_listener<P: Program>(
    listener: Listener,
    env: &RankEnv,
    cfg: &TcpConfig,
    p: &P,
) -> Result<P::Output> {
    if env.rank != 0 {
        return Err(Error::Invalid(format!(
            "rank {} cannot hold the rendezvous (rank 0 does)",
            env.rank
        )));
    }
    let boot = listener
        .accept_all(env.size, token_of(env)?, cfg.timeout)
        .map_err(|e| e.in_phase("bootstrap"))?;
    rank_main(boot, token_of(env)?, cfg, p)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    /// Small frames leave from one contiguous copy; when the socket takes only part of one,
    /// the rest follows from the right offset, so the byte stream the peer reads is exactly
    /// header + payload, frame after frame. A tiny send buffer and a reader that lags behind
    /// (a full receive window) force partial writes.
    #[test]
    fn small_frames_survive_partial_writes() {
        use std::io::Read;
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let a = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (mut b, _) = l.accept().unwrap();
        socket2::SockRef::from(&a)
            .set_send_buffer_size(4096)
            .unwrap();
        let cfg = TcpConfig {
            poll: true,
            ..TcpConfig::default()
        };
        let mut c = Conn::new(1, a, &cfg).unwrap();
        let mut reqs = ReqTable::new();
        let mut expected = Vec::new();
        for i in 0..2000usize {
            let len = [0, 1, 7, 8, 100, SMALL_FRAME - HEADER_BYTES, SMALL_FRAME][i % 7];
            let buf: Vec<u8> = (0..len).map(|k| (i * 31 + k) as u8).collect();
            let hdr = header(len, i as Tag, 0);
            expected.extend_from_slice(&hdr);
            expected.extend_from_slice(&buf);
            c.sendq.push_back(SendOp {
                req: Some(reqs.alloc()),
                hdr,
                buf,
                tag: i as Tag,
                off: 0,
            });
        }
        b.set_nonblocking(true).unwrap();
        let mut got = Vec::new();
        let mut chunk = vec![0u8; 1000];
        let mut partial = 0;
        while got.len() < expected.len() {
            // A small frame (the contiguous path) that this call wrote only in part.
            let fresh_small = c
                .sendq
                .front()
                .is_some_and(|op| op.off == 0 && HEADER_BYTES + op.buf.len() <= SMALL_FRAME);
            c.tx_progress(&mut reqs).unwrap();
            if fresh_small {
                partial += usize::from(c.sendq.front().is_some_and(|op| op.off > 0));
            }
            match b.read(&mut chunk) {
                Ok(n) => got.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                Err(e) => panic!("{e}"),
            }
        }
        assert!(c.sendq.is_empty());
        assert_eq!(reqs.outstanding(), 2000);
        assert!(partial > 0, "no small frame was written in part");
        assert!(
            got == expected,
            "the byte stream differs from the frames sent"
        );
    }

    /// `Conn::quickack` takes the connection out of delayed-ACK ping-pong mode, which
    /// `TCP_QUICKACK` reads back as 0 while the kernel is in it.
    #[test]
    fn quickack_leaves_delayed_ack_mode() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let a = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (_b, _) = l.accept().unwrap();
        let cfg = TcpConfig::default();
        let c = Conn::new(1, a, &cfg).unwrap();
        let sock = socket2::SockRef::from(&c.stream);
        sock.set_quickack(false).unwrap();
        assert!(!sock.quickack().unwrap());
        c.quickack().unwrap();
        assert!(sock.quickack().unwrap());
    }
}
