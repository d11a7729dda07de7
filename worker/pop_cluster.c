/*
 * pop_cluster.c - see pop_cluster.h.
 */
#include "worker/pop_cluster.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http/buf.h"
#include "http/client.h"
#include "http/reply.h"
#include "http/request.h"
#include "shm/log.h"
#include "shm/owner.h"
#include "worker/forward.h"
#include "worker/worker_int.h"

#define PASS_MIN_MS 250 /* a pass's least time, however little the pop has */

struct pc_peer {
    struct pop_cluster *pc;
    char id[SHM_STATUS_ID_MAX];
    char addr[SHM_STATUS_ADDR_MAX];
};

struct pop_cluster {
    struct worker *w;
    struct http_request *req;
    const struct pop_cluster_ops *ops;
    void *arg;
    char *query; /* the pop's own parameters, percent-encoded */
    char *authz; /* its credentials, or NULL */
    int wait;
    uint64_t deadline;
    int npeers, first, tried; /* passing on: peer (first + tried) next */
    struct pc_peer peer[SHM_STATUS_MEMBERS];
};

static void try_next(struct pop_cluster *pc);

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
        http_client_cancel(pc->w->client, &pc->peer[i]);
}

/* finish - the request has its answer: let MHD send it. */
static void
finish(struct pop_cluster *pc)
{
    cancel_all(pc);
    http_request_resume(pc->req);
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
    const char *headers[3] = {FORWARD_HEADER ": 1", pc->authz};
    char *url = NULL;
    struct http_client_req r = {
        .method = "GET",
        .headers = headers,
        .nheaders = pc->authz ? 2 : 1,
        .timeout_ms = watch ? left + FORWARD_MS
                            : (pass > PASS_MIN_MS ? pass : PASS_MIN_MS),
    };
    int rc = -1;

    r.connect_timeout_ms = watch ? FORWARD_MS : r.timeout_ms;

    if (worker_addr_unusable(p->addr, pc->w->owners.self_addr) ||
        asprintf(&url, "http://%s/api/v1/ephemeral/pop?%s&wait=%s&timeout=%u%s",
                 p->addr, pc->query, watch ? "true" : "false", left,
                 watch ? "&watch=true" : "") < 0)
        return -1;
    r.url = url;
    rc = http_client_request(pc->w->client, &r, done, p) == 0 ? 0 : -1;
    free(url);
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
    pc->ops->unpark(pc->arg);
    pc->first = (int)(p - pc->peer);
    pc->tried = 0;
    try_next(pc);
}

/* watch - park here and leave a watch on every peer. */
static void
watch(struct pop_cluster *pc)
{
    if (pc->ops->park(pc->arg, pc->deadline)) {
        finish(pc);
        return;
    }
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
        http_reply(pc->req, 200, &r->body);
        finish(pc);
        return;
    }
    if (r->err != 0)
        log_info(0, "a pop passed to node %s failed: %s", p->id, r->error);
    try_next(pc);
}

/* try_next - pass the pop to the next peer; when every peer was asked,
 * wait (a long poll with time left) or answer empty.  A draining worker
 * asks no more peers (and cluster_park answers instead of parking). */
static void
try_next(struct pop_cluster *pc)
{
    while (pc->tried < pc->npeers && !pc->w->draining) {
        struct pc_peer *p = &pc->peer[(pc->first + pc->tried++) % pc->npeers];
        if (send_pop(pc, p, 0, passed) == 0)
            return;
    }
    if (pc->wait && shm_now_ms() < pc->deadline) {
        watch(pc);
        return;
    }
    pc->ops->answer_empty(pc->arg);
    finish(pc);
}

/* query - the pop's parameters as a query string (malloc'd), or NULL. */
static char *
query(const struct shm_pop_req *r)
{
    static const char *const from[] = {"all", "new", "last"};
    char *q = http_client_escape(r->queue.ptr, r->queue.len);
    char *g =
        r->group.len ? http_client_escape(r->group.ptr, r->group.len) : NULL;
    char *out = NULL;

    if (q != NULL && (r->group.len == 0 || g != NULL) &&
        asprintf(&out, "queue=%s&batch=%u&autoAck=%s&from=%s%s%s", q, r->batch,
                 r->auto_ack ? "true" : "false", from[r->from],
                 g ? "&group=" : "", g ? g : "") < 0)
        out = NULL;
    free(q);
    free(g);
    return out;
}

/* pop_cluster_start - see pop_cluster.h. */
struct pop_cluster *
pop_cluster_start(struct worker *w, struct http_request *req,
                  const struct shm_pop_req *r, int wait, uint64_t deadline,
                  const struct pop_cluster_ops *ops, void *arg)
{
    static unsigned rotate;
    struct pop_cluster *pc = calloc(1, sizeof(*pc));
    const struct shm_owners *o = &w->owners;

    if (pc == NULL || (pc->query = query(r)) == NULL ||
        worker_auth_header(req, &pc->authz) != 0) {
        if (pc != NULL)
            free(pc->query);
        free(pc);
        return NULL;
    }
    *pc = (struct pop_cluster){.w = w,
                               .req = req,
                               .ops = ops,
                               .arg = arg,
                               .query = pc->query,
                               .authz = pc->authz,
                               .wait = wait,
                               .deadline = deadline};
    for (int i = 0; i < o->n; i++) {
        if (i == o->self)
            continue;
        struct pc_peer *p = &pc->peer[pc->npeers++];
        p->pc = pc;
        snprintf(p->id, sizeof(p->id), "%s", o->m[i].id);
        snprintf(p->addr, sizeof(p->addr), "%s", o->m[i].addr);
    }
    pc->first = pc->npeers ? (int)(rotate++ % (unsigned)pc->npeers) : 0;
    http_request_suspend(req);
    try_next(pc);
    return pc;
}

/* pop_cluster_stop - see pop_cluster.h. */
void
pop_cluster_stop(struct pop_cluster *pc)
{
    if (pc != NULL)
        cancel_all(pc);
}

/* pop_cluster_free - see pop_cluster.h. */
void
pop_cluster_free(struct pop_cluster *pc)
{
    if (pc == NULL)
        return;
    cancel_all(pc);
    free(pc->query);
    free(pc->authz);
    free(pc);
}
