//! One-way latency of small messages over loopback TCP, both modes: a quick check of the
//! backend's fast paths (not a measurement method; `commbench` itself does that properly).
//!
//! ```text
//! cargo run --release -p commbench-tcp --example tcp_pingpong -- [SIZE_BYTES] [ROUNDS]
//! ```
//!
//! Prints the mean one-way time (half the round trip) over ROUNDS ping-pongs after a warm-up,
//! and the bandwidth of 4 MiB ping-pongs, for the blocking and the busy-polling mode.

use commbench_core::{Endpoint, Program, Result, Src, TagSel};
use commbench_tcp::{run_threads, TcpConfig};
use std::time::Instant;

struct PingPong {
    size: usize,
    rounds: u32,
}

impl Program for PingPong {
    type Output = f64;
    fn run<E: Endpoint>(&self, ep: &mut E) -> Result<f64> {
        let mut buf = vec![0u8; self.size];
        let peer = 1 - ep.rank();
        let warm = (self.rounds / 10).max(1);
        let mut t0 = Instant::now();
        for i in 0..warm + self.rounds {
            if i == warm {
                ep.barrier()?;
                t0 = Instant::now();
            }
            if ep.rank() == 0 {
                buf = ep.send(peer, 0, buf)?;
                buf = ep.recv(Src::Rank(peer), TagSel::Tag(0), buf)?.buf;
            } else {
                buf = ep.recv(Src::Rank(peer), TagSel::Tag(0), buf)?.buf;
                buf = ep.send(peer, 0, buf)?;
            }
        }
        Ok(t0.elapsed().as_secs_f64() / f64::from(self.rounds) / 2.0)
    }
}

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let size = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(8);
    let rounds = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(20_000);
    for poll in [false, true] {
        let cfg = TcpConfig {
            poll,
            ..TcpConfig::default()
        };
        let mode = if poll { "poll" } else { "blocking" };
        let t = run_threads(2, &cfg, &PingPong { size, rounds })?[0];
        println!("{mode:>8}: {size} B one-way {:.2} us", t * 1e6);
        let big = 4 << 20;
        let t = run_threads(
            2,
            &cfg,
            &PingPong {
                size: big,
                rounds: 50,
            },
        )?[0];
        println!(
            "{mode:>8}: 4 MiB one-way {:.0} us = {:.0} MB/s",
            t * 1e6,
            big as f64 / t / 1e6
        );
    }
    Ok(())
}
