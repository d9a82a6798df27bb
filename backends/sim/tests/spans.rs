//! Spans on the simulator (`isend_span`, `irecv_span`): a window of `W` messages posted as one
//! span of count `W` on one buffer runs exactly the events of `W` separate `isend`s (and `W`
//! `irecv`s followed by a `wait` on each) on `W` buffers, so every virtual time, handler time
//! and matching walk is the same; and the bytes land at the span's offset, nowhere else.

use commbench_core::transport::work::Work;
use commbench_core::{Endpoint, Error, Program, Rank, ReqId, Result, Span, Src, Tag, TagSel};
use commbench_sim::{run_with_stats, SimConfig, SimStats};

use crate::common;
use common::machine::{six, Machine};

/// Eight nodes with every cost non-zero and of a different size: F and U grow with the
/// message, R above E so handlers queue, A per byte of the receive's capacity, a matcher that
/// costs time, hop jitter drawn from a seed; receive buffers and what a message carries are
/// for the caller to bound.
fn machine() -> Machine {
    Machine::new("window", 3)
        .clock_read_ns(35)
        .poll_ns(45)
        .stack_kib(128)
        .match_ns_per_entry(61.5)
        .jitter(170, 11)
        .times(six([
            (0.9, 0.0007),
            (0.45, 0.0),
            (1.3, 0.0),
            (0.2, 0.00005),
            (0.6, 0.0011),
            (1.05, 0.0019),
        ]))
}

/// Tag of the window's messages; of the receives posted first that no message matches; of
/// the acknowledgement that ends a round.
const DATA: Tag = 3;
const STRAY: Tag = 40;
const ACK: Tag = 9;
/// Tag of a message from rank 1 that rank 0 receives after its window, posted behind it: it
/// arrives while the window's receives wait, and its match walks past all of them.
const SIDE: Tag = 12;

/// The bytes sender `from` puts in message `k` of round `round`.
fn payload(from: Rank, round: u32, k: u32, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u32 * 7 + from * 31 + round * 13 + k * 5) as u8)
        .collect()
}

/// Ranks `1..=senders` each send a window of `w` messages of `len` bytes to rank 0, which
/// receives all `senders * w` of them from any source, then acknowledges; `rounds` times.
/// Rank 1 first sends one [`SIDE`] message, which rank 0 receives by a receive posted behind
/// its window. Rank 0 first posts `strays` receives that nothing matches (so every delivery
/// walks past them), and posts its window `late` (after the messages have arrived: they wait
/// as unexpected) or before they are sent. With `one_buffer` every window is one span of count `w` (for the
/// receiver `senders * w`) at an offset of one buffer; otherwise `w` posts on `w` buffers.
/// Each rank's output: its clock at the end of each round, and for rank 0 the envelope of
/// the last message of each round.
#[derive(Debug, Clone, Copy)]
struct Window {
    senders: u32,
    w: u32,
    len: usize,
    rounds: u32,
    strays: u32,
    late: bool,
    one_buffer: bool,
}

/// Offset of the span in the one buffer; bytes of guard after it.
const AT: usize = 7;
const PAST: usize = 5;

impl Window {
    fn send_window<E: Endpoint>(&self, ep: &mut E, round: u32) -> Result<()> {
        let me = ep.rank();
        let data = payload(me, round, 0, self.len);
        if me == 1 {
            ep.compute(Work::int(30_000));
            ep.send(0, SIDE, vec![4; 8])?;
        }
        if self.one_buffer {
            let mut buf = vec![0xA5; AT + self.len + PAST];
            buf[AT..AT + self.len].copy_from_slice(&data);
            let span = Span {
                start: AT,
                len: self.len,
                count: self.w,
            };
            let r = ep.isend_span(0, DATA, buf, span)?;
            ep.wait(r)?;
        } else {
            let mut reqs = Vec::new();
            for _ in 0..self.w {
                reqs.push(ep.isend(0, DATA, data.clone())?);
            }
            let mut out = Vec::new();
            ep.wait_all(&reqs, &mut out)?;
        }
        Ok(())
    }

    /// Rank 0's window; the envelope (sender, tag, length) of its last message.
    fn recv_window<E: Endpoint>(&self, ep: &mut E, round: u32) -> Result<(Rank, Tag, usize)> {
        let total = self.senders * self.w;
        let (src, tag) = (Src::Any, TagSel::Tag(DATA));
        if self.one_buffer {
            let span = Span {
                start: AT,
                len: self.len + 2,
                count: total,
            };
            let buf = vec![0xEE; AT + self.len + 2 + PAST];
            let r = ep.irecv_span(src, tag, buf, span)?;
            let side = ep.irecv(Src::Rank(1), TagSel::Tag(SIDE), vec![0; 8])?;
            let c = ep.wait(r)?;
            ep.wait(side)?;
            // The last message is the one the buffer holds; nothing outside the span moved.
            let want = payload(c.peer, round, 0, self.len);
            let outside = c.buf[..AT].iter().chain(&c.buf[AT + self.len + 2..]);
            assert_eq!(&c.buf[AT..AT + self.len], &want[..], "round {round}");
            assert!(outside.into_iter().all(|&b| b == 0xEE), "round {round}");
            return Ok((c.peer, c.tag, c.len));
        }
        let mut reqs: Vec<ReqId> = Vec::new();
        for _ in 0..total {
            reqs.push(ep.irecv(src, tag, vec![0; self.len + 2])?);
        }
        let side = ep.irecv(Src::Rank(1), TagSel::Tag(SIDE), vec![0; 8])?;
        let mut out = Vec::new();
        ep.wait_all(&reqs, &mut out)?;
        ep.wait(side)?;
        let last = out.last().map_or((0, 0, 0), |c| (c.peer, c.tag, c.len));
        Ok(last)
    }
}

impl Program for Window {
    type Output = Vec<(u64, Rank, Tag, usize)>;
    fn run<E: Endpoint>(&self, ep: &mut E) -> Result<Self::Output> {
        let me = ep.rank();
        let mut out = Vec::new();
        let mut strays = Vec::new();
        if me == 0 {
            for k in 0..self.strays {
                strays.push(ep.irecv(Src::Any, TagSel::Tag(STRAY + k), vec![0; 4])?);
            }
        }
        ep.barrier()?;
        for round in 0..self.rounds {
            let mut envelope = (0, 0, 0);
            if me == 0 {
                if self.late {
                    // Long enough for every window to have arrived and wait as unexpected.
                    ep.compute(Work::int(400_000));
                }
                envelope = self.recv_window(ep, round)?;
                for s in 1..=self.senders {
                    ep.send(s, ACK, vec![1])?;
                }
            } else if me <= self.senders {
                self.send_window(ep, round)?;
                ep.recv(Src::Rank(0), TagSel::Tag(ACK), vec![0; 1])?;
            }
            let t = ep.now_ns();
            out.push((t, envelope.0, envelope.1, envelope.2));
        }
        ep.barrier()?;
        if me == 0 {
            // Clear the stray receives so the run ends with nothing posted.
            for k in 0..self.strays {
                ep.send(0, STRAY + k, vec![2])?;
            }
            let mut done = Vec::new();
            ep.wait_all(&strays, &mut done)?;
        }
        Ok(out)
    }
}

type Outcome = (Vec<Vec<(u64, Rank, Tag, usize)>>, SimStats);

fn both(cfg: &SimConfig, p: Window) -> (Outcome, Outcome) {
    let many = run_with_stats(
        cfg,
        &Window {
            one_buffer: false,
            ..p
        },
    )
    .unwrap();
    let one = run_with_stats(
        cfg,
        &Window {
            one_buffer: true,
            ..p
        },
    )
    .unwrap();
    (many, one)
}

#[test]
fn a_window_on_one_buffer_times_as_a_window_on_many() {
    let cfg = machine().config();
    let mut seen_times = Vec::new();
    for (senders, w, len, strays, late) in [
        (1, 1, 100, 0, false),
        (1, 8, 1000, 3, false),
        (1, 8, 1000, 3, true),
        (3, 5, 257, 2, false),
        (3, 5, 257, 2, true),
        (2, 16, 0, 0, false),
        (7, 4, 4099, 1, false),
    ] {
        let p = Window {
            senders,
            w,
            len,
            rounds: 3,
            strays,
            late,
            one_buffer: false,
        };
        let (many, one) = both(&cfg, p);
        let what = format!("{senders} senders, window {w}, {len} bytes, late {late}");
        assert_eq!(many.0, one.0, "clocks and envelopes: {what}");
        assert_eq!(many.1, one.1, "events, handler times and walks: {what}");
        // The runs did something: messages crossed hops and the matcher walked (the strays
        // are cleared by messages rank 0 sends itself, which cross no hop).
        let crossing = u64::from(3 * senders * (w + 1) + 3);
        assert_eq!(many.1.messages, crossing + u64::from(strays), "{what}");
        assert!(many.1.hops >= crossing, "{what}");
        assert!(many.1.match_entries[0] > 0, "{what}");
        seen_times.push(many.0[0][2].0);
    }
    // Seven different workloads: seven different end times (nothing degenerated to zero).
    seen_times.sort_unstable();
    seen_times.dedup();
    assert_eq!(seen_times.len(), 7, "{seen_times:?}");
}

#[test]
fn a_window_on_one_buffer_stalls_bounded_buffers_as_a_window_on_many() {
    // Room for two and a half messages: the channels into rank 0 stall until it collects, and
    // the room comes back after each receive's U, not once at the end of the span.
    let cfg = machine().recv_buffer_bytes(Some(2600)).config();
    for (senders, w, late) in [(1, 6, false), (3, 4, false), (2, 5, true)] {
        let p = Window {
            senders,
            w,
            len: 1040,
            rounds: 2,
            strays: 1,
            late,
            one_buffer: false,
        };
        let (many, one) = both(&cfg, p);
        assert_eq!(many, one, "{senders} senders, window {w}, late {late}");
    }
    // The bound does cost time: the same window without it ends sooner.
    let free = machine().config();
    let p = Window {
        senders: 3,
        w: 4,
        len: 1040,
        rounds: 2,
        strays: 1,
        late: false,
        one_buffer: true,
    };
    let bounded = run_with_stats(&cfg, &p).unwrap().1.end_ns;
    let unbounded = run_with_stats(&free, &p).unwrap().1.end_ns;
    assert!(bounded > unbounded, "{bounded} vs {unbounded}");
}

/// Rank 1 sends `len` bytes at offset 3 of a buffer twice as one span; rank 0 receives them
/// into offset 6 of a buffer of guard bytes. Rank 0's output: the buffer it got back.
struct Carried {
    len: usize,
}

impl Program for Carried {
    type Output = Vec<u8>;
    fn run<E: Endpoint>(&self, ep: &mut E) -> Result<Vec<u8>> {
        let span = |start| Span {
            start,
            len: self.len,
            count: 2,
        };
        match ep.rank() {
            0 => {
                let r = ep.irecv_span(
                    Src::Rank(1),
                    TagSel::Tag(5),
                    vec![0xEE; self.len + 10],
                    span(6),
                )?;
                let c = ep.wait(r)?;
                assert_eq!((c.peer, c.tag, c.len), (1, 5, self.len));
                Ok(c.buf)
            }
            1 => {
                let mut buf = vec![0x11; self.len + 3];
                buf[3..].copy_from_slice(&payload(1, 0, 0, self.len));
                let r = ep.isend_span(0, 5, buf, span(3))?;
                let c = ep.wait(r)?;
                assert_eq!(c.len, self.len);
                Ok(Vec::new())
            }
            _ => Ok(Vec::new()),
        }
    }
}

#[test]
fn a_carried_prefix_lands_at_the_offset_and_nothing_else_is_written() {
    let len = 300;
    let sent = payload(1, 0, 0, len);
    for carry in [None, Some(64u64), Some(0)] {
        let cfg = machine().carry_bytes(carry).config();
        let got = run_with_stats(&cfg, &Carried { len })
            .unwrap()
            .0
            .swap_remove(0);
        let kept = carry.map_or(len, |c| c as usize);
        let mut want = vec![0xEE; len + 10];
        want[6..6 + kept].copy_from_slice(&sent[..kept]);
        assert_eq!(got, want, "carry_bytes {carry:?}");
    }
}

#[test]
fn spans_that_do_not_fit_are_refused_before_anything_is_sent() {
    struct Bad;
    impl Program for Bad {
        type Output = u64;
        fn run<E: Endpoint>(&self, ep: &mut E) -> Result<u64> {
            let span = Span {
                start: 9,
                len: 8,
                count: 3,
            };
            let peer = 1 - ep.rank();
            let sent = ep.isend_span(peer, 1, vec![0; 16], span);
            let posted = ep.irecv_span(Src::Rank(peer), TagSel::Tag(1), vec![0; 16], span);
            assert!(matches!(sent, Err(Error::Invalid(_))), "{sent:?}");
            assert!(matches!(posted, Err(Error::Invalid(_))), "{posted:?}");
            Ok(ep.now_ns())
        }
    }
    let mut cfg = machine().config();
    cfg.ranks = Some(2);
    let (times, stats) = run_with_stats(&cfg, &Bad).unwrap();
    // Refused in the endpoint: no message, no CPU time but the clock read.
    assert_eq!(stats.messages, 0);
    assert_eq!(times, vec![35, 35]);
}

/// Rank 1 sends 8, 20 and 8 bytes with one tag, then 36 bytes with another; rank 0 receives
/// the first three as one span of count 3 and capacity 10, after they have all arrived, then
/// the fourth. Rank 0's output: the span's error, and the length of the fourth message.
struct TooLong;

impl Program for TooLong {
    type Output = Option<(String, usize)>;
    fn run<E: Endpoint>(&self, ep: &mut E) -> Result<Self::Output> {
        match ep.rank() {
            0 => {
                let span = Span {
                    start: 2,
                    len: 10,
                    count: 3,
                };
                let r = ep.irecv_span(Src::Rank(1), TagSel::Tag(1), vec![0; 12], span)?;
                ep.compute(Work::int(200_000));
                let err = match ep.wait(r) {
                    Err(
                        e @ Error::Truncated {
                            len: 20, cap: 10, ..
                        },
                    ) => e.to_string(),
                    other => format!("not the truncation of the second message: {other:?}"),
                };
                let c = ep.recv(Src::Rank(1), TagSel::Tag(2), vec![0; 36])?;
                Ok(Some((err, c.len)))
            }
            1 => {
                for len in [8, 20, 8] {
                    ep.send(0, 1, vec![1; len])?;
                }
                ep.send(0, 2, vec![2; 36])?;
                Ok(None)
            }
            _ => Ok(None),
        }
    }
}

#[test]
fn a_message_too_long_for_a_span_ends_it_and_gives_its_room_back() {
    // Room for 40 bytes: the fourth message fits only once the third, which met the span's
    // last receive, has given its room back.
    let cfg = machine().recv_buffer_bytes(Some(40)).config();
    let out = commbench_sim::run(&cfg, &TooLong).unwrap();
    let (err, len) = out[0].clone().unwrap();
    assert!(err.contains("20") && err.contains("10"), "{err}");
    assert_eq!(len, 36);
}
