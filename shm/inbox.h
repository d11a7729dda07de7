/*
 * inbox.h - what the segment knows of request/reply (SPEC §9): a request's
 * inbox is an implicit queue named "mayfly.inbox/<node id>/<incarnation>.
 * <worker>.<pid>.<serial>.<64 random bits>" (worker/rpc.c; after the
 * requester's tenant prefix, when it has one), minted by the node that
 * holds the requester's connection.  A push never
 * makes an inbox (shm_push answers -ENOENT once it is gone, so a late reply
 * leaves nothing behind); the owner of an inbox is the node its name says
 * (shm/owner.c).  Here too: withdrawing a request nobody has read, and
 * whether anybody listens on a partition.
 *
 * Locking: as broker.h (each call takes and releases what it needs).
 */
#ifndef MAYFLY_SHM_INBOX_H
#define MAYFLY_SHM_INBOX_H

#include <stdint.h>
#include <string.h>

#include "shm/broker.h"
#include "shm/tenants.h"

#define SHM_INBOX_PREFIX     "mayfly.inbox/"
#define SHM_INBOX_PREFIX_LEN (sizeof(SHM_INBOX_PREFIX) - 1)

/* shm_inbox_bare - queue without its tenant's prefix (tenants.h): a
 * tenant's inbox is the tenant's queue like any other. */
static inline struct shm_name
shm_inbox_bare(struct shm_name queue)
{
    const char *sep = memchr(queue.ptr, SHM_TENANT_SEP, queue.len);
    size_t skip = sep != NULL ? (size_t)(sep - queue.ptr) + 1 : 0;

    return (struct shm_name){queue.ptr + skip, queue.len - skip};
}

/* shm_inbox_named - queue is a request's inbox (of any tenant). */
static inline int
shm_inbox_named(struct shm_name queue)
{
    queue = shm_inbox_bare(queue);
    return queue.len > SHM_INBOX_PREFIX_LEN &&
           memcmp(queue.ptr, SHM_INBOX_PREFIX, SHM_INBOX_PREFIX_LEN) == 0;
}

/* shm_inbox_node - the node id an inbox's name carries, in *node; 0 when
 * queue is not an inbox (or names no node). */
static inline int
shm_inbox_node(struct shm_name queue, struct shm_name *node)
{
    if (!shm_inbox_named(queue))
        return 0;
    queue = shm_inbox_bare(queue);
    const char *id = queue.ptr + SHM_INBOX_PREFIX_LEN;
    const char *slash = memchr(id, '/', queue.len - SHM_INBOX_PREFIX_LEN);
    if (slash == NULL || slash == id)
        return 0;
    *node = (struct shm_name){id, (size_t)(slash - id)};
    return 1;
}

/*
 * shm_withdraw - the request seq of (queue, part) gave up: if no group has
 * read it, it is dropped at once (unlinked and freed wherever it stands in
 * the partition: out of depth, bytes and the bounds, never delivered; one
 * a lease still owes, after a hand-over, is only passed over by every
 * group).  1 when it was withdrawn unread, 0 when it had been read already
 * or is not held here.
 */
int shm_withdraw(struct shm_seg *seg, int worker, struct shm_name queue,
                 struct shm_name part, uint64_t seq, uint64_t now);

/*
 * shm_withdraw_reply - shm_withdraw of the request of (queue, part) whose
 * replyTo is inbox, for a requester that never learnt its sequence (the
 * owner's answer to its store did not come).  1 when it was withdrawn
 * unread, else 0.
 */
int shm_withdraw_reply(struct shm_seg *seg, int worker, struct shm_name queue,
                       struct shm_name part, struct shm_name inbox,
                       uint64_t now);

/*
 * shm_reply_to - copy the replyTo of message seq of (queue, part) into buf
 * (cap bytes, SHM_NAME_MAX is enough).  Returns its length, 0 when the
 * message has none, -ENOENT when it is not held here.
 */
int shm_reply_to(struct shm_seg *seg, int worker, struct shm_name queue,
                 struct shm_name part, uint64_t seq, uint64_t now, char *buf,
                 size_t cap);

/*
 * shm_responders - whether anybody listens on (queue, part): a pop parked
 * on the partition or on the whole queue, or a pop of the partition or of
 * the whole queue within idle_ms of now (a pop of another partition is
 * nobody listening here: SPEC §9).  Creates nothing, takes no lock but
 * the directory's look-ups.
 */
int shm_responders(struct shm_seg *seg, int worker, struct shm_name queue,
                   struct shm_name part, uint64_t now, uint64_t idle_ms);

#endif
