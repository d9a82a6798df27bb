//! The queue plot of Underwood & Brightwell's benchmarks (seed 004 Figures 3-5): the median
//! one-way time against the queue length on linear axes, one line per fraction of the
//! pre-posted queue traversed (one line for the unexpected queue), per backend and size, with
//! the 95 % CI of each median as an error bar.

use super::canvas::{num, plot_x, plot_y, size_text, Axis, Entry, Key, Svg};
use super::{min_max, subtitle};
use crate::analysis::document::ResultDoc;
use crate::analysis::point::Point;
use commbench_core::method::queue::QueueKind;
use commbench_core::transport::error::{Error, Result};
use std::fmt::Write;

/// One line: its label and its points sorted by length.
type Line<'a> = (String, Vec<&'a Point>);

/// The lines of the document's queue points: per pattern, backend, size and fraction
/// traversed, in order of first appearance.
fn lines(doc: &ResultDoc) -> Vec<Line<'_>> {
    let backends = {
        let mut b: Vec<&str> = doc.points.iter().map(|p| p.backend.as_str()).collect();
        b.dedup();
        b.len()
    };
    let sizes = {
        let mut s: Vec<u64> = doc.points.iter().map(|p| p.size).collect();
        s.sort_unstable();
        s.dedup();
        s.len()
    };
    let mut out: Vec<Line<'_>> = Vec::new();
    for p in doc.points.iter().filter(|p| p.queue_length.is_some()) {
        let mut label = match (QueueKind::of_pattern(&p.pattern), p.traversed_pct) {
            (Some(QueueKind::Posted), Some(pct)) => format!("{pct} % traversed"),
            _ => "unexpected queue".to_string(),
        };
        if sizes > 1 {
            let _ = write!(label, ", {}", size_text(p.size));
        }
        if backends > 1 {
            let _ = write!(label, ", {}", p.backend);
        }
        match out.iter_mut().find(|(l, _)| *l == label) {
            Some((_, v)) => v.push(p),
            None => out.push((label, vec![p])),
        }
    }
    for (_, v) in &mut out {
        v.sort_by_key(|p| p.queue_length);
    }
    out
}

/// A point's median and its CI ends, finite ones only.
fn ys(p: &Point) -> impl Iterator<Item = f64> {
    let s = &p.one_way_us;
    [s.median, s.ci95_median.lo, s.ci95_median.hi]
        .into_iter()
        .filter(|v| v.is_finite())
}

/// Each line with its markers and error bars; the legend entries.
fn draw(svg: &mut Svg, x: &Axis, y: &Axis, ls: &[Line]) -> Vec<Entry> {
    let mut legend = Vec::new();
    for (i, (label, pts)) in ls.iter().enumerate() {
        let color = svg.open_series(i, label);
        let at = |p: &Point| {
            (
                x.px(p.queue_length.unwrap_or(0) as f64),
                p.one_way_us.median,
            )
        };
        let path: Vec<(f64, f64)> = pts
            .iter()
            .filter(|p| p.one_way_us.median.is_finite())
            .map(|p| {
                let (px, m) = at(p);
                (px, y.px(m))
            })
            .collect();
        svg.data_line(&path);
        for p in pts.iter().filter(|p| p.one_way_us.median.is_finite()) {
            let (px, m) = at(p);
            let s = &p.one_way_us;
            let lo = if s.ci95_median.lo.is_finite() {
                s.ci95_median.lo
            } else {
                m
            };
            let hi = if s.ci95_median.hi.is_finite() {
                s.ci95_median.hi
            } else {
                m
            };
            let (plo, phi) = (y.px(lo), y.px(hi));
            let _ = writeln!(
                svg.s,
                r#"<path class="errorbar" d="M{px:.2},{plo:.2} L{px:.2},{phi:.2}" fill="none" stroke-width="1.2"/>"#
            );
            let length = p.queue_length.unwrap_or(0);
            let title = format!(
                "length {length}: median {} us, 95% CI [{}, {}]",
                num(m),
                num(lo),
                num(hi)
            );
            let data = format!(r#" data-length="{length}" data-median-us="{m}""#);
            svg.marker((px, y.px(m)), p.size, &data, &title);
        }
        svg.raw("</g>");
        legend.push(Entry::new(color, label.clone(), Key::Marker));
    }
    legend
}

/// Median one-way time against queue length, linear axes, one line per fraction traversed.
pub(super) fn plot(doc: &ResultDoc) -> Result<String> {
    let ls = lines(doc);
    let xs: Vec<f64> = ls
        .iter()
        .flat_map(|(_, v)| v.iter().filter_map(|p| p.queue_length.map(|l| l as f64)))
        .collect();
    let yv: Vec<f64> = ls
        .iter()
        .flat_map(|(_, v)| v.iter().flat_map(|p| ys(p)))
        .collect();
    if xs.is_empty() || yv.is_empty() {
        return Err(Error::Invalid(
            "no queue benchmark points to plot: the queue plot draws `commbench queue` runs".into(),
        ));
    }
    let (xmin, xmax) = min_max(&xs);
    let (ymin, ymax) = min_max(&yv);
    let x = Axis::linear(xmin.min(0.0), xmax, plot_x().0, plot_x().1);
    let y = Axis::linear(ymin.min(0.0), ymax, plot_y().0, plot_y().1);
    let posted = doc.points.iter().any(|p| p.traversed_pct.is_some());
    let title = if posted {
        "Latency against the pre-posted receive queue"
    } else {
        "Latency against the unexpected message queue"
    };
    let mut svg = Svg::new(title, &subtitle(doc));
    let x_title = if posted {
        "pre-posted receives besides the matching one (queue length)"
    } else {
        "unexpected messages queued at each rank (queue length)"
    };
    svg.axes(&x, &y, x_title, "median one-way time (us)");
    let legend = draw(&mut svg, &x, &y, &ls);
    svg.legend(&legend);
    svg.caption(&[
        "Underwood & Brightwell, The impact of MPI queue usage on message latency, §3 (Figures 1, 2). Error bars: distribution-free 95% confidence interval of the median.".to_string(),
    ]);
    Ok(svg.finish())
}
