//! The simulated machines the tests build, in one place: a builder that starts from a preset
//! and sets what a test's machine needs. Tests that run the simulator in-process take its
//! [`SimConfig`]; tests that run `commbench --sim-config FILE` write the same machine as TOML.
//! The simulator's own tests and the command-line tests (`tests/common` at the root) share
//! this file.
#![allow(dead_code)]

use commbench_sim::{Fault, Linear, Piece, SimConfig, Times};
use std::path::{Path, PathBuf};

/// One line: `base_us + per_byte_us * n` µs at every size `n`.
pub fn line(base_us: f64, per_byte_us: f64) -> Linear {
    Linear::line(base_us, per_byte_us).expect("a valid line")
}

/// A piecewise-linear time from its sections `(from, base_us, per_byte_us)`.
pub fn pieces(sections: &[(u64, f64, f64)]) -> Linear {
    let pieces = sections
        .iter()
        .map(|&(from, base_us, per_byte_us)| Piece {
            from,
            base_us,
            per_byte_us,
        })
        .collect();
    Linear::new(pieces).expect("valid sections")
}

/// The six times, each a line `(base_us, per_byte_us)`, in the order F, S, R, A, U, E.
pub fn six(t: [(f64, f64); 6]) -> Times {
    let [f, s, r, a, u, e] = t.map(|(base_us, per_byte_us)| line(base_us, per_byte_us));
    Times { f, s, r, a, u, e }
}

/// A simulated machine being described; [`Machine::config`] checks and returns it.
#[derive(Debug, Clone)]
pub struct Machine(SimConfig);

impl Machine {
    /// The built-in preset `name` (`generic` or `ncube7`).
    pub fn preset(name: &str) -> Self {
        Machine(SimConfig::preset(name).expect("a built-in preset"))
    }

    /// A machine called `name` of `dimensions` (2^dimensions nodes), everything else as the
    /// `generic` preset has it: a 1 ns clock tick, 20 ns clock reads, 50 ns polls, 1 ns per
    /// iteration of Q, 1 MiB coroutine stacks, free matching and the preset's six times.
    pub fn new(name: &str, dimensions: u32) -> Self {
        Self::preset("generic").name(name).dimensions(dimensions)
    }

    pub fn name(mut self, name: &str) -> Self {
        self.0.name = name.into();
        self
    }

    pub fn dimensions(mut self, dimensions: u32) -> Self {
        self.0.dimensions = dimensions;
        self
    }

    /// Ranks `0..n` run the program on the smallest cube holding them; the cube's other nodes
    /// only forward.
    pub fn ranks(mut self, n: u32) -> Self {
        self.0.dimensions = n.next_power_of_two().trailing_zeros();
        self.0.ranks = Some(n);
        self
    }

    pub fn tick_ns(mut self, ns: u64) -> Self {
        self.0.tick_ns = ns;
        self
    }

    pub fn clock_read_ns(mut self, ns: u64) -> Self {
        self.0.clock_read_ns = ns;
        self
    }

    pub fn poll_ns(mut self, ns: u64) -> Self {
        self.0.poll_ns = ns;
        self
    }

    /// Virtual time of one iteration of the integer Q.
    pub fn compute_ns_per_iter(mut self, ns: f64) -> Self {
        self.0.compute_ns_per_iter = ns;
        self
    }

    pub fn stack_kib(mut self, kib: u64) -> Self {
        self.0.stack_kib = kib;
        self
    }

    pub fn match_ns_per_entry(mut self, ns: f64) -> Self {
        self.0.match_ns_per_entry = ns;
        self
    }

    pub fn recv_buffer_bytes(mut self, bytes: Option<u64>) -> Self {
        self.0.recv_buffer_bytes = bytes;
        self
    }

    /// Most bytes of a message carried (the rest is timed, not copied).
    pub fn carry_bytes(mut self, bytes: Option<u64>) -> Self {
        self.0.carry_bytes = bytes;
        self
    }

    /// Each hop takes up to `ns` more, drawn from a generator seeded with `seed`.
    pub fn jitter(mut self, ns: u64, seed: u64) -> Self {
        self.0.jitter_ns = ns;
        self.0.seed = seed;
        self
    }

    pub fn times(mut self, times: Times) -> Self {
        self.0.times = times;
        self
    }

    /// Some of the six times changed by `set`, the others kept.
    pub fn set_times(mut self, set: impl FnOnce(&mut Times)) -> Self {
        set(&mut self.0.times);
        self
    }

    /// One more injected fault.
    pub fn fault(mut self, fault: Fault) -> Self {
        self.0.faults.push(fault);
        self
    }

    /// More injected faults, in order.
    pub fn faults(mut self, faults: impl IntoIterator<Item = Fault>) -> Self {
        self.0.faults.extend(faults);
        self
    }

    /// Node `node`'s program falls silent at virtual time `from_us` (a hung process).
    pub fn silent(mut self, node: u32, from_us: f64) -> Self {
        self.0.silent.push(commbench_sim::Silent { node, from_us });
        self
    }

    /// A wait fails after `us` virtual microseconds.
    pub fn wait_timeout_us(mut self, us: f64) -> Self {
        self.0.wait_timeout_us = Some(us);
        self
    }

    /// Its nodes as hosts under a tree of switches: `fanout` children a switch from the
    /// leaves up, uplinks `uplink_factor` times a host hop (docs/simulator.md §6c).
    pub fn tree(mut self, fanout: &[u32], uplink_factor: f64) -> Self {
        self.0.tree = Some(commbench_sim::SwitchTree {
            fanout: fanout.to_vec(),
            uplink_factor,
        });
        self
    }

    /// The machine, checked as a machine file is.
    pub fn config(&self) -> SimConfig {
        if let Err(e) = self.0.validate() {
            panic!("{e}: {:?}", self.0);
        }
        self.0.clone()
    }

    /// The machine written as a TOML machine file at `path`, every key given: that path.
    pub fn write(&self, path: &Path) -> PathBuf {
        let text = toml::to_string(&self.config()).expect("the machine as TOML");
        std::fs::write(path, text).expect("machine file");
        path.to_path_buf()
    }
}
