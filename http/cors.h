/*
 * cors.h - which browser origins may read this node's answers (SPEC §11):
 * the cors_origins list, and the header values a preflight answers with.
 *
 * A page on another origin reaches the node only when the answer says its
 * origin may read it (Access-Control-Allow-Origin); before a call with an
 * Authorization or a JSON body the browser asks first (a preflight,
 * OPTIONS).  http/reply.c sets the headers on every answer and answers the
 * preflight.  A list is a value, parsed once at start; no locking.
 */
#ifndef MAYFLY_HTTP_CORS_H
#define MAYFLY_HTTP_CORS_H

#include <stddef.h>

#define HTTP_CORS_BYTES 2048 /* the list as configured, at most */

/* What a listed origin's preflight is told it may send, and how long the
 * browser may keep the answer (seconds); and the headers its page may
 * read beyond the ones every page may. */
#define HTTP_CORS_ALLOW_HEADERS  "authorization, content-type, last-event-id"
#define HTTP_CORS_MAX_AGE        "600"
#define HTTP_CORS_EXPOSE_HEADERS "retry-after, www-authenticate"

struct http_cors {
    unsigned n; /* origins listed; 0: no page of another origin is served */
    int any;    /* "*" was listed: every origin */
    char origins[HTTP_CORS_BYTES]; /* NUL-separated, ended by "" */
};

/*
 * http_cors_parse - a comma-separated list ("" for none) into c: "*", or
 * origins as a browser sends them, scheme://host[:port] with scheme http
 * or https and nothing after (no path, no trailing '/').  White space
 * around entries is dropped.  0, or -1 with *why saying what is wrong (c
 * then empty).
 */
int http_cors_parse(const char *list, struct http_cors *c, const char **why);

/* http_cors_allows - 1 if a page of origin (the Origin header) may read
 * the answers: listed (case aside), or "*" listed. */
int http_cors_allows(const struct http_cors *c, const char *origin);

#endif
