/*
 * pop_cluster.h - a pop with no partition served by the whole cluster
 * (SPEC §5): when this node holds nothing the pop can take, it passes the
 * pop to its peers, and a long poll waits for a push to any partition of
 * the queue on any node.
 *
 * Which peers hold pending messages of the queue is asked of the peers
 * when it matters, not published ahead: the pop itself goes to each live
 * peer in turn (rotating the first, for fairness), marked
 * X-Mayfly-Forwarded with wait=false, so a peer that holds something
 * answers with it at the cost of one hop and a peer that holds nothing
 * answers empty at once.  A pop that found messages here never asks, so
 * the hot path (a consumer popping where its queue lives) pays nothing;
 * nor does any node keep a per-queue table that thousands of short-lived
 * inboxes would churn on every heartbeat.
 *
 * A long poll that found nothing anywhere parks here (a parked call of the
 * pop family, pop_call.h, answered on a local push, its deadline, a
 * hang-up, or when the owners change) and leaves a *watch* on every peer:
 * the same pop with watch=1, parked there (pop_watch.h), which takes
 * nothing and answers "ready" once the peer holds something.  The first
 * ready watch unparks the pop here, drops the other watches and passes
 * the pop to that peer (then to the others); if someone else was quicker,
 * it parks again with fresh watches until its deadline.  Single-threaded,
 * in the worker's loop.
 */
#ifndef MAYFLY_WORKER_POP_CLUSTER_H
#define MAYFLY_WORKER_POP_CLUSTER_H

#include <stdint.h>

#include "shm/broker.h"

struct worker;
struct http_request;
struct http_buf;

/*
 * pop_cluster_serve - serve req, a pop r with no partition (not a peer's
 * pass): from what this node holds first, then from the peers; answered
 * at once from the first with messages, else empty (wait false) or parked
 * until timeout_ms from now.  Answers req in every case (500 without
 * memory); a call of the pop family (pop_call.h) while it waits.  results
 * (a POST pop's, pop_call_reply; empty for GET) is taken.
 */
void pop_cluster_serve(struct worker *w, struct http_request *req,
                       const struct shm_pop_req *r, int wait,
                       uint32_t timeout_ms, struct http_buf *results);

#endif
