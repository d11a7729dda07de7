/*
 * pop.h - GET /api/v1/ephemeral/pop, and the parked pops the loop drives
 * (pop.c): woken by pushes, answered at their deadlines, when their clients
 * hang up, when their partitions move, and when the worker drains.
 */
#ifndef MAYFLY_WORKER_POP_H
#define MAYFLY_WORKER_POP_H

#include <stdint.h>

#include "shm/broker.h"

struct worker;
struct http_request;
struct park;

/* Why a wait on an inbox ended (worker_pop_wait). */
enum pop_wait_end {
    POP_WAIT_GOT,     /* a message came */
    POP_WAIT_TIMEOUT, /* its timeout passed */
    POP_WAIT_HANGUP,  /* the client shut its side */
    POP_WAIT_DRAIN,   /* the worker stops, or its view went stale */
    POP_WAIT_REVOKED, /* the caller's token was revoked (SPEC §10) */
};

/* What a wait on an inbox does when it ends, and when its request does. */
struct pop_waiter {
    /* end - answer req: msg is the message taken (NULL unless GOT). */
    void (*end)(void *arg, struct http_request *req,
                const struct shm_popped *msg, enum pop_wait_end why);
    /* done - req is over (answered or not): free arg. */
    void (*done)(void *arg);
};

/* worker_pop - the pop route: answers req, or parks it (wait=true and
 * nothing there yet). */
void worker_pop(struct worker *w, struct http_request *req);

/*
 * worker_pop_wait - wait on inbox (one message, auto-acked, queue mode) as
 * a parked pop waits, for at most timeout_ms, then call how->end (at once
 * when a message is there already).  how->done(arg) runs when req ends,
 * also when this fails.  0, or -ENOMEM (req answered 500).  req may be
 * suspended already: answered at once, it is resumed.
 */
int worker_pop_wait(struct worker *w, struct http_request *req,
                    struct shm_name inbox, uint32_t timeout_ms,
                    const struct pop_waiter *how, void *arg);

/* worker_pop_wake - retry the pops parked on handle (a push posted it). */
void worker_pop_wake(struct worker *w, uint64_t handle);

/* worker_pop_wake_all - the wake queue overflowed: retry every parked pop. */
void worker_pop_wake_all(struct worker *w);

/* worker_pop_expire - answer the parked pops whose deadline is now or
 * past, with what is there (possibly nothing). */
void worker_pop_expire(struct worker *w, uint64_t now);

/* worker_pop_answer_all - the worker drains: every parked pop is answered
 * at once, as at its deadline. */
void worker_pop_answer_all(struct worker *w);

/* worker_pop_moved - after the owners changed (w->owners refreshed): answer
 * the pops parked on a partition another node owns now, and those with no
 * partition that watch the peers (pop_cluster.h) of the old view (with
 * what they hold, usually nothing), so their clients ask again and reach
 * the owner, or watch the new members. */
void worker_pop_moved(struct worker *w);

/* worker_pop_let_go_all - every parked pop answered as worker_pop_moved()
 * answers a moved one: the view they were placed by no longer holds.  A
 * request waiting on its inbox (worker_pop_wait) is not let go: the inbox
 * is this node's and its reply can still come. */
void worker_pop_let_go_all(struct worker *w);

/* worker_pop_hangup - the client of the pop parked as p shut its side
 * (the loop found p in the socket's struct worker_conn): it is answered
 * now, or dropped. */
void worker_pop_hangup(struct park *p);

/* worker_pop_revoked - after the auth file was read again: the parked pops
 * whose token is gone are answered 401 unauthorized, and the waits on an
 * inbox end (POP_WAIT_REVOKED: their request answers 401). */
void worker_pop_revoked(struct worker *w);

#endif
