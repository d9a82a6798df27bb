//! The fitted models as text: the `FITTED MODELS` section of a report (seed 002's Hockney
//! parameters per regime, seed 003's latency and bandwidth, and the points with the model's
//! time).

use crate::analysis::model::{FitSection, HockneySegment, Linear};
use crate::render::format::{text, Style};
use commbench_core::stats::Interval;
use std::fmt::Write;

fn segment_lines(out: &mut String, s: &HockneySegment, indent: &str) {
    let _ = writeln!(
        out,
        "{indent}r_inf  = {} +- {} MB/s      t0   = {} +- {} us",
        text(s.r_inf_mb_s, Style::Decimals(2)),
        text(s.se_r_inf_mb_s, Style::Decimals(2)),
        text(s.t0_us, Style::Decimals(4)),
        text(s.se_t0_us, Style::Decimals(4))
    );
    let _ = writeln!(
        out,
        "{indent}n_half = {} +- {} bytes   pi0  = {} per s",
        text(s.n_half_bytes, Style::Decimals(1)),
        text(s.se_n_half_bytes, Style::Decimals(1)),
        text(s.pi0_per_s, Style::Scientific)
    );
    let _ = writeln!(
        out,
        "{indent}r2 = {}   max error = {} us   points = {}",
        text(s.r2, Style::Decimals(6)),
        text(s.max_abs_err_us, Style::Decimals(4)),
        s.points
    );
}

/// Seed 002: the whole-range line, the breakpoint and each regime's line, and the notes.
fn hockney(out: &mut String, f: &FitSection) {
    let h = &f.hockney;
    let _ = writeln!(
        out,
        "  HOCKNEY t = t0 + n / r_inf (seed 002), whole range {}..{} bytes",
        f.points.first().map_or(0, |p| p.size),
        f.points.last().map_or(0, |p| p.size)
    );
    segment_lines(out, &h.whole, "    ");
    match h.breakpoint_bytes {
        Some(bp) => {
            let _ = writeln!(out, "  breakpoint = {bp} bytes ({})", h.breakpoint_source);
            for (name, s) in ["below", "at and above"].iter().zip(&h.segments) {
                let _ = writeln!(
                    out,
                    "  regime {name} the breakpoint: {}..{} bytes",
                    s.from_bytes, s.to_bytes
                );
                segment_lines(out, s, "    ");
            }
        }
        None => {
            let _ = writeln!(out, "  breakpoint = none");
        }
    }
    for n in &h.notes {
        let _ = writeln!(out, "  note: {n}");
    }
}

/// Seed 003 eq. 1-4: latency, bandwidth and, when known, cycles.
fn linear(out: &mut String, l: &Linear) {
    let _ = writeln!(out, "  LATENCY AND BANDWIDTH (seed 003 eq. 1-2)");
    let est = |out: &mut String, name: &str, unit: &str, v: f64, ci: Interval, n: usize| {
        let _ = write!(
            out,
            "    {name} = {} {unit}, 95% CI [{}, {}] ",
            text(v, Style::Decimals(n)),
            text(ci.lo, Style::Decimals(n)),
            text(ci.hi, Style::Decimals(n))
        );
    };
    est(out, "latency  ", "us", l.latency_us, l.ci95_latency_us, 4);
    let [a, b] = l.latency_sizes;
    let _ = writeln!(out, "(intercept over {a}..{b} bytes)");
    est(
        out,
        "bandwidth",
        "MB/s",
        l.bandwidth_mb_s,
        l.ci95_bandwidth_mb_s,
        2,
    );
    let [a, b] = l.bandwidth_sizes;
    let _ = writeln!(out, "(1/slope over {a}..{b} bytes)");
    if let Some(c) = &l.cycles {
        let _ = writeln!(
            out,
            "    cycles    = {} + {} n  (eq. 3-4, {} instructions/s; T_c = {} s/byte)",
            text(c.a_cycles, Style::Decimals(4)),
            text(c.b_cycles_per_byte, Style::Scientific),
            text(c.instructions_per_second, Style::Scientific),
            text(c.beta_s_per_byte, Style::Scientific)
        );
    }
}

/// Append the fit section of the text report.
pub fn fit_section(out: &mut String, f: &FitSection) {
    let _ = writeln!(
        out,
        "\nFITTED MODELS of {} ({}, least squares weighted {})",
        f.pattern, f.basis, f.weighting
    );
    hockney(out, f);
    linear(out, &f.linear);
    let _ = writeln!(
        out,
        "  POINTS: size (bytes), median one-way time (us), its 95% CI, model (us), relative error"
    );
    for p in &f.points {
        let ci = p.ci95_us.map_or_else(
            || "-".to_string(),
            |c| {
                format!(
                    "[{}, {}]",
                    text(c.lo, Style::Decimals(4)),
                    text(c.hi, Style::Decimals(4))
                )
            },
        );
        let _ = writeln!(
            out,
            "    {:>10} {:>12} {:>26} {:>12} {:>+9.4}",
            p.size,
            text(p.time_us, Style::Decimals(4)),
            ci,
            text(p.model_us, Style::Decimals(4)),
            (p.model_us - p.time_us) / p.time_us
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::fit::{fit, Breakpoint};

    #[test]
    fn sections_and_one_line_per_point() {
        // Eager below 1 KiB: 1 us + n / 500 MB/s; rendezvous from 1 KiB: 6 us + n / 4000.
        let sizes: Vec<u64> = (0..=12).map(|k| 1u64 << k).collect();
        let t: Vec<f64> = sizes
            .iter()
            .map(|&n| {
                if n < 1024 {
                    1.0 + n as f64 / 500.0
                } else {
                    6.0 + n as f64 / 4000.0
                }
            })
            .collect();
        let mut f = fit(&sizes, &t, Breakpoint::Auto, Some(5.6e9)).unwrap();
        f.pattern = "pingpong".into();
        let mut s = String::new();
        fit_section(&mut s, &f);
        assert!(
            s.contains("HOCKNEY") && s.contains("breakpoint = 1024 bytes (auto)"),
            "{s}"
        );
        assert!(s.contains("LATENCY AND BANDWIDTH") && s.contains("cycles"));
        assert_eq!(
            s.lines()
                .filter(|l| l.starts_with("    ") && l.trim_start().starts_with(char::is_numeric))
                .count(),
            sizes.len()
        );
    }
}
