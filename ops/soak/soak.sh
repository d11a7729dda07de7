#!/bin/sh
# soak.sh - a soak with faults: three mayflyd nodes, the load of
# build/soak/mayfly-soak for MINUTES, and a fault every FAULT_EVERY
# seconds, in turn: kill -9 of a worker, SIGTERM of a node restarted 5 s
# later, kill -9 of a node restarted at once, SIGSTOP of a node for 5 s, a
# partition: a node cut off from the other two for 20 s, then healed (each
# on the next node).  The nodes run with member_ttl_ms=10000, so the 5 s
# stop is a pause, not a death; the 20 s cut splits the cluster.  A kill -9
# of a node is logged with the incarnation it killed and the time, after
# the kill: the driver allows the loss of ack-mode messages that
# incarnation accepted before then, and of nothing else.  What the node
# held just before is logged too, to compare.
#
# The soak runs in a network namespace of its own (the "switch", where the
# driver runs), each node in one of its own at 10.77.<i>.2 joined to the
# switch by a veth pair; the cut is an iptables FORWARD rule in the switch.
# Everything dies with the script.  Where the machine refuses namespaces
# (not root), the nodes run on 127.0.0.1-3 and the partition is skipped,
# saying so in faults.log.
#
#   MINUTES (2)  RATE (msg/s offered)  FAULT_EVERY (s; MINUTES x 10)
#   FAULTS (all five, in the order above): the kinds to take turns, by
#     name, e.g. FAULTS=kill-9-node for a kill -9 and restart each time
#     (kill-9-worker sigterm-node kill-9-node sigstop-node partition-node)
#   DRAIN (60: the driver's drain, s at most)
#   PORT (7632) CPORT (PORT + 1: the cluster port)
#   OUT (build/soak/run)  MAYFLYD (build/release/mayflyd)
#
# Output in OUT: soak.csv (a row per 10 s), summary.md, faults.log, the
# nodes' logs, and soak.png when gnuplot is installed.  Exit status: the
# driver's (1 when an ack-mode message was lost that no killed incarnation
# had accepted before its kill).
set -eu
self=$(cd "$(dirname "$0")" && pwd)/soak.sh
# Into a network namespace of our own, once, when the machine allows it.
if [ -z "${SOAK_NETNS:-}" ] && unshare --net true 2>/dev/null; then
    SOAK_NETNS=1 exec unshare --net "$self" "$@"
fi
cd "$(dirname "$self")/../.."

MINUTES=${MINUTES:-2}
RATE=${RATE:-24000}
PORT=${PORT:-7632}
CPORT=${CPORT:-$((PORT + 1))}
OUT=${OUT:-build/soak/run}
MAYFLYD=${MAYFLYD:-build/release/mayflyd}
BIN=${SOAK_BIN:-build/soak/mayfly-soak}
secs=$((MINUTES * 60))
every=${FAULT_EVERY:-$((secs / 6))}
[ "$every" -lt 20 ] && every=20
FAULTS=${FAULTS:-kill-9-worker sigterm-node kill-9-node sigstop-node partition-node}
kinds=""
for f in $FAULTS; do
    case $f in
    kill-9-worker) kinds="$kinds 0" ;;
    sigterm-node) kinds="$kinds 1" ;;
    kill-9-node) kinds="$kinds 2" ;;
    sigstop-node) kinds="$kinds 3" ;;
    partition-node) kinds="$kinds 4" ;;
    *) echo "soak: unknown fault '$f' in FAULTS" >&2; exit 2 ;;
    esac
done
nkinds=$(echo $kinds | wc -w)

rm -rf "$OUT"
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
printf 'soak-secret-%s\n' "$$" >"$OUT/secret"

# addr I - node I's address: 10.77.I.2 in its namespace, or 127.0.0.I.
addr() { if [ -n "${SOAK_NETNS:-}" ]; then echo "10.77.$1.2"; else echo "127.0.0.$1"; fi; }

# in_ns I CMD... - CMD in node I's namespace (as it is without namespaces).
in_ns() {
    i=$1
    shift
    if [ -n "${SOAK_NETNS:-}" ]; then
        nsenter --net="/proc/$(cat "$OUT/ns$i.pid")/ns/net" "$@"
    else
        "$@"
    fi
}

# The switch and the nodes' namespaces: each held by a process that dies
# with this script (its parent-death signal), node I's eth0 10.77.I.2
# paired with s<I> 10.77.I.1 here.
if [ -n "${SOAK_NETNS:-}" ]; then
    ip link set lo up
    echo 1 >/proc/sys/net/ipv4/ip_forward
    for i in 1 2 3; do
        setpriv --pdeathsig KILL unshare --net sleep infinity &
        echo $! >"$OUT/ns$i.pid"
    done
    for i in 1 2 3; do
        n=0
        # until unshare has made the namespace (the holder's differs from ours)
        while [ "$(readlink "/proc/$(cat "$OUT/ns$i.pid")/ns/net")" = "$(readlink /proc/self/ns/net)" ]; do
            n=$((n + 1))
            [ "$n" -gt 100 ] && { echo "soak: no namespace for node $i" >&2; exit 1; }
            sleep 0.05
        done
        ip link add "s$i" type veth peer name eth0 netns "$(cat "$OUT/ns$i.pid")"
        ip addr add "10.77.$i.1/24" dev "s$i"
        ip link set "s$i" up
        in_ns "$i" ip link set lo up
        in_ns "$i" ip addr add "10.77.$i.2/24" dev eth0
        in_ns "$i" ip link set eth0 up
        in_ns "$i" ip route add default via "10.77.$i.1"
    done
fi
peers="$(addr 1):$CPORT,$(addr 2):$CPORT,$(addr 3):$CPORT"
urls="http://$(addr 1):$PORT,http://$(addr 2):$PORT,http://$(addr 3):$PORT"

# boot_s - seconds since boot (the driver's clock, CLOCK_BOOTTIME).
boot_s() { cut -d' ' -f1 /proc/uptime; }

# start I - run node I (1-3) in the background; its pid in OUT/nI.pid.
start() {
    mkdir -p "$OUT/n$1"
    # nsenter execs mayflyd: $! is the master
    ns=""
    [ -n "${SOAK_NETNS:-}" ] && ns="nsenter --net=/proc/$(cat "$OUT/ns$1.pid")/ns/net"
    $ns "$MAYFLYD" -o "listen=$(addr "$1"):$PORT" \
        -o "cluster_listen=$(addr "$1"):$CPORT" -o "peers=$peers" \
        -o "cluster_secret_file=$OUT/secret" -o "data_dir=$OUT/n$1" \
        -o "node_id=n$1" -o "workers=2" -o "lease_s=5" \
        -o "implicit_idle_s=5" -o "member_ttl_ms=10000" \
        >>"$OUT/n$1/mayflyd.log" 2>&1 &
    echo $! >"$OUT/n$1.pid"
}

pid() { cat "$OUT/n$1.pid"; }

# procs I - node I's master and its workers.
procs() { echo "$(pid "$1") $(pgrep -P "$(pid "$1")" | tr '\n' ' ')"; }

# wait_ready I - until node I answers /health 200 (60 s at most).
wait_ready() {
    n=0
    while ! curl -sf -o /dev/null "http://$(addr "$1"):$PORT/health"; do
        n=$((n + 1))
        [ "$n" -gt 600 ] && { echo "soak: node $1 not ready" >&2; return 1; }
        sleep 0.1
    done
}

# gone PID... - until each has exited (a zombie counts as gone), 60 s at
# most in all: a node restarted before its killed workers exit finds its
# port still held.
gone() {
    n=0
    for p in "$@"; do
        while [ -e "/proc/$p" ] && ! grep -q '^State:.*Z' "/proc/$p/status" 2>/dev/null; do
            n=$((n + 1))
            [ "$n" -gt 600 ] && break
            sleep 0.1
        done
    done
}

# held I - ack-mode messages node I holds (its own share of soak-ack).
held() {
    curl -s --max-time 2 \
        "http://$(addr "$1"):$PORT/api/v1/ephemeral/queues?prefix=soak-ack&scope=node" |
        grep -o '"depth":[0-9]*' | head -1 | cut -d: -f2 || true
}

# incarnation I - node I's incarnation (16 hex digits, as in its message
# ids), from /health (which answers it with a 503 too).
incarnation() {
    curl -s --max-time 2 "http://$(addr "$1"):$PORT/health" |
        grep -o '"incarnation":"[0-9a-f]*"' | cut -d'"' -f4 || true
}

fault() { echo "$(boot_s) $*" >>"$OUT/faults.log"; }

cleanup() {
    for i in 1 2 3; do
        p=$(pid "$i" 2>/dev/null) || continue
        kill -CONT "$p" 2>/dev/null || true
        kill "$p" 2>/dev/null || true
    done
    sleep 3
    for i in 1 2 3; do
        p=$(pid "$i" 2>/dev/null) || continue
        kill -9 "$p" 2>/dev/null || true
    done
    [ -n "${drv:-}" ] && kill "$drv" 2>/dev/null || true
    # the namespaces' holders, or the wait below would wait for them
    for i in 1 2 3; do
        [ -f "$OUT/ns$i.pid" ] && kill "$(cat "$OUT/ns$i.pid")" 2>/dev/null || true
    done
    wait 2>/dev/null || true
}
trap cleanup EXIT
trap 'exit 130' INT TERM

for i in 1 2 3; do start "$i"; done
for i in 1 2 3; do wait_ready "$i"; done
: >"$OUT/faults.log"
"$BIN" --nodes "$urls" --rate "$RATE" --seconds "$secs" --drain "${DRAIN:-60}" \
    --dir "$OUT" &
drv=$!

# The faults, in turn, while the driver runs: the k-th at k x every s
# from the start, whatever the ones before took.
t0=$(boot_s)
k=0
while [ $(((k + 1) * every)) -lt "$secs" ]; do
    while awk -v a="$(boot_s)" -v b="$t0" -v w=$(((k + 1) * every)) \
        'BEGIN { exit !(a - b < w) }'; do
        sleep 0.5
    done
    kill -0 "$drv" 2>/dev/null || break
    node=$((k % 3 + 1))
    case $(echo $kinds | cut -d' ' -f$((k % nkinds + 1))) in
    0)
        w=$(pgrep -P "$(pid $node)" | head -1)
        [ -n "$w" ] && kill -9 "$w"
        fault "kill-9-worker $node"
        ;;
    1)
        fault "sigterm-node $node"
        all=$(procs $node)
        kill "$(pid $node)"
        sleep 5
        wait "$(pid $node)" 2>/dev/null || true
        gone $all
        start "$node"
        wait_ready "$node"
        ;;
    2)
        ts=$(boot_s)
        h=$(held "$node")
        inc=$(incarnation "$node")
        all=$(procs $node)
        kill -9 $all
        # Stamped after the kill: every id its incarnation accepted was
        # accepted before this time.  /proc/uptime counts in 10 ms; the
        # wall clock's nanoseconds (last) place the kill to the ms.
        fault "kill-9-node $node ${h:-0} ${inc:--} $ts $(date +%s.%N)"
        wait "$(pid $node)" 2>/dev/null || true
        gone $all
        start "$node"
        wait_ready "$node"
        ;;
    3)
        fault "sigstop-node $node"
        all=$(procs $node)
        kill -STOP $all
        sleep 5
        kill -CONT $all
        ;;
    4)
        if [ -n "${SOAK_NETNS:-}" ]; then
            fault "partition-node $node"
            iptables -w -I FORWARD -i "s$node" -j DROP
            iptables -w -I FORWARD -o "s$node" -j DROP
            sleep 20
            iptables -w -D FORWARD -i "s$node" -j DROP
            iptables -w -D FORWARD -o "s$node" -j DROP
            fault "heal-node $node"
        else
            fault "partition-skipped $node (no network namespace here)"
        fi
        ;;
    esac
    k=$((k + 1))
done
rc=0
wait "$drv" || rc=$?
drv=""
if command -v gnuplot >/dev/null 2>&1; then
    ops/soak/plot.sh "$OUT" || echo "soak: the plot failed" >&2
fi
exit "$rc"
