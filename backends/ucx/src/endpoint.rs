//! [`UcxEndpoint`]: the commbench data plane on UCP's tag API.
//!
//! Sends go with `ucp_tag_send_nbx`, receives with `ucp_tag_recv_nbx`, neither with a
//! callback: an operation that finishes in the call is done at once (a receive's length and
//! sender come back through `recv_info`), one that does not leaves a request that waits poll
//! with `ucp_worker_progress` and `ucp_request_check_status` / `ucp_tag_recv_request_test`,
//! then free. Every operation owns a slot holding the caller's buffer until UCX is done with
//! it. A [`Span`] posted `count` times is `count` sends or receives of the one buffer in one
//! slot, which keeps the requests of those not finished in the call and is done when all are.
//! Tags carry the sender's rank in their upper 32 bits and commbench's tag in the lower 32, so
//! that UCX matches source and tag and a wildcard is a mask.

use crate::proto::Peer;
use crate::sys::{self, backend_error, decode, ffi, Posted};
use crate::worker::Worker;
use crate::UcxConfig;
use commbench_core::launch::affinity;
use commbench_core::transport::clock::SpinTimer;
use commbench_core::transport::error::Forgotten;
use commbench_core::transport::slots::{timeout_awaiting, SlotState as State, Slots};
use commbench_core::transport::{pingpong_span_loop, BackendInfo, OpKind, Span, TAG_UB};
use commbench_core::transport::{select64, tag64 as wire_tag};
use commbench_core::{Completion, Endpoint, Error, Rank, ReqId, Result, Role, Src, Tag, TagSel};
use std::collections::BTreeMap;
use std::os::raw::c_void;
use std::ptr;
use std::time::Duration;

/// The control tag of the wire-up handshake ([`UcxEndpoint::handshake`]), above the core's
/// control tags.
const TAG_HANDSHAKE: Tag = TAG_UB + 64;

/// The largest rendezvous message the handshake sends to wire the rendezvous protocol up.
const MAX_HANDSHAKE_BYTES: usize = 16 << 20;

/// The tag and mask a receive selects with (UCX matches when `(sender_tag ^ tag) & mask` is
/// 0): the mask is the complement of the ignore mask of [`select64`].
#[inline(always)]
fn select(src: Src, tag: TagSel) -> (u64, u64) {
    let (t, ignore) = select64(src, tag);
    (t, !ignore)
}

/// What a slot keeps beside its operation.
#[derive(Debug)]
struct Reqs {
    /// UCX's request while the operation is in progress, null once it is done, when it
    /// finished in the call, or when the slot holds a span posted several times.
    req: *mut c_void,
    /// A span posted several times: its requests and how its operations ended.
    span: Option<Box<SpanReqs>>,
}

/// The operations of a span posted several times on one slot's buffer.
#[derive(Debug)]
struct SpanReqs {
    /// The requests of the operations still in progress, with each one's index.
    reqs: Vec<(u32, *mut c_void)>,
    /// The index of the last operation posted, whose envelope a receive reports.
    last: u32,
    /// The first failure's status, else `UCS_OK`.
    st: ffi::ucs_status_t,
    /// The first failure's sender and length, else the last operation's.
    info: ffi::ucp_tag_recv_info_t,
    /// The requests were given up when the endpoints closed: the slot never finishes.
    given_up: bool,
}

impl SpanReqs {
    /// Operation `sub` ended with status `st` (a receive's sender and length in `info`).
    fn ended(&mut self, sub: u32, st: ffi::ucs_status_t, info: &ffi::ucp_tag_recv_info_t) {
        if self.st != ffi::UCS_OK {
            return;
        }
        if st != ffi::UCS_OK {
            self.st = st;
            self.info = *info;
        } else if sub == self.last {
            self.info = *info;
        }
    }
}

/// One rank's UCX endpoint. Created by the launch functions ([`crate::run_threads`],
/// [`crate::run_rank_over`]), which exchange the worker addresses and close it cleanly.
pub struct UcxEndpoint {
    rank: Rank,
    size: u32,
    cfg: UcxConfig,
    w: Worker,
    /// The outstanding operations, with UCX's requests ([`Reqs`]).
    slots: Slots<Reqs>,
    /// Buffers of a failed ping-pong loop: a request given up may still read or write them
    /// until the worker is destroyed.
    orphans: Vec<Vec<u8>>,
    /// What UCX says of the endpoint to each rank (lanes, protocol thresholds).
    peers: Vec<Peer>,
    /// User-tag message sizes this rank sent, and the protocol UCX chose for each.
    sent: BTreeMap<usize, &'static str>,
    last_sent: usize,
    pinned: Option<usize>,
    affinity: Vec<usize>,
    /// Operation attributes of receives that need their sender and length:
    /// `UCP_OP_ATTR_FLAG_NO_IMM_CMPL` where UCX would not say them on immediate completion.
    recv_flags: u32,
    /// The ranks the program gave up on ([`Endpoint::forget`]), in the order it did: nothing
    /// more goes to them or is awaited from them by name, their endpoints close without a
    /// flush, and the end of the run meets the others only.
    gone: Forgotten,
}

impl std::fmt::Debug for UcxEndpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UcxEndpoint")
            .field("rank", &self.rank)
            .field("size", &self.size)
            .field("tls", &self.cfg.tls)
            .finish_non_exhaustive()
    }
}

impl Drop for UcxEndpoint {
    fn drop(&mut self) {
        // Requests still outstanding are given up; then the worker is destroyed, after which
        // UCX touches no buffer, and only then are the slots' buffers (fields, dropped after
        // this) freed.
        self.abandon_requests();
        self.w.close(self.cfg.timeout.min(Duration::from_secs(10)));
        // A peer (a thread of this process, or another process through cma) that has not
        // destroyed its worker yet may still write into the buffer of a receive given up (a
        // slot still posted; rendezvous put): those buffers are leaked, never handed back to
        // the allocator. Only a failed run has any.
        for i in 0..self.slots.len() {
            if self.slots[i].state == State::Posted {
                std::mem::forget(std::mem::take(&mut self.slots[i].buf));
            }
        }
        for b in std::mem::take(&mut self.orphans) {
            std::mem::forget(b);
        }
    }
}

impl UcxEndpoint {
    /// Open this rank's worker; the caller then exchanges [`UcxEndpoint::address`]es and calls
    /// [`UcxEndpoint::connect`].
    pub(crate) fn open(rank: Rank, size: u32, cfg: &UcxConfig) -> Result<Self> {
        let cpu = affinity::cpu_for(&cfg.cpus, rank);
        let affinity = affinity::pin(cpu)?;
        let w = Worker::open(cfg.tls.as_deref())?;
        Ok(UcxEndpoint {
            rank,
            size,
            cfg: cfg.clone(),
            w,
            slots: Slots::new("ucx"),
            orphans: Vec::new(),
            peers: Vec::new(),
            sent: BTreeMap::new(),
            last_sent: usize::MAX,
            pinned: cpu,
            affinity,
            recv_flags: if sys::immediate_recv_info() {
                0
            } else {
                ffi::UCP_OP_ATTR_FLAG_NO_IMM_CMPL
            },
            gone: Forgotten::default(),
        })
    }

    /// Give up every request still outstanding (receives cancelled), then close the
    /// endpoints while the peers close theirs, in flush mode (those to the ranks gone without
    /// one): whether all closed within the timeout. The launch functions call it after a
    /// barrier.
    pub(crate) fn close_endpoints(&mut self) -> bool {
        self.abandon_requests();
        self.w.close_endpoints(self.cfg.timeout, self.gone.ranks())
    }

    /// The ranks the program gave up on, in the order it did.
    pub(crate) fn gone(&self) -> &[Rank] {
        self.gone.ranks()
    }

    /// Cancel the receives still posted and free every request still held. The slots given
    /// up stay posted with no request ([`UcxEndpoint::poll`] never finishes them); UCX may
    /// still touch their buffers.
    fn abandon_requests(&mut self) {
        for i in 0..self.slots.len() {
            let kind = self.slots[i].kind;
            let req = std::mem::replace(&mut self.slots[i].extra.req, ptr::null_mut());
            if !req.is_null() {
                self.abandon(req, kind);
            }
            let reqs = match self.slots[i].extra.span.as_mut() {
                Some(m) => {
                    m.given_up = true;
                    std::mem::take(&mut m.reqs)
                }
                None => Vec::new(),
            };
            for (_, req) in reqs {
                self.abandon(req, kind);
            }
        }
    }

    /// This rank's worker address, to give the other ranks.
    pub(crate) fn address(&self) -> Result<Vec<u8>> {
        self.w.address()
    }

    /// An endpoint to every rank (addresses in rank order), then the worker flushed so that
    /// wire-up is over before anything is timed.
    pub(crate) fn connect(&mut self, names: &[Vec<u8>]) -> Result<()> {
        if names.len() != self.size as usize {
            return Err(Error::Protocol(format!(
                "{} addresses for {} ranks",
                names.len(),
                self.size
            )));
        }
        self.w.connect(names)?;
        self.w.flush(self.cfg.timeout)?;
        self.peers = (0..names.len())
            .map(|r| {
                let p = Peer::parse(&self.w.ep_text(r));
                if crate::proto::proto_v2_enabled() {
                    p.without_thresholds()
                } else {
                    p
                }
            })
            .collect();
        Ok(())
    }

    /// Finish wire-up with every other rank before anything is timed: an empty message each
    /// way, then one of the rendezvous size, so that every connection is accepted on both sides
    /// (the tcp transport counts a connection only once the accepting side has progressed) and
    /// every endpoint has resolved its peer for the rendezvous protocol, which a worker flush
    /// alone leaves to the first large send. Waits progress the worker and keep the timeout.
    pub(crate) fn handshake(&mut self) -> Result<()> {
        let rndv = self
            .peers
            .iter()
            .enumerate()
            .filter(|&(r, _)| r != self.rank as usize)
            .filter_map(|(_, p)| p.rndv_from())
            .max();
        let mut sizes = vec![0usize];
        if let Some(n) = rndv.filter(|&n| n > 0 && n <= MAX_HANDSHAKE_BYTES) {
            sizes.push(n);
        }
        let me = self.rank;
        let others: Vec<Rank> = (0..self.size).filter(|&r| r != me).collect();
        for len in sizes {
            let mut reqs = Vec::new();
            for &r in &others {
                reqs.push(self.irecv(Src::Rank(r), TagSel::Tag(TAG_HANDSHAKE), vec![0; len])?);
            }
            for &r in &others {
                reqs.push(self.isend(r, TAG_HANDSHAKE, vec![0; len])?);
            }
            for req in reqs {
                self.wait(req)?;
            }
        }
        Ok(())
    }

    fn check_peer(&self, r: Rank, what: &str) -> Result<()> {
        self.gone.check(what, r, self.size)
    }

    /// A receive's source and tag for its slot (the source checked), and the operation
    /// attributes to post it with.
    #[inline(always)]
    fn recv_target(&self, src: Src, tag: TagSel) -> Result<(Option<Rank>, Tag, u32)> {
        if let Src::Rank(r) = src {
            self.check_peer(r, "receive from")?;
        }
        let peer = match src {
            Src::Any => None,
            Src::Rank(r) => Some(r),
        };
        let t = match tag {
            TagSel::Tag(t) => t,
            TagSel::Any => 0,
        };
        // A wildcard receive that fails in the call (truncated) would not say its sender or
        // tag: it always takes a request.
        let flags = if peer.is_none() || tag == TagSel::Any {
            ffi::UCP_OP_ATTR_FLAG_NO_IMM_CMPL
        } else {
            self.recv_flags
        };
        Ok((peer, t, flags))
    }

    /// A free slot for an operation, with its buffer.
    fn take_slot(&mut self, kind: OpKind, peer: Option<Rank>, tag: Tag, buf: Vec<u8>) -> usize {
        let i = self.slots.take(kind, peer, tag, buf, |_| Reqs {
            req: ptr::null_mut(),
            span: None,
        });
        let x = &mut self.slots[i].extra;
        x.req = ptr::null_mut();
        x.span = None;
        i
    }

    /// Whether slot `i` is done, its request's status read (and the request freed) when UCX
    /// has finished it.
    #[inline(always)]
    fn poll(&mut self, i: usize) -> bool {
        let s = &mut self.slots[i];
        if s.state != State::Posted {
            return true;
        }
        if s.extra.span.is_some() {
            return self.poll_span(i);
        }
        if s.extra.req.is_null() {
            // Given up when the endpoints closed: it never finishes.
            return false;
        }
        let mut info = ffi::ucp_tag_recv_info_t::default();
        let st = test_request(s.extra.req, s.kind, &mut info);
        if st == ffi::UCS_INPROGRESS {
            return false;
        }
        // SAFETY: finished, freed once; the slot forgets it.
        unsafe { ffi::ucp_request_free(s.extra.req) };
        s.extra.req = ptr::null_mut();
        self.finish(i, st, &info);
        true
    }

    /// [`UcxEndpoint::poll`] of slot `i`, which holds a span posted several times: its
    /// finished requests read and freed, the slot done once none is left.
    fn poll_span(&mut self, i: usize) -> bool {
        let s = &mut self.slots[i];
        let kind = s.kind;
        let Some(m) = s.extra.span.as_mut() else {
            return true;
        };
        if m.given_up {
            // Given up when the endpoints closed: it never finishes.
            return false;
        }
        let mut reqs = std::mem::take(&mut m.reqs);
        reqs.retain(|&(sub, req)| {
            let mut info = ffi::ucp_tag_recv_info_t::default();
            let st = test_request(req, kind, &mut info);
            if st == ffi::UCS_INPROGRESS {
                return true;
            }
            // SAFETY: finished, freed once; the span forgets it.
            unsafe { ffi::ucp_request_free(req) };
            m.ended(sub, st, &info);
            false
        });
        m.reqs = reqs;
        if !m.reqs.is_empty() {
            return false;
        }
        let (st, info) = (m.st, m.info);
        s.extra.span = None;
        self.finish(i, st, &info);
        true
    }

    /// Post slot `i`'s `span.count` operations on the bytes at `start` of its buffer, in
    /// order, with `post(self, pointer, info)` (a send or a receive of `span.len` bytes). An
    /// operation that fails in the call is one that ended: the slot completes with the first
    /// failure once all have ended, except a send that ended at once with nothing else under
    /// way, which is refused as [`Endpoint::isend`] refuses it.
    fn post_span(
        &mut self,
        i: usize,
        span: Span,
        start: usize,
        post: impl Fn(&mut Self, *mut u8, &mut ffi::ucp_tag_recv_info_t) -> Posted,
    ) -> Result<ReqId> {
        let s = &mut self.slots[i];
        s.cap = span.len;
        let kind = s.kind;
        // SAFETY: `start` lies in the buffer (Span::range checked it before the slot took it).
        let p = unsafe { s.buf.as_mut_ptr().add(start) };
        let mut m = SpanReqs {
            reqs: Vec::new(),
            last: span.count - 1,
            st: ffi::UCS_OK,
            info: ffi::ucp_tag_recv_info_t::default(),
            given_up: false,
        };
        for sub in 0..span.count {
            let mut info = ffi::ucp_tag_recv_info_t::default();
            match post(self, p, &mut info) {
                Posted::Done => m.ended(sub, ffi::UCS_OK, &info),
                Posted::Pending(req) => m.reqs.push((sub, req)),
                Posted::Failed(st) => m.ended(sub, st, &info),
            }
        }
        if m.reqs.is_empty() {
            if kind == OpKind::Send && m.st != ffi::UCS_OK {
                let s = &self.slots[i];
                let e = op_error(m.st, kind, s.peer, s.tag, span.len, &m.info);
                self.slots.release(i);
                return Err(e);
            }
            self.finish(i, m.st, &m.info);
        } else if span.count == 1 {
            self.slots[i].extra.req = m.reqs[0].1;
        } else {
            self.slots[i].extra.span = Some(Box::new(m));
        }
        Ok(self.slots.req_of(i))
    }

    /// Slot `i` is done with status `st` (a receive's sender and length in `info`).
    fn finish(&mut self, i: usize, st: ffi::ucs_status_t, info: &ffi::ucp_tag_recv_info_t) {
        let err = (st != ffi::UCS_OK).then(|| {
            let s = &self.slots[i];
            op_error(st, s.kind, s.peer, s.tag, s.cap, info)
        });
        let s = &mut self.slots[i];
        s.state = State::Done;
        s.err = err;
        if s.kind == OpKind::Recv && s.err.is_none() {
            s.len = info.length;
            s.peer = Some((info.sender_tag >> 32) as Rank);
            s.tag = info.sender_tag as Tag;
        }
    }

    /// One turn of the worker's progress engine.
    #[inline(always)]
    fn progress(&mut self) {
        // SAFETY: the worker is live and used by this thread only.
        unsafe { ffi::ucp_worker_progress(self.w.worker) };
    }

    /// The completion of slot `i` if it is done (its slot given back), else `None`.
    #[inline(always)]
    fn take_done(&mut self, i: usize) -> Result<Option<Completion>> {
        if !self.poll(i) {
            return Ok(None);
        }
        self.slots.complete(i).map(Some)
    }

    /// Note the size of a user-tag send and the protocol UCX uses for it (once per change of
    /// size, so a loop of one size pays one comparison).
    #[inline(always)]
    fn note_sent(&mut self, dest: Rank, tag: Tag, len: usize) {
        if tag < TAG_UB && len != self.last_sent {
            self.last_sent = len;
            let proto = self
                .peers
                .get(dest as usize)
                .map_or("unknown", |p| p.protocol(len));
            self.sent.insert(len, proto);
        }
    }

    /// `ucp_tag_send_nbx` of `len` bytes at `p` to `dest`.
    #[inline(always)]
    fn post_send(&mut self, dest: Rank, tag: Tag, p: *const u8, len: usize) -> Posted {
        let param = ffi::ucp_request_param_t {
            op_attr_mask: ffi::UCP_OP_ATTR_FIELD_DATATYPE,
            datatype: sys::DT_BYTES,
            ..Default::default()
        };
        let ep = self.w.eps[dest as usize];
        // SAFETY: `ep` is a live endpoint; the caller keeps `len` bytes at `p` alive and
        // unmodified until the send is done (in the call, or when its request finishes).
        let r = unsafe {
            ffi::ucp_tag_send_nbx(
                ep,
                p as *const c_void,
                len,
                wire_tag(self.rank, tag),
                &param,
            )
        };
        self.note_sent(dest, tag, len);
        decode(r)
    }

    /// `ucp_tag_recv_nbx` of at most `len` bytes into `p` with operation attributes `flags`
    /// (beside the datatype and `recv_info`); a receive that finished in the call has its
    /// sender and length in `info` where UCX fills it ([`sys::immediate_recv_info`]).
    #[inline(always)]
    fn post_recv(
        &mut self,
        p: *mut u8,
        len: usize,
        (wt, mask): (u64, u64),
        flags: u32,
        info: &mut ffi::ucp_tag_recv_info_t,
    ) -> Posted {
        let mut param = ffi::ucp_request_param_t {
            op_attr_mask: ffi::UCP_OP_ATTR_FIELD_DATATYPE
                | ffi::UCP_OP_ATTR_FIELD_RECV_INFO
                | flags,
            datatype: sys::DT_BYTES,
            ..Default::default()
        };
        param.recv_info.tag_info = info;
        // SAFETY: the worker is live; the caller keeps `len` writable bytes at `p` alive
        // until the receive is done (in the call, or when its request finishes); `info` is
        // written only during the call.
        let r = unsafe {
            ffi::ucp_tag_recv_nbx(self.w.worker, p as *mut c_void, len, wt, mask, &param)
        };
        decode(r)
    }

    /// Wait for request `req` (of a send or a receive into `len` bytes) to finish, at most
    /// the timeout; the request is freed either way. A receive that did not finish is
    /// cancelled.
    #[inline(always)]
    fn wait_request(
        &mut self,
        req: *mut c_void,
        kind: OpKind,
        peer: Rank,
        tag: Tag,
        len: usize,
    ) -> Result<()> {
        let mut timer = SpinTimer::new();
        let mut info = ffi::ucp_tag_recv_info_t::default();
        loop {
            self.progress();
            let st = test_request(req, kind, &mut info);
            if st != ffi::UCS_INPROGRESS {
                // SAFETY: finished, freed once.
                unsafe { ffi::ucp_request_free(req) };
                return match st {
                    ffi::UCS_OK => Ok(()),
                    st => Err(op_error(st, kind, Some(peer), tag, len, &info)),
                };
            }
            if timer.expired(self.cfg.timeout) {
                self.abandon(req, kind);
                let what = format!("{len} bytes, tag {tag}");
                return Err(timeout_awaiting(
                    self.rank,
                    kind,
                    Some(peer),
                    &what,
                    self.cfg.timeout,
                ));
            }
        }
    }

    /// Give up on request `req`: a receive is cancelled; the request is freed (UCX releases
    /// it when it finishes).
    fn abandon(&mut self, req: *mut c_void, kind: OpKind) {
        if kind == OpKind::Recv {
            // SAFETY: the worker is live; `req` is its request, not yet freed.
            unsafe { ffi::ucp_request_cancel(self.w.worker, req) };
            self.progress();
        }
        // SAFETY: freed once.
        unsafe { ffi::ucp_request_free(req) };
    }

    pub(crate) fn cfg(&self) -> &UcxConfig {
        &self.cfg
    }
    pub(crate) fn peers(&self) -> &[Peer] {
        &self.peers
    }
    pub(crate) fn sent(&self) -> &BTreeMap<usize, &'static str> {
        &self.sent
    }
    pub(crate) fn pinning(&self) -> (Option<usize>, &[usize]) {
        (self.pinned, &self.affinity)
    }
    pub(crate) fn immediate_receives(&self) -> bool {
        self.recv_flags == 0
    }
    pub(crate) fn worker(&self) -> &Worker {
        &self.w
    }
}

/// The status of request `req` (a send's, or a receive's whose sender and length it writes in
/// `info` once finished); `UCS_INPROGRESS` while it is not.
#[inline(always)]
fn test_request(
    req: *mut c_void,
    kind: OpKind,
    info: &mut ffi::ucp_tag_recv_info_t,
) -> ffi::ucs_status_t {
    // SAFETY: callers pass a live request of their worker (not yet freed), a receive's when
    // `kind` is Recv, for ucp_tag_recv_request_test, which writes `info`.
    unsafe {
        if kind == OpKind::Recv {
            ffi::ucp_tag_recv_request_test(req, info)
        } else {
            ffi::ucp_request_check_status(req)
        }
    }
}

/// The error of an operation that finished with status `st`.
fn op_error(
    st: ffi::ucs_status_t,
    kind: OpKind,
    peer: Option<Rank>,
    tag: Tag,
    cap: usize,
    info: &ffi::ucp_tag_recv_info_t,
) -> Error {
    if st == ffi::UCS_ERR_MESSAGE_TRUNCATED && kind == OpKind::Recv {
        return Error::Truncated {
            // UCX reports the sender's length for some protocols only; 0 says unknown.
            len: if info.length > cap { info.length } else { 0 },
            cap,
            source_rank: peer.unwrap_or((info.sender_tag >> 32) as Rank),
            tag: if info.sender_tag != 0 {
                info.sender_tag as Tag
            } else {
                tag
            },
        };
    }
    let text = sys::status_text(st);
    if let (true, Some(p)) = (sys::is_peer_failure(st), peer) {
        return Error::PeerLost {
            peer: p,
            detail: text,
        };
    }
    backend_error(format!(
        "{} of {cap} bytes {}: {text}",
        if kind == OpKind::Send {
            "a send"
        } else {
            "a receive"
        },
        match (kind, peer) {
            (OpKind::Send, Some(p)) => format!("to rank {p}"),
            (_, Some(p)) => format!("from rank {p}"),
            _ => "from any rank".into(),
        }
    ))
}

impl Endpoint for UcxEndpoint {
    commbench_core::endpoint_identity! {
        backend: "ucx", rank: rank, size: size, timeout: cfg.timeout
    }

    /// Nothing more is sent to `peer` or received from it by name; a receive from any rank
    /// still takes what it sent before.
    fn forget(&mut self, peer: Rank) {
        self.gone.forget(peer, self.rank, self.size);
    }

    fn isend(&mut self, dest: Rank, tag: Tag, buf: Vec<u8>) -> Result<ReqId> {
        self.check_peer(dest, "send to")?;
        let i = self.take_slot(OpKind::Send, Some(dest), tag, buf);
        let (p, len) = (self.slots[i].buf.as_ptr(), self.slots[i].buf.len());
        match self.post_send(dest, tag, p, len) {
            Posted::Done => self.slots[i].state = State::Done,
            Posted::Pending(req) => self.slots[i].extra.req = req,
            Posted::Failed(st) => {
                let info = ffi::ucp_tag_recv_info_t::default();
                self.slots.release(i);
                return Err(op_error(st, OpKind::Send, Some(dest), tag, len, &info));
            }
        }
        Ok(self.slots.req_of(i))
    }

    fn irecv(&mut self, src: Src, tag: TagSel, buf: Vec<u8>) -> Result<ReqId> {
        let (peer, t, flags) = self.recv_target(src, tag)?;
        let i = self.take_slot(OpKind::Recv, peer, t, buf);
        let (p, len) = (self.slots[i].buf.as_mut_ptr(), self.slots[i].buf.len());
        let mut info = ffi::ucp_tag_recv_info_t::default();
        let posted = self.post_recv(p, len, select(src, tag), flags, &mut info);
        match posted {
            Posted::Done => self.finish(i, ffi::UCS_OK, &info),
            Posted::Pending(req) => self.slots[i].extra.req = req,
            Posted::Failed(st) => self.finish(i, st, &info),
        }
        Ok(self.slots.req_of(i))
    }

    #[inline]
    fn test(&mut self, req: ReqId) -> Result<Option<Completion>> {
        let i = self.slots.index_of(req)?;
        if self.slots[i].state == State::Posted {
            self.progress();
        }
        self.take_done(i)
    }

    #[inline]
    fn wait(&mut self, req: ReqId) -> Result<Completion> {
        let i = self.slots.index_of(req)?;
        let mut timer = SpinTimer::new();
        loop {
            if let Some(c) = self.take_done(i)? {
                return Ok(c);
            }
            self.progress();
            if timer.expired(self.cfg.timeout) {
                let what = format!("request {}", req.0);
                return Err(self
                    .slots
                    .timeout_error(self.rank, i, &what, self.cfg.timeout));
            }
        }
    }

    /// The loop ucx_perftest's tag_lat runs (`run_pingpong` in its `ucp_tests.cc`), straight
    /// from `buf` (no slot, no buffer moved): send and wait, then post the receive and wait.
    /// The initiator posts its receive after its send, as ucx_perftest does: posted first, it
    /// would delay the send by the post, and the reply still finds it posted.
    /// Should the loop fail, the endpoint keeps `buf` until the worker is destroyed (the caller
    /// gets an empty one): a request given up may still be reading or writing it.
    fn pingpong(
        &mut self,
        peer: Rank,
        tag: Tag,
        buf: &mut Vec<u8>,
        n: u64,
        role: Role,
    ) -> Result<()> {
        self.check_peer(peer, "ping-pong with")?;
        for _ in 0..n {
            if let Err(e) = self.round_trip(peer, tag, buf, role) {
                self.orphans.push(std::mem::take(buf));
                return Err(e);
            }
        }
        Ok(())
    }

    /// `span.count` sends of the span's bytes from one slot.
    fn isend_span(&mut self, dest: Rank, tag: Tag, buf: Vec<u8>, span: Span) -> Result<ReqId> {
        let range = span.range(buf.len())?;
        if span.is_whole(buf.len()) {
            return self.isend(dest, tag, buf);
        }
        self.check_peer(dest, "send to")?;
        let i = self.take_slot(OpKind::Send, Some(dest), tag, buf);
        let len = span.len;
        self.post_span(i, span, range.start, |me, p, _| {
            me.post_send(dest, tag, p, len)
        })
    }

    /// `span.count` receives into the span's bytes from one slot, posted in order.
    fn irecv_span(&mut self, src: Src, tag: TagSel, buf: Vec<u8>, span: Span) -> Result<ReqId> {
        let range = span.range(buf.len())?;
        if span.is_whole(buf.len()) {
            return self.irecv(src, tag, buf);
        }
        let (peer, t, flags) = self.recv_target(src, tag)?;
        let i = self.take_slot(OpKind::Recv, peer, t, buf);
        let (len, sel) = (span.len, select(src, tag));
        self.post_span(i, span, range.start, |me, p, info| {
            me.post_recv(p, len, sel, flags, info)
        })
    }

    /// [`Endpoint::pingpong`]'s loop on the bytes at `span` of `buf` (`span.count` 1; several
    /// take the loop of [`Endpoint::isend_span`] and [`Endpoint::irecv_span`]).
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
        self.check_peer(peer, "ping-pong with")?;
        for _ in 0..n {
            if let Err(e) = self.round_trip(peer, tag, &mut buf[range.clone()], role) {
                self.orphans.push(std::mem::take(buf));
                return Err(e);
            }
        }
        Ok(())
    }

    fn info(&self) -> BackendInfo {
        crate::info::describe(self)
    }
}

impl UcxEndpoint {
    /// One round trip of [`Endpoint::pingpong`]'s loop. On an error a request may still hold
    /// `buf` (given up, not finished): the caller must keep it alive.
    #[inline(always)]
    fn round_trip(&mut self, peer: Rank, tag: Tag, buf: &mut [u8], role: Role) -> Result<()> {
        let (p, len) = (buf.as_mut_ptr(), buf.len());
        if role == Role::Initiator {
            self.send_now(peer, tag, p, len)?;
        }
        let mut info = ffi::ucp_tag_recv_info_t::default();
        let sel = (wire_tag(peer, tag), u64::MAX);
        match self.post_recv(p, len, sel, self.recv_flags, &mut info) {
            Posted::Done => {}
            Posted::Failed(st) => {
                return Err(op_error(st, OpKind::Recv, Some(peer), tag, len, &info))
            }
            Posted::Pending(req) => self.wait_request(req, OpKind::Recv, peer, tag, len)?,
        }
        if role == Role::Echo {
            self.send_now(peer, tag, p, len)?;
        }
        Ok(())
    }

    /// Send `len` bytes at `p` and wait until the send is done.
    #[inline(always)]
    fn send_now(&mut self, dest: Rank, tag: Tag, p: *const u8, len: usize) -> Result<()> {
        let info = ffi::ucp_tag_recv_info_t::default();
        match self.post_send(dest, tag, p, len) {
            Posted::Done => Ok(()),
            Posted::Pending(req) => self.wait_request(req, OpKind::Send, dest, tag, len),
            Posted::Failed(st) => Err(op_error(st, OpKind::Send, Some(dest), tag, len, &info)),
        }
    }

    /// How long waits last.
    pub fn timeout(&self) -> Duration {
        self.cfg.timeout
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wildcards_never_match_control_tags() {
        let matches = |t: u64, (want, mask): (u64, u64)| t & mask == want & mask;
        let any = select(Src::Any, TagSel::Any);
        for (rank, tag) in [(0u32, 0u32), (3, 7), (u32::MAX, TAG_UB - 1)] {
            assert!(matches(wire_tag(rank, tag), any));
        }
        for tag in [TAG_UB, TAG_UB + 1, TAG_UB + 4, u32::MAX] {
            assert!(!matches(wire_tag(2, tag), any), "tag {tag}");
        }
        let one = select(Src::Rank(5), TagSel::Tag(9));
        assert_eq!(one, (wire_tag(5, 9), u64::MAX));
        let any_tag = select(Src::Rank(5), TagSel::Any);
        assert!(matches(wire_tag(5, 123), any_tag));
        assert!(!matches(wire_tag(4, 123), any_tag));
        let any_src = select(Src::Any, TagSel::Tag(9));
        assert!(matches(wire_tag(7, 9), any_src));
        assert!(!matches(wire_tag(7, 8), any_src));
    }
}
