/*
 * pop_inbox.h - a request's wait on its inbox (pop_inbox.c), for the
 * request verb (rpc.c): parked as a pop is, it takes the reply when one
 * is pushed there, and says why it ended otherwise.
 */
#ifndef MAYFLY_WORKER_POP_INBOX_H
#define MAYFLY_WORKER_POP_INBOX_H

#include <stdint.h>

#include "shm/broker.h"

struct worker;
struct http_request;

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
    /* end_many - a gather's end (worker_pop_gather): sink holds every
     * message taken (none: why says what ended it). */
    void (*end_many)(void *arg, struct http_request *req,
                     const struct shm_sink *sink, enum pop_wait_end why);
};

/*
 * worker_pop_wait - wait on inbox (one message, auto-acked, queue mode) as
 * a parked pop waits, for at most timeout_ms, then call how->end (at once
 * when a message is there already).  how->done(arg) runs when req ends,
 * also when this fails.  0, or -ENOMEM (req answered 500).  req may be
 * suspended already: answered at once, it is resumed.  The view going
 * stale does not end it: the inbox is this node's, and its reply can
 * still come.
 */
int worker_pop_wait(struct worker *w, struct http_request *req,
                    struct shm_name inbox, uint32_t timeout_ms,
                    const struct pop_waiter *how, void *arg);

/*
 * worker_pop_gather - worker_pop_wait for up to max messages (SPEC §13's
 * request-many): how->end_many once max came, quiet_ms (0: none) passed
 * after the last one, or timeout_ms after the start, with what came.
 */
int worker_pop_gather(struct worker *w, struct http_request *req,
                      struct shm_name inbox, uint32_t timeout_ms, uint32_t max,
                      uint32_t quiet_ms, const struct pop_waiter *how,
                      void *arg);

#endif
