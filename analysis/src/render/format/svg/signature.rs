//! NetPIPE's signature graph: throughput (MB/s) against transfer time (us) on log-log axes.

use super::canvas::{num, plot_x, plot_y, size_text, Axis, Entry, Key, Scale, Svg};
use super::{min_max, rate, series, subtitle, Series};
use crate::analysis::document::ResultDoc;
use crate::analysis::point::Point;
use commbench_core::transport::error::{Error, Result};

/// Whether a point can stand on the log-log axes.
fn drawable(p: &Point) -> bool {
    p.size > 0 && p.one_way_us.median > 0.0
}

/// (median time, rate at the median) of a point.
fn time_and_rate(p: &Point) -> (f64, f64) {
    let t = p.one_way_us.median;
    (t, rate(p.size, t))
}

/// Each series as a line of points, the first and last labelled with their size; their
/// legend entries.
fn curves(svg: &mut Svg, x: &Axis, y: &Axis, ser: &[Series]) -> Vec<Entry> {
    let mut legend = Vec::new();
    for (i, (pat, pts)) in ser.iter().enumerate() {
        let shown: Vec<&Point> = pts.iter().copied().filter(|p| drawable(p)).collect();
        let color = svg.open_series(i, pat);
        let line: Vec<(f64, f64)> = shown
            .iter()
            .map(|p| time_and_rate(p))
            .map(|(t, r)| (x.px(t), y.px(r)))
            .collect();
        svg.data_line(&line);
        for (k, (p, &(px, py))) in shown.iter().zip(&line).enumerate() {
            let (t, r) = time_and_rate(p);
            let title = format!("{}: {} us, {} MB/s", size_text(p.size), num(t), num(r));
            svg.marker((px, py), p.size, "", &title);
            if k == 0 || k + 1 == shown.len() {
                let style = r#" font-size="11" stroke="none""#;
                svg.text(
                    "point-label",
                    px + 6.0,
                    py - 6.0,
                    "start",
                    style,
                    &size_text(p.size),
                );
            }
        }
        svg.raw("</g>");
        let label = format!("{pat} (labels: message size)");
        legend.push(Entry::new(color, label, Key::Marker));
    }
    legend
}

/// Throughput against transfer time, log-log.
pub(super) fn plot(doc: &ResultDoc) -> Result<String> {
    let ser = series(doc);
    let (xs, ys): (Vec<f64>, Vec<f64>) = ser
        .iter()
        .flat_map(|(_, pts)| pts)
        .filter(|p| drawable(p))
        .map(|p| time_and_rate(p))
        .unzip();
    if xs.is_empty() {
        return Err(Error::Invalid(
            "no point with a positive size and time for the signature graph".into(),
        ));
    }
    let (xmin, xmax) = min_max(&xs);
    let (ymin, ymax) = min_max(&ys);
    let x = Axis::log(xmin, xmax, Scale::Log10, plot_x().0, plot_x().1);
    let y = Axis::log(ymin, ymax, Scale::Log10, plot_y().0, plot_y().1);
    let mut svg = Svg::new(
        "Signature graph: throughput against transfer time",
        &subtitle(doc),
    );
    svg.axes(
        &x,
        &y,
        &format!("transfer time = median {} (us)", super::time_noun(doc)),
        "throughput (MB/s, 10^6 B/s)",
    );
    let legend = curves(&mut svg, &x, &y, &ser);
    svg.legend(&legend);
    svg.caption(&["NetPIPE's signature graph: each point is one message size; the curve's knee shows the latency, its top the bandwidth.".to_string()]);
    Ok(svg.finish())
}
