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
    /// The line passes exactly through two points: there are no residual degrees of
    /// freedom, so the standard errors are undefined (`null`) and `r2` is 1 by
    /// construction, not a measure of fit.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub exact: bool,
    /// The parameters whose fitted value is not physical, each with why
    /// ([`HockneySegment::identifiability`]); their numbers above are kept as fitted.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub not_identifiable: Vec<NotIdentifiable>,
}

impl HockneySegment {
    /// The model's time for `n` bytes, us.
    pub fn time_us(&self, n: f64) -> f64 {
        self.t0_us + n / self.r_inf_mb_s
    }

    /// Whether the line goes exactly through its two points (also for documents written
    /// before `exact` was recorded).
    pub fn is_exact(&self) -> bool {
        self.exact || self.points == 2
    }

    /// The parameters whose fitted value is not physical, with why: a slope that is not
    /// positive leaves no asymptotic bandwidth (`r_inf_mb_s`, and `n_half_bytes` with it);
    /// a negative intercept leaves no start-up time (`t0_us`, and `n_half_bytes` and
    /// `pi0_per_s`, which derive from it); a zero one leaves `pi0 = 1 / t0` unbounded. Computed from the numbers, so
    /// documents written before `not_identifiable` was recorded get it too.
    pub fn identifiability(&self) -> Vec<NotIdentifiable> {
        let range = format!("{}..{} bytes", self.from_bytes, self.to_bytes);
        let mut out = Vec::new();
        let slope_ok = self.r_inf_mb_s.is_finite() && self.r_inf_mb_s > 0.0;
        if !slope_ok {
            out.push(NotIdentifiable::new(
                "r_inf_mb_s",
                format!(
                    "the time does not grow with size over {range} (fitted 1/slope = {} MB/s), \
                     so there is no asymptotic bandwidth",
                    short(self.r_inf_mb_s)
                ),
            ));
        }
        if !(self.t0_us.is_finite() && self.t0_us >= 0.0) {
            let t = stats::t_975(self.points.saturating_sub(2) as u64).unwrap_or(f64::NAN);
            let why = intercept_reason(
                "t0",
                self.t0_us,
                self.t0_us + t * self.se_t0_us,
                self.is_exact(),
                &range,
            );
            out.push(NotIdentifiable::new("t0_us", why));
            out.push(NotIdentifiable::new(
                "n_half_bytes",
                "n_half = r_inf t0 needs a start-up time t0 of at least 0".into(),
            ));
        } else if !slope_ok {
            out.push(NotIdentifiable::new(
                "n_half_bytes",
                "n_half = r_inf t0 needs a positive asymptotic bandwidth r_inf".into(),
            ));
        }
        if !(self.t0_us.is_finite() && self.t0_us > 0.0) {
            out.push(NotIdentifiable::new(
                "pi0_per_s",
                format!(
                    "pi0 = 1 / t0 needs a positive start-up time (t0 = {} us)",
                    short(self.t0_us)
                ),
            ));
        }
        out
    }

    /// Whether `parameter` (a key: `t0_us`, `n_half_bytes`, `pi0_per_s`, `r_inf_mb_s`) has
    /// a physical value.
    pub fn is_identifiable(&self, parameter: &str) -> bool {
        NotIdentifiable::leaves_out(&self.identifiability(), parameter)
    }
}

/// A fitted parameter whose value is not physical, and why.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NotIdentifiable {
    /// The parameter's key in its object (`t0_us`, `n_half_bytes`, `pi0_per_s`,
    /// `r_inf_mb_s`, `latency_us`, `bandwidth_mb_s`, `cycles.a_cycles`).
    pub parameter: String,
    /// Why its fitted value is not a physical one.
    pub reason: String,
}

impl NotIdentifiable {
    /// Whether `list` says nothing against `parameter`.
    fn leaves_out(list: &[NotIdentifiable], parameter: &str) -> bool {
        !list.iter().any(|u| u.parameter == parameter)
    }

    fn new(parameter: &str, reason: String) -> Self {
        NotIdentifiable {
            parameter: parameter.into(),
            reason,
        }
    }
}

/// Four significant digits for a reason's text.
fn short(x: f64) -> String {
    if !x.is_finite() {
        return if x.is_nan() { "undefined" } else { "unbounded" }.into();
    }
    let a = x.abs();
    if a == 0.0 {
        "0".into()
    } else if (1e-3..1e6).contains(&a) {
        let d = (3 - a.log10().floor() as i32).max(0) as usize;
        format!("{x:.d$}")
    } else {
        format!("{x:.3e}")
    }
}

/// Why a negative intercept (`name`, us) is not a start-up time: two points
/// cannot tell, an intercept whose 95 % CI (upper end `ci_hi`) reaches 0 is below what the
/// sweep resolves, and one significantly below 0 means the times are not one line.
fn intercept_reason(name: &str, value: f64, ci_hi: f64, exact: bool, range: &str) -> String {
    let fitted = format!("the fitted {name} = {} us is negative", short(value));
    if exact {
        return format!(
            "{fitted}: the line through the two points over {range} reaches zero time at a \
             positive size, and two sizes cannot separate start-up time from transfer time"
        );
    }
    if ci_hi >= 0.0 {
        format!(
            "{fitted} but its 95% CI reaches up to {} us: the start-up time is too small \
             to resolve against the transfer times over {range} (the smallest sizes measure \
             it best)",
            short(ci_hi)
        )
    } else {
        format!(
            "{fitted}, significantly below 0: the times over {range} are not one straight \
             line (a change of protocol or of cache level; try --breakpoint auto)"
        )
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
    /// The latency's interval reached below 0 and its lower end was clipped at 0, the
    /// physical bound of a time (intersecting a 95 % interval with the values a parameter
    /// can take keeps its coverage). Not clipped when the whole interval lies below 0: the
    /// latency is then not identifiable.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub ci95_latency_clipped: bool,
    /// The parameters whose fitted value is not physical, each with why
    /// ([`Linear::identifiability`]); their numbers above are kept as fitted.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub not_identifiable: Vec<NotIdentifiable>,
}

impl Linear {
    /// The parameters whose fitted value is not physical, with why: a negative latency
    /// (intercept), a bandwidth (1/slope) that is not positive, and the cycles
    /// `a` derived from such a latency. Computed from the numbers (documents written before
    /// `not_identifiable` was recorded get it too).
    pub fn identifiability(&self) -> Vec<NotIdentifiable> {
        let mut out = Vec::new();
        if !(self.latency_us.is_finite() && self.latency_us >= 0.0) {
            let [a, b] = self.latency_sizes;
            out.push(NotIdentifiable::new(
                "latency_us",
                intercept_reason(
                    "latency",
                    self.latency_us,
                    self.ci95_latency_us.hi,
                    !self.se_latency_us.is_finite(),
                    &format!("{a}..{b} bytes"),
                ),
            ));
            if self.cycles.is_some() {
                out.push(NotIdentifiable::new(
                    "cycles.a_cycles",
                    "a = instructions/s x latency needs a latency of at least 0".into(),
                ));
            }
        }
        if !(self.bandwidth_mb_s.is_finite() && self.bandwidth_mb_s > 0.0) {
            let [a, b] = self.bandwidth_sizes;
            out.push(NotIdentifiable::new(
                "bandwidth_mb_s",
                format!(
                    "the time does not grow with size over {a}..{b} bytes (fitted 1/slope = \
                     {} MB/s), so there is no bandwidth",
                    short(self.bandwidth_mb_s)
                ),
            ));
        }
        out
    }

    /// The latency's 95 % interval with its lower end at least 0 when it reaches above 0
    /// (documents written before the interval was clipped are clipped here).
    pub fn latency_ci(&self) -> Interval {
        let mut ci = self.ci95_latency_us;
        if ci.lo < 0.0 && ci.hi > 0.0 {
            ci.lo = 0.0;
        }
        ci
    }

    /// Whether [`Linear::latency_ci`] was clipped at 0.
    pub fn latency_ci_clipped(&self) -> bool {
        self.ci95_latency_clipped
            || (self.ci95_latency_us.lo < 0.0 && self.ci95_latency_us.hi > 0.0)
    }

    /// Whether `parameter` (`latency_us`, `bandwidth_mb_s`, `cycles.a_cycles`) has a
    /// physical value.
    pub fn is_identifiable(&self, parameter: &str) -> bool {
        NotIdentifiable::leaves_out(&self.identifiability(), parameter)
    }
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

impl FitSection {
    /// One-line warnings about what the fitted numbers do not mean: parameters that are not
    /// identifiable (with why), fits exactly through two points (no uncertainty, `r2`
    /// meaningless) and a latency interval clipped at 0. Computed from the numbers, so
    /// documents written before these were recorded get them too.
    pub fn warnings(&self) -> Vec<String> {
        let h = &self.hockney;
        let mut out = Vec::new();
        let regimes = std::iter::once(("whole range", &h.whole)).chain(
            ["lower regime", "upper regime"]
                .into_iter()
                .zip(&h.segments),
        );
        for (name, seg) in regimes {
            let range = format!("{}..{} bytes", seg.from_bytes, seg.to_bytes);
            let u = seg.identifiability();
            if let Some(first) = u.first() {
                let names: Vec<&str> = u.iter().map(|x| short_name(&x.parameter)).collect();
                out.push(format!(
                    "Hockney {} ({name}, {range}) not identifiable: {}",
                    join(&names),
                    first.reason
                ));
            }
            if seg.is_exact() {
                out.push(format!(
                    "Hockney fit ({name}, {range}) is exact through two points: no standard \
                     errors, and r2 = 1 by construction"
                ));
            }
        }
        let l = &self.linear;
        for u in l.identifiability() {
            out.push(format!(
                "{} not identifiable: {}",
                short_name(&u.parameter),
                u.reason
            ));
        }
        if !l.se_latency_us.is_finite() {
            let [a, b] = l.latency_sizes;
            out.push(format!(
                "latency over {a}..{b} bytes is exact through two points: no confidence interval"
            ));
        }
        if !l.se_bandwidth_mb_s.is_finite() && l.bandwidth_sizes != l.latency_sizes {
            let [a, b] = l.bandwidth_sizes;
            out.push(format!(
                "bandwidth over {a}..{b} bytes is exact through two points: no confidence \
                 interval"
            ));
        }
        if l.latency_ci_clipped() {
            out.push(
                "the latency's 95% CI reached below 0 and is clipped at 0, the bound of a time"
                    .into(),
            );
        }
        out
    }
}

/// The name of a parameter key in text (`t0_us` -> `t0`).
fn short_name(key: &str) -> &str {
    match key {
        "t0_us" => "t0",
        "n_half_bytes" => "n_half",
        "pi0_per_s" => "pi0",
        "r_inf_mb_s" => "r_inf",
        "latency_us" => "latency",
        "bandwidth_mb_s" => "bandwidth",
        "cycles.a_cycles" => "cycles a",
        k => k,
    }
}

/// `a`, `a and b`, `a, b and c`.
fn join(names: &[&str]) -> String {
    match names {
        [] => String::new(),
        [one] => (*one).to_string(),
        [rest @ .., last] => format!("{} and {last}", rest.join(", ")),
    }
}
