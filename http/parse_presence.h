/*
 * parse_presence.h - the bodies of POST /api/v1/presence/enter and
 * /leave (SPEC §12), scanned in one pass (http/json_scan.h) as a push is:
 * data stays a span of the body, stored as sent.  Contract as parse.h's
 * parsers: 0, -EINVAL or -ENOMEM with err filled (naming the field); a
 * failed parse holds nothing.
 */
#ifndef MAYFLY_HTTP_PARSE_PRESENCE_H
#define MAYFLY_HTTP_PARSE_PRESENCE_H

#include <stddef.h>
#include <stdint.h>

#include "http/parse.h"

#define HTTP_PRESENCE_TTL_MAX 86400 /* ttlSeconds, at most a day */

struct http_presence {
    struct http_str channel; /* required */
    struct http_str member;  /* required */
    struct http_str data;    /* has_data: a span of JSON text in the body */
    int has_data;
    uint32_t ttl_s; /* enter: required, 1 to HTTP_PRESENCE_TTL_MAX */
    /* A node's announcement (worker/presence_stream.c, signed calls
     * only): its streams of the member, counted under node */
    struct http_str node;
    uint32_t connections;
    int has_connections;
    char *mem; /* owned: unescaped strings */
};

/*
 * http_parse_presence - {"channel", "member", "data"?, "ttlSeconds"}
 * (enter set) or {"channel", "member"} (leave); an enter with "node" and
 * "connections" (a node's announcement) needs no ttlSeconds.  Unknown keys are
 * validated and ignored; data null is no data.
 */
int http_parse_presence(const char *body, size_t len, int enter,
                        struct http_presence *out, struct http_error *err);
void http_presence_free(struct http_presence *p);

#endif
