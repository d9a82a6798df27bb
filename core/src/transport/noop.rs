//! [`NoopEndpoint`]: an in-process endpoint whose transport does nothing, the instrument that
//! measures commbench's own cost per message.
//!
//! Every send completes at once; every receive completes at once, as if a message of the
//! whole buffer had arrived from the rank and with the tag asked for (its bytes are whatever
//! the buffer held). Nothing travels, so the time a pattern takes on it is what the engine, the
//! kernel and the endpoint's bookkeeping add to each message: the harness overhead that the
//! engine bench (`benches/engine.rs`) reports and docs/overhead.md explains.
//!
//! It is not a backend, no command line reaches it, and it is built only with the `testkit`
//! feature (which the root package's benches enable), never into production. Its bookkeeping
//! is what a real transport's is: posted operations wait in a slab with a generation per slot,
//! a finished request is collected once, a stale or unknown one is [`Error::Invalid`]; `wait`
//! is the [`Endpoint`] trait's own default. Blocking `send` and `recv` take a direct path that
//! makes no request, as the mpi and shm backends' do (tcp has one for `send` only, the
//! simulator none: there a blocking operation costs what a posted one and its wait cost).
//!
//! Because every receive succeeds, one rank can play its part of a pattern alone: rank 0 of
//! two ranks runs a whole [`crate::method::engine::Measurement`] with `source` 0, and its
//! trial times are the harness overhead.

use super::error::{check_rank, Error, Result};
use super::{Completion, Endpoint, Rank, ReqId, Span, Src, Tag, TagSel};
use std::time::Duration;

/// One slot of the slab: the generation of its last request, the finished operation that waits
/// there to be collected, and, while it is free, the next free slot (the free list lives in
/// the slots themselves, so posting and collecting touch one cache line).
#[derive(Debug)]
struct Slot {
    generation: u32,
    next_free: u32,
    done: Option<Completion>,
}

/// The end of the free list.
const NONE: u32 = u32::MAX;

/// The error for a request this endpoint does not hold.
#[cold]
#[inline(never)]
fn unknown_request(req: ReqId) -> Error {
    Error::Invalid(format!("unknown or finished request {}", req.0))
}

/// Rank `rank` of `size` ranks on a transport that does nothing (see the module docs).
#[derive(Debug)]
pub struct NoopEndpoint {
    rank: Rank,
    size: u32,
    slots: Vec<Slot>,
    /// The first free slot ([`NONE`]: every slot is in use).
    free: u32,
    outstanding: usize,
}

impl NoopEndpoint {
    /// Rank `rank` of a run of `size` ranks; an error unless `rank < size`.
    pub fn new(rank: Rank, size: u32) -> Result<Self> {
        check_rank("rank", rank, size)?;
        Ok(NoopEndpoint {
            rank,
            size,
            slots: Vec::new(),
            free: NONE,
            outstanding: 0,
        })
    }

    /// Operations posted and not yet collected.
    pub fn outstanding(&self) -> usize {
        self.outstanding
    }

    /// Keep a finished operation until its request is tested.
    #[inline(always)]
    fn park(&mut self, c: Completion) -> ReqId {
        if self.free == NONE {
            self.grow();
        }
        let i = self.free;
        let s = &mut self.slots[i as usize];
        self.free = s.next_free;
        self.outstanding += 1;
        let g = s.generation.wrapping_add(1);
        s.generation = g;
        // A free slot is empty: nothing to drop (and no drop code on this path).
        let old = s.done.replace(c);
        debug_assert!(old.is_none(), "a free slot held a completion");
        std::mem::forget(old);
        ReqId((u64::from(g) << 32) | u64::from(i))
    }

    /// A new empty slot at the head of the free list (the slab grows only until it holds the
    /// most operations a pattern keeps outstanding).
    #[cold]
    #[inline(never)]
    fn grow(&mut self) {
        self.slots.push(Slot {
            generation: 0,
            next_free: self.free,
            done: None,
        });
        self.free = (self.slots.len() - 1) as u32;
    }

    /// The sender and tag a receive "hears" from: those asked for; for a wildcard source the
    /// next rank, for a wildcard tag 0.
    #[inline(always)]
    fn source_of(&self, src: Src, tag: TagSel) -> Result<(Rank, Tag)> {
        let peer = match src {
            Src::Rank(r) => {
                check_rank("source", r, self.size)?;
                r
            }
            Src::Any => (self.rank + 1) % self.size,
        };
        let tag = match tag {
            TagSel::Tag(t) => t,
            TagSel::Any => 0,
        };
        Ok((peer, tag))
    }
}

impl Endpoint for NoopEndpoint {
    fn rank(&self) -> Rank {
        self.rank
    }

    fn size(&self) -> u32 {
        self.size
    }

    fn backend(&self) -> &'static str {
        "noop"
    }

    /// Every rank sends what this one does: one rank playing alone hears itself (the control
    /// plane's own gather would fill the other ranks' words from empty buffers).
    fn gather(&mut self, root: Rank, data: &[u8]) -> Result<Option<Vec<Vec<u8>>>> {
        check_rank("root", root, self.size)?;
        Ok((self.rank == root).then(|| vec![data.to_vec(); self.size as usize]))
    }

    fn timeout(&self) -> Duration {
        // Nothing ever waits on this endpoint: every operation is finished when posted.
        Duration::from_secs(1)
    }

    #[inline(always)]
    fn isend(&mut self, dest: Rank, tag: Tag, buf: Vec<u8>) -> Result<ReqId> {
        check_rank("destination", dest, self.size)?;
        Ok(self.park(Completion::send(buf, dest, tag)))
    }

    #[inline(always)]
    fn irecv(&mut self, src: Src, tag: TagSel, buf: Vec<u8>) -> Result<ReqId> {
        let (peer, tag) = self.source_of(src, tag)?;
        let len = buf.len();
        Ok(self.park(Completion::recv(buf, peer, tag, len)))
    }

    #[inline(always)]
    fn test(&mut self, req: ReqId) -> Result<Option<Completion>> {
        let i = (req.0 & 0xFFFF_FFFF) as u32;
        let g = (req.0 >> 32) as u32;
        if let Some(s) = self.slots.get_mut(i as usize) {
            if s.generation == g {
                if let Some(c) = s.done.take() {
                    s.next_free = self.free;
                    self.free = i;
                    self.outstanding -= 1;
                    return Ok(Some(c));
                }
            }
        }
        Err(unknown_request(req))
    }

    /// Every span is finished when posted, as every message is; a receive holds `span.len`
    /// bytes.
    fn isend_span(&mut self, dest: Rank, tag: Tag, buf: Vec<u8>, span: Span) -> Result<ReqId> {
        span.range(buf.len())?;
        check_rank("destination", dest, self.size)?;
        Ok(self.park(Completion::send(buf, dest, tag)))
    }

    fn irecv_span(&mut self, src: Src, tag: TagSel, buf: Vec<u8>, span: Span) -> Result<ReqId> {
        span.range(buf.len())?;
        let (peer, tag) = self.source_of(src, tag)?;
        Ok(self.park(Completion::recv(buf, peer, tag, span.len)))
    }

    /// The direct path (as mpi's and shm's): nothing to wait for, so no request is made.
    /// The buffer passes through [`std::hint::black_box`], opaque to the optimiser as a real
    /// transport's call is, so a loop of messages is not folded away.
    #[inline(always)]
    fn send(&mut self, dest: Rank, _tag: Tag, buf: Vec<u8>) -> Result<Vec<u8>> {
        check_rank("destination", dest, self.size)?;
        Ok(std::hint::black_box(buf))
    }

    /// The direct path (as mpi's and shm's): the message "arrives" at once (through
    /// [`std::hint::black_box`], as `send`).
    #[inline(always)]
    fn recv(&mut self, src: Src, tag: TagSel, buf: Vec<u8>) -> Result<Completion> {
        let (peer, tag) = self.source_of(src, tag)?;
        let buf = std::hint::black_box(buf);
        let len = buf.len();
        Ok(Completion::recv(buf, peer, tag, len))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::method::engine::{Measurement, StopFlag};
    use crate::method::{MethodConfig, NppChoice, PatternKind};

    #[test]
    fn operations_finish_at_once_and_are_collected_once() {
        let mut ep = NoopEndpoint::new(0, 2).unwrap();
        let s = ep.isend(1, 7, vec![1, 2, 3]).unwrap();
        let r = ep.irecv(Src::Any, TagSel::Any, vec![0; 5]).unwrap();
        assert_eq!(ep.outstanding(), 2);
        let c = ep.test(r).unwrap().unwrap();
        assert_eq!((c.peer, c.tag, c.len, c.buf.len()), (1, 0, 5, 5));
        let c = ep.test(s).unwrap().unwrap();
        assert_eq!((c.peer, c.tag, c.len), (1, 7, 3));
        assert_eq!(ep.outstanding(), 0);
        // Collected once; a reused slot does not answer to the old request.
        assert!(ep.test(s).is_err());
        let again = ep.isend(1, 7, Vec::new()).unwrap();
        assert_ne!(again, s);
        assert!(ep.test(s).is_err());
        assert!(ep.test(again).unwrap().is_some());
        assert!(ep.test(ReqId(u64::MAX)).is_err());
    }

    #[test]
    fn bad_ranks_are_errors() {
        assert!(NoopEndpoint::new(2, 2).is_err());
        let mut ep = NoopEndpoint::new(1, 2).unwrap();
        assert!(ep.isend(2, 1, Vec::new()).is_err());
        assert!(ep.irecv(Src::Rank(5), TagSel::Any, Vec::new()).is_err());
    }

    /// Rank 0 alone runs the whole method: every pattern, several sizes, and the slab never
    /// holds more than one window's operations (nothing leaks from one message to the next).
    #[test]
    fn one_rank_runs_a_whole_measurement() {
        for kind in [
            PatternKind::PingPong,
            PatternKind::Exchange,
            PatternKind::Bandwidth { window: 16 },
            PatternKind::BiBandwidth { window: 8 },
        ] {
            let cfg = MethodConfig {
                sizes: vec![0, 8, 1000],
                trials: 50,
                warmup: 3,
                npp: NppChoice::Fixed(20),
                timer_samples: 1000,
                ..MethodConfig::default()
            };
            let stop = StopFlag::new();
            let m = Measurement::new(kind, cfg, None).with_stop(&stop);
            let mut ep = NoopEndpoint::new(0, 2).unwrap();
            crate::transport::Program::run(&m, &mut ep).unwrap();
            assert_eq!(ep.outstanding(), 0, "{kind:?}");
            assert!(ep.slots.len() <= 2 * 16 + 2, "{kind:?}: {}", ep.slots.len());
            let c = m.take_collected();
            assert_eq!(c.points.len(), 3, "{kind:?}");
            for p in &c.points {
                assert_eq!((p.npp, p.trial_ns.len()), (20, 50));
            }
        }
    }
}
