//! The patterns the engine times ([`PatternKind`]): the COMMS1 ping-pong and COMMS2 exchange
//! of seed 002, and windowed streaming as osu_bw and osu_bibw do (`window` sends outstanding,
//! then a short acknowledgement), in one direction or both. Each is a [`Kernel`] of
//! [`crate::method::engine`]; a ping-pong and an exchange hold two message times per
//! iteration (there and back), a window holds `window` (per direction).

use crate::method::alloc::try_with_capacity;
use crate::method::benchmark::Benchmark;
use crate::method::buffers::{self, BufferOptions, BufferReuse, Mismatch};
use crate::method::engine::{Kernel, KernelSpec};
use crate::method::limits::{self, PER_MESSAGE_OVERHEAD};
use crate::method::pairs::{SweepAt, TrialRole};
use crate::method::units::human_bytes;
use crate::method::{Invalid, MethodConfig, Setting};
use crate::transport::error::{Error, Result};
use crate::transport::{Endpoint, Rank, ReqId, Role, Span, Src, Tag, TagSel};
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

    /// Messages of `size` bytes that one measuring rank holds a buffer for: 1 for a ping-pong,
    /// 2 for an exchange, the window (both ways: twice the window) for streaming.
    pub fn buffers_per_rank(&self, size: u64) -> u64 {
        match self {
            PatternKind::PingPong => 1,
            PatternKind::Exchange => 2,
            PatternKind::Bandwidth { .. } => self.effective_window(size),
            PatternKind::BiBandwidth { .. } => 2 * self.effective_window(size),
        }
    }

    /// The pattern's own setting: a window of at least one and at most
    /// [`limits::MAX_WINDOW`] sends.
    pub fn check(&self) -> std::result::Result<(), Invalid> {
        let (PatternKind::Bandwidth { window } | PatternKind::BiBandwidth { window }) = *self
        else {
            return Ok(());
        };
        let reason = if window == 0 {
            "a window needs at least one send".to_string()
        } else if window > limits::MAX_WINDOW {
            format!(
                "{window} sends outstanding: at most {} (each holds a buffer, a request and a \
                 completion in the transport; osu_bw uses 64)",
                limits::MAX_WINDOW
            )
        } else {
            return Ok(());
        };
        Err(Invalid {
            setting: Setting::Window,
            reason,
            hint: None,
        })
    }
}

/// The pattern kernels (and all-pairs' ping-pong) fill and place their own messages.
impl Benchmark for PatternKind {
    fn command(&self) -> &'static str {
        self.name()
    }

    fn trips(&self, size: u64) -> u64 {
        self.trips_per_iteration(size)
    }

    /// Its buffers and their bookkeeping: a streaming window's single buffers are one per
    /// direction (one a side for `bandwidth`, two for `bibandwidth`) instead of one per
    /// outstanding message, and a placed message has up to `align - 1` bytes in front of it.
    fn buffer_bytes(&self, cfg: &MethodConfig, size: u64) -> Option<u64> {
        let opts = &cfg.buffers;
        let count = match (opts.buffers, self) {
            (BufferReuse::Single, PatternKind::Bandwidth { .. }) => 1,
            (BufferReuse::Single, PatternKind::BiBandwidth { .. }) => 2,
            _ => self.buffers_per_rank(size),
        };
        let front = opts.placement().map_or(0, |(align, _)| align - 1);
        count.checked_mul(size.checked_add(front)?.checked_add(PER_MESSAGE_OVERHEAD)?)
    }

    fn check(&self) -> std::result::Result<(), Invalid> {
        PatternKind::check(self)
    }

    fn places_messages(&self) -> bool {
        true
    }

    fn streams(&self) -> bool {
        matches!(
            self,
            PatternKind::Bandwidth { .. } | PatternKind::BiBandwidth { .. }
        )
    }

    fn recorded_pattern(&self) -> PatternKind {
        *self
    }
}

/// One message buffer and where its message lies in it ([`buffers::place`]).
#[derive(Debug, Default)]
struct Msg {
    buf: Vec<u8>,
    span: Span,
}

impl Msg {
    fn bytes(&self) -> &[u8] {
        &self.buf[self.span.start..self.span.start + self.span.len]
    }

    fn bytes_mut(&mut self) -> &mut [u8] {
        &mut self.buf[self.span.start..self.span.start + self.span.len]
    }
}

/// The kernel of one rank in a pattern: its role and its buffers.
#[derive(Debug)]
pub struct Pattern {
    kind: PatternKind,
    src: u32,
    dst: u32,
    me: u32,
    opts: BufferOptions,
    /// Messages a window posts on each of its buffers: the window with single buffers, else 1.
    count: u32,
    buf: Msg,
    buf2: Msg,
    hs: Vec<u8>,
    window: Vec<Msg>,
    rwindow: Vec<Msg>,
    reqs: Vec<ReqId>,
    /// Where its points lie in a sweep of windows and pairs ([`Pattern::in_sweep`]).
    at: Option<SweepAt>,
}

impl Pattern {
    /// The kernel of rank `me` for messages of `len` bytes from `src` to `dst`, its buffers
    /// placed and counted as `opts` asks and allocated fallibly: an error names the buffers
    /// and the memory they need.
    fn with_len(
        kind: PatternKind,
        (src, dst, me): (u32, u32, u32),
        len: u64,
        opts: &BufferOptions,
    ) -> Result<Self> {
        let participant = me == src || me == dst;
        let w = if participant {
            kind.effective_window(len)
        } else {
            0
        };
        // Single buffers: one per direction, posted `w` times.
        let (per, count) = match opts.buffers {
            BufferReuse::Single => (w.min(1), w.max(1) as u32),
            BufferReuse::Multiple => (w, 1),
        };
        let (nwin, nrwin) = match kind {
            PatternKind::Bandwidth { .. } if me == src => (per, 0),
            PatternKind::Bandwidth { .. } => (0, per),
            PatternKind::BiBandwidth { .. } => (per, per),
            _ => (0, 0),
        };
        let needs2 = matches!(kind, PatternKind::Exchange) && participant;
        let nbuf = u64::from(participant && nwin + nrwin == 0);
        let total = nbuf + u64::from(needs2) + nwin + nrwin;
        let what = || buffers_what(kind, len, total);
        let placement = opts.placement();
        let one = |n: u64| -> Result<Msg> {
            if n == 0 {
                return Ok(Msg::default());
            }
            let (buf, span) = buffers::place(len, placement, what)?;
            Ok(Msg { buf, span })
        };
        let many = |n: u64| -> Result<Vec<Msg>> {
            let mut v = try_with_capacity(n, || format!("the list of {n} window buffers"))?;
            for _ in 0..n {
                v.push(one(1)?);
            }
            Ok(v)
        };
        let slots = w.saturating_mul(2).saturating_add(2);
        Ok(Pattern {
            kind,
            src,
            dst,
            me,
            opts: opts.clone(),
            count,
            buf: one(nbuf)?,
            buf2: one(u64::from(needs2))?,
            hs: vec![0u8; 8],
            window: many(nwin)?,
            rwindow: many(nrwin)?,
            reqs: try_with_capacity(slots, || format!("{slots} request slots"))?,
            at: None,
        })
    }

    /// The same kernel, its points recorded at `at` of a sweep of windows and pairs.
    pub fn in_sweep(mut self, at: SweepAt) -> Self {
        self.at = Some(at);
        self
    }

    fn peer(&self) -> u32 {
        if self.me == self.src {
            self.dst
        } else {
            self.src
        }
    }

    /// The window's span of `m`: its message, posted [`Pattern::count`] times.
    fn counted(&self, m: &Msg) -> Span {
        Span {
            count: self.count,
            ..m.span
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
                let role = if me == src {
                    Role::Initiator
                } else {
                    Role::Echo
                };
                let span = self.buf.span;
                ep.pingpong_span(peer, TAG_PINGPONG, &mut self.buf.buf, span, 1, role)?;
            }
            PatternKind::Exchange => {
                // Both send at once, then each returns what it received.
                for _ in 0..2 {
                    let inb = std::mem::take(&mut self.buf2);
                    let outb = std::mem::take(&mut self.buf);
                    let r = ep.irecv_span(
                        Src::Rank(peer),
                        TagSel::Tag(TAG_PINGPONG),
                        inb.buf,
                        inb.span,
                    )?;
                    let s = ep.isend_span(peer, TAG_PINGPONG, outb.buf, outb.span)?;
                    let got = ep.wait(r)?;
                    let sent = ep.wait(s)?;
                    // What arrived goes back out next; the sent buffer receives next.
                    self.buf = Msg {
                        buf: got.buf,
                        span: inb.span,
                    };
                    self.buf2 = Msg {
                        buf: sent.buf,
                        span: outb.span,
                    };
                }
            }
            PatternKind::Bandwidth { .. } => self.stream(ep, me == src)?,
            PatternKind::BiBandwidth { .. } => self.bistream(ep, peer)?,
        }
        Ok(())
    }

    /// One window one way: the source posts its sends and waits for the acknowledgement, the
    /// destination posts its receives and acknowledges them.
    #[inline]
    fn stream<E: Endpoint>(&mut self, ep: &mut E, sends: bool) -> Result<()> {
        let (src, dst) = (self.src, self.dst);
        self.reqs.clear();
        let hs = std::mem::take(&mut self.hs);
        if sends {
            for i in 0..self.window.len() {
                let span = self.counted(&self.window[i]);
                let b = std::mem::take(&mut self.window[i].buf);
                self.reqs.push(ep.isend_span(dst, TAG_PINGPONG, b, span)?);
            }
            for (i, &r) in self.reqs.iter().enumerate() {
                self.window[i].buf = ep.wait(r)?.buf;
            }
            self.hs = ep.recv(Src::Rank(dst), TagSel::Tag(TAG_ACK), hs)?.buf;
        } else {
            for i in 0..self.rwindow.len() {
                let span = self.counted(&self.rwindow[i]);
                let b = std::mem::take(&mut self.rwindow[i].buf);
                let sel = TagSel::Tag(TAG_PINGPONG);
                self.reqs.push(ep.irecv_span(Src::Rank(src), sel, b, span)?);
            }
            for (i, &r) in self.reqs.iter().enumerate() {
                self.rwindow[i].buf = ep.wait(r)?.buf;
            }
            self.hs = ep.send(src, TAG_ACK, hs)?;
        }
        Ok(())
    }

    /// One window both ways: the receives posted first, then the sends.
    #[inline]
    fn bistream<E: Endpoint>(&mut self, ep: &mut E, peer: u32) -> Result<()> {
        self.reqs.clear();
        let nr = self.rwindow.len();
        for i in 0..nr {
            let span = self.counted(&self.rwindow[i]);
            let b = std::mem::take(&mut self.rwindow[i].buf);
            let sel = TagSel::Tag(TAG_PINGPONG);
            self.reqs
                .push(ep.irecv_span(Src::Rank(peer), sel, b, span)?);
        }
        for i in 0..self.window.len() {
            let span = self.counted(&self.window[i]);
            let b = std::mem::take(&mut self.window[i].buf);
            self.reqs.push(ep.isend_span(peer, TAG_PINGPONG, b, span)?);
        }
        // The receives were posted first: their buffers go back to the receive window.
        for (i, &r) in self.reqs.iter().enumerate() {
            let b = ep.wait(r)?.buf;
            if i < nr {
                self.rwindow[i].buf = b;
            } else {
                self.window[i - nr].buf = b;
            }
        }
        Ok(())
    }

    /// The buffers this rank sends from and receives into, each with the rank whose pattern it
    /// holds after a trial and its place in the iteration: what [`Kernel::fill_messages`]
    /// fills and [`Kernel::check_messages`] checks.
    fn roles(&mut self) -> Vec<(&mut Msg, Rank, u64, bool)> {
        let (me, peer) = (self.me, self.peer());
        let sending = self.me == self.src;
        match self.kind {
            // A ping-pong returns the source's message: both ends hold it after a trial.
            PatternKind::PingPong => vec![(&mut self.buf, self.src, 0, sending)],
            // An exchange returns each rank's message: `buf` holds this rank's own back,
            // `buf2` the peer's.
            PatternKind::Exchange => vec![
                (&mut self.buf, me, 0, true),
                (&mut self.buf2, peer, 0, false),
            ],
            PatternKind::Bandwidth { .. } | PatternKind::BiBandwidth { .. } => {
                let mut v = Vec::new();
                for (j, m) in self.window.iter_mut().enumerate() {
                    v.push((m, me, j as u64, true));
                }
                for (j, m) in self.rwindow.iter_mut().enumerate() {
                    v.push((m, peer, j as u64, false));
                }
                v
            }
        }
    }
}

/// How an allocation failure names a pattern's buffers.
fn buffers_what(kind: PatternKind, len: u64, count: u64) -> String {
    let total = count
        .checked_mul(len)
        .map(human_bytes)
        .unwrap_or_else(|| "more than 16 EiB".into());
    format!(
        "a message buffer for {} messages of {} (this rank holds {count}, {total} in all)",
        kind.name(),
        if len < 1024 {
            format!("{len} B")
        } else {
            format!("{len} B = {}", human_bytes(len))
        }
    )
}

impl<E: Endpoint> Kernel<E> for Pattern {
    fn name(&self) -> &'static str {
        self.kind.name()
    }

    fn prepare(&mut self, size: u64) -> Result<()> {
        // The buffers of the last size go first, so that the peak is one size's buffers.
        let (kind, ranks, opts) = (self.kind, (self.src, self.dst, self.me), self.opts.clone());
        let at = self.at;
        *self = Pattern::with_len(kind, ranks, 0, &opts)?;
        *self = Pattern::with_len(kind, ranks, size, &opts)?;
        self.at = at;
        Ok(())
    }

    fn trips(&self, size: u64) -> u64 {
        self.kind.trips_per_iteration(size)
    }

    fn sweep_at(&self) -> Option<SweepAt> {
        self.at
    }

    #[inline]
    fn iteration(&mut self, ep: &mut E) -> Result<()> {
        self.step(ep)
    }

    /// A ping-pong hands its whole loop to the endpoint ([`Endpoint::pingpong_span`], native
    /// on MPI); the other patterns run their iteration `n` times.
    fn iterations(&mut self, ep: &mut E, n: u64) -> Result<()> {
        let (me, src, dst) = (self.me, self.src, self.dst);
        if me != src && me != dst {
            return Ok(());
        }
        if self.kind == PatternKind::PingPong {
            let (peer, role) = if me == src {
                (dst, Role::Initiator)
            } else {
                (src, Role::Echo)
            };
            let span = self.buf.span;
            return ep.pingpong_span(peer, TAG_PINGPONG, &mut self.buf.buf, span, n, role);
        }
        for _ in 0..n {
            self.step(ep)?;
        }
        Ok(())
    }

    fn validates_messages(&self) -> bool {
        true
    }

    /// The buffers this rank sends from get the pattern of their sender and place; those it
    /// receives into get a pattern no message carries (rank `u32::MAX`), so that one that
    /// never arrives is found.
    fn fill_messages(&mut self, base: u64) {
        for (m, from, j, sent) in self.roles() {
            let who = if sent { from } else { Rank::MAX };
            buffers::fill(m.bytes_mut(), buffers::seed(base, who, j));
        }
    }

    fn check_messages(&mut self, base: u64) -> Option<Mismatch> {
        let me = self.me;
        // A ping-pong and an exchange return what arrived, so what a rank sent is back in its
        // buffer after a trial; what a stream's source sent never comes back.
        let returned = matches!(self.kind, PatternKind::PingPong | PatternKind::Exchange);
        for (m, from, j, sent) in self.roles() {
            let delivered = !sent || returned;
            if !delivered {
                continue;
            }
            if let Some((offset, expected, got)) =
                buffers::first_mismatch(m.bytes(), buffers::seed(base, from, j))
            {
                return Some(Mismatch {
                    rank: me,
                    from,
                    message: j,
                    offset,
                    expected,
                    got,
                    trial: 0,
                    phase: 0,
                });
            }
        }
        None
    }

    fn message_alignment(&self) -> Option<u64> {
        let all = [&self.buf, &self.buf2]
            .into_iter()
            .chain(&self.window)
            .chain(&self.rwindow);
        all.filter(|m| !m.buf.is_empty())
            .map(|m| buffers::address_alignment(&m.buf, m.span))
            .min()
    }
}

impl KernelSpec for PatternKind {
    type Kernel<E: Endpoint> = Pattern;

    fn kernel<E: Endpoint>(&self, me: Rank, cfg: &MethodConfig) -> Result<Pattern> {
        self.check().map_err(|e| Error::Config(e.reason))?;
        // With pairs streaming at once each rank runs its own pair's pattern.
        let (src, dst) = match cfg.role(me) {
            TrialRole::Timer { peer } => (me, peer),
            TrialRole::Partner { peer } => (peer, me),
            TrialRole::Idle => (cfg.source, cfg.dest),
        };
        Pattern::with_len(*self, (src, dst, me), 0, &cfg.buffers)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_are_bounded() {
        assert!(PatternKind::PingPong.check().is_ok());
        assert!(PatternKind::Bandwidth { window: 64 }.check().is_ok());
        let e = PatternKind::Bandwidth { window: 0 }.check().unwrap_err();
        assert_eq!(e.setting, Setting::Window);
        let e = PatternKind::BiBandwidth {
            window: 1_000_000_000,
        }
        .check()
        .unwrap_err();
        assert_eq!(e.setting, Setting::Window);
        assert!(e
            .reason
            .contains("1000000000 sends outstanding: at most 65536"));
    }

    #[test]
    fn buffers_follow_the_pattern() {
        let o = PER_MESSAGE_OVERHEAD;
        let cfg = MethodConfig::default();
        let bytes = |k: PatternKind, size: u64| Benchmark::buffer_bytes(&k, &cfg, size);
        assert_eq!(bytes(PatternKind::PingPong, 1000), Some(1000 + o));
        assert_eq!(bytes(PatternKind::Exchange, 1000), Some(2 * (1000 + o)));
        let bw = PatternKind::Bandwidth { window: 64 };
        assert_eq!(bytes(bw, 1024), Some(64 * (1024 + o)));
        // The window shrinks to keep 64 MiB of buffers.
        assert_eq!(bytes(bw, 4 << 20), Some(16 * ((4 << 20) + o)));
        let bi = PatternKind::BiBandwidth { window: 64 };
        assert_eq!(bytes(bi, 1 << 30), Some(2 * ((1 << 30) + o)));
        assert_eq!(bytes(PatternKind::PingPong, u64::MAX), None);
        assert!(Benchmark::streams(&bi) && !Benchmark::streams(&PatternKind::Exchange));
    }

    #[test]
    fn single_buffers_count_one_a_direction_and_placement_its_room_in_front() {
        let o = PER_MESSAGE_OVERHEAD;
        let pattern_buffer_bytes = |k: PatternKind, size: u64, opts: &BufferOptions| {
            let cfg = MethodConfig {
                buffers: opts.clone(),
                ..MethodConfig::default()
            };
            Benchmark::buffer_bytes(&k, &cfg, size)
        };
        let single = BufferOptions {
            buffers: BufferReuse::Single,
            ..Default::default()
        };
        let multiple = BufferOptions::default();
        let bw = PatternKind::Bandwidth { window: 64 };
        let bibw = PatternKind::BiBandwidth { window: 64 };
        assert_eq!(
            pattern_buffer_bytes(bw, 1000, &multiple),
            Some(64 * (1000 + o))
        );
        assert_eq!(pattern_buffer_bytes(bw, 1000, &single), Some(1000 + o));
        assert_eq!(
            pattern_buffer_bytes(bibw, 1000, &single),
            Some(2 * (1000 + o))
        );
        assert_eq!(
            pattern_buffer_bytes(bibw, 1000, &multiple),
            Some(128 * (1000 + o))
        );
        // A window capped by its bytes keeps its cap with multiple buffers.
        let big = 8 << 20;
        assert_eq!(
            pattern_buffer_bytes(bw, big, &multiple),
            Some(bw.effective_window(big) * (big + o))
        );
        let placed = BufferOptions {
            align: Some(4096),
            offset: 3,
            ..Default::default()
        };
        assert_eq!(
            pattern_buffer_bytes(PatternKind::Exchange, 10, &placed),
            Some(2 * (10 + 4095 + o))
        );
        assert_eq!(pattern_buffer_bytes(bw, u64::MAX, &placed), None);
    }

    #[test]
    fn buffers_beyond_memory_are_an_error_naming_them() {
        let opts = BufferOptions::default();
        let p = Pattern::with_len(PatternKind::PingPong, (0, 1, 1), 4096, &opts).unwrap();
        assert_eq!(p.buf.buf.len(), 4096);
        for size in [u64::MAX, 1 << 62] {
            let e = Pattern::with_len(PatternKind::Exchange, (0, 1, 0), size, &opts)
                .unwrap_err()
                .to_string();
            assert!(e.starts_with("cannot allocate"), "{e}");
            assert!(e.contains("exchange messages of"), "{e}");
            assert!(e.contains("this rank holds 2"), "{e}");
            assert!(e.ends_with("out of memory"), "{e}");
        }
        // A rank that does not measure holds nothing.
        let idle = Pattern::with_len(PatternKind::PingPong, (0, 1, 2), u64::MAX, &opts).unwrap();
        assert!(idle.buf.buf.is_empty());
    }
}
