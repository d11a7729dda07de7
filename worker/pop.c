/*
 * pop.c - GET /api/v1/ephemeral/pop: read the pop's query, route it to the
 * partition's owner, and serve it here as the kind of call it is (a plain
 * pop, this file's; a windowed one, pop_window.h; a peer's watch,
 * pop_watch.h; one with no partition the cluster serves, pop_cluster.h).
 * What they share, and parking, is pop_call.h's.
 */
#include "worker/pop.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "http/buf.h"
#include "http/errors.h"
#include "http/query.h"
#include "http/reply.h"
#include "http/request.h"
#include "shm/catalog.h"
#include "worker/authz.h"
#include "worker/forward.h"
#include "worker/group_join.h"
#include "worker/pop_call.h"
#include "worker/pop_cluster.h"
#include "worker/pop_watch.h"
#include "worker/pop_window.h"
#include "worker/worker_int.h"

/* A plain pop: as pop_call.h does, in every way. */
static const struct pop_kind plain = {.events = &pop_call_events};

/* parse_from - "all", "new", "last". */
static int
parse_from(const struct http_query *q, enum shm_from *out,
           struct http_error *err)
{
    size_t len;
    const char *v = http_query_get(q, "from", &len);

    *out = SHM_FROM_ALL;
    if (v == NULL || strcmp(v, "all") == 0)
        return 0;
    if (strcmp(v, "new") == 0) {
        *out = SHM_FROM_NEW;
        return 0;
    }
    if (strcmp(v, "last") == 0) {
        *out = SHM_FROM_LAST;
        return 0;
    }
    http_error_set(err, 400, "ephemeral_bad_request",
                   "query parameter 'from' must be all, new or last");
    return -EINVAL;
}

/* parse - the pop's query into a; answers the request on error. */
static int
parse(struct worker *w, struct http_request *req, struct pop_args *a)
{
    const struct http_query *q = http_request_args(req);
    struct http_error err;
    size_t ql = 0, pl = 0, gl = 0;
    const char *qn = http_query_get(q, "queue", &ql);
    const char *pn = http_query_get(q, "partition", &pl);
    const char *gn = http_query_get(q, "group", &gl);
    struct shm_pop_req *r = &a->r;
    int auto_ack, alias, watch, announce, window;

    *r = (struct shm_pop_req){0}; /* a->in is left alone: 512 bytes */
    a->anywhere = 0;
    if (qn == NULL) {
        http_reply_error(req, 400, "ephemeral_bad_request",
                         "query parameter 'queue' is required");
        return -EINVAL;
    }
    if (!http_reply_name_ok(req, "queue", qn, ql) ||
        (pn && !http_reply_name_ok(req, "partition", pn, pl)) ||
        (gn && !http_reply_name_ok(req, "group", gn, gl)))
        return -EINVAL;
    if (!worker_authz(w, req, AUTH_POP, "queue", (struct shm_name){qn, ql},
                      &a->in))
        return -EACCES;
    if (http_query_u32(q, "batch", 1, 1, 10000, &r->batch, &err) ||
        http_query_bool(q, "wait", 0, &a->wait, &err) ||
        http_query_u32(q, "timeout", 30000, 0, w->set.max_wait_ms, &a->timeout,
                       &err) ||
        http_query_bool(q, "autoAck", 0, &auto_ack, &err) ||
        http_query_bool(q, "commitOnDelivery", 0, &alias, &err) ||
        parse_from(q, &r->from, &err) ||
        http_query_bool(q, "watch", 0, &watch, &err) ||
        http_query_bool(q, "announce", 0, &announce, &err) ||
        http_query_bool(q, "window", 0, &window, &err)) {
        http_reply_http_error(req, &err);
        return -EINVAL;
    }
    r->auto_ack = auto_ack || alias;
    /* A watch is a peer's (pop_cluster.h): it peeks, taking nothing. */
    a->watch =
        watch && pn == NULL && http_request_header(req, FORWARD_HEADER) != NULL;
    /* So are an announcement of a group (group_join.h) and a pass that
     * keeps the queue's window (pop_cluster.h). */
    a->announce = announce && pn == NULL &&
                  http_request_header(req, FORWARD_HEADER) != NULL;
    a->window_pass = window && pn == NULL &&
                     http_request_header(req, FORWARD_HEADER) != NULL;
    r->queue = a->in.name;
    r->part = (struct shm_name){pn ? pn : "", pn ? pl : 0};
    r->group = (struct shm_name){gn ? gn : "", gn ? gl : 0};
    return 0;
}

/* worker_pop_route - see pop.h.  A pop naming no partition starts here,
 * with what this node holds (a->anywhere: in a cluster, the peers come
 * next, pop_cluster.h); one a peer passed on reads this node's alone. */
int
worker_pop_route(struct worker *w, struct http_request *req, struct pop_args *a)
{
    const struct shm_pop_req *r = &a->r;

    if (worker_serves_all(w))
        return 1;
    if (r->part.len > 0)
        return worker_route(w, req, r->queue, r->part,
                            a->wait ? a->timeout : 0);
    a->anywhere = 1;
    return 1;
}

/* serve - worker_pop_serve once the peers know the group. */
static void
serve(struct worker *w, struct http_request *req, const struct pop_args *a,
      struct http_buf *results)
{
    struct pop_call *c;
    struct shm_qopts o;

    /* A pop with no partition reads this node's share first, then asks
     * the peers (a peer's own pass reads its share alone). */
    if (a->anywhere && http_request_header(req, FORWARD_HEADER) == NULL) {
        pop_cluster_serve(w, req, &a->r, a->wait, a->timeout, results);
        return;
    }
    /* An entry of a batch call (http/inner.h) answers at once, as with
     * wait=false: it has no connection to watch for its caller leaving,
     * and its wait would hold the whole call (the forwarder batches no
     * long poll, coalesce.h; a peer's batch may not make one). */
    int waits = !w->draining && !http_request_is_inner(req);
    int may_park = a->wait && a->timeout > 0 && waits;
    /* A pass that keeps the queue's window parks only once it holds some
     * (pop_cluster.h): holding nothing, it answers at once. */
    int held = a->window_pass && a->timeout > 0 && waits;
    if (a->watch)
        c = pop_watch_new(w, req, &a->r);
    else if ((may_park || held) &&
             shm_catalog_lookup(w->seg->catalog, a->r.queue.ptr, a->r.queue.len,
                                &o) &&
             (o.window_ms || o.window_count)) {
        c = pop_window_new(w, req, &a->r, o.window_ms, o.window_count);
        may_park = held ? POP_PARK_HELD : may_park;
    } else {
        c = pop_call_new(sizeof(*c), &plain, w, req, &a->r);
        may_park = may_park && !held;
    }
    if (c == NULL) {
        http_buf_free(results);
        http_reply_errno(req, -ENOMEM, "pop");
        http_request_resume(req); /* suspended while its acks settled */
        return;
    }
    c->results = *results;
    *results = (struct http_buf){0};
    pop_call_serve(c, may_park, a->timeout);
}

/* A pop waiting while the peers learn its group: its own copy of the
 * names (a POST pop's parse goes when worker_pop_serve returns). */
struct joining {
    struct worker *w;
    struct pop_args a; /* the queue in a.in, the others in names */
    struct http_buf results;
    char names[];
};

/* joined - group_join_go: the peers know the group, serve the pop (req
 * NULL: its client left). */
static void
joined(void *arg, struct http_request *req)
{
    struct joining *j = arg;

    if (req != NULL)
        serve(j->w, req, &j->a, &j->results);
    http_buf_free(&j->results);
    free(j);
}

/* worker_pop_serve - see pop.h. */
void
worker_pop_serve(struct worker *w, struct http_request *req,
                 const struct pop_args *a, struct http_buf *results)
{
    const struct shm_pop_req *r = &a->r;
    size_t pl = r->part.len, gl = r->group.len;
    struct joining *j;

    if (!worker_group_new(w, req, r) ||
        (j = malloc(sizeof(*j) + pl + gl + 1)) == NULL) {
        serve(w, req, a, results); /* no memory: the heartbeats tell them */
        return;
    }
    j->w = w;
    j->a = *a;
    memcpy(j->a.in.buf, r->queue.ptr, r->queue.len);
    j->a.r.queue = (struct shm_name){j->a.in.buf, r->queue.len};
    j->a.in.name = j->a.r.queue;
    memcpy(j->names, r->part.ptr, pl);
    memcpy(j->names + pl, r->group.ptr, gl);
    j->a.r.part = (struct shm_name){j->names, pl};
    j->a.r.group = (struct shm_name){j->names + pl, gl};
    j->results = *results;
    *results = (struct http_buf){0};
    if (worker_group_join(w, req, &j->a.r, joined, j) == 0)
        return;
    serve(w, req, &j->a, &j->results);
    http_buf_free(&j->results);
    free(j);
}

/* worker_pop - see pop.h. */
void
worker_pop(struct worker *w, struct http_request *req)
{
    struct pop_args a;
    struct http_buf none = {0};

    if (parse(w, req, &a) != 0)
        return;
    if (a.announce) {
        worker_group_joined(w, req, &a.r);
        return;
    }
    if (!worker_pop_route(w, req, &a))
        return;
    worker_pop_serve(w, req, &a, &none);
}
