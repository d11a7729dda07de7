/*
 * leader_wait.c - see leader_wait.h.  A waiting call is a parked call of
 * its own kind (parked.h) that waits on no handle: the board says when a
 * leader is known, and nothing posts a wake for that, so its deadline
 * comes every LEADER_POLL_MS to look again, as configure's calls are
 * stepped by the master's tick.
 */
#include "worker/leader_wait.h"

#include <stdio.h>
#include <stdlib.h>

#include "http/reply.h"
#include "http/request.h"
#include "shm/board.h"
#include "shm/segment.h"
#include "worker/authz.h"
#include "worker/parked.h"
#include "worker/worker_int.h"

#define LEADER_POLL_MS 50

struct leader_wait {
    struct park park; /* first: the park is the call */
    struct worker *w;
    uint64_t until; /* shm_now_ms() of the 503 */
    const char *what;
    char q[201]; /* the queue's name for the sentence, cut as configure's */
    int qlen;
};

/* The request given back to its handler: it runs, whatever the board
 * says by then, so that a wait is never longer than LEADER_WAIT_MS. */
static struct http_request *redo;

/* leaderless - whether this node has peers and knows no raft leader. */
static int
leaderless(struct worker *w)
{
    struct shm_board_view v;

    shm_board_read(w->seg->board, &v);
    return v.nmembers > 1 && v.leader[0] == '\0';
}

/* forget - x is over: unparked, its request's end no longer told, freed. */
static void
forget(struct leader_wait *x)
{
    worker_unpark(x->w, &x->park);
    http_request_on_done(x->park.req, NULL, NULL);
    free(x);
}

/* done - the request ended (its connection died) while it waited. */
static void
done(void *arg, int sent_ok)
{
    struct leader_wait *x = arg;

    (void)sent_ok;
    worker_unpark(x->w, &x->park);
    free(x);
}

/* refuse - 503 no_leader, as configure answers in a minority. */
static void
refuse(struct http_request *req, const char *what, const char *q, int qlen)
{
    http_reply_error(req, 503, "no_leader",
                     "%s of queue '%.*s': no raft leader could be reached",
                     what, qlen, q);
}

/* on_wake - parked.h: only a wake of every call reaches it; it waits on. */
static int
on_wake(struct park *p, uint64_t handle, const struct park *empty)
{
    (void)p;
    (void)handle;
    (void)empty;
    return 1;
}

/* on_deadline - parked.h: a leader is known now (the call runs), or the
 * wait is over (503), or it looks again later. */
static void
on_deadline(struct park *p)
{
    struct leader_wait *x = (struct leader_wait *)p;
    struct worker *w = x->w;
    struct http_request *req = p->req;
    uint64_t now = shm_now_ms();

    if (leaderless(w) && now < x->until) {
        uint64_t next = now + LEADER_POLL_MS;
        park_update_deadline(&w->parks, p, next < x->until ? next : x->until);
        return;
    }
    if (leaderless(w)) {
        refuse(req, x->what, x->q, x->qlen);
        forget(x);
        http_request_resume(req);
        return;
    }
    forget(x);
    redo = req;
    w->redispatch(w, req);
    redo = NULL;
    /* answered at once, or suspended again by a fan-out that answers */
    if (http_request_replied(req))
        http_request_resume(req);
}

/* on_hangup - parked.h: nothing was done; the connection closes. */
static void
on_hangup(struct park *p)
{
    struct http_request *req = p->req;

    forget((struct leader_wait *)p);
    http_request_abort(req);
}

/* on_revoke - parked.h: 401, nothing done. */
static void
on_revoke(struct park *p)
{
    struct http_request *req = p->req;

    forget((struct leader_wait *)p);
    worker_auth_refuse(req, "the bearer token was revoked while this call "
                            "waited for a raft leader");
    http_request_resume(req);
}

/* on_drain - parked.h: the worker stops; nothing done. */
static void
on_drain(struct park *p)
{
    struct http_request *req = p->req;

    forget((struct leader_wait *)p);
    http_reply_draining(req);
    http_request_resume(req);
}

/* No on_moved, no on_stale: a leader is what it waits for, and the
 * deadline answers it either way. */
static const struct park_ops events = {
    on_wake, on_deadline, on_hangup, on_revoke, on_drain, NULL, NULL,
};

/* worker_leader_wait - see leader_wait.h. */
int
worker_leader_wait(struct worker *w, struct http_request *req, const char *what,
                   const char *q, size_t len)
{
    struct leader_wait *x;
    uint64_t now = shm_now_ms();
    int qlen = (int)(len > sizeof(x->q) - 1 ? sizeof(x->q) - 1 : len);

    if (req == redo || !leaderless(w))
        return 1;
    if ((x = calloc(1, sizeof(*x))) == NULL) {
        refuse(req, what, q, qlen);
        return 0;
    }
    x->w = w;
    x->what = what;
    x->until = now + LEADER_WAIT_MS;
    snprintf(x->q, sizeof(x->q), "%.*s", qlen, q);
    x->qlen = qlen;
    x->park.ops = &events;
    x->park.req = req;
    x->park.deadline = now + LEADER_POLL_MS;
    if (worker_park(w, &x->park) != 0) {
        /* the client has gone already, or no memory: nothing done */
        free(x);
        refuse(req, what, q, qlen);
        return 0;
    }
    http_request_suspend(req);
    http_request_on_done(req, done, x);
    return 0;
}
