/*
 * broker.h - the workers' request path on queues held in the segment: push,
 * pop, ack, extend, release, and the bookkeeping of parked pops.  With
 * queue_admin.h (administration, listings, gauges) and maintain.h (the
 * master's upkeep) this is shm/'s public face above segment.h: a worker
 * parses a request, calls one of these, and formats the answer.
 *
 * Names are byte strings (ptr, len) already validated by the caller
 * (1-512 bytes of UTF-8 without control characters).  The empty group name
 * (len 0) is queue mode.  Times are shm_now_ms() values.
 *
 * Locking: each call takes the locks it needs (directory lock briefly for
 * lookup/create, a queue's lock for its group registry, then one partition
 * lock at a time) and releases them before returning.  No call blocks on
 * anything but those locks.
 *
 * Errors: 0 or a count on success, -errno on failure:
 *   -ENOSPC     queue full with policy reject       (429 queue_full)
 *   -ENOBUFS    node cap reached                    (503 ephemeral_unavailable)
 *   -EMSGSIZE   one message larger than the queue's maxBytes             (413)
 *   -EFBIG      a batch larger than its queue may ever hold under policy
 *               reject (maxLength, maxBytes), or than shm_push_cap     (413)
 *   -ENOENT     no such queue / partition / group
 *   -EOVERFLOW  a table is full (queues, partitions, groups per queue)
 */
#ifndef MAYFLY_SHM_BROKER_H
#define MAYFLY_SHM_BROKER_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "shm/segment.h"

#define SHM_NAME_MAX 512

struct shm_name {
    const char *ptr;
    size_t len;
};

/* ---- push ---------------------------------------------------------- */

/* One message to push: the payload's JSON text, already validated. */
struct shm_msg_in {
    const char *payload;
    uint32_t len;
};

/* What SPEC §13 lets a message carry besides (zero: nothing). */
struct shm_msg_extra {
    uint32_t delay_ms; /* invisible for this long after the push */
    uint32_t ttl_s;    /* its own ttl, <= SHM_MSG_TTL_MAX (ring.h) */
    uint64_t key_hash; /* has_key: the hash of its key (dedupe, conflation) */
    int has_key;
};

/* What a keyed push answers for each message: the id of the message
 * stored, or of the one its key names in the window (inc: the incarnation
 * that id names, 0 for this node's own). */
struct shm_push_id {
    uint64_t seq;
    uint64_t inc;
};

/*
 * shm_push - append n messages to (queue, part) in order, all or nothing.
 * Creates the queue (implicit, node defaults) and partition if needed, but
 * never a request's inbox (shm/inbox.h): -ENOENT when it is gone.
 * On success *first_seq is the sequence of the first message; the others
 * follow consecutively.  Wakes parked pops of any worker (eventfd writes after
 * the partition lock is released).  n == 0 succeeds and pushes nothing.
 * Past the queue's bounds, policy reject is -ENOSPC (-EFBIG when the batch
 * alone is past them); dropOldest evicts the queue's oldest messages, and
 * of a batch larger than the bounds its own oldest too (counted as any
 * eviction): the push succeeds, the newest stay.
 */
int shm_push(struct shm_seg *seg, int worker, struct shm_name queue,
             struct shm_name part, const struct shm_msg_in *msgs, uint32_t n,
             uint64_t now, uint64_t *first_seq);

/* shm_push_cap - the bytes pushes may fill of this node's memory cap
 * (max_bytes, less the reserve kept for leases: broker_steps.c); a batch
 * that takes more is -EFBIG. */
uint64_t shm_push_cap(struct shm_seg *seg);

/*
 * shm_push_keyed - shm_push of messages that may carry a key, a delay or a
 * ttl (SPEC §13), ex[i] for msgs[i].  With the queue's dedupeSeconds, a message whose key the
 * partition's window holds is not stored: ids[i] names the message the key
 * was first seen with, and *dups counts them; a key is seen at its first
 * push (a later message of the same batch is a duplicate too).  ids gets
 * n entries.  On a queue that conflates (SPEC §13), every message is
 * stored and a keyed one replaces the older messages of its key in the
 * partition for every group that has not read them yet (ring.h,
 * shm_ring_conflate_locked; an earlier one of the same batch too),
 * counted once each in *conflated; the bounds count what stays.  Delayed messages wake nothing until they
 * become visible: the due heap brings the partition to the master's
 * maintenance then.
 */
int shm_push_keyed(struct shm_seg *seg, int worker, struct shm_name queue,
                   struct shm_name part, const struct shm_msg_in *msgs,
                   const struct shm_msg_extra *ex, uint32_t n, uint64_t now,
                   struct shm_push_id *ids, uint32_t *dups,
                   uint32_t *conflated);

/*
 * shm_push_request - shm_push of one request (SPEC §9): msg holds
 * reply_len bytes of replyTo (its inbox's name), then the payload.
 */
int shm_push_request(struct shm_seg *seg, int worker, struct shm_name queue,
                     struct shm_name part, const struct shm_msg_in *msg,
                     uint32_t reply_len, uint64_t now, uint64_t *seq);

/* ---- pop ----------------------------------------------------------- */

enum shm_from { SHM_FROM_ALL, SHM_FROM_NEW, SHM_FROM_LAST };

struct shm_pop_req {
    struct shm_name queue;
    struct shm_name part;  /* len 0: any partition of the queue, round robin */
    struct shm_name group; /* len 0: queue mode */
    uint32_t batch;        /* 1..10000 */
    int auto_ack;
    enum shm_from from; /* start of a group the queue does not know yet */
    int park;           /* nothing to take: register this worker as waiter */
};

/*
 * One popped message as it sits in the sink: the header, then the
 * partition name (part_len bytes), then the data (len bytes: reply_len
 * bytes of replyTo, then the payload; none in a sink with a fmt); the
 * next record starts at the following 8-byte boundary.
 */
struct shm_popped {
    uint64_t seq;
    uint32_t attempts; /* 1 on first delivery */
    uint32_t part_len;
    uint32_t len;       /* data bytes: replyTo and payload */
    uint32_t reply_len; /* 0: not a request */
};

/*
 * struct shm_sink_fmt - a pop whose caller writes its answer while it
 * takes (worker/pop_format.c): each message's data goes from its cells
 * straight into the caller's answer, and the sink's records hold no data,
 * only the header, the partition's name (what a release needs) and, for
 * put alone, where the data lies (shm_popped_data).
 *   room  - in: the bytes the answer has free.  The pop takes a message
 *           only while its bound fits (fixed + 12 * its partition's name
 *           + its data + 6 * its replyTo: every name byte escaped to six,
 *           twice for the partition), and subtracts it.
 *   fixed - in: an entry's bytes beside its data and names, at most.
 *   need  - out: the bound of the message room refused (a pop that took
 *           nothing answers -ENOMEM), else as it was.
 *   put   - write the entries of the n records from first, which one
 *           partition's take just added to sink, under its lock still
 *           held: their data is read from the cells.  It must only
 *           compute and write the caller's own memory (no allocation,
 *           lock or system call), and may set room again.
 */
struct shm_sink;

struct shm_sink_fmt {
    size_t room;
    size_t fixed;
    size_t need;
    void (*put)(struct shm_sink_fmt *f, const struct shm_sink *sink,
                const struct shm_popped *first, uint32_t n);
};

/*
 * Caller-owned buffer the pop copies into (no allocation happens under a
 * lock).  A pop stops early when the next message would not fit; when not even
 * the first fits, it returns -ENOMEM with need set to the bytes that message
 * requires, leasing nothing: grow the buffer and call again.  With fmt
 * (shm_pop only), the records carry no data and fmt writes it.
 */
struct shm_sink {
    unsigned char *buf;
    size_t cap;
    size_t used;              /* out */
    uint32_t count;           /* out: records */
    size_t need;              /* out, with -ENOMEM */
    struct shm_sink_fmt *fmt; /* NULL: records carry their data */
};

/* shm_popped_head - a record's header and name, to the next 8 bytes. */
static inline size_t
shm_popped_head(const struct shm_popped *r)
{
    return (sizeof(*r) + r->part_len + 7) & ~(size_t)7;
}

/* shm_popped_size - the bytes record r takes in sink (to the next one):
 * with a fmt, where its data lay instead of the data. */
static inline size_t
shm_popped_size(const struct shm_sink *sink, const struct shm_popped *r)
{
    if (sink->fmt != NULL)
        return shm_popped_head(r) + sizeof(const char *);
    return (sizeof(*r) + r->part_len + r->len + 7) & ~(size_t)7;
}

/* shm_popped_data - where record r's data lies (a sink with a fmt, inside
 * its put alone: the message's cells). */
static inline const char *
shm_popped_data(const struct shm_popped *r)
{
    const char *at;

    memcpy(&at, (const unsigned char *)r + shm_popped_head(r), sizeof(at));
    return at;
}

/*
 * shm_pop - take up to batch messages for the group: redeliveries first, then
 * new messages in push order; lease them (lease_s of the queue) unless
 * auto_ack.  Creates the queue (implicit) and the group if needed.
 * Returns the number taken (0 when nothing is there: then, with req->park,
 * this worker's waiter bit is set on the partition, or on the queue for
 * an any-partition pop, before the lock is released, so no push is missed).
 */
int shm_pop(struct shm_seg *seg, int worker, const struct shm_pop_req *req,
            uint64_t now, struct shm_sink *sink);

/*
 * shm_peek - shm_pop that takes, leases, marks and copies nothing (a
 * peer's watch, pop_cluster.h): > 0 where it would have taken messages, 0
 * (parked as shm_pop parks, with req->park) or -errno.
 */
int shm_peek(struct shm_seg *seg, int worker, const struct shm_pop_req *req,
             uint64_t now);

/* shm_popped_next - iterate a sink: NULL first, NULL at the end. */
const struct shm_popped *shm_popped_next(const struct shm_sink *sink,
                                         const struct shm_popped *prev);

/*
 * shm_release - a reply carrying leased messages could not be sent: make
 * them deliverable again at once without counting an attempt.
 */
void shm_release(struct shm_seg *seg, int worker, struct shm_name queue,
                 struct shm_name group, const struct shm_sink *sink,
                 uint64_t now);

/* ---- ack, extend ------------------------------------------------------ */

enum shm_ack_status {
    SHM_ACK_COMPLETED,
    SHM_ACK_FAILED,
    SHM_ACK_RETRY,
    SHM_ACK_UPTO, /* cumulative (SPEC §14): completes every message of the
                   * group held in the partition up to seq (leased or
                   * waiting for redelivery), unfenced */
};

enum shm_outcome {
    SHM_OUT_ACKED,         /* completed */
    SHM_OUT_ACKED_DROPPED, /* failed/retry at the retry limit: dropped */
    SHM_OUT_REDELIVERED,   /* failed/retry: it will come back */
    SHM_OUT_STALE,         /* fenced ack of a superseded delivery */
    SHM_OUT_UNKNOWN,       /* nothing held under that id */
    SHM_OUT_EXTENDED,      /* extend: lease prolonged */
    SHM_OUT_DEFER,         /* shm/-internal: a drop at the retry limit whose
                              dead letter did not fit (shm/dead.h); shm_ack
                              applies it again and never answers this */
};

/* One ack or extend entry of a partition (caller groups by partition). */
struct shm_ack {
    uint64_t seq;
    uint32_t attempts; /* 0: unfenced (bare id), acts on current delivery */
    uint32_t status;   /* enum shm_ack_status; for extend: unused */
    uint32_t seconds;  /* extend only */
    uint32_t outcome;  /* out: enum shm_outcome */
    uint32_t moved;    /* in: the partition went to another node, and its
                        * messages with it under new ids: an id not held
                        * here is SHM_OUT_STALE, not _UNKNOWN */
    uint32_t delay_ms; /* retry: redeliver after this long (SPEC §13);
                        * SHM_ACK_DELAY_QUEUE: the queue's retryDelayMs */
    uint32_t count;    /* out, SHM_ACK_UPTO: messages it completed (none:
                        * SHM_OUT_UNKNOWN) */
};

#define SHM_ACK_DELAY_QUEUE UINT32_MAX

/*
 * shm_ack - apply n acks of one partition for a group under one lock.
 * Unknown queue, partition or group gives SHM_OUT_UNKNOWN for each.
 */
void shm_ack(struct shm_seg *seg, int worker, struct shm_name queue,
             struct shm_name part, struct shm_name group, struct shm_ack *acks,
             uint32_t n, uint64_t now);

/* shm_extend - prolong n leases of one partition by each entry's seconds
 * from now (SHM_OUT_EXTENDED, _STALE or _UNKNOWN). */
void shm_extend(struct shm_seg *seg, int worker, struct shm_name queue,
                struct shm_name part, struct shm_name group,
                struct shm_ack *ents, uint32_t n, uint64_t now);

/* ---- parked pops ----------------------------------------------------- */

/*
 * shm_wake_drain - a worker, after its eventfd fired: move the queue and
 * partition handles pushed to it into out (at most n); returns how many, or
 * -EOVERFLOW when its wake queue overflowed (then retry every parked pop).
 * A handle is opaque: compare with shm_pop_handle().
 */
int shm_wake_drain(struct shm_seg *seg, int worker, uint64_t *out, int n);

/* shm_pop_handle - the wake handle a parked pop on (queue, part) waits for;
 * 0 when the queue/partition does not exist. */
uint64_t shm_pop_handle(struct shm_seg *seg, struct shm_name queue,
                        struct shm_name part);

/* shm_unpark - this worker no longer waits on handle (parked pop answered). */
void shm_unpark(struct shm_seg *seg, int worker, uint64_t handle);

/*
 * shm_park_count - one more (delta 1) or one fewer (-1) pop of this worker
 * parked on handle's record: what listings and depth show as waiting.  A
 * handle whose record was collected or reused is ignored.
 */
void shm_park_count(struct shm_seg *seg, int worker, uint64_t handle,
                    int delta);

#endif
