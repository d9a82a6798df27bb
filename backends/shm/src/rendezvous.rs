//! Finding the segment under an external launcher (mpirun, srun, by hand), where no file
//! descriptor can be inherited.
//!
//! Rank 0 creates the memfd and serves it on an abstract Unix socket (Linux's abstract
//! namespace: no file anywhere, gone when closed) named after the run's job id and token;
//! every other rank connects, proves it runs as the same user (SO_PEERCRED is checked on both
//! ends) and receives the descriptor with SCM_RIGHTS. Nothing is ever created in `/dev/shm`, so
//! a rank killed at any moment leaves nothing behind.

use crate::segment::{self, Layout, Mapping};
use crate::ShmConfig;
use commbench_core::launch::RankEnv;
use commbench_core::{Error, Result};
use nix::sys::socket::{
    accept4, bind, connect, getsockopt, listen, recvmsg, sendmsg, socket, sockopt, AddressFamily,
    Backlog, ControlMessage, ControlMessageOwned, MsgFlags, SockFlag, SockType, UnixAddr,
};
use std::fs::File;
use std::io::{IoSlice, IoSliceMut, Read, Write};
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

/// The abstract socket name of a run: a hash of its job id and token.
fn socket_name(env: &RankEnv) -> Result<Vec<u8>> {
    if env.job.is_none() && env.token.is_none() {
        return Err(Error::Config(
            "shm under an external launcher needs a job id shared by every rank (COMMBENCH_JOB, \
             or the launcher's own) or a run token (COMMBENCH_TOKEN) to find the segment"
                .into(),
        ));
    }
    // FNV-1a over "job\0token": a fixed-length name whatever the ids look like.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let key = format!(
        "{}\0{}\0{}",
        env.job.as_deref().unwrap_or(""),
        env.token.as_deref().unwrap_or(""),
        env.size
    );
    for b in key.bytes() {
        h = (h ^ b as u64).wrapping_mul(0x0100_0000_01b3);
    }
    Ok(format!("commbench-shm-{h:016x}").into_bytes())
}

fn os(context: &str) -> impl Fn(nix::errno::Errno) -> Error + '_ {
    move |e| Error::io(format!("shm rendezvous: {context}"), e.into())
}

fn same_user(fd: &OwnedFd, who: &str) -> Result<()> {
    let cred = getsockopt(fd, sockopt::PeerCredentials).map_err(os("SO_PEERCRED"))?;
    let me = nix::unistd::getuid().as_raw();
    if cred.uid() != me {
        return Err(Error::Protocol(format!(
            "shm rendezvous: {who} runs as uid {} but this rank as uid {me}",
            cred.uid()
        )));
    }
    Ok(())
}

/// Rank 0: create the segment and hand it to the `n - 1` other ranks.
pub(crate) fn serve(env: &RankEnv, cfg: &ShmConfig) -> Result<(Mapping, Layout)> {
    let name = socket_name(env)?;
    let (file, token, layout) = segment::create(env.size, cfg.ring_bytes, cfg.wait, false)?;
    let map = Mapping::map(&file, layout.total)?;
    if env.size == 1 {
        return Ok((map, layout));
    }
    let addr = UnixAddr::new_abstract(&name).map_err(os("socket name"))?;
    let lsn = socket(
        AddressFamily::Unix,
        SockType::Stream,
        SockFlag::SOCK_CLOEXEC | SockFlag::SOCK_NONBLOCK,
        None,
    )
    .map_err(os("socket"))?;
    bind(lsn.as_raw_fd(), &addr).map_err(|e| {
        Error::io(
            format!(
                "shm rendezvous: binding @{} (another run with the same job id?)",
                String::from_utf8_lossy(&name)
            ),
            e.into(),
        )
    })?;
    listen(&lsn, Backlog::MAXCONN).map_err(os("listen"))?;
    let deadline = Instant::now() + cfg.timeout;
    let mut served = vec![false; env.size as usize];
    served[0] = true;
    while served.iter().any(|s| !s) {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            let missing: Vec<usize> = (0..served.len()).filter(|&r| !served[r]).collect();
            return Err(Error::Timeout {
                rank: 0,
                what: format!("ranks {missing:?} to fetch the shared-memory segment"),
                timeout: cfg.timeout,
            });
        }
        use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
        let mut fds = [PollFd::new(lsn.as_fd(), PollFlags::POLLIN)];
        let _ = poll(&mut fds, PollTimeout::from(20u8));
        let raw = match accept4(lsn.as_raw_fd(), SockFlag::SOCK_CLOEXEC) {
            Ok(fd) => fd,
            Err(nix::errno::Errno::EAGAIN | nix::errno::Errno::EINTR) => continue,
            Err(e) => return Err(os("accept")(e)),
        };
        // SAFETY: accept4 just returned this descriptor to us; nobody else owns it.
        let conn = unsafe { OwnedFd::from_raw_fd(raw) };
        same_user(&conn, "a rank connecting to the rendezvous")?;
        let mut s = UnixStream::from(conn);
        s.set_read_timeout(Some(left.max(Duration::from_millis(1))))
            .map_err(|e| Error::io("shm rendezvous: socket timeout", e))?;
        let mut rb = [0u8; 4];
        s.read_exact(&mut rb)
            .map_err(|e| Error::io("shm rendezvous: reading a rank's number", e))?;
        let r = u32::from_le_bytes(rb) as usize;
        if r == 0 || r >= served.len() || served[r] {
            return Err(Error::Protocol(format!(
                "shm rendezvous: a process claimed rank {r} (twice, or out of range for {} ranks)",
                env.size
            )));
        }
        let tok = token.to_le_bytes();
        let fds = [file.as_raw_fd()];
        sendmsg::<()>(
            s.as_raw_fd(),
            &[IoSlice::new(&tok)],
            &[ControlMessage::ScmRights(&fds)],
            MsgFlags::empty(),
            None,
        )
        .map_err(os("sending the segment"))?;
        served[r] = true;
    }
    Ok((map, layout))
}

/// Ranks other than 0: fetch the segment from rank 0, map and validate it.
pub(crate) fn fetch(env: &RankEnv, cfg: &ShmConfig) -> Result<(Mapping, Layout)> {
    let name = socket_name(env)?;
    let addr = UnixAddr::new_abstract(&name).map_err(os("socket name"))?;
    let deadline = Instant::now() + cfg.timeout;
    let sock = loop {
        let s = socket(
            AddressFamily::Unix,
            SockType::Stream,
            SockFlag::SOCK_CLOEXEC,
            None,
        )
        .map_err(os("socket"))?;
        match connect(s.as_raw_fd(), &addr) {
            Ok(()) => break s,
            Err(nix::errno::Errno::ECONNREFUSED | nix::errno::Errno::ENOENT)
                if Instant::now() < deadline =>
            {
                std::thread::sleep(Duration::from_millis(10));
            }
            Err(nix::errno::Errno::ECONNREFUSED | nix::errno::Errno::ENOENT) => {
                return Err(Error::Timeout {
                    rank: env.rank,
                    what: "rank 0 to offer the shared-memory segment".into(),
                    timeout: cfg.timeout,
                })
            }
            Err(e) => return Err(os("connecting to rank 0")(e)),
        }
    };
    same_user(&sock, "rank 0")?;
    let mut s = UnixStream::from(sock);
    s.set_read_timeout(Some(cfg.timeout.max(Duration::from_millis(1))))
        .map_err(|e| Error::io("shm rendezvous: socket timeout", e))?;
    s.write_all(&env.rank.to_le_bytes())
        .map_err(|e| Error::io("shm rendezvous: sending this rank's number", e))?;
    let mut tok = [0u8; 8];
    let mut cmsg = nix::cmsg_space!([std::os::fd::RawFd; 1]);
    let mut iov = [IoSliceMut::new(&mut tok)];
    let msg = recvmsg::<()>(
        s.as_raw_fd(),
        &mut iov,
        Some(&mut cmsg),
        MsgFlags::MSG_CMSG_CLOEXEC,
    )
    .map_err(os("receiving the segment"))?;
    let mut fd = None;
    for c in msg.cmsgs().map_err(os("control message"))? {
        if let ControlMessageOwned::ScmRights(fds) = c {
            for raw in fds {
                // SAFETY: SCM_RIGHTS installed these descriptors in this process for us.
                let o = unsafe { OwnedFd::from_raw_fd(raw) };
                fd.get_or_insert(o);
            }
        }
    }
    let got = msg.bytes;
    let fd = fd.ok_or_else(|| {
        Error::Protocol("shm rendezvous: rank 0 answered without a segment".into())
    })?;
    if got != 8 {
        return Err(Error::Protocol(format!(
            "shm rendezvous: {got}-byte answer from rank 0"
        )));
    }
    let file = File::from(fd);
    let token = u64::from_le_bytes(tok);
    crate::map_checked(&file, env.size, Some(token))
}
