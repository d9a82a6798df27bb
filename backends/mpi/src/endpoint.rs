//! [`MpiEndpoint`]: the commbench data plane on `MPI_Isend`/`MPI_Irecv`/`MPI_Test`, and the
//! control plane on MPI's own (non-blocking) collectives.

use crate::sys::{self, Spin};
use crate::MpiConfig;
use commbench_core::transport::error::check_rank;
use commbench_core::transport::{BackendInfo, TAG_UB};
use commbench_core::{
    transport::clock, transport::pingpong_span_loop, Completion, Endpoint, Error, OpKind, Rank,
    ReqId, Result, Role, Span, Src, Tag, TagSel,
};
use mpi::ffi;
use std::os::raw::{c_int, c_void};
use std::time::{Duration, Instant};

/// The clock an [`MpiEndpoint`] reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MpiClock {
    /// `MPI_Wtime()` (seconds as a double), in nanoseconds.
    #[default]
    Wtime,
    /// `CLOCK_MONOTONIC`, as the other backends read.
    Monotonic,
}

impl MpiClock {
    /// Name in the result document.
    pub fn name(self) -> &'static str {
        match self {
            MpiClock::Wtime => "MPI_Wtime",
            MpiClock::Monotonic => "CLOCK_MONOTONIC",
        }
    }
}

impl std::str::FromStr for MpiClock {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s.to_ascii_lowercase().as_str() {
            "wtime" | "mpi_wtime" | "mpi" => Ok(MpiClock::Wtime),
            "monotonic" | "clock_monotonic" => Ok(MpiClock::Monotonic),
            _ => Err(Error::Config(format!(
                "unknown clock {s:?}: expected wtime or monotonic"
            ))),
        }
    }
}

/// What a posted operation is: for its completion and for error messages.
#[derive(Debug, Clone, Copy)]
struct Op {
    kind: OpKind,
    /// Destination of a send; source asked for by a receive (`None`: any).
    peer: Option<Rank>,
    /// Tag of a send; tag asked for by a receive (`None`: any).
    tag: Option<Tag>,
    /// Whether the operation runs on the control communicator (tags from `TAG_UB` up).
    ctrl: bool,
}

/// A posted operation whose buffer MPI may still use.
#[derive(Debug)]
struct Active {
    /// The request of the operation; of a span posted several times, its last message's.
    req: ffi::MPI_Request,
    op: Op,
    buf: Vec<u8>,
    /// A blocking call timed out on it: nobody will collect it.
    orphan: bool,
    /// `None` for all of `buf` posted once; for any other [`Span`], what its completion needs.
    span: Option<Posted>,
}

/// A [`Span`] posted as one request: its messages before the last are the slot's
/// [`Slot::rest`], collected together once the last (`req`) has finished.
#[derive(Debug, Clone, Copy)]
struct Posted {
    /// Bytes of each message (for a receive: the most each accepts).
    cap: usize,
    /// How many of the slot's `rest` have completed (MPI set them to `MPI_REQUEST_NULL`).
    done: usize,
    /// MPI's code and status of the last message once it has finished (MPI set `req` to
    /// `MPI_REQUEST_NULL`).
    last: Option<(c_int, ffi::MPI_Status)>,
    /// MPI's code and status of the first of `rest` that finished with an error (a truncated
    /// receive): the span's error once all its messages have finished.
    failed: Option<(c_int, ffi::MPI_Status)>,
}

/// One message's worth of arguments to `MPI_Isend`/`MPI_Irecv` ([`MpiEndpoint::wire`]): the one
/// place that starts a point-to-point operation, for posted, blocking and looped ones alike
/// (the ping-pong loop checks them once and starts every message of the loop from them).
#[derive(Debug, Clone, Copy)]
struct Wire {
    p: *mut c_void,
    count: c_int,
    byte: ffi::MPI_Datatype,
    peer: c_int,
    t: c_int,
    comm: ffi::MPI_Comm,
}

impl Wire {
    /// Start a send or a receive of the buffer: MPI's return code and the request.
    #[inline(always)]
    fn start(&self, kind: OpKind) -> (c_int, ffi::MPI_Request) {
        let mut req = sys::request_null();
        let w = *self;
        // SAFETY: `w.p` points to a heap buffer of at least `w.count` bytes, taken from a live
        // `&mut [u8]` by `MpiEndpoint::wire`; every caller keeps that buffer (on its frame or
        // in the slab) until the request completes, or parks it with the request; `w.comm` is
        // one of the endpoint's valid communicators. A span posted `count` times starts
        // `count` requests on the same bytes (osu_bw's single buffer): the slab keeps them
        // until the last has completed, and nothing reads them before.
        let rc = unsafe {
            match kind {
                OpKind::Send => ffi::MPI_Isend(w.p, w.count, w.byte, w.peer, w.t, w.comm, &mut req),
                OpKind::Recv => ffi::MPI_Irecv(w.p, w.count, w.byte, w.peer, w.t, w.comm, &mut req),
            }
        };
        (rc, req)
    }
}

/// The MPI call that starts an operation of `kind`.
fn kind_call(kind: OpKind) -> &'static str {
    match kind {
        OpKind::Send => "MPI_Isend",
        OpKind::Recv => "MPI_Irecv",
    }
}

/// The error for a request this endpoint does not hold (never issued, or already collected).
fn unknown_request(req: ReqId) -> Error {
    Error::Invalid(format!("unknown or finished request {}", req.0))
}

#[derive(Debug)]
struct Slot {
    generation: u32,
    op: Option<Active>,
    /// The requests of a span's messages before its last, in posting order; kept (empty)
    /// between uses, so that posting a window of messages allocates nothing once warm.
    rest: Vec<ffi::MPI_Request>,
    /// `MPI_Testall`'s statuses of `rest`, kept as `rest` is.
    statuses: Vec<ffi::MPI_Status>,
}

/// One rank's endpoint on MPI.
///
/// * Data plane: commbench tags below `TAG_UB` go to a duplicate of the run's communicator
///   with their own value; `Src::Any` is `MPI_ANY_SOURCE` and `TagSel::Any` is `MPI_ANY_TAG`,
///   which is safe because nothing else travels on that communicator.
/// * Control plane (barrier, broadcast, gather, and tags from `TAG_UB` up) goes to a second
///   duplicate: `MPI_Ibarrier`, `MPI_Ibcast`, `MPI_Igather(v)`, and point-to-point for seed
///   004's asymmetric barrier, each waited for with the endpoint's timeout.
/// * Buffers of posted operations are parked in a slab until `MPI_Test` reports them complete,
///   so their memory stays valid while MPI uses it.
/// * Blocking `send`/`recv` take a lean path: `MPI_Isend`/`MPI_Irecv` and an `MPI_Test` spin
///   on a request on the stack (no slab; a send tests with `MPI_STATUS_IGNORE`), the clock
///   first read after 1024 tests, for the timeout. `MPI_Send`/`MPI_Recv` are never used: they
///   could block forever on a silent peer, and measured side by side with them (Open MPI 4.1,
///   shared memory) the non-blocking pair spun on costs nothing more (docs/overhead.md).
/// * Every MPI call's return code is checked (`MPI_ERRORS_RETURN` is set on both
///   communicators); a failure is [`Error::Backend`] with MPI's error string.
#[derive(Debug)]
pub struct MpiEndpoint {
    data: ffi::MPI_Comm,
    ctrl: ffi::MPI_Comm,
    rank: Rank,
    size: u32,
    timeout: Duration,
    clock: MpiClock,
    tag_ub: u32,
    byte: ffi::MPI_Datatype,
    slots: Vec<Slot>,
    free: Vec<u32>,
    info: BackendInfo,
}

impl MpiEndpoint {
    /// An endpoint on two fresh duplicates of `comm` (collective over `comm`). The
    /// duplicates are freed when the endpoint is dropped; `comm` is left alone.
    pub(crate) fn on(comm: ffi::MPI_Comm, cfg: &MpiConfig, info: BackendInfo) -> Result<Self> {
        let (rank, _) = sys::rank_size(comm)?;
        let data = dup(comm, rank, cfg.timeout)?;
        let ctrl = match dup(comm, rank, cfg.timeout) {
            Ok(c) => c,
            Err(e) => {
                free_comm(data);
                return Err(e);
            }
        };
        let mut ep = MpiEndpoint {
            data,
            ctrl,
            rank,
            size: 0,
            timeout: cfg.timeout,
            clock: cfg.clock,
            tag_ub: 0,
            byte: sys::byte_type(),
            slots: Vec::new(),
            free: Vec::new(),
            info,
        };
        let (rank, size) = sys::rank_size(data)?;
        ep.rank = rank;
        ep.size = size;
        ep.tag_ub = crate::tag_ub(data)?;
        ep.info
            .insert("clock".into(), serde_json::Value::from(cfg.clock.name()));
        ep.info
            .insert("tag_ub".into(), serde_json::Value::from(ep.tag_ub));
        Ok(ep)
    }

    /// The data communicator (for kernels that use MPI directly, such as the derived-datatype
    /// transpose).
    pub(crate) fn data_comm(&self) -> ffi::MPI_Comm {
        self.data
    }

    /// The communicator, MPI tag and whether it is the control lane for a commbench tag;
    /// `None` above `MPI_TAG_UB` ([`MpiEndpoint::route`] says why).
    #[inline(always)]
    fn lane(&self, tag: Tag) -> Option<(ffi::MPI_Comm, c_int, bool)> {
        let (comm, t, ctrl) = if tag < TAG_UB {
            (self.data, tag, false)
        } else {
            (self.ctrl, tag - TAG_UB, true)
        };
        (t <= self.tag_ub).then_some((comm, t as c_int, ctrl))
    }

    /// A message of the native ping-pong loop that did not complete cleanly: the error MPI
    /// reported (a truncated receive of at most `cap` bytes as [`Error::Truncated`], from its
    /// status), or, when the spin failed or timed out, the request parked with the loop's
    /// buffer (MPI may still use it; the caller's buffer is left empty) and the error naming
    /// what was awaited.
    #[cold]
    #[inline(never)]
    #[allow(clippy::too_many_arguments)]
    fn pingpong_failed(
        &mut self,
        req: ffi::MPI_Request,
        spin: Spin,
        st: &ffi::MPI_Status,
        kind: OpKind,
        peer: Rank,
        tag: Tag,
        ctrl: bool,
        cap: usize,
        buf: &mut Vec<u8>,
    ) -> Error {
        let op = Op {
            kind,
            peer: Some(peer),
            tag: Some(tag),
            ctrl,
        };
        match spin {
            Spin::Done(rc) => match kind {
                OpKind::Send => sys::mpi_error("MPI_Isend", rc),
                OpKind::Recv => match self.finished(rc, st, op, cap) {
                    Err(e) => e,
                    Ok(_) => sys::mpi_error("MPI_Irecv", rc),
                },
            },
            spin => self.abandon(req, spin, op, std::mem::take(buf)),
        }
    }

    /// The native ping-pong loop of `pingpong` and `pingpong_span`, on the message `wire`
    /// describes (`cap` bytes of `buf`, which it points into) with `peer` under `tag` (on the
    /// control lane when `ctrl`): per message `MPI_Isend` or `MPI_Irecv` on a request on the
    /// stack and an `MPI_Test` spin (the clock first read after 1024 tests), nothing built per
    /// message; a receive's status is read only when MPI reports an error.
    #[inline(always)]
    fn pingpong_on(
        &mut self,
        wire: Wire,
        cap: usize,
        (peer, tag, ctrl): (Rank, Tag, bool),
        buf: &mut Vec<u8>,
        n: u64,
        role: Role,
    ) -> Result<()> {
        let legs = match role {
            Role::Initiator => [OpKind::Send, OpKind::Recv],
            Role::Echo => [OpKind::Recv, OpKind::Send],
        };
        let mut st = sys::empty_status();
        for _ in 0..n {
            for kind in legs {
                let (rc, mut req) = wire.start(kind);
                if rc != sys::SUCCESS {
                    return Err(sys::mpi_error(kind_call(kind), rc));
                }
                let status = match kind {
                    OpKind::Send => sys::status_ignore(),
                    OpKind::Recv => &mut st as *mut ffi::MPI_Status,
                };
                match sys::spin(&mut req, status, self.timeout) {
                    Spin::Done(rc) if rc == sys::SUCCESS => {}
                    spin => {
                        return Err(
                            self.pingpong_failed(req, spin, &st, kind, peer, tag, ctrl, cap, buf)
                        )
                    }
                }
            }
        }
        Ok(())
    }

    /// Why a blocking send could not start: the error `isend` gives for the same arguments.
    #[cold]
    #[inline(never)]
    fn send_error(&self, dest: Rank, tag: Tag, buf: &[u8]) -> Error {
        match self.post_send_checks(dest, tag, buf) {
            Err(e) => e,
            Ok(()) => Error::Invalid(format!("a send to rank {dest} (tag {tag}) cannot start")),
        }
    }

    /// Why a blocking receive could not start: the error `irecv` gives for the same arguments.
    #[cold]
    #[inline(never)]
    fn recv_error(&self, src: Src, tag: TagSel, buf: &[u8]) -> Error {
        if let Src::Rank(r) = src {
            if let Err(e) = check_rank("source", r, self.size) {
                return e;
            }
        }
        if let TagSel::Tag(t) = tag {
            if let Err(e) = self.route(t) {
                return e;
            }
        }
        match sys::count(buf.len(), "a receive buffer") {
            Err(e) => e,
            Ok(_) => Error::Invalid("a receive cannot start".into()),
        }
    }

    /// The checks of a send's arguments, in the order `isend` makes them.
    fn post_send_checks(&self, dest: Rank, tag: Tag, buf: &[u8]) -> Result<()> {
        check_rank("destination", dest, self.size)?;
        self.route(tag)?;
        sys::count(buf.len(), "a message")?;
        Ok(())
    }

    /// The communicator and MPI tag for a commbench tag.
    #[inline]
    fn route(&self, tag: Tag) -> Result<(ffi::MPI_Comm, c_int, bool)> {
        let (comm, t, ctrl) = if tag < TAG_UB {
            (self.data, tag, false)
        } else {
            (self.ctrl, tag - TAG_UB, true)
        };
        if t > self.tag_ub {
            return Err(Error::Invalid(format!(
                "tag {tag} is above this MPI library's MPI_TAG_UB ({})",
                self.tag_ub
            )));
        }
        Ok((comm, t as c_int, ctrl))
    }

    /// Keep a started request and its buffer in the slab until it completes; `orphan`: nobody
    /// will collect it.
    fn park(&mut self, req: ffi::MPI_Request, op: Op, buf: Vec<u8>, orphan: bool) -> ReqId {
        let i = self.claim();
        self.fill(
            i,
            Active {
                req,
                op,
                buf,
                orphan,
                span: None,
            },
        )
    }

    /// A free slot's index (its `rest` empty, its capacity kept).
    #[inline]
    fn claim(&mut self) -> usize {
        match self.free.pop() {
            Some(i) => i as usize,
            None => {
                self.slots.push(Slot {
                    generation: 0,
                    op: None,
                    rest: Vec::new(),
                    statuses: Vec::new(),
                });
                self.slots.len() - 1
            }
        }
    }

    /// Put `a` in the claimed slot `i` under a new generation: its request id.
    #[inline]
    fn fill(&mut self, i: usize, a: Active) -> ReqId {
        let s = &mut self.slots[i];
        s.generation = s.generation.wrapping_add(1);
        s.op = Some(a);
        ReqId(((s.generation as u64) << 32) | i as u64)
    }

    fn slot_index(&self, req: ReqId) -> Result<usize> {
        let i = (req.0 & 0xFFFF_FFFF) as usize;
        let g = (req.0 >> 32) as u32;
        match self.slots.get(i) {
            Some(s) if s.generation == g && s.op.as_ref().is_some_and(|a| !a.orphan) => Ok(i),
            _ => Err(unknown_request(req)),
        }
    }

    fn release(&mut self, i: usize) -> Option<Active> {
        let op = self.slots[i].op.take();
        self.slots[i].rest.clear();
        self.free.push(i as u32);
        op
    }

    /// Turn a finished request into a completion or error (the request is released by MPI).
    #[inline]
    fn finish(&self, rc: c_int, st: &ffi::MPI_Status, op: Op, buf: Vec<u8>) -> Result<Completion> {
        let (peer, tag, len) = self.finished(rc, st, op, buf.len())?;
        Ok(Completion {
            kind: op.kind,
            buf,
            peer,
            tag,
            len,
        })
    }

    /// What a finished request says: (peer, tag, bytes) of its completion for a buffer of `cap`
    /// bytes, or its error (a receive of a longer message is [`Error::Truncated`]).
    #[inline]
    fn finished(
        &self,
        rc: c_int,
        st: &ffi::MPI_Status,
        op: Op,
        cap: usize,
    ) -> Result<(Rank, Tag, usize)> {
        let err = if rc == sys::ERR_IN_STATUS {
            st.MPI_ERROR
        } else {
            rc
        };
        if op.kind == OpKind::Send {
            sys::check(err, "MPI_Isend")?;
            return Ok((op.peer.unwrap_or(0), op.tag.unwrap_or(0), cap));
        }
        let source = st.MPI_SOURCE.max(0) as Rank;
        let t = st.MPI_TAG.max(0) as Tag + if op.ctrl { TAG_UB } else { 0 };
        let truncated = err == sys::ERR_TRUNCATE || st.MPI_ERROR == sys::ERR_TRUNCATE;
        if err != sys::SUCCESS && !truncated {
            return Err(sys::mpi_error("MPI_Irecv", err));
        }
        let mut n: c_int = 0;
        // SAFETY: `st` was filled by MPI_Test for a receive of bytes.
        let rc = unsafe { ffi::MPI_Get_count(st, self.byte, &mut n) };
        sys::check(rc, "MPI_Get_count")?;
        if truncated {
            // Open MPI reports the length sent; a library that reports only what fitted
            // still tells that the message was longer.
            let len = (n.max(0) as usize).max(cap + 1);
            return Err(Error::Truncated {
                len,
                cap,
                source_rank: source,
                tag: t,
            });
        }
        Ok((source, t, (n.max(0) as usize).min(cap)))
    }

    fn timeout_error(&self, op: Op) -> Error {
        let who = match op.peer {
            Some(p) => format!("rank {p}"),
            None => "any rank".to_string(),
        };
        let what = match (op.kind, op.tag) {
            (OpKind::Send, Some(t)) => format!("a send to {who} (tag {t}) to complete"),
            (OpKind::Send, None) => format!("a send to {who} to complete"),
            (OpKind::Recv, Some(t)) => format!("a message from {who} (tag {t})"),
            (OpKind::Recv, None) => format!("a message from {who}"),
        };
        Error::Timeout {
            rank: self.rank,
            what,
            timeout: self.timeout,
        }
    }

    /// A blocking operation whose spin did not end in a completion: park the request (its
    /// buffer stays valid while MPI may use it) as an orphan that the endpoint cleans up when
    /// dropped, and name what went wrong. Out of line: the fast path never comes here.
    #[cold]
    #[inline(never)]
    fn abandon(&mut self, req: ffi::MPI_Request, spin: Spin, op: Op, buf: Vec<u8>) -> Error {
        let err = match spin {
            Spin::Failed(rc) => sys::mpi_error("MPI_Test", rc),
            Spin::TimedOut => self.timeout_error(op),
            // A finished request is never parked; a caller only comes here without one.
            Spin::Done(rc) => return sys::mpi_error("MPI_Test", rc),
        };
        self.park(req, op, buf, true);
        err
    }

    /// Start a send of `buf` to `dest`; the caller keeps `buf` until the request completes.
    #[inline]
    fn post_send(&self, dest: Rank, tag: Tag, buf: &mut [u8]) -> Result<(ffi::MPI_Request, Op)> {
        let (op, peer, t, comm) = self.send_op(dest, tag)?;
        let req = self.start_p2p(op.kind, buf, peer, t, comm)?;
        Ok((req, op))
    }

    /// A send to `dest` with `tag`, checked: the operation, and MPI's rank, tag and
    /// communicator for it.
    #[inline]
    fn send_op(&self, dest: Rank, tag: Tag) -> Result<(Op, c_int, c_int, ffi::MPI_Comm)> {
        check_rank("destination", dest, self.size)?;
        let (comm, t, ctrl) = self.route(tag)?;
        let op = Op {
            kind: OpKind::Send,
            peer: Some(dest),
            tag: Some(tag),
            ctrl,
        };
        Ok((op, dest as c_int, t, comm))
    }

    /// Start a receive into `buf`; the caller keeps `buf` until the request completes.
    #[inline]
    fn post_recv(&self, src: Src, tag: TagSel, buf: &mut [u8]) -> Result<(ffi::MPI_Request, Op)> {
        let (op, s, t, comm) = self.recv_op(src, tag)?;
        let req = self.start_p2p(op.kind, buf, s, t, comm)?;
        Ok((req, op))
    }

    /// A receive from `src` with `tag`, checked: the operation, and MPI's source (perhaps
    /// `MPI_ANY_SOURCE`), tag (perhaps `MPI_ANY_TAG`) and communicator for it.
    #[inline]
    fn recv_op(&self, src: Src, tag: TagSel) -> Result<(Op, c_int, c_int, ffi::MPI_Comm)> {
        let (s, peer) = match src {
            Src::Any => (sys::any_source(), None),
            Src::Rank(r) => {
                check_rank("source", r, self.size)?;
                (r as c_int, Some(r))
            }
        };
        let (comm, t, ctrl) = match tag {
            TagSel::Any => (self.data, sys::any_tag(), false),
            TagSel::Tag(t) => self.route(t)?,
        };
        let op = Op {
            kind: OpKind::Recv,
            peer,
            tag: match tag {
                TagSel::Any => None,
                TagSel::Tag(t) => Some(t),
            },
            ctrl,
        };
        Ok((op, s, t, comm))
    }

    /// Post `span` of `buf` (anything but all of it once) as one request: `span.count`
    /// `MPI_Isend`s or `MPI_Irecv`s of `op` on the span's bytes, with `peer` and MPI tag `t` on
    /// `comm`, as osu_bw posts its window on a single buffer. The requests before the last
    /// wait in the slot's `rest`. When one cannot start, those started before it are parked
    /// as an orphan (MPI may use `buf` until they finish) and the error is returned.
    fn post_span(
        &mut self,
        op: Op,
        mut buf: Vec<u8>,
        span: Span,
        peer: c_int,
        t: c_int,
        comm: ffi::MPI_Comm,
    ) -> Result<ReqId> {
        let what = match op.kind {
            OpKind::Send => "a message",
            OpKind::Recv => "a receive buffer",
        };
        let count = sys::count(span.len, what)?;
        let range = span.range(buf.len())?;
        // `buf` moves into the slab below; its heap bytes, which the requests use, stay put.
        let wire = self.wire(&mut buf[range], count, peer, t, comm);
        let i = self.claim();
        let mut rest = std::mem::take(&mut self.slots[i].rest);
        rest.clear();
        let mut rc = sys::SUCCESS;
        for _ in 0..span.count {
            let (code, req) = wire.start(op.kind);
            if code != sys::SUCCESS {
                rc = code;
                break;
            }
            rest.push(req);
        }
        let last = rest.pop();
        self.slots[i].rest = rest;
        let Some(req) = last else {
            // Nothing started: nothing uses `buf`, and the slot is free again.
            self.free.push(i as u32);
            return Err(sys::mpi_error(kind_call(op.kind), rc));
        };
        let posted = Posted {
            cap: span.len,
            done: 0,
            last: None,
            failed: None,
        };
        let active = Active {
            req,
            op,
            buf,
            orphan: rc != sys::SUCCESS,
            span: Some(posted),
        };
        let id = self.fill(i, active);
        if rc != sys::SUCCESS {
            return Err(sys::mpi_error(kind_call(op.kind), rc));
        }
        Ok(id)
    }

    /// [`Endpoint::test`] of a posted span, as `MPI_Waitall` completes a window in osu_bw and
    /// osu_mbw_mr: while the last message has not finished, one `MPI_Test` of it (which
    /// progresses MPI once); then one `MPI_Testall` collects the messages before it. Messages
    /// between two ranks on one tag match in posting order, so those have as a rule finished
    /// by then, and a window costs one call per poll and one to collect it rather than an
    /// `MPI_Test` per message. The first of them that finished with an error (a truncated
    /// receive) is remembered. Once all have finished, the slot is released and the completion
    /// is the last message's (sender, tag and length of a receive), or the remembered error.
    fn test_span(&mut self, i: usize, req: ReqId) -> Result<Option<Completion>> {
        let (rc, st) = {
            let s = &mut self.slots[i];
            let a = s.op.as_mut().ok_or_else(|| unknown_request(req))?;
            let p = a.span.as_mut().ok_or_else(|| unknown_request(req))?;
            let mut flag: c_int = 0;
            let last = match p.last {
                Some(last) => last,
                None => {
                    let mut st = sys::empty_status();
                    // SAFETY: `a.req` is the span's last request, active until this reports
                    // it finished; the buffer `a.buf` lives in the slab until all of the
                    // span's requests have completed.
                    let rc = unsafe { ffi::MPI_Test(&mut a.req, &mut flag, &mut st) };
                    if flag == 0 {
                        if rc != sys::SUCCESS {
                            // The request may still be active: keep the span (and its buffer).
                            a.orphan = true;
                            return Err(sys::mpi_error("MPI_Test", rc));
                        }
                        return Ok(None);
                    }
                    p.last = Some((rc, st));
                    (rc, st)
                }
            };
            let pending = &mut s.rest[p.done..];
            let n = pending.len();
            if n > 0 {
                let count = c_int::try_from(n).map_err(|_| {
                    Error::Invalid(format!(
                        "{n} messages in one window: MPI_Testall takes at most {}",
                        c_int::MAX
                    ))
                })?;
                if s.statuses.len() < n {
                    s.statuses.resize(n, sys::empty_status());
                }
                // SAFETY: `pending` are the span's requests not yet reported finished (MPI
                // sets those it frees to `MPI_REQUEST_NULL`), their buffer `a.buf` in the slab
                // as above; `statuses` holds `n` statuses.
                let rc = unsafe {
                    ffi::MPI_Testall(
                        count,
                        pending.as_mut_ptr(),
                        &mut flag,
                        s.statuses.as_mut_ptr(),
                    )
                };
                if flag == 0 {
                    if rc != sys::SUCCESS {
                        a.orphan = true;
                        return Err(sys::mpi_error("MPI_Testall", rc));
                    }
                    return Ok(None);
                }
                if rc == sys::ERR_IN_STATUS {
                    // Each status says how its message ended: the first failure is the span's.
                    let bad = s.statuses[..n].iter().find(|x| x.MPI_ERROR != sys::SUCCESS);
                    p.failed = Some((rc, bad.copied().unwrap_or(s.statuses[0])));
                } else if rc != sys::SUCCESS {
                    p.failed = Some((rc, s.statuses[0]));
                }
                p.done = s.rest.len();
            }
            last
        };
        let a = self.release(i).ok_or_else(|| unknown_request(req))?;
        let p = a.span.ok_or_else(|| unknown_request(req))?;
        if let Some((rc, st)) = p.failed {
            self.finished(rc, &st, a.op, p.cap)?;
        }
        let (peer, tag, len) = self.finished(rc, &st, a.op, p.cap)?;
        Ok(Some(Completion {
            kind: a.op.kind,
            buf: a.buf,
            peer,
            tag,
            len,
        }))
    }

    /// `MPI_Isend` of `buf` to `peer`, or `MPI_Irecv` into `buf` from `peer` (which may be
    /// `MPI_ANY_SOURCE`), with MPI tag `t` on `comm`.
    #[inline]
    fn start_p2p(
        &self,
        kind: OpKind,
        buf: &mut [u8],
        peer: c_int,
        t: c_int,
        comm: ffi::MPI_Comm,
    ) -> Result<ffi::MPI_Request> {
        let what = match kind {
            OpKind::Send => "a message",
            OpKind::Recv => "a receive buffer",
        };
        let count = sys::count(buf.len(), what)?;
        // The caller keeps `buf` (in the slab or on its stack frame) until the request completes.
        let (rc, req) = self.wire(buf, count, peer, t, comm).start(kind);
        sys::check(rc, kind_call(kind))?;
        Ok(req)
    }

    /// The arguments of `MPI_Isend`/`MPI_Irecv` of all `count` bytes of `buf` with `peer`.
    #[inline(always)]
    fn wire(
        &self,
        buf: &mut [u8],
        count: c_int,
        peer: c_int,
        t: c_int,
        comm: ffi::MPI_Comm,
    ) -> Wire {
        Wire {
            p: buf.as_mut_ptr() as *mut c_void,
            count,
            byte: self.byte,
            peer,
            t,
            comm,
        }
    }

    /// Start `MPI_Ibcast` of the `n` bytes of `buf` from `root` on the control communicator; the
    /// caller keeps `buf` until the request completes.
    fn start_bcast(&self, root: Rank, buf: &mut [u8], n: c_int) -> Result<ffi::MPI_Request> {
        let (p, ctrl, byte) = (buf.as_mut_ptr() as *mut c_void, self.ctrl, self.byte);
        sys::start("MPI_Ibcast", |req| {
            // SAFETY: `buf` holds `n` bytes in a heap buffer the caller keeps until the request
            // completes (leaked on timeout); valid communicator.
            unsafe { ffi::MPI_Ibcast(p, n, byte, root as c_int, ctrl, req) }
        })
    }

    /// Spin on an MPI request of a kernel that uses MPI directly (derived datatypes).
    pub(crate) fn spin_raw(
        &self,
        req: &mut ffi::MPI_Request,
        st: &mut ffi::MPI_Status,
        what: &'static str,
        peer: Rank,
    ) -> Result<()> {
        match sys::spin(req, st, self.timeout) {
            Spin::Done(rc) => {
                let e = if rc == sys::ERR_IN_STATUS {
                    st.MPI_ERROR
                } else {
                    rc
                };
                sys::check(e, what)
            }
            Spin::Failed(rc) => Err(sys::mpi_error(what, rc)),
            Spin::TimedOut => Err(Error::Timeout {
                rank: self.rank,
                what: format!("{what} with rank {peer}"),
                timeout: self.timeout,
            }),
        }
    }
}

fn dup(comm: ffi::MPI_Comm, rank: Rank, timeout: Duration) -> Result<ffi::MPI_Comm> {
    let mut new = sys::comm_null();
    let mut req = sys::start("MPI_Comm_idup", |req| {
        // SAFETY: `comm` is valid; `new` is written by MPI when the request completes, and
        // lives until then (on timeout it is leaked with the request, see below).
        unsafe { ffi::MPI_Comm_idup(comm, &mut new, req) }
    })?;
    if let Err(e) = sys::wait_collective(&mut req, rank, timeout, "MPI_Comm_idup") {
        // MPI may still write the new handle: give it a place that outlives this frame.
        if matches!(e, Error::Timeout { .. }) {
            std::mem::forget(Box::new(new));
        }
        return Err(e);
    }
    sys::errors_return(new)?;
    Ok(new)
}

fn free_comm(mut c: ffi::MPI_Comm) {
    if c != sys::comm_null() {
        // SAFETY: `c` is a communicator this crate duplicated and frees once. MPI defers the
        // release until pending operations on it finish. The code is ignored: this runs in
        // clean-up, where there is nobody to report to.
        unsafe {
            ffi::MPI_Comm_free(&mut c);
        }
    }
}

/// Cancel `req` if it is a receive and test it until `deadline`: whether it finished. The
/// caller keeps its buffer alive meanwhile, and leaks it when this says no.
fn settle(req: &mut ffi::MPI_Request, kind: OpKind, deadline: Instant) -> bool {
    if kind == OpKind::Recv {
        // SAFETY: `req` is an active request of this endpoint.
        unsafe {
            ffi::MPI_Cancel(req);
        }
    }
    let mut st = sys::empty_status();
    while Instant::now() < deadline {
        let mut flag: c_int = 0;
        // SAFETY: as above; the caller keeps its buffer alive.
        let rc = unsafe { ffi::MPI_Test(req, &mut flag, &mut st) };
        if flag != 0 {
            return true;
        }
        if rc != sys::SUCCESS {
            return false;
        }
    }
    false
}

impl Drop for MpiEndpoint {
    fn drop(&mut self) {
        // Requests nobody collected: cancel receives, give every request a moment to finish,
        // and leak the buffers of those that did not, since MPI may still use them.
        // A span's messages that had not completed are its `rest` from `done` on, and `req`
        // until it finished.
        let deadline = Instant::now() + Duration::from_millis(200);
        for s in &mut self.slots {
            let Some(mut a) = s.op.take() else { continue };
            let skip = a.span.map_or(0, |p| p.done);
            // A span's last request, once finished, is `MPI_REQUEST_NULL`: nothing to settle.
            let last = !a.span.is_some_and(|p| p.last.is_some());
            let mut done = true;
            for req in s.rest[skip..].iter_mut().chain(last.then_some(&mut a.req)) {
                done &= settle(req, a.op.kind, deadline);
            }
            if !done {
                sys::leak(std::mem::take(&mut a.buf));
            }
        }
        free_comm(self.data);
        free_comm(self.ctrl);
    }
}

impl Endpoint for MpiEndpoint {
    commbench_core::endpoint_identity! {
        backend: "mpi", rank: rank, size: size, timeout: timeout
    }

    fn isend(&mut self, dest: Rank, tag: Tag, mut buf: Vec<u8>) -> Result<ReqId> {
        let (req, op) = self.post_send(dest, tag, &mut buf)?;
        Ok(self.park(req, op, buf, false))
    }

    fn irecv(&mut self, src: Src, tag: TagSel, mut buf: Vec<u8>) -> Result<ReqId> {
        let (req, op) = self.post_recv(src, tag, &mut buf)?;
        Ok(self.park(req, op, buf, false))
    }

    /// Post a span of `buf` (`post_span`); all of it once is `isend`.
    fn isend_span(&mut self, dest: Rank, tag: Tag, buf: Vec<u8>, span: Span) -> Result<ReqId> {
        span.range(buf.len())?;
        if span.is_whole(buf.len()) {
            return self.isend(dest, tag, buf);
        }
        let (op, peer, t, comm) = self.send_op(dest, tag)?;
        self.post_span(op, buf, span, peer, t, comm)
    }

    /// Post a span of `buf` (`post_span`): `span.count` receives into the same
    /// bytes, which MPI matches in posting order; all of `buf` once is `irecv`.
    fn irecv_span(&mut self, src: Src, tag: TagSel, buf: Vec<u8>, span: Span) -> Result<ReqId> {
        span.range(buf.len())?;
        if span.is_whole(buf.len()) {
            return self.irecv(src, tag, buf);
        }
        let (op, s, t, comm) = self.recv_op(src, tag)?;
        self.post_span(op, buf, span, s, t, comm)
    }

    fn test(&mut self, req: ReqId) -> Result<Option<Completion>> {
        let i = self.slot_index(req)?;
        if self.slots[i].op.as_ref().is_some_and(|a| a.span.is_some()) {
            return self.test_span(i, req);
        }
        let mut st = sys::empty_status();
        let mut flag: c_int = 0;
        let rc = {
            let a = self.slots[i]
                .op
                .as_mut()
                .ok_or_else(|| unknown_request(req))?;
            // SAFETY: `a.req` is an active request whose buffer `a.buf` lives in the slab.
            unsafe { ffi::MPI_Test(&mut a.req, &mut flag, &mut st) }
        };
        if flag == 0 {
            if rc != sys::SUCCESS {
                // The request may still be active: keep it (and its buffer) as an orphan.
                if let Some(a) = self.slots[i].op.as_mut() {
                    a.orphan = true;
                }
                return Err(sys::mpi_error("MPI_Test", rc));
            }
            return Ok(None);
        }
        let a = self.release(i).ok_or_else(|| unknown_request(req))?;
        self.finish(rc, &st, a.op, a.buf).map(Some)
    }

    fn wait(&mut self, req: ReqId) -> Result<Completion> {
        // The clock is first read after 1024 tests: a request that is already done costs one.
        let mut start: Option<Instant> = None;
        let mut spins: u32 = 0;
        loop {
            if let Some(c) = self.test(req)? {
                return Ok(c);
            }
            spins = spins.wrapping_add(1);
            if spins % 1024 != 0 {
                continue;
            }
            let t0 = *start.get_or_insert_with(Instant::now);
            if t0.elapsed() > self.timeout {
                let i = self.slot_index(req)?;
                let op = self.slots[i]
                    .op
                    .as_ref()
                    .ok_or_else(|| unknown_request(req))?
                    .op;
                return Err(self.timeout_error(op));
            }
        }
    }

    /// The fast path of a blocking send: `MPI_Isend` on a request on the stack, then
    /// `MPI_Test` with `MPI_STATUS_IGNORE` until it completes (the clock first read after 1024
    /// tests, for the timeout). Only the request is built on the way; a bad argument or a
    /// failure is described out of line.
    #[inline]
    fn send(&mut self, dest: Rank, tag: Tag, mut buf: Vec<u8>) -> Result<Vec<u8>> {
        let (Some((comm, t, ctrl)), Ok(n), true) =
            (self.lane(tag), c_int::try_from(buf.len()), dest < self.size)
        else {
            return Err(self.send_error(dest, tag, &buf));
        };
        // `buf` stays in this frame until the request completes, or is parked with it (`abandon`).
        let (rc, mut req) = self
            .wire(&mut buf, n, dest as c_int, t, comm)
            .start(OpKind::Send);
        if rc != sys::SUCCESS {
            return Err(sys::mpi_error("MPI_Isend", rc));
        }
        match sys::spin(&mut req, sys::status_ignore(), self.timeout) {
            Spin::Done(rc) if rc == sys::SUCCESS => Ok(buf),
            Spin::Done(rc) => Err(sys::mpi_error("MPI_Isend", rc)),
            spin => {
                let op = Op {
                    kind: OpKind::Send,
                    peer: Some(dest),
                    tag: Some(tag),
                    ctrl,
                };
                Err(self.abandon(req, spin, op, buf))
            }
        }
    }

    /// The fast path of a blocking receive: `MPI_Irecv` on a request on the stack, then
    /// `MPI_Test` until it completes (the clock first read after 1024 tests).
    #[inline]
    fn recv(&mut self, src: Src, tag: TagSel, mut buf: Vec<u8>) -> Result<Completion> {
        let from = match src {
            Src::Any => Some(sys::any_source()),
            Src::Rank(r) => (r < self.size).then_some(r as c_int),
        };
        let lane = match tag {
            TagSel::Any => Some((self.data, sys::any_tag(), false)),
            TagSel::Tag(t) => self.lane(t),
        };
        let (Some(from), Some((comm, t, ctrl)), Ok(n)) = (from, lane, c_int::try_from(buf.len()))
        else {
            return Err(self.recv_error(src, tag, &buf));
        };
        // As in `send`: `buf` outlives the request or is parked with it.
        let (rc, mut req) = self.wire(&mut buf, n, from, t, comm).start(OpKind::Recv);
        if rc != sys::SUCCESS {
            return Err(sys::mpi_error("MPI_Irecv", rc));
        }
        let op = Op {
            kind: OpKind::Recv,
            peer: match src {
                Src::Any => None,
                Src::Rank(r) => Some(r),
            },
            tag: match tag {
                TagSel::Any => None,
                TagSel::Tag(t) => Some(t),
            },
            ctrl,
        };
        let mut st = sys::empty_status();
        match sys::spin(&mut req, &mut st, self.timeout) {
            Spin::Done(rc) => self.finish(rc, &st, op, buf),
            spin => Err(self.abandon(req, spin, op, buf)),
        }
    }

    /// The ping-pong loop natively: destination, tag and count checked once, then per message
    /// `MPI_Isend` or `MPI_Irecv` on a request on the stack and an `MPI_Test` spin (the clock
    /// first read after 1024 tests, so every wait keeps the timeout), with nothing built per
    /// message; a receive's status is read only when MPI reports an error.
    fn pingpong(
        &mut self,
        peer: Rank,
        tag: Tag,
        buf: &mut Vec<u8>,
        n: u64,
        role: Role,
    ) -> Result<()> {
        let (Some((comm, t, ctrl)), Ok(count), true) =
            (self.lane(tag), c_int::try_from(buf.len()), peer < self.size)
        else {
            // The error of the loop's first operation.
            return Err(match role {
                Role::Initiator => self.send_error(peer, tag, buf),
                Role::Echo => self.recv_error(Src::Rank(peer), TagSel::Tag(tag), buf),
            });
        };
        let wire = self.wire(buf, count, peer as c_int, t, comm);
        let cap = buf.len();
        self.pingpong_on(wire, cap, (peer, tag, ctrl), buf, n, role)
    }

    /// The native ping-pong loop of `pingpong` on the message at `span` of `buf` (its pointer
    /// at `span.start`, its count `span.len`), so that a message placed at an offset or an
    /// alignment is timed on the same path as a whole buffer. All of `buf` is `pingpong`; a
    /// span posted more than once runs the trait's loop of posted spans.
    fn pingpong_span(
        &mut self,
        peer: Rank,
        tag: Tag,
        buf: &mut Vec<u8>,
        span: Span,
        n: u64,
        role: Role,
    ) -> Result<()> {
        let range = span.range(buf.len())?;
        if span.is_whole(buf.len()) {
            return self.pingpong(peer, tag, buf, n, role);
        }
        if span.count != 1 {
            return pingpong_span_loop(self, peer, tag, buf, span, n, role);
        }
        let (Some((comm, t, ctrl)), Ok(count), true) =
            (self.lane(tag), c_int::try_from(span.len), peer < self.size)
        else {
            return Err(match role {
                Role::Initiator => self.send_error(peer, tag, &buf[range]),
                Role::Echo => self.recv_error(Src::Rank(peer), TagSel::Tag(tag), &buf[range]),
            });
        };
        let wire = self.wire(&mut buf[range], count, peer as c_int, t, comm);
        self.pingpong_on(wire, span.len, (peer, tag, ctrl), buf, n, role)
    }

    #[inline]
    fn now_ns(&mut self) -> u64 {
        match self.clock {
            // SAFETY: MPI_Wtime has no preconditions once MPI is initialised.
            MpiClock::Wtime => (unsafe { ffi::RSMPI_Wtime() } * 1e9) as u64,
            MpiClock::Monotonic => clock::monotonic_ns(),
        }
    }

    fn clock_name(&self) -> String {
        self.clock.name().to_string()
    }

    fn claimed_resolution_ns(&self) -> Option<f64> {
        match self.clock {
            // The seed found MPI_Wtick unreliable; it is recorded beside the measured value.
            // SAFETY: MPI_Wtick takes no arguments and may be called once MPI is initialised,
            // which an endpoint guarantees.
            MpiClock::Wtime => Some(unsafe { mpi::ffi::MPI_Wtick() } * 1e9),
            MpiClock::Monotonic => {
                commbench_core::transport::clock::monotonic_claimed_resolution_ns()
                    .map(|x| x as f64)
            }
        }
    }

    fn info(&self) -> BackendInfo {
        self.info.clone()
    }

    fn barrier(&mut self) -> Result<()> {
        let ctrl = self.ctrl;
        let mut req = sys::start("MPI_Ibarrier", |req| {
            // SAFETY: valid communicator; the request is waited for below.
            unsafe { ffi::MPI_Ibarrier(ctrl, req) }
        })?;
        sys::wait_collective(&mut req, self.rank, self.timeout, "MPI_Ibarrier")
    }

    fn barrier_first(&mut self, first: Rank) -> Result<()> {
        // Point-to-point on the control communicator (tags from TAG_UB up route there).
        commbench_core::transport::control::barrier_first(self, first)
    }

    fn broadcast(&mut self, root: Rank, data: &mut Vec<u8>) -> Result<()> {
        check_rank("root", root, self.size)?;
        let mut len = (data.len() as u64).to_le_bytes().to_vec();
        let mut req = self.start_bcast(root, &mut len, 8)?;
        let len = sys::wait_keeping(
            &mut req,
            self.rank,
            self.timeout,
            "MPI_Ibcast (length)",
            len,
        )?;
        let n = u64::from_le_bytes(len[..8].try_into().unwrap_or([0; 8]));
        let n = usize::try_from(n)
            .ok()
            .filter(|&n| n <= 1 << 40)
            .ok_or_else(|| Error::Protocol(format!("broadcast of {n} bytes")))?;
        if self.rank != root {
            data.clear();
            data.resize(n, 0);
        }
        if n == 0 {
            return Ok(());
        }
        let c = sys::count(n, "a broadcast")?;
        let mut buf = std::mem::take(data);
        let mut req = match self.start_bcast(root, &mut buf, c) {
            Ok(req) => req,
            Err(e) => {
                *data = buf;
                return Err(e);
            }
        };
        *data = sys::wait_keeping(&mut req, self.rank, self.timeout, "MPI_Ibcast", buf)?;
        Ok(())
    }

    fn gather(&mut self, root: Rank, data: &[u8]) -> Result<Option<Vec<Vec<u8>>>> {
        check_rank("root", root, self.size)?;
        sys::collect_bytes(
            self.ctrl,
            self.rank,
            self.size,
            self.timeout,
            Some(root),
            data,
        )
    }
}
