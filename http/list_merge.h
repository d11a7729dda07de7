/*
 * list_merge.h - the queue listing summed over several nodes: the answer
 * of GET /api/v1/ephemeral/queues?scope=cluster, made from every node's
 * scope=node listing.
 *
 * Queues of one name are merged into one entry: depth, leased, waiting,
 * bytes and drops add up (each node counts what it holds); partitions adds
 * up too, the partition records of every node (listings carry counts, not
 * names: a partition held on two nodes counts twice, where depth merges it
 * by name); groups is the largest count any node gives, a lower bound (a
 * group reading on several nodes is one group); tier is "declared" when any
 * node says so, and the options come from a declared entry (every node applies
 * the same declarations).  The merged list is sorted by name and cut at limit,
 * as a node's is: a queue within the first limit of the union is within the
 * first limit of every node that holds it, so its sums are whole.  The
 * page says "truncated": true and "next" (its last name, where the next
 * page starts) when the union was cut or a node's own page was.  The
 * answer adds "scope": "cluster", "nodes" and "missing" as depth does.
 * json-c stays inside http/.
 */
#ifndef MAYFLY_HTTP_LIST_MERGE_H
#define MAYFLY_HTTP_LIST_MERGE_H

#include <stddef.h>
#include <stdint.h>

#include "http/buf.h"
#include "http/shares.h"

/* http_list_answer_ok - the answer (status, body) is a listing from the
 * member named node, one http_list_merge() takes. */
int http_list_answer_ok(unsigned status, const char *body, size_t len,
                        const char *node);

/* http_list_merge - append the merged listing, cut at limit, to out.  0;
 * -EINVAL when a body is not a listing (out unchanged); -ENOMEM. */
int http_list_merge(const struct http_shares *s, uint32_t limit,
                    struct http_buf *out);

#endif
