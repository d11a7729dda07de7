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

struct shm_board_view;
struct worker;

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
 * worker_addr_unusable - addr cannot reach a peer: unknown, this node's own
 * (own: a default advertise on every host), or no host at all (0.0.0.0,
 * [::], [::ffff:0.0.0.0]: a member listening on every address without an
 * advertise, which connect() would take for this host).
 */
int worker_addr_unusable(const char *addr, const char *own);

#endif
