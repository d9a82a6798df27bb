//! The text report of an all-pairs run (`commbench allpairs`, and `commbench report` of its
//! document): the verdicts first (what is slow, where, by how much, confirmed alone or not),
//! then per size the pair classes kept apart, the node effects of the median polish as
//! factors, the worst cells, the schedule and its rounds, the retests, and for up to
//! [`MATRIX_MAX_RANKS`] ranks the matrix itself. Also the comparison of two matrices
//! (`commbench compare` of two all-pairs documents).

use crate::analysis::allpairs::{self, CellFit, Estimate, Fit, Suspect, Topology, Verdict};
use crate::analysis::document::ResultDoc;
use crate::analysis::matrix::MatrixSection;
use crate::analysis::matrix_compare::{
    self, cells_at, CellRatio, Change, MatrixComparison, SizeComparison,
};
use crate::render::number::{text, Style};
use crate::render::words::{buffers_words, hang, size_words, sizes_list, Detail, CI_NOTE};
use crate::spec::format_size;
use commbench_core::method::allpairs::CellStats;
use commbench_core::method::NppChoice;
use commbench_core::stats;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt::Write;

/// Most ranks whose matrix is printed (16 columns of values fit in 100 characters).
pub const MATRIX_MAX_RANKS: u32 = 16;
/// Nodes listed by their effects (all of them with `--full`).
const NODES_SHOWN: usize = 5;
/// Worst cells listed (all of them with `--full`).
const CELLS_SHOWN: usize = 6;
/// Retested cells listed per size.
const RETESTS_SHOWN: usize = 8;
/// Changed cells listed per size in a comparison.
const CHANGES_SHOWN: usize = 20;
/// Nodes listed per size in a comparison, most changed first.
const COMPARE_NODES_SHOWN: usize = 16;

/// A time in us with four significant digits.
fn us(x: f64) -> String {
    text(x, Style::Significant)
}

/// A slowdown factor: `x2.90`.
fn factor(x: f64) -> String {
    format!("x{}", text(x, Style::Fixed(2)))
}

/// A factor with its interval: `x2.90 (2.70..3.10)`.
fn estimate(e: &Estimate) -> String {
    format!(
        "{} ({}..{})",
        factor(e.value),
        text(e.lo, Style::Fixed(2)),
        text(e.hi, Style::Fixed(2))
    )
}

/// A span of clock time in ns as `123.4 us`, `1.234 ms` or `2.345 s`.
fn duration(ns: u64) -> String {
    let ns = ns as f64;
    if ns < 1e6 {
        format!("{} us", text(ns / 1e3, Style::Significant))
    } else if ns < 1e9 {
        format!("{} ms", text(ns / 1e6, Style::Significant))
    } else {
        format!("{} s", text(ns / 1e9, Style::Significant))
    }
}

/// Host of `r`, or `?` when the document has none for it.
fn host(m: &MatrixSection, r: u32) -> &str {
    m.hosts.get(r as usize).map_or("?", String::as_str)
}

/// `3 (node3)`.
fn rank_host(m: &MatrixSection, r: u32) -> String {
    format!("{r} ({})", host(m, r))
}

/// `a` against `b` with runs of digits compared as numbers (`node2` before `node10`).
fn natural(a: &str, b: &str) -> std::cmp::Ordering {
    fn chunks(s: &str) -> Vec<(bool, &str)> {
        let mut out = Vec::new();
        let mut start = 0;
        let mut digit = None;
        for (i, c) in s.char_indices() {
            let d = c.is_ascii_digit();
            if digit.is_some_and(|x| x != d) {
                out.push((digit == Some(true), &s[start..i]));
                start = i;
            }
            digit = Some(d);
        }
        if start < s.len() {
            out.push((digit == Some(true), &s[start..]));
        }
        out
    }
    let (x, y) = (chunks(a), chunks(b));
    for (p, q) in x.iter().zip(&y) {
        let o = match (p, q) {
            ((true, p), (true, q)) => {
                let (p, q) = (p.trim_start_matches('0'), q.trim_start_matches('0'));
                p.len().cmp(&q.len()).then(p.cmp(q))
            }
            ((_, p), (_, q)) => p.cmp(q),
        };
        if o.is_ne() {
            return o;
        }
    }
    x.len().cmp(&y.len()).then(a.cmp(b))
}

/// The ranks ordered by the switches above their host when every rank's are known, then by
/// host name (numbers in names compared as numbers), then rank: the order of the matrix's
/// rows and columns, which keeps the ranks under one switch together.
pub fn host_order(m: &MatrixSection) -> Vec<u32> {
    let switches = match &m.topology {
        Topology::Switched { switches, .. } => Some(switches),
        _ => None,
    };
    let above = |r: u32| {
        switches
            .and_then(|s| s.get(r as usize))
            .map_or("", String::as_str)
    };
    let mut v: Vec<u32> = (0..m.ranks).collect();
    v.sort_by(|&a, &b| {
        natural(above(a), above(b))
            .then_with(|| natural(host(m, a), host(m, b)))
            .then(a.cmp(&b))
    });
    v
}

/// Whether the e-cube route of `from -> to` in a hypercube uses the channel between `a` and
/// `b` (either direction). Each dimension `k` where `from` and `to` differ is crossed in
/// increasing order, at the node made of `to`'s bits below `k` and `from`'s from `k` up.
fn route_uses(from: u32, to: u32, a: u32, b: u32) -> bool {
    let diff = from ^ to;
    (0..32).filter(|k| diff >> k & 1 == 1).any(|k| {
        let low = (1u32 << k) - 1;
        let at = (to & low) | (from & !low);
        let next = at ^ (1 << k);
        (at, next) == (a, b) || (at, next) == (b, a)
    })
}

/// Whether the message `from -> to` is forwarded through node `k` (e-cube routing; neither
/// end).
fn route_forwards(from: u32, to: u32, k: u32) -> bool {
    let diff = from ^ to;
    (0..32).filter(|d| diff >> d & 1 == 1).any(|d| {
        let low = (1u32 << d) - 1;
        let at = (to & low) | (from & !low);
        at == k && at != from
    })
}

/// Whether verdict `v` explains the cell `i -> j`: it blames it ([`blames`]), or, on the
/// hypercube, it names a node that forwards the cell's round trip (a slow node slows what it
/// forwards too, less than its own pairs).
pub fn explains(m: &MatrixSection, v: &Verdict, i: u32, j: u32) -> bool {
    blames(m, v, i, j)
        || match (&m.topology, v.nodes.as_slice(), v.element_kind()) {
            (Topology::Hypercube { .. }, [k], "node") => {
                route_forwards(i, j, *k) || route_forwards(j, i, *k)
            }
            _ => false,
        }
}

/// Whether the cell `i -> j` (a round trip: `i -> j` and `j -> i`) is one verdict `v` blames:
/// a node's cells, a link's (on a hypercube: every cell routed over the channel; on hosts:
/// the pair both ways), a dimension's (every pair differing in that bit).
pub fn blames(m: &MatrixSection, v: &Verdict, i: u32, j: u32) -> bool {
    match (v.element_kind(), v.switch.as_deref()) {
        ("host", _) => return v.nodes.contains(&i) || v.nodes.contains(&j),
        (kind @ ("switch" | "uplink"), Some(s)) => {
            return allpairs::route_uses(&m.topology, i, j, s, kind == "uplink")
        }
        ("switch_pair", Some(s)) => {
            return v
                .other_switch
                .as_deref()
                .is_some_and(|o| allpairs::route_between(&m.topology, i, j, s, o))
        }
        _ => {}
    }
    match (v.nodes.as_slice(), v.dimension) {
        ([k], _) => i == *k || j == *k,
        ([a, b], _) => match m.topology {
            Topology::Hypercube { .. } => route_uses(i, j, *a, *b) || route_uses(j, i, *a, *b),
            Topology::Hosts(_) | Topology::Switched { .. } => {
                (i, j) == (*a, *b) || (i, j) == (*b, *a)
            }
        },
        ([], Some(d)) => (i ^ j) >> d & 1 == 1,
        _ => false,
    }
}

/// The cells of `size` to point out: a robust z beyond the rule's, or blamed by a verdict
/// that holds at this size.
pub fn flagged(m: &MatrixSection, size: u64) -> HashSet<(u32, u32)> {
    let mut out = HashSet::new();
    if let Some(f) = m.fit_at(size) {
        out.extend(
            f.cells
                .iter()
                .filter(|c| c.z.abs() > m.rule.z)
                .map(|c| (c.source, c.dest)),
        );
    }
    let verdicts: Vec<&Verdict> = m
        .verdicts
        .iter()
        .filter(|v| v.sizes.is_empty() || v.sizes.contains(&size))
        .collect();
    for i in 0..m.ranks {
        for j in (0..m.ranks).filter(|&j| j != i) {
            if verdicts.iter().any(|v| blames(m, v, i, j)) {
                out.insert((i, j));
            }
        }
    }
    out
}

/// What a verdict names: `node 3 (node3)`, `link 2 - 6 (node2 - node6), dimension 2`,
/// `dimension 1`, `host a (ranks 0, 1)`, `switch root.s1 (32 ranks under it)`, `uplink of
/// switch root.s1.leaf4 to root.s1`, `switch pair root.s1.leaf2 - root.s2.leaf7 (8 ranks
/// under them)`.
fn subject(
    m: &MatrixSection,
    kind: &str,
    nodes: &[u32],
    dimension: Option<u32>,
    (switch, other): (Option<&str>, Option<&str>),
) -> String {
    let dim = dimension.map(|d| format!(", dimension {d}"));
    match (kind, switch) {
        ("switch", Some(s)) => return format!("switch {s} ({} ranks under it)", nodes.len()),
        ("switch_pair", Some(s)) => {
            return format!(
                "switch pair {s} - {} ({} ranks under them)",
                other.unwrap_or("?"),
                nodes.len()
            )
        }
        ("uplink", Some(s)) => {
            let parent = s.rsplit_once('.').map_or("its parent", |(p, _)| p);
            return format!("uplink of switch {s} to {parent}");
        }
        _ => {}
    }
    if kind == "host" {
        let ranks: Vec<String> = nodes.iter().map(u32::to_string).collect();
        let name = nodes.first().map_or("?", |&r| host(m, r));
        return format!("host {name} (ranks {})", ranks.join(", "));
    }
    match nodes {
        [k] => format!("node {}{}", rank_host(m, *k), dim.unwrap_or_default()),
        [a, b] => format!(
            "link {a} - {b} ({} - {}){}",
            host(m, *a),
            host(m, *b),
            dim.unwrap_or_default()
        ),
        [] => match dimension {
            Some(d) => format!("dimension {d}"),
            None => "the machine".to_string(),
        },
        more => {
            let names: Vec<String> = more.iter().map(|&r| rank_host(m, r)).collect();
            format!("nodes {}", names.join(", "))
        }
    }
}

/// One verdict: what, where, by how much, whether confirmed, at which sizes, and why.
fn verdict_lines(out: &mut String, m: &MatrixSection, k: usize, v: &Verdict) {
    let status = match (v.kind.as_str(), v.confirmed, v.alone.is_some()) {
        ("contention", ..) => "slow only while other pairs ran, faster measured alone",
        (_, true, _) => "confirmed measured alone",
        (_, false, true) => "not confirmed alone (see why)",
        (_, false, false) => "not confirmed (no retest alone)",
    };
    let what = subject(
        m,
        v.element_kind(),
        &v.nodes,
        v.dimension,
        (v.switch.as_deref(), v.other_switch.as_deref()),
    );
    let what = if v.kind == "contention" {
        format!("contention at {what}")
    } else {
        what
    };
    let at = if v.sizes.is_empty() {
        String::new()
    } else {
        format!("; at {}", sizes_list(&v.sizes))
    };
    let effect = v.effect_us.map_or(String::new(), |e| {
        format!(
            " (model: {:+.3} us a use, {:.3}..{:.3})",
            e.value, e.lo, e.hi
        )
    });
    hang(
        out,
        &format!(
            "{what}: its own cells {} slower{effect}, {status}{at}",
            estimate(&v.factor)
        ),
        &format!("  {k}. "),
        "     ",
        98,
    );
    if !v.evidence.is_empty() {
        wrap(out, &v.evidence, "     ", 96);
    }
}

/// `s` word-wrapped to `width` characters, each line after `indent`.
fn wrap(out: &mut String, s: &str, indent: &str, width: usize) {
    hang(out, s, indent, indent, width);
}

/// Most elements under the rule's factor listed per size.
const BELOW_SHOWN: usize = 5;

/// The verdicts, or the word that there is none.
fn verdicts(out: &mut String, m: &MatrixSection) {
    let _ = writeln!(out, "Verdicts");
    lost(out, m);
    for (k, v) in m.verdicts.iter().enumerate() {
        verdict_lines(out, m, k + 1, v);
    }
    if m.fits.is_empty() {
        let _ = writeln!(
            out,
            "  no attribution: no size had enough cells to fit the model"
        );
    } else if m.verdicts.is_empty() {
        let _ = writeln!(
            out,
            "  no suspect: no {} has its own cells {} slower than healthy ones",
            element_words(m),
            factor(m.rule.min_factor)
        );
    } else if !m.has_fault() {
        let _ = writeln!(
            out,
            "  no {} fault: what was slow in the rounds was faster alone",
            element_words(m)
        );
    }
    limits(out, m);
    lone_cells(out, m);
}

/// The ranks the run went on without: where each fell silent and what of the matrix it
/// took with it.
fn lost(out: &mut String, m: &MatrixSection) {
    for l in &m.lost {
        let host = m
            .hosts
            .get(l.rank as usize)
            .map_or(String::new(), |h| format!(" ({h})"));
        let when = match l.round.and_then(|i| m.rounds.get(i as usize)) {
            Some(r) => {
                let of = m
                    .rounds
                    .iter()
                    .filter(|o| o.size == r.size && o.pass == r.pass && o.retest == r.retest)
                    .count();
                let what = if r.retest { "retest" } else { "round" };
                let pass = if m.config.passes > 1 && !r.retest {
                    format!(" of pass {} of {}", r.pass + 1, m.config.passes)
                } else {
                    String::new()
                };
                format!(
                    "by the end of {what} {} of {of}{pass} at {}",
                    r.index + 1,
                    size_words(r.size)
                )
            }
            None => "before the first round ended".into(),
        };
        let missing: usize = m
            .rounds
            .iter()
            .flat_map(|r| r.lost_cells.iter())
            .filter(|&&(a, b)| a == l.rank || b == l.rank)
            .count();
        let s = format!(
            "lost: rank {}{host} fell silent {when} and was given up on {} after the run \
             started (silent for longer than the round timeout, twice); the run went on \
             without it: {missing} of its cells were not measured, every other cell is kept",
            l.rank,
            duration(l.at_ns)
        );
        hang(out, &s, "  ", "    ", 98);
    }
}

/// The kinds of element the model tests: "node, link or dimension" on the hypercube.
fn element_words(m: &MatrixSection) -> &'static str {
    let hosts = m
        .fits
        .iter()
        .any(|f| f.fit.limits.iter().any(|l| l.kind == "host"));
    match (&m.topology, hosts) {
        (Topology::Hypercube { .. }, _) => "node, link or dimension",
        (Topology::Hosts(_), true) => "host, node or link",
        (Topology::Hosts(_), false) => "node or link",
        (Topology::Switched { .. }, true) => "switch, uplink, switch pair, host, node or link",
        (Topology::Switched { .. }, false) => "switch, uplink, switch pair, node or link",
    }
}

/// The detection limit of each size: the smallest slowdown of an element's own cells this run
/// would have found, per kind.
fn limits(out: &mut String, m: &MatrixSection) {
    let mut lines = Vec::new();
    for f in m.fits.iter().filter(|f| !f.fit.limits.is_empty()) {
        let kinds: Vec<String> = f
            .fit
            .limits
            .iter()
            .map(|l| {
                let article = if l.kind.starts_with(['a', 'e', 'i', 'o', 'u']) {
                    "an"
                } else {
                    "a"
                };
                let kind = l.kind.replace('_', " ");
                format!("{article} {kind} x{}", text(l.factor, Style::Fixed(3)))
            })
            .collect();
        lines.push(format!("{}: {}", format_size(f.size), kinds.join(", ")));
    }
    if lines.is_empty() {
        return;
    }
    wrap(
        out,
        &format!(
            "Smallest slowdown this run would have found (own cells, 90 % power), at {}; verdicts name it from {} (--min-factor)",
            lines.join("; "),
            factor(m.rule.min_factor)
        ),
        "  ",
        98,
    );
    let mut untestable: Vec<&str> = m
        .fits
        .iter()
        .flat_map(|f| f.fit.untestable.iter().map(String::as_str))
        .collect();
    untestable.sort_unstable();
    untestable.dedup();
    if !untestable.is_empty() {
        wrap(
            out,
            &format!(
                "Not tested: {}: the routes over each are more than half of their class of \
                 pairs (of a switch pair, a third), whose baseline takes them (a slow one shows \
                 as a slow class)",
                untestable.join(", ")
            ),
            "  ",
            98,
        );
    }
}

/// Cells slow by the model (excess above the threshold) that no verdict blames: a single slow
/// measurement, or too few slow cells to name a node or link.
fn lone_cells(out: &mut String, m: &MatrixSection) {
    let mut lone: Vec<(u64, CellFit)> = Vec::new();
    for sf in &m.fits {
        let holds: Vec<&Verdict> = m
            .verdicts
            .iter()
            .filter(|v| v.sizes.is_empty() || v.sizes.contains(&sf.size))
            .collect();
        lone.extend(
            sf.fit
                .cells
                .iter()
                .filter(|c| c.excess > sf.fit.thr)
                .filter(|c| !holds.iter().any(|v| explains(m, v, c.source, c.dest)))
                .map(|c| (sf.size, *c)),
        );
    }
    if lone.is_empty() {
        return;
    }
    lone.sort_by(|a, b| b.1.excess.total_cmp(&a.1.excess));
    let _ = writeln!(
        out,
        "  {} slow cell(s) that no verdict explains (too few to name a node or link):",
        lone.len()
    );
    for (size, c) in lone.iter().take(CELLS_SHOWN) {
        let _ = writeln!(
            out,
            "    {} at {}: {} over a healthy cell of its class, z {}",
            pair_words(m, c.source, c.dest),
            format_size(*size),
            factor(c.excess.exp()),
            text(c.z, Style::Fixed(1))
        );
    }
    if lone.len() > CELLS_SHOWN {
        let _ = writeln!(out, "    ... and {} more", lone.len() - CELLS_SHOWN);
    }
}

/// What the run knew of where its ranks sit: the topology line, and a note when the switches
/// were known for some ranks only.
fn topology_lines(out: &mut String, m: &MatrixSection) {
    let classes = match &m.topology {
        Topology::Hypercube { dimensions } => {
            format!("a hypercube of {dimensions} dimension(s), pairs kept apart by hop distance")
        }
        Topology::Hosts(_) => "pairs on the same host kept apart from pairs across hosts".into(),
        Topology::Switched { switches, .. } => {
            let mut all = std::collections::BTreeSet::new();
            for p in switches {
                let mut at = 0;
                while let Some(k) = p[at..].find('.') {
                    all.insert(&p[..at + k]);
                    at += k + 1;
                }
                all.insert(p.as_str());
            }
            format!(
                "{} switches above the hosts; pairs kept apart by the number of switches their \
                 route goes through (same host, same switch, 3, 5, ...)",
                all.len()
            )
        }
    };
    hang(out, &format!("topology: {classes}"), "  ", "    ", 98);
    let (_, unknown) = allpairs::with_switches(&m.hosts, &m.switches);
    if !m.switches.is_empty() && unknown > 0 {
        hang(
            out,
            &format!(
                "switches: not known above the hosts of {unknown} of {} ranks, or named \
                 otherwise by another rank of the host (--topology, SLURM_TOPOLOGY_ADDR), so \
                 none is an element: pairs kept apart by host only",
                m.ranks
            ),
            "  ",
            "    ",
            98,
        );
    }
}

/// The run's first lines: what ran where, the method, the schedule and the rule.
fn head(out: &mut String, doc: &ResultDoc, m: &MatrixSection) {
    let env = &doc.environment;
    let hosts: HashSet<&str> = m.hosts.iter().map(String::as_str).collect();
    let _ = writeln!(
        out,
        "All pairs: every ordered pair i -> j, i timing a ping-pong with j (Luecke et al. 2009)\n  \
         over {}: {} ranks on {} host(s), started by {}",
        env.backend,
        m.ranks,
        hosts.len(),
        env.launcher
    );
    topology_lines(out, m);
    if let Some(b) = buffers_words(doc) {
        let _ = writeln!(out, "  {b}");
    }
    if let Some(c) = &doc.config {
        let mc = &c.method;
        let npp = match &mc.npp {
            NppChoice::Fixed(v) => format!("npp = {v} fixed"),
            _ => "npp from the source's timer resolution (§3.3)".into(),
        };
        let _ = writeln!(
            out,
            "  method: {} trials per cell after {} warm-up, {npp}",
            mc.trials, mc.warmup
        );
    }
    let cfg = &m.config;
    let conc = if cfg.concurrency == 0 {
        "every pair of a round at once".to_string()
    } else {
        format!("at most {} pairs at once", cfg.concurrency)
    };
    let seed = if cfg.schedule.name() == "random" {
        format!(" (seed {})", cfg.seed)
    } else {
        String::new()
    };
    let retest = if cfg.retest_trials == 0 {
        "suspects not retested".to_string()
    } else {
        format!("retests alone: {} trials", cfg.retest_trials)
    };
    let _ = writeln!(
        out,
        "  schedule: {}{seed}, {} pass(es), {conc}; {retest}",
        cfg.schedule.name(),
        cfg.passes
    );
    wrap(
        out,
        &format!(
            "rule: an element is named when its effect is significant (z over {} and a Bonferroni level) and its own cells are {} slower than healthy ones; a cell is flagged beyond robust z {}",
            m.rule.z,
            factor(m.rule.min_factor),
            m.rule.z
        ),
        "  ",
        98,
    );
}

/// One cell of one size: its merged trials' statistics and its fit.
struct CellView {
    summary: CellStats,
    fit: Option<CellFit>,
}

/// Every main-pass cell of `size`, by `(source, dest)`.
fn cells_of(m: &MatrixSection, size: u64) -> BTreeMap<(u32, u32), CellView> {
    let fits: HashMap<(u32, u32), CellFit> = m
        .fit_at(size)
        .map(|f| f.cells.iter().map(|c| ((c.source, c.dest), *c)).collect())
        .unwrap_or_default();
    cells_at(m, size, false)
        .into_iter()
        .map(|(k, v)| {
            (
                k,
                CellView {
                    summary: v.stats,
                    fit: fits.get(&k).copied(),
                },
            )
        })
        .collect()
}

/// The pair classes: cells, the median and range of their medians, a healthy cell's time.
fn classes(out: &mut String, f: &Fit, cells: &BTreeMap<(u32, u32), CellView>, m: &MatrixSection) {
    let class_of = |i: u32, j: u32| -> u32 {
        match &m.topology {
            Topology::Hypercube { .. } => (i ^ j).count_ones(),
            Topology::Hosts(h) => u32::from(h.get(i as usize) != h.get(j as usize)),
            Topology::Switched { .. } => allpairs::switch_count(&m.topology, i, j).unwrap_or(1),
        }
    };
    let _ = writeln!(
        out,
        "  {:<14} {:>6} {:>11} {:>10} {:>10} {:>11}",
        "class", "cells", "median us", "min us", "max us", "healthy us"
    );
    for c in &f.classes {
        let mut med: Vec<f64> = cells
            .iter()
            .filter(|((i, j), _)| class_of(*i, *j) == c.class)
            .map(|(_, v)| v.summary.median)
            .collect();
        stats::sort_samples(&mut med);
        let pick = |x: Option<f64>| x.map_or_else(|| "-".to_string(), us);
        let _ = writeln!(
            out,
            "  {:<14} {:>6} {:>11} {:>10} {:>10} {:>11}",
            c.label,
            c.cells,
            pick(stats::median(&med)),
            pick(med.first().copied()),
            pick(med.last().copied()),
            pick(c.baseline_us)
        );
    }
}

/// The node effects as factors, the slowest first.
fn nodes(out: &mut String, f: &Fit, m: &MatrixSection, slow: &HashSet<(u32, u32)>, all: bool) {
    let n = f.sender.len().min(f.receiver.len());
    let mut order: Vec<usize> = (0..n).collect();
    let worst = |r: usize| f.sender[r].max(f.receiver[r]);
    order.sort_by(|&a, &b| worst(b).total_cmp(&worst(a)).then(a.cmp(&b)));
    let shown = if all { n } else { n.min(NODES_SHOWN) };
    let which = if shown == n {
        format!("all {n}")
    } else {
        format!("slowest {shown} of {n}")
    };
    let _ = writeln!(
        out,
        "  node effects, exp(sender) and exp(receiver) of the median polish ({which}):"
    );
    let hw = order
        .iter()
        .take(shown)
        .map(|&r| host(m, r as u32).len())
        .max()
        .unwrap_or(4)
        .clamp(4, 24);
    let _ = writeln!(
        out,
        "  {:>5} {:<hw$} {:>8} {:>9} {:>16}",
        "rank", "host", "sender", "receiver", "flagged cells"
    );
    for &r in order.iter().take(shown) {
        let flagged = slow
            .iter()
            .filter(|(i, j)| *i == r as u32 || *j == r as u32)
            .count();
        let name: String = host(m, r as u32).chars().take(hw).collect();
        let _ = writeln!(
            out,
            "  {:>5} {:<hw$} {:>8} {:>9} {:>16}",
            r,
            name,
            factor(f.sender[r].exp()),
            factor(f.receiver[r].exp()),
            flagged
        );
    }
}

/// `3 (node3) -> 1 (node1)` padded.
fn pair_words(m: &MatrixSection, i: u32, j: u32) -> String {
    format!("{} -> {}", rank_host(m, i), rank_host(m, j))
}

/// Cell lines: the pair, its median with the CI of the median, z and the excess factor.
fn cell_table(
    out: &mut String,
    m: &MatrixSection,
    rows: &[(&(u32, u32), &CellView)],
    flagged: &HashSet<(u32, u32)>,
) {
    let pw = rows
        .iter()
        .map(|((i, j), _)| pair_words(m, *i, *j).len())
        .max()
        .unwrap_or(14)
        .clamp(14, 38);
    let _ = writeln!(
        out,
        "  {:<pw$} {:>10} {:>21} {:>7} {:>8} {:>6}",
        "source -> dest", "median us", "95% CI of median", "z", "excess", "trials"
    );
    for ((i, j), v) in rows {
        let s = &v.summary;
        let ci = format!("{}..{}", us(s.ci95_median.lo), us(s.ci95_median.hi));
        let (z, x) = v.fit.map_or(("-".to_string(), "-".to_string()), |c| {
            (text(c.z, Style::Fixed(1)), factor(c.excess.exp()))
        });
        let mark = if flagged.contains(&(*i, *j)) {
            " *"
        } else {
            ""
        };
        let _ = writeln!(
            out,
            "  {:<pw$} {:>10} {:>21} {:>7} {:>8} {:>6}{mark}",
            pair_words(m, *i, *j),
            us(s.median),
            ci,
            z,
            x,
            s.n
        );
    }
}

/// How the cells of `size` stopped when they were measured until their interval was narrow
/// enough (`--until-ci`): how many ended each way, and the trials they took. Nothing for a
/// fixed count.
fn stopping(out: &mut String, m: &MatrixSection, size: u64) {
    use commbench_core::method::until::Outcome;
    let cells: Vec<_> = m
        .cells
        .iter()
        .filter(|c| c.size == size)
        .filter_map(|c| c.until_ci.as_deref().map(|u| (u, c.stats.n as usize)))
        .collect();
    let Some((first, _)) = cells.first() else {
        return;
    };
    let count = |o: Outcome| cells.iter().filter(|(u, _)| u.outcome == o).count();
    let pct = crate::analysis::point::percent_exact;
    let mut trials: Vec<usize> = cells.iter().map(|&(_, n)| n).collect();
    trials.sort_unstable();
    let _ = writeln!(
        out,
        "  cells measured until their {} interval decided them: {} separated from their \
         threshold,\n    {} within {}, {} borderline, {} did_not_converge; {} to {} trials a \
         cell, median {}",
        pct(first.level),
        count(Outcome::Separated),
        count(Outcome::Converged),
        pct(first.rel),
        count(Outcome::Borderline),
        count(Outcome::DidNotConverge),
        trials[0],
        trials[trials.len() - 1],
        trials[trials.len() / 2]
    );
}

/// Under a time budget (`--max-time`): whether it ended the size early, and how much of the
/// matrix the size covered.
fn budget(out: &mut String, m: &MatrixSection, size: u64) {
    let (Some(t), Some(c)) = (
        m.config.max_time_s,
        m.coverage.iter().find(|c| c.size == size),
    ) else {
        return;
    };
    let pct = |a: u64, b: u64| 100.0 * a as f64 / b.max(1) as f64;
    let ended = if c.cells < c.of_cells {
        "ended the size early"
    } else {
        "left every round measured"
    };
    let _ = writeln!(
        out,
        "  time budget {} s ({} a size): {ended}; covered {} of {} cells ({:.1} %), {} of {} ranks, \
         {} of {} host pairs ({:.1} %)",
        text(t, Style::Significant),
        text(t / m.sizes.len().max(1) as f64, Style::Significant),
        c.cells,
        c.of_cells,
        pct(c.cells, c.of_cells),
        c.ranks,
        m.ranks,
        c.host_pairs,
        c.of_host_pairs,
        pct(c.host_pairs, c.of_host_pairs)
    );
    if let (Some(a), Some(b)) = (c.switch_pairs, c.of_switch_pairs) {
        let _ = writeln!(
            out,
            "    and {a} of {b} pairs of the switches the hosts hang from ({:.1} %)",
            pct(a, b)
        );
    }
}

/// The rounds of `size`: how many, over how long, and the retests.
fn rounds(out: &mut String, m: &MatrixSection, size: u64) {
    let main: Vec<_> = m
        .rounds
        .iter()
        .filter(|r| r.size == size && !r.retest)
        .collect();
    let again: Vec<_> = m
        .rounds
        .iter()
        .filter(|r| r.size == size && r.retest)
        .collect();
    let span = |rs: &[&commbench_core::method::allpairs::RoundRaw]| -> String {
        let lo = rs.iter().map(|r| r.start_ns).min().unwrap_or(0);
        let hi = rs.iter().map(|r| r.end_ns).max().unwrap_or(0);
        duration(hi.saturating_sub(lo))
    };
    let most = main.iter().map(|r| r.pairs.len()).max().unwrap_or(0);
    let passes = main.iter().map(|r| r.pass).max().map_or(0, |p| p + 1);
    let _ = writeln!(
        out,
        "  rounds: {} in {passes} pass(es) over {}, up to {most} pair(s) at once ({})",
        main.len(),
        span(&main),
        m.config.schedule.name()
    );
    budget(out, m, size);
    stopping(out, m, size);
    if again.is_empty() {
        let _ = writeln!(out, "  retests: none");
        return;
    }
    let pairs: HashSet<(u32, u32)> = again
        .iter()
        .flat_map(|r| r.pairs.iter().map(|p| (p.first, p.second)))
        .collect();
    let cells: HashSet<(u32, u32)> = again
        .iter()
        .flat_map(|r| r.pairs.iter().flat_map(|p| p.cells()))
        .collect();
    let _ = writeln!(
        out,
        "  retests: {} pair(s) ({} cells) measured again alone in {} round(s) over {}:",
        pairs.len(),
        cells.len(),
        again.len(),
        span(&again)
    );
    let main_t = cells_at(m, size, false);
    let alone = cells_at(m, size, true);
    for (&(i, j), v) in alone.iter().take(RETESTS_SHOWN) {
        let a = us(v.stats.median);
        let b = main_t
            .get(&(i, j))
            .map_or_else(|| "-".into(), |t| us(t.stats.median));
        let _ = writeln!(
            out,
            "    {}: {a} us alone, {b} us in the rounds",
            pair_words(m, i, j)
        );
    }
    if alone.len() > RETESTS_SHOWN {
        let _ = writeln!(out, "    ... and {} more", alone.len() - RETESTS_SHOWN);
    }
}

/// A matrix entry with three significant digits (`5.01`, `10.4`, `168`), in a unit that keeps
/// it below 1000.
fn short(x: f64) -> String {
    let d = if x < 10.0 {
        2
    } else if x < 100.0 {
        1
    } else {
        0
    };
    text(x, Style::Fixed(d))
}

/// The matrix of medians, rows source and columns dest, ranks ordered by host.
fn matrix(out: &mut String, m: &MatrixSection, size: u64, flagged: &HashSet<(u32, u32)>) {
    let order = host_order(m);
    let med = m.medians(size);
    let most = med.iter().flatten().flatten().copied().fold(0.0, f64::max);
    let (unit, scale) = if most < 999.5 {
        ("us", 1.0)
    } else if most < 999.5e3 {
        ("ms", 1e3)
    } else {
        ("s", 1e6)
    };
    let cell = |i: u32, j: u32| -> String {
        med.get(i as usize)
            .and_then(|r| r.get(j as usize))
            .copied()
            .flatten()
            .map_or_else(|| "-".into(), |v| short(v / scale))
    };
    let w = order
        .iter()
        .flat_map(|&i| order.iter().map(move |&j| (i, j)))
        .map(|(i, j)| cell(i, j).len())
        .chain(order.iter().map(|r| r.to_string().len()))
        .max()
        .unwrap_or(1);
    let lw = order.iter().map(|r| r.to_string().len()).max().unwrap_or(1);
    let _ = writeln!(
        out,
        "  median one-way time, {unit} (rows source, columns dest, ranks by host; * flagged):"
    );
    let mut hdr = format!("  {:>lw$}", "");
    for &j in &order {
        let _ = write!(hdr, " {j:>w$} ");
    }
    let _ = writeln!(out, "{}", hdr.trim_end());
    for &i in &order {
        let mut line = format!("  {i:>lw$}");
        for &j in &order {
            let mark = if flagged.contains(&(i, j)) { '*' } else { ' ' };
            let v = if i == j { ".".to_string() } else { cell(i, j) };
            let _ = write!(line, " {v:>w$}{mark}");
        }
        let _ = writeln!(out, "{}", line.trim_end());
    }
    if !(1..order.len()).any(|k| host(m, order[k]) == host(m, order[k - 1])) {
        let _ = writeln!(out, "  hosts: one rank on each");
        return;
    }
    let mut groups: Vec<(String, Vec<u32>)> = Vec::new();
    for &r in &order {
        match groups.last_mut() {
            Some((h, v)) if h == host(m, r) => v.push(r),
            _ => groups.push((host(m, r).to_string(), vec![r])),
        }
    }
    let words: Vec<String> = groups
        .iter()
        .map(|(h, v)| {
            let v: Vec<String> = v.iter().map(u32::to_string).collect();
            format!("{h}: {}", v.join(" "))
        })
        .collect();
    wrap(out, &format!("hosts: {}", words.join("; ")), "  ", 98);
}

/// The elements significant in the model but under the rule's factor at one size, the first
/// few named.
fn below_min_factor(out: &mut String, m: &MatrixSection, f: &Fit) {
    if f.below_min_factor.is_empty() {
        return;
    }
    let shown: Vec<String> = f
        .below_min_factor
        .iter()
        .take(BELOW_SHOWN)
        .map(|s| named(m, s))
        .collect();
    let more = f.below_min_factor.len().saturating_sub(BELOW_SHOWN);
    let more = if more > 0 {
        format!(" and {more} more")
    } else {
        String::new()
    };
    let text = format!(
        "significant in the additive model but slower than healthy by less than {} (not named): {}{more}",
        factor(m.rule.min_factor),
        shown.join("; ")
    );
    wrap(out, &text, "  ", 98);
}

/// A suspect as the size section lists it: what it names and its factor.
fn named(m: &MatrixSection, s: &Suspect) -> String {
    format!(
        "{} {}",
        subject(
            m,
            &s.kind,
            &s.nodes,
            s.dimension,
            (s.switch.as_deref(), s.other_switch.as_deref())
        ),
        estimate(&s.factor)
    )
}

/// One size: the fit, the classes, the nodes, the worst cells, the rounds and the matrix.
fn size_section(out: &mut String, m: &MatrixSection, size: u64, detail: Detail) {
    let cells = cells_of(m, size);
    let flagged = flagged(m, size);
    let _ = writeln!(out);
    let _ = writeln!(out, "{}: {} cells", size_words(size), cells.len());
    match m.fit_at(size) {
        Some(f) => {
            let _ = writeln!(
                out,
                "  model: median polish of log time ({} sweeps); noise {}, a cell is slow above {}",
                f.sweeps,
                factor(f.noise.exp()),
                factor(f.thr.exp())
            );
            below_min_factor(out, m, f);
            classes(out, f, &cells, m);
            nodes(out, f, m, &flagged, detail == Detail::Full);
            if !f.suspects.is_empty() {
                let names: Vec<String> = f.suspects.iter().map(|s| named(m, s)).collect();
                let _ = writeln!(out, "  suspects at this size: {}", names.join("; "));
            }
        }
        None => {
            let _ = writeln!(out, "  model: too few cells to fit");
        }
    }
    let mut rows: Vec<(&(u32, u32), &CellView)> = cells.iter().collect();
    if detail == Detail::Full {
        let _ = writeln!(out, "  every cell (* flagged):");
    } else {
        rows.sort_by(|a, b| {
            let key = |v: &CellView| {
                v.fit
                    .map_or((f64::NEG_INFINITY, f64::NEG_INFINITY), |c| (c.excess, c.z))
            };
            let (ka, kb) = (key(a.1), key(b.1));
            kb.0.total_cmp(&ka.0)
                .then(kb.1.total_cmp(&ka.1))
                .then(a.0.cmp(b.0))
        });
        rows.truncate(CELLS_SHOWN);
        let _ = writeln!(
            out,
            "  worst cells, by their excess over a healthy cell of their class (* flagged):"
        );
    }
    cell_table(out, m, &rows, &flagged);
    rounds(out, m, size);
    if m.ranks <= MATRIX_MAX_RANKS {
        matrix(out, m, size, &flagged);
    }
}

/// The report of an all-pairs document: verdicts first, then each size.
pub fn render(out: &mut String, doc: &ResultDoc, detail: Detail) {
    let Some(m) = &doc.allpairs else {
        return;
    };
    head(out, doc, m);
    let _ = writeln!(out);
    verdicts(out, m);
    for &s in &m.sizes {
        size_section(out, m, s, detail);
    }
    let _ = writeln!(out);
    wrap(out, CI_NOTE, "", 100);
}

/// The comparison of matrix B (`names.1`) against matrix A (`names.0`), the largest changes
/// first.
pub fn comparison(c: &MatrixComparison, a: &MatrixSection, names: (&str, &str)) -> String {
    let mut out = String::new();
    comparison_head(&mut out, c, names);
    for s in &c.sizes {
        let _ = writeln!(out);
        comparison_size(&mut out, s, a);
    }
    comparison_tail(&mut out, c);
    out
}

/// The head of a comparison: which document is which, the ranks and sizes, how a cell is
/// judged, and the totals over all sizes.
fn comparison_head(out: &mut String, c: &MatrixComparison, names: (&str, &str)) {
    let _ = writeln!(
        out,
        "All-pairs comparison: B = {} against A = {}, cell by cell",
        names.1, names.0
    );
    let ranks = if c.ranks.0 == c.ranks.1 {
        format!("{} ranks", c.ranks.0)
    } else {
        format!(
            "{} ranks in A, {} in B (the cells of both compared)",
            c.ranks.0, c.ranks.1
        )
    };
    let _ = writeln!(
        out,
        "  {ranks}; sizes {}{}",
        sizes_list(&c.sizes.iter().map(|s| s.size).collect::<Vec<_>>()),
        if c.hosts_differ {
            "; the ranks sit on different hosts in B (hosts below are A's)"
        } else {
            ""
        }
    );
    let _ = writeln!(
        out,
        "  B/A = ratio of the cell's median one-way times, 95% bootstrap CI ({} resamples); a",
        c.resamples
    );
    let _ = writeln!(
        out,
        "  cell is slower (faster) when its CI lies above (below) 1 and B/A is beyond {} ({})",
        text(matrix_compare::SLOWER, Style::Fixed(2)),
        text(matrix_compare::FASTER, Style::Fixed(2))
    );
    let by_summary: usize = c
        .sizes
        .iter()
        .map(|s| s.cells.iter().filter(|x| x.summaries).count())
        .sum();
    if by_summary > 0 {
        let _ = writeln!(
            out,
            "  {by_summary} cell(s) without trials on a side (no --raw all files found) get the \
             wider interval of\n  their medians' intervals instead (at least 90% coverage)"
        );
    }
    let (slower, faster, same) = c.totals();
    let _ = writeln!(
        out,
        "  in all: {slower} cell(s) slower, {faster} faster, {same} the same"
    );
}

/// One size of a comparison: its counts, its most changed cells and its nodes.
fn comparison_size(out: &mut String, s: &SizeComparison, a: &MatrixSection) {
    let mut extra = String::new();
    if s.only_a + s.only_b > 0 {
        extra = format!(" ({} only in A, {} only in B)", s.only_a, s.only_b);
    }
    let _ = writeln!(
        out,
        "{}: {} cells in both{extra}: {} slower, {} faster, {} the same",
        size_words(s.size),
        s.cells.len(),
        s.slower,
        s.faster,
        s.same
    );
    let worst = s.worst();
    if !worst.is_empty() {
        changed_cells(out, &worst, a);
    }
    changed_nodes(out, s);
}

/// The table of a size's changed cells, the largest changes first, at most
/// [`CHANGES_SHOWN`] of them.
fn changed_cells(out: &mut String, worst: &[&CellRatio], a: &MatrixSection) {
    let pw = worst
        .iter()
        .map(|x| pair_words(a, x.source, x.dest).len())
        .max()
        .unwrap_or(14)
        .clamp(14, 38);
    let _ = writeln!(
        out,
        "  {:<pw$} {:>10} {:>10} {:>7} {:>15}  change",
        "source -> dest", "A us", "B us", "B/A", "95% CI"
    );
    for x in worst.iter().take(CHANGES_SHOWN) {
        let _ = writeln!(
            out,
            "  {:<pw$} {:>10} {:>10} {:>7} {:>15}  {}",
            pair_words(a, x.source, x.dest),
            us(x.a_us),
            us(x.b_us),
            text(x.ratio, Style::Fixed(2)),
            ratio_ci(x),
            change_word(x.change)
        );
    }
    if worst.len() > CHANGES_SHOWN {
        let _ = writeln!(out, "  ... and {} more", worst.len() - CHANGES_SHOWN);
    }
}

/// A cell's 95% CI of B/A as `lo..hi`, or `-` without one.
fn ratio_ci(x: &CellRatio) -> String {
    x.ci95.map_or_else(
        || "-".to_string(),
        |ci| {
            format!(
                "{}..{}",
                text(ci.lo, Style::Fixed(2)),
                text(ci.hi, Style::Fixed(2))
            )
        },
    )
}

/// The word for a cell's change.
fn change_word(change: Change) -> &'static str {
    match change {
        Change::Slower => "slower",
        Change::Faster => "faster",
        Change::Same => "same",
    }
}

/// The table of a size's nodes by the median B/A of their cells, the most changed first, at
/// most [`COMPARE_NODES_SHOWN`] of them.
fn changed_nodes(out: &mut String, s: &SizeComparison) {
    let mut nodes: Vec<_> = s.nodes.iter().collect();
    nodes.sort_by(|x, y| {
        y.ratio
            .ln()
            .abs()
            .total_cmp(&x.ratio.ln().abs())
            .then(x.rank.cmp(&y.rank))
    });
    let shown = nodes.len().min(COMPARE_NODES_SHOWN);
    let _ = writeln!(
        out,
        "  nodes, median B/A of the cells each takes part in ({}):",
        if shown == nodes.len() {
            "most changed first".to_string()
        } else {
            format!("the {shown} most changed of {}", nodes.len())
        }
    );
    let hw = nodes
        .iter()
        .take(shown)
        .map(|n| n.host.len())
        .max()
        .unwrap_or(4)
        .clamp(4, 24);
    let _ = writeln!(
        out,
        "  {:>5} {:<hw$} {:>7} {:>6} {:>7} {:>7}",
        "rank", "host", "B/A", "cells", "slower", "faster"
    );
    for n in nodes.iter().take(shown) {
        let name: String = n.host.chars().take(hw).collect();
        let _ = writeln!(
            out,
            "  {:>5} {:<hw$} {:>7} {:>6} {:>7} {:>7}",
            n.rank,
            name,
            text(n.ratio, Style::Fixed(2)),
            n.cells,
            n.slower,
            n.faster
        );
    }
}

/// The end of a comparison: the sizes only one document has, and what its CIs describe.
fn comparison_tail(out: &mut String, c: &MatrixComparison) {
    if !c.only_a.is_empty() || !c.only_b.is_empty() {
        let _ = writeln!(out);
        if !c.only_a.is_empty() {
            let _ = writeln!(
                out,
                "sizes only in A (not compared): {}",
                sizes_list(&c.only_a)
            );
        }
        if !c.only_b.is_empty() {
            let _ = writeln!(
                out,
                "sizes only in B (not compared): {}",
                sizes_list(&c.only_b)
            );
        }
    }
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "Each document is one run: the CIs describe the variation of the trials within each run, \
         not between runs"
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::allpairs::Estimate;
    use crate::analysis::matrix_compare::synthetic::section;
    use crate::analysis::testkit::doc;

    const HOSTS: [&str; 6] = ["b1", "a0", "b1", "a0", "c2", "c2"];

    fn report(m: MatrixSection, detail: Detail) -> String {
        let mut d = doc(vec![]);
        d.allpairs = Some(m);
        crate::render::format::Text { detail }.report(&d, d.fit.as_slice())
    }

    #[test]
    fn natural_order_of_hosts() {
        use std::cmp::Ordering::*;
        assert_eq!(natural("node2", "node10"), Less);
        assert_eq!(natural("node10", "node9"), Greater);
        assert_eq!(natural("a", "a1"), Less);
        assert_eq!(natural("n007", "n7"), Less);
        assert_eq!(natural("rack2-n3", "rack2-n12"), Less);
        assert_eq!(natural("x", "x"), Equal);
        let hosts: Vec<String> = (0..12).map(|r| format!("node{r}")).collect();
        let names: Vec<&str> = hosts.iter().map(String::as_str).collect();
        let m = section(&names, &[8], &[], 1.0, 1);
        assert_eq!(host_order(&m), (0..12).collect::<Vec<u32>>());
        let m = section(&HOSTS, &[8], &[], 1.0, 1);
        assert_eq!(host_order(&m), vec![1, 3, 0, 2, 4, 5]);
    }

    #[test]
    fn e_cube_routes() {
        // 0 -> 6 crosses dimension 1 at 0 (0 -> 2), then dimension 2 at 2 (2 -> 6).
        assert!(route_uses(0, 6, 0, 2) && route_uses(0, 6, 6, 2));
        assert!(!route_uses(0, 6, 4, 6) && !route_uses(0, 4, 2, 6));
        // 6 -> 0 crosses dimension 1 at 6 (6 -> 4), then dimension 2 at 4.
        assert!(route_uses(6, 0, 4, 6) && route_uses(6, 0, 0, 4));
        assert!(!route_uses(6, 0, 2, 6));
    }

    #[test]
    fn verdicts_blame_their_cells() {
        let mut m = section(&["n0", "n1", "n2", "n3"], &[8], &[], 1.0, 1);
        let v = |nodes: Vec<u32>, dimension| Verdict {
            switch: None,
            other_switch: None,
            kind: "link".into(),
            nodes,
            dimension,
            factor: Estimate {
                value: 2.0,
                lo: 1.9,
                hi: 2.1,
            },
            effect_us: None,
            alone: None,
            alone_over_rounds: None,
            evidence: String::new(),
            confirmed: true,
            element: None,
            sizes: vec![8],
        };
        // On hosts, a link is the pair both ways.
        let link = v(vec![1, 2], None);
        assert!(blames(&m, &link, 1, 2) && blames(&m, &link, 2, 1));
        assert!(!blames(&m, &link, 1, 3));
        let node = v(vec![3], None);
        assert!(blames(&m, &node, 3, 0) && blames(&m, &node, 0, 3) && !blames(&m, &node, 0, 1));
        let dim = v(vec![], Some(1));
        assert!(blames(&m, &dim, 0, 2) && blames(&m, &dim, 1, 3) && !blames(&m, &dim, 0, 1));
        // Under switches, a switch pair blames the routes with one end under each, either way.
        let mut fab = m.clone();
        fab.topology = Topology::Switched {
            hosts: ["h0", "h1", "h2", "h3"].map(String::from).to_vec(),
            switches: ["t.a", "t.b", "t.c", "t.a"].map(String::from).to_vec(),
        };
        let pair = Verdict {
            kind: "switch_pair".into(),
            switch: Some("t.a".into()),
            other_switch: Some("t.b".into()),
            ..v(vec![0, 1, 3], None)
        };
        assert!(
            blames(&fab, &pair, 0, 1) && blames(&fab, &pair, 1, 3) && blames(&fab, &pair, 1, 0)
        );
        assert!(
            !blames(&fab, &pair, 0, 3) && !blames(&fab, &pair, 0, 2) && !blames(&fab, &pair, 1, 2)
        );
        let broken = Verdict {
            other_switch: None,
            ..pair.clone()
        };
        assert!(!blames(&fab, &broken, 0, 1));
        // On a cube, a channel blames every cell routed over it, either way.
        m.topology = Topology::Hypercube { dimensions: 2 };
        let ch = v(vec![0, 1], Some(0));
        assert!(blames(&m, &ch, 0, 1) && blames(&m, &ch, 1, 2) && blames(&m, &ch, 3, 0));
        assert!(!blames(&m, &ch, 2, 3) && !blames(&m, &ch, 0, 2));
        // A hypercube node also explains the round trips it forwards: 0 -> 3 goes by 1,
        // 3 -> 0 by 2.
        let mut cube = m.clone();
        cube.topology = Topology::Hypercube { dimensions: 2 };
        let one = Verdict {
            kind: "node".into(),
            ..v(vec![1], None)
        };
        assert!(explains(&cube, &one, 0, 3) && explains(&cube, &one, 3, 0));
        assert!(!blames(&cube, &one, 0, 3) && !explains(&cube, &one, 0, 2));
        // The verdict's cells are flagged at its sizes only.
        m.verdicts = vec![node];
        let f = flagged(&m, 8);
        assert_eq!(f.len(), 6);
        m.verdicts[0].sizes = vec![64];
        assert!(flagged(&m, 8).is_empty());
    }

    #[test]
    fn a_healthy_matrix_has_no_suspect() {
        let s = report(section(&HOSTS, &[8, 4096], &[], 1.0, 1), Detail::Table);
        assert!(
            s.contains("no suspect: no host, node or link has its own cells x1.25 slower"),
            "{s}"
        );
        assert!(s.contains("same host") && s.contains("across hosts"), "{s}");
        // Ordered by host: a0's ranks 1 and 3 first.
        assert!(s.contains("hosts: a0: 1 3; b1: 0 2; c2: 4 5"), "{s}");
        assert!(!s.contains('*') || s.contains("* flagged"), "{s}");
        for line in s.lines() {
            assert!(line.chars().count() <= 100, "{line}");
        }
    }

    /// Under a time budget with known switches, the switch pairs covered are said.
    #[test]
    fn a_budget_says_the_switch_pairs_it_covered() {
        let mut m = section(&HOSTS, &[8], &[], 1.0, 1);
        m.config.max_time_s = Some(1.0);
        m.coverage = vec![crate::analysis::matrix::Coverage {
            size: 8,
            cells: 10,
            of_cells: 30,
            ranks: 6,
            host_pairs: 3,
            of_host_pairs: 6,
            switch_pairs: Some(2),
            of_switch_pairs: Some(3),
        }];
        let s = report(m, Detail::Table);
        assert!(s.contains("3 of 6 host pairs (50.0 %)"), "{s}");
        assert!(
            s.contains("and 2 of 3 pairs of the switches the hosts hang from (66.7 %)"),
            "{s}"
        );
    }

    /// Switches known for some ranks only: said under the topology line, and left out.
    #[test]
    fn switches_known_for_some_ranks_only_are_said_and_left_out() {
        let mut m = section(&HOSTS, &[8], &[], 1.0, 1);
        m.switches = (0..m.ranks)
            .map(|r| {
                if r == 2 {
                    String::new()
                } else {
                    "top.l0".into()
                }
            })
            .collect();
        let s = report(m, Detail::Table);
        assert!(
            s.contains("switches: not known above the hosts of 1 of 6 ranks"),
            "{s}"
        );
        for line in s.lines() {
            assert!(line.chars().count() <= 100, "{line}");
        }
    }

    #[test]
    fn a_slow_node_comes_first_with_its_host() {
        let s = report(section(&HOSTS, &[8, 4096], &[4], 3.0, 1), Detail::Table);
        let verdict = s.find("1. node 4 (c2): its own cells x").expect(&s);
        let first_size = s.find("8 bytes:").expect(&s);
        assert!(verdict < first_size, "{s}");
        assert!(
            s.contains("not confirmed (no retest alone); at 8 B, 4 KiB"),
            "{s}"
        );
        assert!(!s.contains("no suspect"), "{s}");
        // The node effects list node 4 first, with 10 flagged cells.
        let effects = s.find("node effects").unwrap();
        let row = s[effects..].lines().nth(2).unwrap();
        assert!(row.trim_start().starts_with("4 c2"), "{row}");
        assert!(row.trim_end().ends_with("10"), "{row}");
        // Its 10 cells are marked in the matrix of each size.
        let marks = s
            .lines()
            .skip_while(|l| !l.contains("median one-way time, us"))
            .take(8)
            .map(|l| l.matches('*').count())
            .sum::<usize>();
        assert_eq!(marks, 1 + 10, "{s}");
    }

    #[test]
    fn a_lone_slow_cell_is_shown_but_blames_nothing() {
        use crate::analysis::allpairs::{fit, CellObs};
        let mut m = section(&HOSTS, &[8], &[], 1.0, 1);
        for c in m.cells.iter_mut().filter(|c| (c.source, c.dest) == (2, 5)) {
            c.trial_ns.iter_mut().for_each(|t| *t *= 4);
            c.stats = CellStats::of_sorted(&c.one_way_us_sorted()).unwrap();
        }
        // Fitted again from the cells as changed; the attribution names nothing for one cell.
        let cells: Vec<CellObs> = m
            .cells
            .iter()
            .map(|c| CellObs {
                source: c.source,
                dest: c.dest,
                one_way_us: c.one_way_us_sorted(),
            })
            .collect();
        m.fits[0].fit = fit(m.ranks, &m.topology, &cells, &m.rule).unwrap();
        assert!(m.fits[0].fit.suspects.is_empty());
        m.verdicts.clear();
        let rebuilt = m;
        let s = report(rebuilt, Detail::Table);
        assert!(s.contains("no suspect"), "{s}");
        assert!(
            s.contains("1 slow cell(s) that no verdict explains")
                && s.contains("2 (b1) -> 5 (c2) at 8 B: x4."),
            "{s}"
        );
    }

    #[test]
    fn full_lists_every_cell_and_the_matrix_stops_at_16_ranks() {
        let s = report(section(&HOSTS, &[8], &[], 1.0, 1), Detail::Full);
        assert!(s.contains("every cell"), "{s}");
        assert_eq!(s.matches(") -> ").count(), 30, "{s}");
        let hosts: Vec<String> = (0..17).map(|r| format!("h{r}")).collect();
        let names: Vec<&str> = hosts.iter().map(String::as_str).collect();
        let s = report(section(&names, &[8], &[], 1.0, 1), Detail::Table);
        assert!(!s.contains("median one-way time, us"), "{s}");
        let s = report(section(&names[..16], &[8], &[], 1.0, 1), Detail::Table);
        assert!(s.contains("median one-way time, us"), "{s}");
        for line in s.lines() {
            assert!(line.chars().count() <= 100, "{line}");
        }
    }

    #[test]
    fn comparison_worst_first() {
        let a = section(&HOSTS, &[8], &[], 1.0, 1);
        let b = section(&HOSTS, &[8], &[4], 2.0, 2);
        let mut b2 = section(&HOSTS, &[8], &[4], 3.0, 2);
        // Node 5 twice as slow in b2's cells to it.
        for c in b2.cells.iter_mut().filter(|c| c.dest == 1 && c.source == 0) {
            c.trial_ns.iter_mut().for_each(|t| *t *= 5);
            c.stats = CellStats::of_sorted(&c.one_way_us_sorted()).unwrap();
        }
        let c = matrix_compare::compare(&a, &b2, 300, 1).unwrap();
        let s = comparison(&c, &a, ("a.json", "b.json"));
        let first = s
            .lines()
            .position(|l| l.contains("0 (b1) -> 1 (a0)"))
            .expect(&s);
        let four = s.lines().position(|l| l.contains("-> 4 (c2)")).expect(&s);
        assert!(first < four, "{s}");
        assert!(s.contains("11 slower, 0 faster, 19 the same"), "{s}");
        let c = matrix_compare::compare(&a, &b, 300, 1).unwrap();
        let s = comparison(&c, &a, ("a.json", "b.json"));
        assert!(s.contains("B = b.json against A = a.json"), "{s}");
        assert!(s.contains("10 slower, 0 faster, 20 the same"), "{s}");
        assert!(!s.contains("without trials on a side"), "{s}");
        // Without trials on one side, the report says which interval the cells got.
        let mut bare = b.clone();
        bare.cells.iter_mut().for_each(|c| c.trial_ns.clear());
        let c = matrix_compare::compare(&a, &bare, 300, 1).unwrap();
        let s = comparison(&c, &a, ("a.json", "b.json"));
        assert!(
            s.contains("30 cell(s) without trials on a side (no --raw all files found)"),
            "{s}"
        );
    }
}
