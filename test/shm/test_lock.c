/*
 * test_lock.c - robust process-shared locks: a holder that dies (exit or
 * SIGKILL) is repaired exactly once by the next locker, which then holds
 * the lock; the repair is counted in SHM_C_LOCK_REPAIRS.
 */
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "shm/lock.h"
#include "shm/segment.h"
#include "shm/stats.h"

struct lock_fixture {
    struct shm_seg seg;
    pthread_mutex_t *m;
    _Atomic int *repairs;
};

static void
lock_setup(struct lock_fixture *f)
{
    struct shm_params p = {.max_bytes = 1 << 20, .workers = 2};

    cr_assert_eq(shm_segment_create(&p, &f->seg), 0);
    void *mem = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
                     MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    cr_assert_neq(mem, MAP_FAILED);
    f->m = mem;
    f->repairs = (_Atomic int *)((char *)mem + 2048);
    cr_assert_eq(shm_lock_init(f->m), 0);
}

static void
count_repair(struct shm_seg *seg, void *arg)
{
    (void)seg;
    atomic_fetch_add((_Atomic int *)arg, 1);
}

static uint64_t
repairs_counted(struct shm_seg *seg)
{
    uint64_t c[SHM_C_COUNT];

    shm_counters_sum(seg, c);
    return c[SHM_C_LOCK_REPAIRS];
}

/* child_lock_then - fork a child that takes the lock, reports it on a pipe,
 * and then exits (how == 0) or waits to be killed (how == 1). */
static pid_t
child_lock_then(struct lock_fixture *f, int how)
{
    int fds[2];
    char c;

    cr_assert_eq(pipe(fds), 0);
    pid_t pid = fork();
    cr_assert_neq(pid, -1);
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL); /* a failed test leaves none */
        if (shm_lock(&f->seg, f->m, NULL, NULL) != 0)
            _exit(2);
        if (write(fds[1], "x", 1) != 1)
            _exit(3);
        if (how == 0)
            _exit(0);
        for (;;)
            pause();
    }
    close(fds[1]);
    cr_assert_eq(read(fds[0], &c, 1), 1);
    close(fds[0]);
    return pid;
}

Test(shm_lock, uncontended_lock_needs_no_repair)
{
    struct lock_fixture f;

    lock_setup(&f);
    for (int i = 0; i < 3; i++) {
        cr_assert_eq(shm_lock(&f.seg, f.m, count_repair, f.repairs), 0);
        shm_unlock(f.m);
    }
    cr_assert_eq(atomic_load(f.repairs), 0);
    cr_assert_eq(repairs_counted(&f.seg), 0);
}

Test(shm_lock, holder_exiting_is_repaired_once)
{
    struct lock_fixture f;
    int st;

    lock_setup(&f);
    pid_t pid = child_lock_then(&f, 0);
    cr_assert_eq(waitpid(pid, &st, 0), pid);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);

    cr_assert_eq(shm_lock(&f.seg, f.m, count_repair, f.repairs), 0);
    cr_assert_eq(atomic_load(f.repairs), 1);
    cr_assert_eq(pthread_mutex_trylock(f.m), EBUSY, "lock must be held");
    shm_unlock(f.m);

    cr_assert_eq(shm_lock(&f.seg, f.m, count_repair, f.repairs), 0);
    shm_unlock(f.m);
    cr_assert_eq(atomic_load(f.repairs), 1);
    cr_assert_eq(repairs_counted(&f.seg), 1);
}

Test(shm_lock, sigkilled_holder_is_repaired_once)
{
    struct lock_fixture f;
    int st;

    lock_setup(&f);
    pid_t pid = child_lock_then(&f, 1);
    cr_assert_eq(kill(pid, SIGKILL), 0);
    cr_assert_eq(waitpid(pid, &st, 0), pid);
    cr_assert(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);

    cr_assert_eq(shm_lock(&f.seg, f.m, count_repair, f.repairs), 0);
    cr_assert_eq(atomic_load(f.repairs), 1);
    shm_unlock(f.m);
    cr_assert_eq(shm_lock(&f.seg, f.m, count_repair, f.repairs), 0);
    shm_unlock(f.m);
    cr_assert_eq(atomic_load(f.repairs), 1);
    cr_assert_eq(repairs_counted(&f.seg), 1);
}

/* wait_blocked - until process pid sleeps in futex(2) with the mutex word
 * showing a waiter: it is blocked on m, not about to lock it. */
static void
wait_blocked(pthread_mutex_t *m, pid_t pid)
{
    char path[64], text[64];

    snprintf(path, sizeof(path), "/proc/%d/syscall", (int)pid);
    for (int i = 0;; i++) {
        FILE *f = fopen(path, "r");
        long nr = -1;
        int waiter = __atomic_load_n(&m->__data.__lock, __ATOMIC_SEQ_CST) &
                     (int)0x80000000;

        if (f != NULL) {
            if (fgets(text, sizeof(text), f) != NULL)
                nr = text[0] >= '0' && text[0] <= '9' ? atol(text) : -1;
            fclose(f);
        }
        if (waiter && nr == SYS_futex)
            return;
        cr_assert(i < 200000, "the waiter never blocked on the lock");
        nanosleep(&(struct timespec){0, 50000}, NULL);
    }
}

Test(shm_lock, blocked_locker_gets_lock_when_holder_is_killed)
{
    struct lock_fixture f;

    lock_setup(&f);
    pid_t holder = child_lock_then(&f, 1);
    /* A second child blocks in shm_lock; it reports its repair count. */
    pid_t waiter = fork();
    cr_assert_neq(waiter, -1);
    if (waiter == 0) {
        if (shm_lock(&f.seg, f.m, count_repair, f.repairs) != 0)
            _exit(2);
        shm_unlock(f.m);
        _exit(atomic_load(f.repairs) == 1 ? 0 : 1);
    }
    /* Blocked before the holder dies, or this would test a lock taken
     * after the death (the test above). */
    wait_blocked(f.m, waiter);
    cr_assert_eq(kill(holder, SIGKILL), 0);
    cr_assert_eq(waitpid(holder, NULL, 0), holder);
    int st;
    cr_assert_eq(waitpid(waiter, &st, 0), waiter);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    cr_assert_eq(atomic_load(f.repairs), 1);
    cr_assert_eq(repairs_counted(&f.seg), 1);
}
