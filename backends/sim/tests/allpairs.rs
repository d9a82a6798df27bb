//! The all-pairs program on the simulated hypercube: every cell measured once per pass, the
//! rounds of the XOR tournament free of contention, retests run alone.

use commbench_core::method::allpairs::{AllPairs, AllPairsCollected, AllPairsConfig, Schedule};
use commbench_core::method::{MethodConfig, NppChoice};
use commbench_core::Rank;
use commbench_sim::{run, SimConfig};
use std::collections::HashMap;

use crate::common;
use common::machine::Machine;

fn machine(dimensions: u32) -> SimConfig {
    Machine::preset("generic")
        .dimensions(dimensions)
        .stack_kib(128)
        .config()
}

fn method(sizes: Vec<u64>) -> MethodConfig {
    MethodConfig {
        sizes,
        trials: 5,
        warmup: 2,
        npp: NppChoice::Fixed(4),
        timer_samples: 64,
        ..MethodConfig::default()
    }
}

fn medians(c: &AllPairsCollected, size: u64) -> HashMap<(Rank, Rank), f64> {
    c.cells
        .iter()
        .filter(|x| x.size == size && !c.rounds[x.round as usize].retest)
        .map(|x| ((x.source, x.dest), x.stats.median))
        .collect()
}

#[test]
fn every_cell_once_and_alike_at_one_distance() {
    let cfg = machine(3);
    for schedule in [
        Schedule::Tournament,
        Schedule::Shift,
        Schedule::Random,
        Schedule::Serial,
    ] {
        let p = AllPairs::new(
            method(vec![8, 4096]),
            AllPairsConfig {
                schedule,
                ..AllPairsConfig::default()
            },
            None,
        );
        run(&cfg, &p).unwrap();
        let c = p.take_collected();
        assert_eq!(c.ranks, 8);
        assert_eq!(c.hosts[5], "node5");
        assert_eq!(c.timers.len(), 8);
        assert_eq!(c.hypercube, Some(3));
        for size in [8, 4096] {
            let m = medians(&c, size);
            assert_eq!(m.len(), 56, "{schedule:?}");
            if matches!(schedule, Schedule::Shift | Schedule::Random) {
                // Pairs of a round may share a channel: contention, which the others avoid.
                continue;
            }
            // No two pairs of a round share a channel (the XOR rounds, or one pair alone), so
            // a cell costs what its distance costs, whichever round it was in.
            let mut by_hops: HashMap<u32, f64> = HashMap::new();
            for (&(s, d), &t) in &m {
                let hops = (s ^ d).count_ones();
                let first = *by_hops.entry(hops).or_insert(t);
                assert!(
                    (t - first).abs() < 1e-9,
                    "{schedule:?} {s}->{d}: {t} vs {first}"
                );
            }
            assert!(by_hops[&3] > by_hops[&1]);
        }
        let times: Vec<u64> = c.rounds.iter().map(|r| r.start_ns).collect();
        assert!(times.windows(2).all(|w| w[0] <= w[1]), "{times:?}");
    }
}

#[test]
fn named_pairs_are_measured_again_alone_with_more_trials() {
    let cfg = machine(2);
    let pick = |c: &AllPairsCollected, size: u64| {
        assert!(c.cells.iter().any(|x| x.size == size));
        vec![(1, 2), (3, 3), (9, 0)]
    };
    let p = AllPairs::new(
        method(vec![8]),
        AllPairsConfig {
            retest_trials: 11,
            ..AllPairsConfig::default()
        },
        None,
    )
    .with_retest(&pick);
    run(&cfg, &p).unwrap();
    let c = p.take_collected();
    let again: Vec<_> = c
        .cells
        .iter()
        .filter(|x| c.rounds[x.round as usize].retest)
        .collect();
    // Only the valid pair, both ways.
    assert_eq!(again.len(), 2);
    assert_eq!((again[0].source, again[0].dest), (1, 2));
    assert_eq!((again[1].source, again[1].dest), (2, 1));
    // A retested cell keeps its trials (the default, suspects' raw trials kept).
    assert!(again
        .iter()
        .all(|x| x.trial_ns.len() == 11 && x.stats.n == 11 && x.retest));
    assert_eq!(c.rounds.iter().filter(|r| r.retest).count(), 1);
}

/// Rank 0 sends `n` bytes 0, 1, 2, ... to rank 1; rank 1 returns what arrived and the
/// virtual time from its post to the arrival.
struct Carry {
    n: usize,
}

impl commbench_core::Program for Carry {
    type Output = (Vec<u8>, u64);
    fn run<E: commbench_core::Endpoint>(&self, ep: &mut E) -> commbench_core::Result<Self::Output> {
        use commbench_core::{Src, TagSel};
        if ep.rank() == 0 {
            let data: Vec<u8> = (0..self.n).map(|i| i as u8).collect();
            ep.send(1, 7, data)?;
            return Ok((Vec::new(), 0));
        }
        let t = ep.now_ns();
        let c = ep.recv(Src::Rank(0), TagSel::Tag(7), vec![0xee; self.n])?;
        assert_eq!(c.len, self.n);
        Ok((c.buf, ep.now_ns() - t))
    }
}

#[test]
fn a_machine_carrying_a_prefix_times_as_one_carrying_all() {
    for n in [100, 4096, 100_000] {
        let all = run(&machine(1), &Carry { n }).unwrap();
        let mut cfg = machine(1);
        cfg.carry_bytes = Some(4096);
        let some = run(&cfg, &Carry { n }).unwrap();
        assert_eq!(all[1].1, some[1].1, "{n} bytes: the virtual time differs");
        let sent: Vec<u8> = (0..n).map(|i| i as u8).collect();
        assert_eq!(all[1].0, sent);
        let kept = n.min(4096);
        assert_eq!(some[1].0[..kept], sent[..kept], "{n} bytes: the prefix");
        assert!(
            some[1].0[kept..].iter().all(|&b| b == 0xee),
            "{n} bytes: beyond it"
        );
    }
}

/// What rank 0 keeps grows with the cells and not with the trials: each cell a summary of a
/// fixed size, whatever its trials (the raw trials stay with the source, `RawMode`).
#[test]
fn rank_0_keeps_a_summary_per_cell_whatever_the_trials() {
    let cfg = machine(4);
    let mut per_cell = Vec::new();
    for trials in [5u64, 40, 300] {
        let p = AllPairs::new(
            MethodConfig {
                trials,
                ..method(vec![8, 65536])
            },
            AllPairsConfig::default(),
            None,
        );
        run(&cfg, &p).unwrap();
        let c = p.take_collected();
        assert_eq!(c.cells.len(), 2 * 16 * 15);
        assert!(c
            .cells
            .iter()
            .all(|x| x.trial_ns.is_empty() && x.stats.n == trials));
        let bytes = serde_json::to_vec(&c.cells).unwrap().len();
        per_cell.push(bytes as f64 / c.cells.len() as f64);
    }
    let (lo, hi) = per_cell
        .iter()
        .fold((f64::MAX, 0f64), |(l, h), &x| (l.min(x), h.max(x)));
    // 5 to 300 trials: the same bytes a cell, give or take the digits of its numbers.
    assert!(hi / lo < 1.2, "{per_cell:?}");
    assert!(hi < 600.0, "{per_cell:?}");
}
