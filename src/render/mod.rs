//! Rendering result documents for people and programs. Reads the typed document of
//! [`crate::analysis::document`]; measures nothing.
//!
//! * [`text`]: seed 000's full and summary outputs, and the timer's characterisation;
//! * [`fit`] and [`compare`]: the fitted models and a comparison of two documents as text;
//! * [`markdown`] and [`csv`]: the document as a table;
//! * [`matrix`]: an all-pairs matrix (verdicts, classes, node effects, worst cells) and the
//!   comparison of two matrices as text;
//! * [`svg`]: latency, bandwidth, histogram and signature plots;
//! * [`format`](mod@format): the one number formatter they share.

pub mod compare;
pub mod csv;
pub mod fit;
pub mod format;
pub mod markdown;
pub mod matrix;
pub mod queue;
pub mod sixtimes;
pub mod svg;
pub mod text;
