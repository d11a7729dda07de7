/*
 * depth.c - GET /api/v1/ephemeral/queues/{q}/depth: a queue's pending,
 * leased and waiting counts per partition and per group.
 *
 * scope=node answers this node's share, read from the segment.
 * scope=cluster (the default while other members are live) answers the
 * sum of every live member's share (worker/gather.h, http/depth_merge.h):
 * "nodes" names the members whose shares are in it, "missing" those that
 * did not answer with their own share of this queue.
 */
#include "worker/depth.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http/buf.h"
#include "http/client.h"
#include "http/depth_merge.h"
#include "http/names.h"
#include "http/query.h"
#include "http/reply.h"
#include "http/request.h"
#include "shm/queue_admin.h"
#include "worker/authz.h"
#include "worker/gather.h"
#include "worker/worker_int.h"

/* The peer's path and query: two 512-byte names, percent-encoded (3 bytes a
 * byte at most), and the rest of the path. */
#define PATH_QUERY_MAX (2 * 3 * HTTP_NAME_MAX + 80)

struct depth {
    struct http_buf parts, groups;
    uint32_t np, ng;
    uint32_t np_pending; /* partitions with something pending */
    uint64_t pending;    /* their sum: the queue's pending */
    uint64_t delayed;    /* the sum of the partitions' not visible yet */
};

static void
depth_part(void *arg, const struct shm_part_info *p)
{
    struct depth *d = arg;

    d->np_pending += p->pending > 0;
    d->pending += p->pending;
    d->delayed += p->delayed;
    http_buf_append_str(&d->parts,
                        d->np++ ? ",{\"partition\":" : "{\"partition\":");
    http_buf_append_json_str(&d->parts, p->name, p->name_len);
    http_buf_printf(
        &d->parts,
        ",\"pending\":%llu,\"leased\":%llu,\"waiting\":%llu,"
        "\"bytes\":%llu,\"oldestAgeMs\":%llu,\"delayed\":%llu}",
        (unsigned long long)p->pending, (unsigned long long)p->leased,
        (unsigned long long)p->waiting, (unsigned long long)p->bytes,
        (unsigned long long)p->oldest_age_ms, (unsigned long long)p->delayed);
}

static void
depth_group(void *arg, const struct shm_group_info *g)
{
    struct depth *d = arg;

    http_buf_append_str(&d->groups, d->ng++ ? ",{\"group\":" : "{\"group\":");
    http_buf_append_json_str(&d->groups, g->name, g->name_len);
    http_buf_printf(&d->groups, ",\"pending\":%llu,\"skipped\":%llu}",
                    (unsigned long long)g->pending,
                    (unsigned long long)g->skipped);
}

/* node_share - this node's share of queue as a depth answer, appended to
 * b; -ENOENT when the node neither holds nor declares it. */
static int
node_share(struct worker *w, struct shm_name queue, const struct shm_name *g,
           struct http_buf *b)
{
    struct depth d = {0};
    struct shm_queue_info q;
    int rc = shm_queue_depth(w->seg, queue, g, shm_now_ms(), &q, depth_part,
                             depth_group, &d);

    if (rc == 0) {
        struct shm_name shown = worker_client_name(queue);
        http_buf_append_str(b, "{\"queue\":");
        http_buf_append_json_str(b, shown.ptr, shown.len);
        http_buf_append_str(b, ",\"node\":");
        http_buf_append_json_str(b, w->set.node_id, strlen(w->set.node_id));
        http_buf_append_str(b, ",\"group\":");
        if (g != NULL)
            http_buf_append_json_str(b, g->ptr, g->len);
        else
            http_buf_append_str(b, "null");
        http_buf_printf(
            b,
            ",\"tier\":\"%s\",\"pending\":%llu,\"delayed\":%llu,"
            "\"partitionsPending\":%u,\"bytes\":%llu,\"partitions\":[",
            q.declared ? "declared" : "implicit", (unsigned long long)d.pending,
            (unsigned long long)d.delayed, d.np_pending,
            (unsigned long long)q.bytes);
        http_buf_append(b, d.parts.data ? d.parts.data : "", d.parts.len);
        http_buf_append_str(b, "],\"groups\":[");
        http_buf_append(b, d.groups.data ? d.groups.data : "", d.groups.len);
        http_buf_append_str(b, "]}");
    }
    http_buf_free(&d.parts);
    http_buf_free(&d.groups);
    return rc == 0 ? 0 : -ENOENT;
}

/* path_query - "/api/v1/ephemeral/queues/<q>/depth?scope=node[&group=<g>]"
 * percent-encoded into out; -ENOMEM. */
static int
path_query(struct shm_name queue, const struct shm_name *g, char *out,
           size_t cap)
{
    char *q = http_client_escape(queue.ptr, queue.len);
    char *ge = g ? http_client_escape(g->ptr, g->len) : NULL;
    int rc = q && (g == NULL || ge) ? 0 : -ENOMEM;

    if (rc == 0 &&
        snprintf(out, cap, "/api/v1/ephemeral/queues/%s/depth?scope=node%s%s",
                 q, g ? "&group=" : "", g ? ge : "") >= (int)cap)
        rc = -ENOMEM;
    free(q);
    free(ge);
    return rc;
}

/* depth_classify - a member's answer to the depth query. */
static enum gather_share
depth_classify(struct gather *g, const struct http_client_resp *r,
               const char *node)
{
    size_t qlen;
    const char *q = http_request_param(g->req, &qlen);

    switch (http_depth_answer(r->status, r->body.data, r->body.len, q, qlen,
                              node)) {
    case HTTP_DEPTH_SHARE:
        return GATHER_SHARE;
    case HTTP_DEPTH_NONE:
        return GATHER_NONE;
    default:
        return GATHER_BAD;
    }
}

/* depth_finish - the sum of the shares; 404 when no node holds the queue,
 * 503 when only members that did not answer might. */
static void
depth_finish(struct gather *g)
{
    const char *body[SHM_BOARD_MEMBERS];
    size_t len[SHM_BOARD_MEMBERS], qlen;
    const char *q = http_request_param(g->req, &qlen);
    struct http_buf b = {0};
    struct http_shares s;

    gather_shares(g, &s, body, len);
    if (g->nshares == 0 && g->nmissing == 0) {
        http_reply_error(g->req, 404, "ephemeral_queue_not_found",
                         "queue '%.*s' is not held or declared on any node",
                         (int)(qlen > 200 ? 200 : qlen), q);
    } else if (g->nshares == 0 || http_depth_merge(&s, &b) != 0) {
        http_reply_header(g->req, "Retry-After", "1");
        http_reply_error(g->req, 503, "ephemeral_forward_failed",
                         "no node that answered holds queue '%.*s', and %d "
                         "did not answer",
                         (int)(qlen > 200 ? 200 : qlen), q, g->nmissing);
    } else {
        http_reply(g->req, 200, &b);
    }
    http_buf_free(&b);
}

static const struct gather_ops depth_ops = {depth_classify, depth_finish};

/* cluster_depth - the scope=cluster answer (queue: the internal name;
 * the peers are asked with the client's, and prefix the tenant again). */
static void
cluster_depth(struct worker *w, struct http_request *req, struct shm_name queue,
              const struct shm_name *group)
{
    char pq[PATH_QUERY_MAX];
    struct http_buf own = {0};

    if (path_query(worker_client_name(queue), group, pq, sizeof(pq)) != 0) {
        http_reply_errno(req, -ENOMEM, "depth");
        return;
    }
    node_share(w, queue, group, &own); /* empty when it holds nothing */
    gather_start(w, req, &own, pq, 0, &depth_ops);
    http_buf_free(&own);
}

/* worker_depth - see depth.h. */
void
worker_depth(struct worker *w, struct http_request *req)
{
    const struct http_query *args = http_request_args(req);
    struct http_buf b = {0};
    size_t len, glen = 0;
    const char *name = http_request_param(req, &len);
    const char *group = http_query_get(args, "group", &glen);
    struct shm_name g = {group, glen}, queue = {name, len};
    struct worker_qname in;
    int cluster;

    if (!http_reply_name_ok(req, "queue", name, len) ||
        (group && glen && !http_reply_name_ok(req, "group", group, glen)) ||
        !worker_authz(w, req, AUTH_READ, "queue", queue, &in) ||
        (cluster = gather_scope(w, req)) < 0)
        return;
    queue = in.name;
    if (cluster) {
        cluster_depth(w, req, queue, group ? &g : NULL);
        return;
    }
    if (node_share(w, queue, group ? &g : NULL, &b) != 0)
        http_reply_error(req, 404, "ephemeral_queue_not_found",
                         "queue '%.*s' is not held or declared on this node",
                         (int)(len > 200 ? 200 : len), name);
    else
        http_reply(req, 200, &b);
    http_buf_free(&b);
}
