//! Harness overhead of the mpi backend, measured side by side in one run: a plain blocking
//! MPI ping-pong loop (`osu_latency.rs`) and commbench's ping-pong on [`MpiEndpoint`], in
//! alternating rounds between the same two processes.
//!
//! ```text
//! mpirun -np 2 --bind-to core target/release/examples/overhead [ROUNDS]
//! ```
//!
//! Rank 0 prints, per round and overall, the 8-byte one-way medians (us) of: the plain loop;
//! commbench with the method's own npp (§3.3, barrier + handshake per trial); commbench with
//! npp fixed to the plain loop's batch length; and the ratios commbench / plain.
//!
//! [`MpiEndpoint`]: commbench_mpi::MpiEndpoint

mod common;
#[path = "osu_latency.rs"]
mod osu;

use commbench_core::method::engine::Measurement;
use commbench_core::method::PatternKind;
use commbench_core::method::{MethodConfig, NppChoice};
use commbench_mpi::{Mpi, MpiClock, MpiConfig};

const ITERS: u64 = 1000;
const BATCHES: u64 = 100;

fn commbench_median(mpi: &Mpi, npp: NppChoice, trials: u64) -> commbench_core::Result<f64> {
    let cfg = MethodConfig {
        sizes: vec![8],
        trials,
        warmup: 1000,
        npp,
        timer_samples: 1 << 20,
        ..MethodConfig::default()
    };
    let b = Measurement::new(PatternKind::PingPong, cfg, None);
    mpi.run(
        &MpiConfig {
            clock: MpiClock::Wtime,
            ..MpiConfig::default()
        },
        &b,
    )?;
    let c = b.take_collected();
    match c.points.first() {
        Some(p) => Ok(p.median_one_way_us()),
        None => Ok(0.0),
    }
}

fn main() {
    let rounds: usize = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(5);
    let mpi = common::init("overhead");
    let me = mpi.rank();
    let (mut plain, mut auto, mut fixed) = (Vec::new(), Vec::new(), Vec::new());
    if me == 0 {
        println!(
            "# 8-byte one-way medians, us ({})",
            commbench_mpi::library_version()
        );
        println!("# round  plain-loop  commbench(npp auto)  commbench(npp {ITERS})  auto/plain  fixed/plain");
    }
    for r in 0..rounds {
        let mut t = osu::plain_pingpong(8, ITERS, BATCHES);
        let p = osu::median(&mut t);
        let run = commbench_median(&mpi, MethodConfig::default().npp, 2000)
            .and_then(|a| Ok((a, commbench_median(&mpi, NppChoice::Fixed(ITERS), BATCHES)?)));
        let (a, f) = common::or_abort(&mpi, "overhead", run);
        if me == 0 {
            println!(
                "{r:>7}  {p:>10.4}  {a:>19.4}  {f:>20.4}  {:>10.4}  {:>11.4}",
                a / p,
                f / p
            );
            plain.push(p);
            auto.push(a);
            fixed.push(f);
        }
    }
    if me == 0 {
        let (p, a, f) = (
            osu::median(&mut plain),
            osu::median(&mut auto),
            osu::median(&mut fixed),
        );
        println!(
            "median   {p:>10.4}  {a:>19.4}  {f:>20.4}  {:>10.4}  {:>11.4}",
            a / p,
            f / p
        );
    }
}
