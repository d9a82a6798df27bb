//! [`TcpEndpoint`]: the mesh of connections, its progress engine (every connection's sends and
//! receives driven from `test` and `wait`), the ways a wait sleeps, and the goodbye exchange.

use crate::conn::{Conn, Rx, SendOp, SLEEP_SLICE};
use crate::frame::{self, HEADER_BYTES, SMALL_FRAME};
use crate::{TcpConfig, RX_BUFFER_BYTES};
use commbench_core::launch::affinity;
use commbench_core::launch::rendezvous::{
    self as rendezvous, Acceptor, Bootstrap, Listener, Rendezvous,
};
use commbench_core::transport::error::FORGOTTEN;
use commbench_core::transport::matching::{Matcher, ReqTable};
use commbench_core::transport::{
    BackendInfo, Completion, Endpoint, OpKind, Rank, ReqId, Span, Src, Tag, TagSel,
};
use commbench_core::{Error, Result};
use nix::errno::Errno;
use nix::sys::epoll::{Epoll, EpollCreateFlags, EpollEvent, EpollFlags};
use std::net::SocketAddr;
use std::os::fd::AsFd;
use std::time::{Duration, Instant};

/// Sends at least this long first release an acknowledgement the kernel is holding back (see
/// [`Conn::quickack`]). Below it the extra ACK costs more than it saves: on loopback 64 and
/// 96 KiB ping-pongs were slower with it, 128 KiB the same, 192 KiB and more faster.
const QUICKACK_MIN: usize = 128 << 10;

/// What a request waits for, to name the peer in a timeout.
#[derive(Debug, Clone, Copy)]
struct Meta {
    kind: OpKind,
    peer: Option<Rank>,
    /// The request it describes (the slot's latest).
    req: ReqId,
}

/// One rank's TCP endpoint (see the crate documentation).
#[derive(Debug)]
pub struct TcpEndpoint {
    pub(crate) rank: Rank,
    pub(crate) size: u32,
    pub(crate) cfg: TcpConfig,
    /// The open connections, in no order; at most one per peer is routed.
    pub(crate) conns: Vec<Conn>,
    /// By peer: 1 + the index in `conns` of the connection sends to it take; 0: none.
    pub(crate) route: Vec<u32>,
    /// Every rank's data address, to connect to it when first needed.
    pub(crate) addrs: Vec<String>,
    /// This rank's data listener and the handshakes under way on it.
    pub(crate) acceptor: Acceptor,
    pub(crate) token: String,
    /// How many connections this rank keeps open, and why.
    pub(crate) limit: crate::mesh::Limit,
    pub(crate) mesh: crate::mesh::MeshState,
    pub(crate) matcher: Matcher,
    pub(crate) reqs: ReqTable,
    meta: Vec<Meta>,
    /// By rank: how this rank learnt that the peer's process is gone (its connection closed
    /// without goodbye, or failed). Only what involves it fails from then on.
    gone: Vec<Option<String>>,
    pub(crate) epoll: Epoll,
    events: [EpollEvent; 16],
    local: Option<SocketAddr>,
    /// The CPU asked for and the affinity in effect, for the backend info.
    pinned: Option<usize>,
    affinity: Vec<usize>,
}

impl TcpEndpoint {
    /// Make the endpoint over an established bootstrap: listen, exchange addresses, connect
    /// every pair when the limit on open connections allows it (each rank to the ranks
    /// below it, all presenting `token`), and pin the calling thread as [`TcpConfig::cpus`]
    /// says. Beyond the limit, a connection is made when a message first goes to its peer
    /// (the crate documentation).
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
        // Each rank's address and its limit: every pair is connected at start only when
        // every rank's limit allows it (ranks on hosts with other limits agree).
        let limit = crate::mesh::Limit::of(cfg);
        let mine = format!("{advertised} {}", limit.max_open);
        let all = boot
            .allgather(mine.as_bytes())
            .map_err(|e| e.in_phase("exchanging data addresses"))?;
        let (addrs, all_at_start) = crate::mesh::addresses(&all)?;
        let acceptor = Acceptor::new(listener, me, size, token)?;
        let epoll = Epoll::new(EpollCreateFlags::EPOLL_CLOEXEC)
            .map_err(|e| Error::io("creating an epoll instance", e.into()))?;
        epoll
            .add(
                acceptor.listener_fd(),
                EpollEvent::new(EpollFlags::EPOLLIN, crate::mesh::LISTENER),
            )
            .map_err(|e| Error::io("registering the data listener with epoll", e.into()))?;
        let mut ep = TcpEndpoint {
            rank: me,
            size,
            cfg: cfg.clone(),
            conns: Vec::new(),
            route: vec![0; size as usize],
            addrs,
            acceptor,
            token: token.to_string(),
            limit,
            mesh: crate::mesh::MeshState {
                made_to: vec![0; size as usize],
                taken_from: vec![0; size as usize],
                ..Default::default()
            },
            matcher: Matcher::new(),
            reqs: ReqTable::new(),
            meta: Vec::with_capacity(64),
            gone: vec![None; size as usize],
            epoll,
            events: [EpollEvent::empty(); 16],
            local: Some(advertised),
            pinned: None,
            affinity: Vec::new(),
        };
        if all_at_start {
            ep.connect_all()
                .map_err(|e| e.in_phase("connecting every pair"))?;
            // Every pair is connected and none is ever closed: no one connects again, and
            // the listener is no longer watched (a busy-polling wait does not pay for it).
            ep.mesh.fixed = true;
            let _ = ep.epoll.delete(ep.acceptor.listener_fd());
        }
        ep.pinned = affinity::cpu_for(&cfg.cpus, me);
        ep.affinity = affinity::pin(ep.pinned)?;
        Ok(ep)
    }

    /// The tag-matching engine (its counters feed the queue benchmarks of seed 004).
    pub fn matcher(&self) -> &Matcher {
        &self.matcher
    }

    /// A request for a receive from `src` (a rank checked to be a peer), noted as pending.
    fn receive_request(&mut self, src: Src) -> Result<ReqId> {
        if let Src::Rank(r) = src {
            self.check_peer(r, "receive from")?;
        }
        let req = self.reqs.alloc();
        let peer = match src {
            Src::Rank(r) => Some(r),
            Src::Any => None,
        };
        self.note(req, OpKind::Recv, peer);
        Ok(req)
    }

    fn note(&mut self, req: ReqId, kind: OpKind, peer: Option<Rank>) {
        let i = (req.0 & 0xFFFF_FFFF) as usize;
        if i >= self.meta.len() {
            self.meta.resize(
                i + 1,
                Meta {
                    kind: OpKind::Send,
                    peer: None,
                    req,
                },
            );
        }
        self.meta[i] = Meta { kind, peer, req };
    }

    fn check_peer(&self, r: Rank, what: &str) -> Result<()> {
        if r >= self.size {
            return Err(Error::Invalid(format!(
                "{what} rank {r}, but the run has {} ranks",
                self.size
            )));
        }
        if let Some(detail) = self.gone.get(r as usize).and_then(|g| g.clone()) {
            return Err(Error::PeerLost { peer: r, detail });
        }
        Ok(())
    }

    /// The connection `i`'s peer is gone (`e`, how it was noticed): [`Self::drop_peer`].
    pub(crate) fn lose(&mut self, i: usize, e: &Error) {
        let detail = match e.root() {
            Error::PeerLost { detail, .. } => detail.clone(),
            other => other.to_string(),
        };
        self.drop_peer(self.conns[i].peer, detail);
    }

    /// `peer` is gone (`detail`: how this rank knows): its connections are dropped with what
    /// was queued on them, and from now on only the operations that involve it fail, with
    /// [`Error::PeerLost`]: a send to it or a receive from it, posted or pending. The others,
    /// and receives from any rank, go on.
    fn drop_peer(&mut self, peer: Rank, detail: String) {
        let lost = || Error::PeerLost {
            peer,
            detail: detail.clone(),
        };
        let TcpEndpoint {
            conns,
            reqs,
            matcher,
            meta,
            ..
        } = self;
        for c in conns.iter_mut().filter(|c| c.peer == peer) {
            for op in c.sendq.drain(..) {
                if let Some(req) = op.req {
                    reqs.complete(req, Err(lost()));
                }
            }
            // A message it was part way through: the receive it was landing in fails, even
            // one posted for any rank.
            if let Rx::Posted { recv, .. } = std::mem::replace(&mut c.rx, Rx::Header) {
                matcher.refuse(reqs, recv, lost());
            }
            c.fin_out = true;
            c.close_in = true;
            c.closed = true;
        }
        // Receives posted for it alone can never complete.
        for m in meta.iter() {
            if m.peer == Some(peer)
                && matches!(m.kind, OpKind::Recv)
                && reqs.is_pending(m.req)
                && matcher.cancel(m.req).is_some()
            {
                reqs.complete(m.req, Err(lost()));
            }
        }
        // A call it made is not answered: there is no one to connect to.
        self.mesh.calls.retain(|&(p, _)| p != peer);
        if let Some(g) = self.gone.get_mut(peer as usize) {
            g.get_or_insert(detail);
        }
    }

    /// Whether `peer`'s process is gone ([`Self::lose`]).
    pub(crate) fn is_gone(&self, peer: Rank) -> bool {
        self.gone.get(peer as usize).is_some_and(Option::is_some)
    }

    /// Write what it can of the send just queued alone on connection `i`; a peer found gone
    /// meanwhile is [`Self::lose`]n.
    fn first_write(&mut self, i: usize) -> Result<()> {
        let TcpEndpoint { conns, reqs, .. } = self;
        match conns[i].tx_progress(reqs) {
            Ok(_) => Ok(()),
            Err(e) => {
                if matches!(e, Error::PeerLost { .. }) {
                    self.lose(i, &e);
                }
                Err(e)
            }
        }
    }

    /// The error of a request still pending whose peer's process is gone: it can never
    /// complete.
    fn gone_peer(&self, req: ReqId) -> Option<Error> {
        let i = (req.0 & 0xFFFF_FFFF) as usize;
        let p = self.meta.get(i)?.peer?;
        let detail = self.gone.get(p as usize)?.clone()?;
        Some(Error::PeerLost { peer: p, detail })
    }

    /// Non-blocking progress on every connection, and on the listener now and then (when
    /// epoll saw it ready, while handshakes are under way, and every 64th call otherwise;
    /// never once every pair is connected for good).
    pub(crate) fn progress(&mut self) -> Result<bool> {
        if !self.mesh.fixed {
            self.mesh.polls = self.mesh.polls.wrapping_add(1);
            let look = self.mesh.listener_ready
                || self.acceptor.pending() > 0
                || self.mesh.polls % 64 == 0;
            if look {
                self.mesh.listener_ready = false;
                self.accept_ready()?;
            }
            if !self.mesh.calls.is_empty() {
                self.serve_calls()?;
            }
        }
        let mut any = false;
        let mut ends = false;
        let mut lost = Vec::new();
        for (i, c) in self.conns.iter_mut().enumerate() {
            let mut step = || -> Result<bool> {
                let mut any = false;
                if !c.sendq.is_empty() {
                    any |= c.tx_progress(&mut self.reqs)?;
                }
                if !c.held {
                    any |= c.rx_progress(&mut self.matcher, &mut self.reqs, false)?;
                }
                Ok(any)
            };
            match step() {
                Ok(p) => any |= p,
                // That peer's process is gone: the others go on.
                Err(e) if matches!(e, Error::PeerLost { .. }) => lost.push((i, e)),
                Err(e) => return Err(e),
            }
            ends |= c.close_in || c.fin_out;
        }
        for (i, e) in &lost {
            self.lose(*i, e);
            ends = true;
            any = true;
        }
        if ends {
            self.reap()?;
        }
        Ok(any)
    }

    /// The only connection of a two-rank run, when a wait can sleep in its `read(2)`:
    /// blocking mode, nothing to write, the connection open and no other being made.
    fn single_reader(&self) -> Option<usize> {
        if self.cfg.poll || self.size != 2 || self.conns.len() != 1 {
            return None;
        }
        if self.acceptor.pending() > 0 || self.mesh.connecting.is_some() {
            return None;
        }
        let c = &self.conns[0];
        (c.sendq.is_empty() && c.usable() && !c.held).then_some(0)
    }

    /// Sleep in `epoll_wait(2)` until a connection can be read, a queued send written or a
    /// connection accepted, at most `left` (1 ms at a time while a handshake is under way:
    /// its sockets are not watched).
    pub(crate) fn sleep(&mut self, left: Duration) -> Result<()> {
        for c in self.conns.iter_mut() {
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
        let slice = if self.acceptor.pending() > 0 || self.mesh.connecting.is_some() {
            Duration::from_millis(1)
        } else {
            SLEEP_SLICE
        };
        let ms = left.min(slice).as_millis().clamp(1, u16::MAX as u128) as u16;
        match self.epoll.wait(&mut self.events, ms) {
            Ok(n) => {
                let ready = &self.events[..n.min(self.events.len())];
                if ready.iter().any(|e| e.data() == crate::mesh::LISTENER) {
                    self.mesh.listener_ready = true;
                }
                Ok(())
            }
            Err(Errno::EINTR) => Ok(()),
            Err(e) => Err(Error::io("waiting in epoll_wait", e.into())),
        }
    }

    fn timeout_error(&self, req: ReqId) -> Error {
        let i = (req.0 & 0xFFFF_FFFF) as usize;
        let what = match self.meta.get(i) {
            Some(Meta {
                kind: OpKind::Recv,
                peer: Some(p),
                ..
            }) => format!("a message from rank {p} (request {})", req.0),
            Some(Meta {
                kind: OpKind::Recv,
                peer: None,
                ..
            }) => format!("a message from any rank (request {})", req.0),
            Some(Meta {
                kind: OpKind::Send,
                peer: Some(p),
                ..
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
        let c = self.conns.iter().find(|c| c.peer == p && c.bye_in)?;
        (c.closed && matches!(c.rx, Rx::Header)).then(|| Error::PeerLost {
            peer: p,
            detail: "it finished its run and closed the connection".into(),
        })
    }

    /// End the run cleanly: write every queued send, say goodbye on every connection and
    /// wait for every peer's goodbye (or the end of a connection being closed), so that no
    /// message in flight is lost when the sockets close.
    pub fn finish(mut self) -> Result<()> {
        let start = Instant::now();
        let limit = self.cfg.timeout;
        for c in self.conns.iter_mut().filter(|c| !c.fin_out) {
            c.sendq
                .push_back(SendOp::whole(None, frame::bye(), Vec::new(), 0, 0));
            c.fin_out = true;
        }
        self.route.iter_mut().for_each(|r| *r = 0);
        loop {
            self.progress().map_err(|e| e.in_phase("goodbye"))?;
            let pending: Vec<Rank> = self
                .conns
                .iter()
                .filter(|c| !c.sendq.is_empty() || !c.bye_in && !c.close_in && !c.closed)
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

/// A message must fit what a frame header may announce ([`frame::MAX_MESSAGE`]).
fn check_len(len: usize) -> Result<()> {
    if len as u64 > frame::MAX_MESSAGE {
        return Err(Error::Invalid(format!(
            "tcp: a message of {len} bytes is over the backend's limit of {} bytes",
            frame::MAX_MESSAGE
        )));
    }
    Ok(())
}

impl Endpoint for TcpEndpoint {
    commbench_core::endpoint_identity! {
        backend: "tcp", rank: rank, size: size, timeout: cfg.timeout
    }

    /// Dropped as a peer whose process is gone (`drop_peer`): nothing queued for it
    /// is written, nothing is read from it, no goodbye is said to it or awaited, and what
    /// involves it fails.
    fn forget(&mut self, peer: Rank) {
        self.drop_peer(peer, FORGOTTEN.into());
    }

    fn isend(&mut self, dest: Rank, tag: Tag, buf: Vec<u8>) -> Result<ReqId> {
        self.check_peer(dest, "send to")?;
        check_len(buf.len())?;
        let req = self.reqs.alloc();
        self.note(req, OpKind::Send, Some(dest));
        let len = buf.len();
        if dest == self.rank {
            self.matcher.deliver_copy(&mut self.reqs, dest, tag, &buf);
            self.reqs
                .complete(req, Ok(Completion::send(buf, dest, tag)));
            return Ok(req);
        }
        let i = self.sender(dest)?;
        let c = &mut self.conns[i];
        c.sendq.push_back(SendOp::whole(
            Some(req),
            frame::message(len, tag),
            buf,
            tag,
            0,
        ));
        if c.sendq.len() == 1 {
            if len >= QUICKACK_MIN {
                c.quickack()?;
            }
            self.first_write(i)?;
        }
        Ok(req)
    }

    fn irecv(&mut self, src: Src, tag: TagSel, buf: Vec<u8>) -> Result<ReqId> {
        let req = self.receive_request(src)?;
        if let Some(res) = self.matcher.post_recv(req, src, tag, buf) {
            self.reqs.complete(req, res);
        }
        Ok(req)
    }

    /// A span posted several times is queued as one send that writes its frame `count` times
    /// before it completes; a span to this very rank is delivered `count` times at once.
    fn isend_span(&mut self, dest: Rank, tag: Tag, buf: Vec<u8>, span: Span) -> Result<ReqId> {
        let range = span.range(buf.len())?;
        if span.is_whole(buf.len()) {
            return self.isend(dest, tag, buf);
        }
        self.check_peer(dest, "send to")?;
        check_len(span.len)?;
        let req = self.reqs.alloc();
        self.note(req, OpKind::Send, Some(dest));
        let mut done = Completion::send(Vec::new(), dest, tag);
        done.len = span.len;
        if dest == self.rank {
            for _ in 0..span.count {
                let data = &buf[range.clone()];
                self.matcher.deliver_copy(&mut self.reqs, dest, tag, data);
            }
            done.buf = buf;
            self.reqs.complete(req, Ok(done));
            return Ok(req);
        }
        let i = self.sender(dest)?;
        let c = &mut self.conns[i];
        c.sendq.push_back(SendOp {
            req: Some(req),
            hdr: frame::message(span.len, tag),
            buf,
            tag,
            off: 0,
            start: span.start,
            len: span.len,
            left: span.count,
        });
        if c.sendq.len() == 1 {
            if span.len >= QUICKACK_MIN {
                c.quickack()?;
            }
            self.first_write(i)?;
        }
        Ok(req)
    }

    /// The matcher takes the span: its messages land at `span.start` of `buf`.
    fn irecv_span(&mut self, src: Src, tag: TagSel, buf: Vec<u8>, span: Span) -> Result<ReqId> {
        span.range(buf.len())?;
        if span.is_whole(buf.len()) {
            return self.irecv(src, tag, buf);
        }
        let req = self.receive_request(src)?;
        if let Some(res) = self.matcher.post_recv_span(req, src, tag, buf, span) {
            self.reqs.complete(req, res);
        }
        Ok(req)
    }

    fn test(&mut self, req: ReqId) -> Result<Option<Completion>> {
        if let Some(c) = self.reqs.take(req)? {
            return Ok(Some(c));
        }
        self.progress()?;
        match self.reqs.take(req)? {
            Some(c) => Ok(Some(c)),
            None => match self.gone_peer(req) {
                Some(e) => Err(e),
                None => Ok(None),
            },
        }
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
                if let Some(c) = conns.get_mut(i) {
                    match c.rx_progress(matcher, reqs, true) {
                        Ok(_) => {}
                        Err(e) if matches!(e, Error::PeerLost { .. }) => self.lose(i, &e),
                        Err(e) => return Err(e),
                    }
                }
            } else {
                self.progress()?;
                if self.reqs.is_pending(req) {
                    if let Some(e) = self.gone_peer(req) {
                        return Err(e);
                    }
                }
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
        check_len(buf.len())?;
        // Fast path: nothing queued to `dest`, so the whole frame may leave in one sendmsg(2).
        if dest != self.rank && dest < self.size {
            self.check_peer(dest, "send to")?;
            let i = self.sender(dest)?;
            let c = &mut self.conns[i];
            if c.sendq.is_empty() {
                if buf.len() >= QUICKACK_MIN {
                    c.quickack()?;
                }
                let hdr = frame::message(buf.len(), tag);
                let n = match c.write_from(&hdr, &buf, 0) {
                    Ok(n) => n,
                    Err(e) => {
                        if matches!(e, Error::PeerLost { .. }) {
                            self.lose(i, &e);
                        }
                        return Err(e);
                    }
                };
                if n == HEADER_BYTES + buf.len() {
                    return Ok(buf);
                }
                let req = self.reqs.alloc();
                self.note(req, OpKind::Send, Some(dest));
                let c = &mut self.conns[i];
                c.sendq
                    .push_back(SendOp::whole(Some(req), hdr, buf, tag, n));
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
        let how = if self.mesh.fixed {
            "every pair at start"
        } else {
            "on demand, least recently used closed beyond max_open"
        };
        m.insert("connections".into(), how.into());
        m.insert("max_open".into(), (self.limit.max_open as u64).into());
        m.insert("max_open_from".into(), self.limit.why.clone().into());
        affinity::record(&mut m, self.pinned, &self.affinity);
        m
    }
}
