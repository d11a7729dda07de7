/*
 * lock.c - robust, process-shared mutexes (lock.h).
 *
 * glibc builds PTHREAD_MUTEX_ROBUST mutexes on robust futexes: when a holder
 * dies the kernel hands the lock to the next locker with EOWNERDEAD.  That
 * locker repairs what the lock guards, marks the mutex consistent and counts
 * the repair in the segment header (summed into SHM_C_LOCK_REPAIRS), all
 * before shm_lock() returns, so no caller ever sees a dead owner.
 * Errors: 0 or -errno (pthread's return value, negated).
 */
#include "shm/lock.h"

#include <errno.h>
#include <pthread.h>

#include "shm/layout.h"

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

/*
 * shm_lock - see lock.h.  seg may be NULL (no repair is counted then).  The
 * repair runs before pthread_mutex_consistent(): should this process die
 * inside it, the next locker gets EOWNERDEAD again and repairs afresh.
 */
int
shm_lock(struct shm_seg *seg, pthread_mutex_t *m,
         void (*repair)(struct shm_seg *seg, void *arg), void *arg)
{
    int rc = pthread_mutex_lock(m);

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
