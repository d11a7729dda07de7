/*
 * broker_int.h - the steps the broker's operations share: broker.c (the
 * workers' requests), queue_admin.c (reset, delete, declare, listings),
 * maintain.c (the master's maintenance and reaping) and part_move.c (a
 * partition's hand-over) compose them, so each locks, creates groups,
 * schedules and wakes exactly as the others do.  shm/-internal: not part
 * of the public face (broker.h, queue_admin.h, maintain.h).
 *
 * broker_steps.c defines the partition-level steps (records, partition
 * lists, the partition lock, wake-ups, due times, the node cap);
 * queue_lock.c the queue lock and what it guards (the group registry, the
 * freeing of a queue).
 *
 * Lock order: the dir lock briefly per lookup; a queue's lock, then one
 * partition lock; or a queue's lock, then the dir lock.  One
 * partition lock at a time.  Wake-ups are posted under the partition lock
 * and kicked after every lock is released.  No syscalls or logging under
 * any lock, and no malloc under a partition lock (a queue's partition list
 * past SHM_PART_STACK is malloc'd, under its queue lock where the caller
 * holds that).  Errors: 0 or -errno.
 */
#ifndef MAYFLY_SHM_BROKER_INT_H
#define MAYFLY_SHM_BROKER_INT_H

#include <stdatomic.h>
#include <stdint.h>

#include "shm/broker.h"
#include "shm/dir.h"

struct shm_ring_ctx;

#define SHM_BROKER_TRIES 16 /* lookups retried after a concurrent free */
#define SHM_PART_STACK   64 /* partitions listed without malloc */
#define SHM_GROUP_SEED   0x67726f7570ULL /* group names' hash seed */

/* ---- records and partition lists (broker_steps.c) ---------------------- */

/* shm_handle_of - the handle a parked pop waits for, and wakes post: kind
 * (bit 63: partition), record index, generation. */
static inline uint64_t
shm_handle_of(int part, uint32_t idx, uint32_t gen)
{
    return ((uint64_t)(part != 0) << 63) | ((uint64_t)idx << 32) | gen;
}

/* shm_group_hash - the hash partitions key group states by. */
static inline uint64_t
shm_group_hash(struct shm_name g)
{
    struct shm_name n = {g.len ? g.ptr : "", g.len};

    return shm_dir_name_hash(n, SHM_GROUP_SEED);
}

/* shm_queue_same - is queue record qr still the one looked up? */
static inline int
shm_queue_same(struct shm_seg *seg, struct shm_ref qr)
{
    struct shm_queue *q = shm_dir_queue(seg, qr.idx);

    return atomic_load(&q->alive) && q->gen == qr.gen;
}

/*
 * struct shm_part_list - a queue's partitions as listed at one moment (no
 * lock held after): up to SHM_PART_STACK in stack, more in a malloc'd v.
 * It points into itself: pass it by pointer, never copy it.
 */
struct shm_part_list {
    struct shm_ref *v; /* stack, or malloc'd */
    uint32_t n;
    struct shm_ref stack[SHM_PART_STACK];
};

/* shm_part_list_get - list queue qr's partitions into *l (dir lock
 * briefly).  Without memory for more, only the first SHM_PART_STACK.  0,
 * or -errno with *l empty when the dir lock was not taken (-ETIMEDOUT:
 * the master's bounded wait, lock.h): not a queue without partitions. */
int shm_part_list_get(struct shm_seg *seg, struct shm_ref qr,
                      struct shm_part_list *l);

/* shm_part_list_free - free what shm_part_list_get allocated. */
void shm_part_list_free(struct shm_part_list *l);

/* shm_queue_held - what queue qr holds: messages and message bytes (and,
 * when not NULL, leases and parked pops), summed over its partitions by
 * racy reads (a bounded walk: records are only reused as records of the
 * same kind).  No lock needed. */
void shm_queue_held(struct shm_seg *seg, struct shm_ref qr, uint64_t *len,
                    uint64_t *bytes, uint64_t *leased, uint64_t *waiting);

/* ---- the partition lock (broker_steps.c) ------------------------------- */

/* shm_part_lock - lock partition pr as worker w (repairing after a dead
 * holder); -ESTALE when the record was freed or reused meanwhile. */
int shm_part_lock(struct shm_seg *seg, int w, struct shm_ref pr);

/* shm_part_lock_ctx - shm_part_lock, then fill *c for partition pr of
 * queue q at now: what the _locked calls of ring.h take.  On an error
 * nothing is locked and *c is untouched. */
int shm_part_lock_ctx(struct shm_seg *seg, int w, struct shm_ref pr,
                      struct shm_queue *q, uint64_t now,
                      struct shm_ring_ctx *c);

/* shm_part_list_each_locked - for each partition of l in turn: lock it as
 * w, call fn(c, arg), unlock it; one lock at a time, a partition freed
 * meanwhile skipped, and one whose lock the master could not take within
 * its bound (lock.h) too.  Returns the sum of what fn returned. */
uint64_t shm_part_list_each_locked(
    struct shm_seg *seg, int w, const struct shm_part_list *l,
    struct shm_queue *q, uint64_t now,
    uint64_t (*fn)(struct shm_ring_ctx *c, void *arg), void *arg);

/* ---- wake-ups, due times, the node cap (broker_steps.c) ---------------- */

/* shm_waiters_post - post handle to each worker of mask (waiter bits
 * already taken off their record); those whose eventfd needs a write are
 * added to *kick. */
void shm_waiters_post(struct shm_seg *seg, uint64_t mask, uint64_t handle,
                      uint64_t *kick);

/* shm_waiters_post_locked - post the waiters of pr and of qr (clearing
 * their bits), adding to *kick as shm_waiters_post.  Under pr's lock. */
void shm_waiters_post_locked(struct shm_seg *seg, struct shm_ref qr,
                             struct shm_ref pr, uint64_t *kick);

/* shm_waiters_kick - write the eventfds of kick.  No lock held. */
void shm_waiters_kick(struct shm_seg *seg, uint64_t kick);

/* shm_part_due_locked - tell the due heap when partition idx next needs
 * maintenance (earliest lease deadline, oldest message + ttl, the head's
 * own ttl).  Under the partition's lock. */
void shm_part_due_locked(struct shm_seg *seg, uint32_t idx,
                         const struct shm_part *p, const struct shm_queue *q);

/* shm_cap_room - would cost more bytes leave the node cap's lease reserve
 * free?  (The check a push makes before allocating.) */
int shm_cap_room(struct shm_seg *seg, uint64_t cost);

/* shm_chains_free - free a list of INFLIGHT message chains joined by their
 * next fields (no lock). */
void shm_chains_free(struct shm_seg *seg, int w, uint32_t first);

/* ---- the queue lock and the group registry (queue_lock.c) -------------- */

/* shm_queue_lock - lock queue qr as worker w (w < 0: a reader without a
 * slot), repairing the registry after a dead holder; -ESTALE when the
 * record was freed or reused meanwhile. */
int shm_queue_lock(struct shm_seg *seg, int w, struct shm_ref qr);

/* shm_queue_lock_record - lock queue record q as it is, whatever it holds
 * now, repairing after a dead holder (the master's reap: w is
 * SHM_STATS_MASTER).  Unlock with shm_unlock(&q->lock). */
int shm_queue_lock_record(struct shm_seg *seg, int w, struct shm_queue *q);

/* shm_registry_forget - unlink the registry entry *link of q and free it
 * (its states in the partitions are gone already).  Queue lock held. */
void shm_registry_forget(struct shm_seg *seg, int w, struct shm_queue *q,
                         uint32_t *link);

/* shm_registry_ensure - group name's (hash h) entry in q's registry into
 * *e, made with from when missing.  Queue lock held.  0, -ENOBUFS,
 * -EOVERFLOW (groups per queue). */
int shm_registry_ensure(struct shm_seg *seg, int w, struct shm_queue *q,
                        struct shm_name name, uint64_t h, enum shm_from from,
                        uint64_t now, uint32_t *e);

/* shm_group_register - make sure group name (hash h) is known to queue qr,
 * created with from when new, and counts as active (queue lock).  0,
 * -ESTALE, -ENOBUFS, -EOVERFLOW (groups per queue). */
int shm_group_register(struct shm_seg *seg, int w, struct shm_ref qr,
                       struct shm_name name, uint64_t h, enum shm_from from,
                       uint64_t now);

/* shm_group_ensure - shm_group_register, and a state for the group in
 * partition pr, as a first pop makes (queue lock, then pr's lock; neither
 * held on return).  0, -ESTALE, -ENOBUFS, -EOVERFLOW. */
int shm_group_ensure(struct shm_seg *seg, int w, struct shm_ref qr,
                     struct shm_ref pr, struct shm_name name, uint64_t h,
                     enum shm_from from, uint64_t now);

/* shm_queue_free_locked - free queue qr's partitions (only idle, empty ones
 * when idle_ms != 0) and, when none is left, its registry and record.
 * Queue lock held on entry, released on return.  Returns the messages
 * dropped; *freed says whether the queue went.  A lock not taken within
 * the master's bound (lock.h) stops it there: the partitions freed so far
 * stay freed, the queue and its registry stay as they are, and a later
 * call goes on. */
uint64_t shm_queue_free_locked(struct shm_seg *seg, int w, struct shm_ref qr,
                               uint64_t now, uint64_t idle_ms, int *freed);

#endif
