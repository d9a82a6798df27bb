//! The bootstrap tree: rank 0 binds the rendezvous; every other rank joins it once, says where
//! it listens and leaves; rank 0 then sends the list of those addresses down a binomial tree
//! ([`crate::transport::control::Tree`]) whose edges stay open and carry a small control plane
//! ([`Bootstrap::allgather`], [`Bootstrap::barrier`]) before a backend's own data plane exists.
//! No rank holds more than `1 + log2(n)` bootstrap connections at once (rank 0, which
//! accepts every rank in turn, holds at most as many handshakes as its spare descriptors
//! allow), so a run of more ranks than a rank may open descriptors still starts.

use super::join::connect_stream;
use super::listener::Listener;
use super::stream::{read_frame, resolve, write_frame, Who};
use super::{
    check_address, check_token, Rendezvous, HANDSHAKE_LIMIT, MAX_FRAME, MAX_SIZE, TOKEN_HINT,
};
use crate::launch::RankEnv;
use crate::transport::control::{push_entry, unpack, Tree};
use crate::transport::error::{Error, Result};
use crate::transport::Rank;
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

/// The bootstrap tree of one rank: a stream to its parent (none on rank 0) and one to each
/// of its children, nearest first.
#[derive(Debug)]
pub struct Bootstrap {
    rank: Rank,
    size: u32,
    timeout: Duration,
    parent: Option<(Rank, TcpStream)>,
    children: Vec<(Rank, TcpStream)>,
    listen_ip: IpAddr,
}

impl Bootstrap {
    /// Rank 0, step 1: bind the rendezvous at `addr` (`HOST:0` picks a free port; ask
    /// [`Listener::local_addr`]). Do this before starting the other ranks.
    pub fn listen(addr: &str) -> Result<Listener> {
        let addrs = resolve(addr)?;
        let inner = TcpListener::bind(&addrs[..])
            .map_err(|e| Error::io(format!("binding the rendezvous at {addr}"), e))?;
        let addr = inner
            .local_addr()
            .map_err(|e| Error::io("reading the rendezvous address", e))?;
        Ok(Listener {
            inner,
            addr,
            handshake_limit: HANDSHAKE_LIMIT,
        })
    }

    /// Ranks other than 0: join the rendezvous at `addr` (retrying until `timeout`: rank 0
    /// may not be listening yet) with the handshake (rank 0 proves `token` first, then this
    /// rank), say where this rank listens and leave; then take the connection of this rank's
    /// parent in the tree, with the list of every rank's address, and connect to its children.
    pub fn connect(
        addr: &str,
        rank: Rank,
        size: u32,
        token: &str,
        timeout: Duration,
    ) -> Result<Bootstrap> {
        if rank == 0 || rank >= size {
            return Err(Error::Invalid(format!(
                "rank {rank} of {size} cannot connect to the rendezvous (rank 0 holds it)"
            )));
        }
        let mut s = connect_stream(addr, rank, 0, size, token, timeout)?;
        let listen_ip = s
            .local_addr()
            .map_err(|e| Error::io("reading the local address", e))?
            .ip();
        let mine = Self::listen(&SocketAddr::new(listen_ip, 0).to_string())?;
        let deadline = Instant::now() + timeout;
        let here = mine.local_addr().to_string();
        write_frame(
            &mut s,
            here.as_bytes(),
            deadline,
            &Who { me: rank, peer: 0 },
        )?;
        drop(s);
        let tree = Tree::new(size, 0, rank);
        let parent = tree.parent().unwrap_or(0);
        // Rank 0 waits for every rank before it answers, and every rank above this one in the
        // tree forwards in turn: wait for the parent twice the timeout.
        let mut up = mine
            .accept_ranks(
                rank,
                size,
                parent..parent + 1,
                token,
                timeout.saturating_mul(2),
            )
            .map_err(|e| e.in_phase(format!("waiting for rank {parent}, its parent")))?;
        let mut up = up
            .pop()
            .ok_or_else(|| Error::Protocol(format!("no stream from rank {parent}")))?;
        let deadline = Instant::now() + timeout;
        let table = read_frame(
            &mut up,
            deadline,
            &Who {
                me: rank,
                peer: parent,
            },
        )?;
        let addrs = decode_all(&table, size)?;
        let children = send_down(rank, size, token, timeout, &table, &addrs)?;
        Ok(Bootstrap {
            rank,
            size,
            timeout,
            parent: Some((parent, up)),
            children,
            listen_ip,
        })
    }
    /// Bootstrap from the rank's environment: rank 0 binds `env.rendezvous` and accepts,
    /// the others connect to it; both need `env.token` (checked with [`check_token`], and the
    /// address with [`check_address`], before anything is bound or connected).
    pub fn from_env(env: &RankEnv, timeout: Duration) -> Result<Bootstrap> {
        let token = env.token.as_deref().ok_or_else(|| {
            Error::Config(format!(
                "no run token: set {} to the same secret on every rank ({TOKEN_HINT})",
                crate::launch::ENV_TOKEN
            ))
        })?;
        if env.size == 1 {
            return Ok(Bootstrap {
                rank: 0,
                size: 1,
                timeout,
                parent: None,
                children: Vec::new(),
                listen_ip: IpAddr::from([127, 0, 0, 1]),
            });
        }
        let addr = env.rendezvous.as_deref().ok_or_else(|| {
            Error::Config(format!(
                "no rendezvous address (the HOST:PORT where rank 0 listens): give one or set {}",
                crate::launch::ENV_RENDEZVOUS
            ))
        })?;
        check_token(token)?;
        check_address(addr)?;
        if env.rank == 0 {
            Self::listen(addr)?.accept_all(env.size, token, timeout)
        } else {
            Self::connect(addr, env.rank, env.size, token, timeout)
        }
    }

    /// This rank.
    pub fn rank(&self) -> Rank {
        self.rank
    }

    /// Number of ranks.
    pub fn size(&self) -> u32 {
        self.size
    }

    /// The timeout of every operation.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// The local IP address this rank reached (or, on rank 0, was reached on) the rendezvous
    /// by: the interface a backend should listen on for its data connections.
    pub fn local_ip(&self) -> IpAddr {
        if self.parent.is_some() {
            return self.listen_ip;
        }
        match self.children.first().and_then(|(_, s)| s.local_addr().ok()) {
            Some(a) => a.ip(),
            None => self.listen_ip,
        }
    }

    /// Every rank's `blob` (at most [`MAX_FRAME`] bytes in all), in rank order, on every
    /// rank: up the tree to rank 0, each rank adding its subtree's, and the whole set back
    /// down.
    pub fn allgather(&mut self, blob: &[u8]) -> Result<Vec<Vec<u8>>> {
        let deadline = Instant::now() + self.timeout;
        let me = self.rank;
        let mut packed = Vec::with_capacity(8 + blob.len());
        push_entry(&mut packed, me, blob);
        for (c, s) in self.children.iter_mut() {
            let got = read_frame(s, deadline, &Who { me, peer: *c })?;
            packed.extend_from_slice(&got);
        }
        let out = match self.parent.as_mut() {
            Some((p, s)) => {
                let who = Who { me, peer: *p };
                write_frame(s, &packed, deadline, &who)?;
                read_frame(s, deadline, &who)?
            }
            None => encode_all(&unpack(&packed, self.size)?)?,
        };
        for (c, s) in self.children.iter_mut().rev() {
            write_frame(s, &out, deadline, &Who { me, peer: *c })?;
        }
        decode_all(&out, self.size)
    }

    /// Block until every rank has entered the barrier (an allgather of nothing).
    pub fn barrier(&mut self) -> Result<()> {
        self.allgather(&[]).map(drop)
    }
}

// Rank 0's step 2 of 2 (step 1 is `Bootstrap::listen`): the bound listener hears every other
// rank say where it listens, and rank 0 sends the list down the tree.
impl Listener {
    /// Rank 0 of a local launch (`env`), which bound this listener before the other ranks
    /// were spawned with its address: every rank accepted with the run's token (checked), in
    /// the phase "bootstrap".
    pub fn accept_as_rank0(self, env: &RankEnv, timeout: Duration) -> Result<Bootstrap> {
        if env.rank != 0 {
            return Err(Error::Invalid(format!(
                "rank {} cannot hold the rendezvous (rank 0 does)",
                env.rank
            )));
        }
        let token = env.checked_token()?;
        self.accept_all(env.size, token, timeout)
            .map_err(|e| e.in_phase("bootstrap"))
    }

    /// Hear ranks `1..size` proving `token` say where they listen, refusing every other
    /// connection, until all have or `timeout` runs out ([`Error::Timeout`] naming the
    /// missing ranks); then send the list of addresses to rank 0's children in the tree.
    /// Each rank's connection is closed once it has spoken, and no more handshakes run at
    /// once than half the descriptors this process has to spare.
    pub fn accept_all(self, size: u32, token: &str, timeout: Duration) -> Result<Bootstrap> {
        if size == 0 || size > MAX_SIZE {
            return Err(Error::Invalid(format!("a run of {size} ranks")));
        }
        let mut addrs: Vec<Vec<u8>> = vec![Vec::new(); size as usize];
        addrs[0] = self.addr.to_string().into_bytes();
        let (soft, open) = crate::launch::descriptors();
        let spare = usize::try_from(soft.saturating_sub(open) / 2).unwrap_or(usize::MAX);
        let deadline = Instant::now() + timeout;
        self.accept_each(0, size, 1..size, token, (timeout, spare), |r, mut s| {
            let a = read_frame(&mut s, deadline, &Who { me: 0, peer: r })?;
            let text = std::str::from_utf8(&a).map_err(|_| {
                Error::Protocol(format!("rank {r} sent an address that is not text"))
            })?;
            check_address(text)?;
            addrs[r as usize] = a;
            Ok(())
        })?;
        let table = encode_all(&addrs)?;
        let children = send_down(0, size, token, timeout, &table, &addrs)?;
        Ok(Bootstrap {
            rank: 0,
            size,
            timeout,
            parent: None,
            children,
            listen_ip: self.addr.ip(),
        })
    }
}

/// Rank `me` connects to each of its children in the tree at its address in `addrs` and
/// sends it `table` (every rank's address).
fn send_down(
    me: Rank,
    size: u32,
    token: &str,
    timeout: Duration,
    table: &[u8],
    addrs: &[Vec<u8>],
) -> Result<Vec<(Rank, TcpStream)>> {
    let deadline = Instant::now() + timeout;
    let tree = Tree::new(size, 0, me);
    let mut out = Vec::new();
    for c in tree.children() {
        let addr = addrs
            .get(c as usize)
            .and_then(|a| std::str::from_utf8(a).ok())
            .ok_or_else(|| Error::Protocol(format!("no address for rank {c}")))?;
        let mut s = connect_stream(addr, me, c, size, token, timeout)
            .map_err(|e| e.in_phase(format!("connecting to rank {c}, a child in the tree")))?;
        write_frame(&mut s, table, deadline, &Who { me, peer: c })?;
        out.push((c, s));
    }
    Ok(out)
}

/// Every rank's contribution as rank 0 sends it down: the count, then each length-prefixed.
fn encode_all(all: &[Vec<u8>]) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    out.extend_from_slice(&(all.len() as u32).to_le_bytes());
    for b in all {
        out.extend_from_slice(&(b.len() as u32).to_le_bytes());
        out.extend_from_slice(b);
    }
    if out.len() > MAX_FRAME {
        return Err(Error::Invalid(format!(
            "allgather of {} bytes in all (at most {MAX_FRAME})",
            out.len()
        )));
    }
    Ok(out)
}

fn decode_all(f: &[u8], size: u32) -> Result<Vec<Vec<u8>>> {
    let bad = || Error::Protocol("malformed allgather frame from rank 0".into());
    let take = |pos: &mut usize, n: usize| -> Result<&[u8]> {
        let end = pos
            .checked_add(n)
            .filter(|&e| e <= f.len())
            .ok_or_else(bad)?;
        let s = &f[*pos..end];
        *pos = end;
        Ok(s)
    };
    let mut pos = 0;
    let n = take(&mut pos, 4)?;
    let n = u32::from_le_bytes([n[0], n[1], n[2], n[3]]);
    if n != size {
        return Err(bad());
    }
    let mut all = Vec::with_capacity(size as usize);
    for _ in 0..n {
        let l = take(&mut pos, 4)?;
        let l = u32::from_le_bytes([l[0], l[1], l[2], l[3]]) as usize;
        all.push(take(&mut pos, l)?.to_vec());
    }
    if pos != f.len() {
        return Err(bad());
    }
    Ok(all)
}

impl Rendezvous for Bootstrap {
    fn rank(&self) -> Rank {
        Bootstrap::rank(self)
    }
    fn size(&self) -> u32 {
        Bootstrap::size(self)
    }
    fn local_ip(&self) -> Option<IpAddr> {
        Some(Bootstrap::local_ip(self))
    }
    fn allgather(&mut self, blob: &[u8]) -> Result<Vec<Vec<u8>>> {
        Bootstrap::allgather(self, blob)
    }
    fn barrier(&mut self) -> Result<()> {
        Bootstrap::barrier(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::launch::rendezvous::tests::{T, TOKEN};
    use std::thread;

    fn run(n: u32, token: &'static str) -> Vec<Result<Vec<Vec<u8>>>> {
        let l = Bootstrap::listen("127.0.0.1:0").unwrap();
        let addr = l.local_addr().to_string();
        let mut hs = Vec::new();
        for r in 1..n {
            let addr = addr.clone();
            hs.push(thread::spawn(move || {
                let mut b = Bootstrap::connect(&addr, r, n, token, T)?;
                b.barrier()?;
                b.allgather(format!("rank {r}").as_bytes())
            }));
        }
        let mut out = vec![(|| {
            let mut b = l.accept_all(n, token, T)?;
            b.barrier()?;
            b.allgather(b"rank 0")
        })()];
        out.extend(hs.into_iter().map(|h| h.join().unwrap()));
        out
    }

    #[test]
    fn allgather_on_2_to_9_ranks() {
        // From 5 ranks the tree is three deep.
        for n in 2..=9 {
            let want: Vec<Vec<u8>> = (0..n).map(|r| format!("rank {r}").into_bytes()).collect();
            for r in run(n, TOKEN) {
                assert_eq!(r.unwrap(), want);
            }
        }
    }

    #[test]
    fn silent_and_lost_peers_are_named() {
        let l = Bootstrap::listen("127.0.0.1:0").unwrap();
        let addr = l.local_addr().to_string();
        let h = thread::spawn(move || {
            let b = Bootstrap::connect(&addr, 1, 2, TOKEN, Duration::from_millis(400))?;
            thread::sleep(Duration::from_millis(1500));
            drop(b);
            Ok::<_, Error>(())
        });
        let mut b0 = l.accept_all(2, TOKEN, Duration::from_millis(400)).unwrap();
        match b0.barrier().unwrap_err() {
            Error::Timeout { rank: 0, what, .. } => assert!(what.contains("rank 1"), "{what}"),
            e => panic!("{e}"),
        }
        h.join().unwrap().unwrap();
        match b0.barrier().unwrap_err() {
            Error::PeerLost { peer: 1, .. } => {}
            e => panic!("{e}"),
        }
    }

    #[test]
    fn from_env_names_what_is_missing() {
        let mut env = RankEnv {
            rank: 1,
            size: 2,
            rendezvous: None,
            token: Some(TOKEN.into()),
            job: None,
            launcher: crate::launch::Launcher::Manual,
        };
        let e = Bootstrap::from_env(&env, T).unwrap_err().to_string();
        assert!(
            e.contains("no rendezvous address")
                && e.contains(crate::launch::ENV_RENDEZVOUS)
                && !e.contains("--"),
            "{e}"
        );
        env.token = None;
        env.rendezvous = Some("127.0.0.1:1".into());
        let e = Bootstrap::from_env(&env, T).unwrap_err().to_string();
        assert!(e.contains(crate::launch::ENV_TOKEN), "{e}");
    }

    #[test]
    fn decode_rejects_garbage() {
        assert!(decode_all(&[1, 0, 0, 0, 255, 255, 255, 255], 1).is_err());
        assert!(decode_all(&[2, 0, 0, 0], 1).is_err());
        assert_eq!(
            decode_all(&[1, 0, 0, 0, 1, 0, 0, 0, 7], 1).unwrap(),
            vec![vec![7]]
        );
    }
}
