//! The queue-usage benchmarks of Underwood & Brightwell, "The impact of MPI queue usage on
//! message latency" (seed 004 §3), as kernels of the one engine ([`crate::method::engine`]).
//!
//! * **Pre-posted receive queue** (§3.1, Figure 1): both ranks pre-post the receives the
//!   measured message will traverse (tags that do not match it), then the receive that
//!   matches, then the untraversed rest of the queue; the asymmetric barrier in which rank 1
//!   (`dest`) leaves first; the timed ping-pong; then the extra receives are cleared by a
//!   stream of matching messages.
//! * **Unexpected message queue** (§3.2, Figure 2): `length` unexpected messages are sent to
//!   each rank first; after the asymmetric barrier the source makes a non-blocking send and
//!   then posts its receive, so that the post (and its walk of the unexpected queue) is
//!   counted in the latency but overlapped with the send; the dest receives and answers at
//!   once. The unexpected messages are cleared afterwards by matching receives.
//!
//! The method of seed 000 runs on top: every trial is a barrier, this module's set-up
//! ([`Kernel::before_handshake`]), the handshake in which `dest` sends first and then waits for
//! the message (the seed's asymmetric barrier: `dest` leaves first), `npp` timed round trips,
//! and the clearing ([`Kernel::after_timing`]). The seed times one round trip per set-up and
//! averages 1000 of them; here a trial times `npp` round trips, so the posted queue holds `npp`
//! latency receives where the seed's Figure 1 holds one: `[traversed][npp latency
//! receives][untraversed]`. Each measured message still traverses exactly the `traversed`
//! receives before its match (the latency receives before it have been consumed), and
//! entries after the match are never inspected by a matcher that walks in order; with
//! `npp = 1` the queue is the seed's exactly.
//!
//! The queue length `L` counts the receives (or unexpected messages) that are not the measured
//! message's: `L = 0` is the plain ping-pong, and a posted queue of length `L` traversed `p` %
//! holds `floor(L p / 100)` receives before the latency receive and the rest after it.
//! Unexpected messages carry no data (0 bytes); every queue entry has its own tag.

use crate::method::alloc::{try_with_capacity, try_zeroed};
use crate::method::benchmark::{npp_bound, Benchmark};
use crate::method::engine::{Kernel, KernelSpec, Measurement, PointQueue, Steps};
use crate::method::limits::PER_MESSAGE_OVERHEAD;
use crate::method::units::human_bytes;
use crate::method::MethodConfig;
use crate::transport::error::{Error, Result, ResultExt};
use crate::transport::{Completion, Endpoint, Rank, ReqId, Src, Tag, TagSel};
use serde::{Deserialize, Serialize};

/// Tag of the measured messages.
pub const TAG_LATENCY: Tag = 30;
/// Tag of the message from the source that lets `dest` go on: the source's unexpected
/// messages are all in its queue (per-sender order: they were sent before it), or the source
/// has read its clock and the posted queue may be cleared.
pub const TAG_READY: Tag = 31;
/// Tag of the message with which `dest` releases the ranks that do not measure, once its
/// queue is cleared.
pub const TAG_DONE: Tag = 32;
/// Queue entry `i` (a non-matching receive or an unexpected message) has tag
/// `TAG_QUEUE_BASE + i`: below 32767, the least tag bound MPI guarantees.
pub const TAG_QUEUE_BASE: Tag = 100;
/// Longest queue: each entry has its own tag below 32767.
pub const MAX_QUEUE_LENGTH: u64 = 16384;
/// Most bytes the latency receives of one trial hold (each a buffer of the message size).
pub const LATENCY_BYTES_MAX: u64 = 1 << 30;
/// The default queue lengths of the seed's figures: 0 to 1000 entries.
pub const DEFAULT_LENGTHS: &str = "0..1000:+100";
/// The default fractions of the posted queue traversed (§3.1), per cent.
pub const DEFAULT_TRAVERSED: [u32; 5] = [0, 25, 50, 75, 100];

/// Which queue is filled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum QueueKind {
    /// The pre-posted receive queue (§3.1).
    Posted,
    /// The unexpected message queue (§3.2).
    Unexpected,
}

impl QueueKind {
    /// The pattern name of its points.
    pub fn pattern(self) -> &'static str {
        match self {
            QueueKind::Posted => PATTERN_POSTED,
            QueueKind::Unexpected => PATTERN_UNEXPECTED,
        }
    }

    /// The kind a pattern name stands for.
    pub fn of_pattern(pattern: &str) -> Option<QueueKind> {
        match pattern {
            PATTERN_POSTED => Some(QueueKind::Posted),
            PATTERN_UNEXPECTED => Some(QueueKind::Unexpected),
            _ => None,
        }
    }
}

/// Pattern name of the pre-posted receive queue benchmark's points.
pub const PATTERN_POSTED: &str = "queue_posted";
/// Pattern name of the unexpected message queue benchmark's points.
pub const PATTERN_UNEXPECTED: &str = "queue_unexpected";

/// The queue benchmark of one run: which queue, its lengths, the fractions traversed (posted
/// queue) and whether receives take any source.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueueBench {
    /// Which queue.
    pub kind: QueueKind,
    /// Queue lengths, in the order measured.
    pub lengths: Vec<u64>,
    /// Per cent traversed (posted queue only; empty for the unexpected queue).
    #[serde(default)]
    pub traversed_pct: Vec<u32>,
    /// Every receive (pre-posted, latency, and the unexpected benchmark's latency receive)
    /// takes any source: the change that defeats matching hashed on the envelope (§5.1).
    #[serde(default)]
    pub any_source: bool,
}

impl QueueBench {
    /// Lengths at most [`MAX_QUEUE_LENGTH`], at least one, percentages at most 100.
    pub fn check(&self) -> Result<()> {
        if self.lengths.is_empty() {
            return Err(Error::Config("no queue length to measure".into()));
        }
        if let Some(l) = self.lengths.iter().find(|&&l| l > MAX_QUEUE_LENGTH) {
            return Err(Error::Config(format!(
                "a queue of {l} entries: at most {MAX_QUEUE_LENGTH} (each entry has its own \
                 tag below 32767, the least tag bound MPI guarantees)"
            )));
        }
        match self.kind {
            QueueKind::Posted if self.traversed_pct.is_empty() => {
                Err(Error::Config("no traversed fraction to measure".into()))
            }
            QueueKind::Posted => match self.traversed_pct.iter().find(|&&p| p > 100) {
                Some(p) => Err(Error::Config(format!(
                    "{p} % of the queue traversed: 0 to 100"
                ))),
                None => Ok(()),
            },
            QueueKind::Unexpected => Ok(()),
        }
    }

    /// Every queue measured, in order: for each fraction traversed, each length.
    pub fn shapes(&self) -> Vec<PointQueue> {
        match self.kind {
            QueueKind::Posted => self
                .traversed_pct
                .iter()
                .flat_map(|&p| {
                    self.lengths.iter().map(move |&length| PointQueue {
                        length,
                        traversed_pct: Some(p),
                    })
                })
                .collect(),
            QueueKind::Unexpected => self
                .lengths
                .iter()
                .map(|&length| PointQueue {
                    length,
                    traversed_pct: None,
                })
                .collect(),
        }
    }

    /// The longest queue.
    pub fn max_length(&self) -> u64 {
        self.lengths.iter().copied().max().unwrap_or(0)
    }
}

/// The latency receives a rank posts at most for one trial's round trips (or the warm-up's),
/// and two more: a lower bound where npp is calculated ([`npp_bound`]).
fn latency_receives(cfg: &MethodConfig) -> u64 {
    cfg.warmup.max(npp_bound(&cfg.npp)).saturating_add(2)
}

/// Seed 004's queue benchmarks: a ping-pong behind each queue.
impl Benchmark for QueueBench {
    fn command(&self) -> &'static str {
        match self.kind {
            QueueKind::Posted => "queue posted",
            QueueKind::Unexpected => "queue unexpected",
        }
    }

    fn trips(&self, _size: u64) -> u64 {
        2
    }

    /// The send and receive buffers, a latency receive per round trip of a trial (or of the
    /// warm-up), and the queue's entries.
    fn buffer_bytes(&self, cfg: &MethodConfig, size: u64) -> Option<u64> {
        latency_receives(cfg)
            .checked_mul(size.checked_add(PER_MESSAGE_OVERHEAD)?)?
            .checked_add(self.max_length().checked_mul(PER_MESSAGE_OVERHEAD)?)
    }

    /// The posted queue itself and the latency receives posted for a trial's round trips (a
    /// lower bound where npp is calculated).
    fn posted_receives(&self, cfg: &MethodConfig) -> u64 {
        let entries = match self.kind {
            QueueKind::Posted => self.max_length(),
            QueueKind::Unexpected => 0,
        };
        entries.saturating_add(latency_receives(cfg))
    }

    fn wildcards(&self) -> bool {
        self.any_source
    }

    /// Every size once per queue.
    fn points(&self, cfg: &MethodConfig, _ranks: u32) -> Vec<u64> {
        self.shapes()
            .iter()
            .flat_map(|_| cfg.sizes.iter().copied())
            .collect()
    }
}

impl KernelSpec for QueueBench {
    type Kernel<E: Endpoint> = QueueKernel;

    /// The kernel of the first queue (the program measures every queue itself).
    fn kernel<E: Endpoint>(&self, me: Rank, cfg: &MethodConfig) -> Result<QueueKernel> {
        let shape = self.shapes().first().copied().unwrap_or(PointQueue {
            length: 0,
            traversed_pct: None,
        });
        Ok(QueueKernel::new(self, shape, me, cfg))
    }

    fn steps(&self, cfg: &MethodConfig) -> usize {
        self.shapes().len() * cfg.sizes.len()
    }

    /// Every queue, each over every size, one after the other after one timer
    /// characterisation.
    fn run<E: Endpoint>(&self, m: &Measurement<'_, Self>, ep: &mut E) -> Result<()> {
        let cfg = &m.cfg;
        cfg.validate(ep.size())?;
        self.check()?;
        let timer = m.start(ep, cfg)?;
        let shapes = self.shapes();
        let total = shapes.len() * cfg.sizes.len();
        for (j, &shape) in shapes.iter().enumerate() {
            let mut k = QueueKernel::new(self, shape, ep.rank(), cfg);
            let at = Steps {
                first: j * cfg.sizes.len(),
                total,
            };
            m.measure_kernel(ep, &mut k, cfg, timer, at)?;
        }
        ep.barrier().phase("final barrier")
    }
}

/// One rank's part in one queue's benchmark.
#[derive(Debug)]
pub struct QueueKernel {
    kind: QueueKind,
    shape: PointQueue,
    any_source: bool,
    me: Rank,
    src: Rank,
    dst: Rank,
    size: u64,
    /// The queue's own entries this rank posted (posted queue) or sent (unexpected queue).
    extra: Vec<ReqId>,
    /// The latency receives of the posted queue, in order, and the next to complete.
    latency: Vec<ReqId>,
    next: usize,
    /// Message buffers of `size` bytes for the latency receives.
    pool: Vec<Vec<u8>>,
    sbuf: Vec<u8>,
    rbuf: Vec<u8>,
    done: Vec<Completion>,
}

impl QueueKernel {
    /// The kernel of rank `me` for `shape` of `bench`, between `cfg.source` and `cfg.dest`.
    pub fn new(bench: &QueueBench, shape: PointQueue, me: Rank, cfg: &MethodConfig) -> Self {
        QueueKernel {
            kind: bench.kind,
            shape,
            any_source: bench.any_source,
            me,
            src: cfg.source,
            dst: cfg.dest,
            size: 0,
            extra: Vec::new(),
            latency: Vec::new(),
            next: 0,
            pool: Vec::new(),
            sbuf: Vec::new(),
            rbuf: Vec::new(),
            done: Vec::new(),
        }
    }

    fn participant(&self) -> bool {
        self.me == self.src || self.me == self.dst
    }

    fn peer(&self) -> Rank {
        if self.me == self.src {
            self.dst
        } else {
            self.src
        }
    }

    /// The source the benchmark's receives accept.
    fn peer_source(&self) -> Src {
        if self.any_source {
            Src::Any
        } else {
            Src::Rank(self.peer())
        }
    }

    fn buffer(&self) -> Result<Vec<u8>> {
        let len = self.size;
        try_zeroed(len, || {
            format!(
                "a message buffer of {} for {}",
                human_bytes(len),
                self.kind.pattern()
            )
        })
    }

    /// Figure 1's set-up: the traversed receives, `npp` latency receives, the untraversed
    /// rest.
    fn prepost(&mut self, ep: &mut impl Endpoint, npp: u64) -> Result<()> {
        let (length, traversed) = (self.shape.length, self.shape.traversed());
        let from = self.peer_source();
        self.extra.clear();
        self.latency.clear();
        self.next = 0;
        self.post_entries(ep, from, 0..traversed)?;
        let bytes = npp.saturating_mul(self.size.saturating_add(PER_MESSAGE_OVERHEAD));
        if bytes > LATENCY_BYTES_MAX {
            return Err(Error::Config(format!(
                "{npp} latency receives of {} would hold {}: at most {} (fewer round trips \
                 per trial or a smaller message)",
                human_bytes(self.size),
                human_bytes(bytes),
                human_bytes(LATENCY_BYTES_MAX)
            )));
        }
        while (self.pool.len() as u64) < npp {
            let b = self.buffer()?;
            self.pool.push(b);
        }
        for _ in 0..npp {
            let b = self.pool.pop().unwrap_or_default();
            let r = ep.irecv(from, TagSel::Tag(TAG_LATENCY), b)?;
            self.latency.push(r);
        }
        self.post_entries(ep, from, traversed..length)
    }

    /// The queue's receives of entries `range` (no data, tags that the latency message
    /// does not carry), kept to be cleared.
    fn post_entries(
        &mut self,
        ep: &mut impl Endpoint,
        from: Src,
        range: std::ops::Range<u64>,
    ) -> Result<()> {
        for i in range {
            let r = ep.irecv(from, TagSel::Tag(queue_tag(i)), Vec::new())?;
            self.extra.push(r);
        }
        Ok(())
    }

    /// Figure 1's clearing: once the source has read its clock, a stream of matching
    /// messages to the peer, then this rank's own extra receives collected as the peer's
    /// stream matches them.
    fn clear_posted(&mut self, ep: &mut impl Endpoint) -> Result<()> {
        if self.next != self.latency.len() {
            return Err(Error::Protocol(format!(
                "{} of {} latency receives were not used",
                self.latency.len() - self.next,
                self.latency.len()
            )));
        }
        // The dest clears only once the source has read its clock: a clearing message
        // arriving while the source still waits for its last answer would cost it time.
        if self.me == self.src {
            ep.send(self.dst, TAG_READY, Vec::new())?;
        } else {
            ep.recv(Src::Rank(self.src), TagSel::Tag(TAG_READY), Vec::new())?;
        }
        let peer = self.peer();
        let mut sends = try_with_capacity(self.shape.length, || "the clearing sends".into())?;
        for i in 0..self.shape.length {
            sends.push(ep.isend(peer, queue_tag(i), Vec::new())?);
        }
        self.done.clear();
        ep.wait_all(&self.extra, &mut self.done)?;
        ep.wait_all(&sends, &mut self.done)?;
        self.done.clear();
        self.extra.clear();
        self.latency.clear();
        self.next = 0;
        Ok(())
    }

    /// Figure 2's set-up: `length` messages to the peer, which it has not posted receives
    /// for; then the source tells the dest, after them, that they were all sent. The dest's
    /// handshake (after its own messages) tells the source the same. The sends are waited for
    /// only when the peer has posted its clearing receives: MPI lets a standard send wait for
    /// its match.
    fn send_unexpected(&mut self, ep: &mut impl Endpoint) -> Result<()> {
        let peer = self.peer();
        self.extra.clear();
        for i in 0..self.shape.length {
            let r = ep.isend(peer, queue_tag(i), Vec::new())?;
            self.extra.push(r);
        }
        if self.me == self.src {
            ep.send(self.dst, TAG_READY, Vec::new())?;
        } else {
            ep.recv(Src::Rank(self.src), TagSel::Tag(TAG_READY), Vec::new())?;
        }
        Ok(())
    }

    /// Figure 2's clearing: a matching receive for each of the peer's unexpected messages,
    /// then this rank's own unexpected sends collected.
    fn clear_unexpected(&mut self, ep: &mut impl Endpoint) -> Result<()> {
        let peer = Src::Rank(self.peer());
        let n = self.shape.length;
        let mut recvs = try_with_capacity(n, || "the clearing receives".into())?;
        for i in 0..n {
            recvs.push(ep.irecv(peer, TagSel::Tag(queue_tag(i)), Vec::new())?);
        }
        self.done.clear();
        ep.wait_all(&recvs, &mut self.done)?;
        ep.wait_all(&self.extra, &mut self.done)?;
        self.done.clear();
        self.extra.clear();
        Ok(())
    }

    /// The end of a trial for the ranks that do not measure: they wait until the dest has
    /// cleared its queue, so that their next barrier message cannot reach the dest (and walk
    /// its queue) while the source is timing; the dest releases them.
    fn hold_others(&mut self, ep: &mut impl Endpoint) -> Result<()> {
        if !self.participant() {
            ep.recv(Src::Rank(self.dst), TagSel::Tag(TAG_DONE), Vec::new())?;
        } else if self.me == self.dst {
            for r in (0..ep.size()).filter(|&r| r != self.src && r != self.dst) {
                ep.send(r, TAG_DONE, Vec::new())?;
            }
        }
        Ok(())
    }

    /// Figure 1's timed loop: the source sends and waits for the answer in its next latency
    /// receive; the dest waits in its next latency receive and answers.
    #[inline]
    fn posted_round<E: Endpoint>(&mut self, ep: &mut E) -> Result<()> {
        let Some(&req) = self.latency.get(self.next) else {
            return Err(more_rounds_than_receives(self.latency.len()));
        };
        self.next += 1;
        if self.me == self.src {
            let b = std::mem::take(&mut self.sbuf);
            self.sbuf = ep.send(self.dst, TAG_LATENCY, b)?;
            let c = ep.wait(req)?;
            self.pool.push(c.buf);
        } else {
            let c = ep.wait(req)?;
            let b = ep.send(self.src, TAG_LATENCY, c.buf)?;
            self.pool.push(b);
        }
        Ok(())
    }

    /// Figure 2's timed loop: the source's non-blocking send, then its receive posted (the
    /// post counted), then both waited for; the dest receives and answers.
    #[inline]
    fn unexpected_round<E: Endpoint>(&mut self, ep: &mut E) -> Result<()> {
        let from = self.peer_source();
        if self.me == self.src {
            let s = ep.isend(self.dst, TAG_LATENCY, std::mem::take(&mut self.sbuf))?;
            let r = ep.irecv(
                from,
                TagSel::Tag(TAG_LATENCY),
                std::mem::take(&mut self.rbuf),
            )?;
            self.rbuf = ep.wait(r)?.buf;
            self.sbuf = ep.wait(s)?.buf;
        } else {
            let b = std::mem::take(&mut self.rbuf);
            let c = ep.recv(from, TagSel::Tag(TAG_LATENCY), b)?;
            self.rbuf = ep.send(self.src, TAG_LATENCY, c.buf)?;
        }
        Ok(())
    }
}

/// Tag of queue entry `i`.
fn queue_tag(i: u64) -> Tag {
    TAG_QUEUE_BASE + i as Tag
}

#[cold]
#[inline(never)]
fn more_rounds_than_receives(n: usize) -> Error {
    Error::Protocol(format!(
        "more round trips than the {n} latency receives posted for them"
    ))
}

impl<E: Endpoint> Kernel<E> for QueueKernel {
    fn name(&self) -> &'static str {
        self.kind.pattern()
    }

    fn label(&self, size: u64) -> String {
        match self.shape.traversed_pct {
            Some(p) => format!(
                "{} length {} ({p} % traversed) {size} B",
                self.kind.pattern(),
                self.shape.length
            ),
            None => format!(
                "{} length {} {size} B",
                self.kind.pattern(),
                self.shape.length
            ),
        }
    }

    fn prepare(&mut self, size: u64) -> Result<()> {
        self.size = size;
        self.pool.clear();
        self.sbuf = Vec::new();
        self.rbuf = Vec::new();
        if self.participant() {
            self.sbuf = self.buffer()?;
            self.rbuf = self.buffer()?;
        }
        Ok(())
    }

    fn trips(&self, _size: u64) -> u64 {
        2
    }

    fn queue(&self) -> Option<PointQueue> {
        Some(self.shape)
    }

    fn iteration(&mut self, ep: &mut E) -> Result<()> {
        match self.kind {
            QueueKind::Posted => self.posted_round(ep),
            QueueKind::Unexpected => self.unexpected_round(ep),
        }
    }

    #[inline]
    fn iterations(&mut self, ep: &mut E, n: u64) -> Result<()> {
        match self.kind {
            QueueKind::Posted => {
                for _ in 0..n {
                    self.posted_round(ep)?;
                }
            }
            QueueKind::Unexpected => {
                for _ in 0..n {
                    self.unexpected_round(ep)?;
                }
            }
        }
        Ok(())
    }

    fn before_handshake(&mut self, ep: &mut E, npp: u64) -> Result<()> {
        if !self.participant() {
            return Ok(());
        }
        match self.kind {
            QueueKind::Posted => self.prepost(ep, npp).phase("pre-posting the queue"),
            QueueKind::Unexpected => self
                .send_unexpected(ep)
                .phase("sending the unexpected messages"),
        }
    }

    fn after_timing(&mut self, ep: &mut E, _npp: u64) -> Result<()> {
        if self.participant() {
            match self.kind {
                QueueKind::Posted => self.clear_posted(ep).phase("clearing the posted queue")?,
                QueueKind::Unexpected => self
                    .clear_unexpected(ep)
                    .phase("clearing the unexpected queue")?,
            }
        }
        self.hold_others(ep)
            .phase("releasing the ranks that do not measure")
    }
}
