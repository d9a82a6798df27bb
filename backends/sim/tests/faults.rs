//! Injected faults on ground truth: ping-pongs run on a machine with a slow link, node or
//! dimension take exactly the closed-form time of docs/simulator.md §6a, and every pair the
//! fault does not touch takes exactly the time it takes without it. The faulty parts are
//! drawn with a seeded generator, so the checks are not tuned to one placement.

use commbench_core::stats::Xoshiro256;
use commbench_core::Error;
use commbench_sim::{run, run_with_stats, Fault, SimConfig};

use crate::common;
use common::PingPong;

/// Dimensions of the test machine: 8 nodes, 28 pairs.
const DIMS: u32 = 3;
const NODES: u32 = 1 << DIMS;

/// A 3-cube with round-number times (µs; 1 ns tick) and the given `[[faults]]` text. R is
/// small beside E, but a node 7 times slower takes R longer than E at 0 bytes.
fn machine(faults: &str) -> SimConfig {
    SimConfig::from_toml_str(&format!(
        "name = \"faulty\"\ndimensions = {DIMS}\ntick_ns = 1\nclock_read_ns = 50\n\
         stack_kib = 128\n{faults}\n[times]\n\
         F = {{ base_us = 10, per_byte_us = 0.002 }}\nS = {{ base_us = 2, per_byte_us = 0.001 }}\n\
         R = {{ base_us = 3, per_byte_us = 0.001 }}\nA = {{ base_us = 1 }}\n\
         U = {{ base_us = 8, per_byte_us = 0.003 }}\nE = {{ base_us = 20, per_byte_us = 0.01 }}\n"
    ))
    .expect("a valid machine")
}

fn slow_link(from: u32, to: u32, factor: f64) -> String {
    format!("[[faults]]\nkind = \"slow_link\"\nfrom = {from}\nto = {to}\nfactor = {factor:?}\n")
}

fn slow_node(node: u32, factor: f64) -> String {
    format!("[[faults]]\nkind = \"slow_node\"\nnode = {node}\nfactor = {factor:?}\n")
}

fn slow_dimension(dimension: u32, factor: f64) -> String {
    format!("[[faults]]\nkind = \"slow_dimension\"\ndimension = {dimension}\nfactor = {factor:?}\n")
}

/// Factors to draw from: whole and fractional, some that make rounding matter.
const FACTORS: &[f64] = &[1.25, 1.5, 2.0, 2.37, 3.0, 4.0, 7.3];

fn draw_factor(rng: &mut Xoshiro256) -> f64 {
    FACTORS[rng.below(FACTORS.len())]
}

/// Every unordered pair of distinct nodes.
fn pairs() -> Vec<(u32, u32)> {
    (0..NODES)
        .flat_map(|s| (s + 1..NODES).map(move |t| (s, t)))
        .collect()
}

/// E-cube route, written out here rather than taken from the crate: lowest differing bit first.
fn ecube(from: u32, to: u32) -> Vec<u32> {
    let mut path = vec![from];
    let mut at = from;
    for k in 0..DIMS {
        if (at ^ to) & (1 << k) != 0 {
            at ^= 1 << k;
            path.push(at);
        }
    }
    path
}

/// The documented rounding rule: `round(base * factor)`, exactly `base` at factor 1.
fn scale(base: u64, factor: f64) -> u64 {
    if factor == 1.0 {
        base
    } else {
        (base as f64 * factor).round() as u64
    }
}

/// What the test injected, as factors per directed channel and per node.
struct Truth {
    link: Vec<f64>,
    node: Vec<f64>,
}

impl Truth {
    fn none() -> Self {
        Truth {
            link: vec![1.0; (NODES * NODES) as usize],
            node: vec![1.0; NODES as usize],
        }
    }
    fn link(&self, v: u32, w: u32) -> f64 {
        self.link[(v * NODES + w) as usize]
    }
    fn slow_link(&mut self, a: u32, b: u32, f: f64) {
        self.link[(a * NODES + b) as usize] *= f;
        self.link[(b * NODES + a) as usize] *= f;
    }
    fn slow_dimension(&mut self, k: u32, f: f64) {
        for v in 0..NODES {
            self.link[(v * NODES + (v ^ (1 << k))) as usize] *= f;
        }
    }

    /// One-way time from `s` to `t` on an idle machine (docs/simulator.md §6a):
    /// F_s + E_1 + .. + E_{d-1} + max(E_d, R_t) + U_t.
    fn one_way(&self, c: &SimConfig, n: u64, s: u32, t: u32) -> u64 {
        let tm = &c.times;
        let path = ecube(s, t);
        let mut total = scale(tm.f.ns(n), self.node[s as usize]);
        for (i, hop) in path.windows(2).enumerate() {
            let e = scale(tm.e.ns(n), self.link(hop[0], hop[1]));
            total += if i + 2 == path.len() {
                e.max(scale(tm.r.ns(n), self.node[t as usize]))
            } else {
                e
            };
        }
        total + scale(tm.u.ns(n), self.node[t as usize])
    }

    /// Handler time (R and S) per node for the messages of one [`PingPong`] run.
    fn handler_ns(&self, c: &SimConfig, p: &PingPong) -> Vec<u64> {
        let mut h = vec![0u64; NODES as usize];
        let mut send = |from: u32, to: u32, n: u64, count: u64| {
            for hop in ecube(from, to).windows(2) {
                let (v, w) = (hop[0] as usize, hop[1] as usize);
                h[v] += count * scale(c.times.s.ns(n), self.node[v]);
                h[w] += count * scale(c.times.r.ns(n), self.node[w]);
            }
        };
        send(p.dst, p.src, 1, u64::from(p.trials)); // the handshakes
        send(p.src, p.dst, p.n as u64, u64::from(p.trials) * p.npp);
        send(p.dst, p.src, p.n as u64, u64::from(p.trials) * p.npp);
        h
    }
}

fn pingpong(s: u32, t: u32, n: usize) -> PingPong {
    PingPong {
        src: s,
        dst: t,
        n,
        npp: 2,
        trials: 2,
    }
}

/// The time of each trial on `s`, and the handler time per node.
fn measure(c: &SimConfig, p: &PingPong) -> (Vec<u64>, Vec<u64>) {
    let (out, stats) = run_with_stats(c, p).expect("the ping-pong runs");
    (out[p.src as usize].clone(), stats.handler_ns)
}

/// What a trial of `p` measures under `truth`: a clock read and `npp` round trips.
fn expected(c: &SimConfig, truth: &Truth, p: &PingPong) -> u64 {
    let (s, t, n) = (p.src, p.dst, p.n as u64);
    c.clock_read_ns + p.npp * (truth.one_way(c, n, s, t) + truth.one_way(c, n, t, s))
}

/// Sizes every check runs at: the fixed parts alone, and with per-byte parts.
const SIZES: [usize; 2] = [0, 1000];

/// Measured trial times per (pair, size) on the machine without faults.
fn baselines() -> Vec<((u32, u32), usize, u64)> {
    let c = machine("");
    let none = Truth::none();
    let mut v = Vec::new();
    for (s, t) in pairs() {
        for n in SIZES {
            let p = pingpong(s, t, n);
            let (times, _) = measure(&c, &p);
            let want = expected(&c, &none, &p);
            assert_eq!(times, vec![want; 2], "no faults, {s} <-> {t}, {n} B");
            // The crate's fault-free closed form agrees.
            let d = (s ^ t).count_ones();
            assert_eq!(
                want,
                c.clock_read_ns + p.npp * 2 * c.pingpong_one_way_ns(n as u64, d)
            );
            v.push(((s, t), n, want));
        }
    }
    v
}

/// Run every pair at every size on `c`; each trial must be the closed form under `truth`
/// (and the crate's own `pingpong_one_way_between_ns`), and differ from the baseline exactly
/// when `touched(s, t)` says the fault is on the pair's routes. Returns the pairs touched.
fn check_all_pairs(
    c: &SimConfig,
    truth: &Truth,
    base: &[((u32, u32), usize, u64)],
    touched: impl Fn(u32, u32) -> bool,
) -> usize {
    let mut hit = 0;
    for &((s, t), n, before) in base {
        let p = pingpong(s, t, n);
        let (times, handlers) = measure(c, &p);
        let want = expected(c, truth, &p);
        let faults: Vec<String> = c.faults().iter().map(|f| f.to_string()).collect();
        let ctx = format!("{faults:?}, {s} <-> {t}, {n} B");
        assert_eq!(times, vec![want; 2], "{ctx}");
        let crate_form = c.clock_read_ns
            + p.npp
                * (c.pingpong_one_way_between_ns(n as u64, s, t)
                    + c.pingpong_one_way_between_ns(n as u64, t, s));
        assert_eq!(want, crate_form, "{ctx}");
        assert_eq!(handlers, truth.handler_ns(c, &p), "handler time, {ctx}");
        if touched(s, t) {
            assert!(want > before, "{ctx}: {want} is not slower than {before}");
            hit += 1;
        } else {
            assert_eq!(want, before, "{ctx}: untouched pair changed");
        }
    }
    hit
}

/// Whether the route from `s` to `t` or back crosses channel `a -> b` or `b -> a`.
fn routes_cross(s: u32, t: u32, a: u32, b: u32) -> bool {
    [ecube(s, t), ecube(t, s)].iter().any(|path| {
        path.windows(2)
            .any(|h| (h[0], h[1]) == (a, b) || (h[0], h[1]) == (b, a))
    })
}

#[test]
fn slow_link_slows_exactly_the_pairs_routed_over_it() {
    let base = baselines();
    for seed in 1..=5u64 {
        let mut rng = Xoshiro256::new(seed);
        let a = rng.below(NODES as usize) as u32;
        let b = a ^ (1 << rng.below(DIMS as usize));
        let f = draw_factor(&mut rng);
        let c = machine(&slow_link(a, b, f));
        let mut truth = Truth::none();
        truth.slow_link(a, b, f);
        let hit = check_all_pairs(&c, &truth, &base, |s, t| routes_cross(s, t, a, b));
        // At least the link's own pair; e-cube puts every link on several routes.
        assert!(
            hit >= 2 * SIZES.len(),
            "seed {seed}: {a} <-> {b} on {hit} runs"
        );
    }
}

#[test]
fn slow_node_slows_its_own_pairs_and_only_loads_pairs_routed_through_it() {
    let base = baselines();
    let mut through = 0;
    for seed in 11..=15u64 {
        let mut rng = Xoshiro256::new(seed);
        let v = rng.below(NODES as usize) as u32;
        let f = draw_factor(&mut rng);
        let c = machine(&slow_node(v, f));
        let mut truth = Truth::none();
        truth.node[v as usize] = f;
        let hit = check_all_pairs(&c, &truth, &base, |s, t| s == v || t == v);
        assert_eq!(hit, 7 * SIZES.len(), "seed {seed}: node {v} has 7 partners");
        // A node that only forwards: unchanged time, and its R + S scaled.
        let plain = machine("");
        for (s, t) in pairs() {
            let inner = |path: Vec<u32>| path[1..path.len() - 1].contains(&v);
            if s == v || t == v || !(inner(ecube(s, t)) || inner(ecube(t, s))) {
                continue;
            }
            let p = pingpong(s, t, 1000);
            let (_, slow) = measure(&c, &p);
            let (_, normal) = measure(&plain, &p);
            assert!(
                slow[v as usize] > normal[v as usize],
                "seed {seed}, {s} <-> {t}"
            );
            through += 1;
        }
    }
    assert!(through > 0, "no drawn node forwarded anything");
}

#[test]
fn slow_dimension_slows_the_pairs_that_differ_in_that_bit() {
    let base = baselines();
    for seed in 21..=25u64 {
        let mut rng = Xoshiro256::new(seed);
        let k = rng.below(DIMS as usize) as u32;
        let f = draw_factor(&mut rng);
        let c = machine(&slow_dimension(k, f));
        let mut truth = Truth::none();
        truth.slow_dimension(k, f);
        let hit = check_all_pairs(&c, &truth, &base, |s, t| (s ^ t) & (1 << k) != 0);
        assert_eq!(
            hit,
            16 * SIZES.len(),
            "seed {seed}: 16 pairs differ in bit {k}"
        );
    }
}

#[test]
fn mixed_faults_multiply_and_match_the_closed_form() {
    let base = baselines();
    for seed in 31..=36u64 {
        let mut rng = Xoshiro256::new(seed);
        let mut text = String::new();
        let mut truth = Truth::none();
        let mut on_link = Vec::new();
        let mut on_node = Vec::new();
        for _ in 0..1 + rng.below(4) {
            let f = draw_factor(&mut rng);
            match rng.below(3) {
                0 => {
                    let a = rng.below(NODES as usize) as u32;
                    let b = a ^ (1 << rng.below(DIMS as usize));
                    // Given either way round, sometimes twice: the factors multiply.
                    text += &slow_link(b, a, f);
                    truth.slow_link(a, b, f);
                    on_link.push((a, b));
                }
                1 => {
                    let v = rng.below(NODES as usize) as u32;
                    text += &slow_node(v, f);
                    truth.node[v as usize] *= f;
                    on_node.push(v);
                }
                _ => {
                    let k = rng.below(DIMS as usize) as u32;
                    text += &slow_dimension(k, f);
                    truth.slow_dimension(k, f);
                    for v in (0..NODES).filter(|v| v & (1 << k) == 0) {
                        on_link.push((v, v ^ (1 << k)));
                    }
                }
            }
        }
        let c = machine(&text);
        check_all_pairs(&c, &truth, &base, |s, t| {
            on_node.iter().any(|&v| v == s || v == t)
                || on_link.iter().any(|&(a, b)| routes_cross(s, t, a, b))
        });
    }
    // The same link given twice, both ways, and its dimension: 2 * 1.5 * 3 = 9 times E.
    let c = machine(&format!(
        "{}{}{}",
        slow_link(2, 3, 2.0),
        slow_link(3, 2, 1.5),
        slow_dimension(0, 3.0)
    ));
    let p = pingpong(2, 3, 0);
    let (times, _) = measure(&c, &p);
    let t = &c.times;
    let one_way = t.f.ns(0) + 9 * t.e.ns(0) + t.u.ns(0);
    assert_eq!(times[0], c.clock_read_ns + 2 * 2 * one_way);
}

#[test]
fn faults_on_a_preset_file() {
    let c = SimConfig::from_toml_str(&format!(
        "preset = \"ncube7\"\ntick_ns = 1\n{}",
        slow_link(0, 1, 3.0)
    ))
    .unwrap();
    assert_eq!(c.name, "ncube7");
    assert_eq!(
        c.faults(),
        &[Fault::SlowLink {
            from: 0,
            to: 1,
            factor: 3.0,
            from_us: None,
            until_us: None
        }]
    );
    let t = &c.times;
    let (f, e, u) = (t.f.ns(16), t.e.ns(16), t.u.ns(16));
    let p = PingPong {
        src: 0,
        dst: 63,
        n: 16,
        npp: 1,
        trials: 1,
    };
    let out = run(&c, &p).unwrap();
    // 0 -> 1 -> 3 -> .. -> 63 crosses the slow link; 63 -> 62 -> .. -> 0 does not.
    let there = f + 3 * e + 5 * e + u;
    let back = c.pingpong_one_way_ns(16, 6);
    assert_eq!(back, f + 6 * e + u);
    assert_eq!(out[0], vec![c.clock_read_ns + there + back]);
    let p = PingPong { dst: 1, ..p };
    let out = run(&c, &p).unwrap();
    assert_eq!(out[0], vec![c.clock_read_ns + 2 * (f + 3 * e + u)]);
}

#[test]
fn hop_jitter_is_not_scaled() {
    // Same seed, same hops in the same order: the jitter draws are the same with and without
    // the fault, so the two differ by exactly the scaled part of E.
    let jitter = "seed = 9\njitter_ns = 5000\n";
    let (a, b, x) = (5, 7, 2.5);
    let plain = machine(jitter);
    let slow = machine(&format!("{jitter}{}", slow_link(a, b, x)));
    let e = plain.times.e.ns(1000);
    let extra = scale(e, x) - e;
    for (s, t) in pairs() {
        let p = pingpong(s, t, 1000);
        let (before, _) = measure(&plain, &p);
        let (after, _) = measure(&slow, &p);
        let crossings: u64 = [ecube(s, t), ecube(t, s)]
            .iter()
            .map(|path| {
                path.windows(2)
                    .filter(|h| (h[0], h[1]) == (a, b) || (h[0], h[1]) == (b, a))
                    .count() as u64
            })
            .sum();
        for (b0, a0) in before.iter().zip(&after) {
            assert_eq!(a0 - b0, p.npp * crossings * extra, "{s} <-> {t}");
        }
    }
    // The jitter is there: some trial is off the exact closed form.
    let p = pingpong(0, 7, 1000);
    let (times, _) = measure(&plain, &p);
    assert!(times
        .iter()
        .any(|&t| t != expected(&plain, &Truth::none(), &p)));
}

#[test]
fn a_fault_that_would_overflow_the_clock_is_refused() {
    // E = 2e9 ns at every size; x 1e6 is 2e15 ns, over the 1e15 ns one step may take.
    let c = SimConfig::from_toml_str(&format!(
        "dimensions = 1\ntick_ns = 1\nstack_kib = 128\n{}\n[times]\nF = {{ base_us = 1 }}\n\
         S = {{ base_us = 1 }}\nR = {{ base_us = 1 }}\nA = {{ base_us = 1 }}\n\
         U = {{ base_us = 1 }}\nE = {{ base_us = 2e6 }}\n",
        slow_dimension(0, 1e6)
    ))
    .unwrap();
    let e = run(&c, &pingpong(0, 1, 8)).unwrap_err();
    assert!(matches!(e.root(), Error::Config(_)), "{e}");
    assert!(e.to_string().contains("slowest"), "{e}");
    // Without the fault the same machine runs.
    let mut ok = c.clone();
    ok.faults.clear();
    run(&ok, &pingpong(0, 1, 8)).unwrap();
}

/// [`PingPong`] that also says when each trial started: `(start, elapsed)` per trial on
/// `src`, both from the virtual clock.
struct Stamped(PingPong);

impl commbench_core::Program for Stamped {
    type Output = Vec<(u64, u64)>;
    fn run<E: commbench_core::Endpoint>(&self, ep: &mut E) -> commbench_core::Result<Self::Output> {
        use commbench_core::{Src, TagSel};
        let p = &self.0;
        let me = ep.rank();
        let (mut buf, mut hs) = (vec![0u8; p.n], vec![0u8; 1]);
        let mut out = Vec::new();
        for _ in 0..p.trials {
            ep.barrier()?;
            if me == p.src {
                hs = ep.recv(Src::Rank(p.dst), TagSel::Tag(2), hs)?.buf;
                let t1 = ep.now_ns();
                for _ in 0..p.npp {
                    buf = ep.send(p.dst, 1, buf)?;
                    buf = ep.recv(Src::Rank(p.dst), TagSel::Tag(1), buf)?.buf;
                }
                out.push((t1, ep.now_ns() - t1));
            } else if me == p.dst {
                hs = ep.send(p.src, 2, hs)?;
                for _ in 0..p.npp {
                    buf = ep.recv(Src::Rank(p.src), TagSel::Tag(1), buf)?.buf;
                    buf = ep.send(p.src, 1, buf)?;
                }
            }
        }
        ep.barrier()?;
        Ok(out)
    }
}

/// The stamped trials of `p` on `c`, as `src` timed them.
fn stamped(c: &SimConfig, p: &PingPong) -> Vec<(u64, u64)> {
    let out = run(
        c,
        &Stamped(PingPong {
            src: p.src,
            dst: p.dst,
            n: p.n,
            npp: p.npp,
            trials: p.trials,
        }),
    )
    .expect("the ping-pong runs");
    out[p.src as usize].clone()
}

/// A fault drawn at random that slows the pair `s <-> t`: one of its nodes, a link of its
/// route there, or the dimension of one, as `[[faults]]` text without its window.
fn fault_on_pair(rng: &mut Xoshiro256, s: u32, t: u32) -> String {
    let f = draw_factor(rng);
    let path = ecube(s, t);
    let hop = rng.below(path.len() - 1);
    match rng.below(3) {
        0 => slow_node([s, t][rng.below(2)], f),
        1 => slow_link(path[hop], path[hop + 1], f),
        _ => slow_dimension((path[hop] ^ path[hop + 1]).trailing_zeros(), f),
    }
}

#[test]
fn a_fault_with_a_window_slows_exactly_the_trials_inside_it() {
    // Every kind of fault, on a pair drawn at random, from and until a time drawn at random.
    for seed in 41..=52u64 {
        let mut rng = Xoshiro256::new(seed);
        let (s, t) = pairs()[rng.below(pairs().len())];
        let fault = fault_on_pair(&mut rng, s, t);
        let p = PingPong {
            src: s,
            dst: t,
            n: [0, 1000][rng.below(2)],
            npp: 2,
            trials: 12,
        };
        let (plain, slow) = (machine(""), machine(&fault));
        let (before, after) = (stamped(&plain, &p), stamped(&slow, &p));
        let k = 1 + rng.below(p.trials as usize - 1);
        // From a time in the gap before trial k (on the machine that is fast until then):
        // trials before k as without the fault, from k on as with it throughout.
        let gap = (before[k - 1].0 + before[k - 1].1, before[k].0);
        let at = gap.0 + rng.below((gap.1 - gap.0) as usize) as u64;
        let from = machine(&format!("{fault}from_us = {}\n", at as f64 / 1000.0));
        let got = stamped(&from, &p);
        let ctx = format!("seed {seed}: {:?} from {at} ns, trial {k}", from.faults());
        assert_eq!(&got[..k], &before[..k], "{ctx}");
        for (j, (g, a)) in got.iter().zip(&after).enumerate().skip(k) {
            assert_eq!(g.1, a.1, "{ctx}: trial {j}");
            assert!(g.0 >= at, "{ctx}: trial {j} started at {}", g.0);
        }
        assert!(after[0].1 > before[0].1, "{ctx}: the fault slows the pair");
        // The closed form at a time inside the window and before it.
        let (n, npp) = (p.n as u64, p.npp);
        let rt = |c: &SimConfig, t_ns| {
            c.clock_read_ns
                + npp
                    * (c.pingpong_one_way_between_at_ns(n, s, t, t_ns)
                        + c.pingpong_one_way_between_at_ns(n, t, s, t_ns))
        };
        assert_eq!(rt(&from, at), after[k].1, "{ctx}");
        assert_eq!(rt(&from, at - 1), before[0].1, "{ctx}");
        // Until a time in the gap before trial k (on the machine slow until then): the
        // other way round.
        let gap = (after[k - 1].0 + after[k - 1].1, after[k].0);
        let until = gap.0 + rng.below((gap.1 - gap.0) as usize) as u64;
        let c = machine(&format!("{fault}until_us = {}\n", until as f64 / 1000.0));
        let got = stamped(&c, &p);
        assert_eq!(&got[..k], &after[..k], "{ctx}: until {until} ns");
        for (j, (g, b)) in got.iter().zip(&before).enumerate().skip(k) {
            assert_eq!(g.1, b.1, "{ctx}: until {until} ns, trial {j}");
        }
        // A window the run never reaches changes nothing, and the run is deterministic.
        let late = machine(&format!("{fault}from_us = 1e9\n"));
        assert_eq!(stamped(&late, &p), before, "{ctx}");
        assert_eq!(stamped(&c, &p), got, "{ctx}: the same run again");
    }
}

/// Rank 1 waits for a message rank 0 sends only after `delay_ns` of compute: the first wait
/// is bounded by the machine's `wait_timeout_us`; the second, on the same request, collects
/// the message. Rank 1 returns the clock before the first wait, after its timeout, and the
/// error it got.
struct LateSend {
    delay_ns: u64,
}

impl commbench_core::Program for LateSend {
    type Output = (u64, u64, String);
    fn run<E: commbench_core::Endpoint>(
        &self,
        ep: &mut E,
    ) -> commbench_core::Result<(u64, u64, String)> {
        use commbench_core::{Src, TagSel};
        match ep.rank() {
            0 => {
                ep.compute(commbench_core::transport::work::Work::int(self.delay_ns));
                ep.send(1, 9, vec![7; 8])?;
                return Ok((0, 0, String::new()));
            }
            1 => {}
            _ => return Ok((0, 0, String::new())),
        }
        let t1 = ep.now_ns();
        let req = ep.irecv(Src::Rank(0), TagSel::Tag(9), vec![0; 8])?;
        let first = ep.wait(req);
        let t2 = ep.now_ns();
        let Err(e) = first else {
            return Ok((t1, t2, "no timeout".into()));
        };
        let c = ep.wait(req)?;
        assert_eq!(c.buf[..c.len], [7; 8]);
        Ok((t1, t2, e.to_string()))
    }
}

/// A wait bounded by `wait_timeout_us` fails after exactly its bound in virtual time, names
/// what it waited for, and leaves the receive posted: a later wait collects the message.
/// Bounds and delays drawn at random.
#[test]
fn a_bounded_wait_times_out_after_exactly_its_bound_and_its_receive_stays() {
    let mut rng = Xoshiro256::new(0x7131);
    for _ in 0..8 {
        let bound_us = 10 + rng.below(990) as u64;
        let mut c = machine("");
        c.compute_ns_per_iter = 1.0;
        c.wait_timeout_us = Some(bound_us as f64);
        let delay_ns = bound_us * 1000 * (11 + rng.below(8) as u64) / 10;
        let out = run(&c, &LateSend { delay_ns }).expect("the run ends");
        let (t1, t2, e) = &out[1];
        // A of the 8-byte receive, the bound, then a clock read.
        let a = c.times.a.ns(8);
        assert_eq!(t2 - t1, a + bound_us * 1000 + c.clock_read_ns, "{e}");
        assert!(e.contains("timed out") && e.contains("virtual time"), "{e}");
        assert!(e.contains("recv from 0 tag 9"), "{e}");
    }
    // Without a bound (and no silent node) the same wait simply waits.
    let out = run(
        &machine(""),
        &LateSend {
            delay_ns: 5_000_000,
        },
    )
    .expect("the run ends");
    assert_eq!(out[1].2, "no timeout");
}

/// A node that falls silent: a benchmark that needs it fails naming it, with the deadlock
/// report when the others can never go on and a timeout when their waits are bounded; a
/// program the others finish without it is named lost by its `lost()`.
#[test]
fn a_silent_node_is_named_by_a_benchmark_that_needs_it() {
    let silent = |node: u32, from_us: f64| {
        let mut c = machine("");
        c.silent.push(commbench_sim::Silent { node, from_us });
        c
    };
    // Node 2 is not in the pair, but every trial starts with a barrier.
    let e = run(&silent(2, 0.0), &pingpong(0, 1, 8)).expect_err("a silent node");
    assert!(matches!(e.root(), Error::Deadlock(_)), "{e}");
    assert!(e.to_string().contains("node 2: silent since"), "{e}");
    // Node 1 echoes: rank 0's wait for the echo times out after one virtual second.
    let mut p = pingpong(0, 1, 8);
    p.trials = 50;
    let e = run(&silent(1, 150.0), &p).expect_err("a silent echo");
    assert!(matches!(e.root(), Error::Timeout { .. }), "{e}");
    assert!(e.to_string().contains("timed out after 1.0 s"), "{e}");
    // Every other node finishes: the silent one is named.
    struct Clock;
    impl commbench_core::Program for Clock {
        type Output = u64;
        fn run<E: commbench_core::Endpoint>(&self, ep: &mut E) -> commbench_core::Result<u64> {
            Ok(ep.now_ns())
        }
    }
    let e = run(&silent(3, 0.0), &Clock).expect_err("a silent node never returns");
    assert!(matches!(e.root(), Error::PeerLost { peer: 3, .. }), "{e}");
    assert!(e.to_string().contains("fell silent"), "{e}");
    assert_eq!(run(&machine(""), &Clock).expect("no silent node").len(), 8);
}

/// `[[silent]]` entries and `wait_timeout_us` are checked, read and written back.
#[test]
fn silent_entries_are_checked() {
    let bad = [
        ("[[silent]]\nnode = 8\n", "node 8 is not a rank"),
        (
            "[[silent]]\nnode = 1\n[[silent]]\nnode = 1\n",
            "named silent twice",
        ),
        ("[[silent]]\nnode = 1\nfrom_us = -3.0\n", "from_us = -3"),
        ("[[silent]]\nnode = 1\nfrom_us = nan\n", "from_us = NaN"),
        ("[[silent]]\nnode = 1\nat = 3\n", "unknown field `at`"),
        ("wait_timeout_us = 0.0\n", "wait_timeout_us = 0"),
        ("wait_timeout_us = inf\n", "wait_timeout_us = inf"),
    ];
    for (text, why) in bad {
        let e = SimConfig::from_toml_str(&format!("preset = \"generic\"\ndimensions = 3\n{text}"))
            .expect_err(text);
        assert!(e.to_string().contains(why), "{text}: {e}");
    }
    let c = SimConfig::from_toml_str(
        "preset = \"generic\"\ndimensions = 3\n[[silent]]\nnode = 5\nfrom_us = 12.5\n",
    )
    .expect("a silent node");
    assert_eq!(c.silent_from_ns(5), Some(12_500));
    assert_eq!(c.silent_from_ns(4), None);
    assert_eq!(
        c.wait_timeout_ns(),
        Some((commbench_sim::DEFAULT_SILENT_WAIT_US * 1000.0) as u64)
    );
    let back = SimConfig::from_toml_str(&toml::to_string(&c).expect("TOML")).expect("read back");
    assert_eq!(back, c);
    assert_eq!(machine("").wait_timeout_ns(), None);
}
