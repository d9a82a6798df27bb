//! The transport abstraction (design §3).
//!
//! An [`Endpoint`] is one rank's data plane: non-blocking posted sends and receives with tags,
//! wildcard source and tag on receives, and completions found by [`Endpoint::test`] or
//! [`Endpoint::wait`]. Buffers are owned `Vec<u8>`s moved into the endpoint when an operation is
//! posted and handed back in its [`Completion`], so a pattern reuses the same buffers and nothing
//! in a timed loop allocates, and no backend needs `unsafe` to keep a borrowed buffer alive.
//!
//! A control plane (barrier, broadcast, gather) is built on reserved tags above [`TAG_UB`], which
//! wildcard receives never match; backends with a native one (MPI) override it. It never runs
//! inside a timed region.
//!
//! A [`Program`] is what every rank runs; a backend's launcher runs it on each rank it hosts
//! (a process, a thread, or a simulated node's coroutine) and hands back each rank's output.

pub mod clock;
pub mod control;
pub mod error;
pub mod ids;
pub mod matching;
// The transport that does nothing, which the engine bench times commbench's own cost on: built
// with the `testkit` feature only, never into production.
#[cfg(feature = "testkit")]
pub mod noop;
pub mod slots;
pub mod work;

pub use ids::*;

use error::{Error, Result};
use std::time::Duration;

/// Whether a completion is of a send or a receive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpKind {
    /// A send: the buffer may be reused.
    Send,
    /// A receive: `len` bytes of `buf` hold the message.
    Recv,
}

/// Which end of a round trip a rank is ([`Endpoint::pingpong`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Sends first, then receives the reply (the source, which times).
    Initiator,
    /// Receives first, then sends the message back (the destination).
    Echo,
}

/// A finished operation. The buffer comes back to the caller.
#[derive(Debug)]
pub struct Completion {
    /// Send or receive.
    pub kind: OpKind,
    /// The buffer that was posted.
    pub buf: Vec<u8>,
    /// For a receive, the sender; for a send, the destination.
    pub peer: Rank,
    /// Tag of the message.
    pub tag: Tag,
    /// Bytes transferred.
    pub len: usize,
}

impl Completion {
    /// A finished send of all of `buf` to `dest`.
    pub fn send(buf: Vec<u8>, dest: Rank, tag: Tag) -> Completion {
        let len = buf.len();
        Completion {
            kind: OpKind::Send,
            buf,
            peer: dest,
            tag,
            len,
        }
    }

    /// A finished receive: the first `len` bytes of `buf` hold `source`'s message.
    pub fn recv(buf: Vec<u8>, source: Rank, tag: Tag, len: usize) -> Completion {
        Completion {
            kind: OpKind::Recv,
            buf,
            peer: source,
            tag,
            len,
        }
    }
}

/// Where a message lies in the buffer posted for it, and how many messages post that one
/// buffer at once ([`Endpoint::isend_span`], [`Endpoint::irecv_span`]).
///
/// `start` places a message at an offset from its buffer's first byte, so that its address
/// has the alignment asked for (NetPIPE's `--soffset`/`--roffset`, a page-aligned buffer);
/// `count` posts the one buffer `count` times, as osu_bw's single buffer keeps its whole
/// window of sends (and receives) on one piece of memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Span {
    /// Offset of the message's first byte in the buffer.
    pub start: usize,
    /// Bytes of the message (for a receive: the most it accepts).
    pub len: usize,
    /// Messages posted on these bytes at once, at least 1.
    pub count: u32,
}

impl Span {
    /// All of a buffer of `len` bytes, posted once: what [`Endpoint::isend`] and
    /// [`Endpoint::irecv`] post.
    #[inline]
    pub fn whole(len: usize) -> Span {
        Span {
            start: 0,
            len,
            count: 1,
        }
    }

    /// Whether this is all of a buffer of `buf_len` bytes, posted once.
    #[inline]
    pub fn is_whole(&self, buf_len: usize) -> bool {
        self.start == 0 && self.len == buf_len && self.count == 1
    }

    /// The bytes of a buffer of `buf_len` the message occupies, or [`Error::Invalid`] when
    /// they do not fit in it or `count` is 0.
    #[inline]
    pub fn range(&self, buf_len: usize) -> Result<std::ops::Range<usize>> {
        match self.start.checked_add(self.len) {
            Some(end) if end <= buf_len && self.count > 0 => Ok(self.start..end),
            _ => Err(bad_span(self, buf_len)),
        }
    }
}

/// The error of [`Span::range`], out of line.
#[cold]
#[inline(never)]
fn bad_span(span: &Span, buf_len: usize) -> Error {
    if span.count == 0 {
        return Error::Invalid("a span posted 0 times".into());
    }
    Error::Invalid(format!(
        "a span of {} bytes at offset {} does not fit a buffer of {buf_len} bytes",
        span.len, span.start
    ))
}

/// The error of a backend that posts whole buffers only, asked for a [`Span`] that is not
/// one.
#[cold]
#[inline(never)]
pub fn spans_unsupported(backend: &str) -> Error {
    Error::Config(format!(
        "the {backend} backend cannot place a message at an offset in its buffer or post one \
         buffer several times at once"
    ))
}

/// What a backend records about itself in the result document (mode, library version, ...).
pub type BackendInfo = serde_json::Map<String, serde_json::Value>;

/// The key of a [`BackendInfo`] record of the time a cache line takes to move between the
/// cores of ranks 0 and 1 (`{ranks, round_trips, one_way_ns_min, one_way_ns_median}`,
/// measured by a backend that shares memory between them): a bound on how fast any message
/// between them can go, which the report card holds the points against.
pub const CACHE_HANDOFF_KEY: &str = "cache_handoff";

/// One rank's endpoint: the data plane, its clock, its CPU, and a control plane.
///
/// Required methods are the non-blocking data plane; everything else has a default built on
/// it that backends may override with something faster or native.
pub trait Endpoint {
    /// This rank.
    fn rank(&self) -> Rank;
    /// Number of ranks in the run.
    fn size(&self) -> u32;
    /// Backend name (`tcp`, `shm`, `sim`, `mpi`, ...).
    fn backend(&self) -> &'static str;
    /// How long a wait may last before it is an error.
    fn timeout(&self) -> Duration;

    /// Change how long a wait may last, from the next wait on (a program that knows a wait
    /// will be long: a rank waiting for other pairs of an all-pairs round). The default
    /// ignores it: a backend whose waits never time out.
    fn set_timeout(&mut self, timeout: Duration) {
        let _ = timeout;
    }

    /// The program gave up on `peer` (silent for longer than it waits, [`Program::gone`]):
    /// nothing more is sent to it or expected from it, and the end of the run does not wait
    /// for its goodbye. By default there is nothing to drop.
    fn forget(&mut self, peer: Rank) {
        let _ = peer;
    }

    /// Post a send of all of `buf` to `dest` with `tag`.
    fn isend(&mut self, dest: Rank, tag: Tag, buf: Vec<u8>) -> Result<ReqId>;
    /// Post a receive of at most `buf.len()` bytes. A longer message is [`Error::Truncated`].
    fn irecv(&mut self, src: Src, tag: TagSel, buf: Vec<u8>) -> Result<ReqId>;
    /// Make progress and return the completion of `req` if it has finished. A request's
    /// completion is returned once; testing it again is [`Error::Invalid`].
    fn test(&mut self, req: ReqId) -> Result<Option<Completion>>;

    /// Wait for `req` to finish, at most [`Endpoint::timeout`]. The clock is first read after
    /// 1024 unsuccessful tests, so a short wait reads none inside a timed region.
    #[inline(always)]
    fn wait(&mut self, req: ReqId) -> Result<Completion> {
        let mut timer = clock::SpinTimer::new();
        loop {
            if let Some(c) = self.test(req)? {
                return Ok(c);
            }
            if timer.expired(self.timeout()) {
                return Err(Error::Timeout {
                    rank: self.rank(),
                    what: format!("request {}", req.0),
                    timeout: self.timeout(),
                });
            }
        }
    }

    /// Wait for every request in `reqs`, appending completions to `out` in the order of `reqs`.
    fn wait_all(&mut self, reqs: &[ReqId], out: &mut Vec<Completion>) -> Result<()> {
        for &r in reqs {
            let c = self.wait(r)?;
            out.push(c);
        }
        Ok(())
    }

    /// Blocking send; returns the buffer. Backends may override with a faster direct path.
    #[inline(always)]
    fn send(&mut self, dest: Rank, tag: Tag, buf: Vec<u8>) -> Result<Vec<u8>> {
        let r = self.isend(dest, tag, buf)?;
        Ok(self.wait(r)?.buf)
    }

    /// Blocking receive; returns the completion (with the buffer, sender, tag and length).
    #[inline(always)]
    fn recv(&mut self, src: Src, tag: TagSel, buf: Vec<u8>) -> Result<Completion> {
        let r = self.irecv(src, tag, buf)?;
        self.wait(r)
    }

    /// `n` round trips of all of `buf` with `peer` under `tag`, the loop the ping-pong kernel
    /// times: the [`Role::Initiator`] sends and then receives the reply into the same buffer,
    /// the [`Role::Echo`] receives and sends it back. The default runs [`Endpoint::send`] and
    /// [`Endpoint::recv`] `n` times; a backend may run the loop natively with its arguments
    /// checked once (MPI does), as long as every wait keeps [`Endpoint::timeout`].
    #[inline]
    fn pingpong(
        &mut self,
        peer: Rank,
        tag: Tag,
        buf: &mut Vec<u8>,
        n: u64,
        role: Role,
    ) -> Result<()> {
        pingpong_loop(self, peer, tag, buf, n, role)
    }

    /// Post `span.count` sends of the `span.len` bytes at `span.start` of `buf` to `dest` with
    /// `tag`, in order, as one request that completes (handing `buf` back) when all have:
    /// osu_bw's window on a single buffer, or a message at a chosen alignment. A whole span
    /// ([`Span::is_whole`]) is [`Endpoint::isend`]. The default supports nothing else
    /// ([`spans_unsupported`]); every backend of this workspace overrides it.
    fn isend_span(&mut self, dest: Rank, tag: Tag, buf: Vec<u8>, span: Span) -> Result<ReqId> {
        span.range(buf.len())?;
        if span.is_whole(buf.len()) {
            return self.isend(dest, tag, buf);
        }
        Err(spans_unsupported(self.backend()))
    }

    /// Post `span.count` receives, each of at most `span.len` bytes landing at `span.start` of
    /// `buf`, matched one after another as if posted in that order, as one request that
    /// completes when all have; its completion gives the sender, tag and length of the last.
    /// A whole span is [`Endpoint::irecv`]; the default supports nothing else.
    fn irecv_span(&mut self, src: Src, tag: TagSel, buf: Vec<u8>, span: Span) -> Result<ReqId> {
        span.range(buf.len())?;
        if span.is_whole(buf.len()) {
            return self.irecv(src, tag, buf);
        }
        Err(spans_unsupported(self.backend()))
    }

    /// [`Endpoint::pingpong`] of the message at `span` of `buf` (`span.count` is 1): the loop
    /// the ping-pong kernel times when its buffers are placed at an alignment or offset. The
    /// default runs [`Endpoint::isend_span`], [`Endpoint::irecv_span`] and [`Endpoint::wait`]
    /// `n` times ([`pingpong_span_loop`]); a whole span is [`Endpoint::pingpong`].
    #[inline]
    fn pingpong_span(
        &mut self,
        peer: Rank,
        tag: Tag,
        buf: &mut Vec<u8>,
        span: Span,
        n: u64,
        role: Role,
    ) -> Result<()> {
        if span.is_whole(buf.len()) {
            return self.pingpong(peer, tag, buf, n, role);
        }
        pingpong_span_loop(self, peer, tag, buf, span, n, role)
    }

    /// Whether message buffers can be in or out of a cache that changes the times measured: a
    /// cold-cache run writes through a pool before each trial only where they can. The
    /// simulator's virtual clock models no cache.
    fn models_caches(&self) -> bool {
        true
    }

    /// Read this rank's clock in nanoseconds. Real backends: `CLOCK_MONOTONIC`.
    #[inline]
    fn now_ns(&mut self) -> u64 {
        clock::monotonic_ns()
    }

    /// Name of the clock [`Endpoint::now_ns`] reads, for the result document.
    fn clock_name(&self) -> String {
        "CLOCK_MONOTONIC".to_string()
    }

    /// The resolution the clock's provider claims, ns (`clock_getres`, `MPI_Wtick`), recorded
    /// beside the resolution the method of seed 000 measures; `None` when there is no claim.
    fn claimed_resolution_ns(&self) -> Option<f64> {
        clock::monotonic_claimed_resolution_ns().map(|x| x as f64)
    }

    /// Busy computation: seed 001's background computation Q ([`work`]), `work.iters`
    /// iterations of its integer or floating-point loop. The simulator turns it into virtual
    /// CPU time that its message handlers preempt.
    fn compute(&mut self, work: work::Work) {
        work::run(work);
    }

    /// The dimension `d` when the transport itself routes messages over a `d`-dimensional
    /// hypercube, forwarding them through intermediate nodes without those nodes' programs
    /// (the simulated NCUBE); `None` when every rank reaches every other directly. Seed 001's
    /// experiments place their ranks by it: at distance `d` on a hypercube, along a path of
    /// ranks that forward in user space otherwise.
    fn hypercube(&self) -> Option<u32> {
        None
    }

    /// The host this rank runs on, when the transport itself places ranks on hosts (the
    /// simulator's nodes); `None`, the default: the launcher says ([`crate::launch::host_name`]).
    fn host(&self) -> Option<String> {
        None
    }

    /// The switches above this rank's host, top first and dot-separated (`core.spine1.leaf5`),
    /// when the transport itself places hosts under switches (a simulated tree); `None`, the
    /// default: the launcher says, if it does ([`crate::launch::switch_path`]).
    fn switch_path(&self) -> Option<String> {
        None
    }

    /// What the backend records about itself (mode, versions, wait policy, ...).
    fn info(&self) -> BackendInfo {
        BackendInfo::new()
    }

    /// Block until every rank has entered the barrier.
    fn barrier(&mut self) -> Result<()> {
        control::barrier(self)
    }

    /// Asymmetric barrier of seed 004: every rank enters; rank `first` is released first and
    /// the others only after `first` has told them it left.
    fn barrier_first(&mut self, first: Rank) -> Result<()> {
        control::barrier_first(self, first)
    }

    /// `root`'s `data` replaces `data` on every rank.
    fn broadcast(&mut self, root: Rank, data: &mut Vec<u8>) -> Result<()> {
        control::broadcast(self, root, data)
    }

    /// Every rank's `data`, in rank order, on `root` (`None` elsewhere).
    fn gather(&mut self, root: Rank, data: &[u8]) -> Result<Option<Vec<Vec<u8>>>> {
        control::gather(self, root, data)
    }
}

/// The ping-pong loop of [`Endpoint::pingpong`]'s default, built on [`Endpoint::send`] and
/// [`Endpoint::recv`]: for a backend whose native loop covers only some cases.
#[inline]
pub fn pingpong_loop<E: Endpoint + ?Sized>(
    ep: &mut E,
    peer: Rank,
    tag: Tag,
    buf: &mut Vec<u8>,
    n: u64,
    role: Role,
) -> Result<()> {
    for _ in 0..n {
        let b = std::mem::take(buf);
        *buf = match role {
            Role::Initiator => {
                let b = ep.send(peer, tag, b)?;
                ep.recv(Src::Rank(peer), TagSel::Tag(tag), b)?.buf
            }
            Role::Echo => {
                let b = ep.recv(Src::Rank(peer), TagSel::Tag(tag), b)?.buf;
                ep.send(peer, tag, b)?
            }
        };
    }
    Ok(())
}

/// The loop of [`Endpoint::pingpong_span`]'s default, on [`Endpoint::isend_span`],
/// [`Endpoint::irecv_span`] and [`Endpoint::wait`].
#[inline]
pub fn pingpong_span_loop<E: Endpoint + ?Sized>(
    ep: &mut E,
    peer: Rank,
    tag: Tag,
    buf: &mut Vec<u8>,
    span: Span,
    n: u64,
    role: Role,
) -> Result<()> {
    for _ in 0..n {
        let b = std::mem::take(buf);
        *buf = match role {
            Role::Initiator => {
                let r = ep.isend_span(peer, tag, b, span)?;
                let b = ep.wait(r)?.buf;
                let r = ep.irecv_span(Src::Rank(peer), TagSel::Tag(tag), b, span)?;
                ep.wait(r)?.buf
            }
            Role::Echo => {
                let r = ep.irecv_span(Src::Rank(peer), TagSel::Tag(tag), b, span)?;
                let b = ep.wait(r)?.buf;
                let r = ep.isend_span(peer, tag, b, span)?;
                ep.wait(r)?.buf
            }
        };
    }
    Ok(())
}

/// Writes the four identity methods of an [`Endpoint`] implementation whose rank, size and
/// timeout are fields of the endpoint (a field path such as `cfg.timeout` for the timeout):
///
/// ```
/// use commbench_core::{Completion, Endpoint, Rank, ReqId, Result, Src, Tag, TagSel};
/// use std::time::Duration;
/// # fn none() -> commbench_core::Error {
/// #     commbench_core::Error::Invalid("this example has no data plane".into())
/// # }
///
/// struct Config {
///     timeout: Duration,
/// }
/// struct Mine {
///     rank: Rank,
///     size: u32,
///     cfg: Config,
/// }
///
/// impl Endpoint for Mine {
///     commbench_core::endpoint_identity! {
///         backend: "mine", rank: rank, size: size, timeout: cfg.timeout
///     }
///     // The data plane: isend, irecv, test.
/// #   fn isend(&mut self, _: Rank, _: Tag, _: Vec<u8>) -> Result<ReqId> { Err(none()) }
/// #   fn irecv(&mut self, _: Src, _: TagSel, _: Vec<u8>) -> Result<ReqId> { Err(none()) }
/// #   fn test(&mut self, _: ReqId) -> Result<Option<Completion>> { Err(none()) }
/// }
///
/// let ep = Mine { rank: 1, size: 4, cfg: Config { timeout: Duration::from_secs(3) } };
/// assert_eq!((ep.rank(), ep.size(), ep.backend()), (1, 4, "mine"));
/// assert_eq!(ep.timeout(), Duration::from_secs(3));
/// ```
#[macro_export]
macro_rules! endpoint_identity {
    (
        backend: $backend:literal,
        rank: $($rank:ident).+,
        size: $($size:ident).+,
        timeout: $($timeout:ident).+ $(,)?
    ) => {
        fn rank(&self) -> $crate::transport::Rank {
            self.$($rank).+
        }

        fn size(&self) -> u32 {
            self.$($size).+
        }

        fn backend(&self) -> &'static str {
            $backend
        }

        fn timeout(&self) -> ::std::time::Duration {
            self.$($timeout).+
        }

        fn set_timeout(&mut self, timeout: ::std::time::Duration) {
            self.$($timeout).+ = timeout;
        }
    };
}

/// What every rank of a run executes. Generic over the endpoint so that the timed loops are
/// monomorphised per backend: no dynamic dispatch in the timed path.
pub trait Program: Sync {
    /// What one rank hands back to its launcher.
    type Output: Send;
    /// Run on one rank.
    fn run<E: Endpoint>(&self, ep: &mut E) -> Result<Self::Output>;

    /// What stands for the output of rank `rank` when it fell silent and never returned while
    /// the others finished (a simulated silent node): by default the run fails naming it. A
    /// program that goes on without a lost rank (all-pairs) gives an output instead.
    fn lost(&self, rank: Rank) -> Result<Self::Output> {
        Err(Error::PeerLost {
            peer: rank,
            detail: "it fell silent and never finished, and this benchmark needs every rank".into(),
        })
    }

    /// The ranks this rank's run went on without (rank 0 of all-pairs: the ranks found
    /// silent): a launcher that started them ends them rather than waiting for them to exit.
    fn gone(&self) -> Vec<Rank> {
        Vec::new()
    }
}
