# shellcheck shell=bash
# Sourced by the benchmark scripts of this folder after they have made their scratch folder $T
# and set their EXIT trap to call stop_watch.
# IDLE_WAIT=1, for a shared development machine: each measurement waits until no process named
# in IDLE_PROCS (default cargo|rustc: a build) has run for 10 s (30 minutes at most), and is
# measured again (up to 4 more times, then kept and marked) when one ran meanwhile.
IDLE_WAIT=${IDLE_WAIT:-0}
IDLE_PROCS=${IDLE_PROCS:-cargo|rustc}
WATCH_PID=""
stop_watch() { if [ -n "$WATCH_PID" ]; then kill "$WATCH_PID" 2>/dev/null || true; fi; }
if [ "$IDLE_WAIT" = 1 ]; then
    (while :; do if pgrep -x "$IDLE_PROCS" >/dev/null; then touch "$T/busy"; fi; sleep 1; done) &
    WATCH_PID=$!
fi
wait_idle() {
    local quiet=0 waited=0
    while [ "$quiet" -lt 10 ] && [ "$waited" -lt 1800 ]; do
        if pgrep -x "$IDLE_PROCS" >/dev/null; then quiet=0; else quiet=$((quiet + 1)); fi
        sleep 1
        waited=$((waited + 1))
    done
}
# quiet_group COMMAND...: run COMMAND (which sets LINE); with IDLE_WAIT=1 as said above
quiet_group() {
    local try
    if [ "$IDLE_WAIT" != 1 ]; then "$@"; return; fi
    for try in 1 2 3 4 5; do
        wait_idle
        rm -f "$T/busy"
        "$@"
        [ -e "$T/busy" ] || return 0
        if [ "$try" -lt 5 ]; then echo "  ${LINE%%:*}: a build ran meanwhile: measured again"; fi
    done
    LINE+=" (a build ran meanwhile)"
}
