//! The patterns the engine times ([`PatternKind`]): the COMMS1 ping-pong and COMMS2 exchange
//! of seed 002, and windowed streaming as osu_bw and osu_bibw do (`window` sends outstanding,
//! then a short acknowledgement), in one direction or both. Each is a [`Kernel`] of
//! [`crate::method::engine`]; a ping-pong and an exchange hold two message times per
//! iteration (there and back), a window holds `window` (per direction).

use crate::method::engine::{Kernel, KernelSpec};
use crate::method::MethodConfig;
use crate::transport::error::{Error, Result};
use crate::transport::{Completion, Endpoint, Rank, ReqId, Src, Tag, TagSel};
use serde::{Deserialize, Serialize};

/// Tag of the measured messages.
pub const TAG_PINGPONG: Tag = 1;
/// Tag of the acknowledgement closing a window.
pub const TAG_ACK: Tag = 3;

/// Largest total of message buffers one rank keeps for a window; above it the window shrinks
/// (and the point records the window it used).
pub const WINDOW_BYTES_MAX: u64 = 64 << 20;

/// The kernel timed in each trial.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum PatternKind {
    /// COMMS1: source sends, dest returns it (seed 002, seed 000 §3.2).
    PingPong,
    /// COMMS2: source and dest send to each other at once, then return the messages (seed 002).
    Exchange,
    /// Streaming: `window` sends outstanding, then a short acknowledgement (as osu_bw).
    Bandwidth {
        /// Sends per window.
        window: u32,
    },
    /// Streaming both ways at once: each side has `window` sends and receives outstanding.
    BiBandwidth {
        /// Sends per window and direction.
        window: u32,
    },
}

impl PatternKind {
    /// Name in reports and the result document.
    pub fn name(&self) -> &'static str {
        match self {
            PatternKind::PingPong => "pingpong",
            PatternKind::Exchange => "exchange",
            PatternKind::Bandwidth { .. } => "bandwidth",
            PatternKind::BiBandwidth { .. } => "bibandwidth",
        }
    }

    /// The window actually used for messages of `size` bytes (1 for non-window patterns).
    pub fn effective_window(&self, size: u64) -> u64 {
        match self {
            PatternKind::Bandwidth { window } | PatternKind::BiBandwidth { window } => {
                let cap = (WINDOW_BYTES_MAX / size.max(1)).max(1);
                (*window as u64).clamp(1, cap)
            }
            _ => 1,
        }
    }

    /// Message times in one kernel iteration: a ping-pong and an exchange hold two (there and
    /// back), a window holds `window` (per direction).
    pub fn trips_per_iteration(&self, size: u64) -> u64 {
        match self {
            PatternKind::PingPong | PatternKind::Exchange => 2,
            _ => self.effective_window(size),
        }
    }
}

/// The kernel of one rank in a pattern: its role and its buffers.
#[derive(Debug)]
pub struct Pattern {
    kind: PatternKind,
    src: u32,
    dst: u32,
    me: u32,
    buf: Vec<u8>,
    buf2: Vec<u8>,
    hs: Vec<u8>,
    window: Vec<Vec<u8>>,
    rwindow: Vec<Vec<u8>>,
    reqs: Vec<ReqId>,
    done: Vec<Completion>,
}

impl Pattern {
    /// The kernel of rank `me` for messages of `len` bytes from `src` to `dst`.
    fn with_len(kind: PatternKind, src: u32, dst: u32, me: u32, len: usize) -> Self {
        let participant = me == src || me == dst;
        let w = if participant {
            kind.effective_window(len as u64) as usize
        } else {
            0
        };
        let (nwin, nrwin) = match kind {
            PatternKind::Bandwidth { .. } => {
                if me == src {
                    (w, 0)
                } else {
                    (0, w)
                }
            }
            PatternKind::BiBandwidth { .. } => (w, w),
            _ => (0, 0),
        };
        let needs2 = matches!(kind, PatternKind::Exchange) && participant;
        Pattern {
            kind,
            src,
            dst,
            me,
            buf: if participant && nwin + nrwin == 0 {
                vec![0u8; len]
            } else {
                Vec::new()
            },
            buf2: if needs2 { vec![0u8; len] } else { Vec::new() },
            hs: vec![0u8; 8],
            window: (0..nwin).map(|_| vec![0u8; len]).collect(),
            rwindow: (0..nrwin).map(|_| vec![0u8; len]).collect(),
            reqs: Vec::with_capacity(2 * w + 2),
            done: Vec::with_capacity(2 * w + 2),
        }
    }

    fn peer(&self) -> u32 {
        if self.me == self.src {
            self.dst
        } else {
            self.src
        }
    }

    /// One iteration of the kernel on this rank (nothing on non-participants).
    #[inline]
    fn step<E: Endpoint>(&mut self, ep: &mut E) -> Result<()> {
        let (me, src, dst) = (self.me, self.src, self.dst);
        if me != src && me != dst {
            return Ok(());
        }
        let peer = self.peer();
        match self.kind {
            PatternKind::PingPong => {
                let b = std::mem::take(&mut self.buf);
                self.buf = if me == src {
                    let b = ep.send(dst, TAG_PINGPONG, b)?;
                    ep.recv(Src::Rank(dst), TagSel::Tag(TAG_PINGPONG), b)?.buf
                } else {
                    let b = ep.recv(Src::Rank(src), TagSel::Tag(TAG_PINGPONG), b)?.buf;
                    ep.send(src, TAG_PINGPONG, b)?
                };
            }
            PatternKind::Exchange => {
                // Both send at once, then each returns what it received.
                for _ in 0..2 {
                    let inb = std::mem::take(&mut self.buf2);
                    let outb = std::mem::take(&mut self.buf);
                    let r = ep.irecv(Src::Rank(peer), TagSel::Tag(TAG_PINGPONG), inb)?;
                    let s = ep.isend(peer, TAG_PINGPONG, outb)?;
                    let got = ep.wait(r)?;
                    let sent = ep.wait(s)?;
                    // What arrived goes back out next; the sent buffer receives next.
                    self.buf = got.buf;
                    self.buf2 = sent.buf;
                }
            }
            PatternKind::Bandwidth { .. } => {
                self.reqs.clear();
                if me == src {
                    for b in self.window.drain(..) {
                        self.reqs.push(ep.isend(dst, TAG_PINGPONG, b)?);
                    }
                    ep.wait_all(&self.reqs, &mut self.done)?;
                    self.window.extend(self.done.drain(..).map(|c| c.buf));
                    let hs = std::mem::take(&mut self.hs);
                    self.hs = ep.recv(Src::Rank(dst), TagSel::Tag(TAG_ACK), hs)?.buf;
                } else {
                    for b in self.rwindow.drain(..) {
                        self.reqs
                            .push(ep.irecv(Src::Rank(src), TagSel::Tag(TAG_PINGPONG), b)?);
                    }
                    ep.wait_all(&self.reqs, &mut self.done)?;
                    self.rwindow.extend(self.done.drain(..).map(|c| c.buf));
                    let hs = std::mem::take(&mut self.hs);
                    self.hs = ep.send(src, TAG_ACK, hs)?;
                }
            }
            PatternKind::BiBandwidth { .. } => {
                self.reqs.clear();
                let nr = self.rwindow.len();
                for b in self.rwindow.drain(..) {
                    self.reqs
                        .push(ep.irecv(Src::Rank(peer), TagSel::Tag(TAG_PINGPONG), b)?);
                }
                for b in self.window.drain(..) {
                    self.reqs.push(ep.isend(peer, TAG_PINGPONG, b)?);
                }
                ep.wait_all(&self.reqs, &mut self.done)?;
                for (i, c) in self.done.drain(..).enumerate() {
                    if i < nr {
                        self.rwindow.push(c.buf);
                    } else {
                        self.window.push(c.buf);
                    }
                }
            }
        }
        Ok(())
    }
}

impl<E: Endpoint> Kernel<E> for Pattern {
    fn name(&self) -> &'static str {
        self.kind.name()
    }

    fn prepare(&mut self, size: u64) -> Result<()> {
        let len = usize::try_from(size)
            .map_err(|_| Error::Config(format!("size {size} does not fit in memory")))?;
        *self = Pattern::with_len(self.kind, self.src, self.dst, self.me, len);
        Ok(())
    }

    fn trips(&self, size: u64) -> u64 {
        self.kind.trips_per_iteration(size)
    }

    #[inline]
    fn iteration(&mut self, ep: &mut E) -> Result<()> {
        self.step(ep)
    }
}

impl KernelSpec for PatternKind {
    type Kernel<E: Endpoint> = Pattern;

    fn kernel<E: Endpoint>(&self, me: Rank, cfg: &MethodConfig) -> Result<Pattern> {
        Ok(Pattern::with_len(*self, cfg.source, cfg.dest, me, 0))
    }
}
