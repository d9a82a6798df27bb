//! [`OfiEndpoint`]: the commbench data plane on a tagged FI_EP_RDM endpoint.
//!
//! Every operation owns a slot: its `fi_context2` (boxed, so its address is fixed while the
//! provider holds it), the buffer moved in by the caller, and the state the completion queue
//! sets. A [`Span`] posted `count` times is `count` `fi_tsend`s or `fi_trecv`s of the one
//! buffer, each with a context of its own, in one slot that is done when all have completed.
//! Tags carry the sender's rank in their upper 32 bits and commbench's tag in the lower 32, so
//! that the provider matches source and tag and a wildcard is an ignore mask.

use crate::fabric::{close_mr, Attrs, Fabric};
use crate::sys::{self, backend_error, ffi, EAGAIN, EAVAIL};
use crate::OfiConfig;
use commbench_core::launch::affinity;
use commbench_core::transport::clock::SpinTimer;
use commbench_core::transport::error::Forgotten;
use commbench_core::transport::slots::{SlotState as State, Slots};
use commbench_core::transport::{pingpong_span_loop, BackendInfo, OpKind, Span, TAG_UB};
use commbench_core::transport::{select64 as select, tag64 as wire_tag};
use commbench_core::{Completion, Endpoint, Error, Rank, ReqId, Result, Role, Src, Tag, TagSel};
use std::collections::BTreeMap;
use std::mem::MaybeUninit;
use std::os::raw::c_void;
use std::ptr;
use std::time::Duration;

/// Completions read from the queue per `fi_cq_read`.
const CQ_BATCH: usize = 16;
/// Memory registrations kept for reuse (only when the provider asks for `FI_MR_LOCAL`).
const MR_CACHE: usize = 64;
/// What the provider holds while an operation is outstanding: its context (the first field,
/// so the context pointer is this struct's), the slot it belongs to and which of the slot's
/// operations it is (0, or 1.. for the further posts of a [`Span`]).
#[repr(C)]
struct OpCtx {
    fi: ffi::fi_context2,
    slot: usize,
    sub: u32,
}

impl OpCtx {
    /// A context for operation `sub` of slot `slot`, boxed (its address fixed) and leaked:
    /// the endpoint's `Drop` frees it.
    fn leak(slot: usize, sub: u32) -> *mut OpCtx {
        Box::into_raw(Box::new(OpCtx {
            fi: ffi::fi_context2::default(),
            slot,
            sub,
        }))
    }
}

/// What an ofi slot keeps beside the operation ([`Slots`]).
struct Extra {
    /// From `Box::into_raw`, freed by the endpoint's `Drop` once the endpoint is closed: the
    /// provider may write its `fi` while the operation is outstanding.
    ctx: *mut OpCtx,
    /// The contexts of operations 1.. of a span posted several times, made on first use and
    /// kept with the slot (freed like `ctx`).
    more: Vec<*mut OpCtx>,
    /// The cached registration the operation's buffer uses.
    mr: Option<usize>,
    /// Operations posted on the buffer (a span's count, else 1): a receive's completion
    /// reports the envelope of the last, and a receive slot counts this many in
    /// `posted_recvs`.
    count: u32,
    /// Completions the slot still waits for: it is done when none is left.
    left: u32,
    /// No request handle was handed out for the slot (a span whose posting failed half way):
    /// it gives itself back once its operations have completed.
    orphan: bool,
}

impl Extra {
    /// The context of operation `sub`, if the slot has one.
    fn ctx_of(&self, sub: u32) -> Option<*mut OpCtx> {
        match sub {
            0 => Some(self.ctx),
            k => self.more.get(k as usize - 1).copied(),
        }
    }
}

/// A cached memory registration.
struct Mr {
    addr: usize,
    len: usize,
    mr: *mut ffi::fid_mr,
    desc: *mut c_void,
    inflight: u32,
    used: u64,
}

/// One rank's libfabric endpoint. Created by the launch functions ([`crate::run_threads`],
/// [`crate::run_rank_over`]), which exchange the addresses and close it cleanly.
pub struct OfiEndpoint {
    rank: Rank,
    size: u32,
    cfg: OfiConfig,
    fab: Fabric,
    addrs: Vec<u64>,
    slots: Slots<Extra>,
    /// Registrations, when the provider needs them.
    mrs: Vec<Option<Mr>>,
    mr_clock: u64,
    /// Messages below this many bytes go with `fi_tinject` (0: never).
    inject_below: usize,
    /// User-tag message sizes this rank sent, and whether each went with `fi_tinject`.
    sent: BTreeMap<usize, bool>,
    last_sent: usize,
    pinned: Option<usize>,
    affinity: Vec<usize>,
    /// Receives posted and not yet completed: the provider holds at most `rx_size`.
    posted_recvs: usize,
    /// Why wildcard receives are refused on this provider ([`Attrs::wildcard_defect`]).
    wildcard_defect: Option<String>,
    /// The slot the ping-pong of injected messages posts its receives into, kept from one
    /// loop to the next (idle in state `Done`).
    loop_slot: Option<usize>,
    /// The ranks the program gave up on ([`Endpoint::forget`]), in the order it did: nothing
    /// more goes to them or is awaited from them, and the end of the run meets the others
    /// only.
    gone: Forgotten,
}

impl std::fmt::Debug for OfiEndpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OfiEndpoint")
            .field("rank", &self.rank)
            .field("size", &self.size)
            .field("provider", &self.fab.attrs.provider)
            .finish_non_exhaustive()
    }
}

impl Drop for OfiEndpoint {
    fn drop(&mut self) {
        // The endpoint closes first: once fi_close(ep) has returned, the provider holds no
        // buffer, context or descriptor of an outstanding operation. Should it fail, they are
        // leaked rather than freed under the provider.
        if !self.fab.close_ep() {
            std::mem::forget(self.slots.take_all());
            std::mem::forget(std::mem::take(&mut self.mrs));
            return;
        }
        for m in self.mrs.iter_mut().filter_map(Option::take) {
            close_mr(m.mr);
        }
        for s in self.slots.iter() {
            for &c in std::iter::once(&s.extra.ctx).chain(&s.extra.more) {
                // SAFETY: each context came from Box::into_raw, is freed once, here, and the
                // provider released it when the endpoint closed.
                drop(unsafe { Box::from_raw(c) });
            }
        }
    }
}

impl OfiEndpoint {
    /// Open this rank's endpoint; the caller then exchanges [`OfiEndpoint::name`]s and calls
    /// [`OfiEndpoint::connect`].
    pub(crate) fn open(
        rank: Rank,
        size: u32,
        node: Option<String>,
        cfg: &OfiConfig,
    ) -> Result<Self> {
        let cpu = affinity::cpu_for(&cfg.cpus, rank);
        let affinity = affinity::pin(cpu)?;
        let want = crate::fabric::Want {
            provider: cfg.provider.clone(),
            node,
            rx_size: cfg.rx_size,
        };
        let fab = Fabric::open(&want, size)?;
        let inject_below = if cfg.inject { fab.attrs.inject_size } else { 0 };
        let wildcard_defect = fab.attrs.wildcard_defect();
        Ok(OfiEndpoint {
            rank,
            size,
            cfg: cfg.clone(),
            fab,
            addrs: Vec::new(),
            slots: Slots::new("ofi"),
            mrs: Vec::new(),
            mr_clock: 0,
            inject_below,
            sent: BTreeMap::new(),
            last_sent: usize::MAX,
            pinned: cpu,
            affinity,
            posted_recvs: 0,
            wildcard_defect,
            loop_slot: None,
            gone: Forgotten::default(),
        })
    }

    /// This endpoint's address, to give the other ranks.
    pub(crate) fn name(&self) -> Result<Vec<u8>> {
        self.fab.name()
    }

    /// Insert every rank's address (in rank order): the endpoint can then send.
    pub(crate) fn connect(&mut self, names: &[Vec<u8>]) -> Result<()> {
        if names.len() != self.size as usize {
            return Err(Error::Protocol(format!(
                "{} addresses for {} ranks",
                names.len(),
                self.size
            )));
        }
        self.addrs = self.fab.insert(names)?;
        Ok(())
    }

    /// The provider's attributes.
    pub fn attrs(&self) -> &Attrs {
        &self.fab.attrs
    }

    fn check_peer(&self, r: Rank, what: &str) -> Result<()> {
        self.gone.check(what, r, self.size)
    }

    /// The ranks the program gave up on, in the order it did.
    pub(crate) fn gone(&self) -> &[Rank] {
        self.gone.ranks()
    }

    /// A free slot for an operation, with its buffer.
    fn take_slot(&mut self, kind: OpKind, peer: Option<Rank>, tag: Tag, buf: Vec<u8>) -> usize {
        let i = self.slots.take(kind, peer, tag, buf, |i| Extra {
            ctx: OpCtx::leak(i, 0),
            more: Vec::new(),
            mr: None,
            count: 1,
            left: 1,
            orphan: false,
        });
        let x = &mut self.slots[i].extra;
        (x.mr, x.count, x.left, x.orphan) = (None, 1, 1, false);
        i
    }

    /// Give slot `i` back, with its registration's use.
    fn release(&mut self, i: usize) -> Vec<u8> {
        self.unuse(i);
        self.slots.release(i)
    }

    /// The bookkeeping of slot `i`'s end: its posted receives fewer, its registration's use.
    fn unuse(&mut self, i: usize) {
        let s = &mut self.slots[i];
        if s.kind == OpKind::Recv {
            self.posted_recvs = self.posted_recvs.saturating_sub(s.extra.count as usize);
        }
        if let Some(m) = s
            .extra
            .mr
            .take()
            .and_then(|m| self.mrs.get_mut(m))
            .and_then(Option::as_mut)
        {
            m.inflight -= 1;
        }
    }

    /// The descriptor for `len` bytes at `addr`: null unless the provider asks for
    /// registration (`FI_MR_LOCAL`); then a cached registration covering them, or a new one.
    fn desc(&mut self, slot: usize) -> Result<*mut c_void> {
        if !self.fab.attrs.needs_mr() && !self.cfg.register {
            return Ok(ptr::null_mut());
        }
        let (addr, len) = {
            let b = &self.slots[slot].buf;
            (b.as_ptr() as usize, b.len())
        };
        if len == 0 {
            return Ok(ptr::null_mut());
        }
        self.mr_clock += 1;
        let now = self.mr_clock;
        let hit = self.mrs.iter().position(|m| {
            m.as_ref()
                .is_some_and(|m| m.addr <= addr && addr + len <= m.addr + m.len)
        });
        let i = match hit {
            Some(i) => i,
            None => self.new_mr(addr, len)?,
        };
        let Some(m) = self.mrs[i].as_mut() else {
            return Err(backend_error("a memory registration vanished".into()));
        };
        m.inflight += 1;
        m.used = now;
        self.slots[slot].extra.mr = Some(i);
        Ok(m.desc)
    }

    /// Register a new region, evicting the least recently used idle one when the cache is
    /// full.
    fn new_mr(&mut self, addr: usize, len: usize) -> Result<usize> {
        let (mr, desc) = self.fab.register(addr as *const u8, len, self.mr_clock)?;
        let fresh = Mr {
            addr,
            len,
            mr,
            desc,
            inflight: 0,
            used: self.mr_clock,
        };
        if let Some(i) = self.mrs.iter().position(Option::is_none) {
            self.mrs[i] = Some(fresh);
            return Ok(i);
        }
        if self.mrs.len() >= MR_CACHE {
            let victim = self
                .mrs
                .iter()
                .enumerate()
                .filter_map(|(i, m)| m.as_ref().filter(|m| m.inflight == 0).map(|m| (m.used, i)))
                .min()
                .map(|(_, i)| i);
            if let Some(i) = victim {
                if let Some(old) = self.mrs[i].replace(fresh) {
                    close_mr(old.mr);
                }
                return Ok(i);
            }
        }
        self.mrs.push(Some(fresh));
        Ok(self.mrs.len() - 1)
    }

    /// Read the completion queue once: every completion found marks its slot done.
    fn progress(&mut self) -> Result<()> {
        // Not zeroed: this runs on every spin of a wait, and the provider writes what it reads.
        let mut entries = [const { MaybeUninit::<ffi::fi_cq_tagged_entry>::uninit() }; CQ_BATCH];
        // SAFETY: the queue is open and `entries` has room for CQ_BATCH entries of the
        // queue's format (FI_CQ_FORMAT_TAGGED).
        let n = unsafe { sys::cq_read(self.fab.cq, entries.as_mut_ptr() as *mut c_void, CQ_BATCH) };
        if n > 0 {
            for e in &entries[..(n as usize).min(CQ_BATCH)] {
                // SAFETY: fi_cq_read wrote its first `n` entries (n <= CQ_BATCH).
                let e = unsafe { e.assume_init_ref() };
                if let Some((i, sub)) = self.slot_of_context(e.op_context) {
                    self.finish_slot(i, sub, e.len, e.tag);
                }
            }
            return Ok(());
        }
        match n {
            0 | EAGAIN => Ok(()),
            EAVAIL => self.read_error(),
            rc => sys::check(rc as i64, "fi_cq_read"),
        }
    }

    /// The slot, and which of its operations, whose context the provider handed back.
    fn slot_of_context(&self, ctx: *mut c_void) -> Option<(usize, u32)> {
        if ctx.is_null() {
            return None;
        }
        // SAFETY: the provider returns the context pointer of an operation this endpoint
        // posted: a live boxed OpCtx (slots and their boxes live as long as the endpoint), whose
        // `slot` and `sub` fields the provider never writes (it owns only `fi`).
        let (i, sub) = unsafe {
            let c = &*(ctx as *const OpCtx);
            (c.slot, c.sub)
        };
        let s = (i < self.slots.len()).then(|| &self.slots[i])?;
        let own = s.extra.ctx_of(sub)?;
        (ptr::eq(own as *const OpCtx, ctx as *const OpCtx) && s.state == State::Posted)
            .then_some((i, sub))
    }

    /// Operation `sub` of slot `i` completed (a receive of `len` bytes with tag `tag`): the
    /// slot is done once all its operations have; a receive reports the last one's envelope.
    fn finish_slot(&mut self, i: usize, sub: u32, len: usize, tag: u64) {
        let s = &mut self.slots[i];
        if s.kind == OpKind::Recv && sub + 1 == s.extra.count {
            s.len = len;
            s.peer = Some((tag >> 32) as Rank);
            s.tag = tag as Tag;
        }
        self.one_done(i);
    }

    /// One of slot `i`'s operations ended: the slot is done when none is left, and given back
    /// at once if no request handle names it.
    #[inline(always)]
    fn one_done(&mut self, i: usize) {
        let s = &mut self.slots[i];
        s.extra.left = s.extra.left.saturating_sub(1);
        if s.extra.left == 0 {
            s.state = State::Done;
            if s.extra.orphan {
                self.release(i);
            }
        }
    }

    /// An error entry: its operation fails with libfabric's reason.
    fn read_error(&mut self) -> Result<()> {
        let mut e = ffi::fi_cq_err_entry::default();
        // SAFETY: the queue is open and `e` is a zeroed error entry (err_data_size 0: the
        // provider points err_data at its own buffer, valid until the next read).
        let rc = unsafe { ffi::cb_fi_cq_readerr(self.fab.cq, &mut e, 0) };
        if rc < 0 {
            return if rc == EAGAIN {
                Ok(())
            } else {
                sys::check(rc as i64, "fi_cq_readerr")
            };
        }
        let text = self.provider_error_text(&e);
        let Some((i, _)) = self.slot_of_context(e.op_context) else {
            return Err(backend_error(format!(
                "{}: an operation failed: {text}",
                self.fab.attrs.provider
            )));
        };
        let s = &mut self.slots[i];
        if s.err.is_some() {
            // Another of a span's operations failed first: its error stands.
            self.one_done(i);
            return Ok(());
        }
        s.err = Some(match e.err.unsigned_abs() {
            // Some providers (tcp;ofi_rxm) leave olen 0: the length is then unknown (len 0).
            ffi::FI_ETRUNC if s.kind == OpKind::Recv => Error::Truncated {
                len: if e.olen > 0 { s.cap + e.olen } else { 0 },
                cap: s.cap,
                source_rank: s.peer.unwrap_or((e.tag >> 32) as Rank),
                tag: e.tag as Tag,
            },
            ffi::FI_ECONNREFUSED
            | ffi::FI_ECONNRESET
            | ffi::FI_ECONNABORTED
            | ffi::FI_EHOSTUNREACH
            | ffi::FI_ENOTCONN
            | ffi::FI_EIO
                if s.peer.is_some() =>
            {
                Error::PeerLost {
                    peer: s.peer.unwrap_or(0),
                    detail: text,
                }
            }
            _ => backend_error(format!(
                "{} of {} bytes {}: {text}",
                if s.kind == OpKind::Send {
                    "a send"
                } else {
                    "a receive"
                },
                s.cap,
                match (s.kind, s.peer) {
                    (OpKind::Send, Some(p)) => format!("to rank {p}"),
                    (_, Some(p)) => format!("from rank {p}"),
                    _ => "from any rank".into(),
                }
            )),
        });
        self.one_done(i);
        Ok(())
    }

    /// libfabric's words for an error entry: `fi_strerror` of the error and the provider's
    /// own (`fi_cq_strerror`).
    fn provider_error_text(&self, e: &ffi::fi_cq_err_entry) -> String {
        let mut buf = [0 as std::os::raw::c_char; 256];
        // SAFETY: the queue is open; err_data is what the provider gave with this entry;
        // `buf` has room for its length and the result is NUL-terminated or null.
        let p = unsafe {
            ffi::cb_fi_cq_strerror(
                self.fab.cq,
                e.prov_errno,
                e.err_data,
                buf.as_mut_ptr(),
                buf.len(),
            )
        };
        // SAFETY: null or a NUL-terminated string in `buf` or the provider's storage.
        let prov = unsafe { sys::text(p) };
        let base = sys::strerror(e.err as i64);
        if prov.is_empty() || prov == base {
            base
        } else {
            format!("{base} ({prov})")
        }
    }

    /// Call `post` until it does not say `-FI_EAGAIN`, reading completions between tries, at
    /// most the timeout; `what` names the operation in the timeout.
    #[inline(always)]
    fn retry(
        &mut self,
        what: &dyn Fn(&Self) -> String,
        mut post: impl FnMut(&Self) -> isize,
    ) -> Result<()> {
        let mut timer = SpinTimer::new();
        loop {
            let rc = post(self);
            if rc != EAGAIN {
                return sys::check(rc as i64, "posting an operation")
                    .map_err(|e| backend_error(format!("{}: {}", what(self), e.root())));
            }
            self.progress()?;
            if timer.expired(self.cfg.timeout) {
                return Err(Error::Timeout {
                    rank: self.rank,
                    what: what(self),
                    timeout: self.cfg.timeout,
                });
            }
        }
    }

    /// Note the size of a user-tag send and whether it was injected (once per change of size,
    /// so a loop of one size pays one comparison).
    #[inline(always)]
    fn note_sent(&mut self, tag: Tag, len: usize, inject: bool) {
        if tag < TAG_UB && len != self.last_sent {
            self.last_sent = len;
            self.sent.insert(len, inject);
        }
    }

    /// Send with `fi_tinject`: the buffer is free again on return, and no completion comes.
    /// `p` and `len` are the bytes of a buffer the caller keeps alive through the call (raw,
    /// since the native ping-pong injects from a buffer posted for the reply).
    fn inject(&mut self, dest: Rank, tag: Tag, p: *const u8, len: usize) -> Result<()> {
        let (ep, addr, wt) = (
            self.fab.ep,
            self.addrs[dest as usize],
            wire_tag(self.rank, tag),
        );
        self.retry(
            &|_| format!("rank {dest} to take a {len}-byte message (fi_tinject)"),
            // SAFETY: the endpoint is open; fi_tinject copies `len` bytes at `p`, which the
            // caller keeps alive, before it returns.
            |_| unsafe { sys::tinject(ep, p as *const c_void, len, addr, wt) },
        )?;
        self.note_sent(tag, len, true);
        Ok(())
    }

    /// A receive's source and tag for its slot, checked (a rank of the job; no wildcard where
    /// the provider cannot match one).
    #[inline(always)]
    fn recv_target(&self, src: Src, tag: TagSel) -> Result<(Option<Rank>, Tag)> {
        if let Src::Rank(r) = src {
            self.check_peer(r, "receive from")?;
        }
        let peer = match src {
            Src::Any => None,
            Src::Rank(r) => Some(r),
        };
        if let (Some(why), true) = (&self.wildcard_defect, peer.is_none() || tag == TagSel::Any) {
            return Err(Error::Config(why.clone()));
        }
        let t = match tag {
            TagSel::Tag(t) => t,
            TagSel::Any => 0,
        };
        Ok((peer, t))
    }

    /// Post slot `i`'s `span.count` operations on the bytes at `start` of its buffer in order
    /// with `post(ep, pointer, desc, context)` (an `fi_tsend` or `fi_trecv`), each with a
    /// context of its own and the registration of the whole buffer, retried while the
    /// provider says `-FI_EAGAIN`. Should a post fail, those already posted keep the slot (no
    /// handle is returned; it gives itself back once they have completed) and the error is
    /// returned.
    fn post_span(
        &mut self,
        i: usize,
        span: Span,
        start: usize,
        post: &dyn Fn(*mut ffi::fid_ep, *mut u8, *mut c_void, *mut c_void) -> isize,
    ) -> Result<()> {
        let (kind, count) = (self.slots[i].kind, span.count);
        let s = &mut self.slots[i];
        (s.len, s.cap) = (span.len, span.len);
        (s.extra.count, s.extra.left) = (count, count);
        if kind == OpKind::Recv {
            self.posted_recvs += count as usize;
        }
        let desc = match self.desc(i) {
            Ok(d) => d,
            Err(e) => {
                self.release(i);
                return Err(e);
            }
        };
        while self.slots[i].extra.more.len() + 1 < count as usize {
            let sub = self.slots[i].extra.more.len() as u32 + 1;
            self.slots[i].extra.more.push(OpCtx::leak(i, sub));
        }
        // SAFETY: `start` lies in the buffer (Span::range checked it before the slot took it).
        let p = unsafe { self.slots[i].buf.as_mut_ptr().add(start) };
        let (ep, len) = (self.fab.ep, span.len);
        for sub in 0..count {
            let x = &self.slots[i].extra;
            // Operation `sub` > 0 has context `more[sub - 1]`, made above.
            let ctx = if sub == 0 {
                x.ctx
            } else {
                x.more[sub as usize - 1]
            };
            let posted = self.retry(
                &|me| match kind {
                    OpKind::Send => format!(
                        "rank {} to take a {len}-byte message (fi_tsend)",
                        me.slots[i].peer.unwrap_or(0)
                    ),
                    OpKind::Recv => format!(
                        "room to post a receive ({} posted; the provider's receive queue \
                         holds {})",
                        me.posted_recvs - (count - sub) as usize,
                        me.fab.attrs.rx_size
                    ),
                },
                |_| post(ep, p, desc, ctx as *mut c_void),
            );
            if let Err(e) = posted {
                // Operations 0..sub are posted (some perhaps completed already): the slot
                // waits for those only, and has no handle.
                if kind == OpKind::Recv {
                    self.posted_recvs -= (count - sub) as usize;
                }
                let x = &mut self.slots[i].extra;
                (x.count, x.orphan) = (sub, true);
                x.left -= count - sub;
                if x.left == 0 {
                    self.release(i);
                }
                return Err(e);
            }
        }
        Ok(())
    }

    fn timeout_error(&self, req: ReqId) -> Error {
        let what = format!("request {}", req.0);
        match self.slots.index_of(req) {
            Ok(i) => self
                .slots
                .timeout_error(self.rank, i, &what, self.cfg.timeout),
            Err(_) => Error::Timeout {
                rank: self.rank,
                what,
                timeout: self.cfg.timeout,
            },
        }
    }

    /// The completion of slot `i` if it is done (its slot given back), else `None`.
    #[inline(always)]
    fn take_done(&mut self, i: usize) -> Result<Option<Completion>> {
        if self.slots[i].state != State::Done {
            return Ok(None);
        }
        self.unuse(i);
        self.slots.complete(i).map(Some)
    }
}

impl Endpoint for OfiEndpoint {
    commbench_core::endpoint_identity! {
        backend: "ofi", rank: rank, size: size, timeout: cfg.timeout
    }

    /// Nothing more is sent to `peer` or received from it by name; a receive from any rank
    /// still takes what it sent before.
    fn forget(&mut self, peer: Rank) {
        self.gone.forget(peer, self.rank, self.size);
    }

    fn isend(&mut self, dest: Rank, tag: Tag, buf: Vec<u8>) -> Result<ReqId> {
        self.check_peer(dest, "send to")?;
        if buf.len() < self.inject_below {
            self.inject(dest, tag, buf.as_ptr(), buf.len())?;
            let i = self.take_slot(OpKind::Send, Some(dest), tag, buf);
            self.slots[i].state = State::Done;
            return Ok(self.slots.req_of(i));
        }
        let i = self.take_slot(OpKind::Send, Some(dest), tag, buf);
        let desc = match self.desc(i) {
            Ok(d) => d,
            Err(e) => {
                self.release(i);
                return Err(e);
            }
        };
        let (ep, addr, wt) = (
            self.fab.ep,
            self.addrs[dest as usize],
            wire_tag(self.rank, tag),
        );
        let (p, len) = (self.slots[i].buf.as_ptr(), self.slots[i].buf.len());
        let ctx = self.slots[i].extra.ctx as *mut c_void;
        let posted = self.retry(
            &|_| format!("rank {dest} to take a {len}-byte message (fi_tsend)"),
            // SAFETY: the endpoint is open; the buffer and the context stay owned by slot `i`
            // (moved nowhere, freed nowhere) until its completion is read.
            |_| unsafe { sys::tsend(ep, p as *const c_void, len, desc, addr, wt, ctx) },
        );
        if let Err(e) = posted {
            self.release(i);
            return Err(e);
        }
        self.note_sent(tag, len, false);
        Ok(self.slots.req_of(i))
    }

    fn irecv(&mut self, src: Src, tag: TagSel, buf: Vec<u8>) -> Result<ReqId> {
        let (peer, t) = self.recv_target(src, tag)?;
        let i = self.take_slot(OpKind::Recv, peer, t, buf);
        self.posted_recvs += 1;
        let desc = match self.desc(i) {
            Ok(d) => d,
            Err(e) => {
                self.release(i);
                return Err(e);
            }
        };
        let (wt, ignore) = select(src, tag);
        let (p, len) = (self.slots[i].buf.as_mut_ptr(), self.slots[i].buf.len());
        let posted = self.post_receive(i, p, len, desc, wt, ignore);
        if let Err(e) = posted {
            self.release(i);
            return Err(e);
        }
        Ok(self.slots.req_of(i))
    }

    #[inline]
    fn test(&mut self, req: ReqId) -> Result<Option<Completion>> {
        let i = self.slots.index_of(req)?;
        if self.slots[i].state == State::Posted {
            self.progress()?;
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
            self.progress()?;
            if timer.expired(self.cfg.timeout) {
                return Err(self.timeout_error(req));
            }
        }
    }

    #[inline]
    fn send(&mut self, dest: Rank, tag: Tag, buf: Vec<u8>) -> Result<Vec<u8>> {
        if buf.len() < self.inject_below {
            self.check_peer(dest, "send to")?;
            self.inject(dest, tag, buf.as_ptr(), buf.len())?;
            return Ok(buf);
        }
        let r = self.isend(dest, tag, buf)?;
        Ok(self.wait(r)?.buf)
    }

    /// The loop fi_pingpong runs: the initiator posts its receive before it injects, so the
    /// reply always meets a posted receive; above the inject size it sends, waits for the
    /// send's completion, then receives.
    fn pingpong(
        &mut self,
        peer: Rank,
        tag: Tag,
        buf: &mut Vec<u8>,
        n: u64,
        role: Role,
    ) -> Result<()> {
        self.check_peer(peer, "ping-pong with")?;
        if buf.len() < self.inject_below && !self.fab.attrs.needs_mr() && !self.cfg.register {
            let whole = Span::whole(buf.len());
            return self.pingpong_injected(peer, tag, buf, whole, n, role);
        }
        commbench_core::transport::pingpong_loop(self, peer, tag, buf, n, role)
    }

    /// `span.count` `fi_tsend`s of the span's bytes (`fi_tinject`s below the inject size), in
    /// one slot whose buffer is registered whole.
    fn isend_span(&mut self, dest: Rank, tag: Tag, buf: Vec<u8>, span: Span) -> Result<ReqId> {
        let range = span.range(buf.len())?;
        if span.is_whole(buf.len()) {
            return self.isend(dest, tag, buf);
        }
        self.check_peer(dest, "send to")?;
        let len = span.len;
        if len < self.inject_below {
            // SAFETY: `range` lies in `buf` (Span::range), which outlives the loop.
            let p = unsafe { buf.as_ptr().add(range.start) };
            for _ in 0..span.count {
                self.inject(dest, tag, p, len)?;
            }
            let i = self.take_slot(OpKind::Send, Some(dest), tag, buf);
            self.slots[i].state = State::Done;
            return Ok(self.slots.req_of(i));
        }
        let i = self.take_slot(OpKind::Send, Some(dest), tag, buf);
        let (addr, wt) = (self.addrs[dest as usize], wire_tag(self.rank, tag));
        let posted = self.post_span(i, span, range.start, &|ep, p, desc, ctx| {
            // SAFETY: the endpoint is open; `p` is `len` bytes in the slot's buffer, which the
            // slot owns (moved nowhere, freed nowhere) with the context until the completion
            // of this send is read.
            unsafe { sys::tsend(ep, p as *const c_void, len, desc, addr, wt, ctx) }
        });
        posted?;
        self.note_sent(tag, len, false);
        Ok(self.slots.req_of(i))
    }

    /// `span.count` `fi_trecv`s into the span's bytes, posted in order, in one slot whose
    /// buffer is registered whole.
    fn irecv_span(&mut self, src: Src, tag: TagSel, buf: Vec<u8>, span: Span) -> Result<ReqId> {
        let range = span.range(buf.len())?;
        if span.is_whole(buf.len()) {
            return self.irecv(src, tag, buf);
        }
        let (peer, t) = self.recv_target(src, tag)?;
        let i = self.take_slot(OpKind::Recv, peer, t, buf);
        let (wt, ignore) = select(src, tag);
        let len = span.len;
        self.post_span(i, span, range.start, &|ep, p, desc, ctx| {
            // SAFETY: the endpoint is open; `p` is `len` writable bytes in the slot's buffer,
            // which the slot owns with the context until the completion of this receive is
            // read.
            unsafe {
                sys::trecv(
                    ep,
                    p as *mut c_void,
                    len,
                    desc,
                    sys::FI_ADDR_UNSPEC,
                    wt,
                    ignore,
                    ctx,
                )
            }
        })?;
        Ok(self.slots.req_of(i))
    }

    /// A ping-pong of the bytes at `span` as [`Endpoint::pingpong`] runs it: injected below the
    /// inject size (each receive posted straight into the span), else the loop of
    /// [`Endpoint::isend_span`], [`Endpoint::irecv_span`] and [`Endpoint::wait`].
    fn pingpong_span(
        &mut self,
        peer: Rank,
        tag: Tag,
        buf: &mut Vec<u8>,
        span: Span,
        n: u64,
        role: Role,
    ) -> Result<()> {
        span.range(buf.len())?;
        if span.is_whole(buf.len()) {
            return self.pingpong(peer, tag, buf, n, role);
        }
        self.check_peer(peer, "ping-pong with")?;
        if span.count == 1
            && span.len < self.inject_below
            && !self.fab.attrs.needs_mr()
            && !self.cfg.register
        {
            return self.pingpong_injected(peer, tag, buf, span, n, role);
        }
        pingpong_span_loop(self, peer, tag, buf, span, n, role)
    }

    fn info(&self) -> BackendInfo {
        crate::info::describe(self)
    }
}

impl OfiEndpoint {
    /// The ping-pong of messages below the inject size, as fi_pingpong runs it: each receive
    /// posted straight into the bytes at `span` of `buf` (`span.count` 1) from one slot kept
    /// for these loops (no buffer moved, no request made), the initiator's before it injects,
    /// so the reply always meets a posted receive.
    /// Should the loop fail with the receive still posted, the slot takes `buf` over, so that
    /// the provider never writes into memory given back.
    fn pingpong_injected(
        &mut self,
        peer: Rank,
        tag: Tag,
        buf: &mut Vec<u8>,
        span: Span,
        n: u64,
        role: Role,
    ) -> Result<()> {
        let i = match self.loop_slot {
            Some(i) => i,
            None => {
                let i = self.take_slot(OpKind::Recv, Some(peer), tag, Vec::new());
                self.slots[i].state = State::Done;
                self.loop_slot = Some(i);
                i
            }
        };
        let (wt, len) = (wire_tag(peer, tag), span.len);
        let slot = &mut self.slots[i];
        (slot.peer, slot.tag, slot.cap) = (Some(peer), tag, len);
        let mut run = || -> Result<()> {
            for _ in 0..n {
                // SAFETY: the span lies in `buf` (whole, or checked by Span::range).
                let p = unsafe { buf.as_mut_ptr().add(span.start) };
                self.post_receive(i, p, len, ptr::null_mut(), wt, 0)?;
                if role == Role::Initiator {
                    // The reply that the receive just posted will take cannot come before
                    // fi_tinject has copied the message out: the peer replies only to it.
                    self.inject(peer, tag, p, len)?;
                }
                self.wait_slot(i)?;
                if role == Role::Echo {
                    self.inject(peer, tag, p, len)?;
                }
            }
            Ok(())
        };
        let out = run();
        if self.slots[i].state == State::Posted {
            // The receive outlived the loop: the slot keeps the buffer, and the next loop
            // takes another slot.
            self.slots[i].buf = std::mem::take(buf);
            self.loop_slot = None;
        }
        out
    }

    /// Post slot `i`'s receive of `len` bytes at `p` (tag `wt`, ignore mask `ignore`).
    #[inline(always)]
    fn post_receive(
        &mut self,
        i: usize,
        p: *mut u8,
        len: usize,
        desc: *mut c_void,
        wt: u64,
        ignore: u64,
    ) -> Result<()> {
        let s = &mut self.slots[i];
        s.state = State::Posted;
        s.len = len;
        s.extra.left = 1;
        let (ep, ctx) = (self.fab.ep, s.extra.ctx as *mut c_void);
        self.retry(
            &|me| {
                format!(
                    "room to post a receive ({} posted; the provider's receive queue holds {})",
                    me.posted_recvs - 1,
                    me.fab.attrs.rx_size
                )
            },
            // SAFETY: the endpoint is open; `len` writable bytes at `p` (in the slot's buffer,
            // or the ping-pong loop's, which the slot takes over should the receive outlive
            // the loop) and the slot's context stay valid until the completion is read.
            |_| unsafe {
                sys::trecv(
                    ep,
                    p as *mut c_void,
                    len,
                    desc,
                    sys::FI_ADDR_UNSPEC,
                    wt,
                    ignore,
                    ctx,
                )
            },
        )
    }

    /// Wait for slot `i` (kept, not given back) to complete, at most the timeout.
    #[inline(always)]
    fn wait_slot(&mut self, i: usize) -> Result<()> {
        let mut timer = SpinTimer::new();
        loop {
            if self.slots[i].state == State::Done {
                return match self.slots[i].err.take() {
                    Some(e) => Err(e),
                    None => Ok(()),
                };
            }
            self.progress()?;
            if timer.expired(self.cfg.timeout) {
                return Err(self.timeout_error(self.slots.req_of(i)));
            }
        }
    }

    pub(crate) fn cfg(&self) -> &OfiConfig {
        &self.cfg
    }
    pub(crate) fn inject_below(&self) -> usize {
        self.inject_below
    }
    pub(crate) fn sent(&self) -> &BTreeMap<usize, bool> {
        &self.sent
    }
    pub(crate) fn pinning(&self) -> (Option<usize>, &[usize]) {
        (self.pinned, &self.affinity)
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
        let (t, ignore) = select(Src::Any, TagSel::Any);
        for (rank, tag) in [(0u32, 0u32), (3, 7), (u32::MAX, TAG_UB - 1)] {
            assert_eq!(wire_tag(rank, tag) & !ignore, t & !ignore);
        }
        for tag in [TAG_UB, TAG_UB + 1, TAG_UB + 4, u32::MAX] {
            assert_ne!(wire_tag(2, tag) & !ignore, t & !ignore, "tag {tag}");
        }
        let (t, ignore) = select(Src::Rank(5), TagSel::Tag(9));
        assert_eq!(ignore, 0);
        assert_eq!(t, wire_tag(5, 9));
        let (t, ignore) = select(Src::Rank(5), TagSel::Any);
        assert_eq!(wire_tag(5, 123) & !ignore, t & !ignore);
        assert_ne!(wire_tag(4, 123) & !ignore, t & !ignore);
    }
}
