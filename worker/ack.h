/*
 * ack.h - POST /api/v1/ephemeral/ack and /extend (ack.c).
 */
#ifndef MAYFLY_WORKER_ACK_H
#define MAYFLY_WORKER_ACK_H

struct worker;
struct http_request;
struct http_ack;
struct ack_then;

/* worker_ack - the ack route: each entry's outcome, in request order. */
void worker_ack(struct worker *w, struct http_request *req);

/*
 * worker_ack_pop - the acks a pop carries (SPEC §14), a (malloc'd, taken:
 * freed with http_ack_free and free), applied as the ack route applies
 * them, then then->fn (worker/ack_route.h) with their outcomes: at once,
 * or once the nodes that delivered some of them answered (req suspended
 * meanwhile).  Entries of other nodes go to them at then->target.
 */
void worker_ack_pop(struct worker *w, struct http_request *req,
                    struct http_ack *a, const struct ack_then *then);

/* worker_extend - the extend route: each entry's lease extended, or its
 * outcome, in request order. */
void worker_extend(struct worker *w, struct http_request *req);

#endif
