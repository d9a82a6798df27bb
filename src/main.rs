//! The `commbench` command line: clap parsing -> validated configuration -> launch -> run ->
//! analysis on rank 0 -> reports. Exit codes: 0 success, 1 a failed run, 2 bad usage.

mod analyze;
mod cli;
mod launch;
mod output;

use std::process::ExitCode;

fn main() -> ExitCode {
    cli::main()
}
