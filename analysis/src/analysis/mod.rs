//! Analysis on rank 0 (design §2): what the ranks measured becomes the typed result document.
//!
//! * [`point`]: one size's raw trial times -> statistics, rates, filtered analysis (seed 000
//!   §3.4), and the document's record of that size ([`point::Point`]);
//! * [`document`]: the versioned result document (docs/result-format.md), written once per
//!   run and read back by `report`, `plot` and `compare`; it holds the points and the sections
//!   of the analyses below (`Point` is also at its earlier path, `document::Point`);
//! * [`fit`]: fitting seed 002's Hockney model with its breakpoint and seed 003's
//!   latency/bandwidth line to a sweep; [`model`]: the fitted models as the document records
//!   them;
//! * [`compare`]: two documents size by size (ratio of medians, bootstrap CI, rank test);
//! * [`inference`]: the least-squares line, the bootstrap and the rank test these build on;
//! * [`sixtimes`] and [`queue`]: seed 001's six times and seed 004's per-entry queue costs.
//! * [`normality`]: the Shapiro–Wilk test of a point's times (Hoefler & Belli's rule 6);
//!   [`report_card`]: what a run did for rules 5-11 of Hoefler & Belli (SC'15).
//! * [`steady`]: drift over one point's trials: change points, their levels and the class
//!   (steady, warm-up, slow-down, no steady state), and the warm-up `--drop-warmup auto` drops.
//! * [`allpairs`]: an all-pairs matrix -> median polish, attribution to a node, link or
//!   hypercube dimension, serial confirmation and verdicts.
//! * [`pairs`]: pairs streaming at once -> the three aggregates, message rates, stragglers;
//!   [`maxrate`]: Gropp, Olson and Samfass's max-rate model fitted to a sweep of pairs.
//! * [`assemble`]: a run's outcome on rank 0 -> its document (with the all-pairs matrix
//!   section), the one step the command line, the tests and in-process runs share.
//! * [`stream`]: the JSON Lines a run writes as it goes (`--stream`), and the document a
//!   stream stands for, read back.
//!
//! Nothing here sees an `Endpoint`: backends never compile this module.

pub mod allpairs;
pub mod assemble;
pub mod compare;
pub mod document;
pub mod fit;
pub mod inference;
pub mod launches;
pub mod matrix;
pub mod matrix_compare;
pub mod maxrate;
pub mod model;
pub mod normality;
pub mod pairs;
pub mod point;
pub mod queue;
pub mod report_card;
pub mod sixtimes;
pub mod steady;
pub mod stream;
#[cfg(test)]
pub(crate) mod testkit;
