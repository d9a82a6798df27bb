#!/usr/bin/env bash
# Harness overhead of commbench against the plainest loop of each library, in one command.
#
#   benches/overhead.sh [ROUNDS]          (default 11 rounds; needs python3)
#   PAIRS="mpi tcp" benches/overhead.sh 5 (choose the pairs; default: mpi tcp shm ofi ucx)
#   MODE_GAP=2 benches/overhead.sh        (the placement-mode gap factor, default 1.5)
#   COMMBENCH=path/to/commbench ...       (default target/release/commbench)
#   STRICT=1 benches/overhead.sh 1        (exit 1 when a pair of PAIRS was skipped or measured
#                                          no round with both tools: CI's smoke test)
#
# Every pair compares commbench's 8-byte one-way time with the same measurement by the
# plainest program for that transport, both ends pinned alike (CPU 0 times, CPU 1 echoes):
#   mpi  commbench --backend mpi --npp 50 under `mpirun -np 2 --bind-to core`, against
#        benches/mpi_pingpong.c (barrier, then 50 MPI_Send/MPI_Recv round trips timed with
#        MPI_Wtime, median of 10000 trials), built here with mpicc -O2. Target: ratio <= 1.05.
#   tcp  commbench --backend tcp --cpus 0,1 against NetPIPE (NPtcp) under taskset. NPtcp reports
#        the best of its repetitions' averages; the ratio judged is commbench's median over
#        NPtcp's figure (target <= 1.0), and beside it commbench measured with NetPIPE's own
#        statistic (the best of 30 trials of npp = 1000) over NPtcp's figure.
#   shm  commbench --backend shm --cpus 0,1 against benches/handoff.c, two pinned threads
#        handing one cache line back and forth: the physical floor, no target (informative).
#   ofi, ucx  commbench --backend ofi/ucx against fi_pingpong / ucx_perftest on loopback, run
#        only when this commbench lists the backend as compiled in and the tool is installed.
# A pair whose tools are missing is skipped with a one-line reason; a run that fails is shown
# as failed in its round and left out of the medians.
#
# Why rounds, and medians of per-round ratios: on a small shared or virtual machine the speed
# of both tools jumps between states (which cores, which hyperthreads, what else runs, host
# scheduling) that last for seconds to minutes, moving single runs by far more than the few
# per cent being judged. So each round runs both tools back to back, the ratio is taken within
# the round, where both saw the same machine, and the figure reported is the median of the
# per-round ratios. The order alternates (commbench first in odd rounds, the plain loop first
# in even ones), so that drift within a round does not favour either tool.
#
# Placement modes: after the last round, every value measured for a pair (both tools, all
# rounds) is sorted by its logarithm, and wherever two neighbours differ by more than a
# factor MODE_GAP (1.5 unless overridden: well above the run-to-run spread within one state,
# well below the 2x-or-more jumps between states) a new mode starts. A round is "same-mode"
# when both tools' values fall into the same mode. The count of rounds per mode and of mixed
# rounds says how much the machine moved during the run. The figure judged is the median of
# the ratios over ALL rounds: the mode rule cannot tell a state of the machine from a real
# difference of 1.5x or more (a tool that slow puts its own values in a mode of their own), so
# it never removes a round from the judged figure; the median over same-mode rounds is printed
# beside it, and the two agree when noise did not decide.
set -euo pipefail
# Numbers are printed and parsed with a decimal point whatever the caller's locale.
export LC_ALL=C
# A binary named relative to the caller's directory, resolved before leaving it.
B=$(realpath -m -- "${COMMBENCH:-$(dirname "$0")/../target/release/commbench}")
cd "$(dirname "$0")/.."

ROUNDS=${1:-11}
PAIRS=${PAIRS:-mpi tcp shm ofi ucx}
MODE_GAP=${MODE_GAP:-1.5}
STRICT=${STRICT:-0}
LIMIT=300 # seconds any one tool run may take before it counts as failed
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

command -v python3 >/dev/null || { echo "needs python3"; exit 1; }
[[ $ROUNDS =~ ^[1-9][0-9]*$ ]] || { echo "usage: $0 [ROUNDS] (a positive integer, default 11)" >&2; exit 2; }
[[ $STRICT =~ ^[01]$ ]] || { echo "STRICT must be 0 or 1 (got '$STRICT')" >&2; exit 2; }
if ! [[ $MODE_GAP =~ ^[0-9]+([.][0-9]+)?$ ]] || ! python3 -c 'import sys; sys.exit(float(sys.argv[1]) <= 1)' "$MODE_GAP"; then
    echo "MODE_GAP must be a number above 1 (got '$MODE_GAP')" >&2
    exit 2
fi
[ -x "$B" ] || { echo "build first: cargo build --release --features mpi (or without --features mpi where MPI is absent)"; exit 1; }

T=$(mktemp -d)
SERVER_PID="" # the background server (NPtcp receiver, fi_pingpong or ucx_perftest) while it runs
cleanup() {
    if [ -n "$SERVER_PID" ]; then kill "$SERVER_PID" 2>/dev/null || true; fi
    rm -rf "$T"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

have() { command -v "$1" >/dev/null; }

# has_backend NAME: this commbench has backend NAME compiled in (`commbench backends` says so;
# a build without that subcommand: NAME appears in the --backend help text).
has_backend() {
    local list
    if list=$("$B" backends 2>/dev/null); then
        awk -v n="$1" '$1 == n && / compiled in$/ { f = 1 } END { exit !f }' <<<"$list"
    else
        list=$("$B" pingpong --help 2>/dev/null) || return 1
        grep -A1 'Transport:' <<<"$list" | grep -w "$1" >/dev/null
    fi
}

# ---- the tools; each prints the 8-byte one-way time in us, or fails ----

# cb STAT COMMAND...: a commbench run (COMMAND names the binary and its own options), printing
# the last point's one_way_us.STAT from its JSON result document.
cb() {
    local stat=$1 json=$T/cb.json
    shift
    rm -f "$json"
    timeout "$LIMIT" "$@" --sizes 8 --samples 100000 --quiet --json "$json" </dev/null >/dev/null || return 1
    python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["points"][-1]["one_way_us"][sys.argv[2]])' "$json" "$stat"
}

# with_server SERVER... -- CLIENT...: start SERVER pinned to CPU 1 in the background, run
# CLIENT pinned to CPU 0 (its output on stdout), then collect the server.
with_server() {
    local server=() rc=0
    while [ "$1" != "--" ]; do server+=("$1"); shift; done
    shift
    timeout "$LIMIT" taskset -c 1 "${server[@]}" >/dev/null 2>&1 &
    SERVER_PID=$!
    sleep 0.3
    timeout "$LIMIT" taskset -c 0 "$@" || rc=$?
    # A failed client can leave the server waiting for it; a finished one ends the server.
    if [ "$rc" != 0 ]; then kill "$SERVER_PID" 2>/dev/null || true; fi
    wait "$SERVER_PID" 2>/dev/null || true
    SERVER_PID=""
    return "$rc"
}

plain_mpi() { # benches/mpi_pingpong.c: the median one-way time of 10000 trials of npp 50
    # stdin closed: an mpiexec that reads it would stop, in the background of `timeout`
    timeout "$LIMIT" mpirun -np 2 --bind-to core "$T/mpi_pingpong" 8 50 10000 </dev/null | tail -n 1
}

plain_tcp() { # NPtcp: column 3 of its output file is the one-way time in seconds
    rm -f "$T/np.out"
    with_server NPtcp -l 8 -u 8 -p 0 -- NPtcp -h 127.0.0.1 -l 8 -u 8 -p 0 -o "$T/np.out" >/dev/null || return 1
    awk '{ printf "%.4f\n", $3 * 1e6 }' "$T/np.out"
}

plain_shm() { # benches/handoff.c prints "... median X ns ..."
    timeout "$LIMIT" "$T/handoff" 0 1 | awk '{ for (i = 1; i < NF; i++) if ($i == "median") printf "%.4f\n", $(i + 1) / 1000 }'
}

plain_ofi() { # fi_pingpong: the usec/xfer column (time / (iterations x 2)) of the 8-byte line
    with_server fi_pingpong -p tcp -I 10000 -S 8 -- fi_pingpong -p tcp -I 10000 -S 8 127.0.0.1 >"$T/client.out" || return 1
    awk '/usec\/xfer/ { for (i = 1; i <= NF; i++) if ($i == "usec/xfer") c = i; next }
         c && $1 == "8" { print $c; exit }' "$T/client.out"
}

plain_ucx() { # ucx_perftest: the Final line's percentile (median) latency, else its average
    with_server ucx_perftest -- ucx_perftest 127.0.0.1 -t tag_lat -s 8 -n 10000 >"$T/client.out" || return 1
    awk '$1 == "Final:" { print ($3 > 0 ? $3 : $4); exit }' "$T/client.out"
}

cb_mpi() { cb median mpirun -np 2 --bind-to core "$B" pingpong --backend mpi --npp 50; }
cb_tcp() { cb median "$B" pingpong --backend tcp --cpus 0,1 --trials 20000; }
# commbench with NetPIPE's statistic: the best of 30 trials of 1000 ping-pongs each
cb_tcp_np() { cb min "$B" pingpong --backend tcp --cpus 0,1 --npp 1000 --trials 30; }
cb_shm() { cb median "$B" pingpong --backend shm --cpus 0,1 --trials 20000; }
cb_ofi() { cb median "$B" pingpong --backend ofi --cpus 0,1 --trials 20000; }
cb_ucx() { cb median "$B" pingpong --backend ucx --cpus 0,1 --trials 20000; }

# ---- which pairs can run ----

# ready PAIR: prepare PAIR (build its plain program) or print why it is skipped and fail
ready() {
    case $1 in
        mpi)
            have mpicc || { echo "mpi: skipped: mpicc not installed (apt-get install libopenmpi-dev openmpi-bin)"; return 1; }
            have mpirun || { echo "mpi: skipped: mpirun not installed (apt-get install openmpi-bin)"; return 1; }
            has_backend mpi || { echo "mpi: skipped: $B has no mpi backend (cargo build --release --features mpi)"; return 1; }
            mpicc -O2 -o "$T/mpi_pingpong" benches/mpi_pingpong.c ||
                { echo "mpi: skipped: benches/mpi_pingpong.c does not build with mpicc"; return 1; } ;;
        tcp)
            have NPtcp || { echo "tcp: skipped: NPtcp not installed (apt-get install netpipe-tcp)"; return 1; }
            have taskset || { echo "tcp: skipped: taskset not installed (apt-get install util-linux)"; return 1; } ;;
        shm)
            have cc || { echo "shm: skipped: no C compiler (apt-get install gcc)"; return 1; }
            cc -O2 -pthread -o "$T/handoff" benches/handoff.c ||
                { echo "shm: skipped: benches/handoff.c does not build"; return 1; } ;;
        ofi | ucx)
            local tool=fi_pingpong pkg=libfabric-bin
            if [ "$1" = ucx ]; then tool=ucx_perftest pkg=ucx-utils; fi
            has_backend "$1" || { echo "$1: skipped: this commbench has no $1 backend (commbench backends lists them)"; return 1; }
            have "$tool" || { echo "$1: skipped: $tool not installed (apt-get install $pkg)"; return 1; }
            have taskset || { echo "$1: skipped: taskset not installed (apt-get install util-linux)"; return 1; } ;;
        *)
            echo "$1: skipped: unknown pair (known: mpi tcp shm ofi ucx)"; return 1 ;;
    esac
}

active=() skipped=()
for p in $PAIRS; do
    if ready "$p"; then active+=("$p"); else skipped+=("$p"); fi
done
if [ ${#active[@]} = 0 ]; then
    echo "no pair can run: nothing measured"
    [ "$STRICT" = 0 ] || exit 1
    exit 0
fi

echo "host: $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg); $ROUNDS rounds of: ${active[*]}; mode gap factor $MODE_GAP"

# ---- the rounds ----

# measure FUNC: run one tool (in this shell, so that the cleanup trap sees its server) and set
# VALUE to its result, or to "nan" when it failed (saying why)
measure() {
    VALUE=nan
    if "$1" >"$T/value" 2>"$T/err" && [[ $(<"$T/value") =~ ^[0-9]+([.][0-9]*)?([eE][-+]?[0-9]+)?$ ]]; then
        VALUE=$(<"$T/value")
    else
        echo "  round $r, $1 failed: $(tail -n 1 "$T/err" 2>/dev/null)"
    fi
}

for r in $(seq "$ROUNDS"); do
    line="round $r/$ROUNDS:"
    for p in "${active[@]}"; do
        x2=""
        if [ $((r % 2)) = 1 ]; then
            order="commbench first"
            measure "cb_$p"; x=$VALUE
            if [ "$p" = tcp ]; then measure cb_tcp_np; x2=$VALUE; fi
            measure "plain_$p"; y=$VALUE
        else
            order="plain first"
            measure "plain_$p"; y=$VALUE
            measure "cb_$p"; x=$VALUE
            if [ "$p" = tcp ]; then measure cb_tcp_np; x2=$VALUE; fi
        fi
        echo "$r|$order|$x|$y|$x2" >>"$T/$p.dat"
        line+=" $(printf '%s %.4g/%.4g us' "$p" "$x" "$y")"
    done
    echo "$line"
done

# ---- the report ----

python3 - "$MODE_GAP" "$T" "${active[@]}" <<'PY'
import math, os, statistics, sys

gap = float(sys.argv[1])
tmp = sys.argv[2]
PLAIN = {
    "mpi": "plain MPI loop (benches/mpi_pingpong.c)",
    "tcp": "NPtcp (best of its repetitions' averages)",
    "shm": "cache-line hand-off (benches/handoff.c)",
    "ofi": "fi_pingpong",
    "ucx": "ucx_perftest",
}
TARGET = {"mpi": 1.05, "tcp": 1.0}


def num(s):
    try:
        v = float(s)
    except ValueError:
        return None
    return v if math.isfinite(v) and v > 0 else None


def find_modes(values):
    """Groups of the sorted values; a gap above the factor `gap` starts a new group."""
    groups = []
    for v in sorted(values):
        if groups and math.log(v) - math.log(groups[-1][-1]) <= math.log(gap):
            groups[-1].append(v)
        else:
            groups.append([v])
    return groups


def mode_of(v, groups):
    for i, g in enumerate(groups):
        if g[0] <= v <= g[-1]:
            return i + 1
    return None


def med(xs):
    return statistics.median(xs) if xs else None


def fmt(v, digits=3):
    return "-" if v is None else f"{v:.{digits}f}"


def ratios(rounds, key, groups):
    """(all ratios, same-mode ratios) of rounds[key] / plain over rounds with both values."""
    every, same = [], []
    for rd in rounds:
        x, y = rd[key], rd["y"]
        if x is None or y is None:
            continue
        every.append(x / y)
        if mode_of(x, groups) == mode_of(y, groups):
            same.append(x / y)
    return every, same


def ratio_line(label, every, same):
    if not every:
        return f"{label}no round measured both tools"
    return (f"{label}{fmt(med(every))} over all rounds ({len(every)}), "
            f"{fmt(med(same))} over same-mode rounds ({len(same)}); "
            f"min {fmt(min(every))}, max {fmt(max(every))}")


summary = []
for pair in sys.argv[3:]:
    rounds = []
    with open(os.path.join(tmp, pair + ".dat")) as f:
        for line in f:
            r, order, x, y, x2 = line.rstrip("\n").split("|")
            rounds.append({"r": int(r), "order": order, "x": num(x), "y": num(y), "x2": num(x2)})
    values = [rd[k] for rd in rounds for k in ("x", "y", "x2") if rd[k] is not None]
    groups = find_modes(values)

    print()
    print(f"== {pair}: commbench {pair} backend vs {PLAIN[pair]}, 8-byte one-way time")
    per_mode = {i + 1: 0 for i in range(len(groups))}
    mixed = 0
    for rd in rounds:
        x, y = rd["x"], rd["y"]
        head = f"round {rd['r']} ({rd['order']}): "
        if x is None or y is None:
            failed = " and ".join(n for n, v in (("commbench", x), ("plain", y)) if v is None)
            print(head + f"failed ({failed})")
            continue
        a, b = mode_of(x, groups), mode_of(y, groups)
        if a == b:
            per_mode[a] += 1
        else:
            mixed += 1
        print(head + f"commbench {x:.4f} us, plain {y:.4f} us, ratio {x / y:.3f}, mode {a}/{b}")
        if pair == "tcp":
            x2 = rd["x2"]
            if x2 is None:
                print("    with NetPIPE's statistic: commbench failed")
            else:
                print(f"    with NetPIPE's statistic: commbench {x2:.4f} us, ratio {x2 / y:.3f}, "
                      f"mode {mode_of(x2, groups)}/{b}")
    if groups:
        modes_text = ", ".join(
            f"mode {i} (around {med(g):.4g} us): {per_mode[i]} rounds" for i, g in enumerate(groups, 1))
        print(f"rounds per mode: {modes_text}; mixed: {mixed} rounds")
    every, same = ratios(rounds, "x", groups)
    print(ratio_line("median of per-round ratios: ", every, same))
    summary.append((pair, f"{len(every)}/{len(rounds)}", len(same), med(same), med(every),
                    f"<= {TARGET[pair]}" if pair in TARGET else "none (informative)"))
    if pair == "tcp":
        every2, same2 = ratios(rounds, "x2", groups)
        print(ratio_line("median of per-round ratios with NetPIPE's statistic: ", every2, same2))
        summary.append(("tcp (NetPIPE's statistic)", f"{len(every2)}/{len(rounds)}", len(same2), med(same2), med(every2),
                        "none (the median decides)"))

print()
print("summary: median of per-round ratios commbench / plain over all rounds (judged against the")
print("target); over same-mode rounds beside it (the two agree when the machine's states did not decide)")
head = ("pair", "rounds measured", "same-mode", "ratio (all)", "ratio (same-mode)", "target")
rows = [head] + [(p, str(n), str(s), fmt(b), fmt(a), t) for p, n, s, a, b, t in summary]
widths = [max(len(row[i]) for row in rows) for i in range(len(head))]
for row in rows:
    print("  " + "  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip())
# Which pairs measured no round with both tools (for STRICT=1).
with open(os.path.join(tmp, "unmeasured"), "w") as f:
    for p, n, *_ in summary:
        if n.startswith("0/"):
            f.write(p + "\n")
PY
if [ "$STRICT" = 1 ]; then
    if [ ${#skipped[@]} -gt 0 ]; then
        echo "STRICT: skipped: ${skipped[*]}" >&2
        exit 1
    fi
    if [ -s "$T/unmeasured" ]; then
        echo "STRICT: no round measured both tools for: $(tr '\n' ' ' <"$T/unmeasured")" >&2
        exit 1
    fi
fi
