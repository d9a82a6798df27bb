//! Connections on demand under a small limit: random traffic between random ranks, every rank
//! keeping only a few connections open, so that connections close and reopen while messages
//! are in flight. Every message must arrive, and those between two ranks in the order sent.

use commbench_core::stats::Xoshiro256 as Draw;
use commbench_core::{Endpoint, Error, Program, Rank, Result, Src, TagSel};
use commbench_tcp::{run_threads, TcpConfig};
use std::time::Duration;

/// Every rank sends, in a drawn order, a drawn number of messages of drawn sizes to drawn
/// peers, in phases separated by barriers; each message carries its sender and its number
/// among the sender's messages to that peer.
struct Traffic {
    seed: u64,
    phases: u32,
}

impl Traffic {
    /// The messages of `phase`: `(from, to, len)` in the order each sender posts them.
    fn plan(&self, n: u32, phase: u32) -> Vec<(Rank, Rank, usize)> {
        let mut d = Draw::new(self.seed ^ (u64::from(phase) << 32));
        let n_us = n as usize;
        let count = 1 + d.below(6 * n_us);
        (0..count)
            .map(|_| {
                let from = d.below(n_us) as Rank;
                let to = (from + 1 + d.below(n_us - 1) as Rank) % n;
                let len = [16usize, 100, 5000, 70_000][d.below(4)];
                (from, to, len)
            })
            .collect()
    }
}

impl Program for Traffic {
    type Output = ();
    fn run<E: Endpoint>(&self, ep: &mut E) -> Result<()> {
        let (me, n) = (ep.rank(), ep.size());
        let mut sent = vec![0u32; n as usize];
        let mut got = vec![0u32; n as usize];
        for phase in 0..self.phases {
            let plan = self.plan(n, phase);
            let incoming = plan.iter().filter(|m| m.1 == me).count();
            let mut reqs = Vec::new();
            for _ in 0..incoming {
                reqs.push(ep.irecv(Src::Any, TagSel::Any, vec![0; 70_000])?);
            }
            for &(_, to, len) in plan.iter().filter(|m| m.0 == me) {
                let mut b = vec![0u8; len];
                b[..4].copy_from_slice(&me.to_le_bytes());
                b[4..8].copy_from_slice(&sent[to as usize].to_le_bytes());
                sent[to as usize] += 1;
                reqs.push(ep.isend(to, 7, b)?);
            }
            let mut out = Vec::new();
            ep.wait_all(&reqs, &mut out)?;
            for c in out
                .iter()
                .filter(|c| c.kind == commbench_core::OpKind::Recv)
            {
                let from = u32::from_le_bytes(c.buf[..4].try_into().unwrap_or([0; 4]));
                let k = u32::from_le_bytes(c.buf[4..8].try_into().unwrap_or([0; 4]));
                if from != c.peer || k != got[from as usize] {
                    return Err(Error::Protocol(format!(
                        "rank {me}: message {k} from rank {from} (sent by {}) arrived when \
                         message {} was due",
                        c.peer, got[from as usize]
                    )));
                }
                got[from as usize] += 1;
            }
            ep.barrier()?;
        }
        Ok(())
    }
}

#[test]
fn random_traffic_keeps_every_message_and_its_order_across_closes() {
    let base = std::env::var("COMMBENCH_TEST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(1, |d| d.as_nanos() as u64)
        });
    let mut d = Draw::new(base);
    for round in 0..8 {
        let n = 4 + d.below(5) as u32;
        let max_open = 2 + d.below(n as usize - 3);
        let poll = d.below(4) == 0;
        let seed = d.next_u64();
        let cfg = TcpConfig {
            poll,
            timeout: Duration::from_secs(20),
            max_open: Some(max_open),
            ..TcpConfig::default()
        };
        let p = Traffic { seed, phases: 6 };
        if let Err(e) = run_threads(n, &cfg, &p) {
            panic!(
                "round {round} of COMMBENCH_TEST_SEED={base}: {n} ranks, at most {max_open} \
                 open, poll {poll}: {e}"
            );
        }
    }
}
