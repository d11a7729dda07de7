/*
 * depth_merge.h - one queue's depth summed over several nodes: the answer
 * of GET .../depth?scope=cluster, made from every node's scope=node answer.
 *
 * Counts add up; partitions of one name and groups of one name are merged
 * into one entry (their counts added, oldestAgeMs the oldest of them);
 * "tier" is "declared" when any node says so; "partitionsPending" counts the
 * merged partitions with something pending.  The answer adds "scope":
 * "cluster", "nodes" (the members whose shares are in the sum) and
 * "missing" (live members that did not answer).  json-c stays inside http/.
 */
#ifndef MAYFLY_HTTP_DEPTH_MERGE_H
#define MAYFLY_HTTP_DEPTH_MERGE_H

#include <stddef.h>

#include "http/buf.h"
#include "http/shares.h"

/* What a member's answer to a scope=node depth query says. */
enum http_depth_answer {
    HTTP_DEPTH_SHARE, /* 200: a depth answer for the queue, from that node */
    HTTP_DEPTH_NONE,  /* 404 ephemeral_queue_not_found: it holds nothing */
    HTTP_DEPTH_BAD,   /* anything else: an error, another route's 404, an
                         answer from another node or for another queue */
};

/* http_depth_answer - classify the answer (status, body) to a depth query
 * for queue[0..qlen) sent to the member named node. */
enum http_depth_answer http_depth_answer(unsigned status, const char *body,
                                         size_t len, const char *queue,
                                         size_t qlen, const char *node);

/*
 * http_depth_merge - write the merged answer into out (appended).  "queue"
 * and "group" come from the first body.  0; -EINVAL when a body is not a
 * depth answer (out unchanged; http_depth_answer() says SHARE only of one
 * that merges); -ENOMEM.
 */
int http_depth_merge(const struct http_shares *s, struct http_buf *out);

#endif
