//! The measurement method of seed 000: the clock's characterisation ([`timer`],
//! §3.1), the configuration and the choice of `npp` (§3.3, here), the one trial engine with
//! its barrier and handshake ([`engine`], §3.2), and what it measures ([`transpose`] and the
//! patterns of [`engine`]). The analysis of the trial times (§3.4) runs on rank 0 outside
//! this crate. Every benchmark answers what a plan asks of it through [`benchmark`].

pub mod alloc;
pub mod allpairs;
pub mod benchmark;
pub mod buffers;
pub mod engine;
pub mod kernels;
pub mod limits;
pub mod npp_check;
pub mod pairs;
pub mod progress;
pub mod queue;
pub mod sixtimes;
pub mod stop;
pub mod sweep;
pub mod timer;
pub mod transpose;
pub mod units;
pub mod until;

pub use kernels::PatternKind;

use crate::stats;
use crate::transport::error::{Error, Result};
use crate::transport::Rank;
use serde::{Deserialize, Serialize};

/// How `npp`, the number of ping-pongs in one timing loop, is chosen.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "mode")]
pub enum NppChoice {
    /// Seed 000 §3.3: measured per size from the timer resolution.
    Auto {
        /// `res_npp`: the timing loop should last at least `res_npp * res_timing`.
        res_npp: u64,
        /// `npp_init`: ping-pongs per loop while estimating the ping-pong time.
        npp_init: u64,
        /// `npptrial`: estimation loops.
        npptrial: u64,
    },
    /// A value given.
    Fixed(u64),
    /// The npp study of seed 000 Tables 4.1-4.3 (npp 1, 9, 18, 36, ...): every size is measured
    /// once per value, one row each.
    Study(Vec<u64>),
}

impl NppChoice {
    /// The fixed values to measure with (empty for [`NppChoice::Auto`]).
    pub fn fixed_values(&self) -> Vec<u64> {
        match self {
            NppChoice::Auto { .. } => Vec::new(),
            NppChoice::Fixed(n) => vec![*n],
            NppChoice::Study(v) => v.clone(),
        }
    }
}

/// Everything that shapes a measurement, shared by all ranks of a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MethodConfig {
    /// Message sizes in bytes, measured in this order.
    pub sizes: Vec<u64>,
    /// `ntrial`: timed trials per size.
    pub trials: u64,
    /// Untimed ping-pongs before the first trial of each size.
    pub warmup: u64,
    /// How `npp` is chosen.
    pub npp: NppChoice,
    /// Filter: trials above `cut_coef` x median are removed in the filtered analysis.
    pub cut_coef: f64,
    /// Back-to-back clock-read pairs for the timer characterisation (§3.1).
    pub timer_samples: u64,
    /// The rank that times (`source`).
    pub source: Rank,
    /// The rank that echoes (`dest`).
    pub dest: Rank,
    /// How the message buffers are placed, reused, checked and left in the caches
    /// ([`buffers`]).
    #[serde(default)]
    pub buffers: buffers::BufferOptions,
    /// Trials in blocks until the median's interval is narrow enough ([`until`]), `trials`
    /// then the most a size may take; `None`: every size takes `trials`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub until: Option<until::UntilCi>,
    /// Pairs that stream at once ([`pairs`]); pair 0 is `source` -> `dest`. `None`: the one
    /// pair `source` and `dest`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pairs: Option<pairs::Concurrent>,
}

impl Default for MethodConfig {
    fn default() -> Self {
        MethodConfig {
            sizes: vec![8],
            trials: 10_000,
            warmup: 100,
            npp: NppChoice::Auto {
                res_npp: 50,
                npp_init: 4,
                npptrial: 200,
            },
            cut_coef: 2.0,
            timer_samples: 1 << 24,
            source: 0,
            dest: 1,
            buffers: buffers::BufferOptions::default(),
            until: None,
            pairs: None,
        }
    }
}

/// A setting of the method, as an invalid configuration names it (a front end maps it to
/// its own name for the setting, such as a command-line flag).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Setting {
    /// The message sizes.
    Sizes,
    /// `ntrial`.
    Trials,
    /// The untimed iterations before each size's trials.
    Warmup,
    /// The timer characterisation's clock-read pairs.
    TimerSamples,
    /// `res_npp`, `npp_init` and `npptrial` of the npp calculation (§3.3).
    NppCalculation,
    /// A given npp.
    Npp,
    /// The filter's `cut_coef` (§3.4).
    CutCoef,
    /// The `source` and `dest` ranks.
    Ranks,
    /// The sends outstanding in one window of a streaming pattern.
    Window,
    /// The alignment of message buffers.
    Align,
    /// The offset of messages from an aligned address.
    Offset,
    /// The pool a cold cache writes through.
    CachePool,
    /// What the kernel can do with its buffers (a check or a reuse it does not have).
    Buffers,
    /// The rule that stops a size on its confidence interval ([`until`]).
    UntilCi,
}

/// A configuration the method cannot run: which setting, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invalid {
    /// The setting at fault.
    pub setting: Setting,
    /// Why, in words that name the setting.
    pub reason: String,
    /// What would do instead, when there is more to say than the setting's bound.
    pub hint: Option<String>,
}

fn invalid(setting: Setting, reason: impl Into<String>) -> std::result::Result<(), Invalid> {
    Err(Invalid {
        setting,
        reason: reason.into(),
        hint: None,
    })
}

/// `value` must be at most `max`; `what` names the count (`trials per size`) and `why` says
/// what the bound protects.
fn at_most(
    setting: Setting,
    value: u64,
    max: u64,
    what: &str,
    why: &str,
) -> std::result::Result<(), Invalid> {
    if value > max {
        return Err(Invalid {
            setting,
            reason: format!("{value} {what}: at most {max} ({why})"),
            hint: Some(format!(
                "ask for at most {max}; docs/methodology.md (Limits) gives the reason for each bound"
            )),
        });
    }
    Ok(())
}

/// The clock-read pairs of a timer characterisation: at least 1, at most
/// [`limits::MAX_TIMER_SAMPLES`].
pub fn check_timer_samples(samples: u64) -> std::result::Result<(), Invalid> {
    if samples == 0 {
        return invalid(
            Setting::TimerSamples,
            "the timer characterisation needs at least 1 pair of clock reads",
        );
    }
    at_most(
        Setting::TimerSamples,
        samples,
        limits::MAX_TIMER_SAMPLES,
        "pairs of clock reads",
        "2^32 pairs already read the clock for a minute or more",
    )
}

impl MethodConfig {
    /// Check the configuration against a run of `size` ranks.
    pub fn validate(&self, size: u32) -> Result<()> {
        self.check(size).map_err(|e| Error::Config(e.reason))
    }

    /// [`MethodConfig::validate`], naming the setting at fault.
    pub fn check(&self, size: u32) -> std::result::Result<(), Invalid> {
        self.check_counts()?;
        self.buffers.check()?;
        if let Some(u) = &self.until {
            if let Err(e) = u.validate(self.trials) {
                return invalid(Setting::UntilCi, e.to_string());
            }
        }
        if !(self.cut_coef.is_finite() && self.cut_coef >= 1.0) {
            return invalid(
                Setting::CutCoef,
                format!("cut_coef {} must be a number >= 1", self.cut_coef),
            );
        }
        if self.source == self.dest {
            return invalid(
                Setting::Ranks,
                format!(
                    "source and dest are both rank {}; a ping-pong needs two ranks",
                    self.source
                ),
            );
        }
        if let Some(c) = &self.pairs {
            return self.check_pairs(c, size);
        }
        for (name, r) in [("source", self.source), ("dest", self.dest)] {
            if r >= size {
                return invalid(
                    Setting::Ranks,
                    format!(
                        "{name} rank {r} is out of range: the run has {size} ranks (0..{})",
                        size.saturating_sub(1)
                    ),
                );
            }
        }
        Ok(())
    }

    /// Concurrent pairs: each rank in one pair and in range, pair 0 the `source` and `dest`,
    /// and (for now) a fixed count of trials: a size stopped on its interval would be decided
    /// on pair 0's trials alone.
    fn check_pairs(&self, c: &pairs::Concurrent, size: u32) -> std::result::Result<(), Invalid> {
        if let Some(why) = c.problem(size) {
            return invalid(Setting::Ranks, why);
        }
        let first = c.pairs[0];
        if (first.sender, first.receiver) != (self.source, self.dest) {
            return invalid(
                Setting::Ranks,
                format!(
                    "pair 0 is {} -> {} but source and dest are {} and {}",
                    first.sender, first.receiver, self.source, self.dest
                ),
            );
        }
        if self.until.is_some() && c.pairs.len() > 1 {
            return invalid(
                Setting::UntilCi,
                "concurrent pairs take a fixed count of trials: stopping on a confidence \
                 interval would decide on one pair's trials while the others stream",
            );
        }
        Ok(())
    }

    /// What rank `me` does in a trial: it times (`source`, or a pair's sender), answers
    /// (`dest`, a pair's receiver) or joins only the control plane.
    pub fn role(&self, me: Rank) -> pairs::TrialRole {
        if let Some(c) = &self.pairs {
            return c.role(me);
        }
        if me == self.source {
            pairs::TrialRole::Timer { peer: self.dest }
        } else if me == self.dest {
            pairs::TrialRole::Partner { peer: self.source }
        } else {
            pairs::TrialRole::Idle
        }
    }

    /// Sizes, trials, clock reads and npp: each needs at least one, and none may ask for more
    /// than [`limits`] allows.
    fn check_counts(&self) -> std::result::Result<(), Invalid> {
        use limits::{MAX_ITERATIONS, MAX_TRIALS};
        if self.sizes.is_empty() {
            return invalid(Setting::Sizes, "no message sizes");
        }
        if self.trials == 0 {
            return invalid(Setting::Trials, "the number of trials must be at least 1");
        }
        at_most(
            Setting::Trials,
            self.trials,
            MAX_TRIALS,
            "trials per size",
            EVERY_TRIAL,
        )?;
        at_most(
            Setting::Warmup,
            self.warmup,
            MAX_ITERATIONS,
            "warm-up iterations per size",
            "10^9 iterations take minutes even at the fastest",
        )?;
        check_timer_samples(self.timer_samples)?;
        let values = self.check_npp()?;
        self.check_points(values)
    }

    /// Checks the npp setting and gives how many npp values each size is measured with.
    fn check_npp(&self) -> std::result::Result<usize, Invalid> {
        match &self.npp {
            NppChoice::Auto {
                res_npp,
                npp_init,
                npptrial,
            } => {
                check_npp_calculation(*res_npp, *npp_init, *npptrial)?;
                Ok(1)
            }
            other => {
                let v = other.fixed_values();
                check_fixed_npp(&v)?;
                Ok(v.len())
            }
        }
    }

    /// Checks that the sizes times the npp `values` stay within [`limits::MAX_POINTS`].
    fn check_points(&self, values: usize) -> std::result::Result<(), Invalid> {
        use limits::MAX_POINTS;
        let points = self.sizes.len().saturating_mul(values);
        if points > MAX_POINTS {
            let which = if values > 1 {
                format!("{} sizes x {values} npp values", self.sizes.len())
            } else {
                format!("{} sizes", self.sizes.len())
            };
            return invalid(
                if values > 1 && self.sizes.len() <= MAX_POINTS {
                    Setting::Npp
                } else {
                    Setting::Sizes
                },
                format!(
                    "{which}: at most {MAX_POINTS} points a run (each point is a warm-up, an npp \
                     estimate and its trials, all kept on rank 0)"
                ),
            );
        }
        Ok(())
    }
}

/// Why trials are bounded: the reason given for both the trials and npptrial.
const EVERY_TRIAL: &str = "every trial keeps an 8-byte time and follows a barrier and a handshake";

/// Checks the counts of a calculated npp: each at least 1 and within its bound.
fn check_npp_calculation(
    res_npp: u64,
    npp_init: u64,
    npptrial: u64,
) -> std::result::Result<(), Invalid> {
    use limits::{MAX_ITERATIONS, MAX_TRIALS};
    if res_npp == 0 || npp_init == 0 || npptrial == 0 {
        return invalid(
            Setting::NppCalculation,
            "res_npp, npp_init and npptrial must be at least 1",
        );
    }
    let why = "the calculated npp itself stops at 10^9";
    at_most(
        Setting::NppCalculation,
        res_npp,
        MAX_ITERATIONS,
        "res_npp",
        why,
    )?;
    at_most(
        Setting::NppCalculation,
        npp_init,
        MAX_ITERATIONS,
        "npp_init",
        why,
    )?;
    at_most(
        Setting::NppCalculation,
        npptrial,
        MAX_TRIALS,
        "npptrial",
        EVERY_TRIAL,
    )
}

/// Checks fixed npp values: at least one, none 0, the largest within its bound.
fn check_fixed_npp(values: &[u64]) -> std::result::Result<(), Invalid> {
    if values.is_empty() || values.contains(&0) {
        return invalid(Setting::Npp, "npp must be at least 1");
    }
    let big = values.iter().copied().max().unwrap_or(1);
    at_most(
        Setting::Npp,
        big,
        limits::MAX_ITERATIONS,
        "iterations per timing loop",
        "the npp formula stops at the same value; more only lengthens every trial",
    )
}

/// Seed 000 §3.3: `npp = nint(max(1, res_npp * res_timing / median_ppt))`, where
/// `median_ppt = median(npptime / npp_init)` is the median time of one ping-pong.
/// A non-positive or non-finite `median_ppt` (a clock too coarse to see one loop) gives
/// `res_npp * res_timing` loops' worth, capped, rather than a division by zero.
pub fn npp_formula(res_npp: u64, res_timing_ns: f64, median_ppt_ns: f64) -> u64 {
    const CAP: f64 = 1e9;
    let want = res_npp as f64 * res_timing_ns;
    let x = if median_ppt_ns > 0.0 && median_ppt_ns.is_finite() {
        want / median_ppt_ns
    } else if want > 0.0 {
        CAP
    } else {
        1.0
    };
    // Fortran's nint rounds half away from zero, as f64::round does.
    x.clamp(1.0, CAP).round() as u64
}

/// `median_ppt` from the estimation trials: the median of `npptime(k) / npp_init` (ns).
pub fn median_ppt(npptime_ns: &[i64], npp_init: u64) -> f64 {
    let mut v: Vec<f64> = npptime_ns
        .iter()
        .map(|&t| t as f64 / npp_init.max(1) as f64)
        .collect();
    stats::sort_samples(&mut v);
    stats::median(&v).unwrap_or(0.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn npp_formula_matches_seed_examples() {
        // §3.3: resolution 1 us, ping-pong 2 us, res_npp 50 -> 25.
        assert_eq!(npp_formula(50, 1000.0, 2000.0), 25);
        // Fewer than one loop needed -> 1.
        assert_eq!(npp_formula(50, 20.0, 40_000.0), 1);
        // nint rounds half away from zero: 50 * 1 / 4 = 12.5 -> 13.
        assert_eq!(npp_formula(50, 1.0, 4.0), 13);
        assert_eq!(npp_formula(50, 1.0, 4.01), 12);
        // Table 4.1: res_npp 25/50/100/200/400 gave 9/18/36/72/144 on lightning, i.e.
        // res_timing / median_ppt = 0.36: 25 * 0.36 = 9.
        for (r, n) in [(25, 9), (50, 18), (100, 36), (200, 72), (400, 144)] {
            assert_eq!(npp_formula(r, 954.0, 954.0 / 0.36), n);
        }
        // A clock that never advanced: resolution 0 -> 1 ping-pong.
        assert_eq!(npp_formula(50, 0.0, 0.0), 1);
        // A coarse clock that saw no time pass in npp_init loops: many loops, finite.
        assert!(npp_formula(50, 140_000.0, 0.0) > 1);
    }

    #[test]
    fn median_ppt_divides_by_npp_init() {
        assert_eq!(median_ppt(&[40, 80, 60], 4), 15.0);
        assert_eq!(median_ppt(&[], 4), 0.0);
    }

    #[test]
    fn invalid_configurations_name_their_setting() {
        let base = MethodConfig::default();
        let cases = [
            (
                MethodConfig {
                    sizes: vec![],
                    ..base.clone()
                },
                Setting::Sizes,
            ),
            (
                MethodConfig {
                    trials: 0,
                    ..base.clone()
                },
                Setting::Trials,
            ),
            (
                MethodConfig {
                    timer_samples: 0,
                    ..base.clone()
                },
                Setting::TimerSamples,
            ),
            (
                MethodConfig {
                    npp: NppChoice::Fixed(0),
                    ..base.clone()
                },
                Setting::Npp,
            ),
            (
                MethodConfig {
                    cut_coef: 0.5,
                    ..base.clone()
                },
                Setting::CutCoef,
            ),
            (
                MethodConfig {
                    dest: 7,
                    ..base.clone()
                },
                Setting::Ranks,
            ),
            (
                MethodConfig {
                    npp: NppChoice::Auto {
                        res_npp: 50,
                        npp_init: 0,
                        npptrial: 200,
                    },
                    ..base.clone()
                },
                Setting::NppCalculation,
            ),
        ];
        for (cfg, setting) in cases {
            let e = cfg.check(2).unwrap_err();
            assert_eq!(e.setting, setting, "{}", e.reason);
            assert!(!e.reason.contains("--"), "{}", e.reason);
        }
    }

    #[test]
    fn counts_beyond_their_bounds_name_the_setting_and_the_bound() {
        let base = MethodConfig::default();
        let cases = [
            (
                MethodConfig {
                    trials: limits::MAX_TRIALS + 1,
                    ..base.clone()
                },
                Setting::Trials,
                "at most 100000000",
            ),
            (
                MethodConfig {
                    warmup: u64::MAX,
                    ..base.clone()
                },
                Setting::Warmup,
                "18446744073709551615 warm-up iterations per size: at most 1000000000",
            ),
            (
                MethodConfig {
                    timer_samples: u64::MAX,
                    ..base.clone()
                },
                Setting::TimerSamples,
                "at most 4294967296",
            ),
            (
                MethodConfig {
                    npp: NppChoice::Fixed(u64::MAX),
                    ..base.clone()
                },
                Setting::Npp,
                "18446744073709551615 iterations per timing loop",
            ),
            (
                MethodConfig {
                    npp: NppChoice::Auto {
                        res_npp: 50,
                        npp_init: 4,
                        npptrial: u64::MAX,
                    },
                    ..base.clone()
                },
                Setting::NppCalculation,
                "npptrial",
            ),
            (
                MethodConfig {
                    sizes: (0..=limits::MAX_POINTS as u64).collect(),
                    ..base.clone()
                },
                Setting::Sizes,
                "10001 sizes: at most 10000 points",
            ),
            (
                MethodConfig {
                    sizes: (0..2000).collect(),
                    npp: NppChoice::Study(vec![1, 9, 18, 36, 72, 144]),
                    ..base.clone()
                },
                Setting::Npp,
                "2000 sizes x 6 npp values",
            ),
        ];
        for (cfg, setting, needle) in cases {
            let e = cfg.check(2).unwrap_err();
            assert_eq!(e.setting, setting, "{}", e.reason);
            assert!(e.reason.contains(needle), "{needle:?} not in {}", e.reason);
        }
        // The bounds themselves are accepted.
        let at_bounds = MethodConfig {
            trials: limits::MAX_TRIALS,
            warmup: limits::MAX_ITERATIONS,
            timer_samples: limits::MAX_TIMER_SAMPLES,
            npp: NppChoice::Fixed(limits::MAX_ITERATIONS),
            sizes: (1..=limits::MAX_POINTS as u64).collect(),
            ..base
        };
        assert!(at_bounds.check(2).is_ok());
        assert!(check_timer_samples(0).is_err());
        assert!(check_timer_samples(1 << 24).is_ok());
    }

    #[test]
    fn validation_errors() {
        let mut c = MethodConfig::default();
        assert!(c.validate(2).is_ok());
        c.dest = 0;
        assert!(c.validate(2).is_err());
        c.dest = 5;
        assert!(c.validate(2).is_err());
        let c = MethodConfig {
            npp: NppChoice::Fixed(0),
            ..MethodConfig::default()
        };
        assert!(c.validate(2).is_err());
        let c = MethodConfig {
            cut_coef: f64::NAN,
            ..MethodConfig::default()
        };
        assert!(c.validate(2).is_err());
    }
}
