//! # commbench-ucx: UCX
//!
//! The UCX backend of commbench (opt-in Cargo feature `ucx`): a UCP worker per rank on the
//! tag API, set up the way ucx_perftest sets one up (`src/tools/perf/lib/libperf.c`), against
//! the system's UCX (Debian's libucx-dev 1.13; bindings generated at build time with bindgen,
//! the headers' macros and static-inline `ucp_init` written again in Rust).
//!
//! * **Worker.** A context with `UCP_FEATURE_TAG` over the transports named
//!   ([`UcxConfig::tls`], passed as `UCX_TLS`) or UCX's choice, and one worker in
//!   single-thread mode. Its address is exchanged over the control plane that started the
//!   ranks (the tcp rendezvous, local or across hosts, or MPI under `mpirun`); each rank makes
//!   an endpoint to every address, **flushes the worker** and exchanges an empty and a
//!   rendezvous-size message with every other rank (progressing, so that each side accepts
//!   the other's connection) before anything is timed, so that no trial pays for wire-up.
//! * **Matching** is UCX's: the 64-bit tag carries the sender's rank (upper 32 bits) and
//!   commbench's tag (lower 32); a wildcard source or tag is a mask, and control tags (from
//!   `TAG_UB` = 2^30 up) never match a wildcard.
//! * **Operations** are `ucp_tag_send_nbx` and `ucp_tag_recv_nbx` without callbacks: one
//!   that finishes in the call is done at once; otherwise its request is polled with
//!   `ucp_worker_progress`, bounded by the timeout, and freed. The ping-pong runs straight
//!   from the caller's buffer, as ucx_perftest's tag_lat does.
//! * **What UCX chose** is in the result document: the library version, the transports, each
//!   endpoint's lanes and tag protocol thresholds (`ucp_ep_print_info`), and the protocol of
//!   every message size sent (eager short, eager bcopy, rendezvous, ...).
//! * **Errors** carry UCX's text (`ucs_status_string`); a truncated receive is
//!   [`Error::Truncated`](commbench_core::Error::Truncated), a wait that sees nothing within
//!   the timeout is a timeout naming the awaited peer.

#![allow(unsafe_code)]

mod endpoint;
mod info;
mod launch;
mod proto;
mod sys;
mod worker;

pub use endpoint::UcxEndpoint;
pub use launch::{run_rank_over, run_threads, UcxConfig};
pub use proto::Peer;
pub use sys::{api_version, library_version, status_text};
pub use worker::{resources, TLS_ALIASES};

use commbench_core::method::limits::Transport;

/// What the ucx backend carries, for the checks before a run: UCX fragments and queues
/// without a limit of its own.
pub fn transport() -> Transport {
    Transport::unbounded("ucx")
}
