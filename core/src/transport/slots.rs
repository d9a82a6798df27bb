//! [`Slots`]: the table of outstanding operations of a backend whose library holds a posted
//! operation, and the caller's buffer, until the operation completes (libfabric, UCX).
//!
//! Each operation takes a slot that owns its buffer from the post to the completion. Its
//! request handle carries the slot's index and a generation that changes each time the slot is
//! taken, so that a handle already completed (or never issued) is refused instead of reading
//! another operation's slot. The backend keeps what its library needs per slot in `extra` (a
//! libfabric context, a UCX request).

use super::error::{Error, Result};
use super::{Completion, OpKind, Rank, ReqId, Tag};
use std::time::Duration;

/// Where a slot's operation stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SlotState {
    /// Not in use: on the free list.
    Free,
    /// Posted, not yet completed.
    Posted,
    /// Completed, its completion not yet handed back.
    Done,
}

/// One outstanding operation.
#[derive(Debug)]
pub struct Slot<X> {
    /// Changes each time the slot is taken (the upper half of its request handles).
    pub gen: u32,
    /// Where the operation stands.
    pub state: SlotState,
    /// Send or receive.
    pub kind: OpKind,
    /// Destination of a send, source of a receive (`None`: any; the sender once received).
    pub peer: Option<Rank>,
    /// The tag (of the message received, once received).
    pub tag: Tag,
    /// Bytes transferred (a receive's length once received).
    pub len: usize,
    /// Bytes the posted buffer holds.
    pub cap: usize,
    /// The caller's buffer, owned until the completion is handed back.
    pub buf: Vec<u8>,
    /// The operation's error, handed back instead of its completion.
    pub err: Option<Error>,
    /// What the backend keeps per slot.
    pub extra: X,
}

/// The slots of one endpoint, with a free list.
#[derive(Debug)]
pub struct Slots<X> {
    slots: Vec<Slot<X>>,
    free: Vec<usize>,
    backend: &'static str,
}

impl<X> Slots<X> {
    /// No slots yet; `backend` names the backend in errors.
    pub fn new(backend: &'static str) -> Self {
        Slots {
            slots: Vec::new(),
            free: Vec::new(),
            backend,
        }
    }

    /// A free slot, now posted, owning `buf` (`len` and `cap` its length); a new slot gets
    /// `extra(index)`, a reused one keeps its `extra`.
    pub fn take(
        &mut self,
        kind: OpKind,
        peer: Option<Rank>,
        tag: Tag,
        buf: Vec<u8>,
        extra: impl FnOnce(usize) -> X,
    ) -> usize {
        let i = match self.free.pop() {
            Some(i) => i,
            None => {
                let i = self.slots.len();
                self.slots.push(Slot {
                    gen: 0,
                    state: SlotState::Free,
                    kind,
                    peer,
                    tag,
                    len: 0,
                    cap: 0,
                    buf: Vec::new(),
                    err: None,
                    extra: extra(i),
                });
                i
            }
        };
        let s = &mut self.slots[i];
        s.gen = s.gen.wrapping_add(1);
        s.state = SlotState::Posted;
        (s.kind, s.peer, s.tag) = (kind, peer, tag);
        (s.len, s.cap) = (buf.len(), buf.len());
        s.buf = buf;
        s.err = None;
        i
    }

    /// The request handle of slot `i`'s current operation.
    pub fn req_of(&self, i: usize) -> ReqId {
        ReqId((self.slots[i].gen as u64) << 32 | i as u64)
    }

    /// The slot of a request handle still outstanding, or completed and not handed back.
    pub fn index_of(&self, req: ReqId) -> Result<usize> {
        let i = (req.0 & 0xFFFF_FFFF) as usize;
        match self.slots.get(i) {
            Some(s) if s.gen as u64 == req.0 >> 32 && s.state != SlotState::Free => Ok(i),
            _ => Err(Error::Invalid(format!(
                "{}: request {} is unknown or was already completed",
                self.backend, req.0
            ))),
        }
    }

    /// Free slot `i` again: its buffer.
    pub fn release(&mut self, i: usize) -> Vec<u8> {
        self.slots[i].state = SlotState::Free;
        self.free.push(i);
        std::mem::take(&mut self.slots[i].buf)
    }

    /// Hand back the completion of slot `i`, which is done (its error if it failed), and free
    /// the slot. A backend with bookkeeping per operation does it first.
    pub fn complete(&mut self, i: usize) -> Result<Completion> {
        let s = &mut self.slots[i];
        let (kind, peer, tag, len) = (s.kind, s.peer.unwrap_or(0), s.tag, s.len);
        let err = s.err.take();
        let buf = self.release(i);
        if let Some(e) = err {
            return Err(e);
        }
        Ok(match kind {
            OpKind::Send => Completion::send(buf, peer, tag),
            OpKind::Recv => Completion::recv(buf, peer, tag, len),
        })
    }

    /// The timeout of `rank` waiting `timeout` for slot `i`'s operation, naming the awaited
    /// peer; `what` says which operation (a request number, a size).
    pub fn timeout_error(&self, rank: Rank, i: usize, what: &str, timeout: Duration) -> Error {
        let s = &self.slots[i];
        timeout_awaiting(rank, s.kind, s.peer, what, timeout)
    }

    /// Every slot, in index order.
    pub fn iter(&self) -> std::slice::Iter<'_, Slot<X>> {
        self.slots.iter()
    }

    /// Number of slots ever made.
    pub fn len(&self) -> usize {
        self.slots.len()
    }

    /// Whether no slot was ever made.
    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// Every slot, taken out of the table (which is left empty): for a backend that must leak
    /// them rather than free them under its library.
    pub fn take_all(&mut self) -> Vec<Slot<X>> {
        self.free.clear();
        std::mem::take(&mut self.slots)
    }
}

/// The timeout of `rank` waiting `timeout` for an operation of `kind` with `peer` (`None`: a
/// receive from any rank), naming the awaited peer; `what` says which operation.
pub fn timeout_awaiting(
    rank: Rank,
    kind: OpKind,
    peer: Option<Rank>,
    what: &str,
    timeout: Duration,
) -> Error {
    let what = match (kind, peer) {
        (OpKind::Recv, Some(p)) => format!("a message from rank {p} ({what})"),
        (OpKind::Recv, None) => format!("a message from any rank ({what})"),
        (OpKind::Send, p) => format!("rank {} to take a send ({what})", p.unwrap_or(0)),
    };
    Error::Timeout {
        rank,
        what,
        timeout,
    }
}

impl<X> std::ops::Index<usize> for Slots<X> {
    type Output = Slot<X>;
    fn index(&self, i: usize) -> &Slot<X> {
        &self.slots[i]
    }
}

impl<X> std::ops::IndexMut<usize> for Slots<X> {
    fn index_mut(&mut self, i: usize) -> &mut Slot<X> {
        &mut self.slots[i]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handles_of_completed_or_foreign_operations_are_refused() {
        let mut s: Slots<u8> = Slots::new("test");
        let a = s.take(OpKind::Send, Some(1), 5, vec![1, 2, 3], |i| i as u8);
        let ra = s.req_of(a);
        assert_eq!(s.index_of(ra).unwrap(), a);
        assert!(s.index_of(ReqId(ra.0 + 1)).is_err(), "an index never used");
        s[a].state = SlotState::Done;
        let c = s.complete(a).unwrap();
        assert_eq!((c.kind, c.peer, c.tag, c.len), (OpKind::Send, 1, 5, 3));
        assert_eq!(c.buf, vec![1, 2, 3]);
        assert!(s.index_of(ra).is_err(), "completed once");
        // The slot is reused with a new generation: the old handle stays refused.
        let b = s.take(OpKind::Recv, None, 0, vec![0; 8], |_| 9);
        assert_eq!(b, a);
        assert_eq!(s[b].extra, 0, "a reused slot keeps its extra");
        assert!(s.index_of(ra).is_err());
        assert_eq!(s.index_of(s.req_of(b)).unwrap(), b);
        let e = s.timeout_error(0, b, "request 1", Duration::from_secs(1));
        assert!(e.to_string().contains("any rank"), "{e}");
        s[b].state = SlotState::Done;
        (s[b].len, s[b].peer, s[b].tag) = (4, Some(2), 7);
        s[b].err = Some(Error::Invalid("failed".into()));
        assert!(s.complete(b).is_err());
        assert!(s.index_of(s.req_of(b)).is_err());
    }
}
