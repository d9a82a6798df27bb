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

/// A statistic of several runs of one benchmark, with its variance from the hierarchical
/// bootstrap of [`hierarchical_log_median`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RunsEstimate {
    /// Mean over the runs of `ln(median of the run)`: the logarithm of the geometric mean of
    /// the runs' medians.
    pub log_estimate: f64,
    /// Variance of `log_estimate`: the variance of the bootstrap replicates, times
    /// `n / (n - 1)` for `n >= 2` runs (see [`hierarchical_log_median`]).
    pub variance: f64,
    /// Runs.
    pub runs: usize,
}

/// Hierarchical (two-stage) bootstrap of the mean log-median over runs (Kalibera & Jones
/// 2013, "Rigorous benchmarking in reasonable time": resample at every level of repetition,
/// the highest first).
///
/// Each of `iters` replicates draws `n = runs.len()` runs with replacement, then, for every
/// run drawn, as many of its trials as it has, with replacement; the replicate is the mean
/// over the drawn runs of `ln(median)`. The runs are the independent units: trials of one run
/// share the machine's state (placement, frequency, other load), so their spread says nothing
/// about how far the next run lands.
///
/// The bootstrap spread of a mean of `n` units is `(n - 1) / n` of the plug-in estimate's, which
/// matters with the handful of runs a benchmark has; for `n >= 2` the replicates' variance is
/// therefore multiplied by `n / (n - 1)` (the expansion Hesterberg 2015 recommends for small
/// samples). With one run it stays as is and describes that run's trials only.
///
/// Deterministic for a given `seed`. `None` if there are no runs, a run has no trials,
/// `iters == 0` or `> MAX_BOOTSTRAP_ITERS`, or a median (of the data or of a replicate) is not
/// positive and finite.
pub fn hierarchical_log_median<R: AsRef<[f64]>>(
    runs: &[R],
    iters: usize,
    seed: u64,
) -> Option<RunsEstimate> {
    let n = runs.len();
    if n == 0 || iters == 0 || iters > MAX_BOOTSTRAP_ITERS {
        return None;
    }
    let longest = runs.iter().map(|r| r.as_ref().len()).max().unwrap_or(0);
    if runs.iter().any(|r| r.as_ref().is_empty()) {
        return None;
    }
    let mut scratch: Vec<f64> = Vec::with_capacity(longest);
    let mut log_sum = CompensatedSum::default();
    for r in runs {
        scratch.clear();
        scratch.extend_from_slice(r.as_ref());
        let m = median_unsorted(&mut scratch)?;
        if !(m > 0.0 && m.is_finite()) {
            return None;
        }
        log_sum.add(m.ln());
    }
    let log_estimate = log_sum.value() / n as f64;
    let mut rng = Xoshiro256::new(seed);
    let mut replicates: Vec<f64> = Vec::with_capacity(iters);
    for _ in 0..iters {
        let mut s = 0.0;
        for _ in 0..n {
            let run = runs.get(rng.below(n))?.as_ref();
            scratch.clear();
            scratch.extend(
                (0..run.len()).map(|_| run.get(rng.below(run.len())).copied().unwrap_or(f64::NAN)),
            );
            let m = median_unsorted(&mut scratch)?;
            if !(m > 0.0 && m.is_finite()) {
                return None;
            }
            s += m.ln();
        }
        replicates.push(s / n as f64);
    }
    let (_, var) = commbench_core::stats::mean_variance(&replicates)?;
    let variance = if n >= 2 {
        var * n as f64 / (n as f64 - 1.0)
    } else {
        var
    };
    Some(RunsEstimate {
        log_estimate,
        variance,
        runs: n,
    })
}

/// `ln Γ(x)` for `x > 0` (Lanczos, g = 7, nine terms; relative error near 1e-15).
fn ln_gamma(x: f64) -> f64 {
    use std::f64::consts::PI;
    const G: f64 = 7.0;
    const C: [f64; 9] = [
        0.999_999_999_999_809_9,
        676.520_368_121_885_1,
        -1_259.139_216_722_402_8,
        771.323_428_777_653_1,
        -176.615_029_162_140_6,
        12.507_343_278_686_905,
        -0.138_571_095_265_720_12,
        9.984_369_578_019_572e-6,
        1.505_632_735_149_311_6e-7,
    ];
    if x < 0.5 {
        // Reflection: Γ(x) Γ(1 - x) = π / sin(π x).
        return (PI / (PI * x).sin()).ln() - ln_gamma(1.0 - x);
    }
    let x = x - 1.0;
    let t = x + G + 0.5;
    let a = C
        .iter()
        .enumerate()
        .skip(1)
        .fold(C[0], |acc, (i, &c)| acc + c / (x + i as f64));
    0.5 * (2.0 * PI).ln() + (x + 0.5) * t.ln() - t + a.ln()
}

/// Continued fraction of the incomplete beta function (modified Lentz; Numerical Recipes
/// `betacf`).
fn beta_continued_fraction(a: f64, b: f64, x: f64) -> f64 {
    const TINY: f64 = 1e-300;
    let clamp = |v: f64| if v.abs() < TINY { TINY } else { v };
    let (qab, qap, qam) = (a + b, a + 1.0, a - 1.0);
    let mut c = 1.0;
    let mut d = 1.0 / clamp(1.0 - qab * x / qap);
    let mut h = d;
    for m in 1..10_000 {
        let m = f64::from(m);
        let m2 = 2.0 * m;
        let aa = m * (b - m) * x / ((qam + m2) * (a + m2));
        d = 1.0 / clamp(1.0 + aa * d);
        c = clamp(1.0 + aa / c);
        h *= d * c;
        let aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2));
        d = 1.0 / clamp(1.0 + aa * d);
        c = clamp(1.0 + aa / c);
        let del = d * c;
        h *= del;
        if (del - 1.0).abs() < 1e-15 {
            break;
        }
    }
    h
}

/// Regularised incomplete beta function `I_x(a, b)`, `a, b > 0`, `x` in `[0, 1]`.
fn incomplete_beta(a: f64, b: f64, x: f64) -> f64 {
    if x <= 0.0 {
        return 0.0;
    }
    if x >= 1.0 {
        return 1.0;
    }
    let front =
        (ln_gamma(a + b) - ln_gamma(a) - ln_gamma(b) + a * x.ln() + b * (1.0 - x).ln()).exp();
    if x < (a + 1.0) / (a + b + 2.0) {
        front * beta_continued_fraction(a, b, x) / a
    } else {
        1.0 - front * beta_continued_fraction(b, a, 1.0 - x) / b
    }
}

/// Degrees of freedom above which Student's t is taken as the standard normal (the quantiles
/// differ by less than 1e-6 relative there).
const NORMAL_DF: f64 = 1e7;

/// `P(T > t)` for Student's t with `df` degrees of freedom (`df` may be fractional, as the
/// Welch–Satterthwaite approximation gives it; infinite means the standard normal). NaN for
/// `df <= 0` or NaN input.
pub fn student_t_sf(t: f64, df: f64) -> f64 {
    if t.is_nan() || df.is_nan() || df <= 0.0 {
        return f64::NAN;
    }
    if df > NORMAL_DF {
        return 0.5 * erfc(t / std::f64::consts::SQRT_2);
    }
    if t.is_infinite() {
        return if t > 0.0 { 0.0 } else { 1.0 };
    }
    let tail = 0.5 * incomplete_beta(df / 2.0, 0.5, df / (df + t * t));
    if t >= 0.0 {
        tail
    } else {
        1.0 - tail
    }
}

/// The `p` quantile of Student's t with `df` degrees of freedom (fractional allowed,
/// infinite for the normal), by bisection on [`student_t_sf`]. `None` unless `0 < p < 1`
/// and `df > 0`.
pub fn student_t_quantile(p: f64, df: f64) -> Option<f64> {
    if !(p > 0.0 && p < 1.0) || df.is_nan() || df <= 0.0 {
        return None;
    }
    if p < 0.5 {
        return student_t_quantile(1.0 - p, df).map(|q| -q);
    }
    let tail = 1.0 - p;
    if tail >= 0.5 {
        return Some(0.0);
    }
    let mut hi = 1.0;
    while student_t_sf(hi, df) > tail {
        hi *= 2.0;
        if !hi.is_finite() {
            return None;
        }
    }
    let mut lo = 0.0;
    for _ in 0..200 {
        let mid = 0.5 * (lo + hi);
        if student_t_sf(mid, df) > tail {
            lo = mid;
        } else {
            hi = mid;
        }
        if hi - lo <= 1e-13 * hi {
            break;
        }
    }
    Some(0.5 * (lo + hi))
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

    #[test]
    fn student_t_known_values() {
        // The 9-digit table of the core's t_975 for every df it holds.
        for df in 1..=30u32 {
            let want = commbench_core::stats::t_975(u64::from(df)).unwrap();
            let got = student_t_quantile(0.975, f64::from(df)).unwrap();
            assert!((got - want).abs() < 1e-8 * want, "df {df}: {got} vs {want}");
        }
        // df 1 is Cauchy, tan(pi (p - 1/2)); df 2 has t = (2p - 1) / sqrt(2 p (1 - p)).
        for p in [0.6, 0.9, 0.99375, 0.9999] {
            let cauchy = (std::f64::consts::PI * (p - 0.5)).tan();
            let got = student_t_quantile(p, 1.0).unwrap();
            assert!((got - cauchy).abs() < 1e-9 * cauchy, "{p}: {got} {cauchy}");
            let two = (2.0 * p - 1.0) / (2.0 * p * (1.0 - p)).sqrt();
            let got = student_t_quantile(p, 2.0).unwrap();
            assert!((got - two).abs() < 1e-9 * two, "{p}: {got} {two}");
        }
        // Published: t_{0.995, 4} = 4.604094871, t_{0.999, 10} = 4.143700494.
        assert!((student_t_quantile(0.995, 4.0).unwrap() - 4.604_094_871).abs() < 1e-8);
        assert!((student_t_quantile(0.999, 10.0).unwrap() - 4.143_700_494).abs() < 1e-8);
        // The normal limit, and symmetry.
        let z = student_t_quantile(0.975, f64::INFINITY).unwrap();
        assert!((z - 1.959_963_985).abs() < 1e-6, "{z}");
        assert_eq!(student_t_quantile(0.5, 3.0), Some(0.0));
        assert_eq!(
            student_t_quantile(0.025, 7.5).unwrap(),
            -student_t_quantile(0.975, 7.5).unwrap()
        );
        // Fractional df lies between its neighbours.
        let (q4, q45, q5) = (
            student_t_quantile(0.99, 4.0).unwrap(),
            student_t_quantile(0.99, 4.5).unwrap(),
            student_t_quantile(0.99, 5.0).unwrap(),
        );
        assert!(q4 > q45 && q45 > q5, "{q4} {q45} {q5}");
        // Tail and quantile agree.
        for (p, df) in [(0.9, 3.3), (0.999, 2.0), (0.975, 60.0)] {
            let q = student_t_quantile(p, df).unwrap();
            assert!((student_t_sf(q, df) - (1.0 - p)).abs() < 1e-10);
            assert!((student_t_sf(-q, df) - p).abs() < 1e-10);
        }
        for bad in [
            (0.0, 3.0),
            (1.0, 3.0),
            (0.5, 0.0),
            (f64::NAN, 3.0),
            (0.9, f64::NAN),
        ] {
            assert_eq!(student_t_quantile(bad.0, bad.1), None, "{bad:?}");
        }
        assert!(student_t_sf(1.0, -1.0).is_nan());
    }

    #[test]
    fn hierarchical_bootstrap_of_runs() {
        // Constant trials in every run: only the runs vary. Logs 0, 0.2, 0.4, -0.2 have sample
        // variance 0.2 / 3, so the variance of their mean is 0.2 / 12 = 0.016667.
        let runs: Vec<Vec<f64>> = [0.0f64, 0.2, 0.4, -0.2]
            .iter()
            .map(|l| vec![l.exp(); 31])
            .collect();
        let e = hierarchical_log_median(&runs, 4000, 5).unwrap();
        assert_eq!(e.runs, 4);
        assert!((e.log_estimate - 0.1).abs() < 1e-12, "{e:?}");
        assert!((e.variance - 0.2 / 12.0).abs() < 0.1 * 0.2 / 12.0, "{e:?}");
        assert_eq!(e, hierarchical_log_median(&runs, 4000, 5).unwrap());
        // One run: the variance of its median alone, here of 1..=101 (median 51).
        let one: Vec<f64> = (1..=101).map(f64::from).collect();
        let e = hierarchical_log_median(std::slice::from_ref(&one), 2000, 1).unwrap();
        assert!((e.log_estimate - 51f64.ln()).abs() < 1e-12);
        // The median of 101 uniform values has a standard error near 101 / (2 sqrt(101)) = 5,
        // about 0.1 in log.
        assert!(e.variance.sqrt() > 0.05 && e.variance.sqrt() < 0.2, "{e:?}");
        // The same run twice: its trials vary, the runs do not; the factor n / (n - 1) = 2
        // and the mean of two independent medians (variance / 2) cancel.
        let two = hierarchical_log_median(&[one.clone(), one.clone()], 2000, 1).unwrap();
        assert!(
            (two.variance / e.variance - 1.0).abs() < 0.2,
            "{two:?} {e:?}"
        );
        // Identical constant runs: no variance.
        let c = hierarchical_log_median(&[vec![2.0; 5], vec![2.0; 9]], 100, 1).unwrap();
        assert_eq!(c.variance, 0.0);
        let none: [Vec<f64>; 0] = [];
        assert_eq!(hierarchical_log_median(&none, 10, 1), None);
        assert_eq!(hierarchical_log_median(&[vec![1.0], vec![]], 10, 1), None);
        assert_eq!(hierarchical_log_median(&[vec![0.0, 0.0, 1.0]], 10, 1), None);
        assert_eq!(hierarchical_log_median(&[vec![1.0]], 0, 1), None);
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
