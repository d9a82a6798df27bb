#!/usr/bin/env bash
# How long the simulator takes for a 256-node all-pairs run at 8 B and 1 MiB (a 65,280-cell
# matrix at each size), with and without a fault injected: the wall time of the whole
# command (start-up, measurement, retests, attribution, report), RUNS times each.
#
# Usage: benches/allpairs_sim.sh [RUNS]   (default 3; builds the release binary first)
# Extra commbench options go in $ALLPAIRS_OPTS (default: the documented settings below). The
# machine is the generic preset on 8 dimensions, carrying the first 4 KiB of each message
# (carry_bytes: the virtual times are the same, the host does not copy each 1 MiB message
# twice); CARRY=all carries every byte.
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-3}
opts=${ALLPAIRS_OPTS:---trials 5 --warmup 1 --npp 1 --samples 100}
cargo build --release --quiet
bin=target/release/commbench
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

cat > "$work/cube256.toml" <<'EOF'
preset = "generic"
name = "cube256"
dimensions = 8
stack_kib = 128
EOF
if [ "${CARRY:-4096}" != all ]; then
    echo "carry_bytes = ${CARRY:-4096}" >> "$work/cube256.toml"
fi
cp "$work/cube256.toml" "$work/cube256-slow.toml"
cat >> "$work/cube256-slow.toml" <<'EOF'

[[faults]]
kind = "slow_node"
node = 77
factor = 3
EOF

echo "commbench allpairs --backend sim, 256 nodes, --sizes 8,1M $opts"
for machine in cube256 cube256-slow; do
    for r in $(seq 1 "$runs"); do
        start=$(date +%s.%N)
        # shellcheck disable=SC2086 # $opts is a list of options
        "$bin" allpairs --backend sim --sim-config "$work/$machine.toml" --sizes 8,1M \
            $opts --progress never --json "$work/$machine.json" > "$work/$machine.txt"
        end=$(date +%s.%N)
        printf '%-13s run %d: %6.2f s\n' "$machine" "$r" "$(echo "$end - $start" | bc)"
    done
    sed -n '/erdict/,/^$/p' "$work/$machine.txt" | head -8
done
