//! Several pairs streaming at once (osu_mbw_mr, IMB Uniband and Biband): which ranks pair up
//! ([`Placement`]), how every sample starts together ([`StartSync`]), and the roles the trial
//! engine gives each rank ([`TrialRole`]).
//!
//! Each pair is a sender and a receiver. Every sample (trial) starts after one barrier of all
//! ranks, then each pair's own handshake; each sender times its own `npp` windows, so a point
//! keeps one sequence of trial times per pair, gathered to rank 0
//! ([`crate::method::engine::RawPoint::pair_trial_ns`]). What the sequences add up to (the
//! aggregates and their formulas) is the analysis's.

use crate::transport::Rank;
use serde::{Deserialize, Serialize};

/// Most pairs one run streams at once.
pub const MAX_PAIRS: u32 = 4096;

/// How the senders and receivers were placed on the run's ranks.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum Placement {
    /// Sender `r` pairs with `r + K` (osu_mbw_mr's, IMB's): with the ranks filled host by
    /// host, every pair crosses from the first half to the second.
    Block,
    /// Sender `2 i` pairs with `2 i + 1`: with the ranks dealt out to hosts in turn, every
    /// pair crosses.
    Cyclic,
    /// The pairs a file lists, one `SENDER RECEIVER` per line.
    File {
        /// The file, as given.
        path: String,
    },
}

impl Placement {
    /// `k` pairs placed as block or cyclic (a file's pairs come from [`parse_pairs`]), at most
    /// [`MAX_PAIRS`].
    pub fn pairs(&self, k: u32) -> Vec<Pair> {
        let k = k.min(MAX_PAIRS);
        match self {
            Placement::Block => (0..k)
                .map(|r| Pair {
                    sender: r,
                    receiver: r + k,
                })
                .collect(),
            Placement::Cyclic => (0..k)
                .map(|i| Pair {
                    sender: 2 * i,
                    receiver: 2 * i + 1,
                })
                .collect(),
            Placement::File { .. } => Vec::new(),
        }
    }
}

/// How every sample's pairs start together.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StartSync {
    /// A barrier of all ranks before every sample (IMB's, OSU's), then each pair's handshake
    /// (seed 000 §3.2): the pairs start within the barrier's exit skew of each other.
    #[default]
    Barrier,
}

/// One pair: who streams to whom.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pair {
    /// The rank that sends the windows and times them.
    pub sender: Rank,
    /// The rank that receives them and acknowledges each window.
    pub receiver: Rank,
}

/// Pairs that stream at once, as a run's configuration holds them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Concurrent {
    /// The pairs, in order: pair 0's sender is the run's `source` (its clock is the one
    /// characterised, its trials estimate npp).
    pub pairs: Vec<Pair>,
    /// How they were placed.
    pub placement: Placement,
    /// How every sample starts together.
    #[serde(default)]
    pub start: StartSync,
}

/// Where a point lies in a sweep of windows and pairs (`bandwidth --window 1..128`, `--pairs
/// 1..8:+1`): the window asked for (the point's `trips_per_iteration` is the one used, smaller
/// for the largest sizes) and the pairs that streamed at once (1 without pairs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SweepAt {
    /// Sends outstanding per window, as asked.
    pub window: u32,
    /// Pairs streaming at once.
    pub pairs: u32,
}

impl Concurrent {
    /// The first `k` pairs, placed and started as these are.
    pub fn first(&self, k: usize) -> Concurrent {
        Concurrent {
            pairs: self.pairs[..k.min(self.pairs.len())].to_vec(),
            placement: self.placement.clone(),
            start: self.start,
        }
    }
}

/// What one rank does in a trial.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TrialRole {
    /// It times its pair's iterations with `peer` (a `source`).
    Timer {
        /// The rank it measures with.
        peer: Rank,
    },
    /// It answers its pair's `peer` (a `dest`).
    Partner {
        /// The rank that times.
        peer: Rank,
    },
    /// It joins only the control plane.
    Idle,
}

impl TrialRole {
    /// Whether the rank runs iterations (a timer or its partner).
    pub fn participates(&self) -> bool {
        !matches!(self, TrialRole::Idle)
    }
}

impl Concurrent {
    /// The pairs' ranks checked against a run of `size` ranks: at least one pair, at most
    /// [`MAX_PAIRS`], every rank in range and in one pair only. The reason, or nothing.
    pub fn problem(&self, size: u32) -> Option<String> {
        let n = self.pairs.len();
        if n == 0 {
            return Some("no pairs to stream".into());
        }
        if n > MAX_PAIRS as usize {
            return Some(format!("{n} pairs: at most {MAX_PAIRS}"));
        }
        let mut seen = std::collections::BTreeMap::new();
        for (i, p) in self.pairs.iter().enumerate() {
            for r in [p.sender, p.receiver] {
                if r >= size {
                    return Some(format!(
                        "pair {i} ({} -> {}): rank {r} is out of range: the run has {size} \
                         ranks (0..{})",
                        p.sender,
                        p.receiver,
                        size.saturating_sub(1)
                    ));
                }
                if let Some(j) = seen.insert(r, i) {
                    return Some(format!(
                        "rank {r} is in pair {j} and pair {i}: each rank streams in one pair"
                    ));
                }
            }
        }
        None
    }

    /// The role of rank `me`.
    pub fn role(&self, me: Rank) -> TrialRole {
        for p in &self.pairs {
            if p.sender == me {
                return TrialRole::Timer { peer: p.receiver };
            }
            if p.receiver == me {
                return TrialRole::Partner { peer: p.sender };
            }
        }
        TrialRole::Idle
    }

    /// The ranks the pairs need where ranks are numbered from 0: one past the highest.
    pub fn ranks_needed(&self) -> u32 {
        self.pairs
            .iter()
            .map(|p| p.sender.max(p.receiver).saturating_add(1))
            .max()
            .unwrap_or(2)
    }
}

/// A placement file's pairs: one `SENDER RECEIVER` per line (spaces, a tab or a comma
/// between), `#` starting a comment, blank lines ignored. The reason names the line.
pub fn parse_pairs(text: &str) -> std::result::Result<Vec<Pair>, String> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let body = line.split('#').next().unwrap_or("").trim();
        if body.is_empty() {
            continue;
        }
        let words: Vec<&str> = body
            .split(|c: char| c.is_whitespace() || c == ',')
            .filter(|w| !w.is_empty())
            .collect();
        let rank = |w: &str| -> std::result::Result<Rank, String> {
            w.parse::<Rank>()
                .map_err(|_| format!("line {}: `{w}` is not a rank", i + 1))
        };
        match words.as_slice() {
            [s, r] => out.push(Pair {
                sender: rank(s)?,
                receiver: rank(r)?,
            }),
            _ => {
                return Err(format!(
                    "line {}: `{body}`: a line is SENDER RECEIVER (two ranks)",
                    i + 1
                ))
            }
        }
    }
    if out.is_empty() {
        return Err("no pairs in it (one SENDER RECEIVER per line)".into());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::Xoshiro256;

    fn of(pairs: Vec<Pair>) -> Concurrent {
        Concurrent {
            pairs,
            placement: Placement::Block,
            start: StartSync::Barrier,
        }
    }

    #[test]
    fn block_and_cyclic_place_every_rank_once() {
        let mut rng = Xoshiro256::new(0x9a125);
        for _ in 0..100 {
            let k = 1 + rng.below(300) as u32;
            for placement in [Placement::Block, Placement::Cyclic] {
                let c = of(placement.pairs(k));
                assert_eq!(c.pairs.len(), k as usize);
                assert_eq!(c.ranks_needed(), 2 * k);
                assert_eq!(c.problem(2 * k), None);
                assert!(c.problem(2 * k - 1).is_some());
                let r = rng.below(2 * k as usize) as u32;
                let peer = match c.role(r) {
                    TrialRole::Timer { peer } | TrialRole::Partner { peer } => peer,
                    TrialRole::Idle => panic!("rank {r} has no role"),
                };
                assert!(
                    matches!(c.role(peer), TrialRole::Timer { peer: p } | TrialRole::Partner { peer: p } if p == r)
                );
                assert_eq!(c.role(2 * k), TrialRole::Idle);
            }
        }
        assert_eq!(
            Placement::Block.pairs(2),
            [
                Pair {
                    sender: 0,
                    receiver: 2
                },
                Pair {
                    sender: 1,
                    receiver: 3
                }
            ]
        );
    }

    #[test]
    fn placements_stop_at_the_most_pairs() {
        for p in [Placement::Block, Placement::Cyclic] {
            assert_eq!(p.pairs(u32::MAX).len(), MAX_PAIRS as usize);
        }
    }

    #[test]
    fn a_rank_in_two_pairs_is_refused() {
        let c = of(vec![
            Pair {
                sender: 0,
                receiver: 1,
            },
            Pair {
                sender: 2,
                receiver: 0,
            },
        ]);
        assert!(c
            .problem(4)
            .unwrap()
            .contains("rank 0 is in pair 0 and pair 1"));
        assert!(of(Vec::new()).problem(4).is_some());
    }

    #[test]
    fn a_placement_file_is_read_line_by_line() {
        let p = parse_pairs("# hosts a and b\n0 4\n1,5\n\n 2\t6 # third\n").unwrap();
        assert_eq!(p.len(), 3);
        assert_eq!(p[2].receiver, 6);
        assert!(parse_pairs("0 1 2\n").unwrap_err().contains("line 1"));
        assert!(parse_pairs("0 x\n")
            .unwrap_err()
            .contains("`x` is not a rank"));
        assert!(parse_pairs("# nothing\n").is_err());
    }
}
