//! # commbench-core
//!
//! The transport-independent half of commbench: the [`transport`] traits every backend
//! implements, the tag-[`matching`] engine raw transports share, the measurement method of
//! seed 000 ([`timer`], [`method`]) and descriptive [`stats`]. Analysis and rendering live in
//! the `commbench` package, which backends never compile.
//!
//! Backends depend on this crate; this crate never depends on a backend.

pub mod affinity;
pub mod bootstrap;
pub mod clock;
pub mod conformance;
pub mod error;
pub mod launch;
pub mod matching;
pub mod method;
pub mod pattern;
pub mod stats;
pub mod timer;
pub mod transport;
pub mod transpose;

pub use error::{Error, Result, ResultExt};
pub use transport::{Completion, Endpoint, OpKind, Program, Rank, ReqId, Src, Tag, TagSel};
