//! The core conformance suite on simulated nodes: the smallest hypercube holding `n` ranks
//! (ranks beyond `n` do not exist; the other nodes of the cube only forward).

use commbench_core::testkit::{run_suite, Harness};
use commbench_core::{Program, Result};

use crate::common;
use common::machine::Machine;

struct Sim {
    base: &'static str,
    recv_buffer_bytes: Option<u64>,
}

impl Harness for Sim {
    fn run<P: Program>(&self, n: u32, p: &P) -> Result<Vec<P::Output>> {
        let cfg = Machine::preset(self.base)
            .ranks(n)
            .stack_kib(256)
            .recv_buffer_bytes(self.recv_buffer_bytes)
            .config();
        commbench_sim::run(&cfg, p)
    }
}

#[test]
fn conformance_generic() {
    run_suite(
        &Sim {
            base: "generic",
            recv_buffer_bytes: None,
        },
        1 << 20,
    )
    .unwrap();
}

#[test]
fn conformance_ncube7_with_bounded_buffers() {
    // Bounded receive buffers force stalls but must not change what arrives.
    run_suite(
        &Sim {
            base: "ncube7",
            recv_buffer_bytes: Some(1 << 20),
        },
        1 << 20,
    )
    .unwrap();
}
