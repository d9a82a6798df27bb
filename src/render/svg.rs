//! SVG plots of a result document, written by hand (no plotting crate).
//!
//! Four kinds ([`PlotKind`]):
//!
//! * `latency`: the median one-way time against the message size on log-log axes, with the
//!   95 % confidence interval of each median as an error bar (seed 003 Figures 1-2 draw 95 %
//!   confidence intervals as error bars) and the Hockney fit (seed 002) overlaid, one line
//!   per regime when there is a breakpoint.
//! * `bandwidth`: the rate `size / median` in MB/s (10^6 B/s) against the size on a log axis,
//!   with the fitted model's rate `n / (t0 + n / r_inf)` (seed 002 eq. 3) and its asymptote
//!   `r_inf`.
//! * `histogram`: the distribution of the one-way times of one size, computed from the raw
//!   trial times, with vertical lines at the median and at `cut_coef x median`, the filter of
//!   seed 000 §3.4.
//! * `signature`: NetPIPE's signature graph, throughput (MB/s) against transfer time (us) on
//!   log-log axes.
//!
//! Text uses the generic `sans-serif` family only, so any renderer draws it with whatever font
//! it has; no font file is referenced. Sizes are labelled in bytes with binary K/M/G suffixes,
//! times in us, rates in MB/s. Size 0 cannot be placed on a log axis and is left out of the
//! log plots (a caption says so).

use crate::analysis::document::{Point, ResultDoc};
use crate::analysis::fit::{self, Breakpoint};
use crate::analysis::model::{FitSection, HockneySegment};
use crate::render::format::{text, Style};
use commbench_core::stats::{self, nice_width};
use commbench_core::transport::error::{Error, Result};
use std::fmt::Write;

/// Which plot to draw.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PlotKind {
    /// Median one-way time against size, log-log, with 95 % CI error bars and the fit.
    Latency,
    /// Rate (MB/s) against size, log size axis.
    Bandwidth,
    /// Distribution of one size's one-way times with the median and cut_coef lines.
    Histogram,
    /// Throughput against transfer time, log-log (NetPIPE's signature graph).
    Signature,
}

impl PlotKind {
    /// The names [`std::str::FromStr`] accepts.
    pub const NAMES: [&'static str; 4] = ["latency", "bandwidth", "histogram", "signature"];
}

impl std::str::FromStr for PlotKind {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "latency" => Ok(PlotKind::Latency),
            "bandwidth" => Ok(PlotKind::Bandwidth),
            "histogram" => Ok(PlotKind::Histogram),
            "signature" => Ok(PlotKind::Signature),
            _ => Err(Error::Config(format!(
                "unknown plot kind `{s}`: choose one of {}",
                PlotKind::NAMES.join(", ")
            ))),
        }
    }
}

/// Draw `kind` for `doc`, fitting the models afresh (automatic breakpoint) for the overlay.
/// `size` picks the histogram's size (default: the first point's).
pub fn plot(doc: &ResultDoc, kind: PlotKind, size: Option<u64>) -> Result<String> {
    let fits = fit::fit_points(&doc.points, Breakpoint::Auto, None);
    plot_with(doc, kind, size, &fits)
}

/// Draw `kind` for `doc` with the given fits overlaid (matched to series by pattern), e.g. the
/// fit stored in the document.
pub fn plot_with(
    doc: &ResultDoc,
    kind: PlotKind,
    size: Option<u64>,
    fits: &[FitSection],
) -> Result<String> {
    if doc.points.is_empty() {
        return Err(Error::Invalid(
            "the document has no measured points to plot".into(),
        ));
    }
    match kind {
        PlotKind::Latency => latency(doc, fits),
        PlotKind::Bandwidth => bandwidth(doc, fits),
        PlotKind::Histogram => histogram(doc, size),
        PlotKind::Signature => signature(doc),
    }
}

// ---------------------------------------------------------------------------------------
// Layout and axes

const WIDTH: f64 = 860.0;
const HEIGHT: f64 = 540.0;
const LEFT: f64 = 90.0;
const RIGHT: f64 = 30.0;
const TOP: f64 = 56.0;
const BOTTOM: f64 = 84.0;
const COLORS: [&str; 6] = [
    "#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf",
];
const FIT_COLORS: [&str; 3] = ["#444444", "#8c564b", "#e377c2"];

/// How an axis maps values to pixels and where its ticks go.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Scale {
    /// Linear.
    Linear,
    /// Log, decade ticks (times, rates).
    Log10,
    /// Log, power-of-two ticks labelled with K/M/G (sizes).
    Log2Bytes,
}

#[derive(Debug, Clone, Copy)]
struct Axis {
    lo: f64,
    hi: f64,
    scale: Scale,
    px0: f64,
    px1: f64,
}

impl Axis {
    fn t(&self, v: f64) -> f64 {
        match self.scale {
            Scale::Linear => (v - self.lo) / (self.hi - self.lo),
            Scale::Log10 | Scale::Log2Bytes => {
                (v.ln() - self.lo.ln()) / (self.hi.ln() - self.lo.ln())
            }
        }
    }

    fn px(&self, v: f64) -> f64 {
        self.px0 + self.t(v) * (self.px1 - self.px0)
    }

    fn contains(&self, v: f64) -> bool {
        let lo = self.lo.min(self.hi);
        let hi = self.lo.max(self.hi);
        v.is_finite() && v >= lo * (1.0 - 1e-9) && v <= hi * (1.0 + 1e-9)
    }

    /// A log axis over `[min, max]` (positive), widened to whole decades or powers of two.
    fn log(min: f64, max: f64, scale: Scale, px0: f64, px1: f64) -> Axis {
        let (lo, hi) = match scale {
            Scale::Log2Bytes => {
                let lo = 2f64.powf(min.log2().floor());
                let mut hi = 2f64.powf(max.log2().ceil());
                if hi <= lo {
                    hi = lo * 2.0;
                }
                (lo, hi)
            }
            _ => {
                let lo = 10f64.powf((min.log10() + 1e-12).floor());
                let mut hi = 10f64.powf((max.log10() - 1e-12).ceil());
                if hi <= lo {
                    hi = lo * 10.0;
                }
                (lo, hi)
            }
        };
        Axis {
            lo,
            hi,
            scale,
            px0,
            px1,
        }
    }

    /// A linear axis over `[min, max]` rounded outward to its tick step.
    fn linear(min: f64, max: f64, px0: f64, px1: f64) -> Axis {
        let (min, max) = if max > min {
            (min, max)
        } else {
            let d = if min != 0.0 { min.abs() * 0.01 } else { 1.0 };
            (min - d, max + d)
        };
        let step = nice_width((max - min) / 6.0);
        Axis {
            lo: (min / step).floor() * step,
            hi: (max / step).ceil() * step,
            scale: Scale::Linear,
            px0,
            px1,
        }
    }

    /// Major ticks with labels, and unlabelled minor ticks.
    fn ticks(&self) -> (Vec<(f64, String)>, Vec<f64>) {
        let mut major = Vec::new();
        let mut minor = Vec::new();
        match self.scale {
            Scale::Linear => {
                let step = nice_width((self.hi - self.lo) / 6.0);
                let decimals = (-step.log10().floor()).max(0.0) as usize;
                let first = (self.lo / step).round() as i64;
                let last = (self.hi / step).round() as i64;
                for k in first..=last {
                    let v = k as f64 * step;
                    major.push((v, format!("{v:.decimals$}")));
                }
            }
            Scale::Log2Bytes => {
                let k0 = self.lo.log2().round() as i32;
                let k1 = self.hi.log2().round() as i32;
                let span = (k1 - k0).max(1);
                let step = [1, 2, 3, 4, 5, 6, 8, 10]
                    .into_iter()
                    .find(|s| span / s <= 11)
                    .unwrap_or(10);
                for k in k0..=k1 {
                    let v = 2f64.powi(k);
                    if (k - k0) % step == 0 {
                        major.push((v, bytes_label(k)));
                    } else {
                        minor.push(v);
                    }
                }
            }
            Scale::Log10 => {
                let k0 = self.lo.log10().round() as i32;
                let k1 = self.hi.log10().round() as i32;
                let few = k1 - k0 <= 2;
                for k in k0..=k1 {
                    major.push((10f64.powi(k), decade_label(1, k)));
                    if k == k1 {
                        break;
                    }
                    for m in 2..=9 {
                        let v = f64::from(m) * 10f64.powi(k);
                        if few && (m == 2 || m == 5) {
                            major.push((v, decade_label(m, k)));
                        } else {
                            minor.push(v);
                        }
                    }
                }
            }
        }
        (major, minor)
    }
}

/// `m x 10^k` written exactly: `500`, `0.02`, `1e6`.
fn decade_label(m: i32, k: i32) -> String {
    if (0..6).contains(&k) {
        format!("{m}{}", "0".repeat(k as usize))
    } else if (-4..0).contains(&k) {
        format!("0.{}{m}", "0".repeat((-k - 1) as usize))
    } else {
        format!("{m}e{k}")
    }
}

/// `2^k` bytes with binary suffixes: `1`, `512`, `4K`, `1M`, `2G`.
fn bytes_label(k: i32) -> String {
    match k {
        ..=9 => format!("{}", 1u64 << k.max(0)),
        10..=19 => format!("{}K", 1u64 << (k - 10)),
        20..=29 => format!("{}M", 1u64 << (k - 20)),
        _ => format!("{}G", 1u64 << (k - 30).min(62)),
    }
}

/// Size in bytes for legends: `8 B`, `4 KiB`.
fn size_text(n: u64) -> String {
    crate::spec::format_size(n)
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// A number in a label or caption.
fn num(x: f64) -> String {
    text(x, Style::Label)
}

/// An SVG document under construction.
struct Svg {
    s: String,
}

impl Svg {
    /// Open the group of the `i`-th series (pattern `pattern`); its colour.
    fn open_series(&mut self, i: usize, pattern: &str) -> &'static str {
        let color = COLORS[i % COLORS.len()];
        let _ = writeln!(
            self.s,
            r#"<g class="series" data-pattern="{}" fill="{color}" stroke="{color}">"#,
            esc(pattern)
        );
        color
    }

    fn new(title: &str, subtitle: &str) -> Svg {
        let mut s = String::with_capacity(16 * 1024);
        let _ = writeln!(
            s,
            r##"<?xml version="1.0" encoding="UTF-8"?>
<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" font-family="sans-serif" font-size="13">
<title>{}</title>
<rect class="background" x="0" y="0" width="{WIDTH}" height="{HEIGHT}" fill="white"/>
<text class="title" x="{}" y="24" text-anchor="middle" font-size="16" font-weight="bold">{}</text>
<text class="subtitle" x="{}" y="42" text-anchor="middle" font-size="12" fill="#555555">{}</text>"##,
            esc(title),
            WIDTH / 2.0,
            esc(title),
            WIDTH / 2.0,
            esc(subtitle)
        );
        Svg { s }
    }

    fn raw(&mut self, line: &str) {
        self.s.push_str(line);
        self.s.push('\n');
    }

    fn text(&mut self, class: &str, x: f64, y: f64, anchor: &str, extra: &str, body: &str) {
        let _ = writeln!(
            self.s,
            r#"<text class="{class}" x="{x:.1}" y="{y:.1}" text-anchor="{anchor}"{extra}>{}</text>"#,
            esc(body)
        );
    }

    /// Frame, grid, ticks, tick labels and axis titles.
    fn axes(&mut self, x: &Axis, y: &Axis, x_title: &str, y_title: &str) {
        let (l, r, t, b) = (LEFT, WIDTH - RIGHT, TOP, HEIGHT - BOTTOM);
        let (xmaj, xmin) = x.ticks();
        let (ymaj, ymin) = y.ticks();
        self.raw(r##"<g class="grid" stroke="#e4e4e4" stroke-width="1">"##);
        for (v, _) in &xmaj {
            let p = x.px(*v);
            let _ = writeln!(
                self.s,
                r#"<line x1="{p:.1}" y1="{t:.1}" x2="{p:.1}" y2="{b:.1}"/>"#
            );
        }
        for (v, _) in &ymaj {
            let p = y.px(*v);
            let _ = writeln!(
                self.s,
                r#"<line x1="{l:.1}" y1="{p:.1}" x2="{r:.1}" y2="{p:.1}"/>"#
            );
        }
        self.raw("</g>");
        self.raw(r#"<g class="axis x-axis" stroke="black">"#);
        let _ = writeln!(
            self.s,
            r#"<line class="axis-line" x1="{l:.1}" y1="{b:.1}" x2="{r:.1}" y2="{b:.1}"/>"#
        );
        for (v, label) in &xmaj {
            let p = x.px(*v);
            let _ = writeln!(
                self.s,
                r#"<line class="tick" x1="{p:.1}" y1="{b:.1}" x2="{p:.1}" y2="{:.1}"/>"#,
                b + 6.0
            );
            self.text(
                "tick-label",
                p,
                b + 21.0,
                "middle",
                r#" stroke="none""#,
                label,
            );
        }
        for v in &xmin {
            let p = x.px(*v);
            let _ = writeln!(
                self.s,
                r#"<line class="minor-tick" x1="{p:.1}" y1="{b:.1}" x2="{p:.1}" y2="{:.1}"/>"#,
                b + 3.0
            );
        }
        self.text(
            "axis-title",
            (l + r) / 2.0,
            b + 46.0,
            "middle",
            r#" stroke="none" font-size="14""#,
            x_title,
        );
        self.raw("</g>");
        self.raw(r#"<g class="axis y-axis" stroke="black">"#);
        let _ = writeln!(
            self.s,
            r#"<line class="axis-line" x1="{l:.1}" y1="{t:.1}" x2="{l:.1}" y2="{b:.1}"/>"#
        );
        for (v, label) in &ymaj {
            let p = y.px(*v);
            let _ = writeln!(
                self.s,
                r#"<line class="tick" x1="{:.1}" y1="{p:.1}" x2="{l:.1}" y2="{p:.1}"/>"#,
                l - 6.0
            );
            self.text(
                "tick-label",
                l - 9.0,
                p + 4.5,
                "end",
                r#" stroke="none""#,
                label,
            );
        }
        for v in &ymin {
            let p = y.px(*v);
            let _ = writeln!(
                self.s,
                r#"<line class="minor-tick" x1="{:.1}" y1="{p:.1}" x2="{l:.1}" y2="{p:.1}"/>"#,
                l - 3.0
            );
        }
        let cy = (t + b) / 2.0;
        let _ = writeln!(
            self.s,
            r#"<text class="axis-title" x="22" y="{cy:.1}" text-anchor="middle" stroke="none" font-size="14" transform="rotate(-90 22 {cy:.1})">{}</text>"#,
            esc(y_title)
        );
        self.raw("</g>");
        let _ = writeln!(
            self.s,
            r#"<rect class="frame" x="{l:.1}" y="{t:.1}" width="{:.1}" height="{:.1}" fill="none" stroke="black"/>"#,
            r - l,
            b - t
        );
    }

    fn caption(&mut self, lines: &[String]) {
        for (i, c) in lines.iter().enumerate() {
            self.text(
                "caption",
                LEFT,
                HEIGHT - 14.0 - 15.0 * (lines.len() - 1 - i) as f64,
                "start",
                r##" font-size="11" fill="#555555""##,
                c,
            );
        }
    }

    /// A legend box in the upper left (or right) of the plot area.
    fn legend(&mut self, entries: &[(String, String, &str)], right: bool) {
        if entries.is_empty() {
            return;
        }
        let w = entries
            .iter()
            .map(|e| e.1.chars().count())
            .max()
            .unwrap_or(0) as f64
            * 6.8
            + 44.0;
        let h = 8.0 + 18.0 * entries.len() as f64;
        let x = if right {
            WIDTH - RIGHT - 10.0 - w
        } else {
            LEFT + 10.0
        };
        let y = TOP + 10.0;
        self.raw(r#"<g class="legend">"#);
        let _ = writeln!(
            self.s,
            r##"<rect x="{x:.1}" y="{y:.1}" width="{w:.1}" height="{h:.1}" fill="white" fill-opacity="0.9" stroke="#999999"/>"##
        );
        for (i, (color, label, style)) in entries.iter().enumerate() {
            let cy = y + 14.0 + 18.0 * i as f64;
            match *style {
                "marker" => {
                    let _ = writeln!(
                        self.s,
                        r#"<circle cx="{:.1}" cy="{cy:.1}" r="4" fill="{color}"/>"#,
                        x + 16.0
                    );
                }
                "dash" => {
                    let _ = writeln!(
                        self.s,
                        r#"<line x1="{:.1}" y1="{cy:.1}" x2="{:.1}" y2="{cy:.1}" stroke="{color}" stroke-width="2" stroke-dasharray="6 4"/>"#,
                        x + 4.0,
                        x + 28.0
                    );
                }
                "dot" => {
                    let _ = writeln!(
                        self.s,
                        r#"<line x1="{:.1}" y1="{cy:.1}" x2="{:.1}" y2="{cy:.1}" stroke="{color}" stroke-width="1.5" stroke-dasharray="2 3"/>"#,
                        x + 4.0,
                        x + 28.0
                    );
                }
                _ => {
                    let _ = writeln!(
                        self.s,
                        r#"<line x1="{:.1}" y1="{cy:.1}" x2="{:.1}" y2="{cy:.1}" stroke="{color}" stroke-width="2"/>"#,
                        x + 4.0,
                        x + 28.0
                    );
                }
            }
            self.text(
                "legend-label",
                x + 36.0,
                cy + 4.5,
                "start",
                r#" font-size="12""#,
                label,
            );
        }
        self.raw("</g>");
    }

    fn finish(mut self) -> String {
        self.raw("</svg>");
        self.s
    }
}

fn plot_x() -> (f64, f64) {
    (LEFT, WIDTH - RIGHT)
}

fn plot_y() -> (f64, f64) {
    (HEIGHT - BOTTOM, TOP)
}

fn subtitle(doc: &ResultDoc) -> String {
    let env = &doc.environment;
    let mut s = format!("backend {}, {} ranks", env.backend, env.ranks);
    if let Some(h) = &env.hostname {
        let _ = write!(s, ", host {h}");
    }
    let _ = write!(s, ", commbench {}", doc.tool_version);
    s
}

/// The patterns in order of first appearance, each with its points sorted by size.
fn series(doc: &ResultDoc) -> Vec<(String, Vec<&Point>)> {
    let mut out: Vec<(String, Vec<&Point>)> = Vec::new();
    for p in &doc.points {
        match out.iter_mut().find(|(n, _)| *n == p.pattern) {
            Some((_, v)) => v.push(p),
            None => out.push((p.pattern.clone(), vec![p])),
        }
    }
    for (_, v) in &mut out {
        v.sort_by_key(|p| p.size);
    }
    out
}

fn path_of(points: &[(f64, f64)]) -> String {
    let mut d = String::new();
    for (i, (x, y)) in points.iter().enumerate() {
        let _ = write!(d, "{}{x:.2},{y:.2}", if i == 0 { "M" } else { " L" });
    }
    d
}

/// The fit's regimes to draw: the segments, or the whole range as one.
fn regimes(f: &FitSection) -> Vec<(String, HockneySegment)> {
    let h = &f.hockney;
    let lo = f.points.first().map_or(1, |p| p.size);
    let hi = f.points.last().map_or(1, |p| p.size);
    if h.segments.len() == 2 {
        let bp = h.breakpoint_bytes.unwrap_or(h.segments[1].from_bytes);
        vec![
            (format!("n < {}", size_text(bp)), h.segments[0].clone()),
            (format!("n >= {}", size_text(bp)), h.segments[1].clone()),
        ]
    } else {
        let mut w = h.whole.clone();
        w.from_bytes = lo;
        w.to_bytes = hi;
        vec![("all n".to_string(), w)]
    }
}

/// A fitted regime to draw: its label, model samples `(n, t)` and parameters.
type Curve = (String, Vec<(f64, f64)>, HockneySegment);

/// Model samples `(n, t(n))` over a regime, log-spaced, positive times only.
fn model_samples(s: &HockneySegment) -> Vec<(f64, f64)> {
    let lo = (s.from_bytes.max(1)) as f64;
    let hi = (s.to_bytes.max(1)) as f64;
    let k = 64;
    (0..=k)
        .map(|i| {
            let n = if hi > lo {
                lo * (hi / lo).powf(f64::from(i) / f64::from(k))
            } else {
                lo
            };
            (n, s.time_us(n))
        })
        .filter(|(_, t)| *t > 0.0 && t.is_finite())
        .collect()
}

// ---------------------------------------------------------------------------------------
// The plots

fn latency(doc: &ResultDoc, fits: &[FitSection]) -> Result<String> {
    let ser = series(doc);
    let mut xs = Vec::new();
    let mut ys = Vec::new();
    let mut skipped_zero = 0;
    for (_, pts) in &ser {
        for p in pts {
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
    }
    if xs.is_empty() {
        return Err(Error::Invalid(
            "no point with a positive size and time to plot on log axes".into(),
        ));
    }
    let fit_curves: Vec<(String, Vec<Curve>)> = ser
        .iter()
        .filter_map(|(pat, _)| {
            let f = fits.iter().find(|f| f.pattern == *pat)?;
            Some((
                pat.clone(),
                regimes(f)
                    .into_iter()
                    .map(|(label, s)| (label, model_samples(&s), s))
                    .collect(),
            ))
        })
        .collect();
    let (xmin, xmax) = min_max(&xs);
    let (ymin, ymax) = min_max(&ys);
    let x = Axis::log(xmin, xmax, Scale::Log2Bytes, plot_x().0, plot_x().1);
    let y = Axis::log(ymin, ymax, Scale::Log10, plot_y().0, plot_y().1);
    let mut svg = Svg::new("One-way latency against message size", &subtitle(doc));
    svg.axes(
        &x,
        &y,
        "message size (bytes; K = 1024, M = 1024^2)",
        "median one-way time (us)",
    );
    let mut legend = Vec::new();
    for (i, (pat, pts)) in ser.iter().enumerate() {
        let color = svg.open_series(i, pat);
        for p in pts
            .iter()
            .filter(|p| p.size > 0 && p.one_way_us.median > 0.0)
        {
            let px = x.px(p.size as f64);
            let s = &p.one_way_us;
            let lo = if s.ci95_median.lo > 0.0 {
                s.ci95_median.lo
            } else {
                s.median
            };
            let hi = if s.ci95_median.hi.is_finite() {
                s.ci95_median.hi
            } else {
                s.median
            };
            let (plo, phi) = (y.px(lo), y.px(hi));
            let _ = writeln!(
                svg.s,
                r#"<path class="errorbar" d="M{px:.2},{plo:.2} L{px:.2},{phi:.2} M{:.2},{plo:.2} L{:.2},{plo:.2} M{:.2},{phi:.2} L{:.2},{phi:.2}" fill="none" stroke-width="1.2"/>"#,
                px - 4.0,
                px + 4.0,
                px - 4.0,
                px + 4.0
            );
            let _ = writeln!(
                svg.s,
                r#"<circle class="marker" cx="{px:.2}" cy="{:.2}" r="3.5" data-size="{}" data-median-us="{}"><title>{}: median {} us, 95% CI [{}, {}]</title></circle>"#,
                y.px(s.median),
                p.size,
                s.median,
                esc(&size_text(p.size)),
                num(s.median),
                num(lo),
                num(hi)
            );
        }
        svg.raw("</g>");
        legend.push((
            color.to_string(),
            format!("{pat}: median, 95% CI of the median"),
            "marker",
        ));
    }
    let mut fit_no = 0;
    for (pat, curves) in &fit_curves {
        for (label, pts, seg) in curves {
            let visible: Vec<(f64, f64)> = pts
                .iter()
                .filter(|(n, t)| x.contains(*n) && y.contains(*t))
                .map(|(n, t)| (x.px(*n), y.px(*t)))
                .collect();
            if visible.len() < 2 {
                continue;
            }
            let color = FIT_COLORS[fit_no % FIT_COLORS.len()];
            fit_no += 1;
            let _ = writeln!(
                svg.s,
                r#"<path class="fit" data-pattern="{}" data-regime="{}" d="{}" fill="none" stroke="{color}" stroke-width="1.8" stroke-dasharray="7 4"/>"#,
                esc(pat),
                esc(label),
                path_of(&visible)
            );
            legend.push((
                color.to_string(),
                format!(
                    "Hockney fit {label}: t0 = {} us, r_inf = {} MB/s",
                    num(seg.t0_us),
                    num(seg.r_inf_mb_s)
                ),
                "dash",
            ));
        }
    }
    svg.legend(&legend, false);
    let mut cap = vec![
        "Error bars: distribution-free 95% confidence interval of the median. Fit: t = t0 + n / r_inf, least squares on relative error (seed 002).".to_string(),
    ];
    if skipped_zero > 0 {
        cap.push(format!(
            "{skipped_zero} point(s) of size 0 not shown on the log axis."
        ));
    }
    svg.caption(&cap);
    Ok(svg.finish())
}

fn min_max(v: &[f64]) -> (f64, f64) {
    v.iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &x| {
            (a.min(x), b.max(x))
        })
}

fn rate(size: u64, t_us: f64) -> f64 {
    if t_us > 0.0 {
        size as f64 / t_us
    } else {
        0.0
    }
}

fn bandwidth(doc: &ResultDoc, fits: &[FitSection]) -> Result<String> {
    let ser = series(doc);
    let mut xs = Vec::new();
    let mut ys = vec![0.0];
    for (_, pts) in &ser {
        for p in pts.iter().filter(|p| p.size > 0) {
            let s = &p.one_way_us;
            xs.push(p.size as f64);
            ys.push(rate(p.size, s.median));
            if s.ci95_median.lo > 0.0 {
                ys.push(rate(p.size, s.ci95_median.lo));
            }
        }
    }
    if xs.is_empty() {
        return Err(Error::Invalid(
            "no point with a positive size: a bandwidth needs bytes".into(),
        ));
    }
    let (xmin, xmax) = min_max(&xs);
    let x = Axis::log(xmin, xmax, Scale::Log2Bytes, plot_x().0, plot_x().1);
    // Fit rate curves, and the asymptote of the largest regime.
    let mut curves = Vec::new();
    for (pat, _) in &ser {
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
    let (_, data_max) = min_max(&ys);
    let mut ymax = data_max;
    for (_, _, pts, _) in &curves {
        for (_, r) in pts {
            if *r <= 1.5 * data_max {
                ymax = ymax.max(*r);
            }
        }
    }
    let asymptote = curves
        .last()
        .map(|c| c.3.r_inf_mb_s)
        .filter(|r| *r > 0.0 && r.is_finite() && *r <= 1.3 * data_max);
    if let Some(r) = asymptote {
        ymax = ymax.max(r);
    }
    let y = Axis::linear(0.0, ymax * 1.05, plot_y().0, plot_y().1);
    let mut svg = Svg::new("Bandwidth against message size", &subtitle(doc));
    svg.axes(
        &x,
        &y,
        "message size (bytes; K = 1024, M = 1024^2)",
        "rate = size / median one-way time (MB/s, 10^6 B/s)",
    );
    let mut legend = Vec::new();
    for (i, (pat, pts)) in ser.iter().enumerate() {
        let color = svg.open_series(i, pat);
        let line: Vec<(f64, f64)> = pts
            .iter()
            .filter(|p| p.size > 0)
            .map(|p| (x.px(p.size as f64), y.px(rate(p.size, p.one_way_us.median))))
            .collect();
        let _ = writeln!(
            svg.s,
            r#"<path class="data-line" d="{}" fill="none" stroke-width="1.2"/>"#,
            path_of(&line)
        );
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
            let _ = writeln!(
                svg.s,
                r#"<circle class="marker" cx="{px:.2}" cy="{:.2}" r="3.5" data-size="{}" data-rate-mb-s="{r}"><title>{}: {} MB/s</title></circle>"#,
                y.px(r),
                p.size,
                esc(&size_text(p.size)),
                num(r)
            );
        }
        svg.raw("</g>");
        legend.push((
            color.to_string(),
            format!("{pat}: rate at the median"),
            "marker",
        ));
    }
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
        let _ = writeln!(
            svg.s,
            r#"<path class="fit" data-pattern="{}" data-regime="{}" d="{}" fill="none" stroke="{color}" stroke-width="1.8" stroke-dasharray="7 4"/>"#,
            esc(pat),
            esc(label),
            path_of(&visible)
        );
        legend.push((
            color.to_string(),
            format!(
                "model {label}: n / (t0 + n / r_inf), n_half = {} B",
                num(seg.n_half_bytes)
            ),
            "dash",
        ));
    }
    if let Some(r) = asymptote {
        let py = y.px(r);
        let _ = writeln!(
            svg.s,
            r##"<line class="asymptote" x1="{:.1}" y1="{py:.2}" x2="{:.1}" y2="{py:.2}" stroke="#888888" stroke-dasharray="2 3"/>"##,
            LEFT,
            WIDTH - RIGHT
        );
        // Named in the legend rather than beside the line, where the largest sizes' points sit.
        legend.push((
            "#888888".to_string(),
            format!("r_inf = {} MB/s (asymptote)", num(r)),
            "dot",
        ));
    }
    svg.legend(&legend, false);
    svg.caption(&[
        "Rates use the median one-way time; error bars from its 95% confidence interval. Model: seed 002 eq. 3.".to_string(),
    ]);
    Ok(svg.finish())
}

/// One-way times (us) of a point from its raw trials.
fn one_way_times(p: &Point) -> Vec<f64> {
    let per = 1000.0 * (p.npp.max(1) * p.trips_per_iteration.max(1)) as f64;
    let mut v: Vec<f64> = p.trial_ns.iter().map(|&t| t as f64 / per).collect();
    stats::sort_samples(&mut v);
    v
}

fn histogram(doc: &ResultDoc, size: Option<u64>) -> Result<String> {
    let p = match size {
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
    })?;
    let v = one_way_times(p);
    if v.is_empty() {
        return Err(Error::Invalid(format!(
            "size {} has no raw trial times to draw",
            p.size
        )));
    }
    let median = stats::median(&v).unwrap_or(p.one_way_us.median);
    let cut = p.filtered.cut_coef * median;
    let p99 = stats::quantile(&v, 0.99).unwrap_or(median);
    let vmin = v[0];
    let vmax = v[v.len() - 1];
    // The data up to their 99th percentile decide the range; the cut line joins it when it is
    // near (within the data's span again), otherwise it is marked off scale at the right edge
    // so that the distribution is not squashed into a corner.
    let mut data_hi = vmax.min(p99 + 0.05 * (p99 - vmin));
    if data_hi <= vmin {
        data_hi = vmin + vmin.abs().max(1e-3) * 0.02;
    }
    let upper = if cut <= data_hi + (data_hi - vmin) {
        data_hi.max(cut + 0.02 * (cut - vmin))
    } else {
        data_hi
    };
    let nbins = 60usize;
    let width = (upper - vmin) / nbins as f64;
    // Times above `upper` are off the plot; the last bar is closed on the right, so a time at
    // `upper` (which rounding may put at or past the last computed edge) is drawn in it.
    let shown = v.partition_point(|&t| t <= upper);
    let overflow = (v.len() - shown) as u64;
    let h = stats::histogram(v[..shown].iter().map(|&t| (t, 1)), vmin, width, nbins)
        .ok_or_else(|| Error::Invalid(format!("cannot bin the times of size {}", p.size)))?;
    let mut counts = h.counts;
    if let Some(last) = counts.last_mut() {
        *last += h.overflow;
    }
    let cmax = counts.iter().copied().max().unwrap_or(1).max(1) as f64;
    let x = Axis::linear(vmin, upper, plot_x().0, plot_x().1);
    let y = Axis::linear(0.0, cmax * 1.12, plot_y().0, plot_y().1);
    let mut svg = Svg::new(
        &format!(
            "Distribution of one-way times, {} of {}",
            p.pattern,
            size_text(p.size)
        ),
        &subtitle(doc),
    );
    svg.axes(&x, &y, "one-way time (us)", "trials per bin (count)");
    svg.raw(r##"<g class="bars" fill="#7aa6d8" stroke="#3b6ea8" stroke-width="0.6">"##);
    let base = y.px(0.0);
    for (k, &c) in counts.iter().enumerate() {
        if c == 0 {
            continue;
        }
        let x0 = x.px(vmin + k as f64 * width);
        let x1 = x.px(vmin + (k + 1) as f64 * width);
        let top = y.px(c as f64);
        let _ = writeln!(
            svg.s,
            r#"<rect class="bar" x="{x0:.2}" y="{top:.2}" width="{:.2}" height="{:.2}" data-count="{c}"/>"#,
            (x1 - x0).max(0.5),
            base - top
        );
    }
    svg.raw("</g>");
    let (t, b) = (TOP, HEIGHT - BOTTOM);
    for (class, at, color, label, dy) in [
        (
            "median-line",
            median,
            "#2ca02c",
            format!("median = {} us", num(median)),
            16.0,
        ),
        (
            "cut-line",
            cut,
            "#d62728",
            format!(
                "cut_coef x median = {} x {} = {} us",
                p.filtered.cut_coef,
                num(median),
                num(cut)
            ),
            32.0,
        ),
    ] {
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
        let anchor = if px > (LEFT + WIDTH - RIGHT) / 2.0 {
            ("end", px - 5.0)
        } else {
            ("start", px + 5.0)
        };
        svg.text(
            "annotation",
            anchor.1,
            t + dy,
            anchor.0,
            &format!(r#" font-size="12" fill="{color}""#),
            &label,
        );
    }
    let above_cut = v.iter().filter(|&&t| t > cut).count();
    let mut cap = vec![format!(
        "{} trials, npp = {}, {} bins of {} us; {} trial(s) above the cut (removed by the seed 000 sec. 3.4 filter).",
        v.len(),
        p.npp,
        nbins,
        num(width),
        above_cut
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

fn signature(doc: &ResultDoc) -> Result<String> {
    let ser = series(doc);
    let mut xs = Vec::new();
    let mut ys = Vec::new();
    for (_, pts) in &ser {
        for p in pts
            .iter()
            .filter(|p| p.size > 0 && p.one_way_us.median > 0.0)
        {
            xs.push(p.one_way_us.median);
            ys.push(rate(p.size, p.one_way_us.median));
        }
    }
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
        "transfer time = median one-way time (us)",
        "throughput (MB/s, 10^6 B/s)",
    );
    let mut legend = Vec::new();
    for (i, (pat, pts)) in ser.iter().enumerate() {
        let shown: Vec<&&Point> = pts
            .iter()
            .filter(|p| p.size > 0 && p.one_way_us.median > 0.0)
            .collect();
        let color = svg.open_series(i, pat);
        let line: Vec<(f64, f64)> = shown
            .iter()
            .map(|p| {
                (
                    x.px(p.one_way_us.median),
                    y.px(rate(p.size, p.one_way_us.median)),
                )
            })
            .collect();
        let _ = writeln!(
            svg.s,
            r#"<path class="data-line" d="{}" fill="none" stroke-width="1.2"/>"#,
            path_of(&line)
        );
        for (k, p) in shown.iter().enumerate() {
            let (px, py) = line[k];
            let _ = writeln!(
                svg.s,
                r#"<circle class="marker" cx="{px:.2}" cy="{py:.2}" r="3.5" data-size="{}"><title>{}: {} us, {} MB/s</title></circle>"#,
                p.size,
                esc(&size_text(p.size)),
                num(p.one_way_us.median),
                num(rate(p.size, p.one_way_us.median))
            );
            if k == 0 || k + 1 == shown.len() {
                svg.text(
                    "point-label",
                    px + 6.0,
                    py - 6.0,
                    "start",
                    r#" font-size="11" stroke="none""#,
                    &size_text(p.size),
                );
            }
        }
        svg.raw("</g>");
        legend.push((
            color.to_string(),
            format!("{pat} (labels: message size)"),
            "marker",
        ));
    }
    svg.legend(&legend, false);
    svg.caption(&["NetPIPE's signature graph: each point is one message size; the curve's knee shows the latency, its top the bandwidth.".to_string()]);
    Ok(svg.finish())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::analysis::testkit::{doc, point, point_of, sweep};

    /// Minimal XML well-formedness check: balanced tags, quoted attributes, one root.
    pub(crate) fn well_formed(s: &str) -> std::result::Result<(), String> {
        let mut stack: Vec<String> = Vec::new();
        let mut rest = s;
        let mut roots = 0;
        while let Some(i) = rest.find('<') {
            let text = &rest[..i];
            if text.contains('>') {
                return Err(format!("stray > in {text:?}"));
            }
            if let Some(a) = text.find('&') {
                let ent = &text[a..];
                if !["&amp;", "&lt;", "&gt;", "&quot;", "&apos;"]
                    .iter()
                    .any(|e| ent.starts_with(e))
                {
                    return Err(format!("bad entity in {text:?}"));
                }
            }
            rest = &rest[i..];
            let end = rest.find('>').ok_or("unclosed tag")?;
            let tag = &rest[1..end];
            rest = &rest[end + 1..];
            if tag.starts_with('?') || tag.starts_with('!') {
                continue;
            }
            if let Some(name) = tag.strip_prefix('/') {
                let open = stack.pop().ok_or(format!("close {name} without open"))?;
                if open != name.trim() {
                    return Err(format!("<{open}> closed by </{name}>"));
                }
                continue;
            }
            let name: String = tag
                .chars()
                .take_while(|c| !c.is_whitespace() && *c != '/')
                .collect();
            if tag.matches('"').count() % 2 != 0 {
                return Err(format!("unbalanced quotes in <{tag}>"));
            }
            if stack.is_empty() {
                roots += 1;
            }
            if !tag.ends_with('/') {
                stack.push(name);
            }
        }
        if !stack.is_empty() {
            return Err(format!("unclosed {stack:?}"));
        }
        if roots != 1 {
            return Err(format!("{roots} root elements"));
        }
        Ok(())
    }

    fn count(s: &str, needle: &str) -> usize {
        s.matches(needle).count()
    }

    fn tick_labels(s: &str) -> Vec<String> {
        s.split(r#"<text class="tick-label""#)
            .skip(1)
            .filter_map(|t| {
                let a = t.find('>')? + 1;
                let b = t.find("</text>")?;
                Some(t[a..b].to_string())
            })
            .collect()
    }

    #[test]
    fn latency_plot() {
        let d = sweep(1.0);
        let s = plot(&d, PlotKind::Latency, None).unwrap();
        well_formed(&s).unwrap();
        assert!(s.contains(r#"font-family="sans-serif""#));
        assert_eq!(count(&s, r#"class="marker""#), 21);
        assert_eq!(count(&s, r#"class="errorbar""#), 21);
        // Two regimes found: two fit lines.
        assert_eq!(count(&s, r#"class="fit""#), 2, "{s}");
        assert!(s.contains("median one-way time (us)"));
        assert!(s.contains("message size (bytes"));
        let labels = tick_labels(&s);
        for l in ["1", "1K", "1M", "10", "100"] {
            assert!(labels.iter().any(|x| x == l), "{l} not in {labels:?}");
        }
        assert!(s.contains(r#"class="axis x-axis""#) && s.contains(r#"class="axis y-axis""#));
        assert!(
            !s.contains("NaN") && !s.contains("=\"inf") && !s.contains("=\"-inf"),
            "{s}"
        );
    }

    #[test]
    fn bandwidth_plot() {
        let d = sweep(1.0);
        let s = plot(&d, PlotKind::Bandwidth, None).unwrap();
        well_formed(&s).unwrap();
        assert_eq!(count(&s, r#"class="marker""#), 21);
        assert_eq!(count(&s, r#"class="data-line""#), 1);
        assert!(count(&s, r#"class="fit""#) >= 1);
        assert!(s.contains("(MB/s, 10^6 B/s)"));
        assert!(s.contains(r#"class="asymptote""#) && s.contains("r_inf = "));
        let labels = tick_labels(&s);
        assert!(labels.iter().any(|x| x == "0"), "{labels:?}");
        assert!(!s.contains("NaN"));
    }

    #[test]
    fn histogram_plot() {
        let mut trials = point("pingpong", 8, 2.0, 0.2, 1000, 3).trial_ns;
        // Outliers beyond the cut.
        trials.extend([20_000, 30_000, 400_000]);
        let p = point_of("pingpong", 8, trials);
        let d = doc(vec![p, point("pingpong", 64, 3.0, 0.1, 100, 4)]);
        let s = plot(&d, PlotKind::Histogram, Some(8)).unwrap();
        well_formed(&s).unwrap();
        assert!(count(&s, r#"class="bar""#) > 5);
        assert_eq!(count(&s, r#"class="median-line""#), 1);
        assert_eq!(count(&s, r#"class="cut-line""#), 1);
        assert!(s.contains("one-way time (us)") && s.contains("cut_coef x median"));
        assert!(s.contains("3 trial(s) above the cut"), "{s}");
        assert!(s.contains("beyond the right edge"));
        let total: u64 = s
            .split("data-count=\"")
            .skip(1)
            .map(|t| t[..t.find('"').unwrap()].parse::<u64>().unwrap())
            .sum();
        assert_eq!(total, 1000, "the 3 outliers are beyond the right edge");
        // Default size: the first point; an unknown size is an error naming the sizes.
        assert!(plot(&d, PlotKind::Histogram, None).unwrap().contains("8 B"));
        let e = plot(&d, PlotKind::Histogram, Some(5))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("no point of size 5") && e.contains("8, 64"),
            "{e}"
        );
    }

    #[test]
    fn signature_plot() {
        let d = sweep(1.0);
        let s = plot(&d, PlotKind::Signature, None).unwrap();
        well_formed(&s).unwrap();
        assert_eq!(count(&s, r#"class="marker""#), 21);
        assert!(s.contains("transfer time") && s.contains("throughput (MB/s"));
        assert_eq!(count(&s, r#"class="point-label""#), 2);
    }

    #[test]
    fn size_zero_and_errors() {
        let d = doc(vec![
            point("pingpong", 0, 1.0, 0.1, 50, 1),
            point("pingpong", 8, 1.1, 0.1, 50, 1),
            point("pingpong", 64, 1.3, 0.1, 50, 1),
        ]);
        let s = plot(&d, PlotKind::Latency, None).unwrap();
        well_formed(&s).unwrap();
        assert_eq!(count(&s, r#"class="marker""#), 2);
        assert!(s.contains("size 0 not shown"));
        let only0 = doc(vec![point("pingpong", 0, 1.0, 0.1, 50, 1)]);
        assert!(plot(&only0, PlotKind::Latency, None).is_err());
        assert!(plot(&only0, PlotKind::Bandwidth, None).is_err());
        assert!(plot(&only0, PlotKind::Signature, None).is_err());
        assert!(plot(&only0, PlotKind::Histogram, None).is_ok());
        assert!(plot(&doc(vec![]), PlotKind::Latency, None).is_err());
        assert!("pie"
            .parse::<PlotKind>()
            .unwrap_err()
            .to_string()
            .contains("latency"));
        assert_eq!(
            "signature".parse::<PlotKind>().unwrap(),
            PlotKind::Signature
        );
    }

    #[test]
    fn two_patterns_two_series() {
        let mut pts: Vec<Point> = (0..8)
            .map(|k| point("pingpong", 1 << k, 1.0 + k as f64, 0.05, 51, 2))
            .collect();
        pts.extend((0..8).map(|k| point("exchange", 1 << k, 2.0 + k as f64, 0.05, 51, 3)));
        let s = plot(&doc(pts), PlotKind::Latency, None).unwrap();
        well_formed(&s).unwrap();
        assert_eq!(count(&s, r#"<g class="series""#), 2);
        assert_eq!(count(&s, r#"class="marker""#), 16);
        assert!(s.contains(r#"data-pattern="exchange""#));
    }

    /// Writes one SVG of each kind to $COMMBENCH_PLOT_DIR when set (for looking at them).
    #[test]
    fn write_examples() {
        let Some(dir) = std::env::var_os("COMMBENCH_PLOT_DIR") else {
            return;
        };
        let d = sweep(1.0);
        for (k, name) in [
            (PlotKind::Latency, "latency"),
            (PlotKind::Bandwidth, "bandwidth"),
            (PlotKind::Histogram, "histogram"),
            (PlotKind::Signature, "signature"),
        ] {
            let s = plot(&d, k, Some(1024)).unwrap();
            std::fs::write(std::path::Path::new(&dir).join(format!("{name}.svg")), s).unwrap();
        }
    }

    #[test]
    fn labels() {
        assert_eq!(decade_label(1, 0), "1");
        assert_eq!(decade_label(1, 3), "1000");
        assert_eq!(decade_label(5, -2), "0.05");
        assert_eq!(decade_label(1, 7), "1e7");
        assert_eq!(bytes_label(0), "1");
        assert_eq!(bytes_label(10), "1K");
        assert_eq!(bytes_label(22), "4M");
        assert!(well_formed("<a><b/></a>").is_ok());
        assert!(well_formed("<a><b></a>").is_err());
        assert!(well_formed("<a>x > y</a>").is_err());
    }
}
