/*
 * fork_guard.c - linked into every test binary: each fork of the process
 * waits FORK_PAUSE_NS first (pthread_atfork), so that a thread of
 * Criterion's runner that is in ASan's allocator has left it when the fork
 * copies the allocator's locks.
 *
 * GCC 12's AddressSanitizer has no fork handler for its allocator: a
 * sandbox forked while the runner's nanomsg thread held a size class's lock
 * waits for that lock forever, and the runner waits for the sandbox
 * (test/run-all.sh detects that and runs the binary again).  It struck most
 * at the runner's start, the first sandbox forked while the runner's
 * threads were still starting (150 ms after it, twice running in a row for
 * one binary, 2026-12-02), and when a sandbox ends (the next one is forked
 * while the runner's receiving thread handles the last one's messages).
 * The pause makes that unlikely; it cannot make it impossible, since a
 * thread may take the lock again after it.
 */
#include <pthread.h>
#include <time.h>

#define FORK_PAUSE_NS (5 * 1000 * 1000L)

static void
pause_before_fork(void)
{
    struct timespec ts = {0, FORK_PAUSE_NS};

    nanosleep(&ts, NULL);
}

__attribute__((constructor)) static void
fork_guard_init(void)
{
    pthread_atfork(pause_before_fork, NULL, NULL);
}
