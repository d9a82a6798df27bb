//! All-pairs attribution: which node, host, link, switch, uplink or hypercube dimension makes
//! a matrix of ping-pong cells slow (beyond the seeds).
//!
//! `commbench allpairs` measures every ordered pair `i -> j` (`i` times the ping-pong) with
//! the method of Luecke et al. 2009 at each size. A cell's round trip uses the route
//! `i -> j` *and* the route `j -> i`. For one size, [`fit`] turns the matrix into:
//!
//! 1. **Tukey's median polish** (Tukey 1977, *Exploratory Data Analysis*, ch. 11) of the log
//!    of each cell's median, `y_ij = m + s_i + r_j + c_class(ij) + e_ij`: sender, receiver and
//!    pair-class effects (same host / across hosts, under switches the number of switches a
//!    route goes through, or hop count on a hypercube), and a robust
//!    z per cell, `e / max(1.4826 MAD(e), ln(min_factor) / z)`. mpiGraph's per-row and
//!    per-column averages are a cruder form of `s_i` and `r_j`.
//! 2. **Element-level inference** (`model`): an additive model in time of the whole matrix,
//!    `t_c = b_class + sum a_ce beta_e`, over the elements of the machine (nodes, hosts with
//!    several ranks, pairs; under switches every switch and uplink a model can tell apart; on
//!    the hypercube channels and dimensions), chosen by forward
//!    selection with a Huber M-estimate of each element's effect from all of its cells, a
//!    Bonferroni level on its z and a binomial chance test against stray slow cells. Link and
//!    dimension effects are fitted jointly with node effects, so that a slow link is not
//!    split into two half-slow nodes. A suspect is an element whose own cells, in the class
//!    where they show most, are at least `min_factor` slower than healthy; the model also
//!    gives the run's detection limit per kind of element.
//! 3. **Serial confirmation** ([`retest_pairs`], [`verdicts`]): LinkTest retests the worst
//!    connections one at a time and ClusterKit retests bad pairs in halving rounds, to tell
//!    a faulty link from contention. Here each suspect gets a few pairs re-measured alone. A
//!    suspect is contention only when its pairs alone are measurably faster than in the
//!    rounds (the CI of the ratio alone / rounds excludes 1 and the rounds are slower by the
//!    rule's factor), and never under a serial schedule; otherwise its kind stands, confirmed
//!    when it is still slow alone. [`merge_sizes`] gathers the verdicts of every size.
//!
//! Nothing here does I/O: the caller measures, this module only judges.

mod confirm;
mod geometry;
mod model;
mod polish;
mod switches;
#[cfg(test)]
mod tests;

pub use confirm::{merge_sizes, retest_pairs, verdicts, REFERENCES_PER_CLASS};
pub use switches::{
    expand, parse_topology, paths_of, route_between, route_uses, switch_count, with_switches,
};

use commbench_core::stats::{median, sort_samples};
use commbench_core::transport::error::{Error, Result};
use geometry::Geometry;
use serde::{Deserialize, Serialize};

/// One measured ordered pair at one size.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CellObs {
    /// The rank that timed the ping-pong.
    pub source: u32,
    /// Its partner.
    pub dest: u32,
    /// One-way times in microseconds, sorted ascending.
    pub one_way_us: Vec<f64>,
}

/// What is known of where ranks sit.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Topology {
    /// Host name per rank (index = rank). Pairs on one host and pairs across hosts are kept
    /// apart (two pair classes).
    Hosts(Vec<String>),
    /// The simulator's 2^d hypercube with e-cube routing (lowest differing dimension first; a
    /// message from i to j crosses, in increasing order, every dimension k where bit k of
    /// i^j is set; the node where it crosses k is (j's bits below k, i's bits from k up)).
    /// Rank r is node r. Pair class = hop distance popcount(i^j).
    Hypercube {
        /// d: 2^d nodes.
        dimensions: u32,
    },
    /// Host name and the switches above the host per rank (Slurm's topology/tree plugin:
    /// `SLURM_TOPOLOGY_ADDR`, or a `--topology` file). Pair classes: same host, then the
    /// number of switches a route goes through; switches and their uplinks are elements.
    Switched {
        /// Host name per rank.
        hosts: Vec<String>,
        /// Per rank, the switches above its host from the top down, dot-separated
        /// (`root.s1.leaf4`); the ranks of a host name the same.
        switches: Vec<String>,
    },
}

/// How slow a cell must be to count as slow.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Rule {
    /// Robust z a slow cell must exceed (3.5, the modified z-score rule of Iglewicz and
    /// Hoaglin).
    pub z: f64,
    /// Smallest slowdown ever called slow (1.25: 25 % slower), whatever the noise.
    pub min_factor: f64,
}

impl Verdict {
    /// The kind of element it is about: `element`, else (documents of earlier versions)
    /// `kind`, with a contention's read from its nodes.
    pub fn element_kind(&self) -> &str {
        match (self.element.as_deref(), self.kind.as_str()) {
            (Some(e), _) => e,
            (None, "contention") => match (self.nodes.len(), self.dimension) {
                (0, _) => "dimension",
                (1, _) => "node",
                _ => "link",
            },
            (None, k) => k,
        }
    }
}

impl Default for Rule {
    fn default() -> Self {
        Rule {
            z: 3.5,
            min_factor: 1.25,
        }
    }
}

/// A slowdown factor with its 95 % confidence interval.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Estimate {
    /// Point estimate (1 = as fast as a healthy cell of the class).
    pub value: f64,
    /// Lower end of the interval.
    pub lo: f64,
    /// Upper end of the interval.
    pub hi: f64,
}

/// One pair class of the fit.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClassEffect {
    /// 0 same host / 1 across hosts, or the hop count on a hypercube.
    pub class: u32,
    /// "same host", "across hosts", "1 hop", "2 hops", ...
    pub label: String,
    /// Additive effect on log time in the polish.
    pub effect: f64,
    /// Cells of the class in the matrix.
    pub cells: usize,
    /// What a healthy cell of the class costs, one way, in us (`None` when it cannot be
    /// told: no cell of the class and no line to extrapolate).
    #[serde(default)]
    pub baseline_us: Option<f64>,
}

/// The fit of one cell, aligned with the input cells. Serialised compactly:
/// `{"i":source,"j":dest,"e":residual,"z":z,"x":excess}`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct CellFit {
    /// Timing rank.
    #[serde(rename = "i")]
    pub source: u32,
    /// Partner.
    #[serde(rename = "j")]
    pub dest: u32,
    /// Polish residual of log time.
    #[serde(rename = "e")]
    pub residual: f64,
    /// Robust z of the residual.
    pub z: f64,
    /// Log time over the class baseline (ln of the slowdown factor).
    #[serde(rename = "x")]
    pub excess: f64,
}

/// An element of the model whose own cells are slower than the rule's factor.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Suspect {
    /// "dimension", "switch", "uplink", "switch_pair", "host", "node" or "link".
    pub kind: String,
    /// The node (node), the host's ranks (host), the two ends, lower first (link), the ranks
    /// under the switch (switch, uplink) or under either switch (switch_pair), none
    /// (dimension).
    pub nodes: Vec<u32>,
    /// The dimension (dimension, hypercube link).
    #[serde(default)]
    pub dimension: Option<u32>,
    /// The switch's path from the top (switch), that of the switch below the uplink
    /// (uplink), or the first switch of the pair (switch_pair); absent for the other kinds
    /// and in documents of earlier versions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub switch: Option<String>,
    /// The other switch of a switch pair (same depth as `switch`): the element is the routes
    /// with one end under each. Absent for the other kinds and in documents of earlier
    /// versions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub other_switch: Option<String>,
    /// Slowdown of its own cells: in the class where they are slowest, the median of each
    /// cell's time over its healthy value, with the 95 % CI of that median (written by
    /// earlier versions: the median slowdown of the cells their test used).
    pub factor: Estimate,
    /// Cells it touches (earlier versions: cells its test used).
    pub cells: usize,
    /// The model's effect: time it adds to a cell each time the cell's round trip uses it,
    /// one way, us, with a 95 % CI (absent in documents of earlier versions).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub effect_us: Option<Estimate>,
    /// One human sentence.
    pub evidence: String,
}

/// Median polish and attribution of one size's all-pairs matrix.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Fit {
    /// Ranks.
    pub n: u32,
    /// Topology the classes and routes come from.
    pub topology: Topology,
    /// Common log time (ln us).
    pub m: f64,
    /// Sender effects on log time, per rank (0 for a rank that timed no cell).
    pub sender: Vec<f64>,
    /// Receiver effects on log time, per rank.
    pub receiver: Vec<f64>,
    /// Class effects and healthy baselines.
    pub classes: Vec<ClassEffect>,
    /// Per-cell residual, z and excess, in input order.
    pub cells: Vec<CellFit>,
    /// Polish sweeps done.
    pub sweeps: u32,
    /// Scale of the z (floored `1.4826 MAD` of the residuals).
    pub scale: f64,
    /// Noise scale the threshold uses: the smaller of `scale` and the spread of
    /// `y_ij - y_ji` (a pair measured from either end uses the same routes) over `sqrt 2`,
    /// floored like `scale`.
    pub noise: f64,
    /// Log excess over which a cell is slow: `max(z * noise, ln min_factor)`.
    pub thr: f64,
    /// Suspects: dimensions first, then hosts, nodes, links.
    pub suspects: Vec<Suspect>,
    /// The smallest slowdown this run would have found, per kind of element (absent in
    /// documents of earlier versions).
    #[serde(default)]
    pub limits: Vec<Limit>,
    /// Elements in the model (significant) whose own cells are slower by less than the
    /// rule's `min_factor`: not suspects, as suspects are described. (A document that
    /// recorded only their count reads as none listed.)
    #[serde(default, deserialize_with = "list_or_count")]
    pub below_min_factor: Vec<Suspect>,
    /// The element model's noise relative to a healthy cell's time (the largest over the
    /// classes); 0 in documents of earlier versions.
    #[serde(default)]
    pub noise_rel: f64,
    /// Under switches, the switches, uplinks and switch pairs the model cannot test: their
    /// routes are more than half of every class of pairs they are in (a switch pair's: a third
    /// of one), whose baseline takes them (`switch top`: a slow top switch is a slow class;
    /// `switch pair top.l0 - top.l2`); absent when none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub untestable: Vec<String>,
}

/// `below_min_factor` as a list, or as the bare count one version wrote (nothing to list).
fn list_or_count<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> std::result::Result<Vec<Suspect>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Either {
        List(Vec<Suspect>),
        Count(#[allow(dead_code)] u64),
    }
    Ok(match Either::deserialize(d)? {
        Either::List(v) => v,
        Either::Count(_) => Vec::new(),
    })
}

/// The detection limit of a run for one kind of element.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Limit {
    /// "dimension", "switch", "uplink", "switch_pair", "host", "node" or "link".
    pub kind: String,
    /// Slowdown of its own cells (in the class where it shows most) that an element of this
    /// kind would need to be found with 90 % power, for the element hardest to see.
    pub factor: f64,
    /// The smallest slowdown a verdict names: the larger of `factor` and the rule's
    /// `min_factor`.
    pub reported_from: f64,
    /// The model's effect at that limit, us one way per use.
    pub effect_us: f64,
    /// Elements of the kind tested.
    pub elements: usize,
}

/// One suspect after serial confirmation (or without it), over one or more sizes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Verdict {
    /// "node", "host", "link", "dimension" or "contention" (measurably faster alone than
    /// under the load of the rounds).
    pub kind: String,
    /// As in [`Suspect::nodes`].
    pub nodes: Vec<u32>,
    /// As in [`Suspect::dimension`].
    #[serde(default)]
    pub dimension: Option<u32>,
    /// As in [`Suspect::switch`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub switch: Option<String>,
    /// As in [`Suspect::other_switch`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub other_switch: Option<String>,
    /// Slowdown of its own cells in the all-pairs run (earlier versions: from the retest
    /// when confirmed).
    pub factor: Estimate,
    /// The model's effect, us one way per use, with its 95 % CI.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub effect_us: Option<Estimate>,
    /// Slowdown of its retested cells measured alone, over healthy pairs measured alone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alone: Option<Estimate>,
    /// Its retested cells' time alone over their time in the all-pairs rounds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alone_over_rounds: Option<Estimate>,
    /// One human sentence.
    pub evidence: String,
    /// Whether a serial retest backs the kind.
    #[serde(default)]
    pub confirmed: bool,
    /// The kind of element the model named (the same as `kind` but for contention, which
    /// says what was slow under load); absent in documents of earlier versions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub element: Option<String>,
    /// Message sizes (bytes) the verdict holds at, filled by [`merge_sizes`].
    #[serde(default)]
    pub sizes: Vec<u64>,
}

/// 1.4826 MAD is the standard deviation of normal data.
const MAD_TO_SD: f64 = 1.4826;

/// Fewest mirrored pairs (both `i -> j` and `j -> i`) for the noise scale from mirrors.
const MIN_MIRRORS: usize = 6;

/// A validated cell: ends, log median time, class index.
#[derive(Debug, Clone, Copy)]
pub(super) struct Obs {
    pub i: u32,
    pub j: u32,
    pub y: f64,
    pub class: usize,
}

fn check_rule(rule: &Rule) -> Result<()> {
    if !(rule.z.is_finite() && rule.z > 0.0) {
        return Err(Error::Invalid(format!(
            "rule z = {}: must be finite and above 0",
            rule.z
        )));
    }
    if !(rule.min_factor.is_finite() && rule.min_factor > 1.0) {
        return Err(Error::Invalid(format!(
            "rule min_factor = {}: must be finite and above 1",
            rule.min_factor
        )));
    }
    Ok(())
}

/// ln of the median of a cell's times; `None` when empty or not all finite and positive.
pub(super) fn log_median(times: &[f64]) -> Option<f64> {
    if times.is_empty() || times.iter().any(|t| !(t.is_finite() && *t > 0.0)) {
        return None;
    }
    let mut v = times.to_vec();
    sort_samples(&mut v);
    median(&v).map(f64::ln)
}

/// Validates the cells (ranks in range, no self pair, no duplicate, usable times).
fn observe(n: u32, geo: &Geometry, cells: &[CellObs]) -> Result<Vec<Obs>> {
    if n < 2 {
        return Err(Error::Invalid(format!(
            "{n} ranks: all-pairs needs at least 2"
        )));
    }
    if cells.is_empty() {
        return Err(Error::Invalid("no measured pair to analyse".to_string()));
    }
    let mut seen = std::collections::HashSet::with_capacity(cells.len());
    let mut out = Vec::with_capacity(cells.len());
    for c in cells {
        let (i, j) = (c.source, c.dest);
        if i >= n || j >= n || i == j {
            return Err(Error::Invalid(format!(
                "pair {i} -> {j}: ranks must differ and be below {n}"
            )));
        }
        if !seen.insert((i, j)) {
            return Err(Error::Invalid(format!("pair {i} -> {j} appears twice")));
        }
        let y = log_median(&c.one_way_us).ok_or_else(|| {
            Error::Invalid(format!(
                "pair {i} -> {j}: its times must be a non-empty list of finite positive values"
            ))
        })?;
        out.push(Obs {
            i,
            j,
            y,
            class: geo.class_of(i, j),
        });
    }
    Ok(out)
}

/// `1.4826 MAD` of `v` (about its median); `None` when empty.
pub(super) fn robust_sd(v: &[f64]) -> Option<f64> {
    let mut s = v.to_vec();
    sort_samples(&mut s);
    let med = median(&s)?;
    let mut dev: Vec<f64> = s.iter().map(|x| (x - med).abs()).collect();
    sort_samples(&mut dev);
    median(&dev).map(|m| MAD_TO_SD * m)
}

/// Noise from mirrored pairs: `1.4826 MAD(y_ij - y_ji) / sqrt 2`, or `None` with fewer than
/// [`MIN_MIRRORS`] mirrored pairs.
fn mirror_sd(obs: &[Obs]) -> Option<f64> {
    let by: std::collections::HashMap<(u32, u32), f64> =
        obs.iter().map(|o| ((o.i, o.j), o.y)).collect();
    let d: Vec<f64> = obs
        .iter()
        .filter(|o| o.i < o.j)
        .filter_map(|o| by.get(&(o.j, o.i)).map(|y| o.y - y))
        .collect();
    if d.len() < MIN_MIRRORS {
        return None;
    }
    robust_sd(&d).map(|s| s / std::f64::consts::SQRT_2)
}

/// Median polish and attribution of one size's matrix of `n` ranks.
///
/// `cells` may be incomplete (an interrupted run; `i -> i` never exists). Errors on fewer than
/// 2 ranks, no cell, a pair out of range, repeated or with `i == j`, a cell without finite
/// positive times, a topology that cannot hold `n` ranks, more than `u32::MAX` cells, or a
/// rule with `z <= 0` or `min_factor <= 1`.
pub fn fit(n: u32, topo: &Topology, cells: &[CellObs], rule: &Rule) -> Result<Fit> {
    check_rule(rule)?;
    let geo = Geometry::new(n, topo)?;
    let obs = observe(n, &geo, cells)?;
    // The element model numbers a size's cells in 32 bits (a cube of 65,536 ranks).
    if u32::try_from(obs.len()).is_err() {
        return Err(Error::Invalid(format!(
            "{} cells at one size: the attribution takes at most {}",
            obs.len(),
            u32::MAX
        )));
    }
    let y: Vec<f64> = obs.iter().map(|o| o.y).collect();
    let rows: Vec<usize> = obs.iter().map(|o| o.i as usize).collect();
    let cols: Vec<usize> = obs.iter().map(|o| o.j as usize).collect();
    let cls: Vec<usize> = obs.iter().map(|o| o.class).collect();
    let p = polish::median_polish(&y, &rows, &cols, &cls, n as usize, geo.class_count());
    let floor = rule.min_factor.ln() / rule.z;
    let scale = robust_sd(&p.resid).unwrap_or(0.0).max(floor);
    let noise = mirror_sd(&obs).map_or(scale, |s| s.max(floor).min(scale));
    let thr = (rule.z * noise).max(rule.min_factor.ln());
    let z: Vec<f64> = p.resid.iter().map(|e| e / scale).collect();
    let sel = model::select(&model::Input {
        geo: &geo,
        obs: &obs,
        rule_z: rule.z,
        min_factor: rule.min_factor,
    });
    let classes = (0..geo.class_count())
        .filter(|c| cls.contains(c))
        .map(|c| ClassEffect {
            class: geo.class_id(c),
            label: geo.class_label(c),
            effect: p.class[c],
            cells: cls.iter().filter(|&&k| k == c).count(),
            baseline_us: sel.baseline[c],
        })
        .collect();
    let cells = obs
        .iter()
        .enumerate()
        .map(|(c, o)| CellFit {
            source: o.i,
            dest: o.j,
            residual: p.resid[c],
            z: z[c],
            excess: sel.excess[c],
        })
        .collect();
    Ok(Fit {
        n,
        topology: topo.clone(),
        m: p.m,
        sender: p.row,
        receiver: p.col,
        classes,
        cells,
        sweeps: p.sweeps,
        scale,
        noise,
        thr,
        suspects: sel.suspects,
        limits: sel.limits,
        below_min_factor: sel.below,
        noise_rel: sel.noise_rel,
        untestable: sel.untestable,
    })
}
