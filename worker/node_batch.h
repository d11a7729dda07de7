/*
 * node_batch.h - the owner's side of a batch call (http/batch.h): the
 * requests another node's worker forwarded here together
 * (worker/coalesce.h), each served as if it had come alone.
 *
 * POST /api/v1/node/batch takes signed calls between nodes only
 * (worker.c refuses any other, 401, before this runs; the route is not in
 * the API's description).  Each entry becomes an inner request
 * (http/inner.h) that goes through the worker's own dispatch: the checks
 * (draining, a stale or blind view, its own token) and the route's
 * handler, unchanged.  Only push, pop and ack are carried so; any other
 * entry gets its own 400 naming it.  When every entry has its reply --
 * some may wait, a pop held through a hand-over -- the call is answered
 * 200 with the answers in order.  The inner requests end with the call:
 * their on_done runs then, told whether the answer went out whole.
 */
#ifndef MAYFLY_WORKER_NODE_BATCH_H
#define MAYFLY_WORKER_NODE_BATCH_H

struct worker;
struct http_request;

/* worker_node_batch - serve the batch call req (checked a node's). */
void worker_node_batch(struct worker *w, struct http_request *req);

#endif
