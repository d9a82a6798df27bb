#!/usr/bin/env bash
# Side-by-side check of the ucx backend against UCX's own ucx_perftest, on the same transports.
#
#   cargo build --release --features ucx && bash benches/compare_ucx.sh [ROUNDS]
#
# Needs ucx-utils (ucx_perftest) and python3; COMMBENCH names another binary (it must be built
# with --features ucx), TRANSPORTS a space-separated list of UCX_TLS values (default:
# "posix,self tcp") and UCX_PERFTEST_PORT ucx_perftest's out-of-band TCP port (default: its own,
# 13337).
#
# Like with like. Both tools use the UCP tag API (ucp_tag_send_nbx / ucp_tag_recv_nbx matching
# one tag, contiguous host buffers, ucp_worker_progress polled) of the same libucp, the same UCX_TLS
# (commbench --ucx-tls T, which sets it in the UCP configuration; ucx_perftest under UCX_TLS=T)
# and otherwise UCX's defaults, so both get the same lanes and protocols (eager below the
# rendezvous threshold, rendezvous at 4 MiB). Both are pinned alike: commbench's rank 0 and
# ucx_perftest's client on CPU 0, rank 1 and the server on CPU 1 (commbench --cpus 0,1;
# ucx_perftest under taskset). Each round runs both tools once per transport list for 8 bytes
# and for 4 MiB (4194304 bytes), interleaved, commbench first in odd rounds and ucx_perftest
# first in even ones, so both see the same machine.
#
# What ucx_perftest does (UCX 1.13.1, src/tools/perf/):
#   The server takes every test option from the client over its socket (perftest.c,
#   setup_sock_rte_p2p) and is group index 0, the client index 1 (sock_rte_group_index); only
#   the client prints results. Times come from ucx_perf_update (lib/libperf_int.h), which stamps
#   every iteration and keeps the last 2048 iteration times (TIMING_QUEUE_SIZE).
#   tag_lat (lib/ucp_tests.cc, run_pingpong): the server sends then receives, the client
#   receives then sends; each waits for its receive before going on (window 1, perftest.c
#   tests[]). ucx_perf_calc_result (lib/libperf.c) divides by factor = 2 for ping-pong tests:
#   its latencies are ONE-WAY times, half a round trip.
#   tag_bw (run_stream_uni): the client sends, the server receives. send() waits in
#   wait_send_window until fewer than -O sends are outstanding, then posts ucp_tag_send_nbx (with
#   UCP_OP_ATTR_FLAG_MULTI_SEND); recv() waits in wait_recv_window until fewer than -O receives
#   are outstanding, then posts ucp_tag_recv_nbx without waiting for it. Every send is from the
#   one send buffer and every receive into the one receive buffer. -O 0, the default, means the
#   test's window (adjust_test_params in perftest_params.c): 32 for tag_bw, so up to 32 sends
#   of the same buffer in flight and 32 receives posted into one buffer. After the loop the
#   sender flushes the worker (ucp_worker_flush), then reads the clock; factor = 1.
#   Warm-up (ucx_perf_do_warmup, lib/libperf.c): the same loop in batches of 1, 2, 4, ...
#   iterations, a barrier after each, until -w iterations in all (default 10000) or 100 ms
#   (warmup_time, no option) have passed; the timed run follows.
#   Final: line (perftest_run.c, print_progress): iterations; latency 50.0%ile (the median of
#   the last 2048 iteration times / factor), average (time since the last 1-second progress
#   report / iterations since then / factor) and overall (whole timed loop / iterations /
#   factor), in us; bandwidth average and overall, bytes / elapsed x factor divided by
#   1024 x 1024 (MiB/s, though headed MB/s); message rate average and overall (iterations x
#   factor / elapsed, msg/s).
#
# What is compared, per transport list:
#   8 B one-way time: commbench pingpong's median (points[-1].one_way_us.median of --json, the
#     median over trials of npp round trips / 2) against ucx_perftest -t tag_lat's 50.0%ile
#     (the median of single round trips / 2), and commbench's mean (one_way_us.mean) against
#     ucx_perftest's overall mean, taken as 10^6 / its overall message rate, the same figure
#     with more digits than its 3-decimal latency. The "average" column is not used: it covers
#     only the time since the last progress report, the whole run only when that is under 1 s.
#     Target: commbench / ucx_perftest <= 1 (by the median).
#   4 MiB rate in MB/s (10^6 B/s): commbench bandwidth --window 1's median (rate_mb_s.median,
#     size / one-way time) and size / its mean one-way time against ucx_perftest -t tag_bw -O 1's
#     overall bandwidth x 1.048576 (MiB/s to MB/s), i.e. size / its mean time per message.
#     commbench's window of W gives each outstanding send its own buffer (64 MiB at W=16), a
#     different cache state from ucx_perftest's single buffer, so commbench streams with
#     --window 1 and ucx_perftest with -O 1: both move one 4 MiB buffer, one message in flight,
#     each receive posted after the last completed. Per message both senders wait for the
#     send's completion, which for a rendezvous send comes when the receiver has the data;
#     commbench's then also waits for an 8-byte acknowledgement (a few us against hundreds per
#     4 MiB message; it favours ucx_perftest).
#     Beside it (per round) ucx_perftest's size / 50.0%ile, its median rate per message.
#     Target: commbench / ucx_perftest >= 1 (by the median).
#     For information, each round also runs tag_bw at its default window (-O 0: 32 sends of the
#     one buffer in flight, 32 receives posted into one buffer), which commbench's kernel, one
#     buffer per outstanding operation, does not reproduce; its ratio is printed, not a target.
# Counts: 8 B, commbench --trials 20000 (npp from the timer resolution, after its default
# warm-up) and ucx_perftest -n 100000 with its default warm-up (-w 10000, or 100 ms): its mean
# then spans 100000 round trips (0.03 s on posix, 1 s on tcp on a 2-core host) and its median
# the last 2048, long after warm-up. 4 MiB, commbench --trials 200 --warmup 10 and ucx_perftest
# -n 1000 -w 10 (1 + 2 + 4 + 8 = 15 warm-up messages unless 100 ms pass first): its first
# messages of 4 MiB (first touch of the buffers, the rendezvous set-up) are outside the timed
# loop, and 1000 messages (0.25 s on posix, 0.7 s on tcp) keep one scheduler hiccup on two busy
# cores from weighing on its mean.
# Each round prints both tools' figures and the ratios; the end prints the median over rounds of
# each ratio, per transport list and size. The targets are printed, not enforced: the exit status
# is 0 when every run completed.
set -euo pipefail
cd "$(dirname "$0")/.."
B=${COMMBENCH:-target/release/commbench}
ROUNDS=${1:-3}
read -r -a TLS_LIST <<<"${TRANSPORTS:-posix,self tcp}"
PORT=${UCX_PERFTEST_PORT:-13337}
LIMIT=120 # seconds any one run may take before it counts as hung
T=$(mktemp -d)
srv="" CB="" UP=""
trap 'if [ -n "$srv" ]; then kill "$srv" 2>/dev/null || true; fi; rm -rf "$T"' EXIT
for t in ucx_perftest taskset timeout python3; do command -v $t >/dev/null || { echo "needs $t"; exit 1; }; done
[ -x "$B" ] || { echo "build first: cargo build --release --features ucx"; exit 1; }
"$B" pingpong --help 2>/dev/null | grep -q -- --ucx-tls || { echo "$B lacks the ucx backend: cargo build --release --features ucx"; exit 1; }
case "$ROUNDS" in '' | *[!0-9]* | 0) echo "ROUNDS must be a positive integer"; exit 2 ;; esac
case "$PORT" in '' | *[!0-9]*) echo "UCX_PERFTEST_PORT must be a port number"; exit 2 ;; esac
[ ${#TLS_LIST[@]} -gt 0 ] || { echo "TRANSPORTS names no transport list"; exit 2; }

fail() { # fail WHAT LOG...: say which run failed, show the end of its output, stop
    local what=$1; shift
    echo "failed: $what" >&2
    tail -n 20 "$@" >&2 || true
    exit 1
}
cb() { # cb TLS SIZE: sets CB to median one-way us, mean one-way us, median rate MB/s, size/mean
    local t=$1 s=$2 args
    case "$s" in
        8) args=(pingpong --trials 20000) ;;
        *) args=(bandwidth --window 1 --trials 200 --warmup 10) ;;
    esac
    timeout -k 10 "$LIMIT" "$B" "${args[@]}" --backend ucx --ucx-tls "$t" --cpus 0,1 --sizes "$s" \
        --samples 1000000 --quiet --json "$T/cb.json" >"$T/cb.log" 2>&1 ||
        fail "commbench ${args[0]} --ucx-tls '$t' --sizes $s" "$T/cb.log"
    CB=$(python3 -c 'import json,sys; p=json.load(open(sys.argv[1]))["points"][-1]; o=p["one_way_us"]; print(o["median"], o["mean"], p["rate_mb_s"]["median"], p["size"]/o["mean"])' "$T/cb.json")
}
up() { # up TLS SIZE: sets UP to ucx_perftest's 50%ile one-way us, overall mean one-way us,
    #    overall MB/s (10^6 B/s) and size / 50%ile in MB/s
    #    (tag_bw with -O ${3:-1})
    local t=$1 s=$2 o=${3:-1} args rc=1 pause
    case "$s" in
        8) args=(-t tag_lat -s 8 -n 100000) ;;
        *) args=(-t tag_bw -s "$s" -n 1000 -w 10 -O "$o") ;;
    esac
    # The server takes its options from the client; they are given to both to read in the logs.
    UCX_TLS=$t taskset -c 1 timeout -k 10 "$LIMIT" ucx_perftest "${args[@]}" -p "$PORT" >"$T/srv.log" 2>&1 &
    srv=$!
    # The server listens on its port before it starts UCX; on a loaded host give it a few chances.
    for pause in 0.2 0.4 0.6 1 1.5 2; do
        sleep "$pause"
        rc=0
        UCX_TLS=$t taskset -c 0 timeout -k 10 "$LIMIT" ucx_perftest 127.0.0.1 "${args[@]}" -p "$PORT" >"$T/cli.log" 2>&1 || rc=$?
        [ "$rc" -eq 0 ] && break
        grep -q "connect() failed" "$T/cli.log" || break
        kill -0 "$srv" 2>/dev/null || break
    done
    if [ "$rc" -ne 0 ]; then
        kill "$srv" 2>/dev/null || true
        wait "$srv" 2>/dev/null || true
        srv=""
        fail "ucx_perftest ${args[*]} with UCX_TLS=$t (client, exit $rc; 124: no end within ${LIMIT}s)" "$T/cli.log" "$T/srv.log"
    fi
    wait "$srv" || { srv=""; fail "ucx_perftest ${args[*]} with UCX_TLS=$t (server)" "$T/srv.log"; }
    srv=""
    # Final: iterations, latency 50%ile, average, overall (us), bandwidth average, overall
    # (MiB/s), message rate average, overall (msg/s).
    UP=$(awk -v s="$s" '$1 == "Final:" && NF >= 9 && $2 > 0 {
            us = ($9 > 0) ? 1e6 / $9 : $5; if (s == 8) { mb = s / us } else { mb = $7 * 1.048576 }
            printf "%.6g %.6g %.6g %.6g\n", $3, us, mb, ($3 > 0) ? s / $3 : 0 }' "$T/cli.log")
    [ -n "$UP" ] || fail "ucx_perftest ${args[*]} with UCX_TLS=$t: no Final: line" "$T/cli.log" "$T/srv.log"
}
one() { # one TLS SIZE ROUND: both tools once (order by round), one row appended to rows.tsv;
    #     at 4 MiB also ucx_perftest's tag_bw at its default window, for information
    local t=$1 s=$2 r=$3 dflt="-"
    if [ $((r % 2)) -eq 1 ]; then
        cb "$t" "$s"; up "$t" "$s"
    else
        up "$t" "$s"; cb "$t" "$s"
    fi
    if [ "$s" != 8 ]; then
        local keep=$UP
        up "$t" "$s" 0
        dflt=$UP UP=$keep
    fi
    printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$r" "$t" "$s" "$CB" "$UP" "$dflt" >>"$T/rows.tsv"
    python3 - "$t" "$s" "$CB" "$UP" "$dflt" <<'PY'
import sys
t, s = sys.argv[1], int(sys.argv[2])
med, mean, rate, mrate = map(float, sys.argv[3].split())
p50, pmean, pmb, pmb50 = map(float, sys.argv[4].split())
if s == 8:
    print(f"  {t:12s} 8 B one-way us: commbench median {med:.3f} (mean {mean:.3f}),"
          f" ucx_perftest 50%ile {p50:.3f} (mean {pmean:.3f})"
          f" | commbench/ucx_perftest {med/p50:.3f} by the median, {mean/pmean:.3f} by the mean")
else:
    print(f"  {t:12s} 4 MiB MB/s: commbench median {rate:.1f} (size/mean {mrate:.1f}),"
          f" ucx_perftest {pmb:.1f} (size/50%ile {pmb50:.1f})"
          f" | commbench/ucx_perftest {rate/pmb:.3f} by the median, {mrate/pmb:.3f} by the mean")
    dmb = float(sys.argv[5].split()[2])
    print(f"  {'':12s}   beside it, tag_bw at its default window (-O 0: 32 in flight, one buffer)"
          f" {dmb:.1f} MB/s | commbench/that {rate/dmb:.3f} by the median")
PY
}

: >"$T/rows.tsv"
for r in $(seq "$ROUNDS"); do
    echo "round $r:"
    for t in "${TLS_LIST[@]}"; do
        one "$t" 8 "$r"
        one "$t" 4194304 "$r"
    done
done
echo "median over $ROUNDS rounds of the per-round ratios (commbench / ucx_perftest):"
python3 - "$T/rows.tsv" <<'PY'
import statistics as st, sys
rows = {}
for line in open(sys.argv[1]):
    r, t, s, c, u, d = line.rstrip("\n").split("\t")
    d = list(map(float, d.split())) if d != "-" else None
    rows.setdefault((t, int(s)), []).append((list(map(float, c.split())), list(map(float, u.split())), d))
dflt = {k: [d for _, _, d in v] for k, v in rows.items()}
rows = {k: [(c, u) for c, u, _ in v] for k, v in rows.items()}
for (t, s), v in rows.items():
    if s == 8:
        by_med = st.median(c[0] / u[0] for c, u in v)
        by_mean = st.median(c[1] / u[1] for c, u in v)
        ok = "met" if by_med <= 1 else "NOT met"
        print(f"  {t:12s} 8 B latency:      {by_med:.3f} by the medians, {by_mean:.3f} by the means"
              f" (target <= 1: {ok}); medians over rounds: commbench {st.median(c[0] for c, _ in v):.3f} us,"
              f" ucx_perftest 50%ile {st.median(u[0] for _, u in v):.3f} us")
    else:
        by_med = st.median(c[2] / u[2] for c, u in v)
        by_mean = st.median(c[3] / u[2] for c, u in v)
        ok = "met" if by_med >= 1 else "NOT met"
        print(f"  {t:12s} 4 MiB bandwidth:  {by_med:.3f} by commbench's median, {by_mean:.3f} by its mean"
              f" (target >= 1: {ok}); medians over rounds: commbench {st.median(c[2] for c, _ in v):.1f} MB/s,"
              f" ucx_perftest {st.median(u[2] for _, u in v):.1f} MB/s")
        by_dflt = st.median(c[2] / d[2] for (c, _), d in zip(v, dflt[(t, s)]))
        print(f"  {t:12s}   beside it, tag_bw at its default window (-O 0, 32 in flight): {by_dflt:.3f}"
              f" by commbench's median; ucx_perftest {st.median(d[2] for d in dflt[(t, s)]):.1f} MB/s")
PY
