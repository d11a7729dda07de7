/*
 * lock.h - robust, process-shared mutexes for the segment.
 *
 * A worker can be SIGKILLed while holding one.  The next locker then gets
 * EOWNERDEAD: shm_lock() calls the repair function the lock's owner gave,
 * marks the mutex consistent, counts the repair, and returns 0 with the lock
 * held, so callers never see the dead owner.  Repair runs under the lock and
 * must neither block nor log (log after unlocking if needed).
 *
 * A worker can also be stopped (SIGSTOP, a debugger) or spin while holding
 * one, alive, until the master's watchdog kills it.  The master must not
 * wait for that: it bounds its waits (shm_lock_bound), and a wait that
 * reaches the bound fails with -ETIMEDOUT, the lock not taken.  Every call
 * the master makes into the segment copes with that: it leaves what it
 * guards as it was (or in a state a later call finishes) and the master
 * tries again on a later tick.  Workers wait as long as it takes.
 */
#ifndef MAYFLY_SHM_LOCK_H
#define MAYFLY_SHM_LOCK_H

#include <pthread.h>
#include <stdint.h>

struct shm_seg;

/* shm_lock_init - PTHREAD_PROCESS_SHARED + PTHREAD_MUTEX_ROBUST.  0/-errno. */
int shm_lock_init(pthread_mutex_t *m);

/*
 * shm_lock - lock m; on EOWNERDEAD call repair(seg, arg) then
 * pthread_mutex_consistent().  Returns 0 with the lock held, or -errno:
 * -ETIMEDOUT when the calling thread's bound (shm_lock_bound) was reached,
 * -ENOTRECOVERABLE only if an earlier repair was skipped (a bug).
 */
int shm_lock(struct shm_seg *seg, pthread_mutex_t *m,
             void (*repair)(struct shm_seg *seg, void *arg), void *arg);

/* shm_unlock - release m. */
void shm_unlock(pthread_mutex_t *m);

/*
 * shm_lock_bound - the calling thread's lock waits from now on: each waits
 * ms at most, and once one has waited that long in vain, the others until
 * the next call only try (a holder that keeps one lock that long may well
 * keep it longer, and may hold others: one wait is what the round pays).
 * 0 (the default, and what a forked worker sets): wait as long as it takes.
 * The master calls it at every wake-up of its loop, so a round of its loop
 * waits ms at most in all, however many locks are held.
 */
void shm_lock_bound(uint32_t ms);

/*
 * shm_lock_timeouts - how many of the calling thread's lock waits ended at
 * the bound so far.  Compared before and after a call, it tells whether
 * the call met a lock it could not take (so left something to do again).
 */
uint64_t shm_lock_timeouts(void);

#endif
