//! Connections on demand: a rank connects to a peer when a message first goes to it, accepts
//! whoever connects to it, and keeps at most [`Limit::max_open`] connections open, closing
//! the least recently used idle one to make room.
//!
//! * **One connection a pair, made by the higher rank.** A rank that needs a connection to a
//!   lower rank makes it; one that needs a connection to a higher rank asks that rank to make
//!   it (a short connection that says only "call me" and closes) and waits for it. So two
//!   ranks never connect to each other at once, and a pair never has two connections that
//!   both carry messages.
//! * **Closing without losing a message.** A rank closes a connection with a close frame
//!   after its last message on it and sends nothing more there; the peer answers with its own
//!   close frame after whatever it had queued, and each side forgets the connection once it
//!   has both sent and received a close (or a goodbye). A new connection between the two is
//!   made only once the old one is gone on the side that makes it, and the other side does
//!   not read the new one while it still has the old one: messages between two ranks keep
//!   their order across connections (MPI's non-overtaking rule).
//! * **The limit** comes from `RLIMIT_NOFILE` (the soft limit, less the descriptors open when
//!   the endpoint is made and a reserve for the files a run writes), shared by the ranks of
//!   one process, or from [`crate::TcpConfig::max_open`]. When every rank's limit allows a
//!   connection to every other rank, every pair is connected at start, and none is closed
//!   or made again. The first time the limit makes a rank close a connection, the rank says
//!   so on standard error, once.

use crate::conn::{Conn, SendOp};
use crate::frame;
use crate::{TcpConfig, TcpEndpoint};
use commbench_core::launch::rendezvous;
use commbench_core::transport::Rank;
use commbench_core::{Error, Result};
use nix::sys::epoll::{EpollEvent, EpollFlags};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::fd::AsFd;
use std::time::{Duration, Instant};

/// The epoll token of the data listener (connections use their peer's rank).
pub(crate) const LISTENER: u64 = u64::MAX;
/// What a joiner says after the handshake: this connection carries the pair's messages.
const DATA: u8 = b'M';
/// What a joiner says after the handshake: connect to me (the joiner is the lower rank).
const CALL: u8 = b'C';
/// Descriptors left for what a run opens besides its connections (output files, handshakes
/// under way).
const RESERVE: u64 = 8;
/// Of [`RESERVE`], the descriptors a rank at its limit may use to accept a connection when
/// none of its own is idle.
const SLACK: usize = (RESERVE / 2) as usize;
/// The fewest connections a rank keeps open, whatever the limit says.
const MIN_OPEN: usize = 2;

/// How many connections a rank keeps open, and where that number came from.
#[derive(Debug, Clone)]
pub(crate) struct Limit {
    pub(crate) max_open: usize,
    pub(crate) why: String,
}

impl Limit {
    /// The limit of an endpoint made now with `cfg`.
    pub(crate) fn of(cfg: &TcpConfig) -> Limit {
        if let Some(n) = cfg.max_open {
            return Limit {
                max_open: n.max(MIN_OPEN),
                why: format!("given ({n})"),
            };
        }
        let (soft, open) = commbench_core::launch::descriptors();
        let share = u64::from(cfg.ranks_here.max(1));
        let free = soft.saturating_sub(open).saturating_sub(RESERVE) / share;
        let max_open = usize::try_from(free).unwrap_or(usize::MAX).max(MIN_OPEN);
        let per = if share > 1 {
            format!(", shared by {share} ranks of this process")
        } else {
            String::new()
        };
        Limit {
            max_open,
            why: format!(
                "RLIMIT_NOFILE soft limit {soft}, {open} descriptors open at start, {RESERVE} \
                 kept for files{per}"
            ),
        }
    }
}

/// Every rank's data address and whether every pair is connected at start, from what the
/// ranks sent (`ADDRESS MAX_OPEN` each): only when every rank's limit allows a connection to
/// every other rank.
pub(crate) fn addresses(all: &[Vec<u8>]) -> Result<(Vec<String>, bool)> {
    let others = all.len().saturating_sub(1);
    let mut every = true;
    let mut addrs = Vec::with_capacity(all.len());
    for (peer, b) in all.iter().enumerate() {
        let bad = || Error::Protocol(format!("rank {peer} sent a malformed data address"));
        let text = std::str::from_utf8(b).map_err(|_| bad())?;
        let (addr, max_open) = text.split_once(' ').ok_or_else(bad)?;
        let max_open: usize = max_open.parse().map_err(|_| bad())?;
        every &= others <= max_open;
        addrs.push(addr.to_string());
    }
    Ok((addrs, every))
}

/// What the endpoint tracks about its connections besides the connections themselves.
#[derive(Debug, Default)]
pub(crate) struct MeshState {
    /// The peer a connection is being made to, while it is.
    pub(crate) connecting: Option<Rank>,
    /// Sends queued so far (the clock of [`Conn::last_used`]).
    pub(crate) uses: u64,
    /// Calls of `progress` (the listener is polled every 64th).
    pub(crate) polls: u32,
    /// Epoll saw the listener readable.
    pub(crate) listener_ready: bool,
    /// Connections closed to make room.
    pub(crate) evicted: u64,
    /// Connections made or accepted so far (the last one's [`Conn::id`]).
    pub(crate) made: u64,
    /// Lower ranks that asked this rank to connect to them, not yet served, each with the
    /// number of connections it had taken from this rank when it asked.
    pub(crate) calls: Vec<(Rank, u32)>,
    /// By lower peer: connections this rank made to it.
    pub(crate) made_to: Vec<u32>,
    /// By higher peer: connections this rank took from it.
    pub(crate) taken_from: Vec<u32>,
    /// Serving those calls (they are not served again from within).
    pub(crate) serving: bool,
    /// Peers a connection is being opened to, innermost last: not closed to make room.
    pub(crate) opening: Vec<Rank>,
    /// Every pair was connected at start and the limit never closes one: no connection
    /// comes again.
    pub(crate) fixed: bool,
}

impl TcpEndpoint {
    /// Connect every pair now: this rank to every rank below it, while it accepts every rank
    /// above it (only the higher rank of a pair connects, so no two ranks connect to each
    /// other at once).
    pub(crate) fn connect_all(&mut self) -> Result<()> {
        for peer in 0..self.rank {
            self.open(peer)?;
        }
        let (me, size) = (self.rank, self.size);
        let all = |ep: &TcpEndpoint| (me + 1..size).all(|p| ep.routed(p).is_some());
        match self.wait_until("every higher rank to connect", all) {
            Err(Error::Timeout { rank, timeout, .. }) => {
                let missing: Vec<Rank> = (me + 1..size)
                    .filter(|&p| self.routed(p).is_none())
                    .collect();
                Err(Error::Timeout {
                    rank,
                    what: format!("rank(s) {missing:?} to connect"),
                    timeout,
                })
            }
            r => r,
        }
    }

    /// The index in `conns` of the connection a send to `peer` takes, made now if there is
    /// none.
    pub(crate) fn sender(&mut self, peer: Rank) -> Result<usize> {
        let i = match self.route.get(peer as usize) {
            Some(&r) if r > 0 => r as usize - 1,
            _ => self.open(peer)?,
        };
        self.mesh.uses += 1;
        self.conns[i].last_used = self.mesh.uses;
        Ok(i)
    }

    /// A connection to `peer` to send on: the routed one; else, once no connection to it is
    /// being closed, a new one, made here (a lower peer) or asked of the peer (a higher one).
    fn open(&mut self, peer: Rank) -> Result<usize> {
        self.mesh.opening.push(peer);
        let r = self.open_inner(peer);
        self.mesh.opening.pop();
        r
    }

    fn open_inner(&mut self, peer: Rank) -> Result<usize> {
        loop {
            self.settle(peer)?;
            if let Some(i) = self.routed(peer) {
                return Ok(i);
            }
            self.make_room(peer)?;
            // Making room let other work run (a call served, a connection accepted): look
            // again.
            self.settle(peer)?;
            if let Some(i) = self.routed(peer) {
                return Ok(i);
            }
            if peer < self.rank {
                let s = self.connect_to(peer, &[DATA])?;
                self.mesh.made_to[peer as usize] += 1;
                return self.adopt(peer, s);
            }
            // Ask the higher peer, saying how many of its connections this rank has taken:
            // a call it has already answered with a later connection is not answered again.
            let taken = self.mesh.taken_from[peer as usize];
            let mut call = vec![CALL];
            call.extend_from_slice(&taken.to_le_bytes());
            drop(self.connect_to(peer, &call)?);
            let what = format!("rank {peer} to connect to this rank, as asked");
            // Its connection may come and be closed again before a message goes on it: ask
            // again then.
            self.wait_until(&what, |ep| {
                ep.routed(peer).is_some()
                    || ep.mesh.taken_from[peer as usize] > taken
                        && !ep.conns.iter().any(|c| c.peer == peer)
            })?;
            if let Some(i) = self.routed(peer) {
                return Ok(i);
            }
        }
    }

    /// Wait until no connection to `peer` is being closed (a message sent on a new one must
    /// not overtake those on the old).
    fn settle(&mut self, peer: Rank) -> Result<()> {
        let what = format!("the connection to rank {peer} to close");
        self.wait_until(&what, |ep| {
            ep.routed(peer).is_some() || !ep.conns.iter().any(|c| c.peer == peer && !c.usable())
        })
    }

    /// Connect to the lower ranks that asked for it (not from within another such
    /// connection), each once no connection to it is being closed; a call made before the
    /// last connection this rank made to that rank is answered already.
    pub(crate) fn serve_calls(&mut self) -> Result<()> {
        if self.mesh.serving || self.mesh.calls.is_empty() {
            return Ok(());
        }
        self.mesh.serving = true;
        let r = (|| {
            while let Some((peer, taken)) = self.mesh.calls.pop() {
                if self.mesh.made_to[peer as usize] <= taken && !self.is_gone(peer) {
                    self.open(peer)?;
                }
            }
            Ok(())
        })();
        self.mesh.serving = false;
        r
    }

    /// The routed connection to `peer`, if any.
    fn routed(&self, peer: Rank) -> Option<usize> {
        match self.route.get(peer as usize) {
            Some(&r) if r > 0 => Some(r as usize - 1),
            _ => None,
        }
    }

    /// Connect to `peer` and say `intent` (the handshake on a thread of its own) while this
    /// thread keeps accepting and serving its connections: a rank connecting to this one at
    /// the same moment is answered, and one closing a connection to make room hears this
    /// rank's close, so ranks that connect to each other in a circle never wait on each other.
    fn connect_to(&mut self, peer: Rank, intent: &[u8]) -> Result<TcpStream> {
        let addr = self
            .addrs
            .get(peer as usize)
            .cloned()
            .ok_or_else(|| Error::Invalid(format!("no address for rank {peer}")))?;
        let (me, size, timeout) = (self.rank, self.size, self.cfg.timeout);
        let token = self.token.clone();
        let intent = intent.to_vec();
        self.mesh.connecting = Some(peer);
        let made = std::thread::scope(|sc| {
            let h = sc.spawn(move || -> Result<TcpStream> {
                let mut s = rendezvous::connect_stream(&addr, me, peer, size, &token, timeout)?;
                s.write_all(&intent).map_err(|e| Error::PeerLost {
                    peer,
                    detail: format!("it closed the connection it accepted: {e}"),
                })?;
                Ok(s)
            });
            // Every connection is served meanwhile (a peer that waits for this rank's close
            // to make room for this very connection must hear it), but no call: one
            // connection is made at a time.
            let serving = std::mem::replace(&mut self.mesh.serving, true);
            let mut r = Ok(false);
            while !h.is_finished() && r.is_ok() {
                r = self.progress();
                std::thread::sleep(Duration::from_micros(200));
            }
            self.mesh.serving = serving;
            r?;
            h.join()
                .map_err(|_| Error::Protocol(format!("connecting to rank {peer} panicked")))?
        });
        self.mesh.connecting = None;
        made.map_err(|e| e.in_phase(format!("connecting to rank {peer}")))
    }

    /// Take the connections whose handshake completed: a higher rank's connection joins the
    /// others, a lower rank's call is noted (served by the next progress).
    pub(crate) fn accept_ready(&mut self) -> Result<()> {
        let open = self.conns.len() + self.acceptor.pending();
        let mut room = self.limit.max_open.saturating_sub(open);
        // At the limit, a rank that connects waits in the listener's queue: close the least
        // recently used idle connection, so that there is room the next time. With none idle
        // (every connection busy, perhaps with that very rank), take it on some of the
        // descriptors kept in reserve rather than wait for a connection that cannot free.
        if room == 0 && self.acceptor.waiting() {
            let closing = self.close_idle().is_some();
            if !closing && open < self.limit.max_open + SLACK {
                room = 1;
            }
        }
        for (peer, mut s) in self.acceptor.poll(room) {
            let mut intent = [0u8; 5];
            let read = s
                .set_read_timeout(Some(self.cfg.timeout.min(Duration::from_secs(5))))
                .and_then(|_| s.read_exact(&mut intent[..1]))
                .and_then(|_| match intent[0] {
                    CALL => s.read_exact(&mut intent[1..]),
                    _ => Ok(()),
                });
            match (read, intent[0]) {
                (Ok(()), DATA) if peer > self.rank => {
                    self.mesh.taken_from[peer as usize] += 1;
                    self.adopt(peer, s)?;
                }
                (Ok(()), CALL) if peer < self.rank => {
                    let taken = u32::from_le_bytes([intent[1], intent[2], intent[3], intent[4]]);
                    self.mesh.calls.retain(|&(p, _)| p != peer);
                    self.mesh.calls.push((peer, taken));
                }
                (Ok(()), x) => eprintln!(
                    "commbench tcp: rank {} dropped a connection from rank {peer} that said \
                     {x:#x}",
                    self.rank
                ),
                (Err(e), _) => eprintln!(
                    "commbench tcp: rank {} dropped a connection from rank {peer}: {e}",
                    self.rank
                ),
            }
        }
        Ok(())
    }

    /// A new connection to `peer` joins the others and becomes its route; it is held (not
    /// read) while an older connection to `peer` is being closed.
    fn adopt(&mut self, peer: Rank, s: TcpStream) -> Result<usize> {
        let mut c = Conn::new(peer, s, &self.cfg)?;
        c.held = self.conns.iter().any(|o| o.peer == peer && !o.usable());
        c.last_used = self.mesh.uses;
        self.mesh.made += 1;
        c.id = self.mesh.made;
        self.epoll
            .add(
                c.stream.as_fd(),
                EpollEvent::new(EpollFlags::EPOLLIN, u64::from(peer)),
            )
            .map_err(|e| Error::io("registering a connection with epoll", e.into()))?;
        self.conns.push(c);
        let i = self.conns.len() - 1;
        if self.routed(peer).is_none() && !self.conns[i].held {
            self.route[peer as usize] = i as u32 + 1;
        }
        Ok(i)
    }

    /// Before a connection to `peer` is made: while the limit is reached, close the least
    /// recently used idle connection and wait until it is gone. With none idle, the limit is
    /// exceeded rather than a message held up.
    fn make_room(&mut self, peer: Rank) -> Result<()> {
        debug_assert!(self.mesh.opening.contains(&peer));
        while self.conns.len() + self.acceptor.pending() >= self.limit.max_open {
            let Some(id) = self.close_idle() else {
                return Ok(());
            };
            let what = format!("the connection {id} to close");
            self.wait_until(&what, |ep| !ep.conns.iter().any(|c| c.id == id))?;
        }
        Ok(())
    }

    /// Begin to close the least recently used idle connection (not one being opened): its
    /// [`Conn::id`], if there is one. The first time, say so.
    fn close_idle(&mut self) -> Option<u64> {
        let i = self
            .conns
            .iter()
            .enumerate()
            .filter(|(_, c)| c.idle() && !self.mesh.opening.contains(&c.peer))
            .min_by_key(|(_, c)| c.last_used)
            .map(|(i, _)| i)?;
        if self.mesh.evicted == 0 {
            eprintln!(
                "commbench tcp: rank {} keeps at most {} connections open ({}); closing the \
                 least recently used to make room",
                self.rank, self.limit.max_open, self.limit.why
            );
        }
        self.mesh.evicted += 1;
        let id = self.conns[i].id;
        self.close_conn(i);
        Some(id)
    }

    /// Queue the close frame on connection `i`: nothing more is sent on it.
    fn close_conn(&mut self, i: usize) {
        let c = &mut self.conns[i];
        c.sendq
            .push_back(SendOp::whole(None, frame::close(), Vec::new(), 0, 0));
        c.fin_out = true;
        let peer = c.peer;
        if self.routed(peer) == Some(i) {
            self.route[peer as usize] = 0;
        }
    }

    /// Answer every close received with this rank's own, and forget every connection both
    /// sides have closed or said goodbye on (its last frame written).
    pub(crate) fn reap(&mut self) -> Result<()> {
        for i in 0..self.conns.len() {
            let c = &self.conns[i];
            if c.close_in && !c.fin_out {
                self.close_conn(i);
                let TcpEndpoint { conns, reqs, .. } = self;
                match conns[i].tx_progress(reqs) {
                    Ok(_) => {}
                    // Gone as it closed: only what involves it fails.
                    Err(e) if matches!(e, Error::PeerLost { .. }) => self.lose(i, &e),
                    Err(e) => return Err(e),
                }
            }
        }
        let mut i = 0;
        while i < self.conns.len() {
            let c = &self.conns[i];
            // A peer that finished its run (its goodbye) sends nothing more either.
            if c.fin_out && (c.close_in || c.bye_in) && c.sendq.is_empty() {
                self.remove(i);
            } else {
                i += 1;
            }
        }
        Ok(())
    }

    /// Forget connection `i` (its socket closes); the one moved into its place keeps its
    /// route. Once no connection to the peer is being closed, those held behind it are read
    /// from now on and one of them takes the route.
    fn remove(&mut self, i: usize) {
        let c = self.conns.swap_remove(i);
        if c.watched {
            let _ = self.epoll.delete(c.stream.as_fd());
        }
        let peer = c.peer;
        if self.routed(peer) == Some(i) {
            self.route[peer as usize] = 0;
        }
        let moved = self.conns.len();
        if let Some(m) = self.conns.get(i) {
            if self.route[m.peer as usize] as usize == moved + 1 {
                self.route[m.peer as usize] = i as u32 + 1;
            }
        }
        if self.conns.iter().any(|o| o.peer == peer && !o.usable()) {
            return;
        }
        for (j, o) in self.conns.iter_mut().enumerate() {
            if o.peer == peer {
                o.held = false;
                if self.route[peer as usize] == 0 {
                    self.route[peer as usize] = j as u32 + 1;
                }
            }
        }
    }

    /// Make progress (sleeping between tries in blocking mode) until `done`, at most the
    /// endpoint's timeout; `what` names what was awaited in the error.
    fn wait_until(&mut self, what: &str, done: impl Fn(&TcpEndpoint) -> bool) -> Result<()> {
        let start = Instant::now();
        let limit = self.cfg.timeout;
        while !done(self) {
            self.progress()?;
            if done(self) {
                break;
            }
            let elapsed = start.elapsed();
            if elapsed >= limit {
                return Err(Error::Timeout {
                    rank: self.rank,
                    what: what.to_string(),
                    timeout: limit,
                });
            }
            if self.cfg.poll {
                std::hint::spin_loop();
            } else {
                self.sleep(limit - elapsed)?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every pair is connected at start only when every rank's limit allows it: a rank on a
    /// host with a lower `ulimit -n` makes the whole run connect on demand.
    #[test]
    fn every_rank_must_allow_a_connection_to_every_other() {
        let sent = |limits: &[usize]| -> Vec<Vec<u8>> {
            limits
                .iter()
                .enumerate()
                .map(|(r, m)| format!("10.0.0.{r}:7000 {m}").into_bytes())
                .collect()
        };
        let (addrs, all) = addresses(&sent(&[3, 3, 3, 3])).unwrap();
        assert!(all);
        assert_eq!(addrs[2], "10.0.0.2:7000");
        assert!(!addresses(&sent(&[3, 3, 2, 3])).unwrap().1);
        assert!(addresses(&sent(&[9, 2])).unwrap().1);
        for bad in [&b"10.0.0.1:7000"[..], b"10.0.0.1:7000 x", b"\xff 3"] {
            let e = addresses(&[bad.to_vec()]).unwrap_err().to_string();
            assert!(e.contains("rank 0 sent a malformed data address"), "{e}");
        }
    }
}
