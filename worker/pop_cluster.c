/*
 * pop_cluster.c - see pop_cluster.h: the pop family's cluster kind
 * (pop_call.h), and its calls to the peers.
 */
#include "worker/pop_cluster.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http/buf.h"
#include "http/client.h"
#include "http/reply.h"
#include "http/request.h"
#include "shm/catalog.h"
#include "shm/log.h"
#include "shm/owner.h"
#include "shm/queue_admin.h"
#include "shm/stats.h"
#include "worker/authz.h"
#include "worker/forward.h"
#include "worker/pop_call.h"
#include "worker/pop_window.h"
#include "worker/worker_int.h"

#define PASS_MIN_MS 250 /* a pass's least time, however little the pop has */

struct pc_peer {
    struct pop_cluster *pc;
    char id[SHM_BOARD_ID_MAX];
    char addr[SHM_BOARD_ADDR_MAX];
};

struct pop_cluster {
    struct pop_call c;
    char *query; /* the pop's own parameters, percent-encoded */
    char *authz; /* its credentials, or NULL */
    int wait;
    int windowed;       /* the queue's window applies (a long poll) */
    struct pop_win win; /* its terms, for what this node takes */
    uint64_t deadline;
    int npeers, first, tried; /* passing on: peer (first + tried) next */
    uint64_t sig;             /* the owners' signature the peers are from */
    struct pc_peer peer[SHM_BOARD_MEMBERS];
};

#define CLUSTER_OF(c) POP_KIND_OF(c, struct pop_cluster, c)

static void try_next(struct pop_cluster *pc);
static void list_peers(struct pop_cluster *pc);

/* has_messages - a pop's answer holds at least one message.  The first
 * "messages":[ is the answer's own (the queue's name before it is escaped,
 * so it holds no bare quote). */
static int
has_messages(const struct http_buf *b)
{
    static const char key[] = "\"messages\":[";
    const char *p =
        b->data ? memmem(b->data, b->len, key, sizeof(key) - 1) : NULL;

    return p != NULL && p + sizeof(key) - 1 < b->data + b->len &&
           p[sizeof(key) - 1] != ']';
}

/* is_ready - a watch's answer says the peer holds something to take. */
static int
is_ready(const struct http_buf *b)
{
    static const char tail[] = "\"ready\":true}";

    return b->len >= sizeof(tail) - 1 &&
           memcmp(b->data + b->len - (sizeof(tail) - 1), tail,
                  sizeof(tail) - 1) == 0;
}

/* cancel_all - drop every call still out to a peer. */
static void
cancel_all(struct pop_cluster *pc)
{
    for (int i = 0; i < pc->npeers; i++)
        http_client_cancel(pc->c.w->client, &pc->peer[i]);
}

/* finish - the request has its answer: let MHD send it. */
static void
finish(struct pop_cluster *pc)
{
    cancel_all(pc);
    http_request_resume(pc->c.req);
}

/* send_pop - the pop to peer p: passed on (wait=false), or as a watch parked
 * there until our deadline.  0, or -1 when it could not be sent. */
static int
send_pop(struct pop_cluster *pc, struct pc_peer *p, int watch,
         http_client_done_fn *done)
{
    uint64_t now = shm_now_ms();
    unsigned left = pc->deadline > now ? (unsigned)(pc->deadline - now) : 0;
    /* a pass is bounded by the pop's own time too (a few peers that do not
     * answer must not hold it past its timeout many times over), and by
     * FORWARD_MS, within which a draining worker still answers it */
    unsigned pass = left < FORWARD_MS ? left : FORWARD_MS;
    /* a windowed pass may hold what it took until the window closes, as
     * long as the pop has left, as a watch may */
    int held = watch || pc->windowed;
    const char *headers[3] = {FORWARD_HEADER ": 1", pc->authz};
    char *target = NULL;
    struct http_client_req r = {
        .method = "GET",
        .port = HTTP_CLIENT_PEER,
        .addr = p->addr,
        .headers = headers,
        .nheaders = pc->authz ? 2 : 1,
        .timeout_ms = held ? left + FORWARD_MS
                           : (pass > PASS_MIN_MS ? pass : PASS_MIN_MS),
    };
    int rc = -1;

    r.connect_timeout_ms = held ? FORWARD_MS : r.timeout_ms;

    if (worker_addr_unusable(p->addr, pc->c.w->owners.self_addr) ||
        asprintf(&target, "/api/v1/ephemeral/pop?%s&wait=%s&timeout=%u%s",
                 pc->query, watch ? "true" : "false", left,
                 watch          ? "&watch=true"
                 : pc->windowed ? "&window=true"
                                : "") < 0)
        return -1;
    r.target = target;
    rc = http_client_request(pc->c.w->client, &r, done, p) == 0 ? 0 : -1;
    free(target);
    return rc;
}

/* watched - a peer's watch came back: ready, or it let the watch go. */
static void
watched(void *arg, struct http_client_resp *r)
{
    struct pc_peer *p = arg;
    struct pop_cluster *pc = p->pc;

    if (r->err != 0 || r->status != 200 || !is_ready(&r->body))
        return; /* not watched there any more; the pop still waits here */
    cancel_all(pc);
    pop_call_unpark(&pc->c);
    pc->first = (int)(p - pc->peer);
    pc->tried = 0;
    try_next(pc);
}

/* watch - take here or park here (not once draining: the parked calls
 * were answered then, so it answers now), and leave a watch on every
 * peer: the members there are now (a change while the passes were out
 * reached no parked pop: a member that left gets no more calls). */
static void
watch(struct pop_cluster *pc)
{
    uint64_t now = shm_now_ms();
    int may_park = pc->deadline > now && !pc->c.w->draining;

    if (!pop_call_serve(&pc->c, may_park,
                        may_park ? (uint32_t)(pc->deadline - now) : 0))
        return; /* answered (pop_call_end dropped the calls out) */
    if (pc->c.sink.count > 0)
        return; /* a window opened here: it waits here alone */
    if (pc->sig != pc->c.w->owners.sig)
        list_peers(pc);
    for (int i = 0; i < pc->npeers; i++)
        send_pop(pc, &pc->peer[i], 1, watched);
}

/* passed - a peer answered the pop passed to it. */
static void
passed(void *arg, struct http_client_resp *r)
{
    struct pc_peer *p = arg;
    struct pop_cluster *pc = p->pc;

    if (r->err == 0 && r->status == 200 && has_messages(&r->body)) {
        pop_call_reply(&pc->c, &r->body);
        finish(pc);
        return;
    }
    if (r->err != 0)
        log_info(0, "a pop passed to node %s failed: %s", p->id, r->error);
    try_next(pc);
}

/* try_next - pass the pop to the next peer; when every peer was asked,
 * wait (a long poll with time left) or answer empty.  A draining worker
 * asks no more peers (and watch answers instead of parking). */
static void
try_next(struct pop_cluster *pc)
{
    while (pc->tried < pc->npeers && !pc->c.w->draining) {
        struct pc_peer *p = &pc->peer[(pc->first + pc->tried++) % pc->npeers];
        if (send_pop(pc, p, 0, passed) == 0)
            return;
    }
    if (pc->wait && shm_now_ms() < pc->deadline) {
        watch(pc);
        return;
    }
    pop_call_answer(&pc->c);
    finish(pc);
}

/* query - the pop's parameters as a query string (malloc'd), or NULL. */
static char *
query(const struct shm_pop_req *r)
{
    char tail[48];

    snprintf(tail, sizeof(tail), "&batch=%u&autoAck=%s", r->batch,
             r->auto_ack ? "true" : "false");
    return pop_call_query(r, "", tail);
}

/* list_peers - the live members but this node, the first asked in turn,
 * for fairness. */
static void
list_peers(struct pop_cluster *pc)
{
    static unsigned rotate;
    const struct shm_owners *o = &pc->c.w->owners;

    pc->npeers = 0;
    pc->tried = 0;
    pc->sig = o->sig;
    for (int i = 0; i < o->n; i++) {
        if (i == o->self)
            continue;
        struct pc_peer *p = &pc->peer[pc->npeers++];
        p->pc = pc;
        snprintf(p->id, sizeof(p->id), "%s", o->m[i].id);
        snprintf(p->addr, sizeof(p->addr), "%s", o->m[i].addr);
    }
    pc->first = pc->npeers ? (int)(rotate++ % (unsigned)pc->npeers) : 0;
}

/* start - go to the peers with pop r (as the client asked it: a window
 * took over the call's autoAck), the request suspended until answered.
 * 0, or -ENOMEM (req not answered). */
static int
start(struct pop_cluster *pc, const struct shm_pop_req *r, int wait,
      uint64_t deadline)
{
    if ((pc->query = query(r)) == NULL ||
        worker_auth_header(pc->c.req, &pc->authz) != 0)
        return -ENOMEM;
    pc->wait = wait;
    pc->deadline = deadline;
    list_peers(pc);
    http_request_suspend(pc->c.req);
    try_next(pc);
    return 0;
}

/* leave - pop_kind.leave: the pop is answered here (a local push, its
 * deadline, a hang-up, a drain): drop the watches and passes still out,
 * so that none takes at a peer what nobody would receive. */
static void
leave(struct pop_call *c)
{
    cancel_all(CLUSTER_OF(c));
}

/* done - pop_kind.done: the request ended: drop the calls still out. */
static void
done(struct pop_call *c)
{
    struct pop_cluster *pc = CLUSTER_OF(c);

    cancel_all(pc);
    free(pc->query);
    free(pc->authz);
}

/* on_moved - park_ops.on_moved: it watches the members it started with.
 * It starts over with the members there are now, for the time it has left
 * (a node that stops hands its partitions to the others: the pop goes on
 * waiting for them there, never answered empty before its time).  One
 * whose window opened here answers what it holds. */
static void
on_moved(struct park *p)
{
    struct pop_call *c = POP_KIND_OF(p, struct pop_call, park);
    struct pop_cluster *pc = CLUSTER_OF(c);

    if (c->sink.count > 0) {
        pop_call_let_go(c);
        return;
    }
    pop_call_unpark(c);
    cancel_all(pc);
    list_peers(pc);
    try_next(pc);
}

static const struct park_ops events = {
    pop_call_on_wake,   pop_call_on_deadline, pop_call_on_hangup,
    pop_call_on_revoke, pop_call_on_deadline, on_moved,
    pop_call_on_stale,
};

/* take - pop_kind.take: a plain pop's, or up to a window's target; what
 * it finds here, the pop waits for here alone (the peers' watches go). */
static int
take(struct pop_call *c, int park)
{
    struct pop_cluster *pc = CLUSTER_OF(c);
    int rc = pop_call_take(c, pc->windowed ? pc->win.target : 0, park);

    if (rc > 0 && pc->windowed)
        cancel_all(pc);
    return rc;
}

/* window - pop_kind.window: a windowed pop's. */
static uint64_t
window(const struct pop_call *c, uint64_t now)
{
    const struct pop_cluster *pc = CLUSTER_OF(c);

    return pc->windowed ? pop_win_until(&pc->win, c, now) : 0;
}

/* answer - pop_kind.answer: with a window and autoAck, what it held
 * leased is completed first. */
static void
answer(struct pop_call *c)
{
    struct pop_cluster *pc = CLUSTER_OF(c);

    if (pc->windowed)
        pop_win_complete(&pc->win, c);
    pop_call_answer(c);
}

static const struct pop_kind kind = {
    .events = &events,
    .take = take,
    .window = window,
    .answer = answer,
    .leave = leave,
    .done = done,
};

/* served_here - a partition of the queue this node owns, or still holds
 * messages of (a move on its way): served here first. */
static int
served_here(void *arg, struct shm_name part, uint64_t held)
{
    struct pop_call *c = arg;

    return held > 0 || shm_owner_here(&c->w->owners, c->pop.queue, part);
}

/* pop_cluster_serve - see pop_cluster.h. */
void
pop_cluster_serve(struct worker *w, struct http_request *req,
                  const struct shm_pop_req *r, int wait, uint32_t timeout_ms,
                  struct http_buf *results)
{
    struct pop_call *c =
        pop_call_new(sizeof(struct pop_cluster), &kind, w, req, r);
    int rc = 0, may_wait = wait && timeout_ms > 0 && !w->draining;
    struct shm_qopts o;

    if (c == NULL) {
        http_buf_free(results);
        http_reply_errno(req, -ENOMEM, "pop");
        http_request_resume(req); /* suspended while its acks settled */
        return;
    }
    c->results = *results;
    *results = (struct http_buf){0};
    /* A long poll keeps the queue's window (SPEC §4) where its first
     * messages are: here, or on the peer a pass finds them on, which
     * holds them there until the window closes (window=true). */
    struct pop_cluster *pc = CLUSTER_OF(c);
    if (may_wait &&
        shm_catalog_lookup(w->seg->catalog, r->queue.ptr, r->queue.len, &o) &&
        (o.window_ms || o.window_count)) {
        pc->windowed = 1;
        pop_win_terms(&pc->win, &c->pop, o.window_ms, o.window_count);
    }
    /* nothing of it here: no queue made here either */
    if (shm_queue_part_each(w->seg, c->pop.queue, shm_now_ms(), served_here, c))
        rc = pop_call_try(c, 0);
    if (rc > 0 && window(c, shm_now_ms()) != 0) {
        /* a window opened here: once more with the waiter bit up (the next
         * push wakes it), then it waits here for the rest */
        rc = pop_call_try(c, 1);
        if (rc > 0 && window(c, shm_now_ms()) != 0 &&
            pop_call_park(c, timeout_ms) == 0)
            return;
    }
    if (rc == 0 &&
        start(pc, r, wait && !w->draining, shm_now_ms() + timeout_ms) == 0)
        return;
    pop_call_end(c, rc);
}
