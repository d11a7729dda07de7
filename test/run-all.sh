#!/bin/sh
# run-all.sh - run every test binary of a build and sum the results.
#
# Usage: test/run-all.sh BUILD_DIR
# Each Criterion binary prints its own synthesis line; this script ends with
# the totals, as "tests: N passed, N failed" and as one Criterion synthesis
# line over every suite, and exits non-zero on any failure.
# Integration suites find the server through MAYFLYD.  Output goes through a
# file, not a pipe: a suite's stray child must not keep the runner waiting.
set -u
b=${1:?usage: run-all.sh BUILD_DIR}
MAYFLYD=$(cd "$b" && pwd)/mayflyd
LSAN_OPTIONS="suppressions=$(cd "$(dirname "$0")" && pwd)/lsan.supp${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
export MAYFLYD LSAN_OPTIONS
out=$(mktemp)
trap 'rm -f "$out"' EXIT

# The Criterion runner sometimes forks a sandbox while another of its
# threads holds a lock of ASan's allocator (GCC 12's sanitizer has no fork
# handler for it): the child waits for that lock forever, and the runner
# for the child (gdb, 2026-12-02: FutexWait in
# SizeClassAllocator64::GetFromAllocator right after the fork).  Those
# locks live in the allocator's region table, which starts at 0x640000000000
# (kAllocatorSpace + kAllocatorSize on x86-64), so a process of the binary's
# group sitting in futex (system call 202) on an address there is that wait;
# a real one lasts microseconds.
asan_lock_wait() {
    g=$1
    for d in /proc/[0-9]*; do
        read -r sc 2>/dev/null <"$d/syscall" || continue
        case "$sc" in
        "202 0x6400000"*) ;;
        *) continue ;;
        esac
        read -r st 2>/dev/null <"$d/stat" || continue
        set -- ${st##*) } # state, parent, process group, ...
        [ "${3:-}" = "$g" ] && return 0
    done
    return 1
}

# run_binary T - T's output in $out, its exit status in $rc: 124 when the
# timeout stopped it, 125 when it was stopped wedged (WEDGE_S seconds,
# default 30, in that wait).
run_binary() {
    timeout -k 10 "${TEST_TIMEOUT:-600}" "$1" -j2 >"$out" 2>&1 &
    tp=$!
    ticks=0
    waited=0
    while kill -0 "$tp" 2>/dev/null; do
        sleep 0.2
        ticks=$((ticks + 1))
        [ $((ticks % 25)) -eq 0 ] || continue
        if asan_lock_wait "$tp"; then waited=$((waited + 5)); else waited=0; fi
        if [ "$waited" -ge "${WEDGE_S:-30}" ]; then
            kill -TERM "$tp" 2>/dev/null # timeout passes it to its group
            for i in 1 2 3 4 5 6 7 8 9 10; do
                kill -0 "$tp" 2>/dev/null || break
                sleep 1
            done
            kill -KILL -- "-$tp" 2>/dev/null
            wait "$tp"
            rc=125
            return
        fi
    done
    wait "$tp"
    rc=$?
}
pass=0
fail=0
crash=0
for t in $(find "$b/test" -type f -perm -u+x | sort); do
    echo "== $t"
    start=$(date +%s)
    # A hung suite must not hang CI: each binary gets TEST_TIMEOUT seconds.
    # No --full-stats: with it, even a passing assertion in a forked child
    # talks to the runner and can wedge it.
    run_binary "$t"
    # A binary stopped wedged (asan_lock_wait), or killed by the timeout
    # having printed nothing at all, is the runner wedged, not a test: the
    # suites that run servers set a per-test .timeout, so a test that hangs
    # is reported [FAIL] with a synthesis line.  It runs again (unless a test
    # had failed already), up to three times in all; what it printed before
    # stays in the log.
    tries=1
    while { { [ "$rc" -eq 125 ] && ! grep -q '^\[FAIL\]' "$out"; } ||
        { [ "$rc" -eq 124 ] && [ ! -s "$out" ]; }; } && [ "$tries" -lt 3 ]; do
        echo "--- $t: the Criterion runner wedged (exit $rc); its output:"
        cat "$out"
        echo "--- running it again"
        run_binary "$t"
        tries=$((tries + 1))
    done
    grep -E '^\[(FAIL|----)\]|Synthesis|ERROR|SUMMARY' "$out" | head -50
    # A failure's whole story (a sanitizer report, a child's stderr) is
    # kept for the log: a rare one may not come back when rerun.
    [ "$rc" -eq 0 ] || { echo "--- $t exited $rc; its last 120 lines:"; tail -120 "$out"; echo "---"; }
    line=$(grep 'Synthesis:' "$out" | tail -1)
    p=$(printf '%s' "$line" | sed -n 's/.*Passing: \([0-9]*\).*/\1/p')
    f=$(printf '%s' "$line" | sed -n 's/.*Failing: \([0-9]*\) | Crashing: \([0-9]*\).*/\1 \2/p')
    [ -n "$p" ] || { p=0; f="1 0"; echo "$t: no synthesis line (rc=$rc)"; }
    set -- $f
    pass=$((pass + p))
    fail=$((fail + $1))
    crash=$((crash + $2))
    [ "$rc" -eq 0 ] || [ "$(($1 + $2))" -gt 0 ] || { fail=$((fail + 1)); echo "$t: exit $rc"; }
    echo "   ($(($(date +%s) - start)) s)"
done
echo "tests: $pass passed, $((fail + crash)) failed"
echo "[====] Synthesis: Tested: $((pass + fail + crash)) | Passing: $pass | Failing: $fail | Crashing: $crash"
[ "$((fail + crash))" -eq 0 ]
