//! Machines whose hosts hang under a tree of switches (docs/simulator.md §6c), against ground
//! truth worked out here from the switch paths alone: every pair's ping-pong takes the closed
//! form over its route (up to the lowest switch above both, down again), with the uplink
//! factor and the `slow_switch`, `slow_uplink`, `slow_switch_pair` and `slow_node` faults on
//! it; only the source pays S and only the destination R (a switch has no CPU); every rank
//! says its host and its switches as Slurm would. Trees of random shape, times, uplink
//! factors and faults, drawn with a seeded generator, beside hand-checked cases and the
//! refusals of bad machines.

use commbench_core::stats::Xoshiro256;
use commbench_core::{Endpoint, Program, Result};
use commbench_sim::{run, run_with_stats, Fault, SimConfig, SwitchTree};

use crate::common;
use common::machine::{six, Machine};
use common::scale::cases;
use common::PingPong;

/// A switch's or a host's name and its parent's, as the test sees the tree: from each host's
/// switch path, top first.
fn chain(c: &SimConfig, host: u32) -> Vec<String> {
    let path = c
        .switch_path(host)
        .expect("a tree machine gives every node a path");
    let mut v: Vec<String> = path.split('.').map(str::to_string).collect();
    v.push(format!("node{host}"));
    v
}

/// The documented rounding rule: `round(base * factor)`, exactly `base` at factor 1.
fn scale(base: u64, factor: f64) -> u64 {
    if factor == 1.0 {
        base
    } else {
        (base as f64 * factor).round() as u64
    }
}

/// The hops of the route from `s` to `t`, each as (lower end, upper end) of its link (the
/// child and its parent), from the two hosts' chains: up from `s` to the last name the
/// chains share, then down to `t`.
fn hops(c: &SimConfig, s: u32, t: u32) -> Vec<(String, String)> {
    let (a, b) = (chain(c, s), chain(c, t));
    let shared = a.iter().zip(&b).take_while(|(x, y)| x == y).count();
    let mut out = Vec::new();
    for i in (shared..a.len()).rev() {
        out.push((a[i].clone(), a[i - 1].clone()));
    }
    for i in shared..b.len() {
        out.push((b[i].clone(), b[i - 1].clone()));
    }
    out
}

/// Whether the hop whose lower end is `child`, of the route from `s` to `t`, is one a switch
/// pair `x`, `y` scales: one end under each, and `child` is that end's switch of the pair or
/// above it.
fn pair_hop(c: &SimConfig, s: u32, t: u32, child: &str, x: &str, y: &str) -> bool {
    let (a, b) = (chain(c, s), chain(c, t));
    let at_or_above = |ch: &[String], sw: &str| {
        ch.iter()
            .position(|n| n == sw)
            .is_some_and(|k| ch[..=k].iter().any(|n| n == child))
    };
    (a.iter().any(|n| n == x)
        && b.iter().any(|n| n == y)
        && (at_or_above(&a, x) || at_or_above(&b, y)))
        || (a.iter().any(|n| n == y)
            && b.iter().any(|n| n == x)
            && (at_or_above(&a, y) || at_or_above(&b, x)))
}

/// E's factor on a hop over the link `child - parent` of the route from `s` to `t`: the
/// uplink factor between two switches, times every fault on it, in the order given.
fn hop_factor(c: &SimConfig, (s, t): (u32, u32), child: &str, parent: &str) -> f64 {
    let tree = c.tree.as_ref().expect("a tree");
    let base = if child.starts_with("node") {
        1.0
    } else {
        tree.uplink_factor
    };
    c.faults().iter().fold(base, |x, f| match f {
        Fault::SlowSwitch { switch, factor, .. } if switch == child || switch == parent => {
            x * factor
        }
        Fault::SlowUplink { switch, factor, .. } if switch == child => x * factor,
        Fault::SlowSwitchPair {
            switch,
            other,
            factor,
            ..
        } if pair_hop(c, s, t, child, switch, other) => x * factor,
        _ => x,
    })
}

fn node_factor(c: &SimConfig, v: u32) -> f64 {
    c.faults().iter().fold(1.0, |x, f| match f {
        Fault::SlowNode { node, factor, .. } if *node == v => x * factor,
        _ => x,
    })
}

/// One-way time from `s` to `t` on an idle machine: F_s + E_1 + .. + E_{h-1} + max(E_h, R_t)
/// + U_t over the route's `h` hops.
fn one_way(c: &SimConfig, n: u64, s: u32, t: u32) -> u64 {
    let tm = &c.times;
    let route = hops(c, s, t);
    let mut total = scale(tm.f.ns(n), node_factor(c, s));
    for (i, (child, parent)) in route.iter().enumerate() {
        let e = scale(tm.e.ns(n), hop_factor(c, (s, t), child, parent));
        total += if i + 1 == route.len() {
            e.max(scale(tm.r.ns(n), node_factor(c, t)))
        } else {
            e
        };
    }
    total + scale(tm.u.ns(n), node_factor(c, t))
}

/// A uniform draw in `[lo, hi)`.
fn uniform(rng: &mut Xoshiro256, lo: f64, hi: f64) -> f64 {
    lo + (hi - lo) * (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64
}

/// A tree of random shape over `nodes` hosts: one to three levels given, each of 1 to 6
/// children, redrawn until the simulator takes it (a level of one switch ends the list).
fn draw_tree(nodes: u32, rng: &mut Xoshiro256) -> SwitchTree {
    loop {
        let levels = 1 + rng.below(3);
        let fanout: Vec<u32> = (0..levels).map(|_| 1 + rng.below(6) as u32).collect();
        let t = SwitchTree {
            fanout,
            uplink_factor: [1.0, 0.5, 1.5, 2.5, 4.0][rng.below(5)],
        };
        let probe = Machine::new("probe", nodes.trailing_zeros()).config();
        let cfg = SimConfig {
            tree: Some(t.clone()),
            ..probe
        };
        if cfg.validate().is_ok() {
            return t;
        }
    }
}

/// The switches of `c`, from every host's path.
fn switches(c: &SimConfig) -> Vec<String> {
    let mut v: Vec<String> = (0..c.nodes())
        .flat_map(|h| {
            let mut ch = chain(c, h);
            ch.pop();
            ch
        })
        .collect();
    v.sort();
    v.dedup();
    v
}

/// Up to three faults of the tree's kinds at random places, factors 1.2 to 4.
fn draw_faults(c: &SimConfig, rng: &mut Xoshiro256) -> Vec<Fault> {
    let names = switches(c);
    let root = chain(c, 0)[0].clone();
    let count = rng.below(4);
    let mut out = Vec::new();
    for _ in 0..count {
        let factor = (uniform(rng, 1.2, 4.0) * 100.0).round() / 100.0;
        let switch = names[rng.below(names.len())].clone();
        // A switch pair: another switch at the same depth of some host's path.
        let depth = |name: &str| {
            (0..c.nodes())
                .find_map(|h| chain(c, h).iter().position(|n| n == name))
                .unwrap_or(0)
        };
        let peers: Vec<&String> = names
            .iter()
            .filter(|n| **n != switch && depth(n) == depth(&switch))
            .collect();
        out.push(match rng.below(4) {
            3 if peers.is_empty() => continue,
            3 => Fault::SlowSwitchPair {
                other: peers[rng.below(peers.len())].clone(),
                switch,
                factor,
                from_us: None,
                until_us: None,
            },
            0 => Fault::SlowNode {
                node: rng.below(c.nodes() as usize) as u32,
                factor,
                from_us: None,
                until_us: None,
            },
            1 => Fault::SlowSwitch {
                switch,
                factor,
                from_us: None,
                until_us: None,
            },
            _ if switch == root => continue,
            _ => Fault::SlowUplink {
                switch,
                factor,
                from_us: None,
                until_us: None,
            },
        });
    }
    out
}

/// A tree machine of `dimensions` with round-ish random times (µs), the faults drawn after.
fn draw_machine(dimensions: u32, rng: &mut Xoshiro256) -> SimConfig {
    let mut u = |lo: f64, hi: f64| (uniform(rng, lo, hi) * 1000.0).round() / 1000.0;
    let times = six([
        (u(0.3, 3.0), u(0.0, 0.002)),
        (u(0.1, 1.0), 0.0),
        (u(0.1, 4.0), u(0.0, 0.001)),
        (u(0.05, 0.2), 0.0),
        (u(0.3, 3.0), u(0.0, 0.002)),
        (u(0.5, 3.0), u(0.0005, 0.003)),
    ]);
    let base = Machine::new("tree", dimensions)
        .stack_kib(128)
        .times(times)
        .config();
    let mut c = SimConfig {
        tree: Some(draw_tree(base.nodes(), rng)),
        ..base
    };
    c.faults = draw_faults(&c, rng);
    c.validate().expect("a drawn machine is valid");
    c
}

/// Each rank's host, switches and cube, as its endpoint says them.
struct Place;

impl Program for Place {
    type Output = (Option<String>, Option<String>, Option<u32>);
    fn run<E: Endpoint>(&self, ep: &mut E) -> Result<Self::Output> {
        Ok((ep.host(), ep.switch_path(), ep.hypercube()))
    }
}

#[test]
fn every_pair_takes_the_closed_form_over_its_route_on_random_trees() {
    let machines = cases(10, 120);
    let mut slowed = 0;
    for seed in 0..machines as u64 {
        let mut rng = Xoshiro256::new(0x7ee + seed);
        let c = draw_machine(2 + (seed % 4) as u32, &mut rng);
        let n = c.nodes();
        let case = format!(
            "seed {seed}: {n} hosts, tree {:?}, faults {:?}",
            c.tree,
            c.faults()
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
        );
        // The leaves hold consecutive hosts, fanout[0] each.
        let f0 = c.tree.as_ref().unwrap().fanout[0];
        for h in 0..n {
            let ch = chain(&c, h);
            assert_eq!(ch[ch.len() - 2], format!("leaf{}", h / f0), "{case}");
        }
        let healthy = SimConfig {
            faults: Vec::new(),
            ..c.clone()
        };
        // Every pair on the smaller trees, a sample of them on the larger.
        let pairs: Vec<(u32, u32)> = (0..n)
            .flat_map(|s| (0..n).filter(move |&t| t != s).map(move |t| (s, t)))
            .filter(|_| n <= 8 || rng.below(4) == 0)
            .collect();
        for (s, t) in pairs {
            let size = [0u64, 1500][rng.below(2)];
            let p = PingPong {
                src: s,
                dst: t,
                n: size as usize,
                npp: 2,
                trials: 2,
            };
            let (out, stats) = run_with_stats(&c, &p).expect("the ping-pong runs");
            let want = c.clock_read_ns + 2 * (one_way(&c, size, s, t) + one_way(&c, size, t, s));
            let ctx = format!("{case}, {s} -> {t}, {size} B");
            assert_eq!(out[s as usize], vec![want; 2], "{ctx}");
            let crate_form = c.clock_read_ns
                + 2 * (c.pingpong_one_way_between_ns(size, s, t)
                    + c.pingpong_one_way_between_ns(size, t, s));
            assert_eq!(want, crate_form, "{ctx}");
            // Handlers: S at each message's source, R at its destination, nothing else.
            let (ss, rr) = (
                |v: u32, n: u64| scale(c.times.s.ns(n), node_factor(&c, v)),
                |v: u32, n: u64| scale(c.times.r.ns(n), node_factor(&c, v)),
            );
            let mut h = vec![0u64; n as usize];
            // The handshakes (1 B, t to s), then npp * trials messages each way.
            h[t as usize] += 2 * ss(t, 1);
            h[s as usize] += 2 * rr(s, 1);
            for (a, b) in [(s, t), (t, s)] {
                h[a as usize] += 4 * ss(a, size);
                h[b as usize] += 4 * rr(b, size);
            }
            assert_eq!(stats.handler_ns, h, "handler time, {ctx}");
            let before = healthy.pingpong_one_way_between_ns(size, s, t);
            slowed += usize::from(c.pingpong_one_way_between_ns(size, s, t) > before);
        }
        // Every rank names its host and switches; a tree is no cube.
        let places = run(&c, &Place).expect("runs");
        for (r, (host, path, cube)) in places.into_iter().enumerate() {
            assert_eq!(host.as_deref(), Some(format!("node{r}").as_str()), "{case}");
            assert_eq!(path, c.switch_path(r as u32), "{case}");
            assert_eq!(cube, None, "{case}");
        }
    }
    assert!(slowed > 0, "no drawn fault slowed a pair");
}

/// A 16-host, two-level tree worked by hand: 4 hosts a leaf, 2 leaves a spine, a core over
/// the 2 spines; E 1 us, uplinks x2; F = U = 1 us, R = S = 0.5 us.
/// One timed 0-byte ping-pong from `src` to `dst` on `c` takes exactly the clock read and the
/// closed form both ways.
fn kernel_takes_the_closed_form(c: &SimConfig, src: u32, dst: u32) {
    let p = PingPong {
        src,
        dst,
        n: 0,
        npp: 1,
        trials: 1,
    };
    let out = run(c, &p).unwrap();
    assert_eq!(
        out[src as usize],
        vec![c.clock_read_ns + 2 * c.pingpong_one_way_between_ns(0, src, dst)],
        "{src} -> {dst}"
    );
}

#[test]
fn hand_checked_routes_and_faults() {
    let text = |faults: &str| {
        format!(
            "name = \"t16\"\ndimensions = 4\ntick_ns = 1\nstack_kib = 128\n\
             [tree]\nfanout = [4, 2]\nuplink_factor = 2\n{faults}\n[times]\n\
             F = {{ base_us = 1 }}\nS = {{ base_us = 0.5 }}\nR = {{ base_us = 0.5 }}\n\
             A = {{ base_us = 0.1 }}\nU = {{ base_us = 1 }}\nE = {{ base_us = 1 }}\n"
        )
    };
    let c = SimConfig::from_toml_str(&text("")).unwrap();
    assert_eq!(c.switch_path(0).unwrap(), "core.spine0.leaf0");
    assert_eq!(c.switch_path(9).unwrap(), "core.spine1.leaf2");
    assert_eq!(c.max_hops(), 6);
    // Same leaf: 2 host hops. Same spine: + 2 uplink hops at x2. Across the core: + 4.
    assert_eq!(c.pingpong_one_way_between_ns(0, 0, 1), 1000 + 2000 + 1000);
    assert_eq!(
        c.pingpong_one_way_between_ns(0, 0, 4),
        1000 + 2000 + 4000 + 1000
    );
    assert_eq!(
        c.pingpong_one_way_between_ns(0, 0, 8),
        1000 + 2000 + 8000 + 1000
    );
    let slow = SimConfig::from_toml_str(&text(
        "[[faults]]\nkind = \"slow_switch\"\nswitch = \"leaf1\"\nfactor = 3\n\
         [[faults]]\nkind = \"slow_uplink\"\nswitch = \"spine1\"\nfactor = 1.5\n",
    ))
    .unwrap();
    // Within leaf1 (hosts 4-7) both hops are x3; leaf0 to leaf1 crosses leaf1's uplink (x2
    // x3) and its host link (x3).
    assert_eq!(
        slow.pingpong_one_way_between_ns(0, 4, 5),
        1000 + 6000 + 1000
    );
    assert_eq!(
        slow.pingpong_one_way_between_ns(0, 0, 4),
        1000 + 1000 + 2000 + 6000 + 3000 + 1000
    );
    // Host 0 to host 8: up leaf0 (1), spine0 (2, 2), down spine1's uplink x2 x1.5 (3), leaf2
    // (2), host (1).
    assert_eq!(
        slow.pingpong_one_way_between_ns(0, 0, 8),
        1000 + 1000 + 2000 + 2000 + 3000 + 2000 + 1000 + 1000
    );
    // Leaf2 and leaf3 share spine1: its uplink is off their route.
    assert_eq!(
        slow.pingpong_one_way_between_ns(0, 8, 12),
        c.pingpong_one_way_between_ns(0, 8, 12)
    );
    kernel_takes_the_closed_form(&slow, 0, 8);
    // A slow switch pair: leaf0 - leaf1 x3 slows the hops above the two leaves of their
    // routes only (leaf0 up, leaf1 down, x2 x3 each); spine0 - spine1 x2 those above the
    // spines of routes across the core.
    let pairs = SimConfig::from_toml_str(&text(
        "[[faults]]\nkind = \"slow_switch_pair\"\nswitch = \"leaf0\"\nother = \"leaf1\"\nfactor = 3\n\
         [[faults]]\nkind = \"slow_switch_pair\"\nswitch = \"spine1\"\nother = \"spine0\"\nfactor = 2\n",
    ))
    .unwrap();
    assert_eq!(
        pairs.pingpong_one_way_between_ns(0, 0, 4),
        1000 + 1000 + 6000 + 6000 + 1000 + 1000
    );
    assert_eq!(
        pairs.pingpong_one_way_between_ns(0, 5, 1),
        pairs.pingpong_one_way_between_ns(0, 0, 4)
    );
    for (a, b) in [(4, 5), (0, 1), (8, 12), (2, 3), (4, 3)] {
        let healthy = c.pingpong_one_way_between_ns(0, a, b);
        let leaf = |h: u32| h / 4;
        if (leaf(a), leaf(b)) == (0, 1) || (leaf(a), leaf(b)) == (1, 0) {
            continue;
        }
        assert_eq!(
            pairs.pingpong_one_way_between_ns(0, a, b),
            healthy,
            "{a} {b}"
        );
    }
    assert_eq!(
        pairs.pingpong_one_way_between_ns(0, 0, 8),
        1000 + 1000 + 2000 + 4000 + 4000 + 2000 + 1000 + 1000
    );
    assert_eq!(
        pairs.pingpong_one_way_between_ns(0, 4, 12),
        pairs.pingpong_one_way_between_ns(0, 0, 8)
    );
    for (src, dst) in [(0, 4), (0, 8), (8, 12), (4, 5)] {
        kernel_takes_the_closed_form(&pairs, src, dst);
    }
}

#[test]
fn machines_that_mix_the_networks_or_name_no_switch_are_refused() {
    let text = |tree: &str, fault: &str| {
        format!("preset = \"generic\"\ndimensions = 4\n{fault}\n{tree}\n")
    };
    let tree = "[tree]\nfanout = [4]";
    for (tree, fault, want) in [
        (
            tree,
            "faults = [{ kind = \"slow_link\", from = 0, to = 1, factor = 2 }]",
            "fault of the hypercube",
        ),
        (
            tree,
            "faults = [{ kind = \"slow_dimension\", dimension = 0, factor = 2 }]",
            "fault of the hypercube",
        ),
        (
            "",
            "faults = [{ kind = \"slow_switch\", switch = \"leaf0\", factor = 2 }]",
            "this machine is a hypercube",
        ),
        (
            tree,
            "faults = [{ kind = \"slow_switch\", switch = \"leaf4\", factor = 2 }]",
            "no switch `leaf4` (its switches: leaf0, leaf1, leaf2, leaf3, core)",
        ),
        (
            tree,
            "faults = [{ kind = \"slow_uplink\", switch = \"core\", factor = 2 }]",
            "`core` is the root",
        ),
        (
            tree,
            "faults = [{ kind = \"slow_uplink\", switch = \"leaf1\", factor = 0.5 }]",
            "factor = 0.5",
        ),
        (
            tree,
            "faults = [{ kind = \"slow_switch_pair\", switch = \"leaf1\", other = \"leaf1\", factor = 2 }]",
            "`leaf1` twice",
        ),
        (
            tree,
            "faults = [{ kind = \"slow_switch_pair\", switch = \"leaf1\", other = \"core\", factor = 2 }]",
            "different levels",
        ),
        (
            tree,
            "faults = [{ kind = \"slow_switch_pair\", switch = \"leaf1\", other = \"leaf9\", factor = 2 }]",
            "no switch `leaf9`",
        ),
        (
            tree,
            "faults = [{ kind = \"slow_switch_pair\", switch = \"leaf1\", factor = 2 }]",
            "missing field `other`",
        ),
        (
            "",
            "faults = [{ kind = \"slow_switch_pair\", switch = \"leaf0\", other = \"leaf1\", factor = 2 }]",
            "this machine is a hypercube",
        ),
        ("[tree]\nfanout = []", "", "tree.fanout is empty"),
        ("[tree]\nfanout = [16, 2]", "", "already has one switch"),
        (
            "[tree]\nfanout = [4]\nuplink_factor = 0",
            "",
            "uplink_factor = 0",
        ),
        (
            "[tree]\nfanout = [4]\nspeed = 1",
            "",
            "unknown field `speed`",
        ),
    ] {
        let e = SimConfig::from_toml_str(&text(tree, fault))
            .unwrap_err()
            .to_string();
        assert!(e.contains(want), "{tree} {fault}: {e}");
    }
    // A tree written out reads back the same.
    let c = SimConfig::from_toml_str(&text(
        "[tree]\nfanout = [4, 2]\nuplink_factor = 1.5",
        "faults = [{ kind = \"slow_uplink\", switch = \"spine1\", factor = 2, from_us = 5 }]",
    ))
    .unwrap();
    let back = SimConfig::from_toml_str(&toml::to_string(&c).unwrap()).unwrap();
    assert_eq!(back, c);
    assert_eq!(c.faults()[0].to_string(), "slow_uplink spine1 x2 from 5 us");
}
