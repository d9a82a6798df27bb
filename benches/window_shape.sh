#!/usr/bin/env bash
# How the time per message of a streaming window changes with the window, commbench's
# bandwidth pattern against OSU's osu_bw loop (benches/osu_bw.c), with one buffer posted the
# whole window (single, osu_bw's default) and with one buffer per outstanding message
# (multiple, commbench's default).
#
#   cargo build --release --features mpi && bash benches/window_shape.sh [ROUNDS]
#   SIZES="1M" WINDOWS="1 8 64" MSGS=1280 bash benches/window_shape.sh 5
#   COMMBENCH=path/to/commbench ...      (default target/release/commbench)
#   IDLE_WAIT=1 ...                      (measure only while no build runs; see below)
#
# ROUNDS (default 3): each round measures, for every size of SIZES (default "1M 64K") and every
# window of WINDOWS (default "1 2 4 8 16 32 64"), back to back:
#   osu_s, osu_m   benches/osu_bw.c -b single / -b multiple under mpirun -np 2 --bind-to core;
#   mpi_s, mpi_m   commbench bandwidth --backend mpi --buffers single / multiple, under the same
#                  mpirun, so both tools stream through the same MPI between the same cores;
#   shm_s, shm_m   commbench bandwidth --backend shm --buffers single / multiple --cpus 0,1
#                  (the same two CPUs; no osu_bw equivalent, its shape is the point).
# The order of the six alternates between rounds (reversed in even rounds) so that drift
# within a round favours none of them.
# Every run streams about MSGS messages (default 2560): osu_bw -i MSGS/W iterations (at least
# 20, OSU's count above 8 KiB) after -x 2 untimed ones; commbench --trials MSGS/W (at least 20)
# after --warmup 2, npp calculated.
#
# The figure is the time per message in microseconds. osu_bw's is its own average (the timed
# iterations' time / (iterations x W)); commbench's is the median of its trials' time per
# message, and beside it their mean, osu_bw's statistic. The summary gives per window the
# median over rounds of each, and the per-round ratios commbench mpi / osu_bw (single to
# single, multiple to multiple, by commbench's median and by its mean) with their median: the
# ratio is taken within a round, where both tools saw the same machine.
set -euo pipefail
export LC_ALL=C
B=$(realpath -m -- "${COMMBENCH:-$(dirname "$0")/../target/release/commbench}")
cd "$(dirname "$0")/.."

ROUNDS=${1:-3}
SIZES=${SIZES:-1M 64K}
WINDOWS=${WINDOWS:-1 2 4 8 16 32 64}
MSGS=${MSGS:-2560}
LIMIT=300 # seconds any one run may take before it counts as failed
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

[[ $ROUNDS =~ ^[1-9][0-9]*$ ]] || { echo "usage: $0 [ROUNDS] (a positive integer, default 3)" >&2; exit 2; }
[[ $MSGS =~ ^[1-9][0-9]*$ ]] || { echo "MSGS must be a positive integer (got '$MSGS')" >&2; exit 2; }
for w in $WINDOWS; do
    [[ $w =~ ^[1-9][0-9]*$ ]] || { echo "WINDOWS: '$w' is not a positive integer" >&2; exit 2; }
done
for t in python3 mpicc mpirun; do command -v "$t" >/dev/null || { echo "needs $t"; exit 1; }; done
[ -x "$B" ] || { echo "build first: cargo build --release --features mpi"; exit 1; }

T=$(mktemp -d)
trap 'stop_watch; rm -rf "$T"' EXIT
trap 'exit 130' INT TERM
# The measurement pauses of IDLE_WAIT=1 (stop_watch, wait_idle, quiet_group).
# shellcheck source=benches/idle.sh
. benches/idle.sh
mpicc -O2 -o "$T/osu_bw" benches/osu_bw.c

bytes() { # 1M -> 1048576, 64K -> 65536, 8 -> 8
    case $1 in
        *K) echo $((${1%K} * 1024)) ;;
        *M) echo $((${1%M} * 1048576)) ;;
        *) echo "$1" ;;
    esac
}

# osu BUFFERS SIZE W: "us_per_message us_per_message" (osu_bw's average, twice: it has one
# statistic)
osu() {
    local it=$((MSGS / $3))
    [ "$it" -ge 20 ] || it=20
    timeout "$LIMIT" mpirun -np 2 --bind-to core "$T/osu_bw" -b "$1" -W "$3" -i "$it" -x 2 "$(bytes "$2")" </dev/null |
        awk '!/^#/ { print $6, $6 }'
}

# cb BACKEND BUFFERS SIZE W: "median mean" of commbench's time per message (us)
cb() {
    local trials=$((MSGS / $4)) json=$T/cb.json run=() args=()
    [ "$trials" -ge 20 ] || trials=20
    if [ "$1" = mpi ]; then run=(mpirun -np 2 --bind-to core); fi
    rm -f "$json"
    args+=(bandwidth --backend "$1" --buffers "$2" --sizes "$3" --window "$4"
        --trials "$trials" --warmup 2 --samples 100000 --quiet --json "$json")
    if [ "$1" = shm ]; then args+=(--cpus '0,1'); fi
    timeout "$LIMIT" "${run[@]}" "$B" "${args[@]}" </dev/null >/dev/null || return 1
    python3 -c 'import json, sys; p = json.load(open(sys.argv[1]))["points"][-1]["one_way_us"]; print(p["median"], p["mean"])' "$json"
}

osu_s() { osu single "$@"; }
osu_m() { osu multiple "$@"; }
mpi_s() { cb mpi single "$@"; }
mpi_m() { cb mpi multiple "$@"; }
shm_s() { cb shm single "$@"; }
shm_m() { cb shm multiple "$@"; }
TOOLS=(osu_s mpi_s shm_s osu_m mpi_m shm_m)

echo "host: $(nproc) CPUs, $(lscpu | awk -F: '/Model name/ { gsub(/^ +/, "", $2); print $2; exit }'), load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "$ROUNDS rounds; sizes $SIZES; windows $WINDOWS; about $MSGS messages per run; us per message (commbench: median/mean)"
# group R SIZE W TOOL...: measure SIZE at window W with each TOOL in turn, into $T/group (data
# lines) and LINE (the round's line)
group() {
    local r=$1 s=$2 w=$3 t v med mean
    shift 3
    : >"$T/group"
    LINE="round $r/$ROUNDS $s W=$w:"
    for t in "$@"; do
        if v=$("$t" "$s" "$w" 2>"$T/err") && [[ $v =~ ^[0-9.eE+-]+\ [0-9.eE+-]+$ ]]; then
            read -r med mean <<<"$v"
        else
            med=nan mean=nan
            echo "  round $r $s W=$w $t failed: $(grep -m 1 error "$T/err" || tail -n 1 "$T/err")"
        fi
        echo "$r $s $w $t $med $mean" >>"$T/group"
        if [ "${t%_?}" = osu ]; then
            LINE+=" $(printf '%s %.4g' "$t" "$med")"
        else
            LINE+=" $(printf '%s %.4g/%.4g' "$t" "$med" "$mean")"
        fi
    done
}

for r in $(seq "$ROUNDS"); do
    order=("${TOOLS[@]}")
    if [ $((r % 2)) = 0 ]; then
        order=()
        for ((i = ${#TOOLS[@]} - 1; i >= 0; i--)); do order+=("${TOOLS[i]}"); done
    fi
    for s in $SIZES; do
        for w in $WINDOWS; do
            quiet_group group "$r" "$s" "$w" "${order[@]}"
            cat "$T/group" >>"$T/data"
            echo "$LINE"
        done
    done
done

python3 - "$T/data" "$SIZES" "$WINDOWS" <<'PY'
import math, statistics, sys

rows = [l.split() for l in open(sys.argv[1])]
sizes, windows = sys.argv[2].split(), [int(w) for w in sys.argv[3].split()]
val = {}  # (round, size, window, tool) -> (median, mean)
for r, s, w, t, med, mean in rows:
    val[(int(r), s, int(w), t)] = (float(med), float(mean))
rounds = sorted({k[0] for k in val})
tools = ["osu_s", "mpi_s", "shm_s", "osu_m", "mpi_m", "shm_m"]


def ok(x):
    return x is not None and math.isfinite(x) and x > 0


def med(xs):
    xs = [x for x in xs if ok(x)]
    return statistics.median(xs) if xs else float("nan")


def at(r, s, w, t, i=0):
    """The median (i=0) or mean (i=1) of one run; None when it failed or was not run."""
    v = val.get((r, s, w, t))
    return v[i] if v and ok(v[i]) else None


def ratio(a, b):
    return a / b if ok(a) and ok(b) else None


def f(x, d=1):
    return f"{x:.{d}f}" if ok(x) else "-"


for s in sizes:
    print()
    print(f"== {s}: median over {len(rounds)} rounds of the time per message (us); commbench's median (mean)")
    print("  W     " + "".join(f"{t:>16}" for t in tools))
    for w in windows:
        cells = []
        for t in tools:
            m = med(at(r, s, w, t) for r in rounds)
            a = med(at(r, s, w, t, 1) for r in rounds)
            cells.append(f(m) if t.startswith("osu") else f"{f(m)} ({f(a)})")
        print(f"  {w:<6}" + "".join(f"{c:>16}" for c in cells))
    # The shape: each tool's time at a window over its time at the first window.
    w0 = windows[0]
    print(f"  shape: median over rounds of (time at W) / (time at W={w0}), commbench by its median")
    print("  W     " + "".join(f"{t:>16}" for t in tools))
    for w in windows:
        cells = []
        for t in tools:
            cells.append(f(med(ratio(at(r, s, w, t), at(r, s, w0, t)) for r in rounds), 2))
        print(f"  {w:<6}" + "".join(f"{c:>16}" for c in cells))
    print("  per-round ratios commbench mpi / osu_bw (by commbench's median; by its mean), and their median")
    for w in windows:
        parts = []
        for b in ("s", "m"):
            by_med, by_mean = [], []
            for r in rounds:
                o = at(r, s, w, "osu_" + b)
                by_med.append(ratio(at(r, s, w, "mpi_" + b), o))
                by_mean.append(ratio(at(r, s, w, "mpi_" + b, 1), o))
            name = "single" if b == "s" else "multiple"
            parts.append(f"{name} [{' '.join(f(x, 2) for x in by_med)}] median {f(med(by_med), 2)}"
                         f" (mean: median {f(med(by_mean), 2)})")
        print(f"  W={w:<4} " + "; ".join(parts))
PY
