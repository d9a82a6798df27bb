//! # commbench
//!
//! Point-to-point communication latency and rates with one statistically sound method on every
//! transport. This facade re-exports the core and the backends compiled in by Cargo features:
//! `tcp`, `shm` and `sim` by default, `mpi` on request.
//!
//! ```
//! use commbench::core::method::npp_formula;
//! // Seed 000 §3.3: a 1 us timer and a 2 us ping-pong give npp = 25 with res_npp = 50.
//! assert_eq!(npp_formula(50, 1000.0, 2000.0), 25);
//! ```

pub mod analysis;
pub mod render;
pub mod spec;

pub use commbench_core as core;
#[cfg(feature = "mpi")]
pub use commbench_mpi as mpi;
#[cfg(feature = "shm")]
pub use commbench_shm as shm;
#[cfg(feature = "sim")]
pub use commbench_sim as sim;
#[cfg(feature = "tcp")]
pub use commbench_tcp as tcp;

/// A backend name the command line accepts, whether or not it is compiled in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BackendName {
    /// Name on the command line.
    pub name: &'static str,
    /// Cargo feature that compiles it in.
    pub feature: &'static str,
    /// Whether this build has it.
    pub compiled: bool,
    /// Whether this version of commbench has an implementation at all.
    pub implemented: bool,
    /// One line on what it is.
    pub about: &'static str,
}

/// Every backend commbench knows by name.
pub const BACKENDS: &[BackendName] = &[
    BackendName {
        name: "shm",
        feature: "shm",
        compiled: cfg!(feature = "shm"),
        implemented: true,
        about: "shared memory between processes on one host (default)",
    },
    BackendName {
        name: "tcp",
        feature: "tcp",
        compiled: cfg!(feature = "tcp"),
        implemented: true,
        about: "raw TCP sockets, on loopback or across hosts",
    },
    BackendName {
        name: "sim",
        feature: "sim",
        compiled: cfg!(feature = "sim"),
        implemented: true,
        about: "simulated NCUBE-style hypercube on a virtual clock",
    },
    BackendName {
        name: "mpi",
        feature: "mpi",
        compiled: cfg!(feature = "mpi"),
        implemented: true,
        about: "MPI through rsmpi, under mpirun/srun",
    },
    BackendName {
        name: "ofi",
        feature: "ofi",
        compiled: false,
        implemented: false,
        about: "libfabric",
    },
    BackendName {
        name: "ucx",
        feature: "ucx",
        compiled: false,
        implemented: false,
        about: "UCX",
    },
];

/// Look a backend up by name.
pub fn backend(name: &str) -> Option<&'static BackendName> {
    BACKENDS.iter().find(|b| b.name == name)
}

/// The backend `commbench` uses without `--backend`: shm when compiled in, else tcp, else sim.
pub fn default_backend() -> Option<&'static BackendName> {
    BACKENDS.iter().take(3).find(|b| b.compiled)
}
