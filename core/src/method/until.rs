//! Measuring until the answer is known: a size's trials run in blocks, and after each block
//! `source` recomputes the distribution-free confidence interval of the median (the one every
//! point reports, [`crate::stats::median_ci_ranks_at`]); the size stops when the interval's
//! half-width is within a fraction of the median. This is netperf's confidence stopping
//! (`-I level,width`, `-i max,min`) on the median rather than the mean, and rule 5 of Hoefler
//! and Belli ("Scientific benchmarking of parallel computing systems", SC'15): report the
//! interval, and measure until it is as narrow as the question needs.
//!
//! A size that reaches a bound first (its most trials, its time, the run's time) stops there
//! and says so ([`Stopping::outcome`] `did_not_converge`, with the width reached): it is never
//! extended past the bound the user set, nor cut short of it. Everything else of the method
//! (warm-up, npp of seed 000 §3.3, the barrier and handshake before every trial of §3.2) is
//! as in a fixed count: only the number of trials changes.
//!
//! Blocks: the first holds [`UntilCi::min_trials`]; each later one [`UntilCi::block`] trials
//! or a twentieth of those already measured, whichever is more, so a size may overshoot the
//! trial at which it would have stopped by at most that, and the checks cost `O(n)` each and
//! `O(n log n)` in all (a fixed block would cost `O(n^2)` on a size of millions of trials).

use crate::stats;
use crate::transport::error::{Error, Result};
use serde::{Deserialize, Serialize};

/// The default trials of one block after the first.
pub const DEFAULT_BLOCK: u64 = 50;

/// The default fewest trials of a size.
pub const DEFAULT_MIN_TRIALS: u64 = 100;

/// The default coverage of the interval.
pub const DEFAULT_LEVEL: f64 = 0.95;

/// Trials in blocks until the median's interval is narrow enough (module docs). The most
/// trials of a size are the method's `trials`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UntilCi {
    /// The half-width of the interval the size stops at, as a fraction of the median
    /// (0.01: within 1 %).
    pub rel: f64,
    /// The interval's coverage (0.95).
    pub level: f64,
    /// The fewest trials of a size, at least [`stats::min_samples_for_median_ci`] of `level`
    /// (6 at 95 %).
    pub min_trials: u64,
    /// Trials of a block after the first (at least 1; a block grows with the trials already
    /// measured, module docs).
    pub block: u64,
    /// The most time one size's timed trials may take, ns of the timing rank's clock
    /// (virtual time on the simulator); `None`: no bound.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size_ns: Option<u64>,
    /// The most time the run's sizes may take, ns of the same clock, counted from the run's
    /// start; a size begun after it is spent gets its first block only. `None`: no bound.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_ns: Option<u64>,
}

impl UntilCi {
    /// Stop at a half-width within `rel` of the median at coverage `level`, the other
    /// settings their defaults.
    pub fn new(rel: f64, level: f64) -> Self {
        UntilCi {
            rel,
            level,
            min_trials: DEFAULT_MIN_TRIALS,
            block: DEFAULT_BLOCK,
            size_ns: None,
            run_ns: None,
        }
    }

    /// Whether the rule can work with at most `max_trials` trials a size: `rel` in `(0, 1)`,
    /// `level` in `[0.5, 1)`, enough trials for an interval at that level, a block of at
    /// least one trial, time bounds above zero.
    pub fn validate(&self, max_trials: u64) -> Result<()> {
        let bad = |m: String| Err(Error::Invalid(m));
        if !(self.rel > 0.0 && self.rel < 1.0) {
            return bad(format!(
                "a relative half-width of {}: must be above 0 and below 1",
                self.rel
            ));
        }
        if !(self.level >= 0.5 && self.level < 1.0) {
            return bad(format!(
                "a coverage of {}: must be at least 0.5 and below 1",
                self.level
            ));
        }
        let least = stats::min_samples_for_median_ci(self.level).unwrap_or(u64::MAX);
        if self.min_trials < least {
            return bad(format!(
                "at least {} trials: below {least}, even the smallest and largest trial do not \
                 cover the median with probability {}",
                self.min_trials,
                percent(self.level)
            ));
        }
        if self.min_trials > max_trials {
            return bad(format!(
                "at least {} trials but at most {max_trials}",
                self.min_trials
            ));
        }
        if self.block == 0 {
            return bad("a block of 0 trials".into());
        }
        if self.size_ns == Some(0) || self.run_ns == Some(0) {
            return bad("a time bound of 0".into());
        }
        Ok(())
    }

    /// Trials of the block after `done` trials: the first block up to `min_trials`, then
    /// `max(block, done / 20)`, never past `max_trials`.
    pub fn next_block(&self, done: u64, max_trials: u64) -> u64 {
        let want = if done < self.min_trials {
            self.min_trials - done
        } else {
            self.block.max(done / 20)
        };
        want.min(max_trials.saturating_sub(done))
    }
}

/// `0.95` as `95 %`.
fn percent(x: f64) -> String {
    format!("{} %", (x * 1e4).round() / 1e2)
}

/// How a size measured with [`UntilCi`] ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// The interval's half-width came within the asked fraction of the median.
    Converged,
    /// A bound came first: the interval is wider than asked ([`Stopping::half_width_rel`]).
    DidNotConverge,
    /// An all-pairs cell whose interval lies wholly on one side of its threshold
    /// ([`Stopping::threshold_us`]): what the verdict needs is known, however wide.
    Separated,
    /// An all-pairs cell whose interval, as narrow as asked, still held its threshold when a
    /// bound stopped it: a borderline cell, given every trial it could have.
    Borderline,
}

/// What stopped a size that did not converge.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Bound {
    /// Its most trials (the method's `trials`).
    MaxTrials,
    /// The most time of one size.
    SizeTime,
    /// The run's time, spent.
    RunTime,
}

impl Bound {
    /// The bound in words (`the most trials`).
    pub fn words(self) -> &'static str {
        match self {
            Bound::MaxTrials => "its most trials",
            Bound::SizeTime => "its most time",
            Bound::RunTime => "the run's most time",
        }
    }
}

/// How one size measured with [`UntilCi`] stopped: recorded with its point.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Stopping {
    /// The half-width asked for, a fraction of the median.
    pub rel: f64,
    /// The interval's coverage.
    pub level: f64,
    /// Converged or not.
    pub outcome: Outcome,
    /// What stopped a size that did not converge.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bound: Option<Bound>,
    /// The half-width reached at the last check, a fraction of the median (the larger side
    /// of the interval around it); `null` when the median is not above zero, where no
    /// relative width exists.
    #[serde(deserialize_with = "stats::f64_or_nan")]
    pub half_width_rel: f64,
    /// Times the interval was computed (blocks measured).
    pub checks: u64,
    /// The one-way time (us) an all-pairs cell's interval was held against: `min_factor`
    /// times the median of the cells of its size measured before its round. Absent for a
    /// sweep's sizes and for cells of a first round.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub threshold_us: Option<f64>,
}

/// The half-width of the interval at `level` around the median of `times`, a fraction of the
/// median: `max(median - lo, hi - median) / median`, on the same order statistics as
/// [`stats::median_ci_ranks_at`] gives every point's interval, so a size that stops here
/// reports the width it stopped at. `scratch` is reused between calls (its contents are
/// overwritten). `None` without trials; NaN when the median is not above zero.
pub fn half_width_rel(times: &[i64], level: f64, scratch: &mut Vec<i64>) -> Option<f64> {
    let n = times.len();
    let (lo, hi) = stats::median_ci_ranks_at(n as u64, level)?;
    scratch.clear();
    scratch.extend_from_slice(times);
    let mut at = |k: usize| -> i64 {
        let (_, x, _) = scratch.select_nth_unstable(k);
        *x
    };
    // Each selection leaves the smaller values before it: select the high ranks first.
    let x_hi = at(hi as usize) as f64;
    let upper_mid = at(n / 2) as f64;
    let median = if n % 2 == 1 {
        upper_mid
    } else {
        let lower_mid = at(n / 2 - 1) as f64;
        stats::lerp(lower_mid, upper_mid, 0.5)
    };
    let x_lo = at(lo as usize) as f64;
    if median <= 0.0 {
        return Some(f64::NAN);
    }
    Some((median - x_lo).max(x_hi - median) / median)
}

/// The interval at `level` of the median of `times`: `(lo, hi)` order statistics, as
/// [`half_width_rel`] selects them. `None` without trials.
pub fn interval(times: &[i64], level: f64, scratch: &mut Vec<i64>) -> Option<(i64, i64)> {
    let (lo, hi) = stats::median_ci_ranks_at(times.len() as u64, level)?;
    scratch.clear();
    scratch.extend_from_slice(times);
    let x_hi = *scratch.select_nth_unstable(hi as usize).1;
    let x_lo = *scratch.select_nth_unstable(lo as usize).1;
    Some((x_lo, x_hi))
}

/// A threshold an all-pairs cell's interval is held against: `trial_ns` in the units of its
/// trial times (what the decision compares), `one_way_us` as recorded.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Threshold {
    /// The threshold as a trial time, ns.
    pub trial_ns: f64,
    /// The same as a one-way time, us.
    pub one_way_us: f64,
}

/// `source`'s decision after a block: `None` to go on, or how the size stopped. `times` are
/// the size's trials so far; `size_ns` and `run_ns` the time its trials and the run have
/// taken; `max_trials` the method's `trials`. With a `threshold` (an all-pairs cell), the
/// cell stops once its interval lies wholly on one side of it (`separated`), and not before,
/// however narrow: a borderline cell runs to its bound.
pub fn decide(
    rule: &UntilCi,
    times: &[i64],
    (checks, threshold): (u64, Option<Threshold>),
    (size_ns, run_ns): (u64, Option<u64>),
    max_trials: u64,
    scratch: &mut Vec<i64>,
) -> Option<Stopping> {
    let hw = half_width_rel(times, rule.level, scratch).unwrap_or(f64::NAN);
    let done = times.len() as u64;
    let stop = |outcome, bound| {
        Some(Stopping {
            rel: rule.rel,
            level: rule.level,
            outcome,
            bound,
            half_width_rel: hw,
            checks,
            threshold_us: threshold.map(|t| t.one_way_us),
        })
    };
    let narrow = hw <= rule.rel;
    let enough = done >= rule.min_trials;
    match threshold {
        Some(t) => {
            let (lo, hi) = interval(times, rule.level, scratch)?;
            if enough && ((hi as f64) < t.trial_ns || (lo as f64) > t.trial_ns) {
                return stop(Outcome::Separated, None);
            }
        }
        None if enough && narrow => return stop(Outcome::Converged, None),
        None => {}
    }
    let bound = if done >= max_trials {
        Bound::MaxTrials
    } else if rule.size_ns.is_some_and(|b| size_ns >= b) {
        Bound::SizeTime
    } else if rule.run_ns.zip(run_ns).is_some_and(|(b, t)| t >= b) {
        Bound::RunTime
    } else {
        return None;
    };
    let outcome = if threshold.is_some() && narrow {
        Outcome::Borderline
    } else {
        Outcome::DidNotConverge
    };
    stop(outcome, Some(bound))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The half-width from a full sort, as the point's own summary computes it.
    fn by_sorting(times: &[i64], level: f64) -> f64 {
        let mut v: Vec<f64> = times.iter().map(|&t| t as f64).collect();
        stats::sort_samples(&mut v);
        let (lo, hi) = stats::median_ci_ranks_at(v.len() as u64, level).unwrap();
        let m = stats::median(&v).unwrap();
        (m - v[lo as usize]).max(v[hi as usize] - m) / m
    }

    #[test]
    fn the_width_by_selection_is_the_summary_s() {
        let mut rng = stats::Xoshiro256::new(7);
        let mut scratch = Vec::new();
        for case in 0..300 {
            let n = 1 + rng.below(3000);
            let level = [0.9, 0.95, 0.99][case % 3];
            let times: Vec<i64> = (0..n)
                .map(|_| 1000 + (rng.next_u64() % (1u64 << (rng.below(12) + 1))) as i64)
                .collect();
            let got = half_width_rel(&times, level, &mut scratch).unwrap();
            let want = by_sorting(&times, level);
            assert!(
                (got - want).abs() <= 1e-12 * want.max(1.0),
                "{n}: {got} {want}"
            );
        }
        assert_eq!(half_width_rel(&[], 0.95, &mut scratch), None);
        assert!(half_width_rel(&[0, 0, 5], 0.95, &mut scratch)
            .unwrap()
            .is_nan());
    }

    #[test]
    fn a_size_stops_at_its_width_or_at_the_first_bound_it_meets() {
        let rule = UntilCi {
            size_ns: Some(1000),
            run_ns: Some(5000),
            ..UntilCi::new(0.01, 0.95)
        };
        let mut s = Vec::new();
        let tight = vec![100i64; 200];
        let d = decide(&rule, &tight, (3, None), (10, Some(10)), 10_000, &mut s).unwrap();
        assert_eq!(
            (d.outcome, d.bound, d.checks),
            (Outcome::Converged, None, 3)
        );
        // Not before the fewest trials, even when the width is there.
        assert_eq!(
            decide(&rule, &tight[..50], (1, None), (0, None), 10_000, &mut s),
            None
        );
        let wide: Vec<i64> = (0..200).map(|i| 100 + i).collect();
        assert_eq!(
            decide(&rule, &wide, (1, None), (10, Some(10)), 10_000, &mut s),
            None
        );
        let bound = |t, r, max| {
            decide(&rule, &wide, (1, None), (t, r), max, &mut Vec::new()).and_then(|d| d.bound)
        };
        assert_eq!(bound(10, Some(10), 200), Some(Bound::MaxTrials));
        assert_eq!(bound(1000, Some(10), 10_000), Some(Bound::SizeTime));
        assert_eq!(bound(10, Some(5000), 10_000), Some(Bound::RunTime));
        assert_eq!(bound(10, None, 10_000), None);
        let d = decide(&rule, &wide, (1, None), (1000, None), 10_000, &mut s).unwrap();
        assert_eq!(d.outcome, Outcome::DidNotConverge);
        assert!(d.half_width_rel > 0.01, "{d:?}");
    }

    #[test]
    fn blocks_start_at_the_fewest_trials_and_grow_with_the_size() {
        let rule = UntilCi::new(0.01, 0.95);
        assert_eq!(rule.next_block(0, 10_000), DEFAULT_MIN_TRIALS);
        assert_eq!(rule.next_block(100, 10_000), DEFAULT_BLOCK);
        assert_eq!(rule.next_block(4000, 10_000), 200);
        assert_eq!(rule.next_block(9990, 10_000), 10);
        assert_eq!(rule.next_block(10_000, 10_000), 0);
        // Blocks of a run of a million trials: about 20 per doubling, not 20,000.
        let (mut done, mut blocks) = (0, 0);
        while done < 1_000_000 {
            done += rule.next_block(done, 1_000_000);
            blocks += 1;
        }
        assert!(blocks < 300, "{blocks}");
    }

    #[test]
    fn rules_that_cannot_work_are_refused_with_their_reason() {
        let ok = UntilCi::new(0.01, 0.99);
        assert!(ok.validate(10_000).is_ok());
        let why = |u: UntilCi, max| u.validate(max).unwrap_err().to_string();
        assert!(why(UntilCi::new(0.0, 0.95), 100).contains("above 0"));
        assert!(why(UntilCi::new(1.5, 0.95), 100).contains("below 1"));
        assert!(why(UntilCi::new(0.01, 1.0), 100).contains("below 1"));
        assert!(why(UntilCi::new(0.01, f64::NAN), 100).contains("coverage"));
        let few = UntilCi {
            min_trials: 7,
            ..UntilCi::new(0.01, 0.99)
        };
        assert!(
            why(few.clone(), 100).contains("below 8"),
            "{}",
            why(few, 100)
        );
        let six = UntilCi {
            min_trials: 6,
            ..UntilCi::new(0.01, 0.95)
        };
        assert!(six.validate(6).is_ok());
        assert!(why(six, 5).contains("at most 5"));
    }

    #[test]
    fn a_cell_stops_once_its_interval_leaves_its_threshold_and_not_before() {
        let rule = UntilCi {
            min_trials: 20,
            ..UntilCi::new(0.01, 0.95)
        };
        let at = |trial_ns: f64| {
            Some(Threshold {
                trial_ns,
                one_way_us: trial_ns / 2000.0,
            })
        };
        let mut s = Vec::new();
        // Trials of 1000 to 1099 ns: the interval is about [1040, 1059].
        let wide: Vec<i64> = (0..100).map(|i| 1000 + (i * 37) % 100).collect();
        let d = |t, max| decide(&rule, &wide, (4, at(t)), (0, None), max, &mut Vec::new());
        // Wider than 1%, but wholly below a threshold at 1250 ns: separated.
        let below = d(1250.0, 10_000).unwrap();
        assert_eq!((below.outcome, below.bound), (Outcome::Separated, None));
        assert_eq!(below.threshold_us, Some(0.625));
        assert_eq!(d(800.0, 10_000).unwrap().outcome, Outcome::Separated);
        // Holding the threshold: go on, and at the bound, not converged.
        assert_eq!(d(1050.0, 10_000), None);
        let end = d(1050.0, 100).unwrap();
        assert_eq!(
            (end.outcome, end.bound),
            (Outcome::DidNotConverge, Some(Bound::MaxTrials))
        );
        // As narrow as asked but on the threshold: borderline, given every trial.
        let tight = vec![1000i64; 100];
        let mut on = |max| decide(&rule, &tight, (1, at(1000.0)), (0, None), max, &mut s);
        assert_eq!(on(10_000), None);
        assert_eq!(on(100).unwrap().outcome, Outcome::Borderline);
        // Not before the fewest trials.
        assert_eq!(
            decide(
                &rule,
                &wide[..10],
                (1, at(5000.0)),
                (0, None),
                10_000,
                &mut s
            ),
            None
        );
    }
}
