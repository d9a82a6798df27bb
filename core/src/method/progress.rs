//! Where a run is, for progress displays: the [`Stage`] of a run and the [`Progress`] reports
//! rank 0 gives outside timed regions ([`crate::method::engine::Measurement`], the all-pairs
//! program of [`crate::method::allpairs`]).

/// Where a run is, for progress displays.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// Characterising the timer.
    Timer,
    /// Warm-up ping-pongs.
    Warmup,
    /// Estimating npp.
    Npp,
    /// Timed trials.
    Trials,
    /// Rounds of an all-pairs run ([`crate::method::allpairs`]).
    Rounds,
    /// Suspects of an all-pairs run measured again alone.
    Retests,
}

/// A progress report, given on rank 0 only, outside timed regions.
#[derive(Debug, Clone, Copy)]
pub struct Progress {
    /// Index of the size being measured.
    pub size_index: usize,
    /// Number of sizes.
    pub sizes: usize,
    /// The size, bytes.
    pub size: u64,
    /// What is being done.
    pub stage: Stage,
    /// Units done in this stage.
    pub done: u64,
    /// Units in this stage.
    pub total: u64,
    /// The share of the whole run done, 0 to 1, each stage weighed by its least cost
    /// ([`crate::method::limits::RunCost`]): what an estimate of the time left extrapolates from.
    pub run_done: f64,
    /// The least the whole run takes ([`crate::method::limits::RunCost::floor`]).
    pub run_floor: std::time::Duration,
}

/// Callback receiving progress reports.
pub type ProgressFn<'a> = dyn Fn(Progress) + Sync + 'a;
