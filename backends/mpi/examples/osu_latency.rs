//! A plain blocking MPI ping-pong, the loop of OSU's `osu_latency` written with rsmpi's
//! `MPI_Send`/`MPI_Recv`. It matches the C loop of `benches/mpi_pingpong.c`, against which
//! `benches/overhead.sh` measures commbench's mpi backend: a gap between commbench and that
//! loop is commbench's, not rsmpi's (docs/overhead.md).
//!
//! ```text
//! mpirun -np 2 --bind-to core target/release/examples/osu_latency [BYTES] [ITERS] [BATCHES]
//! ```
//!
//! Rank 0 prints the median, over `BATCHES` batches of `ITERS` round trips, of the one-way
//! time `batch / (2 ITERS)` in microseconds (defaults: 8 bytes, 1000, 200).

use mpi::traits::*;

/// One-way times (us) of `batches` batches of `iters` 8-byte ping-pongs between ranks 0 and 1.
pub fn plain_pingpong(bytes: usize, iters: u64, batches: u64) -> Vec<f64> {
    let world = mpi::topology::SimpleCommunicator::world();
    let rank = world.rank();
    let mut buf = vec![0u8; bytes];
    let mut out = Vec::with_capacity(batches as usize);
    let one = |buf: &mut Vec<u8>| {
        if rank == 0 {
            world.process_at_rank(1).send(&buf[..]);
            world.process_at_rank(1).receive_into(&mut buf[..]);
        } else if rank == 1 {
            world.process_at_rank(0).receive_into(&mut buf[..]);
            world.process_at_rank(0).send(&buf[..]);
        }
    };
    for _ in 0..iters.min(1000) {
        one(&mut buf);
    }
    for _ in 0..batches {
        world.barrier();
        let t0 = mpi::time();
        for _ in 0..iters {
            one(&mut buf);
        }
        let t1 = mpi::time();
        out.push((t1 - t0) * 1e6 / (2 * iters) as f64);
    }
    out
}

/// The median of `v` (sorted in place); 0 for none.
pub fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => 0.0,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

#[allow(dead_code)]
fn main() {
    let arg = |i: usize, d: u64| {
        std::env::args()
            .nth(i)
            .and_then(|s| s.parse::<u64>().ok())
            .unwrap_or(d)
    };
    let (bytes, iters, batches) = (arg(1, 8) as usize, arg(2, 1000).max(1), arg(3, 200).max(1));
    let Some(universe) = mpi::initialize() else {
        eprintln!("osu_latency: MPI was already initialised");
        std::process::exit(2);
    };
    let world = universe.world();
    if world.size() < 2 {
        eprintln!("osu_latency: start with mpirun -np 2");
        std::process::exit(2);
    }
    let mut t = plain_pingpong(bytes, iters, batches);
    if world.rank() == 0 {
        println!(
            "# plain MPI_Send/MPI_Recv ping-pong ({})\n# bytes  one-way median (us) over {batches} batches of {iters}\n{bytes:>7}  {:.4}",
            commbench_mpi::library_version(),
            median(&mut t)
        );
    }
}
