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
    /// The modes of the one-way time ([`modality`]); `None` with too few trials to judge.
    pub modality: Option<Modality>,
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
    let modality = modality(&v);
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
        modality,
    })
}

/// Share of the trials the `cut_coef` filter may remove before a point is flagged. The
/// filter is meant to drop rare interruptions (seed 000's Appendix C removes 0.013 % of
/// 2^23 trials); removing more than a few percent means the filtered statistics describe
/// only part of the distribution.
pub const FILTER_WARN_FRACTION: f64 = 0.05;

/// The warning for a filter that kept `kept` and removed `removed` trials, when it removed
/// more than [`FILTER_WARN_FRACTION`] of them.
pub fn filter_warning(kept: u64, removed: u64) -> Option<String> {
    let total = kept + removed;
    if total == 0 || (removed as f64) <= FILTER_WARN_FRACTION * total as f64 {
        return None;
    }
    Some(format!(
        "the cut_coef filter removed {} of the trials ({removed} of {total}, more than {}): \
         the filtered statistics describe only part of the distribution",
        percent(removed as f64 / total as f64),
        percent(FILTER_WARN_FRACTION),
    ))
}

/// The warning for times with more than one mode.
pub fn modality_warning(m: &Modality) -> Option<String> {
    if !m.multimodal || m.modes.len() < 2 {
        return None;
    }
    let modes: Vec<String> = m
        .modes
        .iter()
        .map(|x| format!("~{} us ({})", sig3(x.at_us), percent(x.weight)))
        .collect();
    let list = match modes.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} and {last}", rest.join(", ")),
        _ => modes.join(""),
    };
    Some(format!(
        "the one-way times look multimodal: modes at {list} (kernel density of log times); \
         a median or mean describes the mixture, not either mode"
    ))
}

/// A fraction as a percentage with two significant digits (`47%`, `5.2%`, `0.13%`).
fn percent(f: f64) -> String {
    let p = 100.0 * f;
    if p >= 10.0 {
        format!("{p:.0}%")
    } else if p >= 1.0 {
        format!("{p:.1}%")
    } else {
        format!("{p:.2}%")
    }
}

/// Three significant digits (`1.23`, `45.6`, `1234`, `0.000123`).
fn sig3(x: f64) -> String {
    if !x.is_finite() || x == 0.0 {
        return format!("{x}");
    }
    let d = (2 - x.abs().log10().floor() as i32).max(0) as usize;
    format!("{x:.d$}")
}

/// Fewest positive trials [`modality`] judges; with fewer a second mode cannot be told
/// from noise.
pub const MODALITY_MIN_TRIALS: usize = 20;
/// Smallest share of the trials a mode must hold; a smaller bump is a tail, not a mode.
pub const MODE_MIN_WEIGHT: f64 = 0.05;
/// A valley between two peaks separates two modes only when the density there is below
/// this fraction of the lower peak's density.
pub const MODE_MAX_VALLEY: f64 = 0.5;
/// Smallest kernel bandwidth, in natural-log units (a factor of about 1.02 in time): modes
/// closer than a few percent are not told apart.
pub const MODE_MIN_BANDWIDTH: f64 = 0.02;
/// Grid points of the density estimate.
const MODE_GRID: usize = 1024;

/// One mode of a distribution of times.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Mode {
    /// Where the density peaks, us.
    pub at_us: f64,
    /// Share of all trials in the mode's basin (between the valleys on either side).
    pub weight: f64,
}

/// Whether the times have more than one mode, and where (see [`modality`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Modality {
    /// More than one mode.
    pub multimodal: bool,
    /// The modes, fastest first.
    pub modes: Vec<Mode>,
    /// The kernel bandwidth used, natural-log units.
    pub bandwidth_ln: f64,
}

/// The modes of SORTED times (any unit, only positive values count), from a Gaussian kernel
/// density estimate of their logarithms.
///
/// Latency is a positive quantity whose distributions are skewed with long right tails
/// (lognormal-, gamma- or exponential-like); on a log scale those are unimodal and close to
/// symmetric, while two clusters of times (two protocols, two placements, a cache that
/// sometimes misses) stay two peaks. The estimate uses Silverman's bandwidth
/// `0.9 min(sd, IQR/1.34) n^(-1/5)` of the logs, at least [`MODE_MIN_BANDWIDTH`] and at
/// least the spacing of the timer's grid (the smallest gap between distinct times, relative
/// to the median), so that quantised times are not read as many modes. The density is
/// evaluated on a grid by binning; its peaks are merged with a neighbour while the valley
/// between them is higher than [`MODE_MAX_VALLEY`] of the lower peak or while a peak's
/// basin holds less than [`MODE_MIN_WEIGHT`] of the trials. What is left are the modes.
///
/// `None` with fewer than [`MODALITY_MIN_TRIALS`] positive times.
pub fn modality(sorted: &[f64]) -> Option<Modality> {
    let pos: Vec<f64> = sorted
        .iter()
        .copied()
        .filter(|&x| x > 0.0 && x.is_finite())
        .map(f64::ln)
        .collect();
    let n = pos.len();
    if n < MODALITY_MIN_TRIALS {
        return None;
    }
    let one = |at: f64| Modality {
        multimodal: false,
        modes: vec![Mode {
            at_us: at.exp(),
            weight: 1.0,
        }],
        bandwidth_ln: 0.0,
    };
    let (lo, hi) = (pos[0], pos[n - 1]);
    let med = stats::median(&pos)?;
    if !(hi > lo) {
        return Some(one(med));
    }
    let (_, var) = stats::mean_variance(&pos)?;
    let sd = var.sqrt();
    let iqr = stats::quantile(&pos, 0.75)? - stats::quantile(&pos, 0.25)?;
    let spread = if iqr > 0.0 { sd.min(iqr / 1.34) } else { sd };
    // The grid of the timer: the smallest gap between distinct times, relative to the
    // median (in log units near the median).
    let quantum = pos
        .windows(2)
        .map(|w| w[1].exp() - w[0].exp())
        .filter(|&d| d > 0.0)
        .fold(f64::INFINITY, f64::min)
        / med.exp();
    let h = (0.9 * spread * (n as f64).powf(-0.2))
        .max(MODE_MIN_BANDWIDTH)
        .max(if quantum.is_finite() { quantum } else { 0.0 });
    // Linear binning onto the grid, then the Gaussian kernel (cut at 4 h).
    let g0 = lo - 3.0 * h;
    let step = (hi + 3.0 * h - g0) / (MODE_GRID - 1) as f64;
    let mut mass = vec![0.0f64; MODE_GRID];
    for &y in &pos {
        let u = (y - g0) / step;
        let i = (u.floor() as usize).min(MODE_GRID - 2);
        let f = (u - i as f64).clamp(0.0, 1.0);
        mass[i] += 1.0 - f;
        mass[i + 1] += f;
    }
    let reach = ((4.0 * h / step).ceil() as usize).min(MODE_GRID);
    let kernel: Vec<f64> = (0..=reach)
        .map(|k| (-0.5 * (k as f64 * step / h).powi(2)).exp())
        .collect();
    let mut dens = vec![0.0f64; MODE_GRID];
    for (i, &m) in mass.iter().enumerate() {
        if m == 0.0 {
            continue;
        }
        let a = i.saturating_sub(reach);
        let b = (i + reach).min(MODE_GRID - 1);
        for (j, d) in dens.iter_mut().enumerate().take(b + 1).skip(a) {
            *d += m * kernel[i.abs_diff(j)];
        }
    }
    // Peaks (the middle of a plateau) and the lowest point between adjacent peaks.
    let mut peaks: Vec<usize> = Vec::new();
    let mut i = 0;
    while i < MODE_GRID {
        let mut j = i;
        while j + 1 < MODE_GRID && dens[j + 1] == dens[i] {
            j += 1;
        }
        let left_lower = i == 0 || dens[i - 1] < dens[i];
        let right_lower = j + 1 == MODE_GRID || dens[j + 1] < dens[i];
        if left_lower && right_lower && dens[i] > 0.0 {
            peaks.push((i + j) / 2);
        }
        i = j + 1;
    }
    if peaks.len() < 2 {
        return Some(Modality {
            bandwidth_ln: h,
            ..one(peaks.first().map_or(med, |&p| g0 + p as f64 * step))
        });
    }
    let valley = |a: usize, b: usize| -> usize {
        (a..=b)
            .min_by(|&x, &y| dens[x].total_cmp(&dens[y]))
            .unwrap_or(a)
    };
    // Share of the trials between grid points a (exclusive) and b (inclusive), by the
    // sorted logs.
    let at = |k: usize| g0 + k as f64 * step;
    let count_below = |y: f64| pos.partition_point(|&x| x < y);
    loop {
        let valleys: Vec<usize> = peaks.windows(2).map(|w| valley(w[0], w[1])).collect();
        let edges: Vec<usize> = std::iter::once(0)
            .chain(valleys.iter().map(|&v| count_below(at(v))))
            .chain(std::iter::once(n))
            .collect();
        let weight = |k: usize| (edges[k + 1] - edges[k]) as f64 / n as f64;
        // The shallowest valley relative to its lower peak, and the lightest mode.
        let (shallow, depth) = valleys
            .iter()
            .enumerate()
            .map(|(k, &v)| (k, dens[v] / dens[peaks[k]].min(dens[peaks[k + 1]])))
            .max_by(|a, b| a.1.total_cmp(&b.1))
            .expect("two peaks have a valley");
        let (light, w) = (0..peaks.len())
            .map(|k| (k, weight(k)))
            .min_by(|a, b| a.1.total_cmp(&b.1))
            .expect("peaks");
        if depth > MODE_MAX_VALLEY {
            // Merge the two peaks of the shallow valley into the higher.
            let drop = if dens[peaks[shallow]] < dens[peaks[shallow + 1]] {
                shallow
            } else {
                shallow + 1
            };
            peaks.remove(drop);
        } else if w < MODE_MIN_WEIGHT {
            peaks.remove(light);
        } else {
            let modes = (0..peaks.len())
                .map(|k| Mode {
                    at_us: at(peaks[k]).exp(),
                    weight: weight(k),
                })
                .collect::<Vec<_>>();
            return Some(Modality {
                multimodal: modes.len() > 1,
                modes,
                bandwidth_ln: h,
            });
        }
        if peaks.len() < 2 {
            return Some(Modality {
                bandwidth_ln: h,
                ..one(at(peaks[0]))
            });
        }
    }
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
