/*
 * queue_admin.h - queue administration and listing: reset, delete and
 * declare a queue, list queues, a queue's depth, the walks over
 * partitions, and the node's gauges.  Called by workers (the admin and
 * depth endpoints, routing an any-partition pop) and by the master
 * (applying configure entries, the hand-over scan, status).
 *
 * Names are byte strings as in broker.h.  Times are shm_now_ms() values.
 *
 * Locking: each call takes the locks it needs (the dir lock briefly per
 * lookup, a queue's lock, one partition lock at a time) and releases them
 * before returning.  Listings are snapshots taken one lock at a time, or
 * racy reads where said.  Errors: 0 or a count on success, -errno (as in
 * broker.h) on failure.
 */
#ifndef MAYFLY_SHM_QUEUE_ADMIN_H
#define MAYFLY_SHM_QUEUE_ADMIN_H

#include <stddef.h>
#include <stdint.h>

#include "shm/broker.h"
#include "shm/segment.h"

struct shm_gauges;

/* ---- reset, delete, declare ---------------------------------------------- */

/*
 * shm_queue_reset - drop every message, void leases, rewind groups; keeps the
 * declaration.  Returns messages dropped (0 for no such queue).
 */
int64_t shm_queue_reset(struct shm_seg *seg, int worker, struct shm_name queue,
                        uint64_t now);

/*
 * shm_queue_delete - drop contents and the queue itself.  Returns 1 when there
 * was something to delete, 0 when not, or -errno; -ETIMEDOUT (the master's
 * bounded wait, lock.h) when a lock it could not take kept part of it: what
 * went stays gone, and deleting again finishes it.
 */
int shm_queue_delete(struct shm_seg *seg, int worker, struct shm_name queue,
                     uint64_t now);

/*
 * shm_queue_declare - declare queue with opts (creating it): it keeps them,
 * is listed as declared and is never collected, until deleted.  The master
 * applies committed configure entries through this.  0 or -errno
 * (-ETIMEDOUT: a lock the master could not take, lock.h; declaring again
 * finishes it).
 */
int shm_queue_declare(struct shm_seg *seg, int worker, struct shm_name queue,
                      const struct shm_qopts *opts);

/* ---- listing and depth ----------------------------------------------- */

/* Per-queue view for the listing and depth. */
struct shm_queue_info {
    char name[SHM_NAME_MAX + 1];
    size_t name_len;
    int declared;
    uint64_t depth; /* messages held not yet completed by all groups */
    uint64_t leased;
    uint64_t waiting; /* parked pops */
    uint64_t bytes;   /* accounted bytes */
    uint32_t partitions;
    uint32_t groups;
    uint64_t drops_bounds, drops_ttl, drops_retry;
    struct shm_qopts opts;
};

struct shm_part_info {
    char name[SHM_NAME_MAX + 1];
    size_t name_len;
    uint64_t pending; /* for the group asked about, or held if none */
    uint64_t leased;
    uint64_t waiting;
    uint64_t bytes;
    uint64_t oldest_age_ms;
    uint64_t delayed; /* not visible yet, or retries waiting out a delay */
};

struct shm_group_info {
    char name[SHM_NAME_MAX + 1];
    size_t name_len;
    uint64_t pending; /* not yet delivered to this group */
    uint64_t skipped; /* evicted/expired before this group read them */
};

/*
 * shm_queue_list_after - call fn for each queue whose name starts with
 * prefix and sorts after after (bytes compared, a prefix first; empty: from
 * the start, else the next page of a listing cut at its limit), in name
 * order, at most limit; returns the number listed.  The info is read
 * without a lock (racy sums, the record's generation checked after).
 */
int shm_queue_list_after(struct shm_seg *seg, struct shm_name prefix,
                         struct shm_name after, uint32_t limit, uint64_t now,
                         void (*fn)(void *arg, const struct shm_queue_info *q),
                         void *arg);

/*
 * shm_queue_depth - fill *q and call part_fn per partition and group_fn per
 * group (only the named group when group.ptr != NULL).  -ENOENT when the
 * node holds no such queue.
 */
int shm_queue_depth(struct shm_seg *seg, struct shm_name queue,
                    const struct shm_name *group, uint64_t now,
                    struct shm_queue_info *q,
                    void (*part_fn)(void *arg, const struct shm_part_info *p),
                    void (*group_fn)(void *arg, const struct shm_group_info *g),
                    void *arg);

/* ---- partition walks ------------------------------------------------- */

/*
 * shm_part_each - call fn(arg, queue, part) for every partition that holds
 * messages (pending or leased), or none but a dedupe window with a key
 * still inside its queue's dedupeSeconds (SPEC §13: the window travels
 * with hand-over), in table order.  Names are read without
 * locks and checked against the record's generation afterwards; a record
 * freed or reused meanwhile is skipped.  fn NULL: only count them.  For
 * the master's hand-over scan.
 * Returns how many were listed.
 */
uint32_t shm_part_each(struct shm_seg *seg,
                       void (*fn)(void *arg, struct shm_name queue,
                                  struct shm_name part),
                       void *arg);

/*
 * shm_queue_part_each - call fn(arg, part, held) for each partition of
 * queue this node has (held: messages pending or leased, racy) until fn
 * returns nonzero, which is returned; 0 when none did or there is no such
 * queue.  For routing an any-partition pop.
 */
int
shm_queue_part_each(struct shm_seg *seg, struct shm_name queue, uint64_t now,
                    int (*fn)(void *arg, struct shm_name part, uint64_t held),
                    void *arg);

/* ---- gauges ---------------------------------------------------------- */

/* shm_gauges_read - read the gauges (struct shm_gauges, stats.h) by racy
 * sums over the tables, taking no lock. */
void shm_gauges_read(struct shm_seg *seg, uint64_t now, struct shm_gauges *g);

#endif
