//! The all-pairs detector against ground truth: faults injected at random into simulated
//! hypercubes of our own (not a preset), the whole run made (measurement, retests alone,
//! attribution), and every verdict checked against what was injected.
//!
//! Machines of 8 to 64 nodes with times drawn at random, jitter from none to a tenth of a
//! hop, one or two faults anywhere (rank 0 and the highest dimension included) with factors
//! from 1.3 to 3, and a rule's `--min-factor` drawn too. The truth of each fault is the
//! slowdown of its own cells from the simulator's closed forms (docs/simulator.md §6a), in
//! the class where it shows most: every fault whose own cells are slower than both the
//! min-factor and the detection limit the run reports for its kind (with 3 % to spare) must
//! be named with its kind, and nothing that was not injected may be named. Precision and
//! recall per kind and per band of factors are printed (`--nocapture`); `benches/
//! allpairs_faults.sh` runs the full count. `COMMBENCH_FAULT_SEED=N` runs seed `N` alone, as
//! a failure names it.
#![cfg(feature = "sim")]

mod common;

use commbench::analysis::allpairs::{Rule, Verdict};
use commbench::analysis::matrix::MatrixSection;
use commbench::core::method::allpairs::{AllPairs, AllPairsCollected, AllPairsConfig};
use commbench::core::method::{MethodConfig, NppChoice};
use commbench::core::stats::Xoshiro256;
use commbench::core::transport::control::Tree;
use commbench_sim::{route, Fault, SimConfig, Times};
use common::machine::{line, Machine};
use common::scale::cases;
use std::collections::{BTreeMap, BTreeSet};

/// A uniform draw in `[lo, hi)`.
fn uniform(rng: &mut Xoshiro256, lo: f64, hi: f64) -> f64 {
    lo + (hi - lo) * (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64
}

/// A machine of `dimensions` with times drawn from `rng` around a network slower than its
/// copies, and hop jitter of `jitter_ns`.
fn machine(dimensions: u32, jitter_ns: u64, rng: &mut Xoshiro256) -> SimConfig {
    let mut u = |lo: f64, hi: f64| uniform(rng, lo, hi);
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
        .jitter(jitter_ns, rng.next_u64())
        .config()
}

/// One or two faults of random kinds, places and factors in `[lo, hi]`, none overlapping
/// another (no link at a slow node or in a slow dimension, at most one dimension). Places
/// that other tests never use come up often: rank 0 and the highest dimension.
fn faults(dimensions: u32, lo: f64, hi: f64, rng: &mut Xoshiro256) -> Vec<Fault> {
    let nodes = 1u32 << dimensions;
    let count = 1 + rng.below(2);
    let mut out: Vec<Fault> = Vec::new();
    while out.len() < count {
        let factor = uniform(rng, lo, hi);
        let node = |rng: &mut Xoshiro256| match rng.below(4) {
            0 => 0,
            _ => rng.below(nodes as usize) as u32,
        };
        let dim = |rng: &mut Xoshiro256| match rng.below(3) {
            0 => dimensions - 1,
            _ => rng.below(dimensions as usize) as u32,
        };
        let f = match rng.below(3) {
            0 => Fault::SlowNode {
                node: node(rng),
                factor,
                from_us: None,
                until_us: None,
            },
            1 => {
                let from = node(rng);
                let to = from ^ (1 << dim(rng));
                Fault::SlowLink {
                    from,
                    to,
                    factor,
                    from_us: None,
                    until_us: None,
                }
            }
            _ => Fault::SlowDimension {
                dimension: dim(rng),
                factor,
                from_us: None,
                until_us: None,
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
        // Faults of a tree: the cube's draws never make them.
        (SlowSwitch { .. } | SlowUplink { .. }, _) | (_, SlowSwitch { .. } | SlowUplink { .. }) => {
            false
        }
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
        Fault::SlowSwitch { .. } | Fault::SlowUplink { .. } => false,
    }
}

/// Whether the fault slows the cell `(i, j)` at all: an end (node), a route over it (link),
/// crossing it (dimension).
fn touches(f: &Fault, i: u32, j: u32) -> bool {
    let over = |a: u32, b: u32| {
        [route(i, j), route(j, i)].iter().any(|p| {
            p.windows(2)
                .any(|h| (h[0], h[1]) == (a, b) || (h[0], h[1]) == (b, a))
        })
    };
    match *f {
        Fault::SlowNode { node, .. } => i == node || j == node,
        Fault::SlowLink { from, to, .. } => over(from, to),
        Fault::SlowDimension { dimension, .. } => (i ^ j) >> dimension & 1 == 1,
        Fault::SlowSwitch { .. } | Fault::SlowUplink { .. } => false,
    }
}

/// The truth of fault `f` at `size`: the slowdown of its own cells (round trips, from the
/// closed forms with and without it, the other faults in both) in the hop class where their
/// median is largest.
fn truth(faulty: &SimConfig, f: &Fault, size: u64) -> f64 {
    let healthy = SimConfig {
        faults: faulty.faults.iter().filter(|g| *g != f).cloned().collect(),
        ..faulty.clone()
    };
    let n = faulty.nodes();
    let trip = |c: &SimConfig, i: u32, j: u32| {
        (c.pingpong_one_way_between_ns(size, i, j) + c.pingpong_one_way_between_ns(size, j, i))
            as f64
    };
    let mut by: BTreeMap<u32, Vec<f64>> = BTreeMap::new();
    for i in 0..n {
        for j in (0..n).filter(|&j| j != i && touches(f, i, j)) {
            by.entry((i ^ j).count_ones())
                .or_default()
                .push(trip(faulty, i, j) / trip(&healthy, i, j));
        }
    }
    by.into_values()
        .map(|mut v| {
            v.sort_by(f64::total_cmp);
            let m = v.len();
            if m % 2 == 1 {
                v[m / 2]
            } else {
                (v[m / 2 - 1] + v[m / 2]) / 2.0
            }
        })
        .fold(1.0, f64::max)
}

/// The sizes every run measures.
const SIZES: [u64; 2] = [8, 64 << 10];

/// The whole all-pairs run on `cfg` under `rule`: 8 B and 64 KiB, 7 trials a cell, suspects
/// measured again alone.
fn detect(cfg: &SimConfig, rule: Rule) -> MatrixSection {
    common::allpairs::sim_matrix_doc_under(cfg, &SIZES, 7, rule)
        .allpairs
        .expect("the matrix")
}

/// The kind a verdict uses for a fault.
fn kind(f: &Fault) -> &'static str {
    match f {
        Fault::SlowNode { .. } => "node",
        Fault::SlowLink { .. } => "link",
        Fault::SlowDimension { .. } => "dimension",
        Fault::SlowSwitch { .. } => "switch",
        Fault::SlowUplink { .. } => "uplink",
    }
}

/// Counts per kind and band: faults that had to be found, found, named at all; verdicts,
/// right ones.
#[derive(Debug, Default, Clone, Copy)]
struct Tally {
    due: usize,
    found: usize,
    verdicts: usize,
    right: usize,
}

/// The band of a fault's own slowdown.
fn band(x: f64) -> &'static str {
    match x {
        x if x < 1.25 => "own x1.00-1.25",
        x if x < 1.5 => "own x1.25-1.50",
        x if x < 2.0 => "own x1.50-2.00",
        _ => "own x2.00+",
    }
}

#[test]
fn random_mild_and_strong_faults_are_named_with_their_kind_and_nothing_else_is() {
    let mut wrong = Vec::new();
    let mut tally: BTreeMap<String, Tally> = BTreeMap::new();
    let mut drawn = BTreeSet::new();
    let mut limits: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    let seeds = cases(12, 240) as u64;
    let only: Option<u64> = std::env::var("COMMBENCH_FAULT_SEED")
        .ok()
        .and_then(|v| v.parse().ok());
    for seed in (0..seeds).filter(|s| only.map_or(true, |o| o == *s)) {
        let mut rng = Xoshiro256::new(0x3a11 + seed);
        let dimensions = 3 + (seed % 4) as u32;
        let jitter = [0, 5, 40, 150][rng.below(4)];
        let mut cfg = machine(dimensions, jitter, &mut rng);
        cfg.faults = faults(dimensions, 1.3, 3.0, &mut rng);
        let rule = Rule {
            min_factor: [1.1, 1.15, 1.25][rng.below(3)],
            ..Rule::default()
        };
        drawn.extend(cfg.faults.iter().map(|f| f.kind().to_string()));
        drawn.insert(format!("{} nodes", 1u32 << dimensions));
        drawn.insert(format!("{} fault(s)", cfg.faults.len()));
        let m = detect(&cfg, rule);
        let case = format!(
            "seed {seed} ({} nodes, jitter {jitter} ns, min-factor {}, faults {:?})",
            1u32 << dimensions,
            rule.min_factor,
            cfg.faults
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
        );
        let faulty: Vec<&Verdict> = m
            .verdicts
            .iter()
            .filter(|v| v.kind != "contention")
            .collect();
        for f in &cfg.faults {
            // Due when its own cells at some size are slower than what the run says it
            // would find for its kind, and than the min-factor, with 3 % to spare.
            let mut due = false;
            let mut best = 1.0f64;
            for fit in &m.fits {
                let t = truth(&cfg, f, fit.size);
                best = best.max(t);
                let limit = fit
                    .fit
                    .limits
                    .iter()
                    .find(|l| l.kind == kind(f))
                    .map_or(f64::INFINITY, |l| l.reported_from);
                due |= t >= 1.03 * limit;
            }
            let hit = m.verdicts.iter().any(|v| names(v, f));
            let row = tally
                .entry(format!("{} {}", kind(f), band(best)))
                .or_default();
            row.due += usize::from(due);
            row.found += usize::from(due && hit);
            if due && !hit {
                wrong.push(format!(
                    "{case}: {f} (own cells x{best:.3}) not named; verdicts {:?}",
                    m.verdicts
                        .iter()
                        .map(|v| format!(
                            "{} {:?} {:?} x{:.2}: {}",
                            v.kind, v.nodes, v.dimension, v.factor.value, v.evidence
                        ))
                        .collect::<Vec<_>>()
                ));
            }
        }
        for v in &faulty {
            let ok = cfg.faults.iter().any(|f| names(v, f));
            let row = tally.entry(format!("{} verdicts", v.kind)).or_default();
            row.verdicts += 1;
            row.right += usize::from(ok);
            if !ok {
                wrong.push(format!(
                    "{case}: {} {:?} {:?} ({}) names no injected fault",
                    v.kind, v.nodes, v.dimension, v.evidence
                ));
            }
        }
        for fit in &m.fits {
            for l in &fit.fit.limits {
                limits
                    .entry(format!("{} at {} B", l.kind, fit.size))
                    .or_default()
                    .push(l.factor);
            }
        }
    }
    eprintln!("recall (found / due) and precision (right / verdicts) over {seeds} machines:");
    for (k, t) in &tally {
        eprintln!(
            "  {k:<26} due {:>3} found {:>3}   verdicts {:>3} right {:>3}",
            t.due, t.found, t.verdicts, t.right
        );
    }
    eprintln!("detection limits reported (median, max):");
    for (k, mut v) in limits {
        v.sort_by(f64::total_cmp);
        eprintln!("  {k:<22} x{:.3}  x{:.3}", v[v.len() / 2], v[v.len() - 1]);
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    if only.is_some() {
        return;
    }
    for want in [
        "slow_node",
        "slow_link",
        "slow_dimension",
        "1 fault(s)",
        "2 fault(s)",
    ] {
        assert!(drawn.contains(want), "{want} never drawn: {drawn:?}");
    }
    let due: usize = tally.values().map(|t| t.due).sum();
    assert!(
        due as u64 >= seeds / 2,
        "{due} faults due in {seeds} machines"
    );
}

#[test]
fn a_healthy_machine_gets_no_verdict() {
    // Every size of cube, every jitter level.
    for seed in 0..cases(4, 16) as u64 {
        let mut rng = Xoshiro256::new(0x600d + seed);
        let dimensions = 3 + (seed % 4) as u32;
        let jitter = [0, 5, 40, 150][(seed / 4 % 4) as usize];
        let cfg = machine(dimensions, jitter, &mut rng);
        let rule = Rule {
            min_factor: 1.1,
            ..Rule::default()
        };
        let m = detect(&cfg, rule);
        assert!(m.verdicts.is_empty(), "seed {seed}: {:?}", m.verdicts);
        assert_eq!(m.ranks, 1 << cfg.dimensions);
        let n = m.ranks as usize;
        for size in SIZES {
            let cells = m.medians(size);
            let measured = cells.iter().flatten().filter(|c| c.is_some()).count();
            assert_eq!(measured, n * (n - 1));
        }
        for fit in &m.fits {
            let kinds: Vec<&str> = fit.fit.limits.iter().map(|l| l.kind.as_str()).collect();
            assert_eq!(kinds, ["dimension", "node", "link"]);
            assert!(fit
                .fit
                .limits
                .iter()
                .all(|l| l.factor > 1.0 && l.reported_from >= 1.1));
        }
    }
}

/// The all-pairs program on `cfg` (8 B, 3 trials a cell, no retests): what rank 0
/// collected, the simulator's statistics, and how the run ended.
fn silent_run(
    cfg: &SimConfig,
) -> (
    AllPairsCollected,
    Option<commbench_sim::SimStats>,
    Result<(), String>,
) {
    let method = MethodConfig {
        sizes: vec![8],
        trials: 3,
        warmup: 1,
        npp: NppChoice::Fixed(1),
        timer_samples: 16,
        ..MethodConfig::default()
    };
    let prog = AllPairs::new(method, AllPairsConfig::default(), None);
    let r = commbench_sim::run_with_stats(cfg, &prog);
    let (stats, r) = match r {
        Ok((_, s)) => (Some(s), Ok(())),
        Err(e) => (None, Err(e.to_string())),
    };
    (prog.take_collected(), stats, r)
}

/// A rank whose program falls silent at a random moment of a random round, on machines of
/// our own (8 to 32 nodes, some with fewer ranks than nodes): the run completes, names it
/// lost at the step after the round it fell silent in (or the next, when its word had
/// already gone up), keeps every cell of the other ranks and every cell of its own measured
/// before, and lists each round's cells that did not come. Rank 0 falling silent ends the
/// run on the others with an error naming rank 0, never a hang.
#[test]
fn a_rank_silent_from_a_random_moment_is_named_lost_and_every_other_cell_kept() {
    let only: Option<u64> = std::env::var("COMMBENCH_FAULT_SEED")
        .ok()
        .and_then(|v| v.parse().ok());
    for seed in (0..cases(6, 60) as u64).filter(|s| only.map_or(true, |o| o == *s)) {
        let mut rng = Xoshiro256::new(0x5113_7000 + seed);
        let dimensions = 3 + (seed % 3) as u32;
        let mut healthy = machine(dimensions, [0, 40][rng.below(2)], &mut rng);
        let nodes = 1u32 << dimensions;
        if rng.below(2) == 1 {
            healthy.ranks = Some(nodes / 2 + 1 + rng.below(nodes as usize / 2) as u32);
        }
        // The steps' words are longer than what such a machine carries of a message: they
        // are carried whole all the same.
        if rng.below(2) == 1 {
            healthy.carry_bytes = Some(64);
        }
        let n = healthy.ranks();
        let (seen, stats, r) = silent_run(&healthy);
        r.unwrap_or_else(|e| panic!("seed {seed}: the healthy run failed: {e}"));
        let last = seen.rounds.last().expect("rounds");
        // Rank 0's clock at the rounds' origin, on the simulator's absolute virtual time.
        let t0 = stats.expect("stats").finish_ns[0] - last.end_ns;
        let round = rng.below(seen.rounds.len());
        let (a, b) = (seen.rounds[round].start_ns, seen.rounds[round].end_ns);
        let at_ns = t0 + a + (b - a) * (5 + rng.below(90) as u64) / 100;
        let s = 1 + rng.below(n as usize - 1) as u32;
        let mut cfg = healthy.clone();
        cfg.silent.push(commbench_sim::Silent {
            node: s,
            from_us: at_ns as f64 / 1000.0,
        });
        let case =
            format!("seed {seed}: {n} ranks, rank {s} silent from {at_ns} ns (round {round})");
        let (got, _, r) = silent_run(&cfg);
        r.unwrap_or_else(|e| panic!("{case}: the run failed: {e}"));
        assert_eq!(got.rounds.len(), seen.rounds.len(), "{case}");
        if got.lost.is_empty() {
            // Silent after its last word, in the last round: nothing was lost.
            assert_eq!(round + 1, seen.rounds.len(), "{case}: not named lost");
            assert_eq!(got.cells.len(), seen.cells.len(), "{case}");
            continue;
        }
        assert_eq!(got.lost.len(), 1, "{case}: {:?}", got.lost);
        let lost = &got.lost[0];
        assert_eq!(lost.rank, s, "{case}");
        let found = lost.round.expect("found after a round") as usize;
        assert!(
            found == round || found == round + 1,
            "{case}: found at {found}"
        );
        assert_eq!(got.rounds[found].lost_ranks, [s], "{case}");
        let cells: BTreeSet<(u32, u32, u32)> = got
            .cells
            .iter()
            .map(|c| (c.source, c.dest, c.round))
            .collect();
        assert_eq!(cells.len(), got.cells.len(), "{case}: a cell twice");
        // A child of the silent rank in the tree between rounds hears the word that starts
        // round `found` late when its parent fell silent before passing it on, and skips
        // that round: its pair's cells there are lost too.
        let children: Vec<u32> = Tree::new(n, 0, s).children().collect();
        for (i, r) in seen.rounds.iter().enumerate() {
            let mut missing = Vec::new();
            for (x, y) in r.pairs.iter().flat_map(|p| p.cells()) {
                let kept = cells.contains(&(x, y, i as u32));
                let its = x == s || y == s;
                let cut_off = i == found && (children.contains(&x) || children.contains(&y));
                if (!its && !cut_off) || i < round {
                    assert!(kept, "{case}: cell {x} -> {y} of round {i} lost");
                } else if i > found {
                    assert!(!kept, "{case}: cell {x} -> {y} of round {i} after the loss");
                }
                if !kept {
                    missing.push((x, y));
                }
            }
            assert_eq!(got.rounds[i].lost_cells, missing, "{case}: round {i}");
        }
    }
    // Rank 0 silent: the others give up with an error that names it.
    let mut rng = Xoshiro256::new(0x5113_7001);
    let mut cfg = machine(3, 0, &mut rng);
    cfg.silent.push(commbench_sim::Silent {
        node: 0,
        from_us: 200.0,
    });
    let (_, _, r) = silent_run(&cfg);
    let e = r.expect_err("a run whose rank 0 is silent fails");
    assert!(e.contains("rank 0's word"), "{e}");
}
