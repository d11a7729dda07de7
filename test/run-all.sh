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
for t in $(find "$b/test" -type f -perm -u+x | sort); do
    echo "== $t"
    start=$(date +%s)
    # A hung suite must not hang CI: each binary gets TEST_TIMEOUT seconds.
    # No --full-stats: with it, even a passing assertion in a forked child
    # talks to the runner and can wedge it.
    timeout -k 10 "${TEST_TIMEOUT:-600}" "$t" -j2 >"$out" 2>&1
    rc=$?
    # A binary killed by the timeout having printed nothing at all is
    # Criterion's runner wedged, not a test: the suites that run servers set a
    # per-test .timeout, so a test that hangs is reported [FAIL] with a synthesis
    # line.  Seen (2026-12-02, twice in one run): the runner forks a sandbox
    # while another of its threads holds ASan's allocator lock (GCC 12's
    # sanitizer has no fork handler for it), and the child waits for that
    # lock forever.  Such a binary runs again, up to three times in all.
    tries=1
    while [ "$rc" -eq 124 ] && [ ! -s "$out" ] && [ "$tries" -lt 3 ]; do
        echo "--- $t: the Criterion runner printed nothing in ${TEST_TIMEOUT:-600} s (wedged); running it again"
        timeout -k 10 "${TEST_TIMEOUT:-600}" "$t" -j2 >"$out" 2>&1
        rc=$?
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
