//! The SVG format ([`Plot`]): plots of a result document, written by hand (no plotting crate).
//!
//! Nine kinds ([`PlotKind`]):
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
//! * `queue`: the median one-way time against the queue length on linear axes, one line per
//!   fraction of the pre-posted queue traversed (seed 004 Figures 3-5).
//! * `matrix`: an all-pairs document's heatmap of the median one-way time per cell, with the
//!   node effects and the histogram of the cells' robust z.
//! * `aggregate`, `message-rate`, `window`: pairs streaming at once (`bandwidth --pairs`): the
//!   aggregate bandwidth and message rate against size per number of pairs, and the window
//!   profile of a sweep of windows (`streams`).
//!
//! Text uses the generic `sans-serif` family only, so any renderer draws it with whatever font
//! it has; no font file is referenced. Sizes are labelled in bytes with binary K/M/G suffixes,
//! times in us, rates in MB/s. Size 0 cannot be placed on a log axis and is left out of the
//! log plots (a caption says so).

use super::Renderer;
use crate::analysis::document::ResultDoc;
use crate::analysis::model::{FitSection, HockneySegment};
use crate::analysis::point::Point;
use canvas::size_text;
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
    /// Median one-way time against queue length, one line per fraction traversed
    /// (Underwood & Brightwell's queue benchmarks).
    Queue,
    /// An all-pairs matrix at one size: heatmap, node effects, histogram of the robust z.
    Matrix,
    /// Pairs streaming at once: the aggregate bandwidth against size, per number of pairs.
    Aggregate,
    /// Pairs streaming at once: the aggregate message rate against size, per number of pairs.
    MessageRate,
    /// A sweep of windows: the rate against the window, per size.
    Window,
}

impl PlotKind {
    /// The names [`std::str::FromStr`] accepts.
    pub const NAMES: [&'static str; 9] = [
        "latency",
        "bandwidth",
        "histogram",
        "signature",
        "queue",
        "matrix",
        "aggregate",
        "message-rate",
        "window",
    ];
}

impl std::str::FromStr for PlotKind {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "latency" => Ok(PlotKind::Latency),
            "bandwidth" => Ok(PlotKind::Bandwidth),
            "histogram" => Ok(PlotKind::Histogram),
            "signature" => Ok(PlotKind::Signature),
            "queue" => Ok(PlotKind::Queue),
            "matrix" => Ok(PlotKind::Matrix),
            "aggregate" => Ok(PlotKind::Aggregate),
            "message-rate" => Ok(PlotKind::MessageRate),
            "window" => Ok(PlotKind::Window),
            _ => Err(Error::Config(format!(
                "unknown plot kind `{s}`: choose one of {}",
                PlotKind::NAMES.join(", ")
            ))),
        }
    }
}

/// An SVG plot of `kind`, the models of the fits it is given overlaid (matched to series by
/// pattern) where the kind draws them (latency, bandwidth).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Plot {
    /// Which plot.
    pub kind: PlotKind,
    /// The size a histogram or a matrix draws (default: the first measured).
    pub size: Option<u64>,
    /// What a matrix's colours show.
    pub colour: MatrixColour,
}

impl Plot {
    /// A plot of `kind`, at `size` where the kind draws one size (a matrix coloured by each
    /// cell's slowdown over its class).
    pub fn new(kind: PlotKind, size: Option<u64>) -> Plot {
        Plot {
            kind,
            size,
            colour: MatrixColour::default(),
        }
    }

    /// The same plot with a matrix coloured as `colour` says.
    pub fn colour(self, colour: MatrixColour) -> Plot {
        Plot { colour, ..self }
    }
}

impl Renderer for Plot {
    fn render(&self, doc: &ResultDoc, fits: &[FitSection]) -> Result<String> {
        let (kind, size) = (self.kind, self.size);
        match (kind, &doc.allpairs) {
            (PlotKind::Matrix, _) => return matrix::plot(doc, size, self.colour),
            (_, Some(_)) => {
                return Err(Error::Invalid(
                    "an all-pairs document holds a matrix, not points against size: only the \
                     matrix kind draws it"
                        .into(),
                ))
            }
            (_, None) => {}
        }
        if doc.points.is_empty() {
            return Err(Error::Invalid(
                "the document has no measured points to plot".into(),
            ));
        }
        match kind {
            PlotKind::Latency => latency::plot(doc, fits),
            PlotKind::Bandwidth => bandwidth::plot(doc, fits),
            PlotKind::Histogram => histogram::plot(doc, size),
            PlotKind::Signature => signature::plot(doc),
            PlotKind::Queue => queue::plot(doc),
            PlotKind::Matrix => matrix::plot(doc, size, self.colour),
            PlotKind::Aggregate => streams::aggregate(doc),
            PlotKind::MessageRate => streams::message_rate(doc),
            PlotKind::Window => streams::window(doc),
        }
    }
}

mod bandwidth;
mod canvas;
pub use canvas::{BOLD_WIDTH, CHAR_WIDTH_EM};
mod histogram;
mod latency;
mod matrix;
pub use matrix::MatrixColour;
mod queue;
mod signature;
mod streams;

/// A pattern's points, sorted by size.
type Series<'a> = (String, Vec<&'a Point>);

/// The time the document's points report, for axis labels: the pattern's (`one-way time`,
/// `time per exchange`, ...), or `time per message` when the document holds several patterns
/// that report different times.
fn time_noun(doc: &ResultDoc) -> &'static str {
    let mut nouns = doc
        .points
        .iter()
        .map(|p| crate::render::words::time_noun(&p.pattern));
    let first = nouns.next().unwrap_or("time per message");
    if nouns.all(|n| n == first) {
        first
    } else {
        "time per message"
    }
}

/// Backend, ranks, host and version under the title.
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
fn series(doc: &ResultDoc) -> Vec<Series<'_>> {
    let mut out: Vec<Series<'_>> = Vec::new();
    for p in &doc.points {
        let g = p.group();
        match out.iter_mut().find(|(n, _)| *n == g) {
            Some((_, v)) => v.push(p),
            None => out.push((g, vec![p])),
        }
    }
    for (_, v) in &mut out {
        v.sort_by_key(|p| p.size);
    }
    out
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

/// The smallest and largest of `v`.
fn min_max(v: &[f64]) -> (f64, f64) {
    v.iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &x| {
            (a.min(x), b.max(x))
        })
}

/// `size / t_us` in MB/s; 0 for a time that is not positive.
fn rate(size: u64, t_us: f64) -> f64 {
    if t_us > 0.0 {
        size as f64 / t_us
    } else {
        0.0
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::analysis::fit::{fit_points, Breakpoint};
    use crate::analysis::testkit::{doc, point, point_of, sweep};

    /// `kind` of `doc` at `size`, with the models fitted afresh (automatic breakpoint).
    fn plot(doc: &ResultDoc, kind: PlotKind, size: Option<u64>) -> Result<String> {
        let fits = fit_points(&doc.points, Breakpoint::Auto, None);
        Plot::new(kind, size).render(doc, &fits)
    }

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
        // Two patterns whose times differ: the axis names what they share.
        assert!(s.contains("median time per message (us)"), "{s}");
    }

    #[test]
    fn axes_name_the_time_of_the_pattern() {
        let ex: Vec<Point> = (0..8)
            .map(|k| point("exchange", 1 << k, 2.0 + k as f64, 0.05, 51, 3))
            .collect();
        let d = doc(ex);
        let s = plot(&d, PlotKind::Latency, None).unwrap();
        assert!(s.contains("median time per exchange (us)"), "{s}");
        assert!(!s.contains("one-way") && !s.contains("seed 0"), "{s}");
        let s = plot(&d, PlotKind::Histogram, None).unwrap();
        assert!(s.contains(">time per exchange (us)<"), "{s}");
        assert!(s.contains("Luecke et al. 2009"), "{s}");
        let s = plot(&d, PlotKind::Bandwidth, None).unwrap();
        assert!(
            s.contains("median time per exchange") && !s.contains("seed 0"),
            "{s}"
        );
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
    fn well_formed_checks() {
        assert!(well_formed("<a><b/></a>").is_ok());
        assert!(well_formed("<a><b></a>").is_err());
        assert!(well_formed("<a>x > y</a>").is_err());
    }
}
