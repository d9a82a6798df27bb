//! Drift and steady state over one point's trials: whether the distribution of its trial
//! times changed while it was measured, where, and between which levels, classified with the
//! words of Barrett, Bolz-Tereick, Killick, Mount and Tratt, *Virtual machine warmup blows hot
//! and cold* (OOPSLA 2017): `steady`, `warm-up`, `slow-down` and `no-steady-state`.
//!
//! **The test.** Binary segmentation (Scott and Knott 1974) with a rank statistic: in a
//! segment of `n` trials, in the order measured, the trials are replaced by their ranks
//! (mid-ranks for ties), and for every split `k` the sum of the first `k` ranks is compared
//! with its expectation, `k (n + 1) / 2`. That difference is the Mann–Whitney statistic of the
//! first `k` trials against the rest (Pettitt 1979 takes its largest absolute value over `k`
//! as a test for one change point); standardised by its permutation standard deviation,
//! `sqrt(k (n - k) / (n (n - 1)) · Σ (r_i - r̄)²)` (exact with ties), it is a z-score at
//! every split, and the split where `|z|` is largest is the candidate. Ranks make the test
//! blind to how heavy the tails are: a trial 100 times slower than the rest counts as one
//! rank, a second mode as a block of ranks; a clock that quantises every time to a few
//! values gives ties, which the mid-ranks and the variance handle exactly.
//!
//! * **Dependence.** Real transports have bursts: slow trials come in runs. A sum of ranks
//!   whose neighbours are correlated varies more than one of independent ranks, so the z is
//!   divided by `sqrt((1 + ρ) / (1 - ρ))`, the long-run variance factor of a first-order
//!   autoregression (Hamed and Rao 1998 correct the Mann–Kendall trend test the same way).
//!   `ρ` is the smaller of two estimates of the lag-1 autocorrelation of the ranks' noise,
//!   each of which a change can only inflate, in different cases: around the mean of each
//!   side of the split (inflated by further changes within a side), and from the first
//!   differences of the ranks, whose lag-1 autocorrelation is `-(1 - ρ) / 2` whatever levels
//!   the noise moves between (inflated by trials tied in runs, as on a coarse clock; the
//!   differences that are jumps between levels left out, and those between trials within one
//!   clock step of each other counted as none, which the clock cannot tell apart however far
//!   apart their ranks are). So the changes the test looks for (one step, several, a gradual
//!   trend) do not count as dependence. Negative `ρ` leaves the z as it is.
//! * **Significance.** The candidate is the largest of `n - 2 m + 1` z-scores (`m` =
//!   [`MIN_SEGMENT`]), so it is tested at [`ALPHA`] with a Bonferroni correction over them:
//!   `|z| >= Φ^-1(1 - ALPHA / (2 (n - 2 m + 1)))`, about 4.4 at 100 trials, 5.3 at 10^4 and
//!   6.1 at 10^6. Bonferroni is conservative for these strongly correlated z-scores, so a
//!   sequence without a change is flagged in well under [`ALPHA`] of the points. A
//!   significant split divides the segment and each half is searched again, breadth first,
//!   up to [`MAX_SPLITS`] splits; each split is then moved to the place within
//!   [`BLOCK_TRIALS`] that fits the medians either side best (least absolute deviations),
//!   which places it to the trial where the ranks alone leave it a few trials late.
//! * **Practical significance.** With 10^5 trials a shift of a few tenths of a per cent is
//!   significant, and not worth a warning: two neighbouring segments are kept apart only when
//!   their medians differ by at least [`REL_FLOOR`] (1 %) of the lower one and by more than
//!   one step of the clock (its resolution, `res_timing`: on a coarse clock most trials tie
//!   at a few values, and a median moves by a step when a few trials cross from one to the
//!   next). 1 % because the distribution-free 95 % interval of a median of 10^4 trials is
//!   already a few tenths of a per cent wide, runs of the same benchmark differ by more than
//!   that (which is why `compare` wants several runs), and a 1 % precision is what stopping
//!   on the confidence interval asks for by default: a drift below it is below what the
//!   point claims. Neighbours closer than that are merged,
//!   closest first, and the medians taken again; then so are neighbours whose own rank test
//!   (the two segments alone, at the same level) no longer tells them apart, weakest first.
//!
//! **The classes** (Barrett et al. §4.3, with their segments' equivalence replaced by the
//! floor above): no change is `steady`; a last segment that starts in the last
//! [`STEADY_MIN_SHARE`] of the trials (a quarter, as their last 500 of 2000 in-process
//! iterations) is `no-steady-state`; otherwise the last segment is the steady state, and the
//! point is `warm-up` when no earlier segment is faster than it by the floor (the segments
//! before it were slower), `slow-down` when one is. A `warm-up` point's leading segments
//! slower than its steady state are its warm-up ([`Segments::warmup_trials`]), what
//! `--drop-warmup auto` takes out of its statistics ([`take_warmup`]); none when its first
//! segment is already as fast (a point slow only for a while in its middle).
//!
//! **Resolution.** The split that maximises the standardised statistic is where a single
//! change is, in expectation, and where the shift between the levels is at least about one
//! interquartile range of the trials it is found, after the refinement, within a few trials;
//! [`BLOCK_TRIALS`] is the resolution the detector is held to (`tests/drift.rs`,
//! `benches/drift_sim.sh`). A segment of completely separated trials is found from about
//! `z² / 3` trials: 10 to 13.
//!
//! Cost: per segment searched one sort of its trials and a few passes over them,
//! `O(n log n)`; each level of the segmentation covers the trials at most once. Memory: the
//! ranks (4 bytes a trial, 4 more while sorting) and a copy of a segment for its median (8),
//! within the 16 bytes a trial the plan allows a point's analysis at its peak.

use crate::analysis::inference::student_t_quantile;
use commbench_core::stats::f64_or_nan;
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;

/// Trials in a block: the block of the detector's resolution target (a change is found within
/// one block of where it happened), and the reach of the refinement of a split: the block in
/// which trials are added when a size stops on its confidence interval (`--until-ci`,
/// [`commbench_core::method::until::DEFAULT_BLOCK`]).
pub const BLOCK_TRIALS: u64 = commbench_core::method::until::DEFAULT_BLOCK;

/// Level of the test for a change in one segment, Bonferroni-corrected over its splits.
pub const ALPHA: f64 = 1e-3;

/// Smallest shift between the medians of two neighbouring segments called a change, as a
/// fraction of the lower one.
pub const REL_FLOOR: f64 = 0.01;

/// Fewest trials in a segment.
pub const MIN_SEGMENT: usize = 10;

/// Fewest trials the test judges: two segments. With fewer, nothing is recorded.
pub const MIN_TRIALS: usize = 2 * MIN_SEGMENT;

/// The steady state must hold at least this share of a point's trials: a last segment that
/// starts later means that the point had not settled (`no-steady-state`).
pub const STEADY_MIN_SHARE: f64 = 0.25;

/// Most significant splits searched in one point, whether or not they are kept.
pub const MAX_SPLITS: usize = 64;

/// Most trials the test judges (ranks are kept in 32 bits), far above the 10^8 a point may
/// have: a longer sequence is not judged.
pub const MAX_TESTED: usize = 1 << 30;

/// The largest lag-1 autocorrelation the test allows for, so that the variance factor stays
/// finite (at most 99).
const MAX_RHO: f64 = 0.98;

/// What a point's trials did over time (Barrett et al. 2017).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SteadyClass {
    /// No change.
    Steady,
    /// The trials settled at their fastest: every segment before the last was slower.
    WarmUp,
    /// The last segment is slower than an earlier one.
    SlowDown,
    /// The last change is in the last quarter of the trials: no steady state was reached.
    NoSteadyState,
}

impl SteadyClass {
    /// The class as the document spells it (`warm-up`).
    pub fn name(self) -> &'static str {
        match self {
            SteadyClass::Steady => "steady",
            SteadyClass::WarmUp => "warm-up",
            SteadyClass::SlowDown => "slow-down",
            SteadyClass::NoSteadyState => "no-steady-state",
        }
    }
}

/// `--drop-warmup`: what to do with the trials before the steady state of a `warm-up` point.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DropWarmup {
    /// Keep every trial (the statistics include a warm-up, which the point's warning names).
    #[default]
    None,
    /// Take the trials before the last segment of a `warm-up` point out of its statistics,
    /// keeping them beside it.
    Auto,
}

impl DropWarmup {
    /// Whether nothing is dropped (the document's default).
    pub fn is_none(&self) -> bool {
        *self == DropWarmup::None
    }
}

/// One change of a point's trial times.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Change {
    /// The first trial of the new segment (0-based, in the order measured, trials dropped
    /// as warm-up included).
    pub index: u64,
    /// When that trial started, ns after the first trial's start.
    pub at_ns: u64,
    /// Median one-way time of the segment before, us.
    #[serde(deserialize_with = "f64_or_nan")]
    pub before_us: f64,
    /// Median one-way time of the segment from `index` on, us.
    #[serde(deserialize_with = "f64_or_nan")]
    pub after_us: f64,
    /// The z-score of the split when it was found (absolute value; rank statistic,
    /// corrected for autocorrelation).
    #[serde(deserialize_with = "f64_or_nan")]
    pub z: f64,
}

/// Whether and where a point's trial times changed ([`stationarity`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Stationarity {
    /// `steady`, `warm-up`, `slow-down` or `no-steady-state`.
    pub class: SteadyClass,
    /// The changes, in order; empty when steady.
    #[serde(default)]
    pub changes: Vec<Change>,
    /// The smallest shift called a change at the point's median one-way time, us: 1 % of
    /// it, or one step of the clock when that is more (a shift must also exceed the step).
    #[serde(deserialize_with = "f64_or_nan")]
    pub floor_us: f64,
    /// `warm-up`: the leading trials slower than the steady state (what `--drop-warmup auto`
    /// drops), 0 when the first segment is not slower (the point was slow only for a while
    /// in its middle). 0 for the other classes.
    #[serde(default)]
    pub warmup_trials: u64,
}

impl Stationarity {
    /// Whether the trials changed.
    pub fn nonstationary(&self) -> bool {
        self.class != SteadyClass::Steady
    }
}

/// A point's trials in segments, in the trials' own unit.
#[derive(Debug, Clone, PartialEq)]
pub struct Segments {
    /// The first trial of each segment; the first is 0.
    pub starts: Vec<usize>,
    /// The median of each segment.
    pub levels: Vec<f64>,
    /// The z-score of the split that starts each segment but the first.
    pub z: Vec<f64>,
    /// The clock's step, in the trials' unit (0 when unknown).
    pub quantum: f64,
    /// Trials in all.
    pub n: usize,
}

impl Segments {
    /// The class of the segmentation (see the module's documentation).
    pub fn class(&self) -> SteadyClass {
        let (Some(&last), Some(&fin)) = (self.starts.last(), self.levels.last()) else {
            return SteadyClass::Steady;
        };
        if self.starts.len() < 2 {
            return SteadyClass::Steady;
        }
        if ((self.n - last) as f64) < STEADY_MIN_SHARE * self.n as f64 {
            return SteadyClass::NoSteadyState;
        }
        let earlier = &self.levels[..self.levels.len() - 1];
        if earlier
            .iter()
            .any(|&l| l < fin && practical(l, fin, self.quantum))
        {
            SteadyClass::SlowDown
        } else {
            SteadyClass::WarmUp
        }
    }

    /// The leading trials of a `warm-up` point that are slower than its steady state: up to
    /// the first segment that is not slower than the last by the floor (0 when the first
    /// already is not, as for a point slow only for a while in its middle; 0 for the other
    /// classes). What `--drop-warmup auto` leaves out.
    pub fn warmup_trials(&self) -> usize {
        if self.class() != SteadyClass::WarmUp {
            return 0;
        }
        let fin = self.levels[self.levels.len() - 1];
        (0..self.levels.len() - 1)
            .find(|&j| !(self.levels[j] > fin && practical(self.levels[j], fin, self.quantum)))
            .map_or(self.starts[self.starts.len() - 1], |j| self.starts[j])
    }
}

/// Whether two levels are far enough apart to be called a change: by [`REL_FLOOR`] of the
/// lower one and by more than one clock step.
fn practical(a: f64, b: f64, quantum: f64) -> bool {
    let d = (a - b).abs();
    d > quantum && d >= REL_FLOOR * a.abs().min(b.abs())
}

/// The segments of trial times `x` in the order measured, read from a clock whose step is
/// `clock` (see the module's documentation). `None` with fewer than [`MIN_TRIALS`] or more
/// than [`MAX_TESTED`].
pub fn segments(x: &[i64], clock: f64) -> Option<Segments> {
    let n = x.len();
    if !(MIN_TRIALS..=MAX_TESTED).contains(&n) {
        return None;
    }
    let quantum = if clock.is_finite() {
        clock.max(0.0)
    } else {
        0.0
    };
    let mut splits: Vec<(usize, f64)> = Vec::new();
    let mut todo = VecDeque::from([(0usize, n)]);
    while let Some((a, b)) = todo.pop_front() {
        if splits.len() >= MAX_SPLITS {
            break;
        }
        let Some(s) = best_split(&x[a..b], quantum) else {
            continue;
        };
        if s.z.abs() < critical_z(b - a) {
            continue;
        }
        let at = a + refine(&x[a..b], s.at);
        splits.push((at, s.z));
        todo.push_back((a, at));
        todo.push_back((at, b));
    }
    splits.sort_unstable_by_key(|s| s.0);
    let mut starts: Vec<usize> = std::iter::once(0)
        .chain(splits.iter().map(|s| s.0))
        .collect();
    let mut levels: Vec<f64> = (0..starts.len())
        .map(|i| median_of(x, starts[i], end(&starts, i, n)))
        .collect();
    let support = |starts: &[usize], i: usize| {
        let (a, k, b) = (starts[i], starts[i + 1], end(starts, i + 1, n));
        let z = z_between(&x[a..b], k - a, quantum);
        (z, z / critical_z(b - a))
    };
    let mut z: Vec<(f64, f64)> = (0..splits.len()).map(|i| support(&starts, i)).collect();
    // Merge neighbours that are not a practical change (the closest first), then those the
    // rank test no longer tells apart (the weakest first), until none is left.
    while let Some(i) = closest_unpractical(&levels, quantum).or_else(|| weakest(&z)) {
        starts.remove(i + 1);
        z.remove(i);
        levels.remove(i + 1);
        levels[i] = median_of(x, starts[i], end(&starts, i, n));
        for j in [i.wrapping_sub(1), i] {
            if j < z.len() {
                z[j] = support(&starts, j);
            }
        }
    }
    Some(Segments {
        starts,
        levels,
        z: z.iter().map(|s| s.0).collect(),
        quantum,
        n,
    })
}

/// The change whose two neighbouring segments the rank test tells apart least, when it
/// does not tell them apart: `z` holds each change's z-score and its ratio to the score it
/// must reach.
fn weakest(z: &[(f64, f64)]) -> Option<usize> {
    z.iter()
        .enumerate()
        .filter(|(_, s)| s.1 < 1.0)
        .min_by(|a, b| a.1 .1.total_cmp(&b.1 .1))
        .map(|(i, _)| i)
}

/// The split of `x` (one segment) near `k`, the rank statistic's, that fits its two sides
/// best with their medians: among the splits within [`BLOCK_TRIALS`] of `k` (each side at
/// least [`MIN_SEGMENT`]), the one with the least sum of absolute deviations from the median
/// of its side (the least absolute deviation estimate of a change point), those medians of
/// the [`BLOCK_TRIALS`] either side of `k`, so that other changes further away do not pull
/// it. The ranks find a change without regard to how far apart the trials are,
/// so a few trials after a change that fall among the slower of their new level move it by
/// as many; a trial's deviation moves the cost by at most the distance between the levels,
/// so the refinement is as robust to outliers as the medians. The nearest to `k` of equal
/// costs.
fn refine(x: &[i64], k: usize) -> usize {
    let n = x.len();
    let w = BLOCK_TRIALS as usize;
    let (left, right) = (
        median_of(x, k.saturating_sub(w), k),
        median_of(x, k, (k + w).min(n)),
    );
    let lo = k.saturating_sub(w).max(MIN_SEGMENT);
    let hi = (k + w).min(n - MIN_SEGMENT);
    if lo > hi {
        return k;
    }
    // Moving the split from j to j + 1 puts trial j on the left: its cost changes by
    // |x_j - left| - |x_j - right|.
    let step = |j: usize| (x[j] as f64 - left).abs() - (x[j] as f64 - right).abs();
    let mut cost = 0.0;
    let mut best = (k, 0.0f64);
    for j in k..hi {
        cost += step(j);
        if cost < best.1 {
            best = (j + 1, cost);
        }
    }
    cost = 0.0;
    for j in (lo..k).rev() {
        cost -= step(j);
        if cost < best.1 || (cost == best.1 && k - j < best.0.abs_diff(k)) {
            best = (j, cost);
        }
    }
    best.0
}

/// The end of segment `i` of `starts` in `n` trials.
fn end(starts: &[usize], i: usize, n: usize) -> usize {
    starts.get(i + 1).copied().unwrap_or(n)
}

/// The index of the first of the two neighbouring levels closest (relative to the lower)
/// among those that are not a practical change.
fn closest_unpractical(levels: &[f64], quantum: f64) -> Option<usize> {
    levels
        .windows(2)
        .enumerate()
        .filter(|(_, w)| !practical(w[0], w[1], quantum))
        .map(|(i, w)| {
            let low = w[0].abs().min(w[1].abs());
            let d = (w[0] - w[1]).abs();
            (i, if low > 0.0 { d / low } else { d })
        })
        .min_by(|a, b| a.1.total_cmp(&b.1))
        .map(|(i, _)| i)
}

/// The median of `x[a..b]` (the mean of the two middle values for an even count).
fn median_of(x: &[i64], a: usize, b: usize) -> f64 {
    let mut v: Vec<i64> = x[a..b].to_vec();
    let n = v.len();
    if n == 0 {
        return f64::NAN;
    }
    let (_, &mut hi, _) = v.select_nth_unstable(n / 2);
    if n % 2 == 1 {
        return hi as f64;
    }
    let lo = v[..n / 2].iter().copied().max().unwrap_or(hi);
    (lo as f64 + hi as f64) / 2.0
}

/// The z-score a segment of `n` trials must reach: [`ALPHA`] two-sided, Bonferroni over its
/// `n - 2 MIN_SEGMENT + 1` splits.
fn critical_z(n: usize) -> f64 {
    let m = (n + 1).saturating_sub(2 * MIN_SEGMENT).max(1) as f64;
    student_t_quantile(1.0 - ALPHA / (2.0 * m), f64::INFINITY).unwrap_or(f64::INFINITY)
}

/// The candidate split of one segment.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Split {
    /// Trials before the split.
    at: usize,
    /// Its z-score, corrected for autocorrelation.
    z: f64,
}

/// Twice the mid-rank of each of `x` (integers: a mid-rank is a multiple of 1/2), 2 to 2n;
/// 4 bytes a trial (and 4 more while sorting), within the 16 a trial the plan allows the
/// analysis of a point. `x` holds fewer than [`MAX_TESTED`] trials.
fn doubled_ranks(x: &[i64]) -> Vec<u32> {
    let mut order: Vec<u32> = (0..x.len() as u32).collect();
    order.sort_unstable_by_key(|&i| x[i as usize]);
    let mut r = vec![0u32; x.len()];
    let mut i = 0;
    while i < order.len() {
        let v = x[order[i] as usize];
        let j = i + order[i..]
            .iter()
            .take_while(|&&k| x[k as usize] == v)
            .count();
        // Ranks i+1 ..= j share their mean, (i + 1 + j) / 2.
        for &k in &order[i..j] {
            r[k as usize] = (i + 1 + j) as u32;
        }
        i = j;
    }
    r
}

/// A segment's trials as ranks: what the rank statistic needs at any split.
struct Ranked {
    /// Twice each trial's mid-rank.
    r: Vec<u32>,
    /// Whether each trial differs from the next by more than one clock step.
    moved: Vec<bool>,
    /// Twice the mean rank, `n + 1`.
    centre: i64,
    /// The variance of the sum of the first `k` ranks is `k (n - k) scale`.
    scale: f64,
}

impl Ranked {
    /// `None` when the segment is shorter than [`MIN_TRIALS`] or all its trials are equal.
    /// `clock` is the clock's step.
    fn new(x: &[i64], clock: f64) -> Option<Self> {
        let n = x.len();
        if n < MIN_TRIALS {
            return None;
        }
        let r = doubled_ranks(x);
        let centre = n as i64 + 1;
        let ss: f64 = r
            .iter()
            .map(|&v| ((i64::from(v) - centre) as f64).powi(2))
            .sum::<f64>()
            / 4.0;
        let nf = n as f64;
        let moved = x
            .windows(2)
            .map(|w| w[1].abs_diff(w[0]) as f64 > clock)
            .collect();
        (ss > 0.0).then_some(Ranked {
            r,
            moved,
            centre,
            scale: ss / (nf * (nf - 1.0)),
        })
    }

    /// The z-score of the split after `k` trials whose ranks sum to `s2 / 2` above their
    /// expectation, before the correction for dependence.
    fn z(&self, k: usize, s2: i64) -> f64 {
        let n = self.r.len();
        (s2 as f64 / 2.0) / ((k as f64) * ((n - k) as f64) * self.scale).sqrt()
    }

    /// `z` at the split after `k` trials corrected for the noise's dependence: divided by
    /// `sqrt((1 + ρ) / (1 - ρ))`, `ρ` the smaller of two estimates of the lag-1
    /// autocorrelation, each of which a change can only inflate ([`side_autocorrelation`],
    /// [`noise_autocorrelation`]), clamped to `0 ..= MAX_RHO`.
    fn corrected(&self, k: usize, z: f64) -> f64 {
        let rho = side_autocorrelation(&self.r, k)
            .min(noise_autocorrelation(&self.r, &self.moved))
            .clamp(0.0, MAX_RHO);
        z * ((1.0 - rho) / (1.0 + rho)).sqrt()
    }
}

/// The split of `x` (one segment) where the standardised rank statistic is largest, with
/// its z-score corrected for dependence; `None` when the segment is too short to split or
/// all its trials are equal.
fn best_split(x: &[i64], clock: f64) -> Option<Split> {
    let rk = Ranked::new(x, clock)?;
    let n = x.len();
    let mut s2 = 0i64;
    let mut best: Option<Split> = None;
    for (i, &v) in rk.r.iter().enumerate() {
        s2 += i64::from(v) - rk.centre;
        let k = i + 1;
        if k < MIN_SEGMENT || n - k < MIN_SEGMENT {
            continue;
        }
        let z = rk.z(k, s2);
        if best.map_or(true, |b| z.abs() > b.z.abs()) {
            best = Some(Split { at: k, z });
        }
    }
    let b = best?;
    Some(Split {
        at: b.at,
        z: rk.corrected(b.at, b.z),
    })
}

/// The absolute z-score of the split of `x` after `k` trials (two neighbouring segments),
/// corrected for dependence as [`best_split`]'s; 0 when it cannot be computed.
fn z_between(x: &[i64], k: usize, clock: f64) -> f64 {
    let Some(rk) = Ranked::new(x, clock) else {
        return 0.0;
    };
    if k == 0 || k >= x.len() {
        return 0.0;
    }
    let s2: i64 = rk.r[..k].iter().map(|&v| i64::from(v) - rk.centre).sum();
    rk.corrected(k, rk.z(k, s2)).abs()
}

/// The lag-1 autocorrelation of `r` around the mean of each side of the split after `k`
/// trials, the pair across the split left out (0 when the sides have no spread). A change
/// within a side inflates it: its ranks then move together.
fn side_autocorrelation(r: &[u32], k: usize) -> f64 {
    let mean = |s: &[u32]| s.iter().map(|&v| f64::from(v)).sum::<f64>() / s.len().max(1) as f64;
    let (ml, mr) = (mean(&r[..k]), mean(&r[k..]));
    let e = |i: usize| f64::from(r[i]) - if i < k { ml } else { mr };
    let (mut num, mut den) = (0.0, 0.0);
    for i in 0..r.len() {
        let ei = e(i);
        den += ei * ei;
        if i + 1 < r.len() && i + 1 != k {
            num += ei * e(i + 1);
        }
    }
    if den > 0.0 {
        num / den
    } else {
        0.0
    }
}

/// A difference of ranks this many times their mean absolute deviation is a jump between
/// levels, not noise.
const JUMP: f64 = 20.0;

/// The lag-1 autocorrelation of the noise in `r`, from its first differences: for a
/// first-order autoregression of coefficient `ρ` the differences have lag-1 autocorrelation
/// `-(1 - ρ) / 2`, whatever the levels it moves between, as long as changes of level are
/// few or gradual (a trend only moves the differences' mean). A step between levels whose
/// noise is small (trials tied at a few clock values) is one difference far larger than the
/// others: differences beyond [`JUMP`] times their mean absolute deviation are left out.
/// Two trials within one clock step of each other (`moved` false) are the same time as far
/// as the clock can tell, however far apart their ranks: their difference counts as 0, so
/// that a deterministic machine whose readings alternate between two neighbouring ticks in
/// runs is not taken for dependent noise. Trials tied in runs inflate it (their differences
/// are 0 but where the value changes). 0 for fewer than three trials or differences without
/// spread.
fn noise_autocorrelation(r: &[u32], moved: &[bool]) -> f64 {
    let n = r.len().saturating_sub(1);
    if n < 2 {
        return 0.0;
    }
    let d = |i: usize| {
        if moved[i] {
            f64::from(r[i + 1]) - f64::from(r[i])
        } else {
            0.0
        }
    };
    let m = (0..n).map(d).sum::<f64>() / n as f64;
    let mad = (0..n).map(|i| (d(i) - m).abs()).sum::<f64>() / n as f64;
    let noise = |v: f64| (v - m).abs() <= JUMP * mad;
    let kept = (0..n).filter(|&i| noise(d(i))).count().max(1);
    let m = (0..n).map(d).filter(|&v| noise(v)).sum::<f64>() / kept as f64;
    let (mut c0, mut c1) = (0.0, 0.0);
    for i in 0..n {
        let v = d(i);
        if !noise(v) {
            continue;
        }
        c0 += (v - m).powi(2);
        if i + 1 < n && noise(d(i + 1)) {
            c1 += (v - m) * (d(i + 1) - m);
        }
    }
    if c0 > 0.0 {
        1.0 + 2.0 * c1 / c0
    } else {
        0.0
    }
}

/// Whether and where the trial times `trial_ns` (in the order measured, each started
/// `trial_start_ns` after the first, read from a clock of resolution `clock_ns`; 0 when
/// unknown) changed, with the levels in one-way microseconds: a trial time over `per_trial`
/// (trips per iteration x npp) x 1000. `None` with fewer than [`MIN_TRIALS`] trials (or more
/// than [`MAX_TESTED`]), or without a start for each (all-pairs cells, seed 001's calibrations, documents written
/// before the starts were recorded).
pub fn stationarity(
    trial_ns: &[i64],
    trial_start_ns: &[u64],
    per_trial: u64,
    clock_ns: f64,
) -> Option<Stationarity> {
    if trial_start_ns.len() != trial_ns.len() {
        return None;
    }
    let seg = segments(trial_ns, clock_ns)?;
    let us = |t: f64| t / (per_trial.max(1) as f64 * 1000.0);
    let changes = (1..seg.starts.len())
        .map(|i| Change {
            index: seg.starts[i] as u64,
            at_ns: trial_start_ns[seg.starts[i]],
            before_us: us(seg.levels[i - 1]),
            after_us: us(seg.levels[i]),
            z: seg.z[i - 1],
        })
        .collect();
    let median = median_of(trial_ns, 0, trial_ns.len());
    Some(Stationarity {
        class: seg.class(),
        changes,
        floor_us: us((REL_FLOOR * median.abs()).max(seg.quantum)),
        warmup_trials: seg.warmup_trials() as u64,
    })
}

/// The trials a `warm-up` point's statistics leave out under `--drop-warmup auto`: those
/// before its steady state (the last segment), kept here so that nothing measured is lost.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WarmupDropped {
    /// Trials dropped: the first `trials` measured.
    pub trials: u64,
    /// When the first trial kept started, ns after the first trial's start: every trial
    /// dropped started before it.
    pub until_ns: u64,
    /// Median one-way time of the trials dropped, us.
    #[serde(deserialize_with = "f64_or_nan")]
    pub level_us: f64,
    /// Their times, ns, as `trial_ns`.
    pub trial_ns: Vec<i64>,
    /// When each started, as `trial_start_ns`.
    pub trial_start_ns: Vec<u64>,
}

/// Under `drop`, the trials `s` says to leave out of the statistics: the leading trials of
/// a `warm-up` point slower than its steady state (`warmup_trials`); 0 otherwise.
pub fn warmup_to_drop(s: Option<&Stationarity>, drop: DropWarmup) -> usize {
    match (drop, s) {
        (DropWarmup::Auto, Some(s)) if s.class == SteadyClass::WarmUp => {
            usize::try_from(s.warmup_trials).unwrap_or(0)
        }
        _ => 0,
    }
}

/// Take the first `k` trials out of `trial_ns` and `trial_start_ns` (a point's, one start
/// per trial) into the record of a dropped warm-up, its level the median one-way time of
/// those trials (a trial over `per_trial` x 1000); `None`, leaving both as they are, unless
/// `0 < k < ` the trials.
pub fn take_warmup(
    trial_ns: &mut Vec<i64>,
    trial_start_ns: &mut Vec<u64>,
    k: usize,
    per_trial: u64,
) -> Option<WarmupDropped> {
    if k == 0 || k >= trial_ns.len() || trial_start_ns.len() != trial_ns.len() {
        return None;
    }
    let kept_ns = trial_ns.split_off(k);
    let kept_start = trial_start_ns.split_off(k);
    let level = median_of(trial_ns, 0, k) / (per_trial.max(1) as f64 * 1000.0);
    Some(WarmupDropped {
        trials: k as u64,
        until_ns: kept_start[0],
        level_us: level,
        trial_ns: std::mem::replace(trial_ns, kept_ns),
        trial_start_ns: std::mem::replace(trial_start_ns, kept_start),
    })
}

/// A time in words with three significant digits: `850 ns`, `12.3 us`, `4.56 ms`, `7.89 s`.
fn time_words(ns: u64) -> String {
    let t = ns as f64;
    let (v, unit) = if t < 1e3 {
        (t, "ns")
    } else if t < 1e6 {
        (t / 1e3, "us")
    } else if t < 1e9 {
        (t / 1e6, "ms")
    } else {
        (t / 1e9, "s")
    };
    format!("{} {unit}", sig3(v))
}

/// Three significant digits (`1.23`, `45.6`, `1234`).
fn sig3(x: f64) -> String {
    if !x.is_finite() || x == 0.0 {
        return format!("{x}");
    }
    let d = (2 - x.abs().log10().floor() as i32).max(0) as usize;
    format!("{x:.d$}")
}

/// Most changes a warning lists; more are counted.
const LISTED_CHANGES: usize = 3;

/// The one-line warning of a point whose trials changed (`None` when steady): the word
/// `nonstationary`, the class, each change's trial, time and levels, and what was dropped
/// (`dropped`, under `--drop-warmup auto`).
pub fn stationarity_warning(s: &Stationarity, dropped: Option<&WarmupDropped>) -> Option<String> {
    if !s.nonstationary() {
        return None;
    }
    let one = |c: &Change| {
        let pct = if c.before_us != 0.0 {
            format!(" ({:+.0}%)", 100.0 * (c.after_us / c.before_us - 1.0))
        } else {
            String::new()
        };
        format!(
            "at trial {} ({} after the first) from {} us to {} us{pct}",
            c.index,
            time_words(c.at_ns),
            sig3(c.before_us),
            sig3(c.after_us)
        )
    };
    let mut list: Vec<String> = s.changes.iter().take(LISTED_CHANGES).map(one).collect();
    if s.changes.len() > LISTED_CHANGES {
        list.push(format!("and {} more", s.changes.len() - LISTED_CHANGES));
    }
    let times = match s.changes.len() {
        1 => "changed".to_string(),
        n => format!("changed {n} times:"),
    };
    let after = match (s.class, dropped) {
        (_, Some(d)) => format!(
            "; the first {} trials (median {} us), slower than the steady state, were dropped \
             from the statistics as warm-up",
            d.trials,
            sig3(d.level_us)
        ),
        (SteadyClass::WarmUp, None) if s.warmup_trials > 0 => format!(
            "; the statistics include the first {} trials, a warm-up slower than the steady \
             state",
            s.warmup_trials
        ),
        (SteadyClass::WarmUp, None) => "; it came back to its first level, and the statistics \
                                         include the slower trials between"
            .into(),
        (SteadyClass::SlowDown, None) => {
            "; the statistics mix the levels, and the last is slower than an earlier one".into()
        }
        _ => "; the last change is in the last quarter of the trials: no steady state was \
              reached, and the statistics mix the levels"
            .into(),
    };
    Some(format!(
        "nonstationary ({}): the one-way time {times} {}{after}",
        s.class.name(),
        list.join(", ")
    ))
}

#[cfg(test)]
mod tests;
