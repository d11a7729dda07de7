/*
 * ack_reply.c - see ack_reply.h.  The replyTo is read from the message as
 * the segment holds it, not from the entry: a responder cannot send the
 * reply anywhere but to the requester's inbox.  A reply whose inbox is gone
 * (the request timed out, its requester hung up) is dropped and counted.
 */
#include "worker/ack_reply.h"

#include <errno.h>

#include "http/parse.h"
#include "shm/inbox.h"
#include "shm/owner.h"
#include "shm/stats.h"
#include "worker/worker_int.h"

#define REPLIED     ",\"replied\":true"
#define NOT_REPLIED ",\"replied\":false,\"reason\":"

/* ack_reply_deliver - see ack_reply.h. */
const char *
ack_reply_deliver(struct worker *w, struct shm_name queue, struct shm_name part,
                  uint64_t seq, const struct http_str *reply)
{
    char to[SHM_NAME_MAX];
    uint64_t now = shm_now_ms(), first;
    int n = shm_reply_to(w->seg, w->set.slot, queue, part, seq, now, to,
                         sizeof(to));

    if (n < 0)
        return NOT_REPLIED "\"the message is not held here: already "
                           "completed, expired, or delivered by another "
                           "node\"";
    if (n == 0)
        return NOT_REPLIED "\"the message has no replyTo: it is not a "
                           "request\"";
    struct shm_name inbox = {to, (size_t)n};
    if (!shm_owner_here(&w->owners, inbox, (struct shm_name){"Default", 7}))
        return NOT_REPLIED "\"the requester waits on another node\"";
    struct shm_msg_in m = {reply->ptr, (uint32_t)reply->len};
    int rc = shm_push(w->seg, w->set.slot, inbox,
                      (struct shm_name){"Default", 7}, &m, 1, now, &first);
    if (rc == 0)
        return REPLIED;
    if (rc == -ENOENT) {
        shm_count(w->seg, w->set.slot, SHM_C_REPLY_DROPPED, 1);
        return NOT_REPLIED "\"the requester has gone: its request timed out "
                           "or it hung up\"";
    }
    return NOT_REPLIED "\"the reply could not be stored in the requester's "
                       "inbox (too large, or the node is full)\"";
}
