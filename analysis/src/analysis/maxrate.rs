//! The max-rate model of Gropp, Olson and Samfass, *Modeling MPI communication performance on
//! SMP nodes: is it time to retire the ping pong test* (EuroMPI 2016), fitted to a sweep of
//! pairs streaming at once (`bandwidth --pairs 1..K:+1`):
//!
//! ```text
//! T(n, k) = alpha + k n / min(R_N, k R_b)
//! ```
//!
//! `T` is the time per message when `k` processes each stream messages of `n` bytes at once
//! (here the slowest pair's median time per message, `points[].one_way_us.median`), `R_b` the
//! rate one process reaches alone and `R_N` what the node (or the link the pairs share) takes
//! in all, which a ping-pong between two processes cannot give. Below `k* = R_N / R_b` pairs
//! each streams at `R_b`; above, they share `R_N`.
//!
//! With `b = 1 / R_b` and `c = 1 / R_N` the model is `T = alpha + max(b n, c k n)`: linear in
//! `(alpha, b, c)` once the points are split into those below `k*` and those above. Every split
//! between two of the measured `k` is fitted by weighted least squares (relative errors: weight
//! `1 / T^2`, as the Hockney fit's), and the split whose model (with its own `k* = b / c`) has
//! the least weighted residual is kept; a saturated regime needs a measured `k` beyond `k*`. When no measured `k` saturates (every point
//! fits `alpha + b n`), `R_N` is only bounded below, by `k_max R_b`; when every `k` is at the
//! knee or past it, `R_b` is bounded below by `R_N / k_min`. Neither bound is printed as a
//! value.

use crate::analysis::point::Point;
use serde::{Deserialize, Serialize};

/// One point of the fit: measured and modelled.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelPoint {
    /// Message size, bytes.
    pub size: u64,
    /// Pairs streaming at once.
    pub pairs: u32,
    /// Measured time per message, us.
    pub measured_us: f64,
    /// The model's, us.
    pub model_us: f64,
}

/// The model fitted to one backend's points at one window.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MaxRateFit {
    /// The backend measured.
    pub backend: String,
    /// The window (sends outstanding per pair) the points share, as asked.
    pub window: u32,
    /// Whether every pair streamed both ways: `T` and the rates are then per direction.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub per_direction: bool,
    /// `alpha`, us.
    pub alpha_us: f64,
    /// `R_b`, MB/s: one process alone; absent when every `k` measured saturates.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub r_b_mb_s: Option<f64>,
    /// `R_N`, MB/s: all processes together; absent when no `k` measured saturates.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub r_n_mb_s: Option<f64>,
    /// `k* = R_N / R_b`: the pairs at which the node saturates (absent with either rate).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub k_star: Option<f64>,
    /// What the sweep could not reach: a rate it bounds only from below (in words).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bound: Option<String>,
    /// The bound on `R_N` when no number of pairs measured saturated: `k_max R_b`, MB/s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub r_n_at_least_mb_s: Option<f64>,
    /// The bound on `R_b` when every number of pairs measured saturated: `R_N / k_min`, MB/s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub r_b_at_least_mb_s: Option<f64>,
    /// Root mean square of the relative residuals `(measured - model) / measured`.
    pub rms_rel_residual: f64,
    /// Every point fitted.
    pub points: Vec<ModelPoint>,
}

/// Above this root-mean-square relative residual (10 %) the model does not describe the
/// measured times well enough for its rates to be quoted as they are: flagged
/// ([`MaxRateFit::warnings`]). Medians of a quiet machine sit within a few per cent of it.
pub const POOR_FIT_RELATIVE_RMS: f64 = 0.10;

impl MaxRateFit {
    /// One-line warnings about what the fitted numbers do not mean: a model that misses the
    /// measured times by more than [`POOR_FIT_RELATIVE_RMS`], and a negative start-up time.
    /// Computed from the numbers, so documents written before these were flagged get them too.
    /// (A rate the sweep does not reach is [`MaxRateFit::bound`].)
    pub fn warnings(&self) -> Vec<String> {
        let mut out = Vec::new();
        if self.rms_rel_residual > POOR_FIT_RELATIVE_RMS {
            out.push(format!(
                "the model misses the measured times by {:.1}% (rms, above {:.0}%): these \
                 points do not follow it closely (noise, or a regime it does not have), so \
                 alpha, R_b and R_N are rough; more trials, a quieter host or more sizes",
                100.0 * self.rms_rel_residual,
                100.0 * POOR_FIT_RELATIVE_RMS
            ));
        }
        if self.alpha_us < 0.0 {
            out.push(
                "alpha is negative: the sizes measured do not separate the start-up time from \
                 the transfer; measure smaller sizes"
                    .into(),
            );
        }
        out
    }
}

/// One observation: size, pairs, time (us).
type Obs = (f64, f64, f64);

/// The model fitted to every window of every backend whose points hold two numbers of pairs
/// or more and two sizes or more (points with pairs: `points[].pairs`).
pub fn fit_all(points: &[Point]) -> Vec<MaxRateFit> {
    let mut keys: Vec<(String, u32)> = Vec::new();
    for p in points.iter().filter(|p| p.pairs.is_some()) {
        let k = (p.backend.clone(), window_of(p));
        if !keys.contains(&k) {
            keys.push(k);
        }
    }
    keys.into_iter()
        .filter_map(|(backend, window)| {
            let obs: Vec<(u64, u32, f64)> = points
                .iter()
                .filter(|p| p.backend == backend && window_of(p) == window)
                .filter_map(|p| Some((p.size, p.pairs.as_ref()?.pairs, p.one_way_us.median)))
                .collect();
            let per_direction = points
                .iter()
                .any(|p| p.backend == backend && p.pattern == "bibandwidth");
            fit(&obs).map(|f| MaxRateFit {
                backend,
                window,
                per_direction,
                ..f
            })
        })
        .collect()
}

/// The window a point was asked for: its sweep's, else the one it used.
fn window_of(p: &Point) -> u32 {
    p.sweep
        .map_or(p.trips_per_iteration.min(u64::from(u32::MAX)) as u32, |s| {
            s.window
        })
}

/// The model fitted to `(size, pairs, time us)`; `None` with fewer than two numbers of pairs,
/// two sizes, or a time that is not positive.
pub fn fit(obs: &[(u64, u32, f64)]) -> Option<MaxRateFit> {
    let mut ks: Vec<u32> = obs.iter().map(|o| o.1).collect();
    ks.sort_unstable();
    ks.dedup();
    let mut ns: Vec<u64> = obs.iter().map(|o| o.0).collect();
    ns.sort_unstable();
    ns.dedup();
    if ks.len() < 2 || ns.len() < 2 || obs.iter().any(|o| !(o.2 > 0.0 && o.2.is_finite())) {
        return None;
    }
    let o: Vec<Obs> = obs
        .iter()
        .map(|&(n, k, t)| (n as f64, f64::from(k), t))
        .collect();
    // Split j: the first j numbers of pairs below k*, the rest above.
    let mut best: Option<(f64, Split)> = None;
    for j in 0..=ks.len() {
        let Some(s) = split_fit(&o, &ks, j) else {
            continue;
        };
        if s.consistent && best.as_ref().map_or(true, |(sse, _)| s.sse < *sse) {
            best = Some((s.sse, s));
        }
    }
    let (_, s) = best?;
    Some(s.into_fit(&o, &ks))
}

/// One split's fit.
struct Split {
    alpha: f64,
    /// `1 / R_b`, us per byte (`None`: every k above k*).
    b: Option<f64>,
    /// `1 / R_N`, us per byte (`None`: every k below k*).
    c: Option<f64>,
    sse: f64,
    consistent: bool,
}

impl Split {
    fn model(&self, n: f64, k: f64) -> f64 {
        let one = self.b.map_or(0.0, |b| b * n);
        let all = self.c.map_or(0.0, |c| c * k * n);
        self.alpha + one.max(all)
    }

    fn into_fit(self, o: &[Obs], ks: &[u32]) -> MaxRateFit {
        let rate = |x: Option<f64>| x.filter(|v| *v > 0.0).map(|v| 1.0 / v);
        let (r_b, r_n) = (rate(self.b), rate(self.c));
        let (kmin, kmax) = (ks[0], ks[ks.len() - 1]);
        let r_n_at_least = r_b.filter(|_| r_n.is_none()).map(|rb| f64::from(kmax) * rb);
        let r_b_at_least = r_n.filter(|_| r_b.is_none()).map(|rn| rn / f64::from(kmin));
        let bound = match (r_n_at_least, r_b_at_least) {
            (Some(_), _) => Some(format!(
                "R_N not reached: no number of pairs up to {kmax} saturated, so R_N is at least \
                 {kmax} x R_b"
            )),
            (_, Some(_)) => Some(format!(
                "R_b not seen: {} already saturated, so R_b is at least R_N / {kmin}",
                if kmin == 1 {
                    "one pair".to_string()
                } else {
                    format!("{kmin} pairs")
                }
            )),
            _ => None,
        };
        let points: Vec<ModelPoint> = o
            .iter()
            .map(|&(n, k, t)| ModelPoint {
                size: n as u64,
                pairs: k as u32,
                measured_us: t,
                model_us: self.model(n, k),
            })
            .collect();
        let rms = (points
            .iter()
            .map(|p| ((p.measured_us - p.model_us) / p.measured_us).powi(2))
            .sum::<f64>()
            / points.len() as f64)
            .sqrt();
        MaxRateFit {
            backend: String::new(),
            window: 0,
            per_direction: false,
            alpha_us: self.alpha,
            r_b_mb_s: r_b,
            r_n_mb_s: r_n,
            k_star: r_b.zip(r_n).map(|(b, n)| n / b),
            bound,
            r_n_at_least_mb_s: r_n_at_least,
            r_b_at_least_mb_s: r_b_at_least,
            rms_rel_residual: rms,
            points,
        }
    }
}

/// The fit with the first `j` of `ks` below k* and the rest above, its residual that of the
/// model itself (`max(b n, c k n)`, so a split whose k* falls elsewhere pays for it); usable
/// when its rates are positive and, with both, some k measured lies beyond k*.
fn split_fit(o: &[Obs], ks: &[u32], j: usize) -> Option<Split> {
    let below = |k: f64| j > 0 && k <= f64::from(ks[j - 1]);
    let rows: Vec<(Vec<f64>, f64, f64)> = o
        .iter()
        .map(|&(n, k, t)| {
            let mut x = vec![1.0];
            if j > 0 {
                x.push(if below(k) { n } else { 0.0 });
            }
            if j < ks.len() {
                x.push(if below(k) { 0.0 } else { k * n });
            }
            (x, t, 1.0 / (t * t))
        })
        .collect();
    let beta = weighted_least_squares(&rows)?;
    let b = (j > 0).then(|| beta[1]);
    let c = (j < ks.len()).then(|| beta[beta.len() - 1]);
    let mut s = Split {
        alpha: beta[0],
        b,
        c,
        sse: 0.0,
        consistent: false,
    };
    s.sse = rows
        .iter()
        .zip(o)
        .map(|((_, t, w), &(n, k, _))| w * (t - s.model(n, k)).powi(2))
        .sum();
    let positive = b.map_or(true, |v| v > 0.0) && c.map_or(true, |v| v > 0.0);
    // A saturated regime needs a k beyond the knee: points at k* itself lie on both lines,
    // and say nothing of R_N that the regime below does not.
    s.consistent = positive
        && match b.zip(c).map(|(b, c)| b / c) {
            // ... and R_b one below it: when every k measured is at the knee or past it, the
            // smallest k's rate is R_N / k_min, which bounds R_b and does not give it.
            Some(k_star) => {
                f64::from(ks[ks.len() - 1]) > k_star * (1.0 + 1e-6)
                    && f64::from(ks[0]) < k_star * (1.0 - 1e-6)
            }
            None => true,
        };
    Some(s)
}

/// The weighted least-squares solution of `x . beta = y` over rows `(x, y, weight)`, by the
/// normal equations with partial pivoting; `None` when they are singular.
fn weighted_least_squares(rows: &[(Vec<f64>, f64, f64)]) -> Option<Vec<f64>> {
    let p = rows.first()?.0.len();
    let mut a = vec![vec![0.0; p + 1]; p];
    for (x, y, w) in rows {
        for i in 0..p {
            for j in 0..p {
                a[i][j] += w * x[i] * x[j];
            }
            a[i][p] += w * x[i] * y;
        }
    }
    let scale: f64 = (0..p).map(|i| a[i][i].abs()).fold(0.0, f64::max);
    for col in 0..p {
        let piv = (col..p).max_by(|&r, &s| a[r][col].abs().total_cmp(&a[s][col].abs()))?;
        if a[piv][col].abs() <= 1e-12 * scale {
            return None;
        }
        a.swap(col, piv);
        let pivot = a[col].clone();
        for (r, row) in a.iter_mut().enumerate() {
            if r != col {
                let f = row[col] / pivot[col];
                for (v, pv) in row.iter_mut().zip(&pivot).skip(col) {
                    *v -= f * pv;
                }
            }
        }
    }
    Some((0..p).map(|i| a[i][p] / a[i][i]).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use commbench_core::stats::Xoshiro256;

    /// Times drawn from the model itself, with noise of a few per cent, at random parameters:
    /// the fit gives back `R_b`, `R_N` and `alpha` where the sweep shows them, and bounds the
    /// rate it does not reach.
    #[test]
    fn the_model_is_recovered_from_its_own_times() {
        let mut rng = Xoshiro256::new(0x6a0);
        for case in 0..300 {
            let alpha = rng.log_range(0.2, 20.0);
            let r_b = rng.log_range(100.0, 20_000.0);
            let k_star = rng.range(1.2, 12.0);
            let r_n = r_b * k_star;
            let kmax = 2 + rng.below(14) as u32;
            let noise = if rng.below(3) == 0 { 0.0 } else { 0.02 };
            let sizes = [1u64 << 12, 1 << 14, 1 << 16, 1 << 18, 1 << 20];
            let mut obs = Vec::new();
            for k in 1..=kmax {
                for &n in &sizes {
                    let t = alpha + f64::from(k) * n as f64 / r_n.min(f64::from(k) * r_b);
                    obs.push((n, k, t * (1.0 + noise * rng.range(-1.0, 1.0))));
                }
            }
            let f = fit(&obs).expect("a fit");
            let tol = if noise == 0.0 { 1e-6 } else { 0.08 };
            let near = |got: f64, want: f64| (got - want).abs() <= tol * want;
            let saturates = f64::from(kmax) > k_star * 1.05;
            if noise == 0.0 || saturates {
                let rb = f.r_b_mb_s.expect("R_b: k = 1 streams alone");
                assert!(near(rb, r_b), "case {case}: R_b {rb} vs {r_b}");
            }
            if saturates && (noise == 0.0 || f64::from(kmax) > k_star * 1.5) {
                let rn = f.r_n_mb_s.unwrap_or(f64::NAN);
                assert!(
                    near(rn, r_n),
                    "case {case}: R_N {rn} vs {r_n} ({:?})",
                    f.bound
                );
            }
            if f64::from(kmax) < k_star * 0.95 && noise == 0.0 {
                assert!(
                    f.r_n_mb_s.is_none() && f.bound.is_some(),
                    "case {case}: k* {k_star} kmax {kmax} rb {r_b} rn {r_n}: {:?} {:?} {:?} rms {}",
                    f.r_b_mb_s,
                    f.r_n_mb_s,
                    f.bound,
                    f.rms_rel_residual
                );
            }
            if noise == 0.0 {
                assert!(f.rms_rel_residual < 1e-9, "case {case}");
            }
        }
    }

    /// A fit to times that follow the model is not flagged; one to times scattered by a
    /// random factor of up to 2 around it (a crowded host) is, above the threshold only.
    #[test]
    fn a_fit_that_misses_its_points_is_flagged() {
        let mut rng = Xoshiro256::new(0xf1a6);
        let mut flagged = 0;
        for case in 0..200 {
            let alpha = rng.log_range(0.2, 20.0);
            let r_b = rng.log_range(100.0, 20_000.0);
            let r_n = r_b * rng.range(1.2, 6.0);
            let scatter = [0.0, 0.01, 1.0][rng.below(3)];
            let mut obs = Vec::new();
            for k in 1..=4u32 {
                for n in [1u64 << 10, 1 << 14, 1 << 18, 1 << 20] {
                    let t = alpha + f64::from(k) * n as f64 / r_n.min(f64::from(k) * r_b);
                    obs.push((n, k, t * (1.0 + scatter * rng.range(0.0, 1.0))));
                }
            }
            let f = fit(&obs).expect("a fit");
            let poor = f.rms_rel_residual > POOR_FIT_RELATIVE_RMS;
            let said = f
                .warnings()
                .iter()
                .any(|w| w.contains("misses the measured times"));
            assert_eq!(said, poor, "case {case}: rms {}", f.rms_rel_residual);
            if scatter <= 0.01 {
                assert!(
                    !poor,
                    "case {case}: rms {} at {scatter}",
                    f.rms_rel_residual
                );
            }
            flagged += usize::from(poor);
        }
        assert!(
            flagged > 20,
            "only {flagged} of 200 fits to scattered times flagged"
        );
    }

    /// Every number of pairs measured past the knee: `R_N` is given, `R_b` only bounded.
    #[test]
    fn a_sweep_past_the_knee_bounds_r_b() {
        let (alpha, r_b, r_n) = (2.0, 1000.0, 1500.0_f64);
        let mut obs = Vec::new();
        for k in 2..=6u32 {
            for n in [1u64 << 12, 1 << 16, 1 << 20] {
                let t = alpha + f64::from(k) * n as f64 / r_n.min(f64::from(k) * r_b);
                obs.push((n, k, t));
            }
        }
        let f = fit(&obs).expect("a fit");
        assert!(f.r_b_mb_s.is_none() && f.k_star.is_none(), "{f:?}");
        assert!((f.r_n_mb_s.unwrap() / r_n - 1.0).abs() < 1e-9);
        let at_least = f.r_b_at_least_mb_s.expect("a bound on R_b");
        assert!((at_least / (r_n / 2.0) - 1.0).abs() < 1e-9, "{at_least}");
    }

    #[test]
    fn too_few_points_give_no_fit() {
        assert!(fit(&[(8, 1, 1.0), (64, 1, 2.0), (8, 1, 1.1)]).is_none());
        assert!(fit(&[(8, 1, 1.0), (8, 2, 2.0)]).is_none());
        assert!(fit(&[(8, 1, 1.0), (64, 2, -2.0), (8, 2, 1.0)]).is_none());
    }
}
