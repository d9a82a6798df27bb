//! # commbench-ofi: libfabric
//!
//! The libfabric backend of commbench (opt-in Cargo feature `ofi`): a tagged FI_EP_RDM
//! endpoint per rank, set up the way fi_pingpong and fabtests set one up, against the system's
//! libfabric (Debian's libfabric-dev 1.17; bindings generated at build time with bindgen, and
//! C shims for the calls the headers define as static inline).
//!
//! * **Endpoint.** `fi_getinfo` with `FI_EP_RDM`, `FI_TAGGED`, modes `FI_CONTEXT` and
//!   `FI_CONTEXT2` and `FI_MR_LOCAL` offered, for the provider named ([`OfiConfig::provider`])
//!   or libfabric's first choice; then fabric, domain, one completion queue
//!   (`FI_CQ_FORMAT_TAGGED`, polled), an address vector and the endpoint. A provider that is
//!   absent or lacks the capability is [`Error::Config`](commbench_core::Error::Config)
//!   listing the providers that have it ([`probe`]).
//! * **Addresses** (`fi_getname`) are exchanged over the control plane that started the ranks:
//!   the tcp rendezvous (local spawn or across hosts) or MPI under `mpirun`; each rank inserts
//!   all of them into its address vector. With IP addresses the endpoint binds to the
//!   interface the rank reached the rendezvous from.
//! * **Matching** is the provider's: the 64-bit tag carries the sender's rank (upper 32 bits)
//!   and commbench's tag (lower 32); a wildcard source or tag is an ignore mask, and control
//!   tags (from `TAG_UB` = 2^30 up) never match a wildcard.
//! * **Sends** below the provider's inject size go with `fi_tinject` (no completion, the
//!   buffer is free at once), as fi_pingpong does; larger ones with `fi_tsend`. Every post
//!   retries on `-FI_EAGAIN` while reading completions, bounded by the timeout. The result
//!   document records the inject size and which sizes were injected.
//! * **Contexts and buffers.** Each outstanding operation owns a boxed `fi_context2` and the
//!   buffer moved into the endpoint until its completion is read. Buffers are registered only
//!   when the provider asks (`FI_MR_LOCAL`), with a cache of registrations per buffer.
//! * **Errors** come from `fi_cq_readerr`, with `fi_strerror` and `fi_cq_strerror` text; a
//!   truncated receive is [`Error::Truncated`](commbench_core::Error::Truncated), a wait that
//!   sees nothing within the timeout is a timeout naming the awaited peer.

#![allow(unsafe_code)]

mod endpoint;
mod fabric;
mod info;
mod launch;
mod sys;

pub use endpoint::OfiEndpoint;
pub use fabric::{probe, probe_with_rx, providers, Attrs};
pub use launch::{run_rank_over, run_threads, OfiConfig};
pub use sys::{library_version, strerror};

use commbench_core::method::limits::Transport;

/// What the ofi backend carries, for the checks before a run: the provider's largest message
/// and the receives its queue holds (a few are kept for the control plane).
pub fn transport(attrs: Option<&Attrs>) -> Transport {
    Transport {
        max_message: attrs.map_or(u64::MAX, |a| a.max_msg_size),
        max_message_why: "the provider's max_msg_size",
        max_posted_receives: attrs.map_or(u64::MAX, |a| {
            (a.rx_size as u64).saturating_sub(CONTROL_RECEIVES)
        }),
        max_posted_why:
            "the provider's receive queue, rx_attr size, less a few for the control plane",
        ..Transport::unbounded("ofi")
    }
}

/// Receive-queue entries left for the control plane (a barrier's receives) when a benchmark
/// fills the queue.
pub const CONTROL_RECEIVES: u64 = 8;
