//! Whether a point's trial times look normal: the Shapiro–Wilk test (Shapiro & Wilk 1965) with
//! Royston's approximations of its coefficients and of the distribution of `W` (Royston 1992,
//! "Approximating the Shapiro-Wilk W-test for non-normality", Statistics and Computing 2;
//! Royston 1995, algorithm AS R94, Applied Statistics 44), valid for 3 <= n <= 5000.
//!
//! Hoefler & Belli (SC'15) rule 6: do not assume normality of the collected data without
//! checking it. The summaries commbench reports (medians, order-statistic intervals,
//! percentiles) assume nothing of the kind; this test says how far a mean and a t-interval
//! would be from describing the times. A point with more trials than the approximation covers
//! is tested on an evenly spaced subsample of [`MAX_N`] of its trials, in measured order.

use commbench_core::stats;
use serde::{Deserialize, Serialize};

/// Fewest observations the test takes.
pub const MIN_N: usize = 3;
/// Most observations Royston's approximation covers.
pub const MAX_N: usize = 5000;
/// The significance level below which a point's times are called not normal.
pub const ALPHA: f64 = 0.05;

/// The test's answer for one point (the document's `points[].normality`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Normality {
    /// Always `shapiro-wilk`.
    pub test: String,
    /// Trials tested: all of them, or an evenly spaced subsample of [`MAX_N`].
    pub n: u64,
    /// The statistic `W`, in (0, 1]; 1 for a perfectly normal-looking sample.
    #[serde(deserialize_with = "stats::f64_or_nan")]
    pub w: f64,
    /// The p-value of `W` under normality.
    #[serde(deserialize_with = "stats::f64_or_nan")]
    pub p: f64,
    /// `p >= 0.05`: normality is not rejected at the 5 % level.
    pub normal: bool,
}

impl Normality {
    /// The test of `values` (any order; one-way times of a point's trials in measured order):
    /// every value when there are at most [`MAX_N`], else [`MAX_N`] evenly spaced ones.
    /// `None` with fewer than [`MIN_N`] finite values or when they are all equal.
    pub fn of(values: &[f64]) -> Option<Normality> {
        let mut x = evenly_spaced(values, MAX_N);
        x.retain(|v| v.is_finite());
        stats::sort_samples(&mut x);
        let (w, p) = shapiro_wilk(&x)?;
        Some(Normality {
            test: "shapiro-wilk".into(),
            n: x.len() as u64,
            w,
            p,
            normal: p >= ALPHA,
        })
    }
}

/// `m` values of `v` at evenly spaced positions ([`evenly_spaced_indices`]), in their
/// order; all of `v` when it holds at most `m`.
pub fn evenly_spaced(v: &[f64], m: usize) -> Vec<f64> {
    evenly_spaced_indices(v.len(), m).map(|i| v[i]).collect()
}

/// `m` evenly spaced indices of `0..n` (`floor(i n / m)`), ascending; every index when
/// `n <= m`.
pub fn evenly_spaced_indices(n: usize, m: usize) -> impl Iterator<Item = usize> {
    let m = m.min(n);
    (0..m).map(move |i| (i as u128 * n as u128 / m as u128) as usize)
}

/// `c[0] + c[1] x + c[2] x^2 + ...`.
fn poly(c: &[f64], x: f64) -> f64 {
    c.iter().rev().fold(0.0, |acc, &k| acc * x + k)
}

/// The upper tail of the standard normal, `1 - Φ(z)`.
pub fn normal_upper_tail(z: f64) -> f64 {
    0.5 * erfc(z / std::f64::consts::SQRT_2)
}

/// The complementary error function (W. J. Cody's rational Chebyshev approximations as
/// Numerical Recipes gives them in `erfcc`, fractional error below 1.2e-7 everywhere).
fn erfc(x: f64) -> f64 {
    let z = x.abs();
    let t = 1.0 / (1.0 + 0.5 * z);
    const C: [f64; 10] = [
        -1.265_512_23,
        1.000_023_68,
        0.374_091_96,
        0.096_784_18,
        -0.186_288_06,
        0.278_868_07,
        -1.135_203_98,
        1.488_515_87,
        -0.822_152_23,
        0.170_872_77,
    ];
    let r = t * (-z * z + poly(&C, t)).exp();
    if x >= 0.0 {
        r
    } else {
        2.0 - r
    }
}

/// Royston's coefficients `a_1..a_{n/2}` for `n` observations (the upper half; the lower
/// half is their negatives in mirror order), from the normal scores `m_i`.
fn coefficients(n: usize) -> Option<Vec<f64>> {
    let half = n / 2;
    if n == 3 {
        return Some(vec![std::f64::consts::FRAC_1_SQRT_2]);
    }
    const C1: [f64; 6] = [0.0, 0.221_157, -0.147_981, -2.071_19, 4.434_685, -2.706_056];
    const C2: [f64; 6] = [
        0.0, 0.042_981, -0.293_762, -1.752_461, 5.682_633, -3.582_633,
    ];
    let an = n as f64;
    // m_i for the largest half, largest first: -Φ^-1((i - 3/8) / (n + 1/4)).
    let m: Vec<f64> = (1..=half)
        .map(|i| stats::normal_quantile((i as f64 - 0.375) / (an + 0.25)).map(|q| -q))
        .collect::<Option<_>>()?;
    let summ2 = 2.0 * m.iter().map(|v| v * v).sum::<f64>();
    let ssumm2 = summ2.sqrt();
    let rsn = 1.0 / an.sqrt();
    let a1 = poly(&C1, rsn) + m[0] / ssumm2;
    let mut a = vec![0.0; half];
    let (first, fac) = if n > 5 {
        let a2 = poly(&C2, rsn) + m[1] / ssumm2;
        let fac = ((summ2 - 2.0 * m[0] * m[0] - 2.0 * m[1] * m[1])
            / (1.0 - 2.0 * a1 * a1 - 2.0 * a2 * a2))
            .sqrt();
        a[1] = a2;
        (2, fac)
    } else {
        let fac = ((summ2 - 2.0 * m[0] * m[0]) / (1.0 - 2.0 * a1 * a1)).sqrt();
        (1, fac)
    };
    a[0] = a1;
    for i in first..half {
        a[i] = m[i] / fac;
    }
    Some(a)
}

/// `W` and its p-value for SORTED `x` (AS R94): `None` outside 3 <= n <= 5000, with a
/// non-finite value, or when the values span no range.
pub fn shapiro_wilk(x: &[f64]) -> Option<(f64, f64)> {
    let n = x.len();
    if !(MIN_N..=MAX_N).contains(&n) || x.iter().any(|v| !v.is_finite()) {
        return None;
    }
    let range = x[n - 1] - x[0];
    if range <= 0.0 || x.windows(2).any(|w| w[1] < w[0]) {
        return None;
    }
    let a = coefficients(n)?;
    // The full antisymmetric coefficient vector, smallest observation first.
    let coef = |i: usize| -> f64 {
        let j = n - 1 - i;
        match i.cmp(&j) {
            std::cmp::Ordering::Less => -a[i],
            std::cmp::Ordering::Greater => a[j],
            std::cmp::Ordering::Equal => 0.0,
        }
    };
    // W as the squared correlation of the data and the coefficients, on range-scaled data;
    // 1 - W computed directly, so that W near 1 keeps its digits (AS R94).
    let sx = x.iter().map(|v| v / range).sum::<f64>() / n as f64;
    let sa = (0..n).map(coef).sum::<f64>() / n as f64;
    let (mut ssa, mut ssx, mut sax) = (0.0, 0.0, 0.0);
    for (i, v) in x.iter().enumerate() {
        let asa = coef(i) - sa;
        let xsx = v / range - sx;
        ssa += asa * asa;
        ssx += xsx * xsx;
        sax += asa * xsx;
    }
    let ssassx = (ssa * ssx).sqrt();
    let w1 = (ssassx - sax) * (ssassx + sax) / (ssa * ssx);
    let w = 1.0 - w1;
    Some((w, p_value(n, w, w1)))
}

/// The p-value of `W` (`w1 = 1 - W`) for `n` observations: exact for n = 3, else Royston's
/// normalising transformations (one for 4 <= n <= 11, one for n >= 12).
fn p_value(n: usize, w: f64, w1: f64) -> f64 {
    const G: [f64; 2] = [-2.273, 0.459];
    const C3: [f64; 4] = [0.544, -0.399_78, 0.025_054, -6.714e-4];
    const C4: [f64; 4] = [1.3822, -0.778_57, 0.062_767, -0.002_032_2];
    const C5: [f64; 4] = [-1.5861, -0.310_82, -0.083_751, 0.003_891_5];
    const C6: [f64; 3] = [-0.4803, -0.082_676, 0.003_030_2];
    let an = n as f64;
    if n == 3 {
        // 6/pi (asin(sqrt(W)) - pi/3).
        let p =
            6.0 / std::f64::consts::PI * (w.max(0.0).sqrt().asin() - std::f64::consts::FRAC_PI_3);
        return p.clamp(0.0, 1.0);
    }
    let mut y = w1.ln();
    let (m, s) = if n <= 11 {
        let gamma = poly(&G, an);
        if y >= gamma {
            return 1e-99;
        }
        y = -(gamma - y).ln();
        (poly(&C3, an), poly(&C4, an).exp())
    } else {
        let xx = an.ln();
        (poly(&C5, xx), poly(&C6, xx).exp())
    };
    normal_upper_tail((y - m) / s).clamp(0.0, 1.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use commbench_core::stats::Xoshiro256;

    fn sorted(v: &[f64]) -> Vec<f64> {
        let mut v = v.to_vec();
        stats::sort_samples(&mut v);
        v
    }

    /// Published values: scipy's tests of `shapiro` (AS R94 as R's `shapiro.test` computes
    /// it), the last data set from Shapiro & Wilk's paper.
    #[test]
    // The data sets as published: 3.14 is a measurement, not pi.
    #[allow(clippy::approx_constant)]
    fn known_values() {
        let x1 = [
            0.11, 7.87, 4.61, 10.14, 7.95, 3.14, 0.46, 4.43, 0.21, 4.75, 0.71, 1.52, 3.24, 0.93,
            0.42, 4.97, 9.53, 4.55, 0.47, 6.66,
        ];
        let (w, p) = shapiro_wilk(&sorted(&x1)).unwrap();
        assert!((w - 0.900_472_998_6).abs() < 2e-6, "{w}");
        assert!((p - 0.042_089_745).abs() < 2e-5, "{p}");
        let x2 = [
            1.36, 1.14, 2.92, 2.55, 1.46, 1.06, 5.27, -1.11, 3.48, 1.10, 0.88, -0.51, 1.46, 0.52,
            6.20, 1.69, 0.08, 3.67, 2.81, 3.49,
        ];
        let (w, p) = shapiro_wilk(&sorted(&x2)).unwrap();
        assert!((w - 0.959_027).abs() < 2e-6, "{w}");
        assert!((p - 0.5246).abs() < 1e-3, "{p}");
        let x4 = [
            0.139, 0.157, 0.175, 0.256, 0.344, 0.413, 0.503, 0.577, 0.614, 0.655, 0.954, 1.392,
            1.557, 1.648, 1.690, 1.994, 2.174, 2.206, 3.245, 3.510, 3.571, 4.354, 4.980, 6.084,
            8.351,
        ];
        let (w, p) = shapiro_wilk(&sorted(&x4)).unwrap();
        assert!((w - 0.83467).abs() < 1e-5, "{w}");
        assert!((p - 0.000_914).abs() < 1e-5, "{p}");
    }

    #[test]
    fn small_samples_and_edges() {
        // n = 3: W = 1 for equally spaced values, p = 1; the exact p otherwise.
        let (w, p) = shapiro_wilk(&[1.0, 2.0, 3.0]).unwrap();
        assert!((w - 1.0).abs() < 1e-12 && (p - 1.0).abs() < 1e-9, "{w} {p}");
        let (w, p) = shapiro_wilk(&[1.0, 1.1, 3.0]).unwrap();
        assert!(w < 0.85 && p < 0.3, "{w} {p}");
        // 4..=11 and >= 12 both answer within (0, 1].
        for n in [4, 5, 6, 11, 12, 50] {
            let x: Vec<f64> = (0..n).map(|i| (i as f64).powi(3)).collect();
            let (w, p) = shapiro_wilk(&x).unwrap();
            assert!(
                w > 0.0 && w <= 1.0 && (0.0..=1.0).contains(&p),
                "{n}: {w} {p}"
            );
        }
        assert_eq!(shapiro_wilk(&[1.0, 2.0]), None);
        assert_eq!(shapiro_wilk(&[2.0; 10]), None);
        assert_eq!(shapiro_wilk(&[3.0, 2.0, 1.0]), None, "unsorted");
        assert_eq!(shapiro_wilk(&[1.0, 2.0, f64::NAN]), None);
        assert_eq!(shapiro_wilk(&vec![1.0; MAX_N + 1]), None);
        assert_eq!(Normality::of(&[5.0; 100]), None);
    }

    #[test]
    fn the_normal_tail_is_right() {
        for (z, q) in [
            (0.0, 0.5),
            (1.0, 0.158_655_25),
            (1.959_964, 0.025),
            (-2.0, 0.977_249_87),
        ] {
            assert!((normal_upper_tail(z) - q).abs() < 1e-7, "{z}");
        }
    }

    /// Normal samples are rejected at about the level; exponential and bimodal ones almost
    /// always, at the sizes points have.
    #[test]
    fn rejection_rates() {
        let mut rng = Xoshiro256::new(0x005a_9170_u64);
        let reps = 400;
        for n in [20, 100, 1000] {
            let normal = (0..reps)
                .filter(|_| {
                    let x: Vec<f64> = (0..n).map(|_| 3.0 + 0.2 * rng.normal()).collect();
                    !Normality::of(&x).unwrap().normal
                })
                .count() as f64
                / reps as f64;
            assert!((0.02..=0.09).contains(&normal), "n {n}: {normal}");
        }
        for n in [100, 1000, 6000] {
            let mut exp_rejected = 0;
            let mut bi_rejected = 0;
            for _ in 0..50 {
                let e: Vec<f64> = (0..n).map(|_| -(rng.unit().max(1e-300)).ln()).collect();
                exp_rejected += usize::from(!Normality::of(&e).unwrap().normal);
                let b: Vec<f64> = (0..n)
                    .map(|i| if i % 2 == 0 { 1.0 } else { 2.0 } + 0.1 * rng.normal())
                    .collect();
                let t = Normality::of(&b).unwrap();
                assert_eq!(t.n as usize, n.min(MAX_N));
                bi_rejected += usize::from(!t.normal);
            }
            assert!(
                exp_rejected >= 49 && bi_rejected >= 49,
                "n {n}: {exp_rejected} {bi_rejected}"
            );
        }
    }

    #[test]
    fn subsamples_are_evenly_spaced_in_order() {
        let v: Vec<f64> = (0..10).map(f64::from).collect();
        assert_eq!(evenly_spaced(&v, 4), [0.0, 2.0, 5.0, 7.0]);
        assert_eq!(evenly_spaced(&v, 20), v);
    }
}
