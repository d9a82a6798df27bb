//! The all-pairs matrix as the result document records it (`allpairs`, docs/result-format.md):
//! every cell with the statistics of the contract (its raw trials where they were kept), the
//! schedule and its rounds, the attribution fitted at each size ([`crate::analysis::allpairs`]) and the
//! verdicts, merged over the sizes.

use crate::analysis::allpairs::{self, CellObs, Fit, Rule, Topology, Verdict};
use commbench_core::method::allpairs::{
    AllPairsCollected, AllPairsConfig, CellStats, LostRank, RawCell, RoundRaw, Schedule,
};
use commbench_core::stats::{self, Interval};
use commbench_core::transport::error::Result;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap};

/// Most pairs measured again per suspect.
pub const RETEST_PER_SUSPECT: usize = 3;

/// One cell measured once, as the document records it (`allpairs.cells[]`): a fixed-size
/// summary of its one-way times, and its raw trials where they were kept.
pub use commbench_core::method::allpairs::CellRecord as MatrixCell;

/// The attribution fitted at one size.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SizeFit {
    /// Message size, bytes.
    pub size: u64,
    /// The model and its suspects.
    pub fit: Fit,
    /// The verdicts at this size, before the merge over sizes.
    #[serde(default)]
    pub verdicts: Vec<Verdict>,
}

/// One rank's clock (seed 000 §3.1).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct RankTimer {
    /// `min_ov`, ns.
    pub min_overhead_ns: f64,
    /// `res_timing`, ns.
    pub resolution_ns: f64,
}

/// The `allpairs` section of a result document.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MatrixSection {
    /// The schedule and its settings.
    pub config: AllPairsConfig,
    /// The rule suspects are flagged by.
    pub rule: Rule,
    /// Ranks in the run.
    pub ranks: u32,
    /// Host of every rank.
    pub hosts: Vec<String>,
    /// The switches above every rank's host as the run learned them (`""` where unknown;
    /// `topology` holds them when every rank's was known); absent when none was.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub switches: Vec<String>,
    /// What the attribution knows of where ranks sit.
    pub topology: Topology,
    /// The sizes measured, in order.
    pub sizes: Vec<u64>,
    /// Every rank's clock.
    pub timers: Vec<RankTimer>,
    /// Every round run, in order, with its start and end.
    pub rounds: Vec<RoundRaw>,
    /// Every cell measured.
    pub cells: Vec<MatrixCell>,
    /// The attribution at each size.
    pub fits: Vec<SizeFit>,
    /// The verdicts over every size: nodes, links (the simulator: channels), dimensions,
    /// contention. Empty on a healthy machine.
    pub verdicts: Vec<Verdict>,
    /// Where `--raw all` had every process write its cells' raw trials; absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raw_files: Option<RawFiles>,
    /// Whether the time budget (`config.max_time_s`) ended a size before its last round.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub budget_reached: bool,
    /// How much of the matrix each size covered, under a time budget or when a rank was
    /// lost; empty otherwise.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub coverage: Vec<Coverage>,
    /// Ranks the run went on without (silent for longer than the round timeout), in the
    /// order they were found; their cells from then on are missing. Absent: none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub lost: Vec<LostRank>,
}

/// How much of the matrix one size covered (the main passes).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Coverage {
    /// Message size, bytes.
    pub size: u64,
    /// Ordered pairs measured.
    pub cells: u64,
    /// Ordered pairs there are: `n (n - 1)`.
    pub of_cells: u64,
    /// Ranks in at least one measured cell.
    pub ranks: u32,
    /// Pairs of hosts (unordered; a host with itself when it has two ranks) with a measured
    /// cell between them.
    pub host_pairs: u64,
    /// Pairs of hosts there are.
    pub of_host_pairs: u64,
    /// Pairs of switches (those the hosts hang from; unordered, a switch with itself when
    /// it holds two ranks or more) with a measured cell between them, when every rank's
    /// switches are known; absent otherwise and in documents written before it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub switch_pairs: Option<u64>,
    /// Pairs of switches there are, as `switch_pairs`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub of_switch_pairs: Option<u64>,
}

/// Each rank's group as a number, groups numbered as first seen.
fn numbered<'a>(names: impl Iterator<Item = &'a str>) -> Vec<u32> {
    let mut ids: HashMap<&str, u32> = HashMap::new();
    names
        .map(|name| {
            let next = ids.len() as u32;
            *ids.entry(name).or_insert(next)
        })
        .collect()
}

/// Of the ranks grouped by `group` (a host, a switch), the unordered pairs of groups with a
/// cell of `cells` between them, and the pairs there are: every two groups, and a group with
/// itself when it holds two ranks or more.
fn group_pairs(group: &[u32], cells: &std::collections::HashSet<(usize, usize)>) -> (u64, u64) {
    let mut per = vec![0u64; group.iter().map(|&g| g as usize + 1).max().unwrap_or(0)];
    group.iter().for_each(|&g| per[g as usize] += 1);
    let k = per.len() as u64;
    let of = k * k.saturating_sub(1) / 2 + per.iter().filter(|&&x| x >= 2).count() as u64;
    let seen: std::collections::HashSet<(u32, u32)> = cells
        .iter()
        .map(|&(i, j)| (group[i].min(group[j]), group[i].max(group[j])))
        .collect();
    (seen.len() as u64, of)
}

/// The coverage of `size` by the main-pass cells of `c`.
fn coverage(c: &AllPairsCollected, size: u64) -> Coverage {
    let n = c.ranks as usize;
    let host = numbered((0..n).map(|r| c.hosts.get(r).map_or("", String::as_str)));
    let mut cells = std::collections::HashSet::new();
    let mut ranks = vec![false; n];
    for x in c.cells.iter().filter(|x| x.size == size && !x.retest) {
        let (i, j) = (x.source as usize, x.dest as usize);
        if i >= n || j >= n {
            continue;
        }
        cells.insert((i, j));
        ranks[i] = true;
        ranks[j] = true;
    }
    let (host_pairs, of_host_pairs) = group_pairs(&host, &cells);
    let switched = matches!(topology(c), Topology::Switched { .. });
    let (switch_pairs, of_switch_pairs) = if switched && c.switches.len() == n {
        let leaf = numbered(c.switches.iter().map(String::as_str));
        let (a, b) = group_pairs(&leaf, &cells);
        (Some(a), Some(b))
    } else {
        (None, None)
    };
    Coverage {
        size,
        cells: cells.len() as u64,
        of_cells: (n as u64) * (n as u64).saturating_sub(1),
        ranks: ranks.iter().filter(|&&r| r).count() as u32,
        host_pairs,
        of_host_pairs,
        switch_pairs,
        of_switch_pairs,
    }
}

/// The raw files of a run (`--raw all`): a directory on every host, a file per process.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RawFiles {
    /// The directory as the run was given it (relative paths: to where the ranks ran).
    pub dir: String,
    /// The files in it: `rank-R.jsonl` for a process of one rank, `ranks.jsonl` for every
    /// rank in one process (the simulator). Each holds one JSON line a cell
    /// (`source`, `dest`, `size`, `round`, `npp`, `trips_per_iteration`, `trial_ns`).
    pub files: Vec<String>,
}

/// What the attribution knows of the ranks of `c`: the simulator's cube, else the hosts,
/// with the switches above them when every rank's are known.
pub fn topology(c: &AllPairsCollected) -> Topology {
    match c.hypercube {
        Some(dimensions) => Topology::Hypercube { dimensions },
        None => allpairs::with_switches(&c.hosts, &c.switches).0,
    }
}

/// A cell of a matrix at one size, every measurement of it merged.
#[derive(Debug, Clone, PartialEq)]
pub struct CellSide {
    /// Its one-way times' statistics, us: of every trial when every measurement kept its
    /// trials; of its one measurement's summary; or, measured several times without trials,
    /// the median of the medians, the hull of their intervals, the largest percentiles, the
    /// trials counted over all.
    pub stats: CellStats,
    /// Every trial's one-way time, us, sorted: empty unless every measurement kept them.
    pub trials: Vec<f64>,
}

/// Every cell of `cells` with its measurements merged ([`CellSide`]), by `(source, dest)`;
/// a cell none of whose measurements has a trial is left out.
pub fn merged<'c>(cells: impl Iterator<Item = &'c MatrixCell>) -> BTreeMap<(u32, u32), CellSide> {
    let mut by: BTreeMap<(u32, u32), Vec<&MatrixCell>> = BTreeMap::new();
    for c in cells {
        by.entry((c.source, c.dest)).or_default().push(c);
    }
    by.into_iter()
        .filter_map(|(k, ms)| Some((k, merge(&ms)?)))
        .collect()
}

/// One cell from its measurements ([`CellSide`]); `None` when none has a trial.
fn merge(ms: &[&MatrixCell]) -> Option<CellSide> {
    if ms.iter().all(|c| !c.trial_ns.is_empty()) {
        let mut trials: Vec<f64> = ms.iter().flat_map(|c| c.one_way_us_sorted()).collect();
        stats::sort_samples(&mut trials);
        return Some(CellSide {
            stats: CellStats::of_sorted(&trials)?,
            trials,
        });
    }
    let usable: Vec<&CellStats> = ms.iter().map(|c| &c.stats).filter(|s| s.n > 0).collect();
    let first = **usable.first()?;
    let stats = if usable.len() == 1 {
        first
    } else {
        let n: u64 = usable.iter().map(|s| s.n).sum();
        let fold = |f: fn(&CellStats) -> f64, pick: fn(f64, f64) -> f64| {
            usable.iter().map(|s| f(s)).fold(f(&first), pick)
        };
        CellStats {
            n,
            min: fold(|s| s.min, f64::min),
            median: median_of_medians(&usable),
            mean: usable.iter().map(|s| s.mean * s.n as f64).sum::<f64>() / n.max(1) as f64,
            p90: fold(|s| s.p90, f64::max),
            p99: fold(|s| s.p99, f64::max),
            max: fold(|s| s.max, f64::max),
            ci95_median: Interval {
                lo: fold(|s| s.ci95_median.lo, f64::min),
                hi: fold(|s| s.ci95_median.hi, f64::max),
            },
        }
    };
    Some(CellSide {
        stats,
        trials: Vec::new(),
    })
}

/// The median of the measurements' medians.
fn median_of_medians(s: &[&CellStats]) -> f64 {
    let mut v: Vec<f64> = s.iter().map(|s| s.median).collect();
    stats::sort_samples(&mut v);
    stats::median(&v).unwrap_or(f64::NAN)
}

/// The cells of `size` as the attribution takes them: the main passes (`retest` false) or the
/// retests, every measurement of a cell merged ([`merged`]): the median of every trial when
/// every measurement kept its trials (documents written before cells were summarised, the
/// retests), else the median of the measurements' medians.
pub fn observations<'c>(cells: impl Iterator<Item = &'c MatrixCell>) -> Vec<CellObs> {
    merged(cells)
        .into_iter()
        .map(|((source, dest), side)| CellObs {
            source,
            dest,
            one_way_us: if side.trials.is_empty() {
                vec![side.stats.median]
            } else {
                side.trials
            },
        })
        .collect()
}

/// Whether the rounds of `config` measure one pair at a time (no load to contend with).
pub fn one_at_a_time(config: &AllPairsConfig) -> bool {
    config.schedule == Schedule::Serial || config.concurrency == 1
}

/// The cells of `size` in what rank 0 collected, main passes or retests.
fn collected_obs(c: &AllPairsCollected, size: u64, retest: bool) -> Vec<CellObs> {
    observations(
        c.cells
            .iter()
            .filter(|x| x.size == size && x.retest == retest),
    )
}

/// The pairs to measure again after `size`: the suspects of the cells collected so far.
pub fn pick_retests(c: &AllPairsCollected, size: u64, rule: &Rule) -> Vec<(u32, u32)> {
    let cells = collected_obs(c, size, false);
    match allpairs::fit(c.ranks, &topology(c), &cells, rule) {
        Ok(f) => allpairs::retest_pairs(&f, RETEST_PER_SUSPECT),
        Err(_) => Vec::new(),
    }
}

impl MatrixSection {
    /// The section of a run: every cell analysed, the attribution fitted at each size, the
    /// verdicts merged. A size with too few cells to fit is left without a fit.
    pub fn build(c: AllPairsCollected, config: AllPairsConfig, rule: Rule) -> Result<Self> {
        let topology = topology(&c);
        let mut sizes: Vec<u64> = Vec::new();
        for r in &c.rounds {
            if !sizes.contains(&r.size) {
                sizes.push(r.size);
            }
        }
        let mut fits = Vec::new();
        let mut per_size = Vec::new();
        for &size in &sizes {
            let main = collected_obs(&c, size, false);
            let again = collected_obs(&c, size, true);
            let Ok(fit) = allpairs::fit(c.ranks, &topology, &main, &rule) else {
                continue;
            };
            let verdicts = allpairs::verdicts(&fit, &main, &again, &rule, one_at_a_time(&config));
            per_size.push((size, verdicts.clone()));
            fits.push(SizeFit {
                size,
                fit,
                verdicts,
            });
        }
        let timers = c
            .timers
            .iter()
            .map(|t| RankTimer {
                min_overhead_ns: t.min_overhead_ns,
                resolution_ns: t.resolution_ns,
            })
            .collect();
        let coverage = if config.max_time_s.is_some() || !c.lost.is_empty() {
            sizes.iter().map(|&s| coverage(&c, s)).collect()
        } else {
            Vec::new()
        };
        Ok(MatrixSection {
            config,
            rule,
            ranks: c.ranks,
            hosts: c.hosts.clone(),
            switches: c.switches.clone(),
            topology,
            sizes,
            timers,
            rounds: c.rounds,
            cells: c.cells,
            fits,
            verdicts: allpairs::merge_sizes(per_size),
            raw_files: None,
            budget_reached: c.budget_reached,
            coverage,
            lost: c.lost,
        })
    }

    /// Give the cells the trials of `raw` (lines of raw files, [`RawFiles`]), matched by
    /// source, dest, size and round; returns how many cells got theirs. A line that matches
    /// no cell, or whose npp or trips differ from its cell's, is left out.
    pub fn attach_raw(&mut self, raw: impl IntoIterator<Item = RawCell>) -> usize {
        let mut at: HashMap<(u32, u32, u64, u32), usize> = HashMap::with_capacity(self.cells.len());
        for (i, c) in self.cells.iter().enumerate() {
            at.insert((c.source, c.dest, c.size, c.round), i);
        }
        let mut got = 0;
        for r in raw {
            let Some(&i) = at.get(&(r.source, r.dest, r.size, r.round)) else {
                continue;
            };
            let c = &mut self.cells[i];
            if c.npp == r.npp && c.trips_per_iteration == r.trips_per_iteration {
                if c.trial_ns.is_empty() {
                    got += 1;
                }
                c.trial_ns = r.trial_ns;
            }
        }
        got
    }

    /// The median one-way time (us) of every cell of `size` in the main passes, as an
    /// `n x n` matrix by `[source][dest]` (`None`: not measured; the diagonal never is).
    pub fn medians(&self, size: u64) -> Vec<Vec<Option<f64>>> {
        let n = self.ranks as usize;
        let mut m = vec![vec![None; n]; n];
        let obs = observations(self.cells.iter().filter(|x| x.size == size && !x.retest));
        for o in obs {
            if let (Some(row), Some(v)) =
                (m.get_mut(o.source as usize), stats::median(&o.one_way_us))
            {
                if let Some(slot) = row.get_mut(o.dest as usize) {
                    *slot = Some(v);
                }
            }
        }
        m
    }

    /// The fit at `size`, if one was made.
    pub fn fit_at(&self, size: u64) -> Option<&Fit> {
        self.fits.iter().find(|f| f.size == size).map(|f| &f.fit)
    }

    /// Whether any verdict names a fault (a node, link or dimension; contention alone is not
    /// one).
    pub fn has_fault(&self) -> bool {
        self.verdicts.iter().any(|v| v.kind != "contention")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use commbench_core::method::allpairs::CellRecord;
    use commbench_core::method::engine::RawPoint;
    use commbench_core::stats::Xoshiro256;

    /// Coverage against a count made the slow way, on random hosts (under random switches,
    /// half the time) and random cells.
    #[test]
    fn coverage_counts_cells_ranks_and_host_and_switch_pairs() {
        let mut rng = Xoshiro256::new(3);
        for _ in 0..100 {
            let n = 2 + rng.below(20) as u32;
            let hosts: Vec<String> = (0..n).map(|_| format!("h{}", rng.below(6))).collect();
            let leaves = 1 + rng.below(4);
            let switches: Vec<String> = match rng.below(2) {
                0 => Vec::new(),
                _ => hosts
                    .iter()
                    .map(|h| format!("top.l{}", h[1..].parse::<usize>().unwrap() % leaves))
                    .collect(),
            };
            let mut c = AllPairsCollected {
                ranks: n,
                hosts: hosts.clone(),
                switches: switches.clone(),
                ..AllPairsCollected::default()
            };
            for i in 0..n {
                for j in 0..n {
                    if j == i || rng.below(3) != 0 {
                        continue;
                    }
                    let point = RawPoint {
                        size: 8,
                        npp: 1,
                        trips_per_iteration: 2,
                        trial_ns: vec![1000],
                        ..RawPoint::default()
                    };
                    let retest = rng.below(10) == 0;
                    c.cells
                        .push(CellRecord::of((i, j, 0), retest, point, false).unwrap());
                }
            }
            let got = coverage(&c, 8);
            let main: Vec<&CellRecord> = c.cells.iter().filter(|x| !x.retest).collect();
            assert_eq!(got.cells, main.len() as u64);
            assert_eq!(got.of_cells, u64::from(n * (n - 1)));
            let in_cell = (0..n)
                .filter(|&r| main.iter().any(|x| x.source == r || x.dest == r))
                .count();
            assert_eq!(got.ranks as usize, in_cell);
            // Pairs of groups (hosts or switches) over every cell there is and those measured.
            let count = |group: &[String]| {
                let pair = |i: u32, j: u32| {
                    let (a, b) = (&group[i as usize], &group[j as usize]);
                    (a.min(b).clone(), a.max(b).clone())
                };
                let all: std::collections::HashSet<_> = (0..n)
                    .flat_map(|i| (0..n).filter(move |&j| j != i).map(move |j| (i, j)))
                    .map(|(i, j)| pair(i, j))
                    .collect();
                let seen: std::collections::HashSet<_> =
                    main.iter().map(|x| pair(x.source, x.dest)).collect();
                (seen.len() as u64, all.len() as u64)
            };
            assert_eq!((got.host_pairs, got.of_host_pairs), count(&hosts));
            if switches.is_empty() {
                assert_eq!((got.switch_pairs, got.of_switch_pairs), (None, None));
            } else {
                let (a, b) = count(&switches);
                assert_eq!((got.switch_pairs, got.of_switch_pairs), (Some(a), Some(b)));
            }
        }
    }
}
