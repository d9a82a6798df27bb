//! Two ranks of a larger run seen as a run of their own: the endpoint the engine measures one
//! all-pairs cell on, while other pairs measure theirs at the same time.
//!
//! Rank 0 of the pair is the cell's source, rank 1 its dest. Messages go over the whole run's
//! data plane with the peer's real rank; every receive names its source, so another pair's
//! messages never match. The pair's barriers are its own messages (two ranks, tags of their
//! own), not the run's barrier, which would hold every pair.

use crate::transport::error::{Error, Result};
use crate::transport::{
    BackendInfo, Completion, Endpoint, Rank, ReqId, Role, Span, Src, Tag, TagSel, TAG_UB,
};
use std::time::Duration;

/// Tag of a pair's barrier (control plane, above the user tags).
pub const TAG_PAIR_BARRIER: Tag = TAG_UB + 16;

/// Ranks `ranks[0]` (pair rank 0) and `ranks[1]` (pair rank 1) of `ep`'s run.
#[derive(Debug)]
pub struct PairEp<'a, E> {
    ep: &'a mut E,
    ranks: [Rank; 2],
    me: Rank,
}

impl<'a, E: Endpoint> PairEp<'a, E> {
    /// The pair `(source, dest)`; this rank must be one of them.
    pub fn new(ep: &'a mut E, source: Rank, dest: Rank) -> Result<Self> {
        let me = match ep.rank() {
            r if r == source => 0,
            r if r == dest => 1,
            r => {
                return Err(Error::Invalid(format!(
                    "rank {r} is not in the pair {source} -> {dest}"
                )))
            }
        };
        Ok(PairEp {
            ep,
            ranks: [source, dest],
            me,
        })
    }

    fn real(&self, r: Rank) -> Result<Rank> {
        self.ranks
            .get(r as usize)
            .copied()
            .ok_or_else(|| Error::Invalid(format!("rank {r} out of range for a pair")))
    }

    fn local(&self, c: Completion) -> Completion {
        let peer = if c.peer == self.ranks[1] { 1 } else { 0 };
        Completion { peer, ..c }
    }
}

impl<E: Endpoint> Endpoint for PairEp<'_, E> {
    fn rank(&self) -> Rank {
        self.me
    }
    fn size(&self) -> u32 {
        2
    }
    fn backend(&self) -> &'static str {
        self.ep.backend()
    }
    fn timeout(&self) -> Duration {
        self.ep.timeout()
    }
    fn isend(&mut self, dest: Rank, tag: Tag, buf: Vec<u8>) -> Result<ReqId> {
        let d = self.real(dest)?;
        self.ep.isend(d, tag, buf)
    }
    fn irecv(&mut self, src: Src, tag: TagSel, buf: Vec<u8>) -> Result<ReqId> {
        // A wildcard would accept another pair's messages: name the peer instead.
        let s = match src {
            Src::Rank(r) => self.real(r)?,
            Src::Any => self.ranks[1 - self.me as usize],
        };
        self.ep.irecv(Src::Rank(s), tag, buf)
    }
    fn test(&mut self, req: ReqId) -> Result<Option<Completion>> {
        Ok(self.ep.test(req)?.map(|c| self.local(c)))
    }
    fn wait(&mut self, req: ReqId) -> Result<Completion> {
        let c = self.ep.wait(req)?;
        Ok(self.local(c))
    }
    fn send(&mut self, dest: Rank, tag: Tag, buf: Vec<u8>) -> Result<Vec<u8>> {
        let d = self.real(dest)?;
        self.ep.send(d, tag, buf)
    }
    fn pingpong(
        &mut self,
        peer: Rank,
        tag: Tag,
        buf: &mut Vec<u8>,
        n: u64,
        role: Role,
    ) -> Result<()> {
        let p = self.real(peer)?;
        self.ep.pingpong(p, tag, buf, n, role)
    }
    fn isend_span(&mut self, dest: Rank, tag: Tag, buf: Vec<u8>, span: Span) -> Result<ReqId> {
        let d = self.real(dest)?;
        self.ep.isend_span(d, tag, buf, span)
    }
    fn irecv_span(&mut self, src: Src, tag: TagSel, buf: Vec<u8>, span: Span) -> Result<ReqId> {
        let s = match src {
            Src::Rank(r) => self.real(r)?,
            Src::Any => self.ranks[1 - self.me as usize],
        };
        self.ep.irecv_span(Src::Rank(s), tag, buf, span)
    }
    fn pingpong_span(
        &mut self,
        peer: Rank,
        tag: Tag,
        buf: &mut Vec<u8>,
        span: Span,
        n: u64,
        role: Role,
    ) -> Result<()> {
        let p = self.real(peer)?;
        self.ep.pingpong_span(p, tag, buf, span, n, role)
    }
    fn models_caches(&self) -> bool {
        self.ep.models_caches()
    }
    fn now_ns(&mut self) -> u64 {
        self.ep.now_ns()
    }
    fn clock_name(&self) -> String {
        self.ep.clock_name()
    }
    fn claimed_resolution_ns(&self) -> Option<f64> {
        self.ep.claimed_resolution_ns()
    }
    fn compute(&mut self, work: crate::transport::work::Work) {
        self.ep.compute(work)
    }
    fn info(&self) -> BackendInfo {
        self.ep.info()
    }
    fn barrier(&mut self) -> Result<()> {
        self.barrier_first(0)
    }
    /// Rank `first` of the pair waits for the other's word and answers it; the other leaves
    /// only after the answer.
    fn barrier_first(&mut self, first: Rank) -> Result<()> {
        let (f, other) = (self.real(first)?, self.real(1 - first.min(1))?);
        if self.me == first {
            let b = self
                .ep
                .recv(Src::Rank(other), TagSel::Tag(TAG_PAIR_BARRIER), Vec::new())?
                .buf;
            self.ep.send(other, TAG_PAIR_BARRIER, b)?;
        } else {
            let b = self.ep.send(f, TAG_PAIR_BARRIER, Vec::new())?;
            self.ep
                .recv(Src::Rank(f), TagSel::Tag(TAG_PAIR_BARRIER), b)?;
        }
        Ok(())
    }
}

/// `f` on `ep` with waits of at most `timeout` (at least the endpoint's own), then the
/// endpoint's own timeout again: the waits between rounds, where a rank that has measured its
/// cells waits while other pairs still measure theirs, far longer than one message may take.
pub fn patiently<E: Endpoint, T>(
    ep: &mut E,
    timeout: Duration,
    f: impl FnOnce(&mut E) -> Result<T>,
) -> Result<T> {
    let own = ep.timeout();
    ep.set_timeout(timeout.max(own));
    let r = f(ep);
    ep.set_timeout(own);
    r
}
