/*
 * due.h - the due heap: when each queue and partition next needs the
 * master's maintenance (lease expiry, ttl, idle groups, idle collection).
 *
 * A min-heap of (time, key) in the DIR region, one entry at most per record,
 * so the master's maintenance pops what is due and touches nothing else: its
 * cost follows the due work, not the number of queues.  Keys: a queue record
 * idx is key idx, a partition record idx is key max_queues + idx.
 *
 * The rule is "no later than": shm_due_at() only ever moves a key's time
 * earlier, and a visit that finds nothing to do reschedules the key from the
 * record's state.  So a stale entry (its record freed, reused, or its
 * deadline pushed back by an extend) costs one early visit and nothing more.
 * A worker changes a record's deadline under the record's own lock and then
 * calls shm_due_at() under that lock; the master takes the key off the heap
 * and then takes the record's lock to visit it, so either the worker sees
 * the key off the heap and puts it back, or the master's visit sees the
 * worker's change.
 *
 * Locking: one robust leaf lock (nothing is taken under it).  A holder that
 * dies leaves the heap half-sifted: the next locker puts every key ever
 * handed out back at time 0, so each record is visited once and rescheduled.
 * A schedule (or shm_due_all) that cannot take the lock -- the master's
 * wait is bounded (lock.h) -- has the next take do the same, so no key is
 * ever lost.
 */
#ifndef MAYFLY_SHM_DUE_H
#define MAYFLY_SHM_DUE_H

#include <stddef.h>
#include <stdint.h>

struct shm_seg;

/* shm_due_size - bytes the heap needs for keys keys (header included). */
size_t shm_due_size(uint32_t keys);

/* shm_due_init - set up the heap at base (zeroed memory).  0 or -errno. */
int shm_due_init(void *base, uint32_t keys);

/*
 * shm_due_queue / shm_due_part - make sure queue (partition) record idx is
 * visited no later than at (ms).  A racy read first: when the key is already
 * due by then, no lock is taken.
 */
void shm_due_queue(struct shm_seg *seg, uint32_t idx, uint64_t at);
void shm_due_part(struct shm_seg *seg, uint32_t idx, uint64_t at);

/*
 * shm_due_take - take off the heap up to max keys due at or before now,
 * earliest first, into keys.  Returns how many (0 also when the lock could
 * not be taken within the bound).  A taken key is off the heap until
 * someone schedules it again.
 */
uint32_t shm_due_take(struct shm_seg *seg, uint64_t now, uint32_t *keys,
                      uint32_t max);

/*
 * shm_due_all - every queue and partition record ever handed out is due now
 * (one visit each).  For a change that moves deadlines earlier than their
 * entries, such as a shorter implicit_idle_s on reload.
 */
void shm_due_all(struct shm_seg *seg);

/* shm_due_is_part - whether key names a partition; *idx gets its record. */
int shm_due_is_part(struct shm_seg *seg, uint32_t key, uint32_t *idx);

/* shm_due_when - when key is due, or UINT64_MAX while it is off the heap
 * (a racy read, exact when no one schedules or takes meanwhile). */
uint64_t shm_due_when(struct shm_seg *seg, uint32_t key);

/*
 * shm_due_check - under the heap's lock: n within the keys, every entry
 * earlier than neither of its children, each entry's key in range, on the
 * heap once, its pos naming its slot and its at its time + 1, and every key
 * off the heap with pos and at 0.  Returns 0, or -EUCLEAN with the first
 * broken rule as a sentence in why.
 */
int shm_due_check(struct shm_seg *seg, char *why, size_t len);

#endif
