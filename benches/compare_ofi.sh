#!/usr/bin/env bash
# Side-by-side check of the ofi (libfabric) backend against libfabric's own fi_pingpong, on the
# same provider.
#
#   cargo build --release --features ofi && bash benches/compare_ofi.sh [ROUNDS]
#
# Needs libfabric-bin (fi_pingpong) and python3; COMMBENCH names another binary (it must be built
# with --features ofi), PROVIDERS a space-separated list of providers (default: shm tcp;ofi_rxm)
# and FI_PINGPONG_PORT fi_pingpong's out-of-band TCP port (default: its own, 47592).
#
# Like with like. Both tools use the provider named, a tagged FI_EP_RDM endpoint (fi_pingpong
# -e rdm -m tagged), fi_tinject below the provider's inject size and fi_tsend from it up, polled
# completions. Both are pinned alike: the side that times (commbench's rank 0, fi_pingpong's
# client) on CPU 0, the side that echoes (rank 1, fi_pingpong's server) on CPU 1 (commbench
# --cpus 0,1; fi_pingpong under taskset). Each round runs both tools once per provider for
# 8 bytes and for 4 MiB (4194304 bytes), interleaved, commbench first in odd rounds and
# fi_pingpong first in even ones, so both see the same machine.
#
# What is compared, per size:
#   8 B one-way time: commbench's median (points[-1].one_way_us.median of --json) against
#     fi_pingpong's usec/xfer, which is the MEAN one-way time: its client's elapsed time over all
#     -I iterations (no warm-up) / (iterations x 2). It prints it with 2 decimals; where its
#     MB/sec column (size / that time, below) has more digits, the time is taken as
#     size / MB/sec. Beside it, the ratio with commbench's mean (one_way_us.mean), the same
#     statistic as fi_pingpong's.
#     Target: commbench / fi_pingpong <= 1 (by the median).
#   4 MiB rate in MB/s (10^6 B/s): commbench's median (rate_mb_s.median = size / one-way time)
#     against fi_pingpong's MB/sec, which is bytes / elapsed microseconds with bytes =
#     iterations x size x 2 (both directions of every round trip), i.e. size / mean one-way time:
#     the same quantity as commbench's, so no conversion is needed. Beside it, commbench's
#     size / mean one-way time. Target: commbench / fi_pingpong >= 1 (by the median).
# Counts: 8 B, commbench --trials 20000 (npp from the timer resolution, after its default
# warm-up) and fi_pingpong -I 100000; 4 MiB, commbench --trials 200 --warmup 10 and
# fi_pingpong -I 1000 (fi_pingpong has no warm-up, and its first ping-pongs of 4 MiB cost far
# more than the rest: more iterations keep them from weighing on its mean).
# Each round prints both tools' figures and the ratios; the end prints the median over rounds of
# each ratio, per provider and size. The targets are printed, not enforced: the exit status is 0
# when every run completed.
set -euo pipefail
cd "$(dirname "$0")/.."
B=${COMMBENCH:-target/release/commbench}
ROUNDS=${1:-3}
read -r -a PROVS <<<"${PROVIDERS:-shm tcp;ofi_rxm}"
PORT=${FI_PINGPONG_PORT:-47592}
LIMIT=120 # seconds any one run may take before it counts as hung
T=$(mktemp -d)
srv="" CB="" FI=""
trap 'if [ -n "$srv" ]; then kill "$srv" 2>/dev/null || true; fi; rm -rf "$T"' EXIT
for t in fi_pingpong taskset timeout python3; do command -v $t >/dev/null || { echo "needs $t"; exit 1; }; done
[ -x "$B" ] || { echo "build first: cargo build --release --features ofi"; exit 1; }
"$B" pingpong --help 2>/dev/null | grep -q -- --ofi-provider || { echo "$B lacks the ofi backend: cargo build --release --features ofi"; exit 1; }
case "$ROUNDS" in '' | *[!0-9]* | 0) echo "ROUNDS must be a positive integer"; exit 2 ;; esac

fail() { # fail WHAT LOG...: say which run failed, show the end of its output, stop
    local what=$1; shift
    echo "failed: $what" >&2
    tail -n 20 "$@" >&2 || true
    exit 1
}
cb() { # cb PROV SIZE: sets CB to median one-way us, mean one-way us, median rate MB/s, size/mean
    local p=$1 s=$2 extra=()
    case "$s" in 8) extra=(--trials 20000) ;; *) extra=(--trials 200 --warmup 10) ;; esac
    timeout -k 10 "$LIMIT" "$B" pingpong --backend ofi --ofi-provider "$p" --cpus 0,1 --sizes "$s" \
        "${extra[@]}" --samples 1000000 --quiet --json "$T/cb.json" >"$T/cb.log" 2>&1 ||
        fail "commbench --ofi-provider '$p' --sizes $s" "$T/cb.log"
    CB=$(python3 -c 'import json,sys; p=json.load(open(sys.argv[1]))["points"][-1]; o=p["one_way_us"]; print(o["median"], o["mean"], p["rate_mb_s"]["median"], p["size"]/o["mean"])' "$T/cb.json")
}
fip() { # fip PROV SIZE: sets FI to the client's usec/xfer (mean one-way us) and MB/sec
    local p=$1 s=$2 iters rc
    # fi_pingpong has no warm-up: its figure includes its first ping-pongs, which at 4 MiB cost
    # tens of milliseconds in all; 1000 iterations keep that share small.
    case "$s" in 8) iters=100000 ;; *) iters=1000 ;; esac
    local args=(-p "$p" -e rdm -m tagged -I "$iters" -S "$s")
    taskset -c 1 timeout -k 10 "$LIMIT" fi_pingpong "${args[@]}" -B "$PORT" >"$T/srv.log" 2>&1 &
    srv=$!
    # The server listens on its control port at once; on a loaded host give it a few chances.
    for _ in 1 2 3 4; do
        sleep 0.3
        rc=0
        taskset -c 0 timeout -k 10 "$LIMIT" fi_pingpong "${args[@]}" -P "$PORT" 127.0.0.1 >"$T/cli.log" 2>&1 || rc=$?
        [ "$rc" -eq 0 ] && break
        grep -q "failed to connect" "$T/cli.log" || break
    done
    if [ "$rc" -ne 0 ]; then
        kill "$srv" 2>/dev/null || true
        wait "$srv" 2>/dev/null || true
        srv=""
        fail "fi_pingpong -p '$p' -S $s (client, exit $rc; 124: no end within ${LIMIT}s)" "$T/cli.log" "$T/srv.log"
    fi
    wait "$srv" || { srv=""; fail "fi_pingpong -p '$p' -S $s (server)" "$T/srv.log"; }
    srv=""
    # bytes #sent #ack total time MB/sec usec/xfer Mxfers/sec; #ack "=N" when every message came
    # back. Both columns are size / mean one-way time printed with 2 decimals: take the one with
    # more digits (MB/sec for 8 bytes on shm) and derive the other from it.
    FI=$(awk -v s="$s" '$3 ~ /^=/ && NF == 8 { us = $7; mb = $6; if (mb >= us) us = s / mb; else mb = s / us; printf "%.6g %.6g\n", us, mb }' "$T/cli.log")
    [ -n "$FI" ] || fail "fi_pingpong -p '$p' -S $s: no result line with every message acknowledged" "$T/cli.log"
}
one() { # one PROV SIZE ROUND: both tools once (order by round), one row appended to rows.tsv
    local p=$1 s=$2 r=$3
    if [ $((r % 2)) -eq 1 ]; then
        cb "$p" "$s"; fip "$p" "$s"
    else
        fip "$p" "$s"; cb "$p" "$s"
    fi
    printf '%s\t%s\t%s\t%s\t%s\n' "$r" "$p" "$s" "$CB" "$FI" >>"$T/rows.tsv"
    python3 - "$p" "$s" "$CB" "$FI" <<'PY'
import sys
p, s = sys.argv[1], int(sys.argv[2])
med, mean, rate, mrate = map(float, sys.argv[3].split())
fus, fmb = map(float, sys.argv[4].split())
if s == 8:
    print(f"  {p:12s} 8 B one-way us: commbench median {med:.3f} (mean {mean:.3f}), fi_pingpong mean {fus:.3f}"
          f" | commbench/fi_pingpong {med/fus:.3f} by the median, {mean/fus:.3f} by the mean")
else:
    print(f"  {p:12s} 4 MiB MB/s: commbench median {rate:.1f} (size/mean {mrate:.1f}), fi_pingpong {fmb:.1f}"
          f" | commbench/fi_pingpong {rate/fmb:.3f} by the median, {mrate/fmb:.3f} by the mean")
PY
}

: >"$T/rows.tsv"
for r in $(seq "$ROUNDS"); do
    echo "round $r:"
    for p in "${PROVS[@]}"; do
        one "$p" 8 "$r"
        one "$p" 4194304 "$r"
    done
done
echo "median over $ROUNDS rounds of the per-round ratios (commbench / fi_pingpong):"
python3 - "$T/rows.tsv" <<'PY'
import statistics as st, sys
rows = {}
for line in open(sys.argv[1]):
    r, p, s, c, f = line.rstrip("\n").split("\t")
    rows.setdefault((p, int(s)), []).append((list(map(float, c.split())), list(map(float, f.split()))))
for (p, s), v in rows.items():
    if s == 8:
        by_med = st.median(c[0] / f[0] for c, f in v)
        by_mean = st.median(c[1] / f[0] for c, f in v)
        ok = "met" if by_med <= 1 else "NOT met"
        print(f"  {p:12s} 8 B latency:      {by_med:.3f} by commbench's median, {by_mean:.3f} by its mean"
              f" (target <= 1: {ok}); medians: commbench {st.median(c[0] for c, _ in v):.3f} us,"
              f" fi_pingpong {st.median(f[0] for _, f in v):.3f} us")
    else:
        by_med = st.median(c[2] / f[1] for c, f in v)
        by_mean = st.median(c[3] / f[1] for c, f in v)
        ok = "met" if by_med >= 1 else "NOT met"
        print(f"  {p:12s} 4 MiB bandwidth:  {by_med:.3f} by commbench's median, {by_mean:.3f} by its mean"
              f" (target >= 1: {ok}); medians: commbench {st.median(c[2] for c, _ in v):.1f} MB/s,"
              f" fi_pingpong {st.median(f[1] for _, f in v):.1f} MB/s")
PY
