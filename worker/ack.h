/*
 * ack.h - POST /api/v1/ephemeral/ack and /extend (ack.c).
 */
#ifndef MAYFLY_WORKER_ACK_H
#define MAYFLY_WORKER_ACK_H

struct worker;
struct http_request;

/* worker_ack - the ack route: each entry's outcome, in request order. */
void worker_ack(struct worker *w, struct http_request *req);

/* worker_extend - the extend route: each entry's lease extended, or its
 * outcome, in request order. */
void worker_extend(struct worker *w, struct http_request *req);

#endif
