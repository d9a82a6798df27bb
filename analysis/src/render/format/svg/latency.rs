//! The latency plot: median one-way time against size on log-log axes, with the 95 % CI of
//! each median as an error bar (seed 003 Figures 1-2) and the Hockney fit (seed 002).

use super::canvas::{num, plot_x, plot_y, size_text, Axis, Entry, Key, Scale, Svg, FIT_COLORS};
use super::{min_max, model_samples, regimes, series, subtitle, Series};
use crate::analysis::document::ResultDoc;
use crate::analysis::model::FitSection;
use commbench_core::transport::error::{Error, Result};
use std::fmt::Write;

/// The values the axes must hold (sizes; medians and their CI ends) and the count of size-0
/// points, which a log axis cannot show.
fn extent(ser: &[Series]) -> (Vec<f64>, Vec<f64>, usize) {
    let (mut xs, mut ys, mut skipped_zero) = (Vec::new(), Vec::new(), 0);
    for p in ser.iter().flat_map(|(_, pts)| pts) {
        if p.size == 0 {
            skipped_zero += 1;
            continue;
        }
        let s = &p.one_way_us;
        if s.median > 0.0 && s.median.is_finite() {
            xs.push(p.size as f64);
            ys.push(s.median);
            if s.ci95_median.lo > 0.0 {
                ys.push(s.ci95_median.lo);
            }
            if s.ci95_median.hi.is_finite() {
                ys.push(s.ci95_median.hi);
            }
        }
    }
    (xs, ys, skipped_zero)
}

/// Each series' medians with error bars; their legend entries.
fn medians(svg: &mut Svg, x: &Axis, y: &Axis, ser: &[Series]) -> Vec<Entry> {
    let mut legend = Vec::new();
    for (i, (pat, pts)) in ser.iter().enumerate() {
        let color = svg.open_series(i, pat);
        for p in pts
            .iter()
            .filter(|p| p.size > 0 && p.one_way_us.median > 0.0)
        {
            let px = x.px(p.size as f64);
            let s = &p.one_way_us;
            let lo = Some(s.ci95_median.lo).filter(|&v| v > 0.0);
            let hi = Some(s.ci95_median.hi).filter(|v| v.is_finite());
            let (lo, hi) = (lo.unwrap_or(s.median), hi.unwrap_or(s.median));
            let (plo, phi) = (y.px(lo), y.px(hi));
            let _ = writeln!(
                svg.s,
                r#"<path class="errorbar" d="M{px:.2},{plo:.2} L{px:.2},{phi:.2} M{:.2},{plo:.2} L{:.2},{plo:.2} M{:.2},{phi:.2} L{:.2},{phi:.2}" fill="none" stroke-width="1.2"/>"#,
                px - 4.0,
                px + 4.0,
                px - 4.0,
                px + 4.0
            );
            let title = format!(
                "{}: median {} us, 95% CI [{}, {}]",
                size_text(p.size),
                num(s.median),
                num(lo),
                num(hi)
            );
            let data = format!(r#" data-median-us="{}""#, s.median);
            svg.marker((px, y.px(s.median)), p.size, &data, &title);
        }
        svg.raw("</g>");
        let label = format!("{pat}: median, 95% CI of the median");
        legend.push(Entry::new(color, label, Key::Marker));
    }
    legend
}

/// Each pattern's fitted regimes as dashed lines, where they cross the plot; their legend
/// entries.
fn fit_lines(svg: &mut Svg, x: &Axis, y: &Axis, ser: &[Series], fits: &[FitSection]) -> Vec<Entry> {
    let mut legend = Vec::new();
    for (pat, _) in ser {
        let Some(f) = fits.iter().find(|f| f.pattern == *pat) else {
            continue;
        };
        for (label, seg) in regimes(f) {
            let visible: Vec<(f64, f64)> = model_samples(&seg)
                .into_iter()
                .filter(|&(n, t)| x.contains(n) && y.contains(t))
                .map(|(n, t)| (x.px(n), y.px(t)))
                .collect();
            if visible.len() < 2 {
                continue;
            }
            let color = FIT_COLORS[legend.len() % FIT_COLORS.len()];
            svg.fit_line(pat, &label, &visible, color);
            let text = format!(
                "Hockney fit {label}: t0 = {} us, r_inf = {} MB/s",
                num(seg.t0_us),
                num(seg.r_inf_mb_s)
            );
            legend.push(Entry::new(color, text, Key::Dash));
        }
    }
    legend
}

/// Median one-way time against size, log-log, with 95 % CI error bars and the fit.
pub(super) fn plot(doc: &ResultDoc, fits: &[FitSection]) -> Result<String> {
    let ser = series(doc);
    let (xs, ys, skipped_zero) = extent(&ser);
    if xs.is_empty() {
        return Err(Error::Invalid(
            "no point with a positive size and time to plot on log axes".into(),
        ));
    }
    let (xmin, xmax) = min_max(&xs);
    let (ymin, ymax) = min_max(&ys);
    let x = Axis::log(xmin, xmax, Scale::Log2Bytes, plot_x().0, plot_x().1);
    let y = Axis::log(ymin, ymax, Scale::Log10, plot_y().0, plot_y().1);
    let time = super::time_noun(doc);
    let mut svg = Svg::new(
        &format!("Median {time} against message size"),
        &subtitle(doc),
    );
    svg.axes(
        &x,
        &y,
        "message size (bytes; K = 1024, M = 1024^2)",
        &format!("median {time} (us)"),
    );
    let mut legend = medians(&mut svg, &x, &y, &ser);
    legend.extend(fit_lines(&mut svg, &x, &y, &ser, fits));
    svg.legend(&legend);
    let mut cap = vec![
        "Error bars: distribution-free 95% confidence interval of the median. Fit: t = t0 + n / r_inf, least squares on relative error (Hockney). The CIs describe this run only.".to_string(),
    ];
    if skipped_zero > 0 {
        cap.push(format!(
            "{skipped_zero} point(s) of size 0 not shown on the log axis."
        ));
    }
    svg.caption(&cap);
    Ok(svg.finish())
}
