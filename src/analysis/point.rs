//! The analysis of one measured size (seed 000 §3.4): the one-way time of every trial, its
//! statistics and rates, the filtered analysis (trials above `cut_coef` x median removed), a
//! binned distribution and the smallest distinct times with their frequency (Appendix B).

use commbench_core::stats::{self, Summary};
use commbench_core::{Error, Result};
use serde::{Deserialize, Serialize};

/// Rates in MB/s (10^6 bytes per second) from the minimum, median, mean and maximum time.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Rates {
    /// Using the minimum time (the highest rate).
    pub min: f64,
    /// Using the median time.
    pub median: f64,
    /// Using the mean time.
    pub mean: f64,
    /// Using the maximum time (the lowest rate).
    pub max: f64,
}

impl Rates {
    /// `bytes` over each time of `s` (in microseconds): bytes/us = MB/s. A zero time gives 0.
    pub fn from_summary(bytes: u64, s: &Summary) -> Self {
        let r = |t_us: f64| {
            if t_us > 0.0 {
                bytes as f64 / t_us
            } else {
                0.0
            }
        };
        Rates {
            min: r(s.min),
            median: r(s.median),
            mean: r(s.mean),
            max: r(s.max),
        }
    }
}

/// The filtered analysis of §3.4: trials above `cut_coef` x median removed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Filtered {
    /// The cut-off coefficient.
    pub cut_coef: f64,
    /// Trials kept.
    pub kept: u64,
    /// Trials removed.
    pub removed: u64,
    /// Statistics of the kept one-way times, us.
    pub one_way_us: Summary,
    /// Rates from the kept times, MB/s.
    pub rate_mb_s: Rates,
}

/// The analysis of one size (§3.4), of the one-way time `trial / (2 npp)` in microseconds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Analysis {
    /// Statistics of the one-way time, us.
    pub one_way_us: Summary,
    /// Rates, MB/s.
    pub rate_mb_s: Rates,
    /// The filtered analysis.
    pub filtered: Filtered,
    /// Binned distribution of the one-way time, us.
    pub histogram: Distribution,
    /// The smallest distinct one-way times with their frequency (Appendix B), us.
    pub frequencies: Vec<(f64, u64)>,
    /// Distinct one-way times left out of `frequencies`.
    pub frequencies_omitted: usize,
}

/// Distinct values listed in an analysis.
pub const MAX_FREQUENCIES: usize = 200;

/// Analyse raw trial times (ns, `min_ov` already subtracted) of `npp` ping-pongs of `bytes`.
/// `divisor` is how many one-way trips one loop iteration holds (2 for a ping-pong).
pub fn analyse(
    trial_ns: &[i64],
    npp: u64,
    divisor: u64,
    bytes: u64,
    cut_coef: f64,
) -> Result<Analysis> {
    let v = commbench_core::method::engine::one_way_us_sorted(trial_ns, npp, divisor);
    let s = stats::summarize(&v).ok_or_else(|| Error::Invalid("no trials to analyse".into()))?;
    let kept = stats::cut_filter_len(&v, cut_coef);
    let fs = stats::summarize(&v[..kept.max(1).min(v.len())])
        .ok_or_else(|| Error::Invalid("no trials left after filtering".into()))?;
    let width = stats::nice_width((s.p999 - s.min).max(1e-3) / 50.0);
    let origin = (s.min / width).floor() * width;
    let h = stats::histogram(v.iter().map(|&x| (x, 1)), origin, width, 60)
        .ok_or_else(|| Error::Invalid(format!("cannot bin times from {} us", s.min)))?;
    let histogram = Distribution {
        origin,
        bin_width: h.bin_width,
        counts: h.counts,
        overflow: h.overflow,
        underflow: h.underflow,
    };
    let (frequencies, frequencies_omitted) = stats::distinct_frequencies(&v, MAX_FREQUENCIES);
    Ok(Analysis {
        rate_mb_s: Rates::from_summary(bytes, &s),
        filtered: Filtered {
            cut_coef,
            kept: kept as u64,
            removed: (v.len() - kept) as u64,
            rate_mb_s: Rates::from_summary(bytes, &fs),
            one_way_us: fs,
        },
        one_way_us: s,
        histogram,
        frequencies,
        frequencies_omitted,
    })
}

/// A binned distribution: bin k covers `[origin + k w, origin + (k+1) w)`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Distribution {
    /// Left edge of the first bin.
    pub origin: f64,
    /// Bin width.
    pub bin_width: f64,
    /// Count per bin.
    pub counts: Vec<u64>,
    /// Values at or beyond the last bin's right edge.
    pub overflow: u64,
    /// Values below `origin`.
    pub underflow: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn appendix_c_rates() {
        // Appendix C: 8 bytes at 1.2451/1.3113/1.3227/570.8072 us one-way gives
        // 6.425, 6.101, 6.048 and 0.01402 MB/s.
        let s = Summary {
            n: 1,
            min: 1.2451,
            median: 1.3113,
            mean: 1.3227,
            max: 570.8072,
            variance: 0.0,
            std_dev: 0.0,
            cv: 0.0,
            std_err: 0.0,
            rel_std_err: 0.0,
            p50: 1.3113,
            p90: 0.0,
            p99: 0.0,
            p999: 0.0,
            p9999: 0.0,
            ci95_median: stats::Interval { lo: 0.0, hi: 0.0 },
            ci95_mean: stats::Interval { lo: 0.0, hi: 0.0 },
        };
        let r = Rates::from_summary(8, &s);
        assert!((r.min - 6.425).abs() < 5e-4);
        assert!((r.median - 6.101).abs() < 5e-4);
        assert!((r.mean - 6.048).abs() < 5e-4);
        assert!((r.max - 0.01402).abs() < 5e-6);
    }

    #[test]
    fn analysis_of_known_trials() {
        // npp 2, ping-pong: one-way = trial / 4 / 1000 us.
        let trials: Vec<i64> = vec![4000, 4000, 8000, 40_000];
        let a = analyse(&trials, 2, 2, 8, 2.0).unwrap();
        assert_eq!(a.one_way_us.min, 1.0);
        assert_eq!(a.one_way_us.max, 10.0);
        assert_eq!(a.one_way_us.median, 1.5);
        assert_eq!(a.filtered.kept, 3);
        assert_eq!(a.filtered.removed, 1);
        assert_eq!(a.filtered.one_way_us.max, 2.0);
        assert_eq!(a.rate_mb_s.min, 8.0);
        assert_eq!(
            a.histogram.counts.iter().sum::<u64>() + a.histogram.overflow,
            4
        );
    }
}
