//! The fitted models as text: the `FITTED MODELS` section of a report (Hockney's COMMS1
//! parameters per regime (seed 002), the Janus report's latency and bandwidth (seed 003), and
//! the points with the model's time).

use crate::analysis::model::{FitSection, HockneySegment, Linear};
use crate::render::number::{text, Style};
use commbench_core::stats::Interval;
use std::fmt::Write;

/// What a report writes for a parameter that is not identifiable.
pub const NOT_IDENTIFIABLE: &str = "not identifiable";
/// What a report writes for the end of an interval that is unbounded.
pub const UNBOUNDED: &str = "unbounded";

/// `x` in `style`, or [`NOT_IDENTIFIABLE`] when `ok` is false: for reports that print a
/// fitted parameter (ask [`HockneySegment::is_identifiable`] or
/// [`Linear::is_identifiable`]).
pub fn parameter(x: f64, style: Style, ok: bool) -> String {
    if ok {
        text(x, style)
    } else {
        NOT_IDENTIFIABLE.to_string()
    }
}

/// An interval's end: [`UNBOUNDED`] when infinite.
pub fn interval_end(x: f64, style: Style) -> String {
    if x.is_infinite() {
        UNBOUNDED.to_string()
    } else {
        text(x, style)
    }
}

/// A fitted value as a report words it: not identifiable (with what was fitted), exact through
/// two points (no interval), or with its 95% interval, `note` after the interval's low end.
fn estimate(
    (v, ci, se): (f64, Interval, f64),
    ok: bool,
    style: Style,
    unit: &str,
    note: &str,
) -> Estimate {
    if !ok {
        Estimate::NotIdentifiable(format!("{} {unit}", text(v, style)))
    } else if !se.is_finite() {
        Estimate::Exact(format!("{} {unit}", text(v, style)))
    } else {
        Estimate::WithCi(
            format!("{} {unit}", text(v, style)),
            format!(
                "{}{note}, {}",
                interval_end(ci.lo, style),
                interval_end(ci.hi, style)
            ),
        )
    }
}

/// See [`estimate`].
enum Estimate {
    NotIdentifiable(String),
    Exact(String),
    WithCi(String, String),
}

/// One regime's Hockney parameters in a line, four significant digits:
/// `t0 = 8.000 us, r_inf = 400.0 MB/s, n_half = 3200 bytes`, with [`NOT_IDENTIFIABLE`] for a
/// parameter that is not physical and `(exact through two points)` after a two-point line.
pub fn regime_brief(s: &HockneySegment) -> String {
    let p = |x: f64, key: &str| parameter(x, Style::Significant, s.is_identifiable(key));
    let t0 = p(s.t0_us, "t0_us");
    let t0 = if s.is_identifiable("t0_us") {
        format!("{t0} us")
    } else {
        t0
    };
    let r = p(s.r_inf_mb_s, "r_inf_mb_s");
    let r = if s.is_identifiable("r_inf_mb_s") {
        format!("{r} MB/s")
    } else {
        r
    };
    let nh = p(s.n_half_bytes, "n_half_bytes");
    let nh = if s.is_identifiable("n_half_bytes") {
        format!("{nh} bytes")
    } else {
        nh
    };
    let exact = if s.is_exact() {
        " (exact through two points)"
    } else {
        ""
    };
    format!("t0 = {t0}, r_inf = {r}, n_half = {nh}{exact}")
}

/// Seed 003's latency and bandwidth in a line, four significant digits:
/// `latency 8.000 us [7.998, 8.002], bandwidth 480.2 MB/s [316.5, unbounded]`; a latency
/// interval cut at 0 says so, a two-point line has no interval, and a parameter that is not
/// physical is [`NOT_IDENTIFIABLE`] with its fitted value.
pub fn linear_brief(l: &Linear) -> String {
    let one = |name: &str, unit: &str, v: f64, ci: Interval, se: f64, ok: bool, note: &str| {
        match estimate((v, ci, se), ok, Style::Significant, unit, note) {
            Estimate::NotIdentifiable(f) => format!("{name} {NOT_IDENTIFIABLE} (fitted {f})"),
            Estimate::Exact(v) => format!("{name} {v} (exact through two points, no CI)"),
            Estimate::WithCi(v, ci) => format!("{name} {v} [{ci}]"),
        }
    };
    let clipped = if l.latency_ci_clipped() {
        " (clipped at 0)"
    } else {
        ""
    };
    format!(
        "{}, {}",
        one(
            "latency",
            "us",
            l.latency_us,
            l.latency_ci(),
            l.se_latency_us,
            l.is_identifiable("latency_us"),
            clipped
        ),
        one(
            "bandwidth",
            "MB/s",
            l.bandwidth_mb_s,
            l.ci95_bandwidth_mb_s,
            l.se_bandwidth_mb_s,
            l.is_identifiable("bandwidth_mb_s"),
            ""
        )
    )
}

/// `value +- se unit`, or `value unit` when the line is exact through two points (no
/// uncertainty), or `not identifiable (fitted value unit)`.
fn with_se(x: f64, se: f64, style: Style, unit: &str, exact: bool, ok: bool) -> String {
    if !ok {
        return format!("{NOT_IDENTIFIABLE} (fitted {} {unit})", text(x, style));
    }
    if exact || !se.is_finite() {
        return format!("{} {unit}", text(x, style));
    }
    format!("{} +- {} {unit}", text(x, style), text(se, style))
}

fn segment_lines(out: &mut String, s: &HockneySegment, indent: &str) {
    let ok = |k: &str| s.is_identifiable(k);
    let exact = s.is_exact();
    let _ = writeln!(
        out,
        "{indent}r_inf  = {}      t0   = {}",
        with_se(
            s.r_inf_mb_s,
            s.se_r_inf_mb_s,
            Style::Decimals(2),
            "MB/s",
            exact,
            ok("r_inf_mb_s")
        ),
        with_se(
            s.t0_us,
            s.se_t0_us,
            Style::Decimals(4),
            "us",
            exact,
            ok("t0_us")
        ),
    );
    let pi0 = if ok("pi0_per_s") {
        format!("{} per s", text(s.pi0_per_s, Style::Scientific))
    } else {
        NOT_IDENTIFIABLE.to_string()
    };
    let _ = writeln!(
        out,
        "{indent}n_half = {}   pi0  = {pi0}",
        with_se(
            s.n_half_bytes,
            s.se_n_half_bytes,
            Style::Decimals(1),
            "bytes",
            exact,
            ok("n_half_bytes")
        ),
    );
    if exact {
        let _ = writeln!(
            out,
            "{indent}exact through two points (no r2, no standard errors)   points = {}",
            s.points
        );
    } else {
        let _ = writeln!(
            out,
            "{indent}r2 = {}   max error = {} us   points = {}",
            text(s.r2, Style::Decimals(6)),
            text(s.max_abs_err_us, Style::Decimals(4)),
            s.points
        );
    }
    for u in s.identifiability() {
        if u.parameter == "t0_us" || u.parameter == "r_inf_mb_s" {
            let _ = writeln!(out, "{indent}not identifiable: {}", u.reason);
        }
    }
}

/// Seed 002: the whole-range line, the breakpoint and each regime's line, and the notes.
fn hockney(out: &mut String, f: &FitSection) {
    let h = &f.hockney;
    let _ = writeln!(
        out,
        "  HOCKNEY t = t0 + n / r_inf (Hockney's COMMS1), whole range {}..{} bytes",
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
    let _ = writeln!(
        out,
        "  LATENCY AND BANDWIDTH (the Janus cluster report, eq. 1-2: intercept and 1/slope)"
    );
    // (value, its CI, its standard error) -> text.
    let est =
        |name: &str, unit: &str, vcs: (f64, Interval, f64), n: usize, ok: bool, note: &str| {
            match estimate(vcs, ok, Style::Decimals(n), unit, note) {
                Estimate::NotIdentifiable(f) => {
                    format!("    {name} = {NOT_IDENTIFIABLE} (fitted {f}) ")
                }
                Estimate::Exact(v) => {
                    format!("    {name} = {v}, exact through two points (no CI) ")
                }
                Estimate::WithCi(v, ci) => format!("    {name} = {v}, 95% CI [{ci}] "),
            }
        };
    let clipped = if l.latency_ci_clipped() {
        " (clipped at 0)"
    } else {
        ""
    };
    let [a, b] = l.latency_sizes;
    let _ = writeln!(
        out,
        "{}(intercept over {a}..{b} bytes)",
        est(
            "latency  ",
            "us",
            (l.latency_us, l.latency_ci(), l.se_latency_us),
            4,
            l.is_identifiable("latency_us"),
            clipped
        )
    );
    let [a, b] = l.bandwidth_sizes;
    let _ = writeln!(
        out,
        "{}(1/slope over {a}..{b} bytes)",
        est(
            "bandwidth",
            "MB/s",
            (l.bandwidth_mb_s, l.ci95_bandwidth_mb_s, l.se_bandwidth_mb_s),
            2,
            l.is_identifiable("bandwidth_mb_s"),
            ""
        )
    );
    if let Some(c) = &l.cycles {
        let _ = writeln!(
            out,
            "    cycles    = {} + {} n  (eq. 3-4, {} instructions/s; T_c = {} s/byte)",
            parameter(
                c.a_cycles,
                Style::Decimals(4),
                l.is_identifiable("cycles.a_cycles")
            ),
            text(c.b_cycles_per_byte, Style::Scientific),
            text(c.instructions_per_second, Style::Scientific),
            text(c.beta_s_per_byte, Style::Scientific)
        );
    }
    for u in l.identifiability() {
        let _ = writeln!(out, "    not identifiable: {}: {}", u.parameter, u.reason);
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

    fn section(sizes: &[u64], t: &[f64]) -> String {
        let mut f = fit(sizes, t, Breakpoint::None, Some(5.6e9)).unwrap();
        f.pattern = "pingpong".into();
        let mut s = String::new();
        fit_section(&mut s, &f);
        s
    }

    #[test]
    fn two_points_print_no_uncertainty() {
        let s = section(&[1024, 1 << 20], &[3.0, 1000.0]);
        assert!(!s.contains("undefined") && !s.contains("+-"), "{s}");
        assert!(!s.contains("r2 ="), "{s}");
        assert!(
            s.contains("exact through two points (no r2, no standard errors)"),
            "{s}"
        );
        assert!(s.contains("exact through two points (no CI)"), "{s}");
    }

    #[test]
    fn unphysical_parameters_are_named_with_why() {
        // t = n / 1000 - 10 us over 64 KiB..4 MiB: the intercept is negative.
        let sizes: Vec<u64> = (16..=22).map(|k| 1u64 << k).collect();
        let t: Vec<f64> = sizes
            .iter()
            .enumerate()
            .map(|(i, &n)| (n as f64 / 1000.0 - 10.0) * (1.0 + 0.001 * (i % 3) as f64))
            .collect();
        let s = section(&sizes, &t);
        assert!(s.contains("t0   = not identifiable (fitted -"), "{s}");
        assert!(s.contains("n_half = not identifiable (fitted -"), "{s}");
        assert!(s.contains("pi0  = not identifiable"), "{s}");
        assert!(s.contains("latency   = not identifiable (fitted -"), "{s}");
        assert!(s.contains("cycles    = not identifiable + "), "{s}");
        assert!(s.contains("not identifiable: the fitted t0 = -"), "{s}");
        assert!(!s.contains("pi0  = -"), "{s}");
    }

    #[test]
    fn interval_ends_are_clipped_or_unbounded() {
        // Time barely growing with size: the slope's interval reaches 0, so the bandwidth's
        // reaches infinity.
        let sizes = [1u64, 2, 4, 8, 16];
        let t = [1.00, 1.02, 0.99, 1.03, 1.01];
        let s = section(&sizes, &t);
        assert!(s.contains(", unbounded] (1/slope"), "{s}");
        assert!(!s.contains("undefined"), "{s}");
        // A small start-up time, 0.1 us, against 1 us of wobble: its interval is cut at 0.
        let sizes = [1000u64, 2000, 3000, 4000];
        let t = [1.15, 2.05, 3.05, 4.15];
        let s = section(&sizes, &t);
        assert!(s.contains("latency   = 0.1"), "{s}");
        assert!(s.contains("95% CI [0.0000 (clipped at 0), "), "{s}");
    }

    #[test]
    fn brief_lines_flag_and_bound() {
        let f = fit(&[1024, 1 << 20], &[3.0, 1000.0], Breakpoint::None, None).unwrap();
        let r = regime_brief(&f.hockney.whole);
        assert!(r.ends_with("bytes (exact through two points)"), "{r}");
        let l = linear_brief(&f.linear);
        assert_eq!(
            l.matches("(exact through two points, no CI)").count(),
            2,
            "{l}"
        );
        assert!(!l.contains("undefined"), "{l}");
        let sizes: Vec<u64> = (16..=22).map(|k| 1u64 << k).collect();
        let t: Vec<f64> = sizes.iter().map(|&n| n as f64 / 1000.0 - 10.0).collect();
        let f = fit(&sizes, &t, Breakpoint::None, None).unwrap();
        let r = regime_brief(&f.hockney.whole);
        assert!(
            r.starts_with("t0 = not identifiable, r_inf = 1000 MB/s, n_half = not identifiable"),
            "{r}"
        );
        assert!(linear_brief(&f.linear).starts_with("latency not identifiable (fitted -"));
        let f = fit(
            &[1, 2, 4, 8, 16],
            &[1.00, 1.02, 0.99, 1.03, 1.01],
            Breakpoint::None,
            None,
        )
        .unwrap();
        assert!(
            linear_brief(&f.linear).ends_with(", unbounded]"),
            "{}",
            linear_brief(&f.linear)
        );
        let f = fit(
            &[1000, 2000, 3000, 4000],
            &[1.15, 2.05, 3.05, 4.15],
            Breakpoint::None,
            None,
        )
        .unwrap();
        assert!(
            linear_brief(&f.linear).contains(" [0 (clipped at 0), "),
            "{}",
            linear_brief(&f.linear)
        );
    }
}
