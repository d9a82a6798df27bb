#!/usr/bin/env bash
# How time and rank 0's memory grow with the ranks and the trials of a simulated all-pairs run:
# the generic preset on a cube of NODES nodes (a power of two), --sizes 8,1M and the settings of
# benches/allpairs_sim.sh, TRIALS trials a cell. For each run: the wall time of the whole
# command, its peak resident memory (the whole process: every simulated rank runs in it), the
# cells and the size of the document. Rank 0 keeps a fixed-size summary per cell and the raw
# trials stay with their source (--raw suspects, the default), so memory follows the cells.
#
# Usage: benches/allpairs_scale.sh [NODES...]     (default: 256 1024; builds the release binary)
#        TRIALS="5 100" benches/allpairs_scale.sh 256 1024 4096
# Targets (issue: all-pairs at a thousand nodes): 1,024 nodes at 5 trials under 60 s and 2 GiB.
set -euo pipefail
cd "$(dirname "$0")/.."
nodes=${*:-256 1024}
trials=${TRIALS:-5 100}
cargo build --release --quiet
bin=$PWD/target/release/commbench
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# Wall seconds and peak resident MiB of a command (its output discarded, its errors shown).
measure() {
    python3 - "$@" <<'PY'
import resource, subprocess, sys, time
t = time.monotonic()
r = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
wall = time.monotonic() - t
if r.returncode != 0:
    sys.stderr.buffer.write(r.stderr)
peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
print(f"{wall:.1f} {peak:.0f}")
sys.exit(r.returncode)
PY
}

printf '%6s %6s %10s %9s %10s %12s %10s\n' nodes trials cells "wall s" "peak MiB" "KiB/cell" "doc MB"
for n in $nodes; do
    d=0
    while [ $((1 << d)) -lt "$n" ]; do d=$((d + 1)); done
    if [ $((1 << d)) -ne "$n" ]; then
        echo "NODES must be powers of two (a hypercube), not $n" >&2
        exit 2
    fi
    cat > "$work/cube$n.toml" <<TOML
preset = "generic"
name = "cube$n"
dimensions = $d
stack_kib = 128
carry_bytes = ${CARRY:-4096}
TOML
    for t in $trials; do
        json="$work/cube$n-$t.json"
        read -r wall peak < <(measure "$bin" allpairs --backend sim --sim-config "$work/cube$n.toml" \
            --sizes 8,1M --trials "$t" --warmup 1 --npp 1 --samples 100 --progress never \
            --json "$json")
        cells=$((2 * n * (n - 1)))
        doc=$(stat -c %s "$json")
        printf '%6d %6d %10d %9s %10s %12.2f %10.1f\n' "$n" "$t" "$cells" "$wall" "$peak" \
            "$(echo "$peak * 1024 / $cells" | bc -l)" "$(echo "$doc / 1000000" | bc -l)"
        rm -f "$json"
    done
done
