/*
 * peer_answer.h - what another node's answer says, decoded into C structs
 * for the worker and the master: an ack's results from the nodes that
 * delivered the ids, a reset's or deletion's share, the id a request's
 * owner stored it under, the code of an error, the log index and options
 * a raft leader answered a configure with.  (The merges of scope=cluster
 * answers are depth_merge.h and list_merge.h.)
 *
 * Each body is parsed as http_jsonc_object() parses one (strict, one JSON
 * object; a NULL body is no object); json-c stays inside http/.  What the caller passes on to its
 * own client as JSON (a reply's reason, the leader's options) is kept as
 * the JSON text json-c writes for it, so that it goes on as it came.
 * Stateless; no locking.  Errors: 0, -EINVAL (not such an answer),
 * -ENOMEM.
 */
#ifndef MAYFLY_HTTP_PEER_ANSWER_H
#define MAYFLY_HTTP_PEER_ANSWER_H

#include <stddef.h>
#include <stdint.h>

#include "http/names.h"

/* One entry of an ack's or extend's "results", as another node wrote it. */
struct http_peer_ack {
    char *outcome;  /* "outcome" as text; NULL: absent or null */
    int dropped;    /* "dropped" is true */
    uint32_t count; /* "count" (a cumulative ack's), 0 when absent */
    int replied;    /* "replied": -1 absent, 0 false, 1 true */
    char *reason;   /* with replied 0: "reason" as JSON text ("null" when
                      absent); else NULL */
};

struct http_peer_acks {
    uint32_t n;
    struct http_peer_ack *e; /* n entries, in request order */
};

/*
 * http_peer_acks - the answer {"results": [...]} to an ack or an extend of
 * n ids into *out (n entries, each as written; one that is not an object
 * has no outcome).  -EINVAL when body is not an object whose "results" is
 * an array of n; *out is then empty.  Free with http_peer_acks_free().
 */
int http_peer_acks(const char *body, size_t len, uint32_t n,
                   struct http_peer_acks *out);

/* http_peer_acks_free - release what http_peer_acks() put in a. */
void http_peer_acks_free(struct http_peer_acks *a);

/* A member's share of a reset or of an implicit queue's deletion. */
struct http_peer_applied {
    int has_queue;                 /* "queue" is there */
    char queue[HTTP_NAME_MAX + 1]; /* its text (cut at HTTP_NAME_MAX) */
    uint64_t count;                /* the key as a count (0: not one) */
    int flag;                      /* the key is true */
};

/* http_peer_applied - the share {"queue", key} into *out; -EINVAL when
 * body is not an object. */
int http_peer_applied(const char *body, size_t len, const char *key,
                      struct http_peer_applied *out);

/* http_peer_id - the "id" of an answer {"id", ...} as text (malloc'd);
 * NULL when body is not an object, has no "id", or memory ran out. */
char *http_peer_id(const char *body, size_t len);

/* http_peer_error_is - whether body is an error answer (http/reply.h:
 * {"error", "code"}) whose "code" is code. */
int http_peer_error_is(const char *body, size_t len, const char *code);

/* What a raft leader answered a configure or a deletion a follower passed
 * on to it. */
struct http_peer_configured {
    uint64_t index; /* "index": the entry's log index (0: none named) */
    char *options;  /* "options" as JSON text (malloc'd); NULL when not an
                       object (a deletion) */
};

/* http_peer_configured - the leader's answer {"queue", "options"?,
 * "index"?, ...} into *out (empty when body is not an object, or memory
 * ran out for the options).  Free out->options. */
void http_peer_configured(const char *body, size_t len,
                          struct http_peer_configured *out);

#endif
