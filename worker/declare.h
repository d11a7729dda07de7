/*
 * declare.h - what goes through the raft log, relayed to this node's
 * master (declare.c): configure, and the deletion of a declared queue.
 */
#ifndef MAYFLY_WORKER_DECLARE_H
#define MAYFLY_WORKER_DECLARE_H

#include <stddef.h>

struct worker;
struct http_request;

/* worker_configure - POST /api/v1/ephemeral/configure: relayed as it is;
 * the master parses and validates it. */
void worker_configure(struct worker *w, struct http_request *req);

/* worker_declare_delete - DELETE /api/v1/ephemeral/queue/{q} of the
 * declared queue q (len bytes): relayed as {"queue": q}. */
void worker_declare_delete(struct worker *w, struct http_request *req,
                           const char *q, size_t len);

#endif
