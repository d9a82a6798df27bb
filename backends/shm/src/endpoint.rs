//! One rank's endpoint: a single-producer single-consumer ring per ordered pair of ranks, the
//! core tag-matching engine, the wait policies and the liveness checks.
//!
//! # Ring protocol
//!
//! Each ring is a byte stream. A message is a record `[stamp u64 | tag u32 | len u32 | payload |
//! pad to 16]`; the stamp of a record at absolute stream position `pos` is `pos + 1` (with bit 63
//! set when the payload is streamed). The consumer polls the stamp at its read position, so a
//! small message costs it one cache line: header and payload arrive together.
//!
//! * Inline records (at most a quarter of the ring) are written whole, then stamped (Release).
//! * Larger messages are streamed: the header is stamped at once and the payload follows in
//!   chunks published through the producer index `head` (Release); the consumer copies what is
//!   published and releases it through `tail`. Any size works with the ring's fixed footprint.
//! * Before publishing a record the producer zeroes the stamp word where the next record will
//!   start, so the consumer never mistakes old payload bytes for a stamp. The producer therefore
//!   keeps 16 bytes of the ring free.
//!
//! Each side caches the other's index and reloads it only when it runs out of data or space,
//! so the index lines move between cores only when needed.

use crate::handoff::{self, KEY as HANDOFF_KEY};
use crate::segment::{
    Layout, Mapping, RankSlot, RingCtrl, CTRL_BYTES, ST_EMPTY, ST_FAILED, ST_FINISHED, ST_MAPPED,
};
use crate::sys::{futex_wait, futex_wake, Watch};
use crate::WaitPolicy;
use commbench_core::method::limits;
use commbench_core::transport::clock::monotonic_ns;
use commbench_core::transport::error::{check_rank, FORGOTTEN};
use commbench_core::transport::matching::{Matcher, PostedRecv, ReqTable};
use commbench_core::transport::{BackendInfo, Span};
use commbench_core::{Completion, Endpoint, Error, Rank, ReqId, Result, Src, Tag, TagSel};
use std::collections::VecDeque;
use std::sync::atomic::{fence, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Record header bytes.
const HDR: u64 = 16;
/// Stamp bit of a streamed record.
const STREAM_BIT: u64 = 1 << 63;
/// Largest piece a streaming producer publishes at once (lets the consumer start early).
const CHUNK: u64 = 32 << 10;
/// How often a waiting rank checks its peers' liveness.
const CHECK_NS: u64 = 1_000_000;
/// Longest single futex sleep (bounded so liveness and timeout checks keep running).
const FUTEX_SLEEP: Duration = Duration::from_millis(1);
/// Largest message a record can describe.
pub(crate) const MAX_MSG: usize = u32::MAX as usize;
/// Unexpected payloads up to this size come from the matcher's pool; larger ones are
/// allocated fallibly.
const POOLED: usize = 1 << 20;

/// A buffer for a payload of `len` bytes from `p` that arrived before its receive was posted,
/// or an error naming it when memory runs out.
fn unexpected_buffer(matcher: &mut Matcher, len: usize, p: usize, tag: Tag) -> Result<Vec<u8>> {
    if len <= POOLED {
        return Ok(matcher.unexpected_buffer(len));
    }
    limits::try_zeroed(len as u64, || {
        format!("a message of {len} bytes from rank {p} (tag {tag}) that arrived before its receive was posted")
    })
}

#[inline]
fn align16(x: u64) -> u64 {
    (x + 15) & !15
}

/// The producer side of one ring.
struct Tx {
    ctrl: *const RingCtrl,
    data: *mut u8,
    cap: u64,
    head: u64,
    tail_cache: u64,
}

/// The consumer side of one ring and the message it is in the middle of.
struct Rx {
    ctrl: *const RingCtrl,
    data: *mut u8,
    cap: u64,
    tail: u64,
    head_cache: u64,
    state: RxState,
}

/// What the consumer of a ring is doing with the current record's payload.
enum RxState {
    /// Between records.
    Idle,
    /// Copying into a posted receive ([`PostedRecv::dest`]).
    Direct {
        recv: PostedRecv,
        tag: Tag,
        len: usize,
        got: usize,
    },
    /// Copying into an unexpected-message buffer.
    Unexp {
        buf: Vec<u8>,
        tag: Tag,
        len: usize,
        got: usize,
    },
    /// Dropping the payload of a truncated receive (its error is already reported).
    Discard { len: usize, got: usize },
}

// Both ring sides point into a mapping the endpoint keeps alive (Arc<Mapping>); every pointer
// below is `data + (pos & (cap - 1))` with a copy length bounded by the ring's capacity.
impl Tx {
    #[inline]
    fn ctrl(&self) -> &RingCtrl {
        // SAFETY: ctrl points at the ring's control block inside the live mapping.
        unsafe { &*self.ctrl }
    }
    #[inline]
    fn free(&self) -> u64 {
        self.cap - HDR - (self.head - self.tail_cache)
    }
    #[inline]
    fn reload(&mut self) {
        self.tail_cache = self.ctrl().tail.load(Ordering::Acquire);
    }
    #[inline]
    fn stamp(&self, pos: u64) -> &AtomicU64 {
        // SAFETY: pos is 16-aligned (a record boundary), so the word is aligned and inside the
        // data area; the stamp word is only ever accessed atomically while it is a stamp.
        unsafe { &*(self.data.add((pos & (self.cap - 1)) as usize) as *const AtomicU64) }
    }
    #[inline]
    fn write_header(&self, pos: u64, tag: Tag, len: u32) {
        // SAFETY: pos is 16-aligned and the header's 16 bytes never wrap (cap is a multiple of
        // 16); the bytes after the stamp are free space owned by the producer.
        unsafe {
            let p = self.data.add((pos & (self.cap - 1)) as usize);
            std::ptr::write(p.add(8) as *mut u32, tag);
            std::ptr::write(p.add(12) as *mut u32, len);
        }
    }
    #[inline]
    fn write(&self, pos: u64, src: &[u8]) {
        let off = (pos & (self.cap - 1)) as usize;
        let first = src.len().min(self.cap as usize - off);
        // SAFETY: callers only write into free space (at most cap - 16 bytes past the
        // consumer's tail), split at the end of the data area, so both copies stay in bounds
        // and touch bytes the consumer does not read until they are published.
        unsafe {
            std::ptr::copy_nonoverlapping(src.as_ptr(), self.data.add(off), first);
            if first < src.len() {
                std::ptr::copy_nonoverlapping(
                    src.as_ptr().add(first),
                    self.data,
                    src.len() - first,
                );
            }
        }
    }
}

impl Rx {
    #[inline]
    fn ctrl(&self) -> &RingCtrl {
        // SAFETY: ctrl points at the ring's control block inside the live mapping.
        unsafe { &*self.ctrl }
    }
    #[inline]
    fn stamp(&self, pos: u64) -> &AtomicU64 {
        // SAFETY: as Tx::stamp.
        unsafe { &*(self.data.add((pos & (self.cap - 1)) as usize) as *const AtomicU64) }
    }
    #[inline]
    fn header(&self, pos: u64) -> (Tag, u32) {
        // SAFETY: called after an Acquire load of the record's stamp, so the header is
        // published and the producer does not touch it until the consumer releases it.
        unsafe {
            let p = self.data.add((pos & (self.cap - 1)) as usize);
            (
                std::ptr::read(p.add(8) as *const u32),
                std::ptr::read(p.add(12) as *const u32),
            )
        }
    }
}

/// Outcome of the blocking-receive fast path.
enum Fast {
    /// Received.
    Done(Completion),
    /// Nothing there yet.
    Empty,
    /// Something the general path must handle.
    Other,
}

/// A send not yet fully written into its ring: the payload `buf[start..start + len]`, written
/// `left` more times (a span posted several times at once) before the request completes.
struct PendingSend {
    req: ReqId,
    tag: Tag,
    buf: Vec<u8>,
    st: TxState,
    start: usize,
    len: usize,
    left: u32,
}

impl PendingSend {
    /// The payload of each record.
    #[inline]
    fn payload(&self) -> &[u8] {
        &self.buf[self.start..self.start + self.len]
    }

    /// The completion handed back once the last record is written.
    fn done(self, dest: Rank) -> Completion {
        let mut c = Completion::send(self.buf, dest, self.tag);
        c.len = self.len;
        c
    }
}

/// Progress of one send: header written, payload bytes written.
#[derive(Default, Clone, Copy)]
struct TxState {
    started: bool,
    off: usize,
}

/// What a request waits on (for liveness checks and error messages).
#[derive(Debug, Clone, Copy)]
pub(crate) enum Dep {
    Recv(Src, TagSel),
    Send(Rank, Tag),
    Drain,
}

/// State of one wait: spins so far, start time, last liveness check, a peer seen finished.
#[derive(Default)]
struct Waiter {
    spins: u32,
    start: u64,
    last_check: u64,
    finished_peer: Option<Rank>,
}

/// Wake `r` if it announced it sleeps on its futex (futex policy only).
#[inline]
fn notify(map: &Mapping, futex: bool, r: usize) {
    if futex {
        fence(Ordering::SeqCst);
        let s = map.slot(r as u32);
        if s.waiting.load(Ordering::Relaxed) != 0 {
            s.doorbell.fetch_add(1, Ordering::Release);
            futex_wake(&s.doorbell);
        }
    }
}

/// Take `rank`'s slot of a segment of `n` ranks and publish this process's pid there. The
/// segment must have been created for the same wait policy (the slot is then marked failed).
fn claim_slot(map: &Mapping, n: u32, rank: Rank, wait: WaitPolicy) -> Result<()> {
    if rank >= n {
        return Err(Error::Config(format!(
            "shm: rank {rank} out of range for {n} ranks"
        )));
    }
    let seg_wait = map.header().wait;
    if seg_wait != wait.code() {
        map.mark_failed(rank);
        return Err(Error::Config(format!(
            "shm: this rank uses the {} wait policy but the segment was created for the {} wait policy",
            wait.name(),
            WaitPolicy::from_code(seg_wait).map_or("?", |w| w.name())
        )));
    }
    let me = map.slot(rank);
    if let Err(st) =
        me.state
            .compare_exchange(ST_EMPTY, ST_MAPPED, Ordering::AcqRel, Ordering::Acquire)
    {
        return Err(Error::Config(format!(
            "shm: rank {rank} is already taken in this segment (state {st}, pid {})",
            me.pid.load(Ordering::Acquire)
        )));
    }
    me.pid.store(std::process::id(), Ordering::Release);
    Ok(())
}

/// The producer side of `rank`'s ring to every peer and the consumer side of every peer's ring
/// to `rank`, indexed by peer (null pointers at `rank` itself).
fn rings(map: &Mapping, layout: &Layout, rank: Rank) -> (Vec<Tx>, Vec<Rx>) {
    let base = map.base();
    let cap = layout.ring_bytes as u64;
    let ring = |off: usize| {
        // SAFETY: ring_offset(..) + stride <= layout.total == mapping length (validated).
        let ctrl = unsafe { base.add(off) };
        // SAFETY: as above; the data area follows the 256-byte control block.
        let data = unsafe { ctrl.add(CTRL_BYTES) };
        (ctrl as *const RingCtrl, data)
    };
    let none = (std::ptr::null(), std::ptr::null_mut());
    (0..layout.n)
        .map(|p| {
            let (to, from) = if p == rank {
                (none, none)
            } else {
                (
                    ring(layout.ring_offset(rank, p)),
                    ring(layout.ring_offset(p, rank)),
                )
            };
            let tx = Tx {
                ctrl: to.0,
                data: to.1,
                cap,
                head: 0,
                tail_cache: 0,
            };
            let rx = Rx {
                ctrl: from.0,
                data: from.1,
                cap,
                tail: 0,
                head_cache: 0,
                state: RxState::Idle,
            };
            (tx, rx)
        })
        .unzip()
}

/// What the endpoint records about itself in the result document.
fn backend_info(layout: &Layout, wait: WaitPolicy, mode: &str) -> BackendInfo {
    let mut info = BackendInfo::new();
    info.insert("mode".into(), mode.into());
    info.insert("segment".into(), "memfd".into());
    info.insert("wait".into(), wait.name().into());
    info.insert("ring_bytes".into(), (layout.ring_bytes as u64).into());
    info.insert("segment_bytes".into(), (layout.total as u64).into());
    info.insert("pid".into(), std::process::id().into());
    info
}

/// Where the payload of a record from `p` goes once it matched the posted receive `recv`:
/// into its [`PostedRecv::dest`] from byte `got` on, or nowhere after a truncation error when
/// the message is longer than the receive takes.
fn into_receive(
    matcher: &mut Matcher,
    reqs: &mut ReqTable,
    p: usize,
    recv: PostedRecv,
    tag: Tag,
    len: usize,
    got: usize,
) -> RxState {
    if len > recv.cap {
        let e = Error::Truncated {
            len,
            cap: recv.cap,
            source_rank: p as Rank,
            tag,
        };
        matcher.refuse(reqs, recv, e);
        return RxState::Discard { len, got };
    }
    RxState::Direct {
        recv,
        tag,
        len,
        got,
    }
}

/// One rank's shared-memory endpoint (backend `shm`).
pub struct ShmEndpoint {
    map: Arc<Mapping>,
    rank: Rank,
    size: u32,
    wait: WaitPolicy,
    futex: bool,
    timeout: Duration,
    tx: Vec<Tx>,
    rx: Vec<Rx>,
    sendq: Vec<VecDeque<PendingSend>>,
    pending_sends: usize,
    matcher: Matcher,
    reqs: ReqTable,
    /// By request slot: what it waits on, and the request (the slot's latest).
    deps: Vec<(Dep, ReqId)>,
    /// By rank: how this rank learnt that the peer's process is gone (it failed, or exited
    /// or was killed). Only what involves it fails from then on; its ring is no longer read.
    dead: Vec<Option<String>>,
    watch: Vec<Watch>,
    info: BackendInfo,
    finished: bool,
    /// An error met while moving data outside any request (memory for an unexpected
    /// message); the next operation that waits or tests returns it.
    fault: Option<Error>,
}

impl std::fmt::Debug for ShmEndpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ShmEndpoint")
            .field("rank", &self.rank)
            .field("size", &self.size)
            .field("wait", &self.wait)
            .field("segment_bytes", &self.map.len())
            .field("pending_sends", &self.pending_sends)
            .field("posted", &self.matcher.posted_len())
            .field("unexpected", &self.matcher.unexpected_len())
            .finish()
    }
}

impl ShmEndpoint {
    /// Join a validated segment as `rank`, then wait until every rank has joined.
    pub(crate) fn attach(
        map: Arc<Mapping>,
        layout: Layout,
        rank: Rank,
        wait: WaitPolicy,
        timeout: Duration,
        mode: &str,
    ) -> Result<Self> {
        let n = layout.n;
        claim_slot(&map, n, rank, wait)?;
        let (tx, rx) = rings(&map, &layout, rank);
        let mut ep = ShmEndpoint {
            info: backend_info(&layout, wait, mode),
            map,
            rank,
            size: n,
            wait,
            futex: wait == WaitPolicy::Futex,
            timeout,
            tx,
            rx,
            sendq: (0..n).map(|_| VecDeque::new()).collect(),
            pending_sends: 0,
            matcher: Matcher::new(),
            reqs: ReqTable::new(),
            deps: Vec::new(),
            dead: vec![None; n as usize],
            watch: Vec::new(),
            finished: false,
            fault: None,
        };
        ep.await_all_attached()?;
        ep.measure_handoff();
        Ok(ep)
    }

    /// Block until every rank has mapped the segment and published its pid; then watch them.
    fn await_all_attached(&mut self) -> Result<()> {
        let start = monotonic_ns();
        let mut watch: Vec<Option<Watch>> = (0..self.size).map(|_| None).collect();
        loop {
            let mut missing = Vec::new();
            for p in 0..self.size {
                let s = self.map.slot(p);
                let st = s.state.load(Ordering::Acquire);
                let pid = s.pid.load(Ordering::Acquire);
                if st == ST_FAILED {
                    return Err(Error::PeerLost {
                        peer: p,
                        detail: "it failed while the ranks were attaching to the segment".into(),
                    });
                }
                if st == ST_EMPTY || pid == 0 {
                    missing.push(p);
                    continue;
                }
                let w = watch[p as usize].get_or_insert_with(|| Watch::new(pid));
                if st == ST_MAPPED && w.gone() {
                    return Err(Error::PeerLost {
                        peer: p,
                        detail: format!("process {pid} exited or was killed while attaching"),
                    });
                }
            }
            if missing.is_empty() {
                break;
            }
            if monotonic_ns().saturating_sub(start) > self.timeout.as_nanos() as u64 {
                return Err(Error::Timeout {
                    rank: self.rank,
                    what: format!("ranks {missing:?} to attach to the shared-memory segment"),
                    timeout: self.timeout,
                });
            }
            std::thread::sleep(Duration::from_micros(50));
        }
        self.watch = watch
            .into_iter()
            .map(|w| w.unwrap_or(Watch::Myself))
            .collect();
        Ok(())
    }

    /// Ranks 0 and 1 bounce a cache line through the segment ([`handoff`]); rank 0 records
    /// the one-way time in its info (`cache_handoff`), an upper bound on what any message
    /// between them can do. Every rank has attached: both are there to answer.
    fn measure_handoff(&mut self) {
        if self.size < 2 {
            return;
        }
        let line = &self.map.handoff(self.size).flag;
        match self.rank {
            0 => {
                if let Some(h) = handoff::lead(line) {
                    self.info.insert(HANDOFF_KEY.into(), h.to_json());
                }
            }
            1 => handoff::follow(line, self.timeout),
            _ => {}
        }
    }

    /// Record the pinning in effect in the backend info.
    pub(crate) fn record_affinity(&mut self, requested: Option<usize>, actual: &[usize]) {
        commbench_core::launch::affinity::record(&mut self.info, requested, actual);
    }

    /// The program returned successfully: deliver queued sends and tell the peers.
    pub(crate) fn finish(&mut self) -> Result<()> {
        let mut w = Waiter::default();
        while self.pending_sends > 0 {
            self.progress();
            let Some(d) = self.sendq.iter().position(|q| !q.is_empty()) else {
                break;
            };
            if self.pending_sends == 0 {
                break;
            }
            match self.idle(&mut w, Dep::Send(d as Rank, 0), None) {
                // Its sends were dropped with it: drain the others'.
                Err(e) if self.dead[d].is_some() && matches!(e, Error::PeerLost { .. }) => {}
                r => r?,
            }
        }
        self.map
            .slot(self.rank)
            .state
            .store(ST_FINISHED, Ordering::Release);
        self.finished = true;
        self.wake_all();
        Ok(())
    }

    fn wake_all(&self) {
        for p in (0..self.size as usize).filter(|&p| p != self.rank as usize) {
            notify(&self.map, self.futex, p);
        }
    }

    fn set_dep(&mut self, req: ReqId, dep: Dep) {
        let i = (req.0 & 0xFFFF_FFFF) as usize;
        if i >= self.deps.len() {
            self.deps.resize(i + 1, (Dep::Drain, req));
        }
        self.deps[i] = (dep, req);
    }

    /// A send to `p` or a receive from it alone: refused once its process is gone.
    fn check_live(&self, p: Rank) -> Result<()> {
        match self.dead.get(p as usize).and_then(Clone::clone) {
            Some(detail) => Err(Error::PeerLost { peer: p, detail }),
            None => Ok(()),
        }
    }

    fn dep(&self, req: ReqId) -> Dep {
        self.deps
            .get((req.0 & 0xFFFF_FFFF) as usize)
            .map_or(Dep::Drain, |d| d.0)
    }

    fn check_dest(&self, dest: Rank, len: usize) -> Result<()> {
        check_rank("destination", dest, self.size)?;
        self.check_live(dest)?;
        if len > MAX_MSG {
            return Err(Error::Invalid(format!(
                "shm: a message of {len} bytes is over the backend's limit of {MAX_MSG} bytes"
            )));
        }
        Ok(())
    }

    /// Write as much of a send as the ring to `d` takes now; true once it is all written.
    fn write_some(&mut self, d: usize, tag: Tag, data: &[u8], st: &mut TxState) -> bool {
        let t = &mut self.tx[d];
        let len = data.len() as u64;
        if !st.started {
            let rec = align16(HDR + len);
            if rec <= t.cap / 4 {
                if t.free() < rec {
                    t.reload();
                    if t.free() < rec {
                        return false;
                    }
                }
                let pos = t.head;
                t.write(pos + HDR, data);
                t.write_header(pos, tag, len as u32);
                t.stamp(pos + rec).store(0, Ordering::Relaxed);
                t.stamp(pos).store(pos + 1, Ordering::Release);
                t.head = pos + rec;
                t.ctrl().head.store(t.head, Ordering::Release);
                notify(&self.map, self.futex, d);
                return true;
            }
            if t.free() < HDR {
                t.reload();
                if t.free() < HDR {
                    return false;
                }
            }
            let pos = t.head;
            t.write_header(pos, tag, len as u32);
            t.head = pos + HDR;
            t.ctrl().head.store(t.head, Ordering::Release);
            t.stamp(pos)
                .store((pos + 1) | STREAM_BIT, Ordering::Release);
            st.started = true;
            st.off = 0;
        }
        let mut wrote = false;
        loop {
            let remaining = len - st.off as u64;
            let final_need = align16(t.head + remaining) - t.head;
            if t.free() < final_need.min(CHUNK) {
                t.reload();
            }
            let free = t.free();
            let mut k = remaining.min(CHUNK).min(free);
            if k == remaining && final_need > free {
                k = remaining - 1;
            }
            if k == 0 {
                break;
            }
            let off = st.off;
            t.write(t.head, &data[off..off + k as usize]);
            t.head += k;
            st.off += k as usize;
            let done = st.off == data.len();
            if done {
                t.head = align16(t.head);
                t.stamp(t.head).store(0, Ordering::Relaxed);
            }
            t.ctrl().head.store(t.head, Ordering::Release);
            wrote = true;
            if done {
                break;
            }
        }
        if wrote {
            notify(&self.map, self.futex, d);
        }
        st.off == data.len()
    }

    /// Consume whatever ring `p` holds: match headers, copy payloads. True if anything moved.
    fn progress_rx(&mut self, p: usize) -> bool {
        let ShmEndpoint {
            rx,
            matcher,
            reqs,
            map,
            futex,
            fault,
            ..
        } = self;
        let (rx, futex) = (&mut rx[p], *futex);
        let mut did = false;
        let mut dirty = false;
        loop {
            if let RxState::Idle = rx.state {
                let Some((tag, len)) = rx.next_header() else {
                    break;
                };
                rx.state = match matcher.match_arrival(p as Rank, tag) {
                    Some(pr) => into_receive(matcher, reqs, p, pr, tag, len, 0),
                    None => match unexpected_buffer(matcher, len, p, tag) {
                        Ok(buf) => RxState::Unexp {
                            buf,
                            tag,
                            len,
                            got: 0,
                        },
                        Err(e) => {
                            // Consumed and dropped, so the ring stays in step; the next
                            // operation reports why.
                            fault.get_or_insert(e);
                            RxState::Discard { len, got: 0 }
                        }
                    },
                };
                did = true;
            }
            if !rx.payload_done() {
                if !rx.copy_published() {
                    break;
                }
                did = true;
                if !rx.payload_done() {
                    // Streaming: hand the space back at once so the producer keeps going.
                    rx.ctrl().tail.store(rx.tail, Ordering::Release);
                    dirty = false;
                    notify(map, futex, p);
                    continue;
                }
            }
            // The record is complete.
            rx.tail = align16(rx.tail);
            dirty = true;
            match std::mem::replace(&mut rx.state, RxState::Idle) {
                RxState::Direct { recv, tag, len, .. } => {
                    matcher.landed(reqs, recv, p as Rank, tag, len)
                }
                RxState::Unexp { buf, tag, .. } => matcher.push_unexpected(p as Rank, tag, buf),
                RxState::Discard { .. } | RxState::Idle => {}
            }
        }
        if dirty {
            rx.ctrl().tail.store(rx.tail, Ordering::Release);
            notify(map, futex, p);
        }
        did
    }

    /// Push queued sends to `d`. True if anything moved.
    fn progress_tx(&mut self, d: usize) -> bool {
        let mut did = false;
        while let Some(mut ps) = self.sendq[d].pop_front() {
            let before = (ps.st.started, ps.st.off);
            let mut st = ps.st;
            if self.write_some(d, ps.tag, ps.payload(), &mut st) {
                did = true;
                if ps.left > 1 {
                    // The next record of a span posted several times.
                    ps.left -= 1;
                    ps.st = TxState::default();
                    self.sendq[d].push_front(ps);
                    continue;
                }
                self.pending_sends -= 1;
                self.reqs.complete(ps.req, Ok(ps.done(d as Rank)));
            } else {
                ps.st = st;
                did |= before != (ps.st.started, ps.st.off);
                self.sendq[d].push_front(ps);
                break;
            }
        }
        did
    }

    /// One pass over every incoming ring and every queued send. True if anything moved.
    fn progress(&mut self) -> bool {
        let me = self.rank as usize;
        let mut did = false;
        for p in 0..self.size as usize {
            if p != me && self.dead[p].is_none() {
                did |= self.progress_rx(p);
            }
        }
        if self.pending_sends > 0 {
            for d in 0..self.size as usize {
                if d != me && !self.sendq[d].is_empty() {
                    did |= self.progress_tx(d);
                }
            }
        }
        did
    }

    /// Blocking-receive fast path: the next record of ring `s` is a complete inline message
    /// that `sel` accepts and `buf` holds: copy it out and release it, no queues involved.
    fn try_inline(&mut self, s: usize, sel: TagSel, buf: &mut Vec<u8>) -> Fast {
        let rx = &mut self.rx[s];
        if !matches!(rx.state, RxState::Idle) {
            return Fast::Other;
        }
        let stamp = rx.stamp(rx.tail).load(Ordering::Acquire);
        if stamp != rx.tail + 1 {
            return if stamp & !STREAM_BIT == rx.tail + 1 {
                Fast::Other
            } else {
                Fast::Empty
            };
        }
        let (tag, len32) = rx.header(rx.tail);
        let len = len32 as usize;
        if !sel.accepts(tag) || len > buf.len() {
            return Fast::Other;
        }
        Rx::read_raw(rx.data, rx.cap, rx.tail + HDR, &mut buf[..len]);
        rx.tail = align16(rx.tail + HDR + len as u64);
        rx.ctrl().tail.store(rx.tail, Ordering::Release);
        notify(&self.map, self.futex, s);
        Fast::Done(Completion::recv(std::mem::take(buf), s as Rank, tag, len))
    }

    /// A send to this very rank: matched and copied at once.
    fn self_send(&mut self, tag: Tag, data: &[u8]) {
        self.matcher
            .deliver_copy(&mut self.reqs, self.rank, tag, data);
    }

    /// A receive just queued as posted may match messages whose payload is still streaming
    /// into an unexpected buffer (they arrived before the receive was posted): take them over,
    /// one per ring, as long as the receive is queued (a span posted several times may take
    /// several).
    fn adopt_partial(&mut self, req: ReqId, src: Src, sel: TagSel) {
        for p in 0..self.size as usize {
            let hit = matches!(&self.rx[p].state,
                RxState::Unexp { tag, .. } if src.accepts(p as Rank) && sel.accepts(*tag));
            if !hit {
                continue;
            }
            let Some(mut recv) = self.matcher.take_posted(req) else {
                return;
            };
            if let RxState::Unexp {
                buf: tmp,
                tag,
                len,
                got,
            } = std::mem::replace(&mut self.rx[p].state, RxState::Idle)
            {
                if len <= recv.cap {
                    recv.dest(got).copy_from_slice(&tmp[..got]);
                }
                let (m, reqs) = (&mut self.matcher, &mut self.reqs);
                self.rx[p].state = into_receive(m, reqs, p, recv, tag, len, got);
            }
        }
    }

    fn describe(&self, dep: Dep, req: Option<ReqId>) -> String {
        let r = req.map_or(String::new(), |r| format!("request {}: ", r.0));
        match dep {
            Dep::Recv(Src::Rank(s), t) => format!("{r}a receive from rank {s} ({})", tag_text(t)),
            Dep::Recv(Src::Any, t) => format!("{r}a receive from any rank ({})", tag_text(t)),
            Dep::Send(d, t) => format!("{r}a send to rank {d} (tag {t})"),
            Dep::Drain => format!("{r}queued sends to drain"),
        }
    }

    /// Peers that failed or whose process is gone are lost ([`Self::lose_peer`]); the wait
    /// ends when it depends on one of them. A finished peer that the wait depends on is noted
    /// (the caller makes one more progress pass before it is an error).
    fn check_peers(&mut self, dep: Dep, w: &mut Waiter) -> Result<()> {
        let me = self.rank;
        let mut all_finished = true;
        for p in (0..self.size).filter(|&p| p != me) {
            if self.dead[p as usize].is_some() {
                continue;
            }
            let s = self.map.slot(p);
            let st = s.state.load(Ordering::Acquire);
            let why = if st == ST_FAILED {
                Some(format!("it failed and left the run while rank {me} waited"))
            } else if st != ST_FINISHED && self.watch.get(p as usize).is_some_and(Watch::gone) {
                Some(format!(
                    "process {} exited or was killed while rank {me} waited",
                    s.pid.load(Ordering::Relaxed)
                ))
            } else {
                None
            };
            match why {
                Some(detail) => self.lose_peer(p, detail),
                None => all_finished &= st == ST_FINISHED,
            }
        }
        if let Some(e) = self.dead_dep(dep) {
            return Err(e);
        }
        let finished = |p: Rank| self.map.slot(p).state.load(Ordering::Acquire) == ST_FINISHED;
        w.finished_peer = match dep {
            Dep::Recv(Src::Rank(s), _) | Dep::Send(s, _) if s != me && finished(s) => Some(s),
            Dep::Recv(Src::Any, _) if self.size > 1 && all_finished => {
                Some(if me == 0 { 1 } else { 0 })
            }
            _ => None,
        };
        Ok(())
    }

    /// The error of a wait on `dep` when the one peer it depends on is gone.
    fn dead_dep(&self, dep: Dep) -> Option<Error> {
        let p = match dep {
            Dep::Recv(Src::Rank(p), _) | Dep::Send(p, _) => p,
            _ => return None,
        };
        let detail = self.dead.get(p as usize)?.clone()?;
        Some(Error::PeerLost { peer: p, detail })
    }

    /// Peer `p`'s process is gone (`detail`: how it was seen): the sends queued for it, the
    /// receive its message was being copied into and the receives posted for it alone fail;
    /// its ring is no longer read (a record it left half written would be read as garbage),
    /// and new sends to it or receives from it are refused. Everything else goes on.
    fn lose_peer(&mut self, p: Rank, detail: String) {
        let lost = || Error::PeerLost {
            peer: p,
            detail: detail.clone(),
        };
        let i = p as usize;
        for q in self.sendq[i].drain(..) {
            self.reqs.complete(q.req, Err(lost()));
            self.pending_sends -= 1;
        }
        if let RxState::Direct { recv, .. } =
            std::mem::replace(&mut self.rx[i].state, RxState::Idle)
        {
            self.matcher.refuse(&mut self.reqs, recv, lost());
        }
        for &(dep, req) in &self.deps {
            if matches!(dep, Dep::Recv(Src::Rank(s), _) if s == p)
                && self.reqs.is_pending(req)
                && self.matcher.cancel(req).is_some()
            {
                self.reqs.complete(req, Err(lost()));
            }
        }
        self.dead[i] = Some(detail);
    }

    /// Nothing completed on this pass: wait a little per the policy, check liveness and the
    /// timeout now and then.
    fn idle(&mut self, w: &mut Waiter, dep: Dep, req: Option<ReqId>) -> Result<()> {
        if let Some(e) = self.fault.take() {
            return Err(e);
        }
        if let Some(p) = w.finished_peer {
            return Err(Error::PeerLost {
                peer: p,
                detail: format!(
                    "it finished its program while rank {} still waits for {}",
                    self.rank,
                    self.describe(dep, req)
                ),
            });
        }
        w.spins = w.spins.wrapping_add(1);
        let relaxed = self.wait != WaitPolicy::Spin && w.spins >= 64;
        // The clock is first read after 64 spins: a wait that ends sooner (a small message in
        // a ping-pong) reads no clock inside the timed region; timeouts and liveness checks
        // are late by those few spins at most.
        if relaxed || w.spins % 64 == 0 {
            let now = monotonic_ns();
            if w.start == 0 {
                w.start = now;
                w.last_check = now;
            } else if now.saturating_sub(w.last_check) >= CHECK_NS {
                w.last_check = now;
                self.check_peers(dep, w)?;
            }
            if now.saturating_sub(w.start) >= self.timeout.as_nanos() as u64 {
                return Err(Error::Timeout {
                    rank: self.rank,
                    what: self.describe(dep, req),
                    timeout: self.timeout,
                });
            }
        }
        match self.wait {
            WaitPolicy::Spin => std::hint::spin_loop(),
            WaitPolicy::SpinYield if relaxed => {
                let _ = nix::sched::sched_yield();
            }
            WaitPolicy::Futex if w.spins >= 256 => self.sleep(dep),
            _ => std::hint::spin_loop(),
        }
        Ok(())
    }

    /// Futex policy: announce the sleep, look once more, then sleep until a peer rings.
    fn sleep(&mut self, dep: Dep) {
        let me = self.rank;
        let seq = {
            let s: &RankSlot = self.map.slot(me);
            let seq = s.doorbell.load(Ordering::Acquire);
            s.waiting.store(1, Ordering::SeqCst);
            seq
        };
        fence(Ordering::SeqCst);
        let mut ready = self.progress();
        if let Dep::Send(d, _) = dep {
            let t = &self.tx.get(d as usize);
            if let Some(t) = t.filter(|t| !t.ctrl.is_null()) {
                ready |= t.ctrl().tail.load(Ordering::Acquire) != t.tail_cache;
            }
        }
        let s = self.map.slot(me);
        if !ready {
            futex_wait(&s.doorbell, seq, FUTEX_SLEEP);
        }
        s.waiting.store(0, Ordering::Relaxed);
    }
}

impl Rx {
    /// The tag and length of the record at the read position once its stamp is published, and
    /// the read position moved past its header; `None` while there is none.
    #[inline]
    fn next_header(&mut self) -> Option<(Tag, usize)> {
        let stamp = self.stamp(self.tail).load(Ordering::Acquire);
        if stamp & !STREAM_BIT != self.tail + 1 {
            return None;
        }
        let (tag, len32) = self.header(self.tail);
        let len = len32 as usize;
        self.tail += HDR;
        if stamp & STREAM_BIT == 0 {
            // An inline record is published whole with its stamp.
            self.head_cache = self.head_cache.max(self.tail + len as u64);
        }
        Some((tag, len))
    }

    /// Whether the current record's payload is all consumed (true between records).
    #[inline]
    fn payload_done(&self) -> bool {
        match &self.state {
            RxState::Direct { len, got, .. }
            | RxState::Unexp { len, got, .. }
            | RxState::Discard { len, got } => got >= len,
            RxState::Idle => true,
        }
    }

    /// Consume what is published of the current record's payload, up to its end: copied into
    /// the receive's or the unexpected buffer, or dropped. False when nothing is published.
    #[inline]
    fn copy_published(&mut self) -> bool {
        let mut avail = self.head_cache.saturating_sub(self.tail);
        if avail == 0 {
            self.head_cache = self.ctrl().head.load(Ordering::Acquire);
            avail = self.head_cache.saturating_sub(self.tail);
            if avail == 0 {
                return false;
            }
        }
        let (data, cap, pos) = (self.data, self.cap, self.tail);
        let take = match &mut self.state {
            RxState::Direct { recv, len, got, .. } => {
                let take = avail.min((*len - *got) as u64) as usize;
                Rx::read_raw(data, cap, pos, &mut recv.dest(*len)[*got..*got + take]);
                *got += take;
                take
            }
            RxState::Unexp { buf, len, got, .. } => {
                let take = avail.min((*len - *got) as u64) as usize;
                Rx::read_raw(data, cap, pos, &mut buf[*got..*got + take]);
                *got += take;
                take
            }
            RxState::Discard { len, got } => {
                let take = avail.min((*len - *got) as u64) as usize;
                *got += take;
                take
            }
            RxState::Idle => 0,
        };
        self.tail += take as u64;
        true
    }

    #[inline]
    fn read_raw(data: *mut u8, cap: u64, pos: u64, dst: &mut [u8]) {
        let off = (pos & (cap - 1)) as usize;
        let first = dst.len().min(cap as usize - off);
        // SAFETY: as Rx::read: only published bytes, split at the end of the data area.
        unsafe {
            std::ptr::copy_nonoverlapping(data.add(off), dst.as_mut_ptr(), first);
            if first < dst.len() {
                std::ptr::copy_nonoverlapping(data, dst.as_mut_ptr().add(first), dst.len() - first);
            }
        }
    }
}

fn tag_text(t: TagSel) -> String {
    match t {
        TagSel::Any => "any tag".into(),
        TagSel::Tag(t) => format!("tag {t}"),
    }
}

impl Drop for ShmEndpoint {
    fn drop(&mut self) {
        if !self.finished {
            // Leaving without finishing (error or panic): tell the peers at once.
            self.map
                .slot(self.rank)
                .state
                .store(ST_FAILED, Ordering::Release);
            self.wake_all();
        }
    }
}

impl Endpoint for ShmEndpoint {
    commbench_core::endpoint_identity! {
        backend: "shm", rank: rank, size: size, timeout: timeout
    }

    /// Dropped as a peer whose process is gone (`lose_peer`): its ring is no
    /// longer read, what was queued for it is dropped, and what involves it fails.
    fn forget(&mut self, peer: Rank) {
        if peer != self.rank && self.dead.get(peer as usize).is_some_and(Option::is_none) {
            self.lose_peer(peer, FORGOTTEN.into());
        }
    }

    fn isend(&mut self, dest: Rank, tag: Tag, buf: Vec<u8>) -> Result<ReqId> {
        self.check_dest(dest, buf.len())?;
        let req = self.reqs.alloc();
        self.set_dep(req, Dep::Send(dest, tag));
        if dest == self.rank {
            self.self_send(tag, &buf);
            self.reqs
                .complete(req, Ok(Completion::send(buf, dest, tag)));
            return Ok(req);
        }
        let d = dest as usize;
        let mut st = TxState::default();
        if self.sendq[d].is_empty() && self.write_some(d, tag, &buf, &mut st) {
            self.reqs
                .complete(req, Ok(Completion::send(buf, dest, tag)));
            return Ok(req);
        }
        let len = buf.len();
        self.sendq[d].push_back(PendingSend {
            req,
            tag,
            buf,
            st,
            start: 0,
            len,
            left: 1,
        });
        self.pending_sends += 1;
        Ok(req)
    }

    /// A span posted several times writes its record `count` times, straight into the ring
    /// while it has room and nothing is queued before it, the rest queued as one send; a span
    /// to this very rank is delivered `count` times at once.
    fn isend_span(&mut self, dest: Rank, tag: Tag, buf: Vec<u8>, span: Span) -> Result<ReqId> {
        span.range(buf.len())?;
        if span.is_whole(buf.len()) {
            return self.isend(dest, tag, buf);
        }
        self.check_dest(dest, span.len)?;
        let req = self.reqs.alloc();
        self.set_dep(req, Dep::Send(dest, tag));
        let mut ps = PendingSend {
            req,
            tag,
            buf,
            st: TxState::default(),
            start: span.start,
            len: span.len,
            left: span.count,
        };
        if dest == self.rank {
            for _ in 0..span.count {
                let data = ps.payload();
                self.matcher.deliver_copy(&mut self.reqs, dest, tag, data);
            }
            self.reqs.complete(req, Ok(ps.done(dest)));
            return Ok(req);
        }
        let d = dest as usize;
        if self.sendq[d].is_empty() {
            let mut st = TxState::default();
            while self.write_some(d, tag, ps.payload(), &mut st) {
                if ps.left == 1 {
                    self.reqs.complete(req, Ok(ps.done(dest)));
                    return Ok(req);
                }
                ps.left -= 1;
                st = TxState::default();
            }
            ps.st = st;
        }
        self.sendq[d].push_back(ps);
        self.pending_sends += 1;
        Ok(req)
    }

    fn irecv(&mut self, src: Src, tag: TagSel, buf: Vec<u8>) -> Result<ReqId> {
        if let Src::Rank(s) = src {
            check_rank("source", s, self.size)?;
            self.check_live(s)?;
        }
        let req = self.reqs.alloc();
        self.set_dep(req, Dep::Recv(src, tag));
        match self.matcher.post_recv(req, src, tag, buf) {
            Some(res) => self.reqs.complete(req, res),
            None => self.adopt_partial(req, src, tag),
        }
        Ok(req)
    }

    /// The matcher takes the span: its messages land at `span.start` of `buf`.
    fn irecv_span(&mut self, src: Src, tag: TagSel, buf: Vec<u8>, span: Span) -> Result<ReqId> {
        span.range(buf.len())?;
        if span.is_whole(buf.len()) {
            return self.irecv(src, tag, buf);
        }
        if let Src::Rank(s) = src {
            check_rank("source", s, self.size)?;
            self.check_live(s)?;
        }
        let req = self.reqs.alloc();
        self.set_dep(req, Dep::Recv(src, tag));
        match self.matcher.post_recv_span(req, src, tag, buf, span) {
            Some(res) => self.reqs.complete(req, res),
            None => self.adopt_partial(req, src, tag),
        }
        Ok(req)
    }

    fn test(&mut self, req: ReqId) -> Result<Option<Completion>> {
        self.progress();
        if let Some(e) = self.fault.take() {
            return Err(e);
        }
        self.reqs.take(req)
    }

    fn wait(&mut self, req: ReqId) -> Result<Completion> {
        if let Some(c) = self.reqs.take(req)? {
            return Ok(c);
        }
        let mut w = Waiter::default();
        loop {
            self.progress();
            if let Some(c) = self.reqs.take(req)? {
                return Ok(c);
            }
            let dep = self.dep(req);
            self.idle(&mut w, dep, Some(req))?;
        }
    }

    fn send(&mut self, dest: Rank, tag: Tag, buf: Vec<u8>) -> Result<Vec<u8>> {
        self.check_dest(dest, buf.len())?;
        let d = dest as usize;
        if dest == self.rank || !self.sendq[d].is_empty() {
            let r = self.isend(dest, tag, buf)?;
            return Ok(self.wait(r)?.buf);
        }
        // Direct path: write from the caller's buffer, draining incoming rings while the ring
        // to `dest` is full so two ranks sending large messages to each other cannot deadlock.
        let mut st = TxState::default();
        if self.write_some(d, tag, &buf, &mut st) {
            return Ok(buf);
        }
        let mut w = Waiter::default();
        loop {
            self.progress();
            if self.write_some(d, tag, &buf, &mut st) {
                return Ok(buf);
            }
            self.idle(&mut w, Dep::Send(dest, tag), None)?;
        }
    }

    fn recv(&mut self, src: Src, tag: TagSel, mut buf: Vec<u8>) -> Result<Completion> {
        // Fast path: a receive from one peer with nothing queued that could match first.
        if let Src::Rank(s) = src {
            let me = self.rank;
            if s != me
                && s < self.size
                && self.dead[s as usize].is_none()
                && self.matcher.posted_len() == 0
                && self.matcher.unexpected_len() == 0
            {
                let s = s as usize;
                let mut w = Waiter::default();
                loop {
                    match self.try_inline(s, tag, &mut buf) {
                        Fast::Done(c) => return Ok(c),
                        Fast::Other => break,
                        Fast::Empty => {}
                    }
                    // Keep every other ring and queued send moving meanwhile.
                    for p in (0..self.size as usize).filter(|&p| p != s && p != me as usize) {
                        if self.dead[p].is_none() {
                            self.progress_rx(p);
                        }
                    }
                    if self.pending_sends > 0 {
                        self.progress();
                    }
                    if self.matcher.unexpected_len() > 0 || self.matcher.posted_len() > 0 {
                        break;
                    }
                    self.idle(&mut w, Dep::Recv(src, tag), None)?;
                    if !matches!(self.rx[s].state, RxState::Idle)
                        || self.matcher.unexpected_len() > 0
                    {
                        break;
                    }
                }
            }
        }
        let r = self.irecv(src, tag, buf)?;
        self.wait(r)
    }

    fn info(&self) -> BackendInfo {
        self.info.clone()
    }
}
