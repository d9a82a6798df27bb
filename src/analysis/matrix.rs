//! The all-pairs matrix as the result document records it (`allpairs`, docs/result-format.md):
//! every cell with the statistics of the contract and its raw trials, the schedule and its
//! rounds, the attribution fitted at each size ([`crate::analysis::allpairs`]) and the
//! verdicts, merged over the sizes.

use crate::analysis::allpairs::{self, CellObs, Fit, Rule, Topology, Verdict};
use commbench_core::method::allpairs::{
    AllPairsCollected, AllPairsConfig, CellRaw, RoundRaw, Schedule,
};
use commbench_core::method::engine::{one_way_us_sorted, RawPoint};
use commbench_core::method::PatternKind;
use commbench_core::stats::{self, Summary};
use commbench_core::transport::error::{Error, Result};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Most pairs measured again per suspect.
pub const RETEST_PER_SUSPECT: usize = 3;

/// One cell measured once.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MatrixCell {
    /// The timing source.
    pub source: u32,
    /// The echoing dest.
    pub dest: u32,
    /// Message size, bytes.
    pub size: u64,
    /// Index of its round in [`MatrixSection::rounds`].
    pub round: u32,
    /// Whether it was measured again alone to confirm a suspect.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub retest: bool,
    /// `npp` used.
    pub npp: u64,
    /// `npp` the formula of §3.3 gave (None when given).
    #[serde(default)]
    pub npp_calculated: Option<u64>,
    /// Message times per iteration (2: a ping-pong).
    pub trips_per_iteration: u64,
    /// Every trial time, ns, the source's `min_ov` subtracted, in the order measured.
    pub trial_ns: Vec<i64>,
    /// The one-way times' statistics (seed 000 §3.4), us.
    pub one_way_us: Summary,
    /// What the cell's message buffers were (docs/buffers.md), as a point's `buffers`;
    /// absent in documents written before it was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub buffers: Option<commbench_core::method::engine::PointBuffers>,
    /// How the cell stopped when cells were measured until their interval was narrow enough
    /// (`--until-ci`): as a point's `until_ci`, with `separated` (its interval wholly on one
    /// side of `threshold_us`) and `borderline` (as narrow as asked, still holding it at its
    /// bound). Absent for a fixed count and in documents written before it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub until_ci: Option<commbench_core::method::until::Stopping>,
}

impl MatrixCell {
    /// The record of cell `x` as measured, its statistics computed; `retest`: whether its
    /// round measured a suspect again.
    pub fn of(x: &CellRaw, retest: bool) -> Result<Self> {
        let sorted = x.point.one_way_us_sorted();
        let one_way_us = stats::summarize(&sorted).ok_or_else(|| {
            Error::Protocol(format!(
                "cell {} -> {} at {} B has no trials",
                x.source, x.dest, x.point.size
            ))
        })?;
        Ok(MatrixCell {
            source: x.source,
            dest: x.dest,
            size: x.point.size,
            round: x.round,
            retest,
            npp: x.point.npp,
            npp_calculated: x.point.npp_calculated,
            trips_per_iteration: x.point.trips_per_iteration,
            trial_ns: x.point.trial_ns.clone(),
            one_way_us,
            buffers: x.point.buffers.clone(),
            until_ci: x.point.until_ci.clone(),
        })
    }

    /// The cell as measured, back from its record: what [`MatrixSection::build`] takes (a
    /// stream's cells become a document's again). A ping-pong; the estimate npp came from
    /// is not recorded in a cell.
    pub fn raw(&self) -> CellRaw {
        CellRaw {
            source: self.source,
            dest: self.dest,
            round: self.round,
            point: RawPoint {
                pattern: PatternKind::PingPong.name().into(),
                size: self.size,
                npp: self.npp,
                npp_calculated: self.npp_calculated,
                trips_per_iteration: self.trips_per_iteration,
                trial_ns: self.trial_ns.clone(),
                buffers: self.buffers.clone(),
                until_ci: self.until_ci.clone(),
                ..RawPoint::default()
            },
        }
    }

    /// The one-way time of every trial, us, sorted.
    pub fn one_way_us_sorted(&self) -> Vec<f64> {
        one_way_us_sorted(&self.trial_ns, self.npp, self.trips_per_iteration)
    }
}

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
}

/// What the attribution knows of the ranks of `c`: the simulator's cube, else the hosts.
pub fn topology(c: &AllPairsCollected) -> Topology {
    match c.hypercube {
        Some(dimensions) => Topology::Hypercube { dimensions },
        None => Topology::Hosts(c.hosts.clone()),
    }
}

/// The cells of `size` as the attribution takes them: the main passes (`retest` false) or the
/// retests, every measurement of a cell merged.
fn observations(cells: impl Iterator<Item = (u32, u32, Vec<f64>)>) -> Vec<CellObs> {
    let mut by: BTreeMap<(u32, u32), Vec<f64>> = BTreeMap::new();
    for (s, d, v) in cells {
        by.entry((s, d)).or_default().extend(v);
    }
    by.into_iter()
        .map(|((source, dest), mut one_way_us)| {
            stats::sort_samples(&mut one_way_us);
            CellObs {
                source,
                dest,
                one_way_us,
            }
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
            .filter(|x| x.point.size == size)
            .filter(|x| c.rounds.get(x.round as usize).map(|r| r.retest) == Some(retest))
            .map(|x| (x.source, x.dest, x.point.one_way_us_sorted())),
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
        let cells = c
            .cells
            .iter()
            .map(|x| MatrixCell::of(x, c.rounds.get(x.round as usize).is_some_and(|r| r.retest)))
            .collect::<Result<Vec<_>>>()?;
        Ok(MatrixSection {
            config,
            rule,
            ranks: c.ranks,
            hosts: c.hosts.clone(),
            topology,
            sizes,
            timers: c
                .timers
                .iter()
                .map(|t| RankTimer {
                    min_overhead_ns: t.min_overhead_ns,
                    resolution_ns: t.resolution_ns,
                })
                .collect(),
            rounds: c.rounds,
            cells,
            fits,
            verdicts: allpairs::merge_sizes(per_size),
        })
    }

    /// The median one-way time (us) of every cell of `size` in the main passes, as an
    /// `n x n` matrix by `[source][dest]` (`None`: not measured; the diagonal never is).
    pub fn medians(&self, size: u64) -> Vec<Vec<Option<f64>>> {
        let n = self.ranks as usize;
        let mut m = vec![vec![None; n]; n];
        let obs = observations(
            self.cells
                .iter()
                .filter(|x| x.size == size && !x.retest)
                .map(|x| (x.source, x.dest, x.one_way_us_sorted())),
        );
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
