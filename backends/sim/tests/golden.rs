//! Golden virtual times: exact values from the model of seed 001 §2 (see docs/simulator.md).

use commbench_core::transport::work::Work;
use commbench_core::{Endpoint, Error, Program, Result, Src, TagSel};
use commbench_sim::{distance, run, run_with_stats, SimConfig, NCUBE_TICK_NS};

use crate::common;
use common::machine::Machine;
use common::PingPong;

fn ncube(tick_ns: u64) -> SimConfig {
    Machine::preset("ncube7")
        .tick_ns(tick_ns)
        .stack_kib(128)
        .config()
}

/// The nCUBE's times on a smaller cube of `dimensions`, with a 1 ns clock tick.
fn cube(dimensions: u32) -> SimConfig {
    Machine::preset("ncube7")
        .dimensions(dimensions)
        .tick_ns(1)
        .stack_kib(128)
        .config()
}

/// The virtual time `f` takes on this node, between two clock reads, and its result.
fn timed<E: Endpoint, T>(ep: &mut E, f: impl FnOnce(&mut E) -> Result<T>) -> Result<(u64, T)> {
    let t1 = ep.now_ns();
    let r = f(ep)?;
    Ok((ep.now_ns() - t1, r))
}

/// The virtual time of `work` iterations of computation on this node, between two clock reads.
fn compute_time<E: Endpoint>(ep: &mut E, work: u64) -> u64 {
    let t1 = ep.now_ns();
    ep.compute(Work::int(work));
    ep.now_ns() - t1
}

#[test]
fn closed_form_is_f_plus_de_plus_u_on_the_ncube() {
    let c = ncube(1);
    let t = &c.times;
    for n in [0u64, 16, 500, 1000, 2000, 65536] {
        for d in 1..=6 {
            assert_eq!(
                c.pingpong_one_way_ns(n, d),
                t.f.ns(n) + d as u64 * t.e.ns(n) + t.u.ns(n)
            );
        }
    }
    // 16 bytes, one hop: 169.6 + 240.56 + 139.76 us (Table 3).
    assert_eq!(c.pingpong_one_way_ns(16, 1), 549_920);
}

#[test]
fn pingpong_exact_at_every_distance() {
    let c = ncube(1);
    for d in 1..=6u32 {
        let dst = (1u32 << d) - 1; // nodes 1, 3, 7, 15, 31, 63 as in seed 001 App. A
        assert_eq!(distance(0, dst), d);
        for n in [8usize, 16, 1000, 2000] {
            let p = PingPong {
                src: 0,
                dst,
                n,
                npp: 3,
                trials: 2,
            };
            let out = run(&c, &p).unwrap();
            let want = c.clock_read_ns + 2 * 3 * c.pingpong_one_way_ns(n as u64, d);
            assert_eq!(out[0], vec![want, want], "d = {d}, n = {n}");
        }
    }
    // Any pair at distance d, not only 0 -> 2^d - 1.
    let p = PingPong {
        src: 37,
        dst: 26,
        n: 100,
        npp: 1,
        trials: 1,
    };
    let out = run(&c, &p).unwrap();
    let d = distance(37, 26);
    assert_eq!(
        out[37],
        vec![c.clock_read_ns + 2 * c.pingpong_one_way_ns(100, d)]
    );
}

#[test]
fn pingpong_with_the_ncube_tick_is_quantised() {
    let c = ncube(NCUBE_TICK_NS);
    let p = PingPong {
        src: 0,
        dst: 63,
        n: 16,
        npp: 1,
        trials: 5,
    };
    let out = run(&c, &p).unwrap();
    let exact = c.clock_read_ns + 2 * c.pingpong_one_way_ns(16, 6);
    for &t in &out[0] {
        assert_eq!(t % NCUBE_TICK_NS, 0, "{t} is not a whole number of ticks");
        assert!(t.abs_diff(exact) < NCUBE_TICK_NS, "{t} vs {exact}");
    }
}

/// The two-clock-read loop of seed 000 §3.1 on rank 0.
struct TimerLoop {
    n: u32,
}

impl Program for TimerLoop {
    type Output = (u64, u64);
    fn run<E: Endpoint>(&self, ep: &mut E) -> Result<(u64, u64)> {
        let mut min_ov = u64::MAX;
        let mut res = u64::MAX;
        if ep.rank() == 0 {
            for _ in 0..self.n {
                let t1 = ep.now_ns();
                let t2 = ep.now_ns();
                let dt = t2 - t1;
                min_ov = min_ov.min(dt);
                if dt > 0 {
                    res = res.min(dt);
                }
            }
        }
        ep.barrier()?;
        Ok((min_ov, res))
    }
}

#[test]
fn timer_resolution_is_the_tick() {
    let mut c = ncube(NCUBE_TICK_NS);
    c.ranks = Some(2);
    let out = run(&c, &TimerLoop { n: 10_000 }).unwrap();
    assert_eq!(out[0], (0, NCUBE_TICK_NS));
    // With a 1 ns tick the overhead is the read cost itself.
    c.tick_ns = 1;
    let out = run(&c, &TimerLoop { n: 100 }).unwrap();
    assert_eq!(out[0], (c.clock_read_ns, c.clock_read_ns));
}

/// `min_ov` and `res_timing` of the characterisation by the rule of docs/simulator.md §3
/// ("Clock"): with `read = q tick + s`, two back-to-back reads whose first ends at phase `p`
/// (`t mod tick`) differ by `q` ticks when `p < tick - s`, else by `q + 1`; the pairs start
/// every `2 read` ns, so from the first pair's phase `p0` they visit the phases `= p0 (mod g)`,
/// `g = gcd(2 read, tick)`, from `p0 mod g` to `tick - g + p0 mod g`.
fn timer_by_the_rule(tick: u64, read: u64, p0: u64) -> (u64, u64) {
    fn gcd(a: u64, b: u64) -> u64 {
        if b == 0 {
            a
        } else {
            gcd(b, a % b)
        }
    }
    let (q, s) = (read / tick, read % tick);
    let g = gcd(2 * read, tick);
    let (lowest, highest) = (p0 % g, tick - g + p0 % g);
    let short = (lowest < tick - s).then_some(q * tick);
    let long = (highest >= tick - s).then_some((q + 1) * tick);
    let min_ov = short.or(long).unwrap_or(0);
    let res = [short, long]
        .into_iter()
        .flatten()
        .find(|&d| d > 0)
        .unwrap_or(0);
    (min_ov, res)
}

/// Core's characterisation (seed 000 §3.1) of a machine's clock at the start of a run.
fn characterised(tick: u64, read: u64, pairs: u64) -> (f64, f64) {
    let c = Machine::new("clock", 1)
        .tick_ns(tick)
        .clock_read_ns(read)
        .stack_kib(128)
        .config();
    let p = commbench_core::method::engine::TimerOnly {
        samples: pairs,
        rank: 0,
    };
    let r = run(&c, &p).unwrap()[0].clone().unwrap();
    (r.min_overhead_ns, r.resolution_ns)
}

/// A tick longer than a read does not make `min_ov` 0: with a 40 ns tick and a 30 ns read
/// every pair of a run's characterisation straddles a tick (its first read ends at 30 ns,
/// the pairs start 60 ns apart: at phases 30 and 10, and 10 + 30 reaches the next tick).
#[test]
fn timer_overhead_depends_on_the_phase_of_the_reads() {
    for (tick, read, expect) in [
        (40, 30, (40.0, 40.0)),
        (7, 5, (0.0, 7.0)),
        (1, 20, (20.0, 20.0)),
        (40, 10, (0.0, 40.0)),
        // 25 = 2 ticks + 5, every pair starts at phase 5: 5 + 5 reaches the next tick.
        (10, 25, (30.0, 30.0)),
        (10, 23, (20.0, 20.0)),
    ] {
        assert_eq!(
            characterised(tick, read, 1000),
            expect,
            "tick {tick}, read {read}"
        );
    }
    // The rule, for every tick and read up to 32 ns: a run's first read ends at `read`.
    for tick in 1..=32 {
        for read in 1..=40 {
            let (min_ov, res) = timer_by_the_rule(tick, read, read % tick);
            assert_eq!(
                characterised(tick, read, 2 * tick),
                (min_ov as f64, res as f64),
                "tick {tick}, read {read}"
            );
        }
    }
}

/// Core's timer characterisation and npp rule (seed 000 §3.1, §3.3) on the simulated clock.
struct CoreMethod;

impl Program for CoreMethod {
    type Output = Option<(f64, f64, u64)>;
    fn run<E: Endpoint>(&self, ep: &mut E) -> Result<Self::Output> {
        let me = ep.rank();
        let report = if me == 0 {
            Some(commbench_core::method::timer::characterize(ep, 20_000))
        } else {
            None
        };
        // npp_init = 100 ping-pongs of 8 bytes with node 1, timed 5 times.
        let p = PingPong {
            src: 0,
            dst: 1,
            n: 8,
            npp: 100,
            trials: 5,
        };
        let times = p.run(ep)?;
        Ok(report.map(|r| {
            let npptime: Vec<i64> = times.iter().map(|&t| t as i64).collect();
            let ppt = commbench_core::method::median_ppt(&npptime, 100);
            let npp = commbench_core::method::npp_formula(50, r.resolution_ns, ppt);
            (r.min_overhead_ns, r.resolution_ns, npp)
        }))
    }
}

#[test]
fn core_timer_method_finds_the_tick_and_npp() {
    let mut c = ncube(NCUBE_TICK_NS);
    c.ranks = Some(2);
    let out = run(&c, &CoreMethod).unwrap();
    let (min_ov, res, npp) = out[0].unwrap();
    assert_eq!(min_ov, 0.0);
    assert_eq!(res, NCUBE_TICK_NS as f64);
    // Round trip of 8 bytes over one hop: 2 (F + E + U) = 1059.92 us; npp = nint(50 * 146.286
    // / 1059.92) = nint(6.90) = 7.
    let ppt = 2.0 * ncube(1).pingpong_one_way_ns(8, 1) as f64;
    assert_eq!(ppt, 1_059_920.0);
    assert_eq!(npp, commbench_core::method::npp_formula(50, res, ppt));
    assert_eq!(npp, 7);
}

/// Seed 001 §3.3-§3.4 and §5.2 on the simulator: node `timer` computes `work` iterations while
/// other nodes communicate; returns the measured time of each experiment on node 0.
struct Experiments {
    n: usize,
    work: u64,
}

impl Program for Experiments {
    type Output = Vec<u64>;
    fn run<E: Endpoint>(&self, ep: &mut E) -> Result<Self::Output> {
        let (me, mut buf, mut out) = (ep.rank(), vec![0u8; self.n], Vec::new());

        // 1. F + S: a write followed by Q, minus Q (node 0 sends to 1).
        ep.barrier()?;
        if me == 0 {
            let (t, r) = timed(ep, |ep| {
                let r = ep.isend(1, 1, buf)?;
                ep.compute(Work::int(self.work));
                Ok(r)
            })?;
            buf = ep.wait(r)?.buf;
            out.push(t);
        } else if me == 1 {
            buf = ep.recv(Src::Rank(0), TagSel::Tag(1), buf)?.buf;
        }

        // 2. R: node 1 sends to node 0 while node 0 computes.
        ep.barrier()?;
        if me == 0 {
            out.push(compute_time(ep, self.work));
            // 3. A + U: the message is already in a system buffer.
            let (t, c) = timed(ep, |ep| ep.recv(Src::Rank(1), TagSel::Tag(2), buf))?;
            buf = c.buf;
            out.push(t);
        } else if me == 1 {
            buf = ep.send(0, 2, buf)?;
        }

        // 4. R + S (§3.4 third experiment, §5.2): node 1 streams 10 messages to node 2; e-cube
        //    routing takes them through node 0, which computes meanwhile.
        ep.barrier()?;
        if me == 0 {
            out.push(compute_time(ep, self.work));
        } else if me == 1 {
            for _ in 0..10 {
                buf = ep.send(2, 3, buf)?;
            }
        } else if me == 2 {
            for _ in 0..10 {
                buf = ep.recv(Src::Rank(1), TagSel::Tag(3), buf)?.buf;
            }
        }
        ep.barrier()?;
        Ok(out)
    }
}

#[test]
fn handlers_preempt_compute_and_forwarding_costs_r_plus_s() {
    let c = cube(2);
    let n = 2000usize;
    let work = 40_000; // 40 ms of Q at 1 us per iteration: longer than 10 hops of E(2000)
    let (out, stats) = run_with_stats(&c, &Experiments { n, work }).unwrap();
    let t = &c.times;
    let nn = n as u64;
    let (f, s, r, a, u) = (t.f.ns(nn), t.s.ns(nn), t.r.ns(nn), t.a.ns(nn), t.u.ns(nn));
    let q = work * 1000;
    let cr = c.clock_read_ns;
    assert_eq!(out[0][0], cr + f + s + q, "F + S");
    assert_eq!(out[0][1], cr + q + r, "R");
    assert_eq!(out[0][2], cr + a + u, "A + U");
    assert_eq!(
        out[0][3],
        cr + q + 10 * (r + s),
        "10 forwarded messages cost 10 (R + S)"
    );
    // Node 0 ran handlers for: S of (1), R of (2), and R + S for each forwarded message.
    assert_eq!(stats.handler_ns[0], s + r + 10 * (r + s));
    // Node 3 took no part.
    assert_eq!(stats.handler_ns[3], 0);
    assert_eq!(stats.messages, 12);
    assert_eq!(stats.hops, 1 + 1 + 20);
}

/// A random-ish exchange: every rank sends to a pseudo-random set of others and computes.
struct Mix;

impl Program for Mix {
    type Output = (u64, Vec<u8>);
    fn run<E: Endpoint>(&self, ep: &mut E) -> Result<(u64, Vec<u8>)> {
        let me = ep.rank();
        let n = ep.size();
        let mut seen = Vec::new();
        for round in 0..20u32 {
            let dest = (me * 7 + round * 3 + 1) % n;
            let src_count = (0..n)
                .filter(|&r| (r * 7 + round * 3 + 1) % n == me)
                .count();
            let mut reqs = Vec::new();
            for _ in 0..src_count {
                reqs.push(ep.irecv(Src::Any, TagSel::Any, vec![0; 64])?);
            }
            reqs.push(ep.isend(dest, round, vec![me as u8; (round as usize * 5) % 64])?);
            ep.compute(Work::int(((me + round) % 5) as u64 * 1000));
            let mut cs = Vec::new();
            ep.wait_all(&reqs, &mut cs)?;
            seen.extend(cs.iter().map(|c| c.peer as u8));
        }
        let t = ep.now_ns();
        ep.barrier()?;
        Ok((t, seen))
    }
}

#[test]
fn deterministic_and_seeded() {
    let mut c = Machine::preset("generic")
        .stack_kib(128)
        .jitter(500, 0)
        .config();
    let a = run_with_stats(&c, &Mix).unwrap();
    let b = run_with_stats(&c, &Mix).unwrap();
    assert_eq!(a.0, b.0);
    assert_eq!(a.1, b.1);
    c.seed = 12345;
    let other = run_with_stats(&c, &Mix).unwrap();
    assert_ne!(a.1.end_ns, other.1.end_ns, "the seed drives the jitter");
}

struct BothReceiveFirst;

impl Program for BothReceiveFirst {
    type Output = ();
    fn run<E: Endpoint>(&self, ep: &mut E) -> Result<()> {
        let peer = 1 - ep.rank();
        let c = ep.recv(Src::Rank(peer), TagSel::Tag(1), vec![0; 8])?;
        ep.send(peer, 1, c.buf)?;
        Ok(())
    }
}

#[test]
fn deadlock_names_every_blocked_node() {
    let c = cube(1);
    let e = run(&c, &BothReceiveFirst).unwrap_err();
    let Error::Deadlock(msg) = &e else {
        panic!("expected a deadlock, got {e}");
    };
    assert!(msg.contains("node 0: recv from 1 tag 1"), "{msg}");
    assert!(msg.contains("node 1: recv from 0 tag 1"), "{msg}");
}

struct PollForever;

impl Program for PollForever {
    type Output = ();
    fn run<E: Endpoint>(&self, ep: &mut E) -> Result<()> {
        if ep.rank() == 0 {
            let r = ep.irecv(Src::Any, TagSel::Tag(9), vec![0; 8])?;
            while ep.test(r)?.is_none() {}
        } else {
            ep.barrier()?;
        }
        Ok(())
    }
}

#[test]
fn polling_with_nothing_in_flight_is_reported() {
    let mut c = cube(1);
    c.spin_limit = 1000;
    let e = run(&c, &PollForever).unwrap_err();
    let msg = e.to_string();
    assert!(
        msg.contains("node 0: polling recv from any source tag 9"),
        "{msg}"
    );
    assert!(msg.contains("node 1: barrier"), "{msg}");
}

/// Node 0 sends three 600-byte messages to node 1, whose receive buffer holds 1000 bytes.
struct Bounded;

impl Program for Bounded {
    type Output = Vec<u64>;
    fn run<E: Endpoint>(&self, ep: &mut E) -> Result<Vec<u64>> {
        let mut out = Vec::new();
        ep.barrier()?;
        if ep.rank() == 0 {
            for _ in 0..3 {
                ep.send(1, 1, vec![1; 600])?;
            }
        } else {
            ep.compute(Work::int(100_000));
            let mut buf = vec![0; 600];
            for _ in 0..3 {
                buf = ep.recv(Src::Rank(0), TagSel::Tag(1), buf)?.buf;
                out.push(ep.now_ns());
            }
        }
        ep.barrier()?;
        Ok(out)
    }
}

#[test]
fn bounded_receive_buffer_holds_the_channel() {
    let mut c = cube(1);
    c.recv_buffer_bytes = Some(1000);
    let (out, st) = run_with_stats(&c, &Bounded).unwrap();
    let t = &c.times;
    let (e, u, r) = (t.e.ns(600), t.u.ns(600), t.r.ns(600));
    // A message's hop starts only when the previous one has been collected (end of its U, at
    // T_k), so it arrives E later. The clock read after collecting message k waits behind the
    // R of message k + 1, charged at T_k; the last read has no R to wait for:
    // read_k = T_k + R + c (k = 1, 2), read_3 = T_3 + c, T_{k+1} = T_k + E + U.
    assert_eq!(out[1][1] - out[1][0], e + u);
    assert_eq!(out[1][2] - out[1][1], e + u - r);
    assert_eq!(st.handler_ns[1], 3 * r);
    // Unbounded, the messages are all waiting: A + U + read each.
    c.recv_buffer_bytes = None;
    let out = run(&c, &Bounded).unwrap();
    assert_eq!(out[1][1] - out[1][0], t.a.ns(600) + u + c.clock_read_ns);
}

#[test]
fn oversized_message_for_a_bounded_buffer_is_an_error() {
    struct Big;
    impl Program for Big {
        type Output = ();
        fn run<E: Endpoint>(&self, ep: &mut E) -> Result<()> {
            if ep.rank() == 0 {
                match ep.isend(1, 0, vec![0; 2000]) {
                    Err(Error::Invalid(_)) => {}
                    other => panic!("expected an error, got {other:?}"),
                }
            }
            Ok(())
        }
    }
    let mut c = cube(1);
    c.recv_buffer_bytes = Some(1000);
    run(&c, &Big).unwrap();
}

#[test]
fn node_error_ends_the_run_naming_the_node() {
    struct Fails;
    impl Program for Fails {
        type Output = ();
        fn run<E: Endpoint>(&self, ep: &mut E) -> Result<()> {
            match ep.rank() {
                2 => Err(Error::Invalid("boom".into())),
                _ => ep.barrier(),
            }
        }
    }
    let c = cube(2);
    let e = run(&c, &Fails).unwrap_err();
    assert!(e.to_string().contains("sim node 2"), "{e}");
    assert!(matches!(e.root(), Error::Invalid(_)));
}

#[test]
fn endpoint_identity() {
    struct Id;
    impl Program for Id {
        type Output = (String, String, u32);
        fn run<E: Endpoint>(&self, ep: &mut E) -> Result<Self::Output> {
            Ok((ep.backend().to_string(), ep.clock_name(), ep.size()))
        }
    }
    let mut c = ncube(NCUBE_TICK_NS);
    c.ranks = Some(5);
    let out = run(&c, &Id).unwrap();
    assert_eq!(out.len(), 5);
    assert_eq!(out[4].0, "sim");
    assert!(
        out[4].1.contains("virtual") && out[4].1.contains("146286"),
        "{}",
        out[4].1
    );
    assert_eq!(out[4].2, 5);
}

/// More ranks than the caller's stack holds nested scopes for: the kernel moves to a thread.
#[test]
fn eleven_dimensions() {
    struct Swap;
    impl Program for Swap {
        type Output = u32;
        fn run<E: Endpoint>(&self, ep: &mut E) -> Result<u32> {
            let peer = ep.rank() ^ 1;
            let r = ep.irecv(Src::Rank(peer), TagSel::Tag(0), vec![0; 4])?;
            ep.send(peer, 0, ep.rank().to_le_bytes().to_vec())?;
            let c = ep.wait(r)?;
            ep.barrier()?;
            Ok(u32::from_le_bytes([c.buf[0], c.buf[1], c.buf[2], c.buf[3]]))
        }
    }
    let c = Machine::preset("generic")
        .dimensions(11)
        .stack_kib(64)
        .config();
    let out = run(&c, &Swap).unwrap();
    assert!(out.iter().enumerate().all(|(i, &p)| p == i as u32 ^ 1));
}
