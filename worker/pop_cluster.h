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
 * A long poll that found nothing anywhere parks here (pop.c, which answers
 * it on a local push, its deadline or a hang-up) and leaves a *watch* on
 * every peer: the same pop with watch=1, parked there, which takes nothing
 * (a peer that finds messages gives them straight back, no attempt
 * counted, and answers "ready").  The first ready watch unparks the pop
 * here, drops the other watches and passes the pop to that peer (then to
 * the others); if someone else was quicker, it parks again with fresh
 * watches until its deadline.  Single-threaded, in the worker's loop.
 */
#ifndef MAYFLY_WORKER_POP_CLUSTER_H
#define MAYFLY_WORKER_POP_CLUSTER_H

#include <stdint.h>

#include "shm/broker.h"

struct worker;
struct http_request;
struct pop_cluster;

/* What the cluster pop needs of the pop it serves (pop.c); arg is the
 * pop's own. */
struct pop_cluster_ops {
    /* park - take here (setting the waiter bits) or park here until
     * deadline; 1 when it answered the request (messages came), else 0 */
    int (*park)(void *arg, uint64_t deadline);
    /* unpark - stop waiting here, without answering */
    void (*unpark)(void *arg);
    /* answer_empty - answer the request with no messages */
    void (*answer_empty)(void *arg);
};

/*
 * pop_cluster_start - serve req (a pop r with no partition that found
 * nothing here) from the peers: answered at once from the first peer with
 * messages, else empty (wait false) or parked until deadline (shm_now_ms()
 * time).  req is suspended until answered.  NULL without memory (req not
 * touched); else free it with pop_cluster_free() when req ends.
 */
struct pop_cluster *
pop_cluster_start(struct worker *w, struct http_request *req,
                  const struct shm_pop_req *r, int wait, uint64_t deadline,
                  const struct pop_cluster_ops *ops, void *arg);

/* pop_cluster_stop - the pop was answered here (a local push, its deadline,
 * a hang-up, a drain): drop the watches and passes still out, so that none
 * takes at a peer what nobody would receive. */
void pop_cluster_stop(struct pop_cluster *pc);

/* pop_cluster_free - the request ended: drop the calls still out. */
void pop_cluster_free(struct pop_cluster *pc);

#endif
