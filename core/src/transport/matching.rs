//! The tag-matching engine raw transports share (design §3): a posted-receive queue and an
//! unexpected-message queue with MPI's rules.
//!
//! * A posted receive first searches the unexpected queue, oldest first; a hit completes it
//!   at once (the payload is copied out of the unexpected buffer).
//! * An arriving message searches the posted queue, oldest first; a hit removes that receive
//!   and the transport lands the payload straight in its buffer. A miss is queued unexpected.
//! * Messages from one sender therefore match in the order they were sent (non-overtaking),
//!   as long as the transport delivers each sender's messages in order.
//!
//! Both queues are searched linearly, as MPI implementations do; the queue benchmarks of seed
//! 004 measure exactly that cost, and [`Matcher::searched`] counts the entries inspected.
//!
//! [`ReqTable`] is a slab of request slots that raw transports use to hand out [`ReqId`]s and
//! park completions until [`crate::transport::Endpoint::test`] collects them.

use crate::transport::error::{Error, Result};
use crate::transport::{Completion, OpKind, Rank, ReqId, Src, Tag, TagSel};
use std::collections::VecDeque;

/// A receive waiting for a message.
#[derive(Debug)]
pub struct PostedRecv {
    /// Its request.
    pub req: ReqId,
    /// Accepted source.
    pub src: Src,
    /// Accepted tag.
    pub tag: TagSel,
    /// Where the payload goes; its length is the capacity.
    pub buf: Vec<u8>,
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

/// Posted-receive and unexpected-message queues.
#[derive(Debug, Default)]
pub struct Matcher {
    posted: VecDeque<PostedRecv>,
    unexpected: VecDeque<Unexpected>,
    pool: Vec<Vec<u8>>,
    searched: u64,
}

/// Buffers kept for reuse by the unexpected queue.
const POOL_MAX: usize = 64;

impl Matcher {
    /// Empty queues.
    pub fn new() -> Self {
        Self::default()
    }

    /// Post a receive. If an unexpected message matches, the receive completes now and its
    /// completion (or truncation error) is returned; otherwise it is queued and `None` returned.
    pub fn post_recv(
        &mut self,
        req: ReqId,
        src: Src,
        tag: TagSel,
        buf: Vec<u8>,
    ) -> Option<Result<Completion>> {
        let mut hit = None;
        for (i, u) in self.unexpected.iter().enumerate() {
            self.searched += 1;
            if src.accepts(u.source) && tag.accepts(u.tag) {
                hit = Some(i);
                break;
            }
        }
        match hit.and_then(|i| self.unexpected.remove(i)) {
            Some(u) => {
                let res = fill(buf, u.source, u.tag, &u.data);
                self.recycle(u.data);
                Some(res)
            }
            None => {
                self.posted.push_back(PostedRecv { req, src, tag, buf });
                None
            }
        }
    }

    /// A message from `source` with `tag` is arriving: remove and return the oldest posted
    /// receive that accepts it, if any.
    pub fn match_arrival(&mut self, source: Rank, tag: Tag) -> Option<PostedRecv> {
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

    /// A whole message (already in memory: an unexpected payload finished arriving, or a send
    /// to this very rank) is here: complete the oldest posted receive that accepts it, copying
    /// it in or failing with [`Error::Truncated`], or queue it as unexpected. The payload
    /// buffer goes back to the pool once copied.
    pub fn deliver(&mut self, reqs: &mut ReqTable, source: Rank, tag: Tag, data: Vec<u8>) {
        match self.match_arrival(source, tag) {
            Some(p) => {
                reqs.complete(p.req, fill(p.buf, source, tag, &data));
                self.recycle(data);
            }
            None => self.push_unexpected(source, tag, data),
        }
    }

    /// [`Matcher::deliver`] for a payload borrowed from the caller: copied straight into a
    /// posted receive, or into a pooled buffer when it must wait as unexpected.
    pub fn deliver_copy(&mut self, reqs: &mut ReqTable, source: Rank, tag: Tag, data: &[u8]) {
        match self.match_arrival(source, tag) {
            Some(p) => reqs.complete(p.req, fill(p.buf, source, tag, data)),
            None => {
                let mut b = self.unexpected_buffer(data.len());
                b.copy_from_slice(data);
                self.push_unexpected(source, tag, b);
            }
        }
    }

    /// Queue a message that no posted receive accepted.
    pub fn push_unexpected(&mut self, source: Rank, tag: Tag, data: Vec<u8>) {
        self.unexpected.push_back(Unexpected { source, tag, data });
    }

    /// A buffer of exactly `len` bytes for an unexpected payload, reused when possible.
    pub fn unexpected_buffer(&mut self, len: usize) -> Vec<u8> {
        let mut b = self.pool.pop().unwrap_or_default();
        b.clear();
        b.resize(len, 0);
        b
    }

    fn recycle(&mut self, b: Vec<u8>) {
        if self.pool.len() < POOL_MAX && b.capacity() <= 1 << 20 {
            self.pool.push(b);
        }
    }

    /// Receives waiting for a message.
    pub fn posted_len(&self) -> usize {
        self.posted.len()
    }

    /// Messages waiting for a receive.
    pub fn unexpected_len(&self) -> usize {
        self.unexpected.len()
    }

    /// Queue entries inspected so far by both searches (for the queue benchmarks).
    pub fn searched(&self) -> u64 {
        self.searched
    }

    /// Remove a posted receive (cancellation); returns its buffer if it was still queued.
    pub fn cancel(&mut self, req: ReqId) -> Option<Vec<u8>> {
        let i = self.posted.iter().position(|p| p.req == req)?;
        self.posted.remove(i).map(|p| p.buf)
    }
}

/// A receive's completion with `data` copied into `buf`, or [`Error::Truncated`] when it does
/// not fit (MPI_ERR_TRUNCATE).
fn fill(mut buf: Vec<u8>, source: Rank, tag: Tag, data: &[u8]) -> Result<Completion> {
    let len = data.len();
    if len > buf.len() {
        return Err(Error::Truncated {
            len,
            cap: buf.len(),
            source_rank: source,
            tag,
        });
    }
    buf[..len].copy_from_slice(data);
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
        assert!(m
            .post_recv(ReqId(0), Src::Any, TagSel::Any, vec![])
            .is_none());
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
}
