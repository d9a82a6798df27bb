//! The drawing surface of the plots: the layout, axes with their ticks and labels, and an SVG
//! document written element by element (text in the generic `sans-serif` family only).

use crate::render::number::{text, Style};
use commbench_core::stats::nice_width;
use std::fmt::Write;

pub(super) const WIDTH: f64 = 860.0;
pub(super) const HEIGHT: f64 = 540.0;
pub(super) const LEFT: f64 = 90.0;
pub(super) const RIGHT: f64 = 30.0;
pub(super) const TOP: f64 = 56.0;
pub(super) const BOTTOM: f64 = 84.0;
/// Where a caption starts, and the least margin text keeps from the canvas's right edge.
const CAPTION_X: f64 = LEFT;
const MARGIN: f64 = 20.0;
/// The baseline of a caption's first line, below the x axis's title, and the distance between
/// its lines.
const CAPTION_Y: f64 = HEIGHT - BOTTOM + 64.0;
const CAPTION_LEADING: f64 = 14.0;
/// A caption's font size.
const CAPTION_FONT: f64 = 11.0;
pub(super) const COLORS: [&str; 6] = [
    "#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf",
];
pub(super) const FIT_COLORS: [&str; 3] = ["#444444", "#8c564b", "#e377c2"];

/// How an axis maps values to pixels and where its ticks go.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Scale {
    /// Linear.
    Linear,
    /// Log, decade ticks (times, rates).
    Log10,
    /// Log, power-of-two ticks labelled with K/M/G (sizes).
    Log2Bytes,
}

#[derive(Debug, Clone, Copy)]
pub(super) struct Axis {
    pub(super) lo: f64,
    pub(super) hi: f64,
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

    pub(super) fn px(&self, v: f64) -> f64 {
        self.px0 + self.t(v) * (self.px1 - self.px0)
    }

    pub(super) fn contains(&self, v: f64) -> bool {
        let lo = self.lo.min(self.hi);
        let hi = self.lo.max(self.hi);
        v.is_finite() && v >= lo * (1.0 - 1e-9) && v <= hi * (1.0 + 1e-9)
    }

    /// A log axis over `[min, max]` (positive), widened to whole decades or powers of two.
    pub(super) fn log(min: f64, max: f64, scale: Scale, px0: f64, px1: f64) -> Axis {
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
    pub(super) fn linear(min: f64, max: f64, px0: f64, px1: f64) -> Axis {
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
                let decimals = (-step.log10().floor()).clamp(0.0, 20.0) as usize;
                let first = (self.lo / step).round() as i64;
                let last = (self.hi / step).round() as i64;
                // Ends beyond what the step counts (a step of 0 below the smallest float, ends
                // at infinity) give no ticks rather than billions.
                // Rounded to the nearest step, an end can fall beyond the axis: its tick
                // and label would stand outside the plot.
                let slack = step * 1e-9;
                let inside = |v: f64| v >= self.lo - slack && v <= self.hi + slack;
                if last.saturating_sub(first) <= 100 {
                    for k in first..=last {
                        let v = k as f64 * step;
                        if inside(v) {
                            major.push((v, format!("{v:.decimals$}")));
                        }
                    }
                }
            }
            Scale::Log2Bytes => {
                // Powers of two a float has (an end at 0 or infinity would count to i32::MAX).
                let k0 = self.lo.log2().round().clamp(-1100.0, 1100.0) as i32;
                let k1 = self.hi.log2().round().clamp(-1100.0, 1100.0) as i32;
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
                // Decades a float has (an end at 0 or infinity would count to i32::MAX).
                let k0 = self.lo.log10().round().clamp(-330.0, 330.0) as i32;
                let k1 = self.hi.log10().round().clamp(-330.0, 330.0) as i32;
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
pub(super) fn size_text(n: u64) -> String {
    crate::spec::format_size(n)
}

pub(super) fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// A number in a label or caption.
pub(super) fn num(x: f64) -> String {
    text(x, Style::Label)
}

/// The plot area's horizontal pixel range.
pub(super) fn plot_x() -> (f64, f64) {
    (LEFT, WIDTH - RIGHT)
}

/// The plot area's vertical pixel range, bottom first (values grow upward).
pub(super) fn plot_y() -> (f64, f64) {
    (HEIGHT - BOTTOM, TOP)
}

/// The `d` of a polyline through pixel points.
pub(super) fn path_of(points: &[(f64, f64)]) -> String {
    let mut d = String::new();
    for (i, (x, y)) in points.iter().enumerate() {
        let _ = write!(d, "{}{x:.2},{y:.2}", if i == 0 { "M" } else { " L" });
    }
    d
}

/// How a legend entry shows its series.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Key {
    /// A filled circle: measured points.
    Marker,
    /// A dashed line: a fitted model.
    Dash,
    /// A dotted line: an asymptote.
    Dot,
}

/// One legend entry: colour, label and key.
pub(super) struct Entry {
    pub(super) color: String,
    pub(super) label: String,
    pub(super) key: Key,
}

impl Entry {
    pub(super) fn new(color: &str, label: String, key: Key) -> Entry {
        Entry {
            color: color.to_string(),
            label,
            key,
        }
    }
}

/// Where an axis is drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Side {
    Bottom,
    Left,
}

/// The width the plots allow one character of text, in ems, where they wrap or place it: more
/// than the generic sans-serif faces' average (capitals and digits are 0.55 to 0.67 em, most
/// lower case letters less), so that wrapped text stays inside the canvas.
pub const CHAR_WIDTH_EM: f64 = 0.6;

/// How much wider bold text is, at most.
pub const BOLD_WIDTH: f64 = 1.1;

/// The width `text` is allowed at `font_size` (px), by [`CHAR_WIDTH_EM`].
pub(super) fn text_width(text: &str, font_size: f64) -> f64 {
    text.chars().count() as f64 * font_size * CHAR_WIDTH_EM
}

/// `text` in lines of at most `max_px` at `font_size`, broken at spaces; a word longer than a
/// line is broken where the line ends.
pub(super) fn wrap(text: &str, font_size: f64, max_px: f64) -> Vec<String> {
    let per_line = ((max_px / (font_size * CHAR_WIDTH_EM)).floor() as usize).max(1);
    let mut lines = Vec::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        let mut word: Vec<char> = word.chars().collect();
        let used = line.chars().count();
        if used > 0 && used + 1 + word.len() <= per_line {
            line.push(' ');
            line.extend(word);
            continue;
        }
        if used > 0 {
            lines.push(std::mem::take(&mut line));
        }
        while word.len() > per_line {
            lines.push(word.drain(..per_line).collect());
        }
        line.extend(word);
    }
    if !line.is_empty() || lines.is_empty() {
        lines.push(line);
    }
    lines
}

/// An SVG document under construction.
pub(super) struct Svg {
    pub(super) s: String,
    /// The canvas's width and height; the height grows to hold the caption.
    width: f64,
    height: f64,
    /// The height the document's header was written with.
    header_height: f64,
}

impl Svg {
    /// A document of the plots' size with its title and subtitle.
    pub(super) fn new(title: &str, subtitle: &str) -> Svg {
        Svg::sized(WIDTH, HEIGHT, title, subtitle)
    }

    /// A document of `width` x `height` with its title and subtitle.
    pub(super) fn sized(width: f64, height: f64, title: &str, subtitle: &str) -> Svg {
        let mut s = String::with_capacity(16 * 1024);
        let _ = writeln!(
            s,
            r##"<?xml version="1.0" encoding="UTF-8"?>
<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="13">
<title>{}</title>
<rect class="background" x="0" y="0" width="{width}" height="{height}" fill="white"/>
<text class="title" x="{}" y="24" text-anchor="middle" font-size="16" font-weight="bold">{}</text>
<text class="subtitle" x="{}" y="42" text-anchor="middle" font-size="12" fill="#555555">{}</text>"##,
            esc(title),
            width / 2.0,
            esc(title),
            width / 2.0,
            esc(subtitle)
        );
        Svg {
            s,
            width,
            height,
            header_height: height,
        }
    }

    /// Open the group of the `i`-th series (pattern `pattern`); its colour.
    pub(super) fn open_series(&mut self, i: usize, pattern: &str) -> &'static str {
        let color = COLORS[i % COLORS.len()];
        let _ = writeln!(
            self.s,
            r#"<g class="series" data-pattern="{}" fill="{color}" stroke="{color}">"#,
            esc(pattern)
        );
        color
    }

    pub(super) fn raw(&mut self, line: &str) {
        self.s.push_str(line);
        self.s.push('\n');
    }

    pub(super) fn text(
        &mut self,
        class: &str,
        x: f64,
        y: f64,
        anchor: &str,
        extra: &str,
        body: &str,
    ) {
        let _ = writeln!(
            self.s,
            r#"<text class="{class}" x="{x:.1}" y="{y:.1}" text-anchor="{anchor}"{extra}>{}</text>"#,
            esc(body)
        );
    }

    /// A line from `(x1, y1)` to `(x2, y2)`, with a class unless `class` is empty.
    fn line(&mut self, class: &str, (x1, y1, x2, y2): (f64, f64, f64, f64)) {
        let class = if class.is_empty() {
            String::new()
        } else {
            format!(r#"class="{class}" "#)
        };
        let _ = writeln!(
            self.s,
            r#"<line {class}x1="{x1:.1}" y1="{y1:.1}" x2="{x2:.1}" y2="{y2:.1}"/>"#
        );
    }

    /// A data point: a circle with its size, further `data` attributes and a tooltip.
    pub(super) fn marker(&mut self, (px, py): (f64, f64), size: u64, data: &str, title: &str) {
        let _ = writeln!(
            self.s,
            r#"<circle class="marker" cx="{px:.2}" cy="{py:.2}" r="3.5" data-size="{size}"{data}><title>{}</title></circle>"#,
            esc(title)
        );
    }

    /// The measured series as a line through its points.
    pub(super) fn data_line(&mut self, line: &[(f64, f64)]) {
        let _ = writeln!(
            self.s,
            r#"<path class="data-line" d="{}" fill="none" stroke-width="1.2"/>"#,
            path_of(line)
        );
    }

    /// A fitted model's dashed line through pixel points, for pattern `pattern`'s regime
    /// `regime`.
    pub(super) fn fit_line(
        &mut self,
        pattern: &str,
        regime: &str,
        line: &[(f64, f64)],
        color: &str,
    ) {
        let _ = writeln!(
            self.s,
            r#"<path class="fit" data-pattern="{}" data-regime="{}" d="{}" fill="none" stroke="{color}" stroke-width="1.8" stroke-dasharray="7 4"/>"#,
            esc(pattern),
            esc(regime),
            path_of(line)
        );
    }

    /// Frame, grid, ticks, tick labels and axis titles.
    pub(super) fn axes(&mut self, x: &Axis, y: &Axis, x_title: &str, y_title: &str) {
        let (l, r, t, b) = (LEFT, WIDTH - RIGHT, TOP, HEIGHT - BOTTOM);
        self.raw(r##"<g class="grid" stroke="#e4e4e4" stroke-width="1">"##);
        for (v, _) in x.ticks().0 {
            let p = x.px(v);
            self.line("", (p, t, p, b));
        }
        for (v, _) in y.ticks().0 {
            let p = y.px(v);
            self.line("", (l, p, r, p));
        }
        self.raw("</g>");
        self.axis(x, Side::Bottom, x_title);
        self.axis(y, Side::Left, y_title);
        let _ = writeln!(
            self.s,
            r#"<rect class="frame" x="{l:.1}" y="{t:.1}" width="{:.1}" height="{:.1}" fill="none" stroke="black"/>"#,
            r - l,
            b - t
        );
    }

    /// One axis: its line, ticks (major labelled), and title.
    fn axis(&mut self, a: &Axis, side: Side, title: &str) {
        let (l, r, t, b) = (LEFT, WIDTH - RIGHT, TOP, HEIGHT - BOTTOM);
        // A tick of length `len` at pixel `p`, pointing away from the plot.
        let tick = |p: f64, len: f64| match side {
            Side::Bottom => (p, b, p, b + len),
            Side::Left => (l - len, p, l, p),
        };
        let (major, minor) = a.ticks();
        match side {
            Side::Bottom => {
                self.raw(r#"<g class="axis x-axis" stroke="black">"#);
                self.line("axis-line", (l, b, r, b));
            }
            Side::Left => {
                self.raw(r#"<g class="axis y-axis" stroke="black">"#);
                self.line("axis-line", (l, t, l, b));
            }
        }
        for (v, label) in &major {
            let p = a.px(*v);
            self.line("tick", tick(p, 6.0));
            let (x, y, anchor) = match side {
                Side::Bottom => (p, b + 21.0, "middle"),
                Side::Left => (l - 9.0, p + 4.5, "end"),
            };
            self.text("tick-label", x, y, anchor, r#" stroke="none""#, label);
        }
        for v in &minor {
            self.line("minor-tick", tick(a.px(*v), 3.0));
        }
        match side {
            Side::Bottom => self.text(
                "axis-title",
                (l + r) / 2.0,
                b + 46.0,
                "middle",
                r#" stroke="none" font-size="14""#,
                title,
            ),
            Side::Left => {
                let cy = (t + b) / 2.0;
                let _ = writeln!(
                    self.s,
                    r#"<text class="axis-title" x="22" y="{cy:.1}" text-anchor="middle" stroke="none" font-size="14" transform="rotate(-90 22 {cy:.1})">{}</text>"#,
                    esc(title)
                );
            }
        }
        self.raw("</g>");
    }

    /// Caption paragraphs below the plot, each wrapped to the canvas's width.
    pub(super) fn caption(&mut self, paragraphs: &[String]) {
        self.caption_at(CAPTION_X, CAPTION_Y, paragraphs);
    }

    /// Caption paragraphs from `(x, y)` (the first baseline) down, each wrapped to the
    /// canvas's width; the canvas grows to hold them.
    pub(super) fn caption_at(&mut self, x: f64, y: f64, paragraphs: &[String]) {
        let max = self.width - x - MARGIN;
        let lines = paragraphs.iter().flat_map(|p| wrap(p, CAPTION_FONT, max));
        let mut baseline = y;
        for (i, line) in lines.enumerate() {
            baseline = y + CAPTION_LEADING * i as f64;
            let style = format!(r##" font-size="{CAPTION_FONT}" fill="#555555""##);
            self.text("caption", x, baseline, "start", &style, &line);
        }
        // Room below the last line for its descenders.
        self.height = self.height.max((baseline + 6.0).ceil());
    }

    /// A legend box in the upper left of the plot area.
    pub(super) fn legend(&mut self, entries: &[Entry]) {
        if entries.is_empty() {
            return;
        }
        let longest = entries.iter().map(|e| text_width(&e.label, 12.0));
        let w = longest.fold(0.0, f64::max) + 44.0;
        let h = 8.0 + 18.0 * entries.len() as f64;
        let (x, y) = (LEFT + 10.0, TOP + 10.0);
        self.raw(r#"<g class="legend">"#);
        let _ = writeln!(
            self.s,
            r##"<rect x="{x:.1}" y="{y:.1}" width="{w:.1}" height="{h:.1}" fill="white" fill-opacity="0.9" stroke="#999999"/>"##
        );
        for (i, e) in entries.iter().enumerate() {
            let cy = y + 14.0 + 18.0 * i as f64;
            let color = &e.color;
            let stroke = match e.key {
                Key::Marker => {
                    let _ = writeln!(
                        self.s,
                        r#"<circle cx="{:.1}" cy="{cy:.1}" r="4" fill="{color}"/>"#,
                        x + 16.0
                    );
                    None
                }
                Key::Dash => Some(r#"stroke-width="2" stroke-dasharray="6 4""#),
                Key::Dot => Some(r#"stroke-width="1.5" stroke-dasharray="2 3""#),
            };
            if let Some(stroke) = stroke {
                let _ = writeln!(
                    self.s,
                    r#"<line x1="{:.1}" y1="{cy:.1}" x2="{:.1}" y2="{cy:.1}" stroke="{color}" {stroke}/>"#,
                    x + 4.0,
                    x + 28.0
                );
            }
            let style = r#" font-size="12""#;
            self.text("legend-label", x + 36.0, cy + 4.5, "start", style, &e.label);
        }
        self.raw("</g>");
    }

    /// The finished document, its header given the height it grew to.
    pub(super) fn finish(mut self) -> String {
        self.raw("</svg>");
        if self.height != self.header_height {
            let (w, old, new) = (self.width, self.header_height, self.height);
            // The header's height attributes (the canvas's and its background's) and view
            // box; its title and subtitle are escaped, so hold no quote.
            let end = self.s.find("<text class=\"title\"").unwrap_or(0);
            let header = self.s[..end]
                .replace(&format!(r#"height="{old}""#), &format!(r#"height="{new}""#))
                .replace(
                    &format!(r#"viewBox="0 0 {w} {old}""#),
                    &format!(r#"viewBox="0 0 {w} {new}""#),
                );
            self.s.replace_range(..end, &header);
        }
        self.s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels() {
        assert_eq!(decade_label(1, 0), "1");
        assert_eq!(decade_label(1, 3), "1000");
        assert_eq!(decade_label(5, -2), "0.05");
        assert_eq!(decade_label(1, 7), "1e7");
        assert_eq!(bytes_label(0), "1");
        assert_eq!(bytes_label(10), "1K");
        assert_eq!(bytes_label(22), "4M");
    }

    #[test]
    fn wrapped_lines_fit_and_keep_every_word() {
        // 10 px a character at 10 px: 5 characters a line of 50 px.
        let per_char = 10.0 * CHAR_WIDTH_EM;
        let max = 5.0 * per_char;
        assert_eq!(wrap("ab cd ef", 10.0, max), ["ab cd", "ef"]);
        assert_eq!(wrap("abcdefghijk x", 10.0, max), ["abcde", "fghij", "k x"]);
        assert_eq!(wrap("", 10.0, max), [""]);
        let text = "Error bars: distribution-free 95% confidence interval of the median.";
        let lines = wrap(text, 11.0, 200.0);
        assert!(lines.len() > 1 && lines.iter().all(|l| text_width(l, 11.0) <= 200.0));
        assert_eq!(lines.join(" "), text);
    }
}
