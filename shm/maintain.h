/*
 * maintain.h - the master's upkeep of the queues in the segment: periodic
 * maintenance (lease expiry, ttl, idle groups and queues, relief of a full
 * queue table) and the reaping of a dead worker's slot.  Workers never
 * call these.
 *
 * Locking: each call takes the locks it needs, one partition lock at a
 * time (a queue's lock, then one partition lock, to forget groups), and
 * releases them before returning.  Every wait is the master's, so bounded
 * (lock.h): what a held lock kept from this call is left for a later one.
 */
#ifndef MAYFLY_SHM_MAINTAIN_H
#define MAYFLY_SHM_MAINTAIN_H

#include <stdint.h>

#include "shm/segment.h"

/*
 * shm_maintain - master, about every 100 ms: expire leases (waking waiters),
 * drop ttl-expired messages, forget groups idle for implicit_idle_s, collect
 * idle empty implicit queues, and, with the queue table past 7/8 full,
 * empty implicit queues read in queue mode alone and unpolled for a
 * second, down to 3/4 (logged).  Returns 0 or -errno.
 */
int shm_maintain(struct shm_seg *seg, uint64_t now);

/*
 * shm_worker_reap - master, after worker slot w died: repair every lock it
 * held, return its arena cells and in-flight chains, clear its waiter bits
 * and wake queue, so a new worker can take the slot.  0, or -ETIMEDOUT when
 * a lock was held past the master's bound (lock.h): the slot is not ready
 * then, and reaping again (on a later tick) finishes it.
 */
int shm_worker_reap(struct shm_seg *seg, int worker);

#endif
