/*
 * pop_watch.h - a peer's watch (pop_watch.c): the long poll a node leaves
 * here while its own pop with no partition waits (pop_cluster.h).  It
 * takes nothing, only peeks, and answers {"ready": true} once a pop here
 * would find something, or false at its timeout.
 */
#ifndef MAYFLY_WORKER_POP_WATCH_H
#define MAYFLY_WORKER_POP_WATCH_H

#include "shm/broker.h"

struct worker;
struct http_request;
struct pop_call;

/* pop_watch_new - a watch of r for req (pop_call.h).  NULL without
 * memory. */
struct pop_call *pop_watch_new(struct worker *w, struct http_request *req,
                               const struct shm_pop_req *r);

#endif
