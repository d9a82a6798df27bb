//! Comparing two result documents, size by size (beyond the seeds).
//!
//! Points are matched by `(pattern, size)`. For each pair the one-way times are recomputed
//! from the raw trials (`trial_ns / (trips_per_iteration x npp) / 1000`, us), and reported:
//!
//! * the ratio of medians `median(B) / median(A)` (above 1: B is slower);
//! * its bootstrap percentile 95 % confidence interval
//!   ([`crate::analysis::inference::bootstrap_median_ratio_ci`]);
//! * the two-sided Mann-Whitney rank-test p-value ([`crate::analysis::inference::mann_whitney_p`]);
//! * a [`Verdict`], given only where the confidence interval excludes 1.
//!
//! To keep a comparison fast on runs with millions of trials, each side is reduced to at most
//! [`MAX_SAMPLES`] trials by deterministic strided subsampling (every `k`-th trial in the order
//! measured, spread over the whole run) before the bootstrap and the rank test, and the
//! bootstrap uses at most [`MAX_RESAMPLES`] resamples. A smaller sample only widens the
//! interval and weakens the test, so the subsampling can hide a small difference but never
//! invents one. The medians and the ratio themselves use every trial. The bootstrap's seed is
//! derived from the caller's seed and the size, so a comparison is reproducible.

use crate::analysis::document::{Point, ResultDoc};
use crate::analysis::inference;
use commbench_core::stats::{self, Interval};
use commbench_core::transport::error::{Error, Result};
use serde::{Deserialize, Serialize};

/// Most trials per side used for the bootstrap and the rank test.
pub const MAX_SAMPLES: usize = 4000;

/// Most bootstrap resamples.
pub const MAX_RESAMPLES: usize = 2000;

/// B relative to A.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// B's median is smaller: the whole 95 % interval of the ratio is below 1.
    Faster,
    /// B's median is larger: the whole 95 % interval of the ratio is above 1.
    Slower,
    /// The interval contains 1.
    NoDifference,
}

impl std::fmt::Display for Verdict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Verdict::Faster => "faster",
            Verdict::Slower => "slower",
            Verdict::NoDifference => "no difference",
        })
    }
}

/// The comparison of one `(pattern, size)`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SizeComparison {
    /// Pattern name.
    pub pattern: String,
    /// Message size, bytes.
    pub size: u64,
    /// Median one-way time of A, us.
    pub median_a_us: f64,
    /// Median one-way time of B, us.
    pub median_b_us: f64,
    /// `median_b_us / median_a_us`.
    pub ratio: f64,
    /// Bootstrap 95 % confidence interval of the ratio.
    pub ci95: Interval,
    /// Two-sided Mann-Whitney p-value.
    pub p_value: f64,
    /// B relative to A.
    pub verdict: Verdict,
    /// Trials of A.
    pub trials_a: usize,
    /// Trials of B.
    pub trials_b: usize,
}

impl SizeComparison {
    /// Whether B is slower by more than `pct` percent with 95 % confidence: the verdict is
    /// `Slower` and even the interval's lower end exceeds `1 + pct / 100`.
    pub fn slower_than(&self, pct: f64) -> bool {
        self.verdict == Verdict::Slower && self.ci95.lo > 1.0 + pct / 100.0
    }
}

/// One-way times of a point, us, in the order measured.
pub fn one_way_us(p: &Point) -> Vec<f64> {
    let per = 1000.0 * (p.npp.max(1) * p.trips_per_iteration.max(1)) as f64;
    p.trial_ns.iter().map(|&t| t as f64 / per).collect()
}

/// At most `max` values spread evenly over `v` (every `k`-th, fractional stride).
pub fn subsample(v: &[f64], max: usize) -> Vec<f64> {
    if v.len() <= max || max == 0 {
        return v.to_vec();
    }
    (0..max).map(|i| v[i * v.len() / max]).collect()
}

fn median_of(v: &[f64]) -> Option<f64> {
    let mut s = v.to_vec();
    stats::sort_samples(&mut s);
    stats::median(&s)
}

/// A point's identity across documents: `(pattern, size)`.
pub type Key = (String, u64);

/// `(pattern, size)` of the points only in `a` and only in `b`.
pub fn unmatched(a: &ResultDoc, b: &ResultDoc) -> (Vec<Key>, Vec<Key>) {
    let has = |d: &ResultDoc, p: &Point| {
        d.points
            .iter()
            .any(|q| q.pattern == p.pattern && q.size == p.size)
    };
    let only = |x: &ResultDoc, y: &ResultDoc| {
        x.points
            .iter()
            .filter(|p| !has(y, p))
            .map(|p| (p.pattern.clone(), p.size))
            .collect()
    };
    (only(a, b), only(b, a))
}

/// Compare `b` against `a` for every `(pattern, size)` in both, in `a`'s order.
///
/// `iters` bootstrap resamples (capped at [`MAX_RESAMPLES`]; 0 means the cap), `seed` for the
/// bootstrap. Errors when the documents have no `(pattern, size)` in common, or a matched
/// point has no trials.
pub fn compare(
    a: &ResultDoc,
    b: &ResultDoc,
    iters: usize,
    seed: u64,
) -> Result<Vec<SizeComparison>> {
    let iters = if iters == 0 {
        MAX_RESAMPLES
    } else {
        iters.min(MAX_RESAMPLES)
    };
    let mut out = Vec::new();
    for pa in &a.points {
        let Some(pb) = b
            .points
            .iter()
            .find(|q| q.pattern == pa.pattern && q.size == pa.size)
        else {
            continue;
        };
        let ta = one_way_us(pa);
        let tb = one_way_us(pb);
        let what = |side: &str| {
            Error::Invalid(format!(
                "{} of {} B in {side} has no trial times to compare",
                pa.pattern, pa.size
            ))
        };
        let ma = median_of(&ta).ok_or_else(|| what("A"))?;
        let mb = median_of(&tb).ok_or_else(|| what("B"))?;
        let sa = subsample(&ta, MAX_SAMPLES);
        let sb = subsample(&tb, MAX_SAMPLES);
        let point_seed = seed ^ pa.size.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        let ci = inference::bootstrap_median_ratio_ci(&sb, &sa, iters, 0.95, point_seed).unwrap_or(
            Interval {
                lo: f64::NAN,
                hi: f64::NAN,
            },
        );
        let p_value = inference::mann_whitney_p(&sa, &sb).unwrap_or(f64::NAN);
        let verdict = if ci.lo > 1.0 {
            Verdict::Slower
        } else if ci.hi < 1.0 {
            Verdict::Faster
        } else {
            Verdict::NoDifference
        };
        out.push(SizeComparison {
            pattern: pa.pattern.clone(),
            size: pa.size,
            median_a_us: ma,
            median_b_us: mb,
            ratio: mb / ma,
            ci95: ci,
            p_value,
            verdict,
            trials_a: ta.len(),
            trials_b: tb.len(),
        });
    }
    if out.is_empty() {
        let sizes = |d: &ResultDoc| {
            d.points
                .iter()
                .map(|p| format!("{} {}", p.pattern, p.size))
                .collect::<Vec<_>>()
                .join(", ")
        };
        return Err(Error::Invalid(format!(
            "the two documents have no (pattern, size) in common (A: {}; B: {})",
            sizes(a),
            sizes(b)
        )));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::testkit::{doc, point};

    fn sweep(scale: f64, seed: u64) -> ResultDoc {
        doc((0..6)
            .map(|k| {
                point(
                    "pingpong",
                    1 << (3 * k),
                    (1.0 + k as f64) * scale,
                    0.1,
                    301,
                    seed,
                )
            })
            .collect())
    }

    #[test]
    fn identical_documents_do_not_differ() {
        let a = sweep(1.0, 1);
        let rows = compare(&a, &a, 500, 9).unwrap();
        assert_eq!(rows.len(), 6);
        for r in &rows {
            assert_eq!(r.verdict, Verdict::NoDifference, "{r:?}");
            assert_eq!(r.ratio, 1.0);
            assert!(r.ci95.contains(1.0));
            assert!(r.p_value > 0.99);
            assert!(!r.slower_than(0.0));
        }
    }

    #[test]
    fn same_distribution_other_draw_does_not_differ() {
        let rows = compare(&sweep(1.0, 1), &sweep(1.0, 2), 1000, 9).unwrap();
        let differ = rows
            .iter()
            .filter(|r| r.verdict != Verdict::NoDifference)
            .count();
        assert!(differ <= 1, "{rows:?}");
    }

    #[test]
    fn twenty_percent_slower() {
        let a = sweep(1.0, 1);
        let b = sweep(1.2, 2);
        let rows = compare(&a, &b, 1000, 9).unwrap();
        for r in &rows {
            assert_eq!(r.verdict, Verdict::Slower, "{r:?}");
            assert!((r.ratio - 1.2).abs() < 0.03, "{r:?}");
            assert!(r.ci95.contains(r.ratio));
            assert!(r.p_value < 1e-6);
            assert!(r.slower_than(5.0) && !r.slower_than(30.0));
        }
        // And the other way round.
        for r in compare(&b, &a, 1000, 9).unwrap() {
            assert_eq!(r.verdict, Verdict::Faster);
            assert!(!r.slower_than(0.0));
        }
    }

    #[test]
    fn matching_and_errors() {
        let a = doc(vec![
            point("pingpong", 8, 1.0, 0.1, 50, 1),
            point("pingpong", 16, 1.0, 0.1, 50, 1),
        ]);
        let b = doc(vec![
            point("pingpong", 16, 1.0, 0.1, 50, 1),
            point("exchange", 8, 1.0, 0.1, 50, 1),
        ]);
        let rows = compare(&a, &b, 100, 1).unwrap();
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0].size, 16);
        let (oa, ob) = unmatched(&a, &b);
        assert_eq!(oa, vec![("pingpong".to_string(), 8)]);
        assert_eq!(ob, vec![("exchange".to_string(), 8)]);
        let c = doc(vec![point("pingpong", 4, 1.0, 0.1, 50, 1)]);
        let e = compare(&a, &c, 100, 1).unwrap_err().to_string();
        assert!(e.contains("no (pattern, size) in common"), "{e}");
        // Deterministic.
        assert_eq!(
            compare(&a, &b, 100, 1).unwrap(),
            compare(&a, &b, 100, 1).unwrap()
        );
    }

    #[test]
    fn subsampling_is_even_and_bounded() {
        let v: Vec<f64> = (0..10_000).map(f64::from).collect();
        let s = subsample(&v, 100);
        assert_eq!(s.len(), 100);
        assert_eq!(s[0], 0.0);
        assert_eq!(s[1], 100.0);
        assert_eq!(s[99], 9900.0);
        assert_eq!(subsample(&v[..5], 100).len(), 5);
    }

    #[test]
    fn verdict_serialises_snake_case() {
        assert_eq!(
            serde_json::to_string(&Verdict::NoDifference).unwrap(),
            "\"no_difference\""
        );
        assert_eq!(
            serde_json::to_string(&Verdict::Slower).unwrap(),
            "\"slower\""
        );
    }
}
