//! Serial confirmation of suspects (the idea of LinkTest's serial retest of the worst
//! connections and ClusterKit's retest rounds) and the merge of verdicts over sizes.

use super::geometry::{self, Geometry};
use super::model::{estimate, Cand};
use super::{check_rule, log_median, CellObs, Fit, Obs, Rule, Suspect, Verdict};
use commbench_core::stats::{median, sort_samples};
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

/// Reference pairs (implicated in no suspect) added per class among the retested pairs, so
/// that retested cells are judged against healthy cells measured the same way (alone).
pub const REFERENCES_PER_CLASS: usize = 2;

/// Most pairs looked at when searching for reference pairs.
const MAX_REFERENCE_SCAN: usize = 1 << 20;

/// Each class's place when the cells of `cand` in `fit` are ordered by their median excess,
/// slowest class first (a class without its cells last, fewest hops first among equals).
fn class_order(geo: &Geometry, fit: &Fit, cand: Cand) -> Vec<usize> {
    let nc = geo.class_count();
    let mut excess: Vec<Vec<f64>> = vec![Vec::new(); nc];
    for c in &fit.cells {
        if c.source < fit.n
            && c.dest < fit.n
            && c.source != c.dest
            && cand.slows(geo, c.source, c.dest)
        {
            excess[geo.class_of(c.source, c.dest)].push(c.excess);
        }
    }
    let medians: Vec<f64> = excess
        .into_iter()
        .map(|mut v| {
            sort_samples(&mut v);
            median(&v).unwrap_or(f64::NEG_INFINITY)
        })
        .collect();
    let mut by: Vec<usize> = (0..nc).collect();
    by.sort_by(|&a, &b| medians[b].total_cmp(&medians[a]).then(a.cmp(&b)));
    let mut place = vec![0; nc];
    for (k, c) in by.into_iter().enumerate() {
        place[c] = k;
    }
    place
}

/// Pairs that would confirm `cand`, best first: the sort key puts the suspect's own pair
/// first (a link), then pairs implicated in no other suspect, then the others; within each,
/// the class where its cells were slowest first (`order`, [`class_order`]: a node slowed by
/// the load on its leaf's uplink is retested across it, not within its leaf), then by pair.
fn suspect_pairs(
    geo: &Geometry,
    n: u32,
    cand: Cand,
    order: &[usize],
    tainted: &dyn Fn(u32, u32) -> bool,
) -> Vec<(u32, u32)> {
    let pair = |a: u32, b: u32| (a.min(b), a.max(b));
    let class = |a: u32, b: u32| order.get(geo.class_of(a, b)).copied().unwrap_or(usize::MAX);
    let mut keyed: Vec<(u8, usize, (u32, u32))> = match cand {
        Cand::Node(k) => (0..n)
            .filter(|&p| p != k)
            .map(|p| (1 + u8::from(tainted(k, p)), class(k, p), pair(k, p)))
            .collect(),
        Cand::Host(h) => {
            let on = geo.ranks_on(h);
            on.iter()
                .flat_map(|&k| (0..n).filter(|p| !on.contains(p)).map(move |p| (k, p)))
                .map(|(k, p)| (1 + u8::from(tainted(k, p)), class(k, p), pair(k, p)))
                .collect()
        }
        Cand::Dim(k) => (0..n)
            .filter(|u| u >> k & 1 == 0 && (u | 1 << k) < n)
            .map(|u| (1 + u8::from(tainted(u, u | 1 << k)), 0, (u, u | 1 << k)))
            .collect(),
        Cand::Channel(l, k) => {
            let d = geo.cube().unwrap_or(0);
            let direct = pair(l, l ^ (1 << k));
            geometry::channel_users(d, n, l, k)
                .into_iter()
                .map(|(i, j)| pair(i, j))
                .map(|p| {
                    let rank = if p == direct {
                        0
                    } else {
                        1 + u8::from(tainted(p.0, p.1))
                    };
                    (rank, class(p.0, p.1), p)
                })
                .collect()
        }
        Cand::Pair(a, b) => vec![(0, 0, (a, b))],
        Cand::Switch(k) | Cand::Uplink(k) => {
            let hop = match cand {
                Cand::Switch(_) => geometry::Hop::Switch(k),
                _ => geometry::Hop::Uplink(k),
            };
            let under = geo.ranks_under(k);
            let mut out = Vec::new();
            'scan: for &u in &under {
                for p in (0..n).filter(|&p| p != u) {
                    if out.len() >= MAX_REFERENCE_SCAN {
                        break 'scan;
                    }
                    if geo.through(u, p).contains(&hop) {
                        out.push((1 + u8::from(tainted(u, p)), class(u, p), pair(u, p)));
                    }
                }
            }
            out
        }
        Cand::SwitchPair(a, b) => {
            let (under_a, under_b) = (geo.ranks_under(a), geo.ranks_under(b));
            let mut out = Vec::new();
            'pairs: for &u in &under_a {
                for &p in &under_b {
                    if out.len() >= MAX_REFERENCE_SCAN {
                        break 'pairs;
                    }
                    out.push((1 + u8::from(tainted(u, p)), class(u, p), pair(u, p)));
                }
            }
            out
        }
    };
    keyed.sort_unstable();
    keyed.dedup();
    keyed.into_iter().map(|(_, _, p)| p).collect()
}

/// Adds up to [`REFERENCES_PER_CLASS`] pairs per class among `out` that no suspect explains.
fn add_references(
    geo: &Geometry,
    n: u32,
    cands: &[Cand],
    out: &mut Vec<(u32, u32)>,
    seen: &mut HashSet<(u32, u32)>,
) {
    let mut want: BTreeMap<usize, usize> = out
        .iter()
        .map(|&(a, b)| (geo.class_of(a, b), REFERENCES_PER_CLASS))
        .collect();
    let mut scanned = 0usize;
    for a in 0..n {
        for b in a + 1..n {
            scanned += 1;
            if scanned > MAX_REFERENCE_SCAN || want.values().all(|&w| w == 0) {
                return;
            }
            let Some(w) = want.get_mut(&geo.class_of(a, b)) else {
                continue;
            };
            if *w == 0 || seen.contains(&(a, b)) || cands.iter().any(|c| c.slows(geo, a, b)) {
                continue;
            }
            *w -= 1;
            seen.insert((a, b));
            out.push((a, b));
        }
    }
}

/// The unordered pairs `(lower, higher)` to re-measure serially (one pair at a time in the
/// machine, more trials) to confirm each suspect of `fit`, deduplicated, in a fixed order:
///
/// * a link: its own pair (a hypercube channel's two end nodes, whose ping-pong uses exactly
///   that channel), then up to `per_suspect - 1` more pairs routed over it;
/// * a node: up to `per_suspect` pairs with partners implicated in no suspect (nearest
///   first);
/// * a dimension: up to `per_suspect` neighbour pairs across it;
///
/// then, when any pair was chosen, up to [`REFERENCES_PER_CLASS`] pairs per class among them
/// that no suspect explains, the healthy reference [`verdicts`] judges the others against.
/// Pairs implicated in another suspect come last. Empty for a fit without suspects.
pub fn retest_pairs(fit: &Fit, per_suspect: usize) -> Vec<(u32, u32)> {
    let Ok(geo) = Geometry::new(fit.n, &fit.topology) else {
        return Vec::new();
    };
    let cands: Vec<Cand> = fit
        .suspects
        .iter()
        .filter_map(|s| Cand::from_suspect(s, &geo))
        .collect();
    let implicated: BTreeSet<u32> = cands.iter().flat_map(|c| c.members(&geo)).collect();
    let mut out = Vec::new();
    let mut seen = HashSet::new();
    for (s, &cand) in cands.iter().enumerate() {
        let own = cand.members(&geo);
        let tainted = |a: u32, b: u32| {
            [a, b]
                .iter()
                .any(|p| implicated.contains(p) && !own.contains(p))
                || cands
                    .iter()
                    .enumerate()
                    .any(|(t, o)| t != s && o.slows(&geo, a, b))
        };
        let order = class_order(&geo, fit, cand);
        for p in suspect_pairs(&geo, fit.n, cand, &order, &tainted)
            .into_iter()
            .take(per_suspect)
        {
            if seen.insert(p) {
                out.push(p);
            }
        }
    }
    if !out.is_empty() {
        add_references(&geo, fit.n, &cands, &mut out, &mut seen);
    }
    out
}

/// Log baseline per class for the retest: the median of the retested cells that no suspect
/// explains (healthy pairs measured alone), else the fit's baseline.
fn retest_baseline(
    fit: &Fit,
    geo: &Geometry,
    obs: &[Obs],
    cands: &[Option<Cand>],
) -> Vec<Option<f64>> {
    let mut base: Vec<Option<f64>> = (0..geo.class_count())
        .map(|c| {
            let id = geo.class_id(c);
            fit.classes
                .iter()
                .find(|e| e.class == id)
                .and_then(|e| e.baseline_us)
                .filter(|b| *b > 0.0)
                .map(f64::ln)
        })
        .collect();
    let mut refs: Vec<Vec<f64>> = vec![Vec::new(); base.len()];
    for o in obs
        .iter()
        .filter(|o| !cands.iter().flatten().any(|c| c.slows(geo, o.i, o.j)))
    {
        refs[o.class].push(o.y);
    }
    for (b, mut r) in base.iter_mut().zip(refs) {
        sort_samples(&mut r);
        if let Some(m) = median(&r) {
            *b = Some(m);
        }
    }
    base
}

/// What the retest of one suspect measured: per retested cell it slows, the log excess alone
/// over healthy pairs alone, and the log of its time alone over its time in the rounds (when
/// the rounds measured it).
struct Retested {
    excess: Vec<f64>,
    alone_over_rounds: Vec<f64>,
}

/// The verdict on one suspect from its retest. `still` is the log excess over which the
/// retested cells alone count as slower than healthy pairs alone (the noise threshold).
/// Contention needs evidence of load: a schedule with more than one pair at a time, and either
/// the cells fine alone and faster alone than in the rounds (measurably, the CI of the ratio
/// alone / rounds under 1, or with the rule's factor ruled out alone, the CI of their excess
/// alone under it), or less than the rule's factor slower than healthy pairs alone and
/// measurably faster alone by at least that factor (what made them a suspect was the load).
/// Otherwise the kind stands; it is confirmed when the cells alone are still slower than
/// healthy pairs alone (the lower end of the CI of their median excess over `still`).
fn judge(s: &Suspect, r: &Retested, still: f64, min_factor: f64, serial: bool) -> Verdict {
    let mut v = Verdict {
        kind: s.kind.clone(),
        nodes: s.nodes.clone(),
        dimension: s.dimension,
        switch: s.switch.clone(),
        other_switch: s.other_switch.clone(),
        factor: s.factor,
        effect_us: s.effect_us,
        alone: None,
        alone_over_rounds: None,
        evidence: format!("{}; not retested", s.evidence),
        confirmed: false,
        element: Some(s.kind.clone()),
        sizes: Vec::new(),
    };
    if r.excess.is_empty() {
        return v;
    }
    let alone = estimate(&r.excess);
    v.alone = Some(alone);
    let ratio = (!r.alone_over_rounds.is_empty()).then(|| estimate(&r.alone_over_rounds));
    v.alone_over_rounds = ratio;
    let range = |e: &super::Estimate| format!("x{:.2} (x{:.2}..x{:.2})", e.value, e.lo, e.hi);
    let vs_rounds = ratio.map_or(String::new(), |q| {
        format!("; alone / in the rounds {}", range(&q))
    });
    let slow_alone = alone.lo.ln() > still;
    // Contention: the rounds made it slow, alone it is not, or not by the factor.
    let contention = !serial
        && ratio.is_some_and(|q| {
            let faster = q.hi < 1.0;
            if slow_alone {
                // Slow alone, under the factor, and faster alone by the factor.
                faster && alone.value < min_factor && q.value <= 1.0 / min_factor
            } else {
                // Fine alone, and faster alone than in the rounds: measurably so, or with
                // every slowdown of the factor ruled out alone (few cells retested).
                q.value < 1.0 && (faster || alone.hi < min_factor)
            }
        });
    let cells = r.excess.len();
    if contention {
        v.kind = "contention".to_string();
        v.confirmed = true;
        v.evidence = format!(
            "{}; but its {cells} retested cells are faster alone{vs_rounds}, and alone {} over healthy pairs: slow beyond the factor only while other pairs ran",
            s.evidence,
            range(&alone)
        );
    } else if slow_alone {
        v.confirmed = true;
        v.evidence = format!(
            "{}; still slow alone: {cells} retested cells {} slower than healthy pairs alone{vs_rounds}",
            s.evidence,
            range(&alone)
        );
    } else {
        let why = if serial {
            "the rounds measured one pair at a time, so no load explains it"
        } else {
            "they were not measurably faster than in the rounds"
        };
        v.evidence = format!(
            "{}; retested alone {} over {cells} cells{vs_rounds}: not slower than healthy pairs alone beyond the noise, but {why}",
            s.evidence,
            range(&alone)
        );
    }
    v
}

/// Validated cells of `cells` with their log median time.
fn usable(fit: &Fit, geo: &Geometry, cells: &[CellObs]) -> Vec<Obs> {
    cells
        .iter()
        .filter(|c| c.source < fit.n && c.dest < fit.n && c.source != c.dest)
        .filter_map(|c| {
            let y = log_median(&c.one_way_us)?;
            Some(Obs {
                i: c.source,
                j: c.dest,
                y,
                class: geo.class_of(c.source, c.dest),
            })
        })
        .collect()
}

/// Verdicts on the suspects of `fit` from the serial `retest` cells, compared with the same
/// cells in the all-pairs rounds (`main`; invalid cells are ignored). `serial`: the rounds
/// ran one pair at a time. A suspect with no retested cell keeps its kind, unconfirmed, with
/// "not retested" in its evidence; otherwise see `judge`. A suspect whose retested cells a
/// confirmed wider one slows too is judged net of it, and left out when that one explains
/// it (the wider verdict's evidence says so). Empty for a healthy machine.
pub fn verdicts(
    fit: &Fit,
    main: &[CellObs],
    retest: &[CellObs],
    rule: &Rule,
    serial: bool,
) -> Vec<Verdict> {
    let Ok(geo) = Geometry::new(fit.n, &fit.topology) else {
        return Vec::new();
    };
    // Slower alone beyond the noise: the element model's (the polish's, floored, in
    // documents that lack it), never beyond the rule's factor.
    let noise = if fit.noise_rel > 0.0 {
        fit.noise_rel.ln_1p()
    } else {
        fit.noise
    };
    let (still, min_factor) = if check_rule(rule).is_ok() {
        ((rule.z * noise).min(rule.min_factor.ln()), rule.min_factor)
    } else {
        (fit.thr, fit.thr.exp())
    };
    let obs = usable(fit, &geo, retest);
    let cands: Vec<Option<Cand>> = fit
        .suspects
        .iter()
        .map(|s| Cand::from_suspect(s, &geo))
        .collect();
    let r = Retests {
        rounds: usable(fit, &geo, main)
            .into_iter()
            .map(|o| ((o.i, o.j), o.y))
            .collect(),
        base: retest_baseline(fit, &geo, &obs, &cands),
        mine: cands
            .iter()
            .map(|cand| match cand {
                Some(c) => obs.iter().filter(|o| c.slows(&geo, o.i, o.j)).collect(),
                None => Vec::new(),
            })
            .collect(),
        geo: &geo,
        cands,
        still,
        min_factor,
        serial,
    };
    let first: Vec<Verdict> = fit
        .suspects
        .iter()
        .enumerate()
        .map(|(k, s)| r.judged(k, s, &|_| 0.0))
        .collect();
    let mut explained: Vec<(usize, String)> = Vec::new();
    let mut out: Vec<Option<Verdict>> = fit
        .suspects
        .iter()
        .enumerate()
        .map(|(k, s)| r.net_of_wider(&first, k, s, &mut explained))
        .collect();
    r.drop_explained(&mut out, &mut explained);
    for (t, what) in explained {
        if let Some(v) = out[t].as_mut() {
            v.evidence.push_str(&format!(
                "; it explains the cells of the suspect {what} too (not slower alone beyond it)"
            ));
        }
    }
    out.into_iter().flatten().collect()
}

/// What the retest alone measured of a fit's suspects, to judge each of them from.
struct Retests<'a> {
    geo: &'a Geometry,
    cands: Vec<Option<Cand>>,
    /// Per suspect, the retested cells it slows.
    mine: Vec<Vec<&'a Obs>>,
    /// Log baseline per class of healthy pairs alone ([`retest_baseline`]).
    base: Vec<Option<f64>>,
    /// Log time of each cell in the rounds.
    rounds: HashMap<(u32, u32), f64>,
    still: f64,
    min_factor: f64,
    serial: bool,
}

impl Retests<'_> {
    /// Suspect `k` judged with `net(o)` (log) taken off each retested cell's excess alone.
    fn judged(&self, k: usize, s: &Suspect, net: &dyn Fn(&Obs) -> f64) -> Verdict {
        let r = Retested {
            excess: self.mine[k]
                .iter()
                .filter_map(|o| self.base[o.class].map(|b| o.y - b - net(o)))
                .collect(),
            alone_over_rounds: self.mine[k]
                .iter()
                .filter_map(|o| self.rounds.get(&(o.i, o.j)).map(|y| o.y - y))
                .collect(),
        };
        judge(s, &r, self.still, self.min_factor, self.serial)
    }

    /// Whether suspect `t` slows every cell retested for suspect `k`.
    fn covers(&self, t: usize, k: usize) -> bool {
        !self.mine[k].is_empty()
            && self.cands[t]
                .is_some_and(|c| self.mine[k].iter().all(|o| c.slows(self.geo, o.i, o.j)))
    }

    /// Whether suspects `k` and `t` share cells: ranks, or a cell either's retest measured.
    fn shares(&self, k: usize, t: usize) -> bool {
        let (Some(a), Some(b)) = (self.cands[k], self.cands[t]) else {
            return false;
        };
        let (ma, mb) = (a.members(self.geo), b.members(self.geo));
        ma.iter().any(|x| mb.contains(x))
            || self.mine[t].iter().any(|o| a.slows(self.geo, o.i, o.j))
            || self.mine[k].iter().any(|o| b.slows(self.geo, o.i, o.j))
    }

    /// Suspect `k` again when every cell retested for it another confirmed suspect also
    /// slows (a pair routed over a slow uplink, a node under a slow switch), and not the
    /// other way round: judged net of that one's slowdown alone, what is left is its own.
    /// Under load a slow uplink queues the pairs that share it, so pairs over it can come
    /// out slower in the rounds than the uplink explains; alone, net of it, they are not
    /// slow, and are contention, not a fault of their own. `None` (and `(wider, name)` in
    /// `explained`) when the wider one explains it: neither slower alone beyond it nor
    /// faster alone than in the rounds.
    fn net_of_wider(
        &self,
        first: &[Verdict],
        k: usize,
        s: &Suspect,
        explained: &mut Vec<(usize, String)>,
    ) -> Option<Verdict> {
        let wider: Vec<(Cand, f64, usize)> = (0..self.cands.len())
            .filter(|&t| t != k && first[t].confirmed && first[t].kind != "contention")
            .filter(|&t| self.covers(t, k) && !self.covers(k, t))
            .filter_map(|t| {
                let alone = first[t].alone?.value;
                Some((self.cands[t]?, alone.max(1.0).ln(), t))
            })
            .collect();
        if wider.is_empty() {
            return Some(first[k].clone());
        }
        let names: Vec<String> = wider
            .iter()
            .map(|&(_, a, t)| format!("{} (x{:.2} alone)", named(&first[t]), a.exp()))
            .collect();
        let s = Suspect {
            evidence: format!(
                "{}; judged alone net of {}, which slows every cell retested",
                s.evidence,
                names.join(" and ")
            ),
            ..s.clone()
        };
        let net = |o: &Obs| {
            wider
                .iter()
                .filter(|(c, _, _)| c.slows(self.geo, o.i, o.j))
                .map(|(_, a, _)| a)
                .sum()
        };
        let v = self.judged(k, &s, &net);
        if !v.confirmed && v.alone.is_some() {
            explained.push((wider[0].2, named(&v)));
            return None;
        }
        Some(v)
    }

    /// Leaves out each suspect fine alone and no faster alone than in the rounds (the cells
    /// retested, those no other suspect explains, were fine in the rounds too) whose cells a
    /// confirmed one shares: what made it a suspect are the shared cells, which the confirmed
    /// one explains (a leaf switch beside its slow uplink, a node under it).
    fn drop_explained(&self, out: &mut [Option<Verdict>], explained: &mut Vec<(usize, String)>) {
        let solid = |v: &Option<Verdict>| {
            v.as_ref()
                .is_some_and(|v| v.confirmed && v.kind != "contention")
        };
        for k in 0..out.len() {
            let idle = out[k]
                .as_ref()
                .is_some_and(|v| !v.confirmed && v.kind != "contention" && v.alone.is_some());
            if !idle {
                continue;
            }
            let by = (0..out.len()).find(|&t| t != k && solid(&out[t]) && self.shares(k, t));
            if let (Some(t), Some(v)) = (by, by.and_then(|_| out[k].take())) {
                explained.push((t, named(&v)));
            }
        }
    }
}

/// A verdict's element in a few words: `switch top.s1`, `the uplink of switch top.s1.leaf4`,
/// `dimension 2`, `node 5`, `host of ranks 4, 5`, `link 2 - 6`.
fn named(v: &Verdict) -> String {
    let list = |n: &[u32]| n.iter().map(u32::to_string).collect::<Vec<_>>().join(", ");
    match (v.element_kind(), &v.switch, v.dimension, v.nodes.as_slice()) {
        ("switch", Some(p), ..) => format!("switch {p}"),
        ("uplink", Some(p), ..) => format!("the uplink of switch {p}"),
        ("switch_pair", Some(p), ..) => format!(
            "switch pair {p} - {}",
            v.other_switch.as_deref().unwrap_or("?")
        ),
        ("dimension", _, Some(d), _) => format!("dimension {d}"),
        ("host", _, _, n) => format!("the host of ranks {}", list(n)),
        (_, _, _, [k]) => format!("node {k}"),
        (_, _, _, [a, b]) => format!("link {a} - {b}"),
        (kind, _, _, n) => format!("{kind} {}", list(n)),
    }
}

/// What a verdict is about, whatever its kind: element kind, nodes, dimension and switch.
type Identity = (String, Vec<u32>, Option<u32>, Option<String>);

/// Order of kinds in a merged list.
fn kind_order(kind: &str) -> u8 {
    match kind {
        "node" => 0,
        "host" => 1,
        "switch" => 2,
        "uplink" => 3,
        "switch_pair" => 4,
        "dimension" => 5,
        "link" => 6,
        "contention" => 7,
        _ => 8,
    }
}

/// How strongly a verdict backs its kind: a confirmed fault, then contention, then an
/// unconfirmed fault.
fn strength(v: &Verdict) -> u8 {
    match (v.kind.as_str(), v.confirmed) {
        ("contention", _) => 1,
        (_, true) => 0,
        (_, false) => 2,
    }
}

/// One verdict per suspect (nodes and dimension) over every size: the strongest kind wins
/// (a confirmed node, link or dimension fault over contention over an unconfirmed fault),
/// with the largest factor among the verdicts of that kind and every size the suspect
/// appeared at. Ordered node, host, switch, uplink, switch pair, dimension, link, contention,
/// then by factor, largest first.
pub fn merge_sizes(per_size: Vec<(u64, Vec<Verdict>)>) -> Vec<Verdict> {
    let mut groups: BTreeMap<Identity, Vec<(u64, Verdict)>> = BTreeMap::new();
    for (size, vs) in per_size {
        for v in vs {
            groups
                .entry((
                    v.element_kind().to_string(),
                    v.nodes.clone(),
                    v.dimension,
                    v.switch.clone(),
                ))
                .or_default()
                .push((size, v));
        }
    }
    let mut out: Vec<Verdict> = Vec::with_capacity(groups.len());
    for (_, g) in groups {
        let Some(best) = g.iter().map(|(_, v)| strength(v)).min() else {
            continue;
        };
        let top = g
            .iter()
            .map(|(_, v)| v)
            .filter(|v| strength(v) == best)
            .max_by(|a, b| a.factor.value.total_cmp(&b.factor.value));
        let Some(top) = top else { continue };
        let mut sizes: Vec<u64> = g.iter().map(|(s, _)| *s).collect();
        sizes.sort_unstable();
        sizes.dedup();
        out.push(Verdict {
            sizes,
            ..top.clone()
        });
    }
    out.sort_by(|a, b| {
        kind_order(&a.kind)
            .cmp(&kind_order(&b.kind))
            .then(b.factor.value.total_cmp(&a.factor.value))
            .then_with(|| {
                (&a.nodes, a.dimension, &a.switch).cmp(&(&b.nodes, b.dimension, &b.switch))
            })
    });
    out
}
