//! What the text says of each kind of document, section by section; the formats in
//! [`crate::render::format`] put these together:
//!
//! * [`sweep`]: the points of any document measured size by size (the default table,
//!   Appendix C's summary and full output, the npp study, several backends side by side);
//! * [`fit`]: the fitted models, in full and in brief;
//! * [`sixtimes`]: seed 001's echo, six times and interference;
//! * [`queue`]: seed 004's grids of the queue benchmarks and the time per queue entry;
//! * [`matrix`]: an all-pairs matrix (verdicts, classes, node effects, worst cells), and two
//!   matrices compared;
//! * [`pairs`]: pairs that streamed at once: the three aggregates, message rates, stragglers;
//! * [`compare`]: two sides of one or more documents each, size by size;
//! * [`launches`]: a set of launches of one measurement, point by point;
//! * [`timer`]: the timer's characterisation (`commbench timer`, Appendix A);
//! * [`card`]: the report card of rules 5-11 of Hoefler & Belli (SC'15).

pub mod card;
pub mod compare;
pub mod fit;
pub mod launches;
pub mod matrix;
pub mod pairs;
pub mod queue;
pub mod sixtimes;
pub mod sweep;
pub mod timer;
