/*
 * answer_json.h - the JSON bodies both a worker and its master answer
 * with: GET /health (a worker's, and the master's during a drain) and a
 * queue's effective options (a worker's listing, the master's answer to a
 * configure).  The caller fills the structs below from what it holds (the
 * board's view, a queue's options); this file only writes them, so
 * that the two answer alike.  Stateless; out of memory sets the buffer's
 * oom flag, which http_reply() answers as 500.
 */
#ifndef MAYFLY_HTTP_ANSWER_JSON_H
#define MAYFLY_HTTP_ANSWER_JSON_H

#include <stddef.h>
#include <stdint.h>

struct http_buf;

struct http_health_member {
    const char *node; /* its id, node_len bytes */
    size_t node_len;
    const char *state; /* "live", "dead", "leaving" or "starting" */
    int self;          /* this node */
    int suspect;       /* this node cannot reach it (shown only when so) */
};

/* What /health shows. */
struct http_health {
    const char *status; /* "ok", "draining", "stale" or "starting" */
    int ready;
    const char *node; /* this node's id */
    uint64_t incarnation;
    const char *role; /* "follower", "candidate" or "leader" */
    uint64_t term;
    const char *leader; /* its id; "": none known */
    const struct http_health_member *members;
    uint32_t nmembers;
};

/* http_health_json - append the body of GET /health to b; returns the
 * status to answer with it: 200 when ready, else 503. */
unsigned http_health_json(struct http_buf *b, const struct http_health *h);

/* A queue's effective options. */
struct http_qopts {
    uint32_t max_length;
    uint64_t max_bytes;
    int drop_oldest; /* policy dropOldest; else reject */
    uint32_t window_ms;
    uint32_t window_count;
    uint32_t ttl_s;
    uint32_t lease_s;
    uint32_t retry_limit;
    uint32_t dedupe_s;
    uint32_t retry_delay_ms;
    const char *dead_letter; /* deadLetter's name, dl_len bytes; NULL: none */
    uint32_t dl_len;
    int dl_expired;
    int conflate;
};

/* http_options_json - append the options as the object the listing and
 * configure's answer show (every option, windowBuffer included). */
void http_options_json(struct http_buf *b, const struct http_qopts *o);

#endif
