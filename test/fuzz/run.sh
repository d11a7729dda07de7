#!/bin/sh
# run.sh - run each libFuzzer target SECONDS seconds (make fuzz).
#
# Usage: test/fuzz/run.sh BUILD_DIR SECONDS NAME...
# Each target starts from its seeds and regressions (test/fuzz/<name>/, read
# recursively) plus what earlier runs found (BUILD_DIR/corpus/<name>/, where
# new inputs go); a crash is written to BUILD_DIR/crash/.  Prints one line a
# target (runs, executions/s, coverage) and exits non-zero if any crashed.
# One input may take 60 s before it counts as a hang: a loaded 2-core CI
# machine makes slow units, which are not bugs; a hang is one.
set -u
b=${1:?usage: run.sh BUILD_DIR SECONDS NAME...}
secs=${2:?usage: run.sh BUILD_DIR SECONDS NAME...}
shift 2
here=$(cd "$(dirname "$0")" && pwd)
failed=""
summary=""
for n in "$@"; do
    mkdir -p "$b/corpus/$n" "$b/crash"
    log="$b/fuzz_$n.log"
    echo "== fuzz_$n ($secs s)"
    "$b/fuzz_$n" -max_total_time="$secs" -timeout=60 -print_final_stats=1 \
        -artifact_prefix="$b/crash/$n-" "$b/corpus/$n" "$here/$n" >"$log" 2>&1
    rc=$?
    runs=$(LC_ALL=C sed -n 's/^stat::number_of_executed_units: *//p' "$log")
    eps=$(LC_ALL=C sed -n 's/^stat::average_exec_per_sec: *//p' "$log")
    cov=$(grep -ao 'cov: [0-9]* ft: [0-9]*' "$log" | tail -1)
    line="fuzz_$n: ${runs:-?} runs, ${eps:-?} exec/s, ${cov:-no coverage line}"
    echo "   $line"
    summary="$summary$line
"
    if [ "$rc" -ne 0 ]; then
        failed="$failed $n"
        echo "--- fuzz_$n exited $rc; its last 60 lines ($log):"
        tail -60 "$log"
        echo "--- add the crash input ($b/crash/$n-*) to $here/$n/regressions/"
    fi
done
printf '%s' "$summary"
[ -z "$failed" ] || { echo "fuzz: crashed:$failed"; exit 1; }
echo "fuzz: $# targets, no crash"
