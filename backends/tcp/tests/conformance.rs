//! The core conformance suite over the TCP backend, all ranks as threads on loopback.

use commbench_core::testkit::{run_check, Harness, CHECKS};
use commbench_core::{Program, Result};
use commbench_tcp::{run_threads, TcpConfig};
use std::time::Duration;

struct Threads(TcpConfig);

impl Harness for Threads {
    fn run<P: Program>(&self, n: u32, p: &P) -> Result<Vec<P::Output>> {
        run_threads(n, &self.0, p)
    }
}

fn cfg(poll: bool) -> TcpConfig {
    TcpConfig {
        poll,
        timeout: Duration::from_secs(20),
        bind_host: None,
        cpus: Vec::new(),
    }
}

fn suite(h: &Threads, ranks: std::ops::RangeInclusive<u32>, max: usize) {
    for n in ranks {
        for name in CHECKS {
            if let Err(e) = run_check(h, name, n, max) {
                panic!("check `{name}` on {n} ranks: {e}");
            }
        }
    }
}

#[test]
fn conformance_blocking_mode() {
    suite(&Threads(cfg(false)), 2..=4, 8 << 20);
}

#[test]
fn conformance_poll_mode() {
    // Busy-polling ranks share few cores here: two and three ranks, smaller sizes.
    suite(&Threads(cfg(true)), 2..=3, 1 << 20);
}

#[test]
fn control_plane_on_trees_of_5_to_9_ranks() {
    // The control plane's binomial trees have depth 3 and more from 5 ranks on; every root.
    let h = Threads(cfg(false));
    for n in 5..=9 {
        if let Err(e) = run_check(&h, "control_plane", n, 1 << 10) {
            panic!("control plane on {n} ranks: {e}");
        }
    }
}
