//! The simulator's own tests, one module a file beside this one, in one test binary: built and
//! linked once rather than once a file. `cargo test -p commbench-sim --test sim tree::` runs
//! one file.

mod common;

mod allpairs;
mod conformance;
mod faults;
mod fuzz;
mod golden;
mod matching;
mod pairs;
mod spans;
mod stop;
mod tree;
