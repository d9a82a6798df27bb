//! # commbench-analysis
//!
//! What rank 0 does with a run, away from the ranks: the typed result document and its
//! [`analysis`] (statistics of raw trials, fits, compare, verdicts), the [`render`]ers (text,
//! Markdown, CSV, SVG) and the [`spec`] parsers; it re-exports [`core`], what every rank runs.
//! Backends never compile it, and it names none: the `commbench` package (the command line and
//! the library that re-exports this one) does, so building the command line with other
//! backends does not build this crate again.

pub mod analysis;
pub mod render;
pub mod spec;

pub use commbench_core as core;
