#!/usr/bin/env bash
# The all-pairs detector against ground truth at the full count: 240 simulated hypercubes of
# 8 to 64 nodes (times drawn at random, hop jitter 0 to 150 ns), one or two faults each
# (slow node, link or dimension, anywhere, rank 0 and the highest dimension often, factors 1.3
# to 3), a --min-factor of 1.1, 1.15 or 1.25, plus 16 healthy machines; and 200 simulated
# trees of switches of 16 or 32 hosts with none, a slow switch, uplink, switch pair or node
# each, at a random place; the whole run (measurement, retests alone, attribution) on each.
# Prints recall and precision per kind and per band of the faults' own slowdown, and the
# detection limits the runs reported; fails on any fault due and not named with its kind
# (on trees, beyond one in twenty that the rounds' load keeps under the factor), and on any
# verdict naming something not injected (tests/allpairs_faults.rs says what "due" is).
#
# Usage: benches/allpairs_faults.sh            (a release build; about 10 minutes on 2 CPUs)
#        COMMBENCH_FAULT_SEED=N benches/allpairs_faults.sh   (seed N alone, as a failure names it)
set -euo pipefail
cd "$(dirname "$0")/.."
COMMBENCH_TEST_SCALE=full exec cargo test --release --test integration allpairs_faults:: -- --nocapture --test-threads 1
