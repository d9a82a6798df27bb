//! The conformance suite every backend runs against itself.
//!
//! A backend's tests implement [`Harness`] (start `n` ranks however the backend does: threads,
//! processes, simulated nodes) and call [`run_suite`]. Each check is a [`Program`] run on 2, 3
//! and 4 ranks; a violated expectation is an error naming the check, the rank and what differed.

use crate::transport::error::{Error, Result};
use crate::transport::{Endpoint, OpKind, Program, Rank, Role, Span, Src, TagSel, TAG_CLOSING};

/// Starts `n` ranks of a backend and runs a program on each.
pub trait Harness {
    /// Run `p` on ranks `0..n`; every rank's output in rank order, or the first error.
    fn run<P: Program>(&self, n: u32, p: &P) -> Result<Vec<P::Output>>;

    /// Whether a truncated receive reports the length of the message ([`Error::Truncated`]
    /// with `len` above `cap`); a transport that cannot tell reports `len` 0.
    fn truncated_length_known(&self) -> bool {
        true
    }
}

/// The variable that picks how much of the tests run: unset, empty or `ci` for counts sized
/// for CI, `full` for the full ones (docs/testing.md).
pub const SCALE_VAR: &str = "COMMBENCH_TEST_SCALE";

/// Whether [`SCALE_VAR`] asks for the full counts. Any other value than those it takes is a
/// mistake worth a failure rather than a silently shorter run.
pub fn full_scale() -> bool {
    match std::env::var(SCALE_VAR) {
        Err(std::env::VarError::NotPresent) => false,
        Ok(v) if v.is_empty() || v == "ci" => false,
        Ok(v) if v == "full" => true,
        Ok(v) => panic!("{SCALE_VAR}={v:?}: expected `ci` or `full`"),
        Err(e) => panic!("{SCALE_VAR}: {e}"),
    }
}

/// The names of the checks, in the order [`run_suite`] runs them.
pub const CHECKS: &[&str] = &[
    "ordering",
    "sizes",
    "tags_and_wildcards",
    "many_in_flight",
    "truncation",
    "control_plane",
    "invalid_arguments",
    "pingpong_loop",
    "spans",
    "validation",
];

/// Run every check on 2, 3 and 4 ranks (and the sizes check up to `max_size` bytes).
pub fn run_suite<H: Harness>(h: &H, max_size: usize) -> Result<()> {
    for n in 2..=4 {
        for name in CHECKS {
            run_check(h, name, n, max_size)
                .map_err(|e| e.in_phase(format!("conformance check `{name}` on {n} ranks")))?;
        }
    }
    Ok(())
}

/// Run one named check on `n` ranks.
pub fn run_check<H: Harness>(h: &H, name: &str, n: u32, max_size: usize) -> Result<()> {
    match name {
        "ordering" => h.run(n, &Ordering).map(drop),
        "sizes" => h.run(n, &Sizes { max: max_size }).map(drop),
        "tags_and_wildcards" => h.run(n, &TagsAndWildcards).map(drop),
        "many_in_flight" => h.run(n, &ManyInFlight).map(drop),
        "truncation" => h
            .run(
                n,
                &Truncation {
                    length_known: h.truncated_length_known(),
                },
            )
            .map(drop),
        "control_plane" => h.run(n, &ControlPlane).map(drop),
        "invalid_arguments" => h.run(n, &InvalidArguments).map(drop),
        "pingpong_loop" => h
            .run(
                n,
                &PingPongLoop {
                    length_known: h.truncated_length_known(),
                },
            )
            .map(drop),
        "spans" => h.run(n, &Spans).map(drop),
        "validation" => validation(h, n, 3, 0x7a11_da7a),
        other => Err(Error::Invalid(format!(
            "no conformance check named `{other}`"
        ))),
    }
}

fn fail(check: &str, rank: Rank, what: String) -> Error {
    Error::Backend {
        backend: "conformance",
        message: format!("{check}: rank {rank}: {what}"),
    }
}

/// `Ok` when `e` says a 16-byte message met an 8-byte receive buffer (a message of unknown
/// length, `len` 0, where the transport cannot tell), else the failure of `check` on rank
/// `me`.
fn expect_truncated(check: &str, me: Rank, e: &Error, length_known: bool) -> Result<()> {
    match e.root() {
        Error::Truncated {
            len: 16, cap: 8, ..
        } => Ok(()),
        Error::Truncated { len: 0, cap: 8, .. } if !length_known => Ok(()),
        _ => Err(fail(check, me, format!("wrong error {e}"))),
    }
}

fn pattern(len: usize, seed: u32) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u32).wrapping_mul(2_654_435_761).wrapping_add(seed) as u8 ^ (i >> 8) as u8)
        .collect()
}

/// Messages from one sender arrive in the order sent, with specific and wildcard receives.
#[derive(Debug)]
pub struct Ordering;

impl Program for Ordering {
    type Output = ();
    fn run<E: Endpoint>(&self, ep: &mut E) -> Result<()> {
        const N: u32 = 200;
        let me = ep.rank();
        if me == 0 {
            for r in 1..ep.size() {
                for i in 0..N {
                    ep.send(r, 11, i.to_le_bytes().to_vec())?;
                }
            }
        } else {
            let mut buf = vec![0u8; 4];
            for i in 0..N {
                // Alternate specific and wildcard receives: order must hold for both.
                let src = if i % 2 == 0 { Src::Rank(0) } else { Src::Any };
                let c = ep.recv(src, TagSel::Any, buf)?;
                let got = u32::from_le_bytes([c.buf[0], c.buf[1], c.buf[2], c.buf[3]]);
                if got != i || c.peer != 0 || c.tag != 11 || c.len != 4 {
                    return Err(fail(
                        "ordering",
                        me,
                        format!(
                            "expected message {i} from 0 tag 11, got {got} from {} tag {}",
                            c.peer, c.tag
                        ),
                    ));
                }
                buf = c.buf;
            }
        }
        ep.barrier()
    }
}

/// Zero-length, small, odd and large messages arrive intact.
#[derive(Debug)]
pub struct Sizes {
    /// Largest size to try.
    pub max: usize,
}

impl Program for Sizes {
    type Output = ();
    fn run<E: Endpoint>(&self, ep: &mut E) -> Result<()> {
        let me = ep.rank();
        let mut sizes = vec![0usize, 1, 7, 8, 63, 64, 65, 4095, 4096, 65_537, 1 << 20];
        sizes.push(self.max);
        sizes.push(self.max.saturating_sub(3));
        sizes.retain(|&s| s <= self.max);
        for &s in &sizes {
            for peer in 1..ep.size() {
                if me == 0 {
                    let data = pattern(s, peer + s as u32);
                    ep.send(peer, 3, data)?;
                    let c = ep.recv(Src::Rank(peer), TagSel::Tag(4), vec![0; s + 16])?;
                    if c.len != s || c.buf[..s] != pattern(s, peer * 7 + s as u32)[..] {
                        return Err(fail(
                            "sizes",
                            me,
                            format!("echo of {s} bytes from {peer} differs"),
                        ));
                    }
                } else if me == peer {
                    let c = ep.recv(Src::Rank(0), TagSel::Tag(3), vec![0; s])?;
                    if c.len != s || c.buf[..] != pattern(s, peer + s as u32)[..] {
                        return Err(fail("sizes", me, format!("{s}-byte message differs")));
                    }
                    ep.send(0, 4, pattern(s, peer * 7 + s as u32))?;
                }
            }
        }
        ep.barrier()
    }
}

/// Receives select by tag (out of order, via the unexpected queue) and by wildcard source.
#[derive(Debug)]
pub struct TagsAndWildcards;

impl Program for TagsAndWildcards {
    type Output = ();
    fn run<E: Endpoint>(&self, ep: &mut E) -> Result<()> {
        let me = ep.rank();
        let n = ep.size();
        if me == 1 {
            for tag in [3u32, 2, 1] {
                ep.send(0, tag, vec![tag as u8; tag as usize])?;
            }
        }
        if me == 0 {
            for tag in [1u32, 2, 3] {
                let c = ep.recv(Src::Rank(1), TagSel::Tag(tag), vec![0; 8])?;
                if c.tag != tag || c.len != tag as usize || c.buf[0] != tag as u8 {
                    return Err(fail(
                        "tags",
                        me,
                        format!("receive of tag {tag} got tag {} len {}", c.tag, c.len),
                    ));
                }
            }
        }
        ep.barrier()?;
        // Every other rank sends one message with its rank as tag; rank 0 takes them with
        // wildcard source and tag and must see each sender exactly once.
        if me != 0 {
            ep.send(0, 100 + me, me.to_le_bytes().to_vec())?;
        } else {
            let mut seen = vec![false; n as usize];
            let mut buf = vec![0; 4];
            for _ in 1..n {
                let c = ep.recv(Src::Any, TagSel::Any, buf)?;
                let from = u32::from_le_bytes([c.buf[0], c.buf[1], c.buf[2], c.buf[3]]);
                if from != c.peer || c.tag != 100 + from || seen[from as usize] {
                    return Err(fail(
                        "wildcards",
                        me,
                        format!(
                            "bad wildcard match: peer {} tag {} payload {from}",
                            c.peer, c.tag
                        ),
                    ));
                }
                seen[from as usize] = true;
                buf = c.buf;
            }
        }
        ep.barrier()
    }
}

/// Many receives and sends outstanding at once between every pair.
#[derive(Debug)]
pub struct ManyInFlight;

impl Program for ManyInFlight {
    type Output = ();
    fn run<E: Endpoint>(&self, ep: &mut E) -> Result<()> {
        const K: u32 = 64;
        let me = ep.rank();
        let n = ep.size();
        let mut reqs = Vec::new();
        for peer in (0..n).filter(|&p| p != me) {
            for i in 0..K {
                reqs.push(ep.irecv(Src::Rank(peer), TagSel::Tag(i), vec![0; 1100])?);
            }
        }
        for peer in (0..n).filter(|&p| p != me) {
            for i in 0..K {
                reqs.push(ep.isend(peer, i, pattern(1000 + i as usize, me * 1000 + i))?);
            }
        }
        let mut out = Vec::new();
        ep.wait_all(&reqs, &mut out)?;
        for c in &out {
            if c.kind == OpKind::Recv {
                let want = pattern(1000 + c.tag as usize, c.peer * 1000 + c.tag);
                if c.len != want.len() || c.buf[..c.len] != want[..] {
                    return Err(fail(
                        "many_in_flight",
                        me,
                        format!("message tag {} from {} differs", c.tag, c.peer),
                    ));
                }
            }
        }
        if out.len() != reqs.len() {
            return Err(fail("many_in_flight", me, "missing completions".into()));
        }
        ep.barrier()
    }
}

/// A message longer than its receive buffer is an error, and the endpoint stays usable.
#[derive(Debug)]
pub struct Truncation {
    /// Whether the error must give the message's length ([`Harness::truncated_length_known`]).
    pub length_known: bool,
}

impl Program for Truncation {
    type Output = ();
    fn run<E: Endpoint>(&self, ep: &mut E) -> Result<()> {
        let me = ep.rank();
        if me == 1 {
            ep.send(0, 9, vec![1; 16])?;
            ep.send(0, 9, vec![2; 4])?;
        } else if me == 0 {
            match ep.recv(Src::Rank(1), TagSel::Tag(9), vec![0; 8]) {
                Err(e) => expect_truncated("truncation", me, &e, self.length_known)?,
                Ok(c) => return Err(fail("truncation", me, format!("no error, len {}", c.len))),
            }
            let c = ep.recv(Src::Rank(1), TagSel::Tag(9), vec![0; 8])?;
            if c.len != 4 || c.buf[0] != 2 {
                return Err(fail(
                    "truncation",
                    me,
                    "next message lost after truncation".into(),
                ));
            }
        }
        ep.barrier()
    }
}

/// Barrier, broadcast and gather from every root.
#[derive(Debug)]
pub struct ControlPlane;

impl Program for ControlPlane {
    type Output = ();
    fn run<E: Endpoint>(&self, ep: &mut E) -> Result<()> {
        let me = ep.rank();
        let n = ep.size();
        for _ in 0..50 {
            ep.barrier()?;
        }
        // The barrier really waits: rank 0 computes, reads the clock and enters last; every
        // other rank must leave after that reading (one host's monotonic clock, or the
        // simulator's global virtual time, is shared by all ranks).
        ep.barrier()?;
        let mut entered = Vec::new();
        if me == 0 {
            ep.compute(crate::transport::work::Work::int(2_000_000));
            entered = ep.now_ns().to_le_bytes().to_vec();
        }
        ep.barrier()?;
        let left = ep.now_ns();
        ep.broadcast(0, &mut entered)?;
        let entered = u64::from_le_bytes(entered[..8].try_into().unwrap_or([0; 8]));
        if left < entered {
            return Err(fail(
                "barrier",
                me,
                format!("left at {left} ns, before rank 0 entered at {entered} ns"),
            ));
        }
        for root in 0..n {
            let mut data = if me == root {
                pattern(1000 + root as usize, root)
            } else {
                vec![7; 3]
            };
            ep.broadcast(root, &mut data)?;
            if data != pattern(1000 + root as usize, root) {
                return Err(fail("broadcast", me, format!("from root {root} differs")));
            }
            let g = ep.gather(root, &pattern(me as usize * 10, me))?;
            match (me == root, g) {
                (true, Some(all)) => {
                    for (r, d) in all.iter().enumerate() {
                        if *d != pattern(r * 10, r as u32) {
                            return Err(fail("gather", me, format!("part of rank {r} differs")));
                        }
                    }
                }
                (false, None) => {}
                _ => return Err(fail("gather", me, "result on the wrong rank".into())),
            }
        }
        for first in 0..n {
            ep.barrier_first(first)?;
        }
        barriers_among(ep)?;
        ep.barrier()
    }
}

/// The barrier of some ranks ([`crate::transport::control::barrier_among`]) over every
/// subset of the ranks, each in two orders, the others away: each rank takes part in those
/// it is in, and the subset's last rank computes, reads the clock and enters last, which every
/// other must leave after. A rank outside the subset is refused.
fn barriers_among<E: Endpoint>(ep: &mut E) -> Result<()> {
    use crate::transport::control::barrier_among;
    let me = ep.rank();
    let n = ep.size();
    for mask in 1u32..(1 << n) {
        let forward: Vec<Rank> = (0..n).filter(|r| mask & (1 << r) != 0).collect();
        let backward: Vec<Rank> = forward.iter().rev().copied().collect();
        for live in [forward, backward] {
            if !live.contains(&me) {
                if barrier_among(ep, &live).is_ok() {
                    return Err(fail("barrier_among", me, format!("joined {live:?}")));
                }
                continue;
            }
            barrier_among(ep, &live)?;
            let last = live[live.len() - 1];
            let mut entered = Vec::new();
            if me == last {
                ep.compute(crate::transport::work::Work::int(200_000));
                entered = ep.now_ns().to_le_bytes().to_vec();
            }
            barrier_among(ep, &live)?;
            let left = ep.now_ns();
            // Sent after the barrier on its tag: a pair's messages arrive in order, so the
            // reading never meets one of the barrier's receives.
            if me == last {
                for &r in live.iter().filter(|&&r| r != me) {
                    ep.send(r, TAG_CLOSING, entered.clone())?;
                }
            } else {
                entered = ep
                    .recv(Src::Rank(last), TagSel::Tag(TAG_CLOSING), vec![0; 8])?
                    .buf;
            }
            let entered = entered
                .get(..8)
                .and_then(|b| b.try_into().ok())
                .map_or(u64::MAX, u64::from_le_bytes);
            if left < entered {
                return Err(fail(
                    "barrier_among",
                    me,
                    format!(
                        "{live:?}: left at {left} ns, before rank {last} entered at {entered} ns"
                    ),
                ));
            }
        }
    }
    for bad in [vec![me, me], vec![n], Vec::new()] {
        if barrier_among(ep, &bad).is_ok() {
            return Err(fail("barrier_among", me, format!("took {bad:?}")));
        }
    }
    Ok(())
}

/// Bad ranks are errors, not panics.
#[derive(Debug)]
pub struct InvalidArguments;

impl Program for InvalidArguments {
    type Output = ();
    fn run<E: Endpoint>(&self, ep: &mut E) -> Result<()> {
        let me = ep.rank();
        let n = ep.size();
        if ep.isend(n + 5, 0, vec![0; 4]).is_ok() {
            return Err(fail(
                "invalid",
                me,
                "send to a rank out of range was accepted".into(),
            ));
        }
        if ep.irecv(Src::Rank(n), TagSel::Any, vec![0; 4]).is_ok() {
            return Err(fail(
                "invalid",
                me,
                "receive from a rank out of range was accepted".into(),
            ));
        }
        // The ping-pong loop, native or not, checks its peer for either role, and names it.
        let mut b = vec![0; 4];
        for role in [Role::Initiator, Role::Echo] {
            match ep.pingpong(n + 2, 1, &mut b, 3, role) {
                Err(e) if e.to_string().contains(&format!("rank {}", n + 2)) => {}
                other => {
                    return Err(fail(
                        "invalid",
                        me,
                        format!("a {role:?} ping-pong with rank {} gave {other:?}", n + 2),
                    ))
                }
            }
        }
        ep.barrier()
    }
}

/// [`Endpoint::pingpong`], the loop the ping-pong kernel times (native on some backends): the
/// echo receives exactly what the initiator sent and the initiator gets it back, for several
/// sizes, loop lengths and both directions; a message longer than the echo's buffer is
/// [`Error::Truncated`] there, and the endpoint stays usable.
#[derive(Debug)]
pub struct PingPongLoop {
    /// Whether a truncation error must give the message's length.
    pub length_known: bool,
}

impl PingPongLoop {
    /// One loop of `n` round trips of `len` bytes between `initiator` and `echo`.
    fn one<E: Endpoint>(ep: &mut E, initiator: Rank, echo: Rank, len: usize, n: u64) -> Result<()> {
        let me = ep.rank();
        let sent = pattern(len, initiator * 31 + echo + len as u32);
        if me == initiator {
            let mut buf = sent.clone();
            ep.pingpong(echo, 21, &mut buf, n, Role::Initiator)?;
            if buf != sent {
                return Err(fail(
                    "pingpong",
                    me,
                    format!("{n} round trips of {len} bytes with {echo}: the reply differs"),
                ));
            }
        } else if me == echo {
            let mut buf = vec![0xA5; len];
            ep.pingpong(initiator, 21, &mut buf, n, Role::Echo)?;
            if buf != sent {
                return Err(fail(
                    "pingpong",
                    me,
                    format!("{n} round trips of {len} bytes from {initiator}: the message differs"),
                ));
            }
        }
        Ok(())
    }
}

impl Program for PingPongLoop {
    type Output = ();
    fn run<E: Endpoint>(&self, ep: &mut E) -> Result<()> {
        let me = ep.rank();
        let last = ep.size() - 1;
        for (initiator, echo) in [(0, 1), (1, 0), (last, 0)] {
            if initiator == echo {
                continue;
            }
            for len in [0usize, 1, 8, 4097, 1 << 16] {
                for n in [1u64, 7] {
                    Self::one(ep, initiator, echo, len, n)?;
                }
            }
            ep.barrier()?;
        }
        // A message longer than the echo's buffer: an error on the echo, which then answers
        // by hand so that the initiator's loop ends.
        if me == 0 {
            let mut buf = vec![3u8; 16];
            ep.pingpong(1, 22, &mut buf, 1, Role::Initiator)?;
        } else if me == 1 {
            let mut buf = vec![0u8; 8];
            match ep.pingpong(0, 22, &mut buf, 1, Role::Echo) {
                Err(e) => expect_truncated("pingpong", me, &e, self.length_known)?,
                Ok(()) => {
                    return Err(fail(
                        "pingpong",
                        me,
                        "a 16-byte message fitted an 8-byte buffer".into(),
                    ))
                }
            }
            ep.send(0, 22, vec![3u8; 16])?;
        }
        ep.barrier()?;
        Self::one(ep, 0, 1, 8, 3)?;
        ep.barrier()
    }
}

/// Messages placed at an offset in their buffers and one buffer posted several times at once
/// ([`Endpoint::isend_span`], [`Endpoint::irecv_span`], [`Endpoint::pingpong_span`]): the bytes
/// land at the receive's offset and nowhere else, `count` messages use one buffer both ways
/// (matched before a receive posted after them, with the receive posted before the messages
/// arrive and after), and a span that does not fit its buffer is [`Error::Invalid`].
#[derive(Debug)]
pub struct Spans;

impl Spans {
    /// Guard bytes around a received message: whatever lies outside the span must keep them.
    const GUARD: u8 = 0xEE;

    /// Rank 0 sends `count` copies of `len` bytes at offset 5 of one buffer, then one ordinary
    /// message with the same tag; rank `last` receives the copies at offset 13 of one buffer
    /// and the ordinary message after them, its receives posted before the sends when `early`
    /// (a barrier between), after them otherwise.
    fn repeated<E: Endpoint>(ep: &mut E, len: usize, count: u32, early: bool) -> Result<()> {
        let (me, last) = (ep.rank(), ep.size() - 1);
        let data = pattern(len, len as u32 + count);
        let tail = pattern(len + 3, 7);
        let span = |start| Span { start, len, count };
        if me == 0 {
            if early {
                ep.barrier()?;
            }
            let mut buf = vec![1u8; len + 9];
            buf[5..5 + len].copy_from_slice(&data);
            let r = ep.isend_span(last, 31, buf, span(5))?;
            let t = ep.isend(last, 31, tail.clone())?;
            if !early {
                ep.barrier()?;
            }
            let c = ep.wait(r)?;
            if c.kind != OpKind::Send || c.buf.len() != len + 9 || c.buf[5..5 + len] != data[..] {
                return Err(fail(
                    "spans",
                    me,
                    "a repeated send gave back another buffer".into(),
                ));
            }
            ep.wait(t)?;
        } else if me == last {
            if !early {
                ep.barrier()?;
            }
            let r = ep.irecv_span(
                Src::Rank(0),
                TagSel::Tag(31),
                vec![Self::GUARD; len + 20],
                span(13),
            )?;
            let t = ep.irecv(Src::Rank(0), TagSel::Tag(31), vec![0; len + 3])?;
            if early {
                ep.barrier()?;
            }
            let c = ep.wait(r)?;
            let ok = c.kind == OpKind::Recv
                && (c.len, c.peer, c.tag) == (len, 0, 31)
                && c.buf.len() == len + 20
                && c.buf[13..13 + len] == data[..]
                && c.buf[..13]
                    .iter()
                    .chain(&c.buf[13 + len..])
                    .all(|&b| b == Self::GUARD);
            if !ok {
                return Err(fail(
                    "spans",
                    me,
                    format!("{count} messages of {len} bytes into one buffer at offset 13: wrong bytes, length or envelope"),
                ));
            }
            let c = ep.wait(t)?;
            if c.len != len + 3 || c.buf[..c.len] != tail[..] {
                return Err(fail(
                    "spans",
                    me,
                    "the message after a repeated receive differs".into(),
                ));
            }
        } else {
            ep.barrier()?;
        }
        ep.barrier()
    }

    /// A ping-pong of `len` bytes at offset 3 (initiator) and 11 (echo) of larger buffers.
    fn pingpong<E: Endpoint>(ep: &mut E, len: usize) -> Result<()> {
        let me = ep.rank();
        let sent = pattern(len, 99 + len as u32);
        let (start, role, peer) = match me {
            0 => (3, Role::Initiator, 1),
            1 => (11, Role::Echo, 0),
            _ => return Ok(()),
        };
        let mut buf = vec![Self::GUARD; len + 16];
        if me == 0 {
            buf[3..3 + len].copy_from_slice(&sent);
        }
        let span = Span {
            start,
            len,
            count: 1,
        };
        ep.pingpong_span(peer, 23, &mut buf, span, 5, role)?;
        let outside_ok = buf[..start]
            .iter()
            .chain(&buf[start + len..])
            .all(|&b| b == Self::GUARD);
        if buf.len() != len + 16 || buf[start..start + len] != sent[..] || !outside_ok {
            return Err(fail(
                "spans",
                me,
                format!("ping-pong of {len} bytes at offset {start}: the bytes differ"),
            ));
        }
        Ok(())
    }
}

impl Program for Spans {
    type Output = ();
    fn run<E: Endpoint>(&self, ep: &mut E) -> Result<()> {
        let me = ep.rank();
        for len in [0usize, 1, 8, 4099, 1 << 17] {
            for count in [1u32, 2, 16] {
                for early in [true, false] {
                    Self::repeated(ep, len, count, early)?;
                }
            }
            Self::pingpong(ep, len)?;
            ep.barrier()?;
        }
        // A span that does not fit, or posted 0 times, is refused at once.
        let bad = [
            Span {
                start: 5,
                len: 8,
                count: 1,
            },
            Span {
                start: usize::MAX,
                len: 2,
                count: 1,
            },
            Span {
                start: 0,
                len: 4,
                count: 0,
            },
        ];
        for span in bad {
            for send in [true, false] {
                let peer = (me + 1) % ep.size();
                let r = if send {
                    ep.isend_span(peer, 40, vec![0; 12], span)
                } else {
                    ep.irecv_span(Src::Rank(peer), TagSel::Tag(40), vec![0; 12], span)
                };
                if !matches!(r, Err(Error::Invalid(_))) {
                    return Err(fail(
                        "spans",
                        me,
                        format!("{span:?} on a 12-byte buffer was not refused"),
                    ));
                }
            }
        }
        ep.barrier()
    }
}

/// An endpoint that hands back one received message with a byte changed: the fault a
/// validated run ([`crate::method::buffers`]) must catch, on any backend the wrapper is put
/// around ([`WithCorruption`]).
#[derive(Debug)]
pub struct Corrupting<'a, E> {
    inner: &'a mut E,
    fault: Fault,
    seen: u64,
    starts: std::collections::HashMap<crate::transport::ReqId, usize>,
}

/// Where [`Corrupting`] changes a byte: on rank `rank`, in the `nth` receive (from 0) with tag
/// `tag`, at `offset` bytes from the message's first byte (flipping the bits of `mask`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fault {
    /// The rank whose receive is changed.
    pub rank: Rank,
    /// The tag of the receives counted.
    pub tag: crate::transport::Tag,
    /// Which of them, from 0.
    pub nth: u64,
    /// The byte changed, from the message's first byte.
    pub offset: usize,
    /// The bits flipped (not 0).
    pub mask: u8,
}

impl<E: Endpoint> Corrupting<'_, E> {
    fn corrupt(
        &mut self,
        mut c: crate::transport::Completion,
        start: usize,
    ) -> crate::transport::Completion {
        if c.kind == OpKind::Recv && c.tag == self.fault.tag && self.inner.rank() == self.fault.rank
        {
            if self.seen == self.fault.nth {
                if let Some(b) = c.buf.get_mut(start + self.fault.offset) {
                    *b ^= self.fault.mask;
                }
            }
            self.seen += 1;
        }
        c
    }
}

impl<E: Endpoint> Endpoint for Corrupting<'_, E> {
    fn rank(&self) -> Rank {
        self.inner.rank()
    }
    fn size(&self) -> u32 {
        self.inner.size()
    }
    fn backend(&self) -> &'static str {
        self.inner.backend()
    }
    fn timeout(&self) -> std::time::Duration {
        self.inner.timeout()
    }
    fn set_timeout(&mut self, timeout: std::time::Duration) {
        self.inner.set_timeout(timeout)
    }
    fn forget(&mut self, peer: Rank) {
        self.inner.forget(peer)
    }
    fn isend(
        &mut self,
        dest: Rank,
        tag: crate::transport::Tag,
        buf: Vec<u8>,
    ) -> Result<crate::transport::ReqId> {
        self.inner.isend(dest, tag, buf)
    }
    fn irecv(&mut self, src: Src, tag: TagSel, buf: Vec<u8>) -> Result<crate::transport::ReqId> {
        self.inner.irecv(src, tag, buf)
    }
    fn isend_span(
        &mut self,
        dest: Rank,
        tag: crate::transport::Tag,
        buf: Vec<u8>,
        span: Span,
    ) -> Result<crate::transport::ReqId> {
        self.inner.isend_span(dest, tag, buf, span)
    }
    fn irecv_span(
        &mut self,
        src: Src,
        tag: TagSel,
        buf: Vec<u8>,
        span: Span,
    ) -> Result<crate::transport::ReqId> {
        let r = self.inner.irecv_span(src, tag, buf, span)?;
        self.starts.insert(r, span.start);
        Ok(r)
    }
    fn test(
        &mut self,
        req: crate::transport::ReqId,
    ) -> Result<Option<crate::transport::Completion>> {
        match self.inner.test(req)? {
            Some(c) => {
                let start = self.starts.remove(&req).unwrap_or(0);
                Ok(Some(self.corrupt(c, start)))
            }
            None => Ok(None),
        }
    }
    fn now_ns(&mut self) -> u64 {
        self.inner.now_ns()
    }
    fn clock_name(&self) -> String {
        self.inner.clock_name()
    }
    fn claimed_resolution_ns(&self) -> Option<f64> {
        self.inner.claimed_resolution_ns()
    }
    fn models_caches(&self) -> bool {
        self.inner.models_caches()
    }
    fn compute(&mut self, work: crate::transport::work::Work) {
        self.inner.compute(work)
    }
    fn hypercube(&self) -> Option<u32> {
        self.inner.hypercube()
    }
    fn host(&self) -> Option<String> {
        self.inner.host()
    }
    fn switch_path(&self) -> Option<String> {
        self.inner.switch_path()
    }
    fn info(&self) -> crate::transport::BackendInfo {
        self.inner.info()
    }
    fn barrier(&mut self) -> Result<()> {
        self.inner.barrier()
    }
    fn barrier_first(&mut self, first: Rank) -> Result<()> {
        self.inner.barrier_first(first)
    }
    fn broadcast(&mut self, root: Rank, data: &mut Vec<u8>) -> Result<()> {
        self.inner.broadcast(root, data)
    }
    fn gather(&mut self, root: Rank, data: &[u8]) -> Result<Option<Vec<Vec<u8>>>> {
        self.inner.gather(root, data)
    }
}

/// A program run with every rank's endpoint wrapped in [`Corrupting`].
#[derive(Debug)]
pub struct WithCorruption<'p, P> {
    /// The program.
    pub program: &'p P,
    /// The byte it changes.
    pub fault: Fault,
}

impl<P: Program> Program for WithCorruption<'_, P> {
    type Output = P::Output;
    fn run<E: Endpoint>(&self, ep: &mut E) -> Result<P::Output> {
        let mut c = Corrupting {
            inner: ep,
            fault: self.fault,
            seen: 0,
            starts: Default::default(),
        };
        self.program.run(&mut c)
    }
}

/// Trials of each run of [`validation`].
const VALIDATION_TRIALS: u64 = 12;

/// One random case of [`validation`]: a pattern, its configuration, whether it streams, and
/// how many of its measured messages ranks 0 and 1 receive per trial.
struct ValidationCase {
    kind: crate::method::PatternKind,
    windowed: bool,
    cfg: crate::method::MethodConfig,
    per_trial: [u64; 2],
}

fn validation_case(rng: &mut crate::stats::Xoshiro256) -> ValidationCase {
    use crate::method::buffers::{BufferOptions, BufferReuse};
    use crate::method::{MethodConfig, NppChoice, PatternKind};
    let w = 2 + rng.below(3) as u32;
    let kind = [
        PatternKind::PingPong,
        PatternKind::Exchange,
        PatternKind::Bandwidth { window: w },
        PatternKind::BiBandwidth { window: w },
    ][rng.below(4)];
    let windowed = matches!(
        kind,
        PatternKind::Bandwidth { .. } | PatternKind::BiBandwidth { .. }
    );
    let single = windowed && rng.below(2) == 1;
    let size = [1u64, 8, 1000, 4103, 65_536][rng.below(5)];
    let align = [None, Some(64), Some(4096)][rng.below(3)];
    let offset = align.map_or(0, |a| rng.below(a as usize) as u64);
    let per = if single { 1 } else { u64::from(w) };
    let per_trial = match kind {
        PatternKind::PingPong => [1, 1],
        PatternKind::Exchange => [2, 2],
        PatternKind::Bandwidth { .. } => [0, per],
        PatternKind::BiBandwidth { .. } => [per, per],
    };
    let buffers = if single {
        BufferReuse::Single
    } else {
        BufferReuse::Multiple
    };
    let cfg = MethodConfig {
        sizes: vec![size],
        trials: VALIDATION_TRIALS,
        warmup: 0,
        npp: NppChoice::Fixed(1),
        timer_samples: 1000,
        buffers: BufferOptions {
            validate: true,
            buffers,
            align,
            offset,
            ..Default::default()
        },
        ..MethodConfig::default()
    };
    ValidationCase {
        kind,
        windowed,
        cfg,
        per_trial,
    }
}

/// A validated run ([`crate::method::buffers`]) against ground truth, on `n` ranks of `h`
/// ([`Validation`]).
pub fn validation<H: Harness>(h: &H, n: u32, cases: u32, seed: u64) -> Result<()> {
    let seed = seed ^ u64::from(n);
    h.run(n, &Validation { cases, seed }).map(drop)
}

/// A validated run ([`crate::method::buffers`]) against ground truth: `cases` random
/// measurements (pattern, size, placement, single or multiple buffers) between ranks 0 and 1,
/// each run once with one byte changed in one received message at random ([`Corrupting`]:
/// rank, message, byte, bit) and once without, one after the other on the same endpoints.
/// The first must end with [`Error::Corrupt`] naming the byte, the message and its trial; the
/// second must pass and record every trial as checked.
#[derive(Debug)]
pub struct Validation {
    /// Random measurements.
    pub cases: u32,
    /// Their seed (the same on every rank).
    pub seed: u64,
}

impl Program for Validation {
    type Output = ();
    fn run<E: Endpoint>(&self, ep: &mut E) -> Result<()> {
        use crate::method::engine::Measurement;
        let me = ep.rank();
        let mut rng = crate::stats::Xoshiro256::new(self.seed);
        for _ in 0..self.cases {
            let c = validation_case(&mut rng);
            let size = c.cfg.sizes[0];
            let rank = if c.per_trial[0] == 0 {
                1
            } else {
                rng.below(2) as u32
            };
            let per = c.per_trial[rank as usize];
            let fault = Fault {
                rank,
                tag: crate::method::kernels::TAG_PINGPONG,
                nth: rng.below((VALIDATION_TRIALS * per) as usize) as u64,
                offset: rng.below(size as usize),
                mask: 1 << rng.below(8),
            };
            let what = format!(
                "{} of {size} B, {:?}, {fault:?}",
                c.kind.name(),
                c.cfg.buffers
            );
            // A window's message is its slot; a ping-pong or an exchange has one a way.
            let message = if c.windowed { fault.nth % per } else { 0 };
            let want = format!("message {message} of trial {}", fault.nth / per);
            // What an observer hears of: only points kept for good.
            let told = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
            let observer = |told: &std::sync::Arc<std::sync::atomic::AtomicUsize>| {
                let told = std::sync::Arc::clone(told);
                crate::method::engine::PointObserver::new(move |_| {
                    told.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                })
            };
            let m = Measurement::new(c.kind, c.cfg.clone(), None);
            m.observe(observer(&told));
            match (WithCorruption { program: &m, fault }).run(ep) {
                Ok(()) => {
                    let why = format!("{what}: the changed byte went unnoticed");
                    return Err(fail("validation", me, why));
                }
                Err(e) => match e.root() {
                    Error::Corrupt { offset, which, .. }
                        if *offset == fault.offset as u64 && *which == want => {}
                    _ => {
                        let why = format!("{what}: `{e}`, not byte {} of {want}", fault.offset);
                        return Err(fail("validation", me, why));
                    }
                },
            }
            // The size whose check failed is not kept, nor heard of.
            let heard = told.swap(0, std::sync::atomic::Ordering::SeqCst);
            if !m.take_collected().points.is_empty() || heard != 0 {
                let why = format!("{what}: the point whose check failed was kept ({heard} told)");
                return Err(fail("validation", me, why));
            }
            let m = Measurement::new(c.kind, c.cfg, None);
            m.observe(observer(&told));
            m.run(ep)
                .map_err(|e| fail("validation", me, format!("{what} without the fault: {e}")))?;
            let points = m.take_collected().points;
            let heard = told.load(std::sync::atomic::Ordering::SeqCst);
            if me == 0 && heard != points.len() {
                let why = format!("{what}: {} point(s) kept, {heard} told", points.len());
                return Err(fail("validation", me, why));
            }
            for p in points {
                let checked = p.buffers.map_or(0, |b| b.validated_trials);
                if checked != VALIDATION_TRIALS {
                    let why = format!("{what}: {checked} trials recorded as checked");
                    return Err(fail("validation", me, why));
                }
            }
        }
        ep.barrier()
    }
}

/// Three ranks, one of which dies: rank 2 answers rank 0's first message and its process
/// exits at once, without a goodbye, as a killed one would. Rank 0, with a receive from rank
/// 2 still posted, ping-pongs with rank 1 meanwhile ([`PeerDies::ROUNDS`] rounds, 1 ms apart:
/// rank 2 dies during them). A backend must fail only what involves the dead rank: rank 0's
/// output is its rounds with rank 1, the outcome of the receive posted for rank 2 and that of
/// a send to it after ([`PeerDies::check`]). Run with processes, not threads: rank 2 exits.
#[derive(Debug, Clone, Copy)]
pub struct PeerDies;

impl PeerDies {
    /// Rank 0's rounds with rank 1.
    pub const ROUNDS: u64 = 300;

    /// Rank 0's output as it must be: every round with rank 1, and the receive posted for
    /// rank 2 and the send to it after both failed naming it.
    pub fn check(out: <Self as Program>::Output) -> Result<()> {
        let (n, posted, after) = out;
        if n != Self::ROUNDS {
            return Err(Error::Protocol(format!(
                "rank 0 went on for {n} rounds with rank 1 of {}",
                Self::ROUNDS
            )));
        }
        for (what, e) in [("the receive posted for", posted), ("a send to", after)] {
            match e.as_ref().map(Error::root) {
                Some(Error::PeerLost { peer: 2, .. }) => {}
                e => {
                    return Err(Error::Protocol(format!(
                        "{what} the dead rank 2 ended with {e:?}, not that rank 2 is gone"
                    )))
                }
            }
        }
        Ok(())
    }
}

impl Program for PeerDies {
    type Output = (u64, Option<Error>, Option<Error>);
    fn run<E: Endpoint>(&self, ep: &mut E) -> Result<Self::Output> {
        let mut buf = vec![0u8; 8];
        match ep.rank() {
            0 => {
                buf = ep.send(2, 5, buf)?;
                buf = ep.recv(Src::Rank(2), TagSel::Tag(6), buf)?.buf;
                let never = ep.irecv(Src::Rank(2), TagSel::Tag(7), vec![0u8; 8])?;
                let mut n = 0;
                for _ in 0..Self::ROUNDS {
                    buf = ep.send(1, 1, buf)?;
                    buf = ep.recv(Src::Rank(1), TagSel::Tag(1), buf)?.buf;
                    n += 1;
                    std::thread::sleep(std::time::Duration::from_millis(1));
                }
                let posted = ep.wait(never).err();
                let after = ep.send(2, 8, buf.clone()).err();
                ep.send(1, 2, buf)?;
                Ok((n, posted, after))
            }
            1 => loop {
                let c = ep.recv(Src::Rank(0), TagSel::Any, buf)?;
                if c.tag == 2 {
                    return Ok((0, None, None));
                }
                buf = ep.send(0, 1, c.buf)?;
            },
            _ => {
                buf = ep.recv(Src::Rank(0), TagSel::Tag(5), buf)?.buf;
                ep.send(0, 6, buf)?;
                // Gone without a goodbye, as a process that is killed.
                std::process::exit(9);
            }
        }
    }
}
