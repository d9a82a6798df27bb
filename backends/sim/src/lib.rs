//! # commbench-sim
//!
//! A simulated NCUBE-style hypercube on a virtual clock (design §6), so that the very same
//! pattern code that runs on real transports runs on a machine whose timing is known exactly.
//!
//! * 2^d nodes, store-and-forward, e-cube routing (lowest differing dimension first), one FIFO
//!   channel per (node, dimension, direction); or the same nodes as hosts under a tree of
//!   switches (`[tree]`: leaf switches, the levels above, uplinks at a factor), routed up to
//!   the lowest switch above both ends and down, switches paying no R or S ([`SwitchTree`]).
//! * Per message the six times of Krumme & Greenfield (seed 001 §2): F and U (user copies in
//!   send and receive), A (accept), S and R (interrupt-level send and receive load, which
//!   preempt user work), E (elapsed time per hop), each a piecewise-linear function of the
//!   message size ([`Linear`]).
//! * A virtual clock per node with a configurable tick (the NCUBE's was 1024/7 µs, seed 001
//!   Appendix B) and read cost, so the timer method of seed 000 §3.1 runs unchanged and finds
//!   that resolution.
//! * An optional matching cost per queue entry inspected (`match_ns_per_entry`), charged to
//!   the receiving node's CPU when it walks its posted-receive queue (a message delivered) or
//!   its unexpected-message queue (a receive posted), as on a NIC that matches slowly
//!   (Underwood & Brightwell, *The impact of MPI queue usage on message latency*, §5).
//! * Optional injected faults (`[[faults]]`): a slow link, node or dimension (on a tree, a
//!   slow node, switch or uplink) whose E (or F, U, R and S) is scaled by a factor ([`Fault`]), throughout or within a window of virtual time
//!   (`from_us`, `until_us`: a machine that slows down, or warms up, at a known time), so a
//!   detector can be tested on known ground truth
//!   ([`SimConfig::pingpong_one_way_between_ns`], `..._at_ns`).
//! * Spans (`isend_span`, `irecv_span`): a message at an offset of its buffer, and one buffer
//!   posted `count` times, cost exactly what `count` separate posts cost; the simulator does
//!   not model memory, so a window on one buffer times as a window on many.
//! * Deterministic: integer nanoseconds, events ordered by (time, sequence number); each
//!   node's program is a stackful coroutine (`corosensei`) on one thread. A run in which every
//!   node is blocked ends with [`commbench_core::Error::Deadlock`] naming each node and what it
//!   waits for.
//!
//! The model, its parameters, closed forms and the TOML format are in docs/simulator.md.

mod budget;
mod config;
mod endpoint;
mod kernel;
mod net;
mod pages;

pub use budget::check_run;
pub use config::{
    distance, route, scaled_ns, Fault, Linear, Piece, Silent, SimConfig, Times,
    DEFAULT_SILENT_WAIT_US, FAULT_KINDS, MAX_COMPUTE_NS_PER_ITER, MAX_FAULT_FACTOR,
    MAX_FAULT_TIME_US, MAX_MATCH_NS_PER_ENTRY, NCUBE_TICK_NS,
};
pub use endpoint::SimEndpoint;
pub use kernel::{run, run_until, run_with_stats, SimStats};
pub use net::{SwitchTree, MAX_TREE_LEVELS};

/// Whether the simulated endpoints have caches a cold-cache run could empty: the virtual clock
/// models no memory, so a message takes the same time from any buffer (core's
/// `Endpoint::models_caches`).
pub const MODELS_CACHES: bool = false;

use commbench_core::method::limits::Transport;
use commbench_core::transport::error::{Error, Result};

/// Memory mappings each rank's coroutine stack takes: the stack and its guard page.
pub const MAPPINGS_PER_RANK: u64 = 2;

/// Mappings kept free for the rest of the process (its libraries, heap, threads, buffers).
const MAPPINGS_SPARE: u64 = 1024;

/// Whether this process may map a coroutine stack for every rank of `cfg`: Linux caps the
/// mappings of a process (`vm.max_map_count`, 65530 by default), and a machine of 2^15 ranks
/// needs 2^16 of them. A usage error naming the limit, instead of a failure at run time.
pub fn check_mappings(cfg: &SimConfig) -> Result<()> {
    let Some(limit) = std::fs::read_to_string("/proc/sys/vm/max_map_count")
        .ok()
        .and_then(|s| s.trim().parse::<u64>().ok())
    else {
        return Ok(());
    };
    let in_use = std::fs::read_to_string("/proc/self/maps").map_or(0, |s| s.lines().count() as u64);
    let need = u64::from(cfg.ranks()).saturating_mul(MAPPINGS_PER_RANK);
    if need.saturating_add(in_use).saturating_add(MAPPINGS_SPARE) <= limit {
        return Ok(());
    }
    Err(Error::Config(format!(
        "sim config `{}`: {} ranks need {need} memory mappings for their coroutine stacks, and \
         this host allows a process {limit} (vm.max_map_count, {in_use} in use): give fewer \
         dimensions or ranks, or raise the limit (sysctl -w vm.max_map_count={})",
        cfg.name,
        cfg.ranks(),
        (need + in_use + MAPPINGS_SPARE).next_power_of_two()
    )))
}

/// What a run on `cfg` holds, for the checks before it starts: every node runs in this
/// process (so it holds every rank's buffers and the copies of the messages in flight), on a
/// coroutine stack of its own.
pub fn transport(cfg: &SimConfig) -> Transport {
    let stacks = u64::from(cfg.ranks()).saturating_mul(cfg.stack_kib.saturating_mul(1024));
    Transport {
        one_process: true,
        process_bytes: stacks.saturating_add(16 << 20),
        payload_bytes: cfg.carry_bytes.unwrap_or(u64::MAX),
        ..Transport::unbounded("sim")
    }
}
