//! Seed 001's experiments (Krumme & Greenfield 1988, §3-§5) as kernels of the one engine.
//!
//! The paper models a message by six times: F (the send call, up to the copy into a system
//! buffer), S (CPU lost on the sender while the message goes out), R (CPU lost on the receiver
//! while it comes in), A (the part of the receive call done before the message is there), U
//! (the rest of the receive: the copy out) and E (elapsed time of one hop). Its program
//! (Appendix A) measures them with a background computation Q whose time without I/O is known:
//!
//! | experiment | §   | the source times                                     | measures     |
//! |------------|-----|------------------------------------------------------|--------------|
//! | echo `d`   | 3.2 | send to a rank `d` hops away, read the echo           | `2F + 2dE + 2U` |
//! | `q`        | 3.1 | Q alone, no I/O                                       | Q            |
//! | `r`        | 3.3 | Q while a neighbour's messages arrive                 | Q + R        |
//! | `a+u`      | 3.4 | the read of a message that has already arrived        | A + U        |
//! | `f+s`      | 3.4 | a send, then Q                                        | F + S + Q    |
//! | `r+s`      | 3.4 | Q while messages are forwarded through it             | Q + R + S    |
//! | `2(f+e+u)` | 3.4 | send, read the echo the neighbour returns after Q     | 2(F+E+U) + Q |
//! | interference `k` | 5.2 | Q while `k` neighbours stream 2000-byte messages through it | Q / (1 - k(R+S)/P) |
//!
//! Every experiment is a [`Kernel`]: the engine's barrier and handshake precede each
//! repetition (a trial), and the source reads its clock once around `npp` iterations, so a
//! coarse clock tick (the NCUBE's is 146 us) is spread over `npp` messages instead of biasing
//! each one ([`SixTimes::npp`]). The streams and the neighbours' parts that must overlap the
//! source's timed loop run in the kernel's hooks ([`Kernel::before_handshake`],
//! [`Kernel::after_timing`]).
//!
//! Where the ranks are ([`Placement`]): on a transport that routes over a hypercube itself
//! ([`Endpoint::hypercube`], the simulator) the echo partner is the node `d` bits away and
//! forwarded messages pass through the source as the paper's did. Elsewhere every rank
//! reaches every other directly: the echo travels a path of ranks `0, 1, .., d` whose
//! intermediate ranks forward it in user space, nothing forwards below the program (so `r+s`
//! has no meaning there), and the interference streams are forwarded by the source's own
//! program between slices of Q. The analysis (the four-equation solve, the fitted lines)
//! is the `commbench` package's.

use crate::method::benchmark::Benchmark;
use crate::method::engine::{decode_i64s, encode_i64s, settle, with_collected};
use crate::method::engine::{Collected, Kernel, KernelSpec, Measurement, RawPoint, Steps};
use crate::method::limits::PER_MESSAGE_OVERHEAD;
use crate::method::{MethodConfig, NppChoice};
use crate::transport::error::{Error, Result, ResultExt};
use crate::transport::work::{QKind, Work};
use crate::transport::{Endpoint, Rank, ReqId, Src, Tag, TagSel};
use serde::{Deserialize, Serialize};

/// Tag of the measured messages.
pub const TAG_DATA: Tag = 11;
/// Tag of an interference stream's acknowledgement.
pub const TAG_ACK: Tag = 12;
/// Tag of the source's request that a stream stop.
pub const TAG_STOP: Tag = 13;
/// Tag of a stream's last message.
pub const TAG_END: Tag = 14;

/// Most hops an echo travels (a 16-dimensional cube's diameter).
pub const MAX_HOPS: u32 = 16;
/// Most interference streams (each needs two more dimensions, or two more ranks).
pub const MAX_STREAMS: u32 = 8;
/// Size of the interference experiment's messages (`BIGSIZE` of Appendix A).
pub const INTERFERENCE_BYTES: u64 = 2000;
/// Messages each stream sends before it waits for its first acknowledgement: Appendix A's
/// three, plus the one each acknowledgement releases.
pub const STREAM_PIPELINE: u32 = 4;
/// Slices of Q per interference reading at least, so that every stream is acknowledged many
/// times while rank 0 is timed (each slice is twice a round trip).
pub const INTERFERENCE_SLICES: u64 = 400;
/// The largest share of one clock tick a per-message value may carry: npp is at least
/// `res_timing / TICK_SHARE_NS` ([`SixTimes::npp`]).
pub const TICK_SHARE_NS: f64 = 50.0;

/// Seed 001's experiments. Each is a pattern of the result document ([`Experiment::name`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum Experiment {
    /// §3.2: the echo over `hops` hops, with Q running around it (`busy`, the paper's
    /// condition) or with the ranks idle (§5.1).
    Echo {
        /// Distance to the echoing rank.
        hops: u32,
        /// Q runs after every send (§3.2); `false`: the ranks only communicate (§5.1).
        busy: bool,
    },
    /// §3.1: Q alone, the time the others subtract.
    Q,
    /// §3.3: Q while a neighbour's messages arrive.
    R,
    /// §3.4: reading a message that has already arrived.
    AU,
    /// §3.4: a send followed by Q.
    FS,
    /// §3.4: Q while messages are forwarded through the source.
    RS,
    /// §3.4: send, then read the echo a neighbour returns after Q.
    FEU2,
    /// §5.2: Q while `streams` neighbours stream messages through the source.
    Interference {
        /// Neighbours streaming.
        streams: u32,
    },
}

/// Pattern names of the echo at 1..=16 hops, busy and idle.
const ECHO: [&str; 16] = [
    "echo-d1", "echo-d2", "echo-d3", "echo-d4", "echo-d5", "echo-d6", "echo-d7", "echo-d8",
    "echo-d9", "echo-d10", "echo-d11", "echo-d12", "echo-d13", "echo-d14", "echo-d15", "echo-d16",
];
const ECHO_IDLE: [&str; 16] = [
    "echo-idle-d1",
    "echo-idle-d2",
    "echo-idle-d3",
    "echo-idle-d4",
    "echo-idle-d5",
    "echo-idle-d6",
    "echo-idle-d7",
    "echo-idle-d8",
    "echo-idle-d9",
    "echo-idle-d10",
    "echo-idle-d11",
    "echo-idle-d12",
    "echo-idle-d13",
    "echo-idle-d14",
    "echo-idle-d15",
    "echo-idle-d16",
];
const INTERFERENCE: [&str; 8] = [
    "interference-1",
    "interference-2",
    "interference-3",
    "interference-4",
    "interference-5",
    "interference-6",
    "interference-7",
    "interference-8",
];
/// Pattern names of the interference streams' rates, per number of streams.
const RATE: [&str; 8] = [
    "interference-rate-1",
    "interference-rate-2",
    "interference-rate-3",
    "interference-rate-4",
    "interference-rate-5",
    "interference-rate-6",
    "interference-rate-7",
    "interference-rate-8",
];
/// Pattern name of Q's calibration: the time of `npp` iterations of Q per trial.
pub const CALIBRATION: &str = "q-calibration";

impl Experiment {
    /// Pattern name in the result document: `echo-d3`, `echo-idle-d3`, `q`, `r`, `a+u`,
    /// `f+s`, `r+s`, `2(f+e+u)`, `interference-2`.
    pub fn name(&self) -> &'static str {
        let at = |v: u32, max: u32| (v.clamp(1, max) - 1) as usize;
        match *self {
            Experiment::Echo { hops, busy: true } => ECHO[at(hops, MAX_HOPS)],
            Experiment::Echo { hops, busy: false } => ECHO_IDLE[at(hops, MAX_HOPS)],
            Experiment::Q => "q",
            Experiment::R => "r",
            Experiment::AU => "a+u",
            Experiment::FS => "f+s",
            Experiment::RS => "r+s",
            Experiment::FEU2 => "2(f+e+u)",
            Experiment::Interference { streams } => INTERFERENCE[at(streams, MAX_STREAMS)],
        }
    }

    /// The experiment a pattern name stands for ([`Experiment::name`]'s inverse).
    pub fn from_name(name: &str) -> Option<Experiment> {
        let find = |table: &[&str], v: &str| table.iter().position(|n| *n == v);
        if let Some(i) = find(&ECHO, name) {
            return Some(Experiment::Echo {
                hops: i as u32 + 1,
                busy: true,
            });
        }
        if let Some(i) = find(&ECHO_IDLE, name) {
            return Some(Experiment::Echo {
                hops: i as u32 + 1,
                busy: false,
            });
        }
        if let Some(i) = find(&INTERFERENCE, name) {
            return Some(Experiment::Interference {
                streams: i as u32 + 1,
            });
        }
        Some(match name {
            "q" => Experiment::Q,
            "r" => Experiment::R,
            "a+u" => Experiment::AU,
            "f+s" => Experiment::FS,
            "r+s" => Experiment::RS,
            "2(f+e+u)" => Experiment::FEU2,
            _ => return None,
        })
    }

    /// Whether Q's time at the size is subtracted from what the source timed.
    pub fn subtracts_q(&self) -> bool {
        matches!(
            self,
            Experiment::R | Experiment::FS | Experiment::RS | Experiment::FEU2
        )
    }
}

/// The pattern name of the interference streams' rates with `streams` streams.
pub fn rate_name(streams: u32) -> &'static str {
    RATE[(streams.clamp(1, MAX_STREAMS) - 1) as usize]
}

/// The number of streams of a rate pattern ([`rate_name`]'s inverse).
pub fn rate_streams(name: &str) -> Option<u32> {
    RATE.iter().position(|n| *n == name).map(|i| i as u32 + 1)
}

/// Where an experiment's ranks are: on a hypercube the transport routes over
/// ([`Endpoint::hypercube`]), or on ranks that all reach each other directly.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Placement {
    /// The cube's dimension, when the transport routes over one.
    pub hypercube: Option<u32>,
    /// Ranks in the run.
    pub size: u32,
}

impl Placement {
    /// The placement of `ep`'s run.
    pub fn of<E: Endpoint>(ep: &E) -> Placement {
        Placement {
            hypercube: ep.hypercube(),
            size: ep.size(),
        }
    }

    /// Whether the transport forwards messages between non-neighbours itself.
    pub fn transport_forwards(&self) -> bool {
        self.hypercube.is_some()
    }

    fn need(&self, rank: Rank, what: &str) -> Result<Rank> {
        if rank < self.size {
            return Ok(rank);
        }
        Err(Error::Config(match self.hypercube {
            Some(d) => format!(
                "{what} needs node {rank}, which runs no program on this {d}-dimensional cube \
                 of {} ranks",
                self.size
            ),
            None => format!(
                "{what} needs rank {rank}: the run has {} ranks (give it {})",
                self.size,
                rank + 1
            ),
        }))
    }

    /// The ranks an echo over `hops` hops visits, from rank 0 to the echoing rank: on a
    /// hypercube `[0, 2^hops - 1]` (the transport routes the `hops` hops, as Appendix A's
    /// nodes 1, 3, 7, 15, 31), otherwise `[0, 1, .., hops]` (the ranks between forward in
    /// user space).
    pub fn echo_path(&self, hops: u32) -> Result<Vec<Rank>> {
        if hops == 0 || hops > MAX_HOPS {
            return Err(Error::Config(format!(
                "an echo over {hops} hops: 1 to {MAX_HOPS} hops"
            )));
        }
        let what = format!("the echo over {hops} hops");
        match self.hypercube {
            Some(d) if hops > d => Err(Error::Config(format!(
                "{what}: the {d}-dimensional cube's farthest node is {d} hops away"
            ))),
            Some(_) => Ok(vec![0, self.need((1 << hops) - 1, &what)?]),
            None => (0..=hops).map(|r| self.need(r, &what)).collect(),
        }
    }

    /// The neighbour the two-rank experiments use: rank 1 (node 1 is a neighbour of node 0).
    pub fn neighbour(&self) -> Result<Rank> {
        self.need(1, "seed 001's experiments")
    }

    /// The `(from, to)` of the forwarding experiment `r+s`: node 1 sends to node 2, and the
    /// cube routes it through node 0 (e-cube routing takes the lowest dimension first). `None`
    /// where the transport forwards nothing.
    pub fn forwarding(&self) -> Result<Option<(Rank, Rank)>> {
        match self.hypercube {
            None => Ok(None),
            Some(d) if d < 2 => Err(Error::Config(format!(
                "forwarding through node 0 needs a cube of 2 dimensions or more (this one has {d})"
            ))),
            Some(_) => {
                let what = "forwarding through node 0";
                Ok(Some((self.need(1, what)?, self.need(2, what)?)))
            }
        }
    }

    /// The `(sender, receiver)` of each of `streams` interference streams through rank 0: on
    /// a cube `(2^(2i), 2^(2i+1))`, which the cube routes through node 0 (Appendix A's 1 -> 2,
    /// 4 -> 8, 16 -> 32), otherwise `(2i + 1, 2i + 2)`, forwarded by rank 0's program.
    pub fn streams(&self, streams: u32) -> Result<Vec<(Rank, Rank)>> {
        if streams == 0 || streams > MAX_STREAMS {
            return Err(Error::Config(format!(
                "{streams} interference streams: 1 to {MAX_STREAMS}"
            )));
        }
        let what = format!("{streams} interference streams");
        (0..streams)
            .map(|i| {
                let (a, b) = match self.hypercube {
                    Some(d) if 2 * i + 1 >= d => {
                        return Err(Error::Config(format!(
                            "{what} through node 0 need a cube of {} dimensions (this one has {d})",
                            2 * streams
                        )))
                    }
                    Some(_) => (1 << (2 * i), 1 << (2 * i + 1)),
                    None => (2 * i + 1, 2 * i + 2),
                };
                Ok((self.need(a, &what)?, self.need(b, &what)?))
            })
            .collect()
    }

    /// [`Placement::forwarding`] for `r+s`, which cannot run without it.
    fn rs_pair(&self) -> Result<(Rank, Rank)> {
        self.forwarding()?.ok_or_else(|| {
            Error::Config(
                "r+s needs a transport that forwards messages through node 0 (the simulator)"
                    .into(),
            )
        })
    }

    /// The rank that echoes, receives or streams to the source in `exp`: the engine's `dest`.
    pub fn dest(&self, exp: Experiment) -> Result<Rank> {
        match exp {
            Experiment::Echo { hops, .. } => {
                let path = self.echo_path(hops)?;
                Ok(path[path.len() - 1])
            }
            Experiment::RS => Ok(self.rs_pair()?.0),
            Experiment::Interference { streams } => Ok(self.streams(streams)?[0].0),
            _ => self.neighbour(),
        }
    }
}

/// The amounts of Q an experiment runs at one size, in iterations of its loop.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Amounts {
    /// Message size, bytes.
    pub size: u64,
    /// W: the source's Q per iteration (and the neighbour's X of `2(f+e+u)`); long enough
    /// for a message to go out and for the next one to arrive (twice the idle round trip
    /// at the smallest distance measured).
    pub window: u64,
    /// G: a streaming neighbour's Q before each message (half of W), so that its messages
    /// start after the source's clock and arrive at most one per W.
    pub gap: u64,
    /// B: the Q after every send in the busy echo (an eighth of the idle round trip), short
    /// enough to end before the echo returns.
    pub busy: u64,
}

impl Amounts {
    /// The amounts at `size` from the idle round trip there, `round_trip_ns`, with Q's
    /// iterations taking `ns_per_iter` each.
    pub fn from_round_trip(size: u64, round_trip_ns: f64, ns_per_iter: f64) -> Amounts {
        let iters = |ns: f64| {
            if ns_per_iter > 0.0 && ns.is_finite() && ns > 0.0 {
                (ns / ns_per_iter).ceil().min(u64::MAX as f64 / 4.0) as u64
            } else {
                1
            }
        };
        let window = iters(2.0 * round_trip_ns).max(2);
        Amounts {
            size,
            window,
            gap: window / 2,
            busy: iters(round_trip_ns / 8.0),
        }
    }
}

/// What a rank does in one experiment.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Part {
    /// Nothing but the barriers.
    Idle,
    /// The source of an echo: send to `peer`, (busy: Q), read the echo.
    EchoSource { peer: Rank },
    /// The echoing rank: read from `peer`, send it back, (busy: Q).
    EchoEnd { peer: Rank },
    /// A rank on the echo's path: forward from `prev` to `next` and back.
    Forward { prev: Rank, next: Rank },
    /// The source of `q`: Q alone.
    QOnly,
    /// The source of `r`/`r+s`: Q per iteration, then (`r`) read the `npp` messages.
    QWhileArriving { collect_from: Option<Rank> },
    /// The neighbour of `r`/`r+s`: Q(G), then a send to `to`.
    Stream { to: Rank },
    /// The rank `r+s`'s messages are forwarded to: read them after the trial.
    Collect { from: Rank },
    /// The neighbour of `a+u`: send `npp` messages before the handshake.
    Preload { to: Rank },
    /// The source of `a+u`: read one message per iteration.
    Read { from: Rank },
    /// The source of `f+s`: send, then Q.
    SendThenQ { to: Rank },
    /// The neighbour of `f+s`: read one message per iteration.
    Drain { from: Rank },
    /// The source of `2(f+e+u)`: send, read the echo.
    RoundTrip { peer: Rank },
    /// The neighbour of `2(f+e+u)`: read, Q(W) (the paper's X), send back.
    EchoAfterQ { peer: Rank },
    /// The source of the interference: Q per iteration (forwarding between slices when
    /// the transport does not), then stop the streams.
    Interfered { streams: Vec<(Rank, Rank)> },
    /// A stream's sender: stream to `to` until told to stop; acks come from `receiver`.
    StreamSender { to: Rank, receiver: Rank },
    /// A stream's receiver: read from `from` until the end, acknowledging to `sender`.
    StreamReceiver { from: Rank, sender: Rank },
}

/// One rank's kernel of one experiment.
#[derive(Debug)]
pub struct ExperimentKernel {
    exp: Experiment,
    part: Part,
    q: QKind,
    amounts: Vec<Amounts>,
    now: Amounts,
    buf: Vec<u8>,
    small: Vec<u8>,
    fwd: Option<Forwarder>,
    /// The dest of `a+u`: its messages posted before the handshake, and their buffers.
    preloads: Vec<ReqId>,
    /// The echoing rank's receive of the next message, posted in advance (§3.4: "the
    /// neighbor, which issued a read system call well in advance"), and how many of the
    /// trial's messages are still to come.
    pending: Option<ReqId>,
    left: u64,
    pool: Vec<Vec<u8>>,
    /// Rank 0: the streams' mean time per message of each trial of an interference run, ns.
    rates_ns: Vec<f64>,
}

impl ExperimentKernel {
    /// Rank `me`'s kernel of `exp` under `placement`, running Q of kind `q` in the amounts
    /// given per size.
    pub fn new(
        exp: Experiment,
        me: Rank,
        placement: Placement,
        q: QKind,
        amounts: Vec<Amounts>,
    ) -> Result<Self> {
        let part = part_of(exp, me, placement)?;
        let fwd = match (&part, placement.transport_forwards()) {
            (Part::Interfered { streams }, false) => Some(Forwarder::new(streams)),
            _ => None,
        };
        Ok(ExperimentKernel {
            exp,
            part,
            q,
            amounts,
            now: Amounts::default(),
            buf: Vec::new(),
            small: vec![0u8; 8],
            fwd,
            preloads: Vec::new(),
            pending: None,
            left: 0,
            pool: Vec::new(),
            rates_ns: Vec::new(),
        })
    }

    /// Rank 0: the streams' mean time per message in each trial so far, ns.
    pub fn rates_ns(&self) -> &[f64] {
        &self.rates_ns
    }

    fn work(&self, iters: u64) -> Work {
        Work { q: self.q, iters }
    }

    fn send_buf(&mut self, ep: &mut impl Endpoint, to: Rank, tag: Tag) -> Result<()> {
        let b = std::mem::take(&mut self.buf);
        self.buf = ep.send(to, tag, b)?;
        Ok(())
    }

    /// The message of the receive posted in advance, into the buffer.
    fn take_posted(&mut self, ep: &mut impl Endpoint) -> Result<()> {
        let req = self
            .pending
            .take()
            .ok_or_else(|| Error::Protocol("an echo with no receive posted".into()))?;
        self.buf = ep.wait(req)?.buf;
        Ok(())
    }

    /// After one of the trial's messages: the receive of the next, if one is to come.
    fn post_next(&mut self, ep: &mut impl Endpoint, from: Rank) -> Result<()> {
        self.left = self.left.saturating_sub(1);
        self.post_if_due(ep, from)
    }

    /// Post the receive of the next message from `from` while any is to come.
    fn post_if_due(&mut self, ep: &mut impl Endpoint, from: Rank) -> Result<()> {
        if self.left > 0 {
            let b = std::mem::take(&mut self.buf);
            self.pending = Some(ep.irecv(Src::Rank(from), TagSel::Tag(TAG_DATA), b)?);
        }
        Ok(())
    }

    fn recv_buf(&mut self, ep: &mut impl Endpoint, from: Rank) -> Result<()> {
        let b = std::mem::take(&mut self.buf);
        let c = ep.recv(Src::Rank(from), TagSel::Tag(TAG_DATA), b)?;
        self.buf = c.buf;
        Ok(())
    }
}

/// Rank `me`'s part in `exp`.
fn part_of(exp: Experiment, me: Rank, pl: Placement) -> Result<Part> {
    let nb = || pl.neighbour();
    Ok(match exp {
        Experiment::Echo { hops, .. } => {
            let path = pl.echo_path(hops)?;
            let last = path.len() - 1;
            match path.iter().position(|&r| r == me) {
                Some(0) => Part::EchoSource { peer: path[1] },
                Some(i) if i == last => Part::EchoEnd {
                    peer: path[last - 1],
                },
                Some(i) => Part::Forward {
                    prev: path[i - 1],
                    next: path[i + 1],
                },
                None => Part::Idle,
            }
        }
        Experiment::Q if me == 0 => Part::QOnly,
        Experiment::R if me == 0 => Part::QWhileArriving {
            collect_from: Some(nb()?),
        },
        Experiment::R if me == nb()? => Part::Stream { to: 0 },
        Experiment::RS => {
            let (from, to) = pl.rs_pair()?;
            match me {
                0 => Part::QWhileArriving { collect_from: None },
                r if r == from => Part::Stream { to },
                r if r == to => Part::Collect { from },
                _ => Part::Idle,
            }
        }
        Experiment::AU if me == 0 => Part::Read { from: nb()? },
        Experiment::AU if me == nb()? => Part::Preload { to: 0 },
        Experiment::FS if me == 0 => Part::SendThenQ { to: nb()? },
        Experiment::FS if me == nb()? => Part::Drain { from: 0 },
        Experiment::FEU2 if me == 0 => Part::RoundTrip { peer: nb()? },
        Experiment::FEU2 if me == nb()? => Part::EchoAfterQ { peer: 0 },
        Experiment::Interference { streams } => {
            let all = pl.streams(streams)?;
            let via = !pl.transport_forwards();
            if me == 0 {
                return Ok(Part::Interfered { streams: all });
            }
            match all.iter().find(|s| s.0 == me || s.1 == me) {
                Some(&(a, b)) if a == me => Part::StreamSender {
                    to: if via { 0 } else { b },
                    receiver: b,
                },
                Some(&(a, _)) => Part::StreamReceiver {
                    from: if via { 0 } else { a },
                    sender: a,
                },
                None => Part::Idle,
            }
        }
        _ => Part::Idle,
    })
}

impl<E: Endpoint> Kernel<E> for ExperimentKernel {
    fn name(&self) -> &'static str {
        self.exp.name()
    }

    fn prepare(&mut self, size: u64) -> Result<()> {
        self.now = self
            .amounts
            .iter()
            .find(|a| a.size == size)
            .copied()
            .unwrap_or(Amounts {
                size,
                window: 1,
                gap: 1,
                busy: 1,
            });
        let n = usize::try_from(size)
            .map_err(|_| Error::Config(format!("{size}-byte messages on this host")))?;
        self.buf = crate::method::alloc::try_zeroed(n as u64, || format!("a {size}-byte buffer"))?;
        if let Some(f) = &mut self.fwd {
            f.prepare(n)?;
        }
        Ok(())
    }

    fn trips(&self, _size: u64) -> u64 {
        1
    }

    fn iteration(&mut self, ep: &mut E) -> Result<()> {
        let busy = matches!(self.exp, Experiment::Echo { busy: true, .. });
        let (w, g, b) = (self.now.window, self.now.gap, self.now.busy);
        // Matched in place: the ranks are copied out, nothing is cloned in the timed loop.
        match self.part {
            Part::EchoSource { peer } => {
                self.send_buf(ep, peer, TAG_DATA)?;
                if busy {
                    ep.compute(self.work(b));
                }
                self.recv_buf(ep, peer)
            }
            Part::EchoEnd { peer } => {
                self.take_posted(ep)?;
                self.send_buf(ep, peer, TAG_DATA)?;
                if busy {
                    ep.compute(self.work(b));
                }
                self.post_next(ep, peer)
            }
            Part::QOnly | Part::QWhileArriving { .. } => {
                ep.compute(self.work(w));
                Ok(())
            }
            Part::Stream { to } => {
                ep.compute(self.work(g));
                self.send_buf(ep, to, TAG_DATA)
            }
            Part::Read { from } | Part::Drain { from } => self.recv_buf(ep, from),
            Part::SendThenQ { to } => {
                self.send_buf(ep, to, TAG_DATA)?;
                ep.compute(self.work(w));
                Ok(())
            }
            Part::RoundTrip { peer } => {
                self.send_buf(ep, peer, TAG_DATA)?;
                self.recv_buf(ep, peer)
            }
            Part::EchoAfterQ { peer } => {
                self.take_posted(ep)?;
                ep.compute(self.work(w));
                self.send_buf(ep, peer, TAG_DATA)?;
                self.post_next(ep, peer)
            }
            Part::Interfered { .. } => {
                ep.compute(self.work(w));
                match &mut self.fwd {
                    Some(f) => f.poll(ep),
                    None => Ok(()),
                }
            }
            // The others take no part in the timed loop.
            _ => Ok(()),
        }
    }

    /// The dest of `a+u` posts its `npp` messages before the handshake, so that they have
    /// arrived (or, above an eager limit, wait for the source's receives) when the source's
    /// clock starts; it waits for them after the trial.
    /// The echoing ranks post their first receive here, so that it is posted well before
    /// the first message of the trial arrives, as every later one is.
    fn before_handshake(&mut self, ep: &mut E, npp: u64) -> Result<()> {
        if let Part::EchoEnd { peer } | Part::EchoAfterQ { peer } = self.part {
            self.left = npp;
            return self.post_if_due(ep, peer);
        }
        if let Part::Preload { to } = self.part {
            let n = self.buf.len();
            for _ in 0..npp {
                let mut b = self.pool.pop().unwrap_or_default();
                b.resize(n, 0);
                self.preloads.push(ep.isend(to, TAG_DATA, b)?);
            }
        }
        Ok(())
    }

    fn after_timing(&mut self, ep: &mut E, npp: u64) -> Result<()> {
        match self.part.clone() {
            Part::Preload { .. } => {
                for r in std::mem::take(&mut self.preloads) {
                    let b = ep.wait(r)?.buf;
                    self.pool.push(b);
                }
                Ok(())
            }
            Part::Forward { prev, next } => {
                for _ in 0..npp {
                    self.recv_buf(ep, prev)?;
                    self.send_buf(ep, next, TAG_DATA)?;
                    self.recv_buf(ep, next)?;
                    self.send_buf(ep, prev, TAG_DATA)?;
                }
                Ok(())
            }
            Part::QWhileArriving {
                collect_from: Some(from),
            }
            | Part::Collect { from } => {
                for _ in 0..npp {
                    self.recv_buf(ep, from)?;
                }
                Ok(())
            }
            Part::Interfered { streams } => {
                stop_streams(ep, &streams, &mut self.small)?;
                if let Some(f) = &mut self.fwd {
                    f.finish(ep)?;
                }
                self.gather_rates(ep, None)
            }
            Part::StreamSender { to, receiver } => {
                let rate = stream(ep, to, receiver, &mut self.buf, &mut self.small)?;
                self.gather_rates(ep, Some(rate))
            }
            Part::StreamReceiver { from, sender } => {
                receive_stream(ep, from, sender, &mut self.buf, &mut self.small)?;
                self.gather_rates(ep, None)
            }
            _ if matches!(self.exp, Experiment::Interference { .. }) => self.gather_rates(ep, None),
            _ => Ok(()),
        }
    }
}

impl ExperimentKernel {
    /// Every rank: the senders' times per message to rank 0, which keeps their mean.
    fn gather_rates<E: Endpoint>(&mut self, ep: &mut E, mine: Option<f64>) -> Result<()> {
        let data = mine.map(|r| r.to_le_bytes().to_vec()).unwrap_or_default();
        let all = ep.gather(0, &data).phase("collecting the streams' rates")?;
        let Some(all) = all else { return Ok(()) };
        // Rank 0, the root, is the source: its part names the streams.
        let Part::Interfered { streams } = &self.part else {
            return Err(Error::Protocol(
                "the streams' rates reached a rank that is not the source".into(),
            ));
        };
        let mut sum = 0.0;
        for &(s, _) in streams {
            let b: [u8; 8] = all
                .get(s as usize)
                .and_then(|v| v.as_slice().try_into().ok())
                .ok_or_else(|| Error::Protocol(format!("no rate from stream sender {s}")))?;
            sum += f64::from_le_bytes(b);
        }
        // A stream that saw fewer than two acknowledgements has no rate (NaN): the trial's
        // rate is then undefined, not 0.
        self.rates_ns.push(sum / streams.len().max(1) as f64);
        Ok(())
    }
}

/// Rank 0 after an interference trial: ask every sender to stop.
fn stop_streams<E: Endpoint>(
    ep: &mut E,
    streams: &[(Rank, Rank)],
    small: &mut Vec<u8>,
) -> Result<()> {
    for &(a, _) in streams {
        let b = std::mem::take(small);
        *small = ep.send(a, TAG_STOP, b).phase("stopping a stream")?;
    }
    Ok(())
}

/// A stream's sender (§5.2, Appendix A's test 8): [`STREAM_PIPELINE`] messages out, then one
/// more for every acknowledgement, until rank 0 says stop; then the end marker, and every
/// acknowledgement still due. Returns the mean time between acknowledgements, ns (the rate
/// the paper reads at the sender).
fn stream<E: Endpoint>(
    ep: &mut E,
    to: Rank,
    receiver: Rank,
    buf: &mut Vec<u8>,
    small: &mut Vec<u8>,
) -> Result<f64> {
    let (mut sent, mut acked) = (0u64, 0u64);
    for _ in 0..STREAM_PIPELINE {
        *buf = ep.send(to, TAG_DATA, std::mem::take(buf))?;
        sent += 1;
    }
    let (mut first, mut last, mut between) = (None::<u64>, 0u64, 0u64);
    loop {
        let c = ep.recv(Src::Any, TagSel::Any, std::mem::take(small))?;
        *small = c.buf;
        match c.tag {
            TAG_ACK if c.peer == receiver => {
                acked += 1;
                let t = ep.now_ns();
                match first {
                    None => first = Some(t),
                    Some(_) => between += 1,
                }
                last = t;
                *buf = ep.send(to, TAG_DATA, std::mem::take(buf))?;
                sent += 1;
            }
            TAG_STOP if c.peer == 0 => break,
            tag => {
                return Err(Error::Protocol(format!(
                    "stream sender: tag {tag} from rank {} (an acknowledgement from {receiver} or \
                     a stop from 0 expected)",
                    c.peer
                )))
            }
        }
    }
    *small = ep.send(to, TAG_END, std::mem::take(small))?;
    while acked < sent {
        let c = ep.recv(
            Src::Rank(receiver),
            TagSel::Tag(TAG_ACK),
            std::mem::take(small),
        )?;
        *small = c.buf;
        acked += 1;
    }
    Ok(match first {
        Some(f) if between > 0 => (last - f) as f64 / between as f64,
        _ => f64::NAN,
    })
}

/// A stream's receiver: acknowledge every message to `sender` until the end marker.
fn receive_stream<E: Endpoint>(
    ep: &mut E,
    from: Rank,
    sender: Rank,
    buf: &mut Vec<u8>,
    small: &mut Vec<u8>,
) -> Result<()> {
    loop {
        let c = ep.recv(Src::Rank(from), TagSel::Any, std::mem::take(buf))?;
        *buf = c.buf;
        match c.tag {
            TAG_DATA => *small = ep.send(sender, TAG_ACK, std::mem::take(small))?,
            TAG_END => return Ok(()),
            tag => {
                return Err(Error::Protocol(format!(
                    "stream receiver: tag {tag} from rank {from}"
                )))
            }
        }
    }
}

/// Rank 0's user-space forwarding of the interference streams where the transport forwards
/// nothing: between slices of Q it collects what arrived from each sender and sends it on.
#[derive(Debug)]
struct Forwarder {
    streams: Vec<(Rank, Rank)>,
    recv: Vec<Option<ReqId>>,
    send: Vec<Option<ReqId>>,
    spare: Vec<Vec<u8>>,
    ended: Vec<bool>,
    size: usize,
}

impl Forwarder {
    fn new(streams: &[(Rank, Rank)]) -> Self {
        let n = streams.len();
        Forwarder {
            streams: streams.to_vec(),
            recv: vec![None; n],
            send: vec![None; n],
            spare: vec![Vec::new(); 2 * n],
            ended: vec![false; n],
            size: 0,
        }
    }

    fn prepare(&mut self, size: usize) -> Result<()> {
        self.size = size;
        for b in &mut self.spare {
            *b = crate::method::alloc::try_zeroed(size as u64, || {
                format!("a {size}-byte forwarding buffer")
            })?;
        }
        Ok(())
    }

    /// One pass over the streams: post a receive where none is, forward what arrived.
    fn poll<E: Endpoint>(&mut self, ep: &mut E) -> Result<()> {
        for i in 0..self.streams.len() {
            if self.ended[i] {
                continue;
            }
            let (a, b) = self.streams[i];
            let r = match self.recv[i] {
                Some(r) => r,
                None => {
                    let mut buf = self.spare.pop().unwrap_or_default();
                    buf.resize(self.size.max(8), 0);
                    let r = ep.irecv(Src::Rank(a), TagSel::Any, buf)?;
                    self.recv[i] = Some(r);
                    r
                }
            };
            let Some(c) = ep.test(r)? else { continue };
            self.recv[i] = None;
            if let Some(s) = self.send[i].take() {
                self.spare.push(ep.wait(s)?.buf);
            }
            let mut buf = c.buf;
            buf.truncate(c.len);
            self.ended[i] = c.tag == TAG_END;
            self.send[i] = Some(ep.isend(b, c.tag, buf)?);
        }
        Ok(())
    }

    /// After the timed loop: forward until every stream's end marker has gone on, then let
    /// the last sends finish.
    fn finish<E: Endpoint>(&mut self, ep: &mut E) -> Result<()> {
        let (start, limit) = (std::time::Instant::now(), ep.timeout());
        while self.ended.iter().any(|e| !e) {
            self.poll(ep)?;
            if start.elapsed() > limit {
                let left: Vec<Rank> = (0..self.streams.len())
                    .filter(|&i| !self.ended[i])
                    .map(|i| self.streams[i].0)
                    .collect();
                return Err(Error::Timeout {
                    rank: ep.rank(),
                    what: format!("the end of the streams from ranks {left:?}"),
                    timeout: limit,
                });
            }
        }
        for i in 0..self.streams.len() {
            if let Some(s) = self.send[i].take() {
                self.spare.push(ep.wait(s)?.buf);
            }
            self.ended[i] = false;
        }
        Ok(())
    }
}

/// Which of seed 001's programs runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum Suite {
    /// `commbench echo`: the echo over each distance, busy (§3.2) and idle (§5.1).
    Echo,
    /// `commbench overhead`: the echoes, then every experiment of §3.3-§3.4.
    Overhead,
    /// `commbench interference`: what §5.2's prediction needs, then 1..=`streams` streams.
    Interference {
        /// Most streams.
        streams: u32,
    },
}

/// Seed 001's measuring program: Q calibrated, then its experiments in the paper's order,
/// each a kernel of the engine over every size.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SixTimes {
    /// Which program.
    pub suite: Suite,
    /// The echo's distances, `lo..=hi` hops.
    pub hops: (u32, u32),
    /// Q's loop.
    pub q: QKind,
    /// Messages per clock reading at least (Appendix A's `NOTIMES` = 100).
    pub messages: u64,
}

impl SixTimes {
    /// npp of every experiment: at least `messages`, and enough that one clock tick is at
    /// most [`TICK_SHARE_NS`] of a per-message value (`res_timing / npp`), so that a coarse
    /// tick does not bias the result.
    pub fn npp(&self, res_timing_ns: f64) -> u64 {
        let by_tick = if res_timing_ns.is_finite() && res_timing_ns > 0.0 {
            (res_timing_ns / TICK_SHARE_NS).ceil().min(1e9) as u64
        } else {
            1
        };
        self.messages.max(by_tick).max(1)
    }

    /// The experiments after Q's calibration, in order, with the sizes of each. The idle
    /// echoes come first: the amounts of Q of every later step derive from them.
    pub fn steps(&self, placement: Placement, sizes: &[u64]) -> Vec<(Experiment, Vec<u64>)> {
        let (lo, hi) = self.hops;
        let echoes = |busy: bool| (lo..=hi).map(move |hops| Experiment::Echo { hops, busy });
        let mut v: Vec<Experiment> = Vec::new();
        match self.suite {
            Suite::Echo => {
                v.extend(echoes(false));
                v.extend(echoes(true));
            }
            Suite::Overhead => {
                v.extend(echoes(false));
                v.extend(echoes(true));
                v.extend([Experiment::Q, Experiment::R, Experiment::AU, Experiment::FS]);
                if placement.transport_forwards() {
                    v.push(Experiment::RS);
                }
                v.push(Experiment::FEU2);
            }
            Suite::Interference { streams } => {
                v.push(Experiment::Echo {
                    hops: 1,
                    busy: false,
                });
                v.extend([Experiment::Q, Experiment::R]);
                if placement.transport_forwards() {
                    v.push(Experiment::RS);
                } else {
                    v.extend([Experiment::AU, Experiment::FS]);
                }
                v.extend((1..=streams).map(|streams| Experiment::Interference { streams }));
            }
        }
        v.into_iter().map(|e| (e, sizes.to_vec())).collect()
    }

    /// The distance of the first idle echo, whose round trips set the amounts of Q.
    fn first_hops(&self) -> u32 {
        match self.suite {
            Suite::Interference { .. } => 1,
            _ => self.hops.0,
        }
    }

    /// Check that every experiment's ranks exist under `placement`.
    pub fn check(&self, placement: Placement, sizes: &[u64]) -> Result<()> {
        let (lo, hi) = self.hops;
        if lo == 0 || lo > hi || hi > MAX_HOPS {
            return Err(Error::Config(format!(
                "hops {lo}..{hi}: a range within 1..{MAX_HOPS}"
            )));
        }
        if sizes.is_empty() {
            return Err(Error::Config("no message size".into()));
        }
        for (e, _) in self.steps(placement, sizes) {
            for me in 0..placement.size {
                part_of(e, me, placement)?;
            }
            placement.dest(e)?;
        }
        Ok(())
    }

    /// Ranks a run needs where every rank reaches every other directly (the echo's path,
    /// or the interference streams and rank 0).
    pub fn ranks_needed(&self) -> u32 {
        let path = self.hops.1 + 1;
        match self.suite {
            Suite::Interference { streams } => (2 * streams + 1).max(2),
            _ => path.max(2),
        }
    }
}

/// Seed 001's programs: each experiment's time is one message's (or one reading's).
impl Benchmark for SixTimes {
    fn command(&self) -> &'static str {
        match self.suite {
            Suite::Echo => "echo",
            Suite::Overhead => "overhead",
            Suite::Interference { .. } => "interference",
        }
    }

    fn trips(&self, _size: u64) -> u64 {
        1
    }

    /// A message, two per stream where rank 0 forwards the interference streams, and the
    /// messages of one reading that rank 0 holds unread (a+u's, r's) or a+u's dest posts.
    fn buffer_bytes(&self, _cfg: &MethodConfig, size: u64) -> Option<u64> {
        let streams = match self.suite {
            Suite::Interference { streams } => u64::from(streams),
            _ => 0,
        };
        (1 + 2 * streams)
            .checked_add(self.messages)?
            .checked_mul(size.checked_add(PER_MESSAGE_OVERHEAD)?)
    }

    /// Rank 0 forwards whatever the interference streams send it.
    fn wildcards(&self) -> bool {
        matches!(self.suite, Suite::Interference { .. })
    }

    fn ranks_needed(&self) -> u32 {
        SixTimes::ranks_needed(self)
    }

    fn check_placement(&self, hypercube: Option<u32>, size: u32, sizes: &[u64]) -> Result<()> {
        self.check(Placement { hypercube, size }, sizes)
    }
}

impl KernelSpec for SixTimes {
    type Kernel<E: Endpoint> = ExperimentKernel;

    /// The kernel of Q alone (the program runs every experiment itself, [`SixTimes::run`]).
    fn kernel<E: Endpoint>(&self, me: Rank, _cfg: &MethodConfig) -> Result<ExperimentKernel> {
        ExperimentKernel::new(
            Experiment::Q,
            me,
            Placement {
                hypercube: None,
                size: 2,
            },
            self.q,
            Vec::new(),
        )
    }

    fn sizes(&self, cfg: &MethodConfig) -> Vec<u64> {
        match self.suite {
            Suite::Interference { .. } => vec![INTERFERENCE_BYTES],
            _ => cfg.sizes.clone(),
        }
    }

    fn run<E: Endpoint>(&self, m: &Measurement<'_, Self>, ep: &mut E) -> Result<()> {
        let placement = Placement::of(ep);
        let sizes = self.sizes(&m.cfg);
        let cfg = MethodConfig {
            sizes: sizes.clone(),
            source: 0,
            dest: placement.neighbour()?,
            ..m.cfg.clone()
        };
        cfg.validate(ep.size())?;
        self.check(placement, &sizes)?;
        let timer = m.start(ep, &cfg)?;
        // The coarser of the resolution measured and the one the clock claims: a short
        // characterisation may see no tick go by.
        let res = timer.1.max(ep.claimed_resolution_ns().unwrap_or(0.0));
        let npp = self.npp(res);
        let ns_per_iter = calibrate(ep, self.q, &cfg, (timer.0, res), m.collected())?;
        let steps = self.steps(placement, &sizes);
        let total: usize = steps.iter().map(|s| s.1.len()).sum();
        let mut first = 0;
        let mut amounts: Vec<Amounts> = Vec::new();
        for (exp, sizes) in steps {
            // The streams' rate needs many acknowledgements inside the window.
            let npp = match exp {
                Experiment::Interference { .. } => npp.max(INTERFERENCE_SLICES),
                _ => npp,
            };
            let step_cfg = MethodConfig {
                sizes: sizes.clone(),
                npp: NppChoice::Fixed(npp),
                dest: placement.dest(exp)?,
                // The streams start with the trial; a long window makes up for it.
                warmup: if matches!(exp, Experiment::Interference { .. }) {
                    0
                } else {
                    cfg.warmup
                },
                ..cfg.clone()
            };
            let mut k = ExperimentKernel::new(exp, ep.rank(), placement, self.q, amounts.clone())?;
            let at = Steps { first, total };
            m.measure_kernel(ep, &mut k, &step_cfg, timer, at)
                .phase_with(|| exp.name().to_string())?;
            first += sizes.len();
            if let Experiment::Interference { streams } = exp {
                keep_rates(ep, &k, streams, cfg.trials, m.collected());
            }
            if exp
                == (Experiment::Echo {
                    hops: self.first_hops(),
                    busy: false,
                })
            {
                amounts = share_amounts(ep, &sizes, ns_per_iter, m.collected(), exp.name())?;
            }
        }
        ep.barrier().phase("final barrier")
    }
}

/// Rank 0: the interference streams' rates of the last `trials` trials as a point of their
/// own ([`rate_name`]): one time per message (ns) per trial.
fn keep_rates<E: Endpoint>(
    ep: &E,
    k: &ExperimentKernel,
    streams: u32,
    trials: u64,
    collected: &std::sync::Mutex<Collected>,
) {
    if ep.rank() != 0 {
        return;
    }
    let r = k.rates_ns();
    let from = r.len().saturating_sub(trials as usize);
    let trial_ns: Vec<i64> = r[from..]
        .iter()
        .filter(|x| x.is_finite() && **x > 0.0)
        .map(|&x| x.round() as i64)
        .collect();
    // No stream saw two acknowledgements in any trial: there is no rate to keep.
    if trial_ns.is_empty() {
        return;
    }
    with_collected(collected, |c| {
        c.points.push(RawPoint {
            pattern: rate_name(streams).into(),
            size: INTERFERENCE_BYTES,
            npp: 1,
            npp_calculated: None,
            median_ppt_ns: None,
            trips_per_iteration: 1,
            trial_ns,
            trial_start_ns: Vec::new(),
            queue: None,
            buffers: None,
            npp_check: None,
            until_ci: None,
            pair_trial_ns: Vec::new(),
            sweep: None,
        })
    });
    settle(collected);
}

/// Seed 001 §3.1 / Appendix A: the time of Q without I/O, measured on rank 0 before anything
/// else and shared: returns ns per iteration of Q's loop. Rank 0 keeps the readings as a
/// point ([`CALIBRATION`]): `npp` iterations per reading, `trials` readings. `(min_ov, res)`
/// of the clock: a reading lasts at least a millisecond and 2000 resolutions.
fn calibrate<E: Endpoint>(
    ep: &mut E,
    q: QKind,
    cfg: &MethodConfig,
    (min_ov, res): (i64, f64),
    collected: &std::sync::Mutex<Collected>,
) -> Result<f64> {
    let mut word = Vec::new();
    if ep.rank() == 0 {
        let long = (2000.0 * res).clamp(1e6, 1e12) as i64;
        // Grow the loop until one reading lasts long enough (of real or virtual time).
        let mut iters: u64 = 1000;
        let time = |ep: &mut E, n: u64| {
            let t1 = ep.now_ns();
            ep.compute(Work { q, iters: n });
            i64::try_from(ep.now_ns().saturating_sub(t1))
                .unwrap_or(i64::MAX)
                .saturating_sub(min_ov)
        };
        while iters < 1 << 40 && time(ep, iters) < long {
            iters *= 4;
        }
        let readings: Vec<i64> = (0..cfg.trials.max(1)).map(|_| time(ep, iters)).collect();
        let mut sorted = readings.clone();
        sorted.sort_unstable();
        let per = sorted[sorted.len() / 2].max(1) as f64 / iters as f64;
        word = per.to_le_bytes().to_vec();
        with_collected(collected, |c| {
            c.points.push(RawPoint {
                pattern: CALIBRATION.into(),
                size: 0,
                npp: iters,
                npp_calculated: None,
                median_ppt_ns: None,
                trips_per_iteration: 1,
                trial_ns: readings,
                trial_start_ns: Vec::new(),
                queue: None,
                buffers: None,
                npp_check: None,
                until_ci: None,
                pair_trial_ns: Vec::new(),
                sweep: None,
            })
        });
        settle(collected);
    }
    ep.broadcast(0, &mut word)
        .phase("sharing Q's calibration")?;
    let b: [u8; 8] = word
        .as_slice()
        .try_into()
        .map_err(|_| Error::Protocol(format!("Q's calibration of {} bytes", word.len())))?;
    Ok(f64::from_le_bytes(b))
}

/// After the idle echo at the smallest distance: rank 0 turns its round trip at each size
/// into the amounts of Q of the later experiments ([`Amounts::from_round_trip`]) and shares
/// them.
fn share_amounts<E: Endpoint>(
    ep: &mut E,
    sizes: &[u64],
    ns_per_iter: f64,
    collected: &std::sync::Mutex<Collected>,
    pattern: &str,
) -> Result<Vec<Amounts>> {
    let mut times: Vec<i64> = Vec::new();
    if ep.rank() == 0 {
        with_collected(collected, |c| {
            for &s in sizes {
                let rt = c
                    .points
                    .iter()
                    .rev()
                    .find(|p| p.pattern == pattern && p.size == s)
                    .map_or(0.0, |p| p.median_one_way_us() * 1000.0);
                times.push(rt.round() as i64);
            }
        });
    }
    let mut bytes = encode_i64s(&times);
    ep.broadcast(0, &mut bytes)
        .phase("sharing the round trips")?;
    let times = decode_i64s(&bytes)?;
    if times.len() != sizes.len() {
        return Err(Error::Protocol(format!(
            "{} round trips for {} sizes",
            times.len(),
            sizes.len()
        )));
    }
    Ok(sizes
        .iter()
        .zip(times)
        .map(|(&s, rt)| Amounts::from_round_trip(s, rt as f64, ns_per_iter))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        let mut all = vec![
            Experiment::Q,
            Experiment::R,
            Experiment::AU,
            Experiment::FS,
            Experiment::RS,
            Experiment::FEU2,
        ];
        for h in 1..=MAX_HOPS {
            all.push(Experiment::Echo {
                hops: h,
                busy: true,
            });
            all.push(Experiment::Echo {
                hops: h,
                busy: false,
            });
        }
        for s in 1..=MAX_STREAMS {
            all.push(Experiment::Interference { streams: s });
            assert_eq!(rate_streams(rate_name(s)), Some(s));
        }
        for e in all {
            assert_eq!(Experiment::from_name(e.name()), Some(e), "{}", e.name());
        }
        assert_eq!(Experiment::from_name("pingpong"), None);
    }

    #[test]
    fn placement_on_a_cube_and_on_a_path() {
        let cube = Placement {
            hypercube: Some(6),
            size: 64,
        };
        assert_eq!(cube.echo_path(5).unwrap(), vec![0, 31]);
        assert_eq!(cube.forwarding().unwrap(), Some((1, 2)));
        assert_eq!(cube.streams(3).unwrap(), vec![(1, 2), (4, 8), (16, 32)]);
        assert!(cube.streams(4).is_err());
        assert!(cube.echo_path(7).is_err());
        let flat = Placement {
            hypercube: None,
            size: 4,
        };
        assert_eq!(flat.echo_path(3).unwrap(), vec![0, 1, 2, 3]);
        let e = flat.echo_path(4).unwrap_err().to_string();
        assert!(e.contains("give it 5"), "{e}");
        assert_eq!(flat.forwarding().unwrap(), None);
        assert!(flat.dest(Experiment::RS).is_err());
        assert_eq!(
            Placement {
                hypercube: None,
                size: 7
            }
            .streams(3)
            .unwrap(),
            vec![(1, 2), (3, 4), (5, 6)]
        );
    }

    #[test]
    fn npp_spreads_a_coarse_tick() {
        let s = SixTimes {
            suite: Suite::Overhead,
            hops: (1, 5),
            q: QKind::Int,
            messages: 100,
        };
        assert_eq!(s.npp(30.0), 100);
        assert_eq!(s.npp(146_286.0), 2926);
        assert_eq!(s.npp(f64::NAN), 100);
        assert_eq!(s.ranks_needed(), 6);
    }

    #[test]
    fn amounts_follow_the_round_trip() {
        let a = Amounts::from_round_trip(16, 1000.0, 2.0);
        assert_eq!((a.window, a.gap, a.busy), (1000, 500, 63));
        let z = Amounts::from_round_trip(16, 0.0, 0.0);
        assert!(z.window >= 2 && z.busy >= 1);
    }
}
