/*
 * parked.c - see parked.h: parking a call, and bringing the loop's events
 * to the parked calls they concern.
 *
 * Events that reach many calls go through one walk (collect, then act):
 * the calls are put on the set's walk list first, then handed the event
 * one by one.  Acting on a call may end it, or in principle another, and
 * park_remove() takes an ended call off the list, so a walk never reaches
 * freed memory and needs no allocation.
 */
#include "worker/parked.h"

#include <errno.h>
#include <poll.h>

#include "http/request.h"
#include "shm/broker.h"
#include "shm/log.h"
#include "worker/authz.h"
#include "worker/conn.h"
#include "worker/worker_int.h"

/* The events a walk brings. */
enum event {
    EV_WAKE,     /* a push posted the walk's handle */
    EV_WAKE_ALL, /* the wake queue overflowed */
    EV_DRAIN,
    EV_MOVED,
    EV_STALE,
    EV_REVOKE,
};

/* worker_park - see parked.h. */
int
worker_park(struct worker *w, struct park *p)
{
    struct worker_conn *k;
    int rc;

    p->fd = http_request_fd(p->req);
    if (p->fd >= 0) {
        rc = worker_conn_watch(w, p->fd, &k);
        if (rc == -EPIPE)
            return rc;
        if (rc == 0)
            k->park = p;
        else
            p->fd = -1;
    }
    if (park_add(&w->parks, p) != 0) {
        if (p->fd >= 0)
            w->conns[p->fd].park = NULL;
        return -ENOMEM;
    }
    return 0;
}

/* worker_unpark - see parked.h. */
int
worker_unpark(struct worker *w, struct park *p)
{
    if (!p->parked)
        return 0;
    park_remove(&w->parks, p);
    for (size_t i = 0; i < p->nwaits; i++)
        if (park_chain(&w->parks, p->waits[i].handle) == NULL)
            shm_unpark(w->seg, w->set.slot, p->waits[i].handle);
    if (p->fd >= 0 && w->conns[p->fd].park == p)
        w->conns[p->fd].park = NULL;
    return 1;
}

/* deliver - event e to p, which a walk reached. */
static void
deliver(struct park_set *s, struct park *p, enum event e, uint64_t handle)
{
    const struct park_ops *o = p->ops;

    switch (e) {
    case EV_WAKE:
        if (o->on_wake(p, handle, s->walk_empty))
            s->walk_empty = p; /* still parked, so still there */
        break;
    case EV_WAKE_ALL:
        o->on_wake(p, 0, NULL);
        break;
    case EV_DRAIN:
        o->on_drain(p);
        break;
    case EV_MOVED:
        if (o->on_moved != NULL)
            o->on_moved(p);
        break;
    case EV_STALE:
        if (o->on_stale != NULL)
            o->on_stale(p);
        break;
    case EV_REVOKE:
        o->on_revoke(p);
        break;
    }
}

/*
 * walk - collect-then-act, once: the calls waiting on handle (EV_WAKE), or
 * every parked call that pick chooses (pick NULL: all), go on the walk
 * list; then each still on it gets e.  Returns how many pick chose.
 */
static size_t
walk(struct worker *w, enum event e, uint64_t handle,
     int (*pick)(struct worker *w, struct park *p))
{
    struct park_set *s = &w->parks;
    size_t k = 0;
    struct park *p;

    if (e == EV_WAKE) {
        for (struct park_wait *q = park_chain(s, handle); q != NULL;
             q = park_chain_next(q))
            park_walk_add(s, q->park);
    } else {
        for (size_t i = 0; i < park_count(s); i++) {
            p = park_at(s, i);
            if (pick == NULL || pick(w, p)) {
                park_walk_add(s, p);
                k++;
            }
        }
    }
    s->walk_empty = NULL;
    while ((p = park_walk_next(s)) != NULL)
        deliver(s, p, e, handle);
    s->walk_empty = NULL;
    return k;
}

/* worker_parked_wake - see parked.h. */
void
worker_parked_wake(struct worker *w, uint64_t handle)
{
    walk(w, EV_WAKE, handle, NULL);
}

/* worker_parked_wake_all - see parked.h. */
void
worker_parked_wake_all(struct worker *w)
{
    walk(w, EV_WAKE_ALL, 0, NULL);
}

/* worker_parked_expire - see parked.h.  No walk: the heap gives the next
 * due call, and on_deadline takes it off or moves it back. */
void
worker_parked_expire(struct worker *w, uint64_t now)
{
    struct park *p;

    while ((p = park_first(&w->parks)) != NULL && p->deadline <= now)
        p->ops->on_deadline(p);
}

/* worker_parked_drain - see parked.h. */
void
worker_parked_drain(struct worker *w)
{
    walk(w, EV_DRAIN, 0, NULL);
}

/* worker_parked_moved - see parked.h. */
void
worker_parked_moved(struct worker *w)
{
    walk(w, EV_MOVED, 0, NULL);
}

/* worker_parked_stale - see parked.h. */
void
worker_parked_stale(struct worker *w)
{
    walk(w, EV_STALE, 0, NULL);
}

/* token_gone - p's caller's token is no longer in the auth table. */
static int
token_gone(struct worker *w, struct park *p)
{
    return !worker_auth_valid(w, p->req);
}

/* worker_parked_revoked - see parked.h. */
void
worker_parked_revoked(struct worker *w)
{
    size_t k = walk(w, EV_REVOKE, 0, token_gone);

    if (k > 0)
        log_info(0, "%zu parked calls of revoked tokens ended (401)", k);
}

/* worker_parked_hangup - see parked.h. */
void
worker_parked_hangup(struct park *p)
{
    p->ops->on_hangup(p);
}

/* worker_parked_gone - see parked.h.  POLLRDHUP, not a peek for EOF: it
 * is seen with bytes still unread before it (a pipelined request, a TLS
 * close_notify). */
int
worker_parked_gone(const struct park *p)
{
    struct pollfd f = {.fd = p->fd, .events = POLLRDHUP};

    if (p->fd < 0)
        return 0;
    return poll(&f, 1, 0) == 1 && (f.revents & (POLLRDHUP | POLLHUP | POLLERR));
}
