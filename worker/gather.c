/*
 * gather.c - see gather.h.
 */
#include "worker/gather.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http/client.h"
#include "http/query.h"
#include "http/reply.h"
#include "http/request.h"
#include "shm/log.h"
#include "worker/authz.h"
#include "worker/forward.h"
#include "worker/view.h"
#include "worker/worker_int.h"

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

/* peer_answered - one member's share came, or did not; the last one lets
 * the route answer. */
static void
peer_answered(void *arg, struct http_client_resp *r)
{
    struct gather_peer *p = arg;
    struct gather *g = p->g;
    enum gather_share a =
        r->err != 0 ? GATHER_BAD : g->ops->classify(g, r, p->id);

    if (a == GATHER_SHARE) {
        g->share[g->nshares++] = r->body;
        r->body = (struct http_buf){0};
    }
    if (a == GATHER_BAD) {
        (r->err == -EMSGSIZE ? log_warn : log_info)(
            0,
            "member %s is missing from a scope=cluster answer (%s, status %u)",
            p->id, r->err ? r->error : "its answer is not its share",
            r->status);
        g->missing[g->nmissing++] = p->id;
    } else {
        g->nodes[g->nnodes++] = p->id;
    }
    if (--g->waiting == 0) {
        g->ops->finish(g);
        http_request_resume(g->req);
    }
}

/* ask - start the query to member mb, with the request's credentials; a
 * member that cannot be asked is missing.  With
 * g->same, the member gets the request itself (method, URI, body), marked
 * forwarded so that it answers for itself alone. */
static void
ask(struct gather *g, const struct shm_member *mb, const char *own,
    const char *path_query)
{
    struct gather_peer *p = &g->peer[g->npeers++];
    char *authz = NULL;
    const char *headers[] = {FORWARD_HEADER ": 1",
                             "Content-Type: application/json", NULL};
    struct http_client_req r = {
        .method = "GET",
        .port = HTTP_CLIENT_PEER,
        .addr = mb->addr,
        .target = path_query,
        .timeout_ms = GATHER_TIMEOUT_MS,
        .max_body = g->max_body,
    };

    if (g->same) {
        r.method = http_request_method(g->req);
        r.headers = headers;
        r.nheaders = 2;
        r.body = http_request_body(g->req, &r.body_len);
    }
    /* the request's credentials go with it: the member answers for the
     * caller's tenant, as far as the caller may see */
    if (worker_auth_header(g->req, &authz) == 0 && authz != NULL) {
        r.headers = headers;
        headers[r.nheaders++] = authz;
    }
    p->g = g;
    snprintf(p->id, sizeof(p->id), "%s", mb->id);
    if (worker_addr_unusable(mb->addr, own) ||
        http_client_request(g->w->client, &r, peer_answered, p) != 0)
        g->missing[g->nmissing++] = p->id;
    else
        g->waiting++;
    free(authz); /* the client copied it */
}

/* start - gather_start() and gather_start_same(). */
static void
start(struct worker *w, struct http_request *req, struct http_buf *own,
      const char *path_query, size_t max_body, int same,
      const struct gather_ops *ops)
{
    struct shm_board_view v;
    struct gather *g = calloc(1, sizeof(*g));
    const char *self_addr;

    if (g == NULL) {
        http_buf_free(own);
        http_reply_errno(req, -ENOMEM, "gather");
        return;
    }
    g->w = w;
    g->req = req;
    g->ops = ops;
    g->max_body = max_body;
    g->same = same;
    http_request_on_done(req, gather_done, g);
    snprintf(g->self, sizeof(g->self), "%s", w->set.node_id);
    g->nodes[g->nnodes++] = g->self;
    if (own != NULL && own->len > 0)
        g->share[g->nshares++] = *own;
    else
        http_buf_free(own);
    if (own != NULL)
        *own = (struct http_buf){0};
    self_addr = worker_view_read(w, &v);
    for (uint32_t i = 0; i < v.nmembers; i++)
        if (!v.members[i].self && v.members[i].state == SHM_MEMBER_LIVE &&
            strcmp(v.members[i].id, g->self) != 0)
            ask(g, &v.members[i], self_addr, path_query);
    if (g->waiting == 0)
        ops->finish(g); /* not suspended: nothing to resume */
    else
        http_request_suspend(req);
}

/* gather_start - see gather.h. */
void
gather_start(struct worker *w, struct http_request *req, struct http_buf *own,
             const char *path_query, size_t max_body,
             const struct gather_ops *ops)
{
    start(w, req, own, path_query, max_body, 0, ops);
}

/* gather_start_same - see gather.h. */
void
gather_start_same(struct worker *w, struct http_request *req,
                  struct http_buf *own, const struct gather_ops *ops)
{
    start(w, req, own, http_request_uri(req), 0, 1, ops);
}

/* gather_scope - see gather.h. */
int
gather_scope(struct worker *w, struct http_request *req)
{
    const char *scope = http_query_get(http_request_args(req), "scope", NULL);

    if (scope == NULL) /* a member asking for our share always says so */
        return !worker_serves_all(w) &&
               http_request_header(req, FORWARD_HEADER) == NULL;
    if (strcmp(scope, "node") == 0)
        return 0;
    if (strcmp(scope, "cluster") == 0)
        return 1;
    http_reply_error(req, 400, "ephemeral_bad_request",
                     "query parameter 'scope' must be node or cluster");
    return -1;
}

/* gather_shares - see gather.h. */
void
gather_shares(const struct gather *g, struct http_shares *s, const char **body,
              size_t *len)
{
    for (int i = 0; i < g->nshares; i++) {
        body[i] = g->share[i].data;
        len[i] = g->share[i].len;
    }
    *s = (struct http_shares){
        .node = g->self,
        .body = body,
        .len = len,
        .n = g->nshares,
        .nodes = g->nodes,
        .nnodes = g->nnodes,
        .missing = g->missing,
        .nmissing = g->nmissing,
    };
}
