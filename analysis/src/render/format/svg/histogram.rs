//! The histogram plot: the distribution of one size's one-way times, computed from the raw
//! trial times, with vertical lines at the median and at `cut_coef x median`, the filter of
//! seed 000 §3.4.

use super::canvas::{
    num, plot_x, plot_y, size_text, Axis, Svg, BOTTOM, HEIGHT, LEFT, RIGHT, TOP, WIDTH,
};
use super::subtitle;
use crate::analysis::compare::one_way_us;
use crate::analysis::document::ResultDoc;
use crate::analysis::point::Point;
use commbench_core::stats;
use commbench_core::transport::error::{Error, Result};
use std::fmt::Write;

/// Bars of the plot.
const BINS: usize = 60;

/// The point of `size`, or the first one.
fn pick(doc: &ResultDoc, size: Option<u64>) -> Result<&Point> {
    match size {
        None => doc.points.first(),
        Some(s) => doc.points.iter().find(|p| p.size == s),
    }
    .ok_or_else(|| {
        let sizes: Vec<String> = doc.points.iter().map(|p| p.size.to_string()).collect();
        Error::Invalid(format!(
            "no point of size {} in the document (sizes: {})",
            size.unwrap_or(0),
            sizes.join(", ")
        ))
    })
}

/// The right end of the time axis for the sorted times `v`. The data up to their 99th
/// percentile decide the range; the cut line joins it when it is near (within the data's span
/// again), otherwise it is marked off scale at the right edge so that the distribution is not
/// squashed into a corner.
fn upper_end(v: &[f64], median: f64, cut: f64) -> f64 {
    let p99 = stats::quantile(v, 0.99).unwrap_or(median);
    let (vmin, vmax) = (v[0], v[v.len() - 1]);
    let mut data_hi = vmax.min(p99 + 0.05 * (p99 - vmin));
    if data_hi <= vmin {
        data_hi = vmin + vmin.abs().max(1e-3) * 0.02;
    }
    if cut <= data_hi + (data_hi - vmin) {
        data_hi.max(cut + 0.02 * (cut - vmin))
    } else {
        data_hi
    }
}

/// The bars: `counts[k]` trials in `[lo + k width, lo + (k + 1) width)`.
fn bars(svg: &mut Svg, x: &Axis, y: &Axis, counts: &[u64], lo: f64, width: f64) {
    svg.raw(r##"<g class="bars" fill="#7aa6d8" stroke="#3b6ea8" stroke-width="0.6">"##);
    let base = y.px(0.0);
    for (k, &c) in counts.iter().enumerate().filter(|(_, &c)| c > 0) {
        let x0 = x.px(lo + k as f64 * width);
        let x1 = x.px(lo + (k + 1) as f64 * width);
        let top = y.px(c as f64);
        let _ = writeln!(
            svg.s,
            r#"<rect class="bar" x="{x0:.2}" y="{top:.2}" width="{:.2}" height="{:.2}" data-count="{c}"/>"#,
            (x1 - x0).max(0.5),
            base - top
        );
    }
    svg.raw("</g>");
}

/// A vertical line at time `at` with its label `dy` below the top, or an arrow at the edge
/// when `at` is off the axis.
fn mark(svg: &mut Svg, x: &Axis, (class, color): (&str, &str), at: f64, label: String, dy: f64) {
    let (t, b) = (TOP, HEIGHT - BOTTOM);
    let (px, label) = if x.contains(at) {
        (x.px(at), label)
    } else if at > x.hi {
        (WIDTH - RIGHT - 2.0, format!("{label} (off scale) ->"))
    } else {
        (LEFT + 2.0, format!("<- {label} (off scale)"))
    };
    let _ = writeln!(
        svg.s,
        r#"<line class="{class}" x1="{px:.2}" y1="{t:.1}" x2="{px:.2}" y2="{b:.1}" stroke="{color}" stroke-width="2" stroke-dasharray="6 3"/>"#
    );
    let (anchor, tx) = if px > (LEFT + WIDTH - RIGHT) / 2.0 {
        ("end", px - 5.0)
    } else {
        ("start", px + 5.0)
    };
    let style = format!(r#" font-size="12" fill="{color}""#);
    svg.text("annotation", tx, t + dy, anchor, &style, &label);
}

/// The distribution of one size's one-way times with the median and cut_coef lines.
pub(super) fn plot(doc: &ResultDoc, size: Option<u64>) -> Result<String> {
    let p = pick(doc, size)?;
    let mut v = one_way_us(p);
    stats::sort_samples(&mut v);
    let (Some(&vmin), Some(&vmax)) = (v.first(), v.last()) else {
        return Err(Error::Invalid(format!(
            "size {} has no raw trial times to draw",
            p.size
        )));
    };
    let median = stats::median(&v).unwrap_or(p.one_way_us.median);
    let cut_coef = p.filtered.cut_coef;
    let cut = cut_coef * median;
    let upper = upper_end(&v, median, cut);
    let width = (upper - vmin) / BINS as f64;
    // Times above `upper` are off the plot; the last bar is closed on the right, so a time at
    // `upper` (which rounding may put at or past the last computed edge) is drawn in it.
    let shown = v.partition_point(|&t| t <= upper);
    let overflow = v.len() - shown;
    let h = stats::histogram(v[..shown].iter().map(|&t| (t, 1)), vmin, width, BINS)
        .ok_or_else(|| Error::Invalid(format!("cannot bin the times of size {}", p.size)))?;
    let mut counts = h.counts;
    if let Some(last) = counts.last_mut() {
        *last += h.overflow;
    }
    let cmax = counts.iter().copied().max().unwrap_or(1).max(1) as f64;
    let x = Axis::linear(vmin, upper, plot_x().0, plot_x().1);
    let y = Axis::linear(0.0, cmax * 1.12, plot_y().0, plot_y().1);
    let time = crate::render::words::time_noun(&p.pattern);
    let title = format!(
        "Distribution of the {time}, {} of {}",
        p.pattern,
        size_text(p.size)
    );
    let mut svg = Svg::new(&title, &subtitle(doc));
    svg.axes(&x, &y, &format!("{time} (us)"), "trials per bin (count)");
    bars(&mut svg, &x, &y, &counts, vmin, width);
    let (m, c) = (num(median), num(cut));
    mark(
        &mut svg,
        &x,
        ("median-line", "#2ca02c"),
        median,
        format!("median = {m} us"),
        16.0,
    );
    let label = format!("cut_coef x median = {cut_coef} x {m} = {c} us");
    mark(&mut svg, &x, ("cut-line", "#d62728"), cut, label, 32.0);
    let above_cut = v.iter().filter(|&&t| t > cut).count();
    let mut cap = vec![format!(
        "{} trials, npp = {}, {BINS} bins of {} us; {above_cut} trial(s) above the cut (removed by the filter of Luecke et al. 2009 §3.4).",
        v.len(),
        p.npp,
        num(width),
    )];
    if overflow > 0 {
        cap.push(format!(
            "{overflow} trial(s) above {} us (up to {} us) are beyond the right edge.",
            num(upper),
            num(vmax)
        ));
    }
    svg.caption(&cap);
    Ok(svg.finish())
}
