/*
 * shares.h - several nodes' answers to one scope=node query, for a merge
 * into the scope=cluster answer (depth_merge.h, list_merge.h).
 */
#ifndef MAYFLY_HTTP_SHARES_H
#define MAYFLY_HTTP_SHARES_H

#include <stddef.h>

#include "http/buf.h"

struct http_shares {
    const char *node;         /* the answering node's id */
    const char *const *body;  /* the answers (200), this node's first */
    const size_t *len;        /* their lengths */
    int n;                    /* how many; at least 1 */
    const char *const *nodes; /* members whose shares are in */
    int nnodes;
    const char *const *missing; /* live members that did not answer */
    int nmissing;
};

/* http_shares_close - end a merged answer: ,"nodes":[...],"missing":[...]}
 * appended to out.  0, or -ENOMEM (out->oom). */
int http_shares_close(const struct http_shares *s, struct http_buf *out);

#endif
