//! Rendering result documents for people: [`text`] (seed 000's full and summary outputs),
//! [`svg`] (latency, bandwidth, histogram and signature plots). Reads the typed document of
//! [`crate::analysis::document`]; measures nothing.

pub mod svg;
pub mod text;
