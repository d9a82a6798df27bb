//! Quick performance check of the shm backend (not a benchmark of record: `commbench` itself
//! does that with the full method). Two ranks run as threads of this process, pinned to two
//! different CPUs, and report:
//!
//! * the 8-byte one-way latency: median over batches of ping-pongs of batch time / (2 x batch);
//! * the 1 MiB and 4 MiB bandwidth: rank 0 sends a stream of blocking messages, rank 1 receives
//!   them and answers with one empty message at the end.
//!
//! ```text
//! cargo run --release -p commbench-shm --example shm_pingpong -- [--cpus 0,1] [--wait spin|spin-yield|futex]
//! ```

use commbench_core::{Endpoint, Error, Program, Result, Src, TagSel};
use commbench_shm::{run_threads, ShmConfig, WaitPolicy};

const BATCH: u32 = 100;
const BATCHES: usize = 2000;
const WARMUP: u32 = 20_000;

struct Bench;

/// Rank 0's results: one-way ns (median), then (size, bytes per second) pairs.
type Out = Option<(f64, Vec<(usize, f64)>)>;

impl Program for Bench {
    type Output = Out;
    fn run<E: Endpoint>(&self, ep: &mut E) -> Result<Out> {
        let me = ep.rank();
        let peer = 1 - me;
        let mut buf = vec![0u8; 8];
        let pong = |ep: &mut E, buf: Vec<u8>| -> Result<Vec<u8>> {
            if me == 0 {
                let b = ep.send(peer, 1, buf)?;
                Ok(ep.recv(Src::Rank(peer), TagSel::Tag(1), b)?.buf)
            } else {
                let c = ep.recv(Src::Rank(peer), TagSel::Tag(1), buf)?;
                ep.send(peer, 1, c.buf)
            }
        };
        for _ in 0..WARMUP {
            buf = pong(ep, buf)?;
        }
        ep.barrier()?;
        let mut one_way = Vec::with_capacity(BATCHES);
        for _ in 0..BATCHES {
            let t0 = ep.now_ns();
            for _ in 0..BATCH {
                buf = pong(ep, buf)?;
            }
            one_way.push((ep.now_ns() - t0) as f64 / (2.0 * BATCH as f64));
        }
        one_way.sort_by(f64::total_cmp);
        let median = one_way[one_way.len() / 2];

        let mut bw = Vec::new();
        for size in [1usize << 20, 4 << 20] {
            let reps = (512 << 20) / size;
            let mut data = vec![7u8; size];
            // One unmeasured round to fault the pages in.
            for measured in [false, true] {
                ep.barrier()?;
                let t0 = ep.now_ns();
                if me == 0 {
                    for _ in 0..reps {
                        data = ep.send(peer, 2, data)?;
                    }
                    ep.recv(Src::Rank(peer), TagSel::Tag(3), Vec::new())?;
                } else {
                    for _ in 0..reps {
                        let c = ep.recv(Src::Rank(peer), TagSel::Tag(2), data)?;
                        if c.len != size {
                            return Err(Error::Invalid(format!("got {} bytes", c.len)));
                        }
                        data = c.buf;
                    }
                    ep.send(peer, 3, Vec::new())?;
                }
                let dt = (ep.now_ns() - t0) as f64 * 1e-9;
                if measured {
                    bw.push((size, (size * reps) as f64 / dt));
                }
            }
        }
        ep.barrier()?;
        Ok((me == 0).then_some((median, bw)))
    }
}

fn main() -> std::result::Result<(), Box<dyn std::error::Error>> {
    let mut cfg = ShmConfig {
        cpus: vec![0, 1],
        ..ShmConfig::default()
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match (a.as_str(), args.next()) {
            ("--cpus", Some(v)) => {
                cfg.cpus = v
                    .split(',')
                    .map(|c| c.trim().parse())
                    .collect::<std::result::Result<_, _>>()?
            }
            ("--wait", Some(v)) => cfg.wait = v.parse::<WaitPolicy>()?,
            _ => {
                return Err(format!(
                    "usage: pingpong [--cpus 0,1] [--wait spin|spin-yield|futex] (got {a})"
                )
                .into())
            }
        }
    }
    let outs = run_threads(2, &cfg, &Bench)?;
    let Some(Some((lat, bw))) = outs.into_iter().next() else {
        return Err("rank 0 returned no result".into());
    };
    println!("shm, wait {}, cpus {:?}", cfg.wait, cfg.cpus);
    println!(
        "8 B one-way latency (median of {BATCHES} batches of {BATCH} round trips): {lat:.1} ns"
    );
    for (size, b) in bw {
        println!("{:>2} MiB bandwidth: {:.2} GB/s", size >> 20, b / 1e9);
    }
    Ok(())
}
