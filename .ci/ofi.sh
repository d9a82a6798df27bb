#!/usr/bin/env bash
# The libfabric part of CI, called by .ci/run: install libfabric's headers when
# missing, then build the opt-in ofi backend and run its tests: the conformance suite on the
# shm and tcp;ofi_rxm providers (2, 3 and 4 ranks), with and without inject, with registered
# buffers; then the CLI built with `--features ofi` and its ofi tests. A few minutes on two cores.
#
# The command line is built with the features in CI_FEATURES (ofi added when missing), or with
# ofi alone: .ci/run gives every opt-in backend's script the same list, so that they share one
# build of it.
set -euo pipefail
cd "$(dirname "$0")/.."

source .ci/features.sh
features=$(with_feature "${CI_FEATURES:-ofi}" ofi)
beside_mpi=$(with_feature "$features" mpi)

need=()
for p in libfabric-dev libfabric-bin libclang-dev pkg-config; do
    dpkg -s "$p" >/dev/null 2>&1 || need+=("$p")
done
if [ ${#need[@]} -gt 0 ]; then
    echo "ofi.sh: installing ${need[*]}"
    apt-get update -q
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${need[@]}"
fi

echo "ofi.sh: providers with a tagged RDM endpoint here:"
fi_info -t FI_EP_RDM -c FI_TAGGED 2>/dev/null | awk '/provider:/ {print $2}' | sort -u | sed 's/^/  /'

# .ci/run lints the whole workspace first and says so (CI_LINTED), and runs the three opt-in
# backends' own tests in one build (CI_CRATES_TESTED).
if [ -z "${CI_CRATES_TESTED:-}" ]; then
    [ -n "${CI_LINTED:-}" ] || cargo clippy -p commbench-ofi --all-targets -- -D warnings
    timeout 600 cargo test -p commbench-ofi
fi

# The CLI over libfabric: runs on shm and tcp;ofi_rxm, an absent provider refused (exit 2),
# a killed peer named within the timeout.
# The command line with libfabric alone compiles; its tests build it with $features. (A plain
# build would share nothing with theirs: tests build commbench-core with its testkit.)
cargo check --features ofi
timeout 600 cargo test --features "$features" --test ofi_ucx ofi::

# Beside MPI: `mpirun -np 2 commbench pingpong --backend mpi,ofi,tcp,shm` (addresses through
# MPI), when Open MPI is there (.ci/run installs it).
if command -v mpirun >/dev/null; then
    timeout 600 cargo test --features "$beside_mpi" --test mpi mpi_ofi
fi

# One round of the side-by-side script against fi_pingpong on the debug build: it must keep
# running end to end (its ratios mean nothing here; docs/ofi.md says how to measure).
COMMBENCH=target/debug/commbench bash benches/compare_ofi.sh 1
