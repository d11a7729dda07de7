/*
 * fork_guard.c - linked into every test binary: before each fork of the
 * process (pthread_atfork), wait until every other thread of the process
 * is blocked in a system call, so that none is inside ASan's allocator
 * holding one of its locks when the fork copies them; FORK_SETTLE_MAX_NS
 * at most, then fork anyway.
 *
 * GCC 12's AddressSanitizer has no fork handler for its allocator: a
 * sandbox forked while the runner's nanomsg thread held a size class's lock
 * waits for that lock forever, and the runner waits for the sandbox
 * (test/run-all.sh detects that and runs the binary again).  It struck most
 * at the runner's start, the first sandbox forked while the runner's
 * threads were still starting (150 ms after it, twice running in a row for
 * one binary, 2026-12-02), and when a sandbox ends (the next one is forked
 * while the runner's receiving thread handles the last one's messages).
 *
 * A thread holds such a lock only while it runs allocator code, or while it
 * maps memory for the allocator (mmap and its kin, made under the lock): so
 * a thread the kernel reports blocked in another system call
 * (/proc/self/task/<tid>/syscall) holds none.  That makes the wedge
 * unlikely, not impossible: a thread may wake and take the lock between
 * the look and the fork.  A single-threaded process (most sandboxes) forks
 * at once.
 */
#include <sys/syscall.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#define FORK_SETTLE_MAX_NS (20 * 1000 * 1000L) /* a busy thread: fork then */
#define FORK_LOOK_NS       (100 * 1000L)       /* between two looks */
#define FORK_BLIND_NS      (5 * 1000 * 1000L)  /* when /proc cannot say */

/* allocator_call - the allocator makes system call nr holding its lock. */
static int
allocator_call(long nr)
{
    return nr == SYS_mmap || nr == SYS_munmap || nr == SYS_mremap ||
           nr == SYS_madvise || nr == SYS_mprotect;
}

/* thread_settled - thread tid (a name in task, /proc/self/task) is blocked
 * in a system call other than the allocator's, or gone: 1; 0 when it reads
 * "running", or "-1 ..." (in the kernel outside a system call); -1 when
 * the file cannot be read (a kernel or sandbox that hides it). */
static int
thread_settled(int task, const char *tid)
{
    char path[300], text[64];
    ssize_t n;
    int fd;

    snprintf(path, sizeof(path), "%s/syscall", tid);
    if ((fd = openat(task, path, O_RDONLY | O_CLOEXEC)) == -1)
        return errno == ENOENT || errno == ESRCH ? 1 : -1;
    n = read(fd, text, sizeof(text) - 1);
    close(fd);
    if (n <= 0)
        return n == 0 || errno == ESRCH ? 1 : -1;
    text[n] = '\0';
    if (text[0] < '0' || text[0] > '9')
        return 0;
    return !allocator_call(strtol(text, NULL, 10));
}

/* others_settled - every thread of the process but the caller is settled:
 * 1, 0, or -1 when /proc cannot say.  Nothing allocated: that would take
 * the allocator's locks here. */
static int
others_settled(void)
{
    long self = syscall(SYS_gettid), n;
    char ents[4096];
    int task, ok = 1;

    task = open("/proc/self/task", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (task == -1)
        return -1;
    while (ok == 1 && (n = getdents64(task, ents, sizeof(ents))) > 0) {
        for (long off = 0; off < n && ok == 1;) {
            struct dirent64 *d = (struct dirent64 *)(void *)(ents + off);
            off += d->d_reclen;
            if (d->d_name[0] != '.' && atol(d->d_name) != self)
                ok = thread_settled(task, d->d_name);
        }
    }
    close(task);
    return ok;
}

/* settle_before_fork - the prepare handler: look until the others are
 * settled, FORK_SETTLE_MAX_NS at most; when /proc cannot say, pause
 * FORK_BLIND_NS, which lets a thread inside the allocator leave it. */
static void
settle_before_fork(void)
{
    struct timespec look = {0, FORK_LOOK_NS}, t0, now;
    int settled, saved = errno; /* the caller's, for after the fork */

    clock_gettime(CLOCK_MONOTONIC, &t0);
    while ((settled = others_settled()) != 1) {
        if (settled == -1) {
            nanosleep(&(struct timespec){0, FORK_BLIND_NS}, NULL);
            break;
        }
        clock_gettime(CLOCK_MONOTONIC, &now);
        if ((now.tv_sec - t0.tv_sec) * 1000000000L + now.tv_nsec - t0.tv_nsec >=
            FORK_SETTLE_MAX_NS)
            break;
        nanosleep(&look, NULL);
    }
    errno = saved;
}

__attribute__((constructor)) static void
fork_guard_init(void)
{
    pthread_atfork(settle_before_fork, NULL, NULL);
}
