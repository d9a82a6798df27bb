//! Attribution: explanations of slow cells tested most general first (dimension, node,
//! link) on each cell's excess over a healthy cell of its class.

use super::geometry::{self, Geometry};
use super::{Estimate, Obs, Suspect};
use commbench_core::stats::{median, median_ci_ranks, quantile, sort_samples};
use std::collections::BTreeMap;

/// Most baseline <-> explanation rounds.
const ROUNDS: usize = 6;

/// The low quantile used for baselines and for "most cells slow" (the lower quartile).
const LOW_Q: f64 = 0.25;

/// Fewest unexplained cells of a class for its own quantile as baseline.
const MIN_CLEAN: usize = 3;

/// Fewest cells a node or link test needs.
const MIN_TESTED: usize = 2;

/// Least rate of stray slow cells (contention, noise) a node or link test assumes.
const STRAY_FLOOR: f64 = 0.01;

/// Chance, shared by the candidates of a level, that stray slow cells alone pass a node or
/// link test.
const ALPHA: f64 = 1e-3;

/// Fewest contrasts a dimension test needs.
const MIN_CONTRASTS: usize = 3;

/// What [`explain`] works on.
pub(super) struct Input<'a> {
    pub geo: &'a Geometry,
    pub n: u32,
    pub obs: &'a [Obs],
    /// Polish z per cell.
    pub z: &'a [f64],
    pub rule_z: f64,
    /// Log excess over which a cell is slow.
    pub thr: f64,
    /// Log excess over which a cell is slower than the noise: what most of a node's or a
    /// channel's cells must show, while its strongest class must be over [`Input::thr`] (a
    /// node or link adds a fixed time to each of its pairs, a smaller share of a longer
    /// pair's time).
    pub thr_low: f64,
    /// Scale of the z.
    pub scale: f64,
}

/// Accepted suspects, the final per-class baselines (ln us) and per-cell excess.
pub(super) struct Explained {
    pub suspects: Vec<Suspect>,
    pub baseline: Vec<Option<f64>>,
    pub excess: Vec<f64>,
}

/// A candidate explanation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Cand {
    /// Every pair crossing this hypercube dimension.
    Dim(u32),
    /// A node: pairs with it as an end (and, on the hypercube, pairs forwarded through it).
    Node(u32),
    /// A hypercube channel `(lower end, dimension)`, both directions.
    Channel(u32, u32),
    /// A pair of ranks (hosts topology), lower first.
    Pair(u32, u32),
}

impl Cand {
    /// The candidate a suspect names, `None` for one this topology cannot hold.
    pub(super) fn from_suspect(s: &Suspect, geo: &Geometry) -> Option<Cand> {
        match (s.kind.as_str(), s.nodes.as_slice(), s.dimension, geo.cube()) {
            ("dimension", _, Some(k), Some(d)) if k < d => Some(Cand::Dim(k)),
            ("node", [k], _, _) => Some(Cand::Node(*k)),
            ("link", [a, b], Some(k), Some(d)) if k < d && a ^ b == 1 << k => {
                Some(Cand::Channel(*a.min(b), k))
            }
            ("link", [a, b], None, None) if a != b => Some(Cand::Pair(*a.min(b), *a.max(b))),
            _ => None,
        }
    }

    /// Kind, nodes and dimension as a [`Suspect`] writes them.
    pub(super) fn parts(self) -> (&'static str, Vec<u32>, Option<u32>) {
        match self {
            Cand::Dim(k) => ("dimension", vec![], Some(k)),
            Cand::Node(k) => ("node", vec![k], None),
            Cand::Channel(l, k) => ("link", vec![l, l ^ (1 << k)], Some(k)),
            Cand::Pair(a, b) => ("link", vec![a, b], None),
        }
    }

    /// Whether the fault would make the cell (i, j) slow.
    pub(super) fn slows(self, i: u32, j: u32) -> bool {
        match self {
            Cand::Dim(k) => geometry::crosses(i, j, k),
            Cand::Node(k) => i == k || j == k,
            Cand::Channel(l, k) => geometry::channels(i, j).contains(&(l, k)),
            Cand::Pair(a, b) => (i.min(j), i.max(j)) == (a, b),
        }
    }

    /// Whether the fault explains the cell (i, j): it slows it, or (a hypercube node) the
    /// round trip is forwarded through it.
    pub(super) fn explains(self, geo: &Geometry, i: u32, j: u32) -> bool {
        match self {
            Cand::Node(k) if geo.cube().is_some() => {
                self.slows(i, j) || geometry::forwarders(i, j).contains(&k)
            }
            _ => self.slows(i, j),
        }
    }
}

/// An accepted candidate: the cells it explains, the cells its test used and their values
/// (log excess, or contrast for a dimension).
#[derive(Debug, Clone)]
struct Accepted {
    cand: Cand,
    cover: Vec<usize>,
    values: Vec<f64>,
}

/// Cell lists per rank, per channel and per class.
struct Index {
    /// Cells with the rank as an end.
    end: Vec<Vec<usize>>,
    /// Cells forwarded through the rank (hypercube).
    through: Vec<Vec<usize>>,
    /// Cells per channel used, in channel order (hypercube).
    channels: Vec<((u32, u32), Vec<usize>)>,
    /// Cells per class.
    class: Vec<Vec<usize>>,
}

fn build_index(inp: &Input<'_>) -> Index {
    let n = inp.n as usize;
    let mut end = vec![Vec::new(); n];
    let mut through = vec![Vec::new(); n];
    let mut class = vec![Vec::new(); inp.geo.class_count()];
    let mut chan: BTreeMap<(u32, u32), Vec<usize>> = BTreeMap::new();
    for (c, o) in inp.obs.iter().enumerate() {
        end[o.i as usize].push(c);
        end[o.j as usize].push(c);
        class[o.class].push(c);
        if inp.geo.cube().is_some() {
            for f in geometry::forwarders(o.i, o.j)
                .into_iter()
                .filter(|&f| f < inp.n)
            {
                through[f as usize].push(c);
            }
            for ch in geometry::channels(o.i, o.j) {
                chan.entry(ch).or_default().push(c);
            }
        }
    }
    Index {
        end,
        through,
        channels: chan.into_iter().collect(),
        class,
    }
}

/// Lower quartile of `v` (any order); `None` when empty.
fn low_q(mut v: Vec<f64>) -> Option<f64> {
    sort_samples(&mut v);
    quantile(&v, LOW_Q)
}

/// Repeated-median line (Siegel 1982) through points with distinct x: `(slope, intercept)`.
fn repeated_median(p: &[(f64, f64)]) -> Option<(f64, f64)> {
    if p.len() < 2 {
        return None;
    }
    let mut slopes = Vec::with_capacity(p.len());
    for a in p {
        let mut s: Vec<f64> = p
            .iter()
            .filter(|b| b.0 != a.0)
            .map(|b| (b.1 - a.1) / (b.0 - a.0))
            .collect();
        sort_samples(&mut s);
        slopes.push(median(&s)?);
    }
    sort_samples(&mut slopes);
    let slope = median(&slopes)?;
    let mut ic: Vec<f64> = p.iter().map(|a| a.1 - slope * a.0).collect();
    sort_samples(&mut ic);
    Some((slope, median(&ic)?))
}

/// Healthy log time per class: the lower quartile of the class's cells not yet explained
/// (of all its cells when too few are left); on the hypercube, no more than the repeated
/// median line through those quartiles (in us against hops), which also stands in for a
/// class with too few unexplained cells.
fn baseline(inp: &Input<'_>, idx: &Index, explained: &[bool]) -> Vec<Option<f64>> {
    let nc = idx.class.len();
    let (mut q, mut all) = (vec![None; nc], vec![None; nc]);
    for (c, cells) in idx.class.iter().enumerate() {
        all[c] = low_q(cells.iter().map(|&k| inp.obs[k].y).collect());
        let clean: Vec<f64> = cells
            .iter()
            .filter(|&&k| !explained[k])
            .map(|&k| inp.obs[k].y)
            .collect();
        if !clean.is_empty() && clean.len() >= MIN_CLEAN.min(cells.len()) {
            q[c] = low_q(clean);
        }
    }
    if inp.geo.cube().is_none() {
        return q.iter().zip(&all).map(|(q, a)| q.or(*a)).collect();
    }
    let pts: Vec<(f64, f64)> = q
        .iter()
        .enumerate()
        .filter_map(|(c, v)| v.map(|v| ((c + 1) as f64, v.exp())))
        .collect();
    let line = repeated_median(&pts);
    (0..nc)
        .map(|c| {
            let l = line
                .map(|(s, b)| b + s * (c + 1) as f64)
                .filter(|t| *t > 0.0)
                .map(f64::ln);
            match (q[c], l) {
                (Some(q), Some(l)) => Some(q.min(l)),
                (Some(v), None) | (None, Some(v)) => Some(v),
                (None, None) => all[c],
            }
        })
        .collect()
}

/// Which cells the accepted candidates explain.
fn cover_mask(len: usize, acc: &[Accepted]) -> Vec<bool> {
    let mut m = vec![false; len];
    for a in acc {
        for &c in &a.cover {
            m[c] = true;
        }
    }
    m
}

/// Within-class contrast for dimension `k`: for each class of at most `hmax` hops, each
/// crossing cell's log time over the lower quartile of the non-crossing cells of the class
/// (cells in `removed` left out).
fn dim_contrast(inp: &Input<'_>, idx: &Index, k: u32, hmax: usize, removed: &[bool]) -> Vec<f64> {
    let mut values = Vec::new();
    for cells in idx.class.iter().take(hmax) {
        let (a, b): (Vec<usize>, Vec<usize>) = cells
            .iter()
            .filter(|&&c| !removed[c])
            .partition(|&&c| geometry::crosses(inp.obs[c].i, inp.obs[c].j, k));
        if a.is_empty() || b.len() < 2 {
            continue;
        }
        let Some(r) = low_q(b.iter().map(|&c| inp.obs[c].y).collect()) else {
            continue;
        };
        values.extend(a.iter().map(|&c| inp.obs[c].y - r));
    }
    values
}

/// Highest class (in hops) a dimension contrast uses: `2 (d - 1) / 3`, at least 1. In lower
/// classes most non-crossing cells cross no second slow dimension either, so the reference
/// quartile stays healthy with two slow dimensions.
fn contrast_classes(d: u32) -> usize {
    (2 * d.saturating_sub(1) / 3).max(1) as usize
}

/// Dimensions, greedily: the one with the largest lower-quartile contrast above the
/// threshold first, its crossing cells then left out of the next tests.
fn dims(inp: &Input<'_>, idx: &Index) -> Vec<Accepted> {
    let Some(d) = inp.geo.cube() else {
        return Vec::new();
    };
    let hmax = contrast_classes(d);
    let mut removed = vec![false; inp.obs.len()];
    let mut out: Vec<Accepted> = Vec::new();
    loop {
        let mut best: Option<(f64, u32, Vec<f64>)> = None;
        for k in (0..d).filter(|k| !out.iter().any(|a| a.cand == Cand::Dim(*k))) {
            let v = dim_contrast(inp, idx, k, hmax, &removed);
            if v.len() < MIN_CONTRASTS {
                continue;
            }
            let stat = low_q(v.clone()).unwrap_or(f64::NEG_INFINITY);
            if stat > inp.thr && best.as_ref().map_or(true, |b| stat > b.0) {
                best = Some((stat, k, v));
            }
        }
        let Some((_, k, values)) = best else { break };
        let cover: Vec<usize> = (0..inp.obs.len())
            .filter(|&c| geometry::crosses(inp.obs[c].i, inp.obs[c].j, k))
            .collect();
        for &c in &cover {
            removed[c] = true;
        }
        out.push(Accepted {
            cand: Cand::Dim(k),
            cover,
            values,
        });
    }
    out
}

/// One option of a greedy level: the candidate, the cells its test uses, subsets of them
/// that must each be mostly slow too, and the cells it explains.
struct Option_<'a> {
    cand: Cand,
    test: &'a [usize],
    subsets: Vec<Vec<usize>>,
    cover: Vec<usize>,
}

/// The statistic of an option: the lower quartile of excess over its test cells not yet
/// explained, or, if lower, over any of its subsets (minus infinity when a subset has no
/// cell left: what it stands for cannot be ruled out). Also
/// returns the test cells' excess. `None` when the test has too few cells.
fn option_stat(o: &Option_<'_>, x: &[f64], removed: &[bool]) -> Option<(f64, Vec<f64>)> {
    let live = |cells: &[usize]| -> Vec<f64> {
        cells
            .iter()
            .filter(|&&c| !removed[c])
            .map(|&c| x[c])
            .collect()
    };
    let v = live(o.test);
    if v.len() < MIN_TESTED {
        return None;
    }
    let mut stat = low_q(v.clone())?;
    for sub in &o.subsets {
        let w = live(sub);
        stat = stat.min(low_q(w).unwrap_or(f64::NEG_INFINITY));
    }
    Some((stat, v))
}

/// The largest median excess of an option's test cells not yet explained within one class
/// (minus infinity when none is left).
fn strongest_class(inp: &Input<'_>, o: &Option_<'_>, x: &[f64], removed: &[bool]) -> f64 {
    let mut by: BTreeMap<usize, Vec<f64>> = BTreeMap::new();
    for &c in o.test.iter().filter(|&&c| !removed[c]) {
        by.entry(inp.obs[c].class).or_default().push(x[c]);
    }
    by.into_values()
        .filter_map(|mut v| {
            sort_samples(&mut v);
            median(&v)
        })
        .fold(f64::NEG_INFINITY, f64::max)
}

/// Probability that `X >= s` for `X ~ Binomial(m, p)`, summed in log space.
fn binomial_tail(m: usize, s: usize, p: f64) -> f64 {
    if s == 0 || p >= 1.0 {
        return 1.0;
    }
    if s > m || p <= 0.0 {
        return 0.0;
    }
    let (lp, lq) = (p.ln(), (1.0 - p).ln());
    // ln C(m, s), then each next term from the previous.
    let mut ln_c: f64 = (1..=s).map(|i| ((m - s + i) as f64 / i as f64).ln()).sum();
    let mut terms = Vec::with_capacity(m - s + 1);
    for k in s..=m {
        terms.push(ln_c + k as f64 * lp + (m - k) as f64 * lq);
        ln_c += ((m - k) as f64 / (k + 1) as f64).ln();
    }
    let top = terms.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    (top + terms.iter().map(|t| (t - top).exp()).sum::<f64>().ln())
        .min(0.0)
        .exp()
}

/// Whether the `values` (log excess of an option's test cells) hold more slow cells than
/// stray slow cells would give by chance. A cell counts as slow above `thr`, or, for an
/// option much slower than that, within a factor of 2 of the option's median excess: noise
/// that doubles a few cells (ranks sharing a CPU) does not make a hundredfold slower node
/// look like chance. The rate of stray slow cells is that among the other cells still
/// unexplained (`live_sorted`, the excess of every live cell, sorted, the option's own
/// included), at least [`STRAY_FLOOR`]; the binomial chance of as many slow cells must stay
/// under [`ALPHA`] shared by the `options` of the level.
fn beyond_chance(values: &[f64], thr: f64, live_sorted: &[f64], options: usize) -> bool {
    let mut own = values.to_vec();
    sort_samples(&mut own);
    let level = median(&own).map_or(thr, |m| (m - std::f64::consts::LN_2).max(thr));
    let above = |v: &[f64]| v.len() - v.partition_point(|x| *x <= level);
    let slow = above(&own);
    let others = live_sorted.len().saturating_sub(values.len());
    let p = if others == 0 {
        STRAY_FLOOR
    } else {
        (above(live_sorted).saturating_sub(slow) as f64 / others as f64).max(STRAY_FLOOR)
    };
    binomial_tail(values.len(), slow, p) <= ALPHA / options.max(1) as f64
}

/// Greedy acceptance by [`option_stat`]: the largest above the threshold whose slow cells
/// are [`beyond_chance`] first, then its cells leave later tests.
fn greedy(opts: &[Option_<'_>], inp: &Input<'_>, x: &[f64], removed: &mut [bool]) -> Vec<Accepted> {
    let thr = inp.thr_low;
    let mut done = vec![false; opts.len()];
    let mut out = Vec::new();
    loop {
        let mut live_sorted: Vec<f64> = x
            .iter()
            .zip(removed.iter())
            .filter(|(_, r)| !**r)
            .map(|(v, _)| *v)
            .collect();
        sort_samples(&mut live_sorted);
        let mut best: Option<(f64, usize, Vec<f64>)> = None;
        for (k, o) in opts.iter().enumerate().filter(|(k, _)| !done[*k]) {
            let Some((stat, v)) = option_stat(o, x, removed) else {
                continue;
            };
            if stat > thr
                && strongest_class(inp, o, x, removed) > inp.thr
                && best.as_ref().map_or(true, |b| stat > b.0)
                && beyond_chance(&v, thr, &live_sorted, opts.len())
            {
                best = Some((stat, k, v));
            }
        }
        let Some((_, k, values)) = best else { break };
        done[k] = true;
        for &c in &opts[k].cover {
            removed[c] = true;
        }
        let (cand, cover) = (opts[k].cand, opts[k].cover.clone());
        out.push(Accepted {
            cand,
            cover,
            values,
        });
    }
    out
}

/// For each channel of hypercube node `k`, its end cells whose round trip does not use that
/// channel: the route from `k` leaves over the lowest dimension where the ends differ, the
/// route back arrives over the highest.
fn without_each_channel(inp: &Input<'_>, end: &[usize]) -> Vec<Vec<usize>> {
    let Some(d) = inp.geo.cube() else {
        return Vec::new();
    };
    (0..d)
        .map(|dim| {
            end.iter()
                .copied()
                .filter(|&c| {
                    let diff = inp.obs[c].i ^ inp.obs[c].j;
                    let (lo, hi) = (diff.trailing_zeros(), 31 - diff.leading_zeros());
                    lo != dim && hi != dim
                })
                .collect()
        })
        .collect()
}

/// Nodes: most of a node's end cells slow, and on the hypercube still most of them without
/// the cells over any one of its channels (a slow channel slows up to half of an end node's
/// pairs, more once other explanations took some away; a slow node slows them all). A
/// hypercube node also explains the cells forwarded through it.
fn nodes(inp: &Input<'_>, idx: &Index, x: &[f64], removed: &mut [bool]) -> Vec<Accepted> {
    let opts: Vec<Option_<'_>> = (0..inp.n as usize)
        .map(|k| Option_ {
            cand: Cand::Node(k as u32),
            test: &idx.end[k],
            subsets: without_each_channel(inp, &idx.end[k]),
            cover: idx.end[k].iter().chain(&idx.through[k]).copied().collect(),
        })
        .collect();
    greedy(&opts, inp, x, removed)
}

/// Hypercube channels: most of the cells routed over the channel slow.
fn channels(inp: &Input<'_>, idx: &Index, x: &[f64], removed: &mut [bool]) -> Vec<Accepted> {
    let opts: Vec<Option_<'_>> = idx
        .channels
        .iter()
        .map(|((l, k), cells)| Option_ {
            cand: Cand::Channel(*l, *k),
            test: cells,
            subsets: Vec::new(),
            cover: cells.clone(),
        })
        .collect();
    greedy(&opts, inp, x, removed)
}

/// Host pairs: every measurement of the pair (either end timing) slow and with z over the
/// rule's.
fn pairs(inp: &Input<'_>, x: &[f64], removed: &mut [bool]) -> Vec<Accepted> {
    let mut by: BTreeMap<(u32, u32), Vec<usize>> = BTreeMap::new();
    for (c, o) in inp.obs.iter().enumerate().filter(|(c, _)| !removed[*c]) {
        by.entry((o.i.min(o.j), o.i.max(o.j))).or_default().push(c);
    }
    let mut out = Vec::new();
    for ((a, b), cells) in by {
        if cells
            .iter()
            .all(|&c| x[c] > inp.thr && inp.z[c] > inp.rule_z)
        {
            for &c in &cells {
                removed[c] = true;
            }
            let values = cells.iter().map(|&c| x[c]).collect();
            out.push(Accepted {
                cand: Cand::Pair(a, b),
                cover: cells,
                values,
            });
        }
    }
    out
}

/// One pass of the node and link levels after the dimensions, on excess `x`.
fn levels(inp: &Input<'_>, idx: &Index, dims: &[Accepted], x: &[f64]) -> Vec<Accepted> {
    let mut removed = cover_mask(inp.obs.len(), dims);
    let mut out = dims.to_vec();
    out.extend(nodes(inp, idx, x, &mut removed));
    if inp.geo.cube().is_some() {
        out.extend(channels(inp, idx, x, &mut removed));
    } else {
        out.extend(pairs(inp, x, &mut removed));
    }
    out
}

/// Tests the explanations, iterating the baseline against them until the accepted set no
/// longer changes (at most [`ROUNDS`] rounds).
pub(super) fn explain(inp: &Input<'_>) -> Explained {
    let idx = build_index(inp);
    let dims = dims(inp, &idx);
    let mut accepted = dims.clone();
    let mut baseline_now = Vec::new();
    let mut x = Vec::new();
    for _ in 0..ROUNDS {
        baseline_now = baseline(inp, &idx, &cover_mask(inp.obs.len(), &accepted));
        x = inp
            .obs
            .iter()
            .map(|o| baseline_now[o.class].map_or(0.0, |b| o.y - b))
            .collect();
        let next = levels(inp, &idx, &dims, &x);
        let same = next
            .iter()
            .map(|a| a.cand)
            .eq(accepted.iter().map(|a| a.cand));
        accepted = next;
        if same {
            break;
        }
    }
    let suspects = accepted.iter().map(|a| describe(inp, a)).collect();
    Explained {
        suspects,
        baseline: baseline_now,
        excess: x,
    }
}

/// Median of log values as a factor with the order-statistic 95 % CI of the median.
pub(super) fn estimate(values: &[f64]) -> Estimate {
    let mut v = values.to_vec();
    sort_samples(&mut v);
    let value = median(&v).unwrap_or(0.0);
    let (lo, hi) = median_ci_ranks(v.len() as u64)
        .map_or((value, value), |(a, b)| (v[a as usize], v[b as usize]));
    Estimate {
        value: value.exp(),
        lo: lo.exp(),
        hi: hi.exp(),
    }
}

/// The suspect an accepted candidate makes, with its evidence sentence.
fn describe(inp: &Input<'_>, a: &Accepted) -> Suspect {
    let factor = estimate(&a.values);
    let slow = a.values.iter().filter(|v| **v > inp.thr).count();
    let z = factor.value.ln() / inp.scale;
    let (subject, reference) = match a.cand {
        Cand::Dim(k) => (
            match contrast_classes(inp.geo.cube().unwrap_or(1)) {
                1 => format!("pairs crossing dimension {k} (1 hop)"),
                h => format!("pairs crossing dimension {k} (1 to {h} hops)"),
            },
            "pairs of the same hop count that do not cross it".to_string(),
        ),
        Cand::Node(k) => (
            format!("pairs with {}", inp.geo.rank_name(k)),
            "their class".to_string(),
        ),
        Cand::Channel(l, k) => (
            format!(
                "pairs routed over the channel {l}-{} (dimension {k})",
                l ^ (1 << k)
            ),
            "their class".to_string(),
        ),
        Cand::Pair(p, q) => (
            format!("measurements of the pair {p}-{q}"),
            "their class".to_string(),
        ),
    };
    let (kind, nodes, dimension) = a.cand.parts();
    Suspect {
        kind: kind.to_string(),
        nodes,
        dimension,
        factor,
        cells: a.values.len(),
        evidence: format!(
            "{slow} of {} {subject} slower by x{:.2} (x{:.2}..x{:.2}) than {reference}; z {z:.0}",
            a.values.len(),
            factor.value,
            factor.lo,
            factor.hi
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binomial_tail_matches_direct_sums() {
        assert_eq!(binomial_tail(5, 0, 0.3), 1.0);
        assert!((binomial_tail(1, 1, 0.3) - 0.3).abs() < 1e-15);
        // P(X >= 4), X ~ B(5, 0.15) = 5 0.15^4 0.85 + 0.15^5.
        let want = 5.0 * 0.15f64.powi(4) * 0.85 + 0.15f64.powi(5);
        assert!((binomial_tail(5, 4, 0.15) - want).abs() < 1e-15);
        assert!((binomial_tail(10, 5, 0.5) - 638.0 / 1024.0).abs() < 1e-12);
        // Far tails of large m neither underflow to NaN nor exceed 1.
        let t = binomial_tail(4000, 4000, 0.7);
        assert!((0.0..1e-300).contains(&t));
        assert!(binomial_tail(4000, 1, 0.7) <= 1.0);
    }

    #[test]
    fn a_few_slow_cells_among_many_stray_ones_are_chance() {
        // The excess of every live cell: the option's own and `slow` of `others` at `at`.
        let live = |own: &[f64], others: usize, slow: usize, at: f64| {
            let mut v = own.to_vec();
            v.extend((0..others).map(|i| if i < slow { at } else { 0.0 }));
            sort_samples(&mut v);
            v
        };
        // 4 of 5 slow where 15 % of the other cells are slow: chance.
        let v = [1.0, 1.0, 1.0, 1.0, 0.0];
        assert!(!beyond_chance(&v, 0.5, &live(&v, 1000, 150, 1.0), 32));
        // All 30 slow: not chance, even at 30 % strays.
        assert!(beyond_chance(
            &[1.0; 30],
            0.5,
            &live(&[1.0; 30], 1000, 300, 1.0),
            192
        ));
        // A hosts node of 4 ranks: its 6 cells slow, the 6 others fine.
        assert!(beyond_chance(
            &[1.0; 6],
            0.5,
            &live(&[1.0; 6], 6, 0, 0.0),
            4
        ));
        // Its 6 cells a hundred times slower, 2 of the 6 others doubled by noise: the
        // doubled ones are no match for it...
        let hundred = [100f64.ln(); 6];
        assert!(beyond_chance(
            &hundred,
            0.5,
            &live(&hundred, 6, 2, 2f64.ln()),
            4
        ));
        // ... while cells as slow as the doubled ones are.
        let doubled = [2f64.ln(); 6];
        assert!(!beyond_chance(
            &doubled,
            0.5,
            &live(&doubled, 6, 2, 2f64.ln()),
            4
        ));
    }
}
