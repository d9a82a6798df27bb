//! A run in which rank 1 is killed (SIGKILL) in the middle of a ping-pong benchmark: the job
//! must end with an error, not hang (`tests/mpirun.rs`).
//!
//! ```text
//! mpirun -np 2 target/debug/examples/victim
//! ```

mod common;

use commbench_core::method::engine::Measurement;
use commbench_core::method::PatternKind;
use commbench_core::method::{MethodConfig, NppChoice};
use commbench_mpi::MpiConfig;
use std::time::Duration;

fn main() {
    let mpi = common::init("victim");
    if mpi.rank() == 1 {
        std::thread::spawn(|| {
            std::thread::sleep(Duration::from_millis(700));
            eprintln!("victim: killing rank 1 (pid {})", std::process::id());
            let _ = std::process::Command::new("kill")
                .args(["-KILL", &std::process::id().to_string()])
                .status();
        });
    }
    let cfg = MethodConfig {
        sizes: vec![8],
        trials: 100_000_000,
        warmup: 10,
        npp: NppChoice::Fixed(10),
        timer_samples: 1 << 12,
        ..MethodConfig::default()
    };
    let b = Measurement::new(PatternKind::PingPong, cfg, None);
    let r = mpi.run(
        &MpiConfig {
            timeout: Duration::from_secs(5),
            ..MpiConfig::default()
        },
        &b,
    );
    match r {
        Ok(()) => {
            eprintln!(
                "victim: rank {} finished although rank 1 was killed",
                mpi.rank()
            );
            std::process::exit(3);
        }
        Err(e) => {
            eprintln!("victim: rank {}: {e}", mpi.rank());
            std::process::exit(1);
        }
    }
}
