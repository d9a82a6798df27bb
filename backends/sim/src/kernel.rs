//! The discrete-event kernel (design §6): integer virtual time in nanoseconds, events ordered
//! by (time, sequence number) in a binary heap, one stackful coroutine per node that runs the
//! program, all driven on one thread.
//!
//! The model (seed 001 §2; docs/simulator.md has the formulas):
//! * CPU: one per node. User work (F, A, U, clock reads, polls, compute) runs when no handler
//!   does. Handlers (R, S) run FIFO at interrupt level: a handler charged at time `t` runs
//!   from `max(t, end of the previous handler)` for its duration, and user work in progress
//!   is pushed back by exactly that duration.
//! * Network: e-cube routing (lowest differing dimension first), store-and-forward, one FIFO
//!   channel per (node, dimension) in each direction, held for E(n) (+ jitter) per hop. When a
//!   hop starts, S(n) is charged to the sending node and R(n) to the receiving node, so on an
//!   idle machine neither lengthens the message's path; a forwarding node pays R then S but no
//!   F, A, U. On a tree of switches (`[tree]`, [`crate::net`]) the channels join each vertex to
//!   its parent, a message goes up to the lowest switch above both ends and down, and a
//!   switch, having no CPU, pays nothing: S is charged only where a hop leaves a node (the
//!   source) and R only where one reaches a node (the destination).
//! * Matching (Underwood & Brightwell §5): each search of a node's posted-receive queue (at a
//!   delivery) or unexpected queue (at a post) walks it in order and charges
//!   `match_ns_per_entry` per entry inspected to that node's CPU as a handler.
//! * Faults (optional): E of each channel and F, U, R, S of each node are scaled by the
//!   product of the factors of the faults on them whose window holds the virtual time at
//!   which the step starts (a table of the static ones built once per run, empty and skipped
//!   when there are none; the few with a window looked up at each step). A and hop jitter
//!   are never scaled.
//! * Receive buffers (optional bound): the last hop starts only when the destination has room
//!   for the message; the room is given back when the program has collected it (after U).

use crate::config::{FaultTable, SimConfig};
use crate::endpoint::{Coll, EpInfo, Req, Resp, SimEndpoint};
use crate::net::Net;
use commbench_core::method::limits;
use commbench_core::method::stop::StopFlag;
use commbench_core::transport::out_of_band;
use commbench_core::transport::BackendInfo;
use commbench_core::{Completion, Error, Program, Rank, ReqId, Result, Src, Tag, TagSel};
use corosensei::stack::DefaultStack;
use corosensei::{CoroutineResult, ScopedCoroutine, ScopedCoroutineRef};
use std::cmp::Ordering;
use std::collections::{BinaryHeap, VecDeque};

/// What a simulation did, besides the program outputs.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct SimStats {
    /// Events processed by the kernel.
    pub events: u64,
    /// Virtual time (ns) when the last event ran.
    pub end_ns: u64,
    /// Messages delivered to their destination.
    pub messages: u64,
    /// Channel hops made (a message over d hops counts d).
    pub hops: u64,
    /// Per node (all 2^d), virtual CPU time spent in the R and S handlers and in matching
    /// (`match_ns_per_entry` per queue entry inspected).
    pub handler_ns: Vec<u64>,
    /// Per node (all 2^d), queue entries inspected by matching: posted receives walked when
    /// a message was delivered there, unexpected messages walked when a receive was posted
    /// there (position + 1 on a hit, the whole queue on a miss). Counted whatever
    /// `match_ns_per_entry` is.
    pub match_entries: Vec<u64>,
    /// Per rank, virtual time at which its program returned.
    pub finish_ns: Vec<u64>,
}

const EV_USER: u8 = 0;
const EV_WAKE: u8 = 1;
const EV_HOP: u8 = 2;
/// A bounded wait's limit: the node is woken with a timeout unless the wait ended first.
const EV_TIMEOUT: u8 = 3;

#[derive(Debug, Clone, Copy)]
struct Ev {
    t: u64,
    seq: u64,
    kind: u8,
    live: bool,
    id: u32,
}

impl PartialEq for Ev {
    fn eq(&self, o: &Self) -> bool {
        (self.t, self.seq) == (o.t, o.seq)
    }
}
impl Eq for Ev {}
impl PartialOrd for Ev {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Ev {
    // Reversed: the heap pops the earliest (time, seq).
    fn cmp(&self, o: &Self) -> Ordering {
        (o.t, o.seq).cmp(&(self.t, self.seq))
    }
}

/// What a node's current user work finishes.
#[derive(Debug, Clone, Copy)]
enum Pending {
    Nothing,
    /// F of message `msg` of send `req`; `more` of its span's messages follow it.
    Inject {
        msg: u32,
        req: ReqId,
        more: u32,
    },
    /// A of the next receive of `req`'s span.
    Post {
        req: ReqId,
    },
    Poll {
        req: ReqId,
    },
    Unformat {
        req: ReqId,
        test: bool,
    },
    Clock,
    Compute,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Blocked {
    No,
    Wait(ReqId),
    Coll,
}

#[derive(Debug)]
enum RState {
    Free,
    /// A send of the `len` bytes at `start` of `buf` (each of its span's messages copied out
    /// when its F starts; complete once the last is injected).
    SendDone {
        buf: Vec<u8>,
        peer: Rank,
        tag: Tag,
        start: usize,
        len: usize,
    },
    /// A receive span: `count` receives into the same bytes of one buffer.
    Recv(Recv),
}

/// A receive request of `count` receives (1 for [`commbench_core::Endpoint::irecv`]), each
/// of at most `cap` bytes landing at `start` of `buf`. They are posted one after another
/// (each after its own A), matched as that many separately posted receives would be, and
/// collected in order (each after its own U): exactly the events of `count` `irecv`s followed
/// by a `wait` on each, on one buffer.
#[derive(Debug)]
struct Recv {
    src: Src,
    tag: TagSel,
    buf: Vec<u8>,
    start: usize,
    cap: usize,
    count: u32,
    /// Receives posted so far.
    posted: u32,
    /// Receives met by a message (landed or failed).
    matched: u32,
    /// Receives collected by the program.
    collected: u32,
    /// Met and not yet collected, oldest first.
    units: Units,
    /// Sender, tag and length of the last receive collected.
    last: (Rank, Tag, usize),
}

impl Recv {
    /// Receives posted and still waiting for a message: the entries this request stands for
    /// in the posted-receive queue (it is in the queue exactly when this is not 0).
    #[inline]
    fn waiting(&self) -> u32 {
        self.posted - self.matched
    }
}

/// One receive of a span that a message has met.
#[derive(Debug)]
enum Unit {
    Landed {
        peer: Rank,
        tag: Tag,
        len: usize,
        held: u64,
    },
    Failed(Error),
}

/// The met receives of a span in order: the first inline (a span of one never allocates),
/// the rest behind it.
#[derive(Debug, Default)]
struct Units {
    head: Option<Unit>,
    rest: VecDeque<Unit>,
}

impl Units {
    fn push(&mut self, u: Unit) {
        if self.head.is_none() {
            self.head = Some(u);
        } else {
            self.rest.push_back(u);
        }
    }

    fn front(&self) -> Option<&Unit> {
        self.head.as_ref()
    }

    fn pop(&mut self) -> Option<Unit> {
        let u = self.head.take();
        self.head = self.rest.pop_front();
        u
    }
}

/// What finishing a piece of user work leads to: an answer for the program (or none: it
/// stays suspended), or more user work on its behalf before the answer.
enum Step {
    Answer(Option<Resp>),
    Then(u64, Pending),
}

#[derive(Debug)]
struct Node {
    hbusy: u64,
    user_active: bool,
    user_finish: u64,
    pending: Pending,
    blocked: Blocked,
    spinning: bool,
    last_poll: Option<ReqId>,
    reqs: Vec<(u32, RState)>,
    free_reqs: Vec<u32>,
    posted: VecDeque<u32>,
    unexpected: VecDeque<u32>,
    buffered: u64,
    space_waiters: VecDeque<u32>,
    wake: Option<Resp>,
    done: bool,
    /// Whether its program fell silent (a `[[silent]]` node): it is never resumed again.
    silent: bool,
    /// The bound of the wait under way, virtual ns.
    wait_limit: Option<u64>,
    /// When the blocked wait times out (0: not bounded).
    timeout_at: u64,
    handler_ns: u64,
    match_entries: u64,
    finish_ns: u64,
}

impl Node {
    fn new() -> Self {
        Node {
            hbusy: 0,
            user_active: false,
            user_finish: 0,
            pending: Pending::Nothing,
            blocked: Blocked::No,
            spinning: false,
            last_poll: None,
            reqs: Vec::new(),
            free_reqs: Vec::new(),
            posted: VecDeque::new(),
            unexpected: VecDeque::new(),
            buffered: 0,
            space_waiters: VecDeque::new(),
            wake: None,
            done: false,
            silent: false,
            wait_limit: None,
            timeout_at: 0,
            handler_ns: 0,
            match_entries: 0,
            finish_ns: 0,
        }
    }

    fn slot(&self, req: ReqId) -> Option<usize> {
        let i = (req.0 & 0xFFFF_FFFF) as usize;
        match self.reqs.get(i) {
            Some((g, s)) if *g as u64 == req.0 >> 32 && !matches!(s, RState::Free) => Some(i),
            _ => None,
        }
    }

    fn alloc(&mut self, st: RState) -> ReqId {
        if let Some(i) = self.free_reqs.pop() {
            let s = &mut self.reqs[i as usize];
            s.0 = s.0.wrapping_add(1);
            s.1 = st;
            return ReqId(((s.0 as u64) << 32) | i as u64);
        }
        let i = self.reqs.len() as u64;
        self.reqs.push((0, st));
        ReqId(i)
    }

    fn take(&mut self, i: usize) -> RState {
        self.free_reqs.push(i as u32);
        std::mem::replace(&mut self.reqs[i].1, RState::Free)
    }
}

#[derive(Debug)]
struct Msg {
    src: Rank,
    dest: Rank,
    tag: Tag,
    /// The bytes it carries: all, or the first `carry_bytes`.
    data: Vec<u8>,
    /// The message's length.
    len: usize,
    held: u64,
    e_ns: u64,
    r_ns: u64,
    s_ns: u64,
}

#[derive(Debug, Default)]
struct Chan {
    queue: VecDeque<u32>,
    busy: bool,
    stalled: bool,
    cur: u32,
}

#[derive(Debug, Default)]
struct CollState {
    count: u32,
    arrived: Vec<Option<Coll>>,
}

/// The kernel's state apart from the coroutines.
struct Kernel<'c> {
    cfg: &'c SimConfig,
    /// A stop asked for from outside, and when the kernel first saw it.
    stop: Option<&'c StopFlag>,
    stop_seen: Option<std::time::Instant>,
    faults: FaultTable,
    net: Net,
    /// Vertices below this are nodes (CPUs); the rest are a tree's switches.
    cpus: u32,
    ranks: u32,
    now: u64,
    seq: u64,
    heap: BinaryHeap<Ev>,
    live: u64,
    idle_polls: u64,
    nodes: Vec<Node>,
    chans: Vec<Chan>,
    msgs: Vec<Msg>,
    free_msgs: Vec<u32>,
    coll: CollState,
    /// When each rank's program falls silent (`u64::MAX`: never).
    silent_from: Vec<u64>,
    rng: u64,
    events: u64,
    messages: u64,
    hops: u64,
}

/// A failure of the simulator itself (a state its own bookkeeping should never reach).
pub(crate) fn sim_error(message: impl Into<String>) -> Error {
    Error::Backend {
        backend: "sim",
        message: message.into(),
    }
}

fn not_found(req: ReqId) -> Error {
    Error::Invalid(format!("unknown or finished request {}", req.0))
}

/// The answer to a `test` (`test`) or a `wait` that collects `c`.
fn answer(test: bool, c: Result<Completion>) -> Resp {
    if test {
        Resp::Maybe(c.map(Some))
    } else {
        Resp::Done(c)
    }
}

fn describe_src(s: Src) -> String {
    match s {
        Src::Any => "any source".into(),
        Src::Rank(r) => r.to_string(),
    }
}

fn describe_tag(t: TagSel) -> String {
    match t {
        TagSel::Any => "any".into(),
        TagSel::Tag(t) => t.to_string(),
    }
}

impl<'c> Kernel<'c> {
    fn new(cfg: &'c SimConfig) -> Self {
        let nodes = cfg.nodes();
        let net = Net::of(cfg);
        let ranks = cfg.ranks();
        let mut chans = Vec::new();
        chans.resize_with(net.channels(nodes) as usize, Chan::default);
        let mut coll = CollState::default();
        coll.arrived.resize_with(ranks as usize, || None);
        Kernel {
            cfg,
            stop: None,
            stop_seen: None,
            faults: FaultTable::new(cfg),
            net,
            cpus: nodes,
            ranks,
            now: 0,
            seq: 0,
            heap: BinaryHeap::with_capacity(4 * nodes as usize),
            live: 0,
            idle_polls: 0,
            nodes: (0..nodes).map(|_| Node::new()).collect(),
            chans,
            msgs: Vec::new(),
            free_msgs: Vec::new(),
            coll,
            silent_from: (0..ranks)
                .map(|r| cfg.silent_from_ns(r).unwrap_or(u64::MAX))
                .collect(),
            rng: cfg.seed ^ 0x9E37_79B9_7F4A_7C15,
            events: 0,
            messages: 0,
            hops: 0,
        }
    }

    #[inline]
    fn push(&mut self, t: u64, kind: u8, id: u32, live: bool) {
        self.seq += 1;
        if live {
            self.live += 1;
        }
        self.heap.push(Ev {
            t,
            seq: self.seq,
            kind,
            live,
            id,
        });
    }

    /// splitmix64.
    fn random(&mut self) -> u64 {
        self.rng = self.rng.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.rng;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn wake(&mut self, node: u32, r: Resp) {
        self.nodes[node as usize].wake = Some(r);
        self.push(self.now, EV_WAKE, node, true);
    }

    /// Charge an interrupt handler of `dur` ns to `node`'s CPU now (FIFO behind running
    /// handlers); user work in progress is pushed back by `dur`.
    #[inline]
    fn charge(&mut self, node: u32, dur: u64) {
        let now = self.now;
        let n = &mut self.nodes[node as usize];
        let hs = now.max(n.hbusy);
        n.hbusy = hs.saturating_add(dur);
        n.handler_ns = n.handler_ns.saturating_add(dur);
        if n.user_active && hs < n.user_finish {
            n.user_finish = n.user_finish.saturating_add(dur);
        }
    }

    /// A search of one of `node`'s matching queues inspected `entries` entries: count them and
    /// charge `round(entries * match_ns_per_entry)` ns to the node's CPU now, as a handler, so
    /// that the user work that follows (the wake-up of a waiting receiver, the next call after
    /// an `irecv`) starts that much later (Underwood & Brightwell §5: a NIC that walks its
    /// queues linearly). The match itself is decided now, not at the end of that time.
    fn charge_match(&mut self, node: u32, entries: usize) {
        let entries = entries as u64;
        let n = &mut self.nodes[node as usize];
        n.match_entries = n.match_entries.saturating_add(entries);
        let dur = self.cfg.match_ns(entries);
        if dur > 0 {
            self.charge(node, dur);
        }
    }

    /// Start `dur` ns of user work on `node`; `then` says what its completion does. Work that
    /// ends now completes at once and its answer is returned.
    fn start_user(&mut self, node: u32, dur: u64, then: Pending) -> Option<Resp> {
        if self.begin_user(node, dur, then) {
            return self.finish_user(node);
        }
        None
    }

    /// Start `dur` ns of user work on `node` that `then` finishes; true when it ends now (it
    /// is then only pending, for the caller to finish at once).
    fn begin_user(&mut self, node: u32, dur: u64, then: Pending) -> bool {
        let now = self.now;
        let n = &mut self.nodes[node as usize];
        let finish = now.max(n.hbusy).saturating_add(dur);
        n.pending = then;
        if finish == now {
            return true;
        }
        n.user_active = true;
        n.user_finish = finish;
        let live = !n.spinning;
        self.push(finish, EV_USER, node, live);
        false
    }

    /// Run a step outside [`Kernel::finish_user`]: its answer, or its work started.
    fn run_step(&mut self, node: u32, step: Step) -> Option<Resp> {
        match step {
            Step::Answer(r) => r,
            Step::Then(dur, then) => self.start_user(node, dur, then),
        }
    }

    /// The user work of `node` has ended. A span's next step (the next message's F, the next
    /// receive's A or U) starts here, in a loop rather than by recursion, so that a span of
    /// any count whose steps take no time needs no stack.
    fn finish_user(&mut self, node: u32) -> Option<Resp> {
        loop {
            let n = &mut self.nodes[node as usize];
            n.user_active = false;
            let pending = std::mem::replace(&mut n.pending, Pending::Nothing);
            match self.finish_step(node, pending) {
                Step::Answer(r) => return r,
                Step::Then(dur, then) => {
                    if !self.begin_user(node, dur, then) {
                        return None;
                    }
                }
            }
        }
    }

    fn finish_step(&mut self, node: u32, pending: Pending) -> Step {
        match pending {
            Pending::Nothing => Step::Answer(None),
            Pending::Inject { msg, req, more } => {
                if out_of_band(self.msgs[msg as usize].tag) {
                    self.deliver(msg);
                } else {
                    self.inject(msg, node);
                }
                if more == 0 {
                    return Step::Answer(Some(Resp::Id(Ok(req))));
                }
                match self.next_send(node, req) {
                    Ok((msg, f)) => Step::Then(
                        f,
                        Pending::Inject {
                            msg,
                            req,
                            more: more - 1,
                        },
                    ),
                    Err(e) => Step::Answer(Some(Resp::Id(Err(e)))),
                }
            }
            Pending::Post { req } => match self.post_recv(node, req) {
                Ok(Some(a)) => Step::Then(a, Pending::Post { req }),
                Ok(None) => Step::Answer(Some(Resp::Id(Ok(req)))),
                Err(e) => Step::Answer(Some(Resp::Id(Err(e)))),
            },
            Pending::Poll { req } => self.poll_done(node, req),
            Pending::Unformat { req, test } => self.unformat_done(node, req, test),
            Pending::Clock => {
                let tick = self.cfg.tick_ns;
                Step::Answer(Some(Resp::Time(self.now / tick * tick)))
            }
            Pending::Compute => Step::Answer(Some(Resp::Unit(Ok(())))),
        }
    }

    /// U of an `len`-byte message collected by `node`'s program (scaled by its faults).
    #[inline]
    fn u_ns(&self, node: u32, len: u64) -> u64 {
        self.faults
            .node_ns(self.now, node, self.cfg.times.u.ns(len))
    }

    /// F of an `len`-byte message sent by `node` (scaled by its faults).
    #[inline]
    fn f_ns(&self, node: u32, len: u64) -> u64 {
        self.faults
            .node_ns(self.now, node, self.cfg.times.f.ns(len))
    }

    /// The next message of send span `req` of `node`, copied out of its buffer as a separate
    /// `isend` of those bytes would copy it, and its F. On failure (no memory for the copy)
    /// the request ends; the messages already injected stay in flight, as those of the
    /// `isend`s before a failed one would.
    fn next_send(&mut self, node: u32, req: ReqId) -> Result<(u32, u64)> {
        let n = &mut self.nodes[node as usize];
        let i = n.slot(req).ok_or_else(|| not_found(req))?;
        let RState::SendDone {
            buf,
            peer,
            tag,
            start,
            len,
        } = &mut n.reqs[i].1
        else {
            return Err(sim_error("a send span continued in the wrong state"));
        };
        let (dest, tag, start, len) = (*peer, *tag, *start, *len);
        let buf = std::mem::take(buf);
        let m = self.alloc_msg(node, dest, tag, &buf[start..start + len]);
        let n = &mut self.nodes[node as usize];
        if let RState::SendDone { buf: b, .. } = &mut n.reqs[i].1 {
            *b = buf;
        }
        match m {
            Ok(m) => Ok((m, self.f_ns(node, len as u64))),
            Err(e) => {
                n.take(i);
                Err(e)
            }
        }
    }

    /// What the program's next collection of receive span `req` (slot `i`) does: U of its
    /// next met receive, its error, or waiting for a message (blocked, or a failed `test`).
    fn collect_next(&mut self, node: u32, i: usize, req: ReqId, test: bool) -> Step {
        let n = &mut self.nodes[node as usize];
        let RState::Recv(r) = &n.reqs[i].1 else {
            let e = sim_error("a receive collected in the wrong state");
            return Step::Answer(Some(answer(test, Err(e))));
        };
        match r.units.front() {
            Some(&Unit::Landed { len, tag, .. }) => {
                let u = if out_of_band(tag) {
                    0
                } else {
                    self.u_ns(node, len as u64)
                };
                Step::Then(u, Pending::Unformat { req, test })
            }
            Some(Unit::Failed(_)) => {
                let e = self.withdraw(node, i);
                Step::Answer(Some(answer(test, Err(e))))
            }
            None if test => {
                n.spinning = true;
                n.last_poll = Some(req);
                Step::Answer(Some(Resp::Maybe(Ok(None))))
            }
            None => {
                n.blocked = Blocked::Wait(req);
                if let Some(limit) = n.wait_limit {
                    let at = self.now.saturating_add(limit).max(1);
                    n.timeout_at = at;
                    self.push(at, EV_TIMEOUT, node, true);
                }
                Step::Answer(None)
            }
        }
    }

    /// U of the next met receive of span `req` has ended: the program has that message (its
    /// buffer room is given back); the request completes with the last of them.
    fn unformat_done(&mut self, node: u32, req: ReqId, test: bool) -> Step {
        let n = &mut self.nodes[node as usize];
        let Some(i) = n.slot(req) else {
            return Step::Answer(Some(answer(test, Err(not_found(req)))));
        };
        let RState::Recv(r) = &mut n.reqs[i].1 else {
            let e = sim_error("a receive collected in the wrong state");
            return Step::Answer(Some(answer(test, Err(e))));
        };
        let Some(Unit::Landed {
            peer,
            tag,
            len,
            held,
        }) = r.units.pop()
        else {
            let e = sim_error("a receive collected before its message arrived");
            return Step::Answer(Some(answer(test, Err(e))));
        };
        r.last = (peer, tag, len);
        r.collected += 1;
        let done = r.collected == r.count;
        self.release(node, held);
        if !done {
            return self.collect_next(node, i, req, test);
        }
        let n = &mut self.nodes[node as usize];
        let RState::Recv(r) = n.take(i) else {
            return Step::Answer(Some(answer(test, Err(not_found(req)))));
        };
        let (peer, tag, len) = r.last;
        let c = Completion::recv(r.buf, peer, tag, len);
        Step::Answer(Some(answer(test, Ok(c))))
    }

    /// End receive span `i` of `node` at its first failed receive: the receives still posted
    /// leave the posted queue, the room of the messages met after it is given back, and the
    /// failure is the request's answer.
    fn withdraw(&mut self, node: u32, i: usize) -> Error {
        let n = &mut self.nodes[node as usize];
        if let RState::Recv(r) = &n.reqs[i].1 {
            if r.waiting() > 0 {
                n.posted.retain(|&k| k as usize != i);
            }
        }
        let RState::Recv(mut r) = n.take(i) else {
            return sim_error("a receive withdrawn in the wrong state");
        };
        let mut first = None;
        while let Some(u) = r.units.pop() {
            match u {
                Unit::Landed { held, .. } => self.release(node, held),
                Unit::Failed(e) => {
                    first.get_or_insert(e);
                }
            }
        }
        first.unwrap_or_else(|| sim_error("a receive withdrawn without a failure"))
    }

    /// Hand back a finished send of `node` at slot `i`.
    fn take_send(&mut self, node: u32, i: usize) -> Result<Completion> {
        match self.nodes[node as usize].take(i) {
            RState::SendDone {
                buf,
                peer,
                tag,
                len,
                ..
            } => {
                let mut c = Completion::send(buf, peer, tag);
                c.len = len;
                Ok(c)
            }
            _ => Err(sim_error("a send collected in the wrong state")),
        }
    }

    fn poll_done(&mut self, node: u32, req: ReqId) -> Step {
        let n = &self.nodes[node as usize];
        let Some(i) = n.slot(req) else {
            return Step::Answer(Some(Resp::Maybe(Err(not_found(req)))));
        };
        match &n.reqs[i].1 {
            RState::SendDone { .. } => {
                Step::Answer(Some(Resp::Maybe(self.take_send(node, i).map(Some))))
            }
            RState::Recv(_) => self.collect_next(node, i, req, true),
            RState::Free => Step::Answer(Some(Resp::Maybe(Err(not_found(req))))),
        }
    }

    fn wait(&mut self, node: u32, req: ReqId) -> Option<Resp> {
        let n = &self.nodes[node as usize];
        let Some(i) = n.slot(req) else {
            return Some(Resp::Done(Err(not_found(req))));
        };
        match &n.reqs[i].1 {
            RState::SendDone { .. } => Some(Resp::Done(self.take_send(node, i))),
            RState::Recv(_) => {
                let step = self.collect_next(node, i, req, false);
                self.run_step(node, step)
            }
            RState::Free => Some(Resp::Done(Err(not_found(req)))),
        }
    }

    /// The in-flight copy of a message, or an error naming it when there is no memory for it.
    fn alloc_msg(&mut self, src: Rank, dest: Rank, tag: Tag, data: &[u8]) -> Result<u32> {
        let t = &self.cfg.times;
        let n = data.len() as u64;
        t.check_size(n)?;
        self.faults.check_size(t, n)?;
        let (e_ns, r_ns, s_ns) = (t.e.ns(n), t.r.ns(n), t.s.ns(n));
        let what =
            || format!("the copy in flight of a {n}-byte message from node {src} to node {dest}");
        // The out-of-band control plane carries what it says whole: it is read, not timed.
        let carried = match self.cfg.carry_bytes {
            Some(c) if !out_of_band(tag) => {
                data.len().min(usize::try_from(c).unwrap_or(usize::MAX))
            }
            _ => data.len(),
        };
        let data = &data[..carried];
        if let Some(i) = self.free_msgs.pop() {
            let m = &mut self.msgs[i as usize];
            m.data.clear();
            if let Err(e) = m
                .data
                .try_reserve_exact(data.len())
                .map_err(|_| limits::cannot_allocate(n, what()))
            {
                self.free_msgs.push(i);
                return Err(e);
            }
            m.src = src;
            m.dest = dest;
            m.tag = tag;
            m.data.extend_from_slice(data);
            m.len = n as usize;
            m.held = 0;
            m.e_ns = e_ns;
            m.r_ns = r_ns;
            m.s_ns = s_ns;
            return Ok(i);
        }
        let mut copy = limits::try_with_capacity(data.len() as u64, what)?;
        copy.extend_from_slice(data);
        self.msgs.push(Msg {
            src,
            dest,
            tag,
            data: copy,
            len: n as usize,
            held: 0,
            e_ns,
            r_ns,
            s_ns,
        });
        Ok((self.msgs.len() - 1) as u32)
    }

    fn handle(&mut self, node: u32, req: Req) -> Option<Resp> {
        if !matches!(req, Req::Test(_) | Req::Now | Req::Compute(_)) {
            let n = &mut self.nodes[node as usize];
            n.spinning = false;
            n.last_poll = None;
        }
        match req {
            Req::Isend {
                dest,
                tag,
                buf,
                span,
            } => {
                let (start, len) = (span.start, span.len);
                let msg = match self.alloc_msg(node, dest, tag, &buf[start..start + len]) {
                    Ok(m) => m,
                    Err(e) => return Some(Resp::Id(Err(e))),
                };
                let f = if out_of_band(tag) {
                    0
                } else {
                    self.f_ns(node, len as u64)
                };
                let req = self.nodes[node as usize].alloc(RState::SendDone {
                    buf,
                    peer: dest,
                    tag,
                    start,
                    len,
                });
                let more = span.count - 1;
                self.start_user(node, f, Pending::Inject { msg, req, more })
            }
            Req::Irecv {
                src,
                tag,
                buf,
                span,
            } => {
                let a = match tag {
                    TagSel::Tag(t) if out_of_band(t) => 0,
                    _ => self.cfg.times.a.ns(span.len as u64),
                };
                let req = self.nodes[node as usize].alloc(RState::Recv(Recv {
                    src,
                    tag,
                    buf,
                    start: span.start,
                    cap: span.len,
                    count: span.count,
                    posted: 0,
                    matched: 0,
                    collected: 0,
                    units: Units::default(),
                    last: (0, 0, 0),
                }));
                self.start_user(node, a, Pending::Post { req })
            }
            Req::Test(req) => self.start_user(node, self.cfg.poll_ns, Pending::Poll { req }),
            Req::Wait(req, limit) => {
                self.nodes[node as usize].wait_limit = limit;
                self.wait(node, req)
            }
            Req::Now => self.start_user(node, self.cfg.clock_read_ns, Pending::Clock),
            Req::Compute(work) => {
                let w = self.cfg.compute_ns(work);
                self.start_user(node, w, Pending::Compute)
            }
            Req::Collective(c) => self.collective(node, c),
        }
    }

    /// The next receive of span `req` has been posted (after its A): it takes the oldest
    /// matching unexpected message, or waits in the posted queue. Returns the A of the receive
    /// after it, or `None` when this was the span's last.
    fn post_recv(&mut self, node: u32, req: ReqId) -> Result<Option<u64>> {
        let n = &mut self.nodes[node as usize];
        let i = n.slot(req).ok_or_else(|| not_found(req))?;
        let RState::Recv(r) = &mut n.reqs[i].1 else {
            return Err(sim_error("a receive posted in the wrong state"));
        };
        let (src, tag, queued) = (r.src, r.tag, r.waiting() > 0);
        r.posted += 1;
        let next = (r.posted < r.count).then_some(r.cap as u64);
        let hit = n.unexpected.iter().position(|&m| {
            let m = &self.msgs[m as usize];
            src.accepts(m.src) && tag.accepts(m.tag)
        });
        // Every posted receive walks the unexpected queue, up to its match or to the end
        // (free for the out-of-band control plane).
        let walked = hit.map_or(n.unexpected.len(), |k| k + 1);
        if !matches!(tag, TagSel::Tag(t) if out_of_band(t)) {
            self.charge_match(node, walked);
        }
        match hit {
            Some(k) => {
                let m = self.nodes[node as usize].unexpected.remove(k);
                if let Some(m) = m {
                    self.land(node, i, m);
                }
            }
            // The span's receives still waiting are the queue's last entries (this node has
            // posted nothing since them), so this one joins them there.
            None if queued => {}
            None => self.nodes[node as usize].posted.push_back(i as u32),
        }
        Ok(next.map(|cap| self.cfg.times.a.ns(cap)))
    }

    /// Message `m` meets the next posted receive of span `i` of `node`: its bytes (those the
    /// simulator carries) land at the span's offset, and nowhere else in the buffer.
    fn land(&mut self, node: u32, i: usize, m: u32) {
        let msg = &self.msgs[m as usize];
        let (src, tag, len, held) = (msg.src, msg.tag, msg.len, msg.held);
        let RState::Recv(r) = &mut self.nodes[node as usize].reqs[i].1 else {
            return;
        };
        r.matched += 1;
        if len > r.cap {
            r.units.push(Unit::Failed(Error::Truncated {
                len,
                cap: r.cap,
                source_rank: src,
                tag,
            }));
            self.release(node, held);
        } else {
            let data = &msg.data;
            r.buf[r.start..r.start + data.len()].copy_from_slice(data);
            r.units.push(Unit::Landed {
                peer: src,
                tag,
                len,
                held,
            });
        }
        self.free_msgs.push(m);
    }

    /// Give `bytes` of receive-buffer room back to `node` and restart channels waiting for it.
    fn release(&mut self, node: u32, bytes: u64) {
        if bytes == 0 {
            return;
        }
        let n = &mut self.nodes[node as usize];
        n.buffered -= bytes.min(n.buffered);
        let k = n.space_waiters.len();
        for _ in 0..k {
            let Some(c) = self.nodes[node as usize].space_waiters.pop_front() else {
                break;
            };
            self.chans[c as usize].stalled = false;
            self.try_start(c);
        }
    }

    /// Message `m` is in a system buffer at node `at`: deliver it there or route it onward.
    fn inject(&mut self, m: u32, at: u32) {
        let dest = self.msgs[m as usize].dest;
        if dest == at {
            self.deliver(m);
            return;
        }
        let (c, _) = self.net.next(at, dest);
        let ch = &mut self.chans[c as usize];
        ch.queue.push_back(m);
        if !ch.busy && !ch.stalled {
            self.try_start(c);
        }
    }

    /// Start the hop of the message at the head of channel `c`, if the channel is free and the
    /// destination (on a last hop) has buffer room.
    fn try_start(&mut self, c: u32) {
        let ch = &self.chans[c as usize];
        if ch.busy {
            return;
        }
        let Some(&m) = ch.queue.front() else { return };
        let (v, w) = self.net.ends(c);
        let msg = &self.msgs[m as usize];
        let len = msg.len as u64;
        if w == msg.dest {
            if let Some(cap) = self.cfg.recv_buffer_bytes {
                let dn = &mut self.nodes[w as usize];
                if dn.buffered + len > cap {
                    let ch = &mut self.chans[c as usize];
                    if !ch.stalled {
                        ch.stalled = true;
                        dn.space_waiters.push_back(c);
                    }
                    return;
                }
                dn.buffered += len;
                self.msgs[m as usize].held = len;
            }
        }
        let msg = &self.msgs[m as usize];
        let e = self.faults.hop_ns(self.now, c, msg.src, msg.dest, msg.e_ns);
        let (r_ns, s_ns) = (msg.r_ns, msg.s_ns);
        let ch = &mut self.chans[c as usize];
        ch.stalled = false;
        ch.queue.pop_front();
        ch.busy = true;
        ch.cur = m;
        // A switch has no CPU: on a tree only the source pays S and only the destination R.
        if v < self.cpus {
            let s = self.faults.node_ns(self.now, v, s_ns);
            self.charge(v, s);
        }
        if w < self.cpus {
            let r = self.faults.node_ns(self.now, w, r_ns);
            self.charge(w, r);
        }
        let jitter = match self.cfg.jitter_ns {
            0 => 0,
            j => self.random() % (j + 1),
        };
        self.hops += 1;
        // Each step is bounded (`Times::check_size`); saturate rather than wrap all the same.
        self.push(
            self.now.saturating_add(e).saturating_add(jitter),
            EV_HOP,
            c,
            true,
        );
    }

    fn hop_end(&mut self, c: u32) {
        let ch = &mut self.chans[c as usize];
        ch.busy = false;
        let m = ch.cur;
        let (_, w) = self.net.ends(c);
        self.inject(m, w);
        self.try_start(c);
    }

    /// Message `m` reached its destination's system buffer.
    fn deliver(&mut self, m: u32) {
        self.messages += 1;
        let msg = &self.msgs[m as usize];
        let (node, src, tag) = (msg.dest, msg.src, msg.tag);
        let n = &self.nodes[node as usize];
        // Every delivery walks the posted queue, up to its match or to the end. A span stands
        // for its receives still waiting, one after another: a message it accepts meets the
        // first of them, one it does not walks past all of them.
        let mut walked = 0usize;
        let mut hit = None;
        for (k, &i) in n.posted.iter().enumerate() {
            let RState::Recv(r) = &n.reqs[i as usize].1 else {
                continue;
            };
            if r.src.accepts(src) && r.tag.accepts(tag) {
                walked += 1;
                hit = Some((k, i as usize, r.waiting() == 1));
                break;
            }
            walked += r.waiting() as usize;
        }
        if !out_of_band(tag) {
            self.charge_match(node, walked);
        }
        let Some((k, i, last)) = hit else {
            self.nodes[node as usize].unexpected.push_back(m);
            return;
        };
        if last {
            self.nodes[node as usize].posted.remove(k);
        }
        self.land(node, i, m);
        let n = &mut self.nodes[node as usize];
        let Blocked::Wait(req) = n.blocked else {
            return;
        };
        if n.slot(req) != Some(i) {
            return;
        }
        // The program waits for this very receive: the span's earlier ones are collected.
        n.blocked = Blocked::No;
        n.timeout_at = 0;
        let step = self.collect_next(node, i, req, false);
        if let Some(r) = self.run_step(node, step) {
            self.wake(node, r);
        }
    }

    fn collective(&mut self, node: u32, c: Coll) -> Option<Resp> {
        self.nodes[node as usize].blocked = Blocked::Coll;
        self.coll.arrived[node as usize] = Some(c);
        self.coll.count += 1;
        if self.coll.count < self.ranks {
            return None;
        }
        self.coll.count = 0;
        let all: Vec<Coll> = self
            .coll
            .arrived
            .iter_mut()
            .filter_map(|a| a.take())
            .collect();
        let consistent = all.iter().all(|c| c.same_as(&all[0]));
        let mismatch = || {
            let list: Vec<String> = all
                .iter()
                .enumerate()
                .map(|(i, c)| format!("node {i}: {}", c.describe()))
                .collect();
            Error::Protocol(format!(
                "nodes entered different collectives: {}",
                list.join("; ")
            ))
        };
        let mut resps: Vec<Resp> = Vec::with_capacity(all.len());
        if !consistent {
            for c in &all {
                resps.push(match c {
                    Coll::Barrier | Coll::BarrierFirst(_) => Resp::Unit(Err(mismatch())),
                    Coll::Bcast { .. } => Resp::Data(Err(mismatch())),
                    Coll::Gather { .. } => Resp::Gathered(Err(mismatch())),
                });
            }
        } else {
            match &all[0] {
                Coll::Barrier | Coll::BarrierFirst(_) => {
                    resps.extend(all.iter().map(|_| Resp::Unit(Ok(()))));
                }
                Coll::Bcast { root, .. } => {
                    let data = match &all[*root as usize] {
                        Coll::Bcast { data, .. } => data.clone(),
                        _ => Vec::new(),
                    };
                    resps.extend(all.iter().map(|_| Resp::Data(Ok(data.clone()))));
                }
                Coll::Gather { root, .. } => {
                    let root = *root as usize;
                    let mut parts = Vec::with_capacity(all.len());
                    for c in all {
                        if let Coll::Gather { data, .. } = c {
                            parts.push(data);
                        }
                    }
                    let mut parts = Some(parts);
                    for i in 0..self.ranks as usize {
                        resps.push(Resp::Gathered(Ok(if i == root {
                            parts.take()
                        } else {
                            None
                        })));
                    }
                }
            }
        }
        for (i, r) in resps.into_iter().enumerate() {
            self.nodes[i].blocked = Blocked::No;
            self.wake(i as u32, r);
        }
        None
    }

    /// The timeout at `t` of `node`'s wait, if that wait is still under way: the node is no
    /// longer blocked and its program hears [`Error::Timeout`] naming what it waited for.
    /// The request stays: a later wait on it can still collect its message.
    fn timed_out(&mut self, node: u32, t: u64) -> Option<Resp> {
        let n = &self.nodes[node as usize];
        let Blocked::Wait(req) = n.blocked else {
            return None;
        };
        if n.timeout_at != t || n.silent {
            return None;
        }
        let limit = n.wait_limit.unwrap_or(0);
        let what = self.describe_req(node as usize, req);
        let n = &mut self.nodes[node as usize];
        n.blocked = Blocked::No;
        n.timeout_at = 0;
        Some(Resp::Done(Err(Error::Timeout {
            rank: node,
            what: format!("{what} (virtual time)"),
            timeout: std::time::Duration::from_nanos(limit),
        })))
    }

    /// What request `req` of node `i` is: `recv from 3 tag 1`, or its number.
    fn describe_req(&self, i: usize, req: ReqId) -> String {
        let n = &self.nodes[i];
        match n.slot(req).map(|s| &n.reqs[s].1) {
            Some(RState::Recv(r)) => {
                format!(
                    "recv from {} tag {}",
                    describe_src(r.src),
                    describe_tag(r.tag)
                )
            }
            _ => format!("request {}", req.0),
        }
    }

    fn describe_node(&self, i: usize) -> String {
        let n = &self.nodes[i];
        let req_desc = |req: ReqId| self.describe_req(i, req);
        if n.silent {
            return format!("node {i}: silent since {} ns", n.finish_ns);
        }
        match n.blocked {
            Blocked::Wait(req) => format!("node {i}: {}", req_desc(req)),
            Blocked::Coll => match &self.coll.arrived[i] {
                Some(c) => format!("node {i}: {}", c.describe()),
                None => format!("node {i}: collective"),
            },
            Blocked::No => match n.last_poll {
                Some(req) if n.spinning => format!("node {i}: polling {}", req_desc(req)),
                _ => format!("node {i}: running"),
            },
        }
    }

    /// A stop asked for is honoured by the program at its next safe point; a size that goes
    /// on for [`STOP_GRACE`] after it (a machine so slow to simulate that one size takes
    /// minutes) is cut short, what the program collected before kept.
    fn stop_check(&mut self) -> Result<()> {
        let Some(signal) = self.stop.and_then(StopFlag::requested) else {
            return Ok(());
        };
        let seen = *self.stop_seen.get_or_insert_with(std::time::Instant::now);
        if seen.elapsed() < STOP_GRACE {
            return Ok(());
        }
        Err(Error::Interrupted {
            signal,
            done: 0,
            sizes: 0,
        })
    }

    /// The run reached a time its clock must not hold: a configuration error naming the
    /// costs, never a reading that wrapped or saturated into a negative or zero time.
    fn clock_overflow(&self, t: u64) -> Error {
        Error::Config(format!(
            "sim config `{}`: the virtual clock would pass {} ns (about 146 years; at {t} ns \
             after {} ns): this run of this machine takes longer than its clock holds; give \
             smaller times, faults, compute or match costs, a finer tick_ns, or fewer trials, \
             sizes or iterations (docs/simulator.md §6)",
            self.cfg.name,
            crate::config::CLOCK_LIMIT_NS,
            self.now
        ))
    }

    fn stuck_error(&self, what: &str) -> Error {
        let list: Vec<String> = (0..self.ranks as usize)
            .filter(|&i| !self.nodes[i].done || self.nodes[i].silent)
            .map(|i| self.describe_node(i))
            .collect();
        let finished = (0..self.ranks as usize)
            .filter(|&i| self.nodes[i].done && !self.nodes[i].silent)
            .count();
        Error::Deadlock(format!(
            "{what} at virtual time {} ns ({finished} of {} nodes finished): {}",
            self.now,
            self.ranks,
            list.join("; ")
        ))
    }
}

type CoRef<'s, O> = ScopedCoroutineRef<'s, Resp, Req, Result<O>, DefaultStack>;
type Co<'a, O> = ScopedCoroutine<'a, Resp, Req, Result<O>, DefaultStack>;
type Body<'k, O> = dyn for<'r> FnMut(&mut [CoRef<'r, O>]) -> Result<()> + 'k;

/// Open the scope of every coroutine (one nested scope each) and run `k` on all of them.
fn nest<O>(
    mut it: std::vec::IntoIter<Co<'_, O>>,
    refs: Vec<CoRef<'_, O>>,
    k: &mut Body<'_, O>,
) -> Result<()> {
    match it.next() {
        None => {
            let mut refs = refs;
            k(&mut refs)
        }
        Some(c) => c.scope(move |r| {
            let mut refs = refs;
            refs.push(r);
            nest(it, refs, k)
        }),
    }
}

/// Resume `node` with `resp` and serve its requests until it blocks, starts timed work or ends.
fn drive<O>(
    cos: &mut [CoRef<'_, O>],
    k: &mut Kernel<'_>,
    out: &mut [Option<O>],
    node: u32,
    mut resp: Resp,
) -> Result<()> {
    loop {
        match cos[node as usize].resume(resp) {
            CoroutineResult::Yield(_) if k.now >= k.silent_from[node as usize] => {
                // A hung process: this step and every later one never happen.
                let n = &mut k.nodes[node as usize];
                n.silent = true;
                n.done = true;
                n.finish_ns = k.now;
                return Ok(());
            }
            CoroutineResult::Yield(req) => match k.handle(node, req) {
                Some(r) => resp = r,
                None => return Ok(()),
            },
            CoroutineResult::Return(res) => {
                let n = &mut k.nodes[node as usize];
                n.done = true;
                n.finish_ns = k.now;
                return match res {
                    Ok(o) => {
                        out[node as usize] = Some(o);
                        Ok(())
                    }
                    Err(e) => Err(e.in_phase(format!("sim node {node}"))),
                };
            }
        }
    }
}

fn event_loop<O>(
    cos: &mut [CoRef<'_, O>],
    k: &mut Kernel<'_>,
    out: &mut [Option<O>],
) -> Result<()> {
    for node in 0..k.ranks {
        drive(cos, k, out, node, Resp::Start)?;
    }
    while let Some(ev) = k.heap.pop() {
        k.events += 1;
        if k.events % STOP_EVERY_EVENTS == 0 {
            k.stop_check()?;
        }
        if ev.t > crate::config::CLOCK_LIMIT_NS {
            return Err(k.clock_overflow(ev.t));
        }
        k.now = ev.t;
        if ev.live {
            k.live -= 1;
            k.idle_polls = 0;
        } else if k.live == 0 {
            k.idle_polls += 1;
            if k.idle_polls > k.cfg.spin_limit {
                return Err(k.stuck_error("livelock: nodes only poll with nothing in flight"));
            }
        }
        match ev.kind {
            EV_USER => {
                let n = &k.nodes[ev.id as usize];
                if n.user_finish > ev.t {
                    // Handlers preempted this work: it ends later.
                    let t = n.user_finish;
                    k.push(t, EV_USER, ev.id, ev.live);
                    continue;
                }
                if let Some(r) = k.finish_user(ev.id) {
                    drive(cos, k, out, ev.id, r)?;
                }
            }
            EV_WAKE => {
                if let Some(r) = k.nodes[ev.id as usize].wake.take() {
                    drive(cos, k, out, ev.id, r)?;
                }
            }
            EV_TIMEOUT => {
                if let Some(r) = k.timed_out(ev.id, ev.t) {
                    drive(cos, k, out, ev.id, r)?;
                }
            }
            _ => k.hop_end(ev.id),
        }
    }
    if (0..k.ranks as usize).any(|i| !k.nodes[i].done) {
        return Err(k.stuck_error("deadlock: every node is blocked"));
    }
    Ok(())
}

/// Events between two looks at a stop request.
const STOP_EVERY_EVENTS: u64 = 1 << 12;

/// How long a size may go on after a stop was asked for before the kernel cuts it short.
const STOP_GRACE: std::time::Duration = std::time::Duration::from_secs(2);

/// Ranks above which the nested coroutine scopes run on a helper thread with a big stack.
const SCOPES_ON_CALLER: u32 = 1024;

/// Run `p` on every rank of the simulated machine; outputs in rank order, plus statistics.
pub fn run_with_stats<P: Program>(cfg: &SimConfig, p: &P) -> Result<(Vec<P::Output>, SimStats)> {
    run_stoppable(cfg, p, None)
}

/// [`run`], with a stop asked for from outside honoured: the program stops at its next safe
/// point, and a size still under way two seconds after the request is cut short
/// ([`Error::Interrupted`], its counts of sizes left to the caller, 0).
pub fn run_until<P: Program>(cfg: &SimConfig, p: &P, stop: &StopFlag) -> Result<Vec<P::Output>> {
    run_stoppable(cfg, p, Some(stop)).map(|(o, _)| o)
}

fn run_stoppable<P: Program>(
    cfg: &SimConfig,
    p: &P,
    stop: Option<&StopFlag>,
) -> Result<(Vec<P::Output>, SimStats)> {
    cfg.validate()?;
    crate::check_mappings(cfg)?;
    crate::pages::fresh_pages_for_large_buffers();
    let _untouched = commbench_core::method::alloc::UntouchedPages::hold();
    if cfg.ranks() <= SCOPES_ON_CALLER {
        return run_here(cfg, p, stop);
    }
    // One nested scope per coroutine: give the kernel a stack deep enough for all of them.
    let stack = 16 * 1024 * 1024 + cfg.ranks() as usize * 1024;
    std::thread::scope(|s| {
        let h = std::thread::Builder::new()
            .name("commbench-sim".into())
            .stack_size(stack)
            .spawn_scoped(s, || run_here(cfg, p, stop))
            .map_err(|e| Error::io("starting the simulator thread", e))?;
        match h.join() {
            Ok(r) => r,
            Err(panic) => std::panic::resume_unwind(panic),
        }
    })
}

fn run_here<P: Program>(
    cfg: &SimConfig,
    p: &P,
    stop: Option<&StopFlag>,
) -> Result<(Vec<P::Output>, SimStats)> {
    let ranks = cfg.ranks();
    let mut info = BackendInfo::new();
    info.insert("machine".into(), cfg.name.clone().into());
    info.insert("nodes".into(), cfg.nodes().into());
    info.insert("ranks".into(), ranks.into());
    info.insert(
        "clock".into(),
        format!(
            "virtual, tick {} ns, read cost {} ns",
            cfg.tick_ns, cfg.clock_read_ns
        )
        .into(),
    );
    // A matcher that costs time is what a queue benchmark measures: say so in the settings.
    if cfg.match_ns_per_entry > 0.0 {
        info.insert("match_ns_per_entry".into(), cfg.match_ns_per_entry.into());
    }
    if let Ok(v) = serde_json::to_value(cfg) {
        info.insert("config".into(), v);
    }
    let ep_info = EpInfo {
        size: ranks,
        hypercube: cfg.tree.is_none().then_some(cfg.dimensions),
        switch_paths: cfg
            .tree
            .as_ref()
            .map(|_| (0..ranks).filter_map(|r| cfg.switch_path(r)).collect()),
        tick_ns: cfg.tick_ns,
        recv_cap: cfg.recv_buffer_bytes,
        wait_ns: cfg.wait_timeout_ns(),
        info,
    };
    let ep_info = &ep_info;
    let mut cos: Vec<Co<'_, P::Output>> = Vec::with_capacity(ranks as usize);
    for r in 0..ranks {
        let stack = DefaultStack::new(cfg.stack_kib as usize * 1024)
            .map_err(|e| Error::io(format!("coroutine stack for simulated node {r}"), e))?;
        cos.push(ScopedCoroutine::with_stack(
            stack,
            move |y, _start: Resp| {
                let mut ep = SimEndpoint::new(r, y, ep_info);
                p.run(&mut ep)
            },
        ));
    }
    let mut k = Kernel::new(cfg);
    k.stop = stop;
    let mut out: Vec<Option<P::Output>> = (0..ranks).map(|_| None).collect();
    nest(cos.into_iter(), Vec::new(), &mut |refs| {
        event_loop(refs, &mut k, &mut out)
    })?;
    let outputs = out
        .into_iter()
        .enumerate()
        .map(|(i, o)| match o {
            Some(o) => Ok(o),
            None if k.nodes[i].silent => p.lost(i as Rank).map_err(|e| {
                e.in_phase(format!(
                    "sim node {i}, silent from {} ns",
                    k.nodes[i].finish_ns
                ))
            }),
            None => Err(sim_error(format!("node {i} produced no output"))),
        })
        .collect::<Result<Vec<_>>>()?;
    let stats = SimStats {
        events: k.events,
        end_ns: k.now,
        messages: k.messages,
        hops: k.hops,
        handler_ns: k.nodes.iter().map(|n| n.handler_ns).collect(),
        match_entries: k.nodes.iter().map(|n| n.match_entries).collect(),
        finish_ns: k.nodes[..ranks as usize]
            .iter()
            .map(|n| n.finish_ns)
            .collect(),
    };
    Ok((outputs, stats))
}

/// Run `p` on every rank of the simulated machine; outputs in rank order.
pub fn run<P: Program>(cfg: &SimConfig, p: &P) -> Result<Vec<P::Output>> {
    run_with_stats(cfg, p).map(|(o, _)| o)
}
