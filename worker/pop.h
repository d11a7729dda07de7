/*
 * pop.h - GET /api/v1/ephemeral/pop (pop.c): answered at once, or parked
 * (parked.h) until a push wakes it, its timeout passes, its client hangs
 * up, its token is revoked, its partition moves, or the worker drains.
 */
#ifndef MAYFLY_WORKER_POP_H
#define MAYFLY_WORKER_POP_H

struct worker;
struct http_request;

/* worker_pop - the pop route: answers req, or parks it (wait=true and
 * nothing there yet). */
void worker_pop(struct worker *w, struct http_request *req);

#endif
