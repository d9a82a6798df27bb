//! The order in which an all-pairs run meets its pairs: rounds of disjoint pairs.
//!
//! * `tournament` (the default): a 1-factorisation, `n - 1` rounds of `n / 2` disjoint pairs
//!   (`n` odd: `n` rounds, one rank resting in each), as LinkTest and ClusterKit schedule
//!   theirs. For `n` a power of two it is the XOR factorisation (round `r` pairs `i` with
//!   `i ^ r`), which e-cube routing on a hypercube carries without two messages on one
//!   channel; otherwise the circle method.
//! * `shift`: mpiGraph's order. Step `D` (1..n) measures every cell `r -> (r + D) mod n`. A
//!   commbench cell is a ping-pong, which holds both ranks, so each step runs as the fewest
//!   rounds in which every rank is in one pair (two, or three for odd cycles), where mpiGraph
//!   has every rank send to one peer and receive from another at once.
//! * `random`: the tournament over ranks shuffled from the seed (LinkTest's `--mix`): every
//!   round a random bisection, every pair still met once per pass.
//! * `serial`: one pair at a time, `n (n - 1) / 2` rounds: no pair shares the machine, the
//!   interference-free baseline (LinkTest's `--serial-testing`).
//!
//! `concurrency` bounds the pairs one round may hold; a longer round is split in order.

use crate::stats::Xoshiro256;
use crate::transport::Rank;
use serde::{Deserialize, Serialize};

/// How pairs are grouped into rounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Schedule {
    /// A 1-factorisation: `n - 1` rounds of `n / 2` disjoint pairs.
    Tournament,
    /// mpiGraph's shift: step `D` measures `r -> r + D`.
    Shift,
    /// The tournament over ranks shuffled from the seed, afresh in every pass.
    Random,
    /// One pair at a time.
    Serial,
}

impl Schedule {
    /// Name on the command line and in the result document.
    pub fn name(self) -> &'static str {
        match self {
            Schedule::Tournament => "tournament",
            Schedule::Shift => "shift",
            Schedule::Random => "random",
            Schedule::Serial => "serial",
        }
    }
}

/// Two ranks measured together in a round. `both`: the cell `first -> second` (first is the
/// timing source) and then `second -> first`; otherwise only `first -> second`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pair {
    /// The source of the first cell.
    pub first: Rank,
    /// Its dest.
    pub second: Rank,
    /// Whether the reverse cell is measured too.
    pub both: bool,
}

impl Pair {
    /// The cells `(source, dest)` this pair measures, in order.
    pub fn cells(&self) -> impl Iterator<Item = (Rank, Rank)> {
        let rev = self.both.then_some((self.second, self.first));
        std::iter::once((self.first, self.second)).chain(rev)
    }

    /// Whether `r` takes part.
    pub fn has(&self, r: Rank) -> bool {
        self.first == r || self.second == r
    }
}

/// The rounds of pass `pass` of `schedule` over `n` ranks, each round at most `concurrency`
/// pairs (0: no bound). Every ordered pair appears exactly once per pass.
pub fn rounds(
    schedule: Schedule,
    n: u32,
    seed: u64,
    pass: u32,
    concurrency: u32,
) -> Vec<Vec<Pair>> {
    let both = |(a, b): (Rank, Rank)| Pair {
        first: a,
        second: b,
        both: true,
    };
    let raw: Vec<Vec<Pair>> = match schedule {
        Schedule::Tournament => factorisation(n)
            .into_iter()
            .map(|r| r.into_iter().map(both).collect())
            .collect(),
        Schedule::Random => {
            let mut rng = Xoshiro256::new(seed ^ (u64::from(pass) << 32 | 0x5eed));
            let mut label: Vec<Rank> = (0..n).collect();
            for i in (1..label.len()).rev() {
                label.swap(i, rng.below(i + 1));
            }
            let mut rs: Vec<Vec<Pair>> = factorisation(n)
                .into_iter()
                .map(|r| {
                    r.into_iter()
                        .map(|(a, b)| both((label[a as usize], label[b as usize])))
                        .collect()
                })
                .collect();
            for i in (1..rs.len()).rev() {
                rs.swap(i, rng.below(i + 1));
            }
            rs
        }
        Schedule::Serial => (0..n)
            .flat_map(|a| (a + 1..n).map(move |b| vec![both((a, b))]))
            .collect(),
        Schedule::Shift => (1..n).flat_map(|d| shift_step(n, d)).collect(),
    };
    if concurrency == 0 {
        return raw;
    }
    raw.into_iter()
        .flat_map(|r| {
            r.chunks(concurrency as usize)
                .map(<[Pair]>::to_vec)
                .collect::<Vec<_>>()
        })
        .collect()
}

/// A 1-factorisation of the complete graph on `n` ranks: XOR rounds for a power of two, the
/// circle method otherwise (for odd `n` one rank rests each round).
pub fn factorisation(n: u32) -> Vec<Vec<(Rank, Rank)>> {
    if n < 2 {
        return Vec::new();
    }
    if n.is_power_of_two() {
        return (1..n)
            .map(|r| (0..n).filter(|&i| i < i ^ r).map(|i| (i, i ^ r)).collect())
            .collect();
    }
    // Circle method over m = n (even) or n + 1 (a resting place): the last position stays, the
    // others turn.
    let m = n + n % 2;
    let k = m - 1;
    (0..k)
        .map(|r| {
            let mut round = Vec::with_capacity(m as usize / 2);
            let mut push = |a: u32, b: u32| {
                if a < n && b < n {
                    round.push((a.min(b), a.max(b)));
                }
            };
            push(m - 1, r);
            for j in 1..m / 2 {
                push((r + j) % k, (r + k - j) % k);
            }
            round
        })
        .collect()
}

/// Step `d` of the shift: the cells `r -> r + d` split into rounds in which each rank is in
/// at most one pair. The cells form cycles `r, r + d, r + 2d, ...`; alternate cells of a cycle
/// go to alternate rounds, and the last cell of an odd cycle to a third.
fn shift_step(n: u32, d: u32) -> Vec<Vec<Pair>> {
    let mut out: Vec<Vec<Pair>> = vec![Vec::new(), Vec::new(), Vec::new()];
    let mut seen = vec![false; n as usize];
    for start in 0..n {
        if seen[start as usize] {
            continue;
        }
        let mut cycle = Vec::new();
        let mut r = start;
        while !seen[r as usize] {
            seen[r as usize] = true;
            cycle.push(r);
            r = (r + d) % n;
        }
        let len = cycle.len();
        for (i, &a) in cycle.iter().enumerate() {
            let slot = if len % 2 == 1 && i == len - 1 {
                2
            } else {
                i % 2
            };
            out[slot].push(Pair {
                first: a,
                second: (a + d) % n,
                both: false,
            });
        }
    }
    out.retain(|r| !r.is_empty());
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    fn check(schedule: Schedule, n: u32, conc: u32) -> usize {
        let rs = rounds(schedule, n, 7, 1, conc);
        let mut cells = HashSet::new();
        for r in &rs {
            assert!(!r.is_empty());
            if conc > 0 {
                assert!(r.len() <= conc as usize);
            }
            let mut busy = HashSet::new();
            for p in r {
                assert!(p.first < n && p.second < n && p.first != p.second);
                assert!(
                    busy.insert(p.first),
                    "{schedule:?} n={n}: rank twice in {r:?}"
                );
                assert!(
                    busy.insert(p.second),
                    "{schedule:?} n={n}: rank twice in {r:?}"
                );
                for c in p.cells() {
                    assert!(cells.insert(c), "{schedule:?} n={n}: cell {c:?} twice");
                }
            }
        }
        assert_eq!(cells.len() as u32, n * (n - 1), "{schedule:?} n={n}");
        rs.len()
    }

    #[test]
    fn every_schedule_covers_every_cell_once_with_disjoint_pairs() {
        for n in [2, 3, 4, 5, 6, 7, 8, 12, 16, 31] {
            for s in [
                Schedule::Tournament,
                Schedule::Shift,
                Schedule::Random,
                Schedule::Serial,
            ] {
                for conc in [0, 1, 3] {
                    check(s, n, conc);
                }
            }
        }
    }

    #[test]
    fn round_counts_follow_the_patterns() {
        assert_eq!(check(Schedule::Tournament, 16, 0), 15);
        assert_eq!(check(Schedule::Tournament, 6, 0), 5);
        assert_eq!(check(Schedule::Tournament, 7, 0), 7);
        assert_eq!(check(Schedule::Serial, 6, 0), 15);
        assert_eq!(check(Schedule::Tournament, 8, 2), 7 * 2);
        // Shift over 8 ranks: steps 1, 3, 5, 7 are one cycle of 8 (two rounds each), steps 2
        // and 6 two cycles of 4 (two), step 4 four cycles of 2 (two).
        assert_eq!(check(Schedule::Shift, 8, 0), 14);
    }

    #[test]
    fn xor_rounds_on_a_cube() {
        let f = factorisation(8);
        assert_eq!(f[2], vec![(0, 3), (1, 2), (4, 7), (5, 6)]);
    }

    #[test]
    fn random_differs_between_passes_and_seeds_but_repeats() {
        let a = rounds(Schedule::Random, 10, 1, 0, 0);
        assert_eq!(a, rounds(Schedule::Random, 10, 1, 0, 0));
        assert_ne!(a, rounds(Schedule::Random, 10, 1, 1, 0));
        assert_ne!(a, rounds(Schedule::Random, 10, 2, 0, 0));
    }
}
