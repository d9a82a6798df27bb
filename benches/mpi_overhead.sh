#!/usr/bin/env bash
# Harness overhead of commbench's mpi backend (issue 6, "How fast"): the 8-byte one-way median
# of the mpi backend must be within 3% of a plain blocking MPI ping-pong loop on the same
# library. Everything runs between two processes bound to cores, side by side:
#
#   1. NetPIPE's NPopenmpi, when installed (8 bytes; NetPIPE prints its own one-way time);
#   2. backends/mpi/examples/osu_latency.rs: osu_latency's loop (MPI_Send/MPI_Recv) alone;
#   3. backends/mpi/examples/overhead.rs: in ONE mpirun, ROUNDS alternating rounds of the plain
#      loop and of commbench's ping-pong on MpiEndpoint (method of seed 000 with its own npp,
#      and with npp fixed to the plain loop's batch of 1000), printing each median and the
#      ratios commbench / plain. The last line holds the medians over rounds.
#
# Usage: benches/mpi_overhead.sh [ROUNDS]     (needs Open MPI; builds with --release)
# Runs as root are allowed (--allow-run-as-root). Noise on a shared machine moves single
# rounds by far more than 3%: compare the medians over rounds, and rerun on a quiet machine.
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS="${1:-9}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
MPIRUN=(mpirun -np 2 --bind-to core)
cargo build --release -q -p commbench-mpi --example osu_latency --example overhead
EX=target/release/examples
if command -v NPopenmpi >/dev/null; then
    echo "== NetPIPE (NPopenmpi), 8 bytes"
    out=$(mktemp)
    "${MPIRUN[@]}" NPopenmpi -l 8 -u 8 -n 20000 -o "$out" >/dev/null 2>&1 || true
    awk '{ printf "NPopenmpi 8 B one-way: %.4f us\n", $3 * 1e6 }' "$out"
    rm -f "$out"
fi
echo "== osu_latency loop (rsmpi MPI_Send/MPI_Recv)"
"${MPIRUN[@]}" "$EX/osu_latency" 8 1000 200
echo "== side by side in one run: plain loop vs commbench mpi backend"
"${MPIRUN[@]}" "$EX/overhead" "$ROUNDS"
