//! Fitted communication models of a size sweep.
//!
//! * **Hockney** (seed 002, COMMS1/COMMS2): the time to send `n` bytes is fitted to the
//!   linear timing model `t = (n + n_half) / r_inf` (seed 002 eq. 2), written here as
//!   `t = t0 + n / r_inf`, which gives the asymptotic bandwidth `r_inf = 1 / slope`, the
//!   start-up time `t0 = intercept` (eq. 5: `t0 = n_half / r_inf`), the half-performance
//!   length `n_half = r_inf t0` and the specific performance `pi0 = 1 / t0 = r_inf / n_half`
//!   (eq. 8). When messages have two modes of transmission, seed 002 fits the two regions
//!   separately either side of a breakpoint; the breakpoint is given ([`Breakpoint::At`]) or
//!   searched ([`Breakpoint::Auto`], criterion in [`auto_breakpoint`]).
//! * **Latency and bandwidth** (seed 003, eq. 1-2): `TransferTime = T_s + T_c n` with latency
//!   `T_s` the intercept and bandwidth `1 / T_c` the inverse slope; seed 003 takes latency
//!   from the small sizes and bandwidth from the large ones, so with a breakpoint the latency
//!   comes from the lower regime and the bandwidth from the upper one. With the processor's
//!   instructions per second, eq. 3-4 turn it into cycles `a + b n` ([`Cycles`]).
//!
//! Units: sizes in bytes, times in microseconds, so a slope is us/B and its inverse B/us =
//! MB/s (10^6 B/s).
//!
//! Every line is fitted by least squares weighted by `1 / t^2`, i.e. minimising the squared
//! RELATIVE error. A sweep spans 1 B..4 MiB, six decades of time: ordinary least squares
//! would be decided by the largest messages alone (their absolute residuals dwarf the whole
//! small-message time) and give a meaningless intercept; relative weighting gives every size
//! the same say, which is what the log-log plots show. On data that lie exactly on a line
//! both give the same answer. Standard errors are the usual weighted-least-squares ones with
//! the scale estimated from the residuals, and the derived parameters' uncertainties come
//! from first-order error propagation including the intercept-slope covariance.

use crate::analysis::document::ResultDoc;
use crate::analysis::inference::{fit_line_weighted, Line};
use crate::analysis::model::{Cycles, FitPoint, FitSection, Hockney, HockneySegment, Linear};
use crate::analysis::point::Point;
use commbench_core::stats::{self, Interval};

/// Below this root-mean-square relative residual (0.1 %) one line describes the sweep and no
/// breakpoint is reported: rounding (the simulator's integer nanoseconds) and noise at that
/// level are not a second regime, and no measurement of real transports is more precise.
pub const EXACT_RELATIVE_RMS: f64 = 1e-3;

/// Significance level of the breakpoint F-test (Bonferroni-corrected over the candidates).
pub const BREAKPOINT_ALPHA: f64 = 0.05;

/// The two-segment fit must remove more than this fraction of the one-line residual sum of
/// squares for a breakpoint to be reported.
pub const BREAKPOINT_MIN_RSS_REDUCTION: f64 = 0.5;

/// Relative weights `1 / t^2`; plain weights 1 when some time is not positive.
fn relative_weights(t: &[f64]) -> Vec<f64> {
    if t.iter().all(|&v| v > 0.0 && v.is_finite()) {
        t.iter().map(|&v| 1.0 / (v * v)).collect()
    } else {
        vec![1.0; t.len()]
    }
}

/// Seed 002's parameters from a line fitted to `t(n)` in us against bytes (`n_half`'s error
/// by first-order propagation with the intercept-slope covariance).
fn segment_of(l: &Line, from_bytes: u64, to_bytes: u64) -> HockneySegment {
    let (a, b) = (l.intercept, l.slope);
    let r_inf = 1.0 / b;
    let n_half = a / b;
    // Var(a/b) = (a/b)^2 (var_a/a^2 + var_b/b^2 - 2 cov/(a b)).
    let rel2 =
        l.se_intercept.powi(2) / (a * a) + l.se_slope.powi(2) / (b * b) - 2.0 * l.cov / (a * b);
    let mut s = HockneySegment {
        from_bytes,
        to_bytes,
        r_inf_mb_s: r_inf,
        n_half_bytes: n_half,
        t0_us: a,
        pi0_per_s: 1e6 / a,
        se_r_inf_mb_s: l.se_slope / (b * b),
        se_t0_us: l.se_intercept,
        // NaN (two points) stays NaN: `f64::max` would turn it into 0.
        se_n_half_bytes: if rel2.is_nan() {
            f64::NAN
        } else {
            n_half.abs() * rel2.max(0.0).sqrt()
        },
        r2: l.r2,
        max_abs_err_us: l.max_abs_err,
        points: l.n,
        exact: l.n == 2,
        not_identifiable: Vec::new(),
    };
    s.not_identifiable = s.identifiability();
    s
}

/// Where the sweep is split into two regimes. In JSON (a stream's `analysis`): `"none"`,
/// `"auto"` or `{"at": BYTES}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Breakpoint {
    /// One regime.
    None,
    /// Search for one ([`auto_breakpoint`]).
    Auto,
    /// Sizes below this form the lower regime, the rest the upper one.
    At(u64),
}

impl std::str::FromStr for Breakpoint {
    type Err = commbench_core::Error;
    /// `none`, `auto`, or a size (`100`, `4K`).
    fn from_str(s: &str) -> commbench_core::Result<Self> {
        match s.trim() {
            "none" => Ok(Breakpoint::None),
            "auto" => Ok(Breakpoint::Auto),
            t => crate::spec::parse_size(t).map(Breakpoint::At).map_err(|e| {
                commbench_core::Error::Config(format!(
                    "breakpoint `{s}`: {e}; expected none, auto or a size in bytes"
                ))
            }),
        }
    }
}

/// The outcome of the automatic breakpoint search.
#[derive(Debug, Clone, PartialEq)]
pub struct BreakpointSearch {
    /// The best split: the first size of the upper regime.
    pub at: u64,
    /// Weighted residual sum of squares of one line.
    pub rss_one: f64,
    /// Weighted residual sum of squares of the two lines at the best split.
    pub rss_two: f64,
    /// F statistic of two lines against one (2 and `n - 4` degrees of freedom).
    pub f: f64,
    /// Its p-value, Bonferroni-corrected for the number of candidate splits.
    pub p_corrected: f64,
    /// Whether the split is reported (see [`auto_breakpoint`]).
    pub accepted: bool,
}

/// Survival function of the F distribution with 2 and `d2` degrees of freedom, which has
/// the closed form `(1 + 2 f / d2)^(-d2 / 2)`.
pub fn f2_survival(f: f64, d2: f64) -> f64 {
    if f.is_nan() || d2 <= 0.0 {
        return f64::NAN;
    }
    if f <= 0.0 {
        return 1.0;
    }
    (1.0 + 2.0 * f / d2).powf(-d2 / 2.0)
}

/// Sort (size, time) pairs by size and return them with the sorted distinct sizes.
fn sorted_pairs(sizes: &[u64], times: &[f64]) -> (Vec<(u64, f64)>, Vec<u64>) {
    let mut v: Vec<(u64, f64)> = sizes.iter().copied().zip(times.iter().copied()).collect();
    v.sort_by(|a, b| a.0.cmp(&b.0).then(a.1.total_cmp(&b.1)));
    let mut distinct: Vec<u64> = v.iter().map(|p| p.0).collect();
    distinct.dedup();
    (v, distinct)
}

fn line_of(pairs: &[(u64, f64)]) -> Option<Line> {
    let x: Vec<f64> = pairs.iter().map(|p| p.0 as f64).collect();
    let y: Vec<f64> = pairs.iter().map(|p| p.1).collect();
    fit_line_weighted(&x, &y, &relative_weights(&y))
}

/// Search the split of a sweep into two regimes (seed 002's breakpoint, found instead of read
/// in).
///
/// Every split between consecutive distinct sizes that leaves at least 3 distinct sizes on
/// each side (2 when the sweep has fewer than 6 distinct sizes) is tried; each side gets its
/// own relative-weighted line, and the split with the smallest total weighted residual sum of
/// squares `RSS2` wins. It is reported (`accepted`) only when the two lines are clearly better
/// than one (`RSS1`): the one line's relative RMS residual is above [`EXACT_RELATIVE_RMS`]
/// (an exact line has no regimes), the F-test of two lines (4 parameters) against one (2),
/// `F = ((RSS1 - RSS2) / 2) / (RSS2 / (n - 4))`, is significant at [`BREAKPOINT_ALPHA`] after
/// a Bonferroni correction for the number of candidate splits (the split was chosen to fit
/// best, so the uncorrected test would be optimistic), and the two lines remove more than
/// [`BREAKPOINT_MIN_RSS_REDUCTION`] of RSS1. `None` when no split can be tried (fewer than
/// 5 points or too few distinct sizes) or the data do not fit.
pub fn auto_breakpoint(sizes: &[u64], times_us: &[f64]) -> Option<BreakpointSearch> {
    if sizes.len() != times_us.len() {
        return None;
    }
    let (pairs, distinct) = sorted_pairs(sizes, times_us);
    let n = pairs.len();
    if n < 5 {
        return None;
    }
    let min_side = if distinct.len() < 6 { 2 } else { 3 };
    let one = line_of(&pairs)?;
    let mut best: Option<(u64, f64)> = None;
    let mut candidates = 0usize;
    let last = distinct.len().saturating_sub(min_side);
    for &at in distinct.iter().take(last + 1).skip(min_side) {
        let split = pairs.partition_point(|p| p.0 < at);
        let (lo, hi) = pairs.split_at(split);
        let (Some(l), Some(h)) = (line_of(lo), line_of(hi)) else {
            continue;
        };
        candidates += 1;
        let rss = l.rss + h.rss;
        if best.map_or(true, |(_, b)| rss < b) {
            best = Some((at, rss));
        }
    }
    let (at, rss_two) = best?;
    let d2 = n as f64 - 4.0;
    let f = if rss_two > 0.0 {
        ((one.rss - rss_two) / 2.0) / (rss_two / d2)
    } else if one.rss > rss_two {
        f64::INFINITY
    } else {
        0.0
    };
    let p_corrected = if d2 > 0.0 {
        (f2_survival(f, d2) * candidates as f64).min(1.0)
    } else {
        1.0
    };
    let rms_one = (one.rss / n as f64).sqrt();
    let accepted = rms_one > EXACT_RELATIVE_RMS
        && p_corrected < BREAKPOINT_ALPHA
        && rss_two < (1.0 - BREAKPOINT_MIN_RSS_REDUCTION) * one.rss;
    Some(BreakpointSearch {
        at,
        rss_one: one.rss,
        rss_two,
        f,
        p_corrected,
        accepted,
    })
}

/// Check that a breakpoint leaves at least two distinct sizes on each side of `sizes`, so
/// that both regimes can be fitted. The error says which side is short.
pub fn validate_breakpoint(sizes: &[u64], at: u64) -> commbench_core::Result<()> {
    let mut d: Vec<u64> = sizes.to_vec();
    d.sort_unstable();
    d.dedup();
    let below = d.iter().filter(|&&s| s < at).count();
    let above = d.len() - below;
    if below < 2 || above < 2 {
        return Err(commbench_core::Error::Config(format!(
            "breakpoint {at} B leaves {below} distinct size(s) below it and {above} at or above it; each regime needs at least 2"
        )));
    }
    Ok(())
}

fn ci_of(v: f64, se: f64, df: usize) -> Interval {
    let t = stats::t_975(df as u64).unwrap_or(f64::NAN);
    Interval {
        lo: v - t * se,
        hi: v + t * se,
    }
}

/// The bandwidth interval from the slope's: `1 / [slope_hi, slope_lo]`.
fn inverse_ci(slope: f64, se: f64, df: usize) -> Interval {
    let s = ci_of(slope, se, df);
    let hi = if s.lo > 0.0 {
        1.0 / s.lo
    } else {
        f64::INFINITY
    };
    let lo = if s.hi > 0.0 { 1.0 / s.hi } else { f64::NAN };
    Interval { lo, hi }
}

/// Fit both models to a sweep: `times_us[i]` is the time (us) of `sizes[i]` bytes.
///
/// `None` with fewer than two distinct sizes, mismatched lengths, or non-finite times. A
/// [`Breakpoint::At`] that does not leave two distinct sizes on each side is not used (the
/// fit is one regime and `hockney.notes` says why; [`validate_breakpoint`] checks it up
/// front). `instructions_per_second` adds seed 003's cycles. The section's `pattern` is left
/// empty for the caller to fill ([`fit_points`] does).
pub fn fit(
    sizes: &[u64],
    times_us: &[f64],
    breakpoint: Breakpoint,
    instructions_per_second: Option<f64>,
) -> Option<FitSection> {
    fit_with_ci(sizes, times_us, None, breakpoint, instructions_per_second)
}

/// A line fitted to the (size, time) pairs of one range of sizes, `from..=to` bytes.
#[derive(Debug, Clone, Copy)]
struct Fitted {
    line: Line,
    from: u64,
    to: u64,
}

/// The relative-weighted line through `pairs`, sorted by size.
fn fitted(pairs: &[(u64, f64)]) -> Option<Fitted> {
    let (&(from, _), &(to, _)) = (pairs.first()?, pairs.last()?);
    Some(Fitted {
        line: line_of(pairs)?,
        from,
        to,
    })
}

/// The breakpoint to use and where it came from (`none`, `given`, `auto`); `notes` gets why
/// a given one is not used or what the search concluded.
fn choose_breakpoint(
    breakpoint: Breakpoint,
    sizes: &[u64],
    times_us: &[f64],
    notes: &mut Vec<String>,
) -> (Option<u64>, &'static str) {
    match breakpoint {
        Breakpoint::None => (None, "none"),
        Breakpoint::At(at) => match validate_breakpoint(sizes, at) {
            Ok(()) => (Some(at), "given"),
            Err(e) => {
                notes.push(format!("{}; fitted as one regime", e.reason()));
                (None, "none")
            }
        },
        Breakpoint::Auto => match auto_breakpoint(sizes, times_us) {
            Some(s) if s.accepted => {
                notes.push(format!(
                    "breakpoint found automatically: two lines reduce the relative RSS from {:.3e} to {:.3e} (F = {:.3}, corrected p = {:.2e})",
                    s.rss_one, s.rss_two, s.f, s.p_corrected
                ));
                (Some(s.at), "auto")
            }
            Some(s) => {
                notes.push(format!(
                    "no breakpoint: the best split at {} B reduces the relative RSS from {:.3e} to {:.3e} (F = {:.3}, corrected p = {:.2e}), not clearly better than one line",
                    s.at, s.rss_one, s.rss_two, s.f, s.p_corrected
                ));
                (None, "none")
            }
            None => {
                notes.push("no breakpoint: too few sizes to search for one".into());
                (None, "none")
            }
        },
    }
}

/// Seed 003 eq. 1-4: the latency from `lat`'s intercept, the bandwidth from `bw`'s slope,
/// and the cycles when the instructions per second are known.
fn linear_of(lat: &Fitted, bw: &Fitted, ips: Option<f64>) -> Linear {
    let (l, b) = (&lat.line, &bw.line);
    let latency_us = l.intercept;
    let mut ci95_latency_us = ci_of(latency_us, l.se_intercept, l.n.saturating_sub(2));
    // A time is not negative: an interval reaching below 0 is cut there (unless it lies
    // wholly below, when the latency is not identifiable and the interval is kept as is).
    let ci95_latency_clipped = ci95_latency_us.lo < 0.0 && ci95_latency_us.hi > 0.0;
    if ci95_latency_clipped {
        ci95_latency_us.lo = 0.0;
    }
    let mut linear = Linear {
        latency_us,
        bandwidth_mb_s: 1.0 / b.slope,
        se_latency_us: l.se_intercept,
        se_bandwidth_mb_s: b.se_slope / (b.slope * b.slope),
        ci95_latency_us,
        ci95_bandwidth_mb_s: inverse_ci(b.slope, b.se_slope, b.n.saturating_sub(2)),
        latency_sizes: [lat.from, lat.to],
        bandwidth_sizes: [bw.from, bw.to],
        cycles: ips.map(|ips| Cycles {
            instructions_per_second: ips,
            a_cycles: ips * latency_us * 1e-6,
            b_cycles_per_byte: ips * b.slope * 1e-6,
            beta_s_per_byte: b.slope * 1e-6,
        }),
        ci95_latency_clipped,
        not_identifiable: Vec::new(),
    };
    linear.not_identifiable = linear.identifiability();
    linear
}

/// Seed 002's Hockney fit of the sorted `pairs`: the whole range, and the two regimes when
/// `breakpoint` leaves a line on each side; with them seed 003's line (latency from the small
/// sizes, bandwidth from the large ones).
fn hockney_and_linear(
    pairs: &[(u64, f64)],
    (bp, source): (Option<u64>, &'static str),
    notes: Vec<String>,
    ips: Option<f64>,
) -> Option<(Hockney, Linear)> {
    let whole = fitted(pairs)?;
    let regimes = bp.and_then(|at| {
        let (lo, hi) = pairs.split_at(pairs.partition_point(|p| p.0 < at));
        Some([fitted(lo)?, fitted(hi)?])
    });
    let (lat, bw) = regimes.as_ref().map_or((&whole, &whole), |[l, h]| (l, h));
    let linear = linear_of(lat, bw, ips);
    let whole = segment_of(&whole.line, whole.from, whole.to);
    let hockney = Hockney {
        whole,
        breakpoint_bytes: regimes.and(bp),
        breakpoint_source: if regimes.is_some() { source } else { "none" }.into(),
        segments: regimes
            .iter()
            .flatten()
            .map(|f| segment_of(&f.line, f.from, f.to))
            .collect(),
        notes,
    };
    Some((hockney, linear))
}

fn fit_with_ci(
    sizes: &[u64],
    times_us: &[f64],
    cis: Option<&[Interval]>,
    breakpoint: Breakpoint,
    ips: Option<f64>,
) -> Option<FitSection> {
    if sizes.len() != times_us.len() || times_us.iter().any(|t| !t.is_finite()) {
        return None;
    }
    let mut order: Vec<usize> = (0..sizes.len()).collect();
    order.sort_by(|&a, &b| {
        sizes[a]
            .cmp(&sizes[b])
            .then(times_us[a].total_cmp(&times_us[b]))
    });
    let pairs: Vec<(u64, f64)> = order.iter().map(|&i| (sizes[i], times_us[i])).collect();
    let mut notes = Vec::new();
    let bp = choose_breakpoint(breakpoint, sizes, times_us, &mut notes);
    let (hockney, linear) = hockney_and_linear(&pairs, bp, notes, ips)?;
    let points = order
        .iter()
        .map(|&i| FitPoint {
            size: sizes[i],
            time_us: times_us[i],
            ci95_us: cis.and_then(|c| c.get(i).copied()),
            model_us: hockney.time_us(sizes[i]),
        })
        .collect();
    let weighting = if times_us.iter().all(|&t| t > 0.0) {
        "relative (1/t^2)"
    } else {
        "ordinary"
    };
    Some(FitSection {
        pattern: String::new(),
        basis: "median one-way time".into(),
        weighting: weighting.into(),
        hockney,
        linear,
        points,
    })
}

/// Fit every pattern present in `points` to the median one-way time of each size, with the
/// median's 95 % confidence interval kept per point. One [`FitSection`] per pattern (in
/// order of first appearance) that has at least two distinct sizes. A queue benchmark's points
/// are left out: their sizes repeat over queues a line in the size cannot describe (their
/// lines are against the queue, [`crate::analysis::queue`]).
pub fn fit_points(points: &[Point], breakpoint: Breakpoint, ips: Option<f64>) -> Vec<FitSection> {
    let points: Vec<&Point> = points.iter().filter(|p| p.queue_length.is_none()).collect();
    // A sweep of windows and pairs fits each of its steps apart ([`Point::group`]).
    let mut patterns: Vec<String> = Vec::new();
    for p in &points {
        let g = p.group();
        if !patterns.contains(&g) {
            patterns.push(g);
        }
    }
    patterns
        .into_iter()
        .filter_map(|pat| {
            let mine: Vec<&Point> = points
                .iter()
                .copied()
                .filter(|p| p.group() == pat)
                .collect();
            let sizes: Vec<u64> = mine.iter().map(|p| p.size).collect();
            let times: Vec<f64> = mine.iter().map(|p| p.one_way_us.median).collect();
            let cis: Vec<Interval> = mine.iter().map(|p| p.one_way_us.ci95_median).collect();
            let mut f = fit_with_ci(&sizes, &times, Some(&cis), breakpoint, ips)?;
            f.pattern = pat;
            Some(f)
        })
        .collect()
}

/// The fits a report of `doc` shows: the stored one for its pattern, fresh ones (automatic
/// breakpoint) for the other patterns or when none is stored.
pub fn fits_of(doc: &ResultDoc) -> Vec<FitSection> {
    let mut fits = fit_points(&doc.points, Breakpoint::Auto, None);
    if let Some(s) = &doc.fit {
        match fits.iter_mut().find(|f| f.pattern == s.pattern) {
            Some(f) => *f = s.clone(),
            None => fits.insert(0, s.clone()),
        }
    }
    fits
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64, rel: f64) -> bool {
        (a - b).abs() <= rel * b.abs().max(1e-300)
    }

    fn pow2_sizes(max_log2: u32) -> Vec<u64> {
        (0..=max_log2).map(|k| 1u64 << k).collect()
    }

    /// Deterministic noise in [-1, 1].
    fn noise(i: usize) -> f64 {
        let x =
            ((i as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 11) as f64 / (1u64 << 53) as f64;
        2.0 * x - 1.0
    }

    #[test]
    fn exact_line_recovers_parameters() {
        // t = 2 us + n / 1000 MB/s: n_half = 2000 B, pi0 = 5e5 /s.
        let sizes = pow2_sizes(22);
        let t: Vec<f64> = sizes.iter().map(|&n| 2.0 + n as f64 / 1000.0).collect();
        let f = fit(&sizes, &t, Breakpoint::Auto, None).unwrap();
        let h = &f.hockney;
        assert!(
            close(h.whole.r_inf_mb_s, 1000.0, 1e-9),
            "{}",
            h.whole.r_inf_mb_s
        );
        assert!(close(h.whole.t0_us, 2.0, 1e-9));
        assert!(close(h.whole.n_half_bytes, 2000.0, 1e-9));
        assert!(close(h.whole.pi0_per_s, 5e5, 1e-9));
        assert!(h.whole.se_t0_us < 1e-9 && h.whole.se_r_inf_mb_s < 1e-6);
        assert!(close(h.whole.r2, 1.0, 1e-12));
        assert!(h.whole.max_abs_err_us < 1e-6);
        assert_eq!(h.breakpoint_bytes, None, "{:?}", h.notes);
        assert_eq!(h.breakpoint_source, "none");
        assert!(h.segments.is_empty());
        // The whole-range keys sit at the top level, with its size range; a document written
        // before the range was recorded still reads.
        let mut v = serde_json::to_value(h).unwrap();
        assert_eq!(v["t0_us"], serde_json::json!(h.whole.t0_us));
        assert_eq!(v["to_bytes"], serde_json::json!(1u64 << 22));
        v.as_object_mut().unwrap().remove("to_bytes");
        let back: Hockney = serde_json::from_value(v).unwrap();
        assert_eq!(back.whole.to_bytes, 0);
        assert_eq!(back.whole.t0_us, h.whole.t0_us);
        assert!(close(f.linear.latency_us, 2.0, 1e-9));
        assert!(close(f.linear.bandwidth_mb_s, 1000.0, 1e-9));
        assert_eq!(f.points.len(), sizes.len());
        assert!(f.points.iter().all(|p| close(p.model_us, p.time_us, 1e-9)));
    }

    #[test]
    fn hockney_identities_hold() {
        // Seed 002 eq. 5 and 8: t0 = n_half / r_inf, pi0 = 1/t0 = r_inf / n_half.
        let sizes = pow2_sizes(16);
        let t: Vec<f64> = sizes
            .iter()
            .enumerate()
            .map(|(i, &n)| (3.5 + n as f64 / 250.0) * (1.0 + 0.02 * noise(i)))
            .collect();
        let h = fit(&sizes, &t, Breakpoint::None, None).unwrap().hockney;
        assert!(close(
            h.whole.t0_us,
            h.whole.n_half_bytes / h.whole.r_inf_mb_s,
            1e-12
        ));
        assert!(close(h.whole.pi0_per_s, 1e6 / h.whole.t0_us, 1e-12));
        assert!(close(
            h.whole.pi0_per_s,
            1e6 * h.whole.r_inf_mb_s / h.whole.n_half_bytes,
            1e-12
        ));
        // Rate at n_half is half of r_inf (eq. 3 with n = n_half).
        let n = h.whole.n_half_bytes;
        let r = n / (h.whole.t0_us + n / h.whole.r_inf_mb_s);
        assert!(close(r, h.whole.r_inf_mb_s / 2.0, 1e-12));
    }

    #[test]
    fn noisy_line_within_confidence_interval() {
        // 2 % multiplicative noise on t = 1.2 + n / 3000.
        let sizes: Vec<u64> = (0..40).map(|k| 64 + k * 4096).collect();
        let t: Vec<f64> = sizes
            .iter()
            .enumerate()
            .map(|(i, &n)| (1.2 + n as f64 / 3000.0) * (1.0 + 0.02 * noise(i)))
            .collect();
        let f = fit(&sizes, &t, Breakpoint::None, None).unwrap();
        let l = &f.linear;
        assert!(
            l.ci95_latency_us.contains(1.2),
            "{:?} ({})",
            l.ci95_latency_us,
            l.latency_us
        );
        assert!(
            l.ci95_bandwidth_mb_s.contains(3000.0),
            "{:?}",
            l.ci95_bandwidth_mb_s
        );
        assert!(l.se_latency_us > 0.0 && l.se_bandwidth_mb_s > 0.0);
        assert!(close(l.bandwidth_mb_s, 3000.0, 0.02));
        let h = &f.hockney;
        // Whole-range Hockney equals seed 003's line without a breakpoint.
        assert_eq!(h.whole.t0_us, l.latency_us);
        assert_eq!(h.whole.r_inf_mb_s, l.bandwidth_mb_s);
        assert!((h.whole.n_half_bytes - 3600.0).abs() < 3.0 * h.whole.se_n_half_bytes + 1.0);
    }

    fn two_regimes(sizes: &[u64], noise_amp: f64) -> Vec<f64> {
        // Eager below 1 KiB: 1 us + n / 500 MB/s; rendezvous from 1 KiB: 6 us + n / 4000.
        sizes
            .iter()
            .enumerate()
            .map(|(i, &n)| {
                let t = if n < 1024 {
                    1.0 + n as f64 / 500.0
                } else {
                    6.0 + n as f64 / 4000.0
                };
                t * (1.0 + noise_amp * noise(i))
            })
            .collect()
    }

    #[test]
    fn two_regime_sweep_finds_breakpoint() {
        let sizes = pow2_sizes(22);
        for amp in [0.0, 0.01] {
            let t = two_regimes(&sizes, amp);
            let s = auto_breakpoint(&sizes, &t).unwrap();
            assert_eq!(s.at, 1024, "noise {amp}");
            assert!(s.accepted, "{s:?}");
            let f = fit(&sizes, &t, Breakpoint::Auto, Some(5.6e9)).unwrap();
            let h = &f.hockney;
            assert_eq!(h.breakpoint_bytes, Some(1024));
            assert_eq!(h.breakpoint_source, "auto");
            assert_eq!(h.segments.len(), 2);
            let (lo, hi) = (&h.segments[0], &h.segments[1]);
            assert_eq!((lo.from_bytes, lo.to_bytes), (1, 512));
            assert_eq!((hi.from_bytes, hi.to_bytes), (1024, 1 << 22));
            assert_eq!(lo.points + hi.points, sizes.len());
            let tol = if amp == 0.0 { 1e-9 } else { 0.05 };
            assert!(close(lo.t0_us, 1.0, tol), "{}", lo.t0_us);
            assert!(close(hi.r_inf_mb_s, 4000.0, tol), "{}", hi.r_inf_mb_s);
            assert!(close(hi.t0_us, 6.0, tol.max(0.1)), "{}", hi.t0_us);
            // Seed 003: latency from the lower regime, bandwidth from the upper.
            assert_eq!(f.linear.latency_us, lo.t0_us);
            assert_eq!(f.linear.bandwidth_mb_s, hi.r_inf_mb_s);
            assert_eq!(f.linear.latency_sizes, [1, 512]);
            assert_eq!(f.linear.bandwidth_sizes, [1024, 1 << 22]);
            assert!(f.linear.cycles.is_some());
        }
    }

    #[test]
    fn given_breakpoint_and_invalid_one() {
        let sizes = pow2_sizes(12);
        let t = two_regimes(&sizes, 0.0);
        let f = fit(&sizes, &t, Breakpoint::At(1000), None).unwrap();
        assert_eq!(f.hockney.breakpoint_bytes, Some(1000));
        assert_eq!(f.hockney.breakpoint_source, "given");
        assert_eq!(f.hockney.segments[1].from_bytes, 1024);
        assert!(close(f.hockney.segments[0].r_inf_mb_s, 500.0, 1e-9));
        // 2 B leaves one size below: not usable.
        assert!(validate_breakpoint(&sizes, 2).is_err());
        assert!(validate_breakpoint(&sizes, 4).is_ok());
        assert!(validate_breakpoint(&sizes, 4096).is_err());
        let f = fit(&sizes, &t, Breakpoint::At(2), None).unwrap();
        assert_eq!(f.hockney.breakpoint_bytes, None);
        assert!(f.hockney.segments.is_empty());
        assert!(
            f.hockney.notes[0].contains("1 distinct size(s) below"),
            "{:?}",
            f.hockney.notes
        );
    }

    #[test]
    fn noisy_single_line_has_no_breakpoint() {
        let sizes = pow2_sizes(20);
        let t: Vec<f64> = sizes
            .iter()
            .enumerate()
            .map(|(i, &n)| (0.8 + n as f64 / 2000.0) * (1.0 + 0.01 * noise(i)))
            .collect();
        let f = fit(&sizes, &t, Breakpoint::Auto, None).unwrap();
        assert_eq!(f.hockney.breakpoint_bytes, None, "{:?}", f.hockney.notes);
        assert!(f.hockney.notes[0].starts_with("no breakpoint"));
    }

    #[test]
    fn seed_003_table_1_cycles() {
        // Single node: latency 0.17333704 us, 7957.8435 MB/s, 5.6e9 instructions/s give
        // Alpha = 970.6874 and Beta = 1.2566215e-10 (Table 1).
        let (ts, bw) = (0.173_337_04, 7957.8435);
        let sizes = [1024u64, 1 << 20, 4 << 20];
        let t: Vec<f64> = sizes.iter().map(|&n| ts + n as f64 / bw).collect();
        let f = fit(&sizes, &t, Breakpoint::None, Some(5.6e9)).unwrap();
        let c = f.linear.cycles.unwrap();
        assert!((c.a_cycles - 970.6874).abs() < 1e-3, "{}", c.a_cycles);
        assert!((c.beta_s_per_byte - 1.256_621_5e-10).abs() < 1e-16);
        assert!(close(c.b_cycles_per_byte, 5.6e9 * 1.256_621_5e-10, 1e-6));
    }

    #[test]
    fn degenerate_input() {
        assert!(fit(&[8, 8, 8], &[1.0, 2.0, 3.0], Breakpoint::Auto, None).is_none());
        assert!(fit(&[8], &[1.0], Breakpoint::None, None).is_none());
        assert!(fit(&[], &[], Breakpoint::None, None).is_none());
        assert!(fit(&[1, 2], &[1.0], Breakpoint::None, None).is_none());
        assert!(fit(&[1, 2], &[1.0, f64::NAN], Breakpoint::None, None).is_none());
        // Two points: exact, standard errors undefined, still serialisable.
        let f = fit(&[0, 100], &[1.0, 2.0], Breakpoint::Auto, None).unwrap();
        assert!(close(f.hockney.whole.r_inf_mb_s, 100.0, 1e-12));
        assert!(f.hockney.whole.se_t0_us.is_nan());
        let json = serde_json::to_string(&f).unwrap();
        let back: FitSection = serde_json::from_str(&json).unwrap();
        assert!(back.hockney.whole.se_t0_us.is_nan());
        assert_eq!(back.hockney.whole.r_inf_mb_s, f.hockney.whole.r_inf_mb_s);
        // A zero time falls back to ordinary least squares.
        let f = fit(&[0, 1, 2], &[0.0, 1.0, 2.0], Breakpoint::None, None).unwrap();
        assert_eq!(f.weighting, "ordinary");
        assert!(!f.hockney.whole.is_identifiable("pi0_per_s"));
    }

    /// The parameters flagged not identifiable in `s`.
    fn flagged(s: &HockneySegment) -> Vec<&str> {
        s.not_identifiable
            .iter()
            .map(|u| u.parameter.as_str())
            .collect()
    }

    #[test]
    fn two_points_claim_no_uncertainty() {
        let f = fit(&[1024, 1 << 20], &[3.0, 1000.0], Breakpoint::Auto, None).unwrap();
        let w = &f.hockney.whole;
        assert!(w.exact && w.is_exact());
        // No standard error is 0 or a number: all are undefined (null).
        for se in [w.se_t0_us, w.se_r_inf_mb_s, w.se_n_half_bytes] {
            assert!(se.is_nan(), "{w:?}");
        }
        assert!(f.linear.se_latency_us.is_nan() && f.linear.se_bandwidth_mb_s.is_nan());
        let v = serde_json::to_value(&f).unwrap();
        assert_eq!(v["hockney"]["exact"], true);
        assert!(v["hockney"]["se_n_half_bytes"].is_null());
        let warnings = f.warnings();
        assert!(
            warnings
                .iter()
                .any(|w| w.contains("exact through two points")),
            "{warnings:?}"
        );
        // Three points are not exact, and say nothing of it.
        let f = fit(&[1, 2, 4], &[1.0, 1.1, 1.3], Breakpoint::None, None).unwrap();
        assert!(!f.hockney.whole.exact && f.hockney.whole.se_n_half_bytes.is_finite());
        let v = serde_json::to_value(&f).unwrap();
        assert!(v["hockney"].get("exact").is_none());
        assert!(f.warnings().is_empty(), "{:?}", f.warnings());
    }

    #[test]
    fn negative_intercepts_are_not_identifiable() {
        // Times whose line crosses zero time at 10 KB, 0.5 % noise: t0 is significantly
        // negative.
        let sizes: Vec<u64> = (16..=22).map(|k| 1u64 << k).collect();
        let t: Vec<f64> = sizes
            .iter()
            .enumerate()
            .map(|(i, &n)| (n as f64 / 1000.0 - 10.0) * (1.0 + 0.005 * noise(i)))
            .collect();
        let f = fit(&sizes, &t, Breakpoint::None, Some(5.6e9)).unwrap();
        let w = &f.hockney.whole;
        assert!(
            w.t0_us < 0.0 && w.n_half_bytes < 0.0 && w.pi0_per_s < 0.0,
            "{w:?}"
        );
        assert_eq!(flagged(w), ["t0_us", "n_half_bytes", "pi0_per_s"]);
        assert!(
            w.not_identifiable[0]
                .reason
                .contains("significantly below 0"),
            "{w:?}"
        );
        assert!(w.is_identifiable("r_inf_mb_s") && !w.is_identifiable("pi0_per_s"));
        let l = &f.linear;
        let keys: Vec<&str> = l
            .not_identifiable
            .iter()
            .map(|u| u.parameter.as_str())
            .collect();
        assert_eq!(keys, ["latency_us", "cycles.a_cycles"]);
        // The numbers stay as fitted, and the flags are in the document.
        let v = serde_json::to_value(&f).unwrap();
        assert_eq!(v["hockney"]["t0_us"], serde_json::json!(w.t0_us));
        assert_eq!(v["hockney"]["not_identifiable"][0]["parameter"], "t0_us");
        assert_eq!(
            v["linear"]["not_identifiable"][0]["parameter"],
            "latency_us"
        );
        let warnings = f.warnings();
        assert!(
            warnings[0].starts_with(
                "Hockney t0, n_half and pi0 (whole range, 65536..4194304 bytes) not identifiable"
            ),
            "{warnings:?}"
        );
        // A document written before the flags: the same verdicts from the numbers.
        let mut v = serde_json::to_value(&f).unwrap();
        v["hockney"]
            .as_object_mut()
            .unwrap()
            .remove("not_identifiable");
        v["linear"]
            .as_object_mut()
            .unwrap()
            .remove("not_identifiable");
        let old: FitSection = serde_json::from_value(v).unwrap();
        assert!(old.hockney.whole.not_identifiable.is_empty());
        assert_eq!(old.hockney.whole.identifiability(), w.not_identifiable);
        assert_eq!(old.warnings(), warnings);
    }

    #[test]
    fn an_intercept_too_small_to_resolve() {
        // No start-up time at all, 1 % noise: the intercept is a small number of either
        // sign, and when negative its interval reaches 0.
        let sizes: Vec<u64> = (0..30).map(|k| 4096 + k * 65536).collect();
        let mut seen = [false; 2];
        for shift in 0..40 {
            let t: Vec<f64> = sizes
                .iter()
                .enumerate()
                .map(|(i, &n)| n as f64 / 2000.0 * (1.0 + 0.01 * noise(i + shift)))
                .collect();
            let f = fit(&sizes, &t, Breakpoint::None, None).unwrap();
            let (w, l) = (&f.hockney.whole, &f.linear);
            assert!(l.ci95_latency_us.lo >= 0.0 || l.ci95_latency_us.hi < 0.0);
            if w.t0_us <= 0.0 {
                seen[0] = true;
                assert!(
                    w.not_identifiable[0]
                        .reason
                        .contains("too small to resolve"),
                    "{:?}",
                    w.not_identifiable
                );
                assert!(!l.is_identifiable("latency_us"));
            } else {
                seen[1] = true;
                assert!(w.not_identifiable.is_empty());
                // The interval would reach below 0: it is cut there, and said.
                assert!(l.ci95_latency_clipped, "{:?}", l.ci95_latency_us);
                assert_eq!(l.ci95_latency_us.lo, 0.0);
                assert!(f.warnings().iter().any(|w| w.contains("clipped at 0")));
            }
        }
        assert_eq!(seen, [true, true], "both signs of the intercept");
    }

    #[test]
    fn a_time_that_falls_with_size_has_no_bandwidth() {
        let sizes = [64u64, 128, 256, 512];
        let t = [5.0, 4.9, 4.7, 4.6];
        let f = fit(&sizes, &t, Breakpoint::None, None).unwrap();
        let w = &f.hockney.whole;
        assert!(w.r_inf_mb_s < 0.0);
        assert_eq!(flagged(w), ["r_inf_mb_s", "n_half_bytes"]);
        assert!(!f.linear.is_identifiable("bandwidth_mb_s"));
        assert!(w.not_identifiable[0]
            .reason
            .contains("does not grow with size"));
    }

    #[test]
    fn json_keys_contract() {
        let sizes = pow2_sizes(12);
        let f = fit(&sizes, &two_regimes(&sizes, 0.0), Breakpoint::Auto, None).unwrap();
        let v = serde_json::to_value(&f).unwrap();
        for k in [
            "r_inf_mb_s",
            "n_half_bytes",
            "t0_us",
            "pi0_per_s",
            "breakpoint_bytes",
            "segments",
        ] {
            assert!(v["hockney"].get(k).is_some(), "hockney.{k}");
        }
        for k in ["latency_us", "bandwidth_mb_s"] {
            assert!(v["linear"].get(k).is_some(), "linear.{k}");
        }
        let back: FitSection = serde_json::from_value(v).unwrap();
        assert_eq!(back, f);
        let f = fit(&sizes, &two_regimes(&sizes, 0.0), Breakpoint::None, None).unwrap();
        let v = serde_json::to_value(&f).unwrap();
        assert!(v["hockney"]["breakpoint_bytes"].is_null());
    }

    #[test]
    fn breakpoint_parses() {
        assert_eq!("auto".parse::<Breakpoint>().unwrap(), Breakpoint::Auto);
        assert_eq!("none".parse::<Breakpoint>().unwrap(), Breakpoint::None);
        assert_eq!("4K".parse::<Breakpoint>().unwrap(), Breakpoint::At(4096));
        assert!("x".parse::<Breakpoint>().is_err());
    }

    #[test]
    fn f2_survival_known_values() {
        // F(2, 10): P(F > 4.10) = 0.0500 (F table).
        assert!((f2_survival(4.1028, 10.0) - 0.05).abs() < 1e-4);
        assert_eq!(f2_survival(0.0, 5.0), 1.0);
        assert_eq!(f2_survival(f64::INFINITY, 5.0), 0.0);
    }
}
