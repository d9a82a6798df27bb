//! Validation against ground truth on the default backends, with more cases than the
//! conformance check runs: one byte changed at random in one received message (a random
//! pattern, size, placement, buffer reuse, rank, message, byte and bit) must end the run with
//! an error naming the trial, the message and the byte; the same run without the change
//! passes and records every trial as checked ([`commbench::core::testkit::validation`]).

#![cfg(all(feature = "shm", feature = "tcp", feature = "sim"))]

use crate::common;

use commbench::core::testkit::{validation, Harness};
use commbench::core::{Program, Result};
use common::machine::Machine;
use std::time::Duration;

struct Shm;
struct Tcp;
struct Sim;

impl Harness for Shm {
    fn run<P: Program>(&self, n: u32, p: &P) -> Result<Vec<P::Output>> {
        let cfg = commbench_shm::ShmConfig {
            timeout: Duration::from_secs(20),
            ..Default::default()
        };
        commbench_shm::run_threads(n, &cfg, p)
    }
}

impl Harness for Tcp {
    fn run<P: Program>(&self, n: u32, p: &P) -> Result<Vec<P::Output>> {
        let cfg = commbench_tcp::TcpConfig {
            timeout: Duration::from_secs(20),
            ..Default::default()
        };
        commbench_tcp::run_threads(n, &cfg, p)
    }
}

impl Harness for Sim {
    fn run<P: Program>(&self, n: u32, p: &P) -> Result<Vec<P::Output>> {
        let cfg = Machine::preset("generic").ranks(n).config();
        commbench_sim::run(&cfg, p)
    }
}

#[test]
fn a_byte_changed_in_any_message_is_found_and_named() {
    validation(&Shm, 2, 12, 1).unwrap();
    validation(&Tcp, 2, 12, 2).unwrap();
    validation(&Sim, 2, 12, 3).unwrap();
    validation(&Sim, 4, 6, 4).unwrap();
}
