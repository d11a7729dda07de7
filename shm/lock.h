/*
 * lock.h - robust, process-shared mutexes for the segment.
 *
 * A worker can be SIGKILLed while holding one.  The next locker then gets
 * EOWNERDEAD: shm_lock() calls the repair function the lock's owner gave,
 * marks the mutex consistent, counts the repair, and returns 0 with the lock
 * held, so callers never see the dead owner.  Repair runs under the lock and
 * must neither block nor log (log after unlocking if needed).
 */
#ifndef MAYFLY_SHM_LOCK_H
#define MAYFLY_SHM_LOCK_H

#include <pthread.h>

struct shm_seg;

/* shm_lock_init - PTHREAD_PROCESS_SHARED + PTHREAD_MUTEX_ROBUST.  0/-errno. */
int shm_lock_init(pthread_mutex_t *m);

/*
 * shm_lock - lock m; on EOWNERDEAD call repair(seg, arg) then
 * pthread_mutex_consistent().  Returns 0 with the lock held, or -errno
 * (-ENOTRECOVERABLE only if an earlier repair was skipped: a bug).
 */
int shm_lock(struct shm_seg *seg, pthread_mutex_t *m,
             void (*repair)(struct shm_seg *seg, void *arg), void *arg);

/* shm_unlock - release m. */
void shm_unlock(pthread_mutex_t *m);

#endif
