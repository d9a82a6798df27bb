#!/usr/bin/env bash
# The MPI part of CI (issue 6), called by .ci/run: install Open MPI and libclang when missing,
# build the opt-in mpi feature, lint the backend, run the conformance suite over MPI with 2
# and 4 ranks, and the CLI-level MPI tests. A few minutes on two cores.
#
# The command line is built with the features in CI_FEATURES (mpi added when missing), or with
# mpi alone: .ci/run gives every opt-in backend's script the same list, so that they share one
# build of it.
set -euo pipefail
cd "$(dirname "$0")/.."

source .ci/features.sh
features=$(with_feature "${CI_FEATURES:-mpi}" mpi)

need=()
command -v mpirun >/dev/null || need+=(openmpi-bin)
[ -e /usr/lib/x86_64-linux-gnu/openmpi/include/mpi.h ] || [ -e /usr/include/mpi.h ] \
    || dpkg -s libopenmpi-dev >/dev/null 2>&1 || need+=(libopenmpi-dev)
ls /usr/lib/llvm-*/lib/libclang*.so* >/dev/null 2>&1 || dpkg -s libclang-dev >/dev/null 2>&1 \
    || need+=(libclang-dev)
if [ ${#need[@]} -gt 0 ]; then
    echo "mpi.sh: installing ${need[*]}"
    apt-get update -q
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${need[@]}"
fi

# CI runs as root; Open MPI refuses that without these.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

# The command line with MPI alone compiles; its tests below build it with $features. (A plain
# build would share nothing with theirs: tests build commbench-core with its testkit.)
cargo check --features mpi
# .ci/run lints the whole workspace first and says so (CI_LINTED), and runs the three opt-in
# backends' own tests in one build (CI_CRATES_TESTED), examples included: built apart, each
# crate's dependencies would be built again with other features.
if [ -z "${CI_CRATES_TESTED:-}" ]; then
    cargo build -p commbench-mpi --examples
    [ -n "${CI_LINTED:-}" ] || cargo clippy -p commbench-mpi --all-targets -- -D warnings
    cargo test -p commbench-mpi
fi

# Conformance suite over MPI (every check on 2 ranks, then on 2, 3 and 4 of 4 ranks), every
# pattern between two ranks, both transposes. Bounded: a hang would be a failure.
timeout 120 mpirun -np 2 target/debug/examples/conformance
timeout 180 mpirun -np 4 --oversubscribe target/debug/examples/conformance

# CLI under mpirun (pingpong --backend mpi, transpose, a killed rank, no launcher). The tests of
# libfabric and UCX beside MPI, there when their features are, are ofi.sh's and ucx.sh's.
cargo test --features "$features" --test mpi -- --skip mpi_ofi --skip mpi_ucx
