//! How many cases the randomized tests run (proptest blocks, machines and faults drawn at
//! random): by default counts sized for CI, which still draw every kind of input; with
//! `COMMBENCH_TEST_SCALE=full` the full counts (`tests/full.sh` runs every test so; see
//! docs/testing.md). What one case checks is the same either way. The simulator's own tests
//! and the command-line tests (`tests/common` at the root) share this file.
#![allow(dead_code)]

use proptest::test_runner::{Config as ProptestConfig, RngAlgorithm, RngSeed};

/// The variable that picks the counts: unset, empty or `ci` for CI's, `full` for the full ones.
pub const VAR: &str = commbench_core::testkit::SCALE_VAR;

/// Whether [`VAR`] asks for the full counts (a value it does not take fails the test).
pub fn full() -> bool {
    commbench_core::testkit::full_scale()
}

/// `ci` cases by default, `full` with `COMMBENCH_TEST_SCALE=full`.
pub fn cases(ci: usize, full: usize) -> usize {
    assert!(0 < ci && ci <= full, "{ci} cases for CI, {full} in full");
    if self::full() {
        full
    } else {
        ci
    }
}

/// A proptest block's configuration: [`cases`]`(ci, full)` cases (`PROPTEST_CASES`, when set,
/// overrides both), no failure files written into the tree, and the same inputs on every run
/// unless `PROPTEST_RNG_SEED` asks for others.
pub fn proptest_config(ci: u32, full: u32) -> ProptestConfig {
    let rng_seed = match std::env::var("PROPTEST_RNG_SEED") {
        Ok(_) => ProptestConfig::default().rng_seed,
        Err(_) => RngSeed::Fixed(0x5eed_f022),
    };
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| cases(ci as usize, full as usize) as u32);
    ProptestConfig {
        cases,
        failure_persistence: None,
        // Cheaper than the default ChaCha in a debug build; the inputs need no cryptography.
        rng_algorithm: RngAlgorithm::XorShift,
        rng_seed,
        ..ProptestConfig::default()
    }
}
