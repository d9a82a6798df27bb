//! The tag-matching engine raw transports share (design §3): a posted-receive queue and an
//! unexpected-message queue with MPI's rules, hashed on the message envelope.
//!
//! * A posted receive first searches the unexpected messages, oldest first; a hit completes it
//!   at once (the payload is copied out of the unexpected buffer).
//! * An arriving message searches the posted receives, oldest first; a hit removes that
//!   receive and the transport lands the payload straight in its buffer. A miss is queued
//!   unexpected.
//! * Messages from one sender therefore match in the order they were sent (non-overtaking),
//!   as long as the transport delivers each sender's messages in order.
//! * A receive posted several times at once ([`Matcher::post_recv_span`], osu_bw's window on
//!   one buffer) matches as that many receives posted in a row would: it takes unexpected
//!   messages when posted, then stays queued in its place, one entry, until its last message
//!   has matched, and completes when the last payload is in.
//!
//! # Structure
//!
//! Underwood & Brightwell §5.1 found Quadrics Elan4 hashing the posted receives on the MPI
//! envelope: a message whose receive sat behind a thousand others with different tags matched
//! without walking them, until the benchmark wildcarded the source, which defeats the hash and
//! brings back the full walk. This engine does the same:
//!
//! * Posted receives: each gets a sequence number when it is queued. Exact receives
//!   ([`Src::Rank`] and [`TagSel::Tag`]) sit in first-in first-out buckets keyed by
//!   (source, tag); receives with any wildcard sit in one list, oldest first. An arriving
//!   (source, tag) looks at the front of its bucket (the oldest exact receive that accepts it)
//!   and walks the wildcard list for the first receive that accepts it, stopping once the
//!   list's sequence numbers pass the exact candidate's. The smaller sequence number wins: the
//!   oldest posted receive that accepts the message, as MPI requires.
//! * Unexpected messages: each gets a sequence number when it is pushed (so their order is
//!   push order). They sit in one store, oldest first, and each (source, tag) keeps a bucket
//!   of the sequence numbers of its messages. An exact receive takes the front of its bucket
//!   and finds that message in the store at once: the store's numbers run on without gaps
//!   (holes keep theirs), so it sits at its number less the first one's. A receive with a
//!   wildcard walks the store oldest first and takes the first message it accepts, which is
//!   also the front of that message's bucket. The store is a contiguous ring in which taken
//!   messages leave holes (trimmed at both ends at once; compacted, and the messages and
//!   buckets renumbered, when they outnumber the messages): the wildcard walk runs over
//!   contiguous memory as the linear queue did, and a message pushed and taken costs no
//!   allocation, where a tree keyed by sequence number would allocate and free nodes as it
//!   grows and shrinks and find a message in O(log n) rather than O(1).
//!
//! [`TagSel::Any`] never accepts the control-plane tags above [`crate::transport::TAG_UB`];
//! an exact receive for one is hashed like any other tag.
//!
//! Buckets that empty are kept, so a ping-pong that posts and matches the same envelope again
//! and again allocates nothing; they are dropped only when a new bucket is needed and empty
//! ones are many (more than 1024 buckets and more than twice the entries queued).
//!
//! [`Matcher::searched`] counts the queue entries inspected, as the queue benchmarks of
//! Underwood & Brightwell measure them: the front of a bucket counts one, and so does every
//! wildcard receive or unexpected message a walk tests. An exact message behind 1024 posted
//! receives for other tags therefore inspects one entry; behind 1024 wildcard-source
//! receives, 1025.
//!
//! [`ReqTable`] is a slab of request slots that raw transports use to hand out [`ReqId`]s and
//! park completions until [`crate::transport::Endpoint::test`] collects them.

use crate::transport::error::{Error, Result};
use crate::transport::{Completion, OpKind, Rank, ReqId, Span, Src, Tag, TagSel};
use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasherDefault, Hasher};

/// A receive waiting for a message, or (from [`Matcher::match_arrival`]) the place a matched
/// message's payload lands in: `buf[start..start + len]` for a message of `len` bytes.
#[derive(Debug)]
pub struct PostedRecv {
    /// Its request.
    pub req: ReqId,
    /// Accepted source.
    pub src: Src,
    /// Accepted tag.
    pub tag: TagSel,
    /// The buffer the payload goes into.
    pub buf: Vec<u8>,
    /// Offset in `buf` of the payload's first byte.
    pub start: usize,
    /// The most bytes the payload may have (`start + cap` is at most `buf.len()`).
    pub cap: usize,
    /// `Some(i)`: the message is the `i`-th (from 0) of a receive posted several times at once
    /// ([`Matcher::post_recv_span`]); `buf` is then that receive's buffer or, while another
    /// of its messages is landing there, a scratch buffer. Either way the transport hands the
    /// place back through [`Matcher::landed`] or [`Matcher::refuse`].
    pub part: Option<u32>,
}

impl PostedRecv {
    /// The bytes a payload of `len` bytes lands in (`len` at most [`PostedRecv::cap`]).
    #[inline]
    pub fn dest(&mut self, len: usize) -> &mut [u8] {
        &mut self.buf[self.start..self.start + len]
    }
}

/// A message that arrived before any receive accepted it.
#[derive(Debug)]
pub struct Unexpected {
    /// Sender.
    pub source: Rank,
    /// Tag.
    pub tag: Tag,
    /// The payload (its length is the message length).
    pub data: Vec<u8>,
}

/// The Fx hash (rustc's): one rotate, xor and multiply per word, plenty for two small
/// integers. `finish` rotates the product so that its well-mixed high bits land in the low
/// bits the table indexes by; without that, the source (the key's high half) would never
/// reach them.
#[derive(Debug, Default, Clone, Copy)]
struct FxHasher {
    hash: u64,
}

const FX_K: u64 = 0x517c_c1b7_2722_0a95;

impl FxHasher {
    #[inline]
    fn add(&mut self, word: u64) {
        self.hash = (self.hash.rotate_left(5) ^ word).wrapping_mul(FX_K);
    }
}

impl Hasher for FxHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut w = [0u8; 8];
            w[..chunk.len()].copy_from_slice(chunk);
            self.add(u64::from_le_bytes(w));
        }
    }

    #[inline]
    fn write_u64(&mut self, n: u64) {
        self.add(n);
    }

    #[inline]
    fn finish(&self) -> u64 {
        self.hash.rotate_left(26)
    }
}

/// An exact envelope: the source in the high half, the tag in the low half.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct Key(u64);

impl Key {
    #[inline]
    fn new(source: Rank, tag: Tag) -> Self {
        Key(((source as u64) << 32) | tag as u64)
    }
}

type FxMap<V> = HashMap<Key, V, BuildHasherDefault<FxHasher>>;

/// A queued receive and its sequence number (its place in posting order).
#[derive(Debug)]
struct Queued {
    seq: u64,
    recv: PostedRecv,
}

/// A slot of the unexpected store: a message and its sequence number, or a hole where a taken
/// message was (the number stays, so the store remains sorted for the binary search).
#[derive(Debug)]
struct Stored {
    seq: u64,
    msg: Option<Unexpected>,
}

/// A receive posted several times at once ([`Matcher::post_recv_span`]): its one buffer and
/// how far its messages have got. Its queue entry (with an empty buffer) keeps its place until
/// its last message has matched; it completes when the last payload is in.
///
/// Messages landing in the buffer one after another need nothing more; but two peers' payloads
/// may be on the way at once (a wildcard source). The buffer then goes to the first, and the
/// next lands in a scratch buffer: its bytes are copied in afterwards unless a later message's
/// bytes already are, so the buffer always ends holding the last message matched, as if each
/// message had landed in matching order.
#[derive(Debug)]
struct Repeat {
    /// The buffer, while no landing holds it.
    buf: Option<Vec<u8>>,
    start: usize,
    cap: usize,
    /// Messages the receive takes.
    total: u32,
    /// Messages matched so far: the next one's number.
    matched: u32,
    /// Messages whose payload is in (or was refused).
    done: u32,
    /// The message landing straight in `buf`, while one is.
    lent: Option<u32>,
    /// The message whose bytes `buf` holds.
    written: Option<u32>,
    /// A message later than `lent` that finished in a scratch buffer first: its bytes go in
    /// when `buf` comes back.
    stash: Option<(u32, Vec<u8>)>,
    /// Sender, tag and length of the last message.
    last: (Rank, Tag, usize),
    /// The first message refused (truncated): the receive's outcome.
    error: Option<Error>,
}

impl Repeat {
    /// Message `i` is in hand as `data` (checked to fit): into the buffer when it is here and
    /// holds no later message, kept aside when the buffer is out on an earlier one.
    fn keep(&mut self, i: u32, data: &[u8], pool: &mut Vec<Vec<u8>>) {
        match (&mut self.buf, self.lent) {
            (Some(buf), _) if self.written.map_or(true, |w| w < i) => {
                buf[self.start..self.start + data.len()].copy_from_slice(data);
                self.written = Some(i);
            }
            (None, Some(j)) if i > j && self.stash.as_ref().map_or(true, |s| s.0 < i) => {
                let mut v = pool.pop().unwrap_or_default();
                v.clear();
                v.extend_from_slice(data);
                if let Some((_, old)) = self.stash.replace((i, v)) {
                    recycle(pool, old);
                }
            }
            _ => {}
        }
    }

    /// The buffer comes back from message `i`'s landing (`ok`: its bytes are in it); a later
    /// message's stashed bytes go in.
    fn home(&mut self, i: u32, mut buf: Vec<u8>, ok: bool, pool: &mut Vec<Vec<u8>>) {
        self.lent = None;
        if ok {
            self.written = Some(i);
        }
        if let Some((k, v)) = self.stash.take() {
            buf[self.start..self.start + v.len()].copy_from_slice(&v);
            self.written = Some(k);
            recycle(pool, v);
        }
        self.buf = Some(buf);
    }

    /// Count message `i` in: its envelope when it is the last, its error when it was refused.
    /// True once every message is in.
    fn count(&mut self, i: u32, outcome: Result<(Rank, Tag, usize)>) -> bool {
        self.done += 1;
        match outcome {
            Ok(env) if i + 1 == self.total => self.last = env,
            Ok(_) => {}
            Err(e) => {
                self.error.get_or_insert(e);
            }
        }
        self.done == self.total
    }

    /// The receive's outcome once every message is in.
    fn outcome(mut self) -> Result<Completion> {
        if let Some(e) = self.error.take() {
            return Err(e);
        }
        let (source, tag, len) = self.last;
        Ok(Completion::recv(
            self.buf.take().unwrap_or_default(),
            source,
            tag,
            len,
        ))
    }
}

/// Where a queued receive sits.
#[derive(Debug, Clone, Copy)]
enum Loc {
    Wild(usize),
    Exact(Key, usize),
}

/// What an arriving message matched: a receive taken off its queue, or the next message of a
/// receive posted several times (its request and that message's number).
#[derive(Debug)]
enum Hit {
    Whole(PostedRecv),
    Part(ReqId, u32, Src, TagSel),
}

/// Posted-receive and unexpected-message queues, hashed on (source, tag) (see the module
/// documentation).
#[derive(Debug, Default)]
pub struct Matcher {
    /// Exact receives by envelope, each bucket oldest first; emptied buckets are kept.
    exact: FxMap<VecDeque<Queued>>,
    /// Receives in `exact` (the buckets' total length).
    exact_len: usize,
    /// Receives with a wildcard source or tag, oldest first.
    wild: VecDeque<Queued>,
    /// The sequence number of the next queued receive.
    next_post: u64,
    /// Unexpected messages oldest first, with holes; never a hole at either end.
    store: VecDeque<Stored>,
    /// Holes in `store`.
    holes: usize,
    /// Sequence numbers of the unexpected messages by envelope, oldest first.
    arrived: FxMap<VecDeque<u64>>,
    /// The sequence number of the next unexpected message.
    next_arrival: u64,
    pool: Vec<Vec<u8>>,
    searched: u64,
    /// Receives posted several times at once that have not completed, by request.
    repeats: FxMap<Repeat>,
}

/// Buffers kept for reuse by the unexpected queue.
const POOL_MAX: usize = 64;

/// Empty buckets are dropped only when there are more buckets than this (and more than twice
/// the entries queued).
const PRUNE_MIN: usize = 1024;

/// Holes the unexpected store tolerates before compacting (when they also outnumber the
/// messages).
const HOLES_MIN: usize = 64;

/// The bucket of `key`, made when missing; empty buckets are dropped first when they are many
/// (more than [`PRUNE_MIN`] buckets and more than twice the `live` entries), so the cost of
/// dropping is paid off by the buckets made since.
fn bucket<V>(map: &mut FxMap<VecDeque<V>>, key: Key, live: usize) -> &mut VecDeque<V> {
    let n = map.len();
    if n > PRUNE_MIN && n > 2 * live && !map.contains_key(&key) {
        map.retain(|_, q| !q.is_empty());
    }
    map.entry(key).or_default()
}

impl Matcher {
    /// Empty queues.
    pub fn new() -> Self {
        Self::default()
    }

    /// Post a receive. If an unexpected message matches, the receive completes now and its
    /// completion (or truncation error) is returned; otherwise it is queued and `None` returned.
    ///
    /// An exact receive (one source, one tag) inspects one unexpected message, the oldest of
    /// its envelope, however many others wait; a receive with a wildcard walks the unexpected
    /// messages oldest first, each one tested counting in [`Matcher::searched`].
    #[inline]
    pub fn post_recv(
        &mut self,
        req: ReqId,
        src: Src,
        tag: TagSel,
        buf: Vec<u8>,
    ) -> Option<Result<Completion>> {
        let cap = buf.len();
        self.post_one(req, src, tag, buf, 0, cap)
    }

    /// [`Matcher::post_recv`] of a receive whose messages land at `span.start` of `buf`, at
    /// most `span.len` bytes each, `span.count` times as one request: the receives match one
    /// after another as `span.count` receives posted in that order would, and complete, with
    /// the envelope and length of the last message, when the last one's payload is in (the
    /// first message refused for its length is the outcome instead). It first takes as many
    /// unexpected messages as it accepts; what remains is queued as one entry that keeps its
    /// place in posting order until its last message has matched. A span that does not fit
    /// `buf` is [`Error::Invalid`].
    pub fn post_recv_span(
        &mut self,
        req: ReqId,
        src: Src,
        tag: TagSel,
        buf: Vec<u8>,
        span: Span,
    ) -> Option<Result<Completion>> {
        if let Err(e) = span.range(buf.len()) {
            return Some(Err(e));
        }
        if span.count == 1 {
            return self.post_one(req, src, tag, buf, span.start, span.len);
        }
        let mut r = Repeat {
            buf: Some(buf),
            start: span.start,
            cap: span.len,
            total: span.count,
            matched: 0,
            done: 0,
            lent: None,
            written: None,
            stash: None,
            last: (0, 0, 0),
            error: None,
        };
        while r.matched < r.total {
            let Some(u) = self.take_unexpected(src, tag) else {
                break;
            };
            let i = r.matched;
            r.matched += 1;
            let outcome = fits(r.cap, u.source, u.tag, u.data.len());
            if outcome.is_ok() {
                r.keep(i, &u.data, &mut self.pool);
            }
            r.count(i, outcome);
            recycle(&mut self.pool, u.data);
        }
        if r.done == r.total {
            return Some(r.outcome());
        }
        self.repeats.insert(Key(req.0), r);
        let recv = PostedRecv {
            req,
            src,
            tag,
            buf: Vec::new(),
            start: span.start,
            cap: span.len,
            part: Some(0),
        };
        self.enqueue(recv);
        None
    }

    /// Post a receive of one message landing at `start` of `buf`, at most `cap` bytes.
    #[inline]
    fn post_one(
        &mut self,
        req: ReqId,
        src: Src,
        tag: TagSel,
        buf: Vec<u8>,
        start: usize,
        cap: usize,
    ) -> Option<Result<Completion>> {
        if let Some(u) = self.take_unexpected(src, tag) {
            let res = fill(buf, start, cap, u.source, u.tag, &u.data);
            recycle(&mut self.pool, u.data);
            return Some(res);
        }
        self.enqueue(PostedRecv {
            req,
            src,
            tag,
            buf,
            start,
            cap,
            part: None,
        });
        None
    }

    /// The oldest unexpected message that `src` and `tag` accept, taken out of the store.
    #[inline]
    fn take_unexpected(&mut self, src: Src, tag: TagSel) -> Option<Unexpected> {
        match (src, tag) {
            (Src::Rank(r), TagSel::Tag(t)) => self.take_unexpected_exact(Key::new(r, t)),
            _ => self.take_unexpected_wild(src, tag),
        }
    }

    /// Queue a receive behind every receive posted before it.
    #[inline]
    fn enqueue(&mut self, recv: PostedRecv) {
        let seq = self.next_post;
        self.next_post += 1;
        let (src, tag) = (recv.src, recv.tag);
        let q = Queued { seq, recv };
        match (src, tag) {
            (Src::Rank(r), TagSel::Tag(t)) => {
                bucket(&mut self.exact, Key::new(r, t), self.exact_len).push_back(q);
                self.exact_len += 1;
            }
            _ => self.wild.push_back(q),
        }
    }

    /// The oldest unexpected message of `key`, taken out of the store.
    fn take_unexpected_exact(&mut self, key: Key) -> Option<Unexpected> {
        let seq = self.arrived.get_mut(&key)?.pop_front()?;
        self.searched += 1;
        let i = self.slot_of(seq)?;
        self.take_stored(i)
    }

    /// Where the message numbered `seq` sits in the store (every number in a bucket is
    /// there): the store's numbers run on without gaps, so `seq - front` slots in.
    fn slot_of(&self, seq: u64) -> Option<usize> {
        let front = self.store.front()?.seq;
        let i = usize::try_from(seq.checked_sub(front)?).ok()?;
        self.store.get(i).filter(|s| s.seq == seq).map(|_| i)
    }

    /// The oldest unexpected message that `src` and `tag` accept, taken out of the store and
    /// its bucket.
    fn take_unexpected_wild(&mut self, src: Src, tag: TagSel) -> Option<Unexpected> {
        let mut hit = None;
        for (i, s) in self.store.iter().enumerate() {
            let Some(u) = &s.msg else { continue };
            self.searched += 1;
            if src.accepts(u.source) && tag.accepts(u.tag) {
                hit = Some((i, s.seq, Key::new(u.source, u.tag)));
                break;
            }
        }
        let (i, seq, key) = hit?;
        // Whether a receive accepts a message depends on its envelope only, so the oldest
        // message accepted is the oldest of its envelope: the front of its bucket.
        if let Some(q) = self.arrived.get_mut(&key) {
            debug_assert_eq!(q.front(), Some(&seq));
            q.pop_front();
        }
        self.take_stored(i)
    }

    /// Take the message at `i` of the store, leaving a hole; trim holes off the ends and
    /// compact when they outnumber the messages.
    fn take_stored(&mut self, i: usize) -> Option<Unexpected> {
        let u = self.store.get_mut(i)?.msg.take();
        self.holes += 1;
        while self.store.front().is_some_and(|s| s.msg.is_none()) {
            self.store.pop_front();
            self.holes -= 1;
        }
        while self.store.back().is_some_and(|s| s.msg.is_none()) {
            self.store.pop_back();
            self.holes -= 1;
        }
        // Numbers trimmed off the back are nowhere else: the next message takes the first.
        if let Some(s) = self.store.back() {
            self.next_arrival = s.seq + 1;
        }
        if self.holes > HOLES_MIN && 2 * self.holes > self.store.len() {
            self.compact();
        }
        u
    }

    /// Drop the holes of the unexpected store and number its messages afresh from the first
    /// one's number, so the numbers run on without gaps again; the buckets are renumbered
    /// alike (each message's bucket holds exactly its envelope's messages, in order).
    fn compact(&mut self) {
        self.store.retain(|s| s.msg.is_some());
        self.holes = 0;
        for u in self.store.iter().filter_map(|s| s.msg.as_ref()) {
            if let Some(b) = self.arrived.get_mut(&Key::new(u.source, u.tag)) {
                b.clear();
            }
        }
        let first = self.store.front().map_or(self.next_arrival, |s| s.seq);
        for (n, s) in (first..).zip(self.store.iter_mut()) {
            s.seq = n;
            if let Some(u) = &s.msg {
                if let Some(b) = self.arrived.get_mut(&Key::new(u.source, u.tag)) {
                    b.push_back(n);
                }
            }
        }
        self.next_arrival = first + self.store.len() as u64;
    }

    /// A message from `source` with `tag` is arriving: remove and return the oldest posted
    /// receive that accepts it, if any. The transport lands the payload in its
    /// [`PostedRecv::dest`] and then hands it to [`Matcher::landed`] (or, when the message is
    /// longer than [`PostedRecv::cap`], to [`Matcher::refuse`]). A receive posted several
    /// times stays queued, in its place, until its last message: each arrival it takes is
    /// one [`PostedRecv::part`] of it.
    ///
    /// The front of the (source, tag) bucket counts one inspected entry, whatever the number
    /// of exact receives for other envelopes; the wildcard receives posted before it are walked
    /// oldest first, each one tested counting one in [`Matcher::searched`].
    #[inline]
    pub fn match_arrival(&mut self, source: Rank, tag: Tag) -> Option<PostedRecv> {
        match self.match_entry(source, tag)? {
            Hit::Whole(p) => Some(p),
            Hit::Part(req, i, src, tag) => self.lend(req, i, src, tag),
        }
    }

    /// The search of [`Matcher::match_arrival`]: the oldest receive that accepts the message,
    /// taken off its queue, or the next message of a receive posted several times.
    #[inline]
    fn match_entry(&mut self, source: Rank, tag: Tag) -> Option<Hit> {
        let key = Key::new(source, tag);
        let mut exact = self.exact.get_mut(&key);
        let exact_seq = exact.as_ref().and_then(|q| q.front()).map(|q| q.seq);
        if exact_seq.is_some() {
            self.searched += 1;
        }
        let mut wild = None;
        for (i, q) in self.wild.iter().enumerate() {
            if exact_seq.is_some_and(|e| q.seq > e) {
                break;
            }
            self.searched += 1;
            if q.recv.src.accepts(source) && q.recv.tag.accepts(tag) {
                wild = Some(i);
                break;
            }
        }
        if let Some(i) = wild {
            if self.wild[i].recv.part.is_some() {
                return self.next_part(Loc::Wild(i));
            }
            return self.wild.remove(i).map(|q| Hit::Whole(q.recv));
        }
        let b = exact.as_mut()?;
        if b.front()?.recv.part.is_some() {
            return self.next_part(Loc::Exact(key, 0));
        }
        let q = b.pop_front()?;
        self.exact_len -= 1;
        Some(Hit::Whole(q.recv))
    }

    /// The queued receive at `loc` is posted several times: number its next message, and take
    /// it off its queue when that is its last.
    fn next_part(&mut self, loc: Loc) -> Option<Hit> {
        let q = self.queued_at(loc)?;
        let (req, src, tag) = (q.req, q.src, q.tag);
        let r = self.repeats.get_mut(&Key(req.0))?;
        let i = r.matched;
        r.matched += 1;
        if r.matched == r.total {
            self.remove_at(loc);
        }
        Some(Hit::Part(req, i, src, tag))
    }

    /// Where message `i` of the receive `req` (posted several times) lands: its buffer when
    /// no other message is landing there, else a scratch buffer.
    fn lend(&mut self, req: ReqId, i: u32, src: Src, tag: TagSel) -> Option<PostedRecv> {
        let r = self.repeats.get_mut(&Key(req.0))?;
        let (buf, start) = match r.buf.take() {
            Some(b) => {
                r.lent = Some(i);
                (b, r.start)
            }
            None => {
                let mut b = self.pool.pop().unwrap_or_default();
                b.clear();
                b.resize(r.cap, 0);
                (b, 0)
            }
        };
        Some(PostedRecv {
            req,
            src,
            tag,
            buf,
            start,
            cap: r.cap,
            part: Some(i),
        })
    }

    /// The payload of a message from `source` with `tag`, `len` bytes, is all in `p`'s
    /// [`PostedRecv::dest`]: complete the receive, or count the message in for a receive
    /// posted several times (completed with its last).
    #[inline]
    pub fn landed(
        &mut self,
        reqs: &mut ReqTable,
        p: PostedRecv,
        source: Rank,
        tag: Tag,
        len: usize,
    ) {
        match p.part {
            None => reqs.complete(p.req, Ok(Completion::recv(p.buf, source, tag, len))),
            Some(_) => self.part_landed(reqs, p, Ok((source, tag, len))),
        }
    }

    /// The message that matched `p` does not fit it (or cannot be received): `e` is the
    /// receive's outcome ([`Error::Truncated`]); a receive posted several times still takes
    /// its other messages before it fails with the first such error.
    pub fn refuse(&mut self, reqs: &mut ReqTable, p: PostedRecv, e: Error) {
        match p.part {
            None => reqs.complete(p.req, Err(e)),
            Some(_) => self.part_landed(reqs, p, Err(e)),
        }
    }

    /// A part of a receive posted several times is over: its buffer back home (or its scratch
    /// bytes kept), and the receive completed when it was the last.
    fn part_landed(
        &mut self,
        reqs: &mut ReqTable,
        p: PostedRecv,
        outcome: Result<(Rank, Tag, usize)>,
    ) {
        let (key, i) = (Key(p.req.0), p.part.unwrap_or(0));
        let Some(r) = self.repeats.get_mut(&key) else {
            return;
        };
        let len = outcome.as_ref().map_or(0, |e| e.2);
        if r.lent == Some(i) {
            r.home(i, p.buf, outcome.is_ok(), &mut self.pool);
        } else {
            if outcome.is_ok() {
                r.keep(i, &p.buf[p.start..p.start + len], &mut self.pool);
            }
            recycle(&mut self.pool, p.buf);
        }
        if r.count(i, outcome) {
            if let Some(r) = self.repeats.remove(&key) {
                reqs.complete(p.req, r.outcome());
            }
        }
    }

    /// Message `i` of the receive `req` (posted several times) is in memory as `data`.
    fn part_data(
        &mut self,
        reqs: &mut ReqTable,
        (req, i): (ReqId, u32),
        source: Rank,
        tag: Tag,
        data: &[u8],
    ) {
        let key = Key(req.0);
        let Some(r) = self.repeats.get_mut(&key) else {
            return;
        };
        let outcome = fits(r.cap, source, tag, data.len());
        if outcome.is_ok() {
            r.keep(i, data, &mut self.pool);
        }
        if r.count(i, outcome) {
            if let Some(r) = self.repeats.remove(&key) {
                reqs.complete(req, r.outcome());
            }
        }
    }

    /// A whole message (already in memory: an unexpected payload finished arriving, or a send
    /// to this very rank) is here: complete the oldest posted receive that accepts it, copying
    /// it in or failing with [`Error::Truncated`], or queue it as unexpected. The payload
    /// buffer goes back to the pool once copied. Searches as [`Matcher::match_arrival`] does.
    pub fn deliver(&mut self, reqs: &mut ReqTable, source: Rank, tag: Tag, data: Vec<u8>) {
        match self.match_entry(source, tag) {
            Some(Hit::Whole(p)) => {
                reqs.complete(p.req, fill(p.buf, p.start, p.cap, source, tag, &data));
                recycle(&mut self.pool, data);
            }
            Some(Hit::Part(req, i, ..)) => {
                self.part_data(reqs, (req, i), source, tag, &data);
                recycle(&mut self.pool, data);
            }
            None => self.push_unexpected(source, tag, data),
        }
    }

    /// [`Matcher::deliver`] for a payload borrowed from the caller: copied straight into a
    /// posted receive, or into a pooled buffer when it must wait as unexpected.
    pub fn deliver_copy(&mut self, reqs: &mut ReqTable, source: Rank, tag: Tag, data: &[u8]) {
        match self.match_entry(source, tag) {
            Some(Hit::Whole(p)) => {
                reqs.complete(p.req, fill(p.buf, p.start, p.cap, source, tag, data))
            }
            Some(Hit::Part(req, i, ..)) => self.part_data(reqs, (req, i), source, tag, data),
            None => {
                let mut b = self.unexpected_buffer(data.len());
                b.copy_from_slice(data);
                self.push_unexpected(source, tag, b);
            }
        }
    }

    /// Queue a message that no posted receive accepted. Unexpected messages match in the
    /// order they are pushed, whenever their [`Matcher::match_arrival`] happened.
    pub fn push_unexpected(&mut self, source: Rank, tag: Tag, data: Vec<u8>) {
        let seq = self.next_arrival;
        self.next_arrival += 1;
        let live = self.unexpected_len();
        bucket(&mut self.arrived, Key::new(source, tag), live).push_back(seq);
        let msg = Some(Unexpected { source, tag, data });
        self.store.push_back(Stored { seq, msg });
    }

    /// A buffer of exactly `len` bytes for an unexpected payload, reused when possible.
    pub fn unexpected_buffer(&mut self, len: usize) -> Vec<u8> {
        let mut b = self.pool.pop().unwrap_or_default();
        b.clear();
        b.resize(len, 0);
        b
    }

    /// Receives waiting for a message.
    pub fn posted_len(&self) -> usize {
        self.exact_len + self.wild.len()
    }

    /// Messages waiting for a receive.
    pub fn unexpected_len(&self) -> usize {
        self.store.len() - self.holes
    }

    /// Queue entries inspected so far by both searches (for the queue benchmarks): one for
    /// the front of an envelope's bucket, one for each wildcard receive or unexpected message
    /// a walk tests. An exact (source, tag) therefore costs O(1) entries however many exact
    /// entries for other envelopes wait, while wildcards cost a walk: a message behind 1024
    /// non-matching wildcard-source receives inspects 1025.
    pub fn searched(&self) -> u64 {
        self.searched
    }

    /// Remove a posted receive (cancellation); returns its buffer if it was still queued. It
    /// walks every queued receive (cancellation is rare); should `req` be queued twice, the
    /// oldest goes.
    ///
    /// A receive posted several times at once is cancelled only while none of its messages
    /// has matched (its buffer comes back); once one has, the receive cannot be taken back
    /// (`None`) and goes on taking its messages.
    pub fn cancel(&mut self, req: ReqId) -> Option<Vec<u8>> {
        let loc = self.locate(req)?;
        if self.queued_at(loc)?.part.is_none() {
            return self.remove_at(loc).map(|p| p.buf);
        }
        if self.repeats.get(&Key(req.0))?.matched > 0 {
            return None;
        }
        self.remove_at(loc);
        self.repeats.remove(&Key(req.0))?.buf
    }

    /// Take the queued receive `req` as if a message it accepts had just arrived (a transport
    /// that adopts a message whose header came before the receive was posted): the receive
    /// off its queue, or the next message of one posted several times, as
    /// [`Matcher::match_arrival`] hands them out. `None` when `req` is not queued.
    pub fn take_posted(&mut self, req: ReqId) -> Option<PostedRecv> {
        let loc = self.locate(req)?;
        if self.queued_at(loc)?.part.is_none() {
            return self.remove_at(loc);
        }
        match self.next_part(loc)? {
            Hit::Whole(p) => Some(p),
            Hit::Part(req, i, src, tag) => self.lend(req, i, src, tag),
        }
    }

    /// Where the receive `req` is queued (walking every queue: rare operations only); should
    /// it be queued twice, the oldest.
    fn locate(&self, req: ReqId) -> Option<Loc> {
        let wild = self.wild.iter().position(|q| q.recv.req == req);
        let exact = self
            .exact
            .iter()
            .filter_map(|(k, b)| {
                let i = b.iter().position(|q| q.recv.req == req)?;
                Some((b[i].seq, Loc::Exact(*k, i)))
            })
            .min_by_key(|&(seq, _)| seq);
        match (wild, exact) {
            (Some(i), Some((seq, _))) if self.wild[i].seq < seq => Some(Loc::Wild(i)),
            (Some(i), None) => Some(Loc::Wild(i)),
            (_, e) => e.map(|(_, loc)| loc),
        }
    }

    fn queued_at(&self, loc: Loc) -> Option<&PostedRecv> {
        match loc {
            Loc::Wild(i) => self.wild.get(i),
            Loc::Exact(k, i) => self.exact.get(&k)?.get(i),
        }
        .map(|q| &q.recv)
    }

    fn remove_at(&mut self, loc: Loc) -> Option<PostedRecv> {
        let q = match loc {
            Loc::Wild(i) => self.wild.remove(i)?,
            Loc::Exact(k, i) => {
                let q = self.exact.get_mut(&k)?.remove(i)?;
                self.exact_len -= 1;
                q
            }
        };
        Some(q.recv)
    }
}

/// Keep `b` for reuse as an unexpected-message buffer, unless the pool is full or `b` large.
fn recycle(pool: &mut Vec<Vec<u8>>, b: Vec<u8>) {
    if pool.len() < POOL_MAX && b.capacity() <= 1 << 20 {
        pool.push(b);
    }
}

/// The envelope of a message of `len` bytes from `source` with `tag`, or [`Error::Truncated`]
/// when it is longer than `cap`.
fn fits(cap: usize, source: Rank, tag: Tag, len: usize) -> Result<(Rank, Tag, usize)> {
    if len > cap {
        return Err(Error::Truncated {
            len,
            cap,
            source_rank: source,
            tag,
        });
    }
    Ok((source, tag, len))
}

/// A receive's completion with `data` copied into `buf` at `start`, or [`Error::Truncated`]
/// when it is longer than `cap` (MPI_ERR_TRUNCATE).
fn fill(
    mut buf: Vec<u8>,
    start: usize,
    cap: usize,
    source: Rank,
    tag: Tag,
    data: &[u8],
) -> Result<Completion> {
    let len = data.len();
    if len > cap {
        return Err(Error::Truncated {
            len,
            cap,
            source_rank: source,
            tag,
        });
    }
    buf[start..start + len].copy_from_slice(data);
    Ok(Completion {
        kind: OpKind::Recv,
        buf,
        peer: source,
        tag,
        len,
    })
}

#[derive(Debug)]
enum Slot {
    Free,
    Pending,
    Done(Result<Completion>),
}

/// A slab of request slots: [`ReqId`] = generation << 32 | index, so a stale id is detected.
#[derive(Debug, Default)]
pub struct ReqTable {
    slots: Vec<(u32, Slot)>,
    free: Vec<u32>,
    pending: usize,
}

impl ReqTable {
    /// An empty table.
    pub fn new() -> Self {
        Self::default()
    }

    /// A new pending request.
    pub fn alloc(&mut self) -> ReqId {
        self.pending += 1;
        if let Some(i) = self.free.pop() {
            let s = &mut self.slots[i as usize];
            s.0 = s.0.wrapping_add(1);
            s.1 = Slot::Pending;
            return ReqId(((s.0 as u64) << 32) | i as u64);
        }
        let i = self.slots.len() as u32;
        self.slots.push((0, Slot::Pending));
        ReqId(i as u64)
    }

    fn slot(&mut self, req: ReqId) -> Option<&mut Slot> {
        let i = (req.0 & 0xFFFF_FFFF) as usize;
        let generation = (req.0 >> 32) as u32;
        match self.slots.get_mut(i) {
            Some((g, s)) if *g == generation => Some(s),
            _ => None,
        }
    }

    /// Record the outcome of a pending request. Unknown or finished ids are ignored.
    pub fn complete(&mut self, req: ReqId, outcome: Result<Completion>) {
        if let Some(s) = self.slot(req) {
            if matches!(s, Slot::Pending) {
                *s = Slot::Done(outcome);
            }
        }
    }

    /// Whether `req` is still pending.
    pub fn is_pending(&mut self, req: ReqId) -> bool {
        matches!(self.slot(req), Some(Slot::Pending))
    }

    /// Collect the outcome of `req`: `Ok(None)` while pending; the slot is freed once taken.
    pub fn take(&mut self, req: ReqId) -> Result<Option<Completion>> {
        let i = (req.0 & 0xFFFF_FFFF) as u32;
        let s = self
            .slot(req)
            .ok_or_else(|| Error::Invalid(format!("unknown or finished request {}", req.0)))?;
        match std::mem::replace(s, Slot::Free) {
            Slot::Pending => {
                *s = Slot::Pending;
                Ok(None)
            }
            Slot::Done(r) => {
                self.free.push(i);
                self.pending -= 1;
                r.map(Some)
            }
            Slot::Free => Err(Error::Invalid(format!(
                "unknown or finished request {}",
                req.0
            ))),
        }
    }

    /// Requests posted and not yet collected.
    pub fn outstanding(&self) -> usize {
        self.pending
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Post a receive with no buffer that no unexpected message matches.
    fn queued(m: &mut Matcher, req: ReqId, src: Src, tag: TagSel) {
        assert!(m.post_recv(req, src, tag, vec![]).is_none());
    }
    use proptest::prelude::*;

    fn msg(m: &mut Matcher, src: Rank, tag: Tag, byte: u8, len: usize) {
        let mut d = m.unexpected_buffer(len);
        d.fill(byte);
        m.push_unexpected(src, tag, d);
    }

    #[test]
    fn unexpected_then_posted_in_order_per_sender() {
        let mut m = Matcher::new();
        msg(&mut m, 1, 5, 1, 4);
        msg(&mut m, 1, 5, 2, 4);
        let c = m
            .post_recv(ReqId(0), Src::Rank(1), TagSel::Tag(5), vec![0; 4])
            .unwrap()
            .unwrap();
        assert_eq!(c.buf, vec![1; 4]);
        let c = m
            .post_recv(ReqId(1), Src::Any, TagSel::Any, vec![0; 8])
            .unwrap()
            .unwrap();
        assert_eq!((c.len, c.buf[0]), (4, 2));
        assert_eq!(m.unexpected_len(), 0);
    }

    #[test]
    fn posted_matches_oldest_accepting() {
        let mut m = Matcher::new();
        assert!(m
            .post_recv(ReqId(0), Src::Rank(2), TagSel::Any, vec![0; 1])
            .is_none());
        assert!(m
            .post_recv(ReqId(1), Src::Any, TagSel::Tag(7), vec![0; 1])
            .is_none());
        assert!(m
            .post_recv(ReqId(2), Src::Any, TagSel::Any, vec![0; 1])
            .is_none());
        assert_eq!(m.match_arrival(1, 7).unwrap().req, ReqId(1));
        assert_eq!(m.match_arrival(2, 7).unwrap().req, ReqId(0));
        assert_eq!(m.match_arrival(3, 3).unwrap().req, ReqId(2));
        assert!(m.match_arrival(3, 3).is_none());
    }

    #[test]
    fn wildcard_tag_skips_control_tags() {
        let mut m = Matcher::new();
        msg(&mut m, 0, crate::transport::TAG_BARRIER, 0, 0);
        queued(&mut m, ReqId(0), Src::Any, TagSel::Any);
        assert_eq!(m.unexpected_len(), 1);
    }

    #[test]
    fn truncation_is_an_error() {
        let mut m = Matcher::new();
        msg(&mut m, 0, 1, 9, 16);
        let r = m
            .post_recv(ReqId(0), Src::Any, TagSel::Any, vec![0; 8])
            .unwrap();
        assert!(matches!(
            r,
            Err(Error::Truncated {
                len: 16,
                cap: 8,
                ..
            })
        ));
    }

    #[test]
    fn deliver_completes_a_posted_receive_or_queues() {
        let mut m = Matcher::new();
        let mut t = ReqTable::new();
        let r = t.alloc();
        assert!(m
            .post_recv(r, Src::Rank(3), TagSel::Tag(5), vec![0; 4])
            .is_none());
        m.deliver(&mut t, 3, 6, vec![9; 2]);
        assert_eq!(m.unexpected_len(), 1, "tag 6 is not for the posted receive");
        m.deliver_copy(&mut t, 3, 5, &[7; 3]);
        let c = t.take(r).unwrap().unwrap();
        assert_eq!(
            (c.len, c.peer, c.tag, &c.buf[..3]),
            (3, 3, 5, &[7u8; 3][..])
        );
        let r = t.alloc();
        assert!(m
            .post_recv(r, Src::Any, TagSel::Tag(8), vec![0; 1])
            .is_none());
        m.deliver(&mut t, 1, 8, vec![1; 2]);
        assert!(matches!(
            t.take(r),
            Err(Error::Truncated { len: 2, cap: 1, .. })
        ));
    }

    #[test]
    fn req_table_generations() {
        let mut t = ReqTable::new();
        let a = t.alloc();
        assert!(t.take(a).unwrap().is_none());
        t.complete(
            a,
            Ok(Completion {
                kind: OpKind::Send,
                buf: vec![],
                peer: 0,
                tag: 0,
                len: 0,
            }),
        );
        assert!(t.take(a).unwrap().is_some());
        assert!(t.take(a).is_err());
        let b = t.alloc();
        assert_ne!(a, b);
        assert!(t.take(a).is_err());
        assert_eq!(t.outstanding(), 1);
    }

    /// The linear engine this one replaced, kept as the oracle: both queues searched oldest
    /// first, every entry inspected counted.
    #[derive(Debug, Default)]
    struct Linear {
        posted: VecDeque<PostedRecv>,
        unexpected: VecDeque<Unexpected>,
        searched: u64,
    }

    impl Linear {
        fn post_recv(
            &mut self,
            req: ReqId,
            src: Src,
            tag: TagSel,
            buf: Vec<u8>,
        ) -> Option<Result<Completion>> {
            let cap = buf.len();
            let mut hit = None;
            for (i, u) in self.unexpected.iter().enumerate() {
                self.searched += 1;
                if src.accepts(u.source) && tag.accepts(u.tag) {
                    hit = Some(i);
                    break;
                }
            }
            match hit.and_then(|i| self.unexpected.remove(i)) {
                Some(u) => Some(fill(buf, 0, cap, u.source, u.tag, &u.data)),
                None => {
                    self.posted.push_back(PostedRecv {
                        req,
                        src,
                        tag,
                        buf,
                        start: 0,
                        cap,
                        part: None,
                    });
                    None
                }
            }
        }

        fn match_arrival(&mut self, source: Rank, tag: Tag) -> Option<PostedRecv> {
            let mut hit = None;
            for (i, p) in self.posted.iter().enumerate() {
                self.searched += 1;
                if p.src.accepts(source) && p.tag.accepts(tag) {
                    hit = Some(i);
                    break;
                }
            }
            hit.and_then(|i| self.posted.remove(i))
        }

        fn deliver(&mut self, reqs: &mut ReqTable, source: Rank, tag: Tag, data: Vec<u8>) {
            match self.match_arrival(source, tag) {
                Some(p) => reqs.complete(p.req, fill(p.buf, 0, p.cap, source, tag, &data)),
                None => self.unexpected.push_back(Unexpected { source, tag, data }),
            }
        }

        fn cancel(&mut self, req: ReqId) -> Option<Vec<u8>> {
            let i = self.posted.iter().position(|p| p.req == req)?;
            self.posted.remove(i).map(|p| p.buf)
        }
    }

    /// What a receive ended with, comparable across the two engines.
    fn outcome(r: Result<Option<Completion>>) -> String {
        match r {
            Ok(Some(c)) => format!("from {} tag {} {:?}", c.peer, c.tag, &c.buf[..c.len]),
            Ok(None) => "pending".to_string(),
            Err(e) => format!("{e:?}"),
        }
    }

    /// The internal bookkeeping agrees with itself.
    fn check_invariants(m: &Matcher) {
        let mut n = 0;
        for (k, b) in &m.exact {
            assert!(b.iter().zip(b.iter().skip(1)).all(|(a, c)| a.seq < c.seq));
            for q in b {
                match (q.recv.src, q.recv.tag) {
                    (Src::Rank(r), TagSel::Tag(t)) => assert_eq!(Key::new(r, t), *k),
                    _ => panic!("a wildcard receive in a bucket"),
                }
            }
            n += b.len();
        }
        assert_eq!(n, m.exact_len);
        assert!(m
            .wild
            .iter()
            .zip(m.wild.iter().skip(1))
            .all(|(a, c)| a.seq < c.seq));
        let s = &m.store;
        assert!(s
            .iter()
            .zip(s.iter().skip(1))
            .all(|(a, c)| a.seq + 1 == c.seq));
        assert!(s.back().map_or(true, |x| x.seq + 1 == m.next_arrival));
        assert!(s.front().map_or(true, |x| x.msg.is_some()));
        assert!(s.back().map_or(true, |x| x.msg.is_some()));
        assert_eq!(s.iter().filter(|x| x.msg.is_none()).count(), m.holes);
        let mut n = 0;
        for (k, b) in &m.arrived {
            for seq in b {
                let i = m.slot_of(*seq).expect("in the store");
                let u = s[i].msg.as_ref().expect("not a hole");
                assert_eq!(Key::new(u.source, u.tag), *k);
            }
            n += b.len();
        }
        assert_eq!(n, m.unexpected_len());
    }

    #[derive(Debug, Clone)]
    enum Op {
        /// Post a receive (`None`: a wildcard).
        Post(Option<Rank>, Option<Tag>, usize),
        /// A header arrives (shm): `match_arrival`, and on a miss the payload is pending.
        Header(Rank, Tag, usize),
        /// A pending payload (by index) completes and is pushed unexpected.
        Payload(usize),
        /// A whole message is delivered (`true`: `deliver_copy`).
        Deliver(Rank, Tag, usize, bool),
        /// Cancel a request ever posted (by index).
        Cancel(usize),
    }

    /// Both engines driven by the same operations.
    #[derive(Default)]
    struct Twin {
        new: Matcher,
        old: Linear,
        tn: ReqTable,
        to: ReqTable,
        reqs: Vec<ReqId>,
        open: Vec<ReqId>,
        headers: Vec<(Rank, Tag, Vec<u8>)>,
        byte: u8,
    }

    impl Twin {
        fn payload(&mut self, len: usize) -> Vec<u8> {
            self.byte = self.byte.wrapping_add(1);
            vec![self.byte; len]
        }

        fn step(&mut self, op: &Op) {
            let (sn, so) = (self.new.searched(), self.old.searched);
            let arrival = matches!(op, Op::Header(..) | Op::Deliver(..));
            match *op {
                Op::Post(src, tag, cap) => self.post(src, tag, cap),
                Op::Header(source, tag, len) => {
                    let data = self.payload(len);
                    let (pn, po) = (
                        self.new.match_arrival(source, tag),
                        self.old.match_arrival(source, tag),
                    );
                    assert_eq!(pn.as_ref().map(|p| p.req), po.as_ref().map(|p| p.req));
                    match (pn, po) {
                        (Some(pn), Some(po)) => {
                            self.tn
                                .complete(pn.req, fill(pn.buf, 0, pn.cap, source, tag, &data));
                            self.to
                                .complete(po.req, fill(po.buf, 0, po.cap, source, tag, &data));
                        }
                        _ => self.headers.push((source, tag, data)),
                    }
                }
                Op::Payload(i) if !self.headers.is_empty() => {
                    let (source, tag, data) = self.headers.remove(i % self.headers.len());
                    self.new.push_unexpected(source, tag, data.clone());
                    self.old
                        .unexpected
                        .push_back(Unexpected { source, tag, data });
                }
                Op::Payload(_) => {}
                Op::Deliver(source, tag, len, copy) => {
                    let data = self.payload(len);
                    if copy {
                        self.new.deliver_copy(&mut self.tn, source, tag, &data);
                    } else {
                        self.new.deliver(&mut self.tn, source, tag, data.clone());
                    }
                    self.old.deliver(&mut self.to, source, tag, data);
                }
                Op::Cancel(i) if !self.reqs.is_empty() => {
                    let r = self.reqs[i % self.reqs.len()];
                    let (bn, bo) = (self.new.cancel(r), self.old.cancel(r));
                    assert_eq!(bn, bo, "cancel {r:?}");
                    if bn.is_some() {
                        self.open.retain(|&x| x != r);
                    }
                }
                Op::Cancel(_) => {}
            }
            self.compare(arrival, self.new.searched() - sn, self.old.searched - so);
        }

        fn post(&mut self, src: Option<Rank>, tag: Option<Tag>, cap: usize) {
            let src = src.map_or(Src::Any, Src::Rank);
            let tag = tag.map_or(TagSel::Any, TagSel::Tag);
            let r = self.tn.alloc();
            assert_eq!(r, self.to.alloc());
            self.reqs.push(r);
            let cn = self.new.post_recv(r, src, tag, vec![0; cap]);
            let co = self.old.post_recv(r, src, tag, vec![0; cap]);
            match (cn, co) {
                (None, None) => self.open.push(r),
                (Some(cn), Some(co)) => assert_eq!(outcome(cn.map(Some)), outcome(co.map(Some))),
                (cn, co) => panic!("post {r:?}: {cn:?} against {co:?}"),
            }
        }

        /// Same completions, same queue lengths; the hashed search never inspects more than
        /// the linear one (an arrival one more: the front of a bucket the walk never reached).
        fn compare(&mut self, arrival: bool, dn: u64, d_old: u64) {
            for r in std::mem::take(&mut self.open) {
                let (pn, po) = (self.tn.is_pending(r), self.to.is_pending(r));
                assert_eq!(pn, po, "{r:?} pending");
                if pn {
                    self.open.push(r);
                } else {
                    assert_eq!(outcome(self.tn.take(r)), outcome(self.to.take(r)));
                }
            }
            assert_eq!(self.new.posted_len(), self.old.posted.len());
            assert_eq!(self.new.unexpected_len(), self.old.unexpected.len());
            assert!(dn <= d_old + u64::from(arrival), "{dn} > {d_old}");
            check_invariants(&self.new);
        }
    }

    fn post_tag(tags: Tag) -> impl Strategy<Value = Option<Tag>> {
        prop_oneof![
            6 => (0..tags).prop_map(Some),
            1 => Just(Some(crate::transport::TAG_BARRIER)),
            3 => Just(None),
        ]
    }

    fn arrival_tag(tags: Tag) -> impl Strategy<Value = Tag> {
        prop_oneof![6 => 0..tags, 1 => Just(crate::transport::TAG_BARRIER)]
    }

    fn op(sources: Rank, tags: Tag) -> impl Strategy<Value = Op> {
        let src = prop_oneof![3 => (0..sources).prop_map(Some), 1 => Just(None)];
        prop_oneof![
            4 => (src, post_tag(tags), 0..6usize).prop_map(|(s, t, c)| Op::Post(s, t, c)),
            2 => (0..sources, arrival_tag(tags), 0..6usize)
                .prop_map(|(s, t, l)| Op::Header(s, t, l)),
            2 => any::<usize>().prop_map(Op::Payload),
            3 => (0..sources, arrival_tag(tags), 0..6usize, any::<bool>())
                .prop_map(|(s, t, l, c)| Op::Deliver(s, t, l, c)),
            1 => any::<usize>().prop_map(Op::Cancel),
        ]
    }

    proptest! {
        /// Random posts (exact and wildcard), arrivals (header then payload, or whole) and
        /// cancels: the hashed engine matches exactly what the linear one matches.
        #[test]
        fn hashed_matches_like_linear(ops in proptest::collection::vec(op(3, 3), 1..300)) {
            let mut t = Twin::default();
            for o in &ops {
                t.step(o);
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(12))]

        /// Long runs over many envelopes, so that buckets are pruned and the unexpected store
        /// is compacted on the way.
        #[test]
        fn hashed_matches_like_linear_at_length(
            ops in proptest::collection::vec(op(2, 1500), 2000..4000)
        ) {
            let mut t = Twin::default();
            for o in &ops {
                t.step(o);
            }
        }
    }

    #[test]
    fn exact_arrival_inspects_one_entry_behind_many() {
        let mut m = Matcher::new();
        for t in 0..1024 {
            queued(&mut m, ReqId(t), Src::Rank(1), TagSel::Tag(t as Tag));
        }
        queued(&mut m, ReqId(9999), Src::Rank(1), TagSel::Tag(5000));
        let s = m.searched();
        assert_eq!(m.match_arrival(1, 5000).unwrap().req, ReqId(9999));
        assert_eq!(m.searched() - s, 1);
        let s = m.searched();
        assert!(m.match_arrival(2, 5000).is_none());
        assert_eq!(
            m.searched() - s,
            0,
            "no bucket, no wildcard: nothing inspected"
        );
        assert_eq!(m.posted_len(), 1024);
    }

    #[test]
    fn wildcard_source_arrival_walks() {
        let mut m = Matcher::new();
        for t in 0..1024 {
            queued(&mut m, ReqId(t), Src::Any, TagSel::Tag(t as Tag));
        }
        queued(&mut m, ReqId(9999), Src::Any, TagSel::Tag(5000));
        let s = m.searched();
        assert_eq!(m.match_arrival(1, 5000).unwrap().req, ReqId(9999));
        assert_eq!(m.searched() - s, 1025);
    }

    #[test]
    fn the_walk_stops_at_the_exact_candidate() {
        let mut m = Matcher::new();
        queued(&mut m, ReqId(0), Src::Rank(1), TagSel::Tag(7));
        for t in 1..=500 {
            queued(&mut m, ReqId(t), Src::Any, TagSel::Tag(7));
        }
        let s = m.searched();
        assert_eq!(
            m.match_arrival(1, 7).unwrap().req,
            ReqId(0),
            "older than all"
        );
        assert_eq!(m.searched() - s, 1);
        // Now the exact receive comes after 500 wildcards: the oldest wildcard wins.
        queued(&mut m, ReqId(600), Src::Rank(1), TagSel::Tag(7));
        let s = m.searched();
        assert_eq!(m.match_arrival(1, 7).unwrap().req, ReqId(1));
        assert_eq!(m.searched() - s, 2);
    }

    #[test]
    fn exact_receive_finds_its_unexpected_message_in_one_look() {
        let mut m = Matcher::new();
        for t in 0..1024 {
            msg(&mut m, 1, t, 0, 1);
        }
        msg(&mut m, 1, 5000, 42, 1);
        msg(&mut m, 1, 5001, 43, 1);
        let s = m.searched();
        let c = m
            .post_recv(ReqId(0), Src::Rank(1), TagSel::Tag(5000), vec![0])
            .unwrap()
            .unwrap();
        assert_eq!((c.buf[0], m.searched() - s), (42, 1));
        let s = m.searched();
        let c = m
            .post_recv(ReqId(1), Src::Any, TagSel::Tag(5001), vec![0])
            .unwrap()
            .unwrap();
        assert_eq!(
            (c.buf[0], m.searched() - s),
            (43, 1025),
            "the hole is not counted"
        );
        assert_eq!(m.unexpected_len(), 1024);
    }

    #[test]
    fn ping_pong_keeps_its_buckets_and_buffers() {
        let mut m = Matcher::new();
        let mut buf = vec![0u8; 8];
        let mut shape = None;
        for round in 0..2000 {
            assert!(m
                .post_recv(ReqId(round), Src::Rank(1), TagSel::Tag(7), buf)
                .is_none());
            buf = m.match_arrival(1, 7).unwrap().buf;
            let d = m.unexpected_buffer(8);
            m.push_unexpected(1, 8, d);
            buf = m
                .post_recv(ReqId(round), Src::Rank(1), TagSel::Tag(8), buf)
                .unwrap()
                .unwrap()
                .buf;
            let now = (
                m.exact.len(),
                m.exact.capacity(),
                m.exact[&Key::new(1, 7)].capacity(),
                m.arrived.capacity(),
                m.arrived[&Key::new(1, 8)].capacity(),
                m.store.capacity(),
                m.pool.len(),
            );
            assert_eq!(*shape.get_or_insert(now), now, "round {round}");
        }
        assert_eq!((m.posted_len(), m.unexpected_len()), (0, 0));
    }

    #[test]
    fn empty_buckets_are_dropped_only_when_many() {
        let mut m = Matcher::new();
        for t in 0..3000 {
            queued(&mut m, ReqId(t), Src::Rank(1), TagSel::Tag(t as Tag));
            msg(&mut m, 2, t as Tag, 0, 0);
        }
        for t in 0..3000 {
            assert!(m.match_arrival(1, t).is_some());
            let c = m.post_recv(ReqId(t as u64), Src::Rank(2), TagSel::Tag(t), vec![]);
            assert!(c.is_some());
        }
        queued(&mut m, ReqId(0), Src::Rank(1), TagSel::Tag(0));
        msg(&mut m, 2, 0, 0, 0);
        assert_eq!(
            (m.exact.len(), m.arrived.len()),
            (3000, 3000),
            "known keys: kept"
        );
        queued(&mut m, ReqId(1), Src::Rank(3), TagSel::Tag(0));
        msg(&mut m, 4, 0, 0, 0);
        assert_eq!(
            (m.exact.len(), m.arrived.len()),
            (2, 2),
            "a new key: pruned"
        );
        assert_eq!(m.match_arrival(1, 0).unwrap().req, ReqId(0));
        assert_eq!(m.match_arrival(3, 0).unwrap().req, ReqId(1));
        assert!(m
            .post_recv(ReqId(2), Src::Rank(2), TagSel::Tag(0), vec![])
            .is_some());
        assert!(m
            .post_recv(ReqId(3), Src::Rank(4), TagSel::Tag(0), vec![])
            .is_some());
        check_invariants(&m);

        let mut m = Matcher::new();
        for t in 0..PRUNE_MIN as Tag {
            queued(&mut m, ReqId(0), Src::Rank(1), TagSel::Tag(t));
            assert!(m.match_arrival(1, t).is_some());
        }
        queued(&mut m, ReqId(0), Src::Rank(2), TagSel::Tag(0));
        assert_eq!(m.exact.len(), PRUNE_MIN + 1, "few buckets: kept");
    }

    #[test]
    fn holes_in_the_unexpected_store_stay_bounded() {
        let mut m = Matcher::new();
        msg(&mut m, 0, 99, 0, 1);
        msg(&mut m, 1, 0, 0, 1);
        let mut longest = 0;
        for i in 1..10_000u32 {
            msg(&mut m, 1, i % 2, i as u8, 1);
            let c = m
                .post_recv(ReqId(0), Src::Rank(1), TagSel::Tag((i - 1) % 2), vec![0])
                .unwrap()
                .unwrap();
            assert_eq!(c.buf[0], (i - 1) as u8);
            assert_eq!(m.unexpected_len(), 2);
            longest = longest.max(m.store.len());
        }
        assert!(
            longest <= 2 * HOLES_MIN + 4,
            "{longest} slots for 2 messages"
        );
        check_invariants(&m);
        let c = m
            .post_recv(ReqId(0), Src::Any, TagSel::Any, vec![0])
            .unwrap()
            .unwrap();
        assert_eq!(
            (c.peer, c.tag),
            (0, 99),
            "the oldest message is still first"
        );
    }

    #[test]
    fn cancel_removes_exact_and_wildcard_receives() {
        let mut m = Matcher::new();
        assert!(m
            .post_recv(ReqId(0), Src::Rank(1), TagSel::Tag(1), vec![1])
            .is_none());
        assert!(m
            .post_recv(ReqId(1), Src::Any, TagSel::Tag(1), vec![2])
            .is_none());
        assert!(m
            .post_recv(ReqId(2), Src::Rank(1), TagSel::Tag(1), vec![3])
            .is_none());
        assert_eq!(m.cancel(ReqId(0)), Some(vec![1]));
        assert_eq!(m.cancel(ReqId(0)), None);
        assert_eq!(m.cancel(ReqId(1)), Some(vec![2]));
        assert_eq!(m.posted_len(), 1);
        assert_eq!(m.match_arrival(1, 1).unwrap().req, ReqId(2));
        assert_eq!(m.posted_len(), 0);
        // One id queued twice (exact first, then wildcard): the oldest goes, as before.
        assert!(m
            .post_recv(ReqId(5), Src::Rank(1), TagSel::Tag(1), vec![5])
            .is_none());
        assert!(m
            .post_recv(ReqId(5), Src::Any, TagSel::Any, vec![6])
            .is_none());
        assert_eq!(m.cancel(ReqId(5)), Some(vec![5]));
        assert_eq!(m.cancel(ReqId(5)), Some(vec![6]));
    }

    fn span(start: usize, len: usize, count: u32) -> Span {
        Span { start, len, count }
    }

    /// Land `len` bytes of `byte` from `source` with `tag` in what `match_arrival` found.
    fn land(
        m: &mut Matcher,
        t: &mut ReqTable,
        mut p: PostedRecv,
        source: Rank,
        tag: Tag,
        byte: u8,
        len: usize,
    ) {
        p.dest(len).fill(byte);
        m.landed(t, p, source, tag, len);
    }

    #[test]
    fn a_repeat_receive_takes_its_messages_before_a_later_receive() {
        let (mut m, mut t) = (Matcher::new(), ReqTable::new());
        let (r, later) = (t.alloc(), t.alloc());
        let posted = m.post_recv_span(
            r,
            Src::Rank(1),
            TagSel::Tag(5),
            vec![0xEE; 10],
            span(3, 4, 3),
        );
        assert!(posted.is_none());
        assert!(m
            .post_recv(later, Src::Rank(1), TagSel::Tag(5), vec![0; 4])
            .is_none());
        assert_eq!(m.posted_len(), 2, "one entry for the three messages");
        for (i, len) in [(0u32, 4usize), (1, 2), (2, 3)] {
            let p = m.match_arrival(1, 5).unwrap();
            assert_eq!((p.req, p.part, p.start, p.cap), (r, Some(i), 3, 4));
            assert!(t.is_pending(r), "complete before message {i}");
            land(&mut m, &mut t, p, 1, 5, i as u8 + 1, len);
        }
        let c = t.take(r).unwrap().unwrap();
        assert_eq!(
            (c.len, c.peer, c.tag),
            (3, 1, 5),
            "the last message's envelope"
        );
        let mut want = vec![0xEE; 10];
        want[3..7].copy_from_slice(&[3, 3, 3, 1]);
        assert_eq!(
            c.buf, want,
            "each message at offset 3, nothing outside the span"
        );
        assert_eq!(m.match_arrival(1, 5).unwrap().req, later);
        assert_eq!(m.posted_len(), 0);
        check_invariants(&m);
    }

    #[test]
    fn a_repeat_receive_keeps_its_place_among_wildcards() {
        let (mut m, mut t) = (Matcher::new(), ReqTable::new());
        let first = t.alloc();
        queued(&mut m, first, Src::Any, TagSel::Any);
        let r = t.alloc();
        assert!(m
            .post_recv_span(r, Src::Rank(1), TagSel::Tag(5), vec![0; 1], span(0, 1, 2))
            .is_none());
        let after = t.alloc();
        queued(&mut m, after, Src::Any, TagSel::Tag(5));
        let order: Vec<ReqId> = (0..4)
            .map(|_| {
                let p = m.match_arrival(1, 5).unwrap();
                let req = p.req;
                m.landed(&mut t, p, 1, 5, 0);
                req
            })
            .collect();
        assert_eq!(order, [first, r, r, after]);
        assert_eq!(t.take(r).unwrap().unwrap().len, 0);
        check_invariants(&m);
    }

    #[test]
    fn a_repeat_receive_takes_unexpected_messages_when_posted() {
        let (mut m, mut t) = (Matcher::new(), ReqTable::new());
        msg(&mut m, 1, 5, 1, 2);
        msg(&mut m, 2, 5, 9, 1);
        msg(&mut m, 1, 5, 2, 1);
        let r = t.alloc();
        let buf = vec![0xEE; 4];
        assert!(m
            .post_recv_span(r, Src::Rank(1), TagSel::Tag(5), buf, span(1, 2, 3))
            .is_none());
        assert_eq!(
            (m.unexpected_len(), m.posted_len()),
            (1, 1),
            "rank 2's stays"
        );
        m.deliver_copy(&mut t, 1, 5, &[3, 3]);
        let c = t.take(r).unwrap().unwrap();
        assert_eq!((c.len, c.buf), (2, vec![0xEE, 3, 3, 0xEE]));
        // Every message already here: complete at once, with the last one's length.
        msg(&mut m, 1, 6, 4, 2);
        msg(&mut m, 1, 6, 5, 1);
        let c = m
            .post_recv_span(
                t.alloc(),
                Src::Any,
                TagSel::Tag(6),
                vec![0; 2],
                span(0, 2, 2),
            )
            .unwrap()
            .unwrap();
        assert_eq!((c.len, c.buf), (1, vec![5, 4]));
        assert_eq!((m.unexpected_len(), m.posted_len()), (1, 0));
        check_invariants(&m);
    }

    /// Two messages landing at once: the second in a scratch buffer, and whichever finishes
    /// last, the buffer ends with the later-matched message over the earlier one.
    #[test]
    fn concurrent_landings_end_with_the_last_message() {
        for second_first in [false, true] {
            let (mut m, mut t) = (Matcher::new(), ReqTable::new());
            let r = t.alloc();
            assert!(m
                .post_recv_span(r, Src::Any, TagSel::Tag(7), vec![0xEE; 5], span(1, 3, 2))
                .is_none());
            let a = m.match_arrival(1, 7).unwrap();
            let b = m.match_arrival(2, 7).unwrap();
            assert_eq!((a.part, a.start, b.part, b.start), (Some(0), 1, Some(1), 0));
            assert_eq!(m.posted_len(), 0);
            if second_first {
                land(&mut m, &mut t, b, 2, 7, 2, 2);
                assert!(t.is_pending(r));
                land(&mut m, &mut t, a, 1, 7, 1, 3);
            } else {
                land(&mut m, &mut t, a, 1, 7, 1, 3);
                assert!(t.is_pending(r));
                land(&mut m, &mut t, b, 2, 7, 2, 2);
            }
            let c = t.take(r).unwrap().unwrap();
            assert_eq!((c.peer, c.len), (2, 2));
            assert_eq!(c.buf, [0xEE, 2, 2, 1, 0xEE], "second_first {second_first}");
        }
    }

    #[test]
    fn a_repeat_receive_is_cancelled_only_before_its_first_message() {
        let (mut m, mut t) = (Matcher::new(), ReqTable::new());
        let r = t.alloc();
        let s = span(0, 1, 2);
        assert!(m
            .post_recv_span(r, Src::Rank(1), TagSel::Tag(5), vec![8; 1], s)
            .is_none());
        assert_eq!(m.cancel(r), Some(vec![8]));
        assert!(m.match_arrival(1, 5).is_none(), "gone");
        let r = t.alloc();
        assert!(m
            .post_recv_span(r, Src::Rank(1), TagSel::Tag(5), vec![0; 1], s)
            .is_none());
        let p = m.match_arrival(1, 5).unwrap();
        assert_eq!(m.cancel(r), None, "a message already matched");
        land(&mut m, &mut t, p, 1, 5, 1, 1);
        m.deliver(&mut t, 1, 5, vec![2]);
        assert_eq!(t.take(r).unwrap().unwrap().buf, [2]);
        assert_eq!(m.posted_len(), 0);
        check_invariants(&m);
    }

    #[test]
    fn a_truncated_message_fails_the_repeat_receive_after_all() {
        let (mut m, mut t) = (Matcher::new(), ReqTable::new());
        let r = t.alloc();
        let later = t.alloc();
        assert!(m
            .post_recv_span(r, Src::Rank(1), TagSel::Tag(5), vec![0; 4], span(1, 2, 3))
            .is_none());
        assert!(m
            .post_recv(later, Src::Rank(1), TagSel::Tag(5), vec![0; 1])
            .is_none());
        m.deliver_copy(&mut t, 1, 5, &[1; 3]);
        let p = m.match_arrival(1, 5).unwrap();
        let e = Error::Truncated {
            len: 9,
            cap: 2,
            source_rank: 1,
            tag: 5,
        };
        m.refuse(&mut t, p, e);
        assert!(t.is_pending(r), "a message still to come");
        m.deliver_copy(&mut t, 1, 5, &[2; 2]);
        assert!(matches!(
            t.take(r),
            Err(Error::Truncated { len: 3, cap: 2, .. })
        ));
        m.deliver_copy(&mut t, 1, 5, &[3]);
        assert_eq!(t.take(later).unwrap().unwrap().buf, [3]);
    }

    #[test]
    fn take_posted_hands_out_one_message_at_a_time() {
        let (mut m, mut t) = (Matcher::new(), ReqTable::new());
        let r = t.alloc();
        assert!(m
            .post_recv_span(r, Src::Any, TagSel::Any, vec![0; 3], span(1, 2, 2))
            .is_none());
        let a = m.take_posted(r).unwrap();
        assert_eq!((a.part, a.start, m.posted_len()), (Some(0), 1, 1));
        let b = m.take_posted(r).unwrap();
        assert_eq!((b.part, b.start, m.posted_len()), (Some(1), 0, 0));
        assert!(m.take_posted(r).is_none());
        land(&mut m, &mut t, a, 3, 1, 1, 2);
        land(&mut m, &mut t, b, 3, 1, 2, 1);
        let c = t.take(r).unwrap().unwrap();
        assert_eq!((c.len, c.buf), (1, vec![0, 2, 1]));
        let w = t.alloc();
        queued(&mut m, w, Src::Any, TagSel::Any);
        assert_eq!(m.take_posted(w).unwrap().part, None);
        assert_eq!(m.posted_len(), 0);
    }

    #[test]
    fn a_span_that_does_not_fit_is_invalid() {
        let mut m = Matcher::new();
        for s in [span(2, 3, 2), span(0, 1, 0), span(usize::MAX, 2, 1)] {
            let r = m.post_recv_span(ReqId(0), Src::Any, TagSel::Any, vec![0; 4], s);
            assert!(matches!(r, Some(Err(Error::Invalid(_)))), "{s:?}");
        }
        assert_eq!(m.posted_len(), 0);
    }

    #[test]
    fn the_hash_spreads_sources_and_tags_over_the_low_bits() {
        use std::hash::BuildHasher;
        let low = |k: Key| BuildHasherDefault::<FxHasher>::default().hash_one(k) & 0xFF;
        let by_source: std::collections::HashSet<u64> =
            (0..256).map(|s| low(Key::new(s, 5))).collect();
        let by_tag: std::collections::HashSet<u64> =
            (0..256).map(|t| low(Key::new(3, t))).collect();
        assert!(by_source.len() >= 128, "{} of 256", by_source.len());
        assert!(by_tag.len() >= 128, "{} of 256", by_tag.len());
    }
}
