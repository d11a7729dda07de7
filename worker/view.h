/*
 * view.h - the worker's view of the cluster: who owns what, whether this
 * node can tell yet, and which peer addresses can be called.
 *
 * The master publishes the members into the board (shm/board.h);
 * a worker keeps its own copy of the owning ones in w->owners
 * (shm/owner.h), refreshed when the board moved, and reads the board itself
 * where it needs every member (a gather, an ack's routes).  Forwarding
 * (forward.h) and every handler that asks "here or elsewhere?" start from
 * these.  Process memory only; one atomic load when nothing changed.
 */
#ifndef MAYFLY_WORKER_VIEW_H
#define MAYFLY_WORKER_VIEW_H

#include <stdint.h>

#include "shm/broker.h"

struct http_request;
struct shm_board_view;
struct shm_owners;
struct worker;

/* How long a member that said it serves no more is taken at its word. */
#define VIEW_GONE_MS 5000

/* worker_serves_all - whether this node serves every partition itself
 * (it is alone, or nobody owns anything): the common single-node case,
 * one atomic load. */
int worker_serves_all(struct worker *w);

/* worker_view_blind - whether this node has peers but sees no member
 * live, itself included: it is starting and has heard none of them yet,
 * so it can tell neither who owns what nor which groups the cluster
 * knows.  Such a node serves no queue (a node alone serves everything
 * from the start). */
int worker_view_blind(struct worker *w);

/* worker_view_read - the board's view now, every member, into v;
 * returns this node's own client address in it ("" when unknown), which
 * worker_addr_unusable() takes. */
const char *worker_view_read(struct worker *w, struct shm_board_view *v);

/*
 * worker_view_mark_gone - member id, as the board names it now, told this
 * worker itself that it serves no more: it answered 503 draining, or its
 * port refused a connection.  For VIEW_GONE_MS, or until the board shows
 * another incarnation of it, worker_view_gone() says so, though the board
 * may still list it live (its master has not heard the leave yet, or hears
 * a crash only after member_ttl_ms).  Only what routes by an id's node
 * (ack_route.h) reads it: partitions keep the board's owners, so that every
 * node places them alike and a partition on its way to its next owner is
 * held there first (DESIGN §6, order across a move).
 */
void worker_view_mark_gone(struct worker *w, const char *id);

/* worker_view_gone - whether member id of incarnation inc was marked gone
 * (worker_view_mark_gone) and the mark holds. */
int worker_view_gone(struct worker *w, const char *id, uint64_t inc);

/*
 * worker_view_around - the header line a forward carries when this node
 * routes around members (HTTP_NODE_AROUND: the ids of those dead or
 * suspect in its view, which own nothing here); NULL when it routes
 * around none.  Kept until the owners change: one compare otherwise.
 */
const char *worker_view_around(struct worker *w);

/*
 * worker_view_members - the owners as the membership places them: those
 * of w->owners and the members this node suspects (forward.c), which
 * w->owners leaves out.  A partition goes around a suspect; a presence
 * channel never does (it is not served in another's stead, DESIGN §5),
 * so it is placed by these.  w->owners itself while nobody is suspect;
 * else a copy kept until the board or the suspects change.  Valid until
 * the next call.
 */
const struct shm_owners *worker_view_members(struct worker *w);

/* worker_view_suspect - whether this node suspects live member id: it
 * cannot connect to it (forward.c), so it routes around it.  As w->owners
 * has it since the last refresh (worker_view_members made one), so that
 * an owner that call picked is judged by the same copy. */
int worker_view_suspect(struct worker *w, const char *id);

/*
 * worker_view_standin - whether this node serves (queue, part) of the
 * forwarded call req in its owner's stead: the call's sender routes
 * around members (HTTP_NODE_AROUND) that this node still sees live, and
 * without them this node is the owner, as it is in the sender's view.
 * Noted in the board (shm_board_standin), so that the master's hand-over
 * ships what is served so to the owner once the calls stop.  A request's
 * inbox and a presence channel are never served in another's stead.
 */
int worker_view_standin(struct worker *w, struct http_request *req,
                        struct shm_name queue, struct shm_name part);

/*
 * worker_addr_unusable - addr cannot reach a peer: unknown, this node's own
 * (own: a default advertise on every host), or no host at all (0.0.0.0,
 * [::], [::ffff:0.0.0.0]: a member listening on every address without an
 * advertise, which connect() would take for this host).
 */
int worker_addr_unusable(const char *addr, const char *own);

#endif
