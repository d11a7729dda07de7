#!/bin/sh
# profile.sh - where mayflyd's workers spend their CPU in one scenario.
#
# Usage: ops/bench/profile.sh SCENARIO [SECONDS]   (after make bench built it)
# Starts build/release/mayflyd (two workers) on spare ports, runs
# mayfly-bench --only SCENARIO against it, records the workers with
# `perf record -g` for SECONDS (default 4) once the scenario is under way,
# and prints the top symbols. Data: build/bench/profile-SCENARIO.perf.
# Exit status: perf's, or 2 on bad usage.
set -eu
cd "$(dirname "$0")/../.."
[ $# -ge 1 ] || { echo "usage: $0 SCENARIO [SECONDS]" >&2; exit 2; }
sc=$1
secs=${2:-4}
B=build/bench
BIN=$B/mayfly-bench
data="$B/profile-$sc.perf"
rm -rf "$B/profile"
mkdir -p "$B/profile"
mp=$($BIN free-port)
cp=$($BIN free-port)
build/release/mayflyd -o listen="127.0.0.1:$mp" -o cluster_listen="127.0.0.1:$cp" \
    -o workers=2 -o data_dir="$B/profile" -o max_connections=30000 \
    -o max_wait_ms=120000 2>"$B/profile/mayfly.log" &
mpid=$!
gpid=""
trap 'kill $mpid $gpid 2>/dev/null || true; wait 2>/dev/null || true' EXIT
$BIN run --mayfly "$mp" --mayfly-pid "$mpid" --only "$sc" >"$B/profile/bench.out" 2>&1 &
gpid=$!
sleep 3
workers=$(tr ' ' ',' <"/proc/$mpid/task/$mpid/children" | sed 's/,$//')
rc=0
perf record -F 1999 -g -o "$data" -p "$workers" -- sleep "$secs" || rc=$?
wait "$gpid" || true
grep -A 30 '^scenario' "$B/profile/bench.out" || true
perf report -i "$data" --no-children --stdio 2>/dev/null |
    grep -E '^ +[0-9]+\.[0-9]+%' | head -25
exit "$rc"
