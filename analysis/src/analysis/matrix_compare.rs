//! Two all-pairs matrices compared cell by cell (beyond the seeds): the same machine before and
//! after maintenance, or two partitions measured the same way.
//!
//! For every size both documents measured and every cell `i -> j` present in both, the ratio
//! of the medians `B / A` of the cell's one-way times (every trial of the main passes, the
//! retests left out), with a 95 % percentile-bootstrap interval of that ratio
//! ([`inference::bootstrap_median_ratio_ci`], each side's trials resampled, a fixed seed per
//! cell so that a comparison is reproducible). A cell whose trials were not kept (rank 0
//! keeps summaries; `--raw all` writes the trials to files the comparison reads back) gets
//! the wider interval of its two medians' intervals instead ([`CellRatio::summaries`]). A cell is **slower** when its interval lies
//! above 1 and `B / A` is above [`SLOWER`], **faster** when the interval lies below 1 and
//! `B / A` is below [`FASTER`], and the **same** otherwise: the factors keep a real but small
//! change (a few per cent, which a long run makes significant) from being called one.
//!
//! Each document is one run: the intervals describe the variation of the trials within each
//! run, not that between runs (on a shared machine, far larger). A node's change is the
//! median ratio of the cells it takes part in (as source or dest), so that one slow partner
//! does not make a node look slow.

use crate::analysis::inference;
use crate::analysis::matrix::{self, CellSide, MatrixSection};
use commbench_core::method::allpairs::CellStats;
use commbench_core::stats::{self, Interval};
use commbench_core::transport::error::{Error, Result};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Ratio `B / A` above which a cell whose interval lies above 1 is called slower.
pub const SLOWER: f64 = 1.25;
/// Ratio `B / A` below which a cell whose interval lies below 1 is called faster.
pub const FASTER: f64 = 0.8;

/// What a cell did from A to B.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Change {
    /// Interval above 1 and ratio above [`SLOWER`].
    Slower,
    /// Interval below 1 and ratio below [`FASTER`].
    Faster,
    /// Neither.
    Same,
}

/// One cell in both documents.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CellRatio {
    /// The timing source.
    pub source: u32,
    /// The echoing dest.
    pub dest: u32,
    /// Median one-way time in A, us.
    pub a_us: f64,
    /// Median one-way time in B, us.
    pub b_us: f64,
    /// `b_us / a_us`.
    pub ratio: f64,
    /// 95 % bootstrap interval of the ratio (`None`: the bootstrap could not be made, a zero
    /// median on both sides); with `summaries`, the interval from the two medians' intervals.
    pub ci95: Option<Interval>,
    /// A side kept no trials to resample (`--raw suspects` or `none`, and no raw files
    /// found): `ci95` runs from B's lowest median over A's highest to B's highest over A's
    /// lowest, which covers the ratio at least 90 % of the time (both 95 % intervals hold).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub summaries: bool,
    /// Trials of A and of B.
    pub trials: (usize, usize),
    /// Slower, faster or the same.
    pub change: Change,
}

impl CellRatio {
    /// Whether the cell changed (slower or faster).
    pub fn flagged(&self) -> bool {
        self.change != Change::Same
    }
}

/// One rank's cells at one size.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodeRatio {
    /// The rank.
    pub rank: u32,
    /// Its host in A.
    pub host: String,
    /// Median `B / A` of the cells it takes part in.
    pub ratio: f64,
    /// Cells it takes part in.
    pub cells: usize,
    /// Of those, cells slower.
    pub slower: usize,
    /// Of those, cells faster.
    pub faster: usize,
}

/// One size in both documents.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SizeComparison {
    /// Message size, bytes.
    pub size: u64,
    /// Every cell in both, by source then dest.
    pub cells: Vec<CellRatio>,
    /// Every rank with a cell, by rank.
    pub nodes: Vec<NodeRatio>,
    /// Cells slower.
    pub slower: usize,
    /// Cells faster.
    pub faster: usize,
    /// Cells the same.
    pub same: usize,
    /// Cells of A not in B.
    pub only_a: usize,
    /// Cells of B not in A.
    pub only_b: usize,
}

impl SizeComparison {
    /// The changed cells, the largest change (either way, on a log scale) first.
    pub fn worst(&self) -> Vec<&CellRatio> {
        let mut v: Vec<&CellRatio> = self.cells.iter().filter(|c| c.flagged()).collect();
        v.sort_by(|x, y| {
            y.ratio
                .ln()
                .abs()
                .total_cmp(&x.ratio.ln().abs())
                .then((x.source, x.dest).cmp(&(y.source, y.dest)))
        });
        v
    }
}

/// The comparison of two matrices.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MatrixComparison {
    /// Ranks of A and of B.
    pub ranks: (u32, u32),
    /// Whether the two documents place the ranks on different hosts.
    pub hosts_differ: bool,
    /// Bootstrap resamples per cell.
    pub resamples: usize,
    /// The sizes in both, in A's order.
    pub sizes: Vec<SizeComparison>,
    /// Sizes of A not in B.
    pub only_a: Vec<u64>,
    /// Sizes of B not in A.
    pub only_b: Vec<u64>,
}

impl MatrixComparison {
    /// Cells slower, faster and the same over every size.
    pub fn totals(&self) -> (usize, usize, usize) {
        self.sizes.iter().fold((0, 0, 0), |(s, f, e), x| {
            (s + x.slower, f + x.faster, e + x.same)
        })
    }
}

/// The cells of `size` in the main passes (`retest` false) or the retests, by
/// `(source, dest)`, every measurement of a cell merged ([`matrix::merged`]).
pub fn cells_at(m: &MatrixSection, size: u64, retest: bool) -> BTreeMap<(u32, u32), CellSide> {
    matrix::merged(
        m.cells
            .iter()
            .filter(|c| c.size == size && c.retest == retest),
    )
}

/// The interval of `B / A` from the two medians' 95 % intervals, when a side kept no trials
/// to resample: from B's lowest over A's highest to B's highest over A's lowest. Both
/// intervals hold at once with at least 90 % probability (0.95 squared), so this one covers
/// the ratio at least that often; it is wider than the bootstrap's.
fn summary_ratio_ci(a: &CellStats, b: &CellStats) -> Option<Interval> {
    let (al, ah) = (a.ci95_median.lo, a.ci95_median.hi);
    let (bl, bh) = (b.ci95_median.lo, b.ci95_median.hi);
    (al > 0.0 && ah.is_finite() && bl.is_finite() && bh.is_finite()).then(|| Interval {
        lo: bl / ah,
        hi: bh / al,
    })
}

/// A seed of its own for each cell, from the comparison's.
fn cell_seed(seed: u64, size: u64, source: u32, dest: u32) -> u64 {
    let mut h = seed ^ 0x9e37_79b9_7f4a_7c15;
    for x in [size, u64::from(source), u64::from(dest)] {
        h = (h ^ x).wrapping_mul(0x0100_0000_01b3).rotate_left(29);
    }
    h
}

/// What the ratio and its interval say.
fn change(ratio: f64, ci: Option<Interval>) -> Change {
    match ci {
        Some(ci) if ci.lo > 1.0 && ratio > SLOWER => Change::Slower,
        Some(ci) if ci.hi < 1.0 && ratio < FASTER => Change::Faster,
        _ => Change::Same,
    }
}

/// The median of `v` (any order).
fn median_of(mut v: Vec<f64>) -> f64 {
    stats::sort_samples(&mut v);
    stats::median(&v).unwrap_or(f64::NAN)
}

/// One size of both.
fn compare_size(
    a: &MatrixSection,
    b: &MatrixSection,
    size: u64,
    resamples: usize,
    seed: u64,
) -> SizeComparison {
    let (ta, tb) = (cells_at(a, size, false), cells_at(b, size, false));
    let mut cells = Vec::new();
    for (&(source, dest), xa) in &ta {
        let Some(xb) = tb.get(&(source, dest)) else {
            continue;
        };
        let (ma, mb) = (xa.stats.median, xb.stats.median);
        let ratio = mb / ma;
        let summaries = xa.trials.is_empty() || xb.trials.is_empty();
        let ci = if summaries {
            summary_ratio_ci(&xa.stats, &xb.stats)
        } else {
            inference::bootstrap_median_ratio_ci(
                &xb.trials,
                &xa.trials,
                resamples,
                0.95,
                cell_seed(seed, size, source, dest),
            )
        };
        cells.push(CellRatio {
            source,
            dest,
            a_us: ma,
            b_us: mb,
            ratio,
            ci95: ci,
            summaries,
            trials: (xa.stats.n as usize, xb.stats.n as usize),
            change: change(ratio, ci),
        });
    }
    let ranks = a.ranks.max(b.ranks);
    let nodes = (0..ranks)
        .filter_map(|r| {
            let mine: Vec<&CellRatio> = cells
                .iter()
                .filter(|c| c.source == r || c.dest == r)
                .collect();
            if mine.is_empty() {
                return None;
            }
            let count = |k: Change| mine.iter().filter(|c| c.change == k).count();
            Some(NodeRatio {
                rank: r,
                host: a
                    .hosts
                    .get(r as usize)
                    .or_else(|| b.hosts.get(r as usize))
                    .cloned()
                    .unwrap_or_default(),
                ratio: median_of(mine.iter().map(|c| c.ratio).collect()),
                cells: mine.len(),
                slower: count(Change::Slower),
                faster: count(Change::Faster),
            })
        })
        .collect();
    let count = |k: Change| cells.iter().filter(|c| c.change == k).count();
    SizeComparison {
        size,
        slower: count(Change::Slower),
        faster: count(Change::Faster),
        same: count(Change::Same),
        only_a: ta.keys().filter(|k| !tb.contains_key(k)).count(),
        only_b: tb.keys().filter(|k| !ta.contains_key(k)).count(),
        cells,
        nodes,
    }
}

/// Compare matrix `b` against matrix `a` at every size both measured, with `resamples`
/// bootstrap resamples per cell (1 to [`inference::MAX_BOOTSTRAP_ITERS`]) from `seed`.
///
/// Errors when no size is in both, or no cell of a common size is.
pub fn compare(
    a: &MatrixSection,
    b: &MatrixSection,
    resamples: usize,
    seed: u64,
) -> Result<MatrixComparison> {
    if resamples == 0 || resamples > inference::MAX_BOOTSTRAP_ITERS {
        return Err(Error::Invalid(format!(
            "{resamples} bootstrap resamples: must be 1 to {}",
            inference::MAX_BOOTSTRAP_ITERS
        )));
    }
    let common: Vec<u64> = a
        .sizes
        .iter()
        .copied()
        .filter(|s| b.sizes.contains(s))
        .collect();
    if common.is_empty() {
        return Err(Error::Invalid(format!(
            "the two matrices share no size (A: {}; B: {})",
            list(&a.sizes),
            list(&b.sizes)
        )));
    }
    let sizes: Vec<SizeComparison> = common
        .iter()
        .map(|&s| compare_size(a, b, s, resamples, seed))
        .collect();
    if sizes.iter().all(|s| s.cells.is_empty()) {
        return Err(Error::Invalid(format!(
            "the two matrices share no cell at the sizes both measured ({})",
            list(&common)
        )));
    }
    let n = a.hosts.len().min(b.hosts.len());
    Ok(MatrixComparison {
        ranks: (a.ranks, b.ranks),
        hosts_differ: a.hosts.len() != b.hosts.len() || a.hosts[..n] != b.hosts[..n],
        resamples,
        sizes,
        only_a: a
            .sizes
            .iter()
            .copied()
            .filter(|s| !b.sizes.contains(s))
            .collect(),
        only_b: b
            .sizes
            .iter()
            .copied()
            .filter(|s| !a.sizes.contains(s))
            .collect(),
    })
}

/// `8, 65536`.
fn list(v: &[u64]) -> String {
    v.iter().map(u64::to_string).collect::<Vec<_>>().join(", ")
}

/// Matrices of known cells for the unit tests of the comparison and the renderers.
#[cfg(test)]
pub(crate) mod synthetic {
    use crate::analysis::allpairs::Rule;
    use crate::analysis::matrix::MatrixSection;
    use commbench_core::method::allpairs::{
        AllPairsCollected, AllPairsConfig, CellRecord, Pair, RoundRaw,
    };
    use commbench_core::method::engine::RawPoint;

    /// One-way time of a healthy cell at `size`, us.
    pub(crate) fn base_us(size: u64) -> f64 {
        2.0 + size as f64 * 0.001
    }

    /// A matrix of `hosts.len()` ranks at `sizes`: every cell `trials` trials of about
    /// [`base_us`] (a deterministic spread of 1 %, `seed` picks it), cells with an end in
    /// `slow` times `factor`. Pairs across hosts take 1.5 times as long as pairs on a host.
    pub(crate) fn section(
        hosts: &[&str],
        sizes: &[u64],
        slow: &[u32],
        factor: f64,
        seed: u64,
    ) -> MatrixSection {
        let n = hosts.len() as u32;
        let mut c = AllPairsCollected {
            ranks: n,
            hosts: hosts.iter().map(|h| h.to_string()).collect(),
            ..AllPairsCollected::default()
        };
        let trials = 21u64;
        for &size in sizes {
            let round = c.rounds.len() as u32;
            let mut pairs = Vec::new();
            for i in 0..n {
                for j in (0..n).filter(|&j| j != i) {
                    if i < j {
                        pairs.push(Pair {
                            first: i,
                            second: j,
                            both: true,
                        });
                    }
                    let mut t = base_us(size);
                    if hosts[i as usize] != hosts[j as usize] {
                        t *= 1.5;
                    }
                    if slow.contains(&i) || slow.contains(&j) {
                        t *= factor;
                    }
                    let trial_ns = (0..trials)
                        .map(|k| {
                            let h = (k + 1)
                                .wrapping_mul(0x9e37_79b9_7f4a_7c15)
                                .wrapping_add(seed ^ u64::from(i * 1000 + j))
                                .rotate_left(23)
                                .wrapping_mul(0xbf58_476d_1ce4_e5b9);
                            let u = (h >> 11) as f64 / (1u64 << 53) as f64;
                            (2000.0 * t * (1.0 + 0.01 * u)).round() as i64
                        })
                        .collect();
                    let point = RawPoint {
                        pattern: "pingpong".into(),
                        size,
                        npp: 1,
                        trips_per_iteration: 2,
                        trial_ns,
                        ..RawPoint::default()
                    };
                    c.cells
                        .push(CellRecord::of((i, j, round), false, point, true).expect("trials"));
                }
            }
            c.rounds.push(RoundRaw {
                size,
                pass: 0,
                index: 0,
                retest: false,
                start_ns: 1000 * u64::from(round),
                end_ns: 1000 * u64::from(round) + 700,
                pairs,
                lost_cells: Vec::new(),
                lost_ranks: Vec::new(),
            });
        }
        MatrixSection::build(c, AllPairsConfig::default(), Rule::default()).expect("a matrix")
    }
}

#[cfg(test)]
mod tests {
    use super::synthetic::section;
    use super::*;
    use crate::analysis::matrix::MatrixCell;
    use commbench_core::stats::Xoshiro256;

    /// `m` with every cell's trials dropped, as rank 0 keeps them under `--raw none`.
    fn summarised(mut m: MatrixSection) -> MatrixSection {
        m.cells.iter_mut().for_each(|c| c.trial_ns.clear());
        m
    }

    #[test]
    fn summaries_alone_compare_with_a_wider_interval_that_still_finds_a_slow_node() {
        let hosts = ["a0", "a1", "b0", "b1", "c0"];
        for seed in 0..20u64 {
            let mut rng = Xoshiro256::new(seed);
            let slow = rng.below(hosts.len()) as u32;
            let factor = 1.5 + 3.0 * rng.unit();
            let a = section(&hosts, &[8, 4096], &[], 1.0, seed);
            let b = section(&hosts, &[8, 4096], &[slow], factor, seed + 100);
            let full = compare(&a, &b, 500, 7).unwrap();
            let bare = compare(&summarised(a), &summarised(b), 500, 7).unwrap();
            for (f, s) in full.sizes.iter().zip(&bare.sizes) {
                for (x, y) in f.cells.iter().zip(&s.cells) {
                    assert!(!x.summaries && y.summaries);
                    assert_eq!((x.a_us, x.b_us), (y.a_us, y.b_us));
                    let (cx, cy) = (x.ci95.unwrap(), y.ci95.unwrap());
                    // The summaries' interval holds the bootstrap's: wider, never narrower.
                    assert!(cy.lo <= cx.lo * (1.0 + 1e-9) && cy.hi >= cx.hi * (1.0 - 1e-9));
                    let touches = x.source == slow || x.dest == slow;
                    let want = if touches {
                        Change::Slower
                    } else {
                        Change::Same
                    };
                    assert_eq!(y.change, want, "seed {seed}: {y:?}");
                }
            }
        }
    }

    #[test]
    fn a_cell_measured_in_several_passes_without_trials_merges_its_summaries() {
        let mut rng = Xoshiro256::new(5);
        for _ in 0..100 {
            let passes = 2 + rng.below(5);
            let mut m = section(&["h0", "h1", "h2"], &[8], &[], 1.0, rng.next_u64());
            let first: Vec<MatrixCell> = m.cells.clone();
            for p in 1..passes {
                m.cells.extend(first.iter().map(|c| {
                    let mut c = c.clone();
                    let k = 0.5 + 2.0 * rng.unit();
                    c.trial_ns
                        .iter_mut()
                        .for_each(|t| *t = (*t as f64 * k) as i64);
                    c.stats = CellStats::of_sorted(&c.one_way_us_sorted()).unwrap();
                    c.round += p as u32;
                    c
                }));
            }
            let pooled = cells_at(&m, 8, false);
            let m = summarised(m);
            let merged = cells_at(&m, 8, false);
            for (k, side) in &merged {
                let mine: Vec<&MatrixCell> = m
                    .cells
                    .iter()
                    .filter(|c| (c.source, c.dest) == *k)
                    .collect();
                assert_eq!(mine.len(), passes);
                let mut med: Vec<f64> = mine.iter().map(|c| c.stats.median).collect();
                stats::sort_samples(&mut med);
                assert_eq!(Some(side.stats.median), stats::median(&med));
                assert_eq!(side.stats.n, pooled[k].stats.n);
                assert!(side.trials.is_empty() && !pooled[k].trials.is_empty());
                for c in mine {
                    assert!(side.stats.ci95_median.lo <= c.stats.ci95_median.lo);
                    assert!(side.stats.ci95_median.hi >= c.stats.ci95_median.hi);
                    assert!(side.stats.max >= c.stats.max && side.stats.min <= c.stats.min);
                }
            }
        }
    }

    const HOSTS: [&str; 6] = ["a0", "a0", "b1", "b1", "c2", "c2"];

    #[test]
    fn a_matrix_against_itself_is_unchanged() {
        let a = section(&HOSTS, &[8, 4096], &[], 1.0, 1);
        let c = compare(&a, &a, 500, 7).unwrap();
        assert_eq!(c.totals(), (0, 0, 2 * 30));
        for s in &c.sizes {
            assert_eq!(s.cells.len(), 30);
            for x in &s.cells {
                assert_eq!(x.ratio, 1.0);
                assert!(x.ci95.unwrap().contains(1.0), "{x:?}");
            }
            assert!(s.nodes.iter().all(|n| n.ratio == 1.0 && n.cells == 10));
        }
    }

    #[test]
    fn a_slower_node_flags_its_cells_and_no_other() {
        let a = section(&HOSTS, &[8, 4096], &[], 1.0, 1);
        let b = section(&HOSTS, &[8, 4096], &[4], 2.0, 2);
        let c = compare(&a, &b, 500, 7).unwrap();
        for s in &c.sizes {
            let flagged: Vec<(u32, u32)> = s
                .cells
                .iter()
                .filter(|x| x.flagged())
                .map(|x| (x.source, x.dest))
                .collect();
            let want: Vec<(u32, u32)> = s
                .cells
                .iter()
                .filter(|x| x.source == 4 || x.dest == 4)
                .map(|x| (x.source, x.dest))
                .collect();
            assert_eq!(flagged, want);
            assert!(s.cells.iter().all(|x| x.change != Change::Faster));
            assert_eq!((s.slower, s.faster, s.same), (10, 0, 20));
            let four = s.nodes.iter().find(|n| n.rank == 4).unwrap();
            assert!((four.ratio - 2.0).abs() < 0.05, "{four:?}");
            assert_eq!((four.slower, four.host.as_str()), (10, "c2"));
            // Every other node has two cells with node 4 among its ten: its median is 1.
            for n in s.nodes.iter().filter(|n| n.rank != 4) {
                assert!((n.ratio - 1.0).abs() < 0.02, "{n:?}");
                assert_eq!(n.slower, 2);
            }
            // Worst first: the ten cells of node 4, then nothing.
            assert_eq!(s.worst().len(), 10);
        }
        // The other way round, the same cells are faster.
        let back = compare(&b, &a, 500, 7).unwrap();
        assert_eq!(back.totals(), (0, 20, 40));
    }

    #[test]
    fn a_small_change_is_not_flagged_however_sure() {
        let a = section(&HOSTS, &[8], &[], 1.0, 1);
        let b = section(&HOSTS, &[8], &[1], 1.15, 1);
        let c = compare(&a, &b, 500, 7).unwrap();
        let s = &c.sizes[0];
        assert_eq!((s.slower, s.faster), (0, 0));
        // Its interval excludes 1 all the same.
        let x = s.cells.iter().find(|x| x.source == 1).unwrap();
        assert!(x.ci95.unwrap().lo > 1.0, "{x:?}");
    }

    #[test]
    fn sizes_and_cells_of_one_side_only() {
        let a = section(&HOSTS, &[8, 64], &[], 1.0, 1);
        let b = section(&HOSTS[..4], &[64, 1024], &[], 1.0, 3);
        let c = compare(&a, &b, 200, 7).unwrap();
        assert_eq!(c.sizes.len(), 1);
        assert_eq!((c.only_a.clone(), c.only_b.clone()), (vec![8], vec![1024]));
        assert_eq!(c.ranks, (6, 4));
        let s = &c.sizes[0];
        assert_eq!((s.cells.len(), s.only_a, s.only_b), (12, 18, 0));
        assert!(c.hosts_differ);
        let none = section(&HOSTS, &[16], &[], 1.0, 1);
        let e = compare(&a, &none, 200, 7).unwrap_err().to_string();
        assert!(e.contains("share no size") && e.contains("8, 64"), "{e}");
        assert!(compare(&a, &a, 0, 7).is_err());
    }

    #[test]
    fn the_seed_makes_it_reproducible() {
        let a = section(&HOSTS, &[8], &[], 1.0, 1);
        let b = section(&HOSTS, &[8], &[], 1.0, 5);
        assert_eq!(
            compare(&a, &b, 300, 9).unwrap(),
            compare(&a, &b, 300, 9).unwrap()
        );
    }

    #[test]
    fn change_needs_the_interval_and_the_factor() {
        let ci = |lo, hi| Some(Interval { lo, hi });
        assert_eq!(change(1.5, ci(1.3, 1.7)), Change::Slower);
        // Significant but small: the same.
        assert_eq!(change(1.1, ci(1.05, 1.15)), Change::Same);
        // Large but not significant: the same.
        assert_eq!(change(1.5, ci(0.9, 2.0)), Change::Same);
        assert_eq!(change(0.5, ci(0.4, 0.6)), Change::Faster);
        assert_eq!(change(0.85, ci(0.8, 0.9)), Change::Same);
        assert_eq!(change(2.0, None), Change::Same);
    }

    #[test]
    fn seeds_differ_per_cell() {
        let s = [
            cell_seed(1, 8, 0, 1),
            cell_seed(1, 8, 1, 0),
            cell_seed(1, 64, 0, 1),
            cell_seed(2, 8, 0, 1),
        ];
        for i in 0..s.len() {
            for j in i + 1..s.len() {
                assert_ne!(s[i], s[j]);
            }
        }
    }
}
