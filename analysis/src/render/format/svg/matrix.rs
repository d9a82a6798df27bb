//! The matrix plot of an all-pairs document: a heatmap of every cell at one size (rows
//! source, columns dest, ranks ordered by host then rank, host boundaries drawn; the diagonal
//! and cells not measured grey; cells beyond the rule's robust z or blamed by a verdict
//! outlined; the ranks of the verdicts' elements marked on both axes). By default a cell's
//! colour is its slowdown over a healthy cell of its class (hop count, same host or not), so
//! that what is wrong shows rather than the topology; `time` colours the median one-way time
//! on a log scale instead. Beside it the node effects of
//! the median polish as factors (sender and receiver, per rank, in the heatmap's row order),
//! and below the histogram of the cells' robust z with the rule's threshold marked.

use super::canvas::{esc, num, size_text, Svg};
use super::subtitle;
use crate::analysis::allpairs::{Fit, Topology};
use crate::analysis::document::ResultDoc;
use crate::analysis::matrix::MatrixSection;
use crate::render::kind::matrix::{flagged, host_order};
use commbench_core::stats::{self, nice_width};
use commbench_core::transport::error::{Error, Result};
use std::collections::{HashMap, HashSet};
use std::fmt::Write;

const W: f64 = 1000.0;
const H: f64 = 840.0;
/// The heatmap's left and top edges and side.
const HX: f64 = 130.0;
const HY: f64 = 90.0;
const SIDE: f64 = 460.0;
/// The colour legend's left edge and width.
const LX: f64 = HX + SIDE + 16.0;
const LW: f64 = 14.0;
/// The node effects' plot area.
const BX0: f64 = LX + LW + 80.0;
const BX1: f64 = W - 30.0;
/// The histogram's plot area.
const ZX0: f64 = 90.0;
const ZX1: f64 = W - 30.0;
const ZY0: f64 = HY + SIDE + 70.0;
const ZY1: f64 = H - 80.0;
/// Bars of the histogram.
const Z_BINS: usize = 48;
/// Above this many ranks the heatmap draws one block per pair of groups of ranks instead of
/// a rect per cell: at 1,024 ranks a rect a cell is a million rects, a file of 250 MB.
const AGGREGATE_ABOVE: usize = 256;
/// Most groups along a side of the aggregated heatmap.
const MAX_GROUPS: usize = 128;
/// Grey of the diagonal and of cells not measured.
const MISSING: &str = "#c8c8c8";
const FLAG: &str = "#d62728";
const SENDER: &str = "#1f77b4";
const RECEIVER: &str = "#ff7f0e";

/// Viridis at five stops, fast (dark) to slow (yellow).
const RAMP: [(f64, f64, f64); 5] = [
    (68.0, 1.0, 84.0),
    (59.0, 82.0, 139.0),
    (33.0, 145.0, 140.0),
    (94.0, 201.0, 98.0),
    (253.0, 231.0, 37.0),
];

/// The colour at `t` in `[0, 1]`.
fn colour(t: f64) -> String {
    let t = if t.is_finite() {
        t.clamp(0.0, 1.0)
    } else {
        0.0
    };
    let x = t * (RAMP.len() - 1) as f64;
    let k = (x.floor() as usize).min(RAMP.len() - 2);
    let f = x - k as f64;
    let (a, b) = (RAMP[k], RAMP[k + 1]);
    let c = |p: f64, q: f64| (p + (q - p) * f).round() as u8;
    format!("#{:02x}{:02x}{:02x}", c(a.0, b.0), c(a.1, b.1), c(a.2, b.2))
}

/// The matrix's size to draw: `size`, or the first measured.
fn pick(m: &MatrixSection, size: Option<u64>) -> Result<u64> {
    let list = || {
        m.sizes
            .iter()
            .map(u64::to_string)
            .collect::<Vec<_>>()
            .join(", ")
    };
    match size {
        None => m
            .sizes
            .first()
            .copied()
            .ok_or_else(|| Error::Invalid("the matrix has no size measured".into())),
        Some(s) if m.sizes.contains(&s) => Ok(s),
        Some(s) => Err(Error::Invalid(format!(
            "no matrix of size {s} in the document (sizes: {})",
            list()
        ))),
    }
}

/// Ticks of a log scale over `[lo, hi]` (positive): every decade when the range is wide,
/// 1-2-5 per decade when it spans a few, every digit when it is narrow; the ends when no
/// tick falls inside.
fn log_ticks(lo: f64, hi: f64) -> Vec<f64> {
    const DIGITS: [f64; 9] = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0];
    let (k0, k1) = (
        lo.log10().floor().clamp(-300.0, 300.0) as i32,
        hi.log10().ceil().clamp(-300.0, 300.0) as i32,
    );
    let steps: &[f64] = match k1 - k0 {
        ..=1 => &DIGITS,
        2 if hi / lo < 20.0 => &DIGITS,
        2..=3 => &[1.0, 2.0, 5.0],
        _ => &[1.0],
    };
    let mut v = Vec::new();
    for k in k0..=k1 {
        for m in steps {
            let x = m * 10f64.powi(k);
            if x >= lo * (1.0 - 1e-9) && x <= hi * (1.0 + 1e-9) {
                v.push(x);
            }
        }
    }
    if v.len() < 2 {
        v = vec![lo, hi];
    }
    v
}

/// A tick label: the number as the plots write it, trailing zeros of a fraction dropped
/// (`6`, `12.5`, `0.025`).
fn tick(v: f64) -> String {
    let s = num(v);
    if s.contains('.') && !s.contains('e') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

/// Rank `r`'s host, `?` when the document names none.
fn host_name(m: &MatrixSection, r: u32) -> &str {
    m.hosts.get(r as usize).map_or("?", String::as_str)
}

/// The median of cell `i -> j` in `med`, when it was measured and is positive.
fn median_at(med: &[Vec<Option<f64>>], i: u32, j: u32) -> Option<f64> {
    med.get(i as usize)
        .and_then(|r| r.get(j as usize))
        .copied()
        .flatten()
        .filter(|v| *v > 0.0 && v.is_finite())
}

/// The range of the colour scale: the least and the greatest median drawn, 5% either side of
/// the one value when all are equal, 1 to 10 us when there is none.
fn colour_range(med: &[Vec<Option<f64>>], order: &[u32]) -> (f64, f64) {
    let values: Vec<f64> = order
        .iter()
        .flat_map(|&i| order.iter().filter_map(move |&j| median_at(med, i, j)))
        .collect();
    let lo = values.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    if lo.is_finite() && hi > lo {
        (lo, hi)
    } else if lo.is_finite() {
        (lo * 0.95, lo * 1.05)
    } else {
        (1.0, 10.0)
    }
}

/// Where `v` falls on the log scale over `[lo, hi]`, 0 at `lo` and 1 at `hi`.
fn log_position(v: f64, (lo, hi): (f64, f64)) -> f64 {
    (v.ln() - lo.ln()) / (hi.ln() - lo.ln())
}

/// What the heatmap's colours show.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MatrixColour {
    /// A cell's slowdown over a healthy cell of its class (the fit's baseline).
    #[default]
    Excess,
    /// A cell's median one-way time.
    Time,
}

/// The values coloured, by `[source][dest]` as [`MatrixSection::medians`]: medians (us), or
/// each cell's slowdown over its class's healthy cell (`None` where the fit has no cell).
fn coloured(m: &MatrixSection, size: u64, colour: MatrixColour) -> Vec<Vec<Option<f64>>> {
    let med = m.medians(size);
    match (colour, m.fit_at(size)) {
        (MatrixColour::Time, _) | (MatrixColour::Excess, None) => med,
        (MatrixColour::Excess, Some(f)) => {
            let n = med.len();
            let mut x = vec![vec![None; n]; n];
            for c in &f.cells {
                if let Some(slot) = x
                    .get_mut(c.source as usize)
                    .and_then(|r| r.get_mut(c.dest as usize))
                {
                    *slot = Some(c.excess.exp()).filter(|v| v.is_finite() && *v > 0.0);
                }
            }
            x
        }
    }
}

/// The heatmap with its labels, host boundaries, flagged outlines and the verdicts' ranks
/// marked; the colour legend. `colour` is what [`plot`] resolved (time where no fit is).
fn heatmap(svg: &mut Svg, m: &MatrixSection, size: u64, order: &[u32], colour: MatrixColour) {
    let n = order.len().max(1);
    let cell = SIDE / n as f64;
    let med = coloured(m, size, colour);
    let mut range = colour_range(&med, order);
    if colour == MatrixColour::Excess {
        // From the fastest cell (a healthy one is 1) to past the rule's factor, so that a
        // healthy machine looks healthy.
        range = (range.0.min(1.0), range.1.max(m.rule.min_factor * 1.1));
    }
    let flags = flagged(m, size);
    if order.len() > AGGREGATE_ABOVE {
        let groups = groups(m, order);
        blocks(svg, order, &groups, &med, &flags, range, colour);
        group_boundaries(svg, &groups, cell);
        frame(svg, HX, HY, SIDE, SIDE);
        group_labels(svg, &groups, cell);
    } else {
        cells(svg, m, size, order, &med, range, colour);
        host_boundaries(svg, m, order, cell);
        flag_outlines(svg, &flags, order, cell);
        frame(svg, HX, HY, SIDE, SIDE);
        labels(svg, m, order, cell);
    }
    verdict_marks(svg, m, size, order, cell);
    legend(svg, range.0, range.1, colour);
}

/// Consecutive ranks of the heatmap's order drawn as one row and one column of blocks.
#[derive(Debug, Clone, PartialEq)]
struct Group {
    /// What its ranks share: the switch above their hosts, their host, or the first and last
    /// host of a run of the order.
    name: String,
    /// Its first position in the order.
    start: usize,
    /// How many ranks.
    len: usize,
}

/// The groups of the aggregated heatmap: the ranks under each switch when the switches are
/// known, else on each host; runs of about `n / MAX_GROUPS` ranks of the order instead when
/// that makes more than [`MAX_GROUPS`] groups or fewer than two ranks a group.
fn groups(m: &MatrixSection, order: &[u32]) -> Vec<Group> {
    let key = |r: u32| match &m.topology {
        Topology::Switched { switches, .. } => switches.get(r as usize).map_or("", String::as_str),
        _ => host_name(m, r),
    };
    let mut out: Vec<Group> = Vec::new();
    for (k, &r) in order.iter().enumerate() {
        match out.last_mut() {
            Some(g) if g.name == key(r) => g.len += 1,
            _ => out.push(Group {
                name: key(r).to_string(),
                start: k,
                len: 1,
            }),
        }
    }
    if out.len() <= MAX_GROUPS && 2 * out.len() <= order.len() {
        return out;
    }
    let per = order.len().div_ceil(MAX_GROUPS).max(1);
    (0..order.len())
        .step_by(per)
        .map(|start| {
            let len = per.min(order.len() - start);
            let (a, b) = (order[start], order[start + len - 1]);
            Group {
                name: format!("{} .. {}", host_name(m, a), host_name(m, b)),
                start,
                len,
            }
        })
        .collect()
}

/// One rect per pair of groups, coloured by the median of its cells' values; a block holding
/// a flagged cell outlined.
fn blocks(
    svg: &mut Svg,
    order: &[u32],
    groups: &[Group],
    med: &[Vec<Option<f64>>],
    flags: &HashSet<(u32, u32)>,
    range: (f64, f64),
    what: MatrixColour,
) {
    let unit = SIDE / order.len().max(1) as f64;
    let mut outlined = Vec::new();
    svg.raw(r#"<g class="heatmap" stroke="white" stroke-width="0.5">"#);
    for ga in groups {
        for gb in groups {
            let (mut v, mut cells, mut flagged) = (Vec::new(), 0usize, 0usize);
            for &i in &order[ga.start..ga.start + ga.len] {
                for &j in &order[gb.start..gb.start + gb.len] {
                    if i == j {
                        continue;
                    }
                    cells += 1;
                    v.extend(median_at(med, i, j));
                    flagged += usize::from(flags.contains(&(i, j)));
                }
            }
            let (x, y) = (HX + gb.start as f64 * unit, HY + ga.start as f64 * unit);
            let (w, h) = (gb.len as f64 * unit, ga.len as f64 * unit);
            stats::sort_samples(&mut v);
            let mid = stats::median(&v);
            let (class, fill) = match mid {
                Some(x) => ("block", colour(log_position(x, range))),
                None => ("block missing", MISSING.to_string()),
            };
            let value = |x: f64| match what {
                MatrixColour::Time => format!("{} us", num(x)),
                MatrixColour::Excess => format!("x{}", num(x)),
            };
            let tip = match (mid, v.last()) {
                (Some(x), Some(&worst)) => format!(
                    "{} -> {}: median {} over {} of {cells} cells measured (worst {}); {flagged} flagged",
                    ga.name,
                    gb.name,
                    value(x),
                    v.len(),
                    value(worst)
                ),
                _ => format!("{} -> {}: no cell measured", ga.name, gb.name),
            };
            let _ = writeln!(
                svg.s,
                r#"<rect class="{class}" x="{x:.2}" y="{y:.2}" width="{w:.2}" height="{h:.2}" fill="{fill}" data-cells="{cells}" data-flagged="{flagged}"><title>{}</title></rect>"#,
                esc(&tip)
            );
            if flagged > 0 {
                outlined.push((x, y, w, h));
            }
        }
    }
    svg.raw("</g>");
    svg.raw(&format!(
        r#"<g class="flags" fill="none" stroke="{FLAG}" stroke-width="1.5">"#
    ));
    for (x, y, w, h) in outlined {
        let _ = writeln!(
            svg.s,
            r#"<rect class="flag" x="{:.2}" y="{:.2}" width="{:.2}" height="{:.2}"/>"#,
            x + 0.75,
            y + 0.75,
            (w - 1.5).max(0.5),
            (h - 1.5).max(0.5)
        );
    }
    svg.raw("</g>");
}

/// Lines between the groups.
fn group_boundaries(svg: &mut Svg, groups: &[Group], unit: f64) {
    svg.raw(r#"<g class="group-boundaries" stroke="black" stroke-width="0.75">"#);
    for g in groups.iter().skip(1) {
        let p = g.start as f64 * unit;
        let _ = writeln!(
            svg.s,
            r#"<line class="group-boundary" x1="{:.2}" y1="{HY:.2}" x2="{:.2}" y2="{:.2}"/>"#,
            HX + p,
            HX + p,
            HY + SIDE
        );
        let _ = writeln!(
            svg.s,
            r#"<line class="group-boundary" x1="{HX:.2}" y1="{:.2}" x2="{:.2}" y2="{:.2}"/>"#,
            HY + p,
            HX + SIDE,
            HY + p
        );
    }
    svg.raw("</g>");
}

/// The groups' names beside the rows, thinned so that they do not overlap.
fn group_labels(svg: &mut Svg, groups: &[Group], unit: f64) {
    let mut next = f64::NEG_INFINITY;
    for g in groups {
        let c = HY + (g.start as f64 + g.len as f64 / 2.0) * unit;
        if c < next {
            continue;
        }
        next = c + 10.0;
        let name: String = g.name.chars().take(20).collect();
        svg.text(
            "row-label",
            HX - 5.0,
            c + 3.0,
            "end",
            r#" font-size="8""#,
            &name,
        );
    }
    axis_titles(
        svg,
        "dest (echoes), in the rows' groups",
        "source (times), by group",
    );
}

/// The heatmap's axis titles: `top` above the columns, `side` turned beside the rows.
fn axis_titles(svg: &mut Svg, top: &str, side: &str) {
    svg.text(
        "axis-title",
        HX + SIDE / 2.0,
        HY - 22.0,
        "middle",
        r#" font-size="12""#,
        top,
    );
    let cy = HY + SIDE / 2.0;
    let _ = writeln!(
        svg.s,
        r#"<text class="axis-title" x="16" y="{cy:.1}" text-anchor="middle" font-size="12" transform="rotate(-90 16 {cy:.1})">{}</text>"#,
        esc(side)
    );
}

/// A red mark beside each row and column label of a rank some verdict at `size` names (a
/// node, a host's ranks, a link's ends), so that the element shows on the axes.
fn verdict_marks(svg: &mut Svg, m: &MatrixSection, size: u64, order: &[u32], cell: f64) {
    let named: HashSet<u32> = m
        .verdicts
        .iter()
        .filter(|v| v.kind != "contention" && (v.sizes.is_empty() || v.sizes.contains(&size)))
        .flat_map(|v| v.nodes.iter().copied())
        .collect();
    if named.is_empty() {
        return;
    }
    let r = (cell * 0.3).clamp(2.0, 5.0);
    svg.raw(r#"<g class="verdict-marks">"#);
    for (k, &rank) in order.iter().enumerate().filter(|(_, r)| named.contains(r)) {
        let c = k as f64 * cell + cell / 2.0;
        let (x, y) = (HX + SIDE + 3.0, HY + c);
        let _ = writeln!(
            svg.s,
            r#"<path class="verdict-mark" data-rank="{rank}" d="M{x:.2} {y:.2} l{:.2} {:.2} l0 {:.2} z" fill="{FLAG}"><title>rank {rank}: named by a verdict</title></path>"#,
            2.0 * r,
            -r,
            2.0 * r
        );
        let (x, y) = (HX + c, HY + SIDE + 3.0);
        let _ = writeln!(
            svg.s,
            r#"<path class="verdict-mark" data-rank="{rank}" d="M{x:.2} {y:.2} l{:.2} {:.2} l{:.2} 0 z" fill="{FLAG}"><title>rank {rank}: named by a verdict</title></path>"#,
            -r,
            2.0 * r,
            2.0 * r
        );
    }
    svg.raw("</g>");
}

/// How one cell is drawn: its class, fill, extra data attribute and tooltip.
struct CellLook {
    class: &'static str,
    fill: String,
    data: String,
    tip: String,
}

/// The look of cell `i -> j` of value `v` (`None`: not measured; a median in us or a
/// slowdown, as `what` says) and robust z `z`, coloured on the log scale over `range`; the
/// diagonal and cells not measured grey.
fn cell_look(
    m: &MatrixSection,
    (i, j): (u32, u32),
    v: Option<f64>,
    z: Option<f64>,
    range: (f64, f64),
    what: MatrixColour,
) -> CellLook {
    match v {
        Some(v) if i != j => {
            let zs = z.map_or(String::new(), |z| format!(", z {}", num(z)));
            let (data, value) = match what {
                MatrixColour::Time => (format!(r#" data-us="{v}""#), format!("{} us", num(v))),
                MatrixColour::Excess => (
                    format!(r#" data-excess="{v}""#),
                    format!("x{} over a healthy cell of its class", num(v)),
                ),
            };
            CellLook {
                class: "cell",
                fill: colour(log_position(v, range)),
                data,
                tip: format!(
                    "{i} ({}) -> {j} ({}): {value}{zs}",
                    host_name(m, i),
                    host_name(m, j),
                ),
            }
        }
        _ => CellLook {
            class: "cell missing",
            fill: MISSING.to_string(),
            data: String::new(),
            tip: if i == j {
                format!("{i} ({}): the diagonal is not measured", host_name(m, i))
            } else {
                format!("{i} -> {j}: not measured")
            },
        },
    }
}

/// One rect per cell, rows in `order` from the top and columns in `order` from the left.
fn cells(
    svg: &mut Svg,
    m: &MatrixSection,
    size: u64,
    order: &[u32],
    med: &[Vec<Option<f64>>],
    range: (f64, f64),
    what: MatrixColour,
) {
    let cell = SIDE / order.len().max(1) as f64;
    let z: HashMap<(u32, u32), f64> = m
        .fit_at(size)
        .map(|f| f.cells.iter().map(|c| ((c.source, c.dest), c.z)).collect())
        .unwrap_or_default();
    svg.raw(r#"<g class="heatmap" stroke="white" stroke-width="0.5">"#);
    for (a, &i) in order.iter().enumerate() {
        for (b, &j) in order.iter().enumerate() {
            let (x, y) = (HX + b as f64 * cell, HY + a as f64 * cell);
            let v = median_at(med, i, j);
            let CellLook {
                class,
                fill,
                data,
                tip,
            } = cell_look(m, (i, j), v, z.get(&(i, j)).copied(), range, what);
            let _ = writeln!(
                svg.s,
                r#"<rect class="{class}" x="{x:.2}" y="{y:.2}" width="{cell:.2}" height="{cell:.2}" fill="{fill}" data-source="{i}" data-dest="{j}"{data}><title>{}</title></rect>"#,
                esc(&tip)
            );
        }
    }
    svg.raw("</g>");
}

/// Lines between the ranks of different hosts, where some host holds several ranks.
fn host_boundaries(svg: &mut Svg, m: &MatrixSection, order: &[u32], cell: f64) {
    let host = |r: u32| host_name(m, r);
    let shared = (1..order.len()).any(|k| host(order[k]) == host(order[k - 1]));
    if !shared {
        return;
    }
    svg.raw(r#"<g class="host-boundaries" stroke="black" stroke-width="1.5">"#);
    for k in 1..order.len() {
        if host(order[k]) != host(order[k - 1]) {
            let p = HX + k as f64 * cell;
            let _ = writeln!(
                svg.s,
                r#"<line class="host-boundary" x1="{p:.2}" y1="{HY:.2}" x2="{p:.2}" y2="{:.2}"/>"#,
                HY + SIDE
            );
            let p = HY + k as f64 * cell;
            let _ = writeln!(
                svg.s,
                r#"<line class="host-boundary" x1="{HX:.2}" y1="{p:.2}" x2="{:.2}" y2="{p:.2}"/>"#,
                HX + SIDE
            );
        }
    }
    svg.raw("</g>");
}

/// An outline inside each flagged cell.
fn flag_outlines(svg: &mut Svg, flags: &HashSet<(u32, u32)>, order: &[u32], cell: f64) {
    svg.raw(&format!(
        r#"<g class="flags" fill="none" stroke="{FLAG}" stroke-width="2">"#
    ));
    for (a, &i) in order.iter().enumerate() {
        for (b, &j) in order.iter().enumerate() {
            if flags.contains(&(i, j)) {
                let _ = writeln!(
                    svg.s,
                    r#"<rect class="flag" x="{:.2}" y="{:.2}" width="{:.2}" height="{:.2}" data-source="{i}" data-dest="{j}"/>"#,
                    HX + b as f64 * cell + 1.0,
                    HY + a as f64 * cell + 1.0,
                    (cell - 2.0).max(1.0),
                    (cell - 2.0).max(1.0)
                );
            }
        }
    }
    svg.raw("</g>");
}

/// A black frame.
fn frame(svg: &mut Svg, x: f64, y: f64, w: f64, h: f64) {
    let _ = writeln!(
        svg.s,
        r#"<rect class="frame" x="{x:.1}" y="{y:.1}" width="{w:.1}" height="{h:.1}" fill="none" stroke="black"/>"#
    );
}

/// Rank labels of rows and columns (hosts beside the rows), thinned when cells are small.
fn labels(svg: &mut Svg, m: &MatrixSection, order: &[u32], cell: f64) {
    let every = (12.0 / cell).ceil().max(1.0) as usize;
    let fs = (cell * 0.8).clamp(6.0, 11.0);
    let host = |r: u32| m.hosts.get(r as usize).map_or("?", String::as_str);
    for (k, &r) in order.iter().enumerate() {
        let new_host = k == 0 || host(order[k - 1]) != host(r);
        if k % every != 0 && !new_host {
            continue;
        }
        let c = k as f64 * cell + cell / 2.0;
        let style = format!(r#" font-size="{fs:.1}""#);
        svg.text(
            "col-label",
            HX + c,
            HY - 5.0,
            "middle",
            &style,
            &r.to_string(),
        );
        let name: String = host(r).chars().take(14).collect();
        let row = if new_host {
            format!("{name}  {r}")
        } else {
            r.to_string()
        };
        svg.text(
            "row-label",
            HX - 5.0,
            HY + c + fs / 3.0,
            "end",
            &style,
            &row,
        );
    }
    axis_titles(svg, "dest (echoes)", "source (times), host and rank");
}

/// The colour legend: the ramp with log ticks (us, or a slowdown).
fn legend(svg: &mut Svg, lo: f64, hi: f64, what: MatrixColour) {
    let steps = 64;
    svg.raw(r#"<g class="colour-legend">"#);
    for k in 0..steps {
        let y = HY + SIDE * (1.0 - (k + 1) as f64 / steps as f64);
        let _ = writeln!(
            svg.s,
            r#"<rect x="{LX:.1}" y="{y:.2}" width="{LW:.1}" height="{:.2}" fill="{}" stroke="none"/>"#,
            SIDE / steps as f64 + 0.3,
            colour((k as f64 + 0.5) / steps as f64)
        );
    }
    frame(svg, LX, HY, LW, SIDE);
    let py = |v: f64| HY + SIDE * (1.0 - (v.ln() - lo.ln()) / (hi.ln() - lo.ln()));
    for v in log_ticks(lo, hi) {
        let y = py(v);
        let _ = writeln!(
            svg.s,
            r#"<line class="tick" x1="{:.1}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="black"/>"#,
            LX + LW,
            LX + LW + 4.0
        );
        svg.text(
            "tick-label",
            LX + LW + 6.0,
            y + 4.0,
            "start",
            r#" font-size="10""#,
            &match what {
                MatrixColour::Time => tick(v),
                MatrixColour::Excess => format!("x{}", tick(v)),
            },
        );
    }
    svg.text(
        "axis-title",
        LX + LW / 2.0,
        HY - 8.0,
        "middle",
        r#" font-size="11""#,
        match what {
            MatrixColour::Time => "median us",
            MatrixColour::Excess => "slowdown",
        },
    );
    svg.raw("</g>");
}

/// Rank `r`'s node effect in `v` as a factor, 1 when it has none.
fn factor_of(v: &[f64], r: u32) -> f64 {
    v.get(r as usize).map_or(1.0, |e| e.exp())
}

/// The log axis of the node effects over `[lo, hi]`.
#[derive(Clone, Copy)]
struct FactorAxis {
    lo: f64,
    hi: f64,
}

impl FactorAxis {
    /// Over every factor drawn, and 0.9 to 1.1 at least, 5% wider either way.
    fn new(f: &Fit, order: &[u32]) -> Self {
        let all: Vec<f64> = order
            .iter()
            .flat_map(|&r| [factor_of(&f.sender, r), factor_of(&f.receiver, r)])
            .filter(|v| v.is_finite() && *v > 0.0)
            .collect();
        let lo = all.iter().copied().fold(1.0, f64::min).min(0.9);
        let hi = all.iter().copied().fold(1.0, f64::max).max(1.1);
        FactorAxis {
            lo: lo / 1.05,
            hi: hi * 1.05,
        }
    }

    /// The x of factor `v`.
    fn x(self, v: f64) -> f64 {
        BX0 + (BX1 - BX0) * (v.ln() - self.lo.ln()) / (self.hi.ln() - self.lo.ln())
    }
}

/// The node effects as factors, one row per rank in the heatmap's order: sender above,
/// receiver below, from 1 on a log axis.
fn node_bars(svg: &mut Svg, f: &Fit, order: &[u32]) {
    let axis = FactorAxis::new(f, order);
    svg.raw(r#"<g class="node-effects">"#);
    factor_grid(svg, axis);
    rank_bars(svg, f, order, axis);
    let one = axis.x(1.0);
    let _ = writeln!(
        svg.s,
        r#"<line class="unit-line" x1="{one:.1}" y1="{HY:.1}" x2="{one:.1}" y2="{:.1}" stroke="black"/>"#,
        HY + SIDE
    );
    frame(svg, BX0, HY, BX1 - BX0, SIDE);
    svg.text(
        "axis-title",
        (BX0 + BX1) / 2.0,
        HY + SIDE + 32.0,
        "middle",
        r#" font-size="12""#,
        "node effect (factor, log scale)",
    );
    node_legend(svg);
    svg.raw("</g>");
}

/// The grid lines and labels of the factors on the axis.
fn factor_grid(svg: &mut Svg, axis: FactorAxis) {
    let ticks: Vec<f64> = [
        0.1, 0.2, 0.5, 0.67, 0.8, 1.0, 1.25, 1.5, 2.0, 3.0, 5.0, 10.0, 20.0, 50.0, 100.0, 1000.0,
    ]
    .into_iter()
    .filter(|&t| t >= axis.lo && t <= axis.hi)
    .collect();
    for t in &ticks {
        let x = axis.x(*t);
        let _ = writeln!(
            svg.s,
            r##"<line class="grid" x1="{x:.1}" y1="{HY:.1}" x2="{x:.1}" y2="{:.1}" stroke="#e4e4e4"/>"##,
            HY + SIDE
        );
        svg.text(
            "tick-label",
            x,
            HY + SIDE + 15.0,
            "middle",
            r#" font-size="10""#,
            &format!("{t}"),
        );
    }
}

/// Each rank's two bars from 1, sender in the upper half of its row, receiver in the lower.
fn rank_bars(svg: &mut Svg, f: &Fit, order: &[u32], axis: FactorAxis) {
    let cell = SIDE / order.len().max(1) as f64;
    let one = axis.x(1.0);
    for (k, &r) in order.iter().enumerate() {
        let y = HY + k as f64 * cell;
        let h = (cell / 2.0 - 1.0).max(0.5);
        for (half, (v, color, class)) in [
            (factor_of(&f.sender, r), SENDER, "sender-bar"),
            (factor_of(&f.receiver, r), RECEIVER, "receiver-bar"),
        ]
        .into_iter()
        .enumerate()
        {
            let x = axis.x(v.clamp(axis.lo, axis.hi));
            let (x0, w) = if x >= one {
                (one, x - one)
            } else {
                (x, one - x)
            };
            let _ = writeln!(
                svg.s,
                r#"<rect class="{class}" x="{x0:.2}" y="{:.2}" width="{:.2}" height="{h:.2}" fill="{color}" data-rank="{r}" data-factor="{v}"><title>rank {r} {}: x{}</title></rect>"#,
                y + 0.5 + half as f64 * (cell / 2.0),
                w.max(0.5),
                if half == 0 {
                    "as sender"
                } else {
                    "as receiver"
                },
                num(v)
            );
        }
    }
}

/// The key of the node effects' colours, above their plot.
fn node_legend(svg: &mut Svg) {
    for (k, (label, color)) in [("sender", SENDER), ("receiver", RECEIVER)]
        .into_iter()
        .enumerate()
    {
        let x = BX0 + k as f64 * 90.0;
        let _ = writeln!(
            svg.s,
            r#"<rect x="{x:.1}" y="{:.1}" width="12" height="10" fill="{color}"/>"#,
            HY - 22.0
        );
        svg.text(
            "legend-label",
            x + 16.0,
            HY - 13.0,
            "start",
            r#" font-size="11""#,
            label,
        );
    }
}

/// Linear ticks over `[lo, hi]`.
fn linear_ticks(lo: f64, hi: f64) -> (Vec<f64>, usize) {
    let step = nice_width((hi - lo) / 8.0);
    if !(step.is_finite() && step > 0.0) {
        return (vec![lo, hi], 1);
    }
    let decimals = (-step.log10().floor()).clamp(0.0, 6.0) as usize;
    let first = (lo / step).ceil() as i64;
    let last = (hi / step).floor() as i64;
    if last.saturating_sub(first) > 100 {
        return (vec![lo, hi], decimals);
    }
    ((first..=last).map(|k| k as f64 * step).collect(), decimals)
}

/// The bins of the histogram of the robust z, and its scales.
struct ZBins {
    /// The z range drawn.
    lo: f64,
    hi: f64,
    /// The width of a bin.
    width: f64,
    /// Cells per bin.
    counts: [u64; Z_BINS],
    /// The largest count, at least 1.
    cmax: f64,
}

impl ZBins {
    /// The cells' finite z in [`Z_BINS`] bins over their range, widened to 1.2 times the
    /// rule's threshold either way at least, and by 2% of the range at each end.
    fn new(f: &Fit, rule_z: f64) -> Self {
        let z: Vec<f64> = f
            .cells
            .iter()
            .map(|c| c.z)
            .filter(|z| z.is_finite())
            .collect();
        let zmin = z.iter().copied().fold(-1.2 * rule_z, f64::min);
        let zmax = z.iter().copied().fold(1.2 * rule_z, f64::max);
        let (lo, hi) = (zmin - 0.02 * (zmax - zmin), zmax + 0.02 * (zmax - zmin));
        let width = (hi - lo) / Z_BINS as f64;
        let mut counts = [0u64; Z_BINS];
        for v in &z {
            let k = (((v - lo) / width).floor().max(0.0) as usize).min(Z_BINS - 1);
            counts[k] += 1;
        }
        let cmax = counts.iter().copied().max().unwrap_or(1).max(1) as f64;
        ZBins {
            lo,
            hi,
            width,
            counts,
            cmax,
        }
    }

    /// The x of robust z `v`.
    fn x(&self, v: f64) -> f64 {
        ZX0 + (ZX1 - ZX0) * (v - self.lo) / (self.hi - self.lo)
    }

    /// The y of count `c`.
    fn y(&self, c: f64) -> f64 {
        ZY1 - (ZY1 - ZY0) * c / (self.cmax * 1.1)
    }
}

/// The histogram of the cells' robust z with the rule's threshold marked.
fn z_histogram(svg: &mut Svg, f: &Fit, rule_z: f64) {
    let h = ZBins::new(f, rule_z);
    svg.raw(r#"<g class="z-histogram">"#);
    z_ticks(svg, &h);
    z_bars(svg, &h);
    z_thresholds(svg, &h, rule_z);
    frame(svg, ZX0, ZY0, ZX1 - ZX0, ZY1 - ZY0);
    svg.text(
        "axis-title",
        (ZX0 + ZX1) / 2.0,
        ZY1 + 36.0,
        "middle",
        r#" font-size="12""#,
        "robust z of the cell's residual (log time)",
    );
    let cy = (ZY0 + ZY1) / 2.0;
    let _ = writeln!(
        svg.s,
        r#"<text class="axis-title" x="40" y="{cy:.1}" text-anchor="middle" font-size="12" transform="rotate(-90 40 {cy:.1})">cells</text>"#
    );
    svg.raw("</g>");
}

/// The ticks and labels of the histogram's z axis (below) and count axis (left).
fn z_ticks(svg: &mut Svg, h: &ZBins) {
    let (xt, decimals) = linear_ticks(h.lo, h.hi);
    for v in xt {
        let x = h.x(v);
        let _ = writeln!(
            svg.s,
            r#"<line class="tick" x1="{x:.1}" y1="{ZY1:.1}" x2="{x:.1}" y2="{:.1}" stroke="black"/>"#,
            ZY1 + 5.0
        );
        svg.text(
            "tick-label",
            x,
            ZY1 + 18.0,
            "middle",
            r#" font-size="10""#,
            &format!("{v:.decimals$}"),
        );
    }
    let (yt, yd) = linear_ticks(0.0, h.cmax * 1.1);
    for c in yt {
        let y = h.y(c);
        let _ = writeln!(
            svg.s,
            r#"<line class="tick" x1="{:.1}" y1="{y:.1}" x2="{ZX0:.1}" y2="{y:.1}" stroke="black"/>"#,
            ZX0 - 5.0
        );
        svg.text(
            "tick-label",
            ZX0 - 8.0,
            y + 4.0,
            "end",
            r#" font-size="10""#,
            &format!("{c:.yd$}"),
        );
    }
}

/// One bar per bin that holds a cell.
fn z_bars(svg: &mut Svg, h: &ZBins) {
    svg.raw(r##"<g class="bars" fill="#7aa6d8" stroke="#3b6ea8" stroke-width="0.6">"##);
    for (k, &c) in h.counts.iter().enumerate().filter(|(_, &c)| c > 0) {
        let x0 = h.x(h.lo + k as f64 * h.width);
        let top = h.y(c as f64);
        let _ = writeln!(
            svg.s,
            r#"<rect class="bar" x="{x0:.2}" y="{top:.2}" width="{:.2}" height="{:.2}" data-count="{c}"/>"#,
            (h.x(h.lo + (k + 1) as f64 * h.width) - x0).max(0.5),
            ZY1 - top
        );
    }
    svg.raw("</g>");
}

/// The dashed lines at the rule's threshold, `+z` and `-z`, with their labels.
fn z_thresholds(svg: &mut Svg, h: &ZBins, rule_z: f64) {
    for (v, anchor) in [(rule_z, "start"), (-rule_z, "end")] {
        let x = h.x(v);
        let _ = writeln!(
            svg.s,
            r#"<line class="threshold" x1="{x:.1}" y1="{ZY0:.1}" x2="{x:.1}" y2="{ZY1:.1}" stroke="{FLAG}" stroke-width="1.5" stroke-dasharray="6 3"/>"#
        );
        let dx = if anchor == "start" { 4.0 } else { -4.0 };
        svg.text(
            "annotation",
            x + dx,
            ZY0 + 12.0,
            anchor,
            &format!(r#" font-size="11" fill="{FLAG}""#),
            &format!("z = {v}"),
        );
    }
}

/// The matrix plot of `doc` at `size` (default: the first size measured), coloured as
/// `colour` says.
pub(super) fn plot(doc: &ResultDoc, size: Option<u64>, colour: MatrixColour) -> Result<String> {
    let m = doc.allpairs.as_ref().ok_or_else(|| {
        Error::Invalid(
            "the document has no all-pairs matrix (write one with `commbench allpairs`)".into(),
        )
    })?;
    let size = pick(m, size)?;
    let order = host_order(m);
    let colour = if m.fit_at(size).is_some() {
        colour
    } else {
        MatrixColour::Time
    };
    let title = match colour {
        MatrixColour::Time => format!(
            "All pairs: median one-way time per cell, {}",
            size_text(size)
        ),
        MatrixColour::Excess => format!(
            "All pairs: each cell's slowdown over a healthy cell of its class, {}",
            size_text(size)
        ),
    };
    let mut svg = Svg::sized(W, H, &title, &subtitle(doc));
    heatmap(&mut svg, m, size, &order, colour);
    let fit = m.fit_at(size);
    match fit {
        Some(f) => {
            node_bars(&mut svg, f, &order);
            z_histogram(&mut svg, f, m.rule.z);
        }
        None => svg.text(
            "annotation",
            W / 2.0,
            ZY0 + 20.0,
            "middle",
            "",
            "no attribution at this size: too few cells to fit the model",
        ),
    }
    let verdicts = m
        .verdicts
        .iter()
        .filter(|v| v.sizes.is_empty() || v.sizes.contains(&size))
        .count();
    let shown = match colour {
        MatrixColour::Time => "median one-way time of the cell (log scale)",
        MatrixColour::Excess => {
            "the cell's median over a healthy cell of its class (log scale; --colour time for the time)"
        }
    };
    let blocks = if order.len() > AGGREGATE_ABOVE {
        format!(
            " Above {AGGREGATE_ABOVE} ranks a block is the median of the cells between two groups \
             of ranks (under one switch, on one host, or a run of the order), outlined when it \
             holds an outlined cell."
        )
    } else {
        String::new()
    };
    let caption = [
        format!(
            "Colour: {shown}; grey: the diagonal or a cell not measured; outlined: |z| > {} or blamed by one of the {verdicts} verdict(s) at this size, whose ranks are marked in red on the axes.{blocks}",
            m.rule.z
        ),
        "Node effects: exp(sender) and exp(receiver) of Tukey's median polish of log time (1: as fast as the common time); ranks in the heatmap's order.".to_string(),
    ];
    svg.caption_at(20.0, H - 26.0, &caption);
    Ok(svg.finish())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::matrix_compare::synthetic::section;
    use crate::analysis::testkit::{doc, sweep};
    use crate::render::format::svg::tests::well_formed;
    use crate::render::format::svg::{Plot, PlotKind};
    use crate::render::format::Renderer;

    fn matrix_doc(hosts: &[&str], slow: &[u32]) -> ResultDoc {
        let mut d = doc(vec![]);
        d.allpairs = Some(section(hosts, &[8, 4096], slow, 3.0, 1));
        d
    }

    fn draw(d: &ResultDoc, kind: PlotKind, size: Option<u64>) -> Result<String> {
        Plot::new(kind, size).render(d, &[])
    }

    #[test]
    fn heatmap_bars_and_histogram() {
        let hosts = ["b", "a", "b", "a", "c", "c", "d"];
        let d = matrix_doc(&hosts, &[4]);
        let s = draw(&d, PlotKind::Matrix, None).unwrap();
        well_formed(&s).unwrap();
        assert!(s.starts_with("<?xml") && s.contains("<svg "));
        assert_eq!(s.matches(r#"<rect class="cell"#).count(), 49);
        assert_eq!(s.matches(r#"<rect class="cell missing"#).count(), 7);
        assert_eq!(s.matches(r#"class="sender-bar""#).count(), 7);
        assert_eq!(s.matches(r#"class="receiver-bar""#).count(), 7);
        assert_eq!(s.matches(r#"class="threshold""#).count(), 2);
        // Node 4's 12 cells are outlined, and no other.
        let flags: Vec<&str> = s.split(r#"<rect class="flag""#).skip(1).collect();
        assert_eq!(flags.len(), 12, "{s}");
        assert!(flags
            .iter()
            .all(|f| f.contains(r#"data-source="4""#) || f.contains(r#"data-dest="4""#)));
        // Histogram bars hold every cell's z.
        let total: u64 = s
            .split("data-count=\"")
            .skip(1)
            .map(|t| t[..t.find('"').unwrap()].parse::<u64>().unwrap())
            .sum();
        assert_eq!(total, 42);
        // Rows by host: a's ranks 1 and 3 first; host boundaries between the groups.
        let first = s.find(r#"data-source="1" data-dest="1""#).unwrap();
        let zero = s.find(r#"data-source="0" data-dest="0""#).unwrap();
        assert!(first < zero);
        assert_eq!(s.matches(r#"class="host-boundary""#).count(), 2 * 3);
        assert!(s.contains("8 B") && !s.contains("NaN"), "{s}");
        let s = draw(&d, PlotKind::Matrix, Some(4096)).unwrap();
        assert!(s.contains("4 KiB"));
    }

    /// Above 256 ranks: blocks between groups of ranks, not a rect per cell; by switch when
    /// the switches are known, else runs of the order (here more hosts than groups).
    #[test]
    fn many_ranks_are_drawn_as_blocks_of_groups() {
        let names: Vec<String> = (0..258).map(|r| format!("h{:03}", r / 2)).collect();
        let hosts: Vec<&str> = names.iter().map(String::as_str).collect();
        let mut d = doc(vec![]);
        d.allpairs = Some(section(&hosts, &[8], &[7], 3.0, 2));
        let s = draw(&d, PlotKind::Matrix, None).unwrap();
        well_formed(&s).unwrap();
        assert_eq!(s.matches(r#"<rect class="cell"#).count(), 0);
        // 129 hosts are more than 128 groups: runs of 3 ranks, 86 a side.
        let blocks = s.matches(r#"<rect class="block"#).count();
        assert_eq!(blocks, 86 * 86, "{blocks}");
        assert!(s.len() < 4 << 20, "{} bytes", s.len());
        // Rank 7's blocks are outlined (its row and its column), and only those.
        let flags = s.matches(r#"<rect class="flag""#).count();
        assert_eq!(flags, 2 * 86 - 1, "{flags}");
        assert!(s.contains("Above 256"), "no caption of the blocks");
        // Under known switches: a group per switch, the rows ordered by it.
        let m = d.allpairs.as_mut().unwrap();
        let switches: Vec<String> = (0..258)
            .map(|r| format!("top.leaf{}", (r / 2) % 6))
            .collect();
        m.topology = Topology::Switched {
            hosts: names.clone(),
            switches,
        };
        let s = draw(&d, PlotKind::Matrix, None).unwrap();
        well_formed(&s).unwrap();
        assert_eq!(s.matches(r#"<rect class="block"#).count(), 36);
        assert_eq!(s.matches(r#"class="group-boundary""#).count(), 2 * 5);
        assert!(
            s.contains("top.leaf0 -&gt; top.leaf1: median x"),
            "no tooltip of a block"
        );
    }

    #[test]
    fn one_rank_per_host_draws_no_boundary() {
        let d = matrix_doc(&["n0", "n1", "n2", "n3"], &[]);
        let s = draw(&d, PlotKind::Matrix, None).unwrap();
        well_formed(&s).unwrap();
        assert_eq!(s.matches(r#"class="host-boundary""#).count(), 0);
        assert_eq!(s.matches(r#"<rect class="flag""#).count(), 0);
    }

    #[test]
    fn kinds_and_sizes_that_do_not_fit() {
        let d = matrix_doc(&["n0", "n1", "n2"], &[]);
        let e = draw(&d, PlotKind::Matrix, Some(5)).unwrap_err().to_string();
        assert!(
            e.contains("no matrix of size 5") && e.contains("8, 4096"),
            "{e}"
        );
        for k in [PlotKind::Latency, PlotKind::Histogram, PlotKind::Queue] {
            let e = draw(&d, k, None).unwrap_err().to_string();
            assert!(e.contains("matrix"), "{e}");
        }
        let e = draw(&sweep(1.0), PlotKind::Matrix, None)
            .unwrap_err()
            .to_string();
        assert!(e.contains("no all-pairs matrix"), "{e}");
        assert_eq!("matrix".parse::<PlotKind>().unwrap(), PlotKind::Matrix);
    }

    #[test]
    fn tick_labels() {
        assert_eq!(tick(10.0), "10");
        assert_eq!(tick(6.0), "6");
        assert_eq!(tick(12.5), "12.5");
        assert_eq!(tick(0.025), "0.025");
        assert_eq!(tick(2e5), "2.000e5");
    }

    #[test]
    fn ramp_ends_and_middle() {
        assert_eq!(colour(0.0), "#440154");
        assert_eq!(colour(1.0), "#fde725");
        assert_eq!(colour(0.5), "#21918c");
        assert_eq!(colour(f64::NAN), "#440154");
        assert_eq!(colour(7.0), "#fde725");
    }

    #[test]
    fn log_ticks_cover_the_range() {
        assert_eq!(
            log_ticks(1.5, 300.0),
            vec![2.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0]
        );
        assert_eq!(log_ticks(0.5, 5e4), vec![1.0, 10.0, 100.0, 1000.0, 10000.0]);
        assert_eq!(log_ticks(5.01, 11.6), vec![6.0, 7.0, 8.0, 9.0, 10.0]);
        assert_eq!(log_ticks(3.1, 3.9), vec![3.1, 3.9]);
    }
}
