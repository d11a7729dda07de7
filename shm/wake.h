/*
 * wake.h - waking parked pops across worker processes.
 *
 * Each worker slot has a bounded multi-producer wake queue of 64-bit handles
 * (which queue or partition received something).  A push that finds worker
 * w's waiter bit set posts the handle to w's queue and, once the partition
 * lock is released, writes w's eventfd.  A full queue sets an overflow flag
 * instead: w then retries all its parked pops.  Lock-free (atomics only), so
 * it may be called under a partition lock; the eventfd write may not.
 */
#ifndef MAYFLY_SHM_WAKE_H
#define MAYFLY_SHM_WAKE_H

#include <stdint.h>

struct shm_seg;

/* shm_wake_post - queue handle for worker w; returns 1 if w's eventfd needs a
 * write (first post since w last drained), else 0.  Safe under a lock. */
int shm_wake_post(struct shm_seg *seg, int w, uint64_t handle);

/* shm_wake_kick - write worker w's eventfd.  Never under a lock. */
void shm_wake_kick(struct shm_seg *seg, int w);

/* shm_wake_disarm - worker w is awake and calls shm_wake_drain before it
 * sleeps again: until then posts need no eventfd write (the drain re-arms). */
void shm_wake_disarm(struct shm_seg *seg, int w);

/* shm_wake_pending - whether worker w's queue holds a handle (or has
 * overflowed): its next drain wakes something.  Reads only. */
int shm_wake_pending(struct shm_seg *seg, int w);

/* shm_wake_reset - master: empty dead worker w's queue. */
void shm_wake_reset(struct shm_seg *seg, int w);

/* shm_wake_drain is declared in broker.h. */

#endif
