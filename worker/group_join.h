/*
 * group_join.h - a group's first pop on a node makes the group known to
 * every live peer before the pop is served (SPEC §5: a message pushed
 * after a group's first pop anywhere waits for that group).
 *
 * The heartbeats (master/groups.h) carry every group a node knows, but a
 * beat later: a message another group completed on a peer meanwhile was
 * freed there, and the new group never saw it.  So the node that serves a
 * pop (the partition's owner, or the node a pop with no partition came
 * to) first asks its own registry whether the queue knows the group
 * (shm_group_known); when not, it sends every live peer the pop's queue,
 * group and from, marked announce=true (signed, X-Mayfly-Forwarded), and
 * serves the pop only once each answered or gave up.  A peer makes the
 * group known to its queue of that name (shm_group_learn, making the queue
 * as a pop does) before it answers, so every partition's owner holds a
 * message pushed after the pop's answer for the group: any partition of
 * the queue may be on any live peer, so all are asked.
 *
 * Why this and not a grace on freeing (a completed message kept a beat in
 * case a group comes): the cost falls on a group's first pop on a node
 * (one round trip to the peers, in parallel), where a grace would keep
 * every completed message of every queue in memory longer and still lose
 * one when a beat is late (a lost beat, a lock held, a table past one
 * beat's walk).  A pop of a group the node knows, the hot path, pays one
 * registry look-up under the queue lock.  A peer that does not answer in
 * GROUP_JOIN_MS (a cut, a stop) is left to the heartbeats, as before.
 * Single-threaded, in the worker's loop.
 */
#ifndef MAYFLY_WORKER_GROUP_JOIN_H
#define MAYFLY_WORKER_GROUP_JOIN_H

#include "shm/broker.h"

struct worker;
struct http_request;

/* How long a peer's answer to an announcement is waited for. */
#define GROUP_JOIN_MS 2000

/* What runs once the peers know the group: req is still waiting, or NULL
 * when its client left meanwhile (then go only frees arg). */
typedef void group_join_go(void *arg, struct http_request *req);

/*
 * worker_group_new - whether pop r of req is to be announced before it is
 * served: this node has peers, r is not a peer's own pass or watch (the
 * node it came through announced it), and the queue here does not know
 * its group.
 */
int worker_group_new(struct worker *w, struct http_request *req,
                     const struct shm_pop_req *r);

/*
 * worker_group_join - tell the peers of r's group: 0 when they are being
 * told (req is suspended, and go(arg, req) runs once each answered, each
 * call given GROUP_JOIN_MS, and the group is made known here too); 1 when
 * no call could go out (go is not called: the pop goes on at once, the
 * heartbeats tell them).  r must stay as it is until go runs.
 */
int worker_group_join(struct worker *w, struct http_request *req,
                      const struct shm_pop_req *r, group_join_go *go,
                      void *arg);

/*
 * worker_group_joined - serve a peer's announcement (a pop marked
 * announce=true, signed as forwarded): make r's group known to its queue
 * here, creating the queue as a pop would, and answer {"queue",
 * "messages": []} (503 when it could not be made known).
 */
void worker_group_joined(struct worker *w, struct http_request *req,
                         const struct shm_pop_req *r);

#endif
