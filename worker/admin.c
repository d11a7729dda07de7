/*
 * admin.c - reset, delete and the queue listing.
 *
 * Reset and the deletion of an implicit queue are applied here and, in a
 * cluster, by every other live member (worker/gather.h), whose answers are
 * summed; a declared queue's deletion goes through the raft log
 * (declare.c).  Either runs only on a node that knows a raft leader (or
 * has no peers): a node in a minority would reach no member but itself,
 * so it answers 503 as configure does there (leader_wait.h).  The listing is this node's, or with scope=cluster every
 * live member's merged.  Depth is in depth.c.
 *
 * These read or clear whole queues; shm/ takes one partition lock at a time,
 * so a listing is a sum of per-partition snapshots, not one atomic view.
 */
#include "worker/admin.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http/answer_json.h"
#include "http/buf.h"
#include "http/client.h"
#include "http/errors.h"
#include "http/list_merge.h"
#include "http/parse.h"
#include "http/peer_answer.h"
#include "http/query.h"
#include "http/reply.h"
#include "http/request.h"
#include "shm/arena.h"
#include "shm/catalog.h"
#include "shm/presence.h"
#include "shm/queue_admin.h"
#include "worker/authz.h"
#include "worker/declare.h"
#include "worker/forward.h"
#include "worker/gather.h"
#include "worker/leader_wait.h"
#include "worker/view.h"
#include "worker/worker_int.h"

/* every_node - whether req (reset, delete) must also reach every other
 * live member: a cluster, and req was not sent by one. */
static int
every_node(struct worker *w, struct http_request *req)
{
    return !worker_serves_all(w) &&
           http_request_header(req, FORWARD_HEADER) == NULL;
}

/* may_run - whether req (reset, delete of q) runs now: it was sent by a
 * member, which asked that, or this node is not in a minority (else the
 * wait has it: leader_wait.h).  A node alone in its view serves every
 * partition (worker_serves_all), so this is asked before every_node. */
static int
may_run(struct worker *w, struct http_request *req, const char *what,
        const char *q, size_t len)
{
    return http_request_header(req, FORWARD_HEADER) != NULL ||
           worker_leader_wait(w, req, what, q, len);
}

/* applied_classify - a member's answer to a reset or delete it applied. */
static enum gather_share
applied_classify(struct gather *g, const struct http_client_resp *r,
                 const char *node)
{
    (void)g;
    (void)node;
    return r->status == 200 ? GATHER_SHARE : GATHER_BAD;
}

/* applied_finish - {"queue", key: the sum over the shares (as_bool: any
 * true), "nodes", "missing"} plus tail; the queue's name is the first
 * share's (this node's own). */
static void
applied_finish(struct gather *g, const char *key, int as_bool, const char *tail)
{
    struct http_buf b = {0};
    uint64_t total = 0;
    struct http_peer_applied first = {0}, a;
    const char *queue;
    int got = 0;

    for (int i = 0; i < g->nshares; i++) {
        struct http_peer_applied *o = got ? &a : &first;
        if (http_peer_applied(g->share[i].data, g->share[i].len, key, o) != 0)
            continue;
        total += as_bool ? (uint64_t)o->flag : o->count;
        got = 1;
    }
    queue = first.has_queue ? first.queue : "";
    http_buf_append_str(&b, "{\"queue\":");
    http_buf_append_json_str(&b, queue, strlen(queue));
    http_buf_printf(&b, ",\"%s\":", key);
    if (as_bool)
        http_buf_append_str(&b, total ? "true" : "false");
    else
        http_buf_append_i64(&b, (int64_t)total);
    http_buf_append_str(&b, tail);
    http_buf_append_str(&b, ",\"nodes\":");
    http_buf_append_json_strs(&b, g->nodes, g->nnodes);
    http_buf_append_str(&b, ",\"missing\":");
    http_buf_append_json_strs(&b, g->missing, g->nmissing);
    http_buf_append_str(&b, "}");
    http_reply(g->req, 200, &b);
}

/* reset_finish - the reset's merged answer. */
static void
reset_finish(struct gather *g)
{
    applied_finish(g, "dropped", 0, "");
}

/* delete_finish - an implicit queue's deletion's merged answer. */
static void
delete_finish(struct gather *g)
{
    applied_finish(g, "deleted", 1, ",\"declared\":false");
}

static const struct gather_ops reset_ops = {applied_classify, reset_finish};
static const struct gather_ops delete_ops = {applied_classify, delete_finish};

/*
 * worker_reset - see admin.h.  In a cluster a queue's partitions are spread
 * over the nodes that own them: the reset is applied here and sent to every
 * other live member, and the answer sums what each dropped (naming the
 * members that did not answer).
 */
void
worker_reset(struct worker *w, struct http_request *req)
{
    struct http_reset r;
    struct http_error err;
    struct http_buf b = {0};
    size_t len;
    const char *body = http_request_body(req, &len);

    if (http_parse_reset(body, len, &r, &err) != 0) {
        http_reply_http_error(req, &err);
        return;
    }
    struct worker_qname in;
    if (http_reply_name_ok(req, "queue", r.queue.ptr, r.queue.len) &&
        worker_authz(w, req, AUTH_ADMIN, "queue",
                     (struct shm_name){r.queue.ptr, r.queue.len}, &in) &&
        may_run(w, req, "reset", r.queue.ptr, r.queue.len)) {
        int64_t n = shm_queue_reset(w->seg, w->set.slot, in.name, shm_now_ms());
        http_buf_append_str(&b, "{\"queue\":");
        http_buf_append_json_str(&b, r.queue.ptr, r.queue.len);
        http_buf_append_str(&b, ",\"dropped\":");
        http_buf_append_i64(&b, n < 0 ? 0 : n);
        http_buf_append_str(&b, "}");
        if (every_node(w, req))
            gather_start_same(w, req, &b, &reset_ops);
        else
            http_reply(req, 200, &b);
    }
    http_reset_free(&r);
}

/*
 * worker_delete - see admin.h.  A declared queue is deleted through the
 * raft log, on every node as the entry applies; an implicit one's
 * partitions are spread over their owners, so it is deleted here and on
 * every other live member, as a reset is.
 */
void
worker_delete(struct worker *w, struct http_request *req)
{
    struct http_buf b = {0};
    struct shm_qopts o;
    struct worker_qname in;
    size_t len;
    const char *q = http_request_param(req, &len);

    if (!http_reply_name_ok(req, "queue", q, len) ||
        !worker_authz(w, req, AUTH_ADMIN, "queue", (struct shm_name){q, len},
                      &in))
        return;
    if (shm_catalog_lookup(w->seg->catalog, in.name.ptr, in.name.len, &o) ==
        1) {
        worker_declare_delete(w, req, in.name.ptr, in.name.len);
        return;
    }
    if (!may_run(w, req, "delete", q, len))
        return;
    int deleted = shm_queue_delete(w->seg, w->set.slot, in.name, shm_now_ms());
    http_buf_append_str(&b, "{\"queue\":");
    http_buf_append_json_str(&b, q, len);
    http_buf_append_str(&b, deleted > 0 ? ",\"deleted\":true"
                                        : ",\"deleted\":false");
    http_buf_append_str(&b, ",\"declared\":false}");
    if (every_node(w, req))
        gather_start_same(w, req, &b, &delete_ops);
    else
        http_reply(req, 200, &b);
}

/* worker_options_view - see worker.h. */
struct http_qopts
worker_options_view(const struct shm_qopts *o)
{
    return (struct http_qopts){
        .max_length = o->max_length,
        .max_bytes = o->max_bytes,
        .drop_oldest = o->policy == SHM_POLICY_DROP_OLDEST,
        .window_ms = o->window_ms,
        .window_count = o->window_count,
        .ttl_s = o->ttl_s,
        .lease_s = o->lease_s,
        .retry_limit = o->retry_limit,
        .dedupe_s = o->dedupe_s,
        .retry_delay_ms = o->retry_delay_ms,
        .dl_len = SHM_QOPT_DL_LEN(o->flags),
        .dl_expired = (o->flags & SHM_QOPT_DL_EXPIRED) != 0,
        .conflate = (o->flags & SHM_QOPT_CONFLATE) != 0,
    };
}

/* A listing in the making: up to limit entries; one more means the page
 * is cut, after last. */
struct listing {
    const struct worker *w; /* whose caller's tenant and read grants */
    struct http_buf *b;
    uint32_t n, limit;
    int truncated;
    struct http_buf last; /* the last entry's name, JSON-quoted */
};

/* list_one - one queue's entry, or the note that the page is cut. */
static void
list_one(void *arg, const struct shm_queue_info *q)
{
    struct listing *l = arg;
    struct http_buf *b = l->b;
    struct shm_name name = {q->name, q->name_len}, shown;

    /* a channel's events queue (shm/presence.h) is no client's queue */
    if (l->truncated || !worker_in_tenant(l->w, name) ||
        shm_presence_named(name))
        return;
    if (l->n == l->limit) {
        l->truncated = 1;
        return;
    }
    shown = worker_client_name(name);
    l->last.len = 0;
    http_buf_append_json_str(&l->last, shown.ptr, shown.len);
    http_buf_append_str(b, l->n++ ? ",{\"queue\":" : "{\"queue\":");
    http_buf_append_json_str(b, shown.ptr, shown.len);
    http_buf_printf(
        b,
        ",\"tier\":\"%s\",\"depth\":%llu,\"leased\":%llu,"
        "\"waiting\":%llu,\"bytes\":%llu,\"partitions\":%u,"
        "\"groups\":%u,\"drops\":{\"bounds\":%llu,\"ttl\":%llu,"
        "\"retry\":%llu},\"options\":",
        q->declared ? "declared" : "implicit", (unsigned long long)q->depth,
        (unsigned long long)q->leased, (unsigned long long)q->waiting,
        (unsigned long long)q->bytes, q->partitions, q->groups,
        (unsigned long long)q->drops_bounds, (unsigned long long)q->drops_ttl,
        (unsigned long long)q->drops_retry);
    struct http_qopts o = worker_options_view(&q->opts);
    char dl[SHM_NAME_MAX];
    /* The deadLetter name is the catalog's (declared queues only). */
    if (o.dl_len > 0 && shm_catalog_dead_letter(l->w->seg->catalog, q->name,
                                                q->name_len, dl) == o.dl_len)
        o.dead_letter = dl;
    http_options_json(b, &o);
    http_buf_append_str(b, "}");
}

/* The longest scope=cluster page (a larger limit is cut to it, and the
 * answer says where to go on): every member's is parsed and merged in the
 * worker's loop, which must not stall (100,000 queues from each of three
 * nodes took seconds and a gigabyte). */
#define LIST_CLUSTER_MAX 1000

/* list_classify - a member's answer to the listing query. */
static enum gather_share
list_classify(struct gather *g, const struct http_client_resp *r,
              const char *node)
{
    (void)g;
    return http_list_answer_ok(r->status, r->body.data, r->body.len, node)
               ? GATHER_SHARE
               : GATHER_BAD;
}

/* list_finish - the merged listing. */
static void
list_finish(struct gather *g)
{
    const char *body[SHM_BOARD_MEMBERS];
    size_t len[SHM_BOARD_MEMBERS];
    struct http_buf b = {0};
    struct http_error err;
    struct http_shares s;
    uint32_t limit;
    int rc;

    http_query_u32(http_request_args(g->req), "limit", 1000, 1, 100000, &limit,
                   &err); /* checked before the gather */
    if (limit > LIST_CLUSTER_MAX)
        limit = LIST_CLUSTER_MAX;
    gather_shares(g, &s, body, len);
    rc = http_list_merge(&s, limit, &b);
    if (rc == 0)
        http_reply(g->req, 200, &b);
    else /* every share was checked: only memory can fail */
        http_reply_errno(g->req, rc, "list");
    http_buf_free(&b);
}

static const struct gather_ops list_ops = {list_classify, list_finish};

/* list_cluster - gather every live member's listing of the same prefix,
 * page and limit; own is this node's. */
static void
list_cluster(struct worker *w, struct http_request *req, struct shm_name prefix,
             struct shm_name after, uint32_t limit, struct http_buf *own)
{
    char *pe = http_client_escape(prefix.ptr, prefix.len);
    char *ae = http_client_escape(after.ptr, after.len), *pq = NULL;

    if (pe == NULL || ae == NULL ||
        asprintf(&pq, "/api/v1/ephemeral/queues?scope=node&limit=%u%s%s%s%s",
                 limit, prefix.len ? "&prefix=" : "", pe,
                 after.len ? "&after=" : "", ae) < 0) {
        http_buf_free(own);
        http_reply_errno(req, -ENOMEM, "list");
    } else {
        gather_start(w, req, own, pq, 0, &list_ops);
    }
    free(pe);
    free(ae);
    free(pq);
}

/* worker_list - see admin.h. */
void
worker_list(struct worker *w, struct http_request *req)
{
    const struct http_query *q = http_request_args(req);
    struct http_error err;
    struct http_buf items = {0}, b = {0};
    struct listing l = {.w = w, .b = &items};
    char ip[SHM_NAME_MAX + AUTH_TENANT_MAX + 2],
        ia[SHM_NAME_MAX + AUTH_TENANT_MAX + 2];
    size_t plen = 0, alen = 0, tn;
    const char *prefix = http_query_get(q, "prefix", &plen);
    const char *after = http_query_get(q, "after", &alen);
    struct shm_name pn = {prefix ? prefix : "", prefix ? plen : 0};
    struct shm_name an = {after ? after : "", after ? alen : 0};
    int cluster;

    if (http_query_u32(q, "limit", 1000, 1, 100000, &l.limit, &err) != 0) {
        http_reply_http_error(req, &err);
        return;
    }
    if (!worker_authz_any(w, req, AUTH_READ) ||
        (an.len && !http_reply_name_ok(req, "after", an.ptr, an.len)) ||
        (cluster = gather_scope(w, req)) < 0)
        return;
    /* Every member's listing is merged in this loop: keep it small. */
    if (cluster && l.limit > LIST_CLUSTER_MAX)
        l.limit = LIST_CLUSTER_MAX;
    /* The caller's tenant's names start with its prefix; with auth on the
     * read grants leave out names anywhere in the order, so every name
     * of the tenant is looked at and list_one stops the page. */
    tn = worker_tenant_prefix(w, ip);
    memcpy(ia, ip, tn);
    if (pn.len > SHM_NAME_MAX || an.len > SHM_NAME_MAX) {
        http_reply_error(req, 400, "invalid_name",
                         "'prefix' and 'after' are at most %d bytes",
                         SHM_NAME_MAX);
        goto out;
    }
    memcpy(ip + tn, pn.ptr, pn.len);
    memcpy(ia + tn, an.ptr, an.len);
    shm_queue_list_after(w->seg, (struct shm_name){ip, tn + pn.len},
                         (struct shm_name){ia, an.len ? tn + an.len : 0},
                         w->auth_on ? UINT32_MAX : l.limit + 1, shm_now_ms(),
                         list_one, &l);
    http_buf_append_str(&b, "{\"node\":");
    http_buf_append_json_str(&b, w->set.node_id, strlen(w->set.node_id));
    http_buf_printf(&b, ",\"count\":%u,\"cellBytes\":%d,\"queues\":[", l.n,
                    SHM_CELL_BYTES);
    http_buf_append(&b, items.data ? items.data : "", items.len);
    http_buf_append_str(&b, "],\"truncated\":");
    http_buf_append_str(&b, l.truncated ? "true,\"next\":" : "false");
    if (l.truncated && l.last.oom)
        b.oom = 1; /* no "next" to give: 500, not broken JSON */
    else if (l.truncated)
        http_buf_append(&b, l.last.data, l.last.len);
    http_buf_append_str(&b, "}");
    if (cluster)
        list_cluster(w, req, pn, an, l.limit, &b);
    else
        http_reply(req, 200, &b);
out:
    http_buf_free(&items);
    http_buf_free(&l.last);
}
