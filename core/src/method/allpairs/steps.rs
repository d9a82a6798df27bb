//! The step between two all-pairs rounds, made to go on without a rank that falls silent.
//!
//! Every rank runs every step. A step carries each live rank's word up a binomial tree of
//! the live ranks to rank 0 (`UP`), and rank 0's answer down the same tree (`DOWN`): the
//! summaries of the round just measured go up, the word to go on (or to stop, and what the
//! next round needs) comes down. Without a failure that is all: `log2(n)` messages at rank 0
//! a step, as with [`crate::transport::control`]'s trees.
//!
//! When a rank is silent, its parent stops waiting for it after the round timeout and sends
//! up what it has. Rank 0 then asks every live rank it has no word from directly (`ASK`);
//! a rank asked answers with everything it holds (`DIRECT`), and so does a rank that
//! receives a child's word late. A rank that has not answered when the round timeout has
//! passed a second time is lost: rank 0 names it in the answer, every rank drops it from
//! the tree and from its pairs, and the run goes on without it. A rank whose parent in the
//! answer's tree fell silent before passing the answer on asks rank 0 for it (`PULL`), at once
//! when rank 0 already asks about the next step, and hears it late, at rank 0's next step; it
//! then skips that round's cells. Cut off from the last answer of the run, it simply ends.
//!
//! Every message names its step (the epoch), so a word that arrives after its step is
//! dropped, and one that arrives early is kept for its step. Rank 0 cannot be lost: it is
//! where the results are; its silence ends the run on every other rank with a timeout.

use crate::transport::control::{entries, push_entry, Tree};
use crate::transport::error::{Error, Result};
use crate::transport::{Endpoint, Rank, ReqId, Src, Tag, TagSel, TAG_OUT_OF_BAND};
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::Duration;

/// Tag of a step's messages (their first part), received from any source; out of band on
/// the simulator ([`crate::transport::TAG_OUT_OF_BAND`]).
pub const TAG_STEP: Tag = TAG_OUT_OF_BAND.start;
/// Tag of the rest of a step's message longer than its first part carries, from its sender.
pub const TAG_STEP_REST: Tag = TAG_OUT_OF_BAND.start + 1;

const UP: u8 = 1;
const DOWN: u8 = 2;
const ASK: u8 = 3;
const DIRECT: u8 = 4;
const PULL: u8 = 5;

/// Bytes of a message's body carried in its first part: most words of a step are one message.
const INLINE: usize = 4096;
/// A first part's header: kind, three bytes of padding, the epoch, the body's length.
const HEAD: usize = 16;

/// Most bytes of one step's message: far beyond a round's summaries at a million ranks.
const MAX_BODY: u64 = 1 << 36;

/// How many round timeouts a rank waits for rank 0's answer before it asks for it, and as
/// long again for the answer to that: rank 0 may wait twice for a silent rank's word.
const DOWN_WAITS: u32 = 3;

/// One message of a step.
#[derive(Debug)]
struct Msg {
    from: Rank,
    kind: u8,
    epoch: u32,
    body: Vec<u8>,
}

/// What a step told this rank.
#[derive(Debug)]
pub struct Answer {
    /// Rank 0's word.
    pub payload: Vec<u8>,
    /// Whether it came late (asked for with `PULL`, after the round it started had begun):
    /// the rank skips that round.
    pub late: bool,
}

/// A rank's state across the steps of a run.
#[derive(Debug)]
pub struct Steps {
    n: u32,
    /// Live ranks as of the last answer, in order.
    live: Vec<Rank>,
    /// Ranks lost, in the order they were found.
    lost: Vec<Rank>,
    epoch: u32,
    /// The round timeout.
    wait: Duration,
    /// The posted receive of a step's first part (kept across a timeout: a receive posted
    /// again would leave the first one to take the next message).
    posted: Option<ReqId>,
    /// Messages of later steps, kept for them.
    early: VecDeque<Msg>,
    /// The buffer of the last first part received, for the next receive.
    spare: Vec<u8>,
    /// Rank 0 asked this rank about a later step than the one it waits in: the answer of
    /// its own never came (its parent fell silent before passing it on).
    behind: bool,
    /// Rank 0: the last answer sent, by epoch (what a `PULL` is answered with).
    last_answer: Option<(u32, Vec<u8>)>,
}

/// Whether `e` says a peer did not answer or is gone: what a step or a cell survives.
pub fn is_silence(e: &Error) -> bool {
    matches!(e.root(), Error::Timeout { .. } | Error::PeerLost { .. })
}

impl Steps {
    /// The steps of a run of `n` ranks, each wait for a word bounded by `wait`.
    pub fn new(n: u32, wait: Duration) -> Steps {
        Steps {
            n,
            live: (0..n).collect(),
            lost: Vec::new(),
            epoch: 0,
            wait,
            posted: None,
            early: VecDeque::new(),
            spare: Vec::new(),
            behind: false,
            last_answer: None,
        }
    }

    /// Whether `r` has been found lost.
    pub fn is_lost(&self, r: Rank) -> bool {
        self.lost.contains(&r)
    }

    /// This rank's parent and children in the tree of the live ranks rooted at rank 0.
    fn place(&self, me: Rank) -> (Option<Rank>, Vec<Rank>) {
        let Some(pos) = self.live.iter().position(|&r| r == me) else {
            return (None, Vec::new());
        };
        let t = Tree::new(self.live.len() as u32, 0, pos as u32);
        let at = |p: Rank| self.live[p as usize];
        (t.parent().map(at), t.children().map(at).collect())
    }

    /// One step: `up` travels to rank 0, where `decide` makes the word every live rank
    /// hears from the words of the ranks that answered (by rank, rank 0's own included) and
    /// the ranks found lost at this step.
    pub fn step<E: Endpoint>(
        &mut self,
        ep: &mut E,
        up: &[u8],
        decide: impl FnOnce(&mut E, BTreeMap<Rank, Vec<u8>>, &[Rank]) -> Result<Vec<u8>>,
    ) -> Result<Answer> {
        self.epoch += 1;
        let own = ep.timeout();
        ep.set_timeout(self.wait);
        let r = if ep.rank() == 0 {
            self.root_step(ep, up, decide)
        } else {
            self.rank_step(ep, up)
        };
        ep.set_timeout(own);
        r
    }

    /// Rank 0's step: the words gathered, the silent asked, the lost named, the answer sent.
    fn root_step<E: Endpoint>(
        &mut self,
        ep: &mut E,
        up: &[u8],
        decide: impl FnOnce(&mut E, BTreeMap<Rank, Vec<u8>>, &[Rank]) -> Result<Vec<u8>>,
    ) -> Result<Answer> {
        let e = self.epoch;
        let mut words = BTreeMap::new();
        words.insert(0, up.to_vec());
        let (_, children) = self.place(0);
        let mut waiting: BTreeSet<Rank> = children.into_iter().collect();
        while !waiting.is_empty() {
            let Some(m) = self.next(ep, self.wait)? else {
                break;
            };
            if m.kind == UP {
                waiting.remove(&m.from);
            }
            self.root_takes(ep, m, &mut words)?;
        }
        let missing = |w: &BTreeMap<Rank, Vec<u8>>, live: &[Rank]| -> Vec<Rank> {
            live.iter()
                .copied()
                .filter(|r| !w.contains_key(r))
                .collect()
        };
        let asked = missing(&words, &self.live);
        if !asked.is_empty() {
            for &r in &asked {
                send(ep, r, ASK, e, &[])?;
            }
            while !missing(&words, &self.live).is_empty() {
                let Some(m) = self.next(ep, self.wait)? else {
                    break;
                };
                self.root_takes(ep, m, &mut words)?;
            }
        }
        let newly_lost = missing(&words, &self.live);
        self.drop_lost(&newly_lost);
        for &r in &newly_lost {
            ep.forget(r);
        }
        let payload = decide(ep, words, &newly_lost)?;
        let body = self.answer_body(&payload, false);
        self.last_answer = Some((e, body.clone()));
        let (_, children) = self.place(0);
        for c in children {
            send(ep, c, DOWN, e, &body)?;
        }
        Ok(Answer {
            payload,
            late: false,
        })
    }

    /// A message to rank 0 during its step: words kept (the live ranks', once each), a `PULL`
    /// of the last answer answered late, anything else dropped.
    fn root_takes<E: Endpoint>(
        &mut self,
        ep: &mut E,
        m: Msg,
        words: &mut BTreeMap<Rank, Vec<u8>>,
    ) -> Result<()> {
        match m.kind {
            UP | DIRECT if m.epoch == self.epoch => {
                for (r, w) in entries(&m.body, self.n)? {
                    if !self.lost.contains(&r) {
                        words.entry(r).or_insert_with(|| w.to_vec());
                    }
                }
            }
            PULL => {
                if let Some((e, body)) = &self.last_answer {
                    if *e == m.epoch {
                        let mut late = body.clone();
                        set_late(&mut late);
                        send(ep, m.from, DOWN, *e, &late)?;
                    }
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// Another rank's step: its children's words gathered and sent up with its own, rank
    /// 0's answer awaited, asked for when it does not come, and passed on.
    fn rank_step<E: Endpoint>(&mut self, ep: &mut E, up: &[u8]) -> Result<Answer> {
        let (e, me) = (self.epoch, ep.rank());
        let mut held = Vec::new();
        push_entry(&mut held, me, up);
        let (parent, children) = self.place(me);
        let mut waiting: BTreeSet<Rank> = children.into_iter().collect();
        // Asked by rank 0: everything held went to it, and whatever comes later goes too.
        let mut direct = false;
        while !waiting.is_empty() {
            let Some(m) = self.next(ep, self.wait)? else {
                break;
            };
            match m.kind {
                UP => {
                    waiting.remove(&m.from);
                    if direct {
                        send(ep, 0, DIRECT, e, &m.body)?;
                    }
                    held.extend_from_slice(&m.body);
                }
                ASK => {
                    direct = true;
                    send(ep, 0, DIRECT, e, &held)?;
                }
                DOWN => return self.answered(ep, m),
                _ => {}
            }
        }
        if !direct {
            let to = parent.unwrap_or(0);
            if !send(ep, to, UP, e, &held)? && to != 0 {
                send(ep, 0, DIRECT, e, &held)?;
            }
        }
        // Rank 0's answer, asked for again when it does not come, or at once when rank 0
        // already asks about the next step (it went on, and this rank's parent did not pass
        // its answer on).
        let mut pulled = false;
        loop {
            let patience = self.wait.saturating_mul(DOWN_WAITS);
            while let Some(m) = self.next(ep, patience)? {
                match m.kind {
                    DOWN => return self.answered(ep, m),
                    ASK => {
                        send(ep, 0, DIRECT, e, &held)?;
                    }
                    UP => {
                        // A child's word after this rank sent its own: straight to rank 0.
                        send(ep, 0, DIRECT, e, &m.body)?;
                        held.extend_from_slice(&m.body);
                    }
                    _ => {}
                }
            }
            if pulled {
                break;
            }
            pulled = true;
            send(ep, 0, PULL, e, &[])?;
        }
        Err(Error::Timeout {
            rank: me,
            what: format!(
                "rank 0's word after step {e} between rounds, asked for again (rank 0 is \
                 silent or gone, or every path from it is)"
            ),
            timeout: self.wait.saturating_mul(2 * DOWN_WAITS),
        })
    }

    /// Rank 0's answer `m` reached this rank: the lost dropped, the answer passed on to this
    /// rank's children in the tree of the ranks still live.
    fn answered<E: Endpoint>(&mut self, ep: &mut E, m: Msg) -> Result<Answer> {
        let me = ep.rank();
        self.behind = false;
        let (lost, late, payload) = parse_answer(&m.body, self.n)?;
        if lost.contains(&me) {
            return Err(Error::PeerLost {
                peer: me,
                detail: "rank 0 found this rank silent for longer than the round timeout and \
                         went on without it"
                    .into(),
            });
        }
        let newly_lost: Vec<Rank> = lost
            .iter()
            .copied()
            .filter(|r| !self.lost.contains(r))
            .collect();
        self.drop_lost(&newly_lost);
        for &r in &newly_lost {
            ep.forget(r);
        }
        let (_, children) = self.place(me);
        for c in children {
            send(ep, c, DOWN, m.epoch, &m.body)?;
        }
        Ok(Answer { payload, late })
    }

    fn drop_lost(&mut self, lost: &[Rank]) {
        self.lost.extend_from_slice(lost);
        self.live.retain(|r| !lost.contains(r));
    }

    /// An answer's body: the ranks lost so far, whether it is late, the word.
    fn answer_body(&self, payload: &[u8], late: bool) -> Vec<u8> {
        let mut b = Vec::with_capacity(5 + 4 * self.lost.len() + payload.len());
        b.extend_from_slice(&(self.lost.len() as u32).to_le_bytes());
        for r in &self.lost {
            b.extend_from_slice(&r.to_le_bytes());
        }
        b.push(u8::from(late));
        b.extend_from_slice(payload);
        b
    }

    /// The next message of this step, or of an earlier one that still matters; `None` when
    /// no message came for `patience` (a wait of the transport's own, so that a step costs
    /// no clock reads: the bound is on silence, as `--timeout`'s is), or when rank 0 asks
    /// about a later step (this rank is behind).
    fn next<E: Endpoint>(&mut self, ep: &mut E, patience: Duration) -> Result<Option<Msg>> {
        let epoch = self.epoch;
        self.early.retain(|m| m.epoch >= epoch);
        if let Some(i) = self.early.iter().position(|m| m.epoch == epoch) {
            return Ok(self.early.remove(i));
        }
        loop {
            let req = match self.posted {
                Some(r) => r,
                None => {
                    let mut buf = std::mem::take(&mut self.spare);
                    buf.resize(HEAD + INLINE, 0);
                    let r = ep.irecv(Src::Any, TagSel::Tag(TAG_STEP), buf)?;
                    self.posted = Some(r);
                    r
                }
            };
            ep.set_timeout(patience);
            let got = ep.wait(req);
            // Sends and the rest of a message wait as long as a round may.
            ep.set_timeout(self.wait);
            let c = match got {
                Ok(c) => c,
                Err(e) if matches!(e.root(), Error::Timeout { .. }) => return Ok(None),
                // A rank whose process went while its message was coming in: that message
                // is gone with it (the receive failed and was freed); post another.
                Err(e) if matches!(e.root(), Error::PeerLost { .. }) => {
                    self.posted = None;
                    continue;
                }
                Err(e) => return Err(e),
            };
            self.posted = None;
            let m = self.whole(ep, c.peer, &c.buf[..c.len])?;
            self.spare = c.buf;
            let Some(m) = m else {
                continue;
            };
            // Rank 0 answers a pull of its last step's answer whenever it is in a step; a
            // rank asked about a later step than its own learns that it is behind.
            if m.epoch == self.epoch || (m.kind == PULL && m.epoch < self.epoch) {
                return Ok(Some(m));
            }
            if m.epoch > self.epoch {
                let ask = m.kind == ASK && !self.behind;
                self.early.push_back(m);
                if ask {
                    // Waiting is pointless: the answer this rank waits for is not coming.
                    self.behind = true;
                    return Ok(None);
                }
            }
        }
    }

    /// The message whose first part `first` came from `from`, its rest received when it has
    /// one; `None` when the rest never came (its sender fell silent between the two).
    fn whole<E: Endpoint>(&mut self, ep: &mut E, from: Rank, first: &[u8]) -> Result<Option<Msg>> {
        let head = first
            .get(..HEAD)
            .ok_or_else(|| Error::Protocol(format!("a step message of {} bytes", first.len())))?;
        let kind = head[0];
        let epoch = u32::from_le_bytes([head[4], head[5], head[6], head[7]]);
        let len = u64::from_le_bytes(head[8..16].try_into().unwrap_or([0; 8]));
        if len > MAX_BODY {
            return Err(Error::Protocol(format!(
                "a step message of {len} bytes from rank {from}"
            )));
        }
        let mut body = first[HEAD..].to_vec();
        let len = len as usize;
        if len > body.len() {
            let rest = vec![0; len - body.len()];
            match ep.recv(Src::Rank(from), TagSel::Tag(TAG_STEP_REST), rest) {
                Ok(c) => body.extend_from_slice(&c.buf[..c.len]),
                Err(e) if is_silence(&e) => return Ok(None),
                Err(e) => return Err(e),
            }
        }
        if body.len() != len {
            return Err(Error::Protocol(format!(
                "a step message from rank {from} of {} bytes announced as {len}",
                body.len()
            )));
        }
        Ok(Some(Msg {
            from,
            kind,
            epoch,
            body,
        }))
    }
}

/// Send a step's message; `false` when `to` is silent or gone (what the step goes on
/// without), any other failure an error.
fn send<E: Endpoint>(ep: &mut E, to: Rank, kind: u8, epoch: u32, body: &[u8]) -> Result<bool> {
    let inline = body.len().min(INLINE);
    let mut first = Vec::with_capacity(HEAD + inline);
    first.extend_from_slice(&[kind, 0, 0, 0]);
    first.extend_from_slice(&epoch.to_le_bytes());
    first.extend_from_slice(&(body.len() as u64).to_le_bytes());
    first.extend_from_slice(&body[..inline]);
    let sent = ep.send(to, TAG_STEP, first).and_then(|_| {
        if body.len() > inline {
            ep.send(to, TAG_STEP_REST, body[inline..].to_vec())?;
        }
        Ok(())
    });
    match sent {
        Ok(()) => Ok(true),
        Err(e) if is_silence(&e) => Ok(false),
        Err(e) => Err(e),
    }
}

/// An answer's body: `(lost, late, word)`.
fn parse_answer(b: &[u8], n: u32) -> Result<(Vec<Rank>, bool, Vec<u8>)> {
    let bad = || Error::Protocol("rank 0's answer cut short".into());
    let count = b.get(..4).ok_or_else(bad)?;
    let count = u32::from_le_bytes([count[0], count[1], count[2], count[3]]) as usize;
    if count > n as usize {
        return Err(Error::Protocol(format!(
            "rank 0's answer names {count} lost ranks in a run of {n}"
        )));
    }
    let ranks = b.get(4..4 + 4 * count).ok_or_else(bad)?;
    let lost: Vec<Rank> = ranks
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    let late = *b.get(4 + 4 * count).ok_or_else(bad)? != 0;
    Ok((lost, late, b[5 + 4 * count..].to_vec()))
}

/// Mark an answer's body as late.
fn set_late(body: &mut [u8]) {
    if let Some(c) = body.get(..4) {
        let count = u32::from_le_bytes([c[0], c[1], c[2], c[3]]) as usize;
        if let Some(flag) = body.get_mut(4 + 4 * count) {
            *flag = 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_and_answers_read_back_and_refuse_what_no_rank_sends() {
        let mut b = Vec::new();
        push_entry(&mut b, 3, b"abc");
        push_entry(&mut b, 0, b"");
        assert_eq!(
            entries(&b, 4).expect("words"),
            [(3, &b"abc"[..]), (0, &b""[..])]
        );
        assert!(entries(&b, 3).is_err(), "rank 3 in a run of 3");
        assert!(entries(&b[..b.len() - 1], 4).is_err(), "cut short");
        let mut s = Steps::new(8, Duration::from_secs(1));
        s.drop_lost(&[5, 2]);
        assert_eq!(s.live, [0, 1, 3, 4, 6, 7]);
        let mut body = s.answer_body(b"go", false);
        assert_eq!(
            parse_answer(&body, 8).expect("answer"),
            (vec![5, 2], false, b"go".to_vec())
        );
        set_late(&mut body);
        assert!(parse_answer(&body, 8).expect("answer").1);
        assert!(parse_answer(&body[..6], 8).is_err());
        assert!(parse_answer(&body, 1).is_err(), "two lost in a run of one");
    }

    #[test]
    fn the_tree_of_the_live_ranks_skips_the_lost() {
        let mut s = Steps::new(8, Duration::from_secs(1));
        s.drop_lost(&[1]);
        // Live 0 2 3 4 5 6 7 at places 0..7: rank 0's children are places 1, 2, 4.
        assert_eq!(s.place(0), (None, vec![2, 3, 5]));
        assert_eq!(s.place(3), (Some(0), vec![4]));
        assert_eq!(s.place(1), (None, Vec::new()));
        let every: usize = [0, 2, 3, 4, 5, 6, 7]
            .iter()
            .map(|&r| s.place(r).1.len())
            .sum();
        assert_eq!(every, 6, "each live rank but 0 has one parent");
    }
}
