#!/usr/bin/env bash
# Drift over a point's trials (docs/methodology.md §4a) at counts the CI sample does not run.
# First the detector on synthetic sequences at their full count (analysis/src/analysis/steady/tests.rs):
# sequences without a change in seven shapes of noise, with runs of equal trials and with
# autocorrelated noise, and how many were flagged (none is expected; the tests fail above 1 in
# 300, 2 % and 1 %); 3000 steps of 1.2 % to a factor 3 at random trials, and how far from the
# true trial each was found (the tests fail beyond one block, 50 trials). Then SEEDS sets of
# 200 simulated machines drawn at random (tests/drift.rs: times around a preset's, cube, tick,
# jitter, pair and size at random; a slow node, link or dimension from or until a virtual time
# drawn among the trials): every run without a change must be steady, every change large
# enough must be found within one block of the first trial that started at or after the
# fault's bound, and classified. Prints one summary line per part and set; fails at the first
# case that fails.
#
# Usage: benches/drift_sim.sh              (10 sets, 2000 machines, 6000 runs; a few minutes on
#                                          2 CPUs after the build)
#        SEEDS=50 benches/drift_sim.sh
#        PROFILE=dev benches/drift_sim.sh  (a debug build: the same numbers, computed slower)
#        COMMBENCH_DRIFT_SEED=N COMMBENCH_TEST_SCALE=full cargo test --release --test integration drift::
#            (set N alone, as this script names it; 0 is the set the tests run)
set -euo pipefail
cd "$(dirname "$0")/.."
profile=(--release)
if [ "${PROFILE:-release}" = dev ]; then
    profile=()
fi
export COMMBENCH_TEST_SCALE=full
cargo test "${profile[@]}" -p commbench-analysis --lib --no-run
cargo test "${profile[@]}" --test integration --no-run
cargo test -q "${profile[@]}" -p commbench-analysis --lib analysis::steady -- --nocapture 2>&1 |
    grep -oE '(steady|bursts|autoregressive|steps): .*|panicked.*|FAILED.*'
for seed in $(seq 1 "${SEEDS:-10}"); do
    printf 'set %s: ' "$seed"
    COMMBENCH_DRIFT_SEED=$seed cargo test -q "${profile[@]}" --test integration drift:: -- --nocapture 2>&1 |
        grep -oE 'drift: .*|panicked.*|assert.*' | head -3
done
