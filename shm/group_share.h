/*
 * group_share.h - the groups a queue knows, as the cluster shares them
 * (SPEC §5: groups are the cluster's).  The master walks the queue table
 * to tell its peers every group its queues know (shm_groups_each), and
 * makes the groups its peers tell it known here (shm_group_learn), so a
 * message pushed to any node waits for every group the cluster knows.
 * The queue registry (ring.h, struct shm_grp) is the only state: nothing
 * is added to the segment.  Master only.
 *
 * Locking: a queue's lock per queue (the registry), and the dir lock
 * briefly for a lookup; no syscall or logging under a lock.  The master's
 * waits are bounded (lock.h): a queue whose lock is held past the bound is
 * left out of that walk, to be named by the next.  w is the caller's slot
 * (SHM_STATS_MASTER for the master).
 * Errors: 0 or -errno.
 */
#ifndef MAYFLY_SHM_GROUP_SHARE_H
#define MAYFLY_SHM_GROUP_SHARE_H

#include <stdint.h>

#include "shm/broker.h"
#include "shm/segment.h"

/* What shm_groups_each reports of one group: last_active is this node's
 * clock (ms). */
typedef void shm_group_fn(void *arg, struct shm_name queue,
                          struct shm_name group, enum shm_from from,
                          uint64_t last_active);

/*
 * shm_groups_each - call fn for each group of each live queue record from
 * index *next on, under that queue's lock (fn may malloc, nothing more),
 * visiting at most budget records; *next is where the next call goes on
 * (0 again after the last record).  Returns the groups reported.
 */
uint32_t shm_groups_each(struct shm_seg *seg, uint32_t *next, uint32_t budget,
                         shm_group_fn *fn, void *arg);

/*
 * shm_group_known - whether queue is held here and its registry knows
 * group (one lookup, then the queue lock briefly).  1 or 0 (no such queue
 * or group, or a lock not taken: as unknown).
 */
int shm_group_known(struct shm_seg *seg, int w, struct shm_name queue,
                    struct shm_name group);

/*
 * shm_group_learn - a peer's queue knows group, made with from and last
 * active at last_active (this node's clock): make it known to queue here
 * (with create, creating the queue as a push does), and keep the later
 * activity on the group and on the queue (a group active anywhere keeps
 * the queue alive everywhere).  0, -ENOENT (no such queue here, without
 * create), -ENOBUFS, -EOVERFLOW (a table or the queue's groups full),
 * -ETIMEDOUT (a lock held past the master's bound, lock.h: nothing made).
 */
int shm_group_learn(struct shm_seg *seg, int w, struct shm_name queue,
                    struct shm_name group, enum shm_from from,
                    uint64_t last_active, uint64_t now, int create);

#endif
