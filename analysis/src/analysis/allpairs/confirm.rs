//! Serial confirmation of suspects (the idea of LinkTest's serial retest of the worst
//! connections and ClusterKit's retest rounds) and the merge of verdicts over sizes.

use super::geometry::{self, Geometry};
use super::model::{estimate, Cand};
use super::{check_rule, log_median, CellObs, Fit, Obs, Rule, Suspect, Verdict};
use commbench_core::stats::{median, sort_samples};
use std::collections::{BTreeMap, BTreeSet, HashSet};

/// Reference pairs (implicated in no suspect) added per class among the retested pairs, so
/// that retested cells are judged against healthy cells measured the same way (alone).
pub const REFERENCES_PER_CLASS: usize = 2;

/// Most pairs looked at when searching for reference pairs.
const MAX_REFERENCE_SCAN: usize = 1 << 20;

/// Pairs that would confirm `cand`, best first: the sort key puts the suspect's own pair
/// first (a link), then pairs implicated in no other suspect, then the others; within each,
/// fewest hops (or same host first), then by pair.
fn suspect_pairs(
    geo: &Geometry,
    n: u32,
    cand: Cand,
    tainted: &dyn Fn(u32, u32) -> bool,
) -> Vec<(u32, u32)> {
    let pair = |a: u32, b: u32| (a.min(b), a.max(b));
    let mut keyed: Vec<(u8, usize, (u32, u32))> = match cand {
        Cand::Node(k) => (0..n)
            .filter(|&p| p != k)
            .map(|p| (1 + u8::from(tainted(k, p)), geo.class_of(k, p), pair(k, p)))
            .collect(),
        Cand::Host(h) => {
            let on = geo.ranks_on(h);
            on.iter()
                .flat_map(|&k| (0..n).filter(|p| !on.contains(p)).map(move |p| (k, p)))
                .map(|(k, p)| (1 + u8::from(tainted(k, p)), geo.class_of(k, p), pair(k, p)))
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
                    (rank, geo.class_of(p.0, p.1), p)
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
                        out.push((1 + u8::from(tainted(u, p)), geo.class_of(u, p), pair(u, p)));
                    }
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
        for p in suspect_pairs(&geo, fit.n, cand, &tainted)
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
/// Contention needs evidence of load: the cells alone measurably faster than in the rounds
/// (the CI of the ratio alone / rounds under 1) by at least the rule's factor, a schedule
/// with more than one pair at a time, and the cells fine alone. Otherwise the kind stands; it
/// is confirmed when the cells alone are still slower than healthy pairs alone (the lower end
/// of the CI of their median excess over `still`).
fn judge(s: &Suspect, r: &Retested, still: f64, min_factor: f64, serial: bool) -> Verdict {
    let mut v = Verdict {
        kind: s.kind.clone(),
        nodes: s.nodes.clone(),
        dimension: s.dimension,
        switch: s.switch.clone(),
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
    let loaded = !serial && ratio.is_some_and(|q| q.hi < 1.0 && q.value <= 1.0 / min_factor);
    let slow_alone = alone.lo.ln() > still;
    let cells = r.excess.len();
    if loaded && !slow_alone {
        v.kind = "contention".to_string();
        v.confirmed = true;
        v.evidence = format!(
            "{}; but its {cells} retested cells are faster alone{vs_rounds}, and alone {} over healthy pairs: slow only while other pairs ran",
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
/// "not retested" in its evidence; otherwise see `judge`. Empty for a healthy machine.
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
    let rounds: std::collections::HashMap<(u32, u32), f64> = usable(fit, &geo, main)
        .into_iter()
        .map(|o| ((o.i, o.j), o.y))
        .collect();
    let cands: Vec<Option<Cand>> = fit
        .suspects
        .iter()
        .map(|s| Cand::from_suspect(s, &geo))
        .collect();
    let base = retest_baseline(fit, &geo, &obs, &cands);
    fit.suspects
        .iter()
        .zip(&cands)
        .map(|(s, cand)| {
            let mine: Vec<&Obs> = match cand {
                Some(c) => obs.iter().filter(|o| c.slows(&geo, o.i, o.j)).collect(),
                None => Vec::new(),
            };
            let r = Retested {
                excess: mine
                    .iter()
                    .filter_map(|o| base[o.class].map(|b| o.y - b))
                    .collect(),
                alone_over_rounds: mine
                    .iter()
                    .filter_map(|o| rounds.get(&(o.i, o.j)).map(|y| o.y - y))
                    .collect(),
            };
            judge(s, &r, still, min_factor, serial)
        })
        .collect()
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
        "dimension" => 4,
        "link" => 5,
        "contention" => 6,
        _ => 7,
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
/// appeared at. Ordered node, host, switch, uplink, dimension, link, contention, then by
/// factor, largest first.
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
