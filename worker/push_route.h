/*
 * push_route.h - a push for a partition another node owns goes there
 * unparsed (SPEC §5): this node reads only the queue and partition
 * (http/push_peek.h), checks the names and the token's push permission as
 * the full path does, and forwards the body as it came.  The owner parses
 * it and answers, and its answer is relayed: a body that is not a valid
 * push gets the owner's 400, the one this node would have given (the same
 * parser over the same bytes).
 *
 * Only when every check passes is the push forwarded this way; when any
 * fails, or the peek cannot tell, or this node serves the partition
 * itself, the caller takes the full path, which parses first and so
 * answers exactly as before (a 400 for the body before a 403 for the
 * token, say).  A forward's own retries (forward.h) run the push route
 * again, and so this again.
 */
#ifndef MAYFLY_WORKER_PUSH_ROUTE_H
#define MAYFLY_WORKER_PUSH_ROUTE_H

#include "shm/broker.h"

struct worker;
struct http_request;

/* The partition of a push that names none (push.c, push_route.c). */
#define WORKER_PUSH_DEFAULT_PART ((struct shm_name){"Default", 7})

/* worker_push_route - 0: req was taken (forwarded to the partition's
 * owner, answered later); 1: the caller parses and serves it. */
int worker_push_route(struct worker *w, struct http_request *req);

#endif
