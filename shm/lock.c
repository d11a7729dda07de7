/*
 * lock.c - robust, process-shared mutexes (lock.h).
 *
 * glibc builds PTHREAD_MUTEX_ROBUST mutexes on robust futexes: when a holder
 * dies the kernel hands the lock to the next locker with EOWNERDEAD.  That
 * locker repairs what the lock guards, marks the mutex consistent and counts
 * the repair in the segment header (summed into SHM_C_LOCK_REPAIRS), all
 * before shm_lock() returns, so no caller ever sees a dead owner.  A bounded
 * wait (pthread_mutex_clocklock, or trylock once the round's wait is spent)
 * reports a dead owner in the same way, so the master repairs as a worker
 * does.  The bound is per thread: the master's loop is one thread, and a
 * test's threads each keep their own.  Two traps of glibc: unlocking after
 * EOWNERDEAD without pthread_mutex_consistent() poisons the lock for good
 * (ENOTRECOVERABLE), and #ifdef PTHREAD_MUTEX_ROBUST is always false (it
 * is an enum).
 * Errors: 0 or -errno (pthread's return value, negated).
 */
#include "shm/lock.h"

#include <errno.h>
#include <pthread.h>
#include <time.h>

#include "shm/layout.h"

static _Thread_local uint32_t bound_ms; /* 0: unbounded */
static _Thread_local int spent;         /* this round's wait ran out */
static _Thread_local uint64_t timeouts;

/* shm_lock_init - see lock.h. */
int
shm_lock_init(pthread_mutex_t *m)
{
    pthread_mutexattr_t a;
    int rc;

    if ((rc = pthread_mutexattr_init(&a)) != 0)
        return -rc;
    if ((rc = pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED)) == 0 &&
        (rc = pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST)) == 0)
        rc = pthread_mutex_init(m, &a);
    pthread_mutexattr_destroy(&a);
    return -rc;
}

/* lock_wait - take m within the thread's bound: pthread's return value,
 * ETIMEDOUT when the bound was reached. */
static int
lock_wait(pthread_mutex_t *m)
{
    struct timespec until;
    int rc;

    if (bound_ms == 0)
        return pthread_mutex_lock(m);
    if (spent) {
        rc = pthread_mutex_trylock(m);
        if (rc == EBUSY)
            rc = ETIMEDOUT;
    } else {
        clock_gettime(CLOCK_MONOTONIC, &until);
        until.tv_sec += bound_ms / 1000;
        until.tv_nsec += (long)(bound_ms % 1000) * 1000000L;
        if (until.tv_nsec >= 1000000000L) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000L;
        }
        rc = pthread_mutex_clocklock(m, CLOCK_MONOTONIC, &until);
    }
    if (rc == ETIMEDOUT) {
        spent = 1;
        timeouts++;
    }
    return rc;
}

/*
 * shm_lock - see lock.h.  seg may be NULL (no repair is counted then).  The
 * repair runs before pthread_mutex_consistent(): should this process die
 * inside it, the next locker gets EOWNERDEAD again and repairs afresh.
 */
int
shm_lock(struct shm_seg *seg, pthread_mutex_t *m,
         void (*repair)(struct shm_seg *seg, void *arg), void *arg)
{
    int rc = lock_wait(m);

    if (rc == EOWNERDEAD) {
        if (repair != NULL)
            repair(seg, arg);
        rc = pthread_mutex_consistent(m);
        if (rc != 0) {
            pthread_mutex_unlock(m);
            return -rc;
        }
        if (seg != NULL)
            atomic_fetch_add_explicit(&seg->hdr->lock_repairs, 1,
                                      memory_order_relaxed);
    }
    return -rc;
}

/* shm_unlock - see lock.h. */
void
shm_unlock(pthread_mutex_t *m)
{
    pthread_mutex_unlock(m);
}

/* shm_lock_bound - see lock.h. */
void
shm_lock_bound(uint32_t ms)
{
    bound_ms = ms;
    spent = 0;
}

/* shm_lock_timeouts - see lock.h. */
uint64_t
shm_lock_timeouts(void)
{
    return timeouts;
}
