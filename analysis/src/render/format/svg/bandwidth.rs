//! The bandwidth plot: the rate `size / median` in MB/s against size on a log axis, with the
//! fitted model's rate `n / (t0 + n / r_inf)` (seed 002 eq. 3) and its asymptote `r_inf`.

use super::canvas::{
    num, plot_x, plot_y, size_text, Axis, Entry, Key, Scale, Svg, FIT_COLORS, LEFT, RIGHT, WIDTH,
};
use super::{min_max, model_samples, rate, regimes, series, subtitle, Series};
use crate::analysis::document::ResultDoc;
use crate::analysis::model::{FitSection, HockneySegment};
use commbench_core::transport::error::{Error, Result};
use std::fmt::Write;

/// A fitted regime's rate: its pattern, label, samples `(n, rate)` and parameters.
type RateCurve = (String, String, Vec<(f64, f64)>, HockneySegment);

/// The values the axes must hold: sizes, and rates (from 0) at the medians and the lower CI
/// ends.
fn extent(ser: &[Series]) -> (Vec<f64>, Vec<f64>) {
    let mut xs = Vec::new();
    let mut ys = vec![0.0];
    for p in ser.iter().flat_map(|(_, pts)| pts).filter(|p| p.size > 0) {
        let s = &p.one_way_us;
        xs.push(p.size as f64);
        ys.push(rate(p.size, s.median));
        if s.ci95_median.lo > 0.0 {
            ys.push(rate(p.size, s.ci95_median.lo));
        }
    }
    (xs, ys)
}

/// Every pattern's fitted regimes as rate curves.
fn rate_curves(ser: &[Series], fits: &[FitSection]) -> Vec<RateCurve> {
    let mut curves = Vec::new();
    for (pat, _) in ser {
        if let Some(f) = fits.iter().find(|f| f.pattern == *pat) {
            for (label, seg) in regimes(f) {
                let pts: Vec<(f64, f64)> = model_samples(&seg)
                    .into_iter()
                    .map(|(n, t)| (n, n / t))
                    .collect();
                curves.push((pat.clone(), label, pts, seg));
            }
        }
    }
    curves
}

/// The top of the rate axis (the data, and the curves up to 1.5 times the data) and the
/// asymptote of the last regime when it is near the data.
fn top(data_max: f64, curves: &[RateCurve]) -> (f64, Option<f64>) {
    let mut ymax = data_max;
    for (_, r) in curves.iter().flat_map(|c| &c.2) {
        if *r <= 1.5 * data_max {
            ymax = ymax.max(*r);
        }
    }
    let asymptote = curves
        .last()
        .map(|c| c.3.r_inf_mb_s)
        .filter(|r| *r > 0.0 && r.is_finite() && *r <= 1.3 * data_max);
    if let Some(r) = asymptote {
        ymax = ymax.max(r);
    }
    (ymax, asymptote)
}

/// Each series' rates at the median, with error bars from the median's CI; their legend
/// entries.
fn rates(svg: &mut Svg, x: &Axis, y: &Axis, ser: &[Series]) -> Vec<Entry> {
    let mut legend = Vec::new();
    for (i, (pat, pts)) in ser.iter().enumerate() {
        let color = svg.open_series(i, pat);
        let line: Vec<(f64, f64)> = pts
            .iter()
            .filter(|p| p.size > 0)
            .map(|p| (x.px(p.size as f64), y.px(rate(p.size, p.one_way_us.median))))
            .collect();
        svg.data_line(&line);
        for p in pts.iter().filter(|p| p.size > 0) {
            let s = &p.one_way_us;
            let px = x.px(p.size as f64);
            let r = rate(p.size, s.median);
            let hi = if s.ci95_median.lo > 0.0 {
                rate(p.size, s.ci95_median.lo)
            } else {
                r
            };
            let lo = rate(p.size, s.ci95_median.hi);
            let _ = writeln!(
                svg.s,
                r#"<path class="errorbar" d="M{px:.2},{:.2} L{px:.2},{:.2}" fill="none" stroke-width="1.2"/>"#,
                y.px(lo),
                y.px(hi)
            );
            let title = format!("{}: {} MB/s", size_text(p.size), num(r));
            svg.marker(
                (px, y.px(r)),
                p.size,
                &format!(r#" data-rate-mb-s="{r}""#),
                &title,
            );
        }
        svg.raw("</g>");
        legend.push(Entry::new(
            color,
            format!("{pat}: rate at the median"),
            Key::Marker,
        ));
    }
    legend
}

/// The model's rate curves where they cross the plot; their legend entries.
fn model_lines(svg: &mut Svg, x: &Axis, y: &Axis, curves: &[RateCurve]) -> Vec<Entry> {
    let mut legend = Vec::new();
    for (k, (pat, label, pts, seg)) in curves.iter().enumerate() {
        let visible: Vec<(f64, f64)> = pts
            .iter()
            .filter(|(n, r)| x.contains(*n) && y.contains(*r))
            .map(|(n, r)| (x.px(*n), y.px(*r)))
            .collect();
        if visible.len() < 2 {
            continue;
        }
        let color = FIT_COLORS[k % FIT_COLORS.len()];
        svg.fit_line(pat, label, &visible, color);
        let text = format!(
            "model {label}: n / (t0 + n / r_inf), n_half = {} B",
            num(seg.n_half_bytes)
        );
        legend.push(Entry::new(color, text, Key::Dash));
    }
    legend
}

/// Rate (MB/s) against size, log size axis, with the model and its asymptote.
pub(super) fn plot(doc: &ResultDoc, fits: &[FitSection]) -> Result<String> {
    let ser = series(doc);
    let (xs, ys) = extent(&ser);
    if xs.is_empty() {
        return Err(Error::Invalid(
            "no point with a positive size: a bandwidth needs bytes".into(),
        ));
    }
    let (xmin, xmax) = min_max(&xs);
    let x = Axis::log(xmin, xmax, Scale::Log2Bytes, plot_x().0, plot_x().1);
    let curves = rate_curves(&ser, fits);
    let (ymax, asymptote) = top(min_max(&ys).1, &curves);
    let y = Axis::linear(0.0, ymax * 1.05, plot_y().0, plot_y().1);
    let mut svg = Svg::new("Bandwidth against message size", &subtitle(doc));
    svg.axes(
        &x,
        &y,
        "message size (bytes; K = 1024, M = 1024^2)",
        &format!(
            "rate = size / median {} (MB/s, 10^6 B/s)",
            super::time_noun(doc)
        ),
    );
    let mut legend = rates(&mut svg, &x, &y, &ser);
    legend.extend(model_lines(&mut svg, &x, &y, &curves));
    if let Some(r) = asymptote {
        let py = y.px(r);
        let _ = writeln!(
            svg.s,
            r##"<line class="asymptote" x1="{:.1}" y1="{py:.2}" x2="{:.1}" y2="{py:.2}" stroke="#888888" stroke-dasharray="2 3"/>"##,
            LEFT,
            WIDTH - RIGHT
        );
        // Named in the legend rather than beside the line, where the largest sizes' points sit.
        let label = format!("r_inf = {} MB/s (asymptote)", num(r));
        legend.push(Entry::new("#888888", label, Key::Dot));
    }
    svg.legend(&legend);
    svg.caption(&[format!(
        "Rates use the median {}; error bars from its 95% confidence interval (this run only). Model: Hockney's r = r_inf / (1 + n_half / n).",
        super::time_noun(doc)
    )]);
    Ok(svg.finish())
}
