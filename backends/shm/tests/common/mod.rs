//! Programs shared by the integration tests.

use commbench_core::{Endpoint, Error, OpKind, Program, Result, Src, TagSel};

/// Checks of the core suite to leave out here (none: all of them run).
pub const BROKEN_IN_CORE: &[&str] = &[];

pub fn pattern(len: usize, seed: u32) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u32).wrapping_mul(2_654_435_761).wrapping_add(seed) as u8)
        .collect()
}

/// The core's `many_in_flight` traffic (64 receives and 64 sends outstanding per peer, all
/// posted before any wait), with receive buffers twice the largest message.
pub struct ManyInFlight;

impl Program for ManyInFlight {
    type Output = ();
    fn run<E: Endpoint>(&self, ep: &mut E) -> Result<()> {
        const K: u32 = 64;
        let (me, n) = (ep.rank(), ep.size());
        let mut reqs = Vec::new();
        for peer in (0..n).filter(|&p| p != me) {
            for i in 0..K {
                reqs.push(ep.irecv(Src::Rank(peer), TagSel::Tag(i), vec![0; 2048])?);
            }
        }
        for peer in (0..n).filter(|&p| p != me) {
            for i in 0..K {
                reqs.push(ep.isend(peer, i, pattern(1000 + i as usize, me * 1000 + i))?);
            }
        }
        let mut out = Vec::new();
        ep.wait_all(&reqs, &mut out)?;
        for c in out.iter().filter(|c| c.kind == OpKind::Recv) {
            let want = pattern(1000 + c.tag as usize, c.peer * 1000 + c.tag);
            if c.buf[..c.len] != want[..] {
                return Err(Error::Invalid(format!(
                    "tag {} from {} differs",
                    c.tag, c.peer
                )));
            }
        }
        if out.len() != reqs.len() {
            return Err(Error::Invalid("missing completions".into()));
        }
        ep.barrier()
    }
}
