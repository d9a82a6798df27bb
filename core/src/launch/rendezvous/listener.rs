//! Rank 0's side: the [`Listener`] that accepts every connection on one thread, each in its
//! handshake as a non-blocking state machine ([`Pending`]), until every expected rank has proved
//! the run's token (see the parent module's "Accepting").

use super::handshake::{
    check_prefix, decode_hello, nonce, prove, verify, Expect, Hello, Role, Verdict,
};
use super::{
    check_token, HELLO_LEN, MAGIC, MAX_PENDING, MAX_SIZE, MIN_PENDING, NONCE_LEN, PROOF_LEN,
    PROTOCOL_VERSION,
};
use crate::transport::error::{Error, Result};
use crate::transport::Rank;
use nix::poll::{PollFd, PollFlags, PollTimeout};
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::ops::Range;
use std::os::fd::AsFd;
use std::time::{Duration, Instant};

/// Refusals and drops logged one by one before they are only counted.
const LOG_LINES: usize = 20;
/// How long a handshake is under way before a newcomer may take its place when as many are
/// pending as may be.
const MAKE_ROOM_AFTER: Duration = Duration::from_secs(1);
/// How long accepting pauses after `accept(2)` fails (out of descriptors and the like), or
/// while as many handshakes are pending as may be.
const ACCEPT_PAUSE: Duration = Duration::from_millis(50);

fn addr_str(a: &Option<SocketAddr>) -> String {
    a.map(|a| a.to_string())
        .unwrap_or_else(|| "an unknown address".into())
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
    pub(super) inner: TcpListener,
    pub(super) addr: SocketAddr,
    pub(super) handshake_limit: Duration,
}

impl Listener {
    /// The address actually bound (with the port picked by the OS when 0 was asked).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Give every connection at most `limit` (instead of [`HANDSHAKE_LIMIT`]) to complete its
    /// handshake; the bootstrap timeout still applies when shorter.
    ///
    /// [`HANDSHAKE_LIMIT`]: super::HANDSHAKE_LIMIT
    pub fn with_handshake_limit(mut self, limit: Duration) -> Self {
        self.handshake_limit = limit;
        self
    }

    /// Accept one connection from each rank in `ranks` (a joiner that proves `token` and
    /// claims `size` and a rank in `ranks` not yet connected), refusing every other connection
    /// with a line on stderr. Returns the streams in rank order, blocking and with
    /// `TCP_NODELAY` set. `me` is the accepting rank, named in errors. Backends use this for
    /// their own data connections too. One thread, whatever connects (see the rendezvous
    /// module's documentation).
    pub fn accept_ranks(
        &self,
        me: Rank,
        size: u32,
        ranks: Range<Rank>,
        token: &str,
        timeout: Duration,
    ) -> Result<Vec<TcpStream>> {
        let mut streams: Vec<Option<TcpStream>> = (0..ranks.len()).map(|_| None).collect();
        let first = ranks.start;
        self.accept_each(me, size, ranks, token, (timeout, MAX_PENDING), |r, s| {
            streams[(r - first) as usize] = Some(s);
            Ok(())
        })?;
        streams
            .into_iter()
            .map(|s| s.ok_or_else(|| Error::Protocol("a rank is missing after accept".into())))
            .collect()
    }

    /// [`Listener::accept_ranks`], each rank's stream handed to `take` as it is accepted
    /// (which may keep it or read from it and close it), within `timeout` and with at most
    /// `pending_cap` handshakes (each a descriptor) under way at once.
    pub(super) fn accept_each(
        &self,
        me: Rank,
        size: u32,
        ranks: Range<Rank>,
        token: &str,
        (timeout, pending_cap): (Duration, usize),
        mut take: impl FnMut(Rank, TcpStream) -> Result<()>,
    ) -> Result<()> {
        if ranks.end > size || size > MAX_SIZE {
            return Err(Error::Invalid(format!(
                "ranks {ranks:?} of a run of {size} ranks"
            )));
        }
        check_token(token)?;
        let deadline = Instant::now() + timeout;
        let limit = self.handshake_limit.min(timeout);
        let n = ranks.len();
        let natural = (n + 16).clamp(MIN_PENDING, MAX_PENDING);
        let cap = natural.min(pending_cap.max(2));
        // Bounded by descriptors rather than by the ranks expected: ranks that arrive at once
        // wait in the kernel's queue rather than displace one another.
        let patient = cap < natural;
        let x = Expect {
            me,
            size,
            ranks: ranks.clone(),
            token: token.as_bytes(),
        };
        let mut got: Vec<bool> = vec![false; n];
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
                return Err(self.missing_ranks(me, &ranks, &got, timeout));
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
            for (r, s) in advance_ready(&mut pending, &ready, &x, &mut taken, &mut log) {
                got[x.slot(r)] = true;
                missing -= 1;
                take(r, s)?;
            }
            if incoming && !self.accept_some(&mut pending, (cap, patient), &mut log) {
                accept_from = Instant::now() + ACCEPT_PAUSE;
            }
        }
        Ok(())
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
    /// pending one when `cap` are already there (unless `patient` and all are young). `false`
    /// when accepting calls for a pause: `accept(2)` failed (out of descriptors and the like),
    /// or newcomers are left to wait.
    fn accept_some(
        &self,
        pending: &mut Vec<Pending>,
        (cap, patient): (usize, bool),
        log: &mut Log,
    ) -> bool {
        for _ in 0..(cap / 2).max(1) {
            if pending.len() >= cap {
                // Full. When `patient`, newcomers wait in the kernel's queue while every
                // handshake under way is young (ranks starting at once, on a rank short of
                // descriptors); otherwise, or once one has waited, the oldest makes room.
                let oldest = pending.iter().map(|p| p.since).min();
                if patient && oldest.is_some_and(|t| t.elapsed() < MAKE_ROOM_AFTER) {
                    return false;
                }
                make_room(pending, log);
            }
            match accept_one(&self.inner, log) {
                Accepted::One(s, peer) => pending.push(Pending::new(s, Some(peer), Instant::now())),
                Accepted::Dropped => {}
                Accepted::None => return true,
                Accepted::Failed => return false,
            }
        }
        true
    }

    /// The timeout of an accept that still lacks the ranks of `ranks` not `got`.
    fn missing_ranks(
        &self,
        me: Rank,
        ranks: &Range<Rank>,
        got: &[bool],
        timeout: Duration,
    ) -> Error {
        let names: Vec<String> = got
            .iter()
            .enumerate()
            .filter(|(_, g)| !**g)
            .map(|(i, _)| (ranks.start + i as Rank).to_string())
            .collect();
        Error::Timeout {
            rank: me,
            what: format!("rank(s) {} to connect to {}", names.join(", "), self.addr),
            timeout,
        }
    }
}

/// Connections from any rank of a run, accepted without blocking as they come: a backend that
/// connects its ranks on demand keeps one, and calls [`Acceptor::poll`] from its progress
/// loop. Each connection goes through the same handshake as the bootstrap's, as the same
/// non-blocking state machine; a rank may connect again after its earlier connection closed.
#[derive(Debug)]
pub struct Acceptor {
    listener: Listener,
    me: Rank,
    size: u32,
    token: String,
    pending: Vec<Pending>,
    log: Log,
    accept_from: Instant,
}

impl Acceptor {
    /// Accept on `listener` for rank `me` of a run of `size` ranks proving `token`.
    pub fn new(listener: Listener, me: Rank, size: u32, token: &str) -> Result<Acceptor> {
        check_token(token)?;
        if size > MAX_SIZE || me >= size {
            return Err(Error::Invalid(format!(
                "rank {me} of a run of {size} ranks"
            )));
        }
        listener
            .inner
            .set_nonblocking(true)
            .map_err(|e| Error::io("making the data listener non-blocking", e))?;
        Ok(Acceptor {
            listener,
            me,
            size,
            token: token.to_string(),
            pending: Vec::new(),
            log: Log::default(),
            accept_from: Instant::now(),
        })
    }

    /// The address the listener is bound to.
    pub fn local_addr(&self) -> SocketAddr {
        self.listener.addr
    }

    /// The listening socket, to wait on for new connections.
    pub fn listener_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        self.listener.inner.as_fd()
    }

    /// Handshakes under way (each holds a descriptor).
    pub fn pending(&self) -> usize {
        self.pending.len()
    }

    /// Whether a connection waits in the listener's queue (not yet accepted), without
    /// blocking.
    pub fn waiting(&self) -> bool {
        let mut fds = [PollFd::new(self.listener.inner.as_fd(), PollFlags::POLLIN)];
        matches!(nix::poll::poll(&mut fds, PollTimeout::ZERO), Ok(n) if n > 0)
    }

    /// Without blocking: take up to `room` of the connections waiting on the listener into
    /// their handshake (the others wait in the kernel's queue; a handshake under way is never
    /// dropped to make room), move every handshake on as far as its socket allows, and return
    /// the ranks that proved themselves with their streams (blocking, `TCP_NODELAY` set). A
    /// refused, broken or late connection is dropped with a line on standard error.
    pub fn poll(&mut self, room: usize) -> Vec<(Rank, TcpStream)> {
        let now = Instant::now();
        let limit = self.listener.handshake_limit;
        drop_late(&mut self.pending, now, limit, &mut self.log);
        let mut room = room.min(MIN_PENDING.saturating_sub(self.pending.len()));
        while room > 0 && now >= self.accept_from {
            match accept_one(&self.listener.inner, &mut self.log) {
                Accepted::One(s, peer) => {
                    self.pending.push(Pending::new(s, Some(peer), now));
                    room -= 1;
                }
                Accepted::Dropped => {}
                Accepted::None => break,
                Accepted::Failed => self.accept_from = now + ACCEPT_PAUSE,
            }
        }
        let x = Expect {
            me: self.me,
            size: self.size,
            ranks: 0..self.size,
            token: self.token.as_bytes(),
        };
        let mut out = Vec::new();
        for i in (0..self.pending.len()).rev() {
            // A rank may come again: nothing is ever taken for good.
            let mut taken = vec![false; self.size as usize];
            match self.pending[i].advance(&x, &mut taken) {
                Step::Wait => {}
                Step::Drop(msg) => {
                    self.log.line(msg);
                    self.pending.swap_remove(i);
                }
                Step::Accepted(r) => {
                    let p = self.pending.swap_remove(i);
                    let from = addr_str(&p.peer);
                    if r == self.me {
                        self.log.line(format!(
                            "dropped a connection from {from} claiming this very rank {r}"
                        ));
                        continue;
                    }
                    match settle(p.s) {
                        Ok(s) => out.push((r, s)),
                        Err(e) => self.log.line(format!("dropped rank {r} from {from}: {e}")),
                    }
                }
            }
        }
        out
    }
}

/// What one `accept(2)` on a non-blocking listener gave.
enum Accepted {
    /// A connection, non-blocking, and where it came from.
    One(TcpStream, SocketAddr),
    /// A connection dropped at once (it could not be made non-blocking), with a line.
    Dropped,
    /// Nothing waiting.
    None,
    /// `accept(2)` failed in a way that calls for a pause (out of descriptors and the like),
    /// with a line.
    Failed,
}

/// Accept one waiting connection from `inner`, made non-blocking for its handshake.
fn accept_one(inner: &TcpListener, log: &mut Log) -> Accepted {
    loop {
        match inner.accept() {
            Ok((s, peer)) => {
                if let Err(e) = s.set_nonblocking(true) {
                    log.line(format!("dropped connection from {peer}: {e}"));
                    return Accepted::Dropped;
                }
                return Accepted::One(s, peer);
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => return Accepted::None,
            Err(e)
                if matches!(
                    e.kind(),
                    ErrorKind::Interrupted | ErrorKind::ConnectionAborted
                ) => {}
            Err(e) => {
                log.line(format!("accept failed: {e}"));
                return Accepted::Failed;
            }
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

/// Advance every handshake whose socket is `ready`: the ranks that proved themselves come back
/// with their streams, a refused or broken one is dropped with a log line.
fn advance_ready(
    pending: &mut Vec<Pending>,
    ready: &[bool],
    x: &Expect<'_>,
    taken: &mut [bool],
    log: &mut Log,
) -> Vec<(Rank, TcpStream)> {
    let mut accepted = Vec::new();
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
                    Ok(s) => accepted.push((r, s)),
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
    use crate::launch::rendezvous::handshake::encode_hello;
    use crate::launch::rendezvous::tests::{closed_by_peer, hand_hello, OTHER, T, TOKEN};
    use crate::launch::rendezvous::{Bootstrap, VERDICT_LEN};
    use std::thread;

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
        // It says where it listens, as a rank does, and waits there for rank 0's list.
        let mine = Bootstrap::listen("127.0.0.1:0").unwrap();
        let here = mine.local_addr().to_string();
        let who = super::super::stream::Who { me: 1, peer: 0 };
        let soon = Instant::now() + T;
        super::super::stream::write_frame(&mut genuine, here.as_bytes(), soon, &who).unwrap();
        let rank1 = thread::spawn(move || {
            let mut up = mine.accept_ranks(1, 3, 0..1, TOKEN, T).unwrap();
            super::super::stream::read_frame(&mut up[0], Instant::now() + T, &who).unwrap()
        });
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
        assert!(!rank1.join().unwrap().is_empty());
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
        // Rank 1's own bound is short: once it has spoken it waits for the table from its
        // parent, which never comes, and only its timeout ends that wait.
        let h =
            thread::spawn(move || Bootstrap::connect(&addr, 1, 3, TOKEN, Duration::from_secs(2)));
        let e = l
            .accept_all(3, TOKEN, Duration::from_millis(500))
            .unwrap_err();
        match e {
            Error::Timeout { rank: 0, what, .. } => assert!(what.contains("rank(s) 2"), "{what}"),
            e => panic!("{e}"),
        }
        // The connected rank fails (rank 0 went away, refused, or its wait timed out) rather
        // than hanging.
        assert!(h.join().unwrap().is_err());
    }
}
