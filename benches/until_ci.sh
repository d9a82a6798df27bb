#!/usr/bin/env bash
# --until-ci against the fixed count, in interleaved rounds (docs/methodology.md §3a): each
# round runs the default ping-pong sweep and the same sweep with --until-ci, in alternating
# order, both pinned to the same CPUs, and times each whole command. Per round it prints the two
# wall times and their ratio; at the end the median of the per-round ratios, and it fails when a
# size of an --until-ci run is marked did_not_converge or its interval (recomputed from the
# document's trials) is wider than asked.
#
# Usage: benches/until_ci.sh                    (shm, 1..4M:x2, --until-ci 1%, 3 rounds)
#        ROUNDS=5 BACKEND=tcp CPUS=0,1 REL=1% SIZES=1..64K:x2 benches/until_ci.sh
# The target: the --until-ci run takes at most a quarter of the default run's wall time.
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-3}
BACKEND=${BACKEND:-shm}
CPUS=${CPUS:-0,1}
REL=${REL:-1%}
SIZES=${SIZES:-1..4M:x2}
cargo build --release -q
exe=target/release/commbench
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
common=(pingpong --backend "$BACKEND" --cpus "$CPUS" --sizes "$SIZES" --quiet)
run() { # name round extra...: the wall time of one command, its document in $out
    local name=$1 round=$2
    shift 2
    local t0=$EPOCHREALTIME
    "$exe" "${common[@]}" "$@" --json "$out/$name-$round.json"
    python3 -c "import sys; print(float(sys.argv[2]) - float(sys.argv[1]))" "$t0" "$EPOCHREALTIME"
}
echo "backend $BACKEND, cpus $CPUS, sizes $SIZES, --until-ci $REL, $ROUNDS rounds"
for r in $(seq 1 "$ROUNDS"); do
    if [ $((r % 2)) -eq 1 ]; then
        d=$(run default "$r")
        u=$(run until "$r" --until-ci "$REL")
    else
        u=$(run until "$r" --until-ci "$REL")
        d=$(run default "$r")
    fi
    printf 'round %s: default %.2f s, until-ci %.2f s, ratio %.3f\n' "$r" "$d" "$u" \
        "$(python3 -c "import sys; print(float(sys.argv[1]) / float(sys.argv[2]))" "$u" "$d")" |
        tee -a "$out/rounds"
done
python3 - "$out" "$REL" <<'EOF'
import glob, json, statistics, sys
out, rel = sys.argv[1], sys.argv[2]
want = float(rel.rstrip('%')) / 100 if rel.endswith('%') else float(rel)
ratios = [float(l.split()[-1]) for l in open(f"{out}/rounds")]
print(f"median of the per-round ratios: {statistics.median(ratios):.3f} "
      f"(target at most 0.25)")
def ranks(n, level):
    """core::stats::median_ci_ranks_at: the largest j with P(B <= j-1) <= (1-level)/2."""
    a = (1 - level) / 2
    if n <= 1000:
        pmf, cdf, j = 0.5 ** n, 0.0, 0
        while j < n:
            cdf += pmf
            if cdf > a:
                break
            j += 1
            pmf *= (n - (j - 1)) / j
    else:
        z = statistics.NormalDist().inv_cdf(1 - a)
        j = max(0, int(n / 2 + 0.5 - z * n ** 0.5 / 2))
    j = min(max(j, 1), (n + 1) // 2)
    return j - 1, n - j
bad = 0
for f in sorted(glob.glob(f"{out}/until-*.json")):
    d = json.load(open(f))
    trials = []
    for p in d["points"]:
        u = p["until_ci"]
        t = sorted(p["trial_ns"])
        n = len(t)
        lo, hi = ranks(n, u["level"])
        m = statistics.median(t)
        hw = max(m - t[lo], t[hi] - m) / m
        trials.append(n)
        if u["outcome"] != "converged" or hw > want * (1 + 1e-9):
            bad += 1
            print(f"{f}: {p['size']} B: {n} trials, half-width {hw:.4%}: {u}")
    print(f"{f.split('/')[-1]}: trials per size {min(trials)}..{max(trials)}, "
          f"total {sum(trials)}")
sys.exit(1 if bad else 0)
EOF
