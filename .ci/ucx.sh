#!/usr/bin/env bash
# The UCX part of CI, called by .ci/run: install UCX's headers when missing, then build the
# opt-in ucx backend and run its tests: the conformance suite over shared memory (posix, sysv,
# posix with cma) and tcp (2, 3 and 4 ranks), what the result document says of lanes and
# protocols, a silent peer; then the CLI built with `--features ucx` and its ucx tests, and
# `--backend mpi,ucx,...` under mpirun. A few minutes on two cores.
#
# The command line is built with the features in CI_FEATURES (ucx added when missing), or with
# ucx alone: .ci/run gives every opt-in backend's script the same list, so that they share one
# build of it.
set -euo pipefail
cd "$(dirname "$0")/.."

source .ci/features.sh
features=$(with_feature "${CI_FEATURES:-ucx}" ucx)
beside_mpi=$(with_feature "$features" mpi)

need=()
for p in libucx-dev ucx-utils libclang-dev pkg-config; do
    dpkg -s "$p" >/dev/null 2>&1 || need+=("$p")
done
if [ ${#need[@]} -gt 0 ]; then
    echo "ucx.sh: installing ${need[*]}"
    apt-get update -q
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${need[@]}"
fi

echo "ucx.sh: UCX $(pkg-config --modversion ucx), transports here:"
ucx_info -d 2>/dev/null | awk '/Transport:/ {print $3}' | sort -u | sed 's/^/  /'

# .ci/run lints the whole workspace first and says so (CI_LINTED), and runs the three opt-in
# backends' own tests in one build (CI_CRATES_TESTED).
if [ -z "${CI_CRATES_TESTED:-}" ]; then
    [ -n "${CI_LINTED:-}" ] || cargo clippy -p commbench-ucx --all-targets -- -D warnings
    timeout 600 cargo test -p commbench-ucx
fi

# The CLI over UCX: runs over posix shared memory and tcp, bad transports refused (exit 2),
# seed 001's and seed 004's benchmarks, a killed peer named within the timeout.
# The command line with UCX alone compiles; its tests build it with $features. (A plain
# build would share nothing with theirs: tests build commbench-core with its testkit.)
cargo check --features ucx
timeout 600 cargo test --features "$features" --test ofi_ucx ucx::

# Beside MPI: `mpirun -np 2 commbench pingpong --backend mpi,ucx,tcp,shm` (addresses through
# MPI), when Open MPI is there (.ci/run installs it).
if command -v mpirun >/dev/null; then
    timeout 600 cargo test --features "$beside_mpi" --test mpi mpi_ucx
fi

# One round of the side-by-side script against ucx_perftest on the debug build: it must keep
# running end to end (its ratios mean nothing here; the script's header says what it compares).
COMMBENCH=target/debug/commbench bash benches/compare_ucx.sh 1
