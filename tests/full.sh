#!/usr/bin/env bash
# The test suite with every randomized test at its full count (docs/testing.md): the proptest
# blocks of tests/fuzz.rs and backends/sim/tests/fuzz.rs at their full case counts, all the
# fault-injected cubes of tests/allpairs_faults.rs, and so on. `cargo test` (and CI) runs them
# at counts sized for CI, which draw every kind of input but fewer of each; what one case
# checks is the same. Arguments go to `cargo test`:
#
#   tests/full.sh                          the default backends, as `cargo test`
#   tests/full.sh --test integration allpairs_faults::
#                                          one file of the command-line tests (tests/main.rs)
#   tests/full.sh -p commbench-sim         the simulator's own tests
#
# PROPTEST_CASES, when set, still overrides the proptest counts (both ways), and
# PROPTEST_RNG_SEED draws other inputs than the fixed ones.
set -euo pipefail
cd "$(dirname "$0")/.."
export COMMBENCH_TEST_SCALE=full
exec cargo test "$@"
