//! Element-level inference: which node, host, link or dimension makes cells slow, decided
//! from all of an element's cells together in one model of the whole matrix.
//!
//! At one size, on each cell's median one-way time `t_c` (us),
//!
//! ```text
//! t_c = b_class(c) + sum over elements e of a_ce beta_e + noise
//! ```
//!
//! `b_h` is what a healthy cell of class `h` costs; `a_ce` is how often the cell's round trip
//! uses element `e` (1 for a node or host at an end, for a dimension it crosses and for a
//! pair; for a hypercube channel the number of the round trip's two routes that cross it);
//! `beta_e` is the time the element adds each time. The model is additive in time because
//! faults are: a slow node adds its slower sends and receives to each of its pairs whatever
//! their length, a slow channel adds its slower hop to each route over it (docs/simulator.md
//! §6a gives the closed forms). A multiplicative model would split a slow link into two
//! half-slow end nodes.
//!
//! The elements are chosen by forward selection. The baseline per class is the median of the
//! class once the chosen elements are taken out; the noise per class is `1.4826 MAD` of the
//! residuals. For each element not yet in the model, its effect is a Huber M-estimate (k =
//! 1.345) over its cells of `residual / a`, standardised by the class noise; its z is the
//! effect over the larger of the model-based and the sandwich standard error. The strongest
//! few by loss reduction are refitted jointly with the elements already chosen (backfitting),
//! and the one that leaves the smallest loss is added, provided its joint z passes a
//! Bonferroni level (0.1 % shared over every element tested) and its slow cells are beyond
//! what stray slow cells elsewhere give by chance. Elements whose joint z falls back under the
//! level are dropped again.
//!
//! Every element in the model is significant; the suspects are those whose own cells, in the
//! class where they show most, are slower than healthy cells by at least the rule's
//! `min_factor` (what a user sees when they run that pair). The same model gives the run's
//! **detection limit**: per kind of element, the smallest slowdown of its own cells that would
//! pass the level with 90 % power, for the element of that kind hardest to see.

use super::geometry::{self, Geometry, Hop};
use super::{robust_sd, Estimate, Limit, Obs, Suspect};
use commbench_core::stats::{median, median_ci_ranks, sort_samples};
use std::collections::{BTreeMap, BTreeSet};

/// Huber's tuning constant (95 % efficiency at the normal).
const HUBER_K: f64 = 1.345;

/// Variance of the Huber estimate over that of the mean, at the normal.
const HUBER_VAR: f64 = 1.0 / 0.95;

/// Chance, shared by every element tested, that noise alone puts one in the model.
const ALPHA: f64 = 1e-3;

/// z of 90 % power, added to the level for the detection limit.
const Z_POWER: f64 = 1.281_551_565_545;

/// Most elements in the model.
const MAX_TERMS: usize = 32;

/// Candidates that pass, refitted jointly at each step of the selection.
const TRY: usize = 4;

/// Most candidates refitted at one step of the selection.
const MAX_TRIALS: usize = 16;

/// Most backfitting sweeps.
const MAX_SWEEPS: usize = 200;

/// Least noise assumed, relative to the class baseline (a simulator without jitter has none).
const NOISE_FLOOR: f64 = 1e-4;

/// Least rate of stray slow cells the chance test assumes.
const STRAY_FLOOR: f64 = 0.01;

/// Fewest switch pairs among the subtrees of one switch at one depth (four switches) for them
/// to be elements of the model.
const MIN_PAIR_GROUP: usize = 6;

/// Elements with fewer cells are held to each cell being slow on its own (rule z) instead of
/// the chance test, which cannot pass on so few.
const MIN_CHANCE_CELLS: usize = 5;

/// A part of the machine that can be slow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(super) enum Cand {
    /// Every pair crossing this hypercube dimension.
    Dim(u32),
    /// A host (index into the host names) with several ranks: pairs with a rank on it.
    Host(u32),
    /// A node (rank): pairs with it as an end.
    Node(u32),
    /// A hypercube channel `(lower end, dimension)`, both directions.
    Channel(u32, u32),
    /// A pair of ranks (hosts topology), lower first.
    Pair(u32, u32),
    /// A switch (index into the tree's switches): cells whose route goes through it.
    Switch(u32),
    /// The link from a switch to its parent, both ways: cells whose route crosses it.
    Uplink(u32),
    /// Two switches at one depth, lower index first: cells with one end under each
    /// ([`geometry::Tree::pairs_between`]).
    SwitchPair(u32, u32),
}

impl Cand {
    /// The candidate a suspect names, `None` for one this topology cannot hold.
    pub(super) fn from_suspect(s: &Suspect, geo: &Geometry) -> Option<Cand> {
        match (s.kind.as_str(), s.nodes.as_slice(), s.dimension, geo.cube()) {
            ("dimension", _, Some(k), Some(d)) if k < d => Some(Cand::Dim(k)),
            ("node", [k], _, _) => Some(Cand::Node(*k)),
            ("host", [k, ..], _, None) => {
                let h = geo.host_of(*k)?;
                (geo.ranks_on(h) == s.nodes).then_some(Cand::Host(h))
            }
            ("link", [a, b], Some(k), Some(d)) if k < d && a ^ b == 1 << k => {
                Some(Cand::Channel(*a.min(b), k))
            }
            ("link", [a, b], None, None) if a != b => Some(Cand::Pair(*a.min(b), *a.max(b))),
            ("switch", _, _, None) => Some(Cand::Switch(geo.tree()?.find(s.switch.as_deref()?)?)),
            ("uplink", _, _, None) => {
                let t = geo.tree()?;
                let k = t.find(s.switch.as_deref()?)?;
                t.has_uplink(k).then_some(Cand::Uplink(k))
            }
            ("switch_pair", _, _, None) => {
                let t = geo.tree()?;
                let a = t.find(s.switch.as_deref()?)?;
                let b = t.find(s.other_switch.as_deref()?)?;
                (a != b && t.depth(a) == t.depth(b)).then_some(Cand::SwitchPair(a.min(b), a.max(b)))
            }
            _ => None,
        }
    }

    /// The kind a [`Suspect`] writes.
    pub(super) fn kind(self) -> &'static str {
        match self {
            Cand::Dim(_) => "dimension",
            Cand::Host(_) => "host",
            Cand::Node(_) => "node",
            Cand::Channel(..) | Cand::Pair(..) => "link",
            Cand::Switch(_) => "switch",
            Cand::Uplink(_) => "uplink",
            Cand::SwitchPair(..) => "switch_pair",
        }
    }

    /// The switch's path (a switch), that of the switch below the uplink, or that of the
    /// first switch of a pair.
    pub(super) fn switch(self, geo: &Geometry) -> Option<String> {
        match self {
            Cand::Switch(k) | Cand::Uplink(k) | Cand::SwitchPair(k, _) => {
                Some(geo.tree()?.name(k).to_string())
            }
            _ => None,
        }
    }

    /// The path of a switch pair's other switch.
    pub(super) fn other_switch(self, geo: &Geometry) -> Option<String> {
        match self {
            Cand::SwitchPair(_, k) => Some(geo.tree()?.name(k).to_string()),
            _ => None,
        }
    }

    /// Whether the element is made of switches: a switch, an uplink or a switch pair.
    pub(super) fn switchy(self) -> bool {
        matches!(
            self,
            Cand::Switch(_) | Cand::Uplink(_) | Cand::SwitchPair(..)
        )
    }

    /// Kind, nodes and dimension as a [`Suspect`] writes them.
    pub(super) fn parts(self, geo: &Geometry) -> (&'static str, Vec<u32>, Option<u32>) {
        let (nodes, dimension) = match self {
            Cand::Dim(k) => (vec![], Some(k)),
            Cand::Host(h) => (geo.ranks_on(h), None),
            Cand::Node(k) => (vec![k], None),
            Cand::Channel(l, k) => (vec![l, l ^ (1 << k)], Some(k)),
            Cand::Pair(a, b) => (vec![a, b], None),
            Cand::Switch(k) | Cand::Uplink(k) => (geo.ranks_under(k), None),
            Cand::SwitchPair(a, b) => {
                let mut v = geo.ranks_under(a);
                v.extend(geo.ranks_under(b));
                v.sort_unstable();
                (v, None)
            }
        };
        (self.kind(), nodes, dimension)
    }

    /// How often the round trip of the cell (i, j) uses the element (0: not at all).
    pub(super) fn coef(self, geo: &Geometry, i: u32, j: u32) -> f64 {
        match self {
            Cand::Dim(k) => f64::from(u8::from(geometry::crosses(i, j, k))),
            Cand::Host(h) => f64::from(u8::from(
                geo.host_of(i) == Some(h) || geo.host_of(j) == Some(h),
            )),
            Cand::Node(k) => f64::from(u8::from(i == k || j == k)),
            Cand::Channel(l, k) => f64::from(geometry::channel_uses(i, j, l, k)),
            Cand::Pair(a, b) => f64::from(u8::from((i.min(j), i.max(j)) == (a, b))),
            Cand::Switch(k) => f64::from(u8::from(geo.through(i, j).contains(&Hop::Switch(k)))),
            Cand::Uplink(k) => f64::from(u8::from(geo.through(i, j).contains(&Hop::Uplink(k)))),
            Cand::SwitchPair(a, b) => f64::from(u8::from(geo.switch_pairs(i, j).contains(&(a, b)))),
        }
    }

    /// Whether the fault would make the cell (i, j) slow.
    pub(super) fn slows(self, geo: &Geometry, i: u32, j: u32) -> bool {
        self.coef(geo, i, j) > 0.0
    }

    /// The nodes the element is made of (none for a dimension).
    pub(super) fn members(self, geo: &Geometry) -> Vec<u32> {
        self.parts(geo).1
    }
}

/// Sorted values counted: `(value, how often)`.
fn counted<T: Ord + Copy>(mut v: Vec<T>) -> Vec<(T, usize)> {
    v.sort_unstable();
    let mut out: Vec<(T, usize)> = Vec::new();
    for x in v {
        match out.last_mut() {
            Some((y, n)) if *y == x => *n += 1,
            _ => out.push((x, 1)),
        }
    }
    out
}

/// Every element of the machine that a cell `(i, j)` of class `h` (of `nc`) touches, with its
/// coefficient and its group (see [`Use`]).
fn touching(
    geo: &Geometry,
    hosts: bool,
    (i, j): (u32, u32),
    h: usize,
    nc: usize,
) -> Vec<(Cand, Use)> {
    let mut out = Vec::new();
    let at = |a: f64, g: usize| Use::new(0, a, g);
    out.push((Cand::Node(i), at(1.0, h)));
    out.push((Cand::Node(j), at(1.0, h)));
    match geo.cube() {
        Some(_) => {
            let diff = i ^ j;
            out.extend(
                (0..32)
                    .filter(|k| diff >> k & 1 == 1)
                    .map(|k| (Cand::Dim(k), at(1.0, 0))),
            );
            let (mut ch, mut through) = (Vec::new(), Vec::new());
            for (a, b) in [(i, j), (j, i)] {
                geometry::route(a, b, |from, k| {
                    ch.push((from & !(1 << k), k));
                    if from != a {
                        through.push(from);
                    }
                });
            }
            for ((l, k), n) in counted(ch) {
                out.push((Cand::Channel(l, k), at(n as f64, 0)));
            }
            for (v, n) in counted(through) {
                out.push((Cand::Node(v), at(n as f64, nc + h)));
            }
        }
        None => {
            if hosts {
                if let (Some(a), Some(b)) = (geo.host_of(i), geo.host_of(j)) {
                    out.push((Cand::Host(a), at(1.0, h)));
                    if b != a {
                        out.push((Cand::Host(b), at(1.0, h)));
                    }
                }
            }
            out.push((Cand::Pair(i.min(j), i.max(j)), at(1.0, 0)));
            for hop in geo.through(i, j) {
                let cand = match hop {
                    Hop::Switch(k) => Cand::Switch(k),
                    Hop::Uplink(k) => Cand::Uplink(k),
                };
                out.push((cand, at(1.0, 0)));
            }
            for (a, b) in geo.switch_pairs(i, j) {
                out.push((Cand::SwitchPair(a, b), at(1.0, 0)));
            }
        }
    }
    out
}

/// One cell an element touches. Twelve bytes: a design holds one for every element of
/// every cell's route (about twenty a cell on a 1,024-node cube, a million cells a size).
#[derive(Debug, Clone, Copy)]
struct Use {
    /// The cell (index into the observations).
    cell: u32,
    /// How often its round trip uses the element (a count, exact in an `f32`).
    uses: f32,
    /// Which of the element's effects applies: for a node or host, the cell's class (an
    /// end), or on the hypercube the class count plus the class (a round trip the node only
    /// forwards); one effect (group 0) for the other elements.
    group: u32,
}

impl Use {
    fn new(c: usize, a: f64, g: usize) -> Use {
        Use {
            cell: c as u32,
            uses: a as f32,
            group: g as u32,
        }
    }

    /// The cell.
    #[inline]
    fn c(&self) -> usize {
        self.cell as usize
    }

    /// How often its round trip uses the element.
    #[inline]
    fn a(&self) -> f64 {
        f64::from(self.uses)
    }

    /// The effect's group.
    #[inline]
    fn g(&self) -> usize {
        self.group as usize
    }
}

/// Every candidate with the cells it touches, in candidate order.
struct Design {
    cands: Vec<Cand>,
    cells: Vec<Vec<Use>>,
    /// The switches and uplinks left out because their cells are more than half of every
    /// class they have cells in.
    untestable: Vec<Cand>,
    /// Per candidate, whether it is a switch or uplink whose cells are a third or more of a
    /// class they fall in: the class's median then sits near or among them were they slow,
    /// and the residuals from it understate their effect ([`Problem::contrast`]).
    heavy: Vec<bool>,
    /// Switch pairs per (lowest switch above both, depth): the pairs among the subtrees of
    /// one switch at one depth ([`Problem::sibling_open`]).
    pair_groups: BTreeMap<(Option<u32>, u32), usize>,
}

fn design(geo: &Geometry, obs: &[Obs], nc: usize) -> Design {
    let hosts = geo.shared_hosts();
    // Counted first, so that each element's list is allocated once at its size: grown by
    // doubling, the lists and the blocks they left would take about twice the memory (the
    // peak of a 1,024-rank run, at the end of each size).
    let mut count: BTreeMap<Cand, usize> = BTreeMap::new();
    for o in obs {
        for (cand, _) in touching(geo, hosts, (o.i, o.j), o.class, nc) {
            *count.entry(cand).or_default() += 1;
        }
    }
    let mut by: BTreeMap<Cand, Vec<Use>> = count
        .into_iter()
        .map(|(cand, k)| (cand, Vec::with_capacity(k)))
        .collect();
    for (c, o) in obs.iter().enumerate() {
        for (cand, u) in touching(geo, hosts, (o.i, o.j), o.class, nc) {
            if let Some(v) = by.get_mut(&cand) {
                v.push(Use::new(c, u.a(), u.g()));
            }
        }
    }
    let mut per_class = vec![0usize; nc];
    for o in obs {
        per_class[o.class] += 1;
    }
    // Switch pairs only among four or more switches under one (six pairs or more): among
    // fewer, each pair is a third or more of the routes between them, or both ends' uplinks.
    let mut groups: BTreeMap<(Option<u32>, u32), usize> = BTreeMap::new();
    for c in by.keys() {
        if let Some(g) = pair_group(geo, *c) {
            *groups.entry(g).or_insert(0) += 1;
        }
    }
    by.retain(|c, _| {
        pair_group(geo, *c).map_or(true, |g| {
            groups.get(&g).copied().unwrap_or(0) >= MIN_PAIR_GROUP
        })
    });
    let untestable = if geo.tree().is_some() {
        drop_unidentifiable(&mut by, obs, &per_class)
    } else {
        Vec::new()
    };
    let heavy = by
        .iter()
        .map(|(c, uses)| {
            if !c.switchy() {
                return false;
            }
            let mut n = vec![0usize; nc];
            for u in uses {
                n[obs[u.c()].class] += 1;
            }
            n.iter()
                .zip(&per_class)
                .any(|(k, all)| *k > 0 && 3 * k >= *all)
        })
        .collect();
    let (cands, cells): (Vec<Cand>, Vec<Vec<Use>>) = by.into_iter().unzip();
    let mut pair_groups = BTreeMap::new();
    for c in &cands {
        if let Some(k) = pair_group(geo, *c) {
            *pair_groups.entry(k).or_insert(0) += 1;
        }
    }
    Design {
        cands,
        cells,
        untestable,
        heavy,
        pair_groups,
    }
}

/// The group of a switch pair: the lowest switch above both (`None`: two tops) and their
/// depth.
fn pair_group(geo: &Geometry, c: Cand) -> Option<(Option<u32>, u32)> {
    let Cand::SwitchPair(a, b) = c else {
        return None;
    };
    let t = geo.tree()?;
    Some((t.lca(a, b), t.depth(a)))
}

/// Leaves out the switches and uplinks no model could tell from something else, and returns
/// the first kind: one whose cells are more than half of every class it has cells in (a slow
/// top switch of a tree is every route between its subtrees, a slow class, which its baseline
/// takes; the uplink of one of few leaves is most of the routes between them, and its class's
/// median, the healthy baseline, would be one of its own slow cells, so that the healthy
/// cells looked fast and a sibling's uplink, sharing half its routes, could be blamed
/// instead), and one whose
/// cells are exactly another element's, which is kept instead: a node or host before an
/// uplink, an uplink before a switch (a leaf switch with one host has that host's cells; a
/// switch whose routes all leave it by its uplink, the uplink's).
fn drop_unidentifiable(
    by: &mut BTreeMap<Cand, Vec<Use>>,
    obs: &[Obs],
    per_class: &[usize],
) -> Vec<Cand> {
    use std::collections::hash_map::DefaultHasher;
    use std::collections::HashMap;
    use std::hash::{Hash, Hasher};
    let nc = per_class.len();
    let most_of_a_class = |uses: &[Use]| {
        let mut n = vec![0usize; nc];
        for u in uses {
            n[obs[u.c()].class] += 1;
        }
        let mut touched = n.iter().zip(per_class).filter(|(k, _)| **k > 0).peekable();
        touched.peek().is_some() && touched.all(|(k, all)| 2 * k > *all)
    };
    // A switch pair a third or more of a class (two leaves of three under a spine): the
    // class's median would sit among its cells were another part slow there (one of the
    // three leaves), and a healthy pair came out slow against it.
    let third_of_a_class = |uses: &[Use]| {
        let mut n = vec![0usize; nc];
        for u in uses {
            n[obs[u.c()].class] += 1;
        }
        n.iter()
            .zip(per_class)
            .any(|(k, all)| *k > 0 && 3 * k >= *all)
    };
    let untestable: Vec<Cand> = by
        .iter()
        .filter(|(c, uses)| {
            (c.switchy() && most_of_a_class(uses))
                || (matches!(c, Cand::SwitchPair(..)) && third_of_a_class(uses))
        })
        .map(|(c, _)| *c)
        .collect();
    for c in &untestable {
        by.remove(c);
    }
    let key = |uses: &[Use]| {
        let mut h = DefaultHasher::new();
        for u in uses {
            u.c().hash(&mut h);
        }
        h.finish()
    };
    // Kept first: nodes, hosts and pairs, then uplinks, then switches, then switch pairs
    // (two leaves alone under a spine: their pair's routes are either one's uplink's).
    let rank = |c: &Cand| match c {
        Cand::SwitchPair(..) => 3,
        Cand::Switch(_) => 2,
        Cand::Uplink(_) => 1,
        _ => 0,
    };
    let mut order: Vec<Cand> = by.keys().copied().collect();
    order.sort_by_key(|c| (rank(c), *c));
    let mut seen: HashMap<u64, Vec<Cand>> = HashMap::new();
    let mut gone = Vec::new();
    for c in order {
        let uses = &by[&c];
        let k = key(uses);
        let same = |d: &Cand| {
            let other = &by[d];
            other.len() == uses.len() && other.iter().zip(uses).all(|(a, b)| a.cell == b.cell)
        };
        let twins = seen.entry(k).or_default();
        if c.switchy() && twins.iter().any(same) {
            gone.push(c);
        } else {
            twins.push(c);
        }
    }
    for c in gone {
        by.remove(&c);
    }
    untestable
}

/// Huber's rho.
fn rho(u: f64) -> f64 {
    let a = u.abs();
    if a <= HUBER_K {
        0.5 * u * u
    } else {
        HUBER_K * a - 0.5 * HUBER_K * HUBER_K
    }
}

/// Weighted median of `(value, scale)` pairs, weight `1 / scale`.
fn weighted_median(v: &[(f64, f64)]) -> f64 {
    let mut s: Vec<(f64, f64)> = v.iter().map(|&(x, sc)| (x, 1.0 / sc)).collect();
    s.sort_by(|a, b| a.0.total_cmp(&b.0));
    let half = s.iter().map(|p| p.1).sum::<f64>() / 2.0;
    let mut acc = 0.0;
    for &(x, w) in &s {
        acc += w;
        if acc >= half {
            return x;
        }
    }
    s.last().map_or(0.0, |p| p.0)
}

/// An effect estimated from `(value, scale)` pairs: Huber's M-estimate of location.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Effect {
    beta: f64,
    /// Standard error: the larger of the model-based and the sandwich one.
    se: f64,
}

impl Effect {
    fn z(&self) -> f64 {
        if self.se > 0.0 {
            self.beta / self.se
        } else {
            0.0
        }
    }
}

fn huber(v: &[(f64, f64)], start: Option<f64>) -> Option<Effect> {
    if v.is_empty() {
        return None;
    }
    let mut b = start.unwrap_or_else(|| weighted_median(v));
    let smin = v.iter().map(|p| p.1).fold(f64::INFINITY, f64::min);
    for _ in 0..100 {
        let (mut num, mut den) = (0.0, 0.0);
        for &(x, s) in v {
            let u = (x - b) / s;
            let w = if u.abs() <= HUBER_K {
                1.0
            } else {
                HUBER_K / u.abs()
            };
            num += w * x / (s * s);
            den += w / (s * s);
        }
        let nb = num / den;
        let done = (nb - b).abs() <= 1e-12 * (b.abs() + smin);
        b = nb;
        if done {
            break;
        }
    }
    let info: f64 = v.iter().map(|p| 1.0 / (p.1 * p.1)).sum();
    let model = (HUBER_VAR / info).sqrt();
    // Cells that scatter about the effect more than their noise says (a partial explanation,
    // a fault that is not one effect) widen its error by their robust spread.
    let spread = robust_sd(&v.iter().map(|&(x, s)| (x - b) / s).collect::<Vec<_>>()).unwrap_or(0.0);
    Some(Effect {
        beta: b,
        se: model * spread.max(1.0),
    })
}

/// Upper standard normal quantile: `z` with `P(Z > z) = p`, for `0 < p < 1`: minus the
/// lower quantile of `p` ([`commbench_core::stats::normal_quantile`], Acklam's rational
/// approximation), which keeps its precision in the far tail.
pub(super) fn normal_upper(p: f64) -> f64 {
    -commbench_core::stats::normal_quantile(p.clamp(1e-300, 1.0 - 1e-16)).unwrap_or(0.0)
}

/// Probability that `X >= s` for `X ~ Binomial(m, p)`, summed in log space.
pub(super) fn binomial_tail(m: usize, s: usize, p: f64) -> f64 {
    if s == 0 || p >= 1.0 {
        return 1.0;
    }
    if s > m || p <= 0.0 {
        return 0.0;
    }
    let (lp, lq) = (p.ln(), (1.0 - p).ln());
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

/// What [`select`] works on.
pub(super) struct Input<'a> {
    pub geo: &'a Geometry,
    pub obs: &'a [Obs],
    /// Cell z a slow cell must exceed (the rule's `z`).
    pub rule_z: f64,
    /// Smallest slowdown of an element's own cells worth reporting.
    pub min_factor: f64,
}

/// The fitted model: per class baseline and noise, the elements chosen with their effects,
/// per cell residual.
#[derive(Debug, Clone)]
struct State {
    base: Vec<f64>,
    sigma: Vec<f64>,
    terms: Vec<usize>,
    /// Per term, its effect in each class (the same in every class but for nodes and hosts).
    beta: Vec<Vec<f64>>,
    /// Sum of the terms' contributions per cell.
    fault: Vec<f64>,
    resid: Vec<f64>,
}

/// The model's view of the matrix: times, classes and the design.
struct Problem<'a> {
    inp: &'a Input<'a>,
    t: Vec<f64>,
    nc: usize,
    /// Per class, the noise of mirrored pairs: `1.4826 MAD(t_ij - t_ji) / sqrt 2` (every
    /// element slows both cells of a pair alike, so no fault shows in it), when the class has
    /// enough mirrored pairs.
    mirror: Vec<Option<f64>>,
    design: Design,
    /// The Bonferroni level every element's z must pass.
    z_level: f64,
}

/// Inverse-variance pooling of per-class effects into one.
fn pooled(parts: &[Effect]) -> Option<Effect> {
    let w: f64 = parts
        .iter()
        .filter(|e| e.se > 0.0 && e.se.is_finite())
        .map(|e| 1.0 / (e.se * e.se))
        .sum();
    if parts.is_empty() {
        return None;
    }
    if w <= 0.0 {
        return Some(Effect {
            beta: parts.iter().map(|e| e.beta).sum::<f64>() / parts.len() as f64,
            se: 0.0,
        });
    }
    let b = parts
        .iter()
        .filter(|e| e.se > 0.0 && e.se.is_finite())
        .map(|e| e.beta / (e.se * e.se))
        .sum::<f64>()
        / w;
    Some(Effect {
        beta: b,
        se: 1.0 / w.sqrt(),
    })
}

impl Problem<'_> {
    fn class(&self, c: usize) -> usize {
        self.inp.obs[c].class
    }

    /// Whether element `e` has an effect of its own in each class: a node or a host adds
    /// its own send and receive costs, which need not be the same on a 1-hop pair as on a
    /// longer one, nor through the network as within a host; a channel, a dimension or a
    /// pair adds the same time to every use.
    fn split(&self, e: usize) -> bool {
        matches!(self.design.cands[e], Cand::Node(_) | Cand::Host(_))
    }

    /// Per class, the median of `t - fault`, the noise and the residuals. The noise is that
    /// of mirrored pairs while elements are chosen (`strict` false: structure not yet in the
    /// model must not hide in the noise), and the larger of it and the residuals' otherwise.
    fn baselines(&self, fault: &[f64], strict: bool) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
        let mut by: Vec<Vec<f64>> = vec![Vec::new(); self.nc];
        for (c, t) in self.t.iter().enumerate() {
            by[self.class(c)].push(t - fault[c]);
        }
        let base: Vec<f64> = by
            .iter()
            .map(|v| {
                let mut v = v.clone();
                sort_samples(&mut v);
                median(&v).unwrap_or(0.0)
            })
            .collect();
        let resid: Vec<f64> = (0..self.t.len())
            .map(|c| self.t[c] - fault[c] - base[self.class(c)])
            .collect();
        let mut rby: Vec<Vec<f64>> = vec![Vec::new(); self.nc];
        for (c, r) in resid.iter().enumerate() {
            rby[self.class(c)].push(*r);
        }
        let sigma = rby
            .into_iter()
            .zip(&base)
            .zip(&self.mirror)
            .map(|((v, b), m)| {
                let r = robust_sd(&v).unwrap_or(0.0);
                let s = match (m, strict) {
                    (Some(m), false) => *m,
                    (Some(m), true) => m.max(r),
                    (None, _) => r,
                };
                s.max(NOISE_FLOOR * b.abs()).max(1e-12)
            })
            .collect();
        (base, sigma, resid)
    }

    /// Effects an element may have: one per group of [`Use`].
    fn groups(&self) -> usize {
        2 * self.nc
    }

    /// Whether a use is one of the element's own cells (an end, for a node or a host): what
    /// its factor and detection limit are about.
    fn own_use(&self, u: &Use) -> bool {
        u.g() < self.nc
    }

    /// `(value, scale)` of each cell of element `e` (of group `g` only, when given) given
    /// residuals that exclude it: the residual plus the element's own part, per use.
    fn partials(
        &self,
        e: usize,
        s: (&[f64], &[f64]),
        beta: &[f64],
        g: Option<usize>,
    ) -> Vec<(f64, f64)> {
        let (resid, sigma) = s;
        self.design.cells[e]
            .iter()
            .filter(|u| g.map_or(true, |g| u.g() == g))
            .map(|u| {
                (
                    (resid[u.c()] + u.a() * beta[u.g()]) / u.a(),
                    sigma[self.class(u.c())] / u.a(),
                )
            })
            .collect()
    }

    /// The effect of element `e` from its cells: per class for a node or host, else one; its
    /// new per-class effects and the pooled effect (the z a selection uses).
    fn effect_of(
        &self,
        e: usize,
        s: (&[f64], &[f64]),
        beta: &[f64],
        warm: bool,
    ) -> Option<(Vec<f64>, Effect)> {
        if !self.split(e) {
            let v = self.partials(e, s, beta, None);
            let eff = huber(&v, warm.then(|| beta.first().copied().unwrap_or(0.0)))?;
            return Some((vec![eff.beta; self.groups()], eff));
        }
        let present: BTreeSet<usize> = self.design.cells[e].iter().map(|u| u.g()).collect();
        let mut new = beta.to_vec();
        let mut parts = Vec::new();
        for g in present {
            let v = self.partials(e, s, beta, Some(g));
            if let Some(eff) = huber(&v, warm.then_some(beta[g])) {
                new[g] = eff.beta;
                // The pooled effect, which decides, is that on its own cells.
                if g < self.nc {
                    parts.push(eff);
                }
            }
        }
        pooled(&parts).map(|p| (new, p))
    }

    /// How much slower element `e`'s cells are than the other cells of their classes: per
    /// class, the median of its cells' residuals less that of the others', pooled by the
    /// median over its cells; `None` when not positive or nothing to compare with.
    fn contrast(&self, e: usize, resid: &[f64]) -> Option<f64> {
        let mut mine: Vec<Vec<f64>> = vec![Vec::new(); self.nc];
        let mut inside = vec![false; resid.len()];
        for u in &self.design.cells[e] {
            mine[self.class(u.c())].push(resid[u.c()] / u.a());
            inside[u.c()] = true;
        }
        let mut rest: Vec<Vec<f64>> = vec![Vec::new(); self.nc];
        for (c, r) in resid.iter().enumerate() {
            if !inside[c] && !mine[self.class(c)].is_empty() {
                rest[self.class(c)].push(*r);
            }
        }
        let mut per_cell = Vec::new();
        for (m, r) in mine.iter_mut().zip(rest.iter_mut()) {
            if m.is_empty() || r.is_empty() {
                continue;
            }
            sort_samples(m);
            sort_samples(r);
            let d = median(m)? - median(r)?;
            per_cell.extend(std::iter::repeat(d).take(m.len()));
        }
        sort_samples(&mut per_cell);
        median(&per_cell).filter(|d| *d > 0.0)
    }

    /// Backfitting of the baselines and the effects of `terms` (warm start `beta`).
    fn fit(&self, terms: &[usize], beta: &[Vec<f64>], strict: bool) -> State {
        let mut beta = beta.to_vec();
        beta.resize(terms.len(), vec![0.0; self.groups()]);
        let mut fault = vec![0.0; self.t.len()];
        for (k, &e) in terms.iter().enumerate() {
            for u in &self.design.cells[e] {
                fault[u.c()] += u.a() * beta[k][u.g()];
            }
        }
        let (mut base, mut sigma, mut resid) = self.baselines(&fault, strict);
        for _ in 0..MAX_SWEEPS {
            let mut change: f64 = 0.0;
            for (k, &e) in terms.iter().enumerate() {
                let Some((new, _)) = self.effect_of(e, (&resid, &sigma), &beta[k], true) else {
                    continue;
                };
                for u in &self.design.cells[e] {
                    let d = u.a() * (new[u.g()] - beta[k][u.g()]);
                    fault[u.c()] += d;
                    resid[u.c()] -= d;
                }
                for (n, o) in new.iter().zip(&beta[k]) {
                    change = change.max((n - o).abs());
                }
                beta[k] = new;
            }
            let old = base.clone();
            (base, sigma, resid) = self.baselines(&fault, strict);
            for (b, o) in base.iter().zip(&old) {
                change = change.max((b - o).abs());
            }
            let tol = 1e-7 * sigma.iter().copied().fold(f64::INFINITY, f64::min);
            if change <= tol {
                break;
            }
        }
        State {
            base,
            sigma,
            terms: terms.to_vec(),
            beta,
            fault,
            resid,
        }
    }

    /// Robust loss of a state's residuals on the noise `sigma` (fixed for comparisons).
    fn loss(&self, s: &State, sigma: &[f64]) -> f64 {
        s.resid
            .iter()
            .enumerate()
            .map(|(c, r)| rho(r / sigma[self.class(c)]))
            .sum()
    }

    /// The pooled effect of term `k` of `s` given the others.
    fn term_effect(&self, s: &State, k: usize) -> Option<Effect> {
        self.effect_of(s.terms[k], (&s.resid, &s.sigma), &s.beta[k], true)
            .map(|p| p.1)
    }

    /// Term `k`'s effect on its cells of class `h` alone (pooled for an element with one
    /// effect).
    fn class_effect(&self, s: &State, k: usize, h: usize) -> Option<Effect> {
        let e = s.terms[k];
        if !self.split(e) {
            return self.term_effect(s, k);
        }
        huber(
            &self.partials(e, (&s.resid, &s.sigma), &s.beta[k], Some(h)),
            Some(s.beta[k][h]),
        )
    }

    /// The effects of element `e` in `s` (zero when it is not a term).
    fn beta_of(&self, s: &State, e: usize) -> Vec<f64> {
        s.terms
            .iter()
            .position(|&t| t == e)
            .map_or_else(|| vec![0.0; self.groups()], |k| s.beta[k].clone())
    }

    /// Whether the slow cells of element `e` (partial residuals over half its effect and
    /// over twice the noise) are more than stray slow cells elsewhere give by chance; for
    /// an element of few cells, whether each is slow with a z over the rule's.
    fn beyond_chance(&self, s: &State, e: usize, beta: &[f64], typical: f64) -> bool {
        let cells = &self.design.cells[e];
        let sig = |c: usize| s.sigma[self.class(c)];
        let own = self.beta_of(s, e);
        let partial = |u: &Use| s.resid[u.c()] + u.a() * own[u.g()];
        if cells.len() < MIN_CHANCE_CELLS {
            return cells
                .iter()
                .all(|u| partial(u) / sig(u.c()) > self.inp.rule_z);
        }
        let level = |c: usize, b: f64| (b / 2.0).max(2.0 * sig(c));
        let slow = cells
            .iter()
            .filter(|u| partial(u) > level(u.c(), u.a() * beta[u.g()]))
            .count();
        let mine: BTreeSet<usize> = cells.iter().map(|u| u.c()).collect();
        let (mut others, mut stray) = (0usize, 0usize);
        for c in (0..self.t.len()).filter(|c| !mine.contains(c)) {
            others += 1;
            stray += usize::from(s.resid[c] > level(c, typical));
        }
        let p = if others == 0 {
            STRAY_FLOOR
        } else {
            (stray as f64 / others as f64).max(STRAY_FLOOR)
        };
        binomial_tail(cells.len(), slow, p) <= ALPHA / self.design.cands.len().max(1) as f64
    }

    /// Whether dimension terms may still be added to `s`: at most half of the dimensions are
    /// slow against the others. Were more slow, the hop cost itself would be (every k-hop cell
    /// crosses k dimensions, so a shift shared by every dimension is the class baselines' to
    /// explain).
    fn dims_open(&self, s: &State) -> bool {
        let dims_in = s
            .terms
            .iter()
            .filter(|&&t| matches!(self.design.cands[t], Cand::Dim(_)))
            .count();
        let cap = self.inp.geo.cube().map_or(0, |d| (d / 2) as usize);
        dims_in < cap
    }

    /// Whether element `e` may enter beside the terms of `s`: a switch or an uplink only
    /// while at most half of the switches under its parent (it included) have a switch or
    /// uplink term. Every route between those siblings crosses exactly two of their uplinks
    /// (and goes through two of them), so all of them together are the class's baseline
    /// again: more could trade effect with it, as cube dimensions can
    /// ([`Problem::dims_open`]).
    ///
    /// Likewise a switch pair only while at most half (rounded up) of the switch pairs of its
    /// group (the pairs among one switch's subtrees at one depth, [`pair_group`]) have a term:
    /// together they are the routes of one class between those subtrees.
    fn sibling_open(&self, s: &State, e: usize) -> bool {
        if let Some(g) = pair_group(self.inp.geo, self.design.cands[e]) {
            let with = 1 + s
                .terms
                .iter()
                .filter(|&&x| pair_group(self.inp.geo, self.design.cands[x]) == Some(g))
                .count();
            let all = self.design.pair_groups.get(&g).copied().unwrap_or(1);
            return 2 * (with - 1) < all;
        }
        let (Cand::Uplink(k) | Cand::Switch(k)) = self.design.cands[e] else {
            return true;
        };
        let Some(t) = self.inp.geo.tree() else {
            return true;
        };
        let Some(p) = t.parent(k) else {
            return matches!(self.design.cands[e], Cand::Switch(_));
        };
        let mut with: BTreeSet<u32> = s
            .terms
            .iter()
            .filter_map(|&x| match self.design.cands[x] {
                Cand::Uplink(j) | Cand::Switch(j) if t.parent(j) == Some(p) => Some(j),
                _ => None,
            })
            .collect();
        with.insert(k);
        2 * with.len() <= t.children(p)
    }

    /// Forward selection from no term, refitted and pruned; again without any switch, uplink
    /// or switch pair whose cells contradict its effect in some class
    /// ([`Problem::contradicted`]), until none does.
    fn selection(&self) -> State {
        let mut barred = BTreeSet::new();
        loop {
            let mut s = self.fit(&[], &[], false);
            while s.terms.len() < MAX_TERMS {
                match self.step(&s, &barred) {
                    Some(next) => s = next,
                    None => break,
                }
            }
            s = self.fit(&s.terms, &s.beta, true);
            s = self.prune(s);
            match self.contradicted(&s) {
                Some(e) if barred.len() < MAX_TERMS => {
                    barred.insert(e);
                }
                _ => return s,
            }
        }
    }

    /// The first switch, uplink or switch pair of `s` whose cells in one of their classes
    /// are not slower than the rest of that class by half of what its effect would make them
    /// (medians of log time; only classes where both have [`MIN_CHANCE_CELLS`] cells). A
    /// slow uplink among three spines is most of the routes between them and no element
    /// (not tested); the spine's switch, whose cells are the uplink's there, can take its
    /// effect, and then its healthy routes within the spine read fast against their class,
    /// whose baseline moves down with them, and the other spines' routes of that class slow.
    /// A fault of the switch itself slows every class it is in.
    fn contradicted(&self, s: &State) -> Option<usize> {
        for (k, &e) in s.terms.iter().enumerate() {
            if !self.design.cands[e].switchy() {
                continue;
            }
            let beta = s.beta[k].first().copied().unwrap_or(0.0);
            let mut mine: Vec<Vec<f64>> = vec![Vec::new(); self.nc];
            let mut inside = vec![false; self.t.len()];
            for u in &self.design.cells[e] {
                mine[self.class(u.c())].push(self.t[u.c()].ln());
                inside[u.c()] = true;
            }
            let mut rest: Vec<Vec<f64>> = vec![Vec::new(); self.nc];
            for (c, t) in self.t.iter().enumerate() {
                if !inside[c] {
                    rest[self.class(c)].push(t.ln());
                }
            }
            for h in 0..self.nc {
                let (m, r) = (&mut mine[h], &mut rest[h]);
                let base = s.base.get(h).copied().unwrap_or(0.0);
                if m.len() < MIN_CHANCE_CELLS || r.len() < MIN_CHANCE_CELLS || base <= 0.0 {
                    continue;
                }
                sort_samples(m);
                sort_samples(r);
                let (Some(a), Some(b)) = (median(m), median(r)) else {
                    continue;
                };
                let expected = (1.0 + beta.max(0.0) / base).ln();
                if a - b < 0.5 * expected {
                    return Some(e);
                }
            }
        }
        None
    }

    /// One step of forward selection from `s`: the candidate that, refitted with the terms
    /// of `s`, leaves the least loss among the strongest few, when it passes.
    fn step(&self, s: &State, barred: &BTreeSet<usize>) -> Option<State> {
        let dims = self.dims_open(s);
        let zero = vec![0.0; self.groups()];
        let mut scored: Vec<(f64, usize, Vec<f64>)> = Vec::new();
        for e in
            (0..self.design.cands.len()).filter(|e| !s.terms.contains(e) && !barred.contains(e))
        {
            if !dims && matches!(self.design.cands[e], Cand::Dim(_)) {
                continue;
            }
            if !self.sibling_open(s, e) {
                continue;
            }
            let Some((beta, eff)) = self.effect_of(e, (&s.resid, &s.sigma), &zero, false) else {
                continue;
            };
            if eff.beta <= 0.0 || eff.z() <= self.z_level {
                continue;
            }
            let gain: f64 = self.design.cells[e]
                .iter()
                .map(|u| {
                    let sg = s.sigma[self.class(u.c())];
                    rho(s.resid[u.c()] / sg) - rho((s.resid[u.c()] - u.a() * beta[u.g()]) / sg)
                })
                .sum();
            scored.push((gain, e, beta));
        }
        scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        if let Some(best) = self.best_trial(s, scored) {
            return Some(best);
        }
        // An element holding much of a class (the uplink of one of three switches under a
        // parent holds two thirds of the routes between them) may not stand out from a
        // baseline its own slow cells pulled up, and nothing else does either: it is tried
        // from the contrast of its cells with the rest of their classes, and the joint fit,
        // whose baseline no longer counts its cells once it is in, decides as for any other.
        let heavy: Vec<(f64, usize, Vec<f64>)> = (0..self.design.cands.len())
            .filter(|&e| self.design.heavy[e] && !s.terms.contains(&e) && !barred.contains(&e))
            .filter(|&e| self.sibling_open(s, e))
            .filter_map(|e| Some((0.0, e, vec![self.contrast(e, &s.resid)?; self.groups()])))
            .collect();
        self.best_trial(s, heavy)
    }

    /// Of the candidates `scored` (best first, each with its starting effects), the first
    /// [`TRY`] that pass refitted jointly with the terms of `s`, the one leaving the least loss.
    fn best_trial(&self, s: &State, scored: Vec<(f64, usize, Vec<f64>)>) -> Option<State> {
        let mut best: Option<(f64, State)> = None;
        let mut passed = 0;
        for (_, e, b0) in scored.into_iter().take(MAX_TRIALS) {
            if passed == TRY {
                break;
            }
            let mut terms = s.terms.clone();
            terms.push(e);
            let mut beta = s.beta.clone();
            beta.push(b0);
            let trial = self.fit(&terms, &beta, false);
            let k = terms.len() - 1;
            let ok = self.term_effect(&trial, k).is_some_and(|eff| {
                eff.beta > 0.0
                    && eff.z() > self.z_level
                    && self.beyond_chance(&trial, e, &trial.beta[k], eff.beta)
            });
            if !ok {
                continue;
            }
            passed += 1;
            let loss = self.loss(&trial, &s.sigma);
            if best.as_ref().map_or(true, |b| loss < b.0) {
                best = Some((loss, trial));
            }
        }
        best.map(|b| b.1)
    }

    /// Drops the weakest term while any falls under the level.
    fn prune(&self, mut s: State) -> State {
        loop {
            let weakest = (0..s.terms.len())
                .map(|k| (k, self.term_effect(&s, k).map_or(0.0, |e| e.z())))
                .min_by(|a, b| a.1.total_cmp(&b.1));
            match weakest {
                Some((k, z)) if z <= self.z_level => {
                    let mut terms = s.terms.clone();
                    let mut beta = s.beta.clone();
                    terms.remove(k);
                    beta.remove(k);
                    s = self.fit(&terms, &beta, true);
                }
                _ => return s,
            }
        }
    }

    /// The healthy value of a cell of an element whose effects are `own`: the baseline plus
    /// every other term of `s`.
    fn healthy(&self, s: &State, own: &[f64], u: &Use) -> f64 {
        s.base[self.class(u.c())] + s.fault[u.c()] - u.a() * own[u.g()]
    }

    /// The slowdown of an element's own cells: in the class where their median is largest,
    /// that median (of each cell's time over its healthy value) with its 95 % CI, the class
    /// and its cell count.
    fn own_factor(&self, s: &State, e: usize) -> Option<(Estimate, usize, usize)> {
        let own = self.beta_of(s, e);
        let mut by: BTreeMap<usize, Vec<f64>> = BTreeMap::new();
        for u in self.design.cells[e].iter().filter(|u| self.own_use(u)) {
            let healthy = self.healthy(s, &own, u);
            if healthy > 0.0 && self.t[u.c()] > 0.0 {
                by.entry(self.class(u.c()))
                    .or_default()
                    .push((self.t[u.c()] / healthy).ln());
            }
        }
        by.into_iter()
            .map(|(h, v)| (estimate(&v), h, v.len()))
            .max_by(|a, b| a.0.value.total_cmp(&b.0.value))
    }

    /// The slowdown the model's effects of element `e` give its own cells in class `h`: the
    /// median over them of `(healthy + a beta) / healthy`.
    fn implied_factor(&self, s: &State, e: usize, h: usize) -> f64 {
        let own = self.beta_of(s, e);
        let mut v: Vec<f64> = self.design.cells[e]
            .iter()
            .filter(|u| self.own_use(u) && self.class(u.c()) == h)
            .filter_map(|u| {
                let healthy = self.healthy(s, &own, u);
                (healthy > 0.0).then(|| (healthy + u.a() * own[u.g()]) / healthy)
            })
            .collect();
        sort_samples(&mut v);
        median(&v).unwrap_or(1.0)
    }

    /// Smallest effect of `e` that passes with 90 % power, and the factor it gives its own
    /// cells in the class where it shows most; `None` without cells or baseline.
    fn limit_of(&self, s: &State, e: usize) -> Option<(f64, f64)> {
        let cells: Vec<&Use> = self.design.cells[e]
            .iter()
            .filter(|u| self.own_use(u))
            .collect();
        let info: f64 = cells
            .iter()
            .map(|u| (u.a() / s.sigma[self.class(u.c())]).powi(2))
            .sum();
        if info <= 0.0 {
            return None;
        }
        let mut beta = (self.z_level + Z_POWER) * (HUBER_VAR / info).sqrt();
        if cells.len() < MIN_CHANCE_CELLS {
            for u in &cells {
                beta = beta.max((self.inp.rule_z + Z_POWER) * s.sigma[self.class(u.c())] / u.a());
            }
        }
        let mut by: BTreeMap<usize, Vec<f64>> = BTreeMap::new();
        for u in &cells {
            let b = s.base[self.class(u.c())];
            if b > 0.0 {
                by.entry(self.class(u.c()))
                    .or_default()
                    .push(1.0 + u.a() * beta / b);
            }
        }
        let factor = by
            .into_values()
            .filter_map(|mut v| {
                sort_samples(&mut v);
                median(&v)
            })
            .fold(f64::NEG_INFINITY, f64::max);
        factor.is_finite().then_some((beta, factor))
    }
}

/// What [`select`] finds: suspects, the baseline per class (us), per cell log excess over it,
/// and the detection limits.
pub(super) struct Selected {
    pub suspects: Vec<Suspect>,
    /// The switches and uplinks the model could not test (see [`drop_unidentifiable`]).
    pub untestable: Vec<String>,
    pub baseline: Vec<Option<f64>>,
    pub excess: Vec<f64>,
    pub limits: Vec<Limit>,
    /// Elements in the model whose own cells are slower by less than `min_factor`.
    pub below: Vec<Suspect>,
    /// The model's noise relative to the healthy time, the largest over the classes.
    pub noise_rel: f64,
}

/// Median of log values as a factor with the order-statistic 95 % CI of the median (the range
/// under 6 values).
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

/// Forward selection of the elements that explain the matrix, the suspects among them, and
/// the run's detection limits.
pub(super) fn select(inp: &Input<'_>) -> Selected {
    let nc = inp.geo.class_count();
    let design = design(inp.geo, inp.obs, nc);
    let tests = design.cands.len().max(1) as f64;
    let t: Vec<f64> = inp.obs.iter().map(|o| o.y.exp()).collect();
    let p = Problem {
        inp,
        mirror: mirror_noise(inp.obs, &t, nc),
        t,
        nc,
        z_level: normal_upper(ALPHA / tests).max(inp.rule_z),
        design,
    };
    let s = p.selection();
    let mut suspects = Vec::new();
    let mut below = Vec::new();
    for k in 0..s.terms.len() {
        let e = s.terms[k];
        let Some((own, h, count)) = p.own_factor(&s, e) else {
            continue;
        };
        let Some(eff) = p.class_effect(&s, k, h) else {
            continue;
        };
        // Named when both what its cells show and what the model's effect from all of them
        // gives them reach the factor: a few cells slow for another reason (a node's load
        // under the rounds) do not make an element of many slow.
        let implied = p.implied_factor(&s, e, h);
        let found = describe(&p, e, eff, own, h, count);
        if own.value < inp.min_factor || implied < inp.min_factor {
            below.push(found);
        } else {
            suspects.push(found);
        }
    }
    suspects.sort_by(|a, b| {
        suspect_order(&a.kind)
            .cmp(&suspect_order(&b.kind))
            .then(b.factor.value.total_cmp(&a.factor.value))
    });
    let limits = limits(&p, &s);
    let present: BTreeSet<usize> = inp.obs.iter().map(|o| o.class).collect();
    let baseline = (0..nc)
        .map(|h| present.contains(&h).then(|| s.base[h]).filter(|b| *b > 0.0))
        .collect::<Vec<_>>();
    let excess = inp
        .obs
        .iter()
        .zip(&p.t)
        .map(|(o, t)| baseline[o.class].map_or(0.0, |b| (t / b).ln()))
        .collect();
    let noise_rel = s
        .sigma
        .iter()
        .zip(&s.base)
        .zip(&baseline)
        .filter(|(_, b)| b.is_some())
        .map(|((sg, b), _)| sg / b)
        .fold(0.0, f64::max);
    let untestable = p
        .design
        .untestable
        .iter()
        .filter_map(|&c| {
            let name = c.switch(inp.geo)?;
            Some(match c {
                Cand::Uplink(_) => format!("the uplink of {name}"),
                Cand::SwitchPair(..) => {
                    format!("switch pair {name} - {}", c.other_switch(inp.geo)?)
                }
                _ => format!("switch {name}"),
            })
        })
        .collect();
    Selected {
        untestable,
        suspects,
        baseline,
        excess,
        limits,
        below,
        noise_rel,
    }
}

/// The detection limit per kind of element: the largest over the elements of the kind of
/// [`Problem::limit_of`], kinds in suspect order.
fn limits(p: &Problem<'_>, s: &State) -> Vec<Limit> {
    let mut limits: BTreeMap<&'static str, (f64, f64, usize)> = BTreeMap::new();
    for (e, &c) in p.design.cands.iter().enumerate() {
        if let Some((beta, factor)) = p.limit_of(s, e) {
            let l = limits.entry(c.kind()).or_insert((0.0, 0.0, 0));
            if factor > l.1 {
                (l.0, l.1) = (beta, factor);
            }
            l.2 += 1;
        }
    }
    let mut limits: Vec<Limit> = limits
        .into_iter()
        .map(|(kind, (beta, factor, elements))| Limit {
            kind: kind.to_string(),
            factor,
            reported_from: factor.max(p.inp.min_factor),
            effect_us: beta,
            elements,
        })
        .collect();
    limits.sort_by_key(|l| suspect_order(&l.kind));
    limits
}

/// Fewest mirrored pairs of a class for its noise from mirrors.
const MIN_MIRRORS: usize = 6;

/// Per class, `1.4826 MAD(t_ij - t_ji) / sqrt 2` over its mirrored pairs.
fn mirror_noise(obs: &[Obs], t: &[f64], nc: usize) -> Vec<Option<f64>> {
    let at: std::collections::HashMap<(u32, u32), usize> = obs
        .iter()
        .enumerate()
        .map(|(c, o)| ((o.i, o.j), c))
        .collect();
    let mut d: Vec<Vec<f64>> = vec![Vec::new(); nc];
    for (c, o) in obs.iter().enumerate().filter(|(_, o)| o.i < o.j) {
        if let Some(&m) = at.get(&(o.j, o.i)) {
            d[o.class].push(t[c] - t[m]);
        }
    }
    d.into_iter()
        .map(|v| {
            (v.len() >= MIN_MIRRORS)
                .then(|| robust_sd(&v).map(|s| s / std::f64::consts::SQRT_2))
                .flatten()
        })
        .collect()
}

/// Order of kinds in a list of suspects or limits.
pub(super) fn suspect_order(kind: &str) -> u8 {
    match kind {
        "dimension" => 0,
        "switch" => 1,
        "uplink" => 2,
        "switch_pair" => 3,
        "host" => 4,
        "node" => 5,
        "link" => 6,
        _ => 7,
    }
}

/// The suspect an element of the model makes, with its evidence sentence.
fn describe(
    p: &Problem<'_>,
    e: usize,
    eff: Effect,
    own: Estimate,
    class: usize,
    count: usize,
) -> Suspect {
    let cand = p.design.cands[e];
    let geo = p.inp.geo;
    let subject = match cand {
        Cand::Dim(k) => format!("cells crossing dimension {k}"),
        Cand::Host(h) => format!("cells with a rank on host {}", geo.host_name(h)),
        Cand::Node(k) => format!("cells with {}", geo.rank_name(k)),
        Cand::Channel(l, k) => format!(
            "cells routed over the channel {l}-{} (dimension {k})",
            l ^ (1 << k)
        ),
        Cand::Pair(a, b) => format!("measurements of the pair {a}-{b}"),
        Cand::Switch(k) => format!(
            "cells routed through switch {}",
            geo.tree().map_or("", |t| t.name(k))
        ),
        Cand::Uplink(k) => match geo.tree() {
            Some(t) => format!(
                "cells routed over the uplink of switch {} to {}",
                t.name(k),
                t.parent_name(k).unwrap_or("its parent")
            ),
            None => String::new(),
        },
        Cand::SwitchPair(a, b) => match geo.tree() {
            Some(t) => format!(
                "cells routed between switches {} and {}",
                t.name(a),
                t.name(b)
            ),
            None => String::new(),
        },
    };
    let (lo, hi) = (eff.beta - 1.96 * eff.se, eff.beta + 1.96 * eff.se);
    let cells = p.design.cells[e].len();
    let (kind, nodes, dimension) = cand.parts(geo);
    Suspect {
        kind: kind.to_string(),
        nodes,
        dimension,
        switch: cand.switch(geo),
        other_switch: cand.other_switch(geo),
        factor: own,
        cells,
        effect_us: Some(Estimate {
            value: eff.beta,
            lo,
            hi,
        }),
        evidence: format!(
            "the {count} {subject} ({}) slower by x{:.2} (x{:.2}..x{:.2}) than healthy cells of their class; \
             the model puts {:+.3} us ({:.3}..{:.3}) on each use over its {cells} cells, z {:.0}",
            geo.class_label(class),
            own.value,
            own.lo,
            own.hi,
            eff.beta,
            lo,
            hi,
            eff.z()
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
        let want = 5.0 * 0.15f64.powi(4) * 0.85 + 0.15f64.powi(5);
        assert!((binomial_tail(5, 4, 0.15) - want).abs() < 1e-15);
        assert!((binomial_tail(10, 5, 0.5) - 638.0 / 1024.0).abs() < 1e-12);
        let t = binomial_tail(4000, 4000, 0.7);
        assert!((0.0..1e-300).contains(&t));
        assert!(binomial_tail(4000, 1, 0.7) <= 1.0);
    }

    #[test]
    fn normal_quantiles_match_tables() {
        for (p, z) in [
            (0.5, 0.0),
            (0.025, 1.959_963_985),
            (0.1, 1.281_551_566),
            (1e-3, 3.090_232_306),
            (1e-6, 4.753_424_309),
            (1e-9, 5.997_807_015),
            (0.975, -1.959_963_985),
        ] {
            assert!(
                (normal_upper(p) - z).abs() < 1e-7,
                "{p}: {}",
                normal_upper(p)
            );
        }
    }

    #[test]
    fn huber_ignores_a_few_wild_values_and_its_error_reflects_the_noise() {
        let mut v: Vec<(f64, f64)> = (0..40)
            .map(|i| (1.0 + 0.002 * ((i * 7 % 11) as f64 - 5.0), 0.03))
            .collect();
        let clean = huber(&v, None).unwrap();
        assert!((clean.beta - 1.0).abs() < 0.01, "{clean:?}");
        v.extend([(50.0, 0.03), (80.0, 0.03)]);
        let wild = huber(&v, None).unwrap();
        assert!((wild.beta - clean.beta).abs() < 0.01, "{wild:?}");
        // Model-based error, sqrt(1.05 / (40 / 0.03^2)), as the values scatter less than
        // their scale says.
        assert!(
            (clean.se - (HUBER_VAR * 0.03 * 0.03 / 40.0).sqrt()).abs() < 1e-9,
            "{clean:?}"
        );
        // Values that scatter 10 times their scale widen it tenfold.
        let wide: Vec<(f64, f64)> = v[..40].iter().map(|&(x, _)| (x, 0.0003)).collect();
        let w = huber(&wide, None).unwrap();
        assert!(
            w.se > 5.0 * (HUBER_VAR * 0.0003 * 0.0003 / 40.0).sqrt(),
            "{w:?}"
        );
        assert!(huber(&[], None).is_none());
    }
}
