//! Rendezvous and bootstrap over TCP.
//!
//! Rank 0 holds a rendezvous at `HOST:PORT`; every other rank of a multi-process run connects
//! to it (retrying until a deadline, since ranks start in any order). The resulting star of
//! streams carries a small control plane that backends use before their own data plane exists:
//! [`Bootstrap::allgather`] (to exchange addresses, segment names, ...) and
//! [`Bootstrap::barrier`].
//!
//! # Protocol
//!
//! Every connection opens with a hello, all integers little-endian:
//!
//! | field | bytes |
//! |---|---|
//! | [`MAGIC`] | 8 |
//! | [`PROTOCOL_VERSION`] | 4 |
//! | token length (at most [`MAX_TOKEN_LEN`]) | 4 |
//! | token | token length |
//! | sender's rank | 4 |
//! | size of the run | 4 |
//!
//! Rank 0 answers an accepted hello with [`MAGIC`] and [`PROTOCOL_VERSION`]. It refuses (closes,
//! with one line on stderr) a connection with a wrong magic, version, token, size, a rank out
//! of range or already connected, or one that does not finish its hello in time, and keeps
//! waiting for the genuine ranks: a stray or hostile connection never disturbs the run. Each
//! hello is read on its own thread, so a silent connection does not delay the others.
//!
//! After the hello, frames are a length (`u32`, at most [`MAX_FRAME`]) and that many bytes.
//! Every blocking read and write is bounded by the bootstrap's timeout: a peer that closes is
//! [`Error::PeerLost`], one that stays silent is [`Error::Timeout`], both naming the rank.

use crate::launch::RankEnv;
use crate::transport::error::{Error, Result};
use crate::transport::Rank;
use std::io::{ErrorKind, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// First bytes of every commbench connection.
pub const MAGIC: [u8; 8] = *b"CMBNCH\0\x01";
/// Version of the bootstrap protocol; a peer with another version is refused.
pub const PROTOCOL_VERSION: u32 = 1;
/// Longest token accepted in a hello.
pub const MAX_TOKEN_LEN: usize = 1024;
/// Longest frame accepted on a bootstrap stream (16 MiB), so garbage cannot make a rank
/// allocate without bound.
pub const MAX_FRAME: usize = 16 << 20;
/// Largest run the protocol accepts.
pub const MAX_SIZE: u32 = 1 << 20;

/// The hello of a connection, as decoded by [`read_hello`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hello {
    /// The token presented.
    pub token: Vec<u8>,
    /// The sender's rank.
    pub rank: Rank,
    /// The size of the run as the sender knows it.
    pub size: u32,
}

/// Encode a hello (magic, version, token, rank, size) into bytes ready to write.
pub fn encode_hello(token: &[u8], rank: Rank, size: u32) -> Vec<u8> {
    let mut b = Vec::with_capacity(24 + token.len());
    b.extend_from_slice(&MAGIC);
    b.extend_from_slice(&PROTOCOL_VERSION.to_le_bytes());
    b.extend_from_slice(&(token.len() as u32).to_le_bytes());
    b.extend_from_slice(token);
    b.extend_from_slice(&rank.to_le_bytes());
    b.extend_from_slice(&size.to_le_bytes());
    b
}

/// Read and check a hello's magic, version and token length from `s` (blocking reads bounded
/// by `deadline`). The token, rank and size are returned for the caller to judge. An error is
/// [`Error::Protocol`] for a malformed hello, [`Error::Timeout`] or [`Error::Io`] otherwise.
pub fn read_hello(s: &mut TcpStream, deadline: Instant) -> Result<Hello> {
    // The rank is unknown until the hello is read; name the connection by its address.
    let who = Who::Addr(s.peer_addr().ok());
    let mut head = [0u8; 16];
    read_full(s, &mut head, deadline, &who)?;
    if head[..8] != MAGIC {
        return Err(Error::Protocol("wrong magic (not a commbench peer)".into()));
    }
    let version = u32::from_le_bytes([head[8], head[9], head[10], head[11]]);
    if version != PROTOCOL_VERSION {
        return Err(Error::Protocol(format!(
            "protocol version {version}, expected {PROTOCOL_VERSION}"
        )));
    }
    let tlen = u32::from_le_bytes([head[12], head[13], head[14], head[15]]) as usize;
    if tlen > MAX_TOKEN_LEN {
        return Err(Error::Protocol(format!("token of {tlen} bytes")));
    }
    let mut token = vec![0u8; tlen];
    read_full(s, &mut token, deadline, &who)?;
    let mut tail = [0u8; 8];
    read_full(s, &mut tail, deadline, &who)?;
    Ok(Hello {
        token,
        rank: u32::from_le_bytes([tail[0], tail[1], tail[2], tail[3]]),
        size: u32::from_le_bytes([tail[4], tail[5], tail[6], tail[7]]),
    })
}

/// Compare two tokens in time independent of where they differ.
pub fn token_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Who is on the other end of a stream, for error messages.
#[derive(Debug, Clone)]
enum Who {
    Rank { me: Rank, peer: Rank },
    Addr(Option<SocketAddr>),
}

impl Who {
    fn lost(&self, detail: String) -> Error {
        match self {
            Who::Rank { peer, .. } => Error::PeerLost {
                peer: *peer,
                detail,
            },
            Who::Addr(a) => {
                Error::Protocol(format!("connection from {} closed: {detail}", addr_str(a)))
            }
        }
    }
    fn timeout(&self, what: &str, timeout: Duration) -> Error {
        match self {
            Who::Rank { me, peer } => Error::Timeout {
                rank: *me,
                what: format!("rank {peer} ({what})"),
                timeout,
            },
            Who::Addr(a) => Error::Protocol(format!(
                "connection from {} stayed silent during its hello",
                addr_str(a)
            )),
        }
    }
}

fn addr_str(a: &Option<SocketAddr>) -> String {
    a.map(|a| a.to_string())
        .unwrap_or_else(|| "an unknown address".into())
}

fn remaining(deadline: Instant) -> Option<Duration> {
    deadline
        .checked_duration_since(Instant::now())
        .filter(|d| !d.is_zero())
}

/// Which way bytes move on a stream: names the operation in errors and sets its timeout.
#[derive(Debug, Clone, Copy)]
enum Dir {
    Read,
    Write,
}

impl Dir {
    fn name(self) -> &'static str {
        match self {
            Dir::Read => "read",
            Dir::Write => "write",
        }
    }

    fn set_timeout(self, s: &TcpStream, t: Duration) -> Result<()> {
        match self {
            Dir::Read => s.set_read_timeout(Some(t)),
            Dir::Write => s.set_write_timeout(Some(t)),
        }
        .map_err(|e| Error::io(format!("setting a {} timeout", self.name()), e))
    }
}

/// Move `len` bytes with `step` (given the bytes moved so far, it moves some more), every call
/// bounded by what is left until `deadline`.
fn bounded(
    s: &mut TcpStream,
    len: usize,
    deadline: Instant,
    who: &Who,
    dir: Dir,
    mut step: impl FnMut(&mut TcpStream, usize) -> std::io::Result<usize>,
) -> Result<()> {
    let start = Instant::now();
    let mut done = 0;
    while done < len {
        let left = remaining(deadline)
            .ok_or_else(|| who.timeout(dir.name(), deadline.saturating_duration_since(start)))?;
        dir.set_timeout(s, left)?;
        match step(s, done) {
            Ok(0) => return Err(who.lost("connection closed".into())),
            Ok(n) => done += n,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(e) => return Err(who.lost(e.to_string())),
        }
    }
    Ok(())
}

/// `read_exact` with every read bounded by what is left until `deadline`.
fn read_full(s: &mut TcpStream, buf: &mut [u8], deadline: Instant, who: &Who) -> Result<()> {
    bounded(s, buf.len(), deadline, who, Dir::Read, |s, done| {
        s.read(&mut buf[done..])
    })
}

/// `write_all` with every write bounded by what is left until `deadline`.
fn write_full(s: &mut TcpStream, buf: &[u8], deadline: Instant, who: &Who) -> Result<()> {
    bounded(s, buf.len(), deadline, who, Dir::Write, |s, done| {
        s.write(&buf[done..])
    })
}

fn read_frame(s: &mut TcpStream, deadline: Instant, who: &Who) -> Result<Vec<u8>> {
    let mut l = [0u8; 4];
    read_full(s, &mut l, deadline, who)?;
    let len = u32::from_le_bytes(l) as usize;
    if len > MAX_FRAME {
        return Err(Error::Protocol(format!(
            "bootstrap frame of {len} bytes (at most {MAX_FRAME})"
        )));
    }
    let mut b = vec![0u8; len];
    read_full(s, &mut b, deadline, who)?;
    Ok(b)
}

fn write_frame(s: &mut TcpStream, data: &[u8], deadline: Instant, who: &Who) -> Result<()> {
    if data.len() > MAX_FRAME {
        return Err(Error::Invalid(format!(
            "bootstrap frame of {} bytes (at most {MAX_FRAME})",
            data.len()
        )));
    }
    let mut b = Vec::with_capacity(4 + data.len());
    b.extend_from_slice(&(data.len() as u32).to_le_bytes());
    b.extend_from_slice(data);
    write_full(s, &b, deadline, who)
}

fn resolve(addr: &str) -> Result<Vec<SocketAddr>> {
    let v: Vec<SocketAddr> = addr
        .to_socket_addrs()
        .map_err(|e| Error::Config(format!("rendezvous address {addr:?}: {e}")))?
        .collect();
    if v.is_empty() {
        return Err(Error::Config(format!(
            "rendezvous address {addr:?} resolves to nothing"
        )));
    }
    Ok(v)
}

/// Rank 0's bound rendezvous, before the other ranks have connected (step 1 of 2: bind before
/// children are spawned, so that they find it; then [`Listener::accept_all`]).
#[derive(Debug)]
pub struct Listener {
    inner: TcpListener,
    addr: SocketAddr,
}

impl Listener {
    /// The address actually bound (with the port picked by the OS when 0 was asked).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Accept ranks `1..size` presenting `token`, refusing every other connection, until all
    /// have arrived or `timeout` runs out ([`Error::Timeout`] naming the missing ranks).
    pub fn accept_all(self, size: u32, token: &str, timeout: Duration) -> Result<Bootstrap> {
        if size == 0 || size > MAX_SIZE {
            return Err(Error::Invalid(format!("a run of {size} ranks")));
        }
        let peers = self.accept_ranks(0, size, 1..size, token, timeout)?;
        Ok(Bootstrap {
            rank: 0,
            size,
            timeout,
            streams: peers,
            listen_ip: self.addr.ip(),
        })
    }

    /// Accept one connection from each rank in `ranks` (a hello with `token`, `size` and a rank
    /// in `ranks` not yet connected), refusing every other connection with a line on stderr.
    /// Returns the streams in rank order, each answered with the acknowledgement and with
    /// `TCP_NODELAY` set. `me` is the accepting rank, named in errors. Backends use this for
    /// their own data connections too.
    pub fn accept_ranks(
        &self,
        me: Rank,
        size: u32,
        ranks: std::ops::Range<Rank>,
        token: &str,
        timeout: Duration,
    ) -> Result<Vec<TcpStream>> {
        if ranks.end > size || size > MAX_SIZE {
            return Err(Error::Invalid(format!(
                "ranks {ranks:?} of a run of {size} ranks"
            )));
        }
        let deadline = Instant::now() + timeout;
        let mut streams: Vec<Option<TcpStream>> = ranks.clone().map(|_| None).collect();
        let mut missing = streams.len();
        self.inner
            .set_nonblocking(true)
            .map_err(|e| Error::io("making the rendezvous listener non-blocking", e))?;
        let (tx, rx) = mpsc::channel::<HelloRead>();
        // Each hello is read on its own thread with a bounded timeout, so that a silent
        // connection cannot hold up the genuine ranks.
        let hello_limit = timeout.min(Duration::from_secs(10));
        while missing > 0 {
            self.start_hello_readers(&tx, hello_limit)?;
            let Some(left) = remaining(deadline) else {
                return Err(self.missing_ranks(me, &ranks, &streams, timeout));
            };
            let Ok((peer, mut s, hello)) = rx.recv_timeout(left.min(Duration::from_millis(2)))
            else {
                continue;
            };
            match hello.and_then(|h| judge_hello(&h, token, size, &ranks, &streams)) {
                Ok(r) => match acknowledge(&mut s, me, r, deadline) {
                    Ok(()) => {
                        streams[(r - ranks.start) as usize] = Some(s);
                        missing -= 1;
                    }
                    Err(e) => eprintln!(
                        "commbench bootstrap: rank {r} from {} left during its hello: {e}",
                        addr_str(&peer)
                    ),
                },
                Err(e) => {
                    eprintln!(
                        "commbench bootstrap: refused connection from {}: {e}",
                        addr_str(&peer)
                    );
                    let _ = s.shutdown(std::net::Shutdown::Both);
                }
            }
        }
        streams
            .into_iter()
            .map(|s| s.ok_or_else(|| Error::Protocol("a rank is missing after accept".into())))
            .collect()
    }

    /// Accept every connection waiting on the (non-blocking) listener and read its hello on a
    /// thread of its own, which sends the outcome to `tx`.
    fn start_hello_readers(
        &self,
        tx: &mpsc::Sender<HelloRead>,
        hello_limit: Duration,
    ) -> Result<()> {
        loop {
            match self.inner.accept() {
                Ok((mut s, peer)) => {
                    let tx = tx.clone();
                    std::thread::Builder::new()
                        .name("commbench-hello".into())
                        .spawn(move || {
                            let r = s
                                .set_nonblocking(false)
                                .map_err(|e| Error::io("configuring a connection", e))
                                .and_then(|_| read_hello(&mut s, Instant::now() + hello_limit));
                            // The receiver may be gone if the run is over: nothing to do.
                            let _ = tx.send((Some(peer), s, r));
                        })
                        .map_err(|e| Error::io("starting a thread to read a hello", e))?;
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => return Ok(()),
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                // A connection that died before accept (ECONNABORTED) and the like.
                Err(e) => {
                    eprintln!("commbench bootstrap: accept failed: {e}");
                    return Ok(());
                }
            }
        }
    }

    /// The timeout of an accept that still lacks the ranks whose place in `streams` is empty.
    fn missing_ranks(
        &self,
        me: Rank,
        ranks: &std::ops::Range<Rank>,
        streams: &[Option<TcpStream>],
        timeout: Duration,
    ) -> Error {
        let names: Vec<String> = streams
            .iter()
            .enumerate()
            .filter(|(_, s)| s.is_none())
            .map(|(i, _)| (ranks.start + i as Rank).to_string())
            .collect();
        Error::Timeout {
            rank: me,
            what: format!("rank(s) {} to connect to {}", names.join(", "), self.addr),
            timeout,
        }
    }
}

/// A connection whose hello was read: its address, the stream and the hello (or why not).
type HelloRead = (Option<SocketAddr>, TcpStream, Result<Hello>);

/// The rank a hello claims, if the accepting side takes it: the right token and size, a rank in
/// `ranks` whose place in `streams` (indexed from `ranks.start`) is still empty.
fn judge_hello(
    h: &Hello,
    token: &str,
    size: u32,
    ranks: &std::ops::Range<Rank>,
    streams: &[Option<TcpStream>],
) -> Result<Rank> {
    if !token_eq(&h.token, token.as_bytes()) {
        Err(Error::Protocol(format!(
            "wrong token (claimed rank {})",
            h.rank
        )))
    } else if h.size != size {
        Err(Error::Protocol(format!(
            "rank {} believes the run has {} ranks, not {size}",
            h.rank, h.size
        )))
    } else if !ranks.contains(&h.rank) {
        Err(Error::Protocol(format!(
            "rank {} is not expected here (expected ranks {ranks:?})",
            h.rank
        )))
    } else if streams[(h.rank - ranks.start) as usize].is_some() {
        Err(Error::Protocol(format!(
            "rank {} is already connected",
            h.rank
        )))
    } else {
        Ok(h.rank)
    }
}

/// Answer rank `peer`'s accepted hello on `s` with the acknowledgement, and set `TCP_NODELAY`.
fn acknowledge(s: &mut TcpStream, me: Rank, peer: Rank, deadline: Instant) -> Result<()> {
    let mut ack = [0u8; 12];
    ack[..8].copy_from_slice(&MAGIC);
    ack[8..].copy_from_slice(&PROTOCOL_VERSION.to_le_bytes());
    write_full(s, &ack, deadline, &Who::Rank { me, peer })?;
    // Nagle would delay the small frames of allgather and barrier.
    let _ = s.set_nodelay(true);
    Ok(())
}

/// Connect as rank `me` of `size` to rank `peer` listening at `addr`, retrying until
/// `timeout` (the peer may not be listening yet), present the hello with `token` and wait for
/// the acknowledgement. The stream comes back blocking, with `TCP_NODELAY` set. A refusal is
/// [`Error::Protocol`]; no listener in time is [`Error::Timeout`] naming `peer`.
pub fn connect_stream(
    addr: &str,
    me: Rank,
    peer: Rank,
    size: u32,
    token: &str,
    timeout: Duration,
) -> Result<TcpStream> {
    if token.len() > MAX_TOKEN_LEN {
        return Err(Error::Invalid(format!("token of {} bytes", token.len())));
    }
    let addrs = resolve(addr)?;
    let deadline = Instant::now() + timeout;
    let who = Who::Rank { me, peer };
    let mut last_err = String::from("no attempt");
    let mut s = loop {
        let Some(left) = remaining(deadline) else {
            return Err(Error::Timeout {
                rank: me,
                what: format!("rank {peer} to listen at {addr} (last error: {last_err})"),
                timeout,
            });
        };
        let mut got = None;
        for a in &addrs {
            match TcpStream::connect_timeout(a, left.min(Duration::from_secs(2))) {
                Ok(s) => {
                    got = Some(s);
                    break;
                }
                Err(e) => last_err = e.to_string(),
            }
        }
        match got {
            Some(s) => break s,
            None => std::thread::sleep(Duration::from_millis(20).min(left)),
        }
    };
    let _ = s.set_nodelay(true);
    write_full(
        &mut s,
        &encode_hello(token.as_bytes(), me, size),
        deadline,
        &who,
    )?;
    let mut ack = [0u8; 12];
    read_full(&mut s, &mut ack, deadline, &who).map_err(|e| match e {
        Error::PeerLost { .. } => Error::Protocol(format!(
            "rank {peer} at {addr} refused rank {me} (wrong token, size or duplicate rank?)"
        )),
        e => e,
    })?;
    if ack[..8] != MAGIC || ack[8..] != PROTOCOL_VERSION.to_le_bytes() {
        return Err(Error::Protocol(format!(
            "{addr} is not a commbench rank of protocol {PROTOCOL_VERSION}"
        )));
    }
    s.set_read_timeout(None)
        .and_then(|_| s.set_write_timeout(None))
        .map_err(|e| Error::io("clearing socket timeouts", e))?;
    Ok(s)
}

/// The bootstrap star of one rank: rank 0 keeps one stream per other rank (index `r - 1`),
/// every other rank one stream to rank 0.
#[derive(Debug)]
pub struct Bootstrap {
    rank: Rank,
    size: u32,
    timeout: Duration,
    streams: Vec<TcpStream>,
    listen_ip: IpAddr,
}

impl Bootstrap {
    /// Rank 0, step 1: bind the rendezvous at `addr` (`HOST:0` picks a free port; ask
    /// [`Listener::local_addr`]). Do this before starting the other ranks.
    pub fn listen(addr: &str) -> Result<Listener> {
        let addrs = resolve(addr)?;
        let inner = TcpListener::bind(&addrs[..])
            .map_err(|e| Error::io(format!("binding the rendezvous at {addr}"), e))?;
        let addr = inner
            .local_addr()
            .map_err(|e| Error::io("reading the rendezvous address", e))?;
        Ok(Listener { inner, addr })
    }

    /// Ranks other than 0: connect to the rendezvous at `addr`, retrying until `timeout`
    /// (rank 0 may not be listening yet), and present the hello.
    pub fn connect(
        addr: &str,
        rank: Rank,
        size: u32,
        token: &str,
        timeout: Duration,
    ) -> Result<Bootstrap> {
        if rank == 0 || rank >= size {
            return Err(Error::Invalid(format!(
                "rank {rank} of {size} cannot connect to the rendezvous (rank 0 holds it)"
            )));
        }
        let s = connect_stream(addr, rank, 0, size, token, timeout)?;
        let listen_ip = s
            .local_addr()
            .map_err(|e| Error::io("reading the local address", e))?
            .ip();
        Ok(Bootstrap {
            rank,
            size,
            timeout,
            streams: vec![s],
            listen_ip,
        })
    }

    /// Bootstrap from the rank's environment: rank 0 binds `env.rendezvous` and accepts,
    /// the others connect to it; both need `env.token`.
    pub fn from_env(env: &RankEnv, timeout: Duration) -> Result<Bootstrap> {
        let token = env.token.as_deref().ok_or_else(|| {
            Error::Config(format!(
                "no run token: set {} to the same secret on every rank",
                crate::launch::ENV_TOKEN
            ))
        })?;
        if env.size == 1 {
            return Ok(Bootstrap {
                rank: 0,
                size: 1,
                timeout,
                streams: Vec::new(),
                listen_ip: IpAddr::from([127, 0, 0, 1]),
            });
        }
        let addr = env.rendezvous.as_deref().ok_or_else(|| {
            Error::Config(format!(
                "no rendezvous address (the HOST:PORT where rank 0 listens): give one or set {}",
                crate::launch::ENV_RENDEZVOUS
            ))
        })?;
        if env.rank == 0 {
            Self::listen(addr)?.accept_all(env.size, token, timeout)
        } else {
            Self::connect(addr, env.rank, env.size, token, timeout)
        }
    }

    /// This rank.
    pub fn rank(&self) -> Rank {
        self.rank
    }

    /// Number of ranks.
    pub fn size(&self) -> u32 {
        self.size
    }

    /// The timeout of every operation.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// The local IP address this rank reached (or, on rank 0, was reached on) the rendezvous
    /// by: the interface a backend should listen on for its data connections.
    pub fn local_ip(&self) -> IpAddr {
        match self.streams.first().and_then(|s| s.local_addr().ok()) {
            Some(a) => a.ip(),
            None => self.listen_ip,
        }
    }

    /// Every rank's `blob` (at most [`MAX_FRAME`] bytes), in rank order, on every rank.
    /// Rank 0 collects and then sends the whole set back.
    pub fn allgather(&mut self, blob: &[u8]) -> Result<Vec<Vec<u8>>> {
        let deadline = Instant::now() + self.timeout;
        let me = self.rank;
        if me == 0 {
            let mut all = Vec::with_capacity(self.size as usize);
            all.push(blob.to_vec());
            for (i, s) in self.streams.iter_mut().enumerate() {
                let who = Who::Rank {
                    me,
                    peer: i as Rank + 1,
                };
                all.push(read_frame(s, deadline, &who)?);
            }
            let mut out = Vec::new();
            out.extend_from_slice(&self.size.to_le_bytes());
            for b in &all {
                out.extend_from_slice(&(b.len() as u32).to_le_bytes());
                out.extend_from_slice(b);
            }
            if out.len() > MAX_FRAME {
                return Err(Error::Invalid(format!(
                    "allgather of {} bytes in all (at most {MAX_FRAME})",
                    out.len()
                )));
            }
            for (i, s) in self.streams.iter_mut().enumerate() {
                let who = Who::Rank {
                    me,
                    peer: i as Rank + 1,
                };
                write_frame(s, &out, deadline, &who)?;
            }
            Ok(all)
        } else {
            let who = Who::Rank { me, peer: 0 };
            let s = self
                .streams
                .first_mut()
                .ok_or_else(|| Error::Protocol("no stream to rank 0".into()))?;
            write_frame(s, blob, deadline, &who)?;
            let f = read_frame(s, deadline, &who)?;
            decode_all(&f, self.size)
        }
    }

    /// Block until every rank has entered the barrier (an allgather of nothing).
    pub fn barrier(&mut self) -> Result<()> {
        self.allgather(&[]).map(drop)
    }
}

fn decode_all(f: &[u8], size: u32) -> Result<Vec<Vec<u8>>> {
    let bad = || Error::Protocol("malformed allgather frame from rank 0".into());
    let take = |pos: &mut usize, n: usize| -> Result<&[u8]> {
        let end = pos
            .checked_add(n)
            .filter(|&e| e <= f.len())
            .ok_or_else(bad)?;
        let s = &f[*pos..end];
        *pos = end;
        Ok(s)
    };
    let mut pos = 0;
    let n = take(&mut pos, 4)?;
    let n = u32::from_le_bytes([n[0], n[1], n[2], n[3]]);
    if n != size {
        return Err(bad());
    }
    let mut all = Vec::with_capacity(size as usize);
    for _ in 0..n {
        let l = take(&mut pos, 4)?;
        let l = u32::from_le_bytes([l[0], l[1], l[2], l[3]]) as usize;
        all.push(take(&mut pos, l)?.to_vec());
    }
    if pos != f.len() {
        return Err(bad());
    }
    Ok(all)
}

/// What a raw backend needs from whatever started its ranks: identity, an allgather and a
/// barrier. [`Bootstrap`] (the TCP rendezvous) provides it, and so does MPI when raw backends
/// run under `mpirun` beside the MPI backend, so that both measure the same two processes.
pub trait Rendezvous {
    /// This rank.
    fn rank(&self) -> Rank;
    /// Number of ranks.
    fn size(&self) -> u32;
    /// The local address peers can reach this rank on, when the rendezvous knows one.
    fn local_ip(&self) -> Option<IpAddr>;
    /// Every rank's `blob`, in rank order, on every rank.
    fn allgather(&mut self, blob: &[u8]) -> Result<Vec<Vec<u8>>>;
    /// Wait for every rank.
    fn barrier(&mut self) -> Result<()>;
}

impl Rendezvous for Bootstrap {
    fn rank(&self) -> Rank {
        Bootstrap::rank(self)
    }
    fn size(&self) -> u32 {
        Bootstrap::size(self)
    }
    fn local_ip(&self) -> Option<IpAddr> {
        Some(Bootstrap::local_ip(self))
    }
    fn allgather(&mut self, blob: &[u8]) -> Result<Vec<Vec<u8>>> {
        Bootstrap::allgather(self, blob)
    }
    fn barrier(&mut self) -> Result<()> {
        Bootstrap::barrier(self)
    }
}

/// A non-loopback address of this host (from its name), or loopback when it has none: where
/// data connections are advertised when the rendezvous does not know the interface.
pub fn host_ip() -> IpAddr {
    use std::net::ToSocketAddrs;
    let name = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .unwrap_or_default();
    if !name.is_empty() {
        if let Ok(addrs) = (name.as_str(), 0).to_socket_addrs() {
            let mut v: Vec<IpAddr> = addrs
                .map(|a| a.ip())
                .filter(|ip| !ip.is_loopback())
                .collect();
            v.sort_by_key(|ip| ip.is_ipv6());
            if let Some(ip) = v.first() {
                return *ip;
            }
        }
    }
    IpAddr::from([127, 0, 0, 1])
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::thread;

    const T: Duration = Duration::from_secs(10);

    fn run(n: u32, token: &'static str) -> Vec<Result<Vec<Vec<u8>>>> {
        let l = Bootstrap::listen("127.0.0.1:0").unwrap();
        let addr = l.local_addr().to_string();
        let mut hs = Vec::new();
        for r in 1..n {
            let addr = addr.clone();
            hs.push(thread::spawn(move || {
                let mut b = Bootstrap::connect(&addr, r, n, token, T)?;
                b.barrier()?;
                b.allgather(format!("rank {r}").as_bytes())
            }));
        }
        let mut out = vec![(|| {
            let mut b = l.accept_all(n, token, T)?;
            b.barrier()?;
            b.allgather(b"rank 0")
        })()];
        out.extend(hs.into_iter().map(|h| h.join().unwrap()));
        out
    }

    #[test]
    fn allgather_on_2_3_4_ranks() {
        for n in 2..=4 {
            let want: Vec<Vec<u8>> = (0..n).map(|r| format!("rank {r}").into_bytes()).collect();
            for r in run(n, "secret") {
                assert_eq!(r.unwrap(), want);
            }
        }
    }

    #[test]
    fn wrong_token_and_garbage_are_refused_while_the_run_completes() {
        let l = Bootstrap::listen("127.0.0.1:0").unwrap();
        let addr = l.local_addr().to_string();
        let acc = thread::spawn(move || {
            let mut b0 = l.accept_all(2, "secret", T)?;
            b0.allgather(b"zero")
        });
        let a = addr.clone();
        let bad = thread::spawn(move || Bootstrap::connect(&a, 1, 2, "wrong", T));
        let a = addr.clone();
        let garbage = thread::spawn(move || {
            let mut s = TcpStream::connect(&a).unwrap();
            s.write_all(&[0xFFu8; 64]).unwrap();
            let mut b = [0u8; 1];
            // Refused: the connection is closed without an answer.
            matches!(s.read(&mut b), Ok(0) | Err(_))
        });
        let a = addr.clone();
        let huge = thread::spawn(move || {
            let mut s = TcpStream::connect(&a).unwrap();
            let mut h = encode_hello(b"", 1, 2);
            h[12..16].copy_from_slice(&u32::MAX.to_le_bytes());
            s.write_all(&h).unwrap();
            let mut b = [0u8; 1];
            matches!(s.read(&mut b), Ok(0) | Err(_))
        });
        // A silent connection must not hold up the genuine rank either.
        let _silent = TcpStream::connect(&addr).unwrap();
        assert!(matches!(bad.join().unwrap(), Err(Error::Protocol(_))));
        assert!(garbage.join().unwrap());
        assert!(huge.join().unwrap());
        let a = addr.clone();
        let good = thread::spawn(move || {
            let mut b = Bootstrap::connect(&a, 1, 2, "secret", T)?;
            b.allgather(b"one")
        });
        let all = acc.join().unwrap().unwrap();
        assert_eq!(all, vec![b"zero".to_vec(), b"one".to_vec()]);
        assert_eq!(good.join().unwrap().unwrap(), all);
    }

    #[test]
    fn duplicate_rank_is_refused() {
        let l = Bootstrap::listen("127.0.0.1:0").unwrap();
        let addr = l.local_addr().to_string();
        let a = addr.clone();
        let first = thread::spawn(move || {
            let mut b = Bootstrap::connect(&a, 1, 3, "t", T)?;
            b.barrier()
        });
        let acc = thread::spawn(move || {
            let mut b = l.accept_all(3, "t", T)?;
            b.barrier()
        });
        thread::sleep(Duration::from_millis(200));
        let dup = Bootstrap::connect(&addr, 1, 3, "t", T);
        assert!(matches!(dup, Err(Error::Protocol(_))), "{dup:?}");
        let mut b2 = Bootstrap::connect(&addr, 2, 3, "t", T).unwrap();
        b2.barrier().unwrap();
        first.join().unwrap().unwrap();
        acc.join().unwrap().unwrap();
    }

    #[test]
    fn missing_rank_times_out_naming_it() {
        let l = Bootstrap::listen("127.0.0.1:0").unwrap();
        let addr = l.local_addr().to_string();
        let h = thread::spawn(move || Bootstrap::connect(&addr, 1, 3, "t", T));
        let e = l
            .accept_all(3, "t", Duration::from_millis(500))
            .unwrap_err();
        match e {
            Error::Timeout { rank: 0, what, .. } => assert!(what.contains("rank(s) 2"), "{what}"),
            e => panic!("{e}"),
        }
        // The connected rank is told rank 0 went away (or refused) rather than hanging.
        let _ = h.join().unwrap();
    }

    #[test]
    fn silent_and_lost_peers_are_named() {
        let l = Bootstrap::listen("127.0.0.1:0").unwrap();
        let addr = l.local_addr().to_string();
        let h = thread::spawn(move || {
            let b = Bootstrap::connect(&addr, 1, 2, "t", Duration::from_millis(400))?;
            thread::sleep(Duration::from_millis(1500));
            drop(b);
            Ok::<_, Error>(())
        });
        let mut b0 = l.accept_all(2, "t", Duration::from_millis(400)).unwrap();
        match b0.barrier().unwrap_err() {
            Error::Timeout { rank: 0, what, .. } => assert!(what.contains("rank 1"), "{what}"),
            e => panic!("{e}"),
        }
        h.join().unwrap().unwrap();
        match b0.barrier().unwrap_err() {
            Error::PeerLost { peer: 1, .. } => {}
            e => panic!("{e}"),
        }
    }

    #[test]
    fn connect_without_rendezvous_times_out() {
        // Bind then drop to get a port nobody listens on.
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let e = Bootstrap::connect(
            &format!("127.0.0.1:{port}"),
            1,
            2,
            "t",
            Duration::from_millis(300),
        )
        .unwrap_err();
        assert!(matches!(e, Error::Timeout { rank: 1, .. }), "{e}");
    }

    #[test]
    fn from_env_names_what_is_missing() {
        let mut env = RankEnv {
            rank: 1,
            size: 2,
            rendezvous: None,
            token: Some("t".into()),
            job: None,
            launcher: crate::launch::Launcher::Manual,
        };
        let e = Bootstrap::from_env(&env, T).unwrap_err().to_string();
        assert!(
            e.contains("no rendezvous address")
                && e.contains(crate::launch::ENV_RENDEZVOUS)
                && !e.contains("--"),
            "{e}"
        );
        env.token = None;
        env.rendezvous = Some("127.0.0.1:1".into());
        let e = Bootstrap::from_env(&env, T).unwrap_err().to_string();
        assert!(e.contains(crate::launch::ENV_TOKEN), "{e}");
    }

    #[test]
    fn decode_rejects_garbage() {
        assert!(decode_all(&[1, 0, 0, 0, 255, 255, 255, 255], 1).is_err());
        assert!(decode_all(&[2, 0, 0, 0], 1).is_err());
        assert_eq!(
            decode_all(&[1, 0, 0, 0, 1, 0, 0, 0, 7], 1).unwrap(),
            vec![vec![7]]
        );
    }
}
