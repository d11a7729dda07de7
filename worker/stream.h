/*
 * stream.h - GET /api/v1/ephemeral/subscribe (SPEC §11): a stream of
 * Server-Sent Events carrying many partitions on one connection, a tail of
 * them (every message, holding nothing) or a consumer of a group (autoAck),
 * resumed from its cursor after a drop.  stream_int.h says how it is made.
 *
 * The loop (worker.c) calls the two round hooks around its drain of the
 * wake queue, and routes the subscribe requests here.  Process memory only.
 */
#ifndef MAYFLY_WORKER_STREAM_H
#define MAYFLY_WORKER_STREAM_H

struct worker;
struct http_request;

/* worker_subscribe - open the stream req asks for, or answer 400, 401,
 * 403, 503 (stream_max) with nothing opened. */
void worker_subscribe(struct worker *w, struct http_request *req);

/*
 * worker_subscribe_later - the node does not serve streams now (starting,
 * stale, draining): 200 text/event-stream with retry: 1000 and the
 * connection closed, since an EventSource gives up for good on any other
 * status, and reconnects after a retry.
 */
void worker_subscribe_later(struct http_request *req);

/* worker_streams_before_drain - right before the wake queue is drained:
 * the horizon the rounds after it read up to (nothing when no stream is
 * open). */
void worker_streams_before_drain(struct worker *w);

/* worker_streams_after_drain - after the drain: the rounds of the
 * streams its wakes reached, and of those still holding more. */
void worker_streams_after_drain(struct worker *w);

#endif
