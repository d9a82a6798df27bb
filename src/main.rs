//! The `commbench` command line: [`cli`] parses, validates and runs; [`backend`] is the one
//! place that names the backends; [`analyze`] reads result documents back. Exit codes: 0
//! success, 1 a failed run, 2 bad usage.

mod analyze;
mod backend;
mod cli;

use std::process::ExitCode;

fn main() -> ExitCode {
    cli::main()
}
