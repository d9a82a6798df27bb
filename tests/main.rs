//! The command line's integration tests, one module a file beside this one, in one test
//! binary: built and linked once rather than once a file (a quarter of the gate's test build
//! went to building each file's copy of the shared helpers and of the generic code it
//! instantiates), and run with their tests interleaved on the test threads. `cargo test --test
//! integration allpairs_cli::` runs one file. The opt-in backends' tests are binaries of their
//! own (`mpi`, `ofi_ucx`), so that building them with their features leaves this one alone.

mod common;

mod allpairs_cli;
mod allpairs_faults;
mod analyze;
mod architecture;
mod buffers_cli;
mod cli;
mod drift;
mod fit_sim;
mod fuzz;
mod interrupt;
mod launches;
mod limits;
mod lost;
mod matrix_render;
mod pairs_cli;
mod plot_text;
mod queue;
mod queue_cli;
mod report;
mod report_card;
mod seed001_cli;
mod sixtimes;
mod stream;
mod until_ci;
mod validate_faults;
