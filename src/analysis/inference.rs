//! Inference beyond descriptive statistics: the least-squares line of seed 001 Appendix B
//! (ordinary or weighted, [`fit_line_weighted`]), a bootstrap CI of a ratio of medians, and the
//! Mann-Whitney rank test. Used by the fits and `compare`; no rank ever runs them.

use commbench_core::stats::{lerp, quantile, sort_samples, CompensatedSum, Interval, Xoshiro256};
use std::cmp::Ordering;

/// Largest number of resamples [`bootstrap_median_ratio_ci`] accepts (2^24); more gives
/// `None`.
pub const MAX_BOOTSTRAP_ITERS: usize = 1 << 24;

/// A least-squares line `y = intercept + slope x` with its uncertainties: the `fit` of
/// seed 001 Appendix B, which reports `base + slope n` with "max. error".
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Line {
    /// Value at `x = 0` (seed 001's `base`).
    pub intercept: f64,
    /// Change of `y` per unit `x`.
    pub slope: f64,
    /// Standard error of the intercept, `s sqrt(1/sum(w) + mean_w(x)^2 / Sxx)`; NaN with two
    /// points (no residual degrees of freedom).
    pub se_intercept: f64,
    /// Standard error of the slope, `s / sqrt(Sxx)` with `s^2 = RSS / (n - 2)`; NaN with two
    /// points.
    pub se_slope: f64,
    /// Covariance of intercept and slope, `-s^2 mean_w(x) / Sxx`; NaN with two points.
    pub cov: f64,
    /// Weighted coefficient of determination `1 - RSS / SST`; 1 when all `y` are equal.
    pub r2: f64,
    /// Weighted residual sum of squares (the squared relative error when the weights are
    /// `1 / y^2`).
    pub rss: f64,
    /// Largest absolute (unweighted) residual `|intercept + slope x_i - y_i|`, seed 001's
    /// "maximum error".
    pub max_abs_err: f64,
    /// Number of points.
    pub n: usize,
}

/// Ordinary least squares of `y` on `x`: [`fit_line_weighted`] with equal weights.
pub fn fit_line(x: &[f64], y: &[f64]) -> Option<Line> {
    fit_line_weighted(x, y, &vec![1.0; x.len()])
}

/// Least squares of `y` on `x` with weights `w`, computed on data centred at the weighted
/// means.
///
/// `None` when the lengths differ, there are fewer than two points, a value or weight is not
/// finite, a weight is negative, the weights sum to 0, or `x` has no spread.
pub fn fit_line_weighted(x: &[f64], y: &[f64], w: &[f64]) -> Option<Line> {
    let n = x.len();
    if n < 2 || y.len() != n || w.len() != n {
        return None;
    }
    if x.iter().chain(y).chain(w).any(|v| !v.is_finite()) || w.iter().any(|&v| v < 0.0) {
        return None;
    }
    let sw: f64 = w.iter().sum();
    if sw <= 0.0 {
        return None;
    }
    let xm = x.iter().zip(w).map(|(a, b)| a * b).sum::<f64>() / sw;
    let ym = y.iter().zip(w).map(|(a, b)| a * b).sum::<f64>() / sw;
    let (mut sxx, mut sxy, mut syy) = (0.0, 0.0, 0.0);
    for ((&xi, &yi), &wi) in x.iter().zip(y).zip(w) {
        let dx = xi - xm;
        let dy = yi - ym;
        sxx += wi * dx * dx;
        sxy += wi * dx * dy;
        syy += wi * dy * dy;
    }
    if sxx.is_nan() || sxx <= 0.0 || !sxx.is_finite() {
        return None;
    }
    let slope = sxy / sxx;
    let intercept = ym - slope * xm;
    let mut rss = 0.0;
    let mut max_abs_err = 0.0_f64;
    for ((&xi, &yi), &wi) in x.iter().zip(y).zip(w) {
        let r = yi - (intercept + slope * xi);
        rss += wi * r * r;
        max_abs_err = max_abs_err.max(r.abs());
    }
    let r2 = if syy > 0.0 { 1.0 - rss / syy } else { 1.0 };
    let (se_intercept, se_slope, cov) = if n > 2 {
        let s2 = rss / (n as f64 - 2.0);
        (
            (s2 * (1.0 / sw + xm * xm / sxx)).sqrt(),
            (s2 / sxx).sqrt(),
            -s2 * xm / sxx,
        )
    } else {
        (f64::NAN, f64::NAN, f64::NAN)
    };
    Some(Line {
        intercept,
        slope,
        se_intercept,
        se_slope,
        cov,
        r2,
        rss,
        max_abs_err,
        n,
    })
}

/// Median of arbitrary-order data in O(n), reordering it.
fn median_unsorted(v: &mut [f64]) -> Option<f64> {
    let n = v.len();
    if n == 0 {
        return None;
    }
    let (left, &mut upper, _) = v.select_nth_unstable_by(n / 2, f64::total_cmp);
    if n % 2 == 1 {
        return Some(upper);
    }
    let lower = left.iter().copied().max_by(f64::total_cmp).unwrap_or(upper);
    Some(lerp(lower, upper, 0.5))
}

/// Bootstrap percentile confidence interval of `median(a) / median(b)`.
///
/// Each of `iters` rounds resamples `a` and `b` with replacement (into one reusable
/// scratch buffer), takes the ratio of the two medians, and the interval is the type-7
/// [`quantile`]s `(1 - conf)/2` and `(1 + conf)/2` of those ratios. Deterministic for a
/// given `seed` (xoshiro256** seeded by splitmix64). `None` if either side is empty,
/// `iters == 0` or `> MAX_BOOTSTRAP_ITERS`, `conf` is not inside `(0, 1)`, or some
/// resampled ratio is NaN (a zero median over a zero median, or NaN data). A zero median
/// of `b` alone gives an infinite end.
pub fn bootstrap_median_ratio_ci(
    a: &[f64],
    b: &[f64],
    iters: usize,
    conf: f64,
    seed: u64,
) -> Option<Interval> {
    if a.is_empty()
        || b.is_empty()
        || iters == 0
        || iters > MAX_BOOTSTRAP_ITERS
        || !(conf > 0.0 && conf < 1.0)
    {
        return None;
    }
    let mut rng = Xoshiro256::new(seed);
    let mut scratch: Vec<f64> = Vec::with_capacity(a.len().max(b.len()));
    let mut ratios: Vec<f64> = Vec::with_capacity(iters);
    let mut resampled_median = |src: &[f64], rng: &mut Xoshiro256| {
        scratch.clear();
        scratch.extend(
            (0..src.len()).map(|_| src.get(rng.below(src.len())).copied().unwrap_or(f64::NAN)),
        );
        median_unsorted(&mut scratch)
    };
    for _ in 0..iters {
        let ma = resampled_median(a, &mut rng)?;
        let mb = resampled_median(b, &mut rng)?;
        let r = ma / mb;
        if r.is_nan() {
            return None;
        }
        ratios.push(r);
    }
    sort_samples(&mut ratios);
    let tail = (1.0 - conf) / 2.0;
    Some(Interval {
        lo: quantile(&ratios, tail)?,
        hi: quantile(&ratios, 1.0 - tail)?,
    })
}

/// Complementary error function, `erfc(x)`, with fractional error below 1.2e-7
/// (Chebyshev fit from Numerical Recipes, `erfcc`).
fn erfc(x: f64) -> f64 {
    let z = x.abs();
    let t = 1.0 / (1.0 + 0.5 * z);
    let poly = -z * z - 1.265_512_23
        + t * (1.000_023_68
            + t * (0.374_091_96
                + t * (0.096_784_18
                    + t * (-0.186_288_06
                        + t * (0.278_868_07
                            + t * (-1.135_203_98
                                + t * (1.488_515_87 + t * (-0.822_152_23 + t * 0.170_872_77))))))));
    let r = t * poly.exp();
    if x >= 0.0 {
        r
    } else {
        2.0 - r
    }
}

/// Two-sided p-value of the Mann–Whitney U test (Wilcoxon rank-sum) that `a` and `b`
/// come from the same distribution.
///
/// Normal approximation with tie correction and continuity correction (as
/// `scipy.stats.mannwhitneyu(..., method="asymptotic")`):
/// `z = (|U - n1 n2 / 2| - 1/2) / sigma`, `sigma^2 = n1 n2 / 12 ((N + 1) - Σ(t^3 - t) /
/// (N (N - 1)))`, `p = erfc(z / sqrt 2)`, clamped to `[0, 1]`. When every value is tied,
/// `p = 1`. `None` if either side is empty.
pub fn mann_whitney_p(a: &[f64], b: &[f64]) -> Option<f64> {
    if a.is_empty() || b.is_empty() {
        return None;
    }
    let mut all: Vec<(f64, bool)> = a
        .iter()
        .map(|&x| (x, true))
        .chain(b.iter().map(|&x| (x, false)))
        .collect();
    all.sort_unstable_by(|p, q| p.0.total_cmp(&q.0));
    let total = all.len();
    let mut rank_sum_a = CompensatedSum::default();
    let mut tie_term = 0.0_f64;
    let mut i = 0;
    while let Some(&(v, _)) = all.get(i) {
        let run = all
            .get(i..)
            .map_or(0, |rest| {
                rest.iter()
                    .take_while(|p| p.0.total_cmp(&v) == Ordering::Equal)
                    .count()
            })
            .max(1);
        // Ranks i+1 ..= i+run share their mean.
        let mid_rank = i as f64 + (run as f64 + 1.0) / 2.0;
        let in_a = all
            .get(i..i + run)
            .map_or(0, |g| g.iter().filter(|p| p.1).count());
        rank_sum_a.add(mid_rank * in_a as f64);
        let t = run as f64;
        tie_term += t * t * t - t;
        i += run;
    }
    let n1 = a.len() as f64;
    let n2 = b.len() as f64;
    let nn = total as f64;
    let u1 = rank_sum_a.value() - n1 * (n1 + 1.0) / 2.0;
    let mu = n1 * n2 / 2.0;
    let tie_adj = if total > 1 {
        tie_term / (nn * (nn - 1.0))
    } else {
        0.0
    };
    let var = n1 * n2 / 12.0 * ((nn + 1.0) - tie_adj);
    if var <= 0.0 || !var.is_finite() {
        return Some(1.0);
    }
    let z = ((u1 - mu).abs() - 0.5).max(0.0) / var.sqrt();
    let p = erfc(z / std::f64::consts::SQRT_2);
    Some(p.clamp(0.0, 1.0))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn close(a: f64, b: f64, tol: f64) -> bool {
        (a - b).abs() <= tol * b.abs().max(1.0)
    }

    #[test]
    fn fit_line_by_hand() {
        // Exact line y = 1 + 2x.
        let x = [0.0, 1.0, 2.0, 3.0];
        let y = [1.0, 3.0, 5.0, 7.0];
        let f = fit_line(&x, &y).unwrap();
        assert!(close(f.intercept, 1.0, 1e-12) && close(f.slope, 2.0, 1e-12));
        assert!(f.se_slope.abs() < 1e-12 && f.se_intercept.abs() < 1e-12);
        assert!(close(f.r2, 1.0, 1e-12));
        assert!(f.max_abs_err < 1e-12);
        assert_eq!(f.n, 4);
        // x = 1,2,3, y = 1,2,2: slope 0.5, intercept 2/3, residuals 1/6, -1/3, 1/6.
        let f = fit_line(&[1.0, 2.0, 3.0], &[1.0, 2.0, 2.0]).unwrap();
        assert!(close(f.slope, 0.5, 1e-12));
        assert!(close(f.intercept, 2.0 / 3.0, 1e-12));
        assert!(close(f.max_abs_err, 1.0 / 3.0, 1e-12));
        // SSE = 1/6, s^2 = 1/6, Sxx = 2, mean x = 2.
        let s = (1.0f64 / 6.0).sqrt();
        assert!(close(f.se_slope, s / 2f64.sqrt(), 1e-12));
        assert!(close(
            f.se_intercept,
            s * (1.0 / 3.0 + 2.0f64).sqrt(),
            1e-12
        ));
        // SST = 2/3 -> r2 = 1 - (1/6)/(2/3) = 0.75.
        assert!(close(f.r2, 0.75, 1e-12));
        // Two points: exact, standard errors undefined.
        let f = fit_line(&[0.0, 2.0], &[1.0, 2.0]).unwrap();
        assert!(close(f.slope, 0.5, 1e-12) && f.se_slope.is_nan());
        assert_eq!(fit_line(&[1.0], &[1.0]), None);
        assert_eq!(fit_line(&[1.0, 2.0], &[1.0]), None);
        assert_eq!(fit_line(&[2.0, 2.0, 2.0], &[1.0, 2.0, 3.0]), None);
        assert_eq!(fit_line(&[1.0, f64::NAN], &[1.0, 2.0]), None);
        // Constant y -> r2 = 1.
        assert_eq!(
            fit_line(&[1.0, 2.0, 3.0], &[4.0, 4.0, 4.0]).unwrap().r2,
            1.0
        );
    }

    #[test]
    fn weighted_line_by_hand() {
        // Weights 1, 1, 2 on (0, 0), (1, 1), (2, 4): weighted means 5/4 and 9/4,
        // Sxx = 25/16 + 1/16 + 18/16 = 2.75, Sxy = 45/16 + 5/16 + 42/16 = 5.75, slope = 23/11.
        let f = fit_line_weighted(&[0.0, 1.0, 2.0], &[0.0, 1.0, 4.0], &[1.0, 1.0, 2.0]).unwrap();
        assert!(close(f.slope, 23.0 / 11.0, 1e-12));
        assert!(close(f.intercept, 2.25 - 1.25 * 23.0 / 11.0, 1e-12));
        assert!(f.cov < 0.0 && f.se_slope > 0.0 && f.rss > 0.0);
        // Equal weights of any size give the ordinary line.
        let (x, y) = ([1.0, 2.0, 3.0, 4.0, 6.0], [1.1, 1.9, 3.2, 3.9, 6.3]);
        let o = fit_line(&x, &y).unwrap();
        let w = fit_line_weighted(&x, &y, &[3.0; 5]).unwrap();
        assert!(close(w.slope, o.slope, 1e-12) && close(w.intercept, o.intercept, 1e-12));
        assert!(close(w.se_slope, o.se_slope, 1e-12));
        assert!(close(w.se_intercept, o.se_intercept, 1e-12));
        assert!(close(w.r2, o.r2, 1e-12) && close(w.max_abs_err, o.max_abs_err, 1e-12));
        assert_eq!(
            fit_line_weighted(&[1.0, 2.0], &[1.0, 2.0], &[1.0, -1.0]),
            None
        );
        assert_eq!(
            fit_line_weighted(&[1.0, 2.0], &[1.0, 2.0], &[0.0, 0.0]),
            None
        );
        assert_eq!(fit_line_weighted(&[1.0, 2.0], &[1.0, 2.0], &[1.0]), None);
    }

    #[test]
    fn bootstrap_ratio() {
        let a: Vec<f64> = (1..=50).map(|i| 2.0 * f64::from(i)).collect();
        let b: Vec<f64> = (1..=50).map(f64::from).collect();
        let ci = bootstrap_median_ratio_ci(&a, &b, 2000, 0.95, 7).unwrap();
        assert!(ci.lo <= 2.0 && 2.0 <= ci.hi, "{ci:?}");
        assert!(ci.lo > 1.0 && ci.hi < 4.0, "{ci:?}");
        // Deterministic per seed.
        assert_eq!(
            bootstrap_median_ratio_ci(&a, &b, 500, 0.9, 3),
            bootstrap_median_ratio_ci(&a, &b, 500, 0.9, 3)
        );
        // Constant data: the ratio is exact.
        let c = bootstrap_median_ratio_ci(&[6.0; 5], &[3.0; 7], 100, 0.95, 1).unwrap();
        assert_eq!(c, Interval { lo: 2.0, hi: 2.0 });
        assert_eq!(bootstrap_median_ratio_ci(&[], &b, 10, 0.95, 1), None);
        assert_eq!(bootstrap_median_ratio_ci(&a, &[], 10, 0.95, 1), None);
        assert_eq!(bootstrap_median_ratio_ci(&a, &b, 0, 0.95, 1), None);
        assert_eq!(bootstrap_median_ratio_ci(&a, &b, 10, 1.0, 1), None);
        assert_eq!(bootstrap_median_ratio_ci(&a, &b, 10, f64::NAN, 1), None);
        assert_eq!(bootstrap_median_ratio_ci(&[0.0], &[0.0], 10, 0.9, 1), None);
    }

    #[test]
    fn mann_whitney_by_hand() {
        // Complete separation, n1 = n2 = 5: U = 0, mu = 12.5, sigma^2 = 275/12,
        // z = 12 / 4.7871 = 2.5067, p = 0.012186 (scipy asymptotic, continuity).
        let p = mann_whitney_p(&[1.0, 2.0, 3.0, 4.0, 5.0], &[6.0, 7.0, 8.0, 9.0, 10.0]).unwrap();
        assert!((p - 0.012_186).abs() < 2e-5, "{p}");
        // Symmetric in its arguments.
        let q = mann_whitney_p(&[6.0, 7.0, 8.0, 9.0, 10.0], &[1.0, 2.0, 3.0, 4.0, 5.0]).unwrap();
        assert!((p - q).abs() < 1e-12);
        // Identical samples: p = 1.
        assert!((mann_whitney_p(&[1.0, 2.0, 3.0], &[1.0, 2.0, 3.0]).unwrap() - 1.0).abs() < 1e-6);
        // All tied: p = 1.
        assert_eq!(mann_whitney_p(&[2.0, 2.0], &[2.0]), Some(1.0));
        // With ties: a = [1,2,2], b = [2,3]. Ranks 1, 3,3,3, 5 -> R1 = 7, U1 = 1,
        // mu = 3, ties t = 3: sigma^2 = 6/12 (6 - 24/20) = 2.4,
        // z = (2 - 0.5) / sqrt(2.4) = 0.968246, p = 0.332920.
        let p = mann_whitney_p(&[1.0, 2.0, 2.0], &[2.0, 3.0]).unwrap();
        assert!((p - 0.332_92).abs() < 1e-5, "{p}");
        assert_eq!(mann_whitney_p(&[], &[1.0]), None);
        assert_eq!(mann_whitney_p(&[1.0], &[]), None);
    }

    #[test]
    fn erfc_known_values() {
        assert!((erfc(0.0) - 1.0).abs() < 1e-7);
        assert!((erfc(1.0) - 0.157_299_207).abs() < 1e-7);
        assert!((erfc(-1.0) - 1.842_700_793).abs() < 1e-7);
        assert!((erfc(1.959_963_985 / std::f64::consts::SQRT_2) - 0.05).abs() < 1e-7);
    }

    proptest! {
        #[test]
        fn mann_whitney_p_in_unit_interval(
            a in prop::collection::vec(0f64..10.0, 1..40),
            b in prop::collection::vec(0f64..10.0, 1..40),
        ) {
            let p = mann_whitney_p(&a, &b).unwrap();
            prop_assert!((0.0..=1.0).contains(&p));
        }
    }
}
