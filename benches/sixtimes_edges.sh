#!/usr/bin/env bash
# Seed 001's solve on machines that break its assumptions, at a count the CI sample does not
# run: SEEDS sets of 24 simulated hypercubes each (R, S, A and U drawn below E or up to 20
# times above it; clock ticks of 1 ns to 20 us), `overhead` measured on every one. Every time
# at every size must be within 3% of the configured one or flagged as not separable there with
# the assumption that failed; none below zero (tests/sixtimes.rs, machines_that_break_the_solve).
# Prints the times recovered and flagged per set; fails at the first time that is neither.
#
# Usage: benches/sixtimes_edges.sh             (40 sets, 960 machines; about 2 minutes on 2 CPUs)
#        SEEDS=200 benches/sixtimes_edges.sh
#        COMMBENCH_SIXTIMES_SEED=N cargo test --release --test integration sixtimes::machines_that_break
#            (set N alone, as this script names it)
set -euo pipefail
cd "$(dirname "$0")/.."
cargo test --release --test integration --no-run
for seed in $(seq 1 "${SEEDS:-40}"); do
    printf 'set %s: ' "$seed"
    COMMBENCH_SIXTIMES_SEED=$seed COMMBENCH_TEST_SCALE=full \
        cargo test -q --release --test integration sixtimes::machines_that_break -- --nocapture 2>&1 |
        grep -E 'recovered|panicked|configured|value' | head -3
done
