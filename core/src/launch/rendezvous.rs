//! Rendezvous and bootstrap over TCP.
//!
//! Rank 0 holds a rendezvous at `HOST:PORT`; every other rank of a multi-process run connects
//! to it (retrying until a deadline, since ranks start in any order). The resulting star of
//! streams carries a small control plane that backends use before their own data plane exists:
//! [`Bootstrap::allgather`] (to exchange addresses, segment names, ...) and
//! [`Bootstrap::barrier`].
//!
//! # Handshake (protocol version 2)
//!
//! Every connection, rendezvous and data alike, opens with a mutual challenge-response: each
//! side proves that it knows the run's token (at least [`MIN_TOKEN_LEN`] bytes) and the token
//! never crosses the wire. The *joiner* connects, the *acceptor* listens; each draws a fresh
//! nonce of [`NONCE_LEN`] bytes from the operating system. Integers are little-endian.
//!
//! 1. Joiner to acceptor, the hello ([`HELLO_LEN`] bytes): [`MAGIC`] (8), [`PROTOCOL_VERSION`]
//!    (4), the joiner's rank (4), the size of the run (4), the rank it means to reach (4), the
//!    joiner's nonce (32). Nothing in it depends on the token.
//! 2. Acceptor to joiner, the challenge ([`CHALLENGE_LEN`] bytes): [`MAGIC`], the version, the
//!    acceptor's nonce (32) and the acceptor's proof (32).
//! 3. The joiner checks the acceptor's proof. If it does not verify, the joiner closes the
//!    connection having sent nothing that depends on the token: whoever took the port first
//!    learns nothing of use. Otherwise it sends its own proof (32).
//! 4. The acceptor checks the joiner's proof. A wrong one is closed without an answer. A right
//!    one gets a verdict ([`VERDICT_LEN`] bytes): 0 accepted, 1 another size of run, 2 a rank
//!    not expected here, 3 a rank already connected, 4 the joiner meant to reach another rank.
//!
//! A proof is HMAC-SHA256 keyed with the token over `"commbench rendezvous v2"`, the joiner's
//! nonce, the acceptor's nonce, the three numbers of the hello and the role (`A` for the
//! acceptor, `J` for the joiner), checked in constant time. Both nonces make every proof good
//! for one connection only (a recorded proof replayed on another is refused), and the role
//! keeps one side's proof from serving as the other's. The handshake authenticates; it does
//! not encrypt, and it cannot stop someone who sits on the path from relaying or tampering
//! with the bytes that follow it.
//!
//! # Accepting
//!
//! The acceptor runs one poll loop on its own thread, with no thread per connection. A
//! connection must complete its handshake within [`HANDSHAKE_LIMIT`] (or the bootstrap timeout
//! when shorter, or [`Listener::with_handshake_limit`]); a silent or slow one is dropped. At
//! most [`MIN_PENDING`] handshakes (one per expected rank plus 16 when more, up to
//! [`MAX_PENDING`]) are pending at once: a new connection beyond that drops the oldest one
//! that has not even sent its hello (else the oldest). Every refusal and drop is a line on
//! standard error naming the address (the first 20; then a count), and the run goes on.
//!
//! After the handshake, frames are a length (`u32`, at most [`MAX_FRAME`]) and that many bytes.
//! Every blocking read and write is bounded by the bootstrap's timeout: a peer that closes is
//! [`Error::PeerLost`], one that stays silent is [`Error::Timeout`], both naming the rank.

use crate::launch::RankEnv;
use crate::transport::error::{Error, Result};
use crate::transport::Rank;
use hmac::{Hmac, Mac};
use nix::poll::{PollFd, PollFlags, PollTimeout};
use sha2::Sha256;
use std::io::{ErrorKind, Read, Write};
use std::net::{IpAddr, Ipv6Addr, SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::ops::Range;
use std::os::fd::AsFd;
use std::time::{Duration, Instant};

/// First bytes of every commbench connection.
pub const MAGIC: [u8; 8] = *b"CMBNCH\0\x01";
/// Version of the bootstrap protocol; a peer with another version is refused.
pub const PROTOCOL_VERSION: u32 = 2;
/// Shortest token accepted: shorter ones could be guessed from a recorded proof.
pub const MIN_TOKEN_LEN: usize = 16;
/// Longest token accepted.
pub const MAX_TOKEN_LEN: usize = 1024;
/// How to make a good token, for messages that refuse one.
pub const TOKEN_HINT: &str =
    "make one with `head -c 24 /dev/urandom | base64` and give every rank the same";
/// Bytes of each side's nonce.
pub const NONCE_LEN: usize = 32;
/// Bytes of a proof (HMAC-SHA256).
pub const PROOF_LEN: usize = 32;
/// Bytes of the joiner's hello.
pub const HELLO_LEN: usize = 8 + 4 + 4 + 4 + 4 + NONCE_LEN;
/// Bytes of the acceptor's challenge.
pub const CHALLENGE_LEN: usize = 8 + 4 + NONCE_LEN + PROOF_LEN;
/// Bytes of the acceptor's verdict.
pub const VERDICT_LEN: usize = 4;
/// Longest frame accepted on a bootstrap stream (16 MiB), so garbage cannot make a rank
/// allocate without bound.
pub const MAX_FRAME: usize = 16 << 20;
/// Largest run the protocol accepts.
pub const MAX_SIZE: u32 = 1 << 20;
/// Handshakes an acceptor keeps pending at once, at least.
pub const MIN_PENDING: usize = 64;
/// Handshakes an acceptor keeps pending at once, at most.
pub const MAX_PENDING: usize = 1024;
/// Longest a connection may take over its handshake by default.
pub const HANDSHAKE_LIMIT: Duration = Duration::from_secs(10);

/// What every proof begins with.
const LABEL: &[u8] = b"commbench rendezvous v2";
/// Refusals and drops logged one by one before they are only counted.
const LOG_LINES: usize = 20;
/// How long accepting pauses after `accept(2)` fails (out of descriptors and the like).
const ACCEPT_PAUSE: Duration = Duration::from_millis(50);

/// Check that a token can be used: at least [`MIN_TOKEN_LEN`] and at most [`MAX_TOKEN_LEN`]
/// bytes. The token itself is never part of the message.
pub fn check_token(token: &str) -> Result<()> {
    let n = token.len();
    if n < MIN_TOKEN_LEN {
        return Err(Error::Config(format!(
            "the run token has {n} bytes, fewer than the {MIN_TOKEN_LEN} that keep it from being \
             guessed ({TOKEN_HINT})"
        )));
    }
    if n > MAX_TOKEN_LEN {
        return Err(Error::Config(format!(
            "the run token has {n} bytes, more than {MAX_TOKEN_LEN}"
        )));
    }
    Ok(())
}

/// Check the syntax of a rendezvous address, `HOST:PORT` (an IPv6 address in brackets) with
/// a port from 1 to 65535, without resolving it.
pub fn check_address(addr: &str) -> Result<()> {
    let bad = |why: String| {
        Err(Error::Config(format!(
            "rendezvous address {addr:?}: {why} (write HOST:PORT, e.g. node1:7000 or [fe80::1]:7000)"
        )))
    };
    let (host, port) = if let Some(rest) = addr.strip_prefix('[') {
        let Some((h, p)) = rest.split_once("]:") else {
            return bad("an IPv6 address in brackets needs `]:PORT` after it".into());
        };
        if h.parse::<Ipv6Addr>().is_err() {
            return bad(format!("{h:?} is not an IPv6 address"));
        }
        (h, p)
    } else {
        if addr.parse::<Ipv6Addr>().is_ok() {
            return bad("an IPv6 address goes in brackets, followed by the port".into());
        }
        let Some((h, p)) = addr.rsplit_once(':') else {
            return bad("no port".into());
        };
        if h.parse::<Ipv6Addr>().is_ok() {
            return bad("an IPv6 address goes in brackets".into());
        }
        let name_like = h
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'));
        if !name_like {
            return bad(format!("{h:?} is not a host name or address"));
        }
        (h, p)
    };
    if host.is_empty() {
        return bad("no host".into());
    }
    match port.parse::<u16>() {
        Ok(0) => bad("port 0 (give the port rank 0 listens on)".into()),
        Ok(_) => Ok(()),
        Err(_) => bad(format!("port {port:?} is not a number from 1 to 65535")),
    }
}

/// The joiner's hello, as encoded by [`encode_hello`] and decoded by [`decode_hello`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hello {
    /// The joiner's rank.
    pub rank: Rank,
    /// The size of the run as the joiner knows it.
    pub size: u32,
    /// The rank the joiner means to reach.
    pub peer: Rank,
    /// The joiner's nonce.
    pub nonce: [u8; NONCE_LEN],
}

/// Encode a hello (magic, version, ranks, size, nonce) into bytes ready to write.
pub fn encode_hello(h: &Hello) -> [u8; HELLO_LEN] {
    let mut b = [0u8; HELLO_LEN];
    b[..8].copy_from_slice(&MAGIC);
    b[8..12].copy_from_slice(&PROTOCOL_VERSION.to_le_bytes());
    b[12..16].copy_from_slice(&h.rank.to_le_bytes());
    b[16..20].copy_from_slice(&h.size.to_le_bytes());
    b[20..24].copy_from_slice(&h.peer.to_le_bytes());
    b[24..].copy_from_slice(&h.nonce);
    b
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// Check the magic and version at the start of `b` (at least 12 bytes).
fn check_prefix(b: &[u8]) -> Result<()> {
    if b[..8] != MAGIC {
        return Err(Error::Protocol("wrong magic (not a commbench peer)".into()));
    }
    let version = u32_at(b, 8);
    if version != PROTOCOL_VERSION {
        return Err(Error::Protocol(format!(
            "protocol version {version}, this rank speaks {PROTOCOL_VERSION}"
        )));
    }
    Ok(())
}

/// Decode a hello, checking its length, magic and version. The ranks and size are the
/// caller's to judge.
pub fn decode_hello(b: &[u8]) -> Result<Hello> {
    if b.len() != HELLO_LEN {
        return Err(Error::Protocol(format!(
            "a hello of {} bytes, not {HELLO_LEN}",
            b.len()
        )));
    }
    check_prefix(b)?;
    let mut nonce = [0u8; NONCE_LEN];
    nonce.copy_from_slice(&b[24..]);
    Ok(Hello {
        rank: u32_at(b, 12),
        size: u32_at(b, 16),
        peer: u32_at(b, 20),
        nonce,
    })
}

/// Which side of a handshake a proof speaks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    Acceptor,
    Joiner,
}

/// The HMAC of one side's proof, fed with everything the proof binds.
fn keyed(
    token: &[u8],
    h: &Hello,
    acceptor_nonce: &[u8; NONCE_LEN],
    role: Role,
) -> Result<Hmac<Sha256>> {
    let mut m = <Hmac<Sha256> as Mac>::new_from_slice(token)
        .map_err(|_| Error::Invalid("a token HMAC-SHA256 cannot take as a key".into()))?;
    m.update(LABEL);
    m.update(&h.nonce);
    m.update(acceptor_nonce);
    m.update(&h.rank.to_le_bytes());
    m.update(&h.size.to_le_bytes());
    m.update(&h.peer.to_le_bytes());
    m.update(match role {
        Role::Acceptor => b"A",
        Role::Joiner => b"J",
    });
    Ok(m)
}

/// The proof of `role` for the handshake of hello `h` and the acceptor's nonce.
fn prove(
    token: &[u8],
    h: &Hello,
    acceptor_nonce: &[u8; NONCE_LEN],
    role: Role,
) -> Result<[u8; PROOF_LEN]> {
    let tag = keyed(token, h, acceptor_nonce, role)?
        .finalize()
        .into_bytes();
    let mut out = [0u8; PROOF_LEN];
    out.copy_from_slice(&tag);
    Ok(out)
}

/// Whether `proof` is the proof of `role` (compared in constant time).
fn verify(
    token: &[u8],
    h: &Hello,
    acceptor_nonce: &[u8; NONCE_LEN],
    role: Role,
    proof: &[u8],
) -> Result<bool> {
    Ok(keyed(token, h, acceptor_nonce, role)?
        .verify_slice(proof)
        .is_ok())
}

/// A fresh nonce from the operating system.
fn nonce() -> Result<[u8; NONCE_LEN]> {
    let mut n = [0u8; NONCE_LEN];
    getrandom::getrandom(&mut n).map_err(|e| {
        Error::io(
            "drawing a handshake nonce from the OS",
            std::io::Error::other(e.to_string()),
        )
    })?;
    Ok(n)
}

/// The acceptor's answer to a joiner whose proof verified.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Verdict {
    Accepted,
    WrongSize,
    UnexpectedRank,
    Duplicate,
    WrongPeer,
}

impl Verdict {
    const ALL: [Verdict; 5] = [
        Verdict::Accepted,
        Verdict::WrongSize,
        Verdict::UnexpectedRank,
        Verdict::Duplicate,
        Verdict::WrongPeer,
    ];

    fn code(self) -> u32 {
        match self {
            Verdict::Accepted => 0,
            Verdict::WrongSize => 1,
            Verdict::UnexpectedRank => 2,
            Verdict::Duplicate => 3,
            Verdict::WrongPeer => 4,
        }
    }

    fn from_code(c: u32) -> Option<Verdict> {
        Verdict::ALL.into_iter().find(|v| v.code() == c)
    }

    /// The refusal as the acceptor logs it.
    fn reason(self, h: &Hello, x: &Expect<'_>) -> String {
        match self {
            Verdict::Accepted => format!("rank {} accepted", h.rank),
            Verdict::WrongSize => format!(
                "rank {} believes the run has {} ranks, not {}",
                h.rank, h.size, x.size
            ),
            Verdict::UnexpectedRank => format!(
                "rank {} is not expected here (expected ranks {:?})",
                h.rank, x.ranks
            ),
            Verdict::Duplicate => format!("rank {} is already connected", h.rank),
            Verdict::WrongPeer => format!(
                "rank {} meant to reach rank {}, this is rank {}",
                h.rank, h.peer, x.me
            ),
        }
    }

    /// The refusal as the joiner reports it.
    fn refusal(self, addr: &str, me: Rank, peer: Rank, size: u32) -> String {
        match self {
            Verdict::Accepted => format!("rank {peer} at {addr} accepted rank {me}"),
            Verdict::WrongSize => format!(
                "rank {peer} at {addr} refused rank {me}: its run does not have {size} ranks"
            ),
            Verdict::UnexpectedRank => {
                format!("rank {peer} at {addr} refused rank {me}: it does not expect that rank")
            }
            Verdict::Duplicate => {
                format!("rank {peer} at {addr} refused rank {me}: it already has that rank")
            }
            Verdict::WrongPeer => format!("{addr} is not rank {peer} of this run"),
        }
    }
}

/// Who is on the other end of a joined stream, for error messages.
#[derive(Debug, Clone, Copy)]
struct Who {
    me: Rank,
    peer: Rank,
}

impl Who {
    fn lost(&self, detail: String) -> Error {
        Error::PeerLost {
            peer: self.peer,
            detail,
        }
    }
    fn timeout(&self, what: &str, timeout: Duration) -> Error {
        Error::Timeout {
            rank: self.me,
            what: format!("rank {} ({what})", self.peer),
            timeout,
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

/// The acceptor's log of refused and dropped connections: the first [`LOG_LINES`] on standard
/// error, then only a count, printed when the accept ends.
#[derive(Debug, Default)]
struct Log {
    shown: usize,
    hidden: usize,
}

impl Log {
    fn line(&mut self, msg: String) {
        if self.shown < LOG_LINES {
            eprintln!("commbench bootstrap: {msg}");
            self.shown += 1;
        } else {
            self.hidden += 1;
        }
    }
}

impl Drop for Log {
    fn drop(&mut self) {
        if self.hidden > 0 {
            eprintln!(
                "commbench bootstrap: {} more refused or dropped connections not shown",
                self.hidden
            );
        }
    }
}

/// What an acceptor takes: its rank, the size of the run, the ranks it accepts, the token.
#[derive(Debug)]
struct Expect<'a> {
    me: Rank,
    size: u32,
    ranks: Range<Rank>,
    token: &'a [u8],
}

impl Expect<'_> {
    /// The verdict on a joiner whose proof verified; `taken` marks the ranks of `ranks`
    /// already connected or being answered.
    fn judge(&self, h: &Hello, taken: &[bool]) -> Verdict {
        if h.peer != self.me {
            Verdict::WrongPeer
        } else if h.size != self.size {
            Verdict::WrongSize
        } else if !self.ranks.contains(&h.rank) {
            Verdict::UnexpectedRank
        } else if taken[(h.rank - self.ranks.start) as usize] {
            Verdict::Duplicate
        } else {
            Verdict::Accepted
        }
    }

    fn slot(&self, r: Rank) -> usize {
        (r - self.ranks.start) as usize
    }
}

/// Where an acceptor's handshake stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    /// Reading the hello.
    Hello,
    /// The challenge is sent (or being sent); reading the joiner's proof.
    Proof,
    /// The proof verified; sending the verdict.
    Verdict(Verdict),
}

/// What one step of a pending handshake came to.
#[derive(Debug)]
enum Step {
    /// It needs the socket to be ready again.
    Wait,
    /// Refused or lost, with the line to log.
    Drop(String),
    /// The joiner with this rank is accepted and told so.
    Accepted(Rank),
}

/// One connection in its handshake on the acceptor's side, non-blocking.
#[derive(Debug)]
struct Pending {
    s: TcpStream,
    peer: Option<SocketAddr>,
    since: Instant,
    stage: Stage,
    buf: [u8; HELLO_LEN],
    got: usize,
    out: Vec<u8>,
    sent: usize,
    hello: Option<Hello>,
    nonce: [u8; NONCE_LEN],
}

impl Pending {
    fn new(s: TcpStream, peer: Option<SocketAddr>, since: Instant) -> Self {
        Pending {
            s,
            peer,
            since,
            stage: Stage::Hello,
            buf: [0; HELLO_LEN],
            got: 0,
            out: Vec::new(),
            sent: 0,
            hello: None,
            nonce: [0; NONCE_LEN],
        }
    }

    /// Bytes still to read in this stage (0 while sending the verdict).
    fn need(&self) -> usize {
        match self.stage {
            Stage::Hello => HELLO_LEN,
            Stage::Proof => PROOF_LEN,
            Stage::Verdict(_) => 0,
        }
    }

    /// What to wait for: room to write while something is left to send, else bytes to read.
    fn interest(&self) -> PollFlags {
        if self.sent < self.out.len() || self.need() == 0 {
            PollFlags::POLLOUT
        } else {
            PollFlags::POLLIN
        }
    }

    /// The connection in a log line: its address, and the rank it claims once known.
    fn who(&self) -> String {
        match &self.hello {
            Some(h) => format!(
                "connection from {} (claiming rank {})",
                addr_str(&self.peer),
                h.rank
            ),
            None => format!("connection from {}", addr_str(&self.peer)),
        }
    }

    /// Move the handshake on as far as the socket allows.
    fn advance(&mut self, x: &Expect<'_>, taken: &mut [bool]) -> Step {
        loop {
            if self.sent < self.out.len() {
                match self.s.write(&self.out[self.sent..]) {
                    Ok(0) => return self.lost(x, taken, "connection closed".into()),
                    Ok(n) => self.sent += n,
                    Err(e) if e.kind() == ErrorKind::WouldBlock => return Step::Wait,
                    Err(e) if e.kind() == ErrorKind::Interrupted => {}
                    Err(e) => return self.lost(x, taken, e.to_string()),
                }
                continue;
            }
            if let Stage::Verdict(v) = self.stage {
                return match (v, &self.hello) {
                    (Verdict::Accepted, Some(h)) => Step::Accepted(h.rank),
                    (v, Some(h)) => {
                        Step::Drop(format!("refused {}: {}", self.who(), v.reason(h, x)))
                    }
                    (_, None) => Step::Drop(format!("refused {}: no hello", self.who())),
                };
            }
            let need = self.need();
            match self.s.read(&mut self.buf[self.got..need]) {
                Ok(0) => return Step::Drop(self.closed_early()),
                Ok(n) => self.got += n,
                Err(e) if e.kind() == ErrorKind::WouldBlock => return Step::Wait,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Step::Drop(format!("dropped {}: {e}", self.who())),
            }
            if self.stage == Stage::Hello && self.got >= 12 {
                // A peer of another protocol is told off at once, not when its bytes run out.
                if let Err(e) = check_prefix(&self.buf) {
                    return Step::Drop(format!("refused {}: {}", self.who(), e.reason()));
                }
            }
            if self.got == need {
                if let Err(why) = self.complete(x, taken) {
                    return Step::Drop(format!("refused {}: {why}", self.who()));
                }
            }
        }
    }

    /// The stage's bytes are all in: answer the hello with the challenge, or judge the proof.
    /// `Err` is why the connection is refused.
    fn complete(&mut self, x: &Expect<'_>, taken: &mut [bool]) -> std::result::Result<(), String> {
        match self.stage {
            Stage::Hello => {
                let h = decode_hello(&self.buf).map_err(|e| e.reason())?;
                self.nonce = nonce().map_err(|e| e.to_string())?;
                let proof =
                    prove(x.token, &h, &self.nonce, Role::Acceptor).map_err(|e| e.to_string())?;
                self.out.clear();
                self.out.extend_from_slice(&MAGIC);
                self.out.extend_from_slice(&PROTOCOL_VERSION.to_le_bytes());
                self.out.extend_from_slice(&self.nonce);
                self.out.extend_from_slice(&proof);
                self.sent = 0;
                self.hello = Some(h);
                self.stage = Stage::Proof;
            }
            Stage::Proof => {
                let h = self.hello.as_ref().ok_or("no hello")?;
                let good = verify(
                    x.token,
                    h,
                    &self.nonce,
                    Role::Joiner,
                    &self.buf[..PROOF_LEN],
                )
                .map_err(|e| e.to_string())?;
                if !good {
                    return Err("wrong token (its proof does not verify)".into());
                }
                let v = x.judge(h, taken);
                if v == Verdict::Accepted {
                    taken[x.slot(h.rank)] = true;
                }
                self.out.clear();
                self.out.extend_from_slice(&v.code().to_le_bytes());
                self.sent = 0;
                self.stage = Stage::Verdict(v);
            }
            Stage::Verdict(_) => {}
        }
        self.got = 0;
        Ok(())
    }

    /// Why a connection that closed before its handshake was over is dropped.
    fn closed_early(&self) -> String {
        match self.stage {
            Stage::Hello if self.got == 0 => {
                format!("dropped {}: closed before its hello", self.who())
            }
            Stage::Hello => format!("dropped {}: closed in the middle of its hello", self.who()),
            _ => format!(
                "refused {}: it closed without proving it knows the run's token \
                 (a different token?)",
                self.who()
            ),
        }
    }

    /// The connection failed while the acceptor wrote to it; a rank it was being accepted as
    /// is free again.
    fn lost(&mut self, x: &Expect<'_>, taken: &mut [bool], e: String) -> Step {
        if let (Stage::Verdict(Verdict::Accepted), Some(h)) = (self.stage, &self.hello) {
            taken[x.slot(h.rank)] = false;
        }
        Step::Drop(format!("dropped {}: {e}", self.who()))
    }
}

/// An accepted stream made ready for the bootstrap: blocking, with `TCP_NODELAY` (Nagle would
/// delay the small frames of allgather and barrier).
fn settle(s: TcpStream) -> std::io::Result<TcpStream> {
    s.set_nonblocking(false)?;
    s.set_nodelay(true)?;
    Ok(s)
}

/// Rank 0's bound rendezvous, before the other ranks have connected (step 1 of 2: bind before
/// children are spawned, so that they find it; then [`Listener::accept_all`]).
#[derive(Debug)]
pub struct Listener {
    inner: TcpListener,
    addr: SocketAddr,
    handshake_limit: Duration,
}

impl Listener {
    /// Rank 0 of a local launch (`env`), which bound this listener before the other ranks
    /// were spawned with its address: every rank accepted with the run's token (checked), in
    /// the phase "bootstrap".
    pub fn accept_as_rank0(self, env: &RankEnv, timeout: Duration) -> Result<Bootstrap> {
        if env.rank != 0 {
            return Err(Error::Invalid(format!(
                "rank {} cannot hold the rendezvous (rank 0 does)",
                env.rank
            )));
        }
        let token = env.checked_token()?;
        self.accept_all(env.size, token, timeout)
            .map_err(|e| e.in_phase("bootstrap"))
    }

    /// The address actually bound (with the port picked by the OS when 0 was asked).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Give every connection at most `limit` (instead of [`HANDSHAKE_LIMIT`]) to complete its
    /// handshake; the bootstrap timeout still applies when shorter.
    pub fn with_handshake_limit(mut self, limit: Duration) -> Self {
        self.handshake_limit = limit;
        self
    }

    /// Accept ranks `1..size` proving `token`, refusing every other connection, until all
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

    /// Accept one connection from each rank in `ranks` (a joiner that proves `token` and
    /// claims `size` and a rank in `ranks` not yet connected), refusing every other connection
    /// with a line on stderr. Returns the streams in rank order, blocking and with
    /// `TCP_NODELAY` set. `me` is the accepting rank, named in errors. Backends use this for
    /// their own data connections too. One thread, whatever connects (see the module's
    /// documentation).
    pub fn accept_ranks(
        &self,
        me: Rank,
        size: u32,
        ranks: Range<Rank>,
        token: &str,
        timeout: Duration,
    ) -> Result<Vec<TcpStream>> {
        if ranks.end > size || size > MAX_SIZE {
            return Err(Error::Invalid(format!(
                "ranks {ranks:?} of a run of {size} ranks"
            )));
        }
        check_token(token)?;
        let deadline = Instant::now() + timeout;
        let limit = self.handshake_limit.min(timeout);
        let n = ranks.len();
        let cap = (n + 16).clamp(MIN_PENDING, MAX_PENDING);
        let x = Expect {
            me,
            size,
            ranks: ranks.clone(),
            token: token.as_bytes(),
        };
        let mut streams: Vec<Option<TcpStream>> = (0..n).map(|_| None).collect();
        let mut taken = vec![false; n];
        let mut missing = n;
        let mut pending: Vec<Pending> = Vec::new();
        let mut log = Log::default();
        let mut accept_from = Instant::now();
        self.inner
            .set_nonblocking(true)
            .map_err(|e| Error::io("making the rendezvous listener non-blocking", e))?;
        while missing > 0 {
            let now = Instant::now();
            if now >= deadline {
                return Err(self.missing_ranks(me, &ranks, &streams, timeout));
            }
            drop_late(&mut pending, now, limit, &mut log);
            let listening = now >= accept_from;
            let mut wake = deadline;
            for p in &pending {
                wake = wake.min(p.since + limit);
            }
            if !listening {
                wake = wake.min(accept_from);
            }
            let (incoming, ready) =
                self.poll_ready(&pending, listening, wake.saturating_duration_since(now))?;
            // Handshakes first, so that a joiner whose bytes are in is never the one dropped
            // to make room for a newcomer.
            missing -= advance_ready(&mut pending, &ready, &x, &mut taken, &mut streams, &mut log);
            if incoming && !self.accept_some(&mut pending, cap, &mut log) {
                accept_from = Instant::now() + ACCEPT_PAUSE;
            }
        }
        streams
            .into_iter()
            .map(|s| s.ok_or_else(|| Error::Protocol("a rank is missing after accept".into())))
            .collect()
    }

    /// Wait up to `wait` for the listener (when `listening`) or a pending handshake to be
    /// ready. Returns whether the listener is, and which handshakes are.
    fn poll_ready(
        &self,
        pending: &[Pending],
        listening: bool,
        wait: Duration,
    ) -> Result<(bool, Vec<bool>)> {
        let mut fds = Vec::with_capacity(pending.len() + 1);
        if listening {
            fds.push(PollFd::new(self.inner.as_fd(), PollFlags::POLLIN));
        }
        fds.extend(
            pending
                .iter()
                .map(|p| PollFd::new(p.s.as_fd(), p.interest())),
        );
        let ms = wait.as_micros().div_ceil(1000).min(i32::MAX as u128) as i32;
        match nix::poll::poll(
            &mut fds,
            PollTimeout::try_from(ms).unwrap_or(PollTimeout::MAX),
        ) {
            Ok(_) => {}
            Err(nix::errno::Errno::EINTR) => return Ok((false, vec![false; pending.len()])),
            Err(e) => return Err(Error::io("waiting for connections (poll)", e.into())),
        }
        let ready = |f: &PollFd| f.revents().is_some_and(|r| !r.is_empty());
        let first = usize::from(listening);
        Ok((
            listening && ready(&fds[0]),
            fds[first..].iter().map(ready).collect(),
        ))
    }

    /// Accept up to half of `cap` waiting connections into `pending`, each dropping the oldest
    /// pending one when `cap` are already there. `false` when `accept(2)` failed in a way that
    /// calls for a pause (out of descriptors and the like).
    fn accept_some(&self, pending: &mut Vec<Pending>, cap: usize, log: &mut Log) -> bool {
        for _ in 0..(cap / 2).max(1) {
            match self.inner.accept() {
                Ok((s, peer)) => {
                    if let Err(e) = s.set_nonblocking(true) {
                        log.line(format!("dropped connection from {peer}: {e}"));
                        continue;
                    }
                    if pending.len() >= cap {
                        make_room(pending, log);
                    }
                    pending.push(Pending::new(s, Some(peer), Instant::now()));
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => return true,
                Err(e)
                    if matches!(
                        e.kind(),
                        ErrorKind::Interrupted | ErrorKind::ConnectionAborted
                    ) => {}
                Err(e) => {
                    log.line(format!("accept failed: {e}"));
                    return false;
                }
            }
        }
        true
    }

    /// The timeout of an accept that still lacks the ranks whose place in `streams` is empty.
    fn missing_ranks(
        &self,
        me: Rank,
        ranks: &Range<Rank>,
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

/// Drop one pending handshake to make room: the oldest that has not sent a byte of its hello,
/// else the oldest of all.
fn make_room(pending: &mut Vec<Pending>, log: &mut Log) {
    let oldest = |silent: bool| {
        pending
            .iter()
            .enumerate()
            .filter(|(_, p)| !silent || (p.stage == Stage::Hello && p.got == 0))
            .min_by_key(|(_, p)| p.since)
            .map(|(i, _)| i)
    };
    if let Some(i) = oldest(true).or_else(|| oldest(false)) {
        let p = pending.swap_remove(i);
        log.line(format!(
            "dropped {}: {} handshakes pending, the oldest makes room (waited {:.2} s)",
            p.who(),
            pending.len() + 1,
            p.since.elapsed().as_secs_f64()
        ));
    }
}

/// Why one attempt at joining did not give a stream.
#[derive(Debug)]
enum Attempt {
    /// The acceptor closed before it proved anything or after it did: try again.
    Retry(String),
    /// The acceptor is not who it should be, refused the joiner, or time ran out.
    Fail(Error),
}

/// One handshake as rank `me` of `size` with rank `peer` on the fresh stream `s`.
fn join(
    mut s: TcpStream,
    addr: &str,
    me: Rank,
    peer: Rank,
    size: u32,
    token: &[u8],
    deadline: Instant,
) -> std::result::Result<TcpStream, Attempt> {
    let who = Who { me, peer };
    let retry = |when: &'static str| {
        move |e: Error| match e {
            Error::PeerLost { detail, .. } => {
                Attempt::Retry(format!("rank {peer} at {addr} closed {when} ({detail})"))
            }
            e => Attempt::Fail(e),
        }
    };
    let _ = s.set_nodelay(true);
    let hello = Hello {
        rank: me,
        size,
        peer,
        nonce: nonce().map_err(Attempt::Fail)?,
    };
    write_full(&mut s, &encode_hello(&hello), deadline, &who)
        .map_err(retry("the connection before its challenge"))?;
    let mut ch = [0u8; CHALLENGE_LEN];
    read_full(&mut s, &mut ch, deadline, &who)
        .map_err(retry("the connection before its challenge"))?;
    check_prefix(&ch).map_err(|e| {
        Attempt::Fail(Error::Protocol(format!(
            "{addr} is not a commbench rank of protocol {PROTOCOL_VERSION}: {}",
            e.reason()
        )))
    })?;
    let mut acceptor_nonce = [0u8; NONCE_LEN];
    acceptor_nonce.copy_from_slice(&ch[12..12 + NONCE_LEN]);
    let proof = &ch[12 + NONCE_LEN..];
    if !verify(token, &hello, &acceptor_nonce, Role::Acceptor, proof).map_err(Attempt::Fail)? {
        return Err(Attempt::Fail(Error::Protocol(format!(
            "{addr} did not prove it knows the run's token, so rank {me} told it nothing: it is \
             not rank {peer} of this run, or the ranks were given different tokens"
        ))));
    }
    let mine = prove(token, &hello, &acceptor_nonce, Role::Joiner).map_err(Attempt::Fail)?;
    write_full(&mut s, &mine, deadline, &who)
        .map_err(retry("the connection during the handshake"))?;
    let mut v = [0u8; VERDICT_LEN];
    read_full(&mut s, &mut v, deadline, &who).map_err(retry(
        "the connection after the handshake, without a verdict",
    ))?;
    match Verdict::from_code(u32::from_le_bytes(v)) {
        Some(Verdict::Accepted) => {}
        Some(v) => {
            return Err(Attempt::Fail(Error::Protocol(
                v.refusal(addr, me, peer, size),
            )))
        }
        None => {
            return Err(Attempt::Fail(Error::Protocol(format!(
                "rank {peer} at {addr} answered with an unknown verdict {}",
                u32::from_le_bytes(v)
            ))))
        }
    }
    s.set_read_timeout(None)
        .and_then(|_| s.set_write_timeout(None))
        .map_err(|e| Attempt::Fail(Error::io("clearing socket timeouts", e)))?;
    Ok(s)
}

/// Connect as rank `me` of `size` to rank `peer` listening at `addr`, retrying until
/// `timeout` (the peer may not be listening yet, or may have dropped the connection before
/// proving itself), and run the handshake with `token`. The stream comes back blocking, with
/// `TCP_NODELAY` set. A peer that does not prove the token, or refuses this rank, is
/// [`Error::Protocol`]; no handshake in time is [`Error::Timeout`] naming `peer`.
pub fn connect_stream(
    addr: &str,
    me: Rank,
    peer: Rank,
    size: u32,
    token: &str,
    timeout: Duration,
) -> Result<TcpStream> {
    check_token(token)?;
    let addrs = resolve(addr)?;
    let deadline = Instant::now() + timeout;
    let mut last = String::from("no attempt");
    loop {
        let Some(left) = remaining(deadline) else {
            return Err(Error::Timeout {
                rank: me,
                what: format!("rank {peer} to listen at {addr} (last: {last})"),
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
                Err(e) => last = e.to_string(),
            }
        }
        if let Some(s) = got {
            match join(s, addr, me, peer, size, token.as_bytes(), deadline) {
                Ok(s) => return Ok(s),
                Err(Attempt::Fail(e)) => return Err(e),
                Err(Attempt::Retry(why)) => last = why,
            }
        }
        if let Some(left) = remaining(deadline) {
            std::thread::sleep(Duration::from_millis(20).min(left));
        }
    }
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
        Ok(Listener {
            inner,
            addr,
            handshake_limit: HANDSHAKE_LIMIT,
        })
    }

    /// Ranks other than 0: connect to the rendezvous at `addr`, retrying until `timeout`
    /// (rank 0 may not be listening yet), and run the handshake: rank 0 proves `token` first,
    /// then this rank.
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
    /// the others connect to it; both need `env.token` (checked with [`check_token`], and the
    /// address with [`check_address`], before anything is bound or connected).
    pub fn from_env(env: &RankEnv, timeout: Duration) -> Result<Bootstrap> {
        let token = env.token.as_deref().ok_or_else(|| {
            Error::Config(format!(
                "no run token: set {} to the same secret on every rank ({TOKEN_HINT})",
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
        check_token(token)?;
        check_address(addr)?;
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
                let who = Who {
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
                let who = Who {
                    me,
                    peer: i as Rank + 1,
                };
                write_frame(s, &out, deadline, &who)?;
            }
            Ok(all)
        } else {
            let who = Who { me, peer: 0 };
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

/// Drop the handshakes that have taken `limit` or longer by `now`, each with a log line.
fn drop_late(pending: &mut Vec<Pending>, now: Instant, limit: Duration, log: &mut Log) {
    pending.retain(|p| {
        let late = now.duration_since(p.since) >= limit;
        if late {
            log.line(format!(
                "dropped {}: no complete handshake within {:.1} s (silent or slow)",
                p.who(),
                limit.as_secs_f64()
            ));
        }
        !late
    });
}

/// Advance every handshake whose socket is `ready`: a rank that proved itself takes its slot
/// in `streams`, a refused or broken one is dropped with a log line. The number of ranks
/// accepted.
fn advance_ready(
    pending: &mut Vec<Pending>,
    ready: &[bool],
    x: &Expect<'_>,
    taken: &mut [bool],
    streams: &mut [Option<TcpStream>],
    log: &mut Log,
) -> usize {
    let mut accepted = 0;
    for i in (0..pending.len()).rev() {
        if !ready[i] {
            continue;
        }
        match pending[i].advance(x, taken) {
            Step::Wait => {}
            Step::Drop(msg) => {
                log.line(msg);
                pending.swap_remove(i);
            }
            Step::Accepted(r) => {
                let p = pending.swap_remove(i);
                let from = addr_str(&p.peer);
                match settle(p.s) {
                    Ok(s) => {
                        streams[x.slot(r)] = Some(s);
                        accepted += 1;
                    }
                    Err(e) => {
                        taken[x.slot(r)] = false;
                        log.line(format!("dropped rank {r} from {from}: {e}"));
                    }
                }
            }
        }
    }
    accepted
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::thread;

    const T: Duration = Duration::from_secs(10);
    const TOKEN: &str = "the-run-token-of-these-tests-0123";
    const OTHER: &str = "another-token-of-the-same-length";

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

    /// Whether the other end closed `s` (end of file or a reset) rather than answering or
    /// staying silent for `T`.
    fn closed_by_peer(s: &mut TcpStream) -> bool {
        s.set_read_timeout(Some(T)).unwrap();
        let mut rest = Vec::new();
        match s.read_to_end(&mut rest) {
            Ok(_) => rest.is_empty(),
            Err(e) => e.kind() == ErrorKind::ConnectionReset,
        }
    }

    /// A joiner driven by hand: sends `hello`, returns the acceptor's nonce and proof.
    fn hand_hello(s: &mut TcpStream, hello: &Hello) -> ([u8; NONCE_LEN], Vec<u8>) {
        s.write_all(&encode_hello(hello)).unwrap();
        let mut ch = [0u8; CHALLENGE_LEN];
        s.read_exact(&mut ch).unwrap();
        check_prefix(&ch).unwrap();
        let mut n = [0u8; NONCE_LEN];
        n.copy_from_slice(&ch[12..44]);
        (n, ch[44..].to_vec())
    }

    #[test]
    fn allgather_on_2_3_4_ranks() {
        for n in 2..=4 {
            let want: Vec<Vec<u8>> = (0..n).map(|r| format!("rank {r}").into_bytes()).collect();
            for r in run(n, TOKEN) {
                assert_eq!(r.unwrap(), want);
            }
        }
    }

    #[test]
    fn proofs_bind_token_nonces_ranks_and_role() {
        let h = Hello {
            rank: 1,
            size: 2,
            peer: 0,
            nonce: [7; NONCE_LEN],
        };
        let a = [9u8; NONCE_LEN];
        let p = prove(TOKEN.as_bytes(), &h, &a, Role::Joiner).unwrap();
        assert!(verify(TOKEN.as_bytes(), &h, &a, Role::Joiner, &p).unwrap());
        assert!(!verify(OTHER.as_bytes(), &h, &a, Role::Joiner, &p).unwrap());
        assert!(!verify(TOKEN.as_bytes(), &h, &a, Role::Acceptor, &p).unwrap());
        assert!(!verify(TOKEN.as_bytes(), &h, &[8; NONCE_LEN], Role::Joiner, &p).unwrap());
        for changed in [
            Hello {
                rank: 2,
                ..h.clone()
            },
            Hello {
                size: 3,
                ..h.clone()
            },
            Hello {
                peer: 1,
                ..h.clone()
            },
            Hello {
                nonce: [6; NONCE_LEN],
                ..h.clone()
            },
        ] {
            assert!(!verify(TOKEN.as_bytes(), &changed, &a, Role::Joiner, &p).unwrap());
        }
        assert!(!verify(TOKEN.as_bytes(), &h, &a, Role::Joiner, &p[..31]).unwrap());
        // The hello carries nothing of the token.
        assert_eq!(decode_hello(&encode_hello(&h)).unwrap(), h);
        assert_ne!(nonce().unwrap(), nonce().unwrap());
    }

    #[test]
    fn short_tokens_and_bad_addresses_are_refused_before_any_connection() {
        let e = check_token("fifteen-bytes!!").unwrap_err().to_string();
        assert!(
            e.contains("15 bytes") && e.contains("head -c 24 /dev/urandom"),
            "{e}"
        );
        assert!(!e.contains("fifteen"), "the token is not repeated: {e}");
        check_token("sixteen-bytes!!!").unwrap();
        assert!(check_token(&"x".repeat(MAX_TOKEN_LEN + 1)).is_err());
        let l = Bootstrap::listen("127.0.0.1:0").unwrap();
        let addr = l.local_addr().to_string();
        let e = l.accept_all(2, "short", T).unwrap_err();
        assert!(matches!(e, Error::Config(_)), "{e}");
        // Refused at once, not after the timeout: nobody listens there any more.
        let e = Bootstrap::connect(&addr, 1, 2, "short", T).unwrap_err();
        assert!(matches!(e, Error::Config(_)), "{e}");
        for good in ["node1:7000", "127.0.0.1:1", "[::1]:65535", "a-b_c.d:80"] {
            check_address(good).unwrap();
        }
        for (bad, why) in [
            ("node1", "no port"),
            ("node1:", "not a number"),
            (":7000", "no host"),
            ("node1:0", "port 0"),
            ("node1:70000", "not a number"),
            ("::1:7000", "brackets"),
            ("fe80::1", "brackets"),
            ("[::1]7000", "]:PORT"),
            ("[node1]:7000", "not an IPv6"),
            ("no de:7000", "not a host"),
            ("http://node1:7000", "not a host"),
        ] {
            let e = check_address(bad).unwrap_err().to_string();
            assert!(e.contains(why) && e.contains("HOST:PORT"), "{bad}: {e}");
        }
        let env = RankEnv {
            rank: 1,
            size: 2,
            rendezvous: Some("node1".into()),
            token: Some(TOKEN.into()),
            job: None,
            launcher: crate::launch::Launcher::Manual,
        };
        let e = Bootstrap::from_env(&env, T).unwrap_err().to_string();
        assert!(e.contains("no port"), "{e}");
        let env = RankEnv {
            rendezvous: Some("127.0.0.1:1".into()),
            token: Some("short".into()),
            ..env
        };
        let e = Bootstrap::from_env(&env, T).unwrap_err().to_string();
        assert!(e.contains("head -c 24"), "{e}");
    }

    #[test]
    fn wrong_token_and_garbage_are_refused_while_the_run_completes() {
        let l = Bootstrap::listen("127.0.0.1:0").unwrap();
        let addr = l.local_addr().to_string();
        let acc = thread::spawn(move || {
            let mut b0 = l.accept_all(2, TOKEN, T)?;
            b0.allgather(b"zero")
        });
        let a = addr.clone();
        let bad = thread::spawn(move || Bootstrap::connect(&a, 1, 2, OTHER, T));
        let a = addr.clone();
        let garbage = thread::spawn(move || {
            let mut s = TcpStream::connect(&a).unwrap();
            s.write_all(&[0xFFu8; 64]).unwrap();
            closed_by_peer(&mut s)
        });
        let a = addr.clone();
        let old_version = thread::spawn(move || {
            let mut s = TcpStream::connect(&a).unwrap();
            // A version 1 hello: magic, version, then the token in clear.
            let mut h = MAGIC.to_vec();
            h.extend_from_slice(&1u32.to_le_bytes());
            s.write_all(&h).unwrap();
            closed_by_peer(&mut s)
        });
        // A silent connection must not hold up the genuine rank either.
        let _silent = TcpStream::connect(&addr).unwrap();
        match bad.join().unwrap().unwrap_err() {
            Error::Protocol(m) => assert!(m.contains("did not prove"), "{m}"),
            e => panic!("{e}"),
        }
        assert!(garbage.join().unwrap());
        assert!(old_version.join().unwrap());
        let a = addr.clone();
        let good = thread::spawn(move || {
            let mut b = Bootstrap::connect(&a, 1, 2, TOKEN, T)?;
            b.allgather(b"one")
        });
        let all = acc.join().unwrap().unwrap();
        assert_eq!(all, vec![b"zero".to_vec(), b"one".to_vec()]);
        assert_eq!(good.join().unwrap().unwrap(), all);
    }

    #[test]
    fn a_joiner_with_a_wrong_proof_gets_no_answer() {
        let l = Bootstrap::listen("127.0.0.1:0").unwrap();
        let addr = l.local_addr().to_string();
        let acc = thread::spawn(move || l.accept_all(2, TOKEN, T).map(drop));
        // It learns the acceptor's proof (useless without the token) and nothing else: no
        // verdict, the connection is closed.
        let mut s = TcpStream::connect(&addr).unwrap();
        let h = Hello {
            rank: 1,
            size: 2,
            peer: 0,
            nonce: [1; NONCE_LEN],
        };
        let (an, proof) = hand_hello(&mut s, &h);
        assert!(verify(TOKEN.as_bytes(), &h, &an, Role::Acceptor, &proof).unwrap());
        s.write_all(&prove(OTHER.as_bytes(), &h, &an, Role::Joiner).unwrap())
            .unwrap();
        assert!(closed_by_peer(&mut s));
        // Nor can the acceptor's proof be sent back as the joiner's.
        let mut s = TcpStream::connect(&addr).unwrap();
        let (_, proof) = hand_hello(&mut s, &h);
        s.write_all(&proof).unwrap();
        assert!(closed_by_peer(&mut s));
        Bootstrap::connect(&addr, 1, 2, TOKEN, T).unwrap();
        acc.join().unwrap().unwrap();
    }

    #[test]
    fn a_replayed_proof_is_refused() {
        let l = Bootstrap::listen("127.0.0.1:0").unwrap();
        let addr = l.local_addr().to_string();
        let acc = thread::spawn(move || l.accept_all(3, TOKEN, T).map(drop));
        let h = Hello {
            rank: 1,
            size: 3,
            peer: 0,
            nonce: [3; NONCE_LEN],
        };
        // A genuine rank 1, recorded.
        let mut genuine = TcpStream::connect(&addr).unwrap();
        let (an, _) = hand_hello(&mut genuine, &h);
        let recorded = prove(TOKEN.as_bytes(), &h, &an, Role::Joiner).unwrap();
        genuine.write_all(&recorded).unwrap();
        let mut v = [0u8; VERDICT_LEN];
        genuine.read_exact(&mut v).unwrap();
        assert_eq!(u32::from_le_bytes(v), Verdict::Accepted.code());
        // The same hello and proof again: the acceptor's nonce differs, the proof does not
        // verify, and the connection is closed without a verdict (a valid proof would have
        // been answered "already connected").
        let mut replay = TcpStream::connect(&addr).unwrap();
        let (an2, _) = hand_hello(&mut replay, &h);
        assert_ne!(an, an2);
        replay.write_all(&recorded).unwrap();
        assert!(closed_by_peer(&mut replay));
        // A fresh, valid proof for the same rank is answered, and refused as a duplicate.
        let mut dup = TcpStream::connect(&addr).unwrap();
        let (an3, _) = hand_hello(&mut dup, &h);
        dup.write_all(&prove(TOKEN.as_bytes(), &h, &an3, Role::Joiner).unwrap())
            .unwrap();
        dup.read_exact(&mut v).unwrap();
        assert_eq!(u32::from_le_bytes(v), Verdict::Duplicate.code());
        Bootstrap::connect(&addr, 2, 3, TOKEN, T).unwrap();
        acc.join().unwrap().unwrap();
    }

    #[test]
    fn a_fake_rank_0_is_refused_and_learns_nothing() {
        // Someone else took the port: it answers like rank 0 but does not know the token.
        let fake = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = fake.local_addr().unwrap().to_string();
        let a = addr.clone();
        let joiner = thread::spawn(move || Bootstrap::connect(&a, 1, 2, TOKEN, T));
        let (mut s, _) = fake.accept().unwrap();
        let mut hello = [0u8; HELLO_LEN];
        s.read_exact(&mut hello).unwrap();
        let h = decode_hello(&hello).unwrap();
        assert!(!hello
            .windows(MIN_TOKEN_LEN)
            .any(|w| TOKEN.as_bytes().windows(MIN_TOKEN_LEN).any(|t| t == w)));
        // Its best try: a proof under a guessed token.
        let an = [5u8; NONCE_LEN];
        let mut ch = MAGIC.to_vec();
        ch.extend_from_slice(&PROTOCOL_VERSION.to_le_bytes());
        ch.extend_from_slice(&an);
        ch.extend_from_slice(&prove(OTHER.as_bytes(), &h, &an, Role::Acceptor).unwrap());
        s.write_all(&ch).unwrap();
        match joiner.join().unwrap().unwrap_err() {
            Error::Protocol(m) => assert!(m.contains("did not prove"), "{m}"),
            e => panic!("{e}"),
        }
        // The joiner closed having sent nothing after its hello.
        assert!(closed_by_peer(&mut s));
    }

    #[test]
    fn silent_and_slow_connections_are_dropped() {
        let l = Bootstrap::listen("127.0.0.1:0")
            .unwrap()
            .with_handshake_limit(Duration::from_millis(300));
        let addr = l.local_addr().to_string();
        let acc = thread::spawn(move || l.accept_all(2, TOKEN, T).map(drop));
        let mut silent = TcpStream::connect(&addr).unwrap();
        let mut half = TcpStream::connect(&addr).unwrap();
        half.write_all(
            &encode_hello(&Hello {
                rank: 1,
                size: 2,
                peer: 0,
                nonce: [0; NONCE_LEN],
            })[..20],
        )
        .unwrap();
        // One that answers the challenge at a crawl, a byte every 50 ms.
        let a = addr.clone();
        let crawler = thread::spawn(move || {
            let mut s = TcpStream::connect(&a).unwrap();
            let h = Hello {
                rank: 1,
                size: 2,
                peer: 0,
                nonce: [2; NONCE_LEN],
            };
            let (an, _) = hand_hello(&mut s, &h);
            let p = prove(TOKEN.as_bytes(), &h, &an, Role::Joiner).unwrap();
            // Never the last byte: it could not complete however slow the acceptor.
            for &b in &p[..PROOF_LEN - 1] {
                if s.write_all(&[b]).is_err() {
                    return true;
                }
                thread::sleep(Duration::from_millis(50));
            }
            closed_by_peer(&mut s)
        });
        assert!(closed_by_peer(&mut silent));
        assert!(closed_by_peer(&mut half));
        assert!(crawler.join().unwrap());
        Bootstrap::connect(&addr, 1, 2, TOKEN, T).unwrap();
        acc.join().unwrap().unwrap();
    }

    #[test]
    fn many_idle_connections_do_not_keep_the_ranks_out() {
        let l = Bootstrap::listen("127.0.0.1:0").unwrap();
        let addr = l.local_addr().to_string();
        let acc = thread::spawn(move || {
            let mut b = l.accept_all(3, TOKEN, T)?;
            b.allgather(b"0")
        });
        let idle: Vec<TcpStream> = (0..300)
            .map(|_| TcpStream::connect(&addr).unwrap())
            .collect();
        let hs: Vec<_> = (1..3)
            .map(|r| {
                let a = addr.clone();
                thread::spawn(move || Bootstrap::connect(&a, r, 3, TOKEN, T)?.allgather(b"x"))
            })
            .collect();
        acc.join().unwrap().unwrap();
        for h in hs {
            h.join().unwrap().unwrap();
        }
        drop(idle);
    }

    #[test]
    fn refusals_with_the_right_token_say_why() {
        let l = Bootstrap::listen("127.0.0.1:0").unwrap();
        let addr = l.local_addr().to_string();
        let acc = thread::spawn(move || l.accept_all(2, TOKEN, T).map(drop));
        let e = connect_stream(&addr, 1, 0, 3, TOKEN, T)
            .unwrap_err()
            .to_string();
        assert!(e.contains("does not have 3 ranks"), "{e}");
        let e = connect_stream(&addr, 1, 1, 2, TOKEN, T)
            .unwrap_err()
            .to_string();
        assert!(e.contains("is not rank 1"), "{e}");
        let e = connect_stream(&addr, 5, 0, 2, TOKEN, T)
            .unwrap_err()
            .to_string();
        assert!(e.contains("does not expect"), "{e}");
        connect_stream(&addr, 1, 0, 2, TOKEN, T).unwrap();
        acc.join().unwrap().unwrap();
    }

    #[test]
    fn duplicate_rank_is_refused() {
        let l = Bootstrap::listen("127.0.0.1:0").unwrap();
        let addr = l.local_addr().to_string();
        let a = addr.clone();
        let first = thread::spawn(move || {
            let mut b = Bootstrap::connect(&a, 1, 3, TOKEN, T)?;
            b.barrier()
        });
        let acc = thread::spawn(move || {
            let mut b = l.accept_all(3, TOKEN, T)?;
            b.barrier()
        });
        thread::sleep(Duration::from_millis(200));
        let dup = Bootstrap::connect(&addr, 1, 3, TOKEN, T);
        match dup {
            Err(Error::Protocol(m)) => assert!(m.contains("already has"), "{m}"),
            r => panic!("{r:?}"),
        }
        let mut b2 = Bootstrap::connect(&addr, 2, 3, TOKEN, T).unwrap();
        b2.barrier().unwrap();
        first.join().unwrap().unwrap();
        acc.join().unwrap().unwrap();
    }

    #[test]
    fn missing_rank_times_out_naming_it() {
        let l = Bootstrap::listen("127.0.0.1:0").unwrap();
        let addr = l.local_addr().to_string();
        let h = thread::spawn(move || Bootstrap::connect(&addr, 1, 3, TOKEN, T));
        let e = l
            .accept_all(3, TOKEN, Duration::from_millis(500))
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
            let b = Bootstrap::connect(&addr, 1, 2, TOKEN, Duration::from_millis(400))?;
            thread::sleep(Duration::from_millis(1500));
            drop(b);
            Ok::<_, Error>(())
        });
        let mut b0 = l.accept_all(2, TOKEN, Duration::from_millis(400)).unwrap();
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
            TOKEN,
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
            token: Some(TOKEN.into()),
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
        assert!(decode_hello(&[0; HELLO_LEN]).is_err());
        assert!(decode_hello(&[0; HELLO_LEN - 1]).is_err());
        let mut h = encode_hello(&Hello {
            rank: 1,
            size: 2,
            peer: 0,
            nonce: [0; NONCE_LEN],
        });
        h[8] = 1;
        let e = decode_hello(&h).unwrap_err().to_string();
        assert!(e.contains("version 1"), "{e}");
    }
}
