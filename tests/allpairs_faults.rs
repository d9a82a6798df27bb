//! The all-pairs detector against ground truth: faults injected at random into simulated
//! hypercubes of our own (not a preset), the whole run made (measurement, retests alone,
//! attribution), and every verdict checked against what was injected.
#![cfg(feature = "sim")]

mod common;

use commbench::analysis::allpairs::Verdict;
use commbench::analysis::matrix::MatrixSection;
use commbench::core::stats::Xoshiro256;
use commbench_sim::{Fault, SimConfig, Times};
use common::machine::{line, Machine};
use common::scale::cases;
use std::collections::BTreeSet;

/// A machine of `dimensions` with times drawn from `rng` around a network slower than its
/// copies (so that a link's share of a message time is large enough to see at 64 KiB).
fn machine(dimensions: u32, rng: &mut Xoshiro256) -> SimConfig {
    let mut u =
        |lo: f64, hi: f64| lo + (hi - lo) * (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
    let times = Times {
        f: line(u(0.3, 0.6), u(0.00005, 0.0001)),
        u: line(u(0.3, 0.6), u(0.00005, 0.0001)),
        a: line(u(0.05, 0.15), 0.0),
        s: line(u(0.1, 0.3), 0.0),
        r: line(u(0.1, 0.3), 0.0),
        e: line(u(1.0, 2.0), u(0.0008, 0.0012)),
    };
    Machine::new("test-cube", dimensions)
        .stack_kib(128)
        .times(times)
        .jitter(5, rng.next_u64())
        .config()
}

/// One or two faults of random kinds, places and factors, none overlapping another (no link
/// at a slow node or in a slow dimension, at most one dimension).
fn faults(dimensions: u32, rng: &mut Xoshiro256) -> Vec<Fault> {
    let nodes = 1u32 << dimensions;
    let count = 1 + rng.below(2);
    let mut out: Vec<Fault> = Vec::new();
    while out.len() < count {
        let factor = 3.0 + 3.0 * (rng.below(1000) as f64 / 1000.0);
        let f = match rng.below(3) {
            0 => Fault::SlowNode {
                node: rng.below(nodes as usize) as u32,
                factor,
            },
            1 => {
                let from = rng.below(nodes as usize) as u32;
                let to = from ^ (1 << rng.below(dimensions as usize));
                Fault::SlowLink { from, to, factor }
            }
            _ => Fault::SlowDimension {
                dimension: rng.below(dimensions as usize) as u32,
                factor,
            },
        };
        if out.iter().all(|g| apart(&f, g)) {
            out.push(f);
        }
    }
    out
}

/// Whether two faults touch different parts of the machine.
fn apart(a: &Fault, b: &Fault) -> bool {
    use Fault::*;
    match (a, b) {
        (SlowNode { node: x, .. }, SlowNode { node: y, .. }) => x != y,
        (SlowNode { node, .. }, SlowLink { from, to, .. })
        | (SlowLink { from, to, .. }, SlowNode { node, .. }) => node != from && node != to,
        (SlowLink { from: a, to: b, .. }, SlowLink { from: c, to: d, .. }) => {
            a != c && a != d && b != c && b != d
        }
        (SlowLink { from, to, .. }, SlowDimension { dimension, .. })
        | (SlowDimension { dimension, .. }, SlowLink { from, to, .. }) => {
            (from ^ to) != 1 << dimension
        }
        (SlowDimension { .. }, SlowDimension { .. }) => false,
        (SlowNode { .. }, SlowDimension { .. }) | (SlowDimension { .. }, SlowNode { .. }) => true,
    }
}

/// Whether `v` names fault `f`, with its kind.
fn names(v: &Verdict, f: &Fault) -> bool {
    match *f {
        Fault::SlowNode { node, .. } => v.kind == "node" && v.nodes == [node],
        Fault::SlowLink { from, to, .. } => {
            v.kind == "link" && v.nodes == [from.min(to), from.max(to)]
        }
        Fault::SlowDimension { dimension, .. } => {
            v.kind == "dimension" && v.dimension == Some(dimension)
        }
    }
}

/// The whole all-pairs run on `cfg`: 8 B and 64 KiB, suspects measured again alone.
fn detect(cfg: &SimConfig) -> MatrixSection {
    common::allpairs::sim_matrix(cfg, &[8, 64 << 10], 7)
}

#[test]
fn random_faults_are_all_found_and_nothing_else_is_blamed() {
    let (mut found, mut injected, mut claimed, mut right) = (0, 0, 0, 0);
    let mut wrong = Vec::new();
    // The machines drawn: every kind of fault, both sizes of cube, one fault and two.
    let mut drawn = BTreeSet::new();
    let seeds = cases(10, 30) as u64;
    for seed in 0..seeds {
        let mut rng = Xoshiro256::new(0xfa17 + seed);
        let dimensions = 4 + (seed % 2) as u32;
        let mut cfg = machine(dimensions, &mut rng);
        cfg.faults = faults(dimensions, &mut rng);
        drawn.extend(cfg.faults.iter().map(|f| f.kind().to_string()));
        drawn.insert(format!("{dimensions} dimensions"));
        drawn.insert(format!("{} fault(s)", cfg.faults.len()));
        let m = detect(&cfg);
        let faulty: Vec<&Verdict> = m
            .verdicts
            .iter()
            .filter(|v| v.kind != "contention")
            .collect();
        let shown: Vec<String> = faulty
            .iter()
            .map(|v| {
                format!(
                    "{} {:?} {:?} x{:.2}",
                    v.kind, v.nodes, v.dimension, v.factor.value
                )
            })
            .collect();
        let wanted: Vec<String> = cfg.faults.iter().map(ToString::to_string).collect();
        for f in &cfg.faults {
            injected += 1;
            let hit = faulty.iter().any(|v| names(v, f));
            found += usize::from(hit);
            if !hit {
                wrong.push(format!("seed {seed}: {f} not found; verdicts {shown:?}"));
            }
        }
        for v in &faulty {
            claimed += 1;
            let ok = cfg.faults.iter().any(|f| names(v, f));
            right += usize::from(ok);
            if !ok {
                wrong.push(format!(
                    "seed {seed}: {} {:?} {:?} ({}) names no injected fault ({wanted:?})",
                    v.kind, v.nodes, v.dimension, v.evidence
                ));
            }
        }
    }
    // Precision and recall over every case.
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    assert_eq!((found, right), (injected, claimed));
    assert!(injected as u64 >= seeds * 4 / 5);
    let every: BTreeSet<String> = [
        "slow_node",
        "slow_link",
        "slow_dimension",
        "4 dimensions",
        "5 dimensions",
        "1 fault(s)",
        "2 fault(s)",
    ]
    .map(String::from)
    .into();
    assert_eq!(drawn, every, "the seeds drawn");
}

#[test]
fn a_healthy_machine_gets_no_verdict() {
    // Both sizes of cube.
    for seed in 0..cases(2, 6) as u64 {
        let mut rng = Xoshiro256::new(0x600d + seed);
        let cfg = machine(4 + (seed % 2) as u32, &mut rng);
        let m = detect(&cfg);
        assert!(m.verdicts.is_empty(), "seed {seed}: {:?}", m.verdicts);
        assert_eq!(m.ranks, 1 << cfg.dimensions);
        let n = m.ranks as usize;
        for size in [8, 64 << 10] {
            let cells = m.medians(size);
            let measured = cells.iter().flatten().filter(|c| c.is_some()).count();
            assert_eq!(measured, n * (n - 1));
        }
    }
}
