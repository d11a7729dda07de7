/*
 * tail.h - reading a partition without consuming it: a stream without a
 * group (SPEC §11, DESIGN.md §4) copies what a partition holds in a range of
 * sequence numbers, holds nothing, and parks for the next push.
 *
 * A tail read takes no lease, makes no group and marks nothing read: a
 * message no group has read stays until one does, and one every group is
 * done with is freed as before, read by tails or not (at most once).  It
 * drops ttl-expired messages as a pop does, and reads a held partition
 * (shm_part_hold) by its numbers: up to the horizon (shm/horizon.h) the
 * order is the numbers', whatever a hand-over brings.
 *
 * Locking: the dir lock briefly for the lookup, then the partition's lock
 * for the copy and the park; nothing held on return.  No malloc, syscall
 * or logging under a lock.  Errors: a count or -errno, as listed per call.
 */
#ifndef MAYFLY_SHM_TAIL_H
#define MAYFLY_SHM_TAIL_H

#include <stdint.h>

#include "shm/broker.h"
#include "shm/segment.h"

/*
 * struct shm_tail_pos - where a read stopped in a partition: the last
 * message it walked at or below upto.  Given back to the next read of the
 * same partition (with after at or above its seq), that read starts there
 * instead of at the oldest message; one that no longer holds (the message
 * left, the record was reused) is ignored under the lock.  Zeroed: none.
 * Sound while reads stay at or below the horizon: a hand-over's adopt puts
 * messages below its kept numbers, which the horizon has not passed.
 */
struct shm_tail_pos {
    uint64_t handle; /* the partition's record (shm_pop_handle) */
    uint64_t seq;    /* the message's */
    uint32_t ref;    /* its cell */
    uint32_t pad;
};

struct shm_tail_req {
    struct shm_name queue;
    struct shm_name part;    /* a partition: 1..SHM_NAME_MAX bytes */
    uint64_t after;          /* copy the messages with after < seq <= upto, */
    uint64_t upto;           /* oldest first; upto: shm_horizon() or below */
    int newest_only;         /* only the newest of them (from=last) */
    int park;                /* set this worker's waiter bit (see shm_tail) */
    struct shm_tail_pos pos; /* what the last read returned, or zeroed */
};

struct shm_tail_res {
    uint64_t handle; /* the wake handle a park waits for (shm_pop_handle);
                        0: no such partition (not parked) */
    uint64_t newest; /* the newest seq the partition holds (0: none); above
                        upto, it has more for a later read */
    int more;        /* the sink filled before upto: read on after the last
                        record's seq */
    int gap;         /* a message with seq > after left the partition
                        before this read copied (completed by every group,
                        dropped by ttl, this read's own included, or by
                        bounds, reset, moved, wiped): what follows after is
                        not all there was.  Only what this partition record
                        saw: one collected while idle and made again forgets */
    struct shm_tail_pos pos; /* give it to the next read */
};

/*
 * shm_tail - copy (queue, part)'s messages with req->after < seq <=
 * req->upto into sink (records as shm_pop writes them, struct shm_popped
 * with attempts 1), oldest first, or only the newest of them with
 * newest_only; withdrawn requests are passed over.  Stops early when the
 * next record would not fit (res->more); when not even the first fits,
 * -ENOMEM with sink->need set.  With req->park, this worker's waiter bit
 * is set on the partition under the same lock hold, whatever was copied:
 * a push after the read wakes it (shm_wake_drain gives res->handle).  A
 * partition that does not exist is made then (and its queue, implicit),
 * empty, as a parked pop makes it, so its first push wakes the tail; it is
 * collected as any idle one once no waiter bit is set.  Without park,
 * nothing is made: 0 with res->handle 0.
 * Returns the records copied (>= 0), -ENOMEM, -EAGAIN (the partition was
 * freed again and again meanwhile), or, with park, -errno as
 * shm_dir_find_queue / shm_dir_find_part (-EOVERFLOW, -ENOBUFS).
 */
int shm_tail(struct shm_seg *seg, int worker, const struct shm_tail_req *req,
             uint64_t now, struct shm_sink *sink, struct shm_tail_res *res);

/*
 * shm_tail_queue - a tail of every partition of queue waits on the queue:
 * this worker's waiter bit is raised on it (the queue made, implicit, when
 * missing, as an any-partition pop makes it), so a push to any of its
 * partitions after this wakes the worker with *handle (shm_pop_handle of
 * the queue).  Raised before the partitions are read (shm_tail without
 * park, each), no push in between is missed.  0, or -errno as
 * shm_dir_find_queue; -EAGAIN (the queue was freed again and again).
 */
int shm_tail_queue(struct shm_seg *seg, int worker, struct shm_name queue,
                   uint64_t now, uint64_t *handle);

/*
 * shm_tail_parts - call fn(arg, part, handle) for each partition of queue
 * that may hold a message numbered above after (its last_seq, dir.h: a
 * whole-queue tail's round reads only those), until fn returns nonzero,
 * which is returned; 0 when none did or there is no such queue.  Names
 * are read without locks and checked against the record's generation
 * afterwards; handle is the partition's (shm_pop_handle).  Exact up to
 * the horizon: a push numbered <= shm_horizon() raised last_seq before
 * the horizon passed it.
 */
int shm_tail_parts(struct shm_seg *seg, struct shm_name queue, uint64_t after,
                   uint64_t now,
                   int (*fn)(void *arg, struct shm_name part, uint64_t handle),
                   void *arg);

/*
 * shm_tail_map - where a stream resumes (queue, part) here when its
 * cursor names another incarnation inc at watermark w for it: the
 * partition's last hand-over here came from inc and kept its numbers
 * (part_move.h), so the message numbered o there is adopt_base + o -
 * adopt_lo here (less its one long gap cut, dir.h): *after is where w falls (every message here at or below
 * it was delivered by w there; what left the sender uncarried past w is a
 * gap, shm_tail_res.gap, as the adopt raised gone_seq).  Nothing is made,
 * parked or read.  0 with *after; -ENOENT when the partition is not here,
 * its last hand-over came from elsewhere or kept no numbers, or it holds
 * a message from before that hand-over (not from inc: w says nothing of
 * it).  -EINPROGRESS while a hand-over announced to this node is on its
 * way (shm_part_hold, until its adopt or hold_until): the place it will
 * give is not known yet, as pops read nothing there meanwhile.  -EAGAIN
 * as shm_tail.
 */
int shm_tail_map(struct shm_seg *seg, int worker, struct shm_name queue,
                 struct shm_name part, uint64_t inc, uint64_t w, uint64_t now,
                 uint64_t *after);

/*
 * shm_tail_reap - the master, reaping dead worker w (after its locks are
 * repaired: shm_worker_reap): if w died inside a push, wake every parked
 * pop and tail of the node (its wake-ups may not have been posted) and
 * then let the horizon pass it.
 */
void shm_tail_reap(struct shm_seg *seg, int w);

#endif
