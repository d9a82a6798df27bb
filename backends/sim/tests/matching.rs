//! The matching cost per queue entry (`match_ns_per_entry`), measured as Underwood &
//! Brightwell, *The impact of MPI queue usage on message latency*, measure it (§3): a
//! ping-pong behind a pre-posted receive queue (§3.1, Figure 1) and receives posted over an
//! unexpected-message queue (§3.2, Figure 2). The simulator is deterministic, so the slopes
//! are exact.

use commbench_core::{Endpoint, Program, Rank, ReqId, Result, Src, Tag, TagSel};
use commbench_sim::{run_with_stats, SimConfig, MAX_MATCH_NS_PER_ENTRY};

/// Tags of the receives that the latency message does not match (`FILL..`), and of the
/// latency message itself.
const FILL: Tag = 100;
const LATENCY: Tag = 1;
/// Tag of the message that tells a rank its peer's unexpected messages have all arrived.
const FENCE: Tag = 50;

/// Four nodes, fast sub-microsecond software, R below E; a matcher at 137.5 ns an entry.
fn small_machine(extra: &str) -> SimConfig {
    let text = format!(
        "name = \"small\"\ndimensions = 2\ntick_ns = 1\nclock_read_ns = 30\npoll_ns = 40\n\
         stack_kib = 128\n{extra}\n[times]\n\
         F = {{ base_us = 0.3, per_byte_us = 0.0002 }}\nS = {{ base_us = 0.2 }}\n\
         R = {{ base_us = 0.25 }}\nA = {{ base_us = 0.1 }}\n\
         U = {{ base_us = 0.35, per_byte_us = 0.0003 }}\n\
         E = {{ base_us = 1.1, per_byte_us = 0.001 }}\n"
    );
    SimConfig::from_toml_str(&text).unwrap()
}

/// Sixteen nodes, slower software with R above E (the receiving handler is the longer
/// step); a matcher at 490 ns an entry, Quadrics Elan3's figure (§5.1).
fn elan_machine(extra: &str) -> SimConfig {
    let text = format!(
        "name = \"elan\"\ndimensions = 4\ntick_ns = 1\nclock_read_ns = 45\npoll_ns = 60\n\
         stack_kib = 128\n{extra}\n[times]\n\
         F = {{ base_us = 2.0, per_byte_us = 0.001 }}\nS = {{ base_us = 1.5 }}\n\
         R = {{ base_us = 3.0 }}\nA = {{ base_us = 0.5 }}\n\
         U = {{ base_us = 1.2, per_byte_us = 0.002 }}\n\
         E = {{ base_us = 2.0, per_byte_us = 0.004 }}\n"
    );
    SimConfig::from_toml_str(&text).unwrap()
}

/// §3.1, Figure 1: both ranks post `traversed` receives that do not match, then the latency
/// receive, then `untraversed` more; node 1 leaves the barrier first; rank 0 times one
/// round trip; then each rank clears the other's queue. Rank 0's output is the round trip.
struct Prepost {
    peer: Rank,
    n: usize,
    traversed: u32,
    untraversed: u32,
    /// Post every receive for any source (a wildcard costs as much as an exact source).
    any_source: bool,
}

impl Prepost {
    fn post(&self, ep: &mut impl Endpoint, other: Rank, tag: Tag) -> Result<ReqId> {
        let src = if self.any_source {
            Src::Any
        } else {
            Src::Rank(other)
        };
        ep.irecv(src, TagSel::Tag(tag), vec![0; self.n])
    }
}

impl Program for Prepost {
    type Output = u64;
    fn run<E: Endpoint>(&self, ep: &mut E) -> Result<u64> {
        let me = ep.rank();
        if me != 0 && me != self.peer {
            ep.barrier_first(self.peer)?;
            ep.barrier()?;
            return Ok(0);
        }
        let other = if me == 0 { self.peer } else { 0 };
        let fills = self.traversed + self.untraversed;
        let mut fill = Vec::new();
        for k in 0..self.traversed {
            fill.push(self.post(ep, other, FILL + k)?);
        }
        let latency = self.post(ep, other, LATENCY)?;
        for k in self.traversed..fills {
            fill.push(self.post(ep, other, FILL + k)?);
        }
        ep.barrier_first(self.peer)?;
        let mut round_trip = 0;
        if me == 0 {
            let t0 = ep.now_ns();
            ep.send(other, LATENCY, vec![7; self.n])?;
            ep.wait(latency)?;
            round_trip = ep.now_ns() - t0;
        } else {
            let buf = ep.wait(latency)?.buf;
            ep.send(other, LATENCY, buf)?;
        }
        // Clear only when rank 0 has read its clock: a clearing message would steal R from it.
        ep.barrier()?;
        for k in 0..fills {
            ep.send(other, FILL + k, Vec::new())?;
        }
        for r in fill {
            ep.wait(r)?;
        }
        Ok(round_trip)
    }
}

/// The round trip rank 0 measures behind `traversed` and `untraversed` receives, and the
/// queue entries each node inspected.
fn prepost(cfg: &SimConfig, peer: Rank, traversed: u32, untraversed: u32) -> (u64, Vec<u64>) {
    let p = Prepost {
        peer,
        n: 64,
        traversed,
        untraversed,
        any_source: false,
    };
    let (out, stats) = run_with_stats(cfg, &p).unwrap();
    (out[0], stats.match_entries)
}

/// Least-squares slope of `y` against `x`.
fn slope(points: &[(f64, f64)]) -> f64 {
    let n = points.len() as f64;
    let (mx, my) = points
        .iter()
        .fold((0.0, 0.0), |(a, b), &(x, y)| (a + x / n, b + y / n));
    let sxy: f64 = points.iter().map(|&(x, y)| (x - mx) * (y - my)).sum();
    let sxx: f64 = points.iter().map(|&(x, _)| (x - mx) * (x - mx)).sum();
    sxy / sxx
}

/// The one-way time (round trip / 2) grows by `match_ns_per_entry` per posted receive the
/// latency message walks past, on both machines, and exactly as the closed form says: the
/// matcher's time on each side is `round((traversed + 1) * c)` after `F + (d-1)E + max(E, R)`.
#[test]
fn one_way_time_grows_by_c_per_traversed_entry() {
    let machines = [
        (small_machine("match_ns_per_entry = 137.5"), 3, 137.5),
        (elan_machine("match_ns_per_entry = 490.0"), 15, 490.0),
    ];
    for (cfg, peer, c) in machines {
        let d = commbench_sim::distance(0, peer);
        let base = cfg.pingpong_one_way_ns(64, d);
        let mut points = Vec::new();
        for t in [0u32, 1, 2, 5, 10, 40, 100, 250] {
            let (rt, _) = prepost(&cfg, peer, t, 0);
            let walked = cfg.match_ns(u64::from(t) + 1);
            assert_eq!(
                rt,
                2 * (base + walked) + cfg.clock_read_ns,
                "{} T={t}",
                cfg.name
            );
            points.push((f64::from(t), rt as f64 / 2.0));
        }
        let s = slope(&points);
        eprintln!(
            "{}: one-way slope {s:.4} ns per traversed entry (c = {c})",
            cfg.name
        );
        assert!(
            (s - c).abs() <= 0.005 * c,
            "{}: slope {s} for c = {c}",
            cfg.name
        );
    }
}

/// At the largest cost allowed (1 ms an entry) the walks are charged in full, and one step
/// above it the machine description is refused with the key named.
#[test]
fn the_bound_runs_and_beyond_it_is_refused() {
    let at = format!("match_ns_per_entry = {MAX_MATCH_NS_PER_ENTRY:e}");
    let cfg = elan_machine(&at);
    let (rt, _) = prepost(&cfg, 15, 20, 3);
    let base = cfg.pingpong_one_way_ns(64, 4);
    assert_eq!(rt, 2 * (base + 21_000_000) + cfg.clock_read_ns);
    let over = format!(
        "name = \"x\"\npreset = \"generic\"\nmatch_ns_per_entry = {:e}\n",
        MAX_MATCH_NS_PER_ENTRY * (1.0 + f64::EPSILON)
    );
    let e = SimConfig::from_toml_str(&over).unwrap_err();
    assert!(e.to_string().contains("match_ns_per_entry"), "{e}");
}

/// Receives posted behind the latency receive are never walked: the time does not depend on
/// how many there are, and the entries inspected at the latency message's delivery stay
/// `traversed + 1`.
#[test]
fn untraversed_receives_cost_nothing() {
    let cfg = elan_machine("match_ns_per_entry = 490.0");
    for t in [0u32, 3, 30] {
        let (rt0, _) = prepost(&cfg, 15, t, 0);
        for u in [1u32, 9, 300] {
            let (rt, _) = prepost(&cfg, 15, t, u);
            assert_eq!(rt, rt0, "T={t} U={u}");
        }
    }
    let cfg = small_machine("match_ns_per_entry = 137.5");
    let (a, _) = prepost(&cfg, 3, 12, 0);
    let (b, _) = prepost(&cfg, 3, 12, 500);
    assert_eq!(a, b);
}

/// The simulated matcher walks its queue in order, as a NIC without hashing does (Elan3;
/// Elan4 hashed on the envelope, §5.1): a wildcard source costs as much as an exact one.
#[test]
fn wildcards_cost_as_much_as_exact_sources() {
    let cfg = small_machine("match_ns_per_entry = 137.5");
    for t in [0u32, 7, 64] {
        let run = |any_source| {
            let p = Prepost {
                peer: 3,
                n: 64,
                traversed: t,
                untraversed: 5,
                any_source,
            };
            run_with_stats(&cfg, &p).unwrap()
        };
        let (exact, se) = run(false);
        let (any, sa) = run(true);
        assert_eq!(exact[0], any[0], "T={t}");
        assert_eq!(se.match_entries, sa.match_entries, "T={t}");
    }
}

/// `match_entries` counts the walks: on rank 0 of a 4-node machine, the latency receive's
/// delivery walks `T + 1` posted receives, and each clearing message `k` (sent in posting
/// order, each taking the head of the queue) one; the latency and filler posts walk an empty
/// unexpected queue.
#[test]
fn match_entries_count_the_walks() {
    let cfg = small_machine("");
    for (t, u) in [(0u32, 0u32), (4, 0), (6, 11)] {
        let (_, entries) = prepost(&cfg, 3, t, u);
        let want = u64::from(t) + 1 + u64::from(t + u);
        assert_eq!(entries[0], want, "rank 0, T={t} U={u}");
        assert_eq!(entries[3], want, "rank 3, T={t} U={u}");
        assert_eq!(entries[1], 0, "node 1 only forwards");
    }
}

/// A machine without the key and one with `match_ns_per_entry = 0` time everything alike,
/// whatever the queues hold, as the closed form without matching says; the key is not
/// written out when it is 0, so a recorded machine description is unchanged.
#[test]
fn zero_cost_changes_nothing() {
    for (without, with, peer) in [
        (
            small_machine(""),
            small_machine("match_ns_per_entry = 0"),
            3,
        ),
        (
            elan_machine(""),
            elan_machine("match_ns_per_entry = 0.0"),
            15,
        ),
    ] {
        assert_eq!(without, with);
        assert!(!toml::to_string(&with)
            .unwrap()
            .contains("match_ns_per_entry"));
        let d = commbench_sim::distance(0, peer);
        let want = 2 * without.pingpong_one_way_ns(64, d) + without.clock_read_ns;
        for (t, u) in [(0u32, 0u32), (25, 0), (25, 40)] {
            let p = Prepost {
                peer,
                n: 64,
                traversed: t,
                untraversed: u,
                any_source: false,
            };
            let a = run_with_stats(&without, &p).unwrap();
            let b = run_with_stats(&with, &p).unwrap();
            assert_eq!(a, b, "T={t} U={u}");
            assert_eq!(a.0[0], want, "T={t} U={u}");
            assert!(a.1.match_entries[0] > u64::from(t));
        }
    }
}

/// Each of ranks 0 and `peer` sends the other `l` messages (tags `FILL..`) and a fence, and
/// takes the fence: the other's `l` messages are then in its unexpected queue (channels are
/// FIFO and routes fixed). Both leave the barrier when nothing is in flight.
fn fill_unexpected(ep: &mut impl Endpoint, other: Rank, peer: Rank, l: u32) -> Result<()> {
    for k in 0..l {
        ep.send(other, FILL + k, vec![1; 8])?;
    }
    ep.send(other, FENCE, Vec::new())?;
    ep.recv(Src::Rank(other), TagSel::Tag(FENCE), Vec::new())?;
    ep.barrier_first(peer)
}

/// Receive the other rank's unexpected messages left in the queue (all but `taken`).
fn drain_unexpected(ep: &mut impl Endpoint, other: Rank, l: u32, taken: Option<u32>) -> Result<()> {
    for k in (0..l).filter(|&k| Some(k) != taken) {
        ep.recv(Src::Rank(other), TagSel::Tag(FILL + k), vec![0; 8])?;
    }
    Ok(())
}

/// §3.2's cost in isolation: with `l` unexpected messages from the other rank queued, each
/// rank times (between two clock reads) an `irecv` that matches none of them, then, when
/// `l > 0`, one that matches the message at position `l / 2`. Output: the two times.
struct PostOverQueue {
    peer: Rank,
    l: u32,
    cap: usize,
}

impl PostOverQueue {
    /// The time of an `irecv` between two clock reads, and its request.
    fn timed_post(&self, ep: &mut impl Endpoint, other: Rank, tag: Tag) -> Result<(u64, ReqId)> {
        let t0 = ep.now_ns();
        let r = ep.irecv(Src::Rank(other), TagSel::Tag(tag), vec![0; self.cap])?;
        Ok((ep.now_ns() - t0, r))
    }
}

impl Program for PostOverQueue {
    type Output = (u64, Option<u64>);
    fn run<E: Endpoint>(&self, ep: &mut E) -> Result<(u64, Option<u64>)> {
        let me = ep.rank();
        if me != 0 && me != self.peer {
            ep.barrier_first(self.peer)?;
            ep.barrier()?;
            return Ok((0, None));
        }
        let other = if me == 0 { self.peer } else { 0 };
        fill_unexpected(ep, other, self.peer, self.l)?;
        let (miss, r_miss) = self.timed_post(ep, other, 999)?;
        let j = self.l / 2;
        let hit = match self.l {
            0 => None,
            _ => Some(self.timed_post(ep, other, FILL + j)?),
        };
        ep.barrier()?;
        ep.send(other, 999, Vec::new())?;
        ep.wait(r_miss)?;
        if let Some((_, r)) = hit {
            ep.wait(r)?;
        }
        drain_unexpected(ep, other, self.l, hit.map(|_| j))?;
        Ok((miss, hit.map(|(t, _)| t)))
    }
}

/// Posting a receive over `l` unexpected messages costs `l * c` of the node's CPU: the clock
/// read after the `irecv` comes that much later (a miss walks the whole queue, a hit up to
/// its match), on both ranks and both machines.
#[test]
fn posting_over_unexpected_messages_costs_c_per_entry() {
    let machines = [
        (small_machine("match_ns_per_entry = 137.5"), 1, 137.5),
        (elan_machine("match_ns_per_entry = 490.0"), 15, 490.0),
    ];
    for (cfg, peer, c) in machines {
        let cap = 256;
        let fixed = cfg.clock_read_ns + cfg.times.a.ns(cap as u64);
        let mut points = Vec::new();
        for l in [0u32, 1, 3, 20, 101, 400] {
            let p = PostOverQueue { peer, l, cap };
            let (out, stats) = run_with_stats(&cfg, &p).unwrap();
            for rank in [0, peer as usize] {
                let (miss, hit) = out[rank];
                assert_eq!(
                    miss,
                    fixed + cfg.match_ns(u64::from(l)),
                    "{} L={l}",
                    cfg.name
                );
                let want_hit = (l > 0).then(|| fixed + cfg.match_ns(u64::from(l / 2) + 1));
                assert_eq!(hit, want_hit, "{} L={l}", cfg.name);
                assert!(stats.match_entries[rank] > u64::from(l) + u64::from(l / 2));
            }
            points.push((f64::from(l), out[0].0 as f64));
        }
        let s = slope(&points);
        eprintln!(
            "{}: post slope {s:.4} ns per unexpected entry (c = {c})",
            cfg.name
        );
        assert!(
            (s - c).abs() <= 0.005 * c,
            "{}: slope {s} for c = {c}",
            cfg.name
        );
    }
}

/// §3.2, Figure 2: `l` unexpected messages at both ranks; node 1 leaves the barrier first;
/// rank 0 starts a non-blocking send, then posts the latency receive (walking its unexpected
/// queue while the message travels), then waits for the answer. Rank 0's output is the time.
struct UnexpectedPingPong {
    peer: Rank,
    l: u32,
}

impl Program for UnexpectedPingPong {
    type Output = u64;
    fn run<E: Endpoint>(&self, ep: &mut E) -> Result<u64> {
        let me = ep.rank();
        if me != 0 && me != self.peer {
            ep.barrier_first(self.peer)?;
            ep.barrier()?;
            return Ok(0);
        }
        let other = if me == 0 { self.peer } else { 0 };
        fill_unexpected(ep, other, self.peer, self.l)?;
        let mut round_trip = 0;
        if me == 0 {
            let t0 = ep.now_ns();
            let s = ep.isend(other, LATENCY, vec![3; 64])?;
            let r = ep.irecv(Src::Rank(other), TagSel::Tag(LATENCY), vec![0; 64])?;
            ep.wait(s)?;
            ep.wait(r)?;
            round_trip = ep.now_ns() - t0;
        } else {
            let c = ep.recv(Src::Rank(other), TagSel::Tag(LATENCY), vec![0; 64])?;
            ep.send(other, LATENCY, c.buf)?;
        }
        ep.barrier()?;
        drain_unexpected(ep, other, self.l, None)?;
        Ok(round_trip)
    }
}

/// With few unexpected messages the walk is hidden behind the message's transfer (§5.2:
/// "much of this increase is hidden by message transfer time"); once it is longer, every
/// further unexpected message adds `c` to the round trip (the walk at node 1 delays its
/// answer; the walk at node 0 overlaps the answer's flight), `c / 2` to the one-way time.
#[test]
fn unexpected_queue_walk_is_hidden_then_adds_c_per_entry() {
    let machines = [
        (
            small_machine("match_ns_per_entry = 137.5"),
            1,
            [1u32],
            [10u32, 50, 200],
        ),
        (
            elan_machine("match_ns_per_entry = 490.0"),
            15,
            [10u32],
            [40u32, 100, 300],
        ),
    ];
    for (cfg, peer, hidden, long) in machines {
        let rt = |l| {
            run_with_stats(&cfg, &UnexpectedPingPong { peer, l })
                .unwrap()
                .0[0]
        };
        let rt0 = rt(0);
        for l in hidden {
            assert_eq!(rt(l), rt0, "{} L={l} is hidden", cfg.name);
        }
        let first = rt(long[0]);
        assert!(first > rt0, "{}", cfg.name);
        let mut points = vec![];
        for l in long {
            let t = rt(l);
            let want = first + cfg.match_ns(u64::from(l)) - cfg.match_ns(u64::from(long[0]));
            assert_eq!(t, want, "{} L={l}", cfg.name);
            points.push((f64::from(l), t as f64 / 2.0));
        }
        let s = slope(&points);
        eprintln!(
            "{}: unexpected one-way slope {s:.4} ns per entry (c / 2)",
            cfg.name
        );
        let c = cfg.match_ns_per_entry;
        assert!(
            (s - c / 2.0).abs() <= 0.005 * c / 2.0,
            "{}: slope {s}",
            cfg.name
        );
    }
}
