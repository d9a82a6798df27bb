//! Rendering result documents for people and programs. Reads the typed document of
//! [`crate::analysis::document`]; measures nothing.
//!
//! Format and kind of document are kept apart:
//!
//! * [`format`](mod@format): the formats, each a [`Renderer`] carrying its own options:
//!   [`Text`] (at a [`Detail`]), [`Markdown`], [`Csv`] and [`Plot`] (SVG, of a [`PlotKind`]);
//! * [`kind`]: what the text says of each kind of document (a sweep's points, the fitted
//!   models, seed 001's six times, seed 004's queues, an all-pairs matrix, two documents
//!   compared, the timer);
//! * [`words`]: what every text output says the same way (how much, what a pattern's times
//!   are, sizes in words), and [`number`]: the one number formatter.
//!
//! Each level imports only those below it: `format` -> `kind` -> `words` -> `number`.

pub mod format;
pub mod kind;
pub mod number;
pub mod words;

pub use format::{Csv, Markdown, MatrixColour, Plot, PlotKind, Renderer, Text};
pub use words::Detail;

/// The earlier paths of the modules the command line and the tests name: `render::text`,
/// `render::svg`, `render::compare`, `render::fit`, `render::matrix`.
pub use format::{svg, text};
pub use kind::{compare, fit, matrix};
