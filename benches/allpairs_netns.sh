#!/usr/bin/env bash
# Four fake hosts on one Linux machine, one of them (or one link between two) made slow on
# purpose, for `commbench allpairs --backend tcp` to find. Run as root; docs/allpairs-netns.md
# has the set-ups, why each slowdown lands where it does, and measured runs.
#
#   benches/allpairs_netns.sh bridge [--slow-host K] [--delay 2ms | --rate 10mbit] [--burst 4kb]
#       h0..h3 on one Linux bridge (10.77.0.1..4/24); --slow-host K slows everything hK sends.
#   benches/allpairs_netns.sh mesh [--slow-pair A,B] [--delay 2ms | --rate 10mbit] [--burst 4kb]
#       a veth pair between every two hosts (10.78.k.0/30), each host 10.79.0.(h+1)/32 on lo
#       and host routes over the direct links; --slow-pair A,B slows both ends of that link.
#   benches/allpairs_netns.sh run [--command CMD] [--hosts 0,1,2,3] [--port P] [--limit SECS]
#                                 [--] [commbench options...]
#       rank R on host hosts[R] (its own UTS namespace, hostname hN), tcp backend, rendezvous at
#       the first host, a fresh random COMMBENCH_TOKEN; prints rank 0's output. CMD defaults to
#       allpairs; `--command pingpong --hosts 1,3` measures one pair.
#   benches/allpairs_netns.sh pings [COUNT]     ping RTT of every pair (needs ping)
#   benches/allpairs_netns.sh show              addresses, routes, qdiscs and delay rules
#   benches/allpairs_netns.sh down              remove everything this script created
#   benches/allpairs_netns.sh demo [--delay 2ms | --rate 10mbit] [--out DIR] [--] [options...]
#       bridge --slow-host 2, run, down; mesh --slow-pair 1,3, run, down; each run's text
#       summary, its JSON under DIR (default target/allpairs-netns) and, where this commbench
#       draws one, `commbench plot --kind matrix`. Options after --out go to commbench
#       (default: --sizes 8,64K --trials 50 --cpus 0, or --cpus 0,1,2,3 on 4 CPUs or more).
#
# COMMBENCH=path (default target/release/commbench). Everything lives in network namespaces
# named cbap-*: cbap-h0..cbap-h3 and, for the bridge, cbap-sw; the root namespace is not
# touched. State (delayer pids, rank logs) is kept in /run/cbap-allpairs.
#
# --delay uses netem (`tc qdisc ... netem delay D`) where the kernel has it. A kernel built
# without sch_netem (some virtual machines) gets the same delay from a small user-space
# delayer instead: iptables sends the packets leaving that interface to NFQUEUE, and the
# delayer (python3, standard library only) accepts each one D after it was queued. --rate
# uses tbf instead, which slows by bandwidth (size-dependent), not by a fixed delay.
set -euo pipefail

cd "$(dirname "$0")/.."
P=cbap
STATE=/run/cbap-allpairs
NH=4
B=${COMMBENCH:-target/release/commbench}

die() { echo "allpairs_netns: $*" >&2; exit 1; }
say() { echo "== $*"; }
ns() { echo "$P-h$1"; }

need_root() { [ "$(id -u)" = 0 ] || die "run as root (it creates network namespaces)"; }
need_tools() {
    local t
    for t in ip tc unshare timeout; do
        command -v "$t" >/dev/null || die "needs $t (apt-get install -y iproute2 util-linux coreutils)"
    done
}
ours_exist() { ip netns list 2>/dev/null | grep -q "^$P-"; }

# The delayer: binds NFQUEUE queue 0 of the namespace it runs in, with metadata only, and
# gives every packet the verdict ACCEPT DELAY seconds after it read it. The delay is the
# same for all, so packets leave in order and one batch verdict releases all that are due.
# Protocol: linux/netfilter/nfnetlink_queue.h.
DELAYER_PY=$(
    cat <<'PY'
import collections, errno, select, socket, struct, sys, time

def seconds(text):
    t = text.strip().lower()
    for suffix, scale in (("usec", 1e-6), ("msec", 1e-3), ("sec", 1.0), ("us", 1e-6), ("ms", 1e-3), ("s", 1.0)):
        if t.endswith(suffix):
            return float(t[: -len(suffix)]) * scale
    return float(t) * 1e-6  # tc's default unit is microseconds

QUEUE, DELAY = int(sys.argv[1]), seconds(sys.argv[2])
NETLINK_NETFILTER, NETLINK_NO_ENOBUFS, SO_RCVBUFFORCE = 12, 5, 33
SUBSYS_QUEUE, MSG_PACKET, MSG_CONFIG, MSG_VERDICT_BATCH = 3, 0, 2, 3
NLM_F_REQUEST, NLM_F_ACK, NLMSG_ERROR = 1, 4, 2
NF_ACCEPT, F_FAIL_OPEN, F_GSO = 1, 1, 4

sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_NETFILTER)
sock.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, 16 << 20)
sock.setsockopt(270, NETLINK_NO_ENOBUFS, 1)  # SOL_NETLINK
sock.bind((0, 0))

def attr(kind, data):
    n = 4 + len(data)
    return struct.pack("=HH", n, kind) + data + b"\0" * (-n % 4)

def message(kind, payload, flags):
    body = struct.pack("!BBH", socket.AF_UNSPEC, 0, QUEUE) + payload
    return struct.pack("=IHHII", 16 + len(body), (SUBSYS_QUEUE << 8) | kind, flags, 0, 0) + body

# Bind the queue, copy metadata only, a long queue, GSO packets whole, and accept rather than
# drop should the queue ever fill.
sock.send(message(MSG_CONFIG,
                  attr(1, struct.pack("!BBH", 1, 0, 0))
                  + attr(2, struct.pack("!IB", 0, 1))
                  + attr(3, struct.pack("!I", 65536))
                  + attr(5, struct.pack("!I", F_FAIL_OPEN | F_GSO))
                  + attr(4, struct.pack("!I", F_FAIL_OPEN | F_GSO)),
                  NLM_F_REQUEST | NLM_F_ACK))
reply = sock.recv(65536)
_, kind, _, _, _ = struct.unpack_from("=IHHII", reply)
if kind == NLMSG_ERROR:
    (err,) = struct.unpack_from("=i", reply, 16)
    if err != 0:
        sys.exit("delayer: binding queue %d failed: %s" % (QUEUE, errno.errorcode.get(-err, err)))
print("ready: queue %d, delay %g ms" % (QUEUE, DELAY * 1e3), flush=True)

pending = collections.deque()
while True:
    wait = None if not pending else max(0.0, pending[0][0] - time.monotonic())
    readable, _, _ = select.select([sock], [], [], wait)
    if readable:
        while True:
            try:
                data = sock.recv(1 << 20, socket.MSG_DONTWAIT)
            except BlockingIOError:
                break
            now = time.monotonic()
            off = 0
            while off + 16 <= len(data):
                length, kind, _, _, _ = struct.unpack_from("=IHHII", data, off)
                if length < 16:
                    break
                if kind == (SUBSYS_QUEUE << 8) | MSG_PACKET:
                    a = off + 20
                    while a + 4 <= off + length:
                        alen, atype = struct.unpack_from("=HH", data, a)
                        if alen < 4:
                            break
                        if atype & 0x3FFF == 1:  # NFQA_PACKET_HDR: packet id first
                            pending.append((now + DELAY, struct.unpack_from("!I", data, a + 4)[0]))
                            break
                        a += (alen + 3) & ~3
                off += (length + 3) & ~3
    now = time.monotonic()
    last = None
    while pending and pending[0][0] <= now:
        last = pending.popleft()[1]
    if last is not None:
        sock.send(message(MSG_VERDICT_BATCH, attr(2, struct.pack("!II", NF_ACCEPT, last)), NLM_F_REQUEST))
PY
)

have_netem() { # have_netem NS DEV: can a netem qdisc be attached here?
    if ip netns exec "$1" tc qdisc add dev "$2" root netem delay 0ms 2>/dev/null; then
        ip netns exec "$1" tc qdisc del dev "$2" root
        return 0
    fi
    return 1
}

start_delayer() { # start_delayer NS DEV DELAY: delay what leaves DEV through NFQUEUE
    local n=$1 dev=$2 d=$3 log i
    command -v python3 >/dev/null || die "netem is missing from this kernel and the fallback delayer needs python3"
    command -v iptables >/dev/null || die "netem is missing from this kernel and the fallback delayer needs iptables (apt-get install -y iptables)"
    log="$STATE/delayer-$n.log"
    : >"$log"
    ip netns exec "$n" python3 -c "$DELAYER_PY" 0 "$d" >"$log" 2>&1 &
    echo $! >"$STATE/delayer-$n.pid"
    for i in $(seq 50); do
        grep -q '^ready' "$log" && break
        kill -0 "$(cat "$STATE/delayer-$n.pid")" 2>/dev/null || die "delayer in $n failed: $(cat "$log")"
        [ "$i" = 50 ] && die "delayer in $n did not start: $(cat "$log")"
        sleep 0.1
    done
    ip netns exec "$n" iptables -A OUTPUT -o "$dev" -j NFQUEUE --queue-num 0
}

slow_dev() { # slow_dev NS DEV: apply the chosen slowdown to what leaves DEV
    local n=$1 dev=$2
    if [ -n "$RATE" ]; then
        ip netns exec "$n" tc qdisc add dev "$dev" root tbf rate "$RATE" burst "$BURST" latency 400ms
        echo "$n $dev: tbf rate $RATE burst $BURST" >>"$STATE/slow"
    elif have_netem "$n" "$dev"; then
        ip netns exec "$n" tc qdisc add dev "$dev" root netem delay "$DELAY"
        echo "$n $dev: netem delay $DELAY" >>"$STATE/slow"
    else
        start_delayer "$n" "$dev" "$DELAY"
        echo "$n $dev: NFQUEUE delayer $DELAY (no netem in this kernel)" >>"$STATE/slow"
    fi
}

parse_slow_opts() { # sets DELAY RATE BURST and REST (what it did not know)
    DELAY=2ms RATE="" BURST=4kb REST=()
    while [ $# -gt 0 ]; do
        case $1 in
            --delay) DELAY=${2:?--delay needs a time, e.g. 2ms}; RATE=""; shift 2 ;;
            --rate) RATE=${2:?--rate needs a rate, e.g. 10mbit}; shift 2 ;;
            --burst) BURST=${2:?--burst needs a size, e.g. 4kb}; shift 2 ;;
            *) REST+=("$1"); shift ;;
        esac
    done
}

begin() { # begin MODE: refuse to touch existing namespaces, start the state
    need_root
    need_tools
    ours_exist && die "namespaces $P-* exist already (ip netns list); run '$0 down' first"
    rm -rf "$STATE"
    mkdir -p "$STATE"
    echo "$1" >"$STATE/mode"
    : >"$STATE/slow"
    local h
    for h in $(seq 0 $((NH - 1))); do
        ip netns add "$(ns "$h")"
        ip -n "$(ns "$h")" link set lo up
    done
}

cmd_bridge() {
    parse_slow_opts "$@"
    local slow="" h
    set -- ${REST[@]+"${REST[@]}"}
    while [ $# -gt 0 ]; do
        case $1 in
            --slow-host) slow=${2:?--slow-host needs a host number}; shift 2 ;;
            *) die "bridge: unknown option $1" ;;
        esac
    done
    [ -z "$slow" ] || [[ $slow =~ ^[0-3]$ ]] || die "--slow-host must be 0..3"
    begin bridge
    ip netns add "$P-sw"
    ip -n "$P-sw" link set lo up
    ip -n "$P-sw" link add br0 type bridge
    ip -n "$P-sw" link set br0 up
    for h in $(seq 0 $((NH - 1))); do
        ip -n "$(ns "$h")" link add eth0 type veth peer name "p$h" netns "$P-sw"
        ip -n "$P-sw" link set "p$h" master br0 up
        ip -n "$(ns "$h")" addr add "10.77.0.$((h + 1))/24" dev eth0
        ip -n "$(ns "$h")" link set eth0 up
    done
    if [ -n "$slow" ]; then
        slow_dev "$(ns "$slow")" eth0
    fi
    say "bridge: h0..h3 = 10.77.0.1..4 on $P-sw/br0${slow:+, h$slow slow}"
    cat "$STATE/slow"
}

pair_index() { # the /30 number of the link between hosts $1 < $2: 0..5 in order 01 02 03 12 13 23
    local a=$1 b=$2 k=0 i j
    for i in $(seq 0 $((NH - 2))); do
        for j in $(seq $((i + 1)) $((NH - 1))); do
            if [ "$i" = "$a" ] && [ "$j" = "$b" ]; then echo $k; return; fi
            k=$((k + 1))
        done
    done
}

cmd_mesh() {
    parse_slow_opts "$@"
    local slow="" a b k sa sb
    set -- ${REST[@]+"${REST[@]}"}
    while [ $# -gt 0 ]; do
        case $1 in
            --slow-pair) slow=${2:?--slow-pair needs A,B}; shift 2 ;;
            *) die "mesh: unknown option $1" ;;
        esac
    done
    if [ -n "$slow" ]; then
        [[ $slow =~ ^([0-3]),([0-3])$ ]] || die "--slow-pair must be A,B with hosts 0..3"
        sa=${BASH_REMATCH[1]} sb=${BASH_REMATCH[2]}
        [ "$sa" != "$sb" ] || die "--slow-pair needs two different hosts"
    fi
    begin mesh
    for a in $(seq 0 $((NH - 1))); do
        ip -n "$(ns "$a")" addr add "10.79.0.$((a + 1))/32" dev lo
    done
    for a in $(seq 0 $((NH - 2))); do
        for b in $(seq $((a + 1)) $((NH - 1))); do
            k=$(pair_index "$a" "$b")
            ip -n "$(ns "$a")" link add "to-h$b" type veth peer name "to-h$a" netns "$(ns "$b")"
            ip -n "$(ns "$a")" addr add "10.78.$k.1/30" dev "to-h$b"
            ip -n "$(ns "$b")" addr add "10.78.$k.2/30" dev "to-h$a"
            ip -n "$(ns "$a")" link set "to-h$b" up
            ip -n "$(ns "$b")" link set "to-h$a" up
            ip -n "$(ns "$a")" route add "10.79.0.$((b + 1))/32" via "10.78.$k.2" src "10.79.0.$((a + 1))"
            ip -n "$(ns "$b")" route add "10.79.0.$((a + 1))/32" via "10.78.$k.1" src "10.79.0.$((b + 1))"
        done
    done
    if [ -n "$slow" ]; then
        slow_dev "$(ns "$sa")" "to-h$sb"
        slow_dev "$(ns "$sb")" "to-h$sa"
    fi
    say "mesh: h0..h3 = 10.79.0.1..4, one veth pair per two hosts${slow:+, link h$sa-h$sb slow}"
    cat "$STATE/slow"
}

addr_of() { # the address host $1 binds and advertises
    case $(cat "$STATE/mode") in
        bridge) echo "10.77.0.$(($1 + 1))" ;;
        mesh) echo "10.79.0.$(($1 + 1))" ;;
    esac
}

RANK_PIDS=()
kill_ranks() {
    local pid
    for pid in ${RANK_PIDS[@]+"${RANK_PIDS[@]}"}; do
        kill "$pid" 2>/dev/null || true
    done
}

cmd_run() {
    need_root
    if ! [ -f "$STATE/mode" ] || ! ours_exist; then
        die "no set-up: run '$0 bridge' or '$0 mesh' first"
    fi
    [ -x "$B" ] || die "no binary at $B (cargo build --release, or COMMBENCH=path)"
    local command=allpairs hosts=0,1,2,3 port=7077 limit=900 r h rc failed=0 logs
    while [ $# -gt 0 ]; do
        case $1 in
            --command) command=${2:?}; shift 2 ;;
            --hosts) hosts=${2:?}; shift 2 ;;
            --port) port=${2:?}; shift 2 ;;
            --limit) limit=${2:?}; shift 2 ;;
            --) shift; break ;;
            *) break ;;
        esac
    done
    local -a host
    IFS=, read -r -a host <<<"$hosts"
    for h in "${host[@]}"; do [[ $h =~ ^[0-3]$ ]] || die "--hosts: $h is not 0..3"; done
    local n=${#host[@]} rdv
    rdv="$(addr_of "${host[0]}"):$port"
    COMMBENCH_TOKEN=$(head -c 24 /dev/urandom | base64)
    export COMMBENCH_TOKEN
    logs="$STATE/run.$$"
    mkdir -p "$logs"
    trap kill_ranks INT TERM
    for r in $(seq 0 $((n - 1))); do
        h=${host[$r]}
        # shellcheck disable=SC2016 # $0 and $@ are the inner shell's (hostname, command)
        # timeout's child execs through ip, unshare and sh into commbench: one process, which
        # the limit ends (TERM, then KILL 10 s later).
        timeout -k 10 "$limit" ip netns exec "$(ns "$h")" unshare --uts \
            sh -c 'echo "$0" >/proc/sys/kernel/hostname && exec "$@"' "h$h" \
            "$B" "$command" --backend tcp --rank "$r" --ranks "$n" --rendezvous "$rdv" \
            --bind "$(addr_of "$h")" "$@" >"$logs/rank$r.out" 2>"$logs/rank$r.err" &
        RANK_PIDS+=($!)
    done
    for r in $(seq 0 $((n - 1))); do
        rc=0
        wait "${RANK_PIDS[$r]}" || rc=$?
        if [ "$rc" != 0 ]; then
            failed=1
            echo "rank $r (h${host[$r]}) exited $rc$([ "$rc" = 124 ] && echo " (over --limit $limit s)"); its stderr:" >&2
            sed 's/^/    /' "$logs/rank$r.err" >&2
        fi
    done
    trap - INT TERM
    RANK_PIDS=()
    cat "$logs/rank0.out"
    if [ -s "$logs/rank0.err" ] && [ "$failed" = 0 ]; then
        sed 's/^/rank 0: /' "$logs/rank0.err" >&2
    fi
    check_delayers
    [ "$failed" = 0 ] || die "a rank failed (logs in $logs)"
}

check_delayers() {
    local f
    for f in "$STATE"/delayer-*.pid; do
        [ -e "$f" ] || continue
        kill -0 "$(cat "$f")" 2>/dev/null || echo "warning: the delayer of ${f#"$STATE"/delayer-} died: $(cat "${f%.pid}.log")" >&2
    done
}

cmd_pings() {
    command -v ping >/dev/null || die "needs ping (apt-get install -y iputils-ping)"
    [ -f "$STATE/mode" ] || die "no set-up"
    local count=${1:-20} a b
    for a in $(seq 0 $((NH - 2))); do
        for b in $(seq $((a + 1)) $((NH - 1))); do
            printf 'h%s -> h%s  ' "$a" "$b"
            ip netns exec "$(ns "$a")" ping -q -n -i 0.01 -c "$count" -I "$(addr_of "$a")" "$(addr_of "$b")" |
                sed -n 's/^rtt \(.*\)$/rtt \1/p'
        done
    done
}

cmd_show() {
    local n
    for n in $(ip netns list | awk -v p="^$P-" '$1 ~ p { print $1 }' | sort); do
        say "$n"
        ip -n "$n" -br addr
        ip -n "$n" route
        ip netns exec "$n" tc qdisc show | grep -v -E 'noqueue|pfifo_fast|^qdisc mq' || true
        if command -v iptables >/dev/null; then
            ip netns exec "$n" iptables -S OUTPUT 2>/dev/null | grep NFQUEUE || true
        fi
    done
}

cmd_down() {
    need_root
    local f n
    for f in "$STATE"/delayer-*.pid; do
        [ -e "$f" ] || continue
        kill "$(cat "$f")" 2>/dev/null || true
        rm -f "$f"
    done
    for n in $(ip netns list 2>/dev/null | awk -v p="^$P-" '$1 ~ p { print $1 }'); do
        ip netns del "$n"
    done
    rm -rf "$STATE"
}

cmd_demo() {
    parse_slow_opts "$@"
    local out=target/allpairs-netns slow=(--delay "$DELAY") extra=() plot=0 cpus
    [ -z "$RATE" ] || slow=(--rate "$RATE" --burst "$BURST")
    set -- ${REST[@]+"${REST[@]}"}
    while [ $# -gt 0 ]; do
        case $1 in
            --out) out=${2:?}; shift 2 ;;
            --) shift; extra=("$@"); break ;;
            *) extra=("$@"); break ;;
        esac
    done
    if [ ${#extra[@]} = 0 ]; then
        # The fake hosts share this machine's CPUs. Unpinned, the scheduler puts some pairs'
        # two ranks on one CPU and others' on two, which moves an 8-byte time by x1.5 or more
        # per pair and can pass for a slow node; pinned alike, every pair is placed the same.
        if [ "$(nproc)" -ge $NH ]; then cpus=0,1,2,3; else cpus=0; fi
        extra=(--sizes "8,64K" --trials 50 --cpus "$cpus")
    fi
    [ -x "$B" ] || die "no binary at $B (cargo build --release, or COMMBENCH=path)"
    "$B" allpairs --help >/dev/null 2>&1 || die "$B has no allpairs command"
    if "$B" plot --help 2>/dev/null | grep -q -E '^ +- matrix'; then plot=1; fi
    mkdir -p "$out"
    trap cmd_down EXIT
    local kind setup
    for kind in bridge mesh; do
        if [ $kind = bridge ]; then setup=(--slow-host 2); else setup=(--slow-pair "1,3"); fi
        say "$(date -u '+%Y-%m-%d %H:%M:%SZ') $kind ${setup[*]} ${slow[*]}"
        "cmd_$kind" "${setup[@]}" "${slow[@]}"
        say "run: allpairs ${extra[*]} --json $out/$kind.json"
        cmd_run -- "${extra[@]}" --json "$out/$kind.json"
        if [ $plot = 1 ]; then
            "$B" plot --kind matrix "$out/$kind.json" -o "$out/$kind.svg" && say "drawn: $out/$kind.svg"
        else
            say "no matrix plot: '$B plot --help' lists no matrix kind"
        fi
        cmd_down
    done
    trap - EXIT
}

case ${1:-} in
    bridge | mesh | run | pings | show | down | demo)
        c=$1
        shift
        "cmd_$c" "$@"
        ;;
    *)
        sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'
        exit 2
        ;;
esac
