/*
 * depth.h - GET /api/v1/ephemeral/queues/{q}/depth (depth.c).
 */
#ifndef MAYFLY_WORKER_DEPTH_H
#define MAYFLY_WORKER_DEPTH_H

struct worker;
struct http_request;

/* worker_depth - the depth route: this node's share of the queue, or with
 * scope=cluster every live member's summed. */
void worker_depth(struct worker *w, struct http_request *req);

#endif
