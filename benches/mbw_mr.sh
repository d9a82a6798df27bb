#!/usr/bin/env bash
# commbench's pairs streaming at once (`bandwidth --pairs K`) against OSU's osu_mbw_mr loop
# (benches/osu_mbw_mr.c), through the same MPI with the same placement, in interleaved rounds:
# the message rate at 8 bytes and the bandwidth at 1 MiB (docs/pairs-figures.md).
#
#   cargo build --release --features mpi && bash benches/mbw_mr.sh [ROUNDS]
#   PAIRS=2 HOSTS=netns TRIALS=5 bash benches/mbw_mr.sh 61   (as root: two hosts, see below;
#                                          four ranks on two cores need tens of rounds)
#   COMMBENCH=path/to/commbench ...                    (default target/release/commbench)
#
# HOSTS=local (default): `mpirun -np 2K --bind-to core` on this host, MPI's own transports.
# HOSTS=netns: two network namespaces cbmr-h0 and cbmr-h1 joined by a veth pair (10.88.0.1 and
#   10.88.0.2), each with its own host name (h0, h1) in a UTS namespace of its own; mpirun runs
#   in cbmr-h0 with `--host h0:K,h1:K` and a launch agent that starts Open MPI's daemon in the
#   namespace of the host it is given, so ranks 0..K-1 run on h0 and K..2K-1 on h1 (every pair
#   crosses, OSU's block placement), and MPI sends over tcp (`--mca btl tcp,self` on the veth).
#   The namespaces are removed at the end.
#
# ROUNDS (default 5): each round measures 8 B, then 1 MiB, each with both tools back to back,
# the order alternating between rounds so that drift favours neither. Both stream the same
# windows: with OSU's counts I = 100, S = 10 at 8 B (20 and 2 at 1 MiB),
#   osu   osu_mbw_mr -W 64 -i (TRIALS x I) -x S SIZE: one timed loop of TRIALS x I windows;
#   cb    commbench bandwidth --backend mpi --pairs K --window 64 --buffers single (one send
#         and one receive buffer, as OSU's) --npp I --trials TRIALS (default 20) --warmup S:
#         TRIALS samples of I windows each (one of OSU's default loops per sample).
# The figures, each tool's own statistic: OSU 7.4's mean-time rate over its one loop (the
# pairs' bytes or messages over the senders' mean time); commbench's mean_time aggregate, the
# median over its samples of the same formula, and beside it the same formula over all its
# samples together (every pair's total time), OSU's statistic. The summary gives the per-round
# ratios commbench / osu_mbw_mr, by commbench's median and by its whole-run figure, their
# median over the rounds, and that median's distribution-free 95% interval (order statistics,
# from 6 rounds) with whether it tells the tools within 5% of each other.
set -euo pipefail
export LC_ALL=C
B=$(realpath -m -- "${COMMBENCH:-$(dirname "$0")/../target/release/commbench}")
cd "$(dirname "$0")/.."

ROUNDS=${1:-5}
PAIRS=${PAIRS:-1}
HOSTS=${HOSTS:-local}
TRIALS=${TRIALS:-20}
LIMIT=300 # seconds any one run may take before it counts as failed
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

die() { echo "mbw_mr: $*" >&2; exit "${2:-1}"; }
[[ $ROUNDS =~ ^[1-9][0-9]*$ ]] || die "usage: $0 [ROUNDS] (a positive integer, default 5)" 2
[[ $PAIRS =~ ^[1-9][0-9]*$ ]] || die "PAIRS must be a positive integer (got '$PAIRS')" 2
[[ $TRIALS =~ ^[1-9][0-9]*$ ]] || die "TRIALS must be a positive integer (got '$TRIALS')" 2
case $HOSTS in local | netns) ;; *) die "HOSTS is local or netns (got '$HOSTS')" 2 ;; esac
for t in python3 mpicc mpirun; do command -v "$t" >/dev/null || die "needs $t"; done
[ -x "$B" ] || die "build first: cargo build --release --features mpi"

T=$(mktemp -d)
NS=cbmr
netns_down() {
    ip netns del "$NS-h0" 2>/dev/null || true
    ip netns del "$NS-h1" 2>/dev/null || true
    rm -rf "/etc/netns/$NS-h0" "/etc/netns/$NS-h1"
}
cleanup() {
    [ "$HOSTS" = netns ] && netns_down
    rm -rf "$T"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
mpicc -O2 -o "$T/osu_mbw_mr" benches/osu_mbw_mr.c
NP=$((2 * PAIRS))

# The launch agent Open MPI's rsh launcher calls as `agent HOST COMMAND`: the daemon of HOST
# starts in that host's network namespace, under a UTS namespace named after it.
netns_up() {
    [ "$(id -u)" = 0 ] || die "HOSTS=netns creates network namespaces: run as root"
    for t in ip unshare; do command -v "$t" >/dev/null || die "needs $t (iproute2, util-linux)"; done
    netns_down
    ip netns add "$NS-h0"
    ip netns add "$NS-h1"
    ip link add "$NS-v0" netns "$NS-h0" type veth peer name "$NS-v1" netns "$NS-h1"
    for h in 0 1; do
        ip -n "$NS-h$h" addr add "10.88.0.$((h + 1))/24" dev "$NS-v$h"
        ip -n "$NS-h$h" link set "$NS-v$h" up
        ip -n "$NS-h$h" link set lo up
        mkdir -p "/etc/netns/$NS-h$h"
        printf '127.0.0.1 localhost\n10.88.0.1 h0\n10.88.0.2 h1\n' >"/etc/netns/$NS-h$h/hosts"
    done
    cat >"$T/agent" <<EOF
#!/bin/sh
# Open MPI's rsh launcher: \$1 the host, the rest the command to run there.
host=\$1
shift
exec ip netns exec "$NS-\$host" unshare --uts sh -c 'hostname "\$0" && exec sh -c "\$1"' "\$host" "\$*"
EOF
    chmod +x "$T/agent"
}

[ "$HOSTS" = netns ] && netns_up

# The mpirun line of both tools. Under netns, mpirun runs on h0 (its UTS name too), and Open
# MPI starts h0's ranks itself (h0 is its own address) and h1's through the agent.
if [ "$HOSTS" = local ]; then
    LAUNCH=(mpirun -np "$NP" --bind-to core)
else
    LAUNCH=(ip netns exec "$NS-h0" unshare --uts sh -c 'hostname h0 && exec "$@"' sh
        mpirun -np "$NP" --host "h0:$PAIRS,h1:$PAIRS" --mca plm_rsh_agent "$T/agent"
        --mca btl tcp,self --mca btl_tcp_if_include 10.88.0.0/24
        --mca oob_tcp_if_include 10.88.0.0/24 --bind-to none --mca mpi_yield_when_idle 1)
fi

counts() { # SIZE -> "ITERATIONS SKIP", OSU's
    if [ "$1" -gt 8192 ]; then echo "20 2"; else echo "100 10"; fi
}

# osu SIZE: "rate rate" (OSU 7.4's mean-time figure, twice: it has one statistic; msg/s at
# 8 B, MB/s above)
osu() {
    local it skip
    read -r it skip <<<"$(counts "$1")"
    timeout "$LIMIT" "${LAUNCH[@]}" "$T/osu_mbw_mr" -W 64 -i $((TRIALS * it)) -x "$skip" "$1" \
        </dev/null | awk -v s="$1" '!/^#/ { if (s == 8) print $6, $6; else print $5, $5 }'
}

# cb SIZE: "median whole": commbench's mean_time aggregate, the median over its samples and
# the same formula over all its samples together
cb() {
    local it skip json=$T/cb.json
    read -r it skip <<<"$(counts "$1")"
    rm -f "$json"
    timeout "$LIMIT" "${LAUNCH[@]}" "$B" bandwidth --backend mpi --pairs "$PAIRS" --window 64 \
        --buffers single --sizes "$1" --npp "$it" --warmup "$skip" --trials "$TRIALS" \
        --samples 100000 --quiet --json "$json" </dev/null >/dev/null || return 1
    python3 - "$json" "$1" <<'PY'
import json, sys
point = json.load(open(sys.argv[1]))["points"][-1]
q, message = point["pairs"], sys.argv[2] == "8"
median = next(a for a in q["aggregates"] if a["name"] == "mean_time")
median = median["messages_per_s"]["median"] if message else median["mb_s"]["median"]
per_sample = q["messages_per_sample"] if message else q["bytes_per_sample"]
times = point["pair_trial_ns"]
mean_total_s = sum(sum(t) for t in times) / len(times) / 1e9
whole = len(times) * per_sample * len(times[0]) / mean_total_s
print(median, whole if message else whole / 1e6)
PY
}

echo "host: $(nproc) CPUs, $(lscpu | awk -F: '/Model name/ { gsub(/^ +/, "", $2); print $2; exit }'), load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "$ROUNDS rounds, $PAIRS pair(s), hosts $HOSTS: ${LAUNCH[*]}"
echo "figures: message rate (msg/s) at 8 B, bandwidth (MB/s) at 1 MiB, OSU 7.4's mean-time formula; commbench's median (whole run)"
: >"$T/data"
for r in $(seq "$ROUNDS"); do
    for s in 8 1048576; do
        order=(osu cb)
        [ $((r % 2)) = 0 ] && order=(cb osu)
        line="round $r/$ROUNDS $s B:"
        for t in "${order[@]}"; do
            if v=$("$t" "$s" 2>"$T/err") && [[ $v =~ ^[0-9.eE+-]+\ [0-9.eE+-]+$ ]]; then
                read -r mean span <<<"$v"
            else
                mean=nan span=nan
                echo "  round $r $s $t failed: $(grep -m 1 -i error "$T/err" || tail -n 1 "$T/err")"
            fi
            echo "$r $s $t $mean $span" >>"$T/data"
            if [ "$t" = osu ]; then
                line+=" $(printf 'osu %.5g' "$mean")"
            else
                line+=" $(printf 'cb %.5g (whole run %.5g)' "$mean" "$span")"
            fi
        done
        echo "$line"
    done
done

python3 - "$T/data" <<'PY'
import math, statistics, sys

val = {}
for r, s, t, mean, span in (l.split() for l in open(sys.argv[1])):
    val[(int(r), int(s), t)] = (float(mean), float(span))
rounds = sorted({k[0] for k in val})


def ok(x):
    return x is not None and math.isfinite(x) and x > 0


def interval(xs):
    """The distribution-free 95% interval of the median of xs: the order statistics at ranks j
    and n-1-j (0-based) for the largest j with P(Binomial(n, 1/2) < j) <= 2.5%; None below 6."""
    n = len(xs)
    if n < 6:
        return None
    j, below = 0, 0.0
    while True:
        below_next = below + math.comb(n, j) / 2**n
        if below_next > 0.025:
            break
        below, j = below_next, j + 1
    xs = sorted(xs)
    return xs[j], xs[n - 1 - j]


def verdict(med, ci):
    """Whether the rounds tell that the tools are within 5% of each other."""
    where = "within" if 0.95 <= med <= 1.05 else "outside"
    if ci is None:
        return f"the median is {where} 5%; too few rounds for an interval (6 or more)"
    lo, hi = ci
    if 0.95 <= lo and hi <= 1.05:
        return "within 5%"
    if hi < 0.95 or lo > 1.05:
        return "NOT within 5%"
    return (f"the median is {where} 5%, but the interval reaches past 5% on "
            + ("both sides" if lo < 0.95 and hi > 1.05 else "one side")
            + ": more rounds or a quieter host would tell")


for s, what in ((8, "message rate at 8 B"), (1048576, "bandwidth at 1 MiB")):
    for i, fig in ((0, "commbench's median"), (1, "commbench's whole run")):
        ratios = []
        for r in rounds:
            a, b = val.get((r, s, "cb"), (None, None))[i], val.get((r, s, "osu"), (None, None))[0]
            ratios.append(a / b if ok(a) and ok(b) else None)
        good = [x for x in ratios if x is not None]
        med = statistics.median(good) if good else float("nan")
        cells = " ".join(f"{x:.3f}" if x is not None else "-" for x in ratios)
        print(f"{what}, {fig}: per-round ratios commbench / osu_mbw_mr {cells}; median {med:.3f}")
        ci = interval(good)
        ci_text = f"{ci[0]:.3f}..{ci[1]:.3f}" if ci else "-"
        print(f"  median's 95% interval {ci_text}: {verdict(med, ci)}")
PY
