/*
 * parked.h - the calls a worker keeps open in its loop without blocking
 * it, and the events that reach them (parked.c).
 *
 * A parked call is a request waiting for something: its record indexed
 * by deadline and by the wake handles it waits on (park.h), its client's
 * socket watched for a hang-up (conn.h), its worker's waiter bit set in
 * the segment for each handle, so a push there wakes the worker (shm_pop
 * sets it, under the partition lock, so no push in between is missed).
 * The loop (worker.c) knows a call only by its struct park and the kind's
 * struct park_ops: what wakes it, and how it ends, is the kind's.
 *
 * The kinds: a pop (pop.c), a windowed pop (pop_window.c), a peer's watch
 * (pop_watch.c), a pop the cluster serves (pop_cluster.c) and a request's
 * wait on its inbox (pop_inbox.c).  All five pop, and share pop_call.h.
 *
 * Adding a kind (a stream, say), without touching the others or the loop:
 *   1. Its struct embeds a struct park, and a struct park_wait for each
 *      handle it waits on (p->waits, p->nwaits; several handles may be
 *      one call's, a handle may be many calls').
 *   2. A const struct park_ops: a handler for each event below.
 *   3. To park: set p->ops, p->req, p->deadline and the waits' handles,
 *      set the worker's waiter bit of each handle in the segment (a pop's
 *      shm_pop does, with park set), then worker_park().  Every call
 *      has a deadline the loop may sleep until (less than 2^31 ms away:
 *      a stream's next keepalive, say); move it with
 *      park_update_deadline().
 *   4. Every path that ends the call unparks it first (worker_unpark,
 *      which clears a handle's waiter bit once no call waits there), and
 *      so does its request's end (http_request_on_done) before the call's
 *      memory goes.  Counters of its own (mayfly_parked_pops counts pops)
 *      are the kind's.
 *
 * Events are delivered one at a time, in the loop.  Those that reach many
 * calls (a wake, a drain, a move, a revocation) gather them first, then
 * act on each in turn: a handler may end its own call or another, and a
 * call ended meanwhile is passed over; a call parked meanwhile is not
 * reached.  A handler must not deliver events itself.
 */
#ifndef MAYFLY_WORKER_PARKED_H
#define MAYFLY_WORKER_PARKED_H

#include <stdint.h>

#include "worker/park.h"

struct worker;

/* What a kind of parked call does on each event.  Each handler is given
 * the parked call; on_moved and on_stale may be NULL (the event leaves
 * the kind parked), the others may not. */
struct park_ops {
    /* on_wake - a push posted handle, one p waits on (handle 0: the wake
     * queue overflowed, so any may have come).  1 when p found nothing
     * and stays parked, else 0.  empty, when not NULL, is a call this
     * same wake reached before whose on_wake said 1: when its on_wake is
     * p's own (a kind of p's family, whose layout p knows), p may skip a
     * try that would find nothing too. */
    int (*on_wake)(struct park *p, uint64_t handle, const struct park *empty);
    /* on_deadline - p->deadline is now or past: p must be unparked, or its
     * deadline moved past now (the loop asks again until then). */
    void (*on_deadline)(struct park *p);
    /* on_hangup - the client shut its side of p's socket. */
    void (*on_hangup)(struct park *p);
    /* on_revoke - the auth file was read again, and p's token is gone. */
    void (*on_revoke)(struct park *p);
    /* on_drain - the worker stops (SIGTERM): p ends now, or soon. */
    void (*on_drain)(struct park *p);
    /* on_moved - the owners changed (w->owners refreshed): whether that
     * concerns p is the kind's to see. */
    void (*on_moved)(struct park *p);
    /* on_stale - the master's view went stale: peers may soon serve what
     * p waits on. */
    void (*on_stale)(struct park *p);
};

/* worker_park - index p (ops, req, deadline and waits set) among w's
 * parked calls and watch its client's socket for a hang-up.  0; -EPIPE
 * when the client has shut its side already; -ENOMEM.  Not parked then. */
int worker_park(struct worker *w, struct park *p);

/* worker_unpark - forget p: its indexes, the waiter bits of the handles
 * no other call waits on, its socket's entry (the socket stays in the
 * epoll for the connection's next call).  1 when p was parked, else 0. */
int worker_unpark(struct worker *w, struct park *p);

/* worker_parked_wake - on_wake for the calls that wait on handle. */
void worker_parked_wake(struct worker *w, uint64_t handle);

/* worker_parked_wake_all - the wake queue overflowed: on_wake for every
 * parked call. */
void worker_parked_wake_all(struct worker *w);

/* worker_parked_expire - on_deadline for the calls whose deadline is now
 * or past, nearest first. */
void worker_parked_expire(struct worker *w, uint64_t now);

/* worker_parked_drain - on_drain for every parked call. */
void worker_parked_drain(struct worker *w);

/* worker_parked_moved - on_moved for every parked call. */
void worker_parked_moved(struct worker *w);

/* worker_parked_stale - on_stale for every parked call. */
void worker_parked_stale(struct worker *w);

/* worker_parked_revoked - after the auth file was read again: on_revoke
 * for the calls whose token is gone. */
void worker_parked_revoked(struct worker *w);

/* worker_parked_hangup - on_hangup for p, whose client shut its side (the
 * loop found p in the socket's struct worker_conn). */
void worker_parked_hangup(struct park *p);

/*
 * worker_parked_gone - whether p's client has shut its side or reset its
 * socket though the loop has not heard yet: a poll of the socket, no
 * wait.  A kind calls it on a wake before it takes messages, and ends the
 * call as on_hangup does when it says 1: a worker that stalled (stopped,
 * starved) sees the wakes queued meanwhile before its epoll reports the
 * hang-ups queued before them, and a message taken then would go to a
 * connection that is gone (SPEC §3).  One system call: a woken call's
 * only (a call that skips its try on a wake skips this too).  0 for a
 * call with no socket (an inner request).
 */
int worker_parked_gone(const struct park *p);

#endif
