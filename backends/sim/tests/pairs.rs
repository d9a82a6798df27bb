//! Pairs streaming at once on the simulator (core `method::pairs`), against what the machine
//! makes exact, on machines drawn at random:
//!
//! * pairs whose e-cube routes (there and back) share no node (and so no channel) measure, each, exactly what
//!   the pair measures alone: the barrier before each sample is free and nothing else is
//!   shared;
//! * pairs whose routes all cross one channel `0 -> 2^D` (senders `2^a`, `a < D`, each paced
//!   by its own first hop; receivers `2^D + m 2^(D+1)`) on a machine where the hop time `E(n)`
//!   dominates share that channel exactly: each more message per window costs every pair
//!   `K E(n)` more, its share `1/K` of the channel, so the aggregate of `K` pairs is the
//!   channel's rate `n / E(n)`. The channel is FIFO, not fair: a sender that reaches it faster
//!   (one at node 0, paced by F alone) takes more than its share.

use commbench_core::method::engine::{Measurement, RawPoint};
use commbench_core::method::pairs::{Concurrent, Pair, Placement, StartSync};
use commbench_core::method::{MethodConfig, NppChoice, PatternKind};
use commbench_core::stats::Xoshiro256;
use commbench_sim::{run, SimConfig};

use crate::common;
use common::machine::{six, Machine};

/// Every pair's trial times of one size, `window` messages of `size` bytes per window, `npp`
/// windows per sample.
fn measure(sim: &SimConfig, pairs: &[Pair], size: u64, window: u32, npp: u64) -> Vec<Vec<i64>> {
    let method = MethodConfig {
        sizes: vec![size],
        trials: 4,
        warmup: 1,
        npp: NppChoice::Fixed(npp),
        timer_samples: 200,
        source: pairs[0].sender,
        dest: pairs[0].receiver,
        pairs: Some(Concurrent {
            pairs: pairs.to_vec(),
            placement: Placement::File {
                path: "drawn".into(),
            },
            start: StartSync::Barrier,
        }),
        ..MethodConfig::default()
    };
    let m = Measurement::new(PatternKind::Bandwidth { window }, method, None);
    run(sim, &m).unwrap_or_else(|e| panic!("{pairs:?} on {}: {e}", sim.name));
    let mut points: Vec<RawPoint> = m.take_collected().points;
    assert_eq!(points.len(), 1);
    let p = points.remove(0);
    assert_eq!(p.pair_trial_ns.len(), pairs.len());
    for (k, &t) in p.trial_ns.iter().enumerate() {
        let slowest = p.pair_trial_ns.iter().map(|v| v[k]).max();
        assert_eq!(Some(t), slowest, "a point's trial is its slowest pair's");
    }
    p.pair_trial_ns
}

/// The nodes of the e-cube route from `a` to `b`: the lowest differing dimension first.
fn route_nodes(mut a: u32, b: u32) -> Vec<u32> {
    let mut v = vec![a];
    while a != b {
        a ^= 1 << (a ^ b).trailing_zeros();
        v.push(a);
    }
    v
}

/// A line `(base_us, per_byte_us)` drawn from `lo..hi` us and up to `pb` us per byte.
fn draw(rng: &mut Xoshiro256, lo: f64, hi: f64, pb: f64) -> (f64, f64) {
    let q = |x: f64| (x * 1000.0).round() / 1000.0;
    (
        q(rng.range(lo, hi)),
        (rng.range(0.0, pb) * 1e6).round() / 1e6,
    )
}

/// Pairs with no node in common, placed at random, on machines of random times: each pair's
/// samples are the ones it measures alone, to the nanosecond.
#[test]
fn pairs_that_share_nothing_measure_what_each_measures_alone() {
    let mut rng = Xoshiro256::new(0x9a12_5a10);
    for case in 0..10 {
        let d = 3 + rng.below(3) as u32;
        // S below E + U, so that a handler charged by the acknowledgement has ended before
        // the sender's receive of it does (nothing carries over into the next sample).
        let e = draw(&mut rng, 0.5, 4.0, 0.002);
        let u = draw(&mut rng, 0.1, 1.5, 0.001);
        let times = six([
            draw(&mut rng, 0.1, 2.0, 0.001),
            draw(&mut rng, 0.0, e.0 + u.0, 0.0),
            draw(&mut rng, 0.0, 3.0, 0.0005),
            draw(&mut rng, 0.0, 0.5, 0.0),
            u,
            e,
        ]);
        let sim = Machine::new(&format!("apart{case}"), d)
            .stack_kib(128)
            .clock_read_ns(1 + rng.below(40) as u64)
            .times(times)
            .config();
        let nodes = 1u32 << d;
        let mut used = vec![false; nodes as usize];
        let mut pairs = Vec::new();
        for _ in 0..40 {
            let (s, r) = (
                rng.below(nodes as usize) as u32,
                rng.below(nodes as usize) as u32,
            );
            // The acknowledgements and handshakes take the route back, not the same nodes.
            let mut path = route_nodes(s, r);
            path.extend(route_nodes(r, s));
            if s == r || path.iter().any(|&n| used[n as usize]) {
                continue;
            }
            path.iter().for_each(|&n| used[n as usize] = true);
            pairs.push(Pair {
                sender: s,
                receiver: r,
            });
        }
        if pairs.len() < 2 {
            continue;
        }
        let size = 1 + rng.below(3000) as u64;
        let window = 1 + rng.below(12) as u32;
        let npp = 1 + rng.below(3) as u64;
        let together = measure(&sim, &pairs, size, window, npp);
        for (p, got) in pairs.iter().zip(&together) {
            let alone = measure(&sim, std::slice::from_ref(p), size, window, npp);
            assert_eq!(
                got, &alone[0],
                "case {case}: pair {p:?} of {pairs:?}, {size} B, window {window}"
            );
        }
    }
}

/// `K` pairs through one channel on machines where `E` dominates: one more message per window
/// costs each pair exactly `K E(n)`.
#[test]
fn pairs_through_one_channel_share_it_exactly() {
    let mut rng = Xoshiro256::new(0x54a2e);
    for case in 0..12 {
        let d = 4 + rng.below(3) as u32;
        let top = 2 + rng.below(d as usize - 3) as u32; // D: 2 ..= d - 2
                                                        // Each sender one hop from node 0, so that its own first hop paces it as it paces
                                                        // every other (a sender at node 0 would queue its window at F, ahead of the others:
                                                        // the channel is FIFO, not fair).
        let senders: Vec<u32> = (0..top).map(|a| 1 << a).collect();
        let receivers: Vec<u32> = (0..1u32 << (d - top - 1))
            .map(|m| (1 << top) + (m << (top + 1)))
            .collect();
        let most = senders.len().min(receivers.len());
        let k = 2 + rng.below(most - 1);
        let pick = |rng: &mut Xoshiro256, v: &[u32]| {
            let mut v = v.to_vec();
            for i in (1..v.len()).rev() {
                v.swap(i, rng.below(i + 1));
            }
            v
        };
        let (s, r) = (pick(&mut rng, &senders), pick(&mut rng, &receivers));
        let pairs: Vec<Pair> = (0..k)
            .map(|i| Pair {
                sender: s[i],
                receiver: r[i],
            })
            .collect();
        // E dominates: F and U below it, A nothing, S and R nothing (forwarding costs no
        // CPU), so each sender's own first hop paces its window at one message per E.
        let e = draw(&mut rng, 2.0, 30.0, 0.01);
        let times = six([
            draw(&mut rng, 0.05, e.0 / 2.0, 0.0),
            (0.0, 0.0),
            (0.0, 0.0),
            (0.0, 0.0),
            draw(&mut rng, 0.05, e.0 / 2.0, 0.0),
            e,
        ]);
        let sim = Machine::new(&format!("shared{case}"), d)
            .stack_kib(128)
            .clock_read_ns(1 + rng.below(40) as u64)
            .times(times)
            .config();
        let size = 1 + rng.below(4000) as u64;
        let e_ns = sim.times.e.ns(size) as i64;
        let w1 = 8 * d;
        let w2 = w1 + 1 + rng.below(16) as u32;
        let short = measure(&sim, &pairs, size, w1, 1);
        let long = measure(&sim, &pairs, size, w2, 1);
        for (i, (a, b)) in short.iter().zip(&long).enumerate() {
            let more = b[0] - a[0];
            assert_eq!(
                more,
                k as i64 * i64::from(w2 - w1) * e_ns,
                "case {case}: pair {i} of {pairs:?} (D = {top}, E = {e_ns} ns, windows {w1} and \
                 {w2}): {a:?} -> {b:?}"
            );
            assert!(a.iter().all(|&t| t == a[0]) && b.iter().all(|&t| t == b[0]));
        }
    }
}
