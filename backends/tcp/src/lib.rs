//! # commbench-tcp: raw TCP sockets
//!
//! The "Gigabit Ethernet" class of transport: TCP connections between the ranks of a run,
//! with MPI-like tag matching from [`commbench_core::transport::matching`].
//!
//! * **Bootstrap.** Ranks meet at rank 0's rendezvous ([`commbench_core::launch::rendezvous`]).
//!   Each rank listens on an ephemeral port on the interface it reached the rendezvous from (or
//!   [`TcpConfig::bind_host`]) and the addresses are exchanged by an allgather. When the
//!   descriptor limit allows a connection to every other rank, rank `i` connects to every rank
//!   below it and accepts every rank above it; otherwise connections are made when first
//!   needed and the least recently used closed beyond the limit (the `mesh` module). Every
//!   data connection presents the bootstrap hello (magic, version, token, rank, size);
//!   anything else is refused and logged, and the run goes on. `TCP_NODELAY` is set on every
//!   socket.
//! * **Framing.** A 16-byte header (payload length `u64`, tag `u32`, flags `u32`, little-endian)
//!   followed by the payload. The header is matched on arrival (seed 004's posted-receive and
//!   unexpected queues, as MPI does): a posted receive gets the payload read straight into its
//!   buffer (small messages through a 64 KiB staging buffer, so one `read(2)` brings header and
//!   payload; large ones directly), an unmatched message goes to a pooled unexpected buffer.
//!   Sends are eager: the header and payload leave in one system call when the socket has
//!   room (a frame of at most [`SMALL_FRAME`] bytes copied together and sent with `send(2)`,
//!   a larger one as a `sendmsg(2)` gather write), and what does not fit is queued and
//!   written as the socket drains, while incoming data keeps being read, so two ranks that
//!   send large messages to each other at the same time (COMMS2 exchange, seed 002) never
//!   deadlock.
//! * **Modes** ([`TcpConfig::poll`]). *Blocking*: waits sleep in the kernel, in `read(2)` on the
//!   only connection of a two-rank run with nothing to write, otherwise in `epoll_wait(2)`, each
//!   bounded by the timeout. *Poll*: non-blocking sockets and a spin on `recv(MSG_DONTWAIT)`
//!   that never sleeps. Both are recorded by [`Endpoint::info`](commbench_core::Endpoint::info).
//! * **Self-sends** (`dest == rank`) are supported: the message is matched or queued locally
//!   and the send completes at once.
//! * **Failures.** End-of-file or a reset on a connection whose peer did not say goodbye is
//!   [`Error::PeerLost`](commbench_core::Error::PeerLost) naming the peer; a wait that sees no completion within
//!   [`TcpConfig::timeout`] is [`Error::Timeout`](commbench_core::Error::Timeout) naming the awaited peer. A run ends with a
//!   goodbye exchange ([`TcpEndpoint::finish`]) so that no rank closes while messages to or from
//!   it are still in flight.
//!
//! The crate in five modules: `frame` (the wire format), `conn` (one connection: its socket,
//! queued sends, the receive state), `endpoint` ([`TcpEndpoint`] and its progress engine, the
//! waits, the goodbye), `mesh` (which connections are open: made on demand, closed to stay
//! within the limit) and `launch` ([`TcpConfig`] and the ways ranks start: [`run_threads`],
//! [`run_rank`], [`run_rank_with_listener`], [`run_rank_over`]).

mod conn;
mod endpoint;
mod frame;
mod launch;
mod mesh;

pub use conn::RX_BUFFER_BYTES;
pub use endpoint::TcpEndpoint;
pub use frame::{HEADER_BYTES, MAX_MESSAGE, SMALL_FRAME};
pub use launch::{run_rank, run_rank_over, run_rank_with_listener, run_threads, TcpConfig};

use commbench_core::method::limits::Transport;

/// What the tcp backend carries, for the checks before a run: messages up to
/// [`MAX_MESSAGE`], the most a peer may announce.
pub fn transport() -> Transport {
    Transport {
        max_message: MAX_MESSAGE,
        max_message_why: "the most a frame header may announce, so that a corrupted one cannot \
                          ask for more",
        ..Transport::unbounded("tcp")
    }
}
