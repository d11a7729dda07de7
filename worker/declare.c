/*
 * declare.c - POST /api/v1/ephemeral/configure and the declared half of
 * DELETE /api/v1/ephemeral/queue/{q}: both go through the raft log, which
 * this node's master runs (master/configure.c answers them there).
 *
 * The worker passes the request to its master's cluster port (signed with
 * the cluster secret, http/sign.h) and relays the answer as it is: the master answers once
 * the entry has committed and been applied on this node, or 503 no_leader /
 * timeout.  The request stays suspended meanwhile.  A master that took the
 * request and then fell silent past MASTER_TIMEOUT_MS (stopped, stalled)
 * is answered 503 timeout: it may have proposed the entry, which then
 * commits whether anyone waits or not.  With tokens on,
 * configure's body is the one a worker rewrites (json-c) before its master
 * sees it: the queue's internal name, tenant prefix included, in place of
 * the client's; the master's answer has the prefix taken out again.
 */
#include "worker/declare.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http/buf.h"
#include "http/client.h"
#include "http/errors.h"
#include "http/parse.h"
#include "http/reply.h"
#include "http/request.h"
#include "worker/authz.h"
#include "worker/worker_int.h"

#define MASTER_TIMEOUT_MS 10000

struct relay {
    struct http_request *req;
    struct http_buf body; /* what we send, when not the request's own */
    char tenant[AUTH_TENANT_MAX + 1]; /* the caller's: the master's answer
                                         names the queue by its internal
                                         name, which the client never sees */
};

/* strip_tenant - drop tenant's prefix of internal names from the JSON
 * text b (as JSON escapes it: the tenant, then \u001f).  The answers of
 * configure and delete carry no payload, so nothing a client wrote can
 * look like one. */
static void
strip_tenant(struct http_buf *b, const char *tenant)
{
    char pat[AUTH_TENANT_MAX + 8];
    size_t n = (size_t)snprintf(pat, sizeof(pat), "%s\\u001f", tenant);
    size_t o = 0;

    if (tenant[0] == '\0' || b->data == NULL)
        return;
    for (size_t i = 0; i < b->len;) {
        if (b->len - i >= n && memcmp(b->data + i, pat, n) == 0) {
            i += n;
            continue;
        }
        b->data[o++] = b->data[i++];
    }
    b->len = o;
}

/* relayed - the master answered (or did not). */
static void
relayed(void *arg, struct http_client_resp *r)
{
    struct relay *x = arg;

    if (r->err != 0 && r->sent && r->err != -EACCES) {
        /* The master took it, and may have proposed it (it leads) or
         * passed it to a leader that did: the outcome is unknown, so not
         * no_leader, which says nothing was proposed. */
        http_reply_error(x->req, 503, "timeout",
                         "this node's master took it and did not answer in "
                         "time (it may yet be applied): %s",
                         r->error);
    } else if (r->err != 0) {
        http_reply_error(x->req, 503, "no_leader",
                         "this node's master did not answer: %s", r->error);
    } else {
        if (r->status >= 500 || r->status == 429)
            http_reply_header(x->req, "Retry-After", "1");
        strip_tenant(&r->body, x->tenant);
        http_reply(x->req, r->status, &r->body);
    }
    http_request_resume(x->req);
    http_buf_free(&x->body);
    free(x);
}

/* to_master - POST body (the request's, or own: taken) to this node's
 * master at path, and relay the answer. */
static void
to_master(struct worker *w, struct http_request *req, const char *path,
          struct http_buf *own)
{
    struct relay *x = calloc(1, sizeof(*x));
    size_t len;
    const char *body = http_request_body(req, &len);
    const char *headers[] = {"Content-Type: application/json"};
    struct http_client_req r = {
        .method = "POST",
        .port = HTTP_CLIENT_CLUSTER,
        .addr = w->set.cluster_addr,
        .target = path,
        .headers = headers,
        .nheaders = 1,
        .body = body,
        .body_len = len,
        .timeout_ms = MASTER_TIMEOUT_MS,
    };

    if (x == NULL) {
        http_buf_free(own);
        http_reply_errno(req, -ENOMEM, "configure");
        return;
    }
    x->req = req;
    snprintf(x->tenant, sizeof(x->tenant), "%s", worker_tenant(w));
    if (own != NULL) {
        x->body = *own;
        *own = (struct http_buf){0};
        r.body = x->body.data;
        r.body_len = x->body.len;
    }
    http_request_suspend(req);
    if (http_client_request(w->client, &r, relayed, x) != 0) {
        struct http_client_resp fail = {.err = -EIO, .error = "no request"};
        relayed(x, &fail);
    }
}

/* worker_configure - see declare.h.  With auth on the worker reads the
 * queue's name first (the admin permission, the tenant); the master
 * parses and validates the options: one parser, one set of errors. */
void
worker_configure(struct worker *w, struct http_request *req)
{
    struct http_configure in;
    struct http_error err;
    struct worker_qname q;
    struct http_buf own = {0};
    size_t len;
    const char *body = http_request_body(req, &len);

    if (!w->auth_on) {
        to_master(w, req, "/cluster/v1/configure", NULL);
        return;
    }
    if (http_parse_configure(body, len, &in, &err) != 0) {
        http_reply_http_error(req, &err);
        return;
    }
    if (http_reply_name_ok(req, "queue", in.queue.ptr, in.queue.len) &&
        worker_authz(w, req, AUTH_ADMIN, "queue",
                     (struct shm_name){in.queue.ptr, in.queue.len}, &q)) {
        if (q.name.len == in.queue.len) /* the empty tenant: as sent */
            to_master(w, req, "/cluster/v1/configure", NULL);
        else if (http_configure_renamed(body, len, q.name.ptr, q.name.len,
                                        &own) == 0)
            to_master(w, req, "/cluster/v1/configure", &own);
        else
            http_reply_errno(req, -ENOMEM, "configure");
    }
    http_buf_free(&own);
    http_configure_free(&in);
}

/* worker_declare_delete - see declare.h.  Every node drops the queue's
 * contents when the deletion applies. */
void
worker_declare_delete(struct worker *w, struct http_request *req, const char *q,
                      size_t len)
{
    struct http_buf b = {0};

    http_buf_append_str(&b, "{\"queue\":");
    http_buf_append_json_str(&b, q, len);
    http_buf_append_str(&b, "}");
    to_master(w, req, "/cluster/v1/delete", &b);
}
