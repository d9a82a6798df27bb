//! Start-up and failure handling shared by the examples.
// Not every example uses every helper.
#![allow(dead_code)]

use commbench_mpi::Mpi;

/// MPI, initialised; or, where that fails (no launcher started this process, say), the reason
/// on standard error and exit status 2.
pub fn init(example: &str) -> Mpi {
    Mpi::init().unwrap_or_else(|e| {
        eprintln!("{example}: {e}");
        std::process::exit(2)
    })
}

/// The value of `r`; or this rank's error on standard error and the whole job aborted.
pub fn or_abort<T>(mpi: &Mpi, example: &str, r: commbench_core::Result<T>) -> T {
    r.unwrap_or_else(|e| {
        eprintln!("{example}: rank {}: {e}", mpi.rank());
        mpi.abort(1)
    })
}
