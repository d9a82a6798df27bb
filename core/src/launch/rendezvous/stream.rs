//! Blocking reads and writes on a joined stream, each bounded by what is left until a
//! deadline, the frames of the bootstrap, and the resolution of a rendezvous address.

use super::MAX_FRAME;
use crate::transport::error::{Error, Result};
use crate::transport::Rank;
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

/// Who is on the other end of a joined stream, for error messages.
#[derive(Debug, Clone, Copy)]
pub(super) struct Who {
    pub(super) me: Rank,
    pub(super) peer: Rank,
}

impl Who {
    fn lost(&self, detail: String) -> Error {
        Error::PeerLost {
            peer: self.peer,
            detail,
        }
    }
    fn timeout(&self, what: &str, timeout: Duration) -> Error {
        Error::Timeout {
            rank: self.me,
            what: format!("rank {} ({what})", self.peer),
            timeout,
        }
    }
}

pub(super) fn remaining(deadline: Instant) -> Option<Duration> {
    deadline
        .checked_duration_since(Instant::now())
        .filter(|d| !d.is_zero())
}

/// Which way bytes move on a stream: names the operation in errors and sets its timeout.
#[derive(Debug, Clone, Copy)]
enum Dir {
    Read,
    Write,
}

impl Dir {
    fn name(self) -> &'static str {
        match self {
            Dir::Read => "read",
            Dir::Write => "write",
        }
    }

    fn set_timeout(self, s: &TcpStream, t: Duration) -> Result<()> {
        match self {
            Dir::Read => s.set_read_timeout(Some(t)),
            Dir::Write => s.set_write_timeout(Some(t)),
        }
        .map_err(|e| Error::io(format!("setting a {} timeout", self.name()), e))
    }
}

/// Move `len` bytes with `step` (given the bytes moved so far, it moves some more), every call
/// bounded by what is left until `deadline`.
fn bounded(
    s: &mut TcpStream,
    len: usize,
    deadline: Instant,
    who: &Who,
    dir: Dir,
    mut step: impl FnMut(&mut TcpStream, usize) -> std::io::Result<usize>,
) -> Result<()> {
    let start = Instant::now();
    let mut done = 0;
    while done < len {
        let left = remaining(deadline)
            .ok_or_else(|| who.timeout(dir.name(), deadline.saturating_duration_since(start)))?;
        dir.set_timeout(s, left)?;
        match step(s, done) {
            Ok(0) => return Err(who.lost("connection closed".into())),
            Ok(n) => done += n,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(e) => return Err(who.lost(e.to_string())),
        }
    }
    Ok(())
}

/// `read_exact` with every read bounded by what is left until `deadline`.
pub(super) fn read_full(
    s: &mut TcpStream,
    buf: &mut [u8],
    deadline: Instant,
    who: &Who,
) -> Result<()> {
    bounded(s, buf.len(), deadline, who, Dir::Read, |s, done| {
        s.read(&mut buf[done..])
    })
}

/// `write_all` with every write bounded by what is left until `deadline`.
pub(super) fn write_full(
    s: &mut TcpStream,
    buf: &[u8],
    deadline: Instant,
    who: &Who,
) -> Result<()> {
    bounded(s, buf.len(), deadline, who, Dir::Write, |s, done| {
        s.write(&buf[done..])
    })
}

pub(super) fn read_frame(s: &mut TcpStream, deadline: Instant, who: &Who) -> Result<Vec<u8>> {
    let mut l = [0u8; 4];
    read_full(s, &mut l, deadline, who)?;
    let len = u32::from_le_bytes(l) as usize;
    if len > MAX_FRAME {
        return Err(Error::Protocol(format!(
            "bootstrap frame of {len} bytes (at most {MAX_FRAME})"
        )));
    }
    let mut b = vec![0u8; len];
    read_full(s, &mut b, deadline, who)?;
    Ok(b)
}

pub(super) fn write_frame(
    s: &mut TcpStream,
    data: &[u8],
    deadline: Instant,
    who: &Who,
) -> Result<()> {
    if data.len() > MAX_FRAME {
        return Err(Error::Invalid(format!(
            "bootstrap frame of {} bytes (at most {MAX_FRAME})",
            data.len()
        )));
    }
    let mut b = Vec::with_capacity(4 + data.len());
    b.extend_from_slice(&(data.len() as u32).to_le_bytes());
    b.extend_from_slice(data);
    write_full(s, &b, deadline, who)
}

pub(super) fn resolve(addr: &str) -> Result<Vec<SocketAddr>> {
    let v: Vec<SocketAddr> = addr
        .to_socket_addrs()
        .map_err(|e| Error::Config(format!("rendezvous address {addr:?}: {e}")))?
        .collect();
    if v.is_empty() {
        return Err(Error::Config(format!(
            "rendezvous address {addr:?} resolves to nothing"
        )));
    }
    Ok(v)
}
