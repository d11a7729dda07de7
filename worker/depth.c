/*
 * depth.c - GET /api/v1/ephemeral/queues/{q}/depth: a queue's pending,
 * leased and waiting counts per partition and per group.
 *
 * scope=node (the default) answers this node's share, read from the
 * segment.  scope=cluster also asks every other live member for its share
 * (this route with scope=node, at the client address the member's master
 * sends in its heartbeats), all at once, and answers the sum
 * (http/depth_merge.h) once each has answered or PEER_TIMEOUT_MS has
 * passed; "missing" names the members that did not, or whose answer was
 * not their own share of this queue (so a node that reaches itself under a
 * peer's address is never counted twice).  The request stays suspended
 * meanwhile.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
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
#include "shm/log.h"
#include "shm/status.h"
#include "worker/worker_int.h"

#define PEER_TIMEOUT_MS 2000
#define PEER_ANSWER_MAX ((size_t)8 << 20) /* a share is not larger */
/* The peer's path and query: two 512-byte names, percent-encoded (3 bytes a
 * byte at most), and the rest of the path. */
#define PATH_QUERY_MAX (2 * 3 * HTTP_NAME_MAX + 80)

struct depth {
    struct http_buf parts, groups;
    uint32_t np, ng;
    uint32_t np_pending; /* partitions with something pending */
    uint64_t pending;    /* their sum: the queue's pending */
};

static void
depth_part(void *arg, const struct shm_part_info *p)
{
    struct depth *d = arg;

    d->np_pending += p->pending > 0;
    d->pending += p->pending;
    http_buf_append_str(&d->parts,
                        d->np++ ? ",{\"partition\":" : "{\"partition\":");
    http_buf_append_json_str(&d->parts, p->name, p->name_len);
    http_buf_printf(
        &d->parts,
        ",\"pending\":%llu,\"leased\":%llu,\"waiting\":%llu,"
        "\"bytes\":%llu,\"oldestAgeMs\":%llu}",
        (unsigned long long)p->pending, (unsigned long long)p->leased,
        (unsigned long long)p->waiting, (unsigned long long)p->bytes,
        (unsigned long long)p->oldest_age_ms);
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
        http_buf_append_str(b, "{\"queue\":");
        http_buf_append_json_str(b, queue.ptr, queue.len);
        http_buf_append_str(b, ",\"node\":");
        http_buf_append_json_str(b, w->set.node_id, strlen(w->set.node_id));
        http_buf_append_str(b, ",\"group\":");
        if (g != NULL)
            http_buf_append_json_str(b, g->ptr, g->len);
        else
            http_buf_append_str(b, "null");
        http_buf_printf(
            b,
            ",\"tier\":\"%s\",\"pending\":%llu,"
            "\"partitionsPending\":%u,\"bytes\":%llu,\"partitions\":[",
            q.declared ? "declared" : "implicit", (unsigned long long)d.pending,
            d.np_pending, (unsigned long long)q.bytes);
        http_buf_append(b, d.parts.data ? d.parts.data : "", d.parts.len);
        http_buf_append_str(b, "],\"groups\":[");
        http_buf_append(b, d.groups.data ? d.groups.data : "", d.groups.len);
        http_buf_append_str(b, "]}");
    }
    http_buf_free(&d.parts);
    http_buf_free(&d.groups);
    return rc == 0 ? 0 : -ENOENT;
}

/*
 * A scope=cluster answer being gathered: this node's share and each peer's
 * as they come.  It lives as long as the request (freed by its on_done,
 * which also drops the peer calls still pending if the request ends first).
 */
struct gather;
struct peer {
    struct gather *g;
    char id[SHM_STATUS_ID_MAX];
};
struct gather {
    struct worker *w;
    struct http_request *req;
    char self[SHM_STATUS_ID_MAX];
    int waiting; /* peers that have not answered */
    int npeers, nshares, nnodes, nmissing;
    struct http_buf share[SHM_STATUS_MEMBERS]; /* 200 answers */
    const char *nodes[SHM_STATUS_MEMBERS];     /* whose shares are in */
    const char *missing[SHM_STATUS_MEMBERS];   /* who did not answer */
    struct peer peer[SHM_STATUS_MEMBERS];
};

/* gather_done - the request ended (answered or not): drop what is left. */
static void
gather_done(void *arg, int sent_ok)
{
    struct gather *g = arg;

    (void)sent_ok;
    for (int i = 0; g->waiting > 0 && i < g->npeers; i++)
        http_client_cancel(g->w->client, &g->peer[i]);
    for (int i = 0; i < g->nshares; i++)
        http_buf_free(&g->share[i]);
    free(g);
}

/* finish - answer with the sum of what came. */
static void
finish(struct gather *g)
{
    const char *body[SHM_STATUS_MEMBERS];
    size_t len[SHM_STATUS_MEMBERS], qlen;
    const char *q = http_request_param(g->req, &qlen);
    struct http_buf b = {0};
    struct http_depth_shares s = {
        .node = g->self,
        .body = body,
        .len = len,
        .n = g->nshares,
        .nodes = g->nodes,
        .nnodes = g->nnodes,
        .missing = g->missing,
        .nmissing = g->nmissing,
    };

    for (int i = 0; i < g->nshares; i++) {
        body[i] = g->share[i].data;
        len[i] = g->share[i].len;
    }
    if (g->nshares == 0 && g->nmissing == 0) {
        http_reply_error(g->req, 404, "ephemeral_queue_not_found",
                         "queue '%.*s' is not held or declared on any node",
                         (int)(qlen > 200 ? 200 : qlen), q);
    } else if (g->nshares == 0 || http_depth_merge(&s, &b) != 0) {
        /* Only the missing might hold it: nothing to answer yet. */
        http_reply_header(g->req, "Retry-After", "1");
        http_reply_error(g->req, 503, "ephemeral_forward_failed",
                         "no node that answered holds queue '%.*s', and %d "
                         "did not answer",
                         (int)(qlen > 200 ? 200 : qlen), q, g->nmissing);
    } else {
        http_reply(g->req, 200, &b);
    }
    http_buf_free(&b);
    http_request_resume(g->req);
}

/* peer_answered - one peer's share came, or did not. */
static void
peer_answered(void *arg, struct http_client_resp *r)
{
    struct peer *p = arg;
    struct gather *g = p->g;
    size_t qlen;
    const char *q = http_request_param(g->req, &qlen);
    enum http_depth_answer a =
        r->err != 0 ? HTTP_DEPTH_BAD
                    : http_depth_answer(r->status, r->body.data, r->body.len, q,
                                        qlen, p->id);

    if (a == HTTP_DEPTH_SHARE) {
        g->share[g->nshares++] = r->body;
        r->body = (struct http_buf){0};
    }
    if (a == HTTP_DEPTH_BAD) {
        log_debug(0, "depth: member %s did not answer (%s, status %u)", p->id,
                  r->err ? r->error : "answer", r->status);
        g->missing[g->nmissing++] = p->id;
    } else {
        g->nodes[g->nnodes++] = p->id;
    }
    if (--g->waiting == 0)
        finish(g);
}

/* unusable - mb's address cannot reach mb: unknown, the node's own (a
 * default advertise on every host), or no host at all (0.0.0.0, [::]: a
 * member listening on every address without an advertise). */
static int
unusable(const struct shm_member *mb, const char *own)
{
    struct in6_addr a6;
    struct in_addr a4;
    char host[SHM_STATUS_ADDR_MAX];
    const char *colon = strrchr(mb->addr, ':');
    size_t n = colon ? (size_t)(colon - mb->addr) : 0;

    if (mb->addr[0] == '\0' || strcmp(mb->addr, own) == 0 || n == 0)
        return 1;
    if (mb->addr[0] == '[' && n >= 2 && mb->addr[n - 1] == ']') {
        memcpy(host, mb->addr + 1, n - 2);
        host[n - 2] = '\0';
        return inet_pton(AF_INET6, host, &a6) == 1 &&
               (IN6_IS_ADDR_UNSPECIFIED(&a6) || IN6_IS_ADDR_V4MAPPED(&a6));
    }
    memcpy(host, mb->addr, n);
    host[n] = '\0';
    return inet_pton(AF_INET, host, &a4) == 1 && a4.s_addr == INADDR_ANY;
}

/* ask - start the depth query to member mb (no credentials: the client
 * port asks for none); a member that cannot be asked is missing. */
static void
ask(struct gather *g, const struct shm_member *mb, const char *own,
    const char *path_query)
{
    struct peer *p = &g->peer[g->npeers++];
    char url[sizeof("http://") + SHM_STATUS_ADDR_MAX + PATH_QUERY_MAX];
    struct http_client_req r = {
        .method = "GET",
        .url = url,
        .timeout_ms = PEER_TIMEOUT_MS,
        .max_body = PEER_ANSWER_MAX,
    };

    p->g = g;
    snprintf(p->id, sizeof(p->id), "%s", mb->id);
    if (unusable(mb, own) ||
        snprintf(url, sizeof(url), "http://%s%s", mb->addr, path_query) >=
            (int)sizeof(url) ||
        http_client_request(g->w->client, &r, peer_answered, p) != 0) {
        g->missing[g->nmissing++] = p->id;
        return;
    }
    g->waiting++;
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

/* cluster_depth - the scope=cluster answer: this node's share now, the
 * live peers' as they come. */
static void
cluster_depth(struct worker *w, struct http_request *req, struct shm_name queue,
              const struct shm_name *group)
{
    struct shm_status_view v;
    struct gather *g = calloc(1, sizeof(*g));
    char pq[PATH_QUERY_MAX];
    const char *own = "";

    if (g == NULL || path_query(queue, group, pq, sizeof(pq)) != 0) {
        free(g);
        http_reply_errno(req, -ENOMEM, "depth");
        return;
    }
    g->w = w;
    g->req = req;
    http_request_on_done(req, gather_done, g);
    snprintf(g->self, sizeof(g->self), "%s", w->set.node_id);
    g->nodes[g->nnodes++] = g->self;
    if (node_share(w, queue, group, &g->share[0]) == 0)
        g->nshares = 1;
    shm_status_read(w->seg->status, &v);
    for (uint32_t i = 0; i < v.nmembers; i++)
        if (v.members[i].self)
            own = v.members[i].addr;
    for (uint32_t i = 0; i < v.nmembers; i++)
        if (!v.members[i].self && v.members[i].state == SHM_MEMBER_LIVE &&
            strcmp(v.members[i].id, g->self) != 0)
            ask(g, &v.members[i], own, pq);
    if (g->waiting == 0)
        finish(g);
    else
        http_request_suspend(req);
}

void
worker_depth(struct worker *w, struct http_request *req)
{
    const struct http_query *args = http_request_args(req);
    struct http_buf b = {0};
    size_t len, glen = 0;
    const char *name = http_request_param(req, &len);
    const char *group = http_query_get(args, "group", &glen);
    const char *scope = http_query_get(args, "scope", NULL);
    struct shm_name g = {group, glen}, queue = {name, len};

    if (!worker_name_ok(req, "queue", name, len) ||
        (group && glen && !worker_name_ok(req, "group", group, glen)))
        return;
    if (scope && strcmp(scope, "node") != 0 && strcmp(scope, "cluster") != 0) {
        http_reply_error(req, 400, "ephemeral_bad_request",
                         "query parameter 'scope' must be node or cluster");
        return;
    }
    if (scope && strcmp(scope, "cluster") == 0) {
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
