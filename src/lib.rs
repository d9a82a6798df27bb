//! # commbench
//!
//! Point-to-point communication latency and rates with one statistically sound method on every
//! transport. This library is what rank 0 does with a run, away from the ranks: the typed
//! result document and its [`analysis`] (statistics of raw trials, fits, compare), the
//! [`render`]ers (text, Markdown, CSV, SVG) and the [`spec`] parsers, all from the
//! `commbench-analysis` crate; and [`core`], what every rank runs. Backends never compile it.
//! The `commbench` binary beside it is the one place that names the backends (compiled in by
//! Cargo features: `tcp`, `shm` and `sim` by default, `mpi`, `ofi` and `ucx` on request).
//!
//! ```
//! use commbench::core::method::npp_formula;
//! // Seed 000 §3.3: a 1 us timer and a 2 us ping-pong give npp = 25 with res_npp = 50.
//! assert_eq!(npp_formula(50, 1000.0, 2000.0), 25);
//! ```

pub use commbench_analysis::{analysis, render, spec};
pub use commbench_core as core;
