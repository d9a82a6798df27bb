//! One connection to a peer: its socket, the queue of sends waiting for room in it, and the
//! receive side, which reads frames and hands their payloads to the tag-matching engine.

use crate::frame::{self, Frame, HEADER_BYTES, SMALL_FRAME};
use crate::TcpConfig;
use commbench_core::method::limits;
use commbench_core::transport::matching::{Matcher, PostedRecv, ReqTable};
use commbench_core::transport::{Completion, Rank, ReqId, Tag};
use commbench_core::{Error, Result};
use nix::errno::Errno;
use nix::sys::socket::{recv, send, sendmsg, MsgFlags, SockaddrStorage};
use std::collections::VecDeque;
use std::io::IoSlice;
use std::net::TcpStream;
use std::os::fd::{AsRawFd, RawFd};
use std::time::Duration;

/// Size of each connection's receive staging buffer.
pub const RX_BUFFER_BYTES: usize = 64 << 10;
/// Payloads at least this long are read straight into the receive buffer, bypassing staging.
const DIRECT_READ: usize = RX_BUFFER_BYTES / 2;
/// Unexpected payloads up to this size come from the matcher's pool; larger ones are
/// allocated fallibly.
const POOLED: usize = 1 << 20;
/// Longest single sleep in a blocking wait, so that the deadline is checked regularly.
pub(crate) const SLEEP_SLICE: Duration = Duration::from_millis(200);

/// A send that did not fit in the socket at once: the payload `buf[start..start + len]`, sent
/// `left` more times (a span posted several times at once) before the request completes.
#[derive(Debug)]
pub(crate) struct SendOp {
    /// `None` for the goodbye frame.
    pub(crate) req: Option<ReqId>,
    pub(crate) hdr: [u8; HEADER_BYTES],
    pub(crate) buf: Vec<u8>,
    pub(crate) tag: Tag,
    /// Bytes of header + payload already written.
    pub(crate) off: usize,
    pub(crate) start: usize,
    pub(crate) len: usize,
    /// Frames still to write, this one included.
    pub(crate) left: u32,
}

impl SendOp {
    /// A send of all of `buf`, once, `off` bytes of its frame already written.
    pub(crate) fn whole(
        req: Option<ReqId>,
        hdr: [u8; HEADER_BYTES],
        buf: Vec<u8>,
        tag: Tag,
        off: usize,
    ) -> SendOp {
        let len = buf.len();
        SendOp {
            req,
            hdr,
            buf,
            tag,
            off,
            start: 0,
            len,
            left: 1,
        }
    }

    /// The payload of each frame.
    #[inline]
    fn payload(&self) -> &[u8] {
        &self.buf[self.start..self.start + self.len]
    }
}

/// Where the bytes of the message being received go.
#[derive(Debug)]
pub(crate) enum Rx {
    /// Between messages: the next bytes are a header.
    Header,
    /// Into a posted receive's buffer ([`PostedRecv::dest`]).
    Posted {
        recv: PostedRecv,
        tag: Tag,
        len: usize,
        got: usize,
    },
    /// Into an unexpected-message buffer.
    Unexpected { tag: Tag, data: Vec<u8>, got: usize },
    /// Dropped (the payload of a truncated receive).
    Discard { left: usize },
}

impl Rx {
    /// The buffer the payload being received goes into (exactly its length) and how many of
    /// its bytes have arrived; `None` between messages and for a discarded payload.
    fn sink(&mut self) -> Option<(&mut [u8], &mut usize)> {
        match self {
            Rx::Posted { recv, len, got, .. } => Some((recv.dest(*len), got)),
            Rx::Unexpected { data, got, .. } => Some((data.as_mut_slice(), got)),
            Rx::Header | Rx::Discard { .. } => None,
        }
    }

    /// Take payload bytes from the start of `staged`: how many were taken, and whether the
    /// payload is now complete. Between messages nothing is taken.
    fn absorb(&mut self, staged: &[u8]) -> (usize, bool) {
        if let Rx::Discard { left } = self {
            let k = staged.len().min(*left);
            *left -= k;
            return (k, *left == 0);
        }
        match self.sink() {
            Some((dst, got)) => {
                let k = staged.len().min(dst.len() - *got);
                dst[*got..*got + k].copy_from_slice(&staged[..k]);
                *got += k;
                (k, *got == dst.len())
            }
            None => (0, false),
        }
    }
}

/// One connection to a peer.
#[derive(Debug)]
pub(crate) struct Conn {
    pub(crate) peer: Rank,
    pub(crate) stream: TcpStream,
    fd: RawFd,
    pub(crate) sendq: VecDeque<SendOp>,
    pub(crate) rx: Rx,
    /// Receive staging buffer; bytes `rs..re` have arrived and are not yet processed.
    rbuf: Box<[u8]>,
    rs: usize,
    re: usize,
    /// The peer said goodbye: it sends nothing more.
    pub(crate) bye_in: bool,
    /// The peer closed this connection: it sends nothing more on it (it may connect again).
    pub(crate) close_in: bool,
    /// This rank queued its goodbye or close: nothing more is queued on this connection.
    pub(crate) fin_out: bool,
    /// Not read while an older connection to the same peer is still being closed: what the
    /// peer sent on that one comes first.
    pub(crate) held: bool,
    /// When this rank last sent on it (the endpoint's count of sends), for eviction.
    pub(crate) last_used: u64,
    /// Which connection of the endpoint's life this is (from 1).
    pub(crate) id: u64,
    /// End of file after the goodbye: the connection is finished.
    pub(crate) closed: bool,
    /// Whether `EPOLLOUT` is in this connection's epoll interest.
    pub(crate) epollout: bool,
    /// Whether the connection is registered with epoll.
    pub(crate) watched: bool,
}

impl Conn {
    pub(crate) fn new(peer: Rank, stream: TcpStream, cfg: &TcpConfig) -> Result<Conn> {
        let ctx = |e| Error::io(format!("configuring the connection to rank {peer}"), e);
        stream.set_nodelay(true).map_err(ctx)?;
        stream.set_nonblocking(cfg.poll).map_err(ctx)?;
        // Bounds each sleep in read(2) of the blocking fast path; the wait checks its deadline.
        stream
            .set_read_timeout(Some(
                SLEEP_SLICE.min(cfg.timeout).max(Duration::from_millis(1)),
            ))
            .map_err(ctx)?;
        let fd = stream.as_raw_fd();
        Ok(Conn {
            peer,
            stream,
            fd,
            sendq: VecDeque::with_capacity(16),
            rx: Rx::Header,
            rbuf: vec![0u8; RX_BUFFER_BYTES].into_boxed_slice(),
            rs: 0,
            re: 0,
            bye_in: false,
            close_in: false,
            fin_out: false,
            held: false,
            last_used: 0,
            id: 0,
            closed: false,
            epollout: false,
            watched: true,
        })
    }

    /// Send now the acknowledgement Linux is holding back for what this connection last
    /// received (a delayed ACK), and leave its delayed-ACK "ping-pong" mode (`TCP_QUICKACK`).
    /// Called before a large message leaves. When a rank has just received a small message (the
    /// handshake, a barrier) and then sends a large one, the held-back ACK otherwise rides on
    /// the large message, and Linux then moves the whole message markedly slower: on loopback
    /// the first 4 MiB ping-pong after the handshake took up to three times as long as the ones
    /// that followed it, which NetPIPE, with no handshake between its ping-pongs, never meets.
    /// One `setsockopt(2)` per large send.
    pub(crate) fn quickack(&self) -> Result<()> {
        socket2::SockRef::from(&self.stream)
            .set_quickack(true)
            .map_err(|e| {
                Error::io(
                    format!("setting TCP_QUICKACK towards rank {}", self.peer),
                    e,
                )
            })
    }

    fn lost(&self, detail: impl Into<String>) -> Error {
        Error::PeerLost {
            peer: self.peer,
            detail: detail.into(),
        }
    }

    /// One non-blocking write of header + payload from `off` (a small whole frame from one
    /// contiguous copy, otherwise a gather write); bytes written.
    pub(crate) fn write_from(
        &self,
        hdr: &[u8; HEADER_BYTES],
        buf: &[u8],
        off: usize,
    ) -> Result<usize> {
        let flags = MsgFlags::MSG_DONTWAIT | MsgFlags::MSG_NOSIGNAL;
        loop {
            let r = if off == 0 && buf.len() <= SMALL_FRAME - HEADER_BYTES {
                // A small frame leaves from one contiguous buffer through send(2): the
                // kernel's path for one plain buffer is shorter than sendmsg(2)'s for an
                // iovec array, and copying a few hundred bytes costs less than the difference.
                let mut frame = [0u8; SMALL_FRAME];
                frame[..HEADER_BYTES].copy_from_slice(hdr);
                frame[HEADER_BYTES..HEADER_BYTES + buf.len()].copy_from_slice(buf);
                send(self.fd, &frame[..HEADER_BYTES + buf.len()], flags)
            } else if off < HEADER_BYTES {
                let iov = [IoSlice::new(&hdr[off..]), IoSlice::new(buf)];
                sendmsg::<SockaddrStorage>(self.fd, &iov, &[], flags, None)
            } else {
                send(self.fd, &buf[off - HEADER_BYTES..], flags)
            };
            match r {
                Ok(n) => return Ok(n),
                Err(Errno::EAGAIN) => return Ok(0),
                Err(Errno::EINTR) => continue,
                Err(e) => return Err(self.lost(format!("send failed: {e}"))),
            }
        }
    }

    /// Whether nothing is under way on it: no send queued, no message half received, nothing
    /// staged, neither side has begun to close it, and it is read (a held connection closed
    /// would never read its peer's answer). Only such a connection is evicted.
    pub(crate) fn idle(&self) -> bool {
        !self.held
            && self.sendq.is_empty()
            && matches!(self.rx, Rx::Header)
            && self.rs == self.re
            && !self.fin_out
            && !self.close_in
            && !self.bye_in
            && !self.closed
    }

    /// Whether this rank may still queue sends on it.
    pub(crate) fn usable(&self) -> bool {
        !self.fin_out && !self.close_in && !self.bye_in && !self.closed
    }

    /// Write queued sends until the socket is full; completed sends go to `reqs`.
    pub(crate) fn tx_progress(&mut self, reqs: &mut ReqTable) -> Result<bool> {
        let mut progressed = false;
        while let Some(op) = self.sendq.front() {
            let total = HEADER_BYTES + op.len;
            let n = self.write_from(&op.hdr, op.payload(), op.off)?;
            if n == 0 {
                break;
            }
            progressed = true;
            let done = match self.sendq.front_mut() {
                Some(op) => {
                    op.off += n;
                    op.off >= total
                }
                None => false,
            };
            if !done {
                break;
            }
            if let Some(op) = self.sendq.front_mut().filter(|op| op.left > 1) {
                // The next frame of a span posted several times: same header, same bytes.
                op.left -= 1;
                op.off = 0;
                continue;
            }
            if let Some(op) = self.sendq.pop_front() {
                if let Some(req) = op.req {
                    let mut c = Completion::send(op.buf, self.peer, op.tag);
                    c.len = op.len;
                    reqs.complete(req, Ok(c));
                }
            }
        }
        Ok(progressed)
    }

    /// Read what has arrived and process complete frames. With `block`, the first read sleeps
    /// in the kernel (at most the socket's receive timeout). Stops after a short read: the
    /// socket was empty at that instant.
    pub(crate) fn rx_progress(
        &mut self,
        m: &mut Matcher,
        reqs: &mut ReqTable,
        block: bool,
    ) -> Result<bool> {
        let mut progressed = false;
        let mut flags = if block {
            MsgFlags::empty()
        } else {
            MsgFlags::MSG_DONTWAIT
        };
        loop {
            progressed |= self.consume_staged(m, reqs)?;
            if self.closed {
                return Ok(progressed);
            }
            let r = self.read_some(flags);
            flags = MsgFlags::MSG_DONTWAIT;
            match r {
                Ok((0, want)) if want > 0 => {
                    if self.bye_in || self.close_in {
                        self.closed = true;
                        return Ok(progressed);
                    }
                    return Err(self.lost("connection closed without goodbye"));
                }
                Ok((n, want)) if n < want => {
                    // The socket was empty at that instant: process what came, and stop.
                    self.consume_staged(m, reqs)?;
                    return Ok(true);
                }
                Ok(_) => progressed = true,
                Err(Errno::EAGAIN) => return Ok(progressed),
                Err(Errno::EINTR) => {}
                Err(e) => return Err(self.lost(format!("receive failed: {e}"))),
            }
        }
    }

    /// Process the staged bytes: match each complete header, move payload bytes to where their
    /// message goes, and finish each message whose payload is complete. Whether anything was
    /// matched or finished.
    fn consume_staged(&mut self, m: &mut Matcher, reqs: &mut ReqTable) -> Result<bool> {
        let mut progressed = false;
        loop {
            let staged = &self.rbuf[self.rs..self.re];
            if matches!(self.rx, Rx::Header) {
                let Some(h) = staged.first_chunk::<HEADER_BYTES>() else {
                    break;
                };
                let f = frame::decode(h, self.peer, self.bye_in || self.close_in)?;
                self.rs += HEADER_BYTES;
                self.on_header(f, m, reqs)?;
            } else {
                let (k, complete) = self.rx.absorb(staged);
                self.rs += k;
                if !complete {
                    break;
                }
                self.on_payload(m, reqs);
            }
            progressed = true;
        }
        if self.rs == self.re {
            self.rs = 0;
            self.re = 0;
        }
        Ok(progressed)
    }

    /// A header arrived: match it and set where its payload goes. A message that arrived
    /// before its receive was posted and for which there is no memory is dropped (the stream
    /// stays in step) and is an error naming it.
    fn on_header(&mut self, f: Frame, m: &mut Matcher, reqs: &mut ReqTable) -> Result<()> {
        let (len, tag) = match f {
            Frame::Message { len, tag } => (len, tag),
            Frame::Bye => {
                self.bye_in = true;
                return Ok(());
            }
            Frame::Close => {
                self.close_in = true;
                return Ok(());
            }
        };
        self.rx = match m.match_arrival(self.peer, tag) {
            Some(p) if len > p.cap => {
                let e = Error::Truncated {
                    len,
                    cap: p.cap,
                    source_rank: self.peer,
                    tag,
                };
                m.refuse(reqs, p, e);
                Rx::Discard { left: len }
            }
            Some(recv) => Rx::Posted {
                recv,
                tag,
                len,
                got: 0,
            },
            None if len <= POOLED => Rx::Unexpected {
                tag,
                data: m.unexpected_buffer(len),
                got: 0,
            },
            None => {
                let peer = self.peer;
                match limits::try_zeroed(len as u64, || {
                    format!(
                        "a message of {len} bytes from rank {peer} (tag {tag}) that arrived \
                         before its receive was posted"
                    )
                }) {
                    Ok(data) => Rx::Unexpected { tag, data, got: 0 },
                    Err(e) => {
                        self.rx = Rx::Discard { left: len };
                        return Err(e);
                    }
                }
            }
        };
        Ok(())
    }

    /// The payload is complete: finish the receive or queue the unexpected message.
    fn on_payload(&mut self, m: &mut Matcher, reqs: &mut ReqTable) {
        let peer = self.peer;
        match std::mem::replace(&mut self.rx, Rx::Header) {
            Rx::Posted { recv, tag, len, .. } => m.landed(reqs, recv, peer, tag, len),
            Rx::Unexpected { tag, data, .. } => m.deliver(reqs, peer, tag, data),
            Rx::Header | Rx::Discard { .. } => {}
        }
    }

    /// One `recv(2)`: straight into the buffer of the message being received when nothing is
    /// staged and at least [`DIRECT_READ`] of its bytes are still to come, otherwise into the
    /// staging buffer. Bytes read and bytes asked for.
    fn read_some(&mut self, flags: MsgFlags) -> nix::Result<(usize, usize)> {
        let fd = self.fd;
        if self.rs == self.re {
            if let Some((dst, got)) = self.rx.sink() {
                let dst = &mut dst[*got..];
                if dst.len() >= DIRECT_READ {
                    let want = dst.len();
                    let n = recv(fd, dst, flags)?;
                    *got += n;
                    return Ok((n, want));
                }
            }
        }
        if self.rs > 0 && self.re == self.rbuf.len() {
            self.rbuf.copy_within(self.rs..self.re, 0);
            self.re -= self.rs;
            self.rs = 0;
        }
        let dst = &mut self.rbuf[self.re..];
        let want = dst.len();
        let n = recv(fd, dst, flags)?;
        self.re += n;
        Ok((n, want))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    /// Small frames leave from one contiguous copy; when the socket takes only part of one,
    /// the rest follows from the right offset, so the byte stream the peer reads is exactly
    /// header + payload, frame after frame. A tiny send buffer and a reader that lags behind
    /// (a full receive window) force partial writes.
    #[test]
    fn small_frames_survive_partial_writes() {
        use std::io::Read;
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let a = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (mut b, _) = l.accept().unwrap();
        socket2::SockRef::from(&a)
            .set_send_buffer_size(4096)
            .unwrap();
        let cfg = TcpConfig {
            poll: true,
            ..TcpConfig::default()
        };
        let mut c = Conn::new(1, a, &cfg).unwrap();
        let mut reqs = ReqTable::new();
        let mut expected = Vec::new();
        for i in 0..2000usize {
            let len = [0, 1, 7, 8, 100, SMALL_FRAME - HEADER_BYTES, SMALL_FRAME][i % 7];
            let buf: Vec<u8> = (0..len).map(|k| (i * 31 + k) as u8).collect();
            let hdr = frame::message(len, i as Tag);
            expected.extend_from_slice(&hdr);
            expected.extend_from_slice(&buf);
            c.sendq
                .push_back(SendOp::whole(Some(reqs.alloc()), hdr, buf, i as Tag, 0));
        }
        b.set_nonblocking(true).unwrap();
        let mut got = Vec::new();
        let mut chunk = vec![0u8; 1000];
        let mut partial = 0;
        while got.len() < expected.len() {
            // A small frame (the contiguous path) that this call wrote only in part.
            let fresh_small = c
                .sendq
                .front()
                .is_some_and(|op| op.off == 0 && HEADER_BYTES + op.buf.len() <= SMALL_FRAME);
            c.tx_progress(&mut reqs).unwrap();
            if fresh_small {
                partial += usize::from(c.sendq.front().is_some_and(|op| op.off > 0));
            }
            match b.read(&mut chunk) {
                Ok(n) => got.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                Err(e) => panic!("{e}"),
            }
        }
        assert!(c.sendq.is_empty());
        assert_eq!(reqs.outstanding(), 2000);
        assert!(partial > 0, "no small frame was written in part");
        assert!(
            got == expected,
            "the byte stream differs from the frames sent"
        );
    }

    /// `Conn::quickack` takes the connection out of delayed-ACK ping-pong mode, which
    /// `TCP_QUICKACK` reads back as 0 while the kernel is in it.
    #[test]
    fn quickack_leaves_delayed_ack_mode() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let a = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (_b, _) = l.accept().unwrap();
        let cfg = TcpConfig::default();
        let c = Conn::new(1, a, &cfg).unwrap();
        let sock = socket2::SockRef::from(&c.stream);
        sock.set_quickack(false).unwrap();
        assert!(!sock.quickack().unwrap());
        c.quickack().unwrap();
        assert!(sock.quickack().unwrap());
    }
}
