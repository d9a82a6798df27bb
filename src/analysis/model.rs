//! The fitted models as the result document records them: the `fit` object (seed 002's
//! Hockney model per regime, seed 003's latency and bandwidth, the points fitted). Fitting
//! them is [`crate::analysis::fit`]'s work; reports and plots read them from here.

use commbench_core::stats::{self, Interval};
use serde::{Deserialize, Serialize};

/// One regime's Hockney parameters (seed 002 eq. 2-8), fitted to the sizes in
/// `[from_bytes, to_bytes]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HockneySegment {
    /// Smallest size in the regime, bytes (0 when read from a document that predates it).
    #[serde(default)]
    pub from_bytes: u64,
    /// Largest size in the regime, bytes (0 when read from a document that predates it).
    #[serde(default)]
    pub to_bytes: u64,
    /// Asymptotic bandwidth `r_inf = 1 / slope`, MB/s (10^6 B/s).
    #[serde(deserialize_with = "stats::f64_or_nan")]
    pub r_inf_mb_s: f64,
    /// Half-performance message length `n_half = r_inf t0`, bytes.
    #[serde(deserialize_with = "stats::f64_or_nan")]
    pub n_half_bytes: f64,
    /// Start-up time `t0 = intercept`, us.
    #[serde(deserialize_with = "stats::f64_or_nan")]
    pub t0_us: f64,
    /// Specific performance `pi0 = 1 / t0`, per second (seed 002 eq. 8).
    #[serde(deserialize_with = "stats::f64_or_nan")]
    pub pi0_per_s: f64,
    /// Standard error of `r_inf`, MB/s.
    #[serde(deserialize_with = "stats::f64_or_nan")]
    pub se_r_inf_mb_s: f64,
    /// Standard error of `t0`, us.
    #[serde(deserialize_with = "stats::f64_or_nan")]
    pub se_t0_us: f64,
    /// Standard error of `n_half`, bytes.
    #[serde(deserialize_with = "stats::f64_or_nan")]
    pub se_n_half_bytes: f64,
    /// Weighted coefficient of determination of the line.
    #[serde(deserialize_with = "stats::f64_or_nan")]
    pub r2: f64,
    /// Largest absolute residual, us.
    #[serde(deserialize_with = "stats::f64_or_nan")]
    pub max_abs_err_us: f64,
    /// Number of (size, time) points fitted.
    pub points: usize,
}

impl HockneySegment {
    /// The model's time for `n` bytes, us.
    pub fn time_us(&self, n: f64) -> f64 {
        self.t0_us + n / self.r_inf_mb_s
    }
}

/// The Hockney fit of a sweep: the whole-range fit, and the per-regime fits when there is a
/// breakpoint (seed 002).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Hockney {
    /// The whole-range fit; its keys sit at the top level of the object.
    #[serde(flatten)]
    pub whole: HockneySegment,
    /// First size of the upper regime (sizes below it form the lower regime), or null.
    pub breakpoint_bytes: Option<u64>,
    /// `none`, `given` (by the user) or `auto` (found by [`crate::analysis::fit::auto_breakpoint`]).
    pub breakpoint_source: String,
    /// The per-regime fits (lower, upper) when there is a breakpoint; empty otherwise.
    pub segments: Vec<HockneySegment>,
    /// Why a requested breakpoint was not used, or what the automatic search concluded.
    pub notes: Vec<String>,
}

impl Hockney {
    /// The model's time for `n` bytes, us: the regime's line when there is a breakpoint.
    pub fn time_us(&self, n: u64) -> f64 {
        match (self.breakpoint_bytes, self.segments.as_slice()) {
            (Some(bp), [lo, hi]) => {
                if n < bp {
                    lo.time_us(n as f64)
                } else {
                    hi.time_us(n as f64)
                }
            }
            _ => self.whole.time_us(n as f64),
        }
    }
}

/// Seed 003 eq. 3-4: the transfer time in processor cycles, `a + b n`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Cycles {
    /// Instructions per second assumed (seed 003: 2.8 GHz x 2 = 5.6e9).
    #[serde(deserialize_with = "stats::f64_or_nan")]
    pub instructions_per_second: f64,
    /// `a = instructions/second x T_s` (eq. 3), cycles.
    #[serde(deserialize_with = "stats::f64_or_nan")]
    pub a_cycles: f64,
    /// `b = instructions/second x T_c`, cycles per byte, so that `a + b n` is in cycles.
    #[serde(deserialize_with = "stats::f64_or_nan")]
    pub b_cycles_per_byte: f64,
    /// `T_c` in seconds per byte: what seed 003's Table 1 prints as "Beta".
    #[serde(deserialize_with = "stats::f64_or_nan")]
    pub beta_s_per_byte: f64,
}

/// Seed 003's latency and bandwidth (eq. 1-2).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Linear {
    /// Latency `T_s`: the intercept, us (of the lower regime when there is a breakpoint).
    #[serde(deserialize_with = "stats::f64_or_nan")]
    pub latency_us: f64,
    /// Bandwidth `1 / T_c`: the inverse slope, MB/s (of the upper regime when there is a
    /// breakpoint).
    #[serde(deserialize_with = "stats::f64_or_nan")]
    pub bandwidth_mb_s: f64,
    /// Standard error of the latency, us.
    #[serde(deserialize_with = "stats::f64_or_nan")]
    pub se_latency_us: f64,
    /// Standard error of the bandwidth, MB/s.
    #[serde(deserialize_with = "stats::f64_or_nan")]
    pub se_bandwidth_mb_s: f64,
    /// 95 % confidence interval of the latency (Student t with `points - 2` degrees of
    /// freedom), us.
    pub ci95_latency_us: Interval,
    /// 95 % confidence interval of the bandwidth, MB/s (the inverted interval of the slope;
    /// the upper end is null, i.e. unbounded, when the slope's interval reaches 0).
    pub ci95_bandwidth_mb_s: Interval,
    /// Sizes the latency was fitted on, `[from, to]` bytes.
    pub latency_sizes: [u64; 2],
    /// Sizes the bandwidth was fitted on, `[from, to]` bytes.
    pub bandwidth_sizes: [u64; 2],
    /// Cycles `a + b n` (eq. 3-4) when the instructions per second were given.
    pub cycles: Option<Cycles>,
}

/// One point the models were fitted to, with the model's prediction.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FitPoint {
    /// Message size, bytes.
    pub size: u64,
    /// Time fitted (median one-way time), us.
    #[serde(deserialize_with = "stats::f64_or_nan")]
    pub time_us: f64,
    /// The point's 95 % confidence interval (of the median), us, when known.
    pub ci95_us: Option<Interval>,
    /// The Hockney model's time for this size (the regime's line), us.
    #[serde(deserialize_with = "stats::f64_or_nan")]
    pub model_us: f64,
}

/// The fits of one pattern's sweep: the `fit` object of the result document.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FitSection {
    /// Pattern fitted.
    pub pattern: String,
    /// What was fitted: `median one-way time`.
    pub basis: String,
    /// How residuals were weighted: `relative (1/t^2)` or `ordinary` (when a time is 0).
    pub weighting: String,
    /// Seed 002's model.
    pub hockney: Hockney,
    /// Seed 003's model.
    pub linear: Linear,
    /// The points, in increasing size.
    pub points: Vec<FitPoint>,
}
