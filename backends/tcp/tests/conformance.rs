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
        ..TcpConfig::default()
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

#[test]
fn conformance_with_at_most_two_connections_open() {
    // Every rank keeps two connections open: every exchange with a third peer closes one, so
    // the suite's ordering, wildcard and control checks run across closes and reconnections.
    let h = Threads(TcpConfig {
        max_open: Some(2),
        ..cfg(false)
    });
    suite(&h, 3..=5, 1 << 20);
}
