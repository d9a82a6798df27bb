//! The `commbench` command line ([`cli`]): it parses, validates and runs; `cli::backend` is the
//! one place that names the backends; `cli::analyze` reads result documents back. Exit codes:
//! 0 success, 1 a failed run, 2 bad usage.

mod cli;

use std::process::ExitCode;

fn main() -> ExitCode {
    cli::main()
}
