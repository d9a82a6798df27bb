#!/usr/bin/env bash
# Side-by-side check of the tcp backend against NetPIPE (NPtcp) and sockperf on loopback.
#
#   cargo build --release && bash benches/compare_tcp.sh [ROUNDS]
#
# Needs the Debian packages netpipe-tcp and sockperf. Each round runs every tool once, in the
# same order, so all of them see the same machine; the script prints each round and then the
# median over rounds and the ratios the tcp backend is judged by:
#   8-byte one-way time: blocking <= NPtcp, --poll <= NPtcp / 2;
#   4 MiB ping-pong bandwidth >= 0.9 x NPtcp's.
# Each round measures the tools three times: placed by the scheduler; pinned alike to two CPUs
# (commbench --cpus 0,1; NPtcp under taskset), because on a small host the scheduler sometimes
# puts both ends of a free-running ping-pong on one CPU, which changes the 8-byte time
# several-fold; and both ends on one CPU (commbench --cpus 0), where no cross-CPU wake-up
# (an interrupt, and on a virtual machine an exit to the host) hides the software path: the
# steadiest like-for-like comparison of the two tools' own costs.
# NPtcp reports the best of its repetitions' averages (half a round trip); sockperf's smallest
# message is 14 bytes and it reports the median half round trip; commbench reports the median
# of its trials (seed 000), here with npp calculated from the timer resolution.
set -euo pipefail
cd "$(dirname "$0")/.."
B=${COMMBENCH:-target/release/commbench}
ROUNDS=${1:-3}
T=$(mktemp -d)
trap 'pkill -f "NPtcp -l" 2>/dev/null || true; pkill -f "sockperf server" 2>/dev/null || true; rm -rf "$T"' EXIT
for t in NPtcp sockperf python3; do command -v $t >/dev/null || { echo "needs $t"; exit 1; }; done
[ -x "$B" ] || { echo "build first: cargo build --release"; exit 1; }

median_of() { python3 -c 'import sys,statistics; print(statistics.median(float(x) for x in sys.argv[1:]))' "$@"; }
cb() { # cb OUT.json ARGS... -> median one-way us, median rate MB/s, minimum one-way us, best rate MB/s
    local out=$1; shift
    "$B" "$@" --samples 1000000 --quiet --json "$out" >/dev/null 2>&1
    python3 -c 'import json,sys; p=json.load(open(sys.argv[1]))["points"][-1]; print(p["one_way_us"]["median"], p["rate_mb_s"]["median"], p["one_way_us"]["min"], p["rate_mb_s"]["min"])' "$out"
}
nptcp() { # nptcp SIZE [pin|cpu0] -> one-way us and MB/s (10^6 B/s, from the time: NetPIPE's Mbps are 2^20 bit/s)
    # pin: the transmitter (which times, like commbench's rank 0) on CPU 0, the receiver on 1;
    # cpu0: both on CPU 0
    local s=$1 tx=() rx=()
    case "${2:-}" in
        pin) tx=(taskset -c 0); rx=(taskset -c 1) ;;
        cpu0) tx=(taskset -c 0); rx=(taskset -c 0) ;;
    esac
    "${rx[@]}" NPtcp -l "$s" -u "$s" -p 0 >/dev/null 2>&1 &
    sleep 0.3
    "${tx[@]}" NPtcp -h 127.0.0.1 -l "$s" -u "$s" -p 0 -o "$T/np.out" >/dev/null 2>&1
    wait
    awk '{ printf "%.4f %.2f\n", $3*1e6, $1/$3/1e6 }' "$T/np.out"
}
placed() { # placed CPUS NPTCP-PLACEMENT NAME -> 8 B one-way us and 4 MiB MB/s, commbench's
    # medians (--cpus CPUS) and NPtcp's (nptcp SIZE NPTCP-PLACEMENT): cb8 np8 cb4 np4
    local a n c4 n4
    read -r a _ _ _ < <(cb "$T/$3-8.json" pingpong --backend tcp --cpus "$1" --sizes 8 --trials 20000)
    read -r n _ < <(nptcp 8 "$2")
    read -r _ c4 _ _ < <(cb "$T/$3-4m.json" pingpong --backend tcp --cpus "$1" --sizes 4M --trials 200 --warmup 10)
    read -r _ n4 < <(nptcp 4194304 "$2")
    echo "$a $n $c4 $n4"
}
sock() { # 14-byte median one-way us
    sockperf server --tcp -i 127.0.0.1 -p 11111 >/dev/null 2>&1 &
    local pid=$!
    sleep 0.3
    sockperf ping-pong --tcp -i 127.0.0.1 -p 11111 -m 14 -t 3 2>&1 | awk '/percentile 50.000/ { print $NF }'
    kill $pid 2>/dev/null; wait $pid 2>/dev/null || true
}

# NetPIPE's figure is the best of its repetitions' averages. Beside commbench's median
# (seed 000), the script also measures NetPIPE's statistic with commbench: the best of 30 trials
# of npp = 1000 ping-pongs each for 8 bytes, and the best trial for 4 MiB.
declare -a cbb cbbn cbp np8 sp cb4 cb4b np4 pcb pnp pcb4 pnp4 ocb onp ocb4 onp4
for r in $(seq "$ROUNDS"); do
    read -r a _ _ _ < <(cb "$T/b.json" pingpong --backend tcp --sizes 8 --trials 20000)
    read -r _ _ an _ < <(cb "$T/bn.json" pingpong --backend tcp --sizes 8 --npp 1000 --trials 30)
    read -r b _ _ _ < <(cb "$T/p.json" pingpong --backend tcp --poll --sizes 8 --trials 20000)
    read -r n _ < <(nptcp 8)
    s=$(sock)
    read -r _ c4 _ c4b < <(cb "$T/b4.json" pingpong --backend tcp --sizes 4M --trials 200 --warmup 10)
    read -r _ n4 < <(nptcp 4194304)
    # The same placement for both tools: source/transmitter on CPU 0, dest/receiver on CPU 1;
    # then both ends on CPU 0.
    read -r pa pn pc4 pn4 < <(placed 0,1 pin pinned)
    read -r oa on oc4 on4 < <(placed 0 cpu0 onecpu)
    echo "round $r: 8 B one-way us: commbench blocking median $a, best-of-averages $an, poll median $b, NPtcp $n, sockperf(14 B) $s | 4 MiB MB/s: commbench median $c4, best $c4b, NPtcp $n4 | pinned 0,1: 8 B commbench $pa NPtcp $pn, 4 MiB MB/s commbench $pc4 NPtcp $pn4 | one CPU: 8 B commbench $oa NPtcp $on, 4 MiB MB/s commbench $oc4 NPtcp $on4"
    cbb+=("$a"); cbbn+=("$an"); cbp+=("$b"); np8+=("$n"); sp+=("$s"); cb4+=("$c4"); cb4b+=("$c4b"); np4+=("$n4")
    pcb+=("$pa"); pnp+=("$pn"); pcb4+=("$pc4"); pnp4+=("$pn4")
    ocb+=("$oa"); onp+=("$on"); ocb4+=("$oc4"); onp4+=("$on4")
done
mb=$(median_of "${cbb[@]}"); mbn=$(median_of "${cbbn[@]}"); mp=$(median_of "${cbp[@]}"); mn=$(median_of "${np8[@]}")
ms=$(median_of "${sp[@]}"); mc4=$(median_of "${cb4[@]}"); mc4b=$(median_of "${cb4b[@]}"); mn4=$(median_of "${np4[@]}")
mpa=$(median_of "${pcb[@]}"); mpn=$(median_of "${pnp[@]}"); mpc4=$(median_of "${pcb4[@]}"); mpn4=$(median_of "${pnp4[@]}")
moa=$(median_of "${ocb[@]}"); mon=$(median_of "${onp[@]}"); moc4=$(median_of "${ocb4[@]}"); mon4=$(median_of "${onp4[@]}")
echo "median over $ROUNDS rounds:"
echo "  8 B one-way: commbench blocking median $mb us (best of averages $mbn us), commbench --poll median $mp us, NPtcp $mn us, sockperf (14 B) median $ms us"
python3 - "$mb" "$mbn" "$mp" "$mn" "$mc4" "$mc4b" "$mn4" "$mpa" "$mpn" "$mpc4" "$mpn4" "$moa" "$mon" "$moc4" "$mon4" <<'PY'
import sys
b, bn, p, n, c4, c4b, n4, pa, pn, pc4, pn4, oa, on, oc4, on4 = map(float, sys.argv[1:])
print(f"  blocking / NPtcp = {b/n:.3f} by the median, {bn/n:.3f} by NetPIPE's statistic (target <= 1)")
print(f"  NPtcp / poll median = {n/p:.2f} (target >= 2)")
print(f"  4 MiB: commbench median {c4:.0f} MB/s, best {c4b:.0f} MB/s, NPtcp {n4:.0f} MB/s: ratio {c4/n4:.3f} by the median, {c4b/n4:.3f} by NetPIPE's statistic (target >= 0.9)")
print(f"  pinned (CPU 0 and 1 for both tools): 8 B blocking commbench median {pa} us, NPtcp {pn} us: blocking / NPtcp = {pa/pn:.3f}; 4 MiB commbench median {pc4:.0f} MB/s, NPtcp {pn4:.0f} MB/s: {pc4/pn4:.3f}")
print(f"  one CPU (both ends of both tools on CPU 0): 8 B blocking commbench median {oa} us, NPtcp {on} us: blocking / NPtcp = {oa/on:.3f}; 4 MiB commbench median {oc4:.0f} MB/s, NPtcp {on4:.0f} MB/s: {oc4/on4:.3f}")
PY
