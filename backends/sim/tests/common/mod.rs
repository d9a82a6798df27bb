//! What the simulator's tests share: the machines they build ([`machine`]), how many cases
//! their randomized checks run ([`scale`]), and the ping-pong of seed 000 §3.2 as a program,
//! timed on the virtual clock.
#![allow(dead_code)]

pub mod machine;
pub mod scale;

use commbench_core::{Endpoint, Program, Rank, Result, Src, TagSel};

/// Seed 000 §3.2: barrier, handshake, then `npp` timed ping-pongs per trial, timed on `src`.
pub struct PingPong {
    /// The rank that times.
    pub src: Rank,
    /// The rank that echoes.
    pub dst: Rank,
    /// Message size, bytes.
    pub n: usize,
    /// Ping-pongs per trial.
    pub npp: u64,
    /// Trials.
    pub trials: u32,
}

impl Program for PingPong {
    type Output = Vec<u64>;
    fn run<E: Endpoint>(&self, ep: &mut E) -> Result<Vec<u64>> {
        let me = ep.rank();
        let mut buf = vec![0u8; self.n];
        let mut hs = vec![0u8; 1];
        let mut times = Vec::new();
        for _ in 0..self.trials {
            ep.barrier()?;
            if me == self.src {
                hs = ep.recv(Src::Rank(self.dst), TagSel::Tag(2), hs)?.buf;
                let t1 = ep.now_ns();
                for _ in 0..self.npp {
                    buf = ep.send(self.dst, 1, buf)?;
                    buf = ep.recv(Src::Rank(self.dst), TagSel::Tag(1), buf)?.buf;
                }
                times.push(ep.now_ns() - t1);
            } else if me == self.dst {
                hs = ep.send(self.src, 2, hs)?;
                for _ in 0..self.npp {
                    buf = ep.recv(Src::Rank(self.src), TagSel::Tag(1), buf)?.buf;
                    buf = ep.send(self.src, 1, buf)?;
                }
            }
        }
        ep.barrier()?;
        Ok(times)
    }
}
