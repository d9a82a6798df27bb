//! [`SimEndpoint`]: one simulated node's [`Endpoint`], running inside that node's coroutine.
//! Every operation is a request yielded to the kernel; the kernel resumes the coroutine with
//! the answer once the operation's virtual time has passed.

use commbench_core::transport::error::check_rank;
use commbench_core::transport::work::Work;
use commbench_core::transport::BackendInfo;
use commbench_core::{Completion, Endpoint, Error, Rank, ReqId, Result, Span, Src, Tag, TagSel};
use corosensei::Yielder;
use std::time::Duration;

/// A collective of the out-of-band control plane.
#[derive(Debug)]
pub(crate) enum Coll {
    Barrier,
    BarrierFirst(Rank),
    Bcast { root: Rank, data: Vec<u8> },
    Gather { root: Rank, data: Vec<u8> },
}

impl Coll {
    /// Same operation (kind and root), for matching the nodes' calls.
    pub(crate) fn same_as(&self, o: &Coll) -> bool {
        match (self, o) {
            (Coll::Barrier, Coll::Barrier) => true,
            (Coll::BarrierFirst(a), Coll::BarrierFirst(b)) => a == b,
            (Coll::Bcast { root: a, .. }, Coll::Bcast { root: b, .. }) => a == b,
            (Coll::Gather { root: a, .. }, Coll::Gather { root: b, .. }) => a == b,
            _ => false,
        }
    }

    pub(crate) fn describe(&self) -> String {
        match self {
            Coll::Barrier => "barrier".into(),
            Coll::BarrierFirst(f) => format!("barrier_first({f})"),
            Coll::Bcast { root, .. } => format!("broadcast from {root}"),
            Coll::Gather { root, .. } => format!("gather to {root}"),
        }
    }
}

/// What a node asks of the kernel.
#[derive(Debug)]
pub(crate) enum Req {
    /// `span` is checked against `buf` ([`Span::range`]) before it is asked.
    Isend {
        dest: Rank,
        tag: Tag,
        buf: Vec<u8>,
        span: Span,
    },
    Irecv {
        src: Src,
        tag: TagSel,
        buf: Vec<u8>,
        span: Span,
    },
    Test(ReqId),
    /// Wait for the request, at most the given virtual ns when bounded.
    Wait(ReqId, Option<u64>),
    Now,
    Compute(Work),
    Collective(Coll),
}

/// The kernel's answer.
#[derive(Debug)]
pub(crate) enum Resp {
    Start,
    Id(Result<ReqId>),
    Maybe(Result<Option<Completion>>),
    Done(Result<Completion>),
    Time(u64),
    Unit(Result<()>),
    Data(Result<Vec<u8>>),
    Gathered(Result<Option<Vec<Vec<u8>>>>),
}

impl Resp {
    fn kind(&self) -> &'static str {
        match self {
            Resp::Start => "start",
            Resp::Id(_) => "id",
            Resp::Maybe(_) => "maybe",
            Resp::Done(_) => "done",
            Resp::Time(_) => "time",
            Resp::Unit(_) => "unit",
            Resp::Data(_) => "data",
            Resp::Gathered(_) => "gathered",
        }
    }
}

fn protocol(want: &str, got: &Resp) -> Error {
    crate::kernel::sim_error(format!(
        "kernel answered `{}` to a `{want}` request",
        got.kind()
    ))
}

/// The fixed facts a node's endpoint needs.
#[derive(Debug, Clone)]
pub(crate) struct EpInfo {
    pub size: u32,
    /// The cube's dimension (`None`: a tree of switches).
    pub hypercube: Option<u32>,
    /// On a tree, each rank's switches, top first (`core.spine0.leaf1`).
    pub switch_paths: Option<Vec<String>>,
    pub tick_ns: u64,
    pub recv_cap: Option<u64>,
    /// The machine's bound on a wait, virtual ns ([`crate::SimConfig::wait_timeout_ns`]).
    pub wait_ns: Option<u64>,
    pub info: BackendInfo,
}

/// One simulated node's endpoint: [`Endpoint`] on virtual time.
///
/// * `isend` costs F(n) of this node's CPU and returns when the message sits in a system
///   buffer (the send is then complete); `irecv` costs A(capacity); collecting a received
///   message (`wait`, or `test` that finds it) costs U(n).
/// * A span ([`Span`]: `isend_span`, `irecv_span`) of count `c` is exactly `c` such sends or
///   receives posted in order (and, for receives, a `wait` on each in order), on the bytes at
///   the span's offset of one buffer: the same events and virtual time as `c` buffers, since
///   the simulator does not model memory (caches, pages), which is all one buffer changes.
/// * `wait`, `wait_all`, `send` and `recv` block the node's coroutine until completion: no
///   polling events. `test` costs `poll_ns` of CPU time so polling loops advance time.
/// * `now_ns` returns the virtual time at the end of the read, floored to the clock tick; each
///   read costs `clock_read_ns`. `compute(work)` is `work.iters * compute_ns_per_iter` of CPU
///   (`compute_float_ns_per_iter` for the floating-point Q)
///   time, lengthened by every R and S handler that runs meanwhile.
/// * The control plane (barrier, barrier_first, broadcast, gather) is out of band and free in
///   virtual time: every node leaves at the time the last one entered. So are the
///   point-to-point messages of [`commbench_core::transport::TAG_OUT_OF_BAND`] (all-pairs'
///   steps between rounds): no F, A, U, matching or hop; each is at its destination when sent.
/// * A wait is unbounded (`timeout()` says a day) unless the machine bounds it
///   ([`crate::SimConfig::wait_timeout_ns`]: `wait_timeout_us`, or one virtual second when a
///   node is silent): then a wait that outlasts its bound in virtual time fails with
///   [`Error::Timeout`], and `set_timeout` changes the bound. Unbounded, a run in which every
///   node is blocked ends with [`Error::Deadlock`] at once.
pub struct SimEndpoint<'y> {
    rank: Rank,
    y: &'y Yielder<Resp, Req>,
    info: &'y EpInfo,
    /// The bound on a wait, virtual ns (`None`: none).
    wait_ns: Option<u64>,
}

/// What `timeout()` says of an unbounded wait.
const UNBOUNDED: Duration = Duration::from_secs(86_400);

impl std::fmt::Debug for SimEndpoint<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SimEndpoint")
            .field("rank", &self.rank)
            .field("size", &self.info.size)
            .finish()
    }
}

impl<'y> SimEndpoint<'y> {
    pub(crate) fn new(rank: Rank, y: &'y Yielder<Resp, Req>, info: &'y EpInfo) -> Self {
        Self {
            rank,
            y,
            info,
            wait_ns: info.wait_ns,
        }
    }

    #[inline]
    fn ask(&mut self, r: Req) -> Resp {
        self.y.suspend(r)
    }

    fn collective(&mut self, c: Coll) -> Resp {
        self.ask(Req::Collective(c))
    }
}

impl Endpoint for SimEndpoint<'_> {
    fn rank(&self) -> Rank {
        self.rank
    }

    fn size(&self) -> u32 {
        self.info.size
    }

    fn backend(&self) -> &'static str {
        "sim"
    }

    fn timeout(&self) -> Duration {
        self.wait_ns.map_or(UNBOUNDED, Duration::from_nanos)
    }

    /// Takes effect only on a machine whose waits are bounded: elsewhere no wait can outlast
    /// a silent peer, and a run that cannot go on is a deadlock, reported at once.
    fn set_timeout(&mut self, timeout: Duration) {
        if self.info.wait_ns.is_some() {
            self.wait_ns = Some(u64::try_from(timeout.as_nanos()).unwrap_or(u64::MAX).max(1));
        }
    }

    fn isend(&mut self, dest: Rank, tag: Tag, buf: Vec<u8>) -> Result<ReqId> {
        let span = Span::whole(buf.len());
        self.isend_span(dest, tag, buf, span)
    }

    fn irecv(&mut self, src: Src, tag: TagSel, buf: Vec<u8>) -> Result<ReqId> {
        let span = Span::whole(buf.len());
        self.irecv_span(src, tag, buf, span)
    }

    /// `span.count` sends, each exactly an `isend` of the `span.len` bytes at `span.start`:
    /// the same F, injection, hops and handlers, one after another, the request returned
    /// after the last F. The virtual time of a window posted on one buffer is therefore that
    /// of the same window posted on `count` buffers: what one buffer changes on real
    /// hardware (caches, pages, memory traffic) is not in the model.
    fn isend_span(&mut self, dest: Rank, tag: Tag, buf: Vec<u8>, span: Span) -> Result<ReqId> {
        span.range(buf.len())?;
        check_rank("destination", dest, self.info.size)?;
        if let Some(cap) = self.info.recv_cap {
            if span.len as u64 > cap && dest != self.rank {
                return Err(Error::Invalid(format!(
                    "a {}-byte message can never fit the {cap}-byte receive buffer of node {dest}",
                    span.len
                )));
            }
        }
        match self.ask(Req::Isend {
            dest,
            tag,
            buf,
            span,
        }) {
            Resp::Id(r) => r,
            other => Err(protocol("isend", &other)),
        }
    }

    /// `span.count` receives, each exactly an `irecv` of at most `span.len` bytes: posted one
    /// after another (each its A and its walk of the unexpected queue), matched as separately
    /// posted receives would be, and collected in order by `wait` (each its U), as a `wait` on
    /// each of `count` receives would; the message (its carried prefix) lands at
    /// `span.start` and no byte outside the span is written. Virtual time is that of the
    /// receives on `count` buffers: the simulator does not model memory.
    fn irecv_span(&mut self, src: Src, tag: TagSel, buf: Vec<u8>, span: Span) -> Result<ReqId> {
        span.range(buf.len())?;
        if let Src::Rank(r) = src {
            check_rank("source", r, self.info.size)?;
        }
        match self.ask(Req::Irecv {
            src,
            tag,
            buf,
            span,
        }) {
            Resp::Id(r) => r,
            other => Err(protocol("irecv", &other)),
        }
    }

    // pingpong_span: the trait's default loop on isend_span, irecv_span and wait above; every
    // step is a request to the kernel either way, so there is no faster native loop.

    fn test(&mut self, req: ReqId) -> Result<Option<Completion>> {
        match self.ask(Req::Test(req)) {
            Resp::Maybe(r) => r,
            other => Err(protocol("test", &other)),
        }
    }

    fn wait(&mut self, req: ReqId) -> Result<Completion> {
        match self.ask(Req::Wait(req, self.wait_ns)) {
            Resp::Done(r) => r,
            other => Err(protocol("wait", &other)),
        }
    }

    // wait_all, send and recv: the trait's defaults, built on the blocking `wait` above, which
    // suspends the node's coroutine until the kernel completes the request.

    fn now_ns(&mut self) -> u64 {
        match self.ask(Req::Now) {
            Resp::Time(t) => t,
            // Unreachable by construction of the kernel; a clock cannot return an error.
            _ => 0,
        }
    }

    fn claimed_resolution_ns(&self) -> Option<f64> {
        // The configured tick is the simulated machine's claim; the method measures it too.
        Some(self.info.tick_ns as f64)
    }

    fn clock_name(&self) -> String {
        format!(
            "simulated virtual time (integer ns, tick {} ns)",
            self.info.tick_ns
        )
    }

    fn compute(&mut self, work: Work) {
        // The answer carries nothing; compute cannot fail.
        let _ = self.ask(Req::Compute(work));
    }

    fn hypercube(&self) -> Option<u32> {
        self.info.hypercube
    }

    /// The simulated node, `node<rank>`, on a cube and on a tree alike.
    fn host(&self) -> Option<String> {
        Some(format!("node{}", self.rank))
    }

    /// On a tree, the switches above the node, as Slurm's topology/tree plugin would say.
    fn switch_path(&self) -> Option<String> {
        self.info
            .switch_paths
            .as_ref()
            .and_then(|p| p.get(self.rank as usize).cloned())
    }

    /// The virtual clock models no cache: a message takes the same time from any buffer, so a
    /// cold-cache run writes through no pool here.
    fn models_caches(&self) -> bool {
        crate::MODELS_CACHES
    }

    fn info(&self) -> BackendInfo {
        self.info.info.clone()
    }

    fn barrier(&mut self) -> Result<()> {
        match self.collective(Coll::Barrier) {
            Resp::Unit(r) => r,
            other => Err(protocol("barrier", &other)),
        }
    }

    fn barrier_first(&mut self, first: Rank) -> Result<()> {
        check_rank("barrier_first", first, self.info.size)?;
        match self.collective(Coll::BarrierFirst(first)) {
            Resp::Unit(r) => r,
            other => Err(protocol("barrier_first", &other)),
        }
    }

    fn broadcast(&mut self, root: Rank, data: &mut Vec<u8>) -> Result<()> {
        check_rank("root", root, self.info.size)?;
        let mine = if self.rank == root {
            data.clone()
        } else {
            Vec::new()
        };
        match self.collective(Coll::Bcast { root, data: mine }) {
            Resp::Data(r) => {
                *data = r?;
                Ok(())
            }
            other => Err(protocol("broadcast", &other)),
        }
    }

    fn gather(&mut self, root: Rank, data: &[u8]) -> Result<Option<Vec<Vec<u8>>>> {
        check_rank("root", root, self.info.size)?;
        match self.collective(Coll::Gather {
            root,
            data: data.to_vec(),
        }) {
            Resp::Gathered(r) => r,
            other => Err(protocol("gather", &other)),
        }
    }
}
