#!/bin/sh
# run.sh - run mayfly-bench with every server it compares on spare ports.
#
# Starts the trivial libmicrohttpd endpoint (and the rpc floor server,
# ops/bench/floor.c, in the same process), redis-server (no persistence),
# nats-server and build/release/mayflyd (two workers, room for 10,000
# parked pops), a second one with HTTPS on its client port and a token
# file (the TLS + auth rows),
# runs build/bench/mayfly-bench, and stops what it started.  The memory
# rows start the same mayflyd themselves, one node a row (ops/bench/node.c:
# --mayflyd, data and logs under build/bench/run/mem-*).
# QUICK=1 for the short run; ONLY=rpc,wake (say) for some scenarios;
# UPDATE=1 also puts the new table into BENCHMARKS.md (between its
# bench:begin and bench:end markers); PIPELINE=1 makes the rpc clients of
# mayfly and Redis pipeline their steps (off by default); CLUSTER=1 instead
# starts three mayflyd nodes on 127.0.0.1, .2 and .3 and runs only the
# cluster rows (ops/bench/cluster.c). Logs of the servers: build/bench/run/*.log.
# Exit status: the generator's (0 when it wrote its outputs).
set -eu
cd "$(dirname "$0")/../.."

B=build/bench
BIN=$B/mayfly-bench
MAYFLYD=${MAYFLYD:-build/release/mayflyd}
quick=""
case "${QUICK:-}" in "" | 0) ;; *) quick="--quick" ;; esac
only=""
[ -n "${ONLY:-}" ] && only="--only $ONLY"
pipeline=""
case "${PIPELINE:-}" in "" | 0) ;; *) pipeline="--pipeline" ;; esac

rm -rf "$B/run"
mkdir -p "$B/run/mayfly"
pids=""
# cleanup - TERM what we started; KILL what is still there 15 s later.
cleanup() {
    for p in $pids; do kill "$p" 2>/dev/null || true; done
    n=0
    while [ "$n" -lt 150 ]; do
        alive=""
        for p in $pids; do kill -0 "$p" 2>/dev/null && alive="$alive $p"; done
        [ -z "$alive" ] && break
        sleep 0.1
        n=$((n + 1))
    done
    for p in $pids; do kill -9 "$p" 2>/dev/null || true; done
    for p in $pids; do wait "$p" 2>/dev/null || true; done
}
trap cleanup EXIT
trap 'exit 130' INT TERM
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)"
label="mayfly $(git rev-parse --short HEAD 2>/dev/null || echo unknown), $(date -u '+%Y-%m-%d %H:%M UTC')"

case "${CLUSTER:-}" in "" | 0) ;; *)
    # Three nodes n0, n1, n2 on 127.0.0.1-3 (one worker each); the bench
    # knows their ids, so it computes who owns a queue (cluster.c).
    echo "run.sh cluster secret $$" >"$B/run/secret"
    chmod 600 "$B/run/secret"
    hp="" peers=""
    for i in 0 1 2; do
        h=$($BIN free-port) c=$($BIN free-port)
        hp="$hp${hp:+,}$h"
        peers="$peers${peers:+,}127.0.0.$((i + 1)):$c"
        eval "h$i=$h c$i=$c"
    done
    for i in 0 1 2; do
        eval "h=\$h$i c=\$c$i"
        mkdir -p "$B/run/n$i"
        "$MAYFLYD" -o listen="127.0.0.$((i + 1)):$h" \
            -o cluster_listen="127.0.0.$((i + 1)):$c" -o peers="$peers" \
            -o node_id="n$i" -o cluster_secret_file="$B/run/secret" \
            -o workers=1 -o data_dir="$B/run/n$i" -o max_connections=30000 \
            -o max_wait_ms=120000 2>"$B/run/n$i.log" &
        pids="$pids $!"
    done
    echo "run.sh: cluster nodes on ports $hp (pids$pids)" >&2
    # in the background, so that a signal runs cleanup (which stops it) at once
    # shellcheck disable=SC2086
    $BIN run $quick $only --label "$label" --cluster "$hp" \
        --json "$B/results.json" --md "$B/results.md" &
    bpid=$!
    pids="$pids $bpid"
    rc=0
    wait "$bpid" || rc=$?
    echo "run.sh: wrote $B/results.json and $B/results.md" >&2
    exit "$rc"
    ;;
esac

okp=$($BIN free-port)
$BIN serve-ok "$okp" &
pids="$pids $!"

rp=$($BIN free-port)
redis-server --port "$rp" --bind 127.0.0.1 --save "" --appendonly no \
    --daemonize no --logfile "$B/run/redis.log" &
pids="$pids $!"

np=$($BIN free-port)
nats-server -a 127.0.0.1 -p "$np" -l "$B/run/nats.log" &
pids="$pids $!"

mp=$($BIN free-port)
cp=$($BIN free-port)
mpid=0
if [ -x "$MAYFLYD" ]; then
    "$MAYFLYD" -o listen="127.0.0.1:$mp" -o cluster_listen="127.0.0.1:$cp" \
        -o workers=2 -o data_dir="$B/run/mayfly" -o max_connections=30000 \
        -o max_wait_ms=120000 2>"$B/run/mayfly.log" &
    mpid=$!
    pids="$pids $mpid"
else
    echo "run.sh: $MAYFLYD is missing; mayfly rows will fail" >&2
fi

# The same build with HTTPS on its client port and an auth_file, for the
# TLS + auth rows beside the plain ones (push-tls-auth, rpc-N-tls-auth): a
# self-signed certificate and a random token (tenant bench; push, pop,
# request, read, and admin for the push row's resets, on every queue) made
# here; every request the generator sends that node carries the token.
tp=$($BIN free-port)
tcp=$($BIN free-port)
tls=""
fresh=""
[ -x "$MAYFLYD" ] && fresh="--mayflyd $MAYFLYD --run-dir $B/run"
if [ -x "$MAYFLYD" ] && mkdir -p "$B/run/mayfly-tls" &&
    openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=127.0.0.1 \
        -addext subjectAltName=IP:127.0.0.1 -keyout "$B/run/tls.key" \
        -out "$B/run/tls.pem" >/dev/null 2>&1 &&
    (umask 077 && openssl rand -hex 24 >"$B/run/token") &&
    hash=$("$MAYFLYD" --hash-token <"$B/run/token"); then
    echo "$hash tenant=bench push=* pop=* request=* read=* admin=*" >"$B/run/tokens"
    "$MAYFLYD" -o listen="127.0.0.1:$tp" -o cluster_listen="127.0.0.1:$tcp" \
        -o workers=2 -o data_dir="$B/run/mayfly-tls" -o max_connections=30000 \
        -o max_wait_ms=120000 -o tls_cert_file="$B/run/tls.pem" \
        -o tls_key_file="$B/run/tls.key" -o auth_file="$B/run/tokens" \
        2>"$B/run/mayfly-tls.log" &
    pids="$pids $!"
    tls="--mayfly-tls $tp --mayfly-tls-token $B/run/token"
fi

echo "run.sh: ok=$okp redis=$rp nats=$np mayfly=$mp (pid $mpid) mayfly-tls=$tp" >&2
rc=0
# shellcheck disable=SC2086
$BIN run $quick $only $pipeline $tls $fresh --label "$label" --mayfly "$mp" --mayfly-pid "$mpid" --redis "$rp" \
    --nats "$np" --ok "$okp" --json "$B/results.json" \
    --md "$B/results.md" || rc=$?
if [ "$mpid" != 0 ] && ! kill -0 "$mpid" 2>/dev/null; then
    echo "run.sh: mayflyd exited during the run; its log:" >&2
    tail -n 20 "$B/run/mayfly.log" >&2
fi
echo "run.sh: wrote $B/results.json and $B/results.md" >&2
if [ "$rc" = 0 ] && [ "${UPDATE:-0}" = 1 ]; then
    awk -v table="$B/results.md" '
        /<!-- bench:begin -->/ { print; while ((getline l < table) > 0) print l; skip = 1; next }
        /<!-- bench:end -->/ { skip = 0 }
        !skip { print }
    ' BENCHMARKS.md >"$B/BENCHMARKS.md.new" && mv "$B/BENCHMARKS.md.new" BENCHMARKS.md
    echo "run.sh: updated BENCHMARKS.md" >&2
fi
exit "$rc"
