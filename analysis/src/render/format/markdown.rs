//! A result document as Markdown: the run, one table row per point, and the fitted models.

use super::Renderer;
use crate::analysis::document::ResultDoc;
use crate::analysis::model::{FitSection, HockneySegment};
use crate::render::kind::fit::{linear_brief, NOT_IDENTIFIABLE};
use crate::render::number::{number, Style, MARKDOWN_UNDEFINED};
use crate::render::words::{by_pattern, fit_coverage, host_line, measured, CI_NOTE};
use commbench_core::transport::error::Result;
use std::fmt::Write;

/// A number for a table cell with `decimals` decimals (more below 1), `-` when undefined.
fn cell(x: f64, decimals: usize) -> String {
    number(x, Style::Decimals(decimals), MARKDOWN_UNDEFINED)
}

/// The document as Markdown: run description, one table row per point, the fitted models.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Markdown;

impl Renderer for Markdown {
    fn render(&self, doc: &ResultDoc, fits: &[FitSection]) -> Result<String> {
        let mut s = String::new();
        run(&mut s, doc);
        points(&mut s, doc);
        for f in fits {
            fit(&mut s, f, doc);
        }
        Ok(s)
    }
}

fn run(s: &mut String, doc: &ResultDoc) {
    let env = &doc.environment;
    let _ = writeln!(s, "# commbench {} result\n", doc.tool_version);
    let _ = writeln!(s, "- command: `{}`", doc.command.join(" "));
    let _ = writeln!(
        s,
        "- backend: {} ({} ranks, started by {})",
        env.backend, env.ranks, env.launcher
    );
    let _ = writeln!(s, "- {}", host_line(env, ": "));
    if let Some(t) = &doc.timer {
        let _ = writeln!(
            s,
            "- timer: {}, min_ov = {} ns, resolution = {} ns (Luecke et al. 2009 §3.1)",
            t.detail.clock, t.min_overhead_ns, t.resolution_ns
        );
    }
    let _ = writeln!(s, "- status: {}", doc.status);
    if let Some(e) = &doc.error {
        let _ = writeln!(s, "- error: {e}");
    }
}

fn points(s: &mut String, doc: &ResultDoc) {
    let _ = writeln!(s, "\n## Time per size (us)\n");
    for (pattern, group) in by_pattern(&doc.points) {
        let m = measured(&pattern, &group, doc);
        let _ = writeln!(
            s,
            "- {}: {} = {}; MB/s{} = 10^6 bytes/s at the median",
            m.cited, m.quantity, m.formula, m.rate_per
        );
        if let Some(v) = &m.verified {
            let _ = writeln!(s, "  ({v})");
        }
    }
    let _ = writeln!(s);
    let _ = writeln!(s, "| pattern | backend | size (B) | npp | trials | min | median | 95% CI of median | mean | p99 | max | MB/s at median | kept by cut |");
    let _ = writeln!(
        s,
        "|---|---|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|"
    );
    let mut warned = Vec::new();
    for p in &doc.points {
        let o = &p.one_way_us;
        for w in p.warnings() {
            warned.push(format!(
                "{} {} B over {}: {w}",
                p.pattern, p.size, p.backend
            ));
        }
        // A queue benchmark's point names its queue beside the pattern.
        let pattern = p.series();
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} | {} | [{}, {}] | {} | {} | {} | {} | {} / {} |",
            pattern,
            p.backend,
            p.size,
            p.npp,
            p.trials,
            cell(o.min, 4),
            cell(o.median, 4),
            cell(o.ci95_median.lo, 4),
            cell(o.ci95_median.hi, 4),
            cell(o.mean, 4),
            cell(o.p99, 4),
            cell(o.max, 4),
            cell(p.rate_mb_s.median, 2),
            p.filtered.kept,
            p.trials
        );
    }
    for w in warned {
        let _ = writeln!(s, "\n> Warning, {w}");
    }
    let _ = writeln!(s, "\n{CI_NOTE}.");
}

/// The Hockney rows: the whole range, then each regime either side of the breakpoint, each
/// with its size range.
fn hockney_rows(f: &FitSection) -> Vec<(String, String, &HockneySegment)> {
    let h = &f.hockney;
    let whole = format!(
        "{}..{}",
        f.points.first().map_or(0, |p| p.size),
        f.points.last().map_or(0, |p| p.size)
    );
    let mut rows = vec![("Hockney, whole range".to_string(), whole, &h.whole)];
    for (name, seg) in ["below", "at and above"].iter().zip(&h.segments) {
        rows.push((
            format!(
                "Hockney, {name} {} B",
                h.breakpoint_bytes.unwrap_or(seg.from_bytes)
            ),
            format!("{}..{}", seg.from_bytes, seg.to_bytes),
            seg,
        ));
    }
    rows
}

fn fit(s: &mut String, f: &FitSection, doc: &ResultDoc) {
    let h = &f.hockney;
    let _ = writeln!(
        s,
        "\n## Fitted models: {} ({}, least squares weighted {})\n",
        f.pattern, f.basis, f.weighting
    );
    if let Some(note) = fit_coverage(f, &doc.points) {
        let _ = writeln!(s, "The fit {note}.\n");
    }
    let _ = writeln!(
        s,
        "| model | sizes (B) | t0 (us) | r_inf (MB/s) | n_half (B) | pi0 (1/s) | r2 |"
    );
    let _ = writeln!(s, "|---|---|---:|---:|---:|---:|---:|");
    for (name, range, seg) in hockney_rows(f) {
        // A parameter that is not physical is named so; a line through two points has no
        // uncertainty and no meaningful r2.
        let pm = |x: f64, se: f64, d: usize, key: &str| {
            if !seg.is_identifiable(key) {
                NOT_IDENTIFIABLE.to_string()
            } else if seg.is_exact() || !se.is_finite() {
                cell(x, d)
            } else {
                format!("{} ± {}", cell(x, d), cell(se, d))
            }
        };
        let pi0 = if seg.is_identifiable("pi0_per_s") {
            cell(seg.pi0_per_s, 0)
        } else {
            NOT_IDENTIFIABLE.to_string()
        };
        let r2 = if seg.is_exact() {
            "exact (2 points)".to_string()
        } else {
            cell(seg.r2, 6)
        };
        let _ = writeln!(
            s,
            "| {name} | {range} | {} | {} | {} | {pi0} | {r2} |",
            pm(seg.t0_us, seg.se_t0_us, 4, "t0_us"),
            pm(seg.r_inf_mb_s, seg.se_r_inf_mb_s, 2, "r_inf_mb_s"),
            pm(seg.n_half_bytes, seg.se_n_half_bytes, 1, "n_half_bytes"),
        );
    }
    let l = &f.linear;
    let _ = writeln!(
        s,
        "\nBreakpoint: {} ({}). Latency and bandwidth (the Janus cluster report, 95% CIs): {}.",
        h.breakpoint_bytes
            .map_or("none".to_string(), |b| format!("{b} B")),
        h.breakpoint_source,
        linear_brief(l)
    );
    if let Some(c) = &l.cycles {
        let _ = writeln!(
            s,
            "Cycles (the Janus cluster report, eq. 4): {} + {} n at {:e} instructions/s.",
            cell(c.a_cycles, 2),
            c.b_cycles_per_byte,
            c.instructions_per_second
        );
    }
    for n in &h.notes {
        let _ = writeln!(s, "\n> {n}");
    }
    for w in f.warnings() {
        let _ = writeln!(s, "\n> ! {w}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::testkit::{doc, point};

    #[test]
    fn the_table_says_what_was_measured() {
        let mut pts: Vec<_> = (0..4)
            .map(|k| point("exchange", 1 << k, 2.0, 0.05, 51, 3))
            .collect();
        pts[1].backend = "tcp".into();
        let s = Markdown.render(&doc(pts), &[]).unwrap();
        assert!(
            s.contains("exchange (Hockney's COMMS2): time per exchange"),
            "{s}"
        );
        assert!(s.contains("| exchange | tcp | 2 |"), "{s}");
        assert!(s.contains(CI_NOTE), "{s}");
        assert!(!s.contains("seed 0") && !s.contains("One-way"), "{s}");
    }
}
