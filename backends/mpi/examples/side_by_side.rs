//! Same placement, different transport: under `mpirun -np 2`, the 8-byte ping-pong on the mpi
//! backend, then on tcp and shm bootstrapped through MPI ([`Mpi::rendezvous`],
//! [`Mpi::shared_token`]) between the very same two processes, with the medians side by side
//! and their ratios to mpi. This is what `commbench pingpong --backend mpi,tcp,shm` does.
//!
//! ```text
//! mpirun -np 2 --bind-to core target/release/examples/side_by_side
//! ```

mod common;

use commbench_core::launch::RankEnv;
use commbench_core::method::engine::Measurement;
use commbench_core::method::MethodConfig;
use commbench_core::method::PatternKind;
use commbench_core::Result;
use commbench_mpi::{Mpi, MpiClock, MpiConfig};
use std::time::Duration;

fn bench() -> Measurement<'static, PatternKind> {
    let cfg = MethodConfig {
        sizes: vec![8],
        trials: 1000,
        warmup: 100,
        timer_samples: 1 << 16,
        ..MethodConfig::default()
    };
    Measurement::new(PatternKind::PingPong, cfg, None)
}

fn median_us(b: &Measurement<'_, PatternKind>) -> Result<Option<f64>> {
    let c = b.take_collected();
    match c.points.first() {
        Some(p) => Ok(Some(p.median_one_way_us())),
        None => Ok(None),
    }
}

fn all(mpi: &Mpi) -> Result<Vec<(&'static str, Option<f64>)>> {
    let t = Duration::from_secs(30);
    let mut out = Vec::new();
    let b = bench();
    mpi.run(
        &MpiConfig {
            timeout: t,
            clock: MpiClock::Monotonic,
        },
        &b,
    )?;
    out.push(("mpi", median_us(&b)?));

    let token = mpi.shared_token(t)?;
    let b = bench();
    let mut rdv = mpi.rendezvous(t)?;
    commbench_tcp::run_rank_over(&mut rdv, &token, &commbench_tcp::TcpConfig::default(), &b)?;
    drop(rdv);
    out.push(("tcp", median_us(&b)?));

    let mut env = RankEnv::detect(None, None, mpi.size())?;
    env.token = Some(token);
    let b = bench();
    commbench_shm::run_rank(&env, None, &commbench_shm::ShmConfig::default(), &b)?;
    out.push(("shm", median_us(&b)?));
    Ok(out)
}

fn main() {
    let mpi = common::init("side_by_side");
    let v = common::or_abort(&mpi, "side_by_side", all(&mpi));
    if mpi.rank() == 0 {
        let base = v[0].1.unwrap_or(f64::NAN);
        println!("# backend  8 B one-way median (us)  ratio to mpi");
        for (name, m) in v {
            let m = m.unwrap_or(f64::NAN);
            println!("{name:>9}  {m:>26.4}  {:>12.3}", m / base);
        }
    }
}
