//! # commbench-core
//!
//! What every rank runs, in three layers a newcomer reads from `ls`:
//!
//! * [`transport`]: the data plane every backend implements ([`Endpoint`]: non-blocking
//!   sends and receives with tags and wildcards, completions, a control plane built on them),
//!   the ids messages are addressed by, the clock an endpoint reads, the one [`Error`] type,
//!   and the tag-matching engine raw transports share;
//! * [`launch`]: where a rank comes from (commbench's local launcher, mpirun, srun), the tcp
//!   rendezvous with its token, and CPU pinning;
//! * [`method`]: the method of seed 000: the clock's characterisation (§3.1), `npp`
//!   (§3.3), the one trial engine (§3.2) and the kernels it runs;
//!
//! plus descriptive [`stats`] and, behind the `testkit` feature, the conformance suite every
//! backend runs and the transport that does nothing (`transport::noop`), on which the engine
//! bench times commbench's own cost. Analysis and rendering live in the `commbench` package,
//! which backends never compile.
//!
//! Backends depend on this crate; this crate never depends on a backend.

pub mod launch;
pub mod method;
pub mod stats;
#[cfg(feature = "testkit")]
pub mod testkit;
pub mod transport;

pub use transport::error::{Error, Result, ResultExt};
pub use transport::{
    Completion, Endpoint, OpKind, Program, Rank, ReqId, Role, Span, Src, Tag, TagSel,
};
