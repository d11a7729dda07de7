/*
 * admin.h - reset, delete and the queue listing (admin.c).
 */
#ifndef MAYFLY_WORKER_ADMIN_H
#define MAYFLY_WORKER_ADMIN_H

struct worker;
struct http_request;

/* worker_reset - POST /api/v1/ephemeral/reset: drops a queue's messages
 * here and, in a cluster, on every other live member; a cluster node that
 * knows no raft leader answers 503 no_leader (leader_wait.h). */
void worker_reset(struct worker *w, struct http_request *req);

/* worker_delete - DELETE /api/v1/ephemeral/queue/{q}: a declared queue
 * through the raft log (declare.h), an implicit one here and on every
 * other live member, as reset (503 no_leader without a raft leader). */
void worker_delete(struct worker *w, struct http_request *req);

/* worker_list - GET /api/v1/ephemeral/queues: this node's queues, or with
 * scope=cluster every live member's merged. */
void worker_list(struct worker *w, struct http_request *req);

#endif
