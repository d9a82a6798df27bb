//! The handshake with the run's token (protocol version 3, described in the parent module):
//! the joiner's [`Hello`], each side's proof (HMAC-SHA256 over both nonces, the hello and the
//! role), the acceptor's verdict and how it judges a joiner whose proof verified.

use super::{HELLO_LEN, MAGIC, NONCE_LEN, PROOF_LEN, PROTOCOL_VERSION};
use crate::transport::error::{Error, Result};
use crate::transport::Rank;
use hmac::{Hmac, Mac};
use sha2::Sha256;
use std::ops::Range;

/// What every proof begins with.
const LABEL: &[u8] = b"commbench rendezvous v3";

/// The joiner's hello, as encoded by [`encode_hello`] and decoded by [`decode_hello`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hello {
    /// The joiner's rank.
    pub rank: Rank,
    /// The size of the run as the joiner knows it.
    pub size: u32,
    /// The rank the joiner means to reach.
    pub peer: Rank,
    /// The joiner's nonce.
    pub nonce: [u8; NONCE_LEN],
}

/// Encode a hello (magic, version, ranks, size, nonce) into bytes ready to write.
pub fn encode_hello(h: &Hello) -> [u8; HELLO_LEN] {
    let mut b = [0u8; HELLO_LEN];
    b[..8].copy_from_slice(&MAGIC);
    b[8..12].copy_from_slice(&PROTOCOL_VERSION.to_le_bytes());
    b[12..16].copy_from_slice(&h.rank.to_le_bytes());
    b[16..20].copy_from_slice(&h.size.to_le_bytes());
    b[20..24].copy_from_slice(&h.peer.to_le_bytes());
    b[24..].copy_from_slice(&h.nonce);
    b
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// Check the magic and version at the start of `b` (at least 12 bytes).
pub(super) fn check_prefix(b: &[u8]) -> Result<()> {
    if b[..8] != MAGIC {
        return Err(Error::Protocol("wrong magic (not a commbench peer)".into()));
    }
    let version = u32_at(b, 8);
    if version != PROTOCOL_VERSION {
        return Err(Error::Protocol(format!(
            "protocol version {version}, this rank speaks {PROTOCOL_VERSION}"
        )));
    }
    Ok(())
}

/// Decode a hello, checking its length, magic and version. The ranks and size are the
/// caller's to judge.
pub fn decode_hello(b: &[u8]) -> Result<Hello> {
    if b.len() != HELLO_LEN {
        return Err(Error::Protocol(format!(
            "a hello of {} bytes, not {HELLO_LEN}",
            b.len()
        )));
    }
    check_prefix(b)?;
    let mut nonce = [0u8; NONCE_LEN];
    nonce.copy_from_slice(&b[24..]);
    Ok(Hello {
        rank: u32_at(b, 12),
        size: u32_at(b, 16),
        peer: u32_at(b, 20),
        nonce,
    })
}

/// Which side of a handshake a proof speaks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Role {
    Acceptor,
    Joiner,
}

/// The HMAC of one side's proof, fed with everything the proof binds.
fn keyed(
    token: &[u8],
    h: &Hello,
    acceptor_nonce: &[u8; NONCE_LEN],
    role: Role,
) -> Result<Hmac<Sha256>> {
    let mut m = <Hmac<Sha256> as Mac>::new_from_slice(token)
        .map_err(|_| Error::Invalid("a token HMAC-SHA256 cannot take as a key".into()))?;
    m.update(LABEL);
    m.update(&h.nonce);
    m.update(acceptor_nonce);
    m.update(&h.rank.to_le_bytes());
    m.update(&h.size.to_le_bytes());
    m.update(&h.peer.to_le_bytes());
    m.update(match role {
        Role::Acceptor => b"A",
        Role::Joiner => b"J",
    });
    Ok(m)
}

/// The proof of `role` for the handshake of hello `h` and the acceptor's nonce.
pub(super) fn prove(
    token: &[u8],
    h: &Hello,
    acceptor_nonce: &[u8; NONCE_LEN],
    role: Role,
) -> Result<[u8; PROOF_LEN]> {
    let tag = keyed(token, h, acceptor_nonce, role)?
        .finalize()
        .into_bytes();
    let mut out = [0u8; PROOF_LEN];
    out.copy_from_slice(&tag);
    Ok(out)
}

/// Whether `proof` is the proof of `role` (compared in constant time).
pub(super) fn verify(
    token: &[u8],
    h: &Hello,
    acceptor_nonce: &[u8; NONCE_LEN],
    role: Role,
    proof: &[u8],
) -> Result<bool> {
    Ok(keyed(token, h, acceptor_nonce, role)?
        .verify_slice(proof)
        .is_ok())
}

/// A fresh nonce from the operating system.
pub(super) fn nonce() -> Result<[u8; NONCE_LEN]> {
    let mut n = [0u8; NONCE_LEN];
    getrandom::getrandom(&mut n).map_err(|e| {
        Error::io(
            "drawing a handshake nonce from the OS",
            std::io::Error::other(e.to_string()),
        )
    })?;
    Ok(n)
}

/// The acceptor's answer to a joiner whose proof verified.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Verdict {
    Accepted,
    WrongSize,
    UnexpectedRank,
    Duplicate,
    WrongPeer,
}

impl Verdict {
    const ALL: [Verdict; 5] = [
        Verdict::Accepted,
        Verdict::WrongSize,
        Verdict::UnexpectedRank,
        Verdict::Duplicate,
        Verdict::WrongPeer,
    ];

    pub(super) fn code(self) -> u32 {
        match self {
            Verdict::Accepted => 0,
            Verdict::WrongSize => 1,
            Verdict::UnexpectedRank => 2,
            Verdict::Duplicate => 3,
            Verdict::WrongPeer => 4,
        }
    }

    pub(super) fn from_code(c: u32) -> Option<Verdict> {
        Verdict::ALL.into_iter().find(|v| v.code() == c)
    }

    /// The refusal as the acceptor logs it.
    pub(super) fn reason(self, h: &Hello, x: &Expect<'_>) -> String {
        match self {
            Verdict::Accepted => format!("rank {} accepted", h.rank),
            Verdict::WrongSize => format!(
                "rank {} believes the run has {} ranks, not {}",
                h.rank, h.size, x.size
            ),
            Verdict::UnexpectedRank => format!(
                "rank {} is not expected here (expected ranks {:?})",
                h.rank, x.ranks
            ),
            Verdict::Duplicate => format!("rank {} is already connected", h.rank),
            Verdict::WrongPeer => format!(
                "rank {} meant to reach rank {}, this is rank {}",
                h.rank, h.peer, x.me
            ),
        }
    }

    /// The refusal as the joiner reports it.
    pub(super) fn refusal(self, addr: &str, me: Rank, peer: Rank, size: u32) -> String {
        match self {
            Verdict::Accepted => format!("rank {peer} at {addr} accepted rank {me}"),
            Verdict::WrongSize => format!(
                "rank {peer} at {addr} refused rank {me}: its run does not have {size} ranks"
            ),
            Verdict::UnexpectedRank => {
                format!("rank {peer} at {addr} refused rank {me}: it does not expect that rank")
            }
            Verdict::Duplicate => {
                format!("rank {peer} at {addr} refused rank {me}: it already has that rank")
            }
            Verdict::WrongPeer => format!("{addr} is not rank {peer} of this run"),
        }
    }
}

/// What an acceptor takes: its rank, the size of the run, the ranks it accepts, the token.
#[derive(Debug)]
pub(super) struct Expect<'a> {
    pub(super) me: Rank,
    pub(super) size: u32,
    pub(super) ranks: Range<Rank>,
    pub(super) token: &'a [u8],
}

impl Expect<'_> {
    /// The verdict on a joiner whose proof verified; `taken` marks the ranks of `ranks`
    /// already connected or being answered.
    pub(super) fn judge(&self, h: &Hello, taken: &[bool]) -> Verdict {
        if h.peer != self.me {
            Verdict::WrongPeer
        } else if h.size != self.size {
            Verdict::WrongSize
        } else if !self.ranks.contains(&h.rank) {
            Verdict::UnexpectedRank
        } else if taken[(h.rank - self.ranks.start) as usize] {
            Verdict::Duplicate
        } else {
            Verdict::Accepted
        }
    }

    pub(super) fn slot(&self, r: Rank) -> usize {
        (r - self.ranks.start) as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::launch::rendezvous::tests::{OTHER, TOKEN};

    #[test]
    fn proofs_bind_token_nonces_ranks_and_role() {
        let h = Hello {
            rank: 1,
            size: 2,
            peer: 0,
            nonce: [7; NONCE_LEN],
        };
        let a = [9u8; NONCE_LEN];
        let p = prove(TOKEN.as_bytes(), &h, &a, Role::Joiner).unwrap();
        assert!(verify(TOKEN.as_bytes(), &h, &a, Role::Joiner, &p).unwrap());
        assert!(!verify(OTHER.as_bytes(), &h, &a, Role::Joiner, &p).unwrap());
        assert!(!verify(TOKEN.as_bytes(), &h, &a, Role::Acceptor, &p).unwrap());
        assert!(!verify(TOKEN.as_bytes(), &h, &[8; NONCE_LEN], Role::Joiner, &p).unwrap());
        for changed in [
            Hello {
                rank: 2,
                ..h.clone()
            },
            Hello {
                size: 3,
                ..h.clone()
            },
            Hello {
                peer: 1,
                ..h.clone()
            },
            Hello {
                nonce: [6; NONCE_LEN],
                ..h.clone()
            },
        ] {
            assert!(!verify(TOKEN.as_bytes(), &changed, &a, Role::Joiner, &p).unwrap());
        }
        assert!(!verify(TOKEN.as_bytes(), &h, &a, Role::Joiner, &p[..31]).unwrap());
        // The hello carries nothing of the token.
        assert_eq!(decode_hello(&encode_hello(&h)).unwrap(), h);
        assert_ne!(nonce().unwrap(), nonce().unwrap());
    }

    #[test]
    fn decode_hello_rejects_garbage() {
        assert!(decode_hello(&[0; HELLO_LEN]).is_err());
        assert!(decode_hello(&[0; HELLO_LEN - 1]).is_err());
        let mut h = encode_hello(&Hello {
            rank: 1,
            size: 2,
            peer: 0,
            nonce: [0; NONCE_LEN],
        });
        h[8] = 1;
        let e = decode_hello(&h).unwrap_err().to_string();
        assert!(e.contains("version 1"), "{e}");
    }
}
