/*
 * parse_rpc.h - the body of POST /api/v1/ephemeral/request (SPEC §9),
 * scanned in one pass (http/json_scan.h) as a push is: the payload stays a
 * span of the body, stored as sent.  Contract as parse.h's parsers: 0,
 * -EINVAL or -ENOMEM with err filled; a failed parse holds nothing.
 */
#ifndef MAYFLY_HTTP_PARSE_RPC_H
#define MAYFLY_HTTP_PARSE_RPC_H

#include <stddef.h>
#include <stdint.h>

#include "http/parse.h"

struct http_rpc {
    struct http_str queue;     /* required */
    struct http_str partition; /* has_partition 0: absent (Default) */
    int has_partition;
    struct http_str payload; /* required: a span of JSON text in the body */
    int has_timeout;
    uint64_t timeout_ms;
    struct http_str reply_to; /* has_reply_to: a node passing the request
                                 on named its inbox (never a client's) */
    int has_reply_to;
    int has_gather;        /* "gather": {"max", "quietMs"?} (SPEC §13) */
    uint64_t gather_max;   /* replies to wait for, >= 1 */
    uint64_t gather_quiet; /* ms after the last reply; 0: not given */
    char *mem;             /* owned: unescaped strings */
};

/*
 * http_parse_rpc - {"queue", "partition"?, "payload", "timeout"?} (and
 * "replyTo" from a node).  Unknown keys are validated and ignored; timeout
 * is a non-negative integer of milliseconds.
 */
int http_parse_rpc(const char *body, size_t len, struct http_rpc *out,
                   struct http_error *err);
void http_rpc_free(struct http_rpc *r);

#endif
