/*
 * leader_wait.h - reset and the deletion of an implicit queue run only
 * where configure would: on a node that knows a raft leader, or alone.
 *
 * Both are applied to every member's share by a fan-out (gather.h), not
 * through the raft log.  A node cut off from the majority sees its peers
 * dead, so its fan-out reaches nobody and would answer 200 for its own
 * share alone; after the heal the majority's share is the queue (DESIGN
 * §3: the minority answers configure and delete 503).  A cluster node
 * that knows no leader is the one that cannot hear a majority: a leader
 * that has not heard one for an election timeout steps down, and a
 * follower forgets its leader an election timeout after it last heard
 * it; configure answers 503 no_leader there.  So these calls wait for a
 * leader as configure does, up to as long, and are answered 503
 * no_leader, having changed nothing, when none comes; a node alone is
 * always its own majority.  A brief election in a healthy cluster costs
 * them the election's time, not a refusal.
 */
#ifndef MAYFLY_WORKER_LEADER_WAIT_H
#define MAYFLY_WORKER_LEADER_WAIT_H

#include <stddef.h>

struct http_request;
struct worker;

/* How long a call waits for a leader: configure's own wait
 * (master/configure.c, CONFIGURE_WAIT_MS). */
#define LEADER_WAIT_MS 5000

/*
 * worker_leader_wait - whether req, the reset ("reset") or deletion
 * ("delete") of queue q as the client named it, may run now: 1 when this
 * node has no peers, knows a raft leader, or req came back here from that
 * wait.  Else 0, and req is the wait's: suspended until a leader is known
 * and then given to its route's handler again (w->redispatch), or answered
 * 503 no_leader after LEADER_WAIT_MS (401 if its token is revoked
 * meanwhile, 503 draining if the worker stops).
 */
int worker_leader_wait(struct worker *w, struct http_request *req,
                       const char *what, const char *q, size_t len);

#endif
