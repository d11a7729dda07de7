/*
 * pop.h - GET /api/v1/ephemeral/pop (pop.c): answered at once, or parked
 * (parked.h) until a push wakes it, its timeout passes, its client hangs
 * up, its token is revoked, its partition moves, or the worker drains.
 */
#ifndef MAYFLY_WORKER_POP_H
#define MAYFLY_WORKER_POP_H

#include <stdint.h>

#include "shm/broker.h"
#include "worker/authz.h"

struct worker;
struct http_request;
struct http_buf;

/* A pop's parameters, as its query (or a POST's body, pop_post.h) gives
 * them. */
struct pop_args {
    struct shm_pop_req r; /* names point into the request and in */
    int wait;
    uint32_t timeout;
    int watch;       /* a peer's watch (pop_watch.h) */
    int announce;    /* a peer's announcement of a group (group_join.h) */
    int window_pass; /* a peer's pass keeping the window (pop_cluster.h) */
    int anywhere;    /* no partition, in a cluster: served from any node */
    struct worker_qname in;
};

/* worker_pop - the pop route: answers req, or parks it (wait=true and
 * nothing there yet). */
void worker_pop(struct worker *w, struct http_request *req);

/* worker_pop_route - pop at the partition's owner: 1, pop here; 0, req
 * was taken (forwarded to the owner with its body, or answered). */
int worker_pop_route(struct worker *w, struct http_request *req,
                     struct pop_args *a);

/* worker_pop_serve - serve a, routed here, as the kind of call it is;
 * results (what a POST pop's acks answered, or empty) is taken and goes
 * into the answer beside the messages.  A group new here is made known to
 * the peers first (group_join.h): the pop then waits, suspended, and a's
 * names are copied. */
void worker_pop_serve(struct worker *w, struct http_request *req,
                      const struct pop_args *a, struct http_buf *results);

#endif
