//! Statistics over timing samples (plain `f64`, any unit).
//!
//! The statistics follow seed 000 (Luecke et al. 2009, "Measuring MPI latency and
//! communication rates for small messages"):
//!
//! * §3.4 lists what is reported for every run: minimum, median, average and maximum,
//!   variance, standard deviation, coefficient of variation, standard error, relative
//!   standard error, and the distribution of the data ([`summarize`], [`Summary`]).
//! * §3.4 also repeats the analysis on data filtered to the trials no larger than
//!   `cut_coef` times the median ([`cut_filter_len`]).
//! * Appendix A prints the distribution as fixed-width bins ([`histogram`]) and
//!   Appendix B as every distinct time with its frequency ([`distinct_frequencies`]).
//! * Appendix C is a complete summary output; its numbers are used in the tests.
//!
//! Beyond the seed, [`Summary`] carries tail percentiles and 95 % confidence intervals of
//! the median and the mean. Only descriptive statistics live here; fitted lines, the
//! bootstrap and rank tests belong to the analysis on rank 0, which builds on
//! [`CompensatedSum`] and [`Xoshiro256`].
//!
//! Nothing here panics: empty or degenerate input gives `None`, and NaN samples (which the
//! caller is expected to keep out) only make results NaN or meaningless, never a panic.

use serde::{Deserialize, Serialize};

/// Largest number of bins [`histogram`] accepts (2^24); more gives `None`.
pub const MAX_HISTOGRAM_BINS: usize = 1 << 24;

/// Largest sample count for which [`median_ci_ranks`] uses the exact binomial
/// distribution; above it the normal approximation is used.
pub const EXACT_MEDIAN_CI_MAX_N: u64 = 1000;

/// Two-sided 95 % standard normal quantile, `z_{0.975}`.
const Z_975: f64 = 1.959_963_984_540_054;

/// Sort ascending with the IEEE 754 total order ([`f64::total_cmp`]).
///
/// Keeping NaN out of the data is the caller's job; if present, positive NaNs end up last
/// and negative NaNs first.
pub fn sort_samples(v: &mut [f64]) {
    v.sort_unstable_by(f64::total_cmp);
}

/// Linear interpolation `a + f (b - a)` for `a <= b` and `f` in `[0, 1)`, kept inside
/// `[a, b]` and safe when `b - a` overflows.
pub fn lerp(a: f64, b: f64, f: f64) -> f64 {
    if f == 0.0 {
        return a;
    }
    let d = b - a;
    let r = if d.is_finite() {
        a + f * d
    } else {
        a * (1.0 - f) + b * f
    };
    if r < a {
        a
    } else if r > b {
        b
    } else {
        r
    }
}

/// Quantile of SORTED data for probability `p` in `[0, 1]`.
///
/// Hyndman–Fan type 7 (linear interpolation between closest ranks, the default of numpy
/// and R): with `h = (n - 1) p`, the result is `x[⌊h⌋] + (h - ⌊h⌋) (x[⌊h⌋+1] - x[⌊h⌋])`
/// (0-based). `None` on empty data or `p` outside `[0, 1]` (NaN included).
pub fn quantile(sorted: &[f64], p: f64) -> Option<f64> {
    if sorted.is_empty() || !(0.0..=1.0).contains(&p) {
        return None;
    }
    let last = sorted.len() - 1;
    let h = last as f64 * p;
    let lo = (h.floor() as usize).min(last);
    let hi = (lo + 1).min(last);
    let frac = h - lo as f64;
    Some(lerp(sorted[lo], sorted[hi], frac))
}

/// Median of SORTED data: the middle value for odd `n`, the mean of the two middle values
/// for even `n` (seed 000 §3.4). `None` on empty data.
pub fn median(sorted: &[f64]) -> Option<f64> {
    let n = sorted.len();
    if n == 0 {
        return None;
    }
    if n % 2 == 1 {
        Some(sorted[n / 2])
    } else {
        Some(lerp(sorted[n / 2 - 1], sorted[n / 2], 0.5))
    }
}

/// A closed interval `[lo, hi]`, used for confidence intervals.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Interval {
    /// Lower end.
    #[serde(deserialize_with = "f64_or_nan")]
    pub lo: f64,
    /// Upper end.
    #[serde(deserialize_with = "f64_or_nan")]
    pub hi: f64,
}

impl Interval {
    /// Whether `x` lies in `[lo, hi]`.
    pub fn contains(&self, x: f64) -> bool {
        self.lo <= x && x <= self.hi
    }
}

/// The seed 000 §3.4 statistics of one sample set, plus percentiles and 95 % confidence
/// intervals.
///
/// Ratios (`cv`, `rel_std_err`) are FRACTIONS, not percent. Seed 000 Appendix C prints the
/// coefficient of variation in percent: its `0.2892E+02` for standard deviation 0.3825 and
/// average 1.3227 is 28.92 %, i.e. `cv == 0.2892` here; its relative standard error
/// `0.9985E-04` is already a fraction and equals `rel_std_err`. When the mean is zero the
/// ratios are infinite or NaN (which `serde_json` writes as `null`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// Number of samples.
    pub n: u64,
    /// Smallest sample.
    #[serde(deserialize_with = "f64_or_nan")]
    pub min: f64,
    /// Median ([`median`]).
    #[serde(deserialize_with = "f64_or_nan")]
    pub median: f64,
    /// Arithmetic mean ("average time" in seed 000), computed with compensated two-pass
    /// summation.
    #[serde(deserialize_with = "f64_or_nan")]
    pub mean: f64,
    /// Largest sample.
    #[serde(deserialize_with = "f64_or_nan")]
    pub max: f64,
    /// Sample variance with divisor `n - 1` (0 when `n == 1`).
    #[serde(deserialize_with = "f64_or_nan")]
    pub variance: f64,
    /// Sample standard deviation, `sqrt(variance)`.
    #[serde(deserialize_with = "f64_or_nan")]
    pub std_dev: f64,
    /// Coefficient of variation `std_dev / mean` as a fraction (seed 000 prints percent).
    #[serde(deserialize_with = "f64_or_nan")]
    pub cv: f64,
    /// Standard error of the mean, `std_dev / sqrt(n)`.
    #[serde(deserialize_with = "f64_or_nan")]
    pub std_err: f64,
    /// Relative standard error `std_err / mean` as a fraction (seed 000 §3.4).
    #[serde(deserialize_with = "f64_or_nan")]
    pub rel_std_err: f64,
    /// 50th percentile (type-7 [`quantile`]; equals the median).
    #[serde(deserialize_with = "f64_or_nan")]
    pub p50: f64,
    /// 90th percentile.
    #[serde(deserialize_with = "f64_or_nan")]
    pub p90: f64,
    /// 99th percentile.
    #[serde(deserialize_with = "f64_or_nan")]
    pub p99: f64,
    /// 99.9th percentile.
    #[serde(deserialize_with = "f64_or_nan")]
    pub p999: f64,
    /// 99.99th percentile.
    #[serde(deserialize_with = "f64_or_nan")]
    pub p9999: f64,
    /// Distribution-free 95 % confidence interval of the median from order statistics
    /// (see [`median_ci_ranks`]); `(min, max)` when `n <= 5`, where no pair of order
    /// statistics reaches 95 % coverage.
    pub ci95_median: Interval,
    /// 95 % confidence interval of the mean, `mean ± t_{0.975, n-1} std_err`
    /// (see [`t_975`]); the degenerate `(min, max)` = `(x, x)` when `n == 1`. When every
    /// sample is non-negative (a time) the lower end is at least 0: see
    /// `ci95_mean_clipped`.
    pub ci95_mean: Interval,
    /// The t-interval of the mean reached below 0 although no sample is negative (a few
    /// large outliers among small times inflate the standard error), and its lower end was
    /// clipped at 0, the physical bound of a time: the mean of a non-negative quantity cannot
    /// be negative, and removing impossible values keeps the interval's coverage. Absent
    /// (false) otherwise and in documents written before it was recorded.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub ci95_mean_clipped: bool,
}

/// Neumaier (improved Kahan–Babuška) compensated sum.
#[derive(Debug, Default, Clone, Copy)]
pub struct CompensatedSum {
    sum: f64,
    comp: f64,
}

impl CompensatedSum {
    /// Add `x`.
    pub fn add(&mut self, x: f64) {
        let t = self.sum + x;
        if self.sum.abs() >= x.abs() {
            self.comp += (self.sum - t) + x;
        } else {
            self.comp += (x - t) + self.sum;
        }
        self.sum = t;
    }

    /// The sum so far.
    pub fn value(&self) -> f64 {
        self.sum + self.comp
    }
}

/// Mean and sample variance (divisor `n - 1`, 0 for `n == 1`) by the corrected two-pass
/// algorithm with compensated sums, accurate on 2^25 samples. `None` on empty data.
pub fn mean_variance(samples: &[f64]) -> Option<(f64, f64)> {
    if samples.is_empty() {
        return None;
    }
    let n = samples.len() as f64;
    let mut s = CompensatedSum::default();
    for &x in samples {
        s.add(x);
    }
    let mean = s.value() / n;
    if samples.len() == 1 {
        return Some((mean, 0.0));
    }
    let mut sq = CompensatedSum::default();
    let mut lin = CompensatedSum::default();
    for &x in samples {
        let d = x - mean;
        sq.add(d * d);
        lin.add(d);
    }
    let l = lin.value();
    let var = ((sq.value() - l * l / n) / (n - 1.0)).max(0.0);
    Some((mean, var))
}

/// The ratios seed 000 §3.4 derives from mean and standard deviation.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Spread {
    /// Coefficient of variation `std_dev / mean`, a fraction.
    pub cv: f64,
    /// Standard error `std_dev / sqrt(n)`.
    pub std_err: f64,
    /// Relative standard error `std_err / mean`, a fraction.
    pub rel_std_err: f64,
}

/// Coefficient of variation, standard error and relative standard error from `n`, the
/// mean and the standard deviation (seed 000 §3.4, Appendix C). `None` when `n == 0`.
pub fn spread(n: u64, mean: f64, std_dev: f64) -> Option<Spread> {
    if n == 0 {
        return None;
    }
    let std_err = std_dev / (n as f64).sqrt();
    Some(Spread {
        cv: std_dev / mean,
        std_err,
        rel_std_err: std_err / mean,
    })
}

/// Student t quantile `t_{0.975, df}` (two-sided 95 %).
///
/// Exact table values (9 digits) for `df` 1..=30; above, the Cornish–Fisher expansion in
/// `1/df` around the normal quantile 1.95996, which is within 1e-5 of the exact value for
/// `df > 30` and tends to 1.96 for large `df`. `None` for `df == 0`.
pub fn t_975(df: u64) -> Option<f64> {
    const TABLE: [f64; 30] = [
        12.706_204_736,
        4.302_652_730,
        3.182_446_305,
        2.776_445_105,
        2.570_581_836,
        2.446_911_851,
        2.364_624_252,
        2.306_004_135,
        2.262_157_163,
        2.228_138_852,
        2.200_985_160,
        2.178_812_830,
        2.160_368_656,
        2.144_786_688,
        2.131_449_546,
        2.119_905_299,
        2.109_815_578,
        2.100_922_040,
        2.093_024_054,
        2.085_963_447,
        2.079_613_845,
        2.073_873_068,
        2.068_657_610,
        2.063_898_562,
        2.059_538_553,
        2.055_529_439,
        2.051_830_516,
        2.048_407_142,
        2.045_229_642,
        2.042_272_456,
    ];
    match df {
        0 => None,
        1..=30 => TABLE.get(df as usize - 1).copied(),
        _ => {
            let z = Z_975;
            let v = df as f64;
            let z2 = z * z;
            let g1 = (z2 + 1.0) * z / 4.0;
            let g2 = ((5.0 * z2 + 16.0) * z2 + 3.0) * z / 96.0;
            let g3 = (((3.0 * z2 + 19.0) * z2 + 17.0) * z2 - 15.0) * z / 384.0;
            let g4 =
                ((((79.0 * z2 + 776.0) * z2 + 1482.0) * z2 - 1920.0) * z2 - 945.0) * z / 92160.0;
            Some(z + g1 / v + g2 / (v * v) + g3 / (v * v * v) + g4 / (v * v * v * v))
        }
    }
}

/// Largest `j >= 0` with `P(B <= j - 1) <= alpha_half` for `B ~ Binomial(n, 1/2)`, from
/// the exact probabilities `P(B = i)` built up iteratively. Only for
/// `n <= EXACT_MEDIAN_CI_MAX_N`, where `2^-n` is still a normal `f64`.
fn binomial_half_lower_rank(n: u64, alpha_half: f64) -> u64 {
    let mut pmf = 0.5_f64.powi(i32::try_from(n).unwrap_or(i32::MAX));
    let mut cdf = 0.0;
    let mut j = 0;
    while j < n {
        cdf += pmf;
        if cdf > alpha_half {
            break;
        }
        j += 1;
        pmf *= (n - (j - 1)) as f64 / j as f64;
    }
    j
}

/// 0-based indices `(lo, hi)` into SORTED data of `n` samples such that
/// `[x[lo], x[hi]]` is a distribution-free confidence interval of the median with
/// coverage at least 95 %.
///
/// The number `B` of samples below the true median is Binomial(n, 1/2), so the interval
/// between the `j`-th and `(n + 1 - j)`-th order statistics (1-based) covers the median
/// with probability `1 - 2 P(B <= j - 1)`. For `n <= 1000` the largest `j` with
/// `P(B <= j - 1) <= 0.025` is found from the exact binomial distribution; above, from the
/// normal approximation with continuity correction,
/// `j = ⌊n/2 + 1/2 - 1.96 sqrt(n)/2⌋`. When `n <= 5` even `(min, max)` covers less than
/// 95 % (`1 - 2^(1-n)`); `(0, n - 1)` is returned anyway and the caller should treat the
/// interval as indicative only. `None` when `n == 0`.
pub fn median_ci_ranks(n: u64) -> Option<(u64, u64)> {
    median_ci_ranks_at(n, 0.95)
}

/// [`median_ci_ranks`] at coverage `level` (in `(0, 1)`; 0.95 gives exactly
/// [`median_ci_ranks`]): the largest `j` with `P(B <= j - 1) <= (1 - level) / 2`, exact for
/// `n <= 1000`, from the normal approximation above with `z` = [`normal_quantile`]`((1 +
/// level) / 2)`. `(0, n - 1)` when even the extremes cover less than `level`
/// ([`min_samples_for_median_ci`] says from which `n` they do not). `None` when `n == 0` or
/// `level` is outside `(0, 1)`.
pub fn median_ci_ranks_at(n: u64, level: f64) -> Option<(u64, u64)> {
    if n == 0 || !(level > 0.0 && level < 1.0) {
        return None;
    }
    let alpha_half = (1.0 - level) / 2.0;
    let j = if n <= EXACT_MEDIAN_CI_MAX_N {
        binomial_half_lower_rank(n, alpha_half)
    } else {
        let z = if level == 0.95 {
            Z_975
        } else {
            normal_quantile(1.0 - alpha_half)?
        };
        let nf = n as f64;
        let x = (nf / 2.0 + 0.5 - z * nf.sqrt() / 2.0).floor();
        if x < 0.0 {
            0
        } else {
            x as u64
        }
    };
    let j = j.clamp(1, n.div_ceil(2));
    Some((j - 1, n - j))
}

/// The fewest samples whose extremes `(min, max)` cover the median with probability at least
/// `level`: the smallest `n` with `1 - 2^(1-n) >= level` (6 at 95 %, 8 at 99 %), below
/// which no distribution-free interval of the median has that coverage. `None` for a `level`
/// outside `(0, 1)`.
pub fn min_samples_for_median_ci(level: f64) -> Option<u64> {
    if !(level > 0.0 && level < 1.0) {
        return None;
    }
    (1..=64u64).find(|&n| 1.0 - 0.5f64.powi(n as i32 - 1) >= level)
}

/// The standard normal quantile `Φ^-1(p)` for `p` in `(0, 1)` (Acklam's rational
/// approximation, relative error below 1.2e-9); `None` outside `(0, 1)`.
pub fn normal_quantile(p: f64) -> Option<f64> {
    if !(p > 0.0 && p < 1.0) {
        return None;
    }
    const A: [f64; 6] = [
        -3.969_683_028_665_376e1,
        2.209_460_984_245_205e2,
        -2.759_285_104_469_687e2,
        1.383_577_518_672_69e2,
        -3.066_479_806_614_716e1,
        2.506_628_277_459_239,
    ];
    const B: [f64; 5] = [
        -5.447_609_879_822_406e1,
        1.615_858_368_580_409e2,
        -1.556_989_798_598_866e2,
        6.680_131_188_771_972e1,
        -1.328_068_155_288_572e1,
    ];
    const C: [f64; 6] = [
        -7.784_894_002_430_293e-3,
        -3.223_964_580_411_365e-1,
        -2.400_758_277_161_838,
        -2.549_732_539_343_734,
        4.374_664_141_464_968,
        2.938_163_982_698_783,
    ];
    const D: [f64; 4] = [
        7.784_695_709_041_462e-3,
        3.224_671_290_700_398e-1,
        2.445_134_137_142_996,
        3.754_408_661_907_416,
    ];
    let tail = |q: f64| {
        (((((C[0] * q + C[1]) * q + C[2]) * q + C[3]) * q + C[4]) * q + C[5])
            / ((((D[0] * q + D[1]) * q + D[2]) * q + D[3]) * q + 1.0)
    };
    let x = if p < 0.02425 {
        tail((-2.0 * p.ln()).sqrt())
    } else if p > 1.0 - 0.02425 {
        -tail((-2.0 * (1.0 - p).ln()).sqrt())
    } else {
        let q = p - 0.5;
        let r = q * q;
        (((((A[0] * r + A[1]) * r + A[2]) * r + A[3]) * r + A[4]) * r + A[5]) * q
            / (((((B[0] * r + B[1]) * r + B[2]) * r + B[3]) * r + B[4]) * r + 1.0)
    };
    Some(x)
}

/// Summary of SORTED samples (seed 000 §3.4); `None` when empty.
///
/// Mean and variance use the corrected two-pass algorithm with compensated sums
/// ([`mean_variance`]), so the result stays accurate on 2^25 samples.
pub fn summarize(sorted: &[f64]) -> Option<Summary> {
    let n = sorted.len();
    let (&min, &max) = (sorted.first()?, sorted.last()?);
    let med = median(sorted)?;
    let (mean, variance) = mean_variance(sorted)?;
    let std_dev = variance.sqrt();
    let n64 = n as u64;
    let sp = spread(n64, mean, std_dev)?;
    let q = |p: f64| quantile(sorted, p).unwrap_or(f64::NAN);
    let (lo, hi) = median_ci_ranks(n64)?;
    let ci95_median = Interval {
        lo: sorted.get(lo as usize).copied().unwrap_or(min),
        hi: sorted.get(hi as usize).copied().unwrap_or(max),
    };
    let mut ci95_mean = match t_975(n64 - 1) {
        Some(t) => Interval {
            lo: mean - t * sp.std_err,
            hi: mean + t * sp.std_err,
        },
        None => Interval { lo: min, hi: max },
    };
    let ci95_mean_clipped = min >= 0.0 && ci95_mean.lo < 0.0;
    if ci95_mean_clipped {
        ci95_mean.lo = 0.0;
    }
    Some(Summary {
        n: n64,
        min,
        median: med,
        mean,
        max,
        variance,
        std_dev,
        cv: sp.cv,
        std_err: sp.std_err,
        rel_std_err: sp.rel_std_err,
        p50: q(0.5),
        p90: q(0.9),
        p99: q(0.99),
        p999: q(0.999),
        p9999: q(0.9999),
        ci95_median,
        ci95_mean,
        ci95_mean_clipped,
    })
}

/// Seed 000 §3.4 filter: how many leading elements of SORTED data are `<= cut_coef *
/// median`.
///
/// The seed removes "all timing trials that are larger than 2 times the median" (its
/// `cut_coef` is 2.0); because the data is sorted, the kept trials are the prefix
/// `&sorted[..cut_filter_len(sorted, cut_coef)]` and no copy is needed. Appendix C keeps
/// 8387483 of 8388608 trials this way. Returns 0 for empty data or a NaN `cut_coef`.
/// Meant for positive times: with a negative median the threshold lies below it.
pub fn cut_filter_len(sorted: &[f64], cut_coef: f64) -> usize {
    let Some(med) = median(sorted) else {
        return 0;
    };
    let threshold = cut_coef * med;
    sorted.partition_point(|&x| x <= threshold)
}

/// Seed 000 Appendix A binned distribution.
///
/// `counts[k]` counts values in `[origin + k * bin_width, origin + (k + 1) * bin_width)`,
/// `overflow` those at or above the last bin's right edge, `underflow` those below `origin`.
/// The origin is the caller's ([`histogram`]'s argument); the timer's bins start at 0.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Histogram {
    /// Width of every bin; bin `k` starts at `origin + k * bin_width`.
    pub bin_width: f64,
    /// Count per bin.
    pub counts: Vec<u64>,
    /// Values at or above the end of the last bin (infinities included).
    pub overflow: u64,
    /// Values below the origin.
    pub underflow: u64,
}

/// Bin `(value, count)` pairs (any order; a plain sample is `(x, 1)`) into `nbins` bins of
/// width `bin_width` starting at `origin`, as in seed 000 Appendix A
/// (`0.80 <= times < 1.00 with count = 5118946`).
///
/// Bin edges are the floating-point numbers `origin + k as f64 * bin_width`, the same numbers
/// a report prints, and every value lands in the bin whose computed edges enclose it. NaN
/// values are counted nowhere. `None` for `origin` not finite, `bin_width` not finite or
/// `<= 0`, `nbins == 0` or `nbins > MAX_HISTOGRAM_BINS`.
pub fn histogram(
    values: impl IntoIterator<Item = (f64, u64)>,
    origin: f64,
    bin_width: f64,
    nbins: usize,
) -> Option<Histogram> {
    if !origin.is_finite()
        || !bin_width.is_finite()
        || bin_width <= 0.0
        || nbins == 0
        || nbins > MAX_HISTOGRAM_BINS
    {
        return None;
    }
    let mut h = Histogram {
        bin_width,
        counts: vec![0; nbins],
        overflow: 0,
        underflow: 0,
    };
    let edge = |k: usize| origin + k as f64 * bin_width;
    let end = edge(nbins);
    for (x, count) in values {
        if x.is_nan() {
            continue;
        }
        if x < origin {
            h.underflow += count;
        } else if x >= end {
            h.overflow += count;
        } else {
            let mut k = (((x - origin) / bin_width).floor() as usize).min(nbins - 1);
            while k > 0 && edge(k) > x {
                k -= 1;
            }
            while k + 1 < nbins && edge(k + 1) <= x {
                k += 1;
            }
            if let Some(c) = h.counts.get_mut(k) {
                *c += count;
            }
        }
    }
    Some(h)
}

/// The smallest of 1, 2 or 5 times a power of ten that is at least `x` (a relative
/// 1e-12 below counts as reaching it): bin widths and axis steps people read easily.
/// 1 for `x` not finite or `<= 0`.
pub fn nice_width(x: f64) -> f64 {
    if !(x.is_finite() && x > 0.0) {
        return 1.0;
    }
    let p = 10f64.powf(x.log10().floor());
    for m in [1.0, 2.0, 5.0, 10.0] {
        if m * p >= x * (1.0 - 1e-12) {
            return m * p;
        }
    }
    10.0 * p
}

/// Seed 000 Appendix B "time = 1.431 with frequency = 3480329": every distinct value of
/// SORTED data with its count, ascending.
///
/// Returns at most `max_distinct` entries (the smallest values) and the number of
/// further distinct values left out (0 when nothing was left out). Values are distinct
/// under [`f64::total_cmp`], so `-0.0` and `0.0` are separate entries.
pub fn distinct_frequencies(sorted: &[f64], max_distinct: usize) -> (Vec<(f64, u64)>, usize) {
    let mut out: Vec<(f64, u64)> = Vec::new();
    let mut left_out = 0usize;
    let mut i = 0;
    while let Some(&v) = sorted.get(i) {
        let run = sorted
            .get(i..)
            .map_or(0, |rest| {
                rest.iter().take_while(|y| y.total_cmp(&v).is_eq()).count()
            })
            .max(1);
        if out.len() < max_distinct {
            out.push((v, run as u64));
        } else {
            left_out += 1;
        }
        i += run;
    }
    (out, left_out)
}

/// Small deterministic generator: xoshiro256** seeded through splitmix64.
#[derive(Debug, Clone)]
pub struct Xoshiro256 {
    s: [u64; 4],
}

impl Xoshiro256 {
    /// A generator seeded from `seed`.
    pub fn new(seed: u64) -> Self {
        let mut sm = seed;
        let mut next = || {
            sm = sm.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = sm;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^ (z >> 31)
        };
        Xoshiro256 {
            s: [next(), next(), next(), next()],
        }
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        let result = self.s[1].wrapping_mul(5).rotate_left(7).wrapping_mul(9);
        let t = self.s[1] << 17;
        self.s[2] ^= self.s[0];
        self.s[3] ^= self.s[1];
        self.s[1] ^= self.s[2];
        self.s[0] ^= self.s[3];
        self.s[2] ^= t;
        self.s[3] = self.s[3].rotate_left(45);
        result
    }

    /// Uniform index in `0..n` for `n >= 1` (Lemire's unbiased multiply-shift).
    pub fn below(&mut self, n: usize) -> usize {
        let n = n as u64;
        if n <= 1 {
            return 0;
        }
        let threshold = n.wrapping_neg() % n;
        loop {
            let m = u128::from(self.next_u64()) * u128::from(n);
            if (m as u64) >= threshold {
                return (m >> 64) as usize;
            }
        }
    }

    /// Uniform in `(0, 1)`: the middle of one of 2^53 equal steps, never 0 nor 1 (a draw
    /// that may be taken a logarithm of).
    pub fn unit(&mut self) -> f64 {
        ((self.next_u64() >> 11) as f64 + 0.5) / (1u64 << 53) as f64
    }

    /// Uniform in `(a, b)`.
    pub fn range(&mut self, a: f64, b: f64) -> f64 {
        a + (b - a) * self.unit()
    }

    /// Log-uniform in `(a, b)`, both positive.
    pub fn log_range(&mut self, a: f64, b: f64) -> f64 {
        self.range(a.ln(), b.ln()).exp()
    }

    /// A standard normal draw (Box-Muller, two uniform draws, the first taken a logarithm of).
    pub fn normal(&mut self) -> f64 {
        let (u, v) = (self.unit(), self.unit());
        (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()
    }

    /// An exponential draw of mean 1.
    pub fn exponential(&mut self) -> f64 {
        -self.unit().ln()
    }
}

/// Deserialise an `f64` written by serde_json, where `null` stands for a non-finite value
/// (JSON has no NaN): `null` reads back as NaN.
pub fn f64_or_nan<'de, D: serde::Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    use serde::Deserialize;
    Ok(Option::<f64>::deserialize(d)?.unwrap_or(f64::NAN))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The derived draws have their distributions' moments and stay in their ranges.
    #[test]
    fn derived_draws_have_their_moments() {
        let mut rng = Xoshiro256::new(0x00d1_5757);
        let n = 200_000;
        let normal: Vec<f64> = (0..n).map(|_| rng.normal()).collect();
        let mean = normal.iter().sum::<f64>() / n as f64;
        let var = normal.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
        assert!(
            mean.abs() < 0.01 && (var - 1.0).abs() < 0.02,
            "{mean} {var}"
        );
        let expo = (0..n).map(|_| rng.exponential()).sum::<f64>() / n as f64;
        assert!((expo - 1.0).abs() < 0.01, "{expo}");
        for _ in 0..10_000 {
            let x = rng.log_range(1e-3, 1e3);
            assert!((1e-3..=1e3).contains(&x), "{x}");
        }
        let below = (0..n).filter(|_| rng.log_range(1e-3, 1e3) < 1.0).count();
        assert!((below as f64 / n as f64 - 0.5).abs() < 0.01, "{below}");
    }

    fn close(a: f64, b: f64, tol: f64) -> bool {
        (a - b).abs() <= tol * b.abs().max(1.0)
    }

    #[test]
    fn sort_uses_total_order() {
        let mut v = [3.0, -1.0, 2.5, 0.0, -0.0];
        sort_samples(&mut v);
        assert_eq!(v, [-1.0, -0.0, 0.0, 2.5, 3.0]);
        assert!(v[1].is_sign_negative());
    }

    #[test]
    fn quantile_type7_matches_numpy() {
        let d = [1.0, 2.0, 3.0, 4.0];
        // numpy.quantile([1,2,3,4], p) with the default (linear) method.
        assert!(close(quantile(&d, 0.9).unwrap(), 3.7, 1e-12));
        assert!(close(quantile(&d, 0.5).unwrap(), 2.5, 1e-12));
        assert!(close(quantile(&d, 0.25).unwrap(), 1.75, 1e-12));
        assert!(close(quantile(&d, 0.75).unwrap(), 3.25, 1e-12));
        assert_eq!(quantile(&d, 0.0), Some(1.0));
        assert_eq!(quantile(&d, 1.0), Some(4.0));
        let e = [10.0, 20.0, 30.0, 40.0, 50.0];
        // numpy.quantile([10,20,30,40,50], 0.99) == 49.6
        assert!(close(quantile(&e, 0.99).unwrap(), 49.6, 1e-12));
        assert!(close(quantile(&e, 0.1).unwrap(), 14.0, 1e-12));
        assert_eq!(quantile(&[7.0], 0.3), Some(7.0));
    }

    #[test]
    fn quantile_rejects_bad_input() {
        assert_eq!(quantile(&[], 0.5), None);
        assert_eq!(quantile(&[1.0], -0.1), None);
        assert_eq!(quantile(&[1.0], 1.1), None);
        assert_eq!(quantile(&[1.0], f64::NAN), None);
        // Overflowing differences stay finite and ordered.
        let q = quantile(&[-f64::MAX, f64::MAX], 0.5).unwrap();
        assert!(q.is_finite());
    }

    #[test]
    fn median_odd_even_empty() {
        assert_eq!(median(&[]), None);
        assert_eq!(median(&[5.0]), Some(5.0));
        assert_eq!(median(&[1.0, 2.0, 9.0]), Some(2.0));
        assert_eq!(median(&[1.0, 2.0, 4.0, 9.0]), Some(3.0));
    }

    #[test]
    fn summarize_small_by_hand() {
        let d = [1.0, 2.0, 3.0, 4.0];
        let s = summarize(&d).unwrap();
        assert_eq!(s.n, 4);
        assert_eq!((s.min, s.max), (1.0, 4.0));
        assert_eq!(s.median, 2.5);
        assert_eq!(s.mean, 2.5);
        // Sum of squares 1.25*2 + 0.25*2 = 5, / 3.
        assert!(close(s.variance, 5.0 / 3.0, 1e-14));
        assert!(close(s.std_dev, (5.0f64 / 3.0).sqrt(), 1e-14));
        assert!(close(s.std_err, s.std_dev / 2.0, 1e-14));
        assert!(close(s.cv, s.std_dev / 2.5, 1e-14));
        assert!(close(s.rel_std_err, s.std_err / 2.5, 1e-14));
        assert!(close(s.p90, 3.7, 1e-12));
        // n = 4 is too small for 95 % coverage: (min, max).
        assert_eq!(s.ci95_median, Interval { lo: 1.0, hi: 4.0 });
        // t_{0.975,3} = 3.182446305
        assert!(close(
            s.ci95_mean.hi - s.mean,
            3.182_446_305 * s.std_err,
            1e-9
        ));
        assert_eq!(summarize(&[]), None);
    }

    #[test]
    fn summarize_single_sample() {
        let s = summarize(&[2.0]).unwrap();
        assert_eq!(s.variance, 0.0);
        assert_eq!(s.std_err, 0.0);
        assert_eq!(s.cv, 0.0);
        assert_eq!(s.ci95_mean, Interval { lo: 2.0, hi: 2.0 });
        assert_eq!(s.ci95_median, Interval { lo: 2.0, hi: 2.0 });
        assert_eq!(s.p9999, 2.0);
    }

    #[test]
    fn ci_of_mean_of_non_negative_times_stays_non_negative() {
        // One large outlier among small times: mean 100.9, t-interval reaches below 0.
        let mut d = vec![1.0; 9];
        d.push(1000.0);
        let s = summarize(&d).unwrap();
        assert!(s.mean - t_975(9).unwrap() * s.std_err < 0.0);
        assert_eq!(s.ci95_mean.lo, 0.0);
        assert!(s.ci95_mean_clipped && s.ci95_mean.contains(s.mean));
        assert!(close(
            s.ci95_mean.hi,
            s.mean + t_975(9).unwrap() * s.std_err,
            1e-12
        ));
        let v = serde_json::to_value(&s).unwrap();
        assert_eq!(v["ci95_mean_clipped"], true);
        // Data that may be negative keep the t-interval, and the flag is left out.
        let mut d: Vec<f64> = d.iter().map(|x| x - 2.0).collect();
        sort_samples(&mut d);
        let s = summarize(&d).unwrap();
        assert!(s.ci95_mean.lo < 0.0 && !s.ci95_mean_clipped);
        let v = serde_json::to_value(&s).unwrap();
        assert!(v.get("ci95_mean_clipped").is_none());
        let back: Summary = serde_json::from_value(v).unwrap();
        assert_eq!(back, s);
    }

    #[test]
    fn ci_of_mean_against_t_table_n10() {
        // 1..=10: mean 5.5, variance 55/6, std_err sqrt(55/6)/sqrt(10);
        // t_{0.975, 9} = 2.262 (t-table).
        let d: Vec<f64> = (1..=10).map(f64::from).collect();
        let s = summarize(&d).unwrap();
        let se = (55.0f64 / 6.0).sqrt() / 10f64.sqrt();
        assert!(close(s.std_err, se, 1e-14));
        let half = 2.262 * se;
        assert!((s.ci95_mean.lo - (5.5 - half)).abs() < 1e-3);
        assert!((s.ci95_mean.hi - (5.5 + half)).abs() < 1e-3);
        assert!(close(s.ci95_mean.hi, 7.665_850_59, 1e-8));
    }

    #[test]
    fn t_quantile_table_and_expansion() {
        assert_eq!(t_975(0), None);
        assert!(close(t_975(1).unwrap(), 12.706, 1e-4));
        assert!(close(t_975(9).unwrap(), 2.262, 1e-3));
        // Published values beyond the table: df 40, 60, 120, 1000.
        for (df, exact) in [
            (31, 2.039_513_446),
            (40, 2.021_075_390),
            (60, 2.000_297_822),
            (120, 1.979_930_405),
            (1000, 1.962_339_081),
        ] {
            assert!((t_975(df).unwrap() - exact).abs() < 1e-5, "df {df}");
        }
        assert!((t_975(u64::MAX).unwrap() - 1.96).abs() < 1e-3);
        // Monotone decreasing.
        let mut prev = f64::INFINITY;
        for df in 1..500 {
            let t = t_975(df).unwrap();
            assert!(t < prev, "df {df}");
            prev = t;
        }
    }

    #[test]
    fn seed_000_appendix_c_consistency() {
        // Unfiltered: n = 2^23, sd 0.3825, mean 1.3227.
        let sp = spread(8_388_608, 1.3227, 0.3825).unwrap();
        assert!((sp.std_err - 0.1321e-3).abs() < 0.00005e-3);
        assert!((sp.rel_std_err - 0.9985e-4).abs() < 0.0005e-4);
        assert!((sp.cv - 0.2892).abs() < 0.00005); // printed 0.2892E+02 percent
        assert!((0.3825f64 * 0.3825 - 0.1463).abs() < 0.00005);
        // Filtered: n = 8387483, sd 0.3473E-01, mean 1.3219.
        let sp = spread(8_387_483, 1.3219, 0.3473e-1).unwrap();
        assert!((sp.std_err - 0.1199e-4).abs() < 0.0005e-4);
        assert!((sp.rel_std_err - 0.9073e-5).abs() < 0.001e-5);
        assert!((sp.cv - 0.02628).abs() < 0.00001);
        assert_eq!(spread(0, 1.0, 1.0), None);
    }

    #[test]
    fn mean_variance_accurate_on_2_pow_25() {
        // Values 1e9 + {0.25, 0.75}: naive one-pass E[x^2] - E[x]^2 loses all digits.
        let n = 1usize << 25;
        let d: Vec<f64> = (0..n)
            .map(|i| 1e9 + if i % 2 == 0 { 0.25 } else { 0.75 })
            .collect();
        let (mean, var) = mean_variance(&d).unwrap();
        assert!((mean - (1e9 + 0.5)).abs() < 1e-6);
        let exact = 0.0625 * n as f64 / (n as f64 - 1.0);
        assert!((var - exact).abs() < 1e-9, "{var} vs {exact}");
    }

    #[test]
    fn median_ci_ranks_small_n() {
        assert_eq!(median_ci_ranks(0), None);
        for n in 1..=5 {
            assert_eq!(median_ci_ranks(n), Some((0, n - 1)));
        }
        // Known tables: n = 6 -> (x1, x6) 96.9 %; n = 10 -> (x2, x9) 97.9 %;
        // n = 20 -> (x6, x15) 95.9 %.
        assert_eq!(median_ci_ranks(6), Some((0, 5)));
        assert_eq!(median_ci_ranks(9), Some((1, 7)));
        assert_eq!(median_ci_ranks(10), Some((1, 8)));
        assert_eq!(median_ci_ranks(20), Some((5, 14)));
        assert_eq!(median_ci_ranks(100), Some((39, 60)));
    }

    /// `ln P(B <= k)` for `B ~ Binomial(n, 1/2)`, in log space (any n).
    fn ln_binom_half_cdf(n: u64, k: u64) -> f64 {
        let ln_half_n = -(n as f64) * std::f64::consts::LN_2;
        let mut ln_pmf = ln_half_n;
        let mut acc = ln_pmf;
        for i in 1..=k {
            ln_pmf += ((n - i + 1) as f64 / i as f64).ln();
            let (hi, lo) = if acc > ln_pmf {
                (acc, ln_pmf)
            } else {
                (ln_pmf, acc)
            };
            acc = hi + (lo - hi).exp().ln_1p();
        }
        acc
    }

    #[test]
    fn median_ci_ranks_have_95_coverage() {
        for n in (6..=1200).chain([2000, 5000, 10_000, 100_000]) {
            let (lo, hi) = median_ci_ranks(n).unwrap();
            let j = lo + 1;
            assert_eq!(hi, n - j, "symmetric for n {n}");
            let tail = ln_binom_half_cdf(n, j - 1).exp();
            let coverage = 1.0 - 2.0 * tail;
            assert!(coverage >= 0.95 - 1e-3, "n {n} coverage {coverage}");
            if n <= EXACT_MEDIAN_CI_MAX_N {
                assert!(coverage >= 0.95, "n {n} coverage {coverage}");
                // Tightest: one rank further in drops below 95 %.
                let tighter = 1.0 - 2.0 * ln_binom_half_cdf(n, j).exp();
                assert!(tighter < 0.95, "n {n} not tightest");
            }
        }
    }

    #[test]
    fn median_ci_simulated_coverage() {
        // Uniform(0,1) samples have true median 0.5.
        let mut rng = Xoshiro256::new(42);
        for n in [7usize, 25, 200] {
            let trials = 2000;
            let mut hits = 0;
            let mut buf = vec![0.0; n];
            for _ in 0..trials {
                for x in buf.iter_mut() {
                    *x = rng.unit();
                }
                sort_samples(&mut buf);
                let s = summarize(&buf).unwrap();
                if s.ci95_median.contains(0.5) {
                    hits += 1;
                }
            }
            let cov = hits as f64 / trials as f64;
            assert!(cov > 0.93, "n {n} simulated coverage {cov}");
        }
    }

    #[test]
    fn cut_filter_by_hand_and_prefix_property() {
        // Median 3, cut 2 -> keep <= 6: everything but 100.
        let d = [1.0, 2.0, 2.0, 3.0, 4.0, 4.5, 100.0];
        assert_eq!(cut_filter_len(&d, 2.0), 6);
        assert_eq!(cut_filter_len(&d, 1.0), 4);
        assert_eq!(cut_filter_len(&[], 2.0), 0);
        assert_eq!(cut_filter_len(&d, f64::NAN), 0);
        assert_eq!(cut_filter_len(&d, f64::INFINITY), d.len());
        let med = median(&d).unwrap();
        for cut in [0.5, 1.0, 1.5, 2.0, 3.0] {
            let k = cut_filter_len(&d, cut);
            assert!(d[..k].iter().all(|&x| x <= cut * med));
            assert!(d[k..].iter().all(|&x| x > cut * med));
        }
    }

    /// Plain samples, each counted once.
    fn ones(v: &[f64]) -> impl Iterator<Item = (f64, u64)> + '_ {
        v.iter().map(|&x| (x, 1))
    }

    #[test]
    fn histogram_by_hand() {
        let d = [0.1, 0.2, 0.6, 0.39, 1.0, 5.0, -0.1, f64::INFINITY, f64::NAN];
        let h = histogram(ones(&d), 0.0, 0.2, 5).unwrap();
        // Edges 0, 0.2, 0.4, 0.6000000000000001, 0.8, 1.0
        assert_eq!(h.counts, vec![1, 2, 1, 0, 0]);
        assert_eq!(h.overflow, 3);
        assert_eq!(h.underflow, 1);
        assert_eq!(h.bin_width, 0.2);
        let h = histogram(ones(&[0.0, 0.99, 1.0, 2.5]), 0.0, 1.0, 3).unwrap();
        assert_eq!(h.counts, vec![2, 1, 1]);
        // An origin, and counts.
        let h = histogram([(1.0, 3), (1.25, 2), (0.5, 7), (3.0, 1)], 1.0, 0.5, 2).unwrap();
        assert_eq!((h.counts, h.underflow, h.overflow), (vec![5, 0], 7, 1));
        assert_eq!(histogram(ones(&d), 0.0, 0.0, 5), None);
        assert_eq!(histogram(ones(&d), 0.0, -1.0, 5), None);
        assert_eq!(histogram(ones(&d), 0.0, f64::NAN, 5), None);
        assert_eq!(histogram(ones(&d), 0.0, f64::INFINITY, 5), None);
        assert_eq!(histogram(ones(&d), f64::NAN, 1.0, 5), None);
        assert_eq!(histogram(ones(&d), 0.0, 1.0, 0), None);
        assert_eq!(histogram(ones(&d), 0.0, 1.0, MAX_HISTOGRAM_BINS + 1), None);
    }

    #[test]
    fn nice_widths() {
        assert_eq!(nice_width(0.3), 0.5);
        assert_eq!(nice_width(0.7), 1.0);
        assert_eq!(nice_width(20.0), 20.0);
        assert_eq!(nice_width(21.0), 50.0);
        assert_eq!(nice_width(130.0), 200.0);
        assert_eq!(nice_width(-1.0), 1.0);
        assert_eq!(nice_width(f64::NAN), 1.0);
    }

    #[test]
    fn distinct_frequencies_by_hand() {
        let d = [1.431, 1.431, 1.55, 2.027, 2.027, 2.027];
        let (v, left) = distinct_frequencies(&d, 10);
        assert_eq!(v, vec![(1.431, 2), (1.55, 1), (2.027, 3)]);
        assert_eq!(left, 0);
        let (v, left) = distinct_frequencies(&d, 2);
        assert_eq!(v, vec![(1.431, 2), (1.55, 1)]);
        assert_eq!(left, 1);
        let (v, left) = distinct_frequencies(&d, 0);
        assert!(v.is_empty());
        assert_eq!(left, 3);
        assert_eq!(distinct_frequencies(&[], 5), (vec![], 0));
    }

    proptest! {
        #[test]
        fn percentiles_are_ordered(mut v in prop::collection::vec(-1e6f64..1e6, 1..300)) {
            sort_samples(&mut v);
            let s = summarize(&v).unwrap();
            prop_assert!(s.min <= s.p50);
            prop_assert!(s.p50 <= s.p90);
            prop_assert!(s.p90 <= s.p99);
            prop_assert!(s.p99 <= s.p999);
            prop_assert!(s.p999 <= s.p9999);
            prop_assert!(s.p9999 <= s.max);
            prop_assert!(s.ci95_median.contains(s.median));
            prop_assert!(s.ci95_mean.contains(s.mean));
            prop_assert!(s.min <= s.mean && s.mean <= s.max);
        }

        #[test]
        fn summarize_is_permutation_invariant(
            v in prop::collection::vec(-1e3f64..1e3, 1..200),
            seed in any::<u64>(),
        ) {
            let mut a = v.clone();
            let mut b = v;
            // Fisher-Yates shuffle with the module's generator.
            let mut rng = Xoshiro256::new(seed);
            for i in (1..b.len()).rev() {
                let j = rng.below(i + 1);
                b.swap(i, j);
            }
            sort_samples(&mut a);
            sort_samples(&mut b);
            prop_assert_eq!(summarize(&a), summarize(&b));
        }

        #[test]
        fn cut_filter_prefix(mut v in prop::collection::vec(0f64..1e3, 0..200), cut in 0f64..5.0) {
            sort_samples(&mut v);
            let k = cut_filter_len(&v, cut);
            if let Some(m) = median(&v) {
                prop_assert!(v[..k].iter().all(|&x| x <= cut * m));
                prop_assert!(v[k..].iter().all(|&x| x > cut * m));
            } else {
                prop_assert_eq!(k, 0);
            }
        }

        #[test]
        fn histogram_conserves_counts(
            v in prop::collection::vec(-10f64..100.0, 0..200),
            w in 0.01f64..10.0,
            nbins in 1usize..50,
        ) {
            let h = histogram(ones(&v), 0.0, w, nbins).unwrap();
            let total: u64 = h.counts.iter().sum::<u64>() + h.overflow + h.underflow;
            prop_assert_eq!(total, v.len() as u64);
            prop_assert_eq!(h.counts.len(), nbins);
            let below = v.iter().filter(|&&x| x < 0.0).count() as u64;
            prop_assert_eq!(h.underflow, below);
        }

    }

    #[test]
    fn median_intervals_at_other_levels_cover_what_they_say() {
        for (p, z) in [(0.975, 1.959_963_985), (0.995, 2.575_829_304), (0.5, 0.0)] {
            assert!((normal_quantile(p).unwrap() - z).abs() < 1e-8, "{p}");
            assert!((normal_quantile(1.0 - p).unwrap() + z).abs() < 1e-8, "{p}");
        }
        assert!((normal_quantile(1e-10).unwrap() + 6.361_340_902).abs() < 1e-6);
        assert_eq!(normal_quantile(0.0), None);
        assert_eq!(normal_quantile(f64::NAN), None);
        assert_eq!(min_samples_for_median_ci(0.95), Some(6));
        assert_eq!(min_samples_for_median_ci(0.99), Some(8));
        assert_eq!(min_samples_for_median_ci(1.0), None);
        // Exact coverage of [x(lo), x(hi)]: 1 - 2 P(B <= lo) for B ~ Binomial(n, 1/2).
        let coverage = |n: u64, lo: u64| {
            let (mut pmf, mut cdf) = (0.5f64.powi(n as i32), 0.0);
            for i in 0..=lo {
                cdf += pmf;
                pmf *= (n - i) as f64 / (i + 1) as f64;
            }
            1.0 - 2.0 * cdf
        };
        for level in [0.5, 0.8, 0.9, 0.95, 0.99, 0.999] {
            let least = min_samples_for_median_ci(level).unwrap();
            for n in least..=1000 {
                let (lo, hi) = median_ci_ranks_at(n, level).unwrap();
                assert_eq!(lo + hi, n - 1, "{n} at {level}: symmetric ranks");
                assert!(coverage(n, lo) >= level - 1e-12, "{n} at {level}: {lo}");
                // The narrowest such: one rank further in covers less.
                if lo + 1 < hi {
                    assert!(
                        coverage(n, lo + 1) < level,
                        "{n} at {level}: {lo} not the largest"
                    );
                }
            }
        }
        for n in [1, 7, 1000, 1001, 50_000] {
            assert_eq!(median_ci_ranks_at(n, 0.95), median_ci_ranks(n));
        }
    }
}
