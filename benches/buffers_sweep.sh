#!/usr/bin/env bash
# What the message-buffer options cost a ping-pong: commbench's default against --validate
# (every message filled and checked outside the timed loop) and --cache cold (a pool larger than
# the last-level cache written through before every trial), on shm and tcp, size by size.
#
#   cargo build --release && bash benches/buffers_sweep.sh [ROUNDS]
#   BACKENDS=shm SIZES=1K,1M TRIALS=1000 bash benches/buffers_sweep.sh 5
#   COMMBENCH=path/to/commbench ...      (default target/release/commbench)
#   IDLE_WAIT=1 ...                      (measure only while no build runs; see below)
#
# ROUNDS (default 3): each round runs, on each backend of BACKENDS (default "shm tcp"), one
# ping-pong per variant over all SIZES (default 8,64,1K,8K,64K,1M), both ranks pinned alike
# (--cpus 0,1), TRIALS timed trials per size (default 500: a cold trial first writes through
# twice the last-level cache), npp calculated from the timer resolution as by default:
#   default   commbench pingpong as every earlier version measured it;
#   validate  --validate: the fill before and the check after each trial are not timed, so the
#             time should not move;
#   cold      --cache cold: the trial's buffers start out of every cache. Only a trial's first
#             round trip starts cold: where npp is above 1 (small messages) the others find
#             the buffers the first one brought back, so the npp column matters when reading
#             the cold figure.
# The variants rotate between rounds (round r starts with the r-th) so that drift within a
# round favours none of them. The summary gives per backend and size the median over rounds of
# each variant's median one-way time, and the per-round ratios of each variant to the default
# of the same round with their median.
set -euo pipefail
export LC_ALL=C
B=$(realpath -m -- "${COMMBENCH:-$(dirname "$0")/../target/release/commbench}")
cd "$(dirname "$0")/.."

ROUNDS=${1:-3}
BACKENDS=${BACKENDS:-shm tcp}
SIZES=${SIZES:-8,64,1K,8K,64K,1M}
TRIALS=${TRIALS:-500}
LIMIT=600 # seconds any one run may take before it counts as failed

[[ $ROUNDS =~ ^[1-9][0-9]*$ ]] || { echo "usage: $0 [ROUNDS] (a positive integer, default 3)" >&2; exit 2; }
[[ $TRIALS =~ ^[1-9][0-9]*$ ]] || { echo "TRIALS must be a positive integer (got '$TRIALS')" >&2; exit 2; }
command -v python3 >/dev/null || { echo "needs python3"; exit 1; }
[ -x "$B" ] || { echo "build first: cargo build --release"; exit 1; }

T=$(mktemp -d)
trap 'stop_watch; rm -rf "$T"' EXIT
trap 'exit 130' INT TERM
: >"$T/data"
# The measurement pauses of IDLE_WAIT=1 (stop_watch, wait_idle, quiet_group).
# shellcheck source=benches/idle.sh
. benches/idle.sh

VARIANTS=(default validate cold)
declare -A FLAGS=([default]="" [validate]="--validate" [cold]="--cache cold")

# run ROUND BACKEND VARIANT: one ping-pong over all sizes; writes
# "ROUND BACKEND VARIANT SIZE MEDIAN_US NPP" per point to $T/group and the round's line to LINE
run() {
    local json=$T/cb.json flags
    read -r -a flags <<<"${FLAGS[$3]}"
    rm -f "$json"
    : >"$T/group"
    LINE="round $1/$ROUNDS $2 $3:"
    if ! timeout "$LIMIT" "$B" pingpong --backend "$2" --cpus '0,1' --sizes "$SIZES" --trials "$TRIALS" \
        --samples 100000 --quiet --json "$json" "${flags[@]}" </dev/null >/dev/null 2>"$T/err"; then
        LINE+=" failed: $(grep -m 1 error "$T/err" || tail -n 1 "$T/err")"
        return 0
    fi
    python3 - "$json" "$1" "$2" "$3" >"$T/group" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
for p in doc["points"]:
    print(*sys.argv[2:5], p["size"], p["one_way_us"]["median"], p["npp"])
PY
    LINE+=$(awk '{ printf "%s %s B %.4g", sep, $4, $5; sep = "," }' "$T/group")
}

echo "host: $(nproc) CPUs, $(lscpu | awk -F: '/Model name/ { gsub(/^ +/, "", $2); print $2; exit }'), load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "$ROUNDS rounds; backends $BACKENDS; sizes $SIZES; $TRIALS trials per size; median one-way us"
for r in $(seq "$ROUNDS"); do
    for b in $BACKENDS; do
        for i in 0 1 2; do
            v=${VARIANTS[$(((r - 1 + i) % 3))]}
            quiet_group run "$r" "$b" "$v"
            cat "$T/group" >>"$T/data"
            echo "$LINE"
        done
    done
done

python3 - "$T/data" "$BACKENDS" <<'PY'
import math, statistics, sys

rows = [l.split() for l in open(sys.argv[1])]
val = {}  # (round, backend, variant, size) -> (median us, npp)
for r, b, v, s, m, npp in rows:
    val[(int(r), b, v, int(s))] = (float(m), int(npp))
rounds = sorted({k[0] for k in val})
sizes = sorted({k[3] for k in val})
variants = ["default", "validate", "cold"]


def ok(x):
    return x is not None and math.isfinite(x) and x > 0


def med(xs):
    xs = [x for x in xs if ok(x)]
    return statistics.median(xs) if xs else float("nan")


def f(x, d=3):
    return f"{x:.{d}f}" if ok(x) else "-"


def human(n):
    for unit, k in (("M", 1 << 20), ("K", 1 << 10)):
        if n >= k and n % k == 0:
            return f"{n // k}{unit}"
    return str(n)


def at(r, b, v, s):
    x = val.get((r, b, v, s))
    return x[0] if x else None


for b in sys.argv[2].split():
    print()
    print(f"== {b}: median over {len(rounds)} rounds of the median one-way time (us); npp of the default")
    print(f"  {'size':>6} {'npp':>5} " + "".join(f"{v:>12}" for v in variants))
    for s in sizes:
        npps = sorted({val[k][1] for k in val if k[1] == b and k[2] == "default" and k[3] == s})
        cells = [f(med(at(r, b, v, s) for r in rounds)) for v in variants]
        print(f"  {human(s):>6} {'/'.join(map(str, npps)) or '-':>5} " + "".join(f"{c:>12}" for c in cells))
    print("  per-round ratios to the default of the same round, and their median")
    for s in sizes:
        parts = []
        for v in variants[1:]:
            rs = [at(r, b, v, s) / at(r, b, "default", s) if ok(at(r, b, v, s)) and ok(at(r, b, "default", s))
                  else None for r in rounds]
            parts.append(f"{v}/default [{' '.join(f(x, 2) for x in rs)}] median {f(med(rs), 2)}")
        print(f"  {human(s):>6}  " + "; ".join(parts))
PY
