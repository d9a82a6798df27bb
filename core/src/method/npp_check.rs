//! Whether a calculated npp (seed 000 §3.3) agrees with the trials measured with it.
//!
//! §3.3 estimates the time of one iteration from `npptrial` short loops of `npp_init`
//! iterations and sets `npp` so that a timing loop lasts `res_npp x res_timing`. The estimate
//! takes a fraction of a second; a host that is busy for that fraction (another process
//! scheduled on the CPU, a page-cache flush) makes it far too long, and npp far too small, with
//! nothing in the result to show it: one shared-memory run estimated 12 ms per ping-pong and
//! chose npp 1 where 5 was due. The trials themselves measure the same iteration `ntrial`
//! times with longer loops, so their median is a second, better estimate: when the npp it
//! gives differs from the one used by more than [`AGREE_FACTOR`], the estimate is rejected, its
//! trials are discarded and npp is estimated again, at most [`REESTIMATES`] times. An estimate
//! still at odds with its trials after that is kept and reported with a warning
//! ([`NppCheck::warning`]).

use crate::method::npp_formula;
use serde::{Deserialize, Serialize};

/// Estimates of npp after the first, at most, for one size.
pub const REESTIMATES: usize = 2;

/// The npp the trials give and the npp used agree when neither is more than this many times
/// the other: a loop half as long as `res_npp` asks still lasts `res_npp / 2` ticks, twice as
/// long only costs time.
pub const AGREE_FACTOR: u64 = 2;

/// One estimate of npp (§3.3) and what the trials measured with it say of it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct NppEstimate {
    /// `median_ppt` of the estimate: the median time of one iteration in `npptrial` loops of
    /// `npp_init`, ns.
    pub median_ppt_ns: f64,
    /// npp the estimate gave (and the trials used).
    pub npp: u64,
    /// The median time of one iteration in the trials measured with it: the median trial
    /// time over npp, ns.
    pub trials_ppt_ns: f64,
    /// npp the §3.3 formula gives from `trials_ppt_ns`.
    pub npp_from_trials: u64,
}

impl NppEstimate {
    /// The estimate that gave `npp` from `median_ppt_ns`, checked against the trial times
    /// (ns, `min_ov` subtracted) measured with it, for `res_npp` and `res_timing_ns`.
    pub fn check(
        res_npp: u64,
        res_timing_ns: f64,
        median_ppt_ns: f64,
        npp: u64,
        trial_ns: &[i64],
    ) -> NppEstimate {
        let trials_ppt_ns = crate::method::median_ppt(trial_ns, npp);
        NppEstimate {
            median_ppt_ns,
            npp,
            trials_ppt_ns,
            npp_from_trials: npp_formula(res_npp, res_timing_ns, trials_ppt_ns),
        }
    }

    /// Whether the trials contradict the estimate: the npp they give is more than
    /// [`AGREE_FACTOR`] times the npp used, or less than its [`AGREE_FACTOR`]th part.
    pub fn disagrees(&self) -> bool {
        let (a, b) = (self.npp.max(1), self.npp_from_trials.max(1));
        a.max(b) > AGREE_FACTOR.saturating_mul(a.min(b))
    }
}

/// What the npp of one point went through: the estimates its trials rejected, in order, and
/// the one kept. Absent when npp was given.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NppCheck {
    /// Estimates whose trials disagreed with them; their trials were discarded.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rejected: Vec<NppEstimate>,
    /// The estimate of the trials kept.
    pub kept: NppEstimate,
}

impl NppCheck {
    /// The warning a kept estimate still at odds with its trials deserves; `None` when they
    /// agree.
    pub fn warning(&self) -> Option<String> {
        let k = &self.kept;
        k.disagrees().then(|| {
            format!(
                "npp {} came from an estimate of {} ns per iteration (§3.3), but the trials took \
                 {} ns per iteration, for which the formula gives npp {}; estimated {} times, \
                 the host was probably busy: measure again",
                k.npp,
                ns(k.median_ppt_ns),
                ns(k.trials_ppt_ns),
                k.npp_from_trials,
                self.rejected.len() + 1
            )
        })
    }
}

/// A time in ns for a sentence: one decimal, or four significant digits when large.
fn ns(x: f64) -> String {
    if x.abs() >= 1e4 {
        format!("{:.4e}", x)
    } else {
        format!("{x:.1}")
    }
}

/// Whether another estimate is due after `rejected` estimates, the last one `est`.
pub fn estimate_again(est: &NppEstimate, rejected: usize) -> bool {
    est.disagrees() && rejected < REESTIMATES
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The shared-memory run: 25 ns resolution, an estimate of 12 ms per ping-pong (npp 1)
    /// and trials of 250 ns per ping-pong, for which the formula gives npp 5.
    #[test]
    fn an_estimate_the_trials_contradict_disagrees() {
        let e = NppEstimate::check(50, 25.0, 12e6, 1, &[250, 240, 260, 251, 249]);
        assert_eq!(e.trials_ppt_ns, 250.0);
        assert_eq!(e.npp_from_trials, 5);
        assert!(e.disagrees());
        assert!(estimate_again(&e, 0) && estimate_again(&e, 1));
        assert!(!estimate_again(&e, REESTIMATES));
        let w = NppCheck {
            rejected: vec![e, e],
            kept: e,
        }
        .warning()
        .unwrap();
        assert!(
            w.contains("npp 1 came from an estimate of 1.2000e7 ns"),
            "{w}"
        );
        assert!(w.contains("250.0 ns per iteration, for which the formula gives npp 5"));
        assert!(w.contains("estimated 3 times"), "{w}");
    }

    /// Trials slower than the estimate contradict it as well (npp 50 used, 5 due).
    #[test]
    fn trials_much_slower_than_the_estimate_disagree() {
        let e = NppEstimate::check(50, 25.0, 25.0, 50, &[12_500; 9]);
        assert_eq!((e.npp, e.npp_from_trials), (50, 5));
        assert!(e.disagrees());
    }

    /// Within a factor of 2 either way they agree; the boundary is exact.
    #[test]
    fn close_estimates_agree() {
        // npp 10 from 125 ns; trials of 62.5 ns give 20: twice, still in agreement.
        let e = NppEstimate::check(50, 25.0, 125.0, 10, &[625; 5]);
        assert_eq!(e.npp_from_trials, 20);
        assert!(!e.disagrees());
        assert_eq!(
            NppCheck {
                rejected: vec![],
                kept: e
            }
            .warning(),
            None
        );
        // 21 is more than twice 10.
        let e = NppEstimate {
            npp_from_trials: 21,
            ..e
        };
        assert!(e.disagrees());
        // Large messages: both npp 1 whatever the times, nothing to re-estimate.
        let e = NppEstimate::check(50, 25.0, 12e6, 1, &[40_000; 5]);
        assert!(!e.disagrees() && !estimate_again(&e, 0));
    }

    /// A check without its rejected estimates (none) reads and writes without the key.
    #[test]
    fn check_round_trips_without_rejected_estimates() {
        let c = NppCheck {
            rejected: vec![],
            kept: NppEstimate::check(50, 25.0, 125.0, 10, &[1250; 3]),
        };
        let v = serde_json::to_value(&c).unwrap();
        assert!(v.get("rejected").is_none(), "{v}");
        assert_eq!(serde_json::from_value::<NppCheck>(v).unwrap(), c);
    }
}
