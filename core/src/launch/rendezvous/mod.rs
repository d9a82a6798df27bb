//! Rendezvous and bootstrap over TCP.
//!
//! Rank 0 holds a rendezvous at `HOST:PORT`; every other rank of a multi-process run connects
//! to it once (retrying until a deadline, since ranks start in any order) to say where it
//! listens, and rank 0 sends the list of those addresses down a binomial tree. The tree's
//! streams carry a small control plane that backends use before their own data plane exists:
//! [`Bootstrap::allgather`] (to exchange addresses, segment names, ...) and
//! [`Bootstrap::barrier`]. No rank holds more than `1 + log2(n)` of them.
//!
//! # Handshake (protocol version 3)
//!
//! Every connection, rendezvous and data alike, opens with a mutual challenge-response: each
//! side proves that it knows the run's token (at least [`MIN_TOKEN_LEN`] bytes) and the token
//! never crosses the wire. The *joiner* connects, the *acceptor* listens; each draws a fresh
//! nonce of [`NONCE_LEN`] bytes from the operating system. Integers are little-endian.
//!
//! 1. Joiner to acceptor, the hello ([`HELLO_LEN`] bytes): [`MAGIC`] (8), [`PROTOCOL_VERSION`]
//!    (4), the joiner's rank (4), the size of the run (4), the rank it means to reach (4), the
//!    joiner's nonce (32). Nothing in it depends on the token.
//! 2. Acceptor to joiner, the challenge ([`CHALLENGE_LEN`] bytes): [`MAGIC`], the version, the
//!    acceptor's nonce (32) and the acceptor's proof (32).
//! 3. The joiner checks the acceptor's proof. If it does not verify, the joiner closes the
//!    connection having sent nothing that depends on the token: whoever took the port first
//!    learns nothing of use. Otherwise it sends its own proof (32).
//! 4. The acceptor checks the joiner's proof. A wrong one is closed without an answer. A right
//!    one gets a verdict ([`VERDICT_LEN`] bytes): 0 accepted, 1 another size of run, 2 a rank
//!    not expected here, 3 a rank already connected, 4 the joiner meant to reach another rank.
//!
//! A proof is HMAC-SHA256 keyed with the token over `"commbench rendezvous v3"`, the joiner's
//! nonce, the acceptor's nonce, the three numbers of the hello and the role (`A` for the
//! acceptor, `J` for the joiner), checked in constant time. Both nonces make every proof good
//! for one connection only (a recorded proof replayed on another is refused), and the role
//! keeps one side's proof from serving as the other's. The handshake authenticates; it does
//! not encrypt, and it cannot stop someone who sits on the path from relaying or tampering
//! with the bytes that follow it.
//!
//! # Accepting
//!
//! The acceptor runs one poll loop on its own thread, with no thread per connection. A
//! connection must complete its handshake within [`HANDSHAKE_LIMIT`] (or the bootstrap timeout
//! when shorter, or [`Listener::with_handshake_limit`]); a silent or slow one is dropped. At
//! most [`MIN_PENDING`] handshakes (one per expected rank plus 16 when more, up to
//! [`MAX_PENDING`]) are pending at once: a new connection beyond that drops the oldest one
//! that has not even sent its hello (else the oldest). On a rank 0 with fewer spare
//! descriptors, half of them bound the handshakes instead, and a new connection waits in the
//! kernel's queue while every pending one is younger than a second. Every refusal and drop is a line on
//! standard error naming the address (the first 20; then a count), and the run goes on.
//!
//! After the handshake, frames are a length (`u32`, at most [`MAX_FRAME`]) and that many bytes.
//! Every blocking read and write is bounded by the bootstrap's timeout: a peer that closes is
//! [`Error::PeerLost`], one that stays silent is [`Error::Timeout`], both naming the rank.

// The code by role: the handshake with the run's token (handshake), rank 0's listener and the
// state machine of each connection it accepts (listener), joining as a rank other than 0 (join),
// the bootstrap tree and its allgather (bootstrap), and reads and writes bounded by a deadline
// (stream).
mod bootstrap;
mod handshake;
mod join;
mod listener;
mod stream;

pub use bootstrap::Bootstrap;
pub use handshake::{decode_hello, encode_hello, Hello};
pub use join::connect_stream;
pub use listener::{Acceptor, Listener};

use crate::transport::error::{Error, Result};
use crate::transport::Rank;
use std::net::{IpAddr, Ipv6Addr};
use std::time::Duration;

/// First bytes of every commbench connection.
pub const MAGIC: [u8; 8] = *b"CMBNCH\0\x01";
/// Version of the bootstrap protocol; a peer with another version is refused. Version 3: the
/// bootstrap tree (a rank says where it listens and leaves), and what a tcp data connection
/// says after the handshake; a version 2 peer would wait on a star that no longer exists.
pub const PROTOCOL_VERSION: u32 = 3;
/// Shortest token accepted: shorter ones could be guessed from a recorded proof.
pub const MIN_TOKEN_LEN: usize = 16;
/// Longest token accepted.
pub const MAX_TOKEN_LEN: usize = 1024;
/// How to make a good token, for messages that refuse one.
pub const TOKEN_HINT: &str =
    "make one with `head -c 24 /dev/urandom | base64` and give every rank the same";
/// Bytes of each side's nonce.
pub const NONCE_LEN: usize = 32;
/// Bytes of a proof (HMAC-SHA256).
pub const PROOF_LEN: usize = 32;
/// Bytes of the joiner's hello.
pub const HELLO_LEN: usize = 8 + 4 + 4 + 4 + 4 + NONCE_LEN;
/// Bytes of the acceptor's challenge.
pub const CHALLENGE_LEN: usize = 8 + 4 + NONCE_LEN + PROOF_LEN;
/// Bytes of the acceptor's verdict.
pub const VERDICT_LEN: usize = 4;
/// Longest frame accepted on a bootstrap stream (16 MiB), so garbage cannot make a rank
/// allocate without bound.
pub const MAX_FRAME: usize = 16 << 20;
/// Largest run the protocol accepts.
pub const MAX_SIZE: u32 = 1 << 20;
/// Handshakes an acceptor keeps pending at once, at least.
pub const MIN_PENDING: usize = 64;
/// Handshakes an acceptor keeps pending at once, at most.
pub const MAX_PENDING: usize = 1024;
/// Longest a connection may take over its handshake by default.
pub const HANDSHAKE_LIMIT: Duration = Duration::from_secs(10);

/// Check that a token can be used: at least [`MIN_TOKEN_LEN`] and at most [`MAX_TOKEN_LEN`]
/// bytes. The token itself is never part of the message.
pub fn check_token(token: &str) -> Result<()> {
    let n = token.len();
    if n < MIN_TOKEN_LEN {
        return Err(Error::Config(format!(
            "the run token has {n} bytes, fewer than the {MIN_TOKEN_LEN} that keep it from being \
             guessed ({TOKEN_HINT})"
        )));
    }
    if n > MAX_TOKEN_LEN {
        return Err(Error::Config(format!(
            "the run token has {n} bytes, more than {MAX_TOKEN_LEN}"
        )));
    }
    Ok(())
}

/// Check the syntax of a rendezvous address, `HOST:PORT` (an IPv6 address in brackets) with
/// a port from 1 to 65535, without resolving it.
pub fn check_address(addr: &str) -> Result<()> {
    let bad = |why: String| {
        Err(Error::Config(format!(
            "rendezvous address {addr:?}: {why} (write HOST:PORT, e.g. node1:7000 or [fe80::1]:7000)"
        )))
    };
    let (host, port) = if let Some(rest) = addr.strip_prefix('[') {
        let Some((h, p)) = rest.split_once("]:") else {
            return bad("an IPv6 address in brackets needs `]:PORT` after it".into());
        };
        if h.parse::<Ipv6Addr>().is_err() {
            return bad(format!("{h:?} is not an IPv6 address"));
        }
        (h, p)
    } else {
        if addr.parse::<Ipv6Addr>().is_ok() {
            return bad("an IPv6 address goes in brackets, followed by the port".into());
        }
        let Some((h, p)) = addr.rsplit_once(':') else {
            return bad("no port".into());
        };
        if h.parse::<Ipv6Addr>().is_ok() {
            return bad("an IPv6 address goes in brackets".into());
        }
        let name_like = h
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'));
        if !name_like {
            return bad(format!("{h:?} is not a host name or address"));
        }
        (h, p)
    };
    if host.is_empty() {
        return bad("no host".into());
    }
    match port.parse::<u16>() {
        Ok(0) => bad("port 0 (give the port rank 0 listens on)".into()),
        Ok(_) => Ok(()),
        Err(_) => bad(format!("port {port:?} is not a number from 1 to 65535")),
    }
}

/// What a raw backend needs from whatever started its ranks: identity, an allgather and a
/// barrier. [`Bootstrap`] (the TCP rendezvous) provides it, and so does MPI when raw backends
/// run under `mpirun` beside the MPI backend, so that both measure the same two processes.
pub trait Rendezvous {
    /// This rank.
    fn rank(&self) -> Rank;
    /// Number of ranks.
    fn size(&self) -> u32;
    /// The local address peers can reach this rank on, when the rendezvous knows one.
    fn local_ip(&self) -> Option<IpAddr>;
    /// Every rank's `blob`, in rank order, on every rank.
    fn allgather(&mut self, blob: &[u8]) -> Result<Vec<Vec<u8>>>;
    /// Wait for every rank.
    fn barrier(&mut self) -> Result<()>;
}

/// A non-loopback address of this host (from its name), or loopback when it has none: where
/// data connections are advertised when the rendezvous does not know the interface.
pub fn host_ip() -> IpAddr {
    use std::net::ToSocketAddrs;
    let name = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .unwrap_or_default();
    if !name.is_empty() {
        if let Ok(addrs) = (name.as_str(), 0).to_socket_addrs() {
            let mut v: Vec<IpAddr> = addrs
                .map(|a| a.ip())
                .filter(|ip| !ip.is_loopback())
                .collect();
            v.sort_by_key(|ip| ip.is_ipv6());
            if let Some(ip) = v.first() {
                return *ip;
            }
        }
    }
    IpAddr::from([127, 0, 0, 1])
}

#[cfg(test)]
mod tests {
    use super::handshake::{check_prefix, encode_hello, Hello};
    use super::*;
    use crate::launch::RankEnv;
    use std::io::{ErrorKind, Read, Write};
    use std::net::TcpStream;

    pub(super) const T: Duration = Duration::from_secs(10);
    pub(super) const TOKEN: &str = "the-run-token-of-these-tests-0123";
    pub(super) const OTHER: &str = "another-token-of-the-same-length";

    /// Whether the other end closed `s` (end of file or a reset) rather than answering or
    /// staying silent for `T`.
    pub(super) fn closed_by_peer(s: &mut TcpStream) -> bool {
        s.set_read_timeout(Some(T)).unwrap();
        let mut rest = Vec::new();
        match s.read_to_end(&mut rest) {
            Ok(_) => rest.is_empty(),
            Err(e) => e.kind() == ErrorKind::ConnectionReset,
        }
    }

    /// A joiner driven by hand: sends `hello`, returns the acceptor's nonce and proof.
    pub(super) fn hand_hello(s: &mut TcpStream, hello: &Hello) -> ([u8; NONCE_LEN], Vec<u8>) {
        s.write_all(&encode_hello(hello)).unwrap();
        let mut ch = [0u8; CHALLENGE_LEN];
        s.read_exact(&mut ch).unwrap();
        check_prefix(&ch).unwrap();
        let mut n = [0u8; NONCE_LEN];
        n.copy_from_slice(&ch[12..44]);
        (n, ch[44..].to_vec())
    }

    #[test]
    fn short_tokens_and_bad_addresses_are_refused_before_any_connection() {
        let e = check_token("fifteen-bytes!!").unwrap_err().to_string();
        assert!(
            e.contains("15 bytes") && e.contains("head -c 24 /dev/urandom"),
            "{e}"
        );
        assert!(!e.contains("fifteen"), "the token is not repeated: {e}");
        check_token("sixteen-bytes!!!").unwrap();
        assert!(check_token(&"x".repeat(MAX_TOKEN_LEN + 1)).is_err());
        let l = Bootstrap::listen("127.0.0.1:0").unwrap();
        let addr = l.local_addr().to_string();
        let e = l.accept_all(2, "short", T).unwrap_err();
        assert!(matches!(e, Error::Config(_)), "{e}");
        // Refused at once, not after the timeout: nobody listens there any more.
        let e = Bootstrap::connect(&addr, 1, 2, "short", T).unwrap_err();
        assert!(matches!(e, Error::Config(_)), "{e}");
        for good in ["node1:7000", "127.0.0.1:1", "[::1]:65535", "a-b_c.d:80"] {
            check_address(good).unwrap();
        }
        for (bad, why) in [
            ("node1", "no port"),
            ("node1:", "not a number"),
            (":7000", "no host"),
            ("node1:0", "port 0"),
            ("node1:70000", "not a number"),
            ("::1:7000", "brackets"),
            ("fe80::1", "brackets"),
            ("[::1]7000", "]:PORT"),
            ("[node1]:7000", "not an IPv6"),
            ("no de:7000", "not a host"),
            ("http://node1:7000", "not a host"),
        ] {
            let e = check_address(bad).unwrap_err().to_string();
            assert!(e.contains(why) && e.contains("HOST:PORT"), "{bad}: {e}");
        }
        let env = RankEnv {
            rank: 1,
            size: 2,
            rendezvous: Some("node1".into()),
            token: Some(TOKEN.into()),
            job: None,
            launcher: crate::launch::Launcher::Manual,
        };
        let e = Bootstrap::from_env(&env, T).unwrap_err().to_string();
        assert!(e.contains("no port"), "{e}");
        let env = RankEnv {
            rendezvous: Some("127.0.0.1:1".into()),
            token: Some("short".into()),
            ..env
        };
        let e = Bootstrap::from_env(&env, T).unwrap_err().to_string();
        assert!(e.contains("head -c 24"), "{e}");
    }
}
