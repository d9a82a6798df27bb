//! Control-plane algorithms on top of the data plane, with reserved tags: binomial trees
//! rooted at the rank that gathers, broadcasts or is released first. A rank exchanges
//! messages with its parent and at most `log2(n)` children, so the root handles `log2(n)`
//! messages a step instead of `n - 1`, and a backend that connects on demand opens few
//! connections for the control plane (an all-pairs round at a thousand ranks: ten). The
//! control plane runs between timed regions, never inside one.
//!
//! The tree of `n` ranks rooted at `root` numbers every rank by its distance `v = (rank -
//! root) mod n` from the root; `v`'s parent is `v` with its lowest set bit cleared, its
//! children are `v + 2^k` for every `2^k` below that bit (every `2^k < n` for the root).
//! With two ranks every algorithm is the linear one: one message each way.

use super::{
    Endpoint, Rank, Src, TagSel, TAG_ABARRIER, TAG_BARRIER, TAG_BCAST, TAG_CLOSING, TAG_GATHER,
};
use crate::transport::error::{Error, Result};

fn check_root<E: Endpoint + ?Sized>(ep: &E, root: Rank) -> Result<()> {
    if root >= ep.size() {
        return Err(Error::Invalid(format!(
            "root rank {root} out of range for {} ranks",
            ep.size()
        )));
    }
    Ok(())
}

/// A rank's place in the binomial tree of `n` ranks rooted at `root`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tree {
    n: u32,
    root: Rank,
    /// Distance from the root: `(rank - root) mod n`.
    v: u32,
}

impl Tree {
    /// The place of `rank` among `n` ranks (`rank < n`, `root < n`).
    pub fn new(n: u32, root: Rank, rank: Rank) -> Tree {
        let n = n.max(1);
        let v = ((u64::from(rank) + u64::from(n) - u64::from(root % n)) % u64::from(n)) as u32;
        Tree {
            n,
            root: root % n,
            v,
        }
    }

    fn rank_of(&self, v: u32) -> Rank {
        ((u64::from(v) + u64::from(self.root)) % u64::from(self.n)) as Rank
    }

    /// The parent (`None` at the root).
    pub fn parent(&self) -> Option<Rank> {
        (self.v != 0).then(|| self.rank_of(self.v & (self.v - 1)))
    }

    /// The children, `v + 1, v + 2, v + 4, ...`: the last has the largest subtree.
    pub fn children(&self) -> impl Iterator<Item = Rank> + '_ {
        let low = if self.v == 0 {
            u64::from(self.n).next_power_of_two()
        } else {
            u64::from(self.v & self.v.wrapping_neg())
        };
        (0..32)
            .map(|k| 1u64 << k)
            .take_while(move |&b| b < low)
            .map(move |b| u64::from(self.v) + b)
            .take_while(move |&c| c < u64::from(self.n))
            .map(move |c| self.rank_of(c as u32))
    }
}

/// Barrier: every rank reports up the tree rooted at rank 0, which then releases everyone
/// down it.
pub fn barrier<E: Endpoint + ?Sized>(ep: &mut E) -> Result<()> {
    barrier_first(ep, 0)
}

/// Barrier that releases `first` before the others (seed 004's asymmetric barrier; with
/// `first == 0` it is an ordinary barrier). Every rank reports up the tree rooted at `first`
/// once its subtree has; `first` leaves once all have arrived and its release travels down.
pub fn barrier_first<E: Endpoint + ?Sized>(ep: &mut E, first: Rank) -> Result<()> {
    check_root(ep, first)?;
    let tag = if first == 0 {
        TAG_BARRIER
    } else {
        TAG_ABARRIER
    };
    tree_barrier(ep, Tree::new(ep.size(), first, ep.rank()), |r| r, tag)
}

/// The barrier of `tree`, whose places are the ranks `at` gives: every rank reports to its
/// parent once its children have, and the root's release travels down.
fn tree_barrier<E: Endpoint + ?Sized>(
    ep: &mut E,
    tree: Tree,
    at: impl Fn(Rank) -> Rank,
    tag: super::Tag,
) -> Result<()> {
    let kids: Vec<Rank> = tree.children().map(&at).collect();
    let mut buf = Vec::new();
    for &c in &kids {
        buf = ep.recv(Src::Rank(c), TagSel::Tag(tag), buf)?.buf;
    }
    if let Some(p) = tree.parent().map(&at) {
        buf = ep.send(p, tag, buf)?;
        buf = ep.recv(Src::Rank(p), TagSel::Tag(tag), buf)?.buf;
    }
    // The largest subtree first: its release has the longest way to go.
    for &c in kids.iter().rev() {
        buf = ep.send(c, tag, buf)?;
    }
    Ok(())
}

/// Barrier of the ranks in `live` only (distinct ranks of the run, this one among them), in
/// the tree of their positions in `live` rooted at its first: the end of a run that went on
/// without the others ([`crate::transport::Program::gone`]), where the barrier of every rank
/// would wait for ranks that are gone. Its messages have a tag of their own
/// ([`super::TAG_CLOSING`]).
pub fn barrier_among<E: Endpoint + ?Sized>(ep: &mut E, live: &[Rank]) -> Result<()> {
    let me = ep.rank();
    let size = ep.size();
    let mut seen = vec![false; size as usize];
    for &r in live {
        match seen.get_mut(r as usize) {
            None => {
                return Err(Error::Invalid(format!(
                    "rank {r} out of range for {size} ranks"
                )))
            }
            Some(true) => return Err(Error::Invalid(format!("rank {r} is twice in the barrier"))),
            Some(s) => *s = true,
        }
    }
    let pos = live.iter().position(|&r| r == me).ok_or_else(|| {
        Error::Invalid(format!("rank {me} is not among the ranks of the barrier"))
    })?;
    let tree = Tree::new(live.len() as u32, 0, pos as u32);
    tree_barrier(ep, tree, |p| live[p as usize], TAG_CLOSING)
}

/// [`barrier_among`] every rank but those in `gone` (the ranks a run went on without), its
/// error in a phase that names them.
pub fn barrier_without<E: Endpoint + ?Sized>(ep: &mut E, gone: &[Rank]) -> Result<()> {
    let live: Vec<Rank> = (0..ep.size()).filter(|r| !gone.contains(r)).collect();
    barrier_among(ep, &live).map_err(|e| {
        let names: Vec<String> = gone.iter().map(Rank::to_string).collect();
        let s = if gone.len() == 1 { "" } else { "s" };
        e.in_phase(format!(
            "the barrier of the ranks still live (without rank{s} {})",
            names.join(", ")
        ))
    })
}

/// Broadcast from `root` down the tree: the length first, then the bytes.
pub fn broadcast<E: Endpoint + ?Sized>(ep: &mut E, root: Rank, data: &mut Vec<u8>) -> Result<()> {
    check_root(ep, root)?;
    let tree = Tree::new(ep.size(), root, ep.rank());
    if let Some(p) = tree.parent() {
        *data = recv_sized(ep, p, TAG_BCAST)?;
    }
    let kids: Vec<Rank> = tree.children().collect();
    for &c in kids.iter().rev() {
        ep.send(c, TAG_BCAST, (data.len() as u64).to_le_bytes().to_vec())?;
        *data = ep.send(c, TAG_BCAST, std::mem::take(data))?;
    }
    Ok(())
}

/// Gather to `root` up the tree: every rank sends its parent its subtree's contributions,
/// each as `(rank u32, length u64, bytes)` (the length of the whole first, then the bytes).
pub fn gather<E: Endpoint + ?Sized>(
    ep: &mut E,
    root: Rank,
    data: &[u8],
) -> Result<Option<Vec<Vec<u8>>>> {
    check_root(ep, root)?;
    let (n, me) = (ep.size(), ep.rank());
    let tree = Tree::new(n, root, me);
    let mut packed = Vec::with_capacity(12 + data.len());
    push_entry(&mut packed, me, data);
    for c in tree.children() {
        let got = recv_sized(ep, c, TAG_GATHER)?;
        packed.extend_from_slice(&got);
    }
    match tree.parent() {
        Some(p) => {
            ep.send(p, TAG_GATHER, (packed.len() as u64).to_le_bytes().to_vec())?;
            ep.send(p, TAG_GATHER, packed)?;
            Ok(None)
        }
        None => unpack(&packed, n).map(Some),
    }
}

/// One rank's entry in a subtree's contributions: its rank, the length, the bytes (the
/// bootstrap's allgather packs its entries the same way).
pub(crate) fn push_entry(out: &mut Vec<u8>, rank: Rank, data: &[u8]) {
    out.extend_from_slice(&rank.to_le_bytes());
    out.extend_from_slice(&(data.len() as u64).to_le_bytes());
    out.extend_from_slice(data);
}

/// The entries packed in `b` ([`push_entry`]), in the order packed, each of a rank of a run
/// of `n`: what a subtree sends up, read without copying.
pub(crate) fn entries(mut b: &[u8], n: u32) -> Result<Vec<(Rank, &[u8])>> {
    let mut out = Vec::new();
    while !b.is_empty() {
        let bad = || Error::Protocol("a gathered entry cut short".into());
        let head = b.get(..12).ok_or_else(bad)?;
        let rank = u32::from_le_bytes([head[0], head[1], head[2], head[3]]);
        let len = decode_len(&head[4..12])?;
        let body = b.get(12..12 + len).ok_or_else(bad)?;
        if rank >= n {
            return Err(Error::Protocol(format!(
                "a gathered entry of rank {rank} in a run of {n}"
            )));
        }
        out.push((rank, body));
        b = &b[12 + len..];
    }
    Ok(out)
}

/// The root's gathered entries, in rank order, each rank exactly once.
pub(crate) fn unpack(b: &[u8], n: u32) -> Result<Vec<Vec<u8>>> {
    let mut all: Vec<Option<Vec<u8>>> = (0..n).map(|_| None).collect();
    for (rank, body) in entries(b, n)? {
        match &mut all[rank as usize] {
            slot @ None => *slot = Some(body.to_vec()),
            Some(_) => return Err(Error::Protocol(format!("rank {rank} gathered twice"))),
        }
    }
    all.into_iter()
        .enumerate()
        .map(|(r, x)| x.ok_or_else(|| Error::Protocol(format!("rank {r} missing from a gather"))))
        .collect()
}

/// A message announced by its length: the length (8 bytes), then the bytes.
fn recv_sized<E: Endpoint + ?Sized>(ep: &mut E, from: Rank, tag: super::Tag) -> Result<Vec<u8>> {
    let c = ep.recv(Src::Rank(from), TagSel::Tag(tag), vec![0; 8])?;
    let len = decode_len(&c.buf[..c.len])?;
    let c = ep.recv(Src::Rank(from), TagSel::Tag(tag), vec![0; len])?;
    let mut b = c.buf;
    b.truncate(c.len);
    Ok(b)
}

fn decode_len(b: &[u8]) -> Result<usize> {
    let arr: [u8; 8] = b
        .try_into()
        .map_err(|_| Error::Protocol(format!("control length of {} bytes", b.len())))?;
    let len = u64::from_le_bytes(arr);
    usize::try_from(len)
        .ok()
        .filter(|&l| l <= 1 << 40)
        .ok_or_else(|| Error::Protocol(format!("control message of {len} bytes")))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every rank has one parent but the root, the edges form a tree covering all ranks, and
    /// no rank has more than `ceil(log2 n)` children.
    #[test]
    fn trees_cover_every_rank_once() {
        for n in 1..=70u32 {
            for root in [0, n / 3, n - 1] {
                let mut parent_of = vec![None; n as usize];
                for r in 0..n {
                    let t = Tree::new(n, root, r);
                    assert_eq!(t.parent().is_none(), r == root, "n {n} root {root} r {r}");
                    let kids: Vec<Rank> = t.children().collect();
                    assert!(kids.len() as u32 <= 32 - (n - 1).leading_zeros(), "n {n}");
                    for c in kids {
                        assert!(parent_of[c as usize].replace(r).is_none(), "n {n} c {c}");
                        assert_eq!(Tree::new(n, root, c).parent(), Some(r));
                    }
                }
                let orphans = parent_of.iter().filter(|p| p.is_none()).count();
                assert_eq!(
                    orphans, 1,
                    "n {n} root {root}: only the root lacks a parent"
                );
            }
        }
    }

    #[test]
    fn unpack_refuses_what_a_tree_cannot_send() {
        let mut b = Vec::new();
        push_entry(&mut b, 1, b"x");
        push_entry(&mut b, 0, b"");
        assert_eq!(unpack(&b, 2).unwrap(), vec![b"".to_vec(), b"x".to_vec()]);
        assert!(unpack(&b, 3)
            .unwrap_err()
            .to_string()
            .contains("rank 2 missing"));
        push_entry(&mut b, 1, b"y");
        assert!(unpack(&b, 2).unwrap_err().to_string().contains("twice"));
        assert!(unpack(&b[..5], 2).is_err());
    }
}
