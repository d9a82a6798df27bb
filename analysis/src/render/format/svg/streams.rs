//! The plots of pairs streaming at once (`bandwidth --pairs`, docs/methodology.md §2a):
//!
//! * `aggregate`: the aggregate bandwidth (the makespan aggregate, IMB's, MB/s) against the
//!   message size on a log axis, one line per number of pairs (and window, in a sweep of
//!   both), error bars from the 95 % interval of its median over the samples;
//! * `message-rate`: the aggregate message rate (messages per second, the same aggregate)
//!   against the size, log-log;
//! * `window`: the window profile (osu_mbw_mr's -V): the rate at the median against the
//!   window, one line per size (and number of pairs), from a sweep of windows.

use super::canvas::{num, plot_x, plot_y, size_text, Axis, Entry, Key, Scale, Svg};
use super::{min_max, subtitle};
use crate::analysis::document::ResultDoc;
use crate::analysis::pairs::Aggregate;
use crate::analysis::point::Point;
use commbench_core::transport::error::{Error, Result};
use std::fmt::Write;

/// One value drawn: x, y and the ends of its error bar.
type Dot = (f64, f64, Option<(f64, f64)>);

/// A line of dots with its label.
type Line = (String, Vec<Dot>);

/// The makespan aggregate of a point's pairs.
fn makespan(p: &Point) -> Option<&Aggregate> {
    p.pairs.as_ref()?.aggregate("makespan")
}

/// The lines of the points with pairs, one per series ([`Point::group`]; with several
/// backends, one per backend too), each dot `(size, value)`.
fn by_series(doc: &ResultDoc, value: fn(&Aggregate) -> Dot) -> Result<Vec<Line>> {
    let several = doc
        .points
        .iter()
        .any(|p| p.backend != doc.points[0].backend);
    let mut lines: Vec<Line> = Vec::new();
    for p in doc.points.iter().filter(|p| p.size > 0) {
        let Some(a) = makespan(p) else {
            continue;
        };
        let k = p.pairs.as_ref().map_or(1, |q| q.pairs);
        let mut name = match p.sweep {
            Some(_) => p.group(),
            None => format!("{} pair{}", k, if k == 1 { "" } else { "s" }),
        };
        if several {
            name = format!("{name} over {}", p.backend);
        }
        let (_, y, bar) = value(a);
        let dot = (p.size as f64, y, bar);
        match lines.iter_mut().find(|(n, _)| *n == name) {
            Some((_, v)) => v.push(dot),
            None => lines.push((name, vec![dot])),
        }
    }
    if lines.is_empty() {
        return Err(Error::Invalid(
            "the document has no pairs streaming at once: measure with `commbench bandwidth \
             --pairs K`"
                .into(),
        ));
    }
    for (_, v) in &mut lines {
        v.sort_by(|a, b| a.0.total_cmp(&b.0));
    }
    Ok(lines)
}

/// Draw `lines` on `x` and `y`: a line through each, a marker per dot with its error bar;
/// their legend entries.
fn draw(svg: &mut Svg, x: &Axis, y: &Axis, lines: &[Line], unit: &str) -> Vec<Entry> {
    let mut legend = Vec::new();
    for (i, (name, dots)) in lines.iter().enumerate() {
        let color = svg.open_series(i, name);
        let visible: Vec<&Dot> = dots.iter().filter(|d| y.contains(d.1)).collect();
        let path: Vec<(f64, f64)> = visible.iter().map(|d| (x.px(d.0), y.px(d.1))).collect();
        svg.data_line(&path);
        for &&(vx, vy, bar) in &visible {
            let px = x.px(vx);
            if let Some((lo, hi)) = bar.filter(|(lo, hi)| y.contains(*lo) && y.contains(*hi)) {
                let _ = writeln!(
                    svg.s,
                    r#"<path class="errorbar" d="M{px:.2},{:.2} L{px:.2},{:.2}" fill="none" stroke-width="1.2"/>"#,
                    y.px(lo),
                    y.px(hi)
                );
            }
            let title = format!("{name}: {} {unit} at {}", num(vy), num(vx));
            svg.marker(
                (px, y.px(vy)),
                vx as u64,
                &format!(r#" data-value="{vy}""#),
                &title,
            );
        }
        svg.raw("</g>");
        legend.push(Entry::new(color, name.clone(), Key::Marker));
    }
    legend
}

/// Every value the axis must hold: the dots and their bars.
fn values(lines: &[Line]) -> (Vec<f64>, Vec<f64>) {
    let mut xs = Vec::new();
    let mut ys = Vec::new();
    for (_, dots) in lines {
        for &(x, y, bar) in dots {
            xs.push(x);
            ys.push(y);
            if let Some((lo, hi)) = bar {
                ys.extend([lo, hi]);
            }
        }
    }
    (xs, ys)
}

/// What an aggregate plot draws: the bandwidth (linear from 0) or the message rate (log).
struct Rates {
    title: &'static str,
    y_title: &'static str,
    unit: &'static str,
    log: bool,
    value: fn(&Aggregate) -> Dot,
    caption: &'static str,
}

/// The aggregate bandwidth of the pairs against the size, one line per number of pairs.
pub(super) fn aggregate(doc: &ResultDoc) -> Result<String> {
    rates(
        doc,
        &Rates {
            title: "Aggregate bandwidth of pairs streaming at once",
            y_title: "aggregate rate K x B / max_p t_p (MB/s, 10^6 B/s)",
            unit: "MB/s",
            log: false,
            value: |a| (0.0, a.mb_s.median, a.mb_s.ci95_low.zip(a.mb_s.ci95_high)),
            caption: "The makespan aggregate (IMB's): K pairs' bytes over the slowest pair's \
                      time, median over the samples, error bars from its 95% confidence \
                      interval (this run only). The document holds the mean-time (OSU 7.4) and \
                      sum-of-rates aggregates too.",
        },
    )
}

/// The aggregate message rate of the pairs against the size, log-log.
pub(super) fn message_rate(doc: &ResultDoc) -> Result<String> {
    rates(
        doc,
        &Rates {
            title: "Aggregate message rate of pairs streaming at once",
            y_title: "aggregate messages per second, K x M / max_p t_p",
            unit: "msg/s",
            log: true,
            value: |a| {
                let m = &a.messages_per_s;
                (0.0, m.median, m.ci95_low.zip(m.ci95_high))
            },
            caption: "The makespan aggregate: K pairs' messages over the slowest pair's time, \
                      median over the samples, error bars from its 95% confidence interval \
                      (this run only); the acknowledgements closing each window are timed, not \
                      counted.",
        },
    )
}

/// An aggregate of the pairs against the size, as `r` says.
fn rates(doc: &ResultDoc, r: &Rates) -> Result<String> {
    let lines = by_series(doc, r.value)?;
    let (xs, ys) = values(&lines);
    let ys: Vec<f64> = ys.into_iter().filter(|v| *v > 0.0).collect();
    if ys.is_empty() {
        return Err(Error::Invalid(format!("no positive {} to plot", r.unit)));
    }
    let (xmin, xmax) = min_max(&xs);
    let (ymin, ymax) = min_max(&ys);
    let x = Axis::log(xmin, xmax, Scale::Log2Bytes, plot_x().0, plot_x().1);
    let y = if r.log {
        Axis::log(ymin, ymax, Scale::Log10, plot_y().0, plot_y().1)
    } else {
        Axis::linear(0.0, ymax * 1.05, plot_y().0, plot_y().1)
    };
    let mut svg = Svg::new(r.title, &subtitle(doc));
    svg.axes(
        &x,
        &y,
        "message size (bytes; K = 1024, M = 1024^2)",
        r.y_title,
    );
    let legend = draw(&mut svg, &x, &y, &lines, r.unit);
    svg.legend(&legend);
    svg.caption(&[r.caption.to_string()]);
    Ok(svg.finish())
}

/// The window profile: the rate at the median against the window, one line per size (and
/// number of pairs).
pub(super) fn window(doc: &ResultDoc) -> Result<String> {
    let mut lines: Vec<Line> = Vec::new();
    for p in doc.points.iter().filter(|p| p.size > 0) {
        let Some(at) = p.sweep else {
            continue;
        };
        let (rate, bar) = match makespan(p) {
            Some(a) => (a.mb_s.median, a.mb_s.ci95_low.zip(a.mb_s.ci95_high)),
            None => (p.rate_mb_s.median, None),
        };
        let s = if at.pairs == 1 { "" } else { "s" };
        let name = format!("{}, {} pair{s}, {}", size_text(p.size), at.pairs, p.backend);
        let dot = (f64::from(at.window), rate, bar);
        match lines.iter_mut().find(|(n, _)| *n == name) {
            Some((_, v)) => v.push(dot),
            None => lines.push((name, vec![dot])),
        }
    }
    lines.retain(|(_, v)| v.len() > 1);
    if lines.is_empty() {
        return Err(Error::Invalid(
            "the document has no sweep of windows: measure with `commbench bandwidth --window \
             1..128`"
                .into(),
        ));
    }
    for (_, v) in &mut lines {
        v.sort_by(|a, b| a.0.total_cmp(&b.0));
    }
    let (xs, ys) = values(&lines);
    let (xmin, xmax) = min_max(&xs);
    let x = Axis::log(xmin, xmax, Scale::Log2Bytes, plot_x().0, plot_x().1);
    let y = Axis::linear(0.0, min_max(&ys).1 * 1.05, plot_y().0, plot_y().1);
    let mut svg = Svg::new("Window profile", &subtitle(doc));
    svg.axes(
        &x,
        &y,
        "sends outstanding per window (K = 1024)",
        "rate at the median (MB/s, 10^6 B/s)",
    );
    let legend = draw(&mut svg, &x, &y, &lines, "MB/s");
    svg.legend(&legend);
    svg.caption(&[
        "One line per message size: the rate at the median time per message for each window \
         (osu_mbw_mr's -V); with pairs, their makespan aggregate with its 95% interval."
            .to_string(),
    ]);
    Ok(svg.finish())
}

#[cfg(test)]
mod tests {
    use super::super::tests::well_formed;
    use super::*;
    use crate::analysis::testkit::{doc, pairs_point, point};

    /// A sweep of 1 and 3 pairs at windows 1 and 4 over three sizes: each plot is well formed,
    /// with a marker per point it draws.
    #[test]
    fn the_plots_of_pairs_draw_every_point() {
        let mut points = Vec::new();
        for k in [1, 3] {
            for w in [1, 4] {
                for (i, size) in [64u64, 4096, 1 << 16].into_iter().enumerate() {
                    points.push(pairs_point(
                        size,
                        w,
                        k,
                        1000.0 * (1 + i) as f64 * f64::from(w),
                    ));
                }
            }
        }
        let d = doc(points);
        for (svg, markers) in [
            (aggregate(&d), 12),
            (message_rate(&d), 12),
            (window(&d), 12),
        ] {
            let svg = svg.expect("a plot");
            well_formed(&svg).expect("well-formed SVG");
            assert_eq!(svg.matches("class=\"marker\"").count(), markers);
        }
        let plain = doc(vec![point("pingpong", 8, 2.0, 0.1, 20, 1)]);
        for e in [aggregate(&plain), message_rate(&plain), window(&plain)] {
            assert!(e.is_err());
        }
    }
}
