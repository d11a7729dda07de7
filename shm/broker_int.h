/*
 * broker_int.h - broker.c's steps that handover.c composes with: partition
 * locking with its generation check, group creation, the node-cap check,
 * wake-ups and due-heap scheduling.  shm/-internal: not part of the public
 * face (broker.h), and each is exactly what broker.c's own operations do,
 * so a hand-over locks, creates groups and wakes as a push or a pop does.
 *
 * Locking: as stated per call; lock order as in DESIGN-broker.md (queue
 * lock, then one partition lock).  Errors: 0 or -errno.
 */
#ifndef MAYFLY_SHM_BROKER_INT_H
#define MAYFLY_SHM_BROKER_INT_H

#include <stdint.h>

#include "shm/broker.h"
#include "shm/dir.h"

/* shm_broker_part_lock - lock partition pr as worker w (repairing after a
 * dead holder); -ESTALE when the record was freed or reused meanwhile. */
int shm_broker_part_lock(struct shm_seg *seg, int w, struct shm_ref pr);

/* shm_broker_group_hash - the hash partitions key group states by. */
uint64_t shm_broker_group_hash(struct shm_name group);

/* shm_broker_group_ensure - make sure queue qr's registry knows group
 * (created with from when new) and partition pr has a state for it, as a
 * first pop does (queue lock, then pr's lock; neither held on return).
 * 0, -ESTALE, -ENOBUFS, -EOVERFLOW (groups per queue). */
int shm_broker_group_ensure(struct shm_seg *seg, int w, struct shm_ref qr,
                            struct shm_ref pr, struct shm_name group,
                            enum shm_from from, uint64_t now);

/* shm_broker_room - would cost more bytes leave the node cap's lease
 * reserve free?  (The check a push makes before allocating.) */
int shm_broker_room(struct shm_seg *seg, uint64_t cost);

/* shm_broker_chains_free - free a list of INFLIGHT chains joined by their
 * next fields (no lock). */
void shm_broker_chains_free(struct shm_seg *seg, int w, uint32_t first);

/* shm_broker_wake_post_locked - post the waiters of pr and of qr (clearing
 * their bits); workers whose eventfd needs a write are added to *kick.
 * Under pr's lock. */
void shm_broker_wake_post_locked(struct shm_seg *seg, struct shm_ref qr,
                                 struct shm_ref pr, uint64_t *kick);

/* shm_broker_wake_kick - write the eventfds of kick.  No lock held. */
void shm_broker_wake_kick(struct shm_seg *seg, uint64_t kick);

/* shm_broker_part_due_locked - tell the due heap when partition idx next
 * needs maintenance (earliest lease deadline, oldest message + ttl).
 * Under the partition's lock. */
void shm_broker_part_due_locked(struct shm_seg *seg, uint32_t idx,
                                const struct shm_part *p,
                                const struct shm_queue *q);

#endif
