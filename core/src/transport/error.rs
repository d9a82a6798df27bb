//! The one error type of the core and of every backend.

use super::ids::Rank;
use std::time::Duration;

/// Result with the commbench [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can end a run. Libraries return these; only the CLI decides exit codes.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A wait did not complete in time: the peer is slow, silent or gone.
    #[error("rank {rank}: timed out after {:.1} s waiting for {what}", timeout.as_secs_f64())]
    Timeout {
        /// The rank that was waiting.
        rank: Rank,
        /// What it waited for (names the peer where one is known).
        what: String,
        /// The limit that ran out.
        timeout: Duration,
    },
    /// A peer closed its connection, exited or was killed.
    #[error("rank {peer} is gone ({detail})")]
    PeerLost {
        /// The rank that disappeared.
        peer: Rank,
        /// How it was noticed.
        detail: String,
    },
    /// A message was longer than the receive buffer posted for it (MPI_ERR_TRUNCATE).
    #[error("message truncated: {} from rank {source_rank} (tag {tag}) for a {cap}-byte receive buffer", truncated_len(*len))]
    Truncated {
        /// Bytes sent; 0 when the transport does not report the length (no message of 0
        /// bytes is ever truncated).
        len: usize,
        /// Bytes the receive could hold.
        cap: usize,
        /// Sender.
        source_rank: Rank,
        /// Tag of the message.
        tag: u32,
    },
    /// An argument that a caller could have checked: bad rank, bad tag, unknown request.
    #[error("invalid argument: {0}")]
    Invalid(String),
    /// A configuration that cannot work (bad sim file, impossible sizes for this backend, ...).
    #[error("bad configuration: {0}")]
    Config(String),
    /// An operating-system call failed.
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The protocol was violated by the other side (bad magic, version, token, frame).
    #[error("protocol error: {0}")]
    Protocol(String),
    /// Every simulated node is blocked (simulator only).
    #[error("deadlock: {0}")]
    Deadlock(String),
    /// A message arrived with bytes other than those sent (a validated run).
    #[error("rank {rank}: {which} from rank {from} differs from what was sent at byte {offset} (expected {expected:#04x}, got {got:#04x})")]
    Corrupt {
        /// The rank that found it.
        rank: Rank,
        /// The rank whose bytes they should have been.
        from: Rank,
        /// Which message (`message 3 of trial 17`).
        which: String,
        /// Offset of the first byte that differs, from the message's first byte.
        offset: u64,
        /// What the byte should have been.
        expected: u8,
        /// What it was.
        got: u8,
    },
    /// A backend-specific failure that fits nowhere else.
    #[error("{backend}: {message}")]
    Backend {
        /// Backend name.
        backend: &'static str,
        /// What went wrong.
        message: String,
    },
    /// The run was asked to stop (SIGINT, SIGTERM) and stopped at a safe point between
    /// sizes, after `done` of its `sizes` sizes.
    #[error("interrupted by {} after {done} of {sizes} sizes", signal_name(*signal))]
    Interrupted {
        /// The signal that asked for the stop.
        signal: i32,
        /// Sizes measured completely before the stop.
        done: usize,
        /// Sizes the run had to measure.
        sizes: usize,
    },
    /// Another error, with the phase of the run in which it happened.
    #[error("{phase}: {source}")]
    InPhase {
        /// Phase of the run ("pingpong 8 B, trial 12", "barrier", "connect", ...).
        phase: String,
        /// The underlying error.
        #[source]
        source: Box<Error>,
    },
}

impl Error {
    /// Build an [`Error::Io`] from an OS error and a description of the action.
    pub fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        Error::Io {
            context: context.into(),
            source,
        }
    }

    /// Wrap this error with the phase in which it happened.
    #[cold]
    pub fn in_phase(self, phase: impl Into<String>) -> Self {
        Error::InPhase {
            phase: phase.into(),
            source: Box::new(self),
        }
    }

    /// The error in words without its category prefix, for a one-line message whose context
    /// already says what kind of problem it is (`rank 5 is out of range ...` rather than
    /// `bad configuration: rank 5 is out of range ...`).
    pub fn reason(&self) -> String {
        match self {
            Error::Config(m) | Error::Invalid(m) => m.clone(),
            e => e.to_string(),
        }
    }

    /// The signal, when this error is a stop asked for by one ([`Error::Interrupted`]).
    pub fn interrupted(&self) -> Option<i32> {
        match self.root() {
            Error::Interrupted { signal, .. } => Some(*signal),
            _ => None,
        }
    }

    /// Whether the error is a configuration the run cannot work with, as opposed to a
    /// failure while running: the command line should be changed, not the run repeated.
    pub fn is_configuration(&self) -> bool {
        matches!(self.root(), Error::Config(_) | Error::Invalid(_))
    }

    /// The innermost error, below every [`Error::InPhase`] wrapper.
    pub fn root(&self) -> &Error {
        match self {
            Error::InPhase { source, .. } => source.root(),
            e => e,
        }
    }
}

/// `s` with its control characters escaped (a line break as `\n`), so that a message quoting
/// text from a user or a file stays on one line.
pub fn escape_controls(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_control() {
                c.escape_default().to_string()
            } else {
                c.to_string()
            }
        })
        .collect()
}

/// The usual name of a signal that stops runs ("SIGINT", "SIGTERM"), else "signal N".
pub fn signal_name(signal: i32) -> String {
    // Linux's numbers (signal(7), x86 and ARM).
    match signal {
        1 => "SIGHUP".into(),
        2 => "SIGINT".into(),
        3 => "SIGQUIT".into(),
        6 => "SIGABRT".into(),
        9 => "SIGKILL".into(),
        10 => "SIGUSR1".into(),
        12 => "SIGUSR2".into(),
        13 => "SIGPIPE".into(),
        14 => "SIGALRM".into(),
        15 => "SIGTERM".into(),
        24 => "SIGXCPU".into(),
        30 => "SIGPWR".into(),
        n => format!("signal {n}"),
    }
}

/// Why a peer the program gave up on ([`crate::transport::Endpoint::forget`]) is gone: the
/// detail of the [`Error::PeerLost`] of whatever involves it afterwards.
pub const FORGOTTEN: &str = "it fell silent and the run went on without it";

/// The ranks a program gave up on ([`crate::transport::Endpoint::forget`]), as a backend
/// without a peer liveness of its own keeps them: nothing more goes to them or is awaited
/// from them by name.
#[derive(Debug, Clone, Default)]
pub struct Forgotten(Vec<Rank>);

impl Forgotten {
    /// Rank `me` of `size` gives up on `peer` (itself and a rank out of range are ignored).
    pub fn forget(&mut self, peer: Rank, me: Rank, size: u32) {
        if peer < size && peer != me && !self.0.contains(&peer) {
            self.0.push(peer);
        }
    }

    /// The ranks given up on, in the order they were.
    pub fn ranks(&self) -> &[Rank] {
        &self.0
    }

    /// [`check_rank`], and [`Error::PeerLost`] when `rank` was given up on.
    #[inline]
    pub fn check(&self, what: &str, rank: Rank, size: u32) -> Result<()> {
        check_rank(what, rank, size)?;
        if self.0.contains(&rank) {
            return Err(Error::PeerLost {
                peer: rank,
                detail: FORGOTTEN.into(),
            });
        }
        Ok(())
    }
}

/// `Ok` when `rank` is one of the `size` ranks of a run, else [`Error::Invalid`] naming it as
/// `what` ("destination", "source", "root", ...).
#[inline]
pub fn check_rank(what: &str, rank: Rank, size: u32) -> Result<()> {
    if rank >= size {
        return Err(rank_out_of_range(what, rank, size));
    }
    Ok(())
}

/// The error of [`check_rank`], kept out of line so the check itself stays small.
#[cold]
#[inline(never)]
fn rank_out_of_range(what: &str, rank: Rank, size: u32) -> Error {
    Error::Invalid(format!("{what} rank {rank} out of range for {size} ranks"))
}

/// Attach a phase to the error of a result (`ep.wait(r).phase("handshake")?`).
pub trait ResultExt<T> {
    /// Wrap an error with the phase of the run it happened in.
    fn phase(self, phase: &str) -> Result<T>;
    /// Like [`ResultExt::phase`] with a phase built only on error.
    fn phase_with(self, f: impl FnOnce() -> String) -> Result<T>;
}

impl<T> ResultExt<T> for Result<T> {
    #[inline]
    fn phase(self, phase: &str) -> Result<T> {
        match self {
            Ok(v) => Ok(v),
            Err(e) => Err(e.in_phase(phase)),
        }
    }
    #[inline]
    fn phase_with(self, f: impl FnOnce() -> String) -> Result<T> {
        match self {
            Ok(v) => Ok(v),
            Err(e) => Err(e.in_phase(f())),
        }
    }
}

/// How [`Error::Truncated`] words the length of the message.
fn truncated_len(len: usize) -> String {
    match len {
        0 => "a longer message (the transport does not say how long)".into(),
        n => format!("{n} bytes"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A rank given up on is refused by name, in any order and however often it is given up
    /// on; this rank and ranks out of range are never recorded; the others stay usable.
    #[test]
    fn forgotten_ranks_are_refused_and_only_they() {
        let mut rng = crate::stats::Xoshiro256::new(0xf0_9e7);
        for _ in 0..200 {
            let size = 2 + rng.below(30) as u32;
            let me = rng.below(size as usize) as u32;
            let mut gone = Forgotten::default();
            let mut want = Vec::new();
            for _ in 0..rng.below(40) {
                let peer = rng.below(size as usize + 3) as u32;
                gone.forget(peer, me, size);
                if peer < size && peer != me && !want.contains(&peer) {
                    want.push(peer);
                }
            }
            assert_eq!(gone.ranks(), &want[..]);
            for r in 0..size + 2 {
                match (gone.check("send to", r, size), r < size, want.contains(&r)) {
                    (Err(Error::Invalid(_)), false, _) => {}
                    (Err(Error::PeerLost { peer, .. }), true, true) => assert_eq!(peer, r),
                    (Ok(()), true, false) => {}
                    (got, _, _) => panic!("rank {r} of {size}, gone {want:?}: {got:?}"),
                }
            }
        }
    }
}
