//! The formats a result document is rendered in, each a [`Renderer`] with its own options:
//!
//! * [`Text`] ([`text`]): the report a run prints, at a [`Detail`](text::Detail);
//! * [`Markdown`] ([`markdown`]) and [`Csv`] ([`csv`]): the document as tables;
//! * [`Plot`] ([`svg`]): an SVG plot of a [`PlotKind`], at one size where the kind draws one.
//!
//! What a format says of each kind of document lives in [`crate::render::kind`]; the
//! comparison of two documents is text only and lives there too.

pub mod csv;
pub mod markdown;
pub mod svg;
pub mod text;

pub use csv::Csv;
pub use markdown::Markdown;
pub use svg::{MatrixColour, Plot, PlotKind};
pub use text::Text;

use crate::analysis::document::ResultDoc;
use crate::analysis::model::FitSection;
use commbench_core::transport::error::Result;

/// A format a result document is rendered in: one call, whatever the format, its options
/// carried by the value that implements it.
pub trait Renderer {
    /// `doc` rendered with `fits` as its fitted models: the stored fit
    /// (`doc.fit.as_slice()`), or those `commbench report` and `plot` fit afresh for the
    /// patterns a run did not (`analysis::fit::fits_of`). A format without a place for them
    /// (CSV, and the plots that draw no model) leaves them out. An error says why the
    /// document cannot be drawn as asked (a plot of a kind or size it does not hold).
    fn render(&self, doc: &ResultDoc, fits: &[FitSection]) -> Result<String>;
}
