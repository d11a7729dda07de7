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
pass=0
fail=0
crash=0

# wedged_child BIN - the pid of a child of BIN (a Criterion sandbox) that
# looks wedged (below): one thread, waiting on a futex, no children.
wedged_child() {
    for c in $(pgrep -P "$1" 2>/dev/null); do
        [ -r "/proc/$c/stat" ] || continue
        [ "$(awk '{print $20}' "/proc/$c/stat")" = 1 ] || continue
        case $(cat "/proc/$c/wchan" 2>/dev/null) in *futex*) ;; *) continue ;; esac
        [ -z "$(pgrep -P "$c")" ] || continue
        echo "$c"
        return
    done
}

# run_one T - run test binary T into $out under the timeout; sets rc, and
# wedged=1 when the watch below stopped it.  A Criterion runner forks each
# sandbox from a process whose nanomsg thread may hold ASan's allocator lock
# at that instant (GCC 12's sanitizer has no fork handler for it); the
# child then waits on that lock forever and the runner with it (seen
# 2026-12-02, a few times in a hundred binaries, as a child in
# SizeClassAllocator64::GetFromAllocator and the runner in waitpid).  Such a
# child has one thread, sleeps on a futex, has no child of its own and uses
# no CPU: one seen so for WEDGE_S seconds stops the run, which is then run
# again, instead of waiting out the whole timeout.
run_one() {
    timeout -k 10 "${TEST_TIMEOUT:-600}" "$1" -j2 >"$out" 2>&1 &
    tp=$!
    wedged=0
    wpid= wcpu= wsince=0
    while kill -0 "$tp" 2>/dev/null; do
        sleep 1
        bin=$(pgrep -P "$tp" | head -1)
        c=$([ -n "$bin" ] && wedged_child "$bin")
        if [ -z "$c" ]; then
            wpid=
            continue
        fi
        cpu=$(awk '{print $14 + $15}' "/proc/$c/stat" 2>/dev/null)
        if [ "$c" != "$wpid" ] || [ "$cpu" != "$wcpu" ]; then
            wpid=$c wcpu=$cpu wsince=$(date +%s)
        elif [ $(($(date +%s) - wsince)) -ge "${WEDGE_S:-90}" ]; then
            wedged=1
            kill -KILL "$c" "$bin" 2>/dev/null
        fi
    done
    wait "$tp"
    rc=$?
}
for t in $(find "$b/test" -type f -perm -u+x | sort); do
    echo "== $t"
    start=$(date +%s)
    # A hung suite must not hang CI: each binary gets TEST_TIMEOUT seconds.
    # No --full-stats: with it, even a passing assertion in a forked child
    # talks to the runner and can wedge it.
    run_one "$t"
    # A wedged runner (run_one), or one the timeout killed having printed
    # nothing at all (the suites that run servers set a per-test .timeout,
    # so a test that hangs is reported [FAIL] with a synthesis line), is
    # Criterion's, not a test's: the binary runs again, three times in all.
    tries=1
    while { [ "$wedged" = 1 ] || { [ "$rc" -eq 124 ] && [ ! -s "$out" ]; }; } &&
        [ "$tries" -lt 3 ]; do
        echo "--- $t: the Criterion runner wedged (a sandbox child stuck at its fork, or nothing printed in ${TEST_TIMEOUT:-600} s); running it again"
        run_one "$t"
        tries=$((tries + 1))
    done
    [ "$wedged" = 1 ] && rc=124
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
